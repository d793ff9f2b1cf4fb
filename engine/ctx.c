/* ctx.c: inference contexts: KV cache and scratch allocation, the
 * decode entry point that splits calls into passes, logits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/adapter.h"
#include "engine/ctx_int.h"

hx_ctx_params hx_ctx_default_params(void)
{
    hx_ctx_params p = {.n_batch = 512};
    return p;
}

/* The scratch buffers of a pass of B tokens, in bytes, in the order of
 * the pointers scratch_slots lists; one formula for allocation and
 * estimates. Returns the number of buffers (dense models need fewer). */
enum { N_SCRATCH = 20 };

/* Bytes per activation row, enough for every matmul input width. */
static size_t act_row_bytes(const hx_hparams *hp)
{
    const size_t qd = (size_t)hp->n_head * hp->head_dim;
    size_t kmax = (size_t)(hp->n_expert ? hp->n_ff_exp : hp->n_ff);
    if ((size_t)hp->n_embd > kmax) kmax = (size_t)hp->n_embd;
    if (qd > kmax) kmax = qd;
    return hx_act_row_bytes(HX_TYPE_F32, (int64_t)kmax) + 64;
}
static int scratch_sizes(const hx_hparams *hp, size_t B, size_t nth,
                         size_t attn_floats, size_t sz[N_SCRATCH])
{
    const size_t e = (size_t)hp->n_embd, f = sizeof(float);
    const size_t qd = (size_t)hp->n_head * hp->head_dim;
    const size_t kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t nu = hp->n_expert ? (size_t)hp->n_expert_used : 1;
    const size_t ff = hp->n_expert ? (size_t)hp->n_ff_exp : (size_t)hp->n_ff;
    const size_t act_row = act_row_bytes(hp);
    const size_t fixed[] = {
        B * e * f, B * e * f, B * qd * f, B * kvd * f, B * kvd * f, B * qd * f,
        B * nu * ff * f, B * nu * ff * f, nth * attn_floats * f,
        B * nu * act_row, (2 * (size_t)hp->n_expert + 3) * sizeof(hx_mm_job),
        B * (size_t)hp->head_dim * f};
    int n = (int)(sizeof fixed / sizeof fixed[0]);
    memcpy(sz, fixed, sizeof fixed);
    if (!hp->n_expert) return n;
    const size_t moe[] = {
        B * nu * e * f, B * (size_t)hp->n_expert * f, B * nu * sizeof(int32_t),
        B * nu * f, B * nu * sizeof(int32_t), B * nu * sizeof(int32_t),
        (3 * (size_t)hp->n_expert + B * nu) * sizeof(int)};
    memcpy(sz + n, moe, sizeof moe);
    return n + (int)(sizeof moe / sizeof moe[0]);
}

