/* body.c: request bodies, read as hostile: a JSON object, and the chat
 * completion request checked field by field (each error names its field,
 * as OpenAI's "param" does) and rendered into the model's prompt. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/serve_int.h"

#define MAX_MESSAGES 4096
#define MAX_TOOLS 128
#define MAX_STOP_BYTES 256

cJSON *hx_sv_parse_object(const char *body, size_t n, char *why, size_t why_n)
{
    const char *end = NULL;
    cJSON *j = body && n ? cJSON_ParseWithLengthOpts(body, n, &end, 0) : NULL;
    if (!j) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        snprintf(why, why_n, n ? "the body is not valid JSON (near byte %zu)" : "the body is empty",
                 at);
        return NULL;
    }
    while (end < body + n && isspace((unsigned char)*end)) end++;
    if (end != body + n || !cJSON_IsObject(j)) {
        snprintf(why, why_n, "the body must be one JSON object");
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* ---- the checks: each sets the error and its field ---- */
typedef struct chk {
    hx_err *err;
    char *pbuf;
    size_t pn;
    const char **param;
} chk;

__attribute__((format(printf, 3, 4))) static int bad(chk *c, const char *param, const char *fmt,
                                                     ...)
{
    va_list ap;
    snprintf(c->pbuf, c->pn, "%s", param);
    *c->param = c->pbuf;
    va_start(ap, fmt);
    hx_err_setv(c->err, HX_ERR_INVALID, fmt, ap);
    va_end(ap);
    return HX_ERR_INVALID;
}

/* A number field in [lo, hi] (integer if asked), absent: *out kept. */
static int num_field(chk *c, const cJSON *o, const char *key, double lo, double hi, int integer,
                     double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return HX_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi || (integer && v->valuedouble != floor(v->valuedouble)))
        return bad(c, key, "%s must be %s from %g to %g", key, integer ? "an integer" : "a number",
                   lo, hi);
    *out = v->valuedouble;
    return HX_OK;
}

static int bool_field(chk *c, const cJSON *o, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return HX_OK;
    if (!cJSON_IsBool(v)) return bad(c, key, "%s must be true or false", key);
    *out = cJSON_IsTrue(v);
    return HX_OK;
}

/* ---- messages ---- */
/* A message's text: a string, null (none), or text parts joined. */
static int content_text(chk *c, const cJSON *v, const char *where, hx_buf *out)
{
    if (!v || cJSON_IsNull(v)) return HX_OK;
    if (cJSON_IsString(v)) return hx_buf_puts(out, v->valuestring), HX_OK;
    if (!cJSON_IsArray(v)) return bad(c, where, "%s must be a string or an array of text parts", where);
    const cJSON *p;
    cJSON_ArrayForEach(p, v)
    {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "type"));
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "text"));
        if (!type || strcmp(type, "text") || !text)
            return bad(c, where, "%s: only text parts ({\"type\": \"text\", \"text\": ...}) are "
                       "supported", where);
        hx_buf_puts(out, text);
    }
    return HX_OK;
}

/* An assistant's tool_calls into the template's shape: arguments as an
 * object (OpenAI sends them as a JSON string). */
static int convert_calls(chk *c, const cJSON *calls, const char *where, cJSON *m)
{
    if (!cJSON_IsArray(calls)) return bad(c, where, "%s must be an array", where);
    cJSON *out = cJSON_AddArrayToObject(m, "tool_calls");
    const cJSON *tc;
    cJSON_ArrayForEach(tc, calls)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        cJSON *a = cJSON_IsString(args) ? cJSON_Parse(args->valuestring)
                                        : cJSON_IsObject(args) ? cJSON_Duplicate(args, 1) : NULL;
        if (!name || !cJSON_IsObject(a)) {
            cJSON_Delete(a);
            return bad(c, where, "%s: each call needs function.name and function.arguments, a "
                       "JSON object in a string", where);
        }
        cJSON *w = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(w, "function");
        cJSON_AddStringToObject(w, "type", "function");
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tc, "id"));
        if (id) cJSON_AddStringToObject(w, "id", id);
        cJSON_AddStringToObject(f, "name", name);
        cJSON_AddItemToObject(f, "arguments", a);
        cJSON_AddItemToArray(out, w);
    }
    return HX_OK;
}

/* The name of the call a tool message answers (its tool_call_id). */
static const char *call_name(const cJSON *msgs, const char *id)
{
    const cJSON *m, *tc;
    cJSON_ArrayForEach(m, msgs)
    {
        cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))
        {
            const char *tid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tc, "id"));
            if (id && tid && !strcmp(id, tid))
                return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(tc, "function"), "name"));
        }
    }
    return NULL;
}

