/* vocab_spm.c: SentencePiece-style tokenization (tokenizer.ggml.model =
 * llama): merges of adjacent pieces by score, byte fallback <0xXX>. */
#include <stdlib.h>
#include <string.h>

#include "engine/vocab_int.h"

/* SPM merges neighbours whose concatenation is a token, by the token's
 * score (higher first). */
static int spm_prio(const hx_vocab *v, const char *text, vsym L, vsym R,
                    double *prio)
{
    int32_t id = hx_vocab_find(v, text + L.off, L.n + R.n);
    if (id < 0) return 0;
    *prio = -(double)v->scores[id];
    return 1;
}

/* A final symbol: its token, or its bytes as byte tokens. (Merged symbols
 * are always tokens, so llama.cpp's re-segmentation never applies.) */
static int spm_emit(const hx_vocab *v, const char *s, uint32_t n, tokvec *t)
{
    int32_t id = hx_vocab_find(v, s, n);
    if (id >= 0) return hx_tokvec_push(t, id);
    for (uint32_t k = 0; k < n; k++) {
        int32_t b = v->byte_tok[(unsigned char)s[k]];
        if (b < 0) b = v->unk;
        if (b >= 0 && hx_tokvec_push(t, b)) return HX_ERR_NOMEM;
    }
    return HX_OK;
}

int hx_vocab_spm_tokenize(const hx_vocab *v, const char *text, size_t len,
                          tokvec *t)
{
    vheap heap = {0};
    if (!len) return HX_OK;
    vsym *sym = hx_malloc_array(len, sizeof *sym);
    if (!sym) return HX_ERR_NOMEM;
    size_t n_sym = 0, off = 0;
    while (off < len) { /* one symbol per UTF-8 character (lax lengths) */
        size_t n = (size_t)hx_vocab_utf8_len((unsigned char)text[off]);
        if (n > len - off) n = len - off;
        sym[n_sym] = (vsym){(int32_t)n_sym - 1, (int32_t)n_sym + 1,
                            (uint32_t)off, (uint32_t)n};
        off += n;
        n_sym++;
    }
    sym[n_sym - 1].next = -1;
    int rc = hx_vocab_merge(v, text, sym, n_sym, &heap, spm_prio);
    for (int32_t i = 0; !rc && i != -1; i = sym[i].next)
        rc = spm_emit(v, text + sym[i].off, sym[i].n, t);
    free(sym);
    hx_vheap_free(&heap);
    return rc;
}