static int alloc_scratch(hx_ctx *c)
{
    const hx_hparams *hp = &c->m->hp;
    void **slot[N_SCRATCH] = {
        (void **)&c->x, (void **)&c->xb, (void **)&c->q, (void **)&c->k,
        (void **)&c->v, (void **)&c->att, (void **)&c->hb, (void **)&c->hb2,
        (void **)&c->scores, &c->act, (void **)&c->jobs, (void **)&c->rope_cs,
        (void **)&c->eo, (void **)&c->rl, (void **)&c->sel, (void **)&c->selw,
        (void **)&c->ptok, (void **)&c->pslot, (void **)&c->moe_idx};
    size_t sz[N_SCRATCH];
    int n = scratch_sizes(hp, (size_t)c->n_batch, (size_t)c->n_threads,
                          hx_attn_scratch(hp), sz);
    c->act_row = act_row_bytes(hp);
    for (int i = 0; i < n; i++) {
        *slot[i] = hx_huge_alloc(sz[i] ? sz[i] : 64, 1);
        if (!*slot[i]) return HX_ERR_NOMEM;
    }
    return HX_OK;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

/* n_ctx, n_batch and n_threads after defaults. */
static void sizes_of(const hx_model *m, const hx_ctx_params *p, int *n_ctx,
                     int *n_batch, int *n_threads)
{
    *n_ctx = p->n_ctx ? p->n_ctx : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
    *n_batch = p->n_batch ? p->n_batch : 512;
    if (*n_batch > *n_ctx) *n_batch = *n_ctx; /* a pass never holds more */
    *n_threads = p->n_threads ? p->n_threads : default_threads();
}

static size_t scratch_total(const hx_model *m, int n_batch, int n_threads)
{
    size_t sz[N_SCRATCH], t = (size_t)m->hp.n_vocab * sizeof(float);
    int n = scratch_sizes(&m->hp, (size_t)n_batch, (size_t)n_threads,
                          hx_attn_scratch(&m->hp), sz);
    for (int i = 0; i < n; i++) t += sz[i];
    return t;
}

/* The second activation buffer a weight cache's MoE needs (c->act2). */
static size_t act2_bytes(const hx_model *m, int n_batch)
{
    if (!m->hp.n_expert) return 0;
    return (size_t)n_batch * (size_t)m->hp.n_expert_used * act_row_bytes(&m->hp);
}

/* A cap below the weights: scratch, then a KV cache of the whole context
 * (or what is left once the weights every token uses and the cache's
 * fewest slots are counted), then the weight cache's plan for the rest. */
static int plan_streamed(const hx_model *m, const hx_ctx_params *p, size_t pages,
                         int n_batch, hx_ctx_mem *out, hx_wc_plan *wp, hx_err *err)
{
    out->scratch += act2_bytes(m, n_batch);
    hx_wc_plan_make(m, 0, wp);
    const size_t need = wp->resident + wp->min_cache + out->scratch;
    if (hx_gguf_fd(m->gguf) < 0)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "a memory cap below the weights (%zu MiB) "
                          "needs a model file to read them from", out->weights >> 20);
    if (p->max_bytes < need + out->kv_page)
        return hx_err_set(err, HX_ERR_RANGE, "a memory cap of %zu MiB is too small for this "
                          "model: it needs at least %zu MiB (weights every token uses %zu MiB "
                          "+ the smallest weight cache %zu MiB + scratch %zu MiB + one KV page "
                          "%zu MiB)", p->max_bytes >> 20, (need + out->kv_page + (1 << 20) - 1) >> 20,
                          wp->resident >> 20, wp->min_cache >> 20, out->scratch >> 20,
                          out->kv_page >> 20);
    size_t kv_cap = p->max_bytes - need;
    if (p->kv_max_bytes && p->kv_max_bytes < kv_cap) kv_cap = p->kv_max_bytes;
    if (out->kv_page && kv_cap / out->kv_page < pages) pages = kv_cap / out->kv_page;
    out->kv_total = pages * out->kv_page;
    HX_CHECK(hx_wc_plan_make(m, p->max_bytes - out->scratch - out->kv_total, wp) == HX_OK);
    out->streamed = 1;
    out->weights = wp->resident + wp->cache;
    out->w_resident = wp->resident;
    out->w_cache = wp->cache;
    out->w_items = wp->n_items;
    out->w_slots = wp->n_slots;
    out->w_pinned = wp->n_pinned;
    return HX_OK;
}

/* hx_ctx_memory, and the weight cache's plan when streamed. */
static int ctx_plan(const hx_model *m, const hx_ctx_params *p, hx_ctx_mem *out,
                    hx_wc_plan *wp, hx_err *err)
{
    int n_batch, n_threads;
    memset(out, 0, sizeof *out);
    sizes_of(m, p, &out->n_ctx, &n_batch, &n_threads);
    hx_kv_geometry(&m->hp, p, &out->kv_per_token, &out->kv_page);
    out->weights = m->weight_bytes;
    out->scratch = scratch_total(m, n_batch, n_threads) +
                   hx_kv_spill_scratch(&m->hp, p, out->n_ctx, n_threads);
    size_t pages = ((size_t)out->n_ctx + HX_KV_PAGE - 1) / HX_KV_PAGE, cap = SIZE_MAX;
    if (p->kv_max_bytes) cap = p->kv_max_bytes;
    if (p->max_bytes && p->max_bytes < out->weights + out->scratch + out->kv_page) {
        int rc = plan_streamed(m, p, pages, n_batch, out, wp, err);
        if (rc) return rc;
        pages = out->kv_total / (out->kv_page ? out->kv_page : 1);
    } else if (p->max_bytes) {
        size_t fixed = out->weights + out->scratch;
        if (p->max_bytes - fixed < cap) cap = p->max_bytes - fixed;
    }
    if (out->kv_page && cap / out->kv_page < pages) pages = cap / out->kv_page;
    out->kv_total = pages * out->kv_page;
    out->n_ctx_fit = (int)(pages * HX_KV_PAGE < (size_t)out->n_ctx ? pages * HX_KV_PAGE
                                                                     : (size_t)out->n_ctx);
    if (p->kv_spill && pages >= 2) out->n_ctx_fit = out->n_ctx; /* the rest spills */
    out->total = out->weights + out->kv_total + out->scratch;
    return HX_OK;
}

