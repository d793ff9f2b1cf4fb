/* agent_int.h: internal header of the agent module: glue between the
 * modules the agent ties together (memory tools, ...). Not public. */
#ifndef HX_AGENT_INT_H
#define HX_AGENT_INT_H

#include <cjson/cJSON.h>

#include "engine/engine.h"
#include "memory/memory.h"
#include "tools/tools.h"

#include "agent/gate.h"

/* Registers memory.remember, memory.forget and memory.search into reg,
 * acting on mem (borrowed: it must outlive the registry's use of them).
 * Fails, leaving the tools registered so far, if a name is taken. */
int hx_agent_register_memory_tools(hx_tools *reg, hx_memory *mem, hx_err *err);


/* ---- chat templates (agent/template.c) ----
 * Messages are an OpenAI-shaped JSON array: {"role": "system"|"user"|
 * "assistant"|"tool", "content": "...", "tool_calls": [{"type":
 * "function", "function": {"name", "arguments": {...}}}]}; tools are
 * hx_tools_list_json's shape. Renderers are plain C, written to produce
 * byte for byte what the model's own Jinja template produces. */
enum {
    HX_TPL_QWEN3 = 1,   /* Qwen3: ChatML, <tools>, <tool_call>, <think> */
    HX_TPL_CHATML = 2,  /* Qwen2.5 / Hermes ChatML with <tools> */
    HX_TPL_LLAMA3 = 3,  /* Llama 3.1 headers, tools in the first user turn */
    HX_TPL_COMPACT = 4, /* plain "User:"/"Assistant:" lines, one line per
                           tool: for small models without chat tokens */
    HX_TPL_BRIEF = 5,   /* compact with each tool's line its name and
                           argument names only: a model trained from
                           scratch on one tool set learns the rest from
                           the calls, and the prompt is 417 tokens
                           shorter (668 -> 251 on hearth-tiny's vocabulary) */
};
/* Whether family is the compact style or its brief variant (everything
 * but the tool lines is the same). */
int hx_tpl_compact(int family);
const char *hx_tpl_name(int family);     /* "qwen3", ...; static */
int hx_tpl_parse_name(const char *name); /* -1 if unknown */
/* The family for a model: the GGUF key hearth.prompt_style if set, else
 * from tokenizer.chat_template and the token set. g, v may be NULL. */
int hx_tpl_detect(const hx_gguf *g, const hx_vocab *v);
/* Whether the model declares its style (hearth.prompt_style): it was
 * trained on that format, so it needs none of the crutches given to
 * models that only fall back to the compact style (compact_json). */
int hx_tpl_declared(const hx_gguf *g);

typedef struct hx_tpl_opts {
    int add_generation_prompt; /* default 1 */
    int no_think;              /* Qwen3 enable_thinking=false; default 0 */
    const char *date;          /* Llama 3.1 "Today Date", NULL: the
                                  template's default "26 Jul 2024" */
} hx_tpl_opts;
hx_tpl_opts hx_tpl_default_opts(void);
/* Appends the prompt to out. tools may be NULL. o NULL: defaults. */
int hx_tpl_render(int family, const cJSON *messages, const cJSON *tools,
                  const hx_tpl_opts *o, hx_buf *out);
/* Where a rendered prompt's template wrote its own text (its role
 * markers, tags and fixed instructions): byte ranges of out, ascending.
 * Only there may the prompt's tokenization read special tokens
 * (hx_tokenize_marked); a mail, a tool's result, a memory, a tool's
 * description and the user's own words are plain text wherever they spell
 * "<|im_start|>" or "</tool_response>". Zero it to start; free the ranges
 * with hx_tpl_marks_free. */
typedef struct hx_tpl_marks {
    hx_span *s;
    int n, cap;
    int oom;
} hx_tpl_marks;
void hx_tpl_marks_free(hx_tpl_marks *m); /* leaves it zeroed */
/* hx_tpl_render, appending to marks (if not NULL) the ranges of out its
 * template wrote. */
int hx_tpl_render_marked(int family, const cJSON *messages, const cJSON *tools,
                         const hx_tpl_opts *o, hx_buf *out, hx_tpl_marks *marks);
/* JSON as Python's json.dumps writes it (", " and ": ", non-ASCII kept;
 * indent > 0: "," and newlines), which is what the templates' tojson
 * gives. Appends to out. */
int hx_json_py(const cJSON *j, int indent, hx_buf *out);

/* ---- token sources (agent/source.c): what writes the assistant's turns.
 * The planner drives any source through this table: the engine (a model,
 * its KV cache and the tool-call grammar) or, in tests, a scripted test
 * double. Versioned: fields are only added at the end. ---- */
#define HX_SOURCE_API 5
enum { HX_CHOICE_AUTO = 0, HX_CHOICE_REQUIRED = 1, HX_CHOICE_NONE = 2,
       HX_CHOICE_SCHEMA = 3 /* engine sources: JSON valid against the schema
                               of hx_engine_source_configure */ };
typedef struct hx_source {
    int api_version;
    const char *name; /* static, for messages */
    void *ctx;        /* owned by the source; freed by free */
    /* Starts an assistant turn after the whole rendered prompt; choice is
     * HX_CHOICE_*: free text with a lazy tool-call grammar, a call forced,
     * or no tool call at all. *n_prompt gets the prompt's token count. */
    int (*begin)(void *ctx, const char *prompt, int choice, int *n_prompt,
                 hx_err *err);
    /* Appends the next token's text to piece; *end = 1 (nothing appended)
     * when the turn is over. */
    int (*next)(void *ctx, hx_buf *piece, int *end, hx_err *err);
    /* Optional: token count of text (memory recall's budget). */
    int (*count)(void *ctx, const char *text);
    void (*free)(void *ctx);
    /* Optional: the conversation's text that call arguments are copied
     * from (the user's and tools' messages and the recalled memories),
     * for the next turns; see
     * hx_copy_stage_new. Copied; HX_OK or HX_ERR_NOMEM. */
    int (*set_copy_text)(void *ctx, const char *text);
    /* Optional (version 2): mends the string arguments of a call the
     * model wrote (hx_copy_repair, when the source copies); how many. */
    int (*repair_args)(void *ctx, cJSON *args);
    /* Optional (version 3): the addresses the user knows, one a line
     * (hx_tools_known_addresses), that a call's address value may be
     * completed to (hx_copy_stage_new). Copied; HX_OK or HX_ERR_NOMEM. */
    int (*set_known_addresses)(void *ctx, const char *list);
    /* Optional (version 4): the user's latest message, whose addresses a
     * call's address value copies first (hx_copy_stage_new). Copied;
     * HX_OK or HX_ERR_NOMEM. */
    int (*set_request)(void *ctx, const char *text);
    /* Optional (version 5): begin, with the ranges of prompt its template
     * wrote (hx_tpl_marks): special tokens are read there only, the rest
     * is plain text. The planner begins its turns so where the source
     * offers it; begin takes the whole prompt as its caller's own. */
    int (*begin_marked)(void *ctx, const char *prompt, const hx_tpl_marks *marks,
                        int choice, int *n_prompt, hx_err *err);
} hx_source;
void hx_source_free(hx_source *s); /* calls s->free; NULL is a no-op */

