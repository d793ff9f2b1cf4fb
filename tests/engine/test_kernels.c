/* test_kernels.c: every SIMD dot and activation quantizer against the
 * scalar reference, hx_matmul against a naive float matmul, the thread pool
 * under many tiny and uneven runs. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "engine/kernels.h"
#include "engine/kernels_impl.h"
#include "test.h"
#define TEST_RNG_SEED 0x243f6a8885a308d3ull
#include "rng.h"

static void fill(float *x, int64_t n, float shift)
{
    for (int64_t i = 0; i < n; i++) x[i] = gauss() + shift;
}

static const int k_wtypes[] = {HX_TYPE_F32, HX_TYPE_F16, HX_TYPE_BF16,
                               HX_TYPE_Q8_0, HX_TYPE_Q4_0, HX_TYPE_Q4_K,
                               HX_TYPE_Q5_K, HX_TYPE_Q6_K};
#define N_WTYPES (int)(sizeof k_wtypes / sizeof k_wtypes[0])

/* Tolerance of a SIMD dot against the scalar one, as NMSE over many dots.
 * Integer paths differ only in the order of float summation over blocks
 * (measured < 1e-13); float paths accumulate in float where the reference
 * uses double (measured < 1e-12 for F32/F16/BF16). */
#define DOT_NMSE_TOL 1e-10

/* Quantized weight rows and activation rows for one type and size. */
typedef struct rows {
    int64_t n, nr;
    size_t wb, ab;
    char *w, *a;
} rows;

static void rows_make(rows *r, int wtype, int64_t n, int64_t nr)
{
    float *x = malloc(sizeof(float) * n);
    r->n = n;
    r->nr = nr;
    r->wb = hx_type_row_bytes(wtype, n);
    r->ab = hx_act_row_bytes(wtype, n);
    r->w = malloc(r->wb * nr);
    r->a = malloc(r->ab * nr);
    for (int64_t i = 0; i < nr; i++) {
        fill(x, n, i % 3 == 1 ? 0.7f : 0.0f);
        hx_quantize_row(wtype, x, r->w + i * r->wb, n, NULL);
        fill(x, n, 0);
        if (i % 5 == 4) /* an activation with a large outlier */
            x[rnd() % n] = 40;
        hx_quantize_act(wtype, x, r->a + i * r->ab, n);
    }
    free(x);
}

static void rows_free(rows *r)
{
    free(r->w);
    free(r->a);
}

static void test_isa(void)
{
    int d = hx_isa_detect();
    printf("# detected ISA %s, current %s\n", hx_isa_name(d), hx_isa_name(hx_isa_current()));
    EXPECT(d >= HX_ISA_SCALAR && d <= HX_ISA_AVX512);
    EXPECT_EQ_INT(hx_isa_set(HX_ISA_SCALAR), HX_ISA_SCALAR);
    EXPECT_EQ_INT(hx_isa_set(HX_ISA_AVX512), d);
#if defined(__aarch64__)
    EXPECT_STR_EQ(hx_isa_name(HX_ISA_NEON), "neon");
    EXPECT_STR_EQ(hx_isa_name(HX_ISA_DOTPROD), "dotprod");
#else
    EXPECT_STR_EQ(hx_isa_name(HX_ISA_AVX2), "avx2");
#endif
    /* make test-aarch64 names the set qemu's -cpu must give (dotprod
     * for -cpu max, neon for cortex-a53), so the SIMD paths really run */
    const char *want = getenv("HX_TEST_EXPECT_ISA");
    if (want && *want) EXPECT_STR_EQ(hx_isa_name(d), want);
    /* and the tables hold that level's own kernels */
    static const int simd_types[] = {HX_TYPE_Q8_0, HX_TYPE_Q4_0, HX_TYPE_Q4_K, HX_TYPE_Q6_K};
    for (int i = 0; i < 4; i++) {
        int wt = simd_types[i];
        if (d >= HX_ISA_AVX2)
            EXPECT(hx_kernels_for(HX_ISA_AVX2)->dot[wt] != hx_kernels_for(HX_ISA_SCALAR)->dot[wt]);
#if defined(__aarch64__)
        if (d >= HX_ISA_DOTPROD)
            EXPECT(hx_kernels_for(HX_ISA_DOTPROD)->dot[wt] != hx_kernels_for(HX_ISA_NEON)->dot[wt]);
#endif
    }
    EXPECT_EQ_INT(hx_act_type(HX_TYPE_Q4_0), HX_TYPE_Q8_0);
    EXPECT_EQ_INT(hx_act_type(HX_TYPE_Q8_0), HX_TYPE_Q8_0);
    EXPECT_EQ_INT(hx_act_type(HX_TYPE_Q5_K), HX_TYPE_Q8_K);
    EXPECT_EQ_INT(hx_act_type(HX_TYPE_F16), HX_TYPE_F16);
    EXPECT_EQ_INT(hx_act_type(HX_TYPE_BF16), HX_TYPE_BF16);
    EXPECT_EQ_INT(hx_act_type(HX_TYPE_Q2_K), -1);
    EXPECT_EQ_INT(hx_act_row_bytes(HX_TYPE_Q4_K, 512), 2 * 292);
}

