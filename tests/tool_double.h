/* tool_double.h: what the tests whose binary is also a registered tool
 * share: the memory limit their manifests give it (lifted under ASan),
 * the leak checker off in the tool, and the replies of the MCP server it
 * plays. Header-only; include after
 * test.h, in one file of a binary. */
#ifndef HX_TESTS_TOOL_DOUBLE_H
#define HX_TESTS_TOOL_DOUBLE_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Set by the binary when it runs as the tool (or server), not as the
 * test. */
static int in_tool_mode;
#ifdef __SANITIZE_ADDRESS__
/* ASan maps terabytes of shadow memory: main lifts the tools' memory
 * limit (HEARTH_SANDBOX_DISABLE=memory, see tool_double_setup); and the
 * tools run without the leak checker, which needs ptrace. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return in_tool_mode; }
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#define MEM_LIMIT "256"

/* Called by the test's main before any tool runs: under a sanitizer the
 * tools run without an address-space limit. */
__attribute__((unused)) static void tool_double_setup(void)
{
    if (SANITIZED) setenv("HEARTH_SANDBOX_DISABLE", "memory", 1);
}

/* The JSON-RPC response to id carrying result (taken), one line on
 * stdout. */
__attribute__((unused)) static void mcp_reply(const cJSON *id, cJSON *result)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "jsonrpc", "2.0");
    cJSON_AddItemToObject(r, "id", cJSON_Duplicate(id, 1));
    cJSON_AddItemToObject(r, "result", result);
    char *s = cJSON_PrintUnformatted(r);
    printf("%s\n", s);
    fflush(stdout);
    free(s);
    cJSON_Delete(r);
}

/* A tools/call result of one text item; isError when is_error. */
__attribute__((unused)) static cJSON *mcp_text_result(const char *text, int is_error)
{
    cJSON *res = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(res, "content");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", "text");
    cJSON_AddStringToObject(c, "text", text);
    cJSON_AddItemToArray(content, c);
    if (is_error) cJSON_AddBoolToObject(res, "isError", 1);
    return res;
}

#endif
