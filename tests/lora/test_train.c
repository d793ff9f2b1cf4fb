/* test_train.c: the training loop: exact resume after a kill, real
 * learning on a tiny dataset, gradient accumulation, the schedule,
 * checkpoint and SVG files, and the trained model as a GGUF that Hearth's
 * engine and llama.cpp load with the same logits. */
#include <stdint.h>
#include <unistd.h>

#include "lora/lora.h"
#include "lora/train_int.h"
#include "ref/ref.h"
#include "test.h"
#include "modelfile/modelfile.h"

static char tmpdir[256];

static hx_train_config tiny(int V)
{
    hx_train_config c = hx_train_default_config();
    c.n_vocab = V;
    c.n_ctx = 32;
    c.n_embd = 32;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.n_ff = 64;
    c.head_dim = 8;
    return c;
}

/* A repeated "sentence" of 24 tokens over a vocabulary of 32: learnable
 * (each token determines the next but one has two successors), with the
 * loss mask off on every fourth token. */
enum { DN = 24 * 40 };
static int32_t data_tok[DN];
static uint8_t data_mask[DN];

static hx_train_data make_data(void)
{
    static const int32_t s[24] = {1, 5, 9, 2, 7, 7, 3, 11, 4, 20, 13, 6,
                                  1, 5, 9, 8, 30, 14, 2, 25, 17, 0, 19, 31};
    for (int i = 0; i < DN; i++) {
        data_tok[i] = s[i % 24];
        data_mask[i] = (uint8_t)(i % 4 != 3);
    }
    hx_train_data d = {.tokens = data_tok, .mask = data_mask, .n = DN};
    return d;
}

static hx_train_params params(int steps)
{
    hx_train_params p = hx_train_default_params();
    p.opt.n_steps = steps;
    p.opt.lr = 3e-3f;
    p.opt.warmup = 2;
    p.seq_len = 16;
    p.n_seq = 2;
    p.accum = 2;
    return p;
}

static void test_resume_exact(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    char ck[512];
    snprintf(ck, sizeof ck, "%s/run.ckpt", tmpdir);
    enum { N = 8 };
    /* straight */
    hx_trainer *a = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 11, 2, &a, &err) == HX_OK);
    hx_train_params p = params(N);
    ASSERT(hx_train_run(a, &d, &p, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_steps_done(a), N);
    /* half, "killed" (trainer freed), reloaded into a differently
     * initialised trainer, other half */
    hx_trainer *b = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 11, 2, &b, &err) == HX_OK);
    p.ckpt_path = ck;
    p.stop_after = N / 2;
    ASSERT(hx_train_run(b, &d, &p, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_steps_done(b), N / 2);
    hx_trainer_free(b);
    b = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 999, 1, &b, &err) == HX_OK);
    ASSERT(hx_trainer_load(b, ck, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_steps_done(b), N / 2);
    p.stop_after = 0;
    ASSERT(hx_train_run(b, &d, &p, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_steps_done(b), N);
    EXPECT(memcmp(hx_trainer_losses(a), hx_trainer_losses(b), N * sizeof(float)) == 0);
    EXPECT(memcmp(hx_trainer_params(a), hx_trainer_params(b),
                  hx_trainer_n_params(a) * sizeof(float)) == 0);
    for (int i = 0; i < N; i++)
        printf("#   step %d loss %.6f / %.6f\n", i + 1, hx_trainer_losses(a)[i],
               hx_trainer_losses(b)[i]);
    hx_trainer_free(a);
    hx_trainer_free(b);
    unlink(ck);
}

static void test_learns(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &tr, &err) == HX_OK);
    hx_train_params p = params(150);
    char svg[512];
    snprintf(svg, sizeof svg, "%s/loss.svg", tmpdir);
    p.svg_path = svg;
    p.progress = 1; /* silent when stderr is not a terminal */
    ASSERT(hx_train_run(tr, &d, &p, &err) == HX_OK);
    const float *l = hx_trainer_losses(tr);
    printf("#   loss %.4f -> %.4f (ln 32 = %.4f)\n", l[0], l[149], log(32.0));
    EXPECT(fabs(l[0] - log(32.0)) < 0.2); /* starts at chance */
    /* the data is deterministic given a few tokens of context: the loss
     * must fall by more than 10x (measured: 3.48 -> 0.034) */
    EXPECT(l[149] < 0.1 * l[0]);
    char *s = NULL;
    size_t n = 0;
    ASSERT(hx_read_file(svg, 0, &s, &n, &err) == HX_OK);
    EXPECT(strstr(s, "<svg") && strstr(s, "<polyline") && strstr(s, "</svg>"));
    free(s);
    unlink(svg);
    hx_trainer_free(tr);
}

/* With the products in bfloat16 the same run learns as well: its loss
 * curve stays near the F32 one (the operands' rounding, 2^-9 relative,
 * moves each step a little) and falls as far. */
