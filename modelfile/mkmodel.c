/* mkmodel.c: random-weight GGUF models (model_write.h): llama.cpp's
 * metadata and tensor names, weights generated block by block in place. */
#include "modelfile/model_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/ftype_int.h"
#include "engine/engine.h"
#include "modelfile/mkembed_int.h"

/* ---- random numbers: splitmix64, one stream per tensor ---- */
static float unif(uint64_t *x) /* [-1, 1) */
{
    return (float)(hx_splitmix64(x) >> 40) * 0x1.0p-23f - 1.0f;
}

static int irand(uint64_t *x, int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(hx_splitmix64(x) % (uint64_t)(hi - lo + 1));
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void rand_bytes(uint64_t *x, uint8_t *p, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(hx_splitmix64(x) >> 56);
}

/* ---- one block of each type, weights of standard deviation sd ----
 * Byte offsets as in ggml-common.h (see engine/gguf_types.c for sizes). */
#define SQRT3 1.7320508f
#define SD_Q4 4.61f  /* sd of uniform integers 0..15 */
#define SD_Q4_0 4.32f /* -7..7 */
#define SD_Q5 9.23f  /* 0..31 */
#define SD_Q6 18.47f /* 0..63 */

static void block_q8_0(uint64_t *x, uint8_t *b, float sd)
{
    put16(b, hx_fp32_to_fp16(sd * SQRT3 / 127.0f));
    for (int i = 0; i < 32; i++) b[2 + i] = (uint8_t)(int8_t)irand(x, -127, 127);
}

/* Quants 1..15 only, so that w = d * (q - 8) is centred. */
static void block_q4_0(uint64_t *x, uint8_t *b, float sd)
{
    put16(b, hx_fp32_to_fp16(sd / SD_Q4_0));
    for (int i = 0; i < 16; i++)
        b[2 + i] = (uint8_t)(irand(x, 1, 15) | (irand(x, 1, 15) << 4));
}

/* Q4_K/Q5_K scales: sub-block scales sc in 32..63 and mins m chosen so
 * that d*sc*q - dmin*m is centred (dmin = ratio*d, m = sc*mean/ratio),
 * packed in ggml's 12-byte 6-bit layout. */
static void kq_scales(uint64_t *x, uint8_t *s, float mean, float ratio)
{
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)irand(x, 32, 63);
        m[j] = (uint8_t)lrintf((float)sc[j] * mean / ratio);
    }
    memset(s, 0, 12);
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

static void block_q4_K(uint64_t *x, uint8_t *b, float sd)
{
    float d = sd / (47.5f * SD_Q4);
    put16(b, hx_fp32_to_fp16(d));
    put16(b + 2, hx_fp32_to_fp16(8.0f * d));
    kq_scales(x, b + 4, 7.5f, 8.0f);
    rand_bytes(x, b + 16, 128);
}

static void block_q5_K(uint64_t *x, uint8_t *b, float sd)
{
    float d = sd / (47.5f * SD_Q5);
    put16(b, hx_fp32_to_fp16(d));
    put16(b + 2, hx_fp32_to_fp16(16.0f * d));
    kq_scales(x, b + 4, 15.5f, 16.0f);
    rand_bytes(x, b + 16, 32 + 128);
}

static void block_q6_K(uint64_t *x, uint8_t *b, float sd)
{
    rand_bytes(x, b, 128 + 64);
    for (int j = 0; j < 16; j++) {
        int v = irand(x, 16, 63);
        b[192 + j] = (uint8_t)(int8_t)(hx_splitmix64(x) & 1 ? v : -v);
    }
    put16(b + 208, hx_fp32_to_fp16(sd / (39.5f * SD_Q6)));
}

/* Fills n elements of the type; for F32 with center != 0 (norm weights)
 * the values are center + sd*sqrt(3)*u. */