static const char *role_of(const char *r)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool"};
    if (r && !strcmp(r, "developer")) return "system";
    for (size_t i = 0; r && i < sizeof roles / sizeof *roles; i++)
        if (!strcmp(r, roles[i])) return roles[i];
    return NULL;
}

static int convert_message(chk *c, const cJSON *in, int i, cJSON *out)
{
    char where[48];
    snprintf(where, sizeof where, "messages[%d]", i);
    const char *role = role_of(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(in, "role")));
    if (!cJSON_IsObject(in) || !role)
        return bad(c, where, "%s must be an object whose role is system, developer, user, "
                   "assistant or tool", where);
    hx_buf text;
    hx_buf_init(&text);
    snprintf(where, sizeof where, "messages[%d].content", i);
    int rc = content_text(c, cJSON_GetObjectItemCaseSensitive(in, "content"), where, &text);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", text.data ? text.data : "");
    hx_buf_free(&text);
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(in, "tool_calls");
    snprintf(where, sizeof where, "messages[%d].tool_calls", i);
    if (!rc && calls && !cJSON_IsNull(calls) && !strcmp(role, "assistant"))
        rc = convert_calls(c, calls, where, m);
    const char *name = !strcmp(role, "tool") ? call_name(out, cJSON_GetStringValue(
                           cJSON_GetObjectItemCaseSensitive(in, "tool_call_id"))) : NULL;
    if (name) cJSON_AddStringToObject(m, "name", name);
    cJSON_AddItemToArray(out, m);
    return rc;
}

static int parse_messages(chk *c, const cJSON *req, sv_chat_req *q)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    int n = cJSON_GetArraySize(msgs);
    if (!cJSON_IsArray(msgs) || n < 1 || n > MAX_MESSAGES)
        return bad(c, "messages", "messages must be an array of 1 to %d messages", MAX_MESSAGES);
    q->messages = cJSON_CreateArray();
    const cJSON *m;
    int i = 0, rc = HX_OK;
    cJSON_ArrayForEach(m, msgs) if (!rc) rc = convert_message(c, m, i++, q->messages);
    return rc;
}

/* ---- tools ---- */
static int tool_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* The schema a call's arguments are decoded under: the client's, with an
 * object that declares properties and says nothing of others closed
 * ("additionalProperties": false). JSON Schema leaves such an object open,
 * and a small model given a forced call then wrote key after key of its
 * own until the context was full; a tool has no use for arguments it did
 * not declare. The model is shown the schema as the client gave it. */
static char *grammar_schema(const cJSON *params)
{
    cJSON *g = cJSON_Duplicate(params, 1);
    if (g && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(g, "properties")) &&
        !cJSON_GetObjectItemCaseSensitive(g, "additionalProperties") &&
        !cJSON_GetObjectItemCaseSensitive(g, "patternProperties"))
        cJSON_AddFalseToObject(g, "additionalProperties");
    char *out = g ? cJSON_PrintUnformatted(g) : NULL;
    cJSON_Delete(g);
    return out;
}

/* One tool into the template's list and the grammar's specs. */
static int add_tool(chk *c, const cJSON *t, int i, sv_chat_req *q)
{
    char where[64];
    snprintf(where, sizeof where, "tools[%d].function", i);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "type"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    if (!type || strcmp(type, "function") || !tool_name_ok(name))
        return bad(c, where, "%s needs type \"function\" and a name of 1 to 64 letters, digits, "
                   "'_', '.' or '-'", where);
    for (int k = 0; k < q->n_specs; k++)
        if (!strcmp(q->specs[k].name, name)) return bad(c, where, "%s: tool %s is given twice", where, name);
    if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
        return bad(c, where, "%s.parameters must be a JSON Schema object", where);
    cJSON *o = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(o, "function");
    cJSON_AddStringToObject(o, "type", "function");
    cJSON_AddStringToObject(f, "name", name);
    if (cJSON_IsString(desc)) cJSON_AddStringToObject(f, "description", desc->valuestring);
    cJSON_AddItemToObject(f, "parameters", cJSON_IsObject(params) ? cJSON_Duplicate(params, 1)
                                                                   : cJSON_Parse("{\"type\":\"object\"}"));
    cJSON_AddItemToArray(q->tools, o);
    hx_tool_spec *s = &q->specs[q->n_specs++];
    s->name = hx_strdup(name);
    s->schema_json = grammar_schema(cJSON_GetObjectItemCaseSensitive(f, "parameters"));
    hx_err e = {0};
    if (hx_agent_schema_usable(s->schema_json, &e))
        return bad(c, where, "%s.parameters: %s", where, e.msg);
    return HX_OK;
}

