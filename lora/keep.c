/* keep.c: what a LoRA adapter changes on other inputs than its training
 * data, as a penalty (lora.h). For an adapted linear y = W x + s B A x the
 * change on input x is s B A x; over the generic documents' tokens
 *   sum_x ||s B A x||^2 = s^2 tr(B A M A^T B^T),  M = sum_x x x^T,
 * so the penalty needs M (in x in) and sum_x ||W x||^2 (its scale), both
 * collected once with the adapter off, and nothing of the documents
 * afterwards. Divided by that scale and averaged over the adapted linears
 * it is a relative change, so lambda means the same on every model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lora/train_int.h"

#define N_LIN 7

void hx_tr_keep_free(hx_trainer *tr)
{
    if (tr->keep_m)
        for (int k = 0; k < tr->hp.n_layer * N_LIN; k++) free(tr->keep_m[k]);
    free(tr->keep_m);
    free(tr->keep_e);
    tr->keep_m = NULL, tr->keep_e = NULL;
}

static int keep_alloc(hx_trainer *tr, hx_err *err)
{
    if (tr->keep_m) return HX_OK;
    const int n = tr->hp.n_layer * N_LIN;
    tr->keep_m = hx_calloc((size_t)n, sizeof *tr->keep_m);
    tr->keep_e = hx_calloc((size_t)n, sizeof *tr->keep_e);
    int ok = tr->keep_m && tr->keep_e;
    for (int k = 0; ok && k < n; k++) {
        const tr_lin *li = &tr->layers[k / N_LIN].lin[k % N_LIN];
        const size_t in = (size_t)li->w.cols;
        if (li->a) ok = (tr->keep_m[k] = hx_calloc(in * in, sizeof(float))) != NULL;
    }
    if (ok) return HX_OK;
    hx_tr_keep_free(tr);
    return hx_err_set(err, HX_ERR_NOMEM, "train: out of memory for the keep sums");
}

size_t hx_trainer_keep_bytes(const hx_trainer *tr)
{
    size_t b = 0;
    for (int l = 0; tr->lora && l < tr->hp.n_layer; l++)
        for (int i = 0; i < N_LIN; i++) {
            const tr_lin *li = &tr->layers[l].lin[i];
            if (li->a) b += (size_t)li->w.cols * (size_t)li->w.cols * sizeof(float);
        }
    return b;
}

/* The rows of x (n x cols) whose mask is set, packed into a new buffer
 * (*m of them); NULL when out of memory. */
static float *masked_rows(const float *x, int n, int cols, const uint8_t *mask, int *m)
{
    float *g = hx_malloc_array((size_t)n * (size_t)cols, sizeof *g);
    *m = 0;
    for (int t = 0; g && t < n; t++)
        if (mask[t]) memcpy(g + (size_t)(*m)++ * cols, x + (size_t)t * cols, (size_t)cols * sizeof *g);
    return g;
}

void hx_tr_keep_add(hx_trainer *tr, int l, int i, const float *x, const float *y, int n)
{
    const tr_lin *li = &tr->layers[l].lin[i];
    const int in = li->w.cols, out = li->w.rows;
    float *gx = NULL, *gy = NULL;
    if (tr->keep_mask) { /* the positions whose target counts */
        int m = 0;
        gx = masked_rows(x, n, in, tr->keep_mask, &m);
        gy = masked_rows(y, n, out, tr->keep_mask, &m);
        if (!gx || !gy) tr->keep_failed = 1;
        x = gx, y = gy, n = gx && gy ? m : 0;
    }
    float *mm = tr->keep_m[l * N_LIN + i];
    if (n && hx_tr_gemm_ex(tr->tp, in, in, n, 1.0f, x, in, 1, x, in, 0, mm, in, 1))
        hx_tr_gemm_ref(in, in, n, 1.0f, x, in, 1, x, in, 0, mm, in, 1);
    double e = 0.0;
    for (size_t k = 0; k < (size_t)n * (size_t)out; k++) e += (double)y[k] * y[k];
    tr->keep_e[l * N_LIN + i] += e;
    free(gx), free(gy);
}

