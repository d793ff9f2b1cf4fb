/* test_grammar.c: JSON Schema grammar: per-keyword valid and invalid
 * instances through the byte matcher, compile errors, masks on a toy vocab. */
#include <string.h>

#include "engine/engine.h"
#include "test.h"

/* 1 accepted, 0 rejected, -1 compile error. */
static int run(const char *schema, const char *inst)
{
    hx_grammar *g;
    hx_err err = {0};
    if (hx_grammar_from_schema(schema, strlen(schema), NULL, &g, &err)) return -1;
    hx_matcher *m = hx_matcher_new(g, NULL);
    int ok = m && hx_matcher_feed(m, inst, strlen(inst)) == HX_OK && hx_matcher_can_end(m);
    hx_matcher_free(m);
    hx_grammar_free(g);
    return ok;
}

#define YES(s, i) EXPECT_EQ_INT(run(s, i), 1)
#define NO(s, i) EXPECT_EQ_INT(run(s, i), 0)
#define BAD(s) EXPECT_EQ_INT(run(s, "{}"), -1)

static void test_types(void)
{
    YES("{\"type\":\"null\"}", "null");
    NO("{\"type\":\"null\"}", "nul");
    YES("{\"type\":\"boolean\"}", "true");
    NO("{\"type\":\"boolean\"}", "1");
    YES("{\"type\":[\"string\",\"null\"]}", "null");
    YES("{\"type\":[\"string\",\"null\"]}", "\"x\"");
    NO("{\"type\":[\"string\",\"null\"]}", "1");
    YES("{\"type\":\"number\"}", "-1.5e-06");
    YES("{\"type\":\"number\"}", "100000.0");
    NO("{\"type\":\"number\"}", "01");
    YES("{\"type\":\"integer\"}", "-12");
    NO("{\"type\":\"integer\"}", "1.5");
    YES("{\"type\":\"integer\"}", "3.0"); /* draft 2020: an integer */
    NO("{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\"}", "3.0");
    YES("{}", "{\"a\": [1, {\"b\": null}], \"c\": \"\\u0001\"}");
    YES("true", "[]");
    EXPECT_EQ_INT(run("false", "1"), -1); /* unsatisfiable */
}

static void test_objects(void)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                    "\"b\":{\"type\":\"string\"}},\"required\":[\"b\"],\"additionalProperties\":false}";
    YES(s, "{\"b\": \"x\"}");
    YES(s, "{\"a\": 1, \"b\": \"x\"}");
    YES(s, "{ \"a\" : 1 ,\n\t\"b\":\"x\" }");
    NO(s, "{\"a\": 1}");
    NO(s, "{\"b\": \"x\", \"c\": 1}");
    NO(s, "{\"a\": \"1\", \"b\": \"x\"}");
    const char *t = "{\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}";
    YES(t, "{\"a\": 1, \"z\": \"q\"}");
    NO(t, "{\"a\": 1, \"z\": 2}");
    NO(t, "{\"z\": \"q\", \"a\": \"no\"}");
    NO(t, "{\"a\": \"x\"}");
    const char *pp = "{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"additionalProperties\":false}";
    YES(pp, "{\"x-a\": 1}");
    NO(pp, "{\"x-a\": \"s\"}");
    NO(pp, "{\"y\": 1}");
    YES("{\"type\":\"object\",\"minProperties\":1,\"required\":[\"a\"]}", "{\"a\": 1}");
    BAD("{\"type\":\"object\",\"minProperties\":2}");
}

static void test_arrays(void)
{
    const char *s = "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}";
    YES(s, "[1]");
    YES(s, "[1, 2, 3]");
    NO(s, "[]");
    NO(s, "[1, 2, 3, 4]");
    NO(s, "[1, \"a\"]");
    const char *p = "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}";
    YES(p, "[\"a\", 1]");
    YES(p, "[\"a\"]");
    NO(p, "[\"a\", 1, 2]");
    NO(p, "[1]");
    const char *d4 = "{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"items\":[{\"type\":\"string\"}],"
                     "\"additionalItems\":{\"type\":\"boolean\"}}";
    YES(d4, "[\"a\", true, false]");
    NO(d4, "[\"a\", 1]");
    BAD("{\"type\":\"array\",\"uniqueItems\":true}");
    BAD("{\"type\":\"array\",\"contains\":{\"type\":\"string\"}}");
}

static void test_strings(void)
{
    const char *s = "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}";
    YES(s, "\"ab\"");
    YES(s, "\"\xc3\xa9\\n\"");
    NO(s, "\"\\u00e9\\n\""); /* only json.dumps escapes, by design */
    YES(s, "\"\xc3\xa9\xc3\xa9\"");
    NO(s, "\"a\"");
    NO(s, "\"abcd\"");
    const char *p = "{\"type\":\"string\",\"pattern\":\"^[a-z]+\\\\d{2}$\"}";
    YES(p, "\"ab12\"");
    NO(p, "\"ab1\"");
    NO(p, "\"Ab12\"");
    YES("{\"type\":\"string\",\"pattern\":\"foo\"}", "\"xx foo yy\"");
    NO("{\"type\":\"string\",\"pattern\":\"foo\"}", "\"xx fo yy\"");
    YES("{\"pattern\":\"^a\\\"b$\",\"type\":\"string\"}", "\"a\\\"b\"");
    BAD("{\"type\":\"string\",\"pattern\":\"(?=a)\"}");
    BAD("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}");
}

