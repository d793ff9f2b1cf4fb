/* gemm.c: the F32 matrix product of training, Y (=|+=) alpha A B, register
 * blocked (4 rows x 32 columns) with GCC vector types, AVX-512 when present. */
#include <immintrin.h>
#include <string.h>

#include "lora/train_int.h"

typedef float v16 __attribute__((vector_size(64)));

/* Columns per task; each task owns them, and every output sums over k in
 * order, so results do not depend on the thread count. */
#define NB 64

/* Unaligned load and store (macros: vectors of 64 bytes must not cross a
 * function boundary compiled without AVX-512). */
#define LD(v, p) memcpy(&(v), (p), sizeof(v16))
#define ST(p, v)                                                              \
    do {                                                                      \
        v16 o_ = (v) * alpha, y_;                                             \
        if (acc) {                                                            \
            LD(y_, p);                                                        \
            o_ += y_;                                                         \
        }                                                                     \
        memcpy((p), &o_, sizeof(v16));                                        \
    } while (0)

/* Rows [t0, t0+4) x columns [c, c+32): a full tile. */
#define KERNEL_BODY                                                           \
    v16 s[4][2];                                                              \
    memset(s, 0, sizeof s);                                                   \
    for (int k = 0; k < K; k++) {                                             \
        v16 b0, b1;                                                           \
        LD(b0, B + (size_t)k * M + c);                                        \
        LD(b1, B + (size_t)k * M + c + 16);                                   \
        for (int i = 0; i < 4; i++) {                                         \
            const float a = A[(size_t)(t0 + i) * K + k];                      \
            s[i][0] += a * b0;                                                \
            s[i][1] += a * b1;                                                \
        }                                                                     \
    }                                                                         \
    for (int i = 0; i < 4; i++) {                                             \
        ST(Y + (size_t)(t0 + i) * M + c, s[i][0]);                            \
        ST(Y + (size_t)(t0 + i) * M + c + 16, s[i][1]);                       \
    }

/* The same tile with fused multiply-adds (-std=c11 turns contraction off). */
__attribute__((target("avx512f"))) static void
tile_avx512(const float *A, const float *B, float *Y, int K, int M, int t0,
            int c, float alpha, int acc)
{
    __m512 s[4][2];
    for (int i = 0; i < 4; i++) s[i][0] = s[i][1] = _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        const __m512 b0 = _mm512_loadu_ps(B + (size_t)k * M + c);
        const __m512 b1 = _mm512_loadu_ps(B + (size_t)k * M + c + 16);
        for (int i = 0; i < 4; i++) {
            const __m512 a = _mm512_set1_ps(A[(size_t)(t0 + i) * K + k]);
            s[i][0] = _mm512_fmadd_ps(a, b0, s[i][0]);
            s[i][1] = _mm512_fmadd_ps(a, b1, s[i][1]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha);
    for (int i = 0; i < 4; i++)
        for (int h = 0; h < 2; h++) {
            float *y = Y + (size_t)(t0 + i) * M + c + 16 * h;
            __m512 o = _mm512_mul_ps(s[i][h], al);
            if (acc) o = _mm512_add_ps(o, _mm512_loadu_ps(y));
            _mm512_storeu_ps(y, o);
        }
}

static void tile_generic(const float *A, const float *B, float *Y, int K,
                         int M, int t0, int c, float alpha, int acc)
{
    KERNEL_BODY
}

/* Any rows x columns remainder, one output at a time (k in order). */
static void edge(const float *A, const float *B, float *Y, int K, int M,
                 int t0, int t1, int c0, int c1, float alpha, int acc)
{
    for (int t = t0; t < t1; t++)
        for (int c = c0; c < c1; c++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += A[(size_t)t * K + k] * B[(size_t)k * M + c];
            float *y = Y + (size_t)t * M + c;
            *y = acc ? *y + alpha * s : alpha * s;
        }
}

typedef struct gemm_job {
    const float *A, *B;
    float *Y;
    int n, K, M, acc, avx512;
    float alpha;
} gemm_job;

static void gemm_task(void *ctx, int task, int thread)
{
    const gemm_job *j = ctx;
    const int c0 = task * NB, c1 = c0 + NB < j->M ? c0 + NB : j->M;
    const int cf = c0 + (c1 - c0) / 32 * 32, tf = j->n / 4 * 4;
    (void)thread;
    for (int t0 = 0; t0 < tf; t0 += 4)
        for (int c = c0; c < cf; c += 32) {
            if (j->avx512) tile_avx512(j->A, j->B, j->Y, j->K, j->M, t0, c, j->alpha, j->acc);
            else tile_generic(j->A, j->B, j->Y, j->K, j->M, t0, c, j->alpha, j->acc);
        }
    edge(j->A, j->B, j->Y, j->K, j->M, 0, tf, cf, c1, j->alpha, j->acc);
    edge(j->A, j->B, j->Y, j->K, j->M, tf, j->n, c0, c1, j->alpha, j->acc);
}

void tr_gemm(hx_threadpool *tp, const float *A, int n, int K, const float *B,
             int M, float *Y, float alpha, int acc)
{
    static int have_avx512 = -1;
    if (have_avx512 < 0) have_avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
    gemm_job j = {A, B, Y, n, K, M, acc, have_avx512, alpha};
    hx_threadpool_run(tp, (M + NB - 1) / NB, gemm_task, &j);
}
