/* test_mkmodel.c: the random-model generator: llama.cpp's keys and tensor
 * names, the per-role types of the mixes, sensible weight statistics in
 * every type, seeds, the copied vocabulary, and clear errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "test.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

static hx_mkmodel_params small(const char *arch, const char *ftype)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = arch;
    p.ftype = ftype;
    p.n_layer = 3;
    return p;
}

static int64_t u32_key(const hx_gguf *g, const char *key)
{
    int64_t v = -1;
    if (hx_gguf_get_i64(g, key, &v) != HX_OK) return -1;
    return v;
}

/* Mean and standard deviation of a whole tensor, dequantized. */
static void tensor_stats(const hx_gguf_tensor *t, double *mean, double *sd)
{
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3], n = t->ne[0];
    size_t rb = hx_type_row_bytes(t->type, n);
    float *row = malloc((size_t)n * sizeof *row);
    double s = 0, s2 = 0;
    for (int64_t r = 0; r < rows; r++) {
        hx_dequantize_row(t->type, (const uint8_t *)t->data + r * rb, row, n);
        for (int64_t i = 0; i < n; i++) {
            s += row[i];
            s2 += (double)row[i] * row[i];
        }
    }
    free(row);
    double cnt = (double)rows * (double)n;
    *mean = s / cnt;
    *sd = sqrt(s2 / cnt - *mean * *mean);
}

static void test_every_type_loads_with_sensible_weights(void)
{
    static const char *types[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0",
                                  "Q4_K", "Q5_K", "Q6_K"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        hx_mkmodel_params p = small("qwen3", types[i]);
        hx_err err = {0};
        const char *path = tmp_path("m.gguf");
        ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
        hx_gguf *g = NULL;
        ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
        const hx_gguf_tensor *q = hx_gguf_find_tensor(g, "blk.1.attn_q.weight");
        const hx_gguf_tensor *n = hx_gguf_find_tensor(g, "blk.1.attn_norm.weight");
        ASSERT(q && n);
        EXPECT_STR_EQ(hx_type_name(q->type), types[i]);
        EXPECT_EQ_INT(n->type, HX_TYPE_F32);
        double mean, sd, want = 1.0 / sqrt(256.0);
        tensor_stats(q, &mean, &sd);
        if (!(fabs(mean) < 0.1 * want && sd > 0.8 * want && sd < 1.2 * want))
            printf("     %s: attn_q mean %g sd %g, want 0 and %g\n", types[i],
                   mean, sd, want);
        EXPECT(fabs(mean) < 0.1 * want && sd > 0.8 * want && sd < 1.2 * want);
        tensor_stats(n, &mean, &sd);
        EXPECT(fabs(mean - 1.0) < 0.02 && sd > 0.05 && sd < 0.15);
        hx_gguf_close(g);
    }
}

static void test_qwen3moe_layout(void)
{
    hx_mkmodel_params p = small("qwen3moe", "Q4_K_M");
    p.n_layer = 8;
    hx_err err = {0};
    const char *path = tmp_path("moe.gguf");
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    hx_gguf *g = NULL;
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    const char *arch = NULL;
    EXPECT(hx_gguf_get_str(g, "general.architecture", &arch) == HX_OK);
    EXPECT_STR_EQ(arch, "qwen3moe");
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.block_count"), 8);
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.embedding_length"), 256);
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.attention.head_count"), 4);
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.attention.head_count_kv"), 2);
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.attention.key_length"), 64);
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.expert_count"), 4);
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.expert_used_count"), 2);
    EXPECT_EQ_INT(u32_key(g, "qwen3moe.expert_feed_forward_length"), 256);
    EXPECT_EQ_INT(u32_key(g, "general.file_type"), 15);
    float eps = 0;
    EXPECT(hx_gguf_get_f32(g, "qwen3moe.attention.layer_norm_rms_epsilon",
                           &eps) == HX_OK && eps == 1e-6f);
    /* embd, 8 layers of 7 attention and 5 MoE tensors, norm, output */
    EXPECT_EQ_INT(hx_gguf_n_tensors(g), 1 + 8 * 12 + 2);
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
    ASSERT(t);
    EXPECT(t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 4);
    EXPECT_EQ_INT(t->type, HX_TYPE_Q4_K);
    t = hx_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight");
    ASSERT(t);
    EXPECT(t->type == HX_TYPE_F32 && t->ne[0] == 256 && t->ne[1] == 4);
    /* the _M mix: Q6_K output, attn_v / ffn_down in layers 0, 3, 6, 7 */
    t = hx_gguf_find_tensor(g, "output.weight");
    EXPECT(t && t->type == HX_TYPE_Q6_K);
    static const int more[8] = {1, 0, 0, 1, 0, 0, 1, 1};
    for (int il = 0; il < 8; il++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", il);
        t = hx_gguf_find_tensor(g, name);
        EXPECT(t && t->type == (more[il] ? HX_TYPE_Q6_K : HX_TYPE_Q4_K));
        snprintf(name, sizeof name, "blk.%d.attn_k_norm.weight", il);
        EXPECT(hx_gguf_find_tensor(g, name) != NULL);
    }
    hx_gguf_close(g);
}

