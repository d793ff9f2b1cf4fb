/* trainer.c: creating trainers (from scratch, from a GGUF for full
 * training, or LoRA over a frozen GGUF): parameter layout, init, wiring. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lora/train_int.h"

static const char *const k_lin_names[7] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

hx_train_config hx_train_default_config(void)
{
    hx_train_config c = {256, 256, 64, 2, 4, 2, 16, 128, 1e-6f, 1e6f};
    return c;
}

hx_lora_params hx_lora_default_params(void)
{
    hx_lora_params p = {.rank = 8, .alpha = 8.0f,
                        .targets = HX_LORA_Q | HX_LORA_K | HX_LORA_V | HX_LORA_O,
                        .init_b = 0.0f, .seed = 1, .first_layer = 0};
    return p;
}

double hx_tr_rng_normal(uint64_t *s)
{
    const double u1 = ((hx_splitmix64(s) >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = (hx_splitmix64(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- parameter layout ---- */

static int add_tensor(hx_trainer *tr, const char *name, int64_t ne0,
                      int64_t ne1, int decay)
{
    tr_tensor *t = hx_realloc(tr->tensors, (size_t)(tr->n_tensors + 1) * sizeof *t);
    if (!t) return HX_ERR_NOMEM;
    tr->tensors = t;
    t += tr->n_tensors++;
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->off = tr->n_params;
    t->n = (size_t)(ne0 * ne1);
    t->decay = decay;
    tr->n_params += t->n;
    return HX_OK;
}

/* Input and output widths of linear i of a layer. */
static void lin_shape(const hx_hparams *hp, int i, int *in, int *out)
{
    const int C = hp->n_embd, Q = hp->n_head * hp->head_dim;
    const int K = hp->n_head_kv * hp->head_dim, F = hp->n_ff;
    const int ins[7] = {C, C, C, Q, C, C, F}, outs[7] = {Q, K, K, C, F, F, C};
    *in = ins[i];
    *out = outs[i];
}

/* Full mode: every weight, in llama.cpp's order. */
static int layout_full(hx_trainer *tr, int has_output)
{
    const hx_hparams *hp = &tr->hp;
    char nm[80];
    int rc = add_tensor(tr, "token_embd.weight", hp->n_embd, hp->n_vocab, 0);
    for (int l = 0; !rc && l < hp->n_layer; l++) {
        int in, out;
        snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", l);
        rc = add_tensor(tr, nm, hp->n_embd, 1, 0);
        for (int i = 0; !rc && i < 4; i++) {
            lin_shape(hp, i, &in, &out);
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, k_lin_names[i]);
            rc = add_tensor(tr, nm, in, out, 1);
        }
        snprintf(nm, sizeof nm, "blk.%d.attn_q_norm.weight", l);
        if (!rc) rc = add_tensor(tr, nm, hp->head_dim, 1, 0);
        snprintf(nm, sizeof nm, "blk.%d.attn_k_norm.weight", l);
        if (!rc) rc = add_tensor(tr, nm, hp->head_dim, 1, 0);
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", l);
        if (!rc) rc = add_tensor(tr, nm, hp->n_embd, 1, 0);
        for (int i = 4; !rc && i < 7; i++) {
            lin_shape(hp, i, &in, &out);
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, k_lin_names[i]);
            rc = add_tensor(tr, nm, in, out, 1);
        }
    }
    if (!rc) rc = add_tensor(tr, "output_norm.weight", hp->n_embd, 1, 0);
    if (!rc && has_output) rc = add_tensor(tr, "output.weight", hp->n_embd, hp->n_vocab, 1);
    return rc;
}

/* Whether linear i of layer l gets a LoRA. */
static int adapted(const hx_lora_params *lp, int l, int i)
{
    return (lp->targets & (1u << i)) && l >= lp->first_layer;
}

