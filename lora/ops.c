/* ops.c: forward and backward of the element-wise and attention ops of a
 * qwen3 block (RMSNorm, NEOX RoPE, SwiGLU, causal GQA attention, xent). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/engine_ext.h"
#include "lora/train_int.h"

/* The AVX-512 paths are x86-64 code; elsewhere they are compiled out (on
 * aarch64 the level numbered HX_ISA_AVX512 is SDOT, not AVX-512). */
#if defined(__x86_64__)
#include <immintrin.h>
#define TR_AVX512 1
#else
#define TR_AVX512 0
#endif

void hx_tr_rmsnorm_fwd(float *y, float *r, const float *x, const float *g, int n,
                       float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * g[i];
    *r = scale;
}

void hx_tr_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x,
                       float r, const float *g, int n)
{
    double dot = 0.0;
    for (int i = 0; i < n; i++) dot += (double)(g[i] * dy[i]) * (x[i] * r);
    const float m = (float)(dot / n);
    for (int i = 0; i < n; i++) {
        const float xh = x[i] * r;
        dx[i] += r * (g[i] * dy[i] - xh * m);
        if (dg) dg[i] += dy[i] * xh;
    }
}

void hx_tr_rope_table(float *cs, int n_pos, int d, float base)
{
    const float theta_scale = powf(base, -2.0f / (float)d);
    for (int p = 0; p < n_pos; p++) {
        float theta = (float)p, *c = cs + (size_t)p * d;
        for (int i0 = 0; i0 < d; i0 += 2) {
            c[i0] = cosf(theta);
            c[i0 + 1] = sinf(theta);
            theta *= theta_scale;
        }
    }
}

void hx_tr_rope_fwd(float *x, const float *cs, int d)
{
    for (int i0 = 0; i0 < d; i0 += 2) {
        const float c = cs[i0], s = cs[i0 + 1];
        const int a = i0 / 2, b = i0 / 2 + d / 2;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

void hx_tr_rope_bwd(float *dy, const float *cs, int d)
{
    for (int i0 = 0; i0 < d; i0 += 2) {
        const float c = cs[i0], s = cs[i0 + 1];
        const int a = i0 / 2, b = i0 / 2 + d / 2;
        const float y0 = dy[a], y1 = dy[b];
        dy[a] = y0 * c + y1 * s;
        dy[b] = -y0 * s + y1 * c;
    }
}

/* As the engine's silu, x / (1 + e^-x). */
static float silu(float x) { return x / (1.0f + expf(-x)); }

static float sigmoid(float x)
{
    if (x >= 0) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

static void swiglu_fwd_scalar(float *s, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) s[i] = silu(a[i]) * b[i];
}

static void swiglu_bwd_scalar(float *da, float *db, const float *ds,
                              const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float sg = sigmoid(a[i]);
        da[i] += ds[i] * b[i] * (sg * (1.0f + a[i] * (1.0f - sg)));
        db[i] += ds[i] * silu(a[i]);
    }
}

#if TR_AVX512
/* sigma(a) = 1 / (1 + e^-a), 16 lanes. */
__attribute__((target("avx512f"))) static inline __m512 sigmoid512(__m512 a)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, hx_exp512(_mm512_sub_ps(_mm512_setzero_ps(), a))));
}

__attribute__((target("avx512f"))) static void
swiglu_fwd_avx512(float *s, const float *a, const float *b, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(a + i);
        _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_mul_ps(x, sigmoid512(x)), _mm512_loadu_ps(b + i)));
    }
    swiglu_fwd_scalar(s + i, a + i, b + i, n - i);
}

__attribute__((target("avx512f"))) static void
swiglu_bwd_avx512(float *da, float *db, const float *ds, const float *a,
                  const float *b, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(a + i), g = _mm512_loadu_ps(ds + i);
        const __m512 sg = sigmoid512(x);
        const __m512 d = _mm512_mul_ps(sg, _mm512_fmadd_ps(x, _mm512_sub_ps(one, sg), one));
        _mm512_storeu_ps(da + i, _mm512_fmadd_ps(_mm512_mul_ps(g, _mm512_loadu_ps(b + i)), d,
                                                 _mm512_loadu_ps(da + i)));
        _mm512_storeu_ps(db + i, _mm512_fmadd_ps(g, _mm512_mul_ps(x, sg), _mm512_loadu_ps(db + i)));
    }
    swiglu_bwd_scalar(da + i, db + i, ds + i, a + i, b + i, n - i);
}

#endif /* TR_AVX512 */

void hx_tr_swiglu_fwd(float *s, const float *a, const float *b, size_t n)
{
#if TR_AVX512
    if (hx_isa_current() >= HX_ISA_AVX512) {
        swiglu_fwd_avx512(s, a, b, n);
        return;
    }
#endif
    swiglu_fwd_scalar(s, a, b, n);
}

void hx_tr_swiglu_bwd(float *da, float *db, const float *ds, const float *a,
                      const float *b, size_t n)
{
#if TR_AVX512
    if (hx_isa_current() >= HX_ISA_AVX512) {
        swiglu_bwd_avx512(da, db, ds, a, b, n);
        return;
    }
#endif
    swiglu_bwd_scalar(da, db, ds, a, b, n);
}

