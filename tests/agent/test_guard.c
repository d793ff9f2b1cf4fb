/* test_guard.c: the loop guard's repeat rule (hx_repeat_ban, agent/source.c):
 * a run of one, two or three tokens repeated `times` times is not
 * repeated once more; shorter repeats, broken runs and too short
 * histories ban nothing. */
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

static void test_bad_arguments(void)
{
    const int32_t h[] = {2, 2, 2, 2};
    EXPECT_EQ_INT(hx_repeat_ban(h, 4, 0, 4), -1);
    EXPECT_EQ_INT(hx_repeat_ban(h, 4, 1, 0), -1);
    EXPECT_EQ_INT(hx_repeat_ban(h, 0, 1, 4), -1);
}

int main(void)
{
    RUN(test_one_token);
    RUN(test_pairs_and_triples);
    RUN(test_bad_arguments);
    return test_summary();
}