/* LoRA mode: A (ne [in, r]) and B (ne [r, out]) per target. */
static int layout_lora(hx_trainer *tr, const hx_lora_params *lp)
{
    char nm[80];
    int rc = HX_OK;
    for (int l = 0; !rc && l < tr->hp.n_layer; l++)
        for (int i = 0; !rc && i < 7; i++) {
            if (!adapted(lp, l, i)) continue;
            int in, out;
            lin_shape(&tr->hp, i, &in, &out);
            snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_a", l, k_lin_names[i]);
            rc = add_tensor(tr, nm, in, lp->rank, 1);
            snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_b", l, k_lin_names[i]);
            if (!rc) rc = add_tensor(tr, nm, lp->rank, out, 1);
        }
    return rc;
}

static const tr_tensor *find(const hx_trainer *tr, const char *name)
{
    for (int i = 0; i < tr->n_tensors; i++)
        if (!strcmp(tr->tensors[i].name, name)) return &tr->tensors[i];
    return NULL;
}

/* Parameter / gradient pointers of a tensor by name (NULL if absent). */
static float *P(const hx_trainer *tr, const char *name, float **grad)
{
    const tr_tensor *t = find(tr, name);
    if (grad) *grad = t ? tr->grads + t->off : NULL;
    return t ? tr->params + t->off : NULL;
}

static float *Pl(const hx_trainer *tr, int l, const char *what, float **grad)
{
    char nm[80];
    snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, what);
    return P(tr, nm, grad);
}

static int alloc_state(hx_trainer *tr)
{
    tr->params = hx_calloc(tr->n_params, sizeof(float));
    tr->grads = hx_calloc(tr->n_params, sizeof(float));
    tr->m = hx_calloc(tr->n_params, sizeof(float));
    tr->v = hx_calloc(tr->n_params, sizeof(float));
    return tr->params && tr->grads && tr->m && tr->v ? HX_OK : HX_ERR_NOMEM;
}

/* Full mode wiring: every pointer into params / grads. */
static void wire_full(hx_trainer *tr)
{
    const hx_hparams *hp = &tr->hp;
    float *g;
    tr->embd = (tr_w){.f = P(tr, "token_embd.weight", &tr->d_embd), .rows = hp->n_vocab,
                      .cols = hp->n_embd};
    tr->out_norm = P(tr, "output_norm.weight", &tr->d_out_norm);
    const float *o = P(tr, "output.weight", &g);
    tr->head.w = o ? (tr_w){.f = o, .rows = hp->n_vocab, .cols = hp->n_embd} : tr->embd;
    tr->head.dw = o ? g : tr->d_embd;
    for (int l = 0; l < hp->n_layer; l++) {
        tr_layer *L = &tr->layers[l];
        L->attn_norm = Pl(tr, l, "attn_norm", &L->d_attn_norm);
        L->q_norm = Pl(tr, l, "attn_q_norm", &L->d_q_norm);
        L->k_norm = Pl(tr, l, "attn_k_norm", &L->d_k_norm);
        L->ffn_norm = Pl(tr, l, "ffn_norm", &L->d_ffn_norm);
        for (int i = 0; i < 7; i++) {
            int in, out;
            lin_shape(hp, i, &in, &out);
            L->lin[i].w = (tr_w){.f = Pl(tr, l, k_lin_names[i], &L->lin[i].dw), .rows = out,
                                 .cols = in};
        }
    }
}

/* The frozen matrix `kind` of layer il: the weight cache's copy, or the
 * mapping's. */
static const hx_wmat *frozen(const hx_trainer *tr, int il, int kind)
{
    const hx_wmat *w = tr->wc ? hx_wc_weight(tr->wc, il, kind) : hx_model_weight(tr->base, il, kind);
    HX_CHECK(w);
    return w;
}

/* Points the frozen matrices every token uses (attention, router, head)
 * at the weight cache's copies, or at the mapping (the experts and the
 * embedding are read where they are used: moe.c, fwdbwd.c). */
