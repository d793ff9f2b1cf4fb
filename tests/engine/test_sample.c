/* test_sample.c: the sampler chain: greedy is argmax, each filter's effect,
 * distributions by counting seeded draws, seeds, and custom stages. */
#include <math.h>
#include <stdint.h>

#include "engine/engine.h"
#include "test.h"

#define N_DRAWS 20000

/* Plain sampling: temperature only, no filters. */
static hx_sampler_params plain(float temp, uint64_t seed)
{
    hx_sampler_params p = hx_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

/* Draws N_DRAWS tokens and counts them per id (counts[n]). */
static void count_draws(hx_sampler *s, const float *logits, int n, int *counts)
{
    for (int i = 0; i < n; i++) counts[i] = 0;
    for (int i = 0; i < N_DRAWS; i++) {
        int32_t t = hx_sampler_sample(s, logits, n);
        if (t >= 0 && t < n) counts[t]++;
    }
}

/* |observed - expected| within 5 binomial standard deviations. */
static int near_prob(int count, double p)
{
    double mean = N_DRAWS * p, sd = sqrt(N_DRAWS * p * (1 - p));
    return fabs(count - mean) <= 5 * sd + 1;
}

static void test_greedy_is_argmax(void)
{
    hx_sampler_params p = plain(0.0f, 1);
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    float l[6] = {0.1f, 3.0f, -2.0f, 3.0f, 2.9f, -INFINITY};
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 6), 1); /* first of the ties */
    float m[3] = {NAN, -1.0f, -5.0f};
    EXPECT_EQ_INT(hx_sampler_sample(s, m, 3), 1); /* NaN never wins */
    float all[2] = {-INFINITY, -INFINITY};
    EXPECT_EQ_INT(hx_sampler_sample(s, all, 2), -1);
    hx_sampler_free(s);
}

static void test_distribution_and_temperature(void)
{
    float l[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    int c[3];
    hx_sampler_params p = plain(1.0f, 7);
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    count_draws(s, l, 3, c);
    EXPECT(near_prob(c[0], 0.5) && near_prob(c[1], 0.3) &&
           near_prob(c[2], 0.2));
    hx_sampler_free(s);
    /* temperature 0.5 squares the probabilities: .25 .09 .04 over .38 */
    p = plain(0.5f, 8);
    s = hx_sampler_new(&p);
    ASSERT(s);
    count_draws(s, l, 3, c);
    EXPECT(near_prob(c[0], 0.25 / 0.38) && near_prob(c[1], 0.09 / 0.38) &&
           near_prob(c[2], 0.04 / 0.38));
    hx_sampler_free(s);
}

static void test_top_k(void)
{
    float l[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    int c[4];
    hx_sampler_params p = plain(1.0f, 9);
    p.top_k = 2;
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    count_draws(s, l, 4, c);
    EXPECT_EQ_INT(c[2] + c[3], 0);
    EXPECT(near_prob(c[0], 0.4 / 0.7) && near_prob(c[1], 0.3 / 0.7));
    hx_sampler_free(s);
}

static void test_top_k_large_vocab(void)
{
    /* the heap selection must find the true k best among many */
    enum { N = 5000 };
    static float l[N];
    for (int i = 0; i < N; i++) l[i] = (float)((i * 7919) % N) / 100.0f;
    int best[3] = {-1, -1, -1};
    for (int i = 0; i < N; i++) {
        int v = (i * 7919) % N;
        if (v == N - 1) best[0] = i;
        if (v == N - 2) best[1] = i;
        if (v == N - 3) best[2] = i;
    }
    hx_sampler_params p = plain(100.0f, 3); /* nearly uniform among kept */
    p.top_k = 3;
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    int ok = 1;
    for (int i = 0; i < 2000; i++) {
        int32_t t = hx_sampler_sample(s, l, N);
        if (t != best[0] && t != best[1] && t != best[2]) ok = 0;
    }
    EXPECT(ok);
    hx_sampler_free(s);
}

static void test_top_p(void)
{
    float l[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    int c[3];
    hx_sampler_params p = plain(1.0f, 10);
    p.top_p = 0.7f; /* 0.5 < 0.7 <= 0.8: keeps the first two */
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    count_draws(s, l, 3, c);
    EXPECT_EQ_INT(c[2], 0);
    EXPECT(near_prob(c[0], 0.5 / 0.8));
    hx_sampler_free(s);
    p.top_p = 0.4f; /* the first token alone reaches it */
    s = hx_sampler_new(&p);
    ASSERT(s);
    count_draws(s, l, 3, c);
    EXPECT_EQ_INT(c[0], N_DRAWS);
    hx_sampler_free(s);
}

static void test_min_p(void)
{
    float l[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    int c[3];
    hx_sampler_params p = plain(1.0f, 11);
    p.min_p = 0.5f; /* keeps p >= 0.25 */
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    count_draws(s, l, 3, c);
    EXPECT_EQ_INT(c[2], 0);
    EXPECT(near_prob(c[1], 0.3 / 0.8));
    hx_sampler_free(s);
}

static void test_repetition_penalty(void)
{
    hx_sampler_params p = plain(0.0f, 1);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 4;
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    float l[3] = {2.0f, 1.5f, -1.0f};
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 3), 0);
    hx_sampler_note(s, 0); /* 2.0 -> 1.0 < 1.5 */
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 3), 1);
    /* negative logits are multiplied: -0.6 -> -1.2 loses to -1.0 */
    float m[3] = {-0.6f, -5.0f, -1.0f};
    EXPECT_EQ_INT(hx_sampler_sample(s, m, 3), 2);
    /* the window forgets after repeat_last_n other tokens */
    for (int i = 0; i < 4; i++) hx_sampler_note(s, 2);
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 3), 0);
    hx_sampler_reset(s);
    EXPECT_EQ_INT(hx_sampler_sample(s, m, 3), 0);
    hx_sampler_free(s);
}

