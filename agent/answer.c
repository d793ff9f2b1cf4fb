/* answer.c: answers written from the trace, not by a model: the tool
 * tier's (its one reading call) and the results answer (every call of a
 * request, for a model whose own words are not to be shown): what each
 * write or send did or why it did not, what each read found, item by
 * item, or that no tool ran. Only the tools' words and fixed phrases, so
 * every fact it states is one a tool returned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

#define TEXT_LINES 40    /* lines of a message or file read that are shown */
#define TEXT_BYTES 3000  /* and bytes */
#define OTHER_BYTES 1500 /* of the result of a tool without items */

static const char *str(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* What each reading call found, said in its first line: "No events
 * tomorrow.", "Busy 2 times tomorrow:", "1 memory about Enzo:", "Found 3
 * messages:", counting the result's list, with the argument named by key
 * ("" none). A row with unread set is for a call asking for unread mail
 * only. */
static const struct {
    const char *tool, *list, *key;
    int unread;
    const char *none;       /* what nothing found says before the argument */
    const char *lead, *one, *many, *sep; /* lead, count, noun, sep, argument */
} answers[] = {
    {"calendar.list_events", "events", "range", 0, "No events", "", "event", "events", " "},
    {"calendar.free_busy", "busy", "range", 0, "Nothing busy", "Busy ", "time", "times", " "},
    {"calendar.find_slots", "slots", "range", 0, "No free slot", "", "free slot", "free slots", " "},
    {"mail.search", "messages", "", 1, "No unread mail", "", "unread message", "unread messages", ""},
    {"mail.search", "messages", "", 0, "No message found", "Found ", "message", "messages", ""},
    {"memory.search", "memories", "query", 0, "Nothing remembered about", "", "memory", "memories",
     " about "},
    {"files.list", "entries", "path", 0, "Nothing in", "", "entry", "entries", " in "},
    {"files.search", "files", "", 0, "No file found", "Found ", "file", "files", ""},
};

/* The row of answers for a call of name with args, or -1. */
static int answer_row(const char *name, const cJSON *args)
{
    const int unread = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "unread"));
    for (size_t a = 0; name && a < sizeof answers / sizeof *answers; a++)
        if (!strcmp(answers[a].tool, name) && (!answers[a].unread || unread)) return (int)a;
    return -1;
}

static int cancelled(const cJSON *item)
{
    const char *st = str(item, "status");
    return st && !strcmp(st, "cancelled");
}

/* How many items a result's list holds (cancelled ones into
 * *n_cancelled, not counted), or dflt when it has no such list. */
static int result_count(const cJSON *res, const char *list, int dflt, int *n_cancelled)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(res, list), *it;
    *n_cancelled = 0;
    if (!cJSON_IsArray(l)) return dflt;
    cJSON_ArrayForEach(it, l) *n_cancelled += cancelled(it);
    const int listed = cJSON_GetArraySize(l) - *n_cancelled;
    /* a limit lists fewer than were found: the tool's own count says how
     * many ("count" of events taking place and "cancelled" apart, or a
     * search's "total"), never fewer than the list */
    const cJSON *count = cJSON_GetObjectItemCaseSensitive(res, "count");
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(res, "total");
    const cJSON *gone = cJSON_GetObjectItemCaseSensitive(res, "cancelled");
    int k = listed;
    if (cJSON_IsNumber(count)) {
        k = (int)count->valuedouble;
        if (cJSON_IsNumber(gone) && (int)gone->valuedouble > *n_cancelled) *n_cancelled = (int)gone->valuedouble;
    } else if (cJSON_IsNumber(total)) {
        k = (int)total->valuedouble - *n_cancelled;
    }
    return k > listed ? k : listed;
}

/* A tool's error as the results answer says it: what it quotes of the
 * call's own words blanked to "'…'" (hx_agent_blank_echoes), and the
 * time reader's examples of what it can read ("(try 'tomorrow at 3pm',
 * ...)", advice to a model, no fact of the user's) left out. */
static void error_said(const char *why, const cJSON *args, hx_buf *b)
{
    char *t = hx_strdup(why);
    hx_buf vals;
    hx_buf_init(&vals);
    hx_agent_arg_strings(args, &vals);
    if (t && !vals.oom) hx_agent_blank_echoes(t, &vals);
    char *hint = t ? strstr(t, " (try '") : NULL;
    if (hint) *hint = 0;
    for (const char *p = t ? t : ""; *p; p++) {
        const size_t n = (*p == '\'' || *p == '"') ? strspn(p + 1, " ") : 0;
        if (n && p[n + 1] == *p) { /* a quote blanked whole */
            hx_buf_printf(b, "%c\u2026%c", *p, *p);
            p += n + 1;
        } else hx_buf_putc(b, *p);
    }
    if (!t || vals.oom) b->oom = 1;
    hx_buf_free(&vals);
    free(t);
}

