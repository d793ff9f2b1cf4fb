/* planner.c: the agent loop: render the prompt, let the source write a turn,
 * run its tool calls under the policy, feed results back, until an answer. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

#define OPEN_TAG HX_TOOL_CALL_OPEN
#define CLOSE_TAG HX_TOOL_CALL_CLOSE
#define PY_TAG HX_TOOL_CALL_PYTHON

struct hx_planner {
    hx_planner_deps d;
    hx_planner_params p;
    cJSON *msgs;  /* the conversation; [0] is the system message */
    cJSON *tools; /* the tool list in the OpenAI shape */
    int tainted;  /* untrusted content is in the conversation (an MCP
                     tool's description, a tool's result or error, a
                     recalled memory): it stays so */
    int *starts;  /* index of each request's user message, for undo */
    int64_t *episodes; /* each request's episode id (0: none), for undo */
    int n_starts, cap_starts;
};

/* One request's run. */
typedef struct run {
    hx_planner *pl;
    const hx_planner_io *io;
    cJSON *calls;   /* trace records */
    double t0;
    int tokens, prompt_tokens, steps;
    hx_buf answer;  /* everything streamed */
    char *final;    /* the plain-text answer turn (owned) */
    char *partial;  /* the turn a limit cut short (owned), not kept */
    const char *status;
    cJSON *not_run; /* calls a limit stopped before they ran (trace) */
    int stuck;      /* a call repeated an earlier one: the next turn answers */
    int cut;        /* the repeat guard ended the last turn */
    char *best;     /* the last text the model wrote before calls or cut
                       by the repeat guard (owned): grounded as it was
                       decoded, the answer when none comes */
    const char *model; /* recorded in the episode */
    hx_buf refused; /* this request's failed calls (hx_argcheck_refused_line) */
    const char *request; /* the user's words (borrowed) */
    int results;    /* the answer is the results answer, not the model's */
} run;

hx_planner_params hx_planner_default_params(void)
{
    hx_planner_params p = {8, 1024, 300.0, HX_TPL_QWEN3, HX_CHOICE_AUTO,
                           NULL, NULL, 1, 256, NULL, HX_ANSWER_MODEL};
    return p;
}

int hx_agent_tool_offered(const char *filter, const char *name)
{
    if (!filter || !*filter) return 1;
    size_t n = strlen(name);
    for (const char *f = filter; *f;) {
        size_t l = strcspn(f, ",");
        if (l >= 2 && f[l - 1] == '*' && f[l - 2] == '.' && !strncmp(f, name, l - 1)) return 1;
        if (l == n && !strncmp(f, name, n)) return 1;
        f += l + (f[l] == ',');
    }
    return 0;
}

/* The registry's tool list, less the tools the filter does not offer. */
static cJSON *offered_tools(const hx_tools *reg, const char *filter)
{
    cJSON *all = hx_tools_list_json(reg);
    for (cJSON *t = all ? all->child : NULL, *next; t; t = next) {
        next = t->next;
        const cJSON *fn = cJSON_GetObjectItem(t, "function");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
        if (!name || !hx_agent_tool_offered(filter, name))
            cJSON_Delete(cJSON_DetachItemViaPointer(all, t));
    }
    return all;
}

/* Whether the list offers a tool that describes itself at run time (an
 * MCP server's): its name, description and schema, in every prompt, are
 * that process's words. */
static int offers_self_described(const hx_tools *reg, const cJSON *tools)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *fn = cJSON_GetObjectItem(t, "function");
        const hx_tool_def *def =
            hx_tools_find(reg, cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name")));
        if (def && (def->flags & HX_TOOL_SELF_DESCRIBED)) return 1;
    }
    return 0;
}

hx_planner *hx_planner_new(const hx_planner_deps *d, const hx_planner_params *p)
{
    hx_planner_params dp = hx_planner_default_params();
    hx_planner *pl = hx_calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->d = *d;
    pl->p = p ? *p : dp;
    pl->msgs = cJSON_CreateArray();
    pl->tools = offered_tools(d->reg, pl->p.tools);
    if (!pl->msgs || !pl->tools) {
        hx_planner_free(pl);
        return NULL;
    }
    pl->tainted = offers_self_described(d->reg, pl->tools);
    return pl;
}

int hx_planner_set_tools(hx_planner *pl, const char *filter)
{
    cJSON *tools = offered_tools(pl->d.reg, filter);
    if (!tools) return HX_ERR_NOMEM;
    cJSON_Delete(pl->tools);
    pl->tools = tools;
    pl->p.tools = filter;
    pl->tainted |= offers_self_described(pl->d.reg, tools);
    return HX_OK;
}

void hx_planner_set_family(hx_planner *pl, int family) { pl->p.family = family; }

void hx_planner_set_answer(hx_planner *pl, int answer) { pl->p.answer = answer; }

void hx_planner_free(hx_planner *pl)
{
    if (!pl) return;
    cJSON_Delete(pl->msgs);
    cJSON_Delete(pl->tools);
    free(pl->starts);
    free(pl->episodes);
    free(pl);
}

const cJSON *hx_planner_messages(const hx_planner *pl) { return pl->msgs; }

int hx_planner_undo(hx_planner *pl)
{
    if (!pl->n_starts) return 0;
    int from = pl->starts[--pl->n_starts];
    while (cJSON_GetArraySize(pl->msgs) > from)
        cJSON_DeleteItemFromArray(pl->msgs, from);
    /* the record stays (the tools did run), but nightly training must not
     * learn from an exchange the user took back */
    hx_err err = {0};
    const int64_t ep = pl->episodes[pl->n_starts];
    if (ep > 0 && pl->d.mem &&
        hx_memory_episode_set_verdict(pl->d.mem, ep, HX_VERDICT_REJECTED, NULL, &err))
        hx_log_warn("memory: episode %lld not marked rejected: %s", (long long)ep, err.msg);
    return 1;
}

static cJSON *add_msg(cJSON *msgs, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content ? content : "");
    cJSON_AddItemToArray(msgs, m);
    return m;
}

/* ---- the system message: who (the same at every request, so that its KV
 * cache and the tool list's after it are reused, also by the next process
 * through the prefix cache on disk); then before each request a system
 * message of its own: when, recalled memories ---- */
static void system_text(hx_planner *pl, hx_buf *b)
{
    const hx_config *cfg = hx_tools_config(pl->d.reg);
    if (pl->p.system) hx_buf_puts(b, pl->p.system);
    else
        hx_buf_puts(b, "You are Hearth, an assistant running on the user's own "
                       "device. Use the tools to read and change the user's "
                       "calendar, mail and files; when you are done, answer "
                       "in plain text.");
    if (cfg && cfg->user_name)
        hx_buf_printf(b, "\nUser: %s <%s>", cfg->user_name,
                      cfg->user_email ? cfg->user_email : "");
}

/* The clock line, to the minute: within a minute every request's prompt
 * starts the same up to the request's own words (hx_planner_prepare). */
static void clock_text(const hx_planner *pl, hx_buf *b)
{
    const hx_config *cfg = hx_tools_config(pl->d.reg);
    char when[64] = "";
    int64_t now = hx_now(NULL);
    now -= (now % 60 + 60) % 60;
    hx_when_format(now, cfg ? cfg->timezone : NULL, 0, when, sizeof when);
    /* the weekday too: a small model cannot work out that "next
     * Wednesday" is the 16th from a date alone. After the date, so that
     * the line still starts as models learnt it ("Now: 2026-...") */
    hx_buf_printf(b, "Now: %s (%s", when, hx_when_weekday(now, cfg ? cfg->timezone : NULL));
    if (cfg && cfg->timezone) hx_buf_printf(b, ", %s", cfg->timezone);
    hx_buf_putc(b, ')');
}

