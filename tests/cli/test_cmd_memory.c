/* test_cmd_memory.c: `hearth memory ...` end to end on a real database:
 * list, search, show, forget, export, vacuum, --json output and the exit
 * codes of bad input. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli/cli.h"
#include "memory/memory.h"
#include "test.h"

static char tmpdir[256], dbpath[512], outpath[512];

/* Runs `hearth memory ARGS... --db DB` with stdout captured; returns the
 * exit code and the output (caller frees) in *out. */
static int run_cli(char **out, const char *a0, const char *a1, const char *a2,
                   const char *a3)
{
    char *argv[10] = {"memory"};
    int argc = 1;
    const char *args[] = {a0, a1, a2, a3};
    for (int i = 0; i < 4 && args[i]; i++) argv[argc++] = (char *)args[i];
    argv[argc++] = "--db";
    argv[argc++] = dbpath;
    fflush(stdout);
    int saved = dup(1);
    int fd = open(outpath, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 1);
    close(fd);
    int rc = hx_cmd_memory(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    size_t n;
    *out = NULL;
    hx_read_file(outpath, 0, out, &n, NULL);
    return rc;
}

static int64_t seed(void)
{
    hx_memory_params p = hx_memory_default_params();
    p.path = dbpath;
    hx_memory *m = NULL;
    if (hx_memory_open(&p, &m, NULL)) return 0;
    hx_mem_new a = {.kind = "person", .text = "Dr Okafor is the dentist"};
    hx_mem_new b = {.kind = "preference", .text = "prefers meetings before noon"};
    int64_t id = 0;
    hx_memory_remember(m, &a, &id, NULL, NULL);
    hx_memory_remember(m, &b, NULL, NULL, NULL);
    hx_episode ep = {0};
    ep.request = "book the dentist for Friday";
    ep.verdict = HX_VERDICT_ACCEPTED;
    hx_memory_episode_add(m, &ep, NULL, NULL);
    hx_memory_close(m);
    return id;
}

static void test_cli(void)
{
    int64_t id = seed();
    ASSERT(id > 0);
    char *out = NULL, ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);

    EXPECT_EQ_INT(run_cli(&out, "list", "--json", NULL, NULL), HX_EXIT_OK);
    cJSON *j = cJSON_Parse(out);
    EXPECT_EQ_INT(cJSON_GetArraySize(j), 2);
    cJSON_Delete(j);
    free(out);

    EXPECT_EQ_INT(run_cli(&out, "search", "who", "is my dentist", "--json"),
                  HX_EXIT_OK);
    j = cJSON_Parse(out);
    ASSERT(cJSON_GetArraySize(j) == 1);
    EXPECT_STR_EQ(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "text")
                      ->valuestring, "Dr Okafor is the dentist");
    cJSON_Delete(j);
    free(out);

    EXPECT_EQ_INT(run_cli(&out, "show", ids, NULL, NULL), HX_EXIT_OK);
    EXPECT(out && strstr(out, "Okafor"));
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "show", "--episode", "1", "--json"),
                  HX_EXIT_OK);
    j = cJSON_Parse(out);
    EXPECT_STR_EQ(cJSON_GetObjectItem(j, "verdict")->valuestring, "accepted");
    cJSON_Delete(j);
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "search", "--episodes", "dentist", NULL),
                  HX_EXIT_OK);
    EXPECT(out && strstr(out, "book the dentist"));
    free(out);

    char exp[600];
    snprintf(exp, sizeof exp, "%s/export.json", tmpdir);
    EXPECT_EQ_INT(run_cli(&out, "export", "-o", exp, NULL), HX_EXIT_OK);
    free(out);
    size_t n;
    char *doc = NULL;
    ASSERT(hx_read_file(exp, 0, &doc, &n, NULL) == HX_OK);
    j = cJSON_Parse(doc);
    EXPECT_STR_EQ(cJSON_GetObjectItem(j, "format")->valuestring,
                  "hearth-memory-export");
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "memories")), 2);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "episodes")), 1);
    cJSON_Delete(j);
    free(doc);

    EXPECT_EQ_INT(run_cli(&out, "forget", ids, NULL, NULL), HX_EXIT_OK);
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "search", "dentist", "--json", NULL),
                  HX_EXIT_OK);
    EXPECT(out && !strstr(out, "Okafor"));
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "vacuum", NULL, NULL, NULL), HX_EXIT_OK);
    EXPECT(out && strstr(out, "integrity ok"));
    free(out);

    /* Bad input has exit codes that mean something. */
    /* a memory that is not there is bad input */
    EXPECT_EQ_INT(run_cli(&out, "show", ids, NULL, NULL), HX_EXIT_INPUT);
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "show", "abc", NULL, NULL), HX_EXIT_USAGE);
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "bogus", NULL, NULL, NULL), HX_EXIT_USAGE);
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "list", "--limit", "0", NULL), HX_EXIT_USAGE);
    free(out);
    EXPECT_EQ_INT(run_cli(&out, "--help", NULL, NULL, NULL), HX_EXIT_OK);
    EXPECT(out && strstr(out, "forget"));
    free(out);
    ASSERT(hx_write_file_atomic(dbpath, "not a database", 14, NULL) == HX_OK);
    EXPECT_EQ_INT(run_cli(&out, "list", NULL, NULL, NULL), HX_EXIT_INPUT);
    free(out);
    char *after = NULL;
    ASSERT(hx_read_file(dbpath, 0, &after, &n, NULL) == HX_OK);
    EXPECT(n == 14 && !memcmp(after, "not a database", 14));
    free(after);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx_cmdmem_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(dbpath, sizeof dbpath, "%s/memory.db", tmpdir);
    snprintf(outpath, sizeof outpath, "%s/out.txt", tmpdir);
    RUN(test_cli);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return test_summary();
}
