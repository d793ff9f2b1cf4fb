/* test_cmd_ask.c: `hearth ask`, `hearth chat` and `hearth feedback` as a
 * user runs them (the built binary): usage errors, the missing-model
 * message, the --json trace, feedback on the last episode, chat commands. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "tests/agent/agent_world.h"

static char g_hearth[512], g_out[1 << 17];
static world g_w;
static int g_ok;

/* Runs `hearth ARGS` (a shell fragment) in the world; stdout+stderr in
 * g_out; returns the exit code. */
static int hearth(const char *args, const char *stdin_text)
{
    char cmd[4096], outp[300], inp[300];
    snprintf(outp, sizeof outp, "%s/out.txt", g_w.dir);
    snprintf(inp, sizeof inp, "%s/in.txt", g_w.dir);
    hx_write_file_atomic(inp, stdin_text ? stdin_text : "", stdin_text ? strlen(stdin_text) : 0,
                         NULL);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s <'%s' >'%s' 2>&1", g_w.dir, g_hearth,
             args, inp, outp);
    int rc = system(cmd);
    char *s = NULL;
    size_t n = 0;
    g_out[0] = 0;
    if (!hx_read_file(outp, sizeof g_out - 1, &s, &n, NULL)) {
        memcpy(g_out, s, n + 1);
        free(s);
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int setup(void)
{
    if (g_ok) return 1;
    const char *b = getenv("HEARTH_BUILD");
    char rel[400];
    snprintf(rel, sizeof rel, "%s/hearth", b && *b ? b : "build");
    if (!realpath(rel, g_hearth) || access(g_hearth, X_OK)) {
        test_skip("%s not built", rel);
        return 0;
    }
    if (!world_open(&g_w, 0, 0, 0)) return 0;
    /* the CLI finds the config in $HEARTH_HOME/config */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ln -s '%s/world' '%s/config'", g_w.dir, g_w.dir);
    g_ok = system(cmd) == 0;
    return g_ok;
}

static void test_usage_errors(void)
{
    if (!setup()) return;
    EXPECT_EQ_INT(hearth("ask", NULL), 2);
    EXPECT(strstr(g_out, "usage: hearth ask TEXT") != NULL);
    EXPECT_EQ_INT(hearth("ask hi --yes --no", NULL), 2);
    EXPECT(strstr(g_out, "contradict") != NULL);
    EXPECT_EQ_INT(hearth("ask hi --tool-choice maybe", NULL), 2);
    EXPECT_EQ_INT(hearth("ask hi --max-steps 0", NULL), 2);
    EXPECT_EQ_INT(hearth("ask hi --frobnicate", NULL), 2);
    EXPECT_EQ_INT(hearth("ask hi --style jinja", NULL), 2);
    EXPECT_EQ_INT(hearth("ask hi --copy-bias lots", NULL), 2);
    EXPECT_EQ_INT(hearth("ask hi --copy-bias -1", NULL), 2);
    EXPECT_EQ_INT(hearth("ask hi --answer sometimes", NULL), 2);
    EXPECT(strstr(g_out, "--answer is model, results or auto") != NULL);
    EXPECT_EQ_INT(hearth("ask --help", NULL), 0);
    EXPECT(strstr(g_out, "--allow-tainted-send") != NULL);
    EXPECT_EQ_INT(hearth("feedback", NULL), 2);
    EXPECT_EQ_INT(hearth("feedback --accept --bogus", NULL), 2);
}

/* No --model, no "model" in the config, no default model file. */
static void test_no_model_says_how(void)
{
    if (!setup()) return;
    setenv("HEARTH_DEFAULT_MODEL", "", 1);
    EXPECT_EQ_INT(hearth("ask 'what is on tomorrow?'", NULL), 3); /* bad input: no model */
    unsetenv("HEARTH_DEFAULT_MODEL");
    EXPECT(strstr(g_out, "make tiny-model") != NULL);
    EXPECT(strstr(g_out, "--model") != NULL);
    EXPECT_EQ_INT(hearth("ask hi --model /nonexistent.gguf", NULL) != 0, 1);
    EXPECT(strstr(g_out, "nonexistent.gguf") != NULL);
    EXPECT(strstr(g_out, "not confined from the network") == NULL);
    /* the no-network filter switched off is said, never silent */
    setenv("HEARTH_SANDBOX_DISABLE", "landlock,seccomp", 1);
    EXPECT_EQ_INT(hearth("ask hi --model /nonexistent.gguf", NULL) != 0, 1);
    unsetenv("HEARTH_SANDBOX_DISABLE");
    EXPECT(strstr(g_out, "not confined from the network") != NULL);
}

static void test_json_trace_and_feedback(void)
{
    if (!setup()) return;
    const char *rel = test_shared_file("models/stories260K.gguf");
    char model[4096];
    if (!rel || !realpath(rel, model)) return;
    char args[1024];
    snprintf(args, sizeof args, "ask 'What is on my calendar tomorrow?' --model '%s' --json "
             "--tool-choice required --tools calendar.list_events --max-tokens 300 "
             "--max-steps 2 --seed 3 --temp 0.8 --no", model);
    int rc = hearth(args, NULL);
    EXPECT(rc == 0 || rc == 1);
    cJSON *t = cJSON_Parse(strchr(g_out, '{'));
    ASSERT(t);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(t, "request")),
                  "What is on my calendar tomorrow?");
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(t, "calls"), 0);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(c0, "name")), "calendar.list_events");
    int64_t id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(t, "episode"));
    EXPECT(id > 0);
    cJSON_Delete(t);
    EXPECT_EQ_INT(hearth("feedback --accept", NULL), 0);
    char want[64];
    snprintf(want, sizeof want, "episode %lld: accepted", (long long)id);
    EXPECT(strstr(g_out, want) != NULL);
    snprintf(args, sizeof args, "feedback %lld --correct 'Nothing tomorrow.'", (long long)id);
    EXPECT_EQ_INT(hearth(args, NULL), 0);
    EXPECT(strstr(g_out, "corrected") != NULL);
    EXPECT(hearth("feedback 999999 --reject", NULL) != 0);
    /* the streamed form shows the call and its status */
    snprintf(args, sizeof args, "ask 'What is on tomorrow?' --model '%s' --tool-choice required "
             "--tools calendar.list_events --max-tokens 300 --max-steps 1 --no", model);
    hearth(args, NULL);
    EXPECT(strstr(g_out, "-> calendar.list_events {") != NULL);
}