/* The memories recalled for the request. */
static void memories_text(hx_planner *pl, const char *request, hx_buf *b)
{
    if (!pl->d.mem || pl->p.recall_budget <= 0) return;
    hx_recall_params rp = hx_recall_default_params();
    rp.budget_tokens = pl->p.recall_budget;
    if (pl->d.src->count) {
        rp.count_tokens = (hx_count_tokens_fn)pl->d.src->count;
        rp.count_user = pl->d.src->ctx;
    }
    char *section = NULL;
    hx_mem_list *items = NULL;
    hx_err err = {0};
    if (hx_memory_recall(pl->d.mem, request, &rp, &section, &items, &err) == HX_OK &&
        section && *section)
        hx_buf_printf(b, "\n\n%s", section);
    /* a memory written while untrusted content was in a conversation
     * brings that content back into this one */
    for (int i = 0; items && i < items->n; i++)
        if (hx_mem_untrusted(&items->items[i])) pl->tainted = 1;
    hx_mem_list_free(items);
    free(section);
}

/* The people of the user's mail the request names, with their addresses
 * ("email Dana that ...": the call needs Dana's address, which no memory
 * may hold). */
static void people_text(hx_planner *pl, const char *request, hx_buf *b)
{
    hx_buf people;
    hx_buf_init(&people);
    hx_err err = {0};
    if (hx_tools_people_named(pl->d.reg, request, &people, &err) > 0)
        hx_buf_printf(b, "%sContacts:\n%s", /* few words: a value copies none of them */
                      b->len && b->data[b->len - 1] == '\n' ? "\n" : "\n\n", people.data);
    else if (err.msg[0])
        hx_log_warn("the people of the mail: %s", err.msg);
    hx_buf_free(&people);
}

static void context_text(hx_planner *pl, const char *request, hx_buf *b)
{
    clock_text(pl, b);
    memories_text(pl, request, b);
    if (pl->p.recall_budget > 0) people_text(pl, request, b);
}

/* The system text into the conversation's first message. */
static void set_system_text(hx_planner *pl)
{
    hx_buf b;
    hx_buf_init(&b);
    system_text(pl, &b);
    cJSON *m = cJSON_GetArrayItem(pl->msgs, 0);
    if (!m) m = add_msg(pl->msgs, "system", "");
    cJSON_DeleteItemFromObject(m, "content");
    hx_json_add(m, "content", cJSON_CreateString(b.data ? b.data : ""));
    hx_buf_free(&b);
}

static void set_system(hx_planner *pl, const char *request)
{
    hx_buf b;
    hx_buf_init(&b);
    set_system_text(pl);
    context_text(pl, request, &b);
    add_msg(pl->msgs, "system", b.data ? b.data : "");
    hx_buf_free(&b);
}

/* ---- limits ---- */
static int check_limits(run *r, hx_err *err)
{
    const hx_planner_params *p = &r->pl->p;
    if (r->io && r->io->cancelled && r->io->cancelled(r->io->user)) {
        r->status = "cancelled";
        return hx_err_set(err, HX_ERR_CANCELLED, "cancelled");
    }
    if (r->tokens >= p->max_tokens) {
        r->status = "token budget";
        return hx_err_set(err, HX_ERR_RANGE, "stopped: the budget of %d generated "
                          "tokens ran out before an answer (--max-tokens)",
                          p->max_tokens);
    }
    if (hx_time_mono() - r->t0 >= p->timeout_s) {
        r->status = "time budget";
        return hx_err_set(err, HX_ERR_TIMEOUT, "stopped: the time budget of %g s "
                          "ran out before an answer (--timeout)", p->timeout_s);
    }
    return HX_OK;
}

/* ---- streaming the answer: text up to the calls, holding back a tail
 * that may be the start of them ---- */
#define REPEAT_SPAN 96 /* the repeat guard's (below) */
#define REPEAT_SPAN_CALL 256 /* in a call, which is not streamed */
#define REPEAT_LONG 16
#define REPEAT_MIN 12
#define REPEAT_MIN_CALL 48
static int is_llama(const run *r) { return r->pl->p.family == HX_TPL_LLAMA3; }

/* Where a turn's calls start: "<tool_call>"; in the Llama style a
 * leading "{" or "<|python_tag|>". NULL if none (yet). */
static const char *calls_start(int llama, const char *s)
{
    if (!llama) return strstr(s, OPEN_TAG);
    const char *p = s + strspn(s, " \t\r\n");
    return *p == '{' ? p : strstr(s, PY_TAG);
}

