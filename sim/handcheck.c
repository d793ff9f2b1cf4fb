/* handcheck.c: the hand-written evaluation's checks of a run's calls and of
 * the world it left: events created, mail queued, memories stored, and
 * nothing written anywhere else. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "sim/handeval.h"

static const char *js(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

__attribute__((format(printf, 3, 4))) static int no(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return 0;
}

/* Whether folded hay holds folded needle (both folded here). */
static int holds(const char *hay, const char *needle)
{
    hx_buf a, b;
    hx_buf_init(&a), hx_buf_init(&b);
    hx_he_fold(hay, &a), hx_he_fold(needle, &b);
    hx_buf_putc(&a, 0), hx_buf_putc(&b, 0);
    int ok = a.data && b.data && strstr(a.data, b.data) != NULL;
    hx_buf_free(&a), hx_buf_free(&b);
    return ok;
}

/* ---- the snapshot ---- */

/* Every regular file under dir (rel its path from the tree's top) into
 * files as rel: "size mtime". Links are not followed. */
static void walk(const char *dir, const char *rel, cJSON *files, int depth)
{
    DIR *d = depth < 16 ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[4096], r[4096], v[64];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) walk(path, r, files, depth + 1);
        if (!S_ISREG(st.st_mode)) continue;
        snprintf(v, sizeof v, "%lld %lld.%09ld", (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec);
        cJSON_AddStringToObject(files, r, v);
    }
    if (d) closedir(d);
}

static cJSON *memories(hx_memory *mem)
{
    cJSON *o = cJSON_CreateObject();
    hx_mem_list *l = NULL;
    if (mem && !hx_memory_list(mem, NULL, 0, 1, &l, NULL))
        for (int i = 0; i < l->n; i++) {
            char id[24];
            snprintf(id, sizeof id, "%lld", (long long)l->items[i].id);
            cJSON_AddStringToObject(o, id, l->items[i].text);
        }
    hx_mem_list_free(l);
    return o;
}

cJSON *hx_he_snapshot(hx_dg_world *dw)
{
    char top[600];
    cJSON *s = cJSON_CreateObject(), *files = cJSON_AddObjectToObject(s, "files");
    snprintf(top, sizeof top, "%s/config", dw->home);
    walk(top, "", files, 0);
    cJSON_AddItemToObject(s, "memories", memories(dw->mem));
    return s;
}

/* ---- what changed ---- */

typedef struct diff {
    cJSON *added, *gone, *changed; /* paths from the tree's top */
} diff;

static void diff_free(diff *d)
{
    cJSON_Delete(d->added), cJSON_Delete(d->gone), cJSON_Delete(d->changed);
}

/* A Maildir message's identity: its folder and its name before the
 * flags ("mail/.Sent" + "1804.M5P.host"); "" for other files. */
static void message_key(const char *rel, char *key, size_t n)
{
    const char *slash = strrchr(rel, '/'), *colon;
    key[0] = 0;
    if (!slash || slash - rel < 4) return;
    int sub = !strncmp(slash - 4, "/new", 4) || !strncmp(slash - 4, "/cur", 4);
    if (!sub) return;
    colon = strchr(slash + 1, ':');
    snprintf(key, n, "%.*s|%.*s", (int)(slash - 4 - rel), rel,
             (int)(colon ? colon - slash - 1 : (long)strlen(slash + 1)), slash + 1);
}

/* Drops the pairs of a message gone from one place and added at another
 * of its folder (read: new to cur; answered: a flag added). */
static void drop_moves(diff *d)
{
    cJSON *g = d->gone->child;
    while (g) {
        cJSON *next = g->next, *a;
        char kg[600], ka[600];
        message_key(g->valuestring, kg, sizeof kg);
        const cJSON *added = *kg ? d->added : NULL;
        cJSON_ArrayForEach(a, added)
        {
            message_key(a->valuestring, ka, sizeof ka);
            if (strcmp(kg, ka)) continue;
            cJSON_Delete(cJSON_DetachItemViaPointer(d->added, a));
            cJSON_Delete(cJSON_DetachItemViaPointer(d->gone, g));
            break;
        }
        g = next;
    }
}

