/* chatdata.c: chat JSONL -> rendered conversations -> tokens with the
 * assistant-only loss mask and document ids, cached in a binary file next
 * to the data so that a resumed training run does not tokenize again. */
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "nightly/chatdata.h"

/* ---- reading the JSONL ---- */

static int doc_from_json(const char *path, long line, const cJSON *j, int style,
                         hx_chat_doc *d, hx_err *err)
{
    *d = (hx_chat_doc){path, line, NULL, NULL, style};
    if (!cJSON_IsObject(j))
        return hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: not a JSON object", path, line);
    d->messages = cJSON_GetObjectItemCaseSensitive(j, "messages");
    d->tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
    if (!cJSON_IsArray(d->messages) || !cJSON_GetArraySize(d->messages))
        return hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: no \"messages\" array", path, line);
    for (const cJSON *m = d->messages->child; m; m = m->next)
        if (!cJSON_IsObject(m) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "role")))
            return hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: a message without a "
                              "\"role\" string", path, line);
    if (cJSON_IsNull(d->tools)) d->tools = NULL;
    if (d->tools && !cJSON_IsArray(d->tools))
        return hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: \"tools\" is not an array", path, line);
    if (style > 0) return HX_OK;
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "style"));
    d->family = s ? hx_tpl_parse_name(s) : -1;
    if (d->family <= 0)
        return hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: %s \"style\"%s%s (give --style)",
                          path, line, s ? "unknown" : "no", s ? " " : "", s ? s : "");
    return HX_OK;
}

int hx_chat_each_buf(const char *path, const char *text, size_t len, int style,
                     hx_chat_fn fn, void *user, hx_err *err)
{
    long line = 0;
    int rc = HX_OK;
    for (size_t pos = 0; !rc && pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len, n = end - pos;
        const char *s = text + pos;
        line++;
        pos = end + 1;
        while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        if (!n) continue;
        cJSON *j = cJSON_ParseWithLength(s, n);
        hx_chat_doc d;
        if (!j) rc = hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: not valid JSON", path, line);
        else if (!(rc = doc_from_json(path, line, j, style, &d, err)))
            rc = fn(user, &d, err);
        cJSON_Delete(j);
    }
    return rc;
}

int hx_chat_each(const char *path, int style, hx_chat_fn fn, void *user,
                 hx_err *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = hx_read_file(path, 0, &text, &len, err);
    if (!rc) rc = hx_chat_each_buf(path, text, len, style, fn, user, err);
    free(text);
    return rc;
}

/* ---- rendering with the assistant spans ---- */

/* Renders the first n messages (references, not copies), with the
 * template's ranges into marks if not NULL. */
static int render_first(const hx_chat_doc *d, int n, int gen, hx_buf *out,
                        hx_tpl_marks *marks)
{
    cJSON *a = cJSON_CreateArray();
    if (!a) return HX_ERR_NOMEM;
    const cJSON *m = d->messages->child;
    for (int i = 0; i < n && m; i++, m = m->next)
        cJSON_AddItemReferenceToArray(a, (cJSON *)m);
    hx_tpl_opts o = hx_tpl_default_opts();
    o.add_generation_prompt = gen;
    int rc = hx_tpl_render_marked(d->family, a, d->tools, &o, out, marks);
    cJSON_Delete(a);
    return rc;
}

int hx_chat_is_target(const cJSON *m)
{
    const char *r = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
    return r && !strcmp(r, "assistant") &&
           !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m, "loss"));
}

/* The span of assistant message i: the end of its prompt and of itself. */
static int turn_span(const hx_chat_doc *d, int i, const hx_buf *full,
                     hx_chat_span *sp, hx_err *err)
{
    hx_buf b;
    hx_buf_init(&b);
    int rc = render_first(d, i, 1, &b, NULL);
    if (!rc && (b.len > full->len || memcmp(b.data, full->data, b.len)))
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: the prompt of message %d is "
                        "not a prefix of the conversation in style %s", d->path,
                        d->line, i, hx_tpl_name(d->family));
    sp->start = b.len;
    b.len = 0;
    if (!rc) rc = render_first(d, i + 1, 0, &b, NULL);
    if (!rc && (b.len > full->len || memcmp(b.data, full->data, b.len) ||
                b.len < sp->start))
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: message %d does not extend "
                        "the conversation in style %s", d->path, d->line, i,
                        hx_tpl_name(d->family));
    sp->end = b.len;
    hx_buf_free(&b);
    return rc == HX_ERR_NOMEM ? hx_err_set(err, rc, "out of memory") : rc;
}