static int fill_elems(int type, void *buf, int64_t n, float sd, float center,
                      uint64_t *x)
{
    uint8_t *b = buf;
    int be = hx_type_block_elems(type), bb = hx_type_block_bytes(type);
    float a = sd * SQRT3;
    for (int64_t i = 0; i < n / be; i++, b += bb) {
        switch (type) {
        case HX_TYPE_F32: {
            float v = center + a * unif(x);
            memcpy(b, &v, 4);
            break;
        }
        case HX_TYPE_F16: put16(b, hx_fp32_to_fp16(a * unif(x))); break;
        case HX_TYPE_BF16: put16(b, hx_fp32_to_bf16(a * unif(x))); break;
        case HX_TYPE_Q8_0: block_q8_0(x, b, sd); break;
        case HX_TYPE_Q4_0: block_q4_0(x, b, sd); break;
        case HX_TYPE_Q4_K: block_q4_K(x, b, sd); break;
        case HX_TYPE_Q5_K: block_q5_K(x, b, sd); break;
        case HX_TYPE_Q6_K: block_q6_K(x, b, sd); break;
        default: return HX_ERR_UNSUPPORTED;
        }
    }
    return HX_OK;
}

/* ---- the model's tensors ---- */
typedef struct mk_tensor {
    char name[64];
    int type, n_dims;
    int64_t ne[3];
    float sd, center;
    uint64_t seed;
    const hx_embed *embed; /* weights from an embedded model, or NULL */
} mk_tensor;

typedef struct mk {
    hx_mkmodel_params p;
    int base_type, mix_m; /* mix_m: the "_M" mixes */
    int moe, qk_norm;
    mk_tensor *t;
    int n_t, cap_t;
    hx_embed *embed; /* p.embed_path opened, or NULL */
    hx_err *err;
} mk;

static int fill_tensor(void *user, const hx_gguf_tensor *t, void *buf)
{
    const mk_tensor *mt = user;
    if (mt->embed) return hx_embed_fill(mt->embed, t, buf);
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    uint64_t x = mt->seed;
    return fill_elems(t->type, buf, n, mt->sd, mt->center, &x);
}

enum role { R_NORM, R_ROUTER, R_EMBD, R_OUTPUT, R_MAT, R_V, R_DOWN };

static int type_for(const mk *m, int role, int il)
{
    if (role == R_NORM || role == R_ROUTER) return HX_TYPE_F32;
    if (!m->mix_m) return m->base_type;
    if (role == R_OUTPUT) return HX_TYPE_Q6_K;
    if ((role == R_V || role == R_DOWN) && hx_ftype_more_bits(il, m->p.n_layer))
        return HX_TYPE_Q6_K;
    return m->base_type;
}

/* The type tensor_types gives the role name, or -1 (none or not valid;
 * check_params has validated the list). */
static int override_type(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if (eq && eq < end && (size_t)(eq - p) == n && !strncmp(p, name, n)) {
            char type[16];
            if ((size_t)(end - eq - 1) >= sizeof type) return -1;
            snprintf(type, sizeof type, "%.*s", (int)(end - eq - 1), eq + 1);
            return hx_ftype_single(type);
        }
        p = *end ? end + 1 : end;
    }
    return -1;
}

