/* test_keep.c: the penalty on what a LoRA adapter changes on generic
 * inputs (lora/keep.c): its sums against the base's activations of a
 * saving pass, its value against the definition computed directly from
 * those activations, its gradient against central differences, and steps
 * that lower it. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "lora/train_int.h"
#include "test.h"
#include "modelfile/modelfile.h"

static char tmpdir[256], base[512];

#define N 14 /* tokens of the batch: 2 sequences of 7 */
static int32_t toks[N], tgts[N];

static hx_batch batch(uint64_t seed)
{
    uint64_t s = seed;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((s >> 33) % 32);
        tgts[i] = (int32_t)((s >> 45) % 32);
    }
    return (hx_batch){.n_seq = 2, .n_tok = 7, .tokens = toks, .targets = tgts};
}

static int write_base(const char *path)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3";
    p.ftype = "F32";
    p.n_vocab = 32, p.n_ctx = 64, p.n_layer = 2, p.n_embd = 32;
    p.n_head = 2, p.n_head_kv = 1, p.head_dim = 16, p.n_ff = 64;
    p.tied_output = 1;
    hx_err err = {0};
    return hx_mkmodel_write(&p, path, &err);
}

/* q (input n1), o (input o), up (n2) and down (s) of both layers; B drawn
 * with std init_b (0: the base). */
static hx_trainer *trainer(float init_b)
{
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = 2, lp.alpha = 4;
    lp.targets = HX_LORA_Q | HX_LORA_O | HX_LORA_UP | HX_LORA_DOWN;
    lp.init_b = init_b;
    hx_trainer *tr = NULL;
    hx_err err = {0};
    return hx_trainer_new_gguf(base, &lp, 1, &tr, &err) ? NULL : tr;
}

static const int k_lins[4] = {L_Q, L_O, L_UP, L_DOWN};

/* The saved input of linear i of layer l in a saving pass. */
static const float *input_of(const hx_trainer *tr, int l, int i)
{
    const tr_acts *A = &tr->acts[l];
    return i == L_Q ? A->n1 : i == L_O ? A->o : i == L_UP ? A->n2 : A->s;
}

/* The base's inputs of every adapted linear, by a saving pass of a
 * trainer without adapter (B = 0): copied into x[l * 4 + j]. */
static void base_inputs(const hx_batch *b, float *x[8])
{
    hx_trainer *tr = trainer(0.0f);
    ASSERT(tr);
    hx_err err = {0};
    hx_trainer_set_recompute(tr, HX_RECOMPUTE_OFF);
    double loss = 0;
    ASSERT(hx_trainer_grad(tr, b, 1.0, &loss, &err) == HX_OK);
    for (int l = 0; l < 2; l++)
        for (int j = 0; j < 4; j++) {
            const int in = tr->layers[l].lin[k_lins[j]].w.cols;
            x[l * 4 + j] = malloc((size_t)N * in * sizeof(float));
            memcpy(x[l * 4 + j], input_of(tr, l, k_lins[j]), (size_t)N * in * sizeof(float));
        }
    hx_trainer_free(tr);
}

/* sum over the batch of ||W x||^2 and of ||s B A x||^2 for one linear, in
 * double from its inputs. */
static void energies(hx_trainer *tr, const tr_lin *li, const float *x, double *ew, double *ed)
{
    const int in = li->w.cols, out = li->w.rows, r = li->r;
    float *y = malloc((size_t)N * out * sizeof(float));
    hx_tr_mm_fwd(tr->tp, &li->w, x, N, y, 1.0f, 0, tr->scratch);
    *ew = *ed = 0;
    for (int t = 0; t < N; t++) {
        double u[8] = {0};
        for (int k = 0; k < r; k++)
            for (int p = 0; p < in; p++) u[k] += (double)li->a[k * in + p] * x[t * in + p];
        for (int o = 0; o < out; o++) {
            double d = 0;
            for (int k = 0; k < r; k++) d += (double)li->b[o * r + k] * u[k];
            d *= li->s;
            *ed += d * d;
            *ew += (double)y[t * out + o] * y[t * out + o];
        }
    }
    free(y);
}

