/* vocab_train.c: byte-level BPE training: chunks counted in a hash table,
 * pair counts updated incrementally per merge (only words holding the pair
 * are touched), a lazy max-heap of pairs, and the GGUF vocabulary writer. */
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/engine_ext.h"
#include "modelfile/vocab_train.h"

const char *const hx_bpe_specials[HX_BPE_N_SPECIALS] = {
    "<|endoftext|>", HX_TOOL_CALL_OPEN, HX_TOOL_CALL_CLOSE, "<tool_response>",
    "</tool_response>", "<|im_start|>", "<|im_end|>", "<tools>", "</tools>",
};

/* Growable array of word indices (where a pair occurs, maybe stale). */
typedef struct ivec {
    int32_t *v;
    uint32_t n, cap;
} ivec;

typedef struct heap_ent {
    int64_t count;
    int32_t pair;
} heap_ent;

struct hx_bpe {
    hx_bpe_params p;
    /* chunk counting: open addressing over (off, len) in blob */
    hx_buf blob;
    uint64_t *ch_off;
    uint32_t *ch_len;
    int64_t *ch_count;
    uint32_t n_ch, cap_ch;
    uint32_t *ch_slots; /* index + 1; 0 empty */
    uint32_t ch_mask;
    pcre2_code *re;
    pcre2_code *re_initial; /* split_initial: a chunk's leading
                               non-letter before a letter */
    pcre2_match_data *md;
    hx_buf rx;          /* the regex subject of one fragment */
    uint64_t bytes, chunks;
    /* words: the unique chunks as token ids */
    int32_t *ids;
    uint32_t *w_stamp;  /* word w is chunk w: its ids at ids + ch_off[w],
                         * ch_len[w] of them (shrinking as merges apply) */
    /* tokens: bytes of each, and a map bytes -> id */
    hx_buf tok_bytes;
    uint64_t *tok_off;
    uint32_t *tok_len;
    int32_t n_tok;
    uint32_t *tok_slots;
    uint32_t tok_mask;
    /* merges (left, right) in order */
    int32_t *m_a, *m_b;
    int32_t n_merges;
    /* pairs */
    uint32_t *pa, *pb;
    int64_t *pcnt;
    ivec *where;
    uint32_t *ptouch;
    uint32_t n_pair, cap_pair;
    uint32_t *p_slots;
    uint32_t p_mask;
    heap_ent *heap;
    size_t n_heap, cap_heap;
    int trained;
    double seconds;
    uint64_t tokens;
};