static void test_llama_and_tied(void)
{
    hx_mkmodel_params p = small("llama", "F16");
    p.tied_output = 1;
    hx_err err = {0};
    const char *path = tmp_path("llama.gguf");
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    hx_gguf *g = NULL;
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    EXPECT(hx_gguf_find_tensor(g, "output.weight") == NULL);
    EXPECT(hx_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") == NULL);
    EXPECT(hx_gguf_find_tensor(g, "blk.2.ffn_down.weight") != NULL);
    float base = 0;
    EXPECT(hx_gguf_get_f32(g, "llama.rope.freq_base", &base) == HX_OK &&
           base == 10000.0f);
    hx_gguf_close(g);
}

static void test_tensor_type_overrides(void)
{
    hx_mkmodel_params p = small("qwen3", "F32");
    p.tensor_types = "ffn_down=Q8_0,output=Q6_K";
    hx_err err = {0};
    const char *path = tmp_path("ov.gguf");
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    hx_gguf *g = NULL;
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, "blk.2.ffn_down.weight");
    EXPECT(t && t->type == HX_TYPE_Q8_0);
    t = hx_gguf_find_tensor(g, "output.weight");
    EXPECT(t && t->type == HX_TYPE_Q6_K);
    t = hx_gguf_find_tensor(g, "blk.2.attn_output.weight"); /* not "output" */
    EXPECT(t && t->type == HX_TYPE_F32);
    hx_gguf_close(g);
    /* the last type of a list, and BF16 (a table name, no preset) */
    p.tensor_types = "output=Q6_K,attn_q=BF16";
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    t = hx_gguf_find_tensor(g, "blk.0.attn_q.weight");
    EXPECT(t && t->type == HX_TYPE_BF16);
    hx_gguf_close(g);
    static const char *bad[] = {"ffn_down", "=Q8_0", "ffn_down=Q3_K",
                                "ffn_down=Q4_K_M", "output=F16,x", "ffn_down=Q8_K",
                                "ffn_down=Q8_0_AND_MUCH_MORE_THAN_A_TYPE"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p.tensor_types = bad[i];
        EXPECT_EQ_INT(hx_mkmodel_write(&p, path, &err), HX_ERR_INVALID);
    }
}

static void test_seed_reproducible(void)
{
    hx_mkmodel_params p = small("qwen3", "Q4_K");
    hx_err err = {0};
    char *a = NULL, *b = NULL, *c = NULL;
    size_t la = 0, lb = 0, lc = 0;
    ASSERT(hx_mkmodel_write(&p, tmp_path("a.gguf"), &err) == HX_OK);
    ASSERT(hx_mkmodel_write(&p, tmp_path("b.gguf"), &err) == HX_OK);
    p.seed = 2;
    ASSERT(hx_mkmodel_write(&p, tmp_path("c.gguf"), &err) == HX_OK);
    ASSERT(hx_read_file(tmp_path("a.gguf"), 0, &a, &la, &err) == HX_OK);
    ASSERT(hx_read_file(tmp_path("b.gguf"), 0, &b, &lb, &err) == HX_OK);
    ASSERT(hx_read_file(tmp_path("c.gguf"), 0, &c, &lc, &err) == HX_OK);
    EXPECT(la == lb && memcmp(a, b, la) == 0);
    EXPECT(la == lc && memcmp(a, c, la) != 0);
    free(a);
    free(b);
    free(c);
}

