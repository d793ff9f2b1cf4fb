/* fuzz_answer.c: fuzz target for the answers written from the calls
 * (agent/answer.c) and what they read (agent/evidence.c), on any trace
 * "calls" array (JSON: names, arguments, statuses, results as text, a
 * result's whole): the results answer and the tool tier's are always
 * written, never hold the template's tags, and a results answer with no
 * call says so. The registry is the built-in tools', so writes and sends
 * are told from reads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hx_tools *registry(void)
{
    static hx_config *cfg;
    static hx_tools *reg;
    hx_err err = {0};
    if (!reg && !hx_config_load(NULL, &cfg, &err) && (reg = hx_tools_new(cfg)))
        hx_tools_register_builtins(reg, &err);
    return reg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    cJSON *calls = cJSON_Parse(text);
    if (!cJSON_IsArray(calls)) {
        cJSON_Delete(calls);
        calls = cJSON_CreateArray(); /* no call: the text is the clock and the memories */
    }
    hx_tools *reg = registry();
    char *said = hx_agent_results_answer(calls, NULL, text, text, reg);
    if (!said || strstr(said, "<tool_call>") || strstr(said, "</tool_call>")) abort();
    if (!cJSON_GetArraySize(calls) && strncmp(said, "No tool was called", 18)) abort();
    free(said);
    if (cJSON_GetArraySize(calls)) {
        char *tier = hx_agent_tier_answer(calls, reg);
        if (!tier) abort();
        free(tier);
    }
    cJSON_Delete(calls);
    free(text);
    return 0;
}
