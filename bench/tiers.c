/* tiers.c: the request tiers and the governor's tool cut measured on the
 * agent evaluations' tasks: which tier each request's rule puts it in,
 * how often the cut leaves out a tool the task's oracle called, and what
 * the no-model tier and the small tier's cut cost in success beside the
 * full model on the same requests. `make bench-tiers`.
 *
 * usage: tiers [--model FILE] [--threads T] [--no-run] TASKS.jsonl [HANDEVAL_DIR]
 *   TASKS.jsonl: generated held-out tasks (hearth datagen --tasks --split
 *   heldout ...); HANDEVAL_DIR: the hand-written evaluation (its
 *   tasks.jsonl and worlds/). TIERS_MISSES=1 prints each request whose cut
 *   leaves out a needed tool.
 * Tiers: "no model" the requests the tool tier takes (hx_agent_tool_tier:
 * one reading call, answered from its result), "small" the others whose
 * cut offers only reading tools (governor.small_model may serve them),
 * "full" the rest. Unless --no-run, each no-model request runs twice in a
 * fresh world, by the tool tier and by the model (default
 * models/hearth-tiny.gguf), and each small-tier request twice with the
 * model, its prompt's tool list cut to the request's reading tools and
 * whole; all are checked as the evaluations check (generated: the final
 * state; hand-written: calls, state and the facts the answer states). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/turn.h"
#include "sim/handeval.h"

enum { N_CAT = 8 };

typedef struct tally {
    char name[16];
    int n, small, one, cut, lost_small, lost_cut;
} tally;

/* The tiers of one evaluation, and the no-model tier's runs. */
typedef struct tiers {
    int n, tool, small;
    int ran, pass_tool, pass_full;            /* no model: run, passed, the model's */
    int ran_small, pass_cut, pass_full_small; /* small: with the cut, without */
} tiers;

typedef struct opts {
    const char *model, *tasks, *hand;
    int threads, run;
} opts;

/* 1 when every call the oracle made is offered by filter. */
static int offers_expected(const cJSON *task, const char *filter)
{
    const cJSON *calls = cJSON_GetObjectItem(cJSON_GetObjectItem(task, "expect"), "calls");
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        if (name && !hx_agent_tool_offered(filter, name)) return 0;
    }
    return 1;
}

static tally *category(tally *t, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    if (*n == N_CAT - 1) return &t[N_CAT - 1];
    snprintf(t[*n].name, sizeof t[*n].name, "%s", name);
    return &t[(*n)++];
}

static void count(tally *a, const tally *b)
{
    a->n += b->n, a->small += b->small, a->one += b->one, a->cut += b->cut;
    a->lost_small += b->lost_small, a->lost_cut += b->lost_cut;
}

static void line(const tally *t)
{
    printf("| %-8s | %4d | %4d (%3.0f%%) | %4d | %4d (%3.0f%%) | %3d | %3d |\n", t->name, t->n,
           t->small, t->n ? 100.0 * t->small / t->n : 0, t->one, t->cut,
           t->n ? 100.0 * t->cut / t->n : 0, t->lost_small, t->lost_cut);
}

/* The tasks of a JSON-lines file (caller frees), or NULL (said). */
static cJSON *load(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    hx_err err = {0};
    if (hx_read_file(path, 1 << 26, &text, &len, &err)) {
        fprintf(stderr, "tiers: %s\n", err.msg);
        return NULL;
    }
    cJSON *all = cJSON_CreateArray();
    for (char *s = strtok(text, "\n"); all && s; s = strtok(NULL, "\n")) {
        cJSON *t = cJSON_Parse(s);
        if (t && !cJSON_AddItemToArray(all, t)) cJSON_Delete(t);
    }
    free(text);
    return all;
}

