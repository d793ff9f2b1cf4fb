/* test_kv.c: the paged KV cache (pages on demand, byte caps, HX_ERR_FULL,
 * memory estimates), the 8-bit cache against F32 and llama.cpp, prefill in
 * slices with a cancel check, the rest of a prompt after a cached prefix
 * computed as the whole prompt's prefill computes it, prefix caches on
 * disk. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/ctx_int.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "ref/ref.h"
#include "test.h"

static char g_dir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* A small random qwen3 with head_dim 32 (one Q8_0 block per row half). */
static float g_rope_base; /* write_model's rope base; 0: mkmodel's default */
static const char *g_arch; /* write_model's architecture; NULL: qwen3 */
static int g_n_head, g_n_head_kv; /* write_model's heads; 0: 4 over 2 */

static const char *write_model_v(const char *name, uint64_t seed, int head_dim,
                                 const char *vocab)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.rope_base = g_rope_base;
    p.vocab_path = vocab; /* llama.cpp loads only models with a tokenizer */
    p.tied_output = 1;
    p.arch = g_arch ? g_arch : "qwen3";
    p.n_expert = 16; /* qwen3moe: a few tokens per expert */
    p.n_vocab = 128;
    p.n_layer = 2;
    p.n_embd = 128;
    p.n_head = g_n_head ? g_n_head : 4;
    p.n_head_kv = g_n_head_kv ? g_n_head_kv : 2;
    p.head_dim = head_dim;
    p.n_ff = 192;
    p.n_ctx = 1024;
    p.seed = seed;
    const char *path = tmp_path(name);
    hx_err err = {0};
    if (hx_mkmodel_write(&p, path, &err)) {
        printf("# mkmodel: %s\n", err.msg);
        return NULL;
    }
    return path;
}

static const char *write_model(const char *name, uint64_t seed, int head_dim)
{
    return write_model_v(name, seed, head_dim, NULL);
}

static hx_model *load(const char *path)
{
    hx_model_params mp = hx_model_default_params();
    hx_model *m = NULL;
    hx_err err = {0};
    if (!path || hx_model_load(path, &mp, &m, &err)) printf("# load: %s\n", err.msg);
    return m;
}

static hx_ctx *new_ctx(hx_model *m, int kv_f32, int kv_q8, size_t cap)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 2;
    cp.kv_f32 = kv_f32;
    cp.kv_q8 = kv_q8;
    cp.kv_max_bytes = cap;
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err)) printf("# ctx: %s\n", err.msg);
    return c;
}

static void tokens(int32_t *t, int n, int n_vocab, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        t[i] = (int32_t)((seed >> 8) % (unsigned)n_vocab);
    }
}

/* Logits of every position of t: one call (batched) or token by token. */
static float *run_all(hx_ctx *c, const int32_t *t, int n, int by_token)
{
    const int nv = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    float *out = malloc((size_t)n * nv * sizeof(float));
    if (!out) return NULL;
    if (!by_token) {
        if (hx_decode(c, t, n, 1)) return free(out), NULL;
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)i * nv, hx_ctx_logits(c, i), nv * sizeof(float));
        return out;
    }
    for (int i = 0; i < n; i++) {
        if (hx_decode(c, t + i, 1, 0)) return free(out), NULL;
        memcpy(out + (size_t)i * nv, hx_ctx_logits(c, -1), nv * sizeof(float));
    }
    return out;
}

static double worst_nmse(const float *a, const float *b, int n, int nv)
{
    double w = 0;
    for (int i = 0; i < n; i++) {
        double e = test_nmse(a + (size_t)i * nv, b + (size_t)i * nv, (size_t)nv);
        if (e > w) w = e;
    }
    return w;
}

/* The 8-bit cache stays close to the exact F32 one, in both attention
 * paths (tiled batch of 100, one-query token by token). Tolerance 1e-3:
 * Q8_0 rounds each K/V value to 1/254 of its block's largest magnitude. */