/* The sums the collecting pass keeps equal those of the base's inputs
 * (the adapter, B != 0, is off while collecting), and the penalty is
 * lambda times the mean over the 8 linears of ||s B A x||^2 / ||W x||^2. */
static void test_sums_and_value(void)
{
    hx_batch b = batch(7);
    float *x[8];
    base_inputs(&b, x);
    hx_trainer *tr = trainer(0.3f);
    ASSERT(tr);
    hx_err err = {0};
    ASSERT(hx_trainer_keep_collect(tr, &b, 0, &err) == HX_OK);
    EXPECT_EQ_INT((int)tr->keep_tokens, N);
    double worst = 0, want = 0;
    for (int l = 0; l < 2; l++)
        for (int j = 0; j < 4; j++) {
            const tr_lin *li = &tr->layers[l].lin[k_lins[j]];
            const int in = li->w.cols;
            const float *m = tr->keep_m[l * 7 + k_lins[j]];
            double num = 0, den = 0;
            for (int p = 0; p < in; p++)
                for (int q = 0; q < in; q++) {
                    double r = 0;
                    for (int t = 0; t < N; t++) r += (double)x[l * 4 + j][t * in + p] * x[l * 4 + j][t * in + q];
                    num += (m[p * in + q] - r) * (m[p * in + q] - r), den += r * r;
                }
            worst = num / den > worst ? num / den : worst;
            double ew, ed;
            energies(tr, li, x[l * 4 + j], &ew, &ed);
            EXPECT(fabs(tr->keep_e[l * 7 + k_lins[j]] - ew) < 1e-4 * ew);
            want += 0.7 * ed / ew / 8;
        }
    printf("#   sums of x x^T: worst NMSE %.2e against the base's saved inputs\n", worst);
    EXPECT(worst < 1e-10);
    EXPECT(tr->keep_m[0 * 7 + L_K] == NULL); /* not adapted: no sums */
    hx_trainer_keep_set(tr, 0.7);
    hx_trainer_zero_grad(tr);
    ASSERT(hx_tr_keep_grad(tr) == HX_OK);
    const double got = hx_trainer_keep_value(tr);
    printf("#   penalty %.6e, from the definition %.6e\n", got, want);
    EXPECT(want > 0 && fabs(got - want) < 1e-4 * want);
    for (int k = 0; k < 8; k++) free(x[k]);
    hx_trainer_free(tr);
}

/* With masked, only the positions whose target counts add to the sums. */
static void test_masked_positions(void)
{
    hx_batch b = batch(5);
    float *x[8];
    base_inputs(&b, x);
    uint8_t mask[N];
    for (int t = 0; t < N; t++) mask[t] = (uint8_t)(t % 3 == 1);
    b.mask = mask;
    hx_trainer *tr = trainer(0.3f);
    ASSERT(tr);
    hx_err err = {0};
    ASSERT(hx_trainer_keep_collect(tr, &b, 1, &err) == HX_OK);
    EXPECT_EQ_INT((int)tr->keep_tokens, 5); /* t = 1, 4, 7, 10, 13 */
    const int in = tr->layers[1].lin[L_DOWN].w.cols;
    const float *m = tr->keep_m[1 * 7 + L_DOWN], *xs = x[1 * 4 + 3];
    double num = 0, den = 0;
    for (int p = 0; p < in; p++)
        for (int q = 0; q < in; q++) {
            double r = 0;
            for (int t = 0; t < N; t++)
                if (mask[t]) r += (double)xs[t * in + p] * xs[t * in + q];
            num += (m[p * in + q] - r) * (m[p * in + q] - r), den += r * r;
        }
    printf("#   masked sums of layer 1's down: NMSE %.2e\n", num / den);
    EXPECT(num / den < 1e-10);
    for (int k = 0; k < 8; k++) free(x[k]);
    hx_trainer_free(tr);
}