static void diff_make(const cJSON *before, const cJSON *after, diff *d)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(before, "files");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(after, "files"), *e;
    d->added = cJSON_CreateArray(), d->gone = cJSON_CreateArray(), d->changed = cJSON_CreateArray();
    cJSON_ArrayForEach(e, a)
    {
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(b, e->string);
        if (!old) cJSON_AddItemToArray(d->added, cJSON_CreateString(e->string));
        else if (strcmp(old->valuestring, e->valuestring))
            cJSON_AddItemToArray(d->changed, cJSON_CreateString(e->string));
    }
    cJSON_ArrayForEach(e, b) if (!cJSON_GetObjectItemCaseSensitive(a, e->string))
        cJSON_AddItemToArray(d->gone, cJSON_CreateString(e->string));
    drop_moves(d);
}

/* A configured folder (absolute, from the config) as a path from the
 * tree's top with a '/' after it, into rel; "" if it is elsewhere. */
static void rel_dir(const hx_dg_world *dw, const char *abs, char *rel, size_t n)
{
    char top[600];
    int l = snprintf(top, sizeof top, "%s/config/", dw->home);
    rel[0] = 0;
    if (abs && !strncmp(abs, top, (size_t)l)) snprintf(rel, n, "%s/", abs + l);
}

static int under(const char *path, const char *dir) { return *dir && !strncmp(path, dir, strlen(dir)); }

/* ---- the checks of the state ---- */

typedef struct state {
    const cJSON *task, *want;
    hx_dg_world *dw;
    char outbox[600], calendar[600];
    cJSON *events;   /* the new events as the calendar lists them */
    cJSON *queued;   /* the new outbox messages: {to, text, invite, in_reply_to} */
    cJSON *stored;   /* new or changed memories' texts */
    char *why;
    size_t n;
} state;

/* The uid and start date of a new event file (read as text: the lines
 * Hearth writes). */
static int ics_uid_date(const char *path, char *uid, size_t n, char *date, size_t dn)
{
    char *text = NULL;
    size_t len;
    if (hx_read_file(path, 1 << 20, &text, &len, NULL)) return 0;
    const char *ev = strstr(text, "BEGIN:VEVENT"); /* after the time zones' DTSTARTs */
    const char *u = ev ? strstr(ev, "\nUID:") : NULL, *d = ev ? strstr(ev, "\nDTSTART") : NULL;
    const char *dv = d ? strchr(d + 1, ':') : NULL;
    if (u) snprintf(uid, n, "%.*s", (int)strcspn(u + 5, "\r\n"), u + 5);
    if (dv) snprintf(date, dn, "%.4s-%.2s-%.2s", dv + 1, dv + 5, dv + 7);
    free(text);
    return u && dv;
}

/* The event uid as the calendar lists it on the days around date. */
static cJSON *listed(state *s, const char *uid, const char *date)
{
    hx_when_range r;
    char from[40], to[40];
    cJSON *args = cJSON_CreateObject(), *res = NULL, *e, *found = NULL;
    const char *tz = s->dw->cfg ? s->dw->cfg->timezone : NULL;
    if (!hx_when_parse(date, 0, tz, &r, NULL)) {
        hx_when_format(r.start - 86400, tz, 1, from, sizeof from);
        hx_when_format(r.start + 2 * 86400, tz, 1, to, sizeof to);
        cJSON_AddStringToObject(args, "start", from);
        cJSON_AddStringToObject(args, "end", to);
        if (hx_tools_call(s->dw->reg, "calendar.list_events", args, &res, NULL)) res = NULL;
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, "events"))
        if (!found && !strcmp(js(e, "uid"), uid)) found = cJSON_Duplicate(e, 1);
    cJSON_Delete(res);
    cJSON_Delete(args);
    return found;
}

static void add_event(state *s, const char *rel)
{
    char path[1200], uid[300] = "", date[16] = "";
    snprintf(path, sizeof path, "%s/config/%s", s->dw->home, rel);
    cJSON *ev = ics_uid_date(path, uid, sizeof uid, date, sizeof date) ? listed(s, uid, date) : NULL;
    if (!ev) ev = cJSON_CreateObject(), cJSON_AddStringToObject(ev, "file", rel);
    cJSON_AddItemToArray(s->events, ev);
}

/* The addresses of a header value, lower case, into arr. */
static void addresses(const char *v, cJSON *arr)
{
    hx_he_text t;
    if (hx_he_scan(v ? v : "", 0, &t)) return;
    for (int i = 0; i < t.n; i++)
        if (t.m[i].kind == HX_HE_ADDR) cJSON_AddItemToArray(arr, cJSON_CreateString(t.m[i].s));
    hx_he_text_free(&t);
}