static void test_q8_vs_f32(void)
{
    hx_model *m = load(write_model("q8.gguf", 7, 32));
    ASSERT(m);
    int32_t t[100];
    const int nv = hx_model_hparams(m)->n_vocab;
    tokens(t, 100, nv, 3);
    for (int by_token = 0; by_token < 2; by_token++) {
        hx_ctx *a = new_ctx(m, 1, 0, 0), *b = new_ctx(m, 0, 1, 0);
        ASSERT(a && b);
        float *la = run_all(a, t, 100, by_token), *lb = run_all(b, t, 100, by_token);
        ASSERT(la && lb);
        double e = worst_nmse(la, lb, 100, nv);
        printf("# q8 KV vs F32 KV, %s: worst nmse %.3g (tolerance 1e-3)\n",
               by_token ? "token by token" : "batch of 100", e);
        EXPECT(e < 1e-3);
        EXPECT(e > 0); /* it really is quantized */
        EXPECT(hx_ctx_kv_bytes(b) < hx_ctx_kv_bytes(a) * 3 / 10);
        free(la);
        free(lb);
        hx_ctx_free(a);
        hx_ctx_free(b);
    }
    hx_model_free(m);
}

/* Against llama.cpp with type_k = type_v = q8_0 (flash attention on, as
 * its quantized V needs), batches of 40 and 100: both run the one-query
 * path (Q quantized to Q8_0, Q8_0 dots, F32 V accumulation) at any batch
 * size, so they agree up to summation order (measured 9e-14). */
static void test_q8_vs_llama(void)
{
    char why[512];
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    const char *path = write_model_v("q8ref.gguf", 11, 32, vocab);
    hx_model *m = load(path);
    ASSERT(m);
    const int nv = hx_model_hparams(m)->n_vocab;
    int32_t t[100];
    tokens(t, 100, 151643, 5); /* ordinary tokens, below the special ones */
    setenv("HXREF_KV", "q8_0", 1);
    setenv("HXREF_FLASH", "1", 1);
    const int lens[2] = {40, 100};
    for (int k = 0; k < 2; k++) {
        float *ref = NULL;
        int rv = 0;
        int rc = ref_logits(path, t, lens[k], &ref, &rv);
        if (rc) printf("# hxref: %s\n", ref_error());
        ASSERT(rc == 0 && rv == nv);
        hx_ctx *c = new_ctx(m, 0, 1, 0);
        ASSERT(c);
        float *got = run_all(c, t, lens[k], 0);
        ASSERT(got);
        double e = worst_nmse(ref, got, lens[k], nv);
        printf("# q8 KV vs llama.cpp q8_0 KV, batch of %d: worst nmse %.3g "
               "(tolerance 1e-9)\n", lens[k], e);
        EXPECT(e < 1e-9);
        free(ref);
        free(got);
        hx_ctx_free(c);
    }
    unsetenv("HXREF_KV");
    unsetenv("HXREF_FLASH");
    hx_model_free(m);
}

/* Pages come as positions fill; the cap gives HX_ERR_FULL, not a crash,
 * and nothing is run. */
