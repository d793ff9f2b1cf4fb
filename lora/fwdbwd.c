/* fwdbwd.c: the whole-model training forward and backward of a qwen3
 * model (activations saved or recomputed per layer; actmem.c lays them
 * out), with masked cross-entropy on a tied head in chunks of rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lora/train_int.h"

/* ---- batch geometry ---- */

static int check_batch(const hx_trainer *tr, const hx_batch *b, hx_err *err)
{
    if (!b || b->n_seq < 1 || b->n_tok < 1 || !b->tokens)
        return hx_err_set(err, HX_ERR_INVALID, "train: empty batch");
    const int n = b->n_seq * b->n_tok;
    for (int i = 0; i < n; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= tr->hp.n_vocab ||
            (b->targets && (b->targets[i] < 0 || b->targets[i] >= tr->hp.n_vocab)))
            return hx_err_set(err, HX_ERR_RANGE, "train: token id at %d "
                              "outside the vocabulary of %d", i, tr->hp.n_vocab);
    }
    if (!b->soft_p || b->soft_k <= 0) return HX_OK;
    if (!b->soft_id || !b->targets)
        return hx_err_set(err, HX_ERR_INVALID, "train: soft targets without ids or targets");
    const size_t k = (size_t)b->soft_k;
    for (size_t t = 0; t < (size_t)n; t++) {
        const int32_t *id = b->soft_id + t * k;
        const float *q = b->soft_p + t * k;
        for (size_t j = 0; q[0] > 0 && j < k; j++)
            if (id[j] < 0 || id[j] >= tr->hp.n_vocab || !(q[j] >= 0))
                return hx_err_set(err, HX_ERR_RANGE, "train: soft target %zu of position "
                                  "%zu is not a probability on a token of the vocabulary",
                                  j, t);
    }
    return HX_OK;
}

/* start[i]: first token of i's document (in its sequence); pre[i]: its
 * shared prefix; pos[i]. A sequence may be longer than the context when
 * it packs documents, but no position may reach it. */
static int geometry(hx_trainer *tr, const hx_batch *b, hx_err *err)
{
    for (int s = 0; s < b->n_seq; s++) {
        int ds = 0;
        for (int i = 0; i < b->n_tok; i++) {
            const int t = s * b->n_tok + i;
            if (b->doc && i > 0 && b->doc[t] != b->doc[t - 1]) ds = i;
            const int pre = b->pre && b->pre[t] > 0 && b->pre[t] <= ds ? b->pre[t] : 0;
            tr->start[t] = ds;
            tr->pre[t] = pre;
            tr->pos[t] = pre + i - ds;
            if (tr->pos[t] >= tr->hp.n_ctx_train)
                return hx_err_set(err, HX_ERR_RANGE, "train: token %d of sequence "
                                  "%d is at position %d, beyond the context of %d",
                                  i, s, tr->pos[t], tr->hp.n_ctx_train);
        }
    }
    return HX_OK;
}

/* ---- token-wise ops on the pool: chunks of tokens, each chunk's output
 * rows its own (sums over tokens, the gain gradients, stay serial and in
 * order, so results do not depend on the thread count) ---- */
#define ROW_CHUNK 64

typedef void (*rows_fn)(const hx_trainer *tr, const void *ctx, int t0, int t1);
typedef struct rows_job {
    const hx_trainer *tr;
    const void *ctx;
    rows_fn fn;
    int n;
} rows_job;

static void rows_task(void *ctx, int task, int thread)
{
    const rows_job *j = ctx;
    const int t0 = task * ROW_CHUNK, t1 = t0 + ROW_CHUNK < j->n ? t0 + ROW_CHUNK : j->n;
    (void)thread;
    j->fn(j->tr, j->ctx, t0, t1);
}

