/* vocab_bpe.c: byte-level BPE (tokenizer.ggml.model = gpt2): the
 * pre-tokenizer regexes through PCRE2, GPT-2's byte alphabet, the merges. */
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/vocab_int.h"

/* ---- pre-tokenizer regexes ----
 * The adapted regexes llama.cpp runs (case-insensitive contractions spelled
 * out, so that PCRE2's Unicode case folding of 'ſ' or 'K' cannot differ).
 * \s is spelled as llama.cpp's whitespace set (Unicode White_Space), which
 * PCRE2's \s differs from (U+0085, U+180E). */
#define WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}" \
           "\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define PRE_REGEX(DIGITS)                                                   \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" DIGITS "| ?[^" WS        \
    "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"

static const char k_re_qwen2[] = PRE_REGEX("\\p{N}");
static const char k_re_llama3[] = PRE_REGEX("\\p{N}{1,3}");

const char *hx_vocab_bpe_regex(int pre_type)
{
    return pre_type == HX_PRE_QWEN2 ? k_re_qwen2 : k_re_llama3;
}

int hx_vocab_bpe_init(hx_vocab *v, hx_err *err)
{
    const char *pat = hx_vocab_bpe_regex(v->pre_type);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return hx_err_set(err, HX_ERR_INTERNAL,
                          "vocab: pre-tokenizer regex: %s at %zu", (char *)msg,
                          (size_t)eo);
    }
    /* JIT where the library has it; the interpreter otherwise */
    v->re_jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    v->re = re;
    return HX_OK;
}

void hx_vocab_bpe_free(hx_vocab *v)
{
    pcre2_code_free((pcre2_code *)v->re);
    v->re = NULL;
}

/* ---- GPT-2's byte <-> unicode alphabet ---- */

uint32_t hx_vocab_byte_to_cpt(unsigned char b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    if (b <= 32) return 256u + b;
    if (b <= 160) return 256u + 33 + (b - 127u);
    return 256u + 67; /* 173 */
}

static int cpt_to_byte(uint32_t c)
{
    if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))
        return (int)c;
    if (c >= 256 && c <= 288) return (int)(c - 256);
    if (c >= 289 && c <= 322) return (int)(c - 289 + 127);
    if (c == 323) return 173;
    return -1;
}

int hx_vocab_bpe_decode(const char *text, size_t len, hx_buf *out)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t off = 0;
    while (off < len) {
        uint32_t c = hx_vocab_cpt_decode(s, len, &off);
        int b = cpt_to_byte(c);
        if (b >= 0) {
            hx_buf_putc(out, (char)b);
            continue;
        }
        /* as llama.cpp's llama_decode_text renders an unknown character */
        char u[4];
        int n = hx_vocab_cpt_encode(c, u);
        hx_buf_puts(out, "[UNK_BYTE_0x");
        for (int i = 0; i < n; i++) hx_buf_printf(out, "%02x", (unsigned char)u[i]);
        hx_buf_append(out, text, len);
        hx_buf_putc(out, ']');
    }
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}

/* ---- per-call scratch ---- */

typedef struct bpe_work {
    uint32_t *cpts;  /* code points of the fragment */
    char *rx;        /* the UTF-8 the regex runs on */
    size_t rx_len;
    int32_t *b2c;    /* byte offset in rx -> code point index */
    size_t n_cpts;
    hx_buf word;     /* one word in the byte alphabet */
    vsym *sym;
    size_t sym_cap;
    vheap heap;
    pcre2_match_data *md;
} bpe_work;

static void work_free(bpe_work *w)
{
    free(w->cpts);
    free(w->rx);
    free(w->b2c);
    hx_buf_free(&w->word);
    free(w->sym);
    hx_vheap_free(&w->heap);
    pcre2_match_data_free(w->md);
}

/* Decodes the fragment as llama.cpp does (invalid bytes -> U+FFFD) and
 * builds the regex subject, where surrogates (which llama.cpp lets through
 * but PCRE2 refuses) stand as U+FFFD, of the same classes for the regex. */
static int work_decode(bpe_work *w, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    w->cpts = hx_malloc_array(len + 1, sizeof *w->cpts);
    w->rx = hx_malloc_array(len + 1, 3);
    w->b2c = hx_malloc_array(len * 3 + 1, sizeof *w->b2c);
    if (!w->cpts || !w->rx || !w->b2c) return HX_ERR_NOMEM;
    size_t off = 0;
    while (off < len) {
        uint32_t c = hx_vocab_cpt_decode(s, len, &off);
        uint32_t rc = c >= 0xd800 && c <= 0xdfff ? 0xfffd : c;
        w->b2c[w->rx_len] = (int32_t)w->n_cpts;
        w->rx_len += (size_t)hx_vocab_cpt_encode(rc, w->rx + w->rx_len);
        w->cpts[w->n_cpts++] = c;
    }
    w->b2c[w->rx_len] = (int32_t)w->n_cpts;
    return HX_OK;
}

/* ---- the merge loop over one word ---- */

