/* turn.h: an agent turn as `hearth ask` builds it (system text, the full
 * tool list, a request), shared by the benchmarks that time one. */
#ifndef HX_BENCH_TURN_H
#define HX_BENCH_TURN_H

#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

/* The tools `hearth ask` offers: built-ins and the memory tools. */
typedef struct toolset {
    hx_config *cfg;
    hx_tools *reg;
    hx_memory *mem;
    hx_tool_spec *specs;
    int n;
    cJSON *json;
} toolset;

__attribute__((unused)) static int open_tools(toolset *t)
{
    hx_err err = {0};
    hx_memory_params mp = hx_memory_default_params();
    memset(t, 0, sizeof *t);
    if (hx_config_load(NULL, &t->cfg, &err) || !(t->reg = hx_tools_new(t->cfg)) ||
        hx_tools_register_builtins(t->reg, &err) || hx_memory_open(&mp, &t->mem, &err) ||
        hx_agent_register_memory_tools(t->reg, t->mem, &err)) {
        fprintf(stderr, "tools: %s\n", err.msg);
        return -1;
    }
    t->n = hx_tools_count(t->reg);
    t->specs = hx_calloc((size_t)t->n, sizeof *t->specs);
    for (int i = 0; t->specs && i < t->n; i++)
        t->specs[i] = (hx_tool_spec){hx_tools_at(t->reg, i)->name,
                                     hx_tools_at(t->reg, i)->schema_json};
    t->json = hx_tools_list_json(t->reg);
    return t->specs && t->json ? 0 : -1;
}

__attribute__((unused)) static void close_tools(toolset *t)
{
    cJSON_Delete(t->json);
    free(t->specs);
    hx_memory_close(t->mem);
    hx_tools_free(t->reg);
    hx_config_free(t->cfg);
}

/* An agent turn: the system text, the tool list, the request. */
__attribute__((unused)) static char *render(const toolset *t, const char *request)
{
    cJSON *msgs = cJSON_CreateArray();
    cJSON *s = cJSON_CreateObject(), *u = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "role", "system");
    cJSON_AddStringToObject(s, "content",
                            "You are Hearth, an assistant running on the user's own device. "
                            "Use the tools to read and change the user's calendar, mail and "
                            "files; when you are done, answer in plain text.");
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", request);
    cJSON_AddItemToArray(msgs, s);
    cJSON_AddItemToArray(msgs, u);
    hx_buf b;
    hx_buf_init(&b);
    hx_tpl_opts o = hx_tpl_default_opts();
    o.no_think = 1;
    int rc = hx_tpl_render(HX_TPL_QWEN3, msgs, t->json, &o, &b);
    cJSON_Delete(msgs);
    if (rc) hx_buf_free(&b);
    return rc ? NULL : hx_buf_steal(&b, NULL);
}

__attribute__((unused)) static const char *requests[] = {
    "Find 30 minutes with Bob next Tuesday afternoon about the budget.",
    "Did Alice answer my mail about the offsite?",
    "Which of my files mention the quarterly report?",
    "Move my dentist appointment to Friday morning.",
};

/* Tokens of the system message (the cached head) of prompt. */
__attribute__((unused)) static int head_tokens(const hx_model *m, const char *prompt)
{
    const char *end = strstr(prompt, "<|im_end|>");
    if (!end) return 0;
    end += strlen("<|im_end|>");
    int32_t n = hx_tokenize(hx_model_vocab(m), prompt, (size_t)(end - prompt), NULL, 0, 0, 1);
    return n < 0 ? -n : n;
}

#endif /* HX_BENCH_TURN_H */