typedef struct hx_engine_source_params {
    hx_sampler_params sp; /* default: hx_sampler_default_params, temp 0 */
    int n_ctx;            /* 0: min(n_ctx_train, 4096) */
    int n_threads;        /* 0: all cores */
    int compact_json;     /* 1: for small models: no whitespace inside
                             calls, strings of at most 40 characters,
                             numbers from a few round values (calls still
                             valid against the real schemas); default 0 */
    int call_style;       /* HX_CALLS_TAGGED (<tool_call>, default) or
                             HX_CALLS_LLAMA (Llama 3.1's bare JSON call);
                             see hx_agent_call_style */
    int line_turn;        /* 1: a turn is one line: calls end it, or the
                             newline after them (the compact prompt
                             style); default 0 */
    int max_calls;        /* most calls in one turn; 0: HX_AGENT_MAX_CALLS,
                             or 1 with compact_json (small models call
                             until the budget ends) */
    int plain_decode;     /* 1: one token per forward pass (no batched
                             forced runs, no drafts); for comparisons.
                             The output is the same; default 0 */
    /* Memory and latency (issue 9); all 0 by default. */
    int kv_q8;            /* 1: 8-bit KV cache */
    size_t max_bytes;     /* weights + KV + scratch (--max-memory); 0: none */
    int prefill_slice;    /* tokens per prefill pass, the cancel check
                             between passes; 0: 64 */
    int (*cancelled)(void *user); /* nonzero: stop the prefill (Ctrl-C) */
    void *cancel_user;
    int prefix_cache;     /* 1: the system message's KV (system text and
                             tool list) is loaded from and saved to disk */
    const char *prefix_dir; /* NULL: $XDG_CACHE_HOME/hearth/prefix */
    size_t prefix_max_bytes; /* bound on that directory; 0: 1 GiB */
    hx_adapter *const *adapters; /* LoRA adapters attached to the context
                              (borrowed: must outlive the source) */
    const float *adapter_scales;
    int n_adapters;
    float copy_bias;      /* logit bonus of tokens that copy an argument
                             value from the conversation (hx_copy_stage_new);
                             0: none; < 0 (default): hx_engine_source_style
                             decides (HX_COPY_BIAS in the compact style) */
    hx_spec_memo *spec_memo; /* the model's earlier output for drafts
                             (engine/spec.h), shared with other sources
                             (borrowed: must outlive the source); NULL: the
                             source's decoder keeps its own. Not used with
                             plain_decode */
} hx_engine_source_params;
/* The loop guard (agent/source.c) in the compact style: when the last
 * period * times tokens of hist[0, n) (oldest first) are one run of
 * `period` tokens repeated `times` times, the token that would repeat it
 * once more (hist[n - period]), to be masked; else -1. */
int32_t hx_repeat_ban(const int32_t *hist, int n, int period, int times);
/* The copy bias of the compact prompt style (small models such as
 * hearth-tiny) unless the caller sets one: chosen on generated tasks apart
 * from the held-out evaluation's. */
/* A JSON scanner over the bytes of a tool call ({"name": ..., "arguments":
 * {...}}, from its '{'), just enough to know whether a byte is inside a
 * string value of the arguments (depth >= 2: a member's value or an array
 * item) and under which key (agent/copy.c). Zero it to start. */
#define HX_JSCAN_DEPTH 16
#define HX_JSCAN_KEY 12
typedef struct hx_jscan {
    int depth;
    char stack[HX_JSCAN_DEPTH]; /* '{' or '[' of each open container */
    int colon;                  /* a ':' since the last '{' or ',' */
    int in_str, esc, is_val;
    char key[HX_JSCAN_KEY];     /* the last key of the arguments (cut: "") */
    int key_len;                /* bytes of the key being read; -1: too long */
} hx_jscan;
/* What byte c was: the opening quote of such a value, a byte inside it
 * (escapes included), its closing quote, or anything else. */
enum { HX_JSCAN_OTHER, HX_JSCAN_OPEN, HX_JSCAN_BYTE, HX_JSCAN_CLOSE };
int hx_jscan_byte(hx_jscan *s, char c);

#define HX_COPY_BIAS 6.0f
/* A sampler stage (agent/copy.c) for calls: inside a string value of a
 * call's arguments, while the value so far occurs in text from a word's
 * start, the tokens ranked within bonus of the best that keep it a copy
 * (or close it at a word's end) get bonus added. Values of "to", "cc",
 * "bcc" and "attendees" are whole addresses found in text: tokens leaving
 * every one are masked (unless none would be left), and when request (the
 * user's latest message, or NULL) names some of them, only tokens copying
 * those get the bonus until the call has them; no address is written
 * twice in a call. With none in text, such a value that spells the
 * first part of one of known's addresses (one a line, or NULL) is held to
 * those it begins. Outside calls (the answer), once the text written has
 * copied a JSON string value of text (after '": "') from its start
 * through a whole word and stops inside a word the value goes on with,
 * the tokens within bonus of the best that finish the word get bonus;
 * and once it has copied a value whole, an item it begins after a comma,
 * colon or "and" that names a value under the same key is held to the
 * next such value in text (not a cancelled event's), and a number after
 * an item so named to that item's date or time of day (a list walked in
 * the result's order). *in_call (borrowed, kept by an earlier stage) is
 * non-zero while a call
 * is written. The stage owns copies of text and known; HX_OK or
 * HX_ERR_NOMEM. */
int hx_copy_stage_new(const hx_vocab *v, const char *text, const char *request,
                      const char *known, float bonus, const int *in_call,
                      hx_sampler_stage *out);
/* Mends the string values of a call's arguments with one word broken off
 * a copy from text: a small model copying "Moving day workshop" that
 * wrote "Pleaseing day workshop" (its first word from elsewhere, the rest
 * copied from the middle of "Moving") gets the word the rest was copied
 * from, when the text gives exactly one; so does "Code ze sync" for "Code
 * freeze sync" (the words before the broken one copied up to it, here a
 * broken last word too). A value shaped like an address
 * that is none of the text's ("emailmada@stycho.org" in a search's
 * "from") becomes the text's one address with its domain, if one. Values
 * that are copies already, composed ones ("body") and address values
 * ("to", "cc", "bcc": held to the text's while written) are left alone.
 * Returns how many values were mended. */
int hx_copy_repair(const char *text, cJSON *args);
/* The most tool calls the planner runs from one turn (the grammar allows
 * no more). */