double hx_tr_xent_soft(const float *z, int V, const int32_t *y, const float *q, int k,
                       float scale, float *dz)
{
    const double lse = hx_logsumexp(z, V);
    double loss = 0.0;
    for (int j = 0; j < k; j++) loss += q[j] * (lse - z[y[j]]);
    if (dz) {
        const int inplace = dz == z;
        for (int i = 0; i < V; i++) {
            const float p = scale * (float)exp((double)z[i] - lse);
            dz[i] = inplace ? p : dz[i] + p;
        }
        for (int j = 0; j < k; j++) dz[y[j]] -= scale * q[j];
    }
    return loss;
}

double hx_tr_xent(const float *z, int V, int y, float scale, float *dz)
{
    const float one = 1.0f;
    return hx_tr_xent_soft(z, V, &y, &one, 1, scale, dz);
}

/* The keys token i sees, in order: [0, pre[i]) then [start[i], i]. */
static int first_key(const tr_attn *a, int i)
{
    return a->pre && a->pre[i] > 0 ? 0 : a->start[i];
}

static int next_key(const tr_attn *a, int i, int j)
{
    return a->pre && j + 1 == a->pre[i] ? a->start[i] : j + 1;
}

static void attn_fwd_scalar(const tr_attn *a, int h, const float *q,
                            const float *k, const float *v, float *o,
                            float *lse, float *sc)
{
    const int d = a->d, g = h / (a->H / a->Hk);
    const float scale = 1.0f / sqrtf((float)d);
    for (int i = 0; i < a->T; i++) {
        const float *qi = q + ((size_t)i * a->H + h) * d;
        float *oi = o + ((size_t)i * a->H + h) * d;
        const int j0 = first_key(a, i);
        float mx = -INFINITY;
        for (int j = j0; j <= i; j = next_key(a, i, j)) {
            sc[j] = tr_dot(qi, k + ((size_t)j * a->Hk + g) * d, d) * scale;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        double sum = 0.0;
        for (int j = j0; j <= i; j = next_key(a, i, j)) sum += exp((double)(sc[j] - mx));
        const float l = mx + (float)log(sum);
        lse[(size_t)i * a->H + h] = l;
        memset(oi, 0, (size_t)d * sizeof(float));
        for (int j = j0; j <= i; j = next_key(a, i, j)) {
            const float p = expf(sc[j] - l);
            const float *vj = v + ((size_t)j * a->Hk + g) * d;
            for (int e = 0; e < d; e++) oi[e] += p * vj[e];
        }
    }
}

/* Backward of query head h of KV head g. */
static void attn_bwd_head(const tr_attn *a, int h, int g, const float *q,
                          const float *k, const float *v, const float *o,
                          const float *lse, const float *dout, float *dq,
                          float *dk, float *dv)
{
    const int d = a->d;
    const float scale = 1.0f / sqrtf((float)d);
    for (int i = 0; i < a->T; i++) {
        const size_t qi = ((size_t)i * a->H + h) * d;
        const float l = lse[(size_t)i * a->H + h];
        const float D = tr_dot(dout + qi, o + qi, d);
        for (int j = first_key(a, i); j <= i; j = next_key(a, i, j)) {
            const size_t kj = ((size_t)j * a->Hk + g) * d;
            const float p = expf(tr_dot(q + qi, k + kj, d) * scale - l);
            const float ds = p * (tr_dot(dout + qi, v + kj, d) - D) * scale;
            for (int e = 0; e < d; e++) {
                dq[qi + e] += ds * k[kj + e];
                dk[kj + e] += ds * q[qi + e];
                dv[kj + e] += p * dout[qi + e];
            }
        }
    }
}

/* ---- blocked AVX-512 attention (head_dim a multiple of 64) ----
 * Blocks of QB query rows against all the keys any of them sees: scores
 * S = Q K^T with the keys in vector lanes (K transposed once per task into
 * scratch), P = exp(S - lse) with P recomputed in the backward from the
 * saved row logsumexp, then O, dQ, dK, dV as outer products. Masked
 * entries get P = dS = 0 exactly. Every sum has a fixed order. With
 * bf16 every product takes bfloat16 pairs (AVX512-BF16 dot products of
 * two, F32 sums): the scores pair along the head dimension, P V and dS K
 * along the keys (both parities of key pairs, as a block's columns may
 * begin at an odd key), dS^T Q and P^T dO along the block's rows. */
#define QB 32 /* dK and dV rows are loaded and stored once per block */
#define SG 8  /* score rows per register tile */

/* Keys per transposed row: T rounded up, plus a zero tail the 32-wide
 * score tiles may read. */
static int attn_ld(int T) { return (T + 31) / 32 * 32 + 32; }

size_t hx_tr_attn_scratch(int T, int d)
{
    return (size_t)(2 * d + 3 * QB) * (size_t)attn_ld(T);
}

#if TR_AVX512
static int attn_fast(const tr_attn *a)
{
    return a->d % 64 == 0 && hx_isa_current() >= HX_ISA_AVX512;
}

/* QB query rows from i0 (rows past T repeat the last) and the keys any of
 * them sees, as score columns: a shared prefix's keys [0, pa) in columns
 * [0, pa), then keys [jlo, jlo + nk) from column off (pa rounded up to 32,
 * so no 32-wide tile mixes the two; 0 without a separate prefix). */
typedef struct qblk {
    int i0, nq, jlo, nk, pa, off;
} qblk;

static qblk block_of(const tr_attn *a, int i0)
{
    qblk b = {i0, a->T - i0 < QB ? a->T - i0 : QB, i0, 0, 0, 0};
    int pa = 0;
    for (int r = 0; r < b.nq; r++) {
        b.jlo = a->start[i0 + r] < b.jlo ? a->start[i0 + r] : b.jlo;
        if (a->pre && a->pre[i0 + r] > pa) pa = a->pre[i0 + r];
    }
    if (pa > 0 && pa < b.jlo) b.pa = pa, b.off = (pa + 31) / 32 * 32;
    else if (pa > 0) b.jlo = 0; /* the prefix is among the columns already */
    b.nk = i0 + b.nq - b.jlo;
    return b;
}

static int n_cols(const qblk *b) { return b->off + b->nk; }

/* Columns rows [0, r1) of the block can see (a query sees no later key). */
static int cols_upto(const qblk *b, int r1)
{
    return b->off + b->i0 + r1 - b->jlo;
}

static int key_of(const qblk *b, int jj)
{
    return jj < b->off ? jj : b->jlo + jj - b->off;
}

/* dst (d x ld) = rows of src (stride elements apart, d each), transposed;
 * columns T..ld zero. */
static void transpose_rows(float *dst, int ld, const float *src, size_t stride,
                           int T, int d)
{
    for (int j = 0; j < T; j++)
        for (int e = 0; e < d; e++) dst[(size_t)e * ld + j] = src[(size_t)j * stride + e];
    for (int e = 0; e < d; e++) memset(dst + (size_t)e * ld + T, 0, (size_t)(ld - T) * sizeof(float));
}


/* S[r][jj] (ld apart) = scale * rows[r] . key (b.jlo + jj) for r < nq
 * rounded up to SG, jj < nk rounded up to 32, but not past the columns
 * the SG rows can see (the rest stays unset: masked later); xt is the
 * transposed key (or value) matrix. */
__attribute__((target("avx512f"))) static void
scores(const qblk *b, const float *rows, size_t stride, const float *xt,
       int ldx, int d, float scale, float *S, int ld)
{
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < b->nq; r0 += SG) {
        const float *q[SG];
        for (int r = 0; r < SG; r++)
            q[r] = rows + (size_t)(b->i0 + (r0 + r < b->nq ? r0 + r : b->nq - 1)) * stride;
        const int nc = cols_upto(b, r0 + SG < b->nq ? r0 + SG : b->nq);
        for (int jc = 0; jc < nc; jc += 32) {
            __m512 s[SG][2];
            for (int r = 0; r < SG; r++) s[r][0] = s[r][1] = _mm512_setzero_ps();
            const float *x = xt + key_of(b, jc);
            for (int e = 0; e < d; e++, x += ldx) {
                const __m512 k0 = _mm512_loadu_ps(x), k1 = _mm512_loadu_ps(x + 16);
#pragma GCC unroll 8
                for (int r = 0; r < SG; r++) {
                    const __m512 qv = _mm512_set1_ps(q[r][e]);
                    s[r][0] = _mm512_fmadd_ps(qv, k0, s[r][0]);
                    s[r][1] = _mm512_fmadd_ps(qv, k1, s[r][1]);
                }
            }
            for (int r = 0; r < SG; r++) {
                float *y = S + (size_t)(r0 + r) * ld + jc;
                _mm512_storeu_ps(y, _mm512_mul_ps(s[r][0], sc));
                _mm512_storeu_ps(y + 16, _mm512_mul_ps(s[r][1], sc));
            }
        }
    }
}

