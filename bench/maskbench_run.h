/* maskbench_run.h: the MaskBench protocol shared by bench/maskbench.c and
 * tests/engine/test_maskbench_sample.c: Python json.dumps re-serialization
 * from JSON text, the benchmark file's tests, one schema's run. */
#ifndef HX_MASKBENCH_RUN_H
#define HX_MASKBENCH_RUN_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "engine/engine.h"

#define MB_FN __attribute__((unused)) static
#define MAX_SAMPLES (1 << 20)

/* ---- Python json.dumps from JSON text (keeps int/float distinction) ---- */
MB_FN void ws(const char **p)
{
    while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r') (*p)++;
}

MB_FN void put_cp(hx_buf *o, uint32_t c)
{
    char b[4];
    int n;
    if (c < 0x80) { b[0] = (char)c; n = 1; }
    else if (c < 0x800) { b[0] = (char)(0xC0 | c >> 6); b[1] = (char)(0x80 | (c & 63)); n = 2; }
    else if (c < 0x10000) { b[0] = (char)(0xE0 | c >> 12); b[1] = (char)(0x80 | (c >> 6 & 63)); b[2] = (char)(0x80 | (c & 63)); n = 3; }
    else { b[0] = (char)(0xF0 | c >> 18); b[1] = (char)(0x80 | (c >> 12 & 63)); b[2] = (char)(0x80 | (c >> 6 & 63)); b[3] = (char)(0x80 | (c & 63)); n = 4; }
    hx_buf_append(o, b, (size_t)n);
}

