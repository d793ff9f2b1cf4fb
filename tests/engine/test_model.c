/* test_model.c: model loading (errors named), the forward pass against a
 * naive scalar reference, batch vs token-by-token, KV truncation, routing. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/attn.h"
#include "engine/engine.h"
#include "engine/kernels.h"
#include "engine/model_int.h"
#include "modelfile/model_write.h"
#include "engine/quant.h"
#include "test.h"

#ifdef __SANITIZE_ADDRESS__
/* test_decode_errors asks for an impossible context: under ASan that must
 * be a NULL from the allocator (as without it), not an abort. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

static char g_dir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* A tiny random model: 2 layers, width 64, 4 query heads on 2 KV heads. */
static hx_mkmodel_params tiny(const char *arch)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = arch;
    p.n_vocab = 96;
    p.n_layer = 2;
    p.n_embd = 64;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 16;
    p.n_ff = 96;
    p.n_expert = 4;
    p.n_expert_used = 2;
    p.n_ff_exp = 32;
    p.n_ctx = 256;
    return p;
}

static const char *write_tiny(const char *arch, const char *name, int tied)
{
    hx_mkmodel_params p = tiny(arch);
    p.tied_output = tied;
    hx_err err = {0};
    const char *path = tmp_path(name);
    if (hx_mkmodel_write(&p, path, &err) != HX_OK) {
        printf("# mkmodel: %s\n", err.msg);
        return NULL;
    }
    return path;
}

/* ---- the naive reference: one token at a time, doubles, plain loops ----
 * It follows llama.cpp's definition of the models, with the one rounding
 * that changes results beyond float noise: K and V are stored as fp16. */
typedef struct ref {
    const hx_gguf *g;
    const hx_hparams *hp;
    float *kc, *vc; /* (layer, pos, n_head_kv*head_dim) */
    int n_ctx;
    int kv_f16;     /* round cached K and V to fp16 */
} ref;

__attribute__((format(printf, 2, 3))) static const float *
W(const ref *r, const char *fmt, ...)
{
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const hx_gguf_tensor *t = hx_gguf_find_tensor(r->g, name);
    if (!t || t->type != HX_TYPE_F32) return NULL;
    return t->data;
}

static void r_matvec(const float *w, const float *x, int rows, int cols, float *y)
{
    for (int i = 0; i < rows; i++) {
        double s = 0;
        for (int j = 0; j < cols; j++) s += (double)w[(size_t)i * cols + j] * x[j];
        y[i] = (float)s;
    }
}

static void r_rmsnorm(float *o, const float *x, const float *w, int n, float eps)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i] * x[i];
    double sc = 1.0 / sqrt(s / n + eps);
    for (int i = 0; i < n; i++) o[i] = (float)(x[i] * sc * w[i]);
}

/* Rotation of pairs (i, i + d/2) (NEOX) or (2i, 2i+1) (NORM) with
 * ggml's angles (theta_i = pos * base^(-2i/d), the power taken step by
 * step in float as ggml does). */
static void r_rope(float *x, int d, int pos, float base, int neox)
{
    float ts = powf(base, -2.0f / (float)d), th = (float)pos;
    for (int i = 0; i < d / 2; i++) {
        int ia = neox ? i : 2 * i, ib = neox ? i + d / 2 : 2 * i + 1;
        double c = cos(th), s = sin(th), a = x[ia], b = x[ib];
        x[ia] = (float)(a * c - b * s);
        x[ib] = (float)(a * s + b * c);
        th *= ts;
    }
}

/* y += b when the bias exists. */
static void r_bias(float *y, const float *b, int n)
{
    for (int i = 0; b && i < n; i++) y[i] += b[i];
}

static float r_kv(const ref *r, float v)
{
    return r->kv_f16 ? hx_fp16_to_fp32(hx_fp32_to_fp16(v)) : v;
}

static void r_attention(ref *r, int il, int pos, float *x)
{
    const hx_hparams *hp = r->hp;
    const int e = hp->n_embd, d = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv;
    float xn[256], q[256], k[256], v[256], att[256], o[256];
    r_rmsnorm(xn, x, W(r, "blk.%d.attn_norm.weight", il), e, hp->rms_eps);
    r_matvec(W(r, "blk.%d.attn_q.weight", il), xn, nh * d, e, q);
    r_matvec(W(r, "blk.%d.attn_k.weight", il), xn, nkv * d, e, k);
    r_matvec(W(r, "blk.%d.attn_v.weight", il), xn, nkv * d, e, v);
    r_bias(q, W(r, "blk.%d.attn_q.bias", il), nh * d);
    r_bias(k, W(r, "blk.%d.attn_k.bias", il), nkv * d);
    r_bias(v, W(r, "blk.%d.attn_v.bias", il), nkv * d);
    const float *qn = W(r, "blk.%d.attn_q_norm.weight", il);
    const float *kn = W(r, "blk.%d.attn_k_norm.weight", il);
    const int neox = strcmp(hp->arch, "llama") != 0;
    for (int h = 0; h < nh; h++) {
        if (qn) r_rmsnorm(q + h * d, q + h * d, qn, d, hp->rms_eps);
        r_rope(q + h * d, d, pos, hp->rope_base, neox);
    }
    float *kc = r->kc + ((size_t)il * r->n_ctx + pos) * nkv * d;
    float *vc = r->vc + ((size_t)il * r->n_ctx + pos) * nkv * d;
    for (int h = 0; h < nkv; h++) {
        if (kn) r_rmsnorm(k + h * d, k + h * d, kn, d, hp->rms_eps);
        r_rope(k + h * d, d, pos, hp->rope_base, neox);
    }
    for (int i = 0; i < nkv * d; i++) {
        kc[i] = r_kv(r, k[i]);
        vc[i] = r_kv(r, v[i]);
    }
    for (int h = 0; h < nh; h++) {
        int kh = h / (nh / nkv);
        double sc[1024], mx = -1e300, sum = 0;
        for (int p = 0; p <= pos; p++) {
            const float *kp = r->kc + ((size_t)il * r->n_ctx + p) * nkv * d + kh * d;
            double s = 0;
            for (int i = 0; i < d; i++) s += (double)q[h * d + i] * kp[i];
            sc[p] = s / sqrt((double)d);
            if (sc[p] > mx) mx = sc[p];
        }
        for (int p = 0; p <= pos; p++) sum += sc[p] = exp(sc[p] - mx);
        for (int i = 0; i < d; i++) {
            double a = 0;
            for (int p = 0; p <= pos; p++)
                a += sc[p] * r->vc[((size_t)il * r->n_ctx + p) * nkv * d + kh * d + i];
            att[h * d + i] = (float)(a / sum);
        }
    }
    r_matvec(W(r, "blk.%d.attn_output.weight", il), att, e, nh * d, o);
    for (int i = 0; i < e; i++) x[i] += o[i];
}

