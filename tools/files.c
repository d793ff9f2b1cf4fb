/* files.c: the files tools (files.list, files.read, files.search), confined
 * to the roots the user configured: each root is held as a directory
 * descriptor and every path is resolved beneath one without following a
 * link (tools/root.c); only regular files are read. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/mail_int.h"
#include "tools/tools_int.h"

#define READ_DEFAULT (64u << 10)
#define READ_MAX (1u << 20)
#define SEARCH_MAX_FILE (10u << 20)
#define LIST_MAX 500
#define MAX_DEPTH 32
#define MATCHES_PER_FILE 3

/* The configured roots that could be opened; the others' messages. */
typedef struct roots {
    const hx_root *r[HX_MAX_ROOTS];
    int n;
    cJSON *problems; /* [message], owned; NULL when every root opened */
} roots;

static void roots_done(roots *rs) { cJSON_Delete(rs->problems); }

static int load_roots(hx_tools *reg, roots *rs, hx_err *err)
{
    const hx_config *cfg = hx_tools_config(reg);
    hx_err e;
    memset(rs, 0, sizeof *rs);
    for (int i = 0; cfg && i < cfg->n_file_roots; i++) {
        const hx_root *r = hx_tools_root(reg, HX_ROOT_FILES, i, 0, &e);
        if (r) rs->r[rs->n++] = r;
        else {
            if (!rs->problems) rs->problems = cJSON_CreateArray();
            cJSON_AddItemToArray(rs->problems, cJSON_CreateString(e.msg));
        }
    }
    if (rs->n) return HX_OK;
    if (rs->problems) {
        int rc = hx_err_set(err, e.rc, "%s", e.msg); /* the last one's; all failed */
        roots_done(rs);
        return rc;
    }
    return hx_err_set(err, HX_ERR_NOTFOUND,
                      "no file roots configured (\"file_roots\" in config.json)");
}

/* Adds the roots that could not be opened to a result, if any. */
static void add_root_problems(roots *rs, cJSON *o)
{
    if (rs->problems) cJSON_AddItemToObject(o, "problems", rs->problems);
    rs->problems = NULL;
}

/* p less first components that name the root's own folder and the
 * folders above it, as the roots are listed or shown ("Documents/Projects"
 * or "home/a/Documents/Projects" for the root /home/a/Documents is
 * "Projects"; "Documents" alone is ""), or NULL when p does not start so. */
static const char *past_root_name(const hx_root *r, const char *p)
{
    const char *base = strrchr(r->path, '/');
    for (base = base ? base + 1 : r->path;; base--) {
        const size_t n = strlen(base);
        if (base == r->path || base[-1] == '/')
            if (n && !strncasecmp(p, base, n) && (!p[n] || p[n] == '/')) return p + n + (p[n] == '/');
        if (base == r->path) return NULL;
    }
}

/* Opens a path the model gave (absolute, beneath a root, relative to a
 * root, or relative to a folder holding a root: "Documents/x") with
 * flags beneath the root that holds it; its shown path (the root's path
 * joined with the rest) goes into shown. The descriptor, or minus an
 * hx_rc with a clear message for escapes and missing files. */
static int open_user_path(const roots *rs, const char *p, int flags, char *shown,
                          size_t n, hx_err *err)
{
    int fd = -HX_ERR_NOTFOUND, denied = 0;
    hx_err e = {0};
    for (int i = 0; i < rs->n * 2; i++) {
        const hx_root *r = rs->r[i % rs->n];
        const char *rel = p[0] == '/' ? (i < rs->n ? hx_root_under(r, p) : NULL)
                          : i < rs->n ? p : past_root_name(r, p);
        if (!rel) continue;
        fd = hx_root_openat(r, rel, flags, &e);
        if (fd >= 0) {
            hx_root_join(r, rel, shown, n);
            return fd;
        }
        if (fd != -HX_ERR_NOTFOUND) {
            hx_err_set(err, e.rc, "%s", e.msg);
            denied = 1;
        }
    }
    if (denied) return -err->rc;
    if (p[0] == '/' && !e.msg[0])
        return -hx_err_set(err, HX_ERR_DENIED, "'%s' is outside the folders Hearth may read", p);
    return -hx_err_set(err, HX_ERR_NOTFOUND, "'%s' does not exist", p);
}

