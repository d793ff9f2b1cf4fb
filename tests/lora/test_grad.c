/* test_grad.c: whole-model gradient checks of the training engine against
 * central differences (full training, a base grown by added layers, and
 * LoRA over F32 and Q8_0 bases),
 * and the training forward's logits against the engine's hx_decode. */
#include <stdint.h>
#include <unistd.h>

#include "lora/lora.h"
#include "test.h"
#include "trainer_fill.h"
#include "modelfile/modelfile.h"

static char tmpdir[256];

/* Central differences in float, Richardson-extrapolated from steps h and
 * h/2 (truncation error O(h^4)); float rounding of the loss (~1e-7
 * relative) is then the main error: ~1e-6 absolute at h = 1e-2 on losses of
 * a few nats. Tolerances below are set from that. */
static double FD_H = 1e-2;

typedef struct gstat {
    double worst_rel;  /* max over tensors of ||a - n|| / ||n|| */
    double worst_abs;  /* max over elements of |a - n| */
    const char *worst_name;
    size_t n_checked;
} gstat;

static double mean_loss(hx_trainer *tr, const hx_batch *b)
{
    double l = 0;
    int n = 0;
    hx_err err = {0};
    if (hx_trainer_forward(tr, b, NULL, &l, &n, &err) != HX_OK || n == 0) return NAN;
    return l / n;
}

static double fd_at(hx_trainer *tr, const hx_batch *b, float *p, double h)
{
    const float x = *p;
    *p = (float)(x + h);
    const double hp = (double)*p - x;
    const double lp = mean_loss(tr, b);
    *p = (float)(x - h);
    const double hm = x - (double)*p;
    const double lm = mean_loss(tr, b);
    *p = x;
    return (lp - lm) / (hp + hm);
}

/* Checks every trainable parameter (of the tensor named
 * only, when not NULL); fills st. */
static void check_some(hx_trainer *tr, const hx_batch *b, gstat *st,
                       const char *only)
{
    hx_err err = {0};
    double l = 0;
    int n = 0;
    memset(st, 0, sizeof *st);
    ASSERT(hx_trainer_forward(tr, b, NULL, &l, &n, &err) == HX_OK && n > 0);
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, b, n, &l, &err) == HX_OK);
    const size_t np = hx_trainer_n_params(tr);
    float *g = malloc(np * sizeof(float));
    memcpy(g, hx_trainer_grads(tr), np * sizeof(float));
    float *P = hx_trainer_params(tr);
    for (int t = 0; t < hx_trainer_n_tensors(tr); t++) {
        size_t off, cnt;
        const char *name = hx_trainer_tensor(tr, t, &off, &cnt);
        if (only && strcmp(name, only)) continue;
        double num = 0, den = 0;
        for (size_t i = off; i < off + cnt; i++) {
            const double d1 = fd_at(tr, b, &P[i], FD_H);
            const double d2 = fd_at(tr, b, &P[i], FD_H / 2);
            const double fd = (4 * d2 - d1) / 3;
            const double e = fabs(fd - g[i]);
            num += e * e;
            den += fd * fd;
            if (e > st->worst_abs) st->worst_abs = e;
            st->n_checked++;
        }
        const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (rel > st->worst_rel) {
            st->worst_rel = rel;
            st->worst_name = name;
        }
    }
    free(g);
}

static void check_all(hx_trainer *tr, const hx_batch *b, gstat *st)
{
    check_some(tr, b, st, NULL);
}

/* Directional check of each tensor: along a random +-1 direction v the
 * derivative g.v is compared with differences of the loss moving the whole
 * tensor (a signal summed over all its elements, far above the float
 * noise), error relative to ||g||. Returns the worst. */
