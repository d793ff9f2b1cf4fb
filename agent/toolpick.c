/* toolpick.c: the tools a request needs, by the words it uses: the
 * governor's trimmed prompt offers only those domains' tools, and for a
 * question that asks for no change only their reading tools; a request
 * left with reading tools only is the small model's tier, and a plain
 * read in a fixed form the no-model tier's (one call, its answer written
 * from the result by agent/answer.c). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"

/* A domain's tool prefix and the word stems that call for it (matched at
 * the start of a word, case-insensitively). */
static const struct {
    const char *prefix;
    const char *const stems[24];
} domains[] = {
    {"calendar.", {"calendar", "meeting", "event", "appointment", "schedul", "agenda",
                   "busy", "free ", "invit", "tomorrow", "today", "week", "monday",
                   "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
                   "morning", "afternoon", "evening", NULL}},
    {"mail.", {"mail", "email", "e-mail", "inbox", "message", "repl", "send", "sent",
               "unread", "wrote", "write back", NULL}},
    {"files.", {"file", "folder", "document", "director", "pdf", "note", NULL}},
    {"memory.", {"remember", "forget", "recall", "prefer", "favorite", "favourite",
                 "note that", NULL}},
};

/* Words that ask for a change: such a request keeps every tool of its
 * domains. */
static const char *const actions[] = {
    "create", "add", "book", "move", "reschedul", "cancel", "delete", "send", "repl",
    "draft", "write", "forward", "remember", "forget", "invite", "set up", "make",
    "put", "save", "update", "change", "erase", "drop", "tell ", NULL};

/* Words that ask to remove or change what the user kept. */
static const char *const removals[] = {
    "forget", "delete", "remove", "erase", "clear", "drop", "cancel", "wipe", "discard",
    "scrap", "call off", "get rid", "undo", "no longer", "anymore", "any more", "update",
    "change", "correct", "wrong", "instead", "replace", "outdated", "not true",
    "stop remembering", "unlearn", "disregard", "never mind", "off my calendar",
    "off the calendar", "off my schedule", "off my diary", "is off",
    "vergiss", "lösch", "losch", "entfern", "absag", "storn", "oublie", "supprim", "annul",
    "efface", "olvida", "borra", "elimin", "quita", NULL};

/* Words that ask to move an event. */
static const char *const moves[] = {"move", "shift", "reschedul", "postpon", "push",
                                    "verschieb", "déplac", "muev", NULL};

/* Words a question starts with. */
static const char *const asks[] = {
    "what", "when", "where", "who", "which", "how", "is ", "am ", "are ", "do ",
    "does ", "did ", "any", "have ", "list", "show", NULL};

/* 1 when a word of text starts with stem. */
static int has_stem(const char *text, const char *stem)
{
    const size_t n = strlen(stem);
    for (const char *p = text; *p; p++)
        if ((p == text || !isalnum((unsigned char)p[-1])) && !strncasecmp(p, stem, n))
            return 1;
    return 0;
}

static int any_stem(const char *text, const char *const *stems)
{
    for (int s = 0; stems[s]; s++)
        if (has_stem(text, stems[s])) return 1;
    return 0;
}

/* Words a request agreeing to what the assistant offered begins with. */
static const char *const yeses[] = {"yes", "yeah", "yep", "ok", "okay", "sure", "go ahead",
                                    "do it", "please do", "ja", "oui", "si", "sí", NULL};

static int agrees(const char *request)
{
    while (isspace((unsigned char)*request)) request++;
    for (int i = 0; yeses[i]; i++) {
        const size_t n = strlen(yeses[i]);
        if (!strncasecmp(request, yeses[i], n) && !isalnum((unsigned char)request[n])) return 1;
    }
    return 0;
}

int hx_agent_asks_removal(const char *request, const char *prev)
{
    if (!request) return 0;
    return any_stem(request, removals) || (prev && agrees(request) && any_stem(prev, removals));
}

int hx_agent_asks_move(const char *request) { return request && any_stem(request, moves); }

/* A question that asks for no change: it ends with '?' or starts with a
 * question word, and names no action. */
static int reads_only(const char *text)
{
    while (isspace((unsigned char)*text)) text++;
    size_t n = strlen(text);
    while (n && isspace((unsigned char)text[n - 1])) n--;
    int ask = n && text[n - 1] == '?';
    for (int i = 0; !ask && asks[i]; i++) ask = !strncasecmp(text, asks[i], strlen(asks[i]));
    return ask && !any_stem(text, actions);
}

