/* test_toolpick.c: the tools a request needs (agent/toolpick.c): domains
 * by the request's words, none for an unrecognised request, a filter too
 * small as an error, and the filter offering exactly those tools. */
#include <string.h>

#include "agent/agent.h"
#include "test.h"

static void test_domains(void)
{
    char f[128];
    EXPECT_EQ_INT(hx_agent_tools_for_request("What is on my calendar tomorrow?", f, sizeof f), 1);
    EXPECT_STR_EQ(f, "calendar.*");
    EXPECT_EQ_INT(hx_agent_tools_for_request("Mail Bob the meeting notes file", f, sizeof f), 3);
    EXPECT_STR_EQ(f, "calendar.*,mail.*,files.*");
    EXPECT_EQ_INT(hx_agent_tools_for_request("Do you remember my favorite tea?", f, sizeof f), 1);
    EXPECT_STR_EQ(f, "memory.*");
    /* stems start words: "prefix" is not "free", "resend" is not "send" */
    EXPECT_EQ_INT(hx_agent_tools_for_request("prefix resend", f, sizeof f), 0);
    EXPECT_STR_EQ(f, "");
    EXPECT_EQ_INT(hx_agent_tools_for_request(NULL, f, sizeof f), 0);
    EXPECT_EQ_INT(hx_agent_tools_for_request("calendar and mail", f, 12), -1);
}

static void test_filter_offers(void)
{
    char f[128];
    ASSERT(hx_agent_tools_for_request("any meeting today?", f, sizeof f) == 1);
    EXPECT(hx_agent_tool_offered(f, "calendar.list_events"));
    EXPECT(hx_agent_tool_offered(f, "calendar.create_event"));
    EXPECT(!hx_agent_tool_offered(f, "mail.send"));
    EXPECT(!hx_agent_tool_offered(f, "files.read"));
}

int main(void)
{
    RUN(test_domains);
    RUN(test_filter_offers);
    return test_summary();
}