static void test_vocab_copied(void)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    hx_mkmodel_params p = small("qwen3", "Q4_0");
    p.n_layer = 1;
    p.vocab_path = vocab;
    hx_err err = {0};
    const char *path = tmp_path("v.gguf");
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    hx_gguf *g = NULL, *v = NULL;
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    ASSERT(hx_gguf_open(vocab, &v, &err) == HX_OK);
    int et;
    uint64_t n = 0, nv = 0;
    EXPECT(hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) == HX_OK);
    EXPECT(hx_gguf_get_arr(v, "tokenizer.ggml.tokens", &et, &nv) == HX_OK);
    EXPECT(n == nv && n > 150000);
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, "token_embd.weight");
    EXPECT(t && (uint64_t)t->ne[1] == n);
    const char *pre = NULL, *model = NULL;
    EXPECT(hx_gguf_get_str(g, "tokenizer.ggml.pre", &pre) == HX_OK);
    EXPECT(hx_gguf_get_str(g, "tokenizer.ggml.model", &model) == HX_OK);
    EXPECT_STR_EQ(model, "gpt2");
    size_t l1 = 0, l2 = 0;
    const char *s1 = hx_gguf_arr_str(g, "tokenizer.ggml.merges", 1000, &l1);
    const char *s2 = hx_gguf_arr_str(v, "tokenizer.ggml.merges", 1000, &l2);
    EXPECT(s1 && s2 && l1 == l2 && !memcmp(s1, s2, l1));
    int64_t eos = -1, eos_v = -2;
    hx_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &eos);
    hx_gguf_get_i64(v, "tokenizer.ggml.eos_token_id", &eos_v);
    EXPECT_EQ_INT(eos, eos_v);
    EXPECT(hx_gguf_find_key(g, "general.architecture") >= 0);
    hx_gguf_close(g);
    hx_gguf_close(v);
}

static void test_bad_params(void)
{
    hx_err err = {0};
    hx_mkmodel_params p = small("gpt9", "F32");
    EXPECT_EQ_INT(hx_mkmodel_write(&p, tmp_path("x.gguf"), &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "gpt9") != NULL);
    p = small("qwen3", "Q3_K");
    EXPECT_EQ_INT(hx_mkmodel_write(&p, tmp_path("x.gguf"), &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "Q3_K") != NULL);
    p = small("qwen3", "Q4_K");
    p.n_embd = 96; /* not a multiple of 256 */
    EXPECT_EQ_INT(hx_mkmodel_write(&p, tmp_path("x.gguf"), &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "token_embd") != NULL);
    p = small("qwen3", "F32");
    p.n_head_kv = 3;
    EXPECT_EQ_INT(hx_mkmodel_write(&p, tmp_path("x.gguf"), &err), HX_ERR_INVALID);
    p = small("qwen3moe", "F32");
    p.n_expert_used = 5;
    EXPECT_EQ_INT(hx_mkmodel_write(&p, tmp_path("x.gguf"), &err), HX_ERR_INVALID);
    p = small("qwen3", "F32");
    p.vocab_path = "/nonexistent/vocab.gguf";
    EXPECT(hx_mkmodel_write(&p, tmp_path("x.gguf"), &err) != HX_OK);
    EXPECT(strstr(err.msg, "/nonexistent/vocab.gguf") != NULL);
    EXPECT(access(tmp_path("x.gguf"), F_OK) != 0);
}

/* The layers of the committed hearth-tiny (its file says; 6 if it cannot
 * be read), so that the wide shape stays deeper when the model grows. */
static int tiny_layers(void)
{
    hx_gguf *g = NULL;
    hx_err err = {0};
    int64_t n = -1;
    if (hx_gguf_open("models/hearth-tiny.gguf", &g, &err) == HX_OK) {
        n = u32_key(g, "qwen3.block_count");
        hx_gguf_close(g);
    }
    return n > 0 ? (int)n : 6;
}

/* The wide shape the embedding tests write hearth-tiny (its layers x 256,
 * 4/2 heads of 64, ff 768, 4096 tokens) or a small random model into: two
 * layers deeper than hearth-tiny, at least 8. */
static hx_mkmodel_params wide(const char *embed)
{
    hx_mkmodel_params p = small("qwen3", "Q8_0");
    p.embed_path = embed;
    p.n_layer = tiny_layers() + 2 < 8 ? 8 : tiny_layers() + 2;
    p.n_embd = 512, p.n_head = 8, p.n_head_kv = 4, p.head_dim = 128;
    p.n_ff = 1024, p.n_vocab = 5000, p.tied_output = 0;
    return p;
}

/* Logits of the last of t[0, n) on a fresh context. */
static int last_logits(hx_model *m, const int32_t *t, int n, float *out, int nv)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err) || hx_decode(c, t, n, 0)) return hx_ctx_free(c), 0;
    memcpy(out, hx_ctx_logits(c, -1), (size_t)nv * sizeof *out);
    hx_ctx_free(c);
    return 1;
}

