/* evidence.c: what a request read and what it did, from the planner's
 * trace and not from the model's words: the events, messages, file lines
 * and memories the tools returned (marking those the answer names), the
 * events added, mail queued and memories stored, and the writes and sends
 * that did not happen; and the claim words ("added", "sent") the calls
 * license an answer to use. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/agent.h"

#define MAX_ITEMS 20 /* read items kept per call */

static const char *str(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* ---- claims ---- */
typedef struct verb {
    const char *tool, *done, *claims;
} verb;

/* What each built-in write or send did, and the words that say so. */
static const verb verbs[] = {
    {"calendar.create_event", "added", "added created booked scheduled blocked"},
    {"calendar.update_event", "changed", "moved rescheduled updated changed"},
    {"calendar.cancel_event", "cancelled", "cancelled canceled deleted removed"},
    {"mail.send", "queued", "sent queued emailed mailed"},
    {"mail.reply", "queued", "sent queued replied answered emailed"},
    {"mail.draft", "saved", "saved drafted"},
    {"memory.remember", "stored", "noted remembered saved stored added"},
    {"memory.forget", "forgot", "forgotten deleted removed"},
};

static const verb *verb_of(const char *tool)
{
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++)
        if (!strcmp(verbs[i].tool, tool)) return &verbs[i];
    return NULL;
}

int hx_agent_effect_of(const hx_tools *reg, const char *tool)
{
    const hx_tool_def *d = reg && tool ? hx_tools_find(reg, tool) : NULL;
    return d ? d->effect : HX_EFFECT_READ;
}

/* Whether a result (JSON text) reports an item cancelled ("status":
 * "cancelled"): that an event is cancelled is then a fact the answer may
 * state ("Cancelled." to "is the meeting still on?"), not an action the
 * turn claims. */
static int reports_cancelled(const char *res)
{
    hx_jstr s = {.t = res, .n = res ? strlen(res) : 0};
    while (res && hx_jstr_next(&s))
        if (s.is_value && hx_jstr_under(&s, "status") && s.end - s.start == 9 &&
            !memcmp(res + s.start, "cancelled", 9))
            return 1;
    return 0;
}

int hx_agent_claims(const cJSON *calls, const hx_tools *reg, hx_buf *out)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, calls)
    {
        const char *name = str(c, "name"), *st = str(c, "status"), *by = str(c, "by");
        if (st && !strcmp(st, "refused") && by && (!strcmp(by, "user") || !strcmp(by, "--no")))
            hx_buf_puts(out, "declined "); /* the user said no, not the policy or no terminal */
        if (!name || !st || strcmp(st, "ok")) continue;
        const verb *v = verb_of(name);
        const int effect = hx_agent_effect_of(reg, name);
        if (v) hx_buf_printf(out, "%s ", v->claims);
        else if (effect == HX_EFFECT_SEND) hx_buf_puts(out, "sent queued ");
        else if (effect == HX_EFFECT_WRITE) hx_buf_puts(out, "saved updated changed ");
        const char *res = str(c, "result");
        if (res && strstr(res, "\"invitation_queued\"")) hx_buf_puts(out, "invited sent queued ");
        if (reports_cancelled(res)) hx_buf_puts(out, "cancelled canceled ");
    }
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}

/* ---- what the answer names ---- */

/* Whether answer holds s (case aside) as whole words. */
static int names(const char *answer, const char *s)
{
    const size_t n = s ? strlen(s) : 0;
    if (n < 3) return 0;
    for (const char *p = answer; (p = strcasestr(p, s)); p++) {
        const int before = p == answer || !isalnum((unsigned char)p[-1]);
        const int after = !isalnum((unsigned char)p[n]);
        if (before && after) return 1;
    }
    return 0;
}

/* Whether answer names a fact of text: a word with a digit or '@' (two
 * bytes or more), or a capitalised word of four letters or more. */
static int cites(const char *answer, const char *text)
{
    static const char sep[] = " \t\r\n\"(),;!?[]{}*<>";
    for (const char *p = text; p && *p;) {
        p += strspn(p, sep);
        const size_t len = strcspn(p, sep);
        size_t n = len;
        while (n && strchr(".:-'", p[n - 1])) n--;
        char w[128];
        if (n >= 2 && n < sizeof w) {
            memcpy(w, p, n);
            w[n] = 0;
            const int fact = strpbrk(w, "0123456789@") != NULL ||
                             (n >= 4 && isupper((unsigned char)w[0]));
            if (fact && names(answer, w)) return 1;
        }
        p += len;
    }
    return 0;
}