/* Pairs of the bfloat16 scores: d <= BF_D. */
#define BF_D 256
#define BF_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* 32 floats at x as 16 bfloat16 pairs (x[2i], x[2i+1]). */
BF_TARGET static inline __m512i pairs32(const float *x)
{
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
}

/* Rows j < T of src (stride apart, d each) as pairs along d, transposed:
 * dst[e2 * ld + j] = (x_j[2 e2], x_j[2 e2 + 1]) in bfloat16; columns
 * T..ld zero. */
BF_TARGET static void transpose_pairs(uint32_t *dst, int ld, const float *src, size_t stride,
                                      int T, int d)
{
    uint32_t t[BF_D / 2];
    for (int j = 0; j < T; j++) {
        const float *x = src + (size_t)j * stride;
        for (int e = 0; e < d; e += 32) _mm512_storeu_si512(t + e / 2, pairs32(x + e));
        for (int e2 = 0; e2 < d / 2; e2++) dst[(size_t)e2 * ld + j] = t[e2];
    }
    for (int e2 = 0; e2 < d / 2; e2++)
        memset(dst + (size_t)e2 * ld + T, 0, (size_t)(ld - T) * sizeof *dst);
}

/* scores() with bfloat16 operands: the block's rows as pairs along d,
 * the keys (xt2, from transpose_pairs) likewise; F32 sums. */
