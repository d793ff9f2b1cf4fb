/* ctx_int.h: engine-internal layout of an inference context and the
 * functions its parts (ctx.c, forward.c, attention.c, moe.c) share. */
#ifndef HX_CTX_INT_H
#define HX_CTX_INT_H

#include <assert.h>

#include "engine/attn.h"
#include "engine/kernels.h"
#include "engine/model_int.h"
#include "engine/threadpool.h"
#include "engine/wcache_int.h"

/* llama.cpp's CPU flash attention runs batches of at least this many
 * queries in F32 (tiled); smaller ones round Q to F16 and accumulate V in
 * F16. Hearth does the same so that both agree number for number. */
#define FA_TILE_Q 64

/* KV cache pages: page p holds positions [p*HX_KV_PAGE, (p+1)*HX_KV_PAGE)
 * of every layer: K rows (n_layer, n_head_kv, HX_KV_PAGE) then V rows the
 * same, each row head_dim values of the cache type. A multiple of the
 * attention tile, so that a key tile never crosses a page. */
#define HX_KV_PAGE HX_KV_PAGE_POSITIONS
/* Cache row types (hx_ctx.kv_type). Q8 rows are Q8_0 blocks. */
enum { HX_KV_F16 = 0, HX_KV_F32 = 1, HX_KV_Q8 = 2 };

/* A pass in progress (forward.c): B tokens at positions n_past.., run as
 * a sequence of units (the embedding, five per layer, the head), each of
 * which may stop between pieces of its work (rows of a matmul, tasks of
 * the attention) and resume where it stopped. */
typedef struct hx_pass {
    const int32_t *tok;
    int B, out_from;
    float *logits;
    int unit;        /* next unit to run */
    int begun;       /* the unit's setup (norm, quantization) is done */
    int64_t done;    /* rows (matmul) or tasks (attention) of it done */
    /* a pass over several sequences (hx_decode_seqs): row t's context
     * (its KV cache) and position; NULL: every row is the running
     * context's, at n_past + t (both borrowed, B entries) */
    struct hx_ctx *const *seq;
    const int *pos;
} hx_pass;

/* A call of hx_step_begin in progress (step.c). */
typedef struct hx_call {
    int32_t *tok;    /* owned copy of the call's tokens */
    int n, off, out_from, slice;
    int active;      /* a call is begun and not finished */
    int in_pass;     /* pass holds the pass at off */
} hx_call;

/* Time estimates of the pieces of a pass, measured as they run, for
 * sizing the next piece to what is left of a slice (0: not yet known).
 * By the pass's size: one token (reads weights), a few, a batch (computes). */
enum { HX_RATE_ONE, HX_RATE_FEW, HX_RATE_BATCH, HX_RATE_KINDS };
typedef struct hx_slice_rates {
    double mm[HX_RATE_KINDS][HX_TYPE_COUNT]; /* seconds per multiply-add of a
                                                matmul chunk, by weight type */
    double att[HX_RATE_KINDS]; /* seconds per attention task and cached key */
} hx_slice_rates;

/* The attention of one layer as independent tasks (attention.c). */
typedef struct hx_attn_run {
    struct hx_ctx *c;
    int layer, B, pos0;
    int tq;          /* tiled path: tokens per task */
    int tpt;         /* one-query path: tokens per task (1: a task per token) */
    void (*fn)(void *ctx, int task, int thread);
    int n_tasks, off;
} hx_attn_run;