/* The scalar dot against a double-precision dot of the dequantized
 * operands: only float rounding may differ. */
static void test_scalar_dot_vs_dequant(void)
{
    for (int ti = 0; ti < N_WTYPES; ti++) {
        int wt = k_wtypes[ti], at = hx_act_type(wt);
        int64_t n = 1024;
        rows r;
        rows_make(&r, wt, n, 8);
        float *wf = malloc(sizeof(float) * n), *af = malloc(sizeof(float) * n);
        float ref[8], got[8];
        for (int i = 0; i < 8; i++) {
            hx_dequantize_row(wt, r.w + i * r.wb, wf, n);
            if (at == HX_TYPE_Q8_0) { /* Hearth's Q8_0 activation block */
                for (int64_t b = 0; b < n / 32; b++) {
                    const char *blk = r.a + i * r.ab + b * 40;
                    float d;
                    memcpy(&d, blk, 4);
                    for (int j = 0; j < 32; j++) af[b * 32 + j] = d * (int8_t)blk[8 + j];
                }
            } else {
                hx_dequantize_row(at, r.a + i * r.ab, af, n);
            }
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += (double)wf[k] * af[k];
            ref[i] = (float)s;
            hx_vec_dot_isa(HX_ISA_SCALAR, wt, n, &got[i], r.w + i * r.wb, r.a + i * r.ab);
        }
        double e = test_nmse(ref, got, 8);
        if (!(e < 1e-9))
            test_fail_at(__FILE__, __LINE__, "%s scalar dot vs dequantized: nmse %g",
                         hx_type_name(wt), e);
        free(wf);
        free(af);
        rows_free(&r);
    }
}

static void test_simd_dots(void)
{
    int best = hx_isa_detect();
    if (best == HX_ISA_SCALAR) SKIP("no AVX2 on this CPU: only the scalar path exists");
    static const int blocks[] = {1, 2, 3, 5, 7, 8, 9, 16, 17, 33};
    for (int ti = 0; ti < N_WTYPES; ti++) {
        int wt = k_wtypes[ti];
        int be = hx_type_block_elems(wt) > 1 ? hx_type_block_elems(wt) : 32;
        double worst[HX_ISA_AVX512 + 1] = {0};
        for (int bi = 0; bi < 10; bi++) {
            int64_t n = blocks[bi] * (int64_t)be;
            if (be == 32 && hx_type_block_elems(wt) == 1) n += bi; /* odd float lengths */
            rows r; /* made once for every level (quantizing is the slow part) */
            rows_make(&r, wt, n, 16);
            float ref[16], got[16];
            for (int i = 0; i < 16; i++)
                hx_vec_dot_isa(HX_ISA_SCALAR, wt, n, &ref[i], r.w + i * r.wb, r.a + i * r.ab);
            for (int isa = HX_ISA_AVX2; isa <= best; isa++) {
                for (int i = 0; i < 16; i++)
                    hx_vec_dot_isa(isa, wt, n, &got[i], r.w + i * r.wb, r.a + i * r.ab);
                double e = test_nmse(ref, got, 16);
                if (e > worst[isa]) worst[isa] = e;
            }
            rows_free(&r);
        }
        for (int isa = HX_ISA_AVX2; isa <= best; isa++) {
            if (getenv("HX_TEST_VERBOSE"))
                printf("  %-6s %-5s worst nmse %.3g\n", hx_isa_name(isa), hx_type_name(wt),
                       worst[isa]);
            if (!(worst[isa] < DOT_NMSE_TOL))
                test_fail_at(__FILE__, __LINE__, "%s %s dot vs scalar: nmse %g",
                             hx_isa_name(isa), hx_type_name(wt), worst[isa]);
        }
    }
}

