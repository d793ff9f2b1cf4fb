/* test_cmd_power.c: the governor on the command line: `hearth info` shows
 * the power state and the decision for a fake sysfs tree (HEARTH_SYSFS),
 * and the config.json "governor" policy (thresholds, off, bad values). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "agent/cli.h"
#include "engine/engine.h"
#include "test.h"

static char tmpdir[256];

static void put(const char *rel, const char *text)
{
    char path[600], dir[600];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    hx_err err = {0};
    if (hx_mkdirs(dir, &err) || hx_write_file_atomic(path, text, strlen(text), &err))
        printf("     cannot write %s: %s\n", path, err.msg);
}

/* A fake tree: sys/ with battery BAT0 (cap, status) unless cap is NULL. */
static void tree(const char *cap, const char *status)
{
    char cmd[400], sys[300], proc[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/sys' '%s/proc'", tmpdir, tmpdir);
    if (system(cmd)) printf("     rm failed\n");
    put("proc/loadavg", "0.00 0.00 0.00 1/1 1\n");
    put("sys/class/.keep", "");
    if (cap) {
        put("sys/class/power_supply/BAT0/type", "Battery\n");
        put("sys/class/power_supply/BAT0/capacity", cap);
        put("sys/class/power_supply/BAT0/status", status);
    }
    snprintf(sys, sizeof sys, "%s/sys", tmpdir);
    snprintf(proc, sizeof proc, "%s/proc", tmpdir);
    setenv("HEARTH_SYSFS", sys, 1);
    setenv("HEARTH_PROCFS", proc, 1);
}

/* Runs a verb with stdout and stderr captured into *out and *err_out. */
static int run_verb(int (*fn)(int, char **), char **argv, char **out, char **err_out)
{
    char path[512], errpath[512];
    snprintf(path, sizeof path, "%s/out", tmpdir);
    snprintf(errpath, sizeof errpath, "%s/err", tmpdir);
    int argc = 0;
    while (argv[argc]) argc++;
    fflush(stdout);
    fflush(stderr);
    int save1 = dup(1), save2 = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int efd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(efd, 2);
    int rc = fn(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(save1, 1);
    dup2(save2, 2);
    close(fd);
    close(efd);
    close(save1);
    close(save2);
    size_t len;
    hx_err err;
    if (hx_read_file(path, 0, out, &len, &err)) *out = NULL;
    if (hx_read_file(errpath, 0, err_out, &len, &err)) *err_out = NULL;
    return rc;
}

static void test_info_shows_power(void)
{
    char model[1024];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", hx_shared_data_dir());
    if (access(model, R_OK)) SKIP("%s not found", model);
    char *argv[] = {"info", "-m", model, NULL}, *out = NULL, *err = NULL;
    tree("5\n", "Discharging\n");
    EXPECT_EQ_INT(run_verb(cmd_info, argv, &out, &err), HX_EXIT_OK);
    ASSERT(out);
    EXPECT(strstr(out, "power          critical (battery 5% discharging, no thermal zones)"));
    EXPECT(strstr(out, "governor       1 threads, context at most 1024; nightly job waits"));
    free(out), free(err);
    tree(NULL, NULL); /* a desktop */
    EXPECT_EQ_INT(run_verb(cmd_info, argv, &out, &err), HX_EXIT_OK);
    ASSERT(out);
    EXPECT(strstr(out, "power          normal (no battery, no thermal zones)"));
    EXPECT(strstr(out, "no context cap; nightly job may run"));
    free(out), free(err);
    tree("abc\n", "Discharging\n"); /* malformed: named on stderr, no crash */
    EXPECT_EQ_INT(run_verb(cmd_info, argv, &out, &err), HX_EXIT_OK);
    EXPECT(err && strstr(err, "BAT0/capacity: not a number in range"));
    free(out), free(err);
}

/* cli_governor on a config text (the "governor" object's JSON). */
static hx_gov_decision decide(const char *json, char **err)
{
    cJSON *cfg = json ? cJSON_Parse(json) : NULL;
    hx_gov_decision d;
    char path[512];
    snprintf(path, sizeof path, "%s/err", tmpdir);
    fflush(stderr);
    int save = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    cli_governor(cfg, &d, NULL);
    fflush(stderr);
    dup2(save, 2);
    close(fd);
    close(save);
    size_t len;
    hx_err e;
    if (hx_read_file(path, 0, err, &len, &e)) *err = NULL;
    cJSON_Delete(cfg);
    return d;
}

static void test_config_policy(void)
{
    char *err = NULL;
    tree("40\n", "Discharging\n");
    hx_gov_decision d = decide(NULL, &err);
    EXPECT_EQ_INT(d.level, HX_GOV_NORMAL);
    free(err);
    d = decide("{\"low_battery\": 50, \"saving_ctx\": 512}", &err);
    EXPECT_EQ_INT(d.level, HX_GOV_SAVING);
    EXPECT_EQ_INT(d.ctx_cap, 512);
    EXPECT(err && !err[0]);
    free(err);
    d = decide("{\"enabled\": false, \"low_battery\": 50}", &err);
    EXPECT_EQ_INT(d.level, HX_GOV_NORMAL);
    EXPECT(strstr(d.why, "governor off"));
    free(err);
    d = decide("{\"low_battery\": \"lots\", \"critical_battery\": 400}", &err);
    EXPECT_EQ_INT(d.level, HX_GOV_NORMAL); /* defaults kept: 20 and 10 */
    EXPECT(err && strstr(err, "governor.low_battery must be a number"));
    EXPECT(err && strstr(err, "governor.critical_battery must be a number"));
    free(err);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hearth_test_cmd_power_%d", (int)getpid());
    hx_err e = {0};
    if (hx_mkdirs(tmpdir, &e)) return 1;
    RUN(test_info_shows_power);
    RUN(test_config_policy);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("cleanup failed\n");
    return test_summary();
}
