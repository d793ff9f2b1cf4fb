/* test_calendar.c: the calendar.* tools on a copy of the fixture world at
 * a fixed HEARTH_NOW: recurrence with overrides, EXDATE/RDATE, time zones
 * across DST, free/busy and slots with attendees, writes that round-trip
 * through libical, iTIP mail in the outbox, and broken input. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "tools/calendar_int.h"

static char world[PATH_MAX];
static hx_config *cfg;
static hx_tools *reg;

__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
    char cmd[4 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* A fresh copy of tests/fixtures/world and a registry on its config. */
static int fresh_world(void)
{
    hx_err e;
    hx_tools_free(reg);
    hx_config_free(cfg);
    reg = NULL;
    cfg = NULL;
    if (world[0]) sh("rm -rf %s", world);
    snprintf(world, sizeof world, "/tmp/hx-cal-XXXXXX");
    if (!mkdtemp(world)) return -1;
    if (sh("cp -r tests/fixtures/world/. %s/", world)) return -1;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.json", world);
    if (hx_config_load(path, &cfg, &e)) {
        printf("# config: %s\n", e.msg);
        return -1;
    }
    reg = hx_tools_new(cfg);
    return reg && hx_cal_register(reg, &e) == HX_OK ? 0 : -1;
}

static cJSON *call(const char *name, const char *json, int *rc, hx_err *e)
{
    cJSON *args = cJSON_Parse(json), *res = NULL;
    *rc = hx_tools_call(reg, name, args, &res, e);
    cJSON_Delete(args);
    return res;
}

static cJSON *call_ok(const char *name, const char *json)
{
    int rc;
    hx_err e = {0};
    cJSON *r = call(name, json, &rc, &e);
    if (rc) printf("# %s %s: %s\n", name, json, e.msg);
    return r;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The event of list_events' result with this title and start, or NULL. */
static const cJSON *find_ev(const cJSON *res, const char *title, const char *start)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, "events"))
    if (!strcmp(str(e, "title"), title) && (!start || !strcmp(str(e, "start"), start)))
        return e;
    return NULL;
}

static int n_events(const cJSON *res)
{
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "events"));
}

static char *slurp(const char *path)
{
    char *s = NULL;
    size_t n;
    hx_read_file(path, 0, &s, &n, NULL);
    return s;
}

/* The only file in outbox/new (a static path), or NULL. */
static const char *outbox_mail(int *count)
{
    static char path[PATH_MAX + 300];
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "ls %s/outbox/new 2>/dev/null", world);
    FILE *p = popen(cmd, "r");
    char line[256];
    *count = 0;
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        snprintf(path, sizeof path, "%s/outbox/new/%s", world, line);
        (*count)++;
    }
    if (p) pclose(p);
    return *count ? path : NULL;
}

/* Decodes the base64 body of the text/calendar part of a mail. */
static char *itip_part(const char *mail)
{
    const char *p = strstr(mail, "Content-Type: text/calendar");
    p = p ? strstr(p, "\r\n\r\n") : NULL;
    if (!p) return NULL;
    static const char *const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = calloc(1, strlen(p) + 1);
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (p += 4; *p && *p != '-' && *p != '='; p++) {
        const char *k = strchr(b64, *p);
        if (!k || !*p) continue;
        acc = acc << 6 | (unsigned)(k - b64);
        if ((bits += 6) >= 8) out[n++] = (char)(acc >> (bits -= 8));
    }
    return out;
}

static void setup_or_die(void)
{
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    if (fresh_world()) {
        printf("FAIL setup: cannot copy the fixture world\n");
        exit(1);
    }
}

/* ---- reading ---- */

static void test_list_this_week(void)
{
    cJSON *r = call_ok("calendar.list_events", "{\"range\":\"this week\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 13);
    EXPECT(!cJSON_GetObjectItemCaseSensitive(r, "problems"));
    /* the Dec 3 standup is moved by its override, with its RECURRENCE-ID */
    const cJSON *ov = find_ev(r, "Team standup (late: all-hands before)", NULL);
    ASSERT(ov);
    EXPECT_STR_EQ(str(ov, "start"), "2026-12-03T10:30:00+01:00");
    EXPECT_STR_EQ(str(ov, "recurrence_id"), "2026-12-03T09:30:00+01:00");
    EXPECT(!find_ev(r, "Team standup", "2026-12-03T09:30:00+01:00"));
    EXPECT(find_ev(r, "Team standup", "2026-12-04T09:30:00+01:00"));
    /* TZID=Asia/Tokyo without a VTIMEZONE: the system zone of that name */
    EXPECT(find_ev(r, "Monthly sync with Kenji (Tokyo)", "2026-12-03T09:00:00+01:00"));
    /* UTC, floating, all-day */
    EXPECT(find_ev(r, "Dentist", "2026-12-02T16:00:00+01:00"));
    EXPECT(find_ev(r, "Yoga", "2026-12-02T18:30:00+01:00"));
    const cJSON *bd = find_ev(r, "L\xc3\xa9" "a's birthday", "2026-12-06");
    ASSERT(bd);
    EXPECT_STR_EQ(str(bd, "end"), "2026-12-07");
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(bd, "all_day")));
    EXPECT(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(bd, "busy"))); /* TRANSPARENT */
    const cJSON *vd = find_ev(r, "Vendor demo", NULL);
    ASSERT(vd);
    EXPECT_STR_EQ(str(vd, "status"), "cancelled");
    const cJSON *cm = find_ev(r, "R\xc3\xa9union du comit\xc3\xa9", NULL);
    ASSERT(cm);
    EXPECT_STR_EQ(str(cJSON_GetObjectItemCaseSensitive(cm, "organizer"), "email"), "chloe@example.fr");
    const cJSON *att = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cm, "attendees"), 1);
    EXPECT_STR_EQ(str(att, "status"), "tentative");
    cJSON_Delete(r);
}

