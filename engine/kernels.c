/* kernels.c: scalar reference dot products, activation quantization, ISA
 * selection and the threaded matmul built on the per-ISA kernel tables. */
#include "engine/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/kernels_impl.h"

#if defined(__x86_64__)
#include <cpuid.h> /* __get_cpuid, bit_F16C */
#endif

#if defined(__aarch64__)
#include <sys/auxv.h> /* getauxval, HWCAP_ASIMD, HWCAP_ASIMDDP */
#endif

/* ---- activation quantization (scalar; as ggml's x86 CPU backend) ---- */

/* Q8_0 activations: d = amax/127 rounded to fp16, values x*127/amax
 * rounded to nearest even (ggml's AVX quantize_row_q8_0). NaNs are left
 * out of amax and quantize to 0 (as NEON's conversion does), so every value
 * stays within +-127, s is the sum of qs, and the dots' "-128 * s" cannot
 * overflow. */
static void quant_q8a_scalar(const float *x, void *out, int64_t n)
{
    hx_block_q8a *y = out;
    for (int64_t i = 0; i < n / HX_QK; i++, x += HX_QK) {
        float amax = 0;
        for (int j = 0; j < HX_QK; j++) /* NaNs skipped (fmaxf returns NaN for a signaling one) */
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        float id = amax != 0 ? 127.0f / amax : 0.0f;
        int s = 0;
        y[i].d = hx_fp16_to_fp32(hx_fp32_to_fp16(amax / 127.0f));
        for (int j = 0; j < HX_QK; j++) {
            float v = x[j] * id;
            v = (v == v ? v : 0.0f) + 12582912.0f; /* NaN gives 0; round to nearest even */
            int q;
            memcpy(&q, &v, 4);
            q = (q & 0x007fffff) - 0x00400000;
            y[i].qs[j] = (int8_t)q;
            s += q;
        }
        y[i].s = s;
    }
}

static void quant_q8K_scalar(const float *x, void *out, int64_t n)
{
    hx_quantize_row(HX_TYPE_Q8_K, x, out, n, NULL);
}

static void quant_f32(const float *x, void *out, int64_t n)
{
    memcpy(out, x, (size_t)n * sizeof(float));
}

static void quant_f16_scalar(const float *x, void *out, int64_t n)
{
    hx_quantize_row(HX_TYPE_F16, x, out, n, NULL);
}

static void quant_bf16_scalar(const float *x, void *out, int64_t n)
{
    hx_quantize_row(HX_TYPE_BF16, x, out, n, NULL);
}

/* ---- scalar dot products (the reference every SIMD path is tested
 * against; float rows accumulate in double) ---- */

static void dot_f32_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const float *x = w, *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)(x[i] * y[i]);
    *out = (float)s;
}

static void dot_f16_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)(hx_fp16_to_fp32(x[i]) * hx_fp16_to_fp32(y[i]));
    *out = (float)s;
}

static void dot_bf16_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)(hx_bf16_to_fp32(x[i]) * hx_bf16_to_fp32(y[i]));
    *out = (float)s;
}

static void dot_q8_0_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q8_0 *x = w;
    const hx_block_q8a *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / HX_QK; i++) {
        int isum = 0;
        for (int j = 0; j < HX_QK; j++) isum += x[i].qs[j] * y[i].qs[j];
        s += (float)isum * hx_fp16_to_fp32(x[i].d) * y[i].d;
    }
    *out = s;
}

static void dot_q4_0_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q4_0 *x = w;
    const hx_block_q8a *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / HX_QK; i++) {
        int isum = 0;
        for (int j = 0; j < HX_QK / 2; j++)
            isum += (x[i].qs[j] & 0xf) * y[i].qs[j] +
                    (x[i].qs[j] >> 4) * y[i].qs[j + HX_QK / 2];
        isum -= 8 * y[i].s;
        s += (float)isum * hx_fp16_to_fp32(x[i].d) * y[i].d;
    }
    *out = s;
}

/* Q4_K / Q5_K scales and mins of the 8 sub-blocks. */
static void unpack_scales(const uint8_t *q, int *sc, int *m)
{
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = (q[j + 8] & 0xf) | ((q[j] >> 6) << 4);
        m[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
    }
}