/* "2027-03-10T15:00:00-05:00" as "2027-03-10 15:00", with its end
 * ("-15:30" on the same day); a date alone as itself. */
static void when_text(const char *start, const char *end, char *b, size_t n)
{
    const int time = start && strlen(start) >= 16 && start[10] == 'T';
    const int etime = end && strlen(end) >= 16 && end[10] == 'T';
    if (!time) snprintf(b, n, "%.10s", start ? start : "?");
    else if (!etime) snprintf(b, n, "%.10s %.5s", start, start + 11);
    else if (!strncmp(start, end, 10)) snprintf(b, n, "%.10s %.5s-%.5s", start, start + 11, end + 11);
    else snprintf(b, n, "%.10s %.5s to %.10s %.5s", start, start + 11, end, end + 11);
}

static cJSON *item(cJSON *arr, const char *kind, const char *tool)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", kind);
    cJSON_AddStringToObject(o, "tool", tool);
    return hx_json_add(arr, NULL, o) ? o : NULL;
}

static void copy_keys(cJSON *to, const cJSON *from, const char *const *keys)
{
    for (; *keys; keys++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, *keys);
        if (v && !cJSON_IsNull(v)) hx_json_add(to, *keys, cJSON_Duplicate(v, 1));
    }
}

static void add_event(cJSON *arr, const char *tool, const cJSON *e, const char *answer)
{
    static const char *const keys[] = {"title", "start", "end", "calendar", "location",
                                       "status", NULL};
    cJSON *o = item(arr, "event", tool);
    copy_keys(o, e, keys);
    char when[64];
    when_text(str(e, "start"), str(e, "end"), when, sizeof when);
    const char *t = str(e, "start");
    char hm[6] = "";
    if (t && strlen(t) >= 16) snprintf(hm, sizeof hm, "%.5s", t + 11);
    cJSON_AddBoolToObject(o, "cited", names(answer, str(e, "title")) || names(answer, hm));
}

static void add_slot(cJSON *arr, const char *tool, const char *kind, const cJSON *e,
                     const char *answer)
{
    static const char *const keys[] = {"start", "end", "title", NULL}; /* a busy event's title */
    cJSON *o = item(arr, kind, tool);
    copy_keys(o, e, keys);
    const char *t = str(e, "start");
    char hm[6] = "";
    if (t && strlen(t) >= 16) snprintf(hm, sizeof hm, "%.5s", t + 11);
    cJSON_AddBoolToObject(o, "cited", names(answer, hm));
}

static void add_mail(cJSON *arr, const char *tool, const cJSON *m, const char *answer)
{
    static const char *const keys[] = {"id", "date", "from", "to", "subject", "snippet", NULL};
    cJSON *o = item(arr, "mail", tool);
    copy_keys(o, m, keys);
    int cited = names(answer, str(m, "subject")) || cites(answer, str(m, "snippet"));
    const char *text = str(m, "text");
    if (text) { /* a message read: the lines the answer names */
        cJSON *lines = cJSON_AddArrayToObject(o, "lines");
        for (const char *l = text; *l;) {
            const size_t n = strcspn(l, "\n");
            char *line = hx_strndup(l, n);
            if (line && n && cites(answer, line)) hx_json_add(lines, NULL, cJSON_CreateString(line));
            free(line);
            l += n + (l[n] == '\n');
        }
        cited |= cJSON_GetArraySize(lines) > 0;
    }
    cJSON_AddBoolToObject(o, "cited", cited);
}

/* A file: its matching lines (files.search), the lines of its text the
 * answer names (files.read), or the file alone (files.list). */
