/* agent_eval.c: the agent evaluation: runs the full agent (engine, grammar,
 * tools, memory) on held-out generated tasks, each in a fresh sample world,
 * and checks the final state; success per category and schema-valid calls.
 *
 *   build/bench/agent-eval [--model FILE] [--tasks FILE | --n N --seed S
 *                          [--category C]] [--log FILE] [--trace FILE] [--threads T] [--oracle]
 *                          [--decode spec|plain|both] [--adapter FILE [--scale S]]
 *                          [--copy-bias B] [--answer model|results]
 * --copy-bias sets the copy bias (agent/copy.c; 0: none; default: the
 * prompt style's, HX_COPY_BIAS for hearth-tiny). --answer: who writes the
 * answers (hx_planner_params.answer; default: the model's kind decides,
 * as in `hearth ask`: the results answer for a small model).
 * --decode both runs every task twice, one token per forward pass and with
 * forced runs and drafts batched (engine/spec.h), alternated, checks that
 * both runs made the same calls and answer, and reports the tokens per
 * second of the agent's generation (prefill excluded) of each: the speed
 * of tool-call generation against plain decoding on the same model.
 * --adapter runs the model with a LoRA adapter at scale S (default 1), as
 * nightly's gate runs a candidate: its log against the base's, task by
 * task, shows what an adapter lost.
 * --trace writes each task's readable transcript (model turns, tool
 * results, expected calls, verdict) to FILE. --oracle runs the oracle instead of a model (checks the checker). Tasks
 * read from a file that the oracle no longer passes (made by other
 * world-generation code) are skipped and counted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/sim.h"

typedef struct opts {
    const char *model, *tasks, *log, *dir, *trace, *adapter;
    float scale, copy_bias;
    hx_adapter *ad; /* loaded from adapter (NULL: none) */
    long n;
    uint64_t seed;
    int threads, oracle, category;
    int decode; /* 0 spec (the default), 1 plain, 2 both */
    int memo_task; /* 1: each task's decoder keeps its own memo of the
                      model's output (a process per request); 0: one memo
                      for the run's spec-decoded tasks (a long-running
                      assistant) */
    hx_spec_memo *memo;
    int answer; /* hx_dg_eval_run's */
} opts;

typedef struct tally {
    int n[HX_CAT_COUNT], pass[HX_CAT_COUNT];
    int sched_n, sched_pass, calls, valid;
    int not_run; /* calls a budget cut or stopped: never sent, not in calls */
    int fail_tool, fail_args; /* failed tasks by kind of failure */
    /* read tasks whose answer could state what the read found
     * (hx_dg_answer_faithful), by kind; those that did */
    char ans_kind[16][24];
    int ans_n[16], ans_ok[16], n_ans_kinds;
} tally;

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){"models/hearth-tiny.gguf", NULL, "build/agent-eval.jsonl", NULL, NULL, NULL, 1.0f, 0,
                NULL, 200, 1, 0, 0, -1, 0, 0, NULL, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--oracle")) { o->oracle = 1; continue; }
        if (!v) return 0;
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--tasks")) o->tasks = v;
        else if (!strcmp(a, "--log")) o->log = v;
        else if (!strcmp(a, "--dir")) o->dir = v;
        else if (!strcmp(a, "--trace")) o->trace = v;
        else if (!strcmp(a, "--adapter")) o->adapter = v;
        else if (!strcmp(a, "--scale")) {
            char *end;
            o->scale = strtof(v, &end);
            if (end == v || *end || !isfinite(o->scale)) return 0;
        }
        else if (!strcmp(a, "--copy-bias")) {
            char *end;
            o->copy_bias = strtof(v, &end);
            if (end == v || *end || !(o->copy_bias >= 0 && o->copy_bias <= 100)) return 0;
            if (o->copy_bias == 0) o->copy_bias = -1; /* none */
        }
        else if (!strcmp(a, "--n")) o->n = atol(v);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--decode") && !strcmp(v, "spec")) o->decode = 0;
        else if (!strcmp(a, "--decode") && !strcmp(v, "plain")) o->decode = 1;
        else if (!strcmp(a, "--decode") && !strcmp(v, "both")) o->decode = 2;
        else if (!strcmp(a, "--answer") && !strcmp(v, "model")) o->answer = HX_ANSWER_MODEL + 1;
        else if (!strcmp(a, "--answer") && !strcmp(v, "results")) o->answer = HX_ANSWER_RESULTS + 1;
        else if (!strcmp(a, "--memo") && !strcmp(v, "task")) o->memo_task = 1;
        else if (!strcmp(a, "--memo") && !strcmp(v, "run")) o->memo_task = 0;
        else if (!strcmp(a, "--category") && hx_dg_category_parse(v) >= 0) o->category = hx_dg_category_parse(v);
        else return 0;
    }
    return o->n > 0 && (o->adapter || o->scale == 1.0f); /* a scale is the adapter's */
}

