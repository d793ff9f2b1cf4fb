/* test_cmd_power.c: the governor on the command line: `hearth info` shows
 * the power state and the decision for a fake sysfs tree (HEARTH_SYSFS),
 * the config.json "governor" policy (thresholds, off, bad values), and
 * `hearth ask` switching to the configured small model. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
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
    EXPECT_EQ_INT(run_verb(hx_cmd_info, argv, &out, &err), HX_EXIT_OK);
    ASSERT(out);
    EXPECT(strstr(out, "power          critical (battery 5% discharging, no thermal zones)"));
    EXPECT(strstr(out, "governor       1 threads, context at most 1024; nightly job waits"));
    free(out), free(err);
    tree(NULL, NULL); /* a desktop */
    EXPECT_EQ_INT(run_verb(hx_cmd_info, argv, &out, &err), HX_EXIT_OK);
    ASSERT(out);
    EXPECT(strstr(out, "power          normal (no battery, no thermal zones)"));
    EXPECT(strstr(out, "no context cap; nightly job may run"));
    free(out), free(err);
    tree("abc\n", "Discharging\n"); /* malformed: named on stderr, no crash */
    EXPECT_EQ_INT(run_verb(hx_cmd_info, argv, &out, &err), HX_EXIT_OK);
    EXPECT(err && strstr(err, "BAT0/capacity: not a number in range"));
    free(out), free(err);
}

