/* spec.c: tool-call generation speed with engine/spec (grammar-forced runs
 * in one pass, n-gram drafts verified in one pass) against plain decoding
 * (one token per pass), same model, same prompts, same output (checked).
 * Usage: bench/spec MODEL.gguf [compact 0|1] [threads] [reps] [rows P]
 * rows P: also the time of a pass of B = 1..9 tokens after a P-token
 * prompt (best of 10; a row's cost against a one-token pass is what the
 * drafts must beat). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define MAX_GEN 160

static const char TOOLS[][2][420] = {
    {"calendar.create_event",
     "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":40},"
     "\"start\":{\"type\":\"string\",\"pattern\":\"^2026-1[0-2]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]$\"},"
     "\"duration_minutes\":{\"enum\":[15,30,45,60,90]},\"attendees\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\",\"maxLength\":32},\"maxItems\":3}},"
     "\"required\":[\"title\",\"start\",\"duration_minutes\"],\"additionalProperties\":false}"},
    {"mail.search",
     "{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\",\"maxLength\":40},"
     "\"from\":{\"type\":\"string\",\"maxLength\":32},\"limit\":{\"enum\":[5,10,20]}},"
     "\"required\":[\"query\"],\"additionalProperties\":false}"},
    {"files.read",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"maxLength\":48}},"
     "\"required\":[\"path\"],\"additionalProperties\":false}"},
};
#define N_TOOLS (int)(sizeof TOOLS / sizeof *TOOLS)

static const char *const REQUESTS[] = {
    "Schedule a 30-minute meeting titled Budget review with bob@example.com on 2026-12-01T14:00.",
    "Find the mails from alice@example.com about the quarterly budget review.",
    "Read the file notes/budget-2026.txt and tell me what it says about travel.",
    "Book Design sync for 60 minutes on 2026-11-30T10:30 with carol@example.com and dave@example.com.",
    "Search my mail for the invoice from ACME Corporation, at most 5 results.",
    "Open reports/q3-summary.md please.",
};
#define N_REQ (int)(sizeof REQUESTS / sizeof *REQUESTS)

typedef struct run {
    double secs;
    long tokens;
    hx_spec_stats st;
} run;

/* The prompt: the tool list (names and schemas) and the request. */
static int prompt_tokens(const hx_vocab *v, int req, int32_t *t, int max)
{
    char text[4096];
    int n = snprintf(text, sizeof text, "You can call these tools:\n");
    for (int i = 0; i < N_TOOLS; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "{\"name\": \"%s\", \"parameters\": %s}\n",
                      TOOLS[i][0], TOOLS[i][1]);
    n += snprintf(text + n, sizeof text - (size_t)n, "User: %s\nAssistant: ", REQUESTS[req]);
    return hx_tokenize(v, text, (size_t)n, t, max, hx_vocab_add_bos(v), 0);
}

static hx_sampler *new_sampler(hx_grammar *g, hx_gvocab *gv)
{
    hx_sampler_params sp = hx_sampler_default_params();
    sp.temp = 0;
    hx_sampler *s = hx_sampler_new(&sp);
    hx_sampler_stage st;
    if (!s || hx_grammar_stage(g, gv, &st) || hx_sampler_add_stage(s, &st)) {
        hx_sampler_free(s);
        return NULL;
    }
    return s;
}

/* Generates one call after prompt p with spec params sp (max_batch 1 =
 * plain decoding); the tokens into out, the time and counters into r. */
static int generate(hx_ctx *c, const hx_vocab *v, hx_grammar *g, hx_gvocab *gv,
                    const int32_t *p, int np, const hx_spec_params *sp,
                    int32_t *out, run *r)
{
    hx_sampler *s = new_sampler(g, gv);
    hx_spec *spec = hx_spec_new(c, v, sp);
    if (spec && sp->max_batch > 1 && hx_spec_set_grammar(spec, g, gv)) return -1;
    int32_t hist[4096 + MAX_GEN], step[64];
    hx_err err = {0};
    int n = 0, nh = np, rc = !s || !spec;
    memcpy(hist, p, (size_t)np * sizeof *p);
    hx_ctx_truncate(c, 0);
    if (!rc) rc = hx_decode(c, p, np, 0);
    double t0 = hx_time_mono();
    while (!rc && n < MAX_GEN) {
        int k = hx_spec_step(spec, s, hist, nh, step, &err), end = 0;
        if (k <= 0) { fprintf(stderr, "spec: %s\n", err.msg); rc = 1; break; }
        for (int i = 0; i < k && n < MAX_GEN && !end; i++) {
            out[n++] = step[i];
            if (!(end = hx_vocab_is_eog(v, step[i]))) hist[nh++] = step[i];
        }
        if (end) break;
    }
    r->secs += hx_time_mono() - t0;
    r->tokens += n;
    if (spec) {
        hx_spec_stats a = hx_spec_get_stats(spec);
        r->st.passes += a.passes, r->st.forced += a.forced;
        r->st.drafted += a.drafted, r->st.accepted += a.accepted;
    }
    hx_spec_free(spec);
    hx_sampler_free(s);
    return rc ? -1 : n;
}