/* Appends from's ranges to marks, moved by off (where from's text goes). */
static int marks_append(hx_tpl_marks *marks, const hx_tpl_marks *from, size_t off)
{
    if (marks->n + from->n > marks->cap) {
        int cap = marks->n + from->n;
        hx_span *s = hx_realloc(marks->s, (size_t)cap * sizeof *s);
        if (!s) return HX_ERR_NOMEM;
        marks->s = s;
        marks->cap = cap;
    }
    for (int k = 0; k < from->n; k++)
        marks->s[marks->n++] = (hx_span){from->s[k].start + off, from->s[k].end + off};
    return HX_OK;
}

int hx_chat_render(const hx_chat_doc *d, hx_buf *out, hx_chat_span **spans,
                   int *n_spans, hx_err *err)
{
    return hx_chat_render_marked(d, out, NULL, spans, n_spans, err);
}

int hx_chat_render_marked(const hx_chat_doc *d, hx_buf *out, hx_tpl_marks *marks,
                          hx_chat_span **spans, int *n_spans, hx_err *err)
{
    hx_buf full;
    hx_tpl_marks fm = {0};
    hx_buf_init(&full);
    int n = cJSON_GetArraySize(d->messages);
    int rc = render_first(d, n, 0, &full, marks ? &fm : NULL);
    if (!rc && marks) rc = marks_append(marks, &fm, out->len);
    hx_tpl_marks_free(&fm);
    if (rc) hx_err_set(err, rc, "%s:%ld: cannot render in style %s", d->path,
                       d->line, hx_tpl_name(d->family));
    if (!rc && spans) {
        *spans = hx_calloc((size_t)n, sizeof **spans);
        *n_spans = 0;
        if (!*spans) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        const cJSON *m = d->messages->child;
        for (int i = 0; !rc && i < n; i++, m = m->next)
            if (hx_chat_is_target(m)) rc = turn_span(d, i, &full, &(*spans)[(*n_spans)++], err);
    }
    if (!rc && hx_buf_append(out, full.data ? full.data : "", full.len))
        rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_buf_free(&full);
    return rc;
}

/* ---- tokens and mask ---- */

void hx_chat_tokens_free(hx_chat_tokens *t)
{
    if (!t) return;
    free(t->tokens);
    free(t->mask);
    free(t->doc);
    memset(t, 0, sizeof *t);
}

static int tokens_reserve(hx_chat_tokens *t, size_t extra)
{
    if (t->n + extra <= t->cap) return 0;
    size_t c = t->cap ? t->cap : 1 << 16;
    while (c < t->n + extra) c *= 2;
    int32_t *a = hx_realloc(t->tokens, c * sizeof *a);
    if (a) t->tokens = a;
    uint8_t *m = hx_realloc(t->mask, c);
    if (m) t->mask = m;
    int32_t *d = hx_realloc(t->doc, c * sizeof *d);
    if (d) t->doc = d;
    if (!a || !m || !d) return -1;
    t->cap = c;
    return 0;
}

/* The mask of token k from its byte offset; boundaries must be token starts. */
static int mask_tokens(hx_chat_tokens *t, const size_t *off, size_t n, size_t len,
                       const hx_chat_span *sp, int n_sp, hx_err *err)
{
    size_t k = 0;
    for (int s = 0; s < n_sp; s++) {
        while (k < n && off[k] < sp[s].start) t->mask[t->n + k++] = 0;
        if ((k < n ? off[k] : len) != sp[s].start) goto straddle;
        while (k < n && off[k] < sp[s].end) t->mask[t->n + k++] = 1, t->n_masked++;
        if ((k < n ? off[k] : len) != sp[s].end) goto straddle;
    }
    while (k < n) t->mask[t->n + k++] = 0;
    return HX_OK;
straddle:
    return hx_err_set(err, HX_ERR_FORMAT, "conversation %d: a token crosses the "
                      "edge of an assistant turn", t->n_docs);
}