/* The tasks: read from a file, or generated (held-out split). */
static cJSON *load_tasks(const opts *o, hx_err *err)
{
    char *text = NULL;
    size_t len = 0;
    if (!o->tasks) return hx_dg_eval_tasks(o->n, o->seed, o->category, err);
    if (hx_read_file(o->tasks, 0, &text, &len, err)) return NULL;
    cJSON *all = cJSON_CreateArray();
    long n = 0, bad = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *t = cJSON_Parse(line);
        n++;
        if (t) cJSON_AddItemToArray(all, t);
        else if (!bad++) fprintf(stderr, "agent-eval: %s: line %ld is not JSON; skipped\n", o->tasks, n);
    }
    if (bad > 1) fprintf(stderr, "agent-eval: %ld lines skipped in all\n", bad);
    free(text);
    return all;
}

/* Whether the run called the same tools, in the same order, as the
 * oracle did: a failure with the same tools is a wrong argument or
 * answer (copying), one without is a wrong choice of tool. */
static int same_tools(const cJSON *task, const cJSON *r)
{
    const cJSON *expect = cJSON_GetObjectItem(task, "expect");
    const cJSON *want = cJSON_GetObjectItem(expect, "calls"), *got = cJSON_GetObjectItem(r, "calls");
    int same = cJSON_GetArraySize(want) == cJSON_GetArraySize(got);
    for (int i = 0; same && i < cJSON_GetArraySize(want); i++) {
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(want, i), "name"));
        const char *b = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(got, i), "name"));
        same = a && b && !strcmp(a, b);
    }
    return same;
}

/* A read task's answer_ok (none: not a read with something to state). */
static void count_answer(tally *t, const char *kind, const cJSON *ok)
{
    if (!cJSON_IsBool(ok) || !kind) return;
    int i = 0;
    while (i < t->n_ans_kinds && strcmp(t->ans_kind[i], kind)) i++;
    if (i == t->n_ans_kinds) {
        if (i == 16) return;
        snprintf(t->ans_kind[i], sizeof t->ans_kind[i], "%s", kind);
        t->n_ans_kinds++;
    }
    t->ans_n[i]++;
    t->ans_ok[i] += cJSON_IsTrue(ok);
}

/* The tally and the log line of one run's record r. */
static void count(const cJSON *task, const cJSON *r, int pass, FILE *log, tally *t)
{
    int c = hx_dg_category_parse(cJSON_GetStringValue(cJSON_GetObjectItem(task, "category")));
    int sched = !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(task, "kind")), "schedule");
    if (c >= 0) t->n[c]++, t->pass[c] += pass;
    t->sched_n += sched;
    t->sched_pass += sched && pass;
    t->not_run += cJSON_GetArraySize(cJSON_GetObjectItem(r, "not_run"));
    count_answer(t, cJSON_GetStringValue(cJSON_GetObjectItem(task, "kind")),
                 cJSON_GetObjectItem(r, "answer_ok"));
    if (!pass && same_tools(task, r)) t->fail_args++;
    else if (!pass) t->fail_tool++;
    char *s = cJSON_PrintUnformatted(r);
    if (s && log) fprintf(log, "%s\n", s);
    cJSON_free(s);
}

/* One task in a fresh world: before, run, check (nightly/nightly_agent.c);
 * plain: one token per pass; generation counters added to *gen. *r gets
 * the record (caller frees; NULL if the task did not run). */
static int run_once(const opts *o, const cJSON *task, hx_model *m, int family, const char *home,
                    hx_dg_validator **v, int plain, hx_gen_stats *gen, FILE *tr, tally *t,
                    cJSON **r, int *pass, hx_err *err)
{
    hx_adapter *const ads[1] = {o->ad};
    hx_dg_eval_run er = {m, family, o->threads, o->oracle, o->ad ? ads : NULL,
                         o->ad ? &o->scale : NULL, o->ad != NULL, plain, gen, o->copy_bias,
                         plain ? NULL : o->memo, o->answer};
    cJSON *trace = NULL;
    *pass = 0;
    int rc = hx_dg_eval_task_traced(&er, task, home, v, pass, &t->valid, &t->calls, r,
                                    tr ? &trace : NULL, err);
    if (tr && *r) hx_dg_transcript(tr, task, trace, *pass, cJSON_GetStringValue(cJSON_GetObjectItem(*r, "reason")));
    cJSON_Delete(trace);
    return rc;
}

