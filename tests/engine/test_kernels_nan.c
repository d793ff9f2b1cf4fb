/* test_kernels_nan.c: NaN and infinite activations (a corrupt model's)
 * quantize to a defined result on every kernel level the CPU has, bit for
 * bit the scalar one's: NaN lanes give 0 and stay out of amax, the block
 * sums stay in range, and the Q8_0 dots' "-128 * s" cannot overflow. Run
 * under qemu-aarch64 too (NEON and SDOT levels; Makefile AARCH64_TESTS). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/kernels.h"
#include "engine/kernels_impl.h"
#include "test.h"

static float bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* 32 values: finite ones, the default NaN, NaNs with payloads, an inf */
static void fill(float *x)
{
    for (int j = 0; j < HX_QK; j++) x[j] = (float)(j - 16) * 0.25f;
    x[3] = bits_to_float(0xffc00000u);  /* x86's default NaN */
    x[7] = bits_to_float(0x7fc12345u);  /* payloads the scalar trick used to turn */
    x[11] = bits_to_float(0x7fbfffffu); /* into large integers */
    x[20] = bits_to_float(0xfff00001u);
}

static int is_nan_lane(int j) { return j == 3 || j == 7 || j == 11 || j == 20; }

static void test_q8_0_nan_activations(void)
{
    float x[HX_QK];
    fill(x);
    hx_block_q8a y0;
    hx_kernels_for(HX_ISA_SCALAR)->quant[HX_TYPE_Q8_0](x, &y0, HX_QK);
    EXPECT(y0.d == hx_fp16_to_fp32(hx_fp32_to_fp16(4.0f / 127.0f))); /* NaNs not in amax */
    for (int isa = HX_ISA_SCALAR; isa <= hx_isa_detect(); isa++) {
        const hx_kernels *k = hx_kernels_for(isa);
        hx_block_q8a y;
        memset(&y, 0x55, sizeof y);
        k->quant[HX_TYPE_Q8_0](x, &y, HX_QK);
        EXPECT(memcmp(&y, &y0, sizeof y) == 0); /* every level agrees */
        int s = 0;
        for (int j = 0; j < HX_QK; j++) {
            s += y.qs[j];
            if (is_nan_lane(j) && y.qs[j] != 0) {
                printf("  %s: lane %d of a NaN quantized to %d\n", hx_isa_name(isa), j, y.qs[j]);
                EXPECT(0);
            }
        }
        EXPECT_EQ_INT(y.s, s);
        EXPECT(y.s >= -32 * 127 && y.s <= 32 * 127);
        /* the dot with Q8_0 weights runs (UBSan checks the offset term) */
        float w[HX_QK], out = 0;
        for (int j = 0; j < HX_QK; j++) w[j] = 1.0f;
        hx_block_q8_0 wq;
        hx_quantize_row(HX_TYPE_Q8_0, w, &wq, HX_QK, NULL);
        k->dot[HX_TYPE_Q8_0](HX_QK, &out, &wq, &y);
        EXPECT(isnan(out) || isfinite(out));
    }
}

static void test_q8_K_nan_activations(void)
{
    float x[HX_QK_K];
    for (int b = 0; b < HX_QK_K / HX_QK; b++) fill(x + b * HX_QK);
    for (int isa = HX_ISA_SCALAR; isa <= hx_isa_detect(); isa++) {
        const hx_kernels *k = hx_kernels_for(isa);
        hx_block_q8_K y;
        k->quant[HX_TYPE_Q8_K](x, &y, HX_QK_K);
        for (int g = 0; g < HX_QK_K / 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y.qs[16 * g + l];
            EXPECT_EQ_INT(y.bsums[g], s);
        }
    }
}

/* Blocks of n values (a multiple of 256) with NaNs before and after the
 * largest value, infinities of either sign, both, and NaNs alone. */
