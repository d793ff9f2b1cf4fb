/* fuzz_toolpick.c: fuzz target for the tool cut and the tiers
 * (agent/toolpick.c) on any request text: the count is -1 (the filter too
 * small), 0 with an empty filter (no cut), or the number of registered
 * tools the NUL-terminated filter names; the small tier offers reads only;
 * the tool tier takes a request only for one registered reading tool with
 * one argument that is a piece of the request (or the unread flag). The
 * filter's size comes from the first byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hx_tools *g_reg;

static hx_tools *registry(void)
{
    static hx_config *cfg;
    hx_err err = {0};
    if (!g_reg && !hx_config_load(NULL, &cfg, &err) && (g_reg = hx_tools_new(cfg)))
        hx_tools_register_builtins(g_reg, &err);
    return g_reg;
}

/* The tools filter names, each registered: their count. */
static int named(const hx_tools *reg, const char *filter, int reads_only)
{
    int k = 0;
    for (int i = 0; i < hx_tools_count(reg); i++) {
        const hx_tool_def *d = hx_tools_at(reg, i);
        if (!hx_agent_tool_offered(filter, d->name)) continue;
        HX_CHECK(!reads_only || d->effect == HX_EFFECT_READ);
        k++;
    }
    return k;
}

/* The tool tier's call for req, checked. */
static void tool_tier(const hx_tools *reg, const char *req)
{
    const char *tool = NULL;
    cJSON *args = NULL;
    if (!hx_agent_tool_tier(reg, req, &tool, &args)) {
        HX_CHECK(args == NULL);
        return;
    }
    const hx_tool_def *d = hx_tools_find(reg, tool);
    HX_CHECK(d && d->effect == HX_EFFECT_READ);
    HX_CHECK(cJSON_GetArraySize(args) == 1);
    const char *a = cJSON_GetStringValue(args->child);
    HX_CHECK(a ? *a && strstr(req, a) != NULL : cJSON_IsTrue(args->child));
    cJSON_Delete(args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hx_tools *reg = registry();
    if (!reg || size < 1) return 0;
    const size_t cap = (size_t)data[0] * 4 + 1;
    char *req = malloc(size), *filter = malloc(cap);
    if (!req || !filter) abort();
    memcpy(req, data + 1, size - 1);
    req[size - 1] = 0;
    memset(filter, 'x', cap);
    int k = hx_agent_tools_for_request(reg, req, filter, cap);
    HX_CHECK(k >= -1 && k <= hx_tools_count(reg));
    HX_CHECK(memchr(filter, 0, cap) != NULL);
    if (k > 0) HX_CHECK(named(reg, filter, 0) == k);
    if (k == 0) HX_CHECK(filter[0] == 0); /* no cut: "" offers every tool */
    if (hx_agent_request_tier(reg, req, filter, cap) == HX_TIER_SMALL)
        HX_CHECK(named(reg, filter, 1) > 0);
    tool_tier(reg, req);
    free(req);
    free(filter);
    return 0;
}
