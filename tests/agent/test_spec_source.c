/* test_spec_source.c: the engine source with batched forced runs and
 * drafts (engine/spec) writes exactly what it writes one token per pass
 * (plain_decode), turn after turn with the KV cache reused between turns,
 * for every tool choice, on stories260K. */
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "test.h"

static const hx_tool_spec TOOLS[] = {
    {"weather", "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
                "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},"
                "\"required\":[\"city\"]}"},
    {"calendar.create_event", "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":"
                              "\"string\"},\"minutes\":{\"enum\":[15,30,60]}},"
                              "\"required\":[\"title\",\"minutes\"]}"},
};

/* Runs turns (prompt i extends prompt i-1, as a conversation does) and
 * appends every turn's text to out, separated by '|'. */
static int run_turns(hx_model *m, int plain, int compact, hx_buf *out)
{
    static const char *const prompts[] = {
        "User: What is the weather in Paris?\nAssistant:",
        "User: What is the weather in Paris?\nAssistant: sunny\nUser: And make a "
        "meeting called Budget review for 30 minutes.\nAssistant:",
        "User: What is the weather in Paris?\nAssistant: sunny\nUser: And make a "
        "meeting called Budget review for 30 minutes.\nAssistant: done\nUser: Thanks. "
        "Once upon a time there was a little cat.\nAssistant:",
    };
    static const int choices[] = {HX_CHOICE_REQUIRED, HX_CHOICE_AUTO, HX_CHOICE_NONE};
    hx_source_engine_params p = hx_source_engine_default_params();
    p.plain_decode = plain;
    p.compact_json = compact;
    p.n_ctx = 1024;
    p.n_threads = 2;
    hx_source src;
    hx_err err = {0};
    if (hx_source_engine_new(m, TOOLS, 2, &p, &src, &err)) return -1;
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        int np = 0, end = 0;
        rc = src.begin(src.ctx, prompts[i], choices[i], &np, &err);
        for (int k = 0; !rc && !end && k < 80; k++) rc = src.next(src.ctx, out, &end, &err);
        hx_buf_putc(out, '|');
    }
    if (rc) printf("     %s\n", err.msg);
    hx_source_free(&src);
    return rc;
}

static void test_same_text(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", hx_shared_data_dir());
    if (access(path, R_OK)) SKIP("%s not found", path);
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    for (int compact = 0; compact < 2; compact++) {
        hx_buf a, b;
        hx_buf_init(&a);
        hx_buf_init(&b);
        EXPECT_EQ_INT(run_turns(m, 1, compact, &a), 0);
        EXPECT_EQ_INT(run_turns(m, 0, compact, &b), 0);
        EXPECT(a.len > 20 && strstr(a.data, "<tool_call>"));
        if (compact) printf("     %.*s\n", (int)(a.len < 300 ? a.len : 300), a.data);
        EXPECT(a.len == b.len && !memcmp(a.data, b.data, a.len));
        if (a.len != b.len || memcmp(a.data, b.data, a.len))
            printf("     plain: %s\n     spec:  %s\n", a.data, b.data);
        hx_buf_free(&a);
        hx_buf_free(&b);
    }
    hx_model_free(m);
}

int main(void)
{
    RUN(test_same_text);
    return test_summary();
}