static void test_learns_bf16(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    hx_trainer *f = NULL, *h = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &f, &err) == HX_OK);
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &h, &err) == HX_OK);
    if (!hx_trainer_set_bf16(h, 1)) {
        hx_trainer_free(f);
        hx_trainer_free(h);
        SKIP("no AVX512-BF16 (the CPU, or HEARTH_ISA below avx512)");
    }
    hx_train_params p = params(150);
    ASSERT(hx_train_run(f, &d, &p, &err) == HX_OK);
    ASSERT(hx_train_run(h, &d, &p, &err) == HX_OK);
    const float *lf = hx_trainer_losses(f), *lh = hx_trainer_losses(h);
    double worst = 0;
    for (int i = 0; i < 50; i++) worst = fmax(worst, fabs(lh[i] - lf[i]) / lf[i]);
    printf("#   F32 %.4f -> %.4f, bf16 %.4f -> %.4f; first 50 steps within %.2f%%\n", lf[0],
           lf[149], lh[0], lh[149], 100 * worst);
    EXPECT(fabs(lh[0] - lf[0]) < 1e-3 * lf[0]); /* the same start */
    EXPECT(worst < 0.05);
    EXPECT(lh[149] < 0.1 * lh[0]);
    hx_trainer_free(f);
    hx_trainer_free(h);
}

/* One micro-batch of 2 sequences == two accumulated micro-batches of 1. */
static void test_accumulation(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &tr, &err) == HX_OK);
    const size_t np = hx_trainer_n_params(tr);
    float *g1 = malloc(np * sizeof(float));
    hx_batch b2 = {.n_seq = 2, .n_tok = 16, .tokens = d.tokens, .targets = d.tokens + 1, .mask = d.mask + 1};
    int32_t tg[32];
    uint8_t mk[32];
    int cnt = 0;
    for (int i = 0; i < 32; i++) cnt += d.mask[i + 1];
    memcpy(tg, d.tokens + 1, sizeof tg);
    memcpy(mk, d.mask + 1, sizeof mk);
    hx_batch a1 = {.n_seq = 1, .n_tok = 16, .tokens = d.tokens, .targets = tg, .mask = mk};
    hx_batch a2 = {.n_seq = 1, .n_tok = 16, .tokens = d.tokens + 16, .targets = tg + 16, .mask = mk + 16};
    double l = 0, la = 0, lb = 0;
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, &b2, cnt, &l, &err) == HX_OK);
    memcpy(g1, hx_trainer_grads(tr), np * sizeof(float));
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, &a1, cnt, &la, &err) == HX_OK);
    ASSERT(hx_trainer_grad(tr, &a2, cnt, &lb, &err) == HX_OK);
    EXPECT(fabs(l - (la + lb)) < 1e-9 * l);
    EXPECT(test_nmse(g1, hx_trainer_grads(tr), np) < 1e-12);
    free(g1);
    hx_trainer_free(tr);
}

/* Target weights: a target of weight 3 counts as the same target three
 * times (its loss and gradient, against one pass with it and two more
 * with it alone), and through the loop a weight of 2 on every token
 * trains bit for bit as none (the weighted mean is the mean). */
static void test_weights(void)
{
    enum { T = 32 };
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 6, 2, &tr, &err) == HX_OK);
    const size_t np = hx_trainer_n_params(tr);
    float *gw = malloc(np * sizeof *gw);
    uint8_t w[T], only[T];
    for (int t = 0; t < T; t++) {
        w[t] = t % 7 == 1 ? 3 : 1;
        only[t] = (uint8_t)(d.mask[t + 1] && w[t] == 3);
    }
    hx_batch b = {.n_seq = 2, .n_tok = T / 2, .tokens = d.tokens, .targets = d.tokens + 1,
                  .mask = d.mask + 1};
    hx_batch bw = b, bo = b;
    bw.weight = w;
    bo.mask = only;
    double lw = 0, l1 = 0, lo = 0;
    hx_trainer_zero_grad(tr);
    ASSERT(gw && hx_trainer_grad(tr, &bw, 40.0, &lw, &err) == HX_OK);
    memcpy(gw, hx_trainer_grads(tr), np * sizeof *gw);
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, &b, 40.0, &l1, &err) == HX_OK);
    ASSERT(hx_trainer_grad(tr, &bo, 40.0, &lo, &err) == HX_OK);
    ASSERT(hx_trainer_grad(tr, &bo, 40.0, &lo, &err) == HX_OK);
    const double nmse = test_nmse(gw, hx_trainer_grads(tr), np);
    printf("#   weighted loss %.9f, as repeats %.9f; gradient NMSE %.1e\n", lw, l1 + 2 * lo, nmse);
    EXPECT(lo > 0 && fabs(lw - (l1 + 2 * lo)) < 1e-9 * lw);
    EXPECT(nmse < 1e-12);
    /* the loop: 2 everywhere is none; 3 on some targets is another run */
    static uint8_t two[DN], some[DN];
    for (int i = 0; i < DN; i++) two[i] = 2, some[i] = i % 7 == 1 ? 3 : 1;
    hx_trainer *ta = NULL, *tb = NULL, *tc = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 9, 2, &ta, &err) == HX_OK);
    ASSERT(hx_trainer_new_scratch(&c, 9, 2, &tb, &err) == HX_OK);
    ASSERT(hx_trainer_new_scratch(&c, 9, 2, &tc, &err) == HX_OK);
    hx_train_params tp = params(6);
    hx_train_data d2 = d, d3 = d;
    d2.weight = two, d3.weight = some;
    ASSERT(hx_train_run(ta, &d, &tp, &err) == HX_OK);
    ASSERT(hx_train_run(tb, &d2, &tp, &err) == HX_OK);
    ASSERT(hx_train_run(tc, &d3, &tp, &err) == HX_OK);
    EXPECT(!memcmp(hx_trainer_losses(ta), hx_trainer_losses(tb), 6 * sizeof(float)));
    EXPECT(!memcmp(hx_trainer_params(ta), hx_trainer_params(tb), np * sizeof(float)));
    EXPECT(memcmp(hx_trainer_params(ta), hx_trainer_params(tc), np * sizeof(float)));
    hx_trainer_free(ta), hx_trainer_free(tb), hx_trainer_free(tc);
    free(gw);
    hx_trainer_free(tr);
}

