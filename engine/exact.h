/* exact.h: the engine's exact reference forward pass: the same model in
 * double precision on the dequantized weights, for measuring error. Part
 * of engine_ext.h. */
#ifndef HX_EXACT_H
#define HX_EXACT_H

#include <stdint.h>

#include "base/base.h"
#include "engine/model.h"

/* Teacher-forced logits of tok[0..n) at positions 0..n-1 into logits
 * (n * n_vocab floats, row i after tok[0..i], owned by the caller), as
 * llama.cpp defines the model (llama, qwen2, qwen3, qwen3moe), with every
 * weight dequantized as stored and everything after that in double:
 * no activation quantization, an unrounded KV cache, double RoPE angles,
 * softmax and MoE routing. Slow and plain (one row of a weight dequantized
 * at a time, each row once per call): for tests and error measurements,
 * not inference. n_threads (>= 1) split the rows of each matrix. Errors:
 * HX_ERR_INVALID for a bad token or count, HX_ERR_NOMEM. */
int hx_exact_logits(const hx_model *m, const int32_t *tok, int n,
                    int n_threads, float *logits, hx_err *err);

#endif /* HX_EXACT_H */