/* Writes small embedded in p's shape and checks, after 5 and 40 tokens,
 * that the wide model's logits are the small one's (NMSE below tol), the
 * same greedy choice but for a near tie (the two best within three times
 * the rounding noise: the AVX2 kernels round otherwise than AVX-512 and
 * met one), and exactly 0 for the padded (unused) tokens. */
static void check_embedded(const char *small_path, hx_mkmodel_params p, double tol)
{
    hx_err err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s", tmp_path("wide.gguf"));
    p.embed_path = small_path;
    int rc = hx_mkmodel_write(&p, path, &err);
    if (rc) printf("     %s\n", err.msg);
    ASSERT(rc == HX_OK);
    hx_model *a = NULL, *b = NULL;
    ASSERT(hx_model_load(small_path, NULL, &a, &err) == HX_OK);
    ASSERT(hx_model_load(path, NULL, &b, &err) == HX_OK);
    const hx_hparams *hb = hx_model_hparams(b);
    EXPECT(hb->n_layer == p.n_layer && hb->n_embd == p.n_embd && hb->head_dim == p.head_dim);
    const int na = hx_model_hparams(a)->n_vocab, nb = hb->n_vocab;
    EXPECT_EQ_INT(nb, p.n_vocab);
    EXPECT(hx_vocab_attr(hx_model_vocab(b), nb - 1) & HX_TOKEN_UNUSED);
    EXPECT(!(hx_vocab_attr(hx_model_vocab(b), na - 1) & HX_TOKEN_UNUSED));
    float *la = malloc((size_t)na * sizeof *la), *lb = malloc((size_t)nb * sizeof *lb);
    int32_t t[40];
    for (int n = 0; n < 40; n++) t[n] = (int32_t)((n * 2654435761u) % (uint32_t)(na - 100));
    for (int n = 5; n <= 40; n += 35) {
        ASSERT(last_logits(a, t, n, la, na) && last_logits(b, t, n, lb, nb));
        double e = 0, r = 0;
        int arg_a = 0, arg_b = 0, zero = 1;
        for (int i = 0; i < na; i++) {
            e += (double)(la[i] - lb[i]) * (la[i] - lb[i]);
            r += (double)la[i] * la[i];
            if (la[i] > la[arg_a]) arg_a = i;
        }
        for (int i = 0; i < nb; i++) arg_b = lb[i] > lb[arg_b] ? i : arg_b;
        for (int i = na; i < nb; i++) zero &= lb[i] == 0.0f;
        /* the wide model's pick is the small one's, or its logit there is
         * within three times the rounding noise of the small one's best */
        const double noise = sqrt(e / na), gap = (double)la[arg_a] - la[arg_b];
        printf("     %s, %d tokens: NMSE %.2e against the small model (tolerance %.0e)\n",
               p.ftype, n, e / r, tol);
        EXPECT(e / r < tol);
        if (arg_a != arg_b)
            printf("     greedy %d, not %d: logit gap %.4f, noise %.4f\n", arg_b, arg_a, gap, noise);
        EXPECT(arg_a == arg_b || gap <= 3 * noise);
        EXPECT(zero);
    }
    free(la);
    free(lb);
    hx_model_free(a);
    hx_model_free(b);
}

/* A small qwen3 model embedded in a wider, deeper shape computes the same
 * function. In F32 only rounding differs (the rescaled norms, the fp16
 * cache of the rescaled keys): NMSE 1e-6 at most. hearth-tiny in Q8_0:
 * each layer rounds its 8-bit inputs anew, which turns those last-bit
 * differences into 1e-5 to a few 1e-4 (5e-5 for the committed file; the
 * same greedy choice but for near ties); with
 * only more layers, heads or FFN rows (no rescaling) it is exact. */
