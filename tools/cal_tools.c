/* cal_tools.c: the calendar tools (calendar.list_events, create_event,
 * update_event, cancel_event; free_busy and find_slots are in
 * cal_slots.c) and their registration. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/calendar_int.h"

#define MAX_RANGE_DAYS 400

int hx_cal_tool_open(hx_tools *reg, hx_cal **c, hx_err *err)
{
    return hx_cal_load(reg, c, err);
}

/* The query range from "range", or "start"/"end", or dflt. */
int hx_cal_arg_range(hx_tools *reg, const cJSON *args, const char *dflt, int64_t *from,
                     int64_t *to, hx_err *err)
{
    hx_when_range r, e;
    int rc;
    cJSON *d = NULL;
    const char *key = hx_arg_str(args, "range") ? "range" : hx_arg_str(args, "start") ? "start" : NULL;
    if (!key) {
        d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "range", dflt);
        args = d;
        key = "range";
    }
    rc = hx_arg_when(reg, args, key, &r, err);
    cJSON_Delete(d);
    if (rc) return rc;
    *from = r.start;
    *to = r.is_point ? r.start + (strcmp(key, "range") ? 86400 : 1) : r.end;
    if (!strcmp(key, "start") && hx_arg_str(args, "end")) {
        if ((rc = hx_arg_when(reg, args, "end", &e, err))) return rc;
        *to = e.is_point ? e.start : e.end;
    }
    if (*to <= *from) return hx_err_set(err, HX_ERR_INVALID, "the range ends before it starts");
    if (*to - *from > (int64_t)MAX_RANGE_DAYS * 86400)
        return hx_err_set(err, HX_ERR_RANGE, "the range is longer than %d days", MAX_RANGE_DAYS);
    return HX_OK;
}

cJSON *hx_cal_range_json(hx_cal *c, int64_t from, int64_t to)
{
    char a[40], b[40];
    hx_tz_format(c->tz, from, 0, a, sizeof a);
    hx_tz_format(c->tz, to, 0, b, sizeof b);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "start", a);
    cJSON_AddStringToObject(o, "end", b);
    return o;
}

void hx_cal_add_problems(hx_tools *reg, hx_cal *c, cJSON *result)
{
    if (!cJSON_GetArraySize(c->problems)) return;
    hx_json_add(result, "problems", cJSON_Duplicate(c->problems, 1));
    hx_tools_mark_untrusted(reg);
}

int hx_cal_by_other(const hx_cal *c, icalcomponent *ev)
{
    icalproperty *o = icalcomponent_get_first_property(ev, ICAL_ORGANIZER_PROPERTY);
    const char *v = o ? icalproperty_get_value_as_string(o) : NULL;
    const char *me = c->cfg->user_email;
    if (!o) return 0;
    if (v && !strncasecmp(v, "mailto:", 7)) v += 7;
    return !v || !me || !*me || strcasecmp(v, me);
}

void hx_cal_note_author(hx_tools *reg, const hx_cal *c, icalcomponent *ev)
{
    if (hx_cal_by_other(c, ev)) hx_tools_mark_untrusted(reg);
}

/* ---- calendar.list_events ---- */

/* Whether the names a and b are the same, folded. */
static int same_name(const char *a, const char *b)
{
    char *fa = hx_fold(a), *fb = hx_fold(b);
    int same = fa && fb && !strcmp(fa, fb);
    free(fa);
    free(fb);
    return same;
}

/* How many terms of the query o has in its title, location or
 * description, all folded (hx_fold): "lyon sync" finds "Sync (Lyon)",
 * "fundacion" finds "Fundación"; -1 when o is not in the calendar cal
 * (NULL: any). */
