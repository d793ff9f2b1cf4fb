/* kernels_neon.c: aarch64 Advanced SIMD (ARMv8.0 NEON) kernels: float dots,
 * int8 dots through widening multiplies, activation quantization. */
#include "engine/kernels_impl.h"

#include <math.h>
#include <string.h>

#if defined(__aarch64__)
#include <arm_neon.h>

#include "engine/kernels_arm.h"

/* ---- float rows ---- */

static void dot_f32_neon(int64_t n, float *out, const void *w, const void *a)
{
    const float *x = w, *y = a;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++)
            acc[k] = vfmaq_f32(acc[k], vld1q_f32(x + i + 4 * k), vld1q_f32(y + i + 4 * k));
    for (; i + 4 <= n; i += 4)
        acc[0] = vfmaq_f32(acc[0], vld1q_f32(x + i), vld1q_f32(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; i++) s += x[i] * y[i];
    *out = s;
}

static inline float32x4_t load_f16(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static void dot_f16_neon(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++)
            acc[k] = vfmaq_f32(acc[k], load_f16(x + i + 4 * k), load_f16(y + i + 4 * k));
    for (; i + 4 <= n; i += 4)
        acc[0] = vfmaq_f32(acc[0], load_f16(x + i), load_f16(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; i++) s += hx_fp16_to_fp32(x[i]) * hx_fp16_to_fp32(y[i]);
    *out = s;
}

static inline float32x4_t load_bf16(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

static void dot_bf16_neon(int64_t n, float *out, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++)
            acc[k] = vfmaq_f32(acc[k], load_bf16(x + i + 4 * k), load_bf16(y + i + 4 * k));
    for (; i + 4 <= n; i += 4)
        acc[0] = vfmaq_f32(acc[0], load_bf16(x + i), load_bf16(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; i++) s += hx_bf16_to_fp32(x[i]) * hx_bf16_to_fp32(y[i]);
    *out = s;
}

/* ---- quantized dots (kernels_arm.h) ---- */

/* acc + the 16 products of a and b in 4 int32 lanes: int8 x int8 widened
 * to int16 (exact), pairs added into int32. */
static inline int32x4_t mac16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

static void dot_q8_0_neon(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_q8_0(n, out, w, a, mac16);
}

static void dot_q4_0_neon(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_q4_0(n, out, w, a, mac16);
}

static void dot_q4_K_neon(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_kq45(n, out, w, a, 0, mac16);
}

static void dot_q5_K_neon(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_kq45(n, out, w, a, 1, mac16);
}

static void dot_q6_K_neon(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_q6_K(n, out, w, a, mac16);
}

/* ---- activation quantization (bit-exact with the scalar versions) ---- */

/* 16 floats times scale, rounded to nearest even, to int8 (saturating, as
 * the scalar code clamps to 127); returns their int32 sum in lanes. */
static inline int32x4_t round_pack16(const float *x, float32x4_t scale, int8_t *q)
{
    int32x4_t v[4];
    for (int k = 0; k < 4; k++) v[k] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + 4 * k), scale));
    int16x8_t h0 = vcombine_s16(vqmovn_s32(v[0]), vqmovn_s32(v[1]));
    int16x8_t h1 = vcombine_s16(vqmovn_s32(v[2]), vqmovn_s32(v[3]));
    int8x16_t b = vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1));
    vst1q_s8(q, b);
    /* the sum of the stored (saturated) bytes */
    return vpaddlq_s16(vpaddlq_s8(b));
}

/* The largest magnitude, NaNs left out as the scalar quantizers do
 * (fabsf(x) > amax): FMAX would return NaN and FMAXNM a NaN for a
 * signaling one, so a lane takes a value only where it compares greater. */
static inline float amax_of(const float *x, int n)
{
    float32x4_t mx = vdupq_n_f32(0);
    for (int k = 0; k < n; k += 4) {
        float32x4_t a = vabsq_f32(vld1q_f32(x + k));
        mx = vbslq_f32(vcgtq_f32(a, mx), a, mx);
    }
    return vmaxvq_f32(mx);
}

