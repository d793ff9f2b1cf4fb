/* test_config.c: config.json loading (comments, relative paths, working
 * hours, defaults for a missing file), errors naming the bad field, and
 * the commented default that `hearth init` writes. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "tools/tools.h"

static char dir[PATH_MAX];

static const char *write_cfg(const char *name, const char *text)
{
    static char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
    return path;
}

static void test_fixture(void)
{
    hx_config *c = NULL;
    hx_err e = {0};
    ASSERT(hx_config_load("tests/fixtures/world/config.json", &c, &e) == HX_OK);
    EXPECT_STR_EQ(c->user_name, "Alice Martin");
    EXPECT_STR_EQ(c->user_email, "alice@example.org");
    EXPECT_STR_EQ(c->timezone, "Europe/Paris");
    EXPECT_EQ_INT(c->work_start_min, 540);
    EXPECT_EQ_INT(c->work_end_min, 1020);
    EXPECT_EQ_INT(c->work_days, 0x3e);
    EXPECT_EQ_INT(c->n_calendars, 2);
    EXPECT_STR_EQ(c->calendars[0], "tests/fixtures/world/calendars/work");
    EXPECT_STR_EQ(c->calendars[1], "tests/fixtures/world/calendars/family.ics");
    EXPECT_STR_EQ(c->calendar_default, "tests/fixtures/world/calendars/work");
    EXPECT_STR_EQ(c->outbox, "tests/fixtures/world/outbox");
    EXPECT_EQ_INT(c->n_file_roots, 1);
    EXPECT(c->model == NULL);
    EXPECT(cJSON_IsObject(c->raw));
    hx_config_free(c);
    hx_config_free(NULL);
}

static void test_comments_and_paths(void)
{
    const char *p = write_cfg("a.json",
                              "// top comment with \"quotes\"\n{\n"
                              "  \"user\": {\"name\": \"B // not a comment\", \"email\": \"b@x.org\"},"
                              " /* block\n comment */\n"
                              "  \"timezone\": \"America/New_York\",\n"
                              "  \"working_hours\": {\"start\": \"08:30\", \"end\": \"16:00\","
                              " \"days\": [\"Mon\", \"wednesday\", \"sat\"]},\n"
                              "  \"calendars\": [\"/abs/cal\", \"rel/cal.ics\", \"~/home-cal\"],\n"
                              "  \"policy\": {\"anything\": true}\n}\n");
    hx_config *c = NULL;
    hx_err e = {0};
    setenv("HOME", "/home/tester", 1);
    ASSERT(hx_config_load(p, &c, &e) == HX_OK);
    EXPECT_STR_EQ(c->user_name, "B // not a comment");
    EXPECT_STR_EQ(c->timezone, "America/New_York");
    EXPECT_EQ_INT(c->work_start_min, 510);
    EXPECT_EQ_INT(c->work_end_min, 960);
    EXPECT_EQ_INT(c->work_days, (1 << 1) | (1 << 3) | (1 << 6));
    EXPECT_STR_EQ(c->calendars[0], "/abs/cal");
    char want[PATH_MAX + 32];
    snprintf(want, sizeof want, "%s/rel/cal.ics", dir);
    EXPECT_STR_EQ(c->calendars[1], want);
    EXPECT_STR_EQ(c->calendars[2], "/home/tester/home-cal");
    EXPECT_STR_EQ(c->calendar_default, "/abs/cal"); /* the first calendar */
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(c->raw, "policy"), "anything")));
    hx_config_free(c);
}

static void expect_bad(const char *text, const char *needle)
{
    const char *p = write_cfg("bad.json", text);
    hx_config *c = (hx_config *)1;
    hx_err e = {0};
    int rc = hx_config_load(p, &c, &e);
    if (rc != HX_ERR_FORMAT || c != NULL || !strstr(e.msg, needle))
        test_fail_at(__FILE__, __LINE__, "%s: rc %d '%s', want '%s'", text, rc, e.msg, needle);
}

static void test_errors(void)
{
    expect_bad("{\"timezone\": \"Mars/Base\"}", "'timezone': unknown time zone 'Mars/Base'");
    expect_bad("{\"timezone\": 5}", "'timezone' must be a string");
    expect_bad("{\"working_hours\": {\"start\": \"9am\"}}", "'working_hours.start' must be a time");
    expect_bad("{\"working_hours\": {\"start\": \"18:00\", \"end\": \"09:00\"}}",
               "'working_hours.end' must be after");
    expect_bad("{\"working_hours\": {\"days\": [\"funday\"]}}", "'working_hours.days'");
    expect_bad("{\"calendars\": \"one\"}", "'calendars' must be an array");
    expect_bad("{\"calendars\": [3]}", "'calendars' must be an array of non-empty path");
    expect_bad("{\"user\": {\"email\": \"nobody\"}}", "'user.email' must be an address");
    expect_bad("{\"user\": \"alice\"}", "'user' must be an object");
    expect_bad("{\n\"timezone\": \"UTC\",\n\n\"x\": [1,,2]\n}", "syntax error near line 4");
    expect_bad("[1]", "holds a JSON array, not the object");
    expect_bad("42", "holds a JSON number, not the object");
    expect_bad("", "is empty: it must hold a JSON object");
    expect_bad("// only a comment\n", "is empty: it must hold a JSON object");
    /* the message names the file */
    expect_bad("{\"maildir\": 1}", "bad.json: 'maildir' must be a string");
}