static void add_queued(state *s, const char *rel)
{
    char path[1200];
    char *raw = NULL;
    size_t len;
    hx_message *m = NULL;
    snprintf(path, sizeof path, "%s/config/%s", s->dw->home, rel);
    cJSON *q = cJSON_CreateObject(), *to = cJSON_AddArrayToObject(q, "to");
    if (!hx_read_file(path, 1 << 22, &raw, &len, NULL) && !hx_message_parse(raw, len, &m, NULL)) {
        addresses(m->to, to), addresses(m->cc, to);
        hx_buf b;
        hx_buf_init(&b);
        hx_buf_printf(&b, "%s\n%s", m->subject ? m->subject : "", m->text ? m->text : "");
        cJSON_AddStringToObject(q, "text", b.data ? b.data : "");
        hx_buf_free(&b);
        cJSON_AddBoolToObject(q, "invite", strcasestr(raw, "method=REQUEST") != NULL);
        cJSON_AddStringToObject(q, "in_reply_to", m->in_reply_to ? m->in_reply_to : "");
    }
    hx_message_free(m);
    free(raw);
    cJSON_AddStringToObject(q, "file", rel);
    cJSON_AddItemToArray(s->queued, q);
}

static void add_stored(state *s, const cJSON *before, const cJSON *after)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(after, "memories"))
    {
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(before, "memories"), m->string);
        if (!old || strcmp(old->valuestring, m->valuestring))
            cJSON_AddItemToArray(s->stored, cJSON_CreateString(m->valuestring));
    }
}

/* Sorts the changes into events, queued mail and stray writes (named in
 * stray, which gets the first). */
static void classify(state *s, const diff *d, char *stray, size_t n)
{
    const cJSON *p;
    stray[0] = 0;
    cJSON_ArrayForEach(p, d->added)
    {
        const char *r = p->valuestring, *base = strrchr(r, '/') ? strrchr(r, '/') + 1 : r;
        int msg = under(r, s->outbox) && (!strncmp(r + strlen(s->outbox), "new/", 4) ||
                                          !strncmp(r + strlen(s->outbox), "cur/", 4));
        int ev = under(r, s->calendar) && !strchr(r + strlen(s->calendar), '/') &&
                 strlen(base) > 4 && !strcmp(base + strlen(base) - 4, ".ics");
        if (msg) add_queued(s, r);
        else if (ev) add_event(s, r);
        else if (!stray[0]) snprintf(stray, n, "added %s", r);
    }
    if (!stray[0] && cJSON_GetArraySize(d->changed)) snprintf(stray, n, "changed %s", d->changed->child->valuestring);
    if (!stray[0] && cJSON_GetArraySize(d->gone)) snprintf(stray, n, "removed %s", d->gone->child->valuestring);
}

/* ---- matching what was expected ---- */

static int any_holds(const char *hay, const cJSON *alts)
{
    const cJSON *a;
    if (cJSON_IsString(alts)) return holds(hay, alts->valuestring);
    cJSON_ArrayForEach(a, alts) if (cJSON_IsString(a) && holds(hay, a->valuestring)) return 1;
    return !cJSON_GetArraySize(alts);
}

/* Whether hay holds each of words: a string, or a list of which one will
 * do (["3 pm", "15:00"]). */
static int all_hold(const char *hay, const cJSON *words)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, words)
    {
        if (cJSON_IsArray(w) ? !cJSON_GetArraySize(w) || !any_holds(hay, w) : !cJSON_IsString(w) || !holds(hay, w->valuestring))
            return 0;
    }
    return 1;
}

/* Whether the addresses in got (array of strings) are exactly want's. */
static int same_set(const cJSON *got, const cJSON *want)
{
    const cJSON *w, *g;
    if (cJSON_GetArraySize(got) != cJSON_GetArraySize(want)) return 0;
    cJSON_ArrayForEach(w, want)
    {
        int found = 0;
        cJSON_ArrayForEach(g, got) found |= cJSON_IsString(w) && !strcasecmp(g->valuestring, w->valuestring);
        if (!found) return 0;
    }
    return 1;
}

static int64_t iso_time(const char *iso)
{
    hx_when_range r;
    return hx_when_parse(iso, 0, "UTC", &r, NULL) ? -1 : r.start;
}

