/* agent.h: the agent's public API: chat templates, token sources (the
 * engine's, with the tool-call grammar and the copy stage), the planner
 * loop and its tool calls under the policy, the memory tools. The agent
 * uses engine, tools, memory and sandbox. */
#ifndef HX_AGENT_H
#define HX_AGENT_H

#include <cjson/cJSON.h>

#include "engine/engine.h"
#include "memory/memory.h"
#include "tools/tools.h"

#include "sandbox/sandbox.h"

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
    size_t head; /* where the prompt's stable head ends (bytes): the tool
                    list and the first system message, the same in every
                    request of a user (the prefix cache keeps its KV);
                    0: the template marks none, and the source ends it at
                    the first end-of-turn token */
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

/* A tool's own check of one argument value: 1 when tool would accept
 * value for key, 0 when it would refuse it, -1 when it has no check. */
typedef int (*hx_arg_check_fn)(void *user, const char *tool, const char *key, const char *value);

/* ---- token sources (agent/source.c): what writes the assistant's turns.
 * The planner drives any source through this table: the engine (a model,
 * its KV cache and the tool-call grammar) or, in tests, a scripted test
 * double. Versioned: fields are only added at the end. ---- */
#define HX_SOURCE_API 9
enum { HX_CHOICE_AUTO = 0, HX_CHOICE_REQUIRED = 1, HX_CHOICE_NONE = 2,
       HX_CHOICE_SCHEMA = 3 /* engine sources: JSON valid against the schema
                               of hx_source_engine_configure */ };
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
    /* Optional (version 6): the positions the context holds (n_ctx, or
     * fewer when the memory cap leaves less KV cache); tool results are
     * cut to fit in it (hx_fit_result). */
    int (*limit)(void *ctx);
    /* Optional (version 6): the text an answer's facts are copied from
     * (the conversation but the assistant's own words) and the claim
     * words the request's calls license (hx_ground_stage_new), for the
     * next turns. Copied; HX_OK or HX_ERR_NOMEM. */
    int (*set_ground)(void *ctx, const char *text, const char *claims);
    /* Optional (version 6): the tools' own argument checks (see
     * hx_arg_check_fn), which the copy stage defers to; borrowed. */
    void (*set_arg_check)(void *ctx, hx_arg_check_fn check, void *user);
    /* Optional (version 7): the calls of this request that failed (lines
     * of hx_argcheck_refused_line), which the next turns may not write
     * again (hx_argcheck_stage_refuse). Copied; HX_OK or HX_ERR_NOMEM. */
    int (*set_refused_calls)(void *ctx, const char *calls);
    /* Optional (version 8): decodes ahead, while nothing waits on it, the
     * start of the next turn's prompt (prompt and marks as begin_marked's;
     * the next prompt starts with this text), so that the turn's first
     * token waits only for the rest. Cancelled as a turn is; HX_OK or the
     * errors of begin. */
    int (*prepare)(void *ctx, const char *prompt, const hx_tpl_marks *marks, hx_err *err);
    /* Optional (version 9): where a turn's text[0, n), cut by the planner
     * short of where the model ended it (the repeat guard), may end under
     * the source's answer stages (hx_ground_end): into *end, n when no
     * stage holds answers. HX_OK or HX_ERR_NOMEM. */
    int (*answer_end)(void *ctx, const char *text, size_t n, size_t *end);
} hx_source;
void hx_source_free(hx_source *s); /* calls s->free; NULL is a no-op */