static void par_rows(const hx_trainer *tr, int n, rows_fn fn, const void *ctx)
{
    rows_job j = {tr, ctx, fn, n};
    hx_threadpool_run(tr->tp, (n + ROW_CHUNK - 1) / ROW_CHUNK, rows_task, &j);
}

/* ---- attention on the pool: tasks are (sequence, head) ---- */
typedef struct attn_job {
    hx_trainer *tr;
    const tr_acts *A;
    int n_seq, T;
    float *dout, *dq, *dk, *dv;
} attn_job;

static tr_attn attn_of(const attn_job *j, int s)
{
    const hx_hparams *hp = &j->tr->hp;
    tr_attn a = {j->T, hp->n_head, hp->n_head_kv, hp->head_dim,
                 j->tr->start + (size_t)s * j->T, j->tr->pre + (size_t)s * j->T, j->tr->bf16};
    return a;
}

static void attn_fwd_task(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    const hx_hparams *hp = &j->tr->hp;
    const int s = task / hp->n_head, h = task % hp->n_head;
    const size_t qo = (size_t)s * j->T * hp->n_head * hp->head_dim;
    const size_t ko = (size_t)s * j->T * hp->n_head_kv * hp->head_dim;
    tr_attn a = attn_of(j, s);
    hx_tr_attn_fwd_head(&a, h, j->A->q + qo, j->A->k + ko, j->A->v + ko,
                        j->A->o + qo, j->A->lse + (size_t)s * j->T * hp->n_head,
                        j->tr->scratch + (size_t)thread * j->tr->scratch_n);
}

static void attn_bwd_task(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    const hx_hparams *hp = &j->tr->hp;
    const int s = task / hp->n_head_kv, g = task % hp->n_head_kv;
    const size_t qo = (size_t)s * j->T * hp->n_head * hp->head_dim;
    const size_t ko = (size_t)s * j->T * hp->n_head_kv * hp->head_dim;
    tr_attn a = attn_of(j, s);
    hx_tr_attn_bwd_group(&a, g, j->A->q + qo, j->A->k + ko, j->A->v + ko,
                         j->A->o + qo, j->A->lse + (size_t)s * j->T * hp->n_head,
                         j->dout + qo, j->dq + qo, j->dk + ko, j->dv + ko,
                         j->tr->scratch + (size_t)thread * j->tr->scratch_n);
}

/* ---- one layer ---- */

/* Backward temporaries (in tr->mem after the activations). */
typedef struct bw {
    float *dres, *dn, *dq, *dk, *dv, *dqp, *dkp, *dox, *da, *db, *dsw, *du;
} bw;

/* Arguments of the token-wise ops below. */
typedef struct rows_args {
    float *dst, *r, *dx, *dy;
    const float *src, *g, *x, *rr;
    int nh;
} rows_args;

/* q/k norm and RoPE of each head: dst = rope(norm(src)). */
static void qk_fwd_rows(const hx_trainer *tr, const void *ctx, int t0, int t1)
{
    const rows_args *a = ctx;
    const int d = tr->hp.head_dim, nh = a->nh;
    for (int t = t0; t < t1; t++)
        for (int h = 0; h < nh; h++) {
            const size_t o = ((size_t)t * nh + h) * d;
            if (a->g) hx_tr_rmsnorm_fwd(a->dst + o, &a->r[(size_t)t * nh + h], a->src + o, a->g, d, tr->hp.rms_eps);
            else memcpy(a->dst + o, a->src + o, (size_t)d * sizeof(float));
            hx_tr_rope_fwd(a->dst + o, tr->rope_cs + (size_t)tr->pos[t] * d, d);
        }
}

static void qk_fwd(const hx_trainer *tr, float *dst, float *r, const float *src,
                   const float *g, int n, int nh)
{
    rows_args a = {dst, r, NULL, NULL, src, g, NULL, NULL, nh};
    par_rows(tr, n, qk_fwd_rows, &a);
}

