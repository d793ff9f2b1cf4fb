/* train_int.h: lora-internal layout of the trainer (parameters, linear
 * layers, saved activations) and the forward/backward ops, for the tests. */
#ifndef HX_TRAIN_INT_H
#define HX_TRAIN_INT_H

#include <pthread.h>
#include <stddef.h>

#include "engine/engine_ext.h"
#include "lora/lora.h"

/* ---- ops (ops.c): every backward ACCUMULATES (+=) into its outputs ---- */

/* y = x * r * g with r = 1/sqrt(mean(x^2) + eps) as the engine computes
 * it; *r saved for the backward. */
void hx_tr_rmsnorm_fwd(float *y, float *r, const float *x, const float *g, int n,
                       float eps);
/* dx += r (u - x^ mean(u x^)), u = g dy, x^ = r x; dg += dy x^ (dg may be
 * NULL for a frozen gain). */
void hx_tr_rmsnorm_bwd(float *dx, float *dg, const float *dy, const float *x,
                       float r, const float *g, int n);
/* NEOX RoPE of x (d) by the (cos, sin) pairs cs; backward rotates by -phi
 * (in place on dy). */
void hx_tr_rope_fwd(float *x, const float *cs, int d);
void hx_tr_rope_bwd(float *dy, const float *cs, int d);
/* Table of (cos, sin) pairs for positions 0..n_pos, d per position, with
 * the engine's float recurrence (so training matches inference). */
void hx_tr_rope_table(float *cs, int n_pos, int d, float base);
/* s = silu(a) * b; backward: da += ds b silu'(a), db += ds silu(a). */
void hx_tr_swiglu_fwd(float *s, const float *a, const float *b, size_t n);
void hx_tr_swiglu_bwd(float *da, float *db, const float *ds, const float *a,
                      const float *b, size_t n);
/* Cross-entropy of one row of logits z (V) against target y: returns
 * lse(z) - z[y]; with dz != NULL adds scale * (softmax(z) - onehot(y)) to
 * dz, or stores it when dz == z (the logits are then overwritten). */
double hx_tr_xent(const float *z, int V, int y, float scale, float *dz);
/* The same against a distribution: q[j] on token y[j] (k of them, q
 * summing to 1): returns sum q[j] (lse(z) - z[y[j]]) (the KL divergence
 * from q plus q's entropy), the gradient scale * (softmax(z) - q). */
double hx_tr_xent_soft(const float *z, int V, const int32_t *y, const float *q, int k,
                       float scale, float *dz);
/* sum of a[i] b[i] over n in eight partial sums, so the compiler can
 * vectorize it without -ffast-math, always in the same order (the scalar
 * dot of matmul.c and ops.c). */
static inline float tr_dot(const float *a, const float *b, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] += a[i + l] * b[i + l];
    float t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

/* Attention over one sequence of T tokens. q (T, H, d), k and v (T, Hk,
 * d), o (T, H, d), lse (T, H); token i sees keys [0, pre[i]) (a shared
 * prefix; pre[i] <= start[i]) and [start[i], i]. */
typedef struct tr_attn {
    int T, H, Hk, d;
    const int32_t *start, *pre;
    int bf16; /* every product (Q K^T, P V, dO V^T, dS K, dS^T Q, P^T dO)
               * from bfloat16 operands, F32 sums (AVX512-BF16; the
               * blocked path only, d <= 256) */
} tr_attn;
/* Floats of per-thread scratch the attention ops need for T tokens of
 * head dimension d. */
size_t hx_tr_attn_scratch(int T, int d);
void hx_tr_attn_fwd_head(const tr_attn *a, int h, const float *q, const float *k,
                         const float *v, float *o, float *lse, float *scratch);
/* Backward of the n_rep query heads of KV head g: dq of those heads, dk and
 * dv of g accumulate. */
