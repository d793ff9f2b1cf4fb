/* hand_eval.c: the hand-written agent evaluation (bench/handeval/): everyday
 * requests over worlds written by hand, run by the full agent, each checked
 * for its calls, the state it left and the facts its answer states; success
 * per category beside the generated held-out sets of agent-eval.
 *
 *   build/bench/hand-eval [--model FILE] [--dir DIR] [--tasks FILE]
 *                         [--world W] [--category C] [--id ID[,ID...]]
 *                         [--log FILE] [--trace FILE] [--threads T]
 *                         [--copy-bias B] [--answer model|results] [--tools]
 * --dir: the evaluation (default bench/handeval: its worlds/ and
 * tasks.jsonl). --tools runs no model: each task's ideal calls go straight
 * to the built-in tools, and the report says whether the tools reach the
 * facts each answer must state and leave the expected state (checks the
 * tasks and the tools). --log writes each task's verdicts and calls as a
 * JSON line; --trace a readable transcript of each run. --answer: who
 * writes the answers (hx_planner_params.answer; default: the model's kind
 * decides, as in `hearth ask`: the results answer for a small model). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

typedef struct opts {
    const char *model, *dir, *tasks, *world, *category, *ids, *log, *trace;
    int threads, tools;
    float copy_bias;
    int answer; /* hx_dg_eval_run's */
} opts;

#define MAX_CATS 24
typedef struct tally {
    char name[MAX_CATS][24];
    int n_cats;
    int n[MAX_CATS], success[MAX_CATS], calls[MAX_CATS], answer[MAX_CATS];
    int n_calls, n_valid, answered;
    int n_facts, n_found; /* --tools: facts asked, reached by the tools */
} tally;

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.model = "models/hearth-tiny.gguf", .dir = "bench/handeval", .log = "build/hand-eval.jsonl"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tools")) { o->tools = 1; continue; }
        if (!v) return 0;
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--dir")) o->dir = v;
        else if (!strcmp(a, "--tasks")) o->tasks = v;
        else if (!strcmp(a, "--world")) o->world = v;
        else if (!strcmp(a, "--category")) o->category = v;
        else if (!strcmp(a, "--id")) o->ids = v;
        else if (!strcmp(a, "--log")) o->log = v;
        else if (!strcmp(a, "--trace")) o->trace = v;
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--answer") && !strcmp(v, "model")) o->answer = HX_ANSWER_MODEL + 1;
        else if (!strcmp(a, "--answer") && !strcmp(v, "results")) o->answer = HX_ANSWER_RESULTS + 1;
        else if (!strcmp(a, "--copy-bias")) {
            char *end;
            o->copy_bias = strtof(v, &end);
            if (end == v || *end || !(o->copy_bias >= 0 && o->copy_bias <= 100)) return 0;
            if (o->copy_bias == 0) o->copy_bias = -1; /* none */
        }
        else return 0;
    }
    return 1;
}

/* Whether id is one of the comma-separated list (NULL: any). */
static int listed(const char *list, const char *id)
{
    size_t l = strlen(id);
    for (const char *p = list; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
        if (strcspn(p, ",") == l && !strncmp(p, id, l)) return 1;
    }
    return !list;
}