static void test_exdate_rdate(void)
{
    cJSON *r = call_ok("calendar.list_events", "{\"range\":\"Dec 12\"}");
    ASSERT(r);
    EXPECT(find_ev(r, "Piano lesson (L\xc3\xa9" "a)", "2026-12-12T10:00:00+01:00")); /* RDATE */
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"start\":\"2026-12-23\",\"end\":\"2026-12-26\"}");
    ASSERT(r);
    EXPECT(!find_ev(r, "Piano lesson (L\xc3\xa9" "a)", NULL)); /* EXDATE */
    EXPECT(find_ev(r, "Team standup", "2026-12-24T09:30:00+01:00"));
    EXPECT(!find_ev(r, "Team standup", "2026-12-25T09:30:00+01:00")); /* EXDATE */
    EXPECT(find_ev(r, "School holidays", "2026-12-19"));
    cJSON_Delete(r);
    /* a two-day all-day event overlaps each of its days */
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 11\"}");
    ASSERT(r);
    const cJSON *o = find_ev(r, "Team offsite in Lyon", "2026-12-10");
    ASSERT(o);
    EXPECT_STR_EQ(str(o, "end"), "2026-12-12");
    cJSON_Delete(r);
}

static void test_dst(void)
{
    /* Paris moves to summer time on 2027-03-28: the standup stays 09:30 local */
    cJSON *r = call_ok("calendar.list_events", "{\"range\":\"2027-03-26 to 2027-03-30\"}");
    ASSERT(r);
    EXPECT(find_ev(r, "Team standup", "2027-03-26T09:30:00+01:00"));
    EXPECT(find_ev(r, "Team standup", "2027-03-29T09:30:00+02:00"));
    cJSON_Delete(r);
    /* Tokyo has no DST: 17:00 JST is 09:00 in Paris winter, 10:00 in summer */
    r = call_ok("calendar.list_events", "{\"range\":\"2027-04-01\"}");
    ASSERT(r);
    EXPECT(find_ev(r, "Monthly sync with Kenji (Tokyo)", "2027-04-01T10:00:00+02:00"));
    cJSON_Delete(r);
}

static void test_list_filters(void)
{
    cJSON *r = call_ok("calendar.list_events",
                       "{\"range\":\"next week\",\"query\":\"standup\",\"limit\":2}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 2);
    EXPECT_EQ_INT(cJSON_GetObjectItemCaseSensitive(r, "count")->valueint, 5);
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "truncated")));
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"range\":\"this week\",\"calendar\":\"family.ics\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 3); /* piano, dinner, birthday */
    cJSON_Delete(r);
}

/* A query no event of the range matches still lists none there, and
 * gives those that match from a month back to a year ahead as "others",
 * in time order; a query nothing matches, or one the range matches (the
 * controls), gives no others. */
static void test_query_others(void)
{
    cJSON *r = call_ok("calendar.list_events", "{\"range\":\"today\",\"query\":\"piano\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 0);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(r, "others");
    EXPECT(cJSON_GetArraySize(o) > 0);
    const char *prev = "";
    const cJSON *e;
    cJSON_ArrayForEach(e, o)
    {
        const char *start = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "start"));
        EXPECT(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "title")), "Piano"));
        EXPECT(start && strcmp(start, prev) >= 0);
        prev = start ? start : prev;
    }
    EXPECT(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "note")),
                  "no event of the range has \"piano\"") != NULL);
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"range\":\"today\",\"query\":\"giraffe\"}");
    ASSERT(r);
    EXPECT(!cJSON_GetObjectItemCaseSensitive(r, "others"));
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"range\":\"this week\",\"query\":\"piano\"}");
    ASSERT(r);
    EXPECT(n_events(r) > 0 && !cJSON_GetObjectItemCaseSensitive(r, "others"));
    cJSON_Delete(r);
    /* no event has every word: the range's events with the most of them
     * ("dentist"), not those with fewer; the control: no word at all */
    r = call_ok("calendar.list_events",
                "{\"range\":\"tomorrow\",\"query\":\"dentist appointment\"}");
    ASSERT(r);
    const cJSON *part = cJSON_GetObjectItemCaseSensitive(r, "others");
    EXPECT_EQ_INT(n_events(r), 0);
    EXPECT_EQ_INT(cJSON_GetArraySize(part), 1);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(part, 0),
                                                                        "title")),
                  "Dentist");
    EXPECT(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "note")),
                  "the most of its words") != NULL);
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"range\":\"tomorrow\",\"query\":\"giraffe zebra\"}");
    ASSERT(r);
    EXPECT(!cJSON_GetObjectItemCaseSensitive(r, "others"));
    cJSON_Delete(r);
}

/* A query with no period looks from today to 12 months ahead ("when is
 * the piano lesson?"), every event found listed, none as "others"; the
 * control: with no query the period is today alone. */
static void test_query_looks_ahead(void)
{
    cJSON *r = call_ok("calendar.list_events", "{\"query\":\"piano\"}");
    ASSERT(r);
    const cJSON *range = cJSON_GetObjectItemCaseSensitive(r, "range"), *e;
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(range, "start")),
                  "2026-12-01T00:00:00+01:00");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(range, "end")),
                  "2027-12-01T00:00:00+01:00");
    EXPECT(n_events(r) > 0 && !cJSON_GetObjectItemCaseSensitive(r, "others"));
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(r, "events"))
        EXPECT(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "title")), "Piano"));
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{}");
    ASSERT(r);
    range = cJSON_GetObjectItemCaseSensitive(r, "range");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(range, "end")),
                  "2026-12-02T00:00:00+01:00");
    cJSON_Delete(r);
}

/* The query folds case and accents and takes its words in any order;
 * the calendar's name is compared folded. */
