/* test_cmd_tools.c: `hearth tools list [--json]`, `hearth tools call` and
 * `hearth init` run in-process: output, errors on stderr, exit codes. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "cli/cli.h"
#include "memory/memory.h"
#include "test.h"
#include "tools/tools.h"

static char dir[PATH_MAX], out[1 << 16], errtext[4096];

/* Runs fn(argv) with stdout and stderr captured into out and errtext. */
static int run(int (*fn)(int, char **), const char *const *args)
{
    char *argv[16];
    int argc = 0;
    for (; args[argc] && argc < 15; argc++) argv[argc] = (char *)args[argc];
    argv[argc] = NULL;
    char po[PATH_MAX + 16], pe[PATH_MAX + 16];
    snprintf(po, sizeof po, "%s/out", dir);
    snprintf(pe, sizeof pe, "%s/err", dir);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = fn(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so), close(se), close(fo), close(fe);
    FILE *f = fopen(po, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    f = fopen(pe, "r");
    n = f ? fread(errtext, 1, sizeof errtext - 1, f) : 0;
    errtext[n] = 0;
    if (f) fclose(f);
    return rc;
}

#define CFG "tests/fixtures/world/config.json"

static void test_list(void)
{
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "list", "--config", CFG, NULL}), 0);
    EXPECT(strstr(out, "calendar.find_slots") != NULL);
    EXPECT(strstr(out, "calendar.create_event    send") != NULL);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "list", "--json", "--config", CFG, NULL}), 0);
    cJSON *l = cJSON_Parse(out);
    ASSERT(cJSON_IsArray(l));
    EXPECT(cJSON_GetArraySize(l) >= 6);
    cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(l, 0), "function");
    EXPECT(cJSON_IsObject(cJSON_GetObjectItem(fn, "parameters")));
    cJSON_Delete(l);
}

static void test_call(void)
{
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "calendar.list_events",
                                                  "{\"range\":\"tomorrow\"}", "--config", CFG, NULL}),
                  0);
    cJSON *r = cJSON_Parse(out);
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "events")), 5);
    cJSON_Delete(r);
    /* bad arguments: message on stderr, exit 2, nothing on stdout */
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "calendar.find_slots",
                                                  "{\"range\":\"tomorrow\"}", "--config", CFG, NULL}),
                  HX_EXIT_USAGE);
    EXPECT(strstr(errtext, "missing required argument 'duration_minutes'") != NULL);
    EXPECT_STR_EQ(out, "");
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "calendar.list_events",
                                                  "{\"range\":\"next blursday\"}", "--config", CFG, NULL}),
                  HX_EXIT_INPUT);
    EXPECT(strstr(errtext, "'blursday'") != NULL);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "no.such", "{}", "--config", CFG, NULL}),
                  HX_EXIT_USAGE);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "calendar.list_events", "{oops",
                                                  "--config", CFG, NULL}),
                  HX_EXIT_INPUT);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "frobnicate", NULL}), HX_EXIT_USAGE);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "--help", NULL}), 0);
    EXPECT(strstr(out, "usage: hearth tools") != NULL);
}

/* Lines of path holding a and b. */
static int lines_with(const char *path, const char *a, const char *b)
{
    char *s = NULL;
    size_t n;
    int c = 0;
    if (hx_read_file(path, 0, &s, &n, NULL)) return 0;
    for (char *l = strtok(s, "\n"); l; l = strtok(NULL, "\n")) c += strstr(l, a) && strstr(l, b);
    free(s);
    return c;
}

static int outbox_files(const char *world)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "exit $(ls -A '%s/outbox/new' 2>/dev/null | wc -l)", world);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* `hearth tools call` goes through the assistant's policy and audit
 * trail: without a terminal, a send the policy asks about is refused
 * (exit 4, nothing queued, a "refused" record in the log and in memory);
 * --yes answers it (the control: queued, an "ok" record); --no refuses
 * even what --yes would allow; a policy that denies sends wins over --yes. */