static void test_schedule(void)
{
    hx_opt_params o = hx_opt_default_params();
    o.lr = 1.0f;
    o.warmup = 10;
    o.n_steps = 110;
    o.lr_min_frac = 0.1f;
    EXPECT(fabs(hx_opt_lr(&o, 0) - 0.1) < 1e-9);
    EXPECT(fabs(hx_opt_lr(&o, 9) - 1.0) < 1e-9);
    EXPECT(fabs(hx_opt_lr(&o, 10) - 1.0) < 1e-9);
    EXPECT(fabs(hx_opt_lr(&o, 109) - 0.1) < 1e-6);
    EXPECT(hx_opt_lr(&o, 60) < 0.6 && hx_opt_lr(&o, 60) > 0.5);
}

/* Clipping and decoupled decay on a hand-made gradient. */
static void test_schedule_wsd(void)
{
    hx_opt_params o = hx_opt_default_params();
    o.lr = 1.0f;
    o.warmup = 10;
    o.n_steps = 110;
    o.lr_min_frac = 0.1f;
    o.wsd = 1; /* decay over the last 22 steps: 88..109 */
    EXPECT(fabs(hx_opt_lr(&o, 0) - 0.1) < 1e-9);
    EXPECT(fabs(hx_opt_lr(&o, 50) - 1.0) < 1e-9);
    EXPECT(fabs(hx_opt_lr(&o, 87) - 1.0) < 1e-9);
    EXPECT(hx_opt_lr(&o, 88) <= 1.0 && hx_opt_lr(&o, 89) < 1.0);
    EXPECT(fabs(hx_opt_lr(&o, 98) - (1.0 - 0.9 * 10.0 / 21.0)) < 1e-6);
    EXPECT(fabs(hx_opt_lr(&o, 109) - 0.1) < 1e-6);
    o.n_steps = 1; /* degenerate: the one step is the decay */
    EXPECT(fabs(hx_opt_lr(&o, 0) - 0.1) < 1e-6);
}

/* A time budget too small for more than a step: the schedule shrinks to
 * what fits, becomes fixed, is kept in the checkpoint (a resumed run with
 * the same budget does nothing more) and the run finishes (loss curve). */
static void test_time_budget(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    char ck[512], svg[512];
    snprintf(ck, sizeof ck, "%s/budget.ckpt", tmpdir);
    snprintf(svg, sizeof svg, "%s/budget.svg", tmpdir);
    hx_trainer *a = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 3, 1, &a, &err) == HX_OK);
    hx_train_params p = params(1000);
    p.opt.wsd = 1;
    p.time_budget = 1e-9;
    p.ckpt_path = ck;
    p.svg_path = svg;
    ASSERT(hx_train_run(a, &d, &p, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_steps_done(a), 1);
    EXPECT(access(svg, F_OK) == 0);
    hx_trainer *b = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 3, 1, &b, &err) == HX_OK);
    ASSERT(hx_trainer_load(b, ck, &err) == HX_OK);
    ASSERT(hx_train_run(b, &d, &p, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_steps_done(b), 1);
    /* a generous budget: opt.n_steps bounds the run */
    hx_trainer_free(b);
    b = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 3, 1, &b, &err) == HX_OK);
    p = params(6);
    p.opt.wsd = 1;
    p.time_budget = 1e6;
    ASSERT(hx_train_run(b, &d, &p, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_steps_done(b), 6);
    hx_trainer_free(a);
    hx_trainer_free(b);
    unlink(ck);
    unlink(svg);
}