typedef struct hx_source_engine_params {
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
    /* Memory and latency; all 0 by default. */
    int kv_q8;            /* 1: 8-bit KV cache */
    size_t max_bytes;     /* weights + KV + scratch (--max-memory); 0: none */
    int no_kv_spill;      /* 1: at the memory cap the KV cache is full (the
                             planner drops the oldest exchanges); 0
                             (default): its oldest pages spill to
                             $XDG_CACHE_HOME/hearth/spill */
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
                             0: none; < 0 (default): hx_source_engine_style
                             decides (HX_COPY_BIAS in the compact style) */
    hx_spec_memo *spec_memo; /* the model's earlier output for drafts
                             (engine/spec.h), shared with other sources
                             (borrowed: must outlive the source); NULL: the
                             source's decoder keeps its own. Not used with
                             plain_decode */
    hx_loop *loop;        /* the closed loop (engine/governor.h; borrowed):
                             inference runs in slices of slice_ms, the loop
                             counts them and its thread choice applies from
                             the next slice; each model turn's TTFT and
                             rates go to it; its context cap (on n_ctx),
                             KV type (8-bit where the heads allow, else
                             kv_q8's) and speculation depth (a cap on the
                             drafts) apply from the next model turn: a
                             changed context or KV type makes a new
                             context (the conversation is prefilled anew).
                             NULL: whole passes, no loop */
    double slice_ms;      /* with loop: slice length; 0: 10 ms */
    int no_ground;        /* 1: answers are not held to the conversation
                             (hx_ground_stage_new); for comparisons only.
                             Default 0: every model, every style */
} hx_source_engine_params;
/* The loop guard (agent/source.c) in the compact style: when the last
 * period * times tokens of hist[0, n) (oldest first) are one run of
 * `period` tokens repeated `times` times, the token that would repeat it
 * once more (hist[n - period]), to be masked; else -1. */
int32_t hx_repeat_ban(const int32_t *hist, int n, int period, int times);
/* The loop guard's rule for a string in a call (every style): 1 when the
 * string has run n_val tokens, at least 32, and its last 32 (last[0, 32)
 * in any order) are of 8 or fewer kinds; the guard then closes it. */
int hx_value_loops(const int32_t *last, int n_val);
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

/* The JSON strings of a text, read one by one (the stages that read the
 * conversation's tool results: ground.c, copy.c, toolcheck.c). A string
 * runs from a '"' to the next '"' not escaped on the same line: a JSON
 * string holds no raw line end, and a quote with no other after it on its
 * line opens none. Start with hx_jstr s = {.t = text, .n = len}; each
 * hx_jstr_next reads the next string into the fields below and returns 1,
 * then 0 at the text's end. Borrows t while in use. */
typedef struct hx_jstr {
    const char *t;
    size_t n;
    size_t at;           /* where the next search begins */
    size_t start, end;   /* the string read: t[start, end), end its closing quote */
    int is_key;          /* a ':' follows it (blanks aside) */
    int is_value;        /* the value of the key before it: "key": "value" */
    int escaped;         /* it holds a '\\' */
    size_t key, key_len; /* the last key read, this one or before it: t[key, key + key_len) */
    size_t colon;        /* where the ':' after that key is */
} hx_jstr;
int hx_jstr_next(hx_jstr *s);
/* Whether the last key read is key. */
int hx_jstr_under(const hx_jstr *s, const char *key);

/* Where a turn's calls are, byte by byte (the loop guard's, agent/
 * source.c): a call begins at "<tool_call>" (llama: at a leading '{' or
 * "<|python_tag|>") and ends at "</tool_call>" outside its JSON strings
 * and containers (a value may spell the tag). Zero it to start; set llama
 * for HX_CALLS_LLAMA. in_call: a call is being written. */
typedef struct hx_calltrack {
    char tail[16];
    int llama, wrote, in_call, depth, in_str, esc;
} hx_calltrack;
void hx_calltrack_byte(hx_calltrack *t, char c);

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
/* hx_arg_check_fn of the built-in tools (agent/toolcheck.c), user the
 * registry (const hx_tools *): a calendar tool's time arguments ("range",
 * "start", "end", "occurrence") are read by hx_when_parse in the
 * configured zone: 1 for a value read, or read whole as a day there is
 * not ("April 31": the tool's answer says so), else 0; -1 for every other
 * tool and key. */
int hx_agent_arg_check(void *user, const char *tool, const char *key, const char *value);
/* A sampler stage (agent/toolcheck.c) for calls: inside a string value
 * whose key check (with user) knows for the call's tool, tokens that
 * would close the value while check refuses it are masked (unless none
 * would be left); *defer (the stage's, valid while the sampler lives) is
 * set before each token to whether the model's own best token makes a
 * value check accepts: the copy stage (hx_copy_stage_defer) then lifts
 * nothing. *in_call (borrowed) as the copy stage's. HX_OK or
 * HX_ERR_NOMEM. */
int hx_argcheck_stage_new(const hx_vocab *v, hx_arg_check_fn check, void *user,
                          const int *in_call, hx_sampler_stage *out, const int **defer);
