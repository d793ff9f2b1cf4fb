/* when.c: a deterministic reader of time expressions ("tomorrow", "next
 * Tuesday afternoon", "Dec 3 at 2pm", "in two hours", ISO 8601) in the
 * user's time zone, giving a point or a [start, end) range.
 *
 * The choices, so that results are predictable:
 * - A day ("today", "Dec 3", "2026-12-03", "Monday") is local midnight to
 *   the next local midnight (23 or 25 hours on DST days); whole_days = 1.
 * - "this week" / "next week" / "last week": Monday 00:00 to the Monday
 *   after (ISO weeks); "this/next weekend", "the weekend", "weekend":
 *   Saturday 00:00 to Monday 00:00 (on a Sunday, the weekend under way);
 *   "this/next/last month|year": the 1st to the 1st after; "March",
 *   "in March", "March 2027": that month, without a year the nearest one
 *   (the current month included; "next March" is the first after this
 *   month, "last March" the last before it).
 * - "Tuesday", "on Tuesday", "this Tuesday", "this coming Tuesday": the
 *   next Tuesday, today included; "next Tuesday": the first Tuesday
 *   strictly after today; "last Tuesday", "this past Tuesday", "previous
 *   Tuesday": the last one strictly before today; "Tuesday next week",
 *   "Tuesday of last week": that week's. "the 24th", "on the 3rd": the
 *   next day of that number, today included. After "since" ("since
 *   Monday", "since the 24th") both are the last one, today included.
 * - A weekday with a date ("Tuesday, Dec 8") must be the date's weekday.
 * - "next 7 days", "the next 2 weeks", "next 3 months": that many whole
 *   days from today on, today counted; "past 7 days", "last 2 weeks",
 *   "the past week": that many up to today, today counted; "next 2
 *   hours" / "past 30 minutes": from now on, or up to now.
 * - "3 days ago", "a week ago": that day; "2 hours ago": that moment.
 * - "March 16-18", "Dec 3 to 5", "16-18 March", "between March 16 and
 *   18": the whole days, both ends included; a number after the
 *   connector that is no clock time ("Dec 3 2-4pm" is) is a day.
 * - Parts of a day: morning 08:00-12:00, afternoon 12:00-17:00, evening
 *   17:00-21:00, night and "tonight" 18:00-24:00, lunch 12:00-14:00; points:
 *   noon/midday 12:00, midnight 24:00 (the end of that day), "end of day"
 *   (eod, close of business) 17:00, "end of [next] week" Friday 17:00.
 *   "end of the month|year", "end of next month": its last day;
 *   "start|beginning of next month|week|year": its first day.
 * - A time without a day ("at 3pm") is today, even if already past.
 *   "Dec 3" without a year is the nearest Dec 3, before or after today
 *   (on Dec 1, "Nov 27" is four days ago: "what did Bob send on Nov 27"),
 *   the later one on a tie.
 * - An hour without am/pm: 1..7 means the afternoon (13:00..19:00), other
 *   hours as written, and in "from 11 to 1pm" the first hour takes the
 *   meridiem that keeps it before the second; after "afternoon"/"evening"
 *   an hour below 12 is pm.
 * - "in 2 hours" / "in 30 minutes": a point from now; "in 3 days" / "in 2
 *   weeks": that whole day. "for an hour" after a time makes a range.
 * - "after 3pm": 15:00 to the end of that day; "before noon": 00:00 to 12:00;
 *   "until Friday": from now to the end of Friday.
 * - ISO 8601 with Z or an offset is exact; without one it is local time.
 * - Local times in a DST gap or overlap are resolved by libical (a gap time
 *   lands an hour early, an overlap time takes the first, summer, offset).
 * Anything not understood is an error quoting the word, never a guess. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools_int.h"

#define MAX_TOK 48
#define MAX_EXPR 256

enum { T_WORD, T_NUM, T_PUNCT, T_DATE, T_STAMP };

typedef struct tok {
    int kind;
    char w[24];  /* T_WORD: lower case */
    int num;     /* T_NUM value */
    int ndig;    /* T_NUM digit count */
    char p;      /* T_PUNCT */
    int64_t day; /* T_DATE: day number */
    int64_t t;   /* T_STAMP: Unix seconds */
} tok;

/* What one side of a range says ("from SIDE to SIDE"). */
typedef struct side {
    int has_day;
    int64_t day;
    int span;        /* 0 one day, else a number of days from day */
    int by_weekday;  /* the day came from a weekday name */
    int has_time;
    int tmin;        /* minutes after local midnight */
    int mer;         /* 0 none, 1 am, 2 pm */
    int exact;       /* the time had minutes or a meridiem */
    int part;        /* index+1 into parts[] */
    int has_stamp;
    int64_t stamp;
    int64_t stamp_end; /* "next 2 hours": the end of a stamped period, else 0 */
    int64_t dur;     /* "for an hour", seconds */
    int md_month;    /* the day came from a month and day ("March 16"): its
                        month 1..12 and year, for "March 16-18" */
    int md_year;
    int guessed;     /* the day is the next of its kind ("Monday", "the
                        24th"): "since" takes the last one instead */
    int dom;         /* "the 24th": the day of the month */
} side;

typedef struct parser {
    tok t[MAX_TOK];
    int n, i;
    side s[2];
    int cur;      /* which side is being filled */
    int ranged;   /* a connector was seen */
    int between;  /* "between" seen: "and" connects */
    int after, before;
    int since;    /* "since": a guessed day is the last of its kind */
    int64_t now, today;
    icaltimezone *z;
    const char *expr;
    hx_err *err;
    char no_day[200]; /* the first day named that does not exist ("April
                         31"): said once the rest is read */
} parser;

typedef struct part_def {
    const char *name;
    int start, end; /* minutes; start == end for a point */
} part_def;

static const part_def parts[] = {
    {"morning", 480, 720},     {"afternoon", 720, 1020},
    {"evening", 1020, 1260},   {"night", 1080, 1440},
    {"tonight", 1080, 1440},   {"lunch", 720, 840},
    {"lunchtime", 720, 840},   {"noon", 720, 720},
    {"midday", 720, 720},      {"midnight", 1440, 1440},
    {"eod", 1020, 1020},
};
#define N_PARTS ((int)(sizeof parts / sizeof parts[0]))

static const char *const wdays[7] = {"sunday",   "monday", "tuesday",
                                     "wednesday", "thursday", "friday",
                                     "saturday"};
static const char *const months[12] = {
    "january", "february", "march",     "april",   "may",      "june",
    "july",    "august",   "september", "october", "november", "december"};

/* ---- tokens ---- */

