/* gguf.c: the GGUF reader: maps a file read-only, validates every count,
 * length, type and offset before use, and indexes keys and tensors. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/gguf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

#define MAX_KEY_LEN 65535u   /* keys are dotted names; longer is garbage */
#define MAX_TENSOR_NAME 63u  /* ggml's GGML_MAX_NAME (64) minus the NUL */
#define DEFAULT_ALIGN 32u

typedef struct gg_str {
    const char *s; /* NUL-terminated copy in the arena */
    size_t len;
} gg_str;

typedef struct gg_kv {
    const char *key;
    int type;           /* hx_gguf_vtype */
    int elem_type;      /* arrays: element type */
    uint64_t n;         /* arrays: element count */
    uint8_t raw[8];     /* fixed-size scalars, little-endian */
    gg_str str;         /* STRING */
    const uint8_t *arr; /* numeric arrays: packed elements in the file */
    gg_str *strs;       /* string arrays */
} gg_kv;

/* Open-addressing index of names: slot holds index + 1, 0 when empty. */
typedef struct gg_index {
    size_t *slot;
    size_t cap;    /* power of two */
    uint64_t seed; /* of the hash, random per index */
} gg_index;

struct hx_gguf {
    const uint8_t *base;
    size_t size;
    void *map; /* mmap'd file, NULL for caller buffers */
    int fd;    /* the file, open for positioned reads; -1 for buffers */
    char *path;
    uint32_t version;
    size_t align;
    size_t data_off;
    int64_t n_kv;
    gg_kv *kv;
    int64_t n_tensors;
    hx_gguf_tensor *tensors;
    gg_index kv_idx, t_idx;
    hx_arena *arena; /* keys, strings, tables */
};

/* ---- value types ---- */

static const struct {
    const char *name;
    size_t size;
} k_vtypes[] = {
    [HX_GGUF_U8] = {"u8", 1},     [HX_GGUF_I8] = {"i8", 1},
    [HX_GGUF_U16] = {"u16", 2},   [HX_GGUF_I16] = {"i16", 2},
    [HX_GGUF_U32] = {"u32", 4},   [HX_GGUF_I32] = {"i32", 4},
    [HX_GGUF_F32] = {"f32", 4},   [HX_GGUF_BOOL] = {"bool", 1},
    [HX_GGUF_STRING] = {"string", 0}, [HX_GGUF_ARRAY] = {"array", 0},
    [HX_GGUF_U64] = {"u64", 8},   [HX_GGUF_I64] = {"i64", 8},
    [HX_GGUF_F64] = {"f64", 8},
};

static int vtype_known(int t)
{
    return t >= 0 && t <= HX_GGUF_F64;
}

const char *hx_gguf_vtype_name(int vtype)
{
    return vtype_known(vtype) ? k_vtypes[vtype].name : "?";
}

size_t hx_gguf_vtype_size(int vtype)
{
    return vtype_known(vtype) ? k_vtypes[vtype].size : 0;
}

/* ---- name index ---- */

/* FNV-1a from a per-index random basis, then a final mix: a hostile file
 * cannot precompute names that all land in one slot (which would make
 * indexing quadratic). */