/* Whether an event's start (ISO in the user's zone) is one of starts:
 * "2027-03-11T14:00" (a prefix of it), or ["2027-03-11T09:00",
 * "2027-03-11T11:30"] (a window of local times, both ends included). */
static int start_in(const char *start, const cJSON *starts)
{
    const cJSON *st;
    char local[17];
    snprintf(local, sizeof local, "%.16s", start);
    cJSON_ArrayForEach(st, starts)
    {
        const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(st, 0)), *b = cJSON_GetStringValue(cJSON_GetArrayItem(st, 1));
        if (cJSON_IsString(st) && !strncmp(start, st->valuestring, strlen(st->valuestring))) return 1;
        if (a && b && strlen(local) == 16 && strcmp(local, a) >= 0 && strcmp(local, b) <= 0) return 1;
    }
    return 0;
}

/* Why event ev is not the expected one w ("" when it is). */
static void event_flaw(const cJSON *ev, const cJSON *w, char *flaw, size_t n)
{
    const cJSON *a, *mins = cJSON_GetObjectItemCaseSensitive(w, "minutes");
    int start_ok = start_in(js(ev, "start"), cJSON_GetObjectItemCaseSensitive(w, "start"));
    cJSON *emails = cJSON_CreateArray();
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(ev, "attendees")) cJSON_AddItemToArray(emails, cJSON_CreateString(js(a, "email")));
    const cJSON *want_att = cJSON_GetObjectItemCaseSensitive(w, "attendees");
    cJSON *none = cJSON_CreateArray();
    flaw[0] = 0;
    if (!any_holds(js(ev, "title"), cJSON_GetObjectItemCaseSensitive(w, "title")))
        snprintf(flaw, n, "its title \"%s\" is not the asked one", js(ev, "title"));
    else if (!start_ok) snprintf(flaw, n, "it starts at %s, not at an asked time", js(ev, "start"));
    else if (cJSON_IsNumber(mins) && iso_time(js(ev, "end")) - iso_time(js(ev, "start")) != (int64_t)mins->valuedouble * 60)
        snprintf(flaw, n, "it does not last %d minutes", (int)mins->valuedouble);
    else if (!same_set(emails, want_att ? want_att : none))
        snprintf(flaw, n, "its attendees are not the asked people");
    cJSON_Delete(emails);
    cJSON_Delete(none);
}

static void queued_flaw(const cJSON *q, const cJSON *w, char *flaw, size_t n)
{
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(w, "invite");
    const char *irt = js(w, "in_reply_to");
    flaw[0] = 0;
    if (!same_set(cJSON_GetObjectItemCaseSensitive(q, "to"), cJSON_GetObjectItemCaseSensitive(w, "to")))
        snprintf(flaw, n, "a message went to other recipients");
    else if (!all_hold(js(q, "text"), cJSON_GetObjectItemCaseSensitive(w, "has")))
        snprintf(flaw, n, "the message lacks the asked words");
    else if (cJSON_IsBool(inv) && cJSON_IsTrue(inv) != cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "invite")))
        snprintf(flaw, n, cJSON_IsTrue(inv) ? "the message is no invitation" : "the message is an invitation");
    else if (*irt && !strstr(js(q, "in_reply_to"), irt))
        snprintf(flaw, n, "the message is not a reply to %s", irt);
}

static void memory_flaw(const cJSON *m, const cJSON *w, char *flaw, size_t n)
{
    flaw[0] = 0;
    if (!all_hold(m->valuestring, cJSON_GetObjectItemCaseSensitive(w, "has")))
        snprintf(flaw, n, "\"%.80s\" is not the asked fact", m->valuestring);
}

typedef void (*flaw_fn)(const cJSON *got, const cJSON *want, char *flaw, size_t n);

/* Each expected item matched by its own item of got, and nothing more:
 * 1, or 0 with why (what of got came closest). */