static int parse_tools(chk *c, const cJSON *req, sv_chat_req *q)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    if (!tools || cJSON_IsNull(tools)) return HX_OK;
    int n = cJSON_GetArraySize(tools);
    if (!cJSON_IsArray(tools) || n > MAX_TOOLS)
        return bad(c, "tools", "tools must be an array of at most %d tools", MAX_TOOLS);
    if (!n) return HX_OK;
    q->tools = cJSON_CreateArray();
    q->specs = hx_calloc((size_t)n, sizeof *q->specs);
    if (!q->tools || !q->specs) return hx_err_set(c->err, HX_ERR_NOMEM, "out of memory");
    const cJSON *t;
    int i = 0, rc = HX_OK;
    cJSON_ArrayForEach(t, tools) if (!rc) rc = add_tool(c, t, i++, q);
    return rc;
}

/* tool_choice: "auto" (default with tools), "none", "required", or a
 * named function (required, its spec alone kept for the grammar). */
static int parse_choice(chk *c, const cJSON *req, sv_chat_req *q)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(req, "tool_choice");
    q->choice = q->n_specs ? HX_CHOICE_AUTO : HX_CHOICE_NONE;
    if (!tc || cJSON_IsNull(tc)) return HX_OK;
    const char *s = cJSON_GetStringValue(tc);
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(tc, "function"), "name"));
    if (s && !strcmp(s, "none")) return q->choice = HX_CHOICE_NONE, HX_OK;
    if (!s && !name)
        return bad(c, "tool_choice", "tool_choice is \"none\", \"auto\", \"required\" or "
                   "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (s && strcmp(s, "auto") && strcmp(s, "required"))
        return bad(c, "tool_choice", "tool_choice '%.40s' is not none, auto or required", s);
    if (!q->n_specs) return bad(c, "tool_choice", "tool_choice asks for a tool and no tools are given");
    if (s && !strcmp(s, "auto")) return HX_OK;
    q->choice = HX_CHOICE_REQUIRED;
    if (!name) return HX_OK;
    for (int k = 0; k < q->n_specs; k++) {
        if (strcmp(q->specs[k].name, name)) continue;
        hx_tool_spec keep = q->specs[k];
        q->specs[k] = q->specs[0];
        q->specs[0] = keep;
        for (int i = 1; i < q->n_specs; i++) {
            free((char *)q->specs[i].name);
            cJSON_free((char *)q->specs[i].schema_json);
        }
        q->n_specs = 1;
        return HX_OK;
    }
    return bad(c, "tool_choice", "tool_choice names %.64s, which is not among the tools", name);
}

/* response_format: text, json_object ({"type": "object"}) or json_schema. */
static int parse_format(chk *c, const cJSON *req, sv_chat_req *q)
{
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(req, "response_format");
    if (!rf || cJSON_IsNull(rf)) return HX_OK;
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rf, "type"));
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(rf, "json_schema"), "schema");
    if (type && !strcmp(type, "text")) return HX_OK;
    if (type && !strcmp(type, "json_object")) {
        cJSON *any = cJSON_CreateObject();
        cJSON_AddStringToObject(any, "type", "object");
        q->schema = cJSON_PrintUnformatted(any);
        cJSON_Delete(any);
    } else if (type && !strcmp(type, "json_schema") && cJSON_IsObject(schema))
        q->schema = cJSON_PrintUnformatted(schema);
    else
        return bad(c, "response_format", "response_format is {\"type\": \"text\"}, {\"type\": "
                   "\"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
                   "..., \"schema\": {...}}}");
    hx_err e = {0};
    if (!q->schema) return hx_err_set(c->err, HX_ERR_NOMEM, "out of memory");
    if (hx_agent_schema_usable(q->schema, &e))
        return bad(c, "response_format.json_schema.schema", "the schema cannot be enforced: %s",
                   e.msg);
    if (q->choice != HX_CHOICE_NONE)
        return bad(c, "response_format", "response_format with tools the model may call: give "
                   "tool_choice \"none\" (or leave the tools out) for a JSON answer");
    q->choice = HX_CHOICE_SCHEMA;
    return HX_OK;
}

static int parse_stop(chk *c, const cJSON *req, sv_chat_req *q)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(req, "stop"), *s;
    if (!st || cJSON_IsNull(st)) return HX_OK;
    if (cJSON_IsString(st)) {
        q->stops[q->n_stops++] = hx_strdup(st->valuestring);
    } else {
        if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) > 4)
            return bad(c, "stop", "stop is a string or an array of up to 4 strings");
        cJSON_ArrayForEach(s, st)
        {
            if (!cJSON_IsString(s))
                return bad(c, "stop", "stop is a string or an array of up to 4 strings");
            q->stops[q->n_stops++] = hx_strdup(s->valuestring);
        }
    }
    for (int i = 0; i < q->n_stops; i++)
        if (!q->stops[i] || !*q->stops[i] || strlen(q->stops[i]) > MAX_STOP_BYTES)
            return bad(c, "stop", "each stop string has 1 to %d bytes", MAX_STOP_BYTES);
    return HX_OK;
}

