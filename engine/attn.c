/* attn.c: attention's vector primitives (attn.h): dot products and
 * updates of rows of the F16 or F32 KV cache, scalar and AVX2/F16C. */
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

static void scores4_s(const float *q, int ldq, int nr, const float *K, int nk,
                      int d, float scale, float *s, int lds)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nk; j++)
            s[r * lds + j] = scale * dot_f32_s(q + (size_t)r * ldq, K + (size_t)j * d, d);
}

static void pv4_s(float *acc, int lda, int nr, const float *p, int ldp,
                  const float *V, int nk, int d)
{
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nk; j++)
            axpy_f32_s(acc + (size_t)r * lda, V + (size_t)j * d, p[r * ldp + j], d);
}

/* tile64 (attn.h), lane by lane. */
static void tile64_s(const float *Qt, const float *K, const float *V, int nk, int d,
                     int j0, const int *lim, float scale, float *m, float *l,
                     float *accT, float *S)
{
    enum { L = HX_ATT_LANES };
    for (int r = 0; r < L; r++) {
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
                                     from_f16_s, scores4_s, pv4_s, tile64_s};

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

/* Four query rows against one key at a time: the key is loaded once for
 * all rows. */
AVX2 static void scores4_v(const float *q, int ldq, int nr, const float *K,
                           int nk, int d, float scale, float *s, int lds)
{
    if (nr != 4 || d % 8) {
        scores4_s(q, ldq, nr, K, nk, d, scale, s, lds);
        return;
    }
    const float *q0 = q, *q1 = q + ldq, *q2 = q + 2 * ldq, *q3 = q + 3 * ldq;
    for (int j = 0; j < nk; j++) {
        const float *k = K + (size_t)j * d;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < d; i += 8) {
            const __m256 kv = _mm256_loadu_ps(k + i);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + i), kv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + i), kv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + i), kv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + i), kv, a3);
        }
        s[j] = scale * hsum(a0);
        s[lds + j] = scale * hsum(a1);
        s[2 * lds + j] = scale * hsum(a2);
        s[3 * lds + j] = scale * hsum(a3);
    }
}

/* Eight columns of four accumulator rows stay in registers over all keys. */
AVX2 static void pv4_v(float *acc, int lda, int nr, const float *p, int ldp,
                       const float *V, int nk, int d)
{
    if (nr != 4 || d % 8) {
        pv4_s(acc, lda, nr, p, ldp, V, nk, d);
        return;
    }
    for (int i = 0; i < d; i += 8) {
        __m256 a0 = _mm256_loadu_ps(acc + i), a1 = _mm256_loadu_ps(acc + lda + i);
        __m256 a2 = _mm256_loadu_ps(acc + 2 * lda + i);
        __m256 a3 = _mm256_loadu_ps(acc + 3 * lda + i);
        for (int j = 0; j < nk; j++) {
            const __m256 v = _mm256_loadu_ps(V + (size_t)j * d + i);
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), v, a0);
            a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + ldp + j), v, a1);
            a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 2 * ldp + j), v, a2);
            a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 3 * ldp + j), v, a3);
        }
        _mm256_storeu_ps(acc + i, a0);
        _mm256_storeu_ps(acc + lda + i, a1);
        _mm256_storeu_ps(acc + 2 * lda + i, a2);
        _mm256_storeu_ps(acc + 3 * lda + i, a3);
    }
}

static const hx_attn_ops k_avx2 = {dot_f16_v, dot_f32_v, dot_hh_v, axpy_f16_v,
                                   axpy_f32_v, mad_h_v, scale_h_v, to_f16_v,
                                   from_f16_v, scores4_v, pv4_v, tile64_s};
/* AVX2 set with the AVX-512 tile */
static const hx_attn_ops k_avx512 = {dot_f16_v, dot_f32_v, dot_hh_v, axpy_f16_v,
                                     axpy_f32_v, mad_h_v, scale_h_v, to_f16_v,
                                     from_f16_v, scores4_v, pv4_v, hx_attn_tile64_avx512};
#endif /* x86-64 */

const hx_attn_ops *hx_attn_ops_scalar(void)
{
    pthread_once(&f16_once, f16_init);
    return &k_scalar;
}

const hx_attn_ops *hx_attn_ops_get(void)
{
    pthread_once(&f16_once, f16_init);
#if defined(__x86_64__)
    int ok = hx_isa_current() >= HX_ISA_AVX2 && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (ok && hx_isa_current() >= HX_ISA_AVX512 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return &k_avx512;
    return ok ? &k_avx2 : &k_scalar;
#else
    return &k_scalar;
#endif
}
