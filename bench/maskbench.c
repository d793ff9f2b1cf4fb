/* maskbench.c: MaskBench for engine/grammar: every schema compiled, every
 * test instance serialized as Python's json.dumps and fed token by token.
 *
 * Usage: maskbench [--data DIR] [--vocab GGUF] [--limit N] [--every K]
 *                  [--strict] [--list] [--quiet]
 * Protocol (jsonschemabench/maskbench runner.py): instances serialized with
 * json.dumps defaults (", " and ": ", raw UTF-8), tokenized without BOS;
 * each sample times mask + bit test + commit for one token; a run stops at
 * the first disallowed token; no end check unless --strict. Each schema runs
 * in a forked child (crash isolation) with a 15 s limit. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine/engine.h"

#define TIMEOUT_S 15
#define MAX_SAMPLES (1 << 20)

/* ---- Python json.dumps from JSON text (keeps int/float distinction) ---- */
static void ws(const char **p)
{
    while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r') (*p)++;
}

static void put_cp(hx_buf *o, uint32_t c)
{
    char b[4];
    int n;
    if (c < 0x80) { b[0] = (char)c; n = 1; }
    else if (c < 0x800) { b[0] = (char)(0xC0 | c >> 6); b[1] = (char)(0x80 | (c & 63)); n = 2; }
    else if (c < 0x10000) { b[0] = (char)(0xE0 | c >> 12); b[1] = (char)(0x80 | (c >> 6 & 63)); b[2] = (char)(0x80 | (c & 63)); n = 3; }
    else { b[0] = (char)(0xF0 | c >> 18); b[1] = (char)(0x80 | (c >> 12 & 63)); b[2] = (char)(0x80 | (c >> 6 & 63)); b[3] = (char)(0x80 | (c & 63)); n = 4; }
    hx_buf_append(o, b, (size_t)n);
}

static int hex4(const char *s, uint32_t *v)
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

static int py_string(const char **p, hx_buf *o)
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

static int py_number(const char **p, hx_buf *o)
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

static int py_value(const char **p, hx_buf *o);

static int py_container(const char **p, hx_buf *o, char close)
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

static int py_value(const char **p, hx_buf *o)
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

static int read_key(const char **p, char *key, size_t n)
{
    hx_buf b;
    hx_buf_init(&b);
    int rc = py_string(p, &b);
    if (!rc) snprintf(key, n, "%.*s", b.len >= 2 ? (int)b.len - 2 : 0, b.data + 1);
    hx_buf_free(&b);
    return rc;
}

static int parse_tests(const char *text, test_case **out, int *n_out)
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

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static const hx_vocab *g_vocab;
static hx_gvocab *g_gv;
static int g_strict;

static void run_schema(const char *path, result *r, uint32_t *samples)
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
    double t0 = now_ns();
    int rc = hx_grammar_from_cjson(schema, NULL, &g, &err);
    hx_matcher *m = rc ? NULL : hx_matcher_new(g, g_gv);
    r->compile_ns = (uint32_t)fmin(now_ns() - t0, 4e9);
    if (rc || !m) {
        snprintf(r->msg, sizeof r->msg, "%s", rc ? err.msg : "out of memory");
        hx_grammar_free(g);
        goto done;
    }
    r->status = R_PASS;
    r->n_tests = nt;
    uint32_t *mask = malloc(((size_t)hx_gvocab_n_tokens(g_gv) + 31) / 32 * 4);
    int32_t *toks = malloc(sizeof(int32_t) * 65536);
    for (int i = 0; i < nt && mask && toks; i++) {
        int32_t n = hx_tokenize(g_vocab, tests[i].data, tests[i].len, toks, 65536, 0, 0);
        int ok = 1;
        hx_matcher_reset(m);
        for (int32_t k = 0; k < n; k++) {
            double a = now_ns();
            int mrc = hx_matcher_mask(m, mask);
            int allowed = !mrc && ((mask[toks[k] >> 5] >> (toks[k] & 31)) & 1);
            if (allowed) allowed = hx_matcher_accept(m, toks[k]) == HX_OK;
            double b = now_ns();
            if (r->n_samples < MAX_SAMPLES) samples[r->n_samples++] = (uint32_t)fmin(b - a, 4e9);
            if (!allowed) { ok = 0; break; }
        }
        if (ok && g_strict) ok = hx_matcher_can_end(m);
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

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Runs one schema in a child; returns 0 ok, 1 crash, 2 timeout. */
static int run_isolated(const char *path, result *r, uint32_t *samples)
{
    int fd[2];
    if (pipe(fd)) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm(TIMEOUT_S);
        run_schema(path, r, samples);
        write_all(fd[1], r, sizeof *r);
        write_all(fd[1], samples, (size_t)r->n_samples * 4);
        _exit(0);
    }
    close(fd[1]);
    int bad = pid < 0 || read_all(fd[0], r, sizeof *r) || read_all(fd[0], samples, (size_t)r->n_samples * 4);
    close(fd[0]);
    int st = 0;
    if (pid > 0) waitpid(pid, &st, 0);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) return 2;
    return bad || !WIFEXITED(st) || WEXITSTATUS(st) ? 1 : 0;
}

/* ---- driver ---- */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint32_t *v, size_t n, double p)
{
    if (!n) return 0;
    size_t i = (size_t)((double)n * p / 100.0);
    return v[i < n ? i : n - 1] / 1000.0;
}

