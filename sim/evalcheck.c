/* evalcheck.c: the agent evaluation's checker: did a run of a generated task
 * reach the expected final state (event at a free time with the right
 * attendees, invitation queued, right mail or file read, memory stored)? */
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim/sim.h"

typedef struct check {
    const cJSON *task, *slots, *expect, *before, *trace;
    hx_dg_world *dw;
    char *why;
    size_t n;
} check;

static const char *js(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

/* Records why the check failed; returns 0. */
__attribute__((format(printf, 2, 3))) static int no(check *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->n, fmt, ap);
    va_end(ap);
    return 0;
}

/* Appends a flaw to the list in acc ("; " between flaws). */
__attribute__((format(printf, 3, 4))) static void flaw(char *acc, size_t n, const char *fmt, ...)
{
    size_t l = strlen(acc);
    va_list ap;
    if (l + 3 >= n) return;
    if (l) acc[l++] = ';', acc[l++] = ' ';
    va_start(ap, fmt);
    vsnprintf(acc + l, n - l, fmt, ap);
    va_end(ap);
}

/* Runs a tool on the world (the checker's own look, not part of the run). */
static cJSON *look(check *c, const char *name, cJSON *args)
{
    cJSON *res = NULL;
    hx_err err = {0};
    if (hx_tools_call(c->dw->reg, name, args, &res, &err)) res = NULL;
    cJSON_Delete(args);
    return res;
}

static cJSON *args2(const char *k1, const char *v1, const char *k2, const char *v2)
{
    cJSON *a = cJSON_CreateObject();
    if (k1) cJSON_AddStringToObject(a, k1, v1);
    if (k2) cJSON_AddStringToObject(a, k2, v2);
    return a;
}

/* The i-th expected call of the oracle's run (NULL if fewer). */
static const cJSON *expected(const check *c, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(c->expect, "calls"), i);
}

static cJSON *expected_result(const check *c, int i)
{
    return cJSON_Parse(js(expected(c, i), "result"));
}

/* The first call of the oracle's run that succeeded: a recovery kind's
 * run starts with a refused one. */
static const cJSON *first_ok(const cJSON *expect)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(expect, "calls")) if (!strcmp(js(k, "status"), "ok")) return k;
    return NULL;
}

/* The run's calls of a tool with a status ("ok", NULL: any), in order. */
static const cJSON *run_call(const check *c, const char *name, const char *status, int nth)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(c->trace, "calls"))
        if (!strcmp(js(k, "name"), name) && (!status || !strcmp(js(k, "status"), status)) && !nth--)
            return k;
    return NULL;
}

static int n_writes_ok(const check *c)
{
    int n = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(c->trace, "calls"))
    {
        const hx_tool_def *d = hx_tools_find(c->dw->reg, js(k, "name"));
        n += d && d->effect != HX_EFFECT_READ && !strcmp(js(k, "status"), "ok");
    }
    return n;
}

static int64_t iso_t(const char *iso)
{
    hx_when_range r;
    return hx_when_parse(iso, 0, "UTC", &r, NULL) ? -1 : r.start;
}

/* ---- the outbox ---- */
static cJSON *outbox_names(const hx_dg_world *dw)
{
    cJSON *a = cJSON_CreateArray();
    const char *sub[] = {"new", "cur"};
    for (int i = 0; i < 2; i++) {
        char d[700];
        snprintf(d, sizeof d, "%s/config/outbox/%s", dw->home, sub[i]);
        DIR *dir = opendir(d);
        for (struct dirent *e; dir && (e = readdir(dir));) {
            if (e->d_name[0] == '.') continue;
            char p[1000];
            snprintf(p, sizeof p, "%s/%s", d, e->d_name);
            cJSON_AddItemToArray(a, cJSON_CreateString(p));
        }
        if (dir) closedir(dir);
    }
    return a;
}

static int in_list(const cJSON *a, const char *s)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, a) if (!strcmp(x->valuestring, s)) return 1;
    return 0;
}

