/* model_write.h: writes GGUF models with random weights (test models and
 * benchmark models of any size), as llama.cpp lays them out. Part of
 * modelfile.h. */
#ifndef HX_MODEL_WRITE_H
#define HX_MODEL_WRITE_H

#include <stdint.h>

#include "base/base.h"
#include "engine/engine.h"

/* Shapes and types of a random model. Weights are uniform random with a
 * standard deviation of 1/sqrt(fan_in) (logits of a few units, not
 * degenerate), generated block by block directly in the tensor's type
 * (random quants and scales for quantized types), so no quantizer runs and
 * files of any size stream through the GGUF writer's fill callback. The
 * same seed gives the same bytes. */
typedef struct hx_mkmodel_params {
    const char *arch;  /* "llama", "qwen3" or "qwen3moe"; default "qwen3" */
    /* Tensor types, as llama-quantize names its outputs: "F32", "F16",
     * "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K" put every matrix in
     * that type; "Q4_K_M" / "Q5_K_M" mix like llama.cpp (output and, in
     * the first and last eighth of the layers and every third between,
     * attn_v and ffn_down in Q6_K). Norms and the MoE router stay F32. */
    const char *ftype; /* default "F32" */
    /* A GGUF whose tokenizer.* keys are copied (e.g. the real Qwen2
     * vocabulary); n_vocab is then its token count. NULL: no tokenizer
     * is written and n_vocab is used. */
    const char *vocab_path;
    int n_vocab;       /* without vocab_path; default 512 */
    int n_ctx;         /* context_length; default 4096 */
    int n_layer;       /* default 2 */
    int n_embd;        /* default 256 */
    int n_head;        /* default 4 */
    int n_head_kv;     /* default 2 */
    int head_dim;      /* default 64 */
    int n_ff;          /* dense FFN width (also written for MoE); default 512 */
    int n_expert;      /* qwen3moe: default 4 */
    int n_expert_used; /* qwen3moe: default 2 */
    int n_ff_exp;      /* qwen3moe: default 256 */
    float rms_eps;     /* default 1e-6 */
    float rope_base;   /* default 1e6 (qwen3), 1e4 (llama) if 0 */
    int tied_output;   /* 1: no output.weight (the head is token_embd) */
    uint64_t seed;     /* default 1 */
    /* Per-tensor overrides after the ftype, as llama-quantize's
     * --tensor-type: "NAME=TYPE,NAME=TYPE" where NAME is a tensor name
     * without "blk.N." and ".weight" (attn_v, ffn_down_exps, output,
     * token_embd) and TYPE one of the single types above. NULL: none. */
    const char *tensor_types;
    /* A small trained qwen3 GGUF whose function the written model computes
     * at this shape's cost (modelfile/mkembed.c): its weights in the first
     * rows and columns and layers, zeros elsewhere (a zero layer is the
     * identity), norms rescaled for the wider width, rotary dimensions
     * spread so their frequencies match; its tokenizer padded with unused
     * tokens to n_vocab. Rope base, eps, context and tied output come from
     * it; vocab_path and seed are unused. Needs every size at least the
     * small one's, head_dim a multiple of its, and the same query heads per
     * key head. NULL: random weights. */
    const char *embed_path;
} hx_mkmodel_params;

hx_mkmodel_params hx_mkmodel_default_params(void);

/* Writes the model to path (through the GGUF writer and hx_out; path the
 * same file as vocab_path or embed_path is refused). Errors:
 * HX_ERR_INVALID for unknown arch/ftype or inconsistent shapes (named,
 * e.g. a K-quant row that is not a multiple of 256), the vocab file's
 * and the writer's errors otherwise; message in err. */
int hx_mkmodel_write(const hx_mkmodel_params *p, const char *path,
                     hx_err *err);

#endif /* HX_MODEL_WRITE_H */