#define HX_AGENT_MAX_CALLS 8
/* The tool-call style (HX_CALLS_*) of a template family (HX_TPL_*). */
int hx_agent_call_style(int family);
hx_engine_source_params hx_engine_source_default_params(void);
/* A source over model m (borrowed; must outlive the source) whose sampler's
 * first stage is the tool-call grammar for the given tools (names and
 * argument schemas, copied). Keeps the KV cache between turns and reuses
 * its longest common prefix with the next prompt. */
/* Sets what the prompt family asks of the source: the call style, one-line
 * turns for the compact style, and for a model that only falls back to it
 * (hx_tpl_declared false) compact_json, a repeat penalty (small models loop
 * on digits; unless sp already has one) and an 8192 context (cheap KV, long
 * prompts in a small vocabulary). */
void hx_engine_source_style(hx_engine_source_params *ep, int family, const hx_model *m);
int hx_engine_source_new(hx_model *m, const hx_tool_spec *tools, int n_tools,
                         const hx_engine_source_params *p, hx_source *out,
                         hx_err *err);
/* Switches an engine source's LoRA adapters between requests without
 * reloading the model: ads[0..n) with their scales (borrowed: they must
 * outlive the source or the next switch; n = 0: none). What the source
 * kept from earlier turns (the KV rows, its token cache, the drafts'
 * state) was computed under the old set and is dropped: the next request
 * prefills anew, or from a prefix cache on disk made under the new set.
 * Errors: hx_ctx_set_adapters's (the set is unchanged then);
 * HX_ERR_INVALID for a source that is not an engine source. */
int hx_engine_source_set_adapters(hx_source *s, hx_adapter *const *ads,
                                  const float *scales, int n, hx_err *err);
/* An engine source's settings for the requests of a server, each of
 * which brings its own tools, output format and sampling. */
typedef struct hx_engine_turn {
    hx_sampler_params sp;
    const hx_tool_spec *tools; /* what calls are generated for (copied,
                                  bounded as at creation); may be none */
    int n_tools;
    const char *schema_json;   /* the JSON Schema of HX_CHOICE_SCHEMA turns
                                  (copied), or NULL */
    float copy_bias;           /* as hx_engine_source_params'; 0: none */
} hx_engine_turn;
/* Applies t to s from its next begin on: the tools, the schema, the
 * sampler's parameters and the copy bias replace those it had (its
 * compiled grammars are dropped; its KV cache is kept). Errors:
 * HX_ERR_NOMEM; HX_ERR_INVALID for a source that is not an engine source.
 * A schema the grammar cannot enforce fails the next HX_CHOICE_SCHEMA
 * begin (hx_agent_schema_usable checks it first). */
int hx_engine_source_configure(hx_source *s, const hx_engine_turn *t, hx_err *err);
/* What an engine source's turns generated: tokens (end-of-turn tokens
 * included), the seconds spent producing them (prefill excluded), those
 * of the turns that called a tool, and the speculative decoder's counters
 * (forward passes, forced, drafts). */
typedef struct hx_gen_stats {
    int64_t tokens;
    double seconds;
    int64_t call_tokens;
    double call_seconds;
    hx_spec_stats spec;
} hx_gen_stats;
/* Adds s's counters since it was made to *acc (once per source, when its
 * work is done); a source that is not an engine source (the oracle) adds
 * nothing. */
void hx_engine_source_add_stats(hx_source *s, hx_gen_stats *acc);
/* The prompt's tokens exactly as the engine source feeds them to the model
 * (special tokens parsed, BOS if the vocabulary asks for it): *out is
 * malloc'd (caller frees); returns the count, or -rc with err set. Chat
 * training data (agent/chatdata.c) tokenizes with it too. */
int hx_source_tokenize(const hx_vocab *v, const char *prompt, int32_t **out,
                       hx_err *err);
/* The same with special tokens read only inside marks (a rendered
 * prompt's, hx_tpl_render_marked); marks NULL: anywhere, as
 * hx_source_tokenize. */
int hx_source_tokenize_marked(const hx_vocab *v, const char *prompt,
                              const hx_tpl_marks *marks, int32_t **out, hx_err *err);

/* ---- the planner loop (agent/planner.c) ---- */
typedef struct hx_planner_params {
    int max_steps;      /* model turns per request; default 8 */
    int max_tokens;     /* generated tokens per request; default 1024 */
    double timeout_s;   /* wall clock per request; default 300 */
    int family;         /* HX_TPL_*; default HX_TPL_QWEN3 */
    int tool_choice;    /* HX_CHOICE_* of the first turn; later turns are
                           AUTO (REQUIRED) or NONE; default AUTO */
    const char *system; /* system text; NULL: a short default */
    const char *model;  /* model identity recorded in episodes */
    int no_think;       /* Qwen3: empty think block; default 1 */
    int recall_budget;  /* tokens of recalled memories; 0: none; 256 */
    const char *tools;  /* offered tools: comma-separated names or
                           "prefix.*"; NULL: all registered */
} hx_planner_params;
/* Whether filter (as hx_planner_params.tools) offers the tool name. */
int hx_agent_tool_offered(const char *filter, const char *name);
hx_planner_params hx_planner_default_params(void);

/* What the planner tells its caller as it goes (all optional). */
typedef struct hx_planner_io {
    void *user;
    void (*on_text)(void *user, const char *s, size_t n); /* answer text */
    void (*on_call)(void *user, const char *name, const char *args_json);
    /* status: "ok", "error", "refused", "malformed"; detail: the result
     * or the message fed back */
    void (*on_result)(void *user, const char *name, const char *status,
                      const char *detail);
    int (*cancelled)(void *user); /* checked between tokens */
} hx_planner_io;

/* The parts a planner uses, all borrowed (must outlive it). x, audit, mem
 * may be NULL. consent says how "ask" verdicts are answered. */
typedef struct hx_planner_deps {
    hx_source *src;
    hx_tools *reg;
    const hx_extools *x;
    struct hx_policy *policy;
    struct hx_audit *audit;
    hx_memory *mem;
    const struct hx_consent *consent;
} hx_planner_deps;

/* ---- one tool call (agent/toolrun.c): the planner's calls and `hearth
 * tools call` go through the same policy, consent and audit trail ---- */
typedef struct hx_call_outcome {
    const char *status;   /* "ok", "error", "refused", "malformed" (static) */
    const char *decision; /* "allow", "ask", "deny", "" (static) */
    const char *by;       /* who decided (static; see hx_policy_resolve) */
    int confirmed;        /* the policy asked and the answer was yes */
    int rc;               /* HX_OK, HX_ERR_DENIED when refused, or the
                             tool's error code */
    int untrusted;        /* the result or the error holds untrusted
                             content (hx_call_trust): it taints */
    cJSON *result;        /* the tool's result when ok (owned) */
    char detail[600];     /* the error or refusal, for the model and audit */
} hx_call_outcome;
/* Decides name(args) under d's policy and consent, tainted saying whether
 * untrusted content is in the conversation (the taint rule), and runs it
 * if allowed; o (zeroed by the caller) gets how it went. args_json is
 * args as the question and the audit show them. d->src is not used. */
