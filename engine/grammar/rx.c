/* rx.c: hash-consed regular expressions over bytes with Brzozowski
 * derivatives, intersection, complement, counted repetition and call leaves. */
#include <stdlib.h>
#include <string.h>

#include "engine/grammar/gint.h"

static uint32_t mix(uint32_t h, uint32_t v)
{
    h ^= v + 0x9e3779b9u + (h << 6) + (h >> 2);
    return h;
}

static uint32_t node_hash(uint8_t kind, uint32_t a, uint32_t b, uint32_t mn,
                          uint32_t mx, const uint32_t *k, uint32_t nk)
{
    uint32_t h = mix(kind, a);
    if (k) {
        for (uint32_t i = 0; i < nk; i++) h = mix(h, k[i]);
        h = mix(h, nk);
    } else {
        h = mix(mix(h, b), mix(mn, mx));
    }
    h ^= h >> 16; /* murmur3 finalizer: the table uses the low bits */
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h ? h : 1;
}

static int node_eq(const hx_rx *rx, const rx_node *n, uint8_t kind,
                   uint32_t a, uint32_t b, uint32_t mn, uint32_t mx,
                   const uint32_t *k, uint32_t nk)
{
    if (n->kind != kind) return 0;
    if (k) return n->b == nk && !memcmp(rx->kids + n->a, k, nk * 4);
    return n->a == a && n->b == b && n->min == mn && n->max == mx;
}

static int rehash_nodes(hx_rx *rx)
{
    uint32_t nc = rx->hcap ? rx->hcap * 2 : 1024;
    uint32_t *t = hx_calloc(nc, 4);
    if (!t) return -1;
    for (uint32_t i = 0; i < rx->n_nodes; i++) {
        uint32_t j = rx->nodes[i].hash & (nc - 1);
        while (t[j]) j = (j + 1) & (nc - 1);
        t[j] = i + 1;
    }
    free(rx->htab);
    rx->htab = t;
    rx->hcap = nc;
    return 0;
}

static void node_props(hx_rx *rx, rx_node *n, const uint32_t *k, uint32_t nk)
{
    rx_node *N = rx->nodes;
    switch (n->kind) {
    case RX_EPS: n->nullable = 1; break;
    case RX_CALL: n->has_call = 1; break;
    case RX_CAT:
        n->nullable = N[n->a].nullable && N[n->b].nullable;
        n->has_call = N[n->a].has_call | N[n->b].has_call;
        break;
    case RX_OR:
    case RX_AND:
        n->nullable = n->kind == RX_AND;
        for (uint32_t i = 0; i < nk; i++) {
            if (n->kind == RX_OR) n->nullable |= N[k[i]].nullable;
            else n->nullable &= N[k[i]].nullable;
            n->has_call |= N[k[i]].has_call;
        }
        break;
    case RX_NOT: n->nullable = !N[n->a].nullable; break;
    case RX_REP:
        n->nullable = n->min == 0 || N[n->a].nullable;
        n->has_call = N[n->a].has_call;
        break;
    default: break;
    }
}

static uint32_t intern(hx_rx *rx, uint8_t kind, uint32_t a, uint32_t b,
                       uint32_t mn, uint32_t mx, const uint32_t *k,
                       uint32_t nk)
{
    if (rx->failed) return RX_NONE;
    if ((rx->n_nodes + 1) * 2 > rx->hcap && rehash_nodes(rx)) goto oom;
    uint32_t h = node_hash(kind, a, b, mn, mx, k, nk);
    uint32_t j = h & (rx->hcap - 1);
    while (rx->htab[j]) {
        rx_node *n = &rx->nodes[rx->htab[j] - 1];
        if (n->hash == h && node_eq(rx, n, kind, a, b, mn, mx, k, nk))
            return rx->htab[j] - 1;
        j = (j + 1) & (rx->hcap - 1);
    }
    if (rx->n_nodes >= rx->max_nodes) goto oom;
    if (gint_grow((void **)&rx->nodes, &rx->cap_nodes, rx->n_nodes + 1,
                  sizeof(rx_node)))
        goto oom;
    if (k) {
        if (gint_grow((void **)&rx->kids, &rx->cap_kids, rx->n_kids + nk, 4))
            goto oom;
        memcpy(rx->kids + rx->n_kids, k, nk * 4);
        a = rx->n_kids;
        b = nk;
        rx->n_kids += nk;
    }
    uint32_t id = rx->n_nodes++;
    rx_node *n = &rx->nodes[id];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->a = a;
    n->b = b;
    n->min = mn;
    n->max = mx;
    n->hash = h;
    n->tab = -1;
    node_props(rx, n, k, nk);
    rx->htab[j] = id + 1;
    return id;
oom:
    rx->failed = 1;
    return RX_NONE;
}

