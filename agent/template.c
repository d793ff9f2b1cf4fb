/* template.c: chat prompts in C, one renderer per template family (Qwen3,
 * Qwen2.5/Hermes ChatML, Llama 3.1, a compact style for small models and
 * its brief variant). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

static const char *const tpl_names[] = {"", "qwen3", "chatml", "llama3",
                                        "compact", "brief"};

const char *hx_tpl_name(int family)
{
    return family >= HX_TPL_QWEN3 && family <= HX_TPL_BRIEF ? tpl_names[family]
                                                            : "unknown";
}

int hx_tpl_parse_name(const char *name)
{
    for (int f = HX_TPL_QWEN3; f <= HX_TPL_BRIEF; f++)
        if (name && !strcmp(name, tpl_names[f])) return f;
    return -1;
}

/* ---- JSON as Python's json.dumps (and @huggingface/jinja's tojson) ---- */
static void json_str(const char *s, hx_buf *out)
{
    hx_buf_putc(out, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': hx_buf_puts(out, "\\\""); break;
        case '\\': hx_buf_puts(out, "\\\\"); break;
        case '\b': hx_buf_puts(out, "\\b"); break;
        case '\f': hx_buf_puts(out, "\\f"); break;
        case '\n': hx_buf_puts(out, "\\n"); break;
        case '\r': hx_buf_puts(out, "\\r"); break;
        case '\t': hx_buf_puts(out, "\\t"); break;
        default:
            if (*p < 0x20) hx_buf_printf(out, "\\u%04x", *p);
            else hx_buf_putc(out, (char)*p);
        }
    }
    hx_buf_putc(out, '"');
}

static void json_num(double v, hx_buf *out)
{
    char b[64];
    if (v == floor(v) && fabs(v) < 1e15) hx_buf_printf(out, "%.0f", v);
    else if (hx_py_float_repr(v, b, sizeof b) >= 0) hx_buf_puts(out, b);
    else hx_buf_puts(out, "null");
}

static void json_indent(int indent, int depth, hx_buf *out)
{
    hx_buf_putc(out, '\n');
    for (int i = 0; i < indent * depth; i++) hx_buf_putc(out, ' ');
}

static void json_py(const cJSON *j, int indent, int depth, hx_buf *out)
{
    if (cJSON_IsString(j)) return json_str(j->valuestring, out);
    if (cJSON_IsNumber(j)) return json_num(j->valuedouble, out);
    if (cJSON_IsTrue(j)) return (void)hx_buf_puts(out, "true");
    if (cJSON_IsFalse(j)) return (void)hx_buf_puts(out, "false");
    if (!cJSON_IsArray(j) && !cJSON_IsObject(j))
        return (void)hx_buf_puts(out, "null");
    int obj = cJSON_IsObject(j);
    hx_buf_putc(out, obj ? '{' : '[');
    for (const cJSON *c = j->child; c; c = c->next) {
        if (c != j->child) hx_buf_puts(out, indent ? "," : ", ");
        if (indent) json_indent(indent, depth + 1, out);
        if (obj) {
            json_str(c->string ? c->string : "", out);
            hx_buf_puts(out, ": ");
        }
        json_py(c, indent, depth + 1, out);
    }
    if (indent && j->child) json_indent(indent, depth, out);
    hx_buf_putc(out, obj ? '}' : ']');
}

int hx_json_py(const cJSON *j, int indent, hx_buf *out)
{
    json_py(j, indent, 0, out);
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}

/* ---- the renderer's output: the text, and where asked the byte ranges
 * the template wrote itself (hx_tpl_marks): its markers and fixed text.
 * Everything else (messages' content, names, arguments, the tool list) is
 * written straight to out and never read as a special token. ---- */
typedef struct tw {
    hx_buf *out;
    hx_tpl_marks *marks; /* NULL: not asked */
} tw;

static void mark(tw *w, size_t start)
{
    hx_tpl_marks *m = w->marks;
    size_t end = w->out->len;
    if (!m || end <= start || m->oom) return;
    if (m->n && m->s[m->n - 1].end == start) { /* one template piece after another */
        m->s[m->n - 1].end = end;
        return;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 32;
        hx_span *ns = hx_realloc(m->s, (size_t)cap * sizeof *ns);
        if (!ns) {
            m->oom = 1;
            return;
        }
        m->s = ns;
        m->cap = cap;
    }
    m->s[m->n++] = (hx_span){start, end};
}