static double arg_num(const cJSON *args, const char *name, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static void iso_mtime(time_t t, char *buf, size_t n)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int looks_binary(const char *s, size_t n)
{
    return memchr(s, '\0', n < 8192 ? n : 8192) != NULL;
}

/* ---- files.read ---- */

static int read_range(int fd, const char *shown, size_t off, size_t len, char **out,
                      size_t *got, size_t *size, hx_err *err)
{
    struct stat st;
    int rc = hx_fd_regular(fd, shown, &st, err);
    if (rc) return rc;
    *size = (size_t)st.st_size;
    char *buf = hx_malloc(len + 1);
    ssize_t n = buf ? pread(fd, buf, len, (off_t)off) : -1;
    if (n < 0) {
        free(buf);
        return hx_err_set(err, HX_ERR_IO, "%s: read failed", shown);
    }
    buf[n] = '\0';
    *out = buf;
    *got = (size_t)n;
    return HX_OK;
}

static int tool_read(hx_tools *reg, void *user, const cJSON *args,
                     cJSON **result, hx_err *err)
{
    (void)user;
    roots r;
    char shown[PATH_MAX];
    const char *p = hx_arg_str(args, "path");
    if (!p) return hx_err_set(err, HX_ERR_INVALID, "files.read needs a path");
    double off = arg_num(args, "offset", 0), len = arg_num(args, "length", READ_DEFAULT);
    if (off < 0 || len < 1) return hx_err_set(err, HX_ERR_INVALID, "offset and length must be positive");
    if (len > READ_MAX) len = READ_MAX;
    int rc = load_roots(reg, &r, err);
    if (rc) return rc;
    /* O_NONBLOCK: a FIFO or a device is refused, never waited on */
    int fd = open_user_path(&r, p, O_RDONLY | O_NONBLOCK, shown, sizeof shown, err);
    char *data = NULL;
    size_t got = 0, size = 0;
    rc = fd < 0 ? -fd : read_range(fd, shown, (size_t)off, (size_t)len, &data, &got, &size, err);
    if (fd >= 0) close(fd);
    roots_done(&r);
    if (rc) return rc;
    if (looks_binary(data, got)) {
        free(data);
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "%s is a binary file", shown);
    }
    size_t ul;
    char *text = hx_mail_to_utf8(NULL, data, got, &ul);
    free(data);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", shown);
    cJSON_AddNumberToObject(o, "size", (double)size);
    cJSON_AddNumberToObject(o, "offset", off);
    cJSON_AddStringToObject(o, "text", text ? text : "");
    if ((size_t)off + got < size) cJSON_AddBoolToObject(o, "truncated", 1);
    free(text);
    *result = o;
    return HX_OK;
}

/* ---- files.list ---- */

static const char *type_name(mode_t m)
{
    return S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "link" : S_ISREG(m) ? "file" : "other";
}

/* A listed entry; a link is shown as a link, never followed. */
static cJSON *entry_json(const char *name, const char *path, const struct stat *st)
{
    char mt[32];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "path", path);
    cJSON_AddStringToObject(e, "type", type_name(st->st_mode));
    if (S_ISLNK(st->st_mode)) cJSON_AddStringToObject(e, "note", "a link: not followed");
    cJSON_AddNumberToObject(e, "size", (double)st->st_size);
    iso_mtime(st->st_mtime, mt, sizeof mt);
    cJSON_AddStringToObject(e, "modified", mt);
    return e;
}

