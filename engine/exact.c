/* exact.c: the exact reference forward pass (exact.h): dequantized
 * weights, double arithmetic, all tokens of a call one layer at a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/exact.h"
#include "engine/model_int.h"
#include "engine/quant.h"
#include "engine/threadpool.h"

/* y (nx, rows) = x (nx, cols) times the transpose of matrix `mat` of w,
 * row by row: each weight row dequantized once, into the thread's buffer. */
typedef struct mm_job {
    const hx_wmat *w;
    int64_t mat;
    const double *x;
    int nx;
    double *y;
    float *bufs;   /* n_threads * buf_len floats */
    int64_t buf_len;
    int n_tasks;
} mm_job;

static void mm_task(void *arg, int task, int thread)
{
    const mm_job *j = arg;
    const hx_wmat *w = j->w;
    const int64_t r0 = w->rows * task / j->n_tasks, r1 = w->rows * (task + 1) / j->n_tasks;
    const char *base = hx_wmat_at(w, j->mat);
    float *row = j->bufs + (size_t)thread * (size_t)j->buf_len;
    for (int64_t r = r0; r < r1; r++) {
        hx_dequantize_row(w->type, base + (size_t)r * w->row_bytes, row, w->cols);
        for (int t = 0; t < j->nx; t++) {
            const double *xt = j->x + (size_t)t * (size_t)w->cols;
            double s = 0;
            for (int64_t i = 0; i < w->cols; i++) s += (double)row[i] * xt[i];
            j->y[(size_t)t * (size_t)w->rows + (size_t)r] = s;
        }
    }
}

typedef struct xrun {
    const hx_model *m;
    hx_threadpool *tp;
    int n;             /* tokens */
    float *bufs;       /* row buffers of the threads */
    int64_t buf_len;
} xrun;

static void mm(xrun *r, const hx_wmat *w, int64_t mat, const double *x, int nx,
               double *y)
{
    mm_job j = {w, mat, x, nx, y, r->bufs, r->buf_len, 0};
    int64_t tasks = w->rows < 64 ? w->rows : 64;
    j.n_tasks = (int)tasks;
    hx_threadpool_run(r->tp, j.n_tasks, mm_task, &j);
}

static void rmsnorm(double *o, const double *x, const float *w, int n, double eps)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    const double sc = 1.0 / sqrt(s / n + eps);
    for (int i = 0; i < n; i++) o[i] = x[i] * sc * (w ? (double)w[i] : 1.0);
}

/* Pairs (i, i + d/2) (NEOX) or (2i, 2i+1) rotated by
 * pos * freq_scale * base^(-2i/d). */
static void rope(double *x, int d, int pos, const hx_model *m)
{
    const hx_hparams *hp = &m->hp;
    const int neox = hp->rope_type == HX_ROPE_NEOX;
    for (int i = 0; i < d / 2; i++) {
        const double th = pos * (double)m->rope_freq_scale *
                          pow((double)hp->rope_base, -2.0 * i / d);
        const int ia = neox ? i : 2 * i, ib = neox ? i + d / 2 : 2 * i + 1;
        const double c = cos(th), s = sin(th), a = x[ia], b = x[ib];
        x[ia] = a * c - b * s;
        x[ib] = a * s + b * c;
    }
}

static void add_bias(double *y, const float *b, int n)
{
    for (int i = 0; b && i < n; i++) y[i] += b[i];
}

/* Scratch of one call, sized for n tokens. */
typedef struct xbuf {
    double *x, *xn, *q, *k, *v, *att, *o, *f1, *f2, *acc, *lg;
} xbuf;

