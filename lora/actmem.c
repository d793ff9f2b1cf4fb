/* actmem.c: the activation memory of a training pass (forward-only,
 * everything saved, or checkpointed layer by layer), and the estimate. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lora/train_int.h"

/* Logits the loss head holds at a time: 16M floats (64 MiB), so a
 * 151,936-word vocabulary takes 110 rows per chunk, not the window. */
#define HEAD_FLOATS ((size_t)1 << 24)

void hx_trainer_set_recompute(hx_trainer *tr, int mode)
{
    tr->recompute = mode == HX_RECOMPUTE_ON || mode == HX_RECOMPUTE_OFF ? mode
                                                                         : HX_RECOMPUTE_AUTO;
}

int hx_trainer_set_bf16(hx_trainer *tr, int mode)
{
    int on = mode == HX_BF16_ON;
    if (mode == HX_BF16_AUTO && tr->ckpt_products) on = tr->ckpt_products == TR_PRODUCTS_BF16;
    else if (mode == HX_BF16_AUTO && !tr->lora)
        on = hx_tr_bf16_faster(tr->tp, tr->hp.n_embd, tr->hp.n_ff);
    on = on && hx_tr_gemm_bf16_available();
    int any = 0;
    for (int l = 0; l < tr->hp.n_layer; l++)
        for (int i = 0; i < 7; i++) {
            tr_lin *li = &tr->layers[l].lin[i];
            li->w.bf16 = on && li->dw; /* trainable weights only */
            any |= li->w.bf16;
        }
    tr->head.w.bf16 = on && tr->head.dw;
    any |= tr->head.w.bf16;
    tr->bf16 = any; /* attention too, for a trainer whose products are */
    return any;
}

int hx_tr_head_rows(const hx_trainer *tr)
{
    if (tr->head_rows > 0) return tr->head_rows < 8 ? 8 : tr->head_rows;
    const size_t r = HEAD_FLOATS / (size_t)tr->hp.n_vocab;
    return r < 64 ? 64 : r > INT_MAX / 2 ? INT_MAX / 2 : (int)r;
}

#define TAKE(ptr, cnt) do { if (base) (ptr) = base + off; off += (cnt); } while (0)

const tr_lin *hx_tr_lora_lin(const hx_trainer *tr, int i)
{
    for (int l = 0; l < tr->hp.n_layer; l++)
        if (tr->layers[l].lin[i].a) return &tr->layers[l].lin[i];
    return NULL;
}

/* One layer's activations but its input x, from off; the new offset. */
static size_t carve_layer(const hx_trainer *tr, tr_acts *A, size_t N, float *base, size_t off)
{
    const hx_hparams *hp = &tr->hp;
    const size_t C = hp->n_embd, Q = (size_t)hp->n_head * hp->head_dim;
    const size_t K = (size_t)hp->n_head_kv * hp->head_dim, F = tr_ffn_width(hp);
    const size_t H = hp->n_head, Hk = hp->n_head_kv;
    TAKE(A->r1, N); TAKE(A->n1, N * C);
    TAKE(A->qp, N * Q); TAKE(A->rq, N * H); TAKE(A->kp, N * K);
    TAKE(A->rk, N * Hk); TAKE(A->q, N * Q); TAKE(A->k, N * K);
    TAKE(A->v, N * K); TAKE(A->lse, N * H); TAKE(A->o, N * Q);
    TAKE(A->h, N * C); TAKE(A->r2, N); TAKE(A->n2, N * C);
    TAKE(A->a, N * F); TAKE(A->b, N * F); TAKE(A->s, N * F);
    if (hp->n_expert) {
        const size_t E = hp->n_expert, U = hp->n_expert_used;
        TAKE(A->rp, N * E); TAKE(A->ew, N * U); TAKE(A->ey, N * U * C);
        if (base) A->sel = (int32_t *)(base + off); /* int32 in float slots */
        off += N * U;
    }
    for (int i = 0; i < 7; i++) { /* layers sharing a workspace share this */
        const tr_lin *l = hx_tr_lora_lin(tr, i);
        if (l) TAKE(A->u[i], N * (size_t)l->r);
        else if (base) A->u[i] = NULL;
    }
    return off;
}

/* The backward temporaries dres dn dq dk dv dqp dkp dox da db dsw du
 * (bw_of in fwdbwd.c names them), from off: the attention half's dq ..
 * dox and the FFN half's da db dsw share their floats (a layer's halves
 * run one after the other; the head's d(nf) in dsw is consumed before). */
