/* dgrun.c: running generated tasks through the real planner in their
 * worlds, checking the trajectories, and writing them out (hearth datagen). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/sim.h"

/* ---- worlds opened for runs ---- */

/* The world's HEARTH_HOME and HEARTH_NOW for its tools; the caller's
 * values are kept in dw for hx_dg_world_close. */
static void env_enter(hx_dg_world *dw)
{
    const char *h = getenv("HEARTH_HOME"), *n = getenv("HEARTH_NOW");
    dw->saved_home = h ? hx_strdup(h) : NULL;
    dw->saved_now = n ? hx_strdup(n) : NULL;
    dw->env_set = 1;
    setenv("HEARTH_HOME", dw->home, 1);
    setenv("HEARTH_NOW", dw->w.now_iso, 1);
}

static void env_put(const char *name, char **value)
{
    if (*value) setenv(name, *value, 1);
    else unsetenv(name);
    free(*value);
    *value = NULL;
}

static void env_leave(hx_dg_world *dw)
{
    if (!dw->env_set) return;
    env_put("HEARTH_HOME", &dw->saved_home);
    env_put("HEARTH_NOW", &dw->saved_now);
    dw->env_set = 0;
}

int hx_dg_world_open(uint64_t seed, int split, unsigned flags, const char *home, hx_dg_world *dw,
                     hx_err *err)
{
    hx_world *w = hx_calloc(1, sizeof *w);
    if (!w) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = hx_world_generate(seed, split, flags, w, err);
    if (!rc) rc = hx_dg_world_open_w(w, home, dw, err);
    else memset(dw, 0, sizeof *dw);
    free(w);
    return rc;
}

int hx_dg_world_open_w(const hx_world *w, const char *home, hx_dg_world *dw, hx_err *err)
{
    memset(dw, 0, sizeof *dw);
    snprintf(dw->home, sizeof dw->home, "%s", home);
    dw->w = *w;
    int rc = hx_world_write(&dw->w, home, err);
    if (!rc) rc = hx_dg_world_open_written(dw, err);
    return rc ? rc : hx_world_seed_memory(&dw->w, dw->mem, err);
}

int hx_dg_world_open_written(hx_dg_world *dw, hx_err *err)
{
    char cfg[600], db[600];
    int rc;
    env_enter(dw);
    snprintf(cfg, sizeof cfg, "%s/config/config.json", dw->home);
    snprintf(db, sizeof db, "%s/data/memory.db", dw->home);
    hx_memory_params mp = hx_memory_default_params();
    mp.path = db;
    mp.sync_full = 0;
    if ((rc = hx_config_load(cfg, &dw->cfg, err))) return rc;
    if (!(dw->reg = hx_tools_new(dw->cfg))) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if ((rc = hx_tools_register_builtins(dw->reg, err)) || (rc = hx_memory_open(&mp, &dw->mem, err)))
        return rc;
    return hx_agent_register_memory_tools(dw->reg, dw->mem, err);
}

void hx_dg_world_close(hx_dg_world *dw)
{
    hx_tools_free(dw->reg);
    hx_memory_close(dw->mem);
    hx_config_free(dw->cfg);
    dw->reg = NULL;
    dw->mem = NULL;
    dw->cfg = NULL;
    env_leave(dw);
}

/* A task's run: the model's turns with src, or with tool (not NULL) the
 * tool tier's call tool(args) and no model. */
