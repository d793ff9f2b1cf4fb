/* test_registry.c: the tool registry: registration (copies, clashes, bad
 * schemas, control characters), argument checking against the schema subset before a call,
 * error messages naming the argument, and the OpenAI/MCP list shape. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tools/tools.h"

static int n_calls;

/* Echoes its arguments back. */
static int echo(hx_tools *reg, void *user, const cJSON *args, cJSON **result, hx_err *err)
{
    (void)reg;
    (void)err;
    n_calls++;
    *result = cJSON_CreateObject();
    cJSON_AddItemToObject(*result, "args", cJSON_Duplicate(args, 1));
    cJSON_AddNumberToObject(*result, "user", user ? *(int *)user : -1);
    return HX_OK;
}

static int fails(hx_tools *reg, void *user, const cJSON *args, cJSON **result, hx_err *err)
{
    (void)reg, (void)user, (void)args, (void)result;
    return hx_err_set(err, HX_ERR_NOTFOUND, "nothing called 'x'");
}

static int returns_nothing(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                           hx_err *err)
{
    (void)reg, (void)user, (void)args, (void)err;
    *result = cJSON_CreateString("not an object");
    return HX_OK;
}

/* Says what it saw of the conversation's taint; marks its call untrusted
 * when asked to ("mark": true); fails when asked to ("fail": true). */
static int probe(hx_tools *reg, void *user, const cJSON *args, cJSON **result, hx_err *err)
{
    (void)user;
    if (cJSON_IsTrue(cJSON_GetObjectItem(args, "mark"))) hx_tools_mark_untrusted(reg);
    if (cJSON_IsTrue(cJSON_GetObjectItem(args, "fail")))
        return hx_err_set(err, HX_ERR_IO, "someone else's words");
    *result = cJSON_CreateObject();
    cJSON_AddBoolToObject(*result, "tainted", hx_tools_call_tainted(reg));
    return HX_OK;
}

static const char *schema =
    "{\"type\":\"object\",\"properties\":{"
    "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":10},"
    "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5},"
    "\"ratio\":{\"type\":\"number\"},"
    "\"mode\":{\"type\":\"string\",\"enum\":[\"fast\",\"slow\"]},"
    "\"flag\":{\"type\":\"boolean\"},"
    "\"tags\":{\"type\":\"array\",\"maxItems\":3,\"items\":{\"type\":\"string\"}},"
    "\"who\":{\"type\":\"object\",\"properties\":{\"email\":{\"type\":\"string\"}},"
    "\"required\":[\"email\"],\"additionalProperties\":false},"
    "\"maybe\":{\"type\":[\"string\",\"null\"]}},"
    "\"required\":[\"title\"],\"additionalProperties\":false}";

static hx_tools *make(int *user)
{
    hx_tools *reg = hx_tools_new(NULL);
    hx_err e = {0};
    char name[32], desc[32];
    /* the def's strings are copied: change them after registering */
    snprintf(name, sizeof name, "test.echo");
    snprintf(desc, sizeof desc, "Echoes.");
    hx_tool_def d = {HX_TOOL_API_VERSION, name, desc, schema, HX_EFFECT_READ, echo, user, 0};
    if (hx_tools_register(reg, &d, &e)) printf("# %s\n", e.msg);
    memset(name, 'x', sizeof name - 1);
    hx_tool_def f = {HX_TOOL_API_VERSION, "test.fails", "Fails.", "{\"type\":\"object\"}",
                     HX_EFFECT_WRITE, fails, NULL, 0};
    hx_tool_def n = {HX_TOOL_API_VERSION, "test.bad", "Bad.", "{}", HX_EFFECT_SEND,
                     returns_nothing, NULL, 0};
    hx_tools_register(reg, &f, &e);
    hx_tools_register(reg, &n, &e);
    return reg;
}

