/* kernels_avx512.c: AVX-512 (F, BW, VL, VNNI; BF16 where present) kernels,
 * compiled per function with target attributes, picked at run time. */
#include "engine/kernels_impl.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define AVX512BF16 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")))

AVX512 static inline float half_to_float(uint16_t h)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

AVX512 static inline float hsum256_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- float rows: 16 lanes, 4 accumulators ---- */

AVX512 static void dot_f32_avx512(int64_t n, float *out, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * k),
                                     _mm512_loadu_ps(y + i + 16 * k), acc[k]);
    for (; i + 16 <= n; i += 16)
        acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc[0]);
    if (i < n) { /* masked tail */
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc[1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), acc[1]);
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                              _mm512_add_ps(acc[2], acc[3])));
}

AVX512 static inline __m512 load_f16x16(const uint16_t *p, __mmask16 m)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

AVX512 static void dot_f16_avx512(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm512_fmadd_ps(load_f16x16(x + i + 16 * k, 0xffff),
                                     load_f16x16(y + i + 16 * k, 0xffff), acc[k]);
    for (; i + 16 <= n; i += 16)
        acc[0] = _mm512_fmadd_ps(load_f16x16(x + i, 0xffff), load_f16x16(y + i, 0xffff), acc[0]);
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc[1] = _mm512_fmadd_ps(load_f16x16(x + i, m), load_f16x16(y + i, m), acc[1]);
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                              _mm512_add_ps(acc[2], acc[3])));
}

AVX512 static inline __m512 load_bf16x16(const uint16_t *p, __mmask16 m)
{
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* Widening bf16 to fp32 and FMA: exact products, as the scalar path. */
AVX512 static void dot_bf16_avx512(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 2; k++)
            acc[k] = _mm512_fmadd_ps(load_bf16x16(x + i + 16 * k, 0xffff),
                                     load_bf16x16(y + i + 16 * k, 0xffff), acc[k]);
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        acc[1] = _mm512_fmadd_ps(load_bf16x16(x + i, m), load_bf16x16(y + i, m), acc[1]);
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

/* With AVX512_BF16: vdpbf16ps multiplies bf16 pairs and accumulates in
 * fp32 (products are exact in fp32, so only the summation differs). */
AVX512BF16 static void dot_bf16_avx512bf16(int64_t n, float *out, const void *w,
                                           const void *a)
{
    const uint16_t *x = w, *y = a;
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 2; k++) {
            __m512i xv = _mm512_loadu_si512((const void *)(x + i + 32 * k));
            __m512i yv = _mm512_loadu_si512((const void *)(y + i + 32 * k));
            acc[k] = _mm512_dpbf16_ps(acc[k], (__m512bh)xv, (__m512bh)yv);
        }
    for (; i < n; i += 32) {
        __mmask32 m = n - i >= 32 ? 0xffffffffu : (__mmask32)((1u << (n - i)) - 1);
        __m512i xv = _mm512_maskz_loadu_epi16(m, x + i);
        __m512i yv = _mm512_maskz_loadu_epi16(m, y + i);
        acc[1] = _mm512_dpbf16_ps(acc[1], (__m512bh)xv, (__m512bh)yv);
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

/* ---- Q8_0 activations: vpdpbusd with unsigned weights ----
 * The offset correction (-128 sum(y) for Q8_0 stored as x+128, -8 sum(y)
 * for Q4_0's nibbles) makes each block's integer sum exact; the float
 * arithmetic is kernels_impl.h's HX_CANON_Q8A, shared with the panel
 * kernels (two chains, even and odd blocks). */

AVX512 static inline int hsum_epi32_256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* fmaf(a, b, c), one rounding */
AVX512 static inline float fma1(float a, float b, float c)
{
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

AVX512 static inline int q8_0_isum(const hx_block_q8_0 *x, const hx_block_q8a *y)
{
    __m256i xu = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs),
                                  _mm256_set1_epi8((char)0x80));
    __m256i yv = _mm256_loadu_si256((const __m256i *)y->qs);
    return hsum_epi32_256(_mm256_dpbusd_epi32(_mm256_setzero_si256(), xu, yv)) - 128 * y->s;
}

AVX512 static inline int q4_0_isum(const hx_block_q4_0 *x, const hx_block_q8a *y)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)x->qs);
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw),
                                 _mm256_set1_epi8(0x0f));
    __m256i yv = _mm256_loadu_si256((const __m256i *)y->qs);
    return hsum_epi32_256(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q, yv)) - 8 * y->s;
}

#define DOT_Q8A(ISUM, XT)                                                      \
    const XT *x = w;                                                           \
    const hx_block_q8a *y = a;                                                 \
    int64_t nb = n / HX_QK, i = 0;                                             \
    float acc0 = 0, acc1 = 0;                                                  \
    for (; i + 2 <= nb; i += 2) {                                              \
        acc0 = fma1((float)ISUM(x + i, y + i), half_to_float(x[i].d) * y[i].d, acc0); \
        acc1 = fma1((float)ISUM(x + i + 1, y + i + 1),                         \
                    half_to_float(x[i + 1].d) * y[i + 1].d, acc1);             \
    }                                                                          \
    if (i < nb) acc0 = fma1((float)ISUM(x + i, y + i), half_to_float(x[i].d) * y[i].d, acc0); \
    *out = acc0 + acc1

AVX512 static void dot_q8_0_avx512(int64_t n, float *out, const void *w, const void *a)
{
    DOT_Q8A(q8_0_isum, hx_block_q8_0);
}

AVX512 static void dot_q4_0_avx512(int64_t n, float *out, const void *w, const void *a)
{
    DOT_Q8A(q4_0_isum, hx_block_q4_0);
}