/* A message queued during the run that contains all of the needles. */
static int queued_with(const check *c, const char *const *needles, int n)
{
    cJSON *now = outbox_names(c->dw), *x;
    int found = 0;
    cJSON_ArrayForEach(x, now)
    {
        char *text = NULL;
        size_t len;
        if (in_list(cJSON_GetObjectItem(c->before, "outbox"), x->valuestring)) continue;
        if (hx_read_file(x->valuestring, 1 << 22, &text, &len, NULL)) continue;
        int all = 1;
        for (int i = 0; i < n; i++) all &= strcasestr(text, needles[i]) != NULL;
        found |= all;
        free(text);
    }
    cJSON_Delete(now);
    return found;
}

static int outbox_grew(const check *c)
{
    cJSON *now = outbox_names(c->dw);
    int grew = cJSON_GetArraySize(now) > cJSON_GetArraySize(cJSON_GetObjectItem(c->before, "outbox"));
    cJSON_Delete(now);
    return grew;
}

/* ---- per kind ---- */

/* Paths inside the world from "/config/" on: the task was made in
 * another folder than the one it runs in. */
static const char *in_world(const char *p)
{
    const char *c = strstr(p, "/config/");
    return c ? c : p;
}

static void normalize_paths(cJSON *j)
{
    if (cJSON_IsString(j) && strstr(j->valuestring, "/config/")) {
        char *v = hx_strdup(in_world(j->valuestring));
        if (v) cJSON_SetValuestring(j, v);
        free(v);
    }
    for (cJSON *c = j ? j->child : NULL; c; c = c->next) normalize_paths(c);
}

/* Read-only requests: the expected tool ran and said the same as the
 * oracle's call (the same range, messages, files, memories). */
static int same_answer_data(check *c, const char *tool, const char *key)
{
    const cJSON *k = run_call(c, tool, "ok", 0);
    if (!k) return no(c, "no successful %s call", tool);
    cJSON *got = cJSON_Parse(js(k, "result")), *want = expected_result(c, 0);
    normalize_paths(got);
    normalize_paths(want);
    char *g = cJSON_PrintUnformatted(cJSON_GetObjectItem(got, key));
    char *w = cJSON_PrintUnformatted(cJSON_GetObjectItem(want, key));
    int ok = g && w && !strcmp(g, w);
    if (!ok) no(c, "%s gave a different %s than expected", tool, key);
    cJSON_free(g);
    cJSON_free(w);
    cJSON_Delete(got);
    cJSON_Delete(want);
    if (ok && n_writes_ok(c)) return no(c, "a read-only request changed the user's data");
    return ok;
}

/* ---- the answer: does it state what the read found? ---- */

/* Whether text says "<n> <noun>" with no digit before n ("15 events" is
 * not 5). */
static int says_count(const char *text, int n, const char *noun)
{
    char want[40];
    snprintf(want, sizeof want, "%d %s", n, noun);
    for (const char *p = text; (p = strstr(p, want)); p++)
        if (p == text || !isdigit((unsigned char)p[-1])) return 1;
    return 0;
}

/* Whether text holds the time (HH:MM) of the ISO date-time iso. */
static int says_time(const char *text, const char *iso)
{
    const char *t = strchr(iso, 'T');
    char hm[8];
    snprintf(hm, sizeof hm, "%.5s", t ? t + 1 : "");
    return t && strstr(text, hm) != NULL;
}

/* Whether text holds item's string under key (case aside); with files,
 * the path from the file root on, as the answers give it. */
static int says_str(const char *text, const cJSON *item, const char *key)
{
    const char *v = js(item, key);
    return *v && strcasestr(text, hx_dg_rel_path(v)) != NULL;
}

/* The sayers below tell whether answer ans states what result res holds
 * (arr, key and max where they need them): 1, 0, or -1 when res holds
 * nothing to state. */

/* An event list: the count without cancelled events and, for the first
 * four, each title and start time (or "all day"). */
static int says_events(const char *ans, const cJSON *res, const char *arr, const char *key, int max)
{
    (void)arr, (void)key, (void)max;
    const cJSON *e;
    int n = 0, ok = 1;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(res, "events"))
    {
        if (!strcmp(js(e, "status"), "cancelled") || n++ >= 4) continue;
        ok &= says_str(ans, e, "title") && (cJSON_IsTrue(cJSON_GetObjectItem(e, "all_day"))
                                                ? strstr(ans, "all day") != NULL
                                                : says_time(ans, js(e, "start")));
    }
    return n ? ok && says_count(ans, n, "event") : -1;
}