/* The checkpoint at path rewritten as an older version: the header's
 * fields from cut on dropped (8 + 80: v1 had no schedule seconds; 8 + 88:
 * v2 no products), the version set, the FNV-1a 64 sum redone. */
static void downgrade(const char *path, uint32_t version, size_t cut)
{
    hx_err err = {0};
    char *s = NULL;
    size_t n = 0;
    ASSERT(hx_read_file(path, 0, &s, &n, &err) == HX_OK);
    const size_t head = 8 + 96; /* magic and the version-3 header */
    ASSERT(n > head + 8 && cut < head);
    memmove(s + cut, s + head, n - head);
    n -= head - cut;
    memcpy(s + 8, &version, 4);
    uint64_t h = hx_fnv1a(HX_FNV1A_BASIS, s, n - 8);
    memcpy(s + n - 8, &h, 8);
    ASSERT(hx_write_file_atomic(path, s, n, &err) == HX_OK);
    free(s);
}

/* Version-1 and version-2 checkpoints (no schedule fields; no products)
 * still load. */
static void test_checkpoint_v1(void)
{
    hx_train_config c = tiny(32);
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 1, &tr, &err) == HX_OK);
    char ck[512];
    snprintf(ck, sizeof ck, "%s/v1.ckpt", tmpdir);
    for (uint32_t v = 1; v <= 2; v++) {
        ASSERT(hx_trainer_save(tr, ck, &err) == HX_OK);
        downgrade(ck, v, v == 1 ? 8 + 80 : 8 + 88);
        EXPECT_EQ_INT(hx_trainer_load(tr, ck, &err), HX_OK);
    }
    unlink(ck);
    hx_trainer_free(tr);
}

/* HX_BF16_AUTO: a trainer resumed from a checkpoint takes the precision
 * the checkpoint records, either way, whatever a timing would say; one
 * from an older checkpoint, or none, times the products (either answer,
 * never bfloat16 on a CPU without it). */
static void test_products_auto(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    char ck[512];
    snprintf(ck, sizeof ck, "%s/products.ckpt", tmpdir);
    const int can = hx_tr_gemm_bf16_available();
    for (int on = 0; on <= can; on++) {
        hx_trainer *a = NULL, *b = NULL;
        ASSERT(hx_trainer_new_scratch(&c, 5, 2, &a, &err) == HX_OK);
        EXPECT_EQ_INT(hx_trainer_set_bf16(a, on), on);
        hx_train_params p = params(2);
        p.ckpt_path = ck;
        ASSERT(hx_train_run(a, &d, &p, &err) == HX_OK);
        ASSERT(hx_trainer_new_scratch(&c, 5, 2, &b, &err) == HX_OK);
        ASSERT(hx_trainer_load(b, ck, &err) == HX_OK);
        EXPECT_EQ_INT(hx_trainer_set_bf16(b, HX_BF16_AUTO), on);
        EXPECT_EQ_INT(hx_trainer_set_bf16(b, HX_BF16_OFF), 0);
        hx_trainer_free(b);
        b = NULL;
        downgrade(ck, 2, 8 + 88);
        ASSERT(hx_trainer_new_scratch(&c, 5, 2, &b, &err) == HX_OK);
        ASSERT(hx_trainer_load(b, ck, &err) == HX_OK);
        const int got = hx_trainer_set_bf16(b, HX_BF16_AUTO);
        EXPECT(got == 0 || (got == 1 && can));
        hx_trainer_free(a);
        hx_trainer_free(b);
    }
    if (!can) printf("#   no AVX512-BF16: only the F32 checkpoint tried\n");
    unlink(ck);
}

/* A micro-batch with nothing to predict (a window holding only prompt
 * tokens) gives exactly zero gradients, also after other batches left
 * their temporaries behind. */
static void test_no_targets(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 4, 2, &tr, &err) == HX_OK);
    uint8_t none[16] = {0};
    hx_batch b = {.n_seq = 1, .n_tok = 16, .tokens = d.tokens, .targets = d.tokens + 1, .mask = d.mask};
    double loss = 0;
    ASSERT(hx_trainer_grad(tr, &b, 10.0, &loss, &err) == HX_OK);
    hx_trainer_zero_grad(tr);
    b.mask = none;
    ASSERT(hx_trainer_grad(tr, &b, 1.0, &loss, &err) == HX_OK);
    EXPECT(loss == 0.0);
    const float *g = hx_trainer_grads(tr);
    size_t nz = 0;
    for (size_t i = 0; i < hx_trainer_n_params(tr); i++) nz += g[i] != 0.0f;
    EXPECT_EQ_INT((int)nz, 0);
    hx_trainer_free(tr);
}

/* Soft targets: hx_trainer_topk gives the k largest logits of
 * hx_trainer_forward's, with their softmax over those k, at the targets'
 * positions only; a one-point soft target trains exactly as the token
 * (same loss and gradients), in a batch and through hx_train_run; the
 * model's own whole distribution as the target gives no gradient (the
 * KL divergence to itself is at its minimum), where its tokens give
 * one; a soft target outside the vocabulary is refused. */