/* Prefetch for the four-row GEMVs, spread over the loop (the step at byte
 * offset off of each of the nr rows, step bytes per row). Rows are short streams (a
 * few lines to a few kB), too short for the hardware prefetcher to ramp
 * up; asking for all of the next four rows at once (as before) overflows
 * the L1 and the miss queue when rows are long (an FFN-down row of 9728
 * Q4_K weights is 5.5 kB). So:
 *   - groups of up to PF_QUAD bytes: each step asks for its share of the
 *     next nr rows, in address order (one stream, one group ahead);
 *   - longer rows: each row asks for PF_DIST bytes ahead of itself, or,
 *     past its end, the same place in the next group (x[k] + nr ws).
 * Measured per CPU-second on one thread, streaming 256 MB (noisy, shared
 * machine): Q4_K K=9728 ~15 -> ~19 GB/s, K=2560 ~17 -> ~19; Q4_0 and
 * Q6_K at K=1024 unchanged; per-row streams for short rows were worse.
 * Nothing at or beyond lim is asked for. */
#define PF_QUAD 16384
#define PF_DIST 1024
AVX512 static inline __attribute__((always_inline)) void prefetch_rows(
    const void *const *x, int nr, size_t off, size_t step, size_t ws, const char *lim)
{
    if ((size_t)nr * ws <= PF_QUAD) {
        const char *nx = (const char *)x[0] + (size_t)nr * ws;
        const char *p = (const char *)((uintptr_t)(nx + nr * off) & ~(uintptr_t)63);
        const char *e = nx + nr * (off + step);
        if (e > lim) e = lim;
        for (; p < e; p += 64) _mm_prefetch(p, _MM_HINT_T0);
        return;
    }
    size_t o = off + PF_DIST, adv = o < ws ? o : (size_t)(nr - 1) * ws + o;
    for (int k = 0; k < nr; k++) {
        const char *p = (const char *)x[k] + adv;
        for (size_t l = 0; l < step; l += 64)
            if (p + l < lim) _mm_prefetch(p + l, _MM_HINT_T0);
    }
}

/* Four rows against one token, a row per lane: the activation block is
 * loaded once, the four block sums are reduced together, and each lane
 * keeps the dot's two chains (HX_CANON_Q8A), so every lane equals the dot
 * of its row bit for bit. */
#define Q8A_ROWS4(NAME, XT, WVEC, OFF)                                          \
    AVX512 static inline __attribute__((always_inline)) __m128 NAME##_blk(     \
        const XT *const *x, const hx_block_q8a *y, int64_t i, __m128 acc)      \
    {                                                                          \
        __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);             \
        __m256i z = _mm256_setzero_si256();                                    \
        __m256i p0 = _mm256_dpbusd_epi32(z, WVEC(&x[0][i]), yv);               \
        __m256i p1 = _mm256_dpbusd_epi32(z, WVEC(&x[1][i]), yv);               \
        __m256i p2 = _mm256_dpbusd_epi32(z, WVEC(&x[2][i]), yv);               \
        __m256i p3 = _mm256_dpbusd_epi32(z, WVEC(&x[3][i]), yv);               \
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3)); \
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)); \
        s = _mm_sub_epi32(s, _mm_set1_epi32(OFF * y[i].s));                   \
        __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d, \
                                    (short)x[3][i].d, 0, 0, 0, 0);             \
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(dh), _mm_set1_ps(y[i].d));         \
        return _mm_fmadd_ps(_mm_cvtepi32_ps(s), dd, acc);                      \
    }                                                                          \
    AVX512 static void NAME(int64_t n, const XT *const *x, const hx_block_q8a *y, \
                            float *out, size_t ldo, size_t ws, const char *lim) \
    {                                                                          \
        __m128 acc0 = _mm_setzero_ps(), acc1 = _mm_setzero_ps();               \
        int64_t nb = n / HX_QK, i = 0;                                         \
        for (; i + 2 <= nb; i += 2) {                                          \
            prefetch_rows((const void *const *)x, 4, (size_t)i * sizeof(XT), 2 * sizeof(XT), ws, lim); \
            acc0 = NAME##_blk(x, y, i, acc0);                                  \
            acc1 = NAME##_blk(x, y, i + 1, acc1);                              \
        }                                                                      \
        if (i < nb) acc0 = NAME##_blk(x, y, i, acc0);                          \
        float r[4];                                                            \
        _mm_storeu_ps(r, _mm_add_ps(acc0, acc1));                              \
        for (int k = 0; k < 4; k++) out[k * ldo] = r[k];                       \
    }

AVX512 static inline __m256i q8_0_wvec(const hx_block_q8_0 *x)
{
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs), _mm256_set1_epi8((char)0x80));
}

AVX512 static inline __m256i q4_0_wvec(const hx_block_q4_0 *x)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)x->qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
}

Q8A_ROWS4(q8_0_rows4, hx_block_q8_0, q8_0_wvec, 128)
Q8A_ROWS4(q4_0_rows4, hx_block_q4_0, q4_0_wvec, 8)

/* Four rows against up to MT_MAX tokens of a small batch (a speculative
 * pass): two blocks per step in 512-bit vectors; each row's pair of
 * blocks is loaded, widened and its scales converted once, then met by
 * every token. Per token only the dot products, one reduction of the four
 * rows' 8 block sums and one FMA remain. Lane k of the low half
 * accumulates the even blocks of row k, the high half the odd ones, as
 * the dot's two chains do (HX_CANON_Q8A): every output equals the dot of
 * its row and token bit for bit. */
#define MT_MAX 8

/* The 8 block sums [p0 p1 p2 p3 of block i | of block i+1] of four
 * 16-lane products (lanes 0-7 block i, 8-15 block i+1). */
AVX512 static inline __m256i sum4_pairs(__m512i p0, __m512i p1, __m512i p2, __m512i p3)
{
    __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    /* per 128-bit lane: the lane's sums of p0, p1, p2, p3 */
    __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    c = _mm512_add_epi32(c, _mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(2, 0, 2, 0)));
}