static uint64_t hash_name(const char *s, uint64_t seed)
{
    uint64_t h = hx_fnv1a(HX_FNV1A_BASIS ^ seed, s, strlen(s));
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static int index_init(gg_index *ix, hx_arena *a, size_t n)
{
    ix->seed = (uint64_t)(uintptr_t)ix ^ (uint64_t)(hx_time_mono() * 1e9) ^
               ((uint64_t)getpid() << 40);
    ix->cap = 16;
    while (ix->cap < 2 * n) ix->cap *= 2;
    ix->slot = hx_arena_calloc(a, ix->cap, sizeof *ix->slot);
    return ix->slot ? HX_OK : HX_ERR_NOMEM;
}

/* Finds name; returns its slot (empty or holding the match). */
static size_t index_slot(const gg_index *ix, const char *name,
                         const char *(*name_at)(const void *, size_t),
                         const void *ctx)
{
    size_t i = (size_t)hash_name(name, ix->seed) & (ix->cap - 1);
    while (ix->slot[i] && strcmp(name_at(ctx, ix->slot[i] - 1), name) != 0)
        i = (i + 1) & (ix->cap - 1);
    return i;
}

static const char *kv_name_at(const void *g, size_t i)
{
    return ((const hx_gguf *)g)->kv[i].key;
}

static const char *tensor_name_at(const void *g, size_t i)
{
    return ((const hx_gguf *)g)->tensors[i].name;
}

/* ---- cursor over the file ---- */

typedef struct rd {
    const uint8_t *p;
    size_t size, pos;
    hx_err *err;
    char where[160]; /* "key 'general.name'", "tensor #3", ... */
} rd;

static int rd_need(rd *r, size_t n, const char *what)
{
    if (n <= r->size - r->pos) return HX_OK;
    return hx_err_set(r->err, HX_ERR_FORMAT,
                      "gguf: truncated file: %s of %s at byte %zu needs %zu "
                      "bytes, only %zu left (file size %zu)",
                      what, r->where, r->pos, n, r->size - r->pos, r->size);
}

static int rd_bytes(rd *r, void *out, size_t n, const char *what)
{
    int rc = rd_need(r, n, what);
    if (rc) return rc;
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return HX_OK;
}

static int rd_u32(rd *r, uint32_t *v, const char *what)
{
    return rd_bytes(r, v, 4, what);
}

static int rd_u64(rd *r, uint64_t *v, const char *what)
{
    return rd_bytes(r, v, 8, what);
}

/* A length-prefixed string of at most max bytes, left in the file:
 * out->s points into it (not NUL-terminated). */
static int rd_str_ref(rd *r, size_t max, gg_str *out, const char *what)
{
    uint64_t len;
    size_t at = r->pos;
    int rc = rd_u64(r, &len, what);
    if (rc) return rc;
    if (len > r->size - r->pos)
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: %s of %s at byte %zu claims %llu bytes, past "
                          "the end of the file (%zu bytes left)",
                          what, r->where, at, (unsigned long long)len,
                          r->size - r->pos);
    if (len > max)
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: %s of %s at byte %zu is %llu bytes long, "
                          "more than the limit of %zu",
                          what, r->where, at, (unsigned long long)len, max);
    out->len = (size_t)len;
    out->s = (const char *)r->p + r->pos;
    r->pos += out->len;
    return HX_OK;
}

/* The same, copied NUL-terminated into the arena. */
static int rd_str(rd *r, hx_arena *a, size_t max, gg_str *out,
                  const char *what)
{
    int rc = rd_str_ref(r, max, out, what);
    if (rc) return rc;
    out->s = hx_arena_strndup(a, out->s, out->len);
    if (!out->s) return hx_err_set(r->err, HX_ERR_NOMEM, "gguf: out of memory");
    return HX_OK;
}

/* ---- header ---- */

static int parse_header(hx_gguf *g, rd *r, uint64_t *n_tensors,
                        uint64_t *n_kv)
{
    char magic[4];
    int rc;
    snprintf(r->where, sizeof r->where, "the header");
    if ((rc = rd_bytes(r, magic, 4, "magic"))) return rc;
    if (memcmp(magic, "GGUF", 4) != 0)
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: bad magic %02x %02x %02x %02x at byte 0 "
                          "(expected \"GGUF\"): not a GGUF file",
                          (uint8_t)magic[0], (uint8_t)magic[1],
                          (uint8_t)magic[2], (uint8_t)magic[3]);
    if ((rc = rd_u32(r, &g->version, "version"))) return rc;
    if (g->version != 2 && g->version != 3)
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: unsupported version %u at byte 4 (only 2 "
                          "and 3 are supported%s)", g->version,
                          g->version == 1 ? "; version 1 is obsolete"
                          : g->version > 0xffff ? "; a big-endian file?" : "");
    if ((rc = rd_u64(r, n_tensors, "tensor count"))) return rc;
    return rd_u64(r, n_kv, "key count");
}

/* A count read at byte `at` must fit in the rest of the file given the
 * smallest possible size of one item. */
static int check_count(rd *r, uint64_t n, size_t min_item, const char *what,
                       size_t at)
{
    if (n <= (r->size - r->pos) / min_item) return HX_OK;
    return hx_err_set(r->err, HX_ERR_FORMAT,
                      "gguf: %s %llu at byte %zu is larger than the file "
                      "could hold (%zu bytes left, at least %zu per item)",
                      what, (unsigned long long)n, at, r->size - r->pos,
                      min_item);
}

