/* prefix.c: prefix caches on disk: the KV pages of a token prefix, keyed by
 * model identity, adapter set and token ids, in the page format the spill
 * shares (kvfile.h); written atomically, checked page by page, evicted
 * least recently used first. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/kvfile.h"

#define PFX_SUFFIX ".kv"
#define PFX_TMP ".kv.tmp." /* a file being written: NAME.kv.tmp.PID */
#define PFX_DEFAULT_MAX ((size_t)1 << 30)
#define PFX_MAX_TOKENS (1 << 24) /* more in a header: not a file of ours */

static int pages_of(int n) { return (n + HX_KV_PAGE - 1) / HX_KV_PAGE; }

/* ---- keys ---- */
/* The file name of a prefix: 32 hex digits of its whole key (the header
 * of this context's geometry, model identity and adapter set, and the
 * token ids). */
static void file_name(hx_ctx *c, const int32_t *tok, int n, char *out, size_t cap)
{
    hx_kvf_header h;
    unsigned char d[32];
    char hex[65];
    hx_kvf_header_make(c, HX_KVF_PREFIX, n, pages_of(n), &h);
    hx_sha256 s;
    hx_sha256_init(&s);
    hx_sha256_update(&s, &h, sizeof h);
    hx_sha256_update(&s, tok, (size_t)n * sizeof *tok);
    hx_sha256_final(&s, d);
    hx_sha256_hex(d, hex);
    snprintf(out, cap, "%.32s" PFX_SUFFIX, hex);
}

static int default_dir(const char *dir, char *out, size_t cap)
{
    if (dir) return snprintf(out, cap, "%s", dir) < (int)cap ? 0 : -1;
    char base[3800];
    if (hx_path_cache(base, sizeof base) < 0) return -1;
    return snprintf(out, cap, "%s/prefix", base) < (int)cap ? 0 : -1;
}

/* The prefix folder, opened (created); -1 with the message in c->err. */
static int open_dir(hx_ctx *c, const char *dir)
{
    char d[4096];
    if (default_dir(dir, d, sizeof d)) {
        hx_err_set(&c->err, HX_ERR_IO, "no cache folder for prefixes (path too long)");
        return -1;
    }
    hx_err e = {0};
    int fd = hx_kvf_open_dir(d, &e);
    if (fd < 0) hx_err_set(&c->err, HX_ERR_IO, "no cache folder for prefixes: %s", e.msg);
    return fd;
}

/* ---- save ---- */
/* Record p of a prefix of n positions, slice by slice (from memory or the
 * spill, checked), the rows past n zero, the header last. 0; -1 with
 * errno; -2 when a spilled page is damaged. */
static int write_page(hx_ctx *c, int fd, off_t at, int p, int n, char *buf,
                      uint64_t *sums)
{
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    const int n_pos = n - p * HX_KV_PAGE < HX_KV_PAGE ? n - p * HX_KV_PAGE : HX_KV_PAGE;
    for (int s = 0; s < g.n_slices; s++) {
        if (hx_kv_page_slice(c, p, s, buf)) return -2;
        memset(buf + (size_t)n_pos * c->kv_row, 0, (size_t)(HX_KV_PAGE - n_pos) * c->kv_row);
        if (hx_kvf_put_slice(c, fd, at, s, buf, &sums[s])) return -1;
    }
    return hx_kvf_put_head(c, fd, at, p, n_pos, sums);
}

/* The header, the token ids and every page into fd, synced. */
static int write_records(hx_ctx *c, int fd, const int32_t *tok, int n)
{
    hx_kvf_header h;
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    hx_kvf_header_make(c, HX_KVF_PREFIX, n, pages_of(n), &h);
    hx_kvf_header_seal(&h, tok);
    const size_t tb = (size_t)n * sizeof *tok;
    if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        pwrite(fd, tok, tb, (off_t)sizeof h) != (ssize_t)tb)
        return -1;
    char *buf = hx_malloc_array(1, g.slice_bytes);
    uint64_t *sums = hx_malloc_array((size_t)g.n_slices, 8);
    int rc = buf && sums ? 0 : -1;
    for (int p = 0; !rc && p < pages_of(n); p++)
        rc = write_page(c, fd, hx_kvf_records_at(n) + (off_t)p * (off_t)g.stride, p, n, buf,
                        sums);
    free(buf);
    free(sums);
    return rc ? rc : fsync(fd);
}

