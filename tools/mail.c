/* mail.c: the mail tools (mail.search, mail.read, mail.draft, mail.send,
 * mail.reply) over the user's Maildir, read and written beneath its root
 * descriptor (tools/root.c), with a SQLite FTS5 index in the cache
 * directory that is brought up to date incrementally on each call. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/mail_int.h"
#include "tools/tools_int.h"

#define INDEX_VERSION 3 /* 2: paths beneath the Maildir root; 3: text folded (hx_fold) */
#define MAX_MAIL_BYTES (50u << 20) /* larger files are indexed by headers only */
#define SNIPPET_CHARS 160
#define READ_MAX_CHARS 16000

typedef struct mail_index {
    sqlite3 *db;
    const hx_root *md; /* the Maildir, borrowed from the registry */
    sqlite3_stmt *ins_msg, *ins_fts; /* prepared once per open, owned */
} mail_index;

/* ---- index ---- */

static const char *const index_ddl =
    "CREATE TABLE IF NOT EXISTS msg("
    " rowid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, folder TEXT NOT NULL,"
    " path TEXT NOT NULL, size INTEGER, mtime INTEGER, flags TEXT, seen INTEGER,"
    " date INTEGER, from_ TEXT, to_ TEXT, cc TEXT, subject TEXT,"
    " message_id TEXT, snippet TEXT, n_att INTEGER);"
    "CREATE INDEX IF NOT EXISTS msg_date ON msg(date);"
    "CREATE VIRTUAL TABLE IF NOT EXISTS msg_fts USING fts5("
    " subject, from_, to_, body, tokenize='hx_fold');"
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);";

static int db_exec(sqlite3 *db, const char *sql, hx_err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK) return HX_OK;
    int rc = hx_err_set(err, HX_ERR_IO, "mail index: %s", msg ? msg : "?");
    sqlite3_free(msg);
    return rc;
}

/* Opens (creating or rebuilding when its version differs) the index of a
 * Maildir. The index is a cache: a stale or broken one is recreated. */
static int index_open(const hx_root *md, mail_index *ix, hx_err *err)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (hx_path_cache(dir, sizeof dir) < 0)
        return hx_err_set(err, HX_ERR_RANGE, "cache path too long");
    int rc = hx_mkdirs(dir, err);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/mail-index-%016llx.sqlite", dir,
             (unsigned long long)hx_fnv1a(HX_FNV1A_BASIS_SHORT, md->real, strlen(md->real)));
    ix->md = md;
    ix->ins_msg = ix->ins_fts = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (sqlite3_open(path, &ix->db) != SQLITE_OK) {
            sqlite3_close(ix->db);
            return hx_err_set(err, HX_ERR_IO, "%s: cannot open mail index", path);
        }
        sqlite3_busy_timeout(ix->db, 5000);
        if ((rc = hx_fold_sql_register(ix->db, err))) {
            sqlite3_close(ix->db);
            return rc;
        }
        sqlite3_stmt *st = NULL;
        int ver = -1;
        if (sqlite3_prepare_v2(ix->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            ver = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (ver == INDEX_VERSION || ver == 0) {
            /* each call opens the index anew: map it rather than read it
             * page by page into an empty cache */
            rc = db_exec(ix->db, "PRAGMA journal_mode=WAL; PRAGMA mmap_size=1073741824", err);
            if (!rc) rc = db_exec(ix->db, index_ddl, err);
            char set[48];
            snprintf(set, sizeof set, "PRAGMA user_version=%d", INDEX_VERSION);
            if (!rc && ver == 0) rc = db_exec(ix->db, set, err);
            if (!rc) return HX_OK;
        }
        /* another version or unreadable: it is only a cache, rebuild it */
        sqlite3_close(ix->db);
        ix->db = NULL;
        unlink(path);
        char side[PATH_MAX + 80];
        snprintf(side, sizeof side, "%s-wal", path);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", path);
        unlink(side);
    }
    return hx_err_set(err, HX_ERR_IO, "%s: cannot create mail index", path);
}

static void index_close(mail_index *ix)
{
    sqlite3_finalize(ix->ins_msg);
    sqlite3_finalize(ix->ins_fts);
    ix->ins_msg = ix->ins_fts = NULL;
    sqlite3_close(ix->db);
    ix->db = NULL;
}

/* A Maildir folder: the root ("INBOX") or a Maildir++ subfolder ".Name",
 * each by its path beneath the Maildir's root ("" or ".Name"). */
typedef struct folder_list {
    char names[64][128];
    char rels[64][128];
    int n;
} folder_list;

/* Is rel beneath md a folder with a cur/ (no link followed)? */
static int is_folder(const hx_root *md, const char *rel)
{
    char cur[160];
    struct stat st;
    hx_err e;
    snprintf(cur, sizeof cur, "%s/cur", rel);
    return !hx_root_stat(md, cur, &st, &e) && S_ISDIR(st.st_mode);
}

static void list_folders(const hx_root *md, folder_list *fl)
{
    hx_err e;
    snprintf(fl->names[0], sizeof fl->names[0], "INBOX");
    fl->rels[0][0] = '\0';
    fl->n = 1;
    int fd = hx_root_dir(md, "", 0, &e);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) && fl->n < 64) {
        if (de->d_name[0] != '.' || !strcmp(de->d_name, ".") ||
            !strcmp(de->d_name, "..") || strlen(de->d_name) >= 120 || !is_folder(md, de->d_name))
            continue;
        snprintf(fl->names[fl->n], sizeof fl->names[0], "%s", de->d_name + 1);
        snprintf(fl->rels[fl->n], sizeof fl->rels[0], "%s", de->d_name);
        fl->n++;
    }
    closedir(d);
}

/* Snippet: the first SNIPPET_CHARS characters of the text on one line. */
static char *make_snippet(const char *text)
{
    hx_buf b;
    hx_buf_init(&b);
    int chars = 0, space = 0;
    for (const char *p = text; *p; p++) {
        int cont = ((unsigned char)*p & 0xc0) == 0x80; /* inside a character */
        if (!cont && chars >= SNIPPET_CHARS) break;    /* never cut one in two */
        if (*p == '\n' || *p == '\t' || *p == ' ') {
            space = b.len > 0;
            continue;
        }
        if (space) hx_buf_putc(&b, ' '), chars++, space = 0;
        hx_buf_putc(&b, *p);
        chars += !cont;
    }
    return hx_buf_steal(&b, NULL);
}

static int bind_text(sqlite3_stmt *st, int i, const char *s)
{
    return sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_TRANSIENT);
}

