/* adapter.c: LoRA adapters (llama.cpp's GGUF adapter format): loading and
 * checking against the base, attaching sets to contexts, and the unmerged
 * y += scale * (alpha/r) * B (A x) after each adapted matmul. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/adapter.h"
#include "engine/ctx_int.h"

/* Adaptable matrices of a layer, in hx_layer order; slot = layer * AD_KINDS
 * + kind, and n_layer * AD_KINDS is the output head. */
enum { AD_KINDS = 7 };
static const char *const k_kind_names[AD_KINDS] = {
    "attn_q.weight", "attn_k.weight",  "attn_v.weight",  "attn_output.weight",
    "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};

typedef struct ad_pair {
    int r;
    int64_t in, out;
    float *a; /* (r, in) row-major, into hx_adapter.data */
    float *b; /* (out, r) */
} ad_pair;

struct hx_adapter {
    const hx_model *m;
    int n_slots;
    ad_pair *slots;   /* n_slots; r == 0 where not adapted */
    float *data;      /* all A and B as F32 */
    hx_adapter_info info;
    char name[128], base_id[65], hash[65];
};

/* The attached set of a context (hx_ctx.lora). */
typedef struct hx_adapter_set {
    int n;
    hx_adapter *ads[HX_ADAPTER_MAX];
    float scales[HX_ADAPTER_MAX];
    float *u, *t;     /* scratch: (n_batch, max r), (n_batch, max out) */
    size_t u_cap, t_cap;
} hx_adapter_set;

static hx_wmat *slot_wmat(const hx_model *m, int slot)
{
    if (slot == m->hp.n_layer * AD_KINDS) return (hx_wmat *)&m->output;
    hx_layer *L = &m->layers[slot / AD_KINDS];
    hx_wmat *k[AD_KINDS] = {&L->wq, &L->wk, &L->wv, &L->wo,
                            &L->ffn_gate, &L->ffn_up, &L->ffn_down};
    return k[slot % AD_KINDS];
}

/* Slot of a matrix the forward pass multiplies by, or -1 (token_embd, the
 * MoE router and experts). */
static int wmat_slot(const hx_model *m, const hx_wmat *w)
{
    if (w == &m->output) return m->hp.n_layer * AD_KINDS;
    uintptr_t p = (uintptr_t)w, l0 = (uintptr_t)m->layers;
    if (p < l0 || p >= l0 + (uintptr_t)m->hp.n_layer * sizeof(hx_layer)) return -1;
    int l = (int)((p - l0) / sizeof(hx_layer));
    for (int k = 0; k < AD_KINDS; k++)
        if (slot_wmat(m, l * AD_KINDS + k) == w) return l * AD_KINDS + k;
    return -1;
}

/* Slot of a base tensor name; -1 if not adaptable. */
static int name_slot(const hx_model *m, const char *name)
{
    if (!strcmp(name, "output.weight"))
        return m->hp.tied_output ? -1 : m->hp.n_layer * AD_KINDS;
    int l, n = 0;
    if (sscanf(name, "blk.%d.%n", &l, &n) != 1 || n == 0 || l < 0 ||
        l >= m->hp.n_layer)
        return -1;
    for (int k = 0; k < AD_KINDS; k++)
        if (!strcmp(name + n, k_kind_names[k]))
            return slot_wmat(m, l * AD_KINDS + k)->data ? l * AD_KINDS + k : -1;
    return -1;
}

/* ---- identity ---- */

static void hash_tensor_info(hx_sha256 *s, const hx_gguf_tensor *t)
{
    hx_sha256_update(s, t->name, strlen(t->name) + 1);
    int32_t ty = t->type, nd = t->n_dims;
    hx_sha256_update(s, &ty, sizeof ty);
    hx_sha256_update(s, &nd, sizeof nd);
    hx_sha256_update(s, t->ne, sizeof t->ne);
}

/* What the computation depends on that the tensors do not show: head
 * counts, experts used, norms' epsilon, rope base, type and scaling, each
 * as 32 bits (floats by their bits) in a fixed order; new ones go last. */
static void hash_hparams(hx_sha256 *s, const hx_model *m)
{
    const hx_hparams *hp = &m->hp;
    const float f[3] = {hp->rms_eps, hp->rope_base, m->rope_freq_scale};
    uint32_t v[10] = {(uint32_t)hp->n_head, (uint32_t)hp->n_head_kv, (uint32_t)hp->head_dim,
                      (uint32_t)hp->n_expert, (uint32_t)hp->n_expert_used,
                      (uint32_t)hp->expert_weights_norm, (uint32_t)hp->rope_type};
    memcpy(v + 7, f, sizeof f);
    hx_sha256_update(s, v, sizeof v);
}

void hx_model_identity(const hx_model *m, char out[65])
{
    enum { PIECES = 16, PIECE = 256 };
    const hx_gguf *g = m->gguf;
    hx_sha256 s;
    hx_sha256_init(&s);
    hx_sha256_update(&s, m->hp.arch, strlen(m->hp.arch) + 1);
    hash_hparams(&s, m);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        hash_tensor_info(&s, t);
        const unsigned char *d = t->data;
        if (t->nbytes <= PIECES * PIECE) {
            hx_sha256_update(&s, d, t->nbytes);
            continue;
        }
        const size_t step = (t->nbytes - PIECE) / (PIECES - 1);
        for (int k = 0; k < PIECES; k++)
            hx_sha256_update(&s, d + (size_t)k * step, PIECE);
    }
    unsigned char dig[32];
    hx_sha256_final(&s, dig);
    hx_sha256_hex(dig, out);
}