/* The entries of the folder open at fd (taken over), shown as shown/NAME. */
static int list_dir(int fd, const char *shown, cJSON *arr, int *truncated, hx_err *err)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return hx_err_set(err, HX_ERR_IO, "%s: %s", shown, strerror(errno));
    }
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (n >= LIST_MAX) {
            *truncated = 1;
            break;
        }
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", shown, de->d_name);
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) continue;
        cJSON_AddItemToArray(arr, entry_json(de->d_name, path, &st));
        n++;
    }
    closedir(d);
    return HX_OK;
}

static int tool_list(hx_tools *reg, void *user, const cJSON *args,
                     cJSON **result, hx_err *err)
{
    (void)user;
    roots r;
    char shown[PATH_MAX];
    int rc = load_roots(reg, &r, err);
    if (rc) return rc;
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "entries");
    int truncated = 0;
    const char *p = hx_arg_str(args, "path");
    if (p) {
        int fd = open_user_path(&r, p, O_RDONLY | O_DIRECTORY, shown, sizeof shown, err);
        rc = fd < 0 ? -fd : list_dir(fd, shown, arr, &truncated, err);
    } else {
        for (int i = 0; i < r.n; i++) {
            struct stat st;
            if (!fstat(r.r[i]->fd, &st))
                cJSON_AddItemToArray(arr, entry_json(r.r[i]->path, r.r[i]->path, &st));
        }
    }
    add_root_problems(&r, o);
    if (rc) {
        cJSON_Delete(o);
        return rc;
    }
    if (truncated) cJSON_AddBoolToObject(o, "truncated", 1);
    *result = o;
    return HX_OK;
}

/* ---- files.search ----
 * By name (words of its path, or a glob), by a regex over its lines, and
 * by content words: the files holding every word, else those holding the
 * most, ranked by BM25 over the folded text with a word of the path
 * weighing NAME_WEIGHT, each with its lines holding the most words. */

#define NAME_WEIGHT 3
#define BM25_K1 1.2
#define BM25_B 0.75

/* A file holding some of the content's words, until the walk ends. */
typedef struct hit {
    cJSON *entry;
    unsigned mask;              /* the terms it has, a bit each */
    int n_has;                  /* how many */
    int tf[HX_FOLD_MAX_TERMS];  /* each term's count, the path's weighed */
    double len;                 /* its folded text, bytes */
    double score;               /* BM25 */
} hit;

typedef struct search {
    char *glob;        /* the name as a glob ("*.pdf"), folded; or NULL */
    hx_buf words;      /* else its words (hx_fold_words), each in the path */
    size_t root_len;   /* of the shown path of the root being walked */
    pcre2_code *re;
    pcre2_match_data *md;
    size_t max_size;
    int limit, found, links, others;
    cJSON *results;
    hx_buf terms, ignored; /* the content's words (hx_fold_terms) */
    int n_terms;
    hit *hits;             /* owned, with their entries */
    int n_hits, cap_hits;
    int n_docs;            /* text files whose words were counted */
    double sum_len;
} search;

/* Line `line` (p, n bytes) as a match: its number and text, cut. */
static cJSON *line_json(int line, const char *p, size_t n)
{
    cJSON *h = cJSON_CreateObject();
    char *t = hx_mail_to_utf8(NULL, p, n > 300 ? 300 : n, NULL);
    cJSON_AddNumberToObject(h, "line", line);
    cJSON_AddStringToObject(h, "text", t ? t : "");
    free(t);
    return h;
}

/* Up to MATCHES_PER_FILE lines of data matching the regex; NULL if none. */
static cJSON *grep_data(search *s, const char *data)
{
    cJSON *hits = NULL;
    int line = 1, n = 0;
    for (const char *p = data; *p && n < MATCHES_PER_FILE;) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        if (pcre2_match(s->re, (PCRE2_SPTR)p, ll, 0, 0, s->md, NULL) >= 0) {
            if (!hits) hits = cJSON_CreateArray();
            cJSON_AddItemToArray(hits, line_json(line, p, ll));
            n++;
        }
        if (!nl) break;
        p = nl + 1;
        line++;
    }
    return hits;
}

