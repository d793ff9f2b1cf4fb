/* kernels_impl.h: what kernels.c shares with the per-ISA kernel files
 * (kernels_avx2.c, kernels_avx512.c): activation block, dispatch table. */
#ifndef HX_KERNELS_IMPL_H
#define HX_KERNELS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kernels.h"

/* Hearth's in-memory Q8_0 activation block: the numbers of ggml's
 * block_q8_0 (d is exactly the fp16-rounded scale, widened), plus the sum
 * of the quants so that Q4_0's "-8" offset and the unsigned-weights trick
 * (vpdpbusd on q+128) cost one multiply per block. */
typedef struct hx_block_q8a {
    float d;      /* fp16(amax / 127) as fp32 */
    int32_t s;    /* sum of qs */
    int8_t qs[HX_QK];
} hx_block_q8a;

/* *out = dot of one weight row and one activation row of n elements. */
typedef void (*hx_dot_fn)(int64_t n, float *out, const void *w,
                          const void *a);
/* out[r*ldo + t] = dot(w + r*ws, a[t]) for r < nr, t < nt: several rows
 * against several tokens, so SIMD versions can reuse loads. */
typedef void (*hx_gemm_fn)(int64_t n, const void *w, size_t ws, int nr,
                           const void *const *a, int nt, float *out,
                           size_t ldo);
/* One row of n floats to the activation type. */
typedef void (*hx_quant_fn)(const float *x, void *a, int64_t n);

typedef struct hx_kernels {
    hx_dot_fn dot[HX_TYPE_COUNT];   /* per weight type */
    hx_gemm_fn gemm[HX_TYPE_COUNT]; /* NULL: loops over dot */
    hx_quant_fn quant[HX_TYPE_COUNT]; /* per activation type */
} hx_kernels;

/* Each fills the entries it implements and leaves the others alone, so
 * the table is built scalar, then AVX2 over it, then AVX-512 over that. */
void hx_kernels_fill_scalar(hx_kernels *k);
void hx_kernels_fill_avx2(hx_kernels *k);
void hx_kernels_fill_avx512(hx_kernels *k, int has_bf16);

/* The table for an ISA (built once, clamped to the CPU's). */
const hx_kernels *hx_kernels_for(int isa);

#endif /* HX_KERNELS_IMPL_H */
