/* fuzz_gguf.c: fuzz target for the GGUF reader: opens the input as a GGUF
 * buffer and, when it is accepted, walks every key, value and tensor. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t g_sink; /* keeps the reads from being optimized out */

static void walk_array(const hx_gguf *g, const char *key)
{
    int et = -1;
    uint64_t n = 0;
    size_t len = 0;
    if (hx_gguf_get_arr(g, key, &et, &n) != HX_OK) abort();
    if (et == HX_GGUF_STRING) {
        for (uint64_t i = 0; i < n; i++) {
            const char *s = hx_gguf_arr_str(g, key, i, &len);
            if (!s || s[len] != '\0') abort();
            if (len) g_sink += (uint8_t)s[len - 1];
        }
        if (hx_gguf_arr_str(g, key, n, &len)) abort();
        return;
    }
    const uint8_t *p = hx_gguf_arr_data(g, key);
    size_t es = hx_gguf_vtype_size(et);
    if (!p || es == 0) abort();
    if (n) g_sink += p[n * es - 1];
    for (uint64_t i = 0; i < n && i < 64; i++) {
        float f = hx_gguf_arr_f32(g, key, i);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        g_sink += (uint64_t)hx_gguf_arr_i64(g, key, i) + bits;
    }
}

static void walk_kv(const hx_gguf *g, int64_t i)
{
    const char *key = hx_gguf_key_at(g, i), *s = NULL;
    int64_t v;
    float f;
    int b;
    if (!key || hx_gguf_find_key(g, key) != i) abort();
    switch (hx_gguf_kv_type(g, i)) {
    case HX_GGUF_STRING:
        if (hx_gguf_get_str(g, key, &s) != HX_OK) abort();
        g_sink += strlen(s);
        break;
    case HX_GGUF_ARRAY: walk_array(g, key); break;
    case HX_GGUF_F32:
    case HX_GGUF_F64: {
        double d;
        if (hx_gguf_get_f32(g, key, &f) == HX_ERR_FORMAT) abort();
        if (hx_gguf_get_f64(g, key, &d) != HX_OK) abort();
        g_sink += (uint64_t)(f == f) + (uint64_t)(d == d);
        break;
    }
    case HX_GGUF_BOOL:
        if (hx_gguf_get_bool(g, key, &b) != HX_OK) abort();
        g_sink += (uint64_t)b;
        break;
    default: {
        uint32_t u = 0;
        if (hx_gguf_get_i64(g, key, &v) == HX_ERR_FORMAT) abort();
        if (hx_gguf_get_u32(g, key, &u) == HX_ERR_FORMAT) abort();
        g_sink += (uint64_t)v + u;
    }
    }
}

static void walk_tensors(const hx_gguf *g)
{
    size_t end = hx_gguf_file_size(g);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        if (!t || hx_gguf_find_tensor(g, t->name) != t) abort();
        if (t->n_dims < 1 || t->n_dims > HX_GGUF_MAX_DIMS) abort();
        if (t->offset % hx_gguf_alignment(g)) abort();
        if (hx_gguf_data_offset(g) + t->offset + t->nbytes > end) abort();
        /* first and last byte of the data are inside the buffer */
        g_sink += ((const uint8_t *)t->data)[0] +
                  ((const uint8_t *)t->data)[t->nbytes - 1];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hx_gguf *g = NULL;
    hx_err err = {0};
    int rc = hx_gguf_open_buffer(data, size, &g, &err);
    if (rc != HX_OK) {
        if (g || err.rc != rc || !err.msg[0]) abort();
        return 0;
    }
    for (int64_t i = 0; i < hx_gguf_n_kv(g); i++) walk_kv(g, i);
    walk_tensors(g);
    /* Everything accepted can be copied into a writer. */
    hx_gguf_writer *w = hx_gguf_writer_new();
    if (w && hx_gguf_copy_kv(w, g) != HX_OK) abort();
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    return 0;
}
