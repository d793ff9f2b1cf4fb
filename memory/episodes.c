/* episodes.c: recording agent runs (request, messages, tool calls, outcome,
 * verdict) and reading them back, one at a time or as training data. */
#include "memory/memory_int.h"

#include <cjson/cJSON.h>
#include <string.h>

#define EP_COLS MEM_EP_COLS

const char *hx_verdict_name(int v)
{
    static const char *const names[] = {"none", "accepted", "corrected",
                                        "rejected"};
    return v >= 0 && v <= 3 ? names[v] : "unknown";
}

int hx_verdict_parse(const char *name)
{
    for (int v = 0; name && v <= 3; v++)
        if (!strcmp(name, hx_verdict_name(v))) return v;
    return -1;
}

/* ---- writing ---- */

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
    if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, i);
}

/* HX_OK when text is a JSON array (as SQLite's json_type reads it), else
 * HX_ERR_INVALID saying what (what) is not. */
static int json_array(hx_memory *m, const char *text, const char *what, hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(m, "SELECT json_type(?1)", err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    int ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) &&
             !strcmp((const char *)sqlite3_column_text(st, 0), "array");
    sqlite3_finalize(st);
    return ok ? HX_OK
              : hx_err_set(err, HX_ERR_INVALID, "episode: %s is not a JSON array", what);
}

static int validate_episode(hx_memory *m, const hx_episode *ep, hx_err *err)
{
    if (!ep->request)
        return hx_err_set(err, HX_ERR_INVALID, "episode: no request");
    if (ep->verdict < 0 || ep->verdict > 3)
        return hx_err_set(err, HX_ERR_INVALID, "episode: bad verdict %d",
                          ep->verdict);
    int rc = json_array(m, ep->messages ? ep->messages : "[]", "messages", err);
    if (!rc && ep->governor) rc = json_array(m, ep->governor, "governor", err);
    return rc;
}

