/* test_memory_tools.c: the memory tools through the real tool registry:
 * registration, schemas, remember (with consolidation), search, forget. */
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "engine/engine.h"
#include "test.h"

static char tmpdir[256];

static cJSON *call(hx_tools *reg, const char *name, const char *args_json,
                   int *rc, hx_err *err)
{
    cJSON *args = cJSON_Parse(args_json), *res = NULL;
    *rc = hx_tools_call(reg, name, args, &res, err);
    cJSON_Delete(args);
    return res;
}

static void test_memory_tools(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/memory.db", tmpdir);
    hx_memory_params p = hx_memory_default_params();
    p.path = path;
    hx_memory *mem = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(&p, &mem, &err) == HX_OK);
    hx_config *cfg = hx_config_default();
    hx_tools *reg = hx_tools_new(cfg);
    ASSERT(reg);
    ASSERT(hx_agent_register_memory_tools(reg, mem, &err) == HX_OK);
    const hx_tool_def *d = hx_tools_find(reg, "memory.remember");
    ASSERT(d);
    EXPECT_EQ_INT(d->effect, HX_EFFECT_WRITE);
    EXPECT_EQ_INT(hx_tools_find(reg, "memory.search")->effect, HX_EFFECT_READ);
    /* Registering twice clashes on the names. */
    EXPECT(hx_agent_register_memory_tools(reg, mem, &err) != HX_OK);

    int rc;
    cJSON *r = call(reg, "memory.remember",
                    "{\"kind\":\"preference\",\"text\":\"prefers meetings "
                    "before noon\"}", &rc, &err);
    ASSERT(rc == HX_OK);
    int64_t id = (int64_t)cJSON_GetObjectItem(r, "id")->valuedouble;
    EXPECT_STR_EQ(cJSON_GetObjectItem(r, "status")->valuestring, "added");
    cJSON_Delete(r);
    r = call(reg, "memory.remember",
             "{\"kind\":\"preference\",\"text\":\"Prefers meetings before "
             "noon.\",\"expires_in_days\":30}", &rc, &err);
    ASSERT(rc == HX_OK);
    EXPECT_STR_EQ(cJSON_GetObjectItem(r, "status")->valuestring, "updated");
    EXPECT_EQ_INT((int64_t)cJSON_GetObjectItem(r, "id")->valuedouble, id);
    cJSON_Delete(r);
    EXPECT_EQ_INT(hx_memory_count(mem), 1);

    r = call(reg, "memory.search", "{\"query\":\"when are meetings best?\"}",
             &rc, &err);
    ASSERT(rc == HX_OK);
    cJSON *arr = cJSON_GetObjectItem(r, "memories");
    ASSERT(cJSON_GetArraySize(arr) == 1);
    EXPECT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "text")
                      ->valuestring, "Prefers meetings before noon.");
    cJSON_Delete(r);

    /* Bad arguments: the schema or the tool refuses them with a message. */
    r = call(reg, "memory.remember", "{\"text\":\"no kind\"}", &rc, &err);
    EXPECT(rc != HX_OK && r == NULL && err.msg[0]);
    r = call(reg, "memory.remember", "{\"kind\":\"Two Words\",\"text\":\"x\"}",
             &rc, &err);
    EXPECT(rc != HX_OK && r == NULL);
    r = call(reg, "memory.forget", "{\"id\":\"7\"}", &rc, &err);
    EXPECT(rc != HX_OK && r == NULL);
    r = call(reg, "memory.forget", "{\"id\":999}", &rc, &err);
    EXPECT_EQ_INT(rc, HX_ERR_NOTFOUND);

    char args[64];
    snprintf(args, sizeof args, "{\"id\":%lld}", (long long)id);
    r = call(reg, "memory.forget", args, &rc, &err);
    EXPECT_EQ_INT(rc, HX_OK);
    cJSON_Delete(r);
    EXPECT_EQ_INT(hx_memory_count(mem), 0);
    hx_tools_free(reg);
    hx_config_free(cfg);
    hx_memory_close(mem);
}

/* 1 when the decode grammar of the tool's schema takes args whole. */
static int grammar_takes(const hx_tool_def *d, const char *args)
{
    hx_grammar *g = NULL;
    hx_err err = {0};
    if (hx_grammar_from_schema(d->schema_json, strlen(d->schema_json), NULL, &g, &err)) return -1;
    hx_matcher *m = hx_matcher_new(g, NULL);
    int ok = m && hx_matcher_feed(m, args, strlen(args)) == HX_OK && hx_matcher_can_end(m);
    hx_matcher_free(m);
    hx_grammar_free(g);
    return ok;
}

/* The kind of a memory is one short lower-case word: the schema says so,
 * so a model's decoding cannot write request words there ("factory gate")
 * and have the call fail after it was written. */
static void test_remember_kind_in_grammar(void)
{
    hx_config *cfg = hx_config_default();
    hx_tools *reg = hx_tools_new(cfg);
    hx_memory_params p = hx_memory_default_params();
    char path[512];
    snprintf(path, sizeof path, "%s/kind.db", tmpdir);
    p.path = path;
    hx_memory *mem = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(&p, &mem, &err) == HX_OK);
    ASSERT(hx_agent_register_memory_tools(reg, mem, &err) == HX_OK);
    const hx_tool_def *d = hx_tools_find(reg, "memory.remember");
    EXPECT_EQ_INT(grammar_takes(d, "{\"kind\": \"fact\", \"text\": \"the gate code is 4471\"}"), 1);
    EXPECT_EQ_INT(grammar_takes(d, "{\"kind\": \"follow-up\", \"text\": \"x\"}"), 1);
    EXPECT_EQ_INT(grammar_takes(d, "{\"kind\": \"factory gate\", \"text\": \"x\"}"), 0);
    EXPECT_EQ_INT(grammar_takes(d, "{\"kind\": \"Kadoma\", \"text\": \"x\"}"), 0);
    EXPECT_EQ_INT(grammar_takes(d, "{\"kind\": \"\", \"text\": \"x\"}"), 0);
    EXPECT_EQ_INT(grammar_takes(d, "{\"kind\": \"abcdefghijklmnopqrstuvwxyzabcdefg\", \"text\": \"x\"}"), 0);
    hx_tools_free(reg);
    hx_config_free(cfg);
    hx_memory_close(mem);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx_memtools_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    setenv("HEARTH_HOME", tmpdir, 1);
    RUN(test_memory_tools);
    RUN(test_remember_kind_in_grammar);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return test_summary();
}