static int run_task(hx_dg_world *dw, const cJSON *task, hx_source *src, hx_planner **plp,
                    const hx_planner_params *params, const char *tool, const cJSON *args,
                    cJSON **trace, hx_err *err)
{
    struct hx_policy *policy = NULL;
    struct hx_audit *audit = NULL;
    const char *now = cJSON_GetStringValue(cJSON_GetObjectItem(task, "now"));
    const char *consent = cJSON_GetStringValue(cJSON_GetObjectItem(task, "consent"));
    const cJSON *pol = cJSON_GetObjectItem(task, "policy");
    *trace = NULL;
    if (now) setenv("HEARTH_NOW", now, 1);
    int rc = hx_agent_policy_open(cJSON_IsObject(pol) ? pol : NULL, NULL, &policy, &audit, err);
    if (rc) return rc;
    int no = consent && !strcmp(consent, "no");
    struct hx_consent *c = hx_consent_new(!no, no, 0, NULL, NULL);
    hx_planner_params pp = params ? *params : hx_dg_planner_params(HX_TPL_COMPACT);
    pp.model = src->name;
    hx_planner_deps d = {src, dw->reg, NULL, policy, audit, dw->mem, c};
    hx_planner *pl = c ? hx_planner_new(&d, &pp) : NULL;
    if (plp) *plp = pl;
    if (!pl) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    else if (tool)
        rc = hx_planner_run_call(pl, cJSON_GetStringValue(cJSON_GetObjectItem(task, "request")),
                                 tool, args, NULL, trace, err);
    else rc = hx_planner_run(pl, cJSON_GetStringValue(cJSON_GetObjectItem(task, "request")), NULL,
                             trace, err);
    if (plp) *plp = NULL;
    hx_planner_free(pl);
    free(c);
    hx_agent_policy_close(policy, audit);
    return rc;
}

int hx_dg_run(hx_dg_world *dw, const cJSON *task, hx_source *src, hx_planner **plp,
              const hx_planner_params *params, cJSON **trace, hx_err *err)
{
    return run_task(dw, task, src, plp, params, NULL, NULL, trace, err);
}

int hx_dg_run_call(hx_dg_world *dw, const cJSON *task, const char *tool, const cJSON *args,
                   cJSON **trace, hx_err *err)
{
    hx_source none = {.name = "none (governor.tool_tier)"};
    return run_task(dw, task, &none, NULL, NULL, tool, args, trace, err);
}

/* ---- a model's source, as hearth ask makes it (cli/cmd_ask.c
 * open_model: compact bounds, repeat penalty and context for the compact
 * style) ---- */
int hx_dg_engine_source(hx_model *m, const hx_tools *reg, int family, int n_threads,
                        hx_source *out, hx_err *err)
{
    hx_dg_eval_run o = {m, family, n_threads, 0, NULL, NULL, 0, 0, NULL, 0, NULL, 0};
    return hx_dg_engine_source_run(&o, reg, out, err);
}

int hx_dg_engine_source_run(const hx_dg_eval_run *o, const hx_tools *reg, hx_source *out,
                            hx_err *err)
{
    hx_model *m = o->model;
    hx_tool_spec *specs;
    int k = hx_agent_tool_specs(reg, NULL, NULL, &specs);
    if (k < 0) {
        free(specs);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    hx_source_engine_params ep = hx_source_engine_default_params();
    hx_source_engine_style(&ep, o->family, m);
    ep.n_threads = o->n_threads;
    ep.adapters = o->adapters, ep.adapter_scales = o->scales, ep.n_adapters = o->n_adapters;
    ep.plain_decode = o->plain_decode;
    ep.spec_memo = o->spec_memo;
    if (o->copy_bias != 0) ep.copy_bias = o->copy_bias > 0 ? o->copy_bias : 0;
    int rc = hx_source_engine_new(m, specs, k, &ep, out, err);
    free(specs);
    return rc;
}

int hx_dg_task_world(const cJSON *task, const char *home, hx_dg_world *dw, hx_err *err)
{
    memset(dw, 0, sizeof *dw); /* closed safely after a bad task too */
    const char *seed = cJSON_GetStringValue(cJSON_GetObjectItem(task, "world_seed"));
    const char *split = cJSON_GetStringValue(cJSON_GetObjectItem(task, "split"));
    if (!seed || !split) return hx_err_set(err, HX_ERR_FORMAT, "the task has no world_seed or split");
    if (!*seed || strspn(seed, "0123456789") != strlen(seed))
        return hx_err_set(err, HX_ERR_FORMAT, "the task's world_seed '%.40s' is not a decimal number", seed);
    if (strcmp(split, "train") && strcmp(split, "heldout"))
        return hx_err_set(err, HX_ERR_FORMAT, "the task's split '%.40s' is not train or heldout", split);
    return hx_dg_world_open(strtoull(seed, NULL, 10),
                            strcmp(split, "heldout") ? HX_SPLIT_TRAIN : HX_SPLIT_HELDOUT, 0, home, dw, err);
}

cJSON *hx_dg_eval_record(const cJSON *task, const cJSON *trace, int pass, const char *why)
{
    cJSON *r = cJSON_CreateObject(), *calls = cJSON_CreateArray();
    const char *keys[] = {"id", "category", "kind", "request"};
    for (int i = 0; i < 4; i++) cJSON_AddItemToObject(r, keys[i], cJSON_Duplicate(cJSON_GetObjectItem(task, keys[i]), 1));
    cJSON_AddBoolToObject(r, "pass", pass);
    cJSON_AddStringToObject(r, "reason", why);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(trace, "calls"))
    {
        cJSON *o = cJSON_CreateObject();
        const char *k2[] = {"name", "arguments", "status"};
        for (int i = 0; i < 3; i++) cJSON_AddItemToObject(o, k2[i], cJSON_Duplicate(cJSON_GetObjectItem(c, k2[i]), 1));
        cJSON_AddItemToArray(calls, o);
    }
    cJSON_AddItemToObject(r, "calls", calls);
    cJSON_AddItemToObject(r, "not_run", cJSON_Duplicate(cJSON_GetObjectItem(trace, "not_run"), 1));
    const char *k3[] = {"answer", "status", "steps", "tokens", "seconds"};
    for (int i = 0; i < 5; i++) cJSON_AddItemToObject(r, k3[i], cJSON_Duplicate(cJSON_GetObjectItem(trace, k3[i]), 1));
    const int faithful = hx_dg_answer_faithful(task, trace);
    if (faithful >= 0) cJSON_AddBoolToObject(r, "answer_ok", faithful);
    return r;
}

