/* test_grammar_decode.c: the real stories260K model sampling at a high
 * temperature under a required tool-call grammar: 100 of 100 outputs (one
 * or more calls each) parse and validate against the tools' schemas
 * (checked here independently). */
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine/engine.h"
#include "test.h"

#define RUNS 100
#define MAX_TOKENS 320

static const char WEATHER[] =
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7},"
    "\"unit\":{\"enum\":[\"C\",\"F\"]}},\"required\":[\"city\",\"days\"],\"additionalProperties\":false}";
static const char REMIND[] =
    "{\"type\":\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
    "\"pattern\":\"^[a-z]{1,5}$\"},\"maxItems\":3},\"urgent\":{\"type\":\"boolean\"}},"
    "\"required\":[\"urgent\"],\"additionalProperties\":false}";

/* Independent check of the arguments against the two schemas above. */
static int valid_args(const char *name, const cJSON *a)
{
    if (!cJSON_IsObject(a)) return 0;
    if (!strcmp(name, "weather")) {
        const cJSON *city = cJSON_GetObjectItem(a, "city"), *days = cJSON_GetObjectItem(a, "days");
        const cJSON *unit = cJSON_GetObjectItem(a, "unit");
        int n = 0;
        for (const cJSON *k = a->child; k; k = k->next) n++;
        if (!cJSON_IsString(city) || !city->valuestring[0]) return 0;
        /* maxLength counts code points */
        int cps = 0;
        for (const unsigned char *p = (const unsigned char *)city->valuestring; *p; p++) cps += (*p & 0xC0) != 0x80;
        if (cps > 8) return 0;
        if (!cJSON_IsNumber(days) || days->valuedouble != (int)days->valuedouble || days->valuedouble < 1 ||
            days->valuedouble > 7)
            return 0;
        if (unit && !(cJSON_IsString(unit) && (!strcmp(unit->valuestring, "C") || !strcmp(unit->valuestring, "F"))))
            return 0;
        return n == 2 + (unit != NULL);
    }
    if (!strcmp(name, "remind")) {
        const cJSON *tags = cJSON_GetObjectItem(a, "tags"), *urg = cJSON_GetObjectItem(a, "urgent");
        int n = 0;
        for (const cJSON *k = a->child; k; k = k->next) n++;
        if (!cJSON_IsBool(urg)) return 0;
        if (tags) {
            if (!cJSON_IsArray(tags) || cJSON_GetArraySize(tags) > 3) return 0;
            for (const cJSON *t = tags->child; t; t = t->next) {
                size_t l = cJSON_IsString(t) ? strlen(t->valuestring) : 0;
                if (l < 1 || l > 5) return 0;
                for (size_t i = 0; i < l; i++)
                    if (t->valuestring[i] < 'a' || t->valuestring[i] > 'z') return 0;
            }
        }
        return n == 1 + (tags != NULL);
    }
    return 0;
}

/* One or more "<tool_call>{...}</tool_call>" (whitespace between) -> the
 * number of calls if every one parses and validates, else 0. */
static int check_output(const char *out)
{
    const char *open = "<tool_call>", *close = "</tool_call>";
    size_t lo = strlen(open);
    int n = 0;
    for (const char *p = out + strspn(out, " \n"); *p; p += strspn(p, " \n")) {
        const char *end = strstr(p, close);
        if (strncmp(p, open, lo) || !end) return 0;
        cJSON *j = cJSON_ParseWithLength(p + lo, (size_t)(end - p - (ptrdiff_t)lo));
        const cJSON *name = cJSON_GetObjectItem(j, "name");
        int ok = cJSON_IsString(name) && valid_args(name->valuestring, cJSON_GetObjectItem(j, "arguments"));
        cJSON_Delete(j);
        if (!ok) return 0;
        n++;
        p = end + strlen(close);
    }
    return n;
}

static void test_tool_calls_stories(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", hx_shared_data_dir());
    if (access(path, R_OK)) SKIP("%s not found", path);
    hx_model *m = NULL;
    hx_err err = {0};
    hx_model_params mp = hx_model_default_params();
    ASSERT(hx_model_load(path, &mp, &m, &err) == HX_OK);
    const hx_vocab *v = hx_model_vocab(m);
    ASSERT(v);
    hx_gvocab *gv = NULL;
    ASSERT(hx_gvocab_from_vocab(v, &gv, &err) == HX_OK);
    hx_tool_spec tools[2] = {{"weather", WEATHER}, {"remind", REMIND}};
    hx_grammar_params gp = hx_grammar_default_params();
    gp.compact = 1;    /* unbounded whitespace lets a tiny model ramble */
    gp.generation = 1; /* and "2.0000000..." */
    gp.max_calls = 2;
    hx_grammar *g = NULL;
    ASSERT(hx_grammar_tool_calls(tools, 2, HX_TOOLS_REQUIRED, &gp, &g, &err) == HX_OK);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 256;
    hx_ctx *c = NULL;
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    int32_t prompt[64];
    int32_t np = hx_tokenize(v, "Once upon a time", 16, prompt, 64, 1, 0);
    ASSERT(np > 0);
    int good = 0, names[2] = {0}, multi = 0;
    for (int run = 0; run < RUNS; run++) {
        hx_sampler_params sp = hx_sampler_default_params();
        sp.temp = 1.5f;
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.seed = 1000 + (uint64_t)run;
        hx_sampler *s = hx_sampler_new(&sp);
        hx_sampler_stage st;
        ASSERT(s && hx_grammar_stage(g, gv, &st) == HX_OK);
        ASSERT(hx_sampler_add_stage(s, &st) == HX_OK);
        hx_ctx_truncate(c, 0);
        hx_buf out;
        hx_buf_init(&out);
        int ended = 0;
        if (hx_decode(c, prompt, np, 0) == HX_OK) {
            for (int k = 0; k < MAX_TOKENS && !ended; k++) {
                int32_t t = hx_sampler_sample(s, hx_ctx_logits(c, -1), hx_vocab_n_tokens(v));
                if (t < 0 || hx_sampler_accept(s, t)) break;
                if (hx_vocab_is_eog(v, t)) { ended = 1; break; }
                size_t l;
                const char *p = hx_vocab_piece(v, t, &l);
                hx_buf_append(&out, p, l);
                if (hx_decode(c, &t, 1, 0)) break;
            }
        }
        int calls = ended && out.data ? check_output(out.data) : 0, ok = calls > 0;
        multi += calls > 1;
        if (ok && strstr(out.data, "\"weather\"")) names[0]++;
        if (ok && strstr(out.data, "\"remind\"")) names[1]++;
        if (!ok || run < 2) printf("     run %d (ended %d): %s\n", run, ended, out.data ? out.data : "");
        good += ok;
        hx_buf_free(&out);
        hx_sampler_free(s);
    }
    printf("     %d of %d valid (weather %d, remind %d; %d with several calls)\n", good, RUNS, names[0],
           names[1], multi);
    EXPECT_EQ_INT(good, RUNS);
    EXPECT(multi > 0); /* turns with two calls do occur */
    hx_ctx_free(c);
    hx_grammar_free(g);
    hx_gvocab_free(gv);
    hx_model_free(m);
}

int main(void)
{
    RUN(test_tool_calls_stories);
    return test_summary();
}