static int insert_episode_row(hx_memory *m, const hx_episode *ep,
                              int64_t *id, hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(
        m,
        "INSERT INTO episodes(started_at, finished_at, request, messages,"
        " outcome, model, adapter, verdict, corrected, verdict_at, governor)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    int64_t now = hx_now(NULL);
    sqlite3_bind_int64(st, 1, ep->started_at ? ep->started_at : now);
    sqlite3_bind_int64(st, 2, ep->finished_at ? ep->finished_at : now);
    sqlite3_bind_text(st, 3, ep->request, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, ep->messages ? ep->messages : "[]", -1,
                      SQLITE_STATIC);
    bind_text_or_null(st, 5, ep->outcome);
    bind_text_or_null(st, 6, ep->model);
    bind_text_or_null(st, 7, ep->adapter);
    sqlite3_bind_int(st, 8, ep->verdict);
    bind_text_or_null(st, 9, ep->corrected);
    if (ep->verdict) sqlite3_bind_int64(st, 10, ep->verdict_at ? ep->verdict_at
                                                               : now);
    bind_text_or_null(st, 11, ep->governor);
    int rc = sqlite3_step(st) == SQLITE_DONE
                 ? HX_OK
                 : hx_mem_sql_err(m, err, "episode");
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(m->db);
    return rc;
}

static int insert_calls(hx_memory *m, int64_t id, const hx_episode *ep,
                        hx_err *err)
{
    if (ep->n_calls <= 0) return HX_OK;
    sqlite3_stmt *st = hx_mem_prepare(
        m,
        "INSERT INTO tool_calls(episode_id, seq, name, arguments, result,"
        " status, confirmed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    int rc = HX_OK;
    for (int i = 0; rc == HX_OK && i < ep->n_calls; i++) {
        const hx_tool_call_rec *c = &ep->calls[i];
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, i);
        sqlite3_bind_text(st, 3, c->name ? c->name : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, c->arguments ? c->arguments : "{}", -1,
                          SQLITE_STATIC);
        bind_text_or_null(st, 5, c->result);
        sqlite3_bind_int(st, 6, c->status);
        sqlite3_bind_int(st, 7, c->confirmed != 0);
        if (sqlite3_step(st) != SQLITE_DONE) rc = hx_mem_sql_err(m, err, "call");
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

int hx_memory_episode_add(hx_memory *m, const hx_episode *ep,
                          int64_t *id_out, hx_err *err)
{
    int rc = validate_episode(m, ep, err);
    if (rc == HX_OK) rc = hx_mem_tx_begin(m, err);
    if (rc) return rc;
    int64_t id = 0;
    rc = insert_episode_row(m, ep, &id, err);
    if (rc == HX_OK) rc = insert_calls(m, id, ep, err);
    rc = hx_mem_tx_end(m, rc, err);
    if (rc == HX_OK && id_out) *id_out = id;
    return rc;
}

int hx_memory_episode_set_verdict(hx_memory *m, int64_t id, int verdict,
                                  const char *corrected, hx_err *err)
{
    if (verdict < 0 || verdict > 3)
        return hx_err_set(err, HX_ERR_INVALID, "episode: bad verdict %d",
                          verdict);
    if (verdict == HX_VERDICT_CORRECTED && !corrected)
        return hx_err_set(err, HX_ERR_INVALID,
                          "episode: a correction needs the corrected text");
    sqlite3_stmt *st = hx_mem_prepare(
        m,
        "UPDATE episodes SET verdict = ?1, corrected = ?2, verdict_at = ?3"
        " WHERE id = ?4",
        err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    sqlite3_bind_int(st, 1, verdict);
    bind_text_or_null(st, 2, verdict == HX_VERDICT_CORRECTED ? corrected : NULL);
    sqlite3_bind_int64(st, 3, hx_now(NULL));
    sqlite3_bind_int64(st, 4, id);
    int rc = sqlite3_step(st) == SQLITE_DONE ? HX_OK
                                             : hx_mem_sql_err(m, err, "verdict");
    if (rc == HX_OK && sqlite3_changes(m->db) == 0)
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "episode %lld not found",
                        (long long)id);
    sqlite3_finalize(st);
    return rc;
}

int hx_memory_episode_set_governor(hx_memory *m, int64_t id, const char *governor,
                                   hx_err *err)
{
    int rc = json_array(m, governor ? governor : "", "governor", err);
    if (rc) return rc;
    sqlite3_stmt *st = hx_mem_prepare(m, "UPDATE episodes SET governor = ?1 WHERE id = ?2", err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    sqlite3_bind_text(st, 1, governor, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, id);
    rc = sqlite3_step(st) == SQLITE_DONE ? HX_OK : hx_mem_sql_err(m, err, "governor");
    if (rc == HX_OK && sqlite3_changes(m->db) == 0)
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "episode %lld not found", (long long)id);
    sqlite3_finalize(st);
    return rc;
}

int hx_memory_episode_forget(hx_memory *m, int64_t id, hx_err *err)
{
    return hx_mem_forget_row(m, "episodes", "episode", id, err);
}

int64_t hx_memory_episode_count(hx_memory *m)
{
    return hx_mem_query_int(m, "SELECT count(*) FROM episodes");
}

/* ---- reading ---- */

typedef struct episode_box {
    hx_episode ep; /* first: hx_episode_free casts back */
    hx_arena *arena;
} episode_box;

void hx_episode_free(hx_episode *ep)
{
    if (!ep) return;
    episode_box *b = (episode_box *)ep;
    hx_arena_free(b->arena);
    free(b);
}

static char *json_str(cJSON *o, const char *key, hx_arena *a)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? hx_arena_strdup(a, v->valuestring) : NULL;
}

static int json_int(cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

/* Fills ep->calls from the view's JSON array of call objects. */
static int parse_calls(hx_episode *ep, const char *json, hx_arena *a)
{
    cJSON *arr = json ? cJSON_Parse(json) : NULL;
    int n = cJSON_GetArraySize(arr);
    ep->calls = n ? hx_arena_calloc(a, (size_t)n, sizeof *ep->calls) : NULL;
    if (n && !ep->calls) {
        cJSON_Delete(arr);
        return HX_ERR_NOMEM;
    }
    int i = 0;
    for (cJSON *c = arr ? arr->child : NULL; c; c = c->next, i++) {
        ep->calls[i].name = json_str(c, "name", a);
        ep->calls[i].arguments = json_str(c, "arguments", a);
        ep->calls[i].result = json_str(c, "result", a);
        ep->calls[i].status = json_int(c, "status");
        ep->calls[i].confirmed = json_int(c, "confirmed");
    }
    ep->n_calls = n;
    cJSON_Delete(arr);
    return HX_OK;
}

/* Reads one EP_COLS row into a new episode (freed with hx_episode_free). */
static int read_episode(sqlite3_stmt *st, hx_episode **out)
{
    episode_box *b = hx_calloc(1, sizeof *b);
    if (!b || !(b->arena = hx_arena_new(0))) {
        free(b);
        return HX_ERR_NOMEM;
    }
    hx_episode *ep = &b->ep;
    hx_arena *a = b->arena;
    ep->id = sqlite3_column_int64(st, 0);
    ep->started_at = sqlite3_column_int64(st, 1);
    ep->finished_at = sqlite3_column_int64(st, 2);
    ep->request = (char *)hx_mem_col_text(st, 3, a);
    ep->messages = (char *)hx_mem_col_text(st, 4, a);
    ep->outcome = (char *)hx_mem_col_text(st, 5, a);
    ep->model = (char *)hx_mem_col_text(st, 6, a);
    ep->adapter = (char *)hx_mem_col_text(st, 7, a);
    ep->verdict = sqlite3_column_int(st, 8);
    ep->corrected = (char *)hx_mem_col_text(st, 9, a);
    ep->verdict_at = sqlite3_column_int64(st, 10);
    ep->governor = (char *)hx_mem_col_text(st, 12, a);
    int rc = parse_calls(ep, (const char *)sqlite3_column_text(st, 11), a);
    if (rc || !ep->request || !ep->messages) {
        hx_episode_free(ep);
        return HX_ERR_NOMEM;
    }
    *out = ep;
    return HX_OK;
}

int hx_memory_episode_get(hx_memory *m, int64_t id, hx_episode **out,
                          hx_err *err)
{
    *out = NULL;
    sqlite3_stmt *st = hx_mem_prepare(
        m, "SELECT " EP_COLS " FROM episodes_full WHERE id = ?1", err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    sqlite3_bind_int64(st, 1, id);
    int s = sqlite3_step(st), rc;
    if (s == SQLITE_ROW) rc = read_episode(st, out);
    else if (s == SQLITE_DONE)
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "episode %lld not found",
                        (long long)id);
    else rc = hx_mem_sql_err(m, err, "episode");
    if (rc == HX_ERR_NOMEM) hx_err_set(err, rc, "episode: out of memory");
    sqlite3_finalize(st);
    return rc;
}

/* Steps st, handing each episode to cb; takes ownership of st. */
int hx_mem_each_episode(hx_memory *m, sqlite3_stmt *st, int64_t split_at,
                        hx_episode_cb cb, void *user, hx_err *err)
{
    int rc = HX_OK, s;
    while (rc == HX_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
        hx_episode *ep = NULL;
        if ((rc = read_episode(st, &ep))) {
            hx_err_set(err, rc, "episode: out of memory");
            break;
        }
        rc = cb(user, ep, split_at && ep->finished_at >= split_at);
        hx_episode_free(ep);
    }
    if (rc == HX_OK && s != SQLITE_DONE) rc = hx_mem_sql_err(m, err, "episodes");
    sqlite3_finalize(st);
    return rc;
}

int hx_memory_training_episodes(hx_memory *m, const hx_training_query *q,
                                hx_episode_cb cb, void *user, hx_err *err)
{
    hx_training_query all = {0};
    if (!q) q = &all;
    sqlite3_stmt *st = hx_mem_prepare(
        m,
        "SELECT " EP_COLS " FROM training_episodes WHERE finished_at >= ?1"
        " AND (?2 = 0 OR finished_at < ?2) ORDER BY finished_at, id",
        err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    sqlite3_bind_int64(st, 1, q->since);
    sqlite3_bind_int64(st, 2, q->until);
    return hx_mem_each_episode(m, st, q->split_at, cb, user, err);
}

int hx_memory_episode_search(hx_memory *m, const char *query, int limit,
                             int64_t **ids, int *n, hx_err *err)
{
    *ids = NULL;
    *n = 0;
    char *q = hx_mem_fts_query_dup(query);
    if (!q) return hx_err_set(err, HX_ERR_NOMEM, "memory: out of memory");
    sqlite3_stmt *st = *q ? hx_mem_prepare(m,
        "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?1"
        " ORDER BY rank LIMIT ?2", err) : NULL;
    int rc = (*q && !st) ? (err ? err->rc : HX_ERR_INTERNAL) : HX_OK;
    if (st) {
        if (limit <= 0) limit = 10;
        sqlite3_bind_text(st, 1, q, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, limit);
        *ids = hx_calloc((size_t)limit, sizeof **ids);
        if (!*ids) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        int s;
        while (!rc && (s = sqlite3_step(st)) == SQLITE_ROW)
            (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
        if (!rc && s != SQLITE_DONE) rc = hx_mem_sql_err(m, err, "search");
    }
    sqlite3_finalize(st);
    free(q);
    return rc;
}
