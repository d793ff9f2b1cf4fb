/* kernels_arm.h: the quantized dots and the two-rows-by-two-tokens GEMM
 * (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) shared by kernels_neon.c (NEON widening
 * multiplies) and kernels_dotprod.c (SDOT), aarch64 only. */
#ifndef HX_KERNELS_ARM_H
#define HX_KERNELS_ARM_H

#if defined(__aarch64__)
#include <arm_neon.h>

#include "engine/kernels_impl.h"

/* sum_j m_j * (bsums[2j] + bsums[2j+1]): the min term of Q4_K / Q5_K. */
static inline int hx_neon_k_min_term(uint64_t m, const int16_t *bsums)
{
    int32x4_t pairs_lo = vpaddlq_s16(vld1q_s16(bsums));
    int32x4_t pairs_hi = vpaddlq_s16(vld1q_s16(bsums + 8));
    int16x8_t mv = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(m)));
    int32x4_t s = vmulq_s32(pairs_lo, vmovl_s16(vget_low_s16(mv)));
    s = vmlaq_s32(s, pairs_hi, vmovl_s16(vget_high_s16(mv)));
    return vaddvq_s32(s);
}

/* 32 * sum_j sc_j * bsums[j]: Q6_K's -32 offset. */
static inline int hx_neon_q6_offset(const int8_t *scales, const int16_t *bsums)
{
    int16x8_t s0 = vmovl_s8(vld1_s8(scales)), s1 = vmovl_s8(vld1_s8(scales + 8));
    int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
    int32x4_t p = vmull_s16(vget_low_s16(s0), vget_low_s16(b0));
    p = vmlal_high_s16(p, s0, b0);
    p = vmlal_s16(p, vget_low_s16(s1), vget_low_s16(b1));
    p = vmlal_high_s16(p, s1, b1);
    return 32 * vaddvq_s32(p);
}

/* Sub-blocks 2jp and 2jp+1 of a Q4_K / Q5_K super-block as bytes 0..31:
 * q[0], q[1] the 32 values of sub-block 2jp, q[2], q[3] of 2jp+1. qh (the
 * fifth bits, bit j of byte l for sub-block j) is NULL for Q4_K. */
static inline void hx_neon_kq45_bytes(const uint8_t *qs, const uint8_t *qh, int jp,
                                      int8x16_t q[4])
{
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    uint8x16_t r0 = vld1q_u8(qs + 32 * jp), r1 = vld1q_u8(qs + 32 * jp + 16);
    uint8x16_t b[4] = {vandq_u8(r0, m4), vandq_u8(r1, m4), vshrq_n_u8(r0, 4),
                       vshrq_n_u8(r1, 4)};
    if (qh) {
        const uint8x16_t b4 = vdupq_n_u8(0x10);
        uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
        uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * jp)));
        uint8x16_t bh = vdupq_n_u8((uint8_t)(1u << (2 * jp + 1)));
        b[0] = vorrq_u8(b[0], vandq_u8(vtstq_u8(h0, bl), b4));
        b[1] = vorrq_u8(b[1], vandq_u8(vtstq_u8(h1, bl), b4));
        b[2] = vorrq_u8(b[2], vandq_u8(vtstq_u8(h0, bh), b4));
        b[3] = vorrq_u8(b[3], vandq_u8(vtstq_u8(h1, bh), b4));
    }
    for (int k = 0; k < 4; k++) q[k] = vreinterpretq_s8_u8(b[k]);
}

/* Elements [16*half, 16*half + 16) of the four 32-value quarters of one
 * Q6_K half (ql 64 bytes, qh 32) as bytes 0..63: q[k] goes with
 * activations 32k + 16*half and scale 2k + half of that half. */
static inline void hx_neon_q6_bytes(const uint8_t *ql, const uint8_t *qh, int half,
                                    int8x16_t q[4])
{
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(0x03);
    uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
    uint8x16_t hb = vld1q_u8(qh + 16 * half);
    q[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)));
    q[1] = vreinterpretq_s8_u8(
        vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)));
    q[2] = vreinterpretq_s8_u8(
        vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)));
    q[3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)));
}

