/* cmd_doctor.c: `hearth doctor`: checks the whole setup (configuration and
 * its folders, model, sandbox, memory database, adapters, registered
 * tools) and says what is wrong and how to fix it. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "lora/lora.h"
#include "sandbox/sandbox.h"

/* The checks' findings: one object per finding, and whether any failed. */
typedef struct report {
    cJSON *items;
    int failed;
} report;

/* Adds a finding: status "ok", "warn" or "fail"; fix may be NULL. */
static void note(report *r, const char *check, const char *status, const char *fix,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void note(report *r, const char *check, const char *status, const char *fix,
                 const char *fmt, ...)
{
    char detail[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "check", check);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddStringToObject(o, "detail", detail);
    if (fix) cJSON_AddStringToObject(o, "fix", fix);
    cJSON_AddItemToArray(r->items, o);
    r->failed |= !strcmp(status, "fail");
}

/* Each line of text (hx_config_check's problems) as a failed finding. */
static void note_lines(report *r, const char *check, const char *text)
{
    for (const char *l = text; l && *l;) {
        size_t n = strcspn(l, "\n");
        note(r, check, "fail", NULL, "%.*s", (int)n, l);
        l += n + (l[n] == '\n');
    }
}

static hx_config *check_config(report *r, const char *path)
{
    hx_config *c = NULL;
    hx_err err = {0};
    if (hx_config_load(path, &c, &err)) {
        note(r, "config", "fail", "fix that line, or move the file away and run 'hearth init'",
             "%s", err.msg);
        return NULL;
    }
    hx_buf b;
    hx_buf_init(&b);
    if (!hx_config_check(c, &b)) note(r, "config", "ok", NULL, "%s", c->path);
    note_lines(r, "config", b.data);
    hx_buf_free(&b);
    if (!c->missing && (!*c->user_name || !*c->user_email))
        note(r, "config", "warn", "set \"user\": {\"name\", \"email\"} in config.json",
             "your %s is not set: invitations and mail go out without it",
             !*c->user_name ? "name" : "mail address");
    return c;
}

static hx_model *check_model(report *r, const char *opt, const hx_config *c)
{
    char buf[PATH_MAX + 64];
    const char *path = hx_cli_find_model(opt, c, buf, sizeof buf);
    if (!path) {
        note(r, "model", "fail", NULL, "%s", CLI_NO_MODEL);
        return NULL;
    }
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    hx_err err = {0};
    if (hx_model_load(path, &mp, &m, &err)) {
        note(r, "model", "fail", "pass a GGUF model with --model, or set \"model\" in config.json",
             "%s", err.msg);
        return NULL;
    }
    const hx_hparams *hp = hx_model_hparams(m);
    note(r, "model", "ok", NULL, "%s (%d layers, trained context %d)", path, hp->n_layer,
         hp->n_ctx_train);
    return m;
}

static void check_sandbox(report *r)
{
    char buf[256];
    unsigned have = hx_sandbox_available();
    static const struct {
        unsigned bit;
        const char *what;
    } need[] = {{HX_SB_LANDLOCK, "Landlock (files confined to the listed folders)"},
                {HX_SB_SECCOMP, "seccomp (no network sockets, no ptrace)"}};
    note(r, "sandbox", "ok", NULL, "registered tools run confined: %s",
         hx_sandbox_describe(have, buf, sizeof buf));
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!(have & need[i].bit))
            note(r, "sandbox", "warn", "use a kernel built with it (Linux 5.13 or later for "
                 "Landlock), and no HEARTH_SANDBOX_DISABLE",
                 "this kernel does not offer %s", need[i].what);
}

static void check_memory(report *r)
{
    char dir[4096], path[4200];
    if (hx_path_data(dir, sizeof dir) < 0) return;
    snprintf(path, sizeof path, "%s/memory.db", dir);
    if (access(path, F_OK)) {
        note(r, "memory", "ok", NULL, "%s: not created yet (the first 'hearth ask' does)", path);
        return;
    }
    hx_memory *m = NULL;
    hx_memory_params mp = hx_memory_default_params();
    hx_err err = {0};
    if (hx_memory_open(&mp, &m, &err) || hx_memory_check(m, &err))
        note(r, "memory", "fail", "move the file away (the next run starts a new one), or run "
             "'hearth ask --no-memory' meanwhile", "%s", err.msg);
    else
        note(r, "memory", "ok", NULL, "%s: %lld memories, %lld episodes", path,
             (long long)hx_memory_count(m), (long long)hx_memory_episode_count(m));
    hx_memory_close(m);
}

