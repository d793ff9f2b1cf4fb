/* vocab_text.c: text to tokens and back: the special-token partition,
 * tokenize dispatch, pieces, and the streaming UTF-8 detokenizer. */
#include <stdlib.h>
#include <string.h>

#include "engine/vocab_int.h"

/* ---- small shared helpers ---- */

int hx_tokvec_push(tokvec *t, int32_t id)
{
    if (t->oom) return HX_ERR_NOMEM;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        int32_t *p = hx_realloc(t->v, cap * sizeof *p);
        if (!p) {
            t->oom = 1;
            return HX_ERR_NOMEM;
        }
        t->v = p;
        t->cap = cap;
    }
    t->v[t->n++] = id;
    return HX_OK;
}

int hx_vocab_utf8_len(unsigned char c)
{
    static const int lens[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

static int is_cont(const unsigned char *s, size_t n, size_t i)
{
    return i < n && (s[i] & 0xc0) == 0x80;
}

uint32_t hx_vocab_cpt_decode(const unsigned char *s, size_t n, size_t *off)
{
    size_t o = *off;
    unsigned char c = s[o];
    uint32_t r;
    if (!(c & 0x80)) {
        *off = o + 1;
        return c;
    }
    if ((c & 0xe0) == 0xc0 && is_cont(s, n, o + 1)) {
        *off = o + 2;
        return ((uint32_t)(c & 0x1f) << 6) | (s[o + 1] & 0x3f);
    }
    if ((c & 0xf0) == 0xe0 && is_cont(s, n, o + 1) && is_cont(s, n, o + 2)) {
        *off = o + 3;
        return ((uint32_t)(c & 0x0f) << 12) | ((uint32_t)(s[o + 1] & 0x3f) << 6) |
               (s[o + 2] & 0x3f);
    }
    if ((c & 0xf8) == 0xf0 && is_cont(s, n, o + 1) && is_cont(s, n, o + 2) &&
        is_cont(s, n, o + 3)) {
        r = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[o + 1] & 0x3f) << 12) |
            ((uint32_t)(s[o + 2] & 0x3f) << 6) | (s[o + 3] & 0x3f);
        *off = o + 4;
        return r <= 0x10ffff ? r : 0xfffd; /* llama.cpp throws here */
    }
    *off = o + 1;
    return 0xfffd;
}

