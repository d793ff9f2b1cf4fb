/* sample.h: the sampler chain: pluggable stages (the grammar mask comes
 * first), then llama.cpp's filters in its order, then a seeded draw. Part of
 * engine.h, the engine's public API. */
#ifndef HX_SAMPLE_H
#define HX_SAMPLE_H

#include <stdint.h>

/* ---- pluggable stages ----
 * A stage restricts which tokens may come next (e.g. the JSON-Schema
 * grammar). Stages run before every built-in filter, in the order they were
 * added, in greedy and sampled mode alike; a token a stage masks is never
 * returned. Versioned like ggml's backends: set api_version to
 * HX_SAMPLER_STAGE_API; fields are only ever added at the end. */
#define HX_SAMPLER_STAGE_API 1
typedef struct hx_sampler_stage {
    int api_version;
    const char *name; /* static string, for messages */
    void *ctx;        /* the stage's state; owned by the sampler once added */
    /* set logits of tokens that are not allowed to -INFINITY; 0 or hx_rc */
    int (*apply)(void *ctx, float *logits, int32_t n_vocab);
    /* the chosen token; advance state; non-zero = token rejected */
    int (*accept)(void *ctx, int32_t token);
    /* optional: tokens the stage forces next (only one continuation
     * possible); returns count written (<= max), 0 if none */
    int (*forced)(void *ctx, int32_t *tokens, int32_t max);
    /* optional: non-zero if generation may end here */
    int (*can_end)(void *ctx);
    /* optional: frees ctx; called by hx_sampler_free */
    void (*free)(void *ctx);
} hx_sampler_stage;

/* "Random seed": hx_sampler_new picks one from the clock and the process
 * id; hx_sampler_seed tells which. */
#define HX_SAMPLER_SEED_RANDOM UINT64_MAX

/* Parameters, with llama.cpp's meanings and (in hx_sampler_default_params)
 * its defaults. Filters run in llama.cpp's default order: penalties,
 * top-k, top-p, min-p, temperature, then the draw. */
typedef struct hx_sampler_params {
    float temp;              /* <= 0: greedy (argmax after stages and
                                penalties); default 0.8 */
    int32_t top_k;           /* <= 0: off; default 40 */
    float top_p;             /* >= 1: off; default 0.95 */
    float min_p;             /* <= 0: off; default 0.05 */
    float repeat_penalty;    /* 1: off; default 1.0. A logit > 0 is divided
                                by it, one <= 0 multiplied */
    float presence_penalty;  /* subtracted once per seen token; default 0 */
    float frequency_penalty; /* subtracted per occurrence; default 0 */
    int32_t repeat_last_n;   /* history window of the penalties; 0 = off;
                                default 64 */
    uint64_t seed;           /* default HX_SAMPLER_SEED_RANDOM */
    int32_t min_keep;        /* top-p / min-p keep at least this many; 1 */
} hx_sampler_params;

hx_sampler_params hx_sampler_default_params(void);

typedef struct hx_sampler hx_sampler;

/* A sampler with no stages. NULL on OOM or invalid params (temp NaN,
 * repeat_last_n < 0). Free with hx_sampler_free, which also frees the
 * stages' contexts. */
hx_sampler *hx_sampler_new(const hx_sampler_params *p);
void hx_sampler_free(hx_sampler *s); /* NULL is a no-op */
/* The seed in use (the chosen one if the params asked for a random one). */
uint64_t hx_sampler_seed(const hx_sampler *s);

/* Appends a stage (copied; the sampler takes ownership of stage->ctx and
 * frees it with stage->free). HX_ERR_INVALID for a wrong api_version or a
 * missing apply/accept, HX_ERR_NOMEM. On error ctx is not taken. */
int hx_sampler_add_stage(hx_sampler *s, const hx_sampler_stage *stage);

/* Picks the next token from logits[n_vocab] (not modified; the sampler
 * works on its own copy). Returns the token id, or -1 if no token is left
 * (every token masked by the stages, or a stage failed). Does not advance
 * anything: call hx_sampler_accept with the token that is used. */
int32_t hx_sampler_sample(hx_sampler *s, const float *logits, int32_t n_vocab);
/* Accepts the token that was used (sampled, forced or given): adds it to
 * the penalty history and advances every stage. Non-zero (HX_ERR_STATE) if
 * a stage rejects it. */
int hx_sampler_accept(hx_sampler *s, int32_t token);
/* Adds a token to the penalty history only (prompt tokens, as llama.cpp's
 * command line does), without touching the stages. */
void hx_sampler_note(hx_sampler *s, int32_t token);
/* Forgets the penalty history and re-seeds the generator with the seed. */
void hx_sampler_reset(hx_sampler *s);

/* Tokens the stages force next (the first stage that forces any wins);
 * count written, 0 if none. */
int hx_sampler_forced(hx_sampler *s, int32_t *tokens, int32_t max);
/* Non-zero if every stage allows ending here (1 without stages). */
int hx_sampler_can_end(hx_sampler *s);

/* The greedy token of z[0, n): the largest logit, the lowest id on ties;
 * -1 if every logit is -INFINITY. */
int32_t hx_argmax(const float *z, int32_t n);

/* log(sum_i exp(z[i])) over n logits, computed stably (the max first), in
 * double. A token's negative log-likelihood (cross-entropy) under logits z
 * is hx_logsumexp(z, n) - z[token]. */
double hx_logsumexp(const float *z, int32_t n);

#endif /* HX_SAMPLE_H */
