/* kvfile.h: the one on-disk format of KV cache pages, shared by the prefix
 * cache (prefix.c) and the KV spill (kvspill.c); engine-internal. */
#ifndef HX_KVFILE_H
#define HX_KVFILE_H

#include <sys/types.h>

#include "engine/ctx_int.h"

/* A file: this header, n_tokens int32 token ids, then from
 * hx_kvf_records_at one record per page at a fixed stride (page p at
 * records_at + p * stride): a record header, the checksums of the page's
 * slices, then the page's bytes as the cache holds them (K rows of every
 * layer and KV head, then V rows, HX_KV_PAGE rows each; rows of positions
 * at or past n_pos are zero). A slice is the HX_KV_PAGE rows of one (K or
 * V, layer, KV head): what attention reads at once, so a slice read back
 * is checked on its own. Little-endian, as written. A record is written
 * data first, header last: a write cut short leaves a record whose
 * header or sums do not match, never a valid one. */
#define HX_KVF_MAGIC "HXKVPG1" /* 8 bytes with the NUL */
#define HX_KVF_VERSION 2
enum { HX_KVF_PREFIX = 1, HX_KVF_SPILL = 2 };

typedef struct hx_kvf_header {
    char magic[8];
    uint32_t version, kind;   /* HX_KVF_VERSION, HX_KVF_* */
    uint32_t kv_type, n_layer, n_head_kv, head_dim, kv_row, page_pos;
    uint32_t n_tokens, n_pages;
    char model_id[64];        /* hex of hx_model_identity */
    char adapter_key[256];    /* hx_ctx.adapter_key, NUL-padded */
    uint64_t sum;             /* of the bytes above and the token ids */
} hx_kvf_header;
_Static_assert(sizeof(hx_kvf_header) == 376, "hx_kvf_header is packed by layout");

typedef struct hx_kvf_rec {
    char magic[4];            /* "HXPG" */
    uint32_t index, n_pos, n_slices;
    uint64_t sum;             /* of the fields above and the slice sums */
} hx_kvf_rec;
_Static_assert(sizeof(hx_kvf_rec) == 24, "hx_kvf_rec is packed by layout");

/* Sizes of one context's records. */
typedef struct hx_kvf_geo {
    int n_slices;             /* 2 * n_layer * n_head_kv */
    size_t slice_bytes;       /* HX_KV_PAGE rows */
    size_t rec_head;          /* record header and sums, rounded to 64 */
    size_t stride;            /* rec_head + the page */
} hx_kvf_geo;
void hx_kvf_geometry(const hx_ctx *c, hx_kvf_geo *g);

/* The file's checksum: four 64-bit multiply-rotate lanes (not a
 * cryptographic hash: it finds torn writes and damaged storage). */
uint64_t hx_kvf_sum(const void *p, size_t n);
/* Slice s of a page: (K or V v, layer l, KV head h) is s = (v * n_layer +
 * l) * n_head_kv + h, at s * slice_bytes in the page. */
static inline int hx_kvf_slice(const hx_ctx *c, int v, int l, int h)
{
    return (v * c->m->hp.n_layer + l) * c->m->hp.n_head_kv + h;
}

/* The header of c's geometry and keys (the model identity is computed on
 * first use), sum 0; seal sets the sum over it and tok (n_tokens ids). */
void hx_kvf_header_make(hx_ctx *c, int kind, int n_tokens, int n_pages,
                        hx_kvf_header *h);
void hx_kvf_header_seal(hx_kvf_header *h, const int32_t *tok);
/* 1 if h's sum matches it and tok. */
int hx_kvf_header_ok(const hx_kvf_header *h, const int32_t *tok);
/* Offset of record 0 after a header and n_tokens ids. */
off_t hx_kvf_records_at(int n_tokens);

/* Writes page record index at offset at of fd: the page's bytes (data
 * first; sums (n_slices) get their slices' checksums), then, after the
 * caller's hook point, the header (hx_kvf_put_head). 0, or -1 with errno. */
int hx_kvf_put_data(const hx_ctx *c, int fd, off_t at, const char *page,
                    uint64_t *sums);
int hx_kvf_put_head(const hx_ctx *c, int fd, off_t at, int index, int n_pos,
                    const uint64_t *sums);
/* Writes slice s (slice_bytes at buf) of the record at offset at, its
 * checksum into *sum (a record built slice by slice, header last). */
int hx_kvf_put_slice(const hx_ctx *c, int fd, off_t at, int s, const char *buf,
                     uint64_t *sum);
/* Reads record index at offset at into page (page_bytes), checking its
 * header and every slice; sums (or NULL) gets the slice sums and *n_pos
 * the positions it holds. 0; -1 damaged (short, torn, or a sum differs);
 * -2 when the read itself failed. */
int hx_kvf_get_page(const hx_ctx *c, int fd, off_t at, int index, char *page,
                    uint64_t *sums, int *n_pos);
/* Reads slice s of the record at offset at into buf (slice_bytes) and
 * checks it against sum: 0, -1 damaged, -2 read failed. */
int hx_kvf_get_slice(const hx_ctx *c, int fd, off_t at, int s, char *buf,
                     uint64_t sum);

/* ---- cache folders ---- */
/* Opens dir (creating it and its parents, mode 0700) as a directory
 * descriptor; a symbolic link as its last component, or a folder of
 * another owner, is refused. -1 with the reason in err. */
int hx_kvf_open_dir(const char *dir, hx_err *err);
/* Creates name in dirfd for writing: never through a link or an existing
 * file (O_EXCL | O_NOFOLLOW), mode 0600, locked (flock) while open so
 * that hx_kvf_sweep leaves it alone. -1 with errno. */
int hx_kvf_create(int dirfd, const char *name);
/* Removes the regular files of dirfd whose names contain `part` that no
 * process holds locked: what a writer killed mid-write left behind. */
void hx_kvf_sweep(int dirfd, const char *part);

#endif /* HX_KVFILE_H */
