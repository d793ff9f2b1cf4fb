/* gvcache.c: grammar vocabularies from the engine's tokenizers, and their
 * on-disk cache (token tries and tables, keyed by a hash of the tokens). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/grammar/gint.h"
#include "engine/vocab.h"

/* The file: a header, then the sections in order, each padded to 8
 * bytes; the header's sum covers everything after it. Bump the version
 * when gnode, the tables or their meaning change. */
#define GV_MAGIC 0x56475848u /* "HXGV" */
#define GV_VERSION 1u
#define GV_MAX_FILE ((size_t)1 << 30)
#define NO_TOK UINT32_MAX
#define MAX_LEVELS 256 /* a token holds at most 255 bytes */

typedef struct gv_header {
    uint32_t magic, version, node_size, n_tokens;
    uint64_t key;  /* hash of the tokens (lens, flags, bytes) */
    uint64_t sum;  /* hash of the sections */
    uint64_t text_len;
    uint32_t n_words, max_cp, n_all, n_rest;
    int32_t mark_tok[N_MARKS];
    uint32_t pad;
} gv_header;

/* ---- a fast 64-bit hash (not cryptographic: it names and checks the
 * cache; the tokens themselves are compared byte for byte on load) ---- */
static uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w * 0x9e3779b97f4a7c15ull;
    h = (h << 29 | h >> 35) * 0xbf58476d1ce4e5b9ull;
    return h;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t w;
    for (; n >= 8; n -= 8, b += 8) {
        memcpy(&w, b, 8);
        h = mix(h, w);
    }
    w = 0;
    memcpy(&w, b, n);
    return mix(h, w ^ (uint64_t)n << 56);
}

/* ---- the tokenizer's pieces and flags ---- */
typedef struct gv_src {
    int32_t n;
    const char **p;
    size_t *l;
    uint8_t *f;
} gv_src;

static void src_free(gv_src *s)
{
    free(s->p);
    free(s->l);
    free(s->f);
}

static int src_gather(const hx_vocab *hv, gv_src *s, hx_err *err)
{
    s->n = hx_vocab_n_tokens(hv);
    s->p = hx_calloc((size_t)s->n + 1, sizeof *s->p);
    s->l = hx_calloc((size_t)s->n + 1, sizeof *s->l);
    s->f = hx_calloc((size_t)s->n + 1, 1);
    if (!s->p || !s->l || !s->f) {
        src_free(s);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < s->n; i++) {
        s->p[i] = hx_vocab_piece(hv, i, &s->l[i]);
        if (!s->p[i]) { s->p[i] = ""; s->l[i] = 0; }
        s->f[i] = (uint8_t)((hx_vocab_is_special(hv, i) ? HX_GTOK_SPECIAL : 0) |
                            (hx_vocab_is_eog(hv, i) ? HX_GTOK_EOG : 0));
    }
    return HX_OK;
}

static uint64_t src_key(const gv_src *s)
{
    uint64_t h = mix(GV_VERSION, (uint64_t)s->n);
    for (int32_t i = 0; i < s->n; i++) {
        h = mix(h, (uint64_t)s->l[i] << 8 | s->f[i]);
        h = hash_bytes(h, s->p[i], s->l[i]);
    }
    return h;
}

int hx_gvocab_from_vocab(const hx_vocab *hv, hx_gvocab **out, hx_err *err)
{
    gv_src s;
    *out = NULL;
    int rc = src_gather(hv, &s, err);
    if (rc) return rc;
    rc = hx_gvocab_new(s.n, s.p, s.l, s.f, out, err);
    src_free(&s);
    return rc;
}

/* ---- writing ---- */
static void put(hx_buf *b, const void *p, size_t n)
{
    static const char zero[8];
    hx_buf_append(b, p, n);
    if (n % 8) hx_buf_append(b, zero, 8 - n % 8);
}

static size_t cum_words(const hx_gvocab *v)
{
    return (size_t)(v->max_cp + 1) * v->n_words;
}

/* The sections, in file order: pointer and byte size. */
static void sections(const hx_gvocab *v, size_t text_len, const void **p, size_t *n)
{
    size_t nt = (size_t)v->n_tokens;
    p[0] = v->len, n[0] = nt * 4;
    p[1] = v->flags, n[1] = nt;
    p[2] = v->dup_next, n[2] = nt * 4;
    p[3] = v->text, n[3] = text_len;
    p[4] = v->all.nd, n[4] = (size_t)v->all.n * sizeof(gnode);
    p[5] = v->rest.nd, n[5] = (size_t)v->rest.n * sizeof(gnode);
    p[6] = v->cum, n[6] = cum_words(v) * 4;
}
#define N_SECTIONS 7

