/* test_jstr.c: the JSON strings of a conversation read one by one
 * (agent/jstr.c): keys, the values under them, array items, escapes, and
 * text that is not JSON (a stray quote, a quote in a request, a line end
 * inside quotes) read as no string rather than misread. */
#include <string.h>

#include "agent/agent.h"
#include "test.h"

/* The strings of text, one line each: "K key", "V key=value" or
 * "I key=item" (neither), an escaped one with a '\' before its letter. */
static void read_all(const char *text, char *out, size_t cap)
{
    hx_jstr s = {.t = text, .n = strlen(text)};
    size_t len = 0;
    out[0] = 0;
    while (hx_jstr_next(&s) && len < cap) {
        const char kind = s.is_key ? 'K' : s.is_value ? 'V' : 'I';
        int w;
        if (s.is_key)
            w = snprintf(out + len, cap - len, "%s%c %.*s\n", s.escaped ? "\\" : "", kind,
                         (int)(s.end - s.start), text + s.start);
        else
            w = snprintf(out + len, cap - len, "%s%c %.*s=%.*s\n", s.escaped ? "\\" : "", kind,
                         (int)s.key_len, text + s.key, (int)(s.end - s.start), text + s.start);
        len += w > 0 ? (size_t)w : 0;
    }
}

static void test_keys_values_items(void)
{
    char out[512];
    read_all("{\"events\": [{\"title\": \"Q2 review\", \"to\": [\"a@x.org\", \"b@x.org\"]}], "
             "\"count\" : 2, \"path\":\"/h/n.md\"}",
             out, sizeof out);
    EXPECT_STR_EQ(out, "K events\nK title\nV title=Q2 review\nK to\n"
                       "I to=a@x.org\nI to=b@x.org\nK count\nK path\nV path=/h/n.md\n");
}

static void test_escapes(void)
{
    char out[256];
    read_all("{\"text\": \"say \\\"hi\\\"\\nbye\", \"a\\\"b\": \"c\"}", out, sizeof out);
    EXPECT_STR_EQ(out, "K text\n\\V text=say \\\"hi\\\"\\nbye\n\\K a\\\"b\nV a\\\"b=c\n");
    read_all("\"\\", out, sizeof out); /* a backslash at the text's end */
    EXPECT_STR_EQ(out, "");
}

/* Text around the results: a request's quotes are items of no key, a
 * colon after free text opens no value, and a quote with no other after
 * it on its line opens nothing: the next line is read from its start
 * (where "line\" \"k\"" pairs its own two quotes). */
static void test_not_json(void)
{
    char out[512];
    read_all("add \"lunch\" on friday\nNote: \"x\"\na 5\" screen\n\"k\": \"v\"\n\"open\nline\" \"k\"\n\"",
             out, sizeof out);
    EXPECT_STR_EQ(out, "I =lunch\nI =x\nK k\nV k=v\nI k= \n");
    read_all("", out, sizeof out);
    EXPECT_STR_EQ(out, "");
    read_all("\"k\":\n\"v\"", out, sizeof out); /* a value's quote on the next line */
    EXPECT_STR_EQ(out, "K k\nI k=v\n");
}

static void test_under(void)
{
    const char *t = "{\"path\": \"a\", \"paths\": \"b\"}";
    hx_jstr s = {.t = t, .n = strlen(t)};
    int under[4] = {0}, i = 0;
    while (hx_jstr_next(&s) && i < 4) under[i++] = s.is_value && hx_jstr_under(&s, "path");
    EXPECT_EQ_INT(i, 4);
    EXPECT(!under[0] && under[1] && !under[2] && !under[3]);
}

int main(void)
{
    RUN(test_keys_values_items);
    RUN(test_escapes);
    RUN(test_not_json);
    RUN(test_under);
    return test_summary();
}
