/* mcp.c: the client side of the Model Context Protocol over stdio:
 * JSON-RPC 2.0, one message per line, to a server running confined in the
 * sandbox: initialize, notifications/initialized, tools/list (all pages,
 * up to caps on what one server adds), tools/call with isError results,
 * notifications/tools/list_changed. */
#include <stdlib.h>
#include <string.h>

#include "tools/ext_int.h"

#define HX_MCP_STR_(x) #x
#define HX_MCP_STR(x) HX_MCP_STR_(x)

#define PROTOCOL_VERSION "2025-06-18"
#define MAX_LINE (4u << 20)
#define MAX_PAGES 64
/* What one server may add to the tool list every request carries: its
 * first tools only, so that a server listing thousands can neither fill
 * the model's context nor make loading slow. */
#define MAX_SERVER_TOOLS 32
#define MAX_SERVER_LIST_BYTES 12288 /* 12 KiB of names, descriptions, schemas */
#define MAX_EXT_TOOLS 64                  /* registered tools of all manifests */

struct mcp_conn {
    hx_sandbox_proc *proc;
    ext_manifest *m;
    hx_extools *x;
    long next_id;
    int broken;       /* a protocol error happened: calls fail fast */
    int list_changed; /* the server said its tools changed */
    char why_broken[256];
    int n_listed;      /* tools registered from this server */
    size_t list_bytes; /* their names, descriptions and schemas */
    const char *capped; /* which limit left tools out, or NULL */
    hx_buf *problems;  /* where a cap is reported while connecting, or NULL */
};

/* Every exchange is bounded by the manifest's timeout (default 10 s). */
static int timeout_ms(const mcp_conn *c) { return (int)(c->m->timeout_s * 1000); }

static int send_msg(mcp_conn *c, cJSON *msg, hx_err *err)
{
    char *s = cJSON_PrintUnformatted(msg);
    if (!s) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    size_t n = strlen(s);
    s[n] = '\n'; /* replaces the NUL; the write has the length */
    int rc = hx_sandbox_proc_write(c->proc, s, n + 1, timeout_ms(c), err);
    free(s);
    return rc;
}

static cJSON *new_msg(const char *method, long id)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "jsonrpc", "2.0");
    if (id >= 0) cJSON_AddNumberToObject(m, "id", (double)id);
    cJSON_AddStringToObject(m, "method", method);
    return m;
}

static int mark_broken(mcp_conn *c, int rc, hx_err *err, const char *why)
{
    c->broken = 1;
    snprintf(c->why_broken, sizeof c->why_broken, "%s", why);
    return hx_err_set(err, rc, "MCP server %s: %s", c->m->name, why);
}

/* A request from the server to us: we offer no client features. */
static void refuse_request(mcp_conn *c, const cJSON *msg)
{
    cJSON *r = cJSON_CreateObject();
    hx_err e;
    cJSON_AddStringToObject(r, "jsonrpc", "2.0");
    cJSON_AddItemToObject(r, "id", cJSON_Duplicate(cJSON_GetObjectItem(msg, "id"), 1));
    cJSON *er = cJSON_AddObjectToObject(r, "error");
    cJSON_AddNumberToObject(er, "code", -32601);
    cJSON_AddStringToObject(er, "message", "method not supported by Hearth");
    send_msg(c, r, &e);
    cJSON_Delete(r);
}

/* Handles a message that is not the awaited response. */
static void handle_other(mcp_conn *c, const cJSON *msg)
{
    const cJSON *method = cJSON_GetObjectItem(msg, "method");
    if (!cJSON_IsString(method)) return; /* a stale response: ignored */
    if (cJSON_GetObjectItem(msg, "id")) refuse_request(c, msg);
    else if (!strcmp(method->valuestring, "notifications/tools/list_changed"))
        c->list_changed = 1;
}

/* Sends a request and waits for its response; *result is the "result"
 * member (caller frees). A JSON-RPC error becomes HX_ERR_IO. */
