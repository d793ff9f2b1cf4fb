/* sample.c: the sampler chain of sample.h: stages, repetition penalties,
 * top-k, top-p, min-p, temperature and a seeded xoshiro256** draw. */
#include "engine/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

typedef struct cand {
    int32_t id;
    float logit;
} cand;

struct hx_sampler {
    hx_sampler_params p;
    uint64_t seed;
    uint64_t rng[4];         /* xoshiro256** state */
    hx_sampler_stage *stages;
    int n_stages, cap_stages;
    int32_t *hist;           /* ring of the last repeat_last_n tokens */
    int32_t hist_n, hist_pos;
    float *work;             /* copy of the logits, n_vocab */
    cand *cands;             /* candidates, n_vocab */
    int32_t cap_vocab;
};

hx_sampler_params hx_sampler_default_params(void)
{
    hx_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temp = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = HX_SAMPLER_SEED_RANDOM;
    p.min_keep = 1;
    return p;
}

/* ---- PRNG: splitmix64 (hx_splitmix64) seeds xoshiro256** ---- */

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static void rng_seed(hx_sampler *s)
{
    uint64_t x = s->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = hx_splitmix64(&x);
}

/* Uniform in [0, 1) with 53 bits. */
static double rng_uniform(hx_sampler *s)
{
    return (double)(rng_next(s->rng) >> 11) * 0x1.0p-53;
}

static uint64_t random_seed(const void *addr)
{
    uint64_t x = (uint64_t)(hx_time_mono() * 1e9) ^ ((uint64_t)getpid() << 32) ^
                 (uint64_t)(uintptr_t)addr;
    x = hx_splitmix64(&x);
    return x == HX_SAMPLER_SEED_RANDOM ? 0 : x;
}

/* ---- life cycle ---- */
hx_sampler *hx_sampler_new(const hx_sampler_params *p)
{
    hx_sampler_params d = hx_sampler_default_params();
    if (!p) p = &d;
    if (isnan(p->temp) || isnan(p->top_p) || isnan(p->min_p) ||
        isnan(p->repeat_penalty) || p->repeat_last_n < 0)
        return NULL;
    hx_sampler *s = hx_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = *p;
    if (s->p.min_keep < 1) s->p.min_keep = 1;
    if (p->repeat_last_n > 0) {
        s->hist = hx_calloc((size_t)p->repeat_last_n, sizeof *s->hist);
        if (!s->hist) {
            free(s);
            return NULL;
        }
    }
    s->seed = p->seed == HX_SAMPLER_SEED_RANDOM ? random_seed(s) : p->seed;
    rng_seed(s);
    return s;
}

void hx_sampler_free(hx_sampler *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].free) s->stages[i].free(s->stages[i].ctx);
    free(s->stages);
    free(s->hist);
    free(s->work);
    free(s->cands);
    free(s);
}

uint64_t hx_sampler_seed(const hx_sampler *s) { return s ? s->seed : 0; }

int hx_sampler_add_stage(hx_sampler *s, const hx_sampler_stage *stage)
{
    if (!s || !stage || stage->api_version != HX_SAMPLER_STAGE_API ||
        !stage->apply || !stage->accept)
        return HX_ERR_INVALID;
    if (s->n_stages == s->cap_stages) {
        int cap = s->cap_stages ? 2 * s->cap_stages : 4;
        hx_sampler_stage *st = hx_realloc(s->stages, (size_t)cap * sizeof *st);
        if (!st) return HX_ERR_NOMEM;
        s->stages = st;
        s->cap_stages = cap;
    }
    s->stages[s->n_stages++] = *stage;
    return HX_OK;
}

static int reserve_vocab(hx_sampler *s, int32_t n_vocab)
{
    if (n_vocab <= s->cap_vocab) return HX_OK;
    float *w = hx_malloc_array((size_t)n_vocab, sizeof *w);
    cand *c = hx_malloc_array((size_t)n_vocab, sizeof *c);
    if (!w || !c) {
        free(w);
        free(c);
        return HX_ERR_NOMEM;
    }
    free(s->work);
    free(s->cands);
    s->work = w;
    s->cands = c;
    s->cap_vocab = n_vocab;
    return HX_OK;
}

/* ---- filters ---- */
static int cmp_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* llama.cpp's penalties: per distinct token of the window with count c,
 * logit > 0 is divided by repeat_penalty, else multiplied; then
 * c * frequency + presence is subtracted. */
static void apply_penalties(hx_sampler *s, float *w, int32_t n_vocab)
{
    const hx_sampler_params *p = &s->p;
    if (s->hist_n == 0 || (p->repeat_penalty == 1.0f &&
                           p->frequency_penalty == 0.0f &&
                           p->presence_penalty == 0.0f))
        return;
    int32_t *h = hx_malloc_array((size_t)s->hist_n, sizeof *h);
    if (!h) return;
    memcpy(h, s->hist, (size_t)s->hist_n * sizeof *h);
    qsort(h, (size_t)s->hist_n, sizeof *h, cmp_int32);
    for (int32_t i = 0; i < s->hist_n;) {
        int32_t j = i;
        while (j < s->hist_n && h[j] == h[i]) j++;
        int32_t tok = h[i], count = j - i;
        if (tok >= 0 && tok < n_vocab && isfinite(w[tok])) {
            if (w[tok] <= 0) w[tok] *= p->repeat_penalty;
            else w[tok] /= p->repeat_penalty;
            w[tok] -= (float)count * p->frequency_penalty +
                      p->presence_penalty;
        }
        i = j;
    }
    free(h);
}

int32_t hx_argmax(const float *w, int32_t n)
{
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (w[i] > -INFINITY && (best < 0 || w[i] > w[best])) best = i;
    return best;
}