MB_FN int hex4(const char *s, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

MB_FN int py_string(const char **p, hx_buf *o)
{
    const char *s = *p + 1;
    hx_buf_putc(o, '"');
    while (*s && *s != '"') {
        uint32_t c;
        if (*s == '\\') {
            s++;
            switch (*s) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u':
                if (hex4(s + 1, &c)) return -1;
                s += 4;
                if (c >= 0xD800 && c < 0xDC00 && s[1] == '\\' && s[2] == 'u') {
                    uint32_t lo;
                    if (!hex4(s + 3, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                        c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                        s += 6;
                    }
                }
                break;
            default: c = (uint8_t)*s; break;
            }
            s++;
            switch (c) {
            case '"': hx_buf_puts(o, "\\\""); break;
            case '\\': hx_buf_puts(o, "\\\\"); break;
            case '\n': hx_buf_puts(o, "\\n"); break;
            case '\r': hx_buf_puts(o, "\\r"); break;
            case '\t': hx_buf_puts(o, "\\t"); break;
            case '\b': hx_buf_puts(o, "\\b"); break;
            case '\f': hx_buf_puts(o, "\\f"); break;
            default:
                if (c < 0x20) hx_buf_printf(o, "\\u%04x", c);
                else put_cp(o, c);
            }
        } else {
            uint8_t b = (uint8_t)*s++;
            if (b < 0x20) hx_buf_printf(o, "\\u%04x", b);
            else hx_buf_putc(o, (char)b);
        }
    }
    if (*s != '"') return -1;
    *p = s + 1;
    hx_buf_putc(o, '"');
    return 0;
}

MB_FN int py_number(const char **p, hx_buf *o)
{
    const char *s = *p;
    int isf = 0;
    while (strchr("+-0123456789.eE", *s) && *s) {
        if (*s == '.' || *s == 'e' || *s == 'E') isf = 1;
        s++;
    }
    if (s == *p) return -1;
    if (isf) {
        char tmp[64], out[64];
        size_t n = (size_t)(s - *p) < sizeof tmp - 1 ? (size_t)(s - *p) : sizeof tmp - 1;
        memcpy(tmp, *p, n);
        tmp[n] = 0;
        hx_py_float_repr(strtod(tmp, NULL), out, sizeof out);
        hx_buf_puts(o, out);
    } else {
        const char *d = *p;
        int neg = *d == '-';
        if (neg) d++;
        while (*d == '0' && d + 1 < s) d++; /* no leading zeros in JSON anyway */
        if (neg && !(d + 1 == s && *d == '0')) hx_buf_putc(o, '-');
        hx_buf_append(o, d, (size_t)(s - d));
    }
    *p = s;
    return 0;
}

MB_FN int py_value(const char **p, hx_buf *o);

MB_FN int py_container(const char **p, hx_buf *o, char close)
{
    int first = 1;
    hx_buf_putc(o, **p);
    (*p)++;
    for (;;) {
        ws(p);
        if (**p == close) { (*p)++; break; }
        if (!first) {
            if (**p != ',') return -1;
            (*p)++;
            ws(p);
            hx_buf_puts(o, ", ");
        }
        first = 0;
        if (close == '}') {
            if (**p != '"' || py_string(p, o)) return -1;
            ws(p);
            if (**p != ':') return -1;
            (*p)++;
            ws(p);
            hx_buf_puts(o, ": ");
        }
        if (py_value(p, o)) return -1;
    }
    hx_buf_putc(o, close);
    return 0;
}

MB_FN int py_value(const char **p, hx_buf *o)
{
    ws(p);
    switch (**p) {
    case '{': return py_container(p, o, '}');
    case '[': return py_container(p, o, ']');
    case '"': return py_string(p, o);
    case 't': if (strncmp(*p, "true", 4)) return -1; hx_buf_puts(o, "true"); *p += 4; return 0;
    case 'f': if (strncmp(*p, "false", 5)) return -1; hx_buf_puts(o, "false"); *p += 5; return 0;
    case 'n': if (strncmp(*p, "null", 4)) return -1; hx_buf_puts(o, "null"); *p += 4; return 0;
    default: return py_number(p, o);
    }
}

/* Finds the tests in the file text: fills valid[] and data[] (owned). */
typedef struct test_case {
    int valid;
    char *data;
    size_t len;
} test_case;

MB_FN int read_key(const char **p, char *key, size_t n)
{
    hx_buf b;
    hx_buf_init(&b);
    int rc = py_string(p, &b);
    if (!rc) snprintf(key, n, "%.*s", b.len >= 2 ? (int)b.len - 2 : 0, b.data + 1);
    hx_buf_free(&b);
    return rc;
}

MB_FN int parse_tests(const char *text, test_case **out, int *n_out)
{
    const char *p = text;
    hx_buf junk;
    int n = 0, cap = 0;
    test_case *t = NULL;
    hx_buf_init(&junk);
    ws(&p);
    if (*p++ != '{') return -1;
    for (;;) {
        char key[64];
        ws(&p);
        if (*p == '}') break;
        if (*p == ',') { p++; ws(&p); }
        if (*p != '"' || read_key(&p, key, sizeof key)) goto bad;
        ws(&p);
        if (*p++ != ':') goto bad;
        ws(&p);
        if (strcmp(key, "tests") || *p != '[') {
            junk.len = 0;
            if (py_value(&p, &junk)) goto bad;
            continue;
        }
        p++;
        for (;;) {
            ws(&p);
            if (*p == ']') { p++; break; }
            if (*p == ',') { p++; ws(&p); }
            if (*p++ != '{') goto bad;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                void *q = realloc(t, (size_t)cap * sizeof *t);
                if (!q) goto bad;
                t = q;
            }
            memset(&t[n], 0, sizeof t[n]);
            for (;;) {
                char k2[64];
                ws(&p);
                if (*p == '}') { p++; break; }
                if (*p == ',') { p++; ws(&p); }
                if (*p != '"' || read_key(&p, k2, sizeof k2)) goto bad;
                ws(&p);
                if (*p++ != ':') goto bad;
                hx_buf b;
                hx_buf_init(&b);
                if (py_value(&p, &b)) { hx_buf_free(&b); goto bad; }
                if (!strcmp(k2, "valid")) { t[n].valid = b.data && !strcmp(b.data, "true"); hx_buf_free(&b); }
                else if (!strcmp(k2, "data")) { free(t[n].data); t[n].data = hx_buf_steal(&b, &t[n].len); }
                else hx_buf_free(&b);
            }
            if (!t[n].data) t[n].data = hx_strdup("null"), t[n].len = 4;
            n++;
        }
    }
    hx_buf_free(&junk);
    *out = t;
    *n_out = n;
    return 0;
bad:
    hx_buf_free(&junk);
    for (int i = 0; i < n; i++) free(t[i].data);
    free(t);
    return -1;
}

