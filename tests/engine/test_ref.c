/* test_ref.c: checks the llama.cpp reference harness itself (tests/ref/ref.h
 * and hxref) on stories260K; skips with the reason when it is absent. */
#include <math.h>
#include <stdint.h>

#include "engine/engine.h"
#include "test.h"
#include "ref/ref.h"

static const char *g_model;

/* Skips unless both the reference and the model are there. */
static int have_ref(void)
{
    char why[512];
    if (!ref_available(why, sizeof why)) {
        test_skip("%s", why);
        return 0;
    }
    g_model = test_shared_file("models/stories260K.gguf");
    return g_model != NULL;
}

static void test_ref_tokenize(void)
{
    int32_t ids[32], ids_bos[32];
    if (!have_ref()) return;
    int n = ref_tokenize(g_model, "Once upon a time", 16, 0, 0, ids, 32);
    int nb = ref_tokenize(g_model, "Once upon a time", 16, 0, 1, ids_bos, 32);
    if (n < 0 || nb < 0) test_fail_at(__FILE__, __LINE__, "%s", ref_error());
    ASSERT(n > 0 && n <= 16);
    EXPECT_EQ_INT(nb, n + 1);
    EXPECT_EQ_INT(ids_bos[0], 1); /* BOS of the llama vocabulary */
    for (int i = 0; i < n; i++) {
        EXPECT(ids[i] > 2 && ids[i] < 512);
        EXPECT_EQ_INT(ids_bos[i + 1], ids[i]);
    }
    /* Round trip through detok (llama.cpp drops the space SentencePiece
     * put before the first word). */
    char *text = NULL;
    size_t len = 0;
    ASSERT(ref_detok(g_model, ids, n, 0, &text, &len) == 0);
    EXPECT_STR_EQ(text, "Once upon a time");
    free(text);
}

static void test_ref_generate(void)
{
    int32_t prompt[32], out[20], out2[20];
    if (!have_ref()) return;
    int n = ref_tokenize(g_model, "Once upon a time", 16, 0, 1, prompt, 32);
    ASSERT(n > 1);
    int k = ref_generate(g_model, prompt, n, 20, out);
    if (k < 0) test_fail_at(__FILE__, __LINE__, "%s", ref_error());
    EXPECT_EQ_INT(k, 20);
    for (int i = 0; i < k; i++) EXPECT(out[i] >= 0 && out[i] < 512);
    /* Greedy is deterministic. */
    EXPECT_EQ_INT(ref_generate(g_model, prompt, n, 20, out2), 20);
    EXPECT(memcmp(out, out2, sizeof out) == 0);
}

/* Logits are finite, and greedy decoding agrees with the argmax of the
 * teacher-forced logits of prompt + generated tokens. */
static void test_ref_logits(void)
{
    int32_t seq[64], gen[8];
    float *logits = NULL;
    int n_vocab = 0;
    if (!have_ref()) return;
    int n = ref_tokenize(g_model, "Once upon a time", 16, 0, 1, seq, 32);
    ASSERT(n > 1 && ref_generate(g_model, seq, n, 8, gen) == 8);
    memcpy(seq + n, gen, sizeof gen);
    if (ref_logits(g_model, seq, n + 8, &logits, &n_vocab) != 0)
        test_fail_at(__FILE__, __LINE__, "%s", ref_error());
    ASSERT(logits);
    EXPECT_EQ_INT(n_vocab, 512);
    int finite = 1;
    for (int i = 0; i < (n + 8) * n_vocab; i++) finite &= isfinite(logits[i]) != 0;
    EXPECT(finite);
    for (int p = n - 1; p < n + 7; p++) {
        const float *row = logits + (size_t)p * n_vocab;
        int best = 0;
        for (int j = 1; j < n_vocab; j++)
            if (row[j] > row[best]) best = j;
        EXPECT_EQ_INT(best, seq[p + 1]);
    }
    free(logits);
}

static void test_ref_errors(void)
{
    int32_t ids[4] = {1, 99999};
    int32_t out[4];
    if (!have_ref()) return;
    EXPECT_EQ_INT(ref_generate(g_model, ids, 2, 2, out), -1);
    EXPECT(strstr(ref_error(), "token id 99999 out of range") != NULL);
    EXPECT_EQ_INT(ref_generate("/nonexistent.gguf", ids, 1, 2, out), -1);
    EXPECT(strstr(ref_error(), "cannot load model") != NULL);
}

/* Rewrites stories260K with Hearth's GGUF writer (metadata copied, tensors
 * re-added, alignment 32 or 64) into path. */
