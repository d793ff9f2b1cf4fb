/* test_wcache.c: a memory cap below the weights (engine/wcache.c): the same
 * logits, bit for bit, as an uncapped run, for MoE and dense models at
 * several caps; the cache within its budget; failed reads as errors. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ctx_int.h"
#include "engine/engine.h"
#include "small_model.h"
#include "test.h"

static char g_dir[256];
static char g_path[512]; /* the model write_model wrote last */

/* A small model in the real files' layout (Q4_K_M: Q6_K ffn_down in some
 * layers, so MoE layers have slots of two sizes), 4 MoE or 8 dense layers;
 * the dense head (8192 rows) is larger than a layer, so it streams in
 * several runs. */
static const char *write_model(const char *arch, const char *name, int tied)
{
    hx_mkmodel_params p = small_model_params(arch, strcmp(arch, "qwen3moe") ? 8192 : 1024, 256);
    p.n_layer = strcmp(arch, "qwen3moe") ? 8 : 4;
    p.n_expert_used = 4;
    p.tied_output = tied;
    hx_err err = {0};
    snprintf(g_path, sizeof g_path, "%s/%s", g_dir, name);
    if (hx_mkmodel_write(&p, g_path, &err) != HX_OK) {
        printf("# mkmodel: %s\n", err.msg);
        return NULL;
    }
    return g_path;
}

static hx_ctx_params params(size_t max_bytes)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 128;
    cp.n_batch = 64;
    cp.n_threads = 2;
    cp.max_bytes = max_bytes;
    return cp;
}

/* The smallest cap a context accepts (by bisection on hx_ctx_memory). */
static size_t min_cap(const hx_model *m)
{
    size_t lo = 1, hi = (size_t)1 << 34;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        hx_ctx_params cp = params(mid);
        hx_ctx_mem mem;
        if (hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK) hi = mid;
        else lo = mid;
    }
    return hi;
}

#define N_PROMPT 40
#define N_GEN 12

/* A prompt in one pass (so a batch reads many experts, in waves when the
 * slots are few), then greedy tokens one at a time; every logits row kept
 * in out ((N_GEN + 1) * n_vocab floats). */
static int run(hx_model *m, size_t cap, float *out, hx_wc_stats *st)
{
    hx_ctx_params cp = params(cap);
    hx_ctx *c;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err) != HX_OK) {
        printf("# ctx (cap %zu): %s\n", cap, err.msg);
        return -1;
    }
    const int nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = (int32_t)((i * 37 + 11) % nv);
    int rc = hx_decode(c, tok, N_PROMPT, 0);
    for (int g = 0; !rc && g <= N_GEN; g++) {
        const float *lg = hx_ctx_logits(c, -1);
        memcpy(out + (size_t)g * nv, lg, (size_t)nv * sizeof(float));
        int best = 0;
        for (int i = 1; i < nv; i++) best = lg[i] > lg[best] ? i : best;
        if (g < N_GEN) rc = hx_decode(c, (int32_t[]){best}, 1, 0);
    }
    if (rc) printf("# decode: %s\n", hx_ctx_errmsg(c));
    if (st && c->wc) hx_wc_stats_get(c->wc, st);
    else if (st) memset(st, 0, sizeof *st);
    hx_ctx_free(c);
    return rc;
}

/* The same logits at each cap as without one; the slots never hold more
 * than their budget, and the plan stays under the cap. */