static double check_directions(hx_trainer *tr, const hx_batch *b,
                               const char **worst_name)
{
    hx_err err = {0};
    double l = 0, worst = 0;
    int n = 0;
    if (hx_trainer_forward(tr, b, NULL, &l, &n, &err) || !n) return 1;
    hx_trainer_zero_grad(tr);
    if (hx_trainer_grad(tr, b, n, &l, &err)) return 1;
    const float *g = hx_trainer_grads(tr);
    float *P = hx_trainer_params(tr);
    uint64_t s = 5;
    for (int t = 0; t < hx_trainer_n_tensors(tr); t++) {
        size_t off, cnt;
        const char *name = hx_trainer_tensor(tr, t, &off, &cnt);
        float *v = malloc(cnt * sizeof(float)), *x0 = malloc(cnt * sizeof(float));
        double dd = 0, gn = 0, d[2];
        for (size_t i = 0; i < cnt; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v[i] = (float)(((s >> 63) ? 1.0 : -1.0) / sqrt((double)cnt));
            dd += (double)g[off + i] * v[i];
            gn += (double)g[off + i] * g[off + i];
        }
        memcpy(x0, P + off, cnt * sizeof(float));
        for (int k = 0; k < 2; k++) {
            const double h = k ? FD_H / 2 : FD_H;
            for (size_t i = 0; i < cnt; i++) P[off + i] = (float)(x0[i] + h * v[i]);
            const double lp = mean_loss(tr, b);
            for (size_t i = 0; i < cnt; i++) P[off + i] = (float)(x0[i] - h * v[i]);
            const double lm = mean_loss(tr, b);
            d[k] = (lp - lm) / (2 * h);
        }
        memcpy(P + off, x0, cnt * sizeof(float));
        const double e = fabs((4 * d[1] - d[0]) / 3 - dd) / (sqrt(gn) + 1e-12);
        if (e > worst) {
            worst = e;
            *worst_name = name;
        }
        free(v);
        free(x0);
    }
    return worst;
}

/* Two sequences of 7: the second packs two documents; some targets off,
 * some counting twice (hx_batch.weight). */
static int32_t toks[14], tgts[14], docs[14];
static uint8_t mask[14], wts[14];

static hx_batch make_batch(int V)
{
    uint64_t s = 7;
    for (int i = 0; i < 14; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((s >> 33) % (uint64_t)V);
        tgts[i] = (int32_t)((s >> 45) % (uint64_t)V);
        mask[i] = (uint8_t)(i % 5 != 2);
        docs[i] = i < 7 ? 0 : (i < 10 ? 1 : 2);
        wts[i] = (uint8_t)(i % 3 == 0 ? 2 : 1);
    }
    hx_batch b = {.n_seq = 2, .n_tok = 7, .tokens = toks, .targets = tgts, .mask = mask,
                  .doc = docs, .weight = wts};
    return b;
}

static hx_train_config tiny(void)
{
    hx_train_config c = hx_train_default_config();
    c.n_vocab = 32;
    c.n_ctx = 16;
    c.n_embd = 16;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_head_kv = 1;
    c.head_dim = 8;
    c.n_ff = 32;
    return c;
}

static void test_full_model(void)
{
    hx_train_config c = tiny();
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_scratch(&c, 3, 1, &tr, &err) == HX_OK);
    randomize(tr, 0.8f);
    hx_batch b = make_batch(c.n_vocab);
    gstat st;
    check_all(tr, &b, &st);
    printf("#   full: %zu params, worst tensor rel err %.2e (%s), worst abs %.2e\n",
           st.n_checked, st.worst_rel, st.worst_name ? st.worst_name : "-", st.worst_abs);
    EXPECT(st.n_checked == hx_trainer_n_params(tr));
    EXPECT(st.worst_rel < 1e-3);
    EXPECT(st.worst_abs < 2e-4);
    const char *wn = "-";
    const double dir = check_directions(tr, &b, &wn);
    printf("#   full: worst directional error %.2e of ||g|| (%s)\n", dir, wn);
    EXPECT(dir < 1e-3);
    hx_trainer_free(tr);
}

/* A random qwen3 GGUF of ftype (C = 32 so Q8_0 rows fit); moe: a
 * qwen3moe of the same width, 4 experts of 32, 2 used. */
static int write_model(const char *path, const char *ftype, int tied, int moe)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = moe ? "qwen3moe" : "qwen3";
    p.ftype = ftype;
    p.n_vocab = 32;
    p.n_ctx = 64;
    p.n_layer = 2;
    p.n_embd = 32;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = 16;
    p.n_ff = 64;
    p.n_expert = 4, p.n_expert_used = 2, p.n_ff_exp = 32;
    p.tied_output = tied;
    hx_err err = {0};
    int rc = hx_mkmodel_write(&p, path, &err);
    if (rc) printf("# mkmodel: %s\n", err.msg);
    return rc;
}

static int write_base(const char *path, const char *ftype, int tied)
{
    return write_model(path, ftype, tied, 0);
}

/* moe: the attention's q, k, v, o of a qwen3moe base (its router and
 * experts frozen: the gradient flows through them to the lower layers,
 * the experts' choice fixed); else every linear of a qwen3 one. */