int hx_vocab_cpt_encode(uint32_t cpt, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cpt < 0x80) {
        o[0] = (unsigned char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        o[0] = (unsigned char)(0xc0 | (cpt >> 6));
        o[1] = (unsigned char)(0x80 | (cpt & 0x3f));
        return 2;
    }
    if (cpt < 0x10000) {
        o[0] = (unsigned char)(0xe0 | (cpt >> 12));
        o[1] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cpt & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | (cpt >> 18));
    o[1] = (unsigned char)(0x80 | ((cpt >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cpt & 0x3f));
    return 4;
}

/* ---- the merge work queue: a binary min-heap on (prio, left) ---- */

static int bg_less(const vbigram *a, const vbigram *b)
{
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

int hx_vheap_push(vheap *h, vbigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        vbigram *p = hx_realloc(h->a, cap * sizeof *p);
        if (!p) return HX_ERR_NOMEM;
        h->a = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && bg_less(&b, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = b;
    return HX_OK;
}

vbigram hx_vheap_pop(vheap *h)
{
    vbigram top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bg_less(&h->a[c + 1], &h->a[c])) c++;
        if (!bg_less(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

void hx_vheap_free(vheap *h)
{
    free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}

/* ---- the merge loop over linked symbols (BPE and SPM) ---- */

/* Queues the merge of symbols l and r if prio says they merge. */
static int queue_merge(const hx_vocab *v, const char *text, vsym *sym,
                       vheap *heap, vmerge_prio prio, int32_t l, int32_t r)
{
    double p;
    if (l < 0 || r < 0 || !prio(v, text, sym[l], sym[r], &p)) return HX_OK;
    vbigram g = {p, l, r, sym[l].n + sym[r].n};
    return hx_vheap_push(heap, g);
}

int hx_vocab_merge(const hx_vocab *v, const char *text, vsym *sym, size_t n_sym,
                   vheap *heap, vmerge_prio prio)
{
    int rc = HX_OK;
    heap->n = 0;
    for (size_t i = 1; !rc && i < n_sym; i++)
        rc = queue_merge(v, text, sym, heap, prio, (int32_t)i - 1, (int32_t)i);
    while (!rc && heap->n) {
        vbigram g = hx_vheap_pop(heap);
        vsym *L = &sym[g.left], *R = &sym[g.right];
        if (!L->n || !R->n || L->n + R->n != g.size) continue; /* stale */
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = g.left;
        rc = queue_merge(v, text, sym, heap, prio, L->prev, g.left);
        if (!rc) rc = queue_merge(v, text, sym, heap, prio, g.left, L->next);
    }
    return rc;
}

/* ---- special-token partition (llama.cpp's tokenizer_st_partition) ----
 * The text becomes a list of fragments, each raw text or one token. Each
 * special token, longest first, is searched in the raw fragments left. */
typedef struct frag {
    int32_t tok; /* -1: raw text [off, off + len) */
    size_t off, len;
} frag;

typedef struct fraglist {
    frag *f;
    size_t n, cap;
} fraglist;

static int frag_push(fraglist *l, frag f)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        frag *p = hx_realloc(l->f, cap * sizeof *p);
        if (!p) return HX_ERR_NOMEM;
        l->f = p;
        l->cap = cap;
    }
    l->f[l->n++] = f;
    return HX_OK;
}

/* Where special tokens may be recognised: everywhere (marks NULL), or
 * only inside the byte ranges marks[0..n), ascending. */
typedef struct where {
    const hx_span *marks;
    int n;
} where;

/* Whether [at, at + n) lies inside one of w's ranges. */
static int allowed_at(const where *w, size_t at, size_t n)
{
    if (!w->marks) return 1;
    int lo = 0, hi = w->n;
    while (lo < hi) { /* the first range ending after at */
        int mid = (lo + hi) / 2;
        if (w->marks[mid].end <= at) lo = mid + 1;
        else hi = mid;
    }
    return lo < w->n && w->marks[lo].start <= at && at + n <= w->marks[lo].end;
}

/* Splits raw fragment f at every occurrence of the token's text that w
 * allows into out; the others stay text. */
static int split_frag(const char *text, frag f, int32_t id, const char *s,
                      size_t n, const where *w, fraglist *out)
{
    size_t pos = f.off, from = f.off, end = f.off + f.len;
    while (from < end) {
        const char *m = n <= end - from ? memmem(text + from, end - from, s, n) : NULL;
        if (!m) break;
        size_t at = (size_t)(m - text);
        from = at + 1;
        if (!allowed_at(w, at, n)) continue;
        if (at > pos && frag_push(out, (frag){-1, pos, at - pos})) return HX_ERR_NOMEM;
        if (frag_push(out, (frag){id, 0, 0})) return HX_ERR_NOMEM;
        pos = from = at + n;
    }
    if (pos < end && frag_push(out, (frag){-1, pos, end - pos})) return HX_ERR_NOMEM;
    return HX_OK;
}

static int partition_one(const hx_vocab *v, const char *text, int32_t id,
                         const where *w, fraglist *l, fraglist *tmp)
{
    const char *s = v->text + v->texts[id].off;
    size_t n = v->texts[id].len;
    tmp->n = 0;
    for (size_t i = 0; i < l->n; i++) {
        int rc = l->f[i].tok >= 0 ? frag_push(tmp, l->f[i])
                                  : split_frag(text, l->f[i], id, s, n, w, tmp);
        if (rc) return rc;
    }
    fraglist t = *l;
    *l = *tmp;
    *tmp = t;
    return HX_OK;
}

static int partition(const hx_vocab *v, const char *text, size_t len,
                     int parse_special, const where *w, fraglist *l)
{
    fraglist tmp = {0};
    int rc = len ? frag_push(l, (frag){-1, 0, len}) : HX_OK;
    for (int32_t k = 0; !rc && k < v->n_special && len; k++) {
        int32_t id = v->special[k];
        if (!parse_special && (v->attr[id] & (HX_TOKEN_CONTROL | HX_TOKEN_UNKNOWN)))
            continue; /* user-defined tokens are always matched */
        rc = partition_one(v, text, id, w, l, &tmp);
    }
    free(tmp.f);
    return rc;
}

/* ---- tokenize ---- */

static int spm_fragment(const hx_vocab *v, const char *text, size_t len,
                        int prefix, tokvec *t)
{
    hx_buf b;
    hx_buf_init(&b);
    if (prefix) hx_buf_puts(&b, "\xe2\x96\x81");
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') hx_buf_puts(&b, "\xe2\x96\x81");
        else hx_buf_putc(&b, text[i]);
    }
    int rc = b.oom ? HX_ERR_NOMEM : hx_vocab_spm_tokenize(v, b.data, b.len, t);
    hx_buf_free(&b);
    return rc;
}

static int tokenize_spm(const hx_vocab *v, const char *text, const fraglist *l,
                        int add_special, tokvec *t)
{
    int prev_special = 1, rc = HX_OK;
    if (add_special && v->add_bos && v->bos >= 0) rc = hx_tokvec_push(t, v->bos);
    for (size_t i = 0; !rc && i < l->n; i++) {
        frag f = l->f[i];
        if (f.tok >= 0) {
            rc = hx_tokvec_push(t, f.tok);
            prev_special = 1;
            continue;
        }
        rc = spm_fragment(v, text + f.off, f.len,
                          v->add_space_prefix && prev_special, t);
        prev_special = 0;
    }
    if (!rc && add_special && v->add_eos && v->eos >= 0) rc = hx_tokvec_push(t, v->eos);
    return rc;
}

static int tokenize_bpe(const hx_vocab *v, const char *text, const fraglist *l,
                        int add_special, tokvec *t)
{
    int rc = HX_OK;
    if (add_special && v->add_bos && v->bos >= 0) rc = hx_tokvec_push(t, v->bos);
    for (size_t i = 0; !rc && i < l->n; i++) {
        frag f = l->f[i];
        rc = f.tok >= 0 ? hx_tokvec_push(t, f.tok)
                        : hx_vocab_bpe_tokenize(v, text + f.off, f.len, t);
    }
    if (!rc && add_special && v->add_eos && v->eos >= 0) rc = hx_tokvec_push(t, v->eos);
    return rc;
}

/* hx_tokenize and hx_tokenize_marked: special tokens where w allows. */
static int32_t tokenize_where(const hx_vocab *v, const char *text, size_t len,
                              int32_t *out, int32_t n_max, int add_bos,
                              int parse_special, const where *w)
{
    fraglist l = {0};
    tokvec t = {0};
    if (!v || (!text && len)) return 0;
    int rc = partition(v, text, len, parse_special, w, &l);
    if (!rc)
        rc = v->type == HX_VOCAB_SPM ? tokenize_spm(v, text, &l, add_bos, &t)
                                     : tokenize_bpe(v, text, &l, add_bos, &t);
    free(l.f);
    if (rc) { /* out of memory: report as "needs more" than possible */
        free(t.v);
        return INT32_MIN;
    }
    size_t n = t.n > INT32_MAX ? INT32_MAX : t.n;
    size_t n_copy = n < (size_t)(n_max > 0 ? n_max : 0) ? n : (size_t)(n_max > 0 ? n_max : 0);
    if (out && n_copy) memcpy(out, t.v, n_copy * sizeof *out);
    free(t.v);
    return n <= (size_t)(n_max > 0 ? n_max : 0) ? (int32_t)n : -(int32_t)n;
}

int32_t hx_tokenize(const hx_vocab *v, const char *text, size_t len,
                    int32_t *out, int32_t n_max, int add_bos,
                    int parse_special)
{
    const where anywhere = {NULL, 0};
    return tokenize_where(v, text, len, out, n_max, add_bos, parse_special, &anywhere);
}

int32_t hx_tokenize_marked(const hx_vocab *v, const char *text, size_t len,
                           const hx_span *marks, int n_marks, int32_t *out,
                           int32_t n_max, int add_bos)
{
    static const hx_span none[1];
    const where w = {marks ? marks : none, marks ? n_marks : 0};
    return tokenize_where(v, text, len, out, n_max, add_bos, 1, &w);
}

/* ---- tokens to text ---- */

int32_t hx_token_to_piece(const hx_vocab *v, int32_t id, char *buf,
                          int32_t n, int special)
{
    size_t len;
    const char *p = hx_vocab_piece(v, id, &len);
    if (!p || (!special && hx_vocab_is_special(v, id))) return 0;
    if (len > (size_t)(n > 0 ? n : 0)) return -(int32_t)len;
    memcpy(buf, p, len);
    return (int32_t)len;
}

int hx_detokenize(const hx_vocab *v, const int32_t *ids, int32_t n,
                  int special, hx_buf *out)
{
    for (int32_t i = 0; i < n; i++) {
        size_t len;
        const char *p = hx_vocab_piece(v, ids[i], &len);
        if (!p || (!special && hx_vocab_is_special(v, ids[i]))) continue;
        hx_buf_append(out, p, len);
    }
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}

/* ---- streaming UTF-8 ---- */

/* Strict UTF-8 at s[0..n): > 0 the length of a complete valid sequence,
 * 0 a valid but incomplete prefix, < 0 minus the length of the maximal
 * invalid subpart to replace by one U+FFFD. */
static int utf8_check(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    int need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) need = 2;
    else if (c >= 0xe0 && c <= 0xef) need = 3;
    else if (c >= 0xf0 && c <= 0xf4) need = 4;
    else return -1;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n) return 0;
        unsigned char b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b & 0xc0) != 0x80) return -i;
    }
    return need;
}

