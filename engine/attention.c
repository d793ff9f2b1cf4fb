/* attention.c: attention over the KV cache with llama.cpp's two CPU
 * flash-attention paths: tiled F32 for large passes, fp16 one-query. */
#include <math.h>
#include <string.h>

#include "engine/ctx_int.h"

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
size_t hx_attn_scratch(const hx_ctx *c)
{
    const size_t d = (size_t)c->m->hp.head_dim, R = att_rows(c);
    return 2 * R * d + R * ATT_TK + 2 * ATT_TK * d + 2 * R + 16;
}

/* The fp16 one-query path (llama.cpp's for small passes) for the G query
 * heads of one KV head: each head has its Q rounded to fp16, its own
 * online softmax and fp16 accumulator of V, exactly as when run alone;
 * every K and V row is read once for all G heads. */
typedef struct f16_heads {
    const hx_attn_ops *op;
    const uint16_t *K, *V; /* (n_ctx, d) rows of this KV head */
    int G, d;
    float scale;
    uint16_t *q16, *acc;   /* (G, d) halves each */
    float *M, *S;          /* (G) running max and sum */
    float *fin, *tmp;      /* (G, d) merged chunks, (d) one converted row */
    float *Mf, *Sf;        /* (G) merged max and sum */
} f16_heads;

/* Online softmax over keys [j0, j1) from a fresh state into M, S, acc. */
static void f16_chunk(f16_heads *h, int j0, int j1)
{
    const int G = h->G, d = h->d;
    for (int g = 0; g < G; g++) {
        h->M[g] = -INFINITY;
        h->S[g] = 0.0f;
    }
    memset(h->acc, 0, (size_t)G * d * sizeof(uint16_t));
    for (int j = j0; j < j1; j++) {
        const uint16_t *kj = h->K + (size_t)j * d, *vj = h->V + (size_t)j * d;
        for (int g = 0; g < G; g++) {
            uint16_t *ag = h->acc + (size_t)g * d;
            const float sc = h->op->dot_hh(h->q16 + (size_t)g * d, kj, d) * h->scale;
            float ms = 1.0f, vs = 1.0f;
            if (sc > h->M[g]) {
                ms = expf(h->M[g] - sc);
                h->M[g] = sc;
                h->op->scale_h(ag, ms, d);
            } else {
                vs = expf(sc - h->M[g]);
            }
            h->op->mad_h(ag, vj, vs, d);
            h->S[g] = h->S[g] * ms + vs;
        }
    }
}

/* Merges the chunk just computed into fin/Mf/Sf (F32, as llama.cpp's
 * reduction of its split-KV partials). */
static void f16_merge(f16_heads *h)
{
    for (int g = 0; g < h->G; g++) {
        if (h->S[g] == 0.0f) continue;
        const float Mn = fmaxf(h->Mf[g], h->M[g]);
        const float so = expf(h->Mf[g] - Mn), sn = expf(h->M[g] - Mn);
        float *f = h->fin + (size_t)g * h->d;
        h->op->from_f16(h->tmp, h->acc + (size_t)g * h->d, h->d);
        for (int i = 0; i < h->d; i++) f[i] = f[i] * so + h->tmp[i] * sn;
        h->Sf[g] = h->Sf[g] * so + h->S[g] * sn;
        h->Mf[g] = Mn;
    }
}

/* llama.cpp runs a single query over a cache view of 512 or more cells
 * (the used cells rounded up to 256) in nth chunks, one per thread, each
 * with its own fp16 accumulator, merged in F32. Same here with nth =
 * Hearth's thread count (equal results when both use as many threads). */
