/* oracle.c: the oracle token source that writes the intended assistant
 * turns of a generated task, and the runs and checks around it. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim/sim.h"

typedef struct oracle {
    const cJSON *task;
    const cJSON *slots;
    const hx_world *w;
    const hx_tools *reg;
    hx_planner **pl;
    int step;
    int shift;         /* turns spent on a refused slip: later steps count from it */
    unsigned mistakes; /* bit k: turn k is a deliberate slip (no loss) */
    char *turn;      /* the turn being written */
    int sent;
    char failed[160];
    char **prompts;
    int n_prompts, cap_prompts;
} oracle;

/* ---- helpers for writing turns ---- */
static const char *S(const oracle *o, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o->slots, key));
    return s ? s : "";
}

static int N(const oracle *o, const char *key)
{
    return (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o->slots, key));
}

/* args with its members in the order of the tool's schema: the tool-call
 * grammar, hence the model, writes them in that order. */
static cJSON *schema_order(const hx_tools *reg, const char *name, cJSON *args)
{
    const hx_tool_def *d = hx_tools_find(reg, name);
    cJSON *s = d ? cJSON_Parse(d->schema_json) : NULL, *p, *sorted = cJSON_CreateObject();
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(s, "properties"))
    {
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(args, p->string);
        if (v) cJSON_AddItemToObject(sorted, p->string, v);
    }
    while (args->child) { /* not in the schema: kept last, the validator says no */
        cJSON *v = cJSON_DetachItemViaPointer(args, args->child);
        cJSON_AddItemToObject(sorted, v->string, v);
    }
    cJSON_Delete(s);
    cJSON_Delete(args);
    return sorted;
}

/* Writes <tool_call>{"name": name, "arguments": args}</tool_call>; takes args. */
static void call(const oracle *o, hx_buf *out, const char *name, cJSON *args)
{
    args = schema_order(o->reg, name, args);
    char *a = cJSON_PrintUnformatted(args);
    hx_buf_printf(out, HX_TOOL_CALL_OPEN "{\"name\": \"%s\", \"arguments\": %s}" HX_TOOL_CALL_CLOSE, name,
                  a ? a : "{}");
    cJSON_free(a);
    cJSON_Delete(args);
}

static cJSON *obj(void) { return cJSON_CreateObject(); }
static cJSON *put(cJSON *o, const char *k, const char *v)
{
    cJSON_AddStringToObject(o, k, v);
    return o;
}
static cJSON *put_n(cJSON *o, const char *k, int v)
{
    cJSON_AddNumberToObject(o, k, v);
    return o;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

static const cJSON *jarr(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* "2026-12-08T12:00:00+01:00" -> "2026-12-08" / "12:00" */
static void iso_date(const char *iso, char *b, size_t n) { snprintf(b, n, "%.10s", iso); }
static void iso_time(const char *iso, char *b, size_t n)
{
    snprintf(b, n, "%.5s", strlen(iso) >= 16 ? iso + 11 : "");
}

/* ", " between items and " and " before the last. */
static void sep(hx_buf *b, int i, int n)
{
    if (i) hx_buf_puts(b, i == n - 1 ? " and " : ", ");
}

static void fail(oracle *o, const char *why, hx_buf *out)
{
    snprintf(o->failed, sizeof o->failed, "%s", why);
    hx_buf_puts(out, "(the oracle gave up)");
}

static const char *tool_error(const cJSON *res) { return jstr(res, "error"); }

const char *hx_dg_rel_path(const char *p)
{
    const char *f = strstr(p, "/files/");
    return f ? f + 7 : p;
}

static int multi_day(const char *when) { return strstr(when, "week") != NULL; }

/* ---- the kinds' turns: step 0 is the first turn; res is the last tool
 * result (NULL before the first) ---- */
static void t_list(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *when = S(o, "when");
    if (o->step == 0) return call(o, out, "calendar.list_events", put(obj(), "range", when));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *evs = jarr(res, "events"), *e;
    int n = 0, shown = 0;
    cJSON_ArrayForEach(e, evs) n += strcmp(jstr(e, "status"), "cancelled") != 0;
    if (!n) return (void)hx_buf_printf(out, "You have nothing on your calendar %s.", when);
    hx_buf_printf(out, "You have %d event%s %s: ", n, n > 1 ? "s" : "", when);
    int k = n > 4 ? 4 : n;
    cJSON_ArrayForEach(e, evs)
    {
        if (!strcmp(jstr(e, "status"), "cancelled") || shown >= k) continue;
        char d[16], t[8];
        iso_date(jstr(e, "start"), d, sizeof d);
        iso_time(jstr(e, "start"), t, sizeof t);
        sep(out, shown, n > 4 ? k + 1 : k);
        if (cJSON_IsTrue(cJSON_GetObjectItem(e, "all_day"))) hx_buf_printf(out, "%s (all day)", jstr(e, "title"));
        else if (multi_day(when)) hx_buf_printf(out, "%s on %s at %s", jstr(e, "title"), d, t);
        else hx_buf_printf(out, "%s at %s", jstr(e, "title"), t);
        shown++;
    }
    if (n > 4) hx_buf_printf(out, " and %d more", n - 4);
    hx_buf_puts(out, ".");
}

/* The first of evs, not cancelled, that has not ended before the world's
 * now (the list starts at today's midnight); NULL when none. */
static const cJSON *next_event(const oracle *o, const cJSON *evs)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        hx_when_range end;
        if (strcmp(jstr(e, "status"), "cancelled") &&
            (hx_when_parse(jstr(e, "end"), o->w->now, o->w->tz, &end, NULL) || end.start > o->w->now))
            return e;
    }
    return NULL;
}

