/* wcache_int.h: the weight cache of a context whose memory cap is below its
 * model's weights (engine-internal; wcache.c, used by forward.c and moe.c). */
#ifndef HX_WCACHE_INT_H
#define HX_WCACHE_INT_H

#include "engine/model_int.h"

/* What every token uses is copied once into owned memory (attention,
 * norms, the MoE router, the output head); the rest lives in the file and
 * passes through a fixed number of slots filled by I/O threads with pread
 * (O_DIRECT where the file system allows it, so the page cache keeps
 * nothing):
 * - MoE: an item is one expert of one layer (its gate, up and down
 *   matrices); each layer has its own slots, evicted least recently used.
 * - Dense: an item is one layer, or a run of the output head's rows; a
 *   token walks them all in order, so the first items that fit stay
 *   resident ("pinned") and the others stream through a ring of slots,
 *   each read while the one before it computes.
 * Items are read into the same bytes the file holds, so the kernels, and
 * the tokens, are those of an uncapped run. */
typedef struct hx_wcache hx_wcache;

/* How a memory budget for weights is spent (hx_wc_plan_make). */
typedef struct hx_wc_plan {
    size_t resident;   /* owned copies: what every token uses, pinned items */
    size_t cache;      /* slots */
    size_t min_cache;  /* the fewest slots it can run with, in bytes */
    int n_items;       /* experts (all layers), or layers + head runs */
    int n_pinned;      /* dense: items held resident */
    int n_slots;       /* all slots */
    int slots_min;     /* MoE: slots of each layer */
    int head_rows;     /* dense: rows of a head run */
} hx_wc_plan;

/* Counters of a cache's life (hx_wc_stats). */
typedef struct hx_wc_stats {
    uint64_t uses;           /* items a computation used (resident ones too) */
    uint64_t misses;         /* reads started (prefetches included) */
    uint64_t bytes_read;     /* from the file, alignment included */
    uint64_t items_read;
    size_t held, held_peak;  /* bytes of slots holding or reading an item */
    size_t budget;           /* bytes of all slots: held never exceeds it */
    double wait_s;           /* the compute thread's time waiting on reads */
} hx_wc_stats;

/* The plan for model m within `budget` bytes of weights: HX_OK, or
 * HX_ERR_RANGE when the budget is below resident + min_cache (then out
 * still holds those two). */
int hx_wc_plan_make(const hx_model *m, size_t budget, hx_wc_plan *out);

/* Creates the cache of plan p (from hx_wc_plan_make) on m, borrowed: the
 * resident copies are read now. Errors: HX_ERR_IO (a read failed, named),
 * HX_ERR_NOMEM, HX_ERR_UNSUPPORTED for a model from a buffer whose
 * weights cannot be read back. */
int hx_wc_new(const hx_model *m, const hx_wc_plan *p, hx_wcache **out,
              hx_err *err);
void hx_wc_free(hx_wcache *wc); /* NULL is a no-op */

/* The bytes of matrix w (one of m's hx_wmat) to multiply by now: an owned
 * copy, a slot (between hx_wc_layer_begin and _end of its layer), or the
 * mapping for what the cache does not hold. */
const void *hx_wc_data(const hx_wcache *wc, const hx_wmat *w);

/* 1 when the output head streams through the slots (hx_wc_head). */
int hx_wc_head_streamed(const hx_wcache *wc);

/* The first error of a read since the last hx_wc_clear_error (message in
 * *msg), or HX_OK. A pass that met one computed on stale bytes and must be
 * discarded. */
int hx_wc_error(const hx_wcache *wc, const char **msg);
void hx_wc_clear_error(hx_wcache *wc);

void hx_wc_stats_get(const hx_wcache *wc, hx_wc_stats *out);

#endif /* HX_WCACHE_INT_H */