static void test_soft_targets(void)
{
    enum { V = 32, T = 16, K = 4 };
    hx_train_config c = tiny(V);
    hx_train_data d = make_data();
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 4, 2, &tr, &err) == HX_OK);
    hx_batch b = {.n_seq = 1, .n_tok = T, .tokens = d.tokens, .targets = d.tokens + 1, .mask = d.mask};
    float lg[T * V], p[T * K];
    int32_t id[T * K];
    ASSERT(hx_trainer_forward(tr, &b, lg, NULL, NULL, &err) == HX_OK);
    ASSERT(hx_trainer_topk(tr, &b, K, id, p, &err) == HX_OK);
    int bad = 0;
    for (int t = 0; t < T; t++) {
        const float *z = lg + t * V;
        if (!d.mask[t]) { bad += p[t * K] != 0.0f; continue; }
        double s = 0;
        for (int j = 0; j < K; j++) s += exp(z[id[t * K + j]] - z[id[t * K]]);
        for (int j = 0; j < K; j++) {
            int above = 0; /* exactly j logits are larger */
            for (int i = 0; i < V; i++) above += z[i] > z[id[t * K + j]];
            bad += above != j;
            bad += fabs(p[t * K + j] - exp(z[id[t * K + j]] - z[id[t * K]]) / s) > 1e-6;
        }
    }
    EXPECT_EQ_INT(bad, 0);
    /* one point on the target: the hard loss and gradients, bit for bit */
    int32_t oid[T * K];
    float op[T * K] = {0};
    for (int t = 0; t < T; t++) oid[t * K] = d.tokens[t + 1], op[t * K] = 1.0f;
    for (int t = 0; t < T; t++)
        for (int j = 1; j < K; j++) oid[t * K + j] = 0;
    const size_t np = hx_trainer_n_params(tr);
    float *g0 = malloc(np * sizeof *g0);
    double l0 = 0, l1 = 0;
    hx_trainer_zero_grad(tr);
    ASSERT(g0 && hx_trainer_grad(tr, &b, 7.0, &l0, &err) == HX_OK);
    memcpy(g0, hx_trainer_grads(tr), np * sizeof *g0);
    hx_batch bs = b;
    bs.soft_id = oid, bs.soft_p = op, bs.soft_k = K;
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, &bs, 7.0, &l1, &err) == HX_OK);
    EXPECT(l0 == l1);
    EXPECT(!memcmp(g0, hx_trainer_grads(tr), np * sizeof *g0));
    /* the model's own full distribution: no gradient */
    int32_t fid[T * V];
    float fp[T * V];
    ASSERT(hx_trainer_topk(tr, &b, V, fid, fp, &err) == HX_OK);
    bs.soft_id = fid, bs.soft_p = fp, bs.soft_k = V;
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, &bs, 1.0, &l1, &err) == HX_OK);
    double gmax = 0, g0max = 0;
    for (size_t i = 0; i < np; i++) {
        gmax = fmax(gmax, fabs(hx_trainer_grads(tr)[i]));
        g0max = fmax(g0max, fabs(g0[i]));
    }
    printf("#   self-distillation gradient %.1e (the tokens' %.1e)\n", gmax, g0max);
    EXPECT(gmax < 1e-4 * g0max);
    /* a soft target on a token outside the vocabulary is refused */
    oid[K] = V;
    bs.soft_id = oid, bs.soft_p = op, bs.soft_k = K;
    EXPECT(hx_trainer_grad(tr, &bs, 1.0, &l1, &err) == HX_ERR_RANGE);
    oid[K] = 0;
    /* through the loop: one-point soft targets on every token train as the
     * tokens, step by step */
    int32_t *did = calloc((size_t)DN * K, sizeof *did);
    float *dp = calloc((size_t)DN * K, sizeof *dp);
    ASSERT(did && dp);
    for (int i = 0; i < DN; i++) did[i * K] = d.tokens[i], dp[i * K] = 1.0f;
    hx_trainer *ta = NULL, *tb = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 9, 2, &ta, &err) == HX_OK);
    ASSERT(hx_trainer_new_scratch(&c, 9, 2, &tb, &err) == HX_OK);
    hx_train_params tp = params(6);
    hx_train_data ds = d;
    ds.soft_id = did, ds.soft_p = dp, ds.soft_k = K;
    ASSERT(hx_train_run(ta, &d, &tp, &err) == HX_OK);
    ASSERT(hx_train_run(tb, &ds, &tp, &err) == HX_OK);
    EXPECT(!memcmp(hx_trainer_losses(ta), hx_trainer_losses(tb), 6 * sizeof(float)));
    EXPECT(!memcmp(hx_trainer_params(ta), hx_trainer_params(tb), np * sizeof(float)));
    hx_trainer_free(ta), hx_trainer_free(tb);
    free(did), free(dp), free(g0);
    hx_trainer_free(tr);
}

