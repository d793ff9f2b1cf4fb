/* kernels_dotprod.c: aarch64 kernels with the dot-product instructions
 * (SDOT, ARMv8.2-A+dotprod), compiled for this file only; picked at run time. */
#include "engine/kernels_impl.h"

#if defined(__aarch64__)
/* Only this file may use SDOT; the rest of the build stays ARMv8.0, and
 * these functions run only when the CPU reports HWCAP_ASIMDDP. */
#pragma GCC target("arch=armv8.2-a+dotprod")
#include <arm_neon.h>

#include "engine/kernels_arm.h"

/* acc + the 16 products of a and b: SDOT adds 4 into each int32 lane. */
static inline int32x4_t sdot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    return vdotq_s32(acc, a, b);
}

static void dot_q8_0_dp(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_q8_0(n, out, w, a, sdot16);
}

static void dot_q4_0_dp(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_q4_0(n, out, w, a, sdot16);
}

static void dot_q4_K_dp(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_kq45(n, out, w, a, 0, sdot16);
}

static void dot_q5_K_dp(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_kq45(n, out, w, a, 1, sdot16);
}

static void dot_q6_K_dp(int64_t n, float *out, const void *w, const void *a)
{
    hx_neon_dot_q6_K(n, out, w, a, sdot16);
}

static void gemm_q8_0_dp(int64_t n, const void *w, size_t ws, int nr,
                         const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q8_0, n, w, ws, nr, a, nt, out, ldo, dot_q8_0_dp, sdot16);
}

static void gemm_q4_0_dp(int64_t n, const void *w, size_t ws, int nr,
                         const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q4_0, n, w, ws, nr, a, nt, out, ldo, dot_q4_0_dp, sdot16);
}

static void gemm_q4_K_dp(int64_t n, const void *w, size_t ws, int nr,
                         const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q4_K, n, w, ws, nr, a, nt, out, ldo, dot_q4_K_dp, sdot16);
}

static void gemm_q5_K_dp(int64_t n, const void *w, size_t ws, int nr,
                         const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q5_K, n, w, ws, nr, a, nt, out, ldo, dot_q5_K_dp, sdot16);
}

static void gemm_q6_K_dp(int64_t n, const void *w, size_t ws, int nr,
                         const void *const *a, int nt, float *out, size_t ldo)
{
    hx_neon_gemm(HX_TYPE_Q6_K, n, w, ws, nr, a, nt, out, ldo, dot_q6_K_dp, sdot16);
}

void hx_kernels_fill_dotprod(hx_kernels *k)
{
    k->dot[HX_TYPE_Q8_0] = dot_q8_0_dp;
    k->dot[HX_TYPE_Q4_0] = dot_q4_0_dp;
    k->dot[HX_TYPE_Q4_K] = dot_q4_K_dp;
    k->dot[HX_TYPE_Q5_K] = dot_q5_K_dp;
    k->dot[HX_TYPE_Q6_K] = dot_q6_K_dp;
    k->gemm[HX_TYPE_Q8_0] = gemm_q8_0_dp;
    k->gemm[HX_TYPE_Q4_0] = gemm_q4_0_dp;
    k->gemm[HX_TYPE_Q4_K] = gemm_q4_K_dp;
    k->gemm[HX_TYPE_Q5_K] = gemm_q5_K_dp;
    k->gemm[HX_TYPE_Q6_K] = gemm_q6_K_dp;
}

#else /* not aarch64 */

void hx_kernels_fill_dotprod(hx_kernels *k)
{
    (void)k;
}

#endif