/* Reads and parses one message file beneath md; a file too large is
 * indexed with what can be read (its headers) so search still finds it.
 * A file that is not a regular one (a FIFO, a link) is not read. */
static hx_message *parse_file(const hx_root *md, const char *path)
{
    char *raw = NULL;
    size_t len = 0;
    hx_err e;
    hx_message *m = NULL;
    int rc = hx_root_read(md, path, MAX_MAIL_BYTES, &raw, &len, NULL, &e);
    if (rc == HX_ERR_RANGE) {
        int fd = hx_root_open_file(md, path, NULL, &e);
        raw = hx_malloc(65536);
        ssize_t n = fd >= 0 && raw ? read(fd, raw, 65536) : 0;
        len = n > 0 ? (size_t)n : 0;
        if (fd >= 0) close(fd);
        rc = raw ? HX_OK : HX_ERR_NOMEM;
    }
    if (rc == HX_OK) hx_message_parse(raw, len, &m, &e);
    free(raw);
    return m;
}

/* A cached statement, prepared on first use; reset for the next use. */
static sqlite3_stmt *index_stmt(mail_index *ix, sqlite3_stmt **slot, const char *sql)
{
    if (*slot) {
        sqlite3_reset(*slot);
        sqlite3_clear_bindings(*slot);
    } else if (sqlite3_prepare_v3(ix->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot,
                                  NULL) != SQLITE_OK) {
        sqlite3_finalize(*slot);
        *slot = NULL;
    }
    return *slot;
}

static int index_insert(mail_index *ix, const hx_maildir_entry *e,
                        const char *folder)
{
    hx_message *m = parse_file(ix->md, e->path);
    if (!m) return 0; /* vanished or unreadable: skipped this time */
    char *snip = make_snippet(m->text);
    sqlite3_stmt *st = index_stmt(ix, &ix->ins_msg,
        "INSERT OR REPLACE INTO msg(id,folder,path,size,mtime,flags,seen,date,"
        "from_,to_,cc,subject,message_id,snippet,n_att)"
        " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    int ok = st != NULL;
    if (ok) {
        bind_text(st, 1, e->id);
        bind_text(st, 2, folder);
        bind_text(st, 3, e->path);
        sqlite3_bind_int64(st, 4, e->size);
        sqlite3_bind_int64(st, 5, e->mtime);
        bind_text(st, 6, e->flags);
        sqlite3_bind_int(st, 7, strchr(e->flags, 'S') != NULL);
        sqlite3_bind_int64(st, 8, m->date);
        bind_text(st, 9, m->from);
        bind_text(st, 10, m->to);
        bind_text(st, 11, m->cc);
        bind_text(st, 12, m->subject);
        bind_text(st, 13, m->message_id);
        bind_text(st, 14, snip);
        sqlite3_bind_int(st, 15, m->n_att);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st); /* not left active between messages */
    }
    sqlite3_int64 rowid = sqlite3_last_insert_rowid(ix->db);
    if (ok && (st = index_stmt(ix, &ix->ins_fts,
            "INSERT INTO msg_fts(rowid,subject,from_,to_,body) VALUES(?,?,?,?,?)"))) {
        sqlite3_bind_int64(st, 1, rowid);
        bind_text(st, 2, m->subject);
        bind_text(st, 3, m->from);
        bind_text(st, 4, m->to);
        bind_text(st, 5, m->text);
        ok = sqlite3_step(st) == SQLITE_DONE;
        sqlite3_reset(st);
    }
    free(snip);
    hx_message_free(m);
    return ok ? 0 : -1;
}

static void index_delete_id(mail_index *ix, const char *id)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ix->db,
            "DELETE FROM msg_fts WHERE rowid=(SELECT rowid FROM msg WHERE id=?)",
            -1, &st, NULL) == SQLITE_OK) {
        bind_text(st, 1, id);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(ix->db, "DELETE FROM msg WHERE id=?", -1, &st, NULL) ==
        SQLITE_OK) {
        bind_text(st, 1, id);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
}

/* Brings one listed entry up to date: 0 unchanged, 1 updated or added. */
static int index_entry(mail_index *ix, sqlite3_stmt *look,
                       const hx_maildir_entry *e, const char *folder)
{
    sqlite3_reset(look);
    bind_text(look, 1, e->id);
    if (sqlite3_step(look) == SQLITE_ROW) {
        int same_file = sqlite3_column_int64(look, 1) == e->size &&
                        sqlite3_column_int64(look, 2) == e->mtime;
        const char *path = (const char *)sqlite3_column_text(look, 0);
        if (same_file && path && !strcmp(path, e->path)) return 0;
        if (same_file) { /* renamed (flags changed): no need to reparse */
            sqlite3_stmt *st = NULL;
            if (sqlite3_prepare_v2(ix->db,
                    "UPDATE msg SET path=?,flags=?,seen=?,folder=? WHERE id=?",
                    -1, &st, NULL) == SQLITE_OK) {
                bind_text(st, 1, e->path);
                bind_text(st, 2, e->flags);
                sqlite3_bind_int(st, 3, strchr(e->flags, 'S') != NULL);
                bind_text(st, 4, folder);
                bind_text(st, 5, e->id);
                sqlite3_step(st);
            }
            sqlite3_finalize(st);
            return 1;
        }
        sqlite3_reset(look);
        index_delete_id(ix, e->id);
    }
    sqlite3_reset(look);
    index_insert(ix, e, folder);
    return 1;
}

/* Removes rows whose file is no longer listed (ids kept in a temp table). */
static void index_prune(mail_index *ix)
{
    sqlite3_exec(ix->db,
        "DELETE FROM msg_fts WHERE rowid IN (SELECT rowid FROM msg WHERE id NOT IN"
        " (SELECT id FROM temp.seen));"
        "DELETE FROM msg WHERE id NOT IN (SELECT id FROM temp.seen);",
        NULL, NULL, NULL);
}

/* Indexes one folder's listed messages; *done counts those examined (the
 * progress), *changed those new or changed. */
static void sync_folder(mail_index *ix, const hx_maildir_entry *es, int n, const char *folder,
                        sqlite3_stmt *look, sqlite3_stmt *mark, hx_progress *pr,
                        long *done, long *changed)
{
    char extra[48];
    for (int i = 0; i < n; i++) {
        sqlite3_reset(mark);
        bind_text(mark, 1, es[i].id);
        sqlite3_step(mark);
        *changed += index_entry(ix, look, &es[i], folder);
        snprintf(extra, sizeof extra, "%ld new or changed", *changed);
        hx_progress_update(pr, (double)++*done, extra);
    }
}

