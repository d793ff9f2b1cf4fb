/* memory.h: the memory module's public API: Hearth's long-term memory in one
 * SQLite file: episodes (the nightly job's training data), memories (short
 * facts and preferences) with full-text recall, consolidation and forgetting. */
#ifndef HX_MEMORY_H
#define HX_MEMORY_H

#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

/* Schema version written to PRAGMA user_version. History:
 *   1  episodes, tool_calls, memories, FTS5 over memories and episodes
 *   2  memory expiry (memories.expires_at), verdict time
 *      (episodes.verdict_at), the episodes_full / training_episodes views
 *   3  the audit trail of tool calls
 *   4  memories' provenance (memories.provenance)
 *   5  the memories' index of their folded words (memories.norm, hx_fold)
 *   6  the governor's decisions during an episode (episodes.governor)
 * Older databases are migrated forward on open; newer ones are refused. */
#define HX_MEMORY_SCHEMA_VERSION 6
/* PRAGMA application_id of a Hearth memory database ("Hrth"). */
#define HX_MEMORY_APP_ID 0x48727468

typedef struct hx_memory hx_memory;

/* ---- opening ---- */
typedef struct hx_memory_params {
    const char *path;      /* database file; NULL = <data dir>/memory.db */
    int busy_timeout_ms;   /* default 5000 */
    int sync_full;         /* 1 (default): fsync every commit (power-loss
                              safe); 0: WAL synchronous=NORMAL (crash safe) */
    double merge_jaccard;  /* consolidation threshold, default 0.7 */
    int mode;              /* HX_MEMORY_CREATE (default), _EXISTING, _READONLY */
} hx_memory_params;

/* How hx_memory_open treats the file: CREATE makes the database and its
 * folder when absent; EXISTING and READONLY (the user's read commands:
 * nothing written, SQLITE_OPEN_READONLY) open only a database that exists
 * and fail with HX_ERR_NOTFOUND ("no such database"), creating nothing,
 * when it does not or is empty. A READONLY open of a database of an older
 * schema migrates it first (the one write it makes). */
enum { HX_MEMORY_CREATE = 0, HX_MEMORY_EXISTING = 1, HX_MEMORY_READONLY = 2 };

hx_memory_params hx_memory_default_params(void);

/* Opens (creating if absent, with its directory, unless p->mode says
 * otherwise) and migrates the database. Errors, with the file left
 * byte-for-byte untouched:
 *   HX_ERR_FORMAT       not a SQLite file, corrupt, or another program's DB
 *   HX_ERR_UNSUPPORTED  schema newer than HX_MEMORY_SCHEMA_VERSION
 *   HX_ERR_NOTFOUND     (EXISTING, READONLY) no database at the path
 * On success *out is a handle the caller closes with hx_memory_close.
 * A handle is used by one thread at a time. */
int hx_memory_open(const hx_memory_params *p, hx_memory **out, hx_err *err);
void hx_memory_close(hx_memory *m); /* NULL is a no-op */
/* The database file path (valid while m lives). */
const char *hx_memory_path(const hx_memory *m);
/* PRAGMA integrity_check; HX_ERR_FORMAT with the first problem if not ok. */
int hx_memory_check(hx_memory *m, hx_err *err);
/* Groups many writes into one transaction (bulk import, benchmarks). */
int hx_memory_begin(hx_memory *m, hx_err *err);
int hx_memory_commit(hx_memory *m, hx_err *err);

/* ---- episodes: one agent run each ---- */
typedef enum hx_verdict {
    HX_VERDICT_NONE = 0,      /* the user has not judged it (yet) */
    HX_VERDICT_ACCEPTED = 1,
    HX_VERDICT_CORRECTED = 2, /* with the corrected text */
    HX_VERDICT_REJECTED = 3,
} hx_verdict;
const char *hx_verdict_name(int verdict); /* "none", "accepted", ... */
int hx_verdict_parse(const char *name);   /* -1 if unknown */

typedef enum hx_call_status {
    HX_CALL_OK = 0,      /* the tool ran and returned a result */
    HX_CALL_ERROR = 1,   /* the tool failed; result holds the error */
    HX_CALL_DENIED = 2,  /* policy or the user refused it */
} hx_call_status;

typedef struct hx_tool_call_rec {
    char *name;       /* "calendar.find_slots" */
    char *arguments;  /* JSON object text */
    char *result;     /* JSON text of the result or error, may be NULL */
    int status;       /* hx_call_status */
    int confirmed;    /* 1 if the user confirmed it */
} hx_tool_call_rec;

/* When writing, the strings are the caller's (copied into the database);
 * when read back (hx_memory_episode_get, the training iterator) they are
 * owned by the episode. */
typedef struct hx_episode {
    int64_t id;            /* set by hx_memory_episode_add */
    int64_t started_at;    /* Unix seconds; 0 = now */
    int64_t finished_at;   /* 0 = now */
    char *request;         /* the user's request (required) */
    char *messages;        /* the full message list as a JSON array */
    char *outcome;         /* the final answer or error, may be NULL */
    char *model;           /* model identity (file name, hash), may be NULL */
    char *adapter;         /* LoRA adapter identity, may be NULL */
    int verdict;           /* hx_verdict */
    char *corrected;       /* the corrected text when CORRECTED */
    int64_t verdict_at;    /* 0 = none (or now when a verdict is given) */
    hx_tool_call_rec *calls;
    int n_calls;
    char *governor;        /* the governor's decisions during the run: a
                              JSON array of {"slice", "turn", "why",
                              "choice"}; NULL: none recorded */
} hx_episode;

