/* test_handcheck.c: the hand-written evaluation's checker, checked itself:
 * facts read in the forms people write them ("2 pm" is 14:00), answers
 * with an invented time, date, address or file name failing and extra
 * correct facts passing, facts said of the wrong event failing; the state
 * check on scripted tool calls (the asked event and invitation pass; an
 * extra event, a wrong attendee, a stray memory fail); every task's ideal
 * calls reaching its facts and state (bench/handeval); and no training
 * script or generator naming the evaluation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nightly/chatdata.h"
#include "sim/handeval.h"
#include "test.h"

/* 2027-03-10, a Wednesday, as local days since 1970-01-01. */
#define TODAY 20887

static int first(const char *text, int kind, hx_he_mention *out)
{
    hx_he_text t;
    int found = 0;
    if (hx_he_scan(text, TODAY, &t)) return 0;
    for (int i = 0; i < t.n && !found; i++)
        if (t.m[i].kind == kind) *out = t.m[i], found = 1;
    hx_he_text_free(&t);
    return found;
}

static int minutes_of(const char *text)
{
    hx_he_mention m;
    return first(text, HX_HE_TIME, &m) ? m.minutes : -1;
}

static void test_fold(void)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_he_fold("Jürgen Weiß – Réunion “Æ” Œuvre ＡＢ１２：３０", &b);
    hx_buf_putc(&b, 0);
    EXPECT_STR_EQ(b.data, "jurgen weiss - reunion \"ae\" oeuvre ＡＢ12:30");
    hx_buf_free(&b);
}

static void test_times(void)
{
    EXPECT_EQ_INT(minutes_of("at 14:00"), 840);
    EXPECT_EQ_INT(minutes_of("at 2 pm"), 840);
    EXPECT_EQ_INT(minutes_of("at 2pm"), 840);
    EXPECT_EQ_INT(minutes_of("at 2:30 P.M."), 870);
    EXPECT_EQ_INT(minutes_of("um 15 Uhr"), 900);
    EXPECT_EQ_INT(minutes_of("à 14h30"), 870);
    EXPECT_EQ_INT(minutes_of("12 am"), 0);
    EXPECT_EQ_INT(minutes_of("12:15 pm"), 735);
    EXPECT_EQ_INT(minutes_of("at noon"), 720);
    EXPECT_EQ_INT(minutes_of("午後3時から"), 900);
    EXPECT_EQ_INT(minutes_of("午前9時30分"), 570);
    EXPECT_EQ_INT(minutes_of("2027-03-11T14:00:00-05:00"), 840);
    EXPECT_EQ_INT(minutes_of("9.30am"), 570);
    /* not times: a ratio, a decimal, a bare number, an offset alone */
    EXPECT_EQ_INT(minutes_of("1:1 with Bob"), -1);
    EXPECT_EQ_INT(minutes_of("3.5 hours"), -1);
    EXPECT_EQ_INT(minutes_of("room 204"), -1);
    EXPECT_EQ_INT(minutes_of("in the afternoon"), -1);
    /* the offset of an ISO time is no second time */
    hx_he_text t;
    ASSERT(hx_he_scan("2027-03-11T14:00:00-05:00", TODAY, &t) == HX_OK);
    int times = 0;
    for (int i = 0; i < t.n; i++) times += t.m[i].kind == HX_HE_TIME;
    EXPECT_EQ_INT(times, 1);
    hx_he_text_free(&t);
}

static int date_is(const char *text, int y, int m, int d)
{
    hx_he_mention x;
    return first(text, HX_HE_DATE, &x) && x.y == y && x.m == m && x.d == d;
}