/* ---- metadata ---- */

/* A string array: validated in place, then copied NUL-terminated into one
 * block (vocabularies hold hundreds of thousands of short strings). */
static int parse_str_arr(hx_gguf *g, rd *r, gg_kv *kv)
{
    size_t total = 0;
    char *blob;
    int rc;
    kv->strs = hx_arena_calloc(g->arena, kv->n ? kv->n : 1, sizeof *kv->strs);
    if (!kv->strs) return hx_err_set(r->err, HX_ERR_NOMEM, "gguf: out of memory");
    for (uint64_t i = 0; i < kv->n; i++) {
        if ((rc = rd_str_ref(r, r->size, &kv->strs[i], "array string")))
            return rc;
        total += kv->strs[i].len + 1; /* <= file size: no overflow */
    }
    if (!(blob = hx_arena_alloc(g->arena, total ? total : 1)))
        return hx_err_set(r->err, HX_ERR_NOMEM, "gguf: out of memory");
    for (uint64_t i = 0; i < kv->n; i++) {
        memcpy(blob, kv->strs[i].s, kv->strs[i].len);
        blob[kv->strs[i].len] = '\0';
        kv->strs[i].s = blob;
        blob += kv->strs[i].len + 1;
    }
    return HX_OK;
}

static int parse_arr(hx_gguf *g, rd *r, gg_kv *kv)
{
    uint32_t et;
    size_t at;
    int rc;
    if ((rc = rd_u32(r, &et, "array element type"))) return rc;
    if (et == HX_GGUF_ARRAY)
        return hx_err_set(r->err, HX_ERR_UNSUPPORTED,
                          "gguf: %s is an array of arrays at byte %zu; nested "
                          "arrays are not supported (nor by llama.cpp)",
                          r->where, r->pos - 4);
    if (!vtype_known((int)et))
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: unknown array element type %u of %s at byte "
                          "%zu", et, r->where, r->pos - 4);
    kv->elem_type = (int)et;
    at = r->pos;
    if ((rc = rd_u64(r, &kv->n, "array length"))) return rc;
    if (et == HX_GGUF_STRING) {
        if ((rc = check_count(r, kv->n, 8, "string array length", at)))
            return rc;
        return parse_str_arr(g, r, kv);
    }
    if ((rc = check_count(r, kv->n, k_vtypes[et].size, "array length", at)))
        return rc;
    kv->arr = r->p + r->pos;
    r->pos += (size_t)kv->n * k_vtypes[et].size;
    return HX_OK;
}

static int parse_value(hx_gguf *g, rd *r, gg_kv *kv)
{
    uint32_t t;
    int rc;
    if ((rc = rd_u32(r, &t, "value type"))) return rc;
    if (!vtype_known((int)t))
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: unknown value type %u of %s at byte %zu", t,
                          r->where, r->pos - 4);
    kv->type = (int)t;
    if (t == HX_GGUF_STRING)
        return rd_str(r, g->arena, r->size, &kv->str, "string value");
    if (t == HX_GGUF_ARRAY) return parse_arr(g, r, kv);
    return rd_bytes(r, kv->raw, k_vtypes[t].size, "value");
}

static int parse_kvs(hx_gguf *g, rd *r)
{
    int rc;
    for (int64_t i = 0; i < g->n_kv; i++) {
        gg_kv *kv = &g->kv[i];
        gg_str key;
        snprintf(r->where, sizeof r->where, "key #%lld", (long long)i);
        if ((rc = rd_str(r, g->arena, MAX_KEY_LEN, &key, "name"))) return rc;
        kv->key = key.s;
        snprintf(r->where, sizeof r->where, "key '%.100s'", key.s);
        size_t s = index_slot(&g->kv_idx, key.s, kv_name_at, g);
        if (g->kv_idx.slot[s])
            return hx_err_set(r->err, HX_ERR_FORMAT,
                              "gguf: duplicate key '%.100s' (entries #%zu "
                              "and #%lld)", key.s, g->kv_idx.slot[s] - 1,
                              (long long)i);
        g->kv_idx.slot[s] = (size_t)i + 1;
        if ((rc = parse_value(g, r, kv))) return rc;
    }
    return HX_OK;
}