static size_t held_tail(int llama, const char *s, size_t n)
{
    const char *tag = llama ? PY_TAG : OPEN_TAG;
    if (llama && strspn(s, " \t\r\n") == n) return n; /* "{" may come */
    size_t k = strlen(tag) - 1;
    for (k = k < n ? k : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

/* Streams text[*done, upto) without the markup in it (a source that
 * does not mask it, a model that spells "</tool_call>" out): what the
 * user reads is never the template's. */
static void emit(run *r, const hx_buf *text, size_t *done, size_t upto)
{
    if (r->pl->p.answer == HX_ANSWER_RESULTS) { /* the model's words are not shown */
        *done = upto;
        return;
    }
    char *chunk = hx_strndup(text->data + *done, upto - *done);
    const size_t n = chunk ? hx_strip_markup(chunk) : 0;
    if (n) {
        hx_buf_append(&r->answer, chunk, n);
        if (r->io && r->io->on_text) r->io->on_text(r->io->user, chunk, n);
    }
    free(chunk);
    *done = upto;
}

static void stream(run *r, const hx_buf *text, size_t *done, int *in_call, int final)
{
    if (*in_call || !text->data) return;
    const char *tag = calls_start(is_llama(r), text->data);
    size_t held = held_tail(is_llama(r), text->data, text->len);
    const size_t mk = hx_markup_prefix(text->data, text->len);
    if (mk > held) held = mk;
    if (held < REPEAT_SPAN) held = text->len < REPEAT_SPAN ? text->len : REPEAT_SPAN;
    size_t upto = tag ? (size_t)(tag - text->data) : text->len - (final ? 0 : held);
    upto = hx_utf8_cut(text->data, upto, *done); /* each piece is escaped on its own */
    if (upto > *done) emit(r, text, done, upto);
    if (tag) *in_call = 1;
}

/* The compact style has one line per message: a plain-text turn ends at
 * its first newline after some text (small models never stop otherwise).
 * Cuts text there and returns 1. A turn whose calls began before any
 * newline is not cut: it may hold several calls, and the grammar ends it
 * after them. */
static int line_end(int family, hx_buf *text)
{
    if (!hx_tpl_compact(family) || !text->data) return 0;
    const char *s = text->data;
    while (*s == ' ' || *s == '\n') s++;
    const char *nl = strchr(s, '\n'), *call = strstr(text->data, OPEN_TAG);
    if (!nl || (call && call < nl)) return 0;
    text->len = (size_t)(nl - text->data);
    text->data[text->len] = 0;
    return 1;
}

/* ---- the repeat guard: a turn that repeats itself ends ----
 * A small model loops ("no no no no free", "Lunch with Medisoft at 14:00
 * and Lunch with Medisoft at 14:00 and ...", a call's string value
 * "countcountcount") until the token budget, and the answer is lost. When
 * the turn's text ends with a run of copies of one piece (three of a
 * short one, two of one of REPEAT_LONG bytes or more; REPEAT_MIN bytes in
 * all, REPEAT_MIN_CALL in a call), the turn ends before the second copy: text written up to it is
 * the answer, a call cut there is not run (the next turn goes on).
 * Streaming holds back the last REPEAT_SPAN bytes so that the user never
 * reads the copies; a call, not streamed, is looked at over
 * REPEAT_SPAN_CALL bytes (a value looping on a phrase of 60 bytes). */

/* Where the copies at the end of s[0, n) start repeating the first (the
 * text is cut there), or 0 when s does not end in repeats of min bytes. */
static size_t repeat_cut(const char *s, size_t n, size_t min, size_t span)
{
    for (size_t p = 2; p <= span / 2 && 2 * p <= n; p++) {
        size_t k = 1;
        while ((k + 1) * p <= n && !memcmp(s + n - p, s + n - (k + 1) * p, p)) k++;
        if ((k >= 3 && k * p >= min) || (k >= 2 && p >= REPEAT_LONG && k * p >= min))
            return n - (k - 1) * p;
    }
    return 0;
}

/* A byte of a word, a number, a time, an address or a name: not to be
 * cut through. */
static int word_byte(char c)
{
    return isalnum((unsigned char)c) || ((unsigned char)c & 0x80) || (c && strchr(".:-/@_'", c));
}

/* Ends the turn if it repeats itself, cut before the copies; 1 if it
 * did. In a call, the grammar bounds most values and a repeat may be the
 * value's own ("' condemning' condemning"): only a longer loop is cut. */
static int repeat_guard(hx_buf *text, int in_call)
{
    const size_t min = in_call ? REPEAT_MIN_CALL : REPEAT_MIN;
    const size_t span = in_call ? REPEAT_SPAN_CALL : REPEAT_SPAN;
    size_t cut = text->data ? repeat_cut(text->data, text->len, min, span) : 0;
    if (!cut) return 0;
    /* not inside a word ("at 17:0|0 on ..."): to its end when the text has
     * it whole, else to its start */
    size_t end = cut;
    while (end < text->len && word_byte(text->data[end])) end++;
    if (end < text->len) cut = end;
    else
        while (cut > 0 && word_byte(text->data[cut - 1])) cut--;
    if (!cut) return 0;
    text->len = cut;
    text->data[cut] = 0;
    hx_log_debug("planner: the turn repeats itself; cut after %zu bytes", cut);
    return 1;
}
static int compact_line_end(const run *r, hx_buf *text) { return line_end(r->pl->p.family, text); }

/* With a results answer in the compact styles, a turn that begins as
 * text is the answer turn, whose words are dropped: it ends there, and
 * the decoding of the rest is saved (a third of hearth-tiny's generated
 * tokens: bench/README.md). A small model of these styles writes its
 * calls first; a call it wrote after words would not be made. */
static int results_text_started(const run *r, const hx_buf *text)
{
    if (r->pl->p.answer != HX_ANSWER_RESULTS || !hx_tpl_compact(r->pl->p.family) || !text->data)
        return 0;
    const char *s = text->data + strspn(text->data, " \t\r\n");
    const size_t n = strlen(s), tag = strlen(OPEN_TAG);
    return n && strncmp(s, OPEN_TAG, n < tag ? n : tag) != 0;
}

/* A turn's prompt: the rendered conversation and the ranges its template
 * wrote, the only places a special token may be read. */
typedef struct prompt {
    hx_buf text;
    hx_tpl_marks marks;
} prompt;

static int render(const hx_planner *pl, const hx_tpl_opts *o, prompt *p, hx_err *err)
{
    p->text.len = 0;
    p->marks.n = 0;
    p->marks.head = 0;
    int rc = hx_tpl_render_marked(pl->p.family, pl->msgs, pl->tools, o, &p->text, &p->marks);
    return rc ? hx_err_set(err, rc, "cannot render the prompt") : HX_OK;
}

static int begin(hx_source *src, const prompt *p, int choice, int *n_prompt, hx_err *err)
{
    const char *text = p->text.data ? p->text.data : "";
    if (src->api_version >= 5 && src->begin_marked)
        return src->begin_marked(src->ctx, text, &p->marks, choice, n_prompt, err);
    return src->begin(src->ctx, text, choice, n_prompt, err);
}

/* A text turn the repeat guard cut ends where the source's answer stages
 * would have let the model end it: a cut after "Sent" of "Sent Sent Sent"
 * claims no mail. Bytes the user has read already stay. */
static int cut_answer_end(run *r, hx_buf *text, size_t done, hx_err *err)
{
    hx_source *src = r->pl->d.src;
    if (!r->cut || !text->data || calls_start(is_llama(r), text->data) || src->api_version < 9 ||
        !src->answer_end)
        return HX_OK;
    size_t end = text->len;
    if (src->answer_end(src->ctx, text->data, text->len, &end))
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (end < done) end = done;
    if (end >= text->len) return HX_OK;
    hx_log_debug("planner: the cut answer ends where it is grounded, after %zu bytes", end);
    text->len = end;
    text->data[end] = 0;
    return HX_OK;
}

/* Lets the source write one assistant turn into text. */
static int gen_turn(run *r, const prompt *p, int choice, hx_buf *text, hx_err *err)
{
    hx_source *src = r->pl->d.src;
    int n_prompt = 0, end = 0, in_call = 0, rc;
    size_t done = 0;
    if ((rc = check_limits(r, err))) return rc;
    if ((rc = begin(src, p, choice, &n_prompt, err))) return rc;
    r->prompt_tokens += n_prompt;
    while (!(rc = check_limits(r, err))) {
        if ((rc = src->next(src->ctx, text, &end, err))) return rc;
        if (end) break;
        r->tokens++;
        if (compact_line_end(r, text) || results_text_started(r, text)) break;
        if ((r->cut = repeat_guard(text, in_call))) break;
        stream(r, text, &done, &in_call, 0);
    }
    if (!rc) rc = cut_answer_end(r, text, done, err);
    stream(r, text, &done, &in_call, 1);
    return rc;
}

/* ---- parsing the turn ---- */
typedef struct pcall {
    cJSON *fn;         /* {"name","arguments"} or NULL if malformed */
    char error[256];   /* why it is malformed */
    char name[128];    /* the name if one could be read */
} pcall;

static char *trimmed(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\t')) n--;
    return hx_strndup(s, n);
}

/* Fills c from the parsed call j (owned: freed here; NULL when the body
 * was not JSON). */
static void call_from_json(cJSON *j, pcall *c)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(j, "parameters");
    if (cJSON_IsString(name)) snprintf(c->name, sizeof c->name, "%s", name->valuestring);
    if (!j) snprintf(c->error, sizeof c->error, "the call is not valid JSON");
    else if (!cJSON_IsString(name)) snprintf(c->error, sizeof c->error, "the call has no \"name\" string");
    else if (!cJSON_IsObject(args)) snprintf(c->error, sizeof c->error, "the call has no \"arguments\" object");
    if (c->error[0]) {
        cJSON_Delete(j);
        return;
    }
    cJSON *fn = cJSON_CreateObject(), *dup = cJSON_Duplicate(args, 1);
    int ok = fn && dup && cJSON_AddStringToObject(fn, "name", name->valuestring);
    if (ok && cJSON_AddItemToObject(fn, "arguments", dup)) c->fn = fn, fn = dup = NULL;
    else snprintf(c->error, sizeof c->error, "out of memory");
    cJSON_Delete(dup);
    cJSON_Delete(fn);
    cJSON_Delete(j);
}

static void parse_one(const char *body, size_t n, pcall *c)
{
    char *t = trimmed(body, n);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    call_from_json(j, c);
}

/* Llama: the content before the call and the one call (its template
 * renders one per turn). */
static int parse_llama(const char *text, char **content, pcall *c)
{
    const char *start = calls_start(1, text);
    *content = trimmed(text, start ? (size_t)(start - text) : strlen(text));
    if (!start) return 0;
    if (!strncmp(start, PY_TAG, strlen(PY_TAG))) start += strlen(PY_TAG);
    memset(c, 0, sizeof *c);
    parse_one(start, strlen(start), c);
    return 1;
}

/* One tagged call into c; returns its closing tag, or NULL. The
 * grammar's call is a JSON value, whitespace, then "</tool_call>", so a
 * "</tool_call>" inside a JSON string is text: the body runs to the end of
 * the value when the tag follows it, and that parse is the call's. Only a
 * body that is not JSON (malformed anyway) ends at the first closing tag. */
static const char *parse_tagged(const char *body, pcall *c)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(body, &end, 0);
    const char *after = j ? end + strspn(end, " \t\r\n") : NULL;
    if (after && !strncmp(after, CLOSE_TAG, strlen(CLOSE_TAG))) {
        call_from_json(j, c);
        return after;
    }
    cJSON_Delete(j);
    const char *close = strstr(body, CLOSE_TAG);
    parse_one(body, close ? (size_t)(close - body) : strlen(body), c);
    return close;
}

