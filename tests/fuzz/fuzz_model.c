/* fuzz_model.c: fuzz target for the model loader: loads the input as a
 * GGUF model, without and with check_tensors, and runs a short context
 * over what is accepted, quantized models included. Seeds (corpus/fuzz_model/,
 * written by scripts/fuzz-model-seeds.sh with hearth mkmodel): 1 layer,
 * n_vocab 8, n_embd 32, 2 heads on 1 KV head of 16, n_ff 32, 2 experts
 * (1 used) of 32; qwen3 F32 and qwen3moe Q8_0 tied, llama F16 untied; and
 * with n_ff 256, whose ffn_down rows hold K-quant blocks: qwen3 Q4_0 with
 * a Q4_K ffn_down, llama Q8_0 with a Q6_K ffn_down, qwen3moe Q4_0 with
 * Q5_K experts' ffn_down. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float g_sink; /* keeps the logits from being optimized out */

/* Decodes two tokens, checks the context's bookkeeping, reads the logits. */
static void run(hx_model *m)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 4;
    cp.n_threads = 1;
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err) != HX_OK) return;
    const int nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[2] = {0, nv - 1};
    if (hx_decode(c, tok, 2, 1) != HX_OK) abort();
    if (hx_ctx_n_past(c) != 2) abort();
    for (int i = 0; i < 2; i++) g_sink += hx_ctx_logits(c, i)[nv - 1];
    hx_ctx_truncate(c, 1);
    if (hx_decode(c, tok, 1, 0) != HX_OK || hx_ctx_n_past(c) != 2) abort();
    g_sink += hx_ctx_logits(c, -1)[0];
    hx_ctx_free(c);
}

/* Loads with or without check_tensors; a failure must say why and leave
 * no model. */
static int load(const uint8_t *data, size_t size, int check, hx_model **m)
{
    hx_model_params mp = hx_model_default_params();
    mp.check_tensors = check;
    hx_err err = {0};
    *m = NULL;
    int rc = hx_model_load_buffer(data, size, &mp, m, &err);
    if (rc != HX_OK && (*m != NULL || err.msg[0] == '\0')) abort();
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hx_model *m;
    /* unchecked, NaN and infinite weights and scales reach the kernels:
     * NaN activations quantize to 0 (kernels.c), every type runs */
    int rc = load(data, size, 0, &m);
    if (rc == HX_OK) run(m);
    hx_model_free(m);
    /* the check only refuses more (non-finite weights or block scales) */
    if (load(data, size, 1, &m) == HX_OK && rc != HX_OK) abort();
    hx_model_free(m);
    return 0;
}