static void wire_frozen(hx_trainer *tr)
{
    static const int kinds[4] = {HX_WEIGHT_Q, HX_WEIGHT_K, HX_WEIGHT_V, HX_WEIGHT_O};
    tr->head.w.q = frozen(tr, -1, HX_WEIGHT_OUTPUT);
    for (int l = 0; l < tr->hp.n_layer; l++) {
        tr_layer *L = &tr->layers[l];
        for (int i = 0; i < 4; i++) L->lin[i].w.q = frozen(tr, l, kinds[i]);
        if (tr->hp.n_expert) L->router.q = frozen(tr, l, HX_WEIGHT_ROUTER);
    }
}

/* The weight cache applies: LoRA over a MoE base. */
static int budget_applies(const hx_trainer *tr)
{
    return tr->base && tr->hp.n_expert > 0;
}

size_t hx_trainer_weight_budget_min(const hx_trainer *tr)
{
    hx_wc_plan p;
    if (!budget_applies(tr)) return 0;
    hx_wc_plan_make(tr->base, 0, &p);
    return p.resident + p.min_cache;
}

size_t hx_trainer_weight_bytes(const hx_trainer *tr)
{
    if (tr->wc) return tr->wc_bytes;
    return tr->base ? hx_model_size_bytes(tr->base) : 0;
}

int hx_trainer_set_weight_budget(hx_trainer *tr, size_t bytes, hx_err *err)
{
    if (!budget_applies(tr))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "train: a weight budget is for LoRA over "
                          "a MoE base (this is %s%s)", tr->base ? "a dense " : "full training",
                          tr->base ? tr->hp.arch : "");
    hx_wc_free(tr->wc);
    tr->wc = NULL;
    tr->wc_bytes = 0;
    hx_wc_plan p;
    int rc = bytes ? hx_wc_plan_make(tr->base, bytes, &p) : HX_OK;
    if (rc == HX_ERR_RANGE)
        hx_err_set(err, rc, "train: a weight budget of %.1f MiB is too small for this base: "
                   "it needs at least %.1f MiB (weights every token uses %.1f MiB + two "
                   "experts' slots a layer %.1f MiB)", bytes / 1048576.0,
                   (p.resident + p.min_cache) / 1048576.0, p.resident / 1048576.0,
                   p.min_cache / 1048576.0);
    if (!rc && bytes) rc = hx_wc_new(tr->base, &p, &tr->wc, err);
    if (!rc && tr->wc) tr->wc_bytes = p.resident + p.cache;
    wire_frozen(tr);
    return rc;
}

/* LoRA mode wiring: frozen base from the model, A and B from params. */
static void wire_lora(hx_trainer *tr, const hx_lora_params *lp)
{
    const hx_model *m = tr->base;
    const hx_hparams *hp = &tr->hp;
    const hx_wmat *embd = hx_model_weight(m, -1, HX_WEIGHT_TOK_EMBD);
    const hx_wmat *head = hx_model_weight(m, -1, HX_WEIGHT_OUTPUT);
    tr->embd = (tr_w){.q = embd, .rows = hp->n_vocab, .cols = hp->n_embd};
    tr->out_norm = hx_model_norm(m, -1, HX_NORM_OUTPUT);
    tr->head.w = (tr_w){.q = head, .rows = hp->n_vocab, .cols = hp->n_embd};
    static const int kinds[7] = {HX_WEIGHT_Q, HX_WEIGHT_K, HX_WEIGHT_V, HX_WEIGHT_O,
                                 HX_WEIGHT_FFN_GATE, HX_WEIGHT_FFN_UP, HX_WEIGHT_FFN_DOWN};
    for (int l = 0; l < hp->n_layer; l++) {
        tr_layer *L = &tr->layers[l];
        const hx_wmat *w[7];
        for (int i = 0; i < 7; i++) w[i] = hx_model_weight(m, l, kinds[i]);
        L->attn_norm = hx_model_norm(m, l, HX_NORM_ATTN);
        L->q_norm = hx_model_norm(m, l, HX_NORM_Q);
        L->k_norm = hx_model_norm(m, l, HX_NORM_K);
        L->ffn_norm = hx_model_norm(m, l, HX_NORM_FFN);
        if (hp->n_expert) {
            L->router = (tr_w){.q = hx_model_weight(m, l, HX_WEIGHT_ROUTER),
                               .rows = hp->n_expert, .cols = hp->n_embd};
            L->exps[0] = hx_model_weight(m, l, HX_WEIGHT_GATE_EXPS);
            L->exps[1] = hx_model_weight(m, l, HX_WEIGHT_UP_EXPS);
            L->exps[2] = hx_model_weight(m, l, HX_WEIGHT_DOWN_EXPS);
        }
        for (int i = 0; i < 7; i++) {
            tr_lin *li = &L->lin[i];
            if (!w[i]->data) continue; /* a MoE layer's dense FFN */
            li->w = (tr_w){.q = w[i], .rows = (int)w[i]->rows, .cols = (int)w[i]->cols};
            if (!adapted(lp, l, i)) continue;
            char nm[80];
            snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_a", l, k_lin_names[i]);
            li->a = P(tr, nm, &li->da);
            snprintf(nm, sizeof nm, "blk.%d.%s.weight.lora_b", l, k_lin_names[i]);
            li->b = P(tr, nm, &li->db);
            li->r = lp->rank;
            li->s = lp->alpha / (float)lp->rank;
        }
    }
    wire_frozen(tr);
}

