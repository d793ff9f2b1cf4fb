/* model.h: transformer models from GGUF files (llama, qwen2, qwen3,
 * qwen3moe) and inference contexts (KV cache, scratch, threads). Part of
 * engine.h, the engine's public API. */
#ifndef HX_MODEL_H
#define HX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/gguf.h"

typedef struct hx_vocab hx_vocab; /* engine/vocab.h */

/* ---- model: mapped weights, hyperparameters, vocabulary ----
 * Weights are used in place from the read-only mapping of the file (never
 * copied). A model is immutable after loading and may be shared by several
 * contexts, also from several threads (one context per thread). */
typedef struct hx_model hx_model;

typedef struct hx_model_params {
    int check_tensors; /* 1: also scan weights (floats; quantized scales) for NaN/Inf */
    int no_vocab;      /* 1: do not load the tokenizer (hx_model_vocab = NULL) */
} hx_model_params;
hx_model_params hx_model_default_params(void);

/* RoPE styles, numbered as llama.cpp numbers them. */
enum { HX_ROPE_NORM = 0, HX_ROPE_NEOX = 2 };

typedef struct hx_hparams {
    char arch[32];     /* "llama", "qwen2", "qwen3", "qwen3moe" */
    int n_vocab;       /* rows of token_embd */
    int n_ctx_train;
    int n_embd;        /* model width */
    int n_layer;
    int n_head;        /* query heads */
    int n_head_kv;     /* key/value heads (GQA: n_head % n_head_kv == 0) */
    int head_dim;      /* per head, for q, k and v */
    int n_ff;          /* dense FFN width (0 for qwen3moe) */
    int n_expert;      /* 0 for dense models */
    int n_expert_used; /* top-k */
    int n_ff_exp;      /* width of one expert's FFN */
    int expert_weights_norm; /* 1: top-k router weights renormalised to sum 1 */
    float rms_eps;
    float rope_base;   /* rope frequency base */
    int rope_type;     /* HX_ROPE_NORM or HX_ROPE_NEOX */
    int tied_output;   /* 1: no output.weight, the head is token_embd */
    int has_qk_norm;   /* qwen3/qwen3moe: RMSNorm on each q and k head */
    int has_qkv_bias;  /* qwen2: biases on q, k, v */
} hx_hparams;

/* Loads a model from a GGUF file. Errors (with a message in err):
 * HX_ERR_UNSUPPORTED for an unknown architecture or a tensor type Hearth
 * cannot compute with; HX_ERR_FORMAT for a missing tensor or key (named) or
 * a tensor of the wrong shape (named, expected and found); the GGUF reader's
 * and tokenizer's errors otherwise. On success *out is owned by the caller:
 * free with hx_model_free after every context on it is freed. */
int hx_model_load(const char *path, const hx_model_params *p, hx_model **out,
                  hx_err *err);
/* The same over a GGUF image in memory (not copied: it must outlive the
 * model); for tests and the fuzzer. */
int hx_model_load_buffer(const void *data, size_t size,
                         const hx_model_params *p, hx_model **out, hx_err *err);
void hx_model_free(hx_model *m); /* NULL is a no-op */

/* Borrowed pointers, valid while the model lives. Vocab is NULL when the
 * file has no tokenizer or no_vocab was set. */
const hx_vocab *hx_model_vocab(const hx_model *m);
const hx_gguf *hx_model_gguf(const hx_model *m);
const hx_hparams *hx_model_hparams(const hx_model *m);
size_t hx_model_size_bytes(const hx_model *m); /* bytes of all weights */
int64_t hx_model_n_params(const hx_model *m);  /* elements of all weights */
/* Writes general.architecture, general.name and the architecture's
 * hyperparameter keys (llama.cpp's names; the expert keys when
 * hp->n_expert > 0) into w (engine/model_write.c). */
int hx_model_set_hparams(hx_gguf_writer *w, const hx_hparams *hp, const char *name);

/* ---- context: KV cache (F16 as llama.cpp's default, or F32), scratch,
 * threads ---- */
typedef struct hx_ctx hx_ctx;

