/* mkembed_int.h: a small trained qwen3 model embedded in a wider, deeper
 * shape (modelfile/mkembed.c), for hx_mkmodel_write's embed_path. Internal to
 * modelfile/. */
#ifndef HX_MKEMBED_INT_H
#define HX_MKEMBED_INT_H

#include "base/base.h"
#include "engine/engine.h"
#include "modelfile/model_write.h"

typedef struct hx_embed hx_embed;

/* Opens the small model at path (kept open and mapped until
 * hx_embed_close) and checks that it fits the wide shape in p; sets p's
 * rope base, eps, context, tied output and n_vocab (at least the small
 * model's) from it. HX_ERR_INVALID for a shape it does not fit,
 * HX_ERR_FORMAT / HX_ERR_UNSUPPORTED for a file that is no qwen3 model. */
int hx_embed_open(const char *path, hx_mkmodel_params *p, hx_embed **out, hx_err *err);
void hx_embed_close(hx_embed *e); /* NULL is a no-op */
/* Its tokenizer (padded with unused tokens to p->n_vocab) and hearth.*
 * keys, and a general.name saying what the file is. */
int hx_embed_metadata(hx_gguf_writer *w, const hx_embed *e, hx_err *err);
/* hx_gguf_fill_fn body for one wide tensor t: the small weights placed,
 * zeros elsewhere, quantized to t's type. */
int hx_embed_fill(const hx_embed *e, const hx_gguf_tensor *t, void *buf);

#endif /* HX_MKEMBED_INT_H */