/* ---- the readable transcript (agent-eval --trace) ---- */
static const char *jstr(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

static void put_json(FILE *f, const char *lead, const cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    fprintf(f, "%s%s\n", lead, s ? s : "null");
    cJSON_free(s);
}

/* The episode's messages after the constant system text; the k-th tool
 * message is the k-th call of the trace (the planner adds one per call). */
static void put_messages(FILE *f, const cJSON *trace)
{
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(trace, "messages"), 1);
    const cJSON *call = cJSON_GetObjectItem(trace, "calls") ? cJSON_GetObjectItem(trace, "calls")->child : NULL;
    for (; m; m = m->next) {
        const char *role = jstr(m, "role");
        if (!strcmp(role, "tool")) {
            fprintf(f, "  [tool %s: %s] %s\n", jstr(m, "name"), call ? jstr(call, "status") : "?",
                    jstr(m, "content"));
            if (call) call = call->next;
            continue;
        }
        fprintf(f, "  [%s] %s\n", role, jstr(m, "content"));
        const cJSON *tc;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(m, "tool_calls")) put_json(f, "    call ", cJSON_GetObjectItem(tc, "function"));
    }
}

void hx_dg_transcript_run(FILE *f, const cJSON *trace)
{
    const cJSON *e;
    put_messages(f, trace);
    if (cJSON_GetObjectItem(trace, "partial_turn")) fprintf(f, "  [cut turn] %s\n", jstr(trace, "partial_turn"));
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(trace, "not_run")) put_json(f, "  not run: ", e);
    fprintf(f, "  status: %s, %d steps, %d tokens\n", jstr(trace, "status"),
            (int)cJSON_GetNumberValue(cJSON_GetObjectItem(trace, "steps")),
            (int)cJSON_GetNumberValue(cJSON_GetObjectItem(trace, "tokens")));
}