static void check_adapters(report *r, const hx_model *m)
{
    hx_lora_store *s = NULL;
    hx_lora_use use[HX_ADAPTER_MAX];
    hx_adapter *ads[HX_ADAPTER_MAX];
    float scales[HX_ADAPTER_MAX];
    int n = 0;
    hx_err err = {0};
    int rc = hx_lora_store_open(NULL, &s, &err);
    if (!rc) rc = hx_lora_store_active(s, use, &n, &err);
    if (!rc && n && m && !(rc = hx_lora_store_load_active(s, m, ads, scales, &n, &err)))
        for (int i = 0; i < n; i++) hx_adapter_free(ads[i]);
    if (rc)
        note(r, "adapters", "fail", "'hearth lora rollback', or 'hearth lora use --none'",
             "%s", err.msg);
    else
        note(r, "adapters", "ok", NULL, "%d active%s", n,
             n && !m ? " (not checked against a model: none loaded)" : "");
    hx_lora_store_free(s);
}

static void check_tools(report *r, const hx_config *c)
{
    hx_tools *reg = hx_tools_new(c);
    hx_extools *x = NULL;
    hx_buf problems;
    hx_err err = {0};
    hx_buf_init(&problems);
    if (!reg || hx_tools_register_builtins(reg, &err) ||
        hx_extools_load(reg, NULL, &x, &problems, &err))
        note(r, "tools", "fail", NULL, "%s", reg ? err.msg : "out of memory");
    else if (!problems.len)
        note(r, "tools", "ok", NULL, "%d tools built in and registered, and the memory tools",
             hx_tools_count(reg));
    for (const char *l = problems.data; l && *l;) {
        size_t n = strcspn(l, "\n");
        note(r, "tools", "fail", "fix the manifest, or 'hearth tools remove NAME'", "%.*s",
             (int)n, l + strspn(l, " "));
        l += n + (l[n] == '\n');
    }
    hx_buf_free(&problems);
    hx_extools_free(x);
    hx_tools_free(reg);
}

static void print_report(const report *r)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, r->items)
    {
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(it, "status"));
        const char *fix = cJSON_GetStringValue(cJSON_GetObjectItem(it, "fix"));
        printf("%-4s  %-8s  %s\n", st, cJSON_GetStringValue(cJSON_GetObjectItem(it, "check")),
               cJSON_GetStringValue(cJSON_GetObjectItem(it, "detail")));
        if (fix) printf("                fix: %s\n", fix);
    }
    printf(r->failed ? "\nsomething is wrong: see the lines marked fail\n"
                     : "\nall is well\n");
}

static void doctor_usage(FILE *f)
{
    fprintf(f, "usage: hearth doctor [--config PATH] [--model FILE] [--json]\n\n"
               "Checks the whole setup: the configuration and the folders it names,\n"
               "the model, the sandbox mechanisms this kernel offers, the memory\n"
               "database, the active adapters and the registered tools; prints each\n"
               "finding (ok, warn, fail) and how to fix what is wrong. --json prints\n"
               "{\"ok\": BOOL, \"checks\": [{\"check\", \"status\", \"detail\", \"fix\"}]}.\n"
               "Exit codes: 0 nothing failed, 1 something failed, 2 bad command line.\n");
}

int hx_cmd_doctor(int argc, char **argv)
{
    const char *config = NULL, *model = NULL;
    int json = 0;
    if (hx_cli_wants_help(argc, argv)) return doctor_usage(stdout), HX_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) json = 1;
        else if ((!strcmp(a, "--config") || !strcmp(a, "--model") || !strcmp(a, "-m")) &&
                 i + 1 < argc)
            *(!strcmp(a, "--config") ? &config : &model) = argv[++i];
        else return hx_cli_bad_word("doctor", a[0] == '-' ? "option" : "argument", a);
    }
    report r = {cJSON_CreateArray(), 0};
    if (!r.items) return HX_EXIT_FAIL;
    hx_config *c = check_config(&r, config);
    hx_model *m = check_model(&r, model, c);
    check_sandbox(&r);
    check_memory(&r);
    check_adapters(&r, m);
    if (c) check_tools(&r, c);
    hx_model_free(m);
    hx_config_free(c);
    int ex = r.failed ? HX_EXIT_FAIL : HX_EXIT_OK;
    if (!json) {
        print_report(&r);
        cJSON_Delete(r.items);
        return ex;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", !r.failed);
    cJSON_AddItemToObject(o, "checks", r.items);
    return hx_cli_json_out(o) ? HX_EXIT_FAIL : ex;
}