/* Its gradient against central differences of its value (a quadratic in
 * A and in B: exact up to rounding). */
static void test_gradient(void)
{
    hx_batch b = batch(11);
    hx_trainer *tr = trainer(0.3f);
    ASSERT(tr);
    hx_err err = {0};
    ASSERT(hx_trainer_keep_collect(tr, &b, 0, &err) == HX_OK);
    hx_trainer_keep_set(tr, 2.0);
    hx_trainer_zero_grad(tr);
    ASSERT(hx_tr_keep_grad(tr) == HX_OK);
    const size_t n = hx_trainer_n_params(tr);
    float *g = malloc(n * sizeof *g), *P = hx_trainer_params(tr);
    memcpy(g, hx_trainer_grads(tr), n * sizeof *g);
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const float v = P[i], h = 1e-2f;
        P[i] = v + h;
        hx_tr_keep_grad(tr);
        const double up = hx_trainer_keep_value(tr);
        P[i] = v - h;
        hx_tr_keep_grad(tr);
        const double dn = hx_trainer_keep_value(tr);
        P[i] = v;
        const double fd = (up - dn) / (2.0 * h);
        num += (g[i] - fd) * (g[i] - fd), den += fd * fd;
    }
    printf("#   gradient of %zu parameters: NMSE %.2e against central differences\n", n,
           num / den);
    EXPECT(den > 0 && num / den < 1e-6);
    free(g);
    hx_trainer_free(tr);
}

/* Optimizer steps on the penalty alone lower it; with lambda 0 it is not
 * computed and the gradients stay the loss's. */
static void test_steps_lower_it(void)
{
    hx_batch b = batch(13);
    hx_trainer *tr = trainer(0.3f);
    ASSERT(tr);
    hx_err err = {0};
    ASSERT(hx_trainer_keep_collect(tr, &b, 0, &err) == HX_OK);
    hx_opt_params o = hx_opt_default_params();
    o.lr = 1e-2f, o.warmup = 0, o.wd = 0;
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_step(tr, &o, NULL) == HX_OK);
    EXPECT(hx_trainer_keep_value(tr) == 0.0); /* off by default */
    hx_trainer_keep_set(tr, 1.0);
    double first = -1, last = 0;
    for (int s = 0; s < 30; s++) {
        hx_trainer_zero_grad(tr);
        ASSERT(hx_trainer_step(tr, &o, NULL) == HX_OK);
        last = hx_trainer_keep_value(tr);
        if (first < 0) first = last;
    }
    printf("#   30 steps on the penalty alone: %.4e -> %.4e\n", first, last);
    EXPECT(first > 0 && last < 0.5 * first);
    hx_trainer_free(tr);
}

/* A full-training trainer has no adapter to keep. */
static void test_needs_lora(void)
{
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_gguf(base, NULL, 1, &tr, &err) == HX_OK);
    hx_batch b = batch(3);
    EXPECT(hx_trainer_keep_collect(tr, &b, 0, &err) == HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "LoRA") != NULL);
    EXPECT(hx_trainer_keep_bytes(tr) == 0);
    hx_trainer_free(tr);
    tr = trainer(0.0f);
    ASSERT(tr);
    /* q (32 in), o (32), up (32), down (64) in two layers */
    EXPECT(hx_trainer_keep_bytes(tr) == 2 * (3 * 32 * 32 + 64 * 64) * sizeof(float));
    hx_trainer_free(tr);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_keep.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(base, sizeof base, "%s/base.gguf", tmpdir);
    if (write_base(base)) return 1;
    RUN(test_sums_and_value);
    RUN(test_masked_positions);
    RUN(test_gradient);
    RUN(test_steps_lower_it);
    RUN(test_needs_lora);
    unlink(base);
    rmdir(tmpdir);
    return test_summary();
}