BF_TARGET static void scores_bf16(const qblk *b, const float *rows, size_t stride,
                                  const uint32_t *xt2, int ldx, int d, float scale, float *S,
                                  int ld)
{
    const __m512 sc = _mm512_set1_ps(scale);
    uint32_t qp[SG][BF_D / 2];
    for (int r0 = 0; r0 < b->nq; r0 += SG) {
        for (int r = 0; r < SG; r++) {
            const int i = b->i0 + (r0 + r < b->nq ? r0 + r : b->nq - 1);
            for (int e = 0; e < d; e += 32)
                _mm512_storeu_si512(qp[r] + e / 2, pairs32(rows + (size_t)i * stride + e));
        }
        const int nc = cols_upto(b, r0 + SG < b->nq ? r0 + SG : b->nq);
        for (int jc = 0; jc < nc; jc += 32) {
            __m512 s[SG][2];
            for (int r = 0; r < SG; r++) s[r][0] = s[r][1] = _mm512_setzero_ps();
            const uint32_t *x = xt2 + key_of(b, jc);
            for (int e2 = 0; e2 < d / 2; e2++, x += ldx) {
                const __m512bh k0 = (__m512bh)_mm512_loadu_si512(x);
                const __m512bh k1 = (__m512bh)_mm512_loadu_si512(x + 16);
#pragma GCC unroll 8
                for (int r = 0; r < SG; r++) {
                    const __m512bh qv = (__m512bh)_mm512_set1_epi32((int)qp[r][e2]);
                    s[r][0] = _mm512_dpbf16_ps(s[r][0], qv, k0);
                    s[r][1] = _mm512_dpbf16_ps(s[r][1], qv, k1);
                }
            }
            for (int r = 0; r < SG; r++) {
                float *y = S + (size_t)(r0 + r) * ld + jc;
                _mm512_storeu_ps(y, _mm512_mul_ps(s[r][0], sc));
                _mm512_storeu_ps(y + 16, _mm512_mul_ps(s[r][1], sc));
            }
        }
    }
}

/* Keys (or values) of KV head g as the score products read them: F32
 * transposed, or bfloat16 pairs (a->bf16) in the same room. */
static void keys_for_scores(const tr_attn *a, float *xt, int ld, const float *x, size_t stride)
{
    if (a->bf16 && a->d <= BF_D) transpose_pairs((uint32_t *)xt, ld, x, stride, a->T, a->d);
    else transpose_rows(xt, ld, x, stride, a->T, a->d);
}

/* S = scale rows . keys^T, from keys_for_scores' layout. */
static void score_rows(const tr_attn *a, const qblk *b, const float *rows, size_t stride,
                       const float *xt, int ldx, float scale, float *S, int ld)
{
    if (a->bf16 && a->d <= BF_D)
        scores_bf16(b, rows, stride, (const uint32_t *)xt, ldx, a->d, scale, S, ld);
    else
        scores(b, rows, stride, xt, ldx, a->d, scale, S, ld);
}

/* Lanes lo..hi of 16. */
static __mmask16 lanes(int lo, int hi)
{
    if (hi < 0 || lo > 15 || hi < lo) return 0;
    const unsigned from = lo < 0 ? 0 : (unsigned)lo, to = hi > 15 ? 15 : (unsigned)hi;
    return (__mmask16)(((2u << to) - 1) & ~((1u << from) - 1));
}

/* Lanes of columns jj..jj+15 (never across off) that row r (query i0 + r)
 * sees: keys below its prefix length, and its document's up to itself. */
__attribute__((target("avx512f"))) static __mmask16
row_mask(const tr_attn *a, const qblk *b, int r, int jj)
{
    const int i = b->i0 + (r < b->nq ? r : b->nq - 1);
    const int pre = a->pre ? a->pre[i] : 0;
    if (jj < b->off) return lanes(0, (pre < b->pa ? pre : b->pa) - 1 - jj);
    const int k0 = b->jlo + jj - b->off;
    return lanes(a->start[i] - k0, i - k0) | lanes(0, pre - 1 - k0);
}

/* P = exp(S - lse) in place (0 where masked), for the block's rows. */
__attribute__((target("avx512f"))) static void
probs(const tr_attn *a, const qblk *b, float *S, int ld, const float *lse)
{
    for (int r = 0; r < b->nq; r++) {
        const __m512 l = _mm512_set1_ps(lse[r]);
        for (int jj = 0; jj < n_cols(b); jj += 16) {
            float *p = S + (size_t)r * ld + jj;
            const __m512 e = hx_exp512(_mm512_sub_ps(_mm512_loadu_ps(p), l));
            _mm512_storeu_ps(p, _mm512_maskz_mov_ps(row_mask(a, b, r, jj), e));
        }
    }
}

/* out rows (r < nq; += when acc) = sum over jj < nk of W[r][jj] x_(jlo+jj)
 * (up to the last column the rows can see), x rows stride apart, d wide. */
