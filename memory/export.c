/* export.c: memories and episodes as JSON, for `hearth memory export` and
 * the --json outputs: the user owns this data and can take it away. */
#include "memory/memory_int.h"

#include <cjson/cJSON.h>
#include <string.h>

static void add_opt_int(cJSON *o, const char *key, int64_t v)
{
    if (v) cJSON_AddNumberToObject(o, key, (double)v);
    else cJSON_AddNullToObject(o, key);
}

static void add_opt_str(cJSON *o, const char *key, const char *s)
{
    if (s) cJSON_AddStringToObject(o, key, s);
    else cJSON_AddNullToObject(o, key);
}

/* JSON text is embedded as JSON; anything else as a string. */
static void add_json_or_str(cJSON *o, const char *key, const char *s)
{
    cJSON *v = s ? cJSON_Parse(s) : NULL;
    if (v) cJSON_AddItemToObject(o, key, v);
    else add_opt_str(o, key, s);
}

static cJSON *item_json(const hx_mem_item *it)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "id", (double)it->id);
    cJSON_AddStringToObject(o, "kind", it->kind);
    cJSON_AddStringToObject(o, "text", it->text);
    add_opt_int(o, "episode_id", it->episode_id);
    cJSON_AddNumberToObject(o, "created_at", (double)it->created_at);
    cJSON_AddNumberToObject(o, "updated_at", (double)it->updated_at);
    add_opt_int(o, "expires_at", it->expires_at);
    add_opt_int(o, "last_used_at", it->last_used_at);
    cJSON_AddNumberToObject(o, "use_count", (double)it->use_count);
    cJSON_AddStringToObject(o, "provenance", hx_mem_provenance_name(it->provenance));
    return o;
}

static const char *status_name(int s)
{
    return s == HX_CALL_OK ? "ok" : s == HX_CALL_ERROR ? "error" : "denied";
}

static cJSON *calls_json(const hx_episode *ep)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < ep->n_calls; i++) {
        const hx_tool_call_rec *c = &ep->calls[i];
        cJSON *o = cJSON_CreateObject();
        add_opt_str(o, "name", c->name);
        add_json_or_str(o, "arguments", c->arguments);
        add_json_or_str(o, "result", c->result);
        cJSON_AddStringToObject(o, "status", status_name(c->status));
        cJSON_AddBoolToObject(o, "confirmed", c->confirmed);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static cJSON *episode_json(const hx_episode *ep)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "id", (double)ep->id);
    cJSON_AddNumberToObject(o, "started_at", (double)ep->started_at);
    cJSON_AddNumberToObject(o, "finished_at", (double)ep->finished_at);
    cJSON_AddStringToObject(o, "request", ep->request);
    add_json_or_str(o, "messages", ep->messages);
    cJSON_AddItemToObject(o, "tool_calls", calls_json(ep));
    add_opt_str(o, "outcome", ep->outcome);
    add_opt_str(o, "model", ep->model);
    add_opt_str(o, "adapter", ep->adapter);
    cJSON_AddStringToObject(o, "verdict", hx_verdict_name(ep->verdict));
    add_opt_str(o, "corrected", ep->corrected);
    add_opt_int(o, "verdict_at", ep->verdict_at);
    if (ep->governor) add_json_or_str(o, "governor", ep->governor);
    return o;
}

/* Prints and frees o; NULL on out of memory. */
static char *print_free(cJSON *o, int pretty)
{
    char *s = o ? (pretty ? cJSON_Print(o) : cJSON_PrintUnformatted(o)) : NULL;
    cJSON_Delete(o);
    return s;
}

char *hx_mem_item_to_json(const hx_mem_item *it, int pretty)
{
    return print_free(item_json(it), pretty);
}

char *hx_episode_to_json(const hx_episode *ep, int pretty)
{
    return print_free(episode_json(ep), pretty);
}

/* ---- export ---- */

typedef struct export_ctx {
    FILE *f;
    int n;
} export_ctx;

static int export_episode(void *user, const hx_episode *ep, int heldout)
{
    (void)heldout;
    export_ctx *x = user;
    char *s = hx_episode_to_json(ep, 0);
    if (!s) return HX_ERR_NOMEM;
    fprintf(x->f, "%s\n    %s", x->n++ ? "," : "", s);
    free(s);
    return ferror(x->f) ? HX_ERR_IO : HX_OK;
}

static int export_memories(hx_memory *m, FILE *f, hx_err *err)
{
    hx_mem_list *l = NULL;
    int rc = hx_memory_list(m, NULL, 0, 1, &l, err);
    for (int i = 0; rc == HX_OK && i < l->n; i++) {
        char *s = hx_mem_item_to_json(&l->items[i], 0);
        if (!s) rc = hx_err_set(err, HX_ERR_NOMEM, "export: out of memory");
        else fprintf(f, "%s\n    %s", i ? "," : "", s);
        free(s);
    }
    hx_mem_list_free(l);
    return rc;
}

int hx_memory_export(hx_memory *m, FILE *f, hx_err *err)
{
    fprintf(f, "{\n  \"format\": \"hearth-memory-export\",\n"
               "  \"schema_version\": %d,\n  \"memories\": [",
            HX_MEMORY_SCHEMA_VERSION);
    int rc = export_memories(m, f, err);
    if (rc) return rc;
    fprintf(f, "\n  ],\n  \"episodes\": [");
    sqlite3_stmt *st = hx_mem_prepare(
        m, "SELECT " MEM_EP_COLS " FROM episodes_full ORDER BY id", err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    export_ctx x = {f, 0};
    rc = hx_mem_each_episode(m, st, 0, export_episode, &x, err);
    if (rc && err && err->rc != rc)
        hx_err_set(err, rc, "export: %s", hx_rc_str(rc));
    if (rc) return rc;
    fprintf(f, "\n  ]\n}\n");
    if (fflush(f) || ferror(f))
        return hx_err_set(err, HX_ERR_IO, "export: write failed");
    return HX_OK;
}
