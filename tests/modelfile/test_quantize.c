/* test_quantize.c: hx_quantize_model and importance matrices:
 * preset types per tensor, overrides, fallbacks, llama.cpp loading the
 * output with matching logits, Q8_0 near F32, calibration, bad inputs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "ref/ref.h"
#include "test.h"

#define N_SEQ 48
/* A 32k SPM vocabulary keeps the files and the head small (fast test) */
#define VOCAB "vocab/ggml-vocab-llama-spm.gguf"
#define N_NORMAL 32000

static char tmpdir[256];

static const char *tmp(const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

/* A random qwen3 model; vocab: the Qwen2 tokenizer or NULL (512 ids). */
static int make_model(const char *path, const char *ftype, int n_layer,
                      int tied, const char *vocab)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.ftype = ftype;
    p.n_layer = n_layer;
    p.tied_output = tied;
    p.vocab_path = vocab;
    hx_err err = {0};
    int rc = hx_mkmodel_write(&p, path, &err);
    if (rc) printf("     mkmodel: %s\n", err.msg);
    return rc;
}

static int quantize(const char *in, const char *out, const char *ftype,
                    const char *const *ov, int n_ov, const hx_imatrix *im,
                    hx_quantize_stats *st, hx_err *err)
{
    hx_quantize_params p = hx_quantize_default_params();
    p.ftype = ftype;
    p.overrides = ov;
    p.n_overrides = n_ov;
    p.imatrix = im;
    p.n_threads = 2;
    return hx_quantize_model(in, out, &p, st, err);
}

/* Type of a tensor in a file, or -1. */
static int type_in(const hx_gguf *g, const char *name)
{
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, name);
    return t ? t->type : -1;
}

/* ---- presets ---- */
typedef struct want {
    const char *name;
    int type;
} want;

static void check_types(const char *path, const want *w, int n)
{
    hx_gguf *g = NULL;
    hx_err err = {0};
    if (hx_gguf_open(path, &g, &err)) {
        test_fail_at(__FILE__, __LINE__, "open %s: %s", path, err.msg);
        return;
    }
    for (int i = 0; i < n; i++) {
        int got = type_in(g, w[i].name);
        if (got != w[i].type)
            test_fail_at(__FILE__, __LINE__, "%s: %s, want %s", w[i].name,
                         hx_type_name(got), hx_type_name(w[i].type));
    }
    hx_gguf_close(g);
}

/* 8 layers: llama.cpp's use_more_bits picks layers 0, 3, 6 and 7. */
static void test_q4_k_m_types(void)
{
    const char *in = tmp("p8.gguf"), *out = tmp("p8-q4km.gguf");
    ASSERT(make_model(in, "F32", 8, 0, NULL) == HX_OK);
    hx_quantize_stats st;
    hx_err err = {0};
    int rc = quantize(in, out, "Q4_K_M", NULL, 0, NULL, &st, &err);
    if (rc) printf("     %s\n", err.msg);
    ASSERT(rc == HX_OK);
    enum { Q4 = HX_TYPE_Q4_K, Q6 = HX_TYPE_Q6_K, F = HX_TYPE_F32 };
    static const want w[] = {
        {"token_embd.weight", Q4}, {"output.weight", Q6}, {"output_norm.weight", F},
        {"blk.0.attn_norm.weight", F}, {"blk.0.attn_q_norm.weight", F},
        {"blk.0.attn_k_norm.weight", F}, {"blk.0.ffn_norm.weight", F},
        {"blk.0.attn_q.weight", Q4}, {"blk.0.attn_k.weight", Q4},
        {"blk.0.attn_output.weight", Q4}, {"blk.0.ffn_gate.weight", Q4},
        {"blk.0.ffn_up.weight", Q4},
        {"blk.0.attn_v.weight", Q6}, {"blk.0.ffn_down.weight", Q6},
        {"blk.1.attn_v.weight", Q4}, {"blk.1.ffn_down.weight", Q4},
        {"blk.2.attn_v.weight", Q4}, {"blk.2.ffn_down.weight", Q4},
        {"blk.3.attn_v.weight", Q6}, {"blk.3.ffn_down.weight", Q6},
        {"blk.4.attn_v.weight", Q4}, {"blk.4.ffn_down.weight", Q4},
        {"blk.5.attn_v.weight", Q4}, {"blk.5.ffn_down.weight", Q4},
        {"blk.6.attn_v.weight", Q6}, {"blk.6.ffn_down.weight", Q6},
        {"blk.7.attn_v.weight", Q6}, {"blk.7.ffn_down.weight", Q6},
        {"blk.7.attn_q.weight", Q4}, {"blk.7.ffn_up.weight", Q4},
    };
    check_types(out, w, (int)(sizeof w / sizeof w[0]));
    EXPECT_EQ_INT(st.count[HX_TYPE_Q6_K], 9);
    EXPECT_EQ_INT(st.n_fallback, 0);
    EXPECT_EQ_INT(st.n_requant, 0);
    hx_gguf *g = NULL;
    ASSERT(hx_gguf_open(out, &g, &err) == HX_OK);
    uint32_t ft = 0, qv = 0;
    EXPECT(hx_gguf_get_u32(g, "general.file_type", &ft) == HX_OK && ft == 15);
    EXPECT(hx_gguf_get_u32(g, "general.quantization_version", &qv) == HX_OK && qv == 2);
    const char *arch = NULL;
    EXPECT(hx_gguf_get_str(g, "general.architecture", &arch) == HX_OK &&
           !strcmp(arch, "qwen3"));
    EXPECT(st.bytes_out < st.bytes_in / 5); /* F32 -> ~4.9 bpw */
    hx_gguf_close(g);
    unlink(out);
}