/* Whether two runs of a task made the same calls and answer. */
static int same_run(const cJSON *a, const cJSON *b)
{
    const char *k[] = {"calls", "answer"};
    for (int i = 0; i < 2; i++)
        if (!cJSON_Compare(cJSON_GetObjectItem(a, k[i]), cJSON_GetObjectItem(b, k[i]), 1)) return 0;
    return 1;
}

typedef struct decoding {
    hx_gen_stats gen[2]; /* [0] spec, [1] plain */
    int compared, same;
} decoding;

/* The task as --decode asks: the plain run first with --decode both (its
 * calls counted apart), then the counted one. */
static int run_task(const opts *o, const cJSON *task, hx_model *m, int family, const char *home,
                    hx_dg_validator **v, FILE *log, FILE *tr, tally *t, decoding *d, hx_err *err)
{
    cJSON *r = NULL, *r_plain = NULL;
    int pass = 0, rc = HX_OK;
    if (o->decode == 2) {
        tally scratch = {0};
        rc = run_once(o, task, m, family, home, v, 1, &d->gen[1], NULL, &scratch, &r_plain, &pass, err);
    }
    int plain = o->decode == 1;
    if (!rc) rc = run_once(o, task, m, family, home, v, plain, &d->gen[plain], tr, t, &r, &pass, err);
    if (r) count(task, r, pass, log, t);
    if (r && r_plain) {
        int same = same_run(r, r_plain);
        d->compared++, d->same += same;
        if (!same)
            fprintf(stderr, "agent-eval: task %s: the plain run made other calls or another answer\n",
                    cJSON_GetStringValue(cJSON_GetObjectItem(task, "id")));
    }
    cJSON_Delete(r);
    cJSON_Delete(r_plain);
    return rc;
}

/* Whether the oracle still passes a task read from a file: a task made by
 * other world-generation code expects a world that is no longer built, and
 * would count against the model. */
static int oracle_passes(const cJSON *task, const char *home, hx_dg_validator **v)
{
    hx_dg_eval_run er = {NULL, HX_TPL_COMPACT, 1, 1, NULL, NULL, 0, 0, NULL, 0, NULL, 0};
    hx_err err = {0};
    int pass = 0;
    return hx_dg_eval_task(&er, task, home, v, &pass, NULL, NULL, NULL, &err) == HX_OK && pass;
}

static double rate(int64_t n, double secs) { return secs > 0 ? n / secs : 0.0; }

static void report_gen(const char *name, const hx_gen_stats *g)
{
    printf("  %-5s %6lld tokens in %6lld passes (%lld forced, %lld of %lld drafts accepted), "
           "%.2f s (%.2f s in passes), %.1f tokens/s\n", name, (long long)g->tokens,
           (long long)g->spec.passes, (long long)g->spec.forced, (long long)g->spec.accepted,
           (long long)g->spec.drafted, g->seconds, g->spec.pass_seconds,
           rate(g->tokens, g->seconds));
    printf("        of which turns that call a tool: %lld tokens, %.2f s, %.1f tokens/s\n",
           (long long)g->call_tokens, g->call_seconds, rate(g->call_tokens, g->call_seconds));
}

/* The generation speed of each decoding and, with both, their ratio. */
static void report_decoding(const opts *o, const decoding *d)
{
    if (o->oracle) return;
    printf("  generation (prefill excluded):\n");
    if (o->decode != 1) report_gen("spec", &d->gen[0]);
    if (o->decode != 0) report_gen("plain", &d->gen[1]);
    if (o->decode != 2) return;
    double a = rate(d->gen[0].tokens, d->gen[0].seconds), b = rate(d->gen[1].tokens, d->gen[1].seconds);
    double ac = rate(d->gen[0].call_tokens, d->gen[0].call_seconds);
    double bc = rate(d->gen[1].call_tokens, d->gen[1].call_seconds);
    printf("  spec / plain: %.2fx tokens/s in all turns, %.2fx in tool-call turns; same calls "
           "and answer in %d of %d tasks\n", b > 0 ? a / b : 0.0, bc > 0 ? ac / bc : 0.0,
           d->same, d->compared);
}