static void test_presence_frequency(void)
{
    hx_sampler_params p = plain(0.0f, 1);
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    float l[2] = {1.0f, 0.0f};
    hx_sampler_note(s, 0); /* 1.0 - 0.5 - 0.25 = 0.25 > 0 */
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 2), 0);
    hx_sampler_note(s, 0); /* 1.0 - 1.0 - 0.25 < 0 */
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 2), 1);
    hx_sampler_free(s);
}

static void test_seed_reproducible(void)
{
    float l[8];
    for (int i = 0; i < 8; i++) l[i] = (float)i * 0.1f;
    hx_sampler_params p = plain(1.0f, 1234);
    hx_sampler *a = hx_sampler_new(&p), *b = hx_sampler_new(&p);
    p.seed = 1235;
    hx_sampler *c = hx_sampler_new(&p);
    ASSERT(a && b && c);
    EXPECT(hx_sampler_seed(a) == 1234);
    int same_ab = 1, same_ac = 1;
    int32_t first[200];
    for (int i = 0; i < 200; i++) {
        int32_t ta = hx_sampler_sample(a, l, 8), tb = hx_sampler_sample(b, l, 8);
        int32_t tc = hx_sampler_sample(c, l, 8);
        first[i] = ta;
        same_ab &= ta == tb;
        same_ac &= ta == tc;
    }
    EXPECT(same_ab);
    EXPECT(!same_ac);
    hx_sampler_reset(a); /* re-seeds: the same sequence again */
    int again = 1;
    for (int i = 0; i < 200; i++) again &= hx_sampler_sample(a, l, 8) == first[i];
    EXPECT(again);
    hx_sampler_free(a);
    hx_sampler_free(b);
    hx_sampler_free(c);
    p.seed = HX_SAMPLER_SEED_RANDOM;
    a = hx_sampler_new(&p);
    ASSERT(a);
    EXPECT(hx_sampler_seed(a) != HX_SAMPLER_SEED_RANDOM);
    hx_sampler_free(a);
}

/* A stage that allows only even tokens and records what it saw. */
typedef struct even_stage {
    int accepted, freed, *freed_flag;
    int32_t last;
} even_stage;

static int even_apply(void *ctx, float *logits, int32_t n)
{
    (void)ctx;
    for (int32_t i = 1; i < n; i += 2) logits[i] = -INFINITY;
    return 0;
}

static int even_accept(void *ctx, int32_t tok)
{
    even_stage *e = ctx;
    if (tok % 2) return 1;
    e->accepted++;
    e->last = tok;
    return 0;
}

static int even_forced(void *ctx, int32_t *toks, int32_t max)
{
    even_stage *e = ctx;
    if (e->accepted < 2 || max < 1) return 0;
    toks[0] = 42;
    return 1;
}

static int even_can_end(void *ctx) { return ((even_stage *)ctx)->accepted >= 3; }

static void even_free(void *ctx) { *((even_stage *)ctx)->freed_flag = 1; }