/* SwiGLU through matrices gate/up (f, e) and down (e, f), added with weight
 * w into out. */
static void r_swiglu(const float *gate, const float *up, const float *down,
                     const float *xn, int e, int f, double w, double *out)
{
    float g[512], u[512], y[256];
    r_matvec(gate, xn, f, e, g);
    r_matvec(up, xn, f, e, u);
    for (int i = 0; i < f; i++) g[i] = (float)(g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
    r_matvec(down, g, e, f, y);
    for (int i = 0; i < e; i++) out[i] += w * y[i];
}

static void r_ffn(ref *r, int il, float *x)
{
    const hx_hparams *hp = r->hp;
    const int e = hp->n_embd;
    float xn[256];
    double out[256] = {0};
    r_rmsnorm(xn, x, W(r, "blk.%d.ffn_norm.weight", il), e, hp->rms_eps);
    if (!hp->n_expert) {
        r_swiglu(W(r, "blk.%d.ffn_gate.weight", il), W(r, "blk.%d.ffn_up.weight", il),
                 W(r, "blk.%d.ffn_down.weight", il), xn, e, hp->n_ff, 1.0, out);
    } else {
        const int ne = hp->n_expert, nu = hp->n_expert_used, f = hp->n_ff_exp;
        float lg[64];
        double p[64], mx = -1e300, sum = 0, wsum = 0;
        int sel[64], used[64] = {0};
        r_matvec(W(r, "blk.%d.ffn_gate_inp.weight", il), xn, ne, e, lg);
        for (int i = 0; i < ne; i++) mx = lg[i] > mx ? lg[i] : mx;
        for (int i = 0; i < ne; i++) sum += p[i] = exp(lg[i] - mx);
        for (int s = 0; s < nu; s++) {
            int b = -1;
            for (int i = 0; i < ne; i++)
                if (!used[i] && (b < 0 || p[i] > p[b])) b = i;
            used[b] = 1;
            sel[s] = b;
            wsum += p[b] / sum;
        }
        size_t m = (size_t)f * e;
        for (int s = 0; s < nu; s++)
            r_swiglu(W(r, "blk.%d.ffn_gate_exps.weight", il) + sel[s] * m,
                     W(r, "blk.%d.ffn_up_exps.weight", il) + sel[s] * m,
                     W(r, "blk.%d.ffn_down_exps.weight", il) + sel[s] * m, xn, e, f,
                     p[sel[s]] / sum / wsum, out);
    }
    for (int i = 0; i < e; i++) x[i] += (float)out[i];
}

/* Logits (n, n_vocab) of tokens tok[0..n) at positions 0..n-1. */
static void ref_forward(const hx_model *m, const int32_t *tok, int n,
                        int kv_f16, float *logits)
{
    ref r = {hx_model_gguf(m), hx_model_hparams(m), NULL, NULL, n, kv_f16};
    const hx_hparams *hp = r.hp;
    const int e = hp->n_embd, kvd = hp->n_head_kv * hp->head_dim;
    r.kc = calloc((size_t)hp->n_layer * n * kvd, sizeof(float));
    r.vc = calloc((size_t)hp->n_layer * n * kvd, sizeof(float));
    const float *emb = W(&r, "token_embd.weight");
    const float *out = W(&r, "output.weight");
    if (!out) out = emb;
    for (int t = 0; t < n; t++) {
        float x[256], xn[256];
        memcpy(x, emb + (size_t)tok[t] * e, (size_t)e * sizeof(float));
        for (int il = 0; il < hp->n_layer; il++) {
            r_attention(&r, il, t, x);
            r_ffn(&r, il, x);
        }
        r_rmsnorm(xn, x, W(&r, "output_norm.weight"), e, hp->rms_eps);
        r_matvec(out, xn, hp->n_vocab, e, logits + (size_t)t * hp->n_vocab);
    }
    free(r.kc);
    free(r.vc);
}

/* ---- helpers ---- */

static hx_model *load(const char *path)
{
    hx_err err = {0};
    hx_model *m = NULL;
    if (hx_model_load(path, NULL, &m, &err) != HX_OK)
        printf("# load %s: %s\n", path, err.msg);
    return m;
}

static hx_ctx *new_ctx_kv(hx_model *m, int n_threads, int kv_f32)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 256;
    cp.n_threads = n_threads;
    cp.kv_f32 = kv_f32;
    hx_err err = {0};
    hx_ctx *c = NULL;
    if (hx_ctx_new(m, &cp, &c, &err) != HX_OK) printf("# ctx: %s\n", err.msg);
    return c;
}

static void make_tokens(int32_t *tok, int n, int n_vocab, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        tok[i] = (int32_t)((seed >> 8) % (unsigned)n_vocab);
    }
}

static hx_ctx *new_ctx(hx_model *m, int n_threads)
{
    return new_ctx_kv(m, n_threads, 0);
}

/* Worst NMSE over rows of two (n, nv) logits arrays. */
static double worst_nmse(const float *a, const float *b, int n, int nv)
{
    double w = 0;
    for (int i = 0; i < n; i++) {
        double e = test_nmse(a + (size_t)i * nv, b + (size_t)i * nv, (size_t)nv);
        if (e > w) w = e;
    }
    return w;
}

/* Runs tokens in pieces of `step` and gathers every position's logits. */
static int run_pieces(hx_ctx *c, const int32_t *tok, int n, int step, float *out)
{
    const int nv = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    for (int off = 0; off < n; off += step) {
        int k = n - off < step ? n - off : step;
        int rc = hx_decode(c, tok + off, k, 1);
        if (rc) return rc;
        for (int i = 0; i < k; i++)
            memcpy(out + (size_t)(off + i) * nv, hx_ctx_logits(c, i),
                   (size_t)nv * sizeof(float));
    }
    return HX_OK;
}

/* ---- tests ---- */

/* Runs tok through a fresh context in pieces of `step`; worst NMSE of
 * every position's logits against want. */
static double nmse_run(hx_model *m, int kv_f32, const int32_t *tok, int n,
                       int step, const float *want)
{
    const int nv = hx_model_hparams(m)->n_vocab;
    float *got = malloc((size_t)n * nv * sizeof(float));
    hx_ctx *c = new_ctx_kv(m, 2, kv_f32);
    double e = 1.0;
    if (got && c && run_pieces(c, tok, n, step, got) == HX_OK)
        e = worst_nmse(want, got, n, nv);
    hx_ctx_free(c);
    free(got);
    return e;
}

static int rewrite_qwen2(const char *src, const char *dst);