/* Gives the argument check stage st (hx_argcheck_stage_new's; its check
 * may be NULL) the calls it must not let the model write again: lines from
 * hx_argcheck_refused_line. A token that would finish one of them (the
 * same tool, the same arguments whole) is masked unless none would be
 * left, so the model changes the call, calls another tool or answers.
 * Copied; HX_OK or HX_ERR_NOMEM. */
int hx_argcheck_stage_refuse(hx_sampler_stage *st, const char *calls);
/* Holds the "range" values st (hx_argcheck_stage_new's) checks to those
 * of the conversation the check accepts, while any is the value's
 * continuation: the phrases of request (up to six words: "tomorrow
 * morning"; the longest, none ending in a word the time reader passes
 * over) and the JSON string values of text (a date a result gives). Event
 * times are the model's own. Values of "uid" and "id" (items the tools
 * name) are held, with no check, to the values text has under the same
 * key, where it has any. For small models, whose own ranges the tool
 * cannot read and who cut ids short; with neither text, nothing is held.
 * Copied; HX_OK or HX_ERR_NOMEM. */
int hx_argcheck_stage_hold(hx_sampler_stage *st, const char *request, const char *text);
/* Appends call tool(args)'s line for hx_argcheck_stage_refuse to out.
 * HX_OK or HX_ERR_NOMEM. */
int hx_argcheck_refused_line(const char *tool, const cJSON *args, hx_buf *out);
/* Makes the copy stage st (hx_copy_stage_new's, not yet added or added)
 * lift no token while *defer (borrowed; NULL: never) is non-zero. */
void hx_copy_stage_defer(hx_sampler_stage *st, const int *defer);
/* A sampler stage (agent/ground.c) for the text outside calls (the
 * answer): every fact it states (a word with a digit, '@', '/', '_' or an
 * inner '.' or ':'; a capitalised word that does not begin a sentence, "I"
 * aside; a day word: today, tomorrow, a weekday, a capitalised month) is a
 * copy of a word of text (case aside, from where a word starts there to
 * where one ends), or of the aliases derived from it (an ISO date's
 * weekday and month name, a time's 12-hour forms, "today" and "tomorrow"
 * of the "Now: " line's date): tokens leaving every copy are masked. A
 * claim word ("added", "sent", "noted": hx_ground_is_claim) is masked
 * unless claims (words, blank- or comma-separated) license it, a
 * negation stands in the three words of its clause before it, or one
 * follows it ("I booked nothing"). Markup ("</tool_call>",
 * "<tool_response>", "<think>", "<|", special tokens, and "<tool_call>"
 * when trigger is NULL) is masked; trigger (borrowed, static: what begins
 * a call this turn, or NULL) is let through for the grammar. *in_call
 * (borrowed; NULL: never) is non-zero while a call is written: the stage
 * then does nothing. Tokens more than a margin below the best are masked
 * unjudged; when no token is left the logits stay as they were. Text
 * between two HX_GROUND_RESULT bytes is a tool's result (JSON): each
 * object of its outermost list is an item (an event, a message, a file),
 * a result with no list is one, and the facts of one clause of the answer
 * (up to , ; : ! ? a sentence's or line's end, "and", "then") are copies
 * from one item or from outside every result: a title is not paired with
 * another event's time. A result's names (the string values of "title",
 * "subject", "name", "filename", "path", "location", and the names and
 * addresses of "from", "to", "cc") are said whole: a copy that begins with
 * a fact and runs into one goes on to its end ("Check-in with Tomás", not
 * "Check-in") unless the same words stand elsewhere, outside every name;
 * a result's keys are no copy. A number copied from before an "AM" or "PM" is
 * followed by it ("2:00 PM", never "2:00" of 14:00). The stage owns
 * copies of text and claims; HX_OK or HX_ERR_NOMEM. */
#define HX_GROUND_RESULT '\x1e'
int hx_ground_stage_new(const hx_vocab *v, const char *text, const char *claims,
                        const char *trigger, const int *in_call, hx_sampler_stage *out);
/* Whether w[0, n) is a claim word, case aside. */
int hx_ground_is_claim(const char *w, size_t n);
/* Where an answer cut short of where the model ended it (a repeat, a
 * limit) may end under the stage hx_ground_stage_new makes of text and
 * claims: into *end, the longest prefix of answer[0, n) whose bytes the
 * stage lets through and that ends a word where the stage lets the turn
 * end (an unlicensed "Sent" does not; its trailing blanks dropped); n
 * when the whole may end. HX_OK or HX_ERR_NOMEM. */
