/* test_spec.c: speculative decoding (engine/spec.c) produces exactly the
 * tokens of plain one-token-per-pass decoding: greedy and seeded sampling,
 * with and without the tool-call grammar, on random-weight models and on
 * stories260K, over many prompts; and it takes fewer passes than tokens;
 * a turn's first token comes from the prompt's logits, before any pass. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ctx_int.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "engine/spec_int.h"
#include "test.h"

#define MAX_GEN 48

static const char WEATHER[] =
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7},"
    "\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\",\"days\"],"
    "\"additionalProperties\":false}";
static const char MEET[] =
    "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":24},"
    "\"attendees\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":16},"
    "\"maxItems\":3},\"minutes\":{\"enum\":[15,30,60]}},\"required\":[\"title\",\"minutes\"],"
    "\"additionalProperties\":false}";

static const char *const PROMPTS[] = {
    "Once upon a time",
    "Schedule a meeting with Bob about the budget. Schedule a meeting with Bob",
    "What is the weather in Paris for the next 3 days? The weather in Paris",
    "Lily and Tom went to the park. Lily and Tom went to the",
    "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call> again:",
    "The cat sat on the mat. The dog sat on the log. The cat sat on the",
    "Remind me: meeting with Alice, Bob and Carol on Monday.",
    "One day, a little girl named Sue found a big red ball.",
    "1 2 3 4 5 6 7 8 9 10 1 2 3 4 5",
    "He said hello. She said hello. They said",
    "Call weather for Berlin, 2 days, celsius.",
    "Tim had a toy car. Tim loved his toy car. Tim",
    /* past 256 cached cells a one-token pass splits attention per thread:
     * batched rows must do the same (ctx split_rows) */
    "You can call weather with city and days, or meet with title, attendees and minutes. "
    "You can call weather with city and days, or meet with title, attendees and minutes. "
    "You can call weather with city and days, or meet with title, attendees and minutes. "
    "You can call weather with city and days, or meet with title, attendees and minutes. "
    "You can call weather with city and days, or meet with title, attendees and minutes. "
    "You can call weather with city and days, or meet with title, attendees and minutes. "
    "You can call weather with city and days, or meet with title, attendees and minutes. "
    "Lily wanted to meet Tom and Sue at the park. She said: meet with Tom and Sue",
};
#define N_PROMPTS (int)(sizeof PROMPTS / sizeof *PROMPTS)

/* One generation setting: grammar mode (-1: none) and sampling. */
typedef struct setting {
    int mode, compact;
    float temp;
    uint64_t seed;
} setting;

typedef struct rig {
    hx_model *m;
    const hx_vocab *v;
    hx_gvocab *gv;
    hx_grammar *g[3]; /* by HX_TOOLS_* */
    hx_grammar *gc[3]; /* compact */
    hx_spec_memo *memo; /* shared by every spec run of the rig */
} rig;

static hx_sampler *new_sampler(rig *r, const setting *st)
{
    hx_sampler_params sp = hx_sampler_default_params();
    sp.temp = st->temp;
    sp.seed = st->seed;
    hx_sampler *s = hx_sampler_new(&sp);
    if (!s || st->mode < 0) return s;
    hx_grammar *g = (st->compact ? r->gc : r->g)[st->mode];
    hx_sampler_stage stage;
    if (hx_grammar_stage(g, r->gv, &stage) || hx_sampler_add_stage(s, &stage)) {
        hx_sampler_free(s);
        return NULL;
    }
    return s;
}

static int tokenize(const hx_vocab *v, const char *text, int32_t *t, int max)
{
    return hx_tokenize(v, text, strlen(text), t, max, hx_vocab_add_bos(v), 0);
}

/* Plain decoding: one sample and one pass per token. Returns the count
 * (an end-of-generation token included), -1 on error. */