static void check_vs_reference(const char *arch, const char *file)
{
    const char *path = write_tiny(strcmp(arch, "qwen2") ? arch : "llama", file, 0);
    ASSERT(path);
    if (strcmp(arch, "qwen2") == 0) {
        const char *q2 = tmp_path("qwen2.gguf");
        ASSERT(rewrite_qwen2(path, q2) == 0);
        path = q2;
    }
    hx_model *m = load(path);
    ASSERT(m);
    const int n = 72, nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[72];
    make_tokens(tok, n, nv, 7);
    float *want = malloc((size_t)n * nv * sizeof(float));
    ASSERT(want);
    /* A float KV cache: every path is F32 and equals the reference. */
    ref_forward(m, tok, n, 0, want);
    double e1 = nmse_run(m, 1, tok, n, n, want);
    double e2 = nmse_run(m, 1, tok, n, 1, want);
    printf("# %s F32 KV vs reference: batch-72 %.3g, token-by-token %.3g\n",
           arch, e1, e2);
    EXPECT(e1 < 1e-10);
    EXPECT(e2 < 1e-10);
    /* The default fp16 cache, against the reference rounding K and V the
     * same way. A batch of >= 64 runs attention in F32 (only rare
     * one-ulp fp16 rounding flips differ); token by token, Q and the V
     * accumulator are fp16 as in llama.cpp: close, not identical. */
    ref_forward(m, tok, n, 1, want);
    e1 = nmse_run(m, 0, tok, n, n, want);
    e2 = nmse_run(m, 0, tok, n, 1, want);
    printf("# %s F16 KV vs reference: batch-72 %.3g, token-by-token %.3g\n",
           arch, e1, e2);
    EXPECT(e1 < 1e-8);
    EXPECT(e2 < 1e-5);
    hx_model_free(m);
    free(want);
}

static void test_qwen3_vs_reference(void) { check_vs_reference("qwen3", "q3.gguf"); }
static void test_qwen3moe_vs_reference(void) { check_vs_reference("qwen3moe", "q3moe.gguf"); }
static void test_llama_vs_reference(void) { check_vs_reference("llama", "ll.gguf"); }
static void test_qwen2_vs_reference(void) { check_vs_reference("qwen2", "ll2.gguf"); }

/* A batch of 16 (< 64: the fp16 path) against one token at a time. */
static void test_batch_vs_single(void)
{
    const char *path = write_tiny("qwen3", "q3b.gguf", 1);
    ASSERT(path);
    hx_model *m = load(path);
    ASSERT(m);
    EXPECT(hx_model_hparams(m)->tied_output);
    const int n = 40, nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[40];
    make_tokens(tok, n, nv, 3);
    float *a = malloc((size_t)n * nv * sizeof(float));
    float *b = malloc((size_t)n * nv * sizeof(float));
    hx_ctx *c = new_ctx(m, 2);
    ASSERT(c);
    EXPECT_EQ_INT(run_pieces(c, tok, n, 16, a), HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_past(c), n);
    hx_ctx_truncate(c, 0);
    EXPECT_EQ_INT(run_pieces(c, tok, n, 1, b), HX_OK);
    double e = worst_nmse(a, b, n, nv);
    printf("# batch-16 vs single: worst nmse %.3g\n", e);
    EXPECT(e < 1e-10);
    /* logits_all = 0 keeps only the last row, equal to the full run's. */
    hx_ctx_truncate(c, 0);
    EXPECT_EQ_INT(hx_decode(c, tok, 16, 0), HX_OK);
    EXPECT(hx_ctx_logits(c, 0) == NULL);
    ASSERT(hx_ctx_logits(c, -1) != NULL);
    EXPECT(test_nmse(a + 15 * nv, hx_ctx_logits(c, -1), (size_t)nv) < 1e-10);
    hx_ctx_free(c);
    /* A call longer than n_batch runs as several passes; every row kept. */
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_batch = 16;
    cp.n_threads = 2;
    hx_err err = {0};
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    EXPECT_EQ_INT(hx_decode(c, tok, n, 1), HX_OK);
    double w = 0;
    for (int i = 0; i < n; i++) {
        const float *lg = hx_ctx_logits(c, i);
        ASSERT(lg != NULL);
        double ei = test_nmse(b + (size_t)i * nv, lg, (size_t)nv);
        w = ei > w ? ei : w;
    }
    printf("# one call in passes of 16 vs single: worst nmse %.3g\n", w);
    EXPECT(w < 1e-10);
    EXPECT(hx_ctx_logits(c, n) == NULL);
    hx_ctx_free(c);
    hx_model_free(m);
    free(a);
    free(b);
}

/* Single-token passes over a cache view of 512 or more cells take
 * llama.cpp's split-KV form (one fp16 accumulator per thread's chunk,
 * merged in F32); with one thread or two, still the reference's numbers. */
static void test_long_context_split(void)
{
    const char *path = write_tiny("qwen3", "long.gguf", 0);
    ASSERT(path);
    hx_model *m = load(path);
    ASSERT(m);
    const int n = 600, nv = hx_model_hparams(m)->n_vocab;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    float *want = malloc((size_t)n * nv * sizeof(float));
    float *got = malloc((size_t)n * nv * sizeof(float));
    ASSERT(tok && want && got);
    make_tokens(tok, n, nv, 9);
    ref_forward(m, tok, n, 1, want);
    for (int nth = 1; nth <= 2; nth++) {
        hx_ctx_params cp = hx_ctx_default_params();
        cp.n_ctx = 1024;
        cp.n_threads = nth;
        hx_err err = {0};
        hx_ctx *c = NULL;
        ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
        EXPECT_EQ_INT(run_pieces(c, tok, n, 1, got), HX_OK);
        double e = worst_nmse(want + (size_t)300 * nv, got + (size_t)300 * nv, n - 300, nv);
        printf("# positions 300..599, %d thread(s): worst nmse %.3g\n", nth, e);
        EXPECT(e < 1e-5);
        hx_ctx_free(c);
    }
    hx_model_free(m);
    free(tok);
    free(want);
    free(got);
}

/* The scalar reference code paths (kernels and attention) against the
 * best ISA of this CPU, on a MoE model, both attention paths. F32 weights:
 * with 8-bit activations a one-ulp difference can flip a rounding and the
 * comparison would measure that, not the code (see forward.c). */