int hx_ground_end(const char *text, const char *claims, const char *answer, size_t n,
                  size_t *end);
/* ---- what a request read and did (agent/evidence.c), from the trace's
 * "calls" (name, arguments, status, by, result) ---- */
/* The effect (HX_EFFECT_*) of tool in reg; HX_EFFECT_READ for a tool
 * reg does not know (or no reg, no name). */
int hx_agent_effect_of(const hx_tools *reg, const char *tool);
/* The claim words (hx_ground_is_claim) the calls license, ' ' separated,
 * appended to out: "added booked ..." after an event was created, "sent
 * queued ..." after a mail, "noted stored ..." after a memory, "declined"
 * after the user refused one (not the policy, not a missing terminal),
 * "cancelled canceled" after a read whose result holds an item cancelled
 * (a state the results report: "is the meeting still on?");
 * HX_OK or HX_ERR_NOMEM. reg gives other tools' effects. */
int hx_agent_claims(const cJSON *calls, const hx_tools *reg, hx_buf *out);
/* What the successful reads returned, one object per item: {"kind":
 * "event"|"free"|"busy"|"mail"|"file"|"memory", "tool", the item's fields
 * (title, start, end, calendar; date, from, subject, a search hit's
 * snippet and "lines" the answer names of a message read; path and "lines": [{"line", "text"}];
 * id, text), "cited": whether answer names it}; each thing once (a
 * message searched then read, an event two lists hold), as read last.
 * Caller frees. */
cJSON *hx_agent_read(const cJSON *calls, const hx_tools *reg, const char *answer);
/* What the writes and sends did: {"action": "added", "changed",
 * "cancelled", "queued", "saved", "stored", "forgot", "done" or, for one
 * refused or failed that no later call of its tool got done, "not sent" /
 * "not done"; "tool", "status", "arguments", "text": one line saying it
 * ("Budget review, 2027-12-12 14:00-14:30 (calendar work)"), "result" of
 * a successful one, "by" (who refused) and "error" of one that was not}.
 * A write or send in not_run (the trace's: stopped before it ran) that no
 * call of its tool got done is "not done" / "not sent" too, with status
 * "not run" and the error saying what stopped it. Caller frees. */
cJSON *hx_agent_done(const cJSON *calls, const cJSON *not_run, const hx_tools *reg);
/* One read item as a line (lines of a file or message, or a search hit's
 * snippet, on lines of their own after it), appended to b. */
void hx_agent_read_line(const cJSON *item, hx_buf *b);
/* Removes markup from s in place ("<tool_call>", "</tool_call>",
 * "<tool_response>", "</tool_response>", "<think>", "</think>", and
 * "<|...|>" tokens spelled out), also where taking one out joins
 * another ("</tool<think>_call>"); returns the new length. */
size_t hx_strip_markup(char *s);
/* How many last bytes of s[0, n) begin such markup (to hold back while
 * streaming); 0 if none. */
size_t hx_markup_prefix(const char *s, size_t n);
/* The most tool calls the planner runs from one turn (the grammar allows
 * no more). */
#define HX_AGENT_MAX_CALLS 8
/* The tool-call style (HX_CALLS_*) of a template family (HX_TPL_*). */
int hx_agent_call_style(int family);
hx_source_engine_params hx_source_engine_default_params(void);
/* A source over model m (borrowed; must outlive the source) whose sampler's
 * first stage is the tool-call grammar for the given tools (names and
 * argument schemas, copied). Keeps the KV cache between turns and reuses
 * its longest common prefix with the next prompt. */
/* Sets what the prompt family asks of the source: the call style, one-line
 * turns for the compact style, and for a model that only falls back to it
 * (hx_tpl_declared false) compact_json, a repeat penalty (small models loop
 * on digits; unless sp already has one) and an 8192 context (cheap KV, long
 * prompts in a small vocabulary). */
void hx_source_engine_style(hx_source_engine_params *ep, int family, const hx_model *m);
int hx_source_engine_new(hx_model *m, const hx_tool_spec *tools, int n_tools,
                         const hx_source_engine_params *p, hx_source *out,
                         hx_err *err);
