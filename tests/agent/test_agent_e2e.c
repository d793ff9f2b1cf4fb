/* test_agent_e2e.c: the planner through the real engine (stories260K) and the
 * tool-call grammar over the fixture world; `hearth ask` opens no network. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "cli/cli.h"
#include "test.h"
#include "agent_world.h"

#define TOOLS "calendar.*,mail.search,memory.search"

static hx_model *load_stories(void)
{
    const char *p = test_shared_file("models/stories260K.gguf");
    hx_model *m = NULL;
    if (p && hx_model_load(p, NULL, &m, NULL)) m = NULL;
    return m;
}

static int count_role(const cJSON *msgs, const char *role)
{
    int n = 0;
    for (const cJSON *m = msgs ? msgs->child : NULL; m; m = m->next)
        n += !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "role")), role);
    return n;
}

/* Every assistant turn with k calls is followed by k tool messages for
 * the same tools in the same order (the calls ran in order); returns the
 * number of turns that held more than one call. */
static int check_call_order(const cJSON *msgs)
{
    int multi = 0;
    for (const cJSON *m = msgs ? msgs->child : NULL; m; m = m->next) {
        const cJSON *tc = cJSON_GetObjectItem(m, "tool_calls");
        const cJSON *r = m->next;
        multi += cJSON_GetArraySize(tc) > 1;
        for (const cJSON *c = tc ? tc->child : NULL; c; c = c->next, r = r ? r->next : NULL) {
            const char *name = cJSON_GetStringValue(
                cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "name"));
            EXPECT(r && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "role")), "tool"));
            EXPECT(r && name && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(r, "name")), name));
        }
    }
    return multi;
}

/* Checks one finished run: a known status, every call well-formed and
 * valid, every result fed back as a tool message, the episode recorded. */
static void check_run(world *w, const cJSON *t, int *n_calls, int *n_answered, int *n_multi)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(t, "status"));
    EXPECT(st && (!strcmp(st, "answered") || !strcmp(st, "token budget") ||
                  !strcmp(st, "step limit")));
    if (st && !strcmp(st, "answered")) {
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(t, "answer"));
        EXPECT(a && *a && !strchr(a, '\n')); /* compact: one line */
        (*n_answered)++;
    }
    const cJSON *calls = cJSON_GetObjectItem(t, "calls");
    /* the first turn must call; only the token budget may cut it short */
    EXPECT(cJSON_GetArraySize(calls) >= 1 || (st && !strcmp(st, "token budget")));
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        const char *cs = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
        EXPECT(strcmp(cs, "malformed") != 0);
        EXPECT(hx_agent_tool_offered(TOOLS, name));
        EXPECT(world_args_valid(w, name, cJSON_GetObjectItem(c, "arguments")));
        (*n_calls)++;
    }
    EXPECT_EQ_INT(count_role(cJSON_GetObjectItem(t, "messages"), "tool"),
                  cJSON_GetArraySize(calls));
    *n_multi += check_call_order(cJSON_GetObjectItem(t, "messages"));
    int64_t id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(t, "episode"));
    hx_episode *ep = NULL;
    EXPECT(id > 0 && hx_memory_episode_get(w->mem, id, &ep, NULL) == HX_OK);
    if (ep) EXPECT_EQ_INT(ep->n_calls, cJSON_GetArraySize(calls));
    hx_episode_free(ep);
}

static const char *requests[] = {
    "Schedule a 30-minute meeting with Bob next Tuesday afternoon about the budget",
    "What is on my calendar tomorrow?",
    "Find an hour for the design review next week",
    "Did Kenji write about the offsite?",
    "Cancel the dentist",
    "When am I free on Friday?",
};

static void test_requests_through_engine(void)
{
    hx_model *m = load_stories();
    if (!m) return;
    world w;
    ASSERT(world_open(&w, 1, 0, 0));
    hx_tool_spec *specs;
    int n = hx_agent_tool_specs(w.reg, TOOLS, NULL, &specs);
    hx_source_engine_params ep = hx_source_engine_default_params();
    ep.compact_json = 1;
    ep.n_ctx = 8192;
    ep.n_threads = 1;
    ep.sp.temp = 0.8f;
    ep.sp.seed = 42;
    ep.max_calls = 2; /* the tiny model calls until the budget otherwise */
    hx_source src;
    hx_err err = {0};
    ASSERT(hx_source_engine_new(m, specs, n, &ep, &src, &err) == HX_OK);
    free(specs); /* the source copied them */
    int n_calls = 0, n_answered = 0, n_multi = 0, n_runs = (int)(sizeof requests / sizeof *requests);
    for (int i = 0; i < n_runs; i++) {
        hx_planner_params pp = hx_planner_default_params();
        pp.family = HX_TPL_COMPACT;
        pp.tool_choice = HX_CHOICE_REQUIRED;
        pp.max_steps = 2;
        pp.max_tokens = 1000;
        pp.tools = TOOLS;
        hx_planner_deps d = world_deps(&w, &src);
        hx_planner *pl = hx_planner_new(&d, &pp);
        cJSON *t = NULL;
        hx_planner_run(pl, requests[i], NULL, &t, &err);
        ASSERT(t);
        check_run(&w, t, &n_calls, &n_answered, &n_multi);
        cJSON_Delete(t);
        hx_planner_free(pl);
    }
    printf("# %d requests, %d calls (all valid), %d answered in plain text, %d turns with "
           "two calls\n", n_runs, n_calls, n_answered, n_multi);
    EXPECT(n_calls >= n_runs / 2);
    EXPECT(n_multi >= 1); /* a turn held two calls, and both ran in order */
    EXPECT(n_answered >= n_runs / 2);
    EXPECT_EQ_INT(hx_memory_episode_count(w.mem), n_runs);
    EXPECT(count_lines(w.audit, "\"tool\"", NULL) == n_calls);
    hx_source_free(&src);
    world_close(&w);
    hx_model_free(m);
}