/* Splits text into the content before the first call and the calls. */
static int parse_turn(int llama, const char *text, char **content, pcall *calls, int max)
{
    if (llama) return parse_llama(text, content, calls);
    const char *open = strstr(text, OPEN_TAG);
    int n = 0;
    *content = trimmed(text, open ? (size_t)(open - text) : strlen(text));
    while (open && n < max) {
        pcall *c = &calls[n++];
        memset(c, 0, sizeof *c);
        const char *close = parse_tagged(open + strlen(OPEN_TAG), c);
        if (!close) {
            snprintf(c->error, sizeof c->error, "the call has no closing " CLOSE_TAG);
            cJSON_Delete(c->fn);
            c->fn = NULL;
        }
        open = close ? strstr(close, OPEN_TAG) : NULL;
    }
    return n;
}

/* ---- running one call ---- */
/* The assistant's last words before the request, or NULL. */
static const char *prev_answer(const run *r)
{
    const hx_planner *pl = r->pl;
    const cJSON *m = cJSON_GetArrayItem(pl->msgs, pl->starts[pl->n_starts - 1] - 1);
    const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
    return role && !strcmp(role, "assistant") ? cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"))
                                              : NULL;
}

/* Whether the call removes what the user kept while the request asks to
 * remove nothing: then it is refused (o says why), before the policy. */
static int unasked_removal(const run *r, const char *name, hx_call_outcome *o)
{
    const hx_tool_def *def = hx_tools_find(r->pl->d.reg, name);
    if (!def || !(def->flags & HX_TOOL_REMOVES) || hx_agent_asks_removal(r->request, prev_answer(r)))
        return 0;
    o->status = "refused", o->decision = "deny", o->by = "request", o->rc = HX_ERR_DENIED;
    snprintf(o->detail, sizeof o->detail,
             "refused: %s removes what the user kept, and the request does not ask to "
             "remove anything; answer, and ask the user whether to remove it", name);
    return 1;
}

/* A call of a tool this planner offers, under the conversation's taint;
 * untrusted content coming back, in a result or an error, taints it. */
static void exec_call(run *r, const char *name, const cJSON *args,
                      const char *args_json, hx_call_outcome *o)
{
    hx_planner *pl = r->pl;
    if (!hx_agent_tool_offered(pl->p.tools, name)) {
        o->status = "error";
        snprintf(o->detail, sizeof o->detail, "unknown tool %s", name);
        return;
    }
    if (unasked_removal(r, name, o)) return;
    hx_agent_call(&pl->d, name, args, args_json, pl->tainted, o);
    if (o->untrusted) pl->tainted = 1;
}

/* The tool message's content: the result, or {"error": detail}. */
static char *feedback_text(const hx_call_outcome *o)
{
    hx_buf b;
    hx_buf_init(&b);
    if (o->result) {
        hx_json_py(o->result, 0, &b);
    } else {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "error", o->detail);
        hx_json_py(e, 0, &b);
        cJSON_Delete(e);
    }
    return hx_buf_steal(&b, NULL);
}

/* Appends the call's trace record to r->calls, whole: out of memory, none
 * is added and the result is HX_ERR_NOMEM (the episode and the trace read
 * every field of every record). whole: the result before the context's
 * cut (NULL: not cut, or not kept), as "result_whole". */
static int record_call(run *r, const char *name, const cJSON *args, const hx_call_outcome *o,
                       const char *fed, const char *whole)
{
    cJSON *c = cJSON_CreateObject();
    if (c && whole && !cJSON_AddStringToObject(c, "result_whole", whole)) {
        cJSON_Delete(c);
        return HX_ERR_NOMEM;
    }
    int ok = c && cJSON_AddStringToObject(c, "name", name) &&
             hx_json_add(c, "arguments", args ? cJSON_Duplicate(args, 1) : cJSON_CreateNull()) &&
             cJSON_AddStringToObject(c, "status", o->status) &&
             cJSON_AddStringToObject(c, "decision", o->decision) &&
             cJSON_AddStringToObject(c, "by", o->by ? o->by : "") &&
             cJSON_AddBoolToObject(c, "confirmed", o->confirmed) &&
             cJSON_AddStringToObject(c, "result", fed ? fed : "") &&
             cJSON_AddNumberToObject(c, "step", r->steps) && cJSON_AddItemToArray(r->calls, c);
    if (ok) return HX_OK;
    cJSON_Delete(c);
    return HX_ERR_NOMEM;
}

/* An earlier call of this request with the same name and arguments
 * that ran (ok), failed or was refused, or NULL. */
static const cJSON *made_before(const run *r, const char *name, const cJSON *args)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, r->calls)
    {
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
        const char *res = cJSON_GetStringValue(cJSON_GetObjectItem(c, "result"));
        if (st && !strcmp(cJSON_GetObjectItem(c, "name")->valuestring, name) &&
            cJSON_Compare(cJSON_GetObjectItem(c, "arguments"), args, 1) &&
            !(res && strstr(res, "not run again"))) /* the first one's verdict */
            return c;
    }
    return NULL;
}

/* The repeat guard for calls: a call this request made already would
 * fail the same way, or return what its result above holds (a small
 * model repeats a call until the step limit): it is not run again, and
 * the model's next turn must answer. */
static int repeated_call(run *r, const char *name, const cJSON *args, hx_call_outcome *o)
{
    const cJSON *prev = args ? made_before(r, name, args) : NULL;
    if (!prev) return 0;
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(prev, "status"));
    o->status = "error";
    if (!strcmp(st, "ok"))
        snprintf(o->detail, sizeof o->detail,
                 "not run again: the same call was made before; its result is above");
    else snprintf(o->detail, sizeof o->detail, "not run again: the same call failed before (%s)", st);
    r->stuck = 1;
    return 1;
}

/* Tells the source the calls of this request that failed, which the next
 * turns may not write again (the model changes the call, calls another
 * tool or answers); with no call, clears what an earlier request left. */
static int refuse_failed(run *r, const char *name, const cJSON *args)
{
    hx_source *src = r->pl->d.src;
    if (src->api_version < 7 || !src->set_refused_calls) return HX_OK;
    if (name && hx_argcheck_refused_line(name, args, &r->refused)) return HX_ERR_NOMEM;
    return src->set_refused_calls(src->ctx, r->refused.data ? r->refused.data : "");
}

/* Runs (or refuses) the call and feeds its result back; HX_ERR_NOMEM, in
 * err, when its trace record could not be kept. */