static void test_list_query_folds(void)
{
    ASSERT(fresh_world() == 0);
    cJSON *r = call_ok("calendar.create_event",
                       "{\"title\":\"Fundaci\u00f3n Alba: R\u00fcckfragen (Stra\u00dfe)\","
                       "\"start\":\"Dec 9 at 7pm\"}");
    ASSERT(r);
    cJSON_Delete(r);
    static const char *const hit[] = {"fundacion", "RÜCKFRAGEN", "alba fundación", "STRASSE",
                                      "the rückfragen", "(Alba),"};
    static const char *const miss[] = {"fundacion beta", "ruckfrage-x", "albas"};
    char json[256];
    for (size_t i = 0; i < sizeof hit / sizeof *hit + sizeof miss / sizeof *miss; i++) {
        int want = i < sizeof hit / sizeof *hit;
        const char *q = want ? hit[i] : miss[i - sizeof hit / sizeof *hit];
        snprintf(json, sizeof json, "{\"range\":\"Dec 9\",\"query\":\"%s\"}", q);
        r = call_ok("calendar.list_events", json);
        ASSERT(r);
        if (n_events(r) != want) test_fail_at(__FILE__, __LINE__, "query '%s': %d events", q, n_events(r));
        cJSON_Delete(r);
    }
    r = call_ok("calendar.list_events", "{\"range\":\"this week\",\"calendar\":\"FAMILY.ICS\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 3);
    cJSON_Delete(r);
    ASSERT(fresh_world() == 0);
}

/* One person written twice as an attendee is invited once. Control:
 * two people, both invited. */
static void test_attendee_once(void)
{
    ASSERT(fresh_world() == 0);
    cJSON *r = call_ok("calendar.create_event",
                       "{\"title\":\"Sync\",\"start\":\"Dec 9 at 10am\",\"attendees\":"
                       "[\"Bob <bob@example.org>\",\"BOB@example.org\",\"zed@example.net\"]}");
    ASSERT(r);
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "created"), "attendees");
    EXPECT_EQ_INT(cJSON_GetArraySize(att), 2);
    cJSON_Delete(r);
    ASSERT(fresh_world() == 0);
}

/* A new event over a busy one is written and the result says what it
 * overlaps; only_if_free refuses it and writes nothing; a free time has
 * no conflicts; a declined event is no conflict. */
static void test_create_reports_conflicts(void)
{
    ASSERT(fresh_world() == 0);
    cJSON *r = call_ok("calendar.create_event",
                       "{\"title\":\"Dentist\",\"start\":\"Dec 8 at 2pm\",\"duration_minutes\":30}");
    ASSERT(r);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(r, "conflicts");
    EXPECT_EQ_INT(cJSON_GetArraySize(c), 1);
    EXPECT_STR_EQ(str(cJSON_GetArrayItem(c, 0), "start"), "2026-12-08T14:00:00+01:00");
    EXPECT(strstr(str(r, "note"), "overlaps 1 busy event") != NULL);
    cJSON_Delete(r);
    int rc;
    hx_err e = {0};
    r = call("calendar.create_event",
             "{\"title\":\"Dentist 2\",\"start\":\"Dec 8 at 2pm\",\"only_if_free\":true}", &rc, &e);
    EXPECT(r == NULL);
    EXPECT_EQ_INT(rc, HX_ERR_STATE);
    EXPECT(strstr(e.msg, "not created") && strstr(e.msg, "2026-12-08T14:00:00+01:00"));
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 8\",\"query\":\"dentist 2\"}");
    EXPECT_EQ_INT(n_events(r), 0); /* nothing written */
    cJSON_Delete(r);
    /* control: a free time, with only_if_free, is created without conflicts */
    r = call_ok("calendar.create_event",
                "{\"title\":\"Dentist 3\",\"start\":\"Dec 8 at 7pm\",\"only_if_free\":true}");
    ASSERT(r);
    EXPECT(cJSON_GetObjectItemCaseSensitive(r, "conflicts") == NULL);
    cJSON_Delete(r);
    /* the design review Alice declined (Dec 8, 15:00-16:00) blocks nothing */
    r = call_ok("calendar.create_event",
                "{\"title\":\"Call\",\"start\":\"Dec 8 at 3pm\",\"only_if_free\":true}");
    ASSERT(r);
    EXPECT(cJSON_GetObjectItemCaseSensitive(r, "conflicts") == NULL);
    cJSON_Delete(r);
    /* moving an event reports what its new time overlaps, not itself */
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 8\",\"query\":\"call\"}");
    char json[256];
    snprintf(json, sizeof json, "{\"uid\":\"%s\",\"start\":\"Dec 8 at 1:45pm\"}",
             str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "events"), 0), "uid"));
    cJSON_Delete(r);
    r = call_ok("calendar.update_event", json);
    ASSERT(r);
    c = cJSON_GetObjectItemCaseSensitive(r, "conflicts");
    EXPECT_EQ_INT(cJSON_GetArraySize(c), 2); /* the 1:1 and the dentist */
    cJSON_Delete(r);
    ASSERT(fresh_world() == 0); /* the next tests read the fixture as it is */
}

static void test_free_busy(void)
{
    cJSON *r = call_ok("calendar.free_busy",
                       "{\"range\":\"Dec 8\",\"attendees\":[\"bob@example.org\",\"zed@example.net\"]}");
    ASSERT(r);
    const cJSON *busy = cJSON_GetObjectItemCaseSensitive(r, "busy");
    /* Alice declined the design review: standup and 1:1 only */
    EXPECT_EQ_INT(cJSON_GetArraySize(busy), 2);
    EXPECT_STR_EQ(str(cJSON_GetArrayItem(busy, 1), "start"), "2026-12-08T14:00:00+01:00");
    /* the user's busy times say with what (not the declined review);
     * an attendee's say only when */
    EXPECT_STR_EQ(str(cJSON_GetArrayItem(busy, 0), "title"), "Team standup");
    EXPECT_STR_EQ(str(cJSON_GetArrayItem(busy, 1), "title"), "1:1 Alice / Bob");
    const cJSON *bob = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "attendees"), 0);
    const cJSON *bb = cJSON_GetObjectItemCaseSensitive(bob, "busy");
    EXPECT_EQ_INT(cJSON_GetArraySize(bb), 3);
    EXPECT_STR_EQ(str(cJSON_GetArrayItem(bb, 2), "start"), "2026-12-08T15:00:00+01:00");
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(bob, "known")));
    EXPECT(!cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(bb, 0), "title"));
    const cJSON *zed = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "attendees"), 1);
    EXPECT(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(zed, "known")));
    cJSON_Delete(r);
}

