/* test_cli.c: the `hearth` command line as a new user meets it (the built
 * binary): every verb's --help, a table of bad invocations against their
 * documented exit codes, a fresh home through init, doctor and ask, the
 * refused write that ask reports, and the README's tool guide as written. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "test.h"
#include "base/base.h"

static char g_hearth[PATH_MAX], g_model[PATH_MAX], g_dir[64];
static char g_out[1 << 16], g_err[1 << 16];

static void slurp(const char *path, char *buf, size_t n)
{
    char *s = NULL;
    size_t len = 0;
    buf[0] = 0;
    if (hx_read_file(path, n - 1, &s, &len, NULL)) return;
    memcpy(buf, s, len + 1);
    free(s);
}

/* Runs `hearth ARGS` (a shell fragment) with HEARTH_HOME=dir/home and
 * HOME=dir/user, stdin from /dev/null; stdout and stderr into g_out and
 * g_err; returns the exit code. */
static int hearth(const char *args)
{
    static char cmd[1 << 16];
    char o[128], e[128];
    snprintf(o, sizeof o, "%s/stdout", g_dir);
    snprintf(e, sizeof e, "%s/stderr", g_dir);
    snprintf(cmd, sizeof cmd, "HEARTH_HOME='%s/home' HOME='%s/user' '%s' %s </dev/null >'%s' 2>'%s'",
             g_dir, g_dir, g_hearth, args, o, e);
    int rc = system(cmd);
    slurp(o, g_out, sizeof g_out);
    slurp(e, g_err, sizeof g_err);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd)) printf("# failed: %s\n", cmd);
}

static int setup(void)
{
    const char *b = getenv("HEARTH_BUILD");
    char rel[400];
    snprintf(rel, sizeof rel, "%s/hearth", b && *b ? b : "build");
    if (!realpath(rel, g_hearth) || access(g_hearth, X_OK)) {
        test_skip("%s not built", rel);
        return 0;
    }
    if (!realpath("models/hearth-tiny.gguf", g_model)) g_model[0] = 0;
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_cli_XXXXXX");
    if (!mkdtemp(g_dir)) return 0;
    chmod(g_dir, 0755); /* registered tools run as nobody when the tests run as root */
    sh("mkdir -p %s/user", g_dir);
    return 1;
}

/* A fresh home each: nothing from the test before. */
static void fresh_home(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s/home %s/user && mkdir -p %s/user", g_dir, g_dir, g_dir);
    if (system(cmd)) printf("# failed: %s\n", cmd);
}

/* Every verb `hearth --help` lists, and the subcommands, answer --help on
 * stdout with exit 0 and nothing on stderr. */
static void test_help_every_verb(void)
{
    static const char *const subs[] = {"memory list", "memory audit", "tools add", "tools remove",
                                       "lora show", "lora train", "model diff", "vocab train"};
    char verbs[4096], args[256];
    ASSERT(hearth("--help") == 0);
    snprintf(verbs, sizeof verbs, "%s", g_out);
    int n = 0;
    for (char *l = strstr(verbs, "verbs:\n"); l && (l = strchr(l, '\n')) && l[1] == ' '; l++) {
        char name[32];
        if (sscanf(l + 1, " %31s", name) != 1) break;
        snprintf(args, sizeof args, "%s --help", name);
        int rc = hearth(args);
        if (rc != 0 || !g_out[0] || g_err[0])
            printf("# %s: exit %d, stdout %zu bytes, stderr '%.100s'\n", args, rc,
                   strlen(g_out), g_err);
        EXPECT(rc == 0 && g_out[0] && !g_err[0]);
        n++;
    }
    EXPECT(n >= 19); /* doctor and init among them */
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
        snprintf(args, sizeof args, "%s --help", subs[i]);
        EXPECT_EQ_INT(hearth(args), 0);
        EXPECT(strstr(g_out, "usage") && !g_err[0]);
    }
}

/* Bad invocations and their documented exit codes (0 ok, 1 failure, 2 bad
 * command line, 3 bad input, 4 denied), each with the one line it says. */