/* Pool, RoPE table, layers (per-thread scratch and activations come
 * with the first pass: hx_tr_reserve). */
static int setup_common(hx_trainer *tr, int n_threads)
{
    const hx_hparams *hp = &tr->hp;
    if (n_threads <= 0) n_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    tr->n_threads = n_threads < 1 ? 1 : n_threads;
    tr->tp = hx_threadpool_new(tr->n_threads);
    tr->rope_cs = hx_malloc_array((size_t)hp->n_ctx_train * hp->head_dim, sizeof(float));
    tr->layers = hx_calloc((size_t)hp->n_layer, sizeof(tr_layer));
    tr->acts = hx_calloc((size_t)hp->n_layer, sizeof(tr_acts));
    if (!tr->tp || !tr->rope_cs || !tr->layers || !tr->acts)
        return HX_ERR_NOMEM;
    hx_tr_rope_table(tr->rope_cs, hp->n_ctx_train, hp->head_dim, hp->rope_base);
    return HX_OK;
}

static int check_shape(const hx_hparams *hp, hx_err *err)
{
    if (hp->n_vocab < 2 || hp->n_embd < 1 || hp->n_layer < 1 || hp->n_head < 1 ||
        hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv || hp->head_dim < 2 ||
        hp->head_dim % 2 || (hp->n_ff < 1 && !hp->n_expert) || hp->n_ctx_train < 1)
        return hx_err_set(err, HX_ERR_INVALID, "train: bad model shape (vocab %d, "
                          "embd %d, layers %d, heads %d/%d of %d, ff %d, ctx %d)",
                          hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_head,
                          hp->n_head_kv, hp->head_dim, hp->n_ff, hp->n_ctx_train);
    return HX_OK;
}

static int finish(hx_trainer *tr, int rc, hx_trainer **out, hx_err *err)
{
    if (rc) {
        if (rc == HX_ERR_NOMEM) hx_err_set(err, rc, "train: out of memory");
        hx_trainer_free(tr);
        return rc;
    }
    tr->rng = 0x5eed;
    *out = tr;
    return HX_OK;
}

static void init_scratch(hx_trainer *tr, uint64_t seed)
{
    uint64_t s = seed;
    const float proj = 1.0f / sqrtf(2.0f * (float)tr->hp.n_layer);
    for (int i = 0; i < tr->n_tensors; i++) {
        const tr_tensor *t = &tr->tensors[i];
        float *p = tr->params + t->off;
        const int gain = strstr(t->name, "norm") != NULL;
        const float sc = strstr(t->name, "attn_output") || strstr(t->name, "ffn_down")
                             ? 0.02f * proj : 0.02f;
        for (size_t k = 0; k < t->n; k++) p[k] = gain ? 1.0f : sc * (float)hx_tr_rng_normal(&s);
    }
}

