/* delta.c: hx_model_diff and hx_model_patch: updates of GGUF model files
 * that ship only the changed tensors, rebuilt bit for bit and atomically. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modelfile/delta.h"
#include "engine/engine.h"

#define DELTA_VERSION 1
#define K_VERSION "hearth.delta.version"
#define K_BASE "hearth.delta.base_sha256"
#define K_TARGET "hearth.delta.target_sha256"
#define K_SIZE "hearth.delta.target_size"
#define K_DATA "hearth.delta.data_offset"
#define K_PREFIX "hearth.delta.header_prefix"
#define K_SUFFIX "hearth.delta.header_suffix"
#define K_OLDHDR "hearth.delta.old_header_size"
#define K_NAMES "hearth.delta.tensor_names"
#define K_OFFS "hearth.delta.tensor_offsets"
#define K_SIZES "hearth.delta.tensor_sizes"
#define T_MIDDLE "hearth.delta.header_middle"

/* Reads the first n bytes of a file. Caller frees. */
static int read_head(const char *path, size_t n, unsigned char **out, hx_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char *b = hx_malloc(n ? n : 1);
    ssize_t got = fd >= 0 && b ? pread(fd, b, n, 0) : -1;
    if (fd >= 0) close(fd);
    if (got != (ssize_t)n) {
        free(b);
        return hx_err_set(err, HX_ERR_IO, "%s: cannot read its header", path);
    }
    *out = b;
    return HX_OK;
}

/* ---- diff ---- */

typedef struct side {
    hx_gguf *g;
    unsigned char *hdr; /* bytes [0, data offset) */
    size_t hdr_n;
    char sha[65];
} side;

static int open_side(const char *path, const char *label, side *s, hx_err *err)
{
    memset(s, 0, sizeof *s);
    int rc = hx_gguf_open(path, &s->g, err);
    if (!rc) rc = hx_sha256_file(path, label, s->sha, err);
    if (!rc) {
        s->hdr_n = hx_gguf_data_offset(s->g);
        rc = read_head(path, s->hdr_n, &s->hdr, err);
    }
    return rc;
}

static void close_side(side *s)
{
    hx_gguf_close(s->g);
    free(s->hdr);
}

static int tensor_same(const hx_gguf_tensor *a, const hx_gguf_tensor *b)
{
    if (!a || a->type != b->type || a->n_dims != b->n_dims || a->nbytes != b->nbytes) return 0;
    for (int d = 0; d < b->n_dims; d++)
        if (a->ne[d] != b->ne[d]) return 0;
    return memcmp(a->data, b->data, b->nbytes) == 0;
}

static int by_offset(const void *x, const void *y)
{
    const hx_gguf_tensor *a = *(const hx_gguf_tensor *const *)x;
    const hx_gguf_tensor *b = *(const hx_gguf_tensor *const *)y;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* The padding between tensors (and after the last) must be zeros, since
 * the patch writes zeros there. */
static int check_gaps(hx_gguf *g, hx_err *err)
{
    int64_t n = hx_gguf_n_tensors(g);
    const hx_gguf_tensor **ts = hx_malloc((size_t)(n ? n : 1) * sizeof *ts);
    if (!ts) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) ts[i] = hx_gguf_tensor_at(g, i);
    qsort(ts, (size_t)n, sizeof *ts, by_offset);
    const unsigned char *base = n ? (const unsigned char *)ts[0]->data - ts[0]->offset : NULL;
    uint64_t at = 0, end = hx_gguf_file_size(g) - hx_gguf_data_offset(g);
    int ok = 1;
    for (int64_t i = 0; i <= n && ok; i++) {
        uint64_t next = i < n ? ts[i]->offset : end;
        if (next > at && base) ok = all_zero(base + at, next - at);
        if (i < n) at = ts[i]->offset + ts[i]->nbytes;
    }
    free(ts);
    return ok ? HX_OK
              : hx_err_set(err, HX_ERR_UNSUPPORTED,
                           "the new file has non-zero bytes between its tensors; "
                           "a delta cannot rebuild it exactly");
}