void hx_tr_attn_bwd_group(const tr_attn *a, int g, const float *q,
                          const float *k, const float *v, const float *o,
                          const float *lse, const float *dout, float *dq,
                          float *dk, float *dv, float *scratch);

/* ---- scratch.c: a buffer kept between products ---- */
/* A product's working memory, grown as needed and held until released;
 * its lock serializes the products that share it (several trainers). */
typedef struct tr_scratch {
    pthread_mutex_t mu;
    void *buf; /* 64-byte aligned, owned */
    size_t cap; /* bytes */
} tr_scratch;
#define TR_SCRATCH_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0}
/* Locks s and returns its buffer grown to at least bytes (contents not
 * kept); NULL, unlocked, when memory is short. */
void *hx_tr_scratch_lock(tr_scratch *s, size_t bytes);
void hx_tr_scratch_unlock(tr_scratch *s);
/* Frees the buffer (under the lock). */
void hx_tr_scratch_release(tr_scratch *s);

/* ---- matrices (matmul.c) ---- */
/* Rows of a weight: F32 in memory, or a frozen hx_wmat in its own type. */
typedef struct tr_w {
    const float *f;    /* rows x cols F32, or NULL */
    const hx_wmat *q;  /* used when f is NULL (rows read by hx_wmat_row) */
    int rows, cols;
    int bf16;          /* F32 products with it (and its gradient) take
                        * bfloat16 operands (hx_tr_gemm_bf16) where the CPU can */
    int mat;           /* the matrix of a 3-D q (a MoE expert); 0 */
} tr_w;

/* y (n, rows) = alpha * x (n, cols) . W^T, or += when acc. */
void hx_tr_mm_fwd(hx_threadpool *tp, const tr_w *w, const float *x, int n,
                  float *y, float alpha, int acc, float *scratch);
/* dx (n, cols) += alpha * dy (n, rows) . W */
void hx_tr_mm_bwd_x(hx_threadpool *tp, const tr_w *w, const float *dy, int n,
                    float *dx, float alpha, float *scratch);
/* dW (rows, cols) += alpha * dy^T . x (operands in bfloat16 when bf16) */
void hx_tr_mm_bwd_w(hx_threadpool *tp, float *dw, int rows, int cols,
                    const float *dy, const float *x, int n, float alpha, int bf16);
/* Y (n, M) = alpha * A (n, K) . B (K, M), or += when acc (gemm.c). */
void hx_tr_gemm(hx_threadpool *tp, const float *A, int n, int K, const float *B,
                int M, float *Y, float alpha, int acc);
/* C (m, n) = alpha * op(A) (m, k) . op(B) (k, n), or += when acc: A(i, p)
 * is a[i*lda + p], or a[p*lda + i] when ta; B(p, j) is b[p*ldb + j], or
 * b[j*ldb + p] when tb. Packed, register-blocked, on the pool; every
 * output one sum over k in order. -1 (nothing done) when out of memory. */
int hx_tr_gemm_ex(hx_threadpool *tp, int m, int n, int k, float alpha,
                  const float *a, int lda, int ta, const float *b, int ldb, int tb,
                  float *c, int ldc, int acc);
/* The same product by a plain double-accumulating loop (tests, fallback). */
void hx_tr_gemm_ref(int m, int n, int k, float alpha, const float *a, int lda,
                    int ta, const float *b, int ldb, int tb, float *c, int ldc,
                    int acc);
/* Frees hx_tr_gemm_ex's packing buffer (it is kept between products). */
void hx_tr_gemm_release(void);
/* The same product with both operands rounded to bfloat16 (nearest, ties
 * to even) and F32 sums of AVX512-BF16 pair products (gemm_bf16.c): about
 * twice hx_tr_gemm_ex's speed, every output one sum in a fixed order. -1
 * (nothing done) when out of memory or when hx_tr_gemm_bf16_available() is 0
 * (no AVX512-BF16, or HEARTH_ISA below avx512). */