/* "when is the budget review?": the event asked for by its title, looked
 * for ahead (list_events with a query and no range), said with its day
 * and time; a near match ("others") when none has every word. */
static void t_event_when(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *name = S(o, "name");
    if (o->step == 0) return call(o, out, "calendar.list_events", put(obj(), "query", name));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *found = next_event(o, jarr(res, "events"));
    if (!found) found = next_event(o, jarr(res, "others"));
    if (!found) return (void)hx_buf_printf(out, "I found no %s on your calendar.", name);
    char d[16], t[8];
    iso_date(jstr(found, "start"), d, sizeof d);
    iso_time(jstr(found, "start"), t, sizeof t);
    if (cJSON_IsTrue(cJSON_GetObjectItem(found, "all_day")))
        return (void)hx_buf_printf(out, "%s is on %s (all day).", jstr(found, "title"), d);
    hx_buf_printf(out, "%s is on %s at %s.", jstr(found, "title"), d, t);
}

static void slot_list(const cJSON *slots, hx_buf *out)
{
    int n = cJSON_GetArraySize(slots), i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, slots)
    {
        char d[16], t[8];
        iso_date(jstr(s, "start"), d, sizeof d);
        iso_time(jstr(s, "start"), t, sizeof t);
        sep(out, i++, n);
        hx_buf_printf(out, "%s %s", d, t);
    }
}

static void t_slots(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *when = S(o, "when");
    int dur = N(o, "dur");
    if (o->step == 0)
        return call(o, out, "calendar.find_slots",
                    put_n(put(put_n(obj(), "duration_minutes", dur), "range", when), "count", 3));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *slots = jarr(res, "slots");
    if (!cJSON_GetArraySize(slots))
        return (void)hx_buf_printf(out, "You have no free %d-minute slot %s.", dur, when);
    hx_buf_printf(out, "You are free for %d minutes %s at ", dur, when);
    slot_list(slots, out);
    hx_buf_puts(out, ".");
}

static void t_free_busy(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *when = S(o, "when");
    if (o->step == 0) return call(o, out, "calendar.free_busy", put(obj(), "range", when));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *busy = jarr(res, "busy"), *b;
    int n = cJSON_GetArraySize(busy), i = 0;
    if (!n) return (void)hx_buf_printf(out, "You are free %s.", when);
    if (n > 5) return (void)hx_buf_printf(out, "You are busy %d times %s.", n, when);
    hx_buf_printf(out, "You are busy %s ", when);
    cJSON_ArrayForEach(b, busy)
    {
        char d[16], t0[8], t1[8];
        iso_date(jstr(b, "start"), d, sizeof d);
        iso_time(jstr(b, "start"), t0, sizeof t0);
        iso_time(jstr(b, "end"), t1, sizeof t1);
        sep(out, i++, n);
        if (multi_day(when)) hx_buf_printf(out, "on %s ", d);
        hx_buf_printf(out, "from %s to %s", t0, t1);
    }
    hx_buf_puts(out, ".");
}

/* An event added with what the request gave: a moment and a length
 * (create_event), a moment alone (remind: the event's default length), or
 * a whole day (all_day). */
/* v as the request spells it ("september 29" where a wrapper lowered the
 * first letter of "September 29"), so a call copies the user's words;
 * v itself where the request does not hold it. */
static const char *as_said(const oracle *o, const char *v, char *buf, size_t n)
{
    const char *p = *v ? strcasestr(jstr(o->task, "request"), v) : NULL;
    if (!p) return v;
    snprintf(buf, n, "%.*s", (int)strlen(v), p);
    return buf;
}