static void test_exit_codes(void)
{
    fresh_home();
    sh("printf 'not a model' > %s/notgguf.gguf", g_dir);
    static const struct {
        const char *args;
        int want;
        const char *says, *never;
    } cases[] = {
        {"frob", 2, "unknown verb 'frob'", NULL},
        {"ask", 2, "usage: hearth ask TEXT", NULL},
        {"ask hi --max-steps abc", 2, "--max-steps: 'abc' is not an integer", "unknown option"},
        {"chat --temp hot", 2, "--temp: 'hot' is not a number", "unknown option"},
        {"ask hi --frob", 2, "unknown option '--frob'", NULL},
        {"init --frob", 2, "unknown option '--frob'", NULL},
        {"tools frob", 2, "unknown command 'frob'", "usage:"},
        {"model frob", 2, "unknown command 'frob'", "usage:"},
        {"lora bogus", 2, "unknown command 'bogus'", "usage:"},
        {"nightly --frob", 2, "unknown option '--frob'", "usage:"},
        {"nightly --steps abc", 2, "--steps: 'abc' is not an integer", "unknown option"},
        {"train --frob", 2, "unknown option '--frob'", "usage:"},
        {"feedback --accept --reject", 2, "not several", NULL},
        {"tools call no.such.tool '{}'", 2, "no.such.tool", NULL},
        {"info -m /nonexistent.gguf", 3, "/nonexistent.gguf", NULL},
        {"generate -m /nonexistent.gguf -p x", 3, "/nonexistent.gguf", NULL},
        {"tools call calendar.list_events '{bad'", 3, "not valid JSON", NULL},
        {"lora use /nonexistent.gguf", 3, "/nonexistent.gguf: no such file", "no stored adapter"},
        {"tools remove nothing.here", 3, "no registered tool named 'nothing.here'", NULL},
        {"ask 'What is on my calendar tomorrow?'", 3, "no configuration at", NULL},
        {"doctor", 1, NULL, NULL},
        {"memory search zzzqqq", 0, NULL, NULL},
        {"version", 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = hearth(cases[i].args);
        int said = !cases[i].says || strstr(g_err, cases[i].says);
        int clean = !cases[i].never || !strstr(g_err, cases[i].never);
        if (rc != cases[i].want || !said || !clean)
            printf("# hearth %s: exit %d (want %d), stderr '%.300s'\n", cases[i].args, rc,
                   cases[i].want, g_err);
        EXPECT(rc == cases[i].want && said && clean);
    }
    EXPECT_EQ_INT(hearth("memory search zzzqqq"), 0);
    EXPECT(strstr(g_out, "no memory matches 'zzzqqq'") != NULL);
    char args[256];
    snprintf(args, sizeof args, "info -m %s/notgguf.gguf", g_dir);
    EXPECT_EQ_INT(hearth(args), 3);
    EXPECT(strstr(g_err, "not a GGUF file") != NULL);
}

/* A delta for another base is bad input (3); the control: its own base. */
static void test_delta_other_base(void)
{
    char args[1024];
    for (int seed = 1; seed <= 3; seed++) {
        snprintf(args, sizeof args, "mkmodel -o %s/m%d.gguf --layers 1 --embd 32 --heads 2 "
                 "--heads-kv 1 --head-dim 16 --ff 64 --n-vocab 64 --seed %d", g_dir, seed, seed);
        ASSERT(hearth(args) == 0);
    }
    const char *d = g_dir;
    snprintf(args, sizeof args, "model diff %s/m1.gguf %s/m2.gguf -o %s/d --json", d, d, d);
    EXPECT_EQ_INT(hearth(args), 0);
    cJSON *j = cJSON_Parse(g_out);
    EXPECT(cJSON_GetObjectItem(j, "changed") != NULL);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "model patch %s/m3.gguf %s/d -o %s/x.gguf", d, d, d);
    EXPECT_EQ_INT(hearth(args), 3);
    EXPECT(strstr(g_err, "another base model") != NULL);
    snprintf(args, sizeof args, "model patch %s/m1.gguf %s/d -o %s/x.gguf", d, d, d);
    EXPECT_EQ_INT(hearth(args), 0);
}

/* With no configuration, ask answers nothing: it says what is missing
 * and how to fix it (exit 3). init sets the home up, doctor finds it
 * well; a calendar folder removed afterwards is named, never answered
 * around. */
