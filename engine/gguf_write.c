/* gguf_write.c: the streaming GGUF v3 writer: metadata and tensor infos are
 * collected, then the file is streamed through the output writer (hx_out). */
#include <stdlib.h>
#include <string.h>

#include "engine/gguf.h"

#define DEFAULT_ALIGN 32u
#define MAX_TENSOR_NAME 63u /* ggml's GGML_MAX_NAME (64) minus the NUL */

typedef struct wkv {
    char *key;
    int type, elem_type;
    uint64_t n;
    uint8_t raw[8]; /* fixed-size scalar */
    char *str;      /* STRING */
    void *arr;      /* numeric array, packed */
    char **strs;    /* string array */
    size_t *lens;
} wkv;

typedef struct wtensor {
    hx_gguf_tensor t; /* t.name owned; t.data unused */
    const void *data;
    hx_gguf_fill_fn fill;
    void *user;
} wtensor;

struct hx_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    size_t align;
    uint64_t data_size; /* padded bytes of all tensors so far */
};

hx_gguf_writer *hx_gguf_writer_new(void)
{
    hx_gguf_writer *w = hx_calloc(1, sizeof *w);
    if (w) w->align = DEFAULT_ALIGN;
    return w;
}

static void kv_clear(wkv *kv)
{
    free(kv->str);
    free(kv->arr);
    for (uint64_t i = 0; kv->strs && i < kv->n; i++) free(kv->strs[i]);
    free(kv->strs);
    free(kv->lens);
    kv->str = NULL;
    kv->arr = NULL;
    kv->strs = NULL;
    kv->lens = NULL;
}

void hx_gguf_writer_free(hx_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        kv_clear(&w->kv[i]);
        free(w->kv[i].key);
    }
    for (size_t i = 0; i < w->n_t; i++) free((char *)w->t[i].t.name);
    free(w->kv);
    free(w->t);
    free(w);
}

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    size_t nc = *cap ? *cap * 2 : 16;
    void *q;
    if (n < *cap) return HX_OK;
    q = hx_realloc(*p, nc * size);
    if (!q) return HX_ERR_NOMEM;
    *p = q;
    *cap = nc;
    return HX_OK;
}

/* The entry for key, emptied for a new value (created if absent). */
static wkv *kv_slot(hx_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            kv_clear(&w->kv[i]);
            return &w->kv[i];
        }
    if (grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) return NULL;
    wkv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    if (!(kv->key = hx_strdup(key))) return NULL;
    w->n_kv++;
    return kv;
}

static int is_pow2(size_t a)
{
    return a && (a & (a - 1)) == 0;
}

int hx_gguf_set_val(hx_gguf_writer *w, const char *key, int vtype,
                    const void *v)
{
    size_t size = hx_gguf_vtype_size(vtype);
    wkv *kv;
    if (!w || !key || !v || (size == 0 && vtype != HX_GGUF_STRING))
        return HX_ERR_INVALID;
    if (strcmp(key, "general.alignment") == 0) {
        uint32_t a;
        if (vtype != HX_GGUF_U32) return HX_ERR_INVALID;
        memcpy(&a, v, 4);
        if (!is_pow2(a)) return HX_ERR_INVALID;
        w->align = a;
    }
    if (!(kv = kv_slot(w, key))) return HX_ERR_NOMEM;
    kv->type = vtype;
    if (vtype != HX_GGUF_STRING) {
        memcpy(kv->raw, v, size);
        return HX_OK;
    }
    kv->str = hx_strdup(v);
    return kv->str ? HX_OK : HX_ERR_NOMEM;
}

int hx_gguf_set_u32(hx_gguf_writer *w, const char *key, uint32_t v)
{
    return hx_gguf_set_val(w, key, HX_GGUF_U32, &v);
}

int hx_gguf_set_i32(hx_gguf_writer *w, const char *key, int32_t v)
{
    return hx_gguf_set_val(w, key, HX_GGUF_I32, &v);
}

int hx_gguf_set_u64(hx_gguf_writer *w, const char *key, uint64_t v)
{
    return hx_gguf_set_val(w, key, HX_GGUF_U64, &v);
}

int hx_gguf_set_f32(hx_gguf_writer *w, const char *key, float v)
{
    return hx_gguf_set_val(w, key, HX_GGUF_F32, &v);
}

int hx_gguf_set_bool(hx_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;
    return hx_gguf_set_val(w, key, HX_GGUF_BOOL, &b);
}

int hx_gguf_set_str(hx_gguf_writer *w, const char *key, const char *v)
{
    return hx_gguf_set_val(w, key, HX_GGUF_STRING, v);
}