/* Busy times: each period's start and end, or with more than five their
 * count. */
static int says_busy(const char *ans, const cJSON *res, const char *arr, const char *key, int max)
{
    (void)arr, (void)key, (void)max;
    const cJSON *busy = cJSON_GetObjectItem(res, "busy"), *b;
    const int n = cJSON_GetArraySize(busy);
    if (n > 5) return says_count(ans, n, "times");
    int ok = n > 0;
    cJSON_ArrayForEach(b, busy) ok &= says_time(ans, js(b, "start")) && says_time(ans, js(b, "end"));
    return n ? ok : -1;
}

/* The first max items of res[arr]: each one's key (a time under
 * "start"); -1 with none. */
static int says_items(const char *ans, const cJSON *res, const char *arr, const char *key, int max)
{
    const cJSON *x;
    int n = 0, ok = 1;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(res, arr))
    {
        if (n++ >= max) break;
        ok &= strcmp(key, "start") ? says_str(ans, x, key) : says_time(ans, js(x, "start"));
    }
    return n ? ok : -1;
}

/* A search the run followed with a read (mail.read call rd): the answer
 * states what the read found, the body's first paragraph; -1 without
 * one. */
static int says_body(const char *ans, const cJSON *rd)
{
    cJSON *res = cJSON_Parse(js(rd, "result"));
    char fact[256];
    hx_dg_body_fact(js(res, "text"), fact, sizeof fact);
    cJSON_Delete(res);
    return *fact ? strstr(ans, fact) != NULL : -1;
}

int hx_dg_answer_faithful(const cJSON *task, const cJSON *trace)
{
    static const struct {
        const char *kind, *tool;
        int (*says)(const char *, const cJSON *, const char *, const char *, int);
        const char *arr, *key;
        int max;
    } reads[] = {
        {"list_events", "calendar.list_events", says_events, NULL, NULL, 0},
        {"free_busy", "calendar.free_busy", says_busy, NULL, NULL, 0},
        {"find_slots", "calendar.find_slots", says_items, "slots", "start", 3},
        {"mail_search", "mail.search", says_items, "messages", "subject", 1},
        {"unread_mail", "mail.search", says_items, "messages", "subject", 3},
        {"file_search", "files.search", says_items, "files", "path", 3},
        {"files_list", "files.list", says_items, "entries", "name", 5},
    };
    const check c = {.trace = trace};
    const cJSON *rd = strcmp(js(task, "kind"), "mail_search") ? NULL : run_call(&c, "mail.read", "ok", 0);
    if (rd) return says_body(js(trace, "answer"), rd);
    for (size_t i = 0; i < sizeof reads / sizeof *reads; i++) {
        if (strcmp(js(task, "kind"), reads[i].kind)) continue;
        const cJSON *k = run_call(&c, reads[i].tool, "ok", 0);
        cJSON *res = k ? cJSON_Parse(js(k, "result")) : NULL;
        const int r = res ? reads[i].says(js(trace, "answer"), res, reads[i].arr, reads[i].key,
                                          reads[i].max)
                          : -1;
        cJSON_Delete(res);
        return r;
    }
    return -1;
}

static int k_list(check *c)
{
    return same_answer_data(c, "calendar.list_events", "range") &&
           same_answer_data(c, "calendar.list_events", "count");
}
static int k_free_busy(check *c)
{
    return same_answer_data(c, "calendar.free_busy", "range") &&
           same_answer_data(c, "calendar.free_busy", "busy");
}
static int k_slots(check *c)
{
    return same_answer_data(c, "calendar.find_slots", "range") &&
           same_answer_data(c, "calendar.find_slots", "duration_minutes");
}
static int k_mail_search(check *c) { return same_answer_data(c, "mail.search", "messages"); }
static int k_file_search(check *c) { return same_answer_data(c, "files.search", "files"); }
static int k_files_list(check *c) { return same_answer_data(c, "files.list", "entries"); }
static int k_recall(check *c) { return same_answer_data(c, "memory.search", "memories"); }

