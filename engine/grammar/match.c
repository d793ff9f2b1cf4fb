/* match.c: the matcher's state machine: hash-consed stacks of regex
 * continuations, sets of them ("configs") and their lazily built steps. */
#include <stdlib.h>
#include <string.h>

#include "engine/grammar/gint.h"

#define MAX_CALL_DEPTH 48

static uint32_t hmix(uint32_t a, uint32_t b)
{
    uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u + (a << 6) + (a >> 2));
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return h ? h : 1;
}

static int rehash(uint32_t **tab, uint32_t *cap, uint32_t n, uint32_t (*hash_of)(hx_matcher *, uint32_t), hx_matcher *m)
{
    uint32_t nc = *cap ? *cap * 2 : 1024;
    uint32_t *t = hx_calloc(nc, 4);
    if (!t) return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = hash_of(m, i) & (nc - 1);
        while (t[j]) j = (j + 1) & (nc - 1);
        t[j] = i + 1;
    }
    free(*tab);
    *tab = t;
    *cap = nc;
    return 0;
}

static uint32_t stk_hash_of(hx_matcher *m, uint32_t i) { return m->stk[i].hash; }
static uint32_t cfg_hash_of(hx_matcher *m, uint32_t i) { return m->cfg[i].hash; }

/* Interned stack (rx on top of parent); -1 on OOM. */
static int32_t stack_of(hx_matcher *m, uint32_t rx, int32_t parent)
{
    if ((m->n_stk + 1) * 2 > m->stk_hcap &&
        rehash(&m->stk_h, &m->stk_hcap, m->n_stk, stk_hash_of, m))
        return -1;
    uint32_t h = hmix(rx, (uint32_t)parent);
    uint32_t j = h & (m->stk_hcap - 1);
    while (m->stk_h[j]) {
        gstack *s = &m->stk[m->stk_h[j] - 1];
        if (s->hash == h && s->rx == rx && s->parent == parent) return (int32_t)m->stk_h[j] - 1;
        j = (j + 1) & (m->stk_hcap - 1);
    }
    if (gint_grow((void **)&m->stk, &m->cap_stk, m->n_stk + 1, sizeof(gstack))) return -1;
    m->stk[m->n_stk] = (gstack){rx, parent, h};
    m->stk_h[j] = ++m->n_stk;
    return (int32_t)m->n_stk - 1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Interned config from the stacks in v (sorted and deduped here). */
static uint32_t config_of(hx_matcher *m, uint32_t *v, uint32_t n)
{
    if (n > 1) {
        qsort(v, n, 4, cmp_u32);
        uint32_t w = 1;
        for (uint32_t i = 1; i < n; i++)
            if (v[i] != v[w - 1]) v[w++] = v[i];
        n = w;
    }
    if (n == 0) return 0;
    if ((m->n_cfg + 1) * 2 > m->cfg_hcap &&
        rehash(&m->cfg_h, &m->cfg_hcap, m->n_cfg, cfg_hash_of, m))
        return 0;
    uint32_t h = 0x1234567;
    for (uint32_t i = 0; i < n; i++) h = hmix(h, v[i]);
    uint32_t j = h & (m->cfg_hcap - 1);
    while (m->cfg_h[j]) {
        gcfg *c = &m->cfg[m->cfg_h[j] - 1];
        if (c->hash == h && c->n == n && !memcmp(m->pool + c->off, v, n * 4))
            return m->cfg_h[j] - 1;
        j = (j + 1) & (m->cfg_hcap - 1);
    }
    if (gint_grow((void **)&m->cfg, &m->cap_cfg, m->n_cfg + 1, sizeof(gcfg)) ||
        gint_grow((void **)&m->pool, &m->cap_pool, m->n_pool + n, 4))
        return 0;
    memcpy(m->pool + m->n_pool, v, n * 4);
    m->cfg[m->n_cfg] = (gcfg){m->n_pool, n, h, -1, -1};
    m->n_pool += n;
    m->cfg_h[j] = ++m->n_cfg;
    return m->n_cfg - 1;
}

int hx_gm_init(hx_matcher *m)
{
    /* config 0: the empty set (dead) */
    if (gint_grow((void **)&m->cfg, &m->cap_cfg, 1, sizeof(gcfg))) return HX_ERR_NOMEM;
    m->cfg[0] = (gcfg){0, 0, 0, -1, 0};
    m->n_cfg = 1;
    if (rehash(&m->cfg_h, &m->cfg_hcap, m->n_cfg, cfg_hash_of, m)) return HX_ERR_NOMEM;
    return HX_OK;
}

void hx_gm_free(hx_matcher *m)
{
    free(m->stk);
    free(m->stk_h);
    free(m->cfg);
    free(m->cfg_h);
    free(m->pool);
    free(m->tabs);
    free(m->tmp);
}

static int tmp_push(hx_matcher *m, uint32_t s)
{
    if (gint_grow((void **)&m->tmp, &m->cap_tmp, m->n_tmp + 1, 4)) return -1;
    m->tmp[m->n_tmp++] = s;
    return 0;
}

/* Advances stack s by byte c, appending the resulting stacks to m->tmp. */
static int advance(hx_matcher *m, int32_t s, int c, int depth)
{
    hx_rx *rx = m->rx;
    if (depth > MAX_CALL_DEPTH) return 0;
    uint32_t r = m->stk[s].rx;
    int32_t parent = m->stk[s].parent;
    uint32_t d = hx_rx_step(rx, r, c), nc;
    if (d != RX_NONE) {
        int32_t t = stack_of(m, d, parent);
        if (t < 0 || tmp_push(m, (uint32_t)t)) return -1;
    }
    const uint32_t *calls = hx_rx_first_calls(rx, r, &nc);
    size_t off = calls ? (size_t)(calls - rx->calls) : 0;
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t rule = rx->calls[off + 2 * i], cont = rx->calls[off + 2 * i + 1];
        int32_t ret = stack_of(m, cont, parent);
        if (ret < 0) return -1;
        int32_t in = stack_of(m, rx->rules[rule], ret);
        if (in < 0 || advance(m, in, c, depth + 1)) return -1;
    }
    if (rx->nodes[r].nullable && parent >= 0) return advance(m, parent, c, depth + 1);
    return 0;
}