static size_t carve_bw(hx_trainer *tr, size_t N, float *base, size_t off)
{
    const hx_hparams *hp = &tr->hp;
    const size_t C = hp->n_embd, Q = (size_t)hp->n_head * hp->head_dim;
    const size_t K = (size_t)hp->n_head_kv * hp->head_dim, F = tr_ffn_width(hp);
    size_t big = C > Q ? C : Q;
    big = big > F ? big : F;
    const size_t R = tr->rank > 0 ? (size_t)tr->rank : 1;
    const size_t sizes[12] = {C, C, Q, K, K, Q, K, big, F, F, big, R};
    size_t shared = 0, attn_end = 0;
    for (int i = 0; i < 12; i++) {
        if (i == 2) shared = off;
        if (i == 8) attn_end = off, off = shared;
        if (i == 11 && attn_end > off) off = attn_end;
        TAKE(tr->bw[i], N * sizes[i]);
    }
    return off;
}

/* The MoE workspace (tr_moe_ws) for n tokens, from off; the new offset. */
static size_t carve_moe(hx_trainer *tr, size_t N, float *base, size_t off)
{
    const hx_hparams *hp = &tr->hp;
    const size_t C = hp->n_embd, E = hp->n_expert, U = hp->n_expert_used;
    tr_moe_ws *w = &tr->moe;
    TAKE(w->x, N * C); TAKE(w->dx, N * C); TAKE(w->dz, N * E); TAKE(w->dw, N * U);
    if (base) { /* int32 in float slots */
        w->ptok = (int32_t *)(base + off);
        w->pslot = w->ptok + N * U;
        w->cnt = w->pslot + N * U;
        w->first = w->cnt + E;
    }
    return off + 2 * N * U + 3 * E;
}

/* Floats of the layout for n tokens; with base, sets every pointer.
 * TR_SAVE: each layer its own activations. TR_CKPT: each layer its own
 * input x, the rest one workspace the layers share (every layer has the
 * same linears, so the same LoRA widths). TR_FWD: one workspace, x too
 * (a layer's output overwrites its input), the final residual in it. */
static size_t carve(hx_trainer *tr, int n, int layout, float *base)
{
    const hx_hparams *hp = &tr->hp;
    const size_t N = (size_t)n, C = hp->n_embd;
    size_t off = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        tr_acts *A = &tr->acts[l];
        if (l == 0 || layout == TR_SAVE)
            off = carve_layer(tr, A, N, base, off);
        else if (base)
            *A = tr->acts[0];
        if (l == 0 || layout != TR_FWD) TAKE(A->x, N * C);
    }
    if (layout != TR_FWD) TAKE(tr->xf, N * C);
    else if (base) tr->xf = tr->acts[0].x;
    if (hp->n_expert) off = carve_moe(tr, N, base, off);
    TAKE(tr->rf, N); TAKE(tr->nf, N * C);
    if (layout == TR_FWD) TAKE(tr->tmp, N * C);
    else off = carve_bw(tr, N, base, off);
    if (base && layout != TR_FWD) tr->tmp = tr->bw[0];
    const int rows = hx_tr_head_rows(tr);
    const size_t R = N < (size_t)rows + 7 ? N : (size_t)rows + 7;
    TAKE(tr->hg, R * C); TAKE(tr->hz, R * (size_t)hp->n_vocab);
    if (layout != TR_FWD) TAKE(tr->hdg, R * C);
    else if (base) tr->hdg = NULL;
    if (base) tr->head_chunk = rows;
    return off;
}
#undef TAKE

int hx_tr_layout(const hx_trainer *tr, int n)
{
    if (tr->recompute == HX_RECOMPUTE_ON) return TR_CKPT;
    if (tr->recompute == HX_RECOMPUTE_OFF) return TR_SAVE;
    if (tr->lora) return TR_CKPT;
    /* carve without a base only counts */
    const size_t saved = carve((hx_trainer *)tr, n, TR_SAVE, NULL) * sizeof(float);
    return saved > TR_SAVE_BUDGET ? TR_CKPT : TR_SAVE;
}

/* Per-thread scratch floats: a tile of the widest matrix, or attention
 * over sequences of T tokens. */