static void test_pages_and_cap(void)
{
    hx_model *m = load(write_model("cap.gguf", 1, 32));
    ASSERT(m);
    hx_ctx_mem mem;
    hx_err err = {0};
    ASSERT(hx_ctx_memory(m, NULL, &mem, &err) == HX_OK);
    /* 2 layers, 2 KV heads, K and V, 32 fp16 values */
    EXPECT_EQ_INT(mem.kv_per_token, 2 * 2 * 2 * 32 * 2);
    EXPECT_EQ_INT(mem.kv_page, mem.kv_per_token * HX_KV_PAGE_POSITIONS);
    hx_ctx *c = new_ctx(m, 0, 0, 2 * mem.kv_page + 100);
    ASSERT(c);
    EXPECT_EQ_INT(hx_ctx_kv_bytes(c), 0);
    int32_t t[200];
    tokens(t, 200, hx_model_hparams(m)->n_vocab, 9);
    ASSERT(hx_decode(c, t, 1, 0) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_kv_bytes(c), mem.kv_page);
    ASSERT(hx_decode(c, t + 1, 127, 0) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_kv_bytes(c), 2 * mem.kv_page);
    EXPECT_EQ_INT(hx_decode(c, t + 128, 1, 0), HX_ERR_FULL);
    EXPECT(strstr(hx_ctx_errmsg(c), "KV cache full") != NULL);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 128);
    /* dropping old positions makes room again */
    hx_ctx_truncate(c, 64);
    EXPECT_EQ_INT(hx_decode(c, t + 128, 64, 0), HX_OK);
    hx_ctx_free(c);
    /* a cap below one page is refused up front */
    hx_ctx_params cp = hx_ctx_default_params();
    cp.kv_max_bytes = mem.kv_page - 1;
    EXPECT_EQ_INT(hx_ctx_new(m, &cp, &c, &err), HX_ERR_RANGE);
    /* q8 needs whole blocks */
    hx_model_free(m);
    m = load(write_model("hd16.gguf", 1, 16));
    ASSERT(m);
    cp = hx_ctx_default_params();
    cp.kv_q8 = 1;
    EXPECT_EQ_INT(hx_ctx_new(m, &cp, &c, &err), HX_ERR_UNSUPPORTED);
    EXPECT(strstr(err.msg, "multiple of 32") != NULL);
    hx_model_free(m);
}

/* max_bytes bounds weights + scratch + KV: the KV cache gets the rest. */
static void test_max_bytes(void)
{
    hx_model *m = load(write_model("mb.gguf", 1, 32));
    ASSERT(m);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = 2;
    hx_ctx_mem mem, capped;
    hx_err err = {0};
    ASSERT(hx_ctx_memory(m, &cp, &mem, &err) == HX_OK);
    EXPECT_EQ_INT(mem.weights, hx_model_size_bytes(m));
    EXPECT_EQ_INT(mem.kv_total, 1024 * mem.kv_per_token);
    EXPECT_EQ_INT(mem.total, mem.weights + mem.scratch + mem.kv_total);
    EXPECT_EQ_INT(mem.n_ctx_fit, 1024);
    cp.max_bytes = mem.weights + mem.scratch + 3 * mem.kv_page + 10;
    ASSERT(hx_ctx_memory(m, &cp, &capped, &err) == HX_OK);
    EXPECT_EQ_INT(capped.n_ctx_fit, 3 * HX_KV_PAGE_POSITIONS);
    EXPECT(capped.total <= cp.max_bytes);
    hx_ctx *c = NULL;
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    int32_t t[200];
    tokens(t, 200, hx_model_hparams(m)->n_vocab, 2);
    EXPECT_EQ_INT(hx_decode(c, t, 192, 0), HX_OK);
    EXPECT_EQ_INT(hx_decode(c, t, 1, 0), HX_ERR_FULL);
    hx_ctx_free(c);
    /* no room for a KV page beside all the weights: the weights would be
     * read from the file as needed (test_wcache), but this one-layer
     * model's weight cache needs more than that: refused, naming the need */
    cp.max_bytes = mem.weights + mem.scratch;
    EXPECT_EQ_INT(hx_ctx_new(m, &cp, &c, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "too small") && strstr(err.msg, "at least"));
    hx_model_free(m);
}

static int g_polls, g_stop_after;
static int stop_after(void *user)
{
    (void)user;
    return ++g_polls > g_stop_after;
}

/* Prefill in slices: a cancel between slices stops at once with the
 * slices done cached; resuming gives the same logits as an uncancelled
 * run in the same slices; a token budget returns early with HX_OK. */