static int occ_hits(const hx_cal_occ *o, const char *cal, const hx_buf *terms)
{
    if (cal && !same_name(o->file->calendar, cal)) return -1;
    if (!terms->len) return 0;
    const char *parts[] = {icalcomponent_get_summary(o->ev), icalcomponent_get_location(o->ev),
                           icalcomponent_get_description(o->ev)};
    hx_buf f;
    hx_buf_init(&f);
    for (int i = 0; i < 3; i++) {
        if (parts[i]) hx_fold_append(&f, parts[i], strlen(parts[i]));
        hx_buf_putc(&f, '\n');
    }
    const int n = hx_fold_count_terms(f.data, terms);
    hx_buf_free(&f);
    return n;
}

/* Whether o is in the calendar cal (NULL: any) and has every term. */
static int occ_matches(const hx_cal_occ *o, const char *cal, const hx_buf *terms)
{
    return occ_hits(o, cal, terms) == hx_fold_n_terms(terms);
}

#define OTHERS_BEFORE (31 * 86400)  /* how far back a query looks beyond its range */
#define OTHERS_AFTER (366 * 86400)  /* and forward */
#define OTHERS_MAX 10

/* How many terms each occurrence of occ[0, n) has (occ_hits), into a
 * new array (NULL when out of memory), and the most of them in *best. */
static int *hits_of(const hx_cal_occ *occ, int n, const char *cal, const hx_buf *terms, int *best)
{
    int *hits = hx_calloc(n > 0 ? (size_t)n : 1, sizeof *hits);
    *best = 0;
    for (int i = 0; hits && i < n; i++)
        if ((hits[i] = occ_hits(&occ[i], cal, terms)) > *best) *best = hits[i];
    return hits;
}

/* The occurrences of occ[0, n) with want terms (hits: theirs) into others
 * (at most OTHERS_MAX, in time order); how many there are. */
static int add_others(hx_tools *reg, hx_cal *c, const hx_cal_occ *occ, int n, const int *hits,
                      int want, cJSON *others)
{
    int total = 0;
    for (int i = 0; hits && others && i < n; i++) {
        if (hits[i] != want || total++ >= OTHERS_MAX) continue;
        hx_json_add(others, NULL, hx_cal_occ_json(c, &occ[i]));
        hx_cal_note_author(reg, c, occ[i].ev);
    }
    return total;
}

/* A query that no event of the range matches (range: its occurrences,
 * n_range of them): as "others" in res (at most OTHERS_MAX, in time
 * order, with "others_total" and a note), the events that match it from
 * a month back to a year ahead, for "when is the Lyon sync?" asked as
 * {"range": "next Tuesday", "query": "Lyon sync"}; when none does and the
 * query has more than one word, the events of the range with the most of
 * its words, else those of the month back to the year ahead ("is the
 * meeting with Carmen still on?" asked as "Lunch with Carmen"). Nothing
 * is added when no event has a word of it or the calendar fails. Each
 * occurrence is read once. */
static void query_others(hx_tools *reg, hx_cal *c, const char *cal, const hx_buf *terms,
                         const char *query, const hx_cal_occ *range, int n_range, cJSON *res)
{
    const int64_t now = hx_now(NULL);
    hx_cal_occ *occ = NULL;
    int64_t complete_to;
    int n = 0, best = 0, range_best = 0, total = 0;
    hx_err err = {0};
    if (hx_cal_occurrences(c, now - OTHERS_BEFORE, now + OTHERS_AFTER, &occ, &n, &complete_to, &err))
        return;
    const int all = hx_fold_n_terms(terms);
    const char *how = "that have it from a month back to a year ahead";
    cJSON *others = cJSON_CreateArray();
    int *hits = hits_of(occ, n, cal, terms, &best), *range_hits = NULL;
    if (best == all) total = add_others(reg, c, occ, n, hits, all, others);
    else if (all > 1 && (range_hits = hits_of(range, n_range, cal, terms, &range_best)) &&
             range_best > 0) {
        total = add_others(reg, c, range, n_range, range_hits, range_best, others);
        how = "of the range that have the most of its words";
    } else if (all > 1 && best > 0) {
        total = add_others(reg, c, occ, n, hits, best, others);
        how = "from a month back to a year ahead that have the most of its words";
    }
    free(hits);
    free(range_hits);
    free(occ);
    if (!total) {
        cJSON_Delete(others);
        return;
    }
    char note[400];
    snprintf(note, sizeof note, "no event of the range has \"%.200s\"; \"others\" holds the %d "
             "%s%s", query, total, how, total > OTHERS_MAX ? ", the first ones" : "");
    hx_json_add(res, "others", others);
    cJSON_AddNumberToObject(res, "others_total", total);
    cJSON_AddStringToObject(res, "note", note);
}

