/* fuzz_adapter.c: fuzz target for the LoRA adapter loader: loads the input
 * as an adapter for a fixed random F32 qwen3 model (hx_mkmodel_write: 1
 * layer, n_vocab 16, n_embd 32, 2 heads on 1 KV head of 16, n_ff 32,
 * untied) and, when accepted, decodes two tokens with it attached. Seeds
 * (corpus/fuzz_adapter/) were written with hx_gguf_writer for that model:
 * rank 2 on blk.0.attn_q and output, alpha 4, F32 and F16. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/modelfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float g_sink; /* keeps the logits from being optimized out */
static hx_model *g_model;
static hx_ctx *g_ctx;

/* The model, written once to a temporary file and loaded. */
static int setup(void)
{
    if (g_ctx) return 0;
    char path[] = "/tmp/hx_fuzz_adapter_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.n_layer = 1, p.n_vocab = 16, p.n_embd = 32, p.n_head = 2;
    p.n_head_kv = 1, p.head_dim = 16, p.n_ff = 32, p.n_ctx = 8;
    hx_err err = {0};
    hx_model_params mp = hx_model_default_params();
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 4;
    cp.n_threads = 1;
    int rc = hx_mkmodel_write(&p, path, &err);
    if (!rc) rc = hx_model_load(path, &mp, &g_model, &err);
    unlink(path);
    if (!rc) rc = hx_ctx_new(g_model, &cp, &g_ctx, &err);
    return rc ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (setup()) abort();
    hx_adapter *a = NULL;
    hx_err err = {0};
    if (hx_adapter_load_buffer(g_model, data, size, &a, &err) != HX_OK) {
        if (a || !err.msg[0]) abort(); /* refused, with a message */
        return 0;
    }
    const hx_adapter_info *in = hx_adapter_get_info(a);
    if (in->n_pairs < 1 || in->rank < 1 || strlen(in->hash) != 64) abort();
    if (hx_ctx_attach_adapter(g_ctx, a, 1.0f) != HX_OK) abort();
    int32_t tok[2] = {0, 15};
    if (hx_decode(g_ctx, tok, 2, 1) != HX_OK) abort();
    g_sink += hx_ctx_logits(g_ctx, 1)[3];
    if (hx_ctx_set_adapters(g_ctx, NULL, NULL, 0) != HX_OK) abort();
    if (hx_ctx_n_past(g_ctx) != 0 || hx_ctx_adapter_key(g_ctx)[0]) abort();
    hx_adapter_free(a);
    return 0;
}