/* The template's own text. */
static void lit(tw *w, const char *s)
{
    size_t start = w->out->len;
    hx_buf_puts(w->out, s);
    mark(w, start);
}

static void litf(tw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void litf(tw *w, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lit(w, buf);
}

void hx_tpl_marks_free(hx_tpl_marks *m)
{
    if (!m) return;
    free(m->s);
    memset(m, 0, sizeof *m);
}

/* ---- message accessors ---- */
static const char *m_str(const cJSON *m, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, key));
    return s ? s : "";
}

static int m_is(const cJSON *m, const char *role)
{
    return m && !strcmp(m_str(m, "role"), role);
}

/* The call's function object ({"name","arguments"}), unwrapping
 * {"type":"function","function":{...}} as the templates do. */
static const cJSON *call_fn(const cJSON *call)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "function");
    return f ? f : call;
}

/* Arguments as the templates print them: a string as is, else tojson. */
static void call_args(const cJSON *fn, int indent, hx_buf *out)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    if (cJSON_IsString(a)) hx_buf_puts(out, a->valuestring);
    else json_py(a, indent, 0, out);
}

static void tools_lines(const cJSON *tools, hx_buf *out)
{
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
        hx_buf_putc(out, '\n');
        json_py(t, 0, 0, out);
    }
}

/* ---- Qwen3 and Qwen2.5/Hermes ChatML ---- */
static const char chatml_tools_head[] =
    "# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within "
    "<tools></tools> XML tags:\n<tools>";
static const char chatml_tools_tail[] =
    "\n</tools>\n\nFor each function call, return a json object with function "
    "name and arguments within " HX_TOOL_CALL_OPEN HX_TOOL_CALL_CLOSE " XML tags:\n"
    HX_TOOL_CALL_OPEN "\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n" HX_TOOL_CALL_CLOSE "<|im_end|>\n";

static void chatml_system(const cJSON *msgs, const cJSON *tools, tw *w)
{
    const cJSON *m0 = cJSON_GetArrayItem(msgs, 0);
    int has_tools = cJSON_GetArraySize(tools) > 0;
    if (has_tools) {
        lit(w, "<|im_start|>system\n");
        if (m_is(m0, "system")) {
            hx_buf_puts(w->out, m_str(m0, "content"));
            lit(w, "\n\n");
        }
        lit(w, chatml_tools_head);
        tools_lines(tools, w->out);
        lit(w, chatml_tools_tail);
    } else if (m_is(m0, "system")) {
        lit(w, "<|im_start|>system\n");
        hx_buf_puts(w->out, m_str(m0, "content"));
        lit(w, "<|im_end|>\n");
    }
}

/* Qwen3's last_query_index: the last user message that is not a wrapped
 * tool response. */
static int last_query_index(const cJSON *msgs)
{
    int n = cJSON_GetArraySize(msgs);
    for (int i = n - 1; i >= 0; i--) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        const char *c = m_str(m, "content");
        size_t l = strlen(c);
        int wrapped = !strncmp(c, "<tool_response>", 15) && l >= 16 &&
                      !strcmp(c + l - 16, "</tool_response>");
        if (m_is(m, "user") && !wrapped) return i;
    }
    return n - 1;
}

static const char *skip_nl(const char *s)
{
    while (*s == '\n') s++;
    return s;
}

/* Appends s[0..n) without leading/trailing newlines as selected. */
static void put_trim(hx_buf *out, const char *s, size_t n, int lead, int trail)
{
    while (lead && n && *s == '\n') s++, n--;
    while (trail && n && s[n - 1] == '\n') n--;
    hx_buf_append(out, s, n);
}

static const char *last_strstr(const char *s, const char *pat)
{
    const char *r = NULL;
    for (const char *p = strstr(s, pat); p; p = strstr(p + 1, pat)) r = p;
    return r;
}

