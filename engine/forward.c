/* forward.c: inference contexts and the transformer forward pass (RMSNorm,
 * RoPE, GQA attention over an F16 KV cache, SwiGLU or MoE), computed with
 * llama.cpp's precision choices so that logits agree with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/attn.h"
#include "engine/kernels.h"
#include "engine/model_int.h"
#include "engine/threadpool.h"

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
 *   bf16) before each matmul. A float difference of one ulp anywhere
 *   upstream (SIMD summation order, ggml's vectorised expf in SiLU and
 *   softmax) occasionally moves a value across a rounding boundary; that
 *   one flip shifts later activations by a whole quantum and the two
 *   engines then differ by NMSE 1e-6..3e-4 on the following positions.
 *   Roughly one such event per 30 tokens on these models; which token it
 *   hits changes with any ulp-level change on either side, so it is not a
 *   fixable bug but a property of comparing two float pipelines through
 *   8-bit rounding. Tolerances for quantized types must allow it. */

/* llama.cpp's CPU flash attention runs batches of at least this many
 * queries in F32 (tiled); smaller ones round Q to F16 and accumulate V in
 * F16. Hearth does the same so that both agree number for number. */
#define FA_TILE_Q 64

struct hx_ctx {
    hx_model *m;
    hx_threadpool *tp;
    int n_ctx, n_batch, n_threads, n_past;
    /* KV cache (n_layer, n_head_kv, n_ctx, head_dim): fp16, or float
     * when kv_f32 */
    void *kc, *vc;
    int kv_f32;
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
};

hx_ctx_params hx_ctx_default_params(void)
{
    hx_ctx_params p = {0, 512, 0, 0};
    return p;
}

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
static void swiglu(hx_threadpool *tp, float *g, const float *u, int64_t n)
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
static void quantize(hx_ctx *c, int wtype, const float *x, int B, int64_t K)
{
    HX_CHECK(hx_act_row_bytes(wtype, K) <= c->act_row);
    if (hx_act_type(wtype) == HX_TYPE_F32)
        memcpy(c->act, x, (size_t)B * (size_t)K * sizeof(float));
    else
        hx_quantize_act_rows(c->tp, wtype, x, B, K, c->act);
}

static hx_mm_job job(const hx_ctx *c, const hx_wmat *w, const void *W,
                     const int32_t *idx, int n, float *y)
{
    hx_mm_job j = {W, w->type, w->cols, w->rows, c->act, idx, n, y, w->rows};
    return j;
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
    quantize(c, w[0]->type, x, B, w[0]->cols);
    for (int i = 0; i < n; i++) c->jobs[i] = job(c, w[i], w[i]->data, NULL, B, y[i]);
    hx_matmul_jobs(c->tp, c->jobs, n);
}

static void matmul(hx_ctx *c, const hx_wmat *w, const float *x, int n,
                   float *y)
{
    matmul_n(c, &w, &y, 1, x, n);
}

/* ---- context ---- */

static int alloc_kv(hx_ctx *c)
{
    const hx_hparams *hp = &c->m->hp;
    size_t n = (size_t)hp->n_layer * (size_t)hp->n_head_kv, bytes;
    size_t el = c->kv_f32 ? sizeof(float) : sizeof(uint16_t);
    if (hx_mul_size(n, (size_t)c->n_ctx, &n) || hx_mul_size(n, (size_t)hp->head_dim, &n) ||
        hx_mul_size(n, el, &bytes))
        return HX_ERR_NOMEM;
    c->kc = hx_aligned_alloc(64, bytes);
    c->vc = hx_aligned_alloc(64, bytes);
    return c->kc && c->vc ? HX_OK : HX_ERR_NOMEM;
}

/* Tiled attention: a task takes the G query heads of one KV head for up to
 * att_tq tokens (R = G * tokens <= att_rows rows), keys in tiles of ATT_TK. */
#define ATT_TK 64

static int att_group(const hx_ctx *c)
{
    return c->m->hp.n_head / c->m->hp.n_head_kv;
}

