/* kv.c: the paged KV cache: fixed-size pages allocated as the context
 * fills, a cap in bytes (beyond it HX_ERR_FULL, or a spill: kvspill.c),
 * F16 / F32 / 8-bit (Q8_0) rows. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ctx_int.h"

/* Bytes of one head row of d values in the cache type; 0 if the type
 * cannot hold d (Q8 needs whole blocks of 32). */
static size_t row_bytes(int kv_type, int d)
{
    if (kv_type == HX_KV_F32) return (size_t)d * sizeof(float);
    if (kv_type == HX_KV_F16) return (size_t)d * sizeof(uint16_t);
    return d % HX_QK ? 0 : (size_t)(d / HX_QK) * sizeof(hx_block_q8_0);
}

/* Bytes of one page (K and V, all layers) or 0 on overflow. */
static size_t page_bytes(const hx_hparams *hp, size_t row)
{
    size_t n;
    if (hx_mul_size((size_t)hp->n_layer * (size_t)hp->n_head_kv, row, &n) ||
        hx_mul_size(n, 2 * (size_t)HX_KV_PAGE, &n))
        return 0;
    return n;
}

static size_t phys_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : SIZE_MAX;
}

static int type_of(const hx_ctx_params *p)
{
    return p->kv_f32 ? HX_KV_F32 : p->kv_q8 ? HX_KV_Q8 : HX_KV_F16;
}

int hx_kv_init(hx_ctx *c, const hx_ctx_params *p, hx_err *err)
{
    const hx_hparams *hp = &c->m->hp;
    c->kv_type = type_of(p);
    c->kv_f32 = c->kv_type == HX_KV_F32;
    if (p->kv_f32 && p->kv_q8)
        return hx_err_set(err, HX_ERR_INVALID, "kv_f32 and kv_q8 exclude each other");
    c->kv_row = row_bytes(c->kv_type, hp->head_dim);
    if (!c->kv_row)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "an 8-bit KV cache needs a head "
                          "size that is a multiple of %d (this model: %d)", HX_QK,
                          hp->head_dim);
    c->page_bytes = page_bytes(hp, c->kv_row);
    const int all = (c->n_ctx + HX_KV_PAGE - 1) / HX_KV_PAGE;
    size_t cap = p->kv_max_bytes ? p->kv_max_bytes : SIZE_MAX;
    if (!c->page_bytes || (!p->kv_max_bytes && c->page_bytes > phys_memory() / (size_t)all))
        return hx_err_set(err, HX_ERR_NOMEM, "cannot allocate a context of %d positions: "
                          "its KV cache exceeds the machine's memory", c->n_ctx);
    size_t fit = cap / c->page_bytes;
    c->max_pages = fit < (size_t)all ? (int)fit : all;
    if (c->max_pages < 1)
        return hx_err_set(err, HX_ERR_RANGE, "a KV cache cap of %zu bytes holds no page "
                          "(%d positions need %zu bytes)", cap, HX_KV_PAGE, c->page_bytes);
    c->pages = hx_calloc((size_t)all, sizeof *c->pages);
    if (!c->pages) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    return p->kv_spill && c->max_pages < all ? hx_kv_spill_new(c, p, err) : HX_OK;
}

int hx_kv_reserve(hx_ctx *c, int n_pos)
{
    const int need = (n_pos + HX_KV_PAGE - 1) / HX_KV_PAGE;
    if (c->spill) return hx_kv_spill_reserve(c, n_pos);
    if (need > c->max_pages)
        return hx_err_set(&c->err, HX_ERR_FULL, "KV cache full: %d positions need "
                          "%d pages of %zu KiB, the cap allows %d (%d positions)",
                          n_pos, need, c->page_bytes >> 10, c->max_pages,
                          c->max_pages * HX_KV_PAGE);
    for (; c->n_pages < need; c->n_pages++) {
        c->pages[c->n_pages] = hx_huge_alloc(c->page_bytes, 1);
        if (!c->pages[c->n_pages])
            return hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory for a KV page "
                              "of %zu bytes", c->page_bytes);
        c->n_resident++;
    }
    return HX_OK;
}

void hx_kv_free(hx_ctx *c)
{
    hx_kv_spill_free(c);
    for (int i = 0; c->pages && i < c->n_pages; i++) free(c->pages[i]);
    free(c->pages);
    c->pages = NULL;
    c->n_pages = c->n_resident = 0;
}

size_t hx_ctx_kv_bytes(const hx_ctx *c)
{
    return (size_t)c->n_resident * c->page_bytes;
}

/* Size geometry for hx_ctx_memory: bytes per position and per page. */
void hx_kv_geometry(const hx_hparams *hp, const hx_ctx_params *p,
                    size_t *per_token, size_t *page)
{
    size_t row = row_bytes(type_of(p), hp->head_dim);
    *page = page_bytes(hp, row);
    *per_token = *page / HX_KV_PAGE;
}

static void store_row(const hx_ctx *c, char *dst, const float *x, int d)
{
    if (c->kv_type == HX_KV_F32) memcpy(dst, x, (size_t)d * sizeof(float));
    else if (c->kv_type == HX_KV_F16) c->ao->to_f16((uint16_t *)dst, x, d);
    else hx_quantize_row(HX_TYPE_Q8_0, x, dst, d, NULL);
}

void hx_kv_store(hx_ctx *c, int l, int h, int pos, const float *k,
                 const float *v)
{
    const int d = c->m->hp.head_dim;
    store_row(c, hx_kv_row(c, 0, l, h, pos), k, d);
    store_row(c, hx_kv_row(c, 1, l, h, pos), v, d);
}

const float *hx_kv_rows_f32(const hx_ctx *c, const char *r, int nk, float *buf)
{
    const int d = c->m->hp.head_dim;
    assert(r && nk > 0 && nk <= HX_KV_PAGE);
    if (c->kv_type == HX_KV_F32) return (const float *)r;
    if (c->kv_type == HX_KV_F16) c->ao->from_f16(buf, (const uint16_t *)r, nk * d);
    else hx_dequantize_row(HX_TYPE_Q8_0, r, buf, (int64_t)nk * d);
    return buf;
}
