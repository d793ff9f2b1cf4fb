/* test_when.c: the time-expression parser against a table of expressions
 * and expected ranges at fixed "now"s, DST days in Paris and New York. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tools/tools.h"

/* 2026-12-01 is a Tuesday. */
#define NOW_PARIS "2026-12-01T09:00:00+01:00"

typedef struct row {
    const char *now, *tz, *expr;
    const char *start, *end; /* end NULL: a point */
    int whole_days;
} row;

static const row rows[] = {
    /* days and weeks */
    {NOW_PARIS, "Europe/Paris", "today", "2026-12-01T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "tomorrow", "2026-12-02T00:00:00+01:00", "2026-12-03T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Yesterday", "2026-11-30T00:00:00+01:00", "2026-12-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "this week", "2026-11-30T00:00:00+01:00", "2026-12-07T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "next week", "2026-12-07T00:00:00+01:00", "2026-12-14T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "last week", "2026-11-23T00:00:00+01:00", "2026-11-30T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "this weekend", "2026-12-05T00:00:00+01:00", "2026-12-07T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "next month", "2027-01-01T00:00:00+01:00", "2027-02-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Tuesday", "2026-12-01T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "next Tuesday", "2026-12-08T00:00:00+01:00", "2026-12-09T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "on wed", "2026-12-02T00:00:00+01:00", "2026-12-03T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "last Friday", "2026-11-27T00:00:00+01:00", "2026-11-28T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "2026-12-03", "2026-12-03T00:00:00+01:00", "2026-12-04T00:00:00+01:00", 1},
    /* a date without a year: the nearest one, before or after today */
    {NOW_PARIS, "Europe/Paris", "Nov 3", "2026-11-03T00:00:00+01:00", "2026-11-04T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Nov 27", "2026-11-27T00:00:00+01:00", "2026-11-28T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Jun 2", "2026-06-02T00:00:00+02:00", "2026-06-03T00:00:00+02:00", 1},
    {NOW_PARIS, "Europe/Paris", "Jun 1", "2027-06-01T00:00:00+02:00", "2027-06-02T00:00:00+02:00", 1},
    {NOW_PARIS, "Europe/Paris", "Feb 29", "2028-02-29T00:00:00+01:00", "2028-03-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Dec 1", "2026-12-01T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "3rd of January", "2027-01-03T00:00:00+01:00", "2027-01-04T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Dec 3, 2025", "2025-12-03T00:00:00+01:00", "2025-12-04T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "in 3 days", "2026-12-04T00:00:00+01:00", "2026-12-05T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "from Monday to Wednesday", "2026-12-07T00:00:00+01:00", "2026-12-10T00:00:00+01:00", 1},
    /* parts of days */
    {NOW_PARIS, "Europe/Paris", "next Tuesday afternoon", "2026-12-08T12:00:00+01:00", "2026-12-08T17:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "Monday morning", "2026-12-07T08:00:00+01:00", "2026-12-07T12:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "tonight", "2026-12-01T18:00:00+01:00", "2026-12-02T00:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "this afternoon", "2026-12-01T12:00:00+01:00", "2026-12-01T17:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "tomorrow evening", "2026-12-02T17:00:00+01:00", "2026-12-02T21:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "end of day", "2026-12-01T17:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "end of the week", "2026-12-04T17:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "noon tomorrow", "2026-12-02T12:00:00+01:00", NULL, 0},
    /* times */
    {NOW_PARIS, "Europe/Paris", "Dec 3 at 2pm", "2026-12-03T14:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "December 3rd 14:30", "2026-12-03T14:30:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "in two hours", "2026-12-01T11:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "in 30 minutes", "2026-12-01T09:30:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "in half an hour", "2026-12-01T09:30:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "at 3pm", "2026-12-01T15:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "tomorrow at 3", "2026-12-02T15:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "at 9:30 a.m.", "2026-12-01T09:30:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "14h30", "2026-12-01T14:30:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "Friday afternoon at 3", "2026-12-04T15:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "now", "2026-12-01T09:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "2026-12-03T14:00:00Z", "2026-12-03T15:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "2026-12-03T14:00:00-05:00", "2026-12-03T20:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "2026-12-03T14:00", "2026-12-03T14:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "2026-12-03 14:00:30.25+0100", "2026-12-03T14:00:30+01:00", NULL, 0},
    /* ranges */
    {NOW_PARIS, "Europe/Paris", "from 2pm to 4pm", "2026-12-01T14:00:00+01:00", "2026-12-01T16:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "between 9 and 11 tomorrow", "2026-12-02T09:00:00+01:00", "2026-12-02T11:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "from 11 to 1pm", "2026-12-01T11:00:00+01:00", "2026-12-01T13:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "Dec 3 2-4pm", "2026-12-03T14:00:00+01:00", "2026-12-03T16:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "tomorrow at 2pm for an hour", "2026-12-02T14:00:00+01:00", "2026-12-02T15:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "after 3pm tomorrow", "2026-12-02T15:00:00+01:00", "2026-12-03T00:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "before noon", "2026-12-01T00:00:00+01:00", "2026-12-01T12:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "2026-12-03T10:00Z to 2026-12-03T11:00Z", "2026-12-03T11:00:00+01:00", "2026-12-03T12:00:00+01:00", 0},
    /* DST in Paris: 2026-03-29 has 23 hours, 2026-10-25 has 25 */
    {"2026-03-28T10:00:00+01:00", "Europe/Paris", "tomorrow", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 1},
    {"2026-03-28T10:00:00+01:00", "Europe/Paris", "tomorrow at 3pm", "2026-03-29T15:00:00+02:00", NULL, 0},
    {"2026-03-28T10:00:00+01:00", "Europe/Paris", "in 24 hours", "2026-03-29T11:00:00+02:00", NULL, 0},
    {"2026-10-24T10:00:00+02:00", "Europe/Paris", "tomorrow", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 1},
    {"2026-10-24T10:00:00+02:00", "Europe/Paris", "tomorrow morning", "2026-10-25T08:00:00+01:00", "2026-10-25T12:00:00+01:00", 0},
    /* DST in New York: 2026-03-08 and 2026-11-01 */
    {"2026-03-07T12:00:00-05:00", "America/New_York", "tomorrow", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 1},
    {"2026-03-08T01:30:00-05:00", "America/New_York", "in 1 hour", "2026-03-08T03:30:00-04:00", NULL, 0},
    {"2026-10-31T12:00:00-04:00", "America/New_York", "tomorrow at 5pm", "2026-11-01T17:00:00-05:00", NULL, 0},
    {"2026-10-31T12:00:00-04:00", "America/New_York", "this week", "2026-10-26T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 1},
    {"2026-10-31T12:00:00-04:00", "America/New_York", "today", "2026-10-31T00:00:00-04:00", "2026-11-01T00:00:00-04:00", 1},
    /* what people say: periods counted from today */
    {NOW_PARIS, "Europe/Paris", "next 7 days", "2026-12-01T00:00:00+01:00", "2026-12-08T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "the next seven days", "2026-12-01T00:00:00+01:00", "2026-12-08T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "over the next 2 weeks", "2026-12-01T00:00:00+01:00", "2026-12-15T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "for the next 3 days", "2026-12-01T00:00:00+01:00", "2026-12-04T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "next 3 months", "2026-12-01T00:00:00+01:00", "2027-03-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "past 7 days", "2026-11-25T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "in the last 2 weeks", "2026-11-18T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "the past week", "2026-11-25T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "within the next 2 hours", "2026-12-01T09:00:00+01:00", "2026-12-01T11:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "past 30 minutes", "2026-12-01T08:30:00+01:00", "2026-12-01T09:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "3 days ago", "2026-11-28T00:00:00+01:00", "2026-11-29T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "a week ago", "2026-11-24T00:00:00+01:00", "2026-11-25T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "2 hours ago", "2026-12-01T07:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "the day after tomorrow", "2026-12-03T00:00:00+01:00", "2026-12-04T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "day before yesterday", "2026-11-29T00:00:00+01:00", "2026-11-30T00:00:00+01:00", 1},
    /* weekdays, before and after today */
    {NOW_PARIS, "Europe/Paris", "this Thursday", "2026-12-03T00:00:00+01:00", "2026-12-04T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "this coming Monday", "2026-12-07T00:00:00+01:00", "2026-12-08T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "this past Friday", "2026-11-27T00:00:00+01:00", "2026-11-28T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "previous Tuesday", "2026-11-24T00:00:00+01:00", "2026-11-25T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Monday last week", "2026-11-23T00:00:00+01:00", "2026-11-24T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Friday of next week", "2026-12-11T00:00:00+01:00", "2026-12-12T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Wednesday this week", "2026-12-02T00:00:00+01:00", "2026-12-03T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "since Monday", "2026-11-30T00:00:00+01:00", "2026-12-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "since Tuesday", "2026-12-01T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Tuesday, December 8", "2026-12-08T00:00:00+01:00", "2026-12-09T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Dec 8, Tuesday", "2026-12-08T00:00:00+01:00", "2026-12-09T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Wed 2026-12-02 at 10", "2026-12-02T10:00:00+01:00", NULL, 0},
    /* days of the month, months */
    {NOW_PARIS, "Europe/Paris", "the 24th", "2026-12-24T00:00:00+01:00", "2026-12-25T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "on the 1st", "2026-12-01T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "on the 24th at 3pm", "2026-12-24T15:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "since the 24th", "2026-11-24T00:00:00+01:00", "2026-11-25T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "on Thursday the 24th", "2026-12-24T00:00:00+01:00", "2026-12-25T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "the 24th, Thursday", "2026-12-24T00:00:00+01:00", "2026-12-25T00:00:00+01:00", 1},
    {"2027-01-31T09:00:00+01:00", "Europe/Paris", "the 30th", "2027-03-30T00:00:00+02:00", "2027-03-31T00:00:00+02:00", 1},
    {NOW_PARIS, "Europe/Paris", "March", "2027-03-01T00:00:00+01:00", "2027-04-01T00:00:00+02:00", 1},
    {NOW_PARIS, "Europe/Paris", "in October", "2026-10-01T00:00:00+02:00", "2026-11-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "December", "2026-12-01T00:00:00+01:00", "2027-01-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "March 2028", "2028-03-01T00:00:00+01:00", "2028-04-01T00:00:00+02:00", 1},
    {NOW_PARIS, "Europe/Paris", "next March", "2027-03-01T00:00:00+01:00", "2027-04-01T00:00:00+02:00", 1},
    {NOW_PARIS, "Europe/Paris", "last March", "2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00", 1},
    {NOW_PARIS, "Europe/Paris", "this year", "2026-01-01T00:00:00+01:00", "2027-01-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "end of the month", "2026-12-31T00:00:00+01:00", "2027-01-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "end of next month", "2027-01-31T00:00:00+01:00", "2027-02-01T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "until the end of the year", "2026-12-01T09:00:00+01:00", "2027-01-01T00:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "till Friday", "2026-12-01T09:00:00+01:00", "2026-12-05T00:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "beginning of next month", "2027-01-01T00:00:00+01:00", "2027-01-02T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "end of next week", "2026-12-11T17:00:00+01:00", NULL, 0},
    {NOW_PARIS, "Europe/Paris", "from now to the end of the month", "2026-12-01T09:00:00+01:00", "2027-01-01T00:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "the weekend", "2026-12-05T00:00:00+01:00", "2026-12-07T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "over the weekend", "2026-12-05T00:00:00+01:00", "2026-12-07T00:00:00+01:00", 1},
    {"2026-12-06T11:00:00+01:00", "Europe/Paris", "weekend", "2026-12-05T00:00:00+01:00", "2026-12-07T00:00:00+01:00", 1},
    /* ranges of days: never a day and an hour */
    {NOW_PARIS, "Europe/Paris", "March 16-18", "2027-03-16T00:00:00+01:00", "2027-03-19T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "March 16 - 18, 2028", "2028-03-16T00:00:00+01:00", "2028-03-19T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Dec 3 to 5", "2026-12-03T00:00:00+01:00", "2026-12-06T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "between March 16th and 18th", "2027-03-16T00:00:00+01:00", "2027-03-19T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "16-18 March", "2027-03-16T00:00:00+01:00", "2027-03-19T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "16th to 18th of March 2028", "2028-03-16T00:00:00+01:00", "2028-03-19T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Dec 30 - Jan 2", "2026-12-30T00:00:00+01:00", "2027-01-03T00:00:00+01:00", 1},
    {NOW_PARIS, "Europe/Paris", "Dec 3 from 2 to 4", "2026-12-03T14:00:00+01:00", "2026-12-03T16:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "March 16 - 18:00", "2027-03-16T00:00:00+01:00", "2027-03-16T18:00:00+01:00", 0},
    /* parts of the day in words */
    {NOW_PARIS, "Europe/Paris", "in the morning", "2026-12-01T08:00:00+01:00", "2026-12-01T12:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "tomorrow in the afternoon", "2026-12-02T12:00:00+01:00", "2026-12-02T17:00:00+01:00", 0},
    {NOW_PARIS, "Europe/Paris", "later today", "2026-12-01T00:00:00+01:00", "2026-12-02T00:00:00+01:00", 1},
    /* periods across a DST change, Paris (Mar 29, Oct 25) and New York (Mar 8, Nov 1) */
    {"2026-03-25T10:00:00+01:00", "Europe/Paris", "next 7 days", "2026-03-25T00:00:00+01:00", "2026-04-01T00:00:00+02:00", 1},
    {"2026-03-25T10:00:00+01:00", "Europe/Paris", "this weekend", "2026-03-28T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 1},
    {"2026-03-25T10:00:00+01:00", "Europe/Paris", "March 28-30", "2026-03-28T00:00:00+01:00", "2026-03-31T00:00:00+02:00", 1},
    {"2026-03-25T10:00:00+01:00", "Europe/Paris", "end of the month", "2026-03-31T00:00:00+02:00", "2026-04-01T00:00:00+02:00", 1},
    {"2026-10-27T10:00:00+01:00", "Europe/Paris", "past 7 days", "2026-10-21T00:00:00+02:00", "2026-10-28T00:00:00+01:00", 1},
    {"2026-10-27T10:00:00+01:00", "Europe/Paris", "Sunday last week", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 1},
    {"2026-03-06T12:00:00-05:00", "America/New_York", "next 3 days", "2026-03-06T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 1},
    {"2026-03-07T12:00:00-05:00", "America/New_York", "next 24 hours", "2026-03-07T12:00:00-05:00", "2026-03-08T13:00:00-04:00", 0},
    {"2026-11-03T09:00:00-05:00", "America/New_York", "since Saturday", "2026-10-31T00:00:00-04:00", "2026-11-01T00:00:00-04:00", 1},
    {"2026-11-03T09:00:00-05:00", "America/New_York", "last 3 days", "2026-11-01T00:00:00-04:00", "2026-11-04T00:00:00-05:00", 1},
    /* UTC */
    {NOW_PARIS, "UTC", "today", "2026-12-01T00:00:00+00:00", "2026-12-02T00:00:00+00:00", 1},
};

static int64_t now_of(const char *iso)
{
    hx_when_range r;
    hx_err err;
    if (hx_when_parse(iso, 0, "UTC", &r, &err)) return -1;
    return r.start;
}

static void test_table(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *w = &rows[i];
        hx_when_range r;
        hx_err err = {0};
        char a[40], b[40];
        int rc = hx_when_parse(w->expr, now_of(w->now), w->tz, &r, &err);
        if (rc) {
            test_fail_at(__FILE__, __LINE__, "'%s': %s", w->expr, err.msg);
            continue;
        }
        hx_when_format(r.start, w->tz, 0, a, sizeof a);
        hx_when_format(r.end, w->tz, 0, b, sizeof b);
        const char *want_end = w->end ? w->end : w->start;
        if (strcmp(a, w->start) || strcmp(b, want_end) ||
            r.is_point != (w->end == NULL) || r.whole_days != w->whole_days)
            test_fail_at(__FILE__, __LINE__,
                         "'%s' at %s: got %s..%s point=%d days=%d, want "
                         "%s..%s",
                         w->expr, w->now, a, b, r.is_point, r.whole_days,
                         w->start, want_end);
    }
}

static void expect_error(const char *expr, const char *tz, int rc_want,
                         const char *needle)
{
    hx_when_range r;
    hx_err err = {0};
    int rc = hx_when_parse(expr, now_of(NOW_PARIS), tz, &r, &err);
    if (rc != rc_want || !strstr(err.msg, needle))
        test_fail_at(__FILE__, __LINE__, "'%s': rc %d msg '%s', want %d '%s'",
                     expr, rc, err.msg, rc_want, needle);
}

/* A day read whole that is not: refused with what is wrong, the
 * expression quoted, not as unreadable. */
static void test_no_such_day(void)
{
    static const struct {
        const char *expr, *want;
    } cases[] = {
        {"Feb 30",
         "there is no February 30: February has 28 days, 29 in a leap year"},
        {"2026-02-30",
         "there is no February 30, 2026: February 2026 has 28 days"},
        {"the 32nd",
         "there is no day 32 in a month"},
        {"March 30-32",
         "there is no March 32, 2027: March 2027 has 31 days"},
        {"Feb 27-30, 2027",
         "there is no February 30, 2027: February 2027 has 28 days"},
        {"on april 31",
         "there is no April 31: April has 30 days (the time expression 'on april 31')"},
        {"2027-02-29 at 10:00",
         "there is no February 29, 2027: February 2027 has 28 days"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(cases[i].expr, "Europe/Paris", HX_ERR_RANGE, cases[i].want);
    /* a word it cannot read after it still comes first */
    expect_error("april 31 blorp", "Europe/Paris", HX_ERR_FORMAT, "'blorp'");
    expect_error("2027-13-01", "Europe/Paris", HX_ERR_FORMAT, "the month of the ISO date");
}

static void test_errors(void)
{
    expect_error("next blursday", "Europe/Paris", HX_ERR_FORMAT, "'blursday'");
    expect_error("", "Europe/Paris", HX_ERR_FORMAT, "empty");
    expect_error("from 4pm to 2pm", "Europe/Paris", HX_ERR_FORMAT, "ends before");
    expect_error("at 13pm", "Europe/Paris", HX_ERR_FORMAT, "out of range");
    expect_error("tomorrow today", "Europe/Paris", HX_ERR_FORMAT, "two different days");
    expect_error("3", "Europe/Paris", HX_ERR_FORMAT, "the number 3");
    expect_error("tomorrow \x01", "Europe/Paris", HX_ERR_FORMAT, "character");
    expect_error("from 2pm to", "Europe/Paris", HX_ERR_FORMAT, "both ends");
    expect_error("Tuesday, December 9", "Europe/Paris", HX_ERR_FORMAT, "2026-12-09 is a Wednesday");
    expect_error("Tuesday the 9th", "Europe/Paris", HX_ERR_FORMAT, "2026-12-09 is a Wednesday");
    expect_error("next 0 days", "Europe/Paris", HX_ERR_FORMAT, "length of the period");
    expect_error("March 18-16", "Europe/Paris", HX_ERR_FORMAT, "ends before");
    expect_error("5 blursdays ago", "Europe/Paris", HX_ERR_FORMAT, "the number 5");
    expect_error("tomorrow", "Mars/Olympus_Mons", HX_ERR_NOTFOUND, "Mars/Olympus_Mons");
    expect_error("tomorrow", "../../etc/passwd", HX_ERR_NOTFOUND, "unknown time zone");
    char big[400];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    expect_error(big, "UTC", HX_ERR_FORMAT, "too long");
}

static void test_format_and_offset(void)
{
    char buf[40];
    int64_t t = now_of(NOW_PARIS);
    EXPECT_EQ_INT(hx_when_format(t, "America/New_York", 0, buf, sizeof buf), 25);
    EXPECT_STR_EQ(buf, "2026-12-01T03:00:00-05:00");
    EXPECT_EQ_INT(hx_when_format(t, "Asia/Kolkata", 1, buf, sizeof buf), 10);
    EXPECT_STR_EQ(buf, "2026-12-01");
    EXPECT_EQ_INT(hx_when_utc_offset("Asia/Kolkata", t), 19800);
    EXPECT_EQ_INT(hx_when_format(t, "No/Such", 0, buf, sizeof buf), -1);
    EXPECT_STR_EQ(hx_when_weekday(t, "Europe/Paris"), "Tuesday");
    EXPECT_STR_EQ(hx_when_weekday(t - 10 * 3600, "America/New_York"), "Monday"); /* 2026-11-30 17:00 */
    EXPECT_STR_EQ(hx_when_weekday(t, "No/Such"), "");
    EXPECT(hx_when_tz_known("Europe/Paris"));
    EXPECT(!hx_when_tz_known("Europe/Nowhere"));
}

/* HEARTH_NOW feeds hx_now(), which callers pass as `now`. */
static void test_hearth_now(void)
{
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    hx_when_range r;
    hx_err err;
    ASSERT(hx_when_parse("in 2 hours", hx_now(NULL), "Europe/Paris", &r, &err) == HX_OK);
    char buf[40];
    hx_when_format(r.start, "Europe/Paris", 0, buf, sizeof buf);
    EXPECT_STR_EQ(buf, "2026-12-01T11:00:00+01:00");
}

int main(void)
{
    RUN(test_table);
    RUN(test_errors);
    RUN(test_no_such_day);
    RUN(test_format_and_offset);
    RUN(test_hearth_now);
    return test_summary();
}
