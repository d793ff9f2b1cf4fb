/* kernels.c: micro benchmark of the matmul kernels: GEMV (one token) GB/s
 * of weights streamed per type, and GEMM (N tokens) GMAC/s, per ISA.
 * Usage: bench/kernels [threads] [type-name ...]; HEARTH_ISA caps the ISA,
 * HX_BENCH_N sets the GEMM's token count (default 64). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "bench/bench.h"
#include "engine/engine_ext.h"

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
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int want = argc <= 2;
        for (int a = 2; a < argc; a++) want |= !strcmp(argv[a], hx_type_name(types[i]));
        if (want) bench_type(tp, types[i]);
    }
    hx_threadpool_free(tp);
    return 0;
}