static int gen_plain(rig *r, hx_ctx *c, const setting *st, const int32_t *p,
                     int np, int32_t *out)
{
    hx_sampler *s = new_sampler(r, st);
    int n = 0, nv = hx_model_hparams(r->m)->n_vocab;
    hx_ctx_truncate(c, 0);
    if (!s || hx_decode(c, p, np, 0)) n = -1;
    while (n >= 0 && n < MAX_GEN) {
        int32_t t = hx_sampler_sample(s, hx_ctx_logits(c, -1), nv);
        if (t < 0 || hx_sampler_accept(s, t)) { n = -1; break; }
        out[n++] = t;
        if (hx_vocab_is_eog(r->v, t) || n == MAX_GEN) break;
        if (hx_decode(c, &t, 1, 0)) n = -1;
    }
    hx_sampler_free(s);
    return n;
}

/* The same with hx_spec_step; adds the decoder's counters to *stats. */
static int gen_spec(rig *r, hx_ctx *c, const setting *st, const int32_t *p,
                    int np, int32_t *out, const hx_spec_params *sp,
                    hx_spec_stats *stats)
{
    int n = 0;
    hx_sampler *s = new_sampler(r, st);
    hx_spec *spec = hx_spec_new(c, r->v, sp);
    if (spec) hx_spec_set_memo(spec, r->memo); /* warm from the runs before */
    if (spec && st->mode >= 0 &&
        hx_spec_set_grammar(spec, (st->compact ? r->gc : r->g)[st->mode], r->gv))
        n = -1;
    int32_t hist[1024 + MAX_GEN], step[64];
    memcpy(hist, p, (size_t)np * sizeof *p);
    int nh = np;
    hx_err err = {0};
    hx_ctx_truncate(c, 0);
    if (!s || !spec || hx_decode(c, p, np, 0)) n = -1;
    while (n >= 0 && n < MAX_GEN) {
        int k = hx_spec_step(spec, s, hist, nh, step, &err);
        if (k <= 0) { printf("     spec: %s\n", err.msg); n = -1; break; }
        if (n == 0) /* the first token comes at once, with no pass after the prompt's */
            EXPECT(k == 1 && hx_spec_get_stats(spec).passes == 0 && hx_ctx_n_past(c) == np);
        int end = 0;
        for (int i = 0; i < k && n < MAX_GEN && !end; i++) {
            out[n++] = step[i];
            end = hx_vocab_is_eog(r->v, step[i]);
            if (!end) hist[nh++] = step[i];
        }
        if (end) break;
    }
    if (spec) {
        hx_spec_stats a = hx_spec_get_stats(spec);
        stats->passes += a.passes, stats->tokens += a.tokens;
        stats->forced += a.forced, stats->drafted += a.drafted;
        stats->accepted += a.accepted;
    }
    hx_spec_free(spec);
    hx_sampler_free(s);
    return n;
}

static void print_tokens(const char *what, const int32_t *t, int n)
{
    printf("     %s:", what);
    for (int i = 0; i < n; i++) printf(" %d", t[i]);
    printf("\n");
}

/* Every prompt under every setting: spec output == plain output. */
static int check_all(rig *r, hx_ctx *c, const setting *sets, int n_sets,
                     int n_prompts, const hx_spec_params *sp, hx_spec_stats *stats)
{
    int fails = 0;
    for (int k = 0; k < n_sets; k++)
        for (int i = 0; i < n_prompts; i++) {
            int32_t p[1024], a[MAX_GEN], b[MAX_GEN];
            int np = tokenize(r->v, PROMPTS[i], p, 1024);
            if (np <= 0) return -1;
            int na = gen_plain(r, c, &sets[k], p, np, a);
            int nb = gen_spec(r, c, &sets[k], p, np, b, sp, stats);
            if (na > 0 && na == nb && !memcmp(a, b, (size_t)na * sizeof *a)) continue;
            printf("     setting %d prompt %d differs (%d vs %d tokens)\n", k, i, na, nb);
            print_tokens("plain", a, na);
            print_tokens("spec ", b, nb);
            fails++;
        }
    return fails;
}

static const setting SETTINGS[] = {
    {-1, 0, 0.0f, 1},                  /* free text, greedy */
    {HX_TOOLS_REQUIRED, 1, 0.0f, 1},   /* one call, compact, greedy */
    {HX_TOOLS_REQUIRED, 0, 0.0f, 1},   /* any whitespace */
    {HX_TOOLS_LAZY, 0, 0.0f, 1},
    {HX_TOOLS_REQUIRED, 1, 0.8f, 7},   /* seeded sampling */
    {-1, 0, 0.8f, 11},
};
#define N_SETTINGS (int)(sizeof SETTINGS / sizeof *SETTINGS)

