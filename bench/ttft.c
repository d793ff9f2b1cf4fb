/* ttft.c: time to first token of an agent turn with the full built-in tool
 * list, cold vs warm (in-process and from the prefix cache on disk), and
 * where it goes, on a random-weight Qwen3-0.6B-shaped model. `make bench-ttft`.
 *
 * usage: ttft [--model FILE] [--reps N] [--threads N] [--kv q8] [--style S]
 *             [--tools FILTER]
 * --tools offers only the tools FILTER names (as `hearth ask --tools`), as
 * the governor's trimmed prompt does.
 * Without --model the Q4_0 file of bench/engine (Q6_K tied embedding) is
 * used from $XDG_CACHE_HOME/hearth/bench-models, written if missing.
 * --style: the prompt style (default qwen3; brief for hearth-tiny), the
 * prompt laid out as the planner lays it out (the system text, the
 * request's own "Now" system message, the request). The prefix cache
 * goes to a temporary HEARTH_HOME, removed at the end. Each row also says
 * where its time went (hx_source_engine_timing: tokenize, prefix, prefill,
 * sampler set-up, first token; and the prompt's render); the first run's
 * prefix-cache write, after its first token, is timed on its own. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "bench/bench.h"
#include "bench/turn.h"
#include "modelfile/modelfile.h"

typedef struct opts {
    char model[1024];
    int reps, threads, kv_q8, family;
    const char *tools; /* NULL: all */
} opts;

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 3;
    o->threads = 2;
    o->family = HX_TPL_QWEN3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--kv") && v) o->kv_q8 = !strcmp(v, "q8"), i++;
        else if (!strcmp(a, "--model") && v) snprintf(o->model, sizeof o->model, "%s", v), i++;
        else if (!strcmp(a, "--reps") && v) o->reps = atoi(v), i++;
        else if (!strcmp(a, "--threads") && v) o->threads = atoi(v), i++;
        else if (!strcmp(a, "--style") && v) o->family = hx_tpl_parse_name(v), i++;
        else if (!strcmp(a, "--tools") && v) o->tools = v, i++;
        else {
            fprintf(stderr, "usage: ttft [--model FILE] [--reps N] [--threads N] [--kv q8] "
                            "[--style S] [--tools FILTER]\n");
            return -1;
        }
    }
    return o->reps > 0 && o->family > 0 ? 0 : -1;
}

