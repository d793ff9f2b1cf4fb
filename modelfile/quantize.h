/* quantize.h: model quantization (hearth quantize): llama.cpp-like type
 * presets, per-tensor overrides, streaming tensor by tensor, and importance
 * matrices collected by running the model over calibration text. Part of
 * modelfile.h. */
#ifndef HX_QUANTIZE_H
#define HX_QUANTIZE_H

#include <stdint.h>

#include "base/base.h"
#include "engine/engine.h"

/* ---- importance matrices ----
 * Per weight matrix, the mean of the squared input activations of each
 * column (llama.cpp's imatrix), collected over calibration text; for a
 * 3-D MoE expert tensor, one such vector per expert (over the tokens
 * routed to it), back to back. Stored as a GGUF file: one F32 tensor per
 * weight, named like it (length ne[0], times n_expert for experts),
 * and metadata general.type = "imatrix", hearth.imatrix.version,
 * .n_tokens, .n_chunks, .dataset_bytes, .datasets (file names),
 * .counts (tokens seen by each tensor, in tensor order). */
#define HX_IMATRIX_VERSION 1
typedef struct hx_imatrix hx_imatrix;

/* Reads an imatrix file. HX_ERR_FORMAT for a GGUF that is not an imatrix
 * or has a malformed entry, HX_ERR_UNSUPPORTED for another version (both
 * named in err). *out is owned by the caller. */
int hx_imatrix_load(const char *path, hx_imatrix **out, hx_err *err);
/* Writes it atomically. */
int hx_imatrix_save(const hx_imatrix *m, const char *path, hx_err *err);
void hx_imatrix_free(hx_imatrix *m); /* NULL is a no-op */
/* The n_cols importances of a weight (ne[0] * n_expert for experts), or
 * NULL when absent or of another width. Borrowed, valid while m lives. */
const float *hx_imatrix_find(const hx_imatrix *m, const char *tensor,
                             int64_t n_cols);
int hx_imatrix_n_entries(const hx_imatrix *m);
int64_t hx_imatrix_n_tokens(const hx_imatrix *m);

typedef struct hx_calib_params {
    int n_chunk;   /* tokens per chunk (KV cache reset between); 0 = 512 */
    int n_threads; /* 0 = number of online CPUs */
    /* 1: the text holds the model's control tokens (<|im_start|>...) to
     * be read as such, e.g. conversations rendered with its chat
     * template; 0 (default): plain text, read literally. */
    int parse_special;
    /* Called after each chunk (may be NULL). */
    void (*progress)(void *user, int64_t tokens_done, int64_t tokens_total);
    void *progress_user;
} hx_calib_params;
hx_calib_params hx_calib_default_params(void);

/* Runs the model at model_path over the text files (tokenized with the
 * model's vocabulary, cut in chunks) and collects the importance matrix
 * of every matrix the forward pass multiplies by, MoE experts and the
 * output head included (a tied head under token_embd.weight's name); each
 * from that matrix's own input (attn_output: the attention output,
 * ffn_down: the SwiGLU output, the head: the final-normed state).
 * Errors: the model's, a file's (named), HX_ERR_INVALID for no text.
 * *out is owned by the caller. */
int hx_imatrix_calibrate(const char *model_path, const char *const *files,
                         int n_files, const hx_calib_params *p,
                         hx_imatrix **out, hx_err *err);

/* ---- quantization ---- */
typedef struct hx_quantize_params {
    /* "Q4_K_M", "Q5_K_M" (llama.cpp's mixes), or one type for every
     * matrix: "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K". As llama.cpp: the
     * output head (token_embd when tied) is Q6_K except for Q8_0; in the
     * _M mixes attn_v and ffn_down are Q6_K in the first and last eighth
     * of the layers and every third layer between; norms, biases, the MoE
     * router and other 1-D tensors keep their type. */
    const char *ftype;
    /* "GLOB=TYPE" (fnmatch on the full tensor name, e.g.
     * "*attn_output*=Q8_0"), applied after the preset, in order (the last
     * match wins). TYPE: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K. */
    const char *const *overrides;
    int n_overrides;
    const hx_imatrix *imatrix; /* borrowed, may be NULL */
    int n_threads;             /* 0 = number of online CPUs */
    /* Called before each tensor is written (may be NULL): tensor i of n,
     * and the elements of the tensors before it out of all (for an ETA). */
    void (*progress)(void *user, int i, int n, const char *name,
                     int type_in, int type_out, int64_t elems_done,
                     int64_t elems_total);
    void *progress_user;
} hx_quantize_params;
hx_quantize_params hx_quantize_default_params(void);

typedef struct hx_quantize_stats {
    int n_tensors;
    int count[HX_TYPE_COUNT];       /* tensors per output type */
    uint64_t bytes[HX_TYPE_COUNT];  /* their data bytes */
    int64_t elems[HX_TYPE_COUNT];   /* their elements */
    uint64_t bytes_in, bytes_out;   /* tensor data of the two files */
    uint64_t file_bytes;            /* size of the output file */
    int64_t n_elems;
    int n_requant;  /* tensors already quantized, requantized through F32 */
    int n_fallback; /* rows not a multiple of the block: a wider type */
    int n_imatrix;  /* tensors quantized with importances (the quantized
                     * types; F16/BF16 rounding does not use them) */
    int n_imatrix_missing; /* quantized matrices the imatrix has no entry
                            * of that width for */
} hx_quantize_stats;

/* Quantizes in_path into out_path (through hx_out: atomically, a device
 * written through, out_path the same file as in_path refused with
 * HX_ERR_INVALID before anything is read), streaming one
 * tensor at a time through the GGUF writer (memory: about the largest
 * output tensor plus one row per thread; input pages are dropped after
 * use). Metadata is copied, general.file_type and
 * general.quantization_version (2) set. Errors: HX_ERR_INVALID for an
 * unknown ftype or a bad override (named), HX_ERR_FORMAT for a GGUF that
 * is not a model (no general.architecture or no weight matrix),
 * HX_ERR_UNSUPPORTED for an input type Hearth cannot read; the reader's
 * and writer's otherwise. stats may be NULL. */
int hx_quantize_model(const char *in_path, const char *out_path,
                      const hx_quantize_params *p, hx_quantize_stats *stats,
                      hx_err *err);

/* llama.cpp's LLAMA_FTYPE number of a preset name, or -1 if unknown. */
int hx_quantize_ftype_number(const char *ftype);

#endif /* HX_QUANTIZE_H */