#define Q8A_ROWS4_MT(NAME, XT, WVEC, OFF)                                       \
    AVX512 static void NAME(int64_t n, const XT *const *x, const hx_block_q8a *const *y, \
                            int nt, float *out, size_t ldo, size_t ws, const char *lim) \
    {                                                                          \
        __m256 acc[MT_MAX];                                                    \
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();             \
        int64_t nb = n / HX_QK, i = 0;                                         \
        for (; i + 2 <= nb; i += 2) {                                          \
            prefetch_rows((const void *const *)x, 4, (size_t)i * sizeof(XT), 2 * sizeof(XT), ws, lim); \
            __m512i wv[4];                                                     \
            for (int k = 0; k < 4; k++)                                        \
                wv[k] = _mm512_inserti64x4(_mm512_castsi256_si512(WVEC(&x[k][i])), \
                                           WVEC(&x[k][i + 1]), 1);             \
            __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d, \
                                        (short)x[3][i].d, (short)x[0][i + 1].d, \
                                        (short)x[1][i + 1].d, (short)x[2][i + 1].d, \
                                        (short)x[3][i + 1].d);                 \
            __m256 dw = _mm256_cvtph_ps(dh);                                   \
            for (int t = 0; t < nt; t++) {                                     \
                const hx_block_q8a *b = y[t] + i;                              \
                __m512i yv = _mm512_inserti64x4(                               \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs)), \
                    _mm256_loadu_si256((const __m256i *)b[1].qs), 1);          \
                __m512i z = _mm512_setzero_si512();                            \
                __m256i s = sum4_pairs(_mm512_dpbusd_epi32(z, wv[0], yv),      \
                                       _mm512_dpbusd_epi32(z, wv[1], yv),      \
                                       _mm512_dpbusd_epi32(z, wv[2], yv),      \
                                       _mm512_dpbusd_epi32(z, wv[3], yv));     \
                s = _mm256_sub_epi32(s, _mm256_set_m128i(_mm_set1_epi32(OFF * b[1].s), \
                                                         _mm_set1_epi32(OFF * b[0].s))); \
                __m256 dy = _mm256_set_m128(_mm_set1_ps(b[1].d), _mm_set1_ps(b[0].d)); \
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, dy), acc[t]); \
            }                                                                  \
        }                                                                      \
        for (int t = 0; t < nt; t++) {                                         \
            __m128 a0 = _mm256_castps256_ps128(acc[t]), a1 = _mm256_extractf128_ps(acc[t], 1); \
            if (i < nb) a0 = NAME##_tail(x, y[t], i, a0); /* last, even block */ \
            float r[4];                                                        \
            _mm_storeu_ps(r, _mm_add_ps(a0, a1));                              \
            for (int k = 0; k < 4; k++) out[k * ldo + (size_t)t] = r[k];       \
        }                                                                      \
    }

#define q8_0_rows4_mt_tail q8_0_rows4_blk
#define q4_0_rows4_mt_tail q4_0_rows4_blk
Q8A_ROWS4_MT(q8_0_rows4_mt, hx_block_q8_0, q8_0_wvec, 128)
Q8A_ROWS4_MT(q4_0_rows4_mt, hx_block_q4_0, q4_0_wvec, 8)

/* Eight Q4_0 rows against one token, two blocks per step. One 256-bit
 * vector holds a row's blocks i and i+1 (16 packed bytes each), so their
 * low and high nibbles meet the activations rearranged the same way
 * (ylo = quants 0-15 of both blocks, yhi = quants 16-31) in two vpdpbusd;
 * after the reduction tree lanes 0-3 hold rows 0-3 of block i and lanes
 * 4-7 of block i+1. Block i is even, so the low lanes carry the dot's even
 * chain and the high lanes its odd chain (HX_CANON_Q8A): each row equals
 * its dot bit for bit, with about half the instructions per block of
 * q4_0_rows4. */
AVX512 static inline __attribute__((always_inline)) __m256i q4_0_pair(
    const hx_block_q4_0 *x, int64_t i, __m256i ylo, __m256i yhi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i raw = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)x[i + 1].qs),
                                   _mm_loadu_si128((const __m128i *)x[i].qs));
    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_and_si256(raw, m4), ylo);
    return _mm256_dpbusd_epi32(p, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), yhi);
}

AVX512 static inline __attribute__((always_inline)) __m256 q4_0_pair_d(
    const hx_block_q4_0 *const *x, int64_t i, __m256 dy)
{
    __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d,
                                (short)x[3][i].d, (short)x[0][i + 1].d, (short)x[1][i + 1].d,
                                (short)x[2][i + 1].d, (short)x[3][i + 1].d);
    return _mm256_mul_ps(_mm256_cvtph_ps(dh), dy);
}

AVX512 static void q4_0_rows8(int64_t n, const hx_block_q4_0 *const *x, const hx_block_q8a *y,
                              float *out, size_t ldo, size_t ws, const char *lim)
{
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}; /* rows 0-3, 4-7 */
    int64_t nb = n / HX_QK, i = 0;
    for (; i + 2 <= nb; i += 2) {
        prefetch_rows((const void *const *)x, 8, (size_t)i * sizeof(hx_block_q4_0),
                      2 * sizeof(hx_block_q4_0), ws, lim);
        __m256i ylo = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)y[i + 1].qs),
                                       _mm_loadu_si128((const __m128i *)y[i].qs));
        __m256i yhi = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(y[i + 1].qs + 16)),
                                       _mm_loadu_si128((const __m128i *)(y[i].qs + 16)));
        __m256i off = _mm256_set_m128i(_mm_set1_epi32(8 * y[i + 1].s), _mm_set1_epi32(8 * y[i].s));
        __m256 dy = _mm256_set_m128(_mm_set1_ps(y[i + 1].d), _mm_set1_ps(y[i].d));
        for (int g = 0; g < 2; g++) {
            const hx_block_q4_0 *const *xg = x + 4 * g;
            __m256i p0 = q4_0_pair(xg[0], i, ylo, yhi), p1 = q4_0_pair(xg[1], i, ylo, yhi);
            __m256i p2 = q4_0_pair(xg[2], i, ylo, yhi), p3 = q4_0_pair(xg[3], i, ylo, yhi);
            __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
            h = _mm256_sub_epi32(h, off);
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), q4_0_pair_d(xg, i, dy), acc[g]);
        }
    }
    for (int g = 0; g < 2; g++) {
        __m128 a0 = _mm256_castps256_ps128(acc[g]), a1 = _mm256_extractf128_ps(acc[g], 1);
        if (i < nb) a0 = q4_0_rows4_blk(x + 4 * g, y, i, a0); /* last, even block */
        float r[4];
        _mm_storeu_ps(r, _mm_add_ps(a0, a1));
        for (int k = 0; k < 4; k++) out[(4 * g + k) * ldo] = r[k];
    }
}