static const char k_fffd[] = "\xef\xbf\xbd";

void hx_detok_init(hx_detok *d)
{
    memset(d, 0, sizeof *d);
}

/* Resolves what can be resolved in the pending bytes. */
static void drain_pending(hx_detok *d, hx_buf *out)
{
    while (d->n_pending > 0) {
        int r = utf8_check(d->pending, (size_t)d->n_pending);
        if (r == 0) return;
        int k = r > 0 ? r : -r;
        if (r > 0) hx_buf_append(out, d->pending, (size_t)k);
        else hx_buf_append(out, k_fffd, 3);
        memmove(d->pending, d->pending + k, (size_t)(d->n_pending - k));
        d->n_pending -= k;
    }
}

int hx_detok_push_bytes(hx_detok *d, const char *p, size_t n, hx_buf *out)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (d->n_pending > 0 && i < n) {
        d->pending[d->n_pending++] = s[i++];
        drain_pending(d, out);
    }
    size_t run = i; /* start of the valid run not yet appended */
    while (i < n) {
        int r = utf8_check(s + i, n - i);
        if (r > 0) {
            i += (size_t)r;
            continue;
        }
        hx_buf_append(out, s + run, i - run);
        if (r == 0) { /* incomplete tail: at most 3 bytes */
            memcpy(d->pending, s + i, n - i);
            d->n_pending = (int)(n - i);
            return out->oom ? HX_ERR_NOMEM : HX_OK;
        }
        hx_buf_append(out, k_fffd, 3);
        i += (size_t)-r;
        run = i;
    }
    hx_buf_append(out, s + run, i - run);
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}

int hx_detok_push(hx_detok *d, const hx_vocab *v, int32_t id, int special,
                  hx_buf *out)
{
    size_t len;
    const char *p = hx_vocab_piece(v, id, &len);
    if (!p || (!special && hx_vocab_is_special(v, id))) return HX_OK;
    return hx_detok_push_bytes(d, p, len, out);
}

int hx_detok_flush(hx_detok *d, hx_buf *out)
{
    if (d->n_pending > 0) hx_buf_append(out, k_fffd, 3);
    d->n_pending = 0;
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}