void hx_agent_call(const hx_planner_deps *d, const char *name, const cJSON *args,
                   const char *args_json, int tainted, hx_call_outcome *o);
/* The call's audit records: one line in d->audit (the JSON-lines log) and
 * one row in d->mem's audit table, where each is open (may be NULL). */
void hx_agent_audit(const hx_planner_deps *d, const char *name, const char *args_json,
                    const hx_call_outcome *o);

/* The writes and sends of a run (hx_planner_run's trace) that did not
 * happen: each call record that was refused or failed and that no later
 * call of the same tool got done, with "effect" ("write" or "send")
 * added. An array (caller frees; NULL on out of memory). */
cJSON *hx_agent_undone(const hx_tools *reg, const cJSON *trace);

typedef struct hx_planner hx_planner;
hx_planner *hx_planner_new(const hx_planner_deps *d, const hx_planner_params *p);
void hx_planner_free(hx_planner *pl); /* NULL is a no-op */
/* Runs one request to a plain-text answer or a limit, keeping the
 * conversation for the next request (chat). *trace (caller frees with
 * cJSON_Delete; may be NULL on out of memory) holds {"request", "answer",
 * "status" ("answered", "step limit", "token budget", "time budget",
 * "cancelled", "error"), "outcome", "steps", "tokens", "prompt_tokens",
 * "seconds", "calls": [...], "not_run": [...], "messages": [...],
 * "episode"}. "calls" are the calls run, refused or malformed; "not_run"
 * those a limit stopped before they ran, never sent to a tool: {"name",
 * "arguments"} of a complete one, or "text" of one cut mid-way, with
 * "reason" ("cut", "not started") and "limit" (the status). Returns HX_OK
 * when answered, HX_ERR_RANGE (steps, tokens), HX_ERR_TIMEOUT,
 * HX_ERR_CANCELLED, or the source's error; err holds the message. */
int hx_planner_run(hx_planner *pl, const char *request,
                   const hx_planner_io *io, cJSON **trace, hx_err *err);
/* Forgets the last request and everything after it; 0 if there was none.
 * Its episode stays in memory, marked rejected (never trained on). */
int hx_planner_undo(hx_planner *pl);
/* The conversation so far (borrowed). */
const cJSON *hx_planner_messages(const hx_planner *pl);

/* A turn's text as the planner reads it (agent/planner.c), for callers
 * that run no planner, in prompt style family (HX_TPL_*): where its calls
 * start (a byte offset, -1: none yet); how many bytes at the end of
 * text[0, n) may be the start of them, to hold back from a stream; in
 * the compact style, a plain-text turn cut at its line's end (text cut,
 * returns 1); and the content before the calls (*content, caller frees)
 * with the calls, an array (caller frees) of {"name", "arguments"}, or
 * {"error"} (and "name" when it could be read) for a malformed one. */
int hx_turn_calls_at(int family, const char *text);
size_t hx_turn_held_tail(int family, const char *text, size_t n);
int hx_turn_line_end(int family, hx_buf *text);
cJSON *hx_turn_parse(int family, const char *text, char **content);

/* HX_OK if the grammar can enforce the schema (JSON text; NULL = any
 * object); otherwise the compiler's error naming the keyword and path. */
int hx_agent_schema_usable(const char *schema_json, hx_err *err);
/* The specs (names and schemas borrowed from reg) of the tools that filter
 * offers (as hx_planner_params.tools; NULL: all) and whose schemas the
 * grammar can use; each tool left out for its schema is named on warn
 * (NULL: silently). *out is malloc'd with one spare entry (caller frees,
 * also on failure); returns the count, or -1 on out of memory. */
int hx_agent_tool_specs(const hx_tools *reg, const char *filter, FILE *warn,
                        hx_tool_spec **out);

/* ---- synthetic worlds (agent/world.c): a sample user's calendars,
 * mailbox, files, config and memories, generated from (seed, split), for
 * training data (hearth datagen) and the agent evaluation. The held-out
 * split draws names, topics, rooms and its year of dates from pools
 * disjoint from the training split's. ---- */
enum { HX_SPLIT_TRAIN = 0, HX_SPLIT_HELDOUT = 1 };

/* A small deterministic random generator (splitmix64). */
typedef struct hx_rng {
    uint64_t s;
} hx_rng;
void hx_rng_seed(hx_rng *r, uint64_t seed, uint64_t stream);
uint64_t hx_rng_next(hx_rng *r);
int hx_rng_below(hx_rng *r, int n); /* uniform in [0, n); 0 if n <= 0 */
int hx_rng_chance(hx_rng *r, double p);

#define HX_W_PEOPLE 8
#define HX_W_EVENTS 20
#define HX_W_MAILS 12
#define HX_W_FILES 10
#define HX_W_MEMS 4

typedef struct hx_wperson {
    char first[24], last[24], name[50], email[48];
} hx_wperson;

typedef struct hx_wevent {
    char uid[48], title[48], location[40];
    int64_t day;       /* local day number (days since 1970-01-01) */
    int start_min;     /* minutes after local midnight */
    int dur_min;
    int recur;         /* 0 once, 1 weekly, 2 every two weeks, 3 weekdays */
    int organizer;     /* -1: the user; else a people[] index */
    int att[3], n_att; /* people[] indexes */
    int personal;      /* 1: in calendars/personal.ics, 0: the work vdir */
    int cancelled;     /* STATUS:CANCELLED (training worlds only); no task
                        * acts on it, and lists leave it out */
} hx_wevent;

typedef struct hx_wmail {
    char id[48];       /* the Maildir name without flags (mail.search's id) */
    char subject[64], topic[32], fact[96];
    int from;          /* people[] index */
    int64_t t;         /* Unix seconds */
    int unread;
} hx_wmail;

typedef struct hx_wfile {
    char folder[16], name[40], topic[32], fact[96];
} hx_wfile;

typedef struct hx_wmem {
    char kind[16], text[96];
} hx_wmem;

typedef struct hx_world {
    uint64_t seed;
    int split;
    hx_wperson user;
    char tz[40];
    int work_start, work_end; /* minutes after midnight, Monday to Friday */
    int64_t now;              /* Unix seconds */
    int64_t today;            /* local day number of now */
    char now_iso[40];         /* for HEARTH_NOW */
    hx_wperson people[HX_W_PEOPLE];
    int n_people;
    hx_wevent events[HX_W_EVENTS];
    int n_events;
    int64_t busy_day;         /* a day holding several events, or 0 (only
                               * training worlds made with HX_WORLD_BUSY_DAYS
                               * have one: held-out worlds stay as they
                               * were, so evaluations compare) */
    hx_wmail mails[HX_W_MAILS];
    int n_mails;
    hx_wfile files[HX_W_FILES];
    int n_files;
    hx_wmem mems[HX_W_MEMS];
    int n_mems;
} hx_world;

