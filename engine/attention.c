/* attention.c: attention over the paged KV cache with llama.cpp's CPU
 * flash-attention paths: tiled F32 for large passes, fp16 one-query, and
 * the one-query path of a Q8_0 cache. */
#include <math.h>
#include <string.h>

#include "engine/ctx_int.h"
#include "engine/kernels_impl.h"

/* Tiled attention: a task takes the G query heads of one KV head for up to
 * att_tq tokens (R = G * tokens rows), keys in tiles of ATT_TK. */
#define ATT_TK 64
_Static_assert(HX_KV_PAGE == ATT_TK, "a key tile is one KV page");

static int att_group_hp(const hx_hparams *hp) { return hp->n_head / hp->n_head_kv; }
static int att_group(const hx_ctx *c) { return att_group_hp(&c->m->hp); }

static int att_tq_hp(const hx_hparams *hp)
{
    int tq = 64 / att_group_hp(hp);
    return tq < 1 ? 1 : tq;
}
static int att_tq(const hx_ctx *c) { return att_tq_hp(&c->m->hp); }


static size_t att_round16(size_t n) { return (n + 15) / 16 * 16; }

/* Scratch floats of the fp16 one-query path (f16_heads) for R rows of d. */
static size_t f16_floats(size_t R, size_t d) { return 2 * R * d + 4 * R + d; }
/* Most tokens of a pass on that path (B < FA_TILE_Q). */
#define F16_TOKENS_MAX FA_TILE_Q

/* Per-thread attention scratch, in floats (a multiple of 16, so every
 * thread's part stays 64-byte aligned): for the tiled path, Q rows in
 * lanes and their accumulators ((d, HX_ATT_LANES) each), scores
 * (HX_ATT_LANES, ATT_TK), a K and a V tile, running max, sum and key
 * limits (HX_ATT_LANES each). The one-query paths use less (G rows). */
size_t hx_attn_scratch(const hx_hparams *hp)
{
    const size_t d = (size_t)hp->head_dim, L = HX_ATT_LANES;
    const size_t tiled = 2 * att_round16(d * L) + L * ATT_TK + 2 * att_round16(ATT_TK * d) + 3 * L;
    const size_t one = f16_floats((size_t)att_group_hp(hp), d) + d + 16;
    return att_round16(tiled > one ? tiled : one);
}

/* The fp16 one-query path (llama.cpp's for small passes) for the G query
 * heads of one KV head, for T tokens of a pass at once: each of the R =
 * T * G rows has its Q rounded to fp16, its own online softmax and fp16
 * accumulator of V, exactly as when run alone (the same operations on the
 * same keys in the same order); every K and V row is read once for all
 * rows, so a pass of several tokens does not read the cache once per token. */
typedef struct f16_heads {
    const hx_attn_ops *op;
    const hx_ctx *c;       /* the cache: rows of KV head kvh of layer l */
    int l, kvh, thread;
    int G, d, T;           /* R = T * G rows: row t*G + g */
    size_t ts;             /* floats from one token's q (and out) to the next */
    float scale;
    uint16_t *q16, *acc;   /* (R, d) halves each */
    float *M, *S;          /* (R) running max and sum */
    float *fin, *tmp;      /* (R, d) merged chunks, (d) one converted row */
    float *Mf, *Sf;        /* (R) merged max and sum */
} f16_heads;

/* One key of the online softmax for row r. */
static void f16_key(f16_heads *h, int r, const uint16_t *kj, const uint16_t *vj)
{
    const int d = h->d;
    uint16_t *ag = h->acc + (size_t)r * d;
    const float sc = h->op->dot_hh(h->q16 + (size_t)r * d, kj, d) * h->scale;
    float ms = 1.0f, vs = 1.0f;
    if (sc > h->M[r]) {
        ms = expf(h->M[r] - sc);
        h->M[r] = sc;
        h->op->scale_h(ag, ms, d);
    } else {
        vs = expf(sc - h->M[r]);
    }
    h->op->mad_h(ag, vj, vs, d);
    h->S[r] = h->S[r] * ms + vs;
}