int hx_trainer_new_scratch(const hx_train_config *c, uint64_t seed,
                           int n_threads, hx_trainer **out, hx_err *err)
{
    *out = NULL;
    hx_trainer *tr = hx_calloc(1, sizeof *tr);
    if (!tr) return hx_err_set(err, HX_ERR_NOMEM, "train: out of memory");
    hx_hparams *hp = &tr->hp;
    snprintf(hp->arch, sizeof hp->arch, "qwen3");
    hp->n_vocab = c->n_vocab;
    hp->n_ctx_train = c->n_ctx;
    hp->n_embd = c->n_embd;
    hp->n_layer = c->n_layer;
    hp->n_head = c->n_head;
    hp->n_head_kv = c->n_head_kv;
    hp->head_dim = c->head_dim;
    hp->n_ff = c->n_ff;
    hp->rms_eps = c->rms_eps;
    hp->rope_base = c->rope_base;
    hp->rope_type = HX_ROPE_NEOX;
    hp->tied_output = 1;
    hp->has_qk_norm = 1;
    int rc = check_shape(hp, err);
    if (rc) {
        free(tr);
        return rc;
    }
    rc = setup_common(tr, n_threads);
    if (!rc) rc = layout_full(tr, 0);
    if (!rc) rc = alloc_state(tr);
    if (!rc) {
        wire_full(tr);
        init_scratch(tr, seed);
    }
    return finish(tr, rc, out, err);
}

/* A base the trainer computes as the engine does: qwen3 or qwen3moe
 * (llama and qwen2 without biases) with NEOX RoPE and no scaling. A MoE
 * base takes LoRA on its attention only (lora: the targets asked): its
 * router and experts stay frozen, and full training is not offered. */
static int check_base(const hx_model *m, const hx_lora_params *lora, hx_err *err)
{
    const hx_hparams *hp = hx_model_hparams(m);
    const unsigned ffn = HX_LORA_GATE | HX_LORA_UP | HX_LORA_DOWN;
    if (hp->has_qkv_bias || hp->rope_type != HX_ROPE_NEOX || hx_model_rope_freq_scale(m) != 1.0f)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "train: %s models are not "
                          "supported (qwen3 or qwen3moe only: no biases, NEOX "
                          "RoPE, no rope scaling)", hp->arch);
    if (hp->n_expert && !lora)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "train: full training of a MoE model (%s) "
                          "is not supported; train a LoRA adapter", hp->arch);
    if (hp->n_expert && (lora->targets & ffn))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "train: the experts and the router of a MoE "
                          "model (%s) take no LoRA; adapt its attention (q, k, v, o)", hp->arch);
    if (hp->n_expert && (hp->n_ff_exp < 1 || hp->n_expert_used < 1 ||
                         hp->n_expert_used > hp->n_expert))
        return hx_err_set(err, HX_ERR_INVALID, "train: bad MoE shape (%d of %d experts of %d)",
                          hp->n_expert_used, hp->n_expert, hp->n_ff_exp);
    return check_shape(hp, err);
}

unsigned hx_lora_targets_for(const char *path, unsigned targets, int *moved)
{
    const unsigned ffn = HX_LORA_GATE | HX_LORA_UP | HX_LORA_DOWN;
    hx_gguf *g = NULL;
    const char *arch = NULL;
    uint32_t n_expert = 0;
    char key[96];
    if (moved) *moved = 0;
    if (!(targets & ffn) || hx_gguf_open(path, &g, NULL)) return targets;
    if (!hx_gguf_get_str(g, "general.architecture", &arch)) {
        snprintf(key, sizeof key, "%s.expert_count", arch);
        if (hx_gguf_get_u32(g, key, &n_expert)) n_expert = 0;
    }
    hx_gguf_close(g);
    if (!n_expert) return targets;
    if (moved) *moved = 1;
    return (targets & ~ffn) | HX_LORA_Q | HX_LORA_K | HX_LORA_V | HX_LORA_O;
}

/* Whether layer i of n_layer is followed by a copy when `grow` layers are
 * added: the copies spread evenly over the depth. */