/* `hearth ask` confines itself: after a run in a child, opening an
 * AF_INET socket fails with EACCES (the seccomp filter), and so does an
 * AF_UNIX one (host services listen there); a socketpair works. */
static void test_ask_opens_no_network(void)
{
    const char *model = test_shared_file("models/stories260K.gguf");
    if (!model) return;
    world w;
    ASSERT(world_open(&w, 0, 1, 0));
    char cfg[400];
    snprintf(cfg, sizeof cfg, "%s/world/config.json", w.dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {"ask", "What is on tomorrow?", "--model", (char *)model,
                        "--config", cfg, "--max-tokens", "30", "--no",
                        "--tools", "calendar.list_events", "--json", NULL};
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1), dup2(fd, 2);
        int rc = hx_cmd_ask(12, argv);
        int in = socket(AF_INET, SOCK_STREAM, 0), in_errno = errno;
        int un = socket(AF_UNIX, SOCK_STREAM, 0), sv[2];
        int pair = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
        _exit(rc > 1 ? 10 : in >= 0 ? 11 : in_errno != EACCES ? 12 : un >= 0 ? 13
              : pair ? 14 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status));
    EXPECT_EQ_INT(WEXITSTATUS(status), 0);
    world_close(&w);
}

/* The same, watched from outside: strace sees no AF_INET socket. */
static void test_ask_under_strace(void)
{
    const char *model = test_shared_file("models/stories260K.gguf");
    if (!model) return;
    const char *b = getenv("HEARTH_BUILD");
    char hearth[512], cmd[2048], log[300];
    snprintf(hearth, sizeof hearth, "%s/hearth", b && *b ? b : "build");
    if (access(hearth, X_OK)) SKIP("%s not built", hearth);
    if (system("strace -V >/dev/null 2>&1")) SKIP("strace is not installed");
    world w;
    ASSERT(world_open(&w, 0, 1, 0));
    snprintf(log, sizeof log, "%s/strace.log", w.dir);
    snprintf(cmd, sizeof cmd,
             "strace -f -qq -e trace=socket,connect -o '%s' '%s' ask 'What is on tomorrow?' "
             "--model '%s' --config '%s/world/config.json' --max-tokens 30 --no "
             "--tools calendar.list_events >/dev/null 2>&1",
             log, hearth, model, w.dir);
    int rc = system(cmd);
    if (rc != 0 && count_lines(log, "PTRACE", NULL) + count_lines(log, "ptrace", NULL) > 0)
        SKIP("strace cannot trace here");
    char *s = NULL;
    size_t n;
    if (hx_read_file(log, 0, &s, &n, NULL)) SKIP("strace wrote no log (ptrace not permitted?)");
    EXPECT(strstr(s, "AF_INET") == NULL);
    EXPECT(strstr(s, "AF_INET6") == NULL);
    free(s);
    world_close(&w);
}

/* KV prefix reuse: a turn after a turn (the cache truncated to the common
 * prefix) picks the same greedy tokens as a fresh source on that prompt. */
static void greedy_text(hx_source *src, const char *prompt, int n, hx_buf *out)
{
    int np = 0, end = 0;
    hx_err err = {0};
    EXPECT(src->begin(src->ctx, prompt, HX_CHOICE_NONE, &np, &err) == HX_OK);
    for (int i = 0; i < n && !end; i++)
        EXPECT(src->next(src->ctx, out, &end, &err) == HX_OK);
}

static void test_prefix_reuse_is_exact(void)
{
    hx_model *m = load_stories();
    if (!m) return;
    hx_source_engine_params ep = hx_source_engine_default_params();
    ep.n_threads = 1;
    hx_source a, b;
    ASSERT(hx_source_engine_new(m, NULL, 0, &ep, &a, NULL) == HX_OK);
    ASSERT(hx_source_engine_new(m, NULL, 0, &ep, &b, NULL) == HX_OK);
    const char *p1 = "User: Once upon a time there was a cat.\nAssistant:";
    const char *p2 = "User: Once upon a time there was a cat.\nAssistant: It sat.\n"
                     "User: And then?\nAssistant:";
    hx_buf x, y, z;
    hx_buf_init(&x), hx_buf_init(&y), hx_buf_init(&z);
    greedy_text(&a, p1, 20, &x);   /* fills the cache past the shared prefix */
    greedy_text(&a, p2, 20, &y);   /* reuses the prefix, drops the rest */
    greedy_text(&b, p2, 20, &z);   /* from scratch */
    EXPECT(y.len > 0);
    EXPECT_STR_EQ(y.data, z.data);
    hx_buf_free(&x), hx_buf_free(&y), hx_buf_free(&z);
    hx_source_free(&a);
    hx_source_free(&b);
    hx_model_free(m);
}

int main(void)
{
    RUN(test_requests_through_engine);
    RUN(test_prefix_reuse_is_exact);
    RUN(test_ask_opens_no_network);
    RUN(test_ask_under_strace);
    return test_summary();
}