static void lora_check_arch(const char *ftype, int moe)
{
    char path[512];
    snprintf(path, sizeof path, "%s/base-%s-%d.gguf", tmpdir, ftype, moe);
    ASSERT(write_model(path, ftype, 1, moe) == HX_OK);
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = 2;
    lp.alpha = 4;
    lp.targets = moe ? HX_LORA_Q | HX_LORA_K | HX_LORA_V | HX_LORA_O : HX_LORA_ALL;
    lp.init_b = 0.3f;
    hx_trainer *tr = NULL;
    hx_err err = {0};
    if (getenv("FDH")) FD_H = atof(getenv("FDH"));
    if (getenv("LA")) lp.alpha = (float)atof(getenv("LA"));
    if (getenv("LB")) lp.init_b = (float)atof(getenv("LB"));
    ASSERT(hx_trainer_new_gguf(path, &lp, 1, &tr, &err) == HX_OK);
    EXPECT(hx_trainer_is_lora(tr));
    /* 2 layers x 7 (MoE: 4) targets x (A + B) and nothing else */
    EXPECT_EQ_INT(hx_trainer_n_tensors(tr), moe ? 16 : 28);
    hx_batch b = make_batch(32);
    gstat st;
    check_all(tr, &b, &st);
    printf("#   lora over %s%s: %zu params, worst tensor rel err %.2e (%s), "
           "worst abs %.2e\n", moe ? "qwen3moe " : "", ftype, st.n_checked, st.worst_rel,
           st.worst_name ? st.worst_name : "-", st.worst_abs);
    /* element-wise differences are at the float noise floor here (the
     * random base plus a large adapter gives sharp logits): loose bounds,
     * and directional ones at ~1e-3 of ||g||; the exact check of the LoRA
     * gradients is lora_vs_full below ... */
    EXPECT(st.worst_rel < 2e-2);
    /* ... the directional check: */
    const char *wn = "-";
    const double dir = check_directions(tr, &b, &wn);
    printf("#   lora over %s%s: worst directional error %.2e of ||g|| (%s)\n",
           moe ? "qwen3moe " : "", ftype, dir, wn);
    EXPECT(dir < 3e-3);
    hx_trainer_free(tr);
    unlink(path);
}

static void lora_check(const char *ftype) { lora_check_arch(ftype, 0); }

/* The LoRA gradients against the (FD-checked) full-weight gradient G of
 * the merged model W + s B A: dA = s B^T G and dB = s G A^T exactly, so
 * this check has no finite-difference noise. */
