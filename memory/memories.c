/* memories.c: facts and preferences: remember (with consolidation),
 * forget, list, full-text search with the recency and use boosts. */
#include "memory/memory_int.h"

#include <string.h>

#define ITEM_COLS MEM_ITEM_COLS

/* ---- lists ---- */

void hx_mem_list_free(hx_mem_list *l)
{
    if (!l) return;
    free(l->items);
    hx_arena_free(l->arena);
    free(l);
}

hx_mem_list *hx_mem_list_new(void)
{
    hx_mem_list *l = hx_calloc(1, sizeof *l);
    if (l && !(l->arena = hx_arena_new(16384))) {
        free(l);
        l = NULL;
    }
    return l;
}

/* Appends the row's ITEM_COLS (starting at column 0) to the list. */
int hx_mem_list_add_row(hx_mem_list *l, sqlite3_stmt *st)
{
    if ((l->n & (l->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = l->n ? (size_t)l->n * 2 : 1;
        hx_mem_item *p = hx_realloc(l->items, cap * sizeof *p);
        if (!p) return HX_ERR_NOMEM;
        l->items = p;
    }
    hx_mem_item *it = &l->items[l->n];
    memset(it, 0, sizeof *it);
    it->id = sqlite3_column_int64(st, 0);
    it->kind = hx_mem_col_text(st, 1, l->arena);
    it->text = hx_mem_col_text(st, 2, l->arena);
    it->episode_id = sqlite3_column_int64(st, 3);
    it->created_at = sqlite3_column_int64(st, 4);
    it->updated_at = sqlite3_column_int64(st, 5);
    it->expires_at = sqlite3_column_int64(st, 6);
    it->last_used_at = sqlite3_column_int64(st, 7);
    it->use_count = sqlite3_column_int64(st, 8);
    it->provenance = sqlite3_column_type(st, 9) == SQLITE_NULL ? HX_MEM_UNKNOWN
                     : sqlite3_column_int(st, 9) ? HX_MEM_UNTRUSTED : HX_MEM_USER;
    if (!it->kind || !it->text) return HX_ERR_NOMEM;
    l->n++;
    return HX_OK;
}

/* Steps st to the end, collecting rows; takes ownership of st. */
static int collect(hx_memory *m, sqlite3_stmt *st, hx_mem_list **out,
                   hx_err *err)
{
    *out = NULL;
    hx_mem_list *l = hx_mem_list_new();
    int rc = l ? HX_OK : HX_ERR_NOMEM, s;
    while (rc == HX_OK && (s = sqlite3_step(st)) == SQLITE_ROW)
        rc = hx_mem_list_add_row(l, st);
    if (rc == HX_OK && s != SQLITE_DONE) rc = hx_mem_sql_err(m, err, "read");
    else if (rc == HX_ERR_NOMEM)
        hx_err_set(err, rc, "memory: out of memory");
    sqlite3_finalize(st);
    if (rc) {
        hx_mem_list_free(l);
        return rc;
    }
    *out = l;
    return HX_OK;
}

/* ---- provenance ---- */

const char *hx_mem_provenance_name(int p)
{
    return p == HX_MEM_USER ? "user" : p == HX_MEM_UNTRUSTED ? "untrusted" : "unknown";
}

int hx_mem_untrusted(const hx_mem_item *it) { return it->provenance != HX_MEM_USER; }

/* ---- remember ---- */

static int64_t find_same(hx_memory *m, const char *kind, const char *norm,
                         hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(
        m, "SELECT id FROM memories WHERE kind = ?1 AND norm = ?2 LIMIT 1",
        err);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, norm, -1, SQLITE_STATIC);
    int64_t id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0)
                                                : 0;
    sqlite3_finalize(st);
    return id;
}

static int word_count(const char *norm)
{
    int n = *norm != '\0';
    for (; *norm; norm++) n += *norm == ' ';
    return n;
}

/* The memory of the same kind with the highest word overlap >= threshold
 * among those sharing a word with norm, or 0; -1 on error. */
static int64_t find_similar(hx_memory *m, const char *kind, const char *norm,
                            hx_err *err)
{
    hx_mem_list *l = NULL;
    const char **norms = NULL;
    if (hx_mem_candidates(m, norm, kind, &l, &norms, err)) return -1;
    int64_t best = 0;
    double best_j = m->params.merge_jaccard;
    int n_words = word_count(norm);
    for (int i = 0; i < l->n; i++) {
        /* |A n B| / |A u B| >= t needs t|A| <= |B| <= |A|/t (word counts
         * with repeats bound the set sizes loosely; only a cheap filter). */
        int nb = word_count(norms[i]);
        if (nb < best_j * n_words / 2 || nb * best_j > 2 * n_words) continue;
        double j = hx_mem_jaccard(norm, norms[i]);
        if (j >= best_j) {
            best_j = j;
            best = l->items[i].id;
        }
    }
    hx_mem_list_free(l);
    return best;
}