static size_t scratch_floats(const hx_trainer *tr, int T)
{
    const hx_hparams *hp = &tr->hp;
    int cols = hp->n_embd;
    if (hp->n_head * hp->head_dim > cols) cols = hp->n_head * hp->head_dim;
    if (hp->n_ff > cols) cols = hp->n_ff;
    if (hp->n_ff_exp > cols) cols = hp->n_ff_exp;
    const size_t mm = hx_tr_mm_scratch(cols), at = hx_tr_attn_scratch(T, hp->head_dim);
    return mm > at ? mm : at;
}

/* Grows a buffer of cap elements to need (its contents are dead: freed
 * first, so the peak is the larger one alone). In huge pages: the
 * attention's transposed keys are rows 16 KB apart, a step's products
 * stream hundreds of MB of activations: 2 MiB pages made bench/train's
 * steps some 4% faster, within this VM's noise on the recipe's own data
 * (bench/README.md). */
static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return HX_OK;
    free(*p);
    *p = hx_huge_alloc(need, size);
    *cap = *p ? need : 0;
    return *p ? HX_OK : HX_ERR_NOMEM;
}

int hx_tr_reserve(hx_trainer *tr, int n, int T, int layout, hx_err *err)
{
    const size_t total = carve(tr, n, layout, NULL), sn = scratch_floats(tr, T);
    const size_t nt = (size_t)tr->n_threads;
    int rc = grow((void **)&tr->mem, &tr->mem_floats, total, sizeof(float));
    if (!rc && sn > tr->scratch_n) {
        size_t cap = tr->scratch_n * nt;
        rc = grow((void **)&tr->scratch, &cap, sn * nt, sizeof(float));
        tr->scratch_n = cap / nt;
    }
    if (!rc && n > tr->idx_cap) {
        size_t cap = (size_t)tr->idx_cap * 4;
        rc = grow((void **)&tr->start, &cap, (size_t)n * 4, sizeof(int32_t));
        tr->idx_cap = (int)(cap / 4);
    }
    if (rc)
        return hx_err_set(err, HX_ERR_NOMEM, "train: %zu MB of activations for %d "
                          "tokens", total * sizeof(float) >> 20, n);
    tr->pos = tr->start + tr->idx_cap;
    tr->gather = tr->start + 2 * (size_t)tr->idx_cap;
    tr->pre = tr->start + 3 * (size_t)tr->idx_cap;
    carve(tr, n, layout, tr->mem);
    return HX_OK;
}

/* ---- the estimate ---- */

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* Floats hx_tr_gemm_ex packs for an (m, n, k) product at most: both operands
 * in panels of up to 32 rows, and an alignment tail. */
static size_t pack_bound(int m, int n, int k)
{
    return ((size_t)(m + 31) / 32 + (size_t)(n + 31) / 32) * 32 * (size_t)k + 16;
}

/* Packing floats of hx_tr_mm_fwd / hx_tr_mm_bwd_x of n rows through w (a
 * quantized weight a block of rows at a time), and its block (*deq). */
static size_t w_bound(const tr_w *w, int n, size_t *deq)
{
    const int br = hx_tr_mm_block_rows(w), nr = br && br < w->rows ? br : w->rows;
    *deq = (size_t)br * (size_t)w->cols;
    return max_sz(pack_bound(n, nr, w->cols), pack_bound(n, w->cols, nr));
}

/* Floats of the buffers the matrix products keep (packing, and the
 * dequantized block of a frozen weight) for a pass of n tokens: the
 * largest product of any linear (every layer has the same shapes), its
 * LoRA factors, the weight gradients (training), and the head over a
 * chunk of rows. */
static size_t mm_floats(const hx_trainer *tr, int n, int rows, int layout)
{
    size_t pack = 0, deq = 0, d = 0;
    const int train = layout != TR_FWD;
    for (int i = 0; i < 7; i++) {
        const tr_lin *l = &tr->layers[0].lin[i];
        if (!l->w.f && !l->w.q) continue; /* a MoE layer's dense FFN */
        pack = max_sz(pack, w_bound(&l->w, n, &d));
        deq = max_sz(deq, d);
        if (train && l->dw) pack = max_sz(pack, pack_bound(l->w.rows, l->w.cols, n));
        if (!(l = hx_tr_lora_lin(tr, i))) continue;
        const tr_w A = {.f = l->a, .rows = l->r, .cols = l->w.cols};
        const tr_w B = {.f = l->b, .rows = l->w.rows, .cols = l->r};
        pack = max_sz(pack, max_sz(w_bound(&A, n, &d), w_bound(&B, n, &d)));
        if (train) pack = max_sz(pack, max_sz(pack_bound(l->r, l->w.cols, n),
                                              pack_bound(l->w.rows, l->r, n)));
    }
    for (int k = 0; tr->hp.n_expert && k < 4; k++) { /* the router, the experts */
        const hx_wmat *q = k < 3 ? tr->layers[0].exps[k] : NULL;
        const tr_w w = q ? (tr_w){.q = q, .rows = (int)q->rows, .cols = (int)q->cols}
                         : tr->layers[0].router;
        pack = max_sz(pack, w_bound(&w, n, &d));
        deq = max_sz(deq, d);
    }
    pack = max_sz(pack, w_bound(&tr->head.w, rows, &d));
    deq = max_sz(deq, d);
    if (train && tr->head.dw)
        pack = max_sz(pack, pack_bound(tr->head.w.rows, tr->head.w.cols, rows));
    return pack + deq;
}