static void lora_vs_full(const char *ftype)
{
    char path[512];
    snprintf(path, sizeof path, "%s/merge-%s.gguf", tmpdir, ftype);
    ASSERT(write_base(path, ftype, 1) == HX_OK);
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = 3;
    lp.alpha = 6;
    lp.targets = HX_LORA_ALL;
    lp.init_b = 0.2f;
    const float sc = lp.alpha / lp.rank;
    hx_trainer *tl = NULL, *tf = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_gguf(path, &lp, 1, &tl, &err) == HX_OK);
    ASSERT(hx_trainer_new_gguf(path, NULL, 2, &tf, &err) == HX_OK);
    const float *pl = hx_trainer_params(tl);
    float *pf = hx_trainer_params(tf);
    /* merge: tensors of tl come in (A, B) pairs; find W by name in tf */
    for (int t = 0; t + 1 < hx_trainer_n_tensors(tl); t += 2) {
        size_t oa, ob, na, nb, ow = 0, nw = 0;
        char base[96];
        snprintf(base, sizeof base, "%s", hx_trainer_tensor(tl, t, &oa, &na));
        hx_trainer_tensor(tl, t + 1, &ob, &nb);
        *strstr(base, ".lora_a") = 0;
        for (int k = 0; k < hx_trainer_n_tensors(tf); k++)
            if (!strcmp(hx_trainer_tensor(tf, k, &ow, &nw), base)) break;
        const size_t r = (size_t)lp.rank, in = na / r, out = nb / r;
        ASSERT(nw == in * out);
        for (size_t i = 0; i < out; i++)
            for (size_t j = 0; j < in; j++) {
                double acc = 0;
                for (size_t q = 0; q < r; q++) acc += (double)pl[ob + i * r + q] * pl[oa + q * in + j];
                pf[ow + i * in + j] += (float)(sc * acc);
            }
    }
    hx_batch b = make_batch(32);
    double l1 = 0, l2 = 0;
    int n = 0;
    ASSERT(hx_trainer_forward(tl, &b, NULL, &l1, &n, &err) == HX_OK);
    hx_trainer_zero_grad(tl);
    hx_trainer_zero_grad(tf);
    ASSERT(hx_trainer_grad(tl, &b, n, &l1, &err) == HX_OK);
    ASSERT(hx_trainer_grad(tf, &b, n, &l2, &err) == HX_OK);
    EXPECT(fabs(l1 - l2) < 1e-4 * fabs(l2));
    const float *gl = hx_trainer_grads(tl), *gf = hx_trainer_grads(tf);
    double worst = 0;
    for (int t = 0; t + 1 < hx_trainer_n_tensors(tl); t += 2) {
        size_t oa, ob, na, nb, ow = 0, nw = 0;
        char base[96];
        snprintf(base, sizeof base, "%s", hx_trainer_tensor(tl, t, &oa, &na));
        hx_trainer_tensor(tl, t + 1, &ob, &nb);
        *strstr(base, ".lora_a") = 0;
        for (int k = 0; k < hx_trainer_n_tensors(tf); k++)
            if (!strcmp(hx_trainer_tensor(tf, k, &ow, &nw), base)) break;
        const size_t r = (size_t)lp.rank, in = na / r, out = nb / r;
        double num = 0, den = 0;
        for (size_t q = 0; q < r; q++) /* dA[q][j] = s sum_i B[i][q] G[i][j] */
            for (size_t j = 0; j < in; j++) {
                double e = 0;
                for (size_t i = 0; i < out; i++) e += (double)pl[ob + i * r + q] * gf[ow + i * in + j];
                e *= sc;
                num += (e - gl[oa + q * in + j]) * (e - gl[oa + q * in + j]);
                den += e * e;
            }
        for (size_t i = 0; i < out; i++) /* dB[i][q] = s sum_j G[i][j] A[q][j] */
            for (size_t q = 0; q < r; q++) {
                double e = 0;
                for (size_t j = 0; j < in; j++) e += (double)gf[ow + i * in + j] * pl[oa + q * in + j];
                e *= sc;
                num += (e - gl[ob + i * r + q]) * (e - gl[ob + i * r + q]);
                den += e * e;
            }
        const double rel = sqrt(num / (den + 1e-30));
        if (rel > worst) worst = rel;
    }
    printf("#   lora over %s vs merged full gradient: worst rel %.2e\n", ftype, worst);
    EXPECT(worst < 1e-4);
    hx_trainer_free(tl);
    hx_trainer_free(tf);
    unlink(path);
}

/* Untied head: output.weight and the embedding lookup get separate
 * gradients; full training from a GGUF file. */
static void test_untied_from_gguf(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/untied.gguf", tmpdir);
    ASSERT(write_base(path, "F32", 0) == HX_OK);
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_gguf(path, NULL, 1, &tr, &err) == HX_OK);
    hx_batch b = make_batch(32);
    gstat se, so;
    check_some(tr, &b, &se, "token_embd.weight");
    check_some(tr, &b, &so, "output.weight");
    const char *wn = "-";
    const double dir = check_directions(tr, &b, &wn);
    printf("#   untied: token_embd rel %.2e, output rel %.2e, worst directional "
           "%.2e (%s)\n", se.worst_rel, so.worst_rel, dir, wn);
    EXPECT(se.n_checked == 32 * 32 && so.n_checked == 32 * 32);
    EXPECT(se.worst_rel < 1e-3 && so.worst_rel < 1e-3);
    EXPECT(dir < 1e-3);
    hx_trainer_free(tr);
    unlink(path);
}

/* The params of trainer tensor name (NULL if absent); *n its size. */
static const float *tensor_of(hx_trainer *tr, const char *name, size_t *n)
{
    for (int i = 0; i < hx_trainer_n_tensors(tr); i++) {
        size_t off;
        if (!strcmp(hx_trainer_tensor(tr, i, &off, n), name))
            return hx_trainer_params(tr) + off;
    }
    return NULL;
}

static int all_zero(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0.0f) return 0;
    return 1;
}

/* Whether layer gl of grown equals layer bl of base, tensor by tensor, an
 * added copy's attention output and FFN down projections zero instead. */
