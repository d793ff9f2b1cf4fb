/* cal_expand.c: the occurrences of events in a time range: single events,
 * RRULE (libical's recurrence iterators), RDATE and EXDATE, and
 * RECURRENCE-ID overrides replacing their occurrence; and their JSON. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/calendar_int.h"

/* The occurrences found so far: every one starting before horizon (the
 * query's end until too many were found, then the start of the first one
 * dropped), at most 2 * HX_CAL_MAX_OCC before it is cut back. */
typedef struct occ_list {
    hx_cal_occ *v;
    int n, cap;
    int64_t horizon;
    int oom;
} occ_list;

/* An overridden instance: (UID, RECURRENCE-ID) -> the override VEVENT. */
typedef struct ovr {
    const char *uid;
    int64_t rid;
    int rid_is_date;
} ovr;

typedef struct query {
    hx_cal *c;
    int64_t from, to;
    occ_list out;
    ovr *ovrs;
    int n_ovr;
    int rules_cut; /* rules whose expansion stopped at HX_CAL_MAX_ITER */
} query;

/* The span of an event: whole days for all-day events, else seconds. */
typedef struct span {
    int all_day;
    int days;
    int64_t secs;
} span;

static int by_start(const void *a, const void *b);

/* Keeps the HX_CAL_MAX_OCC earliest occurrences: the horizon moves to the
 * start of the first one dropped (ties at it are dropped too, so that
 * everything before the horizon is known and nothing after it is). */
static void cut_back(occ_list *l)
{
    qsort(l->v, (size_t)l->n, sizeof *l->v, by_start);
    int64_t h = l->v[HX_CAL_MAX_OCC].start;
    int keep = HX_CAL_MAX_OCC;
    while (keep > 0 && l->v[keep - 1].start >= h) keep--;
    l->n = keep;
    if (h < l->horizon) l->horizon = h;
}

/* Adds the occurrence if it overlaps the query; 1 if added. */
static int push(query *q, icalcomponent *ev, hx_cal_file *f, int64_t s, int64_t e,
                 const span *sp, int recurring)
{
    int overlaps = e > q->from && s < q->to;
    if (e == s) overlaps = s >= q->from && s < q->to;
    if (!overlaps || s >= q->out.horizon || q->out.oom) return 0;
    if (q->out.n == 2 * HX_CAL_MAX_OCC) {
        cut_back(&q->out);
        if (s >= q->out.horizon) return 0;
    }
    if (q->out.n == q->out.cap) {
        int cap = q->out.cap ? q->out.cap * 2 : 64;
        hx_cal_occ *nv = hx_realloc(q->out.v, (size_t)cap * sizeof *nv);
        if (!nv) {
            q->out.oom = 1;
            return 0;
        }
        q->out.v = nv;
        q->out.cap = cap;
    }
    hx_cal_occ o = {ev, f, s, e, sp->all_day, recurring, recurring ? s : 0};
    q->out.v[q->out.n++] = o;
    return 1;
}

/* Start of an occurrence's end given its start. */
static int64_t end_of(query *q, int64_t s, const span *sp)
{
    if (!sp->all_day) return s + sp->secs;
    return hx_tz_day_start(q->c->tz, hx_tz_local_day(q->c->tz, s) + sp->days);
}

static int64_t civil_days(struct icaltimetype t)
{
    return hx_days_from_civil(t.year, t.month, t.day);
}

static span event_span(query *q, hx_cal_file *f, icalcomponent *ev, int64_t start)
{
    icalproperty *ps = icalcomponent_get_first_property(ev, ICAL_DTSTART_PROPERTY);
    icalproperty *pe = icalcomponent_get_first_property(ev, ICAL_DTEND_PROPERTY);
    icalproperty *pd = icalcomponent_get_first_property(ev, ICAL_DURATION_PROPERTY);
    struct icaltimetype ts = icalproperty_get_dtstart(ps);
    span sp = {ts.is_date, 1, 0};
    if (pe) {
        struct icaltimetype te = icalproperty_get_dtend(pe);
        if (sp.all_day) sp.days = (int)(civil_days(te) - civil_days(ts));
        else sp.secs = hx_cal_prop_time(q->c, f, pe, te) - start;
    } else if (pd) {
        int secs = icaldurationtype_as_int(icalproperty_get_duration(pd));
        sp.secs = secs;
        sp.days = secs / 86400;
    }
    if (sp.days < 1) sp.days = 1;
    if (sp.days > 3660) sp.days = 3660;
    if (sp.secs < 0) sp.secs = 0;
    return sp;
}

