/* gguf.h: GGUF v3 files as llama.cpp reads and writes them: a strictly
 * validating reader over memory-mapped tensor data, and a streaming writer.
 * Part of engine.h, the engine's public API. */
#ifndef HX_GGUF_H
#define HX_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Tensor types, numbered as ggml numbers them (the numbers are in files). */
typedef enum hx_type {
    HX_TYPE_F32 = 0,
    HX_TYPE_F16 = 1,
    HX_TYPE_Q4_0 = 2,
    HX_TYPE_Q4_1 = 3,
    HX_TYPE_Q5_0 = 6,
    HX_TYPE_Q5_1 = 7,
    HX_TYPE_Q8_0 = 8,
    HX_TYPE_Q8_1 = 9,
    HX_TYPE_Q2_K = 10,
    HX_TYPE_Q3_K = 11,
    HX_TYPE_Q4_K = 12,
    HX_TYPE_Q5_K = 13,
    HX_TYPE_Q6_K = 14,
    HX_TYPE_Q8_K = 15,
    HX_TYPE_I8 = 24,
    HX_TYPE_I16 = 25,
    HX_TYPE_I32 = 26,
    HX_TYPE_I64 = 27,
    HX_TYPE_F64 = 28,
    HX_TYPE_BF16 = 30,
    HX_TYPE_COUNT = 40 /* upper bound of known numbers, not a type */
} hx_type;

/* Type traits. Unknown types: name "?", sizes 0. */
const char *hx_type_name(int type);
int hx_type_block_elems(int type);  /* elements per block (1 for F32) */
int hx_type_block_bytes(int type);  /* bytes per block */
/* Bytes of a row of n elements; 0 if n is not a multiple of the block. */
size_t hx_type_row_bytes(int type, int64_t n);
/* Name of any ggml type number, also of those Hearth does not implement
 * ("IQ2_XS", "MXFP4"), for messages; "unknown" otherwise. Static string. */
const char *hx_type_ggml_name(int type);

/* Metadata value types, numbered as in the file format. */
typedef enum hx_gguf_vtype {
    HX_GGUF_U8 = 0,
    HX_GGUF_I8 = 1,
    HX_GGUF_U16 = 2,
    HX_GGUF_I16 = 3,
    HX_GGUF_U32 = 4,
    HX_GGUF_I32 = 5,
    HX_GGUF_F32 = 6,
    HX_GGUF_BOOL = 7,
    HX_GGUF_STRING = 8,
    HX_GGUF_ARRAY = 9,
    HX_GGUF_U64 = 10,
    HX_GGUF_I64 = 11,
    HX_GGUF_F64 = 12,
} hx_gguf_vtype;
/* "u8", "i8", ..., "string", "array"; "?" for unknown. Static string. */
const char *hx_gguf_vtype_name(int vtype);
/* Bytes of one value of a fixed-size type; 0 for string, array, unknown. */
size_t hx_gguf_vtype_size(int vtype);

#define HX_GGUF_MAX_DIMS 4

typedef struct hx_gguf_tensor {
    const char *name;          /* NUL-terminated, owned by the hx_gguf */
    int type;                  /* hx_type */
    int n_dims;
    int64_t ne[HX_GGUF_MAX_DIMS]; /* elements per dim, ne[0] innermost; unused = 1 */
    uint64_t offset;           /* from the start of the data section */
    size_t nbytes;
    const void *data;          /* into the mapping: valid while the file is open */
} hx_gguf_tensor;

/* ---- reader ---- */
typedef struct hx_gguf hx_gguf;

/* Opens and validates a GGUF file (version 2 or 3). Tensor data is mapped
 * read-only with mmap and paged in on demand, never copied. Every offset,
 * size, count, string and type is checked against the file before use;
 * a file that fails gets HX_ERR_FORMAT (or HX_ERR_UNSUPPORTED for a valid
 * but unknown tensor type) with a message naming the problem and where.
 * On success *out owns the mapping; free with hx_gguf_close. */
