/* mkembed.c: a small trained qwen3 model embedded in a wider, deeper shape
 * (model_write.h, hx_mkmodel_params.embed_path), so that the wide model
 * computes the small one's function at the wide one's cost: a benchmark of
 * a real shape whose output is a trained model's, where random weights
 * write nonsense.
 *
 * The small model's weights sit in the first rows and columns of the wide
 * tensors, zeros elsewhere, so the residual stream keeps its first n_embd
 * (small) dimensions and the others stay 0:
 * - RMSNorm over the wide width sees the same sum of squares over more
 *   dimensions; its weights are scaled by sqrt(small / wide) to cancel it.
 * - Query and key dimensions are spread: rotary pair i of a small head
 *   goes to pair i * R of the wide head (R = wide / small head_dim), whose
 *   frequency base^(-2iR/D) is the small pair's; the q/k norm weights are
 *   scaled by R^(-1/4) each, which cancels the wider norm (sqrt(R) per
 *   vector) against the 1/sqrt(D) score scale.
 * - Heads beyond the small model's, FFN rows beyond its width, and layers
 *   beyond its depth are zero: they add nothing to the residual stream
 *   (a zero layer is the identity).
 * - A wide group of query heads sharing a key head holds the small
 *   group's heads first (8 per key head can hold 2 per key head).
 * - A qwen3moe shape gets the small feed-forward block in every expert
 *   (first rows and columns), so whichever experts the router picks, their
 *   renormalised weights sum to 1 and the block is the small one; the
 *   router stays random (mkmodel.c), so tokens route as they would in a
 *   model that spreads them over its experts, and a batch reads the
 *   experts its tokens pick.
 * - The vocabulary is the small model's, padded with unused "[PAD<i>]"
 *   tokens (as converted Qwen files are) whose embedding rows are zero.
 * Quantized small weights are dequantized and requantized to the wide
 * types (Q8_0 to Q8_0 is exact). */
#include "modelfile/mkembed_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

struct hx_embed {
    hx_gguf *g;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int w_embd, w_dim, w_vocab; /* the wide embedding, head size, tokens */
    int w_group;                /* the wide query heads per key head */
};

static int get_dim(const hx_gguf *g, const char *key, int *out)
{
    uint32_t v;
    char k[96];
    snprintf(k, sizeof k, "qwen3.%s", key);
    if (hx_gguf_get_u32(g, k, &v) || v < 1 || v > (1u << 24)) return 0;
    *out = (int)v;
    return 1;
}

/* The small model's shape, and its rope base, eps and context. */
static int read_small(hx_embed *e, hx_mkmodel_params *p, hx_err *err)
{
    const char *arch = NULL;
    const hx_gguf *g = e->g;
    const char *path = hx_gguf_path(g);
    if (hx_gguf_get_str(g, "general.architecture", &arch) || strcmp(arch, "qwen3"))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "%s: embedding needs a qwen3 model, not %s",
                          path, arch ? arch : "(none)");
    uint64_t n_tok = 0;
    int et;
    if (!get_dim(g, "block_count", &e->n_layer) || !get_dim(g, "embedding_length", &e->n_embd) ||
        !get_dim(g, "attention.head_count", &e->n_head) ||
        !get_dim(g, "attention.head_count_kv", &e->n_head_kv) ||
        !get_dim(g, "attention.key_length", &e->head_dim) ||
        !get_dim(g, "feed_forward_length", &e->n_ff) ||
        hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n_tok) || et != HX_GGUF_STRING ||
        n_tok < 1 || n_tok > (1u << 24))
        return hx_err_set(err, HX_ERR_FORMAT, "%s: missing qwen3 shape keys or tokenizer", path);
    e->n_vocab = (int)n_tok;
    if (hx_gguf_get_f32(g, "qwen3.rope.freq_base", &p->rope_base)) p->rope_base = 1e6f;
    if (hx_gguf_get_f32(g, "qwen3.attention.layer_norm_rms_epsilon", &p->rms_eps)) p->rms_eps = 1e-6f;
    uint32_t ctx;
    if (!hx_gguf_get_u32(g, "qwen3.context_length", &ctx) && ctx > 0) p->n_ctx = (int)ctx;
    p->tied_output = !hx_gguf_find_tensor(g, "output.weight");
    if (p->n_vocab < e->n_vocab) p->n_vocab = e->n_vocab;
    return HX_OK;
}

/* Every wide size at least the small one (the expert width for
 * qwen3moe), whole rotary pairs per small pair, and wide groups of query
 * heads per key head that hold a whole number of the small groups. */