/* Records a whole episode atomically (one transaction); *id_out (may be
 * NULL) receives its id. Rejects a NULL request or messages that are not a
 * JSON array with HX_ERR_INVALID. */
int hx_memory_episode_add(hx_memory *m, const hx_episode *ep,
                          int64_t *id_out, hx_err *err);
/* Sets the user's verdict (and corrected text for CORRECTED). */
int hx_memory_episode_set_verdict(hx_memory *m, int64_t id, int verdict,
                                  const char *corrected, hx_err *err);
/* Records the governor's decisions during episode id (governor: a JSON
 * array's text, as hx_episode.governor), replacing any. HX_ERR_INVALID
 * when it is not an array, HX_ERR_NOTFOUND for no such episode. */
int hx_memory_episode_set_governor(hx_memory *m, int64_t id, const char *governor,
                                   hx_err *err);
/* Reads one episode; *out is freed with hx_episode_free. */
int hx_memory_episode_get(hx_memory *m, int64_t id, hx_episode **out,
                          hx_err *err);
void hx_episode_free(hx_episode *ep); /* NULL is a no-op */
/* Deletes an episode, its tool calls and its FTS entries (memories that
 * came from it keep their text and lose the link). */
int hx_memory_episode_forget(hx_memory *m, int64_t id, hx_err *err);
int64_t hx_memory_episode_count(hx_memory *m);

/* The nightly job's selection: accepted and corrected episodes finished in
 * [since, until) (until 0 = no bound), oldest first, in one query over the
 * training_episodes view. Episodes finished at or after split_at (0 = none)
 * are passed with heldout = 1 (evaluation set), earlier ones with 0. The
 * episode is valid during the callback only; a non-zero return stops the
 * iteration and is returned. */
typedef int (*hx_episode_cb)(void *user, const hx_episode *ep, int heldout);
typedef struct hx_training_query {
    int64_t since, until, split_at;
} hx_training_query;
int hx_memory_training_episodes(hx_memory *m, const hx_training_query *q,
                                hx_episode_cb cb, void *user, hx_err *err);

/* ---- memories: short facts and preferences ---- */
/* Where a memory's words came from. A memory that is not the user's own
 * carries its taint into every later conversation that recalls it. */
typedef enum hx_mem_provenance {
    HX_MEM_USER = 0,      /* written in a conversation with no untrusted
                             content in it: the user's own words */
    HX_MEM_UNTRUSTED = 1, /* written while untrusted content (a mail, a
                             file, a tool's output) was in the
                             conversation: it may quote someone else */
    HX_MEM_UNKNOWN = 2,   /* written before provenance was kept (schema 3
                             and older): treated as untrusted; restating
                             it in the user's own conversation makes it
                             the user's */
} hx_mem_provenance;
/* "user", "untrusted", "unknown" (static). */
const char *hx_mem_provenance_name(int p);

typedef struct hx_mem_item {
    int64_t id;
    const char *kind;      /* "preference", "person", "fact", ... */
    const char *text;
    int64_t episode_id;    /* 0 = none */
    int64_t created_at, updated_at;
    int64_t expires_at;    /* 0 = never */
    int64_t last_used_at;  /* 0 = never */
    int64_t use_count;
    double score;          /* recall/search score (higher is better) */
    int provenance;        /* hx_mem_provenance */
} hx_mem_item;
/* Whether it is anything but the user's own (HX_MEM_USER). */
int hx_mem_untrusted(const hx_mem_item *it);

/* A list of memories; everything in it is owned by the list. */
typedef struct hx_mem_list {
    hx_mem_item *items;
    int n;
    hx_arena *arena; /* internal */
} hx_mem_list;
void hx_mem_list_free(hx_mem_list *l); /* NULL is a no-op */

typedef struct hx_mem_new {
    const char *kind;      /* required, e.g. "preference" */
    const char *text;      /* required, non-empty */
    int64_t episode_id;    /* 0 = none */
    int64_t expires_at;    /* 0 = never */
    int untrusted;         /* 1: written while untrusted content was in the
                              conversation (HX_MEM_UNTRUSTED) */
} hx_mem_new;

/* Remembers a fact. Consolidation: if a memory of the same kind already
 * says the same thing (equal normalised text, or a Jaccard overlap of the
 * word sets without stop words >= params.merge_jaccard) it is updated with the new
 * text instead of adding a duplicate; its provenance is then the new
 * text's. *id_out gets the id and *merged (both may be NULL) 1 if an
 * existing memory was updated. */
int hx_memory_remember(hx_memory *m, const hx_mem_new *mem, int64_t *id_out,
                       int *merged, hx_err *err);