static int bad(parser *p, const char *what)
{
    return hx_err_set(p->err, HX_ERR_FORMAT,
                      "cannot read %s in the time expression '%s' (try "
                      "'tomorrow at 3pm', 'next Tuesday afternoon', "
                      "'2026-12-03T14:00')",
                      what, p->expr);
}

static int bad_tok(parser *p, int i)
{
    char what[64];
    const tok *k = &p->t[i < p->n ? i : p->n - 1];
    if (k->kind == T_WORD) snprintf(what, sizeof what, "'%s'", k->w);
    else if (k->kind == T_NUM) snprintf(what, sizeof what, "the number %d", k->num);
    else if (k->kind == T_PUNCT) snprintf(what, sizeof what, "'%c'", k->p);
    else snprintf(what, sizeof what, "the date at word %d", i + 1);
    return bad(p, what);
}

/* bad() for the recognizers, which return -1 on error. */
static int fail(parser *p, const char *what)
{
    bad(p, what);
    return -1;
}

/* Keeps what is wrong with day d of month m (1..12; 0: any month) of
 * year y (0: none said), the first time: the expression is read on (a
 * word after it may still be one it cannot read) and the reader then
 * refuses it with this, not with "cannot read": "April 31" is read and
 * names no day, which is what the user needs to hear. Returns the day of
 * the month that stands in meanwhile, one every year's month m has. */
static int note_no_day(parser *p, int y, int m, int d)
{
    char mon[16] = "";
    if (m >= 1 && m <= 12) snprintf(mon, sizeof mon, "%c%s", months[m - 1][0] - 'a' + 'A', months[m - 1] + 1);
    const int days = m < 1 || m > 12 ? 31 : y ? hx_days_in_month(y, m) : m == 2 ? 28 : hx_days_in_month(2001, m);
    char *b = p->no_day;
    const size_t n = sizeof p->no_day;
    if (*b) { /* said already */
    } else if (!*mon) {
        snprintf(b, n, "there is no day %d in a month: a month has 28 to 31 days", d);
    } else if (y) {
        snprintf(b, n, "there is no %s %d, %d: %s %d has %d days", mon, d, y, mon, y, days);
    } else if (m == 2) {
        snprintf(b, n, "there is no February %d: February has 28 days, 29 in a leap year", d);
    } else {
        snprintf(b, n, "there is no %s %d: %s has %d days", mon, d, mon, days);
    }
    return d < 1 ? 1 : d > days ? days : d;
}

/* Reads exactly n digits at s; -1 if not digits. */
static int digits(const char *s, int n)
{
    int v = 0;
    for (int k = 0; k < n; k++) {
        if (!isdigit((unsigned char)s[k])) return -1;
        v = v * 10 + (s[k] - '0');
    }
    return v;
}

/* Parses an ISO offset "Z", "+01:00", "+0100", "-05"; returns chars used,
 * 0 if none, -1 if malformed. */
static int iso_offset(const char *s, int *off)
{
    if (*s == 'Z' || *s == 'z') {
        *off = 0;
        return 1;
    }
    if (*s != '+' && *s != '-') return 0;
    int h = digits(s + 1, 2), m = 0, used = 3;
    if (h < 0 || h > 14) return -1;
    if (s[3] == ':') used = 4;
    if (isdigit((unsigned char)s[used])) {
        m = digits(s + used, 2);
        if (m < 0 || m > 59) return -1;
        used += 2;
    }
    *off = (h * 3600 + m * 60) * (*s == '-' ? -1 : 1);
    return used;
}

/* "HH:MM[:SS[.frac]]" at s into c; returns chars used or -1. */
static int iso_clock(const char *s, hx_civil *c)
{
    int h = digits(s, 2), m, sec = 0, k = 5;
    if (h < 0 || s[2] != ':' || (m = digits(s + 3, 2)) < 0 || h > 24 || m > 59) return -1;
    if (s[5] == ':') {
        if ((sec = digits(s + 6, 2)) < 0 || sec > 60) return -1;
        k = 8;
        if (s[k] == '.' || s[k] == ',')
            for (k++; isdigit((unsigned char)s[k]); k++) {}
    }
    if (h == 24 && (m || sec)) return -1;
    c->hour = h;
    c->min = m;
    c->sec = sec > 59 ? 59 : sec;
    return k;
}

/* An ISO date or date-time at s; fills k; returns chars used, 0 if s is
 * not one, -1 (with err) if it is one but invalid. */
static int lex_iso(parser *p, const char *s, tok *k)
{
    hx_civil c = {0};
    c.year = digits(s, 4);
    if (c.year < 0 || s[4] != '-' || (c.month = digits(s + 5, 2)) < 0 ||
        s[7] != '-' || (c.day = digits(s + 8, 2)) < 0 ||
        isdigit((unsigned char)s[10]))
        return 0;
    if (c.month < 1 || c.month > 12) return bad(p, "the month of the ISO date"), -1;
    if (c.day < 1 || c.day > hx_days_in_month(c.year, c.month))
        c.day = note_no_day(p, c.year, c.month, c.day);
    int used = 10;
    if ((s[10] == 'T' || s[10] == 't' || s[10] == ' ') &&
        isdigit((unsigned char)s[11]) && isdigit((unsigned char)s[12]) && s[13] == ':') {
        int n = iso_clock(s + 11, &c), off = 0;
        if (n < 0) return bad(p, "the clock time of the ISO date"), -1;
        used = 11 + n;
        int o = iso_offset(s + used, &off);
        if (o < 0) return bad(p, "the UTC offset of the ISO date"), -1;
        k->kind = T_STAMP;
        if (o > 0) {
            k->t = hx_days_from_civil(c.year, c.month, c.day) * 86400 +
                   c.hour * 3600 + c.min * 60 + c.sec - off;
            used += o;
        } else
            k->t = hx_tz_to_utc(p->z, &c);
        return used;
    }
    k->kind = T_DATE;
    k->day = hx_days_from_civil(c.year, c.month, c.day);
    return used;
}

/* A word (letters, "'" inside; "a.m."/"p.m." become "am"/"pm"). */
static int lex_word(const char *s, tok *k)
{
    int n = 0, j = 0;
    if ((s[0] == 'a' || s[0] == 'p' || s[0] == 'A' || s[0] == 'P') &&
        s[1] == '.' && (s[2] == 'm' || s[2] == 'M')) {
        k->w[0] = (char)tolower((unsigned char)s[0]);
        k->w[1] = 'm';
        k->w[2] = 0;
        return s[3] == '.' ? 4 : 3;
    }
    while (isalpha((unsigned char)s[n]) ||
           (s[n] == '\'' && n > 0 && isalpha((unsigned char)s[n + 1]))) {
        if (j < (int)sizeof k->w - 1 && s[n] != '\'')
            k->w[j++] = (char)tolower((unsigned char)s[n]);
        n++;
    }
    k->w[j] = 0;
    return n;
}

