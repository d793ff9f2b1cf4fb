/* engine.c: Hearth against llama.cpp on random-weight models of real shapes:
 * pp512 / tg128 at 1 and 2 threads, peak RSS, decode against read bandwidth.
 *
 * Usage: bench/engine [--big] [--reps N] [--threads 1,2] [--rows a,b]
 *                     [--pp N] [--tg N] [--cache DIR] [--hxref PATH]
 *                     [--readme FILE | --no-readme] [--cpu]
 * Models are written once by the project's GGUF writer (hx_mkmodel_write)
 * into the cache directory (default $XDG_CACHE_HOME/hearth/bench-models).
 * Every measurement runs in a fresh child process (Hearth: this program
 * re-executed with --child; llama.cpp: the reference harness `hxref
 * bench`), the two engines alternated, so the peak RSS of each is its own
 * (wait4). Medians over the repetitions; ratios are Hearth / llama.cpp. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "bench/bench.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "engine/engine_ext.h"

/* ---- the rows ---- */

typedef struct shape {
    const char *name, *arch;
    int embd, layers, heads, heads_kv, head_dim, ff;
    int experts, experts_used, ff_exp, tied;
} shape;

static const shape Q06 = {"Qwen3-0.6B", "qwen3", 1024, 28, 16, 8, 128, 3072, 0, 0, 0, 1};
static const shape Q4B = {"Qwen3-4B", "qwen3", 2560, 36, 32, 8, 128, 9728, 0, 0, 0, 1};
static const shape Q30 = {"Qwen3-30B-A3B", "qwen3moe", 2048, 48, 32, 4, 128, 6144,
                          128, 8, 768, 0};

typedef struct row {
    const char *id;      /* file name stem and --rows key */
    const shape *s;
    const char *ftype;   /* mkmodel --type */
    const char *tt;      /* mkmodel --tensor-types, or NULL */
    const char *label;   /* the type column */
    int big;             /* only with --big */
} row;

/* As llama-quantize writes real files: a tied embedding (the output head)
 * in Q6_K except for Q8_0. */
static const row ROWS[] = {
    {"qwen3-0.6b-q8_0", &Q06, "Q8_0", NULL, "Q8_0", 0},
    {"qwen3-0.6b-q4_0", &Q06, "Q4_0", "token_embd=Q6_K", "Q4_0 (Q6_K tied embedding)", 0},
    {"qwen3-0.6b-q4_k_m", &Q06, "Q4_K_M", "token_embd=Q6_K", "Q4_K_M", 0},
    {"qwen3-4b-q4_k_m", &Q4B, "Q4_K_M", "token_embd=Q6_K", "Q4_K_M", 0},
    {"qwen3-30b-a3b-q4_k_m", &Q30, "Q4_K_M", NULL, "Q4_K_M", 1},
};
#define N_ROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

/* ---- options ---- */

typedef struct opts {
    int big, reps, pp, tg, readme;
    int cpu;              /* rates from CPU seconds instead of wall seconds */
    int threads[4], n_threads;
    const char *rows;     /* comma list of row ids, or NULL: the default set */
    char cache[1024], hxref[1024], readme_path[1024];
    char args[1024];      /* the arguments as given, for the report's command line */
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: bench/engine [--big] [--reps N] [--threads 1,2] [--rows ID,...]\n"
               "                    [--pp N] [--tg N] [--cache DIR] [--hxref PATH]\n"
               "                    [--readme FILE | --no-readme] [--cpu]\n"
               "--cpu: tokens per CPU second (user + system, all threads) instead of per\n"
               "       wall second, for a busy machine (implies --no-readme)\n"
               "rows:");
    for (int i = 0; i < N_ROWS; i++) fprintf(f, " %s%s", ROWS[i].id, ROWS[i].big ? " (--big)" : "");
    fprintf(f, "\n");
}