static void test_dates(void)
{
    EXPECT(date_is("on 2027-03-11", 2027, 3, 11));
    EXPECT(date_is("on March 11", 0, 3, 11));
    EXPECT(date_is("Thu, Mar 11th, 2027", 2027, 3, 11));
    EXPECT(date_is("le 11 mars", 0, 3, 11));
    EXPECT(date_is("am 3. Mai 2027", 2027, 5, 3));
    EXPECT(date_is("el miércoles 17 de marzo", 0, 3, 17));
    EXPECT(date_is("le jeudi 1er avril", 0, 4, 1));
    EXPECT(date_is("3月11日（木）", 0, 3, 11));
    EXPECT(date_is("am 11.03.", 0, 3, 11));
    EXPECT(date_is("tomorrow", 2027, 3, 11));
    EXPECT(date_is("today", 2027, 3, 10));
    hx_he_mention x;
    ASSERT(first("on 3/11", HX_HE_DATE, &x));
    EXPECT(x.m == 3 && x.d == 11 && x.m2 == 11 && x.d2 == 3);
    ASSERT(first("see you Thursday", HX_HE_WEEKDAY, &x));
    EXPECT_EQ_INT(x.wday, 4);
    EXPECT(!first("I sat down", HX_HE_WEEKDAY, &x));
    EXPECT(first("Sat, Mar 13", HX_HE_WEEKDAY, &x) && x.wday == 6);
    EXPECT(!first("20 minutes", HX_HE_DATE, &x));
}

static void test_addresses_files_numbers(void)
{
    hx_he_mention x;
    ASSERT(first("write to Jürgen <Juergen.Weiss@klinikverbund-nord.de>.", HX_HE_ADDR, &x));
    EXPECT_STR_EQ(x.s, "juergen.weiss@klinikverbund-nord.de");
    ASSERT(first("it is in Notes/Grants/hewlett-budget.md, see", HX_HE_FILE, &x));
    EXPECT_STR_EQ(x.s, "hewlett-budget.md");
    ASSERT(first("open \"Maya swim schedule.txt\"", HX_HE_FILE, &x));
    EXPECT_STR_EQ(x.s, "schedule.txt");
    EXPECT(!first("mail me at a@harbourlight.org", HX_HE_FILE, &x));
    const struct {
        const char *text;
        double v;
    } nums[] = {{"$184,750", 184750}, {"48.500 €", 48500}, {"12 400 people", 12400},
                {"$287.40", 287.40}, {"1,5 km", 1.5}, {"0.125", 0.125}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        ASSERT(first(nums[i].text, HX_HE_NUMBER, &x));
        EXPECT(x.value > nums[i].v - 1e-9 && x.value < nums[i].v + 1e-9);
    }
}

/* ---- answers ---- */

static const char *dentist_task =
    "{\"id\":\"t\",\"request\":\"when is my dentist appointment?\","
    " \"facts\":[{\"text\":[\"dentist\"],\"time\":\"11:30\",\"date\":\"2027-03-12\"}],"
    " \"forbid\":[{\"time\":\"12:30\"}]}";
static const char *dentist_results =
    "{\"events\":[{\"title\":\"Dentist – Dr. Alvarez\",\"start\":\"2027-03-12T11:30:00-05:00\","
    "\"end\":\"2027-03-12T12:15:00-05:00\",\"location\":\"210 W 14th St, Suite 3\"},"
    "{\"title\":\"Lunch with Medisoft\",\"start\":\"2027-03-11T12:30:00-05:00\",\"status\":\"cancelled\"}]}";

static int answer_ok(const char *task_json, const char *answer, const char *sources, char *why, size_t n)
{
    cJSON *task = cJSON_Parse(task_json);
    int ok = task && hx_he_check_answer(task, answer, sources, TODAY, why, n);
    cJSON_Delete(task);
    return ok;
}

static void test_answer_forms(void)
{
    char why[600];
    EXPECT(answer_ok(dentist_task, "Your dentist appointment is on Friday, March 12 at 11:30.", dentist_results, why, sizeof why));
    EXPECT(answer_ok(dentist_task, "Dentist (Dr. Alvarez): Fri 3/12, 11:30 am to 12:15 pm.", dentist_results, why, sizeof why));
    EXPECT(answer_ok(dentist_task, "Friday at 11:30 AM you see the dentist.", dentist_results, why, sizeof why));
    /* "2 pm" is 14:00 */
    const char *review = "{\"facts\":[{\"text\":\"budget review\",\"time\":\"14:00\"}]}";
    const char *review_src = "{\"title\":\"Q2 budget review\",\"start\":\"2027-03-11T14:00:00-05:00\",\"end\":\"2027-03-11T15:30:00-05:00\"}";
    EXPECT(answer_ok(review, "The Q2 budget review is at 2 pm tomorrow.", review_src, why, sizeof why));
    EXPECT(answer_ok(review, "Budget review: 14h00-15h30.", review_src, why, sizeof why));
}