int hx_gguf_open(const char *path, hx_gguf **out, hx_err *err);
/* The same over a caller's buffer (not copied; must outlive the handle);
 * used by tests and the fuzzer. */
int hx_gguf_open_buffer(const void *data, size_t size, hx_gguf **out,
                        hx_err *err);
void hx_gguf_close(hx_gguf *g); /* NULL is a no-op */

uint32_t hx_gguf_version(const hx_gguf *g);
size_t hx_gguf_alignment(const hx_gguf *g);
size_t hx_gguf_file_size(const hx_gguf *g);
size_t hx_gguf_data_offset(const hx_gguf *g); /* start of the tensor data */
const char *hx_gguf_path(const hx_gguf *g);   /* "" for buffers */
/* The file, open read-only for positioned reads (the weight cache reads
 * tensors with pread and may set O_DIRECT on it); -1 for buffers. Owned by
 * g: closed by hx_gguf_close. */
int hx_gguf_fd(const hx_gguf *g);
/* Reads of the tensor data through the mapping without read-ahead (on),
 * or with the kernel's usual read-ahead again (off): for touching a few
 * scattered bytes (norms at load) without paging in megabytes around
 * each. Nothing for buffers. */
void hx_gguf_advise_random(const hx_gguf *g, int on);
/* Unmaps the file's pages from this process and asks the kernel to drop
 * them from the page cache (they are read back on the next access, that
 * page alone, without read-ahead): for a context that reads its weights
 * itself, whose memory cap counts the file's cached pages. Nothing for
 * buffers. */
void hx_gguf_drop_pages(const hx_gguf *g);

/* Metadata. Keys are looked up by exact name; -1 when absent. Strings
 * returned point into the handle (valid while it is open) and are
 * NUL-terminated copies (the file's strings are length-prefixed). */
int64_t hx_gguf_n_kv(const hx_gguf *g);
int64_t hx_gguf_find_key(const hx_gguf *g, const char *key);
const char *hx_gguf_key_at(const hx_gguf *g, int64_t i);
int hx_gguf_kv_type(const hx_gguf *g, int64_t i); /* hx_gguf_vtype */

/* Typed getters by key. Integer getters accept any integer (and bool)
 * value type whose value fits; float getters accept F32/F64. Return HX_OK,
 * HX_ERR_NOTFOUND if the key is absent, HX_ERR_FORMAT if of another type,
 * HX_ERR_RANGE if the value does not fit (e.g. an F64 beyond FLT_MAX). */
int hx_gguf_get_i64(const hx_gguf *g, const char *key, int64_t *out);
int hx_gguf_get_u32(const hx_gguf *g, const char *key, uint32_t *out);
int hx_gguf_get_f32(const hx_gguf *g, const char *key, float *out);
int hx_gguf_get_f64(const hx_gguf *g, const char *key, double *out);
int hx_gguf_get_bool(const hx_gguf *g, const char *key, int *out);
int hx_gguf_get_str(const hx_gguf *g, const char *key, const char **out);

/* Arrays: element type and count; element access by index. For string
 * arrays, hx_gguf_arr_str gives element i and its byte length (strings may
 * contain NUL bytes, e.g. token pieces). For numeric arrays hx_gguf_arr_data
 * gives the packed little-endian elements (may be unaligned: memcpy them)
 * and hx_gguf_arr_i64 / _f32 convert one element. */
int hx_gguf_get_arr(const hx_gguf *g, const char *key, int *elem_type,
                    uint64_t *n);
const char *hx_gguf_arr_str(const hx_gguf *g, const char *key, uint64_t i,
                            size_t *len);
const void *hx_gguf_arr_data(const hx_gguf *g, const char *key);
int64_t hx_gguf_arr_i64(const hx_gguf *g, const char *key, uint64_t i);
float hx_gguf_arr_f32(const hx_gguf *g, const char *key, uint64_t i);

