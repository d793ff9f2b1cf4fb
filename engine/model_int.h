/* model_int.h: engine-internal layout of a loaded model (weights pointing
 * into the GGUF mapping), shared by the loader and the forward pass. */
#ifndef HX_MODEL_INT_H
#define HX_MODEL_INT_H

#include "engine/engine_ext.h"

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

/* 1 if the forward pass can multiply by a matrix of this type. */
int hx_model_type_ok(int type);

#endif /* HX_MODEL_INT_H */