static void test_scalar_vs_simd(void)
{
    hx_mkmodel_params p = tiny("qwen3moe");
    hx_err err = {0};
    const char *path = tmp_path("isa.gguf");
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    hx_model *m = load(path);
    ASSERT(m);
    const int n = 70, nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[70];
    make_tokens(tok, n, nv, 5);
    if (hx_isa_detect() == HX_ISA_SCALAR) {
        hx_model_free(m);
        SKIP("this CPU has no SIMD path to compare");
    }
    float *a = malloc((size_t)n * nv * sizeof(float));
    float *b = malloc((size_t)n * nv * sizeof(float));
    int best = hx_isa_current();
    for (int run = 0; run < 4; run++) {
        const int step = run % 2 ? n : 1, kv_f32 = run / 2;
        hx_isa_set(HX_ISA_SCALAR);
        hx_ctx *c = new_ctx_kv(m, 2, kv_f32);
        if (c) EXPECT_EQ_INT(run_pieces(c, tok, n, step, a), HX_OK);
        hx_ctx_free(c);
        hx_isa_set(best);
        ASSERT(c);
        c = new_ctx_kv(m, 2, kv_f32);
        ASSERT(c);
        EXPECT_EQ_INT(run_pieces(c, tok, n, step, b), HX_OK);
        hx_ctx_free(c);
        double e = worst_nmse(a, b, n, nv);
        printf("# scalar vs %s, %s KV, passes of %d: worst nmse %.3g\n",
               hx_isa_name(best), kv_f32 ? "F32" : "F16", step, e);
        /* an fp16 cache adds rare one-ulp rounding flips */
        EXPECT(e < (kv_f32 ? 1e-10 : 1e-6));
    }
    hx_model_free(m);
    free(a);
    free(b);
}

/* The forward pass on quantized weights, scalar kernels against the best
 * set of this CPU (HEARTH_ISA's levels through hx_isa_set): Q8_0, Q4_0
 * and Q4_K_M (Q4_K with Q6_K attn_v, ffn_down and output) on a small
 * qwen3, prefill in one batch and token by token. Integer block sums are
 * exact in both; only the float order of summing blocks differs, so now
 * and then a next layer's 8-bit activation rounds one step apart. Such a
 * flip in K or V reaches every later position: on this random model one
 * flip costs about 1e-4 NMSE (measured worst: Q4_K_M 3.6e-4 on AVX-512;
 * Q4_0 1.1e-4 with SDOT, 9.9e-5 with NEON under qemu; with no flip 1e-14
 * or less). A wrong block, scale or row in a
 * kernel moves every logit and is caught by far; the kernels themselves
 * are compared to 1e-10 in test_kernels. */
#define QUANT_ISA_NMSE_TOL 2e-3

static void check_quant_isa(const char *ftype, int n_embd)
{
    hx_mkmodel_params p = tiny("qwen3");
    p.ftype = ftype;
    p.n_embd = p.n_ff = n_embd;
    p.head_dim = n_embd / p.n_head;
    hx_err err = {0};
    const char *path = tmp_path("qisa.gguf");
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    hx_model *m = load(path);
    ASSERT(m);
    const int n = 24, nv = hx_model_hparams(m)->n_vocab, best = hx_isa_current();
    int32_t tok[24];
    make_tokens(tok, n, nv, 11);
    float *a = malloc((size_t)n * nv * sizeof(float));
    float *b = malloc((size_t)n * nv * sizeof(float));
    ASSERT(a && b);
    for (int step = 1; step <= n; step += n - 1) {
        hx_isa_set(HX_ISA_SCALAR);
        hx_ctx *c = new_ctx(m, 2);
        int rc = c ? run_pieces(c, tok, n, step, a) : -1;
        hx_ctx_free(c);
        hx_isa_set(best);
        EXPECT_EQ_INT(rc, HX_OK);
        c = new_ctx(m, 2);
        rc = c ? run_pieces(c, tok, n, step, b) : -1;
        hx_ctx_free(c);
        EXPECT_EQ_INT(rc, HX_OK);
        double e = worst_nmse(a, b, n, nv);
        printf("# %s: scalar vs %s, passes of %d: worst nmse %.3g\n", ftype,
               hx_isa_name(best), step, e);
        if (!(e < QUANT_ISA_NMSE_TOL))
            test_fail_at(__FILE__, __LINE__, "%s scalar vs %s: nmse %g", ftype,
                         hx_isa_name(best), e);
    }
    hx_model_free(m);
    free(a);
    free(b);
}

static void test_quant_scalar_vs_simd(void)
{
    if (hx_isa_detect() == HX_ISA_SCALAR) SKIP("this CPU has no SIMD path to compare");
    check_quant_isa("Q8_0", 64);
    check_quant_isa("Q4_0", 64);
    check_quant_isa("Q4_K_M", 256); /* K-quant rows are multiples of 256 */
}

/* Truncating the cache and decoding again reproduces the logits. */
static void test_truncate(void)
{
    const char *path = write_tiny("qwen3moe", "q3t.gguf", 0);
    ASSERT(path);
    hx_model *m = load(path);
    ASSERT(m);
    const int nv = hx_model_hparams(m)->n_vocab;
    int32_t tok[30], other[10];
    make_tokens(tok, 30, nv, 11);
    make_tokens(other, 10, nv, 12);
    float *a = malloc((size_t)30 * nv * sizeof(float));
    float *b = malloc((size_t)30 * nv * sizeof(float));
    hx_ctx *c = new_ctx(m, 1);
    ASSERT(c);
    EXPECT_EQ_INT(run_pieces(c, tok, 30, 30, a), HX_OK);
    hx_ctx_truncate(c, 20);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 20);
    EXPECT_EQ_INT(hx_decode(c, other, 10, 1), HX_OK); /* overwrite 20..29 */
    hx_ctx_truncate(c, 20);
    EXPECT_EQ_INT(run_pieces(c, tok + 20, 10, 10, b + (size_t)20 * nv), HX_OK);
    double e = worst_nmse(a + (size_t)20 * nv, b + (size_t)20 * nv, 10, nv);
    printf("# after truncate: worst nmse %.3g\n", e);
    EXPECT(e < 1e-12);
    hx_ctx_truncate(c, 1000); /* beyond n_past: no change */
    EXPECT_EQ_INT(hx_ctx_n_past(c), 30);
    hx_ctx_free(c);
    hx_model_free(m);
    free(a);
    free(b);
}