typedef struct pfx_file {
    char name[300];
    off_t size;
    struct timespec mtime;
} pfx_file;

static int by_age(const void *a, const void *b)
{
    const pfx_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : x->mtime.tv_nsec > y->mtime.tv_nsec;
}

static int is_cache_file(const char *name)
{
    size_t n = strlen(name), s = strlen(PFX_SUFFIX);
    return n > s && !strcmp(name + n - s, PFX_SUFFIX) && name[0] != '.';
}

/* The cache files of dirfd with their sizes and times (*n of them). */
static pfx_file *list_files(int dirfd, size_t *n, size_t *total)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    pfx_file *fs = NULL;
    size_t cap = 0;
    *n = *total = 0;
    if (!d) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    rewinddir(d);
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        if (!is_cache_file(e->d_name) || fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
            !S_ISREG(st.st_mode))
            continue;
        if (*n == cap) {
            pfx_file *g = hx_realloc(fs, (cap = cap * 2 + 16) * sizeof *fs);
            if (!g) break;
            fs = g;
        }
        snprintf(fs[*n].name, sizeof fs[*n].name, "%s", e->d_name);
        fs[*n].size = st.st_size;
        fs[(*n)++].mtime = st.st_mtim;
        *total += (size_t)st.st_size;
    }
    closedir(d);
    return fs;
}

/* Deletes the least recently used cache files until the folder holds at
 * most max bytes of them, and what killed writers left. */
static void evict(int dirfd, size_t max)
{
    size_t n, total;
    pfx_file *fs = list_files(dirfd, &n, &total);
    if (fs) qsort(fs, n, sizeof *fs, by_age);
    for (size_t i = 0; i < n && total > max; i++)
        if (!unlinkat(dirfd, fs[i].name, 0)) total -= (size_t)fs[i].size;
    free(fs);
    hx_kvf_sweep(dirfd, PFX_TMP);
}

/* Writes the prefix to a locked temporary beside name, then renames it
 * over name. HX_OK or the error (message in c->err). */
static int write_file(hx_ctx *c, int dirfd, const char *name, const int32_t *tok, int n)
{
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", name, (int)getpid());
    int fd = hx_kvf_create(dirfd, tmp), rc = fd < 0 ? -1 : write_records(c, fd, tok, n);
    int e = errno;
    if (fd >= 0 && close(fd) && !rc) rc = -1, e = errno;
    if (!rc && renameat(dirfd, tmp, dirfd, name)) rc = -1, e = errno;
    if (!rc) {
        fsync(dirfd);
        return HX_OK;
    }
    if (fd >= 0) unlinkat(dirfd, tmp, 0);
    if (rc == -2)
        return hx_err_set(&c->err, HX_ERR_IO, "cannot write the prefix cache %s: a spilled "
                          "KV page is damaged", name);
    return hx_err_set(&c->err, HX_ERR_IO, "cannot write the prefix cache %s: %s", name,
                      strerror(e));
}

int hx_ctx_prefix_save(hx_ctx *c, const char *dir, const int32_t *tokens,
                       int n, size_t max_bytes)
{
    char name[64];
    if (n <= 0 || n > c->n_past || !tokens)
        return hx_err_set(&c->err, HX_ERR_INVALID, "prefix of %d positions, %d cached",
                          n, c->n_past);
    int dirfd = open_dir(c, dir), rc = HX_OK;
    if (dirfd < 0) return HX_ERR_IO;
    file_name(c, tokens, n, name, sizeof name);
    if (utimensat(dirfd, name, NULL, AT_SYMLINK_NOFOLLOW)) { /* there: now recent */
        rc = write_file(c, dirfd, name, tokens, n);
        if (!rc) evict(dirfd, max_bytes ? max_bytes : PFX_DEFAULT_MAX);
    }
    close(dirfd);
    return rc;
}