static int add(mk *m, const char *name, int role, int il, int n_dims,
               int64_t ne0, int64_t ne1, int64_t ne2, float sd)
{
    if (m->n_t == m->cap_t) {
        int cap = m->cap_t ? 2 * m->cap_t : 64;
        mk_tensor *t = hx_realloc(m->t, (size_t)cap * sizeof *t);
        if (!t) return hx_err_set(m->err, HX_ERR_NOMEM, "out of memory");
        m->t = t;
        m->cap_t = cap;
    }
    mk_tensor *t = &m->t[m->n_t];
    memset(t, 0, sizeof *t);
    if (il >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s.weight", il, name);
    else snprintf(t->name, sizeof t->name, "%s.weight", name);
    t->type = type_for(m, role, il);
    int ov = override_type(m->p.tensor_types, name);
    if (ov >= 0) t->type = ov;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->sd = role == R_NORM ? 0.1f : sd;
    t->center = role == R_NORM ? 1.0f : 0.0f;
    uint64_t s = m->p.seed ^ ((uint64_t)(m->n_t + 1) * 0xd1b54a32d192ed03ull);
    t->seed = hx_splitmix64(&s);
    t->embed = role == R_ROUTER ? NULL : m->embed; /* an embedding keeps routers random */
    if (ne0 % hx_type_block_elems(t->type) != 0)
        return hx_err_set(m->err, HX_ERR_INVALID,
                          "%s: rows of %lld elements do not fit type %s "
                          "(blocks of %d)", t->name, (long long)ne0,
                          hx_type_name(t->type), hx_type_block_elems(t->type));
    m->n_t++;
    return HX_OK;
}

static float inv_sqrt(int n) { return 1.0f / sqrtf((float)n); }

static int add_attention(mk *m, int il)
{
    const hx_mkmodel_params *p = &m->p;
    int64_t q = (int64_t)p->n_head * p->head_dim, kv = (int64_t)p->n_head_kv * p->head_dim;
    float s = inv_sqrt(p->n_embd);
    int rc;
    if ((rc = add(m, "attn_norm", R_NORM, il, 1, p->n_embd, 1, 1, 0)) ||
        (rc = add(m, "attn_q", R_MAT, il, 2, p->n_embd, q, 1, s)) ||
        (rc = add(m, "attn_k", R_MAT, il, 2, p->n_embd, kv, 1, s)) ||
        (rc = add(m, "attn_v", R_V, il, 2, p->n_embd, kv, 1, s)) ||
        (rc = add(m, "attn_output", R_MAT, il, 2, q, p->n_embd, 1,
                  inv_sqrt((int)q))))
        return rc;
    if (!m->qk_norm) return HX_OK;
    if ((rc = add(m, "attn_q_norm", R_NORM, il, 1, p->head_dim, 1, 1, 0)) ||
        (rc = add(m, "attn_k_norm", R_NORM, il, 1, p->head_dim, 1, 1, 0)))
        return rc;
    return HX_OK;
}

static int add_ffn(mk *m, int il)
{
    const hx_mkmodel_params *p = &m->p;
    float s = inv_sqrt(p->n_embd);
    int rc = add(m, "ffn_norm", R_NORM, il, 1, p->n_embd, 1, 1, 0);
    if (rc) return rc;
    if (!m->moe) {
        if ((rc = add(m, "ffn_gate", R_MAT, il, 2, p->n_embd, p->n_ff, 1, s)) ||
            (rc = add(m, "ffn_down", R_DOWN, il, 2, p->n_ff, p->n_embd, 1,
                      inv_sqrt(p->n_ff))) ||
            (rc = add(m, "ffn_up", R_MAT, il, 2, p->n_embd, p->n_ff, 1, s)))
            return rc;
        return HX_OK;
    }
    /* a wide router keeps the top-k choice clear of near ties */
    if ((rc = add(m, "ffn_gate_inp", R_ROUTER, il, 2, p->n_embd, p->n_expert,
                  1, 4.0f * s)) ||
        (rc = add(m, "ffn_gate_exps", R_MAT, il, 3, p->n_embd, p->n_ff_exp,
                  p->n_expert, s)) ||
        (rc = add(m, "ffn_down_exps", R_DOWN, il, 3, p->n_ff_exp, p->n_embd,
                  p->n_expert, inv_sqrt(p->n_ff_exp))) ||
        (rc = add(m, "ffn_up_exps", R_MAT, il, 3, p->n_embd, p->n_ff_exp,
                  p->n_expert, s)))
        return rc;
    return HX_OK;
}

static int add_tensors(mk *m, int n_vocab)
{
    const hx_mkmodel_params *p = &m->p;
    int rc = add(m, "token_embd", R_EMBD, -1, 2, p->n_embd, n_vocab, 1, 1.0f);
    for (int il = 0; !rc && il < p->n_layer; il++)
        if (!(rc = add_attention(m, il))) rc = add_ffn(m, il);
    if (!rc) rc = add(m, "output_norm", R_NORM, -1, 1, p->n_embd, 1, 1, 0);
    if (!rc && !p->tied_output)
        rc = add(m, "output", R_OUTPUT, -1, 2, p->n_embd, n_vocab, 1,
                 2.0f * inv_sqrt(p->n_embd));
    return rc;
}

/* ---- metadata ---- */
static int set_hparams(hx_gguf_writer *w, const mk *m, int file_type)
{
    const hx_mkmodel_params *p = &m->p;
    hx_hparams hp;
    memset(&hp, 0, sizeof hp);
    snprintf(hp.arch, sizeof hp.arch, "%s", p->arch);
    hp.n_layer = p->n_layer, hp.n_ctx_train = p->n_ctx, hp.n_embd = p->n_embd;
    hp.n_ff = p->n_ff, hp.n_head = p->n_head, hp.n_head_kv = p->n_head_kv;
    hp.head_dim = p->head_dim, hp.rms_eps = p->rms_eps, hp.rope_base = p->rope_base;
    if (m->moe) {
        hp.n_expert = p->n_expert, hp.n_expert_used = p->n_expert_used;
        hp.n_ff_exp = p->n_ff_exp;
    }
    int rc = hx_model_set_hparams(w, &hp, "hearth random test model");
    rc = rc ? rc : hx_gguf_set_u32(w, "general.alignment", 32);
    return rc ? rc : hx_gguf_set_u32(w, "general.file_type", (uint32_t)file_type);
}

/* Copies the tokenizer.* keys; *n_vocab = the number of tokens. */
static int copy_vocab(hx_gguf_writer *w, const char *path, int *n_vocab,
                      hx_err *err)
{
    hx_gguf *g;
    hx_err e = {0};
    int rc = hx_gguf_open(path, &g, &e);
    if (rc) return hx_err_wrap(err, &e, path);
    int et;
    uint64_t n = 0;
    if (hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) != HX_OK ||
        et != HX_GGUF_STRING || n == 0 || n > INT32_MAX) {
        hx_gguf_close(g);
        return hx_err_set(err, HX_ERR_FORMAT,
                          "%s: no tokenizer.ggml.tokens string array", path);
    }
    *n_vocab = (int)n;
    rc = hx_gguf_copy_kv_prefix(w, g, "tokenizer.");
    hx_gguf_close(g);
    if (rc) return hx_err_set(err, rc, "%s: copying the tokenizer: %s", path,
                              hx_rc_str(rc));
    return HX_OK;
}