static void t_create(oracle *o, const cJSON *res, hx_buf *out)
{
    const int all_day = *S(o, "day") != 0;
    if (o->step == 0) {
        char when[96];
        const char *start = as_said(o, all_day ? S(o, "day") : S(o, "at"), when, sizeof when);
        cJSON *a = put(put(obj(), "title", S(o, "title")), "start", start);
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o->slots, "dur")))
            put_n(a, "duration_minutes", N(o, "dur"));
        if (all_day) cJSON_AddBoolToObject(a, "all_day", 1);
        return call(o, out, "calendar.create_event", a);
    }
    const char *e = tool_error(res);
    if (!strncmp(e, "refused", 7)) return (void)hx_buf_puts(out, "I did not add the event: you declined.");
    if (*e) return fail(o, e, out);
    const cJSON *c = jarr(res, "created");
    char d[16], t[8];
    iso_date(jstr(c, "start"), d, sizeof d);
    if (all_day) return (void)hx_buf_printf(out, "Added \"%s\" on %s (all day).", S(o, "title"), d);
    iso_time(jstr(c, "start"), t, sizeof t);
    hx_buf_printf(out, "Added \"%s\" on %s at %s.", S(o, "title"), d, t);
}

static void from_name(const char *from, char *b, size_t n)
{
    snprintf(b, n, "%.*s", (int)strcspn(from, "<"), from);
    size_t l = strlen(b);
    while (l && b[l - 1] == ' ') b[--l] = 0;
    if (!l) snprintf(b, n, "%s", from);
}

static cJSON *search_args(const oracle *o)
{
    return put(put(obj(), "from", S(o, "who")), "text", S(o, "topic"));
}

static void t_mail_search(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "mail.search", search_args(o));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *m = cJSON_GetArrayItem(jarr(res, "messages"), 0);
    int total = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total"));
    if (!m) return (void)hx_buf_printf(out, "I found no mail from %s about %s.", S(o, "who"), S(o, "topic"));
    char name[64], d[16];
    from_name(jstr(m, "from"), name, sizeof name);
    iso_date(jstr(m, "date"), d, sizeof d);
    hx_buf_printf(out, "%s wrote \"%s\" on %s", name, jstr(m, "subject"), d);
    if (total > 1) hx_buf_printf(out, " (%d messages in all)", total);
    hx_buf_puts(out, ".");
}

static void t_unread(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) {
        cJSON *a = obj();
        cJSON_AddBoolToObject(a, "unread", 1);
        return call(o, out, "mail.search", put_n(a, "limit", 3));
    }
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *ms = jarr(res, "messages"), *m;
    int total = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total")), i = 0;
    int n = cJSON_GetArraySize(ms) > 3 ? 3 : cJSON_GetArraySize(ms);
    if (!total) return (void)hx_buf_puts(out, "You have no unread mail.");
    hx_buf_printf(out, "You have %d unread message%s: ", total, total > 1 ? "s" : "");
    cJSON_ArrayForEach(m, ms)
    {
        if (i >= n) break;
        char name[64];
        from_name(jstr(m, "from"), name, sizeof name);
        sep(out, i++, n);
        hx_buf_printf(out, "\"%s\" from %s", jstr(m, "subject"), name);
    }
    hx_buf_puts(out, ".");
}

/* Mail from one sender: the newest three, by subject and day. */
static void t_mail_from(oracle *o, const cJSON *res, hx_buf *out)
{
    char who[96];
    if (o->step == 0) return call(o, out, "mail.search", put(obj(), "from", as_said(o, S(o, "who"), who, sizeof who)));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *ms = jarr(res, "messages"), *m;
    int total = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total")), i = 0;
    int n = cJSON_GetArraySize(ms) > 3 ? 3 : cJSON_GetArraySize(ms);
    if (!total || !n) return (void)hx_buf_printf(out, "I found no mail from %s.", S(o, "who"));
    char name[64], d[16];
    from_name(jstr(cJSON_GetArrayItem(ms, 0), "from"), name, sizeof name);
    hx_buf_printf(out, "%d message%s from %s: ", total, total > 1 ? "s" : "", name);
    cJSON_ArrayForEach(m, ms)
    {
        if (i >= n) break;
        sep(out, i++, n);
        iso_date(jstr(m, "date"), d, sizeof d);
        hx_buf_printf(out, "\"%s\" on %s", jstr(m, "subject"), d);
    }
    hx_buf_puts(out, ".");
}

