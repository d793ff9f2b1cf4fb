/* governor.c: battery, thermal zones and load read from sysfs/procfs trees
 * (overridable for tests), and the leveled policy with hysteresis. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "engine/governor.h"

/* ---- parsers ---- */

static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s)) (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1])) (*n)--;
}

int hx_sysfs_parse_long(const char *text, size_t n, long lo, long hi, long *out)
{
    if (!text) return -1;
    trim(&text, &n);
    size_t i = n && (text[0] == '-' || text[0] == '+');
    if (i == n || n - i > 18) return -1; /* empty, or beyond any long */
    long v = 0;
    for (; i < n; i++) {
        if (text[i] < '0' || text[i] > '9') return -1;
        v = v * 10 + (text[i] - '0');
    }
    if (text[0] == '-') v = -v;
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int word_is(const char *text, size_t n, const char *w)
{
    return n == strlen(w) && !memcmp(text, w, n);
}

int hx_sysfs_parse_status(const char *text, size_t n)
{
    if (!text) return HX_POWER_UNKNOWN;
    trim(&text, &n);
    if (word_is(text, n, "Charging") || word_is(text, n, "Full") ||
        word_is(text, n, "Not charging"))
        return 1;
    if (word_is(text, n, "Discharging")) return 0;
    return HX_POWER_UNKNOWN;
}

int hx_procfs_parse_load(const char *text, size_t n, double *out)
{
    char buf[32];
    if (!text) return -1;
    trim(&text, &n);
    size_t k = 0;
    while (k < n && k < sizeof buf - 1 && (isdigit((unsigned char)text[k]) || text[k] == '.'))
        buf[k] = text[k], k++;
    buf[k] = 0;
    if (k == 0 || (k < n && !isspace((unsigned char)text[k]))) return -1;
    char *end;
    double v = strtod(buf, &end);
    if (*end || !isfinite(v) || v < 0) return -1;
    *out = v;
    return 0;
}

/* ---- reading files ---- */

/* The first bytes of dir/name into buf (NUL-terminated); length, or -1
 * if it cannot be read (absent: that is not a problem). */
static int read_small(const char *dir, const char *name, char *buf, size_t cap)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return (int)n;
}

static void note(hx_power *pw, const char *dir, const char *name, const char *what)
{
    if (!pw->problem[0])
        snprintf(pw->problem, sizeof pw->problem, "%s/%s: %s", dir, name, what);
}

/* An integer file in [lo, hi]: 0 with *v, 1 absent, -1 malformed (noted). */
static int read_long(hx_power *pw, const char *dir, const char *name, long lo,
                     long hi, long *v)
{
    char buf[64];
    int n = read_small(dir, name, buf, sizeof buf);
    if (n < 0) return 1;
    if (hx_sysfs_parse_long(buf, (size_t)n, lo, hi, v) == 0) return 0;
    note(pw, dir, name, "not a number in range, ignored");
    return -1;
}

/* ---- power supplies ---- */

static void read_battery(hx_power *pw, const char *dir)
{
    char buf[64];
    int n = read_small(dir, "scope", buf, sizeof buf);
    const char *t = buf;
    size_t len = n > 0 ? (size_t)n : 0;
    trim(&t, &len);
    if (word_is(t, len, "Device")) return; /* a mouse's or a headset's */
    pw->n_batteries++;
    long cap;
    if (read_long(pw, dir, "capacity", 0, 100, &cap) == 0 &&
        (pw->capacity == HX_POWER_UNKNOWN || cap < pw->capacity))
        pw->capacity = (int)cap;
    n = read_small(dir, "status", buf, sizeof buf);
    int st = n < 0 ? HX_POWER_UNKNOWN : hx_sysfs_parse_status(buf, (size_t)n);
    if (n >= 0 && st == HX_POWER_UNKNOWN && strncmp(buf, "Unknown", 7))
        note(pw, dir, "status", "unknown status, ignored");
    if (st == 1) pw->charging = 1;
    else if (st == 0 && pw->charging == HX_POWER_UNKNOWN) pw->charging = 0;
}

