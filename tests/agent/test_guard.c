/* test_guard.c: the loop guard's repeat rule (hx_repeat_ban, agent/source.c):
 * a run of tokens repeated `times` times is not repeated once more;
 * shorter repeats, broken runs and too short histories ban nothing. Its
 * rule for a string in a call (hx_value_loops): 32 tokens of 8 kinds are a
 * loop, of 9 kinds are not, and a shorter string is never one. Its call
 * tracking (hx_calltrack_byte): a call
 * ends at a closing tag outside its strings, not at one a value spells. */
#include "agent/agent.h"
#include "test.h"

static void test_one_token(void)
{
    const int32_t h[] = {9, 264, 264, 264, 264};
    EXPECT_EQ_INT(hx_repeat_ban(h, 5, 1, 4), 264);
    EXPECT_EQ_INT(hx_repeat_ban(h, 4, 1, 4), -1); /* three in a row */
    EXPECT_EQ_INT(hx_repeat_ban(h, 5, 2, 4), -1); /* too short for pairs */
}

static void test_pairs_and_triples(void)
{
    const int32_t pair[] = {1, 5, 7, 5, 7, 5, 7, 5, 7};
    EXPECT_EQ_INT(hx_repeat_ban(pair, 9, 2, 4), 5); /* "5 7" four times: no fifth 5 */
    EXPECT_EQ_INT(hx_repeat_ban(pair, 9, 1, 4), -1);
    EXPECT_EQ_INT(hx_repeat_ban(pair, 7, 2, 4), -1); /* three times */
    const int32_t tri[] = {3, 4, 8, 3, 4, 8, 3, 4, 8, 3, 4, 8};
    EXPECT_EQ_INT(hx_repeat_ban(tri, 12, 3, 4), 3);
    const int32_t broken[] = {3, 4, 8, 3, 4, 9, 3, 4, 8, 3, 4, 8};
    EXPECT_EQ_INT(hx_repeat_ban(broken, 12, 3, 4), -1);
}

/* The loop a model wrote in a forced call once the short rule banned its
 * fifth " the": " the" four times, then "the", over and over. */
static void test_longer_runs(void)
{
    const int32_t h[] = {7, 1, 1, 1, 1, 2, 1, 1, 1, 1, 2, 1, 1, 1, 1, 2};
    EXPECT_EQ_INT(hx_repeat_ban(h, 16, 5, 3), 1);
    EXPECT_EQ_INT(hx_repeat_ban(h, 15, 5, 3), -1); /* two times and a part */
}

static void test_value_loops(void)
{
    int32_t v[40];
    for (int i = 0; i < 40; i++) v[i] = 100 + i % 8; /* 8 kinds */
    EXPECT(hx_value_loops(v, 32));
    EXPECT(hx_value_loops(v, 500));
    EXPECT(!hx_value_loops(v, 31)); /* not yet long enough */
    v[17] = 9;                      /* a ninth kind */
    EXPECT(!hx_value_loops(v, 32));
    int32_t words[32];
    for (int i = 0; i < 32; i++) words[i] = 3 * i; /* prose: every token new */
    EXPECT(!hx_value_loops(words, 32));
}

static void test_bad_arguments(void)
{
    const int32_t h[] = {2, 2, 2, 2};
    EXPECT_EQ_INT(hx_repeat_ban(h, 4, 0, 4), -1);
    EXPECT_EQ_INT(hx_repeat_ban(h, 4, 1, 0), -1);
    EXPECT_EQ_INT(hx_repeat_ban(h, 0, 1, 4), -1);
}

static int track(hx_calltrack *t, const char *s)
{
    for (; *s; s++) hx_calltrack_byte(t, *s);
    return t->in_call;
}

static void test_call_tracking(void)
{
    hx_calltrack t = {0};
    EXPECT(!track(&t, "Let me look. "));
    EXPECT(track(&t, "<tool_call>{\"name\": \"x\", \"arguments\": {\"a\": \"b}}</tool_call> c"));
    EXPECT(track(&t, "\\\"</tool_call>")); /* still inside the value */
    EXPECT(!track(&t, "\"}}</tool_call>"));
    EXPECT(!track(&t, " done </tool_call>")); /* text: no call */
    EXPECT(track(&t, "<tool_call>{"));
    hx_calltrack l = {.llama = 1};
    EXPECT(track(&l, "  {\"name\": \"x\""));
    hx_calltrack m = {.llama = 1};
    EXPECT(!track(&m, "Sure {not a call"));
}

int main(void)
{
    RUN(test_one_token);
    RUN(test_pairs_and_triples);
    RUN(test_longer_runs);
    RUN(test_value_loops);
    RUN(test_bad_arguments);
    RUN(test_call_tracking);
    return test_summary();
}