static int parse_opts(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 3, o->pp = 512, o->tg = 128, o->readme = 1;
    o->threads[0] = 1, o->threads[1] = 2, o->n_threads = 2;
    const char *b = getenv("HEARTH_BUILD");
    snprintf(o->hxref, sizeof o->hxref, "%s/tests/ref/hxref", b && *b ? b : "build");
    snprintf(o->readme_path, sizeof o->readme_path, "bench/README.md");
    if (hx_path_cache(o->cache, sizeof o->cache - 32) < 0) return -1;
    strcat(o->cache, "/bench-models");
    for (int i = 1; i < argc; i++) {
        size_t k = strlen(o->args);
        snprintf(o->args + k, sizeof o->args - k, " %s", argv[i]);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--big")) o->big = 1;
        else if (!strcmp(a, "--cpu")) o->cpu = 1;
        else if (!strcmp(a, "--no-readme")) o->readme = 0;
        else if (!v) return -1;
        else if (!strcmp(a, "--reps")) o->reps = atoi(v), i++;
        else if (!strcmp(a, "--pp")) o->pp = atoi(v), i++;
        else if (!strcmp(a, "--tg")) o->tg = atoi(v), i++;
        else if (!strcmp(a, "--rows")) o->rows = v, i++;
        else if (!strcmp(a, "--cache")) snprintf(o->cache, sizeof o->cache, "%s", v), i++;
        else if (!strcmp(a, "--hxref")) snprintf(o->hxref, sizeof o->hxref, "%s", v), i++;
        else if (!strcmp(a, "--readme")) snprintf(o->readme_path, sizeof o->readme_path, "%s", v), i++;
        else if (!strcmp(a, "--threads")) {
            o->n_threads = 0;
            for (const char *p = v; *p && o->n_threads < 4; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
                o->threads[o->n_threads++] = atoi(p);
            i++;
        } else return -1;
    }
    if (o->cpu) o->readme = 0; /* the README table is wall-clock */
    if (o->reps < 1 || o->pp < 1 || o->tg < 1 || o->n_threads < 1) return -1;
    for (int i = 0; i < o->n_threads; i++)
        if (o->threads[i] < 1) return -1;
    return 0;
}

static int row_selected(const opts *o, const row *r)
{
    if (!o->rows) return !r->big || o->big;
    size_t n = strlen(r->id);
    for (const char *p = o->rows; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, r->id, n)) return 1;
        p += k + (p[k] != 0);
    }
    return 0;
}

/* ---- one measurement in a child process ---- */

static double now_s(void) { return hx_time_mono(); }

static void rand_ids(int32_t *ids, int n, int n_vocab, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = (int32_t)((seed >> 8) % (unsigned)n_vocab);
    }
}

/* Seconds for n tokens from an empty cache: one call (batch) or one
 * call per token; the CPU seconds spent into *cpu when not NULL. */
static double hearth_run(hx_ctx *c, int n_vocab, int n, int batch, unsigned seed, double *cpu)
{
    int32_t *ids = malloc(sizeof *ids * (size_t)n);
    HX_CHECK(ids != NULL);
    rand_ids(ids, n, n_vocab, seed);
    hx_ctx_truncate(c, 0);
    double c0 = bench_cpu_seconds(), t0 = now_s();
    int rc = HX_OK;
    if (batch) rc = hx_decode(c, ids, n, 0);
    else
        for (int i = 0; i < n && rc == HX_OK; i++) rc = hx_decode(c, &ids[i], 1, 0);
    double t = now_s() - t0;
    if (cpu) *cpu = bench_cpu_seconds() - c0;
    free(ids);
    if (rc != HX_OK) {
        fprintf(stderr, "bench/engine: hx_decode: %s\n", hx_ctx_errmsg(c));
        exit(1);
    }
    return t;
}