static void expect_slot(const cJSON *r, int i, const char *start, const char *end)
{
    const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "slots"), i);
    EXPECT_STR_EQ(str(s, "start"), start);
    EXPECT_STR_EQ(str(s, "end"), end);
}

static void test_find_slots(void)
{
    cJSON *r = call_ok("calendar.find_slots",
                       "{\"duration_minutes\":60,\"range\":\"next Tuesday afternoon\","
                       "\"attendees\":[\"bob@example.org\"],\"count\":3}");
    ASSERT(r);
    /* 14:00-14:30 1:1 (both), 15:00-16:00 Bob's design review */
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "slots")), 3);
    expect_slot(r, 0, "2026-12-08T12:00:00+01:00", "2026-12-08T13:00:00+01:00");
    expect_slot(r, 1, "2026-12-08T13:00:00+01:00", "2026-12-08T14:00:00+01:00");
    expect_slot(r, 2, "2026-12-08T16:00:00+01:00", "2026-12-08T17:00:00+01:00");
    cJSON_Delete(r);
    /* today from now (09:00): the standup until 09:45 */
    r = call_ok("calendar.find_slots", "{\"duration_minutes\":30,\"range\":\"today\",\"count\":2}");
    ASSERT(r);
    expect_slot(r, 0, "2026-12-01T09:00:00+01:00", "2026-12-01T09:30:00+01:00");
    expect_slot(r, 1, "2026-12-01T09:45:00+01:00", "2026-12-01T10:15:00+01:00");
    cJSON_Delete(r);
    /* the weekend and the all-day offsite have no working-hours slots */
    r = call_ok("calendar.find_slots",
                "{\"duration_minutes\":30,\"start\":\"2026-12-10\",\"end\":\"2026-12-13\"}");
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "slots")), 0);
    cJSON_Delete(r);
    /* outside working hours when asked: Saturday morning is free */
    r = call_ok("calendar.find_slots", "{\"duration_minutes\":120,\"range\":\"Dec 5\","
                                       "\"working_hours_only\":false,\"count\":1}");
    ASSERT(r);
    expect_slot(r, 0, "2026-12-05T00:00:00+01:00", "2026-12-05T02:00:00+01:00");
    cJSON_Delete(r);
}

/* A moment ("tomorrow at 4pm") asks about the slot that starts there; with
 * none free, the result names what stands in the way, of the user's own
 * events. Control: a free moment gives its slot and no "busy". */
static void test_find_slots_at_a_moment(void)
{
    cJSON *r = call_ok("calendar.find_slots", "{\"duration_minutes\":60,\"range\":\"tomorrow at 4pm\"}");
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "slots")), 0);
    const cJSON *range = cJSON_GetObjectItemCaseSensitive(r, "range");
    EXPECT_STR_EQ(str(range, "start"), "2026-12-02T16:00:00+01:00");
    EXPECT_STR_EQ(str(range, "end"), "2026-12-02T17:00:00+01:00");
    const cJSON *busy = cJSON_GetObjectItemCaseSensitive(r, "busy");
    EXPECT_EQ_INT(cJSON_GetArraySize(busy), 1);
    EXPECT_STR_EQ(str(cJSON_GetArrayItem(busy, 0), "title"), "Dentist");
    EXPECT_STR_EQ(str(cJSON_GetArrayItem(busy, 0), "start"), "2026-12-02T16:00:00+01:00");
    cJSON_Delete(r);
    r = call_ok("calendar.find_slots", "{\"duration_minutes\":60,\"range\":\"tomorrow at 11am\"}");
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "slots")), 1);
    expect_slot(r, 0, "2026-12-02T11:00:00+01:00", "2026-12-02T12:00:00+01:00");
    EXPECT(!cJSON_GetObjectItemCaseSensitive(r, "busy"));
    cJSON_Delete(r);
}

/* ---- writing ---- */

static void test_create_with_invitation(void)
{
    setup_or_die();
    cJSON *r = call_ok("calendar.create_event",
                       "{\"title\":\"Project kickoff\",\"start\":\"next Tuesday at 10am\","
                       "\"duration_minutes\":45,\"location\":\"Room Mars\",\"reminder_minutes\":15,"
                       "\"attendees\":[\"Bob Lee <bob@example.org>\",\"chloe@example.fr\"]}");
    ASSERT(r);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(r, "created");
    EXPECT_STR_EQ(str(ev, "start"), "2026-12-08T10:00:00+01:00");
    EXPECT_STR_EQ(str(ev, "end"), "2026-12-08T10:45:00+01:00");
    char *uid = hx_strdup(str(ev, "uid"));
    /* the file reads back with libical, as other software would read it */
    char *text = slurp(str(r, "file"));
    ASSERT(text);
    icalcomponent *root = icalparser_parse_string(text);
    ASSERT(root);
    icalcomponent *v = icalcomponent_get_first_component(root, ICAL_VEVENT_COMPONENT);
    ASSERT(v);
    EXPECT_STR_EQ(icalcomponent_get_uid(v), uid);
    EXPECT(icalcomponent_get_first_component(root, ICAL_VTIMEZONE_COMPONENT) != NULL);
    EXPECT(strstr(text, "DTSTART;TZID=Europe/Paris:20261208T100000") != NULL);
    EXPECT(strstr(text, "TRIGGER:-PT15M") != NULL);
    EXPECT(strstr(text, "ORGANIZER;CN=Alice Martin:mailto:alice@example.org") != NULL);
    EXPECT_EQ_INT(icalcomponent_count_properties(v, ICAL_ATTENDEE_PROPERTY), 2);
    icalcomponent_free(root);
    free(text);
    /* the invitation */
    int n;
    const char *mail = outbox_mail(&n);
    EXPECT_EQ_INT(n, 1);
    ASSERT(mail);
    char *m = slurp(mail);
    ASSERT(m);
    EXPECT(strstr(m, "To: bob@example.org, chloe@example.fr\r\n") != NULL);
    EXPECT(strstr(m, "Message-ID: <") != NULL);
    EXPECT(strstr(m, "Date: Tue, 1 Dec 2026 09:00:00 +0100") != NULL);
    EXPECT(strstr(m, "Content-Type: text/calendar; method=REQUEST") != NULL);
    char *ics = itip_part(m);
    ASSERT(ics);
    EXPECT(strstr(ics, "METHOD:REQUEST") != NULL);
    EXPECT(strstr(ics, uid) != NULL);
    EXPECT(strstr(ics, "BEGIN:VALARM") == NULL);
    icalcomponent *it = icalparser_parse_string(ics);
    EXPECT(it && icalcomponent_get_method(it) == ICAL_METHOD_REQUEST);
    if (it) icalcomponent_free(it);
    free(ics);
    free(m);
    cJSON_Delete(r);
    /* and the calendar shows it */
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 8\",\"query\":\"kickoff\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 1);
    cJSON_Delete(r);
    free(uid);
}

