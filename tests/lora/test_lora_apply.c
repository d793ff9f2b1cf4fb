/* test_lora_apply.c: adapters Hearth trained (F32 and Q8_0 bases, QLoRA
 * style; all layers or the later ones only; a qwen3moe base's attention)
 * applied by the engine without merging: the logits equal the trainer's
 * forward and llama.cpp's with the same adapter; the adapter records its
 * base and is refused on another one. */
#include <stdlib.h>
#include <unistd.h>

#include "lora/lora.h"
#include "ref/ref.h"
#include "test.h"
#include "modelfile/modelfile.h"

#define N 10
#define DN 240
static char tmpdir[256];
static int32_t data_tok[DN];

static int g_moe; /* the bases are qwen3moe (4 experts of 64, 2 used) */

static int make_base(const char *path, const char *ftype, uint64_t seed,
                     const char *vocab)
{
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.arch = g_moe ? "qwen3moe" : "qwen3";
    mp.n_expert = 4, mp.n_expert_used = 2, mp.n_ff_exp = 64;
    mp.vocab_path = vocab;
    mp.ftype = ftype;
    mp.seed = seed;
    mp.n_layer = 2, mp.n_embd = 32, mp.n_head = 2, mp.n_head_kv = 1;
    mp.head_dim = 16, mp.n_ff = 64, mp.n_ctx = 64, mp.tied_output = 1;
    hx_err err = {0};
    int rc = hx_mkmodel_write(&mp, path, &err);
    if (rc) printf("# mkmodel: %s\n", err.msg);
    return rc;
}

/* A few steps of LoRA training over base (layers first.. adapted),
 * written to out. */
static hx_trainer *train(const char *base, const char *out, int first)
{
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = 4;
    lp.alpha = 8;
    lp.targets = g_moe ? HX_LORA_Q | HX_LORA_K | HX_LORA_V | HX_LORA_O : HX_LORA_ALL;
    lp.first_layer = first;
    hx_trainer *tr = NULL;
    hx_err err = {0};
    if (hx_trainer_new_gguf(base, &lp, 2, &tr, &err)) {
        printf("# trainer: %s\n", err.msg);
        return NULL;
    }
    uint64_t x = 99;
    for (int i = 0; i < DN; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        data_tok[i] = (int32_t)((x >> 33) % 2000) * 61 + 5;
    }
    hx_train_data d = {.tokens = data_tok, .n = DN};
    hx_train_params p = hx_train_default_params();
    p.opt.n_steps = 4;
    p.opt.lr = 2e-2f; /* B moves well away from 0 */
    p.seq_len = 16;
    p.n_seq = 2;
    if (hx_train_run(tr, &d, &p, &err) || hx_trainer_write_gguf(tr, out, NULL, &err)) {
        printf("# train: %s\n", err.msg);
        hx_trainer_free(tr);
        return NULL;
    }
    return tr;
}

/* Hearth's logits of data_tok[0..N) with the adapter at scale. */
static float *hearth_logits(hx_model *m, hx_adapter *a, float scale)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 64;
    cp.kv_f32 = 1;
    cp.n_threads = 2;
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err)) return NULL;
    const int V = hx_model_hparams(m)->n_vocab;
    float *out = NULL;
    if (!hx_ctx_set_adapters(c, &a, &scale, a ? 1 : 0) && !hx_decode(c, data_tok, N, 1)) {
        out = malloc((size_t)N * V * sizeof(float));
        for (int i = 0; i < N; i++)
            memcpy(out + (size_t)i * V, hx_ctx_logits(c, i), (size_t)V * sizeof(float));
    }
    hx_ctx_free(c);
    return out;
}

static double worst(const float *a, const float *b, int V)
{
    double w = 0;
    for (int i = 0; i < N; i++) {
        double e = test_nmse(a + (size_t)i * V, b + (size_t)i * V, (size_t)V);
        if (!(e <= w)) w = e;
    }
    return w;
}