/* The state of the Maildir as its directories' modification times: every
 * delivery, flag change (a rename) or deletion changes cur/ or new/, and
 * a new or removed subfolder the Maildir itself. */
static void folder_signature(const folder_list *fl, const hx_root *md, hx_buf *sig)
{
    static const char *const subs[] = {"", "/cur", "/new"};
    for (int i = 0; i < fl->n; i++)
        for (int k = 0; k < 3; k++) {
            char p[160];
            struct stat st;
            hx_err e;
            snprintf(p, sizeof p, "%s%s", fl->rels[i], *fl->rels[i] ? subs[k] : subs[k] + !!k);
            if (hx_root_stat(md, p, &st, &e)) continue;
            hx_buf_printf(sig, "%s:%lld.%09ld;", p, (long long)st.st_mtim.tv_sec,
                          st.st_mtim.tv_nsec);
        }
}

static int signature_unchanged(mail_index *ix, const char *sig)
{
    sqlite3_stmt *st = NULL;
    int same = 0;
    if (sqlite3_prepare_v2(ix->db, "SELECT value FROM meta WHERE key='signature'", -1,
                           &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        same = !strcmp((const char *)sqlite3_column_text(st, 0), sig);
    sqlite3_finalize(st);
    return same;
}

static void store_signature(mail_index *ix, const char *sig)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ix->db, "INSERT OR REPLACE INTO meta VALUES('signature',?)",
                           -1, &st, NULL) == SQLITE_OK) {
        bind_text(st, 1, sig);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
}

static int index_rescan(mail_index *ix, folder_list *fl, hx_err *err);

/* Makes the index match the Maildir's current files; a rescan only when
 * the directories changed since the last one. */
static int index_sync(mail_index *ix, hx_err *err)
{
    folder_list *fl = hx_malloc(sizeof *fl);
    if (!fl) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    list_folders(ix->md, fl);
    hx_buf sig;
    hx_buf_init(&sig);
    folder_signature(fl, ix->md, &sig); /* before listing: races rescan next time */
    int rc = HX_OK;
    if (!sig.data || !signature_unchanged(ix, sig.data)) {
        rc = index_rescan(ix, fl, err);
        if (!rc && sig.data) store_signature(ix, sig.data);
    }
    hx_buf_free(&sig);
    free(fl);
    return rc;
}

static int index_rescan(mail_index *ix, folder_list *fl, hx_err *err)
{
    int rc = db_exec(ix->db, "CREATE TEMP TABLE IF NOT EXISTS seen(id TEXT PRIMARY KEY);"
                             "DELETE FROM temp.seen; BEGIN", err);
    sqlite3_stmt *look = NULL, *mark = NULL;
    if (!rc) {
        sqlite3_prepare_v2(ix->db, "SELECT path,size,mtime FROM msg WHERE id=?", -1,
                           &look, NULL);
        sqlite3_prepare_v2(ix->db, "INSERT OR IGNORE INTO temp.seen VALUES(?)", -1,
                           &mark, NULL);
        if (!look || !mark) rc = hx_err_set(err, HX_ERR_IO, "mail index: %s",
                                            sqlite3_errmsg(ix->db));
    }
    /* every folder listed first: the progress has its real total */
    hx_maildir_entry *es[64] = {NULL};
    int ne[64] = {0};
    double total = 0;
    for (int i = 0; !rc && i < fl->n; i++) {
        rc = hx_maildir_list(ix->md, fl->rels[i], &es[i], &ne[i], err);
        total += ne[i];
    }
    hx_progress pr;
    hx_progress_start(&pr, "indexing mail", total);
    long done = 0, changed = 0;
    for (int i = 0; !rc && i < fl->n; i++)
        sync_folder(ix, es[i], ne[i], fl->names[i], look, mark, &pr, &done, &changed);
    for (int i = 0; i < fl->n; i++) hx_maildir_list_free(es[i], ne[i]);
    sqlite3_finalize(look);
    sqlite3_finalize(mark);
    if (!rc) {
        index_prune(ix);
        rc = db_exec(ix->db, "COMMIT", err);
    } else
        sqlite3_exec(ix->db, "ROLLBACK", NULL, NULL, NULL);
    hx_progress_finish(&pr);
    return rc;
}

static int index_ready(const hx_tools *reg, mail_index *ix, hx_err *err)
{
    const hx_root *md = hx_tools_root(reg, HX_ROOT_MAILDIR, 0, 0, err);
    if (!md) return err->rc;
    int rc = index_open(md, ix, err);
    if (!rc) rc = index_sync(ix, err);
    if (rc) index_close(ix);
    return rc;
}

/* Dates in results: ISO 8601 in the user's time zone. */
static void iso_time(icaltimezone *z, int64_t t, char *buf, size_t n)
{
    hx_tz_format(z, t, 0, buf, n);
}

/* ---- mail.search ---- */

/* The query: SQL with ? for each bound text, in order. */
typedef struct search_q {
    hx_buf sql;
    hx_buf strs;     /* the bound texts, each with its NUL */
    int n_binds;
    int64_t since, until;
    hx_buf terms;    /* the text's search terms (hx_fold_terms), NUL-ended */
    hx_buf ignored;  /* its function words left out */
    int n_terms;
} search_q;

static void bind_add(search_q *q, const char *s, size_t n)
{
    hx_buf_append(&q->strs, s, n);
    hx_buf_putc(&q->strs, '\0');
    q->n_binds++;
}

/* The i-th term of a NUL-ended list. */
/* A filter on names or words ("from", "to", "subject"): each of its
 * words (hx_fold_words) must be in one of the columns, folded, so that
 * "jurgen weiss" and "Weiß, Jürgen" both find "Jürgen Weiß <jw@x.de>".
 * Function words are left out of a subject filter only. */
static void filter_words(search_q *q, const char *const *cols, int n_cols, const char *v,
                         int drop_stop)
{
    hx_buf words;
    hx_buf_init(&words);
    int n = hx_fold_words(v, drop_stop, &words);
    for (int i = 0; i < n && i < 8; i++) {
        const char *w = hx_term_at(&words, i);
        hx_buf_puts(&q->sql, " AND (0");
        for (int c = 0; c < n_cols; c++) {
            hx_buf_printf(&q->sql, " OR instr(hx_fold(%s), ?) > 0", cols[c]);
            bind_add(q, w, strlen(w));
        }
        hx_buf_puts(&q->sql, ")");
    }
    hx_buf_free(&words);
}