static int att_tq(const hx_ctx *c)
{
    int tq = 64 / att_group(c);
    return tq < 1 ? 1 : tq;
}

static size_t att_rows(const hx_ctx *c)
{
    return (size_t)att_tq(c) * (size_t)att_group(c);
}

/* Per-thread attention scratch, in floats: Q rows, accumulators, scores,
 * a K and a V tile, running max and sum (R each). */
static size_t scores_stride(const hx_ctx *c)
{
    const size_t d = (size_t)c->m->hp.head_dim, R = att_rows(c);
    return 2 * R * d + R * ATT_TK + 2 * ATT_TK * d + 2 * R + 16;
}

static int alloc_scratch(hx_ctx *c)
{
    const hx_hparams *hp = &c->m->hp;
    const size_t B = (size_t)c->n_batch, e = (size_t)hp->n_embd;
    const size_t qd = (size_t)hp->n_head * hp->head_dim;
    const size_t kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t nu = hp->n_expert ? (size_t)hp->n_expert_used : 1;
    const size_t ff = hp->n_expert ? (size_t)hp->n_ff_exp : (size_t)hp->n_ff;
    c->x = hx_malloc_array(B * e, sizeof(float));
    c->xb = hx_malloc_array(B * e, sizeof(float));
    c->q = hx_malloc_array(B * qd, sizeof(float));
    c->k = hx_malloc_array(B * kvd, sizeof(float));
    c->v = hx_malloc_array(B * kvd, sizeof(float));
    c->att = hx_malloc_array(B * qd, sizeof(float));
    c->hb = hx_malloc_array(B * nu * ff, sizeof(float));
    c->hb2 = hx_malloc_array(B * nu * ff, sizeof(float));
    c->scores = hx_malloc_array((size_t)c->n_threads * scores_stride(c),
                                sizeof(float));
    size_t kmax = e > ff ? e : ff;
    if ((size_t)hp->n_head * hp->head_dim > kmax) kmax = (size_t)hp->n_head * hp->head_dim;
    c->act_row = hx_act_row_bytes(HX_TYPE_F32, (int64_t)kmax) + 64;
    c->act = hx_aligned_alloc(64, B * nu * c->act_row);
    c->jobs = hx_malloc_array(2 * (size_t)hp->n_expert + 3, sizeof(hx_mm_job));
    c->rope_cs = hx_malloc_array(B * (size_t)hp->head_dim, sizeof(float));
    if (!c->x || !c->xb || !c->q || !c->k || !c->v || !c->att || !c->hb ||
        !c->hb2 || !c->scores || !c->act || !c->jobs ||
        !c->rope_cs)
        return HX_ERR_NOMEM;
    if (!hp->n_expert) return HX_OK;
    c->eo = hx_malloc_array(B * nu * e, sizeof(float));
    c->rl = hx_malloc_array(B * (size_t)hp->n_expert, sizeof(float));
    c->sel = hx_malloc_array(B * nu, sizeof(int32_t));
    c->selw = hx_malloc_array(B * nu, sizeof(float));
    c->ptok = hx_malloc_array(B * nu, sizeof(int32_t));
    c->pslot = hx_malloc_array(B * nu, sizeof(int32_t));
    c->moe_idx = hx_malloc_array(3 * (size_t)hp->n_expert + B * nu, sizeof(int));
    return c->eo && c->rl && c->sel && c->selw && c->ptok && c->pslot &&
                   c->moe_idx ? HX_OK : HX_ERR_NOMEM;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int hx_ctx_new(hx_model *m, const hx_ctx_params *p, hx_ctx **out, hx_err *err)
{
    hx_ctx_params dp = hx_ctx_default_params();
    if (!p) p = &dp;
    *out = NULL;
    if (!m) return hx_err_set(err, HX_ERR_INVALID, "no model");
    if (p->n_ctx < 0 || p->n_batch < 0 || p->n_threads < 0)
        return hx_err_set(err, HX_ERR_INVALID, "negative context parameter");
    hx_ctx *c = hx_calloc(1, sizeof *c);
    if (!c) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    c->m = m;
    c->n_ctx = p->n_ctx ? p->n_ctx
                        : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
    c->n_batch = p->n_batch ? p->n_batch : 512;
    c->n_threads = p->n_threads ? p->n_threads : default_threads();
    c->kv_f32 = p->kv_f32 != 0;
    c->ao = hx_attn_ops_get();
    c->tp = hx_threadpool_new(c->n_threads);
    int rc = c->tp ? alloc_kv(c) : HX_ERR_NOMEM;
    if (!rc) rc = alloc_scratch(c);
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
    hx_threadpool_free(c->tp);
    void *bufs[] = {c->kc, c->vc, c->x, c->xb, c->q, c->k, c->v, c->att,
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

/* ---- attention ---- */

/* Smaller batches (llama.cpp's one-row path) for the G query heads of
 * one KV head: each head's Q rounded to fp16, its own online softmax and
 * fp16 accumulator of V, exactly as when run alone; every K and V row is
 * read once for all G heads. q (G, d) with row stride ldq; out likewise;
 * q16 and acc: G*d halves of scratch each, M: 2*G floats. */
static void attn_f16(const hx_attn_ops *op, const float *q, int ldq, int G,
                     const uint16_t *K, const uint16_t *V, int n_kv, int d,
                     float scale, uint16_t *q16, uint16_t *acc, float *M,
                     float *out)
{
    float *S = M + G;
    for (int g = 0; g < G; g++) {
        op->to_f16(q16 + (size_t)g * d, q + (size_t)g * ldq, d);
        M[g] = -INFINITY;
        S[g] = 0.0f;
    }
    memset(acc, 0, (size_t)G * d * sizeof(uint16_t));
    for (int j = 0; j < n_kv; j++) {
        const uint16_t *kj = K + (size_t)j * d, *vj = V + (size_t)j * d;
        for (int g = 0; g < G; g++) {
            uint16_t *ag = acc + (size_t)g * d;
            const float sc = op->dot_hh(q16 + (size_t)g * d, kj, d) * scale;
            float ms = 1.0f, vs = 1.0f;
            if (sc > M[g]) {
                ms = expf(M[g] - sc);
                M[g] = sc;
                op->scale_h(ag, ms, d);
            } else {
                vs = expf(sc - M[g]);
            }
            op->mad_h(ag, vj, vs, d);
            S[g] = S[g] * ms + vs;
        }
    }
    for (int g = 0; g < G; g++) {
        float *o = out + (size_t)g * ldq;
        const float inv = S[g] == 0.0f ? 0.0f : 1.0f / S[g];
        op->from_f16(o, acc + (size_t)g * d, d);
        for (int i = 0; i < d; i++) o[i] *= inv;
    }
}

typedef struct attn_job {
    hx_ctx *c;
    int layer, B, pos0;
} attn_job;

/* Task t*n_head_kv + kvh of llama.cpp's one-query path (fp16 Q and
 * accumulator): the query heads of KV head kvh for token t, against
 * positions 0..pos0+t. */
static void attn_task_f16(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    hx_ctx *c = j->c;
    const hx_hparams *hp = &c->m->hp;
    const int d = hp->head_dim, G = att_group(c);
    const int t = task / hp->n_head_kv, kvh = task % hp->n_head_kv;
    const size_t off = (((size_t)j->layer * hp->n_head_kv + kvh) * c->n_ctx) * d;
    const size_t qo = ((size_t)t * hp->n_head + (size_t)kvh * G) * d;
    float *w = c->scores + (size_t)thread * scores_stride(c);
    uint16_t *h16 = (uint16_t *)w;
    attn_f16(c->ao, c->q + qo, d, G, (const uint16_t *)c->kc + off,
             (const uint16_t *)c->vc + off, j->pos0 + t + 1, d,
             1.0f / sqrtf((float)d), h16, h16 + (size_t)G * d, w + (size_t)G * d,
             c->att + qo);
}

/* The scratch of one tiled task (see scores_stride). */
typedef struct att_tile {
    float *q, *acc, *s, *kt, *vt, *m, *l;
    int R, G, d, t0, nt;
} att_tile;

/* Key tile [j0, j0+nk) into F32 (pointing into a float cache directly). */
static const float *kv_tile(const hx_ctx *c, const void *base, int j0, int nk,
                            int d, float *buf)
{
    if (c->kv_f32) return (const float *)base + (size_t)j0 * d;
    c->ao->from_f16(buf, (const uint16_t *)base + (size_t)j0 * d, nk * d);
    return buf;
}

/* Online softmax over one key tile for row r whose keys end at lim:
 * rescales the row when its maximum grows, turns scores into weights. */
static void tile_softmax(att_tile *a, int r, int j0, int nk, int lim)
{
    float *s = a->s + (size_t)r * ATT_TK, mt = -INFINITY;
    for (int j = 0; j < nk; j++) {
        if (j0 + j >= lim) s[j] = -INFINITY;
        if (s[j] > mt) mt = s[j];
    }
    if (mt == -INFINITY) {
        for (int j = 0; j < nk; j++) s[j] = 0.0f;
        return;
    }
    if (mt > a->m[r]) {
        const float ms = expf(a->m[r] - mt);
        for (int i = 0; i < a->d; i++) a->acc[(size_t)r * a->d + i] *= ms;
        a->l[r] *= ms;
        a->m[r] = mt;
    }
    double sum = 0.0;
    for (int j = 0; j < nk; j++) {
        s[j] = expf(s[j] - a->m[r]);
        sum += (double)s[j];
    }
    a->l[r] += (float)sum;
}

/* Rows r = i*G + g: token t0+i, query head kvh*G + g. */
static void att_rows_run(hx_ctx *c, att_tile *a, const void *K, const void *V,
                         int pos0)
{
    const int d = a->d, n_keys = pos0 + a->t0 + a->nt;
    const float scale = 1.0f / sqrtf((float)d);
    for (int j0 = 0; j0 < n_keys; j0 += ATT_TK) {
        const int nk = n_keys - j0 < ATT_TK ? n_keys - j0 : ATT_TK;
        const float *kt = kv_tile(c, K, j0, nk, d, a->kt);
        const float *vt = kv_tile(c, V, j0, nk, d, a->vt);
        for (int r = 0; r < a->R; r += 4) {
            const int nr = a->R - r < 4 ? a->R - r : 4;
            c->ao->scores4(a->q + (size_t)r * d, d, nr, kt, nk, d, scale,
                           a->s + (size_t)r * ATT_TK, ATT_TK);
        }
        for (int r = 0; r < a->R; r++)
            tile_softmax(a, r, j0, nk, pos0 + a->t0 + r / a->G + 1);
        for (int r = 0; r < a->R; r += 4) {
            const int nr = a->R - r < 4 ? a->R - r : 4;
            c->ao->pv4(a->acc + (size_t)r * d, d, nr, a->s + (size_t)r * ATT_TK,
                       ATT_TK, vt, nk, d);
        }
    }
}

/* Task kvh * n_tb + tb: the query heads of KV head kvh for tokens of block
 * tb, in F32 (llama.cpp's tiled path, and any batch over a float cache). */
static void attn_task_tiled(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    hx_ctx *c = j->c;
    const hx_hparams *hp = &c->m->hp;
    const int d = hp->head_dim, G = att_group(c), tq = att_tq(c);
    const int n_tb = (j->B + tq - 1) / tq, kvh = task / n_tb, tb = task % n_tb;
    float *w = c->scores + (size_t)thread * scores_stride(c);
    const size_t R = att_rows(c);
    att_tile a = {w, w + R * d, w + 2 * R * d, w + 2 * R * d + R * ATT_TK,
                  w + 2 * R * d + R * ATT_TK + (size_t)ATT_TK * d,
                  w + 2 * R * d + R * ATT_TK + 2 * (size_t)ATT_TK * d, NULL,
                  0, G, d, tb * tq, 0};
    a.l = a.m + R;
    a.nt = j->B - a.t0 < tq ? j->B - a.t0 : tq;
    a.R = a.nt * G;
    for (int r = 0; r < a.R; r++) {
        const float *q = c->q + ((size_t)(a.t0 + r / G) * hp->n_head + kvh * G + r % G) * d;
        memcpy(a.q + (size_t)r * d, q, (size_t)d * sizeof(float));
        memset(a.acc + (size_t)r * d, 0, (size_t)d * sizeof(float));
        a.m[r] = -INFINITY;
        a.l[r] = 0.0f;
    }
    const size_t off = (((size_t)j->layer * hp->n_head_kv + kvh) * c->n_ctx) * d;
    const size_t el = c->kv_f32 ? sizeof(float) : sizeof(uint16_t);
    att_rows_run(c, &a, (const char *)c->kc + off * el, (const char *)c->vc + off * el,
                 j->pos0);
    for (int r = 0; r < a.R; r++) {
        float *out = c->att + ((size_t)(a.t0 + r / G) * hp->n_head + kvh * G + r % G) * d;
        const float inv = a.l[r] == 0.0f ? 0.0f : 1.0f / a.l[r];
        for (int i = 0; i < d; i++) out[i] = a.acc[(size_t)r * d + i] * inv;
    }
}

static void store_kv(hx_ctx *c, size_t off, const float *k, const float *v,
                     int d)
{
    if (c->kv_f32) {
        memcpy((float *)c->kc + off, k, (size_t)d * sizeof(float));
        memcpy((float *)c->vc + off, v, (size_t)d * sizeof(float));
        return;
    }
    c->ao->to_f16((uint16_t *)c->kc + off, k, d);
    c->ao->to_f16((uint16_t *)c->vc + off, v, d);
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
        size_t off = ((((size_t)j->layer * nkv + h) * c->n_ctx) + j->pos0 + t) * d;
        store_kv(c, off, k, v, d);
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
    attn_job j = {c, l, B, pos0};
    if (!c->kv_f32 && B < FA_TILE_Q)
        hx_threadpool_run(c->tp, B * hp->n_head_kv, attn_task_f16, &j);
    else
        hx_threadpool_run(c->tp, hp->n_head_kv * ((B + att_tq(c) - 1) / att_tq(c)),
                          attn_task_tiled, &j);
    matmul(c, &L->wo, c->att, B, c->xb);
    for (size_t i = 0; i < (size_t)B * e; i++) c->x[i] += c->xb[i];
}

/* ---- feed-forward ---- */

static void ffn_dense(hx_ctx *c, const hx_layer *L, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const hx_wmat *w[2] = {&L->ffn_gate, &L->ffn_up};
    float *y[2] = {c->hb, c->hb2};
    matmul_n(c, w, y, 2, c->xb, B);
    swiglu(c->tp, c->hb, c->hb2, (int64_t)B * hp->n_ff);
    matmul(c, &L->ffn_down, c->hb, B, c->xb);
}

/* Router of one token (model_int.h): softmax over experts, top-k (best
 * first, ties to the lower index), weights renormalised to sum 1 with the
 * sum clamped as llama.cpp does. p (n_expert) is overwritten by the
 * probabilities. */
void hx_moe_route(float *p, int ne, int nu, int norm, int32_t *sel, float *w)
{
    float mx = -INFINITY;
    for (int i = 0; i < ne; i++) mx = p[i] > mx ? p[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < ne; i++) {
        p[i] = expf(p[i] - mx);
        sum += (double)p[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < ne; i++) p[i] *= inv;
    double ws = 0.0;
    for (int s = 0; s < nu; s++) {
        int best = -1;
        for (int i = 0; i < ne; i++) {
            int used = 0;
            for (int u = 0; u < s; u++) used |= sel[u] == i;
            if (!used && (best < 0 || p[i] > p[best])) best = i;
        }
        sel[s] = best;
        w[s] = p[best];
        ws += (double)w[s];
    }
    float wsum = (float)ws;
    if (wsum < 6.103515625e-5f) wsum = 6.103515625e-5f;
    if (norm)
        for (int s = 0; s < nu; s++) w[s] /= wsum;
}

static void moe_route(hx_ctx *c, const hx_layer *L, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const int ne = hp->n_expert, nu = hp->n_expert_used;
    matmul(c, &L->ffn_gate_inp, c->xb, B, c->rl);
    for (int t = 0; t < B; t++)
        hx_moe_route(c->rl + (size_t)t * ne, ne, nu, hp->expert_weights_norm,
                     c->sel + (size_t)t * nu, c->selw + (size_t)t * nu);
}

/* Groups the (token, slot) pairs by expert (counting sort); cnt[e] pairs of
 * expert e start at pair first[e]. */
static void moe_group(hx_ctx *c, int B, int *cnt, int *first)
{
    const hx_hparams *hp = &c->m->hp;
    const int ne = hp->n_expert, nu = hp->n_expert_used;
    memset(cnt, 0, (size_t)ne * sizeof(int));
    for (int i = 0; i < B * nu; i++) cnt[c->sel[i]]++;
    for (int e = 0, acc = 0; e < ne; e++) {
        first[e] = acc;
        acc += cnt[e];
    }
    int *fill = first + ne;
    memcpy(fill, first, (size_t)ne * sizeof(int));
    for (int i = 0; i < B * nu; i++) {
        int p = fill[c->sel[i]]++;
        c->ptok[p] = i / nu;
        c->pslot[i] = p;
    }
}

/* Gate and up of every used expert on its tokens, one pool run:
 * pair rows [first[x], first[x] + cnt[x]) of hb and hb2. */
static void moe_up(hx_ctx *c, const hx_layer *L, int B, const int *cnt,
                   const int *first)
{
    const int fx = c->m->hp.n_ff_exp;
    int nj = 0;
    if (hx_act_type(L->gate_exps.type) != hx_act_type(L->up_exps.type)) {
        for (int x = 0; x < c->m->hp.n_expert; x++) {
            if (!cnt[x]) continue;
            hx_matmul_expert(c->tp, L->gate_exps.data, L->gate_exps.type,
                             L->gate_exps.cols, fx, x, c->xb, L->gate_exps.cols,
                             c->ptok + first[x], cnt[x],
                             c->hb + (size_t)first[x] * fx, fx);
            hx_matmul_expert(c->tp, L->up_exps.data, L->up_exps.type,
                             L->up_exps.cols, fx, x, c->xb, L->up_exps.cols,
                             c->ptok + first[x], cnt[x],
                             c->hb2 + (size_t)first[x] * fx, fx);
        }
        return;
    }
    quantize(c, L->gate_exps.type, c->xb, B, L->gate_exps.cols);
    for (int x = 0; x < c->m->hp.n_expert; x++) {
        if (!cnt[x]) continue;
        const int32_t *tok = c->ptok + first[x];
        c->jobs[nj++] = job(c, &L->gate_exps, hx_wmat_at(&L->gate_exps, x), tok,
                            cnt[x], c->hb + (size_t)first[x] * fx);
        c->jobs[nj++] = job(c, &L->up_exps, hx_wmat_at(&L->up_exps, x), tok,
                            cnt[x], c->hb2 + (size_t)first[x] * fx);
    }
    hx_matmul_jobs(c->tp, c->jobs, nj);
}

/* Down projection of every pair row of hb into eo, one pool run. */
static void moe_down(hx_ctx *c, const hx_layer *L, int B, const int *cnt,
                     const int *first, const int32_t *iota)
{
    const hx_hparams *hp = &c->m->hp;
    int nj = 0;
    quantize(c, L->down_exps.type, c->hb, B * hp->n_expert_used, hp->n_ff_exp);
    for (int x = 0; x < hp->n_expert; x++) {
        if (!cnt[x]) continue;
        c->jobs[nj++] = job(c, &L->down_exps, hx_wmat_at(&L->down_exps, x),
                            iota + first[x], cnt[x],
                            c->eo + (size_t)first[x] * hp->n_embd);
    }
    hx_matmul_jobs(c->tp, c->jobs, nj);
}

static void ffn_moe(hx_ctx *c, const hx_layer *L, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const int ne = hp->n_expert, nu = hp->n_expert_used, e = hp->n_embd;
    const int fx = hp->n_ff_exp;
    int *cnt = c->moe_idx;
    int *first = cnt + ne, *iota = cnt + 3 * (size_t)ne;
    moe_route(c, L, B);
    moe_group(c, B, cnt, first);
    for (int i = 0; i < B * nu; i++) iota[i] = i;
    moe_up(c, L, B, cnt, first);
    swiglu(c->tp, c->hb, c->hb2, (int64_t)B * nu * fx);
    moe_down(c, L, B, cnt, first, iota);
    for (int t = 0; t < B; t++) {
        float *o = c->xb + (size_t)t * e;
        for (int s = 0; s < nu; s++) {
            const float w = c->selw[t * nu + s];
            const float *y = c->eo + (size_t)c->pslot[t * nu + s] * e;
            for (int i = 0; i < e; i++) o[i] = s ? o[i] + y[i] * w : y[i] * w;
        }
    }
}

static void ffn_block(hx_ctx *c, int l, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const hx_layer *L = &c->m->layers[l];
    const int e = hp->n_embd;
    for (int t = 0; t < B; t++)
        rmsnorm(c->xb + (size_t)t * e, c->x + (size_t)t * e, L->ffn_norm, e,
                hp->rms_eps);
    if (hp->n_expert) ffn_moe(c, L, B);
    else ffn_dense(c, L, B);
    for (size_t i = 0; i < (size_t)B * e; i++) c->x[i] += c->xb[i];
}

/* ---- passes ---- */

static void embed(hx_ctx *c, const int32_t *tok, int B)
{
    const hx_wmat *w = &c->m->tok_embd;
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
    matmul(c, &c->m->output, c->xb, B - from, logits);
}

/* One pass over B <= n_batch tokens at positions n_past..; logits of
 * tokens [out_from, B) (out_from == B: none) go to logits. */
static void forward(hx_ctx *c, const int32_t *tok, int B, int out_from,
                    float *logits)
{
    embed(c, tok, B);
    const hx_hparams *hp = &c->m->hp;
    for (int t = 0; t < B; t++)
        rope_angles(c->rope_cs + (size_t)t * hp->head_dim, hp->head_dim,
                    c->n_past + t, hp->rope_base, c->m->rope_freq_scale);
    for (int l = 0; l < c->m->hp.n_layer; l++) {
        attention_block(c, l, B, c->n_past);
        ffn_block(c, l, B);
    }
    c->n_past += B;
    if (out_from < B) head(c, out_from, B, logits);
}

static int check_decode(hx_ctx *c, const int32_t *tokens, int n)
{
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
    return HX_OK;
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

int hx_decode(hx_ctx *c, const int32_t *tokens, int n, int logits_all)
{
    int rc = check_decode(c, tokens, n);
    if (!rc) rc = reserve_logits(c, logits_all ? (size_t)n : 1);
    if (rc) return rc;
    c->n_out = logits_all ? n : 1;
    c->out_first = logits_all ? 0 : n - 1;
    for (int off = 0; off < n; off += c->n_batch) {
        int B = n - off < c->n_batch ? n - off : c->n_batch;
        int from = logits_all ? 0 : (off + B == n ? B - 1 : B);
        float *lg = c->logits + (logits_all ? (size_t)off * c->m->hp.n_vocab : 0);
        forward(c, tokens + off, B, from, lg);
    }
    return HX_OK;
}