struct hx_ctx {
    hx_model *m;
    hx_threadpool *tp;
    int n_ctx, n_batch, n_threads, n_past;
    /* 1: every row of a one-query-path pass (B < FA_TILE_Q) splits a long
     * cache as a one-token pass does, so each row's numbers equal that
     * pass's bit for bit (engine/spec.c sets it around its passes); 0:
     * llama.cpp's rule, only B == 1 splits */
    int split_rows;
    /* 1: a pass of any size takes the tiled attention path, as the passes
     * of a whole prompt of at least FA_TILE_Q tokens do (hx_prefill's
     * whole_prompt sets it for the rest of a prompt) */
    int tiled_rows;
    /* 1: attention's tasks as they were before they took several tokens
     * of the 8-bit path at once and skipped a tile's lanes without rows
     * (the reference tests and benches compare with; the same numbers) */
    int attn_before;
    /* paged KV cache (kv.c): pages[0, n_pages) allocated on demand, at
     * most max_pages resident (the byte cap); each page_bytes, K half then
     * V half. With a spill (kvspill.c) a page may be on disk instead:
     * pages[p] is then NULL */
    char **pages;     /* (ceil(n_ctx / HX_KV_PAGE)) owned, NULL until used */
    int n_pages, max_pages;
    int n_resident;   /* pages held in memory */
    struct hx_kv_spill *spill; /* NULL: no spill (HX_ERR_FULL at the cap) */
    int kv_type;      /* HX_KV_* */
    size_t kv_row;    /* bytes of one head row */
    size_t page_bytes;
    int kv_f32;       /* kv_type == HX_KV_F32 */
    /* Adapter-set key: part of the prefix cache's key so that caches made
     * under other adapters never match. "" = no adapters. Whoever attaches
     * adapters to this context writes a stable description here (names
     * and content hashes, scales). */
    char adapter_key[256];
    char model_id[65]; /* prefix.c: model key, computed on first use */
    /* hx_ctx_params.act_hook and its user pointer (NULL: none) */
    void (*act_hook)(void *user, const char *tensor, int expert,
                     const float *x, int n_tokens, int64_t n_cols);
    void *act_hook_user;
    /* attached LoRA adapters (adapter.c); NULL until the first attach */
    struct hx_adapter_set *lora;
    const hx_attn_ops *ao; /* attention primitives for this CPU */
    /* scratch for one pass of up to n_batch (B) tokens */
    float *x;        /* (B, n_embd) residual stream */
    float *xb;       /* (B, n_embd) normed input of a block */
    float *q;        /* (B, n_head*head_dim) */
    float *k, *v;    /* (B, n_head_kv*head_dim) */
    float *att;      /* (B, n_head*head_dim) attention output */
    float *hb, *hb2; /* (B*n_used, n_ff or n_ff_exp) FFN hidden */
    float *eo;       /* (B*n_used, n_embd) MoE expert outputs */
    float *rl;       /* (B, n_expert) router probabilities */
    int32_t *sel;    /* (B, n_used) chosen experts, best first */
    float *selw;     /* (B, n_used) their weights */
    int32_t *ptok;   /* (B*n_used) token of each pair, grouped by expert */
    int32_t *pslot;  /* (B*n_used) pair index of (token, slot) */
    int *moe_idx;    /* (3*n_expert + B*n_used) counts, offsets, identity */
    void *act;       /* (B*n_used, act_row) activations quantized for a matmul */
    size_t act_row;  /* bytes per activation row, enough for every type */
    hx_mm_job *jobs; /* (2*n_expert + 3) one pool run of several matmuls */
    float *scores;   /* (n_threads, scores_stride) attention scratch */
    float *rope_cs;  /* (B, head_dim) cos and sin of each pair's angle */
    float *logits;   /* (n_out, n_vocab) */
    size_t logits_cap; /* floats */
    int n_out;       /* logits rows kept by the last hx_decode */
    int out_first;   /* token index of logits row 0 */
    hx_err err;
    /* weights beyond the memory cap (wcache.c); NULL: all mapped */
    hx_wcache *wc;
    void *act2;      /* (B*n_used, act_row) the experts' down inputs when wc */
    /* benchmark switches (hx_ctx_set_routing): experts drawn uniformly at
     * random instead of the router's; each token's routing to a file */
    int uniform_routing;
    uint64_t route_rng;
    FILE *route_trace;
    /* inference in slices (step.c) */
    hx_pass pass;
    hx_call call;
    hx_slice_rates rates;
    double slice_ms;            /* hx_ctx_set_slicer: budget; 0: whole passes */
    int (*slicer)(void *user);  /* called between slices of a pass */
    void *slicer_user;
    /* hx_ctx_set_decode_hook: hx_decode_rows goes to it (NULL: none) */
    hx_decode_hook_fn decode_hook;
    void *decode_hook_user;
    /* (seq_logits_cap floats) the logits of a pass of hx_decode_seqs run
     * on this context, before they go to each sequence's context */
    float *seq_logits;
    size_t seq_logits_cap;
};