/* Qwen3: splits content at the last </think> into reasoning and answer. */
static void qwen3_assistant_head(const cJSON *m, int think_block, tw *w,
                                 const char **content)
{
    const char *c = m_str(m, "content");
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(m, "reasoning_content");
    hx_buf reason;
    hx_buf_init(&reason);
    if (cJSON_IsString(rc)) {
        hx_buf_puts(&reason, rc->valuestring);
    } else if (strstr(c, "</think>")) {
        /* split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
        const char *end = strstr(c, "</think>");
        hx_buf tmp;
        hx_buf_init(&tmp);
        put_trim(&tmp, c, (size_t)(end - c), 0, 1);
        const char *t = tmp.data ? tmp.data : "";
        const char *o = last_strstr(t, "<think>");
        put_trim(&reason, o ? o + 7 : t, strlen(o ? o + 7 : t), 1, 0);
        hx_buf_free(&tmp);
        c = skip_nl(last_strstr(c, "</think>") + 8);
    }
    const char *r = reason.data ? reason.data : "";
    lit(w, "<|im_start|>assistant\n");
    if (think_block || *r) {
        lit(w, "<think>\n");
        put_trim(w->out, r, strlen(r), 1, 1);
        lit(w, "\n</think>\n\n");
        c = skip_nl(c);
    }
    hx_buf_free(&reason);
    *content = c;
}

/* A call's name and arguments are the model's words: plain text. */
static void call_name(tw *w, const char *open, const cJSON *fn, const char *key)
{
    lit(w, open);
    hx_buf_puts(w->out, m_str(fn, "name"));
    litf(w, "\", \"%s\": ", key);
}

static void chatml_calls(const cJSON *m, int nl_first, tw *w)
{
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        if (c != calls->child || nl_first) lit(w, "\n");
        const cJSON *fn = call_fn(c);
        call_name(w, HX_TOOL_CALL_OPEN "\n{\"name\": \"", fn, "arguments");
        call_args(fn, 0, w->out);
        lit(w, "}\n" HX_TOOL_CALL_CLOSE);
    }
}

static void chatml_assistant(int family, const cJSON *m, int i, int last,
                             int lqi, tw *w)
{
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    int has_calls = cJSON_GetArraySize(calls) > 0;
    const char *content = m_str(m, "content");
    if (family == HX_TPL_QWEN3) {
        if (i > lqi) qwen3_assistant_head(m, last, w, &content);
        else lit(w, "<|im_start|>assistant\n");
        if (i <= lqi && strstr(content, "</think>"))
            content = skip_nl(last_strstr(content, "</think>") + 8);
        hx_buf_puts(w->out, content);
        chatml_calls(m, *content != 0, w);
    } else if (!has_calls) {
        lit(w, "<|im_start|>assistant\n");
        hx_buf_puts(w->out, content);
    } else {
        lit(w, "<|im_start|>assistant");
        if (*content) lit(w, "\n"), hx_buf_puts(w->out, content);
        chatml_calls(m, 1, w);
    }
    lit(w, "<|im_end|>\n");
}

static void chatml_tool(const cJSON *msgs, int i, int n, tw *w)
{
    const cJSON *m = cJSON_GetArrayItem(msgs, i);
    if (i == 0 || !m_is(cJSON_GetArrayItem(msgs, i - 1), "tool"))
        lit(w, "<|im_start|>user");
    lit(w, "\n<tool_response>\n");
    hx_buf_puts(w->out, m_str(m, "content"));
    lit(w, "\n</tool_response>");
    if (i == n - 1 || !m_is(cJSON_GetArrayItem(msgs, i + 1), "tool"))
        lit(w, "<|im_end|>\n");
}

static void render_chatml(int family, const cJSON *msgs, const cJSON *tools,
                          const hx_tpl_opts *o, tw *w)
{
    int n = cJSON_GetArraySize(msgs), lqi = last_query_index(msgs);
    chatml_system(msgs, tools, w);
    for (int i = 0; i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        if (m_is(m, "user") || (m_is(m, "system") && i > 0)) {
            litf(w, "<|im_start|>%s\n", m_is(m, "user") ? "user" : "system");
            hx_buf_puts(w->out, m_str(m, "content"));
            lit(w, "<|im_end|>\n");
        } else if (m_is(m, "assistant")) {
            chatml_assistant(family, m, i, i == n - 1, lqi, w);
        } else if (m_is(m, "tool")) {
            chatml_tool(msgs, i, n, w);
        }
    }
    if (o->add_generation_prompt) {
        lit(w, "<|im_start|>assistant\n");
        if (family == HX_TPL_QWEN3 && o->no_think) lit(w, "<think>\n\n</think>\n\n");
    }
}

/* ---- Llama 3.1 (tools in the first user message, its default) ---- */
/* The role names the template writes: the planner's four, else the
 * message's own (then plain text, it is the conversation's). */
static void llama_head(tw *w, const char *role)
{
    static const char *const known[] = {"system", "user", "assistant", "ipython"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(role, known[i]))
            return litf(w, "<|start_header_id|>%s<|end_header_id|>\n\n", role);
    lit(w, "<|start_header_id|>");
    hx_buf_puts(w->out, role);
    lit(w, "<|end_header_id|>\n\n");
}

/* Content without the leading and trailing characters of strip. */
static void put_stripped(hx_buf *out, const char *c, const char *strip)
{
    size_t l;
    while (*c && strchr(strip, *c)) c++;
    for (l = strlen(c); l && strchr(strip, c[l - 1]); l--) {}
    hx_buf_append(out, c, l);
}

static void llama_system(const cJSON *msgs, const cJSON *tools,
                         const hx_tpl_opts *o, tw *w)
{
    const cJSON *m0 = cJSON_GetArrayItem(msgs, 0);
    lit(w, "<|begin_of_text|>");
    llama_head(w, "system");
    if (cJSON_GetArraySize(tools) > 0) lit(w, "Environment: ipython\n");
    lit(w, "Cutting Knowledge Date: December 2023\nToday Date: ");
    hx_buf_puts(w->out, o->date && *o->date ? o->date : "26 Jul 2024");
    lit(w, "\n\n");
    if (m_is(m0, "system")) put_stripped(w->out, m_str(m0, "content"), " \n\t");
    lit(w, "<|eot_id|>");
}

static void llama_first_user(const cJSON *m, const cJSON *tools, tw *w)
{
    llama_head(w, "user");
    lit(w,
        "Given the following functions, please respond with a JSON for a "
        "function call with its proper arguments that best answers the given "
        "prompt.\n\nRespond in the format {\"name\": function name, "
        "\"parameters\": dictionary of argument name and its value}.Do not use "
        "variables.\n\n");
    for (const cJSON *t = tools->child; t; t = t->next) {
        json_py(t, 4, 0, w->out);
        lit(w, "\n\n");
    }
    put_stripped(w->out, m_str(m, "content"), " \n");
    lit(w, "<|eot_id|>");
}

static void llama_assistant(const cJSON *m, tw *w)
{
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    llama_head(w, "assistant");
    if (cJSON_GetArraySize(calls) > 0) {
        call_name(w, "{\"name\": \"", call_fn(calls->child), "parameters");
        call_args(call_fn(calls->child), 0, w->out);
        lit(w, "}<|eot_id|>");
        return;
    }
    put_stripped(w->out, m_str(m, "content"), " \n");
    lit(w, "<|eot_id|>");
}

static void render_llama3(const cJSON *msgs, const cJSON *tools,
                          const hx_tpl_opts *o, tw *w)
{
    int n = cJSON_GetArraySize(msgs), i = 0, has_tools = cJSON_GetArraySize(tools) > 0;
    llama_system(msgs, tools, o, w);
    if (m_is(cJSON_GetArrayItem(msgs, 0), "system")) i = 1;
    if (has_tools && i < n) llama_first_user(cJSON_GetArrayItem(msgs, i++), tools, w);
    for (; i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        if (m_is(m, "assistant")) {
            llama_assistant(m, w);
            continue;
        }
        llama_head(w, m_is(m, "tool") ? "ipython" : m_str(m, "role"));
        if (m_is(m, "tool")) /* a string "is iterable": the template's tojson */
            json_str(m_str(m, "content"), w->out);
        else
            put_stripped(w->out, m_str(m, "content"), " \n");
        lit(w, "<|eot_id|>");
    }
    if (o->add_generation_prompt) llama_head(w, "assistant");
}

/* ---- compact: plain-text markers and one line per tool ---- */
int hx_tpl_compact(int family)
{
    return family == HX_TPL_COMPACT || family == HX_TPL_BRIEF;
}

/* "- name(arg: type, ...): the description's first sentence", or in the
 * brief style "- name(arg, ...)". */
static void compact_tool(const cJSON *t, int brief, hx_buf *out)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(fn, "parameters"), "properties");
    hx_buf_printf(out, "- %s(", m_str(fn, "name"));
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        hx_buf_printf(out, "%s%s", p == props->child ? "" : ", ", p->string);
        if (!brief) hx_buf_printf(out, ": %s", m_str(p, "type")[0] ? m_str(p, "type") : "any");
    }
    if (brief) {
        hx_buf_puts(out, ")\n");
        return;
    }
    const char *d = m_str(fn, "description");
    size_t n = strcspn(d, ".\n");
    hx_buf_printf(out, "): %.*s\n", (int)(n < 80 ? n : 80), d);
}