/* Best-of-10 time of one pass of B tokens after a P-token context, B =
 * 1..9, and each against B = 1. */
static int pass_costs(hx_ctx *c, const hx_vocab *v, int P)
{
    static int32_t t[8192 + 16];
    if (P < 1 || P > 8192) return 1;
    for (int i = 0; i < P + 16; i++) t[i] = (int32_t)(100 + (i * 7919) % (hx_vocab_n_tokens(v) - 200));
    hx_ctx_truncate(c, 0);
    if (hx_decode(c, t, P, 0)) return 1;
    double one = 0;
    printf("  pass time after %d tokens of context (best of 10):\n", P);
    for (int B = 1; B <= 9; B++) {
        double best = 1e9;
        for (int r = 0; r < 10; r++) {
            double t0 = hx_time_mono();
            if (hx_decode(c, t + P, B, 1)) return 1;
            double dt = hx_time_mono() - t0;
            hx_ctx_truncate(c, P);
            best = dt < best ? dt : best;
        }
        if (B == 1) one = best;
        printf("    B=%d %6.2f ms  %.2f one-token passes\n", B, best * 1e3, best / one);
    }
    return 0;
}

static void print_call(const hx_vocab *v, const int32_t *t, int n)
{
    printf("    ");
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *p = hx_vocab_piece(v, t[i], &len);
        if (p && !hx_vocab_is_eog(v, t[i])) printf("%.*s", (int)len, p);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [compact 0|1] [threads] [reps] [rows P]\n", argv[0]);
        return 2;
    }
    int compact = argc > 2 ? atoi(argv[2]) : 0, threads = argc > 3 ? atoi(argv[3]) : 2;
    int reps = argc > 4 ? atoi(argv[4]) : 2;
    hx_err err = {0};
    hx_model *m = NULL;
    hx_gvocab *gv = NULL;
    hx_grammar *g = NULL;
    hx_ctx *c = NULL;
    hx_tool_spec tools[N_TOOLS];
    for (int i = 0; i < N_TOOLS; i++) tools[i] = (hx_tool_spec){TOOLS[i][0], TOOLS[i][1]};
    hx_grammar_params gp = hx_grammar_default_params();
    gp.compact = compact;
    gp.ws_max = 1; /* as `hearth generate`: no whitespace loops */
    hx_ctx_params cp = hx_ctx_default_params();
    int rows_p = argc > 6 && !strcmp(argv[5], "rows") ? atoi(argv[6]) : 0;
    cp.n_ctx = rows_p + 64 > 2048 ? rows_p + 64 : 2048;
    cp.n_threads = threads;
    if (hx_model_load(argv[1], NULL, &m, &err) || !hx_model_vocab(m) ||
        hx_gvocab_from_vocab(hx_model_vocab(m), &gv, &err) ||
        hx_grammar_tool_calls(tools, N_TOOLS, HX_TOOLS_REQUIRED, &gp, &g, &err) ||
        hx_ctx_new(m, &cp, &c, &err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err.msg[0] ? err.msg : "no tokenizer");
        return 1;
    }
    const hx_vocab *v = hx_model_vocab(m);
    hx_spec_params plain = hx_spec_default_params(), fast = plain;
    plain.max_batch = 1;
    run rp = {0}, rs = {0};
    int same = 0, total = 0;
    for (int rep = 0; rep < reps; rep++)
        for (int q = 0; q < N_REQ; q++) {
            int32_t p[4096], a[MAX_GEN], b[MAX_GEN];
            int np = prompt_tokens(v, q, p, 4096);
            int na = generate(c, v, g, gv, p, np, &plain, a, &rp);
            int nb = generate(c, v, g, gv, p, np, &fast, b, &rs);
            if (na < 0 || nb < 0) return 1;
            same += na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
            total++;
            if (rep == 0 && q < 2) print_call(v, b, nb);
        }
    double tp = rp.tokens / rp.secs, ts = rs.tokens / rs.secs;
    printf("model %s, %s grammar, %d threads, %d calls\n", argv[1],
           compact ? "compact" : "spaced", threads, total);
    printf("  plain: %ld tokens in %ld passes, %.2f s, %.1f tokens/s\n", rp.tokens,
           (long)rp.st.passes, rp.secs, tp);
    printf("  spec:  %ld tokens in %ld passes, %.2f s, %.1f tokens/s (%lld forced, "
           "%lld of %lld drafts accepted)\n", rs.tokens, (long)rs.st.passes, rs.secs, ts,
           (long long)rs.st.forced, (long long)rs.st.accepted, (long long)rs.st.drafted);
    printf("  ratio %.2fx; identical output: %d of %d calls\n", ts / tp, same, total);
    if (rows_p && pass_costs(c, v, rows_p)) {
        fprintf(stderr, "rows %d: a context of 1 to 8192 tokens is needed\n", rows_p);
        return 1;
    }
    hx_ctx_free(c);
    hx_grammar_free(g);
    hx_gvocab_free(gv);
    hx_model_free(m);
    return same == total ? 0 : 1;
}