/* The context whose KV cache row t of the running pass uses, and the
 * row's position (hx_pass.seq). */
static inline struct hx_ctx *hx_pass_seq(struct hx_ctx *c, int t)
{
    return c->pass.seq ? c->pass.seq[t] : c;
}
static inline int hx_pass_pos(const struct hx_ctx *c, int t)
{
    return c->pass.seq ? c->pass.pos[t] : c->n_past + t;
}

/* forward.c */
/* A pass over B <= n_batch tokens at positions n_past..; logits of tokens
 * [out_from, B) (none when out_from == B) go to logits (tok and logits
 * borrowed until it ends). hx_pass_start sets it up, hx_pass_run advances
 * it, hx_pass_finish runs it to its end: whole, or with a slicer set
 * (hx_ctx_set_slicer) in slices of slice_ms with the slicer between; 1
 * when the slicer stopped it (dropped), else 0. hx_pass_drop abandons a
 * pass begun (n_past unchanged; a layer of the weight cache left open is
 * closed). */
int hx_pass_finish(hx_ctx *c);
void hx_pass_drop(hx_ctx *c);
void hx_pass_start(hx_pass *p, const int32_t *tok, int B, int out_from,
                   float *logits);
/* Runs units of c->pass until it is complete (1: n_past advanced by B)
 * or hx_time_mono() passes deadline (0; seconds, INFINITY: no limit)
 * after at least one piece of work. */
int hx_pass_run(hx_ctx *c, double deadline);
/* Quantizes B rows of K floats for weights of wtype into c->act. */
void hx_fwd_quantize(hx_ctx *c, int wtype, const float *x, int B, int64_t K);
/* A job over c->act for matrix W of w's shape and type (rows idx or 0..n-1). */
hx_mm_job hx_fwd_job(const hx_ctx *c, const hx_wmat *w, const void *W,
                     const int32_t *idx, int n, float *y);
/* y (n, w->rows) = x (n, w->cols) . w^T */
void hx_fwd_matmul(hx_ctx *c, const hx_wmat *w, const float *x, int n, float *y);
/* Shows the act_hook the input rows of each used expert of the 3-D tensor
 * w: pair p of expert e (first[e] <= p < first[e] + cnt[e]) multiplies
 * row rows[p] of x (w->cols floats per row). Only when c->act_hook. */
void hx_fwd_report_experts(hx_ctx *c, const hx_wmat *w, const float *x,
                           const int32_t *rows, const int *cnt,
                           const int *first);
/* g = silu(g) * u over n elements, split across the pool when large. */
void hx_fwd_swiglu(hx_threadpool *tp, float *g, const float *u, int64_t n);

/* kv.c */
/* Row of head h of layer l at position pos: K (v == 0) or V (v == 1). The
 * page must be resident (hx_kv_reserve makes a pass's pages so). */