static void test_answer_wrong_facts(void)
{
    char why[600];
    /* an invented time */
    EXPECT(!answer_ok(dentist_task, "Your dentist appointment is on Friday, March 12 at 11:30, then lunch at 13:15.",
                      dentist_results, why, sizeof why));
    EXPECT(strstr(why, "wrong: 13:15") != NULL);
    /* the required time missing, another stated */
    EXPECT(!answer_ok(dentist_task, "The dentist is on March 12 at 10:30.", dentist_results, why, sizeof why));
    EXPECT(strstr(why, "missing") && strstr(why, "10:30"));
    /* an invented date, and a weekday no date of the facts falls on */
    EXPECT(!answer_ok(dentist_task, "Dentist: March 12 at 11:30 (moved from March 4).", dentist_results, why, sizeof why));
    EXPECT(!answer_ok(dentist_task, "Dentist on Monday, March 12 at 11:30.", dentist_results, why, sizeof why));
    /* a forbidden time (the cancelled lunch), though the results hold it */
    EXPECT(!answer_ok(dentist_task, "Dentist on March 12 at 11:30; lunch with Medisoft at 12:30.", dentist_results, why, sizeof why));
    EXPECT(strstr(why, "12:30") != NULL);
    /* an invented address, an invented file */
    const char *mail = "{\"facts\":[{\"addr\":\"dana.okafor@harbourlight.org\"}]}";
    const char *mail_src = "{\"from\":\"Dana Okafor <dana.okafor@harbourlight.org>\",\"subject\":\"Q2 numbers\"}";
    EXPECT(answer_ok(mail, "Dana (dana.okafor@harbourlight.org) sent it.", mail_src, why, sizeof why));
    EXPECT(!answer_ok(mail, "Dana (dana.okafor@harbourlight.org) sent it, cc dana@harbourlight.org.", mail_src, why, sizeof why));
    const char *file = "{\"facts\":[{\"file\":\"Notes/Grants/hewlett-budget.md\"}]}";
    const char *file_src = "{\"path\":\"/x/files/Notes/Grants/hewlett-budget.md\"}";
    EXPECT(answer_ok(file, "It is Notes/Grants/hewlett-budget.md.", file_src, why, sizeof why));
    EXPECT(!answer_ok(file, "It is hewlett-budget.md, with a copy in budget-2027.xlsx.", file_src, why, sizeof why));
}

static void test_answer_extra_and_attribution(void)
{
    char why[600];
    /* an extra fact the results hold is fine */
    EXPECT(answer_ok(dentist_task, "Dentist on Friday March 12, 11:30 to 12:15, at 210 W 14th St.", dentist_results, why, sizeof why));
    /* two events, their times swapped: each time is said of the other */
    const char *two = "{\"facts\":[{\"text\":\"focus block\",\"time\":\"13:00\"},{\"text\":\"budget review\",\"time\":\"14:00\"}]}";
    const char *src = "2027-03-11T13:00 focus block; 2027-03-11T14:00 budget review";
    EXPECT(answer_ok(two, "Tomorrow: the focus block at 13:00 and the budget review at 14:00.", src, why, sizeof why));
    EXPECT(answer_ok(two, "At 1 pm the focus block, at 2 pm the budget review.", src, why, sizeof why));
    EXPECT(!answer_ok(two, "Tomorrow: the focus block at 14:00 and the budget review at 13:00.", src, why, sizeof why));
    /* alternatives and accents */
    const char *names = "{\"facts\":[{\"text\":[\"Jürgen\",\"Juergen\"]},\"Weiß\"]}";
    EXPECT(answer_ok(names, "It was Juergen Weiss.", "", why, sizeof why));
    EXPECT(answer_ok(names, "JÜRGEN WEIß wrote it.", "", why, sizeof why));
    EXPECT(!answer_ok(names, "It was Jurg Weiss.", "", why, sizeof why));
    /* a word is matched whole: "Sam" is not in "Samuel" */
    EXPECT(!answer_ok("{\"facts\":[\"Sam\"]}", "Samuel called.", "", why, sizeof why));
    /* a figure in any of its spellings */
    const char *fig = "{\"facts\":[{\"number\":\"184,750\"}]}";
    EXPECT(answer_ok(fig, "The total is $184 750.", "", why, sizeof why));
    EXPECT(!answer_ok(fig, "The total is $184,570.", "", why, sizeof why));
}