static void check_caps(const char *arch, const char *name, int tied)
{
    const char *path = write_model(arch, name, tied);
    ASSERT(path);
    hx_model *m;
    hx_err err = {0};
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    const int nv = hx_model_hparams(m)->n_vocab;
    const size_t rows = (size_t)(N_GEN + 1) * nv;
    float *ref = malloc(rows * sizeof(float)), *got = malloc(rows * sizeof(float));
    ASSERT(ref && got);
    hx_ctx_params cp0 = params(0);
    hx_ctx_mem full;
    ASSERT(hx_ctx_memory(m, &cp0, &full, NULL) == HX_OK);
    EXPECT_EQ_INT(full.streamed, 0);
    ASSERT(run(m, 0, ref, NULL) == 0);
    const size_t lo = min_cap(m);
    /* the least it runs with, between, and just below the weights */
    const size_t hi = full.weights + full.scratch;
    const size_t caps[3] = {lo, lo + (hi - lo) / 2, hi};
    for (int k = 0; k < 3; k++) {
        hx_ctx_params cp = params(caps[k]);
        hx_ctx_mem mem;
        ASSERT(hx_ctx_memory(m, &cp, &mem, NULL) == HX_OK);
        EXPECT_EQ_INT(mem.streamed, 1);
        EXPECT(mem.total <= caps[k]);
        EXPECT(mem.w_resident + mem.w_cache < full.weights);
        hx_wc_stats st;
        ASSERT(run(m, caps[k], got, &st) == 0);
        EXPECT(memcmp(ref, got, rows * sizeof(float)) == 0);
        EXPECT(st.held_peak <= st.budget);
        EXPECT(st.budget <= mem.w_cache);
        EXPECT(st.misses > 0);
        EXPECT(st.misses <= st.uses + (uint64_t)mem.w_slots); /* reads ahead */
        printf("# %s cap %zu KiB: %d slots, %d pinned of %d items; %llu uses, %llu reads, "
               "%llu KiB read\n", arch, caps[k] >> 10, mem.w_slots, mem.w_pinned, mem.w_items,
               (unsigned long long)st.uses, (unsigned long long)st.misses,
               (unsigned long long)(st.bytes_read >> 10));
        if (k == 0 && !strcmp(arch, "qwen3moe")) /* 2 slots a layer for 4 experts a token */
            EXPECT(st.misses * 2 >= st.uses);
        if (k == 0 && strcmp(arch, "qwen3moe")) /* nothing pinned: all read every token */
            EXPECT(st.misses >= st.uses);
    }
    free(ref);
    free(got);
    hx_model_free(m);
}

static void test_moe_caps(void) { check_caps("qwen3moe", "moe.gguf", 0); }
static void test_moe_caps_tied(void) { check_caps("qwen3moe", "moe_tied.gguf", 1); }
static void test_dense_caps(void) { check_caps("qwen3", "dense.gguf", 0); }
static void test_dense_caps_tied(void) { check_caps("qwen3", "dense_tied.gguf", 1); }

/* Uses of layer l's experts [0, n), each got and put back; the reads
 * they started. */
static uint64_t use_experts(hx_wcache *wc, int l, int n)
{
    hx_wc_stats a, b;
    hx_wc_stats_get(wc, &a);
    for (int e = 0; e < n; e++) {
        const void *mats[3];
        hx_wc_expert_get(wc, l, e, NULL, 1, mats);
        hx_wc_expert_put(wc, l, e);
    }
    hx_wc_stats_get(wc, &b);
    return b.misses - a.misses;
}

/* Two slots a layer, shared by the layers whose experts are of one size
 * (c of them): a layer that uses 2c experts while the others of its size
 * use none keeps them all (read once, then found); once another has used
 * as many, they are read again: the slots hold no more than their budget. */
