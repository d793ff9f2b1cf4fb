/* cal_slots.c: calendar.free_busy and calendar.find_slots: busy intervals
 * of the user and of attendees (from their events in the user's
 * calendars), merged, and free slots within working hours. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/calendar_int.h"

#define SLOT_ALIGN 900 /* slots start on a quarter hour */

typedef struct ivals {
    int64_t (*v)[2];
    int n, cap;
} ivals;

static void ival_add(ivals *l, int64_t s, int64_t e)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 32;
        int64_t(*nv)[2] = hx_realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv) return;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n][0] = s;
    l->v[l->n][1] = e;
    l->n++;
}

static int by_ival(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

static void ival_merge(ivals *l)
{
    if (!l->n) return;
    qsort(l->v, (size_t)l->n, sizeof *l->v, by_ival);
    int w = 0;
    for (int i = 1; i < l->n; i++) {
        if (l->v[i][0] <= l->v[w][1]) {
            if (l->v[i][1] > l->v[w][1]) l->v[w][1] = l->v[i][1];
        } else
            l->v[++w][0] = l->v[i][0], l->v[w][1] = l->v[i][1];
    }
    l->n = w + 1;
}

/* Does the user decline o? (then it does not block the user's time) */
static int user_declined(const hx_cal *c, const hx_cal_occ *o)
{
    const char *me = c->cfg->user_email;
    if (!me || !*me) return 0;
    for (icalproperty *p = icalcomponent_get_first_property(o->ev, ICAL_ATTENDEE_PROPERTY); p;
         p = icalcomponent_get_next_property(o->ev, ICAL_ATTENDEE_PROPERTY)) {
        const char *v = icalproperty_get_value_as_string(p);
        if (v && !strncasecmp(v, "mailto:", 7)) v += 7;
        const char *ps = icalproperty_get_parameter_as_string(p, "PARTSTAT");
        if (v && !strcasecmp(v, me)) return ps && !strcasecmp(ps, "DECLINED");
    }
    return 0;
}

/* Does o take the user's time? (busy, and not declined by the user) */
static int user_busy(const hx_cal *c, const hx_cal_occ *o)
{
    return hx_cal_occ_busy(o) && !user_declined(c, o);
}

/* Busy intervals of the user (email NULL) or of an attendee. */
static void busy_of(hx_cal *c, const hx_cal_occ *occ, int n, const char *email, ivals *out)
{
    for (int i = 0; i < n; i++) {
        if (email ? !hx_cal_occ_busy(&occ[i]) || !hx_cal_occ_involves(&occ[i], email)
                  : !user_busy(c, &occ[i]))
            continue;
        ival_add(out, occ[i].start, occ[i].end);
    }
    ival_merge(out);
}

/* Is email organizer or attendee of any event in the calendars? */
static int known_person(hx_cal *c, const char *email)
{
    for (int i = 0; i < c->n_files; i++) {
        for (int j = 0; j < c->files[i].n_events; j++) {
            hx_cal_occ o = {c->files[i].events[j], &c->files[i], 0, 0, 0, 0, 0};
            if (hx_cal_occ_involves(&o, email)) return 1;
        }
    }
    return 0;
}

static cJSON *ivals_json(hx_cal *c, const ivals *l, int64_t from, int64_t to)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < l->n; i++) {
        int64_t s = l->v[i][0] < from ? from : l->v[i][0];
        int64_t e = l->v[i][1] > to ? to : l->v[i][1];
        cJSON_AddItemToArray(arr, hx_cal_range_json(c, s, e));
    }
    return arr;
}

/* The query's occurrences, for both tools; *known is where what they say
 * stops being complete (*to when the expansion was not cut). A range
 * shorter than min_len seconds is made that long from its start: a
 * moment ("friday at noon") asks about the slot that starts there. */
static int open_range(hx_tools *reg, const cJSON *args, const char *dflt, int64_t min_len,
                      hx_cal **c, int64_t *from, int64_t *to, int64_t *known, hx_cal_occ **occ,
                      int *n, hx_err *err)
{
    int rc = hx_cal_tool_open(reg, c, err);
    if (rc) return rc;
    rc = hx_cal_arg_range(reg, args, dflt, from, to, err);
    if (!rc && *to - *from < min_len) *to = *from + min_len;
    if (rc || (rc = hx_cal_occurrences(*c, *from, *to, occ, n, known, err))) {
        hx_cal_free(*c);
        *c = NULL;
    }
    return rc;
}