static int layer_is(hx_trainer *grown, int gl, hx_trainer *base, int bl, int copy)
{
    static const char *const what[] = {"attn_norm", "attn_q", "attn_k", "attn_v",
                                       "attn_output", "attn_q_norm", "attn_k_norm",
                                       "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) {
        char gn[64], bn[64];
        size_t ng = 0, nb = 0;
        snprintf(gn, sizeof gn, "blk.%d.%s.weight", gl, what[i]);
        snprintf(bn, sizeof bn, "blk.%d.%s.weight", bl, what[i]);
        const float *g = tensor_of(grown, gn, &ng), *b = tensor_of(base, bn, &nb);
        const int zeroed = copy && (i == 4 || i == 10);
        if (!g || !b || ng != nb) return 0;
        if (zeroed ? !all_zero(g, ng) : memcmp(g, b, ng * sizeof *g) != 0) return 0;
    }
    return 1;
}

/* Block expansion: the grown model's added layers copy the one before
 * them with zero output projections, so it computes the base's logits
 * exactly; its gradient is right and a step moves the zeros. */
static void test_grown_from_gguf(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/grow.gguf", tmpdir);
    ASSERT(write_base(path, "Q8_0", 1) == HX_OK);
    hx_trainer *base = NULL, *grown = NULL, *one = NULL, *bad = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_gguf(path, NULL, 1, &base, &err) == HX_OK);
    ASSERT(hx_trainer_new_grown(path, 2, 1, &grown, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_hparams(grown)->n_layer, 4);
    EXPECT(layer_is(grown, 0, base, 0, 0) && layer_is(grown, 1, base, 0, 1));
    EXPECT(layer_is(grown, 2, base, 1, 0) && layer_is(grown, 3, base, 1, 1));
    /* one added layer of two goes after the last */
    ASSERT(hx_trainer_new_grown(path, 1, 1, &one, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_hparams(one)->n_layer, 3);
    EXPECT(layer_is(one, 1, base, 1, 0) && layer_is(one, 2, base, 1, 1));
    hx_batch b = make_batch(32);
    float lb[14 * 32], lg[14 * 32];
    double sb = 0, sg = 0;
    int nb = 0, ng = 0;
    ASSERT(hx_trainer_forward(base, &b, lb, &sb, &nb, &err) == HX_OK);
    ASSERT(hx_trainer_forward(grown, &b, lg, &sg, &ng, &err) == HX_OK);
    EXPECT(!memcmp(lb, lg, sizeof lb) && sb == sg && nb == ng);
    const char *wn = "-";
    const double dir = check_directions(grown, &b, &wn);
    printf("#   grown 2 -> 4 layers: logits equal the base's; worst directional error "
           "%.2e of ||g|| (%s)\n", dir, wn);
    EXPECT(dir < 1e-3);
    /* the step moves the added layer's output projection off zero */
    hx_opt_params o = hx_opt_default_params();
    hx_trainer_zero_grad(grown);
    ASSERT(hx_trainer_grad(grown, &b, ng, &sg, &err) == HX_OK);
    ASSERT(hx_trainer_step(grown, &o, NULL) == HX_OK);
    size_t n = 0;
    const float *wo = tensor_of(grown, "blk.1.attn_output.weight", &n);
    EXPECT(wo && n == 32 * 32 && !all_zero(wo, n));
    /* more layers than the base has, or a MoE base: refused */
    EXPECT(hx_trainer_new_grown(path, 3, 1, &bad, &err) == HX_ERR_INVALID && !bad);
    EXPECT(strstr(err.msg, "from 0 to the base's 2") != NULL);
    snprintf(path, sizeof path, "%s/grow-moe.gguf", tmpdir);
    ASSERT(write_model(path, "F32", 1, 1) == HX_OK);
    EXPECT(hx_trainer_new_grown(path, 1, 1, &bad, &err) == HX_ERR_UNSUPPORTED && !bad);
    unlink(path);
    snprintf(path, sizeof path, "%s/grow.gguf", tmpdir);
    unlink(path);
    hx_trainer_free(base);
    hx_trainer_free(grown);
    hx_trainer_free(one);
}

static void test_lora_vs_full_f32(void) { lora_vs_full("F32"); }
static void test_lora_vs_full_q8_0(void) { lora_vs_full("Q8_0"); }

static void test_lora_f32(void) { lora_check("F32"); }
static void test_lora_q8_0(void) { lora_check("Q8_0"); }
static void test_lora_moe_f32(void) { lora_check_arch("F32", 1); }

/* A MoE base: full training and LoRA on its experts or router are refused,
 * saying what is offered. */
static void test_moe_refusals(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/moe-refuse.gguf", tmpdir);
    ASSERT(write_model(path, "F32", 1, 1) == HX_OK);
    hx_trainer *tr = NULL;
    hx_err err = {0};
    EXPECT_EQ_INT(hx_trainer_new_gguf(path, NULL, 1, &tr, &err), HX_ERR_UNSUPPORTED);
    EXPECT(!tr && strstr(err.msg, "LoRA"));
    hx_lora_params lp = hx_lora_default_params();
    lp.targets = HX_LORA_Q | HX_LORA_UP;
    EXPECT_EQ_INT(hx_trainer_new_gguf(path, &lp, 1, &tr, &err), HX_ERR_UNSUPPORTED);
    EXPECT(!tr && strstr(err.msg, "attention (q, k, v, o)"));
    lp.targets = HX_LORA_Q | HX_LORA_V; /* control */
    EXPECT_EQ_INT(hx_trainer_new_gguf(path, &lp, 1, &tr, &err), HX_OK);
    hx_trainer_free(tr);
    unlink(path);
}

/* Logits of the training forward vs hx_decode (F32 KV cache). */
static double logits_nmse(const char *path, const hx_lora_params *lp)
{
    hx_err err = {0};
    hx_trainer *tr = NULL;
    if (hx_trainer_new_gguf(path, lp, 2, &tr, &err)) return -1;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_model *m = NULL;
    hx_ctx *ctx = NULL;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.kv_f32 = 1;
    cp.n_ctx = 64;
    cp.n_threads = 2;
    double worst = -1;
    enum { N = 20 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 7 + 3) % 32;
    float *got = malloc((size_t)N * 32 * sizeof(float));
    hx_batch b = {.n_seq = 1, .n_tok = N, .tokens = ids};
    if (!hx_model_load(path, &mp, &m, &err) && !hx_ctx_new(m, &cp, &ctx, &err) &&
        !hx_decode(ctx, ids, N, 1) &&
        !hx_trainer_forward(tr, &b, got, NULL, NULL, &err)) {
        worst = 0;
        for (int i = 0; i < N; i++) {
            double e = test_nmse(hx_ctx_logits(ctx, i), got + (size_t)i * 32, 32);
            if (!(e <= worst)) worst = e;
        }
    }
    free(got);
    hx_ctx_free(ctx);
    hx_model_free(m);
    hx_trainer_free(tr);
    return worst;
}

/* tied 2: a qwen3moe base (tied), LoRA on its attention */
static void test_logits_match_decode(void)
{
    char path[512];
    const char *ft[2] = {"F32", "Q8_0"};
    for (int tied = 0; tied < 3; tied++)
        for (int f = 0; f < 2; f++) {
            const int moe = tied == 2;
            snprintf(path, sizeof path, "%s/dec-%s-%d.gguf", tmpdir, ft[f], tied);
            ASSERT(write_model(path, ft[f], tied > 0, moe) == HX_OK);
            /* full mode dequantizes the base; LoRA with B = 0 keeps it */
            hx_lora_params lp = hx_lora_default_params();
            lp.targets = moe ? HX_LORA_Q | HX_LORA_K | HX_LORA_V | HX_LORA_O : HX_LORA_ALL;
            double full = f == 0 && !moe ? logits_nmse(path, NULL) : 0;
            double lora = logits_nmse(path, &lp);
            if (f == 0 && !moe)
                printf("#   %s tied %d: nmse full %.2e, lora(B=0) %.2e\n", ft[f],
                       tied > 0, full, lora);
            else if (f == 0)
                printf("#   qwen3moe %s: nmse lora(B=0) %.2e\n", ft[f], lora);
            else
                printf("#   %s%s tied %d: nmse lora(B=0) %.2e (8-bit activations "
                       "in hx_decode)\n", moe ? "qwen3moe " : "", ft[f], tied > 0, lora);
            EXPECT(full >= 0 && full < 1e-10);
            /* Q8_0: hx_decode quantizes activations to 8 bits before each
             * matmul (as llama.cpp), training multiplies by the dequantized
             * weight in F32, so only closeness is expected */
            EXPECT(lora >= 0 && lora < (f == 0 ? 1e-10 : 1e-3));
            unlink(path);
        }
}

/* Packed documents: the logits of [A | B] in one sequence with doc ids
 * equal those of A and B run alone (mask and positions restart). */
static void test_packing(void)
{
    hx_train_config c = tiny();
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_scratch(&c, 3, 2, &tr, &err) == HX_OK);
    randomize(tr, 0.8f);
    const int32_t tok[9] = {3, 9, 27, 1, 5, 5, 30, 2, 11};
    const int32_t doc[9] = {0, 0, 0, 0, 7, 7, 7, 7, 7};
    float packed[9 * 32], alone[9 * 32];
    hx_batch b = {.n_seq = 1, .n_tok = 9, .tokens = tok, .doc = doc};
    ASSERT(hx_trainer_forward(tr, &b, packed, NULL, NULL, &err) == HX_OK);
    hx_batch a = {.n_seq = 1, .n_tok = 4, .tokens = tok}, bb = {.n_seq = 1, .n_tok = 5, .tokens = tok + 4};
    ASSERT(hx_trainer_forward(tr, &a, alone, NULL, NULL, &err) == HX_OK);
    ASSERT(hx_trainer_forward(tr, &bb, alone + 4 * 32, NULL, NULL, &err) == HX_OK);
    EXPECT(memcmp(packed, alone, sizeof packed) == 0);
    /* without doc ids the second document sees the first */
    b.doc = NULL;
    ASSERT(hx_trainer_forward(tr, &b, packed, NULL, NULL, &err) == HX_OK);
    EXPECT(memcmp(packed, alone, 4 * 32 * sizeof(float)) == 0);
    EXPECT(memcmp(packed + 4 * 32, alone + 4 * 32, 5 * 32 * sizeof(float)) != 0);
    hx_trainer_free(tr);
}