static int has_copy(int i, int n_layer, int grow)
{
    return (long)(i + 1) * grow / n_layer > (long)i * grow / n_layer;
}

/* The base layer layer l of the grown model comes from; *copy: whether it
 * is an added copy. */
static int grown_source(int l, int n_layer, int grow, int *copy)
{
    int pos = 0;
    for (int i = 0; i < n_layer; i++) {
        *copy = 0;
        if (pos++ == l) return i;
        *copy = 1;
        if (has_copy(i, n_layer, grow) && pos++ == l) return i;
    }
    HX_CHECK(0);
}

/* The base's tensor of trainer tensor name (a grown model's layers renamed
 * to their source); *zero: an added copy's attention output or FFN down
 * projection, which starts at zero so that the layer adds nothing. */
static void source_name(const char *name, int n_layer, int grow, char *src, size_t cap,
                        int *zero)
{
    int l, at = 0, copy = 0;
    *zero = 0;
    if (sscanf(name, "blk.%d.%n", &l, &at) != 1 || !at) {
        snprintf(src, cap, "%s", name);
        return;
    }
    snprintf(src, cap, "blk.%d.%s", grown_source(l, n_layer, grow, &copy), name + at);
    *zero = copy && (!strcmp(name + at, "attn_output.weight") ||
                     !strcmp(name + at, "ffn_down.weight"));
}

/* Full mode from a file of n_layer layers (grow more in the trainer):
 * every weight dequantized into params. */
static void copy_weights(hx_trainer *tr, const hx_model *m, int n_layer, int grow)
{
    const hx_gguf *g = hx_model_gguf(m);
    for (int i = 0; i < tr->n_tensors; i++) {
        const tr_tensor *t = &tr->tensors[i];
        char src[96];
        int zero;
        source_name(t->name, n_layer, grow, src, sizeof src, &zero);
        const hx_gguf_tensor *gt = hx_gguf_find_tensor(g, src);
        float *p = tr->params + t->off;
        if (!gt || zero) { /* q/k norm absent (llama): identity gains; an
                            * added copy's output projection: zero */
            for (size_t k = 0; k < t->n; k++) p[k] = zero ? 0.0f : 1.0f;
            continue;
        }
        const size_t rb = hx_type_row_bytes(gt->type, t->ne[0]);
        for (int64_t r = 0; r < t->ne[1]; r++)
            hx_dequantize_row(gt->type, (const char *)gt->data + (size_t)r * rb,
                              p + (size_t)r * t->ne[0], t->ne[0]);
    }
}

static void init_lora(hx_trainer *tr, const hx_lora_params *lp)
{
    uint64_t s = lp->seed;
    for (int i = 0; i < tr->n_tensors; i++) {
        const tr_tensor *t = &tr->tensors[i];
        const int is_b = strstr(t->name, "lora_b") != NULL;
        const double sd = is_b ? lp->init_b : 1.0 / sqrt((double)lp->rank);
        for (size_t k = 0; k < t->n; k++)
            tr->params[t->off + k] = (float)(sd * hx_tr_rng_normal(&s));
    }
}

/* A trainer over the base at path: LoRA (lora), else full training of its
 * weights with grow layers added. */
