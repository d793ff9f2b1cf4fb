/* turn.h: an agent turn as `hearth ask` builds it (system text, the full
 * tool list, the request's clock, a request), shared by the benchmarks that time one. */
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

__attribute__((unused)) static void add_msg(cJSON *msgs, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
}

/* An agent turn as the planner renders it: the system text and the tool
 * list, the request's own system message (its clock: every process has
 * another), the request; marks gets where the template wrote. */
__attribute__((unused)) static char *render(const toolset *t, int family, int i, const char *request,
                                            hx_tpl_marks *marks)
{
    cJSON *msgs = cJSON_CreateArray();
    char now[64];
    snprintf(now, sizeof now, "Now: 2026-12-0%dT09:%02d:00+01:00 (Europe/Paris)", 1 + i % 4, i);
    add_msg(msgs, "system",
            "You are Hearth, an assistant running on the user's own device. "
            "Use the tools to read and change the user's calendar, mail and "
            "files; when you are done, answer in plain text.");
    add_msg(msgs, "system", now);
    add_msg(msgs, "user", request);
    hx_buf b;
    hx_buf_init(&b);
    hx_tpl_opts o = hx_tpl_default_opts();
    o.no_think = 1;
    int rc = hx_tpl_render_marked(family, msgs, t->json, &o, &b, marks);
    cJSON_Delete(msgs);
    if (rc) hx_buf_free(&b);
    return rc ? NULL : hx_buf_steal(&b, NULL);
}

/* A rendered request: its text and where the template wrote (the head). */
typedef struct turn {
    char *text;
    hx_tpl_marks marks;
} turn;

__attribute__((unused)) static const char *requests[] = {
    "Find 30 minutes with Bob next Tuesday afternoon about the budget.",
    "Did Alice answer my mail about the offsite?",
    "Which of my files mention the quarterly report?",
    "Move my dentist appointment to Friday morning.",
};

/* Bytes of prompt that hx_planner_prepare decodes ahead while the user
 * types: up to its clock line's last character; 0: it has no clock. */
__attribute__((unused)) static size_t prepared_bytes(const char *prompt)
{
    const char *now = strstr(prompt, "Now: "), *end = now ? strchr(now, ')') : NULL;
    return end ? (size_t)(end - prompt) : 0;
}

/* Tokens of the system message (the cached head) of prompt p: up to its
 * marked head, or its first "<|im_end|>". */
__attribute__((unused)) static int head_tokens(const hx_model *m, const turn *p)
{
    const char *end = strstr(p->text, "<|im_end|>");
    size_t len = p->marks.head ? p->marks.head
                 : end ? (size_t)(end + strlen("<|im_end|>") - p->text) : 0;
    int32_t n = hx_tokenize(hx_model_vocab(m), p->text, len, NULL, 0, 0, 1);
    return n < 0 ? -n : n;
}

#endif /* HX_BENCH_TURN_H */