/* Tied head: token_embd is the output and gets Q6_K; Q8_0 keeps Q8_0. */
static void test_tied_and_q8_0(void)
{
    const char *in = tmp("tied.gguf"), *out = tmp("tied-q.gguf");
    ASSERT(make_model(in, "F16", 2, 1, NULL) == HX_OK);
    hx_err err = {0};
    ASSERT(quantize(in, out, "Q4_K_M", NULL, 0, NULL, NULL, &err) == HX_OK);
    static const want w1[] = {{"token_embd.weight", HX_TYPE_Q6_K},
                              {"blk.0.attn_q.weight", HX_TYPE_Q4_K},
                              {"blk.1.attn_v.weight", HX_TYPE_Q6_K}};
    check_types(out, w1, 3);
    ASSERT(quantize(in, out, "Q8_0", NULL, 0, NULL, NULL, &err) == HX_OK);
    static const want w2[] = {{"token_embd.weight", HX_TYPE_Q8_0},
                              {"blk.0.attn_v.weight", HX_TYPE_Q8_0},
                              {"blk.0.attn_norm.weight", HX_TYPE_F32}};
    check_types(out, w2, 3);
    ASSERT(quantize(in, out, "Q4_0", NULL, 0, NULL, NULL, &err) == HX_OK);
    static const want w3[] = {{"token_embd.weight", HX_TYPE_Q6_K},
                              {"blk.0.ffn_down.weight", HX_TYPE_Q4_0}};
    check_types(out, w3, 2);
    /* BF16 input */
    ASSERT(make_model(in, "BF16", 2, 1, NULL) == HX_OK);
    hx_quantize_stats st;
    ASSERT(quantize(in, out, "Q4_K_M", NULL, 0, NULL, &st, &err) == HX_OK);
    check_types(out, w1, 3);
    EXPECT_EQ_INT(st.n_requant, 0);
    hx_model *m = NULL;
    EXPECT(hx_model_load(out, NULL, &m, &err) == HX_OK);
    hx_model_free(m);
    unlink(out);
    unlink(in);
}

static void test_overrides(void)
{
    const char *in = tmp("p8.gguf"), *out = tmp("p8-ov.gguf");
    const char *ov[] = {"*attn_output*=F16", "blk.1.*=Q8_0",
                        "blk.1.ffn_up.weight=Q5_K", "output.weight=Q8_0"};
    hx_err err = {0};
    ASSERT(quantize(in, out, "Q4_K_M", ov, 4, NULL, NULL, &err) == HX_OK);
    static const want w[] = {
        {"blk.0.attn_output.weight", HX_TYPE_F16},
        {"blk.1.attn_output.weight", HX_TYPE_Q8_0}, /* later match wins */
        {"blk.1.attn_q.weight", HX_TYPE_Q8_0},
        {"blk.1.ffn_up.weight", HX_TYPE_Q5_K},
        {"blk.1.attn_norm.weight", HX_TYPE_F32}, /* norms never quantized */
        {"blk.2.attn_q.weight", HX_TYPE_Q4_K},
        {"output.weight", HX_TYPE_Q8_0},
        {"blk.7.attn_output.weight", HX_TYPE_F16},
    };
    check_types(out, w, (int)(sizeof w / sizeof w[0]));
    unlink(out);
}

/* Every single type of the file-type table is an override's TYPE, each
 * applied as named (the list is the table's, modelfile/ftype_int.h). */
static void test_override_every_type(void)
{
    const char *in = tmp("p8.gguf"), *out = tmp("p8-ov-all.gguf");
    const char *ov[] = {"blk.0.attn_q.weight=F32",      "blk.0.attn_k.weight=F16",
                        "blk.0.attn_v.weight=BF16",     "blk.0.attn_output.weight=Q8_0",
                        "blk.0.ffn_up.weight=Q4_K",     "blk.0.ffn_gate.weight=Q5_K",
                        "blk.1.attn_q.weight=Q6_K",     "blk.1.attn_k.weight=Q4_0"};
    hx_err err = {0};
    ASSERT(quantize(in, out, "Q8_0", ov, 8, NULL, NULL, &err) == HX_OK);
    static const want w[] = {
        {"blk.0.attn_q.weight", HX_TYPE_F32},      {"blk.0.attn_k.weight", HX_TYPE_F16},
        {"blk.0.attn_v.weight", HX_TYPE_BF16},     {"blk.0.attn_output.weight", HX_TYPE_Q8_0},
        {"blk.0.ffn_up.weight", HX_TYPE_Q4_K},     {"blk.0.ffn_gate.weight", HX_TYPE_Q5_K},
        {"blk.1.attn_q.weight", HX_TYPE_Q6_K},     {"blk.1.attn_k.weight", HX_TYPE_Q4_0},
        {"blk.1.attn_v.weight", HX_TYPE_Q8_0}, /* the preset's */
    };
    check_types(out, w, (int)(sizeof w / sizeof w[0]));
    unlink(out);
    /* the mixes and a type outside the table (Q8_K: activations only) are not */
    const char *bad_ov[][1] = {{"x=Q5_K_M"}, {"x=Q8_K"}, {"x=q8_0"}};
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ_INT(quantize(in, out, "Q4_K_M", bad_ov[i], 1, NULL, NULL, &err),
                      HX_ERR_INVALID);
        EXPECT(strstr(err.msg, "bad override") != NULL);
    }
}

