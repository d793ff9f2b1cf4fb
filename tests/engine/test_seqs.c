/* test_seqs.c: several sequences in one forward pass (hx_decode_seqs): each
 * sequence's logits equal, bit for bit, those of decoding it alone, for
 * dense and MoE models, F16, Q8 and F32 caches, with the weight cache
 * and with a KV cache spilling to disk;
 * sequences joining and leaving the batch; the refusals. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "small_model.h"
#include "test.h"

static char g_dir[256];

/* The small model of arch (small_model.h). */
static hx_model *load_model(const char *arch, const char *name)
{
    return small_model(g_dir, arch, name, 8192, 1024);
}

static hx_ctx_params params(int kv, size_t max_bytes)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 640;
    cp.n_batch = 64;
    cp.n_threads = 2;
    cp.kv_q8 = kv == 1;
    cp.kv_f32 = kv == 2;
    cp.max_bytes = max_bytes;
    return cp;
}

/* The sequences: prompt lengths (one past 512 cached cells, where a
 * one-token pass splits its keys per thread), tokens generated, and the
 * step at which each joins the batch: the first leaves early, the last
 * two join late. */
#define N_SEQ 5
static const int k_prompt[N_SEQ] = {7, 150, 520, 33, 64};
static const int k_gen[N_SEQ] = {3, 9, 8, 6, 5};
static const int k_join[N_SEQ] = {0, 0, 0, 2, 4};
#define MAX_GEN 9

static void prompt_of(int s, int nv, int32_t *tok)
{
    for (int i = 0; i < k_prompt[s]; i++) tok[i] = (int32_t)((i * 37 + 11 * s + 5) % nv);
}

static int32_t argmax(const float *lg, int nv)
{
    int32_t best = 0;
    for (int i = 1; i < nv; i++) best = lg[i] > lg[best] ? i : best;
    return best;
}

/* Sequence s alone: its prompt, then greedy tokens one per hx_decode;
 * the logits of each step into out (k_gen[s] rows). */
static int run_alone(hx_model *m, hx_ctx_params cp, int s, float *out)
{
    const int nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[600];
    prompt_of(s, nv, tok);
    hx_ctx *c;
    if (hx_ctx_new(m, &cp, &c, NULL)) return -1;
    int rc = hx_decode(c, tok, k_prompt[s], 0);
    for (int g = 0; !rc && g < k_gen[s]; g++) {
        const float *lg = hx_ctx_logits(c, -1);
        memcpy(out + (size_t)g * nv, lg, (size_t)nv * sizeof(float));
        int32_t next = argmax(lg, nv);
        if (g + 1 < k_gen[s]) rc = hx_decode(c, &next, 1, 0);
    }
    if (rc) printf("# alone %d: %s\n", s, hx_ctx_errmsg(c));
    hx_ctx_free(c);
    return rc;
}

/* Every sequence together: at each step the ones that have joined and
 * not finished advance in one hx_decode_seqs; one joining prefills its
 * prompt alone first. Logits rows into out[s]. */
static int run_together(hx_model *m, hx_ctx_params cp, float **out)
{
    const int nv = hx_model_hparams(m)->n_vocab;
    hx_ctx *c[N_SEQ] = {0};
    int made[N_SEQ] = {0}, rc = 0;
    int32_t next[N_SEQ];
    for (int s = 0; s < N_SEQ && !rc; s++) rc = hx_ctx_new(m, &cp, &c[s], NULL);
    for (int step = 0; !rc && step < 20; step++) {
        hx_seq_step q[N_SEQ];
        int n = 0;
        for (int s = 0; s < N_SEQ && !rc; s++) {
            if (step < k_join[s] || made[s] >= k_gen[s]) continue;
            if (step == k_join[s]) {
                int32_t tok[600];
                prompt_of(s, nv, tok);
                rc = hx_decode(c[s], tok, k_prompt[s], 0);
            } else {
                q[n++] = (hx_seq_step){c[s], &next[s], 1, 0, -1};
            }
        }
        if (!rc && n) rc = hx_decode_seqs(q, n);
        for (int s = 0; s < N_SEQ && !rc; s++) {
            if (step < k_join[s] || made[s] >= k_gen[s]) continue;
            const float *lg = hx_ctx_logits(c[s], -1);
            memcpy(out[s] + (size_t)made[s]++ * nv, lg, (size_t)nv * sizeof(float));
            next[s] = argmax(lg, nv);
        }
    }
    for (int s = 0; s < N_SEQ; s++) {
        if (rc && c[s]) printf("# together %d: %s\n", s, hx_ctx_errmsg(c[s]));
        if (!rc && made[s] != k_gen[s]) rc = -1;
        hx_ctx_free(c[s]);
    }
    return rc;
}