uint32_t hx_gm_step(hx_matcher *m, uint32_t cfg, int c)
{
    if (cfg == 0) return 0;
    int32_t t = m->cfg[cfg].tab;
    if (t >= 0 && m->tabs[(size_t)t * 256 + c] >= 0) return (uint32_t)m->tabs[(size_t)t * 256 + c];
    if (t < 0) {
        if (gint_grow((void **)&m->tabs, &m->cap_tabs, (m->n_tabs + 1) * 256, 4)) return 0;
        t = (int32_t)m->n_tabs++;
        memset(m->tabs + (size_t)t * 256, 0xff, 1024);
        m->cfg[cfg].tab = t;
    }
    m->n_tmp = 0;
    for (uint32_t i = 0; i < m->cfg[cfg].n; i++)
        if (advance(m, (int32_t)m->pool[m->cfg[cfg].off + i], c, 0)) { m->n_tmp = 0; break; }
    uint32_t r = config_of(m, m->tmp, m->n_tmp);
    if (m->rx->failed) r = 0;
    m->tabs[(size_t)t * 256 + c] = (int32_t)r;
    return r;
}

static int stack_can_end(hx_matcher *m, int32_t s, int depth)
{
    while (s >= 0 && depth++ < 10000) {
        if (!m->rx->nodes[m->stk[s].rx].nullable) return 0;
        s = m->stk[s].parent;
    }
    return s < 0;
}

int hx_gm_can_end(hx_matcher *m, uint32_t cfg)
{
    gcfg *c = &m->cfg[cfg];
    if (c->end < 0) {
        c->end = 0;
        for (uint32_t i = 0; i < c->n && !c->end; i++)
            c->end = (int8_t)stack_can_end(m, (int32_t)m->pool[c->off + i], 0);
    }
    return c->end;
}

uint32_t hx_gm_config_of(hx_matcher *m, uint32_t rx)
{
    int32_t s = stack_of(m, rx, -1);
    if (s < 0) return 0;
    uint32_t v = (uint32_t)s;
    return config_of(m, &v, 1);
}