int hx_rx_init(hx_rx *rx)
{
    memset(rx, 0, sizeof *rx);
    rx->max_nodes = 2000000;
    intern(rx, RX_EMPTY, 0, 0, 0, 0, NULL, 0);
    intern(rx, RX_EPS, 0, 0, 0, 0, NULL, 0);
    return rx->failed ? HX_ERR_NOMEM : HX_OK;
}

void hx_rx_free(hx_rx *rx)
{
    free(rx->nodes);
    free(rx->kids);
    free(rx->cls);
    free(rx->htab);
    free(rx->ctab);
    free(rx->dkey);
    free(rx->dval);
    free(rx->calls);
    free(rx->rules);
    free(rx->tabs);
    free(rx->tab_owner);
    memset(rx, 0, sizeof *rx);
}

/* ---- byte classes ---- */
static uint32_t cls_hash(const uint32_t *b)
{
    uint32_t h = 7;
    for (int i = 0; i < 8; i++) h = mix(h, b[i]);
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    return h ? h : 1;
}

static int rehash_cls(hx_rx *rx)
{
    uint32_t nc = rx->ccap ? rx->ccap * 2 : 256;
    uint32_t *t = hx_calloc(nc, 4);
    if (!t) return -1;
    for (uint32_t i = 0; i < rx->n_cls; i++) {
        uint32_t j = cls_hash(rx->cls + 8 * i) & (nc - 1);
        while (t[j]) j = (j + 1) & (nc - 1);
        t[j] = i + 1;
    }
    free(rx->ctab);
    rx->ctab = t;
    rx->ccap = nc;
    return 0;
}

uint32_t hx_rx_class(hx_rx *rx, const uint32_t bits[8])
{
    int any = 0;
    for (int i = 0; i < 8; i++) any |= bits[i] != 0;
    if (!any || rx->failed) return RX_NONE;
    if ((rx->n_cls + 1) * 2 > rx->ccap && rehash_cls(rx)) goto oom;
    uint32_t h = cls_hash(bits), j = h & (rx->ccap - 1);
    while (rx->ctab[j]) {
        if (!memcmp(rx->cls + 8 * (rx->ctab[j] - 1), bits, 32))
            return intern(rx, RX_CLASS, rx->ctab[j] - 1, 0, 0, 0, NULL, 0);
        j = (j + 1) & (rx->ccap - 1);
    }
    if (gint_grow((void **)&rx->cls, &rx->cap_cls, (rx->n_cls + 1) * 8, 4))
        goto oom;
    memcpy(rx->cls + 8 * rx->n_cls, bits, 32);
    rx->ctab[j] = ++rx->n_cls;
    return intern(rx, RX_CLASS, rx->n_cls - 1, 0, 0, 0, NULL, 0);
oom:
    rx->failed = 1;
    return RX_NONE;
}

uint32_t hx_rx_range(hx_rx *rx, int lo, int hi)
{
    uint32_t bits[8] = {0};
    for (int c = lo; c <= hi; c++) bits[c >> 5] |= 1u << (c & 31);
    return hx_rx_class(rx, bits);
}

uint32_t hx_rx_byte(hx_rx *rx, int b)
{
    return hx_rx_range(rx, b & 255, b & 255);
}

uint32_t hx_rx_lit(hx_rx *rx, const char *s, size_t n)
{
    uint32_t r = RX_NIL;
    for (size_t i = n; i-- > 0;) r = hx_rx_cat(rx, hx_rx_byte(rx, (uint8_t)s[i]), r);
    return r;
}

uint32_t hx_rx_call(hx_rx *rx, uint32_t rule)
{
    return intern(rx, RX_CALL, rule, 0, 0, 0, NULL, 0);
}