/* The events created during the run in [from, to). */
static cJSON *new_events(check *c, const char *from, const char *to)
{
    cJSON *res = look(c, "calendar.list_events", args2("start", from, "end", to)), *out = cJSON_CreateArray(), *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(res, "events"))
    {
        const char *uid = js(e, "uid");
        size_t l = strlen(uid);
        if (l > 7 && !strcmp(uid + l - 7, "@hearth") && strcmp(js(e, "status"), "cancelled"))
            cJSON_AddItemToArray(out, cJSON_Duplicate(e, 1));
    }
    cJSON_Delete(res);
    return out;
}

static int k_create(check *c)
{
    cJSON *want = expected_result(c, 0);
    const cJSON *w = cJSON_GetObjectItem(want, "created");
    cJSON *evs = new_events(c, js(w, "start"), js(w, "end")), *e;
    int ok = 0;
    cJSON_ArrayForEach(e, evs) ok |= !strcasecmp(js(e, "title"), js(w, "title")) &&
                                     !strcmp(js(e, "start"), js(w, "start")) &&
                                     !strcmp(js(e, "end"), js(w, "end"));
    if (!ok) no(c, cJSON_GetArraySize(evs) ? "the new event is not \"%s\" from %s" : "no event \"%s\" at %s",
                js(w, "title"), js(w, "start"));
    cJSON_Delete(evs);
    cJSON_Delete(want);
    return ok;
}

/* Whether an event has an attendee with address email. */
static int has_attendee(const cJSON *ev, const char *email)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(ev, "attendees")) if (!strcasecmp(js(a, "email"), email)) return 1;
    return 0;
}

/* Attendee addresses of an event equal the expected ones: as many, and
 * each expected one among them (so an attendee written twice in place of
 * another does not count as the other). */
static int same_attendees(const cJSON *ev, const cJSON *emails)
{
    const cJSON *e;
    if (cJSON_GetArraySize(cJSON_GetObjectItem(ev, "attendees")) != cJSON_GetArraySize(emails)) return 0;
    cJSON_ArrayForEach(e, emails) if (!cJSON_IsString(e) || !has_attendee(ev, e->valuestring)) return 0;
    return 1;
}

static int overlaps(const cJSON *busy, int64_t s, int64_t e)
{
    const cJSON *b;
    cJSON_ArrayForEach(b, busy)
        if (iso_t(js(b, "start")) < e && s < iso_t(js(b, "end"))) return 1;
    return 0;
}

static int minutes_of(const char *iso) { return atoi(iso + 11) * 60 + atoi(iso + 14); }

/* At a free time: inside the asked period and working hours, clear of
 * the user's and the attendees' busy times before the run. */
static int free_time(check *c, const cJSON *ev, int dur)
{
    const cJSON *fb = cJSON_GetObjectItem(c->before, "free_busy"), *a;
    const cJSON *range = cJSON_GetObjectItem(fb, "range");
    int64_t s = iso_t(js(ev, "start")), e = iso_t(js(ev, "end"));
    if (e - s != (int64_t)dur * 60) return no(c, "the event does not last the asked minutes");
    if (minutes_of(js(ev, "start")) < c->dw->w.work_start || minutes_of(js(ev, "end")) > c->dw->w.work_end ||
        minutes_of(js(ev, "end")) < minutes_of(js(ev, "start")))
        return no(c, "the event at %s is outside working hours", js(ev, "start"));
    if (s < iso_t(js(range, "start")) || e > iso_t(js(range, "end")))
        return no(c, "the event at %s is outside the asked period (%s)", js(ev, "start"), js(range, "start"));
    if (overlaps(cJSON_GetObjectItem(fb, "busy"), s, e))
        return no(c, "the event at %s is not at a free time: the user is busy", js(ev, "start"));
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(fb, "attendees"))
        if (overlaps(cJSON_GetObjectItem(a, "busy"), s, e))
            return no(c, "the event is not at a free time: %s is busy", js(a, "email"));
    return 1;
}

