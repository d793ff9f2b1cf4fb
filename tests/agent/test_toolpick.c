/* test_toolpick.c: the tools a request needs (agent/toolpick.c): domains
 * by the request's words, only reading tools for a question that names
 * no change, none for an unrecognised request, a filter too small as an
 * error, and the tiers. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The tool tier takes a plain read it serves exactly with one call,
 * copying its argument; it never takes a change, a send, a condition,
 * two clauses, a time the calendar cannot read or a path out of its
 * folder. */
static void test_tool_tier(void)
{
    hx_config *cfg = NULL;
    hx_tools *reg = builtins(&cfg);
    ASSERT(reg);
    char db[128];
    snprintf(db, sizeof db, "/tmp/hearth_test_toolpick_%d.db", (int)getpid());
    hx_memory_params mp = hx_memory_default_params();
    mp.path = db;
    hx_memory *mem = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(&mp, &mem, &err) == HX_OK);
    ASSERT(hx_agent_register_memory_tools(reg, mem, &err) == HX_OK);
    static const struct {
        const char *request, *tool, *args;
    } take[] = {
        {"What is on my calendar tomorrow?", "calendar.list_events", "{\"range\":\"tomorrow\"}"},
        {"what meetings do I have next Saturday afternoon?", "calendar.list_events",
         "{\"range\":\"next Saturday afternoon\"}"},
        {"Hey, do I have anything on Saturday? Thanks!", "calendar.list_events",
         "{\"range\":\"on Saturday\"}"},
        {"Check whether I'm free 2028-10-09", "calendar.free_busy", "{\"range\":\"2028-10-09\"}"},
        {"What new mail do I have?", "mail.search", "{\"unread\":true}"},
        {"any unread mail", "mail.search", "{\"unread\":true}"},
        {"Can you remind me what you know about Ximena!", "memory.search",
         "{\"query\":\"Ximena\"}"},
        {"what do you remember about my dentist", "memory.search",
         "{\"query\":\"my dentist\"}"},
        {"Which files are in notes?", "files.list", "{\"path\":\"notes\"}"},
        {"what's in my projects/2027 folder", "files.list", "{\"path\":\"projects/2027\"}"},
        /* a day there is not: the tool's answer says so */
        {"what's on my calendar on april 31?", "calendar.list_events", "{\"range\":\"on april 31\"}"},
    };
    static const char *const refuse[] = {
        /* changes and sends */
        "Cancel what is on my calendar tomorrow", "Move my meetings tomorrow to Friday",
        "Send Bob what is on my calendar tomorrow", "Email me what new mail do I have",
        "What is on my calendar tomorrow? Cancel it", "Remember what is on my calendar tomorrow",
        "what do you know about sending mail to Bob", "Forget what you know about Enzo",
        "Make a note that my desk is in Room Topaz",
        /* conditions and more than one clause */
        "What is on my calendar tomorrow if it rains?",
        "What is on my calendar tomorrow and Friday?",
        "What is on my calendar tomorrow or Friday?",
        "What is on my calendar tomorrow unless it is a holiday",
        "do I have anything tomorrow but not before noon",
        "What is on my calendar tomorrow. What new mail do I have?",
        "what do you know about Enzo: tell me all",
        "what do you know about \"Enzo\"",
        "what do you know about Enzo and Ximena",
        "what do you know about the meetings when I am away",
        "What new mail do I have from Bob?",
        "any unread mail about the budget",
        /* times the calendar does not read, paths out of the folder */
        "Anything on my schedule at teatime?", "What is on my calendar later-ish?",
        "What is on my calendar", "Which files are in ../etc?", "Which files are in /etc?",
        "what is in my notes/../../x folder",
        /* other forms, and nothing */
        "What is the date?", "Find a hotel in Perth", "", "Thanks, please",
        "Which files mention the budget?", "Get the trurhu plan message from Fatima Baptiste",
    };
    for (size_t i = 0; i < sizeof take / sizeof *take; i++) {
        const char *tool = NULL;
        cJSON *args = NULL;
        int got = hx_agent_tool_tier(reg, take[i].request, &tool, &args);
        char *a = args ? cJSON_PrintUnformatted(args) : NULL;
        if (!got || strcmp(tool, take[i].tool) || !a || strcmp(a, take[i].args))
            printf("     take: %s -> %d %s %s\n", take[i].request, got, got ? tool : "",
                   a ? a : "");
        EXPECT(got && !strcmp(tool, take[i].tool) && a && !strcmp(a, take[i].args));
        free(a);
        cJSON_Delete(args);
    }
    for (size_t i = 0; i < sizeof refuse / sizeof *refuse; i++) {
        const char *tool = NULL;
        cJSON *args = NULL;
        int got = hx_agent_tool_tier(reg, refuse[i], &tool, &args);
        if (got) printf("     taken: %s -> %s\n", refuse[i], tool);
        EXPECT(!got && !args);
    }
    /* the control for recall: without the memory's tools, not taken */
    hx_config *cfg2 = NULL;
    hx_tools *bare = builtins(&cfg2);
    const char *tool;
    cJSON *args = NULL;
    EXPECT_EQ_INT(hx_agent_tool_tier(bare, "what do you know about Enzo", &tool, &args), 0);
    hx_tools_free(bare);
    hx_config_free(cfg2);
    hx_tools_free(reg);
    hx_memory_close(mem);
    hx_config_free(cfg);
    char side[160];
    unlink(db);
    snprintf(side, sizeof side, "%s-wal", db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db);
    unlink(side);
}

/* The requests that ask to remove or change what the user kept, and
 * those that do not (a tool that removes runs only for the first). */
static void test_asks_removal(void)
{
    static const char *const yes[] = {
        "Forget Bob's email", "please delete memory 3", "cancel my dentist appointment",
        "I no longer like tea", "Bob's address changed: update it", "that is wrong",
        "call off Friday's lunch", "vergiss Bobs Adresse", "Lösche den Termin",
        "oublie mon adresse", "olvida eso", "remove the gym on monday",
        "Stop remembering that I like tea", "Unlearn that fact",
        "Take the review off my calendar"};
    static const char *const no[] = {
        "Remember that Carol's email is carol@example.org", "what's on tomorrow?",
        "who is Bob?", "book lunch with Sam", "remind me what I prefer", "Remember I like tea",
        "send the deck to Bob", "", "recorded notes"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (!hx_agent_asks_removal(yes[i], NULL)) test_fail_at(__FILE__, __LINE__, "not read as asking to remove: %s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (hx_agent_asks_removal(no[i], NULL)) test_fail_at(__FILE__, __LINE__, "read as asking to remove: %s", no[i]);
    EXPECT(!hx_agent_asks_removal(NULL, NULL));
    /* a yes to the assistant's offer to remove; not to another offer,
     * nor a yes that is not the request's first word */
    const char *offer = "Bob's address is recalled. Shall I forget it?";
    EXPECT(hx_agent_asks_removal("yes", offer));
    EXPECT(hx_agent_asks_removal("Yes please", offer));
    EXPECT(hx_agent_asks_removal("ok, go ahead", offer));
    EXPECT(!hx_agent_asks_removal("yes", "Shall I book it?"));
    EXPECT(!hx_agent_asks_removal("yesterday's lunch", offer));
    EXPECT(!hx_agent_asks_removal("what is Bob's address, yes?", offer));
    EXPECT(!hx_agent_asks_removal("yes", NULL));
}

int main(void)
{
    RUN(test_cut);
    RUN(test_tiers);
    RUN(test_tool_tier);
    RUN(test_asks_removal);
    return test_summary();
}