static void common_ends(const side *a, const side *b, uint64_t *pre, uint64_t *suf)
{
    size_t n = a->hdr_n < b->hdr_n ? a->hdr_n : b->hdr_n, p = 0, s = 0;
    while (p < n && a->hdr[p] == b->hdr[p]) p++;
    while (s < n - p && a->hdr[a->hdr_n - 1 - s] == b->hdr[b->hdr_n - 1 - s]) s++;
    *pre = p;
    *suf = s;
}

/* The layout of the new file's tensors, as three parallel arrays. */
static int set_layout(hx_gguf_writer *w, hx_gguf *g, hx_err *err)
{
    int64_t n = hx_gguf_n_tensors(g);
    const char **names = hx_malloc((size_t)(n ? n : 1) * sizeof *names);
    uint64_t *offs = hx_malloc((size_t)(n ? n : 1) * sizeof *offs);
    uint64_t *sizes = hx_malloc((size_t)(n ? n : 1) * sizeof *sizes);
    int rc = names && offs && sizes ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !rc && i < n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        names[i] = t->name, offs[i] = t->offset, sizes[i] = t->nbytes;
    }
    if (!rc && n)
        rc = hx_gguf_set_arr_str(w, K_NAMES, names, NULL, (uint64_t)n) ||
             hx_gguf_set_arr(w, K_OFFS, HX_GGUF_U64, offs, (uint64_t)n) ||
             hx_gguf_set_arr(w, K_SIZES, HX_GGUF_U64, sizes, (uint64_t)n)
                 ? hx_err_set(err, HX_ERR_NOMEM, "out of memory")
                 : HX_OK;
    free(names);
    free(offs);
    free(sizes);
    return rc;
}

static int set_keys(hx_gguf_writer *w, const side *a, const side *b, uint64_t pre,
                    uint64_t suf, hx_err *err)
{
    if (hx_gguf_set_str(w, "general.type", "hearth-delta") ||
        hx_gguf_set_u32(w, K_VERSION, DELTA_VERSION) || hx_gguf_set_str(w, K_BASE, a->sha) ||
        hx_gguf_set_str(w, K_TARGET, b->sha) ||
        hx_gguf_set_u64(w, K_SIZE, hx_gguf_file_size(b->g)) ||
        hx_gguf_set_u64(w, K_DATA, b->hdr_n) || hx_gguf_set_u64(w, K_PREFIX, pre) ||
        hx_gguf_set_u64(w, K_SUFFIX, suf) || hx_gguf_set_u64(w, K_OLDHDR, a->hdr_n))
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    return set_layout(w, b->g, err);
}

/* Adds every changed tensor of b (and the header middle) to w. */
static int add_changed(hx_gguf_writer *w, const side *a, const side *b, uint64_t pre,
                       uint64_t suf, hx_delta_stats *st, hx_err *err)
{
    uint64_t mid = b->hdr_n - pre - suf;
    if (mid) {
        int64_t ne = (int64_t)mid;
        if (hx_gguf_add_tensor(w, T_MIDDLE, HX_TYPE_I8, 1, &ne, b->hdr + pre, NULL, NULL))
            return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    st->header_bytes = mid;
    st->n_tensors = (int)hx_gguf_n_tensors(b->g);
    for (int64_t i = 0; i < st->n_tensors; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(b->g, i);
        if (tensor_same(hx_gguf_find_tensor(a->g, t->name), t)) continue;
        if (hx_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL))
            return hx_err_set(err, HX_ERR_INVALID, "cannot add tensor %s to the delta", t->name);
        st->n_changed++;
        st->changed_bytes += t->nbytes;
    }
    return HX_OK;
}

int hx_model_diff(const char *old_path, const char *new_path, const char *delta_path,
                  hx_delta_stats *st, hx_err *err)
{
    hx_delta_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    side a = {0}, b = {0};
    hx_out out;
    const char *inputs[] = {old_path, new_path, NULL};
    int rc = hx_out_open(&out, delta_path, inputs, 0666, err);
    if (rc) return rc;
    rc = open_side(old_path, "hashing old", &a, err);
    if (!rc) rc = open_side(new_path, "hashing new", &b, err);
    if (!rc) rc = check_gaps(b.g, err);
    hx_gguf_writer *w = rc ? NULL : hx_gguf_writer_new();
    if (!rc && !w) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    uint64_t pre = 0, suf = 0;
    if (!rc) {
        common_ends(&a, &b, &pre, &suf);
        rc = set_keys(w, &a, &b, pre, suf, err);
    }
    if (!rc) rc = add_changed(w, &a, &b, pre, suf, st, err);
    if (!rc) rc = hx_gguf_writer_write_out(w, &out, err);
    st->delta_bytes = out.written;
    rc = hx_out_end(&out, rc, err);
    hx_gguf_writer_free(w);
    close_side(&a);
    close_side(&b);
    return rc;
}