/* Deletes a memory for good: the row, its FTS index entries (the index is
 * merged so no trace of the words stays) and, with secure_delete, the
 * freed pages' bytes. HX_ERR_NOTFOUND if there is no such memory. The
 * merge rewrites the memories' index: ~0.3 s at 100,000 memories. */
int hx_memory_forget(hx_memory *m, int64_t id, hx_err *err);
/* One memory (*out freed with hx_mem_list_free, one item). */
int hx_memory_get(hx_memory *m, int64_t id, hx_mem_list **out, hx_err *err);
/* Memories newest first, of one kind (NULL = all), at most limit (<= 0: all),
 * expired ones included only if with_expired. */
int hx_memory_list(hx_memory *m, const char *kind, int limit, int with_expired,
                   hx_mem_list **out, hx_err *err);
/* Full-text search over memories (user text; never a syntax error), best
 * first by BM25 with the recency and use boosts; expired ones left out.
 * To bound the time on large stores, the candidates are each query word's
 * newest matches (16 to 64 per word, about 320 rows in all), scored with
 * BM25 in C (plural/-ed/-ing folded; N and average length from the FTS5
 * index). A matching memory older than a frequent word's newest matches
 * is found only through the query's rarer words. */
int hx_memory_search(hx_memory *m, const char *query, int limit,
                     hx_mem_list **out, hx_err *err);
/* Full-text search over episodes' request, outcome and corrected text;
 * *ids (caller frees) gets up to limit episode ids, best first. */
int hx_memory_episode_search(hx_memory *m, const char *query, int limit,
                             int64_t **ids, int *n, hx_err *err);
int64_t hx_memory_count(hx_memory *m);

/* ---- the audit trail of tool calls ---- */
typedef struct hx_audit_row {
    int64_t at;          /* Unix seconds (hx_now) */
    const char *tool, *effect, *args, *decision, *by, *status, *detail, *sandbox;
} hx_audit_row;
/* Appends one record (strings copied; any may be NULL but tool). */
int hx_memory_audit_add(hx_memory *m, const hx_audit_row *r, hx_err *err);
/* The newest records as a JSON array text (caller frees), at most limit. */
int hx_memory_audit_json(hx_memory *m, int limit, char **out, hx_err *err);

/* ---- recall into the system prompt ---- */
/* Counts tokens of text with the engine's tokenizer. */
typedef int (*hx_count_tokens_fn)(void *user, const char *text);

typedef struct hx_recall_params {
    int budget_tokens;     /* the section never exceeds this; default 256 */
    int max_items;         /* default 16 */
    hx_count_tokens_fn count_tokens; /* NULL: about 4 bytes per token */
    void *count_user;
    int mark_used;         /* 1 (default): bump use_count of recalled ones */
    double recency_days;   /* recency boost half-life, default 30 */
} hx_recall_params;
hx_recall_params hx_recall_default_params(void);

/* The memories relevant to request, rendered as a system-prompt section
 *   "Things you remember about the user:\n- [preference #12] ...\n"
 * whose token count (header plus lines, each counted on its own) stays
 * within budget_tokens. *section (caller frees) is "" when nothing fits or
 * matches. *items (may be NULL; freed with hx_mem_list_free) gets the
 * memories rendered, best first, with their provenance: a caller putting
 * the section into a conversation treats it as untrusted content if any
 * is hx_mem_untrusted. */
int hx_memory_recall(hx_memory *m, const char *request,
                     const hx_recall_params *p, char **section,
                     hx_mem_list **items, hx_err *err);

/* ---- user ownership ---- */
/* Writes every memory and episode as one JSON document to f. */
int hx_memory_export(hx_memory *m, FILE *f, hx_err *err);
/* One memory or episode as a JSON object (malloc'd, caller frees; NULL on
 * out of memory); pretty != 0 indents it. Episode messages, tool arguments
 * and results that are JSON are embedded as JSON. */
char *hx_mem_item_to_json(const hx_mem_item *it, int pretty);
char *hx_episode_to_json(const hx_episode *ep, int pretty);
/* Deletes expired memories, merges the FTS indexes, VACUUMs and truncates
 * the WAL so that nothing forgotten remains in the files. */
int hx_memory_vacuum(hx_memory *m, hx_err *err);

/* ---- text helpers (exposed for tests and the fuzzer) ---- */
/* Builds a safe FTS5 MATCH expression from arbitrary user text: words are
 * quoted and OR-ed ("a" OR "b"), common English stop words dropped unless
 * nothing else is left, at most 32 distinct words. Caller-buffer protocol:
 * writes into buf (size n) and returns the length, or the negative size
 * needed (including the NUL). Returns 0 (empty string) if no words. */
int hx_mem_fts_query(const char *text, char *buf, size_t n);
/* Normalised text: lower-case ASCII words (bytes >= 0x80 kept) separated
 * by one space. Same protocol as hx_mem_fts_query. */
int hx_mem_normalize(const char *text, char *buf, size_t n);
/* Jaccard similarity of the normalised word sets of a and b, in [0, 1];
 * stop words are left out of a set unless it holds nothing else. */
double hx_mem_jaccard(const char *a, const char *b);

#endif /* HX_MEMORY_H */
