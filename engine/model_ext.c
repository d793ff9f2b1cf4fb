/* model_ext.c: views of a loaded model's weights for the engine's
 * extensions (engine_ext.h): the trainer reads the base it adapts here. */
#include "engine/model_int.h"

const hx_wmat *hx_model_weight(const hx_model *m, int il, int kind)
{
    if (kind == HX_WEIGHT_TOK_EMBD) return &m->tok_embd;
    if (kind == HX_WEIGHT_OUTPUT) return &m->output;
    if (il < 0 || il >= m->hp.n_layer) return NULL;
    const hx_layer *L = &m->layers[il];
    switch (kind) {
    case HX_WEIGHT_Q: return &L->wq;
    case HX_WEIGHT_K: return &L->wk;
    case HX_WEIGHT_V: return &L->wv;
    case HX_WEIGHT_O: return &L->wo;
    case HX_WEIGHT_FFN_GATE: return &L->ffn_gate;
    case HX_WEIGHT_FFN_UP: return &L->ffn_up;
    case HX_WEIGHT_FFN_DOWN: return &L->ffn_down;
    case HX_WEIGHT_ROUTER: return &L->ffn_gate_inp;
    case HX_WEIGHT_GATE_EXPS: return &L->gate_exps;
    case HX_WEIGHT_UP_EXPS: return &L->up_exps;
    case HX_WEIGHT_DOWN_EXPS: return &L->down_exps;
    default: return NULL;
    }
}

const float *hx_model_norm(const hx_model *m, int il, int kind)
{
    if (kind == HX_NORM_OUTPUT) return m->output_norm;
    if (il < 0 || il >= m->hp.n_layer) return NULL;
    const hx_layer *L = &m->layers[il];
    switch (kind) {
    case HX_NORM_ATTN: return L->attn_norm;
    case HX_NORM_FFN: return L->ffn_norm;
    case HX_NORM_Q: return L->q_norm;
    case HX_NORM_K: return L->k_norm;
    default: return NULL;
    }
}

float hx_model_rope_freq_scale(const hx_model *m)
{
    return m->rope_freq_scale;
}