static void render_compact(const cJSON *msgs, const cJSON *tools, int brief,
                           const hx_tpl_opts *o, tw *w)
{
    /* The tool list first: it is the same for every user and request, so
     * prompts share it as a prefix (the prefix cache, and packed training
     * windows computing it once for many conversations). */
    if (cJSON_GetArraySize(tools) > 0) {
        lit(w, "Tools (call one or more as " HX_TOOL_CALL_OPEN "{\"name\": ..., "
               "\"arguments\": {...}}" HX_TOOL_CALL_CLOSE "):\n");
        for (const cJSON *t = tools->child; t; t = t->next) compact_tool(t, brief, w->out);
    }
    int n = cJSON_GetArraySize(msgs);
    for (int i = 0; i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        if (m_is(m, "tool")) {
            lit(w, "Tool: <tool_response>");
            hx_buf_puts(w->out, m_str(m, "content"));
            lit(w, "</tool_response>\n");
            continue;
        }
        litf(w, "%s: ", m_is(m, "system") ? "System" : m_is(m, "user") ? "User" : "Assistant");
        hx_buf_puts(w->out, m_str(m, "content"));
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
            call_name(w, HX_TOOL_CALL_OPEN "{\"name\": \"", call_fn(c), "arguments");
            call_args(call_fn(c), 0, w->out);
            lit(w, "}" HX_TOOL_CALL_CLOSE);
        }
        lit(w, "\n");
        /* the tool list and the system message that is the same in
         * every request: the style has no end-of-turn token to end it */
        if (i == 0 && m_is(m, "system") && w->marks) w->marks->head = w->out->len;
    }
    if (o->add_generation_prompt) lit(w, "Assistant:");
}