static void t_file_search(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "files.search", put(obj(), "content", S(o, "topic")));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *fs = jarr(res, "files"), *f;
    int n = cJSON_GetArraySize(fs), i = 0;
    if (!n) return (void)hx_buf_printf(out, "I found no file about %s.", S(o, "topic"));
    hx_buf_puts(out, n == 1 ? "It is " : "I found ");
    cJSON_ArrayForEach(f, fs)
    {
        if (i >= 3) break;
        sep(out, i++, n > 3 ? 3 : n);
        hx_buf_puts(out, hx_dg_rel_path(jstr(f, "path")));
    }
    hx_buf_puts(out, ".");
}

/* A figure in a note: one search of the contents, then the line that
 * holds it (a match past the note's title line), said with its file. */
static void t_file_figure(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "files.search", put(obj(), "content", S(o, "words")));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *f = cJSON_GetArrayItem(jarr(res, "files"), 0), *m, *line = NULL;
    if (!f) return (void)hx_buf_printf(out, "I found no note about the %s.", S(o, "topic"));
    cJSON_ArrayForEach(m, jarr(f, "matches"))
    if (!line || cJSON_GetNumberValue(cJSON_GetObjectItem(m, "line")) > 1) line = m;
    if (!line) return (void)hx_buf_printf(out, "%s is about the %s.", hx_dg_rel_path(jstr(f, "path")), S(o, "topic"));
    hx_buf_printf(out, "%s (%s)", jstr(line, "text"), hx_dg_rel_path(jstr(f, "path")));
}

static void t_files_list(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *folder = S(o, "folder");
    if (o->step == 0) return call(o, out, "files.list", put(obj(), "path", folder));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *es = jarr(res, "entries"), *e;
    if (!es) es = jarr(res, "files");
    int n = cJSON_GetArraySize(es), i = 0;
    if (!n) return (void)hx_buf_printf(out, "Your %s folder is empty.", folder);
    hx_buf_printf(out, "Your %s folder has %d file%s: ", folder, n, n > 1 ? "s" : "");
    cJSON_ArrayForEach(e, es)
    {
        if (i >= 5) break;
        sep(out, i++, n > 5 ? 5 : n);
        hx_buf_puts(out, jstr(e, "name"));
    }
    if (n > 5) hx_buf_printf(out, " and %d more", n - 5);
    hx_buf_puts(out, ".");
}

static int in_system_text(const oracle *o, const char *s);

static cJSON *send_args(const oracle *o, const char *to)
{
    return put(put(put(obj(), "to", to), "subject", S(o, "topic")), "body", S(o, "msg"));
}

/* Recovery kinds (schedule_fix, send_fix): turn 0 is a call with the
 * slipped address "bad", which the tool must refuse; it is marked as a
 * mistake (no loss) and the kind's turns go on one step later, from the
 * corrected call. Returns 1 when it wrote the turn. */
static int slip(oracle *o, const cJSON *res, hx_buf *out, const char *tool, cJSON *args)
{
    if (o->step == 0) {
        o->mistakes |= 1u;
        call(o, out, tool, args);
        return 1;
    }
    cJSON_Delete(args);
    if (o->step == 1) {
        if (!strstr(tool_error(res), "is not an address")) {
            char why[160];
            snprintf(why, sizeof why, "the slipped address was not refused (%.100s)",
                     *tool_error(res) ? tool_error(res) : "the call succeeded");
            fail(o, why, out);
            return 1;
        }
        o->shift = 1;
    }
    return 0;
}

/* The answer when a call was refused for an address the user gave: the
 * assistant cannot guess the right one, so it says what failed. */
static int address_refused(const oracle *o, const cJSON *res, const char *what, hx_buf *out)
{
    if (!strstr(tool_error(res), "is not an address")) return 0;
    hx_buf_printf(out, "I %s: \"%s\" is not a valid email address. Please check it and ask again.",
                  what, S(o, "bad"));
    return 1;
}

static void t_send(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *kind = jstr(o->task, "kind");
    if (!strcmp(kind, "send_fix") && slip(o, res, out, "mail.send", send_args(o, S(o, "bad"))))
        return;
    /* named by first name: the address only as recall put it in the prompt */
    if (o->step == 0 && !strcmp(kind, "send_named") && !in_system_text(o, S(o, "email")))
        return (void)hx_buf_printf(out, "I don't know %s's address: tell me it and I'll send the mail.", S(o, "who"));
    if (o->step == o->shift) return call(o, out, "mail.send", send_args(o, S(o, "email")));
    if (address_refused(o, res, "did not send the mail", out)) return;
    const char *e = tool_error(res);
    if (!strncmp(e, "refused", 7) && !strcmp(kind, "policy_deny"))
        return (void)hx_buf_puts(out, "Your policy does not allow mail.send, so I did not send it.");
    if (!strncmp(e, "refused", 7)) return (void)hx_buf_puts(out, "I did not send the mail: you declined.");
    if (*e) return fail(o, e, out);
    hx_buf_printf(out, "Sent to %s: \"%s\" is queued in the outbox.", S(o, "email"), S(o, "topic"));
}

