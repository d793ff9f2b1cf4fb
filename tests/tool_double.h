/* tool_double.h: what the tests whose binary is also a registered tool
 * share: the memory limit their manifests give it (none under ASan) and
 * the replies of the MCP server it plays. Header-only; include after
 * test.h, in one file of a binary. */
#ifndef HX_TESTS_TOOL_DOUBLE_H
#define HX_TESTS_TOOL_DOUBLE_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
/* ASan maps terabytes of shadow memory: the tools get no address-space
 * limit, and (as nobody in the sandbox) no leak checker, which needs
 * ptrace. */
#define MEM_LIMIT "0"
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return getuid() == 65534 ? "detect_leaks=0" : "";
}
#else
#define MEM_LIMIT "256"
#endif

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