/* Addresses as RFC 5321 bounds them, so that a model cannot ramble
 * inside one: no spaces, a local part of at most 64, a domain of at most
 * 253 in labels of at most 63, 254 in all; non-ASCII (RFC 6531) allowed. */
static void test_email_bounds(void)
{
    const char *em = "{\"type\":\"string\",\"format\":\"email\"}";
    char local64[200], local65[200], label63[200], label64[200], dom[400];
    memset(local64, 'x', 64), local64[64] = 0;
    memset(local65, 'x', 65), local65[65] = 0;
    memset(label63, 'd', 63), label63[63] = 0;
    memset(label64, 'd', 64), label64[64] = 0;
    char v[700];
    YES(em, "\"bob.lee+news@mail.example.org\"");
    YES(em, "\"jürgen@bücher.de\"");
    YES(em, "\"admin@[192.168.0.1]\"");
    NO(em, "\"bob lee@example.org\"");
    NO(em, "\"bob@example org\"");
    NO(em, "\"bob@@example.org\"");
    NO(em, "\"@example.org\"");
    NO(em, "\"bob@\"");
    NO(em, "\"bob@-example.org\"");
    snprintf(v, sizeof v, "\"%s@example.org\"", local64);
    YES(em, v);
    snprintf(v, sizeof v, "\"%s@example.org\"", local65);
    NO(em, v);
    snprintf(v, sizeof v, "\"a@%s.org\"", label63);
    YES(em, v);
    snprintf(v, sizeof v, "\"a@%s.org\"", label64);
    NO(em, v);
    /* a domain of 4 labels of 63: 255 characters, over 253 */
    snprintf(dom, sizeof dom, "%s.%s.%s.%s", label63, label63, label63, label63);
    snprintf(v, sizeof v, "\"a@%s\"", dom);
    NO(em, v);
    dom[63 * 3 + 3 + 60] = 0; /* 252: with "a@", 254 in all */
    snprintf(v, sizeof v, "\"a@%s\"", dom);
    YES(em, v);
    snprintf(v, sizeof v, "\"ab@%s\"", dom); /* 255 */
    NO(em, v);
    /* a fraction of a second of at most 9 digits (nanoseconds) */
    YES("{\"type\":\"string\",\"format\":\"time\"}", "\"10:00:00.123456789Z\"");
    NO("{\"type\":\"string\",\"format\":\"time\"}", "\"10:00:00.1234567890Z\"");
    static char uri[2200];
    memcpy(uri, "\"https://x.org/", 15);
    memset(uri + 15, 'a', 2034), uri[2049] = '"', uri[2050] = 0; /* 2,048 characters */
    YES("{\"type\":\"string\",\"format\":\"uri\"}", uri);
    uri[2049] = 'a', uri[2050] = '"', uri[2051] = 0;
    NO("{\"type\":\"string\",\"format\":\"uri\"}", uri);
}

static void test_formats(void)
{
    YES("{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-02-29T10:00:00Z\"");
    NO("{\"type\":\"string\",\"format\":\"date-time\"}", "\"2023-02-29T10:00:00Z\"");
    YES("{\"type\":\"string\",\"format\":\"date\"}", "\"2000-02-29\"");
    NO("{\"type\":\"string\",\"format\":\"date\"}", "\"1900-02-29\"");
    YES("{\"type\":\"string\",\"format\":\"time\"}", "\"10:00:00+01:00\"");
    YES("{\"type\":\"string\",\"format\":\"email\"}", "\"a@b\"");
    NO("{\"type\":\"string\",\"format\":\"email\"}", "\"ab\"");
    test_email_bounds();
    YES("{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"");
    NO("{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567e89b-12d3-a456-426614174000\"");
    YES("{\"type\":\"string\",\"format\":\"uri\"}", "\"https://example.com/a?b=c#d\"");
    NO("{\"type\":\"string\",\"format\":\"uri\"}", "\"not a uri\"");
    YES("{\"type\":\"string\",\"format\":\"ipv4\"}", "\"192.168.0.1\"");
    NO("{\"type\":\"string\",\"format\":\"ipv4\"}", "\"256.1.1.1\"");
    YES("{\"type\":\"string\",\"format\":\"my-own\"}", "\"anything\"");
    BAD("{\"type\":\"string\",\"format\":\"hostname\"}");
}

static void test_numbers(void)
{
    const char *s = "{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}";
    YES(s, "-5");
    YES(s, "0");
    YES(s, "120");
    YES(s, "99");
    NO(s, "121");
    NO(s, "-6");
    NO(s, "1000");
    const char *e = "{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":10}";
    YES(e, "1");
    YES(e, "9");
    NO(e, "0");
    NO(e, "10");
    const char *n = "{\"type\":\"number\",\"minimum\":0,\"maximum\":1}";
    YES(n, "0.5");
    YES(n, "1.0");
    YES(n, "0");
    NO(n, "1.5");
    NO(n, "-0.5");
    const char *x = "{\"type\":\"number\",\"exclusiveMinimum\":0}";
    YES(x, "0.001");
    NO(x, "0");
    NO(x, "0.0");
    NO(x, "-1");
    BAD("{\"type\":\"number\",\"multipleOf\":0.5}");
}

