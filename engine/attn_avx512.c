/* attn_avx512.c: one key tile of the lane-layout tiled attention (attn.h,
 * tile64) in AVX-512: up to 64 query rows in the lanes of 4 zmm registers,
 * only the registers that hold rows computed. */
#include "engine/attn.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "engine/exp_avx512.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define L HX_ATT_LANES /* 64 rows: 4 vectors of 16 */

/* Each function below works on the first nv of the 4 row vectors (the
 * lanes of rows r < 16 nv; the others are left as they are); inlined with
 * nv a constant, so that the accumulators stay in registers. */
#define INLINE AVX512 static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 4")

/* S[j*L + r] = sum over i of Qt[i*L + r] * K[j*d + i], i in order, for j
 * < nk: four keys at a time against the row vectors. */
INLINE void scores(const float *Qt, const float *K, int nk, int d, float *S, const int nv)
{
    int j = 0;
    for (; j + 4 <= nk; j += 4) {
        __m512 a[4][4];
        UNROLL for (int u = 0; u < 4; u++)
            UNROLL for (int g = 0; g < nv; g++) a[u][g] = _mm512_setzero_ps();
        const float *k0 = K + (size_t)j * d;
        for (int i = 0; i < d; i++) {
            const float *q = Qt + (size_t)i * L;
            __m512 qv[4];
            UNROLL for (int g = 0; g < nv; g++) qv[g] = _mm512_load_ps(q + 16 * g);
            #pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                const __m512 kv = _mm512_set1_ps(k0[(size_t)u * d + i]);
                UNROLL for (int g = 0; g < nv; g++) a[u][g] = _mm512_fmadd_ps(qv[g], kv, a[u][g]);
            }
        }
        UNROLL for (int u = 0; u < 4; u++)
            UNROLL for (int g = 0; g < nv; g++) _mm512_store_ps(S + (size_t)(j + u) * L + 16 * g, a[u][g]);
    }
    for (; j < nk; j++) {
        __m512 a[4];
        UNROLL for (int g = 0; g < nv; g++) a[g] = _mm512_setzero_ps();
        for (int i = 0; i < d; i++) {
            const __m512 kv = _mm512_set1_ps(K[(size_t)j * d + i]);
            UNROLL for (int g = 0; g < nv; g++)
                a[g] = _mm512_fmadd_ps(_mm512_load_ps(Qt + (size_t)i * L + 16 * g), kv, a[g]);
        }
        UNROLL for (int g = 0; g < nv; g++) _mm512_store_ps(S + (size_t)j * L + 16 * g, a[g]);
    }
}

/* accT[i*L + r] += sum over j < nk, in order, of P[j*L + r] * V[j*d + i]:
 * four dims at a time against the row vectors. */
INLINE void pv(float *accT, const float *P, const float *V, int nk, int d, const int nv)
{
    int i = 0;
    for (; i + 4 <= d; i += 4) {
        __m512 a[4][4];
        UNROLL for (int u = 0; u < 4; u++)
            UNROLL for (int g = 0; g < nv; g++) a[u][g] = _mm512_load_ps(accT + (size_t)(i + u) * L + 16 * g);
        for (int j = 0; j < nk; j++) {
            const float *p = P + (size_t)j * L, *v = V + (size_t)j * d + i;
            __m512 pw[4];
            UNROLL for (int g = 0; g < nv; g++) pw[g] = _mm512_load_ps(p + 16 * g);
            #pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                const __m512 vv = _mm512_set1_ps(v[u]);
                UNROLL for (int g = 0; g < nv; g++) a[u][g] = _mm512_fmadd_ps(pw[g], vv, a[u][g]);
            }
        }
        UNROLL for (int u = 0; u < 4; u++)
            UNROLL for (int g = 0; g < nv; g++) _mm512_store_ps(accT + (size_t)(i + u) * L + 16 * g, a[u][g]);
    }
    for (; i < d; i++) {
        __m512 a[4];
        UNROLL for (int g = 0; g < nv; g++) a[g] = _mm512_load_ps(accT + (size_t)i * L + 16 * g);
        for (int j = 0; j < nk; j++) {
            const __m512 vv = _mm512_set1_ps(V[(size_t)j * d + i]);
            UNROLL for (int g = 0; g < nv; g++)
                a[g] = _mm512_fmadd_ps(_mm512_load_ps(P + (size_t)j * L + 16 * g), vv, a[g]);
        }
        UNROLL for (int g = 0; g < nv; g++) _mm512_store_ps(accT + (size_t)i * L + 16 * g, a[g]);
    }
}