static int list_events(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                       hx_err *err)
{
    (void)user;
    hx_cal *c;
    hx_cal_occ *occ = NULL;
    int64_t from, to, complete_to;
    int n = 0, rc = hx_cal_tool_open(reg, &c, err);
    if (rc) return rc;
    /* "when is the Lyon sync?" asked as {"query": "Lyon sync"} looks ahead */
    const char *dflt = hx_arg_str(args, "query") ? "next 12 months" : "today";
    if ((rc = hx_cal_arg_range(reg, args, dflt, &from, &to, err)) ||
        (rc = hx_cal_occurrences(c, from, to, &occ, &n, &complete_to, err))) {
        hx_cal_free(c);
        return rc;
    }
    int limit = hx_arg_int(args, "limit", 100), shown = 0, total = 0, cancelled = 0;
    const char *cal = hx_arg_str(args, "calendar");
    hx_buf terms;
    hx_buf_init(&terms);
    if (hx_arg_str(args, "query")) hx_fold_words(hx_arg_str(args, "query"), 1, &terms);
    cJSON *res = cJSON_CreateObject();
    hx_json_add(res, "range", hx_cal_range_json(c, from, to));
    cJSON *evs = cJSON_AddArrayToObject(res, "events");
    if (!evs) { /* res NULL too */
        cJSON_Delete(res);
        free(occ);
        hx_cal_free(c);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (!occ_matches(&occ[i], cal, &terms)) continue;
        total++;
        cancelled += hx_cal_occ_cancelled(&occ[i]);
        if (shown == limit) continue;
        hx_json_add(evs, NULL, hx_cal_occ_json(c, &occ[i]));
        hx_cal_note_author(reg, c, occ[i].ev);
        shown++;
    }
    /* the events that take place: "4 events" of a day whose fourth was
     * cancelled is untrue; the cancelled ones are counted apart */
    cJSON_AddNumberToObject(res, "count", total - cancelled);
    if (cancelled) cJSON_AddNumberToObject(res, "cancelled", cancelled);
    if (!total && terms.len)
        query_others(reg, c, cal, &terms, hx_arg_str(args, "query"), occ, n, res);
    if (total > shown || complete_to < to) cJSON_AddBoolToObject(res, "truncated", 1);
    if (complete_to < to) hx_json_add(res, "more", hx_cal_cut_json(c, complete_to, "events"));
    hx_cal_add_problems(reg, c, res);
    hx_buf_free(&terms);
    free(occ);
    hx_cal_free(c);
    *result = res;
    return HX_OK;
}

/* ---- times of new or changed events ---- */

typedef struct ev_times {
    int64_t start, end;
    int all_day;
} ev_times;

static int period_err(hx_err *err, const char *key, const char *v)
{
    return hx_err_set(err, HX_ERR_INVALID,
                      "argument '%s': '%s' names a whole day or more, not a time (try "
                      "'tomorrow at 10am', or set all_day)",
                      key, v);
}

/* all-day: whole local days from start's day to end's day (inclusive). */
static int all_day_times(hx_tools *reg, hx_cal *c, const cJSON *args, const hx_when_range *s,
                         ev_times *t, hx_err *err)
{
    int64_t d0 = hx_tz_local_day(c->tz, s->start), d1 = hx_tz_local_day(c->tz, s->end - 1);
    if (s->is_point) d1 = d0;
    if (hx_arg_str(args, "end")) {
        hx_when_range e;
        int rc = hx_arg_when(reg, args, "end", &e, err);
        if (rc) return rc;
        d1 = hx_tz_local_day(c->tz, e.is_point ? e.start : e.end - 1);
    }
    if (d1 < d0) return hx_err_set(err, HX_ERR_INVALID, "argument 'end': before the start");
    t->start = hx_tz_day_start(c->tz, d0);
    t->end = hx_tz_day_start(c->tz, d1 + 1);
    t->all_day = 1;
    return HX_OK;
}