typedef struct hx_ctx_params {
    int n_ctx;     /* KV cache positions; 0 = min(n_ctx_train, 4096) */
    int n_batch;   /* max tokens per internal pass (longer calls are split);
                    * 0 = 512, at most n_ctx */
    int n_threads; /* 0 = number of online CPUs */
    int kv_f32;    /* 1: keep the KV cache in float (llama.cpp type_k/v F32):
                    * twice the memory, no fp16 rounding */
    /* Optional observer of matmul inputs (calibration: hearth quantize
     * --calibrate). When set, called on the decoding thread before each
     * matmul with the weight's GGUF tensor name and its input x: n_tokens
     * rows of n_cols floats. expert is -1 for a plain matrix; for a 3-D
     * MoE expert tensor it is the expert whose matrix multiplies x (one
     * call per routed token). NULL (the default) costs nothing. */
    void (*act_hook)(void *user, const char *tensor, int expert,
                     const float *x, int n_tokens, int64_t n_cols);
    void *act_hook_user;
    /* The KV cache lives in pages of HX_KV_PAGE_POSITIONS positions (all
     * layers), allocated as the context fills. */
    int kv_q8;          /* 1: 8-bit KV cache: Q8_0 blocks (32 values, fp16
                         * scale), llama.cpp's type_k/v q8_0; 0.53x the bytes
                         * of F16; head_dim must be a multiple of 32 */
    size_t kv_max_bytes; /* cap on KV cache bytes; 0 = none but n_ctx. When
                         * reached, hx_decode returns HX_ERR_FULL */
    size_t max_bytes;   /* cap on everything: mapped weights + KV cache +
                         * scratch (hearth --max-memory); the KV cache gets
                         * what is left; 0 = none. Below the weights, the
                         * weights every token uses are copied, the others
                         * (experts, or layers) read from the file into a
                         * cache that fills what is left after a KV cache of
                         * n_ctx positions (hx_ctx_mem.streamed); the model
                         * must be a file */
    int kv_spill;       /* 1: at the cap the oldest pages go to a file in
                         * kv_spill_dir instead of HX_ERR_FULL, and
                         * attention reads them back from it (checked), so
                         * the logits are those of an unbounded cache; the
                         * cap then bounds the memory, n_ctx the positions.
                         * The file (mode 0600, never through a link) is
                         * made at the first spill and removed with the
                         * context. The cap must hold two pages; n_batch is
                         * lowered to (pages - 1) * HX_KV_PAGE_POSITIONS so
                         * that every pass's pages fit in memory. 0: none */
    const char *kv_spill_dir; /* NULL: $XDG_CACHE_HOME/hearth/spill */
} hx_ctx_params;
hx_ctx_params hx_ctx_default_params(void);
#define HX_KV_PAGE_POSITIONS 64

/* Memory a context would use (bytes), from the same formulas hx_ctx_new
 * allocates by. kv_total is for the whole n_ctx (or the cap, whichever is
 * less), rounded up to pages. */
typedef struct hx_ctx_mem {
    size_t weights;       /* mapped tensor data (hx_model_size_bytes) */
    size_t kv_per_token;  /* K + V of one position, all layers */
    size_t kv_page;       /* one page */
    size_t kv_total;      /* what the KV cache may grow to in memory (with
                           * kv_spill, the rest of n_ctx goes to disk) */
    size_t scratch;       /* activations, attention scratch, one logits row */
    size_t total;         /* weights + kv_total + scratch */
    int n_ctx;            /* positions, after defaults */
    int n_ctx_fit;        /* positions the KV cap leaves room for (with
                           * kv_spill: n_ctx) */
    /* A cap (max_bytes) below the weights: they are read from the file as
     * needed into a cache of fixed size; weights = w_resident + w_cache */
    int streamed;
    size_t w_resident;    /* owned copies of what every token uses (and of
                           * the layers of a dense model that fit) */
    size_t w_cache;       /* slots for experts (MoE) or streamed layers */
    int w_items;          /* experts of all layers, or layers + head runs */
    int w_slots;          /* slots */
    int w_pinned;         /* dense: items resident */
} hx_ctx_mem;
/* Fills *out for model m and params p (NULL: defaults). HX_ERR_RANGE (with
 * a message) when max_bytes leaves no room for one KV page. */
int hx_ctx_memory(const hx_model *m, const hx_ctx_params *p, hx_ctx_mem *out,
                  hx_err *err);
/* Bytes of KV cache in memory (resident pages; spilled ones not). */
size_t hx_ctx_kv_bytes(const hx_ctx *c);
/* Where the KV cache's pages are, and the spill's traffic so far. */
typedef struct hx_kv_stats {
    int pages;             /* pages holding positions, in memory or spilled */
    int resident;          /* pages in memory */
    int spilled;           /* pages in the spill file */
    uint64_t spill_writes; /* pages written to the spill file */
    uint64_t page_ins;     /* spilled pages read back whole (to be written
                            * again after a truncation) */
    uint64_t slice_reads;  /* K or V rows of one head and page read back by
                            * attention */
    uint64_t read_bytes;   /* bytes of those */
} hx_kv_stats;
void hx_ctx_kv_stats(const hx_ctx *c, hx_kv_stats *out);