/* Descending logit, ascending id on ties: a total order, so results do not
 * depend on the sort's stability. */
static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void heap_down(cand *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, m = i;
        if (l < n && cmp_cand(&h[l], &h[m]) > 0) m = l;
        if (l + 1 < n && cmp_cand(&h[l + 1], &h[m]) > 0) m = l + 1;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Keeps the k best of c[0..n) in c[0..k) (a heap whose root is the worst
 * kept one), so that sorting touches only k candidates. */
static int32_t top_k(cand *c, int32_t n, int32_t k)
{
    if (k <= 0 || k >= n) return n;
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_down(c, k, i);
    for (int32_t i = k; i < n; i++)
        if (cmp_cand(&c[i], &c[0]) < 0) {
            c[0] = c[i];
            heap_down(c, k, 0);
        }
    return k;
}

/* Softmax of sorted candidates (c[0] is the largest) into p[n]. */
static void softmax(const cand *c, int32_t n, double *p)
{
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += p[i] = exp((double)c[i].logit - c[0].logit);
    for (int32_t i = 0; i < n; i++) p[i] /= sum;
}

/* llama.cpp's top-p on sorted candidates: the smallest prefix whose
 * probability reaches p, at least min_keep. */
static int32_t top_p(const cand *c, int32_t n, float p, int32_t min_keep)
{
    if (p >= 1.0f || n <= 1) return n;
    double *pr = hx_malloc_array((size_t)n, sizeof *pr);
    if (!pr) return n;
    softmax(c, n, pr);
    double cum = 0;
    int32_t keep = n;
    for (int32_t i = 0; i < n; i++) {
        cum += pr[i];
        if (cum >= p && i + 1 >= min_keep) {
            keep = i + 1;
            break;
        }
    }
    free(pr);
    return keep;
}

/* llama.cpp's min-p on sorted candidates: keep p >= min_p * p_max, i.e.
 * logit >= max + log(min_p), at least min_keep. */
static int32_t min_p(const cand *c, int32_t n, float mp, int32_t min_keep)
{
    if (mp <= 0.0f || n <= 1) return n;
    float lim = c[0].logit + logf(mp);
    int32_t keep = 1;
    while (keep < n && (c[keep].logit >= lim || keep < min_keep)) keep++;
    return keep;
}

static int32_t draw(hx_sampler *s, cand *c, int32_t n)
{
    double *pr = hx_malloc_array((size_t)n, sizeof *pr);
    if (!pr) return c[0].id;
    softmax(c, n, pr);
    double u = rng_uniform(s), cum = 0;
    int32_t pick = n - 1;
    for (int32_t i = 0; i < n; i++) {
        cum += pr[i];
        if (u < cum) {
            pick = i;
            break;
        }
    }
    free(pr);
    return c[pick].id;
}

static int32_t sample_filtered(hx_sampler *s, const float *w, int32_t n_vocab)
{
    const hx_sampler_params *p = &s->p;
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (w[i] > -INFINITY) s->cands[n++] = (cand){i, w[i]};
    if (n == 0) return -1;
    n = top_k(s->cands, n, p->top_k);
    qsort(s->cands, (size_t)n, sizeof *s->cands, cmp_cand);
    n = top_p(s->cands, n, p->top_p, p->min_keep);
    n = min_p(s->cands, n, p->min_p, p->min_keep);
    for (int32_t i = 0; i < n; i++) s->cands[i].logit /= p->temp;
    return draw(s, s->cands, n);
}

int32_t hx_sampler_sample(hx_sampler *s, const float *logits, int32_t n_vocab)
{
    if (!s || !logits || n_vocab <= 0 || reserve_vocab(s, n_vocab) != HX_OK)
        return -1;
    float *w = s->work;
    memcpy(w, logits, (size_t)n_vocab * sizeof *w);
    for (int32_t i = 0; i < n_vocab; i++)
        if (isnan(w[i])) w[i] = -INFINITY;
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].apply(s->stages[i].ctx, w, n_vocab) != 0) return -1;
    apply_penalties(s, w, n_vocab);
    if (s->p.temp <= 0.0f) return hx_argmax(w, n_vocab);
    return sample_filtered(s, w, n_vocab);
}

void hx_sampler_note(hx_sampler *s, int32_t token)
{
    if (!s || s->p.repeat_last_n <= 0) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->hist_n < s->p.repeat_last_n) s->hist_n++;
}

int hx_sampler_accept(hx_sampler *s, int32_t token)
{
    if (!s) return HX_ERR_INVALID;
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].accept(s->stages[i].ctx, token) != 0)
            return HX_ERR_STATE;
    hx_sampler_note(s, token);
    return HX_OK;
}

void hx_sampler_reset(hx_sampler *s)
{
    if (!s) return;
    s->hist_n = s->hist_pos = 0;
    rng_seed(s);
}

int hx_sampler_forced(hx_sampler *s, int32_t *tokens, int32_t max)
{
    if (!s || !tokens || max <= 0) return 0;
    for (int i = 0; i < s->n_stages; i++) {
        if (!s->stages[i].forced) continue;
        int n = s->stages[i].forced(s->stages[i].ctx, tokens, max);
        if (n > 0) return n > max ? max : n;
    }
    return 0;
}

int hx_sampler_can_end(hx_sampler *s)
{
    if (!s) return 1;
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].can_end && !s->stages[i].can_end(s->stages[i].ctx))
            return 0;
    return 1;
}

double hx_logsumexp(const float *z, int32_t n)
{
    float mx = z[0];
    for (int32_t i = 1; i < n; i++) mx = z[i] > mx ? z[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)z[i] - mx);
    return mx + log(sum);
}