/* The min term of a Q4_K/Q5_K super-block: sum_j m_j * (sum of y_j). */
static int kq_min_sum(const int *m, const int16_t *bsums)
{
    int s = 0;
    for (int j = 0; j < 8; j++) s += m[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return s;
}

/* One Q4_K / Q5_K super-block against its Q8_K activations; qh (the fifth
 * bits) is NULL for Q4_K. */
static float kq45_block(uint16_t d16, uint16_t dmin16, const uint8_t *scales,
                        const uint8_t *qs, const uint8_t *qh, const hx_block_q8_K *y)
{
    int sc[8], m[8], isum = 0;
    unpack_scales(scales, sc, m);
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = qs + 32 * (j / 2);
        const int8_t *yy = y->qs + 32 * j;
        int shift = 4 * (j & 1), sub = 0;
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> shift) & 0xf;
            if (qh) v |= ((qh[l] >> j) & 1) << 4;
            sub += v * yy[l];
        }
        isum += sc[j] * sub;
    }
    float d = hx_fp16_to_fp32(d16) * y->d;
    float dmin = hx_fp16_to_fp32(dmin16) * y->d;
    return d * (float)isum - dmin * (float)kq_min_sum(m, y->bsums);
}

static void dot_q4_K_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q4_K *x = w;
    const hx_block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++)
        s += kq45_block(x[i].d, x[i].dmin, x[i].scales, x[i].qs, NULL, &y[i]);
    *out = s;
}

static void dot_q5_K_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q5_K *x = w;
    const hx_block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++)
        s += kq45_block(x[i].d, x[i].dmin, x[i].scales, x[i].qs, x[i].qh, &y[i]);
    *out = s;
}

static void dot_q6_K_scalar(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q6_K *x = w;
    const hx_block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        int sub[16] = {0}, isum = 0;
        for (int h = 0; h < 2; h++) { /* halves of 128: 4 quarters of 32 */
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const int8_t *yy = y[i].qs + 128 * h;
            int *sb = sub + 8 * h;
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                sb[is] += ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) * yy[l];
                sb[is + 2] += ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) * yy[l + 32];
                sb[is + 4] += ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) * yy[l + 64];
                sb[is + 6] += ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) * yy[l + 96];
            }
        }
        for (int j = 0; j < 16; j++) /* q - 32: the offset through bsums */
            isum += x[i].scales[j] * (sub[j] - 32 * y[i].bsums[j]);
        s += hx_fp16_to_fp32(x[i].d) * y[i].d * (float)isum;
    }
    *out = s;
}

void hx_kernels_fill_scalar(hx_kernels *k)
{
    k->dot[HX_TYPE_F32] = dot_f32_scalar;
    k->dot[HX_TYPE_F16] = dot_f16_scalar;
    k->dot[HX_TYPE_BF16] = dot_bf16_scalar;
    k->dot[HX_TYPE_Q8_0] = dot_q8_0_scalar;
    k->dot[HX_TYPE_Q4_0] = dot_q4_0_scalar;
    k->dot[HX_TYPE_Q4_K] = dot_q4_K_scalar;
    k->dot[HX_TYPE_Q5_K] = dot_q5_K_scalar;
    k->dot[HX_TYPE_Q6_K] = dot_q6_K_scalar;
    k->quant[HX_TYPE_F32] = quant_f32;
    k->quant[HX_TYPE_F16] = quant_f16_scalar;
    k->quant[HX_TYPE_BF16] = quant_bf16_scalar;
    k->quant[HX_TYPE_Q8_0] = quant_q8a_scalar;
    k->quant[HX_TYPE_Q8_K] = quant_q8K_scalar;
}

/* ---- ISA selection ---- */

static hx_kernels g_tables[3];
static int g_detected = -1, g_current = -1, g_has_bf16;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int parse_isa_env(void)
{
    const char *e = getenv("HEARTH_ISA");
    if (!e || !*e) return HX_ISA_AVX512;
    if (!strcmp(e, "scalar")) return HX_ISA_SCALAR;
    if (!strcmp(e, "avx2") || !strcmp(e, "neon")) return HX_ISA_AVX2;
    return HX_ISA_AVX512;
}

#if defined(__x86_64__)
/* CPUID.1:ECX.F16C; not through __builtin_cpu_supports, which clang
 * before 16 does not know for "f16c" (so `make fuzz` failed to build). */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