/* Byte-level BPE merges by the merge list's rank (the first wins). */
static int bpe_prio(const hx_vocab *v, const char *text, vsym L, vsym R,
                    double *prio)
{
    int32_t rank = hx_vocab_merge_rank(v, text + L.off, L.n, text + R.off, R.n);
    if (rank < 0) return 0;
    *prio = (double)rank;
    return 1;
}

/* Emits the word's symbols; one not in the vocabulary goes byte by byte,
 * each byte that is a token on its own (llama.cpp's fallback). */
static int emit_word(const hx_vocab *v, bpe_work *w, size_t n_sym, tokvec *t)
{
    const char *b = w->word.data;
    for (size_t i = 0; i < n_sym; i++) {
        vsym s = w->sym[i];
        if (!s.n) continue;
        int32_t id = hx_vocab_find(v, b + s.off, s.n);
        if (id >= 0) {
            if (hx_tokvec_push(t, id)) return HX_ERR_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < s.n; k++) {
            int32_t bid = hx_vocab_find(v, b + s.off + k, 1);
            if (bid >= 0 && hx_tokvec_push(t, bid)) return HX_ERR_NOMEM;
        }
    }
    return HX_OK;
}

/* The word (code points [c0, c1)) in the byte alphabet, one symbol per
 * raw byte. Returns the number of symbols, or -1 when out of memory. */
static long encode_word(bpe_work *w, size_t c0, size_t c1)
{
    w->word.len = 0;
    size_t n_sym = 0;
    for (size_t i = c0; i < c1; i++) {
        char u[4];
        int n = hx_vocab_cpt_encode(w->cpts[i], u);
        if (w->sym_cap < n_sym + 4) {
            size_t cap = (n_sym + 4) * 2;
            vsym *p = hx_realloc(w->sym, cap * sizeof *p);
            if (!p) return -1;
            w->sym = p;
            w->sym_cap = cap;
        }
        for (int k = 0; k < n; k++) {
            char e[4];
            int m = hx_vocab_cpt_encode(hx_vocab_byte_to_cpt((unsigned char)u[k]), e);
            w->sym[n_sym] = (vsym){(int32_t)n_sym - 1, (int32_t)n_sym + 1,
                                   (uint32_t)w->word.len, (uint32_t)m};
            hx_buf_append(&w->word, e, (size_t)m);
            n_sym++;
        }
    }
    if (n_sym) w->sym[n_sym - 1].next = -1;
    return w->word.oom ? -1 : (long)n_sym;
}

static int bpe_word(const hx_vocab *v, bpe_work *w, size_t c0, size_t c1,
                    tokvec *t)
{
    long n_sym = encode_word(w, c0, c1);
    if (n_sym < 0) return HX_ERR_NOMEM;
    if (n_sym == 0) return HX_OK;
    if (v->ignore_merges) { /* Llama 3: a whole word in the vocab is taken */
        int32_t id = hx_vocab_find(v, w->word.data, w->word.len);
        if (id >= 0) return hx_tokvec_push(t, id);
    }
    int rc = hx_vocab_merge(v, w->word.data, w->sym, (size_t)n_sym, &w->heap,
                            bpe_prio);
    return rc ? rc : emit_word(v, w, (size_t)n_sym, t);
}

/* Next regex match at or after byte pos: [*s, *e) in bytes; 0 if none. */
static int next_match(const hx_vocab *v, bpe_work *w, size_t pos, size_t *s,
                      size_t *e)
{
    const pcre2_code *re = v->re;
    int r = pcre2_match(re, (PCRE2_SPTR)w->rx, w->rx_len, pos,
                        PCRE2_NO_UTF_CHECK, w->md, NULL);
    if (r == PCRE2_ERROR_JIT_STACKLIMIT) /* retry in the interpreter */
        r = pcre2_match(re, (PCRE2_SPTR)w->rx, w->rx_len, pos,
                        PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, w->md, NULL);
    if (r < 0) return 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
    *s = ov[0];
    *e = ov[1];
    return *e > *s; /* the patterns never match empty; stop if they did */
}

static int split_and_merge(const hx_vocab *v, bpe_work *w, tokvec *t)
{
    size_t pos = 0, s, e;
    int rc = HX_OK;
    while (!rc && pos < w->rx_len) {
        if (!next_match(v, w, pos, &s, &e)) s = e = w->rx_len;
        if (s > pos) /* text the regex skipped is a word of its own */
            rc = bpe_word(v, w, (size_t)w->b2c[pos], (size_t)w->b2c[s], t);
        if (!rc && e > s)
            rc = bpe_word(v, w, (size_t)w->b2c[s], (size_t)w->b2c[e], t);
        pos = e;
    }
    return rc;
}

int hx_vocab_bpe_tokenize(const hx_vocab *v, const char *text, size_t len,
                          tokvec *t)
{
    bpe_work w;
    memset(&w, 0, sizeof w);
    hx_buf_init(&w.word);
    int rc = work_decode(&w, text, len);
    if (!rc) {
        w.md = pcre2_match_data_create(1, NULL);
        rc = w.md ? split_and_merge(v, &w, t) : HX_ERR_NOMEM;
    }
    work_free(&w);
    return rc;
}