/* stories260K: rows of 64 cannot hold K-quant blocks: Q8_0 instead. */
static void test_stories_fallback(void)
{
    const char *in = test_shared_file("models/stories260K.gguf");
    if (!in) return;
    const char *out = tmp("stories-q4km.gguf");
    hx_quantize_stats st;
    hx_err err = {0};
    int rc = quantize(in, out, "Q4_K_M", NULL, 0, NULL, &st, &err);
    if (rc) printf("     %s\n", err.msg);
    ASSERT(rc == HX_OK);
    EXPECT(st.n_fallback > 0);
    EXPECT_EQ_INT(st.count[HX_TYPE_Q4_K], 0);
    EXPECT(st.count[HX_TYPE_Q8_0] > 0);
    hx_model *m = NULL;
    rc = hx_model_load(out, NULL, &m, &err);
    if (rc) printf("     %s\n", err.msg);
    EXPECT(rc == HX_OK);
    hx_model_free(m);
    /* stays for test_llama_loads */
}

/* ---- logits ---- */
static int hearth_logits(const char *path, const int32_t *ids, int n,
                         float **out, int *n_vocab)
{
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_err err = {0};
    int rc = hx_model_load(path, &mp, &m, &err);
    if (rc) {
        printf("     %s\n", err.msg);
        return rc;
    }
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 2 * n;
    cp.n_threads = 1;
    hx_ctx *c = NULL;
    rc = hx_ctx_new(m, &cp, &c, &err);
    if (!rc) rc = hx_decode(c, ids, n, 1);
    *n_vocab = hx_model_hparams(m)->n_vocab;
    *out = rc ? NULL : malloc((size_t)n * (size_t)*n_vocab * sizeof **out);
    for (int i = 0; *out && i < n; i++)
        memcpy(*out + (size_t)i * *n_vocab, hx_ctx_logits(c, i),
               (size_t)*n_vocab * sizeof **out);
    hx_ctx_free(c);
    hx_model_free(m);
    return rc ? rc : *out ? HX_OK : HX_ERR_NOMEM;
}

static void make_ids(int32_t *ids, int n, int32_t n_normal, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)n_normal);
    }
}

/* Max over positions of NMSE(a, b). */
static double max_nmse(const float *a, const float *b, int n, int nv)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double e = test_nmse(a + (size_t)i * nv, b + (size_t)i * nv, (size_t)nv);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

static double mean_nmse(const float *a, const float *b, int n, int nv)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += test_nmse(a + (size_t)i * nv, b + (size_t)i * nv, (size_t)nv);
    return s / n;
}

static int ref_ready(void)
{
    char why[512];
    if (ref_available(why, sizeof why)) return 1;
    test_skip("%s", why);
    return 0;
}

/* Hearth's quantized files in llama.cpp: same logits as Hearth's. The
 * tolerance is the engine's for 8-bit and K-quant weights (test_diff:
 * activation rounding flips give up to ~3e-4). */
static void compare_with_llama(const char *path, const char *what,
                               int32_t n_normal)
{
    int32_t ids[N_SEQ];
    make_ids(ids, N_SEQ, n_normal, 777);
    float *ref = NULL, *got = NULL;
    int nv_ref = 0, nv = 0;
    if (ref_logits(path, ids, N_SEQ, &ref, &nv_ref) != 0) {
        test_fail_at(__FILE__, __LINE__, "%s: llama.cpp: %s", what, ref_error());
        return;
    }
    if (hearth_logits(path, ids, N_SEQ, &got, &nv) == HX_OK && nv == nv_ref) {
        double e = max_nmse(ref, got, N_SEQ, nv);
        printf("# %s: llama.cpp vs Hearth logits nmse max %.2e (tolerance 1e-3)\n",
               what, e);
        if (!(e <= 1e-3))
            test_fail_at(__FILE__, __LINE__, "%s: NMSE %.3e", what, e);
    } else {
        test_fail_at(__FILE__, __LINE__, "%s: hearth failed or n_vocab differs", what);
    }
    free(ref);
    free(got);
}