static void test_more_forms(void)
{
    hx_he_text t;
    /* a range of days states both */
    ASSERT(hx_he_scan("du 13 au 17 septembre, then September 20-22", TODAY, &t) == HX_OK);
    int days[6] = {0}, n = 0;
    for (int i = 0; i < t.n; i++)
        if (t.m[i].kind == HX_HE_DATE && n < 6) days[n++] = t.m[i].m * 100 + t.m[i].d;
    hx_he_text_free(&t);
    EXPECT_EQ_INT(n, 4);
    EXPECT(days[0] == 913 && days[1] == 917 && days[2] == 920 && days[3] == 922);
    /* not a range: a day and a time */
    EXPECT(date_is("March 11 - 14:00", 0, 3, 11));
    EXPECT_EQ_INT(minutes_of("March 11 - 14:00"), 840);
    /* Japanese evening hours */
    EXPECT_EQ_INT(minutes_of("日曜の夜7時に"), 1140);
    EXPECT_EQ_INT(minutes_of("朝7時"), 420);
    /* a number after a line break in a tool's JSON result */
    hx_he_mention x;
    ASSERT(first("\"text\":\"beträgt\\n3.842,17 €\"", HX_HE_NUMBER, &x));
    EXPECT(x.value > 3842.16 && x.value < 3842.18);
    /* a CSV field: 940,11 may be 940 */
    ASSERT(first("mixed,940,11", HX_HE_NUMBER, &x));
    EXPECT(x.value2 > 939.9 && x.value2 < 940.1);
    /* a clock without am/pm may be a 12-hour one; a leading zero is not */
    char why[300];
    EXPECT(answer_ok("{\"facts\":[{\"time\":\"15:00\"}]}", "The call is at 3:00.", "", why, sizeof why));
    EXPECT(!answer_ok("{\"facts\":[{\"time\":\"15:00\"}]}", "The call is at 03:00.", "", why, sizeof why));
}

/* ---- the state and the calls, on a world written by hand ---- */

static char g_home[96];