static void test_enum_const_combinators(void)
{
    const char *en = "{\"enum\":[\"a\",1,null,{\"k\":[true]}]}";
    YES(en, "\"a\"");
    YES(en, "1");
    YES(en, "1.0");
    YES(en, "null");
    YES(en, "{\"k\": [true]}");
    NO(en, "\"b\"");
    NO(en, "2");
    YES("{\"const\":\"x\"}", "\"x\"");
    NO("{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\",\"enum\":[1,2]}", "1.0");
    YES("{\"$schema\":\"http://json-schema.org/draft-04/schema#\",\"type\":\"integer\",\"enum\":[1,2]}", "2");
    NO("{\"const\":\"x\"}", "\"y\"");
    NO("{\"type\":\"string\",\"enum\":[\"a\",1]}", "1");
    const char *any = "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}";
    YES(any, "\"s\"");
    YES(any, "5");
    NO(any, "null");
    const char *one = "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}";
    YES(one, "5");
    BAD("{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}");
    /* objects with different required keys overlap ({"a":1,"b":2} is in
     * both), whatever the grammar's property order says */
    BAD("{\"oneOf\":[{\"type\":\"object\",\"required\":[\"a\"]},{\"type\":\"object\",\"required\":[\"b\"]}]}");
    /* a discriminator needs objects only: "x" satisfies both branches here */
    BAD("{\"oneOf\":[{\"properties\":{\"k\":{\"const\":1}},\"required\":[\"k\"]},"
        "{\"properties\":{\"k\":{\"const\":2}},\"required\":[\"k\"]}]}");
    const char *disc = "{\"type\":\"object\",\"oneOf\":[{\"properties\":{\"k\":{\"const\":\"a\"},\"v\":{\"type\":\"integer\"}},"
                       "\"required\":[\"k\"]},{\"properties\":{\"k\":{\"enum\":[\"b\",\"c\"]}},\"required\":[\"k\"]}]}";
    YES(disc, "{\"k\": \"a\", \"v\": 1}");
    YES(disc, "{\"k\": \"c\", \"v\": \"s\"}");
    NO(disc, "{\"k\": \"a\", \"v\": \"s\"}");
    NO(disc, "{\"k\": \"d\"}");
    const char *all = "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"]},"
                      "{\"properties\":{\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"]}]}";
    YES(all, "{\"a\": \"x\", \"b\": 1}");
    NO(all, "{\"a\": \"x\"}");
    NO(all, "{\"a\": \"x\", \"b\": \"y\"}");
    const char *closed = "{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false},"
                         "{\"properties\":{\"b\":{}}}]}";
    YES(closed, "{\"a\": 1}");
    NO(closed, "{\"b\": 1}");
    /* anyOf branches merged with sibling properties keep every property
     * (a merged property once lost its name and became unconstrained) */
    const char *br = "{\"type\":\"object\",\"properties\":{\"type\":{\"enum\":[\"CALL\",\"WILD\"]}},"
                     "\"anyOf\":[{\"properties\":{\"type\":{\"enum\":[\"CALL\"]},\"data\":{\"type\":\"string\",\"minLength\":1}}},"
                     "{\"properties\":{\"type\":{\"enum\":[\"WILD\"]}}}]}";
    NO(br, "{\"type\": \"CALL\", \"data\": \"\"}");
    YES(br, "{\"type\": \"CALL\", \"data\": \"x\"}");
    YES(br, "{\"type\": \"WILD\", \"data\": \"\"}");
    NO(br, "{\"type\": \"OTHER\"}");
    BAD("{\"not\":{\"type\":\"string\"}}");
    BAD("{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":1}}");
}

static void test_refs(void)
{
    const char *s = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                    "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
                    "\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}";
    YES(s, "{\"v\": 1}");
    YES(s, "{\"v\": 1, \"next\": {\"v\": 2, \"next\": {\"v\": 3, \"next\": null}}}");
    NO(s, "{\"v\": 1, \"next\": {\"v\": \"x\"}}");
    NO(s, "{\"v\": 1, \"next\": {}}");
    const char *d = "{\"definitions\":{\"s\":{\"type\":\"string\"}},\"properties\":{\"a\":{\"$ref\":\"#/definitions/s\"}}}";
    YES(d, "{\"a\": \"x\"}");
    NO(d, "{\"a\": 1}");
    EXPECT_EQ_INT(run("{\"$ref\":\"http://x/y.json\"}", "{}"), -1);
}

static void test_errors_name_path(void)
{
    hx_grammar *g = NULL;
    hx_err err = {0};
    const char *s = "{\"properties\":{\"a\":{\"not\":{}}}}";
    EXPECT_EQ_INT(hx_grammar_from_schema(s, strlen(s), NULL, &g, &err), HX_ERR_UNSUPPORTED);
    EXPECT(strstr(err.msg, "not") != NULL);
    EXPECT(strstr(err.msg, "/properties/a") != NULL);
    EXPECT(hx_grammar_from_schema("{", 1, NULL, &g, &err) == HX_ERR_FORMAT);
    EXPECT(g == NULL);
}

