/* fuzz_model.c: fuzz target for the model loader: loads the input as a
 * GGUF model and, when it is accepted, runs a short context over it.
 * Seeds (corpus/fuzz_model/) were written by hx_mkmodel_write: 1 layer,
 * n_vocab 8, n_embd 32, 2 heads on 1 KV head of 16, n_ff 32, 2 experts
 * (1 used) of 32; qwen3 F32 and qwen3moe Q8_0 tied, llama F16 untied. */
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

/* 1 if every tensor is F32, F16 or BF16. Quantized models are loaded but
 * not run: mutated scales can make activations NaN, and quantizing NaN
 * activations is not yet defined behaviour in the kernels (kernels.c). */
static int all_float(const hx_model *m)
{
    const hx_gguf *g = hx_model_gguf(m);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        int t = hx_gguf_tensor_at(g, i)->type;
        if (t != HX_TYPE_F32 && t != HX_TYPE_F16 && t != HX_TYPE_BF16) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hx_model_params mp = hx_model_default_params();
    mp.check_tensors = 1;
    hx_model *m = NULL;
    hx_err err = {0};
    if (hx_model_load_buffer(data, size, &mp, &m, &err) == HX_OK) {
        if (all_float(m)) run(m);
        hx_model_free(m);
    } else if (m != NULL || err.msg[0] == '\0') {
        abort(); /* a failure always says why and leaves no model */
    }
    return 0;
}