void hx_cal_event_times(hx_cal *c, hx_cal_file *f, icalcomponent *ev, int64_t *start,
                        int64_t *end, int *all_day)
{
    query q = {c, 0, 0, {0}, NULL, 0, 0};
    icalproperty *ps = icalcomponent_get_first_property(ev, ICAL_DTSTART_PROPERTY);
    *start = hx_cal_prop_time(c, f, ps, icalproperty_get_dtstart(ps));
    span sp = event_span(&q, f, ev, *start);
    *end = end_of(&q, *start, &sp);
    *all_day = sp.all_day;
}

/* ---- overrides and exclusions ---- */

#define MAX_PROPS 256 /* RRULE / RDATE / EXDATE properties read per event */

/* The properties of a kind, collected first: libical components have one
 * property cursor, which any nested lookup would move. */
static int props_of(icalcomponent *ev, icalproperty_kind kind, icalproperty **out)
{
    int n = 0;
    for (icalproperty *p = icalcomponent_get_first_property(ev, kind); p && n < MAX_PROPS;
         p = icalcomponent_get_next_property(ev, kind))
        out[n++] = p;
    return n;
}

static int same_instant(int64_t a, int64_t b, int by_day, icaltimezone *z)
{
    return by_day ? hx_tz_local_day(z, a) == hx_tz_local_day(z, b) : a == b;
}

static int overridden(query *q, const char *uid, int64_t s)
{
    for (int i = 0; i < q->n_ovr; i++)
        if (!strcmp(q->ovrs[i].uid, uid) &&
            same_instant(q->ovrs[i].rid, s, q->ovrs[i].rid_is_date, q->c->tz))
            return 1;
    return 0;
}

static int excluded(query *q, hx_cal_file *f, icalcomponent *ev, int64_t s)
{
    icalproperty *ps[MAX_PROPS];
    int n = props_of(ev, ICAL_EXDATE_PROPERTY, ps);
    for (int i = 0; i < n; i++) {
        icalproperty *p = ps[i];
        struct icaltimetype t = icalproperty_get_exdate(p);
        if (icaltime_is_null_time(t)) continue;
        if (same_instant(hx_cal_prop_time(q->c, f, p, t), s, t.is_date, q->c->tz)) return 1;
    }
    return 0;
}

static void consider(query *q, hx_cal_file *f, icalcomponent *ev, int64_t s, const span *sp)
{
    const char *uid = icalcomponent_get_uid(ev);
    if (!uid) uid = "";
    if (excluded(q, f, ev, s) || overridden(q, uid, s)) return;
    push(q, ev, f, s, end_of(q, s, sp), sp, 1);
}

/* ---- expansion ---- */

/* A rule that took HX_CAL_MAX_ITER steps to reach last (a start before
 * the query's end): what it repeats after last is not known, so nothing
 * after last is claimed. */
static void rule_cut(query *q, hx_cal_file *f, icalcomponent *ev, int64_t last)
{
    char when[40];
    if (last + 1 < q->out.horizon) q->out.horizon = last + 1;
    if (q->rules_cut++) return; /* one problem is enough */
    hx_tz_format(q->c->tz, last, 0, when, sizeof when);
    hx_cal_problem(q->c, f->path,
                   "event '%s' repeats too often to expand past %s (%d repetitions); "
                   "later times are not known",
                   icalcomponent_get_uid(ev), when, HX_CAL_MAX_ITER);
}