static int request(mcp_conn *c, const char *method, cJSON *params, int timeout_ms,
                   cJSON **result, hx_err *err)
{
    *result = NULL;
    if (c->broken) return hx_err_set(err, HX_ERR_STATE, "MCP server %s is unusable: %s",
                                     c->m->name, c->why_broken);
    long id = c->next_id++;
    cJSON *msg = new_msg(method, id);
    if (params) cJSON_AddItemToObject(msg, "params", params);
    int rc = send_msg(c, msg, err);
    cJSON_Delete(msg);
    if (rc) return mark_broken(c, rc, err, "does not read its input");
    hx_buf line;
    hx_buf_init(&line);
    double deadline = hx_time_mono() + timeout_ms / 1000.0;
    while (!rc) {
        int left = (int)((deadline - hx_time_mono()) * 1000);
        rc = hx_sandbox_proc_read_line(c->proc, &line, MAX_LINE, left > 0 ? left : 0, err);
        if (rc == HX_ERR_TIMEOUT) {
            rc = hx_err_set(err, HX_ERR_TIMEOUT, "MCP server %s did not answer %s in %d ms",
                            c->m->name, method, timeout_ms);
            break;
        }
        if (rc) {
            rc = mark_broken(c, rc, err, "closed the connection");
            break;
        }
        cJSON *in = cJSON_ParseWithLength(line.data ? line.data : "", line.len);
        if (!in || !cJSON_IsObject(in)) {
            cJSON_Delete(in);
            rc = mark_broken(c, HX_ERR_FORMAT, err, "answered something that is not JSON-RPC");
            break;
        }
        const cJSON *rid = cJSON_GetObjectItem(in, "id");
        if (cJSON_IsNumber(rid) && (long)rid->valuedouble == id && !cJSON_GetObjectItem(in, "method")) {
            const cJSON *er = cJSON_GetObjectItem(in, "error");
            const cJSON *msgs = er ? cJSON_GetObjectItem(er, "message") : NULL;
            if (er) rc = hx_err_set(err, HX_ERR_IO, "MCP server %s: %s failed: %s", c->m->name,
                                    method, cJSON_IsString(msgs) ? msgs->valuestring : "error");
            else *result = cJSON_DetachItemFromObject(in, "result");
            cJSON_Delete(in);
            if (!rc && !*result) rc = mark_broken(c, HX_ERR_FORMAT, err, "sent a response without a result");
            break;
        }
        handle_other(c, in);
        cJSON_Delete(in);
    }
    hx_buf_free(&line);
    return rc;
}

static int initialize(mcp_conn *c, hx_err *err)
{
    cJSON *p = cJSON_CreateObject(), *res;
    cJSON_AddStringToObject(p, "protocolVersion", PROTOCOL_VERSION);
    cJSON_AddObjectToObject(p, "capabilities");
    cJSON *info = cJSON_AddObjectToObject(p, "clientInfo");
    cJSON_AddStringToObject(info, "name", "hearth");
    cJSON_AddStringToObject(info, "version", "0.1.0");
    int rc = request(c, "initialize", p, timeout_ms(c), &res, err);
    if (rc) return rc;
    int ok = cJSON_IsObject(res) && cJSON_IsString(cJSON_GetObjectItem(res, "protocolVersion"));
    cJSON_Delete(res);
    if (!ok) return mark_broken(c, HX_ERR_FORMAT, err, "initialize result lacks protocolVersion");
    cJSON *n = new_msg("notifications/initialized", -1);
    rc = send_msg(c, n, err);
    cJSON_Delete(n);
    return rc;
}

/* ---- tools ---- */

static cJSON *text_of(const cJSON *content)
{
    hx_buf b;
    hx_buf_init(&b);
    const cJSON *it;
    cJSON_ArrayForEach(it, content)
    {
        const cJSON *t = cJSON_GetObjectItem(it, "text");
        if (!cJSON_IsString(t)) continue;
        if (b.len) hx_buf_putc(&b, '\n');
        hx_buf_puts(&b, t->valuestring);
    }
    cJSON *s = cJSON_CreateString(b.data ? b.data : "");
    hx_buf_free(&b);
    return s;
}

static int refresh_tools(mcp_conn *c, hx_err *err);

static int call_mcp(hx_tools *reg, void *user, const cJSON *args, cJSON **result, hx_err *err)
{
    (void)reg;
    ext_tool *t = user;
    mcp_conn *c = t->conn;
    if (c->list_changed) refresh_tools(c, err);
    cJSON *p = cJSON_CreateObject(), *res;
    cJSON_AddStringToObject(p, "name", t->remote);
    cJSON_AddItemToObject(p, "arguments", cJSON_Duplicate(args, 1));
    t->last_sandbox = hx_sandbox_proc_applied(c->proc);
    int rc = request(c, "tools/call", p, timeout_ms(c), &res, err);
    if (rc) return rc;
    hx_err e2;
    if (c->list_changed) refresh_tools(c, &e2); /* announced during the call */
    const cJSON *content = cJSON_GetObjectItem(res, "content");
    if (cJSON_IsTrue(cJSON_GetObjectItem(res, "isError"))) {
        cJSON *txt = text_of(content);
        rc = hx_err_set(err, HX_ERR_IO, "%s: %s", t->name, txt->valuestring);
        cJSON_Delete(txt);
    } else {
        cJSON *out = cJSON_CreateObject();
        cJSON *sc = cJSON_DetachItemFromObject(res, "structuredContent");
        if (cJSON_IsObject(sc)) cJSON_AddItemToObject(out, "result", sc);
        else cJSON_Delete(sc), cJSON_AddItemToObject(out, "text", text_of(content));
        *result = out;
    }
    cJSON_Delete(res);
    return rc;
}

static int already_registered(const mcp_conn *c, const char *full)
{
    for (int i = 0; i < c->x->n_tools; i++)
        if (c->x->tools[i]->conn == c && !strcmp(c->x->tools[i]->name, full)) return 1;
    return 0;
}

