/* cal_write.c: changes to events (title, times in the user's zone with a
 * VTIMEZONE, attendees, alarm) and safe writes: atomic, checked to parse
 * back, refused if the file changed on disk since it was read. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/calendar_int.h"

void hx_cal_new_uid(hx_cal *c, char *buf, size_t n)
{
    for (unsigned t = 0;; t++) {
        unsigned char r[16];
        hx_unique_bytes("calendar", 8, t, r, sizeof r);
        size_t k = 0;
        for (int i = 0; i < 16 && k + 3 < n; i++) k += (size_t)snprintf(buf + k, n - k, "%02x", r[i]);
        snprintf(buf + k, n - k, "@hearth");
        if (!hx_cal_find_uid(c, buf, NULL) || t > 1000) return;
    }
}

static int count_vevents(icalcomponent *root)
{
    int n = 0;
    for (icalcomponent *k = icalcomponent_get_first_component(root, ICAL_VEVENT_COMPONENT); k;
         k = icalcomponent_get_next_component(root, ICAL_VEVENT_COMPONENT))
        n++;
    return n;
}

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Serializes root and checks the text parses back with as many events. */
static int serialize_checked(icalcomponent *root, char **out, hx_err *err)
{
    char *text = icalcomponent_as_ical_string_r(root);
    icalcomponent *back = NULL;
    hx_err e = {0};
    *out = NULL;
    if (!text) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (hx_cal_parse(text, &back, &e) || count_vevents(back) != count_vevents(root)) {
        if (back) icalcomponent_free(back);
        free(text);
        return hx_err_set(err, HX_ERR_INTERNAL,
                          "the new calendar text did not read back (%s); nothing written",
                          e.msg[0] ? e.msg : "event count differs");
    }
    icalcomponent_free(back);
    *out = text;
    return HX_OK;
}

/* fstat of f's file in its folder; a link there is not followed. */
static int file_stat(const hx_cal_file *f, struct stat *st)
{
    return fstatat(f->dir->fd, f->name, st, AT_SYMLINK_NOFOLLOW);
}

int hx_cal_save(hx_cal *c, hx_cal_file *f, hx_err *err)
{
    (void)c;
    struct stat st;
    if (file_stat(f, &st) || !S_ISREG(st.st_mode) || st.st_size != f->size ||
        mtime_ns(&st) != f->mtime_ns)
        return hx_err_set(err, HX_ERR_STATE,
                          "%s changed on disk since it was read; nothing written, try again",
                          f->path);
    char *text;
    int rc = serialize_checked(f->root, &text, err);
    if (rc) return rc;
    rc = hx_write_file_atomic_at(f->dir->fd, f->name, text, strlen(text), err);
    free(text);
    if (rc == HX_OK && !file_stat(f, &st)) {
        f->size = st.st_size;
        f->mtime_ns = mtime_ns(&st);
    }
    return rc;
}

/* A new entry of c for the file name just written in dir, holding root. */
static int add_written(hx_cal *c, const hx_root *dir, const char *name, icalcomponent *root,
                       hx_cal_file **out, hx_err *err)
{
    if (c->n_files == c->cap_files) {
        int cap = c->cap_files ? c->cap_files * 2 : 16;
        hx_cal_file *nf = hx_realloc(c->files, (size_t)cap * sizeof *nf);
        if (!nf) return hx_err_set(err, HX_ERR_NOMEM, "out of memory (the event was written)");
        c->files = nf;
        c->cap_files = cap;
    }
    hx_cal_file *f = &c->files[c->n_files++];
    struct stat st;
    char path[4200];
    memset(f, 0, sizeof *f);
    hx_root_join(dir, name, path, sizeof path);
    const char *base = strrchr(dir->path, '/');
    f->dir = dir;
    f->name = hx_strdup(name);
    f->path = hx_strdup(path);
    f->calendar = hx_strdup(base && base[1] ? base + 1 : dir->path);
    f->is_vdir = 1;
    f->root = root;
    if (!file_stat(f, &st)) f->size = st.st_size, f->mtime_ns = mtime_ns(&st);
    *out = f;
    if (!f->name || !f->path || !f->calendar || hx_cal_file_index(f))
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory (the event was written)");
    return HX_OK;
}

int hx_cal_add_file(hx_cal *c, const hx_root *dir, const char *uid, icalcomponent *root,
                    hx_cal_file **out, hx_err *err)
{
    char name[300];
    struct stat st;
    if (strchr(uid, '/') || uid[0] == '.' ||
        (size_t)snprintf(name, sizeof name, "%s.ics", uid) >= sizeof name)
        return hx_err_set(err, HX_ERR_INVALID, "'%s' cannot name a calendar file", uid);
    if (!fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW))
        return hx_err_set(err, HX_ERR_STATE, "%s/%s already exists", dir->path, name);
    char *text;
    int rc = serialize_checked(root, &text, err);
    if (rc) return rc;
    rc = hx_write_file_atomic_at(dir->fd, name, text, strlen(text), err);
    free(text);
    return rc ? rc : add_written(c, dir, name, root, out, err);
}

