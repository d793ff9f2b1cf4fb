/* attn.h: the vector primitives of attention over the KV cache
 * (engine-internal): scalar reference, AVX2/F16C and NEON versions. */
#ifndef HX_ATTN_H
#define HX_ATTN_H

#include <stdint.h>

/* One set of primitives; d is the head size (any d >= 1). f16 rows are
 * IEEE half; rounding to f16 is to nearest even, as F16C does. */
typedef struct hx_attn_ops {
    float (*dot_f16)(const float *q, const uint16_t *k, int d); /* q.k */
    float (*dot_f32)(const float *q, const float *k, int d);
    float (*dot_hh)(const uint16_t *q, const uint16_t *k, int d);
    void (*axpy_f16)(float *o, const uint16_t *v, float a, int d); /* o += a v */
    void (*axpy_f32)(float *o, const float *v, float a, int d);
    /* acc = f16(fma(v, a, acc)) and acc = f16(acc * s): llama.cpp's fp16
     * accumulator of V in its one-query flash attention */
    void (*mad_h)(uint16_t *acc, const uint16_t *v, float a, int d);
    void (*scale_h)(uint16_t *acc, float s, int d);
    void (*to_f16)(uint16_t *o, const float *x, int d);
    void (*from_f16)(float *o, const uint16_t *x, int d);
    /* One key tile of the tiled (flash) attention with HX_ATT_LANES query
     * rows in lanes, each lane on its own as if alone (so a row's numbers
     * never depend on which rows share its tile). Qt (d, LANES): Qt[i*LANES
     * + r] = q_r[i]; keys K and values V (nk <= LANES rows of d floats) are
     * positions j0..j0+nk-1, row r sees those < lim[r]. Per row: scores
     * s = scale * q.k (i in order), then the online softmax: when the
     * tile's maximum over seen keys exceeds m[r], accT and l[r] are scaled
     * by exp(m - max) and m[r] = max; p = exp(s - m[r]) (0 for unseen
     * keys), l[r] += sum of p (j in order), accT[i*LANES + r] += sum of
     * p_j V[j][i] (j in order). S (LANES * LANES floats) is scratch; Qt,
     * accT and S are 64-byte aligned. Only rows r < nr (1..LANES) are
     * asked for: the others' m, l and accT may be left as they were or
     * computed alike (a short tail of rows costs less). */
    void (*tile64)(const float *Qt, const float *K, const float *V, int nk, int d,
                   int j0, const int *lim, float scale, float *m, float *l,
                   float *accT, float *S, int nr);
} hx_attn_ops;

#define HX_ATT_LANES 64

/* The AVX-512 tile64 (attn_avx512.c; x86-64 only). */
void hx_attn_tile64_avx512(const float *Qt, const float *K, const float *V, int nk,
                           int d, int j0, const int *lim, float scale, float *m,
                           float *l, float *accT, float *S, int nr);

/* The best set for the CPU and the engine's ISA cap (hx_isa_current). */
const hx_attn_ops *hx_attn_ops_get(void);
/* The scalar reference set. */
const hx_attn_ops *hx_attn_ops_scalar(void);

#endif /* HX_ATTN_H */
