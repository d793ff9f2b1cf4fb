/* test_step.c: inference in slices (hx_step, hx_ctx_set_slicer): the same
 * logits, bit for bit, as whole passes, for dense and MoE models, F16 and
 * Q8 caches, with and without a weight cache; the call's states. */
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
    return small_model(g_dir, arch, name, 2048, 512);
}

enum { WHOLE, STEPPED, SLICER };
#define N_PROMPT 150
#define N_GEN 6

static int g_slices; /* slicer calls */
/* Counts a slice and switches between one and two threads at each: the
 * numbers must not change. */
static int count_slice(void *user)
{
    g_slices++;
    hx_ctx_set_threads(user, 1 + g_slices % 2);
    return 0;
}

/* The call of tokens (n) run whole, by hx_step with a budget so small
 * that every piece is its own slice, or under a slicer. */
static int call(hx_ctx *c, int how, const int32_t *tok, int n, int *steps)
{
    if (how != STEPPED) return hx_decode(c, tok, n, 0);
    int rc = hx_step_begin(c, tok, n, 0, 64), done = 0;
    while (!rc && !done) {
        rc = hx_step(c, 0.0001, &done);
        ++*steps;
    }
    return rc;
}

/* A prompt in passes of 64 tokens, then greedy tokens; every logits row
 * into out ((N_GEN + 1) * n_vocab); the number of slices in *slices. */
static int run(hx_model *m, hx_ctx_params cp, int how, float *out, int *slices)
{
    hx_ctx *c;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err)) {
        printf("# ctx: %s\n", err.msg);
        return -1;
    }
    g_slices = 0;
    if (how == SLICER) hx_ctx_set_slicer(c, 0.0001, count_slice, c);
    const int nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = (int32_t)((i * 37 + 11) % nv);
    int steps = 0, rc = call(c, how, tok, N_PROMPT, &steps);
    for (int g = 0; !rc && g <= N_GEN; g++) {
        const float *lg = hx_ctx_logits(c, -1);
        memcpy(out + (size_t)g * nv, lg, (size_t)nv * sizeof(float));
        int32_t best = 0;
        for (int i = 1; i < nv; i++) best = lg[i] > lg[best] ? i : best;
        if (g < N_GEN) rc = call(c, how, &best, 1, &steps);
    }
    if (rc) printf("# decode: %s\n", hx_ctx_errmsg(c));
    *slices = how == SLICER ? g_slices : steps;
    hx_ctx_free(c);
    return rc;
}

static hx_ctx_params params(int kv_q8, size_t max_bytes)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 64;
    cp.n_threads = 2;
    cp.kv_q8 = kv_q8;
    cp.max_bytes = max_bytes;
    return cp;
}

/* Whole, stepped and under a slicer (switching threads between slices):
 * the same logits; the sliced runs cut every pass into many slices (more
 * than the passes' units). */
static void check_same(hx_model *m, hx_ctx_params cp, const char *what)
{
    const int nv = hx_model_hparams(m)->n_vocab;
    const size_t rows = (size_t)(N_GEN + 1) * nv;
    float *ref = malloc(rows * sizeof(float)), *got = malloc(rows * sizeof(float));
    ASSERT(ref && got);
    int n_whole, n_step, n_slicer;
    ASSERT(run(m, cp, WHOLE, ref, &n_whole) == 0);
    ASSERT(run(m, cp, STEPPED, got, &n_step) == 0);
    EXPECT(memcmp(ref, got, rows * sizeof(float)) == 0);
    memset(got, 0, rows * sizeof(float));
    ASSERT(run(m, cp, SLICER, got, &n_slicer) == 0);
    EXPECT(memcmp(ref, got, rows * sizeof(float)) == 0);
    /* 3 passes of the prompt and 6 tokens, 17 units each at least */
    const int units = (N_GEN + 3) * (3 * 5 + 2);
    EXPECT(n_step > units);
    EXPECT(n_slicer > units - (N_GEN + 3));
    printf("# %s: %d steps, %d slicer calls\n", what, n_step, n_slicer);
    free(ref);
    free(got);
}

/* A model of arch checked whole against stepped with an F16 cache, with
 * a Q8 one (q8), and under a cap below its weights (the weight cache). */
static void check_model(const char *arch, const char *name, int q8)
{
    hx_model *m = load_model(arch, name);
    ASSERT(m);
    char what[64];
    snprintf(what, sizeof what, "%s f16", arch);
    check_same(m, params(0, 0), what);
    if (q8) snprintf(what, sizeof what, "%s q8", arch), check_same(m, params(1, 0), what);
    hx_ctx_params cp = params(0, 0);
    hx_ctx_mem mem;
    ASSERT(hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK);
    cp.max_bytes = mem.total - mem.weights / 3;
    ASSERT(hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK);
    EXPECT_EQ_INT(mem.streamed, 1);
    snprintf(what, sizeof what, "%s streamed", arch);
    check_same(m, cp, what);
    hx_model_free(m);
}

static void test_dense(void) { check_model("qwen3", "dense.gguf", 1); }
static void test_moe(void) { check_model("qwen3moe", "moe.gguf", 0); }

/* A pending call refuses other decodes; abort keeps the passes completed
 * and drops the one in progress; stepping without a call is an error. */