/* Online softmax from a fresh state into M, S, acc: token t over keys
 * [j0, j1[t]) (none if j1[t] <= j0). */
static void f16_chunk(f16_heads *h, int j0, const int *j1)
{
    const int G = h->G, R = h->T * G;
    int jmax = j0;
    for (int t = 0; t < h->T; t++) jmax = j1[t] > jmax ? j1[t] : jmax;
    for (int r = 0; r < R; r++) {
        h->M[r] = -INFINITY;
        h->S[r] = 0.0f;
    }
    memset(h->acc, 0, (size_t)R * h->d * sizeof(uint16_t));
    hx_kv_span sp = {NULL, NULL};
    for (int j = j0; j < jmax; j++) {
        if (j == j0 || j % HX_KV_PAGE == 0)
            sp = hx_kv_span_of(h->c, h->l, h->kvh, j / HX_KV_PAGE, h->thread);
        const size_t o = (size_t)(j % HX_KV_PAGE) * h->c->kv_row;
        const uint16_t *kj = (const uint16_t *)(sp.k + o), *vj = (const uint16_t *)(sp.v + o);
        for (int t = 0; t < h->T; t++) {
            if (j >= j1[t]) continue; /* past this token's keys */
            for (int g = 0; g < G; g++) f16_key(h, t * G + g, kj, vj);
        }
    }
}

/* Merges the chunk just computed into fin/Mf/Sf (F32, as llama.cpp's
 * reduction of its split-KV partials); rows that saw no key are skipped. */
static void f16_merge(f16_heads *h)
{
    for (int r = 0; r < h->T * h->G; r++) {
        if (h->S[r] == 0.0f) continue;
        const float Mn = fmaxf(h->Mf[r], h->M[r]);
        const float so = expf(h->Mf[r] - Mn), sn = expf(h->M[r] - Mn);
        float *f = h->fin + (size_t)r * h->d;
        h->op->from_f16(h->tmp, h->acc + (size_t)r * h->d, h->d);
        for (int i = 0; i < h->d; i++) f[i] = f[i] * so + h->tmp[i] * sn;
        h->Sf[r] = h->Sf[r] * so + h->S[r] * sn;
        h->Mf[r] = Mn;
    }
}

/* The cache view llama.cpp attends over: the used cells rounded up to 256. */
static int f16_view(int n_kv) { return n_kv <= 256 ? 256 : (n_kv + 255) / 256 * 256; }

/* Row r's offset in the rows' queries and outputs (laid out alike). */
static size_t f16_at(const f16_heads *h, int r)
{
    return (size_t)(r / h->G) * h->ts + (size_t)(r % h->G) * h->d;
}

/* llama.cpp runs a single query over a cache view of 512 or more cells
 * in nth chunks, one per thread, each with its own fp16 accumulator,
 * merged in F32. Same here with nth = Hearth's thread count (equal results
 * when both use as many threads); every token's view is the same. */
static void f16_split(f16_heads *h, const int *n_kv, int nth, float *out)
{
    const int cs = (f16_view(n_kv[0]) + nth - 1) / nth, R = h->T * h->G;
    int b[F16_TOKENS_MAX];
    for (int r = 0; r < R; r++) {
        h->Mf[r] = -INFINITY;
        h->Sf[r] = 0.0f;
    }
    memset(h->fin, 0, (size_t)R * h->d * sizeof(float));
    for (int i = 0; i < nth; i++) {
        const int a = i * cs;
        int any = 0;
        for (int t = 0; t < h->T; t++) {
            b[t] = a + cs < n_kv[t] ? a + cs : n_kv[t];
            any |= a < b[t];
        }
        if (!any) continue; /* every cell masked: S = 0, skipped */
        f16_chunk(h, a, b);
        f16_merge(h);
    }
    for (int r = 0; r < R; r++) {
        float *o = out + f16_at(h, r), *f = h->fin + (size_t)r * h->d;
        const float inv = h->Sf[r] != 0.0f ? 1.0f / h->Sf[r] : 1.0f;
        for (int i = 0; i < h->d; i++) o[i] = f[i] * inv;
    }
}