static void test_moe_slots_shared(void)
{
    const char *path = write_model("qwen3moe", "shared.gguf", 0);
    ASSERT(path);
    hx_model *m;
    hx_err err = {0};
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    const hx_layer *L = m->layers;
    int a = -1, b = -1; /* two layers with experts of one size */
    for (int i = 0; i < m->hp.n_layer && b < 0; i++)
        for (int j = i + 1; j < m->hp.n_layer && b < 0; j++)
            if (L[i].down_exps.type == L[j].down_exps.type &&
                L[i].gate_exps.type == L[j].gate_exps.type)
                a = i, b = j;
    ASSERT(b >= 0);
    int c = 0;
    for (int i = 0; i < m->hp.n_layer; i++)
        c += L[i].down_exps.type == L[a].down_exps.type && L[i].gate_exps.type == L[a].gate_exps.type;
    const int n = 2 * c;
    ASSERT(n <= m->hp.n_expert);
    hx_wc_plan p;
    hx_wc_plan_make(m, 0, &p);
    ASSERT(hx_wc_plan_make(m, p.resident + p.min_cache, &p) == HX_OK);
    EXPECT_EQ_INT(p.slots_min, 2);
    hx_wcache *wc = NULL;
    ASSERT(hx_wc_new(m, &p, &wc, &err) == HX_OK);
    EXPECT_EQ_INT((int)use_experts(wc, a, n), n);
    EXPECT_EQ_INT((int)use_experts(wc, a, n), 0); /* more than its two slots */
    EXPECT_EQ_INT((int)use_experts(wc, b, n), n);
    EXPECT_EQ_INT((int)use_experts(wc, a, n), n); /* the control: b took them */
    hx_wc_stats st;
    hx_wc_stats_get(wc, &st);
    EXPECT(st.held_peak <= st.budget);
    hx_wc_free(wc);
    hx_model_free(m);
}

/* Below the least the cache can run with: a clear error naming the need;
 * a model from a buffer has no file to read its weights back from. */
static void test_cap_errors(void)
{
    const char *path = write_model("qwen3moe", "small.gguf", 0);
    ASSERT(path);
    hx_model *m;
    hx_err err = {0};
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    const size_t lo = min_cap(m);
    hx_ctx_params cp = params(lo - 1);
    hx_ctx *c = NULL;
    EXPECT_EQ_INT(hx_ctx_new(m, &cp, &c, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "too small") && strstr(err.msg, "at least"));
    cp = params(lo); /* the control: one byte more works */
    EXPECT_EQ_INT(hx_ctx_new(m, &cp, &c, &err), HX_OK);
    hx_ctx_free(c);
    FILE *f = fopen(path, "rb");
    ASSERT(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    ASSERT(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    hx_model *mb;
    ASSERT(hx_model_load_buffer(buf, (size_t)n, NULL, &mb, &err) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_new(mb, &cp, &c, &err), HX_ERR_UNSUPPORTED);
    EXPECT(strstr(err.msg, "model file") != NULL);
    hx_model_free(mb);
    free(buf);
    hx_model_free(m);
}

/* The file shrinks under a running context: the next read is short, and
 * decoding says so (HX_ERR_IO) and keeps nothing of that pass; the
 * control decodes before the file changes. */
static void check_short_read(const char *arch, const char *name)
{
    const char *path = write_model(arch, name, 0);
    ASSERT(path);
    hx_model *m;
    hx_err err = {0};
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    hx_ctx_params cp = params(min_cap(m));
    hx_ctx *c;
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    int32_t tok[4] = {1, 2, 3, 4};
    EXPECT_EQ_INT(hx_decode(c, tok, 4, 0), HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 4);
    ASSERT(truncate(path, 4096) == 0);
    EXPECT_EQ_INT(hx_decode(c, tok, 2, 0), HX_ERR_IO);
    EXPECT(strstr(hx_ctx_errmsg(c), "short read") != NULL);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 4);
    EXPECT(hx_ctx_logits(c, -1) == NULL);
    /* again: what failed is read again and fails again, never reused */
    EXPECT_EQ_INT(hx_decode(c, tok, 1, 0), HX_ERR_IO);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 4);
    hx_ctx_free(c);
    hx_model_free(m);
}

static void test_short_read_moe(void) { check_short_read("qwen3moe", "trunc_moe.gguf"); }
static void test_short_read_dense(void) { check_short_read("qwen3", "trunc_dense.gguf"); }

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_test_wcache.XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_moe_caps);
    RUN(test_moe_caps_tied);
    RUN(test_dense_caps);
    RUN(test_dense_caps_tied);
    RUN(test_moe_slots_shared);
    RUN(test_cap_errors);
    RUN(test_short_read_moe);
    RUN(test_short_read_dense);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_dir);
    return test_summary();
}