/* Reads the file once so that it is in the page cache before the load,
 * as llama.cpp's loader has it (it reads every weight it repacks and asks
 * the kernel to prefetch the rest): otherwise, when the file barely fits in
 * memory (the 30B-A3B row after a llama.cpp run), the weights that the
 * warm-up does not touch would come from the disk inside a timed run.
 * Through a small buffer, so the RSS gains nothing. */
static void page_in(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return; /* the load reports it */
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    char *buf = malloc((size_t)1 << 20);
    while (buf && read(fd, buf, (size_t)1 << 20) > 0) {}
    free(buf);
    close(fd);
}

/* The Hearth side of a measurement, as `hxref bench` does for llama.cpp:
 * a cache of pp + tg positions, a warm-up, then "pp_s tg_s pp_cpu_s
 * tg_cpu_s" on stdout (wall, then process CPU seconds). */
static int child_hearth(const char *path, int nth, int pp, int tg)
{
    hx_err err = {0};
    hx_model *m = NULL;
    hx_ctx *c = NULL;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    page_in(path);
    if (hx_model_load(path, &mp, &m, &err) != HX_OK) {
        fprintf(stderr, "bench/engine: %s: %s\n", path, err.msg);
        return 1;
    }
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = (pp + tg + 255) / 256 * 256;
    cp.n_batch = pp;
    cp.n_threads = nth;
    if (hx_ctx_new(m, &cp, &c, &err) != HX_OK) {
        fprintf(stderr, "bench/engine: context: %s\n", err.msg);
        return 1;
    }
    int nv = hx_model_hparams(m)->n_vocab;
    double c_pp, c_tg;
    hearth_run(c, nv, 16, 1, 7, NULL);
    hearth_run(c, nv, 2, 0, 7, NULL);
    double t_pp = hearth_run(c, nv, pp, 1, 1, &c_pp);
    double t_tg = hearth_run(c, nv, tg, 0, 2, &c_tg);
    printf("%.6f %.6f %.6f %.6f\n", t_pp, t_tg, c_pp, c_tg);
    hx_ctx_free(c);
    hx_model_free(m);
    return 0;
}

typedef struct result {
    double pp_s, tg_s;   /* seconds */
    double pp_cpu, tg_cpu; /* CPU seconds (user + system), 0 if not reported */
    double rss;          /* peak RSS, bytes */
    int ok;
} result;

/* Runs argv in a child with a time limit, reads "pp_s tg_s" from its
 * stdout, the peak RSS from wait4. */
static result run_child(char *const argv[], int limit_s)
{
    result r = {0};
    int fd[2];
    if (pipe(fd) != 0) return r;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return r;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]), close(fd[1]);
        alarm((unsigned)limit_s);
        execv(argv[0], argv);
        fprintf(stderr, "bench/engine: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char buf[256];
    size_t n = 0;
    ssize_t k;
    while (n + 1 < sizeof buf && ((k = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0 ||
                                  (k < 0 && errno == EINTR)))
        if (k > 0) n += (size_t)k;
    buf[n] = 0;
    close(fd[0]);
    int st = 0;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
        sscanf(buf, "%lf %lf %lf %lf", &r.pp_s, &r.tg_s, &r.pp_cpu, &r.tg_cpu) >= 2) {
        r.ok = 1;
        r.rss = (double)ru.ru_maxrss * 1024.0;
    } else {
        fprintf(stderr, "bench/engine: %s %s failed (%s %d)\n", argv[0], argv[1],
                WIFSIGNALED(st) ? "signal" : "status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    return r;
}

/* ---- read bandwidth probe ---- */

typedef struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_arg;

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#endif

static void *bw_thread(void *p)
{
    bw_arg *a = p;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        a->sum = read_avx2(a->p, a->n);
        return NULL;
    }
#endif
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= a->n; i += 4)
        s0 ^= a->p[i], s1 ^= a->p[i + 1], s2 ^= a->p[i + 2], s3 ^= a->p[i + 3];
    a->sum = s0 ^ s1 ^ s2 ^ s3;
    return NULL;
}

