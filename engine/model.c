/* model.c: loading transformer models (llama, qwen2, qwen3, qwen3moe) from
 * GGUF: hyperparameters from the metadata, weights checked and used in place. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kernels.h"
#include "engine/model_int.h"
#include "engine/quant.h"
#include "engine/vocab.h"

/* What differs between the supported architectures. */
typedef struct arch_info {
    const char *name;
    int rope_type;
    int qk_norm;
    int qkv_bias;
    int moe; /* 1: always MoE; 0: MoE only when expert_count > 0 */
} arch_info;

static const arch_info k_archs[] = {
    {"llama", HX_ROPE_NORM, 0, 0, 0},
    {"qwen2", HX_ROPE_NEOX, 0, 1, 0},
    {"qwen3", HX_ROPE_NEOX, 1, 0, 0},
    {"qwen3moe", HX_ROPE_NEOX, 1, 0, 1},
};

static const arch_info *find_arch(const char *name)
{
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
        if (strcmp(k_archs[i].name, name) == 0) return &k_archs[i];
    return NULL;
}

hx_model_params hx_model_default_params(void)
{
    hx_model_params p;
    memset(&p, 0, sizeof p);
    return p;
}

int hx_model_type_ok(int type)
{
    return hx_matmul_supported(type);
}

/* ---- metadata ---- */

/* Reads "<arch>.<key>" as an integer; def when absent (def < 0: required).
 * A per-layer array is accepted when all its entries are equal. */
static int get_int(const hx_gguf *g, const char *arch, const char *key,
                   int64_t def, int64_t *out, hx_err *err)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int rc = hx_gguf_get_i64(g, full, out);
    if (rc == HX_OK) return HX_OK;
    if (rc == HX_ERR_NOTFOUND) {
        if (def < 0)
            return hx_err_set(err, HX_ERR_FORMAT, "missing metadata key %s",
                              full);
        *out = def;
        return HX_OK;
    }
    int et;
    uint64_t n;
    if (hx_gguf_get_arr(g, full, &et, &n) == HX_OK && n > 0) {
        int64_t v0 = hx_gguf_arr_i64(g, full, 0);
        for (uint64_t i = 1; i < n; i++)
            if (hx_gguf_arr_i64(g, full, i) != v0)
                return hx_err_set(err, HX_ERR_UNSUPPORTED,
                                  "%s varies per layer (not supported)", full);
        *out = v0;
        return HX_OK;
    }
    return hx_err_set(err, HX_ERR_FORMAT, "metadata key %s is not an integer",
                      full);
}

static int get_float(const hx_gguf *g, const char *arch, const char *key,
                     float def, float *out, hx_err *err)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int rc = hx_gguf_get_f32(g, full, out);
    if (rc == HX_ERR_NOTFOUND) {
        *out = def;
        return HX_OK;
    }
    if (rc != HX_OK)
        return hx_err_set(err, HX_ERR_FORMAT, "metadata key %s is not a float",
                          full);
    return HX_OK;
}

/* Integer hyperparameter that must lie in [lo, hi]. */
static int get_dim(const hx_gguf *g, const char *arch, const char *key,
                   int64_t def, int64_t lo, int64_t hi, int *out, hx_err *err)
{
    int64_t v;
    int rc = get_int(g, arch, key, def, &v, err);
    if (rc) return rc;
    if (v < lo || v > hi)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "metadata %s.%s = %lld out of range [%lld, %lld]",
                          arch, key, (long long)v, (long long)lo,
                          (long long)hi);
    *out = (int)v;
    return HX_OK;
}

static int load_rope(hx_model *m, const hx_gguf *g, hx_err *err)
{
    const char *arch = m->hp.arch;
    char key[160];
    const char *type = NULL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (hx_gguf_get_str(g, key, &type) == HX_OK && strcmp(type, "none") &&
        strcmp(type, "linear"))
        return hx_err_set(err, HX_ERR_UNSUPPORTED,
                          "rope scaling type '%s' is not supported", type);
    float factor;
    int rc = get_float(g, arch, "rope.scaling.factor", 0.0f, &factor, err);
    if (!rc && factor == 0.0f)
        rc = get_float(g, arch, "rope.scale_linear", 0.0f, &factor, err);
    if (rc) return rc;
    m->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    if (type && strcmp(type, "none") == 0) m->rope_freq_scale = 1.0f;
    return get_float(g, arch, "rope.freq_base", 10000.0f, &m->hp.rope_base,
                     err);
}