/* the loops over a kernel's registers unrolled, so their arrays stay in
 * registers (GCC does not at -O2) */
#define HX_UNROLL _Pragma("GCC unroll 8")

/* NAME(.., nt, ..) over NAME_n inlined with nt a constant 1..8, so that
 * per-token arrays (chains, partial sums) stay in registers. */
#define MT_BY_CONST_NT(NAME, XT, YT)                                            \
    AVX512 static void NAME(int64_t n, const XT *const *x, const YT *const *y, int nt, \
                            float *out, size_t ldo, size_t ws, const char *lim) \
    {                                                                          \
        switch (nt) {                                                          \
        case 2: NAME##_n(n, x, y, 2, out, ldo, ws, lim); break;                \
        case 3: NAME##_n(n, x, y, 3, out, ldo, ws, lim); break;                \
        case 4: NAME##_n(n, x, y, 4, out, ldo, ws, lim); break;                \
        case 5: NAME##_n(n, x, y, 5, out, ldo, ws, lim); break;                \
        case 6: NAME##_n(n, x, y, 6, out, ldo, ws, lim); break;                \
        case 7: NAME##_n(n, x, y, 7, out, ldo, ws, lim); break;                \
        case 8: NAME##_n(n, x, y, 8, out, ldo, ws, lim); break;                \
        default: NAME##_n(n, x, y, 1, out, ldo, ws, lim); break;               \
        }                                                                      \
    }

/* Per 128-bit lane, w[j] = dword j of a[0..3] (a 4 x 4 transpose). */
AVX512 static inline __attribute__((always_inline)) void transpose4_epi32(const __m256i *a,
                                                                          __m256i *w)
{
    __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    w[0] = _mm256_unpacklo_epi64(t0, t2);
    w[1] = _mm256_unpackhi_epi64(t0, t2);
    w[2] = _mm256_unpacklo_epi64(t1, t3);
    w[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* Rows k and k + 4 share a vector (low and high 128 bits), so the 8 x 8
 * transpose is two 4 x 4 transposes within 128-bit lanes: the low
 * nibbles (quants 0-15) give w[0..3], the high ones (16-31) w[4..7]. */
AVX512 static inline __attribute__((always_inline)) void q4_0_t8(
    const hx_block_q4_0 *const *x, int64_t i, __m256i w[8])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i lo[4], hi[4];
    HX_UNROLL for (int k = 0; k < 4; k++) {
        __m256i raw = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)x[k][i].qs)),
            _mm_loadu_si128((const __m128i *)x[k + 4][i].qs), 1);
        lo[k] = _mm256_and_si256(raw, m4);
        hi[k] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    }
    transpose4_epi32(lo, w);
    transpose4_epi32(hi, w + 4);
}

AVX512 static inline __m256i bcast_dword(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Block i of the eight rows into chain acc[t] of each of the nt tokens. */
AVX512 static inline __attribute__((always_inline)) void q4_0_rows8_blk(
    const hx_block_q4_0 *const *x, const hx_block_q8a *const *y, int64_t i, const int nt,
    __m256 *acc)
{
    __m256i w[8];
    q4_0_t8(x, i, w);
    __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d,
                                (short)x[3][i].d, (short)x[4][i].d, (short)x[5][i].d,
                                (short)x[6][i].d, (short)x[7][i].d);
    __m256 dx = _mm256_cvtph_ps(dh);
    HX_UNROLL for (int t = 0; t < nt; t++) {
        const hx_block_q8a *b = y[t] + i;
        __m256i s0 = _mm256_setzero_si256(), s1 = s0; /* integers: any order is exact */
        HX_UNROLL for (int j = 0; j < 8; j += 2) {
            s0 = _mm256_dpbusd_epi32(s0, w[j], bcast_dword(b->qs + 4 * j));
            s1 = _mm256_dpbusd_epi32(s1, w[j + 1], bcast_dword(b->qs + 4 * j + 4));
        }
        __m256i sum = _mm256_sub_epi32(_mm256_add_epi32(s0, s1), _mm256_set1_epi32(8 * b->s));
        __m256 dd = _mm256_mul_ps(dx, _mm256_set1_ps(b->d));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), dd, acc[t]);
    }
}

/* Eight Q4_0 rows against up to MT_MAX tokens (a speculative pass), one
 * block at a time and no horizontal sums. The rows' unpacked quants are
 * transposed once per block (dwords: lane k of w[j] holds row k's quants
 * 4j..4j+3); a token meets w[j] with its quants 4j..4j+3 broadcast, so
 * after eight vpdpbusd lane k is row k's exact block sum. The transpose
 * is paid once for all tokens, where the four-row kernel reduces every
 * row, block and token. The float steps are the dot's (HX_CANON_Q8A: even
 * blocks one chain, odd the other), so every output equals its one-token
 * dot bit for bit. nt is a constant where inlined (MT_BY_CONST_NT), so
 * the 2 nt chains stay in registers. */
