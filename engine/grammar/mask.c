/* mask.c: vocabularies as token tries, per-regex mask memos, token masks,
 * forced tokens and the sampler stage; the public grammar constructors. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/grammar/gint.h"
#include "engine/sample.h"

#define NO_TOK UINT32_MAX
#define MEMO_LIST_MAX 512
#define MEMO_BYTES_MAX ((size_t)256 << 20)
#define MAX_TOK_LEN 255

static const char OPEN_TAG[] = HX_TOOL_CALL_OPEN;
static const char CLOSE_TAG[] = HX_TOOL_CALL_CLOSE;
static const char PY_TAG[] = HX_TOOL_CALL_PYTHON;
/* Special tokens that tool-call grammars take in place of their text. */
const char *const hx_gmark_text[N_MARKS] = {OPEN_TAG, CLOSE_TAG, PY_TAG};

/* ---- vocabulary ---- */
/* A token to sort: its first 8 bytes as a big-endian key (zero padded, so
 * key order agrees with byte order), then the rest, the length, the id. */
typedef struct tkey {
    uint64_t key;
    const uint8_t *p;
    uint32_t len, id;
} tkey;

static int cmp_key(const void *a, const void *b)
{
    const tkey *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n > 8 ? memcmp(x->p + 8, y->p + 8, n - 8) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The tokens ids[0..n) sorted by their bytes (ties: shorter, then lower
 * id); caller frees. */
static tkey *sort_tokens(const hx_gvocab *v, const uint32_t *ids, uint32_t n)
{
    tkey *k = hx_malloc((n ? n : 1) * sizeof *k);
    if (!k) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)v->piece[ids[i]];
        uint32_t len = v->len[ids[i]];
        uint64_t key = 0;
        for (uint32_t j = 0; j < 8; j++) key = key << 8 | (j < len ? p[j] : 0);
        k[i] = (tkey){key, p, len, ids[i]};
    }
    qsort(k, n, sizeof *k, cmp_key);
    return k;
}

/* Builds a DFS-ordered trie of the sorted tokens k[0..n). */
static int trie_build(hx_gvocab *v, const tkey *tk, uint32_t n, gtrie *t)
{
    uint32_t cap = 1024, path[MAX_TOK_LEN + 1], depth = 0;
    t->nd = hx_malloc(cap * sizeof(gnode));
    t->n = 0;
    if (!t->nd) return -1;
    for (uint32_t k = 0; k <= n; k++) {
        uint32_t id = k < n ? tk[k].id : NO_TOK, L = k < n ? tk[k].len : 0, lcp = 0;
        const uint8_t *p = k < n ? tk[k].p : NULL;
        while (lcp < depth && lcp < L && t->nd[path[lcp]].byte == p[lcp]) lcp++;
        while (depth > lcp) { /* close nodes */
            depth--;
            t->nd[path[depth]].size = t->n - path[depth];
        }
        if (k == n) break;
        for (uint32_t d = depth; d < L; d++) {
            if (t->n == cap) {
                void *q = hx_realloc(t->nd, (cap *= 2) * sizeof(gnode));
                if (!q) return -1;
                t->nd = q;
            }
            t->nd[t->n] = (gnode){NO_TOK, 1, d ? path[d - 1] : NO_TOK, p[d], (uint8_t)(d + 1)};
            path[d] = t->n++;
        }
        depth = L;
        gnode *last = &t->nd[path[L - 1]];
        if (last->tok == NO_TOK) last->tok = id;
        else { /* same bytes: chain */
            uint32_t x = last->tok;
            while (v->dup_next[x] != NO_TOK) x = v->dup_next[x];
            v->dup_next[x] = id;
        }
    }
    return 0;
}

/* Code points if p is valid UTF-8 safe inside a JSON string, else -1. */
static int string_safe_cps(const uint8_t *p, uint32_t n)
{
    int cps = 0;
    for (uint32_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (c < 0x80) {
            if (c < 0x20 || c == '"' || c == '\\') return -1;
            i++;
        } else {
            int k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
            if (!k || c > 0xF4 || i + (uint32_t)k > n) return -1;
            uint32_t cp = c & (0x7F >> k);
            for (int j = 1; j < k; j++) {
                if ((p[i + j] & 0xC0) != 0x80) return -1;
                cp = cp << 6 | (p[i + j] & 0x3F);
            }
            if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                (cp >= 0xD800 && cp <= 0xDFFF))
                return -1;
            i += (uint32_t)k;
        }
        cps++;
    }
    return cps;
}

static int build_tables(hx_gvocab *v)
{
    uint32_t *all = hx_malloc((size_t)v->n_tokens * 4);
    int *cps = hx_malloc((size_t)v->n_tokens * sizeof(int));
    tkey *ka = NULL, *kr = NULL;
    uint32_t na = 0, nr = 0;
    int rc = -1;
    if (!all || !cps) goto done;
    v->max_cp = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        cps[i] = -1;
        if ((v->flags[i] & HX_GTOK_SPECIAL) || v->len[i] == 0 || v->len[i] > MAX_TOK_LEN) continue;
        all[na++] = (uint32_t)i;
        cps[i] = string_safe_cps((const uint8_t *)v->piece[i], v->len[i]);
        if (cps[i] < 0) nr++;
        else if ((uint32_t)cps[i] > v->max_cp) v->max_cp = (uint32_t)cps[i];
    }
    if (!(ka = sort_tokens(v, all, na)) || !(kr = hx_malloc((nr ? nr : 1) * sizeof *kr))) goto done;
    nr = 0; /* the tokens that are not string-safe, in the same order */
    for (uint32_t i = 0; i < na; i++)
        if (cps[ka[i].id] < 0) kr[nr++] = ka[i];
    if (trie_build(v, ka, na, &v->all)) goto done;
    /* the rest trie must not re-chain duplicates: build with a copy */
    uint32_t *saved = hx_malloc((size_t)v->n_tokens * 4);
    if (!saved) goto done;
    memcpy(saved, v->dup_next, (size_t)v->n_tokens * 4);
    int bad = trie_build(v, kr, nr, &v->rest);
    memcpy(v->dup_next, saved, (size_t)v->n_tokens * 4);
    free(saved);
    if (bad) goto done;
    v->cum = hx_calloc((size_t)(v->max_cp + 1) * v->n_words, 4);
    if (!v->cum) goto done;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (cps[i] >= 0) v->cum[(size_t)cps[i] * v->n_words + (uint32_t)i / 32] |= 1u << (i & 31);
    for (uint32_t k = 1; k <= v->max_cp; k++)
        for (uint32_t w = 0; w < v->n_words; w++)
            v->cum[(size_t)k * v->n_words + w] |= v->cum[(size_t)(k - 1) * v->n_words + w];
    rc = 0;