static void expand_rrule(query *q, hx_cal_file *f, icalcomponent *ev, icalproperty *rp,
                         const span *sp)
{
    icalproperty *ps = icalcomponent_get_first_property(ev, ICAL_DTSTART_PROPERTY);
    struct icaltimetype ts = icalproperty_get_dtstart(ps);
    icaltimezone *z = hx_cal_prop_zone(q->c, f, ps, ts);
    struct icalrecurrencetype r = icalproperty_get_rrule(rp);
    struct icaltimetype start = ts;
    start.zone = NULL;
    icalrecur_iterator *it = icalrecur_iterator_new(r, start);
    if (!it) {
        icalerror_clear_errno();
        hx_cal_problem(q->c, f->path, "event '%s': recurrence rule not understood",
                       icalcomponent_get_uid(ev));
        return;
    }
    int64_t s = INT64_MIN;
    int k = 0;
    for (; k < HX_CAL_MAX_ITER && !q->out.oom; k++) {
        struct icaltimetype nt = icalrecur_iterator_next(it);
        if (icaltime_is_null_time(nt)) break;
        hx_civil cv = {nt.year, nt.month, nt.day, 0, 0, 0};
        if (!nt.is_date) cv.hour = nt.hour, cv.min = nt.minute, cv.sec = nt.second;
        s = hx_tz_to_utc(nt.is_date ? q->c->tz : z, &cv);
        if (s >= q->to || s >= q->out.horizon) break;
        consider(q, f, ev, s, sp);
    }
    icalrecur_iterator_free(it);
    if (k == HX_CAL_MAX_ITER && s < q->to && s < q->out.horizon)
        rule_cut(q, f, ev, s);
}

static void expand_rdates(query *q, hx_cal_file *f, icalcomponent *ev, const span *sp)
{
    icalproperty *ps[MAX_PROPS];
    int n = props_of(ev, ICAL_RDATE_PROPERTY, ps);
    for (int i = 0; i < n; i++) {
        icalproperty *p = ps[i];
        struct icaldatetimeperiodtype dp = icalproperty_get_rdate(p);
        struct icaltimetype t = icaltime_is_null_time(dp.time) ? dp.period.start : dp.time;
        if (icaltime_is_null_time(t) || !icaltime_is_valid_time(t)) continue;
        consider(q, f, ev, hx_cal_prop_time(q->c, f, p, t), sp);
    }
}

static void expand_event(query *q, hx_cal_file *f, icalcomponent *ev)
{
    icalproperty *ps = icalcomponent_get_first_property(ev, ICAL_DTSTART_PROPERTY);
    struct icaltimetype ts = icalproperty_get_dtstart(ps);
    int64_t start = hx_cal_prop_time(q->c, f, ps, ts);
    span sp = event_span(q, f, ev, start);
    icalproperty *rrule = icalcomponent_get_first_property(ev, ICAL_RRULE_PROPERTY);
    icalproperty *ridp = icalcomponent_get_first_property(ev, ICAL_RECURRENCEID_PROPERTY);
    if (ridp) { /* an override: one occurrence of a series, where it now is */
        if (push(q, ev, f, start, end_of(q, start, &sp), &sp, 1))
            q->out.v[q->out.n - 1].rid =
                hx_cal_prop_time(q->c, f, ridp, icalproperty_get_recurrenceid(ridp));
        return;
    }
    if (!rrule && !icalcomponent_get_first_property(ev, ICAL_RDATE_PROPERTY)) {
        push(q, ev, f, start, end_of(q, start, &sp), &sp, 0);
        return;
    }
    icalproperty *rules[MAX_PROPS];
    int n = props_of(ev, ICAL_RRULE_PROPERTY, rules);
    for (int i = 0; i < n; i++) expand_rrule(q, f, ev, rules[i], &sp);
    if (!rrule) consider(q, f, ev, start, &sp);
    expand_rdates(q, f, ev, &sp);
}

static void collect_overrides(query *q)
{
    hx_cal *c = q->c;
    int cap = 0;
    for (int i = 0; i < c->n_files; i++) {
        for (int j = 0; j < c->files[i].n_events; j++) {
            icalcomponent *k = c->files[i].events[j];
            icalproperty *p = icalcomponent_get_first_property(k, ICAL_RECURRENCEID_PROPERTY);
            if (!p) continue;
            if (q->n_ovr == cap) {
                cap = cap ? cap * 2 : 16;
                ovr *no = hx_realloc(q->ovrs, (size_t)cap * sizeof *no);
                if (!no) return;
                q->ovrs = no;
            }
            struct icaltimetype t = icalproperty_get_recurrenceid(p);
            const char *uid = icalcomponent_get_uid(k);
            ovr o = {uid ? uid : "", hx_cal_prop_time(c, &c->files[i], p, t),
                     t.is_date};
            q->ovrs[q->n_ovr++] = o;
        }
    }
}