static void check_same(hx_model *m, hx_ctx_params cp, const char *what)
{
    const size_t nv = (size_t)hx_model_hparams(m)->n_vocab;
    float *ref[N_SEQ], *got[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        ref[s] = calloc(MAX_GEN * nv, sizeof(float));
        got[s] = calloc(MAX_GEN * nv, sizeof(float));
        ASSERT(ref[s] && got[s]);
        ASSERT(run_alone(m, cp, s, ref[s]) == 0);
    }
    ASSERT(run_together(m, cp, got) == 0);
    int same = 0;
    for (int s = 0; s < N_SEQ; s++) {
        int eq = memcmp(ref[s], got[s], (size_t)k_gen[s] * nv * sizeof(float)) == 0;
        if (!eq) printf("# %s: sequence %d differs\n", what, s);
        same += eq;
        free(ref[s]);
        free(got[s]);
    }
    EXPECT_EQ_INT(same, N_SEQ);
    printf("# %s: %d sequences the same\n", what, same);
}

/* A model checked with an F16, a Q8 and an F32 cache, under a cap below
 * its weights (the weight cache), and with a KV cache that spills. */
static void check_model(const char *arch, const char *name)
{
    hx_model *m = load_model(arch, name);
    ASSERT(m);
    char what[64];
    const char *kinds[] = {"f16", "q8", "f32"};
    for (int kv = 0; kv < 3; kv++) {
        snprintf(what, sizeof what, "%s %s", arch, kinds[kv]);
        check_same(m, params(kv, 0), what);
    }
    hx_ctx_params cp = params(0, 0);
    hx_ctx_mem mem;
    ASSERT(hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK);
    /* a third of the weights streamed, the whole KV cache kept */
    cp.max_bytes = mem.weights / 3 * 2 + mem.scratch + mem.kv_total + (1 << 16);
    ASSERT(hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK);
    EXPECT_EQ_INT(mem.streamed, 1);
    snprintf(what, sizeof what, "%s streamed", arch);
    check_same(m, cp, what);
    /* a KV cache of 3 pages, the rest spilled to a file */
    cp = params(0, 0);
    ASSERT(hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK);
    cp.kv_max_bytes = 3 * mem.kv_page;
    cp.kv_spill = 1;
    cp.kv_spill_dir = g_dir;
    snprintf(what, sizeof what, "%s spilled", arch);
    check_same(m, cp, what);
    hx_model_free(m);
}

static void test_dense(void) { check_model("qwen3", "dense.gguf"); }
static void test_moe(void) { check_model("qwen3moe", "moe.gguf"); }

/* A context of another cache type, the same context twice, a token
 * outside the vocabulary and a full context: each refused on its own with
 * its error, while the others run (and match running alone). */
