/* maskbench.c: MaskBench for engine/grammar: every schema compiled, every
 * test instance serialized as Python's json.dumps and fed token by token.
 *
 * Usage: maskbench [--data DIR] [--vocab GGUF] [--limit N] [--every K]
 *                  [--strict] [--list] [--quiet]
 * Protocol (jsonschemabench/maskbench runner.py): instances serialized with
 * json.dumps defaults (", " and ": ", raw UTF-8), tokenized without BOS;
 * each sample times mask + bit test + commit for one token; a run stops at
 * the first disallowed token; no end check unless --strict. Each schema runs
 * in a worker process (crash isolation) with a 15 s limit. Samples and the
 * limit are CPU time (the machine is shared; --wall for wall-clock time). */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine/engine.h"

#define TIMEOUT_S 15

#include "bench/maskbench_run.h"

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* A worker process runs the schemas paths[from..n) in turn and writes
 * each result and its samples to fd; a crash or a timeout (SIGALRM after
 * TIMEOUT_S on one schema) ends it, and the parent starts a new worker on
 * the next schema. Forking once per worker, not per schema, keeps the
 * copy-on-write faults of a fresh fork out of the timings. */
static void worker(const mb_ctx *cx, char **paths, size_t from, size_t n, int fd, uint32_t *samples)
{
    result r;
    struct itimerval on = {{0, 0}, {TIMEOUT_S, 0}}, off = {{0, 0}, {0, 0}};
    for (size_t i = from; i < n; i++) {
        /* CPU time (SIGPROF), as the samples: on the shared machine a
         * wall-clock limit would count other people's work */
        setitimer(cx->wall ? ITIMER_REAL : ITIMER_PROF, &on, NULL);
        run_schema(cx, paths[i], &r, samples);
        setitimer(cx->wall ? ITIMER_REAL : ITIMER_PROF, &off, NULL);
        if (write_all(fd, &r, sizeof r) || write_all(fd, samples, (size_t)r.n_samples * 4)) _exit(1);
    }
    _exit(0);
}

typedef struct runner {
    pid_t pid;
    int fd;
} runner;

static int start_worker(runner *w, const mb_ctx *cx, char **paths, size_t from, size_t n, uint32_t *samples)
{
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(stdout);
    fflush(stderr);
    w->pid = fork();
    if (w->pid < 0) return -1;
    if (w->pid == 0) {
        close(fd[0]);
        worker(cx, paths, from, n, fd[1], samples);
    }
    close(fd[1]);
    w->fd = fd[0];
    return 0;
}

/* Next result from the worker: 0 ok, 1 crash, 2 timeout (worker gone). */
static int next_result(runner *w, result *r, uint32_t *samples)
{
    if (!read_all(w->fd, r, sizeof *r) && !read_all(w->fd, samples, (size_t)r->n_samples * 4)) return 0;
    int st = 0;
    close(w->fd);
    waitpid(w->pid, &st, 0);
    w->pid = -1;
    return WIFSIGNALED(st) && (WTERMSIG(st) == SIGALRM || WTERMSIG(st) == SIGPROF) ? 2 : 1;
}

/* ---- driver ---- */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint32_t *v, size_t n, double p)
{
    if (!n) return 0;
    size_t i = (size_t)((double)n * p / 100.0);
    return v[i < n ? i : n - 1] / 1000.0;
}