static void test_embed_same_function(void)
{
    const char *tiny = "models/hearth-tiny.gguf";
    if (access(tiny, R_OK)) SKIP("%s is not here (run from the repository root)", tiny);
    hx_err err = {0};
    hx_mkmodel_params s = small("qwen3", "F32"); /* 3 x 256, 4/2 heads of 64 */
    char small_path[512];
    snprintf(small_path, sizeof small_path, "%s", tmp_path("small-f32.gguf"));
    s.vocab_path = tiny;
    ASSERT(hx_mkmodel_write(&s, small_path, &err) == HX_OK);
    hx_mkmodel_params p = wide(NULL);
    p.ftype = "F32";
    check_embedded(small_path, p, 1e-6);
    check_embedded(tiny, wide(NULL), 1e-3);
    p = wide(NULL);
    p.n_embd = 256, p.head_dim = 64;
    check_embedded(tiny, p, 1e-12);
    p = wide(NULL); /* 4 query heads per key head hold the small model's 2 */
    p.ftype = "F32", p.n_head_kv = 2;
    check_embedded(small_path, p, 1e-6);
    /* qwen3moe, the 30B-A3B's grouping (8 per key head): the small block in
     * every expert, whichever two of eight the random router picks */
    p = wide(NULL);
    p.arch = "qwen3moe", p.n_head = 16, p.n_head_kv = 2, p.n_expert = 8, p.n_expert_used = 2;
    p.n_ff_exp = 768;
    check_embedded(tiny, p, 1e-3);
    p.ftype = "F32";
    check_embedded(small_path, p, 1e-6);
}

/* Shapes the small model does not fit, and files that are no qwen3
 * model, are refused with the reason; nothing is written. */
static void test_embed_refused(void)
{
    const char *tiny = "models/hearth-tiny.gguf";
    if (access(tiny, R_OK)) SKIP("%s is not here (run from the repository root)", tiny);
    hx_err err = {0};
    char out[512], llama[512];
    snprintf(out, sizeof out, "%s", tmp_path("bad-wide.gguf"));
    snprintf(llama, sizeof llama, "%s", tmp_path("llama.gguf"));
    hx_mkmodel_params p = wide(tiny);
    p.n_embd = 128; /* narrower than 256 */
    EXPECT_EQ_INT(hx_mkmodel_write(&p, out, &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "smaller") != NULL);
    p = wide(tiny);
    p.head_dim = 96;
    EXPECT_EQ_INT(hx_mkmodel_write(&p, out, &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "head_dim") != NULL);
    p = wide(tiny);
    p.n_head = 12; /* 3 query heads per key head cannot hold groups of 2 */
    EXPECT_EQ_INT(hx_mkmodel_write(&p, out, &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "per key head") != NULL);
    p = wide(tiny);
    p.arch = "qwen3moe", p.n_expert = 4, p.n_expert_used = 2, p.n_ff_exp = 512; /* < ff 768 */
    EXPECT_EQ_INT(hx_mkmodel_write(&p, out, &err), HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "smaller") != NULL);
    p = wide(tiny);
    p.arch = "llama";
    EXPECT_EQ_INT(hx_mkmodel_write(&p, out, &err), HX_ERR_INVALID);
    hx_mkmodel_params l = small("llama", "F32");
    ASSERT(hx_mkmodel_write(&l, llama, &err) == HX_OK);
    p = wide(llama);
    EXPECT_EQ_INT(hx_mkmodel_write(&p, out, &err), HX_ERR_UNSUPPORTED);
    EXPECT(strstr(err.msg, "qwen3") != NULL);
    /* a small model whose FFN tensors disagree with its hyperparameters */
    char broken[512];
    snprintf(broken, sizeof broken, "%s", tmp_path("broken-small.gguf"));
    hx_gguf *g = NULL;
    hx_gguf_writer *w = hx_gguf_writer_new();
    ASSERT(w && hx_gguf_open(tiny, &g, &err) == HX_OK);
    EXPECT(hx_gguf_copy_kv(w, g) == HX_OK && hx_gguf_set_u32(w, "qwen3.feed_forward_length", 512) == HX_OK);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        EXPECT(hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL) == HX_OK);
    }
    EXPECT(hx_gguf_writer_write(w, broken, &err) == HX_OK);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    p = wide(broken);
    EXPECT_EQ_INT(hx_mkmodel_write(&p, out, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "ffn_") != NULL);
    printf("     %s\n", err.msg);
    p = wide("/nonexistent/small.gguf");
    EXPECT(hx_mkmodel_write(&p, out, &err) != HX_OK);
    EXPECT(strstr(err.msg, "/nonexistent/small.gguf") != NULL);
    if (access(out, F_OK) == 0) printf("     %s was written\n", out);
    EXPECT(access(out, F_OK) != 0);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx_test_mkmodel.XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_every_type_loads_with_sensible_weights);
    RUN(test_qwen3moe_layout);
    RUN(test_llama_and_tied);
    RUN(test_tensor_type_overrides);
    RUN(test_seed_reproducible);
    RUN(test_vocab_copied);
    RUN(test_bad_params);
    RUN(test_embed_same_function);
    RUN(test_embed_refused);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmpdir);
    return test_summary();
}