__attribute__((target("avx512f"))) static void
mix_rows(const qblk *b, const float *W, int ld, const float *x, size_t stride,
         int d, float *out, size_t ostride, int acc)
{
    for (int r0 = 0; r0 < b->nq; r0 += 4)
        for (int ec = 0; ec < d; ec += 64) {
            __m512 s[4][4];
            for (int r = 0; r < 4; r++)
                for (int u = 0; u < 4; u++) s[r][u] = _mm512_setzero_ps();
            const int nr = b->nq - r0 < 4 ? b->nq - r0 : 4, nc = cols_upto(b, r0 + nr);
            for (int jj = b->pa > 0 ? 0 : b->off; jj < nc; jj = jj + 1 == b->pa ? b->off : jj + 1) {
                const float *xr = x + (size_t)key_of(b, jj) * stride + ec;
                const __m512 x0 = _mm512_loadu_ps(xr), x1 = _mm512_loadu_ps(xr + 16);
                const __m512 x2 = _mm512_loadu_ps(xr + 32), x3 = _mm512_loadu_ps(xr + 48);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    const __m512 w = _mm512_set1_ps(W[(size_t)(r0 + (r < nr ? r : 0)) * ld + jj]);
                    s[r][0] = _mm512_fmadd_ps(w, x0, s[r][0]);
                    s[r][1] = _mm512_fmadd_ps(w, x1, s[r][1]);
                    s[r][2] = _mm512_fmadd_ps(w, x2, s[r][2]);
                    s[r][3] = _mm512_fmadd_ps(w, x3, s[r][3]);
                }
            }
            for (int r = 0; r < nr; r++)
                for (int u = 0; u < 4; u++) {
                    float *y = out + (size_t)(b->i0 + r0 + r) * ostride + ec + 16 * u;
                    __m512 v = s[r][u];
                    if (acc) v = _mm512_add_ps(v, _mm512_loadu_ps(y));
                    _mm512_storeu_ps(y, v);
                }
        }
}

/* dx (key rows k0 + jj) += sum over r < nq of W[r][jj] rows[i0 + r], for
 * the nk columns of W from its first. */
__attribute__((target("avx512f"))) static void
scatter_range(const qblk *b, const float *W, int ld, int k0, int nk,
              const float *rows, size_t stride, int d, float *dx, size_t xstride)
{
    int jj = 0;
    for (; jj + 4 <= nk; jj += 4)
        for (int ec = 0; ec < d; ec += 64) {
            __m512 s[4][4];
            for (int t = 0; t < 4; t++)
                for (int u = 0; u < 4; u++)
                    s[t][u] = _mm512_loadu_ps(dx + (size_t)(k0 + jj + t) * xstride + ec + 16 * u);
            for (int r = 0; r < b->nq; r++) {
                const float *q = rows + (size_t)(b->i0 + r) * stride + ec;
                const __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16);
                const __m512 q2 = _mm512_loadu_ps(q + 32), q3 = _mm512_loadu_ps(q + 48);
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    const __m512 w = _mm512_set1_ps(W[(size_t)r * ld + jj + t]);
                    s[t][0] = _mm512_fmadd_ps(w, q0, s[t][0]);
                    s[t][1] = _mm512_fmadd_ps(w, q1, s[t][1]);
                    s[t][2] = _mm512_fmadd_ps(w, q2, s[t][2]);
                    s[t][3] = _mm512_fmadd_ps(w, q3, s[t][3]);
                }
            }
            for (int t = 0; t < 4; t++)
                for (int u = 0; u < 4; u++)
                    _mm512_storeu_ps(dx + (size_t)(k0 + jj + t) * xstride + ec + 16 * u, s[t][u]);
        }
    for (; jj < nk; jj++) {
        float *y = dx + (size_t)(k0 + jj) * xstride;
        for (int ec = 0; ec < d; ec += 16) {
            __m512 s = _mm512_loadu_ps(y + ec);
            for (int r = 0; r < b->nq; r++)
                s = _mm512_fmadd_ps(_mm512_set1_ps(W[(size_t)r * ld + jj]),
                                    _mm512_loadu_ps(rows + (size_t)(b->i0 + r) * stride + ec), s);
            _mm512_storeu_ps(y + ec, s);
        }
    }
}

/* dx (the block's key rows) += sum over r < nq of W[r][col] rows[i0 + r]. */
static void scatter_rows(const qblk *b, const float *W, int ld, const float *rows,
                         size_t stride, int d, float *dx, size_t xstride)
{
    if (b->pa > 0) scatter_range(b, W, ld, 0, b->pa, rows, stride, d, dx, xstride);
    scatter_range(b, W + b->off, ld, b->jlo, b->nk, rows, stride, d, dx, xstride);
}

/* Rows 0..n of x (stride apart, width w: a multiple of 16) as bfloat16
 * pairs of rows, columns kept: xp[r2 * ostride + c] = (x_(2 r2)[c],
 * x_(2 r2 + 1)[c]), the partner of an odd last row 0. */
