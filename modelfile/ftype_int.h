/* ftype_int.h: modelfile-internal table of whole-file types (F32 .. Q4_K_M) with
 * llama.cpp's LLAMA_FTYPE numbers and the _M mixes' layer rule. */
#ifndef HX_FTYPE_INT_H
#define HX_FTYPE_INT_H

typedef struct hx_ftype_info {
    const char *name;
    int type;      /* HX_TYPE_*: the base type of the file's matrices */
    int mix_m;     /* 1: an "_M" mix (some matrices get more bits) */
    int file_type; /* llama.cpp's LLAMA_FTYPE, written as general.file_type */
    int preset;    /* 1: a target hearth quantize accepts */
} hx_ftype_info;

/* The entry named name (static storage), or NULL. Defined in quantize.c. */
const hx_ftype_info *hx_ftype_find(const char *name);

/* The HX_TYPE_* of a single-type entry (F32 .. Q6_K, not an _M mix), the
 * types a per-tensor override may name; -1 for any other name. */
static inline int hx_ftype_single(const char *name)
{
    const hx_ftype_info *f = hx_ftype_find(name);
    return f && !f->mix_m ? f->type : -1;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third layer between get more bits in the _M mixes. */
static inline int hx_ftype_more_bits(int il, int n)
{
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

#endif