/* The token of the n (offsets off) holding byte b. */
static size_t token_at(const size_t *off, size_t n, size_t b)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (off[mid] <= b) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Marks the value edges of the tool calls in span sp: after each
 * "<tool_call>", the JSON from its first '{' to where that closes. */
static void mark_span(hx_chat_tokens *t, const size_t *off, size_t n, const char *text,
                      hx_chat_span sp)
{
    static const char tag[] = HX_TOOL_CALL_OPEN;
    uint8_t *mask = t->mask + t->n;
    for (size_t i = sp.start; i < sp.end;) {
        const char *at = memmem(text + i, sp.end - i, tag, sizeof tag - 1);
        const char *brace = at ? memchr(at, '{', (size_t)(text + sp.end - at)) : NULL;
        if (!brace) return;
        hx_jscan js;
        memset(&js, 0, sizeof js);
        for (i = (size_t)(brace - text); i < sp.end; i++) {
            const int what = hx_jscan_byte(&js, text[i]);
            /* an empty value: its closing quote is both edges */
            const size_t b = what == HX_JSCAN_OPEN ? i + 1 : i;
            if (what == HX_JSCAN_OPEN || what == HX_JSCAN_CLOSE) {
                const size_t k = token_at(off, n, b);
                if (mask[k]) mask[k] = HX_CHAT_VALUE_EDGE;
            }
            if (js.depth == 0) break;
        }
    }
}

/* Byte offsets of the tokens in text; HX_ERR_FORMAT if they do not give
 * the text back. */
static int token_offsets(const hx_vocab *v, const int32_t *ids, int n,
                         const char *text, size_t len, size_t *off)
{
    size_t pos = 0;
    for (int k = 0; k < n; k++) {
        size_t l = 0;
        const char *p = hx_vocab_piece(v, ids[k], &l);
        /* a BOS the tokenizer added is not in the text */
        if (k == 0 && ids[0] == hx_vocab_bos(v) && hx_vocab_add_bos(v) &&
            (l > len || memcmp(text, p, l)))
            l = 0;
        off[k] = pos;
        pos += l;
    }
    return pos == len ? HX_OK : HX_ERR_FORMAT;
}

int hx_chat_tokens_add(hx_chat_tokens *t, const hx_vocab *v, const char *text,
                       size_t len, const hx_chat_span *spans, int n_spans,
                       hx_err *err)
{
    return hx_chat_tokens_add_marked(t, v, text, len, NULL, spans, n_spans, err);
}

int hx_chat_tokens_add_marked(hx_chat_tokens *t, const hx_vocab *v, const char *text,
                              size_t len, const hx_tpl_marks *marks,
                              const hx_chat_span *spans, int n_spans, hx_err *err)
{
    int32_t *ids = NULL;
    int n = hx_source_tokenize_marked(v, text, marks, &ids, err);
    if (n < 0) return -n;
    size_t *off = hx_malloc_array((size_t)n + 1, sizeof *off);
    int rc = HX_OK;
    if (!off || tokens_reserve(t, (size_t)n)) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    else if (token_offsets(v, ids, n, text, len, off))
        rc = hx_err_set(err, HX_ERR_FORMAT, "conversation %d: the tokens do not "
                        "give the text back (invalid UTF-8?)", t->n_docs);
    else rc = mask_tokens(t, off, (size_t)n, len, spans, n_spans, err);
    for (int s = 0; !rc && t->mark_values && s < n_spans; s++)
        mark_span(t, off, (size_t)n, text, spans[s]);
    if (!rc) {
        memcpy(t->tokens + t->n, ids, (size_t)n * sizeof *ids);
        for (int k = 0; k < n; k++) t->doc[t->n + k] = t->n_docs;
        t->n += (size_t)n;
        t->n_docs++;
        t->bytes += len;
    }
    free(off);
    free(ids);
    return rc;
}

/* ---- the whole file, with the cache ---- */

#define CACHE_MAGIC "HXCHTOK4" /* 3: value edges marked; 4: only the
                                  template's markers are special tokens */
