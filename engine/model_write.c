/* model_write.c: a model's hyperparameters as GGUF keys (model.h),
 * llama.cpp's names: what the random models and trained models write. */
#include "engine/model.h"

#include <stdio.h>

static int set_arch_u32(hx_gguf_writer *w, const char *arch, const char *key,
                        uint32_t v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return hx_gguf_set_u32(w, k, v);
}

int hx_model_set_hparams(hx_gguf_writer *w, const hx_hparams *hp, const char *name)
{
    const char *a = hp->arch;
    char k[128];
    int rc = hx_gguf_set_str(w, "general.architecture", a);
    rc = rc ? rc : hx_gguf_set_str(w, "general.name", name);
    rc = rc ? rc : set_arch_u32(w, a, "block_count", (uint32_t)hp->n_layer);
    rc = rc ? rc : set_arch_u32(w, a, "context_length", (uint32_t)hp->n_ctx_train);
    rc = rc ? rc : set_arch_u32(w, a, "embedding_length", (uint32_t)hp->n_embd);
    rc = rc ? rc : set_arch_u32(w, a, "feed_forward_length", (uint32_t)hp->n_ff);
    rc = rc ? rc : set_arch_u32(w, a, "attention.head_count", (uint32_t)hp->n_head);
    rc = rc ? rc : set_arch_u32(w, a, "attention.head_count_kv", (uint32_t)hp->n_head_kv);
    rc = rc ? rc : set_arch_u32(w, a, "attention.key_length", (uint32_t)hp->head_dim);
    rc = rc ? rc : set_arch_u32(w, a, "attention.value_length", (uint32_t)hp->head_dim);
    rc = rc ? rc : set_arch_u32(w, a, "rope.dimension_count", (uint32_t)hp->head_dim);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a);
    rc = rc ? rc : hx_gguf_set_f32(w, k, hp->rms_eps);
    snprintf(k, sizeof k, "%s.rope.freq_base", a);
    rc = rc ? rc : hx_gguf_set_f32(w, k, hp->rope_base);
    if (rc || !hp->n_expert) return rc;
    rc = set_arch_u32(w, a, "expert_count", (uint32_t)hp->n_expert);
    rc = rc ? rc : set_arch_u32(w, a, "expert_used_count", (uint32_t)hp->n_expert_used);
    rc = rc ? rc : set_arch_u32(w, a, "expert_feed_forward_length", (uint32_t)hp->n_ff_exp);
    return rc;
}