static int handle_call(run *r, const pcall *c, hx_err *err)
{
    hx_call_outcome o = {.status = "malformed", .decision = "", .by = ""};
    const char *name = c->fn ? cJSON_GetObjectItem(c->fn, "name")->valuestring
                             : (c->name[0] ? c->name : "(malformed)");
    const cJSON *args = c->fn ? cJSON_GetObjectItem(c->fn, "arguments") : NULL;
    /* a person named where an address belongs is resolved from the user's
     * mail before anything else sees the call: the user allows, and the
     * trace keeps, the address the call goes to */
    cJSON *named = NULL, *resolved = NULL;
    hx_err unnamed = {0};
    const int unresolved = c->fn && hx_agent_tool_offered(r->pl->p.tools, name) &&
                           (o.rc = hx_tools_resolve_names(r->pl->d.reg, name, args, &named, &resolved, &unnamed));
    if (named) args = named;
    char *args_json = args ? cJSON_PrintUnformatted(args) : hx_strdup("");
    if (r->io && r->io->on_call) r->io->on_call(r->io->user, name, args_json ? args_json : "");
    if (!c->fn)
        snprintf(o.detail, sizeof o.detail, "malformed tool call: %s; write %s", c->error,
                 is_llama(r) ? "{\"name\": ..., \"parameters\": {...}}"
                             : OPEN_TAG "{\"name\": ..., \"arguments\": {...}}" CLOSE_TAG);
    else if (unresolved)
        o.status = "error", snprintf(o.detail, sizeof o.detail, "%s", unnamed.msg);
    else if (!repeated_call(r, name, args, &o))
        exec_call(r, name, args, args_json ? args_json : "{}", &o);
    if (resolved && o.result) hx_json_add(o.result, "resolved", resolved), resolved = NULL;
    hx_agent_audit(&r->pl->d, name, args_json ? args_json : "", &o);
    hx_planner *pl = r->pl; /* a result too long for the context is cut, and says so */
    char *whole = o.result && pl->p.answer == HX_ANSWER_RESULTS /* a results answer says it all */
                      ? cJSON_PrintUnformatted(o.result) : NULL;
    if (o.result &&
        !hx_fit_result(&(hx_fit){pl->d.src, pl->p.family, pl->msgs, pl->starts[pl->n_starts - 1],
                                 pl->tools, name}, o.result))
        cJSON_free(whole), whole = NULL;
    char *fed = feedback_text(&o);
    if (r->io && r->io->on_result)
        r->io->on_result(r->io->user, name, o.status, fed ? fed : o.detail);
    cJSON *m = add_msg(r->pl->msgs, "tool", fed ? fed : "{}");
    cJSON_AddStringToObject(m, "name", name);
    int rc = record_call(r, name, args, &o, fed, whole);
    cJSON_free(whole);
    if (rc)
        hx_err_set(err, rc, "out of memory: the call to %s ended (%s) but its record was lost",
                   name, o.status);
    else if (c->fn && !strcmp(o.status, "error") && (rc = refuse_failed(r, name, args)))
        hx_err_set(err, rc, "out of memory: the call to %s failed and could not be barred "
                            "from being written again", name);
    free(fed);
    free(args_json);
    cJSON_Delete(o.result);
    cJSON_Delete(named);
    cJSON_Delete(resolved);
    return rc;
}

/* Adds the assistant's turn: its text and the well-formed calls (a
 * malformed call stays in the text, as the model wrote it). */
static void add_assistant(run *r, const char *text, const char *content,
                          const pcall *calls, int n)
{
    int malformed = 0;
    for (int i = 0; i < n; i++) malformed |= !calls[i].fn;
    cJSON *m = add_msg(r->pl->msgs, "assistant", malformed ? text : content);
    if (!n || malformed) return;
    cJSON *tc = cJSON_AddArrayToObject(m, "tool_calls");
    for (int i = 0; i < n; i++) {
        cJSON *w = cJSON_CreateObject();
        cJSON_AddStringToObject(w, "type", "function");
        hx_json_add(w, "function", cJSON_Duplicate(calls[i].fn, 1));
        hx_json_add(tc, NULL, w);
    }
}

/* Forgets the oldest exchange (a request and its turns) to make room; 0
 * when only the current request is left. */
static int drop_oldest(hx_planner *pl)
{
    if (pl->n_starts < 2) return 0;
    const int from = pl->starts[0], k = pl->starts[1] - from;
    for (int i = 0; i < k; i++) cJSON_DeleteItemFromArray(pl->msgs, from);
    for (int i = 1; i < pl->n_starts; i++) {
        pl->starts[i - 1] = pl->starts[i] - k;
        pl->episodes[i - 1] = pl->episodes[i];
    }
    pl->n_starts--;
    return 1;
}

/* gen_turn; when the prompt does not fit the KV cache (HX_ERR_FULL before
 * anything was generated), drops the oldest exchanges and tries again. */
static int gen_fitting(run *r, int choice, const hx_tpl_opts *o, prompt *p,
                       hx_buf *text, hx_err *err)
{
    int rc = gen_turn(r, p, choice, text, err);
    while (rc == HX_ERR_FULL && text->len == 0 && drop_oldest(r->pl)) {
        hx_log_warn("the context is full: the oldest exchange is dropped");
        if ((rc = render(r->pl, o, p, err))) return rc;
        rc = gen_turn(r, p, choice, text, err);
    }
    return rc;
}

/* A call a limit stopped before it ran: a complete one (c) after an
 * earlier call of its turn, or one cut mid-way (the turn's text from its
 * start). It never reaches the policy, the tool or the audit trail, and is
 * not among the trace's "calls" (those the agent ran or refused, and the
 * malformed ones); the trace lists it under "not_run", with the limit
 * (why, or the run's status): a call the repeat guard cut ("repeated") is
 * the same. */
static void not_run(run *r, const pcall *c, const char *cut, const char *why)
{
    cJSON *o = cJSON_CreateObject();
    char name[128] = "";
    if (c && c->fn) {
        cJSON_AddStringToObject(o, "name", cJSON_GetObjectItem(c->fn, "name")->valuestring);
        hx_json_add(o, "arguments", cJSON_Duplicate(cJSON_GetObjectItem(c->fn, "arguments"), 1));
    } else if (c) {
        cJSON_AddStringToObject(o, "name", c->name[0] ? c->name : "(malformed)");
    } else if (cut && (hx_turn_call_name(cut, name, sizeof name), name[0])) {
        cJSON_AddStringToObject(o, "name", name);
    }
    if (cut) cJSON_AddStringToObject(o, "text", cut);
    cJSON_AddStringToObject(o, "reason", why ? "repeated" : cut ? "cut" : "not started");
    cJSON_AddStringToObject(o, "limit", why ? why : strcmp(r->status, "answered") ? r->status : "error");
    cJSON_AddItemToArray(r->not_run, o);
}

/* The recalled memories of a request's context message (context_text),
 * one "- [kind #id] text" line each (hx_memory_recall), without the
 * planner's own words around them. */
static void memory_lines(hx_buf *b, const char *text)
{
    for (const char *l = text; *l;) {
        const size_t n = strcspn(l, "\n");
        if (!strncmp(l, "- ", 2)) hx_buf_printf(b, "%.*s\n", (int)n, l);
        l += n + (l[n] == '\n');
    }
}

/* The recalled memories' lines of a context message alone: those under
 * its "Things you remember" header, up to the blank line that ends the
 * section (the contacts after it come from mail, not from the user). */
static void recalled_lines(hx_buf *b, const char *text)
{
    const char *sec = strstr(text, "Things you remember");
    if (!sec) return;
    const char *end = strstr(sec, "\n\n");
    char *part = hx_strndup(sec, end ? (size_t)(end - sec) : strlen(sec));
    if (part) memory_lines(b, part);
    free(part);
}

/* Tells the source what call arguments are copied from: every message
 * after the first (the fixed system text, whose words would only start
 * false copies) but the assistant's own (its earlier mistakes are not
 * worth copying), and of a request's context only the recalled memories
 * (a value copied from "Now: ... (Europe/London)" or "Things you
 * remember" was "London", "UTC", "Now" or "Things" where a sender's name
 * was asked for); and the user's latest message, whose addresses come
 * first. */
static int set_copy_text(run *r, hx_err *err)
{
    hx_source *src = r->pl->d.src;
    if (src->api_version < 1 || !src->set_copy_text) return HX_OK;
    hx_buf b;
    hx_buf_init(&b);
    const cJSON *first = r->pl->msgs->child;
    const char *request = NULL;
    for (const cJSON *m = first ? first->next : NULL; m; m = m->next) {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
        if (text && role && !strcmp(role, "system")) memory_lines(&b, text);
        else if (text && (!role || strcmp(role, "assistant"))) hx_buf_printf(&b, "%s\n", text);
        if (text && role && !strcmp(role, "user")) request = text;
    }
    int rc = b.oom ? HX_ERR_NOMEM : src->set_copy_text(src->ctx, b.data ? b.data : "");
    hx_buf_free(&b);
    if (!rc && src->api_version >= 4 && src->set_request) rc = src->set_request(src->ctx, request);
    return rc ? hx_err_set(err, rc, "out of memory") : HX_OK;
}