/* The rows' queries (at q, laid out as out) against keys [0, n_kv[t]). */
static void attn_f16(f16_heads *h, const float *q, const int *n_kv, int split_nth, float *out)
{
    const int R = h->T * h->G;
    for (int r = 0; r < R; r++)
        h->op->to_f16(h->q16 + (size_t)r * h->d, q + f16_at(h, r), h->d);
    if (split_nth > 0 && f16_view(n_kv[0]) >= 512) {
        f16_split(h, n_kv, split_nth, out);
        return;
    }
    f16_chunk(h, 0, n_kv);
    for (int r = 0; r < R; r++) {
        float *o = out + f16_at(h, r);
        const float inv = h->S[r] == 0.0f ? 0.0f : 1.0f / h->S[r];
        h->op->from_f16(o, h->acc + (size_t)r * h->d, h->d);
        for (int i = 0; i < h->d; i++) o[i] *= inv;
    }
}

typedef hx_attn_run attn_job;

/* Tokens per task of the fp16 one-query path: all of a pass's tokens that
 * fit the scratch, when they share llama.cpp's cache view (so each row
 * splits its keys as its one-token pass does); else one. */
static int f16_tokens_per_task(const hx_ctx *c, int B, int pos0)
{
    const hx_hparams *hp = &c->m->hp;
    const size_t d = (size_t)hp->head_dim, G = (size_t)att_group(c);
    if (B < 2 || c->pass.seq || f16_view(pos0 + 1) != f16_view(pos0 + B)) return 1;
    const size_t base = f16_floats(0, d), per_token = f16_floats(G, d) - base;
    size_t fit = (hx_attn_scratch(hp) - base) / per_token;
    if (fit > F16_TOKENS_MAX) fit = F16_TOKENS_MAX;
    return fit < 1 ? 1 : (int)fit < B ? (int)fit : B;
}

/* Task tb*n_head_kv + kvh of the one-query path: the query heads of KV
 * head kvh for tokens [tb*tpt, +tpt), token t against positions
 * 0..pos0+t. A pass of one token, and with split_rows every row, splits
 * long caches as llama.cpp does. */
static void attn_task_f16(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    hx_ctx *c = j->c;
    const hx_hparams *hp = &c->m->hp;
    const int d = hp->head_dim, G = att_group(c);
    const int t0 = task / hp->n_head_kv * j->tpt, kvh = task % hp->n_head_kv;
    const int T = j->B - t0 < j->tpt ? j->B - t0 : j->tpt;
    const size_t qo = ((size_t)t0 * hp->n_head + (size_t)kvh * G) * d, R = (size_t)T * G;
    const size_t Rd = R * d;
    float *w = c->scores + (size_t)thread * hx_attn_scratch(hp);
    f16_heads h = {c->ao, c, j->layer, kvh, thread, G, d, T, (size_t)hp->n_head * d,
                   1.0f / sqrtf((float)d), (uint16_t *)w, (uint16_t *)w + Rd,
                   w + Rd, w + Rd + R, w + Rd + 2 * R, w + 2 * Rd + 2 * R,
                   w + 2 * Rd + 2 * R + d, w + 2 * Rd + 3 * R + d};
    int n_kv[F16_TOKENS_MAX];
    for (int t = 0; t < T; t++) n_kv[t] = hx_pass_pos(c, t0 + t) + 1;
    h.c = hx_pass_seq(c, t0); /* several sequences: one token per task */
    const int split = j->B == 1 || c->split_rows || c->pass.seq ? c->n_threads : 0;
    attn_f16(&h, c->q + qo, n_kv, split, c->att + qo);
}