/* Switches an engine source's LoRA adapters between requests without
 * reloading the model: ads[0..n) with their scales (borrowed: they must
 * outlive the source or the next switch; n = 0: none). What the source
 * kept from earlier turns (the KV rows, its token cache, the drafts'
 * state) was computed under the old set and is dropped: the next request
 * prefills anew, or from a prefix cache on disk made under the new set.
 * Errors: hx_ctx_set_adapters's (the set is unchanged then);
 * HX_ERR_INVALID for a source that is not an engine source. */
int hx_source_engine_set_adapters(hx_source *s, hx_adapter *const *ads,
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
    float copy_bias;           /* as hx_source_engine_params'; 0: none */
} hx_engine_turn;
/* Applies t to s from its next begin on: the tools, the schema, the
 * sampler's parameters and the copy bias replace those it had (its
 * compiled grammars are dropped; its KV cache is kept), and what a
 * planner's request set (set_ground, set_arg_check, set_refused_calls) is
 * forgotten, so that one request's conversation never holds the next
 * request's answers. Errors:
 * HX_ERR_NOMEM; HX_ERR_INVALID for a source that is not an engine source.
 * A schema the grammar cannot enforce fails the next HX_CHOICE_SCHEMA
 * begin (hx_agent_schema_usable checks it first). */
int hx_source_engine_configure(hx_source *s, const hx_engine_turn *t, hx_err *err);
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
void hx_source_engine_add_stats(hx_source *s, hx_gen_stats *acc);
/* Where the latest turn's time to first token went, in milliseconds:
 * tokenizing the prompt, finding the reused prefix (in memory, or loaded
 * from the prefix cache on disk), prefilling the tokens not reused,
 * setting up the sampler and its grammar, and producing the first token
 * (0 until it came); and, after it, saving the stable head to disk (done
 * when the turn ends: 0 until then, or when nothing was saved). */
typedef struct hx_turn_timing {
    double tokenize_ms, load_ms, prefill_ms, save_ms, sampler_ms, first_ms;
    int n_prompt, n_reused, n_loaded; /* n_loaded: of n_reused, from disk */
} hx_turn_timing;
/* s's latest turn's timing into *t (zeros for a source that is not an
 * engine source). */
void hx_source_engine_timing(const hx_source *s, hx_turn_timing *t);
/* The inference context an engine source decodes in (borrowed: the
 * source owns it), for a scheduler that routes its decodes
 * (hx_ctx_set_decode_hook); NULL for another source. */
hx_ctx *hx_source_engine_ctx(hx_source *s);
/* Ends the turn the planner stopped reading (a request's last), so that
 * its counters and its measurements for the loop are taken now; no-op for
 * another source or when no turn is open. */
void hx_source_engine_end_turn(hx_source *s);
/* The prompt's tokens exactly as the engine source feeds them to the model
 * (special tokens parsed, BOS if the vocabulary asks for it): *out is
 * malloc'd (caller frees); returns the count, or -rc with err set. Chat
 * training data (nightly/chatdata.c) tokenizes with it too. */
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
    int answer;         /* HX_ANSWER_MODEL (default): the model's answer,
                           grounded; HX_ANSWER_RESULTS: the model only
                           calls, and the answer is written from the
                           calls (hx_agent_results_answer), the model's
                           words neither streamed nor kept */
} hx_planner_params;
enum { HX_ANSWER_MODEL = 0, HX_ANSWER_RESULTS = 1 };
/* The answer (HX_ANSWER_*) for model m (borrowed; NULL: none) in prompt
 * style family: the results answer in the compact styles (a small model's,
 * trained for them or falling back to them: its sentences are not to be
 * trusted), else the model's. */
int hx_agent_answer_for(int family, const hx_model *m);
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
/* Opens the policy from the config's "policy" object (NULL: the defaults)
 * and, if audit_path is not NULL ("": the data directory's audit.jsonl),
 * the audit log. Free both with hx_agent_policy_close (NULL is a no-op). */
int hx_agent_policy_open(const cJSON *policy, const char *audit_path, hx_policy **p,
                         hx_audit **a, hx_err *err);
void hx_agent_policy_close(hx_policy *p, hx_audit *a);
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