/* Whether a system message so far (who, when, recalled memories) holds s. */
static int in_system_text(const oracle *o, const char *s)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, hx_planner_messages(*o->pl))
        if (!strcmp(jstr(m, "role"), "system") && strstr(jstr(m, "content"), s)) return 1;
    return 0;
}

static void t_schedule(oracle *o, const cJSON *res, hx_buf *out)
{
    const cJSON *emails = jarr(o->slots, "emails"), *e;
    int dur = N(o, "dur");
    if (!strcmp(jstr(o->task, "kind"), "schedule_fix")) {
        cJSON *a = put_n(put(put_n(obj(), "duration_minutes", dur), "range", S(o, "when")), "count", 3),
              *wrong = cJSON_Duplicate(emails, 1);
        cJSON_ReplaceItemInArray(wrong, N(o, "bad_i"), cJSON_CreateString(S(o, "bad")));
        cJSON_AddItemToObject(a, "attendees", wrong);
        if (slip(o, res, out, "calendar.find_slots", a)) return;
    }
    int step = o->step - o->shift;
    if (step == 0) {
        const char *who = S(o, "who");
        cJSON_ArrayForEach(e, emails) /* named by first name: the memory must show it; by
                                         a nickname (a persona): the user's habit does */
            if (!strstr(who, e->valuestring) && !in_system_text(o, e->valuestring) &&
                !*S(o, "nickname"))
                return fail(o, "an attendee's address is neither in the request nor recalled", out);
        cJSON *a = put_n(put(put_n(obj(), "duration_minutes", dur), "range", S(o, "when")), "count", 3);
        cJSON_AddItemToObject(a, "attendees", cJSON_Duplicate(emails, 1));
        return call(o, out, "calendar.find_slots", a);
    }
    if (address_refused(o, res, "booked nothing", out)) return;
    if (*tool_error(res) && step == 1) return fail(o, tool_error(res), out);
    if (step == 1) {
        const cJSON *s = cJSON_GetArrayItem(jarr(res, "slots"), 0);
        if (!s)
            return (void)hx_buf_printf(out, "There is no free %d-minute slot %s, so I booked nothing.",
                                       dur, S(o, "when"));
        cJSON *a = put(put(obj(), "title", S(o, "topic")), "start", jstr(s, "start"));
        put_n(a, "duration_minutes", dur);
        cJSON_AddItemToObject(a, "attendees", cJSON_Duplicate(emails, 1));
        if (*S(o, "location")) put(a, "location", S(o, "location")); /* a persona's room */
        return call(o, out, "calendar.create_event", a);
    }
    /* never "Booked" after a failed create_event */
    const char *err = tool_error(res);
    if (!strncmp(err, "refused", 7))
        return (void)hx_buf_printf(out, "I did not book \"%s\": you declined, so nothing was added "
                                        "and no invitation was sent.", S(o, "topic"));
    if (*err) return (void)hx_buf_printf(out, "I could not book \"%s\": %s", S(o, "topic"), err);
    const cJSON *c = jarr(res, "created");
    char d[16], t[8];
    int i = 0, n = cJSON_GetArraySize(emails);
    iso_date(jstr(c, "start"), d, sizeof d);
    iso_time(jstr(c, "start"), t, sizeof t);
    hx_buf_printf(out, "Booked \"%s\" on %s at %s with ", S(o, "topic"), d, t);
    cJSON_ArrayForEach(e, emails)
    {
        sep(out, i++, n);
        hx_buf_puts(out, e->valuestring);
    }
    hx_buf_puts(out, "; the invitation is queued.");
}

void hx_dg_body_fact(const char *text, char *b, size_t n)
{
    const char *p = strstr(text, "\n\n");
    p = p ? p + 2 : text;
    while (*p == '\n' || *p == '\r') p++;
    snprintf(b, n, "%.*s", (int)strcspn(p, "\r\n"), p);
}

static void t_mail_read(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "mail.search", search_args(o));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    if (o->step == 1) {
        const cJSON *m = cJSON_GetArrayItem(jarr(res, "messages"), 0);
        if (!m) return (void)hx_buf_printf(out, "I found no mail from %s about %s.", S(o, "who"), S(o, "topic"));
        return call(o, out, "mail.read", put(obj(), "id", jstr(m, "id")));
    }
    char name[64], fact[256];
    from_name(jstr(res, "from"), name, sizeof name);
    hx_dg_body_fact(jstr(res, "text"), fact, sizeof fact);
    hx_buf_printf(out, "%s wrote: %s", name, fact);
}