/* ---- load ---- */
/* Whether h describes a prefix file of this context (any length). */
static int header_matches(hx_ctx *c, const hx_kvf_header *h)
{
    hx_kvf_header want, got = *h;
    hx_kvf_header_make(c, HX_KVF_PREFIX, 0, 0, &want);
    got.n_tokens = got.n_pages = 0;
    got.sum = 0;
    return !memcmp(&got, &want, sizeof want) && h->n_tokens <= PFX_MAX_TOKENS &&
           h->n_pages == (uint32_t)pages_of((int)h->n_tokens);
}

/* Tokens of file name shared with tok[0..n) if its header matches c (0 if
 * not, or not a cache file of this context). */
static int match_len(hx_ctx *c, int dirfd, const char *name, const int32_t *tok, int n)
{
    hx_kvf_header h;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), k = 0;
    if (fd < 0) return 0;
    if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && header_matches(c, &h)) {
        int m = (int)h.n_tokens < n ? (int)h.n_tokens : n;
        int32_t buf[1024];
        for (int off = 0; k == off && off < m; off += 1024) {
            int cnt = m - off < 1024 ? m - off : 1024;
            off_t at = (off_t)sizeof h + (off_t)off * 4;
            if (pread(fd, buf, (size_t)cnt * 4, at) != (ssize_t)cnt * 4) break;
            for (int i = 0; i < cnt && buf[i] == tok[off + i]; i++) k++;
        }
    }
    close(fd);
    return k;
}

/* The cache file sharing the longest prefix with tok, into best. */
static int best_file(hx_ctx *c, int dirfd, const int32_t *tok, int n, char *best,
                     size_t cap)
{
    size_t nf, total;
    pfx_file *fs = list_files(dirfd, &nf, &total);
    int k = 0;
    for (size_t i = 0; i < nf; i++) {
        int m = match_len(c, dirfd, fs[i].name, tok, n);
        if (m > k) k = m, snprintf(best, cap, "%s", fs[i].name);
    }
    free(fs);
    return k;
}

/* The header of the open file fd, checked with its token ids: 0; -1 if
 * damaged; -2 if it cannot be read. */