static void add_file(cJSON *arr, const char *tool, const cJSON *f, const char *answer)
{
    cJSON *o = item(arr, "file", tool);
    const char *path = str(f, "path");
    cJSON_AddStringToObject(o, "path", path ? path : "");
    int cited = names(answer, str(f, "name"));
    cJSON *lines = cJSON_AddArrayToObject(o, "lines");
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(f, "matches"))
    {
        cJSON *l = cJSON_CreateObject();
        copy_keys(l, m, (const char *const[]){"line", "text", NULL});
        hx_json_add(lines, NULL, l);
        cited |= cites(answer, str(m, "text"));
    }
    const char *text = str(f, "text");
    int no = 1;
    for (const char *p = text; p && *p; no++) {
        const size_t n = strcspn(p, "\n");
        char *line = hx_strndup(p, n);
        if (line && n && cites(answer, line)) {
            cJSON *l = cJSON_CreateObject();
            cJSON_AddNumberToObject(l, "line", no);
            cJSON_AddStringToObject(l, "text", line);
            hx_json_add(lines, NULL, l);
            cited = 1;
        }
        free(line);
        p += n + (p[n] == '\n');
    }
    cJSON_AddBoolToObject(o, "cited", cited);
}

static void add_memory(cJSON *arr, const char *tool, const cJSON *m, const char *answer)
{
    cJSON *o = item(arr, "memory", tool);
    copy_keys(o, m, (const char *const[]){"id", "kind", "text", NULL});
    cJSON_AddBoolToObject(o, "cited", cites(answer, str(m, "text")));
}

/* The items of one list of a result, at most MAX_ITEMS. */
static void add_list(cJSON *arr, const char *tool, const cJSON *res, const char *key,
                     const char *answer)
{
    const cJSON *e;
    int k = 0;
    const char *kind = key; /* a search's near results are of its own kind */
    if (!strcmp(key, "others")) kind = !strncmp(tool, "calendar.", 9) ? "events" : "messages";
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, key))
    {
        if (k++ == MAX_ITEMS) break;
        if (!strcmp(kind, "events")) add_event(arr, tool, e, answer);
        else if (!strcmp(kind, "slots")) add_slot(arr, tool, "free", e, answer);
        else if (!strcmp(kind, "busy")) add_slot(arr, tool, "busy", e, answer);
        else if (!strcmp(kind, "messages")) add_mail(arr, tool, e, answer);
        else if (!strcmp(kind, "memories")) add_memory(arr, tool, e, answer);
        else add_file(arr, tool, e, answer); /* "files", "entries" */
    }
}

static void read_result(cJSON *arr, const char *tool, const cJSON *res, const char *answer)
{
    static const char *const lists[] = {"events", "slots", "busy", "messages", "others",
                                        "memories", "files", "entries"};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        add_list(arr, tool, res, lists[i], answer);
    if (str(res, "subject") && str(res, "from")) add_mail(arr, tool, res, answer);
    else if (str(res, "path") && str(res, "text")) add_file(arr, tool, res, answer);
}

/* Whether two strings are there and the same. */
static int same_str(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* Whether items a and b are one thing read twice: a message searched then
 * read, a file found then read, an event two lists hold. */
static int same_item(const cJSON *a, const cJSON *b)
{
    const char *kind = str(a, "kind");
    if (!same_str(kind, str(b, "kind"))) return 0;
    if (!strcmp(kind, "mail") || !strcmp(kind, "memory")) return same_str(str(a, "id"), str(b, "id"));
    if (!strcmp(kind, "file")) return same_str(str(a, "path"), str(b, "path"));
    if (!same_str(str(a, "start"), str(b, "start"))) return 0;
    return !strcmp(kind, "event") ? same_str(str(a, "title"), str(b, "title"))
                                  : same_str(str(a, "end"), str(b, "end"));
}

/* Leaves each thing once, as it was read last (a message read has its
 * lines; its search hit has none), cited when either was. */
static void drop_repeats(cJSON *arr)
{
    cJSON *a = arr ? arr->child : NULL;
    while (a) {
        cJSON *next = a->next, *b = next;
        while (b && !same_item(a, b)) b = b->next;
        if (b) {
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "cited")))
                cJSON_ReplaceItemInObjectCaseSensitive(b, "cited", cJSON_CreateTrue());
            cJSON_Delete(cJSON_DetachItemViaPointer(arr, a));
        }
        a = next;
    }
}