/* ---- smart constructors ---- */
uint32_t hx_rx_cat(hx_rx *rx, uint32_t a, uint32_t b)
{
    if (a == RX_NONE || b == RX_NONE) return RX_NONE;
    if (a == RX_NIL) return b;
    if (b == RX_NIL) return a;
    if (rx->nodes[a].kind == RX_CAT) {
        uint32_t x = rx->nodes[a].a, y = rx->nodes[a].b;
        return hx_rx_cat(rx, x, hx_rx_cat(rx, y, b));
    }
    return intern(rx, RX_CAT, a, b, 0, 0, NULL, 0);
}

uint32_t hx_rx_cat3(hx_rx *rx, uint32_t a, uint32_t b, uint32_t c)
{
    return hx_rx_cat(rx, a, hx_rx_cat(rx, b, c));
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Flattens, sorts and dedups children of kind; returns the count. */
#define FLAT_BUF 64
static uint32_t *flatten(hx_rx *rx, uint8_t kind, const uint32_t *v,
                         uint32_t n, uint32_t *out_n, uint32_t *buf)
{
    uint32_t cap = FLAT_BUF, m = 0;
    uint32_t *o = buf;
    for (uint32_t i = 0; i < n; i++) {
        const rx_node *k = &rx->nodes[v[i]];
        uint32_t cnt = k->kind == kind ? k->b : 1;
        if (m + cnt > cap) {
            cap = (m + cnt) * 2;
            uint32_t *q = hx_malloc(cap * 4);
            if (!q) { if (o != buf) free(o); return NULL; }
            memcpy(q, o, m * 4);
            if (o != buf) free(o);
            o = q;
        }
        if (k->kind == kind) {
            memcpy(o + m, rx->kids + k->a, cnt * 4);
            m += cnt;
        } else {
            o[m++] = v[i];
        }
    }
    if (m <= 16) { /* insertion sort: the common small case */
        for (uint32_t i = 1; i < m; i++) {
            uint32_t x = o[i], j = i;
            while (j > 0 && o[j - 1] > x) { o[j] = o[j - 1]; j--; }
            o[j] = x;
        }
    } else {
        qsort(o, m, 4, cmp_u32);
    }
    uint32_t w = 0;
    for (uint32_t i = 0; i < m; i++)
        if (!w || o[w - 1] != o[i]) o[w++] = o[i];
    *out_n = w;
    return o;
}

/* Merges CLASS children of an OR into one class. */
static uint32_t merge_classes(hx_rx *rx, uint32_t *o, uint32_t m)
{
    uint32_t bits[8] = {0}, w = 0, nc = 0;
    for (uint32_t i = 0; i < m; i++) nc += rx->nodes[o[i]].kind == RX_CLASS;
    if (nc < 2) return m;
    for (uint32_t i = 0; i < m; i++) {
        const rx_node *k = &rx->nodes[o[i]];
        if (k->kind == RX_CLASS) {
            for (int j = 0; j < 8; j++) bits[j] |= rx->cls[8 * k->a + j];
        } else {
            o[w++] = o[i];
        }
    }
    o[w++] = hx_rx_class(rx, bits);
    qsort(o, w, 4, cmp_u32);
    return w;
}

uint32_t hx_rx_orv(hx_rx *rx, const uint32_t *v, uint32_t n)
{
    uint32_t m, buf[FLAT_BUF];
    if (rx->failed) return RX_NONE;
    uint32_t *o = flatten(rx, RX_OR, v, n, &m, buf);
    if (!o) { rx->failed = 1; return RX_NONE; }
    uint32_t w = 0, all = 0;
    for (uint32_t i = 0; i < m; i++) {
        const rx_node *k = &rx->nodes[o[i]];
        if (o[i] == RX_NONE) continue;
        if (k->kind == RX_NOT && k->a == RX_NONE) all = o[i];
        o[w++] = o[i];
    }
    w = merge_classes(rx, o, w);
    uint32_t r = all ? all : w == 0 ? RX_NONE : w == 1 ? o[0]
               : intern(rx, RX_OR, 0, 0, 0, 0, o, w);
    if (o != buf) free(o);
    return r;
}

uint32_t hx_rx_or(hx_rx *rx, uint32_t a, uint32_t b)
{
    uint32_t v[2] = {a, b};
    if (a == b) return a;
    if (a == RX_NONE) return b;
    if (b == RX_NONE) return a;
    return hx_rx_orv(rx, v, 2);
}

uint32_t hx_rx_and(hx_rx *rx, uint32_t a, uint32_t b)
{
    uint32_t v[2] = {a, b}, m, buf[FLAT_BUF];
    if (a == b) return a;
    if (a == RX_NONE || b == RX_NONE || rx->failed) return RX_NONE;
    uint32_t *o = flatten(rx, RX_AND, v, 2, &m, buf);
    if (!o) { rx->failed = 1; return RX_NONE; }
    uint32_t w = 0, r;
    int has_eps = 0, all_null = 1;
    for (uint32_t i = 0; i < m; i++) {
        const rx_node *k = &rx->nodes[o[i]];
        if (k->kind == RX_NOT && k->a == RX_NONE) continue; /* universe */
        if (o[i] == RX_NONE) { if (o != buf) free(o); return RX_NONE; }
        if (o[i] == RX_NIL) has_eps = 1;
        all_null &= k->nullable;
        o[w++] = o[i];
    }
    if (has_eps) r = all_null ? RX_NIL : RX_NONE;
    else if (w == 0) r = hx_rx_not(rx, RX_NONE);
    else if (w == 1) r = o[0];
    else r = intern(rx, RX_AND, 0, 0, 0, 0, o, w);
    if (o != buf) free(o);
    return r;
}

uint32_t hx_rx_not(hx_rx *rx, uint32_t a)
{
    if (rx->nodes[a].kind == RX_NOT) return rx->nodes[a].a;
    return intern(rx, RX_NOT, a, 0, 0, 0, NULL, 0);
}

uint32_t hx_rx_rep(hx_rx *rx, uint32_t a, uint32_t mn, uint32_t mx)
{
    if (mx == 0 || a == RX_NIL) return RX_NIL;
    if (a == RX_NONE) return mn == 0 ? RX_NIL : RX_NONE;
    if (mn > mx) return RX_NONE;
    if (mn == 1 && mx == 1) return a;
    return intern(rx, RX_REP, a, 0, mn, mx, NULL, 0);
}

uint32_t hx_rx_opt(hx_rx *rx, uint32_t a)
{
    return hx_rx_or(rx, a, RX_NIL);
}

/* ---- derivatives ---- */
static int dgrow(hx_rx *rx)
{
    uint32_t nc = rx->dcap ? rx->dcap * 2 : 4096;
    uint64_t *k = hx_calloc(nc, 8);
    uint32_t *v = hx_malloc((size_t)nc * 4);
    if (!k || !v) { free(k); free(v); return -1; }
    for (uint32_t i = 0; i < rx->dcap; i++) {
        if (!rx->dkey[i]) continue;
        uint32_t j = (uint32_t)((rx->dkey[i] * 0x9e3779b97f4a7c15ull) >> 40) & (nc - 1);
        while (k[j]) j = (j + 1) & (nc - 1);
        k[j] = rx->dkey[i];
        v[j] = rx->dval[i];
    }
    free(rx->dkey);
    free(rx->dval);
    rx->dkey = k;
    rx->dval = v;
    rx->dcap = nc;
    return 0;
}

static uint32_t deriv_raw(hx_rx *rx, uint32_t r, int c)
{
    const rx_node n = rx->nodes[r];
    switch (n.kind) {
    case RX_CLASS:
        return (rx->cls[8 * n.a + (c >> 5)] >> (c & 31)) & 1 ? RX_NIL : RX_NONE;
    case RX_CAT: {
        uint32_t x = hx_rx_cat(rx, hx_rx_deriv(rx, n.a, c), n.b);
        if (!rx->nodes[n.a].nullable) return x;
        return hx_rx_or(rx, x, hx_rx_deriv(rx, n.b, c));
    }
    case RX_OR:
    case RX_AND: {
        uint32_t acc = n.kind == RX_OR ? RX_NONE : hx_rx_not(rx, RX_NONE);
        for (uint32_t i = 0; i < n.b; i++) {
            uint32_t d = hx_rx_deriv(rx, rx->kids[rx->nodes[r].a + i], c);
            acc = n.kind == RX_OR ? hx_rx_or(rx, acc, d) : hx_rx_and(rx, acc, d);
            if (n.kind == RX_AND && acc == RX_NONE) break;
        }
        return acc;
    }
    case RX_NOT: return hx_rx_not(rx, hx_rx_deriv(rx, n.a, c));
    case RX_REP:
        return hx_rx_cat(rx, hx_rx_deriv(rx, n.a, c),
                         hx_rx_rep(rx, n.a, n.min ? n.min - 1 : 0,
                                   n.max == RX_INF ? RX_INF : n.max - 1));
    default: return RX_NONE;
    }
}

uint32_t hx_rx_deriv(hx_rx *rx, uint32_t r, int c)
{
    uint8_t k = rx->nodes[r].kind;
    if (k <= RX_EPS || k == RX_CALL || rx->failed) return RX_NONE;
    if (k == RX_CLASS) return deriv_raw(rx, r, c);
    if ((rx->dn + 1) * 2 > rx->dcap && dgrow(rx)) { rx->failed = 1; return RX_NONE; }
    uint64_t key = ((uint64_t)r << 8 | (unsigned)c) + 1;
    uint32_t j = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 40) & (rx->dcap - 1);
    while (rx->dkey[j]) {
        if (rx->dkey[j] == key) return rx->dval[j];
        j = (j + 1) & (rx->dcap - 1);
    }
    uint32_t d = deriv_raw(rx, r, c);
    if (rx->failed) return RX_NONE;
    if ((rx->dn + 1) * 2 > rx->dcap) { /* recursion may have grown it */
        if (dgrow(rx)) { rx->failed = 1; return RX_NONE; }
    }
    j = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 40) & (rx->dcap - 1);
    while (rx->dkey[j]) j = (j + 1) & (rx->dcap - 1);
    rx->dkey[j] = key;
    rx->dval[j] = d;
    rx->dn++;
    return d;
}