static int lex_one(parser *p, const char *s, tok *k)
{
    memset(k, 0, sizeof *k);
    if (isdigit((unsigned char)*s)) {
        int n = lex_iso(p, s, k);
        if (n) return n;
        k->kind = T_NUM;
        for (n = 0; isdigit((unsigned char)s[n]); n++)
            if (n < 6) k->num = k->num * 10 + (s[n] - '0');
        k->ndig = n;
        return n;
    }
    if (isalpha((unsigned char)*s)) {
        k->kind = T_WORD;
        return lex_word(s, k);
    }
    if (strchr(":-,./", *s)) {
        k->kind = T_PUNCT;
        k->p = *s;
        return 1;
    }
    char what[32];
    snprintf(what, sizeof what, "the character '%c'",
             isprint((unsigned char)*s) ? *s : '?');
    return bad(p, what), -1;
}

static int lex(parser *p, const char *s)
{
    while (*s) {
        if (isspace((unsigned char)*s)) {
            s++;
            continue;
        }
        if (p->n == MAX_TOK) return bad(p, "so many words");
        int n = lex_one(p, s, &p->t[p->n]);
        if (n < 0) return p->err ? p->err->rc : HX_ERR_FORMAT;
        if (n == 0) return bad(p, "the text");
        p->n++;
        s += n;
    }
    return HX_OK;
}

/* ---- token helpers ---- */

static const tok *at(const parser *p, int k)
{
    return p->i + k < p->n ? &p->t[p->i + k] : NULL;
}

static int is_word(const parser *p, int k, const char *w)
{
    const tok *t = at(p, k);
    return t && t->kind == T_WORD && !strcmp(t->w, w);
}

static int is_punct(const parser *p, int k, char c)
{
    const tok *t = at(p, k);
    return t && t->kind == T_PUNCT && t->p == c;
}

/* Index of w in names (full name or its first 3 letters, "sept", "tues",
 * "thurs" too), else -1. */
static int name_index(const char *w, const char *const *names, int n)
{
    size_t len = strlen(w);
    if (len < 3) return -1;
    for (int k = 0; k < n; k++)
        if (!strncmp(names[k], w, len) && (len <= 5 || !strcmp(names[k], w)))
            return k;
    return -1;
}

static int word_weekday(const tok *t)
{
    return t && t->kind == T_WORD ? name_index(t->w, wdays, 7) : -1;
}

static int word_month(const tok *t)
{
    if (!t || t->kind != T_WORD) return -1;
    if (!strcmp(t->w, "mar") || !strcmp(t->w, "march")) return 2;
    return name_index(t->w, months, 12);
}

/* Small numbers written as words ("two", "thirty", "a"); -1 if not. */
static int word_number(const tok *t)
{
    static const char *const w[] = {
        "zero",    "one",      "two",      "three",   "four",
        "five",    "six",      "seven",    "eight",   "nine",
        "ten",     "eleven",   "twelve",   "thirteen", "fourteen",
        "fifteen", "sixteen",  "seventeen", "eighteen", "nineteen",
        "twenty"};
    if (!t) return -1;
    if (t->kind == T_NUM) return t->num;
    if (t->kind != T_WORD) return -1;
    if (!strcmp(t->w, "a") || !strcmp(t->w, "an")) return 1;
    if (!strcmp(t->w, "thirty")) return 30;
    if (!strcmp(t->w, "forty")) return 40;
    if (!strcmp(t->w, "fifty")) return 50;
    if (!strcmp(t->w, "sixty")) return 60;
    if (!strcmp(t->w, "ninety")) return 90;
    for (int k = 0; k <= 20; k++)
        if (!strcmp(t->w, w[k])) return k;
    return -1;
}

/* Seconds in a unit word, 0 if not a unit. */
static int64_t unit_secs(const tok *t)
{
    static const struct { const char *w; int64_t s; } u[] = {
        {"minute", 60},     {"minutes", 60},   {"min", 60},
        {"mins", 60},       {"hour", 3600},    {"hours", 3600},
        {"hr", 3600},       {"hrs", 3600},     {"h", 3600},
        {"day", 86400},     {"days", 86400},   {"week", 604800},
        {"weeks", 604800},
    };
    if (!t || t->kind != T_WORD) return 0;
    for (size_t k = 0; k < sizeof u / sizeof u[0]; k++)
        if (!strcmp(t->w, u[k].w)) return u[k].s;
    return 0;
}

/* ---- setters ---- */

static side *cur(parser *p) { return &p->s[p->cur]; }

static int set_day(parser *p, int64_t day, int span)
{
    side *s = cur(p);
    if (s->has_day) return fail(p, "two different days");
    s->has_day = 1;
    s->day = day;
    s->span = span;
    return 1;
}

/* A weekday and a date that must be the same day ("Tuesday, Dec 8"):
 * 1 when they are, else the error naming the date's weekday. */
static int same_weekday(parser *p, int64_t date, int64_t weekday_day)
{
    if (hx_weekday(date) == hx_weekday(weekday_day)) return 1;
    char what[96];
    int y, m, d;
    hx_civil_from_days(date, &y, &m, &d);
    snprintf(what, sizeof what, "the weekday (%04d-%02d-%02d is a %c%s)", y, m, d,
             wdays[hx_weekday(date)][0] - 'a' + 'A', wdays[hx_weekday(date)] + 1);
    return fail(p, what);
}

/* A date ("Dec 8", "2026-12-08"): the side's day, or the day a weekday
 * before it named ("Tuesday, Dec 8"), when it is that weekday. */
static int set_date(parser *p, int64_t day)
{
    side *s = cur(p);
    if (!s->has_day || !s->by_weekday || s->span) return set_day(p, day, 0);
    if (same_weekday(p, day, s->day) < 0) return -1;
    s->day = day;
    s->by_weekday = s->guessed = 0;
    return 1;
}

static int set_time(parser *p, int tmin, int mer, int exact)
{
    side *s = cur(p);
    if (s->has_time || s->has_stamp) return fail(p, "two different times");
    s->has_time = 1;
    s->tmin = tmin;
    s->mer = mer;
    s->exact = exact;
    return 1;
}

/* ---- recognizers: each returns 1 (consumed), 0 (not this), < 0 error ---- */