static void test_prefill_slices(void)
{
    hx_model *m = load(write_model("pf.gguf", 4, 32));
    ASSERT(m);
    const int nv = hx_model_hparams(m)->n_vocab, n = 320;
    int32_t t[320];
    tokens(t, n, nv, 8);
    hx_prefill_params pp = hx_prefill_default_params();
    pp.slice = 64;
    int done = -1;
    hx_ctx *a = new_ctx(m, 0, 0, 0), *b = new_ctx(m, 0, 0, 0);
    ASSERT(a && b);
    ASSERT(hx_prefill(a, t, n, &pp, &done) == HX_OK);
    EXPECT_EQ_INT(done, n);
    ASSERT(hx_ctx_logits(a, -1));
    pp.cancel = stop_after;
    g_polls = 0;
    g_stop_after = 2;
    EXPECT_EQ_INT(hx_prefill(b, t, n, &pp, &done), HX_ERR_CANCELLED);
    EXPECT_EQ_INT(done, 128);
    EXPECT_EQ_INT(hx_ctx_n_past(b), 128);
    EXPECT(hx_ctx_logits(b, -1) == NULL);
    EXPECT(strstr(hx_ctx_errmsg(b), "cancelled") != NULL);
    pp.cancel = NULL;
    pp.max_tokens = 128;
    EXPECT_EQ_INT(hx_prefill(b, t + 128, n - 128, &pp, &done), HX_OK);
    EXPECT_EQ_INT(done, 128); /* the budget returns early, not an error */
    EXPECT(hx_ctx_logits(b, -1) == NULL);
    pp.max_tokens = 0;
    EXPECT_EQ_INT(hx_prefill(b, t + 256, n - 256, &pp, &done), HX_OK);
    EXPECT_EQ_INT(done, n - 256);
    EXPECT_EQ_INT(hx_ctx_n_past(b), n);
    const float *la = hx_ctx_logits(a, -1), *lb = hx_ctx_logits(b, -1);
    ASSERT(la && lb);
    double e = test_nmse(la, lb, (size_t)nv);
    printf("# cancelled and resumed vs one run, same slices: nmse %.3g\n", e);
    EXPECT(e == 0);
    hx_ctx_free(a);
    hx_ctx_free(b);
    /* slices of 64 (the last one taking a short tail) give the numbers of
     * one pass over the whole prompt */
    a = new_ctx(m, 0, 0, 0);
    b = new_ctx(m, 0, 0, 0);
    ASSERT(a && b);
    pp = hx_prefill_default_params();
    pp.slice = 64;
    ASSERT(hx_decode(a, t, 300, 0) == HX_OK);
    ASSERT(hx_prefill(b, t, 300, &pp, &done) == HX_OK);
    la = hx_ctx_logits(a, -1);
    lb = hx_ctx_logits(b, -1);
    ASSERT(la && lb);
    e = test_nmse(la, lb, (size_t)nv);
    printf("# 300 tokens in slices of 64 vs one pass: nmse %.3g\n", e);
    EXPECT(e == 0);
    hx_ctx_free(a);
    hx_ctx_free(b);
    hx_model_free(m);
}

/* Number of cache files in dir. */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, ".kv") != NULL;
    closedir(d);
    return n;
}

/* Cold: decode the prompt in two calls (a prefix, then the rest); warm: a
 * new context loads the prefix from disk and decodes only the rest. The
 * same passes run on the same KV rows: the logits are bitwise equal. */