/* How many items each list of a tool's result holds, one number each:
 * an answer counts what it read ("Your work folder has 2 files"). */
static void list_counts(const cJSON *j, hx_buf *b)
{
    if (cJSON_IsArray(j)) hx_buf_printf(b, " %d", cJSON_GetArraySize(j));
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next) list_counts(c, b);
}

/* The string values of the calls of the assistant's message m into b. */
static void call_values(const cJSON *m, hx_buf *b)
{
    b->len = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(m, "tool_calls"))
        hx_agent_arg_strings(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "arguments"), b);
}

/* Appends a message's text to the answer's sources, a tool's result
 * between HX_GROUND_RESULT bytes (its items then bind the answer's
 * clauses); that byte anywhere in the text is made a blank, and so is
 * what it repeats of echo's values (NULL: none). */
static void ground_text(hx_buf *b, const char *text, int result, const hx_buf *echo)
{
    char *t = hx_strdup(text);
    if (!t) {
        b->oom = 1;
        return;
    }
    if (echo) hx_agent_blank_echoes(t, echo);
    if (result) hx_buf_putc(b, HX_GROUND_RESULT);
    for (const char *p = t; *p; p++) hx_buf_putc(b, *p == HX_GROUND_RESULT ? ' ' : *p);
    if (result) hx_buf_putc(b, HX_GROUND_RESULT);
    hx_buf_putc(b, '\n');
    free(t);
}

/* Tells the source what an answer's facts are copied from: every message
 * but the assistant's own words (a fact the model stated before is no
 * source of one, nor is a tool's error repeating them), the system text
 * and the request's clock included (the user's name, today's date), with
 * the counts of the tools' lists, the tools' results marked as such
 * (hx_ground_stage_new's items); and the claim words this request's
 * successful calls license ("added" once an event was created). */
static int set_ground(run *r, hx_err *err)
{
    hx_source *src = r->pl->d.src;
    if (src->api_version < 6 || !src->set_ground) return HX_OK;
    hx_buf b, c, vals; /* vals: the last calls' string values */
    hx_buf_init(&b);
    hx_buf_init(&c);
    hx_buf_init(&vals);
    const cJSON *m;
    cJSON_ArrayForEach(m, r->pl->msgs)
    {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
        const int tool = role && !strcmp(role, "tool");
        cJSON *j = text && tool ? cJSON_Parse(text) : NULL;
        const int error = cJSON_IsString(cJSON_GetObjectItem(j, "error"));
        if (role && !strcmp(role, "assistant")) call_values(m, &vals);
        else if (text) ground_text(&b, text, tool, error ? &vals : NULL);
        list_counts(j, &b);
        if (j) hx_buf_putc(&b, '\n');
        cJSON_Delete(j);
    }
    int rc = hx_agent_claims(r->calls, r->pl->d.reg, &c);
    if (!rc && (b.oom || vals.oom)) rc = HX_ERR_NOMEM;
    if (!rc) rc = src->set_ground(src->ctx, b.data ? b.data : "", c.data ? c.data : "");
    hx_buf_free(&b);
    hx_buf_free(&c);
    hx_buf_free(&vals);
    return rc ? hx_err_set(err, rc, "out of memory") : HX_OK;
}

/* Tells the source the addresses the user has exchanged mail with, once a
 * request (none when the Maildir cannot be read: nothing is completed). */
static int set_known_addresses(run *r, hx_err *err)
{
    hx_source *src = r->pl->d.src;
    if (src->api_version < 3 || !src->set_known_addresses || !r->pl->d.reg) return HX_OK;
    hx_buf b;
    hx_buf_init(&b);
    hx_err e = {0};
    if (hx_tools_known_addresses(r->pl->d.reg, &b, &e))
        hx_log_debug("planner: no known addresses: %s", e.msg);
    int rc = b.oom ? HX_ERR_NOMEM : src->set_known_addresses(src->ctx, b.data ? b.data : "");
    hx_buf_free(&b);
    return rc ? hx_err_set(err, rc, "out of memory") : HX_OK;
}

/* Keeps text (a turn's words before its calls, or a whole text turn) as
 * the best answer so far when it says something. */
static void keep_best(run *r, const char *text)
{
    char *t = text ? hx_strdup(text) : NULL;
    if (t && hx_strip_markup(t) && strspn(t, " \t\r\n") < strlen(t)) {
        free(r->best);
        r->best = t;
        return;
    }
    free(t);
}

/* Lets the source mend the arguments it was copying (hx_copy_repair); the
 * history then holds the mended calls, which the next prompt renders. A
 * value the tool's own check accepts is the model's and stays. */
static void repair_calls(run *r, pcall *calls, int n)
{
    const hx_source *src = r->pl->d.src;
    if (src->api_version < 2 || !src->repair_args) return;
    for (int i = 0; i < n; i++) {
        if (!calls[i].fn) continue;
        const char *name = cJSON_GetObjectItem(calls[i].fn, "name")->valuestring;
        cJSON *args = cJSON_GetObjectItem(calls[i].fn, "arguments");
        cJSON *kept = cJSON_Duplicate(args, 1);
        src->repair_args(src->ctx, args);
        for (cJSON *a = args ? args->child : NULL; a && kept; a = a->next) {
            const char *was = cJSON_GetStringValue(cJSON_GetObjectItem(kept, a->string));
            if (was && cJSON_IsString(a) && strcmp(was, a->valuestring) &&
                hx_agent_arg_check((void *)r->pl->d.reg, name, a->string, was) == 1)
                cJSON_SetValuestring(a, was);
        }
        cJSON_Delete(kept);
    }
}

/* Gives the source the tools' own argument checks (its copy stage defers
 * to them). */
static void set_arg_check(run *r)
{
    hx_source *src = r->pl->d.src;
    if (src->api_version >= 6 && src->set_arg_check && r->pl->d.reg)
        src->set_arg_check(src->ctx, hx_agent_arg_check, (void *)r->pl->d.reg);
}

/* A turn the repeat guard cut inside a call: the call is not run (the
 * trace lists it under "not_run"), the words before it stay, and the next
 * turn answers; after a turn that had to answer already, they are the
 * answer. 1 if the turn was so cut. */
static int cut_call(run *r, hx_buf *text, int choice, int *answered)
{
    const char *call = r->cut && text->data ? calls_start(is_llama(r), text->data) : NULL;
    r->cut = 0;
    if (!call) return 0;
    not_run(r, NULL, call, "repeat guard");
    char *content = trimmed(text->data, (size_t)(call - text->data));
    add_msg(r->pl->msgs, "assistant", content ? content : "");
    keep_best(r, content);
    *answered = choice == HX_CHOICE_NONE || r->stuck;
    if (*answered && (r->final = hx_strdup(content ? content : ""))) hx_strip_markup(r->final);
    r->stuck = 1;
    free(content);
    return 1;
}

