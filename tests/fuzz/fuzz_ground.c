/* fuzz_ground.c: fuzz target for grounded answers (agent/ground.c) and the
 * trace's evidence (agent/evidence.c), which read the conversation, tool
 * results included (mail, files, events: text from outside), and what the
 * model writes. The input is the conversation text, a NUL, the claim
 * words, a NUL, then the steps: each byte says whether a call is being
 * written (bit 7), whether the token taken is the best one left or one
 * picked by the byte (bit 6), and seeds the logits (hearth-tiny's
 * vocabulary, from models/; without the file only the text checks run).
 * Checks: the stage never turns a logit into a NaN nor masks every token
 * the logits allowed; hx_strip_markup leaves no markup and never grows the
 * text; hx_markup_prefix stays within it; hx_turn_call_name reads a name
 * that fits and is the text's; the evidence of a call whose result is the
 * text is a JSON array; hx_ground_end of the steps' bytes read as an answer
 * cut short stays within them and keeps the prefix it gives whole. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXT 4096
#define MAX_STEPS 48

static hx_model *g_model;
static int g_loaded;

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
    return x;
}

/* Applies the stage to logits from seed s and checks them; the best
 * token left, or -1. */
static int32_t apply_checked(hx_sampler_stage *st, float *l, int32_t nv, uint32_t s)
{
    int before = 0, after = 0;
    for (int32_t t = 0; t < nv; t++) {
        const uint32_t h = mix(s * 0x9e3779b9U + (uint32_t)t);
        l[t] = h % 8 == 0 ? -INFINITY : (float)(h >> 8 & 31);
        before |= isfinite(l[t]);
    }
    if (st->apply(st->ctx, l, nv)) abort();
    int32_t best = -1;
    for (int32_t t = 0; t < nv; t++) {
        if (isnan(l[t])) abort();
        if (isfinite(l[t]) && (best < 0 || l[t] > l[best])) best = t, after = 1;
    }
    if (before && !after) abort(); /* everything masked */
    return best;
}

static void run_stage(const char *text, const char *claims, const uint8_t *steps, size_t n)
{
    if (!g_loaded) {
        hx_err err = {0};
        g_loaded = 1;
        if (hx_model_load("models/hearth-tiny.gguf", NULL, &g_model, &err)) g_model = NULL;
    }
    if (!g_model) return;
    const hx_vocab *v = hx_model_vocab(g_model);
    const int32_t nv = hx_vocab_n_tokens(v);
    float *l = malloc((size_t)nv * sizeof *l);
    int in_call = 0;
    hx_sampler_stage st;
    if (!l) abort();
    if (hx_ground_stage_new(v, text, claims, n & 1 ? "<tool_call>" : NULL, &in_call, &st) == HX_OK) {
        for (size_t i = 0; i < n && i < MAX_STEPS; i++) {
            in_call = steps[i] >> 7;
            int32_t tok = apply_checked(&st, l, nv, steps[i] * 131u + (uint32_t)i);
            if (steps[i] & 0x40) tok = (int32_t)(mix(steps[i] + (uint32_t)i) % (uint32_t)nv);
            if (tok >= 0) st.accept(st.ctx, tok);
        }
        st.free(st.ctx);
    }
    free(l);
}

static void check_text(const char *text)
{
    const size_t n = strlen(text);
    char *s = hx_strdup(text);
    if (!s) abort();
    const size_t m = hx_strip_markup(s);
    if (m > n || strlen(s) != m || strstr(s, "</tool_call>") || strstr(s, "<tool_call>")) abort();
    if (hx_markup_prefix(text, n) > n) abort();
    free(s);
    char name[32];
    hx_turn_call_name(text, name, sizeof name); /* a whole name that fits, from the text */
    if (strlen(name) >= sizeof name || (name[0] && !strstr(text, name))) abort();
    static const char *const tools[] = {"calendar.list_events", "calendar.create_event", "mail.read",
                                        "mail.search", "files.read", "memory.search"};
    cJSON *calls = cJSON_CreateArray(), *c = cJSON_CreateObject(), *args = cJSON_Parse(text);
    cJSON_AddStringToObject(c, "name", tools[n % 6]);
    cJSON_AddItemToObject(c, "arguments", cJSON_IsObject(args) ? args : cJSON_CreateObject());
    if (!cJSON_IsObject(args)) cJSON_Delete(args);
    cJSON_AddStringToObject(c, "status", n & 2 ? "ok" : n & 4 ? "error" : "refused");
    cJSON_AddStringToObject(c, "result", text);
    cJSON_AddItemToArray(calls, c);
    cJSON *read = hx_agent_read(calls, NULL, text), *done = hx_agent_done(calls, NULL, NULL);
    if (!cJSON_IsArray(read) || !cJSON_IsArray(done)) abort();
    hx_buf b;
    hx_buf_init(&b);
    const cJSON *it;
    cJSON_ArrayForEach(it, read) hx_agent_read_line(it, &b);
    if (hx_agent_claims(calls, NULL, &b)) abort();
    hx_buf_free(&b);
    /* the answers written from the calls: whole, without markup */
    char *said = hx_agent_results_answer(calls, NULL, text, text, NULL), *tier = hx_agent_tier_answer(calls, NULL);
    if (!said || !tier || strstr(said, "<tool_call>") || strstr(said, "</tool_call>")) abort();
    free(said);
    free(tier);
    cJSON_Delete(read);
    cJSON_Delete(done);
    cJSON_Delete(calls);
}

static void check_end(const char *text, const char *claims, const char *answer, size_t n)
{
    size_t end = n + 1, again = n + 1;
    if (hx_ground_end(text, claims, answer, n, &end) == HX_OK &&
        (end > n || (hx_ground_end(text, claims, answer, end, &again) == HX_OK && again != end)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    const size_t n_text = nul ? (size_t)(nul - data) : size;
    if (n_text > MAX_TEXT) return 0;
    const uint8_t *c0 = nul ? nul + 1 : data + size;
    const uint8_t *nul2 = memchr(c0, 0, (size_t)(data + size - c0));
    const size_t n_claims = nul2 ? (size_t)(nul2 - c0) : (size_t)(data + size - c0);
    char *text = malloc(n_text + 1), *claims = malloc(n_claims + 1);
    if (!text || !claims) abort();
    memcpy(text, data, n_text);
    text[n_text] = 0;
    memcpy(claims, c0, n_claims);
    claims[n_claims] = 0;
    const uint8_t *steps = nul2 ? nul2 + 1 : data + size;
    check_text(text);
    check_end(text, claims, (const char *)steps, (size_t)(data + size - steps));
    run_stage(text, claims, steps, (size_t)(data + size - steps));
    free(text);
    free(claims);
    return 0;
}