static void t_file_read(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "files.search", put(obj(), "content", S(o, "topic")));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    if (o->step == 1) {
        const cJSON *f = cJSON_GetArrayItem(jarr(res, "files"), 0);
        if (!f) return (void)hx_buf_printf(out, "I found no file about %s.", S(o, "topic"));
        return call(o, out, "files.read", put(obj(), "path", hx_dg_rel_path(jstr(f, "path"))));
    }
    char fact[256];
    hx_dg_body_fact(jstr(res, "text"), fact, sizeof fact);
    hx_buf_printf(out, "%s says: %s", hx_dg_rel_path(jstr(res, "path")), fact);
}

/* The listed event titled as the request says, not cancelled. */
static const cJSON *find_titled(const oracle *o, const cJSON *res)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, jarr(res, "events"))
        if (!strcasecmp(jstr(e, "title"), S(o, "title")) && strcmp(jstr(e, "status"), "cancelled"))
            return e;
    return NULL;
}

static void t_cancel(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *title = S(o, "title");
    if (o->step == 0)
        return call(o, out, "calendar.list_events", put(put(obj(), "range", S(o, "when")), "query", title));
    const char *err = tool_error(res);
    if (o->step == 1) {
        if (*err) return fail(o, err, out);
        const cJSON *e = find_titled(o, res);
        if (!e) return (void)hx_buf_printf(out, "I found no \"%s\" %s.", title, S(o, "when"));
        cJSON *a = put(obj(), "uid", jstr(e, "uid"));
        if (cJSON_IsTrue(cJSON_GetObjectItem(e, "recurring"))) put(a, "occurrence", jstr(e, "start"));
        return call(o, out, "calendar.cancel_event", a);
    }
    if (*err && *S(o, "organizer"))
        return (void)hx_buf_printf(out, "I can't cancel \"%s\": it is organized by %s.", title, S(o, "organizer"));
    if (*err) return fail(o, err, out);
    hx_buf_printf(out, "Cancelled \"%s\" %s.", title, S(o, "when"));
}

static void t_move(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *title = S(o, "title");
    if (o->step == 0)
        return call(o, out, "calendar.list_events", put(put(obj(), "range", S(o, "when")), "query", title));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    if (o->step == 1) {
        const cJSON *e = find_titled(o, res);
        if (!e) return (void)hx_buf_printf(out, "I found no \"%s\" %s.", title, S(o, "when"));
        return call(o, out, "calendar.update_event", put(put(obj(), "uid", jstr(e, "uid")), "start", S(o, "at")));
    }
    const cJSON *u = jarr(res, "updated");
    char d[16], t[8];
    iso_date(jstr(u, "start"), d, sizeof d);
    iso_time(jstr(u, "start"), t, sizeof t);
    hx_buf_printf(out, "Moved \"%s\" to %s at %s.", title, d, t);
}

static int says(const char *req, const char *w) { return strcasestr(req, w) != NULL; }

static void t_chat(oracle *o, const cJSON *res, hx_buf *out)
{
    (void)res;
    const char *req = jstr(o->task, "request");
    if (says(req, "thank")) hx_buf_puts(out, "You're welcome!");
    else if (says(req, "who are you") || says(req, "what can you do"))
        hx_buf_puts(out, "I'm Hearth, your assistant on this device: I can use your calendar, "
                         "mail, files and memory.");
    else hx_buf_printf(out, "Hello %s! How can I help?", o->w->user.first);
}

static void t_no_tool(oracle *o, const cJSON *res, hx_buf *out)
{
    (void)o, (void)res;
    hx_buf_puts(out, "I can't do that: I can only use your calendar, mail, files and memory.");
}

static void t_now(oracle *o, const cJSON *res, hx_buf *out)
{
    (void)res;
    const char *req = jstr(o->task, "request");
    char d[16], t[8];
    iso_date(o->w->now_iso, d, sizeof d);
    iso_time(o->w->now_iso, t, sizeof t);
    if (says(req, "zone")) hx_buf_printf(out, "Your time zone is %s.", o->w->tz);
    else if (says(req, "time")) hx_buf_printf(out, "It is %s.", t);
    else hx_buf_printf(out, "Today is %s.", d);
}

static void t_reply(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "mail.search", search_args(o));
    const char *e = tool_error(res);
    if (o->step == 1) {
        if (*e) return fail(o, e, out);
        const cJSON *m = cJSON_GetArrayItem(jarr(res, "messages"), 0);
        if (!m) return (void)hx_buf_printf(out, "I found no mail from %s about %s.", S(o, "who"), S(o, "topic"));
        return call(o, out, "mail.reply", put(put(obj(), "id", jstr(m, "id")), "body", S(o, "msg")));
    }
    if (!strncmp(e, "refused", 7))
        return (void)hx_buf_puts(out, "I did not send the reply: a mail is in this conversation, "
                                      "so sending needs your confirmation.");
    if (*e) return fail(o, e, out);
    hx_buf_puts(out, "Your reply is queued in the outbox.");
}