AVX512 static inline __attribute__((always_inline)) void q4_0_rows8_mt_n(
    int64_t n, const hx_block_q4_0 *const *x, const hx_block_q8a *const *y, const int nt,
    float *out, size_t ldo, size_t ws, const char *lim)
{
    __m256 even[MT_MAX], odd[MT_MAX];
    HX_UNROLL for (int t = 0; t < nt; t++) even[t] = odd[t] = _mm256_setzero_ps();
    int64_t nb = n / HX_QK, i = 0;
    for (; i + 2 <= nb; i += 2) {
        prefetch_rows((const void *const *)x, 8, (size_t)i * sizeof(hx_block_q4_0),
                      2 * sizeof(hx_block_q4_0), ws, lim);
        q4_0_rows8_blk(x, y, i, nt, even);
        q4_0_rows8_blk(x, y, i + 1, nt, odd);
    }
    if (i < nb) q4_0_rows8_blk(x, y, i, nt, even); /* last, even block */
    HX_UNROLL for (int t = 0; t < nt; t++) {
        float r[8];
        _mm256_storeu_ps(r, _mm256_add_ps(even[t], odd[t]));
        for (int k = 0; k < 8; k++) out[k * ldo + (size_t)t] = r[k];
    }
}

MT_BY_CONST_NT(q4_0_rows8_mt, hx_block_q4_0, hx_block_q8a)

/* rows x tokens below the panel kernels' token count, four rows at a
 * time: one token through the four-row GEMV ROWS4, several through MT,
 * MTN tokens per call (each group of rows read and unpacked once per
 * call); leftover rows through the dot. */
#define GEMM_MT(NAME, ROWS4, MT, MTN, DOT, XT, YT)                              \
    AVX512 static void NAME(int64_t n, const void *w, size_t ws, int nr,        \
                            const void *const *a, int nt, float *out, size_t ldo) \
    {                                                                          \
        const char *lim = (const char *)w + (size_t)nr * ws;                   \
        const YT *const *y = (const YT *const *)a;                             \
        int r = 0;                                                             \
        for (; r + 4 <= nr; r += 4) {                                          \
            const XT *x[4];                                                    \
            for (int k = 0; k < 4; k++)                                        \
                x[k] = (const XT *)((const char *)w + (size_t)(r + k) * ws);   \
            if (nt == 1) {                                                     \
                ROWS4(n, x, y[0], out + (size_t)r * ldo, ldo, ws, lim);        \
                continue;                                                      \
            }                                                                  \
            for (int t = 0; t < nt; t += MTN)                                  \
                MT(n, x, y + t, nt - t < MTN ? nt - t : MTN,                   \
                   out + (size_t)r * ldo + t, ldo, ws, lim);                   \
        }                                                                      \
        for (; r < nr; r++)                                                    \
            for (int t = 0; t < nt; t++)                                       \
                DOT(n, out + (size_t)r * ldo + t, (const char *)w + (size_t)r * ws, a[t]); \
    }

GEMM_MT(gemm_q8_0_avx512, q8_0_rows4, q8_0_rows4_mt, MT_MAX, dot_q8_0_avx512, hx_block_q8_0,
        hx_block_q8a)
GEMM_MT(gemm_q4_0_by4_avx512, q4_0_rows4, q4_0_rows4_mt, MT_MAX, dot_q4_0_avx512, hx_block_q4_0,
        hx_block_q8a)

/* Q4_0: eight rows at a time (one token or several), the rest through
 * the four-row gemm above. */
AVX512 static void gemm_q4_0_avx512(int64_t n, const void *w, size_t ws, int nr,
                                    const void *const *a, int nt, float *out, size_t ldo)
{
    const char *lim = (const char *)w + (size_t)nr * ws;
    const hx_block_q8a *const *y = (const hx_block_q8a *const *)a;
    int r = 0;
    for (; r + 8 <= nr; r += 8) {
        const hx_block_q4_0 *x[8];
        for (int k = 0; k < 8; k++)
            x[k] = (const hx_block_q4_0 *)((const char *)w + (size_t)(r + k) * ws);
        float *o = out + (size_t)r * ldo;
        if (nt == 1) {
            q4_0_rows8(n, x, y[0], o, ldo, ws, lim);
            continue;
        }
        for (int t = 0; t < nt; t += MT_MAX)
            q4_0_rows8_mt(n, x, y + t, nt - t < MT_MAX ? nt - t : MT_MAX, o + t, ldo, ws, lim);
    }
    gemm_q4_0_by4_avx512(n, (const char *)w + (size_t)r * ws, ws, nr - r, a, nt,
                        out + (size_t)r * ldo, ldo);
}

/* ---- K-quants ---- */

/* sum_j m_j * (bsums[2j] + bsums[2j+1]) */
AVX512 static inline int k_min_term(uint64_t m, const int16_t *bsums)
{
    __m256i b = _mm256_loadu_si256((const __m256i *)bsums);
    __m128i mv = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m));
    /* each min twice, to meet both bsums of its 32 values */
    __m256i m2 = _mm256_permutexvar_epi16(
        _mm256_setr_epi16(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
        _mm256_castsi128_si256(mv));
    __m256i p = _mm256_madd_epi16(b, m2);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* acc += scale * (sum of products of unsigned q and signed y, in pairs) */
AVX512 static inline __m256i sub_dot(__m256i acc, __m256i q, __m256i yv, int scale)
{
    /* vpmaddwd + add rather than vpdpwssd: no long accumulator chain */
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), _mm256_set1_epi16((short)scale)));
}

/* Q4_K's 8 scales as words in both 128-bit lanes, for q4_K_isum. */
AVX512 static inline __m256i q4_K_scales(uint64_t sc)
{
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
}

/* One Q4_K super-block's integer sum sum_j sc_j*sum(q*y) over 8 lanes; the
 * scales (q4_K_scales) are broadcast by vpshufb and applied by vpdpwssd
 * (about 8% faster per CPU-second in cache than vpermw + vpmaddwd + add). */