static void quant_q8a_neon(const float *x, void *out, int64_t n)
{
    hx_block_q8a *y = out;
    for (int64_t i = 0; i < n / HX_QK; i++, x += HX_QK) {
        float amax = amax_of(x, HX_QK);
        float id = amax != 0 ? 127.0f / amax : 0.0f;
        y[i].d = hx_fp16_to_fp32(hx_fp32_to_fp16(amax / 127.0f));
        float32x4_t scale = vdupq_n_f32(id);
        int32x4_t s = vaddq_s32(round_pack16(x, scale, y[i].qs),
                                round_pack16(x + 16, scale, y[i].qs + 16));
        y[i].s = vaddvq_s32(s);
    }
}

static void quant_q8K_neon(const float *x, void *out, int64_t n)
{
    hx_block_q8_K *y = out;
    for (int64_t i = 0; i < n / HX_QK_K; i++, x += HX_QK_K) {
        float amax = amax_of(x, HX_QK_K);
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0) continue;
        float iscale = hx_q8K_iscale(x, amax);
        float32x4_t scale = vdupq_n_f32(iscale);
        for (int k = 0; k < HX_QK_K; k += 16)
            y[i].bsums[k / 16] = (int16_t)vaddvq_s32(round_pack16(x + k, scale, y[i].qs + k));
        y[i].d = 1.0f / iscale;
    }
}

static void quant_f16_neon(const float *x, void *out, int64_t n)
{
    uint16_t *y = out;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = hx_fp32_to_fp16(x[i]);
}

static void gemm_q8_0_neon(int64_t n, const void *w, size_t ws, int nr,
                           const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q8_0, n, w, ws, nr, a, nt, out, ldo, dot_q8_0_neon, mac16);
}

static void gemm_q4_0_neon(int64_t n, const void *w, size_t ws, int nr,
                           const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q4_0, n, w, ws, nr, a, nt, out, ldo, dot_q4_0_neon, mac16);
}

static void gemm_q4_K_neon(int64_t n, const void *w, size_t ws, int nr,
                           const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q4_K, n, w, ws, nr, a, nt, out, ldo, dot_q4_K_neon, mac16);
}

static void gemm_q5_K_neon(int64_t n, const void *w, size_t ws, int nr,
                           const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q5_K, n, w, ws, nr, a, nt, out, ldo, dot_q5_K_neon, mac16);
}

static void gemm_q6_K_neon(int64_t n, const void *w, size_t ws, int nr,
                           const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q6_K, n, w, ws, nr, a, nt, out, ldo, dot_q6_K_neon, mac16);
}

void hx_kernels_fill_neon(hx_kernels *k)
{
    k->dot[HX_TYPE_F32] = dot_f32_neon;
    k->dot[HX_TYPE_F16] = dot_f16_neon;
    k->dot[HX_TYPE_BF16] = dot_bf16_neon;
    k->dot[HX_TYPE_Q8_0] = dot_q8_0_neon;
    k->dot[HX_TYPE_Q4_0] = dot_q4_0_neon;
    k->dot[HX_TYPE_Q4_K] = dot_q4_K_neon;
    k->dot[HX_TYPE_Q5_K] = dot_q5_K_neon;
    k->dot[HX_TYPE_Q6_K] = dot_q6_K_neon;
    k->gemm[HX_TYPE_Q8_0] = gemm_q8_0_neon;
    k->gemm[HX_TYPE_Q4_0] = gemm_q4_0_neon;
    k->gemm[HX_TYPE_Q4_K] = gemm_q4_K_neon;
    k->gemm[HX_TYPE_Q5_K] = gemm_q5_K_neon;
    k->gemm[HX_TYPE_Q6_K] = gemm_q6_K_neon;
    k->quant[HX_TYPE_Q8_0] = quant_q8a_neon;
    k->quant[HX_TYPE_Q8_K] = quant_q8K_neon;
    k->quant[HX_TYPE_F16] = quant_f16_neon;
}

#else /* not aarch64: the scalar table stays */

void hx_kernels_fill_neon(hx_kernels *k)
{
    (void)k;
}

#endif