/* dsrc += norm'(rope^-1(ddst)) without the gain gradient (ddst is rotated
 * in place). */
static void qk_bwd_rows(const hx_trainer *tr, const void *ctx, int t0, int t1)
{
    const rows_args *a = ctx;
    const int d = tr->hp.head_dim, nh = a->nh;
    for (int t = t0; t < t1; t++)
        for (int h = 0; h < nh; h++) {
            const size_t o = ((size_t)t * nh + h) * d;
            hx_tr_rope_bwd(a->dy + o, tr->rope_cs + (size_t)tr->pos[t] * d, d);
            if (!a->g)
                for (int e = 0; e < d; e++) a->dx[o + e] += a->dy[o + e];
            else
                hx_tr_rmsnorm_bwd(a->dx + o, NULL, a->dy + o, a->src + o, a->rr[(size_t)t * nh + h], a->g, d);
        }
}

/* dg += dy x^ over rows of n (x^ = r x), in token order. */
static void gain_grad(float *dg, const float *dy, const float *x, const float *r,
                      size_t rows, int n)
{
    for (size_t t = 0; t < rows; t++)
        for (int i = 0; i < n; i++) dg[i] += dy[t * n + i] * (x[t * n + i] * r[t]);
}

/* Inverse: dsrc += norm'(rope^-1(ddst)) (ddst is rotated in place). */
static void qk_bwd(const hx_trainer *tr, float *dsrc, float *dg, float *ddst,
                   const float *r, const float *src, const float *g, int n,
                   int nh)
{
    rows_args a = {NULL, NULL, dsrc, ddst, src, g, NULL, r, nh};
    par_rows(tr, n, qk_bwd_rows, &a);
    if (g && dg) gain_grad(dg, ddst, src, r, (size_t)n * nh, tr->hp.head_dim);
}

static void norm_fwd_rows(const hx_trainer *tr, const void *ctx, int t0, int t1)
{
    const rows_args *a = ctx;
    const int C = tr->hp.n_embd;
    for (int t = t0; t < t1; t++)
        hx_tr_rmsnorm_fwd(a->dst + (size_t)t * C, &a->r[t], a->src + (size_t)t * C, a->g, C, tr->hp.rms_eps);
}

static void norm_rows(const hx_trainer *tr, float *y, float *r, const float *x,
                      const float *g, int n)
{
    rows_args a = {y, r, NULL, NULL, x, g, NULL, NULL, 1};
    par_rows(tr, n, norm_fwd_rows, &a);
}

/* dst = src + x (residual), dst may be src. */
static void add_rows(const hx_trainer *tr, const void *ctx, int t0, int t1)
{
    const rows_args *a = ctx;
    const size_t C = (size_t)tr->hp.n_embd;
    for (size_t i = (size_t)t0 * C; i < (size_t)t1 * C; i++) a->dst[i] = a->src[i] + a->x[i];
}

static void residual(const hx_trainer *tr, float *dst, const float *src,
                     const float *x, int n)
{
    rows_args a = {dst, NULL, NULL, NULL, src, NULL, x, NULL, 1};
    par_rows(tr, n, add_rows, &a);
}

/* s = swiglu(a, b) and its backward, F per token. */
static void swiglu_fwd_rows(const hx_trainer *tr, const void *ctx, int t0, int t1)
{
    const rows_args *a = ctx;
    const size_t F = tr_ffn_width(&tr->hp);
    hx_tr_swiglu_fwd(a->dst + t0 * F, a->src + t0 * F, a->x + t0 * F, (size_t)(t1 - t0) * F);
}

static void swiglu_bwd_rows(const hx_trainer *tr, const void *ctx, int t0, int t1)
{
    const rows_args *a = ctx;
    const size_t F = tr_ffn_width(&tr->hp);
    hx_tr_swiglu_bwd(a->dx + t0 * F, a->dst + t0 * F, a->dy + t0 * F, a->src + t0 * F,
                  a->x + t0 * F, (size_t)(t1 - t0) * F);
}