/* Names each of the user's busy intervals (busy, as ivals_json wrote
 * mine) with the titles of the user's own events in it, "; "-joined: "am
 * I busy monday morning?" wants to know with what. An attendee's busy
 * time keeps no title: it is only when, as a free/busy lookup gives. */
static void title_busy(hx_tools *reg, hx_cal *c, const hx_cal_occ *occ, int n, const ivals *mine,
                       cJSON *busy)
{
    int i = 0;
    for (cJSON *b = busy ? busy->child : NULL; b && i < mine->n; b = b->next, i++) {
        hx_buf t;
        hx_buf_init(&t);
        for (int k = 0; k < n; k++) {
            const char *title = icalcomponent_get_summary(occ[k].ev);
            if (!user_busy(c, &occ[k]) || !title || !*title ||
                occ[k].end <= mine->v[i][0] || occ[k].start >= mine->v[i][1])
                continue;
            hx_buf_printf(&t, "%s%s", t.len ? "; " : "", title);
            hx_cal_note_author(reg, c, occ[k].ev);
        }
        if (t.len && !t.oom) cJSON_AddStringToObject(b, "title", t.data);
        hx_buf_free(&t);
    }
}

int hx_cal_free_busy(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                     hx_err *err)
{
    (void)user;
    hx_cal *c;
    hx_cal_occ *occ = NULL;
    int64_t from, to, known;
    int n;
    int rc = hx_arg_addresses(args, "attendees", err);
    if (rc || (rc = open_range(reg, args, "today", 0, &c, &from, &to, &known, &occ, &n, err)))
        return rc;
    cJSON *res = cJSON_CreateObject();
    ivals mine = {0};
    busy_of(c, occ, n, NULL, &mine);
    cJSON_AddItemToObject(res, "range", hx_cal_range_json(c, from, to));
    cJSON_AddItemToObject(res, "busy", ivals_json(c, &mine, from, to));
    title_busy(reg, c, occ, n, &mine, cJSON_GetObjectItemCaseSensitive(res, "busy"));
    if (known < to) { /* the time after it is neither busy nor free: unknown */
        cJSON_AddItemToObject(res, "unknown", hx_cal_range_json(c, known, to));
        cJSON_AddItemToObject(res, "more", hx_cal_cut_json(c, known, "busy times"));
    }
    const cJSON *a, *att = cJSON_GetObjectItemCaseSensitive(args, "attendees");
    cJSON *arr = att ? cJSON_AddArrayToObject(res, "attendees") : NULL;
    cJSON_ArrayForEach(a, att)
    {
        ivals theirs = {0};
        busy_of(c, occ, n, a->valuestring, &theirs);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "email", a->valuestring);
        cJSON_AddBoolToObject(o, "known", known_person(c, a->valuestring));
        cJSON_AddItemToObject(o, "busy", ivals_json(c, &theirs, from, to));
        cJSON_AddItemToArray(arr, o);
        free(theirs.v);
    }
    hx_cal_add_problems(reg, c, res);
    free(mine.v);
    free(occ);
    hx_cal_free(c);
    *result = res;
    return HX_OK;
}

/* ---- conflicts of a new or moved event ---- */

cJSON *hx_cal_conflicts(hx_tools *reg, hx_cal *c, int64_t start, int64_t end, const char *skip_uid)
{
    hx_cal_occ *occ = NULL;
    int64_t known;
    int n = 0;
    hx_err e;
    if (hx_cal_occurrences(c, start, end, &occ, &n, &known, &e)) return NULL;
    cJSON *arr = NULL;
    for (int i = 0; i < n; i++) {
        const hx_cal_occ *o = &occ[i];
        const char *uid = icalcomponent_get_uid(o->ev), *title = icalcomponent_get_summary(o->ev);
        if (!user_busy(c, o) || (skip_uid && uid && !strcmp(uid, skip_uid)))
            continue;
        if (!arr) arr = cJSON_CreateArray();
        cJSON *j = hx_cal_range_json(c, o->start, o->end);
        cJSON_AddStringToObject(j, "title", title ? title : "");
        cJSON_AddStringToObject(j, "uid", uid ? uid : "");
        cJSON_AddItemToArray(arr, j);
        hx_cal_note_author(reg, c, o->ev);
    }
    free(occ);
    return arr;
}

/* ---- find_slots ---- */

typedef struct slot_query {
    hx_cal *c;
    ivals busy;
    int64_t dur, step;
    int count, work_only;
    cJSON *out;
} slot_query;