void hx_dg_transcript(FILE *f, const cJSON *task, const cJSON *trace, int pass, const char *why)
{
    const cJSON *e, *calls = cJSON_GetObjectItem(cJSON_GetObjectItem(task, "expect"), "calls");
    fprintf(f, "=== %s %s/%s %s: %s\n", jstr(task, "id"), jstr(task, "category"), jstr(task, "kind"),
            pass ? "PASS" : "FAIL", why ? why : "");
    fprintf(f, "  request: %s\n  world %s (%s), now %s\n", jstr(task, "request"), jstr(task, "world_seed"),
            jstr(task, "split"), jstr(task, "now"));
    put_json(f, "  slots: ", cJSON_GetObjectItem(task, "slots"));
    if (trace) hx_dg_transcript_run(f, trace);
    cJSON_ArrayForEach(e, calls)
    {
        fprintf(f, "  expected %s ", jstr(e, "name"));
        put_json(f, "", cJSON_GetObjectItem(e, "arguments"));
        if (e == calls->child) fprintf(f, "    -> %s\n", jstr(e, "result"));
    }
    fprintf(f, "  expected answer: %s\n\n", jstr(cJSON_GetObjectItem(task, "expect"), "answer"));
}

hx_planner_params hx_dg_planner_params(int family)
{
    hx_planner_params pp = hx_planner_default_params();
    pp.family = family;
    return pp;
}

hx_planner_params hx_dg_eval_params(const hx_dg_eval_run *o)
{
    hx_planner_params pp = hx_dg_planner_params(o->family);
    pp.answer = o->answer ? o->answer - 1 : hx_agent_answer_for(o->family, o->model);
    return pp;
}

/* ---- call validation ---- */
struct hx_dg_validator {
    hx_grammar *g; /* every tool's call, any JSON whitespace */
    hx_matcher *m;
};

hx_dg_validator *hx_dg_validator_for(const hx_tool_spec *specs, int n, hx_err *err)
{
    hx_dg_validator *v = hx_calloc(1, sizeof *v);
    hx_grammar_params gp = hx_grammar_default_params();
    int rc = !v ? hx_err_set(err, HX_ERR_NOMEM, "out of memory")
                : hx_grammar_tool_calls(specs, n, HX_TOOLS_REQUIRED, &gp, &v->g, err);
    if (!rc && !(v->m = hx_matcher_new(v->g, NULL))) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (rc) {
        hx_dg_validator_free(v);
        return NULL;
    }
    return v;
}

hx_dg_validator *hx_dg_validator_new(const cJSON *tools, hx_err *err)
{
    int n = cJSON_GetArraySize(tools), k = 0;
    hx_tool_spec *specs = hx_calloc((size_t)(n ? n : 1), sizeof *specs);
    char **schemas = hx_calloc((size_t)(n ? n : 1), sizeof *schemas);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *fn = cJSON_GetObjectItem(t, "function");
        if (!specs || !schemas) break;
        schemas[k] = cJSON_PrintUnformatted(cJSON_GetObjectItem(fn, "parameters"));
        specs[k] = (hx_tool_spec){cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name")), schemas[k]};
        k++;
    }
    hx_dg_validator *v = NULL;
    if (!specs || !schemas) hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    else v = hx_dg_validator_for(specs, k, err);
    for (int i = 0; i < k; i++) cJSON_free(schemas[i]);
    free(schemas);
    free(specs);
    return v;
}

void hx_dg_validator_free(hx_dg_validator *v)
{
    if (!v) return;
    hx_matcher_free(v->m);
    hx_grammar_free(v->g);
    free(v);
}

/* What the compact decoding of agent/source.c can write: strings of at
 * most 40 bytes, integers from its round values, arrays of at most 3. */
int hx_dg_call_compact(const cJSON *j, char *why, size_t n)
{
    static const int round_values[] = {0, 1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120};
    if (cJSON_IsString(j) && strlen(j->valuestring) > 40)
        return snprintf(why, n, "string longer than 40 bytes: %.60s", j->valuestring), 0;
    if (cJSON_IsNumber(j)) {
        int ok = 0;
        for (size_t i = 0; i < sizeof round_values / sizeof *round_values; i++)
            ok |= j->valuedouble == round_values[i];
        if (!ok) return snprintf(why, n, "number %g is not a round value", j->valuedouble), 0;
    }
    if (cJSON_IsArray(j) && cJSON_GetArraySize(j) > 3)
        return snprintf(why, n, "array of more than 3 items"), 0;
    for (const cJSON *c = j->child; c; c = c->next)
        if (!hx_dg_call_compact(c, why, n)) return 0;
    return 1;
}