/* A sequence longer than the context (16) that packs documents shorter
 * than it: each document's logits are those it has alone; one position
 * at the context is refused. */
static void test_packing_past_context(void)
{
    hx_train_config c = tiny();
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_scratch(&c, 3, 2, &tr, &err) == HX_OK);
    randomize(tr, 0.8f);
    enum { T = 40 };
    int32_t tok[T], doc[T];
    for (int i = 0; i < T; i++) {
        tok[i] = (i * 7 + 3) % 32;
        doc[i] = i < 15 ? 0 : i < 31 ? 1 : 2; /* 15, 16 and 9 tokens */
    }
    static float packed[T * 32], alone[T * 32];
    hx_batch b = {.n_seq = 1, .n_tok = T, .tokens = tok, .targets = tok, .doc = doc};
    ASSERT(hx_trainer_forward(tr, &b, packed, NULL, NULL, &err) == HX_OK);
    const int at[4] = {0, 15, 31, T};
    for (int k = 0; k < 3; k++) {
        hx_batch a = {.n_seq = 1, .n_tok = at[k + 1] - at[k], .tokens = tok + at[k]};
        ASSERT(hx_trainer_forward(tr, &a, alone + at[k] * 32, NULL, NULL, &err) == HX_OK);
    }
    EXPECT(memcmp(packed, alone, sizeof packed) == 0);
    double loss = 0;
    hx_trainer_zero_grad(tr);
    EXPECT_EQ_INT(hx_trainer_grad(tr, &b, 1.0, &loss, &err), HX_OK);
    doc[15] = doc[16] = 0; /* the first document now runs to position 16 */
    EXPECT_EQ_INT(hx_trainer_forward(tr, &b, NULL, NULL, NULL, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "position 16") != NULL);
    hx_trainer_free(tr);
}