static void warm_vs_cold(hx_model *m, int kv_q8, const char *dir)
{
    const int n = 300, pre = 200, nv = hx_model_hparams(m)->n_vocab;
    int32_t t[300];
    tokens(t, n, nv, 21);
    hx_ctx *a = new_ctx(m, 0, kv_q8, 0), *b = new_ctx(m, 0, kv_q8, 0);
    ASSERT(a && b);
    ASSERT(hx_decode(a, t, pre, 0) == HX_OK);
    ASSERT(hx_ctx_prefix_save(a, dir, t, pre, 0) == HX_OK);
    ASSERT(hx_decode(a, t + pre, n - pre, 0) == HX_OK);
    int got = -1;
    ASSERT(hx_ctx_prefix_load(b, dir, t, n, n - 1, &got) == HX_OK);
    EXPECT_EQ_INT(got, pre);
    EXPECT_EQ_INT(hx_ctx_n_past(b), pre);
    ASSERT(hx_decode(b, t + pre, n - pre, 0) == HX_OK);
    const float *la = hx_ctx_logits(a, -1), *lb = hx_ctx_logits(b, -1);
    ASSERT(la && lb);
    EXPECT(memcmp(la, lb, (size_t)nv * sizeof(float)) == 0);
    /* a prompt that leaves the cached prefix at 150 reuses 150 */
    hx_ctx_free(b);
    b = new_ctx(m, 0, kv_q8, 0);
    ASSERT(b);
    t[150] = (t[150] + 1) % nv;
    ASSERT(hx_ctx_prefix_load(b, dir, t, n, n - 1, &got) == HX_OK);
    EXPECT_EQ_INT(got, 150);
    /* loading twice is a caller error */
    EXPECT_EQ_INT(hx_ctx_prefix_load(b, dir, t, n, n - 1, &got), HX_ERR_STATE);
    hx_ctx_free(a);
    hx_ctx_free(b);
}

static void test_prefix_warm_equals_cold(void)
{
    hx_model *m = load(write_model("pfx.gguf", 5, 32));
    ASSERT(m);
    warm_vs_cold(m, 0, tmp_path("pfx-f16"));
    warm_vs_cold(m, 1, tmp_path("pfx-q8"));
    hx_model_free(m);
}

/* Logits of t[0, n) prefilled in two calls, t[0, k) then the rest (the
 * rest with whole_prompt as given), in slices of 64; k = 0: one call. */
static int split_prefill(hx_ctx *c, const int32_t *t, int n, int k, int whole, float *out)
{
    hx_prefill_params pp = hx_prefill_default_params();
    pp.slice = 64;
    pp.whole_prompt = 1;
    int done, nv = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    hx_ctx_truncate(c, 0);
    if (k && hx_prefill(c, t, k, &pp, &done)) return -1;
    pp.whole_prompt = whole;
    if (hx_prefill(c, t + k, n - k, &pp, &done) || !hx_ctx_logits(c, -1)) return -1;
    memcpy(out, hx_ctx_logits(c, -1), (size_t)nv * sizeof *out);
    return 0;
}

/* The rest of a prompt whose start is cached (a turn's request after the
 * system message, in memory or from the prefix cache), prefilled with
 * whole_prompt, gives the logits of a cold prefill of the whole prompt bit
 * for bit, whatever its length: 1, 10, 38 (under FA_TILE_Q: a pass that
 * would take the fp16 one-query path) or 100 tokens, dense and MoE (a few
 * tokens per expert). Control: the same 38
 * tokens by llama.cpp's rule (a 38-token pass) give other numbers. */
static void whole_prompt_rows(const char *arch)
{
    g_arch = arch;
    hx_model *m = load(write_model("wp.gguf", 6, 32));
    g_arch = NULL;
    ASSERT(m);
    const int n = 300, nv = hx_model_hparams(m)->n_vocab;
    int32_t t[300];
    tokens(t, n, nv, 33);
    float *cold = malloc((size_t)nv * sizeof *cold), *warm = malloc((size_t)nv * sizeof *warm);
    hx_ctx *a = new_ctx(m, 0, 0, 0), *b = new_ctx(m, 0, 0, 0);
    ASSERT(cold && warm && a && b);
    ASSERT(split_prefill(a, t, n, 0, 1, cold) == 0);
    static const int K[] = {200, 262, 290, 299};
    for (int i = 0; i < 4; i++) {
        ASSERT(split_prefill(b, t, n, K[i], 1, warm) == 0);
        const int same = !memcmp(cold, warm, (size_t)nv * sizeof *cold);
        if (!same) printf("# %d cached + %d: differs from cold\n", K[i], n - K[i]);
        EXPECT(same);
    }
    ASSERT(split_prefill(b, t, n, 262, 0, warm) == 0); /* control */
    printf("# 38 tokens by pass size vs cold: nmse %.3g\n", test_nmse(cold, warm, (size_t)nv));
    EXPECT(memcmp(cold, warm, (size_t)nv * sizeof *cold) != 0);
    /* from the prefix cache: a new context loads 262 positions */
    const char *dir = tmp_path("pfx-whole");
    int got = -1, done;
    ASSERT(split_prefill(a, t, 262, 0, 1, warm) == 0);
    ASSERT(hx_ctx_prefix_save(a, dir, t, 262, 0) == HX_OK);
    hx_ctx_free(b);
    b = new_ctx(m, 0, 0, 0);
    ASSERT(b && hx_ctx_prefix_load(b, dir, t, n, n - 1, &got) == HX_OK);
    EXPECT_EQ_INT(got, 262);
    hx_prefill_params pp = hx_prefill_default_params();
    pp.whole_prompt = 1;
    ASSERT(hx_prefill(b, t + got, n - got, &pp, &done) == HX_OK);
    EXPECT(!memcmp(cold, hx_ctx_logits(b, -1), (size_t)nv * sizeof *cold));
    free(cold);
    free(warm);
    hx_ctx_free(a);
    hx_ctx_free(b);
    hx_model_free(m);
}