int hx_dg_call_valid(hx_dg_validator *v, const char *name, const cJSON *args, char *why, size_t n)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, HX_TOOL_CALL_OPEN "{\"name\": \"%s\", \"arguments\": ", name);
    hx_json_py(args, 0, &b);
    hx_buf_puts(&b, "}" HX_TOOL_CALL_CLOSE);
    hx_matcher_reset(v->m);
    int ok = b.data && hx_matcher_feed(v->m, b.data, b.len) == HX_OK && hx_matcher_can_end(v->m);
    if (!ok) snprintf(why, n, "%s: not valid against its schema: %.200s", name, b.data ? b.data : "");
    hx_buf_free(&b);
    return ok;
}

/* ---- verification of an oracle trajectory ---- */
/* A call the taint rule refused: in the error category, the failure a
 * tool would have given comes so when the conversation holds someone
 * else's words (cancelling a meeting another organised, once listed). */
static int taint_refused(const cJSON *c)
{
    const char *by = cJSON_GetStringValue(cJSON_GetObjectItem(c, "by"));
    return by && !strncmp(by, "taint rule", 10);
}

static int calls_ok(const cJSON *task, const cJSON *trace, hx_dg_validator *v, char *why, size_t n)
{
    const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(task, "category"));
    int errors = 0, refused = 0, i = 0, total = cJSON_GetArraySize(cJSON_GetObjectItem(trace, "calls"));
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(trace, "calls"))
    {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
        const cJSON *args = cJSON_GetObjectItem(c, "arguments");
        if (!hx_dg_call_valid(v, name ? name : "", args, why, n) || !hx_dg_call_compact(args, why, n))
            return 0;
        int failed = !strcmp(st, "error") || (!strcmp(st, "refused") && taint_refused(c));
        errors += failed;
        refused += !strcmp(st, "refused");
        i++;
        if (!strcmp(st, "ok")) continue;
        if (!strcmp(st, "refused") && !strcmp(cat, "refusal") && i == total) continue;
        if (failed && !strcmp(cat, "error")) continue;
        return snprintf(why, n, "call %s: %s: %.200s", name, st,
                        cJSON_GetStringValue(cJSON_GetObjectItem(c, "result"))), 0;
    }
    if (!strcmp(cat, "refusal") && !refused) return snprintf(why, n, "no call was refused"), 0;
    if (!strcmp(cat, "error") && !errors) return snprintf(why, n, "no call failed"), 0;
    if (!strcmp(cat, "none") && total) return snprintf(why, n, "a call in a no-call request"), 0;
    if (strcmp(cat, "none") && !total) return snprintf(why, n, "no call"), 0;
    return 1;
}

static int rendering_ok(const cJSON *trace, const hx_source *oracle, const cJSON *tools, char *why,
                        size_t n)
{
    hx_buf full;
    hx_buf_init(&full);
    hx_tpl_opts o = hx_tpl_default_opts();
    o.add_generation_prompt = 0;
    hx_tpl_render(HX_TPL_COMPACT, cJSON_GetObjectItem(trace, "messages"), tools, &o, &full);
    const char **prompts;
    int np = hx_dg_oracle_prompts(oracle, &prompts), ok = full.data != NULL;
    for (int i = 0; ok && i < np; i++)
        if (strncmp(full.data, prompts[i], strlen(prompts[i]))) {
            snprintf(why, n, "the rendered conversation does not extend prompt %d", i);
            ok = 0;
        }
    hx_buf_free(&full);
    return ok;
}

int hx_dg_verify(const cJSON *task, const cJSON *trace, const hx_source *oracle, hx_dg_validator *v,
                 const cJSON *tools, char *why, size_t n)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(trace, "status"));
    const char *ans = cJSON_GetStringValue(cJSON_GetObjectItem(trace, "answer"));
    if (hx_dg_oracle_failed(oracle)) return snprintf(why, n, "oracle: %s", hx_dg_oracle_failed(oracle)), 0;
    if (!st || strcmp(st, "answered")) return snprintf(why, n, "not answered: %s", st ? st : "?"), 0;
    if (!ans || !*ans || strchr(ans, '\n')) return snprintf(why, n, "the answer is not one line"), 0;
    return calls_ok(task, trace, v, why, n) && rendering_ok(trace, oracle, tools, why, n);
}