/* The domain of a tool's name the request calls for, or -1. */
static int wanted_domain(const char *request, const char *name)
{
    for (int d = 0; d < (int)(sizeof domains / sizeof domains[0]); d++)
        if (!strncmp(name, domains[d].prefix, strlen(domains[d].prefix)))
            return any_stem(request, domains[d].stems) ? d : -1;
    return -1;
}

int hx_agent_tools_for_request(const hx_tools *reg, const char *request, char *filter,
                               size_t n)
{
    int k = 0;
    size_t used = 0;
    if (n) filter[0] = 0;
    if (!request) return 0;
    const int ro = reads_only(request);
    for (int i = 0; i < hx_tools_count(reg); i++) {
        const hx_tool_def *t = hx_tools_at(reg, i);
        if (wanted_domain(request, t->name) < 0 || (ro && t->effect != HX_EFFECT_READ))
            continue;
        int w = snprintf(filter + used, n - used, "%s%s", k ? "," : "", t->name);
        if (w < 0 || (size_t)w >= n - used) return -1;
        used += (size_t)w;
        k++;
    }
    return k;
}

int hx_agent_request_tier(const hx_tools *reg, const char *request, char *filter, size_t n)
{
    if (hx_agent_tools_for_request(reg, request, filter, n) <= 0) return HX_TIER_FULL;
    for (int i = 0; i < hx_tools_count(reg); i++) {
        const hx_tool_def *d = hx_tools_at(reg, i);
        if (d->effect != HX_EFFECT_READ && hx_agent_tool_offered(filter, d->name))
            return HX_TIER_FULL;
    }
    return HX_TIER_SMALL;
}

/* ---- the tool tier: a plain read served by one call, no model ----
 * A request is taken only when the whole of it, less greetings and
 * thanks, is one of the forms below with one argument the rule copies
 * from it unchanged: one clause (no sentence break, colon or quote),
 * no word of a change (actions) and none of a condition in the
 * argument, and a time the calendar's own reader accepts. */
enum { ARG_RANGE, ARG_QUERY, ARG_PATH, ARG_NONE };