/* The whole text file open at fd (NULL: unreadable, too large or binary). */
static char *read_text(const search *s, int fd, const char *path)
{
    char *data;
    size_t len;
    hx_err e;
    if (hx_read_fd(fd, path, s->max_size, &data, &len, &e)) return NULL;
    if (!looks_binary(data, len)) return data;
    free(data);
    return NULL;
}

/* A term is found where a word starts (so "dal" is not found in
 * "medal"); a term of a spaceless script or starting with a letter
 * beyond ASCII, anywhere. */
static int count_term(const char *f, const char *t)
{
    int n = 0;
    for (const char *p = f; (p = strstr(p, t)); p++)
        n += (unsigned char)t[0] >= 0x80 || p == f ||
             ((unsigned char)p[-1] < 0x80 && !isalnum((unsigned char)p[-1]));
    return n;
}

/* The terms the folded text f has, a bit each; tf (may be NULL) gets
 * their counts times weight added. */
static unsigned terms_in(const search *s, const char *f, int *tf, int weight)
{
    unsigned mask = 0;
    for (int i = 0; f && i < s->n_terms; i++) {
        int n = count_term(f, hx_term_at(&s->terms, i));
        if (n) mask |= 1u << i;
        if (tf) tf[i] += n * weight;
    }
    return mask;
}

/* Up to MATCHES_PER_FILE lines of data holding the most of the terms (of
 * equals, the first), in the file's order; NULL if none. */
static cJSON *word_lines(const search *s, const char *data)
{
    struct { const char *p; size_t n; int line, has; } best[MATCHES_PER_FILE];
    int k = 0, line = 1;
    for (const char *p = data; *p; line++) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        char *raw = hx_strndup(p, ll), *f = raw ? hx_fold(raw) : NULL;
        int has = __builtin_popcount(terms_in(s, f, NULL, 0)), at = k;
        free(raw);
        free(f);
        while (at > 0 && best[at - 1].has < has) at--; /* keeps best by has, then line */
        if (has && at < MATCHES_PER_FILE) {
            int move = (k < MATCHES_PER_FILE ? k : MATCHES_PER_FILE - 1) - at;
            memmove(&best[at + 1], &best[at], (size_t)move * sizeof *best);
            best[at].p = p, best[at].n = ll, best[at].line = line, best[at].has = has;
            k += k < MATCHES_PER_FILE;
        }
        if (!nl) break;
        p = nl + 1;
    }
    if (!k) return NULL;
    cJSON *a = cJSON_CreateArray();
    for (int l = 1; l <= line; l++) /* the file's order */
        for (int i = 0; i < k; i++)
            if (best[i].line == l) cJSON_AddItemToArray(a, line_json(l, best[i].p, best[i].n));
    return a;
}

static void add_hit(search *s, const hit *h)
{
    if (s->n_hits == s->cap_hits) {
        int cap = s->cap_hits ? 2 * s->cap_hits : 16;
        hit *m = realloc(s->hits, (size_t)cap * sizeof *m);
        if (!m) {
            cJSON_Delete(h->entry);
            return;
        }
        s->hits = m, s->cap_hits = cap;
    }
    s->hits[s->n_hits++] = *h;
}

/* Counts the content's words in the text file open at fd and in its path
 * beneath the root (rel); a file holding some is kept with its lines (the
 * regex's when there is one, which it must then match). */
