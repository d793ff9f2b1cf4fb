/* grammar.h: constrained decoding: JSON Schema -> grammar -> per-token
 * masks over a vocabulary, a byte-level matcher, and the sampler stage. */
#ifndef HX_GRAMMAR_H
#define HX_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct cJSON;
struct hx_vocab;
struct hx_sampler_stage;

/* A compiled grammar. Compiling is cheap; the grammar grows caches while
 * matchers run on it, so one grammar and its matchers belong to one thread
 * at a time. */
typedef struct hx_grammar hx_grammar;
/* A vocabulary prepared for masking: token bytes in a trie plus per-length
 * tables. Immutable once built; may be shared by any number of matchers. */
typedef struct hx_gvocab hx_gvocab;
/* The state of one constrained generation over a grammar. */
typedef struct hx_matcher hx_matcher;

typedef struct hx_grammar_params {
    int compact; /* 1: no whitespace between JSON tokens; default 0 (any
                    JSON whitespace, as the JSON spec allows) */
    int line_turn; /* 1: tool calls (HX_CALLS_TAGGED) are followed by
                    nothing or by one newline, which ends the turn: a
                    turn is one line (the compact prompt style); default 0:
                    whitespace may follow each call */
    int ws_max;  /* > 0: at most this many whitespace bytes in a row (for
                    generation, where a model can loop on whitespace);
                    default 0 = unbounded. Ignored when compact. */
    /* 1: bounds for generating JSON, not for validating it (a valid value
     * such as 1e300 or 1.0000001 may be refused): integers without a
     * fraction or an exponent ("5", never "5.0"); at most
     * HX_GEN_INT_DIGITS integer digits, HX_GEN_FRAC_DIGITS fraction digits
     * and HX_GEN_EXP_DIGITS exponent digits; and, unless ws_max says
     * otherwise, at most HX_GEN_WS whitespace bytes in a row. Models loop
     * where JSON lets them ("5.000000...", endless spaces). Also what a
     * double and a C string hold, since the agent parses calls into cJSON
     * (doubles, NUL-terminated strings) and the tools get that: 15
     * integer digits stay exact (2^53 has 16), 2 exponent digits never
     * overflow to inf, and strings never hold U+0000. Default 0. */
    int generation;
    /* Tool-call grammars: the most calls in one turn (0 = no limit;
     * default 0). Ignored by schema grammars. */
    int max_calls;
    /* Tool-call grammars: HX_CALLS_TAGGED (default) or HX_CALLS_LLAMA. */
    int call_style;
} hx_grammar_params;
enum { HX_GEN_INT_DIGITS = 15, HX_GEN_FRAC_DIGITS = 8, HX_GEN_EXP_DIGITS = 2,
       HX_GEN_WS = 8 };
hx_grammar_params hx_grammar_default_params(void);

/* Compiles a JSON Schema given as text (or as a parsed cJSON tree). A
 * keyword that constrains instances and cannot be enforced is an error
 * (HX_ERR_UNSUPPORTED) naming the keyword and its JSON path; malformed
 * schemas give HX_ERR_FORMAT. On success *out is the caller's; free with
 * hx_grammar_free. p may be NULL for the defaults. */
int hx_grammar_from_schema(const char *json, size_t len,
                           const hx_grammar_params *p, hx_grammar **out,
                           hx_err *err);
int hx_grammar_from_cjson(const struct cJSON *schema,
                          const hx_grammar_params *p, hx_grammar **out,
                          hx_err *err);

/* Tool calls. Each tool: its name and its arguments schema (JSON text).
 * Call styles (hx_grammar_params.call_style):
 * HX_CALLS_TAGGED (Qwen, Hermes): a turn's calls are one or more (up to
 *   max_calls) <tool_call>{"name": ..., "arguments": ...}</tool_call>,
 *   whitespace between and after them, then the end.
 * HX_CALLS_LLAMA (Llama 3.1): one bare {"name": ..., "parameters": ...},
 *   optionally after <|python_tag|> (the Llama 3.1 template renders one
 *   call per turn, so one is allowed), then the end.
 * Modes:
 * HX_TOOLS_OPTIONAL: free text, or the calls.
 * HX_TOOLS_REQUIRED: the calls, nothing before them.
 * HX_TOOLS_LAZY: free text until the model writes "<tool_call>" (tagged:
 *   as text or as a single special token), or until a leading "{" or
 *   "<|python_tag|>" anywhere (Llama); then the calls. */
enum { HX_TOOLS_OPTIONAL = 0, HX_TOOLS_REQUIRED = 1, HX_TOOLS_LAZY = 2 };
/* The markers of a call, as the tagged style (Qwen, Hermes) and Llama 3.1
 * write them: the grammars, the chat templates, the planner, the training
 * data and the tokenizers' special tokens all spell them from here. */
#define HX_TOOL_CALL_OPEN "<tool_call>"
#define HX_TOOL_CALL_CLOSE "</tool_call>"
#define HX_TOOL_CALL_PYTHON "<|python_tag|>"
enum { HX_CALLS_TAGGED = 0, HX_CALLS_LLAMA = 1 };
typedef struct hx_tool_spec {
    const char *name;
    const char *schema_json; /* NULL = any JSON object */
} hx_tool_spec;
int hx_grammar_tool_calls(const hx_tool_spec *tools, int n_tools, int mode,
                          const hx_grammar_params *p, hx_grammar **out,
                          hx_err *err);
void hx_grammar_free(hx_grammar *g); /* NULL is a no-op */