static void test_compact(void)
{
    hx_grammar_params p = hx_grammar_default_params();
    hx_grammar *g;
    hx_err err = {0};
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}";
    p.compact = 1;
    ASSERT(hx_grammar_from_schema(s, strlen(s), &p, &g, &err) == HX_OK);
    hx_matcher *m = hx_matcher_new(g, NULL);
    EXPECT(hx_matcher_feed(m, "{\"a\":1}", 7) == HX_OK && hx_matcher_can_end(m));
    hx_matcher_reset(m);
    EXPECT(hx_matcher_feed(m, "{\"a\": 1}", 8) != HX_OK);
    hx_matcher_free(m);
    hx_grammar_free(g);
    p.compact = 0;
    p.ws_max = 2;
    ASSERT(hx_grammar_from_schema(s, strlen(s), &p, &g, &err) == HX_OK);
    m = hx_matcher_new(g, NULL);
    const char *two = "{ \"a\":\n 1}", *three = "{\"a\":   1}";
    EXPECT(hx_matcher_feed(m, two, strlen(two)) == HX_OK && hx_matcher_can_end(m));
    hx_matcher_reset(m);
    EXPECT(hx_matcher_feed(m, three, strlen(three)) != HX_OK);
    hx_matcher_free(m);
    hx_grammar_free(g);
}

/* Where only end tokens are allowed, the first of them is forced: the
 * output ends whichever the model prefers (a decoder skips that pass). */
static void test_forced_end(void)
{
    const char *pieces[] = {"\"a\"", "<eos>", "<eot>", "\"b\""};
    size_t lens[4];
    uint8_t flags[4] = {0, HX_GTOK_SPECIAL | HX_GTOK_EOG, HX_GTOK_SPECIAL | HX_GTOK_EOG, 0};
    for (int i = 0; i < 4; i++) lens[i] = strlen(pieces[i]);
    hx_gvocab *v;
    hx_grammar *g;
    hx_err err = {0};
    ASSERT(hx_gvocab_new(4, pieces, lens, flags, &v, &err) == HX_OK);
    const char *s = "{\"enum\": [\"a\", \"b\"]}";
    ASSERT(hx_grammar_from_schema(s, strlen(s), NULL, &g, &err) == HX_OK);
    hx_matcher *m = hx_matcher_new(g, v);
    ASSERT(m);
    int32_t f[2] = {-1, -1};
    EXPECT_EQ_INT(hx_matcher_forced(m, f, 2), 0); /* "a" or "b" */
    EXPECT(hx_matcher_accept(m, 0) == HX_OK);
    EXPECT_EQ_INT(hx_matcher_forced(m, f, 2), 1); /* <eos> or <eot>: the first */
    EXPECT_EQ_INT(f[0], 1);
    EXPECT(hx_matcher_accept(m, 2) == HX_OK && hx_matcher_ended(m));
    EXPECT_EQ_INT(hx_matcher_forced(m, f, 2), 0);
    hx_matcher_free(m);
    hx_grammar_free(g);
    hx_gvocab_free(v);
}

/* A toy vocabulary: masks, EOG only at the end, forced tokens. */
static void test_masks(void)
{
    const char *pieces[] = {"{", "}", "\"", "\"a\"", ":", " ", "1", "12", "x", "\"}", "<eos>", "\": "};
    size_t lens[12];
    uint8_t flags[12] = {0};
    for (int i = 0; i < 12; i++) lens[i] = strlen(pieces[i]);
    flags[10] = HX_GTOK_SPECIAL | HX_GTOK_EOG;
    hx_gvocab *v;
    hx_grammar *g;
    hx_err err = {0};
    ASSERT(hx_gvocab_new(12, pieces, lens, flags, &v, &err) == HX_OK);
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],"
                    "\"additionalProperties\":false}";
    ASSERT(hx_grammar_from_schema(s, strlen(s), NULL, &g, &err) == HX_OK);
    hx_matcher *m = hx_matcher_new(g, v);
    uint32_t mask[1];
    ASSERT(m);
    ASSERT(hx_matcher_mask(m, mask) == HX_OK);
    EXPECT_EQ_INT(mask[0], 1u << 0); /* "{" */
    int32_t f[2];
    EXPECT_EQ_INT(hx_matcher_forced(m, f, 2), 1);
    EXPECT_EQ_INT(f[0], 0);
    EXPECT(hx_matcher_accept(m, 0) == HX_OK);
    ASSERT(hx_matcher_mask(m, mask) == HX_OK);
    EXPECT(mask[0] & (1u << 3)); /* "a" */
    EXPECT(mask[0] & (1u << 2)); /* " alone */
    EXPECT(!(mask[0] & (1u << 9)));
    EXPECT(hx_matcher_accept(m, 3) == HX_OK);
    EXPECT(hx_matcher_accept(m, 4) == HX_OK);
    EXPECT(hx_matcher_accept(m, 7) == HX_OK);
    ASSERT(hx_matcher_mask(m, mask) == HX_OK);
    EXPECT(mask[0] & (1u << 1));
    EXPECT(mask[0] & (1u << 6));
    EXPECT(!(mask[0] & (1u << 10))); /* cannot end yet */
    EXPECT(hx_matcher_accept(m, 10) != HX_OK);
    EXPECT(hx_matcher_accept(m, 8) != HX_OK);
    EXPECT(hx_matcher_accept(m, 1) == HX_OK);
    ASSERT(hx_matcher_mask(m, mask) == HX_OK);
    EXPECT(mask[0] & (1u << 10));
    EXPECT(hx_matcher_accept(m, 10) == HX_OK);
    EXPECT(hx_matcher_ended(m));
    hx_matcher_free(m);
    hx_grammar_free(g);
    hx_gvocab_free(v);
}