/* ---- edits ---- */

static void remove_props(icalcomponent *ev, icalproperty_kind kind)
{
    icalproperty *p;
    while ((p = icalcomponent_get_first_property(ev, kind))) {
        icalcomponent_remove_property(ev, p);
        icalproperty_free(p);
    }
}

/* The user's zone's TZID and a VTIMEZONE for it in root (other software
 * needs it to read TZID=...). NULL for UTC (times are written with Z). */
static const char *user_tzid(hx_cal *c, icalcomponent *root)
{
    if (c->tz == icaltimezone_get_utc_timezone()) return NULL;
    const char *tzid = icaltimezone_get_location(c->tz);
    if (!tzid) return NULL;
    if (!icalcomponent_get_timezone(root, tzid)) {
        icalcomponent *vt = icalcomponent_new_clone(icaltimezone_get_component(c->tz));
        icalproperty *p = icalcomponent_get_first_property(vt, ICAL_TZID_PROPERTY);
        if (p) icalproperty_set_tzid(p, tzid);
        icalcomponent_add_component(root, vt);
    }
    return tzid;
}

static void set_time(hx_cal *c, icalcomponent *root, icalcomponent *ev,
                     icalproperty_kind kind, int64_t t, int all_day)
{
    const char *tzid = all_day ? NULL : user_tzid(c, root);
    struct icaltimetype v = hx_cal_ical_time(c->tz, t, all_day);
    if (!all_day && !tzid) {
        v = hx_cal_ical_time(icaltimezone_get_utc_timezone(), t, 0);
        v.zone = icaltimezone_get_utc_timezone();
    }
    remove_props(ev, kind);
    icalproperty *p = kind == ICAL_DTSTART_PROPERTY ? icalproperty_new_dtstart(v)
                                                    : icalproperty_new_dtend(v);
    if (tzid) icalproperty_add_parameter(p, icalparameter_new_tzid(tzid));
    icalcomponent_add_property(ev, p);
}

static icalproperty *person_prop(icalproperty_kind kind, const char *name, const char *email)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "mailto:%s", email);
    icalproperty *p = kind == ICAL_ORGANIZER_PROPERTY ? icalproperty_new_organizer(b.data)
                                                      : icalproperty_new_attendee(b.data);
    hx_buf_free(&b);
    if (name && *name) icalproperty_add_parameter(p, icalparameter_new_cn(name));
    return p;
}

/* Whether an item of list before item has the address email (case
 * aside): a model that wrote one attendee twice invites them once. */
static int listed_before(const cJSON *list, const cJSON *item, const char *email)
{
    char name[256], other[256];
    for (const cJSON *b = list->child; b && b != item; b = b->next)
        if (!hx_parse_address(b->valuestring, name, sizeof name, other, sizeof other) &&
            !strcasecmp(other, email))
            return 1;
    return 0;
}

static int set_attendees(hx_cal *c, icalcomponent *ev, const cJSON *list, hx_err *err)
{
    const hx_config *cfg = c->cfg;
    const cJSON *a;
    char name[256], email[256];
    cJSON_ArrayForEach(a, list) if (!cJSON_IsString(a) ||
                                    hx_parse_address(a->valuestring, name, sizeof name, email,
                                                     sizeof email))
        return hx_address_error("attendees", cJSON_IsString(a) ? a->valuestring : NULL, err);
    if (cJSON_GetArraySize(list) && (!cfg->user_email || !*cfg->user_email))
        return hx_err_set(err, HX_ERR_STATE,
                          "inviting attendees needs your address: set user.email in config.json");
    remove_props(ev, ICAL_ATTENDEE_PROPERTY);
    remove_props(ev, ICAL_ORGANIZER_PROPERTY);
    if (!cJSON_GetArraySize(list)) return HX_OK;
    icalcomponent_add_property(ev, person_prop(ICAL_ORGANIZER_PROPERTY, cfg->user_name,
                                               cfg->user_email));
    cJSON_ArrayForEach(a, list)
    {
        hx_parse_address(a->valuestring, name, sizeof name, email, sizeof email);
        if (listed_before(list, a, email)) continue; /* one person invited once */
        icalproperty *p = person_prop(ICAL_ATTENDEE_PROPERTY, name, email);
        icalproperty_add_parameter(p, icalparameter_new_role(ICAL_ROLE_REQPARTICIPANT));
        icalproperty_add_parameter(p, icalparameter_new_partstat(ICAL_PARTSTAT_NEEDSACTION));
        icalproperty_add_parameter(p, icalparameter_new_rsvp(ICAL_RSVP_TRUE));
        icalcomponent_add_property(ev, p);
    }
    return HX_OK;
}