static size_t text_bytes(const hx_gvocab *v)
{
    size_t t = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) t += v->len[i] + 1;
    return t;
}

static void cache_write(const hx_gvocab *v, uint64_t key, const char *path)
{
    const void *p[N_SECTIONS];
    size_t n[N_SECTIONS], tl = text_bytes(v);
    hx_buf b;
    hx_err err = {0};
    gv_header h = {GV_MAGIC, GV_VERSION, (uint32_t)sizeof(gnode), (uint32_t)v->n_tokens, key, 0, tl,
                   v->n_words, v->max_cp, v->all.n, v->rest.n, {0}, 0};
    memcpy(h.mark_tok, v->mark_tok, sizeof h.mark_tok);
    hx_buf_init(&b);
    put(&b, &h, sizeof h);
    sections(v, tl, p, n);
    for (int i = 0; i < N_SECTIONS; i++) put(&b, p[i], n[i]);
    if (!b.oom) {
        h.sum = hash_bytes(1, b.data + sizeof h, b.len - sizeof h);
        memcpy(b.data, &h, sizeof h);
        if (hx_write_file_atomic(path, b.data, b.len, &err))
            hx_log_debug("grammar: vocabulary cache not written: %s", err.msg);
    }
    hx_buf_free(&b);
}

int hx_gvcache_reseal(char *data, size_t len)
{
    gv_header h;
    if (len < sizeof h) return -1;
    memcpy(&h, data, sizeof h);
    h.sum = hash_bytes(1, data + sizeof h, len - sizeof h);
    memcpy(data, &h, sizeof h);
    return 0;
}

/* ---- loading: every check fails quietly (the caller rebuilds) ---- */
/* A DFS-ordered trie whose sizes, levels and parents agree (the walks in
 * mask.c index their state by level and skip subtrees by size). */
static int trie_ok(const gnode *nd, uint32_t n, int32_t n_tokens)
{
    uint32_t stk[MAX_LEVELS], depth = 0;
    for (uint32_t i = 0; i < n; i++) {
        const gnode *d = &nd[i];
        while (depth && stk[depth - 1] + nd[stk[depth - 1]].size <= i) depth--;
        uint32_t up = depth ? stk[depth - 1] : NO_TOK;
        if ((d->tok != NO_TOK && d->tok >= (uint32_t)n_tokens) || d->size == 0 ||
            d->size > n - i || d->level != depth + 1 || d->parent != up ||
            (depth && d->size > up + nd[up].size - i) || depth + 1 >= MAX_LEVELS)
            return 0;
        stk[depth++] = i;
    }
    return 1;
}

static int tables_ok(const hx_gvocab *v, const gv_src *s)
{
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (v->len[i] != s->l[i] || v->flags[i] != s->f[i] ||
            memcmp(v->piece[i], s->p[i], s->l[i]) || v->piece[i][s->l[i]] ||
            (v->dup_next[i] != NO_TOK && /* chains go up: no cycle */
             (v->dup_next[i] >= (uint32_t)v->n_tokens || v->dup_next[i] <= (uint32_t)i)))
            return 0;
    }
    for (int k = 0; k < N_MARKS; k++)
        if (v->mark_tok[k] < -1 || v->mark_tok[k] >= v->n_tokens) return 0;
    return trie_ok(v->all.nd, v->all.n, v->n_tokens) && trie_ok(v->rest.nd, v->rest.n, v->n_tokens);
}

static int header_ok(const gv_header *h, const gv_src *s, uint64_t key, size_t len)
{
    if (h->magic != GV_MAGIC || h->version != GV_VERSION || h->node_size != sizeof(gnode) ||
        h->n_tokens != (uint32_t)s->n || h->key != key || h->max_cp > 255 ||
        h->n_words != ((uint32_t)s->n + 31) / 32 || h->text_len > len)
        return 0;
    size_t need = sizeof *h, nt = (size_t)s->n, sz[N_SECTIONS] = {
        nt * 4, nt, nt * 4, h->text_len, (size_t)h->n_all * sizeof(gnode),
        (size_t)h->n_rest * sizeof(gnode), (size_t)(h->max_cp + 1) * h->n_words * 4};
    if (h->n_all > 256 * nt || h->n_rest > h->n_all) return 0;
    for (int i = 0; i < N_SECTIONS; i++) need += (sz[i] + 7) / 8 * 8;
    return need == len;
}

