/* cal_store.c: loads calendars (vdir directories of .ics files and single
 * multi-event .ics files) beneath the registry's roots with libical,
 * reporting bad files and going on; resolves the time zone of each
 * date-time value. */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/calendar_int.h"

void hx_cal_problem(hx_cal *c, const char *file, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "file", file);
    cJSON_AddStringToObject(p, "error", msg);
    cJSON_AddItemToArray(c->problems, p);
}

void hx_cal_free(hx_cal *c)
{
    if (!c) return;
    for (int i = 0; i < c->n_files; i++) {
        free(c->files[i].path);
        free(c->files[i].name);
        free(c->files[i].calendar);
        icalcomponent_free(c->files[i].root);
        free(c->files[i].events);
    }
    free(c->files);
    cJSON_Delete(c->problems);
    free(c);
}

/* The first X-LIC-ERROR libical left in comp or its children, or NULL. */
static const char *lic_error(icalcomponent *comp)
{
    icalproperty *p = icalcomponent_get_first_property(comp, ICAL_XLICERROR_PROPERTY);
    if (p) return icalproperty_get_xlicerror(p);
    for (icalcomponent *k = icalcomponent_get_first_component(comp, ICAL_ANY_COMPONENT);
         k; k = icalcomponent_get_next_component(comp, ICAL_ANY_COMPONENT)) {
        const char *e = lic_error(k);
        if (e) return e;
    }
    return NULL;
}

static int count_events(icalcomponent *root)
{
    int n = 0;
    for (icalcomponent *k = icalcomponent_get_first_component(root, ICAL_ANY_COMPONENT); k;
         k = icalcomponent_get_next_component(root, ICAL_ANY_COMPONENT)) {
        icalcomponent_kind kind = icalcomponent_isa(k);
        if (kind == ICAL_VEVENT_COMPONENT || kind == ICAL_VTODO_COMPONENT ||
            kind == ICAL_VJOURNAL_COMPONENT)
            n++;
    }
    return n;
}

/* Checks that every VEVENT has a UID and a DTSTART we can read. */
static int check_events(icalcomponent *root, hx_err *err)
{
    for (icalcomponent *k = icalcomponent_get_first_component(root, ICAL_VEVENT_COMPONENT);
         k; k = icalcomponent_get_next_component(root, ICAL_VEVENT_COMPONENT)) {
        const char *uid = icalcomponent_get_uid(k);
        if (!uid || !*uid) return hx_err_set(err, HX_ERR_FORMAT, "a VEVENT without UID");
        icalproperty *p = icalcomponent_get_first_property(k, ICAL_DTSTART_PROPERTY);
        if (!p || icaltime_is_null_time(icalproperty_get_dtstart(p)) ||
            !icaltime_is_valid_time(icalproperty_get_dtstart(p)))
            return hx_err_set(err, HX_ERR_FORMAT, "event '%s' has no valid DTSTART", uid);
    }
    return HX_OK;
}

int hx_cal_parse(const char *text, icalcomponent **root, hx_err *err)
{
    *root = NULL;
    if (!strstr(text, "BEGIN:VCALENDAR"))
        return hx_err_set(err, HX_ERR_FORMAT, "not an iCalendar file (no BEGIN:VCALENDAR)");
    icalcomponent *r = icalparser_parse_string(text);
    icalerror_clear_errno();
    if (!r || icalcomponent_isa(r) != ICAL_VCALENDAR_COMPONENT) {
        if (r) icalcomponent_free(r);
        return hx_err_set(err, HX_ERR_FORMAT, "not a well-formed VCALENDAR");
    }
    if (!count_events(r)) hx_err_set(err, HX_ERR_FORMAT, "no VEVENT or VTODO in it");
    else if (check_events(r, err) == HX_OK) {
        *root = r;
        return HX_OK;
    }
    icalcomponent_free(r);
    return HX_ERR_FORMAT;
}