/* bench/engine's qwen3-0.6b-q4_0 file, written when missing. */
static int ensure_model(opts *o)
{
    if (o->model[0]) return 0;
    char dir[900];
    if (hx_path_cache(dir, sizeof dir) < 0) return -1;
    strcat(dir, "/bench-models");
    snprintf(o->model, sizeof o->model, "%s/qwen3-0.6b-q4_0-v1.gguf", dir);
    struct stat st;
    if (stat(o->model, &st) == 0 && st.st_size > 0) return 0;
    hx_err err = {0};
    static char vocab[1024];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-qwen2.gguf", hx_shared_data_dir());
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3";
    p.ftype = "Q4_0";
    p.tensor_types = "token_embd=Q6_K";
    p.vocab_path = vocab;
    p.n_ctx = 40960;
    p.n_layer = 28;
    p.n_embd = 1024;
    p.n_head = 16;
    p.n_head_kv = 8;
    p.head_dim = 128;
    p.n_ff = 3072;
    p.tied_output = 1;
    fprintf(stderr, "ttft: writing %s ...\n", o->model);
    if (hx_mkdirs(dir, &err) || hx_mkmodel_write(&p, o->model, &err)) {
        fprintf(stderr, "ttft: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int new_source(hx_model *m, const toolset *t, const opts *o, int prefix,
                      hx_source *src)
{
    hx_source_engine_params ep = hx_source_engine_default_params();
    ep.n_ctx = 8192;
    ep.n_threads = o->threads;
    ep.kv_q8 = o->kv_q8;
    ep.prefix_cache = prefix;
    hx_source_engine_style(&ep, o->family, m);
    ep.n_ctx = 8192;
    hx_err err = {0};
    int rc = hx_source_engine_new(m, t->specs, t->n, &ep, src, &err);
    if (rc) fprintf(stderr, "ttft: source: %s\n", err.msg);
    return rc;
}

/* Seconds from the prompt to the first generated token's text; *cpu gets
 * the CPU seconds it took, *tm where they went. */
static double first_token(hx_source *s, const char *prompt, const hx_tpl_marks *marks,
                          int *n_prompt, double *cpu, hx_turn_timing *tm)
{
    hx_err err = {0};
    hx_buf piece;
    hx_buf_init(&piece);
    int end = 0;
    double t0 = hx_time_mono(), c0 = bench_cpu_seconds();
    int rc = s->begin_marked(s->ctx, prompt, marks, HX_CHOICE_AUTO, n_prompt, &err);
    if (!rc) rc = s->next(s->ctx, &piece, &end, &err);
    double t = hx_time_mono() - t0;
    *cpu = bench_cpu_seconds() - c0;
    hx_source_engine_timing(s, tm);
    hx_buf_free(&piece);
    if (rc) fprintf(stderr, "ttft: %s\n", err.msg);
    return rc ? -1 : t;
}

static double median(double *v, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (v[j] < v[i]) {
                double x = v[i];
                v[i] = v[j], v[j] = x;
            }
    return v[n / 2];
}

static void loadavg(const char *when)
{
    char *s = NULL;
    size_t n = 0;
    if (hx_read_file("/proc/loadavg", 256, &s, &n, NULL) == HX_OK)
        printf("load average %s: %.*s\n", when, (int)strcspn(s, "\n"), s);
    free(s);
}

typedef struct results {
    double cold[16], disk[16], mem[16], prep[16], save;     /* wall seconds */
    double ccold[16], cdisk[16], cmem[16], cprep[16], csave; /* CPU seconds */
    hx_turn_timing tcold[16], tdisk[16], tmem[16], tprep[16], tsave;
    double render_ms;                                  /* a prompt's, median */
    int n_prompt, n_head;
} results;

/* The next request (d) in source s with its start decoded while the user
 * typed (hx_planner_prepare's part: up to the clock's last character);
 * only the request's first token is timed. */
static double prepared_turn(hx_source *s, const turn *d, double *cpu, hx_turn_timing *tm)
{
    hx_err err = {0};
    int n = 0;
    char *start = hx_strndup(d->text, prepared_bytes(d->text));
    int rc = start && *start ? s->prepare(s->ctx, start, &d->marks, &err) : HX_ERR_INVALID;
    free(start);
    if (rc) fprintf(stderr, "ttft: prepare: %s\n", err.msg[0] ? err.msg : "no clock line");
    return rc ? -1 : first_token(s, d->text, &d->marks, &n, cpu, tm);
}

/* One repetition: a cold source; a new source warmed from disk; the same
 * source warm in memory for the next request, and for the one after it
 * with its start decoded ahead. */
static int rep(hx_model *m, const toolset *t, const opts *o, const turn *prompts, int r,
               results *res)
{
    hx_source cold, warm;
    int n = 0;
    if (new_source(m, t, o, 0, &cold)) return -1;
    const turn *a = &prompts[r % 4], *b = &prompts[(r + 1) % 4], *c = &prompts[(r + 2) % 4],
               *d = &prompts[(r + 3) % 4];
    res->cold[r] = first_token(&cold, a->text, &a->marks, &res->n_prompt, &res->ccold[r],
                               &res->tcold[r]);
    hx_source_free(&cold);
    if (new_source(m, t, o, 1, &warm)) return -1;
    res->disk[r] = first_token(&warm, b->text, &b->marks, &n, &res->cdisk[r], &res->tdisk[r]);
    res->mem[r] = first_token(&warm, c->text, &c->marks, &n, &res->cmem[r], &res->tmem[r]);
    res->prep[r] = prepared_turn(&warm, d, &res->cprep[r], &res->tprep[r]);
    fprintf(stderr, "ttft: rep %d: cold %.2f s, disk %.2f s, in-process %.2f s, prepared "
            "%.2f s\n", r + 1, res->cold[r], res->disk[r], res->mem[r], res->prep[r]);
    hx_source_free(&warm);
    return res->cold[r] < 0 || res->disk[r] < 0 || res->mem[r] < 0 || res->prep[r] < 0 ? -1 : 0;
}

/* The median of one field of the timings t[0..n). */
static double median_of(const hx_turn_timing *t, int n, size_t field)
{
    double v[16];
    for (int i = 0; i < n; i++) memcpy(&v[i], (const char *)&t[i] + field, sizeof v[i]);
    return median(v, n);
}

/* Where a row's time went: medians of its reps, milliseconds. */
static void breakdown(const char *row, const hx_turn_timing *t, int n, double render_ms)
{
    printf("  %-16s render %6.2f  tokenize %6.1f  prefix %7.1f  prefill of %4d %8.1f  "
           "sampler %6.1f  first token %6.1f\n", row, render_ms,
           median_of(t, n, offsetof(hx_turn_timing, tokenize_ms)),
           median_of(t, n, offsetof(hx_turn_timing, load_ms)), t[0].n_prompt - t[0].n_reused,
           median_of(t, n, offsetof(hx_turn_timing, prefill_ms)),
           median_of(t, n, offsetof(hx_turn_timing, sampler_ms)),
           median_of(t, n, offsetof(hx_turn_timing, first_ms)));
}

/* Milliseconds to render a turn's prompt (the planner does it each turn),
 * the median of 5. */
static double render_ms(const toolset *t, int family)
{
    double v[5];
    for (int i = 0; i < 5; i++) {
        hx_tpl_marks marks = {0};
        const double t0 = hx_time_mono();
        char *text = render(t, family, i, requests[i % 4], &marks);
        v[i] = (hx_time_mono() - t0) * 1e3;
        free(text);
        hx_tpl_marks_free(&marks);
    }
    return median(v, 5);
}

/* Keeps the tools filter offers, in the specs and the rendered list. */
static void keep_tools(toolset *t, const char *filter)
{
    int k = 0;
    for (int i = 0; i < t->n; i++)
        if (hx_agent_tool_offered(filter, t->specs[i].name)) t->specs[k++] = t->specs[i];
    t->n = k;
    for (cJSON *j = t->json->child, *next; j; j = next) {
        next = j->next;
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(j, "name"));
        if (!cJSON_GetObjectItem(j, "name")) /* {"type": "function", "function": {...}} */
            name = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "function"), "name"));
        if (!name || !hx_agent_tool_offered(filter, name))
            cJSON_Delete(cJSON_DetachItemViaPointer(t->json, j));
    }
}

