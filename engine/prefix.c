/* prefix.c: prefix caches on disk: the KV rows of a token prefix, keyed by
 * model identity, adapter set and token ids; versioned, checksummed,
 * written atomically, evicted least recently used first. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/adapter.h"
#include "engine/ctx_int.h"

#define PFX_MAGIC "HXPFXKV"   /* 8 bytes with the NUL */
#define PFX_VERSION 1
#define PFX_SUFFIX ".kv"
#define PFX_DEFAULT_MAX ((size_t)1 << 30)

/* The file: this header, n_tokens int32 ids, then for each layer, K then
 * V, each KV head, positions 0..n_tokens-1: one row of kv_row bytes; last,
 * a 64-bit checksum of everything before it. Little-endian, as written. */
typedef struct pfx_header {
    char magic[8];
    uint32_t version, kv_type, n_layer, n_head_kv, head_dim, kv_row;
    uint32_t n_tokens, reserved;
    char model_id[64];     /* hex of hx_model_identity (key_model) */
    char adapter_key[256]; /* hx_ctx.adapter_key, NUL-padded */
} pfx_header;
_Static_assert(sizeof(pfx_header) == 360, "pfx_header is packed by layout");

/* ---- checksum: four 64-bit multiply-rotate lanes, streamed ---- */
typedef struct cks {
    uint64_t h[4];
    unsigned char buf[32];
    size_t n;
    uint64_t len;
} cks;

static uint64_t lane(uint64_t h, uint64_t w)
{
    h ^= w * 0x9E3779B97F4A7C15ull;
    h = (h << 31 | h >> 33) * 0xC2B2AE3D27D4EB4Full;
    return h;
}

static void cks_block(cks *c, const unsigned char *p)
{
    for (int i = 0; i < 4; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        c->h[i] = lane(c->h[i], w);
    }
}

static void cks_init(cks *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 4; i++) c->h[i] = 0x243F6A8885A308D3ull + (uint64_t)i;
}

static void cks_update(cks *c, const void *data, size_t n)
{
    const unsigned char *p = data;
    c->len += n;
    while (c->n && n) {
        c->buf[c->n++] = *p++, n--;
        if (c->n == 32) cks_block(c, c->buf), c->n = 0;
    }
    for (; n >= 32; p += 32, n -= 32) cks_block(c, p);
    memcpy(c->buf, p, n);
    c->n = n;
}

static uint64_t cks_final(cks *c)
{
    memset(c->buf + c->n, 0, 32 - c->n);
    cks_block(c, c->buf);
    uint64_t h = c->len;
    for (int i = 0; i < 4; i++) h = lane(h, c->h[i]);
    return h;
}

/* ---- keys ---- */
/* The model part of the key: hx_model_identity (weights and the
 * hyperparameters the cached rows depend on), computed once per context. */
static const char *key_model(hx_ctx *c)
{
    if (!c->model_id[0]) hx_model_identity(c->m, c->model_id);
    return c->model_id;
}

static void make_header(hx_ctx *c, int n, pfx_header *h)
{
    const hx_hparams *hp = &c->m->hp;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, PFX_MAGIC, 8);
    h->version = PFX_VERSION;
    h->kv_type = (uint32_t)c->kv_type;
    h->n_layer = (uint32_t)hp->n_layer;
    h->n_head_kv = (uint32_t)hp->n_head_kv;
    h->head_dim = (uint32_t)hp->head_dim;
    h->kv_row = (uint32_t)c->kv_row;
    h->n_tokens = (uint32_t)n;
    memcpy(h->model_id, key_model(c), 64);
    memcpy(h->adapter_key, c->adapter_key, strnlen(c->adapter_key, sizeof h->adapter_key - 1));
}

/* The file name of a prefix: 32 hex digits of its whole key. */
static void file_name(hx_ctx *c, const int32_t *tok, int n, const char *dir,
                      char *out, size_t cap)
{
    pfx_header h;
    unsigned char d[32];
    char hex[65];
    make_header(c, n, &h);
    hx_sha256 s;
    hx_sha256_init(&s);
    hx_sha256_update(&s, &h, sizeof h);
    hx_sha256_update(&s, tok, (size_t)n * sizeof *tok);
    hx_sha256_final(&s, d);
    hx_sha256_hex(d, hex);
    snprintf(out, cap, "%s/%.32s" PFX_SUFFIX, dir, hex);
}