static int load_experts(hx_model *m, const hx_gguf *g, const arch_info *ai,
                        hx_err *err)
{
    hx_hparams *hp = &m->hp;
    const char *arch = hp->arch;
    int rc = get_dim(g, arch, "expert_count", ai->moe ? -1 : 0, 0, 4096,
                     &hp->n_expert, err);
    if (rc) return rc;
    if (hp->n_expert == 0) return HX_OK;
    rc = get_dim(g, arch, "expert_used_count", -1, 1, hp->n_expert,
                 &hp->n_expert_used, err);
    if (rc) return rc;
    int64_t def = ai->moe ? hp->n_ff / hp->n_expert_used : hp->n_ff;
    rc = get_dim(g, arch, "expert_feed_forward_length", def, 0, 1 << 20,
                 &hp->n_ff_exp, err);
    if (rc) return rc;
    if (hp->n_ff_exp <= 0)
        return hx_err_set(err, HX_ERR_FORMAT, "missing metadata key "
                          "%s.expert_feed_forward_length", arch);
    hp->expert_weights_norm = 1; /* llama.cpp: always for llama, qwen3moe */
    return HX_OK;
}

static int load_hparams(hx_model *m, const hx_gguf *g, const arch_info *ai,
                        hx_err *err)
{
    hx_hparams *hp = &m->hp;
    const char *arch = hp->arch;
    int rc = get_dim(g, arch, "embedding_length", -1, 1, 1 << 16,
                     &hp->n_embd, err);
    if (!rc) rc = get_dim(g, arch, "block_count", -1, 1, 4096, &hp->n_layer,
                          err);
    if (!rc) rc = get_dim(g, arch, "attention.head_count", -1, 1, 4096,
                          &hp->n_head, err);
    if (!rc) rc = get_dim(g, arch, "attention.head_count_kv", hp->n_head, 1,
                          hp->n_head, &hp->n_head_kv, err);
    if (rc) return rc;
    if (hp->n_head % hp->n_head_kv)
        return hx_err_set(err, HX_ERR_FORMAT, "head_count %d is not a multiple "
                          "of head_count_kv %d", hp->n_head, hp->n_head_kv);
    int kl = 0, vl = 0, n_rot = 0;
    rc = get_dim(g, arch, "attention.key_length", hp->n_embd / hp->n_head, 1,
                 1 << 14, &kl, err);
    if (!rc) rc = get_dim(g, arch, "attention.value_length", kl, 1, 1 << 14,
                          &vl, err);
    if (!rc) rc = get_dim(g, arch, "rope.dimension_count", kl, 0, 1 << 14,
                          &n_rot, err);
    if (rc) return rc;
    if (kl != vl || n_rot != kl)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "key_length %d, "
                          "value_length %d and rope dimension %d differ",
                          kl, vl, n_rot);
    hp->head_dim = kl;
    rc = get_dim(g, arch, "context_length", 2048, 1, 1 << 30,
                 &hp->n_ctx_train, err);
    if (!rc) rc = get_dim(g, arch, "feed_forward_length", ai->moe ? 0 : -1, 0,
                          1 << 20, &hp->n_ff, err);
    if (!rc) rc = get_float(g, arch, "attention.layer_norm_rms_epsilon",
                            -1.0f, &hp->rms_eps, err);
    if (rc) return rc;
    if (!(hp->rms_eps > 0.0f))
        return hx_err_set(err, HX_ERR_FORMAT, "missing metadata key "
                          "%s.attention.layer_norm_rms_epsilon", arch);
    hp->rope_type = ai->rope_type;
    hp->has_qk_norm = ai->qk_norm;
    hp->has_qkv_bias = ai->qkv_bias;
    rc = load_rope(m, g, err);
    return rc ? rc : load_experts(m, g, ai, err);
}

