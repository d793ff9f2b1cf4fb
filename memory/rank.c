/* rank.c: finding and ranking memories for recall and consolidation in
 * bounded time: each query word contributes its newest MEM_TERM_CAP
 * full-text matches, and the candidates are scored with BM25 in C. */
#include "memory/memory_int.h"

#include <math.h>
#include <string.h>

#define MAX_TERMS 32
#define BM25_K1 1.2
#define BM25_B 0.75

typedef struct terms {
    char word[MAX_TERMS][MEM_WORD_MAX + 1]; /* as typed, lower-cased */
    char stem[MAX_TERMS][MEM_WORD_MAX + 1]; /* hx_mem_light_stem of word */
    int hits[MAX_TERMS];                    /* candidates it brought */
    int64_t oldest[MAX_TERMS];              /* smallest id among them */
    int cap;                                /* matches taken per word */
    int n;
} terms;

static void terms_init(terms *t, const char *text)
{
    memset(t, 0, sizeof *t);
    t->n = hx_mem_query_words(text, t->word, MAX_TERMS);
    for (int i = 0; i < t->n; i++) {
        memcpy(t->stem[i], t->word[i], sizeof t->stem[i]);
        hx_mem_light_stem(t->stem[i]);
    }
}

/* ---- candidates ---- */

typedef struct idset {
    int64_t *slot; /* open addressing, 0 = empty */
    size_t cap;
} idset;

/* Adds id; returns 1 if it was new. */
static int idset_add(idset *s, int64_t id)
{
    size_t i = (size_t)(id * 0x9E3779B97F4A7C15ull) & (s->cap - 1);
    while (s->slot[i]) {
        if (s->slot[i] == id) return 0;
        i = (i + 1) & (s->cap - 1);
    }
    s->slot[i] = id;
    return 1;
}

static const char cand_sql[] =
    "SELECT " MEM_ITEM_COLS ", m.norm FROM memories m WHERE m.id IN"
    " (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?1"
    "  ORDER BY rowid DESC LIMIT ?2)"
    " AND (m.expires_at IS NULL OR m.expires_at > ?3)"
    " AND (?4 IS NULL OR m.kind = ?4)";

/* Runs the per-word query for word i, adding new rows to l and norms. */
static int term_rows(sqlite3_stmt *st, terms *t, int i, idset *seen,
                     hx_mem_list *l, const char **norms)
{
    char q[MEM_WORD_MAX + 3];
    snprintf(q, sizeof q, "\"%s\"", t->word[i]); /* no quotes in words */
    sqlite3_bind_text(st, 1, q, -1, SQLITE_TRANSIENT);
    int s, rc = HX_OK;
    t->oldest[i] = INT64_MAX;
    while (rc == HX_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        t->hits[i]++;
        if (id < t->oldest[i]) t->oldest[i] = id;
        if (!idset_add(seen, id)) continue;
        rc = hx_mem_list_add_row(l, st);
        if (rc == HX_OK &&
            !(norms[l->n - 1] = hx_mem_col_text(st, MEM_N_ITEM_COLS, l->arena)))
            rc = HX_ERR_NOMEM;
    }
    sqlite3_reset(st);
    return rc ? rc : (s == SQLITE_DONE ? HX_OK : HX_ERR_IO);
}

static int candidates(hx_memory *m, terms *t, const char *kind, int cap,
                      int with_expired, hx_mem_list *l, const char **norms,
                      hx_err *err)
{
    size_t slots = 64; /* a power of two, at least twice the rows */
    while (slots < 2 * (size_t)(t->n * cap)) slots *= 2;
    idset seen = {hx_calloc(slots, sizeof(int64_t)), slots};
    sqlite3_stmt *st = hx_mem_prepare(m, cand_sql, err);
    int rc = !seen.slot ? hx_err_set(err, HX_ERR_NOMEM, "out of memory")
             : !st      ? (err ? err->rc : HX_ERR_INTERNAL)
                        : HX_OK;
    if (st) {
        sqlite3_bind_int(st, 2, cap);
        t->cap = cap;
        sqlite3_bind_int64(st, 3, with_expired ? INT64_MIN : hx_now(NULL));
        if (kind) sqlite3_bind_text(st, 4, kind, -1, SQLITE_STATIC);
    }
    for (int i = 0; rc == HX_OK && i < t->n; i++) {
        rc = term_rows(st, t, i, &seen, l, norms);
        if (rc == HX_ERR_NOMEM) hx_err_set(err, rc, "out of memory");
        else if (rc) rc = hx_mem_sql_err(m, err, "search");
    }
    sqlite3_finalize(st);
    free(seen.slot);
    return rc;
}

/* Allocates the list and the norms array (enough for every word's cap). */
static int cand_alloc(hx_mem_list **l, const char ***norms, hx_err *err)
{
    *l = hx_mem_list_new();
    *norms = *l ? hx_arena_calloc((*l)->arena, MAX_TERMS * MEM_TERM_CAP,
                                  sizeof **norms)
                : NULL;
    if (*norms) return HX_OK;
    hx_mem_list_free(*l);
    *l = NULL;
    return hx_err_set(err, HX_ERR_NOMEM, "memory: out of memory");
}

