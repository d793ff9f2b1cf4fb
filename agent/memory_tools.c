/* memory_tools.c: the memory tools the model can call (memory.remember,
 * memory.forget, memory.search), glue between the registry and memory/. */
#include "agent/agent.h"

#include <string.h>

#define MAX_TEXT 1000
#define MAX_KIND 32 /* the schema's maxLength and pattern say the same */

static const char remember_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"kind\":{\"type\":\"string\",\"pattern\":\"^[a-z_-]+$\",\"maxLength\":32,"
    "\"description\":\"preference, person, fact, place or another short lower-case word\"},"
    "\"text\":{\"type\":\"string\",\"description\":\"the fact, in one short "
    "sentence\"},"
    "\"expires_in_days\":{\"type\":\"integer\",\"minimum\":1,"
    "\"description\":\"forget it after this many days (omit: keep)\"}},"
    "\"required\":[\"kind\",\"text\"],\"additionalProperties\":false}";

static const char forget_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"the "
    "memory's id, as memory.search or the recalled list shows it\"}},"
    "\"required\":[\"id\"],\"additionalProperties\":false}";

static const char search_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\"},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":20}},"
    "\"required\":[\"query\"],\"additionalProperties\":false}";

static int kind_ok(const char *k)
{
    size_t n = strlen(k);
    if (!n || n > MAX_KIND) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((k[i] >= 'a' && k[i] <= 'z') || k[i] == '_' || k[i] == '-'))
            return 0;
    return 1;
}

static int tool_remember(hx_tools *reg, void *user, const cJSON *args,
                         cJSON **result, hx_err *err)
{
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(args, "kind"));
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(args, "text"));
    const cJSON *days = cJSON_GetObjectItem(args, "expires_in_days");
    if (!kind || !kind_ok(kind))
        return hx_err_set(err, HX_ERR_INVALID,
                          "kind must be one short lower-case word");
    if (!text || strlen(text) > MAX_TEXT)
        return hx_err_set(err, HX_ERR_INVALID,
                          "text must be at most %d bytes", MAX_TEXT);
    /* what a tainted conversation keeps may quote someone else: it is
     * marked, and taints the conversations that recall it */
    hx_mem_new n = {.kind = kind, .text = text, .untrusted = hx_tools_call_tainted(reg)};
    if (cJSON_IsNumber(days))
        n.expires_at = hx_now(NULL) + (int64_t)days->valuedouble * 86400;
    int64_t id = 0;
    int merged = 0;
    int rc = hx_memory_remember(user, &n, &id, &merged, err);
    if (rc) return rc;
    *result = cJSON_CreateObject();
    cJSON_AddNumberToObject(*result, "id", (double)id);
    cJSON_AddStringToObject(*result, "status", merged ? "updated" : "added");
    return *result ? HX_OK : HX_ERR_NOMEM;
}

static int tool_forget(hx_tools *reg, void *user, const cJSON *args,
                       cJSON **result, hx_err *err)
{
    (void)reg;
    const cJSON *id = cJSON_GetObjectItem(args, "id");
    if (!cJSON_IsNumber(id) || id->valuedouble < 1)
        return hx_err_set(err, HX_ERR_INVALID, "id must be a memory id");
    int rc = hx_memory_forget(user, (int64_t)id->valuedouble, err);
    if (rc) return rc;
    *result = cJSON_CreateObject();
    cJSON_AddNumberToObject(*result, "forgotten", id->valuedouble);
    return *result ? HX_OK : HX_ERR_NOMEM;
}

static int tool_search(hx_tools *reg, void *user, const cJSON *args,
                       cJSON **result, hx_err *err)
{
    const char *q = cJSON_GetStringValue(cJSON_GetObjectItem(args, "query"));
    const cJSON *lim = cJSON_GetObjectItem(args, "limit");
    int limit = cJSON_IsNumber(lim) ? lim->valueint : 5;
    hx_mem_list *l = NULL;
    int rc = hx_memory_search(user, q ? q : "", limit, &l, err);
    if (rc) return rc;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < l->n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", (double)l->items[i].id);
        cJSON_AddStringToObject(o, "kind", l->items[i].kind);
        cJSON_AddStringToObject(o, "text", l->items[i].text);
        cJSON_AddItemToArray(arr, o);
        if (hx_mem_untrusted(&l->items[i])) hx_tools_mark_untrusted(reg);
    }
    hx_mem_list_free(l);
    *result = cJSON_CreateObject();
    if (!*result) {
        cJSON_Delete(arr);
        return HX_ERR_NOMEM;
    }
    cJSON_AddItemToObject(*result, "memories", arr);
    return HX_OK;
}

int hx_agent_register_memory_tools(hx_tools *reg, hx_memory *mem, hx_err *err)
{
    const hx_tool_def defs[] = {
        {HX_TOOL_API_VERSION, "memory.remember",
         "Remember a lasting fact or preference about the user for later "
         "conversations; restating a known fact updates it.",
         remember_schema, HX_EFFECT_WRITE, tool_remember, mem,
         HX_TOOL_BUILTIN | HX_TOOL_KEEPS},
        {HX_TOOL_API_VERSION, "memory.forget",
         "Forget a remembered fact for good, by its id.", forget_schema,
         HX_EFFECT_WRITE, tool_forget, mem, HX_TOOL_BUILTIN | HX_TOOL_REMOVES},
        {HX_TOOL_API_VERSION, "memory.search",
         "Search what you remember about the user.", search_schema,
         HX_EFFECT_READ, tool_search, mem, HX_TOOL_BUILTIN},
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++) {
        int rc = hx_tools_register(reg, &defs[i], err);
        if (rc) return rc;
    }
    return HX_OK;
}