static void consider_words(search *s, int fd, const char *path, const char *name,
                           const char *rel, const struct stat *st)
{
    char *data = read_text(s, fd, path), *f = data ? hx_fold(data) : NULL, *fp = hx_fold(rel);
    hit h = {0};
    if (f) {
        s->n_docs++;
        h.len = (double)strlen(f);
        s->sum_len += h.len;
        h.mask = terms_in(s, f, h.tf, 1) | terms_in(s, fp, h.tf, NAME_WEIGHT);
    }
    cJSON *lines = !h.mask ? NULL : s->re ? grep_data(s, data) : word_lines(s, data);
    if (h.mask && (!s->re || lines) && (h.entry = entry_json(name, path, st))) {
        h.n_has = __builtin_popcount(h.mask);
        if (lines) cJSON_AddItemToObject(h.entry, "matches", lines);
        add_hit(s, &h);
    } else {
        cJSON_Delete(lines);
    }
    free(data);
    free(f);
    free(fp);
}

/* The part of path beneath the root being walked (name for the root's
 * own files shown without it). */
static const char *rel_path(const search *s, const char *path, const char *name)
{
    return strlen(path) > s->root_len ? path + s->root_len : name;
}

/* Whether the file's name matches: a glob matches the name, folded
 * ("*übersicht*" finds "Übersicht.md"); words ("hewlett", "berlin
 * übersicht") must each be in its path beneath the root, folded. */
static int name_matches(const search *s, const char *path, const char *name)
{
    if (!s->glob && !s->words.len) return 1;
    char *f = hx_fold(s->glob ? name : rel_path(s, path, name));
    int ok = f && (s->glob ? !fnmatch(s->glob, f, 0) : hx_fold_has_terms(f, &s->words));
    free(f);
    return ok;
}

/* A regular file named name in the folder dfd (shown as path). */
static void consider_file(search *s, int dfd, const char *path, const char *name,
                          const struct stat *st)
{
    if (!name_matches(s, path, name)) return;
    if ((size_t)st->st_size > s->max_size && (s->re || s->n_terms)) return;
    cJSON *hits = NULL;
    if (s->re || s->n_terms) {
        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        hx_err e;
        char *data = NULL;
        if (fd < 0) return;
        if (!hx_fd_regular(fd, path, NULL, &e)) {
            if (s->n_terms) consider_words(s, fd, path, name, rel_path(s, path, name), st);
            else if ((data = read_text(s, fd, path))) hits = grep_data(s, data);
        }
        close(fd);
        free(data);
        if (!hits) return;
    }
    s->found++;
    if (s->found > s->limit) {
        cJSON_Delete(hits);
        return;
    }
    cJSON *e = entry_json(name, path, st);
    if (hits) cJSON_AddItemToObject(e, "matches", hits);
    cJSON_AddItemToArray(s->results, e);
}

/* Walks the folder open at fd (taken over), shown as dir: links are
 * counted and not followed, FIFOs and devices are counted and not opened. */
static void walk(search *s, int fd, const char *dir, int depth)
{
    DIR *d = depth > MAX_DEPTH ? NULL : fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue; /* hidden files and . .. */
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) continue;
        if (S_ISLNK(st.st_mode)) s->links++;
        else if (S_ISREG(st.st_mode)) consider_file(s, dirfd(d), path, de->d_name, &st);
        else if (!S_ISDIR(st.st_mode)) s->others++;
        else {
            int sub = openat(dirfd(d), de->d_name,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) walk(s, sub, path, depth + 1);
        }
    }
    closedir(d);
}

static int compile_regex(search *s, const char *regex, hx_err *err)
{
    int ec;
    PCRE2_SIZE off;
    s->re = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_CASELESS | PCRE2_MATCH_INVALID_UTF,
                          &ec, &off, NULL);
    if (!s->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return hx_err_set(err, HX_ERR_INVALID, "argument 'regex': %s at offset %zu",
                          (char *)msg, (size_t)off);
    }
    pcre2_jit_compile(s->re, PCRE2_JIT_COMPLETE);
    s->md = pcre2_match_data_create_from_pattern(s->re, NULL);
    return HX_OK;
}