/* llama.cpp's one-query path over a quantized cache, for the G query heads
 * of one KV head, for T tokens of a pass at once: each of the R = T * G
 * rows has Q quantized to Q8_0 as for a Q8_0 matmul, K.Q as Q8_0 dot
 * products, V rows dequantized and accumulated in F32 with an online
 * softmax, exactly as when run alone (the same operations on the same keys
 * in the same order); each V row is dequantized once for all rows. */
typedef struct q8_heads {
    hx_ctx *c;
    int l, kvh, thread;
    int G, d, T;           /* R = T * G rows: row t*G + g */
    size_t ts;             /* floats from one token's q (and out) to the next */
    float scale;
    hx_dot_fn dot;         /* the Q8_0 dot of the CPU's kernels */
    char *qa;              /* (R) quantized Q rows of ab bytes */
    float *acc, *M, *S, *vt; /* (R, d) accumulators, (R) maxima and sums, a V row */
} q8_heads;

/* Scratch floats of q8_heads for R rows of d. */
static size_t q8_floats(size_t R, size_t d) { return 2 * R * d + 2 * R + d; }
/* Most tokens of a task on that path: a task's time stays short for the
 * slicer, and most of the V rows' dequantizing is saved. */
#define Q8_TOKENS_MAX 8

/* One key of row r's online softmax: K row kj, V row h->vt. */
static void q8_key(q8_heads *h, int r, const char *kj, size_t ab)
{
    const int d = h->d;
    float sc, ms = 1.0f, vs = 1.0f, *ag = h->acc + (size_t)r * d;
    h->dot(d, &sc, kj, h->qa + (size_t)r * ab);
    sc *= h->scale;
    if (sc > h->M[r]) {
        ms = expf(h->M[r] - sc);
        h->M[r] = sc;
        for (int i = 0; i < d; i++) ag[i] *= ms;
    } else {
        vs = expf(sc - h->M[r]);
    }
    h->c->ao->axpy_f32(ag, h->vt, vs, d);
    h->S[r] = h->S[r] * ms + vs;
}

/* The rows' queries (at q, laid out as out) against keys [0, n_kv[t]). */
static void attn_q8(q8_heads *h, const float *q, const int *n_kv, float *out)
{
    const int G = h->G, d = h->d, R = h->T * G;
    const size_t ab = hx_act_row_bytes(HX_TYPE_Q8_0, d);
    int jmax = 0;
    for (int r = 0; r < R; r++) {
        const size_t at = (size_t)(r / G) * h->ts + (size_t)(r % G) * d;
        hx_quantize_act(HX_TYPE_Q8_0, q + at, h->qa + (size_t)r * ab, d);
        h->M[r] = -INFINITY;
        h->S[r] = 0.0f;
        jmax = n_kv[r / G] > jmax ? n_kv[r / G] : jmax;
    }
    memset(h->acc, 0, (size_t)R * d * sizeof(float));
    hx_kv_span sp = {NULL, NULL};
    for (int j = 0; j < jmax; j++) {
        if (j % HX_KV_PAGE == 0) sp = hx_kv_span_of(h->c, h->l, h->kvh, j / HX_KV_PAGE, h->thread);
        const size_t o = (size_t)(j % HX_KV_PAGE) * h->c->kv_row;
        hx_dequantize_row(HX_TYPE_Q8_0, sp.v + o, h->vt, d);
        for (int t = 0; t < h->T; t++) {
            if (j >= n_kv[t]) continue; /* past this token's keys */
            for (int g = 0; g < G; g++) q8_key(h, t * G + g, sp.k + o, ab);
        }
    }
    for (int r = 0; r < R; r++) {
        float *o = out + (size_t)(r / G) * h->ts + (size_t)(r % G) * d;
        const float inv = h->S[r] == 0.0f ? 0.0f : 1.0f / h->S[r];
        for (int i = 0; i < d; i++) o[i] = h->acc[(size_t)r * d + i] * inv;
    }
}