static void test_call_policy(void)
{
    char home[PATH_MAX + 16], world[PATH_MAX + 32], cfg[PATH_MAX + 64], audit[PATH_MAX + 64];
    char cmd[2 * PATH_MAX + 64];
    snprintf(home, sizeof home, "%s/policy", dir);
    snprintf(world, sizeof world, "%s/world", home);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r tests/fixtures/world '%s'", home, world);
    ASSERT(system(cmd) == 0);
    snprintf(cfg, sizeof cfg, "%s/config.json", world);
    snprintf(audit, sizeof audit, "%s/data/audit.jsonl", home);
    setenv("HEARTH_HOME", home, 1);
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    const char *send = "{\"to\": \"bob@example.org\", \"subject\": \"Budget\", \"body\": \"Notes.\"}";
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "mail.send", send, "--config", cfg, NULL}),
                  HX_EXIT_DENIED);
    EXPECT(strstr(errtext, "refused") && strstr(errtext, "no terminal"));
    EXPECT_STR_EQ(out, "");
    EXPECT_EQ_INT(outbox_files(world), 0);
    EXPECT_EQ_INT(lines_with(audit, "\"mail.send\"", "\"refused\""), 1);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "mail.send", send, "--yes", "--config",
                                                  cfg, NULL}),
                  HX_EXIT_OK);
    EXPECT(strstr(out, "queued") != NULL);
    EXPECT_EQ_INT(outbox_files(world), 1);
    EXPECT_EQ_INT(lines_with(audit, "\"mail.send\"", "\"--yes\""), 1);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "calendar.create_event",
                                                  "{\"title\": \"Focus\", \"start\": \"tomorrow at 8am\"}",
                                                  "--no", "--config", cfg, NULL}),
                  HX_EXIT_DENIED);
    EXPECT(strstr(errtext, "--no") != NULL);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "mail.send", send, "--yes", "--no",
                                                  "--config", cfg, NULL}),
                  HX_EXIT_USAGE);
    /* the same trail in the memory database (hearth memory audit) */
    hx_memory *m = NULL;
    hx_memory_params mp = hx_memory_default_params();
    char *trail = NULL;
    ASSERT(hx_memory_open(&mp, &m, NULL) == HX_OK);
    ASSERT(hx_memory_audit_json(m, 10, &trail, NULL) == HX_OK);
    EXPECT(strstr(trail, "calendar.create_event") && strstr(trail, "refused"));
    free(trail);
    hx_memory_close(m);
    /* a policy that denies sends: --yes does not answer a denial */
    char *text = NULL;
    size_t n;
    ASSERT(hx_read_file(cfg, 0, &text, &n, NULL) == HX_OK);
    char *brace = strrchr(text, '}');
    ASSERT(brace);
    *brace = 0;
    FILE *f = fopen(cfg, "w");
    ASSERT(f);
    fprintf(f, "%s, \"policy\": {\"send\": \"deny\"}}\n", text);
    fclose(f);
    free(text);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "call", "mail.send", send, "--yes", "--config",
                                                  cfg, NULL}),
                  HX_EXIT_DENIED);
    EXPECT_EQ_INT(outbox_files(world), 1);
}

static void test_bad_config(void)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/bad.json", dir);
    FILE *f = fopen(p, "w");
    if (f) fputs("{\"timezone\": \"Nowhere/City\"}", f), fclose(f);
    EXPECT_EQ_INT(run(hx_cmd_tools, (const char *[]){"tools", "list", "--config", p, NULL}), HX_EXIT_INPUT);
    EXPECT(strstr(errtext, "'timezone'") != NULL);
}

static void test_init(void)
{
    char home[PATH_MAX + 16], p[PATH_MAX + 64];
    snprintf(home, sizeof home, "%s/home", dir);
    setenv("HEARTH_HOME", home, 1);
    EXPECT_EQ_INT(run(hx_cmd_init, (const char *[]){"init", NULL}), 0);
    snprintf(p, sizeof p, "%s/config/config.json", home);
    EXPECT(strstr(out, p) != NULL);
    EXPECT(access(p, R_OK) == 0);
    hx_config *c = NULL;
    hx_err e;
    EXPECT_EQ_INT(hx_config_load(NULL, &c, &e), HX_OK);
    hx_config_free(c);
    /* a second init refuses */
    EXPECT_EQ_INT(run(hx_cmd_init, (const char *[]){"init", NULL}), HX_EXIT_FAIL);
    EXPECT(strstr(errtext, "already exists") != NULL);
    EXPECT_EQ_INT(run(hx_cmd_init, (const char *[]){"init", "extra", NULL}), HX_EXIT_USAGE);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-cmdtools-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    /* calls write their audit records under the data directory */
    char home[PATH_MAX + 16];
    snprintf(home, sizeof home, "%s/home0", dir);
    setenv("HEARTH_HOME", home, 1);
    RUN(test_list);
    RUN(test_call);
    RUN(test_call_policy);
    RUN(test_bad_config);
    RUN(test_init);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("# could not remove %s\n", dir);
    return test_summary();
}