/* ---- tensors ---- */

static void shape_str(char *buf, size_t n, int nd, const int64_t *ne)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "",
                              (long long)ne[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* Finds a tensor and checks its shape against ne[0..nd) (ggml order). */
static int find_checked(const hx_gguf *g, const char *name, int nd,
                        const int64_t *ne, int required,
                        const hx_gguf_tensor **out, hx_err *err)
{
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, name);
    *out = NULL;
    if (!t) {
        if (!required) return HX_OK;
        return hx_err_set(err, HX_ERR_FORMAT, "missing tensor %s", name);
    }
    int ok = t->n_dims <= HX_GGUF_MAX_DIMS;
    for (int i = 0; i < HX_GGUF_MAX_DIMS && ok; i++)
        ok = t->ne[i] == (i < nd ? ne[i] : 1);
    if (!ok) {
        char want[96], got[96];
        shape_str(want, sizeof want, nd, ne);
        shape_str(got, sizeof got, t->n_dims, t->ne);
        return hx_err_set(err, HX_ERR_FORMAT,
                          "tensor %s has shape %s, expected %s", name, got,
                          want);
    }
    *out = t;
    return HX_OK;
}

/* A matrix (nd = 2) or expert stack (nd = 3) the matmul can use in place. */
static int load_mat(hx_model *m, hx_wmat *w, const char *name, int nd,
                    int64_t cols, int64_t rows, int64_t n_mat, int required,
                    hx_err *err)
{
    const int64_t ne[3] = {cols, rows, n_mat};
    const hx_gguf_tensor *t;
    memset(w, 0, sizeof *w);
    int rc = find_checked(m->gguf, name, nd, ne, required, &t, err);
    if (rc || !t) return rc;
    if (!hx_model_type_ok(t->type) || hx_type_row_bytes(t->type, cols) == 0)
        return hx_err_set(err, HX_ERR_UNSUPPORTED,
                          "tensor %s has type %s, which Hearth cannot compute "
                          "with", name, hx_type_ggml_name(t->type));
    w->data = t->data;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    w->n_mat = n_mat;
    w->row_bytes = hx_type_row_bytes(t->type, cols);
    m->weight_bytes += t->nbytes;
    m->n_params += cols * rows * n_mat;
    return HX_OK;
}

/* A vector (norm or bias) of n elements, copied to F32 at *pos in m->small. */
static int load_vec(hx_model *m, float **out, const char *name, int64_t n,
                    int required, size_t *pos, hx_err *err)
{
    const hx_gguf_tensor *t;
    *out = NULL;
    int rc = find_checked(m->gguf, name, 1, &n, required, &t, err);
    if (rc || !t) return rc;
    if (!hx_quant_supported(t->type) || hx_type_row_bytes(t->type, n) == 0)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "tensor %s has type %s, "
                          "which Hearth cannot read", name,
                          hx_type_ggml_name(t->type));
    HX_CHECK(*pos + (size_t)n <= m->small_cap); /* distinct 1-D tensors */
    *out = m->small + *pos;
    hx_dequantize_row(t->type, t->data, *out, n);
    *pos += (size_t)n;
    m->weight_bytes += t->nbytes;
    m->n_params += n;
    return HX_OK;
}