static int r_fixed_day(parser *p)
{
    static const struct { const char *w; int d, part; } f[] = {
        {"today", 0, 0},    {"tomorrow", 1, 0}, {"tmrw", 1, 0},
        {"yesterday", -1, 0}, {"tonight", 0, 5},
    };
    const tok *t = at(p, 0);
    if (is_word(p, 0, "day") && (is_word(p, 1, "after") || is_word(p, 1, "before"))) {
        int d = is_word(p, 2, "tomorrow") ? 2 : is_word(p, 2, "yesterday") ? -2 : 0;
        if ((d == 2) != is_word(p, 1, "after") || !d) return 0;
        p->i += 3; /* "the day after tomorrow", "the day before yesterday" */
        return set_day(p, p->today + d, 0);
    }
    for (size_t k = 0; t && t->kind == T_WORD && k < sizeof f / sizeof f[0]; k++)
        if (!strcmp(t->w, f[k].w)) {
            p->i++;
            if (set_day(p, p->today + f[k].d, 0) < 0) return -1;
            if (f[k].part) cur(p)->part = f[k].part;
            return 1;
        }
    return 0;
}

/* Monday-based week start of a day. */
static int64_t week_start(int64_t day)
{
    return day - (hx_weekday(day) + 6) % 7;
}

/* The day n months after day (before, n < 0), its day of the month kept
 * or made the month's last ("Jan 31" + 1 month is "Feb 28"). */
static int64_t add_months(int64_t day, int n)
{
    int y, m, d;
    hx_civil_from_days(day, &y, &m, &d);
    int64_t k = (int64_t)y * 12 + (m - 1) + n;
    y = (int)(k >= 0 ? k / 12 : (k - 11) / 12);
    m = (int)(k - (int64_t)y * 12) + 1;
    if (d > hx_days_in_month(y, m)) d = hx_days_in_month(y, m);
    return hx_days_from_civil(y, m, d);
}

static int64_t month_start(int64_t day, int add, int *len)
{
    int y, m, d;
    hx_civil_from_days(add_months(day, add), &y, &m, &d);
    *len = hx_days_in_month(y, m);
    return hx_days_from_civil(y, m, 1);
}

/* The first day of day's year + add, and that year's length in days. */
static int64_t year_start(int64_t day, int add, int *len)
{
    int y, m, d;
    hx_civil_from_days(day, &y, &m, &d);
    int64_t a = hx_days_from_civil(y + add, 1, 1);
    *len = (int)(hx_days_from_civil(y + add + 1, 1, 1) - a);
    return a;
}

/* -1 for "last", "past", "previous"; 0 "this"; 1 "next", "coming"; 9 else. */
static int rel_of(const parser *p, int k)
{
    return is_word(p, k, "this") ? 0
           : is_word(p, k, "next") || is_word(p, k, "coming") ? 1
           : is_word(p, k, "last") || is_word(p, k, "past") || is_word(p, k, "previous") ? -1
                                                                                        : 9;
}

/* Months in a unit word ("month", "years"), 0 if not one. */
static int unit_months(const tok *t)
{
    if (!t || t->kind != T_WORD) return 0;
    if (!strcmp(t->w, "month") || !strcmp(t->w, "months")) return 1;
    return !strcmp(t->w, "year") || !strcmp(t->w, "years") ? 12 : 0;
}

/* "next 7 days", "past 2 weeks", "next 3 hours", "last 6 months": n units
 * from today on, or up to today, today counted (days and longer: whole
 * days); hours and minutes from now on, or up to now. */
static int rel_span(parser *p, int rel, int n, const tok *u, int used)
{
    int mons = unit_months(u);
    int64_t secs = unit_secs(u), day = p->today;
    if (n < 1 || n > 1000) return fail(p, "the length of the period (1 to 1000)");
    p->i += used;
    if (!mons && secs < 86400) {
        side *s = cur(p);
        if (s->has_stamp || s->has_time || s->has_day) return fail(p, "two different times");
        s->has_stamp = 1;
        s->stamp = rel > 0 ? p->now : p->now - n * secs;
        s->stamp_end = rel > 0 ? p->now + n * secs : p->now;
        return 1;
    }
    int64_t len = mons ? (rel > 0 ? add_months(day, n * mons) - day
                                  : day - add_months(day, -n * mons))
                       : n * secs / 86400;
    return set_day(p, rel > 0 ? day : day + 1 - len, (int)len);
}

/* "next March", "last March", "this March": the whole month; next is the
 * first one after this month, last the last one before it. */
static int rel_month(parser *p, int rel, int m)
{
    int y, cm, d, len;
    hx_civil_from_days(p->today, &y, &cm, &d);
    if (rel > 0 && m + 1 <= cm) y++;
    if (rel < 0 && m + 1 >= cm) y--;
    int64_t first = hx_days_from_civil(y, m + 1, 1);
    month_start(first, 0, &len);
    return set_day(p, first, len);
}

/* "this|next|last" + weekday / week / weekend / month / year / a month's
 * name / part of day, or + a number of units ("next 7 days"); "this
 * past Monday", "this coming Monday". */
static int r_relative_word(parser *p)
{
    int rel = rel_of(p, 0), len, n;
    if (rel == 0 && rel_of(p, 1) != 9 && rel_of(p, 1) != 0) { /* "this past Friday" */
        p->i++;
        rel = rel_of(p, 0);
    }
    if (rel == 9 || !at(p, 1)) return 0;
    const tok *t = at(p, 1);
    if (rel && (n = word_number(t)) >= 0 && (unit_secs(at(p, 2)) || unit_months(at(p, 2))))
        return rel_span(p, rel, n, at(p, 2), 3);
    int wd = word_weekday(t), m = word_month(t), past = is_word(p, 0, "past");
    int64_t today = p->today;
    p->i += 2;
    if (wd >= 0) {
        int ahead = (wd - hx_weekday(today) + 7) % 7;
        if (rel == 1 && ahead == 0) ahead = 7;
        if (rel == -1) ahead = ahead ? ahead - 7 : -7;
        return set_day(p, today + ahead, 0);
    }
    if (m >= 0) return rel_month(p, rel, m);
    if (past && (!strcmp(t->w, "week") || !strcmp(t->w, "month") || !strcmp(t->w, "year")))
        return rel_span(p, rel, 1, t, 0); /* "the past week": the 7 days up to today */
    if (!strcmp(t->w, "week"))
        return set_day(p, week_start(today) + 7 * rel, 7);
    if (!strcmp(t->w, "weekend"))
        return set_day(p, week_start(today) + 5 + 7 * rel, 2);
    if (!strcmp(t->w, "month")) {
        int64_t d = month_start(today, rel, &len);
        return set_day(p, d, len);
    }
    if (!strcmp(t->w, "year")) {
        int64_t d = year_start(today, rel, &len);
        return set_day(p, d, len);
    }
    for (int k = 0; rel == 0 && k < N_PARTS; k++)
        if (!strcmp(t->w, parts[k].name)) {
            cur(p)->part = k + 1;
            return set_day(p, today, 0);
        }
    p->i -= 1;
    bad_tok(p, p->i);
    return -1;
}