/* Linear i of layer l on n rows of x into y (keep's sums too while they
 * are being collected). */
static void lin_fwd(hx_trainer *tr, int l, int i, const float *x, int n, float *y)
{
    const tr_lin *li = &tr->layers[l].lin[i];
    hx_tr_lin_fwd(tr->tp, li, x, n, y, tr->acts[l].u[i], tr->scratch);
    if (tr->keep_collecting && li->a) hx_tr_keep_add(tr, l, i, x, y, n);
}

static void layer_fwd(hx_trainer *tr, int l, const hx_batch *b, float *xout,
                      float *tmp)
{
    const hx_hparams *hp = &tr->hp;
    const tr_acts *A = &tr->acts[l];
    const tr_layer *L = &tr->layers[l];
    const int n = b->n_seq * b->n_tok;
    norm_rows(tr, A->n1, A->r1, A->x, L->attn_norm, n);
    lin_fwd(tr, l, L_Q, A->n1, n, A->qp);
    lin_fwd(tr, l, L_K, A->n1, n, A->kp);
    lin_fwd(tr, l, L_V, A->n1, n, A->v);
    qk_fwd(tr, A->q, A->rq, A->qp, L->q_norm, n, hp->n_head);
    qk_fwd(tr, A->k, A->rk, A->kp, L->k_norm, n, hp->n_head_kv);
    attn_job j = {tr, A, b->n_seq, b->n_tok, NULL, NULL, NULL, NULL};
    hx_threadpool_run(tr->tp, b->n_seq * hp->n_head, attn_fwd_task, &j);
    lin_fwd(tr, l, L_O, A->o, n, tmp);
    residual(tr, A->h, A->x, tmp, n);
    norm_rows(tr, A->n2, A->r2, A->h, L->ffn_norm, n);
    if (hp->n_expert) hx_tr_moe_up(tr, l, n);
    else lin_fwd(tr, l, L_GATE, A->n2, n, A->a), lin_fwd(tr, l, L_UP, A->n2, n, A->b);
    rows_args sw = {A->s, NULL, NULL, NULL, A->a, NULL, A->b, NULL, 1};
    par_rows(tr, n, swiglu_fwd_rows, &sw);
    if (hp->n_expert) hx_tr_moe_down(tr, l, n, tmp);
    else lin_fwd(tr, l, L_DOWN, A->s, n, tmp);
    residual(tr, xout, A->h, tmp, n);
}

static void zero(float *p, size_t n) { memset(p, 0, n * sizeof(float)); }

static void norm_bwd_rows(const hx_trainer *tr, const void *ctx, int t0, int t1)
{
    const rows_args *a = ctx;
    const int C = tr->hp.n_embd;
    for (int t = t0; t < t1; t++)
        hx_tr_rmsnorm_bwd(a->dx + (size_t)t * C, NULL, a->dy + (size_t)t * C,
                          a->src + (size_t)t * C, a->rr[t], a->g, C);
}

static void norm_rows_bwd(const hx_trainer *tr, float *dx, float *dg,
                          const float *dy, const float *x, const float *r,
                          const float *g, int n)
{
    rows_args a = {NULL, NULL, dx, (float *)dy, x, g, NULL, r, 1};
    par_rows(tr, n, norm_bwd_rows, &a);
    if (dg) gain_grad(dg, dy, x, r, (size_t)n, tr->hp.n_embd);
}

