/* forward.c: one pass of the transformer over a batch of tokens (RMSNorm,
 * RoPE, attention, SwiGLU or MoE), with llama.cpp's precision choices. */
#include <math.h>
#include <string.h>

#include "engine/ctx_int.h"

/* Precision, and how close to llama.cpp it gets (measured with hxref on
 * random 2-layer models; tests/engine/test_diff.c):
 * - Every op follows ggml's definition: RMSNorm sums squares in double and
 *   scales in float; RoPE angles by the same float recurrence; MoE softmax,
 *   top-k, renormalisation with the clamped sum; experts summed in slot
 *   order; K and V rounded to fp16 in the default cache.
 * - With F32 weights the logits agree to NMSE ~1e-13 (float summation
 *   order only). With an F16 cache, rare one-ulp fp16 rounding flips of
 *   K/V values give up to ~1e-8.
 * - With quantized weights, activations are rounded to 8 bits (or fp16 /
 *   bf16) before each matmul. A float difference of one ulp upstream
 *   occasionally moves a value across a rounding boundary; that one flip
 *   shifts later activations by a whole quantum and the two engines then
 *   differ by NMSE 1e-6..3e-4 on the following positions (on these models
 *   roughly one flip per 30 tokens; which token it hits moves with any
 *   ulp-level change). The ulps come from SiLU and softmax, where ggml uses
 *   its own vectorised expf approximation (Hearth uses libm's expf), and
 *   from summation order in attention. llama.cpp itself is bit-stable
 *   across its CPU variants (zen4 vs haswell: identical logits on a Q8_0
 *   model), so only reproducing those approximations bit for bit would
 *   remove the flips; Hearth does not copy that code. Tolerances for
 *   quantized types must allow the flips. */

/* ---- small ops ---- */

/* o = x / rms(x) * w, as ggml: sum of squares in double, scale in float. */
static void rmsnorm(float *o, const float *x, const float *w, int n, float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) o[i] = (x[i] * scale) * w[i];
}

/* Rotates head vector x (head_dim) for position pos: NORM pairs (2i, 2i+1),
 * NEOX pairs (i, i + d/2). Angles as ggml: theta *= base^(-2/d) per pair. */
static void rope_angles(float *cs, int d, int pos, float base, float fscale)
{
    const float theta_scale = powf(base, -2.0f / (float)d);
    float theta = (float)pos;
    for (int i0 = 0; i0 < d; i0 += 2) {
        cs[i0] = cosf(fscale * theta);
        cs[i0 + 1] = sinf(fscale * theta);
        theta *= theta_scale;
    }
}

/* Rotates head vector x (d) by the angles cs (cos, sin per pair, from
 * rope_angles): NORM pairs (2i, 2i+1), NEOX pairs (i, i + d/2). */