static int by_start(const void *a, const void *b)
{
    const hx_cal_occ *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    const char *ux = icalcomponent_get_uid(x->ev), *uy = icalcomponent_get_uid(y->ev);
    return strcmp(ux ? ux : "", uy ? uy : "");
}

/* Drops repeats (an RDATE that is also an RRULE occurrence). */
static void dedupe(occ_list *l)
{
    int w = 0;
    for (int i = 0; i < l->n; i++)
        if (!w || l->v[w - 1].ev != l->v[i].ev || l->v[w - 1].start != l->v[i].start)
            l->v[w++] = l->v[i];
    l->n = w;
}

int hx_cal_occurrences(hx_cal *c, int64_t from, int64_t to, hx_cal_occ **out,
                       int *n, int64_t *complete_to, hx_err *err)
{
    query q = {c, from, to, {.horizon = to}, NULL, 0, 0};
    *out = NULL;
    *n = 0;
    collect_overrides(&q);
    for (int i = 0; i < c->n_files && !q.out.oom; i++)
        for (int j = 0; j < c->files[i].n_events && !q.out.oom; j++)
            expand_event(&q, &c->files[i], c->files[i].events[j]);
    free(q.ovrs);
    if (q.out.oom) {
        free(q.out.v);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory expanding events");
    }
    if (q.out.n > HX_CAL_MAX_OCC) cut_back(&q.out);
    /* an occurrence kept before a rule was cut may start after its cut */
    int w = 0;
    for (int i = 0; i < q.out.n; i++)
        if (q.out.v[i].start < q.out.horizon) q.out.v[w++] = q.out.v[i];
    q.out.n = w;
    if (q.out.n) qsort(q.out.v, (size_t)q.out.n, sizeof *q.out.v, by_start);
    dedupe(&q.out);
    *out = q.out.v;
    *n = q.out.n;
    *complete_to = q.out.horizon;
    return HX_OK;
}

cJSON *hx_cal_cut_json(hx_cal *c, int64_t complete_to, const char *what)
{
    char when[40];
    hx_tz_format(c->tz, complete_to, 0, when, sizeof when);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "complete_until", when);
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "the calendar holds more events in this range than Hearth expands "
                      "at once (%d); %s from %s on are not known: ask again with a "
                      "range starting at %s",
                  HX_CAL_MAX_OCC, what, when, when);
    cJSON_AddStringToObject(o, "note", b.data ? b.data : "");
    hx_buf_free(&b);
    return o;
}

/* ---- JSON ---- */

static const char *mail_addr(const char *v)
{
    if (v && !strncasecmp(v, "mailto:", 7)) return v + 7;
    return v ? v : "";
}

static void add_str(cJSON *o, const char *key, const char *v)
{
    if (v && *v) cJSON_AddStringToObject(o, key, v);
}

static void lower_into(char *dst, size_t n, const char *s)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < n; i++)
        dst[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    dst[i] = 0;
}

static void add_param(cJSON *o, const char *key, icalproperty *p, const char *param)
{
    const char *v = icalproperty_get_parameter_as_string(p, param);
    char low[64];
    if (!v) return;
    if (strcmp(param, "CN")) {
        lower_into(low, sizeof low, v);
        v = low;
    }
    add_str(o, key, v);
}

static cJSON *person_json(icalproperty *p, int attendee)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "email", mail_addr(icalproperty_get_value_as_string(p)));
    add_param(o, "name", p, "CN");
    if (attendee) {
        add_param(o, "status", p, "PARTSTAT");
        add_param(o, "role", p, "ROLE");
    }
    return o;
}