static int check_fit(const hx_embed *e, const hx_mkmodel_params *p, hx_err *err)
{
    int moe = !strcmp(p->arch, "qwen3moe"), ff = moe ? p->n_ff_exp : p->n_ff;
    if (!moe && strcmp(p->arch, "qwen3"))
        return hx_err_set(err, HX_ERR_INVALID, "embedding writes qwen3 and qwen3moe models only");
    if (p->n_layer < e->n_layer || p->n_embd < e->n_embd || p->n_head < e->n_head ||
        p->n_head_kv < e->n_head_kv || p->head_dim < e->head_dim || ff < e->n_ff)
        return hx_err_set(err, HX_ERR_INVALID,
                          "the wide shape (%d layers, %d embd, %d/%d heads of %d, ff %d) is "
                          "smaller than the embedded model's (%d, %d, %d/%d of %d, ff %d)",
                          p->n_layer, p->n_embd, p->n_head, p->n_head_kv, p->head_dim, ff,
                          e->n_layer, e->n_embd, e->n_head, e->n_head_kv, e->head_dim, e->n_ff);
    if (p->head_dim % e->head_dim || e->head_dim % 2)
        return hx_err_set(err, HX_ERR_INVALID, "head_dim %d is not a multiple of the embedded "
                          "model's even %d", p->head_dim, e->head_dim);
    if (p->n_head % p->n_head_kv || (p->n_head / p->n_head_kv) % (e->n_head / e->n_head_kv))
        return hx_err_set(err, HX_ERR_INVALID, "%d query heads per key head cannot hold the "
                          "embedded model's groups of %d", p->n_head / p->n_head_kv,
                          e->n_head / e->n_head_kv);
    return HX_OK;
}

int hx_embed_open(const char *path, hx_mkmodel_params *p, hx_embed **out, hx_err *err)
{
    *out = NULL;
    hx_embed *e = hx_calloc(1, sizeof *e);
    if (!e) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_err e2 = {0};
    int rc = hx_gguf_open(path, &e->g, &e2);
    if (rc) rc = hx_err_wrap(err, &e2, path);
    if (!rc) rc = read_small(e, p, err);
    if (!rc) rc = check_fit(e, p, err);
    if (rc) {
        hx_embed_close(e);
        return rc;
    }
    e->w_embd = p->n_embd, e->w_dim = p->head_dim, e->w_vocab = p->n_vocab;
    e->w_group = p->n_head / p->n_head_kv;
    *out = e;
    return HX_OK;
}

void hx_embed_close(hx_embed *e)
{
    if (!e) return;
    hx_gguf_close(e->g);
    free(e);
}

/* ---- the tokenizer, padded ---- */
static int pad_tokens(hx_gguf_writer *w, const hx_embed *e)
{
    int n = e->w_vocab, n0 = e->n_vocab, rc = HX_ERR_NOMEM;
    const char **s = hx_calloc((size_t)n, sizeof *s);
    size_t *len = hx_calloc((size_t)n, sizeof *len);
    char *pads = hx_malloc((size_t)(n - n0) * 16 + 1);
    int32_t *type = hx_malloc((size_t)n * sizeof *type);
    if (s && len && pads && type) {
        int et;
        uint64_t nt = 0;
        int have_types = !hx_gguf_get_arr(e->g, "tokenizer.ggml.token_type", &et, &nt) &&
                         nt == (uint64_t)n0;
        for (int i = 0; i < n; i++) {
            if (i < n0) {
                s[i] = hx_gguf_arr_str(e->g, "tokenizer.ggml.tokens", (uint64_t)i, &len[i]);
                type[i] = have_types ? (int32_t)hx_gguf_arr_i64(e->g, "tokenizer.ggml.token_type", (uint64_t)i) : 1;
                continue;
            }
            char *q = pads + (size_t)(i - n0) * 16;
            len[i] = (size_t)snprintf(q, 16, "[PAD%d]", i);
            s[i] = q;
            type[i] = 5; /* unused: renders as nothing, never sampled under a grammar */
        }
        rc = hx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", s, len, (uint64_t)n);
        if (!rc) rc = hx_gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_I32, type, (uint64_t)n);
    }
    free(s);
    free(len);
    free(pads);
    free(type);
    return rc;
}