static int read_alignment(hx_gguf *g, hx_err *err)
{
    int64_t i = hx_gguf_find_key(g, "general.alignment");
    uint32_t a;
    g->align = DEFAULT_ALIGN;
    if (i < 0) return HX_OK;
    if (g->kv[i].type != HX_GGUF_U32)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "gguf: general.alignment has type %s, expected u32",
                          hx_gguf_vtype_name(g->kv[i].type));
    memcpy(&a, g->kv[i].raw, 4);
    if (a == 0 || (a & (a - 1)) != 0)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "gguf: general.alignment %u is not a power of two",
                          a);
    g->align = a;
    return HX_OK;
}

/* ---- tensor infos ---- */

static int parse_shape(rd *r, hx_gguf_tensor *t)
{
    uint32_t nd;
    int64_t count = 1;
    int rc;
    if ((rc = rd_u32(r, &nd, "dimension count"))) return rc;
    if (nd == 0 || nd > HX_GGUF_MAX_DIMS)
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: %s has %u dimensions at byte %zu (must be "
                          "1 to %d)", r->where, nd, r->pos - 4,
                          HX_GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    for (int d = 0; d < HX_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        if ((rc = rd_u64(r, &v, "dimension"))) return rc;
        if (v == 0 || v > INT64_MAX)
            return hx_err_set(r->err, HX_ERR_FORMAT,
                              "gguf: %s has dimension %u = %lld at byte %zu "
                              "(must be positive)", r->where, d,
                              (long long)v, r->pos - 8);
        t->ne[d] = (int64_t)v;
        if (__builtin_mul_overflow(count, t->ne[d], &count))
            return hx_err_set(r->err, HX_ERR_FORMAT,
                              "gguf: %s element count overflows 64 bits",
                              r->where);
    }
    return HX_OK;
}

static int parse_ttype(rd *r, hx_gguf_tensor *t)
{
    uint32_t ty;
    size_t row, nbytes = 0;
    int rc;
    if ((rc = rd_u32(r, &ty, "type"))) return rc;
    t->type = ty > INT32_MAX ? -1 : (int)ty;
    if (hx_type_block_elems(t->type) == 0)
        return hx_err_set(r->err, HX_ERR_UNSUPPORTED,
                          "gguf: %s has tensor type %u (%s) at byte %zu, "
                          "which Hearth does not support", r->where, ty,
                          hx_type_ggml_name(t->type), r->pos - 4);
    row = hx_type_row_bytes(t->type, t->ne[0]);
    if (row == 0)
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: %s has %lld elements per row, not a "
                          "multiple of the %s block size %d", r->where,
                          (long long)t->ne[0], hx_type_name(t->type),
                          hx_type_block_elems(t->type));
    if (hx_mul_size(row, (size_t)t->ne[1], &nbytes) ||
        hx_mul_size(nbytes, (size_t)t->ne[2], &nbytes) ||
        hx_mul_size(nbytes, (size_t)t->ne[3], &nbytes))
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: %s byte size overflows", r->where);
    t->nbytes = nbytes;
    return HX_OK;
}

static int parse_tensor(hx_gguf *g, rd *r, int64_t i)
{
    hx_gguf_tensor *t = &g->tensors[i];
    gg_str name;
    size_t s, at;
    int rc;
    snprintf(r->where, sizeof r->where, "tensor #%lld", (long long)i);
    if ((rc = rd_str(r, g->arena, MAX_TENSOR_NAME, &name, "name"))) return rc;
    t->name = name.s;
    snprintf(r->where, sizeof r->where, "tensor '%s'", name.s);
    s = index_slot(&g->t_idx, name.s, tensor_name_at, g);
    if (g->t_idx.slot[s])
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: duplicate tensor name '%s' (tensors #%zu "
                          "and #%lld)", name.s, g->t_idx.slot[s] - 1,
                          (long long)i);
    g->t_idx.slot[s] = (size_t)i + 1;
    if ((rc = parse_shape(r, t)) || (rc = parse_ttype(r, t))) return rc;
    at = r->pos;
    if ((rc = rd_u64(r, &t->offset, "data offset"))) return rc;
    if (t->offset % g->align != 0)
        return hx_err_set(r->err, HX_ERR_FORMAT,
                          "gguf: %s data offset %llu (at byte %zu) is not a "
                          "multiple of the alignment %zu", r->where,
                          (unsigned long long)t->offset, at, g->align);
    return HX_OK;
}