static void test_whole_prompt_rows(void)
{
    whole_prompt_rows("qwen3");
    whole_prompt_rows("qwen3moe");
}

/* Writes n cached positions of t to dir from a fresh context. */
static int save_prefix(hx_model *m, const char *dir, const int32_t *t, int n)
{
    hx_ctx *c = new_ctx(m, 0, 0, 0);
    int rc = c ? hx_decode(c, t, n, 0) : HX_ERR_NOMEM;
    if (!rc) rc = hx_ctx_prefix_save(c, dir, t, n, 0);
    hx_ctx_free(c);
    return rc;
}

/* What a new context loads from dir for t (n tokens). */
static int loaded(hx_model *m, const char *dir, const int32_t *t, int n,
                  int kv_q8, const char *adapter_key)
{
    hx_ctx *c = new_ctx(m, 0, kv_q8, 0);
    int got = -1;
    if (!c) return -1;
    snprintf(c->adapter_key, sizeof c->adapter_key, "%s", adapter_key);
    if (hx_ctx_prefix_load(c, dir, t, n, n - 1, &got)) got = -2;
    hx_ctx_free(c);
    return got;
}

static void corrupt(const char *dir, long at, int truncate_to)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strstr(e->d_name, ".kv")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r+b");
        if (!f) continue;
        if (truncate_to >= 0) {
            if (ftruncate(fileno(f), truncate_to)) {}
        } else {
            fseek(f, at, at < 0 ? SEEK_END : SEEK_SET);
            int ch = fgetc(f);
            fseek(f, -1, SEEK_CUR);
            fputc(ch ^ 0x5a, f);
        }
        fclose(f);
    }
    if (d) closedir(d);
}

/* Keys: another adapter set, cache type or model misses; a corrupt,
 * truncated or foreign file is ignored without an error. */
static void test_prefix_keys_and_corruption(void)
{
    hx_model *m = load(write_model("pk.gguf", 6, 32));
    hx_model *m2 = load(write_model("pk2.gguf", 7, 32)); /* same shape */
    ASSERT(m && m2);
    const char *dir = tmp_path("pk");
    int32_t t[100];
    tokens(t, 100, hx_model_hparams(m)->n_vocab, 4);
    ASSERT(save_prefix(m, dir, t, 80) == HX_OK);
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, ""), 80);
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, "lora:a.gguf@1.0"), 0);
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 1, ""), 0);
    EXPECT_EQ_INT(loaded(m2, dir, t, 100, 0, ""), 0);
    EXPECT_EQ_INT(loaded(m, dir, t, 50, 0, ""), 49); /* keeps one to decode */
    corrupt(dir, -100, -1); /* a flipped byte in the rows */
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, ""), 0);
    EXPECT_EQ_INT(count_files(dir), 0); /* the damaged file was removed */
    ASSERT(save_prefix(m, dir, t, 80) == HX_OK);
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, ""), 80);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/*.kv", dir);
    if (system(cmd)) {}
    ASSERT(save_prefix(m, dir, t, 80) == HX_OK);
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, ""), 80);
    corrupt(dir, 0, 300); /* truncated inside the header */
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, ""), 0);
    if (system(cmd)) {}
    ASSERT(save_prefix(m, dir, t, 80) == HX_OK);
    corrupt(dir, 8, -1); /* the version */
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, ""), 0);
    char junk[600];
    snprintf(junk, sizeof junk, "%s/junk.kv", dir);
    hx_err err = {0};
    ASSERT(hx_write_file_atomic(junk, "not a cache", 11, &err) == HX_OK);
    EXPECT_EQ_INT(loaded(m, dir, t, 100, 0, ""), 0);
    hx_model_free(m);
    hx_model_free(m2);
}