done:
    free(all);
    free(ka);
    free(kr);
    free(cps);
    return rc;
}

int hx_gvocab_new(int32_t n_tokens, const char *const *pieces, const size_t *lens,
                  const uint8_t *flags, hx_gvocab **out, hx_err *err)
{
    *out = NULL;
    if (n_tokens <= 0 || !pieces || !lens)
        return hx_err_set(err, HX_ERR_INVALID, "vocabulary: no tokens");
    hx_gvocab *v = hx_calloc(1, sizeof *v);
    if (!v) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    v->n_tokens = n_tokens;
    v->n_words = ((uint32_t)n_tokens + 31) / 32;
    v->piece = hx_calloc((size_t)n_tokens, sizeof(char *));
    v->len = hx_calloc((size_t)n_tokens, 4);
    v->flags = hx_calloc((size_t)n_tokens, 1);
    v->dup_next = hx_malloc((size_t)n_tokens * 4);
    size_t total = (size_t)n_tokens; /* one NUL each: pieces may hold NUL bytes */
    for (int32_t i = 0; i < n_tokens; i++) total += lens[i];
    v->text = hx_malloc(total);
    for (int k = 0; k < N_MARKS; k++) v->mark_tok[k] = -1;
    if (!v->piece || !v->len || !v->flags || !v->dup_next || !v->text) goto oom;
    memset(v->dup_next, 0xff, (size_t)n_tokens * 4);
    for (size_t i = 0, off = 0; i < (size_t)n_tokens; off += lens[i++] + 1) {
        v->len[i] = (uint32_t)lens[i];
        v->piece[i] = v->text + off;
        if (lens[i]) memcpy(v->piece[i], pieces[i], lens[i]);
        v->piece[i][lens[i]] = 0;
        v->flags[i] = flags ? flags[i] : 0;
        for (int k = 0; k < N_MARKS && (v->flags[i] & HX_GTOK_SPECIAL); k++)
            if (lens[i] == strlen(hx_gmark_text[k]) && !memcmp(pieces[i], hx_gmark_text[k], lens[i]))
                v->mark_tok[k] = (int32_t)i;
    }
    if (build_tables(v)) goto oom;
    *out = v;
    return HX_OK;
oom:
    hx_gvocab_free(v);
    return hx_err_set(err, HX_ERR_NOMEM, "out of memory building the token trie");
}

void hx_gvocab_free(hx_gvocab *v)
{
    if (!v) return;
    free(v->piece);
    if (v->map) { /* the tables point into a cache file (gvcache.c) */
        hx_gvocab_unmap(v);
        free(v);
        return;
    }
    free(v->text);
    free(v->len);
    free(v->flags);
    free(v->dup_next);
    free(v->all.nd);
    free(v->rest.nd);
    free(v->cum);
    free(v);
}

int32_t hx_gvocab_n_tokens(const hx_gvocab *v)
{
    return v ? v->n_tokens : 0;
}

int32_t hx_gvocab_tokens(const hx_gvocab *v, const char *const **piece,
                         const uint32_t **len, const uint8_t **flags)
{
    *piece = (const char *const *)v->piece;
    *len = v->len;
    *flags = v->flags;
    return v->n_tokens;
}

int32_t hx_gvocab_mark_token(const hx_gvocab *v, int k)
{
    return k >= 0 && k < N_MARKS ? v->mark_tok[k] : -1;
}

const char *hx_gvocab_mark_of(const hx_gvocab *v, int32_t t)
{
    return hx_gmark_of(v, t);
}

/* ---- masks ---- */
static inline void set_tok(const hx_gvocab *v, uint32_t *mask, uint32_t t)
{
    for (; t != NO_TOK; t = v->dup_next[t]) mask[t >> 5] |= 1u << (t & 31);
}

static int is_boundary(hx_rx *rx, uint32_t s);

/* Walks trie t with regex steps from r, setting tokens that stay inside r
 * and collecting boundary nodes (where a call or a pop could happen). */
static int memo_walk(hx_matcher *m, const gtrie *t, uint32_t flag, uint32_t r, uint32_t *bits,
                     uint32_t **bnd, uint32_t *n_bnd, uint32_t *cap_bnd)
{
    hx_rx *rx = m->rx;
    int32_t tab[MAX_TOK_LEN + 1];
    uint8_t bflag[MAX_TOK_LEN + 1];
    const gnode *nd = t->nd;
    tab[0] = hx_rx_tab(rx, r);
    bflag[0] = (uint8_t)is_boundary(rx, r);
    if (tab[0] < 0) return -1;
    for (uint32_t i = 0; i < t->n;) {
        const gnode *d = &nd[i];
        uint32_t L = d->level;
        if (bflag[L - 1]) {
            if (*n_bnd == *cap_bnd) {
                *cap_bnd = *cap_bnd ? *cap_bnd * 2 : 64;
                void *q = hx_realloc(*bnd, *cap_bnd * 4);
                if (!q) return -1;
                *bnd = q;
            }
            (*bnd)[(*n_bnd)++] = i | flag;
            i += d->size;
            continue;
        }
        int32_t x = rx->tabs[(size_t)tab[L - 1] * 256 + d->byte];
        if (x < 0) {
            x = (int32_t)hx_rx_deriv(rx, rx_tab_owner(rx, tab[L - 1]), d->byte);
            rx->tabs[(size_t)tab[L - 1] * 256 + d->byte] = x;
        }
        if (x == RX_NONE) { i += d->size; continue; }
        if (d->size > 1) {
            tab[L] = hx_rx_tab(rx, (uint32_t)x);
            if (tab[L] < 0) return -1;
            bflag[L] = (uint8_t)is_boundary(rx, (uint32_t)x);
        }
        if (d->tok != NO_TOK) set_tok(m->v, bits, d->tok);
        i++;
    }
    return rx->failed ? -1 : 0;
}