/* since/until: ISO 8601 or a time expression ("last week", "yesterday");
 * since takes the start of its range, until the end. */
static int time_filter(const hx_tools *reg, const cJSON *args, const char *key,
                       int upper, int64_t *out, hx_err *err)
{
    hx_when_range r;
    int rc = hx_arg_when(reg, args, key, &r, err);
    if (rc) return hx_err_set(err, HX_ERR_INVALID, "%s", err->msg);
    *out = upper && !r.is_point ? r.end : r.start;
    return HX_OK;
}

/* The text's terms, each an FTS5 phrase: user text can never be FTS
 * syntax (a term holds no quote), and the index folds it as it folded
 * the mail (the "hx_fold" tokenizer). The columns say, for each message,
 * how many terms and which it has (a bit each), and how well it matches
 * (bm25, the subject weighing most). HX_ERR_NOMEM when the terms could
 * not be read: a search without them would find every message. */
static int text_columns(search_q *q, const char *text)
{
    q->n_terms = hx_fold_terms(text, &q->terms, &q->ignored);
    if (q->n_terms < 0) return HX_ERR_NOMEM; /* not a search without its words */
    if (q->n_terms == 0) return HX_OK;
    hx_buf_puts(&q->sql, ", (0");
    for (int i = 0; i < q->n_terms; i++)
        hx_buf_puts(&q->sql, " + (m.rowid IN (SELECT rowid FROM msg_fts WHERE msg_fts MATCH ?))");
    hx_buf_puts(&q->sql, ") AS hits, (0");
    for (int i = 0; i < q->n_terms; i++)
        hx_buf_printf(&q->sql, " + (m.rowid IN (SELECT rowid FROM msg_fts WHERE msg_fts MATCH ?)) * %d",
                      1 << i);
    hx_buf_puts(&q->sql, ") AS mask, t.score");
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < q->n_terms; i++) {
            const char *t = hx_term_at(&q->terms, i);
            hx_buf_printf(&q->strs, "\"%s\"", t);
            hx_buf_putc(&q->strs, '\0');
            q->n_binds++;
        }
    return HX_OK;
}

/* Joins the messages with any term, ranked. */
static void text_join(search_q *q)
{
    if (q->n_terms <= 0) return;
    hx_buf_puts(&q->sql, " JOIN (SELECT rowid, bm25(msg_fts, 4.0, 2.0, 1.0, 1.0) AS score"
                         " FROM msg_fts WHERE msg_fts MATCH ?) t ON t.rowid = m.rowid");
    for (int i = 0; i < q->n_terms; i++)
        hx_buf_printf(&q->strs, "%s\"%s\"", i ? " OR " : "", hx_term_at(&q->terms, i));
    hx_buf_putc(&q->strs, '\0');
    q->n_binds++;
}

static int build_search(const hx_tools *reg, const cJSON *args, search_q *q, hx_err *err)
{
    int regex = hx_arg_str(args, "regex") != NULL;
    hx_buf_printf(&q->sql, "SELECT m.rowid,m.id,m.date,m.from_,m.subject,m.snippet,"
                           "m.seen,m.folder,m.n_att,%s", regex ? "b.body" : "NULL");
    if (hx_arg_str(args, "text") && text_columns(q, hx_arg_str(args, "text")))
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_buf_printf(&q->sql, " FROM msg m%s", regex ? " JOIN msg_fts b ON b.rowid = m.rowid" : "");
    text_join(q);
    hx_buf_puts(&q->sql, " WHERE 1");
    int rc = HX_OK;
    if (hx_arg_str(args, "since") && !(rc = time_filter(reg, args, "since", 0, &q->since, err)))
        hx_buf_printf(&q->sql, " AND m.date >= %lld", (long long)q->since);
    if (!rc && hx_arg_str(args, "until") &&
        !(rc = time_filter(reg, args, "until", 1, &q->until, err)))
        hx_buf_printf(&q->sql, " AND m.date < %lld", (long long)q->until);
    if (rc) return rc;
    static const char *const from[] = {"m.from_"}, *const to[] = {"m.to_", "m.cc"},
                             *const subject[] = {"m.subject"};
    if (hx_arg_str(args, "from")) filter_words(q, from, 1, hx_arg_str(args, "from"), 0);
    if (hx_arg_str(args, "to")) filter_words(q, to, 2, hx_arg_str(args, "to"), 0);
    if (hx_arg_str(args, "subject")) filter_words(q, subject, 1, hx_arg_str(args, "subject"), 1);
    if (hx_arg_str(args, "folder")) {
        hx_buf_puts(&q->sql, " AND hx_fold(m.folder) = hx_fold(?)");
        bind_add(q, hx_arg_str(args, "folder"), strlen(hx_arg_str(args, "folder")));
    }
    if (hx_arg_bool(args, "unread", 0)) hx_buf_puts(&q->sql, " AND m.seen = 0");
    hx_buf_puts(&q->sql, q->n_terms > 0 ? " ORDER BY hits DESC, t.score, m.date DESC, m.id"
                                        : " ORDER BY m.date DESC, m.id");
    return q->sql.oom || q->strs.oom || q->terms.oom || q->ignored.oom
               ? hx_err_set(err, HX_ERR_NOMEM, "out of memory")
               : HX_OK;
}

/* Compiles the regex argument (UTF, caseless, JIT when available). */
static pcre2_code *compile_regex(const char *re, hx_err *err)
{
    int ec;
    PCRE2_SIZE off;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_CASELESS,
                                     &ec, &off, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        hx_err_set(err, HX_ERR_INVALID, "regex: %s at offset %zu", (char *)msg,
                   (size_t)off);
        return NULL;
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return code;
}

static int regex_hit(pcre2_code *re, pcre2_match_data *md, const char *s)
{
    /* the index holds only valid UTF-8 (the parser guarantees it) */
    return s && pcre2_match(re, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0,
                            PCRE2_NO_UTF_CHECK, md, NULL) >= 0;
}

/* Whether the row's subject, sender or body (column 9) matches. */
static int row_matches_regex(pcre2_code *re, pcre2_match_data *md, sqlite3_stmt *row)
{
    return regex_hit(re, md, (const char *)sqlite3_column_text(row, 4)) ||
           regex_hit(re, md, (const char *)sqlite3_column_text(row, 3)) ||
           regex_hit(re, md, (const char *)sqlite3_column_text(row, 9));
}

