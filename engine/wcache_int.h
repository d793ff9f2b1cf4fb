/* wcache_int.h: the engine's side of the weight cache (engine_ext.h
 * declares the cache; wcache.c, used by ctx.c, forward.c and moe.c). */
#ifndef HX_WCACHE_INT_H
#define HX_WCACHE_INT_H

#include "engine/model_int.h"

/* The bytes of matrix w (one of m's hx_wmat) to multiply by now: an owned
 * copy, a slot (between hx_wc_layer_begin and _end of its layer), or the
 * mapping for what the cache does not hold. */
const void *hx_wc_data(const hx_wcache *wc, const hx_wmat *w);

/* 1 when the output head streams through the slots (hx_wc_head). */
int hx_wc_head_streamed(const hx_wcache *wc);

#endif /* HX_WCACHE_INT_H */
