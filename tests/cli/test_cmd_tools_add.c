/* test_cmd_tools_add.c: `hearth tools add` and `hearth tools list` through
 * the binary: a manifest is validated (fields, command, a schema the
 * grammar can use) before it is installed, and a broken one in tools.d is
 * reported without taking the other tools down. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "test.h"

static char home[PATH_MAX], hearth[PATH_MAX], out[PATH_MAX + 16];

/* Runs hearth with args; output in out; returns the exit code. */
static int run(const char *args)
{
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "HEARTH_HOME='%s' '%s' %s >'%s' 2>&1", home, hearth, args, out);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int out_has(const char *s)
{
    char *text;
    size_t n;
    hx_err e;
    if (hx_read_file(out, 0, &text, &n, &e)) return 0;
    int has = strstr(text, s) != NULL;
    free(text);
    return has;
}

static void write_file(const char *name, const char *text)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", home, name);
    FILE *f = fopen(p, "w");
    if (f) fputs(text, f), fclose(f);
}

static void test_add_validates_and_installs(void)
{
    write_file("good.json", "{\"name\":\"demo.echo\",\"description\":\"echo\",\"effect\":\"read\","
                            "\"input_schema\":{\"type\":\"object\",\"properties\":{\"x\":"
                            "{\"type\":\"string\"}}},\"command\":[\"/bin/cat\"]}");
    char args[PATH_MAX + 64];
    snprintf(args, sizeof args, "tools add '%s/good.json'", home);
    EXPECT_EQ_INT(run(args), 0);
    EXPECT(out_has("installed demo.echo"));
    EXPECT(run(args) != 0);
    EXPECT(out_has("already installed"));
    snprintf(args, sizeof args, "tools add '%s/good.json' --replace", home);
    EXPECT_EQ_INT(run(args), 0);
    EXPECT_EQ_INT(run("tools call demo.echo '{\"x\":\"hi\"}'"), 0);
    EXPECT(out_has("\"hi\""));
}

static void test_add_refuses_bad_manifests(void)
{
    char args[PATH_MAX + 64];
    write_file("bad-schema.json", "{\"name\":\"demo.bad\",\"description\":\"d\",\"effect\":\"read\","
                                  "\"input_schema\":{\"type\":\"object\",\"properties\":{\"x\":"
                                  "{\"not\":{\"type\":\"string\"}}}},\"command\":[\"/bin/true\"]}");
    snprintf(args, sizeof args, "tools add '%s/bad-schema.json'", home);
    EXPECT_EQ_INT(run(args), 3);
    EXPECT(out_has("\"not\""));
    write_file("broken.json", "{\"name\": ");
    snprintf(args, sizeof args, "tools add '%s/broken.json'", home);
    EXPECT_EQ_INT(run(args), 3);
    EXPECT(out_has("not valid JSON"));
    write_file("noeffect.json", "{\"name\":\"demo.x\",\"description\":\"d\",\"input_schema\":"
                                "{\"type\":\"object\"},\"command\":[\"/bin/true\"]}");
    snprintf(args, sizeof args, "tools add '%s/noeffect.json'", home);
    EXPECT_EQ_INT(run(args), 3);
    EXPECT(out_has("effect"));
}

static void test_list_survives_a_broken_registration(void)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/config/tools.d/zz-broken.json", home);
    FILE *f = fopen(p, "w");
    ASSERT(f);
    fputs("{ this is not json", f);
    fclose(f);
    EXPECT_EQ_INT(run("tools list"), 0);
    EXPECT(out_has("zz-broken.json"));   /* reported */
    EXPECT(out_has("demo.echo"));        /* the others still load */
    EXPECT(out_has("calendar.find_slots"));
    EXPECT(out_has("run confined"));
    EXPECT(out_has("mntns"));
    /* every path a registered tool gets: its command file, and the system's */
    char *cat = realpath("/bin/cat", NULL), line[PATH_MAX + 8];
    snprintf(line, sizeof line, "runs %s", cat ? cat : "/bin/cat");
    free(cat);
    EXPECT(out_has(line));
    EXPECT(out_has("each also reads /usr"));
}

int main(void)
{
    const char *b = getenv("HEARTH_BUILD");
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/hearth", b && *b ? b : "build");
    if (!realpath(rel, hearth)) {
        printf("skip all: %s not built\n", rel);
        return test_summary();
    }
    snprintf(home, sizeof home, "/tmp/hx-toolsadd-XXXXXX");
    if (!mkdtemp(home)) return 1;
    snprintf(out, sizeof out, "%s/out.txt", home);
    RUN(test_add_validates_and_installs);
    RUN(test_add_refuses_bad_manifests);
    RUN(test_list_survives_a_broken_registration);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", home);
    if (system(cmd)) return 1;
    return test_summary();
}
