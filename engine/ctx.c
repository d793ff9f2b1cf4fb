/* ctx.c: inference contexts: KV cache and scratch allocation, the
 * decode entry point that splits calls into passes, logits. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ctx_int.h"

hx_ctx_params hx_ctx_default_params(void)
{
    hx_ctx_params p = {0, 512, 0, 0, NULL, NULL};
    return p;
}

static int alloc_kv(hx_ctx *c)
{
    const hx_hparams *hp = &c->m->hp;
    size_t n = (size_t)hp->n_layer * (size_t)hp->n_head_kv, bytes;
    size_t el = c->kv_f32 ? sizeof(float) : sizeof(uint16_t);
    if (hx_mul_size(n, (size_t)c->n_ctx, &n) || hx_mul_size(n, (size_t)hp->head_dim, &n) ||
        hx_mul_size(n, el, &bytes))
        return HX_ERR_NOMEM;
    c->kc = hx_aligned_alloc(64, bytes);
    c->vc = hx_aligned_alloc(64, bytes);
    return c->kc && c->vc ? HX_OK : HX_ERR_NOMEM;
}

static int alloc_scratch(hx_ctx *c)
{
    const hx_hparams *hp = &c->m->hp;
    const size_t B = (size_t)c->n_batch, e = (size_t)hp->n_embd;
    const size_t qd = (size_t)hp->n_head * hp->head_dim;
    const size_t kvd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t nu = hp->n_expert ? (size_t)hp->n_expert_used : 1;
    const size_t ff = hp->n_expert ? (size_t)hp->n_ff_exp : (size_t)hp->n_ff;
    c->x = hx_malloc_array(B * e, sizeof(float));
    c->xb = hx_malloc_array(B * e, sizeof(float));
    c->q = hx_malloc_array(B * qd, sizeof(float));
    c->k = hx_malloc_array(B * kvd, sizeof(float));
    c->v = hx_malloc_array(B * kvd, sizeof(float));
    c->att = hx_malloc_array(B * qd, sizeof(float));
    c->hb = hx_malloc_array(B * nu * ff, sizeof(float));
    c->hb2 = hx_malloc_array(B * nu * ff, sizeof(float));
    c->scores = hx_malloc_array((size_t)c->n_threads * hx_attn_scratch(c),
                                sizeof(float));
    size_t kmax = e > ff ? e : ff;
    if ((size_t)hp->n_head * hp->head_dim > kmax) kmax = (size_t)hp->n_head * hp->head_dim;
    c->act_row = hx_act_row_bytes(HX_TYPE_F32, (int64_t)kmax) + 64;
    c->act = hx_aligned_alloc(64, B * nu * c->act_row);
    c->jobs = hx_malloc_array(2 * (size_t)hp->n_expert + 3, sizeof(hx_mm_job));
    c->rope_cs = hx_malloc_array(B * (size_t)hp->head_dim, sizeof(float));
    if (!c->x || !c->xb || !c->q || !c->k || !c->v || !c->att || !c->hb ||
        !c->hb2 || !c->scores || !c->act || !c->jobs ||
        !c->rope_cs)
        return HX_ERR_NOMEM;
    if (!hp->n_expert) return HX_OK;
    c->eo = hx_malloc_array(B * nu * e, sizeof(float));
    c->rl = hx_malloc_array(B * (size_t)hp->n_expert, sizeof(float));
    c->sel = hx_malloc_array(B * nu, sizeof(int32_t));
    c->selw = hx_malloc_array(B * nu, sizeof(float));
    c->ptok = hx_malloc_array(B * nu, sizeof(int32_t));
    c->pslot = hx_malloc_array(B * nu, sizeof(int32_t));
    c->moe_idx = hx_malloc_array(3 * (size_t)hp->n_expert + B * nu, sizeof(int));
    return c->eo && c->rl && c->sel && c->selw && c->ptok && c->pslot &&
                   c->moe_idx ? HX_OK : HX_ERR_NOMEM;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int hx_ctx_new(hx_model *m, const hx_ctx_params *p, hx_ctx **out, hx_err *err)
{
    hx_ctx_params dp = hx_ctx_default_params();
    if (!p) p = &dp;
    *out = NULL;
    if (!m) return hx_err_set(err, HX_ERR_INVALID, "no model");
    if (p->n_ctx < 0 || p->n_batch < 0 || p->n_threads < 0)
        return hx_err_set(err, HX_ERR_INVALID, "negative context parameter");
    hx_ctx *c = hx_calloc(1, sizeof *c);
    if (!c) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    c->m = m;
    c->n_ctx = p->n_ctx ? p->n_ctx
                        : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
    c->n_batch = p->n_batch ? p->n_batch : 512;
    if (c->n_batch > c->n_ctx) c->n_batch = c->n_ctx; /* a pass never holds more */
    c->n_threads = p->n_threads ? p->n_threads : default_threads();
    c->kv_f32 = p->kv_f32 != 0;
    c->act_hook = p->act_hook;
    c->act_hook_user = p->act_hook_user;
    c->ao = hx_attn_ops_get();
    c->tp = hx_threadpool_new(c->n_threads);
    int rc = c->tp ? alloc_kv(c) : HX_ERR_NOMEM;
    if (!rc) rc = alloc_scratch(c);
    if (rc) {
        int n_ctx = c->n_ctx;
        hx_ctx_free(c);
        return hx_err_set(err, rc, "cannot allocate a context of %d positions",
                          n_ctx);
    }
    *out = c;
    return HX_OK;
}