/* Backward of the FFN half: w->dres holds d(out) and becomes d(h). */
static void ffn_bwd(hx_trainer *tr, int l, int n, const bw *w)
{
    const hx_hparams *hp = &tr->hp;
    const tr_acts *A = &tr->acts[l];
    const tr_layer *L = &tr->layers[l];
    const size_t nf = (size_t)n * tr_ffn_width(hp);
    float *sc = tr->scratch;
    zero(w->dsw, nf);
    if (hp->n_expert) hx_tr_moe_down_bwd(tr, l, n, w->dres, w->dsw);
    else hx_tr_lin_bwd(tr->tp, &L->lin[L_DOWN], A->s, A->u[L_DOWN], w->dres, n, w->dsw, w->du, sc);
    zero(w->da, nf);
    zero(w->db, nf);
    rows_args sw = {w->db, NULL, w->da, w->dsw, A->a, NULL, A->b, NULL, 1};
    par_rows(tr, n, swiglu_bwd_rows, &sw);
    zero(w->dn, (size_t)n * hp->n_embd);
    if (hp->n_expert) {
        hx_tr_moe_up_bwd(tr, l, n, w->da, w->db, w->dn);
    } else {
        hx_tr_lin_bwd(tr->tp, &L->lin[L_GATE], A->n2, A->u[L_GATE], w->da, n, w->dn, w->du, sc);
        hx_tr_lin_bwd(tr->tp, &L->lin[L_UP], A->n2, A->u[L_UP], w->db, n, w->dn, w->du, sc);
    }
    norm_rows_bwd(tr, w->dres, L->d_ffn_norm, w->dn, A->h, A->r2, L->ffn_norm, n);
}

/* Backward of the attention half: w->dres d(h) becomes d(x). */
static void attn_bwd(hx_trainer *tr, int l, const hx_batch *b, const bw *w)
{
    const hx_hparams *hp = &tr->hp;
    const tr_acts *A = &tr->acts[l];
    const tr_layer *L = &tr->layers[l];
    const int n = b->n_seq * b->n_tok;
    const size_t nq = (size_t)n * hp->n_head * hp->head_dim;
    const size_t nk = (size_t)n * hp->n_head_kv * hp->head_dim;
    float *sc = tr->scratch;
    zero(w->dox, nq);
    hx_tr_lin_bwd(tr->tp, &L->lin[L_O], A->o, A->u[L_O], w->dres, n, w->dox, w->du, sc);
    zero(w->dq, nq);
    zero(w->dk, nk);
    zero(w->dv, nk);
    attn_job j = {tr, A, b->n_seq, b->n_tok, w->dox, w->dq, w->dk, w->dv};
    hx_threadpool_run(tr->tp, b->n_seq * hp->n_head_kv, attn_bwd_task, &j);
    zero(w->dqp, nq);
    zero(w->dkp, nk);
    qk_bwd(tr, w->dqp, L->d_q_norm, w->dq, A->rq, A->qp, L->q_norm, n, hp->n_head);
    qk_bwd(tr, w->dkp, L->d_k_norm, w->dk, A->rk, A->kp, L->k_norm, n, hp->n_head_kv);
    zero(w->dn, (size_t)n * hp->n_embd);
    hx_tr_lin_bwd(tr->tp, &L->lin[L_Q], A->n1, A->u[L_Q], w->dqp, n, w->dn, w->du, sc);
    hx_tr_lin_bwd(tr->tp, &L->lin[L_K], A->n1, A->u[L_K], w->dkp, n, w->dn, w->du, sc);
    hx_tr_lin_bwd(tr->tp, &L->lin[L_V], A->n1, A->u[L_V], w->dv, n, w->dn, w->du, sc);
    norm_rows_bwd(tr, w->dres, L->d_attn_norm, w->dn, A->x, A->r1, L->attn_norm, n);
}

/* ---- head, loss, embedding ---- */

static void embed(hx_trainer *tr, const int32_t *tok, int n, float *x)
{
    const int C = tr->hp.n_embd;
    if (tr->wc) {
        hx_wc_embed_rows(tr->wc, tok, n, x);
        return;
    }
    for (int t = 0; t < n; t++) {
        float *row = x + (size_t)t * C;
        if (tr->embd.f) memcpy(row, tr->embd.f + (size_t)tok[t] * C, (size_t)C * sizeof(float));
        else hx_dequantize_row(tr->embd.q->type, hx_wmat_row(tr->embd.q, 0, tok[t]), row, C);
    }
}