/* hx_cli_governor on a config text (the "governor" object's JSON). */
static hx_gov_decision decide(const char *json, char **err)
{
    cJSON *cfg = json ? cJSON_Parse(json) : NULL;
    hx_gov_decision d;
    char path[512];
    snprintf(path, sizeof path, "%s/err", tmpdir);
    fflush(stderr);
    int save = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    hx_cli_governor(cfg, &d, NULL);
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

/* The child's stdout and stderr so far (caller frees). */
static void read_outputs(char **out, char **err_out)
{
    char path[512];
    size_t len;
    hx_err err;
    snprintf(path, sizeof path, "%s/out", tmpdir);
    if (hx_read_file(path, 0, out, &len, &err)) *out = NULL;
    snprintf(path, sizeof path, "%s/err", tmpdir);
    if (hx_read_file(path, 0, err_out, &len, &err)) *err_out = NULL;
}

/* run_verb in a child (hearth ask confines its process: no network),
 * its stdin from the file in (NULL: the test's). */
static int run_forked_in(int (*fn)(int, char **), char **argv, const char *in, char **out,
                         char **err_out)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *o = NULL, *e = NULL;
        int fd = in ? open(in, O_RDONLY) : -1;
        if (fd >= 0) dup2(fd, 0);
        _exit(run_verb(fn, argv, &o, &e));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    read_outputs(out, err_out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_forked(int (*fn)(int, char **), char **argv, char **out, char **err_out)
{
    return run_forked_in(fn, argv, NULL, out, err_out);
}

/* `hearth mkmodel` writes a random llama of width embd with stories260K's
 * tokenizer into tmpdir/name. */
static int mkmodel(const char *name, const char *embd, const char *vocab, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", tmpdir, name);
    char *argv[] = {"mkmodel", "-o", path, "--arch", "llama", "--vocab", (char *)vocab,
                    "--layers", "1", "--embd", (char *)embd, "--heads", "2", "--heads-kv",
                    "1", "--head-dim", "16", "--ff", "64", "--ctx", "2048", NULL};
    char *out = NULL, *err = NULL;
    int rc = run_verb(hx_cmd_mkmodel, argv, &out, &err);
    free(out), free(err);
    return rc;
}

/* Runs `hearth ask` on big with config.json holding governor (a JSON
 * object's text); its stderr into *err (caller frees). */
static int ask_with(const char *governor, const char *big, char **err)
{
    char cfg[600], text[2000], *out = NULL;
    snprintf(cfg, sizeof cfg, "%s/config.json", tmpdir);
    /* a configuration whose folders are there (ask checks them first) */
    snprintf(text, sizeof text, "{\"governor\": %s, \"calendars\": [\"%s\"], \"maildir\": "
             "\"\", \"file_roots\": []}\n", governor, tmpdir);
    hx_err e = {0};
    if (hx_write_file_atomic(cfg, text, strlen(text), &e)) return -1;
    char *argv[] = {"ask", "What is on tomorrow?", "--model", (char *)big, "--config", cfg,
                    "--tool-choice", "none", "--max-tokens", "2", "--max-steps", "1",
                    "--no-memory", "--no-prefix-cache", "--no", NULL};
    int rc = run_forked(hx_cmd_ask, argv, &out, err);
    free(out);
    return rc;
}

/* The model `hearth ask` ran ("ask: model NAME" at HEARTH_LOG=debug). */
static int ran(const char *err, const char *name)
{
    char want[128];
    snprintf(want, sizeof want, "ask: model %s,", name);
    return err && strstr(err, want) != NULL;
}

static void test_ask_switches_to_small_model(void)
{
    const char *vocab = test_shared_file("models/stories260K.gguf");
    if (!vocab) return;
    char big[600], small[600], gov[1400], *err = NULL;
    ASSERT(mkmodel("big.gguf", "64", vocab, big, sizeof big) == HX_EXIT_OK);
    ASSERT(mkmodel("small.gguf", "32", vocab, small, sizeof small) == HX_EXIT_OK);
    setenv("HEARTH_LOG", "debug", 1);
    snprintf(gov, sizeof gov, "{\"small_model\": \"%s\"}", small);
    tree("15\n", "Discharging\n"); /* saving: low battery */
    int rc = ask_with(gov, big, &err);
    EXPECT(rc == HX_EXIT_OK || rc == HX_EXIT_FAIL); /* answered, or the 2-token budget */
    EXPECT(ran(err, "small.gguf"));
    EXPECT(err && strstr(err, "hearth: governor: saving (battery 15% discharging"));
    EXPECT(err && strstr(err, "using the small model"));
    free(err);
    tree("90\n", "Discharging\n"); /* normal: the model asked for */
    ask_with(gov, big, &err);
    EXPECT(ran(err, "big.gguf"));
    EXPECT(err && !strstr(err, "small model"));
    free(err);
    /* only when critical */
    snprintf(gov, sizeof gov, "{\"small_model\": \"%s\", \"small_model_level\": "
             "\"critical\"}", small);
    tree("15\n", "Discharging\n");
    ask_with(gov, big, &err);
    EXPECT(ran(err, "big.gguf"));
    free(err);
    tree("5\n", "Discharging\n");
    ask_with(gov, big, &err);
    EXPECT(ran(err, "small.gguf"));
    free(err);
    /* the governor off: no switch */
    snprintf(gov, sizeof gov, "{\"enabled\": false, \"small_model\": \"%s\"}", small);
    ask_with(gov, big, &err);
    EXPECT(ran(err, "big.gguf"));
    free(err);
    unsetenv("HEARTH_LOG");
}

/* A missing small model keeps the model asked for; bad keys are named. */
static void test_small_model_problems(void)
{
    const char *vocab = test_shared_file("models/stories260K.gguf");
    if (!vocab) return;
    char big[600], *err = NULL;
    ASSERT(mkmodel("big.gguf", "64", vocab, big, sizeof big) == HX_EXIT_OK);
    setenv("HEARTH_LOG", "debug", 1);
    tree("5\n", "Discharging\n");
    ask_with("{\"small_model\": \"/nonexistent/small.gguf\"}", big, &err);
    EXPECT(ran(err, "big.gguf"));
    EXPECT(err && strstr(err, "the small model /nonexistent/small.gguf cannot be read"));
    free(err);
    char gov[1400];
    snprintf(gov, sizeof gov, "{\"small_model\": \"%s\", \"small_model_level\": \"hot\"}",
             big);
    ask_with(gov, big, &err); /* the same model: no switch to say */
    EXPECT(err && !strstr(err, "using the small model"));
    free(err);
    snprintf(gov, sizeof gov, "{\"small_model\": \"%s/other.gguf\", "
             "\"small_model_level\": \"hot\"}", tmpdir);
    ask_with(gov, big, &err);
    EXPECT(err && strstr(err, "governor.small_model_level must be \"saving\" or \"critical\""));
    free(err);
    EXPECT_EQ_INT(ask_with("{\"small_model\": 7}", big, &err), HX_EXIT_INPUT);
    EXPECT(err && strstr(err, "'governor.small_model' must be a string"));
    free(err);
    unsetenv("HEARTH_LOG");
}

/* tmpdir/config.json (its path into cfg) with governor gov (a JSON
 * object's text) and a calendar holding a dentist's appointment
 * tomorrow; 0, or -1 when it could not be written. */
static int calendar_config(const char *gov, char *cfg, size_t n)
{
    char cal[600], text[1200], ics[800];
    snprintf(cal, sizeof cal, "%s/cal", tmpdir);
    time_t t = time(NULL) + 86400;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(ics, sizeof ics, "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n"
             "BEGIN:VEVENT\r\nUID:dentist@t\r\nDTSTAMP:20260101T000000Z\r\n"
             "DTSTART:%04d%02d%02dT100000Z\r\nDTEND:%04d%02d%02dT110000Z\r\n"
             "SUMMARY:Dentist\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
    put("cal/dentist.ics", ics);
    snprintf(cfg, n, "%s/config.json", tmpdir);
    snprintf(text, sizeof text, "{\"governor\": %s, \"calendars\": [\"%s\"], "
             "\"maildir\": \"\", \"file_roots\": []}\n", gov, cal);
    hx_err e = {0};
    return hx_write_file_atomic(cfg, text, strlen(text), &e) ? -1 : 0;
}

/* The arguments of verb ("ask" with its request, or "chat": request
 * NULL) on model under cfg, then extra (NULL-ended), into argv[32]. */
static void verb_args(char **argv, const char *verb, const char *request, const char *model,
                      const char *cfg, char **extra)
{
    int argc = 0;
    argv[argc++] = (char *)verb;
    if (request) argv[argc++] = (char *)request;
    char *common[] = {"--model", (char *)model, "--config", (char *)cfg, "--no-prefix-cache",
                      "--no", "--no-memory", NULL};
    if (extra && extra[0] && !strcmp(extra[0], "--memory")) /* the test's word: keep it */
        common[6] = NULL, extra++;
    for (int i = 0; common[i]; i++) argv[argc++] = common[i];
    for (int i = 0; extra && extra[i] && argc < 31; i++) argv[argc++] = extra[i];
    argv[argc] = NULL;
}

/* `hearth ask TEXT` with config governor gov and the dentist's calendar,
 * more arguments in extra (NULL-ended); stdout and stderr into *out and
 * *err (caller frees). */
static int ask_request(const char *request, const char *model, const char *gov, char **extra,
                       char **out, char **err)
{
    char cfg[600], *argv[32];
    if (calendar_config(gov, cfg, sizeof cfg)) return -1;
    verb_args(argv, "ask", request, model, cfg, extra);
    return run_forked(hx_cmd_ask, argv, out, err);
}

/* `hearth chat` so, its requests the lines of input. */
static int chat_requests(const char *input, const char *model, const char *gov, char **extra,
                         char **out, char **err)
{
    char cfg[600], in[600], *argv[32];
    snprintf(in, sizeof in, "%s/chat-in", tmpdir);
    hx_err e = {0};
    if (calendar_config(gov, cfg, sizeof cfg) ||
        hx_write_file_atomic(in, input, strlen(input), &e))
        return -1;
    verb_args(argv, "chat", NULL, model, cfg, extra);
    return run_forked_in(hx_cmd_chat, argv, in, out, err);
}

static int ask_calendar_gov(const char *model, const char *gov, char **extra, char **out,
                            char **err)
{
    return ask_request("What is on my calendar tomorrow?", model, gov, extra, out, err);
}

static int ask_calendar(const char *model, char **extra, char **out, char **err)
{
    return ask_calendar_gov(model, "{}", extra, out, err);
}

/* governor.small_tier: a plain read goes to the small model with only its
 * reading tools, at the normal level; the controls: a request that may
 * change the calendar, and the same read without the setting, keep the
 * model asked for and every tool. */
static void test_small_tier(void)
{
    const char *vocab = test_shared_file("models/stories260K.gguf");
    if (!vocab) return;
    char big[600], small[600], gov[1400], *out = NULL, *err = NULL;
    ASSERT(mkmodel("big.gguf", "64", vocab, big, sizeof big) == HX_EXIT_OK);
    ASSERT(mkmodel("small.gguf", "32", vocab, small, sizeof small) == HX_EXIT_OK);
    setenv("HEARTH_LOG", "debug", 1);
    tree("90\n", "Charging\n");
    snprintf(gov, sizeof gov, "{\"small_tier\": true, \"small_model\": \"%s\"}", small);
    char *budget[] = {"--max-tokens", "2", "--max-steps", "1", NULL};
    ask_calendar_gov(big, gov, budget, &out, &err);
    EXPECT(ran(err, "small.gguf"));
    EXPECT(err && strstr(err, "a plain read (governor.small_tier): using the small model"));
    EXPECT(err && strstr(err, "offering only calendar.list_events,calendar.free_busy,"
                              "calendar.find_slots\n"));
    free(out), free(err);
    ask_request("Move my dentist appointment to Friday morning", big, gov, budget, &out, &err);
    EXPECT(ran(err, "big.gguf"));
    EXPECT(err && !strstr(err, "offering only"));
    free(out), free(err);
    snprintf(gov, sizeof gov, "{\"small_model\": \"%s\"}", small);
    ask_calendar_gov(big, gov, budget, &out, &err);
    EXPECT(ran(err, "big.gguf"));
    EXPECT(err && !strstr(err, "offering only"));
    free(out), free(err);
    unsetenv("HEARTH_LOG");
}

/* The closed loop in a session: turns whose decode is below the floor
 * (10,000 tokens/s: every turn) twice in a row raise the latency level;
 * the decision is said on stderr and recorded in the --json trace, with
 * its reason. The level is carried to the next session, which starts with
 * its prompt trimmed; turns well inside targets no turn can miss (TTFT
 * 600 s, no decode floor) bring it down again. The control: a session at
 * level 0 under those targets decides nothing after its opening. */
static void test_ask_loop_records_decisions(void)
{
    char tiny[PATH_MAX], *out = NULL, *err = NULL;
    if (!realpath("models/hearth-tiny.gguf", tiny)) SKIP("models/hearth-tiny.gguf is not here");
    tree("90\n", "Charging\n");
    char *json[] = {"--json", NULL};
    int rc = ask_calendar_gov(tiny, "{\"decode_floor\": 10000}", json, &out, &err);
    EXPECT_EQ_INT(rc, HX_EXIT_OK);
    cJSON *t = out ? cJSON_Parse(out) : NULL;
    ASSERT(t);
    const cJSON *g = cJSON_GetObjectItem(t, "governor");
    EXPECT(cJSON_GetArraySize(g) >= 1);
    const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(g, 0), "why"));
    EXPECT(why && strstr(why, "latency over target"));
    const char *choice = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(g, 0), "choice"));
    EXPECT(choice && strstr(choice, "the request's tools only"));
    EXPECT(err && strstr(err, "hearth: governor: after "));
    cJSON_Delete(t);
    free(out), free(err);
    const char *easy = "{\"ttft_ms\": 600000, \"decode_floor\": 0}";
    rc = ask_calendar_gov(tiny, easy, json, &out, &err);
    EXPECT_EQ_INT(rc, HX_EXIT_OK);
    EXPECT(err && strstr(err, "offering only calendar.list_events")); /* carried over */
    t = out ? cJSON_Parse(out) : NULL;
    ASSERT(t);
    g = cJSON_GetObjectItem(t, "governor");
    why = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(g, 0), "why"));
    EXPECT(why && strstr(why, "latency well inside target"));
    cJSON_Delete(t);
    free(out), free(err);
    rc = ask_calendar_gov(tiny, easy, json, &out, &err);
    EXPECT_EQ_INT(rc, HX_EXIT_OK);
    EXPECT(err && !strstr(err, "offering only"));
    t = out ? cJSON_Parse(out) : NULL;
    ASSERT(t);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(t, "governor")), 0);
    EXPECT(err && !strstr(err, "hearth: governor: after "));
    cJSON_Delete(t);
    free(out), free(err);
}