static void t_file_missing(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *wrong = S(o, "wrong");
    if (o->step == 0) return call(o, out, "files.read", put(obj(), "path", wrong));
    if (o->step == 1) {
        if (!*tool_error(res)) return fail(o, "the missing file exists", out);
        char pat[64];
        snprintf(pat, sizeof pat, "%s.*", S(o, "stem"));
        return call(o, out, "files.search", put(obj(), "name", pat));
    }
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    if (o->step == 2) {
        const cJSON *f = cJSON_GetArrayItem(jarr(res, "files"), 0);
        if (!f) return (void)hx_buf_printf(out, "There is no file %s.", wrong);
        return call(o, out, "files.read", put(obj(), "path", hx_dg_rel_path(jstr(f, "path"))));
    }
    char fact[256];
    hx_dg_body_fact(jstr(res, "text"), fact, sizeof fact);
    hx_buf_printf(out, "%s does not exist, but %s says: %s", wrong, hx_dg_rel_path(jstr(res, "path")), fact);
}

static void t_bad_when(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "calendar.list_events", put(obj(), "range", S(o, "when")));
    if (!*tool_error(res)) return fail(o, "the time phrase was understood", out);
    hx_buf_printf(out, "I can't read \"%s\" as a time; please give a day or a date.", S(o, "when"));
}

static void t_remember(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0)
        return call(o, out, "memory.remember", put(put(obj(), "kind", S(o, "kind")), "text", S(o, "fact")));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    hx_buf_printf(out, "Noted: %s.", S(o, "fact"));
}

static void t_recall(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step == 0) return call(o, out, "memory.search", put(obj(), "query", S(o, "x")));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    const cJSON *ms = jarr(res, "memories"), *m;
    int n = cJSON_GetArraySize(ms) > 3 ? 3 : cJSON_GetArraySize(ms), i = 0;
    if (!n) return (void)hx_buf_printf(out, "I don't remember anything about %s.", S(o, "x"));
    hx_buf_puts(out, "You told me: ");
    cJSON_ArrayForEach(m, ms)
    {
        if (i >= n) break;
        if (i++) hx_buf_puts(out, "; ");
        hx_buf_puts(out, jstr(m, "text"));
    }
    hx_buf_puts(out, ".");
}

/* Memory-in-the-prompt lessons are rejected where recall did not bring
 * their memory into the prompt. */
static int memory_recalled(oracle *o, hx_buf *out)
{
    if (in_system_text(o, S(o, "memory"))) return 1;
    fail(o, "the related memory was not recalled", out);
    return 0;
}

/* A fact stored while a related memory is recalled: memory.remember. */
static void t_remember_related(oracle *o, const cJSON *res, hx_buf *out)
{
    if (o->step > 0 || memory_recalled(o, out)) t_remember(o, res, out);
}

/* A question a recalled memory answers: no call, the memory quoted. */
static void t_recall_known(oracle *o, const cJSON *res, hx_buf *out)
{
    (void)res;
    if (memory_recalled(o, out)) hx_buf_printf(out, "You told me: %s.", S(o, "memory"));
}

static int round_id(int id)
{
    static const int ok[] = {1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (ok[i] == id) return 1;
    return 0;
}

static void t_forget(oracle *o, const cJSON *res, hx_buf *out)
{
    const char *fact = S(o, "fact");
    if (o->step == 0) return call(o, out, "memory.search", put(obj(), "query", fact));
    if (*tool_error(res)) return fail(o, tool_error(res), out);
    if (o->step == 1) {
        const cJSON *m;
        cJSON_ArrayForEach(m, jarr(res, "memories"))
        {
            if (strcmp(jstr(m, "text"), fact)) continue;
            int id = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(m, "id"));
            if (!round_id(id)) return fail(o, "the memory id is not one the compact grammar writes", out);
            return call(o, out, "memory.forget", put_n(obj(), "id", id));
        }
        return (void)hx_buf_puts(out, "I don't remember that.");
    }
    hx_buf_printf(out, "Forgotten: %s.", fact);
}