int main(int argc, char **argv)
{
    char data[1024], vpath[1024];
    long limit = -1, every = 1;
    int list = 0, quiet = 0;
    mb_ctx cx = {0};
    snprintf(data, sizeof data, "%s/maskbench/data", hx_shared_data_dir());
    snprintf(vpath, sizeof vpath, "%s/vocab/ggml-vocab-llama-bpe.gguf", hx_shared_data_dir());
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) snprintf(data, sizeof data, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) snprintf(vpath, sizeof vpath, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = atol(argv[++i]);
        else if (!strcmp(argv[i], "--every") && i + 1 < argc) every = atol(argv[++i]);
        else if (!strcmp(argv[i], "--strict")) cx.strict = 1;
        else if (!strcmp(argv[i], "--wall")) cx.wall = 1;
        else if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else { fprintf(stderr, "usage: maskbench [--data DIR] [--vocab GGUF] [--limit N] [--every K] [--strict] [--wall] [--list] [--quiet]\n"); return 2; }
    }
    hx_err err = {0};
    hx_gguf *gg;
    hx_vocab *v;
    if (hx_gguf_open(vpath, &gg, &err) || hx_vocab_load(gg, &v, &err)) {
        fprintf(stderr, "maskbench: %s: %s\n", vpath, err.msg);
        return 1;
    }
    hx_gguf_close(gg);
    if (hx_gvocab_from_vocab(v, &cx.gv, &err)) { fprintf(stderr, "maskbench: %s\n", err.msg); return 1; }
    cx.vocab = v;

    DIR *d = opendir(data);
    if (!d) { fprintf(stderr, "maskbench: cannot open %s\n", data); return 1; }
    char **files = NULL;
    size_t nf = 0, capf = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        if (nf == capf) { capf = capf ? capf * 2 : 1024; files = realloc(files, capf * sizeof *files); }
        files[nf++] = hx_strdup(e->d_name);
    }
    closedir(d);
    qsort(files, nf, sizeof *files, cmp_str);

    uint32_t *samples = malloc(MAX_SAMPLES * 4);
    size_t cap_all = 1 << 22, n_all = 0, n_comp = 0;
    uint32_t *all = malloc(cap_all * 4), *comp = malloc(nf * 4 + 4);
    long cnt[4] = {0}, crashes = 0, timeouts = 0, total = 0;
    hx_progress pr;
    size_t todo = 0;
    for (size_t i = 0; i < nf; i += (size_t)every) todo++;
    if (limit >= 0 && (size_t)limit < todo) todo = (size_t)limit;
    hx_progress_start(&pr, "maskbench", (double)todo);
    double t_start = hx_time_mono();
    char **paths = calloc(todo + 1, sizeof *paths);
    for (size_t i = 0, k = 0; i < nf && k < todo; i += (size_t)every, k++) {
        paths[k] = malloc(strlen(data) + strlen(files[i]) + 2);
        sprintf(paths[k], "%s/%s", data, files[i]);
    }
    runner w = {-1, -1};
    for (size_t k = 0; k < todo; k++) {
        result r;
        if (w.pid < 0 && start_worker(&w, &cx, paths, k, todo, samples)) { fprintf(stderr, "maskbench: fork failed\n"); return 1; }
        int st = next_result(&w, &r, samples);
        const char *name = strrchr(paths[k], '/') + 1;
        total++;
        if (st == 1) { crashes++; if (!quiet) fprintf(stderr, "CRASH %s\n", name); }
        else if (st == 2) { timeouts++; if (!quiet) fprintf(stderr, "TIMEOUT %s\n", name); }
        else {
            cnt[r.status]++;
            if (r.status != R_COMPILE) comp[n_comp++] = r.compile_ns;
            if (list && r.status != R_PASS) printf("%s\t%s\t%s\n", r.status == 1 ? "compile" : r.status == 2 ? "validation" : "INVALIDATION", name, r.msg);
            if (r.status == R_INVALIDATION && !quiet) fprintf(stderr, "INVALIDATION %s: %s\n", name, r.msg);
            if (n_all + (size_t)r.n_samples > cap_all) {
                while (n_all + (size_t)r.n_samples > cap_all) cap_all *= 2;
                all = realloc(all, cap_all * 4);
            }
            memcpy(all + n_all, samples, (size_t)r.n_samples * 4);
            n_all += (size_t)r.n_samples;
        }
        char extra[96];
        snprintf(extra, sizeof extra, "pass %ld  inval %ld", cnt[0], cnt[3]);
        hx_progress_update(&pr, (double)total, extra);
    }
    if (w.pid > 0) { close(w.fd); waitpid(w.pid, NULL, 0); }
    for (size_t k = 0; k < todo; k++) free(paths[k]);
    free(paths);
    hx_progress_finish(&pr);
    qsort(all, n_all, 4, cmp_u32);
    qsort(comp, n_comp, 4, cmp_u32);
    double sum = 0;
    for (size_t i = 0; i < n_all; i++) sum += all[i];
    printf("maskbench: %ld schemas (%s), %.1f s%s, %s time\n", total, data, hx_time_mono() - t_start,
           cx.strict ? ", strict" : "", cx.wall ? "wall-clock" : "thread CPU");
    printf("  passing              %ld\n", cnt[R_PASS]);
    printf("  compile errors       %ld\n", cnt[R_COMPILE]);
    printf("  validation errors    %ld\n", cnt[R_VALIDATION]);
    printf("  invalidation errors  %ld\n", cnt[R_INVALIDATION]);
    printf("  crashes              %ld\n", crashes);
    printf("  timeouts (15 s)      %ld\n", timeouts);
    printf("  masks                %zu\n", n_all);
    printf("  mask us avg/p50/p99/p99.9/max  %.1f / %.1f / %.1f / %.1f / %.1f\n", n_all ? sum / (double)n_all / 1000.0 : 0,
           pct(all, n_all, 50), pct(all, n_all, 99), pct(all, n_all, 99.9), n_all ? all[n_all - 1] / 1000.0 : 0);
    printf("  compile us p50/p99   %.1f / %.1f\n", pct(comp, n_comp, 50), pct(comp, n_comp, 99));
    for (size_t i = 0; i < nf; i++) free(files[i]);
    free(files);
    free(samples);
    free(all);
    free(comp);
    hx_gvocab_free(cx.gv);
    hx_vocab_free(v);
    return crashes || timeouts || cnt[R_INVALIDATION] ? 1 : 0;
}