static void test_llama_loads(void)
{
    if (!ref_ready()) return;
    const char *vocab = test_shared_file(VOCAB);
    if (!vocab) return;
    const char *in = tmp("v.gguf"), *out = tmp("v-q.gguf");
    ASSERT(make_model(in, "F16", 2, 1, vocab) == HX_OK);
    static const char *types[] = {"Q4_K_M", "Q8_0", "Q4_0", "Q5_K_M", "Q6_K"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        hx_err err = {0};
        const char *ov[] = {"*attn_output*=Q8_0"};
        if (quantize(in, out, types[i], ov, !strcmp(types[i], "Q5_K_M"), NULL,
                     NULL, &err)) {
            test_fail_at(__FILE__, __LINE__, "%s: %s", types[i], err.msg);
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "qwen3 %s", types[i]);
        compare_with_llama(out, what, N_NORMAL);
    }
    /* MoE: 3-D expert tensors quantized matrix by matrix; router F32 */
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.arch = "qwen3moe";
    mp.ftype = "F16";
    mp.tied_output = 1;
    mp.vocab_path = vocab;
    hx_err err = {0};
    ASSERT(hx_mkmodel_write(&mp, in, &err) == HX_OK);
    ASSERT(quantize(in, out, "Q4_K_M", NULL, 0, NULL, NULL, &err) == HX_OK);
    static const want w[] = {{"blk.0.ffn_gate_inp.weight", HX_TYPE_F32},
                             {"blk.0.ffn_gate_exps.weight", HX_TYPE_Q4_K},
                             {"blk.0.ffn_down_exps.weight", HX_TYPE_Q4_K},
                             {"blk.1.ffn_down_exps.weight", HX_TYPE_Q6_K},
                             {"blk.1.attn_v.weight", HX_TYPE_Q6_K}};
    check_types(out, w, 5);
    compare_with_llama(out, "qwen3moe Q4_K_M", N_NORMAL);
    const char *st = tmp("stories-q4km.gguf");
    if (access(st, F_OK) == 0) compare_with_llama(st, "stories260K Q4_K_M (Q8_0 fallback)", 512);
    unlink(out);
}

/* ---- calibration ---- */
static const char *k_words[] = {
    "meeting", "tomorrow", "invoice", "the", "a", "project", "please", "send",
    "report", "calendar", "budget", "review", "notes", "from", "to", "and",
    "Monday", "Friday", "deadline", "draft", "contract", "team", "update",
    "call", "at", "10:30", "thanks", "regards", "Anna", "Marc", "office",
    "flight", "hotel", "reminder", "agenda", "of", "in", "with", "we", "I",
};

static int write_text(const char *path, uint64_t seed, int n_words)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    uint64_t x = seed;
    for (int i = 0; i < n_words; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((x >> 33) % (sizeof k_words / sizeof k_words[0]));
        fprintf(f, "%s%s", k_words[k], i % 12 == 11 ? ".\n" : " ");
    }
    return fclose(f);
}

/* Sum over rows and columns of imat[c] * (a - b)^2 of a Q tensor against
 * the F32 original (3-D experts: matrix e weighted by its own block). */
static double weighted_err(const hx_gguf *f32, const hx_gguf *q,
                           const char *name, const float *imat)
{
    const hx_gguf_tensor *a = hx_gguf_find_tensor(f32, name);
    const hx_gguf_tensor *b = hx_gguf_find_tensor(q, name);
    int64_t nc = a->ne[0], nr = a->ne[1] * a->ne[2];
    float *row = malloc((size_t)nc * sizeof *row);
    double s = 0;
    size_t rb = hx_type_row_bytes(b->type, nc);
    for (int64_t r = 0; row && r < nr; r++) {
        hx_dequantize_row(b->type, (const char *)b->data + r * rb, row, nc);
        const float *w = (const float *)a->data + r * nc;
        const float *im = imat + (r / a->ne[1]) * nc;
        for (int64_t c = 0; c < nc; c++) {
            double d = (double)w[c] - row[c];
            s += im[c] * d * d;
        }
    }
    free(row);
    return s;
}

static hx_imatrix *g_im; /* from test_calibrate, used by the next tests */

/* Real models have a few input channels with much larger activations
 * (the reason for importance matrices); random ones do not. This copies
 * a model with its attn_norm / ffn_norm weights multiplied by lognormal
 * per-channel factors (sd 1 in log space), so some columns matter more. */
static int spread_norms(const char *in, const char *out)
{
    hx_gguf *g = NULL;
    hx_err err = {0};
    if (hx_gguf_open(in, &g, &err)) return -1;
    hx_gguf_writer *w = hx_gguf_writer_new();
    int64_t n = hx_gguf_n_tensors(g);
    float **bufs = calloc((size_t)n, sizeof *bufs);
    int rc = hx_gguf_copy_kv(w, g);
    uint64_t x = 31337;
    for (int64_t i = 0; !rc && i < n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        const void *data = t->data;
        if (strstr(t->name, "attn_norm") || strstr(t->name, "ffn_norm")) {
            float *b = bufs[i] = malloc(t->nbytes);
            memcpy(b, t->data, t->nbytes);
            for (int64_t j = 0; j < t->ne[0]; j++) {
                double u = 0; /* about normal: sum of 4 uniforms */
                for (int k = 0; k < 4; k++) {
                    x = x * 6364136223846793005ull + 1442695040888963407ull;
                    u += (double)(x >> 11) / 9007199254740992.0 - 0.5;
                }
                b[j] *= (float)exp(u * 1.732);
            }
            data = b;
        }
        rc = hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data,
                                NULL, NULL);
    }
    if (!rc) rc = hx_gguf_writer_write(w, out, &err);
    for (int64_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    return rc;
}