static int run(const opts *o, hx_model *m)
{
    toolset t;
    if (open_tools(&t)) return 1;
    if (o->tools) keep_tools(&t, o->tools);
    turn prompts[4] = {{0}};
    for (int i = 0; i < 4; i++)
        if (!(prompts[i].text = render(&t, o->family, i, requests[i], &prompts[i].marks))) return 1;
    results res = {0};
    int n = 0, rc = 0;
    res.n_head = head_tokens(m, &prompts[0]);
    hx_source prime;
    /* the first process: cold, and it writes the prefix cache */
    if (new_source(m, &t, o, 1, &prime)) return 1;
    res.save = first_token(&prime, prompts[3].text, &prompts[3].marks, &n, &res.csave,
                           &res.tsave);
    hx_source_engine_end_turn(&prime); /* the head goes to disk after the first token */
    hx_turn_timing after;
    hx_source_engine_timing(&prime, &after);
    res.tsave.save_ms = after.save_ms;
    hx_source_free(&prime);
    for (int r = 0; r < o->reps && !rc; r++) rc = rep(m, &t, o, prompts, r, &res);
    if (rc) return 1;
    const int unc = res.n_prompt - res.n_head;
    printf("prompt %d tokens (system text + %d tools: %d cached; request and "
           "generation prompt: %d)\n", res.n_prompt, t.n, res.n_head, unc);
    printf("time to first token, median of %d, %d threads, %s KV "
           "(wall s / CPU s of all threads):\n", o->reps, o->threads,
           o->kv_q8 ? "Q8_0" : "F16");
    const double c = median(res.cold, o->reps), cc = median(res.ccold, o->reps);
    const double d = median(res.disk, o->reps), cd = median(res.cdisk, o->reps);
    const double w = median(res.mem, o->reps), cw = median(res.cmem, o->reps);
    const double p = median(res.prep, o->reps), cp = median(res.cprep, o->reps);
    printf("  cold (nothing cached)            %8.3f / %8.3f\n", c, cc);
    printf("  cold + writing the prefix cache  %8.3f / %8.3f (the first run of all; "
           "the write, after the first token: %.1f ms)\n", res.save, res.csave,
           res.tsave.save_ms);
    printf("  warm from the disk cache         %8.3f / %8.3f   cold/warm %.1fx wall, "
           "%.1fx CPU\n", d, cd, c / d, cc / cd);
    printf("  warm in-process (next request)   %8.3f / %8.3f   cold/warm %.1fx wall, "
           "%.1fx CPU\n", w, cw, c / w, cc / cw);
    printf("  warm, prepared while typing      %8.3f / %8.3f   cold/warm %.1fx wall, "
           "%.1fx CPU (hearth chat: the prompt's start decoded ahead)\n", p, cp, c / p,
           cc / cp);
    const double rms = render_ms(&t, o->family);
    printf("where the time went (ms, medians; the prompt's render is the planner's):\n");
    breakdown("cold", res.tcold, o->reps, rms);
    breakdown("warm from disk", res.tdisk, o->reps, rms);
    breakdown("warm in-process", res.tmem, o->reps, rms);
    breakdown("warm, prepared", res.tprep, o->reps, rms);
    printf("  the %d uncached tokens at the cold rate: %.3f / %.3f; warm from disk "
           "costs %.2fx that (CPU), warm in-process %.2fx\n", unc,
           c * unc / res.n_prompt, cc * unc / res.n_prompt,
           cd / (cc * unc / res.n_prompt), cw / (cc * unc / res.n_prompt));
    for (int i = 0; i < 4; i++) free(prompts[i].text), hx_tpl_marks_free(&prompts[i].marks);
    close_tools(&t);
    return 0;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o) || ensure_model(&o)) return 2;
    char home[] = "/tmp/hx_ttft_XXXXXX";
    if (!mkdtemp(home)) return 1;
    setenv("HEARTH_HOME", home, 1);
    hx_model_params mp = hx_model_default_params();
    hx_model *m = NULL;
    hx_err err = {0};
    if (hx_model_load(o.model, &mp, &m, &err)) {
        fprintf(stderr, "ttft: %s\n", err.msg);
        return 1;
    }
    printf("model %s (%.0f MB)\n", o.model, hx_model_size_bytes(m) / 1e6);
    loadavg("before");
    int rc = run(&o, m);
    loadavg("after");
    hx_model_free(m);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
    if (system(cmd)) {}
    return rc;
}