/* Reads and parses name beneath r (a regular file, no link followed) and
 * adds it to c; a file that cannot be is a problem, not an error. */
static int add_file(hx_cal *c, const hx_root *r, const char *name, const char *calname,
                    int is_vdir)
{
    char *text = NULL, path[4200];
    size_t len;
    hx_err e = {0};
    icalcomponent *root = NULL;
    struct stat st;
    hx_root_join(r, name, path, sizeof path);
    if (hx_root_read(r, name, HX_CAL_MAX_FILE, &text, &len, &st, &e) ||
        hx_cal_parse(text, &root, &e)) {
        hx_cal_problem(c, path, "skipped: %s", e.msg[0] ? e.msg : "cannot read it");
        if (root) icalcomponent_free(root);
        free(text);
        return HX_OK;
    }
    free(text);
    const char *lic = lic_error(root);
    if (lic) hx_cal_problem(c, path, "read in part: %s", lic);
    if (c->n_files == c->cap_files) {
        int cap = c->cap_files ? c->cap_files * 2 : 64;
        hx_cal_file *nf = hx_realloc(c->files, (size_t)cap * sizeof *nf);
        if (!nf) {
            icalcomponent_free(root);
            return HX_ERR_NOMEM;
        }
        c->files = nf;
        c->cap_files = cap;
    }
    hx_cal_file *f = &c->files[c->n_files++];
    memset(f, 0, sizeof *f);
    f->dir = r;
    f->name = hx_strdup(name);
    f->path = hx_strdup(path);
    f->calendar = hx_strdup(calname);
    f->is_vdir = is_vdir;
    f->root = root;
    f->size = st.st_size;
    f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return f->path && f->name && f->calendar ? hx_cal_file_index(f) : HX_ERR_NOMEM;
}

int hx_cal_file_index(hx_cal_file *f)
{
    int n = icalcomponent_count_components(f->root, ICAL_VEVENT_COMPONENT), i = 0;
    free(f->events);
    f->events = hx_calloc((size_t)(n ? n : 1), sizeof *f->events);
    f->n_events = 0;
    if (!f->events) return HX_ERR_NOMEM;
    for (icalcomponent *k = icalcomponent_get_first_component(f->root, ICAL_VEVENT_COMPONENT);
         k && i < n; k = icalcomponent_get_next_component(f->root, ICAL_VEVENT_COMPONENT))
        f->events[i++] = k;
    f->n_events = i;
    return HX_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s && s[1] ? s + 1 : path;
}

/* Sorted names of the *.ics files of the root folder r (caller frees
 * each and the array). */
static char **list_ics(const hx_root *r, int *n)
{
    hx_err e;
    int fd = hx_root_dir(r, "", 0, &e);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    char **names = NULL;
    *n = 0;
    if (!d) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    struct dirent *de;
    int cap = 0;
    while ((de = readdir(d)) && *n < HX_CAL_MAX_FILES) {
        size_t l = strlen(de->d_name);
        if (de->d_name[0] == '.' || l < 5 || strcmp(de->d_name + l - 4, ".ics")) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = hx_realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) break;
            names = nn;
        }
        if (!(names[*n] = hx_strdup(de->d_name))) break;
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(names, (size_t)*n, sizeof *names, by_name);
    return names;
}

static int add_dir(hx_cal *c, const hx_root *r)
{
    int n, rc = HX_OK;
    char **names = list_ics(r, &n);
    for (int i = 0; i < n; i++) {
        if (rc == HX_OK) rc = add_file(c, r, names[i], base_name(r->path), 1);
        free(names[i]);
    }
    free(names);
    return rc;
}