int32_t hx_rx_tab(hx_rx *rx, uint32_t r)
{
    int32_t t = rx->nodes[r].tab;
    if (t < 0) {
        if (gint_grow((void **)&rx->tabs, &rx->cap_tabs, (rx->n_tabs + 1) * 256, 4) ||
            gint_grow((void **)&rx->tab_owner, &rx->cap_owner, rx->n_tabs + 1, 4)) {
            rx->failed = 1;
            return -1;
        }
        rx->tab_owner[rx->n_tabs] = r;
        t = (int32_t)rx->n_tabs++;
        memset(rx->tabs + (size_t)t * 256, 0xff, 256 * 4);
        rx->nodes[r].tab = t;
    }
    return t;
}

uint32_t hx_rx_step(hx_rx *rx, uint32_t r, int c)
{
    int32_t t = hx_rx_tab(rx, r);
    if (t < 0) return RX_NONE;
    int32_t *e = &rx->tabs[(size_t)t * 256 + c];
    if (*e < 0) {
        uint32_t d = hx_rx_deriv(rx, r, c);
        e = &rx->tabs[(size_t)t * 256 + c]; /* tabs may have moved */
        *e = (int32_t)d;
    }
    return (uint32_t)*e;
}

/* ---- calls ---- */
static int push_call(hx_rx *rx, uint32_t rule, uint32_t cont)
{
    if (cont == RX_NONE) return 0;
    if (gint_grow((void **)&rx->calls, &rx->cap_calls, rx->n_calls + 2, 4))
        return -1;
    rx->calls[rx->n_calls++] = rule;
    rx->calls[rx->n_calls++] = cont;
    return 0;
}

