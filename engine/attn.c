/* attn.c: attention's vector primitives (attn.h): dot products and
 * updates of rows of the F16 or F32 KV cache, scalar, AVX2/F16C and NEON. */
#include "engine/attn.h"

#include <math.h>
#include <pthread.h>

#include "base/base.h"
#include "engine/kernels.h"

/* ---- scalar reference ---- */

static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_init(void)
{
    for (int i = 0; i < 65536; i++) f16_table[i] = hx_fp16_to_fp32((uint16_t)i);
}

static inline float h2f(uint16_t h) { return f16_table[h]; }

static float dot_f16_s(const float *q, const uint16_t *k, int d)
{
    float s = 0.0f;
    for (int i = 0; i < d; i++) s += q[i] * h2f(k[i]);
    return s;
}

static float dot_f32_s(const float *q, const float *k, int d)
{
    float s = 0.0f;
    for (int i = 0; i < d; i++) s += q[i] * k[i];
    return s;
}

static float dot_hh_s(const uint16_t *q, const uint16_t *k, int d)
{
    float s = 0.0f;
    for (int i = 0; i < d; i++) s += h2f(q[i]) * h2f(k[i]);
    return s;
}

static void axpy_f16_s(float *o, const uint16_t *v, float a, int d)
{
    for (int i = 0; i < d; i++) o[i] += a * h2f(v[i]);
}

static void axpy_f32_s(float *o, const float *v, float a, int d)
{
    for (int i = 0; i < d; i++) o[i] += a * v[i];
}

static void mad_h_s(uint16_t *acc, const uint16_t *v, float a, int d)
{
    for (int i = 0; i < d; i++)
        acc[i] = hx_fp32_to_fp16(fmaf(h2f(v[i]), a, h2f(acc[i])));
}

static void scale_h_s(uint16_t *acc, float s, int d)
{
    for (int i = 0; i < d; i++) acc[i] = hx_fp32_to_fp16(h2f(acc[i]) * s);
}

static void to_f16_s(uint16_t *o, const float *x, int d)
{
    for (int i = 0; i < d; i++) o[i] = hx_fp32_to_fp16(x[i]);
}

static void from_f16_s(float *o, const uint16_t *x, int d)
{
    for (int i = 0; i < d; i++) o[i] = h2f(x[i]);
}

/* tile64 (attn.h), lane by lane. */
static void tile64_s(const float *Qt, const float *K, const float *V, int nk, int d,
                     int j0, const int *lim, float scale, float *m, float *l,
                     float *accT, float *S, int nr)
{
    enum { L = HX_ATT_LANES };
    for (int r = 0; r < nr; r++) {
        float mt = -INFINITY;
        for (int j = 0; j < nk; j++) {
            float s = 0.0f;
            for (int i = 0; i < d; i++) s = fmaf(Qt[(size_t)i * L + r], K[(size_t)j * d + i], s);
            S[(size_t)j * L + r] = s = scale * s;
            if (j0 + j < lim[r] && s > mt) mt = s;
        }
        if (mt > m[r]) {
            const float ms = expf(m[r] - mt);
            for (int i = 0; i < d; i++) accT[(size_t)i * L + r] *= ms;
            l[r] *= ms;
            m[r] = mt;
        }
        float sum = 0.0f;
        for (int j = 0; j < nk; j++) {
            float *p = &S[(size_t)j * L + r];
            *p = j0 + j < lim[r] ? expf(*p - m[r]) : 0.0f;
            sum += *p;
        }
        l[r] += sum;
        for (int i = 0; i < d; i++)
            for (int j = 0; j < nk; j++)
                accT[(size_t)i * L + r] = fmaf(S[(size_t)j * L + r], V[(size_t)j * d + i],
                                               accT[(size_t)i * L + r]);
    }
}

static const hx_attn_ops k_scalar = {dot_f16_s, dot_f32_s, dot_hh_s, axpy_f16_s,
                                     axpy_f32_s, mad_h_s, scale_h_s, to_f16_s,
                                     from_f16_s, tile64_s};

/* ---- AVX2 + FMA + F16C: 8 lanes, the tail through the scalar code ---- */
#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline __m256 ld_h(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

AVX2 static inline void st_h(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

AVX2 static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2 static float dot_f16_v(const float *q, const uint16_t *k, int d)
{
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= d; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), ld_h(k + i), acc);
    return hsum(acc) + dot_f16_s(q + i, k + i, d - i);
}

AVX2 static float dot_f32_v(const float *q, const float *k, int d)
{
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= d; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), acc);
    return hsum(acc) + dot_f32_s(q + i, k + i, d - i);
}