static void test_refusals(void)
{
    hx_model *m = load_model("qwen3", "refuse.gguf");
    ASSERT(m);
    hx_ctx_params cp = params(0, 0), q8 = params(1, 0);
    hx_ctx *a, *b, *other;
    ASSERT(hx_ctx_new(m, &cp, &a, NULL) == HX_OK);
    ASSERT(hx_ctx_new(m, &cp, &b, NULL) == HX_OK);
    ASSERT(hx_ctx_new(m, &q8, &other, NULL) == HX_OK);
    int32_t t1 = 5, bad = 1 << 20;
    hx_seq_step q[4] = {{a, &t1, 1, 0, -1}, {other, &t1, 1, 0, -1}, {a, &t1, 1, 0, -1},
                        {b, &bad, 1, 0, -1}};
    EXPECT_EQ_INT(hx_decode_seqs(q, 4), HX_ERR_INVALID);
    EXPECT_EQ_INT(q[0].rc, HX_OK);
    EXPECT_EQ_INT(q[1].rc, HX_ERR_INVALID);
    EXPECT(strstr(hx_ctx_errmsg(other), "cache type") != NULL);
    EXPECT_EQ_INT(q[2].rc, HX_ERR_INVALID);
    EXPECT(strstr(hx_ctx_errmsg(a), "twice") != NULL);
    EXPECT_EQ_INT(q[3].rc, HX_ERR_RANGE);
    EXPECT_EQ_INT(hx_ctx_n_past(a), 1);
    EXPECT_EQ_INT(hx_ctx_n_past(other), 0);
    EXPECT_EQ_INT(hx_ctx_n_past(b), 0);
    /* a's logits as decoding alone */
    hx_ctx *ref;
    ASSERT(hx_ctx_new(m, &cp, &ref, NULL) == HX_OK);
    ASSERT(hx_decode(ref, &t1, 1, 0) == HX_OK);
    const size_t nv = (size_t)hx_model_hparams(m)->n_vocab;
    EXPECT(memcmp(hx_ctx_logits(ref, -1), hx_ctx_logits(a, -1), nv * sizeof(float)) == 0);
    EXPECT(hx_ctx_logits(b, -1) == NULL);
    /* a full context fails, the other goes on */
    int32_t many[64];
    for (int i = 0; i < 64; i++) many[i] = i;
    for (int i = 0; i < 10; i++) ASSERT(hx_decode(b, many, 64, 0) == HX_OK);
    int32_t two[2] = {1, 2};
    hx_seq_step f[2] = {{b, many, 64, 63, -1}, {a, two, 2, 0, -1}};
    EXPECT_EQ_INT(hx_decode_seqs(f, 2), HX_ERR_FULL);
    EXPECT_EQ_INT(f[1].rc, HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_past(a), 3);
    EXPECT(hx_ctx_logits(a, 1) != NULL);
    hx_ctx_free(a);
    hx_ctx_free(b);
    hx_ctx_free(other);
    hx_ctx_free(ref);
    hx_model_free(m);
}

/* The hook that hx_decode_rows goes to when set: here it decodes the
 * call as a sequence of its own. */
static int g_hooked;
static int hook(void *user, hx_ctx *c, const int32_t *tok, int n, int out_from)
{
    (void)user;
    g_hooked++;
    hx_seq_step q = {c, tok, n, out_from, -1};
    return hx_decode_seqs(&q, 1);
}

/* hx_decode through the hook: the same logits as without it; a
 * sequence too long to share a pass. */