/* Points v's tables into the mapped file data. */
static int take_sections(hx_gvocab *v, const gv_header *h, char *data)
{
    size_t nt = (size_t)v->n_tokens;
    void **dst[N_SECTIONS] = {(void **)&v->len, (void **)&v->flags, (void **)&v->dup_next,
                              (void **)&v->text, (void **)&v->all.nd, (void **)&v->rest.nd,
                              (void **)&v->cum};
    const void *p[N_SECTIONS];
    size_t n[N_SECTIONS], off = sizeof *h;
    sections(v, h->text_len, p, n);
    for (int i = 0; i < N_SECTIONS; i++) {
        *dst[i] = data + off;
        off += (n[i] + 7) / 8 * 8;
    }
    if (!(v->piece = hx_malloc((nt ? nt : 1) * sizeof *v->piece))) return -1;
    size_t t = 0;
    for (size_t i = 0; i < nt; i++) {
        if (t + v->len[i] + 1 > h->text_len) return -1;
        v->piece[i] = v->text + t;
        t += v->len[i] + 1;
    }
    return t == h->text_len ? 0 : -1;
}

void hx_gvocab_unmap(hx_gvocab *v)
{
    if (v->map) munmap(v->map, v->map_len);
    v->map = NULL;
}

/* Maps the file read-only; NULL (and *len 0) if it cannot. */
static char *map_file(const char *path, size_t *len)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *p = NULL;
    *len = 0;
    if (fd < 0) return NULL;
    if (!fstat(fd, &st) && st.st_size > 0 && (size_t)st.st_size <= GV_MAX_FILE) {
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) p = NULL;
        else *len = (size_t)st.st_size;
    }
    close(fd);
    return p;
}

static hx_gvocab *cache_load(const char *path, const gv_src *s, uint64_t key)
{
    size_t len = 0;
    char *data = map_file(path, &len);
    if (!data) return NULL;
    gv_header h;
    hx_gvocab *v = NULL;
    if (len < sizeof h) goto bad;
    memcpy(&h, data, sizeof h);
    if (!header_ok(&h, s, key, len) || hash_bytes(1, data + sizeof h, len - sizeof h) != h.sum)
        goto bad;
    if (!(v = hx_calloc(1, sizeof *v))) goto bad;
    v->map = data;
    v->map_len = len;
    v->n_tokens = s->n;
    v->n_words = h.n_words;
    v->max_cp = h.max_cp;
    v->all.n = h.n_all;
    v->rest.n = h.n_rest;
    memcpy(v->mark_tok, h.mark_tok, sizeof v->mark_tok);
    if (take_sections(v, &h, data) || !tables_ok(v, s)) goto bad;
    return v;
bad:
    hx_log_debug("grammar: vocabulary cache %s is stale or damaged; rebuilding", path);
    if (v) hx_gvocab_free(v); /* unmaps */
    else munmap(data, len);
    return NULL;
}

hx_gvocab *hx_gvcache_load(const hx_vocab *hv, const char *path)
{
    gv_src s;
    hx_err err = {0};
    if (src_gather(hv, &s, &err)) return NULL;
    hx_gvocab *v = cache_load(path, &s, src_key(&s));
    src_free(&s);
    return v;
}

int hx_gvocab_from_vocab_cached(const hx_vocab *hv, const char *dir, hx_gvocab **out,
                                int *from_cache, hx_err *err)
{
    char base[512], path[600];
    gv_src s;
    *out = NULL;
    if (from_cache) *from_cache = 0;
    if (!dir) dir = hx_path_cache(base, sizeof base) > 0 ? base : NULL;
    int rc = src_gather(hv, &s, err);
    if (rc) return rc;
    uint64_t key = src_key(&s);
    int named = dir && snprintf(path, sizeof path, "%s/gvocab-%016llx.bin", dir,
                                (unsigned long long)key) < (int)sizeof path;
    if (named && (*out = cache_load(path, &s, key))) {
        if (from_cache) *from_cache = 1;
        src_free(&s);
        return HX_OK;
    }
    rc = hx_gvocab_new(s.n, s.p, s.l, s.f, out, err);
    hx_err e = {0};
    if (!rc && named && hx_mkdirs(dir, &e) == HX_OK) cache_write(*out, key, path);
    src_free(&s);
    return rc;
}