AVX512 static inline __attribute__((always_inline)) __m256i q4_K_isum(
    const hx_block_q4_K *x, const hx_block_q8_K *y, __m256i scb)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i is0 = _mm256_setzero_si256(), is1 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int jp = 0; jp < 4; jp++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * jp));
        const int8_t *yq = y->qs + 64 * jp;
        __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(raw, m4), _mm256_loadu_si256((const __m256i *)yq));
        __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4),
                                          _mm256_loadu_si256((const __m256i *)(yq + 32)));
        short w0 = (short)(0x0100 + 0x0202 * (2 * jp)), w1 = (short)(0x0100 + 0x0202 * (2 * jp + 1));
        is0 = _mm256_dpwssd_epi32(is0, p0, _mm256_shuffle_epi8(scb, _mm256_set1_epi16(w0)));
        is1 = _mm256_dpwssd_epi32(is1, p1, _mm256_shuffle_epi8(scb, _mm256_set1_epi16(w1)));
    }
    return _mm256_add_epi32(is0, is1);
}

AVX512 static void dot_q4_K_avx512(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q4_K *x = w;
    const hx_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++) { /* HX_CANON Q4_K */
        uint64_t sc, mn;
        hx_k_unpack(x[i].scales, &sc, &mn);
        int isum = hsum_epi32_256(q4_K_isum(&x[i], &y[i], q4_K_scales(sc)));
        int msum = k_min_term(mn, y[i].bsums);
        acc = fma1((float)isum, half_to_float(x[i].d) * y[i].d, acc);
        acc = fma1((float)msum, -half_to_float(x[i].dmin) * y[i].d, acc);
    }
    *out = acc;
}

/* Four Q4_K rows against one token, a row per lane (as Q8A_ROWS4). The
 * min terms of the four rows share the activation's pair sums bsums[2j] +
 * bsums[2j+1] (each fits in 16 bits) and are reduced together. */
AVX512 static void q4_K_rows4(int64_t n, const hx_block_q4_K *const *x, const hx_block_q8_K *y,
                              float *out, size_t ldo, size_t ws, const char *lim)
{
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        prefetch_rows((const void *const *)x, 4, (size_t)i * sizeof(hx_block_q4_K), sizeof(hx_block_q4_K), ws, lim);
        __m128i bs2 = _mm256_cvtepi32_epi16(_mm256_madd_epi16(
            _mm256_loadu_si256((const __m256i *)y[i].bsums), _mm256_set1_epi16(1)));
        __m256i p[4];
        __m128i mp[4];
        for (int k = 0; k < 4; k++) {
            uint64_t sc, mn;
            hx_k_unpack(x[k][i].scales, &sc, &mn);
            p[k] = q4_K_isum(&x[k][i], &y[i], q4_K_scales(sc));
            mp[k] = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn)), bs2);
        }
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        __m128i ms = _mm_hadd_epi32(_mm_hadd_epi32(mp[0], mp[1]), _mm_hadd_epi32(mp[2], mp[3]));
        __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d,
                                    (short)x[3][i].d, (short)x[0][i].dmin, (short)x[1][i].dmin,
                                    (short)x[2][i].dmin, (short)x[3][i].dmin);
        __m256 dv = _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_set1_ps(y[i].d));
        __m128 nm = _mm_xor_ps(_mm256_extractf128_ps(dv, 1), _mm_set1_ps(-0.0f)); /* -(dmin*dy) */
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(s), _mm256_castps256_ps128(dv), acc);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(ms), nm, acc);
    }
    float r[4];
    _mm_storeu_ps(r, acc);
    for (int k = 0; k < 4; k++) out[k * ldo] = r[k];
}

AVX512 static void dot_q5_K_avx512(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q5_K *x = w;
    const hx_block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        uint64_t sc, mn;
        hx_k_unpack(x[i].scales, &sc, &mn);
        __m256i hb = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i is0 = _mm256_setzero_si256(), is1 = _mm256_setzero_si256();
        for (int jp = 0; jp < 4; jp++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * jp));
            /* fifth bits of sub-blocks 2jp and 2jp+1 as 0x10 bytes */
            __mmask32 k0 = _mm256_test_epi8_mask(hb, _mm256_set1_epi8((char)(1 << (2 * jp))));
            __mmask32 k1 = _mm256_test_epi8_mask(hb, _mm256_set1_epi8((char)(2 << (2 * jp))));
            __m256i lo = _mm256_and_si256(raw, m4);
            lo = _mm256_mask_add_epi8(lo, k0, lo, b4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            hi = _mm256_mask_add_epi8(hi, k1, hi, b4);
            const int8_t *yq = y[i].qs + 64 * jp;
            is0 = sub_dot(is0, lo, _mm256_loadu_si256((const __m256i *)yq), HX_K_BYTE(sc, 2 * jp));
            is1 = sub_dot(is1, hi, _mm256_loadu_si256((const __m256i *)(yq + 32)), HX_K_BYTE(sc, 2 * jp + 1));
        }
        __m256i isum = _mm256_add_epi32(is0, is1);
        float d = half_to_float(x[i].d) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        mins += half_to_float(x[i].dmin) * y[i].d * (float)k_min_term(mn, y[i].bsums);
    }
    *out = hsum256_ps(acc) - mins;
}

/* One Q6_K super-block's integer sum sum_j sc_j*(sum(q*y) - 32*bsums[j])
 * spread over 8 lanes; the sub-block scales come from the half's 8 scales
 * (in both 128-bit lanes) by in-lane vpshufb and are applied by vpdpwssd. */