/* The backward temporaries hx_tr_reserve carved (actmem.c). */
static bw bw_of(const hx_trainer *tr)
{
    bw w = {tr->bw[0], tr->bw[1], tr->bw[2], tr->bw[3], tr->bw[4], tr->bw[5],
            tr->bw[6], tr->bw[7], tr->bw[8], tr->bw[9], tr->bw[10], tr->bw[11]};
    return w;
}

/* Per-row loss (and gradient in place of the logits) of a chunk of
 * gathered rows. */
typedef struct xent_job {
    const hx_batch *b;
    const int32_t *rows; /* positions of the chunk's rows */
    float *z;
    double *loss;
    float scale;
    int backward, m, V;
} xent_job;

/* The loss of position t's logits z against its target, soft or not
 * (with dz, the gradient). */
static double row_xent(const hx_batch *b, int t, float *z, int V, float scale, float *dz)
{
    const size_t o = (size_t)t * (size_t)b->soft_k;
    const int w = b->weight && b->weight[t] > 1 ? b->weight[t] : 1;
    if (b->soft_p && b->soft_k > 0 && b->soft_p[o] > 0)
        return w * hx_tr_xent_soft(z, V, b->soft_id + o, b->soft_p + o, b->soft_k, scale * w, dz);
    return w * hx_tr_xent(z, V, b->targets[t], scale * w, dz);
}

static void xent_task(void *ctx, int task, int thread)
{
    const xent_job *j = ctx;
    const int i1 = (task + 1) * ROW_CHUNK < j->m ? (task + 1) * ROW_CHUNK : j->m;
    (void)thread;
    for (int i = task * ROW_CHUNK; i < i1; i++) {
        float *zi = j->z + (size_t)i * j->V;
        j->loss[i] = row_xent(j->b, j->rows[i], zi, j->V, j->scale, j->backward ? zi : NULL);
    }
}

/* Gathered rows [i0, i1) through the head: their losses added in order to
 * *loss and, with dnf, their d(nf) rows stored there (at their
 * positions). */
static void head_chunk(hx_trainer *tr, const hx_batch *b, int i0, int i1,
                       float scale, float *dnf, double *loss)
{
    const int C = tr->hp.n_embd, V = tr->hp.n_vocab, m = i1 - i0;
    const int32_t *rows = tr->gather + i0;
    float *z = tr->hz; /* the gradient replaces the logits */
    for (int i = 0; i < m; i++)
        memcpy(tr->hg + (size_t)i * C, tr->nf + (size_t)rows[i] * C, (size_t)C * sizeof(float));
    hx_tr_mm_fwd(tr->tp, &tr->head.w, tr->hg, m, z, 1.0f, 0, tr->scratch);
    double *rl = hx_malloc_array((size_t)m, sizeof(double));
    xent_job xj = {b, rows, z, rl, scale, dnf != NULL, m, V};
    if (rl) hx_threadpool_run(tr->tp, (m + ROW_CHUNK - 1) / ROW_CHUNK, xent_task, &xj);
    for (int i = 0; i < m; i++) /* in order; serially when memory is short */
        *loss += rl ? rl[i] : row_xent(b, rows[i], z + (size_t)i * V, V, scale,
                                       dnf ? z + (size_t)i * V : NULL);
    free(rl);
    if (!dnf) return;
    zero(tr->hdg, (size_t)m * C);
    hx_tr_lin_bwd(tr->tp, &tr->head, tr->hg, NULL, z, m, tr->hdg, NULL, tr->scratch);
    for (int i = 0; i < m; i++)
        memcpy(dnf + (size_t)rows[i] * C, tr->hdg + (size_t)i * C, (size_t)C * sizeof(float));
}