static void test_adamw_step(void)
{
    hx_train_config c = tiny(32);
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 1, &tr, &err) == HX_OK);
    const size_t np = hx_trainer_n_params(tr);
    float *p0 = malloc(np * sizeof(float));
    memcpy(p0, hx_trainer_params(tr), np * sizeof(float));
    hx_trainer_zero_grad(tr);
    float *g = hx_trainer_grads(tr);
    for (size_t i = 0; i < np; i++) g[i] = 3.0f;
    hx_opt_params o = hx_opt_default_params();
    o.lr = 0.01f;
    o.wd = 0.5f;
    double gn = 0;
    EXPECT(hx_trainer_step(tr, &o, &gn) == HX_OK);
    EXPECT(fabs(gn - 3.0 * sqrt((double)np)) < 1e-3 * gn);
    /* first Adam step moves every parameter by lr * sign(g) (+ decay) */
    size_t off, n;
    const char *name = hx_trainer_tensor(tr, 1, &off, &n); /* attn_norm: no decay */
    EXPECT(strstr(name, "attn_norm") != NULL);
    EXPECT(fabsf(hx_trainer_params(tr)[off] - (p0[off] - 0.01f)) < 1e-6f);
    name = hx_trainer_tensor(tr, 2, &off, &n); /* attn_q: decays */
    EXPECT(strstr(name, "attn_q") != NULL);
    EXPECT(fabsf(hx_trainer_params(tr)[off] - (p0[off] - 0.01f * (1.0f + 0.5f * p0[off]))) < 1e-6f);
    g[0] = NAN;
    EXPECT_EQ_INT(hx_trainer_step(tr, &o, &gn), HX_ERR_RANGE);
    free(p0);
    hx_trainer_free(tr);
}

static void test_checkpoint_errors(void)
{
    hx_train_config c = tiny(32);
    hx_err err = {0};
    hx_trainer *tr = NULL, *other = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 1, &tr, &err) == HX_OK);
    char ck[512];
    snprintf(ck, sizeof ck, "%s/e.ckpt", tmpdir);
    ASSERT(hx_trainer_save(tr, ck, &err) == HX_OK);
    c.n_ff = 96;
    ASSERT(hx_trainer_new_scratch(&c, 5, 1, &other, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_load(other, ck, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "shape") != NULL);
    char *s = NULL;
    size_t n = 0;
    ASSERT(hx_read_file(ck, 0, &s, &n, &err) == HX_OK);
    s[n / 2] ^= 1; /* a flipped bit */
    ASSERT(hx_write_file_atomic(ck, s, n, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_load(tr, ck, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "checksum") != NULL);
    ASSERT(hx_write_file_atomic(ck, s, n - 100, &err) == HX_OK); /* truncated */
    EXPECT_EQ_INT(hx_trainer_load(tr, ck, &err), HX_ERR_FORMAT);
    ASSERT(hx_write_file_atomic(ck, "hello", 5, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_load(tr, ck, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "not a Hearth") != NULL);
    free(s);
    unlink(ck);
    hx_trainer_free(tr);
    hx_trainer_free(other);
}

/* hx_decode logits of ids on a GGUF; n*V floats, caller frees. */
static float *decode_logits(const char *path, const int32_t *ids, int n, int *V)
{
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.kv_f32 = 1;
    cp.n_ctx = 32;
    cp.n_threads = 1;
    hx_model *m = NULL;
    hx_ctx *ctx = NULL;
    hx_err err = {0};
    float *out = NULL;
    if (!hx_model_load(path, &mp, &m, &err) && !hx_ctx_new(m, &cp, &ctx, &err) &&
        !hx_decode(ctx, ids, n, 1)) {
        *V = hx_model_hparams(m)->n_vocab;
        out = malloc((size_t)n * *V * sizeof(float));
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)i * *V, hx_ctx_logits(ctx, i), (size_t)*V * sizeof(float));
    } else {
        printf("# decode %s: %s %s\n", path, err.msg, ctx ? hx_ctx_errmsg(ctx) : "");
    }
    hx_ctx_free(ctx);
    hx_model_free(m);
    return out;
}