int hx_embed_metadata(hx_gguf_writer *w, const hx_embed *e, hx_err *err)
{
    const char *name = NULL;
    char buf[256];
    int rc = hx_gguf_copy_kv_prefix(w, e->g, "tokenizer.");
    if (!rc) rc = hx_gguf_copy_kv_prefix(w, e->g, "hearth.");
    if (!rc && e->w_vocab > e->n_vocab) {
        rc = pad_tokens(w, e);
        if (!rc && hx_gguf_find_key(e->g, "tokenizer.ggml.scores") >= 0) {
            float *sc = hx_calloc((size_t)e->w_vocab, sizeof *sc);
            for (int i = 0; sc && i < e->n_vocab; i++)
                sc[i] = hx_gguf_arr_f32(e->g, "tokenizer.ggml.scores", (uint64_t)i);
            rc = sc ? hx_gguf_set_arr(w, "tokenizer.ggml.scores", HX_GGUF_F32, sc, (uint64_t)e->w_vocab)
                    : HX_ERR_NOMEM;
            free(sc);
        }
    }
    if (hx_gguf_get_str(e->g, "general.name", &name)) name = "a qwen3 model";
    snprintf(buf, sizeof buf, "%s, embedded in a wider shape (same function)", name);
    if (!rc) rc = hx_gguf_set_str(w, "general.name", buf);
    if (rc) return hx_err_set(err, rc, "copying the embedded model's tokenizer: %s", hx_rc_str(rc));
    return HX_OK;
}

/* ---- the tensors ---- */
enum axis { AX_EMBD, AX_Q, AX_K, AX_V, AX_O, AX_QKNORM, AX_FF, AX_VOCAB, AX_ONE };

/* The small query head that wide query head h holds, or -1: the small
 * group of each key head first in the wide group. */
static int64_t map_head(const hx_embed *e, int64_t h)
{
    int64_t sg = e->n_head / e->n_head_kv, g = h / e->w_group, k = h % e->w_group;
    return g < e->n_head_kv && k < sg ? g * sg + k : -1;
}

/* The small index that wide index i of an axis holds, or -1 (zero). */
static int64_t map_axis(const hx_embed *e, int ax, int64_t i)
{
    int64_t D = e->w_dim, d = e->head_dim, h = i / D, j = i % D, R = D / d;
    int64_t qh = ax == AX_Q || ax == AX_O ? map_head(e, h) : -1;
    int64_t half = D / 2, pair = j % half, second = j / half;
    int64_t rope = pair % R == 0 ? second * (d / 2) + pair / R : -1;
    switch (ax) {
    case AX_EMBD: return i < e->n_embd ? i : -1;
    case AX_Q: return qh >= 0 && rope >= 0 ? qh * d + rope : -1;
    case AX_K: return h < e->n_head_kv && rope >= 0 ? h * d + rope : -1;
    case AX_V: return h < e->n_head_kv && j < d ? h * d + j : -1;
    case AX_O: return qh >= 0 && j < d ? qh * d + j : -1;
    case AX_QKNORM: return i < D ? rope : -1;
    case AX_FF: return i < e->n_ff ? i : -1;
    case AX_VOCAB: return i < e->n_vocab ? i : -1;
    default: return i == 0 ? 0 : -1;
    }
}

typedef struct role {
    const char *name;
    int rows, cols; /* axes of ne[1] and ne[0] */
    int norm;       /* 1: RMSNorm over embd, 2: q/k norm */
} role;

static const role ROLES[] = {
    {"token_embd", AX_VOCAB, AX_EMBD, 0}, {"output", AX_VOCAB, AX_EMBD, 0},
    {"output_norm", AX_ONE, AX_EMBD, 1},  {"attn_norm", AX_ONE, AX_EMBD, 1},
    {"ffn_norm", AX_ONE, AX_EMBD, 1},     {"attn_q", AX_Q, AX_EMBD, 0},
    {"attn_k", AX_K, AX_EMBD, 0},         {"attn_v", AX_V, AX_EMBD, 0},
    {"attn_output", AX_EMBD, AX_O, 0},    {"attn_q_norm", AX_ONE, AX_QKNORM, 2},
    {"attn_k_norm", AX_ONE, AX_QKNORM, 2}, {"ffn_gate", AX_FF, AX_EMBD, 0},
    {"ffn_up", AX_FF, AX_EMBD, 0},        {"ffn_down", AX_EMBD, AX_FF, 0},
    /* qwen3moe: every expert holds the small block (rows: ne[1] of each) */
    {"ffn_gate_exps", AX_FF, AX_EMBD, 0}, {"ffn_up_exps", AX_FF, AX_EMBD, 0},
    {"ffn_down_exps", AX_EMBD, AX_FF, 0},
};