static int cmp_offset(const void *a, const void *b)
{
    const hx_gguf_tensor *x = *(hx_gguf_tensor *const *)a;
    const hx_gguf_tensor *y = *(hx_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every tensor's bytes inside the file, no two overlapping. */
static int check_extents(hx_gguf *g, hx_err *err)
{
    size_t avail = g->size - g->data_off;
    hx_gguf_tensor **by_off;
    int rc = HX_OK;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        hx_gguf_tensor *t = &g->tensors[i];
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return hx_err_set(err, HX_ERR_FORMAT,
                              "gguf: tensor '%s' data (%zu bytes at data "
                              "offset %llu, file byte %llu) runs past the end "
                              "of the file (size %zu)", t->name, t->nbytes,
                              (unsigned long long)t->offset,
                              (unsigned long long)t->offset + g->data_off,
                              g->size);
        t->data = g->base + g->data_off + t->offset;
    }
    by_off = hx_malloc_array((size_t)g->n_tensors + 1, sizeof *by_off);
    if (!by_off) return hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++) by_off[i] = &g->tensors[i];
    qsort(by_off, (size_t)g->n_tensors, sizeof *by_off, cmp_offset);
    for (int64_t i = 1; i < g->n_tensors && !rc; i++) {
        const hx_gguf_tensor *a = by_off[i - 1], *b = by_off[i];
        if (a->offset + a->nbytes > b->offset)
            rc = hx_err_set(err, HX_ERR_FORMAT,
                            "gguf: tensors '%s' (data offset %llu, %zu bytes) "
                            "and '%s' (data offset %llu) overlap", a->name,
                            (unsigned long long)a->offset, a->nbytes, b->name,
                            (unsigned long long)b->offset);
    }
    free(by_off);
    return rc;
}

static int parse_tensors(hx_gguf *g, rd *r, hx_err *err)
{
    int rc;
    for (int64_t i = 0; i < g->n_tensors; i++)
        if ((rc = parse_tensor(g, r, i))) return rc;
    g->data_off = r->pos;
    if (g->data_off % g->align) g->data_off += g->align - g->data_off % g->align;
    if (g->n_tensors == 0) {
        if (g->data_off > g->size) g->data_off = g->size;
        return HX_OK;
    }
    if (g->data_off > g->size)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "gguf: tensor data section would start at byte %zu, "
                          "past the end of the file (size %zu)", g->data_off,
                          g->size);
    return check_extents(g, err);
}

/* ---- open / close ---- */

static int parse(hx_gguf *g, hx_err *err)
{
    rd r = {.p = g->base, .size = g->size, .err = err};
    uint64_t n_tensors, n_kv;
    int rc;
    if ((rc = parse_header(g, &r, &n_tensors, &n_kv))) return rc;
    /* Smallest key: 8-byte length, 4-byte type, 1-byte value. */
    if ((rc = check_count(&r, n_kv, 13, "key count", 16))) return rc;
    g->n_kv = (int64_t)n_kv;
    g->kv = hx_arena_calloc(g->arena, n_kv ? n_kv : 1, sizeof *g->kv);
    if (!g->kv || index_init(&g->kv_idx, g->arena, n_kv))
        return hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    if ((rc = parse_kvs(g, &r)) || (rc = read_alignment(g, err))) return rc;
    /* Smallest tensor info: name length, 1 dim, ne, type, offset. */
    snprintf(r.where, sizeof r.where, "the tensor infos");
    if ((rc = check_count(&r, n_tensors, 32, "tensor count", 8))) return rc;
    g->n_tensors = (int64_t)n_tensors;
    g->tensors = hx_arena_calloc(g->arena, n_tensors ? n_tensors : 1,
                                 sizeof *g->tensors);
    if (!g->tensors || index_init(&g->t_idx, g->arena, n_tensors))
        return hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    return parse_tensors(g, &r, err);
}

static int open_common(hx_gguf *g, hx_gguf **out, hx_err *err)
{
    int rc;
    g->arena = hx_arena_new(0);
    if (!g->arena) rc = hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    else rc = parse(g, err);
    if (rc) {
        hx_gguf_close(g);
        return rc;
    }
    *out = g;
    return HX_OK;
}