int hx_tr_gemm_bf16(hx_threadpool *tp, int m, int n, int k, float alpha,
                    const float *a, int lda, int ta, const float *b, int ldb, int tb,
                    float *c, int ldc, int acc);
int hx_tr_gemm_bf16_available(void);
/* 1 if bfloat16 products are faster than F32 on this CPU: the three
 * products of a linear layer of n_in x n_out (forward, input and weight
 * gradient) over 1,024 tokens, each precision's best of 3 (matmul.c). */
int hx_tr_bf16_faster(hx_threadpool *tp, int n_in, int n_out);
/* The products a checkpoint records (version 3 on; 0: not recorded). */
enum { TR_PRODUCTS_F32 = 1, TR_PRODUCTS_BF16 = 2 };
/* Frees hx_tr_gemm_bf16's buffer (it is kept between products). */
void hx_tr_gemm_bf16_release(void);
/* Frees the buffers tr_mm_* keep between products (dequantized blocks of
 * frozen weights, and hx_tr_gemm_release's). */
void hx_tr_mm_release(void);
/* Rows of a frozen quantized weight tr_mm_* dequantize per product (into
 * a buffer of that many rows kept between calls); 0 for F32 weights. */
int hx_tr_mm_block_rows(const tr_w *w);
/* Floats of per-thread scratch tr_mm_* need for a matrix of cols. */
size_t hx_tr_mm_scratch(int cols);

/* A linear layer: base W (trainable when dw != NULL) plus optional LoRA. */
typedef struct tr_lin {
    tr_w w;
    float *dw;
    float *a, *b, *da, *db; /* (r, in), (out, r) or NULL */
    int r;
    float s;
} tr_lin;

/* y = W x + s B (A x); u (n, r) saved when LoRA. */
void hx_tr_lin_fwd(hx_threadpool *tp, const tr_lin *l, const float *x, int n,
                   float *y, float *u, float *scratch);
/* Backward: weight grads += and dx += (dx may be NULL); du: (n, r) temp. */
void hx_tr_lin_bwd(hx_threadpool *tp, const tr_lin *l, const float *x,
                   const float *u, const float *dy, int n, float *dx, float *du,
                   float *scratch);

/* ---- the trainer ---- */
typedef struct tr_tensor {
    char name[80];
    int n_dims;
    int64_t ne[2];  /* GGUF order: ne[0] = columns */
    size_t off, n;  /* in the flat buffers */
    int decay;      /* AdamW weight decay applies */
} tr_tensor;

typedef struct tr_layer {
    const float *attn_norm, *q_norm, *k_norm, *ffn_norm;
    float *d_attn_norm, *d_q_norm, *d_k_norm, *d_ffn_norm; /* or NULL */
    tr_lin lin[7]; /* q, k, v, o, gate, up, down (HX_LORA_* bit order;
                    * a MoE layer has no gate, up, down: rows 0) */
    tr_w router;   /* MoE: (n_expert, n_embd), frozen */
    const hx_wmat *exps[3]; /* MoE: gate, up, down experts, frozen */
} tr_layer;
enum { L_Q, L_K, L_V, L_O, L_GATE, L_UP, L_DOWN };

/* Activations of one layer for n tokens (all saved, or a workspace that
 * layers share: see hx_tr_layout). */
typedef struct tr_acts {
    float *x, *r1, *n1, *qp, *rq, *kp, *rk, *q, *k, *v, *lse, *o, *h, *r2,
        *n2, *a, *b, *s; /* a, b, s: (n, tr_ffn_width); MoE: the (token,
                          * expert) pairs' rows of n_ff_exp, grouped by
                          * expert */
    float *u[7]; /* LoRA A x per linear, or NULL */
    /* MoE: router probabilities (n, n_expert), the chosen experts (n,
     * n_used; int32 in float slots) and their weights, the pairs' expert
     * outputs (n * n_used, n_embd) in the pairs' order */
    float *rp, *ew, *ey;
    int32_t *sel;
} tr_acts;