static cJSON *row_json(icaltimezone *z, sqlite3_stmt *row)
{
    char date[64];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", (const char *)sqlite3_column_text(row, 1));
    iso_time(z, sqlite3_column_int64(row, 2), date, sizeof date);
    cJSON_AddStringToObject(o, "date", date);
    cJSON_AddStringToObject(o, "from", (const char *)sqlite3_column_text(row, 3));
    cJSON_AddStringToObject(o, "subject", (const char *)sqlite3_column_text(row, 4));
    cJSON_AddStringToObject(o, "snippet", (const char *)sqlite3_column_text(row, 5));
    cJSON_AddBoolToObject(o, "unread", !sqlite3_column_int(row, 6));
    cJSON_AddStringToObject(o, "folder", (const char *)sqlite3_column_text(row, 7));
    cJSON_AddNumberToObject(o, "attachments", sqlite3_column_int(row, 8));
    return o;
}

/* Runs the query. With text, when some messages have every term the
 * result is those only; else it is the messages with some of them, best
 * first, each with the terms it has ("matched"). */
static int run_search(mail_index *ix, search_q *q, pcre2_code *re, icaltimezone *z, int limit,
                      cJSON *out, hx_err *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ix->db, q->sql.data, -1, &st, NULL) != SQLITE_OK)
        return hx_err_set(err, HX_ERR_INTERNAL, "mail search: %s", sqlite3_errmsg(ix->db));
    int k = 1;
    for (size_t i = 0; q->strs.data && i < q->strs.len; i += strlen(q->strs.data + i) + 1)
        bind_text(st, k++, q->strs.data + i);
    pcre2_match_data *md = re ? pcre2_match_data_create_from_pattern(re, NULL) : NULL;
    cJSON *arr = cJSON_AddArrayToObject(out, "messages");
    int n = 0, total = 0, best = -1, step = arr ? SQLITE_ROW : SQLITE_NOMEM;
    while (step == SQLITE_ROW && (step = sqlite3_step(st)) == SQLITE_ROW) {
        if (re && !row_matches_regex(re, md, st)) continue;
        int hits = q->n_terms > 0 ? sqlite3_column_int(st, 10) : 0;
        if (best < 0) best = hits;
        if (hits < best && best == q->n_terms) { /* those with every term only */
            step = SQLITE_DONE;
            break;
        }
        total++;
        if (n == limit) continue;
        cJSON *o = row_json(z, st);
        if (o && best < q->n_terms &&
            !hx_json_add(o, "matched",
                         hx_terms_json(&q->terms, q->n_terms, sqlite3_column_int(st, 11))))
            step = SQLITE_NOMEM;
        if (!hx_json_add(arr, NULL, o)) step = SQLITE_NOMEM;
        n++;
    }
    /* a search cut short by an error is an error, not fewer messages */
    int rc = HX_OK;
    if (step == SQLITE_DONE && !cJSON_AddNumberToObject(out, "total", total)) step = SQLITE_NOMEM;
    if (step == SQLITE_DONE && q->n_terms > 0)
        hx_text_notes(&q->terms, q->n_terms, &q->ignored, best, total, "message", out);
    if (step == SQLITE_NOMEM)
        rc = hx_err_set(err, HX_ERR_NOMEM, "mail search: out of memory");
    else if (step != SQLITE_DONE)
        rc = hx_err_set(err, HX_ERR_INTERNAL, "mail search: %s", sqlite3_errmsg(ix->db));
    pcre2_match_data_free(md);
    sqlite3_finalize(st);
    return rc;
}

static void search_q_free(search_q *q)
{
    hx_buf_free(&q->sql);
    hx_buf_free(&q->strs);
    hx_buf_free(&q->terms);
    hx_buf_free(&q->ignored);
}

/* The query of args into q and *re (NULL: no "regex"); on an error the
 * caller still frees them. */
static int prepare_search(const hx_tools *reg, const cJSON *args, search_q *q, pcre2_code **re,
                          hx_err *err)
{
    int rc = build_search(reg, args, q, err);
    if (!rc && hx_arg_str(args, "regex") && !(*re = compile_regex(hx_arg_str(args, "regex"), err)))
        rc = err->rc;
    return rc;
}

/* The messages query q (and re) of args finds in the open index ix into
 * *result (owned by the caller). */
static int run_prepared(const hx_tools *reg, mail_index *ix, search_q *q, pcre2_code *re,
                        const cJSON *args, cJSON **result, hx_err *err)
{
    cJSON *out = cJSON_CreateObject();
    int rc = run_search(ix, q, re, hx_tools_tz(reg), hx_arg_int(args, "limit", 20), out, err);
    if (rc) cJSON_Delete(out);
    else *result = out;
    return rc;
}

/* The messages args find in the open index ix into *result. */
static int search_ix(const hx_tools *reg, mail_index *ix, const cJSON *args, cJSON **result,
                     hx_err *err)
{
    search_q q = {0};
    pcre2_code *re = NULL;
    int rc = prepare_search(reg, args, &q, &re, err);
    if (!rc) rc = run_prepared(reg, ix, &q, re, args, result, err);
    pcre2_code_free(re);
    search_q_free(&q);
    return rc;
}

/* Whether the search names the messages by more than its words: a
 * sender, a recipient, a subject, a folder, a time or unread. */
