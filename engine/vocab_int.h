/* vocab_int.h: internal header of the tokenizers (vocab*.c): the hx_vocab
 * struct, its hash maps, UTF-8 helpers and the merge work queue. */
#ifndef HX_VOCAB_INT_H
#define HX_VOCAB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine_ext.h"


/* Open-addressing map from a string (or pair of strings) to an index;
 * slots hold index + 1, 0 is empty. Keys live in the owner's arrays. */
typedef struct vmap {
    uint32_t *slots;
    uint32_t mask;
} vmap;

/* A piece of text: offset and length into a blob. */
typedef struct vspan {
    uint32_t off;
    uint32_t len;
} vspan;

/* Growable token list used while tokenizing. */
typedef struct tokvec {
    int32_t *v;
    size_t n, cap;
    int oom;
} tokvec;

struct hx_vocab {
    int type;      /* HX_VOCAB_* */
    int pre_type;  /* HX_PRE_* for BPE */
    char pre[64];
    int32_t n_tokens;
    char *text;         /* every token's stored text, concatenated */
    vspan *texts;       /* (n_tokens) into text */
    char *piece;        /* every token's output bytes (special rendering) */
    vspan *pieces;      /* (n_tokens) into piece */
    float *scores;      /* (n_tokens) */
    uint16_t *attr;     /* (n_tokens) HX_TOKEN_* */
    uint8_t *eog;       /* (n_tokens) 1 if end of generation */
    vmap tok_map;       /* text -> id (the last id wins, as llama.cpp) */
    /* byte-level BPE merges: "a b" with rank = index (the first wins) */
    char *merge_text;
    vspan *merge_a, *merge_b;
    uint32_t n_merges;
    vmap merge_map;
    void *re;           /* pcre2_code *, pre-tokenizer regex */
    int re_jit;         /* JIT compiled */
    /* special/added tokens matched in text, longest first */
    int32_t *special;
    int32_t n_special;
    int32_t bos, eos, eot, eom, unk, pad, sep, mask;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int add_bos, add_eos, add_space_prefix, ignore_merges;
    int32_t byte_tok[256]; /* SPM byte fallback ids, -1 if none */
};

/* ---- hashing and maps (vocab.c) ---- */
int hx_vmap_init(vmap *m, size_t n_keys);
void hx_vmap_free(vmap *m);
/* Merge rank of the pair (a, b), or -1. */
int32_t hx_vocab_merge_rank(const hx_vocab *v, const char *a, size_t na,
                            const char *b, size_t nb);

/* ---- token lists ---- */
int hx_tokvec_push(tokvec *t, int32_t id);

/* ---- UTF-8 ---- */
/* Length of the UTF-8 sequence that byte c starts, from its high nibble
 * only, as llama.cpp's unicode_len_utf8 (continuation bytes give 1). */
int hx_vocab_utf8_len(unsigned char c);

/* ---- work queue of candidate merges: the lowest prio first, then the
 * leftmost (llama.cpp's llm_bigram comparators) ---- */
typedef struct vbigram {
    double prio;
    int32_t left, right;
    uint32_t size;
} vbigram;
typedef struct vheap {
    vbigram *a;
    size_t n, cap;
} vheap;
int hx_vheap_push(vheap *h, vbigram b);
vbigram hx_vheap_pop(vheap *h);
void hx_vheap_free(vheap *h);

/* Symbols of the merge loops: a doubly linked list over a byte string. */
typedef struct vsym {
    int32_t prev, next;
    uint32_t off, n;
} vsym;
/* The priority (lower merges first) of merging neighbours L and R over
 * text: 1 with *prio set if they merge, 0 if not. */
typedef int (*vmerge_prio)(const hx_vocab *v, const char *text, vsym L,
                           vsym R, double *prio);
/* The merge loop BPE and SPM share: merges the n_sym linked symbols over
 * text, the lowest priority first, then the leftmost, until no neighbours
 * merge. heap is the caller's scratch (emptied first, freed by the caller).
 * HX_OK or HX_ERR_NOMEM. */
int hx_vocab_merge(const hx_vocab *v, const char *text, vsym *sym, size_t n_sym,
                   vheap *heap, vmerge_prio prio);

/* ---- tokenizer halves ---- */
/* BPE: pre-tokenizer regex (vocab_bpe.c). */
int hx_vocab_bpe_init(hx_vocab *v, hx_err *err);
void hx_vocab_bpe_free(hx_vocab *v);
/* Tokenizes one raw-text fragment into t. HX_OK or HX_ERR_NOMEM. */
int hx_vocab_bpe_tokenize(const hx_vocab *v, const char *text, size_t len,
                          tokvec *t);
/* Decodes a byte-level BPE piece into raw bytes (appended to out). */
int hx_vocab_bpe_decode(const char *text, size_t len, hx_buf *out);
/* SPM (vocab_spm.c): text already has spaces as U+2581. */
int hx_vocab_spm_tokenize(const hx_vocab *v, const char *text, size_t len,
                          tokvec *t);

#endif /* HX_VOCAB_INT_H */