static int default_dir(const char *dir, char *out, size_t cap)
{
    if (dir) return snprintf(out, cap, "%s", dir) < (int)cap ? 0 : -1;
    char base[3800];
    if (hx_path_cache(base, sizeof base) < 0) return -1;
    return snprintf(out, cap, "%s/prefix", base) < (int)cap ? 0 : -1;
}

static size_t rows_bytes(const hx_ctx *c, int n)
{
    const hx_hparams *hp = &c->m->hp;
    return (size_t)hp->n_layer * 2 * (size_t)hp->n_head_kv * (size_t)n * c->kv_row;
}

/* ---- save ---- */
/* Rows of (layer l, K or V, head h) for positions [0, n), page by page,
 * to f (and the checksum). */
static int write_rows(hx_ctx *c, FILE *f, cks *k, int n)
{
    const hx_hparams *hp = &c->m->hp;
    for (int l = 0; l < hp->n_layer; l++)
        for (int v = 0; v < 2; v++)
            for (int h = 0; h < hp->n_head_kv; h++)
                for (int p0 = 0; p0 < n; p0 += HX_KV_PAGE) {
                    const int np = n - p0 < HX_KV_PAGE ? n - p0 : HX_KV_PAGE;
                    const char *r = hx_kv_row(c, v, l, h, p0);
                    cks_update(k, r, (size_t)np * c->kv_row);
                    if (fwrite(r, c->kv_row, (size_t)np, f) != (size_t)np) return -1;
                }
    return 0;
}

static int write_file(hx_ctx *c, const char *tmp, const int32_t *tok, int n)
{
    FILE *f = fopen(tmp, "wbx");
    if (!f) return -1;
    pfx_header h;
    cks k;
    make_header(c, n, &h);
    cks_init(&k);
    cks_update(&k, &h, sizeof h);
    cks_update(&k, tok, (size_t)n * sizeof *tok);
    int bad = fwrite(&h, sizeof h, 1, f) != 1 ||
              fwrite(tok, sizeof *tok, (size_t)n, f) != (size_t)n ||
              write_rows(c, f, &k, n);
    uint64_t sum = cks_final(&k);
    bad = bad || fwrite(&sum, sizeof sum, 1, f) != 1 || fflush(f) || fsync(fileno(f));
    bad = fclose(f) || bad;
    return bad ? -1 : 0;
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

/* Deletes the least recently used cache files until dir holds at most
 * max bytes of them. */
static void evict(const char *dir, size_t max)
{
    DIR *d = opendir(dir);
    if (!d) return;
    pfx_file *fs = NULL;
    size_t n = 0, cap = 0, total = 0;
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!is_cache_file(e->d_name) || stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            pfx_file *g = hx_realloc(fs, (cap = cap * 2 + 16) * sizeof *fs);
            if (!g) break;
            fs = g;
        }
        snprintf(fs[n].name, sizeof fs[n].name, "%s", e->d_name);
        fs[n].size = st.st_size;
        fs[n++].mtime = st.st_mtim;
        total += (size_t)st.st_size;
    }
    closedir(d);
    qsort(fs, n, sizeof *fs, by_age);
    for (size_t i = 0; i < n && total > max; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, fs[i].name);
        if (!unlink(path)) total -= (size_t)fs[i].size;
    }
    free(fs);
}

int hx_ctx_prefix_save(hx_ctx *c, const char *dir, const int32_t *tokens,
                       int n, size_t max_bytes)
{
    char d[4096], path[4400], tmp[4500];
    if (n <= 0 || n > c->n_past || !tokens)
        return hx_err_set(&c->err, HX_ERR_INVALID, "prefix of %d positions, %d cached",
                          n, c->n_past);
    if (default_dir(dir, d, sizeof d) || hx_mkdirs(d, &c->err))
        return hx_err_set(&c->err, HX_ERR_IO, "no cache directory for prefixes");
    file_name(c, tokens, n, d, path, sizeof path);
    if (!utimensat(AT_FDCWD, path, NULL, 0)) return HX_OK; /* there: now recent */
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (write_file(c, tmp, tokens, n) || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return hx_err_set(&c->err, HX_ERR_IO, "cannot write the prefix cache %s: %s",
                          path, strerror(e));
    }
    evict(d, max_bytes ? max_bytes : PFX_DEFAULT_MAX);
    return HX_OK;
}

/* ---- load ---- */
/* Tokens of file path shared with tok[0..n) if its header matches c (0 if
 * not, or not a cache file of this context). */