/* Appends (rule, cont) pairs for the calls that can start r, each
 * continued by tail. */
static int first_calls_into(hx_rx *rx, uint32_t r, uint32_t tail)
{
    const rx_node n = rx->nodes[r];
    if (!n.has_call) return 0;
    switch (n.kind) {
    case RX_CALL: return push_call(rx, n.a, tail);
    case RX_CAT:
        if (first_calls_into(rx, n.a, hx_rx_cat(rx, n.b, tail))) return -1;
        if (rx->nodes[n.a].nullable) return first_calls_into(rx, n.b, tail);
        return 0;
    case RX_OR:
        for (uint32_t i = 0; i < n.b; i++)
            if (first_calls_into(rx, rx->kids[n.a + i], tail)) return -1;
        return 0;
    case RX_REP:
        return first_calls_into(
            rx, n.a,
            hx_rx_cat(rx, hx_rx_rep(rx, n.a, n.min ? n.min - 1 : 0,
                                    n.max == RX_INF ? RX_INF : n.max - 1),
                   tail));
    default: return 0; /* calls under AND/NOT are never built */
    }
}

const uint32_t *hx_rx_first_calls(hx_rx *rx, uint32_t r, uint32_t *n)
{
    rx_node *nd = &rx->nodes[r];
    if (!nd->has_call) { *n = 0; return NULL; }
    if (!nd->calls_done) {
        uint32_t off = rx->n_calls;
        if (first_calls_into(rx, r, RX_NIL)) rx->failed = 1;
        nd = &rx->nodes[r];
        nd->calls_off = off;
        nd->n_calls = (rx->n_calls - off) / 2;
        nd->calls_done = 1;
    }
    *n = nd->n_calls;
    return rx->calls + nd->calls_off;
}