/* Masked loss (and dz, d(head), d(nf) -> dres when w, the backward) over
 * the positions with a target; the rows are gathered so masked-out
 * positions cost nothing in the head, and go through it head_chunk rows
 * at a time (the logits of a chunk, not of the window, are held; a chunk
 * never leaves fewer than 8 rows behind, so each row takes the same
 * product path and gets the same bits as in one product of all). */
static double head_loss(hx_trainer *tr, const hx_batch *b, const bw *w,
                        double norm, int *n_count)
{
    const int n = b->n_seq * b->n_tok, C = tr->hp.n_embd, R = tr->head_chunk;
    int m = 0;
    for (int t = 0; t < n; t++)
        if (b->targets && (!b->mask || b->mask[t])) tr->gather[m++] = t;
    *n_count = m;
    if (!m) { /* nothing to predict: no gradient flows back */
        if (w) zero(w->dres, (size_t)n * C);
        return 0.0;
    }
    float *dnf = w ? w->dsw : NULL; /* d(nf), scattered */
    if (dnf) zero(dnf, (size_t)n * C);
    double loss = 0.0;
    for (int i0 = 0, i1; i0 < m; i0 = i1) {
        i1 = m - i0 - R < 8 ? m : i0 + R;
        head_chunk(tr, b, i0, i1, (float)(1.0 / norm), dnf, &loss);
    }
    if (!w) return loss;
    zero(w->dres, (size_t)n * C);
    norm_rows_bwd(tr, w->dres, tr->d_out_norm, dnf, tr->xf, tr->rf, tr->out_norm, n);
    return loss;
}

/* The layers of the forward, up to the final norm (tr->nf), in layout. */
static int forward_body(hx_trainer *tr, const hx_batch *b, int layout, hx_err *err)
{
    int rc = check_batch(tr, b, err);
    if (rc) return rc;
    const int n = b->n_seq * b->n_tok, L = tr->hp.n_layer;
    if ((rc = hx_tr_reserve(tr, n, b->n_tok, layout, err))) return rc;
    if ((rc = geometry(tr, b, err))) return rc;
    embed(tr, b->tokens, n, tr->acts[0].x);
    for (int l = 0; l < L; l++)
        layer_fwd(tr, l, b, l + 1 < L ? tr->acts[l + 1].x : tr->xf, tr->tmp);
    norm_rows(tr, tr->nf, tr->rf, tr->xf, tr->out_norm, n);
    return HX_OK;
}

/* HX_ERR_IO when the weight cache failed a read during the pass just run:
 * it computed on stale bytes, and its results are to be dropped. */
static int weights_read(hx_trainer *tr, hx_err *err)
{
    const char *msg;
    const int rc = tr->wc ? hx_wc_error(tr->wc, &msg) : HX_OK;
    if (!rc) return HX_OK;
    hx_err_set(err, rc, "train: %s", msg);
    hx_wc_clear_error(tr->wc);
    return rc;
}

/* Training keeps hx_tr_layout's activations: all of them (TR_SAVE), or
 * each layer's input only (TR_CKPT), when the backward first runs the
 * layer's forward again from it into the one workspace. That is a second
 * forward of every layer but the last: ~+30% compute per step (a forward
 * is about a third of forward + backward), for activation memory of one
 * layer plus the n_layer inputs instead of n_layer layers. The recomputed
 * activations are the same bits (same ops, same order, thread-count
 * independent), so the gradients are too. A forward-only pass (TR_FWD)
 * saves nothing: one layer's activations at a time. */