static int load_attn(hx_model *m, hx_layer *L, int i, size_t *pos, hx_err *err)
{
    const hx_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[8][64];
    const char *nm[8] = {"attn_norm.weight", "attn_q.weight", "attn_k.weight",
                         "attn_v.weight", "attn_output.weight", "attn_q.bias",
                         "attn_k.bias", "attn_v.bias"};
    for (int j = 0; j < 8; j++) snprintf(n[j], sizeof n[j], "blk.%d.%s", i, nm[j]);
    char fused[64];
    snprintf(fused, sizeof fused, "blk.%d.attn_qkv.weight", i);
    if (hx_gguf_find_tensor(m->gguf, fused) && !hx_gguf_find_tensor(m->gguf, n[1]))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "tensor %s: fused Q/K/V "
                          "weights are not supported", fused);
    int rc = load_vec(m, &L->attn_norm, n[0], e, 1, pos, err);
    if (!rc) rc = load_mat(m, &L->wq, n[1], 2, e, q, 1, 1, err);
    if (!rc) rc = load_mat(m, &L->wk, n[2], 2, e, kv, 1, 1, err);
    if (!rc) rc = load_mat(m, &L->wv, n[3], 2, e, kv, 1, 1, err);
    if (!rc) rc = load_mat(m, &L->wo, n[4], 2, q, e, 1, 1, err);
    if (!rc) rc = load_vec(m, &L->bq, n[5], q, 0, pos, err);
    if (!rc) rc = load_vec(m, &L->bk, n[6], kv, 0, pos, err);
    if (!rc) rc = load_vec(m, &L->bv, n[7], kv, 0, pos, err);
    if (rc || !hp->has_qk_norm) return rc;
    snprintf(n[0], sizeof n[0], "blk.%d.attn_q_norm.weight", i);
    snprintf(n[1], sizeof n[1], "blk.%d.attn_k_norm.weight", i);
    rc = load_vec(m, &L->q_norm, n[0], hp->head_dim, 1, pos, err);
    return rc ? rc : load_vec(m, &L->k_norm, n[1], hp->head_dim, 1, pos, err);
}

static int load_ffn(hx_model *m, hx_layer *L, int i, size_t *pos, hx_err *err)
{
    const hx_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, f = hp->n_ff, fx = hp->n_ff_exp;
    const int64_t nx = hp->n_expert;
    char n[4][64];
    snprintf(n[0], sizeof n[0], "blk.%d.ffn_norm.weight", i);
    int rc = load_vec(m, &L->ffn_norm, n[0], e, 1, pos, err);
    if (rc) return rc;
    const char *sfx = nx ? "_exps" : "";
    snprintf(n[0], sizeof n[0], "blk.%d.ffn_gate%s.weight", i, sfx);
    snprintf(n[1], sizeof n[1], "blk.%d.ffn_up%s.weight", i, sfx);
    snprintf(n[2], sizeof n[2], "blk.%d.ffn_down%s.weight", i, sfx);
    snprintf(n[3], sizeof n[3], "blk.%d.ffn_gate_inp.weight", i);
    if (!nx) {
        rc = load_mat(m, &L->ffn_gate, n[0], 2, e, f, 1, 1, err);
        if (!rc) rc = load_mat(m, &L->ffn_up, n[1], 2, e, f, 1, 1, err);
        return rc ? rc : load_mat(m, &L->ffn_down, n[2], 2, f, e, 1, 1, err);
    }
    rc = load_mat(m, &L->ffn_gate_inp, n[3], 2, e, nx, 1, 1, err);
    if (!rc) rc = load_mat(m, &L->gate_exps, n[0], 3, e, fx, nx, 1, err);
    if (!rc) rc = load_mat(m, &L->up_exps, n[1], 3, e, fx, nx, 1, err);
    return rc ? rc : load_mat(m, &L->down_exps, n[2], 3, fx, e, nx, 1, err);
}

/* Token embedding, output head (tied to the embedding when absent), and
 * every layer. */