AVX512 static inline __attribute__((always_inline)) __m256i q6_K_isum(
    const hx_block_q6_K *x, const hx_block_q8_K *y)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    __m256i scs = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    __m256i isum = _mm256_setzero_si256();
    /* both halves' scales up front: vpermq needs an immediate, which
     * "h ? 0xee : 0x44" is only once the loop is unrolled (not at -O1) */
    const __m256i scbs[2] = {_mm256_permute4x64_epi64(scs, 0x44),
                             _mm256_permute4x64_epi64(scs, 0xee)};
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m256i scb = scbs[h];
        const uint8_t *ql = x->ql + 64 * h;
        __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m2));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            /* lane 0: scale 2k of the half, lane 1: 2k + 1 */
            short c0 = (short)(0x0100 + 0x0202 * (2 * k)), c1 = (short)(0x0100 + 0x0202 * (2 * k + 1));
            __m256i ctl = _mm256_set_m128i(_mm_set1_epi16(c1), _mm_set1_epi16(c0));
            __m256i yv = _mm256_loadu_si256((const __m256i *)(y->qs + 128 * h + 32 * k));
            isum = _mm256_dpwssd_epi32(isum, _mm256_maddubs_epi16(q[k], yv), _mm256_shuffle_epi8(scb, ctl));
        }
    }
    __m256i b = _mm256_loadu_si256((const __m256i *)y->bsums);
    return _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(scs, b), 5));
}

AVX512 static void dot_q6_K_avx512(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q6_K *x = w;
    const hx_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++) /* HX_CANON Q6_K */
        acc = fma1((float)hsum_epi32_256(q6_K_isum(&x[i], &y[i])), half_to_float(x[i].d) * y[i].d, acc);
    *out = acc;
}

/* Four Q6_K rows against one token, a row per lane (as Q8A_ROWS4). */
AVX512 static void q6_K_rows4(int64_t n, const hx_block_q6_K *const *x, const hx_block_q8_K *y,
                              float *out, size_t ldo, size_t ws, const char *lim)
{
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        prefetch_rows((const void *const *)x, 4, (size_t)i * sizeof(hx_block_q6_K), sizeof(hx_block_q6_K), ws, lim);
        __m256i p0 = q6_K_isum(&x[0][i], &y[i]), p1 = q6_K_isum(&x[1][i], &y[i]);
        __m256i p2 = q6_K_isum(&x[2][i], &y[i]), p3 = q6_K_isum(&x[3][i], &y[i]);
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d,
                                    (short)x[3][i].d, 0, 0, 0, 0);
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(dh), _mm_set1_ps(y[i].d));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(s), dd, acc);
    }
    float r[4];
    _mm_storeu_ps(r, acc);
    for (int k = 0; k < 4; k++) out[k * ldo] = r[k];
}

/* ---- K-quants, several tokens: per super-block each of the four rows
 * is unpacked once (its 8 sub-block vectors of q and of broadcast scales)
 * and met by every token; then the four rows' sums of each token are
 * reduced and applied as in the one-token kernels (HX_CANON Q4_K / Q6_K:
 * the integer sums are exact, the float steps the same), so every output
 * equals the dot bit for bit. ---- */

typedef struct kq_row {
    __m256i q[8], sc[8]; /* unsigned values, sub-block scales as words */
    __m128i mn;          /* Q4_K: the 8 mins as words */
    __m256i scs;         /* Q6_K: the 16 scales as words */
} kq_row;

AVX512 static inline __attribute__((always_inline)) void q4_K_unpack(const hx_block_q4_K *x,
                                                                     kq_row *r)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    uint64_t sc, mn;
    hx_k_unpack(x->scales, &sc, &mn);
    __m256i scb = q4_K_scales(sc);
    r->mn = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)mn));
#pragma GCC unroll 4
    for (int jp = 0; jp < 4; jp++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * jp));
        r->q[2 * jp] = _mm256_and_si256(raw, m4);
        r->q[2 * jp + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        for (int h = 0; h < 2; h++)
            r->sc[2 * jp + h] = _mm256_shuffle_epi8(
                scb, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * jp + h))));
    }
}

AVX512 static inline __attribute__((always_inline)) void q6_K_unpack(const hx_block_q6_K *x,
                                                                     kq_row *r)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    r->scs = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    const __m256i scbs[2] = {_mm256_permute4x64_epi64(r->scs, 0x44),
                             _mm256_permute4x64_epi64(r->scs, 0xee)};
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h;
        __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
        __m256i *q = r->q + 4 * h;
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
        q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m2));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
        for (int k = 0; k < 4; k++) {
            short c0 = (short)(0x0100 + 0x0202 * (2 * k)), c1 = (short)(0x0100 + 0x0202 * (2 * k + 1));
            r->sc[4 * h + k] = _mm256_shuffle_epi8(scbs[h], _mm256_set_m128i(_mm_set1_epi16(c1),
                                                                             _mm_set1_epi16(c0)));
        }
    }
}

/* sum_j sc_j * sum(q_j * y_j) over 8 lanes, for an unpacked row (four
 * chains: vpdpwssd's latency, not its throughput, bounds one chain) */