static const char *home(void)
{
    if (!g_home[0]) {
        snprintf(g_home, sizeof g_home, "%s/hx_handcheck_XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(g_home)) g_home[0] = 0;
    }
    return g_home;
}

static cJSON *call(hx_dg_world *dw, const char *name, const char *args_json)
{
    cJSON *args = cJSON_Parse(args_json), *res = NULL;
    hx_err err = {0};
    int rc = hx_tools_call(dw->reg, name, args, &res, &err);
    cJSON_Delete(args);
    if (rc) printf("# %s: %s\n", name, err.msg);
    return res;
}

/* The state check of task_json after the calls of a script (name, args
 * pairs, NULL-ended) in a fresh newyork world; why gets its reason. */
static int state_after(const char *task_json, const char *const *script, char *why, size_t n)
{
    hx_dg_world dw;
    hx_err err = {0};
    char w[160];
    snprintf(w, sizeof w, "%s/world", home());
    if (hx_he_world_open("bench/handeval", "newyork", w, &dw, &err)) {
        snprintf(why, n, "open: %s", err.msg);
        hx_dg_world_close(&dw);
        return -1;
    }
    cJSON *task = cJSON_Parse(task_json), *before = hx_he_snapshot(&dw);
    for (int i = 0; script && script[i]; i += 2) {
        if (!strcmp(script[i], "rename")) { /* a Maildir move, as a client marks a message read */
            char a[400], b[400];
            snprintf(a, sizeof a, "%s/config/mail/new/%s", w, script[i + 1]);
            snprintf(b, sizeof b, "%s/config/mail/cur/%s:2,S", w, script[i + 1]);
            if (rename(a, b)) printf("# rename %s failed\n", a);
        } else if (!strcmp(script[i], "touch")) { /* a stray write */
            char a[400];
            snprintf(a, sizeof a, "%s/config/%s", w, script[i + 1]);
            FILE *f = fopen(a, "a");
            if (f) fputs("X-STRAY:1\n", f), fclose(f);
        } else
            cJSON_Delete(call(&dw, script[i], script[i + 1]));
    }
    int ok = hx_he_check_state(task, before, &dw, why, n);
    cJSON_Delete(task);
    cJSON_Delete(before);
    hx_dg_world_close(&dw);
    hx_world_rmtree(w, NULL);
    return ok;
}

static const char *const schedule_task =
    "{\"state\":{\"events\":[{\"title\":[\"Q2\",\"numbers\"],\"start\":[[\"2027-03-11T09:00\",\"2027-03-11T11:30\"]],"
    "\"minutes\":30,\"attendees\":[\"dana.okafor@harbourlight.org\"]}],"
    "\"outbox\":[{\"to\":[\"dana.okafor@harbourlight.org\"],\"invite\":true}]}}";

static void test_state_events(void)
{
    char why[400];
    const char *good[] = {"calendar.create_event",
                          "{\"title\":\"Q2 numbers\",\"start\":\"2027-03-11T10:00\",\"duration_minutes\":30,"
                          "\"attendees\":[\"dana.okafor@harbourlight.org\"]}", NULL};
    EXPECT_EQ_INT(state_after(schedule_task, good, why, sizeof why), 1);
    /* the control's flaws, one at a time */
    const char *late[] = {"calendar.create_event",
                          "{\"title\":\"Q2 numbers\",\"start\":\"2027-03-11T13:00\",\"duration_minutes\":30,"
                          "\"attendees\":[\"dana.okafor@harbourlight.org\"]}", NULL};
    EXPECT_EQ_INT(state_after(schedule_task, late, why, sizeof why), 0);
    EXPECT(strstr(why, "not at an asked time") != NULL);
    const char *who[] = {"calendar.create_event",
                         "{\"title\":\"Q2 numbers\",\"start\":\"2027-03-11T10:00\",\"duration_minutes\":30,"
                         "\"attendees\":[\"tomas.ferreira@harbourlight.org\"]}", NULL};
    EXPECT_EQ_INT(state_after(schedule_task, who, why, sizeof why), 0);
    EXPECT(strstr(why, "attendees") != NULL);
    const char *lone[] = {"calendar.create_event",
                          "{\"title\":\"Q2 numbers\",\"start\":\"2027-03-11T10:00\",\"duration_minutes\":30}", NULL};
    EXPECT_EQ_INT(state_after(schedule_task, lone, why, sizeof why), 0);
    const char *two[] = {good[0], good[1], "calendar.create_event",
                         "{\"title\":\"Lunch\",\"start\":\"2027-03-11T12:00\",\"duration_minutes\":60}", NULL};
    EXPECT_EQ_INT(state_after(schedule_task, two, why, sizeof why), 0);
    EXPECT(strstr(why, "2 made where 1 was asked") != NULL);
    EXPECT_EQ_INT(state_after(schedule_task, NULL, why, sizeof why), 0);
    EXPECT(strstr(why, "none was made") != NULL);
}

static void test_state_nothing_written(void)
{
    char why[400];
    /* reads write nothing; a message marked read is no write */
    const char *reads[] = {"calendar.list_events", "{\"range\":\"today\"}", "mail.read",
                           "{\"id\":\"1804518725.M1P4411.priya-mbp\"}", "rename", "1804518725.M1P4411.priya-mbp", NULL};
    EXPECT_EQ_INT(state_after("{}", reads, why, sizeof why), 1);
    /* a mail, an event, a memory or a changed file where none was asked */
    const char *mail[] = {"mail.send", "{\"to\":\"dana.okafor@harbourlight.org\",\"subject\":\"x\",\"body\":\"y\"}", NULL};
    EXPECT_EQ_INT(state_after("{}", mail, why, sizeof why), 0);
    EXPECT(strstr(why, "mail queued") != NULL);
    const char *mem[] = {"memory.remember", "{\"kind\":\"fact\",\"text\":\"Dana likes tea\"}", NULL};
    EXPECT_EQ_INT(state_after("{}", mem, why, sizeof why), 0);
    EXPECT(strstr(why, "memories") != NULL);
    const char *stray[] = {"touch", "calendars/work/dentist.ics", NULL};
    EXPECT_EQ_INT(state_after("{}", stray, why, sizeof why), 0);
    EXPECT(strstr(why, "changed calendars/work/dentist.ics") != NULL);
    /* the asked memory and mail pass; the wrong words do not */
    EXPECT_EQ_INT(state_after("{\"state\":{\"memories\":[{\"has\":[\"Dana\",\"tea\"]}]}}", mem, why, sizeof why), 1);
    EXPECT_EQ_INT(state_after("{\"state\":{\"memories\":[{\"has\":[\"Dana\",\"coffee\"]}]}}", mem, why, sizeof why), 0);
    const char *reply[] = {"mail.reply", "{\"id\":\"1804611720.M7P4411.priya-mbp\",\"body\":\"I'll ask Dana.\"}", NULL};
    EXPECT_EQ_INT(state_after("{\"state\":{\"outbox\":[{\"to\":[\"kwame.mensah@harbourlight.org\"],\"has\":[\"Dana\"],"
                              "\"invite\":false,\"in_reply_to\":\"sv-logistics-3@harbourlight.org\"}]}}", reply, why, sizeof why), 1);
    EXPECT_EQ_INT(state_after("{\"state\":{\"outbox\":[{\"to\":[\"kwame.mensah@harbourlight.org\"],\"has\":[[\"Tomás\",\"Sam\"]]}]}}",
                              reply, why, sizeof why), 0);
}

static void test_calls(void)
{
    char why[400];
    cJSON *calls = cJSON_Parse("[{\"name\":\"mail.search\",\"arguments\":{\"from\":\"Dana Okafor\"},\"status\":\"ok\","
                               "\"result\":\"{\\\"subject\\\":\\\"Q2 budget numbers\\\"}\"},"
                               "{\"name\":\"mail.send\",\"arguments\":{\"to\":\"x@y.org\"},\"status\":\"refused\",\"result\":\"\"}]");
    cJSON *want = cJSON_Parse("{\"calls\":[{\"name\":[\"mail.search\",\"mail.read\"],\"args\":{\"from\":\"dana\"},"
                              "\"found\":[\"budget numbers\"]},{\"name\":\"mail.send\",\"status\":\"refused\"}]}");
    EXPECT_EQ_INT(hx_he_check_calls(want, calls, why, sizeof why), 1);
    cJSON *wrong_found = cJSON_Parse("{\"calls\":[{\"name\":\"mail.search\",\"found\":[\"roster\"]}]}");
    cJSON *wrong_status = cJSON_Parse("{\"calls\":[{\"name\":\"mail.send\"}]}");
    cJSON *wrong_args = cJSON_Parse("{\"calls\":[{\"name\":\"mail.search\",\"args\":{\"from\":\"kwame\"}}]}");
    EXPECT_EQ_INT(hx_he_check_calls(wrong_found, calls, why, sizeof why), 0);
    EXPECT_EQ_INT(hx_he_check_calls(wrong_status, calls, why, sizeof why), 0);
    EXPECT_EQ_INT(hx_he_check_calls(wrong_args, calls, why, sizeof why), 0);
    EXPECT(strstr(why, "kwame") != NULL);
    cJSON_Delete(calls), cJSON_Delete(want), cJSON_Delete(wrong_found), cJSON_Delete(wrong_status), cJSON_Delete(wrong_args);
}

/* ---- the evaluation's own data ---- */

static cJSON *all_tasks(void)
{
    char *text = NULL;
    size_t len = 0;
    if (hx_read_file("bench/handeval/tasks.jsonl", 1 << 24, &text, &len, NULL)) return NULL;
    cJSON *all = cJSON_CreateArray();
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        cJSON *t = cJSON_Parse(l);
        if (t) cJSON_AddItemToArray(all, t);
        else cJSON_AddItemToArray(all, cJSON_CreateString(l)); /* counted as broken below */
    }
    free(text);
    return all;
}