/* A shared prefix: [P A | B'] where B' (B without its copy of P) sees P
 * through pre gives B's logits and, masks aside, the gradients of [P A]
 * and [P B] run apart. Head dims 8 (scalar attention) and 64 (the blocked
 * AVX-512 kernel where the CPU has it; P spans a partial 32-key tile). */
static void shared_prefix_case(int head_dim)
{
    enum { NP = 37, NA = 9, NB = 11, T = NP + NA + NB };
    hx_train_config c = tiny();
    c.n_ctx = 64, c.head_dim = head_dim, c.n_embd = 2 * head_dim, c.n_ff = 48;
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_scratch(&c, 5, 2, &tr, &err) == HX_OK);
    randomize(tr, 0.6f);
    int32_t pa[NP + NA + 1], pb[NP + NB + 1], sh[T + 1], doc[T], pre[T];
    uint8_t ma[NP + NA], mb[NP + NB], ms[T];
    uint64_t r = 11;
    for (int i = 0; i < NP + NB + 1; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        pb[i] = (int32_t)((r >> 33) % 32);
        if (i < NP + NA + 1) pa[i] = i < NP ? pb[i] : (int32_t)((r >> 45) % 32);
    }
    for (int i = 0; i < NP + NA; i++) ma[i] = i >= NP - 1 && i % 3 != 1;
    for (int i = 0; i < NP + NB; i++) mb[i] = i >= NP && i % 4 != 2; /* P-1's target lost */
    ma[NP + NA - 1] = 0; /* the end of a packed document predicts nothing */
    for (int i = 0; i < T; i++) {
        const int in_a = i < NP + NA;
        sh[i] = in_a ? pa[i] : pb[i - NA];
        ms[i] = in_a ? ma[i] : mb[i - NA];
        doc[i] = in_a ? 0 : 1;
        pre[i] = in_a ? 0 : NP;
    }
    int32_t tgs[T];
    for (int i = 0; i < T; i++) tgs[i] = i == NP + NA - 1 ? 0 : (i < NP + NA ? pa[i + 1] : pb[i - NA + 1]);
    ms[NP + NA - 1] = 0;
    hx_batch bs = {.n_seq = 1, .n_tok = T, .tokens = sh, .targets = tgs, .mask = ms, .doc = doc, .pre = pre};
    hx_batch ba = {.n_seq = 1, .n_tok = NP + NA, .tokens = pa, .targets = pa + 1, .mask = ma};
    hx_batch bb = {.n_seq = 1, .n_tok = NP + NB, .tokens = pb, .targets = pb + 1, .mask = mb};
    static float lsh[T * 32], lb[(NP + NB) * 32];
    ASSERT(hx_trainer_forward(tr, &bs, lsh, NULL, NULL, &err) == HX_OK);
    ASSERT(hx_trainer_forward(tr, &bb, lb, NULL, NULL, &err) == HX_OK);
    EXPECT(test_nmse(lsh + (NP + NA) * 32, lb + NP * 32, NB * 32) < 1e-10);
    const size_t n = hx_trainer_n_params(tr);
    float *g1 = malloc(n * sizeof *g1);
    ASSERT(g1);
    double l1 = 0, l2 = 0, l3 = 0;
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, &bs, 1.0, &l1, &err) == HX_OK);
    memcpy(g1, hx_trainer_grads(tr), n * sizeof *g1);
    hx_trainer_zero_grad(tr);
    ASSERT(hx_trainer_grad(tr, &ba, 1.0, &l2, &err) == HX_OK);
    ASSERT(hx_trainer_grad(tr, &bb, 1.0, &l3, &err) == HX_OK);
    /* float sums in another order (the prefix's keys are a tile of their own) */
    EXPECT(fabs(l1 - (l2 + l3)) < 1e-6 * fabs(l1));
    EXPECT(test_nmse(g1, hx_trainer_grads(tr), n) < 1e-10);
    free(g1);
    hx_trainer_free(tr);
}