/* Tokens of a text file with the model's vocabulary (at most max). */
static int text_ids(const char *model, const char *text, int32_t *ids, int max)
{
    hx_model *m = NULL;
    hx_err err = {0};
    char *s = NULL;
    size_t len = 0;
    if (hx_model_load(model, NULL, &m, &err) || hx_read_file(text, 0, &s, &len, &err)) {
        hx_model_free(m);
        return -1;
    }
    int32_t n = hx_tokenize(hx_model_vocab(m), s, len, ids, max, 0, 0);
    free(s);
    hx_model_free(m);
    return n < 0 ? max : n;
}

static void test_calibrate(void)
{
    const char *vocab = test_shared_file(VOCAB);
    if (!vocab) return;
    const char *in = tmp("c.gguf"), *raw = tmp("c-raw.gguf");
    ASSERT(make_model(raw, "F32", 2, 1, vocab) == HX_OK);
    ASSERT(spread_norms(raw, in) == 0);
    unlink(raw);
    const char *files[] = {tmp("mail1.txt"), tmp("notes.txt")};
    ASSERT(write_text(files[0], 1, 600) == 0 && write_text(files[1], 2, 600) == 0);
    hx_calib_params cp = hx_calib_default_params();
    cp.n_chunk = 256;
    cp.n_threads = 2;
    hx_err err = {0};
    int rc = hx_imatrix_calibrate(in, files, 2, &cp, &g_im, &err);
    if (rc) printf("     %s\n", err.msg);
    ASSERT(rc == HX_OK);
    /* 2 layers x (q, k, v, output, gate, up, down), and the tied head
     * (token_embd.weight, its input the final-normed state of every token) */
    EXPECT_EQ_INT(hx_imatrix_n_entries(g_im), 15);
    EXPECT(hx_imatrix_n_tokens(g_im) > 500);
    const float *v = hx_imatrix_find(g_im, "blk.1.ffn_down.weight", 512);
    ASSERT(v != NULL);
    EXPECT(hx_imatrix_find(g_im, "blk.1.ffn_down.weight", 256) == NULL);
    EXPECT(hx_imatrix_find(g_im, "token_embd.weight", 256) != NULL);
    int pos = 1;
    for (int j = 0; j < 512; j++) pos &= v[j] >= 0 && isfinite(v[j]);
    EXPECT(pos);
}

/* The importance-weighted error of every Q4_K tensor is not worse with
 * the imatrix, and held-out logits are not further from F32. */
static void test_imatrix_helps(void)
{
    if (!g_im) SKIP("no imatrix (test_calibrate failed or skipped)");
    const char *in = tmp("c.gguf"), *a = tmp("c-plain.gguf"), *b = tmp("c-im.gguf");
    hx_quantize_stats st;
    hx_err err = {0};
    const char *ov[] = {"*=Q4_K"}; /* every matrix, to see each one */
    ASSERT(quantize(in, a, "Q4_K_M", ov, 1, NULL, NULL, &err) == HX_OK);
    ASSERT(quantize(in, b, "Q4_K_M", ov, 1, g_im, &st, &err) == HX_OK);
    EXPECT_EQ_INT(st.n_imatrix, 15);
    EXPECT_EQ_INT(st.n_imatrix_missing, 0);
    hx_gguf *gf = NULL, *ga = NULL, *gb = NULL;
    ASSERT(hx_gguf_open(in, &gf, &err) == HX_OK);
    ASSERT(hx_gguf_open(a, &ga, &err) == HX_OK);
    ASSERT(hx_gguf_open(b, &gb, &err) == HX_OK);
    double sum_a = 0, sum_b = 0;
    int worse = 0;
    for (int64_t i = 0; i < hx_gguf_n_tensors(gb); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(gb, i);
        const float *im = hx_imatrix_find(g_im, t->name, t->ne[0]);
        if (!im) continue;
        EXPECT_EQ_INT(t->type, HX_TYPE_Q4_K);
        double ea = weighted_err(gf, ga, t->name, im);
        double eb = weighted_err(gf, gb, t->name, im);
        sum_a += ea;
        sum_b += eb;
        worse += eb > ea;
        if (getenv("HX_TEST_VERBOSE"))
            printf("#   %-26s weighted err %.4e -> %.4e\n", t->name, ea, eb);
    }
    printf("# weighted reconstruction error, 15 Q4_K tensors: %.4e without, "
           "%.4e with imatrix (%.1f%%); %d tensors worse\n", sum_a, sum_b,
           100.0 * (sum_b - sum_a) / sum_a, worse);
    EXPECT(sum_b <= sum_a);
    EXPECT_EQ_INT(worse, 0);
    hx_gguf_close(gf);
    hx_gguf_close(ga);
    hx_gguf_close(gb);
    /* held-out text (not in the calibration files): logits NMSE against
     * the F32 model */
    int32_t ids[N_SEQ];
    ASSERT(write_text(tmp("held.txt"), 3, 200) == 0);
    ASSERT(text_ids(in, tmp("held.txt"), ids, N_SEQ) == N_SEQ);
    unlink(tmp("held.txt"));
    float *lf = NULL, *la = NULL, *lb = NULL;
    int nv = 0;
    ASSERT(hearth_logits(in, ids, N_SEQ, &lf, &nv) == HX_OK);
    ASSERT(hearth_logits(a, ids, N_SEQ, &la, &nv) == HX_OK);
    ASSERT(hearth_logits(b, ids, N_SEQ, &lb, &nv) == HX_OK);
    double na = mean_nmse(lf, la, N_SEQ, nv), nb = mean_nmse(lf, lb, N_SEQ, nv);
    printf("# held-out logits NMSE vs F32: Q4_K %.4e without, %.4e with imatrix\n",
           na, nb);
    EXPECT(nb <= na);
    free(la);
    free(lb);
    /* the shipped presets on the same text: Q8_0, Q4_K_M without and with */
    static const struct { const char *ft; int im; } rows[] = {
        {"Q8_0", 0}, {"Q4_K_M", 0}, {"Q4_K_M", 1}};
    double q4km[2] = {0, 0};
    for (int i = 0; i < 3; i++) {
        float *lq = NULL;
        ASSERT(quantize(in, a, rows[i].ft, NULL, 0, rows[i].im ? g_im : NULL, &st,
                        &err) == HX_OK);
        ASSERT(hearth_logits(a, ids, N_SEQ, &lq, &nv) == HX_OK);
        double e = mean_nmse(lf, lq, N_SEQ, nv);
        if (i) q4km[i - 1] = e;
        printf("# %-6s %-10s %7.2f MiB %5.2f bpw  held-out logits NMSE vs F32 %.3e\n",
               rows[i].ft, rows[i].im ? "calibrated" : "", st.bytes_out / 1048576.0,
               8.0 * (double)st.bytes_out / (double)st.n_elems, e);
        free(lq);
    }
    EXPECT(q4km[1] <= q4km[0]);
    free(lf);
    unlink(a);
    unlink(b);
}

