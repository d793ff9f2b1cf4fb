/* ops.c: forward and backward of the element-wise and attention ops of a
 * qwen3 block (RMSNorm, NEOX RoPE, SwiGLU, causal GQA attention, xent). */
#include <math.h>
#include <string.h>

#include "lora/train_int.h"

void tr_rmsnorm_fwd(float *y, float *r, const float *x, const float *g, int n,
                    float eps)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * g[i];
    *r = scale;
}

void tr_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x,
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

void tr_rope_table(float *cs, int n_pos, int d, float base)
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

void tr_rope_fwd(float *x, const float *cs, int d)
{
    for (int i0 = 0; i0 < d; i0 += 2) {
        const float c = cs[i0], s = cs[i0 + 1];
        const int a = i0 / 2, b = i0 / 2 + d / 2;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

void tr_rope_bwd(float *dy, const float *cs, int d)
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

void tr_swiglu_fwd(float *s, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) s[i] = silu(a[i]) * b[i];
}

void tr_swiglu_bwd(float *da, float *db, const float *ds, const float *a,
                   const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float sg = sigmoid(a[i]);
        da[i] += ds[i] * b[i] * (sg * (1.0f + a[i] * (1.0f - sg)));
        db[i] += ds[i] * silu(a[i]);
    }
}

double tr_xent(const float *z, int V, int y, float scale, float *dz)
{
    float mx = z[0];
    for (int i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((double)z[i] - mx);
    const double lse = mx + log(sum);
    if (dz) {
        for (int i = 0; i < V; i++)
            dz[i] += scale * (float)exp((double)z[i] - lse);
        dz[y] -= scale;
    }
    return lse - z[y];
}

/* Eight partial sums, so the compiler can vectorize without -ffast-math. */
static float dot(const float *a, const float *b, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] += a[i + l] * b[i + l];
    float t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

void tr_attn_fwd_head(const tr_attn *a, int h, const float *q, const float *k,
                      const float *v, float *o, float *lse, float *sc)
{
    const int d = a->d, g = h / (a->H / a->Hk);
    const float scale = 1.0f / sqrtf((float)d);
    for (int i = 0; i < a->T; i++) {
        const float *qi = q + ((size_t)i * a->H + h) * d;
        float *oi = o + ((size_t)i * a->H + h) * d;
        const int j0 = a->start[i];
        float mx = -INFINITY;
        for (int j = j0; j <= i; j++) {
            sc[j] = dot(qi, k + ((size_t)j * a->Hk + g) * d, d) * scale;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        double sum = 0.0;
        for (int j = j0; j <= i; j++) sum += exp((double)(sc[j] - mx));
        const float l = mx + (float)log(sum);
        lse[(size_t)i * a->H + h] = l;
        memset(oi, 0, (size_t)d * sizeof(float));
        for (int j = j0; j <= i; j++) {
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
        const float D = dot(dout + qi, o + qi, d);
        for (int j = a->start[i]; j <= i; j++) {
            const size_t kj = ((size_t)j * a->Hk + g) * d;
            const float p = expf(dot(q + qi, k + kj, d) * scale - l);
            const float ds = p * (dot(dout + qi, v + kj, d) - D) * scale;
            for (int e = 0; e < d; e++) {
                dq[qi + e] += ds * k[kj + e];
                dk[kj + e] += ds * q[qi + e];
                dv[kj + e] += p * dout[qi + e];
            }
        }
    }
}

void tr_attn_bwd_group(const tr_attn *a, int g, const float *q,
                       const float *k, const float *v, const float *o,
                       const float *lse, const float *dout, float *dq,
                       float *dk, float *dv, float *scratch)
{
    const int rep = a->H / a->Hk;
    (void)scratch;
    for (int h = g * rep; h < (g + 1) * rep; h++)
        attn_bwd_head(a, h, g, q, k, v, o, lse, dout, dq, dk, dv);
}
