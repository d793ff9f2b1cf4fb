/* when.c: a deterministic reader of time expressions ("tomorrow", "next
 * Tuesday afternoon", "Dec 3 at 2pm", "in two hours", ISO 8601) in the
 * user's time zone, giving a point or a [start, end) range.
 *
 * The choices, so that results are predictable:
 * - A day ("today", "Dec 3", "2026-12-03", "Monday") is local midnight to
 *   the next local midnight (23 or 25 hours on DST days); whole_days = 1.
 * - "this week" / "next week" / "last week": Monday 00:00 to the Monday
 *   after (ISO weeks); "this/next weekend": Saturday 00:00 to Monday 00:00;
 *   "this/next month": the 1st to the 1st of the month after.
 * - "Tuesday", "on Tuesday", "this Tuesday": the next Tuesday, today
 *   included. "next Tuesday": the first Tuesday strictly after today.
 *   "last Tuesday": the last one strictly before today.
 * - Parts of a day: morning 08:00-12:00, afternoon 12:00-17:00, evening
 *   17:00-21:00, night and "tonight" 18:00-24:00, lunch 12:00-14:00; points:
 *   noon/midday 12:00, midnight 24:00 (the end of that day), "end of day"
 *   (eod, close of business) 17:00, "end of week" Friday 17:00.
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
 * - "after 3pm": 15:00 to the end of that day; "before noon": 00:00 to 12:00.
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
    int64_t dur;     /* "for an hour", seconds */
} side;

