/* files.c: the files tools (files.list, files.read, files.search), confined
 * to the roots the user configured: every path is resolved (symlinks
 * included) and checked to lie inside a root before it is opened. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
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

typedef struct roots {
    char real[HX_MAX_ROOTS][PATH_MAX];
    int n;
} roots;

static int load_roots(const hx_tools *reg, roots *r, hx_err *err)
{
    const hx_config *cfg = hx_tools_config(reg);
    r->n = 0;
    for (int i = 0; cfg && i < cfg->n_file_roots; i++)
        if (realpath(cfg->file_roots[i], r->real[r->n])) r->n++;
    if (!r->n)
        return hx_err_set(err, HX_ERR_NOTFOUND,
                          "no file roots configured (\"file_roots\" in config.json)");
    return HX_OK;
}

/* Index of the root that contains the resolved path real, or -1. */
static int root_of(const roots *r, const char *real)
{
    for (int i = 0; i < r->n; i++) {
        size_t n = strlen(r->real[i]);
        if (!strncmp(real, r->real[i], n) &&
            (real[n] == '/' || real[n] == '\0' || !strcmp(r->real[i], "/")))
            return i;
    }
    return -1;
}

/* Resolves a path the model gave (absolute, or relative to a root) to a
 * real path inside a root; clear errors for escapes and missing files. */
static int resolve(const roots *r, const char *p, char *real, hx_err *err)
{
    char joined[PATH_MAX * 2];
    int exists_outside = 0;
    for (int i = 0; i < (p[0] == '/' ? 1 : r->n); i++) {
        if (p[0] == '/') snprintf(joined, sizeof joined, "%s", p);
        else snprintf(joined, sizeof joined, "%s/%s", r->real[i], p);
        if (strlen(joined) >= PATH_MAX) break;
        if (!realpath(joined, real)) continue;
        if (root_of(r, real) >= 0) return HX_OK;
        exists_outside = 1;
    }
    if (exists_outside || strstr(p, ".."))
        return hx_err_set(err, HX_ERR_DENIED,
                          "'%s' is outside the folders Hearth may read", p);
    return hx_err_set(err, HX_ERR_NOTFOUND, "'%s' does not exist", p);
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

static int read_range(const char *real, size_t off, size_t len, char **out,
                      size_t *got, size_t *size, hx_err *err)
{
    int fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return hx_err_set(err, HX_ERR_IO, "%s: %s", real, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return hx_err_set(err, HX_ERR_INVALID, "%s is not a regular file", real);
    }
    *size = (size_t)st.st_size;
    char *buf = malloc(len + 1);
    ssize_t n = buf ? pread(fd, buf, len, (off_t)off) : -1;
    close(fd);
    if (n < 0) {
        free(buf);
        return hx_err_set(err, HX_ERR_IO, "%s: read failed", real);
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
    char real[PATH_MAX];
    const char *p = hx_arg_str(args, "path");
    if (!p) return hx_err_set(err, HX_ERR_INVALID, "files.read needs a path");
    int rc = load_roots(reg, &r, err);
    if (!rc) rc = resolve(&r, p, real, err);
    if (rc) return rc;
    double off = arg_num(args, "offset", 0), len = arg_num(args, "length", READ_DEFAULT);
    if (off < 0 || len < 1) return hx_err_set(err, HX_ERR_INVALID, "offset and length must be positive");
    if (len > READ_MAX) len = READ_MAX;
    char *data = NULL;
    size_t got = 0, size = 0;
    rc = read_range(real, (size_t)off, (size_t)len, &data, &got, &size, err);
    if (rc) return rc;
    if (looks_binary(data, got)) {
        free(data);
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "%s is a binary file", real);
    }
    size_t ul;
    char *text = hx_mail_to_utf8(NULL, data, got, &ul);
    free(data);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", real);
    cJSON_AddNumberToObject(o, "size", (double)size);
    cJSON_AddNumberToObject(o, "offset", off);
    cJSON_AddStringToObject(o, "text", text ? text : "");
    if ((size_t)off + got < size) cJSON_AddBoolToObject(o, "truncated", 1);
    free(text);
    *result = o;
    return HX_OK;
}

/* ---- files.list ---- */

static cJSON *entry_json(const char *name, const char *path, const struct stat *st)
{
    char mt[32];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "path", path);
    cJSON_AddStringToObject(e, "type", S_ISDIR(st->st_mode)   ? "dir"
                                       : S_ISLNK(st->st_mode) ? "link"
                                                              : "file");
    cJSON_AddNumberToObject(e, "size", (double)st->st_size);
    iso_mtime(st->st_mtime, mt, sizeof mt);
    cJSON_AddStringToObject(e, "modified", mt);
    return e;
}

static int list_dir(const char *real, cJSON *arr, int *truncated, hx_err *err)
{
    DIR *d = opendir(real);
    if (!d) return hx_err_set(err, HX_ERR_IO, "%s: %s", real, strerror(errno));
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
        snprintf(path, sizeof path, "%s/%s", real, de->d_name);
        if (lstat(path, &st)) continue;
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
    char real[PATH_MAX];
    int rc = load_roots(reg, &r, err);
    if (rc) return rc;
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "entries");
    int truncated = 0;
    const char *p = hx_arg_str(args, "path");
    if (p) {
        rc = resolve(&r, p, real, err);
        if (!rc) rc = list_dir(real, arr, &truncated, err);
    } else {
        for (int i = 0; i < r.n; i++) {
            struct stat st;
            if (!stat(r.real[i], &st))
                cJSON_AddItemToArray(arr, entry_json(r.real[i], r.real[i], &st));
        }
    }
    if (rc) {
        cJSON_Delete(o);
        return rc;
    }
    if (truncated) cJSON_AddBoolToObject(o, "truncated", 1);
    *result = o;
    return HX_OK;
}