/* ---- hearth datagen ---- */
hx_dg_params hx_dg_default_params(void)
{
    hx_dg_params p = {HX_SPLIT_TRAIN, 1, 1000, 8, -1, 0, NULL, -1, 0};
    return p;
}

static uint64_t mix64(uint64_t a, uint64_t b)
{
    hx_rng r;
    hx_rng_seed(&r, a, b);
    return hx_rng_next(&r);
}

static void write_line(FILE *out, cJSON *j, hx_dg_stats *st)
{
    char *s = cJSON_PrintUnformatted(j);
    if (s) {
        fputs(s, out);
        fputc('\n', out);
        st->chars += (long)strlen(s);
    }
    cJSON_free(s);
}

/* Marks the assistant messages of the oracle's deliberate slips (bit k:
 * the k-th assistant message) "loss": false: the model sees them in
 * context but does not learn to make them. */
static void mark_mistakes(cJSON *messages, unsigned mistakes)
{
    int k = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
        if (!role || strcmp(role, "assistant")) continue;
        if (k < 32 && (mistakes >> k & 1)) cJSON_AddFalseToObject(m, "loss");
        k++;
    }
}

/* The record written for a verified run. */
static cJSON *record(const hx_dg_params *p, cJSON *task, const cJSON *trace, const cJSON *tools,
                     const char *id, unsigned mistakes)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "split", p->split == HX_SPLIT_TRAIN ? "train" : "heldout");
    cJSON_AddItemToObject(j, "category", cJSON_Duplicate(cJSON_GetObjectItem(task, "category"), 1));
    cJSON_AddItemToObject(j, "kind", cJSON_Duplicate(cJSON_GetObjectItem(task, "kind"), 1));
    if (p->tasks) {
        cJSON *t = cJSON_Duplicate(task, 1);
        cJSON_AddStringToObject(t, "id", id);
        cJSON *ex = cJSON_AddObjectToObject(t, "expect");
        cJSON_AddItemToObject(ex, "calls", cJSON_Duplicate(cJSON_GetObjectItem(trace, "calls"), 1));
        cJSON_AddItemToObject(ex, "answer", cJSON_Duplicate(cJSON_GetObjectItem(trace, "answer"), 1));
        cJSON_Delete(j);
        return t;
    }
    cJSON *msgs = cJSON_Duplicate(cJSON_GetObjectItem(trace, "messages"), 1);
    mark_mistakes(msgs, mistakes);
    cJSON_AddItemToObject(j, "messages", msgs);
    cJSON_AddItemToObject(j, "tools", cJSON_Duplicate(tools, 1));
    cJSON_AddStringToObject(j, "style", "compact");
    return j;
}

/* One task in an open world: run the oracle, verify, write. */
static int one(const hx_dg_params *p, hx_dg_world *dw, cJSON *task, const cJSON *tools,
               hx_dg_validator *v, const char *id, FILE *out, hx_dg_stats *st)
{
    hx_source src;
    hx_planner *pl = NULL;
    cJSON *trace = NULL;
    hx_err err = {0};
    char why[256] = "";
    if (hx_dg_oracle_new(task, &dw->w, dw->reg, &pl, &src)) return HX_ERR_NOMEM;
    int rc = hx_dg_run(dw, task, &src, &pl, NULL, &trace, &err);
    int good = trace && hx_dg_verify(task, trace, &src, v, tools, why, sizeof why);
    if (!trace) snprintf(why, sizeof why, "%s", err.msg);
    if (good) {
        cJSON *j = record(p, task, trace, tools, id, hx_dg_oracle_mistakes(&src));
        write_line(out, j, st);
        cJSON_Delete(j);
        st->written++;
        st->per_cat[hx_dg_category_parse(cJSON_GetStringValue(cJSON_GetObjectItem(task, "category")))]++;
        st->calls += cJSON_GetArraySize(cJSON_GetObjectItem(trace, "calls"));
    } else {
        st->rejected++;
        snprintf(st->last_reject, sizeof st->last_reject, "%s (%s): %s",
                 cJSON_GetStringValue(cJSON_GetObjectItem(task, "kind")),
                 cJSON_GetStringValue(cJSON_GetObjectItem(task, "request")), why);
        hx_log_debug("datagen: rejected %s", st->last_reject);
    }
    cJSON_Delete(trace);
    hx_source_free(&src);
    (void)rc;
    return HX_OK;
}