/* Start and end from "start", "end" / "duration_minutes"; old (may be NULL)
 * gives what is kept when only some are given. */
static int event_times(hx_tools *reg, hx_cal *c, const cJSON *args, const ev_times *old,
                       ev_times *t, hx_err *err)
{
    hx_when_range s = {0}, e;
    int rc, has_start = hx_arg_str(args, "start") != NULL;
    int all_day = hx_arg_bool(args, "all_day", old ? old->all_day : 0);
    if (has_start && (rc = hx_arg_when(reg, args, "start", &s, err))) return rc;
    if (!has_start) s.start = old->start, s.end = old->all_day ? old->end : old->start, s.is_point = !old->all_day;
    if (all_day) return all_day_times(reg, c, args, &s, t, err);
    int dur = hx_arg_int(args, "duration_minutes", -1);
    t->all_day = 0;
    t->start = s.start;
    if (!s.is_point && s.whole_days) return period_err(err, "start", hx_arg_str(args, "start"));
    if (dur > 0) t->end = s.start + (int64_t)dur * 60;
    else if (hx_arg_str(args, "end")) {
        if ((rc = hx_arg_when(reg, args, "end", &e, err))) return rc;
        if (!e.is_point) return period_err(err, "end", hx_arg_str(args, "end"));
        t->end = e.start;
    } else if (!s.is_point) t->end = s.end; /* "from 2pm to 4pm" */
    else if (old) t->end = s.start + (old->end - old->start);
    else t->end = s.start + 3600;
    if (t->end <= t->start) return hx_err_set(err, HX_ERR_INVALID, "the event ends before it starts");
    return HX_OK;
}

/* ---- calendar.create_event ---- */

static void edit_from_args(const cJSON *args, hx_cal_edit *e)
{
    memset(e, 0, sizeof *e);
    e->title = hx_arg_str(args, "title");
    e->location = hx_arg_str(args, "location");
    e->description = hx_arg_str(args, "description");
    e->attendees = cJSON_GetObjectItemCaseSensitive(args, "attendees");
    int rem = hx_arg_int(args, "reminder_minutes", HX_CAL_KEEP_ALARM);
    e->reminder_min = rem < 0 ? (rem == HX_CAL_KEEP_ALARM ? rem : HX_CAL_NO_ALARM) : rem;
}

/* The refusal of only_if_free: what the new time overlaps. */
static int busy_refusal(const cJSON *conflicts, hx_err *err)
{
    hx_buf b;
    hx_buf_init(&b);
    const cJSON *o;
    cJSON_ArrayForEach(o, conflicts)
    hx_buf_printf(&b, "%s'%s' (%s to %s)", b.len ? ", " : "",
                  cJSON_GetStringValue(cJSON_GetObjectItem(o, "title")),
                  cJSON_GetStringValue(cJSON_GetObjectItem(o, "start")),
                  cJSON_GetStringValue(cJSON_GetObjectItem(o, "end")));
    int rc = hx_err_set(err, HX_ERR_STATE,
                        "not created, as only_if_free asks: the time overlaps %s; "
                        "calendar.find_slots finds a free time",
                        b.data ? b.data : "a busy event");
    hx_buf_free(&b);
    return rc;
}

/* Adds the busy events the event's time overlaps (taken over) to its
 * result: the user asked for this time, so it is written, and told. */