hx_mkmodel_params hx_mkmodel_default_params(void)
{
    hx_mkmodel_params p;
    memset(&p, 0, sizeof p);
    p.arch = "qwen3";
    p.ftype = "F32";
    p.n_vocab = 512;
    p.n_ctx = 4096;
    p.n_layer = 2;
    p.n_embd = 256;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 64;
    p.n_ff = 512;
    p.n_expert = 4;
    p.n_expert_used = 2;
    p.n_ff_exp = 256;
    p.rms_eps = 1e-6f;
    p.seed = 1;
    return p;
}

/* "NAME=TYPE,..." with non-empty names and single (not mixed) types. */
static int overrides_valid(const char *list)
{
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        char one[64];
        snprintf(one, sizeof one, "%.*s", (int)(end - p), p);
        char *eq = strchr(one, '=');
        if (!eq || eq == one || hx_ftype_single(eq + 1) < 0) return 0;
        p = *end ? end + 1 : end;
    }
    return 1;
}

static int check_params(mk *m, hx_err *err)
{
    hx_mkmodel_params *p = &m->p;
    const hx_ftype_info *ft = p->ftype ? hx_ftype_find(p->ftype) : NULL;
    if (!p->arch || (strcmp(p->arch, "llama") && strcmp(p->arch, "qwen3") &&
                     strcmp(p->arch, "qwen3moe")))
        return hx_err_set(err, HX_ERR_INVALID,
                          "unknown architecture '%s' (llama, qwen3, qwen3moe)",
                          p->arch ? p->arch : "(null)");
    if (!ft)
        return hx_err_set(err, HX_ERR_INVALID,
                          "unknown type '%s' (F32 F16 BF16 Q8_0 Q4_0 Q4_K "
                          "Q5_K Q6_K Q4_K_M Q5_K_M)",
                          p->ftype ? p->ftype : "(null)");
    if (!overrides_valid(p->tensor_types))
        return hx_err_set(err, HX_ERR_INVALID,
                          "bad tensor type overrides '%s' (NAME=TYPE,...; "
                          "TYPE one of F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K)",
                          p->tensor_types);
    m->base_type = ft->type;
    m->mix_m = ft->mix_m;
    m->moe = !strcmp(p->arch, "qwen3moe");
    m->qk_norm = strcmp(p->arch, "llama") != 0;
    if (p->rope_base <= 0) p->rope_base = m->qk_norm ? 1e6f : 1e4f;
    if (p->n_layer < 1 || p->n_embd < 1 || p->n_head < 1 ||
        p->n_head_kv < 1 || p->head_dim < 1 || p->n_ctx < 1 ||
        p->n_head % p->n_head_kv || (!m->moe && p->n_ff < 1) ||
        (!p->vocab_path && p->n_vocab < 1) || !(p->rms_eps > 0))
        return hx_err_set(err, HX_ERR_INVALID,
                          "bad shape: every size must be positive and "
                          "n_head a multiple of n_head_kv");
    if (m->moe && (p->n_expert < 1 || p->n_expert_used < 1 ||
                   p->n_expert_used > p->n_expert || p->n_ff_exp < 1))
        return hx_err_set(err, HX_ERR_INVALID,
                          "bad MoE shape: need 1 <= n_expert_used <= "
                          "n_expert and n_ff_exp >= 1");
    return HX_OK;
}

