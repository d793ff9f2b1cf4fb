/* toolpick.c: the tools a request needs, by the words it uses: the
 * governor's trimmed prompt offers only those domains' tools. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"

/* A domain's filter and the word stems that call for it (matched at the
 * start of a word, case-insensitively). */
static const struct {
    const char *filter;
    const char *const stems[12];
} domains[] = {
    {"calendar.*", {"calendar", "meeting", "event", "appointment", "schedule", "agenda",
                    "busy", "free", "invit", "tomorrow", "today", NULL}},
    {"mail.*", {"mail", "email", "e-mail", "inbox", "message", "repl", "send", "sent",
                "unread", "wrote", NULL}},
    {"files.*", {"file", "folder", "document", "director", "pdf", NULL}},
    {"memory.*", {"remember", "forget", "recall", "prefer", "favorite", "favourite", NULL}},
};

/* 1 when a word of text starts with stem. */
static int has_stem(const char *text, const char *stem)
{
    const size_t n = strlen(stem);
    for (const char *p = text; *p; p++)
        if ((p == text || !isalnum((unsigned char)p[-1])) && !strncasecmp(p, stem, n))
            return 1;
    return 0;
}

int hx_agent_tools_for_request(const char *request, char *filter, size_t n)
{
    int k = 0;
    size_t used = 0;
    if (n) filter[0] = 0;
    for (size_t d = 0; request && d < sizeof domains / sizeof domains[0]; d++) {
        int hit = 0;
        for (int s = 0; !hit && domains[d].stems[s]; s++) hit = has_stem(request, domains[d].stems[s]);
        if (!hit) continue;
        int w = snprintf(filter + used, n - used, "%s%s", k ? "," : "", domains[d].filter);
        if (w < 0 || (size_t)w >= n - used) return -1;
        used += (size_t)w;
        k++;
    }
    return k;
}