/* A call that did not return a result: that it failed and the tool's
 * error, or that it did not run and why; with said, the error as the
 * results answer says it (error_said), else as the tool gave it. */
static void failed(const cJSON *c, int said, hx_buf *b)
{
    const char *name = str(c, "name"), *st = str(c, "status");
    cJSON *e = cJSON_Parse(str(c, "result") ? str(c, "result") : "");
    const char *why = str(e, "error");
    if (st && !strcmp(st, "error")) /* it ran and refused what it was given */
        hx_buf_printf(b, "%s failed: ", name ? name : "the call");
    else hx_buf_printf(b, "%s did not run (%s): ", name ? name : "the call", st ? st : "?");
    if (!why) hx_buf_puts(b, "no reason given");
    else if (said) error_said(why, cJSON_GetObjectItemCaseSensitive(c, "arguments"), b);
    else hx_buf_puts(b, why);
    cJSON_Delete(e);
}

/* The text of a message or file read, line by line, as far as the
 * bounds allow: "     > line" of a message, "     12: line" of a file. */
static void text_lines(const char *text, int file, hx_buf *b)
{
    int no = 0, shown = 0;
    const size_t start = b->len;
    for (const char *p = text; p && *p && shown < TEXT_LINES && b->len - start < TEXT_BYTES;) {
        const size_t n = strcspn(p, "\n");
        no++;
        if (n && strspn(p, " \t\r") < n) {
            if (file) hx_buf_printf(b, "\n     %d: %.*s", no, (int)n, p);
            else hx_buf_printf(b, "\n     > %.*s", (int)n, p);
            shown++;
        }
        p += n + (p[n] == '\n');
        if (shown == TEXT_LINES || b->len - start >= TEXT_BYTES)
            if (*p) hx_buf_puts(b, "\n     (the rest is not shown)");
    }
}

/* The items one read returned, each on a line ("- event ...", with no
 * newline before it where the read's part of b starts, at), those of a
 * message or file read with their text; a cancelled event last, by its
 * title alone ("- cancelled: Lunch"): its time is no one's. */
static void item_lines(const cJSON *items, const cJSON *res, size_t at, hx_buf *b)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        if (cancelled(it)) continue;
        hx_buf_puts(b, b->len > at ? "\n- " : "- ");
        hx_agent_read_line(it, b);
    }
    cJSON_ArrayForEach(it, items)
        if (cancelled(it))
            hx_buf_printf(b, "%scancelled: %s", b->len > at ? "\n- " : "- ", str(it, "title") ? str(it, "title") : "?");
    const char *text = str(res, "text");
    if (text) text_lines(text, str(res, "path") != NULL, b);
}

/* The first line of a read that has a row: how many it found (k, and
 * n_cancelled cancelled: result_count), or that it found none; the items
 * of a search's near results (a list "others") are said to match part of
 * it, the busy events a slot search names where it found none to be in
 * the way. */
static void headline(int a, const cJSON *c, const cJSON *res, int k, int n_cancelled, hx_buf *b)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
    const char *arg = str(args, answers[a].key);
    /* the events looked for by words: "2 events with \"Lyon sync\":" */
    const char *query = !strcmp(answers[a].list, "events") ? str(args, "query") : NULL;
    if (k) hx_buf_printf(b, "%s%d %s%s%s", answers[a].lead, k, k == 1 ? answers[a].one : answers[a].many,
                         arg ? answers[a].sep : "", arg ? arg : "");
    else hx_buf_printf(b, "%s%s%s", answers[a].none, arg ? " " : "", arg ? arg : "");
    if (query && *query) hx_buf_printf(b, " with \"%s\"", query);
    if (n_cancelled) hx_buf_printf(b, k ? " (and %d cancelled)" : ", only %d cancelled", n_cancelled);
    hx_buf_puts(b, k || n_cancelled ? ":" : ".");
    if (!k && !n_cancelled && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "others")))
        hx_buf_puts(b, " These match part of it:");
    else if (!k && !strcmp(answers[a].list, "slots") &&
             cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "busy")))
        hx_buf_puts(b, " In the way:"); /* the user's events the slot would overlap */
}

/* What one successful read found, all of it (also what the context's
 * cut kept from the model: the call's "result_whole"): its headline, then
 * its items; a tool whose result has none of the shapes read knows, as
 * its result. */