/* Q8_0 stays close to F32: stated margin NMSE <= 2e-3 at every position
 * on the plain random 8-layer model (measured max 9.9e-4, mean 5.5e-4;
 * 2-layer models give ~2e-4; the spread-norm model of test_calibrate,
 * whose outlier channels amplify the rounding, ~2e-3). */
static void test_q8_0_near_f32(void)
{
    const char *in = tmp("p8.gguf"), *out = tmp("p8-q8.gguf");
    if (access(in, F_OK)) SKIP("no model");
    hx_err err = {0};
    ASSERT(quantize(in, out, "Q8_0", NULL, 0, NULL, NULL, &err) == HX_OK);
    int32_t ids[N_SEQ];
    make_ids(ids, N_SEQ, 512, 99);
    float *lf = NULL, *lq = NULL;
    int nv = 0;
    ASSERT(hearth_logits(in, ids, N_SEQ, &lf, &nv) == HX_OK);
    ASSERT(hearth_logits(out, ids, N_SEQ, &lq, &nv) == HX_OK);
    double e = max_nmse(lf, lq, N_SEQ, nv);
    printf("# Q8_0 vs F32 logits (8 layers): NMSE max %.2e mean %.2e (margin 2e-3)\n",
           e, mean_nmse(lf, lq, N_SEQ, nv));
    EXPECT(e <= 2e-3);
    free(lf);
    free(lq);
    unlink(out);
}

/* MoE: the experts' inputs are collected per expert (the tokens routed
 * to each), and used for each expert's matrix. */