static int load_tensors(hx_model *m, hx_err *err)
{
    hx_hparams *hp = &m->hp;
    const hx_gguf_tensor *t = hx_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!t) return hx_err_set(err, HX_ERR_FORMAT, "missing tensor token_embd.weight");
    if (t->ne[1] < 1 || t->ne[1] > INT32_MAX)
        return hx_err_set(err, HX_ERR_FORMAT, "token_embd.weight has %lld rows",
                          (long long)t->ne[1]);
    hp->n_vocab = (int)t->ne[1];
    /* Room for every 1-D tensor of the file: bounded by the file, not by
     * what its metadata claims. */
    for (int64_t i = 0; i < hx_gguf_n_tensors(m->gguf); i++) {
        const hx_gguf_tensor *v = hx_gguf_tensor_at(m->gguf, i);
        if (v->n_dims == 1) m->small_cap += (size_t)v->ne[0];
    }
    m->small = hx_malloc_array(m->small_cap + 1, sizeof(float));
    m->layers = hx_calloc((size_t)hp->n_layer, sizeof(hx_layer));
    if (!m->small || !m->layers) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    size_t pos = 0;
    int rc = load_mat(m, &m->tok_embd, "token_embd.weight", 2, hp->n_embd,
                      hp->n_vocab, 1, 1, err);
    if (!rc) rc = load_vec(m, &m->output_norm, "output_norm.weight", hp->n_embd, 1,
                           &pos, err);
    if (!rc) rc = load_mat(m, &m->output, "output.weight", 2, hp->n_embd,
                           hp->n_vocab, 1, 0, err);
    if (rc) return rc;
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) m->output = m->tok_embd;
    for (int i = 0; i < hp->n_layer && !rc; i++) {
        rc = load_attn(m, &m->layers[i], i, &pos, err);
        if (!rc) rc = load_ffn(m, &m->layers[i], i, &pos, err);
    }
    if (!rc) hp->has_qkv_bias = m->layers[0].bq != NULL;
    return rc;
}

/* Index of the first NaN or infinity among n elements of a float type,
 * or -1. */
static int64_t first_nonfinite(int type, const void *data, int64_t n)
{
    const uint8_t *p = data;
    for (int64_t j = 0; j < n; j++) {
        uint32_t f;
        uint16_t h;
        if (type == HX_TYPE_F32) {
            memcpy(&f, p + 4 * j, 4);
            if ((f & 0x7f800000u) == 0x7f800000u) return j;
            continue;
        }
        memcpy(&h, p + 2 * j, 2);
        uint16_t m = type == HX_TYPE_F16 ? 0x7c00 : 0x7f80;
        if ((h & m) == m) return j;
    }
    return -1;
}

/* Where a quantized block keeps its fp16 scales: the offsets of d and of
 * dmin (-1: none) in the block; 0 for a type that is not quantized. */
static int block_scales(int type, int *d, int *dmin)
{
    *dmin = -1;
    switch (type) {
    case HX_TYPE_Q8_0: *d = (int)offsetof(hx_block_q8_0, d); return 1;
    case HX_TYPE_Q4_0: *d = (int)offsetof(hx_block_q4_0, d); return 1;
    case HX_TYPE_Q4_K:
        *d = (int)offsetof(hx_block_q4_K, d), *dmin = (int)offsetof(hx_block_q4_K, dmin);
        return 1;
    case HX_TYPE_Q5_K:
        *d = (int)offsetof(hx_block_q5_K, d), *dmin = (int)offsetof(hx_block_q5_K, dmin);
        return 1;
    case HX_TYPE_Q6_K: *d = (int)offsetof(hx_block_q6_K, d); return 1;
    default: return 0;
    }
}

/* Index of the first block of a quantized tensor whose scale (or min
 * scale) is a NaN or infinity, or -1 (as llama.cpp's row validation). */
static int64_t first_bad_block(const hx_gguf_tensor *t)
{
    int d, dmin;
    const int bb = hx_type_block_bytes(t->type);
    if (!block_scales(t->type, &d, &dmin) || bb <= 0) return -1;
    const uint8_t *p = t->data;
    for (int64_t b = 0; b < (int64_t)(t->nbytes / (size_t)bb); b++, p += bb) {
        uint16_t h;
        memcpy(&h, p + d, 2);
        if ((h & 0x7c00) == 0x7c00) return b;
        if (dmin < 0) continue;
        memcpy(&h, p + dmin, 2);
        if ((h & 0x7c00) == 0x7c00) return b;
    }
    return -1;
}

/* Optional scan of F32, F16 and BF16 tensors for NaN and infinity, and of
 * quantized tensors' block scales. */