/* ---- a tool result cut to fit the context (agent/fit.c) ---- */
typedef struct hx_fit {
    const hx_source *src; /* its limit (version 6) and count */
    int family;           /* the template (HX_TPL_*) the prompt is rendered in */
    const cJSON *msgs;    /* the conversation: [0] the system message */
    int from;             /* where the current request's messages start */
    const cJSON *tools;   /* the tool list */
    const char *tool;     /* the tool whose result it is */
} hx_fit;
/* Cuts result (an object, changed in place) so that, as the next tool
 * message of the conversation, it leaves the model room for a turn (256
 * positions, or an eighth of the context): the longest list keeps its
 * first items, else the longest text its beginning, and "not_shown" says
 * what was left out ("and 37 more events not shown ...") and how to get
 * it (the start to call again from, files.read's offset, a narrower
 * search); if nothing fits, that is all it says. Older exchanges are not
 * counted (they are dropped when the context is full). Returns 0 when it
 * fit as it was (or the source gives no limit), 1 when it was cut. */
int hx_fit_result(const hx_fit *f, cJSON *result);

/* The writes and sends of a run (hx_planner_run's trace) that did not
 * happen (agent/evidence.c): each call record that was refused or failed
 * and that no later call of the same tool got done, and each not_run
 * record naming a write or send that no call of its tool got done
 * (status "not run"), with "effect" ("write" or "send") added. An array
 * (caller frees; NULL on out of memory). */
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
 * "episode", "results_answer"}. "calls" are the calls run, refused or
 * malformed (with a results answer, a result cut to fit the context keeps
 * its whole as "result_whole"); "not_run"
 * those a limit stopped before they ran, never sent to a tool: {"name",
 * "arguments"} of a complete one, or "text" of one cut mid-way (and
 * "name" where it was written), with "reason" ("cut", "repeated", "not
 * started") and "limit" (the status, or "repeat guard"). Returns HX_OK
 * when answered, HX_ERR_RANGE (steps, tokens), HX_ERR_TIMEOUT,
 * HX_ERR_CANCELLED, or the source's error; err holds the message. */
int hx_planner_run(hx_planner *pl, const char *request,
                   const hx_planner_io *io, cJSON **trace, hx_err *err);
/* Runs request with no model: the call name(args) a rule chose for it
 * (hx_agent_tool_tier) runs as a model's call would (the tools offered,
 * policy, consent, audit, taint), and the answer is written from its
 * result alone (hx_agent_tier_answer), streamed and kept in the
 * conversation; the episode's model is "none (governor.tool_tier)".
 * Returns and *trace as hx_planner_run's (steps 1, tokens 0). */
int hx_planner_run_call(hx_planner *pl, const char *request, const char *name,
                        const cJSON *args, const hx_planner_io *io, cJSON **trace,
                        hx_err *err);
/* Decodes ahead what the next request's prompt starts with (the system
 * text, the tools, the conversation so far and its clock line), where the
 * source can (hx_source.prepare), so that the request's first token waits
 * only for its own words; for callers waiting on a user (chat). The clock
 * is the minute's: a request in a later minute decodes the clock's end
 * again. HX_OK (also when the source cannot), or the source's error. */
int hx_planner_prepare(hx_planner *pl, hx_err *err);
/* Offers the tools filter offers (as hx_planner_params.tools; borrowed:
 * it must outlive the planner or the next call; NULL: all) from the next
 * request on, in place of those it offered: a prompt trimmed per request.
 * A list with a self-described tool taints the conversation, which stays
 * so. HX_OK, or HX_ERR_NOMEM (the list is unchanged). */
int hx_planner_set_tools(hx_planner *pl, const char *filter);
/* The prompt style (HX_TPL_*) of the model its source now runs, from the
 * next request on (the conversation is kept and written in it). */
void hx_planner_set_family(hx_planner *pl, int family);
/* Who writes the answers (HX_ANSWER_*) from the next request on. */
void hx_planner_set_answer(hx_planner *pl, int answer);
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
/* The tool a call cut before its end names, as far as it was written
 * ("name": "x", with any spacing, the name whole), into out (n bytes);
 * "" when it names none or the name does not fit (n > 0). */
void hx_turn_call_name(const char *text, char *out, size_t n);

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

/* The tool filter (as hx_planner_params.tools: names, comma-separated) of
 * reg's tools in the domains (calendar, mail, files, memory) a request's
 * words call for, by fixed lists of word stems (agent/toolpick.c); for a
 * question that names no change, only their reading tools. For a prompt
 * trimmed to fit a small context. Returns the number of tools (0: none
 * recognised, filter ""), -1 when filter (n bytes) is too small. */
int hx_agent_tools_for_request(const hx_tools *reg, const char *request, char *filter,
                               size_t n);
/* The tier of a request (agent/toolpick.c): HX_TIER_SMALL when
 * hx_agent_tools_for_request cuts its tool list to reading tools only (a
 * plain read or recall, which cannot change anything: a small model may
 * serve it), else HX_TIER_FULL. filter as there. */
enum { HX_TIER_FULL = 0, HX_TIER_SMALL = 1 };
int hx_agent_request_tier(const hx_tools *reg, const char *request, char *filter, size_t n);
/* Whether a request asks to remove or change something the user kept
 * (agent/toolpick.c): a word of removal ("forget", "delete", "cancel",
 * "remove", in English, German, French and Spanish) or of a fact's change
 * ("update", "no longer", "instead", "wrong"); or it begins with a yes
 * ("yes", "ok", "go ahead") to the assistant's last message before it
 * (prev, NULL: none) that has such a word ("Shall I forget it?"). A tool
 * that removes (HX_TOOL_REMOVES) runs only for such a request: asked to
 * remember a new fact, a model does not forget an old one on its own. */
int hx_agent_asks_removal(const char *request, const char *prev);
/* Whether a request asks to move an event (agent/toolpick.c): a word of
 * moving ("move", "shift", "reschedule", "postpone", "push", in English,
 * German, French and Spanish). */
int hx_agent_asks_move(const char *request);
/* The tool tier (agent/toolpick.c): 1 when the rules serve request
 * exactly with one call of a reading tool of reg, named in *tool
 * (static), its arguments in *args (caller frees): a calendar read of a
 * time the calendar reads, the unread mail, a memory recall, a folder's
 * list, each in a fixed form of the whole request (greetings and thanks
 * aside) with no word of a change or a condition in it; else 0 (also
 * out of memory), *args NULL. */
int hx_agent_tool_tier(const hx_tools *reg, const char *request, const char **tool,
                       cJSON **args);
/* ---- answers written from the trace (agent/answer.c) ---- */
/* The answer to a tool tier's call (the last of calls, trace records as
 * hx_planner_run's): what it found in a line, "2 events tomorrow:", then
 * each item read (hx_agent_read_line; cancelled events last, marked so),
 * the text of a message or file read, or that it found nothing, or that
 * it failed (or did not run) and its error; nothing else. malloc'd
 * (caller frees); NULL on out of memory. */
char *hx_agent_tier_answer(const cJSON *calls, const hx_tools *reg);
/* The string values (3 bytes or more) of a call's arguments j, each
 * followed by a NUL, appended to b. */
void hx_agent_arg_strings(const cJSON *j, hx_buf *b);
/* Blanks in text (a tool's error) what it quotes of echo's values
 * (hx_agent_arg_strings'): a value whole after a quote (' or "), and a
 * span in single quotes that is part of one. An error that quotes the
 * call ("cannot read 'blorp' in the time expression 'blorp 7731-08-28'")
 * repeats the model's own words, no fact of the world; what it says
 * unquoted stays ("calendars: work, home"). */
void hx_agent_blank_echoes(char *text, const hx_buf *echo);
/* Why a refused write or send (an item of hx_agent_done with status
 * "refused") did not run and what would let it run, from its "by" (who
 * decided: sandbox/policy.c; NULL as ""): "was declined by you", "needs
 * your consent and there is no terminal to ask; rerun in a terminal or
 * with --yes". A static string, to follow the tool's name. */
const char *hx_agent_refusal_reason(const char *by);

/* The results answer to a request from its calls and not_run (the
 * trace's), for a model whose own words are not shown
 * (hx_planner_params.answer): each write or send done ("Added: ...",
 * with the busy events it overlaps) or not and why (hx_agent_done); then
 * what each read found, as hx_agent_tier_answer says it (a call repeated,
 * once; a read that failed only when no read found anything); a tool's
 * error without what it quotes of the call's own words. With no call,
 * that nothing was read, changed or sent, the request's clock (its
 * "Now: ..." line; NULL: none) and the memories recalled for it
 * (recalled: "- [kind #id] text" lines; NULL: none). Markup taken out
 * (hx_strip_markup), as from a model's answer. malloc'd (caller frees);
 * NULL on out of memory. */
char *hx_agent_results_answer(const cJSON *calls, const cJSON *not_run, const char *clock,
                              const char *recalled, const hx_tools *reg);

#endif /* HX_AGENT_H */