static int has_filters(const cJSON *args)
{
    static const char *const keys[] = {"from", "to", "subject", "folder", "since", "until"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (hx_arg_str(args, keys[i])) return 1;
    return hx_arg_bool(args, "unread", 0);
}

/* The messages ix holds for a (0 when the search fails); *r gets them. */
static int total_of(const hx_tools *reg, mail_index *ix, const cJSON *a, cJSON **r)
{
    hx_err err = {0};
    *r = NULL;
    return a && !search_ix(reg, ix, a, r, &err) ? (int)cJSON_GetNumberValue(cJSON_GetObjectItem(*r, "total"))
                                                 : 0;
}

/* The messages the search a finds into result's "others" (with
 * "others_total" and a note: no message <lack> "<value>"; "others" holds
 * the N <how>) when it finds any; 1 if it did, 0 if not (or it failed),
 * -1 out of memory (result is then partly changed). a is the caller's
 * (NULL: out of memory). */
static int others_of(const hx_tools *reg, mail_index *ix, const cJSON *a, const char *lack,
                     const char *value, const char *how, cJSON *result)
{
    if (!a) return -1;
    cJSON *r = NULL;
    const int total = total_of(reg, ix, a, &r);
    cJSON *others = total > 0 ? cJSON_DetachItemFromObject(r, "messages") : NULL;
    cJSON_Delete(r);
    if (!others) return 0;
    char note[700];
    snprintf(note, sizeof note, "no message %s \"%.200s\"; \"others\" holds the %d %s, newest first",
             lack, value, total, how);
    cJSON_DeleteItemFromObject(result, "note");
    if (!cJSON_AddStringToObject(result, "note", note) ||
        !cJSON_AddItemToObject(result, "others", others) ||
        !cJSON_AddNumberToObject(result, "others_total", total))
        return -1;
    return 1;
}

/* others_of the search args without argument key. */
static int others_without(const hx_tools *reg, mail_index *ix, const cJSON *args,
                          const char *key, const char *lack, const char *how, cJSON *result)
{
    cJSON *a = cJSON_Duplicate(args, 1);
    if (a) cJSON_DeleteItemFromObject(a, key);
    const int rc = others_of(reg, ix, a, lack, hx_arg_str(args, key), how, result);
    cJSON_Delete(a);
    return rc;
}

/* others_of the search args with the sender named as its text: the mail
 * that names "Maya" when Maya wrote none (her school did). */
static int others_naming(const hx_tools *reg, mail_index *ix, const cJSON *args, cJSON *result)
{
    const char *from = hx_arg_str(args, "from");
    cJSON *a = cJSON_Duplicate(args, 1);
    if (a) {
        cJSON_DeleteItemFromObject(a, "from");
        cJSON_DeleteItemFromObject(a, "text");
    }
    const int rc = a && !cJSON_AddStringToObject(a, "text", from)
                       ? -1
                       : others_of(reg, ix, a, "at all is from", from, "that name it", result);
    cJSON_Delete(a);
    return rc;
}

/* A search that found nothing still finds nothing, and says so, but
 * what it nearly found comes with it, newest first, as "others": the
 * messages its other arguments find when none of them has the text's
 * words (the words were a guess at the mail's wording: "what did Tobi
 * write" searched for "write"; the sender is what the user named), else,
 * when no message at all is from the sender named, those with the words
 * from anyone ("from": "much", a word of the question), else those that
 * name the sender (a child's school wrote about her). Every search reads
 * the one open index ix. HX_OK, or HX_ERR_NOMEM (the caller drops the
 * result). */
static int near_results(const hx_tools *reg, mail_index *ix, const cJSON *args, cJSON *result)
{
    int found = has_filters(args) ? others_without(reg, ix, args, "text", "has any of the words of",
                                                   "that the other arguments find without them", result)
                                  : 0;
    const char *from = hx_arg_str(args, "from");
    if (found || !from) return found < 0 ? HX_ERR_NOMEM : HX_OK;
    cJSON *alone = cJSON_CreateObject(), *r = NULL;
    const int none_from = alone && cJSON_AddStringToObject(alone, "from", from) &&
                          !total_of(reg, ix, alone, &r);
    cJSON_Delete(r);
    cJSON_Delete(alone);
    if (none_from)
        found = others_without(reg, ix, args, "from", "at all is from",
                               "that the other arguments find from anyone", result);
    if (none_from && !found) found = others_naming(reg, ix, args, result);
    return found < 0 ? HX_ERR_NOMEM : HX_OK;
}

static int tool_search(hx_tools *reg, void *user, const cJSON *args,
                       cJSON **result, hx_err *err)
{
    (void)user;
    mail_index ix;
    search_q q = {0};
    pcre2_code *re = NULL;
    int rc = prepare_search(reg, args, &q, &re, err); /* bad arguments before the index */
    const double t0 = hx_time_mono();
    if (!rc && !(rc = index_ready(reg, &ix, err))) {
        const double t1 = hx_time_mono();
        rc = run_prepared(reg, &ix, &q, re, args, result, err);
        if (!rc && q.n_terms > 0 && !cJSON_GetNumberValue(cJSON_GetObjectItem(*result, "total")) &&
            (rc = near_results(reg, &ix, args, *result))) {
            cJSON_Delete(*result);
            *result = NULL;
            hx_err_set(err, rc, "mail search: out of memory");
        }
        hx_log_debug("mail.search: index %.1f ms, query %.1f ms", (t1 - t0) * 1e3,
                     (hx_time_mono() - t1) * 1e3);
        index_close(&ix);
    }
    pcre2_code_free(re);
    search_q_free(&q);
    return rc;
}

/* ---- addresses the user knows ---- */

#define KNOWN_MESSAGES 2000

static int cmp_str_nocase(const void *a, const void *b)
{
    return strcasecmp(*(char *const *)a, *(char *const *)b);
}

int hx_tools_known_addresses(const hx_tools *reg, hx_buf *out, hx_err *err)
{
    hx_buf people;
    hx_buf_init(&people);
    int rc = hx_tools_correspondents(reg, &people, err);
    size_t n = 0;
    for (size_t i = 0; !rc && i < people.len; i++) n += people.data[i] == '\n';
    char **v = n ? hx_calloc(n, sizeof *v) : NULL;
    if (n && !v) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (char *l = people.data; !rc && k < n; k++) { /* "address\tname\n": the address */
        v[k] = l;
        l += strcspn(l, "\n") + 1;
        v[k][strcspn(v[k], "\t\n")] = 0;
    }
    if (!rc && n) qsort(v, n, sizeof *v, cmp_str_nocase);
    for (size_t i = 0; i < n && !rc; i++)
        if (i == 0 || strcasecmp(v[i], v[i - 1])) hx_buf_printf(out, "%s\n", v[i]);
    free(v);
    hx_buf_free(&people);
    if (!rc && out->oom) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    return rc;
}

int hx_tools_correspondents(const hx_tools *reg, hx_buf *out, hx_err *err)
{
    const hx_config *cfg = hx_tools_config(reg);
    if (!cfg || !cfg->maildir || !*cfg->maildir) return HX_OK;
    mail_index ix;
    int rc = index_ready(reg, &ix, err);
    if (rc) return rc;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(ix.db, "SELECT from_, to_, cc FROM msg ORDER BY date DESC LIMIT ?", -1, &st,
                           NULL) != SQLITE_OK)
        rc = hx_err_set(err, HX_ERR_INTERNAL, "mail index: %s", sqlite3_errmsg(ix.db));
    else sqlite3_bind_int(st, 1, KNOWN_MESSAGES);
    while (!rc && sqlite3_step(st) == SQLITE_ROW)
        for (int col = 0; col < 3; col++) {
            const char *s = (const char *)sqlite3_column_text(st, col);
            char piece[512], name[256], email[256];
            while (s && hx_address_list_next(&s, piece, sizeof piece))
                if (!hx_parse_address(piece, name, sizeof name, email, sizeof email))
                    hx_buf_printf(out, "%s\t%s\n", email, name);
        }
    sqlite3_finalize(st);
    index_close(&ix);
    if (!rc && out->oom) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    return rc;
}