int hx_ctx_memory(const hx_model *m, const hx_ctx_params *p, hx_ctx_mem *out,
                  hx_err *err)
{
    hx_ctx_params dp = hx_ctx_default_params();
    hx_wc_plan wp;
    return ctx_plan(m, p ? p : &dp, out, &wp, err);
}

/* The weight cache of a streamed context and its second activation
 * buffer. The model's identity (the prefix cache's key, which samples
 * every tensor through the mapping) is taken now, and the pages it read
 * dropped: the cap has no room for file pages. */
static int new_wcache(hx_ctx *c, const hx_wc_plan *wp, hx_err *err)
{
    c->act2 = hx_huge_alloc(act2_bytes(c->m, c->n_batch) + 64, 1);
    if (!c->act2) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = hx_wc_new(c->m, wp, &c->wc, err);
    if (rc) return rc;
    hx_model_identity(c->m, c->model_id);
    hx_gguf_drop_pages(c->m->gguf);
    return HX_OK;
}

int hx_ctx_new(hx_model *m, const hx_ctx_params *p, hx_ctx **out, hx_err *err)
{
    hx_ctx_params dp = hx_ctx_default_params();
    if (!p) p = &dp;
    *out = NULL;
    if (!m) return hx_err_set(err, HX_ERR_INVALID, "no model");
    if (p->n_ctx < 0 || p->n_batch < 0 || p->n_threads < 0)
        return hx_err_set(err, HX_ERR_INVALID, "negative context parameter");
    hx_ctx_mem mem;
    hx_wc_plan wp;
    int rc = ctx_plan(m, p, &mem, &wp, err);
    if (rc) return rc;
    hx_ctx_params kp = *p;
    kp.kv_max_bytes = mem.kv_total ? mem.kv_total : 1; /* the cap after max_bytes */
    if (!p->kv_max_bytes && !p->max_bytes) kp.kv_max_bytes = 0;
    hx_ctx *c = hx_calloc(1, sizeof *c);
    if (!c) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    c->m = m;
    sizes_of(m, p, &c->n_ctx, &c->n_batch, &c->n_threads);
    c->act_hook = p->act_hook;
    c->act_hook_user = p->act_hook_user;
    c->ao = hx_attn_ops_get();
    if ((rc = hx_kv_init(c, &kp, err))) {
        hx_ctx_free(c);
        return rc;
    }
    c->tp = hx_threadpool_new(c->n_threads);
    rc = c->tp ? alloc_scratch(c) : HX_ERR_NOMEM;
    if (!rc && mem.streamed && (rc = new_wcache(c, &wp, err))) {
        hx_ctx_free(c);
        return rc;
    }
    if (rc) {
        int n_ctx = c->n_ctx;
        hx_ctx_free(c);
        return hx_err_set(err, rc, "cannot allocate a context of %d positions",
                          n_ctx);
    }
    *out = c;
    return HX_OK;
}

void hx_ctx_free(hx_ctx *c)
{
    if (!c) return;
    hx_step_abort(c);
    hx_threadpool_free(c->tp);
    hx_wc_free(c->wc);
    free(c->act2);
    hx_adapter_set_free(c->lora);
    hx_kv_free(c);
    free(c->seq_logits);
    void *bufs[] = {c->x, c->xb, c->q, c->k, c->v, c->att,
                    c->hb, c->hb2, c->eo, c->rl, c->sel, c->selw, c->ptok,
                    c->pslot, c->moe_idx, c->act, c->jobs, c->scores,
                    c->rope_cs, c->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c);
}