static void test_hook(void)
{
    hx_model *m = load_model("qwen3", "hook.gguf");
    ASSERT(m);
    hx_ctx_params cp = params(0, 0);
    hx_ctx *a, *b;
    ASSERT(hx_ctx_new(m, &cp, &a, NULL) == HX_OK);
    ASSERT(hx_ctx_new(m, &cp, &b, NULL) == HX_OK);
    hx_ctx_set_decode_hook(b, hook, NULL);
    int32_t tok[20];
    for (int i = 0; i < 20; i++) tok[i] = 3 * i + 1;
    ASSERT(hx_decode(a, tok, 20, 1) == HX_OK);
    ASSERT(hx_decode(b, tok, 20, 1) == HX_OK);
    EXPECT_EQ_INT(g_hooked, 1);
    const size_t nv = (size_t)hx_model_hparams(m)->n_vocab;
    for (int i = 0; i < 20; i++)
        EXPECT(memcmp(hx_ctx_logits(a, i), hx_ctx_logits(b, i), nv * sizeof(float)) == 0);
    hx_ctx_set_decode_hook(b, NULL, NULL);
    ASSERT(hx_decode(b, tok, 1, 0) == HX_OK);
    EXPECT_EQ_INT(g_hooked, 1);
    /* a sequence longer than a shared pass holds runs its own passes,
     * the other its own: both as alone */
    int32_t many[70];
    for (int i = 0; i < 70; i++) many[i] = 5 * i + 2;
    hx_ctx *c, *d;
    ASSERT(hx_ctx_new(m, &cp, &c, NULL) == HX_OK);
    ASSERT(hx_ctx_new(m, &cp, &d, NULL) == HX_OK);
    hx_seq_step q[2] = {{c, many, 70, 69, -1}, {d, tok, 1, 0, -1}};
    ASSERT(hx_decode_seqs(q, 2) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 70);
    EXPECT_EQ_INT(hx_ctx_n_past(d), 1);
    hx_ctx_truncate(a, 0);
    ASSERT(hx_decode(a, many, 70, 0) == HX_OK);
    EXPECT(memcmp(hx_ctx_logits(a, -1), hx_ctx_logits(c, -1), nv * sizeof(float)) == 0);
    hx_ctx_truncate(a, 0);
    ASSERT(hx_decode(a, tok, 1, 0) == HX_OK);
    EXPECT(memcmp(hx_ctx_logits(a, -1), hx_ctx_logits(d, -1), nv * sizeof(float)) == 0);
    hx_ctx_free(c);
    hx_ctx_free(d);
    hx_ctx_free(a);
    hx_ctx_free(b);
    hx_model_free(m);
}

/* Sequences of several tokens sharing a pass (as speculation's are):
 * each token's logits as decoding it alone, one token per hx_decode,
 * below and beyond 512 cached cells (where a one-token pass splits its
 * keys per thread). */
static void test_several_tokens(void)
{
    hx_model *m = load_model("qwen3", "several.gguf");
    ASSERT(m);
    hx_ctx_params cp = params(0, 0);
    const size_t nv = (size_t)hx_model_hparams(m)->n_vocab;
    int32_t prompt[600], three[3] = {7, 8, 9}, one = 4;
    for (int i = 0; i < 600; i++) prompt[i] = (int32_t)((i * 13 + 1) % (int)nv);
    const int depth[2] = {100, 520};
    hx_ctx *c[2], *other, *ref;
    for (int i = 0; i < 2; i++) {
        ASSERT(hx_ctx_new(m, &cp, &c[i], NULL) == HX_OK);
        ASSERT(hx_decode(c[i], prompt, depth[i], 0) == HX_OK);
    }
    ASSERT(hx_ctx_new(m, &cp, &other, NULL) == HX_OK);
    ASSERT(hx_ctx_new(m, &cp, &ref, NULL) == HX_OK);
    hx_seq_step q[3] = {{c[0], three, 3, 0, -1}, {other, &one, 1, 0, -1}, {c[1], three, 3, 1, -1}};
    ASSERT(hx_decode_seqs(q, 3) == HX_OK);
    for (int i = 0; i < 2; i++) {
        hx_ctx_truncate(ref, 0);
        ASSERT(hx_decode(ref, prompt, depth[i], 0) == HX_OK);
        for (int t = 0; t < 3; t++) {
            ASSERT(hx_decode(ref, &three[t], 1, 0) == HX_OK);
            const float *got = hx_ctx_logits(c[i], t);
            if (t < q[2 * i].out_from) {
                EXPECT(got == NULL);
                continue;
            }
            EXPECT(got && !memcmp(hx_ctx_logits(ref, -1), got, nv * sizeof(float)));
        }
        EXPECT_EQ_INT(hx_ctx_n_past(c[i]), depth[i] + 3);
        hx_ctx_free(c[i]);
    }
    hx_ctx_free(other);
    hx_ctx_free(ref);
    hx_model_free(m);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_test_seqs.XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_dense);
    RUN(test_moe);
    RUN(test_refusals);
    RUN(test_hook);
    RUN(test_several_tokens);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_dir);
    return test_summary();
}
