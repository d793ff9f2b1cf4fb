/* model_int.h: engine-internal layout of a loaded model (weights pointing
 * into the GGUF mapping), shared by the loader and the forward pass. */
#ifndef HX_MODEL_INT_H
#define HX_MODEL_INT_H

#include "engine/model.h"

/* A weight matrix used in place: rows of `cols` elements of `type`, for a
 * 3-D expert tensor `n_mat` matrices of `rows` rows each, back to back. */
typedef struct hx_wmat {
    const void *data; /* into the mapping; NULL when the tensor is absent */
    int type;         /* hx_type */
    int64_t cols;     /* ne[0]: the input width K */
    int64_t rows;     /* ne[1]: the output width M */
    int64_t n_mat;    /* ne[2]: experts (1 for a plain matrix) */
    size_t row_bytes;
} hx_wmat;

/* Pointer to matrix e of an expert tensor. */
static inline const void *hx_wmat_at(const hx_wmat *w, int64_t e)
{
    return (const char *)w->data + (size_t)e * (size_t)w->rows * w->row_bytes;
}
/* Row r of matrix e of w (e = 0 for a plain matrix). The trainer reads
 * frozen weights through these two only, so that a weight cache can
 * stand behind them. */
static inline const void *hx_wmat_row(const hx_wmat *w, int64_t e, int64_t r)
{
    return (const char *)hx_wmat_at(w, e) + (size_t)r * w->row_bytes;
}

typedef struct hx_layer {
    float *attn_norm;          /* (n_embd) */
    hx_wmat wq;                /* (n_head*head_dim, n_embd) */
    hx_wmat wk, wv;            /* (n_head_kv*head_dim, n_embd) */
    hx_wmat wo;                /* (n_embd, n_head*head_dim) */
    float *bq, *bk, *bv;       /* qwen2 biases, or NULL */
    float *q_norm, *k_norm;    /* qwen3: (head_dim), or NULL */
    float *ffn_norm;           /* (n_embd) */
    hx_wmat ffn_gate, ffn_up;  /* dense: (n_ff, n_embd) */
    hx_wmat ffn_down;          /* dense: (n_embd, n_ff) */
    hx_wmat ffn_gate_inp;      /* MoE router: (n_expert, n_embd) */
    hx_wmat gate_exps, up_exps; /* (n_expert, n_ff_exp, n_embd) */
    hx_wmat down_exps;         /* (n_expert, n_embd, n_ff_exp) */
} hx_layer;

struct hx_model {
    hx_gguf *gguf;        /* owns the mapping the weights point into */
    hx_vocab *vocab;      /* NULL without a tokenizer */
    hx_hparams hp;
    float rope_freq_scale; /* 1 / linear rope scaling factor */
    hx_wmat tok_embd;     /* (n_vocab, n_embd) */
    float *output_norm;   /* (n_embd) */
    hx_wmat output;       /* (n_vocab, n_embd); == tok_embd when tied */
    hx_layer *layers;     /* n_layer */
    float *small;         /* owned F32 copies of all norms and biases */
    size_t small_cap;     /* floats in small */
    size_t weight_bytes;
    int64_t n_params;
};

/* MoE routing of one token from its router logits p (n_expert, replaced by
 * the softmax): the n_used best experts into sel (best first) and their
 * weights into w, renormalised to sum 1 when norm. (forward.c) */
void hx_moe_route(float *p, int n_expert, int n_used, int norm, int32_t *sel,
                  float *w);

/* 1 if the forward pass can multiply by a matrix of this type. */
int hx_model_type_ok(int type);

#endif /* HX_MODEL_INT_H */