/* The limit that adding a tool of n bytes would pass, or NULL. */
static const char *over_cap(const mcp_conn *c, size_t n)
{
    if (c->n_listed >= MAX_SERVER_TOOLS) return "more than " HX_MCP_STR(MAX_SERVER_TOOLS) " tools";
    if (c->list_bytes + n > MAX_SERVER_LIST_BYTES)
        return "tool descriptions and schemas over " HX_MCP_STR(MAX_SERVER_LIST_BYTES) " bytes in all";
    if (c->x->n_tools >= MAX_EXT_TOOLS)
        return "tools past the limit of " HX_MCP_STR(MAX_EXT_TOOLS) " registered tools in all";
    return NULL;
}

/* Registers one tool of a tools/list page, unless a cap is reached. */
static int add_listed(mcp_conn *c, const cJSON *tool, hx_err *err)
{
    const cJSON *name = cJSON_GetObjectItem(tool, "name");
    const cJSON *desc = cJSON_GetObjectItem(tool, "description");
    const cJSON *schema = cJSON_GetObjectItem(tool, "inputSchema");
    if (!cJSON_IsString(name) || !cJSON_IsObject(schema))
        return hx_err_set(err, HX_ERR_FORMAT, "MCP server %s listed a tool without name or inputSchema",
                          c->m->name);
    char full[160];
    snprintf(full, sizeof full, "%s.%s", c->m->name, name->valuestring);
    if (already_registered(c, full)) return HX_OK;
    const cJSON *ann = cJSON_GetObjectItem(tool, "annotations");
    int effect = hx_ext_effect(c->m, cJSON_IsTrue(cJSON_GetObjectItem(ann, "readOnlyHint")));
    const char *d = cJSON_IsString(desc) ? desc->valuestring : "";
    char *sj = cJSON_PrintUnformatted(schema);
    if (!sj) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    size_t n = strlen(full) + strlen(d) + strlen(sj);
    int rc = HX_OK;
    if (!(c->capped = over_cap(c, n))) {
        rc = hx_ext_add_tool(c->x, c->m, c, full, name->valuestring, d, sj, effect, call_mcp, err);
        if (!rc) c->n_listed++, c->list_bytes += n;
    }
    free(sj);
    return rc;
}

/* Says once that the server listed more than is kept: in problems while
 * connecting (`hearth tools list` shows them), else as a warning. */
static void report_cap(mcp_conn *c)
{
    char msg[400];
    snprintf(msg, sizeof msg,
             "MCP server %s lists %s; only its first %d tools are used (the tool list "
             "goes with every request and must fit the model's context)",
             c->m->name, c->capped, c->n_listed);
    if (c->problems) {
        hx_buf_puts(c->problems, msg);
        hx_buf_putc(c->problems, '\n');
    } else {
        hx_log_warn("%s", msg);
    }
}

/* tools/list, every page up to the caps; tools already known are kept. */
static int refresh_tools(mcp_conn *c, hx_err *err)
{
    char *cursor = NULL;
    int rc = HX_OK;
    c->list_changed = 0;
    c->capped = NULL;
    for (int page = 0; page < MAX_PAGES && !rc && !c->capped; page++) {
        cJSON *p = cJSON_CreateObject(), *res;
        if (cursor) cJSON_AddStringToObject(p, "cursor", cursor);
        free(cursor), cursor = NULL;
        rc = request(c, "tools/list", p, timeout_ms(c), &res, err);
        if (rc) break;
        const cJSON *tools = cJSON_GetObjectItem(res, "tools"), *it;
        if (!cJSON_IsArray(tools)) rc = mark_broken(c, HX_ERR_FORMAT, err, "tools/list without tools");
        cJSON_ArrayForEach(it, tools) if (!rc && !c->capped) rc = add_listed(c, it, err);
        const cJSON *next = cJSON_GetObjectItem(res, "nextCursor");
        if (cJSON_IsString(next) && next->valuestring[0]) cursor = hx_strdup(next->valuestring);
        cJSON_Delete(res);
        if (!cursor) break;
    }
    free(cursor);
    if (!rc && c->capped) report_cap(c);
    return rc;
}

int hx_mcp_connect(hx_extools *x, ext_manifest *m, hx_buf *problems, mcp_conn **out, hx_err *err)
{
    *out = NULL;
    mcp_conn *c = hx_calloc(1, sizeof *c);
    if (!c) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    c->m = m, c->x = x, c->next_id = 1;
    hx_sandbox_params p = hx_ext_sandbox_params(m);
    p.timeout_s = 0; /* a server lives as long as the session; requests time out */
    p.cpu_s = 0;
    int rc = hx_sandbox_spawn(&p, &c->proc, err);
    if (!rc) rc = initialize(c, err);
    c->problems = problems;
    if (!rc) rc = refresh_tools(c, err);
    c->problems = NULL; /* borrowed for the connection only */
    if (rc) {
        hx_mcp_close(c);
        return rc;
    }
    *out = c;
    return HX_OK;
}

void hx_mcp_close(mcp_conn *c)
{
    if (!c) return;
    hx_sandbox_proc_free(c->proc);
    free(c);
}