/* SIMD activation quantizers must produce the scalar bytes exactly. */
static void test_simd_act_quant(void)
{
    int best = hx_isa_detect();
    if (best == HX_ISA_SCALAR) SKIP("no AVX2 on this CPU");
    int64_t n = 4096;
    float *x = malloc(sizeof(float) * n);
    fill(x, n, 0.1f);
    x[100] = -35;
    for (int i = 0; i < 256; i++) x[1024 + i] = 0; /* an all-zero block */
    for (int ti = 0; ti < N_WTYPES; ti++) {
        int wt = k_wtypes[ti];
        size_t ab = hx_act_row_bytes(wt, n);
        char *a0 = calloc(1, ab), *a1 = calloc(1, ab);
        hx_isa_set(HX_ISA_SCALAR);
        hx_quantize_act(wt, x, a0, n);
        for (int isa = HX_ISA_AVX2; isa <= best; isa++) {
            hx_isa_set(isa);
            memset(a1, 0x55, ab);
            hx_quantize_act(wt, x, a1, n);
            if (memcmp(a0, a1, ab) != 0)
                test_fail_at(__FILE__, __LINE__, "%s activation quantization (%s) differs",
                             hx_type_name(wt), hx_isa_name(isa));
        }
        free(a0);
        free(a1);
    }
    hx_isa_set(best);
    free(x);
}

/* ---- against ggml's CPU backend (llama.cpp reference build) ----
 * ggml_get_type_traits_cpu gives, per weight type, the activation type its
 * vec_dot uses, the activation quantizer (from_float) and vec_dot itself.
 * Hearth must pick the same activation types, quantize activations to the
 * same bytes, and compute the same dots up to float summation order. The
 * haswell (AVX2) variant is used: it runs on any AVX2 CPU, and its x86
 * quantizers are the ones llama.cpp uses on AVX2 and AVX-512 machines. */
typedef struct ggml_cpu_traits {
    void (*from_float)(const float *x, void *y, int64_t k);
    void (*vec_dot)(int n, float *s, size_t bs, const void *x, size_t bx,
                    const void *y, size_t by, int nrc);
    int vec_dot_type;
    int64_t nrows;
} ggml_cpu_traits;

/* Tolerance of a dot against ggml's vec_dot, relative to the larger of
 * the dot and the sum of |w_i x_i| (mag): both sum exact integer block
 * sums in float in different orders, so the difference scales with mag,
 * not with the dot, which can cancel to almost nothing (a dot of -1.58
 * with mag about 2,600 differed by 2.5e-5 of itself). Measured <= 2.6e-8
 * of mag. */
#define GGML_DOT_TOL 1e-6

/* One weight row against ggml: activation bytes, then the dot. */
static void check_vs_ggml(int isa, int wt, const ggml_cpu_traits *tw,
                          const float *x, const char *w, const char *ag,
                          char *ah, int64_t n, double mag)
{
    int same = 1;
    hx_isa_set(isa);
    hx_quantize_act(wt, x, ah, n);
    if (hx_act_type(wt) == HX_TYPE_Q8_0) { /* Hearth's block adds a sum */
        for (int64_t b = 0; b < n / HX_QK; b++) {
            const hx_block_q8_0 *g = (const hx_block_q8_0 *)ag + b;
            const hx_block_q8a *h = (const hx_block_q8a *)ah + b;
            same &= hx_fp16_to_fp32(g->d) == h->d && !memcmp(g->qs, h->qs, HX_QK);
        }
    } else {
        same = !memcmp(ag, ah, hx_act_row_bytes(wt, n));
    }
    if (!same)
        test_fail_at(__FILE__, __LINE__, "%s %s: activations differ from ggml's",
                     hx_isa_name(isa), hx_type_name(wt));
    float sg = 0, sh = 0;
    tw->vec_dot((int)n, &sg, 0, w, 0, ag, 0, 1);
    hx_vec_dot(wt, n, &sh, w, ah);
    double rel = fabs((double)sg - sh) / (fmax(fabs(sg), mag) + 1e-30);
    if (getenv("HX_TEST_VERBOSE"))
        printf("  %-6s %-5s ggml %.9g hearth %.9g rel %.2g\n", hx_isa_name(isa),
               hx_type_name(wt), sg, sh, rel);
    if (!(rel < GGML_DOT_TOL))
        test_fail_at(__FILE__, __LINE__, "%s %s: dot %.9g vs ggml's %.9g",
                     hx_isa_name(isa), hx_type_name(wt), sh, sg);
}

