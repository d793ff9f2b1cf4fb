/* stage_fixture.h: a sampler stage on hearth-tiny's vocabulary for the
 * agent's stage tests (the copy bias, grounded answers): the model's
 * vocabulary, a logits buffer, the in_call flag a loop guard would keep,
 * and tokens fed to the stage. Header-only; include after test.h. */
#ifndef HX_TESTS_STAGE_FIXTURE_H
#define HX_TESTS_STAGE_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

typedef struct fixture {
    hx_model *m;
    const hx_vocab *v;
    int in_call;
    hx_sampler_stage st; /* the caller's stage */
    float *logits;
    int32_t n;
} fixture;

/* Loads the model and the logits buffer; the caller then makes f->st.
 * 0, or -1 (nothing to free). */
__attribute__((unused))
static int fixture_open(fixture *f, int in_call)
{
    memset(f, 0, sizeof *f);
    hx_err err = {0};
    if (hx_model_load("models/hearth-tiny.gguf", NULL, &f->m, &err)) return -1;
    f->v = hx_model_vocab(f->m);
    f->n = hx_vocab_n_tokens(f->v);
    f->in_call = in_call;
    if ((f->logits = calloc((size_t)f->n, sizeof *f->logits))) return 0;
    hx_model_free(f->m);
    return -1;
}

__attribute__((unused))
static void teardown(fixture *f)
{
    if (f->st.free) f->st.free(f->st.ctx);
    free(f->logits);
    hx_model_free(f->m);
}

/* The first token of s. */
__attribute__((unused))
static int32_t tok(const fixture *f, const char *s)
{
    int32_t t[64];
    return hx_tokenize(f->v, s, strlen(s), t, 64, 0, 0) > 0 ? t[0] : -1;
}

/* Accepts the tokens of s. */
__attribute__((unused))
static void feed(fixture *f, const char *s)
{
    int32_t t[256];
    int32_t n = hx_tokenize(f->v, s, strlen(s), t, 256, 0, 0);
    for (int32_t i = 0; i < n; i++) f->st.accept(f->st.ctx, t[i]);
}

#endif