/* Sampling: OpenAI's defaults (temperature 1, top_p 1), llama.cpp's top-k
 * and min-p under them, a random seed unless one is given. */
static int parse_sampling(chk *c, const cJSON *req, sv_chat_req *q)
{
    double temp = 1, top_p = 1, seed = NAN, pres = 0, freq = 0, n = 1, max = 0, maxc = 0;
    int rc;
    if ((rc = num_field(c, req, "temperature", 0, 2, 0, &temp)) ||
        (rc = num_field(c, req, "top_p", 0, 1, 0, &top_p)) ||
        (rc = num_field(c, req, "seed", -9.0e15, 9.0e15, 1, &seed)) ||
        (rc = num_field(c, req, "presence_penalty", -2, 2, 0, &pres)) ||
        (rc = num_field(c, req, "frequency_penalty", -2, 2, 0, &freq)) ||
        (rc = num_field(c, req, "n", 1, 1, 1, &n)) ||
        (rc = num_field(c, req, "max_tokens", 1, 1 << 20, 1, &max)) ||
        (rc = num_field(c, req, "max_completion_tokens", 1, 1 << 20, 1, &maxc)))
        return rc;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "logprobs")))
        return bad(c, "logprobs", "logprobs are not supported");
    q->sp = hx_sampler_default_params();
    q->sp.temp = (float)temp;
    q->sp.top_p = (float)top_p;
    q->sp.presence_penalty = (float)pres;
    q->sp.frequency_penalty = (float)freq;
    if (!isnan(seed)) q->sp.seed = (uint64_t)(int64_t)seed; /* a negative one: its bits */
    q->max_tokens = (int)(maxc ? maxc : max);
    return HX_OK;
}

static int parse_stream(chk *c, const cJSON *req, sv_chat_req *q)
{
    int rc = bool_field(c, req, "stream", &q->stream);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(req, "stream_options");
    if (!rc && so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) return bad(c, "stream_options", "stream_options must be an object");
        rc = bool_field(c, so, "include_usage", &q->include_usage);
    }
    return rc;
}

static int render(chk *c, int family, sv_chat_req *q)
{
    hx_tpl_opts o = hx_tpl_default_opts();
    o.no_think = 1;
    hx_buf b;
    hx_buf_init(&b);
    int rc = hx_tpl_render_marked(family, q->messages, q->tools, &o, &b, &q->marks);
    if (rc || b.oom || q->marks.oom) {
        hx_buf_free(&b);
        return hx_err_set(c->err, rc ? rc : HX_ERR_NOMEM, "cannot render the prompt");
    }
    q->prompt = hx_buf_steal(&b, NULL);
    return q->prompt ? HX_OK : hx_err_set(c->err, HX_ERR_NOMEM, "out of memory");
}

int hx_sv_chat_parse(const char *body, size_t n, int family, sv_chat_req *q, char *param_buf,
                  size_t param_n, const char **param, hx_err *err)
{
    chk c = {err, param_buf, param_n, param};
    char why[96];
    memset(q, 0, sizeof *q);
    *param = NULL;
    cJSON *req = hx_sv_parse_object(body, n, why, sizeof why);
    if (!req) return hx_err_set(err, HX_ERR_FORMAT, "%s", why);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(req, "model");
    int rc = model && !cJSON_IsString(model) ? bad(&c, "model", "model must be a string") : HX_OK;
    if (!rc) rc = parse_messages(&c, req, q);
    if (!rc) rc = parse_tools(&c, req, q);
    if (!rc) rc = parse_choice(&c, req, q);
    if (!rc) rc = parse_format(&c, req, q);
    if (!rc) rc = parse_stop(&c, req, q);
    if (!rc) rc = parse_sampling(&c, req, q);
    if (!rc) rc = parse_stream(&c, req, q);
    if (!rc) rc = render(&c, family, q);
    cJSON_Delete(req);
    if (!rc && hx_sv_random_hex(q->id + 9, 12)) rc = hx_err_set(err, HX_ERR_IO, "no random bytes");
    if (!rc) memcpy(q->id, "chatcmpl-", 9);
    q->created = (int64_t)time(NULL);
    return rc;
}

void hx_sv_chat_req_free(sv_chat_req *q)
{
    if (!q) return;
    cJSON_Delete(q->messages);
    cJSON_Delete(q->tools);
    for (int i = 0; i < q->n_specs; i++) {
        free((char *)q->specs[i].name);
        cJSON_free((char *)q->specs[i].schema_json);
    }
    free(q->specs);
    cJSON_free(q->schema);
    for (int i = 0; i < q->n_stops; i++) free(q->stops[i]);
    free(q->prompt);
    hx_tpl_marks_free(&q->marks);
    memset(q, 0, sizeof *q);
}