static int check_header(hx_ctx *c, int fd, hx_kvf_header *h)
{
    if (pread(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h) return -1;
    if (!header_matches(c, h)) return -1;
    int32_t *tok = hx_malloc_array(h->n_tokens ? h->n_tokens : 1, sizeof *tok);
    if (!tok) return -2;
    const ssize_t tb = (ssize_t)h->n_tokens * 4;
    int rc = pread(fd, tok, (size_t)tb, (off_t)sizeof *h) != tb || !hx_kvf_header_ok(h, tok)
                 ? -1 : 0;
    free(tok);
    return rc;
}

/* A load of every page at once, one task a page. */
typedef struct page_load {
    hx_ctx *c;
    int fd, use;
    off_t at;        /* the first page record */
    hx_kvf_geo g;
    uint64_t *sums;  /* n_slices per thread */
    int *rc;         /* per page: 0; -1 damaged */
} page_load;

static void load_task(void *ctx, int p, int thread)
{
    page_load *j = ctx;
    const int n = j->use - p * HX_KV_PAGE < HX_KV_PAGE ? j->use - p * HX_KV_PAGE : HX_KV_PAGE;
    int n_pos = 0, rc = hx_kvf_get_page(j->c, j->fd, j->at + (off_t)p * (off_t)j->g.stride, p,
                                        j->c->pages[p], j->sums + (size_t)thread * j->g.n_slices,
                                        &n_pos);
    j->rc[p] = !rc && n_pos < n ? -1 : rc;
}

/* copy_pages's return where every page of [0, use) fits in memory at once
 * (no spill): they are allocated first, then read and checked on the
 * context's threads (the reads and checksums of a long prefix are a large
 * part of a warm start's wait: a third for 3,883 positions of the 0.6B
 * shape). */
static int copy_all(hx_ctx *c, int fd, const hx_kvf_header *h, int use)
{
    const int np = pages_of(use), nt = hx_threadpool_n_threads(c->tp);
    page_load j = {c, fd, use, hx_kvf_records_at((int)h->n_tokens), {0}, NULL, NULL};
    hx_kvf_geometry(c, &j.g);
    c->n_past = 0;
    if (hx_kv_reserve(c, use)) return -2;
    j.sums = hx_malloc_array((size_t)nt * (size_t)j.g.n_slices, 8);
    j.rc = hx_calloc((size_t)np, sizeof *j.rc);
    int rc = j.sums && j.rc ? 0 : -2;
    if (!rc) hx_threadpool_run(c->tp, np, load_task, &j);
    for (int p = 0; !rc && p < np; p++) rc = j.rc[p];
    free(j.sums);
    free(j.rc);
    return rc;
}

/* Loads positions [0, use) of the open file fd page by page, each record
 * checked as it is read. 0; -1 if the file is damaged; -2 if the pages
 * cannot be had (the file is fine). The context's positions are left at
 * whatever was loaded (the caller sets them). */
static int copy_pages(hx_ctx *c, int fd, const hx_kvf_header *h, int use)
{
    if (pages_of(use) <= c->max_pages) return copy_all(c, fd, h, use);
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    uint64_t *sums = hx_malloc_array((size_t)g.n_slices, 8);
    int rc = sums ? 0 : -2;
    for (int p = 0; !rc && p < pages_of(use); p++) {
        const int end = (p + 1) * HX_KV_PAGE < use ? (p + 1) * HX_KV_PAGE : use;
        int n_pos = 0;
        c->n_past = p * HX_KV_PAGE; /* with a spill, earlier pages may go to disk */
        if (hx_kv_reserve(c, end)) rc = -2;
        else rc = hx_kvf_get_page(c, fd, hx_kvf_records_at((int)h->n_tokens) +
                                  (off_t)p * (off_t)g.stride, p, c->pages[p], sums, &n_pos);
        if (!rc && n_pos < end - p * HX_KV_PAGE) rc = -1;
    }
    free(sums);
    return rc;
}

static int load_file(hx_ctx *c, int dirfd, const char *name, int use)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc;
    hx_kvf_header h;
    if (fd < 0) return -2;
    rc = check_header(c, fd, &h);
    if (!rc) rc = copy_pages(c, fd, &h, use);
    close(fd);
    if (!rc) utimensat(dirfd, name, NULL, AT_SYMLINK_NOFOLLOW); /* recently used */
    return rc;
}

int hx_ctx_prefix_load(hx_ctx *c, const char *dir, const int32_t *tokens,
                       int n, int max_pos, int *n_loaded)
{
    char best[300] = "", d[4096];
    *n_loaded = 0;
    if (c->n_past != 0 || c->call.active)
        return hx_err_set(&c->err, HX_ERR_STATE, "prefix load into a context "
                          "holding %d positions%s", c->n_past,
                          c->call.active ? " and a stepped call" : "");
    if (!tokens || n <= 0 || default_dir(dir, d, sizeof d)) return HX_OK;
    int dirfd = open(d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0) return HX_OK;
    int k = best_file(c, dirfd, tokens, n, best, sizeof best);
    if (k > max_pos) k = max_pos;
    if (!c->spill && k > c->max_pages * HX_KV_PAGE) k = c->max_pages * HX_KV_PAGE;
    if (k > c->n_ctx) k = c->n_ctx;
    int rc = k > 0 ? load_file(c, dirfd, best, k) : -2;
    if (rc == -1) {
        hx_log_debug("prefix cache: %s is damaged: removed", best);
        unlinkat(dirfd, best, 0); /* its header matched: ours, damaged; the next save rewrites it */
    }
    close(dirfd);
    c->n_past = rc ? 0 : k;
    if (rc) return HX_OK;
    *n_loaded = k;
    hx_log_debug("prefix cache: %d positions from %s/%s", k, d, best);
    return HX_OK;
}