/* ---- files.search ---- */

typedef struct search {
    const roots *r;
    const char *glob;
    pcre2_code *re;
    pcre2_match_data *md;
    size_t max_size;
    int limit, found;
    cJSON *results;
} search;

/* Up to MATCHES_PER_FILE matching lines of a text file; NULL if none. */
static cJSON *grep_file(search *s, const char *path)
{
    char *data;
    size_t len;
    hx_err e;
    if (hx_read_file(path, s->max_size, &data, &len, &e)) return NULL;
    cJSON *hits = NULL;
    if (!looks_binary(data, len)) {
        int line = 1, n = 0;
        for (char *p = data; *p && n < MATCHES_PER_FILE;) {
            char *nl = strchr(p, '\n');
            size_t ll = nl ? (size_t)(nl - p) : strlen(p);
            if (pcre2_match(s->re, (PCRE2_SPTR)p, ll, 0, 0, s->md, NULL) >= 0) {
                if (!hits) hits = cJSON_CreateArray();
                cJSON *h = cJSON_CreateObject();
                char *t = hx_mail_to_utf8(NULL, p, ll > 300 ? 300 : ll, NULL);
                cJSON_AddNumberToObject(h, "line", line);
                cJSON_AddStringToObject(h, "text", t ? t : "");
                free(t);
                cJSON_AddItemToArray(hits, h);
                n++;
            }
            if (!nl) break;
            p = nl + 1;
            line++;
        }
    }
    free(data);
    return hits;
}

static void consider_file(search *s, const char *path, const char *name,
                          const struct stat *st)
{
    if (s->glob && fnmatch(s->glob, name, FNM_CASEFOLD)) return;
    if ((size_t)st->st_size > s->max_size && s->re) return;
    cJSON *hits = NULL;
    if (s->re && !(hits = grep_file(s, path))) return;
    s->found++;
    if (s->found > s->limit) {
        cJSON_Delete(hits);
        return;
    }
    cJSON *e = entry_json(name, path, st);
    if (hits) cJSON_AddItemToObject(e, "matches", hits);
    cJSON_AddItemToArray(s->results, e);
}

static void walk(search *s, const char *dir, int depth)
{
    if (depth > MAX_DEPTH) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue; /* hidden files and . .. */
        char path[PATH_MAX], real[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lstat(path, &st)) continue;
        if (S_ISLNK(st.st_mode)) {
            /* follow a link only where it stays inside a root */
            if (!realpath(path, real) || root_of(s->r, real) < 0 || stat(real, &st))
                continue;
            if (S_ISDIR(st.st_mode)) continue; /* no cycles through links */
        }
        if (S_ISDIR(st.st_mode)) walk(s, path, depth + 1);
        else if (S_ISREG(st.st_mode)) consider_file(s, path, de->d_name, &st);
    }
    closedir(d);
}

static int tool_search(hx_tools *reg, void *user, const cJSON *args,
                       cJSON **result, hx_err *err)
{
    (void)user;
    roots r;
    int rc = load_roots(reg, &r, err);
    if (rc) return rc;
    search s = {.r = &r, .glob = hx_arg_str(args, "name"), .limit = (int)arg_num(args, "limit", 50),
                .max_size = (size_t)arg_num(args, "max_size", SEARCH_MAX_FILE)};
    const char *content = hx_arg_str(args, "content");
    if (!s.glob && !content)
        return hx_err_set(err, HX_ERR_INVALID, "files.search needs a name pattern or a content regex");
    if (content) {
        int ec;
        PCRE2_SIZE off;
        s.re = pcre2_compile((PCRE2_SPTR)content, PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_CASELESS | PCRE2_MATCH_INVALID_UTF,
                             &ec, &off, NULL);
        if (!s.re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return hx_err_set(err, HX_ERR_INVALID, "content regex: %s at offset %zu",
                              (char *)msg, (size_t)off);
        }
        pcre2_jit_compile(s.re, PCRE2_JIT_COMPLETE);
        s.md = pcre2_match_data_create_from_pattern(s.re, NULL);
    }
    char real[PATH_MAX];
    const char *under = hx_arg_str(args, "path");
    if (under) rc = resolve(&r, under, real, err);
    cJSON *o = cJSON_CreateObject();
    s.results = cJSON_AddArrayToObject(o, "files");
    if (!rc && under) walk(&s, real, 0);
    for (int i = 0; !rc && !under && i < r.n; i++) walk(&s, r.real[i], 0);
    pcre2_match_data_free(s.md);
    pcre2_code_free(s.re);
    if (rc) {
        cJSON_Delete(o);
        return rc;
    }
    cJSON_AddNumberToObject(o, "total", s.found);
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
    "\"name\":{\"type\":\"string\",\"description\":\"file name glob, e.g. *.pdf\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"regex the text must match\"},"
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
     "Find the user's files by name pattern and/or by a regex over their text.",
     schema_search, HX_EFFECT_READ, tool_search, NULL, HX_TOOL_BUILTIN | HX_TOOL_UNTRUSTED},
};

int hx_files_register_tools(hx_tools *reg, hx_err *err)
{
    return hx_tools_register_all(reg, file_tools, sizeof file_tools / sizeof file_tools[0], err);
}