/* --answer results: the answer on stdout is written from the calls (the
 * trace says so, and no 'read:' lines repeat it); control: --answer model
 * on the same request. */
static void test_results_answer(void)
{
    if (!setup()) return;
    const char *rel = test_shared_file("models/stories260K.gguf");
    char model[4096];
    if (!rel || !realpath(rel, model)) return;
    char args[1024];
    for (int results = 1; results >= 0; results--) {
        snprintf(args, sizeof args, "ask 'What is on my calendar tomorrow?' --model '%s' --json "
                 "--tool-choice required --tools calendar.list_events --max-tokens 300 "
                 "--max-steps 2 --seed 3 --temp 0.8 --no --answer %s", model,
                 results ? "results" : "model");
        int rc = hearth(args, NULL);
        EXPECT(rc == 0 || rc == 1);
        cJSON *t = cJSON_Parse(strchr(g_out, '{'));
        ASSERT(t);
        const char *answer = cJSON_GetStringValue(cJSON_GetObjectItem(t, "answer"));
        EXPECT_EQ_INT(cJSON_IsTrue(cJSON_GetObjectItem(t, "results_answer")), results && rc == 0);
        if (results && rc == 0)
            EXPECT(answer && (strstr(answer, "calendar.list_events") || strstr(answer, " tomorrow") ||
                              strstr(answer, "events")));
        cJSON_Delete(t);
    }
}