static void read_supply(hx_power *pw, const char *dir)
{
    char type[64];
    int n = read_small(dir, "type", type, sizeof type);
    if (n <= 0) return;
    const char *t = type;
    size_t len = (size_t)n;
    trim(&t, &len);
    if (word_is(t, len, "Battery")) {
        read_battery(pw, dir);
        return;
    }
    long on; /* Mains, USB, Wireless...: online means external power */
    if (read_long(pw, dir, "online", 0, 2, &on) == 0 && on > 0) pw->charging = 1;
}

/* Calls fn on root/sub/NAME for each entry whose name starts with prefix. */
static void each_dir(hx_power *pw, const char *root, const char *sub,
                     const char *prefix, void (*fn)(hx_power *, const char *))
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, sub);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix))) continue;
        char dir[1024];
        if (snprintf(dir, sizeof dir, "%s/%s", path, e->d_name) < (int)sizeof dir)
            fn(pw, dir);
    }
    closedir(d);
}

static void read_zone(hx_power *pw, const char *dir)
{
    long mc; /* millidegrees; -50 C .. 200 C is what a sensor can mean */
    if (read_long(pw, dir, "temp", -50000, 200000, &mc)) return;
    double c = (double)mc / 1000.0;
    if (!pw->n_zones++ || c > pw->temp_c) pw->temp_c = c;
}

static void read_load(hx_power *pw, const char *procfs)
{
    char buf[128];
    int n = read_small(procfs, "loadavg", buf, sizeof buf);
    if (n >= 0 && hx_procfs_parse_load(buf, (size_t)n, &pw->load1))
        note(pw, procfs, "loadavg", "malformed, ignored");
}

static const char *root_of(const char *given, const char *env, const char *dflt)
{
    const char *e = getenv(env);
    return given ? given : e && *e ? e : dflt;
}

void hx_power_read(const char *sysfs, const char *procfs, hx_power *pw)
{
    memset(pw, 0, sizeof *pw);
    pw->capacity = pw->charging = HX_POWER_UNKNOWN;
    pw->load1 = -1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pw->n_cpus = cpus < 1 ? 1 : (int)cpus;
    sysfs = root_of(sysfs, "HEARTH_SYSFS", "/sys");
    each_dir(pw, sysfs, "class/power_supply", "", read_supply);
    each_dir(pw, sysfs, "class/thermal", "thermal_zone", read_zone);
    read_load(pw, root_of(procfs, "HEARTH_PROCFS", "/proc"));
}

/* ---- policy ---- */

struct hx_governor {
    hx_governor_params p;
    int battery_level, thermal_level;
};

hx_governor_params hx_governor_default_params(void)
{
    hx_governor_params p = {0, 20, 10, 5, 70.0, 85.0, 5.0, 2048, 1024,
                            30, 45.0, 0.3};
    return p;
}

hx_governor *hx_governor_new(const hx_governor_params *p)
{
    hx_governor *g = hx_calloc(1, sizeof *g);
    if (g) g->p = p ? *p : hx_governor_default_params();
    return g;
}

void hx_governor_free(hx_governor *g) { free(g); }

/* Level 0..2 of x where higher is worse: up to L as soon as x >= on[L-1],
 * down from L only once x < on[L-1] - hyst. */
static int hyst_level(int cur, double x, const double on[2], double hyst)
{
    int up = x >= on[1] ? 2 : x >= on[0] ? 1 : 0;
    if (up >= cur) return up;
    while (cur > up && x < on[cur - 1] - hyst) cur--;
    return cur;
}