static int match_all(state *s, const char *what, const cJSON *got, const cJSON *want, flaw_fn fn)
{
    int ng = cJSON_GetArraySize(got), nw = cJSON_GetArraySize(want);
    char *used = hx_calloc((size_t)ng + 1, 1), flaw[300] = "";
    const cJSON *w, *g;
    int ok = used != NULL;
    const cJSON *wanted = ok ? want : NULL;
    cJSON_ArrayForEach(w, wanted)
    {
        int i = 0, hit = 0;
        flaw[0] = 0;
        for (g = got->child; g && !hit; g = g->next, i++) {
            char f[300];
            if (used[i]) continue;
            fn(g, w, f, sizeof f);
            if (!f[0]) used[i] = 1, hit = 1;
            else if (!flaw[0]) snprintf(flaw, sizeof flaw, "%s", f);
        }
        if (!hit) {
            ok = no(s->why, s->n, "%s: %s", what, flaw[0] ? flaw : "none was made");
            break;
        }
    }
    free(used);
    if (ok && ng > nw) ok = no(s->why, s->n, "%s: %d made where %d %s asked", what, ng, nw, nw == 1 ? "was" : "were");
    return ok;
}

int hx_he_check_state(const cJSON *task, const cJSON *before, hx_dg_world *dw, char *why, size_t n)
{
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(task, "state");
    state s = {task, want, dw, "", "", cJSON_CreateArray(), cJSON_CreateArray(), cJSON_CreateArray(), why, n};
    cJSON *after = hx_he_snapshot(dw);
    diff d;
    char stray[700];
    rel_dir(dw, dw->cfg ? dw->cfg->outbox : NULL, s.outbox, sizeof s.outbox);
    rel_dir(dw, dw->cfg ? dw->cfg->calendar_default : NULL, s.calendar, sizeof s.calendar);
    diff_make(before, after, &d);
    classify(&s, &d, stray, sizeof stray);
    add_stored(&s, before, after);
    int ok = stray[0] ? no(why, n, "wrote where nothing should be written: %s", stray) : 1;
    ok = ok && match_all(&s, "events", s.events, cJSON_GetObjectItemCaseSensitive(want, "events"), event_flaw);
    ok = ok && match_all(&s, "mail queued", s.queued, cJSON_GetObjectItemCaseSensitive(want, "outbox"), queued_flaw);
    ok = ok && match_all(&s, "memories", s.stored, cJSON_GetObjectItemCaseSensitive(want, "memories"), memory_flaw);
    if (ok) snprintf(why, n, "ok");
    diff_free(&d);
    cJSON_Delete(after);
    cJSON_Delete(s.events), cJSON_Delete(s.queued), cJSON_Delete(s.stored);
    return ok;
}

/* ---- the calls ---- */

/* Whether argument value got gives what want (a string: held in it, or in
 * one of its items; else equal). */
static int arg_gives(const cJSON *got, const cJSON *want)
{
    const cJSON *g;
    if (!got) return 0;
    if (!cJSON_IsString(want)) return cJSON_Compare(got, want, 1);
    if (cJSON_IsString(got)) return holds(got->valuestring, want->valuestring);
    const cJSON *items = cJSON_IsArray(got) ? got : NULL;
    cJSON_ArrayForEach(g, items) if (cJSON_IsString(g) && holds(g->valuestring, want->valuestring)) return 1;
    return 0;
}

static int named(const cJSON *names, const char *name)
{
    const cJSON *x;
    if (cJSON_IsString(names)) return !strcmp(names->valuestring, name);
    cJSON_ArrayForEach(x, names) if (cJSON_IsString(x) && !strcmp(x->valuestring, name)) return 1;
    return 0;
}

/* Whether run call k is the expected call e. */
static int call_is(const cJSON *k, const cJSON *e)
{
    const char *status = *js(e, "status") ? js(e, "status") : "ok";
    const cJSON *a;
    if (!named(cJSON_GetObjectItemCaseSensitive(e, "name"), js(k, "name")) || strcmp(js(k, "status"), status))
        return 0;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(e, "args"))
        if (!arg_gives(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(k, "arguments"), a->string), a))
            return 0;
    const char *res = *js(k, "result_whole") ? js(k, "result_whole") : js(k, "result");
    return all_hold(res, cJSON_GetObjectItemCaseSensitive(e, "found")); /* all it returned */
}

int hx_he_check_calls(const cJSON *task, const cJSON *calls, char *why, size_t n)
{
    const cJSON *e, *k;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(task, "calls"))
    {
        int hit = 0;
        cJSON_ArrayForEach(k, calls) hit |= call_is(k, e);
        if (hit) continue;
        char *want = cJSON_PrintUnformatted(e);
        no(why, n, "no call like %.240s", want ? want : "?");
        cJSON_free(want);
        return 0;
    }
    snprintf(why, n, "ok");
    return 1;
}
