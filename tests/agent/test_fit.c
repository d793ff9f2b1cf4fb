/* test_fit.c: a tool result cut to the room the context has left
 * (agent/fit.c), on results built here: one that fits is left alone; a
 * list whose note alone is over the room is said too large, the note never
 * taken for a text to cut. */
#include <string.h>

#include "agent/agent.h"
#include "test.h"

static int g_limit;
static int limit_of(void *ctx)
{
    (void)ctx;
    return g_limit;
}

static cJSON *conflicts(int n)
{
    cJSON *r = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(r, "conflicts");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        char start[40];
        snprintf(start, sizeof start, "2026-12-0%dT10:00:00+01:00", 1 + i);
        cJSON_AddStringToObject(e, "start", start);
        cJSON_AddStringToObject(e, "title", "Quarterly planning with the whole regional team");
        cJSON_AddItemToArray(a, e);
    }
    return r;
}

static int fit(cJSON *result, int limit)
{
    hx_source src = {.api_version = HX_SOURCE_API, .name = "limit only", .limit = limit_of};
    cJSON *msgs = cJSON_Parse("[{\"role\": \"system\", \"content\": \"sys\"},"
                              " {\"role\": \"user\", \"content\": \"book it\"}]");
    cJSON *tools = cJSON_CreateArray();
    g_limit = limit;
    hx_fit f = {&src, HX_TPL_QWEN3, msgs, 1, tools, "calendar.create_event"};
    int cut = hx_fit_result(&f, result);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    return cut;
}

static void test_fits_untouched(void)
{
    cJSON *r = conflicts(3);
    char *before = cJSON_PrintUnformatted(r);
    EXPECT_EQ_INT(fit(r, 1 << 20), 0);
    char *after = cJSON_PrintUnformatted(r);
    EXPECT_STR_EQ(after, before);
    free(before);
    free(after);
    cJSON_Delete(r);
}

static void test_list_cut(void)
{
    cJSON *r = conflicts(40);
    EXPECT_EQ_INT(fit(r, 1000), 1);
    const int kept = cJSON_GetArraySize(cJSON_GetObjectItem(r, "conflicts"));
    const char *note = cJSON_GetStringValue(cJSON_GetObjectItem(r, "not_shown"));
    EXPECT(kept > 0 && kept < 40);
    EXPECT(note && strstr(note, "more conflicts not shown") && strstr(note, "\"start\""));
    cJSON_Delete(r);
}

/* No room even for the list's note: the note is not cut as a text (it
 * was freed under the cut once), the result says it is too large. */
static void test_note_over_room(void)
{
    cJSON *r = conflicts(3);
    EXPECT_EQ_INT(fit(r, 100), 1);
    const char *note = cJSON_GetStringValue(cJSON_GetObjectItem(r, "not_shown"));
    EXPECT(note && strstr(note, "is larger than the room left"));
    EXPECT(!cJSON_GetObjectItem(r, "conflicts"));
    cJSON_Delete(r);
}

int main(void)
{
    RUN(test_fits_untouched);
    RUN(test_list_cut);
    RUN(test_note_over_room);
    return test_summary();
}