static void init_once(void)
{
    int isa = HX_ISA_SCALAR;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        isa = HX_ISA_AVX2;
    if (isa == HX_ISA_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni"))
        isa = HX_ISA_AVX512;
    g_has_bf16 = isa == HX_ISA_AVX512 && __builtin_cpu_supports("avx512bf16");
#elif defined(__aarch64__)
    unsigned long hw = getauxval(AT_HWCAP);
    if (hw & HWCAP_ASIMD) isa = HX_ISA_NEON;
    if (isa == HX_ISA_NEON && (hw & HWCAP_ASIMDDP)) isa = HX_ISA_DOTPROD;
#endif
    g_detected = isa;
    /* The fill functions of the other architecture are empty stubs. */
    hx_kernels_fill_scalar(&g_tables[HX_ISA_SCALAR]);
    g_tables[HX_ISA_AVX2] = g_tables[HX_ISA_SCALAR];
    if (isa >= HX_ISA_AVX2) {
        hx_kernels_fill_avx2(&g_tables[HX_ISA_AVX2]);
        hx_kernels_fill_neon(&g_tables[HX_ISA_NEON]);
    }
    g_tables[HX_ISA_AVX512] = g_tables[HX_ISA_AVX2];
    if (isa >= HX_ISA_AVX512) {
        hx_kernels_fill_avx512(&g_tables[HX_ISA_AVX512], g_has_bf16);
        hx_kernels_fill_avx512_panel(&g_tables[HX_ISA_AVX512]);
        hx_kernels_fill_dotprod(&g_tables[HX_ISA_DOTPROD]);
    }
    int want = parse_isa_env();
    g_current = want < isa ? want : isa;
}

int hx_isa_detect(void)
{
    pthread_once(&g_once, init_once);
    return g_detected;
}

int hx_isa_current(void)
{
    pthread_once(&g_once, init_once);
    return g_current;
}

int hx_isa_set(int isa)
{
    pthread_once(&g_once, init_once);
    if (isa < HX_ISA_SCALAR) isa = HX_ISA_SCALAR;
    g_current = isa < g_detected ? isa : g_detected;
    return g_current;
}

const char *hx_isa_name(int isa)
{
    switch (isa) {
    case HX_ISA_SCALAR: return "scalar";
#if defined(__aarch64__)
    case HX_ISA_NEON: return "neon";
    case HX_ISA_DOTPROD: return "dotprod";
#else
    case HX_ISA_AVX2: return "avx2";
    case HX_ISA_AVX512: return "avx512";
#endif
    default: return "?";
    }
}

const hx_kernels *hx_kernels_for(int isa)
{
    pthread_once(&g_once, init_once);
    if (isa < HX_ISA_SCALAR) isa = HX_ISA_SCALAR;
    if (isa > g_detected) isa = g_detected;
    return &g_tables[isa];
}

/* ---- activations ---- */

int hx_act_type(int wtype)
{
    switch (wtype) {
    case HX_TYPE_F32: case HX_TYPE_F16: case HX_TYPE_BF16: return wtype;
    case HX_TYPE_Q4_0: case HX_TYPE_Q8_0: return HX_TYPE_Q8_0;
    case HX_TYPE_Q4_K: case HX_TYPE_Q5_K: case HX_TYPE_Q6_K: return HX_TYPE_Q8_K;
    default: return -1;
    }
}

int hx_matmul_supported(int wtype) { return hx_act_type(wtype) >= 0; }

size_t hx_act_row_bytes(int wtype, int64_t n)
{
    int at = hx_act_type(wtype);
    if (at < 0 || hx_type_row_bytes(wtype, n) == 0) return 0;
    if (at == HX_TYPE_Q8_0) return (size_t)(n / HX_QK) * sizeof(hx_block_q8a);
    return hx_type_row_bytes(at, n);
}

void hx_quantize_act(int wtype, const float *x, void *a, int64_t n)
{
    int at = hx_act_type(wtype);
    if (at >= 0) hx_kernels_for(hx_isa_current())->quant[at](x, a, n);
}

typedef struct qrows_ctx {
    hx_quant_fn fn;
    const float *X;
    int64_t N, K, per_task;
    char *A;
    size_t ab;
} qrows_ctx;

static void qrows_task(void *p, int task, int thread)
{
    qrows_ctx *c = p;
    (void)thread;
    int64_t r0 = task * c->per_task, r1 = r0 + c->per_task;
    if (r1 > c->N) r1 = c->N;
    for (int64_t r = r0; r < r1; r++)
        c->fn(c->X + r * c->K, c->A + (size_t)r * c->ab, c->K);
}

void hx_quantize_act_rows(hx_threadpool *tp, int wtype, const float *X,
                          int64_t N, int64_t K, void *A)
{
    int at = hx_act_type(wtype);
    if (at < 0 || N <= 0) return;
    qrows_ctx c = {hx_kernels_for(hx_isa_current())->quant[at], X, N, K, 0,
                   A, hx_act_row_bytes(wtype, K)};
    int nth = hx_threadpool_n_threads(tp);
    int64_t tasks = N * K >= 65536 ? nth * 2 : 1;
    if (tasks > N) tasks = N;
    c.per_task = (N + tasks - 1) / tasks;
    hx_threadpool_run(tp, (int)((N + c.per_task - 1) / c.per_task), qrows_task, &c);
}

void hx_vec_dot_isa(int isa, int wtype, int64_t n, float *out, const void *w,
                    const void *a)
{
    if (hx_act_type(wtype) < 0) {
        *out = NAN;
        return;
    }
    hx_kernels_for(isa)->dot[wtype](n, out, w, a);
}

void hx_vec_dot(int wtype, int64_t n, float *out, const void *w, const void *a)
{
    hx_vec_dot_isa(hx_isa_current(), wtype, n, out, w, a);
}

/* ---- matmul ---- */

/* Tokens handled together (their activations stay in cache while a chunk
 * of weight rows is swept). */
#define TOKEN_TILE 8

typedef struct mm_ctx {
    const hx_mm_job *jobs;
    int n_jobs;
    const int64_t *chunk_start; /* first global chunk number of each job */
    int64_t rows_per_chunk;
    const hx_kernels *k;
} mm_ctx;

static void gemm_by_dot(hx_dot_fn dot, int64_t n, const void *w, size_t ws,
                        int nr, const void *const *a, int nt, float *out,
                        size_t ldo)
{
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++)
            dot(n, out + (size_t)r * ldo + t, (const char *)w + (size_t)r * ws, a[t]);
}