static void add_people(cJSON *o, icalcomponent *ev)
{
    icalproperty *org = icalcomponent_get_first_property(ev, ICAL_ORGANIZER_PROPERTY);
    if (org) hx_json_add(o, "organizer", person_json(org, 0));
    icalproperty *a = icalcomponent_get_first_property(ev, ICAL_ATTENDEE_PROPERTY);
    if (!a) return;
    cJSON *arr = cJSON_AddArrayToObject(o, "attendees");
    for (; a; a = icalcomponent_get_next_property(ev, ICAL_ATTENDEE_PROPERTY))
        hx_json_add(arr, NULL, person_json(a, 1));
}

static void add_time(hx_cal *c, cJSON *o, const char *key, int64_t t, int all_day)
{
    char buf[40];
    hx_tz_format(c->tz, t, all_day, buf, sizeof buf);
    cJSON_AddStringToObject(o, key, buf);
}

static void add_text(cJSON *o, const char *key, const char *v, size_t max)
{
    if (!v || !*v) return;
    if (strlen(v) <= max) {
        cJSON_AddStringToObject(o, key, v);
        return;
    }
    char *cut = hx_strndup(v, max);
    size_t n = strlen(cut);
    while (n && ((unsigned char)cut[n - 1] & 0xC0) == 0x80) n--; /* UTF-8 */
    if (n && (unsigned char)cut[n - 1] >= 0xC0) n--;
    cut[n] = 0;
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "%s...", cut);
    cJSON_AddStringToObject(o, key, b.data ? b.data : "");
    hx_buf_free(&b);
    free(cut);
}

cJSON *hx_cal_occ_json(hx_cal *c, const hx_cal_occ *o)
{
    cJSON *j = cJSON_CreateObject();
    icalcomponent *ev = o->ev;
    cJSON_AddStringToObject(j, "uid", icalcomponent_get_uid(ev));
    cJSON_AddStringToObject(j, "calendar", o->file->calendar);
    cJSON_AddStringToObject(j, "title", icalcomponent_get_summary(ev) ? icalcomponent_get_summary(ev) : "");
    add_time(c, j, "start", o->start, o->all_day);
    add_time(c, j, "end", o->end, o->all_day);
    cJSON_AddBoolToObject(j, "all_day", o->all_day);
    add_text(j, "location", icalcomponent_get_location(ev), 200);
    add_text(j, "description", icalcomponent_get_description(ev), 500);
    icalproperty *st = icalcomponent_get_first_property(ev, ICAL_STATUS_PROPERTY);
    char low[32];
    if (st) {
        lower_into(low, sizeof low, icalproperty_get_value_as_string(st));
        add_str(j, "status", low);
    }
    cJSON_AddBoolToObject(j, "busy", hx_cal_occ_busy(o));
    add_people(j, ev);
    cJSON_AddBoolToObject(j, "recurring", o->recurring);
    if (o->recurring) add_time(c, j, "recurrence_id", o->rid, o->all_day);
    return j;
}

int hx_cal_occ_cancelled(const hx_cal_occ *o)
{
    icalproperty *st = icalcomponent_get_first_property(o->ev, ICAL_STATUS_PROPERTY);
    return st && icalproperty_get_status(st) == ICAL_STATUS_CANCELLED;
}

int hx_cal_occ_busy(const hx_cal_occ *o)
{
    icalproperty *tr = icalcomponent_get_first_property(o->ev, ICAL_TRANSP_PROPERTY);
    if (hx_cal_occ_cancelled(o)) return 0;
    if (tr && icalproperty_get_transp(tr) == ICAL_TRANSP_TRANSPARENT) return 0;
    return 1;
}

int hx_cal_occ_involves(const hx_cal_occ *o, const char *email)
{
    icalproperty *p = icalcomponent_get_first_property(o->ev, ICAL_ORGANIZER_PROPERTY);
    if (p && !strcasecmp(mail_addr(icalproperty_get_value_as_string(p)), email)) return 1;
    for (p = icalcomponent_get_first_property(o->ev, ICAL_ATTENDEE_PROPERTY); p;
         p = icalcomponent_get_next_property(o->ev, ICAL_ATTENDEE_PROPERTY)) {
        if (strcasecmp(mail_addr(icalproperty_get_value_as_string(p)), email)) continue;
        const char *ps = icalproperty_get_parameter_as_string(p, "PARTSTAT");
        return !ps || strcasecmp(ps, "DECLINED");
    }
    return 0;
}
