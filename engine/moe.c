/* moe.c: mixture-of-experts FFN as llama.cpp computes it for qwen3moe:
 * softmax router, top-k, renormalised weights, experts summed in order. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/ctx_int.h"

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

void hx_ctx_set_routing(hx_ctx *c, int uniform, uint64_t seed, FILE *trace)
{
    c->uniform_routing = uniform;
    c->route_rng = seed * 0x9e3779b97f4a7c15ull + 1;
    c->route_trace = trace;
}

/* Benchmark switch: nu distinct experts uniformly at random into sel. */
static void route_uniform(hx_ctx *c, int32_t *sel, int ne, int nu)
{
    for (int s = 0; s < nu; s++) {
        int x, dup;
        do {
            c->route_rng ^= c->route_rng << 13;
            c->route_rng ^= c->route_rng >> 7;
            c->route_rng ^= c->route_rng << 17;
            x = (int)(c->route_rng % (uint64_t)ne);
            dup = 0;
            for (int u = 0; u < s; u++) dup |= sel[u] == x;
        } while (dup);
        sel[s] = x;
    }
}

static void moe_route(hx_ctx *c, const hx_layer *L, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const int ne = hp->n_expert, nu = hp->n_expert_used;
    hx_fwd_matmul(c, &L->ffn_gate_inp, c->xb, B, c->rl);
    for (int t = 0; t < B; t++) {
        int32_t *sel = c->sel + (size_t)t * nu;
        hx_moe_route(c->rl + (size_t)t * ne, ne, nu, hp->expert_weights_norm, sel,
                     c->selw + (size_t)t * nu);
        if (c->uniform_routing) route_uniform(c, sel, ne, nu);
        if (!c->route_trace) continue;
        fprintf(c->route_trace, "%d", (int)(L - c->m->layers));
        for (int s = 0; s < nu; s++) fprintf(c->route_trace, " %d", sel[s]);
        fputc('\n', c->route_trace);
    }
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

/* Gate and up of the used experts of [x0, x1) on their tokens, one pool
 * run: pair rows [first[x], first[x] + cnt[x]) of hb and hb2 (x->act
 * holds xb quantized when the two types agree, hx_moe_begin). */
static void moe_up(hx_ctx *c, const hx_layer *L, int x0, int x1, const int *cnt,
                   const int *first)
{
    const int fx = c->m->hp.n_ff_exp;
    int nj = 0;
    if (hx_act_type(L->gate_exps.type) != hx_act_type(L->up_exps.type)) {
        for (int x = x0; x < x1; x++) {
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
    for (int x = x0; x < x1; x++) {
        if (!cnt[x]) continue;
        const int32_t *tok = c->ptok + first[x];
        c->jobs[nj++] = hx_fwd_job(c, &L->gate_exps, hx_wmat_at(&L->gate_exps, x), tok,
                            cnt[x], c->hb + (size_t)first[x] * fx);
        c->jobs[nj++] = hx_fwd_job(c, &L->up_exps, hx_wmat_at(&L->up_exps, x), tok,
                            cnt[x], c->hb2 + (size_t)first[x] * fx);
    }
    hx_matmul_jobs(c->tp, c->jobs, nj);
}

/* Down projection of the pair rows of the experts of [x0, x1) into eo,
 * one pool run (c->act holds hb quantized, hx_moe_down_begin). */
static void moe_down(hx_ctx *c, const hx_layer *L, int x0, int x1, const int *cnt,
                     const int *first, const int32_t *iota)
{
    const hx_hparams *hp = &c->m->hp;
    int nj = 0;
    for (int x = x0; x < x1; x++) {
        if (!cnt[x]) continue;
        c->jobs[nj++] = hx_fwd_job(c, &L->down_exps, hx_wmat_at(&L->down_exps, x),
                            iota + first[x], cnt[x],
                            c->eo + (size_t)first[x] * hp->n_embd);
    }
    hx_matmul_jobs(c->tp, c->jobs, nj);
}

/* The index arrays of moe_idx: counts, first pairs, identity. */
static void moe_arrays(hx_ctx *c, int **cnt, int **first, int **iota)
{
    const int ne = c->m->hp.n_expert;
    *cnt = c->moe_idx;
    *first = *cnt + ne;
    *iota = *cnt + 3 * (size_t)ne;
}

void hx_moe_begin(hx_ctx *c, const hx_layer *L, int B)
{
    const int nu = c->m->hp.n_expert_used;
    int *cnt, *first, *iota;
    moe_arrays(c, &cnt, &first, &iota);
    moe_route(c, L, B);
    moe_group(c, B, cnt, first);
    for (int i = 0; i < B * nu; i++) iota[i] = i;
    if (c->act_hook) { /* calibration: the experts' inputs */
        hx_fwd_report_experts(c, &L->gate_exps, c->xb, c->ptok, cnt, first);
        hx_fwd_report_experts(c, &L->up_exps, c->xb, c->ptok, cnt, first);
    }
    if (c->wc) hx_wc_moe(c, L, B, cnt, first, iota);
    else if (hx_act_type(L->gate_exps.type) == hx_act_type(L->up_exps.type))
        hx_fwd_quantize(c, L->gate_exps.type, c->xb, B, L->gate_exps.cols);
}

void hx_moe_up(hx_ctx *c, const hx_layer *L, int x0, int x1)
{
    int *cnt, *first, *iota;
    moe_arrays(c, &cnt, &first, &iota);
    if (c->wc || x0 >= x1) return;
    const int64_t fx = c->m->hp.n_ff_exp, p0 = first[x0];
    const int64_t p1 = first[x1 - 1] + cnt[x1 - 1];
    moe_up(c, L, x0, x1, cnt, first);
    hx_fwd_swiglu(c->tp, c->hb + p0 * fx, c->hb2 + p0 * fx, (p1 - p0) * fx);
}

void hx_moe_down_begin(hx_ctx *c, const hx_layer *L, int B)
{
    const hx_hparams *hp = &c->m->hp;
    int *cnt, *first, *iota;
    moe_arrays(c, &cnt, &first, &iota);
    if (c->act_hook) hx_fwd_report_experts(c, &L->down_exps, c->hb, iota, cnt, first);
    if (!c->wc)
        hx_fwd_quantize(c, L->down_exps.type, c->hb, B * hp->n_expert_used, hp->n_ff_exp);
}

void hx_moe_down(hx_ctx *c, const hx_layer *L, int x0, int x1)
{
    int *cnt, *first, *iota;
    moe_arrays(c, &cnt, &first, &iota);
    if (!c->wc && x0 < x1) moe_down(c, L, x0, x1, cnt, first, iota);
}

void hx_moe_end(hx_ctx *c, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const int nu = hp->n_expert_used, e = hp->n_embd;
    for (int t = 0; t < B; t++) {
        float *o = c->xb + (size_t)t * e;
        for (int s = 0; s < nu; s++) {
            const float w = c->selw[t * nu + s];
            const float *y = c->eo + (size_t)c->pslot[t * nu + s] * e;
            for (int i = 0; i < e; i++) o[i] = s ? o[i] + y[i] * w : y[i] * w;
        }
    }
}