static void test_register(void)
{
    int user = 7;
    hx_tools *reg = make(&user);
    hx_err e = {0};
    ASSERT(reg);
    EXPECT_EQ_INT(hx_tools_count(reg), 3);
    EXPECT_STR_EQ(hx_tools_at(reg, 0)->name, "test.echo");
    EXPECT_STR_EQ(hx_tools_find(reg, "test.echo")->description, "Echoes.");
    EXPECT(hx_tools_find(reg, "nope") == NULL);
    EXPECT(hx_tools_at(reg, 3) == NULL);
    /* clash, bad schema, wrong version: errors, registry unchanged */
    hx_tool_def d = {HX_TOOL_API_VERSION, "test.echo", "", "{}", 0, echo, NULL, 0};
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_STATE);
    EXPECT(strstr(e.msg, "already registered") != NULL);
    d.name = "test.other";
    d.schema_json = "{\"type\":\"object\",";
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "test.other") && strstr(e.msg, "not a JSON object"));
    d.schema_json = "{\"type\":\"string\"}";
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_FORMAT);
    d.schema_json = "{}";
    d.api_version = 99;
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_UNSUPPORTED);
    EXPECT_EQ_INT(hx_tools_count(reg), 3);
    EXPECT_STR_EQ(hx_effect_name(HX_EFFECT_SEND), "send");
    hx_tools_free(reg);
    hx_tools_free(NULL);
}

/* Names, descriptions and schemas reach the user's terminal: control
 * characters are refused (the name keeps to letters, digits, '.', '_',
 * '-'), and a description's newlines and tabs become spaces. */
static void test_control_characters_refused(void)
{
    hx_tools *reg = hx_tools_new(NULL);
    hx_err e = {0};
    ASSERT(reg);
    hx_tool_def d = {HX_TOOL_API_VERSION, "test.\x1b[2J", "d", "{}", 0, echo, NULL, 0};
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "letters, digits") && !strchr(e.msg, 0x1b));
    d.name = "test.ok";
    d.description = "clears \x1b[2J the screen";
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "description holds a control character") != NULL);
    d.description = "c1 \xc2\x9b""31m";
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_FORMAT);
    d.description = "d";
    d.schema_json = "{\"type\":\"object\",\"properties\":{\"x\":{\"title\":\"\\u0007\"}}}";
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "schema holds a control character") != NULL);
    EXPECT_EQ_INT(hx_tools_count(reg), 0);
    /* the control: two lines and a tab are shown on one line */
    d.schema_json = "{\"type\":\"object\",\"description\":\"two\\nlines\"}";
    d.description = "one\ttwo\nthree";
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_OK);
    EXPECT_STR_EQ(hx_tools_find(reg, "test.ok")->description, "one two three");
    hx_tools_free(reg);
}

/* Calls test.echo with args; returns the rc and leaves the message in e. */
static int call_echo(hx_tools *reg, const char *json, hx_err *e)
{
    cJSON *args = cJSON_Parse(json), *res = NULL;
    int rc = hx_tools_call(reg, "test.echo", args, &res, e);
    if (rc == HX_OK) EXPECT(cJSON_IsObject(res));
    else EXPECT(res == NULL);
    cJSON_Delete(res);
    cJSON_Delete(args);
    return rc;
}

static void expect_bad(hx_tools *reg, const char *json, const char *needle)
{
    hx_err e = {0};
    int before = n_calls;
    int rc = call_echo(reg, json, &e);
    if (rc != HX_ERR_INVALID || !strstr(e.msg, needle))
        test_fail_at(__FILE__, __LINE__, "%s: rc %d '%s', want '%s'", json, rc, e.msg, needle);
    EXPECT_EQ_INT(n_calls, before); /* the tool never ran */
}