int hx_gguf_open_buffer(const void *data, size_t size, hx_gguf **out,
                        hx_err *err)
{
    hx_gguf *g;
    *out = NULL;
    if (!data && size)
        return hx_err_set(err, HX_ERR_INVALID, "gguf: NULL buffer");
    g = hx_calloc(1, sizeof *g);
    if (!g) return hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    g->fd = -1;
    g->base = data ? data : (const uint8_t *)"";
    g->size = size;
    return open_common(g, out, err);
}

static int map_file(hx_gguf *g, const char *path, hx_err *err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hx_err_set(err, errno == ENOENT ? HX_ERR_NOTFOUND : HX_ERR_IO,
                          "gguf: cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return hx_err_set(err, HX_ERR_IO, "gguf: %s is not a regular file",
                          path);
    }
    g->size = (size_t)st.st_size;
    if (g->size == 0) {
        close(fd);
        return hx_err_set(err, HX_ERR_FORMAT, "gguf: %s is empty", path);
    }
    g->map = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (g->map == MAP_FAILED) {
        close(fd);
        g->map = NULL;
        return hx_err_set(err, HX_ERR_IO, "gguf: cannot map %s: %s", path,
                          strerror(errno));
    }
    g->base = g->map;
    g->fd = fd;
    return HX_OK;
}

int hx_gguf_open(const char *path, hx_gguf **out, hx_err *err)
{
    hx_gguf *g;
    hx_err local;
    int rc;
    *out = NULL;
    g = hx_calloc(1, sizeof *g);
    if (!g) return hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    g->fd = -1;
    g->path = hx_strdup(path);
    if (!g->path) rc = hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    else rc = map_file(g, path, err);
    if (rc) {
        hx_gguf_close(g);
        return rc;
    }
    rc = open_common(g, out, &local);
    if (rc) hx_err_set(err, rc, "%s: %s", path, local.msg);
    return rc;
}

void hx_gguf_close(hx_gguf *g)
{
    if (!g) return;
    if (g->map) munmap(g->map, g->size);
    if (g->fd >= 0) close(g->fd);
    hx_arena_free(g->arena);
    free(g->path);
    free(g);
}

/* ---- accessors ---- */

uint32_t hx_gguf_version(const hx_gguf *g) { return g->version; }
size_t hx_gguf_alignment(const hx_gguf *g) { return g->align; }
size_t hx_gguf_file_size(const hx_gguf *g) { return g->size; }
size_t hx_gguf_data_offset(const hx_gguf *g) { return g->data_off; }
const char *hx_gguf_path(const hx_gguf *g) { return g->path ? g->path : ""; }
int hx_gguf_fd(const hx_gguf *g) { return g->fd; }

void hx_gguf_advise_random(const hx_gguf *g, int on)
{
    if (!g->map || g->data_off >= g->size) return;
    const uintptr_t a = ((uintptr_t)g->map + g->data_off) & ~(uintptr_t)4095;
    (void)madvise((void *)a, (uintptr_t)g->map + g->size - a, on ? MADV_RANDOM : MADV_NORMAL);
}

void hx_gguf_drop_pages(const hx_gguf *g)
{
    if (!g->map) return;
    (void)madvise(g->map, g->size, MADV_DONTNEED);
    (void)madvise(g->map, g->size, MADV_RANDOM);
    (void)posix_fadvise(g->fd, 0, 0, POSIX_FADV_DONTNEED);
}
int64_t hx_gguf_n_kv(const hx_gguf *g) { return g->n_kv; }
int64_t hx_gguf_n_tensors(const hx_gguf *g) { return g->n_tensors; }

int64_t hx_gguf_find_key(const hx_gguf *g, const char *key)
{
    size_t s;
    if (!key) return -1;
    s = index_slot(&g->kv_idx, key, kv_name_at, g);
    return g->kv_idx.slot[s] ? (int64_t)g->kv_idx.slot[s] - 1 : -1;
}

