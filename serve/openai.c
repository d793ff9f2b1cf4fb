/* openai.c: the OpenAI-compatible surface: GET /v1/models and POST
 * /v1/chat/completions (tools called under the tool-call grammar,
 * response_format's JSON Schema enforced, streamed as OpenAI streams). */
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

enum MHD_Result hx_sv_models(sv_req *r)
{
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", r->srv->d.model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)r->srv->created);
    cJSON_AddStringToObject(m, "owned_by", "hearth");
    cJSON_AddItemToArray(data, m);
    return hx_sv_json(r->conn, 200, o);
}

static void free_chat(void *work)
{
    hx_sv_chat_req_free(work);
    free(work);
}

enum MHD_Result hx_sv_chat_completions(sv_req *r)
{
    sv_chat_req *q = hx_calloc(1, sizeof *q);
    char pbuf[64];
    const char *param = NULL;
    hx_err err = {0};
    if (!q) return hx_sv_error(r->conn, 500, NULL, NULL, "out of memory");
    if (hx_sv_chat_parse(r->body, r->body_len, r->srv->d.family, q, pbuf, sizeof pbuf, &param,
                      &err)) {
        free_chat(q);
        return hx_sv_error(r->conn, err.rc == HX_ERR_NOMEM ? 500 : 400, param, NULL, "%s", err.msg);
    }
    return hx_sv_submit(r, SV_JOB_CHAT, q, free_chat, q->prompt);
}

/* ---- one generation ---- */
typedef struct gen {
    sv_slot *slot;
    sv_job *j;
    sv_chat_req *q;
    hx_server *srv;
    int family;
    int calls_on;       /* the model may call the request's tools */
    hx_buf text;        /* everything generated (cut at a stop) */
    size_t sent;        /* bytes of text streamed as content */
    int n_prompt, n_gen;
    const char *finish; /* "stop", "length", "tool_calls" */
} gen;

static cJSON *chunk(const gen *g, cJSON *delta, const char *finish)
{
    cJSON *o = cJSON_CreateObject(), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON_AddStringToObject(o, "id", g->q->id);
    cJSON_AddStringToObject(o, "object", delta ? "chat.completion.chunk" : "chat.completion");
    cJSON_AddNumberToObject(o, "created", (double)g->q->created);
    cJSON_AddStringToObject(o, "model", g->srv->d.model_name);
    cJSON_AddStringToObject(o, "system_fingerprint", "hearth");
    if (!delta) return o;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddItemToObject(c, "delta", delta);
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddItemToObject(c, "finish_reason", finish ? cJSON_CreateString(finish) : cJSON_CreateNull());
    cJSON_AddItemToArray(choices, c);
    if (g->q->include_usage) cJSON_AddNullToObject(o, "usage");
    return o;
}

static void send_json(sv_job *j, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s) hx_sv_job_send_data(j, s);
    cJSON_free(s);
    cJSON_Delete(o);
}

static void send_delta(gen *g, const char *key, const char *text, size_t n)
{
    cJSON *d = cJSON_CreateObject();
    char *t = hx_strndup(text, n);
    cJSON_AddStringToObject(d, key, t ? t : "");
    free(t);
    send_json(g->j, chunk(g, d, NULL));
}

/* Bytes at the end of text[0, n) that may begin a stop string. */
static size_t stop_held(const gen *g, const char *text, size_t n)
{
    size_t held = 0;
    for (int i = 0; i < g->q->n_stops; i++) {
        const char *s = g->q->stops[i];
        size_t k = strlen(s) - 1;
        for (k = k < n ? k : n; k > held; k--)
            if (!memcmp(text + n - k, s, k)) {
                held = k;
                break;
            }
    }
    return held;
}

/* Where the content ends in text: before the calls, and before what may
 * still turn out to be their start or a stop string (unless final). */
static size_t content_end(const gen *g, int final)
{
    const char *t = g->text.data ? g->text.data : "";
    size_t n = g->text.len;
    int at = g->calls_on ? hx_turn_calls_at(g->family, t) : -1;
    if (at >= 0) return (size_t)at;
    if (final) return n;
    if (g->calls_on) n -= hx_turn_held_tail(g->family, t, n);
    return n - stop_held(g, t, n);
}