static void test_decode_errors(void)
{
    const char *path = write_tiny("qwen3", "q3e.gguf", 0);
    ASSERT(path);
    hx_model *m = load(path);
    ASSERT(m);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 8;
    cp.n_threads = 1;
    hx_err err = {0};
    hx_ctx *c = NULL;
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    int32_t tok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    EXPECT_EQ_INT(hx_decode(c, tok, 9, 0), HX_ERR_FULL);
    EXPECT(strstr(hx_ctx_errmsg(c), "n_ctx 8") != NULL);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 0);
    int32_t bad = 96;
    EXPECT_EQ_INT(hx_decode(c, &bad, 1, 0), HX_ERR_RANGE);
    EXPECT_EQ_INT(hx_decode(c, tok, 0, 0), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_decode(c, tok, 8, 0), HX_OK);
    EXPECT_EQ_INT(hx_decode(c, tok, 1, 0), HX_ERR_FULL);
    hx_ctx_free(c);
    /* An impossible size is an error, not a crash. */
    cp.n_ctx = 2000000000;
    c = NULL;
    EXPECT_EQ_INT(hx_ctx_new(m, &cp, &c, &err), HX_ERR_NOMEM);
    EXPECT(c == NULL);
    EXPECT(strstr(err.msg, "2000000000 positions") != NULL);
    cp.n_ctx = -1;
    EXPECT_EQ_INT(hx_ctx_new(m, &cp, &c, &err), HX_ERR_INVALID);
    hx_model_free(m);
}

/* Routing on crafted router logits: softmax, top-k best first, weights
 * renormalised over the chosen experts. */
static void test_moe_route(void)
{
    float p[6] = {0.1f, 3.0f, -1.0f, 2.5f, 2.9f, -4.0f};
    int32_t sel[3];
    float w[3];
    hx_moe_route(p, 6, 3, 1, sel, w);
    EXPECT_EQ_INT(sel[0], 1);
    EXPECT_EQ_INT(sel[1], 4);
    EXPECT_EQ_INT(sel[2], 3);
    double z = exp(3.0) + exp(2.9) + exp(2.5);
    EXPECT(fabs(w[0] - exp(3.0) / z) < 1e-6);
    EXPECT(fabs(w[1] - exp(2.9) / z) < 1e-6);
    EXPECT(fabs(w[0] + w[1] + w[2] - 1.0) < 1e-6);
    float q[4] = {0, 0, 0, 0}; /* ties go to the lower index */
    hx_moe_route(q, 4, 2, 1, sel, w);
    EXPECT_EQ_INT(sel[0], 0);
    EXPECT_EQ_INT(sel[1], 1);
    EXPECT(fabs(w[0] - 0.5) < 1e-7);
}

/* The SIMD attention primitives against the scalar ones: elementwise fp16
 * updates bit for bit, dot products to float rounding. */
static void test_attn_ops(void)
{
    const hx_attn_ops *v = hx_attn_ops_get(), *r = hx_attn_ops_scalar();
    /* a SIMD level has its own set (AVX2/F16C, NEON), not the scalar one */
    if (hx_isa_current() > HX_ISA_SCALAR) EXPECT(v != r);
    enum { D = 45 }; /* 5 vectors of 8 and a tail */
    float q[D], k32[D], o1[D], o2[D];
    uint16_t k[D], a1[D], a2[D], h1[D], h2[D];
    for (int i = 0; i < D; i++) {
        q[i] = sinf((float)i * 0.7f) * 3.0f;
        k32[i] = cosf((float)i * 1.3f);
        k[i] = hx_fp32_to_fp16(k32[i]);
        a1[i] = a2[i] = hx_fp32_to_fp16(q[i] * 0.37f);
    }
    EXPECT(fabsf(v->dot_f16(q, k, D) - r->dot_f16(q, k, D)) < 1e-4f);
    EXPECT(fabsf(v->dot_f32(q, k32, D) - r->dot_f32(q, k32, D)) < 1e-4f);
    EXPECT(fabsf(v->dot_hh(k, a1, D) - r->dot_hh(k, a1, D)) < 1e-4f);
    v->mad_h(a1, k, 0.731f, D);
    r->mad_h(a2, k, 0.731f, D);
    v->scale_h(a1, 0.377f, D);
    r->scale_h(a2, 0.377f, D);
    EXPECT(memcmp(a1, a2, sizeof a1) == 0);
    v->to_f16(h1, q, D);
    r->to_f16(h2, q, D);
    EXPECT(memcmp(h1, h2, sizeof h1) == 0);
    v->from_f16(o1, h1, D);
    r->from_f16(o2, h2, D);
    EXPECT(memcmp(o1, o2, sizeof o1) == 0);
    memcpy(o2, o1, sizeof o1);
    v->axpy_f16(o1, k, 1.5f, D);
    r->axpy_f16(o2, k, 1.5f, D);
    for (int i = 0; i < D; i++) EXPECT(fabsf(o1[i] - o2[i]) < 1e-5f);
    memcpy(o2, o1, sizeof o1);
    float o3[D];
    memcpy(o3, o1, sizeof o1);
    v->axpy_f32(o1, k32, -0.6f, D);
    r->axpy_f32(o2, k32, -0.6f, D);
    for (int i = 0; i < D; i++) EXPECT(fabsf(o1[i] - o2[i]) < 1e-5f);
#if defined(__x86_64__)
    /* AVX2 and AVX-512 alike: an FMA for each element of the vectors of 8,
     * the tail as the scalar code (the 8-bit cache's V sums keep their bits
     * whichever set runs) */
    for (int i = 0; i < D; i++) {
        const float p = -0.6f * k32[i];
        o3[i] = i < D / 8 * 8 ? fmaf(-0.6f, k32[i], o3[i]) : o3[i] + p;
    }
    if (hx_isa_current() >= HX_ISA_AVX2) EXPECT(memcmp(o1, o3, sizeof o1) == 0);
#endif
}

/* The element-wise f16 ops of this CPU's set give the scalar bits over
 * the whole range: every half widened; floats from below the smallest
 * subnormal half to past the largest half (ties to even, overflow to
 * infinity) narrowed, accumulated and scaled. NaNs are left out. */
static void test_attn_ops_f16_exact(void)
{
    const hx_attn_ops *v = hx_attn_ops_get(), *r = hx_attn_ops_scalar();
    enum { NH = 65536, NF = 4099 }; /* odd: the vector ops' tails run too */
    uint16_t *h = malloc(NH * sizeof *h), *c1 = malloc(NF * sizeof *c1),
             *c2 = malloc(NF * sizeof *c2);
    float *f1 = malloc(NH * sizeof *f1), *f2 = malloc(NH * sizeof *f2);
    ASSERT(h && c1 && c2 && f1 && f2);
    int n = 0;
    for (uint32_t i = 0; i < NH; i++)
        if ((i & 0x7c00) != 0x7c00 || (i & 0x3ff) == 0) h[n++] = (uint16_t)i; /* no NaN */
    v->from_f16(f1, h, n);
    r->from_f16(f2, h, n);
    EXPECT(memcmp(f1, f2, (size_t)n * sizeof *f1) == 0);
    uint32_t seed = 12345;
    for (int i = 0; i < NF; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t exp = 100 + (seed >> 8) % 46, man = (seed >> 3) & 0x7fffff;
        if (i % 7 == 0) man = (man & ~0x1fffu) | 0x1000u; /* a tie at f16 precision */
        uint32_t bits = (seed >> 31) << 31 | exp << 23 | man;
        memcpy(&f1[i], &bits, sizeof bits);
    }
    v->to_f16(c1, f1, NF);
    r->to_f16(c2, f1, NF);
    EXPECT(memcmp(c1, c2, NF * sizeof *c1) == 0);
    /* acc = f16(fma(v, a, acc)), then acc = f16(acc * s) */
    memcpy(c2, c1, NF * sizeof *c1);
    v->mad_h(c1, h + 1000, 0.731f, NF);
    r->mad_h(c2, h + 1000, 0.731f, NF);
    EXPECT(memcmp(c1, c2, NF * sizeof *c1) == 0);
    v->scale_h(c1, 1.377f, NF);
    r->scale_h(c2, 1.377f, NF);
    EXPECT(memcmp(c1, c2, NF * sizeof *c1) == 0);
    free(h);
    free(c1);
    free(c2);
    free(f1);
    free(f2);
}