/* The priority a child ends with after hx_cli_lower_priority(governor
 * object text), or -100 if it could not tell. */
static int lowered_to(const char *gov)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        cJSON *g = cJSON_Parse(gov);
        hx_cli_lower_priority(g);
        errno = 0;
        int p = getpriority(PRIO_PROCESS, 0);
        _exit(errno ? 200 : p + 100);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) != 200 ? WEXITSTATUS(st) - 100 : -100;
}

/* Inference threads run at governor.nice (10 by default); 0 or the
 * governor off leave the priority alone (the control). */
static void test_lower_priority(void)
{
    errno = 0;
    const int base = getpriority(PRIO_PROCESS, 0);
    ASSERT(errno == 0);
    if (base >= 19) SKIP("already at nice %d", base);
    EXPECT_EQ_INT(lowered_to("{}"), base < 10 ? 10 : base); /* never raised */
    EXPECT_EQ_INT(lowered_to("{\"nice\": 19}"), 19);
    EXPECT_EQ_INT(lowered_to("{\"nice\": 0}"), base);
    EXPECT_EQ_INT(lowered_to("{\"enabled\": false}"), base);
}

/* A model whose full prompt (chatml, the Qwen tokenizer: about 2,500
 * tokens) overflows the critical level's context cap (1024): tmpdir/qw.gguf
 * into qw; 0, or -1 (the vocabulary is not here: said). */