cJSON *hx_agent_read(const cJSON *calls, const hx_tools *reg, const char *answer)
{
    cJSON *arr = cJSON_CreateArray();
    const cJSON *c;
    cJSON_ArrayForEach(c, calls)
    {
        const char *name = str(c, "name"), *st = str(c, "status");
        if (!arr || !name || !st || strcmp(st, "ok") || hx_agent_effect_of(reg, name) != HX_EFFECT_READ)
            continue;
        cJSON *res = cJSON_Parse(str(c, "result") ? str(c, "result") : "");
        if (cJSON_IsObject(res)) read_result(arr, name, res, answer ? answer : "");
        cJSON_Delete(res);
    }
    drop_repeats(arr);
    return arr;
}

/* ---- what was done ---- */

/* Whether a call of name from c on in a list of calls succeeded. */
static int done_from(const cJSON *c, const char *name)
{
    for (; c; c = c->next)
        if (!strcmp(str(c, "name") ? str(c, "name") : "", name) &&
            !strcmp(str(c, "status") ? str(c, "status") : "", "ok"))
            return 1;
    return 0;
}

/* Whether a call of name after c in calls succeeded (the model tried
 * again and got it done). */
static int done_later(const cJSON *c, const char *name) { return done_from(c->next, name); }

/* A write or send that a limit stopped before it ran (a not_run record)
 * and that no call of its tool got done: its tool, else NULL. */
static const char *stopped_write(const cJSON *n, const cJSON *calls, const hx_tools *reg)
{
    const char *name = str(n, "name");
    if (!name || hx_agent_effect_of(reg, name) == HX_EFFECT_READ) return NULL;
    return done_from(calls ? calls->child : NULL, name) ? NULL : name;
}

/* Why a not_run record's call never ran. */
static void stop_text(const cJSON *n, hx_buf *b)
{
    const char *why = str(n, "reason") ? str(n, "reason") : "";
    if (!strcmp(why, "repeated")) {
        hx_buf_puts(b, "not run: the call repeated itself and was stopped (repeat guard)");
        return;
    }
    hx_buf_printf(b, "not run: stopped by the %s %s", str(n, "limit") ? str(n, "limit") : "limits",
                  !strcmp(why, "cut") ? "while the call was written" : "before it started");
}

/* ", with a@x.org, b@y.org": an event's attendees by address. */
static void people_text(const cJSON *attendees, hx_buf *b)
{
    const cJSON *a;
    int k = 0;
    cJSON_ArrayForEach(a, attendees)
    {
        const char *addr = cJSON_IsString(a) ? a->valuestring : str(a, "email");
        if (addr) hx_buf_printf(b, "%s%s", k++ ? ", " : ", with ", addr);
    }
}

/* The one line saying what a successful write or send did. */
static void done_text(const char *name, const cJSON *args, const cJSON *res, hx_buf *b)
{
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(res, "created");
    if (!ev) ev = cJSON_GetObjectItemCaseSensitive(res, "updated");
    if (!ev) ev = cJSON_GetObjectItemCaseSensitive(res, "cancelled");
    if (!ev) ev = cJSON_GetObjectItemCaseSensitive(res, "cancelled_occurrence");
    char when[64];
    if (cJSON_IsObject(ev)) {
        when_text(str(ev, "start"), str(ev, "end"), when, sizeof when);
        hx_buf_printf(b, "%s, %s", str(ev, "title") ? str(ev, "title") : "(no title)", when);
        if (str(ev, "calendar")) hx_buf_printf(b, " (calendar %s)", str(ev, "calendar"));
        people_text(cJSON_GetObjectItemCaseSensitive(ev, "attendees"), b);
        if (str(res, "invitation_queued")) hx_buf_puts(b, "; invitation queued in the outbox");
    } else if (str(res, "to") || str(res, "subject")) {
        hx_buf_printf(b, "mail to %s, \"%s\" (%s)", str(res, "to") ? str(res, "to") : "?",
                      str(res, "subject") ? str(res, "subject") : "",
                      str(res, "status") ? str(res, "status") : "done");
    } else if (!strcmp(name, "memory.remember")) {
        hx_buf_printf(b, "memory #%.0f: %s", cJSON_GetNumberValue(cJSON_GetObjectItem(res, "id")),
                      str(args, "text") ? str(args, "text") : "");
    } else if (cJSON_IsNumber(cJSON_GetObjectItem(res, "forgotten"))) {
        hx_buf_printf(b, "memory #%.0f", cJSON_GetNumberValue(cJSON_GetObjectItem(res, "forgotten")));
    } else {
        char *a = cJSON_PrintUnformatted(args);
        hx_buf_printf(b, "%s %.200s", name, a ? a : "{}");
        cJSON_free(a);
    }
}

