/* agent_world.h: shared set-up for the agent's tests: a copy of the fixture
 * world (calendar, mail, config) in a temporary HEARTH_HOME, with the tool
 * registry, policy, audit log and memory open on it; a tiny model's shape. */
#ifndef HX_TEST_AGENT_WORLD_H
#define HX_TEST_AGENT_WORLD_H

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/sim.h"
#include "modelfile/modelfile.h"

typedef struct world {
    char dir[256];   /* the temporary HEARTH_HOME */
    char audit[300]; /* audit log path */
    hx_config *cfg;
    hx_tools *reg;
    hx_memory *mem;
    struct hx_policy *policy;
    struct hx_audit *log;
    struct hx_consent *consent;
    hx_dg_validator *valid; /* world_args_valid's, made on first use */
} world;

/* Copies tests/fixtures/world into the new directory dir (NULL: a fresh
 * temporary one) and opens it all. yes/no/allow_tainted: the
 * non-interactive consent. 0 on failure. A fixed dir makes runs that
 * print their paths (tool results) alike token for token. */
static int world_open_at(world *w, const char *dir, int yes, int no, int allow_tainted)
{
    memset(w, 0, sizeof *w);
    snprintf(w->dir, sizeof w->dir, "%s", dir ? dir : "/tmp/hx_agent_XXXXXX");
    if (dir ? mkdir(w->dir, 0700) != 0 : !mkdtemp(w->dir)) return 0;
    setenv("HEARTH_HOME", w->dir, 1);
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    char cmd[600], cfg[300], db[300];
    snprintf(cmd, sizeof cmd, "cp -r tests/fixtures/world '%s/world' && mkdir -p '%s/world/files'",
             w->dir, w->dir);
    if (system(cmd) != 0) return 0;
    snprintf(cfg, sizeof cfg, "%s/world/config.json", w->dir);
    snprintf(db, sizeof db, "%s/memory.db", w->dir);
    snprintf(w->audit, sizeof w->audit, "%s/audit.jsonl", w->dir);
    hx_err err = {0};
    hx_memory_params mp = hx_memory_default_params();
    mp.path = db;
    mp.sync_full = 0;
    if (hx_config_load(cfg, &w->cfg, &err) || !(w->reg = hx_tools_new(w->cfg)) ||
        hx_tools_register_builtins(w->reg, &err) || hx_memory_open(&mp, &w->mem, &err) ||
        hx_agent_register_memory_tools(w->reg, w->mem, &err) ||
        hx_agent_policy_open(cJSON_GetObjectItem(w->cfg->raw, "policy"), w->audit, &w->policy,
                             &w->log, &err)) {
        printf("# world: %s\n", err.msg);
        return 0;
    }
    w->consent = hx_consent_new(yes, no, allow_tainted, NULL, NULL);
    return w->consent != NULL;
}

__attribute__((unused)) static int world_open(world *w, int yes, int no, int allow_tainted)
{
    return world_open_at(w, NULL, yes, no, allow_tainted);
}

static void world_close(world *w)
{
    char cmd[400];
    hx_agent_policy_close(w->policy, w->log);
    hx_dg_validator_free(w->valid);
    free(w->consent);
    hx_memory_close(w->mem);
    hx_tools_free(w->reg);
    hx_config_free(w->cfg);
    if (w->dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", w->dir);
        if (system(cmd)) {}
    }
}

/* Whether args are valid for the tool name against its real schema (not
 * the compact one): the datagen validator (sim/dgrun.c) over the world's
 * tools. */
__attribute__((unused)) static int world_args_valid(world *w, const char *name,
                                                    const cJSON *args)
{
    char why[300];
    if (!w->valid) {
        hx_tool_spec *specs;
        hx_err err = {0};
        int n = hx_agent_tool_specs(w->reg, NULL, NULL, &specs);
        w->valid = n < 0 ? NULL : hx_dg_validator_for(specs, n, &err);
        free(specs);
        if (!w->valid) printf("# validator: %s\n", err.msg);
    }
    return w->valid && hx_dg_call_valid(w->valid, name, args, why, sizeof why);
}

__attribute__((unused)) static hx_planner_deps world_deps(world *w, hx_source *src)
{
    hx_planner_deps d = {src, w->reg, NULL, w->policy, w->log, w->mem, w->consent};
    return d;
}

/* The shape of the agent tests' tiny random models (hx_mkmodel_write):
 * n_layer layers 64 wide, two heads of 32 sharing one KV head, an FFN of
 * 128, the output tied to the embeddings, over the vocabulary file vocab. */
__attribute__((unused)) static hx_mkmodel_params tiny_model_params(const char *arch,
                                                                   const char *vocab,
                                                                   int n_layer)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = arch;
    p.vocab_path = vocab;
    p.n_layer = n_layer;
    p.n_embd = 64;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = 32;
    p.n_ff = 128;
    p.tied_output = 1;
    return p;
}

/* Counts the lines of a file that contain all of a and b (b may be NULL). */
__attribute__((unused)) static int count_lines(const char *path, const char *a, const char *b)
{
    char *s = NULL;
    size_t n;
    int c = 0;
    if (hx_read_file(path, 0, &s, &n, NULL)) return 0;
    for (char *l = strtok(s, "\n"); l; l = strtok(NULL, "\n"))
        c += strstr(l, a) && (!b || strstr(l, b));
    free(s);
    return c;
}

#endif