static int check_floats(const hx_model *m, hx_err *err)
{
    const hx_gguf *g = m->gguf;
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        int64_t b = first_bad_block(t);
        if (b >= 0)
            return hx_err_set(err, HX_ERR_FORMAT, "tensor %s (%s): block %lld has a NaN or "
                              "infinite scale", t->name, hx_type_name(t->type), (long long)b);
        int es = t->type == HX_TYPE_F32 ? 4
                 : t->type == HX_TYPE_F16 || t->type == HX_TYPE_BF16 ? 2 : 0;
        if (!es) continue;
        int64_t j = first_nonfinite(t->type, t->data, (int64_t)(t->nbytes / es));
        if (j >= 0)
            return hx_err_set(err, HX_ERR_FORMAT, "tensor %s holds a NaN or "
                              "infinity at element %lld", t->name, (long long)j);
    }
    return HX_OK;
}

/* The tokenizer, when the file has one. */
static int load_vocab(hx_model *m, hx_err *err)
{
    if (hx_gguf_find_key(m->gguf, "tokenizer.ggml.model") < 0) return HX_OK;
    return hx_vocab_load(m->gguf, &m->vocab, err);
}

static int load_model(hx_model *m, const hx_model_params *p, hx_err *err)
{
    const char *arch = NULL;
    if (hx_gguf_get_str(m->gguf, "general.architecture", &arch) != HX_OK)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "missing metadata key general.architecture");
    const arch_info *ai = find_arch(arch);
    if (!ai)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "unknown architecture '%s' "
                          "(supported: llama, qwen2, qwen3, qwen3moe)", arch);
    snprintf(m->hp.arch, sizeof m->hp.arch, "%s", arch);
    int rc = load_hparams(m, m->gguf, ai, err);
    /* the norms are a few scattered bytes: read them alone, not with
     * megabytes of read-ahead each (a memory cap counts those pages) */
    hx_gguf_advise_random(m->gguf, 1);
    if (!rc) rc = load_tensors(m, err);
    hx_gguf_advise_random(m->gguf, 0);
    if (!rc && p->check_tensors) rc = check_floats(m, err);
    if (!rc && !p->no_vocab) rc = load_vocab(m, err);
    return rc;
}

/* Opens the file (path) or the buffer, then loads; errors name the path. */
static int load_from(const char *path, const void *data, size_t size,
                     const hx_model_params *p, hx_model **out, hx_err *err)
{
    hx_model_params dp = hx_model_default_params();
    *out = NULL;
    hx_model *m = hx_calloc(1, sizeof *m);
    if (!m) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = path ? hx_gguf_open(path, &m->gguf, err)
                  : hx_gguf_open_buffer(data, size, &m->gguf, err);
    if (!rc) rc = load_model(m, p ? p : &dp, err);
    if (rc) {
        if (m->gguf && err && path) {
            hx_err e = *err;
            hx_err_set(err, rc, "%s: %s", path, e.msg);
        }
        hx_model_free(m);
        return rc;
    }
    *out = m;
    return HX_OK;
}

int hx_model_load(const char *path, const hx_model_params *p, hx_model **out,
                  hx_err *err)
{
    return load_from(path, NULL, 0, p, out, err);
}

int hx_model_load_buffer(const void *data, size_t size,
                         const hx_model_params *p, hx_model **out, hx_err *err)
{
    return load_from(NULL, data, size, p, out, err);
}

void hx_model_free(hx_model *m)
{
    if (!m) return;
    hx_vocab_free(m->vocab);
    hx_gguf_close(m->gguf);
    free(m->layers);
    free(m->small);
    free(m);
}

const hx_vocab *hx_model_vocab(const hx_model *m) { return m->vocab; }
const hx_gguf *hx_model_gguf(const hx_model *m) { return m->gguf; }
const hx_hparams *hx_model_hparams(const hx_model *m) { return &m->hp; }
size_t hx_model_size_bytes(const hx_model *m) { return m->weight_bytes; }
int64_t hx_model_n_params(const hx_model *m) { return m->n_params; }
