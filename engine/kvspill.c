/* kvspill.c: the KV cache beyond its memory cap: the oldest pages go to
 * one file per context in the cache folder, and attention reads them back
 * slice by slice, checked, instead of the conversation losing them. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "engine/kvfile.h"

void (*hx_kv_spill_test_hook)(int page);
int hx_kv_spill_named;

/* The spill file is only ever read by the process that wrote it: a page
 * written with pwrite is read back through the page cache, so records are
 * not fsynced (that would only wear the flash; nothing reads the file after
 * a crash: an unnamed file vanishes with its process, and a named one left
 * by a killed run is swept unread by the next). Every read is checked
 * against the sums kept in memory, so a damaged or stale record is never
 * used. */
struct hx_kv_spill {
    int fd;             /* the file, -1 until the first spill */
    int dirfd;          /* its folder while a named file exists, else -1 */
    char name[64];      /* a named file's name in the folder; "" unnamed */
    char dir[4096];     /* the folder */
    hx_kvf_geo geo;
    off_t base;         /* offset of record 0 */
    int n_all;          /* pages of n_ctx */
    uint8_t *on_disk;   /* (n_all) 1: page p is in the file, not in memory */
    uint64_t *sums;     /* (n_all, n_slices) slice sums of the pages written */
    uint64_t *tmp_sums; /* (n_slices) a record's sums read back */
    char *buf;          /* (n_threads, 2 slices) attention's reads */
    int damaged;        /* first page an attention read found damaged, or -1 */
    uint64_t writes, page_ins, reads, read_bytes;
};

static const char *spill_dir(const hx_ctx_params *p, char *buf, size_t n)
{
    if (p->kv_spill_dir) return p->kv_spill_dir;
    char base[3800];
    if (hx_path_cache(base, sizeof base) < 0) return NULL;
    snprintf(buf, n, "%s/spill", base);
    return buf;
}

size_t hx_kv_spill_scratch(const hx_hparams *hp, const hx_ctx_params *p,
                           int n_ctx, int n_threads)
{
    if (!p->kv_spill) return 0;
    size_t page, per_token;
    hx_kv_geometry(hp, p, &per_token, &page);
    const size_t slices = 2 * (size_t)hp->n_layer * (size_t)hp->n_head_kv;
    const size_t n_all = ((size_t)n_ctx + HX_KV_PAGE - 1) / HX_KV_PAGE;
    return (size_t)n_threads * 2 * (page / slices) + n_all * (1 + 8 * slices) + 8 * slices;
}

int hx_kv_spill_new(hx_ctx *c, const hx_ctx_params *p, hx_err *err)
{
    if (c->max_pages < 2)
        return hx_err_set(err, HX_ERR_RANGE, "a KV cache that spills needs room for two "
                          "pages in memory (%zu bytes); the cap allows %d",
                          2 * c->page_bytes, c->max_pages);
    const int nb = (c->max_pages - 1) * HX_KV_PAGE;
    if (c->n_batch > nb) c->n_batch = nb; /* a pass's pages fit in memory */
    struct hx_kv_spill *s = hx_calloc(1, sizeof *s);
    if (!s) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    c->spill = s;
    s->fd = s->dirfd = -1;
    s->damaged = -1;
    hx_kvf_geometry(c, &s->geo);
    s->n_all = (c->n_ctx + HX_KV_PAGE - 1) / HX_KV_PAGE;
    char buf[4096];
    const char *dir = spill_dir(p, buf, sizeof buf);
    if (!dir || snprintf(s->dir, sizeof s->dir, "%s", dir) >= (int)sizeof s->dir)
        s->dir[0] = '\0'; /* the first spill says so; the cache is full then */
    s->on_disk = hx_calloc((size_t)s->n_all, 1);
    s->tmp_sums = hx_calloc((size_t)s->geo.n_slices, 8);
    s->buf = hx_huge_alloc((size_t)c->n_threads * 2, s->geo.slice_bytes);
    if (!s->on_disk || !s->tmp_sums || !s->buf)
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    return HX_OK;
}

void hx_kv_spill_free(hx_ctx *c)
{
    struct hx_kv_spill *s = c->spill;
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    if (s->name[0]) unlinkat(s->dirfd, s->name, 0);
    if (s->dirfd >= 0) close(s->dirfd);
    free(s->on_disk);
    free(s->sums);
    free(s->tmp_sums);
    free(s->buf);
    free(s);
    c->spill = NULL;
}

/* ---- the file ---- */