static void bind_opt_int(sqlite3_stmt *st, int i, int64_t v)
{
    if (v) sqlite3_bind_int64(st, i, v);
    else sqlite3_bind_null(st, i);
}

/* Inserts (id 0) or rewrites memory id with the new text. */
static int write_memory(hx_memory *m, int64_t id, const hx_mem_new *n,
                        const char *norm, int64_t *id_out, hx_err *err)
{
    sqlite3_stmt *st = hx_mem_prepare(
        m,
        id ? "UPDATE memories SET kind = ?1, text = ?2, norm = ?3,"
             " episode_id = coalesce(?4, episode_id), updated_at = ?5,"
             " expires_at = ?6, provenance = ?8 WHERE id = ?7"
           : "INSERT INTO memories(kind, text, norm, episode_id, created_at,"
             " updated_at, expires_at, provenance)"
             " VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?8)",
        err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    sqlite3_bind_text(st, 1, n->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, n->text, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, norm, -1, SQLITE_STATIC);
    bind_opt_int(st, 4, n->episode_id);
    sqlite3_bind_int64(st, 5, hx_now(NULL));
    bind_opt_int(st, 6, n->expires_at);
    if (id) sqlite3_bind_int64(st, 7, id);
    sqlite3_bind_int(st, 8, n->untrusted ? HX_MEM_UNTRUSTED : HX_MEM_USER);
    int rc = sqlite3_step(st) == SQLITE_DONE ? HX_OK
                                             : hx_mem_sql_err(m, err, "remember");
    sqlite3_finalize(st);
    if (rc == HX_OK && id_out)
        *id_out = id ? id : sqlite3_last_insert_rowid(m->db);
    return rc;
}

static int validate_new(const hx_mem_new *n, const char *norm, hx_err *err)
{
    if (!n->kind || !*n->kind || !n->text)
        return hx_err_set(err, HX_ERR_INVALID,
                          "memory: a memory needs a kind and a text");
    if (!*norm)
        return hx_err_set(err, HX_ERR_INVALID,
                          "memory: the text has no words to remember");
    return HX_OK;
}

int hx_memory_remember(hx_memory *m, const hx_mem_new *n, int64_t *id_out,
                       int *merged, hx_err *err)
{
    char *norm = hx_mem_normalize_dup(n->text);
    if (!norm) return hx_err_set(err, HX_ERR_NOMEM, "memory: out of memory");
    int rc = validate_new(n, norm, err);
    if (rc == HX_OK) rc = hx_mem_tx_begin(m, err);
    if (rc) {
        free(norm);
        return rc;
    }
    int64_t id = find_same(m, n->kind, norm, err);
    if (id == 0) id = find_similar(m, n->kind, norm, err);
    if (id < 0) rc = err ? err->rc : HX_ERR_INTERNAL;
    else rc = write_memory(m, id, n, norm, id_out, err);
    rc = hx_mem_tx_end(m, rc, err);
    if (rc == HX_OK && merged) *merged = id > 0;
    free(norm);
    return rc;
}

/* ---- forget ---- */

int hx_memory_forget(hx_memory *m, int64_t id, hx_err *err)
{
    return hx_mem_forget_row(m, "memories", "memory", id, err);
}

/* ---- reading ---- */

int hx_memory_get(hx_memory *m, int64_t id, hx_mem_list **out, hx_err *err)
{
    *out = NULL;
    sqlite3_stmt *st = hx_mem_prepare(
        m, "SELECT " ITEM_COLS " FROM memories m WHERE m.id = ?1", err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    sqlite3_bind_int64(st, 1, id);
    int rc = collect(m, st, out, err);
    if (rc == HX_OK && (*out)->n == 0) {
        hx_mem_list_free(*out);
        *out = NULL;
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "memory %lld not found",
                        (long long)id);
    }
    return rc;
}

int hx_memory_list(hx_memory *m, const char *kind, int limit, int with_expired,
                   hx_mem_list **out, hx_err *err)
{
    *out = NULL;
    sqlite3_stmt *st = hx_mem_prepare(
        m,
        "SELECT " ITEM_COLS " FROM memories m"
        " WHERE (?1 IS NULL OR m.kind = ?1)"
        " AND (?2 OR m.expires_at IS NULL OR m.expires_at > ?3)"
        " ORDER BY m.updated_at DESC, m.id DESC LIMIT ?4",
        err);
    if (!st) return err ? err->rc : HX_ERR_INTERNAL;
    if (kind) sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, with_expired != 0);
    sqlite3_bind_int64(st, 3, hx_now(NULL));
    sqlite3_bind_int(st, 4, limit > 0 ? limit : -1);
    return collect(m, st, out, err);
}

int64_t hx_memory_count(hx_memory *m)
{
    return hx_mem_query_int(m, "SELECT count(*) FROM memories");
}

/* ---- ranked search (rank.c) ---- */

int hx_memory_search(hx_memory *m, const char *query, int limit,
                     hx_mem_list **out, hx_err *err)
{
    return hx_mem_ranked(m, query, limit > 0 ? limit : 10, 30.0, out, err);
}