/* ---- loading ---- */

static int check_meta(const hx_model *m, const hx_gguf *g, hx_adapter *a,
                      hx_err *err)
{
    const char *s = NULL;
    if (hx_gguf_get_str(g, "general.type", &s) || strcmp(s, "adapter"))
        return hx_err_set(err, HX_ERR_FORMAT, "not an adapter: general.type is "
                          "'%s', expected 'adapter'", s ? s : "(missing)");
    s = NULL;
    if (hx_gguf_get_str(g, "adapter.type", &s) || strcmp(s, "lora"))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "adapter.type is '%s', only "
                          "'lora' is supported", s ? s : "(missing)");
    s = NULL;
    if (hx_gguf_get_str(g, "general.architecture", &s) || strcmp(s, m->hp.arch))
        return hx_err_set(err, HX_ERR_INVALID, "adapter for architecture '%s', "
                          "the model is '%s'", s ? s : "(missing)", m->hp.arch);
    int rc = hx_gguf_get_f32(g, "adapter.lora.alpha", &a->info.alpha);
    if (rc == HX_ERR_NOTFOUND) a->info.alpha = 0.0f;
    else if (rc || !isfinite(a->info.alpha))
        return hx_err_set(err, HX_ERR_FORMAT, "adapter.lora.alpha is not a "
                          "finite float");
    const char *name = NULL, *base = NULL;
    if (!hx_gguf_get_str(g, "general.name", &name))
        snprintf(a->name, sizeof a->name, "%s", name);
    rc = hx_gguf_get_str(g, HX_ADAPTER_BASE_KEY, &base);
    if (rc == HX_ERR_NOTFOUND) return HX_OK;
    if (rc || strlen(base) != 64)
        return hx_err_set(err, HX_ERR_FORMAT, "%s is not a 64-digit identity",
                          HX_ADAPTER_BASE_KEY);
    memcpy(a->base_id, base, 65);
    char mine[65];
    hx_model_identity(m, mine);
    if (strcmp(mine, base))
        return hx_err_set(err, HX_ERR_INVALID, "adapter was trained on another "
                          "base model (base %.16s..., this model %.16s...)", base,
                          mine);
    return HX_OK;
}