static int k_schedule(check *c)
{
    const cJSON *fb = cJSON_GetObjectItem(c->before, "free_busy");
    const cJSON *range = cJSON_GetObjectItem(fb, "range"), *emails = cJSON_GetObjectItem(c->slots, "emails"), *e;
    char d0[16], d1[16]; /* whole days around the period: an event just outside it counts */
    snprintf(d0, sizeof d0, "%.10s", js(range, "start"));
    snprintf(d1, sizeof d1, "%.10s", js(range, "end"));
    cJSON *evs = new_events(c, d0, d1);
    int ok = 0, n = cJSON_GetArraySize(evs);
    if (!n) {
        cJSON *want = cJSON_Parse(js(first_ok(c->expect), "result"));
        int none_free = !cJSON_GetArraySize(cJSON_GetObjectItem(want, "slots"));
        cJSON_Delete(want);
        cJSON_Delete(evs);
        if (none_free && !n_writes_ok(c)) return 1; /* nothing to book: booking nothing is right */
        return no(c, "no new event on the asked days");
    }
    if (n > 1) {
        cJSON_Delete(evs);
        return no(c, "more than one event was created");
    }
    /* every flaw of the one event is named, not only the first */
    char flaws[600] = "";
    const cJSON *ev = evs->child;
    int attendees_ok = same_attendees(ev, emails);
    if (strcasecmp(js(ev, "title"), js(c->slots, "topic")))
        flaw(flaws, sizeof flaws, "the event's title is \"%s\", not \"%s\"", js(ev, "title"), js(c->slots, "topic"));
    if (!attendees_ok) flaw(flaws, sizeof flaws, "the event's attendees are not the asked people");
    if (!free_time(c, ev, (int)cJSON_GetNumberValue(cJSON_GetObjectItem(c->slots, "dur"))))
        flaw(flaws, sizeof flaws, "%s", c->why);
    cJSON_ArrayForEach(e, emails)
    {
        const char *needles[] = {"method=REQUEST", e->valuestring};
        if (attendees_ok && !queued_with(c, needles, 2)) flaw(flaws, sizeof flaws, "no invitation to %s is queued", e->valuestring);
    }
    cJSON_Delete(evs);
    ok = !flaws[0];
    return ok ? 1 : no(c, "%s", flaws);
}

static int k_send(check *c)
{
    const char *needles[] = {js(c->slots, "email"), js(c->slots, "topic"), js(c->slots, "msg")};
    if (!queued_with(c, needles, 3))
        return no(c, "no message to %s about \"%s\" with the asked text is queued", needles[0], needles[1]);
    return 1;
}

/* The message the oracle read (the newest match when several match). */
static int k_mail_read(check *c)
{
    const char *id = js(c->slots, "mail_id");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(c->expect, "calls"))
        if (!strcmp(js(e, "name"), "mail.read")) id = js(cJSON_GetObjectItem(e, "arguments"), "id");
    for (int i = 0;; i++) {
        const cJSON *k = run_call(c, "mail.read", "ok", i);
        if (!k) return no(c, "message %s was not read", id);
        if (!strcmp(js(cJSON_GetObjectItem(k, "arguments"), "id"), id)) return 1;
    }
}

/* The file the oracle read last was read (compared by the real path the
 * tool reports). */
static int k_file_read(check *c)
{
    const cJSON *calls = cJSON_GetObjectItem(c->expect, "calls");
    cJSON *want = cJSON_Parse(js(cJSON_GetArrayItem(calls, cJSON_GetArraySize(calls) - 1), "result"));
    const char *path = js(want, "path");
    int ok = 0;
    for (int i = 0; !ok; i++) {
        const cJSON *k = run_call(c, "files.read", "ok", i);
        if (!k) break;
        cJSON *got = cJSON_Parse(js(k, "result"));
        ok = *path && !strcmp(in_world(js(got, "path")), in_world(path));
        cJSON_Delete(got);
    }
    if (!ok) no(c, "%s was not read", in_world(path));
    cJSON_Delete(want);
    return ok;
}

/* The uid the oracle's call of tool acted on (else the task's). */
static const char *expected_uid(const check *c, const char *tool)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(c->expect, "calls"))
        if (!strcmp(js(e, "name"), tool)) return js(cJSON_GetObjectItem(e, "arguments"), "uid");
    return js(c->slots, "uid");
}

/* The event with uid on the task's date, as the calendar lists it now. */
static cJSON *event_on(check *c, const char *uid, const char *date)
{
    cJSON *res = look(c, "calendar.list_events", args2("range", date, NULL, NULL)), *e, *found = NULL;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(res, "events"))
        if (!strcmp(js(e, "uid"), uid) && !found) found = cJSON_Duplicate(e, 1);
    cJSON_Delete(res);
    return found;
}