/* Masks equal brute force (accept each token after the same prefix) on a
 * vocabulary of short strings, over schemas that take the fast paths
 * (free strings, class-restricted strings, keys minus listed names). */
static void test_masks_exact(void)
{
    static const char alpha[] = "ab_Z9 \"\\:,{}[]-.\xc3\xa9";
    enum { NA = sizeof alpha - 1 };
    static char store[NA + NA * NA + NA * NA * NA][4];
    const char *pieces[4096];
    size_t lens[4096];
    int n = 0;
    for (int i = 0; i < NA; i++) { store[n][0] = alpha[i]; pieces[n] = store[n]; lens[n++] = 1; }
    for (int i = 0; i < NA; i++)
        for (int j = 0; j < NA; j++) {
            store[n][0] = alpha[i]; store[n][1] = alpha[j]; pieces[n] = store[n]; lens[n++] = 2;
        }
    for (int i = 0; i < NA; i += 2)
        for (int j = 0; j < NA; j += 3)
            for (int k = 0; k < NA; k++) {
                store[n][0] = alpha[i]; store[n][1] = alpha[j]; store[n][2] = alpha[k];
                pieces[n] = store[n]; lens[n++] = 3;
            }
    hx_gvocab *v;
    hx_err err = {0};
    ASSERT(hx_gvocab_new(n, pieces, lens, NULL, &v, &err) == HX_OK);
    static const char *const cases[][2] = {
        {"{\"type\":\"string\",\"pattern\":\"^[a-b_]{1,4}$\"}", "\"a"},
        {"{\"type\":\"string\",\"pattern\":\"^[a-b_]{1,4}$\",\"maxLength\":3}", "\"ab"},
        {"{\"type\":\"string\",\"maxLength\":2}", "\""},
        {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":5}", "\"\xc3\xa9"},
        {"{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}}}", "{\"a"},
        {"{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}}}", "{\"ab"},
        {"{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}}}", "{\"ab\": 9"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^Z+$\"}}", "[\"Z"},
        {"{\"type\":\"string\",\"format\":\"email\"}", "\"a"},
        {"{}", "{\"a\": [\"b"},
    };
    uint32_t mask[(4096 + 31) / 32];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hx_grammar *g;
        ASSERT(hx_grammar_from_schema(cases[c][0], strlen(cases[c][0]), NULL, &g, &err) == HX_OK);
        hx_matcher *m = hx_matcher_new(g, v);
        ASSERT(m && hx_matcher_feed(m, cases[c][1], strlen(cases[c][1])) == HX_OK);
        ASSERT(hx_matcher_mask(m, mask) == HX_OK);
        int bad = 0;
        for (int t = 0; t < n; t++) {
            hx_matcher_reset(m);
            hx_matcher_feed(m, cases[c][1], strlen(cases[c][1]));
            int ok = hx_matcher_accept(m, t) == HX_OK;
            if (ok != (int)((mask[t >> 5] >> (t & 31)) & 1) && bad++ < 3)
                printf("     case %zu token '%.*s': mask %d, accept %d\n", c, (int)lens[t], pieces[t],
                       (int)((mask[t >> 5] >> (t & 31)) & 1), ok);
        }
        EXPECT_EQ_INT(bad, 0);
        hx_matcher_free(m);
        hx_grammar_free(g);
    }
    hx_gvocab_free(v);
}

static void test_tool_calls(void)
{
    hx_tool_spec t[2] = {{"get_time", "{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\"}},"
                                      "\"required\":[\"tz\"],\"additionalProperties\":false}"},
                         {"noop", NULL}};
    hx_grammar *g;
    hx_err err = {0};
    for (int mode = 0; mode < 3; mode++) {
        ASSERT(hx_grammar_tool_calls(t, 2, mode, NULL, &g, &err) == HX_OK);
        hx_matcher *m = hx_matcher_new(g, NULL);
        const char *call = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";
        EXPECT(hx_matcher_feed(m, call, strlen(call)) == HX_OK && hx_matcher_can_end(m));
        hx_matcher_reset(m);
        const char *bad = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
        EXPECT(!(hx_matcher_feed(m, bad, strlen(bad)) == HX_OK && hx_matcher_can_end(m)));
        hx_matcher_reset(m);
        const char *unknown = "<tool_call>{\"name\": \"rm\", ";
        EXPECT(hx_matcher_feed(m, unknown, strlen(unknown)) != HX_OK);
        hx_matcher_reset(m);
        const char *text = "Hello there.";
        int ok = hx_matcher_feed(m, text, strlen(text)) == HX_OK && hx_matcher_can_end(m);
        EXPECT_EQ_INT(ok, mode != HX_TOOLS_REQUIRED);
        hx_matcher_reset(m);
        const char *lazy = "Let me check. <tool_call>{\"name\": \"noop\", \"arguments\": {}}</tool_call>";
        ok = hx_matcher_feed(m, lazy, strlen(lazy)) == HX_OK && hx_matcher_can_end(m);
        EXPECT_EQ_INT(ok, mode == HX_TOOLS_LAZY);
        hx_matcher_reset(m);
        /* several calls in one turn, whitespace between and after them */
        const char *two = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>\n"
                          "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>\n";
        EXPECT(hx_matcher_feed(m, two, strlen(two)) == HX_OK && hx_matcher_can_end(m));
        /* but no text after a call */
        EXPECT(hx_matcher_feed(m, "Done.", 5) != HX_OK);
        hx_matcher_free(m);
        hx_grammar_free(g);
    }
}