/* The base name of an adapter tensor and which half it is (0 A, 1 B);
 * -1 for a tensor to ignore, -2 for an unexpected one. */
static int split_name(const char *name, char *base, size_t n)
{
    size_t len = strlen(name);
    static const char *const sfx[2] = {".lora_a", ".lora_b"};
    for (int h = 0; h < 2; h++)
        if (len > 7 && len - 7 < n && !strcmp(name + len - 7, sfx[h])) {
            memcpy(base, name, len - 7);
            base[len - 7] = '\0';
            return h;
        }
    if (len >= 12 && !strcmp(name + len - 12, "_norm.weight")) return -1;
    return -2;
}

static int type_ok(int type)
{
    return type == HX_TYPE_F32 || type == HX_TYPE_F16 || type == HX_TYPE_BF16 ||
           type == HX_TYPE_Q8_0;
}

/* Pairs each A/B tensor with its base matrix: pa[slot], pb[slot]. */
static int match_tensors(const hx_model *m, const hx_gguf *g, int n_slots,
                         const hx_gguf_tensor **pa, const hx_gguf_tensor **pb,
                         hx_err *err)
{
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        char base[256];
        int h = split_name(t->name, base, sizeof base);
        if (h == -1) continue;
        if (h == -2)
            return hx_err_set(err, HX_ERR_FORMAT, "tensor '%s' is neither "
                              "<name>.lora_a nor <name>.lora_b", t->name);
        int slot = name_slot(m, base);
        if (slot < 0 && !hx_gguf_find_tensor(m->gguf, base))
            return hx_err_set(err, HX_ERR_FORMAT, "'%s' adapts %s, which the "
                              "base model does not have (wrong base model?)",
                              t->name, base);
        if (slot < 0)
            return hx_err_set(err, HX_ERR_UNSUPPORTED, "'%s': adapting %s is not "
                              "supported (only attention, dense FFN and output "
                              "matrices)", t->name, base);
        if (!type_ok(t->type))
            return hx_err_set(err, HX_ERR_UNSUPPORTED, "'%s' is %s; adapters "
                              "must be F32, F16, BF16 or Q8_0", t->name,
                              hx_type_ggml_name(t->type));
        if (t->n_dims != 2)
            return hx_err_set(err, HX_ERR_FORMAT, "'%s' has %d dimensions, "
                              "expected 2", t->name, t->n_dims);
        const hx_gguf_tensor **p = h ? &pb[slot] : &pa[slot];
        if (*p) return hx_err_set(err, HX_ERR_FORMAT, "'%s' appears twice", t->name);
        *p = t;
    }
    (void)n_slots;
    return HX_OK;
}

/* Shapes of one pair against its base matrix w. */
static int check_pair(const hx_wmat *w, const char *bname,
                      const hx_gguf_tensor *a, const hx_gguf_tensor *b,
                      hx_err *err)
{
    if (!a || !b)
        return hx_err_set(err, HX_ERR_FORMAT, "%s has a lora_%s but no lora_%s",
                          bname, a ? "a" : "b", a ? "b" : "a");
    if (a->ne[0] != w->cols || b->ne[1] != w->rows)
        return hx_err_set(err, HX_ERR_FORMAT, "%s: lora_a ne [%lld, %lld] and "
                          "lora_b ne [%lld, %lld] do not fit the base matrix "
                          "[%lld, %lld] (wrong base model?)", bname,
                          (long long)a->ne[0], (long long)a->ne[1],
                          (long long)b->ne[0], (long long)b->ne[1],
                          (long long)w->cols, (long long)w->rows);
    if (a->ne[1] != b->ne[0] || a->ne[1] < 1 || a->ne[1] > 65536)
        return hx_err_set(err, HX_ERR_FORMAT, "%s: ranks of lora_a (%lld) and "
                          "lora_b (%lld) differ or are out of range", bname,
                          (long long)a->ne[1], (long long)b->ne[0]);
    return HX_OK;
}

