/* quant.h: tensor block layouts (byte for byte as ggml stores them in GGUF
 * files), reference quantization and dequantization of rows. Part of
 * engine.h, the engine's public API. */
#ifndef HX_QUANT_H
#define HX_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/gguf.h"

/* ---- block layouts (little-endian, packed, as in ggml-common.h) ---- */
#define HX_QK 32   /* elements per Q4_0 / Q8_0 block */
#define HX_QK_K 256 /* elements per K-quant super-block */
#define HX_K_SCALE_BYTES 12 /* packed 6-bit scales and mins of Q4_K/Q5_K */

/* Q4_0: w = d * (q - 8); byte j holds element j (low nibble) and j+16. */
typedef struct hx_block_q4_0 {
    uint16_t d;      /* fp16 */
    uint8_t qs[HX_QK / 2];
} hx_block_q4_0;

/* Q8_0: w = d * q. */
typedef struct hx_block_q8_0 {
    uint16_t d;      /* fp16 */
    int8_t qs[HX_QK];
} hx_block_q8_0;

/* Q4_K: 8 sub-blocks of 32; w = d*sc_j*q - dmin*m_j with 6-bit sc_j, m_j
 * packed in scales[] (j < 4: scales[j] & 63 and scales[j+4] & 63; j >= 4:
 * low 4 bits from scales[j+4], high 2 bits from the top of scales[j-4] and
 * scales[j]). Each 32 bytes of qs hold sub-blocks 2i (low nibbles) and
 * 2i+1 (high nibbles). */
typedef struct hx_block_q4_K {
    uint16_t d;      /* fp16 super-block scale of the scales */
    uint16_t dmin;   /* fp16 super-block scale of the mins */
    uint8_t scales[HX_K_SCALE_BYTES];
    uint8_t qs[HX_QK_K / 2];
} hx_block_q4_K;

/* Q5_K: Q4_K plus a fifth bit per element: bit j of qh[l] is the high bit
 * of element 32*j + l. */
typedef struct hx_block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[HX_K_SCALE_BYTES];
    uint8_t qh[HX_QK_K / 8];
    uint8_t qs[HX_QK_K / 2];
} hx_block_q5_K;

/* Q6_K: 16 sub-blocks of 16; w = d * sc_j * (q - 32), q in 0..63 split in
 * 4 low bits (ql) and 2 high bits (qh), in two halves of 128 elements. */
typedef struct hx_block_q6_K {
    uint8_t ql[HX_QK_K / 2];
    uint8_t qh[HX_QK_K / 4];
    int8_t scales[HX_QK_K / 16];
    uint16_t d;      /* fp16 */
} hx_block_q6_K;

/* Q8_K: activations for K-quant dots. x = d * q; bsums[j] = sum of the 16
 * quants q[16j .. 16j+15]. */
typedef struct hx_block_q8_K {
    float d;
    int8_t qs[HX_QK_K];
    int16_t bsums[HX_QK_K / 16];
} hx_block_q8_K;

/* fp16/bf16 scalar conversions: hx_fp16_to_fp32 and friends in base.h. */

/* 1 if hx_quantize_row supports the type (F32, F16, BF16, Q8_0, Q4_0,
 * Q4_K, Q5_K, Q6_K, Q8_K), else 0. hx_dequantize_row supports the same. */
int hx_quant_supported(int type);

/* Reference quantization of one row of n floats into y (n a multiple of
 * the type's block, y holding hx_type_row_bytes(type, n) bytes). imatrix
 * (n per-column importances, may be NULL) weights the error that the
 * K-quant scale search minimises; other types ignore it. Unsupported types
 * leave y untouched (check hx_quant_supported first). */
void hx_quantize_row(int type, const float *x, void *y, int64_t n,
                     const float *imatrix);
/* nrows rows of ncols each (imatrix has ncols entries, may be NULL).
 * Returns the bytes written, 0 for an unsupported type or bad ncols. */
size_t hx_quantize_rows(int type, const float *src, void *dst, int64_t nrows,
                        int64_t ncols, const float *imatrix);
/* Decodes one row of n elements of the type into y. */
void hx_dequantize_row(int type, const void *x, float *y, int64_t n);

#endif /* HX_QUANT_H */