static void expect_error(const char *tool, const char *json, int rc_want, const char *needle)
{
    int rc;
    hx_err e = {0};
    cJSON *r = call(tool, json, &rc, &e);
    if (rc != rc_want || !strstr(e.msg, needle))
        test_fail_at(__FILE__, __LINE__, "%s %s: rc %d '%s', want %d '%s'", tool, json, rc,
                     e.msg, rc_want, needle);
    cJSON_Delete(r);
}

/* Every calendar tool taking attendees refuses what create_event refuses,
 * with the same message (one check, tools/args.c): hearth-tiny's mangled
 * copies such as "p20-0" passed find_slots as unknown people and were only
 * caught when booking. Good forms still pass everywhere. */
static void test_attendee_addresses_checked_alike(void)
{
    static const char *bad[] = {"p20-0", "b]@kefain.de", "Pri{", "@kefain.de", "bob@",
                                "bob@x@y.org", "Bob <bob@x.org> junk", "", "dwagner@shoufy eu"};
    static const char *tools[][2] = { /* tool, arguments before the bad address */
        {"calendar.create_event", "{\"title\":\"x\",\"start\":\"tomorrow at 3pm\",\"attendees\":[\""},
        {"calendar.find_slots",
         "{\"duration_minutes\":30,\"range\":\"Dec 8\",\"attendees\":[\"bob@example.org\",\""},
        {"calendar.free_busy", "{\"range\":\"Dec 8\",\"attendees\":[\""},
    };
    char json[512], want[256];
    for (size_t t = 0; t < sizeof tools / sizeof *tools; t++)
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            snprintf(json, sizeof json, "%s%s\"]}", tools[t][1], bad[i]);
            snprintf(want, sizeof want,
                     "argument 'attendees': '%s' is not an address like \"name@domain\"", bad[i]);
            expect_error(tools[t][0], json, HX_ERR_INVALID, want);
        }
    expect_error("calendar.find_slots", "{\"duration_minutes\":30,\"range\":\"Dec 8\",\"attendees\":[3]}", HX_ERR_INVALID,
                 "argument 'attendees[0]': expected string");
    cJSON *r = call_ok("calendar.find_slots",
                       "{\"duration_minutes\":30,\"range\":\"Dec 8\",\"attendees\":"
                       "[\"Bob Lee <bob@example.org>\",\"mailto:zed@example.net\",\"\\\"Lee, Bob\\\" <bob@example.org>\"]}");
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "attendees")), 3);
    cJSON_Delete(r);
    r = call_ok("calendar.free_busy", "{\"range\":\"Dec 8\",\"attendees\":[\"bob@example.org\"]}");
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "attendees")), 1);
    cJSON_Delete(r);
    int n;
    outbox_mail(&n);
    EXPECT_EQ_INT(n, 1); /* no refused create_event queued an invitation */
}

/* Under a pinned clock a replayed run gets the same UID and the same
 * queued invitation (they are in the result the model reads: random ones
 * made the same evaluation task end differently from run to run); in one
 * calendar a second event still gets a new UID; unpinned, UIDs are random. */
