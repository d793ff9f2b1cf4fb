/* cal_cancel.c: one occurrence of a recurring event: cancelling it (an
 * EXDATE on the series, or STATUS:CANCELLED on its override, and an iTIP
 * CANCEL carrying its RECURRENCE-ID), or detaching it as an override that
 * an update changes alone. */
#include <stdlib.h>
#include <string.h>

#include "tools/calendar_int.h"

/* A property of kind holding v, with the TZID of tmpl (DTSTART) if any. */
static icalproperty *time_prop_like(icalproperty_kind kind, icalproperty *tmpl,
                                    struct icaltimetype v)
{
    icalproperty *p = icalproperty_new(kind);
    icalproperty_set_value(p, v.is_date ? icalvalue_new_date(v) : icalvalue_new_datetime(v));
    icalparameter *tz = icalproperty_get_first_parameter(tmpl, ICAL_TZID_PARAMETER);
    if (tz && !v.is_date) icalproperty_add_parameter(p, icalparameter_new_clone(tz));
    return p;
}

/* t as a value in the same form as DTSTART (zone, UTC or date). */
static struct icaltimetype like_dtstart(hx_cal *c, hx_cal_file *f, icalproperty *ps, int64_t t)
{
    struct icaltimetype ts = icalproperty_get_dtstart(ps);
    icaltimezone *z = hx_cal_prop_zone(c, f, ps, ts);
    struct icaltimetype v = hx_cal_ical_time(z, t, ts.is_date);
    if (icaltime_is_utc(ts)) v.zone = icaltimezone_get_utc_timezone();
    return v;
}

static void drop(icalcomponent *ev, icalproperty_kind kind)
{
    icalproperty *p;
    while ((p = icalcomponent_get_first_property(ev, kind))) {
        icalcomponent_remove_property(ev, p);
        icalproperty_free(p);
    }
}

/* A copy of master standing for its one occurrence [s, e): no recurrence,
 * RECURRENCE-ID s, no status. Caller frees. */
static icalcomponent *instance_of(hx_cal *c, hx_cal_file *f, icalcomponent *master,
                                  int64_t s, int64_t e)
{
    icalcomponent *k = icalcomponent_new_clone(master);
    icalproperty *ps = icalcomponent_get_first_property(master, ICAL_DTSTART_PROPERTY);
    static const icalproperty_kind gone[] = {ICAL_RRULE_PROPERTY, ICAL_RDATE_PROPERTY,
                                             ICAL_EXDATE_PROPERTY, ICAL_DTSTART_PROPERTY,
                                             ICAL_DTEND_PROPERTY, ICAL_DURATION_PROPERTY,
                                             ICAL_STATUS_PROPERTY};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) drop(k, gone[i]);
    icalcomponent_add_property(k, time_prop_like(ICAL_DTSTART_PROPERTY, ps, like_dtstart(c, f, ps, s)));
    icalcomponent_add_property(k, time_prop_like(ICAL_DTEND_PROPERTY, ps, like_dtstart(c, f, ps, e)));
    icalcomponent_add_property(k, time_prop_like(ICAL_RECURRENCEID_PROPERTY, ps,
                                                 like_dtstart(c, f, ps, s)));
    return k;
}

/* The iTIP CANCEL event for one occurrence [s, e) of master. Caller frees. */
static icalcomponent *cancel_instance(hx_cal *c, hx_cal_file *f, icalcomponent *master,
                                      int64_t s, int64_t e)
{
    icalcomponent *k = instance_of(c, f, master, s, e);
    icalcomponent_add_property(k, icalproperty_new_status(ICAL_STATUS_CANCELLED));
    return k;
}

/* The occurrence of uid that the "occurrence" argument names. */
static int find_occurrence(hx_tools *reg, hx_cal *c, const char *uid, const cJSON *args,
                           hx_cal_occ *out, hx_err *err)
{
    hx_when_range r;
    hx_cal_occ *occ = NULL;
    int n, rc = hx_arg_when(reg, args, "occurrence", &r, err);
    if (rc) return rc;
    int64_t to = r.is_point ? r.start + 1 : r.end, known;
    if ((rc = hx_cal_occurrences(c, r.start, to, &occ, &n, &known, err))) return rc;
    rc = HX_ERR_NOTFOUND;
    for (int i = 0; i < n && rc; i++)
        if (!strcmp(icalcomponent_get_uid(occ[i].ev), uid) &&
            (!r.is_point || occ[i].start == r.start || occ[i].rid == r.start)) {
            *out = occ[i];
            rc = HX_OK;
        }
    free(occ);
    if (rc && known < to)
        return hx_err_set(err, HX_ERR_FULL,
                          "too many events around '%s' to find the occurrence; give its "
                          "exact start time", hx_arg_str(args, "occurrence"));
    if (rc)
        return hx_err_set(err, HX_ERR_NOTFOUND, "event '%s' has no occurrence at '%s'", uid,
                          hx_arg_str(args, "occurrence"));
    return HX_OK;
}