static int qwen_model(char *qw, size_t n)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    char *out = NULL, *err = NULL;
    if (!vocab) return -1;
    snprintf(qw, n, "%s/qw.gguf", tmpdir);
    char *mk[] = {"mkmodel", "-o", qw, "--arch", "qwen3", "--vocab", (char *)vocab, "--layers",
                  "1", "--embd", "64", "--heads", "2", "--heads-kv", "1", "--head-dim", "32",
                  "--ff", "64", "--ctx", "4096", NULL};
    int rc = run_verb(hx_cmd_mkmodel, mk, &out, &err);
    free(out), free(err);
    return rc == HX_EXIT_OK ? 0 : -1;
}

/* Latency targets no turn misses, even under sanitizers: the loop's
 * latency level then only comes down, and these tests see the device's
 * decisions alone. */
#define STEADY "{\"ttft_ms\": 600000, \"decode_floor\": 0}"

/* Forgets the latency level earlier tests left (governor-loop.json). */
static void fresh_loop(void)
{
    char dir[4096], path[4200];
    if (hx_path_data(dir, sizeof dir) < 0) return;
    snprintf(path, sizeof path, "%s/governor-loop.json", dir);
    unlink(path);
}

/* The rest of a critical-level test of ask or chat (run, as
 * ask_calendar): the control, on external power under the same cap,
 * offers every tool and is too long (exit control_rc); then the
 * project's model answers from a calendar tool at the critical level. */