static int rig_open(rig *r, const char *path)
{
    memset(r, 0, sizeof *r);
    hx_err err = {0};
    if (hx_model_load(path, NULL, &r->m, &err)) return printf("     %s\n", err.msg), -1;
    r->v = hx_model_vocab(r->m);
    if (!r->v || hx_gvocab_from_vocab(r->v, &r->gv, &err)) return -1;
    if (!(r->memo = hx_spec_memo_new())) return -1;
    hx_tool_spec tools[2] = {{"weather", WEATHER}, {"meet", MEET}};
    hx_grammar_params gp = hx_grammar_default_params();
    for (int mode = 0; mode < 3; mode++) {
        gp.compact = 0;
        if (hx_grammar_tool_calls(tools, 2, mode, &gp, &r->g[mode], &err)) return -1;
        gp.compact = 1;
        if (hx_grammar_tool_calls(tools, 2, mode, &gp, &r->gc[mode], &err)) return -1;
    }
    return 0;
}

static void rig_close(rig *r)
{
    for (int i = 0; i < 3; i++) hx_grammar_free(r->g[i]), hx_grammar_free(r->gc[i]);
    hx_gvocab_free(r->gv);
    hx_spec_memo_free(r->memo);
    hx_model_free(r->m);
}

static void run_model(const char *path, int n_threads, int n_prompts,
                      int want_accepts)
{
    rig r;
    ASSERT(rig_open(&r, path) == 0);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = n_threads;
    hx_ctx *c = NULL;
    hx_err err = {0};
    ASSERT(hx_ctx_new(r.m, &cp, &c, &err) == HX_OK);
    hx_spec_stats st = {0}, fst = {0};
    hx_spec_params prm = hx_spec_default_params();
    int fails = check_all(&r, c, SETTINGS, N_SETTINGS, n_prompts, &prm, &st);
    printf("     %d prompts x %d settings: %lld tokens in %lld passes "
           "(%lld forced, %lld of %lld drafts accepted)\n", n_prompts, N_SETTINGS,
           (long long)st.tokens, (long long)st.passes, (long long)st.forced,
           (long long)st.accepted, (long long)st.drafted);
    EXPECT_EQ_INT(fails, 0);
    EXPECT(st.passes < st.tokens);
    /* Forced runs alone, one grammar setting. With drafts, how many forced
     * tokens go through forced_next depends on the timing (accepted
     * grammar drafts cover forced runs, and drafting adapts to measured
     * pass times); with none, every forced token of the call's frame does. */
    prm.max_draft = 0;
    EXPECT_EQ_INT(check_all(&r, c, SETTINGS + 1, 1, n_prompts, &prm, &fst), 0);
    printf("     no drafts, one call: %lld tokens in %lld passes (%lld forced)\n",
           (long long)fst.tokens, (long long)fst.passes, (long long)fst.forced);
    EXPECT(fst.forced > 0 && fst.drafted == 0 && fst.passes < fst.tokens);
    if (want_accepts) EXPECT(st.accepted > 0);
    /* the shared memo kept what the decoders learned, and a new decoder
     * takes it over as it is: pass times, drafts per source */
    hx_spec_learned *l = hx_spec_memo_learned(r.memo), was = *l;
    EXPECT(l->init && l->s1 > 1 && l->sT > 0);
    hx_spec *sp = hx_spec_new(c, r.v, NULL);
    ASSERT(sp);
    hx_spec_set_memo(sp, r.memo);
    EXPECT(!memcmp(&was, l, sizeof was));
    hx_spec_free(sp);
    hx_ctx_free(c);
    rig_close(&r);
}

static int shared_path(char *buf, size_t n, const char *rel)
{
    snprintf(buf, n, "%s/%s", hx_shared_data_dir(), rel);
    return access(buf, R_OK) == 0;
}

/* A random-weight qwen3 model with a real tokenizer, written to a
 * temporary file. */
