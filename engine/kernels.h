/* kernels.h: dot products and matrix multiplication over the tensor types:
 * activation quantization, ISA selection, hx_matmul. Part of engine_ext.h
 * (the trainer multiplies by the base's weights with them). */
#ifndef HX_KERNELS_H
#define HX_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/quant.h"
#include "engine/threadpool.h"

/* ---- instruction sets ----
 * Every kernel has a scalar reference that always builds; AVX2 (+FMA,
 * F16C) and AVX-512 (F, BW, VL, VNNI; BF16 where present) versions are
 * compiled per function and picked at run time. HEARTH_ISA=scalar|avx2|
 * avx512 in the environment caps the choice (for tests and benchmarks).
 * On aarch64 the same three levels are scalar, NEON (ARMv8.0 Advanced
 * SIMD) and dotprod (NEON plus SDOT, when getauxval(AT_HWCAP) reports
 * ASIMDDP); HEARTH_ISA=neon|dotprod there. */
typedef enum hx_isa {
    HX_ISA_SCALAR = 0,
    HX_ISA_AVX2 = 1,
    HX_ISA_AVX512 = 2,
    HX_ISA_NEON = 1,    /* aarch64 */
    HX_ISA_DOTPROD = 2, /* aarch64 */
} hx_isa;
int hx_isa_detect(void);  /* best the CPU supports */
int hx_isa_current(void); /* in use: min(detected, HEARTH_ISA) */
/* Forces an ISA (clamped to what the CPU supports); returns the one in
 * effect. For tests and benchmarks; not thread-safe against running
 * kernels. */
int hx_isa_set(int isa);
/* "scalar", "avx2", "avx512"; on aarch64 "scalar", "neon", "dotprod" */
const char *hx_isa_name(int isa);

/* ---- activations ----
 * A weight type's dot multiplies it with activations of another type, as
 * ggml's CPU backend does (its vec_dot_type), so numbers match llama.cpp:
 *   F32 -> F32, F16 -> F16, BF16 -> BF16,
 *   Q4_0, Q8_0 -> Q8_0 (32 int8 and an fp16 scale per block, quantized as
 *                 ggml does; Hearth's in-memory block also carries the
 *                 scale as fp32 and the sum of the quants, see kernels.c),
 *   Q4_K, Q5_K, Q6_K -> Q8_K (hx_block_q8_K, exactly ggml's layout).
 * hx_act_type returns that type, or -1 if wtype has no matmul. */
int hx_act_type(int wtype);
int hx_matmul_supported(int wtype); /* 1 if hx_act_type(wtype) >= 0 */
/* Bytes of one activation row of n elements for weights of wtype (n a
 * multiple of wtype's block); 0 if unsupported. */
size_t hx_act_row_bytes(int wtype, int64_t n);
/* Quantizes one row of n floats to wtype's activation type. */
void hx_quantize_act(int wtype, const float *x, void *a, int64_t n);
/* N rows of K floats (row stride K) into A (row stride
 * hx_act_row_bytes(wtype, K)), split across the pool when N is large. */
void hx_quantize_act_rows(hx_threadpool *tp, int wtype, const float *X,
                          int64_t N, int64_t K, void *A);

/* *out = dot(w, a) over n elements: w one row of wtype, a one activation
 * row from hx_quantize_act(wtype, ...). Uses the current ISA. */
void hx_vec_dot(int wtype, int64_t n, float *out, const void *w,
                const void *a);
/* The same with a given ISA (clamped to the CPU's), for tests. */
void hx_vec_dot_isa(int isa, int wtype, int64_t n, float *out, const void *w,
                    const void *a);

/* ---- matrix multiplication ----
 * Y[N][M] = X[N][K] . W[M][K]^T. W is M rows of wtype, row stride
 * hx_type_row_bytes(wtype, K), used in place (e.g. from the mmap'd file),
 * never copied. X is float. Quantizes X once to the activation type, then
 * splits rows of W (and tokens) across the pool's threads. tp may be NULL
 * (single-threaded). K must be a multiple of wtype's block. */
void hx_matmul(hx_threadpool *tp, const void *W, int wtype, int64_t K,
               int64_t M, const float *X, int64_t N, float *Y);

/* One matmul over pre-quantized activations, for running several at once
 * (Q, K and V share their input; gate and up; the experts of a MoE layer)
 * in one pool run with one quantization of the input:
 *   Y[i*ldy + m] = dot(W row m, A row (a_idx ? a_idx[i] : i))
 * for i < N, m < M. A rows come from hx_quantize_act_rows(wtype, ...), row
 * stride hx_act_row_bytes(wtype, K). */
typedef struct hx_mm_job {
    const void *W;        /* M rows of wtype (borrowed) */
    int wtype;
    int64_t K, M;
    const void *A;        /* quantized activations (borrowed) */
    const int32_t *a_idx; /* N row numbers into A, or NULL for 0..N-1 */
    int64_t N;
    float *Y;             /* N rows of ldy floats; columns [0, M) written */
    int64_t ldy;
} hx_mm_job;
/* Runs all jobs, splitting their rows across the pool; returns when all
 * are done. Jobs must not write overlapping outputs. */
void hx_matmul_jobs(hx_threadpool *tp, const hx_mm_job *jobs, int n_jobs);

/* MoE convenience: the expert `expert` of a 3-D expert tensor W
 * [n_expert][M][K] (ggml ne = {K, M, n_expert}) applied to the n_tok rows
 * X + tok[i]*ldx (float, K each): Y[i*ldy + m] for i < n_tok. Quantizes
 * the listed rows, then one hx_matmul_jobs run. For decode prefer
 * quantizing once and passing one hx_mm_job per expert. */
void hx_matmul_expert(hx_threadpool *tp, const void *W, int wtype, int64_t K,
                      int64_t M, int64_t expert, const float *X, int64_t ldx,
                      const int32_t *tok, int64_t n_tok, float *Y,
                      int64_t ldy);

#endif /* HX_KERNELS_H */