static int world_block(const hx_dg_params *p, const char *home, long wi, hx_dg_validator **v,
                       cJSON **tools, FILE *out, hx_dg_stats *st, hx_progress *pr, hx_err *err)
{
    hx_dg_world dw;
    uint64_t wseed = mix64(p->seed, (uint64_t)wi);
    int rc = hx_dg_world_open(wseed, p->split, p->tasks ? 0 : p->world_flags, home, &dw, err);
    if (!rc && !*tools) *tools = hx_tools_list_json(dw.reg);
    if (!rc && !*v && !(*v = hx_dg_validator_new(*tools, err))) rc = err->rc ? err->rc : HX_ERR_NOMEM;
    unsigned used[4] = {0};
    /* a task's world must be as generated: one attempt per world */
    int want = p->tasks ? 1 : p->per_world, tries = p->tasks ? 1 : want * 3;
    for (int k = 0; !rc && k < tries && want > 0 && st->written < p->n; k++) {
        hx_rng r;
        hx_rng_seed(&r, wseed, (uint64_t)k + 7);
        int ph = p->phrasings < 0 ? p->split : p->phrasings;
        cJSON *task = hx_dg_task_new_phrased(&dw.w, &r, p->category, used, ph);
        if (!task) continue;
        char id[96];
        snprintf(id, sizeof id, "%s-%llu-%ld-%d", p->split == HX_SPLIT_TRAIN ? "train" : "heldout",
                 (unsigned long long)p->seed, wi, k);
        long before = st->written;
        rc = one(p, &dw, task, *tools, *v, id, out, st);
        cJSON_Delete(task);
        hx_progress_update(pr, (double)st->written, NULL);
        want -= st->written > before;
    }
    hx_dg_world_close(&dw);
    st->worlds++;
    return rc;
}

int hx_datagen_run(const hx_dg_params *p, FILE *out, hx_dg_stats *st, hx_err *err)
{
    char tmp[256] = "", home[300];
    memset(st, 0, sizeof *st);
    double t0 = hx_time_mono();
    if (!p->home) { /* worlds are rewritten often: a memory file system when there is one */
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                           : getenv("TMPDIR")          ? getenv("TMPDIR") : "/tmp";
        snprintf(tmp, sizeof tmp, "%s/hd-XXXXXX", base); /* short: paths are in results */
        if (!mkdtemp(tmp)) return hx_err_set(err, HX_ERR_IO, "cannot make a temporary directory");
    }
    hx_dg_validator *v = NULL;
    cJSON *tools = NULL;
    hx_progress pr;
    hx_progress_start(&pr, p->tasks ? "tasks" : "trajectories", (double)p->n);
    int rc = HX_OK;
    for (long wi = 0; !rc && st->written < p->n; wi++) {
        /* the world's folder name varies, so paths in results vary too */
        hx_rng r;
        char name[24];
        hx_rng_seed(&r, p->seed, (uint64_t)wi + 1000003);
        hx_world_word(&r, p->split, name, sizeof name);
        snprintf(home, sizeof home, "%s/%s", p->home ? p->home : tmp, name);
        rc = world_block(p, home, wi, &v, &tools, out, st, &pr, err);
        hx_world_rmtree(home, NULL);
        if (!rc && st->worlds > 50 && st->written * 20 < st->worlds)
            rc = hx_err_set(err, HX_ERR_INTERNAL, "almost every run is rejected; last: %s", st->last_reject);
    }
    hx_progress_finish(&pr);
    hx_dg_validator_free(v);
    cJSON_Delete(tools);
    if (tmp[0]) hx_world_rmtree(tmp, NULL);
    st->seconds = hx_time_mono() - t0;
    if (!rc && fflush(out)) rc = hx_err_set(err, HX_ERR_IO, "write failed");
    return rc;
}
