/* test_diff.c: the engine against llama.cpp (tests/ref): exact greedy ids
 * on the real stories260K model, and teacher-forced logits of random qwen3 /
 * qwen3moe models (real Qwen2 vocabulary) in every tensor type, by NMSE.
 * Debugging knobs: HX_DIFF_ARCH=qwen3, HX_DIFF_ONLY=Q8_0, HX_DIFF_KV=f16,
 * HX_DIFF_TT=ffn_down=Q8_0 (mkmodel overrides), HX_DIFF_VERBOSE=1. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "ref/ref.h"
#include "test.h"

#define N_SEQ 64
#define N_STORIES 200
/* Teacher-forced positions compared: N_SEQ, 16 under make asan / ubsan
 * (the same batched prefill, every type and architecture, at a quarter of
 * the instrumented work). */
static int n_seq(void) { return test_sanitized() ? 16 : N_SEQ; }

static char tmpdir[256];

/* Which llama.cpp configuration to reproduce: "f16" is its CPU default (an
 * F16 KV cache with flash attention), "f32" hxref's exact one (F32 KV cache,
 * no flash attention; Hearth's kv_f32). HX_DIFF_KV overrides (debugging). */
static int g_kv_f32;
static void ref_config(int kv_f32)
{
    const char *kv = getenv("HX_DIFF_KV");
    g_kv_f32 = kv ? !strcmp(kv, "f32") : kv_f32;
    setenv("HXREF_KV", g_kv_f32 ? "f32" : "f16", 1);
    setenv("HXREF_FLASH", g_kv_f32 ? "0" : "1", 1);
    /* one thread each: spinning pool threads crawl on a busy machine */
    setenv("HXREF_THREADS", "1", 0);
}

static int ref_ready(void)
{
    char why[512];
    if (ref_available(why, sizeof why)) return 1;
    test_skip("%s", why);
    return 0;
}

/* ---- stories260K: 200 greedy tokens, exact ids ---- */
static int hearth_greedy(hx_model *m, const int32_t *prompt, int n_prompt,
                         int n_gen, int32_t *out, hx_err *err)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = n_prompt + n_gen;
    cp.kv_f32 = g_kv_f32;
    cp.n_threads = 1;
    hx_ctx *c = NULL;
    int rc = hx_ctx_new(m, &cp, &c, err);
    if (rc) return rc;
    hx_sampler_params sp = hx_sampler_default_params();
    sp.temp = 0;
    hx_sampler *s = hx_sampler_new(&sp);
    int32_t n_vocab = hx_model_hparams(m)->n_vocab;
    rc = s ? hx_decode(c, prompt, n_prompt, 0) : HX_ERR_NOMEM;
    for (int i = 0; !rc && i < n_gen; i++) {
        out[i] = hx_sampler_sample(s, hx_ctx_logits(c, -1), n_vocab);
        hx_sampler_accept(s, out[i]);
        if (i + 1 < n_gen) rc = hx_decode(c, &out[i], 1, 0);
    }
    if (rc) hx_err_set(err, rc, "%s", hx_ctx_errmsg(c));
    hx_sampler_free(s);
    hx_ctx_free(c);
    return rc;
}