static void f16_split(f16_heads *h, int n_kv, int nth, float *out, int ldo)
{
    const int view = n_kv <= 256 ? 256 : (n_kv + 255) / 256 * 256;
    const int cs = (view + nth - 1) / nth;
    for (int g = 0; g < h->G; g++) {
        h->Mf[g] = -INFINITY;
        h->Sf[g] = 0.0f;
    }
    memset(h->fin, 0, (size_t)h->G * h->d * sizeof(float));
    for (int i = 0; i < nth; i++) {
        const int a = i * cs, b = a + cs < n_kv ? a + cs : n_kv;
        if (a >= b) continue; /* every cell masked: S = 0, skipped */
        f16_chunk(h, a, b);
        f16_merge(h);
    }
    for (int g = 0; g < h->G; g++) {
        float *o = out + (size_t)g * ldo, *f = h->fin + (size_t)g * h->d;
        const float inv = h->Sf[g] != 0.0f ? 1.0f / h->Sf[g] : 1.0f;
        for (int i = 0; i < h->d; i++) o[i] = f[i] * inv;
    }
}

/* Queries q (G, d; row stride ldo as out) against keys [0, n_kv). */
static void attn_f16(f16_heads *h, const float *q, int n_kv, int split_nth,
                     float *out, int ldo)
{
    for (int g = 0; g < h->G; g++)
        h->op->to_f16(h->q16 + (size_t)g * h->d, q + (size_t)g * ldo, h->d);
    const int view = n_kv <= 256 ? 256 : (n_kv + 255) / 256 * 256;
    if (split_nth > 0 && view >= 512) {
        f16_split(h, n_kv, split_nth, out, ldo);
        return;
    }
    f16_chunk(h, 0, n_kv);
    for (int g = 0; g < h->G; g++) {
        float *o = out + (size_t)g * ldo;
        const float inv = h->S[g] == 0.0f ? 0.0f : 1.0f / h->S[g];
        h->op->from_f16(o, h->acc + (size_t)g * h->d, h->d);
        for (int i = 0; i < h->d; i++) o[i] *= inv;
    }
}

typedef struct attn_job {
    hx_ctx *c;
    int layer, B, pos0;
} attn_job;

/* Task t*n_head_kv + kvh of the one-query path: the query heads of KV head
 * kvh for token t, against positions 0..pos0+t. A pass of one token
 * splits long caches as llama.cpp does. */
static void attn_task_f16(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    hx_ctx *c = j->c;
    const hx_hparams *hp = &c->m->hp;
    const int d = hp->head_dim, G = att_group(c);
    const int t = task / hp->n_head_kv, kvh = task % hp->n_head_kv;
    const size_t off = (((size_t)j->layer * hp->n_head_kv + kvh) * c->n_ctx) * d;
    const size_t qo = ((size_t)t * hp->n_head + (size_t)kvh * G) * d;
    float *w = c->scores + (size_t)thread * hx_attn_scratch(c);
    const size_t Gd = (size_t)G * d;
    f16_heads h = {c->ao, (const uint16_t *)c->kc + off, (const uint16_t *)c->vc + off,
                   G, d, 1.0f / sqrtf((float)d), (uint16_t *)w, (uint16_t *)w + Gd,
                   w + Gd, w + Gd + G, w + Gd + 2 * G, w + 2 * Gd + 2 * G,
                   w + 2 * Gd + 2 * G + d, w + 2 * Gd + 3 * G + d};
    attn_f16(&h, c->q + qo, j->pos0 + t + 1, j->B == 1 ? c->n_threads : 0,
             c->att + qo, d);
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
    float *w = c->scores + (size_t)thread * hx_attn_scratch(c);
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

void hx_attention(hx_ctx *c, int l, int B, int pos0)
{
    const hx_hparams *hp = &c->m->hp;
    attn_job j = {c, l, B, pos0};
    if (!c->kv_f32 && B < FA_TILE_Q)
        hx_threadpool_run(c->tp, B * hp->n_head_kv, attn_task_f16, &j);
    else
        hx_threadpool_run(c->tp, hp->n_head_kv * ((B + att_tq(c) - 1) / att_tq(c)),
                          attn_task_tiled, &j);
}