/* Tokens from which the panel kernels pay for unpacking the rows (they
 * compute 8 at a time; measured on cache-resident weights: ahead of the
 * four-row GEMVs at 8 tokens for every type, at 4 only for Q4_0), unless
 * the type's table sets its own (tile_min: types whose small-batch gemm
 * shares each row among the tokens). */
#define TILE_MIN_TOKENS 6

/* Rows [r0, r1) of one job against all its tokens through the panel
 * kernel, TILE_BATCH tokens at a time; 0 if it could not run. */
#define TILE_BATCH 512
static int mm_rows_tile(const hx_kernels *k, const hx_mm_job *j, int64_t r0, int64_t r1)
{
    size_t ws = hx_type_row_bytes(j->wtype, j->K);
    size_t ab = hx_act_row_bytes(j->wtype, j->K);
    const void *a[TILE_BATCH];
    for (int64_t t0 = 0; t0 < j->N; t0 += TILE_BATCH) {
        int nt = (int)(j->N - t0 < TILE_BATCH ? j->N - t0 : TILE_BATCH);
        for (int t = 0; t < nt; t++) {
            int64_t row = j->a_idx ? j->a_idx[t0 + t] : t0 + t;
            a[t] = (const char *)j->A + (size_t)row * ab;
        }
        if (!k->tile[j->wtype](j->K, (const char *)j->W + (size_t)r0 * ws, ws, (int)(r1 - r0), a,
                               nt, j->Y + t0 * j->ldy + r0, (size_t)j->ldy))
            return 0;
    }
    return 1;
}

/* Rows [r0, r1) of one job against all its tokens. */
static void mm_rows(const hx_kernels *k, const hx_mm_job *j, int64_t r0,
                    int64_t r1)
{
    int tmin = k->tile_min[j->wtype] ? k->tile_min[j->wtype] : TILE_MIN_TOKENS;
    if (k->tile[j->wtype] && j->N >= tmin && mm_rows_tile(k, j, r0, r1)) return;
    size_t ws = hx_type_row_bytes(j->wtype, j->K);
    size_t ab = hx_act_row_bytes(j->wtype, j->K);
    const void *a[TOKEN_TILE];
    float tmp[64 * TOKEN_TILE];
    if (j->N == 1 && k->gemm[j->wtype]) {
        /* One token (decode): the whole range in one call, straight into Y,
         * so the GEMV's row prefetch streams on across it. */
        a[0] = (const char *)j->A + (size_t)(j->a_idx ? j->a_idx[0] : 0) * ab;
        k->gemm[j->wtype](j->K, (const char *)j->W + (size_t)r0 * ws, ws, (int)(r1 - r0), a, 1,
                          j->Y + r0, 1);
        return;
    }
    for (int64_t t0 = 0; t0 < j->N; t0 += TOKEN_TILE) {
        int nt = (int)(j->N - t0 < TOKEN_TILE ? j->N - t0 : TOKEN_TILE);
        for (int t = 0; t < nt; t++) {
            int64_t row = j->a_idx ? j->a_idx[t0 + t] : t0 + t;
            a[t] = (const char *)j->A + (size_t)row * ab;
        }
        for (int64_t r = r0; r < r1; r += 64) {
            int nr = (int)(r1 - r < 64 ? r1 - r : 64);
            const void *w = (const char *)j->W + (size_t)r * ws;
            if (k->gemm[j->wtype])
                k->gemm[j->wtype](j->K, w, ws, nr, a, nt, tmp, TOKEN_TILE);
            else
                gemm_by_dot(k->dot[j->wtype], j->K, w, ws, nr, a, nt, tmp, TOKEN_TILE);
            for (int t = 0; t < nt; t++)
                for (int i = 0; i < nr; i++)
                    j->Y[(t0 + t) * j->ldy + r + i] = tmp[i * TOKEN_TILE + t];
        }
    }
}