/* Causal attention of layer L over all n tokens, added into b->x. */
static void attention(xrun *r, const hx_layer *L, xbuf *b)
{
    const hx_hparams *hp = &r->m->hp;
    const int n = r->n, e = hp->n_embd, d = hp->head_dim, nh = hp->n_head,
              nkv = hp->n_head_kv, qd = nh * d, kvd = nkv * d;
    for (int t = 0; t < n; t++)
        rmsnorm(b->xn + (size_t)t * e, b->x + (size_t)t * e, L->attn_norm, e, hp->rms_eps);
    mm(r, &L->wq, 0, b->xn, n, b->q);
    mm(r, &L->wk, 0, b->xn, n, b->k);
    mm(r, &L->wv, 0, b->xn, n, b->v);
    for (int t = 0; t < n; t++) {
        double *q = b->q + (size_t)t * qd, *k = b->k + (size_t)t * kvd;
        add_bias(q, L->bq, qd);
        add_bias(k, L->bk, kvd);
        add_bias(b->v + (size_t)t * kvd, L->bv, kvd);
        for (int h = 0; h < nh; h++) {
            if (L->q_norm) rmsnorm(q + h * d, q + h * d, L->q_norm, d, hp->rms_eps);
            rope(q + h * d, d, t, r->m);
        }
        for (int h = 0; h < nkv; h++) {
            if (L->k_norm) rmsnorm(k + h * d, k + h * d, L->k_norm, d, hp->rms_eps);
            rope(k + h * d, d, t, r->m);
        }
    }
    double *sc = b->lg; /* n scores */
    for (int t = 0; t < n; t++)
        for (int h = 0; h < nh; h++) {
            const int kh = h / (nh / nkv);
            const double *q = b->q + (size_t)t * qd + h * d;
            double mx = -INFINITY, sum = 0;
            for (int p = 0; p <= t; p++) {
                const double *kp = b->k + (size_t)p * kvd + kh * d;
                double s = 0;
                for (int i = 0; i < d; i++) s += q[i] * kp[i];
                sc[p] = s / sqrt((double)d);
                mx = sc[p] > mx ? sc[p] : mx;
            }
            for (int p = 0; p <= t; p++) sum += sc[p] = exp(sc[p] - mx);
            double *a = b->att + (size_t)t * qd + h * d;
            for (int i = 0; i < d; i++) {
                double s = 0;
                for (int p = 0; p <= t; p++) s += sc[p] * b->v[(size_t)p * kvd + kh * d + i];
                a[i] = s / sum;
            }
        }
    mm(r, &L->wo, 0, b->att, n, b->o);
    for (size_t i = 0; i < (size_t)n * e; i++) b->x[i] += b->o[i];
}

/* SwiGLU of matrix `mat` of gate/up/down on the nx rows of xn into out
 * (nx, n_embd); f1, f2 hold nx * width. */
static void swiglu(xrun *r, const hx_wmat *gate, const hx_wmat *up,
                   const hx_wmat *down, int64_t mat, const double *xn, int nx,
                   double *f1, double *f2, double *out)
{
    mm(r, gate, mat, xn, nx, f1);
    mm(r, up, mat, xn, nx, f2);
    for (size_t i = 0; i < (size_t)nx * (size_t)gate->rows; i++)
        f1[i] = f1[i] / (1.0 + exp(-f1[i])) * f2[i];
    mm(r, down, mat, f1, nx, out);
}

/* Router of one token: softmax of lg (n_expert), the n_used best (ties to
 * the lower index) into sel, their weights (renormalised when norm) in w. */
static void route(double *lg, int ne, int nu, int norm, int *sel, double *w)
{
    double mx = -INFINITY, sum = 0, ws = 0;
    for (int i = 0; i < ne; i++) mx = lg[i] > mx ? lg[i] : mx;
    for (int i = 0; i < ne; i++) sum += lg[i] = exp(lg[i] - mx);
    for (int s = 0; s < nu; s++) {
        int best = -1;
        for (int i = 0; i < ne; i++) {
            int used = 0;
            for (int u = 0; u < s; u++) used |= sel[u] == i;
            if (!used && (best < 0 || lg[i] > lg[best])) best = i;
        }
        sel[s] = best;
        ws += w[s] = lg[best] / sum;
    }
    for (int s = 0; norm && s < nu; s++) w[s] /= ws;
}