static int random_model(char *out, size_t n, const char *vocab, const char *type,
                        int embd)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.vocab_path = vocab;
    p.ftype = type;
    p.n_embd = embd;
    p.n_ff = 2 * embd;
    p.head_dim = 32;
    p.n_head = embd / 32;
    p.n_head_kv = embd / 64;
    p.tied_output = 1;
    snprintf(out, n, "/tmp/hearth_test_spec_%d_%s.gguf", (int)getpid(), type);
    hx_err err = {0};
    return hx_mkmodel_write(&p, out, &err) == HX_OK;
}

static void test_identity_stories260k(void)
{
    char path[1024];
    if (!shared_path(path, sizeof path, "models/stories260K.gguf")) SKIP("%s not found", path);
    run_model(path, 2, N_PROMPTS, 1);
}

static void test_identity_random_qwen_vocab(void)
{
    char vocab[1024], path[1100];
    if (!shared_path(vocab, sizeof vocab, "vocab/ggml-vocab-qwen2.gguf")) SKIP("%s not found", vocab);
    ASSERT(random_model(path, sizeof path, vocab, "Q8_0", 64));
    run_model(path, 1, 4, 0); /* the 151936-row head dominates: few prompts */
    unlink(path);
}

static void test_identity_random_llama_vocab(void)
{
    char vocab[1024], path[1100];
    if (!shared_path(vocab, sizeof vocab, "models/stories260K.gguf")) SKIP("%s not found", vocab);
    ASSERT(random_model(path, sizeof path, vocab, "Q4_K_M", 256));
    run_model(path, 1, N_PROMPTS, 0);
    unlink(path);
}

/* The text of a copy draft after ctx (tokenized as a whole), or "-" for
 * none. */
static const char *copy_text(hx_spec *sp, const hx_vocab *v, const char *ctx, char *buf, size_t n)
{
    int32_t t[256], d[16];
    int nt = tokenize(v, ctx, t, 256);
    int nd = nt > 0 ? hx_spec_copy_draft(sp, t, nt, d, 16) : 0;
    size_t len = 0;
    buf[0] = 0;
    if (nd == 0) return "-";
    for (int i = 0; i < nd; i++) {
        size_t l = 0;
        const char *p = hx_vocab_piece(v, d[i], &l);
        if (len + l + 1 < n) memcpy(buf + len, p, l), len += l;
    }
    buf[len] = 0;
    return buf;
}

/* Copy drafts: a string being written continues as the context's text
 * where it began the same way (one byte on), from a word's start,
 * tokenized as the model writes it; not after a closing quote, not from
 * inside a word. */
static void test_copy_drafts(void)
{
    const char *tiny = "models/hearth-tiny.gguf";
    if (access(tiny, R_OK)) SKIP("%s is not here (run from the repository root)", tiny);
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(tiny, NULL, &m, &err) == HX_OK);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 256;
    hx_ctx *c = NULL;
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    hx_spec *sp = hx_spec_new(c, hx_model_vocab(m), NULL);
    ASSERT(sp);
    const hx_vocab *v = hx_model_vocab(m);
    char b[256];
    /* the request's words after a space, the call's after a quote */
    EXPECT_STR_EQ(copy_text(sp, v, "Shift my Lunch with Leadom Jan 24 to May 2\n{\"query\": \"Lunch",
                            b, sizeof b), " with Leadom Jan 24 to May 2");
    /* a uid of a tool's result, to its closing quote (kept: it is whole) */
    EXPECT_STR_EQ(copy_text(sp, v, "{\"uid\": \"e6dcb635-4@chistous.net\"}\n{\"uid\": \"e6",
                            b, sizeof b), "dcb635-4@chistous.net");
    /* the most recent occurrence wins */
    EXPECT_STR_EQ(copy_text(sp, v, "Budget plan\nBudget review\n\"Budget", b, sizeof b), " review");
    /* from one byte (a guess at the word, with its own acceptance rate) */
    EXPECT_STR_EQ(copy_text(sp, v, "Lunch with Leadom\n\"L", b, sizeof b), "eadom");
    EXPECT_STR_EQ(copy_text(sp, v, "Bobby and Rob\n\"ob", b, sizeof b), "-");      /* mid-word */
    EXPECT_STR_EQ(copy_text(sp, v, "{\"a\": \"x\"}}</x>\n{\"a\": \"x\"}}", b, sizeof b), "-");
    EXPECT_STR_EQ(copy_text(sp, v, "no quote here, Lunch with", b, sizeof b), "-");
    hx_spec_free(sp);
    hx_ctx_free(c);
    hx_model_free(m);
}