static void test_argument_checks(void)
{
    int user = 7;
    hx_tools *reg = make(&user);
    hx_err e = {0};
    EXPECT_EQ_INT(call_echo(reg, "{\"title\":\"hi\",\"count\":3,\"ratio\":0.5,\"mode\":\"fast\","
                                 "\"flag\":true,\"tags\":[\"a\"],\"who\":{\"email\":\"a@b\"},"
                                 "\"maybe\":null}", &e), HX_OK);
    expect_bad(reg, "{}", "missing required argument 'title'");
    expect_bad(reg, "{\"title\":5}", "argument 'title': expected string, got an integer");
    expect_bad(reg, "{\"title\":\"\"}", "argument 'title': must be at least 1 characters");
    expect_bad(reg, "{\"title\":\"much too long\"}", "at most 10 characters");
    expect_bad(reg, "{\"title\":\"a\",\"count\":2.5}", "argument 'count': expected integer, got a number");
    expect_bad(reg, "{\"title\":\"a\",\"count\":9}", "argument 'count': must be at most 5");
    expect_bad(reg, "{\"title\":\"a\",\"count\":0}", "must be at least 1");
    expect_bad(reg, "{\"title\":\"a\",\"mode\":\"medium\"}", "argument 'mode': must be one of [\"fast\",\"slow\"]");
    expect_bad(reg, "{\"title\":\"a\",\"flag\":\"yes\"}", "argument 'flag': expected boolean");
    expect_bad(reg, "{\"title\":\"a\",\"tags\":[\"x\",2]}", "argument 'tags[1]': expected string");
    expect_bad(reg, "{\"title\":\"a\",\"tags\":[\"1\",\"2\",\"3\",\"4\"]}", "at most 3 items");
    expect_bad(reg, "{\"title\":\"a\",\"who\":{}}", "missing required argument 'who.email'");
    expect_bad(reg, "{\"title\":\"a\",\"who\":{\"email\":\"x\",\"age\":3}}", "unknown argument 'who.age'");
    expect_bad(reg, "{\"title\":\"a\",\"colour\":\"red\"}", "unknown argument 'colour'");
    expect_bad(reg, "{\"title\":\"a\",\"maybe\":3}", "argument 'maybe'");
    expect_bad(reg, "[1,2]", "must be a JSON object, got an array");
    /* NULL arguments are an empty object */
    cJSON *res = NULL;
    EXPECT_EQ_INT(hx_tools_call(reg, "test.echo", NULL, &res, &e), HX_ERR_INVALID);
    EXPECT(strstr(e.msg, "'title'") != NULL);
    hx_tools_free(reg);
}

static void test_calls(void)
{
    int user = 7;
    hx_tools *reg = make(&user);
    hx_err e = {0};
    cJSON *args = cJSON_Parse("{\"title\":\"hi\"}"), *res = NULL;
    ASSERT(hx_tools_call(reg, "test.echo", args, &res, &e) == HX_OK);
    EXPECT_EQ_INT(cJSON_GetObjectItem(res, "user")->valueint, 7);
    EXPECT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "args"), "title")->valuestring, "hi");
    cJSON_Delete(res);
    EXPECT_EQ_INT(hx_tools_call(reg, "no.such", args, &res, &e), HX_ERR_NOTFOUND);
    EXPECT(strstr(e.msg, "no tool named 'no.such'") != NULL);
    EXPECT_EQ_INT(hx_tools_call(reg, "test.fails", args, &res, &e), HX_ERR_NOTFOUND);
    EXPECT_STR_EQ(e.msg, "nothing called 'x'");
    EXPECT(res == NULL);
    EXPECT_EQ_INT(hx_tools_call(reg, "test.bad", args, &res, &e), HX_ERR_INTERNAL);
    EXPECT(res == NULL);
    cJSON_Delete(args);
    hx_tools_free(reg);
}

static void test_list_json(void)
{
    hx_tools *reg = make(NULL);
    cJSON *l = hx_tools_list_json(reg);
    ASSERT(cJSON_IsArray(l));
    EXPECT_EQ_INT(cJSON_GetArraySize(l), 3);
    cJSON *t = cJSON_GetArrayItem(l, 0), *fn = cJSON_GetObjectItem(t, "function");
    EXPECT_STR_EQ(cJSON_GetObjectItem(t, "type")->valuestring, "function");
    EXPECT_STR_EQ(cJSON_GetObjectItem(fn, "name")->valuestring, "test.echo");
    EXPECT_STR_EQ(cJSON_GetObjectItem(fn, "description")->valuestring, "Echoes.");
    cJSON *want = cJSON_Parse(schema);
    EXPECT(cJSON_Compare(cJSON_GetObjectItem(fn, "parameters"), want, 1));
    cJSON_Delete(want);
    cJSON_Delete(l);
    hx_tools_free(reg);
}

/* Every built-in tool's schema is accepted and lists. */
static void test_builtins(void)
{
    hx_config *cfg = hx_config_default();
    hx_tools *reg = hx_tools_new(cfg);
    hx_err e = {0};
    ASSERT(hx_tools_register_builtins(reg, &e) == HX_OK);
    EXPECT(hx_tools_count(reg) >= 6);
    EXPECT(hx_tools_find(reg, "calendar.list_events") != NULL);
    EXPECT_EQ_INT(hx_tools_register_builtins(reg, &e), HX_ERR_STATE); /* twice: clash */
    cJSON *l = hx_tools_list_json(reg);
    EXPECT_EQ_INT(cJSON_GetArraySize(l), hx_tools_count(reg));
    cJSON_Delete(l);
    hx_tools_free(reg);
    hx_config_free(cfg);
}