/* ---- prefill in slices: bounded work per call, cancellable ---- */
typedef struct hx_prefill_params {
    int slice;          /* tokens per pass; 0 = n_batch */
    int max_tokens;     /* at most this many tokens per call; 0 = all */
    double max_ms;      /* return after the slice that passes this many
                         * milliseconds; 0 = no limit */
    int (*cancel)(void *user); /* checked before each slice: nonzero stops */
    void *cancel_user;
    int whole_prompt;   /* 1: the tokens end a prompt whose first n_past
                         * positions are cached (from memory or the prefix
                         * cache): attention takes the path a prefill of the
                         * whole prompt takes, so that the rows' numbers are
                         * a cold prefill's (and a short suffix is not
                         * computed on the slower few-token path); 0:
                         * llama.cpp's rule, by each pass's size */
} hx_prefill_params;
hx_prefill_params hx_prefill_default_params(void);
/* Decodes a prefix of tokens[0..n) in slices as hx_decode would (the
 * tokens done stay in the cache; *n_done says how many): HX_OK when all n
 * are done (then the logits of the last token are kept) or a budget
 * (max_tokens, max_ms) stopped it with *n_done < n: call again with the
 * rest. HX_ERR_CANCELLED when cancel said stop; hx_decode's errors
 * (HX_ERR_FULL is checked for all n tokens before anything runs). */
int hx_prefill(hx_ctx *c, const int32_t *tokens, int n,
               const hx_prefill_params *p, int *n_done);

/* ---- inference in steps: slices of bounded time ----
 * A call advances by a time budget and returns, so that a UI thread can
 * drive it between frames (or an agent thread yield, re-read the device's
 * state, or stop). It stops between pieces of a pass: between layers, and
 * inside a layer between rows of a matmul or tasks of the attention; the
 * pieces are sized by their measured times to what is left of the budget.
 * The numbers are those of hx_decode (the same operations in the same
 * order). Unsplit pieces remain: the embedding, one MoE half-layer, and a
 * read of the weight cache. */
/* Begins a call as hx_decode would (tokens copied; nothing runs yet), in
 * passes of at most slice tokens (0: n_batch): hx_decode's checks and
 * errors, and HX_ERR_STATE when a call is already pending. Until the call
 * ends, hx_decode, hx_prefill, hx_ctx_prefix_load and hx_step_begin on c
 * fail with HX_ERR_STATE; hx_ctx_truncate (and so hx_ctx_set_adapters)
 * aborts it. */
int hx_step_begin(hx_ctx *c, const int32_t *tokens, int n, int logits_all,
                  int slice);
/* Runs the pending call for about budget_ms milliseconds (at least one
 * piece of work). *done: 1 when the call is complete (its logits as after
 * hx_decode), 0 when only advanced. HX_ERR_STATE without a pending call;
 * HX_ERR_IO when a read of the weight cache failed (the call is over, the
 * pass in progress dropped). */
int hx_step(hx_ctx *c, double budget_ms, int *done);
/* Ends a pending call early: completed passes stay in the cache
 * (hx_ctx_n_past), the one in progress is dropped. No-op without one. */
void hx_step_abort(hx_ctx *c);
/* Runs every later pass on c (hx_decode, hx_prefill, speculation) in
 * slices of budget_ms, calling fn(user) between slices (fn NULL: none);
 * budget 0: whole passes again. fn must not use c but hx_ctx_set_threads.
 * fn returning nonzero stops the call within the slice: the pass in
 * progress is dropped (passes done stay cached) and the call returns
 * HX_ERR_CANCELLED. */
void hx_ctx_set_slicer(hx_ctx *c, double budget_ms, int (*fn)(void *user),
                       void *user);

/* Threads working from the next pass or slice on, at most the context's
 * (n_threads); the rest sleep. The numbers stay those of n_threads.
 * Returns the count set. Not from another thread during a pass. */
int hx_ctx_set_threads(hx_ctx *c, int n);

/* ---- prefix caches on disk ----
 * Files of cached positions (K and V of every layer) keyed by the model's
 * identity (a hash of its GGUF header and samples of every tensor), the
 * context's adapter set and the token ids, in dir (NULL:
 * $XDG_CACHE_HOME/hearth/prefix). Versioned header and checksum; a file
 * that is corrupt, of another version, model, adapter set or cache type
 * is ignored. */
/* Loads the cached file sharing the longest token prefix with tokens[0..n)
 * into an empty context (n_past == 0), at most max_pos positions; *n_loaded
 * gets the positions now cached (0 when nothing matched: not an error).
 * Errors only for a bad call (HX_ERR_STATE when n_past != 0). */
int hx_ctx_prefix_load(hx_ctx *c, const char *dir, const int32_t *tokens,
                       int n, int max_pos, int *n_loaded);
/* Saves cached positions [0, n) (n <= n_past; tokens their ids) unless a
 * file with exactly these tokens exists, atomically (temporary file,
 * fsync, rename); then evicts the least recently used files until the
 * directory holds at most max_bytes (0: 1 GiB). Message in
 * hx_ctx_errmsg on failure. */
