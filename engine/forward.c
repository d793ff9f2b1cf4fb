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

/* y[i] (B, w[i]->rows) = x (B, cols) . w[i]^T for n matrices sharing their
 * input: one quantization and one pool run when their activation types
 * agree (Q, K, V; gate and up), else one matmul each. */
static void matmul_n(hx_ctx *c, const hx_wmat *const *w, float *const *y,
                     int n, const float *x, int B)
{
    int same = 1;
    for (int i = 1; i < n; i++)
        same &= hx_act_type(w[i]->type) == hx_act_type(w[0]->type);
    if (!same) {
        for (int i = 0; i < n; i++) matmul_n(c, &w[i], &y[i], 1, x, B);
        return;
    }
    if (c->act_hook) report_act(c, w, n, x, B);
    hx_fwd_quantize(c, w[0]->type, x, B, w[0]->cols);
    for (int i = 0; i < n; i++)
        c->jobs[i] = hx_fwd_job(c, w[i], c->wc ? hx_wc_data(c->wc, w[i]) : w[i]->data, NULL,
                                B, y[i]);
    hx_matmul_jobs(c->tp, c->jobs, n);
    if (c->lora)
        for (int i = 0; i < n; i++) hx_adapter_apply(c, w[i], x, B, y[i]);
}

void hx_fwd_matmul(hx_ctx *c, const hx_wmat *w, const float *x, int n,
                   float *y)
{
    matmul_n(c, &w, &y, 1, x, n);
}

/* q/k norms, RoPE, and the new K and V rows into the cache. */
typedef struct qk_job {
    hx_ctx *c;
    const hx_layer *L;
    int layer, pos0;
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
        hx_kv_store(c, j->layer, h, j->pos0 + t, k, v);
    }
}

static void qk_prepare(hx_ctx *c, const hx_layer *L, int l, int B, int pos0)
{
    qk_job j = {c, L, l, pos0};
    hx_threadpool_run(c->tp, B, qk_task, &j);
}

static void attention_block(hx_ctx *c, int l, int B, int pos0)
{
    const hx_hparams *hp = &c->m->hp;
    const hx_layer *L = &c->m->layers[l];
    const int e = hp->n_embd;
    const int qd = hp->n_head * hp->head_dim, kvd = hp->n_head_kv * hp->head_dim;
    for (int t = 0; t < B; t++)
        rmsnorm(c->xb + (size_t)t * e, c->x + (size_t)t * e, L->attn_norm, e,
                hp->rms_eps);
    const hx_wmat *w[3] = {&L->wq, &L->wk, &L->wv};
    float *y[3] = {c->q, c->k, c->v};
    matmul_n(c, w, y, 3, c->xb, B);
    add_bias(c->q, L->bq, B, qd);
    add_bias(c->k, L->bk, B, kvd);
    add_bias(c->v, L->bv, B, kvd);
    qk_prepare(c, L, l, B, pos0);
    hx_attention(c, l, B, pos0);
    hx_fwd_matmul(c, &L->wo, c->att, B, c->xb);
    for (size_t i = 0; i < (size_t)B * e; i++) c->x[i] += c->xb[i];
}

/* ---- feed-forward ---- */

static void ffn_dense(hx_ctx *c, const hx_layer *L, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const hx_wmat *w[2] = {&L->ffn_gate, &L->ffn_up};
    float *y[2] = {c->hb, c->hb2};
    matmul_n(c, w, y, 2, c->xb, B);
    hx_fwd_swiglu(c->tp, c->hb, c->hb2, (int64_t)B * hp->n_ff);
    hx_fwd_matmul(c, &L->ffn_down, c->hb, B, c->xb);
}

static void ffn_block(hx_ctx *c, int l, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const hx_layer *L = &c->m->layers[l];
    const int e = hp->n_embd;
    for (int t = 0; t < B; t++)
        rmsnorm(c->xb + (size_t)t * e, c->x + (size_t)t * e, L->ffn_norm, e,
                hp->rms_eps);
    if (hp->n_expert) hx_ffn_moe(c, L, B);
    else ffn_dense(c, L, B);
    for (size_t i = 0; i < (size_t)B * e; i++) c->x[i] += c->xb[i];
}

/* ---- passes ---- */

static void embed(hx_ctx *c, const int32_t *tok, int B)
{
    const hx_wmat *w = &c->m->tok_embd;
    if (c->wc) {
        hx_wc_embed(c, tok, B);
        return;
    }
    for (int t = 0; t < B; t++)
        hx_dequantize_row(w->type, (const char *)w->data + (size_t)tok[t] * w->row_bytes,
                          c->x + (size_t)t * w->cols, w->cols);
}

/* Final norm and output head for tokens [from, B) into logits rows. */
static void head(hx_ctx *c, int from, int B, float *logits)
{
    const hx_hparams *hp = &c->m->hp;
    const int e = hp->n_embd;
    for (int t = from; t < B; t++)
        rmsnorm(c->xb + (size_t)(t - from) * e, c->x + (size_t)t * e,
                c->m->output_norm, e, hp->rms_eps);
    const hx_wmat *w = &c->m->output;
    if (!c->wc || !hx_wc_head_streamed(c->wc)) {
        hx_fwd_matmul(c, w, c->xb, B - from, logits);
        return;
    }
    if (c->act_hook) report_act(c, &w, 1, c->xb, B - from);
    hx_wc_head(c, c->xb, B - from, logits);
}

/* One pass over B <= n_batch tokens at positions n_past..; logits of
 * tokens [out_from, B) (out_from == B: none) go to logits. */
void hx_forward_pass(hx_ctx *c, const int32_t *tok, int B, int out_from,
                    float *logits)
{
    embed(c, tok, B);
    const hx_hparams *hp = &c->m->hp;
    for (int t = 0; t < B; t++)
        rope_angles(c->rope_cs + (size_t)t * hp->head_dim, hp->head_dim,
                    c->n_past + t, hp->rope_base, c->m->rope_freq_scale);
    for (int l = 0; l < c->m->hp.n_layer; l++) {
        if (c->wc) hx_wc_layer_begin(c, l);
        attention_block(c, l, B, c->n_past);
        ffn_block(c, l, B);
        if (c->wc) hx_wc_layer_end(c, l);
    }
    c->n_past += B;
    if (out_from < B) head(c, out_from, B, logits);
}