static int64_t align_up(int64_t t)
{
    int64_t r = t % SLOT_ALIGN;
    if (r < 0) r += SLOT_ALIGN;
    return r ? t + SLOT_ALIGN - r : t;
}

/* The end of the first busy interval overlapping [s, e), or 0. */
static int64_t conflict(const ivals *b, int64_t s, int64_t e)
{
    for (int i = 0; i < b->n; i++)
        if (b->v[i][0] < e && b->v[i][1] > s) return b->v[i][1];
    return 0;
}

static void slots_in(slot_query *q, int64_t ws, int64_t we)
{
    int64_t t = align_up(ws);
    while (t + q->dur <= we && cJSON_GetArraySize(q->out) < q->count) {
        int64_t busy_end = conflict(&q->busy, t, t + q->dur);
        if (busy_end) {
            t = align_up(busy_end);
            continue;
        }
        cJSON_AddItemToArray(q->out, hx_cal_range_json(q->c, t, t + q->dur));
        t += q->step;
    }
}

/* Local time minutes after the start of day number d. */
static int64_t day_at(hx_cal *c, int64_t d, int min)
{
    hx_civil cv = {0};
    hx_civil_from_days(d + min / 1440, &cv.year, &cv.month, &cv.day);
    cv.hour = min % 1440 / 60;
    cv.min = min % 60;
    return hx_tz_to_utc(c->tz, &cv);
}

static void walk_days(slot_query *q, int64_t from, int64_t to)
{
    const hx_config *cfg = q->c->cfg;
    int64_t d0 = hx_tz_local_day(q->c->tz, from), d1 = hx_tz_local_day(q->c->tz, to - 1);
    for (int64_t d = d0; d <= d1 && cJSON_GetArraySize(q->out) < q->count; d++) {
        int64_t ws = day_at(q->c, d, 0), we = day_at(q->c, d, 1440);
        if (q->work_only) {
            if (!(cfg->work_days & (1 << hx_weekday(d)))) continue;
            ws = day_at(q->c, d, cfg->work_start_min);
            we = day_at(q->c, d, cfg->work_end_min);
        }
        slots_in(q, ws < from ? from : ws, we > to ? to : we);
    }
}

int hx_cal_find_slots(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                      hx_err *err)
{
    (void)user;
    slot_query q = {0};
    hx_cal_occ *occ = NULL;
    int64_t from, to, known, now = hx_now(NULL);
    int n, rc = hx_arg_addresses(args, "attendees", err);
    q.dur = (int64_t)hx_arg_int(args, "duration_minutes", 30) * 60;
    if (rc || (rc = open_range(reg, args, "next week", q.dur, &q.c, &from, &to, &known, &occ,
                               &n, err)))
        return rc;
    q.step = align_up(q.dur < 1800 ? 1800 : q.dur);
    q.count = hx_arg_int(args, "count", 5);
    q.work_only = hx_arg_bool(args, "working_hours_only", 1);
    q.out = cJSON_CreateArray();
    busy_of(q.c, occ, n, NULL, &q.busy);
    cJSON *res = cJSON_CreateObject(), *people = cJSON_CreateArray(), *a;
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(args, "attendees");
    cJSON_ArrayForEach(a, att)
    {
        busy_of(q.c, occ, n, a->valuestring, &q.busy);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "email", a->valuestring);
        cJSON_AddBoolToObject(o, "calendar_known", known_person(q.c, a->valuestring));
        cJSON_AddItemToArray(people, o);
    }
    ival_merge(&q.busy);
    /* a slot is offered only where every event is known: never after a cut */
    walk_days(&q, from < now ? now : from, known);
    cJSON_AddItemToObject(res, "range", hx_cal_range_json(q.c, from, to));
    if (known < to) cJSON_AddItemToObject(res, "more", hx_cal_cut_json(q.c, known, "free slots"));
    cJSON_AddNumberToObject(res, "duration_minutes", (double)(q.dur / 60));
    cJSON_AddItemToObject(res, "slots", q.out);
    if (!cJSON_GetArraySize(q.out)) { /* none: what stands in the way, of the user's own */
        cJSON *busy = hx_cal_conflicts(reg, q.c, from, to, NULL);
        if (busy) cJSON_AddItemToObject(res, "busy", busy);
    }
    cJSON_AddItemToObject(res, "attendees", people);
    hx_cal_add_problems(reg, q.c, res);
    free(q.busy.v);
    free(occ);
    hx_cal_free(q.c);
    *result = res;
    return HX_OK;
}
