/* tile512.h: the accumulator tile shared by the AVX-512 GEMM kernels of
 * training (gemm.c's F32 and gemm_bf16.c's bfloat16): 12 rows of 32 F32
 * sums in 24 vectors, carried between blocks of k through memory or
 * stored as alpha times the sums (plus C). lora-internal; x86-64 only. */
#ifndef HX_LORA_TILE512_H
#define HX_LORA_TILE512_H

#include <immintrin.h>

/* Lanes [0, n) of 16. */
static inline __mmask16 tile512_lanes(int n)
{
    return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Zero (first), or the sums carried from the previous block at t. */
__attribute__((target("avx512f"))) static inline void
tile512_init(__m512 s[12][2], const float *t, int first)
{
    for (int i = 0; i < 12; i++) {
        s[i][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(t + 32 * i);
        s[i][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(t + 32 * i + 16);
    }
}

/* Not last: the sums to t for the next block. Last: the mr x nr corner
 * of alpha s (+ C when acc) to c, rows ldc apart. */
__attribute__((target("avx512f"))) static inline void
tile512_store(__m512 s[12][2], float *t, int last, float *c, int ldc, int mr, int nr,
              float alpha, int acc)
{
    if (!last) {
        for (int i = 0; i < 12; i++) {
            _mm512_storeu_ps(t + 32 * i, s[i][0]);
            _mm512_storeu_ps(t + 32 * i + 16, s[i][1]);
        }
        return;
    }
    const __m512 al = _mm512_set1_ps(alpha);
    const __mmask16 m0 = tile512_lanes(nr), m1 = tile512_lanes(nr - 16);
    for (int i = 0; i < mr; i++) {
        float *y = c + (size_t)i * ldc;
        __m512 o0 = _mm512_mul_ps(s[i][0], al), o1 = _mm512_mul_ps(s[i][1], al);
        if (acc) {
            o0 = _mm512_add_ps(o0, _mm512_maskz_loadu_ps(m0, y));
            o1 = _mm512_add_ps(o1, _mm512_maskz_loadu_ps(m1, y + 16));
        }
        _mm512_mask_storeu_ps(y, m0, o0);
        _mm512_mask_storeu_ps(y + 16, m1, o1);
    }
}

#endif