/* Fills w from (seed, split, flags); the same arguments give the same
 * world. HX_WORLD_BUSY_DAYS: training worlds may get a busy day and a
 * cancelled event (world.c); off, they are as before session 31 made them. */
enum { HX_WORLD_BUSY_DAYS = 1u };
int hx_world_generate(uint64_t seed, int split, unsigned flags, hx_world *w, hx_err *err);
/* Writes w as a HEARTH_HOME at home (emptied first): home/config/
 * config.json, calendars/work/ (one .ics per event) and personal.ics
 * (only when some events are personal),
 * mail/ (Maildir), files/<folder>/, outbox/. Memories are not written
 * (hx_world_seed_memory does that once the database is open). */
int hx_world_write(const hx_world *w, const char *home, hx_err *err);
/* Stores w's memories in mem. */
int hx_world_seed_memory(const hx_world *w, hx_memory *mem, hx_err *err);
/* Removes a directory tree (no symlinks followed); a missing one is ok. */
int hx_world_rmtree(const char *dir, hx_err *err);

/* Pools (for requests and tests): a person, a topic ("budget review"), a
 * room, a pronounceable word, a city; each drawn only from split's pool. */
void hx_world_person(hx_rng *r, int split, hx_wperson *p);
void hx_world_topic(hx_rng *r, int split, char *buf, size_t n);
void hx_world_room(hx_rng *r, int split, char *buf, size_t n);
void hx_world_word(hx_rng *r, int split, char *buf, size_t n);
const char *hx_world_city(hx_rng *r, int split);
/* The split a generated word belongs to (pronounceable words are split by
 * a hash of their letters). */
int hx_world_word_split(const char *word);
/* Local day number and minutes -> Unix seconds in w's zone. */
int64_t hx_world_local(const hx_world *w, int64_t day, int minutes);
/* Local "YYYY-MM-DD" / "HH:MM" of a Unix time in w's zone. */
void hx_world_date(const hx_world *w, int64_t t, char *buf, size_t n);
void hx_world_hhmm(const hx_world *w, int64_t t, char *buf, size_t n);
/* A phrase naming local day `day` relative to w's today that hx_when_parse
 * resolves to that day ("tomorrow", "on Friday", "Dec 3", ...); checked. */
void hx_world_day_phrase(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n);

/* ---- trajectories and evaluation tasks (agent/datagen.c) ----
 * A task is a JSON object {"id", "split", "world_seed", "now", "category",
 * "kind", "request", "template" (its phrasing's index; i % 5 == 4 only in
 * the held-out split), "consent" ("yes"|"no"), "policy" (object or null),
 * "slots": {what the oracle copies}}. The oracle is an hx_source that
 * writes the intended assistant turns, looking at the planner's messages
 * so far; the real planner and tools run it in the task's world. */
enum { HX_CAT_SINGLE, HX_CAT_MULTI, HX_CAT_NONE, HX_CAT_REFUSAL, HX_CAT_ERROR,
       HX_CAT_MEMORY, HX_CAT_COUNT };
const char *hx_dg_category_name(int cat); /* "single", ...; static */
int hx_dg_category_parse(const char *name); /* -1 if unknown */

/* A world opened for runs: written at home, its config, tools (built-ins
 * and memory tools, as `hearth ask` registers them) and memory open.
 * Open sets HEARTH_HOME and HEARTH_NOW in the environment for the world's
 * tools and close puts both back as they were, unset if they were unset
 * (not thread-safe; worlds open at once close in reverse order). Close is
 * safe after any open, failed or not. */
typedef struct hx_dg_world {
    hx_world w;
    char home[512];
    hx_config *cfg;
    hx_tools *reg;
    hx_memory *mem;
    int env_set;                     /* open changed the environment */
    char *saved_home, *saved_now;    /* owned: the values before, or NULL */
} hx_dg_world;
int hx_dg_world_open(uint64_t seed, int split, unsigned flags, const char *home, hx_dg_world *dw,
                     hx_err *err);
/* The same for a world already generated (and maybe changed: a persona). */
int hx_dg_world_open_w(const hx_world *w, const char *home, hx_dg_world *dw, hx_err *err);
/* The same for a world already written at dw->home (dw zeroed but for
 * home and w.now_iso): environment, config, tools and memory, no memories
 * stored (a world written by hand: agent/handrun.c). */
int hx_dg_world_open_written(hx_dg_world *dw, hx_err *err);
void hx_dg_world_close(hx_dg_world *dw);

/* A new task for world w (its category cat, or any with cat < 0), drawn
 * with r; used marks targets already taken in this world (may be NULL).
 * Caller frees with cJSON_Delete. NULL if none fits (try again). */
cJSON *hx_dg_task_new(const hx_world *w, hx_rng *r, int cat, unsigned *used);
/* The same with the phrasings of split phrase_split (HX_SPLIT_*) instead
 * of w's own: held-out worlds asked in training's phrasings separate
 * name and topic generalization from phrasing generalization. */
cJSON *hx_dg_task_new_phrased(const hx_world *w, hx_rng *r, int cat, unsigned *used, int phrase_split);
/* A task's "template": the index of its phrasing in its kind's list (every
 * fifth held out), or HX_DG_EXTRA_TEMPLATE + j for the j-th of the
 * training-only phrasings some kinds have. */
#define HX_DG_EXTRA_TEMPLATE 1000
/* Whether template i of a kind's n is held out: every fifth (i % 5 == 4)
 * of a kind with at least five. */
int hx_dg_template_heldout(int i, int n);
/* Kind i's phrasings (i from 0): its base templates (index % 5 == 4 held
 * out) and the training-only extras after them; all static. 0 past the
 * last kind. */
typedef struct hx_dg_phrasings {
    const char *kind;
    int train_only;           /* never in held-out tasks */
    const char *const *base;
    int n_base;
    const char *const *extra; /* NULL when n_extra is 0 */
    int n_extra;
} hx_dg_phrasings;
int hx_dg_phrasings_of(int i, hx_dg_phrasings *out);
/* A task object for w (its seed, split and now) with the given request;
 * takes slots. NULL on out of memory. */
cJSON *hx_dg_task_make(const hx_world *w, int cat, const char *kind, const char *request,
                       int template_i, cJSON *slots);
/* The request for template tpl ({slot}s from slots) in a drawn style:
 * politeness, extra context, case, a typo, end punctuation. */
void hx_dg_phrase(hx_rng *r, const char *tpl, const cJSON *slots, char *buf, size_t n);
/* A period on day that the tools read: "tomorrow afternoon", "on Friday". */
void hx_dg_range_phrase(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n);
/* A weekday between lo and hi days after w's today. */
int64_t hx_dg_future_weekday(const hx_world *w, hx_rng *r, int lo, int hi);

