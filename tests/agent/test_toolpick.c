/* test_toolpick.c: the tools a request needs (agent/toolpick.c): domains
 * by the request's words, only reading tools for a question that names
 * no change, none for an unrecognised request, a filter too small as an
 * error, and the tiers. */
#include <string.h>

#include "agent/agent.h"
#include "test.h"

static hx_tools *builtins(hx_config **cfg)
{
    hx_err err = {0};
    hx_tools *reg = NULL;
    if (hx_config_load(NULL, cfg, &err) || !(reg = hx_tools_new(*cfg)) ||
        hx_tools_register_builtins(reg, &err))
        printf("# tools: %s\n", err.msg);
    return reg;
}

static void test_cut(void)
{
    hx_config *cfg = NULL;
    hx_tools *reg = builtins(&cfg);
    ASSERT(reg);
    char f[1024];
    /* a question: the calendar's reading tools only */
    EXPECT_EQ_INT(hx_agent_tools_for_request(reg, "What is on my calendar tomorrow?", f, sizeof f), 3);
    EXPECT_STR_EQ(f, "calendar.list_events,calendar.free_busy,calendar.find_slots");
    /* a change: every tool of the domain */
    EXPECT_EQ_INT(hx_agent_tools_for_request(reg, "Move my dentist appointment to Friday", f,
                                             sizeof f), 6);
    EXPECT(hx_agent_tool_offered(f, "calendar.update_event"));
    EXPECT(!hx_agent_tool_offered(f, "mail.send"));
    /* two domains; "write back" is mail's */
    EXPECT(hx_agent_tools_for_request(reg, "Write back to Bob about the meeting", f, sizeof f) > 0);
    EXPECT(hx_agent_tool_offered(f, "mail.reply") && hx_agent_tool_offered(f, "calendar.list_events"));
    EXPECT(!hx_agent_tool_offered(f, "files.read"));
    /* stems start words and "free " is a word: "freeze", "prefix" are not */
    EXPECT_EQ_INT(hx_agent_tools_for_request(reg, "prefix freeze", f, sizeof f), 0);
    EXPECT_STR_EQ(f, "");
    EXPECT_EQ_INT(hx_agent_tools_for_request(reg, NULL, f, sizeof f), 0);
    EXPECT_EQ_INT(hx_agent_tools_for_request(reg, "Any mail and files today?", f, 30), -1);
    hx_tools_free(reg);
    hx_config_free(cfg);
}

static void test_tiers(void)
{
    hx_config *cfg = NULL;
    hx_tools *reg = builtins(&cfg);
    ASSERT(reg);
    char f[1024];
    EXPECT_EQ_INT(hx_agent_request_tier(reg, "Any meeting on Tuesday?", f, sizeof f), HX_TIER_SMALL);
    EXPECT_EQ_INT(hx_agent_request_tier(reg, "Which files mention the budget?", f, sizeof f),
                  HX_TIER_SMALL);
    /* the control: a change, and a request of no known domain */
    EXPECT_EQ_INT(hx_agent_request_tier(reg, "Cancel my meeting on Tuesday", f, sizeof f), HX_TIER_FULL);
    EXPECT_EQ_INT(hx_agent_request_tier(reg, "Tell Bob by email that I am late", f, sizeof f),
                  HX_TIER_FULL);
    EXPECT_EQ_INT(hx_agent_request_tier(reg, "Hello there", f, sizeof f), HX_TIER_FULL);
    hx_tools_free(reg);
    hx_config_free(cfg);
}

int main(void)
{
    RUN(test_cut);
    RUN(test_tiers);
    return test_summary();
}