static void test_pinned_names_replay(void)
{
    const char *args = "{\"title\":\"Replay\",\"start\":\"Dec 3 at 3pm\","
                       "\"attendees\":[\"bob@example.org\"]}";
    char *uid[2] = {NULL, NULL}, *queued[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {
        setup_or_die(); /* a fresh copy of the world, HEARTH_NOW pinned */
        cJSON *r = call_ok("calendar.create_event", args);
        ASSERT(r);
        uid[run] = hx_strdup(str(cJSON_GetObjectItemCaseSensitive(r, "created"), "uid"));
        const char *q = str(r, "invitation_queued"), *slash = strrchr(q, '/');
        queued[run] = hx_strdup(slash ? slash + 1 : q);
        cJSON_Delete(r);
    }
    EXPECT(uid[0][0] && queued[0][0]);
    EXPECT_STR_EQ(uid[0], uid[1]);
    EXPECT_STR_EQ(queued[0], queued[1]);
    cJSON *again = call_ok("calendar.create_event", args); /* same calendar */
    ASSERT(again);
    const char *u2 = str(cJSON_GetObjectItemCaseSensitive(again, "created"), "uid");
    EXPECT(u2[0] && strcmp(u2, uid[0]) != 0);
    const char *q2 = str(again, "invitation_queued");
    EXPECT(q2[0] && !strstr(q2, queued[0]));
    unsetenv("HEARTH_NOW");
    cJSON *free_run = call_ok("calendar.create_event", "{\"title\":\"Replay\",\"start\":"
                              "\"2026-12-03T15:00:00+01:00\"}");
    ASSERT(free_run);
    const char *u3 = str(cJSON_GetObjectItemCaseSensitive(free_run, "created"), "uid");
    EXPECT(u3[0] && strcmp(u3, uid[0]) != 0 && strcmp(u3, u2) != 0);
    printf("# pinned: uid %s, invitation %s both runs; unpinned: %s\n", uid[0], queued[0], u3);
    cJSON_Delete(again), cJSON_Delete(free_run);
    for (int i = 0; i < 2; i++) free(uid[i]), free(queued[i]);
    setup_or_die();
}

static void test_create_errors(void)
{
    expect_error("calendar.create_event", "{\"title\":\"x\",\"start\":\"tomorrow\"}",
                 HX_ERR_INVALID, "names a whole day");
    expect_error("calendar.create_event", "{\"start\":\"tomorrow at 3pm\"}", HX_ERR_INVALID,
                 "missing required argument 'title'");
    expect_error("calendar.create_event",
                 "{\"title\":\"x\",\"start\":\"tomorrow at 3pm\",\"attendees\":[\"bob\"]}",
                 HX_ERR_INVALID, "'bob' is not an address");
    expect_error("calendar.create_event",
                 "{\"title\":\"x\",\"start\":\"tomorrow at 3pm\",\"end\":\"tomorrow at 2pm\"}",
                 HX_ERR_INVALID, "ends before it starts");
    expect_error("calendar.create_event", "{\"title\":\"x\",\"start\":\"next blursday\"}",
                 HX_ERR_FORMAT, "argument 'start': cannot read 'blursday'");
    expect_error("calendar.create_event",
                 "{\"title\":\"x\",\"start\":\"tomorrow at 3pm\",\"duration_minutes\":\"60\"}",
                 HX_ERR_INVALID, "argument 'duration_minutes': expected integer, got a string");
    expect_error("calendar.update_event", "{\"uid\":\"nope@x\",\"title\":\"y\"}",
                 HX_ERR_NOTFOUND, "no event with uid 'nope@x'");
    expect_error("calendar.cancel_event", "{\"uid\":\"comite-7@example.fr\"}", HX_ERR_DENIED,
                 "organized by chloe@example.fr");
    expect_error("calendar.cancel_event",
                 "{\"uid\":\"dentist-20261202@alice-phone\",\"occurrence\":\"Dec 2\"}",
                 HX_ERR_INVALID, "does not repeat");
    int n;
    outbox_mail(&n);
    EXPECT_EQ_INT(n, 1); /* only the earlier test's invitation */
    /* an all-day event from a day */
    cJSON *r = call_ok("calendar.create_event",
                       "{\"title\":\"Holiday\",\"start\":\"Dec 24\",\"end\":\"Dec 26\",\"all_day\":true}");
    ASSERT(r);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(r, "created");
    EXPECT_STR_EQ(str(ev, "start"), "2026-12-24");
    EXPECT_STR_EQ(str(ev, "end"), "2026-12-27");
    char *text = slurp(str(r, "file"));
    EXPECT(text && strstr(text, "DTSTART;VALUE=DATE:20261224"));
    free(text);
    cJSON_Delete(r);
}

static void test_update_keeps_unknown_properties(void)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/calendars/work/dentist.ics", world);
    cJSON *r = call_ok("calendar.update_event",
                       "{\"uid\":\"dentist-20261202@alice-phone\",\"title\":\"Dentist (check-up)\","
                       "\"start\":\"Dec 2 at 5pm\"}");
    ASSERT(r);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(r, "updated");
    EXPECT_STR_EQ(str(ev, "start"), "2026-12-02T17:00:00+01:00");
    EXPECT_STR_EQ(str(ev, "end"), "2026-12-02T17:45:00+01:00"); /* length kept */
    EXPECT(!cJSON_GetObjectItemCaseSensitive(r, "invitation_queued"));
    char *text = slurp(path);
    ASSERT(text);
    EXPECT(strstr(text, "X-PHONE-COLOR:teal") != NULL);
    EXPECT(strstr(text, "CATEGORIES:Personal") != NULL);
    EXPECT(strstr(text, "TRIGGER:-PT1H") != NULL);
    EXPECT(strstr(text, "SEQUENCE:1") != NULL);
    EXPECT(strstr(text, "SUMMARY:Dentist (check-up)") != NULL);
    icalcomponent *root = icalparser_parse_string(text);
    EXPECT(root != NULL);
    if (root) icalcomponent_free(root);
    free(text);
    cJSON_Delete(r);
}

/* An event in a multi-event file: the other events and the calendar's
 * own properties survive the rewrite. */
static void test_update_in_shared_file(void)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/calendars/family.ics", world);
    cJSON *r = call_ok("calendar.update_event",
                       "{\"uid\":\"dinner-chloe@family\",\"start\":\"Dec 5 at 8pm\",\"all_day\":false}");
    ASSERT(r);
    EXPECT_STR_EQ(str(cJSON_GetObjectItemCaseSensitive(r, "updated"), "end"),
                  "2026-12-05T23:00:00+01:00");
    cJSON_Delete(r);
    char *text = slurp(path);
    ASSERT(text);
    icalcomponent *root = icalparser_parse_string(text);
    ASSERT(root);
    EXPECT_EQ_INT(icalcomponent_count_components(root, ICAL_VEVENT_COMPONENT), 4);
    EXPECT(strstr(text, "X-WR-CALNAME:Family") != NULL);
    EXPECT(strstr(text, "RDATE;TZID=Europe/Paris:20261212T100000") != NULL);
    icalcomponent_free(root);
    free(text);
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 12\"}");
    ASSERT(r);
    EXPECT(find_ev(r, "Piano lesson (L\xc3\xa9" "a)", "2026-12-12T10:00:00+01:00"));
    cJSON_Delete(r);
}

static void test_update_and_cancel_occurrence(void)
{
    setup_or_die();
    cJSON *r = call_ok("calendar.update_event",
                       "{\"uid\":\"1on1-alice-bob@example.org\",\"location\":\"Caf\xc3\xa9 du coin\"}");
    ASSERT(r);
    cJSON_Delete(r);
    int n;
    const char *mail = outbox_mail(&n);
    EXPECT_EQ_INT(n, 1);
    char *m = mail ? slurp(mail) : NULL, *ics = m ? itip_part(m) : NULL;
    EXPECT(ics && strstr(ics, "SEQUENCE:1") && strstr(ics, "RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU"));
    free(ics);
    free(m);
    sh("rm -f %s/outbox/new/*", world);
    r = call_ok("calendar.cancel_event",
                "{\"uid\":\"1on1-alice-bob@example.org\",\"occurrence\":\"Dec 8 at 2pm\"}");
    ASSERT(r);
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"start\":\"Dec 7\",\"end\":\"Dec 23\",\"query\":\"1:1\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 1);
    EXPECT(find_ev(r, "1:1 Alice / Bob", "2026-12-22T14:00:00+01:00"));
    cJSON_Delete(r);
    mail = outbox_mail(&n);
    EXPECT_EQ_INT(n, 1);
    m = mail ? slurp(mail) : NULL;
    ics = m ? itip_part(m) : NULL;
    EXPECT(m && strstr(m, "method=CANCEL"));
    EXPECT(ics && strstr(ics, "METHOD:CANCEL") &&
           strstr(ics, "RECURRENCE-ID;TZID=Europe/Paris:20261208T140000") &&
           !strstr(ics, "RRULE:FREQ=WEEKLY"));
    free(ics);
    free(m);
}