/* ---- patch ---- */

/* The rebuilt file: its output and the running hash of what was written. */
typedef struct out_file {
    hx_out out;
    hx_sha256 sha;
} out_file;

static int out_write(out_file *o, const void *p, size_t n, hx_err *err)
{
    hx_sha256_update(&o->sha, p, n);
    return hx_out_write(&o->out, p, n, err);
}

static int out_zeros_to(out_file *o, uint64_t at, hx_err *err)
{
    static const unsigned char zero[4096];
    if (at < o->out.written)
        return hx_err_set(err, HX_ERR_FORMAT, "delta: tensors overlap in the new layout");
    while (o->out.written < at) {
        uint64_t k = at - o->out.written < sizeof zero ? at - o->out.written : sizeof zero;
        int rc = out_write(o, zero, (size_t)k, err);
        if (rc) return rc;
    }
    return HX_OK;
}

typedef struct delta_in {
    hx_gguf *d;
    const char *base, *target;
    int64_t size, data, pre, suf, oldhdr;
    uint64_t n;
} delta_in;

static int need_i64(hx_gguf *d, const char *key, int64_t *v, hx_err *err)
{
    if (hx_gguf_get_i64(d, key, v) || *v < 0)
        return hx_err_set(err, HX_ERR_FORMAT, "delta: missing or bad %s", key);
    return HX_OK;
}

static int read_delta(const char *path, delta_in *di, hx_err *err)
{
    memset(di, 0, sizeof *di);
    int rc = hx_gguf_open(path, &di->d, err);
    if (rc) return rc;
    uint32_t ver = 0;
    const char *type = NULL;
    if (hx_gguf_get_str(di->d, "general.type", &type) || strcmp(type, "hearth-delta"))
        return hx_err_set(err, HX_ERR_FORMAT, "%s is not a Hearth model delta", path);
    if (hx_gguf_get_u32(di->d, K_VERSION, &ver) || ver != DELTA_VERSION)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "%s: delta version %u is not %d", path,
                          ver, DELTA_VERSION);
    if (hx_gguf_get_str(di->d, K_BASE, &di->base) || hx_gguf_get_str(di->d, K_TARGET, &di->target))
        return hx_err_set(err, HX_ERR_FORMAT, "delta: missing file hashes");
    int et;
    rc = need_i64(di->d, K_SIZE, &di->size, err);
    if (!rc) rc = need_i64(di->d, K_DATA, &di->data, err);
    if (!rc) rc = need_i64(di->d, K_PREFIX, &di->pre, err);
    if (!rc) rc = need_i64(di->d, K_SUFFIX, &di->suf, err);
    if (!rc) rc = need_i64(di->d, K_OLDHDR, &di->oldhdr, err);
    if (!rc && hx_gguf_find_key(di->d, K_NAMES) >= 0 &&
        hx_gguf_get_arr(di->d, K_NAMES, &et, &di->n))
        rc = hx_err_set(err, HX_ERR_FORMAT, "delta: bad %s", K_NAMES);
    return rc;
}

/* Header of the new file: old prefix + carried middle + old suffix. */
static int write_header(out_file *o, const delta_in *di, const unsigned char *oldhdr,
                        hx_err *err)
{
    const hx_gguf_tensor *mid = hx_gguf_find_tensor(di->d, T_MIDDLE);
    uint64_t mid_n = mid ? mid->nbytes : 0;
    if ((uint64_t)di->pre + (uint64_t)di->suf > (uint64_t)di->oldhdr ||
        (uint64_t)di->pre + mid_n + (uint64_t)di->suf != (uint64_t)di->data)
        return hx_err_set(err, HX_ERR_FORMAT, "delta: header pieces do not add up");
    int rc = out_write(o, oldhdr, (size_t)di->pre, err);
    if (!rc && mid_n) rc = out_write(o, mid->data, mid->nbytes, err);
    if (!rc) rc = out_write(o, oldhdr + di->oldhdr - di->suf, (size_t)di->suf, err);
    return rc;
}