/* Copies tensor t (rows of ne[0]) as F32 into dst; hashes its bytes. */
static void take_tensor(const hx_gguf_tensor *t, float *dst, hx_sha256 *s)
{
    hash_tensor_info(s, t);
    hx_sha256_update(s, t->data, t->nbytes);
    const size_t rb = hx_type_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < t->ne[1]; r++)
        hx_dequantize_row(t->type, (const char *)t->data + (size_t)r * rb,
                          dst + (size_t)r * (size_t)t->ne[0], t->ne[0]);
}

static int build_pairs(hx_adapter *ad, const hx_gguf_tensor **pa,
                       const hx_gguf_tensor **pb, hx_err *err)
{
    size_t total = 0;
    for (int s = 0; s < ad->n_slots; s++) {
        if (!pa[s] && !pb[s]) continue;
        const hx_wmat *w = slot_wmat(ad->m, s);
        const char *nm = pa[s] ? pa[s]->name : pb[s]->name;
        char bname[256];
        split_name(nm, bname, sizeof bname);
        int rc = check_pair(w, bname, pa[s], pb[s], err);
        if (rc) return rc;
        total += (size_t)(pa[s]->ne[0] + pb[s]->ne[1]) * (size_t)pa[s]->ne[1];
    }
    if (total == 0)
        return hx_err_set(err, HX_ERR_FORMAT, "adapter has no lora_a/lora_b pair");
    ad->data = hx_malloc_array(total, sizeof(float));
    if (!ad->data) return hx_err_set(err, HX_ERR_NOMEM, "adapter: out of memory");
    hx_sha256 sh;
    hx_sha256_init(&sh);
    hx_sha256_update(&sh, &ad->info.alpha, sizeof ad->info.alpha);
    float *p = ad->data;
    for (int s = 0; s < ad->n_slots; s++) {
        if (!pa[s]) continue;
        ad_pair *q = &ad->slots[s];
        q->r = (int)pa[s]->ne[1];
        q->in = pa[s]->ne[0];
        q->out = pb[s]->ne[1];
        q->a = p, p += (size_t)q->r * (size_t)q->in;
        q->b = p, p += (size_t)q->r * (size_t)q->out;
        take_tensor(pa[s], q->a, &sh);
        take_tensor(pb[s], q->b, &sh);
        ad->info.n_pairs++;
        if (q->r > ad->info.rank) ad->info.rank = q->r;
    }
    ad->info.n_params = (int64_t)total;
    unsigned char dig[32];
    hx_sha256_final(&sh, dig);
    hx_sha256_hex(dig, ad->hash);
    return HX_OK;
}

static int load_from(const hx_model *m, hx_gguf *g, const char *path,
                     hx_adapter **out, hx_err *err)
{
    hx_adapter *a = hx_calloc(1, sizeof *a);
    if (!a) return hx_err_set(err, HX_ERR_NOMEM, "adapter: out of memory");
    a->m = m;
    a->n_slots = m->hp.n_layer * AD_KINDS + 1;
    const char *slash = path ? strrchr(path, '/') : NULL;
    snprintf(a->name, sizeof a->name, "%s", slash ? slash + 1 : path ? path : "adapter");
    a->slots = hx_calloc((size_t)a->n_slots, sizeof *a->slots);
    const hx_gguf_tensor **pa = hx_calloc((size_t)a->n_slots * 2, sizeof *pa);
    int rc = a->slots && pa ? check_meta(m, g, a, err)
                            : hx_err_set(err, HX_ERR_NOMEM, "adapter: out of memory");
    if (!rc) rc = match_tensors(m, g, a->n_slots, pa, pa + a->n_slots, err);
    if (!rc) rc = build_pairs(a, pa, pa + a->n_slots, err);
    free(pa);
    if (rc) {
        hx_adapter_free(a);
        return rc;
    }
    a->info.name = a->name;
    a->info.base_id = a->base_id;
    a->info.hash = a->hash;
    *out = a;
    return HX_OK;
}