/* Two key tiles (the second shorter) of tile64 from ops with its first nr
 * rows asked for, from a fresh state, into m, l, acc. */
static void run_tiles(const hx_attn_ops *ops, const float *Qt, const float *K, const float *V,
                      const int *lim, int d, int nk, int nr, float *m, float *l, float *acc,
                      float *S)
{
    memset(acc, 0, (size_t)d * HX_ATT_LANES * sizeof *acc);
    for (int x = 0; x < HX_ATT_LANES; x++) m[x] = -INFINITY, l[x] = 0.0f;
    for (int t = 0; t < 2; t++)
        ops->tile64(Qt, K + (size_t)t * nk * d, V + (size_t)t * nk * d, nk - 3 * t, d, t * nk,
                    lim, 0.3f, m, l, acc, S, nr);
}

/* The tiled attention's key tile (tile64) for this CPU against the scalar
 * reference, over two tiles with rows that see different numbers of keys;
 * and each lane on its own: the rows reversed in the lanes give every row
 * the same numbers bit for bit (a row's result must not depend on which
 * rows share its tile: sliced and single-pass prefill agree on it), and so
 * does a tile asked for fewer rows (the tail of a pass; 1, one vector, a
 * vector and one, partial vectors), at an odd head size and at 128. */
static void test_attn_tile_d(int D)
{
    enum { L = HX_ATT_LANES, NK = 64, DMAX = 128 };
    const hx_attn_ops *v = hx_attn_ops_get(), *r = hx_attn_ops_scalar();
    static float Qt[DMAX * L] __attribute__((aligned(64))), Qr[DMAX * L] __attribute__((aligned(64)));
    static float K[2 * NK * DMAX], V[2 * NK * DMAX];
    static float acc[4][DMAX * L] __attribute__((aligned(64))), S[L * L] __attribute__((aligned(64)));
    float m[4][L], l[4][L];
    int lim[L], limr[L];
    for (int i = 0; i < D * L; i++) {
        Qt[i] = sinf((float)i * 0.37f) * 2.0f;
        Qr[(i / L) * L + (L - 1 - i % L)] = Qt[i];
    }
    for (int i = 0; i < 2 * NK * D; i++) {
        K[i] = cosf((float)i * 0.11f);
        V[i] = sinf((float)i * 0.23f + 1.0f);
    }
    for (int x = 0; x < L; x++) lim[x] = 1 + (x * 37) % (2 * NK), limr[L - 1 - x] = lim[x];
    run_tiles(v, Qt, K, V, lim, D, NK, L, m[0], l[0], acc[0], S);
    run_tiles(r, Qt, K, V, lim, D, NK, L, m[1], l[1], acc[1], S);
    run_tiles(v, Qr, K, V, limr, D, NK, L, m[2], l[2], acc[2], S);
    double err = 0, norm = 0;
    int same = 1;
    for (int x = 0; x < L; x++) {
        EXPECT(fabsf(l[0][x] - l[1][x]) <= 1e-5f * l[1][x]);
        same &= l[0][x] == l[2][L - 1 - x] && m[0][x] == m[2][L - 1 - x];
        for (int i = 0; i < D; i++) {
            const float a = acc[0][i * L + x] / l[0][x], b = acc[1][i * L + x] / l[1][x];
            err += (double)(a - b) * (a - b);
            norm += (double)b * b;
            same &= acc[0][i * L + x] == acc[2][i * L + L - 1 - x];
        }
    }
    printf("# tile64 vs scalar, head size %d: nmse %.3g\n", D, err / norm);
    EXPECT(err / norm < 1e-10);
    EXPECT(same);
    static const int nrs[] = {1, 16, 17, 40, 63};
    for (size_t k = 0; k < sizeof nrs / sizeof *nrs; k++) {
        run_tiles(v, Qt, K, V, lim, D, NK, nrs[k], m[3], l[3], acc[3], S);
        int rows_same = 1;
        for (int x = 0; x < nrs[k]; x++) {
            rows_same &= l[3][x] == l[0][x] && m[3][x] == m[0][x];
            for (int i = 0; i < D; i++) rows_same &= acc[3][i * L + x] == acc[0][i * L + x];
        }
        if (!rows_same) test_fail_at(__FILE__, __LINE__, "tile64 of %d rows differs", nrs[k]);
    }
}

static void test_attn_tile(void)
{
    test_attn_tile_d(36);
    test_attn_tile_d(128);
}

/* ---- load errors: rewrite a good file with one thing broken ---- */

typedef struct edit {
    const char *drop;     /* tensor left out */
    const char *reshape;  /* tensor given a wrong shape */
    const char *arch;     /* new general.architecture */
    const char *q5_0;     /* tensor relabelled Q5_0 (a type with no matmul) */
    const char *rename;   /* tensor renamed to blk.0.attn_qkv.weight */
} edit;

static int rewrite(const char *src, const char *dst, const edit *ed)
{
    hx_err err = {0};
    hx_gguf *g = NULL;
    if (hx_gguf_open(src, &g, &err)) return -1;
    hx_gguf_writer *w = hx_gguf_writer_new();
    int rc = hx_gguf_copy_kv(w, g);
    if (ed->arch) hx_gguf_set_str(w, "general.architecture", ed->arch);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g) && !rc; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        if (ed->drop && strcmp(t->name, ed->drop) == 0) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (ed->reshape && strcmp(t->name, ed->reshape) == 0) {
            ne[0] = t->ne[1]; /* transposed */
            ne[1] = t->ne[0];
        }
        int type = t->type;
        const char *name = t->name;
        if (ed->q5_0 && strcmp(t->name, ed->q5_0) == 0) {
            type = HX_TYPE_Q5_0; /* 22 bytes per 32 F32 values: fits in the data */
        }
        if (ed->rename && strcmp(t->name, ed->rename) == 0) name = "blk.0.attn_qkv.weight";
        rc = hx_gguf_add_tensor(w, name, type, t->n_dims, ne, t->data, NULL, NULL);
    }
    if (!rc) rc = hx_gguf_writer_write(w, dst, &err);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    return rc;
}