/* Every task's ideal calls, straight through the tools, leave the state
 * it expects and reach the facts its answer must state: the tasks are
 * consistent with their worlds, and the tools can do them. */
static void test_ideal_runs(void)
{
    cJSON *all = all_tasks(), *t;
    ASSERT(all);
    char w[160], worlds[8][16] = {{0}};
    int n = 0, pass = 0, facts = 0, found = 0, n_worlds = 0;
    snprintf(w, sizeof w, "%s/ideal", home());
    cJSON_ArrayForEach(t, all)
    {
        hx_he_outcome o;
        hx_err err = {0};
        const char *world = cJSON_GetStringValue(cJSON_GetObjectItem(t, "world"));
        n++;
        if (!world || hx_he_run_ideal("bench/handeval", t, w, &o, NULL, &err)) {
            printf("# task %d: %s\n", n, world ? err.msg : "not a task");
            continue;
        }
        int k = 0;
        while (k < n_worlds && strcmp(worlds[k], world)) k++;
        if (k == n_worlds && k < 8) snprintf(worlds[n_worlds++], sizeof worlds[0], "%s", world);
        pass += o.success, facts += o.n_facts, found += o.n_found;
        if (!o.success)
            printf("# %s: %s\n", cJSON_GetStringValue(cJSON_GetObjectItem(t, "id")),
                   !o.calls_ok ? o.why_calls : !o.state_ok ? o.why_state : o.why_answer);
    }
    printf("# %d tasks over %d worlds, %d pass with the ideal calls; %d of %d facts reached\n", n, n_worlds, pass,
           found, facts);
    EXPECT(n >= 200);
    EXPECT(n_worlds >= 3);
    EXPECT_EQ_INT(pass, n);
    EXPECT(facts > n);
    EXPECT_EQ_INT(found, facts);
    cJSON_Delete(all);
}