static const char *js(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

/* The tier of a request: 2 no model, 1 small, 0 full. */
static int tier_of(const toolset *ts, const char *req)
{
    const char *tool;
    cJSON *args = NULL;
    char filter[1024];
    int took = hx_agent_tool_tier(ts->reg, req, &tool, &args);
    cJSON_Delete(args);
    if (took) return 2;
    return hx_agent_request_tier(ts->reg, req, filter, sizeof filter) == HX_TIER_SMALL;
}

/* The cut's table of the generated tasks (no model). */
static void cut_table(const toolset *ts, const cJSON *tasks)
{
    tally cats[N_CAT] = {0}, all = {.name = "all"};
    snprintf(cats[N_CAT - 1].name, sizeof cats[0].name, "other");
    int n_cat = 0;
    for (const cJSON *task = tasks->child; task; task = task->next) {
        const char *req = js(task, "request"), *cat = js(task, "category");
        if (!*req || !*cat) continue;
        tally *t = category(cats, &n_cat, cat);
        char filter[1024];
        int k = hx_agent_tools_for_request(ts->reg, req, filter, sizeof filter);
        t->n++;
        if (k <= 0) continue;
        const int ok = offers_expected(task, filter);
        if (!ok && getenv("TIERS_MISSES")) printf("miss [%s] %s -> %s\n", cat, req, filter);
        t->cut++;
        t->lost_cut += !ok;
        if (hx_agent_request_tier(ts->reg, req, filter, sizeof filter) == HX_TIER_SMALL) {
            t->small++;
            t->one += k == 1;
            t->lost_small += !ok;
        }
    }
    printf("| category | n | tier small | of which one tool | tool list cut | small tier "
           "missing a needed tool | cut missing one |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_cat; i++) {
        line(&cats[i]);
        count(&all, &cats[i]);
    }
    if (cats[N_CAT - 1].n) line(&cats[N_CAT - 1]), count(&all, &cats[N_CAT - 1]);
    line(&all);
}

/* One run of task so (ro): *pass whether it passed, *took whether the
 * tool tier took it. */
static int run_one(const hx_dg_eval_run *er, const hx_dg_run_opts *ro, const char *hand,
                   const cJSON *task, const char *home, hx_dg_validator **v, int *pass,
                   int *took, hx_err *err)
{
    if (!hand) return hx_dg_eval_task_with(er, ro, task, home, v, pass, took, NULL, NULL, err);
    hx_he_outcome out;
    int rc = hx_he_run_with(er, ro, hand, task, home, v, &out, took, NULL, NULL, err);
    *pass = out.success;
    if (getenv("TIERS_RUNS") && !out.success)
        printf("why: %s | %s | %s\n", out.why_calls, out.why_state, out.why_answer);
    return rc;
}

/* Runs a request of a tier so (ro) and as the full model runs it: *tier
 * and *full get whether each passed; with the tool tier on it must take
 * the request in its world too (else -1). */
static int run_both(const hx_dg_eval_run *er, const hx_dg_run_opts *ro, const char *hand,
                    const cJSON *task, const char *home, hx_dg_validator **v, int *tier,
                    int *full)
{
    static const hx_dg_run_opts plain = {0, NULL};
    hx_err err = {0};
    int took = 0;
    int rc = run_one(er, ro, hand, task, home, v, tier, &took, &err);
    if (!rc) rc = run_one(er, &plain, hand, task, home, v, full, NULL, &err);
    if (rc) fprintf(stderr, "tiers: %s: %s\n", js(task, "request"), err.msg);
    if (!rc && ro->tool_tier && !took)
        fprintf(stderr, "tiers: %s: not taken in its world\n", js(task, "request"));
    if (getenv("TIERS_RUNS"))
        printf("run [%s] %s %d full %d: %s\n", js(task, "category"),
               ro->tool_tier ? "tool" : "cut", *tier, *full, js(task, "request"));
    return rc || (ro->tool_tier && !took) ? -1 : 0;
}

/* The tiers of an evaluation's tasks; the no-model and the small tier's
 * requests run so and with the full model, both with er's model (NULL:
 * not run). The small tier's run is the default model's with the cut
 * (the reading tools of the request's domains): the only small model
 * here is the default one, so what it measures is the cut's cost. */
static tiers measure(const toolset *ts, const cJSON *tasks, const hx_dg_eval_run *er,
                     const char *hand, const char *home)
{
    tiers t = {0};
    hx_dg_validator *v = NULL;
    for (const cJSON *task = tasks->child; task; task = task->next) {
        const char *req = js(task, "request");
        if (!*req) continue;
        const int tier = tier_of(ts, req);
        t.n++;
        t.tool += tier == 2;
        t.small += tier == 1;
        char cut[1024];
        hx_dg_run_opts ro = {tier == 2, NULL};
        if (tier == 1) hx_agent_request_tier(ts->reg, req, cut, sizeof cut), ro.tools = cut;
        int pass_tier = 0, pass_full = 0;
        if (!tier || !er->model ||
            run_both(er, &ro, hand, task, home, &v, &pass_tier, &pass_full))
            continue;
        if (tier == 2) t.ran++, t.pass_tool += pass_tier, t.pass_full += pass_full;
        else t.ran_small++, t.pass_cut += pass_tier, t.pass_full_small += pass_full;
    }
    hx_dg_validator_free(v);
    return t;
}

static void tier_line(const char *name, const tiers *t)
{
    const double n = t->n ? t->n : 1;
    printf("| %s | %d | %d (%.0f%%) | %d (%.0f%%) | %d (%.0f%%) |", name, t->n, t->tool,
           100.0 * t->tool / n, t->small, 100.0 * t->small / n, t->n - t->tool - t->small,
           100.0 * (t->n - t->tool - t->small) / n);
    if (t->ran || t->ran_small)
        printf(" %d/%d | %d/%d | %d/%d | %d/%d |\n", t->pass_tool, t->ran, t->pass_full, t->ran,
               t->pass_cut, t->ran_small, t->pass_full_small, t->ran_small);
    else printf(" not run | | | |\n");
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){"models/hearth-tiny.gguf", NULL, NULL, 1, 1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) o->model = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) o->threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-run")) o->run = 0;
        else if (argv[i][0] == '-') return 0;
        else if (!o->tasks) o->tasks = argv[i];
        else if (!o->hand) o->hand = argv[i];
        else return 0;
    }
    return o->tasks != NULL;
}

