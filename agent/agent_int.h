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
};
const char *hx_tpl_name(int family);     /* "qwen3", ...; static */
int hx_tpl_parse_name(const char *name); /* -1 if unknown */
/* The family for a model: the GGUF key hearth.prompt_style if set, else
 * from tokenizer.chat_template and the token set. g, v may be NULL. */
int hx_tpl_detect(const hx_gguf *g, const hx_vocab *v);

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
/* JSON as Python's json.dumps writes it (", " and ": ", non-ASCII kept;
 * indent > 0: "," and newlines), which is what the templates' tojson
 * gives. Appends to out. */
int hx_json_py(const cJSON *j, int indent, hx_buf *out);

/* ---- token sources (agent/source.c): what writes the assistant's turns.
 * The planner drives any source through this table: the engine (a model,
 * its KV cache and the tool-call grammar) or, in tests, a scripted test
 * double. Versioned: fields are only added at the end. ---- */
#define HX_SOURCE_API 1
enum { HX_CHOICE_AUTO = 0, HX_CHOICE_REQUIRED = 1, HX_CHOICE_NONE = 2 };
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
    int max_calls;        /* most calls in one turn; 0: HX_AGENT_MAX_CALLS
                             (small models call until the budget ends) */
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
} hx_engine_source_params;
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
int hx_engine_source_new(hx_model *m, const hx_tool_spec *tools, int n_tools,
                         const hx_engine_source_params *p, hx_source *out,
                         hx_err *err);
/* The prompt's tokens exactly as the engine source feeds them to the model
 * (special tokens parsed, BOS if the vocabulary asks for it): *out is
 * malloc'd (caller frees); returns the count, or -rc with err set. Chat
 * training data (agent/chatdata.c) tokenizes with it too. */
int hx_source_tokenize(const hx_vocab *v, const char *prompt, int32_t **out,
                       hx_err *err);

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

typedef struct hx_planner hx_planner;
hx_planner *hx_planner_new(const hx_planner_deps *d, const hx_planner_params *p);
void hx_planner_free(hx_planner *pl); /* NULL is a no-op */
/* Runs one request to a plain-text answer or a limit, keeping the
 * conversation for the next request (chat). *trace (caller frees with
 * cJSON_Delete; may be NULL on out of memory) holds {"request", "answer",
 * "status" ("answered", "step limit", "token budget", "time budget",
 * "cancelled", "error"), "outcome", "steps", "tokens", "prompt_tokens",
 * "seconds", "calls": [...], "messages": [...], "episode"}. Returns HX_OK
 * when answered, HX_ERR_RANGE (steps, tokens), HX_ERR_TIMEOUT,
 * HX_ERR_CANCELLED, or the source's error; err holds the message. */
int hx_planner_run(hx_planner *pl, const char *request,
                   const hx_planner_io *io, cJSON **trace, hx_err *err);
/* Forgets the last request and everything after it; 0 if there was none. */
int hx_planner_undo(hx_planner *pl);
/* The conversation so far (borrowed). */
const cJSON *hx_planner_messages(const hx_planner *pl);

/* HX_OK if the grammar can enforce the schema (JSON text; NULL = any
 * object); otherwise the compiler's error naming the keyword and path. */
int hx_agent_schema_usable(const char *schema_json, hx_err *err);

#endif /* HX_AGENT_INT_H */