static void add_conflicts(cJSON *res, cJSON *conflicts)
{
    if (!conflicts) return;
    char note[96];
    snprintf(note, sizeof note, "the time overlaps %d busy event%s of the user's",
             cJSON_GetArraySize(conflicts), cJSON_GetArraySize(conflicts) == 1 ? "" : "s");
    cJSON_AddStringToObject(res, "note", note);
    cJSON_AddItemToObject(res, "conflicts", conflicts);
}

static cJSON *write_result(hx_tools *reg, hx_cal *c, hx_cal_file *f, icalcomponent *ev,
                           const char *key, const char *mail)
{
    hx_cal_note_author(reg, c, ev);
    hx_cal_occ o = {ev, f, 0, 0, 0, 0, 0};
    hx_cal_event_times(c, f, ev, &o.start, &o.end, &o.all_day);
    o.recurring = icalcomponent_get_first_property(ev, ICAL_RRULE_PROPERTY) != NULL;
    o.rid = o.start;
    cJSON *res = cJSON_CreateObject();
    hx_json_add(res, key, hx_cal_occ_json(c, &o));
    cJSON_AddStringToObject(res, "file", f->path);
    if (mail && *mail) cJSON_AddStringToObject(res, "invitation_queued", mail);
    return res;
}

static int create_event(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                        hx_err *err)
{
    (void)user;
    hx_cal *c;
    ev_times t;
    hx_cal_edit e;
    icalcomponent *root = NULL;
    hx_cal_file *f = NULL;
    char uid[64], mail[256] = "";
    cJSON *conflicts = NULL;
    int rc = hx_cal_tool_open(reg, &c, err);
    if (rc) return rc;
    if ((rc = event_times(reg, c, args, NULL, &t, err))) goto out;
    if (!t.all_day) conflicts = hx_cal_conflicts(reg, c, t.start, t.end, NULL);
    if (conflicts && hx_arg_bool(args, "only_if_free", 0)) {
        rc = busy_refusal(conflicts, err);
        goto out;
    }
    edit_from_args(args, &e);
    e.has_times = 1, e.start = t.start, e.end = t.end, e.all_day = t.all_day;
    hx_cal_new_uid(c, uid, sizeof uid);
    icalcomponent *ev = hx_cal_new_event(c, uid, &root);
    const hx_root *dir = hx_tools_root(reg, HX_ROOT_CAL_DEFAULT, 0, 0, err);
    if (!dir) {
        rc = err->rc;
        goto out;
    }
    if ((rc = hx_cal_apply_edit(c, root, ev, &e, err)) ||
        (rc = hx_cal_add_file(c, dir, uid, root, &f, err)))
        goto out;
    root = NULL; /* owned by c now */
    rc = hx_cal_itip_queue(c, f, ev, "REQUEST", mail, sizeof mail, err);
    if (rc) hx_err_set(err, rc, "the event was saved in %s but the invitation was not queued: %s",
                       f->path, err->msg);
    else {
        *result = write_result(reg, c, f, ev, "created", mail);
        add_conflicts(*result, conflicts);
        conflicts = NULL;
    }
out:
    cJSON_Delete(conflicts);
    if (root) icalcomponent_free(root);
    hx_cal_free(c);
    return rc;
}

/* ---- calendar.update_event ---- */

/* The event args' uid names; what follows (a refusal quoting its title
 * and organizer, the changed event) is about it. */
static int find_event(hx_tools *reg, hx_cal *c, const cJSON *args, hx_cal_file **f,
                      icalcomponent **ev, hx_err *err)
{
    const char *uid = hx_arg_str(args, "uid");
    *ev = hx_cal_find_uid(c, uid, f);
    if (!*ev)
        return hx_err_set(err, HX_ERR_NOTFOUND,
                          "no event with uid '%s' (calendar.list_events shows uids)", uid);
    hx_cal_note_author(reg, c, *ev);
    return HX_OK;
}

/* Only the organizer changes or cancels a meeting others were invited to
 * (RFC 5546); an attendee declines instead. */
