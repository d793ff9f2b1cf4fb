/* text.c: the memory module's text helpers: word splitting, normalisation,
 * Jaccard overlap for consolidation and the safe FTS5 query builder. */
#include "memory/memory_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_QUERY_WORDS 32
#define MAX_QUERY_WORD MEM_WORD_MAX
#define MAX_SET_WORDS 256

static int is_word_byte(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || c >= 0x80;
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

const char *hx_mem_next_word(const char *s, size_t *len)
{
    while (*s && !is_word_byte((unsigned char)*s)) s++;
    const char *w = s;
    while (*s && is_word_byte((unsigned char)*s)) s++;
    *len = (size_t)(s - w);
    return *len ? w : NULL;
}

/* Caller-buffer protocol over an hx_buf: copy out, or the negative need. */
static int buf_out(hx_buf *b, char *buf, size_t n)
{
    if (b->oom) {
        hx_buf_free(b);
        return -INT32_MAX;
    }
    size_t len = b->len;
    const char *s = b->data ? b->data : "";
    int r;
    if (len + 1 > n || len > (size_t)INT32_MAX - 1) {
        r = len > (size_t)INT32_MAX - 1 ? -INT32_MAX : -(int)(len + 1);
    } else {
        memcpy(buf, s, len + 1);
        r = (int)len;
    }
    hx_buf_free(b);
    return r;
}

static void put_lower(hx_buf *b, const char *w, size_t len)
{
    for (size_t i = 0; i < len; i++) hx_buf_putc(b, lower(w[i]));
}

int hx_mem_normalize(const char *text, char *buf, size_t n)
{
    hx_buf b;
    hx_buf_init(&b);
    size_t len;
    char *f = hx_fold(text);
    if (!f) return -INT32_MAX;
    for (const char *w = f; (w = hx_mem_next_word(w, &len)); w += len) {
        if (b.len) hx_buf_putc(&b, ' ');
        hx_buf_append(&b, w, len);
    }
    free(f);
    return buf_out(&b, buf, n);
}

/* Runs a caller-buffer text function into a new malloc'd string. */
static char *dup_via(int (*fn)(const char *, char *, size_t), const char *text)
{
    int need = fn(text, NULL, 0);
    if (need >= 0 || need == -INT32_MAX) return NULL;
    char *s = hx_malloc((size_t)-need);
    if (s && fn(text, s, (size_t)-need) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

char *hx_mem_normalize_dup(const char *text)
{
    return dup_via(hx_mem_normalize, text);
}

/* ---- word sets ---- */
typedef struct word_set {
    const char *w[MAX_SET_WORDS];
    size_t len[MAX_SET_WORDS];
    int n;
} word_set;

static int ieq(const char *a, size_t na, const char *b, size_t nb)
{
    if (na != nb) return 0;
    for (size_t i = 0; i < na; i++)
        if (lower(a[i]) != lower(b[i])) return 0;
    return 1;
}

static int set_has(const word_set *s, const char *w, size_t len)
{
    for (int i = 0; i < s->n; i++)
        if (ieq(s->w[i], s->len[i], w, len)) return 1;
    return 0;
}

static int is_stop(const char *w, size_t len);

static void set_fill(word_set *s, const char *text, int keep_stop)
{
    s->n = 0;
    size_t len;
    const char *w = text ? text : "";
    while (s->n < MAX_SET_WORDS && (w = hx_mem_next_word(w, &len))) {
        if ((keep_stop || !is_stop(w, len)) && !set_has(s, w, len)) {
            s->w[s->n] = w;
            s->len[s->n++] = len;
        }
        w += len;
    }
}

double hx_mem_jaccard(const char *a, const char *b)
{
    static _Thread_local word_set sa, sb;
    set_fill(&sa, a, 0);
    if (!sa.n) set_fill(&sa, a, 1);
    set_fill(&sb, b, 0);
    if (!sb.n) set_fill(&sb, b, 1);
    if (!sa.n && !sb.n) return 1.0;
    int inter = 0;
    for (int i = 0; i < sa.n; i++) inter += set_has(&sb, sa.w[i], sa.len[i]);
    return (double)inter / (double)(sa.n + sb.n - inter);
}

/* ---- FTS5 query ---- */
/* A function word (hx_fold_stop_word's list), in any ASCII case. */
static int is_stop(const char *w, size_t len)
{
    char low[8];
    if (len >= sizeof low) return 0;
    for (size_t i = 0; i < len; i++) low[i] = lower(w[i]);
    return hx_fold_stop_word(low, len);
}

/* Collects the query words, skipping stop words when keep_stop is 0. */
static void query_words(const char *text, int keep_stop, word_set *s)
{
    s->n = 0;
    size_t len;
    const char *w = text ? text : "";
    while (s->n < MAX_QUERY_WORDS && (w = hx_mem_next_word(w, &len))) {
        if (len <= MAX_QUERY_WORD && (keep_stop || !is_stop(w, len)) &&
            !set_has(s, w, len)) {
            s->w[s->n] = w;
            s->len[s->n++] = len;
        }
        w += len;
    }
}

int hx_mem_query_words(const char *text, char words[][MEM_WORD_MAX + 1],
                       int max)
{
    static _Thread_local word_set s;
    char *f = hx_fold(text); /* as the memories' norm is (hx_mem_normalize) */
    if (!f) return 0;
    query_words(f, 0, &s);
    if (!s.n) query_words(f, 1, &s);
    int n = s.n < max ? s.n : max;
    for (int i = 0; i < n; i++) {
        memcpy(words[i], s.w[i], s.len[i]);
        words[i][s.len[i]] = '\0';
    }
    free(f);
    return n;
}

void hx_mem_light_stem(char *w)
{
    size_t n = strlen(w);
    if (n > 5 && !strcmp(w + n - 3, "ing")) w[n - 3] = '\0';
    else if (n > 4 && !strcmp(w + n - 2, "ed")) w[n - 2] = '\0';
    else if (n > 3 && w[n - 1] == 's' && w[n - 2] != 's') w[n - 1] = '\0';
}

int hx_mem_fts_query(const char *text, char *buf, size_t n)
{
    static _Thread_local word_set s;
    query_words(text, 0, &s);
    if (!s.n) query_words(text, 1, &s);
    hx_buf b;
    hx_buf_init(&b);
    /* Words hold only [0-9A-Za-z] and bytes >= 0x80, never a quote, so
     * each quoted string is a plain FTS5 phrase. */
    for (int i = 0; i < s.n; i++) {
        if (i) hx_buf_puts(&b, " OR ");
        hx_buf_putc(&b, '"');
        put_lower(&b, s.w[i], s.len[i]);
        hx_buf_putc(&b, '"');
    }
    return buf_out(&b, buf, n);
}

char *hx_mem_fts_query_dup(const char *text)
{
    return dup_via(hx_mem_fts_query, text);
}
