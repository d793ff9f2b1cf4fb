/* kvfile.c: KV pages on disk in the one format the prefix cache and the
 * spill share (kvfile.h): checksums, headers, page records, cache folders. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "engine/adapter.h"
#include "engine/kvfile.h"

/* ---- checksum ----
 * Eight lanes of one multiply and a rotation per 8 bytes (about 11 GB/s
 * on one core; attention checks every slice it reads back), combined by a
 * stronger mix. Each step is a bijection of the lane and of the word, so
 * a change to any one word always changes the sum. */
enum { SUM_LANES = 8 };

static uint64_t step(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9E3779B185EBCA87ull;
    return h << 29 | h >> 35;
}

static uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w * 0x9E3779B97F4A7C15ull;
    h = (h << 31 | h >> 33) * 0xC2B2AE3D27D4EB4Full;
    return h;
}

uint64_t hx_kvf_sum(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h[SUM_LANES], w[SUM_LANES];
    for (int i = 0; i < SUM_LANES; i++) h[i] = 0x243F6A8885A308D3ull + (uint64_t)i;
    size_t k = 0;
    for (; k + sizeof w <= n; k += sizeof w) {
        memcpy(w, p + k, sizeof w);
        for (int i = 0; i < SUM_LANES; i++) h[i] = step(h[i], w[i]);
    }
    memset(w, 0, sizeof w);
    if (n > k) memcpy(w, p + k, n - k);
    uint64_t r = (uint64_t)n;
    for (int i = 0; i < SUM_LANES; i++) r = mix(r, step(h[i], w[i]));
    return r;
}

/* ---- geometry and headers ---- */
void hx_kvf_geometry(const hx_ctx *c, hx_kvf_geo *g)
{
    const hx_hparams *hp = &c->m->hp;
    g->n_slices = 2 * hp->n_layer * hp->n_head_kv;
    g->slice_bytes = (size_t)HX_KV_PAGE * c->kv_row;
    g->rec_head = (sizeof(hx_kvf_rec) + (size_t)g->n_slices * 8 + 63) / 64 * 64;
    g->stride = g->rec_head + c->page_bytes;
}

void hx_kvf_header_make(hx_ctx *c, int kind, int n_tokens, int n_pages,
                        hx_kvf_header *h)
{
    const hx_hparams *hp = &c->m->hp;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, HX_KVF_MAGIC, 8);
    h->version = HX_KVF_VERSION;
    h->kind = (uint32_t)kind;
    h->kv_type = (uint32_t)c->kv_type;
    h->n_layer = (uint32_t)hp->n_layer;
    h->n_head_kv = (uint32_t)hp->n_head_kv;
    h->head_dim = (uint32_t)hp->head_dim;
    h->kv_row = (uint32_t)c->kv_row;
    h->page_pos = HX_KV_PAGE;
    h->n_tokens = (uint32_t)n_tokens;
    h->n_pages = (uint32_t)n_pages;
    if (!c->model_id[0]) hx_model_identity(c->m, c->model_id);
    memcpy(h->model_id, c->model_id, 64);
    memcpy(h->adapter_key, c->adapter_key, strnlen(c->adapter_key, sizeof h->adapter_key - 1));
}

static uint64_t header_sum(const hx_kvf_header *h, const int32_t *tok)
{
    uint64_t s[2] = {hx_kvf_sum(h, offsetof(hx_kvf_header, sum)),
                     hx_kvf_sum(tok, (size_t)h->n_tokens * sizeof *tok)};
    return hx_kvf_sum(s, sizeof s);
}

void hx_kvf_header_seal(hx_kvf_header *h, const int32_t *tok)
{
    h->sum = header_sum(h, tok);
}

int hx_kvf_header_ok(const hx_kvf_header *h, const int32_t *tok)
{
    return h->sum == header_sum(h, tok);
}

off_t hx_kvf_records_at(int n_tokens)
{
    return ((off_t)sizeof(hx_kvf_header) + (off_t)n_tokens * 4 + 63) / 64 * 64;
}