static void read_answer(const cJSON *c, const hx_tools *reg, hx_buf *b)
{
    const size_t at = b->len;
    const char *whole = str(c, "result_whole"); /* what the context's cut left out too */
    cJSON *one = cJSON_CreateArray(), *dup = cJSON_Duplicate(c, 1);
    if (whole && dup) {
        cJSON_DeleteItemFromObjectCaseSensitive(dup, "result");
        cJSON_AddStringToObject(dup, "result", whole);
    }
    hx_json_add(one, NULL, dup);
    cJSON *items = hx_agent_read(one, reg, NULL);
    cJSON *res = cJSON_Parse(whole ? whole : str(c, "result") ? str(c, "result") : "");
    const int a = answer_row(str(c, "name"), cJSON_GetObjectItemCaseSensitive(c, "arguments"));
    const int n = cJSON_GetArraySize(items);
    int n_cancelled = 0;
    const int k = a >= 0 ? result_count(res, answers[a].list, n, &n_cancelled) : n;
    if (a >= 0) headline(a, c, res, k, n_cancelled, b);
    if (a < 0 && !n) hx_buf_printf(b, "%s returned: %.*s", str(c, "name"), OTHER_BYTES,
                                   whole ? whole : str(c, "result") ? str(c, "result") : "");
    item_lines(items, res, at, b);
    if (n < k + n_cancelled) hx_buf_printf(b, "\n- (%d more not listed)", k + n_cancelled - n);
    if (str(res, "not_shown")) hx_buf_printf(b, "\n- (%s)", str(res, "not_shown"));
    cJSON_Delete(res);
    cJSON_Delete(items);
    cJSON_Delete(one);
}

/* One reading call's answer: what it found, or why it found nothing
 * (said as failed's said). */
static void call_answer(const cJSON *c, const hx_tools *reg, int said, hx_buf *b)
{
    const char *st = str(c, "status");
    if (st && !strcmp(st, "ok")) read_answer(c, reg, b);
    else failed(c, said, b);
}

char *hx_agent_tier_answer(const cJSON *calls, const hx_tools *reg)
{
    hx_buf b;
    hx_buf_init(&b);
    call_answer(cJSON_GetArrayItem(calls, cJSON_GetArraySize(calls) - 1), reg, 0, &b);
    return b.oom ? (hx_buf_free(&b), NULL) : hx_buf_steal(&b, NULL);
}

/* ---- what an error repeats of the call ---- */
void hx_agent_arg_strings(const cJSON *j, hx_buf *b)
{
    if (cJSON_IsString(j) && strlen(j->valuestring) >= 3)
        hx_buf_append(b, j->valuestring, strlen(j->valuestring) + 1);
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next) hx_agent_arg_strings(c, b);
}

/* Whether some value of echo holds q[0, n). */
static int echoed(const hx_buf *echo, const char *q, size_t n)
{
    for (const char *v = echo->data; v && v < echo->data + echo->len; v += strlen(v) + 1)
        if (memmem(v, strlen(v), q, n)) return 1;
    return 0;
}

void hx_agent_blank_echoes(char *text, const hx_buf *echo)
{
    for (const char *v = echo->data; v && v < echo->data + echo->len; v += strlen(v) + 1)
        for (char *q = strstr(text, v); q; q = strstr(q + 1, v))
            if (q > text && (q[-1] == '\'' || q[-1] == '"')) memset(q, ' ', strlen(v));
    for (char *q = strchr(text, '\''), *e; q && (e = strchr(q + 1, '\'')); q = strchr(e + 1, '\''))
        if (e > q + 1 && echoed(echo, q + 1, (size_t)(e - q - 1)))
            memset(q + 1, ' ', (size_t)(e - q - 1));
}

/* ---- the results answer ---- */

const char *hx_agent_refusal_reason(const char *by)
{
    if (!by) by = "";
    if (!strcmp(by, "no terminal"))
        return "needs your consent and there is no terminal to ask; rerun in a terminal or "
               "with --yes";
    if (!strcmp(by, "taint rule (no terminal to ask)"))
        return "needs your consent (untrusted content, a mail, a file or a tool's output, "
               "is in this conversation) and there is no terminal to ask; rerun in a "
               "terminal, or with --allow-tainted-send if you trust that content";
    if (!strcmp(by, "--no")) return "was refused by --no";
    if (!strcmp(by, "policy")) return "is denied by your policy (\"policy\" in config.json)";
    if (!strcmp(by, "user")) return "was declined by you";
    if (!strcmp(by, "request"))
        return "was not run: it removes what you kept and your request did not ask to "
               "remove anything; ask for it in words (\"forget ...\", \"cancel ...\")";
    return "was refused";
}