static const struct {
    const char *tool;
    int arg;             /* what the rest of the request is */
    const char *key;     /* the argument it goes in */
    const char *prefix;  /* the request's start, lower case */
    const char *suffix;  /* its end after the argument ("" none) */
} forms[] = {
    {"calendar.list_events", ARG_RANGE, "range", "what meetings do i have ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what events do i have ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what appointments do i have ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what is on my calendar ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what's on my calendar ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what is on my schedule ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what's on my schedule ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what is on my agenda ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "what's on my agenda ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "do i have anything ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "anything on my calendar ", ""},
    {"calendar.list_events", ARG_RANGE, "range", "anything on my schedule ", ""},
    {"calendar.free_busy", ARG_RANGE, "range", "am i free ", ""},
    {"calendar.free_busy", ARG_RANGE, "range", "check whether i'm free ", ""},
    {"calendar.free_busy", ARG_RANGE, "range", "check whether i am free ", ""},
    {"calendar.free_busy", ARG_RANGE, "range", "do i have any free time ", ""},
    {"mail.search", ARG_NONE, "unread", "what new mail do i have", ""},
    {"mail.search", ARG_NONE, "unread", "what unread mail do i have", ""},
    {"mail.search", ARG_NONE, "unread", "do i have new mail", ""},
    {"mail.search", ARG_NONE, "unread", "do i have unread mail", ""},
    {"mail.search", ARG_NONE, "unread", "do i have any new mail", ""},
    {"mail.search", ARG_NONE, "unread", "do i have any unread mail", ""},
    {"mail.search", ARG_NONE, "unread", "any new mail", ""},
    {"mail.search", ARG_NONE, "unread", "any unread mail", ""},
    {"memory.search", ARG_QUERY, "query", "what do you know about ", ""},
    {"memory.search", ARG_QUERY, "query", "what do you remember about ", ""},
    {"memory.search", ARG_QUERY, "query", "remind me what you know about ", ""},
    {"files.list", ARG_PATH, "path", "which files are in ", ""},
    {"files.list", ARG_PATH, "path", "what files are in ", ""},
    {"files.list", ARG_PATH, "path", "what is in my ", " folder"},
    {"files.list", ARG_PATH, "path", "what's in my ", " folder"},
    {"files.list", ARG_PATH, "path", "list my ", " folder"},
};

/* Greetings and politeness around a request, and condition words. */
static const char *const openers[] = {"hey", "hi", "hello", "please", "can you", "could you",
                                      "would you", NULL};
static const char *const closers[] = {"please", "thanks", "thank you", "thx", NULL};
static const char *const conditions[] = {"if", "unless", "when", "whenever", "then", "except",
                                         "only", "but", "and", "or", "because", "otherwise",
                                         "else", "until", "while", "not", "no", NULL};

static int is_word_end(char c) { return !isalnum((unsigned char)c) && c != '\''; }

/* 1 when text[0, n) is the word w (any case) then a word's end. */
static int starts_word(const char *s, size_t n, const char *w)
{
    size_t k = strlen(w);
    return n >= k && !strncasecmp(s, w, k) && (n == k || is_word_end(s[k]));
}

/* *s, *n without the greetings, thanks, punctuation and spaces at its
 * ends. */
static void strip_polite(const char **s, size_t *n)
{
    for (int again = 1; again;) {
        again = 0;
        while (*n && (isspace((unsigned char)**s) || strchr(",!", **s))) (*s)++, (*n)--;
        while (*n && (isspace((unsigned char)(*s)[*n - 1]) || strchr(",.!?", (*s)[*n - 1]))) (*n)--;
        for (int i = 0; openers[i]; i++)
            if (starts_word(*s, *n, openers[i]) && *n > strlen(openers[i])) {
                *s += strlen(openers[i]), *n -= strlen(openers[i]), again = 1;
                break;
            }
        for (int i = 0; closers[i]; i++) {
            size_t k = strlen(closers[i]);
            if (*n > k && !strncasecmp(*s + *n - k, closers[i], k) &&
                !isalnum((unsigned char)(*s)[*n - k - 1]))
                *n -= k, again = 1;
        }
    }
}

/* 1 when a word of text[0, n) is one of words. */
static int has_word(const char *s, size_t n, const char *const *words)
{
    for (size_t i = 0; i < n; i++)
        if (i == 0 || is_word_end(s[i - 1]))
            for (int w = 0; words[w]; w++)
                if (starts_word(s + i, n - i, words[w])) return 1;
    return 0;
}

/* The argument a form takes, checked: a time the calendar reads; a
 * query of at most eight words; a folder's relative path. */
static int arg_ok(const hx_tools *reg, int f, const char *a)
{
    if (!*a || has_word(a, strlen(a), conditions) || any_stem(a, actions)) return 0;
    if (forms[f].arg == ARG_RANGE)
        return hx_agent_arg_check((void *)reg, forms[f].tool, forms[f].key, a) == 1;
    int words = 1;
    for (const char *p = a; *p; p++) {
        if (forms[f].arg == ARG_PATH && !isalnum((unsigned char)*p) && !strchr("-_/", *p))
            return 0;
        words += *p == ' ';
    }
    return forms[f].arg == ARG_PATH ? !strstr(a, "..") && a[0] != '/' : words <= 8;
}

/* The call of form f with argument a (NULL: none). */
static cJSON *form_call(int f, const char *a)
{
    cJSON *args = cJSON_CreateObject();
    if (!args) return NULL;
    int ok = a ? cJSON_AddStringToObject(args, forms[f].key, a) != NULL
               : cJSON_AddBoolToObject(args, forms[f].key, 1) != NULL;
    if (!ok) cJSON_Delete(args);
    return ok ? args : NULL;
}

int hx_agent_tool_tier(const hx_tools *reg, const char *request, const char **tool,
                       cJSON **args)
{
    const char *s = request;
    size_t n = request ? strlen(request) : 0;
    *args = NULL;
    strip_polite(&s, &n);
    if (!n || n > 200 || memchr(s, '\n', n)) return 0;
    for (size_t i = 0; i < n; i++)
        if (strchr(".:;\"!?,<>", s[i])) return 0; /* one clause, nothing quoted */
    for (int f = 0; f < (int)(sizeof forms / sizeof forms[0]); f++) {
        const size_t p = strlen(forms[f].prefix), q = strlen(forms[f].suffix);
        if (!hx_tools_find(reg, forms[f].tool) || n < p + q || strncasecmp(s, forms[f].prefix, p) ||
            strncasecmp(s + n - q, forms[f].suffix, q))
            continue;
        if (forms[f].arg == ARG_NONE) {
            if (n != p) continue;
            *tool = forms[f].tool;
            return (*args = form_call(f, NULL)) != NULL;
        }
        char a[201];
        snprintf(a, sizeof a, "%.*s", (int)(n - p - q), s + p);
        if (!arg_ok(reg, f, a)) return 0;
        *tool = forms[f].tool;
        return (*args = form_call(f, a)) != NULL;
    }
    return 0;
}