static inline char *hx_kv_row(const hx_ctx *c, int v, int l, int h, int pos)
{
    assert((v == 0 || v == 1) && l >= 0 && l < c->m->hp.n_layer && h >= 0 &&
           h < c->m->hp.n_head_kv);
    assert(pos >= 0 && pos / HX_KV_PAGE < c->n_pages && c->pages[pos / HX_KV_PAGE]);
    const size_t i = ((size_t)l * (size_t)c->m->hp.n_head_kv + (size_t)h) *
                         HX_KV_PAGE + (size_t)(pos % HX_KV_PAGE);
    return c->pages[pos / HX_KV_PAGE] + (v ? c->page_bytes / 2 : 0) + i * c->kv_row;
}
/* Sets the cache geometry from the type and the caps (hx_ctx_new). */
int hx_kv_init(hx_ctx *c, const hx_ctx_params *p, hx_err *err);
/* Allocates the pages that positions [0, n_pos) need: HX_ERR_FULL (message
 * in c->err) when the cap does not allow them, HX_ERR_NOMEM. */
int hx_kv_reserve(hx_ctx *c, int n_pos);
void hx_kv_free(hx_ctx *c);
/* Bytes of K + V for one position and for one page under params p. */
void hx_kv_geometry(const hx_hparams *hp, const hx_ctx_params *p,
                    size_t *per_token, size_t *page);
/* Stores the K and V rows (d floats each) of head h, layer l, at pos. */
void hx_kv_store(hx_ctx *c, int l, int h, int pos, const float *k,
                 const float *v);
/* nk rows of the cache's type at rows as floats: rows itself in an F32
 * cache, else converted into buf (nk*d floats). */
const float *hx_kv_rows_f32(const hx_ctx *c, const char *rows, int nk, float *buf);

/* The K and V rows of KV head h, layer l, in page p, for attention: row
 * pos % HX_KV_PAGE of the page at k (or v) + (pos % HX_KV_PAGE) * kv_row.
 * A resident page is read in place; a spilled one is read back (checked)
 * into thread's buffer, valid until its next span. */
typedef struct hx_kv_span {
    const char *k, *v;
} hx_kv_span;
hx_kv_span hx_kv_spill_span(const hx_ctx *c, int l, int h, int p, int thread);
static inline hx_kv_span hx_kv_span_of(const hx_ctx *c, int l, int h, int p,
                                       int thread)
{
    const char *pg = c->pages[p];
    if (!pg) return hx_kv_spill_span(c, l, h, p, thread);
    const size_t i = ((size_t)l * (size_t)c->m->hp.n_head_kv + (size_t)h) *
                     HX_KV_PAGE * c->kv_row;
    return (hx_kv_span){pg + i, pg + c->page_bytes / 2 + i};
}

/* kvspill.c: pages to a file in the cache folder when the cap is reached */
/* Sets up spilling for c (the file is made at the first spill): per-thread
 * read buffers; HX_ERR_RANGE when the cap holds fewer than two pages. */
int hx_kv_spill_new(hx_ctx *c, const hx_ctx_params *p, hx_err *err);
/* Closes and removes the spill file. */
void hx_kv_spill_free(hx_ctx *c);
/* hx_kv_reserve with a spill: makes the pages of positions [n_past, n_pos)
 * resident, spilling the oldest resident pages before them (and reading
 * back a spilled page that holds positions below n_past). HX_ERR_FULL when
 * a spill cannot be written (the cache then stays as it was); HX_ERR_IO
 * when a page read back is damaged (n_past then drops to its start). */
int hx_kv_spill_reserve(hx_ctx *c, int n_pos);
/* The first page found damaged by an attention read since the last call
 * (or -1), cleared. */
int hx_kv_spill_damaged(hx_ctx *c);
/* Copies slice s of page p (resident or spilled, checked) into buf
 * (HX_KV_PAGE rows): 0, or -1 when a spilled page is damaged or unread. */
int hx_kv_page_slice(const hx_ctx *c, int p, int s, char *buf);
/* Bytes a spill adds to a context's scratch (read buffers, sums). */
size_t hx_kv_spill_scratch(const hx_hparams *hp, const hx_ctx_params *p,
                           int n_ctx, int n_threads);
/* Test hook: called between a spilled page's data and its record header
 * (a crash there leaves a torn record). NULL in normal runs. */