/* Nothing that makes training data or trains reads the evaluation, and
 * the chat trainer refuses its lines (they are no conversations). */
static void test_never_trained_on(void)
{
    const char *const sources[] = {"scripts/tiny-model.sh", "scripts/eval-samples.sh", "sim/datagen.c",
                                   "sim/world.c", "sim/dgrun.c", "sim/oracle.c", "nightly/nightly_agent.c",
                                   "nightly/distill.c", "sim/persona.c", "nightly/chatdata.c", "cli/cmd_train.c",
                                   "cli/cmd_nightly.c", "cli/cmd_datagen.c", "nightly/nightly.c", "lora/trainer.c",
                                   "lora/loop.c", "lora/store.c"};
    for (size_t i = 0; i < sizeof sources / sizeof *sources; i++) {
        char *text = NULL;
        size_t len = 0;
        /* a source moved or renamed must be named here again, not skipped */
        EXPECT(hx_read_file(sources[i], 1 << 24, &text, &len, NULL) == HX_OK);
        if (!text) {
            printf("# %s: not found\n", sources[i]);
            continue;
        }
        if (strstr(text, "handeval")) printf("# %s names the hand-written evaluation\n", sources[i]);
        EXPECT(strstr(text, "handeval") == NULL);
        free(text);
    }
    char *text = NULL;
    size_t len = 0;
    ASSERT(hx_read_file("bench/handeval/tasks.jsonl", 1 << 24, &text, &len, NULL) == HX_OK);
    hx_err err = {0};
    EXPECT_EQ_INT(hx_chat_each_buf("tasks.jsonl", text, len, HX_TPL_COMPACT, NULL, NULL, &err), HX_ERR_FORMAT);
    free(text);
}

int main(void)
{
    RUN(test_fold);
    RUN(test_times);
    RUN(test_dates);
    RUN(test_addresses_files_numbers);
    RUN(test_answer_forms);
    RUN(test_answer_wrong_facts);
    RUN(test_answer_extra_and_attribution);
    RUN(test_more_forms);
    RUN(test_state_events);
    RUN(test_state_nothing_written);
    RUN(test_calls);
    RUN(test_ideal_runs);
    RUN(test_never_trained_on);
    if (g_home[0]) hx_world_rmtree(g_home, NULL);
    return test_summary();
}