/* One model turn and its calls; *answered = 1 on a plain-text answer. */
static int step(run *r, int choice, int *answered, hx_err *err)
{
    hx_planner *pl = r->pl;
    prompt p = {0};
    hx_buf text;
    hx_buf_init(&p.text);
    hx_buf_init(&text);
    hx_tpl_opts o = hx_tpl_default_opts();
    o.no_think = pl->p.no_think;
    int rc = render(pl, &o, &p, err);
    if (!rc) rc = set_copy_text(r, err);
    if (!rc) rc = set_ground(r, err);
    if (!rc) rc = gen_fitting(r, choice, &o, &p, &text, err);
    hx_buf_free(&p.text);
    hx_tpl_marks_free(&p.marks);
    if (rc) {
        free(r->partial);
        r->partial = hx_buf_steal(&text, NULL);
        const char *call = r->partial ? calls_start(is_llama(r), r->partial) : NULL;
        if (call) not_run(r, NULL, call, NULL);
        return rc;
    }
    if (cut_call(r, &text, choice, answered)) {
        hx_buf_free(&text);
        return HX_OK;
    }
    pcall calls[HX_AGENT_MAX_CALLS];
    char *content = NULL;
    const char *t = text.data ? text.data : "";
    int n = parse_turn(is_llama(r), t, &content, calls, HX_AGENT_MAX_CALLS);
    repair_calls(r, calls, n);
    add_assistant(r, t, content ? content : "", calls, n);
    *answered = n == 0;
    keep_best(r, content);
    if (!n && (r->final = hx_strdup(content ? content : ""))) hx_strip_markup(r->final);
    for (int i = 0; i < n; i++) {
        if (!rc) rc = check_limits(r, err);
        if (!rc) rc = handle_call(r, &calls[i], err);
        else not_run(r, &calls[i], NULL, NULL);
        cJSON_Delete(calls[i].fn);
    }
    free(content);
    hx_buf_free(&text);
    return rc;
}

/* ---- the episode and the trace ---- */
static void fill_calls(const cJSON *calls, hx_tool_call_rec *out)
{
    int i = 0;
    for (const cJSON *c = calls->child; c; c = c->next, i++) {
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
        out[i].name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        out[i].arguments = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "arguments"));
        out[i].result = cJSON_GetStringValue(cJSON_GetObjectItem(c, "result"));
        out[i].status = !strcmp(st, "ok") ? HX_CALL_OK
                        : !strcmp(st, "refused") ? HX_CALL_DENIED : HX_CALL_ERROR;
        out[i].confirmed = cJSON_IsTrue(cJSON_GetObjectItem(c, "confirmed"));
    }
}

static int64_t record_episode(run *r, const char *request, const char *outcome,
                              const cJSON *msgs, int64_t started)
{
    hx_planner *pl = r->pl;
    if (!pl->d.mem) return 0;
    int n = cJSON_GetArraySize(r->calls);
    hx_tool_call_rec *calls = hx_calloc((size_t)(n ? n : 1), sizeof *calls);
    char *mj = cJSON_PrintUnformatted(msgs);
    int64_t id = 0;
    if (calls && mj) {
        fill_calls(r->calls, calls);
        hx_episode ep = {0};
        ep.started_at = started;
        ep.request = (char *)request;
        ep.messages = mj;
        ep.outcome = (char *)outcome;
        ep.model = (char *)r->model;
        ep.calls = calls;
        ep.n_calls = n;
        hx_err err = {0};
        if (hx_memory_episode_add(pl->d.mem, &ep, &id, &err))
            hx_log_warn("memory: the episode was not recorded: %s", err.msg);
        for (int i = 0; i < n; i++) cJSON_free(calls[i].arguments);
    }
    free(calls);
    cJSON_free(mj);
    return id;
}

static cJSON *make_trace(run *r, const char *request, const char *outcome,
                         const cJSON *msgs)
{
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "request", request);
    cJSON_AddStringToObject(t, "answer", r->final ? r->final : "");
    cJSON_AddStringToObject(t, "streamed", r->answer.data ? r->answer.data : "");
    if (r->partial) cJSON_AddStringToObject(t, "partial_turn", r->partial);
    cJSON_AddStringToObject(t, "status", r->status);
    cJSON_AddBoolToObject(t, "results_answer", r->results);
    cJSON_AddStringToObject(t, "outcome", outcome);
    cJSON_AddNumberToObject(t, "steps", r->steps);
    cJSON_AddNumberToObject(t, "tokens", r->tokens);
    cJSON_AddNumberToObject(t, "prompt_tokens", r->prompt_tokens);
    cJSON_AddNumberToObject(t, "seconds", hx_time_mono() - r->t0);
    hx_json_add(t, "read", hx_agent_read(r->calls, r->pl->d.reg, r->final));
    hx_json_add(t, "done", hx_agent_done(r->calls, r->not_run, r->pl->d.reg));
    hx_json_add(t, "calls", r->calls); /* takes them, also when it fails */
    hx_json_add(t, "not_run", r->not_run);
    r->calls = r->not_run = NULL;
    hx_json_add(t, "messages", cJSON_Duplicate(msgs, 1));
    return t;
}

static int push_start(hx_planner *pl, int at)
{
    if (pl->n_starts == pl->cap_starts) {
        int cap = pl->cap_starts * 2 + 8;
        int *s = hx_realloc(pl->starts, (size_t)cap * sizeof *s);
        if (s) pl->starts = s;
        int64_t *e = hx_realloc(pl->episodes, (size_t)cap * sizeof *e);
        if (e) pl->episodes = e;
        if (!s || !e) return HX_ERR_NOMEM;
        pl->cap_starts = cap;
    }
    pl->episodes[pl->n_starts] = 0;
    pl->starts[pl->n_starts++] = at;
    return HX_OK;
}

static int loop(run *r, hx_err *err)
{
    const hx_planner_params *p = &r->pl->p;
    for (;;) {
        if (r->steps >= p->max_steps) {
            r->status = "step limit";
            return hx_err_set(err, HX_ERR_RANGE, "stopped: no answer after %d "
                              "model turn%s (--max-steps)", p->max_steps,
                              p->max_steps == 1 ? "" : "s");
        }
        int choice = r->steps == 0 ? p->tool_choice
                     : p->tool_choice == HX_CHOICE_NONE || r->stuck ? HX_CHOICE_NONE
                                                                    : HX_CHOICE_AUTO;
        int answered = 0;
        r->steps++;
        int rc = step(r, choice, &answered, err);
        if (rc || answered) return rc;
    }
}

/* The model's turns until an answer or a limit. */
static int model_turns(run *r, const void *arg, hx_err *err)
{
    (void)arg;
    set_arg_check(r);
    int rc = refuse_failed(r, NULL, NULL);
    if (rc) hx_err_set(err, rc, "out of memory");
    if (!rc) rc = set_known_addresses(r, err);
    return rc ? rc : loop(r, err);
}

/* A call the rules chose (the tool tier), run as a model's call would
 * be (policy, consent, audit, the conversation), and its answer written
 * from what the call returned (hx_agent_tier_answer). */
typedef struct rule_call {
    const char *name;
    const cJSON *args;
} rule_call;

