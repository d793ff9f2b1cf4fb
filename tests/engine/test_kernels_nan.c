/* test_kernels_nan.c: NaN activations (a corrupt model's) quantize to a
 * defined result on every kernel level the CPU has: NaN lanes give 0, the
 * block sums stay in range, and the Q8_0 dots' "-128 * s" cannot overflow
 * (signaling NaNs once made the scalar amax forget earlier values). */
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

int main(void)
{
    RUN(test_q8_0_nan_activations);
    RUN(test_q8_K_nan_activations);
    return test_summary();
}