int hx_adapter_load(const hx_model *m, const char *path, hx_adapter **out,
                    hx_err *err)
{
    *out = NULL;
    hx_gguf *g = NULL;
    int rc = hx_gguf_open(path, &g, err);
    if (!rc) rc = load_from(m, g, path, out, err);
    hx_gguf_close(g);
    if (rc) {
        hx_err e = *err;
        return hx_err_set(err, rc, "adapter %s: %s", path, e.msg);
    }
    return HX_OK;
}

int hx_adapter_load_buffer(const hx_model *m, const void *data, size_t size,
                           hx_adapter **out, hx_err *err)
{
    *out = NULL;
    hx_gguf *g = NULL;
    int rc = hx_gguf_open_buffer(data, size, &g, err);
    if (!rc) rc = load_from(m, g, NULL, out, err);
    hx_gguf_close(g);
    return rc;
}

void hx_adapter_free(hx_adapter *a)
{
    if (!a) return;
    free(a->slots);
    free(a->data);
    free(a);
}

const hx_adapter_info *hx_adapter_get_info(const hx_adapter *a)
{
    return &a->info;
}

/* ---- attached sets ---- */

void hx_adapter_set_free(struct hx_adapter_set *s)
{
    if (!s) return;
    free(s->u);
    free(s->t);
    free(s);
}

/* Grows the scratch for the set's largest rank and output width. */
static int reserve_scratch(hx_ctx *c, hx_adapter_set *s)
{
    size_t rmax = 0, omax = 0;
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < s->ads[i]->n_slots; k++) {
            const ad_pair *p = &s->ads[i]->slots[k];
            if ((size_t)p->r > rmax) rmax = (size_t)p->r;
            if ((size_t)p->out > omax) omax = (size_t)p->out;
        }
    rmax *= (size_t)c->n_batch, omax *= (size_t)c->n_batch;
    if (rmax > s->u_cap) {
        free(s->u);
        s->u = hx_malloc_array(rmax, sizeof(float));
        s->u_cap = s->u ? rmax : 0;
    }
    if (omax > s->t_cap) {
        free(s->t);
        s->t = hx_malloc_array(omax, sizeof(float));
        s->t_cap = s->t ? omax : 0;
    }
    return s->u_cap >= rmax && s->t_cap >= omax ? HX_OK : HX_ERR_NOMEM;
}

/* c->adapter_key (the prefix cache's part of its key) from the set; a
 * description too long for it is replaced by its SHA-256. */
static void make_key(hx_ctx *c, const hx_adapter_set *s)
{
    char key[HX_ADAPTER_MAX * 160 + 1];
    size_t off = 0;
    key[0] = '\0';
    for (int i = 0; i < s->n; i++)
        off += (size_t)snprintf(key + off, sizeof key - off, "%s%.100s#%.16s*%.9g",
                                i ? ";" : "", s->ads[i]->name, s->ads[i]->hash,
                                (double)s->scales[i]);
    if (off < sizeof c->adapter_key) {
        memcpy(c->adapter_key, key, off + 1);
        return;
    }
    unsigned char dig[32];
    hx_sha256 sh;
    hx_sha256_init(&sh);
    hx_sha256_update(&sh, key, off);
    hx_sha256_final(&sh, dig);
    memcpy(c->adapter_key, "sha256:", 7);
    hx_sha256_hex(dig, c->adapter_key + 7);
}