/* One memo draft after seq[0, n) into d (at most 8); its count, *key the
 * match's length. */
static int memo(hx_spec_memo *m, const int32_t *seq, int n, int32_t *d, int *key)
{
    return hx_spec_memo_draft(m, seq, n, d, 8, key);
}

/* The memo drafts what the model wrote after the same tokens when two
 * earlier outputs (and three in four) agree, backing off to shorter
 * matches; a prompt's tokens are keys, never drafts; a turn's end stops a
 * draft. */
static void test_memo_drafts(void)
{
    hx_spec_memo *m = hx_spec_memo_new();
    ASSERT(m);
    int32_t d[8], key = 0;
    const int32_t p1[] = {90, 91, 1, 2}, p2[] = {92, 93, 1, 2};
    const int32_t out[] = {10, 11, 12, 13};
    hx_spec_memo_turn(m, p1, 4);
    for (int i = 0; i < 4; i++) hx_spec_memo_add(m, out[i]);
    EXPECT_EQ_INT(memo(m, p1, 4, d, &key), 0); /* seen once */
    hx_spec_memo_turn(m, p2, 4);
    for (int i = 0; i < 4; i++) hx_spec_memo_add(m, out[i]);
    /* after the prompt's end (matched in two prompts): the whole output,
     * to the turn's end */
    const int32_t q[] = {70, 1, 2};
    ASSERT(memo(m, q, 3, d, &key) == 4);
    EXPECT_EQ_INT(d[0], 10);
    EXPECT_EQ_INT(d[3], 13);
    EXPECT_EQ_INT(key, 2);
    const int32_t q2[] = {11, 12};
    EXPECT_EQ_INT(memo(m, q2, 2, d, &key), 1); /* from inside the output */
    EXPECT_EQ_INT(d[0], 13);
    const int32_t q3[] = {90, 91};
    EXPECT_EQ_INT(memo(m, q3, 2, d, &key), 0); /* 1 is the prompt's, not output */
    /* a third turn says otherwise after 11: 2 to 1 is not three in four */
    hx_spec_memo_turn(m, p1, 4);
    hx_spec_memo_add(m, 10), hx_spec_memo_add(m, 11), hx_spec_memo_add(m, 40);
    const int32_t q4[] = {10, 11};
    EXPECT_EQ_INT(memo(m, q4, 2, d, &key), 0);
    hx_spec_memo_turn(m, p2, 4);
    hx_spec_memo_add(m, 10), hx_spec_memo_add(m, 11), hx_spec_memo_add(m, 12);
    ASSERT(memo(m, q4, 2, d, &key) >= 1); /* 3 to 1 */
    EXPECT_EQ_INT(d[0], 12);
    hx_spec_memo_free(m);
    /* backing off: after 30, 20 the one two-token match is one output;
     * after 20 alone three in four agree on 21 */
    ASSERT((m = hx_spec_memo_new()));
    for (int t = 0; t < 3; t++) {
        hx_spec_memo_turn(m, p1, 4);
        hx_spec_memo_add(m, 20), hx_spec_memo_add(m, 21);
    }
    hx_spec_memo_turn(m, p2, 4);
    hx_spec_memo_add(m, 30), hx_spec_memo_add(m, 20), hx_spec_memo_add(m, 99);
    const int32_t q5[] = {30, 20};
    ASSERT(memo(m, q5, 2, d, &key) == 1);
    EXPECT_EQ_INT(d[0], 21);
    EXPECT_EQ_INT(key, 1);
    hx_spec_memo_free(m);
}

/* Logits of tokens t[P, P + B) after the context t[0, P): one pass each
 * into one (B rows), then one batched pass with split_rows into all; 1 if
 * every row is equal bit for bit. */