/* ---- one schema, in a child ---- */
enum { R_PASS = 0, R_COMPILE = 1, R_VALIDATION = 2, R_INVALIDATION = 3 };

typedef struct result {
    int status;
    uint32_t compile_ns;
    int n_tests, n_samples;
    char msg[200];
} result;

static double now_ns(int wall)
{
    struct timespec ts;
    clock_gettime(wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct mb_ctx {
    const hx_vocab *vocab;
    hx_gvocab *gv;
    int strict; /* also require the end to be accepted */
    int wall;   /* wall-clock samples instead of thread CPU time */
} mb_ctx;

/* Compiles one benchmark file's schema and runs its tests; samples get
 * one time (ns) per token (at most MAX_SAMPLES). */
MB_FN void run_schema(const mb_ctx *cx, const char *path, result *r, uint32_t *samples)
{
    char *text = NULL;
    size_t len;
    hx_err err = {0};
    memset(r, 0, sizeof *r);
    r->status = R_COMPILE;
    if (hx_read_file(path, 0, &text, &len, &err)) { snprintf(r->msg, sizeof r->msg, "%s", err.msg); return; }
    cJSON *doc = cJSON_ParseWithLength(text, len);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(doc, "schema");
    test_case *tests = NULL;
    int nt = 0;
    if (!schema || parse_tests(text, &tests, &nt)) {
        snprintf(r->msg, sizeof r->msg, "bad benchmark file");
        goto done;
    }
    hx_grammar *g = NULL;
    double t0 = now_ns(cx->wall);
    int rc = hx_grammar_from_cjson(schema, NULL, &g, &err);
    hx_matcher *m = rc ? NULL : hx_matcher_new(g, cx->gv);
    r->compile_ns = (uint32_t)fmin(now_ns(cx->wall) - t0, 4e9);
    if (rc || !m) {
        snprintf(r->msg, sizeof r->msg, "%s", rc ? err.msg : "out of memory");
        hx_grammar_free(g);
        goto done;
    }
    r->status = R_PASS;
    r->n_tests = nt;
    uint32_t *mask = malloc(((size_t)hx_gvocab_n_tokens(cx->gv) + 31) / 32 * 4);
    int32_t *toks = malloc(sizeof(int32_t) * 65536);
    for (int i = 0; i < nt && mask && toks; i++) {
        int32_t n = hx_tokenize(cx->vocab, tests[i].data, tests[i].len, toks, 65536, 0, 0);
        int ok = 1;
        hx_matcher_reset(m);
        for (int32_t k = 0; k < n; k++) {
            double a = now_ns(cx->wall);
            int mrc = hx_matcher_mask(m, mask);
            int allowed = !mrc && ((mask[toks[k] >> 5] >> (toks[k] & 31)) & 1);
            if (allowed) allowed = hx_matcher_accept(m, toks[k]) == HX_OK;
            double b = now_ns(cx->wall);
            if (r->n_samples < MAX_SAMPLES) samples[r->n_samples++] = (uint32_t)fmin(b - a, 4e9);
            if (!allowed) { ok = 0; break; }
        }
        if (ok && cx->strict) ok = hx_matcher_can_end(m);
        if (ok && !tests[i].valid) {
            r->status = R_INVALIDATION;
            snprintf(r->msg, sizeof r->msg, "should reject test %d: %.150s", i, tests[i].data);
        } else if (!ok && tests[i].valid) {
            r->status = R_VALIDATION;
            snprintf(r->msg, sizeof r->msg, "should accept test %d: %.150s", i, tests[i].data);
        }
    }
    free(mask);
    free(toks);
    hx_matcher_free(m);
    hx_grammar_free(g);
done:
    for (int i = 0; i < nt; i++) free(tests[i].data);
    free(tests);
    cJSON_Delete(doc);
    free(text);
}


#endif /* HX_MASKBENCH_RUN_H */