static void test_fresh_home(void)
{
    fresh_home();
    EXPECT_EQ_INT(hearth("ask 'What is on my calendar tomorrow?'"), 3);
    EXPECT(strstr(g_err, "no configuration at") && strstr(g_err, "hearth init"));
    EXPECT_STR_EQ(g_out, "");
    EXPECT_EQ_INT(hearth("doctor"), 1);
    EXPECT(strstr(g_out, "fail  config") != NULL);
    EXPECT_EQ_INT(hearth("init --name 'Sam Lee' --email sam@example.org --timezone Mars/Base"), 3);
    EXPECT(strstr(g_err, "unknown time zone 'Mars/Base'") != NULL);
    EXPECT_EQ_INT(hearth("init --name 'Sam Lee' --email sam@example.org --timezone Europe/Paris "
                         "--files \"$HOME/NoSuchFolder\""), 3);
    EXPECT(strstr(g_err, "NoSuchFolder is not a folder") != NULL);
    EXPECT_EQ_INT(hearth("init --name 'Sam Lee' --email sam@example.org --timezone Europe/Paris"), 0);
    EXPECT(strstr(g_out, "created calendar folder") && strstr(g_out, "created Maildir"));
    EXPECT_EQ_INT(hearth("init"), 1);
    EXPECT(strstr(g_err, "already exists") != NULL);
    if (!g_model[0]) SKIP("models/hearth-tiny.gguf is not here");
    char args[PATH_MAX + 200];
    snprintf(args, sizeof args, "doctor --json -m '%s'", g_model);
    EXPECT_EQ_INT(hearth(args), 0);
    cJSON *j = cJSON_Parse(g_out);
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
    cJSON_Delete(j);
    sh("rm -rf %s/home/data/calendars/personal", g_dir);
    snprintf(args, sizeof args, "ask 'What is on my calendar tomorrow?' -m '%s'", g_model);
    EXPECT_EQ_INT(hearth(args), 3);
    EXPECT(strstr(g_err, "calendar") && strstr(g_err, "does not exist") && strstr(g_err, "mkdir -p"));
    EXPECT_STR_EQ(g_out, "");
    EXPECT_EQ_INT(hearth("doctor"), 1);
    EXPECT(strstr(g_out, "personal does not exist") != NULL);
    /* the control: with the folder there, the same request is answered */
    sh("mkdir -p %s/home/data/calendars/personal", g_dir);
    EXPECT_EQ_INT(hearth(args), 0);
    EXPECT(strstr(g_err, "-> calendar.") != NULL);
}

/* A write the request needed and the policy refused (no terminal to ask)
 * is said after the answer, truthfully, and exits 4; nothing is written.
 * The control: --yes lets the same call write the event, exit 0. */
static void test_refused_write_is_said(void)
{
    if (!g_model[0]) SKIP("models/hearth-tiny.gguf is not here");
    fresh_home();
    ASSERT(hearth("init --name 'Sam Lee' --email sam@example.org --timezone Europe/Paris") == 0);
    char args[PATH_MAX + 400];
    snprintf(args, sizeof args, "ask 'Add a dentist appointment tomorrow at 10:00' -m '%s' "
             "--max-steps 2", g_model);
    EXPECT_EQ_INT(hearth(args), 4);
    EXPECT(strstr(g_err, "hearth: not ") && strstr(g_err, "calendar.create_event") &&
           strstr(g_err, "no terminal to ask; rerun in a terminal or with --yes"));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s/home/data/calendars/personal)\"", g_dir);
    EXPECT(system(cmd) == 0);
    strcat(args, " --yes");
    EXPECT_EQ_INT(hearth(args), 0);
    EXPECT(strstr(g_err, "hearth: not ") == NULL);
    snprintf(cmd, sizeof cmd, "ls %s/home/data/calendars/personal | grep -q ics", g_dir);
    EXPECT(system(cmd) == 0);
}

/* A request longer than the context names the real limit (the context
 * size, also under --max-memory: the KV cache spills past what memory
 * holds, so a request longer than that is decoded); a JSON value cut by
 * the token budget is no success. */