int hx_gguf_set_arr(hx_gguf_writer *w, const char *key, int elem_type,
                    const void *data, uint64_t n)
{
    size_t es = hx_gguf_vtype_size(elem_type), bytes;
    wkv *kv;
    if (!w || !key || es == 0 || (!data && n) || n > SIZE_MAX ||
        hx_mul_size((size_t)n, es, &bytes))
        return HX_ERR_INVALID;
    if (!(kv = kv_slot(w, key))) return HX_ERR_NOMEM;
    kv->type = HX_GGUF_ARRAY;
    kv->elem_type = elem_type;
    kv->arr = hx_malloc(bytes ? bytes : 1);
    if (!kv->arr) return HX_ERR_NOMEM;
    if (bytes) memcpy(kv->arr, data, bytes);
    kv->n = n;
    return HX_OK;
}

int hx_gguf_set_arr_str(hx_gguf_writer *w, const char *key,
                        const char *const *strs, const size_t *lens,
                        uint64_t n)
{
    wkv *kv;
    if (!w || !key || (!strs && n) || n > SIZE_MAX / sizeof(char *))
        return HX_ERR_INVALID;
    if (!(kv = kv_slot(w, key))) return HX_ERR_NOMEM;
    kv->type = HX_GGUF_ARRAY;
    kv->elem_type = HX_GGUF_STRING;
    kv->strs = hx_calloc((size_t)n + 1, sizeof *kv->strs);
    kv->lens = hx_calloc((size_t)n + 1, sizeof *kv->lens);
    if (!kv->strs || !kv->lens) return HX_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(strs[i]);
        kv->n = i + 1; /* so that kv_clear frees what was copied */
        kv->strs[i] = hx_malloc(len + 1);
        if (!kv->strs[i]) return HX_ERR_NOMEM;
        memcpy(kv->strs[i], strs[i], len);
        kv->strs[i][len] = '\0';
        kv->lens[i] = len;
    }
    kv->n = n;
    return HX_OK;
}

void hx_gguf_writer_set_alignment(hx_gguf_writer *w, size_t align)
{
    if (w && is_pow2(align) && align <= UINT32_MAX) w->align = align;
}

/* ---- tensors ---- */

static int tensor_shape(hx_gguf_tensor *t, int type, int n_dims,
                        const int64_t *ne)
{
    int64_t count = 1;
    size_t nbytes;
    if (n_dims < 1 || n_dims > HX_GGUF_MAX_DIMS || !ne) return HX_ERR_INVALID;
    for (int d = 0; d < HX_GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        if (t->ne[d] <= 0 || __builtin_mul_overflow(count, t->ne[d], &count))
            return HX_ERR_INVALID;
    }
    nbytes = hx_type_row_bytes(type, t->ne[0]);
    if (nbytes == 0) return HX_ERR_INVALID; /* unknown type or partial block */
    for (int d = 1; d < HX_GGUF_MAX_DIMS; d++)
        if (hx_mul_size(nbytes, (size_t)t->ne[d], &nbytes))
            return HX_ERR_INVALID;
    t->type = type;
    t->n_dims = n_dims;
    t->nbytes = nbytes;
    return HX_OK;
}

int hx_gguf_add_tensor(hx_gguf_writer *w, const char *name, int type,
                       int n_dims, const int64_t *ne, const void *data,
                       hx_gguf_fill_fn fill, void *user)
{
    hx_gguf_tensor t = {0};
    wtensor *wt;
    if (!w || !name || strlen(name) > MAX_TENSOR_NAME || !data == !fill)
        return HX_ERR_INVALID;
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].t.name, name) == 0) return HX_ERR_INVALID;
    if (tensor_shape(&t, type, n_dims, ne)) return HX_ERR_INVALID;
    if (grow((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t))
        return HX_ERR_NOMEM;
    if (!(t.name = hx_strdup(name))) return HX_ERR_NOMEM;
    wt = &w->t[w->n_t++];
    wt->t = t;
    wt->data = data;
    wt->fill = fill;
    wt->user = user;
    return HX_OK;
}

/* ---- serialization ---- */

static void put_u32(hx_buf *b, uint32_t v) { hx_buf_append(b, &v, 4); }
static void put_u64(hx_buf *b, uint64_t v) { hx_buf_append(b, &v, 8); }

static void put_str(hx_buf *b, const char *s, size_t len)
{
    put_u64(b, len);
    hx_buf_append(b, s, len);
}

