/* fuzz_copy.c: fuzz target for the copy stage (agent/copy.c), which scans
 * the conversation, tool results included (mail, files, events: text from
 * outside), for values a call or an answer copies, and walks an answer's
 * list through it. The input is the conversation text, a NUL, then the
 * steps: each byte says whether a call is being written (bit 7), whether
 * the token taken is the best one or one picked by the byte (bit 6), or
 * (bit 5) has the answer write one of the text's string values whole and
 * "," (as a list's items), or with bit 6 too makes the model's best token
 * the first of one (naming an item), and seeds the logits (hearth-tiny's
 * vocabulary, from models/; without the file it returns at once).
 * Checks: the stage never turns a logit into a NaN, never masks every
 * token the logits allowed, and hx_copy_repair of a value made of the
 * steps keeps a valid string. The same steps drive the argument check
 * stage holding a list call's range to the text's phrases and values (the
 * time reader judging them) and a cancel's uid to the text's uids, with
 * the same checks; and the text's JSON
 * strings as hx_jstr reads them lie within it, between quotes, on one
 * line. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TEXT 4096
#define MAX_STEPS 32

static hx_model *g_model;
static int g_loaded;

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16, x *= 0x7feb352dU, x ^= x >> 15, x *= 0x846ca68bU, x ^= x >> 16;
    return x;
}

/* Logits from seed s: small integers, one token in 8 masked. */
static void fill_logits(float *l, int32_t n, uint32_t s)
{
    for (int32_t t = 0; t < n; t++) {
        const uint32_t h = mix(s * 0x9e3779b9U + (uint32_t)t);
        l[t] = h % 8 == 0 ? -INFINITY : (float)(h >> 8 & 15);
    }
}

static int any_finite(const float *l, int32_t n, int32_t *best)
{
    int any = 0;
    for (int32_t t = 0; t < n; t++)
        if (isfinite(l[t]) && (!any || l[t] > l[*best])) *best = t, any = 1;
    return any;
}

/* Applies the stage to logits from seed s (token top, if not -1, the
 * best) and checks them; the best token left, or -1. */
static int32_t apply_checked(hx_sampler_stage *st, float *l, int32_t nv, uint32_t s, int32_t top)
{
    fill_logits(l, nv, s);
    if (top >= 0) l[top] = 100;
    int32_t best = 0;
    const int before = any_finite(l, nv, &best);
    if (st->apply(st->ctx, l, nv)) abort();
    for (int32_t t = 0; t < nv; t++)
        if (isnan(l[t])) abort();
    const int after = any_finite(l, nv, &best);
    if (before && !after) abort(); /* everything masked */
    return after ? best : -1;
}

/* The tokens of " " + the text's k-th string value (after ": \"") + ","
 * into ids (at most 96); how many. */
static int32_t value_tokens(const hx_vocab *v, const char *text, int k, int32_t *ids)
{
    const char *p = text, *q;
    int found = 0;
    for (int i = 0; (q = strstr(p, ": \"")); i++, p = q + 3)
        if (i >= k) {
            found = 1;
            break;
        }
    if (!found) return 0;
    const char *end = strchr(q + 3, '"');
    char piece[96];
    const size_t n = end ? (size_t)(end - q - 3) : 0;
    if (n == 0 || n + 3 > sizeof piece) return 0;
    memcpy(piece + 1, q + 3, n);
    piece[0] = ' ', memcpy(piece + 1 + n, ",", 2);
    const int32_t m = hx_tokenize(v, piece, n + 2, ids, 96, 0, 0);
    return m > 0 ? m : 0;
}

/* The answer writes value k whole (all its tokens, then ","), or with
 * name only makes its first token the model's best and takes what the
 * stage leaves best. */
static void write_value(const hx_vocab *v, hx_sampler_stage *st, const char *text, int k,
                        int name, float *l, int32_t nv)
{
    int32_t ids[96];
    const int32_t m = value_tokens(v, text, k, ids);
    for (int32_t i = 0; i < m && !name; i++) {
        (void)apply_checked(st, l, nv, (uint32_t)ids[i], -1);
        st->accept(st->ctx, ids[i]);
    }
    const int32_t best = m && name ? apply_checked(st, l, nv, (uint32_t)k, ids[0]) : -1;
    if (best >= 0) st->accept(st->ctx, best);
}