int hx_ctx_set_adapters(hx_ctx *c, hx_adapter *const *ads, const float *scales,
                        int n)
{
    if (n < 0 || n > HX_ADAPTER_MAX)
        return hx_err_set(&c->err, HX_ERR_INVALID, "%d adapters: at most %d "
                          "at once", n, HX_ADAPTER_MAX);
    for (int i = 0; i < n; i++) {
        if (!ads[i] || ads[i]->m != c->m)
            return hx_err_set(&c->err, HX_ERR_INVALID, "adapter %d was loaded "
                              "for another model", i);
        for (int j = 0; j < i; j++)
            if (ads[j] == ads[i])
                return hx_err_set(&c->err, HX_ERR_INVALID, "adapter %s is "
                                  "listed twice", ads[i]->name);
    }
    hx_adapter_set *s = c->lora ? c->lora : hx_calloc(1, sizeof *s);
    if (!s) return hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory");
    c->lora = s;
    hx_adapter_set old = *s;
    s->n = n;
    for (int i = 0; i < n; i++) s->ads[i] = ads[i], s->scales[i] = scales[i];
    if (reserve_scratch(c, s)) {
        s->n = old.n;
        memcpy(s->ads, old.ads, sizeof s->ads);
        memcpy(s->scales, old.scales, sizeof s->scales);
        return hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory for adapters");
    }
    make_key(c, s);
    hx_ctx_truncate(c, 0);
    return HX_OK;
}

int hx_ctx_attach_adapter(hx_ctx *c, hx_adapter *a, float scale)
{
    hx_adapter *ads[HX_ADAPTER_MAX + 1];
    float sc[HX_ADAPTER_MAX + 1];
    int n = hx_ctx_n_adapters(c), found = 0;
    for (int i = 0; i < n; i++) {
        ads[i] = c->lora->ads[i];
        sc[i] = ads[i] == a ? (found = 1, scale) : c->lora->scales[i];
    }
    if (!found) ads[n] = a, sc[n++] = scale;
    return hx_ctx_set_adapters(c, ads, sc, n);
}

int hx_ctx_detach_adapter(hx_ctx *c, const hx_adapter *a)
{
    hx_adapter *ads[HX_ADAPTER_MAX];
    float sc[HX_ADAPTER_MAX];
    int n = 0, m = hx_ctx_n_adapters(c);
    for (int i = 0; i < m; i++)
        if (c->lora->ads[i] != a)
            ads[n] = c->lora->ads[i], sc[n++] = c->lora->scales[i];
    if (n == m)
        return hx_err_set(&c->err, HX_ERR_NOTFOUND, "adapter is not attached");
    return hx_ctx_set_adapters(c, ads, sc, n);
}

int hx_ctx_n_adapters(const hx_ctx *c) { return c->lora ? c->lora->n : 0; }

const char *hx_ctx_adapter_key(const hx_ctx *c) { return c->adapter_key; }

/* ---- the forward hook ---- */

void hx_adapter_apply(hx_ctx *c, const hx_wmat *w, const float *x, int B, float *y)
{
    hx_adapter_set *s = c->lora;
    if (!s || s->n == 0) return;
    const int slot = wmat_slot(c->m, w);
    for (int i = 0; slot >= 0 && i < s->n; i++) {
        const ad_pair *p = &s->ads[i]->slots[slot];
        if (p->r == 0 || s->scales[i] == 0.0f) continue;
        /* as llama.cpp: scale * alpha / rank, or the bare scale when alpha
         * is 0; then y + scale * (B (A x)) */
        const float alpha = s->ads[i]->info.alpha;
        const float sc = alpha != 0.0f ? s->scales[i] * alpha / (float)p->r
                                       : s->scales[i];
        hx_matmul(c->tp, p->a, HX_TYPE_F32, p->in, p->r, x, B, s->u);
        hx_matmul(c->tp, p->b, HX_TYPE_F32, p->r, p->out, s->u, B, s->t);
        const size_t n = (size_t)B * (size_t)p->out;
        for (size_t j = 0; j < n; j++) y[j] += sc * s->t[j];
    }
}