/* Streams the content written since the last call (leading whitespace
 * left out, as the planner trims it). */
static void stream_content(gen *g, int final)
{
    const char *t = g->text.data;
    size_t end = final ? content_end(g, 1) : hx_utf8_cut(t, content_end(g, 0), g->sent);
    if (!g->sent)
        while (g->sent < end && strchr(" \t\r\n", t[g->sent])) g->sent++;
    if (end <= g->sent) return;
    if (g->q->stream) send_delta(g, "content", t + g->sent, end - g->sent);
    g->sent = end;
}

/* Cuts text at the first stop string: 1 if one was found. */
static int cut_stop(gen *g, size_t from)
{
    for (int i = 0; i < g->q->n_stops; i++) {
        const char *s = g->q->stops[i];
        size_t k = strlen(s);
        for (size_t p = from; p + k <= g->text.len; p++)
            if (!memcmp(g->text.data + p, s, k)) {
                g->text.len = p;
                g->text.data[p] = 0;
                return 1;
            }
    }
    return 0;
}

/* Generates until the end of the turn, a limit, a stop string or the
 * client's leaving. HX_OK, or the source's error. */
static int generate(gen *g, hx_err *err)
{
    int longest = 0, rc = HX_OK;
    for (int i = 0; i < g->q->n_stops; i++)
        if ((int)strlen(g->q->stops[i]) > longest) longest = (int)strlen(g->q->stops[i]);
    for (;;) {
        if (hx_sv_slot_cancelled(g->slot)) return HX_ERR_CANCELLED;
        if (g->q->max_tokens && g->n_gen >= g->q->max_tokens) return g->finish = "length", HX_OK;
        size_t before = g->text.len;
        int end = 0;
        if ((rc = hx_sv_slot_next(g->slot, &g->text, &end, err)))
            return rc == HX_ERR_FULL ? (g->finish = "length", HX_OK) : rc;
        if (end) return HX_OK;
        g->n_gen++;
        size_t from = before > (size_t)longest ? before - (size_t)longest : 0;
        if (g->q->choice != HX_CHOICE_SCHEMA && hx_turn_line_end(g->family, &g->text)) return HX_OK;
        if (cut_stop(g, from)) return HX_OK;
        stream_content(g, 0);
    }
}

/* The calls the model wrote as OpenAI's tool_calls (arguments as a JSON
 * string); a call a limit cut short is left out (finish says so). */
static cJSON *tool_calls(const cJSON *calls)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, calls)
    {
        if (cJSON_GetObjectItem(c, "error")) continue;
        char id[32] = "call_", *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "arguments"));
        cJSON *w = cJSON_CreateObject(), *f = cJSON_CreateObject();
        if (hx_sv_random_hex(id + 5, 12)) snprintf(id + 5, sizeof id - 5, "%d", i);
        cJSON_AddNumberToObject(w, "index", i++);
        cJSON_AddStringToObject(w, "id", id);
        cJSON_AddStringToObject(w, "type", "function");
        cJSON_AddStringToObject(f, "name", cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")));
        cJSON_AddStringToObject(f, "arguments", args ? args : "{}");
        cJSON_free(args);
        cJSON_AddItemToObject(w, "function", f);
        cJSON_AddItemToArray(out, w);
    }
    return out;
}

static cJSON *usage(const gen *g)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", g->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", g->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", g->n_prompt + g->n_gen);
    return u;
}

/* The stream's end: the content left, the calls, the finish, the usage. */
static void end_stream(gen *g, cJSON *tc, const char *finish)
{
    stream_content(g, 1);
    if (cJSON_GetArraySize(tc)) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "tool_calls", cJSON_Duplicate(tc, 1));
        send_json(g->j, chunk(g, d, NULL));
    }
    send_json(g->j, chunk(g, cJSON_CreateObject(), finish));
    if (g->q->include_usage) {
        cJSON *u = chunk(g, cJSON_CreateObject(), NULL);
        cJSON_ReplaceItemInObject(u, "choices", cJSON_CreateArray());
        cJSON_ReplaceItemInObject(u, "usage", usage(g));
        send_json(g->j, u);
    }
    hx_sv_job_send_data(g->j, "[DONE]");
}