/* "weekend", "the weekend", "over the weekend": this one (Saturday and
 * Sunday; on a Sunday, the one under way). */
static int r_weekend(parser *p)
{
    if (!is_word(p, 0, "weekend")) return 0;
    p->i++;
    return set_day(p, week_start(p->today) + 5, 2);
}

/* "3 days ago", "a week ago", "2 months ago": that day; "2 hours ago": that
 * moment. */
static int r_ago(parser *p)
{
    int n = word_number(at(p, 0));
    const tok *u = at(p, 1);
    int mons = unit_months(u);
    int64_t secs = unit_secs(u);
    if (n < 0 || (!mons && !secs) || !is_word(p, 2, "ago")) return 0;
    p->i += 3;
    if (mons) return set_day(p, add_months(p->today, -n * mons), 0);
    if (secs >= 86400) return set_day(p, p->today - n * (secs / 86400), 0);
    side *s = cur(p);
    if (s->has_stamp || s->has_time) return fail(p, "two different times");
    s->has_stamp = 1;
    s->stamp = p->now - n * secs;
    return 1;
}

/* "Monday", "on Monday": the next Monday, today included; "Monday next
 * week", "Monday of last week": that week's; after a date ("Dec 8,
 * Tuesday"), a check that the date is that weekday. */
static int r_weekday(parser *p)
{
    int wd = word_weekday(at(p, 0));
    if (wd < 0) return 0;
    p->i++;
    int k = is_word(p, 0, "of"), rel = rel_of(p, k);
    if (rel != 9 && is_word(p, k + 1, "week")) {
        p->i += k + 2;
        return set_day(p, week_start(p->today) + 7 * rel + (wd + 6) % 7, 0);
    }
    side *s = cur(p);
    int64_t next = p->today + (wd - hx_weekday(p->today) + 7) % 7;
    if (s->has_day && !s->by_weekday && !s->span) return same_weekday(p, s->day, next);
    if (set_day(p, next, 0) < 0) return -1;
    s->by_weekday = s->guessed = 1;
    return 1;
}

/* 1 if token k is an ordinal suffix ("3rd": "rd"), else 0. */
static int ordinal_at(const parser *p, int k)
{
    return is_word(p, k, "st") || is_word(p, k, "nd") || is_word(p, k, "rd") || is_word(p, k, "th");
}

/* Whether token k, after a number, makes it a clock time ("3:30", "3pm",
 * "15h", "9 o'clock"). */
static int clock_after(const parser *p, int k)
{
    return is_punct(p, k, ':') || is_punct(p, k, '.') || is_word(p, k, "am") ||
           is_word(p, k, "pm") || is_word(p, k, "h") || is_word(p, k, "oclock");
}

/* An optional year after a month day: [","] YYYY. */
static int opt_year(parser *p)
{
    int k = is_punct(p, 0, ',') ? 1 : 0;
    const tok *t = at(p, k);
    if (!t || t->kind != T_NUM || t->ndig != 4) return 0;
    p->i += k + 1;
    return t->num;
}

/* The day m/d nearest to today (ties: the later); Feb 29 may be up to
 * four years ahead. -1 if there is no such day. */
static int64_t nearest_month_day(int64_t today, int m, int d)
{
    int ty, tm, td;
    hx_civil_from_days(today, &ty, &tm, &td);
    int64_t best = -1, best_dist = 0;
    for (int y = ty - 1; y <= ty + 4; y++) {
        if (d > hx_days_in_month(y, m)) continue;
        int64_t day = hx_days_from_civil(y, m, d);
        int64_t dist = day < today ? today - day : day - today;
        if (best < 0 || dist <= best_dist) best = day, best_dist = dist;
    }
    return best;
}

/* The day m/d of year y (0: the nearest, as above); -1 if none. */
static int64_t month_day_of(int64_t today, int y, int m, int d)
{
    if (!y) return d >= 1 && d <= 31 ? nearest_month_day(today, m, d) : -1;
    return d >= 1 && d <= hx_days_in_month(y, m) ? hx_days_from_civil(y, m, d) : -1;
}

/* The day m/d of year y as above; where there is none, the day that
 * stands in for it (note_no_day). */
static int64_t day_of(parser *p, int y, int m, int d)
{
    int64_t day = month_day_of(p->today, y, m, d);
    return day >= 0 ? day : month_day_of(p->today, y, m, note_no_day(p, y, m, d));
}

/* Sets the side's day to month m (0..11), day d, the year after it if
 * any; remembers the month for a range's second day ("March 16-18"). */
static int month_day(parser *p, int m, int d)
{
    int64_t day = day_of(p, opt_year(p), m + 1, d);
    if (set_date(p, day) < 0) return -1;
    int y, mm, dd;
    hx_civil_from_days(day, &y, &mm, &dd);
    cur(p)->md_month = mm, cur(p)->md_year = y, cur(p)->dom = dd;
    return 1;
}

/* "Dec 3", "December 3rd, 2026" */
static int r_month_first(parser *p)
{
    int m = word_month(at(p, 0));
    const tok *t = at(p, 1);
    if (m < 0 || !t || t->kind != T_NUM || t->ndig > 2) return 0;
    p->i += 2 + ordinal_at(p, 2);
    return month_day(p, m, t->num);
}

/* "3 Dec", "3rd of December" */
static int r_day_first(parser *p)
{
    const tok *t = at(p, 0);
    if (!t || t->kind != T_NUM || t->ndig > 2) return 0;
    int k = 1 + ordinal_at(p, 1);
    if (is_word(p, k, "of")) k++;
    int m = word_month(at(p, k));
    if (m < 0) return 0;
    p->i += k + 1;
    return month_day(p, m, t->num);
}

/* Whether token k joins the two ends of a range ("-", "to", ...). */
static int joins(const parser *p, int k)
{
    return is_punct(p, k, '-') || is_word(p, k, "to") || is_word(p, k, "through") ||
           is_word(p, k, "thru") || is_word(p, k, "until") || is_word(p, k, "till") ||
           (p->between && is_word(p, k, "and"));
}