hx_tpl_opts hx_tpl_default_opts(void)
{
    hx_tpl_opts o = {1, 0, NULL};
    return o;
}

int hx_tpl_render(int family, const cJSON *messages, const cJSON *tools,
                  const hx_tpl_opts *o, hx_buf *out)
{
    return hx_tpl_render_marked(family, messages, tools, o, out, NULL);
}

int hx_tpl_render_marked(int family, const cJSON *messages, const cJSON *tools,
                         const hx_tpl_opts *o, hx_buf *out, hx_tpl_marks *marks)
{
    hx_tpl_opts d = hx_tpl_default_opts();
    tw w = {out, marks};
    if (!o) o = &d;
    if (!cJSON_IsArray(messages)) return HX_ERR_INVALID;
    switch (family) {
    case HX_TPL_QWEN3:
    case HX_TPL_CHATML: render_chatml(family, messages, tools, o, &w); break;
    case HX_TPL_LLAMA3: render_llama3(messages, tools, o, &w); break;
    case HX_TPL_COMPACT:
    case HX_TPL_BRIEF: render_compact(messages, tools, family == HX_TPL_BRIEF, o, &w); break;
    default: return HX_ERR_INVALID;
    }
    return out->oom || (marks && marks->oom) ? HX_ERR_NOMEM : HX_OK;
}

int hx_agent_call_style(int family)
{
    return family == HX_TPL_LLAMA3 ? HX_CALLS_LLAMA : HX_CALLS_TAGGED;
}

/* ---- detection ---- */
int hx_tpl_declared(const hx_gguf *g)
{
    const char *style = NULL;
    return g && hx_gguf_get_str(g, "hearth.prompt_style", &style) == HX_OK &&
           hx_tpl_parse_name(style) > 0;
}

static int has_token(const hx_vocab *v, const char *t)
{
    return v && hx_vocab_find(v, t, strlen(t)) >= 0;
}

int hx_tpl_detect(const hx_gguf *g, const hx_vocab *v)
{
    const char *style = NULL, *tpl = NULL;
    if (g && hx_gguf_get_str(g, "hearth.prompt_style", &style) == HX_OK) {
        int f = hx_tpl_parse_name(style);
        if (f > 0) return f;
        /* a style from a newer Hearth: say so, not fall back in silence */
        hx_log_warn("hearth.prompt_style \"%s\" is not a style this build knows; "
                    "guessing from the vocabulary", style);
    }
    if (g) hx_gguf_get_str(g, "tokenizer.chat_template", &tpl);
    if (has_token(v, "<|im_start|>") && has_token(v, "<|im_end|>")) {
        if (tpl && strstr(tpl, "<think>")) return HX_TPL_QWEN3;
        return tpl && strstr(tpl, HX_TOOL_CALL_OPEN) ? HX_TPL_CHATML
               : tpl ? HX_TPL_CHATML : HX_TPL_QWEN3;
    }
    if (has_token(v, "<|start_header_id|>") && has_token(v, "<|eot_id|>"))
        return HX_TPL_LLAMA3;
    return HX_TPL_COMPACT;
}
