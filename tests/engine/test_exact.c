/* test_exact.c: Hearth's logits against the exact reference (exact.h:
 * double precision on the dequantized weights) on a small MoE shape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/exact.h"
#include "test.h"

static char g_dir[256];

/* A small qwen3moe whose kernels are those of the 30B-A3B: K-quant rows of
 * 256, Q8_K activations, a softmax top-k router over 16 experts, 4 used. */
static hx_mkmodel_params small_moe(const char *ftype, int layers)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3moe";
    p.ftype = ftype;
    p.n_vocab = 512;
    p.n_layer = layers;
    p.n_embd = 256;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 64;
    p.n_ff = 512;
    p.n_expert = 16;
    p.n_expert_used = 4;
    p.n_ff_exp = 256;
    p.n_ctx = 256;
    return p;
}

/* Max over positions of NMSE(exact, Hearth) for n tokens on a fresh
 * model of ftype and depth; -1 on error (reported). */
static double max_nmse(const char *ftype, int layers, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%d.gguf", g_dir, ftype, layers);
    hx_mkmodel_params p = small_moe(ftype, layers);
    hx_err err = {0};
    hx_model *m = NULL;
    hx_ctx *c = NULL;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 64;
    cp.kv_f32 = 1;
    cp.n_threads = 2;
    int32_t tok[32];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 131 + 7) % p.n_vocab);
    float *want = malloc(sizeof *want * (size_t)n * p.n_vocab);
    int rc = want ? hx_mkmodel_write(&p, path, &err) : HX_ERR_NOMEM;
    if (!rc) rc = hx_model_load(path, NULL, &m, &err);
    if (!rc) rc = hx_ctx_new(m, &cp, &c, &err);
    if (!rc && (rc = hx_decode(c, tok, n, 1))) hx_err_set(&err, rc, "%s", hx_ctx_errmsg(c));
    if (!rc) rc = hx_exact_logits(m, tok, n, 2, want, &err);
    double worst = -1;
    if (!rc) {
        worst = 0;
        for (int i = 0; i < n; i++) {
            double e = test_nmse(want + (size_t)i * p.n_vocab, hx_ctx_logits(c, i),
                                 (size_t)p.n_vocab);
            if (!(e <= worst)) worst = e; /* NaN sticks */
        }
    } else {
        test_fail_at(__FILE__, __LINE__, "%s %d layers: %s", ftype, layers, err.msg);
    }
    hx_ctx_free(c);
    hx_model_free(m);
    free(want);
    unlink(path);
    return worst;
}

/* On F32 weights nothing is quantized: the engine and the reference differ
 * by float rounding only, so the reference computes the same model. */
static void test_f32_equals_reference(void)
{
    double e = max_nmse("F32", 2, 16);
    printf("# F32 2 layers: nmse %.2e\n", e);
    EXPECT(e >= 0 && e < 1e-10);
}

/* Q4_K_M: the Q8_K activations (and nothing else) make the difference, and
 * it grows with depth; the tolerance is per layer (see bench/README.md,
 * "Logits error by depth"). */
static void test_q4_k_m_within_depth_tolerance(void)
{
    static const int depths[] = {1, 4};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        double e = max_nmse("Q4_K_M", depths[i], 16), tol = 1e-3 * depths[i];
        printf("# Q4_K_M %d layers: nmse %.2e (tolerance %.0e)\n", depths[i], e, tol);
        EXPECT(e >= 0 && e <= tol);
    }
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/hx_test_exact.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_f32_equals_reference);
    RUN(test_q4_k_m_within_depth_tolerance);
    rmdir(g_dir);
    return test_summary();
}