/* Changing one occurrence of a series: an override with its RECURRENCE-ID,
 * the other occurrences untouched; a second change edits the override. */
static void test_update_one_occurrence(void)
{
    sh("rm -f %s/outbox/new/*", world);
    cJSON *r = call_ok("calendar.update_event",
                       "{\"uid\":\"1on1-alice-bob@example.org\",\"occurrence\":\"Dec 22 at 2pm\","
                       "\"start\":\"Dec 22 at 4pm\",\"title\":\"1:1 (moved)\"}");
    ASSERT(r);
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"start\":\"Dec 21\",\"end\":\"Jan 20\",\"query\":\"1:1\"}");
    ASSERT(r);
    EXPECT(find_ev(r, "1:1 (moved)", "2026-12-22T16:00:00+01:00"));
    EXPECT(!find_ev(r, "1:1 Alice / Bob", "2026-12-22T14:00:00+01:00"));
    EXPECT(find_ev(r, "1:1 Alice / Bob", "2027-01-05T14:00:00+01:00"));
    cJSON_Delete(r);
    int n;
    const char *mail = outbox_mail(&n);
    EXPECT_EQ_INT(n, 1);
    char *m = mail ? slurp(mail) : NULL, *ics = m ? itip_part(m) : NULL;
    EXPECT(ics && strstr(ics, "METHOD:REQUEST") &&
           strstr(ics, "RECURRENCE-ID;TZID=Europe/Paris:20261222T140000") &&
           !strstr(ics, "RRULE:FREQ=WEEKLY"));
    free(ics);
    free(m);
    /* the override is found by its new start or its original one */
    r = call_ok("calendar.update_event",
                "{\"uid\":\"1on1-alice-bob@example.org\",\"occurrence\":\"Dec 22 at 4pm\","
                "\"location\":\"Room 2\"}");
    ASSERT(r);
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 22\",\"query\":\"1:1\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 1);
    EXPECT(find_ev(r, "1:1 (moved)", "2026-12-22T16:00:00+01:00"));
    cJSON_Delete(r);
    /* no such occurrence; not a series */
    hx_err e;
    int rc;
    r = call("calendar.update_event",
             "{\"uid\":\"1on1-alice-bob@example.org\",\"occurrence\":\"Dec 23 at 2pm\",\"title\":\"x\"}",
             &rc, &e);
    EXPECT(rc == HX_ERR_NOTFOUND && strstr(e.msg, "no occurrence"));
    cJSON_Delete(r);
}

/* Replacing the attendees: the new list gets a REQUEST, the removed a CANCEL. */
static void test_update_removes_attendee(void)
{
    sh("rm -f %s/outbox/new/*", world);
    cJSON *r = call_ok("calendar.create_event",
                       "{\"title\":\"Review\",\"start\":\"Dec 10 at 15:00\","
                       "\"attendees\":[\"bob@example.org\",\"dan@example.org\"]}");
    ASSERT(r);
    char json[256];
    snprintf(json, sizeof json, "{\"uid\":\"%s\",\"attendees\":[\"bob@example.org\"]}",
             str(cJSON_GetObjectItemCaseSensitive(r, "created"), "uid"));
    cJSON_Delete(r);
    sh("rm -f %s/outbox/new/*", world);
    r = call_ok("calendar.update_event", json);
    ASSERT(r);
    cJSON_Delete(r);
    int n;
    outbox_mail(&n);
    EXPECT_EQ_INT(n, 2);
    EXPECT_EQ_INT(sh("grep -l '^To: dan@example.org' %s/outbox/new/* | xargs grep -q 'method=CANCEL'", world), 0);
    EXPECT_EQ_INT(sh("grep -l '^To: bob@example.org' %s/outbox/new/* | xargs grep -q 'method=REQUEST'", world), 0);
}

static void test_cancel_whole_event(void)
{
    cJSON *r = call_ok("calendar.create_event",
                       "{\"title\":\"Budget\",\"start\":\"Dec 9 at 11:00\",\"attendees\":[\"dan@example.org\"]}");
    ASSERT(r);
    char uid[128], json[256];
    snprintf(uid, sizeof uid, "%s", str(cJSON_GetObjectItemCaseSensitive(r, "created"), "uid"));
    cJSON_Delete(r);
    sh("rm -f %s/outbox/new/*", world);
    snprintf(json, sizeof json, "{\"uid\":\"%s\"}", uid);
    r = call_ok("calendar.cancel_event", json);
    ASSERT(r);
    EXPECT_STR_EQ(str(cJSON_GetObjectItemCaseSensitive(r, "cancelled"), "status"), "cancelled");
    cJSON_Delete(r);
    int n;
    const char *mail = outbox_mail(&n);
    EXPECT_EQ_INT(n, 1);
    char *m = mail ? slurp(mail) : NULL, *ics = m ? itip_part(m) : NULL;
    EXPECT(ics && strstr(ics, "METHOD:CANCEL") && strstr(ics, "STATUS:CANCELLED") &&
           strstr(ics, "SEQUENCE:1"));
    free(ics);
    free(m);
    /* the event is kept, marked cancelled, and no longer blocks time */
    r = call_ok("calendar.free_busy", "{\"range\":\"Dec 9\"}");
    ASSERT(r);
    const cJSON *b, *busy = cJSON_GetObjectItemCaseSensitive(r, "busy");
    EXPECT_EQ_INT(cJSON_GetArraySize(busy), 3); /* standup, piano, yoga */
    cJSON_ArrayForEach(b, busy) EXPECT(!strstr(str(b, "start"), "T11:00"));
    cJSON_Delete(r);
    /* listed, it is counted apart from the events that take place */
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 9\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 4);
    EXPECT_EQ_INT(cJSON_GetObjectItemCaseSensitive(r, "count")->valueint, 3);
    EXPECT_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "cancelled")), 1);
    cJSON_Delete(r);
    r = call_ok("calendar.list_events", "{\"range\":\"Dec 10\"}"); /* control: none cancelled */
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetObjectItemCaseSensitive(r, "count")->valueint, n_events(r));
    EXPECT(!cJSON_GetObjectItemCaseSensitive(r, "cancelled"));
    cJSON_Delete(r);
}