/* ---- mail.read ---- */

static int lookup_path(mail_index *ix, const char *id, char *path, size_t n,
                       char *folder, size_t fn)
{
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(ix->db, "SELECT path,folder FROM msg WHERE id=?", -1, &st,
                           NULL) == SQLITE_OK) {
        bind_text(st, 1, id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            snprintf(path, n, "%s", (const char *)sqlite3_column_text(st, 0));
            snprintf(folder, fn, "%s", (const char *)sqlite3_column_text(st, 1));
            found = 1;
        }
    }
    sqlite3_finalize(st);
    return found;
}

/* Parses the message with the given id; *m owned by the caller. */
static int load_message(hx_tools *reg, const char *id, hx_message **m,
                        char *folder, size_t fn, hx_err *err)
{
    mail_index ix;
    char path[PATH_MAX];
    int rc = index_ready(reg, &ix, err);
    if (rc) return rc;
    int found = lookup_path(&ix, id, path, sizeof path, folder, fn);
    const hx_root *md = ix.md;
    index_close(&ix);
    if (!found) return hx_err_set(err, HX_ERR_NOTFOUND, "no message with id '%s'", id);
    char *raw;
    size_t len;
    rc = hx_root_read(md, path, MAX_MAIL_BYTES, &raw, &len, NULL, err);
    if (rc) return rc;
    rc = hx_message_parse(raw, len, m, err);
    free(raw);
    return rc;
}

static cJSON *message_json(icaltimezone *z, const hx_message *m, const char *id,
                           const char *folder)
{
    cJSON *o = cJSON_CreateObject();
    char date[64];
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "folder", folder);
    cJSON_AddStringToObject(o, "from", m->from);
    cJSON_AddStringToObject(o, "to", m->to);
    if (*m->cc) cJSON_AddStringToObject(o, "cc", m->cc);
    cJSON_AddStringToObject(o, "subject", m->subject);
    iso_time(z, m->date, date, sizeof date);
    cJSON_AddStringToObject(o, "date", m->date ? date : m->date_raw);
    cJSON_AddStringToObject(o, "message_id", m->message_id);
    size_t len = strlen(m->text), cut = len;
    if (cut > READ_MAX_CHARS) {
        cut = READ_MAX_CHARS;
        while (cut && ((unsigned char)m->text[cut] & 0xc0) == 0x80) cut--;
    }
    char *text = hx_strndup(m->text, cut);
    cJSON_AddStringToObject(o, "text", text ? text : "");
    free(text);
    if (cut < len) cJSON_AddBoolToObject(o, "truncated", 1);
    cJSON *atts = cJSON_AddArrayToObject(o, "attachments");
    for (int i = 0; i < m->n_att; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "filename", m->att[i].filename);
        cJSON_AddStringToObject(a, "content_type", m->att[i].content_type);
        cJSON_AddNumberToObject(a, "size", (double)m->att[i].size);
        cJSON_AddItemToArray(atts, a);
    }
    if (*m->problems) cJSON_AddStringToObject(o, "problems", m->problems);
    return o;
}

static int tool_read(hx_tools *reg, void *user, const cJSON *args,
                     cJSON **result, hx_err *err)
{
    (void)user;
    const char *id = hx_arg_str(args, "id");
    if (!id) return hx_err_set(err, HX_ERR_INVALID, "mail.read needs an id");
    hx_message *m;
    char folder[128];
    int rc = load_message(reg, id, &m, folder, sizeof folder, err);
    if (rc) return rc;
    *result = message_json(hx_tools_tz(reg), m, id, folder);
    hx_message_free(m);
    return HX_OK;
}

/* ---- mail.draft, mail.send, mail.reply ---- */

static void user_from(const hx_config *cfg, char *buf, size_t n)
{
    const char *name = cfg && cfg->user_name ? cfg->user_name : "";
    const char *addr = cfg && cfg->user_email ? cfg->user_email : "";
    if (*name) snprintf(buf, n, "%s <%s>", name, addr);
    else snprintf(buf, n, "%s", addr);
}

/* Composes the draft and delivers it into the folder of the Maildir md
 * (flags as given). */
static int compose_into(const hx_mail_draft *d, const hx_root *md, const char *folder,
                        const char *flags, cJSON *out, hx_err *err)
{
    char *msg;
    size_t len;
    char msgid[256], name[256];
    int rc = hx_mail_compose(d, &msg, &len, msgid, sizeof msgid, err);
    if (rc) return rc;
    rc = hx_maildir_deliver(md, folder, msg, len, flags, name, sizeof name, err);
    free(msg);
    if (rc) return rc;
    cJSON_AddStringToObject(out, "message_id", msgid);
    cJSON_AddStringToObject(out, "id", name);
    cJSON_AddStringToObject(out, "to", d->to ? d->to : "");
    cJSON_AddStringToObject(out, "subject", d->subject ? d->subject : "");
    return HX_OK;
}

static int fill_draft(const hx_tools *reg, const cJSON *args, hx_mail_draft *d,
                      char *from, size_t fn, hx_err *err)
{
    memset(d, 0, sizeof *d);
    user_from(hx_tools_config(reg), from, fn);
    d->from = from;
    d->to = hx_arg_str(args, "to");
    d->cc = hx_arg_str(args, "cc");
    d->subject = hx_arg_str(args, "subject");
    d->body = hx_arg_str(args, "body");
    if (!d->to) return hx_err_set(err, HX_ERR_INVALID, "'to' must hold at least one e-mail address");
    int rc = hx_arg_addresses(args, "to", err);
    if (rc || (rc = hx_arg_addresses(args, "cc", err))) return rc;
    if (!d->subject) d->subject = "";
    if (!d->body) d->body = "";
    return HX_OK;
}

static const hx_root *outbox_of(const hx_tools *reg, hx_err *err)
{
    return hx_tools_root(reg, HX_ROOT_OUTBOX, 0, 0, err);
}