static void test_vs_ggml_cpu(void)
{
#if !defined(__x86_64__)
    SKIP("ggml's haswell backend is x86-64 code: not on this architecture");
#endif
    if (hx_isa_detect() < HX_ISA_AVX2) SKIP("no AVX2: ggml's haswell backend cannot run here");
    const char *ref = getenv("HEARTH_REFERENCE");
    char path[4096];
    snprintf(path, sizeof path, "%s/bins/libggml-cpu-haswell.so", ref && *ref ? ref : "build/reference");
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) SKIP("llama.cpp reference not found (%s); run make reference or set HEARTH_REFERENCE", path);
    void (*init)(void);
    const ggml_cpu_traits *(*traits)(int);
    *(void **)&init = dlsym(lib, "ggml_cpu_init");
    *(void **)&traits = dlsym(lib, "ggml_get_type_traits_cpu");
    if (!init || !traits) {
        dlclose(lib);
        ASSERT(!"ggml_cpu_init / ggml_get_type_traits_cpu missing");
    }
    init();
    const int64_t n = 4096;
    float *x = malloc(sizeof(float) * n), *wf = malloc(sizeof(float) * n);
    char *w = malloc(hx_type_row_bytes(HX_TYPE_F32, n));
    char *ag = malloc(hx_type_row_bytes(HX_TYPE_F32, n)), *ah = malloc(hx_type_row_bytes(HX_TYPE_F32, n));
    for (int ti = 0; ti < N_WTYPES; ti++) {
        int wt = k_wtypes[ti], at = hx_act_type(wt);
        const ggml_cpu_traits *tw = traits(wt), *ta = traits(at);
        if (!tw || !ta || !tw->vec_dot || !ta->from_float) {
            test_fail_at(__FILE__, __LINE__, "%s: no ggml CPU traits", hx_type_name(wt));
            continue;
        }
        EXPECT_EQ_INT(tw->vec_dot_type, at);
        for (int rep = 0; rep < 4; rep++) {
            fill(wf, n, rep == 1 ? 0.5f : 0.0f);
            fill(x, n, 0);
            if (rep == 3) x[17] = 60; /* an outlier */
            hx_quantize_row(wt, wf, w, n, NULL);
            memset(ag, 0, hx_type_row_bytes(HX_TYPE_F32, n));
            ta->from_float(x, ag, n);
            double mag = 0;
            for (int64_t k = 0; k < n; k++) mag += fabs((double)wf[k] * x[k]);
            for (int isa = HX_ISA_SCALAR; isa <= hx_isa_detect(); isa++)
                check_vs_ggml(isa, wt, tw, x, w, ag, ah, n, mag);
        }
    }
    free(x);
    free(wf);
    free(w);
    free(ag);
    free(ah);
    hx_isa_set(HX_ISA_AVX512);
    dlclose(lib);
}

/* hx_matmul against a naive matmul of the dequantized weights and the
 * float inputs (the difference is the activation quantization), and the
 * results must not depend on the thread count. */
static double mm_tol(int wt)
{
    switch (hx_act_type(wt)) {
    case HX_TYPE_F32: return 1e-10;
    case HX_TYPE_F16: return 1e-6;
    case HX_TYPE_BF16: return 1e-4;
    default: return 2e-3; /* 8-bit activations: measured about 1e-4 */
    }
}