/* FFN activations per token: n_ff, or for a MoE n_used experts' n_ff_exp. */
static inline size_t tr_ffn_width(const hx_hparams *hp)
{
    return hp->n_expert ? (size_t)hp->n_expert_used * (size_t)hp->n_ff_exp : (size_t)hp->n_ff;
}

/* The MoE FFN's workspace, shared by the layers (actmem.c carves it). */
typedef struct tr_moe_ws {
    float *x, *dx;     /* (n, n_embd): one expert's gathered rows, gradients */
    float *dz, *dw;    /* (n, n_expert), (n, n_used): router logits', weights' gradients */
    int32_t *ptok;     /* (n * n_used) token of each pair, grouped by expert */
    int32_t *pslot;    /* (n * n_used) pair of (token, slot) */
    int32_t *cnt, *first; /* (n_expert) pairs of each expert; (2 n_expert)
                           * its first, then a copy being filled */
} tr_moe_ws;

struct hx_trainer {
    hx_hparams hp;
    int lora;
    hx_model *base;        /* LoRA mode: the frozen model; NULL otherwise */
    hx_wcache *wc;         /* its weights within a budget, or NULL: mapped */
    size_t wc_bytes;       /* the cache's copies and slots */
    hx_threadpool *tp;
    int n_threads;
    /* trainable state, flat */
    size_t n_params;
    float *params, *grads, *m, *v;
    tr_tensor *tensors;
    int n_tensors;
    /* model view */
    tr_w embd;             /* token_embd (n_vocab, n_embd) */
    float *d_embd;         /* or NULL */
    const float *out_norm;
    float *d_out_norm;
    tr_lin head;           /* output, or token_embd when tied */
    tr_layer *layers;
    float *rope_cs;        /* (n_ctx, head_dim) */
    /* activations of the current pass, carved by hx_tr_reserve (actmem.c) */
    tr_acts *acts;         /* n_layer */
    float *xf, *rf, *nf;   /* final residual, its norm */
    float *tmp;            /* (n, C) temporary of the forward */
    float *bw[12];         /* backward temporaries (fwdbwd.c) */
    tr_moe_ws moe;         /* MoE FFN workspace (carved with the above) */
    float *hg, *hz, *hdg;  /* head chunk: gathered nf rows, their logits
                            * then dz, and d(rows) (training only) */
    int head_chunk;        /* rows per head chunk (hx_tr_head_rows) */
    float *mem;            /* one allocation for all the above */
    size_t mem_floats;     /* its size */
    int recompute;         /* HX_RECOMPUTE_* (hx_trainer_set_recompute) */
    int bf16;              /* attention scores in bfloat16 (hx_trainer_set_bf16) */
    int ckpt_products;     /* TR_PRODUCTS_* of the checkpoint loaded, or 0 */
    int head_rows;         /* > 0: rows per head chunk (tests); 0: auto */
    float *scratch;        /* per thread */
    size_t scratch_n;      /* floats per thread */
    int32_t *start, *pre, *pos, *gather;
    int idx_cap;           /* tokens the four index arrays above hold */
    int rank;              /* LoRA rank, 0 in full mode */
    /* training state */
    int step;
    uint64_t rng;
    uint64_t data_pos;
    int sched_steps;       /* schedule length fixed by a time budget, or 0 */
    double train_seconds;  /* wall seconds of hx_train_run so far */
    float *losses;
    int losses_cap;
    /* keep (keep.c): per layer and linear (n_layer * 7, NULL where not
     * adapted) the sum of x x^T over the generic tokens' inputs, and of
     * ||W x||^2; the penalty's weight and last value */
    float **keep_m;
    double *keep_e;
    int64_t keep_tokens;
    double keep_lambda, keep_value;
    int keep_collecting;   /* the forward adds to the sums */
    const uint8_t *keep_mask; /* of those, only the positions set here */
    int keep_failed;       /* out of memory while adding */
    hx_err err;
};

