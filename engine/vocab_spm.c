/* vocab_spm.c: SentencePiece-style tokenization (tokenizer.ggml.model =
 * llama): merges of adjacent pieces by score, byte fallback <0xXX>. */
#include <stdlib.h>
#include <string.h>

#include "engine/vocab_int.h"

typedef struct spm_work {
    const char *text;
    vsym *sym;
    vheap heap;
} spm_work;

/* Queues the merge of symbols l and r if their concatenation is a token,
 * with the token's score (higher first, then leftmost). */
static int try_bigram(const hx_vocab *v, spm_work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return HX_OK;
    vsym L = w->sym[l], R = w->sym[r];
    int32_t id = hx_vocab_find(v, w->text + L.off, L.n + R.n);
    if (id < 0) return HX_OK;
    vbigram g = {-(double)v->scores[id], l, r, L.n + R.n};
    return vheap_push(&w->heap, g);
}

static int spm_merge(const hx_vocab *v, spm_work *w, size_t n_sym)
{
    int rc = HX_OK;
    for (size_t i = 1; !rc && i < n_sym; i++)
        rc = try_bigram(v, w, (int32_t)i - 1, (int32_t)i);
    while (!rc && w->heap.n) {
        vbigram g = vheap_pop(&w->heap);
        vsym *L = &w->sym[g.left], *R = &w->sym[g.right];
        if (!L->n || !R->n || L->n + R->n != g.size) continue; /* stale */
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) w->sym[R->next].prev = g.left;
        rc = try_bigram(v, w, L->prev, g.left);
        if (!rc) rc = try_bigram(v, w, g.left, L->next);
    }
    return rc;
}

/* A final symbol: its token, or its bytes as byte tokens. (Merged symbols
 * are always tokens, so llama.cpp's re-segmentation never applies.) */
static int spm_emit(const hx_vocab *v, const char *s, uint32_t n, tokvec *t)
{
    int32_t id = hx_vocab_find(v, s, n);
    if (id >= 0) return tokvec_push(t, id);
    for (uint32_t k = 0; k < n; k++) {
        int32_t b = v->byte_tok[(unsigned char)s[k]];
        if (b < 0) b = v->unk;
        if (b >= 0 && tokvec_push(t, b)) return HX_ERR_NOMEM;
    }
    return HX_OK;
}

int vocab_spm_tokenize(const hx_vocab *v, const char *text, size_t len,
                       tokvec *t)
{
    spm_work w = {text, NULL, {0}};
    if (!len) return HX_OK;
    w.sym = hx_malloc_array(len, sizeof *w.sym);
    if (!w.sym) return HX_ERR_NOMEM;
    size_t n_sym = 0, off = 0;
    while (off < len) { /* one symbol per UTF-8 character (lax lengths) */
        size_t n = (size_t)vocab_utf8_len((unsigned char)text[off]);
        if (n > len - off) n = len - off;
        w.sym[n_sym] = (vsym){(int32_t)n_sym - 1, (int32_t)n_sym + 1,
                              (uint32_t)off, (uint32_t)n};
        off += n;
        n_sym++;
    }
    w.sym[n_sym - 1].next = -1;
    int rc = spm_merge(v, &w, n_sym);
    for (int32_t i = 0; !rc && i != -1; i = w.sym[i].next)
        rc = spm_emit(v, text + w.sym[i].off, w.sym[i].n, t);
    free(w.sym);
    vheap_free(&w.heap);
    return rc;
}