/* Why a write or send did not happen: the refusal's reason (from who
 * decided) or the tool's error. */
static void undone_text(const cJSON *c, hx_buf *b)
{
    const char *name = str(c, "name"), *st = str(c, "status");
    char *a = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "arguments"));
    hx_buf_printf(b, "%s %.200s: ", name, a ? a : "");
    cJSON_free(a);
    if (!strcmp(st, "refused")) {
        hx_buf_printf(b, "refused (%s)", str(c, "by") && *str(c, "by") ? str(c, "by") : "policy");
        return;
    }
    cJSON *res = cJSON_Parse(str(c, "result") ? str(c, "result") : "");
    const char *e = str(res, "error");
    hx_buf_printf(b, "failed: %.300s", e ? e : st);
    cJSON_Delete(res);
}

/* The "not done" entry of a write or send stopped before it ran. */
static cJSON *stopped_entry(const cJSON *n, const char *name, const hx_tools *reg)
{
    hx_buf e, b;
    hx_buf_init(&e);
    hx_buf_init(&b);
    stop_text(n, &e);
    char *a = cJSON_PrintUnformatted(cJSON_GetObjectItem(n, "arguments"));
    hx_buf_printf(&b, "%s%s%.200s: %s", name, a ? " " : "", a ? a : "", e.data ? e.data : "");
    cJSON_free(a);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "action", hx_agent_effect_of(reg, name) == HX_EFFECT_SEND ? "not sent"
                                                                                : "not done");
    cJSON_AddStringToObject(o, "tool", name);
    cJSON_AddStringToObject(o, "status", "not run");
    cJSON_AddStringToObject(o, "text", b.data ? b.data : "");
    hx_json_add(o, "arguments", cJSON_Duplicate(cJSON_GetObjectItem(n, "arguments"), 1));
    cJSON_AddStringToObject(o, "by", "");
    cJSON_AddStringToObject(o, "error", e.data ? e.data : "");
    hx_buf_free(&e);
    hx_buf_free(&b);
    return o;
}

cJSON *hx_agent_done(const cJSON *calls, const cJSON *not_run, const hx_tools *reg)
{
    cJSON *arr = cJSON_CreateArray();
    const cJSON *c;
    cJSON_ArrayForEach(c, calls)
    {
        const char *name = str(c, "name"), *st = str(c, "status");
        const int effect = hx_agent_effect_of(reg, name);
        if (!arr || !name || !st || effect == HX_EFFECT_READ) continue;
        const int ok = !strcmp(st, "ok");
        if (!ok && done_later(c, name)) continue;
        const verb *v = verb_of(name);
        hx_buf b;
        hx_buf_init(&b);
        cJSON *res = cJSON_Parse(str(c, "result") ? str(c, "result") : "");
        if (ok) done_text(name, cJSON_GetObjectItem(c, "arguments"), res, &b);
        else undone_text(c, &b);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "action", ok ? (v ? v->done : "done")
                                             : effect == HX_EFFECT_SEND ? "not sent" : "not done");
        cJSON_AddStringToObject(o, "tool", name);
        cJSON_AddStringToObject(o, "status", st);
        cJSON_AddStringToObject(o, "text", b.data ? b.data : "");
        hx_json_add(o, "arguments", cJSON_Duplicate(cJSON_GetObjectItem(c, "arguments"), 1));
        if (!ok) cJSON_AddStringToObject(o, "by", str(c, "by") ? str(c, "by") : "");
        if (!ok && str(res, "error")) cJSON_AddStringToObject(o, "error", str(res, "error"));
        if (ok && res) hx_json_add(o, "result", cJSON_Duplicate(res, 1));
        hx_json_add(arr, NULL, o);
        cJSON_Delete(res);
        hx_buf_free(&b);
    }
    cJSON_ArrayForEach(c, not_run)
    {
        const char *name = arr ? stopped_write(c, calls, reg) : NULL;
        if (name) hx_json_add(arr, NULL, stopped_entry(c, name, reg));
    }
    return arr;
}