/* "16-18 March", "16th to 18th of March 2027": a range of whole days. */
static int r_days_then_month(parser *p)
{
    const tok *a = at(p, 0);
    if (!a || a->kind != T_NUM || a->ndig > 2 || p->ranged) return 0;
    int k = 1 + ordinal_at(p, 1);
    const tok *b = at(p, k + 1);
    if (!joins(p, k) || !b || b->kind != T_NUM || b->ndig > 2) return 0;
    int j = k + 2 + ordinal_at(p, k + 2);
    j += is_word(p, j, "of");
    int m = word_month(at(p, j));
    if (m < 0) return 0;
    p->i += j + 1;
    int y = opt_year(p);
    int64_t d0 = day_of(p, y, m + 1, a->num);
    int y0, m0, dd; /* the second day in the first one's year */
    hx_civil_from_days(d0, &y0, &m0, &dd);
    int64_t d1 = day_of(p, y0, m + 1, b->num);
    if (set_day(p, d0, 0) < 0) return -1;
    p->ranged = 1, p->cur = 1;
    return set_day(p, d1, 0);
}

/* The second end of "March 16-18", "Dec 3 to 5", "between March 16 and
 * 18": after the connector, a number that is no clock time is a day of
 * the first end's month (and year). */
static int r_range_day(parser *p)
{
    const tok *t = at(p, 0);
    const side *a = &p->s[0], *b = &p->s[1];
    if (p->cur != 1 || !t || t->kind != T_NUM || t->ndig > 2 || !a->md_month || a->has_time ||
        a->has_stamp || b->has_day || b->has_time || clock_after(p, 1))
        return 0;
    p->i += 1 + ordinal_at(p, 1);
    int y = opt_year(p); /* "March 16-18, 2027": both ends in 2027 */
    if (y && y != a->md_year) {
        p->s[0].day = day_of(p, y, a->md_month, a->dom);
    }
    int64_t day = day_of(p, y ? y : a->md_year, a->md_month, t->num);
    return set_day(p, day, 0);
}

/* The first day with day of the month d from today on (dir 1), or the
 * last up to today (dir -1); months without it are skipped. */
static int64_t next_dom(int64_t today, int d, int dir)
{
    int y, m, td;
    hx_civil_from_days(today, &y, &m, &td);
    for (int k = 0; k < 14; k++) {
        int64_t first = add_months(hx_days_from_civil(y, m, 1), dir * k);
        int fy, fm, fd;
        hx_civil_from_days(first, &fy, &fm, &fd);
        if (d > hx_days_in_month(fy, fm)) continue;
        int64_t day = first + d - 1;
        if (dir > 0 ? day >= today : day <= today) return day;
    }
    return today;
}

/* "the 24th", "24th", "on the 3rd": the next day of that number, today
 * included (as "Monday" is the next Monday); "since the 24th" the last. */
static int r_day_alone(parser *p)
{
    const tok *t = at(p, 0);
    if (!t || t->kind != T_NUM || t->ndig > 2) return 0;
    int ord = ordinal_at(p, 1), the = p->i > 0 && p->t[p->i - 1].kind == T_WORD &&
                                      !strcmp(p->t[p->i - 1].w, "the");
    if (!ord && (!the || clock_after(p, 1) || unit_secs(at(p, 1)) || unit_months(at(p, 1))))
        return 0;
    const int dom = t->num < 1 || t->num > 31 ? note_no_day(p, 0, 0, t->num) : t->num;
    p->i += 1 + ord;
    if (set_date(p, next_dom(p->today, dom, 1)) < 0) return -1; /* "Thursday the 24th" */
    cur(p)->guessed = 1, cur(p)->dom = dom;
    return 1;
}

/* "March", "in March", "March 2027": the whole month; without a year the
 * nearest one, this month included (later on a tie), as for "Dec 3". */
static int r_month_alone(parser *p)
{
    int m = word_month(at(p, 0)), len, ty, tm, td;
    const tok *t = at(p, 1);
    if (m < 0 || (t && t->kind == T_NUM && t->ndig <= 2)) return 0;
    p->i++;
    int y = opt_year(p);
    hx_civil_from_days(p->today, &ty, &tm, &td);
    int64_t best = 0, best_dist = -1;
    for (int yy = y ? y : ty - 1; yy <= (y ? y : ty + 1); yy++) {
        int64_t first = month_start(hx_days_from_civil(yy, m + 1, 1), 0, &len);
        int64_t dist = p->today < first ? first - p->today
                       : p->today >= first + len ? p->today - (first + len - 1) : 0;
        if (best_dist < 0 || dist <= best_dist) best = first, best_dist = dist;
    }
    month_start(best, 0, &len);
    return set_day(p, best, len);
}

static int r_iso(parser *p)
{
    const tok *t = at(p, 0);
    if (!t || (t->kind != T_DATE && t->kind != T_STAMP)) return 0;
    p->i++;
    if (t->kind == T_DATE) return set_date(p, t->day);
    side *s = cur(p);
    if (s->has_stamp || s->has_time || s->has_day)
        return fail(p, "an ISO time next to another date or time");
    s->has_stamp = 1;
    s->stamp = t->t;
    return 1;
}

static int r_part(parser *p)
{
    const tok *t = at(p, 0);
    if (!t || t->kind != T_WORD) return 0;
    for (int k = 0; k < N_PARTS; k++)
        if (!strcmp(t->w, parts[k].name)) {
            if (cur(p)->part) return fail(p, "two parts of the day");
            cur(p)->part = k + 1;
            p->i++;
            return 1;
        }
    return 0;
}

/* "start|beginning|end of [the] [this|next|last] week|month|year": the
 * first or last day of it, a whole day; the end of a week is its Friday
 * at 17:00 (the end of a working week), as "end of day" is 17:00. */
static int end_of_period(parser *p, int end, int k)
{
    int rel = rel_of(p, k), len;
    if (rel != 9) k++;
    else rel = 0;
    int64_t first;
    int week = is_word(p, k, "week");
    if (week) first = week_start(p->today) + 7 * rel, len = 7;
    else if (is_word(p, k, "month")) first = month_start(p->today, rel, &len);
    else if (is_word(p, k, "year")) first = year_start(p->today, rel, &len);
    else return 0;
    p->i += k + 1;
    if (end && week) {
        cur(p)->part = N_PARTS; /* eod */
        return cur(p)->has_day && !rel ? 1 : set_day(p, first + 4, 0);
    }
    return set_day(p, end ? first + len - 1 : first, 0);
}

/* "end of [the] day|week|month|year", "close of business", "cob",
 * "start of next month" */
