/* tz.c: civil dates and IANA time zones for the tools, through libical's
 * zones (built from the system tzdata), never the process-global TZ. */
#include <stdio.h>
#include <string.h>

#include "tools/tools_int.h"

int hx_days_in_month(int y, int m)
{
    static const int n[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12) return 0;
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
    return n[m - 1];
}

int hx_weekday(int64_t days)
{
    int64_t w = (days + 4) % 7; /* 1970-01-01 was a Thursday */
    return (int)(w < 0 ? w + 7 : w);
}

/* IANA names only: letters, digits, "_+-/", no "..", so that libical never
 * opens a path the name was not meant to reach. */
static int tz_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n > 64 || s[0] == '/' || strstr(s, "..")) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || strchr("_+-/", *s)))
            return 0;
    return 1;
}

icaltimezone *hx_tz_find(const char *name)
{
    if (name && *name && !tz_name_ok(name)) return NULL;
    if (!name || !*name || !strcmp(name, "UTC") || !strcmp(name, "Etc/UTC") ||
        !strcmp(name, "Z"))
        return icaltimezone_get_utc_timezone();
    return icaltimezone_get_builtin_timezone(name);
}

int64_t hx_tz_to_utc(icaltimezone *z, const hx_civil *c)
{
    struct icaltimetype t = icaltime_null_time();
    t.year = c->year;
    t.month = c->month;
    t.day = c->day;
    t.hour = c->hour;
    t.minute = c->min;
    t.second = c->sec;
    t.zone = z;
    if (z == icaltimezone_get_utc_timezone())
        return hx_days_from_civil(c->year, c->month, c->day) * 86400 +
               c->hour * 3600 + c->min * 60 + c->sec;
    return (int64_t)icaltime_as_timet_with_zone(t, z);
}

void hx_tz_from_utc(icaltimezone *z, int64_t t, hx_civil *c, int *off)
{
    int64_t days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    int64_t secs = t - days * 86400;
    struct icaltimetype u = icaltime_null_time();
    hx_civil_from_days(days, &u.year, &u.month, &u.day);
    u.hour = (int)(secs / 3600);
    u.minute = (int)(secs / 60 % 60);
    u.second = (int)(secs % 60);
    u.zone = icaltimezone_get_utc_timezone();
    int is_dst = 0, o = icaltimezone_get_utc_offset_of_utc_time(z, &u, &is_dst);
    int64_t lt = t + o;
    days = lt >= 0 ? lt / 86400 : -((-lt + 86399) / 86400);
    secs = lt - days * 86400;
    hx_civil_from_days(days, &c->year, &c->month, &c->day);
    c->hour = (int)(secs / 3600);
    c->min = (int)(secs / 60 % 60);
    c->sec = (int)(secs % 60);
    if (off) *off = o;
}

int64_t hx_tz_local_day(icaltimezone *z, int64_t t)
{
    hx_civil c;
    hx_tz_from_utc(z, t, &c, NULL);
    return hx_days_from_civil(c.year, c.month, c.day);
}

int64_t hx_tz_day_start(icaltimezone *z, int64_t day)
{
    hx_civil c = {0};
    hx_civil_from_days(day, &c.year, &c.month, &c.day);
    return hx_tz_to_utc(z, &c);
}

void hx_tz_format(icaltimezone *z, int64_t t, int date_only, char *buf,
                  size_t n)
{
    hx_civil c;
    int off;
    hx_tz_from_utc(z, t, &c, &off);
    if (date_only) {
        snprintf(buf, n, "%04d-%02d-%02d", c.year, c.month, c.day);
        return;
    }
    int a = off < 0 ? -off : off;
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", c.year,
             c.month, c.day, c.hour, c.min, c.sec, off < 0 ? '-' : '+',
             a / 3600, a / 60 % 60);
}

int hx_when_format(int64_t t, const char *tz, int date_only, char *buf,
                   size_t n)
{
    icaltimezone *z = hx_tz_find(tz);
    if (!z || n < 26) return -1;
    hx_tz_format(z, t, date_only, buf, n);
    return (int)strlen(buf);
}

const char *hx_when_weekday(int64_t t, const char *tz)
{
    static const char *const names[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                         "Thursday", "Friday", "Saturday"};
    icaltimezone *z = hx_tz_find(tz);
    return z ? names[hx_weekday(hx_tz_local_day(z, t))] : "";
}

int hx_when_utc_offset(const char *tz, int64_t t)
{
    icaltimezone *z = hx_tz_find(tz);
    hx_civil c;
    int off = 0;
    if (z) hx_tz_from_utc(z, t, &c, &off);
    return off;
}

int hx_when_tz_known(const char *tz)
{
    return hx_tz_find(tz) != NULL;
}