typedef struct cache_hdr {
    char magic[8];
    int32_t style, family;       /* as asked, as used */
    /* the data file, the vocabulary file, and the rendering of the first
     * conversation (so that a change of the templates' code is seen) */
    char sha_data[65], sha_vocab[65], sha_tpl[65];
    char pad[5];
    uint64_t n, n_masked, bytes;
    int32_t n_docs, pad2;
} cache_hdr;

static int cache_read(const char *cpath, const cache_hdr *want, hx_chat_tokens *t,
                      int *family)
{
    char *buf = NULL;
    size_t len = 0;
    hx_err e = {0};
    if (hx_read_file(cpath, 0, &buf, &len, &e)) return -1;
    cache_hdr h;
    int ok = len >= sizeof h;
    if (ok) memcpy(&h, buf, sizeof h);
    ok = ok && !memcmp(h.magic, CACHE_MAGIC, 8) && h.style == want->style &&
         !strcmp(h.sha_data, want->sha_data) && !strcmp(h.sha_vocab, want->sha_vocab) &&
         !strcmp(h.sha_tpl, want->sha_tpl) &&
         h.n < ((uint64_t)1 << 40) && len == sizeof h + h.n * 9;
    if (ok) {
        memset(t, 0, sizeof *t);
        t->tokens = hx_malloc_array(h.n + 1, sizeof *t->tokens);
        t->mask = hx_malloc_array(h.n + 1, 1);
        t->doc = hx_malloc_array(h.n + 1, sizeof *t->doc);
        ok = t->tokens && t->mask && t->doc;
    }
    if (ok) {
        const char *p = buf + sizeof h;
        memcpy(t->tokens, p, h.n * 4);
        memcpy(t->mask, p + h.n * 4, h.n);
        memcpy(t->doc, p + h.n * 5, h.n * 4);
        t->n = t->cap = h.n;
        t->n_docs = h.n_docs;
        t->n_masked = h.n_masked;
        t->bytes = h.bytes;
        t->from_cache = 1;
        *family = h.family;
    } else if (t->tokens || t->mask || t->doc) {
        hx_chat_tokens_free(t);
    }
    free(buf);
    return ok ? 0 : -1;
}

static void cache_write(const char *cpath, cache_hdr *h, const hx_chat_tokens *t)
{
    hx_buf b;
    hx_buf_init(&b);
    h->n = t->n;
    h->n_masked = t->n_masked;
    h->bytes = t->bytes;
    h->n_docs = t->n_docs;
    hx_buf_append(&b, h, sizeof *h);
    hx_buf_append(&b, t->tokens, t->n * 4);
    hx_buf_append(&b, t->mask, t->n);
    hx_buf_append(&b, t->doc, t->n * 4);
    hx_err e = {0};
    if (b.oom) hx_log_warn("chat data: no memory to write the cache %s", cpath);
    else if (hx_write_file_atomic(cpath, b.data, b.len, &e))
        hx_log_warn("chat data: cannot write the cache %s: %s", cpath, e.msg);
    hx_buf_free(&b);
}

typedef struct load_ctx {
    const hx_vocab *v;
    hx_chat_tokens *t;
    int family;
    hx_progress pr;
    hx_buf text;
} load_ctx;

static int load_one(void *user, const hx_chat_doc *d, hx_err *err)
{
    load_ctx *c = user;
    if (c->family && d->family != c->family)
        return hx_err_set(err, HX_ERR_FORMAT, "%s:%ld: style %s, but earlier "
                          "lines are %s (one style per file)", d->path, d->line,
                          hx_tpl_name(d->family), hx_tpl_name(c->family));
    c->family = d->family;
    hx_chat_span *sp = NULL;
    hx_tpl_marks marks = {0};
    int n_sp = 0;
    c->text.len = 0;
    int rc = hx_chat_render_marked(d, &c->text, &marks, &sp, &n_sp, err);
    if (!rc)
        rc = hx_chat_tokens_add_marked(c->t, c->v, c->text.data, c->text.len, &marks, sp, n_sp,
                                       err);
    hx_tpl_marks_free(&marks);
    if (rc == HX_ERR_FORMAT && !strstr(err->msg, d->path)) {
        hx_err e = *err;
        hx_err_set(err, rc, "%s:%ld: %s", d->path, d->line, e.msg);
    }
    free(sp);
    hx_progress_update(&c->pr, (double)d->line, NULL);
    return rc;
}

