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

/* ---- a model's weights under a byte budget (wcache.c) ---- */
/* The weight cache of a model whose weights exceed a memory budget: what
 * every token uses is copied once into owned memory (attention, norms,
 * the MoE router, the output head); the rest lives in the file and
 * passes through a fixed number of slots filled by I/O threads with pread
 * (O_DIRECT where the file system allows it, so the page cache keeps
 * nothing):
 * - MoE: an item is one expert of one layer (its gate, up and down
 *   matrices); each layer has its own slots, evicted least recently used.
 * - Dense: an item is one layer, or a run of the output head's rows; a
 *   token walks them all in order, so the first items that fit stay
 *   resident ("pinned") and the others stream through a ring of slots,
 *   each read while the one before it computes.
 * Items are read into the same bytes the file holds, so the products
 * using them, the inference's tokens and the trainer's gradients, are
 * those of an uncapped run. A context makes one for a --max-memory below
 * its weights (hx_ctx_new); the trainer for a weight budget
 * (hx_trainer_set_weight_budget). */
typedef struct hx_wcache hx_wcache;

/* How a memory budget for weights is spent (hx_wc_plan_make). */
typedef struct hx_wc_plan {
    size_t resident;   /* owned copies: what every token uses, pinned items */
    size_t cache;      /* slots */
    size_t min_cache;  /* the fewest slots it can run with, in bytes */
    int n_items;       /* experts (all layers), or layers + head runs */
    int n_pinned;      /* dense: items held resident */
    int n_slots;       /* all slots */
    int slots_min;     /* MoE: slots of each layer */
    int head_rows;     /* dense: rows of a head run */
} hx_wc_plan;

/* Counters of a cache's life (hx_wc_stats). */
typedef struct hx_wc_stats {
    uint64_t uses;           /* items a computation used (resident ones too) */
    uint64_t misses;         /* reads started (prefetches included) */
    uint64_t bytes_read;     /* from the file, alignment included */
    uint64_t items_read;
    size_t held, held_peak;  /* bytes of slots holding or reading an item */
    size_t budget;           /* bytes of all slots: held never exceeds it */
    double wait_s;           /* the compute thread's time waiting on reads */
} hx_wc_stats;

/* The plan for model m within `budget` bytes of weights: HX_OK, or
 * HX_ERR_RANGE when the budget is below resident + min_cache (then out
 * still holds those two). */
int hx_wc_plan_make(const hx_model *m, size_t budget, hx_wc_plan *out);

/* Creates the cache of plan p (from hx_wc_plan_make) on m, borrowed: the
 * resident copies are read now. Errors: HX_ERR_IO (a read failed, named),
 * HX_ERR_NOMEM, HX_ERR_UNSUPPORTED for a model from a buffer whose
 * weights cannot be read back. */
int hx_wc_new(const hx_model *m, const hx_wc_plan *p, hx_wcache **out,
              hx_err *err);
void hx_wc_free(hx_wcache *wc); /* NULL is a no-op */

/* Matrix `kind` of layer il (as hx_model_weight) as the cache holds it: a
 * view (borrowed, valid while wc lives) whose data is the owned copy; NULL
 * for what the cache streams (the experts, the embedding unless it is the
 * head, a dense model's streamed layers) or does not know. */
const hx_wmat *hx_wc_weight(const hx_wcache *wc, int il, int kind);

/* MoE: the bytes of expert e of layer il, its gate, up and down matrices,
 * into mats[0..3) (each laid out as matrix e of the model's expert tensor)
 * and held (never evicted) until hx_wc_expert_put: read now unless a slot
 * holds it. cnt (n_expert, or NULL): the experts after e in direction dir
 * (+1: x > e upward, -1: x < e downward) with cnt[x] > 0 are the next the
 * caller will get, and are read ahead into the layer's slots beside e's.
 * (Passes that alternate their direction find the last ones of the pass
 * before still there: in one direction, LRU would evict each expert just
 * before its next use.) One expert held at a time, by one thread; a
 * failed read leaves stale bytes and is reported by hx_wc_error. */
void hx_wc_expert_get(hx_wcache *wc, int il, int e, const int32_t *cnt, int dir,
                      const void *mats[3]);
void hx_wc_expert_put(hx_wcache *wc, int il, int e);

/* Rows tok[0, n) of the token embedding, dequantized into x (n, n_embd):
 * from the resident head when it is the embedding, else read from the
 * file (a failed read leaves its row and is reported by hx_wc_error). */
void hx_wc_embed_rows(hx_wcache *wc, const int32_t *tok, int n, float *x);

/* The first error of a read since the last hx_wc_clear_error (message in
 * *msg), or HX_OK. A pass that met one computed on stale bytes and must be
 * discarded. */
int hx_wc_error(const hx_wcache *wc, const char **msg);
void hx_wc_clear_error(hx_wcache *wc);

void hx_wc_stats_get(const hx_wcache *wc, hx_wc_stats *out);

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