static int tool_draft(hx_tools *reg, void *user, const cJSON *args,
                      cJSON **result, hx_err *err)
{
    (void)user;
    hx_mail_draft d;
    char from[512];
    int rc = fill_draft(reg, args, &d, from, sizeof from, err);
    if (rc) return rc;
    const hx_root *md = hx_tools_root(reg, HX_ROOT_MAILDIR, 0, HX_ROOT_CREATE, err);
    if (!md) return err->rc;
    cJSON *out = cJSON_CreateObject();
    rc = compose_into(&d, md, ".Drafts", "DS", out, err);
    if (rc) cJSON_Delete(out);
    else cJSON_AddStringToObject(out, "status", "saved as draft"), *result = out;
    return rc;
}

static int tool_send(hx_tools *reg, void *user, const cJSON *args,
                     cJSON **result, hx_err *err)
{
    (void)user;
    hx_mail_draft d;
    char from[512];
    const hx_root *outbox = outbox_of(reg, err);
    if (!outbox) return err->rc;
    int rc = fill_draft(reg, args, &d, from, sizeof from, err);
    if (rc) return rc;
    cJSON *out = cJSON_CreateObject();
    rc = compose_into(&d, outbox, "", NULL, out, err);
    if (rc) cJSON_Delete(out);
    else cJSON_AddStringToObject(out, "status", "queued in the outbox"), *result = out;
    return rc;
}

/* "> " before every line of the original text. */
static void quote_text(hx_buf *b, const hx_message *m)
{
    hx_buf_printf(b, "\n\nOn %s, %s wrote:\n", m->date_raw, m->from);
    const char *p = m->text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        hx_buf_puts(b, "> ");
        hx_buf_append(b, p, n);
        hx_buf_putc(b, '\n');
        p += n + (nl ? 1 : 0);
    }
}

static int tool_reply(hx_tools *reg, void *user, const cJSON *args,
                      cJSON **result, hx_err *err)
{
    (void)user;
    const char *id = hx_arg_str(args, "id");
    const hx_root *outbox = outbox_of(reg, err);
    if (!outbox) return err->rc;
    if (!id) return hx_err_set(err, HX_ERR_INVALID, "mail.reply needs the id of the message");
    hx_message *m;
    char folder[128], from[512], subject[1024], refs[2048];
    int rc = load_message(reg, id, &m, folder, sizeof folder, err);
    if (rc) return rc;
    hx_tools_mark_untrusted(reg); /* the result quotes its sender and subject */
    hx_mail_draft d = {0};
    user_from(hx_tools_config(reg), from, sizeof from);
    snprintf(subject, sizeof subject, "%s%s",
             strncasecmp(m->subject, "re:", 3) ? "Re: " : "", m->subject);
    snprintf(refs, sizeof refs, "%s%s%s", m->references, *m->references ? " " : "",
             m->message_id);
    hx_buf body;
    hx_buf_init(&body);
    hx_buf_puts(&body, hx_arg_str(args, "body") ? hx_arg_str(args, "body") : "");
    quote_text(&body, m);
    char to[2048];
    snprintf(to, sizeof to, "%s%s%s", m->from,
             hx_arg_bool(args, "reply_all", 0) && *m->cc ? ", " : "",
             hx_arg_bool(args, "reply_all", 0) ? m->cc : "");
    d.from = from, d.to = to, d.subject = subject, d.body = body.data;
    d.in_reply_to = m->message_id, d.references = refs;
    cJSON *out = cJSON_CreateObject();
    rc = compose_into(&d, outbox, "", NULL, out, err);
    hx_buf_free(&body);
    hx_message_free(m);
    if (rc) cJSON_Delete(out);
    else cJSON_AddStringToObject(out, "status", "reply queued in the outbox"), *result = out;
    return rc;
}

/* ---- registration ---- */

static const char schema_search[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"text\":{\"type\":\"string\",\"description\":\"words to look for: the messages with "
    "all of them, else those with the most, best match first\"},"
    "\"from\":{\"type\":\"string\"},\"to\":{\"type\":\"string\"},"
    "\"subject\":{\"type\":\"string\"},"
    "\"since\":{\"type\":\"string\",\"description\":\"ISO 8601 or words like last week\"},"
    "\"until\":{\"type\":\"string\",\"description\":\"ISO 8601 or words like yesterday\"},"
    "\"unread\":{\"type\":\"boolean\"},\"folder\":{\"type\":\"string\"},"
    "\"regex\":{\"type\":\"string\",\"description\":\"PCRE2 pattern over subject, sender and body\"},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":200}},"
    "\"additionalProperties\":false}";
static const char schema_read[] =
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}},"
    "\"required\":[\"id\"],\"additionalProperties\":false}";
static const char schema_compose[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"to\":{\"type\":\"string\"},\"cc\":{\"type\":\"string\"},"
    "\"subject\":{\"type\":\"string\"},\"body\":{\"type\":\"string\"}},"
    "\"required\":[\"to\",\"subject\",\"body\"],\"additionalProperties\":false}";
static const char schema_reply[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\"},\"body\":{\"type\":\"string\"},"
    "\"reply_all\":{\"type\":\"boolean\"}},"
    "\"required\":[\"id\",\"body\"],\"additionalProperties\":false}";

static const hx_tool_def mail_tools[] = {
    {HX_TOOL_API_VERSION, "mail.search",
     "Search the user's mail by sender, recipient, subject, date range, unread "
     "state, words or a regex; newest first, with a snippet of each.",
     schema_search, HX_EFFECT_READ, tool_search, NULL, HX_TOOL_BUILTIN | HX_TOOL_UNTRUSTED},
    {HX_TOOL_API_VERSION, "mail.read",
     "Read one message: headers, text body and the list of attachments.",
     schema_read, HX_EFFECT_READ, tool_read, NULL, HX_TOOL_BUILTIN | HX_TOOL_UNTRUSTED},
    {HX_TOOL_API_VERSION, "mail.draft",
     "Save a new message as a draft without sending it.", schema_compose,
     HX_EFFECT_WRITE, tool_draft, NULL, HX_TOOL_BUILTIN},
    {HX_TOOL_API_VERSION, "mail.send",
     "Send a new message (queued in the outbox until the device is online).",
     schema_compose, HX_EFFECT_SEND, tool_send, NULL, HX_TOOL_BUILTIN},
    {HX_TOOL_API_VERSION, "mail.reply",
     "Reply to a message by id, quoting it (queued in the outbox).",
     schema_reply, HX_EFFECT_SEND, tool_reply, NULL, HX_TOOL_BUILTIN},
};

int hx_mail_register_tools(hx_tools *reg, hx_err *err)
{
    return hx_tools_register_all(reg, mail_tools, sizeof mail_tools / sizeof mail_tools[0], err);
}