/* Read bandwidth (bytes/s) of nth threads each streaming its part of a
 * 512 MiB buffer: the median of 7 passes. */
static double read_bandwidth(int nth)
{
    size_t bytes = (size_t)512 << 20, words = bytes / 8;
    uint64_t *buf = hx_aligned_alloc(64, bytes);
    if (!buf) return 0;
    for (size_t i = 0; i < words; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
    double t[7];
    uint64_t sink = 0;
    for (int pass = 0; pass < 7; pass++) {
        pthread_t th[16];
        bw_arg a[16];
        int n = nth < 16 ? nth : 16;
        double t0 = now_s();
        for (int i = 0; i < n; i++) {
            a[i] = (bw_arg){buf + words / (size_t)n * (size_t)i, words / (size_t)n, 0};
            if (pthread_create(&th[i], NULL, bw_thread, &a[i]) != 0) bw_thread(&a[i]), th[i] = 0;
        }
        for (int i = 0; i < n; i++) {
            if (th[i]) pthread_join(th[i], NULL);
            sink ^= a[i].sum;
        }
        t[pass] = now_s() - t0;
    }
    free(buf);
    for (int i = 0; i < 7; i++)
        for (int j = i + 1; j < 7; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j], t[j] = x;
            }
    if (sink == 42) fprintf(stderr, " ");
    return (double)bytes / t[3];
}

/* ---- models ---- */

typedef struct model_info {
    double file_bytes;
    double token_bytes;  /* weight bytes one decode step reads */
    double kv_bytes;     /* F16 cache of n_ctx positions */
} model_info;

static int ensure_model(const opts *o, const row *r, char *path, size_t n)
{
    snprintf(path, n, "%s/%s-v1.gguf", o->cache, r->id);
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > 0) return 0;
    hx_err err = {0};
    if (hx_mkdirs(o->cache, &err) != HX_OK) {
        fprintf(stderr, "bench/engine: %s\n", err.msg);
        return -1;
    }
    const shape *s = r->s;
    hx_mkmodel_params p = hx_mkmodel_default_params();
    static char vocab[1024];
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-qwen2.gguf", hx_shared_data_dir());
    p.arch = s->arch;
    p.ftype = r->ftype;
    p.tensor_types = r->tt;
    p.vocab_path = access(vocab, R_OK) == 0 ? vocab : NULL;
    p.n_vocab = 151936;
    p.n_ctx = 40960;
    p.n_layer = s->layers;
    p.n_embd = s->embd;
    p.n_head = s->heads;
    p.n_head_kv = s->heads_kv;
    p.head_dim = s->head_dim;
    p.n_ff = s->ff;
    p.n_expert = s->experts;
    p.n_expert_used = s->experts_used;
    p.n_ff_exp = s->ff_exp;
    p.tied_output = s->tied;
    fprintf(stderr, "bench/engine: writing %s (%s %s) ...\n", path, s->name, r->ftype);
    if (hx_mkmodel_write(&p, path, &err) != HX_OK) {
        fprintf(stderr, "bench/engine: mkmodel %s: %s\n", r->id, err.msg);
        return -1;
    }
    return 0;
}

/* Sizes that the report needs: the file, the weight bytes one decode step
 * reads (all matrices; for MoE the used fraction of the experts; one row
 * of an untied embedding) and the F16 KV cache of n_ctx positions. */
