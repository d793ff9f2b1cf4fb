/* time.c: the monotonic clock, the replayable "now" (HEARTH_NOW) and the
 * terminal progress line. */
#include "base.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double hx_time_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t hx_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void hx_civil_from_days(int64_t z, int *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

/* Parses YYYY-MM-DDTHH:MM:SS followed by Z or +HH:MM / -HH:MM. */
static int parse_now(const char *s, int64_t *t, int *off)
{
    int y, mo, d, h, mi, se, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) !=
        6)
        return -1;
    const char *z = s + n;
    int o = 0;
    if (*z == 'Z' && !z[1]) o = 0;
    else if ((*z == '+' || *z == '-') && strlen(z) == 6 && z[3] == ':') {
        int oh = atoi(z + 1), om = atoi(z + 4);
        o = (oh * 3600 + om * 60) * (*z == '-' ? -1 : 1);
    } else
        return -1;
    *t = hx_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - o;
    *off = o;
    return 0;
}

int64_t hx_now(int *utc_offset_seconds)
{
    const char *env = getenv("HEARTH_NOW");
    int64_t t;
    int off;
    if (env && *env && parse_now(env, &t, &off) == 0) {
        if (utc_offset_seconds) *utc_offset_seconds = off;
        return t;
    }
    time_t now = time(NULL);
    struct tm lt;
    localtime_r(&now, &lt);
    if (utc_offset_seconds) *utc_offset_seconds = (int)lt.tm_gmtoff;
    return (int64_t)now;
}

/* ---- progress ---- */

/* Redraws at most this often: a terminal line, never a flood. */
#define PROGRESS_EVERY 0.25
/* On a pipe or file, one final line for work that lasted this long. */
#define PROGRESS_LOG_AFTER 2.0

void hx_progress_start(hx_progress *p, const char *label, double total)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    p->t_start = p->t_last = hx_time_mono();
    p->tty = isatty(STDERR_FILENO);
}

static void fmt_secs(char *buf, size_t n, double s)
{
    if (s < 0 || s > 1e7) snprintf(buf, n, "--");
    else if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%.0fs", s);
}

/* "done/total  pct  ETA" with a known total; the count alone without. */
static void draw(const hx_progress *p, double now, const char *extra)
{
    double el = now - p->t_start;
    char eta[32];
    if (p->total > 0) {
        double frac = p->done < p->total ? p->done / p->total : 1;
        fmt_secs(eta, sizeof eta, frac > 0 ? el / frac - el : -1);
        fprintf(stderr, "\r\033[K%s  %.0f/%.0f  %3.0f%%  ETA %s", p->label, p->done,
                p->total, frac * 100, eta);
    } else {
        fmt_secs(eta, sizeof eta, el);
        fprintf(stderr, "\r\033[K%s  %.0f  %s", p->label, p->done, eta);
    }
    if (extra) fprintf(stderr, "  %s", extra);
    fflush(stderr);
}

void hx_progress_update(hx_progress *p, double done, const char *extra)
{
    p->done = done;
    if (!p->tty) return;
    double now = hx_time_mono();
    if (now - p->t_last < PROGRESS_EVERY) return; /* the first after PROGRESS_EVERY too */
    p->t_last = now;
    p->drawn = 1;
    draw(p, now, extra);
}

void hx_progress_finish(hx_progress *p)
{
    double el = hx_time_mono() - p->t_start;
    char t[32], count[64] = "";
    if (p->tty ? !p->drawn : el < PROGRESS_LOG_AFTER) return;
    fmt_secs(t, sizeof t, el);
    if (p->total > 0) snprintf(count, sizeof count, "  %.0f/%.0f", p->done, p->total);
    else if (p->done > 0) snprintf(count, sizeof count, "  %.0f", p->done);
    fprintf(stderr, "%s%s%s  done in %s\n", p->tty ? "\r\033[K" : "", p->label, count, t);
}