static void critical_rest(int (*run)(const char *, char **, char **, char **), const char *qw,
                          int control_rc)
{
    char *out = NULL, *err = NULL;
    fresh_loop();
    tree("90\n", "Charging\n");
    char *capped[] = {"--max-tokens", "2", "--max-steps", "1", "--ctx", "1024", NULL};
    EXPECT_EQ_INT(run(qw, capped, &out, &err), control_rc);
    EXPECT(err && strstr(err, "request too long"));
    EXPECT(err && !strstr(err, "offering only"));
    free(out), free(err);
    char tiny[PATH_MAX];
    if (!realpath("models/hearth-tiny.gguf", tiny)) SKIP("models/hearth-tiny.gguf is not here");
    tree("5\n", "Discharging\n");
    EXPECT_EQ_INT(run(tiny, NULL, &out, &err), HX_EXIT_OK);
    /* a calendar tool ran (which one is the model's choice) and an answer followed */
    EXPECT(err && strstr(err, "-> calendar.") && strstr(err, "   ok ("));
    EXPECT(out && strlen(out) > 8);
    free(out), free(err);
}

/* At the critical level (context at most 1024) a calendar question still
 * runs: its prompt offers only the calendar's reading tools. A model whose
 * full prompt (chatml, the Qwen tokenizer: about 2,500 tokens) overflows
 * the cap fits; the control: the same request with all tools under the same
 * cap at the normal level is too long. Then the project's model answers it
 * from a calendar tool. */
static void test_critical_answers_calendar(void)
{
    char qw[600], *out = NULL, *err = NULL;
    if (qwen_model(qw, sizeof qw)) return;
    char *budget[] = {"--max-tokens", "2", "--max-steps", "1", NULL};
    tree("5\n", "Discharging\n");
    int rc = ask_calendar(qw, budget, &out, &err);
    EXPECT(rc == HX_EXIT_OK || rc == HX_EXIT_FAIL); /* answered, or the 2-token budget */
    EXPECT(err && strstr(err, "offering only calendar.list_events,calendar.free_busy,"
                              "calendar.find_slots\n"));
    EXPECT(err && strstr(err, "context 1024"));
    EXPECT(err && !strstr(err, "too long"));
    free(out), free(err);
    critical_rest(ask_calendar, qw, HX_EXIT_FAIL);
}

/* `hearth chat` asked a calendar question, then one about mail. */
static int chat_two(const char *model, char **extra, char **out, char **err)
{
    return chat_requests("What is on my calendar tomorrow?\nDo I have unread mail?\n", model,
                         "{}", extra, out, err);
}

/* `hearth chat` at the critical level cuts each request's tools anew: a
 * calendar question offers the calendar's reading tools, the next request
 * in the same session, about mail, the mail's; neither is too long for
 * the 1024 cap. The control: the same session at the normal level under
 * the same cap offers every tool and is too long. Then the project's
 * model answers the calendar question in a chat from a calendar tool. */
static void test_chat_cuts_per_request(void)
{
    char qw[600], *out = NULL, *err = NULL;
    if (qwen_model(qw, sizeof qw)) return;
    char *budget[] = {"--max-tokens", "2", "--max-steps", "1", NULL};
    tree("5\n", "Discharging\n");
    EXPECT_EQ_INT(chat_two(qw, budget, &out, &err), HX_EXIT_OK);
    EXPECT(err && strstr(err, "offering only calendar.list_events,calendar.free_busy,"
                              "calendar.find_slots\n"));
    const char *mail = err ? strstr(err, "offering only mail.") : NULL;
    EXPECT(mail && !strstr(mail, "calendar.") && !strstr(mail, "mail.send"));
    EXPECT(err && !strstr(err, "too long"));
    free(out), free(err);
    critical_rest(chat_two, qw, HX_EXIT_OK);
}

/* How many times needle occurs in hay (NULL: 0). */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* `hearth chat` with its stdin a pipe: the first line, then (once its
 * trace is out) change() and the second; outputs as chat_requests. */