enum { NB_CASES = 7 };
static void special_block(int c, float *x, int n)
{
    const float qnan = bits_to_float(0x7fc00000u), snan = bits_to_float(0x7f800001u);
    for (int j = 0; j < n; j++) x[j] = (float)((j * 37) % 61 - 30) * 0.125f;
    switch (c) {
    case 0: /* a NaN first, the largest value after it, a signaling NaN later */
        x[0] = qnan, x[9] = 9.5f, x[17] = snan, x[n - 1] = -bits_to_float(0x7fc0beefu);
        break;
    case 1: /* a NaN in every lane position of the first vectors */
        for (int j = 0; j < 8; j++) x[j] = j & 1 ? snan : qnan;
        x[40] = -7.25f;
        break;
    case 2: x[5] = INFINITY; break;
    case 3: x[30] = -INFINITY, x[31] = INFINITY; break;
    case 4: x[2] = qnan, x[6] = -INFINITY, x[12] = snan; break;
    case 5: for (int j = 0; j < n; j++) x[j] = j % 3 ? qnan : snan; break;
    default: /* NaNs only after the largest value (what FMAX got right) */
        x[1] = -9.0f, x[100] = qnan, x[n - 2] = snan;
    }
}

/* Every level's Q8_0 and Q8_K quantizers give the scalar reference's
 * bytes for blocks with NaNs and infinities (the NEON amax once took a
 * NaN, and the AVX2 Q8_K's lost the values before one). */
static void test_nan_inf_match_scalar(void)
{
    enum { N = 2 * HX_QK_K };
    float x[N];
    const hx_kernels *k0 = hx_kernels_for(HX_ISA_SCALAR);
    for (int c = 0; c < NB_CASES; c++) {
        special_block(c, x, N);
        hx_block_q8a a0[N / HX_QK];
        hx_block_q8_K b0[N / HX_QK_K];
        memset(a0, 0x55, sizeof a0);
        k0->quant[HX_TYPE_Q8_0](x, a0, N);
        k0->quant[HX_TYPE_Q8_K](x, b0, N);
        /* the reference itself: NaN lanes are 0, sums in range; an inf
         * block is all 0 (x * 127/inf) */
        for (int j = 0; j < N; j++) {
            int q0 = a0[j / HX_QK].qs[j % HX_QK], qk = b0[j / HX_QK_K].qs[j % HX_QK_K];
            if (isnan(x[j]) && (q0 || qk)) {
                printf("  case %d: NaN lane %d gave Q8_0 %d, Q8_K %d\n", c, j, q0, qk);
                EXPECT(0);
            }
        }
        if (c == 2 || c == 3 || c == 4) {
            EXPECT(isinf(a0[0].d) && isinf(b0[0].d));
            int nz = 0;
            for (int j = 0; j < HX_QK_K; j++) nz += b0[0].qs[j] != 0;
            EXPECT_EQ_INT(nz, 0);
        }
        if (c == 0) EXPECT(a0[0].d == hx_fp16_to_fp32(hx_fp32_to_fp16(9.5f / 127.0f)));
        if (c == 5) EXPECT(a0[0].d == 0 && b0[0].d == 0);
        for (int isa = HX_ISA_SCALAR + 1; isa <= hx_isa_detect(); isa++) {
            const hx_kernels *k = hx_kernels_for(isa);
            hx_block_q8a a[N / HX_QK];
            hx_block_q8_K b[N / HX_QK_K];
            memset(a, 0x55, sizeof a);
            memset(b, 0x55, sizeof b);
            k->quant[HX_TYPE_Q8_0](x, a, N);
            k->quant[HX_TYPE_Q8_K](x, b, N);
            int same0 = !memcmp(a, a0, sizeof a), sameK = !memcmp(b, b0, sizeof b);
            if (!same0 || !sameK)
                printf("  case %d, %s: Q8_0 %s scalar (d %g vs %g), Q8_K %s (d %g vs %g)\n", c,
                       hx_isa_name(isa), same0 ? "as" : "differs from", (double)a[0].d,
                       (double)a0[0].d, sameK ? "as" : "differs", (double)b[0].d,
                       (double)b0[0].d);
            EXPECT(same0);
            EXPECT(sameK);
        }
    }
}

int main(void)
{
    RUN(test_q8_0_nan_activations);
    RUN(test_q8_K_nan_activations);
    RUN(test_nan_inf_match_scalar);
    return test_summary();
}