static void set_alarm(icalcomponent *ev, int minutes)
{
    icalcomponent *k;
    while ((k = icalcomponent_get_first_component(ev, ICAL_VALARM_COMPONENT))) {
        icalcomponent_remove_component(ev, k);
        icalcomponent_free(k);
    }
    if (minutes < 0) return;
    icalcomponent *al = icalcomponent_new(ICAL_VALARM_COMPONENT);
    struct icaltriggertype tr = {icaltime_null_time(), icaldurationtype_from_int(-60 * minutes)};
    icalcomponent_add_property(al, icalproperty_new_action(ICAL_ACTION_DISPLAY));
    icalcomponent_add_property(al, icalproperty_new_trigger(tr));
    const char *s = icalcomponent_get_summary(ev);
    icalcomponent_add_property(al, icalproperty_new_description(s && *s ? s : "Reminder"));
    icalcomponent_add_component(ev, al);
}

static void set_text(icalcomponent *ev, icalproperty_kind kind, const char *v)
{
    if (!v) return;
    remove_props(ev, kind);
    if (!*v) return;
    icalproperty *p = icalproperty_new(kind);
    icalproperty_set_value(p, icalvalue_new_text(v));
    icalcomponent_add_property(ev, p);
}

static void stamp(icalcomponent *ev, int64_t now, int bump)
{
    struct icaltimetype t = hx_cal_ical_time(icaltimezone_get_utc_timezone(), now, 0);
    t.zone = icaltimezone_get_utc_timezone();
    remove_props(ev, ICAL_DTSTAMP_PROPERTY);
    remove_props(ev, ICAL_LASTMODIFIED_PROPERTY);
    icalcomponent_add_property(ev, icalproperty_new_dtstamp(t));
    icalcomponent_add_property(ev, icalproperty_new_lastmodified(t));
    if (!bump && !icalcomponent_get_first_property(ev, ICAL_CREATED_PROPERTY))
        icalcomponent_add_property(ev, icalproperty_new_created(t)); /* a new event */
    icalproperty *sq = icalcomponent_get_first_property(ev, ICAL_SEQUENCE_PROPERTY);
    int seq = sq ? icalproperty_get_sequence(sq) : 0;
    if (!sq) icalcomponent_add_property(ev, sq = icalproperty_new_sequence(0));
    if (bump) icalproperty_set_sequence(sq, seq + 1);
}

int hx_cal_apply_edit(hx_cal *c, icalcomponent *root, icalcomponent *ev,
                      const hx_cal_edit *e, hx_err *err)
{
    int rc;
    if (e->attendees && (rc = set_attendees(c, ev, e->attendees, err))) return rc;
    if (e->title) icalcomponent_set_summary(ev, e->title);
    set_text(ev, ICAL_LOCATION_PROPERTY, e->location);
    set_text(ev, ICAL_DESCRIPTION_PROPERTY, e->description);
    if (e->has_times) {
        remove_props(ev, ICAL_DURATION_PROPERTY);
        set_time(c, root, ev, ICAL_DTSTART_PROPERTY, e->start, e->all_day);
        set_time(c, root, ev, ICAL_DTEND_PROPERTY, e->end, e->all_day);
    }
    if (e->reminder_min != HX_CAL_KEEP_ALARM) set_alarm(ev, e->reminder_min);
    if (e->cancel) {
        remove_props(ev, ICAL_STATUS_PROPERTY);
        icalcomponent_add_property(ev, icalproperty_new_status(ICAL_STATUS_CANCELLED));
    }
    stamp(ev, hx_now(NULL), e->bump_sequence);
    return HX_OK;
}

icalcomponent *hx_cal_new_event(hx_cal *c, const char *uid, icalcomponent **root)
{
    (void)c;
    *root = icalcomponent_new(ICAL_VCALENDAR_COMPONENT);
    icalcomponent_add_property(*root, icalproperty_new_version("2.0"));
    icalcomponent_add_property(*root, icalproperty_new_prodid("-//Hearth//Hearth 0.1//EN"));
    icalcomponent *ev = icalcomponent_new(ICAL_VEVENT_COMPONENT);
    icalcomponent_set_uid(ev, uid);
    icalcomponent_add_property(ev, icalproperty_new_status(ICAL_STATUS_CONFIRMED));
    icalcomponent_add_component(*root, ev);
    return ev;
}