static void trained_on(const char *ftype, double tol, int first)
{
    char why[256];
    setenv("HXREF_KV", "f32", 1);
    setenv("HXREF_FLASH", "0", 1);
    setenv("HXREF_THREADS", "1", 0);
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    char base[512], other[512], ad[512];
    snprintf(base, sizeof base, "%s/base-%s.gguf", tmpdir, ftype);
    snprintf(other, sizeof other, "%s/other-%s.gguf", tmpdir, ftype);
    snprintf(ad, sizeof ad, "%s/ad-%s.gguf", tmpdir, ftype);
    ASSERT(make_base(base, ftype, 1, vocab) == 0 && make_base(other, ftype, 2, vocab) == 0);
    hx_trainer *tr = train(base, ad, first);
    ASSERT(tr);
    hx_model *m = NULL, *mo = NULL;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_err err = {0};
    ASSERT(hx_model_load(base, &mp, &m, &err) == HX_OK);
    ASSERT(hx_model_load(other, &mp, &mo, &err) == HX_OK);
    hx_adapter *a = NULL;
    ASSERT(hx_adapter_load(m, ad, &a, &err) == HX_OK);
    char id[65];
    hx_model_identity(m, id);
    EXPECT_STR_EQ(hx_adapter_get_info(a)->base_id, id);
    EXPECT_EQ_INT(hx_adapter_get_info(a)->n_pairs, (g_moe ? 4 : 7) * (2 - first));
    EXPECT(hx_adapter_get_info(a)->alpha == 8.0f);
    const int V = hx_model_hparams(m)->n_vocab;
    float *mine = malloc((size_t)N * V * sizeof(float));
    hx_batch b = {.n_seq = 1, .n_tok = N, .tokens = data_tok};
    ASSERT(hx_trainer_forward(tr, &b, mine, NULL, NULL, &err) == HX_OK);
    float *h1 = hearth_logits(m, a, 1.0f), *h05 = hearth_logits(m, a, 0.5f);
    float *plain = hearth_logits(m, NULL, 0.0f), *r1 = NULL, *r05 = NULL;
    int nv = 0;
    ASSERT(h1 && h05 && plain);
    ASSERT(ref_lora_logits(base, ad, 1.0f, data_tok, N, &r1, &nv) == 0 && nv == V);
    ASSERT(ref_lora_logits(base, ad, 0.5f, data_tok, N, &r05, &nv) == 0 && nv == V);
    double e1 = worst(r1, h1, V), e05 = worst(r05, h05, V);
    double et = worst(mine, h1, V), moved = worst(plain, h1, V);
    printf("# trained on %s%s: Hearth vs llama.cpp nmse %.2e (scale 1), %.2e "
           "(scale 0.5); vs the trainer %.2e; adapter moves logits %.2e\n",
           g_moe ? "qwen3moe " : "", ftype, e1, e05, et, moved);
    EXPECT(e1 <= tol && e05 <= tol);
    EXPECT(et <= tol);
    EXPECT(moved > 1e-4);
    /* another base of the same shapes: refused by identity */
    hx_adapter *wrong = NULL;
    EXPECT(hx_adapter_load(mo, ad, &wrong, &err) == HX_ERR_INVALID);
    EXPECT(!wrong && strstr(err.msg, "another base model"));
    free(mine), free(h1), free(h05), free(plain), free(r1), free(r05);
    hx_adapter_free(a);
    hx_model_free(m), hx_model_free(mo);
    hx_trainer_free(tr);
    unlink(base), unlink(other), unlink(ad);
}

static void test_trained_on_f32(void) { trained_on("F32", 1e-9, 0); }
static void test_trained_on_q8_0(void) { trained_on("Q8_0", 1e-3, 0); }
/* the second layer alone: the adapter holds its tensors only */
static void test_trained_later_layer(void) { trained_on("Q8_0", 1e-3, 1); }
/* a qwen3moe base: attention adapted, the router and experts frozen (the
 * tolerances of the dense bases) */
static void test_trained_on_moe(void)
{
    g_moe = 1;
    trained_on("F32", 1e-9, 0);
    trained_on("Q8_0", 1e-3, 0);
    g_moe = 0;
}

/* A first layer the model does not have is refused. */
static void test_first_layer_range(void)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    char base[512];
    snprintf(base, sizeof base, "%s/range.gguf", tmpdir);
    ASSERT(make_base(base, "F32", 1, vocab) == 0);
    hx_lora_params lp = hx_lora_default_params();
    hx_trainer *tr = NULL;
    hx_err err = {0};
    lp.first_layer = 2;
    EXPECT_EQ_INT(hx_trainer_new_gguf(base, &lp, 1, &tr, &err), HX_ERR_INVALID);
    EXPECT(!tr && strstr(err.msg, "first layer 2 (of 2)"));
    lp.first_layer = -1;
    EXPECT_EQ_INT(hx_trainer_new_gguf(base, &lp, 1, &tr, &err), HX_ERR_INVALID);
    unlink(base);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_lora_apply.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_trained_on_f32);
    RUN(test_trained_on_q8_0);
    RUN(test_trained_later_layer);
    RUN(test_trained_on_moe);
    RUN(test_first_layer_range);
    rmdir(tmpdir);
    return test_summary();
}
