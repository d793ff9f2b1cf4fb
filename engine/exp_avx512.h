/* exp_avx512.h: e^x in the 16 lanes of an AVX-512 register, the one
 * polynomial the engine's attention and the trainer's softmax and SiLU
 * share. Part of engine_ext.h. */
#ifndef HX_EXP_AVX512_H
#define HX_EXP_AVX512_H

#if defined(__x86_64__)
#include <immintrin.h>

/* e^x, about 1 ulp: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so
 * that n ln2 is exact), a degree-7 Taylor polynomial in r, scaled by 2^n.
 * x is clamped to [-104, 88]: -inf gives 0 (e^-104 is below the smallest
 * denormal), and nothing overflows to inf. */
__attribute__((target("avx512f"))) static inline __m512 hx_exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

#endif /* HX_EXP_AVX512_H */