static int check_organizer(hx_cal *c, icalcomponent *ev, hx_err *err)
{
    icalproperty *o = icalcomponent_get_first_property(ev, ICAL_ORGANIZER_PROPERTY);
    const char *v = o ? icalproperty_get_value_as_string(o) : NULL;
    if (v && !strncasecmp(v, "mailto:", 7)) v += 7;
    if (!v || !icalcomponent_get_first_property(ev, ICAL_ATTENDEE_PROPERTY) ||
        !hx_cal_by_other(c, ev))
        return HX_OK;
    return hx_err_set(err, HX_ERR_DENIED,
                      "'%s' is organized by %s; only the organizer can change or cancel it",
                      icalcomponent_get_summary(ev) ? icalcomponent_get_summary(ev) : "the event", v);
}

static int has_attendees(icalcomponent *ev)
{
    return icalcomponent_get_first_property(ev, ICAL_ATTENDEE_PROPERTY) != NULL;
}

static const char *attendee_addr(icalproperty *p)
{
    const char *v = icalproperty_get_value_as_string(p);
    if (v && !strncasecmp(v, "mailto:", 7)) v += 7;
    return v ? v : "";
}

static int attends(icalcomponent *ev, const char *addr)
{
    for (icalproperty *p = icalcomponent_get_first_property(ev, ICAL_ATTENDEE_PROPERTY); p;
         p = icalcomponent_get_next_property(ev, ICAL_ATTENDEE_PROPERTY))
        if (!strcasecmp(attendee_addr(p), addr)) return 1;
    return 0;
}

/* Attendees of old that ev no longer lists get a CANCEL (RFC 5546 3.2.5). */
static int cancel_removed(hx_cal *c, hx_cal_file *f, icalcomponent *old, icalcomponent *ev,
                          hx_err *err)
{
    icalproperty *keep[256], *p;
    int n = 0, removed = 0;
    for (p = icalcomponent_get_first_property(old, ICAL_ATTENDEE_PROPERTY); p && n < 256;
         p = icalcomponent_get_next_property(old, ICAL_ATTENDEE_PROPERTY))
        keep[n++] = p;
    for (int i = 0; i < n; i++) {
        if (!attends(ev, attendee_addr(keep[i]))) {
            removed++;
            continue;
        }
        icalcomponent_remove_property(old, keep[i]);
        icalproperty_free(keep[i]);
    }
    if (!removed) return HX_OK;
    icalproperty *st = icalcomponent_get_first_property(old, ICAL_STATUS_PROPERTY);
    if (st) icalcomponent_remove_property(old, st), icalproperty_free(st);
    icalcomponent_add_property(old, icalproperty_new_status(ICAL_STATUS_CANCELLED));
    icalcomponent_set_sequence(old, icalcomponent_get_sequence(ev));
    return hx_cal_itip_queue(c, f, old, "CANCEL", NULL, 0, err);
}

static int update_event(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                        hx_err *err)
{
    icalcomponent *before = NULL;
    (void)user;
    hx_cal *c;
    hx_cal_file *f;
    icalcomponent *ev;
    hx_cal_edit e;
    ev_times old, t;
    char mail[256] = "";
    cJSON *conflicts = NULL;
    int rc = hx_cal_tool_open(reg, &c, err);
    if (rc) return rc;
    if ((rc = find_event(reg, c, args, &f, &ev, err)) || (rc = check_organizer(c, ev, err))) goto out;
    if (hx_arg_str(args, "occurrence") &&
        (rc = hx_cal_detach_occurrence(reg, c, &f, &ev, args, err)))
        goto out;
    hx_cal_event_times(c, f, ev, &old.start, &old.end, &old.all_day);
    t = old;
    edit_from_args(args, &e);
    e.has_times = hx_arg_str(args, "start") || hx_arg_str(args, "end") ||
                  cJSON_GetObjectItemCaseSensitive(args, "duration_minutes") ||
                  cJSON_GetObjectItemCaseSensitive(args, "all_day");
    if (e.has_times && (rc = event_times(reg, c, args, &old, &t, err))) goto out;
    if (e.has_times && !t.all_day)
        conflicts = hx_cal_conflicts(reg, c, t.start, t.end, icalcomponent_get_uid(ev));
    e.start = t.start, e.end = t.end, e.all_day = t.all_day;
    e.bump_sequence = 1;
    int invited = has_attendees(ev);
    if (e.attendees && invited) before = icalcomponent_new_clone(ev);
    if ((rc = hx_cal_apply_edit(c, f->root, ev, &e, err)) || (rc = hx_cal_save(c, f, err)))
        goto out;
    if (has_attendees(ev)) rc = hx_cal_itip_queue(c, f, ev, "REQUEST", mail, sizeof mail, err);
    if (rc == HX_OK && before) rc = cancel_removed(c, f, before, ev, err);
    if (rc) hx_err_set(err, rc, "the change was saved but the update was not queued: %s", err->msg);
    else {
        *result = write_result(reg, c, f, ev, "updated", mail);
        add_conflicts(*result, conflicts);
        conflicts = NULL;
    }
out:
    cJSON_Delete(conflicts);
    if (before) icalcomponent_free(before);
    hx_cal_free(c);
    return rc;
}