/* Most words first, then the best score, then by path. */
static int by_rank(const void *pa, const void *pb)
{
    const hit *a = pa, *b = pb;
    if (a->n_has != b->n_has) return b->n_has - a->n_has;
    if (a->score != b->score) return b->score > a->score ? 1 : -1;
    return strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a->entry, "path")),
                  cJSON_GetStringValue(cJSON_GetObjectItem(b->entry, "path")));
}

/* Scores each hit by BM25 (each term's idf over the text files read). */
static void score_hits(search *s)
{
    const double avg = s->n_docs && s->sum_len > 0 ? s->sum_len / s->n_docs : 1;
    for (int t = 0; t < s->n_terms; t++) {
        int df = 0;
        for (int i = 0; i < s->n_hits; i++) df += s->hits[i].mask >> t & 1;
        const double idf = log(1 + (s->n_docs - df + 0.5) / (df + 0.5));
        for (int i = 0; i < s->n_hits; i++) {
            const double tf = s->hits[i].tf[t];
            const double norm = BM25_K1 * (1 - BM25_B + BM25_B * s->hits[i].len / avg);
            s->hits[i].score += idf * tf * (BM25_K1 + 1) / (tf + norm);
        }
    }
}

/* The files the content's words found, into the result: those with every
 * word; else those with some, best first, each with the words it has. */
static void rank_hits(search *s, cJSON *o)
{
    score_hits(s);
    if (s->n_hits) qsort(s->hits, (size_t)s->n_hits, sizeof *s->hits, by_rank); /* hits may be NULL */
    const int best = s->n_hits ? s->hits[0].n_has : 0;
    int total = 0;
    for (int i = 0; i < s->n_hits; i++) {
        cJSON *e = s->hits[i].entry;
        s->hits[i].entry = NULL;
        if ((s->hits[i].n_has < best && best == s->n_terms) || ++total > s->limit) {
            cJSON_Delete(e);
            continue;
        }
        if (best < s->n_terms)
            cJSON_AddItemToObject(e, "matched", hx_terms_json(&s->terms, s->n_terms, (int)s->hits[i].mask));
        cJSON_AddItemToArray(s->results, e);
    }
    s->found = total;
    hx_text_notes(&s->terms, s->n_terms, &s->ignored, best, total, "file", o);
}

static void search_free(search *s)
{
    pcre2_match_data_free(s->md);
    pcre2_code_free(s->re);
    free(s->glob);
    hx_buf_free(&s->words);
    hx_buf_free(&s->terms);
    hx_buf_free(&s->ignored);
    for (int i = 0; i < s->n_hits; i++) cJSON_Delete(s->hits[i].entry);
    free(s->hits);
}

/* The content's words; HX_ERR_INVALID when it holds none. */
static int set_content(search *s, const char *content, hx_err *err)
{
    if (!content) return HX_OK;
    s->n_terms = hx_fold_terms(content, &s->terms, &s->ignored);
    if (s->n_terms < 0) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!s->n_terms)
        return hx_err_set(err, HX_ERR_INVALID, "argument 'content': '%s' holds no words to "
                          "search for (a regex goes in 'regex')", content);
    return HX_OK;
}

/* What the walk left out, so that "no match" is never claimed for them. */
static void add_skipped(const search *s, cJSON *o)
{
    if (s->links) cJSON_AddNumberToObject(o, "links_not_followed", s->links);
    if (s->others)
        cJSON_AddNumberToObject(o, "special_files_skipped", s->others); /* FIFOs, devices */
}

/* A name with a glob's characters is a glob; else it is words. */
static int set_name(search *s, const char *name, hx_err *err)
{
    hx_buf_init(&s->words);
    int ok = !name || (strpbrk(name, "*?[") ? (s->glob = hx_fold(name)) != NULL
                                            : hx_fold_words(name, 0, &s->words) >= 0);
    return ok ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
}