/* The one chat.completion object (takes tc). */
static void respond(gen *g, const char *content, cJSON *tc, const char *finish)
{
    cJSON *o = chunk(g, NULL, NULL), *c = cJSON_CreateObject(), *m = cJSON_CreateObject();
    int n_calls = cJSON_GetArraySize(tc);
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddItemToObject(m, "content", *content || !n_calls ? cJSON_CreateString(content)
                                                             : cJSON_CreateNull());
    cJSON_AddNullToObject(m, "refusal");
    const cJSON *call;
    cJSON_ArrayForEach(call, tc) cJSON_DeleteItemFromObject((cJSON *)call, "index"); /* a delta's */
    if (n_calls) cJSON_AddItemToObject(m, "tool_calls", tc);
    else cJSON_Delete(tc);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON_AddItemToObject(c, "message", m);
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", finish);
    cJSON_AddItemToArray(cJSON_GetObjectItem(o, "choices"), c);
    cJSON_AddItemToObject(o, "usage", usage(g));
    char *s = cJSON_PrintUnformatted(o);
    hx_sv_job_respond(g->j, 200, s ? s : "{}");
    cJSON_free(s);
    cJSON_Delete(o);
}

/* Text without the whitespace around it (as the planner reads turns). */
static char *trimmed(const char *s, size_t n)
{
    while (n && strchr(" \t\r\n", *s)) s++, n--;
    while (n && strchr(" \t\r\n", s[n - 1])) n--;
    return hx_strndup(s, n);
}

/* The whole answer: one object, or the stream's last chunks. The calls
 * are read as the planner reads them, only where the request let the
 * model call. */
static void answer(gen *g)
{
    char *content = NULL;
    const char *text = g->text.data ? g->text.data : "";
    cJSON *calls = g->calls_on ? hx_turn_parse(g->family, text, &content) : NULL;
    cJSON *tc = tool_calls(calls);
    if (!content) content = trimmed(text, g->text.len);
    const char *finish = g->finish ? g->finish : cJSON_GetArraySize(tc) ? "tool_calls" : "stop";
    if (g->q->stream) end_stream(g, tc, finish), cJSON_Delete(tc);
    else respond(g, content ? content : "", tc, finish);
    cJSON_Delete(calls);
    free(content);
}

static void fail(gen *g, int rc, const hx_err *err)
{
    int full = rc == HX_ERR_FULL;
    hx_sv_job_fail(g->j, full ? 400 : 500, full ? "messages" : NULL,
                full ? "context_length_exceeded" : NULL, err->msg);
}

void hx_sv_chat_run(sv_slot *slot, sv_job *j)
{
    sv_chat_req *q = j->work;
    gen g = {slot, j, q, hx_sv_slot_server(slot), 0, 0, {0}, 0, 0, 0, NULL};
    g.family = g.srv->d.family;
    g.calls_on = q->choice == HX_CHOICE_AUTO || q->choice == HX_CHOICE_REQUIRED;
    hx_buf_init(&g.text);
    hx_engine_turn t = {q->sp, q->specs, q->n_specs, q->schema, 0};
    hx_err err = {0};
    int rc = hx_sv_slot_configure(slot, &t, &err);
    if (!rc) rc = hx_sv_slot_begin(slot, q->prompt, &q->marks, q->choice, &g.n_prompt, &err);
    if (!rc && q->stream) {
        hx_sv_job_start_stream(j);
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddStringToObject(d, "content", "");
        send_json(j, chunk(&g, d, NULL));
    }
    if (!rc) rc = generate(&g, &err);
    if (!rc) answer(&g);
    else if (rc != HX_ERR_CANCELLED) fail(&g, rc, &err);
    hx_log_debug("serve: %s: %d prompt tokens, %d generated, %s", q->id, g.n_prompt, g.n_gen,
                 rc == HX_ERR_CANCELLED ? "cancelled" : rc ? "failed" : g.finish ? g.finish : "stop");
    hx_buf_free(&g.text);
}
