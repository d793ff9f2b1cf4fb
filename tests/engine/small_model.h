/* small_model.h: the engine tests' small model in the real files' layout
 * (Q4_K_M, 3 layers of 256, 8 experts of which 2 used for qwen3moe),
 * written to a folder and loaded. */
#ifndef HX_TEST_SMALL_MODEL_H
#define HX_TEST_SMALL_MODEL_H

#include <stdio.h>

#include "engine/engine.h"
#include "modelfile/model_write.h"

/* The parameters of the small model of arch with n_vocab tokens and a
 * context of n_ctx (a test changes what it needs before writing). */
__attribute__((unused)) static hx_mkmodel_params small_model_params(const char *arch, int n_vocab,
                                                                    int n_ctx)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = arch;
    p.ftype = "Q4_K_M";
    p.n_vocab = n_vocab;
    p.n_layer = 3;
    p.n_embd = 256;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 64;
    p.n_ff = 512;
    p.n_expert = 8;
    p.n_expert_used = 2;
    p.n_ff_exp = 256;
    p.n_ctx = n_ctx;
    return p;
}

/* dir/name written as small_model_params says, then loaded (the caller
 * frees it); NULL with the reason printed. */
__attribute__((unused)) static hx_model *small_model(const char *dir, const char *arch,
                                                     const char *name, int n_vocab, int n_ctx)
{
    hx_mkmodel_params p = small_model_params(arch, n_vocab, n_ctx);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hx_err err = {0};
    hx_model *m = NULL;
    if (hx_mkmodel_write(&p, path, &err) || hx_model_load(path, NULL, &m, &err))
        printf("# model %s: %s\n", name, err.msg);
    return m;
}

#endif /* HX_TEST_SMALL_MODEL_H */