int hx_ctx_n_past(const hx_ctx *c) { return c->n_past; }
int hx_ctx_n_ctx(const hx_ctx *c) { return c->n_ctx; }
const char *hx_ctx_errmsg(const hx_ctx *c) { return c->err.msg; }
const hx_model *hx_ctx_model(const hx_ctx *c) { return c->m; }

void hx_ctx_truncate(hx_ctx *c, int n_keep)
{
    hx_step_abort(c);
    if (n_keep < 0) n_keep = 0;
    if (n_keep < c->n_past) c->n_past = n_keep;
}

const float *hx_ctx_logits(const hx_ctx *c, int i)
{
    if (c->n_out == 0) return NULL;
    int row = i < 0 ? c->n_out - 1 : i - c->out_first;
    if (row < 0 || row >= c->n_out) return NULL;
    return c->logits + (size_t)row * c->m->hp.n_vocab;
}

static int check_decode(hx_ctx *c, const int32_t *tokens, int n)
{
    if (c->call.active)
        return hx_err_set(&c->err, HX_ERR_STATE, "a stepped call is pending "
                          "(hx_step it to the end or hx_step_abort it)");
    if (n <= 0 || !tokens)
        return hx_err_set(&c->err, HX_ERR_INVALID, "no tokens to decode");
    if (n > c->n_ctx - c->n_past)
        return hx_err_set(&c->err, HX_ERR_FULL, "context full: %d cached + %d "
                          "new tokens exceed n_ctx %d", c->n_past, n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->m->hp.n_vocab)
            return hx_err_set(&c->err, HX_ERR_RANGE, "token %d at %d is outside "
                              "the vocabulary (%d)", tokens[i], i,
                              c->m->hp.n_vocab);
    /* with a spill each pass makes its own pages resident (run_passes) */
    return c->spill ? HX_OK : hx_kv_reserve(c, c->n_past + n);
}

static int reserve_logits(hx_ctx *c, size_t rows)
{
    size_t need = rows * (size_t)c->m->hp.n_vocab;
    if (need <= c->logits_cap) return HX_OK;
    float *p = hx_malloc_array(need, sizeof(float));
    if (!p) return hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory for logits");
    free(c->logits);
    c->logits = p;
    c->logits_cap = need;
    return HX_OK;
}

/* HX_ERR_IO (message in c->err) when a read of the weight cache failed
 * during the pass of B tokens just run: its results are dropped (n_past
 * back before it). */
static int pass_failed(hx_ctx *c, int B)
{
    const char *msg;
    int rc = c->wc ? hx_wc_error(c->wc, &msg) : HX_OK;
    if (!rc) return HX_OK;
    c->n_past -= B;
    hx_err_set(&c->err, rc, "%s", msg);
    hx_wc_clear_error(c->wc);
    return rc;
}

/* Tokens of the pass at off of a call running to end, at most `slice`:
 * a short tail rides with it (a pass under FA_TILE_Q takes the fp16
 * attention path, so a prompt prefilled in slices gets the numbers of one
 * pass). */
static int pass_size(const hx_ctx *c, int off, int end, int slice)
{
    int B = end - off < slice ? end - off : slice;
    if (end - off - B < FA_TILE_Q && end - off <= c->n_batch) B = end - off;
    return B;
}

/* Starts the pass of B tokens at off of a call of tokens whose logits
 * from token out_from on go to c->logits from row 0. */
static void start_pass(hx_ctx *c, const int32_t *tokens, int off, int B, int out_from)
{
    int from = out_from - off < 0 ? 0 : out_from - off > B ? B : out_from - off;
    float *lg = c->logits + (size_t)(off + from - out_from) * c->m->hp.n_vocab;
    hx_pass_start(&c->pass, tokens + off, B, from, lg);
}

/* With a spill: makes the pages of a pass of B tokens resident. */
static int pass_pages(hx_ctx *c, int B)
{
    return c->spill ? hx_kv_reserve(c, c->n_past + B) : HX_OK;
}

/* With a spill: after a pass of B tokens, whether attention found a
 * spilled page damaged; then the pass is undone and the positions from
 * that page on are dropped (decoding them again rebuilds them). */