static void test_limits_told_truly(void)
{
    if (!g_model[0]) SKIP("models/hearth-tiny.gguf is not here");
    fresh_home();
    ASSERT(hearth("init --timezone Europe/Paris") == 0);
    char args[PATH_MAX + 20000];
    int n = snprintf(args, sizeof args, "ask -m '%s' '", g_model);
    for (int i = 0; i < 3000; i++) n += snprintf(args + n, sizeof args - (size_t)n, "word ");
    snprintf(args + n, sizeof args - (size_t)n, "'");
    EXPECT_EQ_INT(hearth(args), 1);
    EXPECT(strstr(g_err, "request too long: ") && strstr(g_err, "limit 2048 (the context size)"));
    strcat(args, " --max-memory 17M");
    EXPECT_EQ_INT(hearth(args), 1);
    EXPECT(strstr(g_err, "request too long: ") && strstr(g_err, "limit 2048 (the context size)"));
    /* 15M keeps 576 positions in memory; a prompt of some 900 is decoded
     * (the rest spilled), and the run answers or ends at its token budget */
    n = snprintf(args, sizeof args, "ask -m '%s' --max-memory 15M --max-tokens 20 '", g_model);
    for (int i = 0; i < 600; i++) n += snprintf(args + n, sizeof args - (size_t)n, "word ");
    snprintf(args + n, sizeof args - (size_t)n, "'");
    const int rc = hearth(args);
    EXPECT(rc == 0 || (rc == 1 && strstr(g_err, "budget of 20 generated tokens")));
    EXPECT(!strstr(g_err, "too long") && !strstr(g_err, "context"));
    sh("echo '{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
       "\"required\":[\"name\"]}' > %s/schema.json", g_dir);
    snprintf(args, sizeof args, "generate -m '%s' -p 'JSON:' --temp 0 -n 4 --json-schema "
             "%s/schema.json", g_model, g_dir);
    EXPECT_EQ_INT(hearth(args), 1);
    EXPECT(strstr(g_err, "ran out inside the JSON value") != NULL);
}

/* The README's tool guide, as written, on a fresh home and $HOME. */
static void test_readme_tool_guide(void)
{
    fresh_home();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "awk '/^Install and try it/{f=1} f&&/^```$/{c++; if(c==2) exit; "
             "next} f&&c==1{print}' README.md > %s/guide.sh", g_dir);
    ASSERT(system(cmd) == 0);
    char bin[PATH_MAX];
    snprintf(bin, sizeof bin, "%s", g_hearth);
    *strrchr(bin, '/') = 0;
    snprintf(cmd, sizeof cmd, "PATH='%s':\"$PATH\" sh -e %s/guide.sh", bin, g_dir);
    char full[4096];
    snprintf(full, sizeof full, "HEARTH_HOME='%s/home' HOME='%s/user' %s >%s/guide.out 2>&1",
             g_dir, g_dir, cmd, g_dir);
    int rc = system(full);
    char path[128];
    snprintf(path, sizeof path, "%s/guide.out", g_dir);
    slurp(path, g_out, sizeof g_out);
    if (rc) printf("# guide:\n%s\n", g_out);
    EXPECT_EQ_INT(rc, 0);
    EXPECT(strstr(g_out, "installed notes.search") && strstr(g_out, "\"line\":") &&
           strstr(g_out, "removed notes.search"));
    /* a name that is taken is refused at add time */
    EXPECT_EQ_INT(hearth("tools add examples/tools/notes_search.json"), 0);
    sh("sed 's/\"notes.search\"/\"calendar.list_events\"/' examples/tools/notes_search.json > "
       "%s/clash.json", g_dir);
    snprintf(cmd, sizeof cmd, "tools add %s/clash.json", g_dir);
    EXPECT_EQ_INT(hearth(cmd), 3);
    EXPECT(strstr(g_err, "taken by Hearth's own tool calendar.list_events") != NULL);
    EXPECT_EQ_INT(hearth("tools remove notes.search"), 0);
}

int main(void)
{
    if (!setup()) return test_summary();
    RUN(test_help_every_verb);
    RUN(test_exit_codes);
    RUN(test_delta_other_base);
    RUN(test_fresh_home);
    RUN(test_refused_write_is_said);
    RUN(test_limits_told_truly);
    RUN(test_readme_tool_guide);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) printf("# could not remove %s\n", g_dir);
    return test_summary();
}
