/* write.c: the trained model as a qwen3 GGUF (llama.cpp's names and keys),
 * or a LoRA adapter GGUF in llama.cpp's adapter format. */
#include <stdlib.h>
#include <string.h>

#include "lora/train_int.h"

static int set_hparams(hx_gguf_writer *w, const hx_hparams *hp)
{
    int rc = hx_model_set_hparams(w, hp, "hearth trained model");
    return rc ? rc : hx_gguf_set_u32(w, "general.file_type", 0);
}

static int copy_tokenizer(hx_gguf_writer *w, const char *path, int n_vocab,
                          hx_err *err)
{
    hx_gguf *g = NULL;
    int rc = hx_gguf_open(path, &g, err);
    if (rc) return rc;
    int et;
    uint64_t n = 0;
    if (hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) || n != (uint64_t)n_vocab)
        rc = hx_err_set(err, HX_ERR_INVALID, "%s: %llu tokens, but the model "
                        "has a vocabulary of %d", path, (unsigned long long)n, n_vocab);
    if (!rc && (rc = hx_gguf_copy_kv_prefix(w, g, "tokenizer.")))
        rc = hx_err_set(err, rc, "%s: copying the tokenizer: %s", path, hx_rc_str(rc));
    hx_gguf_close(g);
    return rc;
}

static int add_tensors(hx_gguf_writer *w, const hx_trainer *tr)
{
    int rc = HX_OK;
    for (int i = 0; !rc && i < tr->n_tensors; i++) {
        const tr_tensor *t = &tr->tensors[i];
        rc = hx_gguf_add_tensor(w, t->name, HX_TYPE_F32, t->n_dims, t->ne,
                                tr->params + t->off, NULL, NULL);
    }
    return rc;
}

/* LoRA adapter keys as llama.cpp reads them. */
static int set_adapter(hx_gguf_writer *w, const hx_trainer *tr)
{
    const tr_lin *l = NULL;
    for (int i = 0; !l && i < 7; i++) l = hx_tr_lora_lin(tr, i);
    const float alpha = l ? l->s * (float)l->r : 0.0f;
    int rc = hx_gguf_set_str(w, "general.architecture", tr->hp.arch);
    rc = rc ? rc : hx_gguf_set_str(w, "general.type", "adapter");
    rc = rc ? rc : hx_gguf_set_str(w, "general.name", "hearth LoRA adapter");
    rc = rc ? rc : hx_gguf_set_str(w, "adapter.type", "lora");
    /* the base's identity: the engine refuses the adapter on another base */
    char id[65];
    hx_model_identity(tr->base, id);
    rc = rc ? rc : hx_gguf_set_str(w, HX_ADAPTER_BASE_KEY, id);
    return rc ? rc : hx_gguf_set_f32(w, "adapter.lora.alpha", alpha);
}

int hx_trainer_write_gguf(hx_trainer *tr, const char *path,
                          const char *vocab_gguf, hx_err *err)
{
    return hx_trainer_write_gguf_kv(tr, path, vocab_gguf, NULL, err);
}

static int set_extra(hx_gguf_writer *w, const char *const *kv)
{
    int rc = HX_OK;
    for (; !rc && kv && kv[0] && kv[1]; kv += 2) rc = hx_gguf_set_str(w, kv[0], kv[1]);
    return rc;
}

int hx_trainer_write_gguf_kv(hx_trainer *tr, const char *path,
                             const char *vocab_gguf, const char *const *kv,
                             hx_err *err)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    if (!w) return hx_err_set(err, HX_ERR_NOMEM, "write: out of memory");
    int rc = tr->lora ? set_adapter(w, tr) : set_hparams(w, &tr->hp);
    if (!rc) rc = set_extra(w, kv);
    if (!rc) hx_gguf_set_u32(w, "general.alignment", 32);
    if (rc) rc = hx_err_set(err, rc, "write %s: metadata", path);
    if (!rc && vocab_gguf && !tr->lora) rc = copy_tokenizer(w, vocab_gguf, tr->hp.n_vocab, err);
    if (!rc && (rc = add_tensors(w, tr))) rc = hx_err_set(err, rc, "write %s: tensors", path);
    const char *inputs[] = {vocab_gguf, NULL};
    if (!rc) rc = hx_gguf_writer_write_from(w, path, inputs, NULL, err);
    hx_gguf_writer_free(w);
    return rc;
}
