/* kernels_avx2.c: AVX2 + FMA + F16C kernels, compiled per function with
 * target attributes so the binary still runs on any x86-64. */
#include "engine/kernels_impl.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static inline int hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

AVX2 static inline float half_to_float(uint16_t h)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* unsigned bytes x signed bytes -> 8 int32 sums of 4 products each */
AVX2 static inline __m256i dot_u8s8(__m256i u, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* ---- float rows ---- */

AVX2 static void dot_f32_avx2(int64_t n, float *out, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k),
                                     _mm256_loadu_ps(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc[0]);
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) s += x[i] * y[i];
    *out = s;
}

AVX2 static void dot_f16_avx2(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8 * k)));
            __m256 yv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i + 8 * k)));
            acc[k] = _mm256_fmadd_ps(xv, yv, acc[k]);
        }
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i)));
        __m256 yv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i)));
        acc[0] = _mm256_fmadd_ps(xv, yv, acc[0]);
    }
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) s += half_to_float(x[i]) * half_to_float(y[i]);
    *out = s;
}

AVX2 static inline __m256 load_bf16(const uint16_t *p)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

AVX2 static void dot_bf16_avx2(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_bf16(x + i + 8 * k), load_bf16(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), acc[0]);
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) s += hx_bf16_to_fp32(x[i]) * hx_bf16_to_fp32(y[i]);
    *out = s;
}

/* ---- Q8_0 activations ---- */

AVX2 static void dot_q8_0_avx2(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q8_0 *x = w;
    const hx_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK; i++) {
        __m256i xv = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        /* |x| times y with x's sign: maddubs wants unsigned x. */
        __m256i p = dot_u8s8(_mm256_sign_epi8(xv, xv), _mm256_sign_epi8(yv, xv));
        __m256 d = _mm256_set1_ps(half_to_float(x[i].d) * y[i].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *out = hsum_ps(acc);
}

/* 32 nibbles of a Q4_0 block as bytes: elements 0-15 low, 16-31 high. */
AVX2 static inline __m256i q4_0_bytes(const uint8_t *qs)
{
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

AVX2 static void dot_q4_0_avx2(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q4_0 *x = w;
    const hx_block_q8a *y = a;
    __m256 acc = _mm256_setzero_ps();
    float corr = 0;
    for (int64_t i = 0; i < n / HX_QK; i++) {
        __m256i yv = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256i p = dot_u8s8(q4_0_bytes(x[i].qs), yv); /* q in 0..15 */
        float d = half_to_float(x[i].d) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc);
        corr += d * (float)y[i].s; /* the -8 offset: 8 * d * sum(y) */
    }
    *out = hsum_ps(acc) - 8 * corr;
}

/* ---- K-quants (Q8_K activations) ---- */

/* sum_j m_j * (bsums[2j] + bsums[2j+1]) */
AVX2 static inline int k_min_term(uint64_t m, const int16_t *bsums)
{
    __m256i b = _mm256_loadu_si256((const __m256i *)bsums);
    __m256i pairs = _mm256_madd_epi16(b, _mm256_set1_epi16(1)); /* 8 int32 */
    __m256i mv = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m));
    return hsum_i32(_mm256_mullo_epi32(pairs, mv));
}

AVX2 static void dot_q4_K_avx2(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q4_K *x = w;
    const hx_block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        uint64_t sc, mn;
        hx_k_unpack(x[i].scales, &sc, &mn);
        __m256i isum = _mm256_setzero_si256();
        for (int jp = 0; jp < 4; jp++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * jp));
            __m256i lo = _mm256_and_si256(raw, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * jp));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * jp + 32));
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16((short)HX_K_BYTE(sc, 2 * jp)));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16((short)HX_K_BYTE(sc, 2 * jp + 1)));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
        }
        float d = half_to_float(x[i].d) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        mins += half_to_float(x[i].dmin) * y[i].d * (float)k_min_term(mn, y[i].bsums);
    }
    *out = hsum_ps(acc) - mins;
}

AVX2 static void dot_q5_K_avx2(int64_t n, float *out, const void *w, const void *a)
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
        __m256i isum = _mm256_setzero_si256();
        for (int jp = 0; jp < 4; jp++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * jp));
            __m256i bit0 = _mm256_set1_epi8((char)(1 << (2 * jp)));
            __m256i bit1 = _mm256_set1_epi8((char)(1 << (2 * jp + 1)));
            __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit0), bit0), b4);
            __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit1), bit1), b4);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, m4), h0);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), h1);
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * jp));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * jp + 32));
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16((short)HX_K_BYTE(sc, 2 * jp)));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16((short)HX_K_BYTE(sc, 2 * jp + 1)));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
        }
        float d = half_to_float(x[i].d) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        mins += half_to_float(x[i].dmin) * y[i].d * (float)k_min_term(mn, y[i].bsums);
    }
    *out = hsum_ps(acc) - mins;
}