static int pass_check(hx_ctx *c, int B)
{
    const int bad = hx_kv_spill_damaged(c);
    if (bad < 0) return HX_OK;
    c->n_past -= B;
    if (c->n_past > bad * HX_KV_PAGE) c->n_past = bad * HX_KV_PAGE;
    return hx_err_set(&c->err, HX_ERR_IO, "the spilled KV page %d is damaged: positions "
                      "from %d must be decoded again", bad, c->n_past);
}

/* Passes of at most `slice` tokens over tokens[off, end) of a call of n
 * (logits of tokens [out_from, n) into c->logits from row 0); stops early
 * when the budget or cancel of p says so (*rc HX_ERR_CANCELLED), or a
 * weight read or a spill fails (*rc its error). Returns the index reached. */
static int run_passes(hx_ctx *c, const int32_t *tokens, int n, int off,
                      int out_from, const hx_prefill_params *p, int *rc)
{
    const int slice = p && p->slice > 0 && p->slice < c->n_batch ? p->slice : c->n_batch;
    const int end = p && p->max_tokens > 0 && n - off > p->max_tokens ? off + p->max_tokens : n;
    const double t0 = hx_time_mono();
    *rc = HX_OK;
    while (off < end) {
        if (p && p->cancel && p->cancel(p->cancel_user)) {
            *rc = HX_ERR_CANCELLED;
            break;
        }
        int B = pass_size(c, off, end, slice);
        if ((*rc = pass_pages(c, B))) break;
        start_pass(c, tokens, off, B, out_from);
        if (hx_pass_finish(c)) {
            *rc = hx_err_set(&c->err, HX_ERR_CANCELLED, "stopped between slices after "
                             "%d of %d tokens", off, n);
            break;
        }
        if ((*rc = pass_failed(c, B)) || (*rc = pass_check(c, B))) break;
        off += B;
        if (p && p->max_ms > 0 && (hx_time_mono() - t0) * 1e3 >= p->max_ms) break;
    }
    return off;
}

/* hx_decode_rows's checks and logits: HX_OK with c's output rows set. */
static int decode_prepare(hx_ctx *c, const int32_t *tokens, int n, int out_from)
{
    int rc = check_decode(c, tokens, n);
    if (!rc && (out_from < 0 || out_from > n))
        rc = hx_err_set(&c->err, HX_ERR_INVALID, "logits from token %d of %d", out_from, n);
    if (!rc) rc = reserve_logits(c, (size_t)(n - out_from));
    if (rc) return rc;
    c->n_out = n - out_from;
    c->out_first = out_from;
    return HX_OK;
}

int hx_decode_rows(hx_ctx *c, const int32_t *tokens, int n, int out_from)
{
    if (c->decode_hook) return c->decode_hook(c->decode_hook_user, c, tokens, n, out_from);
    int rc = decode_prepare(c, tokens, n, out_from);
    if (rc) return rc;
    run_passes(c, tokens, n, 0, out_from, NULL, &rc);
    if (rc) c->n_out = 0;
    return rc;
}

int hx_decode(hx_ctx *c, const int32_t *tokens, int n, int logits_all)
{
    return hx_decode_rows(c, tokens, n, logits_all ? 0 : n - 1);
}

/* ---- several sequences in one pass ---- */

/* Most tokens of a pass over several sequences: below FA_TILE_Q, so that
 * attention takes the path each sequence's own small passes take. */
#define SEQ_ROWS_MAX (FA_TILE_Q - 1)

void hx_ctx_set_decode_hook(hx_ctx *c, hx_decode_hook_fn fn, void *user)
{
    c->decode_hook = fn;
    c->decode_hook_user = user;
}

/* Why c cannot share a pass with first (NULL: it can). */
static const char *seq_mismatch(const hx_ctx *first, const hx_ctx *c)
{
    if (c->m != first->m) return "another model";
    if (c->kv_type != first->kv_type) return "another KV cache type";
    if (c->n_threads != first->n_threads) return "another thread count";
    if (strcmp(c->adapter_key, first->adapter_key)) return "another adapter set";
    return NULL;
}

/* Checks s[i] against the sequences before it and as hx_decode_rows
 * would, setting its output rows: its rc. */