/* At most max_calls calls. */
static void test_tool_calls_max(void)
{
    hx_tool_spec t = {"noop", NULL};
    hx_grammar_params p = hx_grammar_default_params();
    hx_grammar *g;
    hx_err err = {0};
    p.compact = 1;
    p.max_calls = 2;
    ASSERT(hx_grammar_tool_calls(&t, 1, HX_TOOLS_REQUIRED, &p, &g, &err) == HX_OK);
    hx_matcher *m = hx_matcher_new(g, NULL);
    const char *call = "<tool_call>{\"name\":\"noop\",\"arguments\":{}}</tool_call>";
    for (int i = 0; i < 2; i++)
        EXPECT(hx_matcher_feed(m, call, strlen(call)) == HX_OK && hx_matcher_can_end(m));
    EXPECT(hx_matcher_feed(m, "<", 1) != HX_OK);
    hx_matcher_free(m);
    hx_grammar_free(g);
    /* one-line turns: calls as json.dumps writes them, then the newline
     * that ends the turn, after which nothing may follow */
    p.compact = 0;
    p.line_turn = 1;
    ASSERT(hx_grammar_tool_calls(&t, 1, HX_TOOLS_REQUIRED, &p, &g, &err) == HX_OK);
    m = hx_matcher_new(g, NULL);
    const char *spaced = "<tool_call>{\"name\": \"noop\", \"arguments\": {}}</tool_call>";
    EXPECT(hx_matcher_feed(m, spaced, strlen(spaced)) == HX_OK && hx_matcher_can_end(m));
    EXPECT(hx_matcher_feed(m, spaced, strlen(spaced)) == HX_OK);
    EXPECT(hx_matcher_feed(m, "\n", 1) == HX_OK && hx_matcher_can_end(m));
    EXPECT(hx_matcher_feed(m, "\n", 1) != HX_OK);
    hx_matcher_reset(m);
    EXPECT(hx_matcher_feed(m, spaced, strlen(spaced)) == HX_OK);
    EXPECT(hx_matcher_feed(m, " ", 1) != HX_OK); /* no whitespace between calls */
    hx_matcher_free(m);
    hx_grammar_free(g);
    p.line_turn = 0;
    p.call_style = 7;
    EXPECT(hx_grammar_tool_calls(&t, 1, HX_TOOLS_REQUIRED, &p, &g, &err) == HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "style") != NULL);
}

/* 1 if s is a complete sentence of g. */
static int whole(hx_grammar *g, const char *s)
{
    hx_matcher *m = hx_matcher_new(g, NULL);
    int ok = m && hx_matcher_feed(m, s, strlen(s)) == HX_OK && hx_matcher_can_end(m);
    hx_matcher_free(m);
    return ok;
}

/* Llama 3.1: a bare {"name", "parameters"} call, optionally after
 * <|python_tag|>; in the lazy form a leading "{" starts it. */
static void test_tool_calls_llama(void)
{
    hx_tool_spec t[2] = {{"get_time", "{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\"}},"
                                      "\"required\":[\"tz\"],\"additionalProperties\":false}"},
                         {"noop", NULL}};
    hx_grammar_params p = hx_grammar_default_params();
    p.call_style = HX_CALLS_LLAMA;
    const char *call = "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}";
    const char *tagged = "<|python_tag|>{\"name\": \"noop\", \"parameters\": {}}";
    for (int mode = 0; mode < 3; mode++) {
        hx_grammar *g;
        hx_err err = {0};
        ASSERT(hx_grammar_tool_calls(t, 2, mode, &p, &g, &err) == HX_OK);
        EXPECT_EQ_INT(whole(g, call), 1);
        EXPECT_EQ_INT(whole(g, tagged), 1);
        EXPECT_EQ_INT(whole(g, "\n{\"name\": \"noop\", \"parameters\": {}}\n"), 1);
        EXPECT_EQ_INT(whole(g, "{\"name\": \"noop\", \"arguments\": {}}"), 0);
        EXPECT_EQ_INT(whole(g, "{\"name\": \"get_time\", \"parameters\": {}}"), 0);
        /* one call per turn (the Llama 3.1 template renders one) */
        EXPECT_EQ_INT(whole(g, "{\"name\": \"noop\", \"parameters\": {}} {\"name\": \"noop\", \"parameters\": {}}"), 0);
        EXPECT_EQ_INT(whole(g, "Hello there."), mode != HX_TOOLS_REQUIRED);
        EXPECT_EQ_INT(whole(g, "Sets {a} and {b}."), mode != HX_TOOLS_REQUIRED);
        /* a leading "{" is a call, never text */
        EXPECT_EQ_INT(whole(g, "{hello}"), 0);
        EXPECT_EQ_INT(whole(g, " {\"name\": 1}"), 0);
        EXPECT_EQ_INT(whole(g, "Let me see. <|python_tag|>{\"name\": \"noop\", \"parameters\": {}}"),
                      mode == HX_TOOLS_LAZY);
        EXPECT_EQ_INT(whole(g, "Hi <|python_tag|> there"), 0);
        hx_grammar_free(g);
    }
}

