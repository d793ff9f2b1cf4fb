/* attn.h: the vector primitives of attention over the KV cache
 * (engine-internal): scalar reference and AVX2/F16C versions. */
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
    /* Tiles, for nr <= 4 query rows (row r at q + r*ldq) against nk keys
     * K (nk, d): s[r*lds + j] = scale * q_r . K_j. */
    void (*scores4)(const float *q, int ldq, int nr, const float *K, int nk,
                    int d, float scale, float *s, int lds);
    /* acc[r*lda + i] += sum over j < nk of p[r*ldp + j] * V[j*d + i]. */
    void (*pv4)(float *acc, int lda, int nr, const float *p, int ldp,
                const float *V, int nk, int d);
} hx_attn_ops;

/* The best set for the CPU and the engine's ISA cap (hx_isa_current). */
const hx_attn_ops *hx_attn_ops_get(void);
/* The scalar reference set. */
const hx_attn_ops *hx_attn_ops_scalar(void);

#endif /* HX_ATTN_H */