/* A boundary state: the frame may end (pop) or call a rule here. */
static int is_boundary(hx_rx *rx, uint32_t s)
{
    rx_node *n = &rx->nodes[s];
    if (!(n->info & RXI_BND_KNOWN)) {
        uint32_t nc = 0;
        int b = n->nullable || (n->has_call && (hx_rx_first_calls(rx, s, &nc), nc));
        n = &rx->nodes[s];
        n->info |= RXI_BND_KNOWN | (b ? RXI_BND : 0);
    }
    return (n->info & RXI_BND) != 0;
}

/* Finite language (no unbounded repetition, no complement, no call). */
static int is_finite(hx_rx *rx, uint32_t r, int depth)
{
    rx_node *n = &rx->nodes[r];
    if (n->info & RXI_FIN_KNOWN) return (n->info & RXI_FIN) != 0;
    int f;
    switch (n->kind) {
    case RX_EMPTY: case RX_EPS: case RX_CLASS: f = 1; break;
    case RX_CAT: f = depth < 200 && is_finite(rx, n->a, depth + 1) && is_finite(rx, n->b, depth + 1); break;
    case RX_REP: f = n->max != RX_INF && depth < 200 && is_finite(rx, n->a, depth + 1); break;
    case RX_OR: case RX_AND:
        f = depth < 200;
        for (uint32_t i = 0; f && i < n->b; i++) f = is_finite(rx, rx->kids[rx->nodes[r].a + i], depth + 1);
        break;
    default: f = 0;
    }
    rx->nodes[r].info |= RXI_FIN_KNOWN | (f ? RXI_FIN : 0);
    return f;
}

#define FS_INF INT64_MAX

/* Accepts every string of characters (the content's universal set). */
static int is_universal(hx_matcher *m, uint32_t r, int depth)
{
    const rx_node *n = &m->rx->nodes[r];
    uint32_t any = m->rx->any_char;
    if (depth > 16) return 0;
    if (n->kind == RX_REP) return n->a == any && n->min == 0 && n->max == RX_INF;
    if (n->kind == RX_CAT)
        return (is_universal(m, n->a, depth + 1) && m->rx->nodes[n->b].nullable) ||
               (m->rx->nodes[n->a].nullable && is_universal(m, n->b, depth + 1));
    if (n->kind == RX_OR)
        for (uint32_t i = 0; i < n->b; i++)
            if (is_universal(m, m->rx->kids[n->a + i], depth + 1)) return 1;
    return 0;
}

/* What string-safe tokens a state inside a string accepts: those of at
 * most L characters, all of them (any) or only those made of the bytes of
 * an ASCII class. */
typedef struct sclass {
    int any;
    uint32_t bits[8];
    int64_t L;
    int64_t min; /* largest lower bound among intersected parts */
} sclass;