static int battery_level(const hx_governor *g, const hx_power *pw)
{
    if (pw->n_batteries == 0 || pw->charging != 0) return 0;
    if (pw->capacity == HX_POWER_UNKNOWN) return g->battery_level;
    const double on[2] = {-(double)g->p.low_battery, -(double)g->p.critical_battery};
    /* whole percents: back at threshold + hyst leaves the level */
    return hyst_level(g->battery_level, -(double)pw->capacity, on,
                      g->p.battery_hyst - 0.5);
}

static int thermal_level(const hx_governor *g, const hx_power *pw)
{
    if (pw->n_zones == 0) return 0;
    const double on[2] = {g->p.hot_c, g->p.critical_c};
    return hyst_level(g->thermal_level, pw->temp_c, on, g->p.thermal_hyst);
}

/* Whether the nightly job may run (idle, charging, cool); when not, the
 * first reason in d->nightly_why. */
static int nightly_ok(const hx_governor *g, const hx_power *pw, hx_gov_decision *d)
{
    int powered = pw->n_batteries == 0 ||
                  (pw->charging == 1 && pw->capacity >= g->p.nightly_battery);
    int cool = pw->n_zones == 0 || pw->temp_c < g->p.nightly_c;
    int idle = pw->load1 < 0 || pw->load1 / pw->n_cpus < g->p.idle_load;
    if (!powered)
        snprintf(d->nightly_why, sizeof d->nightly_why, "not charging, or the battery is below "
                 "%d%% (battery %d%%)", g->p.nightly_battery, pw->capacity);
    else if (!cool)
        snprintf(d->nightly_why, sizeof d->nightly_why, "too warm: %.1f C, it waits for "
                 "below %.1f C", pw->temp_c, g->p.nightly_c);
    else if (!idle)
        snprintf(d->nightly_why, sizeof d->nightly_why, "busy: load %.2f on %d CPUs, it "
                 "waits for below %.2f", pw->load1, pw->n_cpus, g->p.idle_load * pw->n_cpus);
    return powered && cool && idle;
}

static void explain(const hx_power *pw, hx_gov_decision *d)
{
    static const char *const names[] = {"normal", "saving", "critical"};
    char bat[48] = "no battery", heat[32] = "no thermal zones";
    if (pw->n_batteries)
        snprintf(bat, sizeof bat, "battery %d%% %s", pw->capacity,
                 pw->charging == 1 ? "charging" : pw->charging == 0 ? "discharging" : "status unknown");
    if (pw->n_zones) snprintf(heat, sizeof heat, "%.1f C", pw->temp_c);
    snprintf(d->why, sizeof d->why, "%s (%s, %s)", names[d->level], bat, heat);
}

void hx_governor_update(hx_governor *g, const hx_power *pw, hx_gov_decision *d)
{
    memset(d, 0, sizeof *d);
    d->battery_level = g->battery_level = battery_level(g, pw);
    d->thermal_level = g->thermal_level = thermal_level(g, pw);
    d->level = d->battery_level > d->thermal_level ? d->battery_level : d->thermal_level;
    int max = g->p.max_threads > 0 ? g->p.max_threads : pw->n_cpus;
    d->n_threads = d->level == 0 ? max : d->level == 1 ? (max + 1) / 2 : 1;
    d->ctx_cap = d->level == 0 ? 0 : d->level == 1 ? g->p.saving_ctx : g->p.critical_ctx;
    explain(pw, d);
    d->nightly_ok = nightly_ok(g, pw, d) && d->level == 0;
    if (!d->nightly_ok && !d->nightly_why[0])
        snprintf(d->nightly_why, sizeof d->nightly_why, "%s", d->why);
}

int hx_gov_cap_ctx(const hx_gov_decision *d, int n_ctx, int n_ctx_default)
{
    int want = n_ctx > 0 ? n_ctx : n_ctx_default;
    return d->ctx_cap > 0 && (want <= 0 || want > d->ctx_cap) ? d->ctx_cap : want;
}

int hx_gov_threads(const hx_gov_decision *d, int requested)
{
    if (requested <= 0) return d->n_threads;
    return requested < d->n_threads ? requested : d->n_threads;
}