static int rows_equal_one_token(hx_ctx *c, const int32_t *t, int P, int B, int nv,
                                float *one, float *all)
{
    hx_ctx_truncate(c, 0);
    if (hx_decode(c, t, P, 0)) return 0;
    for (int i = 0; i < B; i++) {
        if (hx_decode(c, t + P + i, 1, 0)) return 0;
        memcpy(one + (size_t)i * nv, hx_ctx_logits(c, -1), (size_t)nv * sizeof *one);
    }
    hx_ctx_truncate(c, P);
    c->split_rows = 1;
    int rc = hx_decode_rows(c, t + P, B, 0);
    c->split_rows = 0;
    if (rc) return 0;
    for (int i = 0; i < B; i++)
        memcpy(all + (size_t)i * nv, hx_ctx_logits(c, i), (size_t)nv * sizeof *all);
    return !memcmp(one, all, (size_t)B * nv * sizeof *one);
}

/* A spec pass's rows share each key and value read of the fp16 one-query
 * path (attention.c): each row must still equal its one-token pass bit for
 * bit, below 256 cached cells, past them (split per thread), and where the
 * rows of one pass straddle llama.cpp's cache-view steps (256, 512). */
static void test_batched_rows_equal_one_token(void)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.ftype = "Q8_0";
    p.n_embd = 128, p.n_ff = 256, p.head_dim = 32, p.n_head = 4, p.n_head_kv = 2;
    char path[256];
    snprintf(path, sizeof path, "/tmp/hearth_test_rows_%d.gguf", (int)getpid());
    hx_err err = {0};
    hx_model *m = NULL;
    ASSERT(hx_mkmodel_write(&p, path, &err) == HX_OK);
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    const int nv = hx_model_hparams(m)->n_vocab, Bmax = 9;
    int32_t t[700];
    for (int i = 0; i < 700; i++) t[i] = (i * 7919 + 13) % nv;
    float *one = malloc((size_t)Bmax * nv * sizeof *one), *all = malloc((size_t)Bmax * nv * sizeof *all);
    static const int P[] = {40, 250, 254, 300, 509, 600};
    static const int Bs[] = {2, 5, 9};
    for (int th = 1; th <= 3; th++) {
        hx_ctx_params cp = hx_ctx_default_params();
        cp.n_ctx = 1024;
        cp.n_threads = th;
        hx_ctx *c = NULL;
        ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
        for (size_t i = 0; i < sizeof P / sizeof *P; i++)
            for (size_t k = 0; k < sizeof Bs / sizeof *Bs; k++) {
                int ok = rows_equal_one_token(c, t, P[i], Bs[k], nv, one, all);
                if (!ok) printf("     %d threads, %d cells, %d rows: differ\n", th, P[i], Bs[k]);
                EXPECT(ok);
            }
        /* a pass that keeps no logits (a turn's last rows) writes the
         * same cache rows: the next token's logits are the same */
        hx_ctx_truncate(c, 0);
        ASSERT(hx_decode(c, t, 40, 0) == HX_OK && hx_decode(c, t + 40, 3, 0) == HX_OK);
        ASSERT(hx_decode(c, t + 43, 1, 0) == HX_OK);
        memcpy(one, hx_ctx_logits(c, -1), (size_t)nv * sizeof *one);
        hx_ctx_truncate(c, 40);
        c->split_rows = 1;
        ASSERT(hx_decode_rows(c, t + 40, 3, 3) == HX_OK);
        c->split_rows = 0;
        EXPECT(hx_ctx_logits(c, -1) == NULL);
        EXPECT(hx_decode_rows(c, t + 43, 1, 2) == HX_ERR_INVALID);
        ASSERT(hx_decode(c, t + 43, 1, 0) == HX_OK);
        EXPECT(!memcmp(one, hx_ctx_logits(c, -1), (size_t)nv * sizeof *one));
        hx_ctx_free(c);
    }
    free(one);
    free(all);
    hx_model_free(m);
    unlink(path);
}

int main(void)
{
    RUN(test_batched_rows_equal_one_token);
    RUN(test_copy_drafts);
    RUN(test_memo_drafts);
    RUN(test_identity_stories260k);
    RUN(test_identity_random_qwen_vocab);
    RUN(test_identity_random_llama_vocab);
    return test_summary();
}