/* The oracle source for task over planner *pl (set *pl before running);
 * reg gives the schemas (arguments are written in their order).
 * hx_dg_oracle_failed tells whether the oracle gave up (and why). */
int hx_dg_oracle_new(const cJSON *task, const hx_world *w, const hx_tools *reg,
                     hx_planner **pl, hx_source *out);
const char *hx_dg_oracle_failed(const hx_source *s);
/* The oracle's deliberate slips: bit k set when its k-th assistant turn
 * is a wrong call the recovery kinds (schedule_fix, send_fix) make so
 * that the tool refuses it; training leaves such turns out of the loss
 * ("loss": false on the message). */
unsigned hx_dg_oracle_mistakes(const hx_source *s);
/* The prompts the planner gave the oracle, in order (borrowed). */
int hx_dg_oracle_prompts(const hx_source *s, const char ***prompts);

/* Runs task in dw with src (the oracle, or a model's source): policy and
 * consent from the task, a fresh planner with params (NULL:
 * hx_dg_planner_params(HX_TPL_COMPACT)). *trace as hx_planner_run's.
 * *plp, if not NULL, gets the planner (set before the run, for the
 * oracle); freed here. */
int hx_dg_run(hx_dg_world *dw, const cJSON *task, hx_source *src, hx_planner **plp,
              const hx_planner_params *params, cJSON **trace, hx_err *err);
/* The planner's parameters as `hearth ask` sets them, in style family. */
hx_planner_params hx_dg_planner_params(int family);

/* Validates calls against the tools' schemas (tools: hx_tools_list_json's
 * shape, copied), members in the schema's order as the grammar writes
 * them. */
typedef struct hx_dg_validator hx_dg_validator;
hx_dg_validator *hx_dg_validator_new(const cJSON *tools, hx_err *err);
/* The same over tool specs (as hx_agent_tool_specs gives; copied). */
hx_dg_validator *hx_dg_validator_for(const hx_tool_spec *specs, int n, hx_err *err);
void hx_dg_validator_free(hx_dg_validator *v); /* NULL is a no-op */
/* 1 if the call is valid against its schema, else 0 with why. */
int hx_dg_call_valid(hx_dg_validator *v, const char *name, const cJSON *args, char *why,
                     size_t n);
/* 1 if compact_json decoding (models without a declared style) could
 * write args too: strings of at most 40 bytes, a few round numbers, at
 * most 3 items; else 0 with why. Training data keeps to it. */
int hx_dg_call_compact(const cJSON *args, char *why, size_t n);

/* Checks an oracle trajectory: answered, every call valid (v), statuses
 * as the category expects, and the compact rendering of the conversation
 * extends every prompt the planner gave the oracle. 1 if good, else 0
 * with why. */
int hx_dg_verify(const cJSON *task, const cJSON *trace, const hx_source *oracle,
                 hx_dg_validator *v, const cJSON *tools, char *why, size_t n);

/* ---- the evaluation's checker (agent/evalcheck.c): final state, not
 * wording. task is a --tasks line (with "expect", the oracle's calls). */
/* What the check needs from the world before the run (outbox, busy times
 * in the asked period). Caller frees. */
cJSON *hx_dg_check_before(const cJSON *task, hx_dg_world *dw);
/* 1 if the run (trace) reached the task's expected final state in dw,
 * else 0; why gets the reason ("ok" on success). Adds the run's calls
 * valid against their schemas to *n_valid and all its calls to *n_calls
 * (both may be NULL). */
int hx_dg_check(const cJSON *task, const cJSON *before, const cJSON *trace, hx_dg_world *dw,
                hx_dg_validator *v, int *n_valid, int *n_calls, char *why, size_t n);

/* A file's path as the model passes it on and answers give it: from the
 * file root on (after "/files/"), else p itself (agent/oracle.c). */
const char *hx_dg_rel_path(const char *p);
/* A message body's first paragraph after the greeting, the fact an answer
 * about a mail read states, into b (n bytes) (agent/oracle.c). */
void hx_dg_body_fact(const char *text, char *b, size_t n);

/* Whether the answer of a run (trace) of a read task states what its read
 * found, as the oracle's answer does: for list_events the count of events
 * (cancelled ones left out) and the first four's titles and start times;
 * free_busy each busy period's start and end (more than five: their
 * count); find_slots each slot's time; mail_search the first message's
 * subject, or when the run went on to read a message (mail.read), that
 * body's first paragraph, as a mail_read answer gives it; unread_mail the
 * first three subjects; file_search the first three
 * paths; files_list the first five names. 1 or 0; -1 when there is
 * nothing to say (another kind, no successful read, an empty result).
 * Reported beside the state check, which for a read checks that the right
 * thing was read, not the answer. */
int hx_dg_answer_faithful(const cJSON *task, const cJSON *trace);

/* Opens the task's world (its world_seed and split) at home. */
int hx_dg_task_world(const cJSON *task, const char *home, hx_dg_world *dw, hx_err *err);
/* A source over model m for reg's tools as `hearth ask` makes it for the
 * prompt style family (compact: bounded values, repeat penalty 1.3, 8192
 * context). Free with hx_source_free. */
int hx_dg_engine_source(hx_model *m, const hx_tools *reg, int family, int n_threads,
                        hx_source *out, hx_err *err);
/* The same as an evaluation run asks: its model, family, threads, LoRA
 * adapters (borrowed: must outlive the source) and plain_decode. */
struct hx_dg_eval_run;
int hx_dg_engine_source_run(const struct hx_dg_eval_run *o, const hx_tools *reg,
                            hx_source *out, hx_err *err);
/* The evaluation log's line for a run: {"id", "category", "kind",
 * "request", "pass", "reason", "calls": [{"name", "arguments", "status"}],
 * "not_run" (the trace's),
 * "answer", "status", "steps", "tokens", "seconds", and "answer_ok"
 * (hx_dg_answer_faithful, when not -1)}. Caller frees. */
cJSON *hx_dg_eval_record(const cJSON *task, const cJSON *trace, int pass, const char *why);
/* Writes a readable transcript of one evaluated run to f: the task, the
 * per-request system text, every assistant turn (its text and calls),
 * every tool result with its status, a turn cut by a limit, the calls not
 * run, the oracle's expected calls (with the first one's result) and the
 * verdict with its reason (bench/agent-eval --trace). */
void hx_dg_transcript(FILE *f, const cJSON *task, const cJSON *trace, int pass, const char *why);
/* The run part of it: every message after the system text, the
 * assistant's calls and each tool result with its status, a cut turn, the
 * calls not run, and the status. */
void hx_dg_transcript_run(FILE *f, const cJSON *trace);

