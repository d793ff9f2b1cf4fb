/* adapter.h: LoRA adapters in llama.cpp's GGUF adapter format, applied at
 * run time without merging (the base stays mapped and shared): at each
 * adapted matrix y = W x + scale * (alpha / rank) * B (A x), for several
 * adapters at once. Part of engine.h, the engine's public API. */
#ifndef HX_ADAPTER_H
#define HX_ADAPTER_H

#include "base/base.h"
#include "engine/model.h"

/* The GGUF key in which Hearth records the identity of the base model an
 * adapter was trained on (hx_model_identity, 64 hex digits). Adapters
 * without it (llama.cpp's convert_lora_to_gguf) are checked by shape only. */
#define HX_ADAPTER_BASE_KEY "hearth.adapter.base_id"
/* Most adapters attached to one context at a time. */
#define HX_ADAPTER_MAX 8

/* Identity of a model: SHA-256 (lower-case hex) over the architecture,
 * the hyperparameters the computation depends on that the tensors do not
 * show (heads, experts used, norm epsilon, rope base, type and scaling),
 * every tensor's name, type and shape, and a sample of each tensor's bytes
 * (16 evenly spaced 256-byte pieces; all of a smaller tensor). Any
 * retraining, requantization, reshaping or change of those keys changes
 * it; it costs a few thousand page reads, not a pass over the file. It
 * keys adapters' bases and the prefix caches on disk alike. */
void hx_model_identity(const hx_model *m, char out[65]);

/* ---- adapters ---- */
typedef struct hx_adapter hx_adapter;

typedef struct hx_adapter_info {
    const char *name;    /* general.name, else the file's base name */
    const char *base_id; /* HX_ADAPTER_BASE_KEY, or "" when absent */
    const char *hash;    /* SHA-256 hex of alpha and every A/B tensor */
    float alpha;         /* adapter.lora.alpha (0: scale by 1, not alpha/r) */
    int n_pairs;         /* adapted matrices */
    int rank;            /* largest rank among them */
    int64_t n_params;    /* elements of all A and B */
} hx_adapter_info;

/* Loads an adapter for model m (borrowed: must outlive the adapter),
 * checking it as llama.cpp does and more: general.type "adapter",
 * adapter.type "lora", the same general.architecture, tensors named
 * <base tensor>.lora_a (ne [in, r]) and .lora_b (ne [r, out]) in pairs
 * whose shapes fit the base tensor (<...>_norm.weight tensors are ignored,
 * as llama.cpp ignores them), types F32, F16, BF16 or Q8_0 (kept as F32),
 * and the recorded base identity when present. Adaptable matrices: attn_q,
 * attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down (dense) and
 * output. Errors: HX_ERR_FORMAT for a malformed adapter (the tensor or key
 * named), HX_ERR_UNSUPPORTED for a well-formed one Hearth cannot apply
 * (token_embd, MoE experts, another tensor type), HX_ERR_INVALID for an
 * adapter of another base model (both identities in the message). Free
 * with hx_adapter_free after detaching it from every context. */
int hx_adapter_load(const hx_model *m, const char *path, hx_adapter **out,
                    hx_err *err);
/* The same over a GGUF image in memory (not copied; must outlive the
 * adapter when its tensors are F32); for tests and the fuzzer. */
int hx_adapter_load_buffer(const hx_model *m, const void *data, size_t size,
                           hx_adapter **out, hx_err *err);
void hx_adapter_free(hx_adapter *a); /* NULL is a no-op */
/* Borrowed, valid while the adapter lives. */
const hx_adapter_info *hx_adapter_get_info(const hx_adapter *a);

/* ---- the adapters attached to a context ----
 * Adapters are borrowed (they must outlive their attachment) and may be
 * attached to several contexts at once. Changing the attached set drops
 * the context's KV cache (positions computed under another set would be
 * stale) and changes hx_ctx_adapter_key. */

/* Replaces the attached set by ads[0..n) with their scales (n = 0
 * detaches all). HX_ERR_INVALID for an adapter of another model, one
 * listed twice, or n > HX_ADAPTER_MAX; the set is unchanged then. */
int hx_ctx_set_adapters(hx_ctx *c, hx_adapter *const *ads,
                        const float *scales, int n);
/* Attaches one more adapter, or changes the scale of an attached one. */
int hx_ctx_attach_adapter(hx_ctx *c, hx_adapter *a, float scale);
/* Detaches a; HX_ERR_NOTFOUND if it is not attached. */
int hx_ctx_detach_adapter(hx_ctx *c, const hx_adapter *a);
int hx_ctx_n_adapters(const hx_ctx *c);
/* A string naming the attached set: "" for none, else for each adapter in
 * order "name#hash16*scale" joined by ';'. Part of prefix-cache keys, so a
 * switch never reuses a cache computed under another set. Borrowed, valid
 * until the set changes. */
const char *hx_ctx_adapter_key(const hx_ctx *c);

#endif /* HX_ADAPTER_H */