/* The online softmax of one tile, lane-wise (see hx_attn_tile64_ref):
 * scales S, masks keys at or past lim, turns scores into weights in place,
 * rescales accT and l where a row's maximum grows. */
INLINE void softmax(float *S, int nk, int d, int j0, const int *lim, float scale,
                    float *m, float *l, float *accT, const int nv)
{
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 ms[4];
    int grow = 0;
    for (int g = 0; g < nv; g++) {
        const __m512i lm = _mm512_loadu_si512((const void *)(lim + 16 * g));
        __m512 mt = ninf;
        for (int j = 0; j < nk; j++) {
            const __mmask16 k = _mm512_cmplt_epi32_mask(_mm512_set1_epi32(j0 + j), lm);
            float *s = S + (size_t)j * L + 16 * g;
            const __m512 v = _mm512_mul_ps(vs, _mm512_load_ps(s));
            _mm512_store_ps(s, v);
            mt = _mm512_mask_max_ps(mt, k, mt, v);
        }
        const __m512 mo = _mm512_loadu_ps(m + 16 * g);
        const __mmask16 up = _mm512_cmp_ps_mask(mt, mo, _CMP_GT_OQ);
        const __m512 mn = _mm512_mask_mov_ps(mo, up, mt);
        ms[g] = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), up, hx_exp512(_mm512_sub_ps(mo, mt)));
        grow |= up != 0;
        _mm512_storeu_ps(m + 16 * g, mn);
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < nk; j++) {
            const __mmask16 k = _mm512_cmplt_epi32_mask(_mm512_set1_epi32(j0 + j), lm);
            float *s = S + (size_t)j * L + 16 * g;
            const __m512 p = _mm512_maskz_mov_ps(k, hx_exp512(_mm512_sub_ps(_mm512_load_ps(s), mn)));
            _mm512_store_ps(s, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_storeu_ps(l + 16 * g,
                         _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(l + 16 * g), ms[g]), sum));
    }
    if (!grow) return;
    for (int i = 0; i < d; i++)
        UNROLL for (int g = 0; g < nv; g++) {
            float *a = accT + (size_t)i * L + 16 * g;
            _mm512_store_ps(a, _mm512_mul_ps(_mm512_load_ps(a), ms[g]));
        }
}

/* One tile on the first nv row vectors. */
INLINE void tile(const float *Qt, const float *K, const float *V, int nk, int d, int j0,
                 const int *lim, float scale, float *m, float *l, float *accT, float *S,
                 const int nv)
{
    scores(Qt, K, nk, d, S, nv);
    softmax(S, nk, d, j0, lim, scale, m, l, accT, nv);
    pv(accT, S, V, nk, d, nv);
}

AVX512 void hx_attn_tile64_avx512(const float *Qt, const float *K, const float *V, int nk,
                                  int d, int j0, const int *lim, float scale, float *m,
                                  float *l, float *accT, float *S, int nr)
{
    switch ((nr + 15) / 16) { /* the row vectors holding rows: no work for empty ones */
    case 1: tile(Qt, K, V, nk, d, j0, lim, scale, m, l, accT, S, 1); break;
    case 2: tile(Qt, K, V, nk, d, j0, lim, scale, m, l, accT, S, 2); break;
    case 3: tile(Qt, K, V, nk, d, j0, lim, scale, m, l, accT, S, 3); break;
    default: tile(Qt, K, V, nk, d, j0, lim, scale, m, l, accT, S, 4); break;
    }
}

#endif