typedef void (*turn_fn)(oracle *o, const cJSON *res, hx_buf *out);
static const struct {
    const char *kind;
    turn_fn fn;
} turns[] = {
    {"list_events", t_list},     {"event_when", t_event_when},  {"find_slots", t_slots},
    {"remind", t_create},        {"all_day", t_create},         {"create_said", t_create},
    {"block_span", t_create},         {"remember_dated", t_remember},
    {"free_busy", t_free_busy},
    {"create_event", t_create},  {"mail_search", t_mail_search}, {"unread_mail", t_unread},   {"mail_from", t_mail_from},
    {"file_search", t_file_search}, {"file_figure", t_file_figure}, {"files_list", t_files_list}, {"send_mail", t_send},
    {"schedule", t_schedule},    {"mail_read", t_mail_read},     {"file_read", t_file_read},
    {"cancel_event", t_cancel},  {"move_event", t_move},         {"chat", t_chat},
    {"no_tool", t_no_tool},   {"cannot", t_no_tool},      {"now", t_now},                 {"declined_send", t_send},   {"send_named", t_send},
    {"declined_create", t_create}, {"taint_reply", t_reply},     {"policy_deny", t_send},
    {"file_missing", t_file_missing}, {"not_organizer", t_cancel}, {"bad_when", t_bad_when},
    {"remember", t_remember},    {"recall", t_recall},           {"forget", t_forget},
    {"remember_related", t_remember_related}, {"recall_known", t_recall_known},
    {"persona_meeting", t_schedule}, {"schedule_named", t_schedule},
    {"schedule_fix", t_schedule}, {"send_fix", t_send},  {"bad_address", t_schedule},
    {"bad_send_address", t_send}, {"declined_schedule", t_schedule},
};

/* ---- the source ---- */
static int o_begin(void *ctx, const char *prompt, int choice, int *n_prompt, hx_err *err)
{
    oracle *o = ctx;
    (void)choice;
    if (o->n_prompts == o->cap_prompts) {
        int cap = o->cap_prompts * 2 + 4;
        char **p = hx_realloc(o->prompts, (size_t)cap * sizeof *p);
        if (!p) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        o->prompts = p;
        o->cap_prompts = cap;
    }
    o->prompts[o->n_prompts++] = hx_strdup(prompt);
    *n_prompt = (int)(strlen(prompt) / 4);
    const cJSON *msgs = hx_planner_messages(*o->pl);
    const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    cJSON *res = NULL;
    if (!strcmp(jstr(last, "role"), "tool")) res = cJSON_Parse(jstr(last, "content"));
    const char *kind = jstr(o->task, "kind");
    hx_buf out;
    hx_buf_init(&out);
    turn_fn fn = NULL;
    for (size_t i = 0; i < sizeof turns / sizeof *turns; i++)
        if (!strcmp(turns[i].kind, kind)) fn = turns[i].fn;
    if (!fn) fail(o, "unknown kind", &out);
    else if (o->step > 0 && !res) fail(o, "no tool result to go on", &out);
    else fn(o, res ? res : cJSON_GetArrayItem(msgs, 0), &out);
    cJSON_Delete(res);
    free(o->turn);
    o->turn = hx_buf_steal(&out, NULL);
    o->sent = 0;
    o->step++;
    return o->turn ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
}

static int o_next(void *ctx, hx_buf *piece, int *end, hx_err *err)
{
    oracle *o = ctx;
    (void)err;
    *end = o->sent;
    if (!o->sent) hx_buf_puts(piece, o->turn);
    o->sent = 1;
    return HX_OK;
}

static void o_free(void *ctx)
{
    oracle *o = ctx;
    if (!o) return;
    for (int i = 0; i < o->n_prompts; i++) free(o->prompts[i]);
    free(o->prompts);
    free(o->turn);
    free(o);
}

int hx_dg_oracle_new(const cJSON *task, const hx_world *w, const hx_tools *reg, hx_planner **pl,
                     hx_source *out)
{
    oracle *o = hx_calloc(1, sizeof *o);
    if (!o) return HX_ERR_NOMEM;
    o->task = task;
    o->slots = cJSON_GetObjectItemCaseSensitive(task, "slots");
    o->w = w;
    o->reg = reg;
    o->pl = pl;
    *out = (hx_source){.api_version = HX_SOURCE_API, .name = "oracle", .ctx = o,
                       .begin = o_begin, .next = o_next, .free = o_free};
    return HX_OK;
}

const char *hx_dg_oracle_failed(const hx_source *s)
{
    const oracle *o = s->ctx;
    return o->failed[0] ? o->failed : NULL;
}

unsigned hx_dg_oracle_mistakes(const hx_source *s)
{
    const oracle *o = s->ctx;
    return o->mistakes;
}

int hx_dg_oracle_prompts(const hx_source *s, const char ***prompts)
{
    const oracle *o = s->ctx;
    *prompts = (const char **)o->prompts;
    return o->n_prompts;
}