static void report(const tally *t, double secs, int n_tasks, int answer)
{
    int all = 0, pass = 0;
    printf("agent-eval: %d tasks in %.0f s%s\n", n_tasks, secs,
           answer == HX_ANSWER_RESULTS + 1 ? "; answers written from the results" : "");
    for (int c = 0; c < HX_CAT_COUNT; c++) {
        if (!t->n[c]) continue;
        printf("  %-8s %4d/%-4d %5.1f%%\n", hx_dg_category_name(c), t->pass[c], t->n[c],
               100.0 * t->pass[c] / t->n[c]);
        all += t->n[c];
        pass += t->pass[c];
    }
    if (t->sched_n)
        printf("  multi-call scheduling %d/%d %.1f%%\n", t->sched_pass, t->sched_n,
               100.0 * t->sched_pass / t->sched_n);
    printf("  all      %4d/%-4d %5.1f%%\n", pass, all, all ? 100.0 * pass / all : 0.0);
    printf("  schema-valid calls %d/%d %.1f%%\n", t->valid, t->calls,
           t->calls ? 100.0 * t->valid / t->calls : 100.0);
    printf("  calls not run: %d (cut mid-way or stopped by a budget: never sent to a tool, "
           "not counted above)\n", t->not_run);
    printf("  failed: %d with other tools than the oracle's, %d with the same tools "
           "(arguments or answer wrong)\n", t->fail_tool, t->fail_args);
    int n = 0, ok = 0;
    for (int i = 0; i < t->n_ans_kinds; i++) n += t->ans_n[i], ok += t->ans_ok[i];
    if (!n) return;
    printf("  answers stating what the read found (not part of passing): %d/%d %.1f%%\n   ", ok, n,
           100.0 * ok / n);
    for (int i = 0; i < t->n_ans_kinds; i++)
        printf(" %s %d/%d", t->ans_kind[i], t->ans_ok[i], t->ans_n[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    opts o;
    hx_err err = {0};
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: agent-eval [--model FILE] [--tasks FILE | --n N --seed S] "
                        "[--category C] [--log FILE] [--trace FILE] [--threads T] [--dir DIR] [--oracle]\n"
                        "                  [--decode spec|plain|both] [--memo run|task] [--adapter FILE [--scale S]] [--copy-bias B]\n"
                        "                  [--answer model|results]\n");
        return 2;
    }
    hx_model *m = NULL;
    int family = HX_TPL_COMPACT;
    if (!o.oracle) {
        hx_model_params mp = hx_model_default_params();
        if (hx_model_load(o.model, &mp, &m, &err)) {
            fprintf(stderr, "agent-eval: %s: %s\n", o.model, err.msg);
            return 1;
        }
        family = hx_tpl_detect(hx_model_gguf(m), hx_model_vocab(m));
        if (!o.answer) o.answer = hx_agent_answer_for(family, m) + 1; /* as `hearth ask` */
        if (o.adapter && hx_adapter_load(m, o.adapter, &o.ad, &err)) {
            fprintf(stderr, "agent-eval: %s: %s\n", o.adapter, err.msg);
            return 1;
        }
    }
    if (!o.memo_task && !o.oracle && !(o.memo = hx_spec_memo_new())) {
        fprintf(stderr, "agent-eval: out of memory\n");
        return 1;
    }
    char base[256], home[300];
    int lock = -1; /* the worlds' fixed path (in tool results): runs replay */
    cJSON *tasks = !hx_eval_home_take(o.dir, base, sizeof base, &lock, &err) ? load_tasks(&o, &err) : NULL;
    FILE *log = tasks ? fopen(o.log, "w") : NULL, *tr = NULL;
    if (!tasks || !log || (o.trace && !(tr = fopen(o.trace, "w")))) {
        fprintf(stderr, "agent-eval: %s\n", !tasks ? err.msg : !log ? o.log : o.trace);
        return 1;
    }
    snprintf(home, sizeof home, "%s/world", base);
    tally t = {0};
    decoding d = {0};
    hx_dg_validator *v = NULL;
    hx_progress pr;
    double t0 = hx_time_mono();
    int i = 0;
    hx_progress_start(&pr, "agent-eval", cJSON_GetArraySize(tasks));
    int stale = 0;
    for (const cJSON *task = tasks->child; task; task = task->next, i++) {
        if (o.tasks && !o.oracle && !oracle_passes(task, home, &v)) {
            stale++;
            hx_progress_update(&pr, i + 1, NULL);
            continue;
        }
        if (run_task(&o, task, m, family, home, &v, log, tr, &t, &d, &err))
            fprintf(stderr, "agent-eval: task %d: %s\n", i, err.msg);
        hx_progress_update(&pr, i + 1, NULL);
    }
    hx_progress_finish(&pr);
    fclose(log);
    if (tr) fclose(tr);
    report(&t, hx_time_mono() - t0, i - stale, o.answer);
    report_decoding(&o, &d);
    if (stale)
        printf("  %d of %d tasks skipped: the oracle fails them in today's worlds (made by other "
               "world code; regenerate with hearth datagen --tasks)\n", stale, i);
    printf("  per-task results: %s\n", o.log);
    if (o.trace) printf("  transcripts: %s\n", o.trace);
    hx_dg_validator_free(v);
    cJSON_Delete(tasks);
    hx_adapter_free(o.ad);
    hx_spec_memo_free(o.memo);
    hx_model_free(m);
    hx_eval_home_give(base, lock);
    return 0;
}