/* A call's provenance: an untrusted tool's output taints whether it
 * succeeded or failed; a trusted one's does not (the control) unless it
 * marks the call; a call refused by the schema never ran and brings
 * nothing; the caller's taint reaches the tool. */
static void test_trust(void)
{
    hx_tools *reg = hx_tools_new(NULL);
    hx_err e = {0};
    const char *sch = "{\"type\":\"object\",\"properties\":{\"mark\":{\"type\":\"boolean\"},"
                      "\"fail\":{\"type\":\"boolean\"}},\"additionalProperties\":false}";
    hx_tool_def out = {HX_TOOL_API_VERSION, "acme.out", "", sch, HX_EFFECT_READ, probe, NULL,
                       HX_TOOL_UNTRUSTED};
    hx_tool_def own = {HX_TOOL_API_VERSION, "acme.own", "", sch, HX_EFFECT_READ, probe, NULL, 0};
    ASSERT(!hx_tools_register(reg, &out, &e) && !hx_tools_register(reg, &own, &e));
    static const struct {
        const char *tool, *args;
        int tainted, rc, untrusted;
    } cases[] = {
        {"acme.out", "{}", 0, HX_OK, 1},
        {"acme.out", "{\"fail\": true}", 0, HX_ERR_IO, 1},
        {"acme.out", "{\"x\": 1}", 0, HX_ERR_INVALID, 0},
        {"acme.own", "{}", 0, HX_OK, 0},
        {"acme.own", "{\"fail\": true}", 0, HX_ERR_IO, 0},
        {"acme.own", "{\"mark\": true}", 1, HX_OK, 1},
        {"acme.own", "{\"mark\": true, \"fail\": true}", 0, HX_ERR_IO, 1},
        {"acme.none", "{}", 0, HX_ERR_NOTFOUND, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cJSON *args = cJSON_Parse(cases[i].args), *res = NULL;
        hx_call_trust t = {.tainted = cases[i].tainted, .untrusted = 7};
        EXPECT_EQ_INT(hx_tools_call_trust(reg, cases[i].tool, args, &t, &res, &e), cases[i].rc);
        EXPECT_EQ_INT(t.untrusted, cases[i].untrusted);
        if (res) EXPECT_EQ_INT(cJSON_IsTrue(cJSON_GetObjectItem(res, "tainted")), cases[i].tainted);
        cJSON_Delete(res);
        cJSON_Delete(args);
    }
    hx_tools_free(reg);
}

/* The built-ins' namespaces are theirs: a registered tool cannot take
 * calendar.export or memory.x; Hearth's own can, and so can any other
 * name (the control), calendarx.y included. */
static void test_reserved_names(void)
{
    hx_tools *reg = hx_tools_new(NULL);
    hx_err e = {0};
    hx_tool_def d = {HX_TOOL_API_VERSION, "calendar.export", "", "{}", HX_EFFECT_SEND, echo, NULL, 0};
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_DENIED);
    EXPECT(strstr(e.msg, "reserved") != NULL);
    const char *taken[] = {"mail.forward", "files.upload", "memory.dump"};
    for (int i = 0; i < 3; i++) {
        d.name = taken[i];
        EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_ERR_DENIED);
    }
    EXPECT_EQ_INT(hx_tools_count(reg), 0);
    const char *fine[] = {"acme.export", "calendarx.y", "mail"};
    for (int i = 0; i < 3; i++) {
        d.name = fine[i];
        EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_OK);
    }
    d.name = "calendar.export";
    d.flags = HX_TOOL_BUILTIN;
    EXPECT_EQ_INT(hx_tools_register(reg, &d, &e), HX_OK);
    EXPECT(hx_tools_name_reserved("files.list") && !hx_tools_name_reserved("filesx"));
    hx_tools_free(reg);
}

int main(void)
{
    RUN(test_register);
    RUN(test_control_characters_refused);
    RUN(test_argument_checks);
    RUN(test_calls);
    RUN(test_list_json);
    RUN(test_builtins);
    RUN(test_trust);
    RUN(test_reserved_names);
    return test_summary();
}