const char *hx_gguf_key_at(const hx_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

int hx_gguf_kv_type(const hx_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? g->kv[i].type : -1;
}

const hx_gguf_tensor *hx_gguf_tensor_at(const hx_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const hx_gguf_tensor *hx_gguf_find_tensor(const hx_gguf *g, const char *name)
{
    size_t s;
    if (!name || g->n_tensors == 0) return NULL;
    s = index_slot(&g->t_idx, name, tensor_name_at, g);
    return g->t_idx.slot[s] ? &g->tensors[g->t_idx.slot[s] - 1] : NULL;
}

static const gg_kv *kv_get(const hx_gguf *g, const char *key)
{
    int64_t i = hx_gguf_find_key(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

/* An integer (or bool) element of type t at p, widened; -1 if not one. */
static int int_value(int t, const uint8_t *p, int64_t *out, int *big)
{
    uint64_t u = 0;
    *big = 0;
    switch (t) {
    case HX_GGUF_U8: case HX_GGUF_BOOL: *out = p[0]; return 0;
    case HX_GGUF_I8: *out = (int8_t)p[0]; return 0;
    case HX_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case HX_GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case HX_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case HX_GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case HX_GGUF_I64: memcpy(out, p, 8); return 0;
    case HX_GGUF_U64:
        memcpy(&u, p, 8);
        *big = u > INT64_MAX;
        *out = (int64_t)u;
        return 0;
    default: return -1;
    }
}

static int float_value(int t, const uint8_t *p, double *out)
{
    if (t == HX_GGUF_F32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
        return 0;
    }
    if (t == HX_GGUF_F64) {
        memcpy(out, p, 8);
        return 0;
    }
    return -1;
}

int hx_gguf_get_i64(const hx_gguf *g, const char *key, int64_t *out)
{
    const gg_kv *kv = kv_get(g, key);
    int big;
    if (!kv) return HX_ERR_NOTFOUND;
    if (int_value(kv->type, kv->raw, out, &big)) return HX_ERR_FORMAT;
    return big ? HX_ERR_RANGE : HX_OK;
}

int hx_gguf_get_u32(const hx_gguf *g, const char *key, uint32_t *out)
{
    int64_t v;
    int rc = hx_gguf_get_i64(g, key, &v);
    if (rc) return rc;
    if (v < 0 || v > UINT32_MAX) return HX_ERR_RANGE;
    *out = (uint32_t)v;
    return HX_OK;
}

/* double to float without the undefined behaviour of an out-of-range
 * conversion: -1 (and +-inf in *out) if a finite d does not fit. */
static int to_float(double d, float *out)
{
    if (d > FLT_MAX || d < -FLT_MAX) {
        *out = d > 0 ? INFINITY : -INFINITY;
        return d == *out ? 0 : -1;
    }
    *out = (float)d;
    return 0;
}

int hx_gguf_get_f32(const hx_gguf *g, const char *key, float *out)
{
    const gg_kv *kv = kv_get(g, key);
    double d;
    if (!kv) return HX_ERR_NOTFOUND;
    if (float_value(kv->type, kv->raw, &d)) return HX_ERR_FORMAT;
    return to_float(d, out) ? HX_ERR_RANGE : HX_OK;
}

int hx_gguf_get_f64(const hx_gguf *g, const char *key, double *out)
{
    const gg_kv *kv = kv_get(g, key);
    if (!kv) return HX_ERR_NOTFOUND;
    return float_value(kv->type, kv->raw, out) ? HX_ERR_FORMAT : HX_OK;
}

int hx_gguf_get_bool(const hx_gguf *g, const char *key, int *out)
{
    const gg_kv *kv = kv_get(g, key);
    if (!kv) return HX_ERR_NOTFOUND;
    if (kv->type != HX_GGUF_BOOL) return HX_ERR_FORMAT;
    *out = kv->raw[0] != 0;
    return HX_OK;
}

int hx_gguf_get_str(const hx_gguf *g, const char *key, const char **out)
{
    const gg_kv *kv = kv_get(g, key);
    if (!kv) return HX_ERR_NOTFOUND;
    if (kv->type != HX_GGUF_STRING) return HX_ERR_FORMAT;
    *out = kv->str.s;
    return HX_OK;
}

int hx_gguf_get_arr(const hx_gguf *g, const char *key, int *elem_type,
                    uint64_t *n)
{
    const gg_kv *kv = kv_get(g, key);
    if (!kv) return HX_ERR_NOTFOUND;
    if (kv->type != HX_GGUF_ARRAY) return HX_ERR_FORMAT;
    if (elem_type) *elem_type = kv->elem_type;
    if (n) *n = kv->n;
    return HX_OK;
}

/* The array under key with elements of the given kind, or NULL. */
static const gg_kv *arr_get(const hx_gguf *g, const char *key, int strings,
                            uint64_t i)
{
    const gg_kv *kv = kv_get(g, key);
    if (!kv || kv->type != HX_GGUF_ARRAY || i >= kv->n) return NULL;
    if ((kv->elem_type == HX_GGUF_STRING) != strings) return NULL;
    return kv;
}

/* Element i of a string array (NUL-terminated, len bytes), or NULL. */
const char *hx_gguf_arr_str(const hx_gguf *g, const char *key, uint64_t i,
                            size_t *len)
{
    const gg_kv *kv = arr_get(g, key, 1, i);
    if (!kv) return NULL;
    if (len) *len = kv->strs[i].len;
    return kv->strs[i].s;
}

/* Packed elements of a numeric array (in the file), or NULL. */
const void *hx_gguf_arr_data(const hx_gguf *g, const char *key)
{
    const gg_kv *kv = kv_get(g, key);
    if (!kv || kv->type != HX_GGUF_ARRAY || kv->elem_type == HX_GGUF_STRING)
        return NULL;
    return kv->arr;
}

/* Element i of an integer array; 0 if absent or not integer. */
int64_t hx_gguf_arr_i64(const hx_gguf *g, const char *key, uint64_t i)
{
    const gg_kv *kv = arr_get(g, key, 0, i);
    int64_t v = 0;
    int big;
    if (!kv) return 0;
    size_t es = k_vtypes[kv->elem_type].size;
    if (int_value(kv->elem_type, kv->arr + i * es, &v, &big)) return 0;
    return v;
}

/* Element i of a float array (F32, F64, out of range F64 as +-inf;
 * integers converted); 0 if absent. */
float hx_gguf_arr_f32(const hx_gguf *g, const char *key, uint64_t i)
{
    const gg_kv *kv = arr_get(g, key, 0, i);
    double d;
    if (!kv) return 0.0f;
    const uint8_t *p = kv->arr + i * k_vtypes[kv->elem_type].size;
    float f;
    if (float_value(kv->elem_type, p, &d) == 0) {
        to_float(d, &f);
        return f;
    }
    return (float)hx_gguf_arr_i64(g, key, i);
}

/* ---- copying into a writer ---- */

static int copy_str_arr(hx_gguf_writer *w, const gg_kv *kv)
{
    const char **strs = hx_malloc_array(kv->n + 1, sizeof *strs);
    size_t *lens = hx_malloc_array(kv->n + 1, sizeof *lens);
    int rc = HX_ERR_NOMEM;
    if (strs && lens) {
        for (uint64_t i = 0; i < kv->n; i++) {
            strs[i] = kv->strs[i].s;
            lens[i] = kv->strs[i].len;
        }
        rc = hx_gguf_set_arr_str(w, kv->key, strs, lens, kv->n);
    }
    free(strs);
    free(lens);
    return rc;
}

int hx_gguf_copy_kv(hx_gguf_writer *w, const hx_gguf *src)
{
    return hx_gguf_copy_kv_prefix(w, src, "");
}

int hx_gguf_copy_kv_prefix(hx_gguf_writer *w, const hx_gguf *src, const char *prefix)
{
    int rc = HX_OK;
    size_t pl = strlen(prefix);
    for (int64_t i = 0; i < src->n_kv && !rc; i++) {
        const gg_kv *kv = &src->kv[i];
        if (strncmp(kv->key, prefix, pl)) continue;
        if (kv->type == HX_GGUF_STRING)
            rc = hx_gguf_set_val(w, kv->key, kv->type, kv->str.s);
        else if (kv->type != HX_GGUF_ARRAY)
            rc = hx_gguf_set_val(w, kv->key, kv->type, kv->raw);
        else if (kv->elem_type == HX_GGUF_STRING)
            rc = copy_str_arr(w, kv);
        else
            rc = hx_gguf_set_arr(w, kv->key, kv->elem_type, kv->arr, kv->n);
    }
    return rc;
}