static void test_calibrate_moe(void)
{
    const char *vocab = test_shared_file(VOCAB);
    if (!vocab) return;
    const char *raw = tmp("moe-raw.gguf"), *in = tmp("moe.gguf");
    const char *a = tmp("moe-a.gguf"), *b = tmp("moe-b.gguf");
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.arch = "qwen3moe";
    mp.tied_output = 1;
    mp.vocab_path = vocab;
    hx_err err = {0};
    ASSERT(hx_mkmodel_write(&mp, raw, &err) == HX_OK);
    ASSERT(spread_norms(raw, in) == 0);
    unlink(raw);
    const char *files[] = {tmp("mail1.txt")};
    hx_calib_params cp = hx_calib_default_params();
    cp.n_chunk = 256;
    cp.n_threads = 2;
    hx_imatrix *im = NULL;
    int rc = hx_imatrix_calibrate(in, files, 1, &cp, &im, &err);
    if (rc) printf("     %s\n", err.msg);
    ASSERT(rc == HX_OK);
    /* per layer: q k v output, router, 3 expert tensors; the tied head */
    EXPECT_EQ_INT(hx_imatrix_n_entries(im), 17);
    EXPECT(hx_imatrix_find(im, "blk.0.ffn_gate_inp.weight", 256) != NULL);
    EXPECT(hx_imatrix_find(im, "blk.0.ffn_gate_exps.weight", 256 * 4) != NULL);
    EXPECT(hx_imatrix_find(im, "blk.1.ffn_down_exps.weight", 256 * 4) != NULL);
    hx_quantize_stats st;
    const char *ov[] = {"*=Q4_K"};
    ASSERT(quantize(in, a, "Q4_K_M", ov, 1, NULL, NULL, &err) == HX_OK);
    ASSERT(quantize(in, b, "Q4_K_M", ov, 1, im, &st, &err) == HX_OK);
    EXPECT_EQ_INT(st.n_imatrix_missing, 0);
    hx_gguf *gf = NULL, *ga = NULL, *gb = NULL;
    ASSERT(hx_gguf_open(in, &gf, &err) == HX_OK);
    ASSERT(hx_gguf_open(a, &ga, &err) == HX_OK);
    ASSERT(hx_gguf_open(b, &gb, &err) == HX_OK);
    static const char *exps[] = {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight",
                                 "blk.0.ffn_down_exps.weight", "blk.1.ffn_down_exps.weight"};
    for (int i = 0; i < 4; i++) {
        const hx_gguf_tensor *t = hx_gguf_find_tensor(gb, exps[i]);
        const float *v = t ? hx_imatrix_find(im, exps[i], t->ne[0] * t->ne[2]) : NULL;
        if (!v) {
            test_fail_at(__FILE__, __LINE__, "%s: no importances", exps[i]);
            continue;
        }
        double ea = weighted_err(gf, ga, exps[i], v), eb = weighted_err(gf, gb, exps[i], v);
        printf("# %s weighted err %.4e without, %.4e with imatrix\n", exps[i], ea, eb);
        EXPECT(eb <= ea);
    }
    hx_gguf_close(gf);
    hx_gguf_close(ga);
    hx_gguf_close(gb);
    hx_imatrix_free(im);
    unlink(a);
    unlink(b);
    unlink(in);
}

/* ---- imatrix files ---- */
static void test_imatrix_file(void)
{
    if (!g_im) SKIP("no imatrix");
    const char *path = tmp("im.gguf");
    hx_err err = {0};
    ASSERT(hx_imatrix_save(g_im, path, &err) == HX_OK);
    hx_imatrix *back = NULL;
    ASSERT(hx_imatrix_load(path, &back, &err) == HX_OK);
    EXPECT_EQ_INT(hx_imatrix_n_entries(back), hx_imatrix_n_entries(g_im));
    EXPECT_EQ_INT(hx_imatrix_n_tokens(back), hx_imatrix_n_tokens(g_im));
    const float *x = hx_imatrix_find(g_im, "blk.0.attn_q.weight", 256);
    const float *y = hx_imatrix_find(back, "blk.0.attn_q.weight", 256);
    ASSERT(x && y);
    EXPECT(memcmp(x, y, 256 * sizeof *x) == 0);
    /* a loaded imatrix saves again (e.g. copied between machines) */
    const char *again = tmp("im2.gguf");
    EXPECT(hx_imatrix_save(back, again, &err) == HX_OK);
    hx_imatrix_free(back);
    back = NULL;
    EXPECT(hx_imatrix_load(again, &back, &err) == HX_OK);
    EXPECT_EQ_INT(hx_imatrix_n_entries(back), hx_imatrix_n_entries(g_im));
    hx_imatrix_free(back);
    back = NULL;
    unlink(again);
    /* a file of another version is refused */
    hx_gguf_writer *w = hx_gguf_writer_new();
    float v[4] = {1, 2, 3, 4};
    int64_t ne = 4;
    hx_gguf_set_str(w, "general.type", "imatrix");
    hx_gguf_set_u32(w, "hearth.imatrix.version", HX_IMATRIX_VERSION + 1);
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight", HX_TYPE_F32, 1, &ne, v, NULL, NULL);
    const char *bad = tmp("im-v2.gguf");
    ASSERT(hx_gguf_writer_write(w, bad, &err) == HX_OK);
    hx_gguf_writer_free(w);
    EXPECT_EQ_INT(hx_imatrix_load(bad, &back, &err), HX_ERR_UNSUPPORTED);
    EXPECT(strstr(err.msg, "version") != NULL);
    EXPECT(back == NULL);
    /* an entry that is not a 1-D F32 vector is refused */
    w = hx_gguf_writer_new();
    int64_t ne2[2] = {2, 2};
    hx_gguf_set_str(w, "general.type", "imatrix");
    hx_gguf_set_u32(w, "hearth.imatrix.version", HX_IMATRIX_VERSION);
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight", HX_TYPE_F32, 2, ne2, v, NULL, NULL);
    ASSERT(hx_gguf_writer_write(w, bad, &err) == HX_OK);
    hx_gguf_writer_free(w);
    EXPECT_EQ_INT(hx_imatrix_load(bad, &back, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "blk.0.attn_q.weight") != NULL);
    /* an imatrix of another model: nothing matches, and the stats say so */
    hx_gguf *gm = NULL;
    if (hx_gguf_open(tmp("p8.gguf"), &gm, &err) == HX_OK) {
        hx_gguf_close(gm);
        hx_quantize_stats st;
        w = hx_gguf_writer_new();
        int64_t ne1 = 4;
        hx_gguf_set_str(w, "general.type", "imatrix");
        hx_gguf_set_u32(w, "hearth.imatrix.version", HX_IMATRIX_VERSION);
        hx_gguf_add_tensor(w, "blk.0.attn_q.weight", HX_TYPE_F32, 1, &ne1, v, NULL, NULL);
        ASSERT(hx_gguf_writer_write(w, bad, &err) == HX_OK);
        hx_gguf_writer_free(w);
        ASSERT(hx_imatrix_load(bad, &back, &err) == HX_OK);
        ASSERT(quantize(tmp("p8.gguf"), tmp("p8-x.gguf"), "Q4_K_M", NULL, 0, back,
                        &st, &err) == HX_OK);
        EXPECT_EQ_INT(st.n_imatrix, 0);
        EXPECT_EQ_INT(st.n_imatrix_missing, 58); /* 8 x 7 + token_embd, output */
        hx_imatrix_free(back);
        back = NULL;
        unlink(tmp("p8-x.gguf"));
    }
    /* a model is not an imatrix */
    EXPECT_EQ_INT(hx_imatrix_load(tmp("c.gguf"), &back, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "not a Hearth imatrix") != NULL);
    unlink(bad);
}

