/* slices.c: inference in slices (hx_step): the lengths of the slices and
 * the frame delays of a simulated 60 Hz UI thread beside it. `make
 * bench-slices`.
 *
 * usage: slices [--model FILE]... [--prompt N] [--gen N] [--budget MS]
 *               [--threads N] [--secs S]
 * For each model: a prompt of N tokens in passes of 64 and N greedy
 * tokens, run (1) in whole passes, timing each pass; (2) by hx_step with
 * the budget on an inference thread at nice 10, and (3) at SCHED_IDLE,
 * each beside a UI thread at normal priority that wakes every 16.7 ms,
 * records how late it woke and then works 2 ms (a frame's layout and
 * paint); (4) driven from the UI thread itself: each frame one hx_step of
 * the budget. A UI thread alone gives the baseline delays. One pass
 * first reads every weight (no page faults in the figures). Without
 * --model, bench/engine's Qwen3-0.6B-shaped file in
 * $XDG_CACHE_HOME/hearth/bench-models. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "engine/engine.h"

#define MAX_MODELS 8
#define FRAME_S (1.0 / 60.0)
#define UI_WORK_S 0.002

typedef struct opts {
    const char *models[MAX_MODELS];
    int n_models, prompt, gen, threads;
    double budget_ms;
} opts;

/* Samples of a duration, in seconds. */
typedef struct series {
    double *v;
    int n, cap;
} series;

static void add(series *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
        if (!s->v) abort();
    }
    s->v[s->n++] = x;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "p50 p99 max" in ms. */
static void show(const char *what, series *s)
{
    if (!s->n) {
        printf("  %-28s (none)\n", what);
        return;
    }
    qsort(s->v, (size_t)s->n, sizeof *s->v, cmp_d);
    int i99 = (int)ceil(0.99 * s->n) - 1;
    double sum = 0;
    for (int i = 0; i < s->n; i++) sum += s->v[i];
    printf("  %-28s n %6d  p50 %7.2f  p99 %7.2f  max %7.2f ms, sum %.2f s\n", what, s->n,
           s->v[s->n / 2] * 1e3, s->v[i99 < 0 ? 0 : i99] * 1e3, s->v[s->n - 1] * 1e3, sum);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- the workload: prompt, then greedy tokens ---- */

typedef struct job {
    hx_model *m;
    const opts *o;
    int policy;        /* 0 normal, 1 nice 10, 2 SCHED_IDLE */
    series slices;     /* hx_step call lengths, or whole passes */
    series cpu;        /* the same in CPU time of the stepping thread */
    volatile int finished;
    double seconds;    /* wall time of the workload */
    int rc;
} job;

/* CPU seconds of the calling thread: a slice's own work, without the
 * time other processes held the core (the machine is shared). */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Times one call of fn into j's series. */
#define TIMED(j, call)                                                          \
    do {                                                                        \
        double w0_ = hx_time_mono(), c0_ = thread_cpu();                        \
        call;                                                                   \
        add(&(j)->slices, hx_time_mono() - w0_);                                \
        add(&(j)->cpu, thread_cpu() - c0_);                                     \
    } while (0)

static int greedy(const hx_ctx *c)
{
    const float *lg = hx_ctx_logits(c, -1);
    int n = hx_model_hparams(hx_ctx_model(c))->n_vocab, best = 0;
    for (int i = 1; i < n; i++) best = lg[i] > lg[best] ? i : best;
    return best;
}

/* One call run by hx_step slices (budget_ms > 0, each timed) or in whole
 * passes of at most 64 tokens (each timed). */
static int run_call(hx_ctx *c, job *j, const int32_t *tok, int n)
{
    if (j->o->budget_ms <= 0) {
        for (int off = 0; off < n; off += 64) {
            int rc;
            TIMED(j, rc = hx_decode(c, tok + off, n - off < 64 ? n - off : 64, 0));
            if (rc) return rc;
        }
        return HX_OK;
    }
    int done = 0, rc = hx_step_begin(c, tok, n, 0, 64);
    while (!rc && !done) TIMED(j, rc = hx_step(c, j->o->budget_ms, &done));
    return rc;
}

static int workload(hx_ctx *c, job *j)
{
    const int nv = hx_model_hparams(j->m)->n_vocab;
    int32_t *tok = malloc((size_t)j->o->prompt * sizeof *tok);
    if (!tok) return HX_ERR_NOMEM;
    for (int i = 0; i < j->o->prompt; i++) tok[i] = (int32_t)((i * 7919 + 13) % nv);
    int rc = run_call(c, j, tok, j->o->prompt);
    for (int g = 0; !rc && g < j->o->gen; g++) {
        int32_t t = greedy(c);
        rc = run_call(c, j, &t, 1);
    }
    free(tok);
    return rc;
}

static hx_ctx *new_ctx(job *j)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = j->o->prompt + j->o->gen + 8;
    cp.n_threads = j->o->threads;
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(j->m, &cp, &c, &err)) fprintf(stderr, "slices: %s\n", err.msg);
    return c;
}