static int chat_live(char **argv, const char *first, void (*change)(void), const char *second,
                     char **out, char **err, size_t *err_at_change)
{
    int p[2];
    if (pipe(p)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *o = NULL, *e = NULL;
        close(p[1]);
        dup2(p[0], 0);
        _exit(run_verb(hx_cmd_chat, argv, &o, &e));
    }
    close(p[0]);
    EXPECT(write(p[1], first, strlen(first)) == (ssize_t)strlen(first));
    int status = 0, done = 0;
    /* the first trace's end; a bound, not a measure: it takes seconds */
    for (int i = 0; i < 6000 && !done; i++) {
        read_outputs(out, err);
        done = count_of(*out, "\"request\":") >= 1 || waitpid(pid, &status, WNOHANG) == pid;
        if (!done) usleep(100 * 1000);
        free(*out), free(*err);
    }
    change();
    read_outputs(out, err);
    *err_at_change = *err ? strlen(*err) : 0;
    free(*out), free(*err);
    EXPECT(write(p[1], second, strlen(second)) == (ssize_t)strlen(second));
    close(p[1]);
    waitpid(pid, &status, 0);
    read_outputs(out, err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `hearth chat` with its stdin a pipe that stays empty until the
 * session's stderr says ready (a bound, not a measure), then line;
 * outputs as chat_requests. */
static int chat_typed(char **argv, const char *ready, const char *line, char **out, char **err)
{
    int p[2];
    char path[600];
    snprintf(path, sizeof path, "%s/err", tmpdir); /* not an earlier run's */
    unlink(path);
    if (pipe(p)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *o = NULL, *e = NULL;
        close(p[1]);
        dup2(p[0], 0);
        _exit(run_verb(hx_cmd_chat, argv, &o, &e));
    }
    close(p[0]);
    int status = 0, done = 0;
    for (int i = 0; i < 6000 && !done; i++) {
        read_outputs(out, err);
        done = (*err && strstr(*err, ready)) || waitpid(pid, &status, WNOHANG) == pid;
        if (!done) usleep(100 * 1000);
        free(*out), free(*err);
    }
    EXPECT(write(p[1], line, strlen(line)) == (ssize_t)strlen(line));
    close(p[1]);
    waitpid(pid, &status, 0);
    read_outputs(out, err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Positions the first turn of a session reused ("source: prompt N tokens,
 * R reused" in the debug log); -1: none said. */
static int first_reused(const char *err)
{
    const char *p = err ? strstr(err, "source: prompt ") : NULL;
    int n = 0, r = -1;
    return p && sscanf(p, "source: prompt %d tokens, %d reused", &n, &r) == 2 ? r : -1;
}

/* While no input waits, hearth chat decodes the next prompt's start (the
 * system text, tools and clock line): a request typed after that reuses
 * those positions and gets the answer the same request piped in at once
 * gets, which prepares nothing and reuses nothing (the control). */
static void test_chat_prepares_while_typing(void)
{
    char tiny[PATH_MAX], cfg[600], *argv[32], *out = NULL, *err = NULL, *out0 = NULL,
         *err0 = NULL;
    if (!realpath("models/hearth-tiny.gguf", tiny)) SKIP("models/hearth-tiny.gguf is not here");
    tree("90\n", "Charging\n");
    ASSERT(calendar_config(STEADY, cfg, sizeof cfg) == 0);
    fresh_loop();
    char *extra[] = {"--max-tokens", "24", "--max-steps", "2", NULL};
    verb_args(argv, "chat", NULL, tiny, cfg, extra);
    setenv("HEARTH_LOG", "debug", 1);
    const char *q = "What is on my calendar tomorrow?\n";
    EXPECT_EQ_INT(chat_typed(argv, "prompt tokens prepared", q, &out, &err), HX_EXIT_OK);
    fresh_loop();
    EXPECT_EQ_INT(chat_requests(q, tiny, STEADY, extra, &out0, &err0), HX_EXIT_OK);
    unsetenv("HEARTH_LOG");
    ASSERT(err && err0);
    int n = 0, k = 0;
    const char *prep = strstr(err, " prompt tokens prepared");
    while (prep && prep > err && prep[-1] >= '0' && prep[-1] <= '9') prep--;
    ASSERT(prep && sscanf(prep, "%d prompt tokens prepared, %d", &n, &k) == 2);
    printf("# prepared %d positions; the request reused %d (control %d)\n", n,
           first_reused(err), first_reused(err0));
    EXPECT(n > 100 && first_reused(err) >= n);
    EXPECT_EQ_INT(first_reused(err0), 0);
    EXPECT(!strstr(err0, "prompt tokens prepared"));
    EXPECT(out && out0 && !strcmp(out, out0));
    free(out), free(err), free(out0), free(err0);
}

static void battery_critical(void) { tree("5\n", "Discharging\n"); }

/* The loop's choices apply within a session: a fake battery that drops
 * to 5% between two requests of one chat is read before the second,
 * whose trace records the decision (critical: context at most 1024,
 * 8-bit KV, no drafts, the request's tools only), and that request runs
 * with it: a new context of 1024 positions with the 8-bit cache, no
 * drafts, the calendar's tools. The control: the first request, at 90%
 * charging, decides nothing and runs with neither. */
static void test_chat_follows_device(void)
{
    char qw[600], cfg[600], *argv[32], *out = NULL, *err = NULL;
    size_t at = 0;
    if (qwen_model(qw, sizeof qw)) return;
    tree("90\n", "Charging\n");
    ASSERT(calendar_config(STEADY, cfg, sizeof cfg) == 0);
    fresh_loop();
    char *extra[] = {"--max-tokens", "2", "--max-steps", "1", "--json", NULL};
    verb_args(argv, "chat", NULL, qw, cfg, extra);
    setenv("HEARTH_LOG", "debug", 1);
    const char *q = "What is on my calendar tomorrow?\n";
    EXPECT_EQ_INT(chat_live(argv, q, battery_critical, q, &out, &err, &at), HX_EXIT_OK);
    unsetenv("HEARTH_LOG");
    ASSERT(out && err && strlen(err) >= at);
    const char *end = NULL;
    cJSON *t1 = cJSON_ParseWithOpts(out, &end, 0), *t2 = end ? cJSON_Parse(end) : NULL;
    ASSERT(t1 && t2);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(t1, "governor")), 0);
    const cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(t2, "governor"), 0);
    const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(g, "why"));
    const char *choice = cJSON_GetStringValue(cJSON_GetObjectItem(g, "choice"));
    EXPECT(why && strstr(why, "critical"));
    EXPECT(choice && strstr(choice, "context at most 1024, 8-bit KV, no drafts") &&
           strstr(choice, "the request's tools only"));
    const char *later = err + at;
    EXPECT(strstr(later, "source: from this turn: context 1024, 8-bit KV, drafts up to 0"));
    EXPECT(strstr(later, "offering only calendar.list_events"));
    char *before = strndup(err, at);
    EXPECT(before && !strstr(before, "context 1024") && !strstr(before, "offering only"));
    free(before);
    cJSON_Delete(t1);
    cJSON_Delete(t2);
    free(out), free(err);
}

static void battery_low(void) { tree("15\n", "Discharging\n"); }

/* The model of episode id as `hearth memory show` prints it ("" when it
 * could not tell) into buf. */
static void episode_model(double id, char *buf, size_t n)
{
    char arg[32], *out = NULL, *err = NULL;
    snprintf(arg, sizeof arg, "%.0f", id);
    char *show[] = {"memory", "show", "--episodes", arg, NULL};
    run_forked(hx_cmd_memory, show, &out, &err);
    const char *m = out ? strstr(out, "\nmodel:   ") : NULL;
    snprintf(buf, n, "%.*s", m ? (int)strcspn(m + 10, "\n") : 0, m ? m + 10 : "");
    free(out), free(err);
}

/* The small model within a session: a chat on the model asked for whose
 * battery drops to 15% (saving: governor.small_model from that level)
 * between two requests loads the small model for the second, and the
 * episodes record which ran each. The control: the first request, on
 * external power, ran the model asked for. */
static void test_chat_switches_model(void)
{
    const char *vocab = test_shared_file("models/stories260K.gguf");
    if (!vocab) return;
    char big[600], small[600], gov[800], cfg[600], *argv[32], *out = NULL, *err = NULL;
    size_t at = 0;
    ASSERT(mkmodel("big.gguf", "64", vocab, big, sizeof big) == HX_EXIT_OK);
    ASSERT(mkmodel("small.gguf", "32", vocab, small, sizeof small) == HX_EXIT_OK);
    snprintf(gov, sizeof gov, "{\"small_model\": \"%s\", %s", small, STEADY + 1);
    fresh_loop();
    ASSERT(calendar_config(gov, cfg, sizeof cfg) == 0);
    tree("90\n", "Charging\n");
    char *extra[] = {"--memory", "--max-tokens", "2", "--max-steps", "1", "--json", NULL};
    verb_args(argv, "chat", NULL, big, cfg, extra);
    const char *q = "What is on my calendar tomorrow?\n";
    EXPECT_EQ_INT(chat_live(argv, q, battery_low, q, &out, &err, &at), HX_EXIT_OK);
    ASSERT(out && err && strlen(err) >= at);
    char want[700];
    snprintf(want, sizeof want, ": now %s (config governor.small_model)", small);
    EXPECT(strstr(err + at, want));
    char *before = strndup(err, at);
    EXPECT(before && !strstr(before, ": now "));
    free(before);
    const char *end = NULL;
    cJSON *t1 = cJSON_ParseWithOpts(out, &end, 0), *t2 = end ? cJSON_Parse(end) : NULL;
    ASSERT(t1 && t2);
    char m1[300], m2[300];
    episode_model(cJSON_GetNumberValue(cJSON_GetObjectItem(t1, "episode")), m1, sizeof m1);
    episode_model(cJSON_GetNumberValue(cJSON_GetObjectItem(t2, "episode")), m2, sizeof m2);
    EXPECT_STR_EQ(m1, "big.gguf");
    EXPECT_STR_EQ(m2, "small.gguf");
    cJSON_Delete(t1);
    cJSON_Delete(t2);
    free(out), free(err);
}

/* The decisions a request ran under are in its episode: an ask at the
 * critical level records the critical decision, and `hearth memory show`
 * prints it; the control: at the normal level on external power the
 * decision in force is the normal one. */
static void test_episode_records_governor(void)
{
    char qw[600], cfg[600], *argv[32], *out = NULL, *err = NULL;
    if (qwen_model(qw, sizeof qw)) return;
    ASSERT(calendar_config("{}", cfg, sizeof cfg) == 0);
    char *extra[] = {"--memory", "--max-tokens", "2", "--max-steps", "1", "--json", NULL};
    const char *levels[] = {"5\n", "90\n"}, *status[] = {"Discharging\n", "Charging\n"};
    const char *want[] = {"critical (battery 5% discharging", "normal"};
    for (int k = 0; k < 2; k++) {
        tree(levels[k], status[k]);
        verb_args(argv, "ask", "What is on my calendar tomorrow?", qw, cfg, extra);
        run_forked(hx_cmd_ask, argv, &out, &err);
        cJSON *t = out ? cJSON_Parse(out) : NULL;
        ASSERT(t);
        char id[32];
        snprintf(id, sizeof id, "%.0f", cJSON_GetNumberValue(cJSON_GetObjectItem(t, "episode")));
        cJSON_Delete(t);
        free(out), free(err);
        char *show[] = {"memory", "show", "--episodes", id, NULL};
        EXPECT_EQ_INT(run_forked(hx_cmd_memory, show, &out, &err), HX_EXIT_OK);
        const char *line = out ? strstr(out, "governor: after 0 slices, 0 turns: ") : NULL;
        EXPECT(line && !strncmp(line + 35, want[k], strlen(want[k])));
        EXPECT(k == 1 || (line && strstr(line, "context at most 1024, 8-bit KV")));
        free(out), free(err);
    }
}

/* governor.tool_tier: a plain calendar read is answered from the
 * calendar with no model (none can be loaded here): the answer and the
 * read: line name the dentist's appointment. The controls: the same
 * request without the setting needs the model (exit 3, none), and so
 * does a change with it. In a chat with a model, the read is the tool
 * tier's and the next request, a change, the model's. */
static void test_tool_tier(void)
{
    char *out = NULL, *err = NULL;
    const char *gov = "{\"tool_tier\": true}", *none = "/nonexistent/model.gguf";
    tree("90\n", "Charging\n");
    EXPECT_EQ_INT(ask_calendar_gov(none, gov, NULL, &out, &err), HX_EXIT_OK);
    EXPECT(out && !strncmp(out, "1 event tomorrow:\n- event ", 26) && strstr(out, " Dentist"));
    EXPECT(err && strstr(err, "a plain read (governor.tool_tier): calendar.list_events, no model"));
    EXPECT(err && strstr(err, "   read: event ") && strstr(err, "Dentist"));
    free(out), free(err);
    EXPECT_EQ_INT(ask_calendar_gov(none, "{}", NULL, &out, &err), HX_EXIT_INPUT);
    free(out), free(err);
    EXPECT_EQ_INT(ask_request("Cancel my dentist appointment tomorrow", none, gov, NULL, &out,
                              &err), HX_EXIT_INPUT);
    EXPECT(err && !strstr(err, "tool_tier"));
    free(out), free(err);
    char qw[600];
    if (qwen_model(qw, sizeof qw)) return;
    char *budget[] = {"--max-tokens", "2", "--max-steps", "1", NULL};
    EXPECT_EQ_INT(chat_requests("What is on my calendar tomorrow?\nMove my dentist appointment "
                                "to Friday\n", qw, gov, budget, &out, &err), HX_EXIT_OK);
    EXPECT_EQ_INT(count_of(err, "(governor.tool_tier)"), 1);
    EXPECT(out && strstr(out, "1 event tomorrow:"));
    free(out), free(err);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hearth_test_cmd_power_%d", (int)getpid());
    hx_err e = {0};
    if (hx_mkdirs(tmpdir, &e)) return 1;
    char home[400];
    snprintf(home, sizeof home, "%s/home", tmpdir);
    setenv("HEARTH_HOME", home, 1); /* ask's data, audit log and cache */
    RUN(test_info_shows_power);
    RUN(test_config_policy);
    RUN(test_ask_switches_to_small_model);
    RUN(test_small_model_problems);
    RUN(test_critical_answers_calendar);
    RUN(test_chat_cuts_per_request);
    RUN(test_chat_follows_device);
    RUN(test_chat_prepares_while_typing);
    RUN(test_episode_records_governor);
    RUN(test_chat_switches_model);
    RUN(test_tool_tier);
    RUN(test_ask_loop_records_decisions);
    RUN(test_small_tier);
    RUN(test_lower_priority);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("cleanup failed\n");
    return test_summary();
}