static void test_missing_file_gives_defaults(void)
{
    char home[PATH_MAX + 16];
    snprintf(home, sizeof home, "%s/home", dir);
    setenv("HEARTH_HOME", home, 1);
    setenv("TZ", "Asia/Tokyo", 1);
    hx_config *c = NULL;
    hx_err e = {0};
    ASSERT(hx_config_load(NULL, &c, &e) == HX_OK);
    EXPECT_STR_EQ(c->timezone, "Asia/Tokyo");
    EXPECT_EQ_INT(c->work_days, 0x3e);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/data/outbox", home);
    EXPECT_STR_EQ(c->outbox, want);
    hx_config_free(c);
    unsetenv("TZ");
}

static void test_write_default(void)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/new/sub/config.json", dir);
    hx_err e = {0};
    ASSERT(hx_config_write_default(path, &e) == HX_OK);
    hx_config *c = NULL;
    ASSERT(hx_config_load(path, &c, &e) == HX_OK);
    EXPECT_EQ_INT(c->work_start_min, 540);
    EXPECT_EQ_INT(c->n_calendars, 1);
    hx_config_free(c);
    char *text = NULL;
    size_t n;
    ASSERT(hx_read_file(path, 0, &text, &n, NULL) == HX_OK);
    EXPECT(strstr(text, "// Hearth configuration") != NULL);
    EXPECT(strstr(text, "\"working_hours\"") != NULL);
    /* refuses to overwrite, leaving the file as it was */
    FILE *f = fopen(path, "a");
    if (f) fputs("// mine\n", f), fclose(f);
    EXPECT_EQ_INT(hx_config_write_default(path, &e), HX_ERR_STATE);
    EXPECT(strstr(e.msg, "already exists") != NULL);
    char *after = NULL;
    ASSERT(hx_read_file(path, 0, &after, &n, NULL) == HX_OK);
    EXPECT(strstr(after, "// mine") != NULL);
    free(text);
    free(after);
}

/* What the configuration names must be there: each missing folder is one
 * line saying what and how to fix it; a config with all of them, none. */
static void test_check(void)
{
    char root[PATH_MAX + 16], text[4 * PATH_MAX], cmd[2 * PATH_MAX];
    snprintf(root, sizeof root, "%s/chk", dir);
    snprintf(text, sizeof text, "{\"calendars\": [\"%s/cal\", \"%s/f.ics\"], "
             "\"maildir\": \"%s/mail\", \"file_roots\": [\"%s/files\"]}", root, root, root, root);
    const char *p = write_cfg("chk.json", text);
    hx_config *c = NULL;
    hx_err e = {0};
    ASSERT(hx_config_load(p, &c, &e) == HX_OK);
    EXPECT_STR_EQ(c->path, p);
    hx_buf b;
    hx_buf_init(&b);
    EXPECT_EQ_INT(hx_config_check(c, &b), 5); /* 2 calendars, default, Maildir, root */
    EXPECT(strstr(b.data, "calendar_default") && strstr(b.data, "mkdir -p"));
    EXPECT(strstr(b.data, "/mail/cur") && strstr(b.data, "\"file_roots\" in"));
    /* the control: the same configuration with its folders there */
    snprintf(cmd, sizeof cmd, "mkdir -p %s/cal %s/mail/cur %s/mail/new %s/files && touch %s/f.ics",
             root, root, root, root, root);
    ASSERT(system(cmd) == 0);
    b.len = 0;
    EXPECT_EQ_INT(hx_config_check(c, &b), 0);
    hx_config_free(c);
    /* no file at all: one line, run hearth init */
    ASSERT(hx_config_load("/nonexistent/c.json", &c, &e) == HX_OK);
    b.len = 0;
    EXPECT_EQ_INT(hx_config_check(c, &b), 1);
    EXPECT(strstr(b.data, "no configuration at /nonexistent/c.json: run 'hearth init'"));
    hx_config_free(c);
    hx_buf_free(&b);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-config-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_fixture);
    RUN(test_comments_and_paths);
    RUN(test_errors);
    RUN(test_missing_file_gives_defaults);
    RUN(test_write_default);
    RUN(test_check);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("# could not remove %s\n", dir);
    return test_summary();
}