static int tool_search(hx_tools *reg, void *user, const cJSON *args,
                       cJSON **result, hx_err *err)
{
    (void)user;
    roots r;
    search s = {.limit = (int)arg_num(args, "limit", 50),
                .max_size = (size_t)arg_num(args, "max_size", SEARCH_MAX_FILE)};
    const char *content = hx_arg_str(args, "content"), *name = hx_arg_str(args, "name");
    const char *regex = hx_arg_str(args, "regex");
    if (!name && !content && !regex)
        return hx_err_set(err, HX_ERR_INVALID,
                          "files.search needs a name, content words or a regex");
    int rc = set_name(&s, name, err);
    if (!rc) rc = set_content(&s, content, err);
    if (!rc) rc = load_roots(reg, &r, err);
    if (rc) {
        search_free(&s);
        return rc;
    }
    if (regex) rc = compile_regex(&s, regex, err);
    char shown[PATH_MAX];
    const char *under = hx_arg_str(args, "path");
    int fd = !rc && under ? open_user_path(&r, under, O_RDONLY | O_DIRECTORY, shown, sizeof shown, err) : 0;
    if (fd < 0) rc = -fd;
    cJSON *o = cJSON_CreateObject();
    s.results = cJSON_AddArrayToObject(o, "files");
    if (!rc && under) {
        s.root_len = strlen(shown);
        walk(&s, fd, shown, 0);
    }
    for (int i = 0; !rc && !under && i < r.n; i++) {
        int rfd = hx_root_dir(r.r[i], "", 0, err);
        s.root_len = strlen(r.r[i]->path);
        if (rfd >= 0) walk(&s, rfd, r.r[i]->path, 0);
    }
    if (!rc && s.n_terms) rank_hits(&s, o);
    search_free(&s);
    add_root_problems(&r, o);
    roots_done(&r);
    if (rc) {
        cJSON_Delete(o);
        return rc;
    }
    cJSON_AddNumberToObject(o, "total", s.found);
    add_skipped(&s, o);
    *result = o;
    return HX_OK;
}

/* ---- registration ---- */

static const char schema_list[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\","
    "\"description\":\"a folder inside the user's file roots; omit for the roots\"}},"
    "\"additionalProperties\":false}";
static const char schema_read[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0},"
    "\"length\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1048576}},"
    "\"required\":[\"path\"],\"additionalProperties\":false}";
static const char schema_search[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"description\":\"words of the file's name or "
    "folders, or a glob such as *.pdf\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"words the text holds: the files "
    "with all of them, else those with the most, best match first\"},"
    "\"regex\":{\"type\":\"string\",\"description\":\"a regex a line of the text must match\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"folder to search in\"},"
    "\"max_size\":{\"type\":\"integer\",\"minimum\":1},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500}},"
    "\"additionalProperties\":false}";

static const hx_tool_def file_tools[] = {
    {HX_TOOL_API_VERSION, "files.list",
     "List a folder of the user's files (name, type, size, modified).",
     schema_list, HX_EFFECT_READ, tool_list, NULL, HX_TOOL_BUILTIN | HX_TOOL_UNTRUSTED},
    {HX_TOOL_API_VERSION, "files.read",
     "Read a text file of the user's, optionally a byte range of it.",
     schema_read, HX_EFFECT_READ, tool_read, NULL, HX_TOOL_BUILTIN | HX_TOOL_UNTRUSTED},
    {HX_TOOL_API_VERSION, "files.search",
     "Find the user's files by words of their name or a glob, by words of their text (best match first) and/or by a regex over their lines.",
     schema_search, HX_EFFECT_READ, tool_search, NULL, HX_TOOL_BUILTIN | HX_TOOL_UNTRUSTED},
};

int hx_files_register_tools(hx_tools *reg, hx_err *err)
{
    return hx_tools_register_all(reg, file_tools, sizeof file_tools / sizeof file_tools[0], err);
}