/* ---- broken input ---- */

static void write_file(const char *rel, const char *text)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", world, rel);
    FILE *f = fopen(path, "wb");
    if (f) fputs(text, f), fclose(f);
}

static int problem_about(const cJSON *r, const char *file, const char *needle)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(r, "problems"))
    if (strstr(str(p, "file"), file) && strstr(str(p, "error"), needle)) return 1;
    return 0;
}

static void test_broken_files(void)
{
    setup_or_die();
    write_file("calendars/work/garbage.ics", "hello, this is not a calendar\n");
    write_file("calendars/work/no-dtstart.ics",
               "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x@y\r\nSUMMARY:No "
               "start\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n");
    write_file("calendars/work/mars.ics",
               "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:mars@y\r\nSUMMARY:On "
               "Mars\r\nDTSTART;TZID=Mars/Olympus:20261202T120000\r\nDURATION:PT1H\r\n"
               "END:VEVENT\r\nEND:VCALENDAR\r\n");
    write_file("calendars/work/truncated.ics",
               "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:t@y\r\nDTSTART:2026120");
    sh("head -c 5000000 /dev/zero | tr '\\0' 'A' > %s/calendars/work/huge.ics", world);
    sh("cp -r %s/calendars %s/before", world, world);
    cJSON *r = call_ok("calendar.list_events", "{\"range\":\"this week\"}");
    ASSERT(r);
    EXPECT_EQ_INT(n_events(r), 14); /* the 13 + the Mars event */
    EXPECT(problem_about(r, "garbage.ics", "no BEGIN:VCALENDAR"));
    EXPECT(problem_about(r, "no-dtstart.ics", "no valid DTSTART"));
    EXPECT(problem_about(r, "mars.ics", "unknown TZID 'Mars/Olympus'"));
    EXPECT(problem_about(r, "huge.ics", "skipped"));
    EXPECT(problem_about(r, "truncated.ics", "skipped"));
    /* unknown TZID: read in the user's zone */
    EXPECT(find_ev(r, "On Mars", "2026-12-02T12:00:00+01:00"));
    cJSON_Delete(r);
    /* writes elsewhere leave the broken files untouched */
    r = call_ok("calendar.create_event", "{\"title\":\"x\",\"start\":\"Dec 2 at 8am\"}");
    EXPECT(r != NULL);
    cJSON_Delete(r);
    EXPECT_EQ_INT(sh("for f in garbage no-dtstart mars truncated huge; do cmp -s "
                     "%s/before/work/$f.ics %s/calendars/work/$f.ics || exit 1; done",
                     world, world),
                  0);
}

/* A file changed on disk between read and write is not overwritten. */
static void test_changed_on_disk(void)
{
    hx_cal *c;
    hx_cal_file *f;
    hx_err e = {0};
    ASSERT(hx_cal_load(reg, &c, &e) == HX_OK);
    icalcomponent *ev = hx_cal_find_uid(c, "yoga-wednesday@alice-phone", &f);
    ASSERT(ev);
    icalcomponent_set_summary(ev, "Yoga (changed by us)");
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/calendars/work/yoga.ics", world);
    sh("sleep 0.01; printf 'X' >> %s", path);
    EXPECT_EQ_INT(hx_cal_save(c, f, &e), HX_ERR_STATE);
    EXPECT(strstr(e.msg, "changed on disk") != NULL);
    char *text = slurp(path);
    EXPECT(text && !strstr(text, "changed by us"));
    free(text);
    hx_cal_free(c);
}

static void test_registered_schemas(void)
{
    cJSON *l = hx_tools_list_json(reg);
    EXPECT_EQ_INT(cJSON_GetArraySize(l), 6);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(l, 2), "function");
    EXPECT_STR_EQ(str(fn, "name"), "calendar.find_slots");
    EXPECT(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(fn, "parameters")));
    cJSON_Delete(l);
    EXPECT_EQ_INT(hx_tools_find(reg, "calendar.create_event")->effect, HX_EFFECT_SEND);
}

int main(void)
{
    setup_or_die();
    RUN(test_list_this_week);
    RUN(test_exdate_rdate);
    RUN(test_dst);
    RUN(test_list_filters);
    RUN(test_query_others);
    RUN(test_query_looks_ahead);
    RUN(test_list_query_folds);
    RUN(test_create_reports_conflicts);
    RUN(test_attendee_once);
    RUN(test_free_busy);
    RUN(test_find_slots);
    RUN(test_find_slots_at_a_moment);
    RUN(test_registered_schemas);
    RUN(test_create_with_invitation);
    RUN(test_create_errors);
    RUN(test_attendee_addresses_checked_alike);
    RUN(test_pinned_names_replay);
    RUN(test_update_keeps_unknown_properties);
    RUN(test_update_in_shared_file);
    RUN(test_update_and_cancel_occurrence);
    RUN(test_update_one_occurrence);
    RUN(test_update_removes_attendee);
    RUN(test_cancel_whole_event);
    RUN(test_broken_files);
    RUN(test_changed_on_disk);
    hx_tools_free(reg);
    hx_config_free(cfg);
    sh("rm -rf %s", world);
    return test_summary();
}