int hx_mem_candidates(hx_memory *m, const char *text, const char *kind,
                      hx_mem_list **out, const char ***norms, hx_err *err)
{
    static _Thread_local terms t;
    terms_init(&t, text);
    int rc = cand_alloc(out, norms, err);
    if (rc == HX_OK)
        rc = candidates(m, &t, kind, MEM_MERGE_CAP, 1, *out, *norms, err);
    if (rc) {
        hx_mem_list_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- BM25 ---- */

typedef struct corpus_stats {
    double n_docs, avg_len;
    int64_t max_id;
} corpus_stats;

/* SQLite varint (as FTS5 writes it); returns bytes read, 0 if cut. */
static int get_varint(const unsigned char *p, int n, uint64_t *v)
{
    *v = 0;
    for (int i = 0; i < 9 && i < n; i++) {
        if (i == 8) {
            *v = (*v << 8) | p[i];
            return 9;
        }
        *v = (*v << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) return i + 1;
    }
    return 0;
}

/* Rows and tokens from FTS5's "averages" record (id 1 of the data table),
 * the largest id as a fallback and for estimating frequent words' df. */
static void corpus_stats_read(hx_memory *m, corpus_stats *cs)
{
    cs->max_id = hx_mem_query_int(m, "SELECT max(id) FROM memories");
    cs->n_docs = cs->max_id > 0 ? (double)cs->max_id : 1.0;
    cs->avg_len = 10.0;
    sqlite3_stmt *st = hx_mem_prepare(
        m, "SELECT block FROM memories_fts_data WHERE id = 1", NULL);
    if (st && sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *p = sqlite3_column_blob(st, 0);
        int n = sqlite3_column_bytes(st, 0), k;
        uint64_t rows, toks;
        if (p && (k = get_varint(p, n, &rows)) && get_varint(p + k, n - k, &toks) &&
            rows > 0) {
            cs->n_docs = (double)rows;
            cs->avg_len = (double)toks / (double)rows;
        }
    }
    sqlite3_finalize(st);
}

/* Document frequency of word i: exact when it brought fewer than the cap,
 * else estimated from how far back its newest cap matches reach. */
static double term_df(const terms *t, int i, const corpus_stats *cs)
{
    if (t->hits[i] < t->cap) return t->hits[i] > 0 ? t->hits[i] : 1;
    double span = (double)(cs->max_id - t->oldest[i] + 1);
    double df = t->cap * (double)cs->max_id / (span > 1 ? span : 1);
    return df < cs->n_docs ? df : cs->n_docs;
}

static double bm25(const terms *t, const char *norm, const double *idf,
                   const corpus_stats *cs)
{
    int tf[MAX_TERMS] = {0}, dl = 0;
    size_t len;
    char w[MEM_WORD_MAX + 1];
    for (const char *p = norm; (p = hx_mem_next_word(p, &len)); p += len) {
        dl++;
        if (len > MEM_WORD_MAX) continue;
        memcpy(w, p, len);
        w[len] = '\0';
        hx_mem_light_stem(w);
        for (int i = 0; i < t->n; i++) tf[i] += !strcmp(w, t->stem[i]);
    }
    double s = 0, norm_len = 1 - BM25_B + BM25_B * dl / cs->avg_len;
    for (int i = 0; i < t->n; i++)
        if (tf[i])
            s += idf[i] * tf[i] * (BM25_K1 + 1) / (tf[i] + BM25_K1 * norm_len);
    return s;
}

/* BM25 boosted up to 1.5x by recent use or update (half-life
 * half_life_days) and by 1 + 0.2 ln(1 + uses). */
static double boosted(const hx_mem_item *it, double rel, int64_t now,
                      double half_life_days)
{
    int64_t last = it->last_used_at > it->updated_at ? it->last_used_at
                                                     : it->updated_at;
    double age_days = (double)(now - last) / 86400.0;
    if (age_days < 0) age_days = 0;
    double recency = exp2(-age_days / (half_life_days > 0 ? half_life_days
                                                          : 30.0));
    double use = log1p((double)(it->use_count > 0 ? it->use_count : 0));
    return rel * (1.0 + 0.5 * recency) * (1.0 + 0.2 * use);
}

static int by_score(const void *a, const void *b)
{
    const hx_mem_item *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return x->id < y->id ? 1 : (x->id > y->id ? -1 : 0);
}

static void score_all(hx_memory *m, const terms *t, hx_mem_list *l,
                      const char **norms, double half_life_days)
{
    corpus_stats cs;
    corpus_stats_read(m, &cs);
    double idf[MAX_TERMS];
    for (int i = 0; i < t->n; i++) {
        double df = term_df(t, i, &cs);
        idf[i] = log((cs.n_docs - df + 0.5) / (df + 0.5) + 1.0);
    }
    int64_t now = hx_now(NULL);
    for (int i = 0; i < l->n; i++)
        l->items[i].score = boosted(&l->items[i], bm25(t, norms[i], idf, &cs),
                                    now, half_life_days);
}

int hx_mem_ranked(hx_memory *m, const char *query, int limit,
                  double half_life_days, hx_mem_list **out, hx_err *err)
{
    static _Thread_local terms t;
    terms_init(&t, query);
    const char **norms = NULL;
    int rc = cand_alloc(out, &norms, err);
    /* At most about MEM_RECALL_ROWS rows whatever the query's length. */
    int cap = t.n ? MEM_RECALL_ROWS / t.n : MEM_TERM_CAP;
    cap = cap > MEM_TERM_CAP ? MEM_TERM_CAP : cap < 16 ? 16 : cap;
    if (rc == HX_OK) rc = candidates(m, &t, NULL, cap, 0, *out, norms, err);
    if (rc) {
        hx_mem_list_free(*out);
        *out = NULL;
        return rc;
    }
    hx_mem_list *l = *out;
    score_all(m, &t, l, norms, half_life_days);
    if (l->n > 1) qsort(l->items, (size_t)l->n, sizeof *l->items, by_score);
    if (l->n > limit) l->n = limit;
    return HX_OK;
}