int hx_trainer_keep_collect(hx_trainer *tr, const hx_batch *b, int masked, hx_err *err)
{
    if (!tr->lora) return hx_err_set(err, HX_ERR_INVALID, "train: keep needs a LoRA trainer");
    int rc = keep_alloc(tr, err);
    if (rc) return rc;
    const int n = tr->hp.n_layer * N_LIN;
    float *s = hx_malloc_array((size_t)n, sizeof *s);
    if (!s) return hx_err_set(err, HX_ERR_NOMEM, "train: out of memory");
    for (int k = 0; k < n; k++) { /* the adapter off: the base's activations */
        tr_lin *li = &tr->layers[k / N_LIN].lin[k % N_LIN];
        s[k] = li->s, li->s = 0.0f;
    }
    tr->keep_collecting = 1, tr->keep_failed = 0;
    tr->keep_mask = masked ? b->mask : NULL; /* NULL mask: every position */
    rc = hx_tr_forward(tr, b, NULL, NULL, NULL, 0, 1.0, err);
    tr->keep_collecting = 0, tr->keep_mask = NULL;
    for (int k = 0; k < n; k++) tr->layers[k / N_LIN].lin[k % N_LIN].s = s[k];
    free(s);
    if (!rc && tr->keep_failed) rc = hx_err_set(err, HX_ERR_NOMEM, "train: out of memory");
    const int n_tok = b->n_seq * b->n_tok;
    for (int t = 0; !rc && t < n_tok; t++) tr->keep_tokens += !masked || !b->mask || b->mask[t];
    return rc;
}

void hx_trainer_keep_set(hx_trainer *tr, double lambda) { tr->keep_lambda = lambda; }
double hx_trainer_keep_value(const hx_trainer *tr) { return tr->keep_value; }

/* One linear's share c * s^2 tr(B K B^T), K = A M A^T, c = weight / e;
 * dB += 2 c s^2 B K, dA += 2 c s^2 (B^T B) A M. g: r * in, k and btb:
 * r * r, bk: out * r floats of scratch. */
static double lin_penalty(hx_trainer *tr, const tr_lin *li, const float *m, double c,
                          float *g, float *k, float *btb, float *bk)
{
    const int r = li->r, in = li->w.cols, out = li->w.rows;
    c *= (double)li->s * li->s;
    if (hx_tr_gemm_ex(tr->tp, r, in, in, 1.0f, li->a, in, 0, m, in, 0, g, in, 0))
        hx_tr_gemm_ref(r, in, in, 1.0f, li->a, in, 0, m, in, 0, g, in, 0);
    hx_tr_gemm_ref(r, r, in, 1.0f, g, in, 0, li->a, in, 1, k, r, 0);
    hx_tr_gemm_ref(out, r, r, 1.0f, li->b, r, 0, k, r, 0, bk, r, 0);
    hx_tr_gemm_ref(r, r, out, 1.0f, li->b, r, 1, li->b, r, 0, btb, r, 0);
    double p = 0.0;
    for (size_t t = 0; t < (size_t)out * r; t++) {
        p += (double)li->b[t] * bk[t];
        li->db[t] += (float)(2.0 * c * bk[t]);
    }
    hx_tr_gemm_ref(r, in, r, (float)(2.0 * c), btb, r, 0, g, in, 0, li->da, in, 1);
    return c * p;
}

int hx_tr_keep_grad(hx_trainer *tr)
{
    tr->keep_value = 0.0;
    if (!(tr->keep_lambda > 0) || !tr->keep_m || !tr->keep_tokens) return HX_OK;
    const int n = tr->hp.n_layer * N_LIN;
    int n_lin = 0, in_max = 0, out_max = 0;
    for (int k = 0; k < n; k++) {
        const tr_lin *li = &tr->layers[k / N_LIN].lin[k % N_LIN];
        if (!tr->keep_m[k] || !(tr->keep_e[k] > 0)) continue;
        n_lin++;
        in_max = li->w.cols > in_max ? li->w.cols : in_max;
        out_max = li->w.rows > out_max ? li->w.rows : out_max;
    }
    if (!n_lin) return HX_OK;
    const size_t r = (size_t)tr->rank;
    float *g = hx_malloc_array(r * (size_t)in_max + 2 * r * r + (size_t)out_max * r, sizeof(float));
    if (!g) return HX_ERR_NOMEM;
    for (int k = 0; k < n; k++) {
        const tr_lin *li = &tr->layers[k / N_LIN].lin[k % N_LIN];
        if (!tr->keep_m[k] || !(tr->keep_e[k] > 0)) continue;
        const double c = tr->keep_lambda / (tr->keep_e[k] * n_lin);
        tr->keep_value += lin_penalty(tr, li, tr->keep_m[k], c, g, g + r * in_max,
                                      g + r * in_max + r * r, g + r * in_max + 2 * r * r);
    }
    free(g);
    return HX_OK;
}