typedef struct hx_dg_params {
    int split;          /* HX_SPLIT_* */
    uint64_t seed;
    long n;             /* trajectories (or tasks) to write */
    int per_world;      /* requests per world (trajectories); default 8 */
    int category;       /* -1: the default mix; else only this one */
    int tasks;          /* 1: evaluation tasks, each in a fresh world */
    const char *home;   /* work directory for worlds; NULL: a temporary one */
    int phrasings;      /* HX_SPLIT_* of the request phrasings; -1: split's */
    unsigned world_flags; /* HX_WORLD_* of trajectories' worlds (tasks: 0,
                           * as a task file's worlds are opened again) */
} hx_dg_params;
hx_dg_params hx_dg_default_params(void);

typedef struct hx_dg_stats {
    long written, rejected, per_cat[HX_CAT_COUNT], calls, chars, worlds;
    double seconds;
    char last_reject[256];
} hx_dg_stats;
/* Writes p->n JSON lines to out: trajectories {"id", "split", "category",
 * "kind", "messages", "tools", "style": "compact"} or tasks. */
int hx_datagen_run(const hx_dg_params *p, FILE *out, hx_dg_stats *st, hx_err *err);

/* ---- the evaluation's runs (agent/nightly_agent.c; bench/agent_eval.c
 * and the nightly gate share them) ---- */
/* n evaluation tasks of split (HX_SPLIT_*; category -1: the default mix)
 * from seed, as a JSON array (caller frees); NULL with err set. */
cJSON *hx_dg_tasks(int split, long n, uint64_t seed, int category, hx_err *err);
/* hx_dg_tasks of the held-out split. */
cJSON *hx_dg_eval_tasks(long n, uint64_t seed, int category, hx_err *err);
typedef struct hx_dg_eval_run {
    hx_model *model;             /* NULL with oracle */
    int family, n_threads, oracle;
    hx_adapter *const *adapters; /* attached to the model's context */
    const float *scales;
    int n_adapters;
    int plain_decode;            /* 1: one token per forward pass */
    hx_gen_stats *gen;           /* NULL, or the runs' generation counters
                                    are added to it */
    float copy_bias;             /* 0: the prompt style's (HX_COPY_BIAS for
                                    small models); > 0: this; < 0: none */
    hx_spec_memo *spec_memo;     /* NULL, or shared by the runs' decoders
                                    (hx_engine_source_params) */
} hx_dg_eval_run;
/* One task in a fresh world at home (removed after): the state before, the
 * run (the model or the oracle), the check. *pass 1 if it succeeded; *v
 * the schema validator (made on first use; caller frees); the run's calls
 * added to *n_valid, *n_calls (may be NULL); *record (or NULL) its log
 * line (hx_dg_eval_record; caller frees). */
int hx_dg_eval_task(const hx_dg_eval_run *o, const cJSON *task, const char *home,
                    hx_dg_validator **v, int *pass, int *n_valid, int *n_calls,
                    cJSON **record, hx_err *err);
/* The same, also giving the planner's whole trace in *trace (or NULL;
 * caller frees) for hx_dg_transcript. */
int hx_dg_eval_task_traced(const hx_dg_eval_run *o, const cJSON *task, const char *home,
                           hx_dg_validator **v, int *pass, int *n_valid, int *n_calls,
                           cJSON **record, cJSON **trace, hx_err *err);

/* ---- what the agent gives lora/nightly (agent/nightly_agent.c) ---- */
/* hx_nightly_render_fn over an hx_agent_render: the episode rendered in
 * the model's style with the tools offered at inference, tokenized as the
 * engine source feeds it, the assistant's spans masked (agent/chatdata.c):
 * before each assistant turn exactly the prompt the planner fed for it
 * (its generation prompt and no_think included), so a Qwen3 episode of
 * several turns gives a document per turn after a tool response (the
 * template drops earlier turns' empty think blocks). */
typedef struct hx_agent_render {
    const hx_vocab *v;
    int family;         /* HX_TPL_* (hx_tpl_detect) */
    const cJSON *tools; /* hx_tools_list_json of the registry, or NULL */
} hx_agent_render;
struct hx_nightly_data;
int hx_agent_nightly_render(void *user, const cJSON *messages,
                            struct hx_nightly_data *out, hx_err *err);
/* hx_nightly_replay_fn over an hx_agent_render (its tools unused): n
 * trajectories of hearth datagen's training split from seed (the oracle
 * through the real planner and tools, on the device), each rendered as
 * hx_agent_nightly_render renders an episode, with the tools its world
 * offered. The held-out split, whose pools the generic suite draws, is
 * never used. */
int hx_agent_nightly_replay(void *user, int n, uint64_t seed,
                            struct hx_nightly_data *out, hx_err *err);
/* hx_nightly_eval_fn over an hx_agent_eval: a fixed sample of held-out
 * tasks (generated from seed on first use) run as the agent-eval bench
 * runs them, with the adapter files at their scales, or the base alone. */
typedef struct hx_agent_eval {
    hx_model *model;  /* the base, with its vocabulary (borrowed) */
    int family, n_threads;
    int oracle;       /* 1: the oracle instead of the model (tests) */
    uint64_t seed;
    const char *dir;  /* worlds; NULL: /dev/shm or /tmp */
    cJSON *tasks;     /* the sample; free with hx_agent_eval_free_tasks */
    const char *cache_dir; /* not NULL: the base's results (no adapter)
                      * are kept there, keyed by the model's identity, the
                      * sample, the threads and the hearth binary, and not
                      * run again while those are the same */
    int base_cached;  /* set by each base run: 1 if it came from the cache */
    const struct hx_agent_contrast *contrast; /* NULL: distillation replays
                      * generic tasks only (agent/distill.c) */
} hx_agent_eval;
int hx_agent_nightly_eval(void *user, const char *const *adapters, const float *scales,
                          int n_adapters, int n_tasks, uint8_t *pass, hx_err *err);
void hx_agent_eval_free_tasks(hx_agent_eval *ae);
/* The directory evaluation worlds go in (agent/evalhome.c): always
 * DIR/hearth-eval (DIR NULL: /dev/shm, else /tmp), because its path is in
 * tool results and a random one made the same task end differently from
 * run to run; taken under an exclusive lock (DIR/hearth-eval.lock, waited
 * for), emptied, created. base gets the path, *fd the lock. Give it back
 * (removed, unlocked) with hx_eval_home_give; fd < 0 is a no-op. */
int hx_eval_home_take(const char *dir, char *base, size_t n, int *fd, hx_err *err);
void hx_eval_home_give(const char *base, int fd);
/* ---- distillation replay (agent/distill.c) ---- */
/* n evaluation tasks of hearth datagen's training split from seed (never
 * the held-out pools of the generic suite), as a JSON array (caller
 * frees); NULL with err set. */
cJSON *hx_dg_train_tasks(long n, uint64_t seed, hx_err *err);
/* task run by ae's model (greedy, its planner parameters, no adapter) in
 * a fresh world at home (removed after): *trace the planner's (NULL if
 * the run gave none), *tools the tools its world offered (caller frees
 * both). */