/* ---- one line of what was read ---- */
#define PLACE_BYTES 120

/* ", at PLACE": an event's location on its line, the first line of it and
 * at most PLACE_BYTES (whole characters), control characters as spaces:
 * an invitation's text cannot start a line of its own. */
static void place_text(const char *loc, hx_buf *b)
{
    size_t n = loc ? strcspn(loc, "\r\n") : 0;
    while (n && (loc[n - 1] == ' ' || loc[n - 1] == '\t')) n--;
    if (!n) return;
    if (n > PLACE_BYTES) n = hx_utf8_cut(loc, PLACE_BYTES, 0);
    hx_buf_puts(b, ", at ");
    for (size_t i = 0; i < n; i++) hx_buf_putc(b, (unsigned char)loc[i] < 0x20 || loc[i] == 0x7f ? ' ' : loc[i]);
}

void hx_agent_read_line(const cJSON *it, hx_buf *b)
{
    const char *kind = str(it, "kind") ? str(it, "kind") : "";
    char when[64];
    if (!strcmp(kind, "event") || !strcmp(kind, "free") || !strcmp(kind, "busy")) {
        when_text(str(it, "start"), str(it, "end"), when, sizeof when);
        hx_buf_printf(b, "%s %s", kind, when);
        if (str(it, "title")) hx_buf_printf(b, " %s", str(it, "title"));
        if (str(it, "calendar")) hx_buf_printf(b, " (%s)", str(it, "calendar"));
        place_text(str(it, "location"), b);
        if (str(it, "status") && !strcmp(str(it, "status"), "cancelled")) hx_buf_puts(b, " [cancelled]");
    } else if (!strcmp(kind, "mail")) {
        hx_buf_printf(b, "mail %.10s %s: %s", str(it, "date") ? str(it, "date") : "?",
                      str(it, "from") ? str(it, "from") : "?",
                      str(it, "subject") ? str(it, "subject") : "");
        const cJSON *l, *lines = cJSON_GetObjectItem(it, "lines");
        cJSON_ArrayForEach(l, lines) hx_buf_printf(b, "\n     > %s", cJSON_GetStringValue(l));
        if (!lines && str(it, "snippet")) /* a search's hit: how it begins */
            hx_buf_printf(b, "\n     > %s", str(it, "snippet"));
    } else if (!strcmp(kind, "file")) {
        hx_buf_printf(b, "file %s", str(it, "path") ? str(it, "path") : "?");
        const cJSON *l;
        cJSON_ArrayForEach(l, cJSON_GetObjectItem(it, "lines"))
            hx_buf_printf(b, "\n     %.0f: %s", cJSON_GetNumberValue(cJSON_GetObjectItem(l, "line")),
                          str(l, "text") ? str(l, "text") : "");
    } else if (!strcmp(kind, "memory")) {
        hx_buf_printf(b, "memory #%.0f: %s", cJSON_GetNumberValue(cJSON_GetObjectItem(it, "id")),
                      str(it, "text") ? str(it, "text") : "");
    }
}

cJSON *hx_agent_undone(const hx_tools *reg, const cJSON *trace)
{
    cJSON *out = cJSON_CreateArray();
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(trace, "calls"))
    {
        const char *name = str(c, "name"), *st = str(c, "status");
        const int effect = hx_agent_effect_of(reg, name);
        if (!out || !name || !st || effect == HX_EFFECT_READ || !strcmp(st, "ok") ||
            done_later(c, name))
            continue;
        cJSON *u = cJSON_Duplicate(c, 1);
        cJSON_AddStringToObject(u, "effect", hx_effect_name(effect));
        hx_json_add(out, NULL, u);
    }
    const cJSON *calls = cJSON_GetObjectItem(trace, "calls");
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(trace, "not_run"))
    {
        const char *name = out ? stopped_write(c, calls, reg) : NULL;
        if (!name) continue;
        cJSON *u = cJSON_Duplicate(c, 1);
        cJSON_AddStringToObject(u, "status", "not run");
        cJSON_AddStringToObject(u, "effect", hx_effect_name(hx_agent_effect_of(reg, name)));
        hx_json_add(out, NULL, u);
    }
    return out;
}
