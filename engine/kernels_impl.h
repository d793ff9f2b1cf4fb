/* kernels_impl.h: what kernels.c shares with the per-ISA kernel files
 * (kernels_avx2.c, kernels_avx512.c, kernels_neon.c, kernels_dotprod.c):
 * activation block, dispatch table. */
#ifndef HX_KERNELS_IMPL_H
#define HX_KERNELS_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
/* y[t*ldy + r] = dot(w + r*ws, a[t]) for r < nr, t < nt: many tokens
 * against rows unpacked once (kernels_panel.c); each output must equal the
 * ISA's dot bit for bit. Returns 0 (nothing written) when it cannot run. */
typedef int (*hx_tile_fn)(int64_t n, const void *w, size_t ws, int nr,
                          const void *const *a, int nt, float *y, size_t ldy);

/* The AVX-512 arithmetic per (row, token) that its dots and the panel
 * kernels share, so that a batch gives exactly one token's numbers. Block
 * and sub-block integer sums are exact; then, with dy the activation
 * scale and fp32 products and fmaf:
 *   HX_CANON_Q8A (Q4_0, Q8_0): isum_b = sum(q*y) (Q4_0: q - 8 through
 *     -8*sum(y)); even blocks acc0 = fmaf(isum_b, d_b*dy_b, acc0), odd
 *     blocks the same into acc1; result acc0 + acc1.
 *   Q4_K: per super-block isum = sum_j sc_j*sum(q*y), msum = sum_j m_j *
 *     (bsums[2j] + bsums[2j+1]); acc = fmaf(isum, d*dy, acc); acc =
 *     fmaf(msum, (-dmin)*dy, acc).
 *   Q6_K: isum = sum_j sc_j*(sum(q*y) - 32*bsums[j]); acc = fmaf(isum,
 *     d*dy, acc). */

typedef struct hx_kernels {
    hx_dot_fn dot[HX_TYPE_COUNT];   /* per weight type */
    hx_gemm_fn gemm[HX_TYPE_COUNT]; /* NULL: loops over dot */
    hx_quant_fn quant[HX_TYPE_COUNT]; /* per activation type */
    hx_tile_fn tile[HX_TYPE_COUNT]; /* NULL: gemm (for many tokens) */
    int tile_min[HX_TYPE_COUNT];    /* tokens from which tile runs; 0: default */
} hx_kernels;

/* Each fills the entries it implements and leaves the others alone, so
 * the table is built scalar, then AVX2 over it, then AVX-512 over that. */
void hx_kernels_fill_scalar(hx_kernels *k);
void hx_kernels_fill_avx2(hx_kernels *k);
void hx_kernels_fill_avx512(hx_kernels *k, int has_bf16);
void hx_kernels_fill_avx512_panel(hx_kernels *k); /* kernels_panel.c */
/* aarch64 (stubs elsewhere): level 1 NEON, level 2 adds SDOT. */
void hx_kernels_fill_neon(hx_kernels *k);    /* kernels_neon.c */
void hx_kernels_fill_dotprod(hx_kernels *k); /* kernels_dotprod.c */

/* Q4_K/Q5_K's 12 packed bytes as 8 6-bit scales (byte j of *sc) and 8
 * mins (byte j of *m), kept in registers: byte arrays read back as vectors
 * would defeat store forwarding. */
static inline void hx_k_unpack(const uint8_t *q, uint64_t *sc, uint64_t *m)
{
    uint32_t u0, u1, u2;
    memcpy(&u0, q, 4);
    memcpy(&u1, q + 4, 4);
    memcpy(&u2, q + 8, 4);
    uint32_t s_lo = u0 & 0x3f3f3f3fu;
    uint32_t s_hi = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
    uint32_t m_lo = u1 & 0x3f3f3f3fu;
    uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
    *sc = (uint64_t)s_hi << 32 | s_lo;
    *m = (uint64_t)m_hi << 32 | m_lo;
}

/* byte j of a packed scale word */
#define HX_K_BYTE(v, j) ((int)(((v) >> (8 * (j))) & 0xff))

/* A Q8_K activation block's iscale once a SIMD quantizer has its amax
 * (NaNs left out, amax > 0): -127 over the first value of that magnitude,
 * with its sign, as the scalar quantize_q8_K (quant.c) picks it. */
static inline float hx_q8K_iscale(const float *x, float amax)
{
    for (int k = 0; k < HX_QK_K; k++)
        if (fabsf(x[k]) == amax) return -127.0f / x[k];
    return 0.0f; /* not reached for an amax taken from x */
}

/* The table for an ISA (built once, clamped to the CPU's). */
const hx_kernels *hx_kernels_for(int isa);

#endif /* HX_KERNELS_IMPL_H */
