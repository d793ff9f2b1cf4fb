/* store.c: opening the memory database (file checks, pragmas, forward
 * migrations), transactions, integrity check, vacuum and SQLite helpers. */
#include "memory/memory_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

hx_memory_params hx_memory_default_params(void)
{
    hx_memory_params p = {0};
    p.busy_timeout_ms = 5000;
    p.sync_full = 1;
    p.merge_jaccard = 0.7;
    return p;
}

/* ---- helpers ---- */

static int rc_of_sqlite(int code)
{
    switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return HX_ERR_FORMAT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return HX_ERR_TIMEOUT;
    case SQLITE_NOMEM: return HX_ERR_NOMEM;
    case SQLITE_FULL: return HX_ERR_FULL;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE: return HX_ERR_INVALID;
    case SQLITE_ERROR: return HX_ERR_INTERNAL;
    default: return HX_ERR_IO;
    }
}

int hx_mem_sql_err(hx_memory *m, hx_err *err, const char *what)
{
    return hx_err_set(err, rc_of_sqlite(sqlite3_extended_errcode(m->db)),
                      "%s: %s: %s", m->path, what, sqlite3_errmsg(m->db));
}

int hx_mem_exec(hx_memory *m, const char *sql, hx_err *err)
{
    if (sqlite3_exec(m->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return hx_mem_sql_err(m, err, "sql");
    return HX_OK;
}

sqlite3_stmt *hx_mem_prepare(hx_memory *m, const char *sql, hx_err *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(m->db, sql, -1, &st, NULL) != SQLITE_OK) {
        hx_mem_sql_err(m, err, "prepare");
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

int64_t hx_mem_query_int(hx_memory *m, const char *sql)
{
    sqlite3_stmt *st = hx_mem_prepare(m, sql, NULL);
    int64_t v = -1;
    if (st && sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

const char *hx_mem_col_text(sqlite3_stmt *st, int i, hx_arena *a)
{
    const char *s = (const char *)sqlite3_column_text(st, i);
    if (!s) return NULL;
    return hx_arena_strndup(a, s, (size_t)sqlite3_column_bytes(st, i));
}

int hx_mem_tx_begin(hx_memory *m, hx_err *err)
{
    /* a transaction still open here is one whose rollback failed (out of
     * memory preparing it): roll it back now, or the handle stays stuck */
    if (!m->in_batch && !sqlite3_get_autocommit(m->db))
        sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
    return hx_mem_exec(m, m->in_batch ? "SAVEPOINT hx_tx" : "BEGIN IMMEDIATE",
                       err);
}

int hx_mem_tx_end(hx_memory *m, int rc, hx_err *err)
{
    if (rc == HX_OK) {
        int c = hx_mem_exec(m, m->in_batch ? "RELEASE hx_tx" : "COMMIT", err);
        if (c == HX_OK) return HX_OK;
        rc = c;
    }
    sqlite3_exec(m->db,
                 m->in_batch ? "ROLLBACK TO hx_tx; RELEASE hx_tx" : "ROLLBACK",
                 NULL, NULL, NULL);
    return rc;
}

int hx_memory_begin(hx_memory *m, hx_err *err)
{
    if (m->in_batch)
        return hx_err_set(err, HX_ERR_STATE, "memory: batch already open");
    int rc = hx_mem_exec(m, "BEGIN IMMEDIATE", err);
    if (rc == HX_OK) m->in_batch = 1;
    return rc;
}

int hx_memory_commit(hx_memory *m, hx_err *err)
{
    if (!m->in_batch)
        return hx_err_set(err, HX_ERR_STATE, "memory: no batch is open");
    m->in_batch = 0;
    int rc = hx_mem_exec(m, "COMMIT", err);
    if (rc) sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* ---- opening ---- */

/* A non-empty existing file must start with the SQLite header; we check
 * before SQLite touches it so that a wrong file is never written to. */
static int check_header(const char *path, hx_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return HX_OK;
        return hx_err_set(err, HX_ERR_IO, "%s: %s", path, strerror(errno));
    }
    char hdr[16];
    ssize_t n = read(fd, hdr, sizeof hdr);
    struct stat st;
    int sr = fstat(fd, &st);
    close(fd);
    if (sr == 0 && S_ISDIR(st.st_mode))
        return hx_err_set(err, HX_ERR_IO, "%s: is a directory", path);
    if (n == 0) return HX_OK; /* an empty file is a new database */
    if (n != (ssize_t)sizeof hdr || memcmp(hdr, "SQLite format 3", 16) != 0)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "%s: not a SQLite database (no SQLite header); "
                          "left untouched",
                          path);
    return HX_OK;
}

static int make_parent_dir(const char *path, hx_err *err)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return HX_OK;
    *slash = '\0';
    return hx_mkdirs(dir, err);
}

static char *default_path(void)
{
    char dir[4096];
    if (hx_path_data(dir, sizeof dir - 16) < 0) return NULL;
    size_t n = strlen(dir) + sizeof "/memory.db";
    char *p = hx_malloc(n);
    if (p) snprintf(p, n, "%s/memory.db", dir);
    return p;
}

/* Reads version and identity without writing; refuses what is not ours. */
static int check_identity(hx_memory *m, int *version, hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(m,
        "SELECT (SELECT user_version FROM pragma_user_version),"
        " (SELECT application_id FROM pragma_application_id),"
        " (SELECT count(*) FROM sqlite_schema)", NULL);
    if (!st || sqlite3_step(st) != SQLITE_ROW) {
        int rc = hx_err_set(err, HX_ERR_FORMAT,
                            "%s: not a usable SQLite database (%s); "
                            "left untouched",
                            m->path, sqlite3_errmsg(m->db));
        sqlite3_finalize(st);
        return rc;
    }
    int ver = sqlite3_column_int(st, 0);
    int app = sqlite3_column_int(st, 1);
    int n_obj = sqlite3_column_int(st, 2);
    sqlite3_finalize(st);
    int fresh = ver == 0 && app == 0 && n_obj == 0;
    if (!fresh && app != (int)HX_MEMORY_APP_ID)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "%s: a SQLite database of another program "
                          "(application_id %d), not Hearth memory; "
                          "left untouched",
                          m->path, app);
    if (ver > HX_MEMORY_SCHEMA_VERSION)
        return hx_err_set(err, HX_ERR_UNSUPPORTED,
                          "%s: memory schema version %d is newer than this "
                          "program supports (%d); upgrade Hearth",
                          m->path, ver, HX_MEMORY_SCHEMA_VERSION);
    *version = ver;
    return HX_OK;
}

static int quick_check(hx_memory *m, hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(m, "PRAGMA quick_check(1)", err);
    if (!st) return hx_err_set(err, HX_ERR_FORMAT, "%s: corrupt: %s", m->path,
                               sqlite3_errmsg(m->db));
    int ok = sqlite3_step(st) == SQLITE_ROW &&
             !strcmp((const char *)sqlite3_column_text(st, 0), "ok");
    int rc = ok ? HX_OK
                : hx_err_set(err, HX_ERR_FORMAT,
                             "%s: corrupt database (%s); left untouched",
                             m->path,
                             sqlite3_column_text(st, 0)
                                 ? (const char *)sqlite3_column_text(st, 0)
                                 : sqlite3_errmsg(m->db));
    sqlite3_finalize(st);
    return rc;
}

/* A read-only connection reads the database in whatever journal mode it
 * is (Hearth's are WAL) and sets only what reading needs. */
static int set_pragmas(hx_memory *m, int readonly, hx_err *err)
{
    char sql[256];
    if (readonly)
        return hx_mem_exec(m, "PRAGMA foreign_keys=ON; PRAGMA cache_size=-16384;"
                           " PRAGMA mmap_size=268435456;", err);
    snprintf(sql, sizeof sql,
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;"
             "PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON;"
             "PRAGMA cache_size=-16384; PRAGMA mmap_size=268435456;",
             m->params.sync_full ? "FULL" : "NORMAL");
    int rc = hx_mem_exec(m, sql, err);
    if (rc) return rc;
    sqlite3_stmt *st = hx_mem_prepare(m, "PRAGMA journal_mode", err);
    int wal = st && sqlite3_step(st) == SQLITE_ROW &&
              !strcmp((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    if (!wal)
        return hx_err_set(err, HX_ERR_IO, "%s: cannot switch to WAL mode",
                          m->path);
    return HX_OK;
}

/* Checkpoints the WAL into the database after a commit once it holds 1000
 * pages (SQLite's default), but after a bookkeeping commit (recall's use
 * counts) only past 4000, so that recall seldom pays for a checkpoint and
 * the next write of the user's data does. */
static int wal_hook(void *user, sqlite3 *db, const char *name, int pages)
{
    hx_memory *m = user;
    if (pages >= (m->light ? 4000 : 1000))
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL,
                                  NULL);
    return SQLITE_OK;
}

/* Makes every memory's norm its text's folded words (hx_mem_normalize) as
 * schema 5 has them; its trigger updates the index. Rows of an older
 * schema had their words lower-cased in ASCII only. */
static int refold(hx_memory *m, hx_err *err)
{
    sqlite3_stmt *rd = hx_mem_prepare(m, "SELECT id, text FROM memories", err);
    sqlite3_stmt *wr = rd ? hx_mem_prepare(m, "UPDATE memories SET norm = ?1 WHERE id = ?2", err) : NULL;
    int rc = wr ? HX_OK : (err ? err->rc : HX_ERR_INTERNAL);
    while (rc == HX_OK && sqlite3_step(rd) == SQLITE_ROW) {
        char *norm = hx_mem_normalize_dup((const char *)sqlite3_column_text(rd, 1));
        if (!norm) rc = hx_err_set(err, HX_ERR_NOMEM, "memory: out of memory");
        sqlite3_bind_text(wr, 1, norm ? norm : "", -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(wr, 2, sqlite3_column_int64(rd, 0));
        if (!rc && sqlite3_step(wr) != SQLITE_DONE) rc = hx_mem_sql_err(m, err, "refold");
        sqlite3_reset(wr);
        free(norm);
    }
    sqlite3_finalize(rd);
    sqlite3_finalize(wr);
    return rc;
}

/* Runs every migration from the stored version up, in one transaction. */
static int migrate(hx_memory *m, hx_err *err)
{
    int rc = hx_mem_exec(m, "BEGIN IMMEDIATE", err);
    if (rc) return rc;
    int ver = (int)hx_mem_query_int(m, "PRAGMA user_version");
    if (ver < 0 || ver > HX_MEMORY_SCHEMA_VERSION) /* changed under us */
        rc = hx_err_set(err, HX_ERR_UNSUPPORTED,
                        "%s: unexpected schema version %d", m->path, ver);
    for (int v = ver; rc == HX_OK && v < HX_MEMORY_SCHEMA_VERSION; v++) {
        if (sqlite3_exec(m->db, hx_mem_migrations[v], NULL, NULL, NULL)) {
            rc = hx_err_set(err, HX_ERR_INTERNAL,
                            "%s: migration %d -> %d failed: %s", m->path, v,
                            v + 1, sqlite3_errmsg(m->db));
        }
        if (rc == HX_OK && v == 4) rc = refold(m, err);
    }
    if (rc == HX_OK && ver < HX_MEMORY_SCHEMA_VERSION) {
        char sql[128];
        snprintf(sql, sizeof sql,
                 "PRAGMA user_version=%d; PRAGMA application_id=%d;",
                 HX_MEMORY_SCHEMA_VERSION, (int)HX_MEMORY_APP_ID);
        rc = hx_mem_exec(m, sql, err);
    }
    return hx_mem_tx_end(m, rc, err);
}

/* EXISTING and READONLY: a database must be there (no folder, no file is
 * created); a missing or empty file is "no such database". */
static int check_exists(const hx_memory *m, hx_err *err)
{
    struct stat st;
    if (m->params.mode == HX_MEMORY_CREATE) return HX_OK;
    if (!stat(m->path, &st)) {
        if (st.st_size > 0) return HX_OK;
    } else if (errno != ENOENT && errno != ENOTDIR)
        return hx_err_set(err, HX_ERR_IO, "%s: %s", m->path, strerror(errno));
    return hx_err_set(err, HX_ERR_NOTFOUND,
                      "%s: no such database (Hearth makes it on the first `hearth ask`)",
                      m->path);
}

static int db_connect(hx_memory *m, int readonly, hx_err *err)
{
    int flags = readonly ? SQLITE_OPEN_READONLY
                : m->params.mode == HX_MEMORY_CREATE ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                                                     : SQLITE_OPEN_READWRITE;
    sqlite3_close_v2(m->db);
    m->db = NULL;
    if (sqlite3_open_v2(m->path, &m->db, flags, NULL))
        return hx_err_set(err, HX_ERR_IO, "%s: cannot open: %s", m->path,
                          m->db ? sqlite3_errmsg(m->db) : "out of memory");
    sqlite3_busy_timeout(m->db, m->params.busy_timeout_ms);
    sqlite3_extended_result_codes(m->db, 1);
    return HX_OK;
}

static int open_db(hx_memory *m, hx_err *err)
{
    int rc = check_exists(m, err);
    if (!rc) rc = check_header(m->path, err);
    if (!rc && m->params.mode == HX_MEMORY_CREATE) rc = make_parent_dir(m->path, err);
    int ver = 0, ro = m->params.mode == HX_MEMORY_READONLY;
    if (!rc) rc = db_connect(m, ro, err);
    if (!rc) rc = check_identity(m, &ver, err);
    if (rc) return rc;
    if (ro && ver == 0) /* SQLite's, but nothing of Hearth's in it: left as it is */
        return hx_err_set(err, HX_ERR_NOTFOUND, "%s: no such database (an empty SQLite file)",
                          m->path);
    if (ro && ver < HX_MEMORY_SCHEMA_VERSION) { /* migrate it first: read-write */
        if ((rc = db_connect(m, 0, err))) return rc;
        ro = 0;
    }
    if (ver > 0 && ver < HX_MEMORY_SCHEMA_VERSION && (rc = quick_check(m, err)))
        return rc;
    if ((rc = set_pragmas(m, ro, err))) return rc;
    if (ro) return HX_OK;
    sqlite3_wal_hook(m->db, wal_hook, m);
    return migrate(m, err);
}

int hx_memory_open(const hx_memory_params *p, hx_memory **out, hx_err *err)
{
    *out = NULL;
    hx_memory *m = hx_calloc(1, sizeof *m);
    if (!m) return hx_err_set(err, HX_ERR_NOMEM, "memory: out of memory");
    m->params = p ? *p : hx_memory_default_params();
    if (m->params.merge_jaccard <= 0) m->params.merge_jaccard = 0.7;
    m->path = m->params.path ? hx_strdup(m->params.path) : default_path();
    m->params.path = m->path;
    if (!m->path) {
        free(m);
        return hx_err_set(err, HX_ERR_IO, "memory: no data directory");
    }
    int rc = open_db(m, err);
    if (rc) {
        hx_memory_close(m);
        return rc;
    }
    *out = m;
    return HX_OK;
}

void hx_memory_close(hx_memory *m)
{
    if (!m) return;
    if (m->in_batch) sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close_v2(m->db);
    free(m->path);
    free(m);
}

const char *hx_memory_path(const hx_memory *m)
{
    return m->path;
}

/* ---- maintenance ---- */

int hx_mem_fts_optimize(hx_memory *m, const char *table, hx_err *err)
{
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO %s(%s) VALUES('optimize')", table,
             table);
    return hx_mem_exec(m, sql, err);
}

static int check_fts(hx_memory *m, const char *table, hx_err *err)
{
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO %s(%s) VALUES('integrity-check')",
             table, table);
    if (sqlite3_exec(m->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return hx_err_set(err, HX_ERR_FORMAT, "%s: %s index: %s", m->path,
                          table, sqlite3_errmsg(m->db));
    return HX_OK;
}

int hx_memory_check(hx_memory *m, hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(m, "PRAGMA integrity_check(1)", err);
    if (!st) return HX_ERR_FORMAT;
    int step = sqlite3_step(st);
    const char *r = step == SQLITE_ROW
                        ? (const char *)sqlite3_column_text(st, 0)
                        : sqlite3_errmsg(m->db);
    int rc = HX_OK;
    if (!r || strcmp(r, "ok"))
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s: integrity check: %s",
                        m->path, r ? r : "?");
    sqlite3_finalize(st);
    if (rc == HX_OK) rc = check_fts(m, "memories_fts", err);
    if (rc == HX_OK) rc = check_fts(m, "episodes_fts", err);
    return rc;
}

int hx_memory_vacuum(hx_memory *m, hx_err *err)
{
    if (m->in_batch)
        return hx_err_set(err, HX_ERR_STATE, "memory: vacuum inside a batch");
    char sql[128];
    snprintf(sql, sizeof sql, "DELETE FROM memories WHERE expires_at <= %lld",
             (long long)hx_now(NULL));
    int rc = hx_mem_exec(m, sql, err);
    if (!rc) rc = hx_mem_fts_optimize(m, "memories_fts", err);
    if (!rc) rc = hx_mem_fts_optimize(m, "episodes_fts", err);
    if (!rc) rc = hx_mem_exec(m, "VACUUM", err);
    if (!rc) rc = hx_mem_exec(m, "PRAGMA wal_checkpoint(TRUNCATE)", err);
    return rc;
}

int hx_mem_forget_row(hx_memory *m, const char *table, const char *what, int64_t id,
                      hx_err *err)
{
    char sql[64], fts[48];
    snprintf(sql, sizeof sql, "DELETE FROM %s WHERE id = ?1", table);
    snprintf(fts, sizeof fts, "%s_fts", table);
    int rc = hx_mem_tx_begin(m, err);
    if (rc) return rc;
    sqlite3_stmt *st = hx_mem_prepare(m, sql, err);
    if (!st) rc = err ? err->rc : HX_ERR_INTERNAL;
    else {
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) != SQLITE_DONE) rc = hx_mem_sql_err(m, err, "forget");
        else if (sqlite3_changes(m->db) == 0)
            rc = hx_err_set(err, HX_ERR_NOTFOUND, "%s %lld not found", what,
                            (long long)id);
        sqlite3_finalize(st);
    }
    /* The FTS5 delete only adds a tombstone; merging drops the words. */
    if (rc == HX_OK) rc = hx_mem_fts_optimize(m, fts, err);
    return hx_mem_tx_end(m, rc, err);
}