int hx_mkmodel_write(const hx_mkmodel_params *params, const char *path,
                     hx_err *err)
{
    mk m;
    memset(&m, 0, sizeof m);
    m.p = params ? *params : hx_mkmodel_default_params();
    m.err = err;
    int rc = check_params(&m, err);
    if (!rc && m.p.embed_path) rc = hx_embed_open(m.p.embed_path, &m.p, &m.embed, err);
    if (rc) return rc;
    hx_gguf_writer *w = hx_gguf_writer_new();
    if (!w) {
        hx_embed_close(m.embed);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    int n_vocab = m.p.n_vocab;
    if (m.p.vocab_path && !m.embed) rc = copy_vocab(w, m.p.vocab_path, &n_vocab, err);
    const hx_ftype_info *ft = hx_ftype_find(m.p.ftype);
    if (!rc && (rc = set_hparams(w, &m, ft->file_type)))
        hx_err_set(err, rc, "writing metadata: %s", hx_rc_str(rc));
    if (!rc && m.embed) rc = hx_embed_metadata(w, m.embed, err);
    if (!rc) rc = add_tensors(&m, n_vocab);
    for (int i = 0; !rc && i < m.n_t; i++) {
        mk_tensor *t = &m.t[i];
        rc = hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL,
                                fill_tensor, t);
        if (rc) hx_err_set(err, rc, "adding tensor %s: %s", t->name, hx_rc_str(rc));
    }
    const char *inputs[3] = {NULL}; /* the files the model is made from */
    int n_in = 0;
    if (m.p.vocab_path) inputs[n_in++] = m.p.vocab_path;
    if (m.p.embed_path) inputs[n_in++] = m.p.embed_path;
    if (!rc) rc = hx_gguf_writer_write_from(w, path, inputs, NULL, err);
    hx_gguf_writer_free(w);
    hx_embed_close(m.embed);
    free(m.t);
    return rc;
}