/* Tokens per task of the 8-bit cache's path: those that fit the scratch,
 * at most Q8_TOKENS_MAX, and few enough that every thread has two tasks. */
static int q8_tokens_per_task(const hx_ctx *c, int B)
{
    const hx_hparams *hp = &c->m->hp;
    const size_t d = (size_t)hp->head_dim, G = (size_t)att_group(c);
    if (c->attn_before || c->pass.seq) return 1; /* several sequences: a cache each */
    const size_t base = q8_floats(0, d), per_token = q8_floats(G, d) - base;
    int fit = (int)((hx_attn_scratch(hp) - base) / per_token);
    const int spread = B * hp->n_head_kv / (2 * c->n_threads);
    fit = fit < Q8_TOKENS_MAX ? fit : Q8_TOKENS_MAX;
    fit = fit < spread ? fit : spread;
    return fit < 1 ? 1 : fit < B ? fit : B;
}

/* Task tb*n_head_kv + kvh of the 8-bit cache's path: the query heads of
 * KV head kvh for tokens [tb*tpt, +tpt), each against the positions up to
 * its own. */
static void attn_task_q8(void *ctx, int task, int thread)
{
    const attn_job *j = ctx;
    hx_ctx *c = j->c;
    const hx_hparams *hp = &c->m->hp;
    const int d = hp->head_dim, G = att_group(c);
    const int t0 = task / hp->n_head_kv * j->tpt, kvh = task % hp->n_head_kv;
    const int T = j->B - t0 < j->tpt ? j->B - t0 : j->tpt;
    const size_t qo = ((size_t)t0 * hp->n_head + (size_t)kvh * G) * d, Rd = (size_t)T * G * d;
    float *w = c->scores + (size_t)thread * hx_attn_scratch(hp);
    const size_t R = (size_t)T * G;
    /* several sequences (c->pass.seq): one token per task, its own cache */
    q8_heads h = {hx_pass_seq(c, t0), j->layer, kvh, thread, G, d, T, (size_t)hp->n_head * d,
                  1.0f / sqrtf((float)d), hx_kernels_for(hx_isa_current())->dot[HX_TYPE_Q8_0],
                  (char *)w, w + Rd, w + 2 * Rd, w + 2 * Rd + R, w + 2 * Rd + 2 * R};
    int n_kv[Q8_TOKENS_MAX];
    for (int t = 0; t < T; t++) n_kv[t] = hx_pass_pos(c, t0 + t) + 1;
    attn_q8(&h, c->q + qo, n_kv, c->att + qo);
}

/* Task kvh * n_tb + tb: the query heads of KV head kvh for tokens of block
 * tb, in F32 (llama.cpp's tiled path, and any batch over a float cache):
 * rows r = i*G + g (token t0+i, query head kvh*G + g) in chunks of
 * HX_ATT_LANES lanes against key tiles of ATT_TK (tile64 in attn.h: each
 * row computed on its own, so its numbers do not depend on the batch). */