static void put_kv(hx_buf *b, const wkv *kv)
{
    put_str(b, kv->key, strlen(kv->key));
    put_u32(b, (uint32_t)kv->type);
    if (kv->type == HX_GGUF_STRING) {
        put_str(b, kv->str, strlen(kv->str));
    } else if (kv->type != HX_GGUF_ARRAY) {
        hx_buf_append(b, kv->raw, hx_gguf_vtype_size(kv->type));
    } else {
        put_u32(b, (uint32_t)kv->elem_type);
        put_u64(b, kv->n);
        if (kv->elem_type != HX_GGUF_STRING)
            hx_buf_append(b, kv->arr,
                          (size_t)kv->n * hx_gguf_vtype_size(kv->elem_type));
        for (uint64_t i = 0; kv->elem_type == HX_GGUF_STRING && i < kv->n; i++)
            put_str(b, kv->strs[i], kv->lens[i]);
    }
}

static size_t pad_to(size_t n, size_t align)
{
    return (align - n % align) % align;
}

/* Header, metadata, tensor infos and the padding before the data. */
static int build_head(hx_gguf_writer *w, hx_buf *b)
{
    uint64_t off = 0;
    hx_buf_append(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, w->n_t);
    put_u64(b, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) put_kv(b, &w->kv[i]);
    for (size_t i = 0; i < w->n_t; i++) {
        hx_gguf_tensor *t = &w->t[i].t;
        put_str(b, t->name, strlen(t->name));
        put_u32(b, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(b, (uint64_t)t->ne[d]);
        put_u32(b, (uint32_t)t->type);
        t->offset = off;
        put_u64(b, off);
        off += t->nbytes + pad_to(t->nbytes, w->align);
    }
    static const char zeros[64];
    for (size_t p = pad_to(b->len, w->align); p > 0;) {
        size_t k = p < sizeof zeros ? p : sizeof zeros;
        hx_buf_append(b, zeros, k);
        p -= k;
    }
    return b->oom ? HX_ERR_NOMEM : HX_OK;
}

static int write_zeros(hx_out *o, size_t n, hx_err *err)
{
    static const char zeros[4096];
    int rc = HX_OK;
    while (n > 0 && !rc) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        rc = hx_out_write(o, zeros, k, err);
        n -= k;
    }
    return rc;
}

/* Streams every tensor's data with its padding; fill buffers are reused. */
static int write_data(hx_gguf_writer *w, hx_out *o, hx_err *err)
{
    void *buf = NULL;
    size_t cap = 0;
    int rc = HX_OK;
    for (size_t i = 0; i < w->n_t && !rc; i++) {
        wtensor *wt = &w->t[i];
        const void *src = wt->data;
        if (wt->fill) {
            if (wt->t.nbytes > cap) {
                free(buf);
                cap = wt->t.nbytes;
                if (!(buf = hx_malloc(cap))) {
                    rc = hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory "
                                    "for tensor '%s'", wt->t.name);
                    break;
                }
            }
            rc = wt->fill(wt->user, &wt->t, buf);
            if (rc) {
                rc = hx_err_set(err, rc, "gguf: producing tensor '%s' "
                                "failed: %s", wt->t.name, hx_rc_str(rc));
                break;
            }
            src = buf;
        }
        rc = hx_out_write(o, src, wt->t.nbytes, err);
        if (!rc) rc = write_zeros(o, pad_to(wt->t.nbytes, w->align), err);
    }
    free(buf);
    return rc;
}

int hx_gguf_writer_write_out(hx_gguf_writer *w, hx_out *o, hx_err *err)
{
    hx_buf head;
    int rc;
    if (w->align != DEFAULT_ALIGN && (rc = hx_gguf_set_u32(
            w, "general.alignment", (uint32_t)w->align)))
        return hx_err_set(err, rc, "gguf: setting general.alignment failed");
    hx_buf_init(&head);
    if (build_head(w, &head)) {
        hx_buf_free(&head);
        return hx_err_set(err, HX_ERR_NOMEM, "gguf: out of memory");
    }
    rc = hx_out_write(o, head.data, head.len, err);
    hx_buf_free(&head);
    return rc ? rc : write_data(w, o, err);
}

int hx_gguf_writer_write_from(hx_gguf_writer *w, const char *path,
                              const char *const *inputs, uint64_t *bytes,
                              hx_err *err)
{
    hx_out o;
    if (!w || !path) return hx_err_set(err, HX_ERR_INVALID, "gguf: no path");
    int rc = hx_out_open(&o, path, inputs, 0666, err);
    if (rc) return rc;
    rc = hx_gguf_writer_write_out(w, &o, err);
    if (bytes) *bytes = o.written;
    return hx_out_end(&o, rc, err);
}

int hx_gguf_writer_write(hx_gguf_writer *w, const char *path, hx_err *err)
{
    return hx_gguf_writer_write_from(w, path, NULL, NULL, err);
}