/* Data of the new file's tensor i: from the delta, else from the base. */
static int write_tensor(out_file *o, const delta_in *di, hx_gguf *old, uint64_t i, hx_err *err)
{
    size_t len;
    const char *name = hx_gguf_arr_str(di->d, K_NAMES, i, &len);
    uint64_t off = (uint64_t)hx_gguf_arr_i64(di->d, K_OFFS, i);
    uint64_t size = (uint64_t)hx_gguf_arr_i64(di->d, K_SIZES, i);
    const hx_gguf_tensor *t = hx_gguf_find_tensor(di->d, name);
    if (!t) t = hx_gguf_find_tensor(old, name);
    if (!t || t->nbytes != size)
        return hx_err_set(err, HX_ERR_FORMAT, "delta: tensor %s is in neither file with %llu bytes",
                          name, (unsigned long long)size);
    int rc = out_zeros_to(o, (uint64_t)di->data + off, err);
    return rc ? rc : out_write(o, t->data, t->nbytes, err);
}

static int write_all_tensors(out_file *o, const delta_in *di, hx_gguf *old, hx_err *err)
{
    /* the layout is in file order, which is offset order for every writer
     * we know; out_zeros_to refuses anything else */
    hx_progress pr;
    hx_progress_start(&pr, "rebuilding", (double)di->size);
    int rc = HX_OK;
    for (uint64_t i = 0; i < di->n && !rc; i++) {
        rc = write_tensor(o, di, old, i, err);
        hx_progress_update(&pr, (double)o->out.written, NULL);
    }
    hx_progress_finish(&pr);
    return rc ? rc : out_zeros_to(o, (uint64_t)di->size, err);
}

/* Checks the rebuilt file's hash before anything at the output changes. */
static int check_hash(out_file *o, const delta_in *di, hx_err *err)
{
    unsigned char d[32];
    char hex[65];
    hx_sha256_final(&o->sha, d);
    hx_sha256_hex(d, hex);
    if (strcmp(hex, di->target))
        return hx_err_set(err, HX_ERR_FORMAT,
                          "the rebuilt file does not match the delta's checksum (got %.12s, "
                          "expected %.12s): the delta is corrupt; nothing was changed", hex,
                          di->target);
    return HX_OK;
}

int hx_model_patch(const char *old_path, const char *delta_path, const char *out_path,
                   hx_err *err)
{
    delta_in di;
    char sha[65];
    hx_gguf *old = NULL;
    unsigned char *oldhdr = NULL;
    out_file o;
    /* out_path may be old_path (an update in place, verified first); never the delta */
    const char *inputs[] = {delta_path, NULL};
    int rc = hx_out_open(&o.out, out_path, inputs, 0666, err);
    if (rc) return rc;
    hx_sha256_init(&o.sha);
    rc = read_delta(delta_path, &di, err);
    if (!rc) rc = hx_sha256_file(old_path, "checking base", sha, err);
    if (!rc && strcmp(sha, di.base))
        rc = hx_err_set(err, HX_ERR_UNSUPPORTED,
                        "%s was made for another base model (sha256 %.12s...), not %s (%.12s...)",
                        delta_path, di.base, old_path, sha);
    if (!rc) rc = hx_gguf_open(old_path, &old, err);
    if (!rc && hx_gguf_data_offset(old) != (size_t)di.oldhdr)
        rc = hx_err_set(err, HX_ERR_FORMAT, "delta: base header size differs");
    if (!rc) rc = read_head(old_path, (size_t)di.oldhdr, &oldhdr, err);
    if (!rc) rc = write_header(&o, &di, oldhdr, err);
    if (!rc) rc = write_all_tensors(&o, &di, old, err);
    if (!rc) rc = check_hash(&o, &di, err);
    rc = hx_out_end(&o.out, rc, err);
    free(oldhdr);
    hx_gguf_close(old);
    hx_gguf_close(di.d);
    return rc;
}