static void attn_task_tiled(void *ctx, int task, int thread)
{
    enum { L = HX_ATT_LANES };
    const attn_job *j = ctx;
    hx_ctx *c = j->c;
    const hx_hparams *hp = &c->m->hp;
    const int d = hp->head_dim, G = att_group(c), tq = j->tq;
    const int n_tb = (j->B + tq - 1) / tq, kvh = task / n_tb, tb = task % n_tb;
    const int t0 = tb * tq, nt = j->B - t0 < tq ? j->B - t0 : tq, R = nt * G;
    const hx_ctx *kc = hx_pass_seq(c, t0); /* several sequences: tq == 1 */
    const size_t dl = att_round16((size_t)d * L), td = att_round16((size_t)ATT_TK * d);
    float *w = c->scores + (size_t)thread * hx_attn_scratch(hp);
    float *Qt = w, *acc = Qt + dl, *S = acc + dl, *kt = S + (size_t)L * L, *vt = kt + td;
    float *m = vt + td, *l = m + L;
    int *lim = (int *)(l + L);
    const float scale = 1.0f / sqrtf((float)d);
    for (int r0 = 0; r0 < R; r0 += L) {
        const int nr = R - r0 < L ? R - r0 : L;
        int n_keys = 0;
        for (int r = 0; r < L; r++) {
            const int rr = r0 + (r < nr ? r : 0);
            const float *q = c->q + ((size_t)(t0 + rr / G) * hp->n_head + kvh * G + rr % G) * d;
            for (int i = 0; i < d; i++) Qt[(size_t)i * L + r] = q[i];
            lim[r] = hx_pass_pos(c, t0 + rr / G) + 1;
            n_keys = lim[r] > n_keys ? lim[r] : n_keys;
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
        memset(acc, 0, (size_t)d * L * sizeof(float));
        for (int j0 = 0; j0 < n_keys; j0 += ATT_TK) {
            const int nk = n_keys - j0 < ATT_TK ? n_keys - j0 : ATT_TK;
            const hx_kv_span sp = hx_kv_span_of(kc, j->layer, kvh, j0 / HX_KV_PAGE, thread);
            const float *K = hx_kv_rows_f32(kc, sp.k, nk, kt);
            const float *V = hx_kv_rows_f32(kc, sp.v, nk, vt);
            c->ao->tile64(Qt, K, V, nk, d, j0, lim, scale, m, l, acc, S, c->attn_before ? L : nr);
        }
        for (int r = 0; r < nr; r++) {
            const int rr = r0 + r;
            float *out = c->att + ((size_t)(t0 + rr / G) * hp->n_head + kvh * G + rr % G) * d;
            const float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r];
            for (int i = 0; i < d; i++) out[i] = acc[(size_t)i * L + r] * inv;
        }
    }
}

/* Paths as llama.cpp's CPU flash attention picks them: an 8-bit cache
 * always takes its one-query path; F16 takes the fp16 one-query path below
 * FA_TILE_Q tokens, F32 tiles from there (and always for an F32 cache, and
 * with tiled_rows: the rest of a prompt, each row as its whole prompt's
 * prefill computes it; a tiled row's numbers do not depend on the pass). */
void hx_attention_plan(hx_ctx *c, int l, int B, int pos0, hx_attn_run *r)
{
    const hx_hparams *hp = &c->m->hp;
    /* several sequences (c->pass.seq): a task's tokens share a cache */
    const int tq = c->pass.seq ? 1 : att_tq(c);
    *r = (hx_attn_run){c, l, B, pos0, tq, 1, attn_task_tiled, 0, 0};
    if (c->kv_type == HX_KV_Q8) { /* llama.cpp: one-query path at any size */
        r->tpt = q8_tokens_per_task(c, B);
        r->fn = attn_task_q8;
        r->n_tasks = (B + r->tpt - 1) / r->tpt * hp->n_head_kv;
    } else if (c->kv_type == HX_KV_F16 && B < FA_TILE_Q && !c->tiled_rows) {
        r->tpt = f16_tokens_per_task(c, B, pos0);
        r->fn = attn_task_f16;
        r->n_tasks = (B + r->tpt - 1) / r->tpt * hp->n_head_kv;
    } else {
        r->n_tasks = hp->n_head_kv * ((B + tq - 1) / tq);
    }
}

/* Task `task` of a range: the plan's task off + task. */
static void range_task(void *ctx, int task, int thread)
{
    const hx_attn_run *r = ctx;
    r->fn(ctx, r->off + task, thread);
}

void hx_attention_range(hx_attn_run *r, int t0, int t1)
{
    if (t0 == 0 && t1 == r->n_tasks) {
        hx_threadpool_run(r->c->tp, t1, r->fn, r);
        return;
    }
    r->off = t0;
    hx_threadpool_run(r->c->tp, t1 - t0, range_task, r);
    r->off = 0;
}