/* The inference thread: lowers its own priority first, so that the pool's
 * workers, created by it, inherit it. */
static void *infer_main(void *p)
{
    job *j = p;
    if (j->policy == 1 && setpriority(PRIO_PROCESS, 0, 10))
        perror("slices: setpriority");
    if (j->policy == 2) {
        struct sched_param sp = {0};
        if (sched_setscheduler(0, SCHED_IDLE, &sp)) perror("slices: SCHED_IDLE");
    }
    hx_ctx *c = new_ctx(j);
    double t0 = hx_time_mono();
    j->rc = c ? workload(c, j) : HX_ERR_NOMEM;
    j->seconds = hx_time_mono() - t0;
    hx_ctx_free(c);
    j->finished = 1;
    return NULL;
}

/* ---- the UI thread ---- */

static void sleep_until(double t)
{
    struct timespec ts = {(time_t)t, (long)((t - floor(t)) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) {}
}

static void busy(double s)
{
    double end = hx_time_mono() + s;
    while (hx_time_mono() < end) {}
}

/* Frames until *stop (or for secs when stop is NULL): the delay of each
 * wake-up after its frame's start into delays. */
static void ui_frames(volatile int *stop, double secs, series *delays)
{
    double next = hx_time_mono() + FRAME_S, end = hx_time_mono() + secs;
    while (stop ? !*stop : hx_time_mono() < end) {
        sleep_until(next);
        double now = hx_time_mono();
        add(delays, now - next);
        busy(UI_WORK_S);
        next += FRAME_S;
        while (next < hx_time_mono()) next += FRAME_S; /* frames missed */
    }
}

/* (4): the UI thread drives: a frame's work, then one hx_step of the
 * budget, then sleep to the next frame. */
static void driven(job *j, series *delays)
{
    hx_ctx *c = new_ctx(j);
    if (!c) return;
    const int nv = hx_model_hparams(j->m)->n_vocab;
    int32_t *tok = malloc((size_t)j->o->prompt * sizeof *tok);
    for (int i = 0; tok && i < j->o->prompt; i++) tok[i] = (int32_t)((i * 7919 + 13) % nv);
    int made = 0, done = 0, rc = tok ? hx_step_begin(c, tok, j->o->prompt, 0, 64) : HX_ERR_NOMEM;
    double next = hx_time_mono() + FRAME_S, t0 = hx_time_mono();
    while (!rc) {
        sleep_until(next);
        add(delays, hx_time_mono() - next);
        busy(UI_WORK_S);
        TIMED(j, rc = hx_step(c, j->o->budget_ms, &done));
        if (!rc && done) {
            if (made++ == j->o->gen) break;
            int32_t t = greedy(c);
            rc = hx_step_begin(c, &t, 1, 0, 64);
        }
        next += FRAME_S;
        while (next < hx_time_mono()) next += FRAME_S;
    }
    j->seconds = hx_time_mono() - t0;
    j->rc = rc;
    free(tok);
    hx_ctx_free(c);
}

static void report(const char *mode, job *j, series *delays)
{
    printf(" %s: %d+%d tokens in %.1f s%s\n", mode, j->o->prompt, j->o->gen, j->seconds,
           j->rc ? " (FAILED)" : "");
    show(j->o->budget_ms > 0 ? "slices" : "whole passes (<= 64 tokens)", &j->slices);
    show("  the same, thread CPU time", &j->cpu);
    if (delays) show("UI frame delays", delays);
}

static void run_beside(hx_model *m, opts *o, int policy, const char *mode)
{
    job j = {.m = m, .o = o, .policy = policy};
    series d = {0};
    pthread_t th;
    if (pthread_create(&th, NULL, infer_main, &j)) return;
    ui_frames(&j.finished, 0, &d);
    pthread_join(th, NULL);
    report(mode, &j, &d);
}

static void bench_model(const char *path, opts *o)
{
    hx_model *m;
    hx_err err = {0};
    if (hx_model_load(path, NULL, &m, &err)) {
        fprintf(stderr, "slices: %s: %s\n", path, err.msg);
        return;
    }
    const hx_hparams *hp = hx_model_hparams(m);
    printf("%s (%s, %d layers, width %d%s), %d threads, load %.2f\n", path, hp->arch,
           hp->n_layer, hp->n_embd, hp->n_expert ? ", MoE" : "", o->threads, bench_load1());
    job warm = {.m = m, .o = o};
    hx_ctx *c = new_ctx(&warm); /* every weight read once: no page faults later */
    int32_t t[64] = {0};
    if (c && (hx_decode(c, t, 64, 0) || hx_decode(c, t, 1, 0))) fprintf(stderr, "slices: warm-up failed\n");
    hx_ctx_free(c);
    series base = {0};
    ui_frames(NULL, 2.0, &base);
    printf(" UI thread alone, 2 s:\n");
    show("UI frame delays", &base);
    const double budget = o->budget_ms;
    o->budget_ms = 0;
    run_beside(m, o, 0, "whole passes, normal priority");
    o->budget_ms = budget;
    run_beside(m, o, 0, "hx_step slices, normal priority");
    run_beside(m, o, 1, "hx_step slices, nice 10");
    run_beside(m, o, 2, "hx_step slices, SCHED_IDLE");
    job j = {.m = m, .o = o};
    series d = {0};
    driven(&j, &d);
    report("driven by the UI thread, one slice a frame", &j, &d);
    hx_model_free(m);
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.prompt = 256, .gen = 16, .threads = 2, .budget_ms = 8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return -1;
        if (!strcmp(a, "--model") && o->n_models < MAX_MODELS) o->models[o->n_models++] = v;
        else if (!strcmp(a, "--prompt")) o->prompt = atoi(v);
        else if (!strcmp(a, "--gen")) o->gen = atoi(v);
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--budget")) o->budget_ms = atof(v);
        else return -1;
        i++;
    }
    return o->prompt > 0 && o->gen >= 0 && o->threads > 0 && o->budget_ms > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: slices [--model FILE]... [--prompt N] [--gen N] "
                        "[--budget MS] [--threads N]\n");
        return 2;
    }
    static char dflt[1024];
    if (!o.n_models) {
        if (hx_path_cache(dflt, sizeof dflt - 40) < 0) return 1;
        strcat(dflt, "/bench-models/qwen3-0.6b-q4_0-v1.gguf");
        o.models[o.n_models++] = dflt;
    }
    printf("slices: budget %.1f ms, prompt %d, %d tokens; %ld CPUs\n", o.budget_ms,
           o.prompt, o.gen, sysconf(_SC_NPROCESSORS_ONLN));
    for (int i = 0; i < o.n_models; i++) bench_model(o.models[i], &o);
    return 0;
}