static int rewrite_model(const char *src, const char *path, size_t align)
{
    hx_gguf *g = NULL;
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_err err = {0};
    int rc = hx_gguf_open(src, &g, &err);
    if (!rc) rc = hx_gguf_copy_kv(w, g);
    if (align != 32) hx_gguf_writer_set_alignment(w, align);
    for (int64_t i = 0; !rc && i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        rc = hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne,
                                t->data, NULL, NULL);
    }
    if (!rc) rc = hx_gguf_writer_write(w, path, &err);
    if (rc) printf("# rewrite: %s\n", err.msg);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    return rc;
}

/* llama.cpp reads files written by Hearth's writer and computes the same
 * logits from them as from the original, bit for bit. */
static void test_ref_reads_our_writer(void)
{
    int32_t seq[32];
    float *a = NULL, *b = NULL;
    int nva = 0, nvb = 0;
    char path[512];
    if (!have_ref()) return;
    int n = ref_tokenize(g_model, "Once upon a time", 16, 0, 1, seq, 32);
    ASSERT(n > 1 && ref_logits(g_model, seq, n, &a, &nva) == 0);
    for (size_t align = 32; align <= 64; align *= 2) {
        snprintf(path, sizeof path, "%s/hx_test_ref_%ld_%zu.gguf",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(),
                 align);
        ASSERT(rewrite_model(g_model, path, align) == 0);
        if (ref_logits(path, seq, n, &b, &nvb) != 0)
            test_fail_at(__FILE__, __LINE__, "align %zu: %s", align, ref_error());
        unlink(path);
        ASSERT(b);
        EXPECT_EQ_INT(nvb, nva);
        EXPECT(memcmp(a, b, sizeof *a * (size_t)n * (size_t)nva) == 0);
        free(b);
        b = NULL;
    }
    free(a);
}

/* A LoRA adapter for stories260K's blk.0.attn_q.weight (64 x 64), rank 4,
 * in llama.cpp's layout: lora_a [64 in, 4], lora_b [4, 64 out]. */
static int write_adapter(const char *path, float b_value)
{
    static float a[64 * 4], b[4 * 64];
    int64_t ne_a[2] = {64, 4}, ne_b[2] = {4, 64};
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_err err = {0};
    for (int i = 0; i < 256; i++) {
        a[i] = (float)((i * 37) % 17 - 8) / 16.0f;
        b[i] = b_value * (float)((i * 11) % 7 - 3);
    }
    hx_gguf_set_str(w, "general.architecture", "llama");
    hx_gguf_set_str(w, "general.type", "adapter");
    hx_gguf_set_str(w, "adapter.type", "lora");
    hx_gguf_set_f32(w, "adapter.lora.alpha", 4.0f);
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight.lora_a", HX_TYPE_F32, 2, ne_a, a, NULL, NULL);
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight.lora_b", HX_TYPE_F32, 2, ne_b, b, NULL, NULL);
    int rc = hx_gguf_writer_write(w, path, &err);
    hx_gguf_writer_free(w);
    return rc;
}

/* The lora subcommand: scale 0 changes nothing, a real delta changes the
 * logits (and they stay finite). */
static void test_ref_lora(void)
{
    int32_t seq[32];
    float *base = NULL, *zero = NULL, *on = NULL;
    int nv = 0, nv0 = 0, nv1 = 0;
    char path[512];
    if (!have_ref()) return;
    snprintf(path, sizeof path, "%s/hx_test_ref_lora_%ld.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    ASSERT(write_adapter(path, 0.05f) == 0);
    int n = ref_tokenize(g_model, "Once upon a time", 16, 0, 1, seq, 32);
    ASSERT(n > 1 && ref_logits(g_model, seq, n, &base, &nv) == 0);
    if (ref_lora_logits(g_model, path, 0.0f, seq, n, &zero, &nv0) != 0 ||
        ref_lora_logits(g_model, path, 1.0f, seq, n, &on, &nv1) != 0)
        test_fail_at(__FILE__, __LINE__, "%s", ref_error());
    unlink(path);
    ASSERT(base && zero && on);
    EXPECT_EQ_INT(nv0, nv);
    EXPECT_EQ_INT(nv1, nv);
    size_t count = (size_t)n * (size_t)nv;
    EXPECT(memcmp(base, zero, count * sizeof *base) == 0);
    double diff = 0;
    for (size_t i = 0; i < count; i++) diff += fabs((double)on[i] - base[i]);
    EXPECT(diff > 1e-3);
    EXPECT(isfinite(diff));
    free(base);
    free(zero);
    free(on);
}

int main(void)
{
    RUN(test_ref_tokenize);
    RUN(test_ref_generate);
    RUN(test_ref_logits);
    RUN(test_ref_errors);
    RUN(test_ref_reads_our_writer);
    RUN(test_ref_lora);
    return test_summary();
}