/* ---- whole dots, generic in the 16-byte product instruction ----
 * dot16(acc, a, b) adds the 16 products a[i]*b[i] into acc's lanes (any
 * lane each; every use sums the lanes or scales them alike). Integer sums
 * are exact, so each dot has the scalar reference's block sums; only the
 * float summation order differs from it. The callers pass a static inline
 * function, inlined here: one body serves NEON and SDOT. */
typedef int32x4_t (*hx_neon_dot16_fn)(int32x4_t acc, int8x16_t a, int8x16_t b);
#define HX_NEON_INLINE static inline __attribute__((always_inline))

HX_NEON_INLINE int32x4_t hx_neon_dot32(hx_neon_dot16_fn dot16, int8x16_t a0,
                                       int8x16_t a1, const int8_t *y)
{
    return dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(y)), a1, vld1q_s8(y + 16));
}

HX_NEON_INLINE void hx_neon_dot_q8_0(int64_t n, float *out, const void *w,
                                     const void *a, hx_neon_dot16_fn dot16)
{
    const hx_block_q8_0 *x = w;
    const hx_block_q8a *y = a;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
    int64_t nb = n / HX_QK, i = 0;
    for (; i + 2 <= nb; i += 2) { /* two independent chains */
        int32x4_t p0 = hx_neon_dot32(dot16, vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16), y[i].qs);
        int32x4_t p1 = hx_neon_dot32(dot16, vld1q_s8(x[i + 1].qs), vld1q_s8(x[i + 1].qs + 16),
                                     y[i + 1].qs);
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), hx_fp16_to_fp32(x[i].d) * y[i].d);
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(p1), hx_fp16_to_fp32(x[i + 1].d) * y[i + 1].d);
    }
    for (; i < nb; i++) {
        int32x4_t p = hx_neon_dot32(dot16, vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16), y[i].qs);
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p), hx_fp16_to_fp32(x[i].d) * y[i].d);
    }
    *out = vaddvq_f32(vaddq_f32(acc0, acc1));
}

HX_NEON_INLINE void hx_neon_dot_q4_0(int64_t n, float *out, const void *w,
                                     const void *a, hx_neon_dot16_fn dot16)
{
    const hx_block_q4_0 *x = w;
    const hx_block_q8a *y = a;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / HX_QK; i++) {
        uint8x16_t raw = vld1q_u8(x[i].qs); /* nibbles 0..15 as they are */
        int32x4_t p = hx_neon_dot32(dot16, vreinterpretq_s8_u8(vandq_u8(raw, m4)),
                                    vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), y[i].qs);
        /* the -8 offset through the activations' sum, in lane 0 */
        p = vsetq_lane_s32(vgetq_lane_s32(p, 0) - 8 * y[i].s, p, 0);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), hx_fp16_to_fp32(x[i].d) * y[i].d);
    }
    *out = vaddvq_f32(acc);
}

/* sum_j sc_j * sum(q*y) of one Q4_K / Q5_K super-block (qh NULL: Q4_K). */
HX_NEON_INLINE int hx_neon_kq45_isum(const uint8_t *qs, const uint8_t *qh, uint64_t sc,
                                     const int8_t *y, hx_neon_dot16_fn dot16)
{
    int32x4_t isum = vdupq_n_s32(0);
    for (int jp = 0; jp < 4; jp++) {
        int8x16_t q[4];
        hx_neon_kq45_bytes(qs, qh, jp, q);
        int32x4_t p0 = hx_neon_dot32(dot16, q[0], q[1], y + 64 * jp);
        int32x4_t p1 = hx_neon_dot32(dot16, q[2], q[3], y + 64 * jp + 32);
        isum = vmlaq_n_s32(isum, p0, HX_K_BYTE(sc, 2 * jp));
        isum = vmlaq_n_s32(isum, p1, HX_K_BYTE(sc, 2 * jp + 1));
    }
    return vaddvq_s32(isum);
}

/* One Q4_K / Q5_K super-block's float step from its exact integer sums
 * (dw, dminw the block's scales, dy the activations'); the dot and the
 * GEMM both take it, so a batch gives exactly one token's numbers. */
HX_NEON_INLINE float hx_neon_kq45_term(float dw, float dminw, float dy, int isum, int msum)
{
    const float d = dw * dy, dmin = dminw * dy;
    return d * (float)isum - dmin * (float)msum;
}

