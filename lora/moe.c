/* moe.c: the training forward and backward of a qwen3moe FFN around its
 * SwiGLU: softmax router, top-k experts (the choice fixed in the
 * backward), renormalised weights, frozen experts read in place or
 * through the engine's weight cache, as engine/moe.c computes them for
 * inference. */
#include <string.h>

#include "lora/train_int.h"

/* Expert e of layer l: its gate, up and down as plain matrices. */
typedef struct tr_expert {
    hx_wmat m[3];
} tr_expert;

/* Holds expert e of layer l in x: the weight cache's slot (held until
 * expert_put; the layer's next experts in direction dir, by tr->moe.cnt,
 * read ahead) or the mapping. The same bytes either way, so the same
 * products. A layer's passes run its experts in alternating directions
 * (forward up downward, down upward; backward down downward, up upward,
 * whose order fixes how each token's input gradient sums; the others
 * write rows of their own), so that under a weight cache each pass finds
 * the last experts of the one before still in the slots. */
static void expert_get(hx_trainer *tr, int l, int e, int dir, tr_expert *x)
{
    const void *p[3] = {NULL, NULL, NULL};
    if (tr->wc) hx_wc_expert_get(tr->wc, l, e, tr->moe.cnt, dir, p);
    for (int k = 0; k < 3; k++) {
        const hx_wmat *w = tr->layers[l].exps[k];
        x->m[k] = *w;
        x->m[k].n_mat = 1;
        x->m[k].data = tr->wc ? p[k] : hx_wmat_at(w, e);
    }
}

static void expert_put(hx_trainer *tr, int l, int e)
{
    if (tr->wc) hx_wc_expert_put(tr->wc, l, e);
}

/* Matrix k (0 gate, 1 up, 2 down) of a held expert as a weight. */
static tr_w expert(const tr_expert *x, int k)
{
    const hx_wmat *w = &x->m[k];
    return (tr_w){.q = w, .rows = (int)w->rows, .cols = (int)w->cols};
}

/* Groups the (token, slot) pairs by expert, in token order within one
 * (engine/moe.c's order): cnt[e] pairs of expert e from first[e]. */
static void group(const hx_trainer *tr, const int32_t *sel, int n)
{
    const tr_moe_ws *w = &tr->moe;
    const int E = tr->hp.n_expert, U = tr->hp.n_expert_used;
    memset(w->cnt, 0, (size_t)E * sizeof *w->cnt);
    for (int i = 0; i < n * U; i++) w->cnt[sel[i]]++;
    for (int e = 0, acc = 0; e < E; e++) w->first[e] = acc, acc += w->cnt[e];
    int32_t *fill = w->first + E;
    memcpy(fill, w->first, (size_t)E * sizeof *fill);
    for (int i = 0; i < n * U; i++) {
        const int p = fill[sel[i]]++;
        w->ptok[p] = i / U;
        w->pslot[i] = p;
    }
}

/* Rows tok[0..m) of x (cols floats each) into dst. */
static void gather(float *dst, const float *x, const int32_t *tok, int m, int cols)
{
    for (int i = 0; i < m; i++)
        memcpy(dst + (size_t)i * cols, x + (size_t)tok[i] * cols, (size_t)cols * sizeof(float));
}

void hx_tr_moe_up(hx_trainer *tr, int l, int n)
{
    const hx_hparams *hp = &tr->hp;
    const int E = hp->n_expert, U = hp->n_expert_used, F = hp->n_ff_exp, C = hp->n_embd;
    tr_acts *A = &tr->acts[l];
    const tr_moe_ws *w = &tr->moe;
    hx_tr_mm_fwd(tr->tp, &tr->layers[l].router, A->n2, n, A->rp, 1.0f, 0, tr->scratch);
    for (int t = 0; t < n; t++)
        hx_moe_route(A->rp + (size_t)t * E, E, U, hp->expert_weights_norm,
                     A->sel + (size_t)t * U, A->ew + (size_t)t * U);
    group(tr, A->sel, n);
    for (int e = E - 1; e >= 0; e--) { /* downward: see expert_get */
        if (!w->cnt[e]) continue;
        const size_t p0 = (size_t)w->first[e];
        tr_expert x;
        expert_get(tr, l, e, -1, &x);
        const tr_w g = expert(&x, 0), u = expert(&x, 1);
        gather(w->x, A->n2, w->ptok + p0, w->cnt[e], C);
        hx_tr_mm_fwd(tr->tp, &g, w->x, w->cnt[e], A->a + p0 * F, 1.0f, 0, tr->scratch);
        hx_tr_mm_fwd(tr->tp, &u, w->x, w->cnt[e], A->b + p0 * F, 1.0f, 0, tr->scratch);
        expert_put(tr, l, e);
    }
}

void hx_tr_moe_down(hx_trainer *tr, int l, int n, float *out)
{
    const hx_hparams *hp = &tr->hp;
    const int E = hp->n_expert, U = hp->n_expert_used, F = hp->n_ff_exp, C = hp->n_embd;
    const tr_acts *A = &tr->acts[l];
    const tr_moe_ws *w = &tr->moe;
    for (int e = 0; e < E; e++) {
        if (!w->cnt[e]) continue;
        const size_t p0 = (size_t)w->first[e];
        tr_expert x;
        expert_get(tr, l, e, 1, &x);
        const tr_w d = expert(&x, 2);
        hx_tr_mm_fwd(tr->tp, &d, A->s + p0 * F, w->cnt[e], A->ey + p0 * C, 1.0f, 0, tr->scratch);
        expert_put(tr, l, e);
    }
    for (int t = 0; t < n; t++) { /* in slot order, as the engine sums */
        float *o = out + (size_t)t * C;
        for (int k = 0; k < U; k++) {
            const float wk = A->ew[t * U + k];
            const float *y = A->ey + (size_t)w->pslot[t * U + k] * C;
            for (int i = 0; i < C; i++) o[i] = k ? o[i] + y[i] * wk : y[i] * wk;
        }
    }
}

