/* gguf_types.c: traits of the tensor types (ggml's numbering): names,
 * elements and bytes per block, row sizes. Unknown numbers get "?" and 0. */
#include "engine/gguf.h"

typedef struct type_traits {
    const char *name;
    int block_elems;
    int block_bytes;
} type_traits;

/* Block layouts as ggml defines them (ggml-common.h), e.g. Q4_0 is an f16
 * scale and 32 4-bit quants (2 + 16 bytes); Q4_K is two f16, 12 bytes of
 * 6-bit scales and 256 4-bit quants (4 + 12 + 128). */
static const type_traits k_traits[HX_TYPE_COUNT] = {
    [HX_TYPE_F32] = {"F32", 1, 4},
    [HX_TYPE_F16] = {"F16", 1, 2},
    [HX_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [HX_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [HX_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [HX_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [HX_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [HX_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [HX_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [HX_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [HX_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [HX_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [HX_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [HX_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [HX_TYPE_I8] = {"I8", 1, 1},
    [HX_TYPE_I16] = {"I16", 1, 2},
    [HX_TYPE_I32] = {"I32", 1, 4},
    [HX_TYPE_I64] = {"I64", 1, 8},
    [HX_TYPE_F64] = {"F64", 1, 8},
    [HX_TYPE_BF16] = {"BF16", 1, 2},
};

static const type_traits *traits(int type)
{
    if (type < 0 || type >= HX_TYPE_COUNT || !k_traits[type].name) return NULL;
    return &k_traits[type];
}

const char *hx_type_name(int type)
{
    const type_traits *t = traits(type);
    return t ? t->name : "?";
}

int hx_type_block_elems(int type)
{
    const type_traits *t = traits(type);
    return t ? t->block_elems : 0;
}

int hx_type_block_bytes(int type)
{
    const type_traits *t = traits(type);
    return t ? t->block_bytes : 0;
}

size_t hx_type_row_bytes(int type, int64_t n)
{
    const type_traits *t = traits(type);
    size_t out;
    if (!t || n < 0 || n % t->block_elems != 0) return 0;
    if (hx_mul_size((size_t)(n / t->block_elems), (size_t)t->block_bytes,
                    &out) != 0)
        return 0;
    return out;
}

/* Names of ggml types Hearth does not implement, for error messages. */
const char *hx_type_ggml_name(int type)
{
    static const char *const other[HX_TYPE_COUNT] = {
        [4] = "Q4_2 (removed)", [5] = "Q4_3 (removed)", [16] = "IQ2_XXS",
        [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL",
        [21] = "IQ3_S", [22] = "IQ2_S", [23] = "IQ4_XS", [29] = "IQ1_M",
        [31] = "Q4_0_4_4 (removed)", [32] = "Q4_0_4_8 (removed)",
        [33] = "Q4_0_8_8 (removed)", [34] = "TQ1_0", [35] = "TQ2_0",
        [36] = "IQ4_NL_4_4 (removed)", [37] = "IQ4_NL_4_8 (removed)",
        [38] = "IQ4_NL_8_8 (removed)", [39] = "MXFP4",
    };
    if (traits(type)) return hx_type_name(type);
    if (type >= 0 && type < HX_TYPE_COUNT && other[type]) return other[type];
    return "unknown";
}