static void check_matmul(int wt, int64_t K, int64_t M, int64_t N,
                         hx_threadpool **pools)
{
    size_t wb = hx_type_row_bytes(wt, K);
    float *x = malloc(sizeof(float) * N * K), *wf = malloc(sizeof(float) * M * K);
    float *ref = malloc(sizeof(float) * N * M), *y[3];
    char *w = malloc(wb * M);
    fill(x, N * K, 0);
    for (int64_t m = 0; m < M; m++) {
        fill(wf + m * K, K, 0);
        hx_quantize_row(wt, wf + m * K, w + m * wb, K, NULL);
        hx_dequantize_row(wt, w + m * wb, wf + m * K, K);
    }
    for (int64_t t = 0; t < N; t++)
        for (int64_t m = 0; m < M; m++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (double)x[t * K + k] * wf[m * K + k];
            ref[t * M + m] = (float)s;
        }
    for (int p = 0; p < 3; p++) {
        y[p] = malloc(sizeof(float) * N * M);
        for (int64_t i = 0; i < N * M; i++) y[p][i] = NAN;
        hx_matmul(pools[p], w, wt, K, M, x, N, y[p]);
    }
    double e = test_nmse(ref, y[0], (size_t)(N * M));
    if (!(e < mm_tol(wt)))
        test_fail_at(__FILE__, __LINE__, "%s matmul K=%lld M=%lld N=%lld nmse %g",
                     hx_type_name(wt), (long long)K, (long long)M, (long long)N, e);
    for (int p = 1; p < 3; p++)
        if (memcmp(y[0], y[p], sizeof(float) * N * M) != 0)
            test_fail_at(__FILE__, __LINE__, "%s matmul with %d threads differs from 1",
                         hx_type_name(wt), p + 1);
    for (int p = 0; p < 3; p++) free(y[p]);
    free(x);
    free(wf);
    free(ref);
    free(w);
}

static void test_matmul(void)
{
    hx_threadpool *pools[3] = {hx_threadpool_new(1), hx_threadpool_new(2),
                               hx_threadpool_new(3)};
    ASSERT(pools[0] && pools[1] && pools[2]);
    static const int64_t ns[] = {1, 7, 64};
    for (int ti = 0; ti < N_WTYPES; ti++)
        for (int ni = 0; ni < 3; ni++) {
            int wt = k_wtypes[ti];
            int64_t K = hx_type_block_elems(wt) == 256 ? 768 : 96;
            check_matmul(wt, K, ns[ni] == 64 ? 40 : 133, ns[ni], pools);
        }
    for (int p = 0; p < 3; p++) hx_threadpool_free(pools[p]);
}

/* The multi-token kernels must give each token exactly its single dot, so
 * that a batch computes the same numbers as one token at a time. */
static void test_gemm_equals_dot(void)
{
    /* 2 to 8 tokens run the small-batch gemms (each row shared by the
     * tokens on AVX-512), 9 and more the panel kernels (kernels_panel.c)
     * on AVX-512 and from 6 on the other types */
    static const int64_t ns[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 17, 40};
    enum { N_NS = (int)(sizeof ns / sizeof ns[0]) };
    for (int isa = HX_ISA_SCALAR; isa <= hx_isa_detect(); isa++) {
        hx_isa_set(isa);
        for (int ti = 0; ti < N_WTYPES; ti++) {
            int wt = k_wtypes[ti];
            int64_t K = hx_type_block_elems(wt) == 256 ? 768 : 160, M = 37, N = 40;
            size_t wb = hx_type_row_bytes(wt, K), ab = hx_act_row_bytes(wt, K);
            float *x = malloc(sizeof(float) * N * K), *y = malloc(sizeof(float) * N * M);
            char *w = malloc(wb * M), *A = malloc(ab * N);
            for (int64_t m = 0; m < M; m++) {
                fill(x, K, 0);
                hx_quantize_row(wt, x, w + m * wb, K, NULL);
            }
            fill(x, N * K, 0);
            hx_quantize_act_rows(NULL, wt, x, N, K, A);
            int bad = 0;
            for (int ni = 0; ni < N_NS; ni++) {
                hx_matmul(NULL, w, wt, K, M, x, ns[ni], y);
                for (int64_t t = 0; t < ns[ni]; t++)
                    for (int64_t m = 0; m < M; m++) {
                        float d;
                        hx_vec_dot(wt, K, &d, w + m * wb, A + t * ab);
                        bad += memcmp(&d, &y[t * M + m], sizeof d) != 0;
                    }
            }
            if (bad)
                test_fail_at(__FILE__, __LINE__, "%s %s: %d matmul outputs differ from the dot",
                             hx_isa_name(isa), hx_type_name(wt), bad);
            free(x);
            free(y);
            free(w);
            free(A);
        }
    }
    hx_isa_set(HX_ISA_AVX512);
}

/* Multi-token matmul (prefill) at every SIMD level against the scalar
 * level's, by NMSE: the integer block sums are exact, only the order of
 * the float summation differs (as DOT_NMSE_TOL). An odd row count and an
 * odd token count take the kernels' edge paths. On aarch64 the quantized
 * types must have a multi-token kernel (NEON, and SDOT with dotprod)
 * rather than one dot per row and token. */