/* <|python_tag|> as one special token, and EOG after the call. */
static void test_tool_calls_llama_tokens(void)
{
    const char *pieces[] = {"<|python_tag|>", "{\"", "name", "\":\"", "noop", "\",\"", "parameters",
                            "\":{", "}}", "Hi", "<|eot_id|>", "{"};
    enum { N = 12 };
    size_t lens[N];
    uint8_t flags[N] = {HX_GTOK_SPECIAL};
    flags[10] = HX_GTOK_SPECIAL | HX_GTOK_EOG;
    for (int i = 0; i < N; i++) lens[i] = strlen(pieces[i]);
    hx_gvocab *v;
    hx_grammar *g;
    hx_err err = {0};
    hx_tool_spec t = {"noop", NULL};
    hx_grammar_params p = hx_grammar_default_params();
    p.compact = 1;
    p.call_style = HX_CALLS_LLAMA;
    ASSERT(hx_gvocab_new(N, pieces, lens, flags, &v, &err) == HX_OK);
    ASSERT(hx_grammar_tool_calls(&t, 1, HX_TOOLS_LAZY, &p, &g, &err) == HX_OK);
    hx_matcher *m = hx_matcher_new(g, v);
    uint32_t mask[1];
    ASSERT(m && hx_matcher_mask(m, mask) == HX_OK);
    EXPECT(mask[0] & 1u);           /* <|python_tag|> */
    EXPECT(mask[0] & (1u << 1));    /* {" starts a call */
    EXPECT(mask[0] & (1u << 9));    /* free text */
    EXPECT(mask[0] & (1u << 10));   /* the end */
    int32_t seq[] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 0; i < 8; i++) EXPECT(hx_matcher_accept(m, seq[i]) == HX_OK);
    ASSERT(hx_matcher_mask(m, mask) == HX_OK);
    EXPECT(mask[0] & (1u << 8));     /* "}}" closes the arguments, */
    EXPECT(!(mask[0] & (1u << 10))); /* and the end must wait */
    EXPECT(hx_matcher_accept(m, 8) == HX_OK);
    ASSERT(hx_matcher_mask(m, mask) == HX_OK);
    EXPECT_EQ_INT(mask[0], 1u << 10); /* then only the end */
    EXPECT(hx_matcher_accept(m, 10) == HX_OK && hx_matcher_ended(m));
    /* after text, a "{" is text again; the tag is not */
    hx_matcher_reset(m);
    EXPECT(hx_matcher_accept(m, 9) == HX_OK && hx_matcher_accept(m, 11) == HX_OK);
    EXPECT(hx_matcher_accept(m, 10) == HX_OK);
    hx_matcher_free(m);
    hx_grammar_free(g);
    hx_gvocab_free(v);
}

/* 1 accepted, 0 rejected, -1 compile error: with generation bounds. */
static int run_gen(const char *schema, const char *inst)
{
    hx_grammar_params p = hx_grammar_default_params();
    hx_grammar *g;
    hx_err err = {0};
    p.generation = 1;
    if (hx_grammar_from_schema(schema, strlen(schema), &p, &g, &err)) return -1;
    int ok = whole(g, inst);
    hx_grammar_free(g);
    return ok;
}

/* Generation bounds: no "5.0" for integers, bounded digits and
 * whitespace runs; validation (the default) keeps accepting them. */