static int k_cancel(check *c)
{
    cJSON *ev = event_on(c, expected_uid(c, "calendar.cancel_event"), js(c->slots, "date"));
    int ok = !ev || !strcmp(js(ev, "status"), "cancelled");
    cJSON_Delete(ev);
    if (!ok) return no(c, "\"%s\" on %s is not cancelled", js(c->slots, "title"), js(c->slots, "date"));
    return 1;
}

static int k_move(check *c)
{
    cJSON *want = expected_result(c, 1);
    const cJSON *u = cJSON_GetObjectItem(want, "updated");
    char date[16];
    snprintf(date, sizeof date, "%.10s", js(u, "start"));
    cJSON *ev = event_on(c, expected_uid(c, "calendar.update_event"), date);
    int ok = ev && !strcmp(js(ev, "start"), js(u, "start"));
    if (!ok) no(c, "\"%s\" does not start at %s", js(c->slots, "title"), js(u, "start"));
    cJSON_Delete(ev);
    cJSON_Delete(want);
    return ok;
}

static int k_no_call(check *c)
{
    if (cJSON_GetArraySize(cJSON_GetObjectItem(c->trace, "calls")))
        return no(c, "a tool was called for a request that needs none");
    return 1;
}

/* "now": the answer states the date, time or zone of the system text. */
static int k_now(check *c)
{
    if (!k_no_call(c)) return 0;
    const char *req = js(c->task, "request"), *ans = js(c->trace, "answer"), *now = js(c->task, "now");
    char want[48];
    if (strcasestr(req, "zone")) snprintf(want, sizeof want, "%s", c->dw->w.tz);
    else if (strcasestr(req, "time")) snprintf(want, sizeof want, "%.5s", now + 11);
    else snprintf(want, sizeof want, "%.10s", now);
    return strstr(ans, want) ? 1 : no(c, "the answer does not say %s", want);
}

/* Refusals: the expected call was tried and refused; nothing changed. */
static int k_refused(check *c)
{
    const char *tool = js(expected(c, cJSON_GetArraySize(cJSON_GetObjectItem(c->expect, "calls")) - 1), "name");
    if (!run_call(c, tool, "refused", 0)) return no(c, "no %s call was tried and refused", tool);
    if (n_writes_ok(c) || outbox_grew(c)) return no(c, "something was written or sent anyway");
    return 1;
}

/* The attempt fails: the tool refuses a meeting someone else organised,
 * or, since listing that meeting put its organizer's words into the
 * conversation, the taint rule refuses the cancellation first. */
static int k_not_organizer(check *c)
{
    const char *uid = expected_uid(c, "calendar.cancel_event");
    const cJSON *k = run_call(c, "calendar.cancel_event", "error", 0);
    if (!k) k = run_call(c, "calendar.cancel_event", "refused", 0);
    if (!k || strcmp(js(cJSON_GetObjectItem(k, "arguments"), "uid"), uid))
        return no(c, "no attempt to cancel %s", uid);
    cJSON *ev = event_on(c, uid, js(c->slots, "date"));
    int ok = ev && strcmp(js(ev, "status"), "cancelled");
    cJSON_Delete(ev);
    return ok ? 1 : no(c, "the event changed");
}

static int k_bad_when(check *c)
{
    if (!run_call(c, "calendar.list_events", "error", 0) && cJSON_GetArraySize(cJSON_GetObjectItem(c->trace, "calls")))
        return no(c, "the unreadable time was not reported");
    return n_writes_ok(c) ? no(c, "something was written") : 1;
}

/* The user's own address was unusable: it was tried and refused, and
 * nothing was booked or sent. */
static int k_bad_address(check *c)
{
    if (!cJSON_GetArraySize(cJSON_GetObjectItem(c->trace, "calls")))
        return no(c, "the address was never tried");
    if (n_writes_ok(c) || outbox_grew(c)) return no(c, "something was written or sent anyway");
    return 1;
}

static int remembered(check *c, const char *fact)
{
    hx_mem_list *l = NULL;
    int found = 0;
    if (hx_memory_search(c->dw->mem, fact, 20, &l, NULL)) return 0;
    for (int i = 0; i < l->n; i++) found |= !strcasecmp(l->items[i].text, fact);
    hx_mem_list_free(l);
    return found;
}