static void mm_task(void *p, int task, int thread)
{
    mm_ctx *c = p;
    (void)thread;
    int ji = 0;
    while (ji + 1 < c->n_jobs && c->chunk_start[ji + 1] <= task) ji++;
    const hx_mm_job *j = &c->jobs[ji];
    int64_t r0 = (task - c->chunk_start[ji]) * c->rows_per_chunk;
    int64_t r1 = r0 + c->rows_per_chunk;
    mm_rows(c->k, j, r0, r1 < j->M ? r1 : j->M);
}

/* Rows per task: about 4 tasks per thread over all jobs (dynamic hand-out
 * evens out a slow core), a multiple of 16, at most 256. */
static int64_t chunk_rows(const hx_mm_job *jobs, int n_jobs, int nth)
{
    int64_t total = 0;
    for (int i = 0; i < n_jobs; i++) total += jobs[i].N > 0 ? jobs[i].M : 0;
    if (nth <= 1) return total > 0 ? total : 1;
    int64_t c = total / (4 * (int64_t)nth);
    c = (c + 15) / 16 * 16;
    return c < 16 ? 16 : c > 256 ? 256 : c;
}

void hx_matmul_jobs(hx_threadpool *tp, const hx_mm_job *jobs, int n_jobs)
{
    int64_t starts_local[16], *starts = starts_local, total = 0;
    if (n_jobs <= 0) return;
    if (n_jobs > 16 && !(starts = hx_malloc_array((size_t)n_jobs, sizeof *starts))) {
        for (int i = 0; i < n_jobs; i++) hx_matmul_jobs(tp, &jobs[i], 1);
        return;
    }
    int64_t rpc = chunk_rows(jobs, n_jobs, hx_threadpool_n_threads(tp));
    for (int i = 0; i < n_jobs; i++) {
        starts[i] = total;
        if (jobs[i].N > 0 && hx_act_type(jobs[i].wtype) >= 0)
            total += (jobs[i].M + rpc - 1) / rpc;
    }
    mm_ctx c = {jobs, n_jobs, starts, rpc, hx_kernels_for(hx_isa_current())};
    hx_threadpool_run(tp, (int)total, mm_task, &c);
    if (starts != starts_local) free(starts);
}

void hx_matmul(hx_threadpool *tp, const void *W, int wtype, int64_t K,
               int64_t M, const float *X, int64_t N, float *Y)
{
    size_t ab = hx_act_row_bytes(wtype, K);
    if (ab == 0 || N <= 0 || M <= 0) return;
    void *A = (void *)X;
    if (hx_act_type(wtype) != HX_TYPE_F32) {
        A = hx_aligned_alloc(64, ab * (size_t)N);
        HX_CHECK(A != NULL);
        hx_quantize_act_rows(tp, wtype, X, N, K, A);
    }
    hx_mm_job j = {W, wtype, K, M, A, NULL, N, Y, M};
    hx_matmul_jobs(tp, &j, 1);
    if (A != (void *)X) free(A);
}

void hx_matmul_expert(hx_threadpool *tp, const void *W, int wtype, int64_t K,
                      int64_t M, int64_t expert, const float *X, int64_t ldx,
                      const int32_t *tok, int64_t n_tok, float *Y,
                      int64_t ldy)
{
    size_t ab = hx_act_row_bytes(wtype, K), ws = hx_type_row_bytes(wtype, K);
    if (ab == 0 || n_tok <= 0 || M <= 0) return;
    char *A = hx_aligned_alloc(64, ab * (size_t)n_tok);
    HX_CHECK(A != NULL);
    const hx_kernels *k = hx_kernels_for(hx_isa_current());
    int at = hx_act_type(wtype);
    for (int64_t i = 0; i < n_tok; i++)
        k->quant[at](X + (int64_t)tok[i] * ldx, A + (size_t)i * ab, K);
    hx_mm_job j = {(const char *)W + (size_t)expert * (size_t)M * ws, wtype, K, M,
                   A, NULL, n_tok, Y, ldy};
    hx_matmul_jobs(tp, &j, 1);
    free(A);
}
