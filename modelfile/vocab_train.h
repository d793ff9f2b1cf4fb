/* vocab_train.h: a byte-level BPE trainer (minbpe's RegexTokenizer with the
 * Qwen2 pre-tokenizer) writing a GGUF vocabulary that hx_vocab_load and
 * llama.cpp load and tokenize alike. Part of modelfile.h. */
#ifndef HX_VOCAB_TRAIN_H
#define HX_VOCAB_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* The special tokens every trained vocabulary gets, as single CONTROL
 * tokens with ids after the merges, in this order; the first
 * (<|endoftext|>) is EOS, BOS and padding. */
#define HX_BPE_N_SPECIALS 9
extern const char *const hx_bpe_specials[HX_BPE_N_SPECIALS];

typedef struct hx_bpe_params {
    int32_t vocab_size; /* all tokens: 256 bytes, merges, the specials;
                         * default 4096 (at least 256 + HX_BPE_N_SPECIALS) */
    int64_t min_count;  /* stop merging when the best pair occurs fewer
                         * times (the vocabulary is then smaller); default 2 */
    int progress;       /* 1: merges done and ETA on stderr if a terminal */
    int split_initial;  /* 1: a word's leading space or punctuation
                         * (" Lunch", "\"Lunch") never merges with it, so
                         * a word is the same tokens after a space, a quote
                         * or nothing: a model copies it token for token
                         * from a request into a JSON string; default 0 */
} hx_bpe_params;
hx_bpe_params hx_bpe_default_params(void);

typedef struct hx_bpe hx_bpe;

/* A trainer with no text yet. *out is the caller's; free with hx_bpe_free. */
int hx_bpe_new(const hx_bpe_params *p, hx_bpe **out, hx_err *err);
void hx_bpe_free(hx_bpe *b); /* NULL is a no-op */

/* Adds one document: the special tokens' texts in it cut it (they are never
 * learned as merges), then the Qwen2 pre-tokenizer cuts the pieces into
 * chunks, which are counted (merges never cross a chunk). Any bytes are
 * accepted (invalid UTF-8 counts as U+FFFD, as the tokenizer reads it).
 * Not after hx_bpe_train. */
int hx_bpe_add_text(hx_bpe *b, const char *text, size_t len, hx_err *err);

/* Learns merges over the unique chunks weighted by their counts, most
 * frequent pair first (ties: the pair seen first), with incremental pair
 * counts, until vocab_size tokens or no pair reaches min_count. A merge
 * whose bytes are already a token reuses it, as Hugging Face's trainer
 * does. Once only. */
int hx_bpe_train(hx_bpe *b, hx_err *err);

/* Writes the vocabulary (tokenizer.ggml.model gpt2, pre qwen2, tokens,
 * token_type, merges, bos/eos/padding ids, add_bos_token false) as a GGUF
 * with no tensors. After hx_bpe_train. */
int hx_bpe_write_gguf(const hx_bpe *b, const char *path, hx_err *err);

typedef struct hx_bpe_stats {
    uint64_t bytes;         /* text added (special tokens excluded) */
    uint64_t chunks;        /* pre-tokenized chunks */
    uint64_t unique_chunks;
    int32_t n_merges;
    int32_t n_tokens;       /* vocabulary size with the specials */
    uint64_t tokens;        /* tokens the added text encodes to (after
                             * training; specials not counted) */
    double train_seconds;   /* hx_bpe_train's time */
} hx_bpe_stats;
void hx_bpe_get_stats(const hx_bpe *b, hx_bpe_stats *s);

#endif /* HX_VOCAB_TRAIN_H */