/* "blk.N.NAME.weight" or "NAME.weight": the role and the layer (-1). */
static const role *role_of(const char *tname, int *il)
{
    char base[64];
    *il = -1;
    if (sscanf(tname, "blk.%d.%63[^.]", il, base) != 2 &&
        (*il = -1, sscanf(tname, "%63[^.]", base) != 1))
        return NULL;
    for (size_t i = 0; i < sizeof ROLES / sizeof ROLES[0]; i++)
        if (!strcmp(ROLES[i].name, base)) return &ROLES[i];
    return NULL;
}

/* The small tensor as floats (rows of ne[0]); NULL on error. */
static float *small_floats(const hx_gguf_tensor *s)
{
    int64_t n0 = s->ne[0], n1 = s->ne[1];
    size_t rb = hx_type_row_bytes(s->type, n0);
    float *f = hx_malloc((size_t)(n0 * n1) * sizeof *f);
    for (int64_t r = 0; f && r < n1; r++)
        hx_dequantize_row(s->type, (const uint8_t *)s->data + (size_t)r * rb, f + r * n0, n0);
    return f;
}

/* The small model's size along an axis. */
static int64_t small_size(const hx_embed *e, int ax)
{
    switch (ax) {
    case AX_EMBD: return e->n_embd;
    case AX_Q: case AX_O: return (int64_t)e->n_head * e->head_dim;
    case AX_K: case AX_V: return (int64_t)e->n_head_kv * e->head_dim;
    case AX_QKNORM: return e->head_dim;
    case AX_FF: return e->n_ff;
    case AX_VOCAB: return e->n_vocab;
    default: return 1;
    }
}

static float norm_scale(const hx_embed *e, int norm)
{
    if (norm == 1) return sqrtf((float)e->n_embd / (float)e->w_embd);
    if (norm == 2) return powf((float)e->head_dim / (float)e->w_dim, 0.25f);
    return 1.0f;
}

int hx_embed_fill(const hx_embed *e, const hx_gguf_tensor *t, void *buf)
{
    int il;
    const role *ro = role_of(t->name, &il);
    if (!ro) return HX_ERR_UNSUPPORTED;
    int64_t n0 = t->ne[0], n1 = t->ne[1], rows = n1 * (t->ne[2] > 0 ? t->ne[2] : 1);
    size_t rb = hx_type_row_bytes(t->type, n0);
    if (il >= e->n_layer) { /* a layer past the small model's depth: the identity */
        memset(buf, 0, (size_t)rows * rb);
        return HX_OK;
    }
    char sname[96]; /* an expert tensor's small one: "blk.N.ffn_up" */
    const char *x = strstr(t->name, "_exps.");
    if (x) snprintf(sname, sizeof sname, "%.*s%s", (int)(x - t->name), t->name, x + 5);
    else snprintf(sname, sizeof sname, "%s", t->name);
    const hx_gguf_tensor *s = hx_gguf_find_tensor(e->g, sname);
    if (!s) return HX_ERR_FORMAT; /* a tensor its hyperparameters need */
    if (!hx_quant_supported(s->type)) return HX_ERR_UNSUPPORTED;
    if (s->ne[0] != small_size(e, ro->cols) || s->ne[1] != small_size(e, ro->rows))
        return HX_ERR_FORMAT; /* not the shape its hyperparameters give */
    float *src = small_floats(s), *row = hx_malloc((size_t)n0 * sizeof *row);
    int64_t *cols = hx_malloc((size_t)n0 * sizeof *cols); /* the same for every row */
    float k = norm_scale(e, ro->norm);
    int rc = src && row && cols ? HX_OK : HX_ERR_NOMEM;
    for (int64_t c = 0; !rc && c < n0; c++) cols[c] = map_axis(e, ro->cols, c);
    for (int64_t r = 0; !rc && r < rows; r++) {
        int64_t sr = map_axis(e, ro->rows, r % n1);
        if (sr < 0) { /* a row the small model has none of: zero bytes are zeros in every type */
            memset((uint8_t *)buf + (size_t)r * rb, 0, rb);
            continue;
        }
        for (int64_t c = 0; c < n0; c++)
            row[c] = cols[c] >= 0 ? k * src[sr * s->ne[0] + cols[c]] : 0.0f;
        hx_quantize_row(t->type, row, (uint8_t *)buf + (size_t)r * rb, n0, NULL);
    }
    free(src);
    free(row);
    free(cols);
    return rc;
}