/* A named file in dfd (where the file system has no O_TMPFILE), locked. */
static int create_named(struct hx_kv_spill *s, int dfd)
{
    for (int tries = 0; tries < 16; tries++) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r ^= (uint32_t)tries * 2654435761u;
        snprintf(s->name, sizeof s->name, "%d-%08x.kvs", (int)getpid(), r);
        int fd = hx_kvf_create(dfd, s->name);
        if (fd >= 0) return fd;
        if (errno != EEXIST && errno != EWOULDBLOCK) break;
    }
    s->name[0] = '\0';
    return -1;
}

/* The spill file: unnamed (O_TMPFILE, gone with the process) or, where
 * the file system cannot, named and locked; its header written and
 * synced. Leftovers of killed runs are swept first. */
static int open_file(hx_ctx *c)
{
    struct hx_kv_spill *s = c->spill;
    hx_err e = {0};
    if (!s->dir[0])
        return hx_err_set(&c->err, HX_ERR_FULL, "KV cache full, and no folder to spill it "
                          "to: the cache folder's path is too long");
    int dfd = hx_kvf_open_dir(s->dir, &e), fd = -1;
    if (dfd < 0)
        return hx_err_set(&c->err, HX_ERR_FULL, "KV cache full, and no folder to spill "
                          "it to: %s", e.msg);
    hx_kvf_sweep(dfd, ".kvs");
    if (!hx_kv_spill_named)
        fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fd = create_named(s, dfd);
    hx_kvf_header h;
    hx_kvf_header_make(c, HX_KVF_SPILL, 0, s->n_all, &h);
    hx_kvf_header_seal(&h, NULL);
    if (fd < 0 || pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || fsync(fd)) {
        int err = errno;
        if (fd >= 0) close(fd);
        if (s->name[0]) unlinkat(dfd, s->name, 0);
        close(dfd);
        s->name[0] = '\0';
        return hx_err_set(&c->err, HX_ERR_FULL, "KV cache full, and no spill file could "
                          "be made in %s: %s", s->dir, strerror(err));
    }
    s->fd = fd;
    if (s->name[0]) s->dirfd = dfd;
    else close(dfd);
    s->base = hx_kvf_records_at(0);
    return HX_OK;
}

static off_t rec_at(const struct hx_kv_spill *s, int p)
{
    return s->base + (off_t)p * (off_t)s->geo.stride;
}

/* Writes resident page p (full) to its record. */
static int spill_page(hx_ctx *c, int p)
{
    struct hx_kv_spill *s = c->spill;
    int rc = s->fd < 0 ? open_file(c) : HX_OK;
    if (!rc && !s->sums &&
        !(s->sums = hx_calloc((size_t)s->n_all * (size_t)s->geo.n_slices, 8)))
        rc = hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory");
    if (rc) return rc;
    uint64_t *sum = s->sums + (size_t)p * (size_t)s->geo.n_slices;
    int bad = hx_kvf_put_data(c, s->fd, rec_at(s, p), c->pages[p], sum);
    if (!bad && hx_kv_spill_test_hook) hx_kv_spill_test_hook(p);
    bad = bad || hx_kvf_put_head(c, s->fd, rec_at(s, p), p, HX_KV_PAGE, sum);
    if (bad)
        return hx_err_set(&c->err, HX_ERR_FULL, "KV cache full (%d pages in memory), and "
                          "a page could not be spilled to %s: %s", c->max_pages, s->dir,
                          strerror(errno));
    s->on_disk[p] = 1;
    s->writes++;
    return HX_OK;
}

/* Reads spilled page p back into buf, checked against the sums in memory. */
static int page_in(hx_ctx *c, int p, char *buf)
{
    struct hx_kv_spill *s = c->spill;
    int n_pos = 0;
    const size_t ns = (size_t)s->geo.n_slices;
    if (hx_kvf_get_page(c, s->fd, rec_at(s, p), p, buf, s->tmp_sums, &n_pos) ||
        memcmp(s->tmp_sums, s->sums + (size_t)p * ns, ns * 8)) {
        c->n_past = p * HX_KV_PAGE;
        return hx_err_set(&c->err, HX_ERR_IO, "the spilled KV page %d is damaged in %s: "
                          "positions from %d must be decoded again", p, s->dir, c->n_past);
    }
    s->page_ins++;
    return HX_OK;
}

/* A page buffer for a pass writing pages [first, need): a new one while
 * the cap allows, else a resident page past the pass (it holds no
 * position), else the oldest resident page before it, spilled first. */