BF_TARGET static void row_pairs(uint32_t *xp, size_t ostride, const float *x, size_t stride,
                                int n, int w)
{
    for (int r = 0; r < n; r += 2) {
        const float *x0 = x + (size_t)r * stride, *x1 = x0 + stride;
        for (int c = 0; c < w; c += 16) {
            const __m512 lo = _mm512_loadu_ps(x0 + c);
            const __m512 hi = r + 1 < n ? _mm512_loadu_ps(x1 + c) : _mm512_setzero_ps();
            const __m512i a = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(lo));
            const __m512i b = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(hi));
            _mm512_storeu_si512(xp + (size_t)(r / 2) * ostride + c,
                                _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
        }
    }
}

/* mix_rows() from bfloat16 pairs along the keys: Wb (ldb apart) W's rows
 * as pairs of columns (pairs32: (W[r][2 c2], W[r][2 c2 + 1])), xp[p] the
 * key rows paired from parity p (row_pairs from row p: pair m is rows
 * 2 m + p and 2 m + p + 1). A pair of columns is a pair of keys, as both
 * of the block's column ranges start at an even column. */
BF_TARGET static void mix_rows_bf16(const qblk *b, const uint32_t *Wb, int ldb,
                                    uint32_t *const xp[2], int d, float *out,
                                    size_t ostride, int acc)
{
    for (int r0 = 0; r0 < b->nq; r0 += 4)
        for (int ec = 0; ec < d; ec += 64) {
            __m512 s[4][4];
            for (int r = 0; r < 4; r++)
                for (int u = 0; u < 4; u++) s[r][u] = _mm512_setzero_ps();
            const int nr = b->nq - r0 < 4 ? b->nq - r0 : 4, nc = cols_upto(b, r0 + nr);
            for (int c = b->pa > 0 ? 0 : b->off; c < nc; c = c + 2 >= b->pa && c < b->off ? b->off : c + 2) {
                const int k = key_of(b, c);
                const uint32_t *xr = xp[k & 1] + (size_t)(k >> 1) * d + ec;
                const __m512bh x0 = (__m512bh)_mm512_loadu_si512(xr);
                const __m512bh x1 = (__m512bh)_mm512_loadu_si512(xr + 16);
                const __m512bh x2 = (__m512bh)_mm512_loadu_si512(xr + 32);
                const __m512bh x3 = (__m512bh)_mm512_loadu_si512(xr + 48);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    const uint32_t wv = Wb[(size_t)(r0 + (r < nr ? r : 0)) * ldb + c / 2];
                    const __m512bh w = (__m512bh)_mm512_set1_epi32((int)wv);
                    s[r][0] = _mm512_dpbf16_ps(s[r][0], w, x0);
                    s[r][1] = _mm512_dpbf16_ps(s[r][1], w, x1);
                    s[r][2] = _mm512_dpbf16_ps(s[r][2], w, x2);
                    s[r][3] = _mm512_dpbf16_ps(s[r][3], w, x3);
                }
            }
            for (int r = 0; r < nr; r++)
                for (int u = 0; u < 4; u++) {
                    float *y = out + (size_t)(b->i0 + r0 + r) * ostride + ec + 16 * u;
                    __m512 v = s[r][u];
                    if (acc) v = _mm512_add_ps(v, _mm512_loadu_ps(y));
                    _mm512_storeu_ps(y, v);
                }
        }
}

/* W's rows r < nq as pairs of columns for mix_rows_bf16: Wb[r * ld / 2 +
 * c2] = (W[r][2 c2], W[r][2 c2 + 1]) for the block's columns. */
BF_TARGET static void row_col_pairs(uint32_t *Wb, const float *W, int ld, const qblk *b)
{
    const int nc = (n_cols(b) + 31) / 32 * 32;
    for (int r = 0; r < b->nq; r++)
        for (int c = 0; c < nc; c += 32)
            _mm512_storeu_si512(Wb + (size_t)r * (ld / 2) + c / 2, pairs32(W + (size_t)r * ld + c));
}

/* scatter_range() from bfloat16 pairs of the block's rows: Wp (W's rows
 * paired, ld apart) and rp (the rows paired, d apart) from row_pairs; F32
 * sums. */