int hx_ctx_prefix_save(hx_ctx *c, const char *dir, const int32_t *tokens,
                       int n, size_t max_bytes);

/* Creates a context on m (borrowed: m must outlive it). */
int hx_ctx_new(hx_model *m, const hx_ctx_params *p, hx_ctx **out, hx_err *err);
void hx_ctx_free(hx_ctx *c); /* NULL is a no-op */

/* Runs tokens[0..n) at positions n_past.. and appends them to the KV cache.
 * Precision follows llama.cpp's CPU defaults (F16 cache, flash attention):
 * passes of >= 64 tokens compute attention in F32; smaller ones round Q to
 * fp16 and accumulate V in fp16, as llama.cpp's one-query path does (a
 * single-token pass over 512+ cached cells is split per thread as there:
 * same numbers when both use the same thread count). With
 * kv_f32 every pass is F32 (llama.cpp with type_k/v F32, no flash attn).
 * Calls longer than n_batch run as several passes of n_batch.
 * logits_all: keep the logits of every token of this call, else only of the
 * last. Returns HX_OK; HX_ERR_FULL if n_past + n would exceed n_ctx or the
 * KV cache's byte cap (nothing is run); HX_ERR_RANGE for a token id outside the vocabulary; HX_ERR_INVALID
 * for n <= 0. With kv_spill, after some passes may have run (hx_ctx_n_past
 * says what is cached): HX_ERR_FULL when a page could not be spilled,
 * HX_ERR_IO when a spilled page read back was damaged (the positions from
 * its start are dropped: decode them again). The message is in
 * hx_ctx_errmsg. */
int hx_decode(hx_ctx *c, const int32_t *tokens, int n, int logits_all);
/* ---- several sequences in one pass ----
 * One forward pass advancing several independent sequences, each in its
 * own context (its KV cache, position and logits): every weight matrix is
 * read once for all of their tokens, attention runs per sequence over its
 * own cache. Each token's logits equal bit for bit those of its sequence
 * decoded alone one token per hx_decode (and those of speculation's
 * passes, engine/spec.h), on the thread count the contexts share. */
typedef struct hx_seq_step {
    hx_ctx *c;            /* the sequence's context (borrowed) */
    const int32_t *tok;   /* n >= 1 tokens to append (borrowed for the call) */
    int n;
    int out_from;         /* logits of tokens [out_from, n) are kept, as
                             hx_decode_rows does; in [0, n] */
    int rc;               /* out: HX_OK, or this sequence's error (message
                             in hx_ctx_errmsg(c)) */
} hx_seq_step;
/* Runs s[0, n_seqs) together: each sequence as hx_decode_rows(s->c,
 * s->tok, s->n, s->out_from) would (its checks and errors, its logits in
 * its context, n_past advanced by n), in passes of whole sequences of at
 * most min(n_batch, 63) tokens in all, each on the scratch and threads of
 * its first sequence's context. The contexts must be distinct, with no
 * stepped call pending, on one model with one cache type, thread count
 * and adapter set, else that sequence fails with HX_ERR_INVALID and the
 * others run. A sequence with none to share a pass with (alone, or
 * longer than 63 tokens) runs as hx_decode_rows would. Returns HX_OK
 * when every sequence's rc is HX_OK, else the first error. */
int hx_decode_seqs(hx_seq_step *s, int n_seqs);
/* Routes hx_decode (and speculation's passes) on c to fn(user, c, tokens,
 * n, out_from), which owes the result hx_decode_rows would give: a
 * scheduler gathers several contexts' decodes there into hx_decode_seqs.
 * NULL: c decodes itself again. Prefill and stepped calls are not routed.
 * fn is called on the decoding thread; user is borrowed. fn decodes
 * through hx_decode_seqs (hx_decode on c would come back to it). */
typedef int (*hx_decode_hook_fn)(void *user, hx_ctx *c, const int32_t *tokens, int n,
                                 int out_from);
void hx_ctx_set_decode_hook(hx_ctx *c, hx_decode_hook_fn fn, void *user);

/* Logits (n_vocab floats) of the i-th token of the last hx_decode call, or of
 * its last token when i == -1; NULL if not kept. Valid until the next
 * hx_decode on c. */
const float *hx_ctx_logits(const hx_ctx *c, int i);
int hx_ctx_n_past(const hx_ctx *c);  /* tokens in the KV cache */
int hx_ctx_n_ctx(const hx_ctx *c);   /* capacity */
/* Drops cached positions >= n_keep (prefix reuse); n_keep beyond n_past is
 * clamped. */
void hx_ctx_truncate(hx_ctx *c, int n_keep);
const char *hx_ctx_errmsg(const hx_ctx *c);
const hx_model *hx_ctx_model(const hx_ctx *c);

#endif /* HX_MODEL_H */