/* Tensors, in file order. */
int64_t hx_gguf_n_tensors(const hx_gguf *g);
const hx_gguf_tensor *hx_gguf_tensor_at(const hx_gguf *g, int64_t i);
const hx_gguf_tensor *hx_gguf_find_tensor(const hx_gguf *g, const char *name);

/* ---- writer ----
 * Collects metadata and tensor descriptions, then streams the file:
 * header, metadata, tensor infos, aligned data. Tensor data is either a
 * caller buffer (borrowed until hx_gguf_writer_write returns) or produced
 * by a callback at write time, so a file larger than memory can be written.
 * The file is streamed through hx_out (base.h): to PATH.tmp.PID, fsynced
 * and renamed, so an interrupted write never leaves a half file at PATH; a
 * device or /dev/stdout written through; a link's file updated. */
typedef struct hx_gguf_writer hx_gguf_writer;
/* Fills buf (nbytes of tensor data) for the tensor; returns 0 or an hx_rc. */
typedef int (*hx_gguf_fill_fn)(void *user, const hx_gguf_tensor *t, void *buf);

hx_gguf_writer *hx_gguf_writer_new(void);
void hx_gguf_writer_free(hx_gguf_writer *w); /* NULL is a no-op */
/* Setting a key that exists replaces its value; strings are copied. */
int hx_gguf_set_u32(hx_gguf_writer *w, const char *key, uint32_t v);
int hx_gguf_set_i32(hx_gguf_writer *w, const char *key, int32_t v);
int hx_gguf_set_u64(hx_gguf_writer *w, const char *key, uint64_t v);
int hx_gguf_set_f32(hx_gguf_writer *w, const char *key, float v);
int hx_gguf_set_bool(hx_gguf_writer *w, const char *key, int v);
int hx_gguf_set_str(hx_gguf_writer *w, const char *key, const char *v);
/* Scalar of any non-array value type; v points to the value in its C type
 * (uint8_t for U8 and BOOL, int16_t for I16, double for F64, ...); for
 * STRING, v is the NUL-terminated string itself (copied). */
int hx_gguf_set_val(hx_gguf_writer *w, const char *key, int vtype,
                    const void *v);
/* Numeric array of n elements of elem_type (copied). */
int hx_gguf_set_arr(hx_gguf_writer *w, const char *key, int elem_type,
                    const void *data, uint64_t n);
/* String array (copied); lens may be NULL for NUL-terminated strings. */
int hx_gguf_set_arr_str(hx_gguf_writer *w, const char *key,
                        const char *const *strs, const size_t *lens,
                        uint64_t n);
/* Copies every metadata pair of an open file (e.g. to rewrite a model). */
int hx_gguf_copy_kv(hx_gguf_writer *w, const hx_gguf *src);
/* The same for the keys that start with prefix (e.g. "tokenizer."). */
int hx_gguf_copy_kv_prefix(hx_gguf_writer *w, const hx_gguf *src,
                           const char *prefix);
/* Adds a tensor; ne has n_dims entries. Exactly one of data / fill. */
int hx_gguf_add_tensor(hx_gguf_writer *w, const char *name, int type,
                       int n_dims, const int64_t *ne, const void *data,
                       hx_gguf_fill_fn fill, void *user);
void hx_gguf_writer_set_alignment(hx_gguf_writer *w, size_t align); /* default 32 */
/* Writes the file to path through hx_out. Error text in err. */
int hx_gguf_writer_write(hx_gguf_writer *w, const char *path, hx_err *err);
/* The same, refusing a path that is one of inputs (NULL-terminated, may be
 * NULL; the files the output is made from); *bytes (may be NULL): the
 * file's size. */
int hx_gguf_writer_write_from(hx_gguf_writer *w, const char *path,
                              const char *const *inputs, uint64_t *bytes,
                              hx_err *err);
/* Streams the file into o, opened by the caller (who commits or aborts):
 * for a writer that opens its output before long work. */
int hx_gguf_writer_write_out(hx_gguf_writer *w, hx_out *o, hx_err *err);

#endif /* HX_GGUF_H */