/* ---- vocabularies ---- */
enum {
    HX_GTOK_SPECIAL = 1, /* never matched as text (control tokens) */
    HX_GTOK_EOG = 2,     /* ends generation: allowed where the grammar may end */
};
/* From token byte strings (pieces[i], lens[i]) and flags[i] (HX_GTOK_*;
 * flags may be NULL). Copies what it needs. A special token whose bytes
 * are "<tool_call>", "</tool_call>" or "<|python_tag|>" is accepted by
 * tool-call grammars in place of that text. */
int hx_gvocab_new(int32_t n_tokens, const char *const *pieces,
                  const size_t *lens, const uint8_t *flags,
                  hx_gvocab **out, hx_err *err);
/* From one of the engine's tokenizers: pieces as hx_vocab_piece gives
 * them, control/unknown tokens special, hx_vocab_is_eog tokens EOG. Special
 * tokens whose text is "<tool_call>" / "</tool_call>" are remembered so
 * that tool-call grammars accept them in place of the text. */
int hx_gvocab_from_vocab(const struct hx_vocab *v, hx_gvocab **out,
                         hx_err *err);
/* The same through a cache file in dir (NULL: hx_path_cache's directory,
 * $XDG_CACHE_HOME/hearth) named by a hash of the tokens. The file is used
 * only if its version, sizes and checksum hold and its tokens equal v's
 * byte for byte; otherwise (missing, stale, damaged) the vocabulary is
 * built as above and the file written atomically, with no error: the
 * cache only saves time. *from_cache (may be NULL) is 1 if it was used. */
int hx_gvocab_from_vocab_cached(const struct hx_vocab *v, const char *dir,
                                hx_gvocab **out, int *from_cache, hx_err *err);
void hx_gvocab_free(hx_gvocab *v); /* NULL is a no-op */
int32_t hx_gvocab_n_tokens(const hx_gvocab *v);
/* The token table, borrowed (valid while v lives): token t's bytes
 * piece[t] (NUL-terminated), len[t] of them, its HX_GTOK_* flags[t].
 * Returns the token count. */
int32_t hx_gvocab_tokens(const hx_gvocab *v, const char *const **piece,
                         const uint32_t **len, const uint8_t **flags);
/* The markers a single special token may stand for, in the grammar's
 * order, and their text (HX_TOOL_CALL_OPEN, _CLOSE, _PYTHON). */
enum { HX_GMARK_OPEN, HX_GMARK_CLOSE, HX_GMARK_PYTHON, HX_GMARK_COUNT };
extern const char *const hx_gmark_text[HX_GMARK_COUNT];
/* The special token spelling marker k (HX_GMARK_*), or -1 if none does. */
int32_t hx_gvocab_mark_token(const hx_gvocab *v, int k);
/* The marker text token t spells (what a matcher accepts for it), or NULL
 * if t is no marker's token. */
const char *hx_gvocab_mark_of(const hx_gvocab *v, int32_t t);

/* ---- matchers ---- */
/* A matcher over g (borrowed: g must outlive it). v may be NULL for a
 * byte-only matcher (no masks). Free with hx_matcher_free. */
hx_matcher *hx_matcher_new(hx_grammar *g, const hx_gvocab *v);
void hx_matcher_free(hx_matcher *m); /* NULL is a no-op */
/* Back to the start; caches are kept. */
void hx_matcher_reset(hx_matcher *m);
/* Advances by bytes; HX_ERR_STATE (state unchanged) if they leave the
 * grammar. */
int hx_matcher_feed(hx_matcher *m, const char *bytes, size_t n);
/* 1 if the bytes so far form a complete sentence of the grammar. */
int hx_matcher_can_end(hx_matcher *m);
/* 1 if the grammar accepts more input here. */
int hx_matcher_can_continue(hx_matcher *m);
/* The allowed next tokens as a bitset of (n_tokens + 31) / 32 words: bit i
 * of word i / 32 set if token i keeps the output inside the grammar; EOG
 * tokens only where the grammar may end; special tokens never (except
 * the tool-call markers where a tool-call grammar takes them). */
int hx_matcher_mask(hx_matcher *m, uint32_t *mask);
/* Advances by a token; HX_ERR_STATE (state unchanged) if not allowed. An
 * EOG token is accepted only where the grammar may end, and ends it. */
int hx_matcher_accept(hx_matcher *m, int32_t token);
/* Tokens forced from here (only one continuation possible, or only
 * end-of-generation tokens: then the first of those), up to max; returns
 * how many were written. Does not advance. */
int hx_matcher_forced(hx_matcher *m, int32_t *tokens, int max);
/* 1 once an EOG token was accepted. */
int hx_matcher_ended(const hx_matcher *m);
const char *hx_matcher_error(const hx_matcher *m);
/* Looking ahead without moving the matcher (speculative drafts,
 * engine/spec.c): its states are ids, 0 dead, valid until it is reset or
 * freed. The current one; the one after byte from cfg (0: byte not
 * allowed); whether the grammar may end at cfg; the grammar matched. */
uint32_t hx_matcher_state(const hx_matcher *m);
uint32_t hx_gm_step(hx_matcher *m, uint32_t cfg, int byte);
int hx_gm_can_end(hx_matcher *m, uint32_t cfg);
const hx_grammar *hx_matcher_grammar(const hx_matcher *m);

/* ---- the sampler stage ----
 * Fills *stage (struct hx_sampler_stage from engine/sample.h) with a stage
 * owning a new matcher over g and v (both borrowed: they must outlive the
 * sampler). HX_ERR_NOMEM. */
int hx_grammar_stage(hx_grammar *g, const hx_gvocab *v,
                     struct hx_sampler_stage *stage);

/* Python's repr() of a float (the text json.dumps writes), into out. */
int hx_py_float_repr(double v, char *out, size_t n);

#endif /* HX_GRAMMAR_H */