/* Q6_K's: the block sum minus the -32 offset, times the scales. */
HX_NEON_INLINE float hx_neon_q6_term(float dw, float dy, int isum, int offset)
{
    return dw * dy * (float)(isum - offset);
}

/* Q4_K (q5 = 0) or Q5_K (q5 = 1) row against Q8_K activations. */
HX_NEON_INLINE void hx_neon_dot_kq45(int64_t n, float *out, const void *w, const void *a,
                                     int q5, hx_neon_dot16_fn dot16)
{
    const hx_block_q8_K *y = a;
    const size_t bs = q5 ? sizeof(hx_block_q5_K) : sizeof(hx_block_q4_K);
    float s = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        const char *blk = (const char *)w + (size_t)i * bs;
        const hx_block_q4_K *b4 = (const hx_block_q4_K *)blk;
        const hx_block_q5_K *b5 = (const hx_block_q5_K *)blk;
        uint64_t sc, mn;
        hx_k_unpack(q5 ? b5->scales : b4->scales, &sc, &mn);
        int isum = q5 ? hx_neon_kq45_isum(b5->qs, b5->qh, sc, y[i].qs, dot16)
                      : hx_neon_kq45_isum(b4->qs, NULL, sc, y[i].qs, dot16);
        s += hx_neon_kq45_term(hx_fp16_to_fp32(q5 ? b5->d : b4->d),
                               hx_fp16_to_fp32(q5 ? b5->dmin : b4->dmin), y[i].d, isum,
                               hx_neon_k_min_term(mn, y[i].bsums));
    }
    *out = s;
}

HX_NEON_INLINE void hx_neon_dot_q6_K(int64_t n, float *out, const void *w,
                                     const void *a, hx_neon_dot16_fn dot16)
{
    const hx_block_q6_K *x = w;
    const hx_block_q8_K *y = a;
    float s = 0;
    for (int64_t i = 0; i < n / HX_QK_K; i++) {
        int32x4_t isum = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const int8_t *yy = y[i].qs + 128 * h, *sc = x[i].scales + 8 * h;
            for (int half = 0; half < 2; half++) { /* 16 values per scale */
                int8x16_t q[4];
                hx_neon_q6_bytes(x[i].ql + 64 * h, x[i].qh + 32 * h, half, q);
                for (int k = 0; k < 4; k++) {
                    int32x4_t p = dot16(vdupq_n_s32(0), q[k], vld1q_s8(yy + 32 * k + 16 * half));
                    isum = vmlaq_n_s32(isum, p, sc[2 * k + half]);
                }
            }
        }
        s += hx_neon_q6_term(hx_fp16_to_fp32(x[i].d), y[i].d, vaddvq_s32(isum),
                             hx_neon_q6_offset(x[i].scales, y[i].bsums));
    }
    *out = s;
}

/* ---- two rows by two tokens (prefill) ----
 * Each weight block is loaded once for both tokens and each activation
 * block once for both rows. Every (row, token) keeps the accumulators and
 * operation order of its dot above, so a batch gives exactly one token's
 * numbers. Q8_0 (q4 = 0) and Q4_0 (q4 = 1). */

/* Block i of row x as the two 16-byte halves the dot multiplies. */
HX_NEON_INLINE void hx_neon_q80_q40_bytes(const char *x, int64_t i, int q4, int8x16_t w[2])
{
    if (q4) {
        const hx_block_q4_0 *b = (const hx_block_q4_0 *)x + i;
        uint8x16_t raw = vld1q_u8(b->qs);
        w[0] = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0f)));
        w[1] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
    } else {
        const hx_block_q8_0 *b = (const hx_block_q8_0 *)x + i;
        w[0] = vld1q_s8(b->qs);
        w[1] = vld1q_s8(b->qs + 16);
    }
}

HX_NEON_INLINE float hx_neon_q80_q40_d(const char *x, int64_t i, int q4)
{
    return hx_fp16_to_fp32(q4 ? ((const hx_block_q4_0 *)x)[i].d : ((const hx_block_q8_0 *)x)[i].d);
}