int main(int argc, char **argv)
{
    char data[1024], vpath[1024];
    long limit = -1, every = 1;
    int list = 0, quiet = 0;
    snprintf(data, sizeof data, "%s/maskbench/data", hx_shared_data_dir());
    snprintf(vpath, sizeof vpath, "%s/vocab/ggml-vocab-llama-bpe.gguf", hx_shared_data_dir());
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) snprintf(data, sizeof data, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) snprintf(vpath, sizeof vpath, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = atol(argv[++i]);
        else if (!strcmp(argv[i], "--every") && i + 1 < argc) every = atol(argv[++i]);
        else if (!strcmp(argv[i], "--strict")) g_strict = 1;
        else if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else { fprintf(stderr, "usage: maskbench [--data DIR] [--vocab GGUF] [--limit N] [--every K] [--strict] [--list] [--quiet]\n"); return 2; }
    }
    hx_err err = {0};
    hx_gguf *gg;
    hx_vocab *v;
    if (hx_gguf_open(vpath, &gg, &err) || hx_vocab_load(gg, &v, &err)) {
        fprintf(stderr, "maskbench: %s: %s\n", vpath, err.msg);
        return 1;
    }
    hx_gguf_close(gg);
    if (hx_gvocab_from_vocab(v, &g_gv, &err)) { fprintf(stderr, "maskbench: %s\n", err.msg); return 1; }
    g_vocab = v;

    DIR *d = opendir(data);
    if (!d) { fprintf(stderr, "maskbench: cannot open %s\n", data); return 1; }
    char **files = NULL;
    size_t nf = 0, capf = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        if (nf == capf) { capf = capf ? capf * 2 : 1024; files = realloc(files, capf * sizeof *files); }
        files[nf++] = hx_strdup(e->d_name);
    }
    closedir(d);
    qsort(files, nf, sizeof *files, cmp_str);

    uint32_t *samples = malloc(MAX_SAMPLES * 4);
    size_t cap_all = 1 << 22, n_all = 0, n_comp = 0;
    uint32_t *all = malloc(cap_all * 4), *comp = malloc(nf * 4 + 4);
    long cnt[4] = {0}, crashes = 0, timeouts = 0, total = 0;
    hx_progress pr;
    size_t todo = 0;
    for (size_t i = 0; i < nf; i += (size_t)every) todo++;
    if (limit >= 0 && (size_t)limit < todo) todo = (size_t)limit;
    hx_progress_start(&pr, "maskbench", (double)todo);
    double t_start = hx_time_mono();
    for (size_t i = 0; i < nf && total < (long)todo; i += (size_t)every) {
        char path[2048];
        result r;
        snprintf(path, sizeof path, "%s/%s", data, files[i]);
        int k = run_isolated(path, &r, samples);
        total++;
        if (k == 1) { crashes++; if (!quiet) fprintf(stderr, "CRASH %s\n", files[i]); }
        else if (k == 2) { timeouts++; if (!quiet) fprintf(stderr, "TIMEOUT %s\n", files[i]); }
        else {
            cnt[r.status]++;
            if (r.status != R_COMPILE) comp[n_comp++] = r.compile_ns;
            if (list && r.status != R_PASS) printf("%s\t%s\t%s\n", r.status == 1 ? "compile" : r.status == 2 ? "validation" : "INVALIDATION", files[i], r.msg);
            if (r.status == R_INVALIDATION && !quiet) fprintf(stderr, "INVALIDATION %s: %s\n", files[i], r.msg);
            if (n_all + (size_t)r.n_samples > cap_all) {
                while (n_all + (size_t)r.n_samples > cap_all) cap_all *= 2;
                all = realloc(all, cap_all * 4);
            }
            memcpy(all + n_all, samples, (size_t)r.n_samples * 4);
            n_all += (size_t)r.n_samples;
        }
        char extra[96];
        snprintf(extra, sizeof extra, "pass %ld  inval %ld", cnt[0], cnt[3]);
        hx_progress_update(&pr, (double)total, extra);
    }
    hx_progress_finish(&pr);
    qsort(all, n_all, 4, cmp_u32);
    qsort(comp, n_comp, 4, cmp_u32);
    double sum = 0;
    for (size_t i = 0; i < n_all; i++) sum += all[i];
    printf("maskbench: %ld schemas (%s), %.1f s%s\n", total, data, hx_time_mono() - t_start, g_strict ? ", strict" : "");
    printf("  passing              %ld\n", cnt[R_PASS]);
    printf("  compile errors       %ld\n", cnt[R_COMPILE]);
    printf("  validation errors    %ld\n", cnt[R_VALIDATION]);
    printf("  invalidation errors  %ld\n", cnt[R_INVALIDATION]);
    printf("  crashes              %ld\n", crashes);
    printf("  timeouts (15 s)      %ld\n", timeouts);
    printf("  masks                %zu\n", n_all);
    printf("  mask us avg/p50/p99/p99.9/max  %.1f / %.1f / %.1f / %.1f / %.1f\n", n_all ? sum / (double)n_all / 1000.0 : 0,
           pct(all, n_all, 50), pct(all, n_all, 99), pct(all, n_all, 99.9), n_all ? all[n_all - 1] / 1000.0 : 0);
    printf("  compile us p50/p99   %.1f / %.1f\n", pct(comp, n_comp, 50), pct(comp, n_comp, 99));
    for (size_t i = 0; i < nf; i++) free(files[i]);
    free(files);
    free(samples);
    free(all);
    free(comp);
    hx_gvocab_free(g_gv);
    hx_vocab_free(v);
    return crashes || timeouts || cnt[R_INVALIDATION] ? 1 : 0;
}