static void test_shared_prefix(void)
{
    shared_prefix_case(8);
    shared_prefix_case(64);
}

static void test_bad_batch(void)
{
    hx_train_config c = tiny();
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_scratch(&c, 3, 1, &tr, &err) == HX_OK);
    int32_t t[4] = {1, 2, 99, 3};
    hx_batch b = {.n_seq = 1, .n_tok = 4, .tokens = t, .targets = t};
    EXPECT_EQ_INT(hx_trainer_forward(tr, &b, NULL, NULL, NULL, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "vocabulary") != NULL);
    int32_t t40[40] = {0};
    hx_batch b2 = {.n_seq = 1, .n_tok = 40, .tokens = t40, .targets = t40};
    EXPECT_EQ_INT(hx_trainer_forward(tr, &b2, NULL, NULL, NULL, &err), HX_ERR_RANGE);
    hx_trainer_free(tr);
    c.n_head_kv = 3;
    EXPECT_EQ_INT(hx_trainer_new_scratch(&c, 3, 1, &tr, &err), HX_ERR_INVALID);
    EXPECT(tr == NULL);
    EXPECT(hx_trainer_new_gguf("/nonexistent.gguf", NULL, 1, &tr, &err) != HX_OK);
    EXPECT(tr == NULL);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_grad.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_full_model);
    RUN(test_untied_from_gguf);
    RUN(test_grown_from_gguf);
    RUN(test_lora_f32);
    RUN(test_lora_q8_0);
    RUN(test_lora_moe_f32);
    RUN(test_moe_refusals);
    RUN(test_lora_vs_full_f32);
    RUN(test_lora_vs_full_q8_0);
    RUN(test_logits_match_decode);
    RUN(test_packing);
    RUN(test_packing_past_context);
    RUN(test_shared_prefix);
    RUN(test_bad_batch);
    rmdir(tmpdir);
    return test_summary();
}