BF_TARGET static void scatter_range_bf16(const qblk *b, const uint32_t *Wp, int ld, int k0,
                                         int nk, const uint32_t *rp, int d, float *dx,
                                         size_t xstride)
{
    const int n2 = (b->nq + 1) / 2;
    int jj = 0;
    for (; jj + 4 <= nk; jj += 4)
        for (int ec = 0; ec < d; ec += 64) {
            __m512 s[4][4];
            for (int t = 0; t < 4; t++)
                for (int u = 0; u < 4; u++)
                    s[t][u] = _mm512_loadu_ps(dx + (size_t)(k0 + jj + t) * xstride + ec + 16 * u);
            for (int r2 = 0; r2 < n2; r2++) {
                const uint32_t *q = rp + (size_t)r2 * d + ec;
                const __m512bh q0 = (__m512bh)_mm512_loadu_si512(q);
                const __m512bh q1 = (__m512bh)_mm512_loadu_si512(q + 16);
                const __m512bh q2 = (__m512bh)_mm512_loadu_si512(q + 32);
                const __m512bh q3 = (__m512bh)_mm512_loadu_si512(q + 48);
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    const __m512bh w = (__m512bh)_mm512_set1_epi32((int)Wp[(size_t)r2 * ld + jj + t]);
                    s[t][0] = _mm512_dpbf16_ps(s[t][0], w, q0);
                    s[t][1] = _mm512_dpbf16_ps(s[t][1], w, q1);
                    s[t][2] = _mm512_dpbf16_ps(s[t][2], w, q2);
                    s[t][3] = _mm512_dpbf16_ps(s[t][3], w, q3);
                }
            }
            for (int t = 0; t < 4; t++)
                for (int u = 0; u < 4; u++)
                    _mm512_storeu_ps(dx + (size_t)(k0 + jj + t) * xstride + ec + 16 * u, s[t][u]);
        }
    for (; jj < nk; jj++) {
        float *y = dx + (size_t)(k0 + jj) * xstride;
        for (int ec = 0; ec < d; ec += 16) {
            __m512 s = _mm512_loadu_ps(y + ec);
            for (int r2 = 0; r2 < n2; r2++)
                s = _mm512_dpbf16_ps(s, (__m512bh)_mm512_set1_epi32((int)Wp[(size_t)r2 * ld + jj]),
                                     (__m512bh)_mm512_loadu_si512(rp + (size_t)r2 * d + ec));
            _mm512_storeu_ps(y + ec, s);
        }
    }
}

/* Whether the block's products go through bfloat16 pairs. */
static int pairs_on(const tr_attn *a) { return a->bf16 && a->d <= BF_D; }

/* The keys (or values) x (stride apart) paired along the keys from both
 * parities into xp[0] and xp[1], each room for ld / 2 pairs of d. */
static void key_pairs(const tr_attn *a, uint32_t *const xp[2], const float *x, size_t stride)
{
    for (int p = 0; p < 2; p++)
        row_pairs(xp[p], (size_t)a->d, x + (size_t)p * stride, stride, a->T - p, a->d);
}

/* mix_rows(), or with pairs_on() mix_rows_bf16 on the keys paired by
 * key_pairs into xp, W paired into Wb (room for QB x ld / 2). */
static void mix_rows_as(const tr_attn *a, const qblk *b, const float *W, int ld,
                        const float *x, size_t stride, uint32_t *const xp[2],
                        uint32_t *Wb, float *out, size_t ostride, int acc)
{
    if (!pairs_on(a)) {
        mix_rows(b, W, ld, x, stride, a->d, out, ostride, acc);
        return;
    }
    row_col_pairs(Wb, W, ld, b);
    mix_rows_bf16(b, Wb, ld / 2, xp, a->d, out, ostride, acc);
}

/* dx (the block's key rows) += W^T rows, as scatter_rows(), with W and the
 * rows rounded to bfloat16 pairs when a->bf16: Wp (QB / 2 x ld) and rp
 * (QB / 2 x d) are room for them. */
static void scatter_rows_as(const tr_attn *a, const qblk *b, const float *W, int ld,
                            const float *rows, size_t stride, float *dx, size_t xstride,
                            uint32_t *Wp, uint32_t *rp)
{
    if (!pairs_on(a)) {
        scatter_rows(b, W, ld, rows, stride, a->d, dx, xstride);
        return;
    }
    row_pairs(Wp, (size_t)ld, W, (size_t)ld, b->nq, (n_cols(b) + 15) / 16 * 16);
    row_pairs(rp, (size_t)a->d, rows + (size_t)b->i0 * stride, stride, b->nq, a->d);
    if (b->pa > 0) scatter_range_bf16(b, Wp, ld, 0, b->pa, rp, a->d, dx, xstride);
    scatter_range_bf16(b, Wp + b->off, ld, b->jlo, b->nk, rp, a->d, dx, xstride);
}

__attribute__((target("avx512f"))) static void
attn_fwd_fast(const tr_attn *a, int h, const float *q, const float *k,
              const float *v, float *o, float *lse, float *sc)
{
    const int d = a->d, g = h / (a->H / a->Hk), ld = attn_ld(a->T);
    const size_t qs = (size_t)a->H * d, ks = (size_t)a->Hk * d;
    float *kt = sc, *S = sc + 2 * (size_t)d * ld;
    uint32_t *const vp[2] = {(uint32_t *)(sc + (size_t)d * ld),
                             (uint32_t *)(sc + (size_t)d * ld) + (size_t)(ld / 2) * d};
    uint32_t *Wb = (uint32_t *)(S + (size_t)QB * ld);
    keys_for_scores(a, kt, ld, k + (size_t)g * d, ks);
    if (pairs_on(a)) key_pairs(a, vp, v + (size_t)g * d, ks);
    for (int i0 = 0; i0 < a->T; i0 += QB) {
        const qblk b = block_of(a, i0);
        score_rows(a, &b, q + (size_t)h * d, qs, kt, ld, 1.0f / sqrtf((float)d), S, ld);
        float l[QB];
        for (int r = 0; r < b.nq; r++) {
            const float *s = S + (size_t)r * ld;
            __m512 mx = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
            for (int jj = 0; jj < n_cols(&b); jj += 16)
                mx = _mm512_mask_max_ps(mx, row_mask(a, &b, r, jj), mx, _mm512_loadu_ps(s + jj));
            const float m = _mm512_reduce_max_ps(mx);
            for (int jj = 0; jj < n_cols(&b); jj += 16) {
                const __m512 e = hx_exp512(_mm512_sub_ps(_mm512_loadu_ps(s + jj), _mm512_set1_ps(m)));
                sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(row_mask(a, &b, r, jj), e));
            }
            l[r] = m + logf(_mm512_reduce_add_ps(sum));
            lse[(size_t)(i0 + r) * a->H + h] = l[r];
        }
        probs(a, &b, S, ld, l);
        mix_rows_as(a, &b, S, ld, v + (size_t)g * d, ks, vp, Wb,
                    o + (size_t)h * d, qs, 0);
    }
}