static void stories_greedy(void)
{
    const char *path = test_shared_file("models/stories260K.gguf");
    if (!path || !ref_ready()) return;
    static const char text[] = "Once upon a time";
    int32_t ref_prompt[64], ours[64], ref_out[N_STORIES], got[N_STORIES];
    int n_ref = ref_tokenize(path, text, strlen(text), 0, 1, ref_prompt, 64);
    if (n_ref < 0) printf("     %s\n", ref_error());
    ASSERT(n_ref > 1);
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    int n = hx_tokenize(hx_model_vocab(m), text, strlen(text), ours, 64, 1, 0);
    EXPECT_EQ_INT(n, n_ref);
    EXPECT(n == n_ref && !memcmp(ours, ref_prompt, (size_t)n * sizeof *ours));
    int r = ref_generate(path, ref_prompt, n_ref, N_STORIES, ref_out);
    if (r < 0) printf("     %s\n", ref_error());
    ASSERT(r == N_STORIES);
    int rc = hearth_greedy(m, ref_prompt, n_ref, N_STORIES, got, &err);
    if (rc) printf("     %s\n", err.msg);
    ASSERT(rc == HX_OK);
    int first = -1;
    for (int i = 0; i < N_STORIES && first < 0; i++)
        if (got[i] != ref_out[i]) first = i;
    if (first >= 0)
        printf("     first difference at token %d: hearth %d, llama.cpp %d\n",
               first, got[first], ref_out[first]);
    EXPECT_EQ_INT(first, -1);
    printf("# stories260K (%s): %d of %d greedy tokens equal to llama.cpp's\n",
           g_kv_f32 ? "F32 KV" : "F16 KV, flash attention", first < 0 ? N_STORIES : first,
           N_STORIES);
    hx_model_free(m);
}

/* llama.cpp's defaults (F16 KV cache, flash attention) */
static void test_stories260k_greedy_exact(void)
{
    ref_config(0);
    stories_greedy();
}

static void test_stories260k_greedy_exact_kv_f32(void)
{
    ref_config(1);
    stories_greedy();
}

/* ---- generated models: teacher-forced logits by NMSE ---- */
typedef struct type_case {
    const char *ftype;
    double tol; /* max NMSE over the N_SEQ positions */
} type_case;

/* Tolerances on the max over the 64 positions of NMSE(llama.cpp, Hearth),
 * F32 KV cache on both sides. Measured on this tree (qwen3 / qwen3moe, max):
 *   F32 2e-13: equal up to summation order.
 *   F16 2e-7, BF16 1e-5: at every position, but ulp-level: one role in
 *     F16 on an F32 model gives 1e-10..5e-9, and F32 instead of F16/BF16
 *     activations (tried) is further from llama.cpp, not closer.
 *   8-bit and K-quant activations: mostly 1e-13 up to the first rounding
 *     flip of a quantized activation (ulp-level differences in SiLU/softmax
 *     expf and attention summation move a value across a boundary); from
 *     there on 1e-6..3e-4. Some models have no flip at all (1e-13). */
static const type_case k_cases[] = {
    {"F32", 1e-9},  {"F16", 1e-6},  {"BF16", 5e-5}, {"Q8_0", 1e-3},
    {"Q4_0", 1e-3}, {"Q4_K", 1e-3}, {"Q5_K", 1e-3}, {"Q6_K", 1e-3},
    {"Q4_K_M", 1e-3}, {"Q5_K_M", 1e-3},
};
#define N_CASES (sizeof k_cases / sizeof k_cases[0])

/* A fixed pseudo-random sequence of ordinary Qwen2 tokens (ids below the
 * special ones at 151643). */
static void make_sequence(int32_t *ids, int n, int32_t n_normal)
{
    uint64_t x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)n_normal);
    }
}

static int hearth_logits(const char *path, const int32_t *ids, int n,
                         float **out, int *n_vocab, hx_err *err)
{
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    int rc = hx_model_load(path, &mp, &m, err);
    if (rc) return rc;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 2 * n;
    cp.kv_f32 = g_kv_f32;
    cp.n_threads = 1;
    hx_ctx *c = NULL;
    rc = hx_ctx_new(m, &cp, &c, err);
    if (!rc && (rc = hx_decode(c, ids, n, 1)))
        hx_err_set(err, rc, "%s", hx_ctx_errmsg(c));
    *n_vocab = hx_model_hparams(m)->n_vocab;
    *out = rc ? NULL : malloc((size_t)n * (size_t)*n_vocab * sizeof **out);
    for (int i = 0; *out && i < n; i++)
        memcpy(*out + (size_t)i * *n_vocab, hx_ctx_logits(c, i),
               (size_t)*n_vocab * sizeof **out);
    if (!rc && !*out) rc = HX_ERR_NOMEM;
    hx_ctx_free(c);
    hx_model_free(m);
    return rc;
}