static int model_info_of(const char *path, int n_ctx, model_info *mi)
{
    hx_err err = {0};
    hx_gguf *g = NULL;
    if (hx_gguf_open(path, &g, &err) != HX_OK) {
        fprintf(stderr, "bench/engine: %s: %s\n", path, err.msg);
        return -1;
    }
    uint32_t n_used = 0;
    hx_gguf_get_u32(g, "qwen3moe.expert_used_count", &n_used);
    int has_output = hx_gguf_find_tensor(g, "output.weight") != NULL;
    mi->file_bytes = (double)hx_gguf_file_size(g);
    mi->token_bytes = mi->kv_bytes = 0;
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        double b = (double)t->nbytes;
        if (!strcmp(t->name, "token_embd.weight") && has_output) b /= (double)t->ne[1];
        if (strstr(t->name, "_exps.") && t->ne[2] > 0) b *= (double)n_used / (double)t->ne[2];
        mi->token_bytes += b;
        if (strstr(t->name, ".attn_k.weight")) /* K and V rows of 2-byte values */
            mi->kv_bytes += 2.0 * (double)t->ne[1] * 2.0 * (double)n_ctx;
    }
    hx_gguf_close(g);
    return 0;
}

/* ---- the report ---- */

typedef struct cell {
    double pp[2], tg[2], rss[2]; /* medians: [0] Hearth, [1] llama.cpp */
    int ok[2];
} cell;

static double median(double *v, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (v[j] < v[i]) {
                double x = v[i];
                v[i] = v[j], v[j] = x;
            }
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void loadavg(char *buf, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, n, "%.2f %.2f %.2f", a, b, c);
    else snprintf(buf, n, "?");
    if (f) fclose(f);
}

static void first_line_of(const char *cmd, char *buf, size_t n)
{
    FILE *p = popen(cmd, "r");
    buf[0] = 0;
    if (p && fgets(buf, (int)n, p)) buf[strcspn(buf, "\n")] = 0;
    if (p) pclose(p);
    if (!buf[0]) snprintf(buf, n, "?");
}

static void cpu_model(char *buf, size_t n)
{
    first_line_of("sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -1", buf, n);
}

static const char *fmt_ratio(char *b, size_t n, double h, double l)
{
    if (h > 0 && l > 0) snprintf(b, n, "%.2f", h / l);
    else snprintf(b, n, "–");
    return b;
}

static const char *fmt_num(char *b, size_t n, double v, int ok)
{
    if (!ok) snprintf(b, n, "–");
    else if (v >= 100) snprintf(b, n, "%.0f", v);
    else snprintf(b, n, "%.1f", v);
    return b;
}

typedef struct report {
    const opts *o;
    const row *rows[N_ROWS];
    model_info mi[N_ROWS];
    cell cells[N_ROWS][4];
    double bw[4];
    int n_rows, have_ref;
    char load0[64], load1[64], date[64];
} report;