static void rope(float *x, int d, const float *cs, int type)
{
    for (int i0 = 0; i0 < d; i0 += 2) {
        const float c = cs[i0], s = cs[i0 + 1];
        const int a = type == HX_ROPE_NEOX ? i0 / 2 : i0;
        const int b = type == HX_ROPE_NEOX ? i0 / 2 + d / 2 : i0 + 1;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

typedef struct swiglu_job {
    float *g;
    const float *u;
    int64_t n, chunk;
} swiglu_job;

static void swiglu_task(void *ctx, int task, int thread)
{
    const swiglu_job *j = ctx;
    (void)thread;
    int64_t i1 = (task + 1) * j->chunk < j->n ? (task + 1) * j->chunk : j->n;
    for (int64_t i = task * j->chunk; i < i1; i++) j->g[i] = silu(j->g[i]) * j->u[i];
}

/* g = silu(g) * u over n elements, split across the pool when large. */
void hx_fwd_swiglu(hx_threadpool *tp, float *g, const float *u, int64_t n)
{
    swiglu_job j = {g, u, n, 16384};
    hx_threadpool_run(tp, (int)((n + j.chunk - 1) / j.chunk), swiglu_task, &j);
}

static void add_bias(float *y, const float *b, int rows, int n)
{
    if (!b) return;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) y[(size_t)r * n + i] += b[i];
}

/* Quantizes B rows of K floats for weights of wtype into c->act. */
void hx_fwd_quantize(hx_ctx *c, int wtype, const float *x, int B, int64_t K)
{
    HX_CHECK(hx_act_row_bytes(wtype, K) <= c->act_row);
    if (hx_act_type(wtype) == HX_TYPE_F32)
        memcpy(c->act, x, (size_t)B * (size_t)K * sizeof(float));
    else
        hx_quantize_act_rows(c->tp, wtype, x, B, K, c->act);
}

hx_mm_job hx_fwd_job(const hx_ctx *c, const hx_wmat *w, const void *W,
                     const int32_t *idx, int n, float *y)
{
    hx_mm_job j = {W, w->type, w->cols, w->rows, c->act, idx, n, y, w->rows};
    return j;
}

/* The GGUF name of a weight, found by its data pointer (a scan, paid
 * only when an act_hook is set), or NULL. */
static const char *wmat_name(const hx_ctx *c, const hx_wmat *w)
{
    const hx_gguf *g = c->m->gguf;
    for (int64_t t = 0; t < hx_gguf_n_tensors(g); t++)
        if (hx_gguf_tensor_at(g, t)->data == w->data)
            return hx_gguf_tensor_at(g, t)->name;
    return NULL;
}

/* Shows x (B, cols), the input of the n matrices w, to the act_hook. */
static void report_act(hx_ctx *c, const hx_wmat *const *w, int n,
                       const float *x, int B)
{
    for (int i = 0; i < n; i++) {
        const char *name = wmat_name(c, w[i]);
        if (name) c->act_hook(c->act_hook_user, name, -1, x, B, w[i]->cols);
    }
}

void hx_fwd_report_experts(hx_ctx *c, const hx_wmat *w, const float *x,
                           const int32_t *rows, const int *cnt,
                           const int *first)
{
    const char *name = wmat_name(c, w);
    for (int e = 0; name && e < (int)w->n_mat; e++)
        for (int p = first[e]; p < first[e] + cnt[e]; p++)
            c->act_hook(c->act_hook_user, name, e,
                        x + (size_t)rows[p] * (size_t)w->cols, 1, w->cols);
}

/* ---- matmuls in row chunks ---- */

/* Matrices multiplying one input x (B, cols): y[i] (B, w[i]->rows) =
 * x . w[i]^T. Their rows are numbered on, matrix after matrix. */
typedef struct mm_group {
    const hx_wmat *w[3];
    float *y[3];
    int n, B;
    const float *x;
} mm_group;

static int64_t group_rows(const mm_group *g)
{
    int64_t r = 0;
    for (int i = 0; i < g->n; i++) r += g->w[i]->rows;
    return r;
}

static int same_act(const hx_wmat *a, const hx_wmat *b)
{
    return hx_act_type(a->type) == hx_act_type(b->type);
}

static int past(double deadline) { return !isinf(deadline) && hx_time_mono() >= deadline; }

/* The rate kind of a pass of B tokens. */
static int rate_kind(int B)
{
    return B == 1 ? HX_RATE_ONE : B < FA_TILE_Q ? HX_RATE_FEW : HX_RATE_BATCH;
}

/* The measured seconds per multiply-add of weights of type `type` in a
 * pass of B tokens. */
static double *mm_rate(hx_ctx *c, int B, int type)
{
    return &c->rates.mm[rate_kind(B)][type >= 0 && type < HX_TYPE_COUNT ? type : 0];
}

/* Rows of a chunk of `left` rows for B tokens at `macs_per_row` that fit
 * in half the time left before the deadline at the measured rate (a
 * misestimate then overruns by less; whole multiples of 16, at least 16):
 * all of them without a deadline, 64 before a rate is known. */
static int64_t chunk_rows(hx_ctx *c, int64_t left, int64_t macs_per_row, int B, int type,
                          double deadline)
{
    if (isinf(deadline)) return left;
    int64_t r = 64;
    const double rate = *mm_rate(c, B, type);
    if (rate > 0)
        r = (int64_t)(0.5 * (deadline - hx_time_mono()) / (rate * (double)macs_per_row)) / 16 * 16;
    if (r < 16) r = 16;
    return r < left ? r : left;
}

/* Moves an estimate towards a new measurement. */
static void learn(double *est, double v) { *est = *est > 0 ? 0.7 * *est + 0.3 * v : v; }

/* Rows [r, r + n) of the group: one pool run over the parts of the
 * matrices they cover; the first row of a matrix shows x to the act_hook,
 * and when its activation type differs from the one before it (or it is
 * the first) quantizes x first. A chunk never spans two matrices of
 * different activation types. */
static void group_chunk(hx_ctx *c, const mm_group *g, int64_t r, int64_t n)
{
    int nj = 0;
    int64_t base = 0;
    for (int i = 0; i < g->n && n > 0; base += g->w[i]->rows, i++) {
        const hx_wmat *w = g->w[i];
        if (r >= base + w->rows) continue;
        if (r == base && c->act_hook) report_act(c, &g->w[i], 1, g->x, g->B);
        if (r == base && (i == 0 || !same_act(w, g->w[i - 1])))
            hx_fwd_quantize(c, w->type, g->x, g->B, w->cols);
        const int64_t r0 = r - base, m = w->rows - r0 < n ? w->rows - r0 : n;
        const char *W = c->wc ? hx_wc_data(c->wc, w) : w->data;
        hx_mm_job j = hx_fwd_job(c, w, W + (size_t)r0 * w->row_bytes, NULL, g->B, g->y[i] + r0);
        j.M = m;
        c->jobs[nj++] = j;
        r += m;
        n -= m;
    }
    hx_matmul_jobs(c->tp, c->jobs, nj);
}

/* The rows of g from *done on in chunks until all are done (1, adapters
 * applied) or the deadline passed (0); *done counts the rows done. */
static int run_group(hx_ctx *c, const mm_group *g, int64_t *done, double deadline)
{
    const int64_t total = group_rows(g);
    while (*done < total) {
        int64_t base = 0, i = 0;
        while (*done >= base + g->w[i]->rows) base += g->w[i++]->rows;
        const int64_t macs = g->w[i]->cols * g->B;
        const int type = g->w[i]->type; /* the rate of the chunk's first matrix */
        int64_t end = base + g->w[i]->rows; /* a chunk may run on into */
        while (i + 1 < g->n && same_act(g->w[i + 1], g->w[i])) end += g->w[++i]->rows;
        const int64_t n = chunk_rows(c, end - *done, macs, g->B, type, deadline);
        const double t0 = isinf(deadline) ? 0 : hx_time_mono();
        group_chunk(c, g, *done, n);
        if (!isinf(deadline))
            learn(mm_rate(c, g->B, type), (hx_time_mono() - t0) / ((double)n * macs));
        *done += n;
        if (*done < total && past(deadline)) return 0;
    }
    if (c->lora)
        for (int i = 0; i < g->n; i++) hx_adapter_apply(c, g->w[i], g->x, g->B, g->y[i]);
    return 1;
}

/* One matmul whole: y (n, w->rows) = x (n, w->cols) . w^T. */
void hx_fwd_matmul(hx_ctx *c, const hx_wmat *w, const float *x, int n,
                   float *y)
{
    mm_group g = {{w}, {y}, 1, n, x};
    int64_t done = 0;
    run_group(c, &g, &done, INFINITY);
}

/* q/k norms, RoPE, and the new K and V rows into the cache. */
typedef struct qk_job {
    hx_ctx *c;
    const hx_layer *L;
    int layer;
} qk_job;

/* Token t: q/k norms, RoPE, and its K and V rows into the cache. */
static void qk_task(void *ctx, int t, int thread)
{
    const qk_job *j = ctx;
    hx_ctx *c = j->c;
    const hx_hparams *hp = &c->m->hp;
    const int d = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv;
    const float *cs = c->rope_cs + (size_t)t * d;
    (void)thread;
    for (int h = 0; h < nh; h++) {
        float *q = c->q + ((size_t)t * nh + h) * d;
        if (j->L->q_norm) rmsnorm(q, q, j->L->q_norm, d, hp->rms_eps);
        rope(q, d, cs, hp->rope_type);
    }
    for (int h = 0; h < nkv; h++) {
        float *k = c->k + ((size_t)t * nkv + h) * d;
        const float *v = c->v + ((size_t)t * nkv + h) * d;
        if (j->L->k_norm) rmsnorm(k, k, j->L->k_norm, d, hp->rms_eps);
        rope(k, d, cs, hp->rope_type);
        hx_kv_store(hx_pass_seq(c, t), j->layer, h, hx_pass_pos(c, t), k, v);
    }
}

static void qk_prepare(hx_ctx *c, const hx_layer *L, int l, int B)
{
    qk_job j = {c, L, l};
    hx_threadpool_run(c->tp, B, qk_task, &j);
}

/* ---- passes ---- */

/* ---- a pass in units ---- */

/* A layer's units, in order. */
enum { U_QKV, U_ATT, U_WO, U_FFN_IN, U_FFN_OUT, U_PER_LAYER };

static void norm_rows(hx_ctx *c, const float *w, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const int e = hp->n_embd;
    for (int t = 0; t < B; t++)
        rmsnorm(c->xb + (size_t)t * e, c->x + (size_t)t * e, w, e, hp->rms_eps);
}

static void residual(hx_ctx *c, int B)
{
    for (size_t i = 0; i < (size_t)B * c->m->hp.n_embd; i++) c->x[i] += c->xb[i];
}

/* Q, K, V of layer l (the layer's weights brought in first). */
static int unit_qkv(hx_ctx *c, int l, double deadline)
{
    const hx_layer *L = &c->m->layers[l];
    const int B = c->pass.B;
    if (!c->pass.begun) {
        if (c->wc) hx_wc_layer_begin(c, l);
        norm_rows(c, L->attn_norm, B);
    }
    mm_group g = {{&L->wq, &L->wk, &L->wv}, {c->q, c->k, c->v}, 3, B, c->xb};
    if (!run_group(c, &g, &c->pass.done, deadline)) return 0;
    const hx_hparams *hp = &c->m->hp;
    const int qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;
    add_bias(c->q, L->bq, B, qd);
    add_bias(c->k, L->bk, B, kvd);
    add_bias(c->v, L->bv, B, kvd);
    return 1;
}

/* Norms, RoPE and the cache rows, then the attention tasks in runs that
 * fit until the deadline (the number of threads at first). */
static int unit_att(hx_ctx *c, int l, double deadline)
{
    hx_pass *p = &c->pass;
    if (!p->begun) qk_prepare(c, &c->m->layers[l], l, p->B);
    hx_attn_run r;
    hx_attention_plan(c, l, p->B, c->n_past, &r);
    double *rate = &c->rates.att[rate_kind(p->B)];
    const double keys = (double)(c->n_past + p->B); /* a task's work grows with them */
    while (p->done < r.n_tasks) {
        int64_t n = r.n_tasks - p->done;
        if (!isinf(deadline)) {
            int64_t fit = *rate > 0
                ? (int64_t)(0.5 * (deadline - hx_time_mono()) / (*rate * keys)) : c->n_threads;
            fit = fit < c->n_threads ? c->n_threads : fit;
            n = fit < n ? fit : n;
        }
        const double t0 = isinf(deadline) ? 0 : hx_time_mono();
        hx_attention_range(&r, (int)p->done, (int)(p->done + n));
        if (!isinf(deadline)) learn(rate, (hx_time_mono() - t0) / ((double)n * keys));
        p->done += n;
        if (p->done < r.n_tasks && past(deadline)) return 0;
    }
    return 1;
}

static int unit_wo(hx_ctx *c, int l, double deadline)
{
    mm_group g = {{&c->m->layers[l].wo}, {c->xb}, 1, c->pass.B, c->att};
    if (!run_group(c, &g, &c->pass.done, deadline)) return 0;
    residual(c, c->pass.B);
    return 1;
}

/* Experts [*done, ...) of the layer's MoE FFN, up (gate, up, SwiGLU) or
 * down, in ranges whose multiply-adds fit until the deadline at the
 * measured rate (one used expert at least): 1 when all are done. */
static int run_experts(hx_ctx *c, const hx_layer *L, int up, double deadline)
{
    const hx_hparams *hp = &c->m->hp;
    const int *cnt = c->moe_idx;
    int64_t *done = &c->pass.done;
    const double per_pair = (double)hp->n_ff_exp * hp->n_embd * (up ? 2 : 1);
    /* an expert sees about B * used / experts tokens: rated as such a pass */
    int per_expert = c->pass.B * hp->n_expert_used / hp->n_expert;
    double *rate = mm_rate(c, per_expert < 1 ? 1 : per_expert,
                           up ? L->gate_exps.type : L->down_exps.type);
    while (*done < hp->n_expert) {
        int x1 = (int)*done;
        double macs = 0, left = isinf(deadline) ? INFINITY : 0.5 * (deadline - hx_time_mono());
        while (x1 < hp->n_expert && (macs == 0 || *rate <= 0 ||
                                     (macs + cnt[x1] * per_pair) * *rate <= left))
            macs += cnt[x1++] * per_pair;
        const double t0 = isinf(deadline) ? 0 : hx_time_mono();
        if (up) hx_moe_up(c, L, (int)*done, x1);
        else hx_moe_down(c, L, (int)*done, x1);
        if (!isinf(deadline) && macs > 0 && !c->wc) learn(rate, (hx_time_mono() - t0) / macs);
        *done = x1;
        if (x1 < hp->n_expert && past(deadline)) return 0;
    }
    return 1;
}

/* Dense: gate and up, then SwiGLU; MoE: the router, then the experts'
 * gate, up and SwiGLU. */
static int unit_ffn_in(hx_ctx *c, int l, double deadline)
{
    const hx_hparams *hp = &c->m->hp;
    const hx_layer *L = &c->m->layers[l];
    const int B = c->pass.B;
    if (!c->pass.begun) {
        norm_rows(c, L->ffn_norm, B);
        if (hp->n_expert) hx_moe_begin(c, L, B);
    }
    if (hp->n_expert) return run_experts(c, L, 1, deadline);
    mm_group g = {{&L->ffn_gate, &L->ffn_up}, {c->hb, c->hb2}, 2, B, c->xb};
    if (!run_group(c, &g, &c->pass.done, deadline)) return 0;
    hx_fwd_swiglu(c->tp, c->hb, c->hb2, (int64_t)B * hp->n_ff);
    return 1;
}

static int unit_ffn_out(hx_ctx *c, int l, double deadline)
{
    const hx_layer *L = &c->m->layers[l];
    const int B = c->pass.B;
    if (c->m->hp.n_expert) {
        if (!c->pass.begun) hx_moe_down_begin(c, L, B);
        if (!run_experts(c, L, 0, deadline)) return 0;
        hx_moe_end(c, B);
    } else {
        mm_group g = {{&L->ffn_down}, {c->xb}, 1, B, c->hb};
        if (!run_group(c, &g, &c->pass.done, deadline)) return 0;
    }
    residual(c, B);
    if (c->wc) hx_wc_layer_end(c, l);
    return 1;
}

static void embed(hx_ctx *c, const int32_t *tok, int B)
{
    const hx_wmat *w = &c->m->tok_embd;
    const hx_hparams *hp = &c->m->hp;
    if (c->wc) hx_wc_embed(c, tok, B);
    else
        for (int t = 0; t < B; t++)
            hx_dequantize_row(w->type, (const char *)w->data + (size_t)tok[t] * w->row_bytes,
                              c->x + (size_t)t * w->cols, w->cols);
    for (int t = 0; t < B; t++)
        rope_angles(c->rope_cs + (size_t)t * hp->head_dim, hp->head_dim,
                    hx_pass_pos(c, t), hp->rope_base, c->m->rope_freq_scale);
}

/* Final norm and output head for tokens [out_from, B) into the logits. */
static int unit_head(hx_ctx *c, double deadline)
{
    hx_pass *p = &c->pass;
    const hx_hparams *hp = &c->m->hp;
    const int e = hp->n_embd, n = p->B - p->out_from;
    if (n <= 0) return 1;
    if (!p->begun)
        for (int t = p->out_from; t < p->B; t++)
            rmsnorm(c->xb + (size_t)(t - p->out_from) * e, c->x + (size_t)t * e,
                    c->m->output_norm, e, hp->rms_eps);
    const hx_wmat *w = &c->m->output;
    if (c->wc && hx_wc_head_streamed(c->wc)) {
        if (c->act_hook) report_act(c, &w, 1, c->xb, n);
        hx_wc_head(c, c->xb, n, p->logits);
        return 1;
    }
    mm_group g = {{w}, {p->logits}, 1, n, c->xb};
    return run_group(c, &g, &c->pass.done, deadline);
}

void hx_pass_start(hx_pass *p, const int32_t *tok, int B, int out_from,
                   float *logits)
{
    *p = (hx_pass){tok, B, out_from, logits, 0, 0, 0, NULL, NULL};
}

/* Unit u of the pass (0: the embedding, then U_PER_LAYER per layer, then
 * the head): 1 when it is complete. */
static int run_unit(hx_ctx *c, int u, double deadline)
{
    const int n_layer = c->m->hp.n_layer;
    if (u == 0) {
        embed(c, c->pass.tok, c->pass.B);
        return 1;
    }
    if (u > n_layer * U_PER_LAYER) return unit_head(c, deadline);
    const int l = (u - 1) / U_PER_LAYER;
    switch ((u - 1) % U_PER_LAYER) {
    case U_QKV: return unit_qkv(c, l, deadline);
    case U_ATT: return unit_att(c, l, deadline);
    case U_WO: return unit_wo(c, l, deadline);
    case U_FFN_IN: return unit_ffn_in(c, l, deadline);
    default: return unit_ffn_out(c, l, deadline);
    }
}

int hx_pass_run(hx_ctx *c, double deadline)
{
    hx_pass *p = &c->pass;
    const int end = c->m->hp.n_layer * U_PER_LAYER + 2;
    int worked = 0;
    while (p->unit < end) {
        if (worked && past(deadline)) return 0;
        int complete = run_unit(c, p->unit, deadline);
        worked = p->begun = 1;
        if (!complete) return 0;
        p->unit++;
        p->begun = 0;
        p->done = 0;
    }
    if (!p->seq) c->n_past += p->B; /* several sequences: hx_decode_seqs's */
    return 1;
}

int hx_pass_finish(hx_ctx *c)
{
    if (c->slice_ms <= 0) {
        hx_pass_run(c, INFINITY);
        return 0;
    }
    while (!hx_pass_run(c, hx_time_mono() + c->slice_ms * 1e-3))
        if (c->slicer && c->slicer(c->slicer_user)) {
            hx_pass_drop(c);
            return 1;
        }
    return 0;
}

void hx_pass_drop(hx_ctx *c)
{
    const hx_pass *p = &c->pass;
    const int u = p->unit - 1; /* the unit's index among the layers' */
    if (c->wc && u >= 0 && u < c->m->hp.n_layer * U_PER_LAYER &&
        (u % U_PER_LAYER != U_QKV || p->begun))
        hx_wc_layer_end(c, u / U_PER_LAYER);
    memset(&c->pass, 0, sizeof c->pass);
}