/* ---- requantizing and bad inputs ---- */
static void test_requantize(void)
{
    const char *in = tmp("p8.gguf"), *q = tmp("p8-q4km.gguf"), *out = tmp("p8-re.gguf");
    hx_err err = {0};
    hx_quantize_stats st;
    ASSERT(quantize(in, q, "Q4_K_M", NULL, 0, NULL, NULL, &err) == HX_OK);
    ASSERT(quantize(q, out, "Q8_0", NULL, 0, NULL, &st, &err) == HX_OK);
    EXPECT(st.n_requant > 0);
    static const want w[] = {{"blk.0.attn_q.weight", HX_TYPE_Q8_0},
                             {"output.weight", HX_TYPE_Q8_0}};
    check_types(out, w, 2);
    /* same type: copied byte for byte, nothing requantized */
    ASSERT(quantize(q, out, "Q4_K_M", NULL, 0, NULL, &st, &err) == HX_OK);
    EXPECT_EQ_INT(st.n_requant, 0);
    hx_model *m = NULL;
    EXPECT(hx_model_load(out, NULL, &m, &err) == HX_OK);
    hx_model_free(m);
    unlink(q);
    unlink(out);
}

static void test_bad_inputs(void)
{
    const char *in = tmp("p8.gguf"), *out = tmp("bad-out.gguf");
    hx_err err = {0};
    EXPECT_EQ_INT(quantize(in, out, "Q3_K_M", NULL, 0, NULL, NULL, &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "unknown type 'Q3_K_M'") != NULL);
    const char *bad_ov[][1] = {{"attn_v"}, {"attn_v=Q3_K"}, {"=Q8_0"}, {"x=Q4_K_M"}};
    for (int i = 0; i < 4; i++) {
        EXPECT_EQ_INT(quantize(in, out, "Q4_K_M", bad_ov[i], 1, NULL, NULL, &err),
                      HX_ERR_INVALID);
        EXPECT(strstr(err.msg, "bad override") != NULL);
    }
    int rc = quantize(tmp("missing.gguf"), out, "Q8_0", NULL, 0, NULL, NULL, &err);
    EXPECT(rc != HX_OK);
    EXPECT(strstr(err.msg, "missing.gguf") != NULL);
    /* a GGUF that is not a model */
    const char *im = tmp("notmodel.gguf");
    hx_gguf_writer *w = hx_gguf_writer_new();
    float v[32] = {0};
    int64_t ne[2] = {32, 1};
    hx_gguf_set_str(w, "general.type", "imatrix");
    hx_gguf_add_tensor(w, "x.weight", HX_TYPE_F32, 2, ne, v, NULL, NULL);
    ASSERT(hx_gguf_writer_write(w, im, &err) == HX_OK);
    hx_gguf_writer_free(w);
    EXPECT_EQ_INT(quantize(im, out, "Q8_0", NULL, 0, NULL, NULL, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "not a model") != NULL);
    EXPECT(access(out, F_OK) != 0); /* nothing written */
    unlink(im);
}

static void cleanup(void)
{
    static const char *names[] = {"p8.gguf", "c.gguf", "v.gguf", "v-q.gguf",
                                  "mail1.txt", "notes.txt", "im.gguf",
                                  "stories-q4km.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp(names[i]));
    rmdir(tmpdir);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_quantize.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    setenv("HXREF_KV", "f16", 1);
    setenv("HXREF_FLASH", "1", 1);
    setenv("HXREF_THREADS", "1", 0);
    RUN(test_q4_k_m_types);
    RUN(test_tied_and_q8_0);
    RUN(test_overrides);
    RUN(test_override_every_type);
    RUN(test_stories_fallback);
    RUN(test_llama_loads);
    RUN(test_calibrate);
    RUN(test_imatrix_helps);
    RUN(test_q8_0_near_f32);
    RUN(test_calibrate_moe);
    RUN(test_imatrix_file);
    RUN(test_requantize);
    RUN(test_bad_inputs);
    hx_imatrix_free(g_im);
    cleanup();
    return test_summary();
}