int hx_cal_load(const hx_tools *reg, hx_cal **out, hx_err *err)
{
    hx_cal *c = hx_calloc(1, sizeof *c);
    *out = NULL;
    if (!c || !(c->problems = cJSON_CreateArray())) {
        free(c);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    icalerror_set_errors_are_fatal(0);
    c->reg = reg;
    c->cfg = hx_tools_config(reg);
    c->tz = hx_tools_tz(reg);
    int rc = HX_OK;
    for (int i = 0; rc == HX_OK && c->cfg && i < c->cfg->n_calendars; i++) {
        hx_err e = {0};
        const hx_root *r = hx_tools_root(reg, HX_ROOT_CALENDAR, i, 0, &e);
        if (!r) hx_cal_problem(c, c->cfg->calendars[i], "calendar not opened: %s", e.msg);
        else if (r->file) rc = add_file(c, r, r->file, r->file, 0);
        else rc = add_dir(c, r);
    }
    if (rc) {
        hx_cal_free(c);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory loading calendars");
    }
    *out = c;
    return HX_OK;
}

/* ---- time zones of values ---- */

/* A TZID as other software writes it: "Europe/Paris", or with a prefix
 * ("/freeassociation.sourceforge.net/Europe/Paris", "/mozilla.org/.../X"). */
static icaltimezone *zone_by_tzid(const char *tzid)
{
    icaltimezone *z = hx_tz_find(tzid);
    for (const char *s = tzid; !z && (s = strchr(s, '/')); s++) {
        const char *rest = s + 1;
        if (strchr(rest, '/')) z = hx_tz_find(rest);
    }
    return z;
}

icaltimezone *hx_cal_prop_zone(hx_cal *c, hx_cal_file *f, icalproperty *p,
                               struct icaltimetype t)
{
    if (t.is_date) return c->tz;
    if (icaltime_is_utc(t)) return icaltimezone_get_utc_timezone();
    icalparameter *par = p ? icalproperty_get_first_parameter(p, ICAL_TZID_PARAMETER) : NULL;
    const char *tzid = par ? icalparameter_get_tzid(par) : NULL;
    if (!tzid) return c->tz; /* floating: the user's local time */
    icaltimezone *z = icalcomponent_get_timezone(f->root, tzid);
    if (!z) z = zone_by_tzid(tzid);
    if (!z && !f->warned_tzid) {
        f->warned_tzid = 1;
        hx_cal_problem(c, f->path, "unknown TZID '%s'; its times are read in %s", tzid,
                       icaltimezone_get_location(c->tz) ? icaltimezone_get_location(c->tz)
                                                        : "UTC");
    }
    return z ? z : c->tz;
}

int64_t hx_cal_prop_time(hx_cal *c, hx_cal_file *f, icalproperty *p,
                         struct icaltimetype t)
{
    hx_civil cv = {t.year, t.month, t.day, 0, 0, 0};
    if (!t.is_date) {
        cv.hour = t.hour;
        cv.min = t.minute;
        cv.sec = t.second;
    }
    return hx_tz_to_utc(hx_cal_prop_zone(c, f, p, t), &cv);
}

struct icaltimetype hx_cal_ical_time(icaltimezone *z, int64_t t, int is_date)
{
    hx_civil cv;
    hx_tz_from_utc(z, t, &cv, NULL);
    struct icaltimetype r = icaltime_null_time();
    r.year = cv.year;
    r.month = cv.month;
    r.day = cv.day;
    r.is_date = is_date;
    if (!is_date) {
        r.hour = cv.hour;
        r.minute = cv.min;
        r.second = cv.sec;
    }
    return r;
}

icalcomponent *hx_cal_find_uid(hx_cal *c, const char *uid, hx_cal_file **file)
{
    for (int i = 0; i < c->n_files; i++)
        for (int j = 0; j < c->files[i].n_events; j++) {
            icalcomponent *k = c->files[i].events[j];
            const char *u = icalcomponent_get_uid(k);
            if (u && !strcmp(u, uid) &&
                !icalcomponent_get_first_property(k, ICAL_RECURRENCEID_PROPERTY)) {
                if (file) *file = &c->files[i];
                return k;
            }
        }
    return NULL;
}