/* Bytes of a pass of n tokens in layout: carved activations, index
 * arrays, per-thread scratch, RoPE table, product buffers, trainable
 * state (parameters, gradients, moments, and a checkpoint's image of
 * three of them while it is written), and the mapped base. */
static size_t estimate(const hx_trainer *tr, int n, int layout)
{
    const hx_hparams *hp = &tr->hp;
    const int T = n < hp->n_ctx_train ? n : hp->n_ctx_train;
    const int rows = hx_tr_head_rows(tr);
    size_t floats = carve((hx_trainer *)tr, n, layout, NULL) + (size_t)n * 4;
    floats += scratch_floats(tr, T) * (size_t)tr->n_threads;
    floats += (size_t)hp->n_ctx_train * hp->head_dim;
    floats += mm_floats(tr, n, n < rows + 7 ? n : rows + 7, layout);
    floats += 7 * tr->n_params;
    return floats * sizeof(float) + hx_trainer_weight_bytes(tr);
}

size_t hx_trainer_memory_estimate(const hx_trainer *tr, int n_tok)
{
    return estimate(tr, n_tok, hx_tr_layout(tr, n_tok));
}

size_t hx_trainer_forward_memory_estimate(const hx_trainer *tr, int n_tok)
{
    return estimate(tr, n_tok, TR_FWD);
}

/* Fits `rest` bytes beside the base within max_bytes (0: no bound), the
 * base mapped or, over it, read through the weight cache the rest leaves;
 * what: the passes, for the error. */
static int fit(hx_trainer *tr, size_t rest, const char *what, size_t max_bytes,
               size_t *need, size_t *budget, hx_err *err)
{
    const size_t mapped = tr->base ? hx_model_size_bytes(tr->base) : 0;
    const size_t lo = hx_trainer_weight_budget_min(tr);
    *need = rest + mapped;
    *budget = 0;
    if (tr->wc) hx_trainer_set_weight_budget(tr, 0, err); /* mapped: cannot fail */
    if (!max_bytes || *need <= max_bytes) return HX_OK;
    if (lo && max_bytes >= rest + lo) {
        int rc = hx_trainer_set_weight_budget(tr, max_bytes - rest, err);
        if (rc) return rc;
        *budget = hx_trainer_weight_bytes(tr);
        *need = rest + *budget;
        return HX_OK;
    }
    char cache[96] = "";
    if (lo)
        snprintf(cache, sizeof cache, ", at least %.1f MiB with the base's experts read from "
                 "the file", (rest + lo) / 1048576.0);
    return hx_err_set(err, HX_ERR_RANGE, "%s needs about %.1f MiB (activations, adapter "
                      "state, mapped base)%s, over the bound of %.1f MiB", what,
                      *need / 1048576.0, cache, max_bytes / 1048576.0);
}

int hx_trainer_fit_memory(hx_trainer *tr, int n_tok, size_t extra, size_t max_bytes,
                          size_t *need, size_t *budget, hx_err *err)
{
    const size_t rest = hx_trainer_memory_estimate(tr, n_tok) - hx_trainer_weight_bytes(tr);
    return fit(tr, rest + extra, "training", max_bytes, need, budget, err);
}

int hx_trainer_fit_forward_memory(hx_trainer *tr, int n_tok, size_t extra, size_t max_bytes,
                                  size_t *need, size_t *budget, hx_err *err)
{
    const size_t rest = hx_trainer_forward_memory_estimate(tr, n_tok) -
                        hx_trainer_weight_bytes(tr);
    return fit(tr, rest + extra, "a forward pass of the base", max_bytes, need, budget, err);
}