static cJSON *occ_result(hx_cal *c, hx_cal_file *f, const hx_cal_occ *o, const char *mail)
{
    cJSON *res = cJSON_CreateObject();
    cJSON *j = hx_cal_occ_json(c, o);
    cJSON_DeleteItemFromObject(j, "status");
    cJSON_AddStringToObject(j, "status", "cancelled");
    cJSON_ReplaceItemInObject(j, "busy", cJSON_CreateFalse());
    cJSON_AddItemToObject(res, "cancelled_occurrence", j);
    cJSON_AddStringToObject(res, "file", f->path);
    if (mail && *mail) cJSON_AddStringToObject(res, "invitation_queued", mail);
    return res;
}

static int check_repeats(icalcomponent *ev, const char *verb, hx_err *err)
{
    if (icalcomponent_get_first_property(ev, ICAL_RRULE_PROPERTY) ||
        icalcomponent_get_first_property(ev, ICAL_RDATE_PROPERTY))
        return HX_OK;
    return hx_err_set(err, HX_ERR_INVALID, "event '%s' does not repeat; %s it without 'occurrence'",
                      icalcomponent_get_uid(ev), verb);
}

int hx_cal_detach_occurrence(hx_tools *reg, hx_cal *c, hx_cal_file **f, icalcomponent **ev,
                             const cJSON *args, hx_err *err)
{
    hx_cal_occ o;
    int rc = check_repeats(*ev, "change", err);
    if (!rc) rc = find_occurrence(reg, c, icalcomponent_get_uid(*ev), args, &o, err);
    if (rc) return rc;
    if (o.ev != *ev) { /* already an override: change it where it is */
        *f = o.file, *ev = o.ev;
        return HX_OK;
    }
    icalcomponent *k = instance_of(c, *f, *ev, o.start, o.end);
    icalcomponent_add_component((*f)->root, k);
    *ev = k;
    return HX_OK;
}

int hx_cal_cancel_occurrence(hx_tools *reg, hx_cal *c, hx_cal_file *f, icalcomponent *ev,
                             const cJSON *args, cJSON **result, hx_err *err)
{
    const char *uid = icalcomponent_get_uid(ev);
    hx_cal_occ o;
    hx_cal_edit e;
    char mail[256] = "";
    int rc = check_repeats(ev, "cancel", err);
    if (!rc) rc = find_occurrence(reg, c, uid, args, &o, err);
    if (rc) return rc;
    memset(&e, 0, sizeof e);
    e.reminder_min = HX_CAL_KEEP_ALARM;
    e.bump_sequence = 1;
    icalcomponent *notice;
    if (o.ev != ev) { /* an override: cancel it where it is */
        e.cancel = 1;
        rc = hx_cal_apply_edit(c, o.file->root, o.ev, &e, err);
        notice = icalcomponent_new_clone(o.ev);
        f = o.file;
    } else {
        icalproperty *ps = icalcomponent_get_first_property(ev, ICAL_DTSTART_PROPERTY);
        icalcomponent_add_property(ev, time_prop_like(ICAL_EXDATE_PROPERTY, ps,
                                                      like_dtstart(c, f, ps, o.start)));
        rc = hx_cal_apply_edit(c, f->root, ev, &e, err);
        notice = cancel_instance(c, f, ev, o.start, o.end);
    }
    if (rc == HX_OK) rc = hx_cal_save(c, f, err);
    if (rc == HX_OK) rc = hx_cal_itip_queue(c, f, notice, "CANCEL", mail, sizeof mail, err);
    if (rc == HX_OK) *result = occ_result(c, f, &o, mail);
    icalcomponent_free(notice);
    return rc;
}