__attribute__((target("avx512f"))) static void
attn_bwd_fast(const tr_attn *a, int g, const float *q, const float *k,
              const float *v, const float *o, const float *lse,
              const float *dout, float *dq, float *dk, float *dv, float *sc)
{
    const int d = a->d, rep = a->H / a->Hk, ld = attn_ld(a->T);
    const size_t qs = (size_t)a->H * d, ks = (size_t)a->Hk * d;
    const float scale = 1.0f / sqrtf((float)d);
    float *kt = sc, *vt = sc + (size_t)d * ld, *P = vt + (size_t)d * ld;
    float *dP = P + (size_t)QB * ld;
    uint32_t *Wp = (uint32_t *)(dP + (size_t)QB * ld), rp[QB / 2 * BF_D];
    keys_for_scores(a, kt, ld, k + (size_t)g * d, ks);
    keys_for_scores(a, vt, ld, v + (size_t)g * d, ks);
    /* with pairs, the second halves of kt and vt are free: the keys paired */
    uint32_t *const kp[2] = {(uint32_t *)kt + (size_t)(d / 2) * ld, (uint32_t *)vt + (size_t)(d / 2) * ld};
    if (pairs_on(a)) key_pairs(a, kp, k + (size_t)g * d, ks);
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        const float *qh = q + (size_t)h * d, *doh = dout + (size_t)h * d;
        for (int i0 = 0; i0 < a->T; i0 += QB) {
            const qblk b = block_of(a, i0);
            float l[QB], D[QB];
            for (int r = 0; r < b.nq; r++) {
                l[r] = lse[(size_t)(i0 + r) * a->H + h];
                D[r] = tr_dot(doh + (size_t)(i0 + r) * qs, o + (size_t)(i0 + r) * qs + (size_t)h * d, d);
            }
            score_rows(a, &b, qh, qs, kt, ld, scale, P, ld);
            probs(a, &b, P, ld, l);
            score_rows(a, &b, doh, qs, vt, ld, 1.0f, dP, ld);
            /* dP becomes dS = P (dP - D) scale */
            for (int r = 0; r < b.nq; r++) {
                const __m512 Dr = _mm512_set1_ps(D[r]), sv = _mm512_set1_ps(scale);
                for (int jj = 0; jj < n_cols(&b); jj += 16) {
                    float *x = dP + (size_t)r * ld + jj;
                    const __m512 p = _mm512_loadu_ps(P + (size_t)r * ld + jj);
                    const __m512 ds = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(_mm512_loadu_ps(x), Dr)), sv);
                    _mm512_storeu_ps(x, _mm512_maskz_mov_ps(row_mask(a, &b, r, jj), ds));
                }
            }
            mix_rows_as(a, &b, dP, ld, k + (size_t)g * d, ks, kp, Wp,
                        dq + (size_t)h * d, qs, 1);
            scatter_rows_as(a, &b, dP, ld, qh, qs, dk + (size_t)g * d, ks, Wp, rp);
            scatter_rows_as(a, &b, P, ld, doh, qs, dv + (size_t)g * d, ks, Wp, rp);
        }
    }
}

#endif /* TR_AVX512 */

void hx_tr_attn_fwd_head(const tr_attn *a, int h, const float *q, const float *k,
                         const float *v, float *o, float *lse, float *sc)
{
#if TR_AVX512
    if (attn_fast(a)) {
        attn_fwd_fast(a, h, q, k, v, o, lse, sc);
        return;
    }
#endif
    attn_fwd_scalar(a, h, q, k, v, o, lse, sc);
}

void hx_tr_attn_bwd_group(const tr_attn *a, int g, const float *q,
                          const float *k, const float *v, const float *o,
                          const float *lse, const float *dout, float *dq,
                          float *dk, float *dv, float *scratch)
{
    const int rep = a->H / a->Hk;
#if TR_AVX512
    if (attn_fast(a)) {
        attn_bwd_fast(a, g, q, k, v, o, lse, dout, dq, dk, dv, scratch);
        return;
    }
#else
    (void)scratch;
#endif
    for (int h = g * rep; h < (g + 1) * rep; h++)
        attn_bwd_head(a, h, g, q, k, v, o, lse, dout, dq, dk, dv);
}