/* A qwen2 model from a llama one: the arch and its keys renamed, biases
 * added to q, k and v. */
static int rewrite_qwen2(const char *src, const char *dst)
{
    hx_err err = {0};
    hx_gguf *g = NULL;
    if (hx_gguf_open(src, &g, &err)) return -1;
    hx_gguf_writer *w = hx_gguf_writer_new();
    int rc = hx_gguf_copy_kv(w, g);
    hx_gguf_set_str(w, "general.architecture", "qwen2");
    for (int64_t i = 0; i < hx_gguf_n_kv(g) && !rc; i++) {
        const char *k = hx_gguf_key_at(g, i);
        char nk[160];
        if (strncmp(k, "llama.", 6) != 0) continue;
        snprintf(nk, sizeof nk, "qwen2.%s", k + 6);
        float f;
        int64_t v;
        if (hx_gguf_kv_type(g, i) == HX_GGUF_F32 && !hx_gguf_get_f32(g, k, &f))
            rc = hx_gguf_set_f32(w, nk, f);
        else if (!hx_gguf_get_i64(g, k, &v))
            rc = hx_gguf_set_u32(w, nk, (uint32_t)v);
    }
    float *bias = malloc(4096 * sizeof(float));
    for (int j = 0; j < 4096; j++) bias[j] = 0.5f * sinf((float)j * 1.7f);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g) && !rc; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        rc = hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL);
        const char *dot = strstr(t->name, ".weight");
        if (rc || !dot || !(strstr(t->name, "attn_q.") || strstr(t->name, "attn_k.") ||
                            strstr(t->name, "attn_v.")))
            continue;
        char bn[96];
        snprintf(bn, sizeof bn, "%.*s.bias", (int)(dot - t->name), t->name);
        int64_t n = t->ne[1];
        rc = hx_gguf_add_tensor(w, bn, HX_TYPE_F32, 1, &n, bias + (i % 7), NULL, NULL);
    }
    if (!rc) rc = hx_gguf_writer_write(w, dst, &err);
    free(bias);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    return rc;
}

static void expect_load_error(const char *src, const edit *ed, int want_rc,
                              const char *want_msg)
{
    const char *dst = tmp_path("broken.gguf");
    ASSERT(rewrite(src, dst, ed) == 0);
    hx_err err = {0};
    hx_model *m = NULL;
    int rc = hx_model_load(dst, NULL, &m, &err);
    EXPECT_EQ_INT(rc, want_rc);
    EXPECT(m == NULL);
    if (!strstr(err.msg, want_msg))
        test_fail_at(__FILE__, __LINE__, "message '%s' lacks '%s'", err.msg, want_msg);
}

static void test_load_errors(void)
{
    const char *good = write_tiny("qwen3moe", "good.gguf", 0);
    ASSERT(good);
    char src[512]; /* tmp_path's buffers are reused */
    snprintf(src, sizeof src, "%s", good);
    edit e1 = {"blk.1.attn_k.weight", NULL, NULL, NULL, NULL};
    expect_load_error(src, &e1, HX_ERR_FORMAT, "missing tensor blk.1.attn_k.weight");
    edit e2 = {NULL, "blk.0.attn_k.weight", NULL, NULL, NULL};
    expect_load_error(src, &e2, HX_ERR_FORMAT,
                      "blk.0.attn_k.weight has shape [32, 64], expected [64, 32]");
    edit e4 = {NULL, "blk.0.ffn_down_exps.weight", NULL, NULL, NULL};
    expect_load_error(src, &e4, HX_ERR_FORMAT,
                      "blk.0.ffn_down_exps.weight has shape [64, 32, 4], expected [32, 64, 4]");
    edit e5 = {"blk.0.attn_q_norm.weight", NULL, NULL, NULL, NULL};
    expect_load_error(src, &e5, HX_ERR_FORMAT, "missing tensor blk.0.attn_q_norm.weight");
    edit e7 = {NULL, NULL, NULL, "blk.1.ffn_gate_exps.weight", NULL};
    expect_load_error(src, &e7, HX_ERR_UNSUPPORTED,
                      "blk.1.ffn_gate_exps.weight has type Q5_0, which Hearth cannot compute with");
    edit e8 = {NULL, NULL, NULL, NULL, "blk.0.attn_q.weight"};
    expect_load_error(src, &e8, HX_ERR_UNSUPPORTED,
                      "blk.0.attn_qkv.weight: fused Q/K/V weights are not supported");
    edit e6 = {NULL, NULL, "gpt2", NULL, NULL};
    expect_load_error(src, &e6, HX_ERR_UNSUPPORTED, "unknown architecture 'gpt2'");
    hx_err err = {0};
    hx_model *m = NULL;
    EXPECT(hx_model_load(tmp_path("absent.gguf"), NULL, &m, &err) != HX_OK);
    EXPECT(m == NULL);
    hx_model_free(NULL);
    hx_ctx_free(NULL);
}

/* check_tensors finds a NaN planted in a weight; without it the model
 * loads (the check costs a full read of the file). */
static void test_check_tensors(void)
{
    const char *src = write_tiny("qwen3", "nan.gguf", 0);
    ASSERT(src);
    hx_err err = {0};
    hx_gguf *g = NULL;
    ASSERT(hx_gguf_open(src, &g, &err) == HX_OK);
    hx_gguf_writer *w = hx_gguf_writer_new();
    EXPECT_EQ_INT(hx_gguf_copy_kv(w, g), HX_OK);
    float *bad = NULL;
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        const void *data = t->data;
        if (strcmp(t->name, "blk.1.ffn_up.weight") == 0) {
            bad = malloc(t->nbytes);
            memcpy(bad, t->data, t->nbytes);
            bad[77] = NAN;
            data = bad;
        }
        hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data, NULL, NULL);
    }
    const char *dst = tmp_path("nan2.gguf");
    EXPECT_EQ_INT(hx_gguf_writer_write(w, dst, &err), HX_OK);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    free(bad);
    hx_model_params mp = hx_model_default_params();
    hx_model *m = NULL;
    EXPECT_EQ_INT(hx_model_load(dst, &mp, &m, &err), HX_OK);
    hx_model_free(m);
    mp.check_tensors = 1;
    m = NULL;
    EXPECT_EQ_INT(hx_model_load(dst, &mp, &m, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "blk.1.ffn_up.weight holds a NaN or infinity at element 77") != NULL);
}