static void test_states(void)
{
    hx_model *m = load_model("qwen3", "states.gguf");
    ASSERT(m);
    hx_ctx_params cp = params(0, 0);
    hx_ctx *c;
    hx_err err = {0};
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = i + 1;
    int done = 0;
    EXPECT_EQ_INT(hx_step(c, 1, &done), HX_ERR_STATE);
    EXPECT_EQ_INT(hx_step_begin(c, tok, 1000, 0, 64), HX_ERR_FULL);
    ASSERT(hx_step_begin(c, tok, N_PROMPT, 0, 64) == HX_OK);
    EXPECT_EQ_INT(hx_step_begin(c, tok, 1, 0, 64), HX_ERR_STATE);
    EXPECT_EQ_INT(hx_decode(c, tok, 1, 0), HX_ERR_STATE);
    EXPECT(strstr(hx_ctx_errmsg(c), "pending") != NULL);
    int loaded = -1;
    EXPECT_EQ_INT(hx_ctx_prefix_load(c, g_dir, tok, 8, 8, &loaded), HX_ERR_STATE);
    EXPECT_EQ_INT(loaded, 0);
    /* the first pass (64 tokens) done, the second begun */
    while (hx_ctx_n_past(c) < 64) ASSERT(hx_step(c, 0.0001, &done) == HX_OK);
    EXPECT_EQ_INT(done, 0);
    ASSERT(hx_step(c, 0.0001, &done) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 64);
    hx_step_abort(c);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 64);
    EXPECT(hx_ctx_logits(c, -1) == NULL);
    EXPECT_EQ_INT(hx_step(c, 1, &done), HX_ERR_STATE);
    /* the rest as a new call: the cache goes on from 64 */
    ASSERT(hx_decode(c, tok + 64, N_PROMPT - 64, 0) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_past(c), N_PROMPT);
    /* a call left pending is freed with its context (ASan checks) */
    ASSERT(hx_step_begin(c, tok, 4, 0, 0) == HX_OK);
    hx_ctx_free(c);
    hx_model_free(m);
}

static int g_stop_at; /* the slicer's slice that stops the call; 0: never */
static int stop_slice(void *user)
{
    (void)user;
    return ++g_slices == g_stop_at;
}

/* The first logits of N_PROMPT tokens into out (n_vocab). */
static int prompt_logits(hx_ctx *c, const int32_t *tok, float *out)
{
    int rc = hx_decode(c, tok, N_PROMPT, 0);
    if (!rc) memcpy(out, hx_ctx_logits(c, -1), hx_model_hparams(hx_ctx_model(c))->n_vocab * sizeof(float));
    return rc;
}

/* A slicer that stops the call mid-pass, and hx_step_abort mid-layer,
 * with a dense model's layers streaming through the weight cache: the
 * call fails as cancelled with the cache as it was, and the next call
 * gives the logits of a run never stopped (the cache's slots released). */
static void test_stop_and_abort(void)
{
    hx_model *m = load_model("qwen3", "stop.gguf");
    ASSERT(m);
    hx_ctx_params cp = params(0, 0);
    hx_ctx_mem mem;
    ASSERT(hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK);
    cp.max_bytes = mem.total - mem.weights / 3;
    const int nv = hx_model_hparams(m)->n_vocab;
    float *ref = malloc(nv * sizeof(float)), *got = malloc(nv * sizeof(float));
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = (int32_t)((i * 37 + 11) % nv);
    hx_ctx *c;
    ASSERT(ref && got && hx_ctx_new(m, &cp, &c, NULL) == HX_OK);
    ASSERT(prompt_logits(c, tok, ref) == HX_OK);
    hx_ctx_truncate(c, 0);
    g_slices = 0;
    g_stop_at = 250; /* in the last layer: streamed, not pinned */
    hx_ctx_set_slicer(c, 0.0001, stop_slice, NULL);
    EXPECT_EQ_INT(hx_decode(c, tok, N_PROMPT, 0), HX_ERR_CANCELLED);
    EXPECT(strstr(hx_ctx_errmsg(c), "stopped between slices") != NULL);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 0);
    EXPECT(hx_ctx_logits(c, -1) == NULL);
    g_stop_at = 0;
    ASSERT(prompt_logits(c, tok, got) == HX_OK);
    EXPECT(memcmp(ref, got, nv * sizeof(float)) == 0);
    /* abort as deep into the pass, then the whole call again */
    hx_ctx_truncate(c, 0);
    hx_ctx_set_slicer(c, 0, NULL, NULL);
    int done = 0;
    ASSERT(hx_step_begin(c, tok, N_PROMPT, 0, 0) == HX_OK);
    for (int i = 0; i < 250 && !done; i++) ASSERT(hx_step(c, 0.0001, &done) == HX_OK);
    EXPECT_EQ_INT(done, 0);
    hx_step_abort(c);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 0);
    memset(got, 0, nv * sizeof(float));
    ASSERT(prompt_logits(c, tok, got) == HX_OK);
    EXPECT(memcmp(ref, got, nv * sizeof(float)) == 0);
    hx_ctx_free(c);
    hx_model_free(m);
    free(ref);
    free(got);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_test_step.XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_dense);
    RUN(test_moe);
    RUN(test_states);
    RUN(test_stop_and_abort);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_dir);
    return test_summary();
}
