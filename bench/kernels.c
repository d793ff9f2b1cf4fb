/* kernels.c: micro benchmark of the matmul kernels: GEMV (one token) GB/s
 * of weights streamed per type, and GEMM (N tokens) GMAC/s, per ISA; and
 * of attention: a pass of a turn's tokens over a long cached prefix.
 * Usage: bench/kernels [threads] [type-name ...]; HEARTH_ISA caps the ISA,
 * HX_BENCH_N sets the GEMM's token count (default 64).
 * bench/kernels [threads] attn: the attention bench alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "bench/bench.h"
#include "engine/ctx_int.h"
#include "engine/engine_ext.h"
#include "modelfile/model_write.h"

static float frand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return ((int32_t)*s) / 2147483648.0f;
}

static int g_use_cpu = 1, g_nth = 1;

/* Median of 5 timings of f (CPU time / threads, or wall time with
 * HX_BENCH_WALL=1). */
static double time_median(void (*f)(void *), void *arg)
{
    double t[5];
    for (int i = 0; i < 5; i++) {
        double t0 = g_use_cpu ? bench_cpu_seconds() : hx_time_mono();
        f(arg);
        t[i] = (g_use_cpu ? (bench_cpu_seconds() - t0) / g_nth : hx_time_mono() - t0);
    }
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j];
                t[j] = x;
            }
    return t[2];
}

typedef struct run_arg {
    hx_threadpool *tp;
    const void *W;
    int wtype;
    int64_t K, M, N;
    const float *X;
    float *Y;
    int reps;
} run_arg;

static void run_mm(void *p)
{
    run_arg *r = p;
    for (int i = 0; i < r->reps; i++)
        hx_matmul(r->tp, r->W, r->wtype, r->K, r->M, r->X, r->N, r->Y);
}

static void bench_type(hx_threadpool *tp, int wtype)
{
    /* Weights of about 64 MB (more than the L3) for the GEMV. */
    const int64_t K = 4096;
    size_t rb = hx_type_row_bytes(wtype, K);
    int64_t M = (int64_t)(64u << 20) / (int64_t)rb;
    M -= M % 64;
    const char *ne = getenv("HX_BENCH_N"); /* GEMM tokens, default 64 */
    int64_t N = ne && atoi(ne) > 0 ? atoi(ne) : 64;
    char *W = malloc(rb * (size_t)M);
    float *row = malloc(sizeof(float) * K), *X = malloc(sizeof(float) * K * (size_t)N);
    float *Y = malloc(sizeof(float) * (size_t)M * (size_t)N);
    uint32_t s = 1;
    if (!W || !row || !X || !Y) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t m = 0; m < M; m++) {
        if (m < 64) for (int64_t k = 0; k < K; k++) row[k] = frand(&s);
        hx_quantize_row(wtype, row, W + (size_t)m * rb, K, NULL);
        if (m >= 64) memcpy(W + (size_t)m * rb, W + (size_t)(m % 64) * rb, rb);
    }
    for (int64_t i = 0; i < K * N; i++) X[i] = frand(&s);
    run_arg r = {tp, W, wtype, K, M, 1, X, Y, 3};
    run_mm(&r); /* warm up (page faults) */
    double t = time_median(run_mm, &r) / r.reps;
    double gbs = (double)rb * M / t / 1e9;
    /* GEMM: N tokens over the first 1024 rows (4 MB-ish, cache-resident). */
    run_arg g = {tp, W, wtype, K, 1024, N, X, Y, 2};
    run_mm(&g);
    double tg = time_median(run_mm, &g) / g.reps;
    double gmac = (double)K * 1024 * (double)N / tg / 1e9;
    printf("%-5s %-6s gemv %7.2f GB/s (%6.2f ms for %lld x %lld)   gemm N=%lld %7.1f GMAC/s\n",
           hx_type_name(wtype), hx_isa_name(hx_isa_current()), gbs, t * 1e3,
           (long long)M, (long long)K, (long long)N, gmac);
    free(W);
    free(row);
    free(X);
    free(Y);
}

/* ---- attention of a turn's pass over a long cached prefix ---- */
enum { ATT_PREFIX = 3883, ATT_MAX_Q = 72 };

typedef struct attn_arg {
    hx_ctx *c;
    const int32_t *t;
    int n_q;
} attn_arg;

/* The pass of n_q tokens after the prefix, as the agent's source runs
 * the rest of a prompt (the whole prompt's path). */