/* ---- calendar.cancel_event ---- */

static int cancel_event(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                        hx_err *err)
{
    (void)user;
    hx_cal *c;
    hx_cal_file *f;
    icalcomponent *ev;
    hx_cal_edit e;
    char mail[256] = "";
    int rc = hx_cal_tool_open(reg, &c, err);
    if (rc) return rc;
    if ((rc = find_event(reg, c, args, &f, &ev, err)) || (rc = check_organizer(c, ev, err))) goto out;
    if (hx_arg_str(args, "occurrence")) {
        rc = hx_cal_cancel_occurrence(reg, c, f, ev, args, result, err);
        goto out;
    }
    memset(&e, 0, sizeof e);
    e.reminder_min = HX_CAL_KEEP_ALARM;
    e.cancel = 1;
    e.bump_sequence = 1;
    if ((rc = hx_cal_apply_edit(c, f->root, ev, &e, err)) || (rc = hx_cal_save(c, f, err)))
        goto out;
    rc = hx_cal_itip_queue(c, f, ev, "CANCEL", mail, sizeof mail, err);
    if (rc) hx_err_set(err, rc, "the event was cancelled but the notice was not queued: %s", err->msg);
    else *result = write_result(reg, c, f, ev, "cancelled", mail);
out:
    hx_cal_free(c);
    return rc;
}

/* ---- registration ---- */

#define RANGE_PROPS                                                                    \
    "\"range\":{\"type\":\"string\",\"description\":\"a period: 'today', 'next week', " \
    "'Dec 3', 'tomorrow afternoon', or ISO 8601\"},"                                    \
    "\"start\":{\"type\":\"string\",\"description\":\"ISO 8601 or an expression\"},"    \
    "\"end\":{\"type\":\"string\",\"description\":\"ISO 8601 or an expression\"}"

#define EVENT_PROPS                                                                    \
    "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":500},"                \
    "\"start\":{\"type\":\"string\",\"description\":\"'tomorrow at 10am', "             \
    "'2026-12-03T14:00', ...\"},"                                                       \
    "\"end\":{\"type\":\"string\"},"                                                    \
    "\"duration_minutes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":20160},"      \
    "\"all_day\":{\"type\":\"boolean\"},"                                               \
    "\"attendees\":{\"type\":\"array\",\"maxItems\":100,\"items\":{\"type\":\"string\"," \
    "\"description\":\"bob@example.org or Bob <bob@example.org>\"}},"                   \
    "\"location\":{\"type\":\"string\",\"maxLength\":1000},"                            \
    "\"description\":{\"type\":\"string\",\"maxLength\":20000},"                        \
    "\"reminder_minutes\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":40320}"

