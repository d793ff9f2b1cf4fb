/* vocab.h: tokenizers driven by GGUF metadata, as llama.cpp tokenizes:
 * byte-level BPE (Qwen2/Qwen3, Llama 3) and SentencePiece-style (Llama 2),
 * special/added tokens, detokenization and streaming UTF-8 output. */
#ifndef HX_VOCAB_H
#define HX_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/gguf.h"

/* Token attributes: bit flags, numbered as llama.cpp's llama_token_attr. */
enum {
    HX_TOKEN_UNDEFINED = 0,
    HX_TOKEN_UNKNOWN = 1 << 0,
    HX_TOKEN_UNUSED = 1 << 1,
    HX_TOKEN_NORMAL = 1 << 2,
    HX_TOKEN_CONTROL = 1 << 3,
    HX_TOKEN_USER_DEFINED = 1 << 4,
    HX_TOKEN_BYTE = 1 << 5,
};

/* Tokenizer kinds (tokenizer.ggml.model). */
enum {
    HX_VOCAB_SPM = 1, /* "llama": SentencePiece scores, byte fallback */
    HX_VOCAB_BPE = 2, /* "gpt2": byte-level BPE with merges */
};

typedef struct hx_vocab hx_vocab;

/* Builds the tokenizer from the tokenizer.ggml.* metadata of g (model, pre,
 * tokens, token_type, scores, merges, special token ids, add_bos_token,
 * add_space_prefix). Copies everything it needs: g may be closed afterwards.
 * Unsupported models or pre-tokenizers get HX_ERR_UNSUPPORTED, missing or
 * inconsistent arrays HX_ERR_FORMAT, each with a message in err. On success
 * *out is owned by the caller; free with hx_vocab_free. The vocab is
 * immutable after loading: every function below may be called from several
 * threads at once. */
int hx_vocab_load(const hx_gguf *g, hx_vocab **out, hx_err *err);
void hx_vocab_free(hx_vocab *v); /* NULL is a no-op */

int hx_vocab_type(const hx_vocab *v);       /* HX_VOCAB_SPM or HX_VOCAB_BPE */
const char *hx_vocab_pre(const hx_vocab *v); /* "qwen2", "llama-bpe", "" (SPM) */
int32_t hx_vocab_n_tokens(const hx_vocab *v);
/* The piece as stored in the file (byte-level BPE pieces are in GPT-2's
 * byte-to-unicode alphabet; SPM pieces use U+2581 for spaces). Points into
 * v; NULL for an id out of range. */
const char *hx_vocab_text(const hx_vocab *v, int32_t id, size_t *len);
/* HX_TOKEN_* flags of a token (after llama.cpp's fix-ups: EOG and FIM
 * tokens are CONTROL); HX_TOKEN_UNDEFINED for an id out of range. */
int hx_vocab_attr(const hx_vocab *v, int32_t id);
float hx_vocab_score(const hx_vocab *v, int32_t id);
/* Special token ids, -1 if the model has none. */
int32_t hx_vocab_bos(const hx_vocab *v);
int32_t hx_vocab_eos(const hx_vocab *v);
int32_t hx_vocab_eot(const hx_vocab *v);
int32_t hx_vocab_pad(const hx_vocab *v);
int32_t hx_vocab_unk(const hx_vocab *v);
/* End of generation: eos, eot, eom and the tokens llama.cpp treats as such
 * by their text (<|im_end|>, <|endoftext|>, <|eot_id|>, FIM pad/sep...). */
int hx_vocab_is_eog(const hx_vocab *v, int32_t id);
/* Control or unknown token: produces text only when asked (special). */
int hx_vocab_is_special(const hx_vocab *v, int32_t id);
/* Whether the model wants BOS (and EOS) added around a prompt. */
int hx_vocab_add_bos(const hx_vocab *v);
int hx_vocab_add_eos(const hx_vocab *v);
/* Exact stored piece -> id, or -1. */
int32_t hx_vocab_find(const hx_vocab *v, const char *text, size_t len);

/* Tokenizes len bytes of text into out (n_max entries). add_bos: add the
 * model's special tokens as llama.cpp's add_special does (BOS if
 * hx_vocab_add_bos, EOS if hx_vocab_add_eos). parse_special: recognise
 * control tokens (<|im_start|>...) in the text; user-defined added tokens
 * (<tool_call> in Qwen vocabularies) are always recognised, as llama.cpp
 * does. Returns the number of tokens, or -(number needed) if n_max is too
 * small (out then holds the first n_max; out may be NULL if n_max is 0),
 * or INT32_MIN if memory ran out. Any bytes are accepted: invalid UTF-8
 * tokenizes as llama.cpp does (as U+FFFD for byte-level BPE; sequences
 * above U+10FFFF, where llama.cpp throws, as U+FFFD too). */
int32_t hx_tokenize(const hx_vocab *v, const char *text, size_t len,
                    int32_t *out, int32_t n_max, int add_bos,
                    int parse_special);

/* A byte range [start, end) of a text. */
typedef struct hx_span {
    size_t start, end;
} hx_span;
/* hx_tokenize with special and added tokens (control and user-defined
 * alike) recognised only where they lie wholly inside one of the byte
 * ranges marks[0..n_marks) (ascending, not overlapping; NULL or 0: none):
 * the text a caller wrote itself, such as a chat template's markers.
 * Everywhere else (a mail, a tool's result, the user's words) a special
 * token's spelling is plain text and tokenizes as the model's ordinary
 * pieces. Where the text outside the marks spells no special token, the
 * tokens are hx_tokenize's with parse_special. */
int32_t hx_tokenize_marked(const hx_vocab *v, const char *text, size_t len,
                           const hx_span *marks, int n_marks, int32_t *out,
                           int32_t n_max, int add_bos);

/* The bytes one token produces as output text: byte-level BPE pieces
 * decoded to raw bytes, SPM U+2581 to spaces and <0xXX> to the byte.
 * Control and unknown tokens give their text only if special, else "".
 * Writes into buf (no NUL added) and returns the length, or -(needed) if n
 * is too small. */
int32_t hx_token_to_piece(const hx_vocab *v, int32_t id, char *buf,
                          int32_t n, int special);
/* The same bytes without copying, rendered as with special = 1 (the grammar
 * engine's view of a token). Points into v; NULL for an id out of range. */
const char *hx_vocab_piece(const hx_vocab *v, int32_t id, size_t *len);

/* Detokenizes n tokens into out (appended): the pieces concatenated, as
 * hx_token_to_piece gives them. Returns HX_OK or HX_ERR_NOMEM. */
int hx_detokenize(const hx_vocab *v, const int32_t *ids, int32_t n,
                  int special, hx_buf *out);

/* Streaming detokenizer: appends to out only complete, valid UTF-8; an
 * incomplete sequence at the end of a piece is held until the next token
 * completes it; bytes that cannot start or continue a valid sequence are
 * replaced by U+FFFD (one per maximal invalid subpart). Flush emits a held
 * tail as U+FFFD. Returns HX_OK or HX_ERR_NOMEM. */
typedef struct hx_detok {
    unsigned char pending[8];
    int n_pending;
} hx_detok;
void hx_detok_init(hx_detok *d);
int hx_detok_push(hx_detok *d, const hx_vocab *v, int32_t id, int special,
                  hx_buf *out);
/* The same for raw bytes (used by hx_detok_push and by callers that have
 * the piece already). */
int hx_detok_push_bytes(hx_detok *d, const char *p, size_t n, hx_buf *out);
int hx_detok_flush(hx_detok *d, hx_buf *out);

#endif /* HX_VOCAB_H */