extern void (*hx_kv_spill_test_hook)(int page);
/* Test switch: 1 makes spill files named (locked, removed at the end), as
 * where the file system has no O_TMPFILE. */
extern int hx_kv_spill_named;

/* adapter.c */
/* Adds the attached adapters' scaled B (A x) to y (B, w->rows), the
 * product of x (B, w->cols) by w; nothing when no adapter adapts w. */
void hx_adapter_apply(hx_ctx *c, const hx_wmat *w, const float *x, int B,
                      float *y);
void hx_adapter_set_free(struct hx_adapter_set *s); /* NULL is a no-op */

/* attention.c */
/* Floats of per-thread attention scratch for a model's shape. */
size_t hx_attn_scratch(const hx_hparams *hp);
/* Attention of layer l for the pass's B tokens at pos0..: c->q and the
 * cache into c->att, as r->n_tasks independent tasks; hx_attention_range
 * runs tasks [t0, t1) of them on the pool (all of them: the whole layer). */
void hx_attention_plan(hx_ctx *c, int l, int B, int pos0, hx_attn_run *r);
void hx_attention_range(hx_attn_run *r, int t0, int t1);

/* moe.c */
/* The MoE FFN of layer L on c->xb (B, n_embd), result into c->xb, in
 * pieces run in order: hx_moe_begin (router, grouping by expert),
 * hx_moe_up for ranges of experts covering [0, n_expert) (gate, up and
 * SwiGLU of their pairs), hx_moe_down_begin, hx_moe_down for ranges
 * covering them again, hx_moe_end (the weighted sum). The pairs of expert
 * x are c->moe_idx[x] (counts). With a weight cache, hx_moe_begin runs
 * all the experts (hx_wc_moe) and the ranges do nothing. */
void hx_moe_begin(hx_ctx *c, const hx_layer *L, int B);
void hx_moe_up(hx_ctx *c, const hx_layer *L, int x0, int x1);
void hx_moe_down_begin(hx_ctx *c, const hx_layer *L, int B);
void hx_moe_down(hx_ctx *c, const hx_layer *L, int x0, int x1);
void hx_moe_end(hx_ctx *c, int B);

/* Benchmark switches of the MoE FFN: uniform: every token's experts are
 * drawn uniformly at random (seeded; the router's weights are kept), the
 * worst case for a weight cache, which changes the output of any model
 * whose experts differ; trace: each token's experts of each layer are
 * appended as a line "layer e1 e2 ..." (NULL: none). */
void hx_ctx_set_routing(hx_ctx *c, int uniform, uint64_t seed, FILE *trace);

/* wcache.c: the context's side of the weight cache (c->wc set) */
/* Dense: layer l's weights are in memory between begin and end. */
void hx_wc_layer_begin(hx_ctx *c, int l);
void hx_wc_layer_end(hx_ctx *c, int l);
/* The experts of layer L for the grouped pairs (moe.c's cnt, first and
 * iota) on c->xb: gate, up and SwiGLU into c->hb, down into c->eo. */
void hx_wc_moe(hx_ctx *c, const hx_layer *L, int B, const int *cnt,
               const int *first, const int32_t *iota);
/* Output head of x (n, n_embd) into logits (n, n_vocab), the head read in
 * runs of rows (hx_wc_head_streamed). */
void hx_wc_head(hx_ctx *c, const float *x, int n, float *logits);
/* The embedding rows of tok[0, B) into c->x. */
void hx_wc_embed(hx_ctx *c, const int32_t *tok, int B);

/* hx_decode keeping the logits of tokens [out_from, n) only (the output
 * head runs for those rows alone); hx_ctx_logits(c, i) for i >= out_from.
 * n > 0 checked as hx_decode; out_from in [0, n] (n: the cache's rows
 * only, no logits) or HX_ERR_INVALID. */
int hx_decode_rows(hx_ctx *c, const int32_t *tokens, int n, int out_from);

#endif /* HX_CTX_INT_H */