/* check_tensors reads quantized blocks' fp16 scales too: a NaN or an
 * infinity in d (or a K-quant's dmin) is named with the tensor, its type
 * and the block; without the check the model loads. */
static void test_check_tensors_quant(void)
{
    static const struct {
        const char *ftype, *ov, *tensor;
        int off;    /* of the fp16 in the block */
        uint16_t h; /* what is written there */
        const char *want;
    } c[] = {
        {"Q8_0", "ffn_down=Q4_K", "blk.0.attn_q.weight", (int)offsetof(hx_block_q8_0, d),
         0x7e00, "blk.0.attn_q.weight (Q8_0): block 3 has a NaN or infinite scale"},
        {"Q8_0", "ffn_down=Q4_K", "blk.1.ffn_down.weight", (int)offsetof(hx_block_q4_K, dmin),
         0x7c00, "blk.1.ffn_down.weight (Q4_K): block 3 has"},
        {"Q4_0", "ffn_down=Q6_K", "blk.0.ffn_gate.weight", (int)offsetof(hx_block_q4_0, d),
         0xfc00, "blk.0.ffn_gate.weight (Q4_0): block 3 has"},
        {"Q4_0", "ffn_down=Q6_K", "blk.0.ffn_down.weight", (int)offsetof(hx_block_q6_K, d),
         0x7c01, "blk.0.ffn_down.weight (Q6_K): block 3 has"},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        hx_mkmodel_params p = tiny("qwen3");
        p.n_embd = 64, p.n_ff = 256, p.ftype = c[k].ftype, p.tensor_types = c[k].ov;
        hx_err err = {0};
        const char *src = tmp_path("qscale.gguf"), *dst = tmp_path("qscale-bad.gguf");
        ASSERT(hx_mkmodel_write(&p, src, &err) == HX_OK);
        hx_gguf *g = NULL;
        ASSERT(hx_gguf_open(src, &g, &err) == HX_OK);
        hx_gguf_writer *w = hx_gguf_writer_new();
        EXPECT_EQ_INT(hx_gguf_copy_kv(w, g), HX_OK);
        uint8_t *bad = NULL;
        for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
            const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
            const void *data = t->data;
            if (!strcmp(t->name, c[k].tensor)) {
                ASSERT((bad = malloc(t->nbytes)));
                memcpy(bad, t->data, t->nbytes);
                memcpy(bad + 3 * hx_type_block_bytes(t->type) + c[k].off, &c[k].h, 2);
                data = bad;
            }
            hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data, NULL, NULL);
        }
        EXPECT(bad != NULL);
        EXPECT_EQ_INT(hx_gguf_writer_write(w, dst, &err), HX_OK);
        hx_gguf_writer_free(w);
        hx_gguf_close(g);
        free(bad);
        hx_model_params mp = hx_model_default_params();
        mp.check_tensors = 1;
        hx_model *m = NULL;
        EXPECT_EQ_INT(hx_model_load(src, &mp, &m, &err), HX_OK); /* the clean one */
        hx_model_free(m);
        m = NULL;
        EXPECT_EQ_INT(hx_model_load(dst, &mp, &m, &err), HX_ERR_FORMAT);
        EXPECT(m == NULL);
        if (!strstr(err.msg, c[k].want)) printf("     got: %s\n", err.msg);
        EXPECT(strstr(err.msg, c[k].want) != NULL);
        mp.check_tensors = 0;
        EXPECT_EQ_INT(hx_model_load(dst, &mp, &m, &err), HX_OK);
        hx_model_free(m);
        unlink(src);
        unlink(dst);
    }
}

/* Hyperparameters come from the metadata (the writer's qwen3moe). */
static void test_hparams(void)
{
    const char *path = write_tiny("qwen3moe", "hp.gguf", 0);
    ASSERT(path);
    hx_model *m = load(path);
    ASSERT(m);
    const hx_hparams *hp = hx_model_hparams(m);
    EXPECT_STR_EQ(hp->arch, "qwen3moe");
    EXPECT_EQ_INT(hp->n_vocab, 96);
    EXPECT_EQ_INT(hp->n_layer, 2);
    EXPECT_EQ_INT(hp->n_head_kv, 2);
    EXPECT_EQ_INT(hp->head_dim, 16);
    EXPECT_EQ_INT(hp->n_expert, 4);
    EXPECT_EQ_INT(hp->n_expert_used, 2);
    EXPECT_EQ_INT(hp->n_ff_exp, 32);
    EXPECT_EQ_INT(hp->rope_type, HX_ROPE_NEOX);
    EXPECT(hp->has_qk_norm);
    EXPECT(!hp->tied_output);
    EXPECT(hx_model_size_bytes(m) > (size_t)hx_model_n_params(m) * 4 - 1);
    EXPECT(hx_model_vocab(m) == NULL);
    hx_model_free(m);
}

/* The real stories260K (llama, SentencePiece vocabulary) loads and runs. */
static void test_stories260k(void)
{
    const char *path = test_shared_file("models/stories260K.gguf");
    if (!path) return;
    hx_model *m = load(path);
    ASSERT(m);
    const hx_hparams *hp = hx_model_hparams(m);
    EXPECT_STR_EQ(hp->arch, "llama");
    EXPECT_EQ_INT(hp->rope_type, HX_ROPE_NORM);
    EXPECT(hx_model_vocab(m) != NULL);
    hx_ctx *c = new_ctx(m, 2);
    ASSERT(c);
    int32_t tok[4] = {1, 403, 407, 261};
    ASSERT(hx_decode(c, tok, 4, 0) == HX_OK);
    const float *lg = hx_ctx_logits(c, -1);
    ASSERT(lg);
    int finite = 1;
    for (int i = 0; i < hp->n_vocab; i++) finite &= isfinite(lg[i]);
    EXPECT(finite);
    hx_ctx_free(c);
    hx_model_free(m);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_test_model.XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_moe_route);
    RUN(test_attn_ops);
    RUN(test_attn_ops_f16_exact);
    RUN(test_attn_tile);
    RUN(test_hparams);
    RUN(test_load_errors);
    RUN(test_check_tensors);
    RUN(test_check_tensors_quant);
    RUN(test_qwen3_vs_reference);
    RUN(test_qwen3moe_vs_reference);
    RUN(test_llama_vs_reference);
    RUN(test_qwen2_vs_reference);
    RUN(test_batch_vs_single);
    RUN(test_scalar_vs_simd);
    RUN(test_quant_scalar_vs_simd);
    RUN(test_long_context_split);
    RUN(test_truncate);
    RUN(test_decode_errors);
    RUN(test_stories260k);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) printf("# could not remove %s\n", g_dir);
    return test_summary();
}