static int seq_check(hx_seq_step *s, int i, const hx_ctx *first)
{
    hx_seq_step *q = &s[i];
    const char *why = first ? seq_mismatch(first, q->c) : NULL;
    for (int k = 0; !why && k < i; k++)
        if (s[k].c == q->c) why = "the same context twice";
    if (why)
        return hx_err_set(&q->c->err, HX_ERR_INVALID,
                          "cannot decode together with the other sequences: %s", why);
    return decode_prepare(q->c, q->tok, q->n, q->out_from);
}

/* The end of the group of sequences from i that share one pass: at most
 * SEQ_ROWS_MAX tokens and the n_batch of each (failed ones ride along);
 * i + 1 for one longer. */
static int seq_group(const hx_seq_step *s, int i, int n)
{
    int rows = 0, cap = SEQ_ROWS_MAX, j = i;
    for (; j < n; j++) {
        if (s[j].rc) continue;
        const int c2 = s[j].c->n_batch < cap ? s[j].c->n_batch : cap;
        if (rows + s[j].n > c2) break;
        rows += s[j].n;
        cap = c2;
    }
    return j > i ? j : i + 1;
}

/* After a pass over the group s[0, n) of B rows run on d: each
 * sequence's logits rows and position, or the pass's error. */
static void seq_results(hx_ctx *d, hx_seq_step *s, int n, int failed)
{
    const size_t nv = (size_t)d->m->hp.n_vocab;
    size_t row = 0;
    for (int i = 0; i < n; i++) {
        hx_seq_step *q = &s[i];
        if (q->rc) continue;
        if (failed) {
            q->rc = q->c == d ? failed : hx_err_set(&q->c->err, failed, "%s", d->err.msg);
        } else {
            memcpy(q->c->logits, d->seq_logits + (row + (size_t)q->out_from) * nv,
                   (size_t)(q->n - q->out_from) * nv * sizeof(float));
            q->c->n_past += q->n;
            q->rc = pass_check(q->c, q->n);
        }
        if (q->rc) q->c->n_out = 0;
        row += (size_t)q->n;
    }
}

/* One pass over the sequences of s[0, n) that have not failed, on the
 * scratch and threads of the first of them. */
static void seq_pass(hx_seq_step *s, int n)
{
    hx_ctx *rows[SEQ_ROWS_MAX], *d = NULL;
    int pos[SEQ_ROWS_MAX], B = 0;
    int32_t tok[SEQ_ROWS_MAX];
    for (int i = 0; i < n; i++) {
        hx_seq_step *q = &s[i];
        if (q->rc || (q->rc = pass_pages(q->c, q->n))) continue;
        if (!d) d = q->c;
        for (int t = 0; t < q->n; t++, B++) {
            rows[B] = q->c;
            pos[B] = q->c->n_past + t;
            tok[B] = q->tok[t];
        }
    }
    if (!d) return;
    int failed = HX_OK;
    const size_t need = (size_t)B * (size_t)d->m->hp.n_vocab;
    if (need > d->seq_logits_cap) {
        free(d->seq_logits);
        d->seq_logits = hx_malloc_array(need, sizeof(float));
        d->seq_logits_cap = d->seq_logits ? need : 0;
        if (!d->seq_logits) failed = hx_err_set(&d->err, HX_ERR_NOMEM, "out of memory for logits");
    }
    if (!failed) {
        hx_pass_start(&d->pass, tok, B, 0, d->seq_logits);
        d->pass.seq = rows;
        d->pass.pos = pos;
        hx_pass_run(d, INFINITY);
        memset(&d->pass, 0, sizeof d->pass); /* rows and pos were this frame's */
        failed = pass_failed(d, 0);
    }
    seq_results(d, s, n, failed);
}

int hx_decode_seqs(hx_seq_step *s, int n_seqs)
{
    const hx_ctx *first = NULL;
    for (int i = 0; i < n_seqs; i++) {
        s[i].rc = seq_check(s, i, first);
        if (!s[i].rc && !first) first = s[i].c;
    }
    for (int i = 0, j; i < n_seqs; i = j) {
        j = seq_group(s, i, n_seqs);
        if (j == i + 1 && !s[i].rc) { /* alone: its own passes, as hx_decode_rows */
            run_passes(s[i].c, s[i].tok, s[i].n, 0, s[i].out_from, NULL, &s[i].rc);
            if (s[i].rc) s[i].c->n_out = 0;
        } else {
            seq_pass(s + i, j - i);
        }
    }
    for (int i = 0; i < n_seqs; i++)
        if (s[i].rc) return s[i].rc;
    return HX_OK;
}

