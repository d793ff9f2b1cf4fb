/* memory_int.h: internals shared by the memory module's files: the handle,
 * the schema migrations and small SQLite helpers. Not a public header. */
#ifndef HX_MEMORY_INT_H
#define HX_MEMORY_INT_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>

#include "memory/memory.h"

struct hx_memory {
    sqlite3 *db;
    char *path;
    hx_memory_params params;
    int in_batch; /* inside hx_memory_begin/commit */
    int light;    /* the commit under way is bookkeeping (use counts) */
};

/* The forward migrations: migration[i] takes schema version i to i + 1. */
extern const char *const hx_mem_migrations[HX_MEMORY_SCHEMA_VERSION];

/* Fills err with "what: <sqlite message>" and returns rc mapped from the
 * SQLite error (CORRUPT/NOTADB -> HX_ERR_FORMAT, BUSY -> HX_ERR_TIMEOUT). */
int hx_mem_sql_err(hx_memory *m, hx_err *err, const char *what);
/* Runs SQL without results. */
int hx_mem_exec(hx_memory *m, const char *sql, hx_err *err);
/* Prepares sql (on error: err filled, NULL returned). */
sqlite3_stmt *hx_mem_prepare(hx_memory *m, const char *sql, hx_err *err);
/* Transactions that nest inside hx_memory_begin/commit batches. */
int hx_mem_tx_begin(hx_memory *m, hx_err *err);
int hx_mem_tx_end(hx_memory *m, int rc, hx_err *err); /* commit if rc == 0 */
/* A scalar integer query (no parameters); -1 on error. */
int64_t hx_mem_query_int(hx_memory *m, const char *sql);
/* Copies column i as text into the arena ("" for NULL unless null_ok). */
const char *hx_mem_col_text(sqlite3_stmt *st, int i, hx_arena *a);

/* text.c */
#define MEM_WORD_MAX 64
/* The query words of user text (lower-cased, stop words dropped unless
 * nothing else is left, distinct), at most max; returns how many. */
int hx_mem_query_words(const char *text, char words[][MEM_WORD_MAX + 1],
                       int max);
/* A light suffix stripper (-ing, -ed, plural -s) used to count term
 * frequencies when scoring; modifies w in place. */
void hx_mem_light_stem(char *w);
const char *hx_mem_next_word(const char *s, size_t *len);
char *hx_mem_normalize_dup(const char *text);     /* malloc'd, NULL on OOM */
char *hx_mem_fts_query_dup(const char *text);     /* malloc'd, NULL on OOM */

/* memories.c: lists of memories. ITEM_COLS are the columns a row must
 * start with for hx_mem_list_add_row. */
#define MEM_ITEM_COLS                                                        \
    "m.id, m.kind, m.text, m.episode_id, m.created_at, m.updated_at,"        \
    " m.expires_at, m.last_used_at, m.use_count, m.provenance"
#define MEM_N_ITEM_COLS 10
hx_mem_list *hx_mem_list_new(void);
int hx_mem_list_add_row(hx_mem_list *l, sqlite3_stmt *st);

/* rank.c: candidate retrieval and scoring. */
/* Memories matching user text, best first by boosted BM25, at most limit,
 * expired ones left out. */
int hx_mem_ranked(hx_memory *m, const char *query, int limit,
                  double half_life_days, hx_mem_list **out, hx_err *err);
/* The memories of kind (NULL: any) that share a word with text: for each
 * query word its newest MEM_MERGE_CAP matches (expired ones included).
 * Each item's score field is 0; *norms (parallel to items, in the list's arena) gets the normalised
 * texts. */
#define MEM_TERM_CAP 64   /* matches per word for recall, at most */
#define MEM_RECALL_ROWS 320 /* candidate rows per recall, about */
#define MEM_MERGE_CAP 16
int hx_mem_candidates(hx_memory *m, const char *text, const char *kind,
                      hx_mem_list **out, const char ***norms, hx_err *err);

/* Steps st over episodes_full rows (EP_COLS order: see episodes.c),
 * handing each to cb; finalizes st (episodes.c). */
int hx_mem_each_episode(hx_memory *m, sqlite3_stmt *st, int64_t split_at,
                        hx_episode_cb cb, void *user, hx_err *err);
#define MEM_EP_COLS                                                           \
    "id, started_at, finished_at, request, messages, outcome, model,"        \
    " adapter, verdict, corrected, verdict_at, calls, governor"

/* Merges an FTS5 table's segments so deleted rows leave no trace. */
int hx_mem_fts_optimize(hx_memory *m, const char *table, hx_err *err);
/* Deletes row id of table ("memories" or "episodes") for good, then merges
 * its FTS index (table "_fts") so no trace of the words stays; one
 * transaction. what names the row in a not-found error ("memory"). */
int hx_mem_forget_row(hx_memory *m, const char *table, const char *what, int64_t id,
                      hx_err *err);

#endif /* HX_MEMORY_INT_H */