static void test_write_gguf(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &tr, &err) == HX_OK);
    hx_train_params p = params(5);
    ASSERT(hx_train_run(tr, &d, &p, &err) == HX_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/trained.gguf", tmpdir);
    ASSERT(hx_trainer_write_gguf(tr, path, NULL, &err) == HX_OK);
    enum { N = 12 };
    float *mine = malloc((size_t)N * 32 * sizeof(float));
    hx_batch b = {.n_seq = 1, .n_tok = N, .tokens = data_tok};
    ASSERT(hx_trainer_forward(tr, &b, mine, NULL, NULL, &err) == HX_OK);
    int V = 0;
    float *dec = decode_logits(path, data_tok, N, &V);
    ASSERT(dec && V == 32);
    const double e = test_nmse(dec, mine, (size_t)N * 32);
    printf("#   trained model: hx_decode vs trainer nmse %.2e\n", e);
    EXPECT(e < 1e-10);
    /* the file reloads for full training with the same weights */
    hx_trainer *again = NULL;
    ASSERT(hx_trainer_new_gguf(path, NULL, 1, &again, &err) == HX_OK);
    EXPECT(hx_trainer_n_params(again) == hx_trainer_n_params(tr));
    EXPECT(memcmp(hx_trainer_params(again), hx_trainer_params(tr),
                  hx_trainer_n_params(tr) * sizeof(float)) == 0);
    free(dec);
    free(mine);
    hx_trainer_free(again);
    hx_trainer_free(tr);
    unlink(path);
}

/* With the Qwen2 vocabulary (llama.cpp needs one): trained a few steps,
 * written, and run by llama.cpp and by Hearth. */
static void test_llama_cpp_loads_it(void)
{
    char why[256];
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    hx_train_config c = tiny(151936);
    c.n_embd = 16;
    c.n_head = 2;
    c.n_head_kv = 1;
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &tr, &err) == HX_OK);
    hx_train_data d = make_data();
    for (int i = 0; i < DN; i++) data_tok[i] = data_tok[i] * 4001 + 17;
    hx_train_params p = params(3);
    p.accum = 1;
    ASSERT(hx_train_run(tr, &d, &p, &err) == HX_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/trained-qwen2vocab.gguf", tmpdir);
    ASSERT(hx_trainer_write_gguf(tr, path, vocab, &err) == HX_OK);
    enum { N = 10 };
    float *ref = NULL;
    int V = 0, Vh = 0;
    ASSERT(ref_logits(path, data_tok, N, &ref, &V) == 0);
    float *mine = decode_logits(path, data_tok, N, &Vh);
    ASSERT(mine && V == Vh && V == 151936);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double e = test_nmse(ref + (size_t)i * V, mine + (size_t)i * V, (size_t)V);
        if (!(e <= worst)) worst = e;
    }
    printf("#   llama.cpp vs Hearth on the trained model: worst nmse %.2e\n", worst);
    EXPECT(worst < 1e-6);
    free(ref);
    free(mine);
    hx_trainer_free(tr);
    unlink(path);
}

/* A LoRA adapter trained over a random F32 qwen3 base (Qwen2 vocabulary),
 * written by Hearth and applied by llama.cpp: its logits equal the
 * training forward's. */
static void test_llama_cpp_applies_adapter(void)
{
    char why[256];
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    char base[512], ad[512];
    snprintf(base, sizeof base, "%s/lbase.gguf", tmpdir);
    snprintf(ad, sizeof ad, "%s/adapter.gguf", tmpdir);
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.vocab_path = vocab;
    mp.n_layer = 2;
    mp.n_embd = 32;
    mp.n_head = 2;
    mp.n_head_kv = 1;
    mp.head_dim = 16;
    mp.n_ff = 64;
    mp.n_ctx = 64;
    mp.tied_output = 1;
    hx_err err = {0};
    ASSERT(hx_mkmodel_write(&mp, base, &err) == HX_OK);
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = 4;
    lp.alpha = 8;
    lp.targets = HX_LORA_ALL;
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_gguf(base, &lp, 2, &tr, &err) == HX_OK);
    hx_train_data d = make_data();
    for (int i = 0; i < DN; i++) data_tok[i] = data_tok[i] * 4001 + 17;
    hx_train_params p = params(4);
    p.opt.lr = 2e-2f; /* B moves well away from 0 */
    p.accum = 1;
    ASSERT(hx_train_run(tr, &d, &p, &err) == HX_OK);
    ASSERT(hx_trainer_write_gguf(tr, ad, NULL, &err) == HX_OK);
    enum { N = 10 };
    const int V = 151936;
    float *mine = malloc((size_t)N * V * sizeof(float)), *ref = NULL, *plain = NULL;
    hx_batch b = {.n_seq = 1, .n_tok = N, .tokens = data_tok};
    ASSERT(hx_trainer_forward(tr, &b, mine, NULL, NULL, &err) == HX_OK);
    int nv = 0;
    ASSERT(ref_lora_logits(base, ad, 1.0f, data_tok, N, &ref, &nv) == 0 && nv == V);
    ASSERT(ref_logits(base, data_tok, N, &plain, &nv) == 0 && nv == V);
    double worst = 0, moved = 0;
    for (int i = 0; i < N; i++) {
        double e = test_nmse(ref + (size_t)i * V, mine + (size_t)i * V, (size_t)V);
        double m = test_nmse(plain + (size_t)i * V, mine + (size_t)i * V, (size_t)V);
        if (!(e <= worst)) worst = e;
        if (m > moved) moved = m;
    }
    printf("#   llama.cpp with Hearth's adapter vs trainer: worst nmse %.2e "
           "(adapter moves logits by nmse %.2e)\n", worst, moved);
    EXPECT(worst < 1e-6);
    EXPECT(moved > 1e-4); /* the adapter is not a no-op */
    free(mine);
    free(ref);
    free(plain);
    hx_trainer_free(tr);
    unlink(base);
    unlink(ad);
}