/* ---- page records ---- */
static int pwrite_all(int fd, const void *p, size_t n, off_t at)
{
    for (const char *q = p; n;) {
        ssize_t k = pwrite(fd, q, n, at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        q += k, n -= (size_t)k, at += k;
    }
    return 0;
}

/* 0; -1 at the end of the file (short); -2 when the read failed. */
static int pread_all(int fd, void *p, size_t n, off_t at)
{
    for (char *q = p; n;) {
        ssize_t k = pread(fd, q, n, at);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -2;
        if (k == 0) return -1;
        q += k, n -= (size_t)k, at += k;
    }
    return 0;
}

int hx_kvf_put_data(const hx_ctx *c, int fd, off_t at, const char *page,
                    uint64_t *sums)
{
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    for (int s = 0; s < g.n_slices; s++)
        sums[s] = hx_kvf_sum(page + (size_t)s * g.slice_bytes, g.slice_bytes);
    return pwrite_all(fd, page, c->page_bytes, at + (off_t)g.rec_head);
}

int hx_kvf_put_slice(const hx_ctx *c, int fd, off_t at, int s, const char *buf,
                     uint64_t *sum)
{
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    *sum = hx_kvf_sum(buf, g.slice_bytes);
    return pwrite_all(fd, buf, g.slice_bytes,
                      at + (off_t)g.rec_head + (off_t)s * (off_t)g.slice_bytes);
}

static uint64_t rec_sum(const hx_kvf_rec *r, const uint64_t *sums)
{
    uint64_t s[2] = {hx_kvf_sum(r, offsetof(hx_kvf_rec, sum)),
                     hx_kvf_sum(sums, (size_t)r->n_slices * 8)};
    return hx_kvf_sum(s, sizeof s);
}

int hx_kvf_put_head(const hx_ctx *c, int fd, off_t at, int index, int n_pos,
                    const uint64_t *sums)
{
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    hx_kvf_rec r = {{'H', 'X', 'P', 'G'}, (uint32_t)index, (uint32_t)n_pos,
                    (uint32_t)g.n_slices, 0};
    r.sum = rec_sum(&r, sums);
    struct iovec iv[2] = {{&r, sizeof r}, {(void *)sums, (size_t)g.n_slices * 8}};
    ssize_t want = (ssize_t)(iv[0].iov_len + iv[1].iov_len), k;
    do k = pwritev(fd, iv, 2, at);
    while (k < 0 && errno == EINTR);
    if (k == want) return 0;
    if (k >= 0) errno = ENOSPC;
    return -1;
}

/* Reads and checks record index's header and sums into sums. */
static int get_head(const hx_ctx *c, const hx_kvf_geo *g, int fd, off_t at,
                    int index, uint64_t *sums, int *n_pos)
{
    hx_kvf_rec r;
    int rc = pread_all(fd, &r, sizeof r, at);
    if (!rc) rc = pread_all(fd, sums, (size_t)g->n_slices * 8, at + (off_t)sizeof r);
    if (rc) return rc;
    if (memcmp(r.magic, "HXPG", 4) || r.index != (uint32_t)index ||
        r.n_slices != (uint32_t)g->n_slices || r.n_pos < 1 || r.n_pos > HX_KV_PAGE ||
        r.sum != rec_sum(&r, sums))
        return -1;
    (void)c;
    *n_pos = (int)r.n_pos;
    return 0;
}

int hx_kvf_get_page(const hx_ctx *c, int fd, off_t at, int index, char *page,
                    uint64_t *sums, int *n_pos)
{
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    uint64_t *own = sums ? sums : hx_malloc_array((size_t)g.n_slices, 8);
    int rc = own ? get_head(c, &g, fd, at, index, own, n_pos) : -2;
    if (!rc) rc = pread_all(fd, page, c->page_bytes, at + (off_t)g.rec_head);
    for (int s = 0; !rc && s < g.n_slices; s++)
        if (hx_kvf_sum(page + (size_t)s * g.slice_bytes, g.slice_bytes) != own[s]) rc = -1;
    if (own != sums) free(own);
    return rc;
}

int hx_kvf_get_slice(const hx_ctx *c, int fd, off_t at, int s, char *buf,
                     uint64_t sum)
{
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    int rc = pread_all(fd, buf, g.slice_bytes,
                       at + (off_t)g.rec_head + (off_t)s * (off_t)g.slice_bytes);
    if (!rc && hx_kvf_sum(buf, g.slice_bytes) != sum) rc = -1;
    return rc;
}

/* ---- cache folders ---- */
int hx_kvf_open_dir(const char *dir, hx_err *err)
{
    if (hx_mkdirs(dir, err)) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        hx_err_set(err, HX_ERR_IO, "%s: %s", dir, errno == ELOOP || errno == ENOTDIR
                   ? "a symbolic link or a file, not a folder" : strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) || st.st_uid != geteuid()) {
        close(fd);
        hx_err_set(err, HX_ERR_DENIED, "%s: the folder belongs to another user", dir);
        return -1;
    }
    return fd;
}

int hx_kvf_create(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB)) { /* a sweep got it first: start anew */
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Removes name if it is a regular file nobody holds locked. */
static void sweep_one(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) return;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    struct stat now;
    /* still the file looked at, and its writer gone: the lock is free */
    if (!fstat(fd, &now) && now.st_ino == st.st_ino && now.st_dev == st.st_dev &&
        !flock(fd, LOCK_EX | LOCK_NB)) {
        hx_log_debug("kv cache: removing %s, left by a writer that died", name);
        unlinkat(dirfd, name, 0);
    }
    close(fd);
}

void hx_kvf_sweep(int dirfd, const char *part)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    rewinddir(d); /* the descriptor's position is shared with dirfd's */
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && strstr(e->d_name, part)) sweep_one(dirfd, e->d_name);
    closedir(d);
}