static int rule_turn(run *r, const void *arg, hx_err *err)
{
    const rule_call *rule = arg;
    pcall c = {.fn = cJSON_CreateObject()};
    if (!c.fn || !cJSON_AddStringToObject(c.fn, "name", rule->name) ||
        !hx_json_add(c.fn, "arguments", cJSON_Duplicate(rule->args, 1))) {
        cJSON_Delete(c.fn);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    r->steps = 1;
    add_assistant(r, "", "", &c, 1);
    int rc = handle_call(r, &c, err);
    cJSON_Delete(c.fn);
    if (rc) return rc;
    if (!(r->final = hx_agent_tier_answer(r->calls, r->pl->d.reg)))
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_buf_puts(&r->answer, r->final);
    if (r->io && r->io->on_text) r->io->on_text(r->io->user, r->final, strlen(r->final));
    add_msg(r->pl->msgs, "assistant", r->final);
    return HX_OK;
}

/* The results answer in place of the model's (HX_ANSWER_RESULTS): it
 * is the answer turn in the conversation, and it is streamed. */
static int results_final(run *r)
{
    hx_buf mem, clock;
    hx_buf_init(&mem);
    hx_buf_init(&clock);
    const cJSON *m = cJSON_GetArrayItem(r->pl->msgs, r->pl->starts[r->pl->n_starts - 1]);
    for (; m; m = m->next) { /* the request's context: its clock, its recalled memories */
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
        if (!role || !text || strcmp(role, "system")) continue;
        if (!strncmp(text, "Now: ", 5)) hx_buf_printf(&clock, "%.*s", (int)strcspn(text, "\n"), text);
        recalled_lines(&mem, text);
    }
    char *a = mem.oom || clock.oom ? NULL
                                   : hx_agent_results_answer(r->calls, r->not_run, clock.data,
                                                             mem.data, r->pl->d.reg);
    hx_buf_free(&mem);
    hx_buf_free(&clock);
    if (!a) return HX_ERR_NOMEM;
    free(r->final);
    r->final = a;
    r->results = 1;
    cJSON *last = cJSON_GetArrayItem(r->pl->msgs, cJSON_GetArraySize(r->pl->msgs) - 1);
    const char *role = cJSON_GetStringValue(cJSON_GetObjectItem(last, "role"));
    if (role && !strcmp(role, "assistant") && !cJSON_GetObjectItem(last, "tool_calls")) {
        cJSON_DeleteItemFromObjectCaseSensitive(last, "content");
        cJSON_AddStringToObject(last, "content", a);
    } else {
        add_msg(r->pl->msgs, "assistant", a);
    }
    hx_buf_puts(&r->answer, a);
    if (r->io && r->io->on_text) r->io->on_text(r->io->user, a, strlen(a));
    return HX_OK;
}

/* One request: the conversation's new turn, body's work, its episode
 * (model recorded as model) and trace. */
static int run_request(hx_planner *pl, const char *request, const hx_planner_io *io,
                       int (*body)(run *, const void *, hx_err *), const void *arg,
                       const char *model, cJSON **trace, hx_err *err)
{
    run r = {pl, io, cJSON_CreateArray(), hx_time_mono(), 0, 0, 0, {0}, NULL, NULL, "answered",
             cJSON_CreateArray(), 0, 0, NULL, model, {0}, request, 0};
    int64_t started = hx_now(NULL);
    int n0 = cJSON_GetArraySize(pl->msgs);
    *trace = NULL;
    if (!r.calls || !r.not_run || push_start(pl, n0 ? n0 : 1)) {
        cJSON_Delete(r.calls);
        cJSON_Delete(r.not_run);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    set_system(pl, request);
    add_msg(pl->msgs, "user", request);
    int rc = body(&r, arg, err);
    if (rc && !strcmp(r.status, "answered"))
        r.status = rc == HX_ERR_CANCELLED ? "cancelled" : "error";
    if (r.best && (!r.final || !r.final[strspn(r.final, " \t\r\n")])) {
        free(r.final); /* a limit, or an empty answer: the best one so far */
        r.final = r.best;
        r.best = NULL;
    }
    if (!rc && body == model_turns && pl->p.answer == HX_ANSWER_RESULTS && results_final(&r))
        rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    const char *outcome = rc ? err->msg : (r.final ? r.final : "");
    /* the episode keeps this request's messages after the system text */
    cJSON *ep_msgs = cJSON_CreateArray();
    for (int i = 0; ep_msgs && i < cJSON_GetArraySize(pl->msgs); i++)
        if (i == 0 || i >= pl->starts[pl->n_starts - 1]) /* moves if old ones were dropped */
            cJSON_AddItemToArray(ep_msgs, cJSON_Duplicate(cJSON_GetArrayItem(pl->msgs, i), 1));
    int64_t id = record_episode(&r, request, outcome, ep_msgs, started);
    pl->episodes[pl->n_starts - 1] = id;
    *trace = make_trace(&r, request, outcome, ep_msgs);
    if (*trace) cJSON_AddNumberToObject(*trace, "episode", (double)id);
    cJSON_Delete(ep_msgs);
    cJSON_Delete(r.calls);
    cJSON_Delete(r.not_run);
    hx_buf_free(&r.answer);
    hx_buf_free(&r.refused);
    free(r.final);
    free(r.partial);
    free(r.best);
    return rc;
}

int hx_planner_run(hx_planner *pl, const char *request, const hx_planner_io *io,
                   cJSON **trace, hx_err *err)
{
    return run_request(pl, request, io, model_turns, NULL, pl->p.model, trace, err);
}

/* The next request's prompt up to its clock line's last character (the
 * rest depends on the request: its recalled memories, its words), with
 * the messages as run_request will have them. */
static int next_prompt_start(hx_planner *pl, prompt *p, hx_err *err)
{
    const int n0 = cJSON_GetArraySize(pl->msgs);
    hx_buf clock;
    hx_buf_init(&clock);
    clock_text(pl, &clock);
    set_system_text(pl);
    add_msg(pl->msgs, "system", clock.data ? clock.data : "");
    hx_tpl_opts o = hx_tpl_default_opts();
    o.no_think = pl->p.no_think;
    int rc = render(pl, &o, p, err);
    while (cJSON_GetArraySize(pl->msgs) > (n0 ? n0 : 1))
        cJSON_DeleteItemFromArray(pl->msgs, cJSON_GetArraySize(pl->msgs) - 1);
    if (!n0) cJSON_DeleteItemFromArray(pl->msgs, 0);
    const char *at = NULL;
    for (const char *q = p->text.data; !rc && clock.data && q && (q = strstr(q, clock.data)); q++)
        at = q;
    p->text.len = at ? (size_t)(at - p->text.data) + clock.len - 1 : 0; /* before its ')' */
    if (p->text.data) p->text.data[p->text.len] = 0;
    hx_buf_free(&clock);
    return rc;
}

int hx_planner_prepare(hx_planner *pl, hx_err *err)
{
    hx_source *src = pl->d.src;
    if (src->api_version < 8 || !src->prepare) return HX_OK;
    prompt p = {0};
    hx_buf_init(&p.text);
    int rc = next_prompt_start(pl, &p, err);
    if (!rc && p.text.len) rc = src->prepare(src->ctx, p.text.data, &p.marks, err);
    hx_buf_free(&p.text);
    hx_tpl_marks_free(&p.marks);
    return rc;
}

int hx_planner_run_call(hx_planner *pl, const char *request, const char *name,
                        const cJSON *args, const hx_planner_io *io, cJSON **trace, hx_err *err)
{
    const rule_call c = {name, args};
    return run_request(pl, request, io, rule_turn, &c, "none (governor.tool_tier)", trace, err);
}

/* ---- a turn's text read as the planner reads it, for callers that run
 * no planner (the server's chat completions) ---- */
int hx_turn_calls_at(int family, const char *text)
{
    const char *c = calls_start(family == HX_TPL_LLAMA3, text);
    return c ? (int)(c - text) : -1;
}

size_t hx_turn_held_tail(int family, const char *text, size_t n)
{
    return held_tail(family == HX_TPL_LLAMA3, text, n);
}

int hx_turn_line_end(int family, hx_buf *text) { return line_end(family, text); }

cJSON *hx_turn_parse(int family, const char *text, char **content)
{
    pcall calls[HX_AGENT_MAX_CALLS];
    int n = parse_turn(family == HX_TPL_LLAMA3, text, content, calls, HX_AGENT_MAX_CALLS);
    cJSON *out = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *c = calls[i].fn;
        if (!c) {
            c = cJSON_CreateObject();
            if (calls[i].name[0]) cJSON_AddStringToObject(c, "name", calls[i].name);
            cJSON_AddStringToObject(c, "error", calls[i].error);
        }
        if (!cJSON_AddItemToArray(out, c)) cJSON_Delete(c);
    }
    return out;
}

void hx_turn_call_name(const char *text, char *out, size_t n)
{
    const char *p = strstr(text, "\"name\"");
    out[0] = 0;
    if (!p) return;
    p += 6 + strspn(p + 6, " \t\r\n");
    if (*p++ != ':') return;
    p += strspn(p, " \t\r\n");
    if (*p++ != '"') return;
    const size_t k = strcspn(p, "\"\\");
    if (p[k] == '"' && k < n) snprintf(out, n, "%.*s", (int)k, p);
}