int hx_tr_forward(hx_trainer *tr, const hx_batch *b, float *logits,
                  double *loss_sum, int *n_count, int backward, double norm,
                  hx_err *err)
{
    const int n = b ? b->n_seq * b->n_tok : 0, L = tr->hp.n_layer, C = tr->hp.n_embd;
    const int layout = backward ? hx_tr_layout(tr, n) : TR_FWD;
    int rc = forward_body(tr, b, layout, err);
    if (rc) return rc;
    if (logits) hx_tr_mm_fwd(tr->tp, &tr->head.w, tr->nf, n, logits, 1.0f, 0, tr->scratch);
    const bw w = bw_of(tr);
    int cnt = 0;
    double loss = head_loss(tr, b, backward ? &w : NULL, norm, &cnt);
    if (loss_sum) *loss_sum = loss;
    if (n_count) *n_count = cnt;
    if (!backward) return weights_read(tr, err);
    for (int l = L - 1; l >= 0; l--) {
        /* the last layer's activations are still in the workspace; the
         * output of a recomputation is not needed (dn is free here) */
        if (layout == TR_CKPT && l < L - 1) layer_fwd(tr, l, b, w.dn, w.dn);
        ffn_bwd(tr, l, n, &w);
        attn_bwd(tr, l, b, &w);
    }
    if (tr->d_embd)
        for (int t = 0; t < n; t++) {
            float *d = tr->d_embd + (size_t)b->tokens[t] * C;
            const float *s = w.dres + (size_t)t * C;
            for (int i = 0; i < C; i++) d[i] += s[i];
        }
    return weights_read(tr, err);
}

/* The k largest of z (V) into id, most likely first, and their softmax
 * over those k into p. */
static void row_topk(const float *z, int V, int k, int32_t *id, float *p)
{
    int m = 0;
    for (int i = 0; i < V; i++) {
        if (m == k && z[i] <= z[id[m - 1]]) continue;
        int j = m < k ? m++ : m - 1;
        for (; j > 0 && z[id[j - 1]] < z[i]; j--) id[j] = id[j - 1];
        id[j] = i;
    }
    double sum = 0.0;
    for (int j = 0; j < m; j++) sum += exp((double)z[id[j]] - z[id[0]]);
    for (int j = 0; j < m; j++) p[j] = (float)(exp((double)z[id[j]] - z[id[0]]) / sum);
    for (int j = m; j < k; j++) id[j] = id[0], p[j] = 0.0f;
}

int hx_trainer_topk(hx_trainer *tr, const hx_batch *b, int k, int32_t *id, float *p,
                    hx_err *err)
{
    if (k < 1 || !id || !p || !b || !b->targets)
        return hx_err_set(err, HX_ERR_INVALID, "train: top-k needs k >= 1, outputs, targets");
    hx_batch nb = *b;
    nb.soft_p = NULL; /* the targets' positions only */
    int rc = forward_body(tr, &nb, TR_FWD, err);
    if (rc) return rc;
    const int n = b->n_seq * b->n_tok, C = tr->hp.n_embd, V = tr->hp.n_vocab;
    int m = 0;
    memset(p, 0, (size_t)n * (size_t)k * sizeof *p);
    memset(id, 0, (size_t)n * (size_t)k * sizeof *id);
    for (int t = 0; t < n; t++)
        if (!b->mask || b->mask[t]) tr->gather[m++] = t;
    for (int i0 = 0, i1; i0 < m; i0 = i1) {
        i1 = i0 + tr->head_chunk < m ? i0 + tr->head_chunk : m;
        for (int i = i0; i < i1; i++)
            memcpy(tr->hg + (size_t)(i - i0) * C, tr->nf + (size_t)tr->gather[i] * C,
                   (size_t)C * sizeof(float));
        hx_tr_mm_fwd(tr->tp, &tr->head.w, tr->hg, i1 - i0, tr->hz, 1.0f, 0, tr->scratch);
        for (int i = i0; i < i1; i++) {
            const size_t o = (size_t)tr->gather[i] * (size_t)k;
            row_topk(tr->hz + (size_t)(i - i0) * V, V, k, id + o, p + o);
        }
    }
    return weights_read(tr, err);
}