static int match_len(hx_ctx *c, const char *path, const int32_t *tok, int n)
{
    pfx_header want, h;
    int fd = open(path, O_RDONLY | O_CLOEXEC), k = 0;
    if (fd < 0) return 0;
    make_header(c, 0, &want);
    if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h) {
        uint32_t nt = h.n_tokens;
        h.n_tokens = 0;
        if (!memcmp(&h, &want, sizeof h)) {
            int m = (int)nt < n ? (int)nt : n;
            int32_t buf[1024];
            for (int off = 0; k == off && off < m; off += 1024) {
                int cnt = m - off < 1024 ? m - off : 1024;
                off_t at = (off_t)sizeof h + (off_t)off * 4;
                if (pread(fd, buf, (size_t)cnt * 4, at) != (ssize_t)cnt * 4) break;
                for (int i = 0; i < cnt && buf[i] == tok[off + i]; i++) k++;
            }
        }
    }
    close(fd);
    return k;
}

/* The cache file sharing the longest prefix with tok, into best. */
static int best_file(hx_ctx *c, const char *dir, const int32_t *tok, int n,
                     char *best, size_t cap)
{
    DIR *d = opendir(dir);
    int k = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[4400];
        if (!is_cache_file(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int m = match_len(c, path, tok, n);
        if (m > k) k = m, snprintf(best, cap, "%s", path);
    }
    closedir(d);
    return k;
}

/* Checks the mapped file (size, checksum) and copies the rows of
 * positions [0, use) into the cache. 0; -1 if the file is damaged; -2 if
 * the pages cannot be had (the file is fine). */
static int copy_rows(hx_ctx *c, const unsigned char *p, size_t size, int use)
{
    pfx_header h;
    memcpy(&h, p, sizeof h);
    const int nt = (int)h.n_tokens;
    const size_t rows_at = sizeof h + (size_t)nt * 4;
    if (size != rows_at + rows_bytes(c, nt) + 8) return -1;
    cks k;
    uint64_t sum;
    cks_init(&k);
    cks_update(&k, p, size - 8);
    memcpy(&sum, p + size - 8, 8);
    if (cks_final(&k) != sum) return -1;
    if (hx_kv_reserve(c, use)) return -2;
    const hx_hparams *hp = &c->m->hp;
    const unsigned char *r = p + rows_at;
    for (int l = 0; l < hp->n_layer; l++)
        for (int v = 0; v < 2; v++)
            for (int hh = 0; hh < hp->n_head_kv; hh++, r += (size_t)nt * c->kv_row)
                for (int p0 = 0; p0 < use; p0 += HX_KV_PAGE) {
                    const int np = use - p0 < HX_KV_PAGE ? use - p0 : HX_KV_PAGE;
                    memcpy(hx_kv_row(c, v, l, hh, p0), r + (size_t)p0 * c->kv_row,
                           (size_t)np * c->kv_row);
                }
    return 0;
}

static int load_file(hx_ctx *c, const char *path, int use)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;
    struct stat st;
    if (fd < 0) return -2;
    if (fstat(fd, &st)) rc = -2;
    else if ((size_t)st.st_size > sizeof(pfx_header) + 8) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        rc = -2;
        if (p != MAP_FAILED) {
            rc = copy_rows(c, p, (size_t)st.st_size, use);
            munmap(p, (size_t)st.st_size);
        }
    }
    close(fd);
    if (!rc) utimensat(AT_FDCWD, path, NULL, 0); /* recently used */
    return rc;
}

int hx_ctx_prefix_load(hx_ctx *c, const char *dir, const int32_t *tokens,
                       int n, int max_pos, int *n_loaded)
{
    char d[4096], best[4400] = "";
    *n_loaded = 0;
    if (c->n_past != 0 || c->call.active)
        return hx_err_set(&c->err, HX_ERR_STATE, "prefix load into a context "
                          "holding %d positions%s", c->n_past,
                          c->call.active ? " and a stepped call" : "");
    if (!tokens || n <= 0 || default_dir(dir, d, sizeof d)) return HX_OK;
    int k = best_file(c, d, tokens, n, best, sizeof best);
    if (k > max_pos) k = max_pos;
    if (k > c->max_pages * HX_KV_PAGE) k = c->max_pages * HX_KV_PAGE;
    if (k > c->n_ctx) k = c->n_ctx;
    if (k <= 0) return HX_OK;
    int rc = load_file(c, best, k);
    if (rc == -1) {
        hx_log_debug("prefix cache: %s is damaged: removed", best);
        unlink(best); /* its header matched: ours, damaged; the next save rewrites it */
    }
    if (rc) return HX_OK;
    c->n_past = k;
    *n_loaded = k;
    hx_log_debug("prefix cache: %d positions from %s", k, best);
    return HX_OK;
}