void hx_ctx_free(hx_ctx *c)
{
    if (!c) return;
    hx_threadpool_free(c->tp);
    hx_lora_set_free(c->lora);
    void *bufs[] = {c->kc, c->vc, c->x, c->xb, c->q, c->k, c->v, c->att,
                    c->hb, c->hb2, c->eo, c->rl, c->sel, c->selw, c->ptok,
                    c->pslot, c->moe_idx, c->act, c->jobs, c->scores,
                    c->rope_cs, c->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c);
}

int hx_ctx_n_past(const hx_ctx *c) { return c->n_past; }
int hx_ctx_n_ctx(const hx_ctx *c) { return c->n_ctx; }
const char *hx_ctx_errmsg(const hx_ctx *c) { return c->err.msg; }
const hx_model *hx_ctx_model(const hx_ctx *c) { return c->m; }

void hx_ctx_truncate(hx_ctx *c, int n_keep)
{
    if (n_keep < 0) n_keep = 0;
    if (n_keep < c->n_past) c->n_past = n_keep;
}

const float *hx_ctx_logits(const hx_ctx *c, int i)
{
    if (c->n_out == 0) return NULL;
    int row = i < 0 ? c->n_out - 1 : i - c->out_first;
    if (row < 0 || row >= c->n_out) return NULL;
    return c->logits + (size_t)row * c->m->hp.n_vocab;
}

static int check_decode(hx_ctx *c, const int32_t *tokens, int n)
{
    if (n <= 0 || !tokens)
        return hx_err_set(&c->err, HX_ERR_INVALID, "no tokens to decode");
    if (n > c->n_ctx - c->n_past)
        return hx_err_set(&c->err, HX_ERR_FULL, "context full: %d cached + %d "
                          "new tokens exceed n_ctx %d", c->n_past, n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->m->hp.n_vocab)
            return hx_err_set(&c->err, HX_ERR_RANGE, "token %d at %d is outside "
                              "the vocabulary (%d)", tokens[i], i,
                              c->m->hp.n_vocab);
    return HX_OK;
}

static int reserve_logits(hx_ctx *c, size_t rows)
{
    size_t need = rows * (size_t)c->m->hp.n_vocab;
    if (need <= c->logits_cap) return HX_OK;
    float *p = hx_malloc_array(need, sizeof(float));
    if (!p) return hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory for logits");
    free(c->logits);
    c->logits = p;
    c->logits_cap = need;
    return HX_OK;
}

int hx_decode(hx_ctx *c, const int32_t *tokens, int n, int logits_all)
{
    int rc = check_decode(c, tokens, n);
    if (!rc) rc = reserve_logits(c, logits_all ? (size_t)n : 1);
    if (rc) return rc;
    c->n_out = logits_all ? n : 1;
    c->out_first = logits_all ? 0 : n - 1;
    for (int off = 0; off < n; off += c->n_batch) {
        int B = n - off < c->n_batch ? n - off : c->n_batch;
        int from = logits_all ? 0 : (off + B == n ? B - 1 : B);
        float *lg = c->logits + (logits_all ? (size_t)off * c->m->hp.n_vocab : 0);
        hx_forward_pass(c, tokens + off, B, from, lg);
    }
    return HX_OK;
}
