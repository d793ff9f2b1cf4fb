/* fold_sql.c: hx_fold inside SQLite: the SQL function hx_fold(text) for
 * substring filters, and the FTS5 tokenizer "hx_fold" for full-text
 * indexes, so that a search folds text as every other filter does. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ---- the SQL function ---- */

static void sql_fold(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *s = (const char *)sqlite3_value_text(argv[0]);
    if (!s) {
        sqlite3_result_null(cx);
        return;
    }
    hx_buf b;
    hx_buf_init(&b);
    if (hx_fold_append(&b, s, (size_t)sqlite3_value_bytes(argv[0]))) {
        hx_buf_free(&b);
        sqlite3_result_error_nomem(cx);
        return;
    }
    sqlite3_result_text(cx, b.data ? b.data : "", (int)b.len, SQLITE_TRANSIENT);
    hx_buf_free(&b);
}

/* ---- the tokenizer: unicode61, then hx_fold, then CJK as bigrams ---- */

typedef struct fold_tok {
    fts5_tokenizer parent; /* unicode61's functions */
    Fts5Tokenizer *inner;  /* its instance */
} fold_tok;

/* Called back with each of unicode61's tokens. */
typedef struct tok_cx {
    void *user;
    int (*emit)(void *, int, const char *, int, int, int);
    hx_buf folded;
    int tflags, start, end; /* of the token being split */
} tok_cx;

/* Emits one piece of a token (hx_fold_pieces): a run of a spaceless
 * script as its pairs of characters, so that a word inside the run is
 * found as a phrase of pairs. */
static int emit_piece(void *u, const char *p, size_t n)
{
    tok_cx *c = u;
    int rc = c->emit(c->user, c->tflags, p, (int)n, c->start, c->end);
    c->tflags &= ~FTS5_TOKEN_COLOCATED; /* only the first is a synonym */
    return rc;
}

static int on_token(void *ctx, int tflags, const char *t, int n, int a, int b)
{
    tok_cx *c = ctx;
    c->folded.len = 0;
    if (n <= 0) return SQLITE_OK;
    if (hx_fold_append(&c->folded, t, (size_t)n)) return SQLITE_NOMEM;
    c->tflags = tflags, c->start = a, c->end = b;
    return hx_fold_pieces(c->folded.data, c->folded.len, emit_piece, c);
}

static fts5_api *fts5_of(sqlite3 *db)
{
    fts5_api *api = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
    sqlite3_step(st);
    sqlite3_finalize(st);
    return api;
}

/* unicode61 with remove_diacritics 2 unless the arguments say otherwise. */
static int tok_create(void *user, const char **argv, int argc, Fts5Tokenizer **out)
{
    fts5_api *api = user;
    void *pu = NULL;
    fold_tok *t = hx_calloc(1, sizeof *t);
    const char **args = hx_calloc((size_t)argc + 2, sizeof *args);
    if (!t || !args) {
        free(t);
        free(args);
        return SQLITE_NOMEM;
    }
    args[0] = "remove_diacritics";
    args[1] = "2";
    if (argc > 0) memcpy(args + 2, argv, (size_t)argc * sizeof *args);
    int rc = api->xFindTokenizer(api, "unicode61", &pu, &t->parent);
    if (rc == SQLITE_OK) rc = t->parent.xCreate(pu, args, argc + 2, &t->inner);
    free(args);
    if (rc != SQLITE_OK) {
        free(t);
        return rc;
    }
    *out = (Fts5Tokenizer *)t;
    return SQLITE_OK;
}

static void tok_delete(Fts5Tokenizer *p)
{
    fold_tok *t = (fold_tok *)p;
    if (!t) return;
    t->parent.xDelete(t->inner);
    free(t);
}

static int tok_tokenize(Fts5Tokenizer *p, void *user, int flags, const char *text, int n,
                        int (*emit)(void *, int, const char *, int, int, int))
{
    fold_tok *t = (fold_tok *)p;
    tok_cx c = {user, emit, {0}, 0, 0, 0};
    hx_buf_init(&c.folded);
    int rc = t->parent.xTokenize(t->inner, &c, flags, text, n, on_token);
    hx_buf_free(&c.folded);
    return rc;
}

int hx_fold_sql_register(sqlite3 *db, hx_err *err)
{
    static fts5_tokenizer tok = {tok_create, tok_delete, tok_tokenize};
    fts5_api *api = fts5_of(db);
    if (sqlite3_create_function(db, "hx_fold", 1,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                                sql_fold, NULL, NULL) != SQLITE_OK ||
        !api || api->iVersion < 2 ||
        api->xCreateTokenizer(api, "hx_fold", api, &tok, NULL) != SQLITE_OK)
        return hx_err_set(err, HX_ERR_IO, "cannot register the text folding with SQLite: %s",
                          sqlite3_errmsg(db));
    return HX_OK;
}