static int r_end_of(parser *p)
{
    int k = 0;
    if (is_word(p, 0, "cob")) k = 1;
    else if (is_word(p, 0, "close") && is_word(p, 1, "of") &&
             is_word(p, 2, "business"))
        k = 3;
    if (k) {
        p->i += k;
        cur(p)->part = N_PARTS; /* eod */
        return 1;
    }
    int end = is_word(p, 0, "end");
    if (!(end || is_word(p, 0, "start") || is_word(p, 0, "beginning")) || !is_word(p, 1, "of"))
        return 0;
    k = is_word(p, 2, "the") ? 3 : 2;
    if (end && is_word(p, k, "day")) {
        p->i += k + 1;
        cur(p)->part = N_PARTS;
        return 1;
    }
    return end_of_period(p, end, k);
}

/* "in two hours", "in 30 minutes", "in 3 days", "in half an hour" */
static int r_in(parser *p)
{
    if (!is_word(p, 0, "in")) return 0;
    int64_t secs;
    int used;
    if (is_word(p, 1, "half") && (is_word(p, 2, "an") || is_word(p, 2, "a")) &&
        unit_secs(at(p, 3)) == 3600) {
        secs = 1800;
        used = 4;
    } else {
        int n = word_number(at(p, 1));
        int64_t u = unit_secs(at(p, 2));
        if (n < 0 || !u) return 0;
        secs = (int64_t)n * u;
        used = 3;
    }
    p->i += used;
    if (unit_secs(at(p, -1)) >= 86400) return set_day(p, p->today + secs / 86400, 0);
    side *s = cur(p);
    if (s->has_stamp || s->has_time) return fail(p, "two different times");
    s->has_stamp = 1;
    s->stamp = p->now + secs;
    return 1;
}

/* "for an hour", "for 30 minutes", "for 1.5 hours" is not supported. */
static int r_for(parser *p)
{
    if (!is_word(p, 0, "for")) return 0;
    int n = word_number(at(p, 1));
    int64_t u = unit_secs(at(p, 2));
    if (n < 0 || !u) return 0;
    p->i += 3;
    cur(p)->dur = (int64_t)n * u;
    return 1;
}

static int r_now(parser *p)
{
    if (!is_word(p, 0, "now") && !is_word(p, 0, "right")) return 0;
    if (is_word(p, 0, "right")) {
        if (!is_word(p, 1, "now")) return 0;
        p->i++;
    }
    p->i++;
    side *s = cur(p);
    if (s->has_stamp || s->has_time) return fail(p, "two different times");
    s->has_stamp = 1;
    s->stamp = p->now;
    return 1;
}

/* Was the token before the current one a word that announces a time? */
static int time_context(const parser *p)
{
    static const char *const w[] = {"at", "from", "between", "to", "and",
                                    "until", "till", "after", "before",
                                    "by", "around", "about", "@"};
    if (p->i == 0) return 0;
    const tok *t = &p->t[p->i - 1];
    if (t->kind == T_PUNCT) return t->p == '-';
    for (size_t k = 0; t->kind == T_WORD && k < sizeof w / sizeof w[0]; k++)
        if (!strcmp(t->w, w[k])) return 1;
    return 0;
}

/* "3pm", "3:30 pm", "14:30", "15h", "14h30", "9 o'clock", "at 9" */
static int r_time(parser *p)
{
    const tok *t = at(p, 0);
    if (!t || t->kind != T_NUM || t->ndig > 2) return 0;
    int h = t->num, m = 0, k = 1, exact = 0, mer = 0;
    if (is_punct(p, 1, ':') || is_punct(p, 1, '.') || is_word(p, 1, "h")) {
        const tok *mt = at(p, 2);
        if (mt && mt->kind == T_NUM && mt->ndig == 2) {
            m = mt->num;
            k = 3;
            exact = 1;
        } else if (is_word(p, 1, "h")) {
            k = 2;
            exact = 1;
        } else
            return 0;
    }
    if (is_word(p, k, "am") || is_word(p, k, "pm")) {
        mer = is_word(p, k, "am") ? 1 : 2;
        exact = 1;
        k++;
    } else if (is_word(p, k, "oclock")) {
        k++;
        exact = 1;
    }
    int before_dash = (is_punct(p, k, '-') || is_word(p, k, "to")) && at(p, k + 1) &&
                      at(p, k + 1)->kind == T_NUM;
    if (!exact && !time_context(p) && !before_dash) return 0;
    if (m > 59 || h > 24 || (mer && (h < 1 || h > 12)) || (h == 24 && m))
        return fail(p, "the clock time (out of range)");
    p->i += k;
    return set_time(p, h * 60 + m, mer, exact);
}

/* Words that only say what follows, read past; and the connectors of a
 * range. */
static const char *const filler[] = {"at", "on", "the", "of", "from", "between", "by", "in",
                                     "around", "about", "after", "since", "before", "over",
                                     "within", "during", "for", "later", "earlier",
                                     "sometime"};
static const char *const connectors[] = {"to", "until", "till", "through", "thru"};

static int in_words(const char *w, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (!strcmp(w, list[k])) return 1;
    return 0;
}

int hx_when_dangles(const char *w, size_t n)
{
    char low[16];
    if (n == 0 || n >= sizeof low) return 0;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)w[i]);
    low[n] = 0;
    return in_words(low, filler, sizeof filler / sizeof *filler) ||
           in_words(low, connectors, sizeof connectors / sizeof *connectors) || !strcmp(low, "and");
}

/* Connectors and words that only say what follows. */
static int r_connector(parser *p)
{
    const tok *t = at(p, 0);
    if (!t) return 0;
    int conn = (t->kind == T_PUNCT && t->p == '-') ||
               (t->kind == T_WORD && in_words(t->w, connectors, sizeof connectors / sizeof *connectors)) ||
               (p->between && is_word(p, 0, "and"));
    if (conn) {
        if (p->ranged) return fail(p, "a second 'to'");
        p->ranged = 1;
        p->cur = 1;
        p->i++;
        return 1;
    }
    if (is_word(p, 0, "between")) p->between = 1;
    if (is_word(p, 0, "after") || is_word(p, 0, "since")) p->after = 1;
    if (is_word(p, 0, "since")) p->since = 1;
    if (is_word(p, 0, "before")) p->before = 1;
    if (t->kind == T_WORD && in_words(t->w, filler, sizeof filler / sizeof *filler)) {
        p->i++;
        return 1;
    }
    if (t->kind == T_PUNCT && (t->p == ',' || t->p == '.')) {
        p->i++;
        return 1;
    }
    return 0;
}