hx_prefill_params hx_prefill_default_params(void)
{
    hx_prefill_params p = {0, 0, 0.0, NULL, NULL, 0};
    return p;
}

int hx_prefill(hx_ctx *c, const int32_t *tokens, int n,
               const hx_prefill_params *p, int *n_done)
{
    *n_done = 0;
    int rc = check_decode(c, tokens, n);
    if (!rc) rc = reserve_logits(c, 1);
    if (rc) return rc;
    c->n_out = 0;
    c->tiled_rows = p && p->whole_prompt && c->n_past + n >= FA_TILE_Q;
    *n_done = run_passes(c, tokens, n, 0, n - 1, p, &rc);
    c->tiled_rows = 0;
    if (*n_done == n) {
        c->n_out = 1;
        c->out_first = n - 1;
    }
    if (rc == HX_ERR_CANCELLED)
        return hx_err_set(&c->err, HX_ERR_CANCELLED, "prefill cancelled after %d "
                          "of %d tokens", *n_done, n);
    return rc;
}

/* ---- inference in steps ---- */

int hx_step_begin(hx_ctx *c, const int32_t *tokens, int n, int logits_all, int slice)
{
    int rc = check_decode(c, tokens, n);
    const int out_from = logits_all ? 0 : n - 1;
    if (!rc) rc = reserve_logits(c, (size_t)(n - out_from));
    if (rc) return rc;
    int32_t *copy = hx_malloc_array((size_t)n, sizeof *copy);
    if (!copy) return hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory");
    memcpy(copy, tokens, (size_t)n * sizeof *copy);
    c->n_out = 0;
    c->call = (hx_call){copy, n, 0, out_from,
                        slice > 0 && slice < c->n_batch ? slice : c->n_batch, 1, 0};
    return HX_OK;
}

/* The pending call is over: its tokens freed, its logits kept when done,
 * a pass in progress dropped. */
static void end_call(hx_ctx *c, int done)
{
    if (c->call.in_pass) hx_pass_drop(c);
    free(c->call.tok);
    if (done) {
        c->n_out = c->call.n - c->call.out_from;
        c->out_first = c->call.out_from;
    }
    memset(&c->call, 0, sizeof c->call);
}

int hx_step(hx_ctx *c, double budget_ms, int *done)
{
    hx_call *k = &c->call;
    *done = 0;
    if (!k->active) return hx_err_set(&c->err, HX_ERR_STATE, "no stepped call pending");
    const double deadline = hx_time_mono() + (budget_ms > 0 ? budget_ms : 0) * 1e-3;
    do {
        if (!k->in_pass) {
            const int B = pass_size(c, k->off, k->n, k->slice);
            const int rc = pass_pages(c, B);
            if (rc) {
                end_call(c, 0);
                return rc;
            }
            start_pass(c, k->tok, k->off, B, k->out_from);
            k->in_pass = 1;
        }
        if (!hx_pass_run(c, deadline)) return HX_OK;
        k->in_pass = 0;
        int rc = pass_failed(c, c->pass.B);
        if (!rc) rc = pass_check(c, c->pass.B);
        if (rc) {
            end_call(c, 0);
            return rc;
        }
        k->off += c->pass.B;
    } while (k->off < k->n && hx_time_mono() < deadline);
    if (k->off < k->n) return HX_OK;
    end_call(c, 1);
    *done = 1;
    return HX_OK;
}

void hx_step_abort(hx_ctx *c)
{
    if (c->call.active) end_call(c, 0);
}

int hx_ctx_set_threads(hx_ctx *c, int n)
{
    hx_threadpool_set_active(c->tp, n);
    return n < 1 ? 1 : n > c->n_threads ? c->n_threads : n;
}

void hx_ctx_set_slicer(hx_ctx *c, double budget_ms, int (*fn)(void *user), void *user)
{
    c->slice_ms = budget_ms > 0 ? budget_ms : 0;
    c->slicer = fn;
    c->slicer_user = user;
}
