/* audit.c: the audit trail of tool calls in the memory database. */
#include <sqlite3.h>
#include <stdlib.h>

#include "memory/memory_int.h"

static void bind(sqlite3_stmt *st, int i, const char *s)
{
    if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, i);
}

int hx_memory_audit_add(hx_memory *m, const hx_audit_row *r, hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(m,
        "INSERT INTO audit(at, tool, effect, args, decision, by, status, detail, sandbox)"
        " VALUES (?,?,?,?,?,?,?,?,?)", err);
    if (!st) return err->rc;
    sqlite3_bind_int64(st, 1, r->at);
    const char *v[] = {r->tool, r->effect, r->args, r->decision, r->by, r->status,
                       r->detail, r->sandbox};
    for (int i = 0; i < 8; i++) bind(st, i + 2, v[i]);
    int rc = sqlite3_step(st) == SQLITE_DONE ? HX_OK : hx_mem_sql_err(m, err, "audit");
    sqlite3_finalize(st);
    return rc;
}

int hx_memory_audit_json(hx_memory *m, int limit, char **out, hx_err *err)
{
    *out = NULL;
    sqlite3_stmt *st = hx_mem_prepare(m,
        "SELECT coalesce(json_group_array(json_object('at', at, 'tool', tool,"
        " 'effect', effect, 'args', args, 'decision', decision, 'by', by,"
        " 'status', status, 'detail', detail, 'sandbox', sandbox)), '[]')"
        " FROM (SELECT * FROM audit ORDER BY id DESC LIMIT ?)", err);
    if (!st) return err->rc;
    sqlite3_bind_int(st, 1, limit > 0 ? limit : -1);
    int rc = sqlite3_step(st) == SQLITE_ROW ? HX_OK : hx_mem_sql_err(m, err, "audit");
    if (!rc && !(*out = hx_strdup((const char *)sqlite3_column_text(st, 0))))
        rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    sqlite3_finalize(st);
    return rc;
}