AVX2 static float dot_hh_v(const uint16_t *q, const uint16_t *k, int d)
{
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= d; i += 8) acc = _mm256_fmadd_ps(ld_h(q + i), ld_h(k + i), acc);
    return hsum(acc) + dot_hh_s(q + i, k + i, d - i);
}

AVX2 static void axpy_f16_v(float *o, const uint16_t *v, float a, int d)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= d; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(va, ld_h(v + i), _mm256_loadu_ps(o + i)));
    axpy_f16_s(o + i, v + i, a, d - i);
}

AVX2 static void axpy_f32_v(float *o, const float *v, float a, int d)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= d; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(v + i),
                                                _mm256_loadu_ps(o + i)));
    axpy_f32_s(o + i, v + i, a, d - i);
}

AVX2 static void mad_h_v(uint16_t *acc, const uint16_t *v, float a, int d)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= d; i += 8)
        st_h(acc + i, _mm256_fmadd_ps(ld_h(v + i), va, ld_h(acc + i)));
    mad_h_s(acc + i, v + i, a, d - i);
}

AVX2 static void scale_h_v(uint16_t *acc, float s, int d)
{
    const __m256 vs = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= d; i += 8) st_h(acc + i, _mm256_mul_ps(ld_h(acc + i), vs));
    scale_h_s(acc + i, s, d - i);
}

AVX2 static void to_f16_v(uint16_t *o, const float *x, int d)
{
    int i = 0;
    for (; i + 8 <= d; i += 8) st_h(o + i, _mm256_loadu_ps(x + i));
    to_f16_s(o + i, x + i, d - i);
}

AVX2 static void from_f16_v(float *o, const uint16_t *x, int d)
{
    int i = 0;
    for (; i + 8 <= d; i += 8) _mm256_storeu_ps(o + i, ld_h(x + i));
    from_f16_s(o + i, x + i, d - i);
}

/* ---- AVX-512: the one-query path's per-key ops 16 lanes wide (the
 * element-wise ones give the same bits as 8 lanes; the dot sums in two
 * 16-lane chains) ---- */
#define AVX512A __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512A static inline __m512 ld_z(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

AVX512A static inline void st_z(uint16_t *p, __m512 v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

AVX512A static float dot_hh_z(const uint16_t *q, const uint16_t *k, int d)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= d; i += 32) {
        a0 = _mm512_fmadd_ps(ld_z(q + i), ld_z(k + i), a0);
        a1 = _mm512_fmadd_ps(ld_z(q + i + 16), ld_z(k + i + 16), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + dot_hh_s(q + i, k + i, d - i);
}

/* The AVX2 axpy's bits (an FMA for each element of its vectors of 8, the
 * rest as the scalar code), 16 at a time. */
AVX512A static void axpy_f32_z(float *o, const float *v, float a, int d)
{
    const __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= d; i += 16)
        _mm512_storeu_ps(o + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(v + i), _mm512_loadu_ps(o + i)));
    if (i < d) axpy_f32_v(o + i, v + i, a, d - i);
}

AVX512A static void mad_h_z(uint16_t *acc, const uint16_t *v, float a, int d)
{
    const __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= d; i += 16) st_z(acc + i, _mm512_fmadd_ps(ld_z(v + i), va, ld_z(acc + i)));
    mad_h_v(acc + i, v + i, a, d - i);
}

AVX512A static void scale_h_z(uint16_t *acc, float s, int d)
{
    const __m512 vs = _mm512_set1_ps(s);
    int i = 0;
    for (; i + 16 <= d; i += 16) st_z(acc + i, _mm512_mul_ps(ld_z(acc + i), vs));
    scale_h_v(acc + i, s, d - i);
}

static const hx_attn_ops k_avx2 = {dot_f16_v, dot_f32_v, dot_hh_v, axpy_f16_v,
                                   axpy_f32_v, mad_h_v, scale_h_v, to_f16_v,
                                   from_f16_v, tile64_s};
/* AVX2 set with AVX-512 half updates, F32 axpy and tile */
static const hx_attn_ops k_avx512 = {dot_f16_v, dot_f32_v, dot_hh_z, axpy_f16_v,
                                     axpy_f32_z, mad_h_z, scale_h_z, to_f16_v,
                                     from_f16_v, hx_attn_tile64_avx512};
#endif /* x86-64 */