typedef struct parser {
    tok t[MAX_TOK];
    int n, i;
    side s[2];
    int cur;      /* which side is being filled */
    int ranged;   /* a connector was seen */
    int between;  /* "between" seen: "and" connects */
    int after, before;
    int64_t now, today;
    icaltimezone *z;
    const char *expr;
    hx_err *err;
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
    if (c.month < 1 || c.month > 12 || c.day < 1 ||
        c.day > hx_days_in_month(c.year, c.month))
        return bad(p, "the date (no such day)"), -1;
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

static int64_t month_start(int64_t day, int add, int *len)
{
    int y, m, d;
    hx_civil_from_days(day, &y, &m, &d);
    m += add;
    while (m > 12) m -= 12, y++;
    while (m < 1) m += 12, y--;
    *len = hx_days_in_month(y, m);
    return hx_days_from_civil(y, m, 1);
}

/* "this|next|last" + weekday / week / weekend / month / part of day. */
static int r_relative_word(parser *p)
{
    int rel = is_word(p, 0, "this") ? 0 : is_word(p, 0, "next") ? 1
              : is_word(p, 0, "last") ? -1 : 9;
    if (rel == 9 || !at(p, 1)) return 0;
    const tok *t = at(p, 1);
    int wd = word_weekday(t), len;
    int64_t today = p->today;
    p->i += 2;
    if (wd >= 0) {
        int ahead = (wd - hx_weekday(today) + 7) % 7;
        if (rel == 1 && ahead == 0) ahead = 7;
        if (rel == -1) ahead = ahead ? ahead - 7 : -7;
        return set_day(p, today + ahead, 0);
    }
    if (!strcmp(t->w, "week"))
        return set_day(p, week_start(today) + 7 * rel, 7);
    if (!strcmp(t->w, "weekend"))
        return set_day(p, week_start(today) + 5 + 7 * rel, 2);
    if (!strcmp(t->w, "month")) {
        int64_t d = month_start(today, rel, &len);
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

static int r_weekday(parser *p)
{
    int wd = word_weekday(at(p, 0));
    if (wd < 0) return 0;
    p->i++;
    cur(p)->by_weekday = 1;
    return set_day(p, p->today + (wd - hx_weekday(p->today) + 7) % 7, 0);
}

/* Skips an ordinal suffix after a number ("3rd"). */
static void skip_ordinal(parser *p)
{
    if (is_word(p, 0, "st") || is_word(p, 0, "nd") || is_word(p, 0, "rd") ||
        is_word(p, 0, "th"))
        p->i++;
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

static int month_day(parser *p, int m, int d)
{
    int y = opt_year(p);
    int64_t day;
    if (y) {
        if (d < 1 || d > hx_days_in_month(y, m + 1))
            return fail(p, "the day of the month (no such day)");
        day = hx_days_from_civil(y, m + 1, d);
    } else if (d < 1 || d > 31 || (day = nearest_month_day(p->today, m + 1, d)) < 0) {
        return fail(p, "the day of the month (no such day)");
    }
    return set_day(p, day, 0);
}

/* "Dec 3", "December 3rd, 2026" */
static int r_month_first(parser *p)
{
    int m = word_month(at(p, 0));
    const tok *t = at(p, 1);
    if (m < 0 || !t || t->kind != T_NUM || t->ndig > 2) return 0;
    p->i += 2;
    skip_ordinal(p);
    return month_day(p, m, t->num);
}

/* "3 Dec", "3rd of December" */
static int r_day_first(parser *p)
{
    const tok *t = at(p, 0);
    if (!t || t->kind != T_NUM || t->ndig > 2) return 0;
    int k = 1;
    if (at(p, k) && at(p, k)->kind == T_WORD &&
        (!strcmp(at(p, k)->w, "st") || !strcmp(at(p, k)->w, "nd") ||
         !strcmp(at(p, k)->w, "rd") || !strcmp(at(p, k)->w, "th")))
        k++;
    if (is_word(p, k, "of")) k++;
    int m = word_month(at(p, k));
    if (m < 0) return 0;
    p->i += k + 1;
    return month_day(p, m, t->num);
}

static int r_iso(parser *p)
{
    const tok *t = at(p, 0);
    if (!t || (t->kind != T_DATE && t->kind != T_STAMP)) return 0;
    p->i++;
    if (t->kind == T_DATE) return set_day(p, t->day, 0);
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

/* "end of [the] day|week|month", "close of business", "cob" */
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
    if (!is_word(p, 0, "end") || !is_word(p, 1, "of")) return 0;
    k = is_word(p, 2, "the") ? 3 : 2;
    if (is_word(p, k, "day")) {
        p->i += k + 1;
        cur(p)->part = N_PARTS;
        return 1;
    }
    if (is_word(p, k, "week")) {
        p->i += k + 1;
        cur(p)->part = N_PARTS;
        if (cur(p)->has_day) return 1;
        return set_day(p, week_start(p->today) + 4, 0);
    }
    return 0;
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

/* Connectors and words that only say what follows. */
static int r_connector(parser *p)
{
    const tok *t = at(p, 0);
    if (!t) return 0;
    int conn = (t->kind == T_PUNCT && t->p == '-') ||
               is_word(p, 0, "to") || is_word(p, 0, "until") ||
               is_word(p, 0, "till") || is_word(p, 0, "through") ||
               is_word(p, 0, "thru") || (p->between && is_word(p, 0, "and"));
    if (conn) {
        if (p->ranged) return fail(p, "a second 'to'");
        p->ranged = 1;
        p->cur = 1;
        p->i++;
        return 1;
    }
    if (is_word(p, 0, "between")) p->between = 1;
    if (is_word(p, 0, "after") || is_word(p, 0, "since")) p->after = 1;
    if (is_word(p, 0, "before")) p->before = 1;
    static const char *const filler[] = {"at", "on", "the", "of", "from",
                                         "between", "by", "in", "around",
                                         "about", "after", "since", "before"};
    for (size_t k = 0; t->kind == T_WORD && k < sizeof filler / sizeof filler[0];
         k++)
        if (!strcmp(t->w, filler[k])) {
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
        r_iso,     r_now,   r_fixed_day, r_relative_word, r_weekday,
        r_month_first, r_day_first, r_in,  r_for, r_end_of,
        r_time,    r_part,  r_connector,
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
        r->start = r->end = s->stamp;
        r->is_point = 1;
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

static int resolve(parser *p, hx_when_range *out)
{
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
    free(p);
    return rc;
}
