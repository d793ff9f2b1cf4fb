/* matmul.c: F32 matrix products of training (forward, input gradient,
 * weight gradient) on the engine's pool, and linear layers with LoRA. */
#include <stdlib.h>
#include <string.h>

#include "lora/train_int.h"

/* Rows per tile: frozen quantized weights are dequantized a tile at a time
 * into per-thread scratch. Each task owns its outputs and sums in a fixed
 * order, so results do not depend on the thread count. */
#define TILE 16

size_t hx_tr_mm_scratch(int cols) { return (size_t)TILE * (size_t)cols; }

/* Rows [r0, r0+n) of w as F32: in place, or dequantized into buf. */
static const float *rows_of(const tr_w *w, int r0, int n, float *buf)
{
    if (w->f) return w->f + (size_t)r0 * w->cols;
    const hx_wmat *q = w->q;
    if (q->type == HX_TYPE_F32) return hx_wmat_row(q, w->mat, r0);
    for (int i = 0; i < n; i++)
        hx_dequantize_row(q->type, hx_wmat_row(q, w->mat, r0 + i), buf + (size_t)i * w->cols,
                          w->cols);
    return buf;
}

static void axpy(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* The weight's F32 rows when it has them (trainable or an F32 file). */
static const float *f32_of(const tr_w *w)
{
    if (w->f) return w->f;
    return w->q->type == HX_TYPE_F32 ? hx_wmat_row(w->q, w->mat, 0) : NULL;
}

/* F32 products through the packed GEMM (one fixed-order sum per output,
 * independent of the thread count), with bfloat16 operands when bf16 and
 * the CPU can; 0 when its buffer could not be had (the portable loops
 * below run). */
static int fast_gemm(hx_threadpool *tp, int bf16, int m, int n, int k, float alpha,
                     const float *a, int lda, int ta, const float *b, int ldb, int tb,
                     float *c, int ldc, int acc)
{
    if (bf16 && hx_tr_gemm_bf16(tp, m, n, k, alpha, a, lda, ta, b, ldb, tb, c, ldc, acc) == 0)
        return 1;
    return hx_tr_gemm_ex(tp, m, n, k, alpha, a, lda, ta, b, ldb, tb, c, ldc, acc) == 0;
}

/* Seconds of the three products of a linear layer (n_in -> n_out) over n
 * tokens: y = x W^T, dx = dy W, dW += dy^T x (buf: n * (2 n_in + n_out) +
 * 2 n_out n_in floats); -1 if a product could not run. */
static double layer_seconds(hx_threadpool *tp, int bf16, int n, int n_in, int n_out, float *buf)
{
    float *x = buf, *y = x + (size_t)n * n_in, *w = y + (size_t)n * n_out;
    float *dw = w + (size_t)n_out * n_in, *dx = dw + (size_t)n_out * n_in;
    const double t0 = hx_time_mono();
    const int ok = fast_gemm(tp, bf16, n, n_out, n_in, 1.0f, x, n_in, 0, w, n_in, 1, y, n_out, 0) &&
                   fast_gemm(tp, bf16, n, n_in, n_out, 1.0f, y, n_out, 0, w, n_in, 0, dx, n_in, 0) &&
                   fast_gemm(tp, bf16, n_out, n_in, n, 1.0f, y, n_out, 1, x, n_in, 0, dw, n_in, 1);
    return ok ? hx_time_mono() - t0 : -1.0;
}

int hx_tr_bf16_faster(hx_threadpool *tp, int n_in, int n_out)
{
    if (!hx_tr_gemm_bf16_available()) return 0;
    const int n = 1024;
    const size_t nf = (size_t)n * (2 * (size_t)n_in + n_out) + 2 * (size_t)n_out * n_in;
    float *buf = hx_malloc_array(nf, sizeof(float));
    if (!buf) return 0;
    for (size_t i = 0; i < nf; i++) buf[i] = 0.01f * (float)(i % 13) - 0.06f;
    double f32 = 1e30, bf16 = 1e30;
    for (int r = 0; r < 3; r++) { /* interleaved: both see the same load */
        const double tf = layer_seconds(tp, 0, n, n_in, n_out, buf);
        const double tb = layer_seconds(tp, 1, n, n_in, n_out, buf);
        f32 = tf >= 0 && tf < f32 ? tf : f32;
        bf16 = tb >= 0 && tb < bf16 ? tb : bf16;
    }
    free(buf);
    return bf16 < f32;
}

/* Frozen quantized weights through the packed GEMM: blocks of about 4 MB
 * of rows (a multiple of 32, at least 128) dequantized on the pool into a
 * buffer kept between calls, then one product per block (the input
 * gradient sums block after block: block boundaries depend only on the
 * shape, so the order is fixed). */
static int qrows(int cols)
{
    const int r = (1 << 20) / (cols > 0 ? cols : 1) / 32 * 32;
    return r < 128 ? 128 : r;
}

/* The dequantized block of a frozen weight, held until hx_tr_mm_release. */
static tr_scratch g_deq = TR_SCRATCH_INIT;

void hx_tr_mm_release(void)
{
    hx_tr_scratch_release(&g_deq);
    hx_tr_gemm_release();
    hx_tr_gemm_bf16_release();
}

typedef struct deq_job {
    const tr_w *w;
    int r0, nr;
    float *dst;
} deq_job;

static void deq_task(void *ctx, int task, int thread)
{
    const deq_job *j = ctx;
    const int i1 = (task + 1) * 8 < j->nr ? (task + 1) * 8 : j->nr;
    (void)thread;
    for (int i = task * 8; i < i1; i++)
        hx_dequantize_row(j->w->q->type, hx_wmat_row(j->w->q, j->w->mat, j->r0 + i),
                          j->dst + (size_t)i * j->w->cols, j->w->cols);
}

/* The product over the blocks of w: fwd y (n, rows) (+)= alpha x W^T, or
 * (bwd) dx (n, cols) += alpha dy W. 0 when memory is short, which can
 * only happen at the first (largest) block, before any output is written. */
static int quant_mm(hx_threadpool *tp, const tr_w *w, const float *in, int n,
                    float *out, float alpha, int acc, int bwd)
{
    const int QROWS = qrows(w->cols);
    float *blk = hx_tr_scratch_lock(&g_deq, (size_t)QROWS * w->cols * sizeof(float));
    int ok = blk != NULL;
    for (int r0 = 0; ok && r0 < w->rows; r0 += QROWS) {
        const int nr = w->rows - r0 < QROWS ? w->rows - r0 : QROWS;
        deq_job dj = {w, r0, nr, blk};
        hx_threadpool_run(tp, (nr + 7) / 8, deq_task, &dj);
        if (!bwd)
            ok = hx_tr_gemm_ex(tp, n, nr, w->cols, alpha, in, w->cols, 0, blk, w->cols, 1,
                               out + r0, w->rows, acc) == 0;
        else
            ok = hx_tr_gemm_ex(tp, n, w->cols, nr, alpha, in + r0, w->rows, 0, blk, w->cols, 0,
                               out, w->cols, 1) == 0;
    }
    if (blk) hx_tr_scratch_unlock(&g_deq);
    return ok;
}

int hx_tr_mm_block_rows(const tr_w *w) { return f32_of(w) ? 0 : qrows(w->cols); }

typedef struct mm_job {
    const tr_w *w;
    const float *x, *dy;
    float *y, *dw;
    int n, rows, cols, acc, per;
    float alpha;
    float *scratch;
    size_t scratch_n;
} mm_job;

static void fwd_task(void *ctx, int task, int thread)
{
    const mm_job *j = ctx;
    const int r0 = task * TILE, nr = j->rows - r0 < TILE ? j->rows - r0 : TILE;
    const float *W = rows_of(j->w, r0, nr, j->scratch + (size_t)thread * j->scratch_n);
    for (int t = 0; t < j->n; t++) {
        float *y = j->y + (size_t)t * j->rows + r0;
        const float *x = j->x + (size_t)t * j->cols;
        for (int r = 0; r < nr; r++) {
            const float v = j->alpha * tr_dot(x, W + (size_t)r * j->cols, j->cols);
            y[r] = j->acc ? y[r] + v : v;
        }
    }
}

void hx_tr_mm_fwd(hx_threadpool *tp, const tr_w *w, const float *x, int n,
                  float *y, float alpha, int acc, float *scratch)
{
    const float *f = f32_of(w);
    if (f && fast_gemm(tp, w->bf16, n, w->rows, w->cols, alpha, x, w->cols, 0, f, w->cols, 1,
                       y, w->rows, acc))
        return;
    if (!f && n >= 8 && quant_mm(tp, w, x, n, y, alpha, acc, 0)) return;
    mm_job j = {w, x, NULL, y, NULL, n, w->rows, w->cols, acc, 0, alpha,
                scratch, hx_tr_mm_scratch(w->cols)};
    hx_threadpool_run(tp, (w->rows + TILE - 1) / TILE, fwd_task, &j);
}

/* Tokens [task*per, ...): dx += alpha dy W, W walked tile by tile. */
static void bwd_x_task(void *ctx, int task, int thread)
{
    const mm_job *j = ctx;
    const int t0 = task * j->per, t1 = t0 + j->per < j->n ? t0 + j->per : j->n;
    float *buf = j->scratch + (size_t)thread * j->scratch_n;
    for (int r0 = 0; r0 < j->rows; r0 += TILE) {
        const int nr = j->rows - r0 < TILE ? j->rows - r0 : TILE;
        const float *W = rows_of(j->w, r0, nr, buf);
        for (int t = t0; t < t1; t++) {
            const float *dy = j->dy + (size_t)t * j->rows + r0;
            float *dx = j->y + (size_t)t * j->cols;
            for (int r = 0; r < nr; r++)
                if (dy[r] != 0.0f) axpy(dx, j->alpha * dy[r], W + (size_t)r * j->cols, j->cols);
        }
    }
}

void hx_tr_mm_bwd_x(hx_threadpool *tp, const tr_w *w, const float *dy, int n,
                    float *dx, float alpha, float *scratch)
{
    const float *f = f32_of(w);
    if (f && fast_gemm(tp, w->bf16, n, w->cols, w->rows, alpha, dy, w->rows, 0, f, w->cols, 0,
                       dx, w->cols, 1))
        return;
    if (!f && n >= 8 && quant_mm(tp, w, dy, n, dx, alpha, 1, 1)) return;
    const int nt = hx_threadpool_n_threads(tp);
    const int tasks = n < nt ? n : nt;
    if (tasks < 1) return;
    mm_job j = {w, NULL, dy, dx, NULL, n, w->rows, w->cols, 0,
                (n + tasks - 1) / tasks, alpha, scratch, hx_tr_mm_scratch(w->cols)};
    hx_threadpool_run(tp, (n + j.per - 1) / j.per, bwd_x_task, &j);
}

static void bwd_w_task(void *ctx, int task, int thread)
{
    const mm_job *j = ctx;
    const int r0 = task * TILE, r1 = r0 + TILE < j->rows ? r0 + TILE : j->rows;
    (void)thread;
    for (int r = r0; r < r1; r++) {
        float *dw = j->dw + (size_t)r * j->cols;
        for (int t = 0; t < j->n; t++) {
            const float g = j->dy[(size_t)t * j->rows + r];
            if (g != 0.0f) axpy(dw, j->alpha * g, j->x + (size_t)t * j->cols, j->cols);
        }
    }
}

void hx_tr_mm_bwd_w(hx_threadpool *tp, float *dw, int rows, int cols,
                    const float *dy, const float *x, int n, float alpha, int bf16)
{
    if (fast_gemm(tp, bf16, rows, cols, n, alpha, dy, rows, 1, x, cols, 0, dw, cols, 1)) return;
    mm_job j = {NULL, x, dy, NULL, dw, n, rows, cols, 0, 0, alpha, NULL, 0};
    hx_threadpool_run(tp, (rows + TILE - 1) / TILE, bwd_w_task, &j);
}

/* ---- linear layers ---- */

static tr_w lora_w(const float *f, int rows, int cols)
{
    tr_w w = {.f = f, .rows = rows, .cols = cols};
    return w;
}

void hx_tr_lin_fwd(hx_threadpool *tp, const tr_lin *l, const float *x, int n,
                   float *y, float *u, float *scratch)
{
    hx_tr_mm_fwd(tp, &l->w, x, n, y, 1.0f, 0, scratch);
    if (!l->a) return;
    tr_w A = lora_w(l->a, l->r, l->w.cols), B = lora_w(l->b, l->w.rows, l->r);
    hx_tr_mm_fwd(tp, &A, x, n, u, 1.0f, 0, scratch);
    hx_tr_mm_fwd(tp, &B, u, n, y, l->s, 1, scratch);
}

void hx_tr_lin_bwd(hx_threadpool *tp, const tr_lin *l, const float *x,
                   const float *u, const float *dy, int n, float *dx, float *du,
                   float *scratch)
{
    const int in = l->w.cols, out = l->w.rows;
    if (l->dw) hx_tr_mm_bwd_w(tp, l->dw, out, in, dy, x, n, 1.0f, l->w.bf16);
    if (dx) hx_tr_mm_bwd_x(tp, &l->w, dy, n, dx, 1.0f, scratch);
    if (!l->a) return;
    tr_w A = lora_w(l->a, l->r, in), B = lora_w(l->b, out, l->r);
    hx_tr_mm_bwd_w(tp, l->db, out, l->r, dy, u, n, l->s, 0);
    memset(du, 0, (size_t)n * l->r * sizeof(float));
    hx_tr_mm_bwd_x(tp, &B, dy, n, du, l->s, scratch);
    hx_tr_mm_bwd_w(tp, l->da, l->r, in, du, x, n, 1.0f, 0);
    if (dx) hx_tr_mm_bwd_x(tp, &A, du, n, dx, 1.0f, scratch);
}