static void test_chat_commands(void)
{
    if (!setup()) return;
    const char *rel = test_shared_file("models/stories260K.gguf");
    char model[4096];
    if (!rel || !realpath(rel, model)) return;
    char args[1024];
    snprintf(args, sizeof args, "chat --model '%s' --max-tokens 10", model);
    EXPECT_EQ_INT(hearth(args, "/tools\n/undo\n/memory\n/what\n/quit\n"), 0);
    EXPECT(strstr(g_out, "calendar.find_slots") != NULL);
    EXPECT(strstr(g_out, "(nothing to undo)") != NULL);
    EXPECT(strstr(g_out, "commands: /tools /memory /undo /quit") != NULL);
}

/* Ctrl-C stops generation at once: exit 130, "cancelled", and the episode
 * (with that outcome) is still recorded whole. */
static void test_ctrl_c(void)
{
    if (!setup()) return;
    /* A random-weight model with the real 152k-token Qwen2 vocabulary:
     * unlike stories260K, which ends its short stories with an end token
     * and may finish before the signal on a fast machine, it practically
     * never emits one, so only Ctrl-C (or the 60 s timeout) ends the run. */
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    char model[600], outp[300], cmd[2000];
    if (!vocab) return;
    snprintf(model, sizeof model, "%s/random-qwen3.gguf", g_w.dir);
    snprintf(cmd, sizeof cmd, "'%s' mkmodel -o '%s' --arch qwen3 --type Q8_0 --vocab '%s' "
             "--layers 1 --embd 64 --heads 2 --heads-kv 1 --head-dim 32 --ff 128 "
             ">/dev/null 2>&1", g_hearth, model, vocab);
    ASSERT(system(cmd) == 0);
    snprintf(outp, sizeof outp, "%s/sigint.txt", g_w.dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1), dup2(fd, 2);
        execl(g_hearth, "hearth", "ask", "Tell me a long story", "--model", model,
              "--tool-choice", "none", "--max-tokens", "1000000", "--timeout", "60",
              "--ctx", "8192", (char *)NULL);
        _exit(127);
    }
    /* as soon as the answer starts streaming */
    struct stat st;
    for (int i = 0; i < 2000 && (stat(outp, &st) || st.st_size == 0); i++) usleep(10 * 1000);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status));
    EXPECT_EQ_INT(WEXITSTATUS(status), 130);
    char *s = NULL;
    size_t n;
    if (!hx_read_file(outp, 0, &s, &n, NULL)) {
        EXPECT(strstr(s, "hearth: cancelled") != NULL);
        free(s);
    }
}

/* On a terminal, the policy's "ask" is a y/n/always question; "n" refuses
 * the call and the refusal is fed back. (script(1) gives it a terminal.) */
static void test_tty_question(void)
{
    if (!setup()) return;
    const char *rel = test_shared_file("models/stories260K.gguf");
    char model[4096], args[8192];
    if (!rel || !realpath(rel, model)) return;
    if (system("script -V >/dev/null 2>&1")) SKIP("script(1) is not installed");
    snprintf(args, sizeof args, "--version >/dev/null && script -qec \"'%s' ask 'Schedule a meeting' "
             "--model '%s' --tool-choice required --tools calendar.create_event "
             "--max-tokens 1000 --max-steps 1\" /dev/null", g_hearth, model);
    /* hearth() runs "'HEARTH' ARGS": here HEARTH --version is a no-op, then script */
    hearth(args, "n\n");
    if (!strstr(g_out, "allow? [y]es / [n]o / [a]lways")) printf("# output:\n%s\n", g_out);
    EXPECT(strstr(g_out, "allow? [y]es / [n]o / [a]lways") != NULL);
    EXPECT(strstr(g_out, "decided by user") != NULL);
}

int main(void)
{
    RUN(test_usage_errors);
    RUN(test_no_model_says_how);
    RUN(test_json_trace_and_feedback);
    RUN(test_results_answer);
    RUN(test_chat_commands);
    RUN(test_ctrl_c);
    RUN(test_tty_question);
    if (g_ok) world_close(&g_w);
    return test_summary();
}
