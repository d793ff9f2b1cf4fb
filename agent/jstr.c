/* jstr.c: the JSON strings of a text, read one by one, for the stages
 * that read a conversation's tool results (the answer's grounding, the
 * copy bias, the argument check): where each string is, whether it is a
 * key or a key's value, and the key it is under. */
#include <string.h>

#include "agent/agent.h"

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* The closing quote of the string whose opening quote is at t[i], on its
 * line (escapes skipped, *escaped set when there is one); n, or the line's
 * end, when it has none. */
static size_t closing(const char *t, size_t n, size_t i, int *escaped)
{
    size_t j = i + 1;
    *escaped = 0;
    while (j < n && t[j] != '"' && t[j] != '\n') {
        if (t[j] == '\\') *escaped = 1;
        j += t[j] == '\\' && j + 1 < n && t[j + 1] != '\n' ? 2 : 1;
    }
    return j;
}

int hx_jstr_next(hx_jstr *s)
{
    for (size_t i = s->at; i < s->n; i++) {
        if (s->t[i] != '"') continue;
        int escaped;
        const size_t j = closing(s->t, s->n, i, &escaped);
        if (j >= s->n || s->t[j] != '"') { /* no string: the line is done */
            i = j;
            continue;
        }
        size_t after = j + 1, before = i;
        while (after < s->n && is_blank(s->t[after])) after++;
        while (before > 0 && is_blank(s->t[before - 1])) before--;
        s->start = i + 1, s->end = j, s->at = j + 1, s->escaped = escaped;
        s->is_key = after < s->n && s->t[after] == ':';
        s->is_value = !s->is_key && s->key_len && before > 0 && before - 1 == s->colon;
        if (s->is_key) s->key = s->start, s->key_len = j - s->start, s->colon = after;
        return 1;
    }
    s->at = s->n;
    return 0;
}

int hx_jstr_under(const hx_jstr *s, const char *key)
{
    return s->key_len == strlen(key) && !memcmp(s->t + s->key, key, s->key_len);
}
