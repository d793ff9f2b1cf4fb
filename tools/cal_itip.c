/* cal_itip.c: iTIP (RFC 5546) invitations and cancellations: a VCALENDAR
 * with METHOD:REQUEST or CANCEL, sent as a text/calendar part of a MIME
 * mail queued in the outbox Maildir (composed and delivered by maildir.c). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/calendar_int.h"
#include "tools/mail_int.h"

static const char *addr_of(icalproperty *p)
{
    const char *v = icalproperty_get_value_as_string(p);
    if (v && !strncasecmp(v, "mailto:", 7)) v += 7;
    return v ? v : "";
}

/* "bob@x, Carol <carol@x>" for the attendees other than the user. */
static void recipients(hx_cal *c, icalcomponent *ev, hx_buf *to)
{
    const char *me = c->cfg->user_email ? c->cfg->user_email : "";
    for (icalproperty *p = icalcomponent_get_first_property(ev, ICAL_ATTENDEE_PROPERTY); p;
         p = icalcomponent_get_next_property(ev, ICAL_ATTENDEE_PROPERTY)) {
        const char *a = addr_of(p);
        if (!*a || !strcasecmp(a, me)) continue;
        if (to->len) hx_buf_puts(to, ", ");
        hx_buf_puts(to, a);
    }
}

/* The iTIP VCALENDAR: METHOD, the event without alarms, and the
 * VTIMEZONEs the file has. Caller frees. */
static char *itip_text(hx_cal_file *f, icalcomponent *ev, const char *method)
{
    icalcomponent *cal = icalcomponent_new(ICAL_VCALENDAR_COMPONENT);
    icalcomponent_add_property(cal, icalproperty_new_prodid("-//Hearth//Hearth 0.1//EN"));
    icalcomponent_add_property(cal, icalproperty_new_version("2.0"));
    icalcomponent_add_property(cal, icalproperty_new_method(
        strcmp(method, "CANCEL") ? ICAL_METHOD_REQUEST : ICAL_METHOD_CANCEL));
    for (icalcomponent *tz = icalcomponent_get_first_component(f->root, ICAL_VTIMEZONE_COMPONENT);
         tz; tz = icalcomponent_get_next_component(f->root, ICAL_VTIMEZONE_COMPONENT))
        icalcomponent_add_component(cal, icalcomponent_new_clone(tz));
    icalcomponent *copy = icalcomponent_new_clone(ev);
    icalcomponent *al;
    while ((al = icalcomponent_get_first_component(copy, ICAL_VALARM_COMPONENT))) {
        icalcomponent_remove_component(copy, al);
        icalcomponent_free(al);
    }
    icalcomponent_add_component(cal, copy);
    char *text = icalcomponent_as_ical_string_r(cal);
    icalcomponent_free(cal);
    return text;
}

static void body_text(hx_cal *c, hx_cal_file *f, icalcomponent *ev, const char *method,
                      hx_buf *b)
{
    const char *title = icalcomponent_get_summary(ev);
    const char *loc = icalcomponent_get_location(ev);
    int64_t s, e;
    int all_day;
    char start[40];
    hx_cal_event_times(c, f, ev, &s, &e, &all_day);
    hx_tz_format(c->tz, s, all_day, start, sizeof start);
    hx_buf_printf(b, "%s: %s\nWhen: %s (%s)\n",
                  strcmp(method, "CANCEL") ? "Invitation" : "Cancelled", title ? title : "",
                  start, c->cfg->timezone ? c->cfg->timezone : "UTC");
    if (loc && *loc) hx_buf_printf(b, "Where: %s\n", loc);
    hx_buf_printf(b, "Organizer: %s <%s>\n", c->cfg->user_name ? c->cfg->user_name : "",
                  c->cfg->user_email ? c->cfg->user_email : "");
}

int hx_cal_itip_queue(hx_cal *c, hx_cal_file *f, icalcomponent *ev,
                      const char *method, char *name, size_t name_n, hx_err *err)
{
    hx_buf to, body, from, subject;
    if (name && name_n) name[0] = 0;
    hx_buf_init(&to);
    recipients(c, ev, &to);
    if (!to.len) return HX_OK;
    const hx_root *outbox = hx_tools_root(c->reg, HX_ROOT_OUTBOX, 0, 0, err);
    if (!outbox) {
        hx_buf_free(&to);
        return err->rc;
    }
    hx_buf_init(&body);
    hx_buf_init(&from);
    hx_buf_init(&subject);
    body_text(c, f, ev, method, &body);
    hx_buf_printf(&from, "%s <%s>", c->cfg->user_name ? c->cfg->user_name : "",
                  c->cfg->user_email);
    const char *title = icalcomponent_get_summary(ev);
    hx_buf_printf(&subject, "%s: %s", strcmp(method, "CANCEL") ? "Invitation" : "Cancelled",
                  title ? title : "");
    char *ics = itip_text(f, ev, method);
    char type[64], *msg = NULL;
    size_t len = 0;
    snprintf(type, sizeof type, "text/calendar; method=%s", method);
    hx_mail_draft d = {0};
    d.from = from.data;
    d.to = to.data;
    d.subject = subject.data;
    d.body = body.data;
    d.attach_type = type;
    d.attach_name = "invite.ics";
    d.attach_data = ics;
    d.attach_len = ics ? strlen(ics) : 0;
    int rc = ics && !to.oom && !body.oom ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (rc == HX_OK) rc = hx_mail_compose(&d, &msg, &len, NULL, 0, err);
    if (rc == HX_OK) rc = hx_maildir_deliver(outbox, "", msg, len, NULL, name, name_n, err);
    free(msg);
    free(ics);
    hx_buf_free(&to);
    hx_buf_free(&body);
    hx_buf_free(&from);
    hx_buf_free(&subject);
    return rc;
}