static long count_lines(const char *text, size_t len)
{
    long n = 1;
    for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))); p++) n++;
    return n;
}

static int load_vocab(const char *path, hx_vocab **v, hx_err *err)
{
    hx_gguf *g = NULL;
    int rc = hx_gguf_open(path, &g, err);
    if (!rc) rc = hx_vocab_load(g, v, err);
    hx_gguf_close(g);
    if (rc) {
        hx_err e = *err;
        hx_err_set(err, rc, "vocabulary %s: %s", path, e.msg);
    }
    return rc;
}

static int tokenize_file(const char *path, const char *text, size_t len, int style,
                         const char *vocab_path, int progress, hx_chat_tokens *out,
                         int *family, hx_err *err)
{
    load_ctx c;
    memset(&c, 0, sizeof c);
    hx_buf_init(&c.text);
    c.t = out;
    out->mark_values = 1;
    hx_vocab *v = NULL;
    int rc = load_vocab(vocab_path, &v, err);
    c.v = v;
    hx_progress_start(&c.pr, "tokenizing", progress ? (double)count_lines(text, len) : 1);
    c.pr.tty = c.pr.tty && progress;
    if (!rc) rc = hx_chat_each_buf(path, text, len, style, load_one, &c, err);
    hx_progress_finish(&c.pr);
    if (!rc && !out->n_docs)
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s: no conversations", path);
    *family = c.family;
    hx_buf_free(&c.text);
    hx_vocab_free(v);
    return rc;
}

/* Stops the walk at the first conversation, its rendering hashed. */
static int first_sha(void *user, const hx_chat_doc *d, hx_err *err)
{
    hx_buf b;
    hx_buf_init(&b);
    int rc = hx_chat_render(d, &b, NULL, NULL, err);
    unsigned char dg[32];
    hx_sha256 s;
    hx_sha256_init(&s);
    hx_sha256_update(&s, b.data ? b.data : "", b.len);
    hx_sha256_final(&s, dg);
    hx_sha256_hex(dg, user);
    hx_buf_free(&b);
    return rc ? rc : HX_ERR_CANCELLED;
}

/* The cache key of the data in text. */
static int cache_key(const char *path, const char *text, size_t len, int style,
                     const char *vocab_path, cache_hdr *h, hx_err *err)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CACHE_MAGIC, 8);
    h->style = style;
    unsigned char dg[32];
    hx_sha256 s;
    hx_sha256_init(&s);
    hx_sha256_update(&s, text, len);
    hx_sha256_final(&s, dg);
    hx_sha256_hex(dg, h->sha_data);
    int rc = hx_chat_each_buf(path, text, len, style, first_sha, h->sha_tpl, err);
    if (rc == HX_ERR_CANCELLED) rc = HX_OK;
    return rc ? rc : hx_sha256_file(vocab_path, NULL, h->sha_vocab, err);
}

int hx_chat_load(const char *path, int style, const char *vocab_path,
                 int progress, hx_chat_tokens *out, int *family, hx_err *err)
{
    memset(out, 0, sizeof *out);
    char cpath[4096], *text = NULL;
    size_t len = 0;
    if (snprintf(cpath, sizeof cpath, "%s.tok", path) >= (int)sizeof cpath)
        return hx_err_set(err, HX_ERR_RANGE, "%s: path too long", path);
    cache_hdr h;
    int rc = hx_read_file(path, 0, &text, &len, err);
    if (!rc) rc = cache_key(path, text, len, style, vocab_path, &h, err);
    if (!rc && cache_read(cpath, &h, out, family))
        rc = tokenize_file(path, text, len, style, vocab_path, progress, out, family, err);
    else if (!rc) {
        free(text);
        return HX_OK;
    }
    free(text);
    if (rc) {
        hx_chat_tokens_free(out);
        return rc;
    }
    h.family = *family;
    cache_write(cpath, &h, out);
    return HX_OK;
}
