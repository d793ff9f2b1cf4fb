/* recall.c: recalling the memories relevant to a request and rendering
 * them into a system-prompt section within a token budget. */
#include "memory/memory_int.h"

#include <string.h>

static const char recall_header[] =
    "Things you remember about the user (use them when relevant):\n";

hx_recall_params hx_recall_default_params(void)
{
    hx_recall_params p = {0};
    p.budget_tokens = 256;
    p.max_items = 16;
    p.mark_used = 1;
    p.recency_days = 30.0;
    return p;
}

/* About four bytes per token, rounded up: the fallback counter. */
static int approx_tokens(void *user, const char *text)
{
    (void)user;
    size_t n = strlen(text);
    return n > (size_t)INT32_MAX - 3 ? INT32_MAX : (int)((n + 3) / 4);
}

static void put_one_line(hx_buf *b, const char *s)
{
    for (; *s; s++) hx_buf_putc(b, (*s == '\n' || *s == '\r') ? ' ' : *s);
}

/* "- [kind #id] text\n" with line breaks inside turned into spaces. */
static int render_line(hx_buf *line, const hx_mem_item *it)
{
    line->len = 0;
    if (line->data) line->data[0] = '\0';
    hx_buf_puts(line, "- [");
    put_one_line(line, it->kind);
    hx_buf_printf(line, " #%lld] ", (long long)it->id);
    put_one_line(line, it->text);
    hx_buf_putc(line, '\n');
    return line->oom ? HX_ERR_NOMEM : HX_OK;
}

/* Appends items while the summed token counts stay within the budget;
 * returns how many fit in *n_fit. */
static int render(const hx_mem_list *l, const hx_recall_params *p,
                  hx_buf *out, int *n_fit)
{
    hx_count_tokens_fn count = p->count_tokens ? p->count_tokens
                                               : approx_tokens;
    *n_fit = 0;
    int used = count(p->count_user, recall_header);
    if (used < 0 || used > p->budget_tokens) return HX_OK;
    hx_buf line;
    hx_buf_init(&line);
    int rc = HX_OK;
    for (int i = 0; i < l->n && rc == HX_OK; i++) {
        if ((rc = render_line(&line, &l->items[i]))) break;
        int t = count(p->count_user, line.data);
        if (t < 0 || t > p->budget_tokens - used) break;
        if (*n_fit == 0) hx_buf_puts(out, recall_header);
        hx_buf_append(out, line.data, line.len);
        used += t;
        (*n_fit)++;
    }
    hx_buf_free(&line);
    return rc ? rc : (out->oom ? HX_ERR_NOMEM : HX_OK);
}

static int mark_used_tx(hx_memory *m, const hx_mem_list *l, int n,
                        hx_err *err)
{
    int rc = hx_mem_tx_begin(m, err);
    if (rc) return rc;
    sqlite3_stmt *st = hx_mem_prepare(
        m,
        "UPDATE memories SET use_count = use_count + 1, last_used_at = ?1"
        " WHERE id = ?2",
        err);
    if (!st) rc = err ? err->rc : HX_ERR_INTERNAL;
    int64_t now = hx_now(NULL);
    for (int i = 0; st && rc == HX_OK && i < n; i++) {
        sqlite3_bind_int64(st, 1, now);
        sqlite3_bind_int64(st, 2, l->items[i].id);
        if (sqlite3_step(st) != SQLITE_DONE) rc = hx_mem_sql_err(m, err, "recall");
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return hx_mem_tx_end(m, rc, err);
}

/* Use counts are bookkeeping, not the user's data: their commit skips the
 * fsync (a later synced commit makes them durable), which keeps recall
 * fast; a power cut may lose the last few bumps, never corrupt. */
static int mark_used(hx_memory *m, const hx_mem_list *l, int n, hx_err *err)
{
    if (n == 0) return HX_OK;
    int relax = m->params.sync_full && !m->in_batch;
    if (relax) hx_mem_exec(m, "PRAGMA synchronous=NORMAL", NULL);
    m->light = 1;
    int rc = mark_used_tx(m, l, n, err);
    m->light = 0;
    if (relax) hx_mem_exec(m, "PRAGMA synchronous=FULL", NULL);
    return rc;
}

int hx_memory_recall(hx_memory *m, const char *request,
                     const hx_recall_params *p, char **section,
                     hx_mem_list **items, hx_err *err)
{
    hx_recall_params dp = hx_recall_default_params();
    if (!p) p = &dp;
    *section = NULL;
    if (items) *items = NULL;
    hx_mem_list *l = NULL;
    int max = p->max_items > 0 ? p->max_items : dp.max_items;
    int rc = hx_mem_ranked(m, request ? request : "", max, p->recency_days, &l,
                           err);
    if (rc) return rc;
    hx_buf out;
    hx_buf_init(&out);
    int n_fit = 0;
    if ((rc = render(l, p, &out, &n_fit)))
        hx_err_set(err, rc, "memory: out of memory");
    if (rc == HX_OK && p->mark_used) rc = mark_used(m, l, n_fit, err);
    char *s = rc == HX_OK ? hx_buf_steal(&out, NULL) : NULL;
    if (rc == HX_OK && !s) s = hx_strdup("");
    hx_buf_free(&out);
    if (rc == HX_OK && !s) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (rc) {
        hx_mem_list_free(l);
        return rc;
    }
    l->n = n_fit;
    *section = s;
    if (items) *items = l;
    else hx_mem_list_free(l);
    return HX_OK;
}