/* Writes the model, runs both engines, returns max NMSE (or -1). */
static double compare_model(const char *arch, const char *ftype,
                            double *mean_out)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%s.gguf", tmpdir, arch, ftype);
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = arch;
    p.ftype = ftype;
    p.vocab_path = vocab;
    p.n_layer = 2;
    p.tensor_types = getenv("HX_DIFF_TT"); /* for debugging */
    /* the float types are large with a 152k vocabulary: tie the head */
    p.tied_output = !strcmp(ftype, "F32") || !strcmp(ftype, "F16") ||
                    !strcmp(ftype, "BF16");
    hx_err err = {0};
    if (hx_mkmodel_write(&p, path, &err) != HX_OK) {
        test_fail_at(__FILE__, __LINE__, "mkmodel %s %s: %s", arch, ftype, err.msg);
        return -1;
    }
    const int n = n_seq();
    int32_t ids[N_SEQ];
    make_sequence(ids, n, 151643);
    float *ref = NULL, *got = NULL;
    int nv_ref = 0, nv = 0;
    double worst = -1, sum = 0;
    if (ref_logits(path, ids, n, &ref, &nv_ref) != 0)
        test_fail_at(__FILE__, __LINE__, "%s %s: llama.cpp: %s", arch, ftype,
                     ref_error());
    else if (hearth_logits(path, ids, n, &got, &nv, &err) != HX_OK)
        test_fail_at(__FILE__, __LINE__, "%s %s: hearth: %s", arch, ftype, err.msg);
    else if (nv != nv_ref)
        test_fail_at(__FILE__, __LINE__, "%s %s: n_vocab %d vs llama.cpp %d",
                     arch, ftype, nv, nv_ref);
    else {
        worst = 0;
        for (int i = 0; i < n; i++) {
            double e = test_nmse(ref + (size_t)i * nv, got + (size_t)i * nv, (size_t)nv);
            if (getenv("HX_DIFF_VERBOSE")) printf("#   pos %2d nmse %.3e\n", i, e);
            if (!(e <= worst)) worst = e; /* NaN sticks */
            sum += e;
        }
        *mean_out = sum / n;
    }
    free(ref);
    free(got);
    unlink(path);
    return worst;
}

static void compare_arch(const char *arch)
{
    const char *only_arch = getenv("HX_DIFF_ARCH"); /* for debugging */
    ref_config(1);
    if (only_arch && strcmp(only_arch, arch)) SKIP("HX_DIFF_ARCH=%s", only_arch);
    if (!ref_ready()) return;
    if (!test_shared_file("vocab/ggml-vocab-qwen2.gguf")) return;
    const char *only = getenv("HX_DIFF_ONLY"); /* e.g. "Q8_0", for debugging */
    for (size_t i = 0; i < N_CASES; i++) {
        if (only && strcmp(only, k_cases[i].ftype)) continue;
        double mean = 0, worst = compare_model(arch, k_cases[i].ftype, &mean);
        if (worst < 0 && !isnan(worst)) continue; /* failure reported */
        int ok = worst <= k_cases[i].tol;
        printf("# %-8s %-6s nmse max %.2e mean %.2e (tolerance %.0e)%s\n", arch,
               k_cases[i].ftype, worst, mean, k_cases[i].tol, ok ? "" : "  FAIL");
        fflush(stdout);
        if (!ok)
            test_fail_at(__FILE__, __LINE__, "%s %s: NMSE %.3e > %.0e", arch,
                         k_cases[i].ftype, worst, k_cases[i].tol);
    }
}

static void test_qwen3_logits_every_type(void) { compare_arch("qwen3"); }
static void test_qwen3moe_logits_every_type(void) { compare_arch("qwen3moe"); }

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_diff.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_stories260k_greedy_exact);
    RUN(test_stories260k_greedy_exact_kv_f32);
    RUN(test_qwen3_logits_every_type);
    RUN(test_qwen3moe_logits_every_type);
    rmdir(tmpdir);
    return test_summary();
}
