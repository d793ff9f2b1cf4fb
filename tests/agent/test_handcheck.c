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

#include "agent/handeval.h"
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

int main(void)
{
    RUN(test_fold);
    RUN(test_times);
    RUN(test_dates);
    RUN(test_addresses_files_numbers);
    RUN(test_answer_forms);
    RUN(test_answer_wrong_facts);
    RUN(test_answer_extra_and_attribution);
    return test_summary();
}