static int take_buffer(hx_ctx *c, int first, int need, char **out)
{
    if (c->n_resident < c->max_pages) {
        if (!(*out = hx_huge_alloc(c->page_bytes, 1)))
            return hx_err_set(&c->err, HX_ERR_NOMEM, "out of memory for a KV page "
                              "of %zu bytes", c->page_bytes);
        c->n_resident++;
        return HX_OK;
    }
    int v = -1;
    for (int p = need; v < 0 && p < c->n_pages; p++) v = c->pages[p] ? p : -1;
    for (int p = 0; v < 0 && p < first; p++) v = c->pages[p] ? p : -1;
    if (v < 0)
        return hx_err_set(&c->err, HX_ERR_INTERNAL, "no KV page to spill (%d resident)",
                          c->n_resident);
    int rc = v < first ? spill_page(c, v) : HX_OK;
    if (rc) return rc;
    *out = c->pages[v];
    c->pages[v] = NULL;
    return HX_OK;
}

int hx_kv_spill_reserve(hx_ctx *c, int n_pos)
{
    struct hx_kv_spill *s = c->spill;
    const int first = c->n_past / HX_KV_PAGE, need = (n_pos + HX_KV_PAGE - 1) / HX_KV_PAGE;
    if (need - first > c->max_pages)
        return hx_err_set(&c->err, HX_ERR_FULL, "KV cache: a pass over positions %d..%d "
                          "needs %d pages in memory, the cap allows %d", c->n_past,
                          n_pos - 1, need - first, c->max_pages);
    for (int p = first; p < need; p++) {
        if (c->pages[p]) continue;
        char *buf = NULL;
        int rc = take_buffer(c, first, need, &buf);
        if (!rc && s->on_disk[p] && p * HX_KV_PAGE < c->n_past) rc = page_in(c, p, buf);
        if (rc) {
            if (buf) free(buf), c->n_resident--;
            return rc;
        }
        s->on_disk[p] = 0;
        c->pages[p] = buf;
        if (p >= c->n_pages) c->n_pages = p + 1;
    }
    return HX_OK;
}

/* ---- reads ---- */

static void note_damaged(struct hx_kv_spill *s, int p)
{
    int cur = __atomic_load_n(&s->damaged, __ATOMIC_RELAXED);
    while ((cur < 0 || p < cur) &&
           !__atomic_compare_exchange_n(&s->damaged, &cur, p, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {}
}

hx_kv_span hx_kv_spill_span(const hx_ctx *c, int l, int h, int p, int thread)
{
    struct hx_kv_spill *s = c->spill;
    const size_t sb = s->geo.slice_bytes;
    char *k = s->buf + (size_t)thread * 2 * sb, *v = k + sb;
    const int sk = hx_kvf_slice(c, 0, l, h), sv = hx_kvf_slice(c, 1, l, h);
    const uint64_t *sum = s->sums ? s->sums + (size_t)p * (size_t)s->geo.n_slices : NULL;
    if (!s->on_disk[p] || !sum || hx_kvf_get_slice(c, s->fd, rec_at(s, p), sk, k, sum[sk]) ||
        hx_kvf_get_slice(c, s->fd, rec_at(s, p), sv, v, sum[sv])) {
        memset(k, 0, 2 * sb); /* numbers, never garbage; the pass fails */
        note_damaged(s, p);
    }
    __atomic_fetch_add(&s->reads, 2, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->read_bytes, 2 * sb, __ATOMIC_RELAXED);
    return (hx_kv_span){k, v};
}

int hx_kv_spill_damaged(hx_ctx *c)
{
    return c->spill ? __atomic_exchange_n(&c->spill->damaged, -1, __ATOMIC_RELAXED) : -1;
}

int hx_kv_page_slice(const hx_ctx *c, int p, int sl, char *buf)
{
    const size_t sb = (size_t)HX_KV_PAGE * c->kv_row;
    if (c->pages[p]) {
        memcpy(buf, c->pages[p] + (size_t)sl * sb, sb);
        return 0;
    }
    struct hx_kv_spill *s = c->spill;
    if (!s || !s->on_disk[p] || !s->sums) return -1;
    const uint64_t sum = s->sums[(size_t)p * (size_t)s->geo.n_slices + (size_t)sl];
    return hx_kvf_get_slice(c, s->fd, rec_at(s, p), sl, buf, sum) ? -1 : 0;
}

void hx_ctx_kv_stats(const hx_ctx *c, hx_kv_stats *out)
{
    const struct hx_kv_spill *s = c->spill;
    memset(out, 0, sizeof *out);
    out->pages = (c->n_past + HX_KV_PAGE - 1) / HX_KV_PAGE;
    for (int p = 0; p < out->pages; p++) {
        out->resident += c->pages[p] != NULL;
        out->spilled += !c->pages[p] && s && s->on_disk[p];
    }
    if (!s) return;
    out->spill_writes = s->writes;
    out->page_ins = s->page_ins;
    out->slice_reads = __atomic_load_n(&s->reads, __ATOMIC_RELAXED);
    out->read_bytes = __atomic_load_n(&s->read_bytes, __ATOMIC_RELAXED);
}
