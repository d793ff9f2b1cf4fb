/* engine_ext.h: the engine's extension API, for the modules built on its
 * internals rather than on its public calls: the trainer (lora/) and the
 * model-file tools (modelfile/). A loaded model's weights viewed in place,
 * the thread pool and the kernels (threadpool.h, kernels.h: instruction
 * sets, activation quantization, matmul; exp_avx512.h: e^x in AVX-512),
 * the exact reference forward pass (exact.h), and the byte-level BPE
 * conventions the vocabulary trainer shares with the tokenizer.
 * Applications use engine.h only. */
#ifndef HX_ENGINE_EXT_H
#define HX_ENGINE_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/exact.h"
#include "engine/exp_avx512.h"
#include "engine/kernels.h"
#include "engine/threadpool.h"

/* ---- a loaded model's weights, in place ---- */
/* A weight matrix used in place: rows of `cols` elements of `type`, for a
 * 3-D expert tensor `n_mat` matrices of `rows` rows each, back to back. */
typedef struct hx_wmat {
    const void *data; /* into the mapping; NULL when the tensor is absent */
    int type;         /* hx_type */
    int64_t cols;     /* ne[0]: the input width K */
    int64_t rows;     /* ne[1]: the output width M */
    int64_t n_mat;    /* ne[2]: experts (1 for a plain matrix) */
    size_t row_bytes;
} hx_wmat;

/* Pointer to matrix e of an expert tensor. */
static inline const void *hx_wmat_at(const hx_wmat *w, int64_t e)
{
    return (const char *)w->data + (size_t)e * (size_t)w->rows * w->row_bytes;
}
/* Row r of matrix e of w (e = 0 for a plain matrix). The trainer reads
 * frozen weights through these two only, so that a weight cache can
 * stand behind them. */
static inline const void *hx_wmat_row(const hx_wmat *w, int64_t e, int64_t r)
{
    return (const char *)hx_wmat_at(w, e) + (size_t)r * w->row_bytes;
}

/* The matrices of a model: the token embedding and output head (the
 * model's, whatever the layer), a layer's attention and dense FFN, and a
 * MoE layer's router and expert tensors (n_mat experts each). */
enum {
    HX_WEIGHT_TOK_EMBD, HX_WEIGHT_OUTPUT, /* (n_vocab, n_embd); OUTPUT is
                                             TOK_EMBD's data when tied */
    HX_WEIGHT_Q, HX_WEIGHT_K, HX_WEIGHT_V, HX_WEIGHT_O,
    HX_WEIGHT_FFN_GATE, HX_WEIGHT_FFN_UP, HX_WEIGHT_FFN_DOWN,
    HX_WEIGHT_ROUTER, HX_WEIGHT_GATE_EXPS, HX_WEIGHT_UP_EXPS, HX_WEIGHT_DOWN_EXPS,
};
/* Matrix `kind` of layer il (borrowed, valid while m lives; its data is
 * NULL where the model has none, such as the FFN of a MoE layer); NULL for
 * a kind or a layer out of range. */
const hx_wmat *hx_model_weight(const hx_model *m, int il, int kind);
/* The F32 gains: a layer's attention and FFN norms (n_embd), its query and
 * key norms (head_dim; qwen3), and the output norm (the model's). */
enum { HX_NORM_ATTN, HX_NORM_FFN, HX_NORM_Q, HX_NORM_K, HX_NORM_OUTPUT };
/* Gain vector `kind` of layer il (borrowed, valid while m lives), or NULL
 * where the model has none or for a kind or layer out of range. */
const float *hx_model_norm(const hx_model *m, int il, int kind);
/* 1 / the model's linear RoPE scaling factor (1: no scaling). */
float hx_model_rope_freq_scale(const hx_model *m);

/* MoE routing of one token from its router logits p (n_expert, replaced by
 * the softmax): the n_used best experts into sel (best first) and their
 * weights into w, renormalised to sum 1 when norm. (engine/moe.c; the trainer routes as inference does) */
void hx_moe_route(float *p, int n_expert, int n_used, int norm, int32_t *sel,
                  float *w);

/* ---- byte-level BPE, as the tokenizer reads it (vocab_bpe.c) ---- */
/* Pre-tokenizers of byte-level BPE vocabularies. */
enum { HX_PRE_QWEN2 = 1, HX_PRE_LLAMA3 = 2 };
/* The pre-tokenizer regex of a HX_PRE_* (PCRE2 syntax, UTF and UCP), also
 * used by the BPE trainer (modelfile/vocab_train.c) so both split text
 * alike. */
const char *hx_vocab_bpe_regex(int pre_type);
/* GPT-2's byte alphabet: the code point that stands for raw byte b. */
uint32_t hx_vocab_byte_to_cpt(unsigned char b);
/* Decodes one code point as llama.cpp does: lax (overlongs and surrogates
 * pass), an invalid byte gives U+FFFD and advances by one. */
uint32_t hx_vocab_cpt_decode(const unsigned char *s, size_t n, size_t *off);
/* Encodes cpt (<= 0x10FFFF, surrogates allowed) into out; returns bytes. */
int hx_vocab_cpt_encode(uint32_t cpt, char *out);

#endif /* HX_ENGINE_EXT_H */