/* acc[r][t] += the products of block i (the dots' per-block step). */
HX_NEON_INLINE void hx_neon_q80_q40_blk2x2(const char *const x[2], const hx_block_q8a *const y[2],
                                           int64_t i, int q4, float32x4_t acc[2][2],
                                           hx_neon_dot16_fn dot16)
{
    for (int r = 0; r < 2; r++) {
        int8x16_t w[2];
        hx_neon_q80_q40_bytes(x[r], i, q4, w);
        const float d = hx_neon_q80_q40_d(x[r], i, q4);
        for (int t = 0; t < 2; t++) {
            int32x4_t p = hx_neon_dot32(dot16, w[0], w[1], y[t][i].qs);
            if (q4) p = vsetq_lane_s32(vgetq_lane_s32(p, 0) - 8 * y[t][i].s, p, 0);
            acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(p), d * y[t][i].d);
        }
    }
}

/* out[r*ldo + t] for two rows and two tokens. */
HX_NEON_INLINE void hx_neon_q80_q40_2x2(int64_t n, const char *const x[2],
                                        const hx_block_q8a *const y[2], int q4, float *out,
                                        size_t ldo, hx_neon_dot16_fn dot16)
{
    float32x4_t a0[2][2], a1[2][2];
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < 2; t++) a0[r][t] = a1[r][t] = vdupq_n_f32(0);
    int64_t nb = n / HX_QK, i = 0;
    if (q4) { /* the Q4_0 dot: one chain */
        for (; i < nb; i++) hx_neon_q80_q40_blk2x2(x, y, i, 1, a0, dot16);
    } else { /* the Q8_0 dot: even blocks in one chain, odd in another */
        for (; i + 2 <= nb; i += 2) {
            hx_neon_q80_q40_blk2x2(x, y, i, 0, a0, dot16);
            hx_neon_q80_q40_blk2x2(x, y, i + 1, 0, a1, dot16);
        }
        if (i < nb) hx_neon_q80_q40_blk2x2(x, y, i, 0, a0, dot16);
    }
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < 2; t++)
            out[(size_t)r * ldo + t] =
                q4 ? vaddvq_f32(a0[r][t]) : vaddvq_f32(vaddq_f32(a0[r][t], a1[r][t]));
}

/* Q4_K (q5 = 0) or Q5_K (q5 = 1): two rows by two tokens. Each row's
 * super-block is unpacked once (scales, nibbles, fifth bits) for both
 * tokens; the integer sums are exact and the float step is the dot's
 * (hx_neon_kq45_term), so every output equals the dot bit for bit. */
HX_NEON_INLINE void hx_neon_kq45_2x2(int64_t n, const char *const x[2],
                                     const hx_block_q8_K *const y[2], int q5, float *out,
                                     size_t ldo, hx_neon_dot16_fn dot16)
{
    const size_t bs = q5 ? sizeof(hx_block_q5_K) : sizeof(hx_block_q4_K);
    float s[2][2] = {{0, 0}, {0, 0}};
    for (int64_t i = 0; i < n / HX_QK_K; i++)
        for (int r = 0; r < 2; r++) {
            const char *blk = x[r] + (size_t)i * bs;
            const hx_block_q4_K *b4 = (const hx_block_q4_K *)blk;
            const hx_block_q5_K *b5 = (const hx_block_q5_K *)blk;
            uint64_t sc, mn;
            hx_k_unpack(q5 ? b5->scales : b4->scales, &sc, &mn);
            int32x4_t is[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
            for (int jp = 0; jp < 4; jp++) {
                int8x16_t q[4];
                hx_neon_kq45_bytes(q5 ? b5->qs : b4->qs, q5 ? b5->qh : NULL, jp, q);
                for (int t = 0; t < 2; t++) {
                    const int8_t *yy = y[t][i].qs + 64 * jp;
                    is[t] = vmlaq_n_s32(is[t], hx_neon_dot32(dot16, q[0], q[1], yy),
                                        HX_K_BYTE(sc, 2 * jp));
                    is[t] = vmlaq_n_s32(is[t], hx_neon_dot32(dot16, q[2], q[3], yy + 32),
                                        HX_K_BYTE(sc, 2 * jp + 1));
                }
            }
            const float dw = hx_fp16_to_fp32(q5 ? b5->d : b4->d);
            const float dminw = hx_fp16_to_fp32(q5 ? b5->dmin : b4->dmin);
            for (int t = 0; t < 2; t++)
                s[r][t] += hx_neon_kq45_term(dw, dminw, y[t][i].d, vaddvq_s32(is[t]),
                                             hx_neon_k_min_term(mn, y[t][i].bsums));
        }
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < 2; t++) out[(size_t)r * ldo + t] = s[r][t];
}