int hx_dg_model_trace(const hx_agent_eval *ae, const cJSON *task, const char *home,
                      cJSON **trace, cJSON **tools, hx_err *err);
/* hx_nightly_replay_fn over an hx_agent_eval: the n tasks of
 * hx_dg_train_tasks(n, seed) run by the base model (hx_dg_model_trace),
 * each conversation it produced rendered as hx_agent_nightly_render
 * renders an episode, with its world's tools: replay that pulls the
 * adapter toward the base's own behaviour on generic requests. The
 * environment (HEARTH_HOME, HEARTH_NOW) is put back. */
int hx_agent_nightly_distill(void *user, int n, uint64_t seed,
                             struct hx_nightly_data *out, hx_err *err);
/* Contrastive replay (issue 10): a share of the distilled conversations
 * are the base's runs of calendar requests of the kinds the user's
 * episodes are (datagen's schedule, find_slots, create_event, each taken
 * when the episodes call every tool it calls), from the training split,
 * naming none of the values the episodes' calls carry that are the
 * user's habits (a location, an attendee's address or its name parts):
 * requests for other people, with no room and the lengths they state, so
 * that the adapter sees the habits belong to the user's requests and not
 * to every calendar request. */
enum { HX_CONTRAST_FIND_SLOTS = 1, HX_CONTRAST_CREATE = 2, HX_CONTRAST_MAX_TERMS = 64 };
typedef struct hx_agent_contrast {
    double share;    /* of the replay conversations, in [0, 1]; 0: none */
    unsigned tools;  /* HX_CONTRAST_* the episodes called */
    char *terms[HX_CONTRAST_MAX_TERMS]; /* owned; no contrast task names one */
    int n_terms;
    double near;     /* of the replay conversations, in [0, 1]: calendar
                      * requests of the other kinds (cancel, move, free or
                      * busy, list), which a small adapter trained on the
                      * episodes' kinds turns into them; 0: none */
} hx_agent_contrast;
/* One call of an episode (name, JSON arguments) into c: its tool, its
 * "location" and "attendees" values and the attendees' name parts
 * (robert.keller@x: "robert", "keller"). HX_ERR_NOMEM. */
int hx_agent_contrast_add_call(hx_agent_contrast *c, const char *name, const char *arguments);
/* Every call of m's training episodes (accepted and corrected) into c. */
int hx_agent_contrast_learn(hx_agent_contrast *c, hx_memory *m, hx_err *err);
void hx_agent_contrast_free(hx_agent_contrast *c); /* the terms; c stays */
/* n contrast tasks for c from seed (training split; a JSON array, caller
 * frees; fewer when c's tools give no kind); near: of the other calendar
 * kinds instead (c->near's); NULL with err set. */
cJSON *hx_dg_contrast_tasks(const hx_agent_contrast *c, long n, uint64_t seed, int near,
                            hx_err *err);
/* The tasks hx_agent_nightly_distill replays: n, of which c's share and
 * near share (c NULL: none) are hx_dg_contrast_tasks(c, ., seed, 0 and 1),
 * spread evenly among
 * hx_dg_train_tasks(., seed) (which fill in when fewer contrast tasks
 * fit); with no share exactly hx_dg_train_tasks(n, seed). */
cJSON *hx_agent_replay_tasks(const hx_agent_contrast *c, int n, uint64_t seed, hx_err *err);

/* ---- a persona (agent/persona.c): a sample user with habits no base
 * model can know, for issue 10's personalization proof. Their meetings
 * are in one room, last 45 minutes unless said otherwise, and one
 * colleague (people[0] of the world; for seed 1 Robert Keller,
 * robert.keller@northwind.com) is called by a nickname ("Bobby") that
 * only the user's accepted episodes tie to that address. Held-out
 * requests name the nickname and never the length, the room, the
 * colleague's name or address; of the training ones (the user's history)
 * some are meetings with other people of the world, named by address,
 * and some state a length (others_pct, stated_pct), none names the room. ---- */
enum { HX_HABIT_ROOM = 1, HX_HABIT_MINUTES = 2, HX_HABIT_NICKNAME = 4, HX_HABIT_ALL = 7 };
typedef struct hx_persona {
    hx_world w;        /* the user's world (held-out pools); people[0] is the colleague */
    char nickname[24]; /* what the user calls people[0] */
    char room[40];     /* where the user's meetings are */
    int minutes;       /* their usual length: 45 */
    int others_pct;    /* % of training meetings with others, by address (50) */
    int stated_pct;    /* % of training requests that state a length (25) */
    int first_day;     /* local day of the first episode (w.today) */
} hx_persona;
/* Fills p from seed; the same seed gives the same persona. */
int hx_persona_generate(uint64_t seed, hx_persona *p, hx_err *err);
/* n meeting requests of p, request i on the i-th weekday from day0 (a
 * local day; the task's "now" is then): split HX_SPLIT_TRAIN draws the
 * episodes' phrasings and topics, HX_SPLIT_HELDOUT others (pools
 * disjoint). Kind "persona_meeting": the oracle finds a slot and books
 * it with the habits. A JSON array (caller frees); NULL on out of memory. */
cJSON *hx_persona_requests(const hx_persona *p, int split, int n, int64_t day0, uint64_t seed);
/* Runs the training requests through the oracle, the real planner and
 * tools in p's world written at home (emptied first), its memory at
 * home/data/memory.db where `hearth nightly` with HEARTH_HOME=home finds
 * it: each verified run (hx_dg_verify, a booking made) is the planner's
 * episode marked accepted, as `hearth feedback --accept` does; others are
 * marked rejected. *n_accepted (may be NULL) gets how many were accepted. */
int hx_persona_write_episodes(const hx_persona *p, const cJSON *requests, const char *home,
                              int *n_accepted, hx_err *err);
/* Which habits (HX_HABIT_* bits) a run's calls (a trace's "calls":
 * name, arguments, status, result) got right, judged on its last
 * calendar.create_event call: location the room; length the usual
 * minutes (the created event's end - start, else duration_minutes); the
 * attendees exactly the colleague's address. Without one, on its last
 * calendar.find_slots call (length and attendees; the room is missed);
 * 0 without either. why gets the first miss ("ok" when all are right). */
int hx_persona_check(const hx_persona *p, const cJSON *calls, char *why, size_t n);
/* One request in p's world freshly written at home (removed after), run
 * by o (a model with its adapters, or the oracle) as the agent-eval runs
 * tasks: *habits gets hx_persona_check's bits, *booked 1 if a
 * create_event call succeeded; *record (or NULL) the hx_dg_eval_record
 * line with "habits" added (caller frees). */
int hx_persona_eval(const hx_persona *p, const hx_dg_eval_run *o, const cJSON *request,
                    const char *home, int *habits, int *booked, cJSON **record, hx_err *err);

#endif /* HX_AGENT_INT_H */