/* The four 32-element quarters of one Q6_K half as bytes 0..63. */
AVX2 static inline void q6_quarters(const uint8_t *ql, const uint8_t *qh, __m256i q[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                           _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
}

AVX2 static void dot_q6_K_avx2(int64_t n, float *out, const void *w, const void *a)
{
    const hx_block_q6_K *x = w;
    const hx_block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6_quarters(x[i].ql + 64 * h, x[i].qh + 32 * h, q);
            for (int k = 0; k < 4; k++) {
                const int8_t *sc = x[i].scales + 8 * h + 2 * k;
                __m256i yv = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], yv), scv));
            }
        }
        /* The -32 offset: 32 * sum_j sc_j * bsum_j. */
        __m256i scs = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        __m256i b = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(scs, b), 5);
        isum = _mm256_sub_epi32(isum, off);
        float d = half_to_float(x[i].d) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
    }
    *out = hsum_ps(acc);
}

/* ---- activation quantization (bit-exact with the scalar versions) ---- */

AVX2 static inline float hmax_ps(__m256 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Rounds 32 floats times scale to nearest even and packs them to int8 in
 * order; returns the 4 vectors of int32 through v. */
AVX2 static inline void round_pack32(const float *x, __m256 scale, int8_t *q, __m256i v[4])
{
    for (int k = 0; k < 4; k++) {
        __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale);
        f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q)); /* NaN -> 0, as scalar */
        v[k] = _mm256_cvtps_epi32(_mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    __m256i p01 = _mm256_packs_epi32(v[0], v[1]), p23 = _mm256_packs_epi32(v[2], v[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
}

AVX2 static void quant_q8a_avx2(const float *x, void *out, int64_t n)
{
    hx_block_q8a *y = out;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / HX_QK; i++, x += HX_QK) {
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) /* maxps returns its second operand for a NaN: skipped */
            mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * k), absmask), mx);
        float amax = hmax_ps(mx);
        float id = amax != 0 ? 127.0f / amax : 0.0f;
        y[i].d = hx_fp16_to_fp32(hx_fp32_to_fp16(amax / 127.0f));
        __m256i v[4];
        round_pack32(x, _mm256_set1_ps(id), y[i].qs, v);
        y[i].s = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(v[0], v[1]),
                                           _mm256_add_epi32(v[2], v[3])));
    }
}

AVX2 static void quant_q8K_avx2(const float *x, void *out, int64_t n)
{
    hx_block_q8_K *y = out;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < HX_QK_K; k += 8) /* NaNs skipped, as in quant_q8a_avx2 */
            mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), absmask), mx);
        float amax = hmax_ps(mx);
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0) continue;
        float iscale = hx_q8K_iscale(x, amax);
        for (int k = 0; k < HX_QK_K; k += 32) {
            __m256i v[4];
            round_pack32(x + k, _mm256_set1_ps(iscale), y[i].qs + k, v);
            y[i].bsums[k / 16] = (int16_t)hsum_i32(_mm256_add_epi32(v[0], v[1]));
            y[i].bsums[k / 16 + 1] = (int16_t)hsum_i32(_mm256_add_epi32(v[2], v[3]));
        }
        y[i].d = 1.0f / iscale;
    }
}

AVX2 static void quant_f16_avx2(const float *x, void *out, int64_t n)
{
    uint16_t *y = out;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = hx_fp32_to_fp16(x[i]);
}

void hx_kernels_fill_avx2(hx_kernels *k)
{
    k->dot[HX_TYPE_F32] = dot_f32_avx2;
    k->dot[HX_TYPE_F16] = dot_f16_avx2;
    k->dot[HX_TYPE_BF16] = dot_bf16_avx2;
    k->dot[HX_TYPE_Q8_0] = dot_q8_0_avx2;
    k->dot[HX_TYPE_Q4_0] = dot_q4_0_avx2;
    k->dot[HX_TYPE_Q4_K] = dot_q4_K_avx2;
    k->dot[HX_TYPE_Q5_K] = dot_q5_K_avx2;
    k->dot[HX_TYPE_Q6_K] = dot_q6_K_avx2;
    k->quant[HX_TYPE_Q8_0] = quant_q8a_avx2;
    k->quant[HX_TYPE_Q8_K] = quant_q8K_avx2;
    k->quant[HX_TYPE_F16] = quant_f16_avx2;
}

#else /* not x86-64: the scalar table stays */

void hx_kernels_fill_avx2(hx_kernels *k)
{
    (void)k;
}

#endif