/* How a pass keeps its activations (actmem.c). */
enum {
    TR_FWD,  /* forward only: one layer's activations at a time, the
              * residual stream overwritten in place */
    TR_SAVE, /* training: every layer's activations saved */
    TR_CKPT  /* training: each layer's input saved; one layer's workspace,
              * its activations recomputed in the backward */
};
/* The training layout for n tokens per micro-batch: TR_CKPT for LoRA (a
 * frozen base), or when saving everything would exceed TR_SAVE_BUDGET
 * bytes; hx_trainer_set_recompute overrides. */
#define TR_SAVE_BUDGET ((size_t)1 << 30)
int hx_tr_layout(const hx_trainer *tr, int n);
/* Rows per chunk of the loss head: logits of at most
 * min(n, rows + 7) rows at a time (a chunk never leaves fewer than 8 rows
 * behind, so every chunk takes the same product path as the whole). */
int hx_tr_head_rows(const hx_trainer *tr);
/* Linear i (q, k, v, o, gate, up, down) of the first layer that has a
 * LoRA on it, or NULL when none has: every adapted layer has the same
 * shapes and rank (the adapter may skip the first layers). */
const tr_lin *hx_tr_lora_lin(const hx_trainer *tr, int i);
/* Carves activations of a pass of n tokens (n_seq sequences of T) in
 * layout, growing the block when needed. */
int hx_tr_reserve(hx_trainer *tr, int n, int T, int layout, hx_err *err);
/* Whole model forward (fwdbwd.c): saves activations; logits of every token
 * to logits when non-NULL. Loss and backward by tr_backward. */
int hx_tr_forward(hx_trainer *tr, const hx_batch *b, float *logits,
                  double *loss_sum, int *n_count, int backward, double norm,
                  hx_err *err);
/* First step of a WSD schedule's decay: the last decay_frac of n_steps
 * (at least one step). */
int hx_tr_wsd_decay_start(const hx_opt_params *o);
/* A standard normal draw (Box-Muller over hx_splitmix64(s)). */
double hx_tr_rng_normal(uint64_t *s);
/* keep.c: adds linear i of layer l's inputs x and outputs y (n tokens) to
 * the sums; adds the penalty's gradient to the LoRA gradients (HX_OK, or
 * HX_ERR_NOMEM); frees the sums. */
void hx_tr_keep_add(hx_trainer *tr, int l, int i, const float *x, const float *y, int n);
int hx_tr_keep_grad(hx_trainer *tr);
void hx_tr_keep_free(hx_trainer *tr);
/* Appends a step's loss to the history. */
int hx_tr_push_loss(hx_trainer *tr, float loss);

/* ---- the MoE FFN (moe.c): softmax router, top-k experts, renormalised
 * weights, SwiGLU experts, all frozen; fwdbwd.c runs the SwiGLU between
 * the halves ---- */
/* Router and the experts' gate and up of layer l on its n2 (n rows):
 * rp, sel, ew, and the pairs' a and b. */
void hx_tr_moe_up(hx_trainer *tr, int l, int n);
/* The experts' down of the pairs' s, summed per token by weight into out
 * (n, n_embd). */
void hx_tr_moe_down(hx_trainer *tr, int l, int n, float *out);
/* Backward of hx_tr_moe_down from dout (n, n_embd): ds (the pairs' rows)
 * +=, and the routing weights' gradient for hx_tr_moe_up_bwd. */
void hx_tr_moe_down_bwd(hx_trainer *tr, int l, int n, const float *dout, float *ds);
/* Backward of hx_tr_moe_up: dn2 (n, n_embd) += the gradient through the
 * experts (from the pairs' da, db) and through the router's weights (the
 * top-k choice taken as fixed). */
void hx_tr_moe_up_bwd(hx_trainer *tr, int l, int n, const float *da, const float *db,
                   float *dn2);

#endif /* HX_TRAIN_INT_H */