int main(int argc, char **argv)
{
    opts o;
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: tiers [--model FILE] [--threads T] [--no-run] TASKS.jsonl "
                        "[HANDEVAL_DIR]\n");
        return 2;
    }
    char path[1200], base[256], home[300];
    snprintf(path, sizeof path, "%s/tasks.jsonl", o.hand ? o.hand : "");
    cJSON *gen = load(o.tasks), *hand = o.hand ? load(path) : NULL;
    toolset ts;
    if (!gen || (o.hand && !hand) || open_tools(&ts)) return 1;
    cut_table(&ts, gen);
    hx_model *m = NULL;
    hx_err err = {0};
    int lock = -1; /* the worlds' fixed path (in tool results): runs replay */
    hx_model_params mp = hx_model_default_params();
    if (o.run && (hx_model_load(o.model, &mp, &m, &err) ||
                  hx_eval_home_take(NULL, base, sizeof base, &lock, &err))) {
        fprintf(stderr, "tiers: %s\n", err.msg);
        return 1;
    }
    snprintf(home, sizeof home, "%s/world", o.run ? base : "/nonexistent");
    hx_dg_eval_run er = {.model = m, .n_threads = o.threads,
                         .family = m ? hx_tpl_detect(hx_model_gguf(m), hx_model_vocab(m)) : 0};
    tiers tg = measure(&ts, gen, &er, NULL, home);
    tiers th = hand ? measure(&ts, hand, &er, o.hand, home) : (tiers){0};
    printf("\n| evaluation | n | no model | small model | full model | no-model tier "
           "succeeds | the same, full model | small tier (the cut) succeeds | the same, all "
           "tools |\n|---|---|---|---|---|---|---|---|---|\n");
    tier_line("generated held-out", &tg);
    if (hand) tier_line("hand-written", &th);
    if (m) printf("(full model: %s)\n", o.model);
    hx_eval_home_give(base, lock);
    hx_model_free(m);
    close_tools(&ts);
    cJSON_Delete(gen);
    cJSON_Delete(hand);
    return 0;
}
