/* toolpick.c: the tools a request needs, by the words it uses: the
 * governor's trimmed prompt offers only those domains' tools, and for a
 * question that asks for no change only their reading tools; a request
 * left with reading tools only is the small model's tier. */
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