/* The cache's model key is hx_model_identity itself, and both see a
 * change that the tensors do not show: the same weights under another
 * rope base are another model (their cached rows would be wrong). */
static void test_prefix_key_is_model_identity(void)
{
    hx_model *m = load(write_model("pi.gguf", 8, 32));
    g_rope_base = 5e5f;
    hx_model *mr = load(write_model("pi-rope.gguf", 8, 32)); /* same tensors */
    g_rope_base = 0;
    ASSERT(m && mr);
    char id[65], idr[65];
    hx_model_identity(m, id);
    hx_model_identity(mr, idr);
    EXPECT(strcmp(id, idr) != 0);
    const char *dir = tmp_path("pi");
    int32_t t[64];
    tokens(t, 64, hx_model_hparams(m)->n_vocab, 9);
    hx_ctx *c = new_ctx(m, 0, 0, 0);
    ASSERT(c);
    EXPECT(hx_decode(c, t, 40, 0) == HX_OK && hx_ctx_prefix_save(c, dir, t, 40, 0) == HX_OK);
    EXPECT_STR_EQ(c->model_id, id);
    hx_ctx_free(c);
    EXPECT_EQ_INT(loaded(m, dir, t, 64, 0, ""), 40);
    EXPECT_EQ_INT(loaded(mr, dir, t, 64, 0, ""), 0);
    hx_model_free(m);
    hx_model_free(mr);
}

/* The directory stays under its byte bound: the least recently used
 * files go first. */
static void test_prefix_eviction(void)
{
    hx_model *m = load(write_model("pe.gguf", 8, 32));
    ASSERT(m);
    const char *dir = tmp_path("pe");
    int32_t a[64], b[64], c[64];
    const int nv = hx_model_hparams(m)->n_vocab;
    tokens(a, 64, nv, 1);
    tokens(b, 64, nv, 2);
    tokens(c, 64, nv, 3);
    hx_ctx *x = new_ctx(m, 0, 0, 0);
    ASSERT(x);
    ASSERT(hx_decode(x, a, 64, 0) == HX_OK);
    ASSERT(hx_ctx_prefix_save(x, dir, a, 64, 0) == HX_OK);
    struct stat st;
    DIR *d = opendir(dir);
    ASSERT(d);
    char one[1024] = "";
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".kv")) snprintf(one, sizeof one, "%s/%s", dir, e->d_name);
    closedir(d);
    ASSERT(stat(one, &st) == 0);
    const size_t fsz = (size_t)st.st_size;
    hx_ctx_free(x);
    usleep(20000);
    ASSERT(save_prefix(m, dir, b, 64) == HX_OK);
    usleep(20000);
    EXPECT_EQ_INT(loaded(m, dir, a, 64, 0, ""), 63); /* a is now the most recent */
    usleep(20000);
    x = new_ctx(m, 0, 0, 0);
    ASSERT(x && hx_decode(x, c, 64, 0) == HX_OK);
    ASSERT(hx_ctx_prefix_save(x, dir, c, 64, 2 * fsz) == HX_OK);
    hx_ctx_free(x);
    EXPECT_EQ_INT(count_files(dir), 2);
    EXPECT_EQ_INT(loaded(m, dir, b, 64, 0, ""), 0); /* b was evicted */
    EXPECT_EQ_INT(loaded(m, dir, a, 64, 0, ""), 63);
    EXPECT_EQ_INT(loaded(m, dir, c, 64, 0, ""), 63);
    hx_model_free(m);
}

