/* optim.c: AdamW with decoupled weight decay, global gradient-norm
 * clipping, and the warmup + cosine learning-rate schedule. */
#include <math.h>
#include <stdlib.h>

#include "lora/train_int.h"

hx_opt_params hx_opt_default_params(void)
{
    hx_opt_params o = {1e-3f, 0.1f, 0, 100, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0, 0.2f};
    return o;
}

int hx_tr_wsd_decay_start(const hx_opt_params *o)
{
    const int nd = (int)ceil((double)o->n_steps * o->decay_frac - 1e-6);
    return o->n_steps - (nd < 1 ? 1 : nd);
}

double hx_opt_lr(const hx_opt_params *o, int step)
{
    if (o->warmup > 0 && step < o->warmup)
        return o->lr * (double)(step + 1) / (double)o->warmup;
    const double floor = o->lr * o->lr_min_frac;
    if (o->wsd) {
        const int d0 = hx_tr_wsd_decay_start(o);
        if (step < d0) return o->lr;
        const double p = o->n_steps - 1 > d0 ? (double)(step - d0) / (o->n_steps - 1 - d0) : 1.0;
        return o->lr + (floor - o->lr) * (p > 1 ? 1 : p);
    }
    const int span = o->n_steps - o->warmup;
    if (span <= 1) return o->lr;
    double p = (double)(step - o->warmup) / (double)(span - 1);
    p = p < 0 ? 0 : p > 1 ? 1 : p;
    return floor + (o->lr - floor) * 0.5 * (1.0 + cos(M_PI * p));
}

/* Work is split in fixed chunks of the flat buffers, so sums and updates
 * do not depend on the thread count. */
#define CHUNK 65536

typedef struct opt_job {
    hx_trainer *tr;
    const hx_opt_params *o;
    double *part;        /* per chunk: sum of squares */
    float clip;
    double lr, bc1, bc2;
} opt_job;

static void norm_task(void *ctx, int task, int thread)
{
    const opt_job *j = ctx;
    const size_t i0 = (size_t)task * CHUNK;
    const size_t i1 = i0 + CHUNK < j->tr->n_params ? i0 + CHUNK : j->tr->n_params;
    double s = 0.0;
    (void)thread;
    for (size_t i = i0; i < i1; i++) s += (double)j->tr->grads[i] * j->tr->grads[i];
    j->part[task] = s;
}

/* AdamW on [i0, i1) of tensor T. */
static void adamw(const opt_job *j, const tr_tensor *T, size_t i0, size_t i1)
{
    hx_trainer *tr = j->tr;
    const float b1 = j->o->beta1, b2 = j->o->beta2;
    const float wd = T->decay ? j->o->wd : 0.0f;
    for (size_t i = i0; i < i1; i++) {
        const float g = tr->grads[i] * j->clip;
        tr->m[i] = b1 * tr->m[i] + (1.0f - b1) * g;
        tr->v[i] = b2 * tr->v[i] + (1.0f - b2) * g * g;
        const double mh = tr->m[i] / j->bc1, vh = tr->v[i] / j->bc2;
        tr->params[i] -= (float)(j->lr * (mh / (sqrt(vh) + j->o->eps) + wd * tr->params[i]));
    }
}

static void update_task(void *ctx, int task, int thread)
{
    const opt_job *j = ctx;
    const size_t c0 = (size_t)task * CHUNK;
    const size_t c1 = c0 + CHUNK < j->tr->n_params ? c0 + CHUNK : j->tr->n_params;
    (void)thread;
    for (int k = 0; k < j->tr->n_tensors; k++) {
        const tr_tensor *T = &j->tr->tensors[k];
        const size_t a = T->off > c0 ? T->off : c0;
        const size_t b = T->off + T->n < c1 ? T->off + T->n : c1;
        if (a < b) adamw(j, T, a, b);
    }
}

int hx_trainer_step(hx_trainer *tr, const hx_opt_params *o, double *gnorm)
{
    if (hx_tr_keep_grad(tr)) return HX_ERR_NOMEM;
    const int n_chunks = (int)((tr->n_params + CHUNK - 1) / CHUNK);
    opt_job j = {tr, o, hx_malloc_array(n_chunks ? (size_t)n_chunks : 1, sizeof(double)),
                 1.0f, 0, 0, 0};
    if (!j.part) return HX_ERR_NOMEM;
    hx_threadpool_run(tr->tp, n_chunks, norm_task, &j);
    double ss = 0.0;
    for (int c = 0; c < n_chunks; c++) ss += j.part[c];
    free(j.part);
    const double norm = sqrt(ss);
    const int t = ++tr->step;
    if (gnorm) *gnorm = norm;
    if (!isfinite(norm)) return HX_ERR_RANGE;
    j.clip = o->clip > 0 && norm > o->clip ? (float)(o->clip / norm) : 1.0f;
    j.lr = hx_opt_lr(o, t - 1);
    j.bc1 = 1.0 - pow(o->beta1, t);
    j.bc2 = 1.0 - pow(o->beta2, t);
    hx_threadpool_run(tr->tp, n_chunks, update_task, &j);
    return HX_OK;
}

int hx_trainer_steps_done(const hx_trainer *tr) { return tr->step; }