static void test_matmul_simd_vs_scalar(void)
{
    int best = hx_isa_detect();
    if (best == HX_ISA_SCALAR) SKIP("no SIMD on this CPU: only the scalar path exists");
    static const int wts[] = {HX_TYPE_Q4_K, HX_TYPE_Q5_K, HX_TYPE_Q6_K, HX_TYPE_Q4_0,
                              HX_TYPE_Q8_0};
    const int64_t M = 33, N = 9;
    for (size_t ti = 0; ti < sizeof wts / sizeof wts[0]; ti++) {
        int wt = wts[ti];
        int64_t K = hx_type_block_elems(wt) == 256 ? 1024 : 320;
        size_t wb = hx_type_row_bytes(wt, K);
        float *x = malloc(sizeof(float) * N * K), *ref = malloc(sizeof(float) * N * M);
        float *y = malloc(sizeof(float) * N * M);
        char *w = malloc(wb * M);
        for (int64_t m = 0; m < M; m++) {
            fill(x, K, m % 3 == 1 ? 0.7f : 0.0f);
            hx_quantize_row(wt, x, w + m * wb, K, NULL);
        }
        fill(x, N * K, 0);
        x[5 * K + 17] = 40; /* an activation outlier */
        hx_isa_set(HX_ISA_SCALAR);
        hx_matmul(NULL, w, wt, K, M, x, N, ref);
        for (int isa = HX_ISA_AVX2; isa <= best; isa++) {
#if defined(__aarch64__)
            if (!hx_kernels_for(isa)->gemm[wt])
                test_fail_at(__FILE__, __LINE__, "%s %s: no multi-token kernel",
                             hx_isa_name(isa), hx_type_name(wt));
#endif
            hx_isa_set(isa);
            hx_matmul(NULL, w, wt, K, M, x, N, y);
            double e = test_nmse(ref, y, (size_t)(N * M));
            printf("#   %-7s %-4s matmul K=%lld M=%lld N=%lld vs scalar: nmse %.2g\n",
                   hx_isa_name(isa), hx_type_name(wt), (long long)K, (long long)M,
                   (long long)N, e);
            if (!(e < DOT_NMSE_TOL))
                test_fail_at(__FILE__, __LINE__, "%s %s matmul vs scalar: nmse %g",
                             hx_isa_name(isa), hx_type_name(wt), e);
        }
        free(x);
        free(ref);
        free(y);
        free(w);
    }
    hx_isa_set(HX_ISA_AVX512);
}

/* Jobs over pre-quantized activations with an index list, and the expert
 * helper, against hx_matmul on the gathered rows. */
static void test_jobs_and_experts(void)
{
    const int wt = HX_TYPE_Q4_K;
    const int64_t K = 512, M = 48, E = 3, T = 10;
    size_t wb = hx_type_row_bytes(wt, K), ab = hx_act_row_bytes(wt, K);
    float *wf = malloc(sizeof(float) * K), *x = malloc(sizeof(float) * T * K);
    float *y1 = malloc(sizeof(float) * T * M), *y2 = malloc(sizeof(float) * T * M);
    float *g = malloc(sizeof(float) * T * K);
    char *w = malloc(wb * M * E), *A = malloc(ab * T);
    hx_threadpool *tp = hx_threadpool_new(3);
    ASSERT(tp);
    for (int64_t r = 0; r < M * E; r++) {
        fill(wf, K, 0);
        hx_quantize_row(wt, wf, w + r * wb, K, NULL);
    }
    fill(x, T * K, 0);
    const int32_t tok[4] = {7, 2, 9, 2};
    for (int i = 0; i < 4; i++) memcpy(g + i * K, x + tok[i] * K, sizeof(float) * K);
    hx_matmul(NULL, w + 2 * M * wb, wt, K, M, g, 4, y1);
    hx_matmul_expert(tp, w, wt, K, M, 2, x, K, tok, 4, y2, M);
    EXPECT(memcmp(y1, y2, sizeof(float) * 4 * M) == 0);
    /* Two jobs in one run: experts 0 and 1, rows picked by index. */
    hx_quantize_act_rows(tp, wt, x, T, K, A);
    float *y3 = malloc(sizeof(float) * 2 * 4 * M);
    hx_mm_job jobs[2] = {
        {w, wt, K, M, A, tok, 4, y3, M},
        {w + M * wb, wt, K, M, A, tok, 4, y3 + 4 * M, M},
    };
    hx_matmul_jobs(tp, jobs, 2);
    for (int e = 0; e < 2; e++) {
        hx_matmul(NULL, w + e * M * wb, wt, K, M, g, 4, y1);
        EXPECT(memcmp(y1, y3 + e * 4 * M, sizeof(float) * 4 * M) == 0);
    }
    hx_threadpool_free(tp);
    free(wf);
    free(x);
    free(y1);
    free(y2);
    free(y3);
    free(g);
    free(w);
    free(A);
}