/* The Markdown section (tables and the 2-thread criteria). */
static void write_report(const report *R, hx_buf *b)
{
    const opts *o = R->o;
    char cpu[256], commit[64], dirty[8], t1[32], t2[32], t3[32], t4[32], t5[32], t6[32];
    cpu_model(cpu, sizeof cpu);
    first_line_of("git rev-parse --short HEAD 2>/dev/null", commit, sizeof commit);
    first_line_of("git status --porcelain --untracked-files=no engine 2>/dev/null | wc -l",
                  dirty, sizeof dirty);
    hx_buf_printf(b, "## Engine speed (`make bench-engine`, bench/engine.c)\n\n"
                     "<!-- bench-engine:begin (generated by make bench-engine; edits are lost) -->\n"
                     "Hearth against llama.cpp v0.5.0 (the npm build, see "
                     "../shared/docs/REFERENCE.md; `hxref bench`: default context "
                     "settings, F16 cache) on random-weight models of the real shapes, "
                     "written by `hx_mkmodel_write` (Qwen2 tokenizer). pp%d: one batch "
                     "of %d tokens; tg%d: %d single-token steps; both from an empty "
                     "cache after a warm-up, each measurement in a fresh process (Hearth's "
                     "reads the file once before loading it, so that it is in the page "
                     "cache as llama.cpp's loader has it), the "
                     "engines alternated, median of %d. Ratio = Hearth / llama.cpp. "
                     "Decode GB/s = weight bytes read per token (for MoE the used "
                     "experts) x tok/s, and its share of the read bandwidth measured "
                     "here with as many threads. Peak RSS from wait4; the limit is "
                     "file + F16 KV cache of %d positions + 10%%.\n\n",
                  o->pp, o->pp, o->tg, o->tg, o->reps, (o->pp + o->tg + 255) / 256 * 256);
    hx_buf_printf(b, "%s, commit %s%s, %s, ISA %s, load average %s before and %s after "
                     "(2 cores shared: wall-clock figures include waiting for a core).\n"
                     "Read bandwidth:",
                  R->date, commit, strcmp(dirty, "0") ? " + uncommitted engine changes" : "",
                  cpu, hx_isa_name(hx_isa_current()), R->load0, R->load1);
    for (int ti = 0; ti < o->n_threads; ti++)
        hx_buf_printf(b, "%s %d thread%s %.1f GB/s", ti ? "," : "", o->threads[ti],
                      o->threads[ti] > 1 ? "s" : "", R->bw[ti] / 1e9);
    hx_buf_printf(b, ".%s\n\n", R->have_ref ? "" : " llama.cpp reference missing: its columns are empty.");
    hx_buf_printf(b, "| model | type | file | thr | pp%d Hearth | llama.cpp | ratio | tg%d Hearth "
                     "| llama.cpp | ratio | decode GB/s Hearth (of bw) | llama.cpp (of bw) "
                     "| RSS Hearth | llama.cpp | limit |\n"
                     "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                  o->pp, o->tg);
    for (int ri = 0; ri < R->n_rows; ri++)
        for (int ti = 0; ti < o->n_threads; ti++) {
            const cell *c = &R->cells[ri][ti];
            const model_info *mi = &R->mi[ri];
            double gh = mi->token_bytes * c->tg[0], gl = mi->token_bytes * c->tg[1];
            hx_buf_printf(b, "| %s | %s | %.0f MB | %d | %s | %s | %s | ", R->rows[ri]->s->name,
                          R->rows[ri]->label, mi->file_bytes / 1e6, o->threads[ti],
                          fmt_num(t1, 32, c->pp[0], c->ok[0]), fmt_num(t2, 32, c->pp[1], c->ok[1]),
                          fmt_ratio(t3, 32, c->pp[0], c->pp[1]));
            hx_buf_printf(b, "%s | %s | %s | ", fmt_num(t4, 32, c->tg[0], c->ok[0]),
                          fmt_num(t5, 32, c->tg[1], c->ok[1]), fmt_ratio(t6, 32, c->tg[0], c->tg[1]));
            for (int e = 0; e < 2; e++) {
                double g = e ? gl : gh;
                if (c->ok[e]) hx_buf_printf(b, "%.1f (%.0f%%) | ", g / 1e9, 100.0 * g / R->bw[ti]);
                else hx_buf_printf(b, "– | ");
            }
            for (int e = 0; e < 2; e++) {
                if (c->ok[e]) hx_buf_printf(b, "%.0f MiB | ", c->rss[e] / 1048576.0);
                else hx_buf_printf(b, "– | ");
            }
            hx_buf_printf(b, "%.0f MiB |\n", 1.1 * (mi->file_bytes + mi->kv_bytes) / 1048576.0);
        }
    int t2i = -1;
    for (int ti = 0; ti < o->n_threads; ti++)
        if (o->threads[ti] == 2) t2i = ti;
    if (t2i >= 0 && R->have_ref) {
        hx_buf_printf(b, "\nThe criteria at 2 threads (decode ratio >= 0.97, prefill "
                         "ratio >= 1.2, RSS <= limit):\n\n");
        for (int ri = 0; ri < R->n_rows; ri++) {
            const cell *c = &R->cells[ri][t2i];
            const model_info *mi = &R->mi[ri];
            int ok = c->ok[0] && c->ok[1];
            double rd = ok ? c->tg[0] / c->tg[1] : 0, rp = ok ? c->pp[0] / c->pp[1] : 0;
            int rss_ok = c->ok[0] && c->rss[0] <= 1.1 * (mi->file_bytes + mi->kv_bytes);
            hx_buf_printf(b, "- %s %s: decode %s (%.2f), prefill %s (%.2f), RSS %s\n",
                          R->rows[ri]->s->name, R->rows[ri]->label, rd >= 0.97 ? "pass" : "FAIL", rd,
                          rp >= 1.2 ? "pass" : "FAIL", rp, rss_ok ? "pass" : "FAIL");
        }
    }
    hx_buf_printf(b, "\nCommand: `make bench-engine%s%s%s` (`nice build/bench/engine%s`; "
                     "--big adds the 30B-A3B row, an 18.6 GB file).\n"
                     "<!-- bench-engine:end -->\n",
                  *o->args ? " ARGS=\"" : "", *o->args ? o->args + 1 : "", *o->args ? "\"" : "",
                  o->args);
}

/* Replaces the generated section of the README (or appends it). */
static int update_readme(const char *path, const char *section, size_t len)
{
    hx_err err = {0};
    char *old = NULL;
    size_t old_len = 0;
    if (hx_read_file(path, 0, &old, &old_len, &err) != HX_OK) old = NULL;
    hx_buf out = {0};
    const char *head = "## Engine speed (`make bench-engine`", *end = "<!-- bench-engine:end -->\n";
    char *a = old ? strstr(old, head) : NULL, *z = a ? strstr(a, end) : NULL;
    if (a && z) {
        hx_buf_append(&out, old, (size_t)(a - old));
        hx_buf_append(&out, section, len);
        z += strlen(end);
        hx_buf_append(&out, z, old_len - (size_t)(z - old));
    } else {
        if (old) hx_buf_append(&out, old, old_len);
        if (old && old_len && old[old_len - 1] != '\n') hx_buf_append(&out, "\n", 1);
        hx_buf_append(&out, "\n", 1);
        hx_buf_append(&out, section, len);
    }
    int rc = hx_write_file_atomic(path, out.data, out.len, &err);
    if (rc != HX_OK) fprintf(stderr, "bench/engine: %s\n", err.msg);
    free(old);
    hx_buf_free(&out);
    return rc;
}

/* ---- the run ---- */

static result measure(const report *R, int engine, const char *model, int nth)
{
    char th[16], pp[16], tg[16], self[4096];
    snprintf(th, sizeof th, "%d", nth);
    snprintf(pp, sizeof pp, "%d", R->o->pp);
    snprintf(tg, sizeof tg, "%d", R->o->tg);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    char *ha[] = {self, "--child", (char *)model, th, pp, tg, NULL};
    char *la[] = {(char *)R->o->hxref, "bench", (char *)model, th, pp, tg, NULL};
    return run_child(engine ? la : ha, 1800);
}

static void run_all(report *R, char paths[][1024])
{
    const opts *o = R->o;
    double total = 0, done = 0;
    for (int ri = 0; ri < R->n_rows; ri++)
        for (int ti = 0; ti < o->n_threads; ti++)
            total += R->mi[ri].file_bytes / o->threads[ti] * o->reps * (R->have_ref ? 2 : 1);
    hx_progress pg;
    hx_progress_start(&pg, "bench-engine", total);
    for (int ri = 0; ri < R->n_rows; ri++)
        for (int ti = 0; ti < o->n_threads; ti++) {
            double pp[2][16], tg[2][16], rss[2][16];
            int n[2] = {0, 0};
            for (int rep = 0; rep < o->reps && rep < 16; rep++)
                for (int k = 0; k < 2; k++) {
                    int e = (rep + k) % 2; /* alternate who goes first */
                    if (e == 1 && !R->have_ref) continue;
                    char extra[128];
                    snprintf(extra, sizeof extra, "%s %dT %s", R->rows[ri]->id, o->threads[ti],
                             e ? "llama.cpp" : "hearth");
                    hx_progress_update(&pg, done, extra);
                    result r = measure(R, e, paths[ri], o->threads[ti]);
                    done += R->mi[ri].file_bytes / o->threads[ti];
                    if (!r.ok) continue;
                    if (o->cpu && (r.pp_cpu <= 0 || r.tg_cpu <= 0)) {
                        fprintf(stderr, "bench/engine: %s reported no CPU time\n",
                                e ? "hxref" : "hearth");
                        continue;
                    }
                    pp[e][n[e]] = o->pp / (o->cpu ? r.pp_cpu : r.pp_s);
                    tg[e][n[e]] = o->tg / (o->cpu ? r.tg_cpu : r.tg_s);
                    rss[e][n[e]++] = r.rss;
                }
            cell *c = &R->cells[ri][ti];
            for (int e = 0; e < 2; e++) {
                c->ok[e] = n[e] > 0;
                c->pp[e] = median(pp[e], n[e]);
                c->tg[e] = median(tg[e], n[e]);
                c->rss[e] = median(rss[e], n[e]);
            }
            hx_progress_update(&pg, done, NULL);
            printf("%-22s %dT %s pp%d %7.1f vs %7.1f (%.2f)  tg%d %6.1f vs %6.1f (%.2f)  "
                   "RSS %5.0f vs %5.0f MiB\n",
                   R->rows[ri]->id, o->threads[ti], o->cpu ? "CPU-time" : "wall", o->pp, c->pp[0], c->pp[1],
                   c->pp[1] > 0 ? c->pp[0] / c->pp[1] : 0, o->tg, c->tg[0], c->tg[1],
                   c->tg[1] > 0 ? c->tg[0] / c->tg[1] : 0, c->rss[0] / 1048576.0,
                   c->rss[1] / 1048576.0);
            fflush(stdout);
        }
    hx_progress_finish(&pg);
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "--child"))
        return child_hearth(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    static opts o;
    if (parse_opts(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    static report R;
    static char paths[N_ROWS][1024];
    R.o = &o;
    R.have_ref = access(o.hxref, X_OK) == 0;
    if (!R.have_ref)
        fprintf(stderr, "bench/engine: %s missing (make reference, then make test or the "
                        "bench-engine target builds it): Hearth only\n", o.hxref);
    loadavg(R.load0, sizeof R.load0);
    time_t now = time(NULL);
    strftime(R.date, sizeof R.date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    for (int i = 0; i < N_ROWS; i++) {
        if (!row_selected(&o, &ROWS[i])) continue;
        if (ensure_model(&o, &ROWS[i], paths[R.n_rows], sizeof paths[0]) != 0) return 1;
        if (model_info_of(paths[R.n_rows], (o.pp + o.tg + 255) / 256 * 256, &R.mi[R.n_rows]) != 0)
            return 1;
        R.rows[R.n_rows++] = &ROWS[i];
    }
    if (R.n_rows == 0) {
        usage(stderr);
        return 2;
    }
    for (int ti = 0; ti < o.n_threads; ti++) {
        R.bw[ti] = read_bandwidth(o.threads[ti]);
        printf("read bandwidth, %d thread(s): %.1f GB/s\n", o.threads[ti], R.bw[ti] / 1e9);
        fflush(stdout);
    }
    run_all(&R, paths);
    loadavg(R.load1, sizeof R.load1);
    hx_buf b = {0};
    write_report(&R, &b);
    fwrite(b.data, 1, b.len, stdout);
    int rc = o.readme ? update_readme(o.readme_path, b.data, b.len) : HX_OK;
    hx_buf_free(&b);
    return rc == HX_OK ? 0 : 1;
}