AVX512 static inline __attribute__((always_inline)) __m256i kq_isum(const kq_row *r,
                                                                    const int8_t *yq)
{
    __m256i is[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                     _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        is[j & 3] = _mm256_dpwssd_epi32(is[j & 3], _mm256_maddubs_epi16(r->q[j],
                                        _mm256_loadu_si256((const __m256i *)(yq + 32 * j))), r->sc[j]);
    return _mm256_add_epi32(_mm256_add_epi32(is[0], is[1]), _mm256_add_epi32(is[2], is[3]));
}

AVX512 static inline __m128i sum4_256(const __m256i *p)
{
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

#define KQ_MT 8
/* The four rows' results of nt tokens: row k of token t to out[k ldo + t]. */
AVX512 static inline void kq_store(const __m128 *acc, int nt, float *out, size_t ldo)
{
    for (int t = 0; t < nt; t++) {
        float r[4];
        _mm_storeu_ps(r, acc[t]);
        for (int k = 0; k < 4; k++) out[k * ldo + (size_t)t] = r[k];
    }
}

AVX512 static inline __attribute__((always_inline)) void q4_K_rows4_mt_n(
    int64_t n, const hx_block_q4_K *const *x, const hx_block_q8_K *const *y, const int nt, float *out,
    size_t ldo, size_t ws, const char *lim)
{
    __m128 acc[KQ_MT];
    HX_UNROLL for (int t = 0; t < nt; t++) acc[t] = _mm_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        prefetch_rows((const void *const *)x, 4, (size_t)i * sizeof(hx_block_q4_K), sizeof(hx_block_q4_K), ws, lim);
        __m256i p[KQ_MT][4];
        __m128i mp[KQ_MT][4];
        __m128i bs2[KQ_MT];
        HX_UNROLL for (int t = 0; t < nt; t++)
            bs2[t] = _mm256_cvtepi32_epi16(_mm256_madd_epi16(
                _mm256_loadu_si256((const __m256i *)y[t][i].bsums), _mm256_set1_epi16(1)));
        HX_UNROLL for (int k = 0; k < 4; k++) {
            kq_row r;
            q4_K_unpack(&x[k][i], &r);
            HX_UNROLL for (int t = 0; t < nt; t++) {
                p[t][k] = kq_isum(&r, y[t][i].qs);
                mp[t][k] = _mm_madd_epi16(r.mn, bs2[t]);
            }
        }
        __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d,
                                    (short)x[3][i].d, (short)x[0][i].dmin, (short)x[1][i].dmin,
                                    (short)x[2][i].dmin, (short)x[3][i].dmin);
        __m256 dd = _mm256_cvtph_ps(dh);
        HX_UNROLL for (int t = 0; t < nt; t++) {
            __m128i ms = _mm_hadd_epi32(_mm_hadd_epi32(mp[t][0], mp[t][1]),
                                        _mm_hadd_epi32(mp[t][2], mp[t][3]));
            __m256 dv = _mm256_mul_ps(dd, _mm256_set1_ps(y[t][i].d));
            __m128 nm = _mm_xor_ps(_mm256_extractf128_ps(dv, 1), _mm_set1_ps(-0.0f));
            acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(sum4_256(p[t])), _mm256_castps256_ps128(dv), acc[t]);
            acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(ms), nm, acc[t]);
        }
    }
    kq_store(acc, nt, out, ldo);
}
MT_BY_CONST_NT(q4_K_rows4_mt, hx_block_q4_K, hx_block_q8_K)

AVX512 static void q6_K_rows4_mt(int64_t n, const hx_block_q6_K *const *x,
                                 const hx_block_q8_K *const *y, int nt, float *out, size_t ldo,
                                 size_t ws, const char *lim)
{
    __m128 acc[KQ_MT];
    for (int t = 0; t < nt; t++) acc[t] = _mm_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        prefetch_rows((const void *const *)x, 4, (size_t)i * sizeof(hx_block_q6_K), sizeof(hx_block_q6_K), ws, lim);
        __m256i p[KQ_MT][4];
        for (int k = 0; k < 4; k++) {
            kq_row r;
            q6_K_unpack(&x[k][i], &r);
            for (int t = 0; t < nt; t++) {
                __m256i b = _mm256_loadu_si256((const __m256i *)y[t][i].bsums);
                p[t][k] = _mm256_sub_epi32(kq_isum(&r, y[t][i].qs),
                                           _mm256_slli_epi32(_mm256_madd_epi16(r.scs, b), 5));
            }
        }
        __m128i dh = _mm_setr_epi16((short)x[0][i].d, (short)x[1][i].d, (short)x[2][i].d,
                                    (short)x[3][i].d, 0, 0, 0, 0);
        __m128 dw = _mm_cvtph_ps(dh);
        for (int t = 0; t < nt; t++)
            acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(sum4_256(p[t])),
                                  _mm_mul_ps(dw, _mm_set1_ps(y[t][i].d)), acc[t]);
    }
    kq_store(acc, nt, out, ldo);
}

GEMM_MT(gemm_q6_K_avx512, q6_K_rows4, q6_K_rows4_mt, KQ_MT, dot_q6_K_avx512, hx_block_q6_K,
        hx_block_q8_K)
GEMM_MT(gemm_q4_K_avx512, q4_K_rows4, q4_K_rows4_mt, KQ_MT, dot_q4_K_avx512, hx_block_q4_K,
        hx_block_q8_K)

/* From TILE_MIN_TOKENS tokens Q4_0, Q8_0, Q4_K and Q6_K run the panel
 * kernels (kernels_panel.c); below, the four-row GEMVs or the dots. */
void hx_kernels_fill_avx512(hx_kernels *k, int has_bf16)
{
    k->dot[HX_TYPE_F32] = dot_f32_avx512;
    k->dot[HX_TYPE_F16] = dot_f16_avx512;
    k->dot[HX_TYPE_BF16] = has_bf16 ? dot_bf16_avx512bf16 : dot_bf16_avx512;
    k->dot[HX_TYPE_Q8_0] = dot_q8_0_avx512;
    k->dot[HX_TYPE_Q4_0] = dot_q4_0_avx512;
    k->dot[HX_TYPE_Q4_K] = dot_q4_K_avx512;
    k->dot[HX_TYPE_Q5_K] = dot_q5_K_avx512;
    k->dot[HX_TYPE_Q6_K] = dot_q6_K_avx512;
    k->gemm[HX_TYPE_Q4_K] = gemm_q4_K_avx512;
    k->gemm[HX_TYPE_Q6_K] = gemm_q6_K_avx512;
    k->gemm[HX_TYPE_Q8_0] = gemm_q8_0_avx512;
    k->gemm[HX_TYPE_Q4_0] = gemm_q4_0_avx512;
    /* the small-batch gemms read and unpack each row once for up to 8 tokens
     * (one TOKEN_TILE): ahead of unpacking panels below 9 tokens */
    k->tile_min[HX_TYPE_Q8_0] = k->tile_min[HX_TYPE_Q4_0] = 9;
    k->tile_min[HX_TYPE_Q4_K] = k->tile_min[HX_TYPE_Q6_K] = 9;
}

#else /* not x86-64: the scalar table stays */

void hx_kernels_fill_avx512(hx_kernels *k, int has_bf16)
{
    (void)k;
    (void)has_bf16;
}

#endif