static const char *js(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

/* The tasks of the file that the options select, as a JSON array. */
static cJSON *load_tasks(const opts *o, hx_err *err)
{
    char path[1200], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s", o->tasks ? o->tasks : "");
    if (!o->tasks) snprintf(path, sizeof path, "%s/tasks.jsonl", o->dir);
    if (hx_read_file(path, 1 << 26, &text, &len, err)) return NULL;
    cJSON *all = cJSON_CreateArray();
    long line = 0;
    for (char *s = strtok(text, "\n"); s; s = strtok(NULL, "\n")) {
        cJSON *t = cJSON_Parse(s);
        line++;
        if (!t) {
            fprintf(stderr, "hand-eval: %s: line %ld is not JSON; skipped\n", path, line);
            continue;
        }
        int keep = listed(o->ids, js(t, "id")) && (!o->world || !strcmp(o->world, js(t, "world"))) &&
                   (!o->category || !strcmp(o->category, js(t, "category")));
        if (keep) cJSON_AddItemToArray(all, t);
        else cJSON_Delete(t);
    }
    free(text);
    return all;
}

static int category(tally *t, const char *name)
{
    int i = 0;
    while (i < t->n_cats && strcmp(t->name[i], name)) i++;
    if (i == t->n_cats && i < MAX_CATS) snprintf(t->name[t->n_cats++], sizeof t->name[0], "%s", name);
    return i < MAX_CATS ? i : MAX_CATS - 1;
}

static void count(tally *t, const cJSON *task, const hx_he_outcome *o)
{
    int c = category(t, js(task, "category"));
    t->n[c]++;
    t->success[c] += o->success;
    t->calls[c] += o->calls_ok && o->state_ok;
    t->answer[c] += o->answer_ok;
    t->n_calls += o->n_calls;
    t->n_valid += o->n_valid;
    t->answered += o->answered;
    t->n_facts += o->n_facts;
    t->n_found += o->n_found;
}

static double pct(int a, int b) { return b ? 100.0 * a / b : 0.0; }

static void row(const char *name, int n, int s, int c, int a)
{
    printf("  %-12s %4d  %4d %5.1f%%  %4d %5.1f%%  %4d %5.1f%%\n", name, n, s, pct(s, n), c, pct(c, n), a,
           pct(a, n));
}

static void report(const opts *o, const tally *t, double secs)
{
    int n = 0, s = 0, c = 0, a = 0;
    printf("hand-eval: %s, %s%s\n", o->tools ? "the ideal calls straight through the tools (no model)" : o->model,
           o->dir, o->tools ? "" : o->answer == HX_ANSWER_RESULTS + 1 ? "; answers written from the results"
                                                                     : "; the model's answers");
    printf("  %-12s %4s  %11s  %11s  %11s\n", "category", "n", "success", "calls", o->tools ? "facts found" : "answer");
    for (int i = 0; i < t->n_cats; i++) {
        row(t->name[i], t->n[i], t->success[i], t->calls[i], t->answer[i]);
        n += t->n[i], s += t->success[i], c += t->calls[i], a += t->answer[i];
    }
    row("all", n, s, c, a);
    if (!o->tools)
        printf("  answered %d/%d; schema-valid calls %d/%d %.1f%%; %.0f s\n", t->answered, n, t->n_valid,
               t->n_calls, pct(t->n_valid, t->n_calls), secs);
    else
        printf("  the world's facts the answers must state: %d of %d in the tools' results\n", t->n_found,
               t->n_facts);
    printf("  calls: the calls the request needs were made (tool, arguments, what their results held) "
           "and the world holds what was asked, written nowhere else;\n  %s\n",
           o->tools ? "facts found: every fact the answer must state is in the tools' results"
                    : "answer: every fact asked is stated, and no time, date, weekday, address or file "
                      "name that is not the world's");
}

/* One task: run (or its ideal calls), count, log, transcribe. */
static int one(const opts *o, const hx_dg_eval_run *er, const cJSON *task, const char *home,
               hx_dg_validator **v, FILE *log, FILE *tr, tally *t, hx_err *err)
{
    hx_he_outcome out;
    cJSON *rec = NULL, *trace = NULL;
    int rc = o->tools ? hx_he_run_ideal(o->dir, task, home, &out, &rec, err)
                      : hx_he_run_model(er, o->dir, task, home, v, &out, &rec, tr ? &trace : NULL, err);
    if (!rc) count(t, task, &out);
    char *s = rec ? cJSON_PrintUnformatted(rec) : NULL;
    if (s) fprintf(log, "%s\n", s);
    if (tr && !rc) hx_he_transcript(tr, task, trace, &out);
    if (o->tools && !rc && !out.success)
        printf("  %s: %s\n", js(task, "id"), !out.calls_ok ? out.why_calls : !out.state_ok ? out.why_state : out.why_answer);
    cJSON_free(s);
    cJSON_Delete(rec);
    cJSON_Delete(trace);
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    hx_err err = {0};
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: hand-eval [--model FILE] [--dir DIR] [--tasks FILE] [--world W] "
                        "[--category C] [--id ID[,ID...]]\n"
                        "                 [--log FILE] [--trace FILE] [--threads T] [--copy-bias B]\n"
                        "                 [--answer model|results] [--tools]\n");
        return 2;
    }
    hx_model *m = NULL;
    int family = HX_TPL_COMPACT;
    if (!o.tools) {
        hx_model_params mp = hx_model_default_params();
        if (hx_model_load(o.model, &mp, &m, &err)) {
            fprintf(stderr, "hand-eval: %s: %s\n", o.model, err.msg);
            return 1;
        }
        family = hx_tpl_detect(hx_model_gguf(m), hx_model_vocab(m));
        if (!o.answer) o.answer = hx_agent_answer_for(family, m) + 1; /* as `hearth ask` */
    }
    char base[256], home[300];
    int lock = -1; /* the worlds' fixed path (in tool results): runs replay */
    cJSON *tasks = !hx_eval_home_take(NULL, base, sizeof base, &lock, &err) ? load_tasks(&o, &err) : NULL;
    FILE *log = tasks ? fopen(o.log, "w") : NULL, *tr = NULL;
    if (!tasks || !log || (o.trace && !(tr = fopen(o.trace, "w")))) {
        fprintf(stderr, "hand-eval: %s\n", !tasks ? err.msg : !log ? o.log : o.trace);
        return 1;
    }
    snprintf(home, sizeof home, "%s/world", base);
    hx_dg_eval_run er = {.model = m, .family = family, .n_threads = o.threads, .copy_bias = o.copy_bias,
                         .answer = o.answer};
    hx_dg_validator *v = NULL;
    tally t = {0};
    hx_progress pr;
    double t0 = hx_time_mono();
    int i = 0, failed = 0;
    hx_progress_start(&pr, "hand-eval", cJSON_GetArraySize(tasks));
    for (const cJSON *task = tasks->child; task; task = task->next, i++) {
        if (one(&o, &er, task, home, &v, log, tr, &t, &err)) {
            fprintf(stderr, "hand-eval: task %s: %s\n", js(task, "id"), err.msg);
            failed++;
        }
        hx_progress_update(&pr, i + 1, NULL);
    }
    hx_progress_finish(&pr);
    fclose(log);
    if (tr) fclose(tr);
    report(&o, &t, hx_time_mono() - t0);
    printf("  per-task results: %s\n", o.log);
    if (o.trace) printf("  transcripts: %s\n", o.trace);
    if (failed) printf("  %d tasks could not be run (see above)\n", failed);
    hx_dg_validator_free(v);
    cJSON_Delete(tasks);
    hx_model_free(m);
    hx_eval_home_give(base, lock);
    return failed ? 1 : 0;
}
