/* optim.c: AdamW with decoupled weight decay, global gradient-norm
 * clipping, and the warmup + cosine learning-rate schedule. */
#include <math.h>

#include "lora/train_int.h"

hx_opt_params hx_opt_default_params(void)
{
    hx_opt_params o = {1e-3f, 0.1f, 0, 100, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    return o;
}

double hx_opt_lr(const hx_opt_params *o, int step)
{
    if (o->warmup > 0 && step < o->warmup)
        return o->lr * (double)(step + 1) / (double)o->warmup;
    const int span = o->n_steps - o->warmup;
    if (span <= 1) return o->lr;
    double p = (double)(step - o->warmup) / (double)(span - 1);
    p = p < 0 ? 0 : p > 1 ? 1 : p;
    const double floor = o->lr * o->lr_min_frac;
    return floor + (o->lr - floor) * 0.5 * (1.0 + cos(M_PI * p));
}

static double grad_norm(const hx_trainer *tr)
{
    double s = 0.0;
    for (size_t i = 0; i < tr->n_params; i++) s += (double)tr->grads[i] * tr->grads[i];
    return sqrt(s);
}

int hx_trainer_step(hx_trainer *tr, const hx_opt_params *o, double *gnorm)
{
    const double norm = grad_norm(tr);
    const int t = ++tr->step;
    if (gnorm) *gnorm = norm;
    if (!isfinite(norm)) return HX_ERR_RANGE;
    const float clip = o->clip > 0 && norm > o->clip ? (float)(o->clip / norm) : 1.0f;
    const double lr = hx_opt_lr(o, t - 1);
    const double bc1 = 1.0 - pow(o->beta1, t), bc2 = 1.0 - pow(o->beta2, t);
    const float b1 = o->beta1, b2 = o->beta2;
    for (int k = 0; k < tr->n_tensors; k++) {
        const tr_tensor *T = &tr->tensors[k];
        const float wd = T->decay ? o->wd : 0.0f;
        for (size_t i = T->off; i < T->off + T->n; i++) {
            const float g = tr->grads[i] * clip;
            tr->m[i] = b1 * tr->m[i] + (1.0f - b1) * g;
            tr->v[i] = b2 * tr->v[i] + (1.0f - b2) * g * g;
            const double mh = tr->m[i] / bc1, vh = tr->v[i] / bc2;
            tr->params[i] -= (float)(lr * (mh / (sqrt(vh) + o->eps) + wd * tr->params[i]));
        }
    }
    return HX_OK;
}

int hx_trainer_steps_done(const hx_trainer *tr) { return tr->step; }