uint32_t hx_rx_new_rule(hx_rx *rx)
{
    if (gint_grow((void **)&rx->rules, &rx->cap_rules, rx->n_rules + 1, 4)) {
        rx->failed = 1;
        return 0;
    }
    rx->rules[rx->n_rules] = RX_NONE;
    return rx->n_rules++;
}

void hx_rx_set_rule(hx_rx *rx, uint32_t rule, uint32_t body)
{
    if (rule < rx->n_rules) rx->rules[rule] = body;
}

/* ---- emptiness and matching ---- */
int hx_rx_is_empty(hx_rx *rx, uint32_t r, uint32_t budget)
{
    uint32_t *q = hx_malloc((budget + 1) * 4), nq = 0, head = 0;
    uint8_t *seen = NULL;
    int res = 1;
    if (!q) return -1;
    uint32_t seen_cap = 0, nodes0 = rx->n_nodes;
    q[nq++] = r;
    while (head < nq) {
        if (rx->n_nodes - nodes0 > 100000) { res = -1; break; }
        uint32_t s = q[head++];
        if (s == RX_NONE) continue;
        if (rx->nodes[s].has_call) { res = -1; break; }
        if (rx->nodes[s].nullable) { res = 0; break; }
        for (int c = 0; c < 256; c++) {
            uint32_t d = hx_rx_deriv(rx, s, c);
            if (rx->failed) { res = -1; goto done; }
            if (d == RX_NONE) continue;
            if (d >= seen_cap) {
                uint32_t nc = rx->n_nodes + 1024;
                uint8_t *ns = hx_realloc(seen, nc);
                if (!ns) { res = -1; goto done; }
                memset(ns + seen_cap, 0, nc - seen_cap);
                seen = ns;
                seen_cap = nc;
            }
            if (seen[d]) continue;
            seen[d] = 1;
            if (nq >= budget) { res = -1; goto done; }
            q[nq++] = d;
        }
    }
done:
    free(q);
    free(seen);
    return res;
}

int hx_rx_matches(hx_rx *rx, uint32_t r, const char *s, size_t n)
{
    for (size_t i = 0; i < n && r != RX_NONE; i++)
        r = hx_rx_deriv(rx, r, (uint8_t)s[i]);
    return r != RX_NONE && rx->nodes[r].nullable;
}

/* r with every call replaced by "any bytes": a superset of r's language.
 * memo[id] caches results for the nodes that existed at the start. */
static uint32_t approx_calls(hx_rx *rx, uint32_t r, uint32_t *memo, uint32_t n_memo, int depth)
{
    const rx_node n = rx->nodes[r];
    if (!n.has_call || rx->failed) return r;
    if (r < n_memo && memo[r]) return memo[r] - 1;
    uint32_t out;
    if (depth > 200) return hx_rx_not(rx, RX_NONE);
    switch (n.kind) {
    case RX_CAT:
        out = hx_rx_cat(rx, approx_calls(rx, n.a, memo, n_memo, depth + 1), approx_calls(rx, n.b, memo, n_memo, depth + 1));
        break;
    case RX_REP: out = hx_rx_rep(rx, approx_calls(rx, n.a, memo, n_memo, depth + 1), n.min, n.max); break;
    case RX_OR:
        out = RX_NONE;
        for (uint32_t i = 0; i < n.b; i++)
            out = hx_rx_or(rx, out, approx_calls(rx, rx->kids[n.a + i], memo, n_memo, depth + 1));
        break;
    default: out = hx_rx_not(rx, RX_NONE);
    }
    if (r < n_memo) memo[r] = out + 1;
    return out;
}