static int k_remember(check *c)
{
    return remembered(c, js(c->slots, "fact")) ? 1 : no(c, "\"%s\" is not remembered", js(c->slots, "fact"));
}

static int k_forget(check *c)
{
    return remembered(c, js(c->slots, "fact")) ? no(c, "\"%s\" is still remembered", js(c->slots, "fact")) : 1;
}

typedef int (*kind_check)(check *c);
static const struct {
    const char *kind;
    kind_check fn;
} checks[] = {
    {"list_events", k_list},       {"find_slots", k_slots},         {"free_busy", k_free_busy},
    {"create_event", k_create},    {"mail_search", k_mail_search},  {"unread_mail", k_mail_search},
    {"file_search", k_file_search}, {"files_list", k_files_list},   {"send_mail", k_send},
    {"schedule", k_schedule},      {"mail_read", k_mail_read},      {"file_read", k_file_read},
    {"cancel_event", k_cancel},    {"move_event", k_move},          {"chat", k_no_call},
    {"no_tool", k_no_call},        {"now", k_now},                  {"declined_send", k_refused},
    {"declined_create", k_refused}, {"taint_reply", k_refused},     {"policy_deny", k_refused},
    {"file_missing", k_file_read}, {"not_organizer", k_not_organizer}, {"bad_when", k_bad_when},
    {"remember", k_remember},      {"recall", k_recall},            {"forget", k_forget},
    {"schedule_fix", k_schedule},  {"send_fix", k_send},            {"bad_address", k_bad_address},
    {"bad_send_address", k_bad_address}, {"declined_schedule", k_refused},
};

cJSON *hx_dg_check_before(const cJSON *task, hx_dg_world *dw)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddItemToObject(b, "outbox", outbox_names(dw));
    if (strcmp(js(task, "kind"), "schedule") && strcmp(js(task, "kind"), "schedule_fix")) return b;
    const cJSON *first = first_ok(cJSON_GetObjectItem(task, "expect"));
    cJSON *res = cJSON_Parse(js(first, "result")), *a = cJSON_CreateObject(), *fb = NULL;
    const cJSON *range = cJSON_GetObjectItem(res, "range");
    hx_err err = {0};
    cJSON_AddStringToObject(a, "start", js(range, "start"));
    cJSON_AddStringToObject(a, "end", js(range, "end"));
    cJSON_AddItemToObject(a, "attendees",
                          cJSON_Duplicate(cJSON_GetObjectItem(cJSON_GetObjectItem(task, "slots"), "emails"), 1));
    if (hx_tools_call(dw->reg, "calendar.free_busy", a, &fb, &err)) fb = NULL;
    if (fb) cJSON_AddItemToObject(b, "free_busy", fb);
    cJSON_Delete(a);
    cJSON_Delete(res);
    return b;
}

int hx_dg_check(const cJSON *task, const cJSON *before, const cJSON *trace, hx_dg_world *dw,
                hx_dg_validator *v, int *n_valid, int *n_calls, char *why, size_t n)
{
    check c = {task, cJSON_GetObjectItem(task, "slots"), cJSON_GetObjectItem(task, "expect"), before,
               trace, dw, why, n};
    const cJSON *k;
    char w2[256];
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(trace, "calls"))
    {
        int valid = strcmp(js(k, "status"), "malformed") &&
                    hx_dg_call_valid(v, js(k, "name"), cJSON_GetObjectItem(k, "arguments"), w2, sizeof w2);
        if (n_valid) *n_valid += valid;
        if (n_calls) (*n_calls)++;
    }
    snprintf(why, n, "ok");
    kind_check fn = NULL;
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++)
        if (!strcmp(checks[i].kind, js(task, "kind"))) fn = checks[i].fn;
    if (!fn) return no(&c, "unknown kind %s", js(task, "kind"));
    const char *st = js(trace, "status");
    if (!strcmp(st, "answered")) return fn(&c);
    /* a run without an answer fails; the reason also says whether the
     * state was right (a runaway last turn) or what else went wrong */
    char state[256];
    int right = fn(&c);
    snprintf(state, sizeof state, "%s", why);
    return right ? no(&c, "no answer (%s), though the final state is right", st)
                 : no(&c, "no answer (%s); %s", st, state);
}
