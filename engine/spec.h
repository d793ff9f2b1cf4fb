/* spec.h: faster than one token per forward pass: tokens the sampler's
 * stages force (a grammar mask of one token) go through the model as one
 * batch, and speculative drafts (n-gram lookup in the context, the rest
 * of a string the model is copying from the context: arguments are often
 * copied from the prompt, and what the model itself wrote after the same
 * tokens before: the frame of its calls) are verified in the same batched
 * pass. Where only end-of-generation tokens are allowed the output ends
 * without a pass. Part of engine.h, the engine's public API.
 *
 * The output is what the sampler would have produced one token per pass:
 * every produced token is chosen by hx_sampler_sample on the same logits,
 * in the same order, with the same number of random draws; a draft only
 * saves the pass that would have computed its logits. The logits of a
 * batched pass equal those of one-token passes bit for bit as long as the
 * kernels are batch-invariant (tests/engine/test_spec.c checks it); see
 * hx_spec_params.max_batch. */
#ifndef HX_SPEC_H
#define HX_SPEC_H

#include <stdint.h>

#include "base/base.h"

typedef struct hx_ctx hx_ctx;         /* engine/model.h */
typedef struct hx_sampler hx_sampler; /* engine/sample.h */
typedef struct hx_vocab hx_vocab;     /* engine/vocab.h */

typedef struct hx_spec_params {
    int max_batch; /* tokens per pass (pending + forced + drafts); default
                      16, clamped to [1, 48]: below the tiled-attention
                      batch (64), so a pass uses the one-query path as a
                      one-token pass does. 1: plain decoding */
    int max_draft; /* draft tokens per pass; 0: no drafts (forced runs
                      only); default 8 */
    int ngram_min; /* shortest context suffix looked up; default 2 */
    int ngram_max; /* longest, tried first; default 4 */
    double min_accept; /* drafts per pass adapt to the acceptance rates
                        of their sources seen so far: a draft goes on
                        while the product of its tokens' rates is >= the
                        larger of min_accept and the measured cost of one
                        more row relative to a one-token pass (a wasted
                        draft costs a row; on small models that is most
                        of a pass); <= 0: always max_draft; default 0.3.
                        Timing only chooses how much to draft, never the
                        output */
} hx_spec_params;
hx_spec_params hx_spec_default_params(void);

/* Counters since hx_spec_new. */
typedef struct hx_spec_stats {
    int64_t passes;   /* forward passes run */
    int64_t tokens;   /* tokens produced */
    int64_t forced;   /* of which forced by the stages (no logits needed) */
    int64_t drafted;  /* draft tokens fed to the model */
    int64_t accepted; /* drafts the sampler chose too */
    double pass_seconds; /* spent in the forward passes (the rest of a
                            step is sampling, grammar and drafting) */
} hx_spec_stats;

typedef struct hx_spec hx_spec;

/* A decoder over context c and vocabulary v (both borrowed: they must
 * outlive it); p NULL for the defaults. NULL on out of memory. */
hx_spec *hx_spec_new(hx_ctx *c, const hx_vocab *v, const hx_spec_params *p);
void hx_spec_free(hx_spec *sp); /* NULL is a no-op */

/* Optional drafts from the grammar: where it allows one byte sequence
 * next (optional whitespace skipped), that sequence split into the longest
 * vocabulary pieces. g and gv (borrowed, must outlive sp or the next call)
 * must be what the sampler's grammar stage enforces, set before a turn's
 * first step; a shadow matcher follows the produced tokens from there.
 * g NULL: no grammar drafts. HX_ERR_INVALID (gv NULL), HX_ERR_NOMEM. */
struct hx_grammar;
struct hx_gvocab;
int hx_spec_set_grammar(hx_spec *sp, struct hx_grammar *g,
                        const struct hx_gvocab *gv);

/* One step of generation with sampler s (borrowed). hist[0, n_hist) is the
 * whole sequence so far: the prompt and every token produced before (but
 * no end-of-generation token). The context must hold a prefix of it,
 * hist[0, n_past): either all of it, its last token's logits kept by the
 * last hx_decode (as after decoding the prompt), or all but the tokens
 * still pending (those of hist[n_past, n_hist), as this function leaves
 * them). Writes the tokens produced (already accepted by s) to out
 * (room for max_batch + 1), in order, and returns how many (>= 1), or
 * -rc: HX_ERR_STATE when the sampler allows no token or rejects one (the
 * message in err), the context's errors (HX_ERR_FULL, ...). An
 * end-of-generation token, if any, is the last one produced and is not
 * fed to the context. The caller appends the others to hist. At a turn's
 * start (nothing pending) the step gives the first token alone, chosen
 * from the context's last logits without a pass, so that it comes as soon
 * as the prompt is in; the next step runs it with the forced run and the
 * drafts after it, the batch this step would have run. */
int hx_spec_step(hx_spec *sp, hx_sampler *s, const int32_t *hist, int n_hist,
                 int32_t *out, hx_err *err);

/* The same one token at a time, for callers that hand out tokens singly:
 * *tok is the next token of the current step's output, a new step runs
 * when none is left. hist as above: it must include every token this
 * function gave before (but no end-of-generation token). HX_OK or rc. */
int hx_spec_next(hx_spec *sp, hx_sampler *s, const int32_t *hist, int n_hist,
                 int32_t *tok, hx_err *err);
/* Forgets the tokens of the last step not given yet (a new turn; they
 * were accepted by that turn's sampler and may sit in the context: the
 * caller truncates it to what it keeps). */
void hx_spec_reset(hx_spec *sp);

hx_spec_stats hx_spec_get_stats(const hx_spec *sp);

/* The model's own recent output (engine/specmemo.c): what it wrote after
 * the same tokens before, a source of drafts where the context has none
 * (how a call starts, its tool and key names, how a turn ends); and what
 * drafting taught the decoder using it (how often each draft source is
 * right, what one more row of a pass costs), which decides how much to
 * draft. A decoder keeps its own; one memo may instead serve the decoders
 * of several contexts of the same model in turn (a long-running assistant
 * with a context per request): each then starts from what the ones before
 * learned. Not thread-safe. */
typedef struct hx_spec_memo hx_spec_memo;
hx_spec_memo *hx_spec_memo_new(void); /* NULL on out of memory */
void hx_spec_memo_free(hx_spec_memo *m); /* NULL is a no-op */
/* Uses m (borrowed: it must outlive sp or the next call) from the next
 * turn on; NULL: sp's own memo again. */
void hx_spec_set_memo(hx_spec *sp, hx_spec_memo *m);

#endif /* HX_SPEC_H */