/* One entry of hx_agent_done: "Added: Lunch, 2027-03-12 12:00-13:00
 * (calendar work)", with the busy events it overlaps; "Not sent:
 * mail.send was declined by you"; "Not done: calendar.create_event
 * failed: ..." (error_said). */
static void done_line(const cJSON *d, hx_buf *b)
{
    const char *action = str(d, "action") ? str(d, "action") : "done";
    const char *st = str(d, "status") ? str(d, "status") : "";
    hx_buf_printf(b, "%c%s: ", action[0] - ('a' <= action[0] && action[0] <= 'z' ? 32 : 0), action + 1);
    if (!strcmp(st, "ok")) hx_buf_puts(b, str(d, "text") ? str(d, "text") : "");
    else if (!strcmp(st, "refused"))
        hx_buf_printf(b, "%s %s", str(d, "tool"), hx_agent_refusal_reason(str(d, "by")));
    else {
        /* a call not run says so itself ("not run: stopped by the ...") */
        hx_buf_printf(b, "%s %s", str(d, "tool"), strcmp(st, "not run") ? "failed: " : "");
        error_said(str(d, "error") ? str(d, "error") : st, cJSON_GetObjectItemCaseSensitive(d, "arguments"), b);
    }
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "result"),
                                                          "conflicts"))
    {
        cJSON *it = cJSON_Duplicate(ev, 1);
        if (it && !cJSON_GetObjectItemCaseSensitive(it, "kind")) cJSON_AddStringToObject(it, "kind", "event");
        hx_buf_puts(b, "\n- it overlaps ");
        hx_agent_read_line(it, b);
        cJSON_Delete(it);
    }
}

/* Whether a later call of calls is the same call as c (name and
 * arguments): a repeat, whose answer is said once, from the last. */
static int repeated_later(const cJSON *c)
{
    for (const cJSON *d = c->next; d; d = d->next)
        if (cJSON_Compare(cJSON_GetObjectItemCaseSensitive(c, "name"),
                          cJSON_GetObjectItemCaseSensitive(d, "name"), 1) &&
            cJSON_Compare(cJSON_GetObjectItemCaseSensitive(c, "arguments"),
                          cJSON_GetObjectItemCaseSensitive(d, "arguments"), 1))
            return 1;
    return 0;
}

static void paragraph(hx_buf *b)
{
    if (b->len) hx_buf_puts(b, "\n\n");
}

/* Whether c is a call of a tool that only reads (or of none known). */
static int reads(const cJSON *c, const hx_tools *reg)
{
    return hx_agent_effect_of(reg, str(c, "name")) == HX_EFFECT_READ;
}

/* What the reads found, each once; a read that failed only where none
 * found anything (the model's later call did). */
static void reads_said(const cJSON *calls, const hx_tools *reg, hx_buf *b)
{
    const cJSON *c;
    int found = 0;
    cJSON_ArrayForEach(c, calls) found |= reads(c, reg) && str(c, "status") && !strcmp(str(c, "status"), "ok");
    cJSON_ArrayForEach(c, calls)
    {
        const int ok = str(c, "status") && !strcmp(str(c, "status"), "ok");
        if (!reads(c, reg) || repeated_later(c) || (found && !ok)) continue;
        paragraph(b);
        call_answer(c, reg, 1, b);
    }
}

char *hx_agent_results_answer(const cJSON *calls, const cJSON *not_run, const char *clock,
                              const char *recalled, const hx_tools *reg)
{
    hx_buf b;
    hx_buf_init(&b);
    cJSON *done = hx_agent_done(calls, not_run, reg);
    const cJSON *d;
    cJSON_ArrayForEach(d, done)
    {
        paragraph(&b);
        done_line(d, &b);
    }
    cJSON_Delete(done);
    reads_said(calls, reg, &b);
    if (!b.len && !cJSON_GetArraySize(not_run)) {
        hx_buf_puts(&b, "No tool was called: nothing was read, changed or sent.");
        if (clock && *clock) hx_buf_printf(&b, "\n\n%s", clock);
        if (recalled && *recalled) hx_buf_printf(&b, "\n\nYou told me before:\n%s", recalled);
    } else if (!b.len) {
        hx_buf_puts(&b, "No call was made: the limits stopped it before it ran.");
    }
    char *out = b.oom || !done ? (hx_buf_free(&b), NULL) : hx_buf_steal(&b, NULL);
    if (out) hx_strip_markup(out); /* a tool's text that spells the template's tags */
    return out;
}