/* dw[t, k] = dout_t . y_(t,k): the gradient of each routing weight. */
static void weight_grads(const hx_trainer *tr, const tr_acts *A, int n, const float *dout)
{
    const int U = tr->hp.n_expert_used, C = tr->hp.n_embd;
    for (int t = 0; t < n; t++)
        for (int k = 0; k < U; k++)
            tr->moe.dw[t * U + k] = tr_dot(dout + (size_t)t * C,
                                           A->ey + (size_t)tr->moe.pslot[t * U + k] * C, C);
}

void hx_tr_moe_down_bwd(hx_trainer *tr, int l, int n, const float *dout, float *ds)
{
    const hx_hparams *hp = &tr->hp;
    const int E = hp->n_expert, U = hp->n_expert_used, F = hp->n_ff_exp, C = hp->n_embd;
    const tr_acts *A = &tr->acts[l];
    const tr_moe_ws *w = &tr->moe;
    group(tr, A->sel, n); /* the forward's grouping, again (a recomputed layer's) */
    weight_grads(tr, A, n, dout);
    for (int e = E - 1; e >= 0; e--) { /* downward: see expert_get */
        if (!w->cnt[e]) continue;
        const size_t p0 = (size_t)w->first[e];
        for (int i = 0; i < w->cnt[e]; i++) { /* dy of pair p0 + i: its weight times dout */
            const int p = (int)p0 + i, t = w->ptok[p];
            int k = 0;
            while (w->pslot[t * U + k] != p) k++;
            const float wk = A->ew[t * U + k], *d = dout + (size_t)t * C;
            for (int j = 0; j < C; j++) w->x[(size_t)i * C + j] = d[j] * wk;
        }
        tr_expert x;
        expert_get(tr, l, e, -1, &x);
        const tr_w d = expert(&x, 2);
        hx_tr_mm_bwd_x(tr->tp, &d, w->x, w->cnt[e], ds + p0 * F, 1.0f, tr->scratch);
        expert_put(tr, l, e);
    }
}

/* dz (n, E): the router logits' gradient from the weights' (dw): through
 * the renormalisation w_k = p_k / S (S = the chosen p's sum, unless
 * clamped: then a constant) and the softmax; unchosen experts get their
 * share through the softmax only. */
static void router_grads(const hx_trainer *tr, const tr_acts *A, int n)
{
    const hx_hparams *hp = &tr->hp;
    const int E = hp->n_expert, U = hp->n_expert_used;
    for (int t = 0; t < n; t++) {
        const float *p = A->rp + (size_t)t * E, *dw = tr->moe.dw + (size_t)t * U;
        const int32_t *sel = A->sel + (size_t)t * U;
        float *dz = tr->moe.dz + (size_t)t * E;
        double S = 0, wdw = 0;
        for (int k = 0; k < U; k++) S += p[sel[k]], wdw += (double)dw[k] * A->ew[t * U + k];
        const int norm = hp->expert_weights_norm, clamped = (float)S < 6.103515625e-5f;
        memset(dz, 0, (size_t)E * sizeof *dz);
        for (int k = 0; k < U; k++) /* dp of the chosen, into dz for now */
            dz[sel[k]] = !norm ? dw[k] : clamped ? (float)(dw[k] / 6.103515625e-5)
                                                 : (float)((dw[k] - wdw) / S);
        double pdp = 0;
        for (int k = 0; k < U; k++) pdp += (double)p[sel[k]] * dz[sel[k]];
        for (int i = 0; i < E; i++) dz[i] = p[i] * (float)(dz[i] - pdp);
    }
}

void hx_tr_moe_up_bwd(hx_trainer *tr, int l, int n, const float *da, const float *db,
                   float *dn2)
{
    const hx_hparams *hp = &tr->hp;
    const int E = hp->n_expert, F = hp->n_ff_exp, C = hp->n_embd;
    const tr_acts *A = &tr->acts[l];
    const tr_moe_ws *w = &tr->moe;
    for (int e = 0; e < E; e++) {
        if (!w->cnt[e]) continue;
        const size_t p0 = (size_t)w->first[e];
        tr_expert x;
        expert_get(tr, l, e, 1, &x);
        const tr_w g = expert(&x, 0), u = expert(&x, 1);
        memset(w->dx, 0, (size_t)w->cnt[e] * C * sizeof(float));
        hx_tr_mm_bwd_x(tr->tp, &g, da + p0 * F, w->cnt[e], w->dx, 1.0f, tr->scratch);
        hx_tr_mm_bwd_x(tr->tp, &u, db + p0 * F, w->cnt[e], w->dx, 1.0f, tr->scratch);
        expert_put(tr, l, e);
        for (int i = 0; i < w->cnt[e]; i++) {
            float *d = dn2 + (size_t)w->ptok[p0 + i] * C;
            const float *s = w->dx + (size_t)i * C;
            for (int j = 0; j < C; j++) d[j] += s[j];
        }
    }
    router_grads(tr, A, n);
    hx_tr_mm_bwd_x(tr->tp, &tr->layers[l].router, w->dz, n, dn2, 1.0f, tr->scratch);
}