static void run_steps(const hx_vocab *v, hx_sampler_stage *st, int *in_call, const char *text,
                      const uint8_t *steps, size_t n, float *l, int32_t nv)
{
    for (size_t i = 0; i < n && i < MAX_STEPS; i++) {
        *in_call = steps[i] >> 7;
        if (steps[i] & 0x20) {
            write_value(v, st, text, steps[i] & 0x1f, steps[i] & 0x40, l, nv);
            continue;
        }
        int32_t tok = apply_checked(st, l, nv, steps[i] * 131u + (uint32_t)i, -1);
        if (steps[i] & 0x40) tok = (int32_t)(mix(steps[i] + (uint32_t)i) % (uint32_t)nv);
        if (tok >= 0) st->accept(st->ctx, tok);
    }
}

/* The strings hx_jstr reads: in order, inside the text, each between
 * two quotes with no line end, a key's own bytes its key. */
static void check_strings(const char *text, size_t n)
{
    hx_jstr s = {.t = text, .n = n};
    size_t last = 0;
    while (hx_jstr_next(&s)) {
        if (s.start < 1 || s.start < last || s.end < s.start || s.end >= n) abort();
        if (text[s.start - 1] != '"' || text[s.end] != '"' ||
            memchr(text + s.start, '\n', s.end - s.start))
            abort();
        if (s.key_len && s.key + s.key_len > n) abort();
        if (s.is_key && (s.key != s.start || s.key_len != s.end - s.start || s.is_value)) abort();
        last = s.end + 1;
    }
}

static int when_check(void *user, const char *tool, const char *key, const char *value)
{
    (void)user, (void)tool, (void)key;
    hx_when_range r;
    hx_err e = {0};
    const int rc = hx_when_parse(value, 1796000000, "UTC", &r, &e);
    return rc == HX_OK || rc == HX_ERR_RANGE; /* as hx_agent_arg_check */
}

/* The argument check stage holding values to the text, the call open
 * (a list call's range, a cancel's uid), then the steps. */
static void run_argcheck(const hx_vocab *v, const char *text, const char *open,
                         const uint8_t *steps, size_t n, float *l, int32_t nv)
{
    int in_call = 1;
    const int *defer = NULL;
    hx_sampler_stage st;
    if (hx_argcheck_stage_new(v, when_check, NULL, &in_call, &st, &defer)) return;
    int32_t ids[64];
    const int32_t m = hx_argcheck_stage_hold(&st, text, text)
                          ? 0
                          : hx_tokenize(v, open, strlen(open), ids, 64, 0, 0);
    for (int32_t i = 0; i < m; i++) st.accept(st.ctx, ids[i]);
    if (m > 0) run_steps(v, &st, &in_call, text, steps, n, l, nv);
    st.free(st.ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_loaded) {
        hx_err err = {0};
        g_loaded = 1;
        if (hx_model_load("models/hearth-tiny.gguf", NULL, &g_model, &err)) g_model = NULL;
    }
    if (!g_model) return 0;
    const hx_vocab *v = hx_model_vocab(g_model);
    const int32_t nv = hx_vocab_n_tokens(v);
    const uint8_t *nul = memchr(data, 0, size);
    const size_t n_text = nul ? (size_t)(nul - data) : size;
    if (n_text > MAX_TEXT) return 0;
    char *text = malloc(n_text + 1);
    float *l = malloc((size_t)nv * sizeof *l);
    if (!text || !l) abort();
    memcpy(text, data, n_text);
    text[n_text] = 0;
    int in_call = 0;
    hx_sampler_stage st;
    const uint8_t *steps = nul ? nul + 1 : data + size;
    check_strings(text, n_text);
    if (hx_copy_stage_new(v, text, text, text, 6.0f, &in_call, &st) == HX_OK) {
        run_steps(v, &st, &in_call, text, steps, (size_t)(data + size - steps), l, nv);
        st.free(st.ctx);
    }
    run_argcheck(v, text, "{\"name\": \"calendar.list_events\", \"arguments\": {\"range\": \"",
                 steps, (size_t)(data + size - steps), l, nv);
    run_argcheck(v, text, "{\"name\": \"calendar.cancel_event\", \"arguments\": {\"uid\": \"",
                 steps, (size_t)(data + size - steps), l, nv);
    /* a value from the steps' bytes, mended against the text */
    cJSON *args = cJSON_CreateObject();
    char val[64];
    const size_t k = nul && size - n_text - 1 < sizeof val ? size - n_text - 1 : 0;
    for (size_t i = 0; i < k; i++) val[i] = (char)(nul[1 + i] ? nul[1 + i] : ' ');
    val[k] = 0;
    if (args && cJSON_AddStringToObject(args, "title", val)) {
        (void)hx_copy_repair(text, args);
        if (!cJSON_IsString(cJSON_GetObjectItem(args, "title"))) abort();
    }
    cJSON_Delete(args);
    free(text);
    free(l);
    return 0;
}