static void test_generation_bounds(void)
{
    const char *ie = "{\"type\":\"integer\",\"enum\":[5,10]}";
    const char *imin = "{\"type\":\"integer\",\"minimum\":0}";
    const char *i = "{\"type\":\"integer\"}", *n = "{\"type\":\"number\"}";
    const char *nr = "{\"type\":\"number\",\"minimum\":0,\"maximum\":10}";
    const char *obj = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}";
    EXPECT_EQ_INT(run(ie, "5.0"), 1);
    EXPECT_EQ_INT(run_gen(ie, "5.0"), 0);
    EXPECT_EQ_INT(run_gen(ie, "10"), 1);
    EXPECT_EQ_INT(run(imin, "-0.0"), 1);
    EXPECT_EQ_INT(run_gen(imin, "-0.0"), 0);
    EXPECT_EQ_INT(run_gen(imin, "0"), 1);
    EXPECT_EQ_INT(run_gen(imin, "123456789012345"), 1);
    /* 16 digits may pass 2^53: cJSON would read 9999999999999999 as 1e16,
     * and the tool (and the validator) would get "1e+16", not an integer */
    EXPECT_EQ_INT(run_gen(imin, "9999999999999999"), 0);
    EXPECT_EQ_INT(run(imin, "9999999999999999"), 1);
    EXPECT_EQ_INT(run(i, "1e3"), 0);
    EXPECT_EQ_INT(run(i, "3.0"), 1);
    EXPECT_EQ_INT(run_gen(i, "3.0"), 0);
    EXPECT_EQ_INT(run_gen(i, "-42"), 1);
    EXPECT_EQ_INT(run_gen(n, "1.12345678"), 1);
    EXPECT_EQ_INT(run_gen(n, "1.123456789"), 0);
    EXPECT_EQ_INT(run(n, "1.123456789"), 1);
    EXPECT_EQ_INT(run_gen(n, "1e-06"), 1);
    EXPECT_EQ_INT(run_gen(n, "1e1234"), 0);
    EXPECT_EQ_INT(run_gen(n, "1e99"), 1);
    EXPECT_EQ_INT(run_gen(n, "1e999"), 0); /* a double's inf */
    EXPECT_EQ_INT(run(n, "1e999"), 1);
    EXPECT_EQ_INT(run_gen(nr, "9.5"), 1);
    EXPECT_EQ_INT(run_gen(nr, "9.000000001"), 0);
    EXPECT_EQ_INT(run_gen(nr, "10"), 1);
    EXPECT_EQ_INT(run_gen(nr, "10.0"), 0); /* integral values as integers */
    EXPECT_EQ_INT(run_gen(nr, "10.5"), 0);
    EXPECT_EQ_INT(run_gen(obj, "{\"a\": 1}"), 1);
    EXPECT_EQ_INT(run_gen(obj, "{\n    \"a\": 1\n}"), 1);
    EXPECT_EQ_INT(run_gen(obj, "{\"a\":         1}"), 0); /* 9 spaces */
    EXPECT_EQ_INT(run(obj, "{\"a\":      1}"), 1);
    EXPECT_EQ_INT(run_gen("true", "[1.5, {\"x\": 2}]"), 1);
    EXPECT_EQ_INT(run_gen("true", "[1.1234567891]"), 0);
    /* no U+0000: a C string ends there, so "\u0000" (1 character) would
     * reach the tool as "" and fail minLength 1 */
    const char *s1 = "{\"type\":\"string\",\"minLength\":1}";
    EXPECT_EQ_INT(run(s1, "\"\\u0000\""), 1);
    EXPECT_EQ_INT(run_gen(s1, "\"\\u0000\""), 0);
    EXPECT_EQ_INT(run_gen(s1, "\"a\\u0000\""), 0);
    EXPECT_EQ_INT(run_gen(s1, "\"\\u0001\\n\""), 1);
    EXPECT_EQ_INT(run_gen("{\"type\":\"string\",\"pattern\":\"^.$\"}", "\"\\u0000\""), 0);
    EXPECT_EQ_INT(run_gen("true", "{\"\\u0000\": 1}"), 0);
}

/* <tool_call> as one special token (Qwen) and as plain text pieces. */
static void test_tool_call_tokens(void)
{
    const char *pieces[] = {"<tool_call>", "</tool_call>", "<", "tool", "_call", ">", "Hi", "{\"", "name",
                            "\":\"", "noop", "\",\"", "arguments", "\":{", "}}", "</", "<eos>"};
    size_t lens[17];
    uint8_t flags[17] = {HX_GTOK_SPECIAL, HX_GTOK_SPECIAL};
    flags[16] = HX_GTOK_SPECIAL | HX_GTOK_EOG;
    for (int i = 0; i < 17; i++) lens[i] = strlen(pieces[i]);
    hx_gvocab *v;
    hx_grammar *g;
    hx_err err = {0};
    hx_tool_spec t = {"noop", NULL};
    hx_grammar_params p = hx_grammar_default_params();
    p.compact = 1;
    ASSERT(hx_gvocab_new(17, pieces, lens, flags, &v, &err) == HX_OK);
    ASSERT(hx_grammar_tool_calls(&t, 1, HX_TOOLS_LAZY, &p, &g, &err) == HX_OK);
    hx_matcher *m = hx_matcher_new(g, v);
    uint32_t mask[1];
    ASSERT(m && hx_matcher_mask(m, mask) == HX_OK);
    EXPECT(mask[0] & 1u);          /* the special <tool_call> opens a call */
    EXPECT(mask[0] & (1u << 6));   /* free text */
    EXPECT(mask[0] & (1u << 16));  /* may end: free text is complete */
    int32_t seq[] = {6, 0, 7, 8, 9, 10, 11, 12, 13, 14};
    for (int i = 0; i < 10; i++) EXPECT(hx_matcher_accept(m, seq[i]) == HX_OK);
    ASSERT(hx_matcher_mask(m, mask) == HX_OK);
    EXPECT(mask[0] & 2u);           /* now the closing special token */
    EXPECT(!(mask[0] & (1u << 16))); /* and not the end yet */
    EXPECT(hx_matcher_accept(m, 1) == HX_OK);
    EXPECT(hx_matcher_accept(m, 16) == HX_OK);
    /* the same call spelled as text pieces */
    hx_matcher_reset(m);
    int32_t txt[] = {2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 3, 4, 5, 16};
    for (int i = 0; i < 17; i++) EXPECT(hx_matcher_accept(m, txt[i]) == HX_OK);
    EXPECT(hx_matcher_ended(m));
    hx_matcher_free(m);
    hx_grammar_free(g);
    hx_gvocab_free(v);
}

int main(void)
{
    RUN(test_types);
    RUN(test_objects);
    RUN(test_arrays);
    RUN(test_strings);
    RUN(test_formats);
    RUN(test_numbers);
    RUN(test_enum_const_combinators);
    RUN(test_refs);
    RUN(test_errors_name_path);
    RUN(test_compact);
    RUN(test_masks);
    RUN(test_forced_end);
    RUN(test_masks_exact);
    RUN(test_tool_calls);
    RUN(test_tool_call_tokens);
    RUN(test_tool_calls_max);
    RUN(test_tool_calls_llama);
    RUN(test_tool_calls_llama_tokens);
    RUN(test_generation_bounds);
    return test_summary();
}