/* ---- aarch64 NEON (ARMv8.0: FMA and the f16 conversions are base
 * ASIMD; conversions round to nearest even, as the scalar code): 8 per
 * step in two accumulators, the tail through the scalar code. Only the
 * dots sum in another order; the element-wise ops give the scalar bits
 * (axpy multiplies then adds, as the scalar C without contraction). ---- */
#if defined(__aarch64__)
#include <arm_neon.h>

static inline float32x4_t ld_h4(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline void st_h4(uint16_t *p, float32x4_t v)
{
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v)));
}

static float dot_f16_n(const float *q, const uint16_t *k, int d)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    int i = 0;
    for (; i + 8 <= d; i += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), ld_h4(k + i));
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), ld_h4(k + i + 4));
    }
    return vaddvq_f32(vaddq_f32(a0, a1)) + dot_f16_s(q + i, k + i, d - i);
}

static float dot_f32_n(const float *q, const float *k, int d)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    int i = 0;
    for (; i + 8 <= d; i += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(q + i), vld1q_f32(k + i));
        a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), vld1q_f32(k + i + 4));
    }
    return vaddvq_f32(vaddq_f32(a0, a1)) + dot_f32_s(q + i, k + i, d - i);
}

static float dot_hh_n(const uint16_t *q, const uint16_t *k, int d)
{
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    int i = 0;
    for (; i + 8 <= d; i += 8) {
        a0 = vfmaq_f32(a0, ld_h4(q + i), ld_h4(k + i));
        a1 = vfmaq_f32(a1, ld_h4(q + i + 4), ld_h4(k + i + 4));
    }
    return vaddvq_f32(vaddq_f32(a0, a1)) + dot_hh_s(q + i, k + i, d - i);
}

static void axpy_f16_n(float *o, const uint16_t *v, float a, int d)
{
    int i = 0;
    for (; i + 4 <= d; i += 4)
        vst1q_f32(o + i, vaddq_f32(vld1q_f32(o + i), vmulq_n_f32(ld_h4(v + i), a)));
    axpy_f16_s(o + i, v + i, a, d - i);
}

static void axpy_f32_n(float *o, const float *v, float a, int d)
{
    int i = 0;
    for (; i + 4 <= d; i += 4)
        vst1q_f32(o + i, vaddq_f32(vld1q_f32(o + i), vmulq_n_f32(vld1q_f32(v + i), a)));
    axpy_f32_s(o + i, v + i, a, d - i);
}

static void mad_h_n(uint16_t *acc, const uint16_t *v, float a, int d)
{
    const float32x4_t va = vdupq_n_f32(a);
    int i = 0;
    for (; i + 4 <= d; i += 4) st_h4(acc + i, vfmaq_f32(ld_h4(acc + i), ld_h4(v + i), va));
    mad_h_s(acc + i, v + i, a, d - i);
}

static void scale_h_n(uint16_t *acc, float s, int d)
{
    int i = 0;
    for (; i + 4 <= d; i += 4) st_h4(acc + i, vmulq_n_f32(ld_h4(acc + i), s));
    scale_h_s(acc + i, s, d - i);
}

static void to_f16_n(uint16_t *o, const float *x, int d)
{
    int i = 0;
    for (; i + 4 <= d; i += 4) st_h4(o + i, vld1q_f32(x + i));
    to_f16_s(o + i, x + i, d - i);
}

static void from_f16_n(float *o, const uint16_t *x, int d)
{
    int i = 0;
    for (; i + 4 <= d; i += 4) vst1q_f32(o + i, ld_h4(x + i));
    from_f16_s(o + i, x + i, d - i);
}

static const hx_attn_ops k_neon = {dot_f16_n, dot_f32_n, dot_hh_n, axpy_f16_n,
                                   axpy_f32_n, mad_h_n, scale_h_n, to_f16_n,
                                   from_f16_n, tile64_s};
#endif /* aarch64 */

const hx_attn_ops *hx_attn_ops_scalar(void)
{
    pthread_once(&f16_once, f16_init);
    return &k_scalar;
}

const hx_attn_ops *hx_attn_ops_get(void)
{
    pthread_once(&f16_once, f16_init);
#if defined(__x86_64__)
    /* hx_isa_current() is clamped to what the CPU has: AVX2 implies FMA
     * and F16C, AVX512 implies F, BW and VL (engine/kernels.c). */
    if (hx_isa_current() >= HX_ISA_AVX512) return &k_avx512;
    return hx_isa_current() >= HX_ISA_AVX2 ? &k_avx2 : &k_scalar;
#elif defined(__aarch64__)
    return hx_isa_current() >= HX_ISA_NEON ? &k_neon : &k_scalar;
#else
    return &k_scalar;
#endif
}