static int is_raw_ascii(const uint32_t *b)
{
    /* only printable ASCII other than '"' and '\\' (raw in JSON strings) */
    static const uint32_t ok[8] = {0, 0xfffffffbu, 0xefffffffu, 0xffffffffu, 0, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        if (b[i] & ~ok[i]) return 0;
    return 1;
}

/* No string-safe byte can start r (so string-safe tokens never enter it). */
static int starts_unsafe(hx_rx *rx, uint32_t r)
{
    rx_node *n = &rx->nodes[r];
    if (n->info & RXI_UNS_KNOWN) return (n->info & RXI_UNS) != 0;
    int u = !n->has_call;
    for (int c = 0x20; u && c < 256; c++) {
        if (c == '"' || c == '\\') continue;
        u = hx_rx_deriv(rx, r, c) == RX_NONE;
    }
    rx->nodes[r].info |= RXI_UNS_KNOWN | (u ? RXI_UNS : 0);
    return u;
}

static int content_class(hx_matcher *m, uint32_t a, int depth, sclass *o)
{
    hx_rx *rx = m->rx;
    /* a copy: the calls below may intern nodes and move rx->nodes */
    const rx_node nd = rx->nodes[a], *n = &nd;
    memset(o, 0, sizeof *o);
    if (depth > 16) return 0;
    if (is_universal(m, a, depth)) { o->any = 1; o->L = FS_INF; return 1; }
    if (n->kind == RX_REP) {
        o->L = n->max == RX_INF ? FS_INF : n->max;
        o->min = n->min;
        if (n->a == rx->any_char) { o->any = 1; return 1; }
        const rx_node *k = &rx->nodes[n->a];
        if (k->kind != RX_CLASS || !is_raw_ascii(rx->cls + 8 * k->a)) return 0;
        memcpy(o->bits, rx->cls + 8 * k->a, 32);
        return 1;
    }
    if (n->kind == RX_CAT) /* e.g. C{1,9} then the (\n)? of a final $ */
        return starts_unsafe(rx, n->b) && content_class(m, n->a, depth + 1, o);
    if (n->kind == RX_AND) {
        sclass k;
        o->any = 1;
        o->L = FS_INF;
        for (uint32_t i = 0; i < n->b; i++) {
            if (!content_class(m, rx->kids[n->a + i], depth + 1, &k)) return 0;
            if (!k.any) {
                if (o->any) memcpy(o->bits, k.bits, 32);
                else for (int w = 0; w < 8; w++) o->bits[w] &= k.bits[w];
                o->any = 0;
            }
            if (k.L < o->L) o->L = k.L;
            if (k.min > o->min) o->min = k.min;
        }
        if (o->min > o->L) return 0; /* no common length: not this shape */
        if (!o->any) {
            uint32_t nz = 0;
            for (int w = 0; w < 8; w++) nz |= o->bits[w];
            if (!nz) return 0;
        }
        return 1;
    }
    return 0;
}

/* The string-safe behaviour of state r inside a string, if known. */
static int free_string(hx_matcher *m, uint32_t r, int depth, sclass *o)
{
    hx_rx *rx = m->rx;
    /* a copy: the calls below may intern nodes and move rx->nodes */
    const rx_node nd = rx->nodes[r], *n = &nd;
    memset(o, 0, sizeof *o);
    if (depth > 16) return 0;
    if (n->kind == RX_CAT) {
        const rx_node *b = &rx->nodes[n->b];
        if (n->b == m->g->quote || (b->kind == RX_CAT && b->a == m->g->quote) ||
            (!b->nullable && starts_unsafe(rx, n->b)))
            return content_class(m, n->a, depth + 1, o);
        /* a quoted string inside a: string-safe tokens never get past it */
        return free_string(m, n->a, depth + 1, o) && o->any && o->L == FS_INF;
    }
    if (n->kind == RX_AND) { /* a free string minus finitely many keys */
        int free_kid = 0;
        sclass k;
        for (uint32_t i = 0; i < n->b; i++) {
            uint32_t kid = rx->kids[n->a + i];
            if (rx->nodes[kid].kind == RX_NOT && is_finite(rx, rx->nodes[kid].a, 0)) continue;
            if (!free_string(m, kid, depth + 1, &k) || !k.any || k.L != FS_INF) return 0;
            free_kid = 1;
        }
        o->any = 1;
        o->L = FS_INF;
        return free_kid;
    }
    if (n->kind == RX_OR) { /* the union holds every string-safe token */
        sclass k;
        for (uint32_t i = 0; i < n->b; i++)
            if (free_string(m, rx->kids[n->a + i], depth + 1, &k) && k.any && k.L == FS_INF) {
                *o = k;
                return 1;
            }
    }
    return 0;
}

/* Tokens made only of class bytes, by length (cached per class). */
static const gclass_toks *class_toks(hx_matcher *m, const uint32_t *bits)
{
    const hx_gvocab *v = m->v;
    for (uint32_t i = 0; i < m->n_ctoks; i++)
        if (!memcmp(m->ctoks[i].bits, bits, 32)) return &m->ctoks[i];
    void *q = hx_realloc(m->ctoks, (m->n_ctoks + 1) * sizeof *m->ctoks);
    if (!q) return NULL;
    m->ctoks = q;
    gclass_toks *c = &m->ctoks[m->n_ctoks];
    memcpy(c->bits, bits, 32);
    c->by_len = hx_calloc(258, 4);
    uint32_t cnt[257] = {0}, n = 0;
    for (int32_t t = 0; t < v->n_tokens; t++) {
        uint32_t l = v->len[t], k = 0;
        if (!l || l > 256 || (v->flags[t] & HX_GTOK_SPECIAL)) continue;
        const uint8_t *p = (const uint8_t *)v->piece[t];
        while (k < l && ((bits[p[k] >> 5] >> (p[k] & 31)) & 1)) k++;
        if (k == l) { cnt[l]++; n++; }
    }
    c->toks = hx_malloc((n ? n : 1) * 4);
    if (!c->by_len || !c->toks) { free(c->by_len); free(c->toks); return NULL; }
    uint32_t pos[257], acc = 0;
    for (int l = 0; l <= 256; l++) { pos[l] = acc; acc += cnt[l]; c->by_len[l] = acc; }
    for (int32_t t = 0; t < v->n_tokens; t++) {
        uint32_t l = v->len[t], k = 0;
        if (!l || l > 256 || (v->flags[t] & HX_GTOK_SPECIAL)) continue;
        const uint8_t *p = (const uint8_t *)v->piece[t];
        while (k < l && ((bits[p[k] >> 5] >> (p[k] & 31)) & 1)) k++;
        if (k == l) c->toks[pos[l]++] = (uint32_t)t;
    }
    m->n_ctoks++;
    return c;
}

static void memo_free_all(hx_matcher *m)
{
    for (uint32_t i = 0; i < m->n_memo; i++) {
        if (m->memo[i].alias) continue;
        free(m->memo[i].bits);
        free(m->memo[i].list);
        free(m->memo[i].bnd);
    }
    m->n_memo = 0;
    m->memo_bytes = 0;
    if (m->memo_h) memset(m->memo_h, 0, m->memo_hcap * 4);
}

static int memo_compute(hx_matcher *m, uint32_t r, gmemo *e)
{
    const hx_gvocab *v = m->v;
    uint32_t cap = 0;
    memset(e, 0, sizeof *e);
    e->rx = r;
    e->bits = hx_calloc(v->n_words, 4);
    if (!e->bits) return -1;
    sclass sc;
    int known = free_string(m, r, 0, &sc);
    int64_t fl = known ? sc.L : -1;
    int rc;
    const gclass_toks *ct = known && !sc.any ? class_toks(m, sc.bits) : NULL;
    if (known && sc.any) {
        uint32_t k = fl > (int64_t)v->max_cp ? v->max_cp : (uint32_t)fl;
        memcpy(e->bits, v->cum + (size_t)k * v->n_words, v->n_words * 4);
        rc = memo_walk(m, &v->rest, 1u << 31, r, e->bits, &e->bnd, &e->n_bnd, &cap);
    } else if (ct) {
        uint32_t k = fl > 256 ? ct->by_len[256] : ct->by_len[fl];
        for (uint32_t i = 0; i < k; i++) set_tok(v, e->bits, ct->toks[i]);
        rc = memo_walk(m, &v->rest, 1u << 31, r, e->bits, &e->bnd, &e->n_bnd, &cap);
    } else {
        rc = memo_walk(m, &v->all, 0, r, e->bits, &e->bnd, &e->n_bnd, &cap);
    }
    if (rc) return -1;
    uint32_t cnt = 0;
    for (uint32_t w = 0; w < v->n_words; w++) cnt += (uint32_t)__builtin_popcount(e->bits[w]);
    if (cnt <= MEMO_LIST_MAX) {
        e->list = hx_malloc((cnt ? cnt : 1) * 4);
        if (!e->list) return -1;
        for (uint32_t w = 0; w < v->n_words; w++)
            for (uint32_t x = e->bits[w]; x; x &= x - 1) e->list[e->n_bits++] = w * 32 + (uint32_t)__builtin_ctz(x);
        free(e->bits);
        e->bits = NULL;
    }
    m->memo_bytes += (e->bits ? v->n_words * 4 : e->n_bits * 4) + e->n_bnd * 4 + 64;
    return 0;
}

/* A token holds at most MAX_TOK_LEN characters, so repetition bounds
 * beyond that cannot change which tokens a state accepts: clamping them
 * (at the front of r, where a token is read) lets states that differ only
 * in a large counter share one memo. */
#define CLAMP_MIN 256u
#define CLAMP_MAX 512u
static uint32_t canon_front(hx_rx *rx, uint32_t r, int depth)
{
    const rx_node n = rx->nodes[r];
    if (depth > 24 || rx->failed) return r;
    switch (n.kind) {
    case RX_REP: {
        uint32_t mn = n.min > CLAMP_MIN ? CLAMP_MIN : n.min;
        uint32_t mx = n.max != RX_INF && n.max >= CLAMP_MAX ? RX_INF : n.max;
        if (mn == n.min && mx == n.max) return r;
        return hx_rx_rep(rx, n.a, mn, mx);
    }
    case RX_CAT: {
        uint32_t a = canon_front(rx, n.a, depth + 1);
        uint32_t b = rx->nodes[n.a].nullable ? canon_front(rx, n.b, depth + 1) : n.b;
        return a == n.a && b == n.b ? r : hx_rx_cat(rx, a, b);
    }
    case RX_AND:
    case RX_OR: {
        uint32_t k[16];
        int changed = 0;
        if (n.b > 16) return r;
        for (uint32_t i = 0; i < n.b; i++) {
            uint32_t kid = rx->kids[n.a + i];
            k[i] = canon_front(rx, kid, depth + 1);
            changed |= k[i] != kid;
        }
        if (!changed) return r;
        uint32_t acc = k[0];
        for (uint32_t i = 1; i < n.b; i++) acc = n.kind == RX_OR ? hx_rx_or(rx, acc, k[i]) : hx_rx_and(rx, acc, k[i]);
        return acc;
    }
    default: return r;
    }
}

static gmemo *memo_get_raw(hx_matcher *m, uint32_t r);

static gmemo *memo_get(hx_matcher *m, uint32_t r)
{
    if (m->memo_bytes > MEMO_BYTES_MAX) memo_free_all(m);
    return memo_get_raw(m, r);
}

static gmemo *memo_get_raw(hx_matcher *m, uint32_t r)
{
    if (m->memo_bytes > MEMO_BYTES_MAX) memo_free_all(m);
    if ((m->n_memo + 1) * 2 > m->memo_hcap) {
        uint32_t nc = m->memo_hcap ? m->memo_hcap * 2 : 256;
        uint32_t *t = hx_calloc(nc, 4);
        if (!t) return NULL;
        for (uint32_t i = 0; i < m->n_memo; i++) {
            uint32_t j = (m->memo[i].rx * 0x9e3779b1u) & (nc - 1);
            while (t[j]) j = (j + 1) & (nc - 1);
            t[j] = i + 1;
        }
        free(m->memo_h);
        m->memo_h = t;
        m->memo_hcap = nc;
    }
    /* the table is open addressing over a power of two, at most half full,
     * and every slot holds 0 or an index + 1 into the memos */
    assert(m->memo_hcap && !(m->memo_hcap & (m->memo_hcap - 1)));
    assert(m->n_memo < m->memo_hcap / 2);
    uint32_t j = (r * 0x9e3779b1u) & (m->memo_hcap - 1);
    while (m->memo_h[j]) {
        assert(m->memo_h[j] <= m->n_memo);
        if (m->memo[m->memo_h[j] - 1].rx == r) return &m->memo[m->memo_h[j] - 1];
        j = (j + 1) & (m->memo_hcap - 1);
    }
    if (m->n_memo == m->cap_memo) {
        uint32_t nc = m->cap_memo ? m->cap_memo * 2 : 64;
        void *q = hx_realloc(m->memo, nc * sizeof(gmemo));
        if (!q) return NULL;
        m->memo = q;
        m->cap_memo = nc;
    }
    uint32_t c = canon_front(m->rx, r, 0);
    if (c != r && c != RX_NONE) {
        gmemo *t = memo_get_raw(m, c); /* may move m->memo */
        if (!t) return NULL;
        gmemo copy = *t;
        j = (r * 0x9e3779b1u) & (m->memo_hcap - 1); /* the table may have grown */
        while (m->memo_h[j]) j = (j + 1) & (m->memo_hcap - 1);
        if (m->n_memo == m->cap_memo) {
            uint32_t nc = m->cap_memo * 2;
            void *q = hx_realloc(m->memo, nc * sizeof(gmemo));
            if (!q) return NULL;
            m->memo = q;
            m->cap_memo = nc;
        }
        copy.rx = r;
        copy.alias = 1;
        assert(m->n_memo < m->cap_memo && m->n_memo + 1 < m->memo_hcap && !m->memo_h[j]);
        m->memo[m->n_memo] = copy;
        m->memo_h[j] = ++m->n_memo;
        return &m->memo[m->n_memo - 1];
    }
    gmemo *e = &m->memo[m->n_memo];
    if (memo_compute(m, r, e)) {
        free(e->bits);
        free(e->list);
        free(e->bnd);
        return NULL;
    }
    assert(e->rx == r && !m->memo_h[j]);
    m->memo_h[j] = ++m->n_memo;
    return e;
}

/* Walks the subtree at node b of trie t with full config steps. */
static void walk_config(hx_matcher *m, const gtrie *t, uint32_t b, uint32_t *mask)
{
    uint32_t cs[MAX_TOK_LEN + 1], path[MAX_TOK_LEN + 1], np = 0;
    for (uint32_t p = t->nd[b].parent; p != NO_TOK; p = t->nd[p].parent) path[np++] = p;
    uint32_t c = m->cur;
    while (np > 0 && c) c = hx_gm_step(m, c, t->nd[path[--np]].byte);
    if (!c) return;
    uint32_t base = t->nd[b].level - 1;
    cs[base] = c;
    for (uint32_t i = b, end = b + t->nd[b].size; i < end;) {
        const gnode *d = &t->nd[i];
        uint32_t x = hx_gm_step(m, cs[d->level - 1], d->byte);
        if (!x) { i += d->size; continue; }
        cs[d->level] = x;
        if (d->tok != NO_TOK) set_tok(m->v, mask, d->tok);
        i++;
    }
}

static uint32_t feed_str(hx_matcher *m, uint32_t c, const char *s)
{
    for (; *s && c; s++) c = hx_gm_step(m, c, (uint8_t)*s);
    return c;
}

int hx_matcher_mask(hx_matcher *m, uint32_t *mask)
{
    const hx_gvocab *v = m->v;
    if (!v) return hx_err_set(&m->err, HX_ERR_STATE, "matcher has no vocabulary");
    memset(mask, 0, v->n_words * 4);
    if (m->ended || !m->cur) return HX_OK;
    const gcfg c = m->cfg[m->cur];
    if (++m->stamp_v == 0) {
        memset(m->stamp, 0, (v->all.n + v->rest.n) * 4);
        m->stamp_v = 1;
    }
    for (uint32_t i = 0; i < c.n; i++) {
        uint32_t r = m->stk[m->pool[c.off + i]].rx;
        gmemo *e = memo_get(m, r);
        if (!e) return hx_err_set(&m->err, HX_ERR_NOMEM, "out of memory (mask)");
        if (e->bits) {
            for (uint32_t w = 0; w < v->n_words; w++) mask[w] |= e->bits[w];
        } else {
            for (uint32_t k = 0; k < e->n_bits; k++) mask[e->list[k] >> 5] |= 1u << (e->list[k] & 31);
        }
        for (uint32_t k = 0; k < e->n_bnd; k++) {
            uint32_t b = e->bnd[k], rest = b >> 31, node = b & 0x7fffffffu;
            uint32_t sidx = node + (rest ? v->all.n : 0);
            if (m->stamp[sidx] == m->stamp_v) continue;
            m->stamp[sidx] = m->stamp_v;
            walk_config(m, rest ? &v->rest : &v->all, node, mask);
        }
    }
    if (hx_gm_can_end(m, m->cur))
        for (int32_t t = 0; t < v->n_tokens; t++)
            if (v->flags[t] & HX_GTOK_EOG) mask[t >> 5] |= 1u << (t & 31);
    for (int k = 0; k < N_MARKS; k++) {
        int32_t t = v->mark_tok[k];
        if (t >= 0 && feed_str(m, m->cur, hx_gmark_text[k])) mask[t >> 5] |= 1u << (t & 31);
    }
    return m->rx->failed ? hx_err_set(&m->err, HX_ERR_RANGE, "grammar grew too large") : HX_OK;
}

/* ---- matcher lifecycle and advancing ---- */
hx_matcher *hx_matcher_new(hx_grammar *g, const hx_gvocab *v)
{
    hx_matcher *m = hx_calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = g;
    m->rx = &g->rx;
    m->v = v;
    if (hx_gm_init(m)) goto fail;
    if (v && !(m->stamp = hx_calloc((size_t)v->all.n + v->rest.n + 1, 4))) goto fail;
    m->start = hx_gm_config_of(m, g->root);
    if (!m->start) goto fail;
    m->cur = m->start;
    return m;
fail:
    hx_matcher_free(m);
    return NULL;
}

void hx_matcher_free(hx_matcher *m)
{
    if (!m) return;
    memo_free_all(m);
    for (uint32_t i = 0; i < m->n_ctoks; i++) { free(m->ctoks[i].toks); free(m->ctoks[i].by_len); }
    free(m->ctoks);
    free(m->memo);
    free(m->memo_h);
    free(m->stamp);
    hx_gm_free(m);
    free(m);
}

void hx_matcher_reset(hx_matcher *m)
{
    m->cur = m->start;
    m->ended = 0;
    hx_err_clear(&m->err);
}

int hx_matcher_feed(hx_matcher *m, const char *bytes, size_t n)
{
    uint32_t c = m->cur;
    if (m->ended) return hx_err_set(&m->err, HX_ERR_STATE, "generation already ended");
    for (size_t i = 0; i < n; i++) {
        c = hx_gm_step(m, c, (uint8_t)bytes[i]);
        if (!c) {
            if (m->rx->failed) return hx_err_set(&m->err, HX_ERR_RANGE, "grammar grew too large");
            return hx_err_set(&m->err, HX_ERR_STATE, "byte %zu (0x%02x) not allowed by the grammar", i, (uint8_t)bytes[i]);
        }
    }
    m->cur = c;
    return HX_OK;
}

int hx_matcher_can_end(hx_matcher *m)
{
    return m->ended || hx_gm_can_end(m, m->cur);
}

uint32_t hx_matcher_state(const hx_matcher *m)
{
    return m->cur;
}

const hx_grammar *hx_matcher_grammar(const hx_matcher *m)
{
    return m->g;
}

int hx_matcher_can_continue(hx_matcher *m)
{
    if (m->ended) return 0;
    for (int c = 0; c < 256; c++)
        if (hx_gm_step(m, m->cur, c)) return 1;
    return 0;
}

int hx_matcher_accept(hx_matcher *m, int32_t tok)
{
    const hx_gvocab *v = m->v;
    if (!v || tok < 0 || tok >= v->n_tokens)
        return hx_err_set(&m->err, HX_ERR_INVALID, "token %d out of range", (int)tok);
    if (m->ended) return hx_err_set(&m->err, HX_ERR_STATE, "generation already ended");
    if (v->flags[tok] & HX_GTOK_EOG) {
        if (!hx_gm_can_end(m, m->cur)) return hx_err_set(&m->err, HX_ERR_STATE, "end of output not allowed here");
        m->ended = 1;
        return HX_OK;
    }
    const char *mark = hx_gmark_of(v, tok);
    if (mark) return hx_matcher_feed(m, mark, strlen(mark));
    if (v->flags[tok] & HX_GTOK_SPECIAL)
        return hx_err_set(&m->err, HX_ERR_STATE, "special token %d not allowed", (int)tok);
    return hx_matcher_feed(m, v->piece[tok], v->len[tok]);
}

int hx_matcher_forced(hx_matcher *m, int32_t *tokens, int max)
{
    if (!m->v || max <= 0 || m->ended) return 0;
    uint32_t *mask = hx_malloc(m->v->n_words * 4);
    int n = 0, other = 0; /* allowed tokens, of which not end tokens */
    int32_t found = -1;
    if (!mask || hx_matcher_mask(m, mask)) { free(mask); return 0; }
    for (uint32_t w = 0; w < m->v->n_words && !(n > 1 && other); w++)
        for (uint32_t x = mask[w]; x && !(n > 1 && other); x &= x - 1) {
            int32_t t = (int32_t)(w * 32 + (uint32_t)__builtin_ctz(x));
            if (n++ == 0) found = t;
            other += !(m->v->flags[t] & HX_GTOK_EOG);
        }
    free(mask);
    /* one token, or only end tokens (the first of them: the output ends
     * whichever the model would prefer) */
    if (n == 0 || (n > 1 && other > 0)) return 0;
    tokens[0] = found;
    return 1;
}

int hx_matcher_ended(const hx_matcher *m)
{
    return m->ended;
}

const char *hx_matcher_error(const hx_matcher *m)
{
    return m->err.msg;
}

/* ---- the sampler stage ---- */
typedef struct gstage {
    hx_matcher *m;
    uint32_t *mask;
} gstage;

static int st_apply(void *ctx, float *logits, int32_t n_vocab)
{
    gstage *s = ctx;
    int rc = hx_matcher_mask(s->m, s->mask);
    if (rc) return rc;
    int32_t nt = s->m->v->n_tokens;
    for (int32_t i = 0; i < n_vocab; i++)
        if (i >= nt || !((s->mask[i >> 5] >> (i & 31)) & 1)) logits[i] = -INFINITY;
    return HX_OK;
}

static int st_accept(void *ctx, int32_t tok) { return hx_matcher_accept(((gstage *)ctx)->m, tok); }
static int st_forced(void *ctx, int32_t *t, int32_t max) { return hx_matcher_forced(((gstage *)ctx)->m, t, max); }
static int st_can_end(void *ctx) { return hx_matcher_can_end(((gstage *)ctx)->m); }
static void st_free(void *ctx)
{
    gstage *s = ctx;
    if (!s) return;
    hx_matcher_free(s->m);
    free(s->mask);
    free(s);
}

int hx_grammar_stage(hx_grammar *g, const hx_gvocab *v, hx_sampler_stage *stage)
{
    gstage *s = hx_calloc(1, sizeof *s);
    if (!s || !v) { free(s); return HX_ERR_NOMEM; }
    s->m = hx_matcher_new(g, v);
    s->mask = hx_calloc(v->n_words, 4);
    if (!s->m || !s->mask) { st_free(s); return HX_ERR_NOMEM; }
    memset(stage, 0, sizeof *stage);
    stage->api_version = HX_SAMPLER_STAGE_API;
    stage->name = "grammar";
    stage->ctx = s;
    stage->apply = st_apply;
    stage->accept = st_accept;
    stage->forced = st_forced;
    stage->can_end = st_can_end;
    stage->free = st_free;
    return HX_OK;
}

/* ---- grammars ---- */
hx_grammar_params hx_grammar_default_params(void)
{
    hx_grammar_params p = {0};
    return p;
}

static hx_grammar *grammar_new(const hx_grammar_params *p)
{
    hx_grammar *g = hx_calloc(1, sizeof *g);
    if (!g) return NULL;
    if (hx_rx_init(&g->rx)) {
        hx_rx_free(&g->rx);
        free(g);
        return NULL;
    }
    g->rx.no_nul = p->generation != 0; /* before any string class (grammar.h) */
    g->quote = hx_rx_byte(&g->rx, '"');
    hx_rx_enc_any(&g->rx);
    return g;
}

void hx_grammar_free(hx_grammar *g)
{
    if (!g) return;
    hx_rx_free(&g->rx);
    free(g);
}

int hx_grammar_from_cjson(const cJSON *schema, const hx_grammar_params *p, hx_grammar **out, hx_err *err)
{
    hx_grammar_params d = hx_grammar_default_params();
    *out = NULL;
    if (!p) p = &d;
    hx_grammar *g = grammar_new(p);
    if (!g) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = hx_schema_compile_rx(&g->rx, schema, p, &g->root, err);
    if (rc) { hx_grammar_free(g); return rc; }
    *out = g;
    return HX_OK;
}

int hx_grammar_from_schema(const char *json, size_t len, const hx_grammar_params *p, hx_grammar **out, hx_err *err)
{
    *out = NULL;
    cJSON *s = cJSON_ParseWithLength(json, len);
    if (!s) return hx_err_set(err, HX_ERR_FORMAT, "schema is not valid JSON");
    int rc = hx_grammar_from_cjson(s, p, out, err);
    cJSON_Delete(s);
    return rc;
}

/* {"name": "NAME", "arguments"|"parameters": ARGS} for one tool. */
static int tool_branch(hx_grammar *g, const hx_tool_spec *t, const hx_grammar_params *p, uint32_t ws,
                       uint32_t *out, hx_err *err)
{
    hx_rx *rx = &g->rx;
    uint32_t args;
    const char *sj = t->schema_json ? t->schema_json : "{\"type\":\"object\"}";
    const char *key = p->call_style == HX_CALLS_LLAMA ? "\"parameters\"" : "\"arguments\"";
    cJSON *s = cJSON_Parse(sj);
    if (!s) return hx_err_set(err, HX_ERR_FORMAT, "tool %s: schema is not valid JSON", t->name);
    int rc = hx_schema_compile_rx(rx, s, p, &args, err);
    cJSON_Delete(s);
    if (rc) {
        hx_err e = *err;
        return hx_err_set(err, rc, "tool %s: %s", t->name, e.msg);
    }
    uint32_t colon = hx_rx_cat3(rx, ws, hx_rx_lit(rx, ":", 1), ws), comma = hx_rx_cat3(rx, ws, hx_rx_lit(rx, ",", 1), ws);
    uint32_t name = hx_rx_cat3(rx, hx_rx_lit(rx, "\"", 1), hx_rx_enc_string(rx, t->name, strlen(t->name)), hx_rx_lit(rx, "\"", 1));
    uint32_t body = hx_rx_cat3(rx, hx_rx_lit(rx, "\"name\"", 6), colon, name);
    body = hx_rx_cat3(rx, body, comma, hx_rx_cat3(rx, hx_rx_lit(rx, key, strlen(key)), colon, args));
    *out = hx_rx_cat3(rx, hx_rx_lit(rx, "{", 1), hx_rx_cat3(rx, ws, body, ws), hx_rx_lit(rx, "}", 1));
    return HX_OK;
}

/* Any byte string that does not contain the literal r. */
static uint32_t without_lit(hx_rx *rx, uint32_t r)
{
    uint32_t all = hx_rx_not(rx, RX_NONE);
    return hx_rx_and(rx, all, hx_rx_not(rx, hx_rx_cat3(rx, all, r, all)));
}

/* Tagged (Qwen, Hermes): (<tool_call> ws CALL ws </tool_call> ws){1,max};
 * free text is anything without "<tool_call>". */
static void tagged_root(hx_grammar *g, uint32_t calls, uint32_t ws, int mode,
                        const hx_grammar_params *p)
{
    hx_rx *rx = &g->rx;
    const int max = p->max_calls;
    uint32_t open = hx_rx_lit(rx, OPEN_TAG, strlen(OPEN_TAG)), close = hx_rx_lit(rx, CLOSE_TAG, strlen(CLOSE_TAG));
    uint32_t after = p->line_turn ? RX_NIL : ws;
    uint32_t call = hx_rx_cat3(rx, open, hx_rx_cat3(rx, ws, calls, ws), hx_rx_cat(rx, close, after));
    uint32_t seq = hx_rx_rep(rx, call, 1, max > 0 ? (uint32_t)max : RX_INF);
    if (p->line_turn) seq = hx_rx_cat(rx, seq, hx_rx_opt(rx, hx_rx_lit(rx, "\n", 1)));
    uint32_t text = without_lit(rx, open);
    if (mode == HX_TOOLS_REQUIRED) g->root = seq;
    else if (mode == HX_TOOLS_LAZY) g->root = hx_rx_cat(rx, text, hx_rx_opt(rx, seq));
    else g->root = hx_rx_or(rx, text, seq);
}

/* Llama 3.1: ws CALL ws, or <|python_tag|> ws CALL ws; free text neither
 * starts with ws "{" nor holds "<|python_tag|>" (lazy: the tag may
 * follow text). */
static void llama_root(hx_grammar *g, uint32_t calls, uint32_t ws, int mode)
{
    hx_rx *rx = &g->rx;
    uint32_t all = hx_rx_not(rx, RX_NONE), py = hx_rx_lit(rx, PY_TAG, strlen(PY_TAG));
    uint32_t call = hx_rx_cat3(rx, ws, calls, ws), tagged = hx_rx_cat(rx, py, call);
    uint32_t text = hx_rx_and(rx, without_lit(rx, py), hx_rx_not(rx, hx_rx_cat3(rx, ws, hx_rx_lit(rx, "{", 1), all)));
    if (mode == HX_TOOLS_REQUIRED) g->root = hx_rx_or(rx, call, tagged);
    else if (mode == HX_TOOLS_LAZY) g->root = hx_rx_or(rx, call, hx_rx_cat(rx, text, hx_rx_opt(rx, tagged)));
    else g->root = hx_rx_orv(rx, (uint32_t[]){text, call, tagged}, 3);
}

int hx_grammar_tool_calls(const hx_tool_spec *tools, int n_tools, int mode, const hx_grammar_params *p,
                          hx_grammar **out, hx_err *err)
{
    hx_grammar_params d = hx_grammar_default_params();
    *out = NULL;
    if (!p) p = &d;
    if (n_tools <= 0 || !tools) return hx_err_set(err, HX_ERR_INVALID, "tool-call grammar needs at least one tool");
    if (p->call_style != HX_CALLS_TAGGED && p->call_style != HX_CALLS_LLAMA)
        return hx_err_set(err, HX_ERR_INVALID, "unknown tool-call style %d", p->call_style);
    hx_grammar *g = grammar_new(p);
    if (!g) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_rx *rx = &g->rx;
    uint32_t ws = hx_json_ws(rx, p);
    uint32_t calls = RX_NONE;
    for (int i = 0; i < n_tools; i++) {
        uint32_t b = RX_NONE; /* set by tool_branch; gcc (aarch64) cannot tell */
        int rc = tool_branch(g, &tools[i], p, ws, &b, err);
        if (rc) { hx_grammar_free(g); return rc; }
        calls = hx_rx_or(rx, calls, b);
    }
    if (p->call_style == HX_CALLS_LLAMA) llama_root(g, calls, ws, mode);
    else tagged_root(g, calls, ws, mode, p);
    if (rx->failed) { hx_grammar_free(g); return hx_err_set(err, HX_ERR_RANGE, "tool-call grammar too large"); }
    g->lazy = mode == HX_TOOLS_LAZY;
    *out = g;
    return HX_OK;
}