static int new_from_gguf(const char *path, const hx_lora_params *lora, int grow,
                         int n_threads, hx_trainer **out, hx_err *err)
{
    *out = NULL;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_model *m = NULL;
    int rc = hx_model_load(path, &mp, &m, err);
    if (rc) return rc;
    if ((rc = check_base(m, lora, err))) {
        hx_model_free(m);
        return rc;
    }
    const int n_layer = hx_model_hparams(m)->n_layer;
    hx_lora_params lp;
    if (lora && lora->first_layer == HX_LORA_LATER_HALF) {
        lp = *lora;
        lp.first_layer = n_layer / 2;
        lora = &lp;
    }
    if (lora && (lora->rank < 1 || !(lora->targets & HX_LORA_ALL) || lora->first_layer < 0 ||
                 lora->first_layer >= n_layer)) {
        hx_model_free(m);
        return hx_err_set(err, HX_ERR_INVALID, "train: LoRA rank %d, targets 0x%x and first "
                          "layer %d (of %d)", lora->rank, lora->targets, lora->first_layer,
                          n_layer);
    }
    if (grow < 0 || grow > n_layer) {
        hx_model_free(m);
        return hx_err_set(err, HX_ERR_INVALID, "train: %d added layers: from 0 to the base's "
                          "%d", grow, n_layer);
    }
    hx_trainer *tr = hx_calloc(1, sizeof *tr);
    if (!tr) {
        hx_model_free(m);
        return hx_err_set(err, HX_ERR_NOMEM, "train: out of memory");
    }
    tr->hp = *hx_model_hparams(m);
    tr->hp.n_layer += grow;
    rc = setup_common(tr, n_threads);
    if (lora) {
        tr->lora = 1;
        tr->base = m;
        tr->rank = lora->rank;
        if (!rc) rc = layout_lora(tr, lora);
        if (!rc) rc = alloc_state(tr);
        if (!rc) {
            wire_lora(tr, lora);
            init_lora(tr, lora);
        }
        return finish(tr, rc, out, err);
    }
    if (!rc) rc = layout_full(tr, !tr->hp.tied_output);
    if (!rc) rc = alloc_state(tr);
    if (!rc) {
        wire_full(tr);
        copy_weights(tr, m, n_layer, grow);
    }
    hx_model_free(m);
    return finish(tr, rc, out, err);
}

int hx_trainer_new_gguf(const char *path, const hx_lora_params *lora,
                        int n_threads, hx_trainer **out, hx_err *err)
{
    return new_from_gguf(path, lora, 0, n_threads, out, err);
}

int hx_trainer_new_grown(const char *path, int grow, int n_threads,
                         hx_trainer **out, hx_err *err)
{
    return new_from_gguf(path, NULL, grow, n_threads, out, err);
}

void hx_trainer_free(hx_trainer *tr)
{
    if (!tr) return;
    hx_tr_mm_release();
    hx_threadpool_free(tr->tp);
    hx_wc_free(tr->wc);
    hx_model_free(tr->base);
    free(tr->params);
    free(tr->grads);
    free(tr->m);
    free(tr->v);
    free(tr->tensors);
    free(tr->layers);
    free(tr->acts);
    free(tr->rope_cs);
    free(tr->mem);
    free(tr->scratch);
    free(tr->start);
    free(tr->losses);
    hx_tr_keep_free(tr);
    free(tr);
}

const hx_hparams *hx_trainer_hparams(const hx_trainer *tr) { return &tr->hp; }
int hx_trainer_is_lora(const hx_trainer *tr) { return tr->lora; }
size_t hx_trainer_n_params(const hx_trainer *tr) { return tr->n_params; }
float *hx_trainer_params(hx_trainer *tr) { return tr->params; }
float *hx_trainer_grads(hx_trainer *tr) { return tr->grads; }
int hx_trainer_n_tensors(const hx_trainer *tr) { return tr->n_tensors; }

const char *hx_trainer_tensor(const hx_trainer *tr, int i, size_t *off,
                              size_t *n)
{
    if (i < 0 || i >= tr->n_tensors) return NULL;
    if (off) *off = tr->tensors[i].off;
    if (n) *n = tr->tensors[i].n;
    return tr->tensors[i].name;
}

void hx_trainer_zero_grad(hx_trainer *tr)
{
    memset(tr->grads, 0, tr->n_params * sizeof(float));
}

int hx_trainer_forward(hx_trainer *tr, const hx_batch *b, float *logits,
                       double *loss_sum, int *n_count, hx_err *err)
{
    return hx_tr_forward(tr, b, logits, loss_sum, n_count, 0, 1.0, err);
}

int hx_trainer_grad(hx_trainer *tr, const hx_batch *b, double norm,
                    double *loss_sum, hx_err *err)
{
    if (!(norm > 0)) return hx_err_set(err, HX_ERR_INVALID, "train: norm %g", norm);
    return hx_tr_forward(tr, b, NULL, loss_sum, NULL, 1, norm, err);
}