static void run_attn(void *p)
{
    attn_arg *a = p;
    hx_prefill_params pp = hx_prefill_default_params();
    pp.whole_prompt = 1;
    int done = 0;
    hx_ctx_truncate(a->c, ATT_PREFIX);
    if (hx_prefill(a->c, a->t + ATT_PREFIX, a->n_q, &pp, &done))
        fprintf(stderr, "kernels: %s\n", hx_ctx_errmsg(a->c));
}

/* One layer with n_head query heads over n_head_kv KV heads of 128 and a
 * narrow residual and FFN (256), so that the pass is mostly attention:
 * passes of 38 and 72 tokens after ATT_PREFIX positions, F16 and 8-bit
 * KV, the attention's tasks now and as before (attn_before), alternately
 * in the same run. */
static int bench_attn_shape(const char *dir, const char *name, int n_head, int n_head_kv,
                            int nth)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, name);
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3";
    p.ftype = "Q8_0";
    p.n_vocab = 256, p.n_layer = 1, p.n_embd = 256, p.n_head = n_head;
    p.n_head_kv = n_head_kv, p.head_dim = 128, p.n_ff = 256, p.n_ctx = 4096;
    p.tied_output = 1;
    hx_err err = {0};
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    if (hx_mkmodel_write(&p, path, &err) || hx_model_load(path, &mp, &m, &err)) {
        fprintf(stderr, "kernels: %s\n", err.msg);
        return -1;
    }
    int32_t t[ATT_PREFIX + ATT_MAX_Q];
    for (int i = 0; i < ATT_PREFIX + ATT_MAX_Q; i++) t[i] = (int32_t)((i * 37 + 11) % 200);
    for (int q8 = 0; q8 < 2; q8++) {
        hx_ctx_params cp = hx_ctx_default_params();
        cp.n_ctx = 4096, cp.n_threads = nth, cp.kv_q8 = q8;
        hx_ctx *c = NULL;
        attn_arg a = {NULL, t, 0};
        if (hx_ctx_new(m, &cp, &c, &err)) {
            fprintf(stderr, "kernels: %s\n", err.msg);
            break;
        }
        a.c = c;
        hx_prefill_params pp = hx_prefill_default_params();
        int done = 0;
        if (hx_prefill(c, t, ATT_PREFIX, &pp, &done)) { /* the cached prefix */
            fprintf(stderr, "kernels: %s\n", hx_ctx_errmsg(c));
            hx_ctx_free(c);
            break;
        }
        for (int n_q = 38; n_q <= ATT_MAX_Q; n_q += ATT_MAX_Q - 38) {
            a.n_q = n_q;
            c->attn_before = 1;
            const double before = time_median(run_attn, &a);
            c->attn_before = 0;
            const double now = time_median(run_attn, &a);
            printf("  %-8s %d/%d heads  %s KV  %2d tokens after %d: before %7.1f ms, "
                   "now %7.1f ms  (%.2fx)\n", name, n_head, n_head_kv, q8 ? "Q8_0" : "F16 ",
                   n_q, ATT_PREFIX, before * 1e3, now * 1e3, before / now);
        }
        hx_ctx_free(c);
    }
    hx_model_free(m);
    unlink(path);
    return 0;
}

/* The attention bench at the 0.6B and the 30B-A3B shapes. */
static int bench_attn(int nth)
{
    char dir[] = "/tmp/hx_bench_attn_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    printf("# attention: one layer's pass, median of 5 (ms of %s time per thread)\n",
           g_use_cpu ? "CPU" : "wall");
    int rc = bench_attn_shape(dir, "0.6B", 16, 8, nth);
    if (!rc) rc = bench_attn_shape(dir, "30B-A3B", 32, 4, nth);
    rmdir(dir);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    int nth = argc > 1 ? atoi(argv[1]) : 1;
    static const int types[] = {HX_TYPE_F32, HX_TYPE_F16, HX_TYPE_BF16, HX_TYPE_Q8_0,
                                HX_TYPE_Q4_0, HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K};
    hx_threadpool *tp = hx_threadpool_new(nth);
    if (!tp) return 1;
    g_nth = nth < 1 ? 1 : nth;
    g_use_cpu = !getenv("HX_BENCH_WALL");
    printf("# threads %d, ISA %s (detected %s), %s time\n", nth,
           hx_isa_name(hx_isa_current()), hx_isa_name(hx_isa_detect()),
           g_use_cpu ? "CPU" : "wall");
    if (argc > 2 && !strcmp(argv[2], "attn")) {
        hx_threadpool_free(tp);
        return bench_attn(g_nth);
    }
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int want = argc <= 2;
        for (int a = 2; a < argc; a++) want |= !strcmp(argv[a], hx_type_name(types[i]));
        if (want) bench_type(tp, types[i]);
    }
    hx_threadpool_free(tp);
    return 0;
}