static int parse_tokens(parser *p)
{
    static int (*const rules[])(parser *) = {
        r_iso,         r_now,       r_fixed_day,       r_relative_word, r_weekend,
        r_weekday,     r_month_first, r_day_first,     r_days_then_month,
        r_month_alone, r_in,        r_for,             r_ago,           r_end_of,
        r_range_day,   r_day_alone, r_time,            r_part,          r_connector,
    };
    while (p->i < p->n) {
        int got = 0;
        for (size_t k = 0; !got && k < sizeof rules / sizeof rules[0]; k++) {
            got = rules[k](p);
            if (got < 0) return p->err ? p->err->rc : HX_ERR_FORMAT;
        }
        if (!got) return bad_tok(p, p->i);
    }
    return HX_OK;
}

/* ---- resolution ---- */

static int side_empty(const side *s)
{
    return !s->has_day && !s->has_time && !s->part && !s->has_stamp;
}

/* Hour of a time after the am/pm rules; other is the range's other side. */
static int resolve_hour(const side *s, const side *other, int is_first)
{
    int h = s->tmin / 60, m = s->tmin % 60;
    if (s->mer == 1) return (h % 12) * 60 + m;
    if (s->mer == 2) return (h % 12 + 12) * 60 + m;
    if (is_first && other && other->has_time && other->mer == 2 && h < 12) {
        int pm_other = (other->tmin / 60 % 12 + 12) * 60 + other->tmin % 60;
        return (h + 12) * 60 + m < pm_other ? (h + 12) * 60 + m : h * 60 + m;
    }
    if (s->part && h < 12 && parts[s->part - 1].start >= 720)
        return (h + 12) * 60 + m;
    if (!s->exact && h >= 1 && h <= 7) return (h + 12) * 60 + m;
    return s->tmin;
}

/* Local time `min` minutes after the start of `day` (min may be 1440). */
static int64_t at_minutes(parser *p, int64_t day, int min)
{
    hx_civil c = {0};
    hx_civil_from_days(day + min / 1440, &c.year, &c.month, &c.day);
    c.hour = min % 1440 / 60;
    c.min = min % 60;
    return hx_tz_to_utc(p->z, &c);
}

/* The moment a side names, or its period [*a, *b). */
static void resolve_side(parser *p, side *s, const side *other, int first,
                         hx_when_range *r)
{
    int64_t day = s->has_day ? s->day : p->today;
    memset(r, 0, sizeof *r);
    if (s->has_stamp) {
        r->start = s->stamp;
        r->end = s->stamp_end ? s->stamp_end : s->stamp;
        r->is_point = !s->stamp_end;
    } else if (s->has_time) {
        int min = resolve_hour(s, other, first);
        r->start = r->end = at_minutes(p, day, min);
        r->is_point = 1;
    } else if (s->part) {
        const part_def *d = &parts[s->part - 1];
        r->start = at_minutes(p, day, d->start);
        r->end = at_minutes(p, day, d->end);
        r->is_point = d->start == d->end;
    } else {
        r->start = hx_tz_day_start(p->z, day);
        r->end = hx_tz_day_start(p->z, day + (s->span ? s->span : 1));
        r->whole_days = 1;
    }
    if (r->is_point && s->dur > 0) {
        r->end = r->start + s->dur;
        r->is_point = 0;
    }
}

static int resolve_range(parser *p, hx_when_range *out)
{
    side *a = &p->s[0], *b = &p->s[1];
    if (side_empty(a) && (is_word(p, -p->i, "until") || is_word(p, -p->i, "till"))) {
        a->has_stamp = 1; /* "until Friday": from now on */
        a->stamp = p->now;
    }
    if (side_empty(a) || side_empty(b))
        return bad(p, "a range without both ends");
    if (!a->has_day && b->has_day && !a->has_stamp) {
        a->has_day = 1, a->day = b->day;
    } else if (!b->has_day && a->has_day && !b->has_stamp) {
        b->has_day = 1, b->day = a->day, b->span = 0;
    }
    if (!a->part && b->part && a->has_time) a->part = b->part;
    if (b->by_weekday && a->has_day && b->day < a->day) b->day += 7;
    hx_when_range ra, rb;
    resolve_side(p, a, b, 1, &ra);
    resolve_side(p, b, a, 0, &rb);
    out->start = ra.start;
    out->end = rb.is_point ? rb.start : rb.end;
    out->is_point = 0;
    out->whole_days = ra.whole_days && rb.whole_days;
    if (out->end <= out->start) return bad(p, "a range that ends before it starts");
    return HX_OK;
}

/* "since Monday", "since the 24th": the last such day, today included,
 * not the next. */
static void since_past(parser *p, side *s)
{
    if (!p->since || !s->guessed || s->day <= p->today) return;
    s->day = s->dom ? next_dom(p->today, s->dom, -1) : s->day - 7;
}

static int resolve(parser *p, hx_when_range *out)
{
    since_past(p, &p->s[0]);
    if (p->ranged) return resolve_range(p, out);
    side *s = &p->s[0];
    if (side_empty(s)) return bad(p, "any date or time");
    resolve_side(p, s, NULL, 0, out);
    if ((p->after || p->before) && out->is_point) {
        int64_t day = hx_tz_local_day(p->z, out->start);
        if (p->after) out->end = hx_tz_day_start(p->z, day + 1);
        else out->start = hx_tz_day_start(p->z, day);
        out->is_point = out->start == out->end;
    }
    return HX_OK;
}

int hx_when_parse(const char *expr, int64_t now, const char *tz,
                  hx_when_range *out, hx_err *err)
{
    parser *p;
    if (!expr || !out) return hx_err_set(err, HX_ERR_INVALID, "no time expression");
    if (strlen(expr) > MAX_EXPR)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "time expression too long (%zu bytes, at most %d)",
                          strlen(expr), MAX_EXPR);
    icaltimezone *z = hx_tz_find(tz);
    if (!z) return hx_err_set(err, HX_ERR_NOTFOUND, "unknown time zone '%s'", tz);
    if (!(p = hx_calloc(1, sizeof *p))) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    p->z = z;
    p->now = now;
    p->today = hx_tz_local_day(z, now);
    p->expr = expr;
    p->err = err;
    int rc = lex(p, expr);
    if (rc == HX_OK && p->n == 0) rc = bad(p, "an empty expression");
    if (rc == HX_OK) rc = parse_tokens(p);
    if (rc == HX_OK) rc = resolve(p, out);
    if (rc == HX_OK && p->no_day[0])
        rc = hx_err_set(err, HX_ERR_RANGE, "%s (the time expression '%s')", p->no_day, expr);
    free(p);
    return rc;
}