/* The FFN (dense or MoE) of layer L over all n tokens, added into b->x. */
static int ffn(xrun *r, const hx_layer *L, xbuf *b)
{
    const hx_hparams *hp = &r->m->hp;
    const int n = r->n, e = hp->n_embd, ne = hp->n_expert, nu = hp->n_expert_used;
    for (int t = 0; t < n; t++)
        rmsnorm(b->xn + (size_t)t * e, b->x + (size_t)t * e, L->ffn_norm, e, hp->rms_eps);
    if (!ne) {
        swiglu(r, &L->ffn_gate, &L->ffn_up, &L->ffn_down, 0, b->xn, n, b->f1, b->f2, b->o);
        for (size_t i = 0; i < (size_t)n * e; i++) b->x[i] += b->o[i];
        return HX_OK;
    }
    int *sel = hx_malloc(sizeof *sel * (size_t)n * nu), *who = hx_malloc(sizeof *who * (size_t)n);
    double *w = hx_malloc(sizeof *w * (size_t)n * nu), *lg = hx_malloc(sizeof *lg * (size_t)n * ne);
    double *gx = hx_malloc(sizeof *gx * (size_t)n * e);
    if (!sel || !who || !w || !lg || !gx) {
        free(sel), free(who), free(w), free(lg), free(gx);
        return HX_ERR_NOMEM;
    }
    mm(r, &L->ffn_gate_inp, 0, b->xn, n, lg);
    for (int t = 0; t < n; t++)
        route(lg + (size_t)t * ne, ne, nu, hp->expert_weights_norm, sel + (size_t)t * nu,
              w + (size_t)t * nu);
    memset(b->acc, 0, sizeof *b->acc * (size_t)n * e);
    for (int x = 0; x < ne; x++) {
        int nx = 0;
        for (int t = 0; t < n; t++)
            for (int s = 0; s < nu; s++)
                if (sel[t * nu + s] == x) {
                    who[nx] = t * nu + s;
                    memcpy(gx + (size_t)nx++ * e, b->xn + (size_t)t * e, sizeof *gx * e);
                }
        if (!nx) continue;
        swiglu(r, &L->gate_exps, &L->up_exps, &L->down_exps, x, gx, nx, b->f1, b->f2, b->o);
        for (int k = 0; k < nx; k++) {
            const int t = who[k] / nu;
            for (int i = 0; i < e; i++)
                b->acc[(size_t)t * e + i] += w[who[k]] * b->o[(size_t)k * e + i];
        }
    }
    for (size_t i = 0; i < (size_t)n * e; i++) b->x[i] += b->acc[i];
    free(sel), free(who), free(w), free(lg), free(gx);
    return HX_OK;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int forward(xrun *r, xbuf *b, const int32_t *tok, float *logits)
{
    const hx_model *m = r->m;
    const hx_hparams *hp = &m->hp;
    const int n = r->n, e = hp->n_embd;
    for (int t = 0; t < n; t++) {
        const hx_wmat *te = &m->tok_embd;
        hx_dequantize_row(te->type, (const char *)te->data + (size_t)tok[t] * te->row_bytes,
                          r->bufs, e);
        for (int i = 0; i < e; i++) b->x[(size_t)t * e + i] = r->bufs[i];
    }
    for (int il = 0; il < hp->n_layer; il++) {
        attention(r, &m->layers[il], b);
        int rc = ffn(r, &m->layers[il], b);
        if (rc) return rc;
    }
    for (int t = 0; t < n; t++)
        rmsnorm(b->xn + (size_t)t * e, b->x + (size_t)t * e, m->output_norm, e, hp->rms_eps);
    mm(r, &m->output, 0, b->xn, n, b->lg);
    for (size_t i = 0; i < (size_t)n * hp->n_vocab; i++) logits[i] = (float)b->lg[i];
    return HX_OK;
}

int hx_exact_logits(const hx_model *m, const int32_t *tok, int n,
                    int n_threads, float *logits, hx_err *err)
{
    const hx_hparams *hp = &m->hp;
    if (n < 1) return hx_err_set(err, HX_ERR_INVALID, "exact: no tokens");
    for (int t = 0; t < n; t++)
        if (tok[t] < 0 || tok[t] >= hp->n_vocab)
            return hx_err_set(err, HX_ERR_INVALID, "exact: token %d out of range (vocab %d)",
                              tok[t], hp->n_vocab);
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim,
                  kvd = (int64_t)hp->n_head_kv * hp->head_dim,
                  wide = max64(max64(hp->n_embd, qd), max64(hp->n_ff, hp->n_ff_exp));
    xrun r = {m, NULL, n, NULL, wide};
    if (n_threads > 1 && !(r.tp = hx_threadpool_new(n_threads)))
        return hx_err_set(err, HX_ERR_NOMEM, "exact: cannot start %d threads", n_threads);
    const size_t N = (size_t)n;
    xbuf b;
    double **slots[] = {&b.x, &b.xn, &b.q, &b.k, &b.v, &b.att, &b.o, &b.f1, &b.f2, &b.acc, &b.lg};
    const size_t len[] = {N * hp->n_embd, N * hp->n_embd, N * qd, N * kvd, N * kvd, N * qd,
                          N * hp->n_embd, N * wide, N * wide, N * hp->n_embd,
                          N * (size_t)max64(hp->n_vocab, n)};
    int ok = 1;
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
        ok &= (*slots[i] = hx_malloc(len[i] * sizeof(double))) != NULL;
    r.bufs = hx_malloc(sizeof *r.bufs * (size_t)hx_threadpool_n_threads(r.tp) * (size_t)wide);
    int rc = ok && r.bufs ? HX_OK : HX_ERR_NOMEM;
    if (rc == HX_OK) rc = forward(&r, &b, tok, logits);
    if (rc != HX_OK) hx_err_set(err, rc, "exact: out of memory for %d tokens", n);
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) free(*slots[i]);
    free(r.bufs);
    hx_threadpool_free(r.tp);
    return rc;
}