/* Q6_K: two rows by two tokens, each row's bits unpacked once for both. */
HX_NEON_INLINE void hx_neon_q6_K_2x2(int64_t n, const char *const x[2],
                                     const hx_block_q8_K *const y[2], float *out, size_t ldo,
                                     hx_neon_dot16_fn dot16)
{
    float s[2][2] = {{0, 0}, {0, 0}};
    for (int64_t i = 0; i < n / HX_QK_K; i++)
        for (int r = 0; r < 2; r++) {
            const hx_block_q6_K *xb = (const hx_block_q6_K *)x[r] + i;
            int32x4_t is[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
            for (int h = 0; h < 2; h++) {
                const int8_t *sc = xb->scales + 8 * h;
                for (int half = 0; half < 2; half++) {
                    int8x16_t q[4];
                    hx_neon_q6_bytes(xb->ql + 64 * h, xb->qh + 32 * h, half, q);
                    for (int k = 0; k < 4; k++)
                        for (int t = 0; t < 2; t++) {
                            const int8_t *yy = y[t][i].qs + 128 * h + 32 * k + 16 * half;
                            int32x4_t p = dot16(vdupq_n_s32(0), q[k], vld1q_s8(yy));
                            is[t] = vmlaq_n_s32(is[t], p, sc[2 * k + half]);
                        }
                }
            }
            const float dw = hx_fp16_to_fp32(xb->d);
            for (int t = 0; t < 2; t++)
                s[r][t] += hx_neon_q6_term(dw, y[t][i].d, vaddvq_s32(is[t]),
                                           hx_neon_q6_offset(xb->scales, y[t][i].bsums));
        }
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < 2; t++) out[(size_t)r * ldo + t] = s[r][t];
}

/* Two rows x[0..1] by two tokens a[0..1] of weight type wtype into
 * out[r*ldo + t] (wtype a constant after inlining: one kernel each). */
HX_NEON_INLINE void hx_neon_2x2(int wtype, int64_t n, const char *const x[2],
                                const void *const a[2], float *out, size_t ldo,
                                hx_neon_dot16_fn dot16)
{
    if (wtype == HX_TYPE_Q8_0 || wtype == HX_TYPE_Q4_0) {
        const hx_block_q8a *y[2] = {a[0], a[1]};
        hx_neon_q80_q40_2x2(n, x, y, wtype == HX_TYPE_Q4_0, out, ldo, dot16);
        return;
    }
    const hx_block_q8_K *y[2] = {a[0], a[1]};
    if (wtype == HX_TYPE_Q6_K)
        hx_neon_q6_K_2x2(n, x, y, out, ldo, dot16);
    else
        hx_neon_kq45_2x2(n, x, y, wtype == HX_TYPE_Q5_K, out, ldo, dot16);
}

/* The gemm (kernels_impl.h) of wtype over pairs of rows and tokens; a last
 * odd row or token goes through the level's own dot. */
HX_NEON_INLINE void hx_neon_gemm(int wtype, int64_t n, const void *w, size_t ws, int nr,
                                 const void *const *a, int nt, float *out, size_t ldo,
                                 hx_dot_fn dot, hx_neon_dot16_fn dot16)
{
    int t = 0;
    for (; t + 2 <= nt; t += 2) {
        int r = 0;
        for (; r + 2 <= nr; r += 2) {
            const char *x[2] = {(const char *)w + (size_t)r * ws,
                                (const char *)w + (size_t)(r + 1) * ws};
            hx_neon_2x2(wtype, n, x, a + t, out + (size_t)r * ldo + t, ldo, dot16);
        }
        for (; r < nr; r++)
            for (int k = 0; k < 2; k++)
                dot(n, out + (size_t)r * ldo + t + k, (const char *)w + (size_t)r * ws, a[t + k]);
    }
    for (; t < nt; t++)
        for (int r = 0; r < nr; r++)
            dot(n, out + (size_t)r * ldo + t, (const char *)w + (size_t)r * ws, a[t]);
}

#endif /* __aarch64__ */
#endif /* HX_KERNELS_ARM_H */