/* ---- thread pool ---- */

typedef struct count_ctx {
    atomic_int hits[64];
    atomic_int bad_thread;
    int n_threads;
} count_ctx;

static void count_task(void *p, int task, int thread)
{
    count_ctx *c = p;
    atomic_fetch_add(&c->hits[task], 1);
    if (thread < 0 || thread >= c->n_threads) atomic_fetch_add(&c->bad_thread, 1);
}

typedef struct big_ctx {
    atomic_llong sum;
    atomic_int count;
} big_ctx;

static void big_task(void *p, int task, int thread)
{
    big_ctx *b = p;
    (void)thread;
    atomic_fetch_add(&b->sum, task);
    atomic_fetch_add(&b->count, 1);
}

static void test_threadpool(void)
{
    EXPECT_EQ_INT(hx_threadpool_n_threads(NULL), 1);
    hx_threadpool_free(NULL);
    for (int n = 1; n <= 4; n++) {
        hx_threadpool *tp = hx_threadpool_new(n);
        ASSERT(tp);
        EXPECT_EQ_INT(hx_threadpool_n_threads(tp), n);
        count_ctx c;
        int wrong = 0;
        for (int run = 0; run < 2000; run++) {
            int nt = run % 64 ? (int)(rnd() % 64) : 0; /* uneven, sometimes 0 */
            for (int i = 0; i < 64; i++) atomic_store(&c.hits[i], 0);
            atomic_store(&c.bad_thread, 0);
            c.n_threads = n;
            hx_threadpool_run(tp, nt, count_task, &c);
            for (int i = 0; i < 64; i++)
                wrong += atomic_load(&c.hits[i]) != (i < nt ? 1 : 0);
            wrong += atomic_load(&c.bad_thread);
        }
        EXPECT_EQ_INT(wrong, 0);
        hx_threadpool_free(tp);
    }
    /* More tasks than one run's state word holds: split transparently. */
    hx_threadpool *tp = hx_threadpool_new(2);
    ASSERT(tp);
    big_ctx b = {0};
    hx_threadpool_run(tp, (1 << 20) + 5, big_task, &b);
    EXPECT_EQ_INT(atomic_load(&b.count), (1 << 20) + 5);
    EXPECT_EQ_INT(atomic_load(&b.sum), ((int64_t)(1 << 20) + 5) * ((1 << 20) + 4) / 2);
    hx_threadpool_free(tp);
    /* A NULL pool runs on the caller. */
    count_ctx c = {.n_threads = 1};
    hx_threadpool_run(NULL, 5, count_task, &c);
    EXPECT_EQ_INT(atomic_load(&c.hits[4]), 1);
}

/* Runs separated by pauses, so the workers fall asleep in between. */
static void test_threadpool_sleep(void)
{
    hx_threadpool *tp = hx_threadpool_new(3);
    ASSERT(tp);
    count_ctx c = {.n_threads = 3};
    for (int run = 0; run < 4; run++) {
        struct timespec ts = {0, 3000000};
        nanosleep(&ts, NULL);
        hx_threadpool_run(tp, 10, count_task, &c);
    }
    EXPECT_EQ_INT(atomic_load(&c.hits[9]), 4);
    EXPECT_EQ_INT(atomic_load(&c.hits[0]), 4);
    hx_threadpool_free(tp);
}

int main(void)
{
    RUN(test_isa);
    RUN(test_scalar_dot_vs_dequant);
    RUN(test_simd_dots);
    RUN(test_simd_act_quant);
    RUN(test_vs_ggml_cpu);
    RUN(test_matmul);
    RUN(test_gemm_equals_dot);
    RUN(test_matmul_simd_vs_scalar);
    RUN(test_jobs_and_experts);
    RUN(test_threadpool);
    RUN(test_threadpool_sleep);
    return test_summary();
}