/* Logits of passes of lens[k] tokens of t after each other into one
 * buffer (every position's); NULL on failure. */
static float *passes(hx_ctx *c, const int32_t *t, const int *lens, int n_lens, int *n_out)
{
    const int nv = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    int n = 0;
    for (int k = 0; k < n_lens; k++) n += lens[k];
    float *out = malloc((size_t)n * nv * sizeof(float));
    for (int k = 0, at = 0; out && k < n_lens; at += lens[k++]) {
        float *l = run_all(c, t + at, lens[k], 0);
        if (!l) return free(out), NULL;
        memcpy(out + (size_t)at * nv, l, (size_t)lens[k] * nv * sizeof(float));
        free(l);
    }
    *n_out = n * nv;
    return out;
}

/* Attention's tasks as the context plans them against the reference it
 * keeps (attn_before), bit for bit, for query heads over KV heads 1, 2
 * and 8 to one and passes whose token counts are no multiple of a task's
 * (a long one after the prompt, a short one, a single token), each token
 * seeing only the keys up to its own: the 8-bit cache's path takes several
 * tokens of a pass per task (each V row dequantized once for them), and
 * the F16 cache's tiled path (the 200-token pass) computes only the lanes
 * of a tile that hold rows. Control: the plan does group tokens where the
 * reference does not. */
static void test_attention_tasks_as_before(void)
{
    static const int heads[3][2] = {{4, 4}, {4, 2}, {8, 1}};
    static const int lens[] = {200, 38, 13, 1};
    int32_t t[252];
    tokens(t, 252, 128, 7);
    for (int k = 0; k < 6; k++) {
        const int q8 = k < 3, *h = heads[k % 3];
        g_n_head = h[0], g_n_head_kv = h[1];
        hx_model *m = load(write_model("gqa.gguf", 41 + k % 3, 32));
        g_n_head = g_n_head_kv = 0;
        ASSERT(m);
        hx_ctx *ref = new_ctx(m, 0, q8, 0), *now = new_ctx(m, 0, q8, 0);
        ASSERT(ref && now);
        ref->attn_before = 1;
        hx_attn_run r1, rn;
        hx_attention_plan(ref, 0, 38, 200, &r1);
        hx_attention_plan(now, 0, 38, 200, &rn);
        if (q8) EXPECT(r1.tpt == 1 && rn.tpt > 1 && 38 % rn.tpt != 0);
        int na = 0, nb = 0;
        float *a = passes(ref, t, lens, 4, &na), *b = passes(now, t, lens, 4, &nb);
        const int same = a && b && na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
        EXPECT(same);
        printf("# %s KV, %d query heads over %d KV heads: %d tokens per task, logits %s\n",
               q8 ? "8-bit" : "F16", h[0], h[1], rn.tpt, same ? "the same" : "differ");
        free(a);
        free(b);
        hx_ctx_free(ref);
        hx_ctx_free(now);
        hx_model_free(m);
    }
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_test_kv_%d", (int)getpid());
    mkdir(g_dir, 0700);
    RUN(test_q8_vs_f32);
    RUN(test_q8_vs_llama);
    RUN(test_attention_tasks_as_before);
    RUN(test_pages_and_cap);
    RUN(test_max_bytes);
    RUN(test_prefill_slices);
    RUN(test_prefix_warm_equals_cold);
    RUN(test_whole_prompt_rows);
    RUN(test_prefix_keys_and_corruption);
    RUN(test_prefix_eviction);
    RUN(test_prefix_key_is_model_identity);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) {}
    return test_summary();
}