hx_bpe_params hx_bpe_default_params(void)
{
    hx_bpe_params p = {4096, 2, 0, 0};
    return p;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint64_t bytes_hash(const char *p, size_t n)
{
    return mix64(hx_fnv1a(HX_FNV1A_BASIS, p, n));
}

/* ---- creation ---- */

int hx_bpe_new(const hx_bpe_params *p, hx_bpe **out, hx_err *err)
{
    hx_bpe_params d = hx_bpe_default_params();
    if (!p) p = &d;
    *out = NULL;
    if (p->vocab_size < 256 + HX_BPE_N_SPECIALS || p->vocab_size > (1 << 24))
        return hx_err_set(err, HX_ERR_RANGE, "vocabulary size %d out of range "
                          "(%d to %d)", p->vocab_size, 256 + HX_BPE_N_SPECIALS, 1 << 24);
    hx_bpe *b = hx_calloc(1, sizeof *b);
    if (!b) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    b->p = *p;
    if (b->p.min_count < 1) b->p.min_count = 1;
    hx_buf_init(&b->blob);
    hx_buf_init(&b->rx);
    hx_buf_init(&b->tok_bytes);
    int ec;
    PCRE2_SIZE eo;
    b->re = pcre2_compile((PCRE2_SPTR)hx_vocab_bpe_regex(HX_PRE_QWEN2),
                          PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (b->re) pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE);
    b->md = b->re ? pcre2_match_data_create(1, NULL) : NULL;
    if (b->p.split_initial) {
        b->re_initial = pcre2_compile((PCRE2_SPTR) "^[^\\r\\n\\p{L}\\p{N}](?=\\p{L})",
                                      PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    }
    b->ch_slots = hx_calloc(1u << 16, sizeof *b->ch_slots);
    b->ch_mask = (1u << 16) - 1;
    if (!b->re || !b->md || !b->ch_slots || (b->p.split_initial && !b->re_initial)) {
        hx_bpe_free(b);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    *out = b;
    return HX_OK;
}

void hx_bpe_free(hx_bpe *b)
{
    if (!b) return;
    hx_buf_free(&b->blob);
    hx_buf_free(&b->rx);
    hx_buf_free(&b->tok_bytes);
    free(b->ch_off);
    free(b->ch_len);
    free(b->ch_count);
    free(b->ch_slots);
    pcre2_match_data_free(b->md);
    pcre2_code_free(b->re);
    pcre2_code_free(b->re_initial);
    free(b->ids);
    free(b->w_stamp);
    free(b->tok_off);
    free(b->tok_len);
    free(b->tok_slots);
    free(b->m_a);
    free(b->m_b);
    for (uint32_t i = 0; b->where && i < b->n_pair; i++) free(b->where[i].v);
    free(b->where);
    free(b->pa);
    free(b->pb);
    free(b->pcnt);
    free(b->ptouch);
    free(b->p_slots);
    free(b->heap);
    free(b);
}

/* Grows *p (elements of size sz) to at least n, doubling; 0 or -1. */
static int grow(void *pp, uint32_t *cap, uint32_t n, size_t sz)
{
    if (n <= *cap) return 0;
    uint32_t c = *cap ? *cap : 1024;
    while (c < n) c *= 2;
    void *q = hx_realloc(*(void **)pp, (size_t)c * sz);
    if (!q) return -1;
    *(void **)pp = q;
    return 0;
}

/* ---- counting chunks ---- */

static int ch_rehash(hx_bpe *b)
{
    uint32_t n = (b->ch_mask + 1) * 2;
    uint32_t *s = hx_calloc(n, sizeof *s);
    if (!s) return -1;
    for (uint32_t i = 0; i < b->n_ch; i++) {
        uint32_t h = (uint32_t)bytes_hash(b->blob.data + b->ch_off[i], b->ch_len[i]) & (n - 1);
        while (s[h]) h = (h + 1) & (n - 1);
        s[h] = i + 1;
    }
    free(b->ch_slots);
    b->ch_slots = s;
    b->ch_mask = n - 1;
    return 0;
}

static int ch_new(hx_bpe *b, const char *p, size_t n, uint32_t slot)
{
    uint32_t c = b->cap_ch, i = b->n_ch;
    if (n > UINT32_MAX || grow(&b->ch_off, &c, i + 1, sizeof *b->ch_off)) return -1;
    c = b->cap_ch;
    if (grow(&b->ch_len, &c, i + 1, sizeof *b->ch_len)) return -1;
    c = b->cap_ch;
    if (grow(&b->ch_count, &c, i + 1, sizeof *b->ch_count)) return -1;
    b->cap_ch = c;
    b->ch_off[i] = b->blob.len;
    b->ch_len[i] = (uint32_t)n;
    b->ch_count[i] = 1;
    if (hx_buf_append(&b->blob, p, n)) return -1;
    b->ch_slots[slot] = ++b->n_ch;
    return (b->n_ch * 2 > b->ch_mask) ? ch_rehash(b) : 0;
}

static int add_chunk(hx_bpe *b, const char *p, size_t n)
{
    b->chunks++;
    uint32_t h = (uint32_t)bytes_hash(p, n) & b->ch_mask;
    for (uint32_t s; (s = b->ch_slots[h]); h = (h + 1) & b->ch_mask) {
        uint32_t i = s - 1;
        if (b->ch_len[i] == n && !memcmp(b->blob.data + b->ch_off[i], p, n)) {
            b->ch_count[i]++;
            return 0;
        }
    }
    return ch_new(b, p, n, h);
}

/* A pre-tokenizer chunk; with split_initial, a leading space or
 * punctuation mark before letters is a chunk of its own, so no merge joins
 * it to the word. */
static int add_word(hx_bpe *b, const char *p, size_t n)
{
    if (!b->re_initial) return add_chunk(b, p, n);
    int r = pcre2_match(b->re_initial, (PCRE2_SPTR)p, n, 0, PCRE2_NO_UTF_CHECK, b->md, NULL);
    if (r < 0) return add_chunk(b, p, n);
    size_t k = pcre2_get_ovector_pointer(b->md)[1];
    return add_chunk(b, p, k) || add_chunk(b, p + k, n - k);
}

/* The regex subject: code points decoded as the tokenizer does (invalid
 * bytes U+FFFD), surrogates as U+FFFD. */
static int make_subject(hx_bpe *b, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    b->rx.len = 0;
    if (hx_buf_reserve(&b->rx, len * 3 + 1)) return -1;
    size_t off = 0;
    while (off < len) {
        uint32_t c = hx_vocab_cpt_decode(s, len, &off);
        if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
        b->rx.len += (size_t)hx_vocab_cpt_encode(c, b->rx.data + b->rx.len);
    }
    return 0;
}

/* Splits one fragment (no special tokens in it) into chunks, as
 * vocab_bpe.c's split_and_merge does: skipped text is a chunk too. */
static int add_fragment(hx_bpe *b, const char *text, size_t len)
{
    if (!len) return 0;
    if (make_subject(b, text, len)) return -1;
    const char *rx = b->rx.data;
    size_t n = b->rx.len, pos = 0;
    b->bytes += len;
    while (pos < n) {
        size_t s = n, e = n;
        int r = pcre2_match(b->re, (PCRE2_SPTR)rx, n, pos, PCRE2_NO_UTF_CHECK, b->md, NULL);
        if (r == PCRE2_ERROR_JIT_STACKLIMIT)
            r = pcre2_match(b->re, (PCRE2_SPTR)rx, n, pos,
                            PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, b->md, NULL);
        if (r >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(b->md);
            s = ov[0];
            e = ov[1] > ov[0] ? ov[1] : n;
        }
        if (s > pos && add_chunk(b, rx + pos, s - pos)) return -1;
        if (e > s && add_word(b, rx + s, e - s)) return -1;
        pos = e;
    }
    return 0;
}

/* The special token whose text starts at p (at most n bytes), or -1. */
static int special_at(const char *p, size_t n)
{
    for (int i = 0; i < HX_BPE_N_SPECIALS; i++) {
        size_t l = strlen(hx_bpe_specials[i]);
        if (l <= n && !memcmp(p, hx_bpe_specials[i], l)) return i;
    }
    return -1;
}

int hx_bpe_add_text(hx_bpe *b, const char *text, size_t len, hx_err *err)
{
    if (b->trained)
        return hx_err_set(err, HX_ERR_STATE, "bpe: text added after training");
    size_t start = 0, i = 0;
    while (i < len) {
        const char *lt = memchr(text + i, '<', len - i);
        if (!lt) break;
        i = (size_t)(lt - text);
        int sp = special_at(lt, len - i);
        if (sp < 0) {
            i++;
            continue;
        }
        if (add_fragment(b, text + start, i - start)) goto oom;
        i += strlen(hx_bpe_specials[sp]);
        start = i;
    }
    if (add_fragment(b, text + start, len - start)) goto oom;
    return HX_OK;
oom:
    return hx_err_set(err, HX_ERR_NOMEM, "bpe: out of memory counting chunks");
}

/* ---- tokens ---- */

static int32_t tok_find(const hx_bpe *b, const char *p, size_t n, uint32_t *slot)
{
    uint32_t h = (uint32_t)bytes_hash(p, n) & b->tok_mask;
    for (uint32_t s; (s = b->tok_slots[h]); h = (h + 1) & b->tok_mask) {
        int32_t i = (int32_t)s - 1;
        if (b->tok_len[i] == n && !memcmp(b->tok_bytes.data + b->tok_off[i], p, n))
            return i;
    }
    *slot = h;
    return -1;
}

/* The token with bytes p (new if needed; room for vocab_size reserved). */
static int32_t tok_get(hx_bpe *b, const char *p, size_t n)
{
    uint32_t slot = 0;
    int32_t id = tok_find(b, p, n, &slot);
    if (id >= 0) return id;
    id = b->n_tok++;
    b->tok_off[id] = b->tok_bytes.len;
    b->tok_len[id] = (uint32_t)n;
    b->tok_slots[slot] = (uint32_t)id + 1;
    return hx_buf_append(&b->tok_bytes, p, n) ? -1 : id;
}

static int init_tokens(hx_bpe *b)
{
    size_t n = (size_t)b->p.vocab_size, slots = 1;
    while (slots < n * 4) slots *= 2;
    b->tok_off = hx_calloc(n, sizeof *b->tok_off);
    b->tok_len = hx_calloc(n, sizeof *b->tok_len);
    b->tok_slots = hx_calloc(slots, sizeof *b->tok_slots);
    b->m_a = hx_calloc(n, sizeof *b->m_a);
    b->m_b = hx_calloc(n, sizeof *b->m_b);
    if (!b->tok_off || !b->tok_len || !b->tok_slots || !b->m_a || !b->m_b) return -1;
    b->tok_mask = (uint32_t)slots - 1;
    for (int c = 0; c < 256; c++) {
        char ch = (char)c;
        if (tok_get(b, &ch, 1) != c) return -1;
    }
    return 0;
}

/* ---- pairs ---- */

static uint32_t pair_slot(const hx_bpe *b, uint32_t x, uint32_t y)
{
    uint32_t h = (uint32_t)mix64((uint64_t)x << 32 | y) & b->p_mask;
    for (uint32_t s; (s = b->p_slots[h]); h = (h + 1) & b->p_mask)
        if (b->pa[s - 1] == x && b->pb[s - 1] == y) return h;
    return h;
}

static int pair_rehash(hx_bpe *b)
{
    uint32_t n = b->p_mask ? (b->p_mask + 1) * 2 : 1u << 16;
    uint32_t *s = hx_calloc(n, sizeof *s);
    if (!s) return -1;
    free(b->p_slots);
    b->p_slots = s;
    b->p_mask = n - 1;
    for (uint32_t i = 0; i < b->n_pair; i++) s[pair_slot(b, b->pa[i], b->pb[i])] = i + 1;
    return 0;
}

static int pair_grow(hx_bpe *b, uint32_t n)
{
    uint32_t c = b->cap_pair;
    if (n <= c) return 0;
    int bad = 0;
    c = b->cap_pair, bad |= grow(&b->pa, &c, n, sizeof *b->pa);
    c = b->cap_pair, bad |= grow(&b->pb, &c, n, sizeof *b->pb);
    c = b->cap_pair, bad |= grow(&b->pcnt, &c, n, sizeof *b->pcnt);
    c = b->cap_pair, bad |= grow(&b->ptouch, &c, n, sizeof *b->ptouch);
    c = b->cap_pair, bad |= grow(&b->where, &c, n, sizeof *b->where);
    if (bad) return -1;
    b->cap_pair = c;
    return 0;
}

/* Index of pair (x, y), created with count 0 if new; -1 on OOM. */
static int32_t pair_get(hx_bpe *b, uint32_t x, uint32_t y)
{
    if ((b->n_pair + 1) * 2 > b->p_mask && pair_rehash(b)) return -1;
    uint32_t h = pair_slot(b, x, y);
    if (b->p_slots[h]) return (int32_t)b->p_slots[h] - 1;
    uint32_t i = b->n_pair;
    if (pair_grow(b, i + 1)) return -1;
    b->pa[i] = x;
    b->pb[i] = y;
    b->pcnt[i] = 0;
    b->ptouch[i] = 0;
    b->where[i] = (ivec){NULL, 0, 0};
    b->p_slots[h] = ++b->n_pair;
    return (int32_t)i;
}

static int where_add(ivec *v, int32_t w)
{
    if (v->n && v->v[v->n - 1] == w) return 0;
    if (grow(&v->v, &v->cap, v->n + 1, sizeof *v->v)) return -1;
    v->v[v->n++] = w;
    return 0;
}

/* ---- the heap: the largest count first, then the lowest pair index ---- */

static int ent_above(heap_ent x, heap_ent y)
{
    return x.count > y.count || (x.count == y.count && x.pair < y.pair);
}

static int heap_push(hx_bpe *b, int64_t count, int32_t pair)
{
    if (b->n_heap == b->cap_heap) {
        size_t c = b->cap_heap ? b->cap_heap * 2 : 4096;
        heap_ent *h = hx_realloc(b->heap, c * sizeof *h);
        if (!h) return -1;
        b->heap = h;
        b->cap_heap = c;
    }
    size_t i = b->n_heap++;
    heap_ent e = {count, pair};
    while (i && ent_above(e, b->heap[(i - 1) / 2])) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i] = e;
    return 0;
}

static heap_ent heap_pop(hx_bpe *b)
{
    heap_ent top = b->heap[0], e = b->heap[--b->n_heap];
    size_t i = 0, n = b->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ent_above(b->heap[c + 1], b->heap[c])) c++;
        if (!ent_above(b->heap[c], e)) break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (n) b->heap[i] = e;
    return top;
}

/* The most frequent pair with its current count (stale entries are
 * re-queued with their real count); -1 if none. */
static int32_t best_pair(hx_bpe *b, int64_t *count)
{
    while (b->n_heap) {
        heap_ent e = heap_pop(b);
        int64_t c = b->pcnt[e.pair];
        if (c == e.count) return *count = c, e.pair;
        if (c > 0 && heap_push(b, c, e.pair)) return -2;
    }
    return -1;
}

/* ---- words ---- */

static int init_words(hx_bpe *b)
{
    uint32_t n = b->n_ch;
    b->ids = hx_malloc_array(b->blob.len ? b->blob.len : 1, sizeof *b->ids);
    b->w_stamp = hx_calloc(n ? n : 1, sizeof *b->w_stamp);
    if (!b->ids || !b->w_stamp) return -1;
    for (size_t i = 0; i < b->blob.len; i++) b->ids[i] = (unsigned char)b->blob.data[i];
    free(b->ch_slots); /* counting is over */
    b->ch_slots = NULL;
    if (pair_rehash(b)) return -1;
    for (uint32_t w = 0; w < n; w++) {
        const int32_t *id = b->ids + b->ch_off[w];
        for (uint32_t k = 0; k + 1 < b->ch_len[w]; k++) {
            int32_t p = pair_get(b, (uint32_t)id[k], (uint32_t)id[k + 1]);
            if (p < 0 || where_add(&b->where[p], (int32_t)w)) return -1;
            b->pcnt[p] += b->ch_count[w];
        }
    }
    for (uint32_t p = 0; p < b->n_pair; p++)
        if (heap_push(b, b->pcnt[p], (int32_t)p)) return -1;
    return 0;
}

/* Takes the word's pairs out of the counts. */
static void word_pairs_sub(hx_bpe *b, uint32_t w)
{
    const int32_t *id = b->ids + b->ch_off[w];
    for (uint32_t k = 0; k + 1 < b->ch_len[w]; k++) {
        uint32_t h = pair_slot(b, (uint32_t)id[k], (uint32_t)id[k + 1]);
        HX_CHECK(b->p_slots[h]);
        b->pcnt[b->p_slots[h] - 1] -= b->ch_count[w];
    }
}

/* Adds the word's pairs back; those with token t are new: the word joins
 * their where lists and they are marked for the heap. */
static int word_pairs_add(hx_bpe *b, uint32_t w, int32_t t, uint32_t stamp,
                          ivec *touched)
{
    const int32_t *id = b->ids + b->ch_off[w];
    for (uint32_t k = 0; k + 1 < b->ch_len[w]; k++) {
        int32_t p = pair_get(b, (uint32_t)id[k], (uint32_t)id[k + 1]);
        if (p < 0) return -1;
        b->pcnt[p] += b->ch_count[w];
        if (id[k] != t && id[k + 1] != t) continue;
        if (where_add(&b->where[p], (int32_t)w)) return -1;
        if (b->ptouch[p] != stamp) {
            b->ptouch[p] = stamp;
            if (where_add(touched, p)) return -1;
        }
    }
    return 0;
}

/* Replaces (x, y) by t in word w, left to right; 0 if it had none. */
static int word_merge(hx_bpe *b, uint32_t w, int32_t x, int32_t y, int32_t t)
{
    int32_t *id = b->ids + b->ch_off[w];
    uint32_t n = b->ch_len[w], k = 0;
    while (k + 1 < n && !(id[k] == x && id[k + 1] == y)) k++;
    if (k + 1 >= n) return 0;
    word_pairs_sub(b, w);
    uint32_t j = k;
    while (k < n) {
        if (k + 1 < n && id[k] == x && id[k + 1] == y) id[j++] = t, k += 2;
        else id[j++] = id[k++];
    }
    b->ch_len[w] = j;
    return 1;
}

/* Applies merge number m (pair p -> token t) to every word holding p. */
static int apply_merge(hx_bpe *b, int32_t p, int32_t t, uint32_t stamp, ivec *touched)
{
    ivec wl = b->where[p];
    int32_t x = (int32_t)b->pa[p], y = (int32_t)b->pb[p];
    touched->n = 0;
    for (uint32_t i = 0; i < wl.n; i++) {
        uint32_t w = (uint32_t)wl.v[i];
        if (b->w_stamp[w] == stamp) continue;
        b->w_stamp[w] = stamp;
        if (word_merge(b, w, x, y, t) && word_pairs_add(b, w, t, stamp, touched))
            return -1;
    }
    free(b->where[p].v);
    b->where[p] = (ivec){NULL, 0, 0};
    for (uint32_t i = 0; i < touched->n; i++) {
        int32_t q = touched->v[i];
        if (b->pcnt[q] > 0 && heap_push(b, b->pcnt[q], q)) return -1;
    }
    return 0;
}

/* The token of merging pair p (existing bytes are reused). */
static int32_t merged_token(hx_bpe *b, int32_t p)
{
    uint32_t x = b->pa[p], y = b->pb[p];
    size_t nx = b->tok_len[x], ny = b->tok_len[y];
    char stack[256];
    char *buf = nx + ny <= sizeof stack ? stack : hx_malloc(nx + ny);
    if (!buf) return -1;
    memcpy(buf, b->tok_bytes.data + b->tok_off[x], nx);
    memcpy(buf + nx, b->tok_bytes.data + b->tok_off[y], ny);
    int32_t t = tok_get(b, buf, nx + ny);
    if (buf != stack) free(buf);
    return t;
}

static int merge_loop(hx_bpe *b)
{
    const int32_t target = b->p.vocab_size - HX_BPE_N_SPECIALS;
    hx_progress pr;
    hx_progress_start(&pr, "bpe merges", (double)(target - 256));
    pr.tty = pr.tty && b->p.progress;
    ivec touched = {NULL, 0, 0};
    int rc = 0;
    while (!rc && b->n_tok < target && b->n_merges < b->p.vocab_size) {
        int64_t count = 0;
        int32_t p = best_pair(b, &count);
        if (p == -2) rc = -1;
        if (p < 0 || count < b->p.min_count) break;
        int32_t t = merged_token(b, p);
        if (t < 0) rc = -1;
        else {
            b->m_a[b->n_merges] = (int32_t)b->pa[p];
            b->m_b[b->n_merges] = (int32_t)b->pb[p];
            b->n_merges++;
            rc = apply_merge(b, p, t, (uint32_t)b->n_merges, &touched);
        }
        char extra[64];
        snprintf(extra, sizeof extra, "pair count %lld", (long long)count);
        hx_progress_update(&pr, (double)(b->n_tok - 256), extra);
    }
    hx_progress_finish(&pr);
    free(touched.v);
    return rc;
}

int hx_bpe_train(hx_bpe *b, hx_err *err)
{
    if (b->trained) return hx_err_set(err, HX_ERR_STATE, "bpe: already trained");
    b->trained = 1;
    double t0 = hx_time_mono();
    if (init_tokens(b) || init_words(b) || merge_loop(b))
        return hx_err_set(err, HX_ERR_NOMEM, "bpe: out of memory while training");
    for (uint32_t w = 0; w < b->n_ch; w++) b->tokens += (uint64_t)b->ch_count[w] * b->ch_len[w];
    b->seconds = hx_time_mono() - t0;
    return HX_OK;
}

void hx_bpe_get_stats(const hx_bpe *b, hx_bpe_stats *s)
{
    memset(s, 0, sizeof *s);
    s->bytes = b->bytes;
    s->chunks = b->chunks;
    s->unique_chunks = b->n_ch;
    s->n_merges = b->n_merges;
    s->n_tokens = b->trained ? b->n_tok + HX_BPE_N_SPECIALS : 0;
    s->tokens = b->tokens;
    s->train_seconds = b->seconds;
}

/* ---- the GGUF vocabulary ---- */

/* Token id's bytes in GPT-2's byte alphabet, appended to out. */
static void put_piece(const hx_bpe *b, int32_t id, hx_buf *out)
{
    const unsigned char *p = (const unsigned char *)b->tok_bytes.data + b->tok_off[id];
    for (uint32_t i = 0; i < b->tok_len[id]; i++) {
        char u[4];
        int n = hx_vocab_cpt_encode(hx_vocab_byte_to_cpt(p[i]), u);
        hx_buf_append(out, u, (size_t)n);
    }
}

/* Strings: the tokens (then specials), then the merges "A B", as offsets
 * into one buffer. */
static int build_strings(const hx_bpe *b, hx_buf *s, size_t *off, size_t *len)
{
    int32_t n_tok = b->n_tok + HX_BPE_N_SPECIALS, k = 0;
    for (int32_t i = 0; i < n_tok; i++, k++) {
        off[k] = s->len;
        if (i < b->n_tok) put_piece(b, i, s);
        else hx_buf_puts(s, hx_bpe_specials[i - b->n_tok]);
        len[k] = s->len - off[k];
    }
    for (int32_t m = 0; m < b->n_merges; m++, k++) {
        off[k] = s->len;
        put_piece(b, b->m_a[m], s);
        hx_buf_putc(s, ' ');
        put_piece(b, b->m_b[m], s);
        len[k] = s->len - off[k];
    }
    return s->oom ? -1 : 0;
}

static int write_keys(const hx_bpe *b, hx_gguf_writer *w, const char *const *str,
                      const size_t *len, int32_t *types)
{
    int32_t n_tok = b->n_tok + HX_BPE_N_SPECIALS;
    uint32_t eos = (uint32_t)b->n_tok;
    for (int32_t i = 0; i < n_tok; i++) types[i] = i < b->n_tok ? 1 : 3;
    int rc = hx_gguf_set_str(w, "general.name", "hearth-bpe");
    if (!rc) rc = hx_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!rc) rc = hx_gguf_set_str(w, "tokenizer.ggml.pre", "qwen2");
    if (!rc) rc = hx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", str, len, (uint64_t)n_tok);
    if (!rc) rc = hx_gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_I32, types, (uint64_t)n_tok);
    if (!rc) rc = hx_gguf_set_arr_str(w, "tokenizer.ggml.merges", str + n_tok, len + n_tok,
                                      (uint64_t)b->n_merges);
    if (!rc) rc = hx_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", eos);
    if (!rc) rc = hx_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", eos);
    if (!rc) rc = hx_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", eos);
    if (!rc) rc = hx_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 0);
    return rc;
}

int hx_bpe_write_gguf(const hx_bpe *b, const char *path, hx_err *err)
{
    if (!b->trained) return hx_err_set(err, HX_ERR_STATE, "bpe: not trained yet");
    size_t n = (size_t)b->n_tok + HX_BPE_N_SPECIALS + (size_t)b->n_merges;
    size_t *off = hx_calloc(n, sizeof *off), *len = hx_calloc(n, sizeof *len);
    const char **str = hx_calloc(n, sizeof *str);
    int32_t *types = hx_calloc(n, sizeof *types);
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_buf s;
    hx_buf_init(&s);
    int rc = HX_ERR_NOMEM;
    if (off && len && str && types && w && !build_strings(b, &s, off, len)) {
        for (size_t i = 0; i < n; i++) str[i] = s.data + off[i];
        rc = write_keys(b, w, str, len, types);
    }
    if (rc) rc = hx_err_set(err, rc, "bpe: cannot build the vocabulary: %s", hx_rc_str(rc));
    else rc = hx_gguf_writer_write(w, path, err);
    hx_gguf_writer_free(w);
    hx_buf_free(&s);
    free(off);
    free(len);
    free(str);
    free(types);
    return rc;
}