static const hx_tool_def cal_tools[] = {
    {HX_TOOL_API_VERSION, "calendar.list_events",
     "List the events of the user's calendars in a period (default today; with a query, "
     "the next 12 months), recurring events expanded. Times are ISO 8601 in the user's "
     "time zone.",
     "{\"type\":\"object\",\"properties\":{" RANGE_PROPS ","
     "\"calendar\":{\"type\":\"string\"},\"query\":{\"type\":\"string\"},"
     "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500}},"
     "\"additionalProperties\":false}",
     HX_EFFECT_READ, list_events, NULL, HX_TOOL_BUILTIN},
    {HX_TOOL_API_VERSION, "calendar.free_busy",
     "When the user, and attendees where their events are known, are busy in a period; "
     "the user's busy times name the user's events in them.",
     "{\"type\":\"object\",\"properties\":{" RANGE_PROPS ","
     "\"attendees\":{\"type\":\"array\",\"maxItems\":50,\"items\":{\"type\":\"string\"}}},"
     "\"additionalProperties\":false}",
     HX_EFFECT_READ, hx_cal_free_busy, NULL, HX_TOOL_BUILTIN},
    {HX_TOOL_API_VERSION, "calendar.find_slots",
     "Find free slots of a given length for the user and attendees in a period, within "
     "working hours, earliest first. A moment (\"Friday at noon\") asks about the slot that "
     "starts then; with no slot free, the result lists the user's busy events in the way.",
     "{\"type\":\"object\",\"properties\":{"
     "\"duration_minutes\":{\"type\":\"integer\",\"minimum\":5,\"maximum\":1440},"
     RANGE_PROPS ","
     "\"attendees\":{\"type\":\"array\",\"maxItems\":50,\"items\":{\"type\":\"string\"}},"
     "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50},"
     "\"working_hours_only\":{\"type\":\"boolean\"}},"
     "\"required\":[\"duration_minutes\"],\"additionalProperties\":false}",
     HX_EFFECT_READ, hx_cal_find_slots, NULL, HX_TOOL_BUILTIN},
    {HX_TOOL_API_VERSION, "calendar.create_event",
     "Create an event in the user's calendar; with attendees, an invitation is queued in "
     "the outbox. Default length one hour. The result lists busy events the time overlaps.",
     "{\"type\":\"object\",\"properties\":{" EVENT_PROPS ","
     "\"only_if_free\":{\"type\":\"boolean\",\"description\":\"create it only if the time "
     "overlaps no busy event\"}},"
     "\"required\":[\"title\",\"start\"],\"additionalProperties\":false}",
     HX_EFFECT_SEND, create_event, NULL, HX_TOOL_BUILTIN},
    {HX_TOOL_API_VERSION, "calendar.update_event",
     "Change an event by uid (only the fields given), or one occurrence of a recurring "
     "event; attendees get an update.",
     "{\"type\":\"object\",\"properties\":{\"uid\":{\"type\":\"string\",\"minLength\":1},"
     "\"occurrence\":{\"type\":\"string\",\"description\":\"start of the one occurrence "
     "to change\"}," EVENT_PROPS "},\"required\":[\"uid\"],\"additionalProperties\":false}",
     HX_EFFECT_SEND, update_event, NULL, HX_TOOL_BUILTIN},
    {HX_TOOL_API_VERSION, "calendar.cancel_event",
     "Cancel an event by uid, or one occurrence of a recurring event; attendees get a "
     "cancellation.",
     "{\"type\":\"object\",\"properties\":{\"uid\":{\"type\":\"string\",\"minLength\":1},"
     "\"occurrence\":{\"type\":\"string\",\"description\":\"start of the one occurrence "
     "to cancel\"}},\"required\":[\"uid\"],\"additionalProperties\":false}",
     HX_EFFECT_SEND, cancel_event, NULL, HX_TOOL_BUILTIN | HX_TOOL_REMOVES},
};

int hx_cal_register(hx_tools *reg, hx_err *err)
{
    return hx_tools_register_all(reg, cal_tools, sizeof cal_tools / sizeof cal_tools[0], err);
}