static void test_custom_stage(void)
{
    static even_stage e;
    int freed = 0;
    e = (even_stage){0, 0, &freed, -1};
    hx_sampler_stage st = {HX_SAMPLER_STAGE_API, "even", &e, even_apply,
                           even_accept, even_forced, even_can_end, even_free};
    float l[6] = {0.0f, 5.0f, 1.0f, 4.0f, 0.5f, 3.0f};
    for (int mode = 0; mode < 2; mode++) {
        hx_sampler_params p = mode ? plain(1.0f, 77) : plain(0.0f, 1);
        hx_sampler *s = hx_sampler_new(&p);
        ASSERT(s);
        ASSERT(hx_sampler_add_stage(s, &st) == HX_OK);
        if (!mode) EXPECT_EQ_INT(hx_sampler_sample(s, l, 6), 2);
        int odd = 0;
        for (int i = 0; i < 2000; i++) odd += hx_sampler_sample(s, l, 6) % 2;
        EXPECT_EQ_INT(odd, 0);
        EXPECT(hx_sampler_accept(s, 3) != HX_OK); /* rejected by the stage */
        EXPECT(!hx_sampler_can_end(s));
        int32_t f[4];
        EXPECT_EQ_INT(hx_sampler_forced(s, f, 4), 0);
        EXPECT_EQ_INT(hx_sampler_accept(s, 2), HX_OK);
        EXPECT_EQ_INT(hx_sampler_accept(s, 4), HX_OK);
        EXPECT_EQ_INT(hx_sampler_forced(s, f, 4), 1);
        EXPECT_EQ_INT(f[0], 42);
        EXPECT_EQ_INT(hx_sampler_accept(s, 0), HX_OK);
        EXPECT(hx_sampler_can_end(s));
        EXPECT_EQ_INT(e.last, 0);
        hx_sampler_free(s);
        EXPECT(freed);
        e = (even_stage){0, 0, &freed, -1};
        freed = 0;
    }
}

static void test_stage_masks_everything(void)
{
    static even_stage e;
    int freed = 0;
    e = (even_stage){0, 0, &freed, -1};
    hx_sampler_stage st = {HX_SAMPLER_STAGE_API, "even", &e, even_apply,
                           even_accept, NULL, NULL, NULL};
    hx_sampler_params p = plain(1.0f, 5);
    hx_sampler *s = hx_sampler_new(&p);
    ASSERT(s);
    ASSERT(hx_sampler_add_stage(s, &st) == HX_OK);
    float l[2] = {-INFINITY, 3.0f}; /* token 0 masked by the logits, 1 by the stage */
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 2), -1);
    EXPECT(hx_sampler_can_end(s)); /* no can_end: no opinion */
    hx_sampler_free(s);
    EXPECT(!freed);
}

static void test_bad_arguments(void)
{
    hx_sampler_params p = hx_sampler_default_params();
    p.repeat_last_n = -1;
    EXPECT(hx_sampler_new(&p) == NULL);
    p = hx_sampler_default_params();
    p.temp = NAN;
    EXPECT(hx_sampler_new(&p) == NULL);
    hx_sampler *s = hx_sampler_new(NULL);
    ASSERT(s);
    hx_sampler_stage st = {0};
    EXPECT_EQ_INT(hx_sampler_add_stage(s, &st), HX_ERR_INVALID);
    st.api_version = HX_SAMPLER_STAGE_API + 1;
    st.apply = even_apply;
    st.accept = even_accept;
    EXPECT_EQ_INT(hx_sampler_add_stage(s, &st), HX_ERR_INVALID);
    float l[1] = {0};
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 0), -1);
    EXPECT_EQ_INT(hx_sampler_sample(s, l, 1), 0);
    hx_sampler_free(s);
    hx_sampler_free(NULL);
}

static void test_defaults_match_llama_cpp(void)
{
    hx_sampler_params p = hx_sampler_default_params();
    EXPECT(p.temp == 0.8f && p.top_k == 40 && p.top_p == 0.95f &&
           p.min_p == 0.05f && p.repeat_penalty == 1.0f &&
           p.repeat_last_n == 64);
}

int main(void)
{
    RUN(test_greedy_is_argmax);
    RUN(test_distribution_and_temperature);
    RUN(test_top_k);
    RUN(test_top_k_large_vocab);
    RUN(test_top_p);
    RUN(test_min_p);
    RUN(test_repetition_penalty);
    RUN(test_presence_frequency);
    RUN(test_seed_reproducible);
    RUN(test_custom_stage);
    RUN(test_stage_masks_everything);
    RUN(test_bad_arguments);
    RUN(test_defaults_match_llama_cpp);
    return test_summary();
}