/* Packed documents in the stream: training runs and still learns. */
static void test_packed_data(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    static int32_t doc[DN];
    for (int i = 0; i < DN; i++) doc[i] = i / 24; /* one sentence per doc */
    d.doc = doc;
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &tr, &err) == HX_OK);
    hx_train_params p = params(60);
    ASSERT(hx_train_run(tr, &d, &p, &err) == HX_OK);
    const float *l = hx_trainer_losses(tr);
    printf("#   packed: loss %.4f -> %.4f\n", l[0], l[59]);
    EXPECT(l[59] < 0.5 * l[0]);
    hx_trainer_free(tr);
}

/* Windows longer than the context (32) pack more documents; one longer
 * than the context is cut at it (every position stays inside), and
 * training still learns. */
static void test_windows_past_context(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    static int32_t doc[DN];
    for (int i = 0; i < DN; i++) doc[i] = i < 24 * 4 ? 0 : i / 24; /* the first 96 tokens long */
    d.doc = doc;
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &tr, &err) == HX_OK);
    hx_train_params p = params(60);
    p.seq_len = 80, p.n_seq = 1, p.accum = 1;
    ASSERT(hx_train_run(tr, &d, &p, &err) == HX_OK);
    const float *l = hx_trainer_losses(tr);
    printf("#   windows of 80 over a context of 32: loss %.4f -> %.4f\n", l[0], l[59]);
    EXPECT(l[59] < 0.5 * l[0]);
    hx_trainer_free(tr);
}

/* Documents whose every target lies past the context (or the window):
 * refused before any step, not trained on nothing. */
static void test_targets_out_of_reach(void)
{
    hx_train_config c = tiny(32);
    hx_train_data d = make_data();
    static int32_t doc[DN];
    static uint8_t mask[DN];
    for (int i = 0; i < DN; i++) doc[i] = i / 48, mask[i] = i % 48 >= 40; /* targets from 40 */
    d.doc = doc, d.mask = mask;
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 1, &tr, &err) == HX_OK);
    hx_train_params p = params(4);
    p.seq_len = 96, p.n_seq = 1, p.accum = 1; /* the context is 32 */
    EXPECT_EQ_INT(hx_train_run(tr, &d, &p, &err), HX_ERR_RANGE);
    printf("#   %s\n", err.msg);
    EXPECT(strstr(err.msg, "first 32 tokens") && strstr(err.msg, "token 39"));
    EXPECT_EQ_INT(hx_trainer_steps_done(tr), 0);
    for (int i = 0; i < DN; i++) mask[i] = i % 48 >= 20; /* within reach: trains */
    EXPECT_EQ_INT(hx_train_run(tr, &d, &p, &err), HX_OK);
    hx_trainer_free(tr);
}

static void test_bad_params(void)
{
    hx_train_config c = tiny(32);
    hx_err err = {0};
    hx_trainer *tr = NULL;
    ASSERT(hx_trainer_new_scratch(&c, 5, 1, &tr, &err) == HX_OK);
    hx_train_data d = make_data();
    hx_train_params p = params(2);
    p.seq_len = 64; /* beyond n_ctx 32, and no documents to pack */
    EXPECT_EQ_INT(hx_train_run(tr, &d, &p, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "packed documents") != NULL);
    p.seq_len = 16;
    hx_train_data tiny_d = {.tokens = data_tok, .n = 10};
    EXPECT_EQ_INT(hx_train_run(tr, &tiny_d, &p, &err), HX_ERR_INVALID);
    int32_t bad[40] = {0};
    bad[7] = 32;
    hx_train_data bd = {.tokens = bad, .n = 40};
    EXPECT_EQ_INT(hx_train_run(tr, &bd, &p, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "vocabulary") != NULL);
    hx_trainer_free(tr);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_train.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_resume_exact);
    RUN(test_learns);
    RUN(test_learns_bf16);
    RUN(test_accumulation);
    RUN(test_weights);
    RUN(test_schedule);
    RUN(test_schedule_wsd);
    RUN(test_no_targets);
    RUN(test_soft_targets);
    RUN(test_time_budget);
    RUN(test_checkpoint_v1);
    RUN(test_products_auto);
    RUN(test_adamw_step);
    RUN(test_checkpoint_errors);
    RUN(test_write_gguf);
    RUN(test_llama_cpp_loads_it);
    RUN(test_llama_cpp_applies_adapter);
    RUN(test_packed_data);
    RUN(test_windows_past_context);
    RUN(test_targets_out_of_reach);
    RUN(test_bad_params);
    rmdir(tmpdir);
    return test_summary();
}