static void first_bytes(hx_rx *rx, uint32_t r, uint32_t *bits, uint8_t *seen_rules, int depth)
{
    uint32_t nc;
    if (depth > 32) { memset(bits, 0xff, 32); return; }
    for (int c = 0; c < 256; c++)
        if (hx_rx_deriv(rx, r, c) != RX_NONE) bits[c >> 5] |= 1u << (c & 31);
    const uint32_t *calls = hx_rx_first_calls(rx, r, &nc);
    size_t off = calls ? (size_t)(calls - rx->calls) : 0;
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t rule = rx->calls[off + 2 * i];
        if (seen_rules[rule]) continue;
        seen_rules[rule] = 1;
        first_bytes(rx, rx->rules[rule], bits, seen_rules, depth + 1);
    }
}

int hx_rx_disjoint(hx_rx *rx, uint32_t a, uint32_t b)
{
    uint32_t fa[8] = {0}, fb[8] = {0}, inter = 0;
    uint8_t *seen = hx_calloc(rx->n_rules + 1, 2);
    if (!seen) return 0;
    first_bytes(rx, a, fa, seen, 0);
    first_bytes(rx, b, fb, seen + rx->n_rules + 1, 0);
    free(seen);
    for (int i = 0; i < 8; i++) inter |= fa[i] & fb[i];
    if (!inter && !rx->nodes[a].nullable && !rx->nodes[b].nullable) return 1;
    uint32_t n0 = rx->n_nodes, *memo = hx_calloc(n0, 4);
    if (!memo) return 0;
    uint32_t x = hx_rx_and(rx, approx_calls(rx, a, memo, n0, 0), approx_calls(rx, b, memo, n0, 0));
    free(memo);
    return hx_rx_is_empty(rx, x, 300) == 1;
}

void hx_rx_dump(const hx_rx *rx, uint32_t r, int depth, FILE *f)
{
    const rx_node *n = &rx->nodes[r];
    if (depth > 6) { fprintf(f, "…"); return; }
    switch (n->kind) {
    case RX_EMPTY: fprintf(f, "∅"); break;
    case RX_EPS: fprintf(f, "ε"); break;
    case RX_CLASS: {
        int cnt = 0, first = -1;
        for (int c = 0; c < 256; c++)
            if ((rx->cls[8 * n->a + c / 32] >> (c % 32)) & 1) { cnt++; if (first < 0) first = c; }
        if (cnt == 1 && first >= 32 && first < 127) fprintf(f, "%c", first);
        else fprintf(f, "[#%d:%d]", (int)n->a, cnt);
        break;
    }
    case RX_CALL: fprintf(f, "CALL%u", n->a); break;
    case RX_CAT: fprintf(f, "("); hx_rx_dump(rx, n->a, depth + 1, f); fprintf(f, " . "); hx_rx_dump(rx, n->b, depth + 1, f); fprintf(f, ")"); break;
    case RX_OR: case RX_AND:
        fprintf(f, n->kind == RX_OR ? "OR{" : "AND{");
        for (uint32_t i = 0; i < n->b; i++) { if (i) fprintf(f, " | "); hx_rx_dump(rx, rx->kids[n->a + i], depth + 1, f); }
        fprintf(f, "}");
        break;
    case RX_NOT: fprintf(f, "NOT("); hx_rx_dump(rx, n->a, depth + 1, f); fprintf(f, ")"); break;
    case RX_REP: fprintf(f, "REP#%u(", r); hx_rx_dump(rx, n->a, depth + 1, f); fprintf(f, "){%u,%d}", n->min, n->max == RX_INF ? -1 : (int)n->max); break;
    }
}
