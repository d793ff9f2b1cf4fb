/* chatdata.h: the chat training data (nightly/chatdata.c), part of nightly.h:
 * JSONL conversations (hearth datagen's format) rendered with the agent's
 * templates, tokenized as the engine source tokenizes prompts, with the
 * assistant-written spans as the loss mask, cached next to the data. */
#ifndef HX_CHATDATA_H
#define HX_CHATDATA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "engine/engine.h"

/* One conversation: a line {"messages": [...], "tools": [...], "style":
 * "compact", ...}; messages and tools borrowed from the parsed line. */
typedef struct hx_chat_doc {
    const char *path;
    long line;              /* 1-based */
    const cJSON *messages;
    const cJSON *tools;     /* NULL if absent */
    int family;             /* HX_TPL_* */
} hx_chat_doc;

/* Calls fn for every non-blank line of the JSONL file path. style > 0
 * (HX_TPL_*) renders every line so; 0 takes each line's "style" (then
 * required). A line that is not such an object fails with HX_ERR_FORMAT
 * naming the file and line; fn's nonzero return stops the walk. */
typedef int (*hx_chat_fn)(void *user, const hx_chat_doc *d, hx_err *err);
int hx_chat_each(const char *path, int style, hx_chat_fn fn, void *user,
                 hx_err *err);
/* The same over len bytes of JSONL in memory; path names it in errors. */
int hx_chat_each_buf(const char *path, const char *text, size_t len, int style,
                     hx_chat_fn fn, void *user, hx_err *err);

/* Whether message m is a training target: an assistant message, unless it
 * has "loss": false (a deliberate slip in a recovery lesson, sim/dgrun.c:
 * context only). */
int hx_chat_is_target(const cJSON *m);

/* A byte range [start, end) of a rendered conversation. */
typedef struct hx_chat_span {
    size_t start, end;
} hx_chat_span;

/* Renders the whole conversation (no generation prompt) into out. With
 * spans != NULL, also the bytes each assistant turn writes: from the end
 * of the prompt the planner would render for that turn (the conversation
 * so far plus the generation prompt, e.g. "Assistant:") to the end of the
 * turn (its text, its <tool_call> blocks and the newline ending it),
 * except turns marked "loss": false (context only, never a target);
 * *spans is malloc'd (caller frees), *n_spans their count. Fails with
 * HX_ERR_FORMAT if a turn's prompt is not a prefix of the rendering. */
int hx_chat_render(const hx_chat_doc *d, hx_buf *out, hx_chat_span **spans,
                   int *n_spans, hx_err *err);
/* hx_chat_render, appending to marks (if not NULL) the ranges of out that
 * the template wrote (hx_tpl_render_marked), for hx_chat_tokens_add_marked. */
struct hx_tpl_marks;
int hx_chat_render_marked(const hx_chat_doc *d, hx_buf *out, struct hx_tpl_marks *marks,
                          hx_chat_span **spans, int *n_spans, hx_err *err);

/* Token stream of a chat file for hx_train_data: tokens, mask (1 on the
 * tokens inside assistant spans; HX_CHAT_VALUE_EDGE where a tool call's
 * argument value starts or ends, when asked), doc (the conversation's
 * index). */
typedef struct hx_chat_tokens {
    int32_t *tokens;
    uint8_t *mask;
    int32_t *doc;
    size_t n;
    int32_t n_docs;
    size_t n_masked;
    size_t bytes;           /* rendered text */
    int from_cache;         /* 1 if read from the cache file */
    size_t cap;             /* allocated entries */
    int mark_values;        /* set before adding: mark the value edges */
} hx_chat_tokens;
/* The mask of an assistant token holding a decision where to copy from: the
 * first byte of a string value in a tool call's arguments (which word a
 * title or a search starts at), or its closing quote (where it ends). A
 * small model's calls go wrong there most (models/README.md); hearth train
 * --value-weight counts these targets more. */
#define HX_CHAT_VALUE_EDGE 2
void hx_chat_tokens_free(hx_chat_tokens *t);

/* Tokenizes one rendered conversation as the engine source tokenizes a
 * prompt (hx_source_tokenize) and appends it to t with its mask and doc
 * id t->n_docs (then incremented). With t->mark_values, the value edges
 * of the <tool_call> JSON in the spans are marked HX_CHAT_VALUE_EDGE. A
 * token straddling a span boundary fails with HX_ERR_FORMAT. */
int hx_chat_tokens_add(hx_chat_tokens *t, const hx_vocab *v, const char *text,
                       size_t len, const hx_chat_span *spans, int n_spans,
                       hx_err *err);
/* The same with special tokens read only inside marks, as the planner's
 * prompts are (hx_source_tokenize_marked): training sees a mail that
 * spells "<|im_start|>" as the model will at run time. */
int hx_chat_tokens_add_marked(hx_chat_tokens *t, const hx_vocab *v, const char *text,
                              size_t len, const struct hx_tpl_marks *marks,
                              const hx_chat_span *spans, int n_spans, hx_err *err);

/* Every conversation of path, rendered and tokenized with the vocabulary
 * of the GGUF vocab_path, the value edges marked. The result is cached in path + ".tok" (keyed by
 * the SHA-256 of the data and vocabulary files and the style) and read
 * from there when it matches; a cache that cannot be written is only
 * warned about. progress: hx_progress on stderr (silent if not a tty).
 * *family gets the style used (one for the whole file, else
 * HX_ERR_FORMAT). */
int hx_chat_load(const char *path, int style, const char *vocab_path,
                 int progress, hx_chat_tokens *out, int *family, hx_err *err);

#endif /* HX_CHATDATA_H */
