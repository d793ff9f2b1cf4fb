/* test_crash.c: a child process records episodes in a loop and is killed
 * with SIGKILL at random moments, many times; every episode it reported as
 * committed must be intact afterwards and the database must check clean. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "memory/memory.h"
#include "test.h"

#define ROUNDS 60
#define MAX_REPORTED 20000

static char tmpdir[256], dbpath[512];

typedef struct report {
    int64_t k, id;
} report;

/* Episode number k, deterministic so that the parent can rebuild it: sizes
 * vary from a few bytes to several pages. */
typedef struct gen {
    char request[64], outcome[64], args[4][64], result[4][64];
    char *messages;
    hx_tool_call_rec calls[4];
    hx_episode ep;
} gen;

static void gen_make(gen *g, int64_t k)
{
    memset(g, 0, sizeof *g);
    snprintf(g->request, sizeof g->request, "crash episode %lld", (long long)k);
    snprintf(g->outcome, sizeof g->outcome, "outcome %lld", (long long)k);
    size_t pad = (size_t)((k * 7919) % 12000);
    g->messages = malloc(pad + 128);
    int n = snprintf(g->messages, pad + 128,
                     "[{\"role\":\"user\",\"content\":\"%lld ", (long long)k);
    for (size_t i = 0; i < pad; i++) g->messages[n + i] = (char)('a' + (k + i) % 26);
    snprintf(g->messages + n + pad, 16, "\"}]");
    int nc = (int)(k % 4);
    for (int i = 0; i < nc; i++) {
        snprintf(g->args[i], sizeof g->args[i], "{\"i\":%d,\"k\":%lld}", i,
                 (long long)k);
        snprintf(g->result[i], sizeof g->result[i], "{\"ok\":%lld}",
                 (long long)(k * 10 + i));
        g->calls[i] = (hx_tool_call_rec){"files.search", g->args[i],
                                         g->result[i], i % 3, i & 1};
    }
    g->ep.started_at = 1000000 + k;
    g->ep.finished_at = 1000001 + k;
    g->ep.request = g->request;
    g->ep.messages = g->messages;
    g->ep.outcome = g->outcome;
    g->ep.model = "crash-model";
    g->ep.verdict = (int)(k % 3);
    g->ep.corrected = g->ep.verdict == 2 ? "corrected text" : NULL;
    g->ep.calls = g->calls;
    g->ep.n_calls = nc;
}

static void child(int fd, int64_t k0)
{
    hx_memory_params p = hx_memory_default_params();
    p.path = dbpath;
    hx_memory *m = NULL;
    if (hx_memory_open(&p, &m, NULL)) _exit(3);
    for (int64_t k = k0;; k++) {
        gen g;
        gen_make(&g, k);
        report r = {k, 0};
        if (hx_memory_episode_add(m, &g.ep, &r.id, NULL)) _exit(4);
        free(g.messages);
        if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(5);
    }
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The stored episode equals generated episode k in every field. */
static int intact(hx_memory *m, const report *r)
{
    hx_episode *ep = NULL;
    if (hx_memory_episode_get(m, r->id, &ep, NULL)) return 0;
    gen g;
    gen_make(&g, r->k);
    int ok = same(ep->request, g.ep.request) &&
             same(ep->messages, g.ep.messages) &&
             same(ep->outcome, g.ep.outcome) && same(ep->model, "crash-model") &&
             ep->verdict == g.ep.verdict && same(ep->corrected, g.ep.corrected) &&
             ep->finished_at == g.ep.finished_at && ep->n_calls == g.ep.n_calls;
    for (int i = 0; ok && i < ep->n_calls; i++)
        ok = same(ep->calls[i].arguments, g.calls[i].arguments) &&
             same(ep->calls[i].result, g.calls[i].result) &&
             ep->calls[i].status == g.calls[i].status &&
             ep->calls[i].confirmed == g.calls[i].confirmed;
    free(g.messages);
    hx_episode_free(ep);
    return ok;
}

/* Runs one child, kills it at a random moment, collects its reports. With
 * wait_first the moment is after its first commit (so that every such round
 * kills a writing loop whatever the machine's speed); without, it may fall
 * anywhere, opening and migrating included. */
static int round_run(int64_t k0, int wait_first, report *rep, int *n_rep,
                     unsigned *seed)
{
    int fds[2];
    if (pipe(fds)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], k0);
    }
    close(fds[1]);
    report r;
    if (wait_first && read(fds[0], &r, sizeof r) == (ssize_t)sizeof r &&
        *n_rep < MAX_REPORTED)
        rep[(*n_rep)++] = r;
    struct timespec ts = {0, (long)(rand_r(seed) % 150) * 1000000L};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    while (read(fds[0], &r, sizeof r) == (ssize_t)sizeof r)
        if (*n_rep < MAX_REPORTED) rep[(*n_rep)++] = r;
    close(fds[0]);
    /* A child that died on its own (not by our kill) failed. */
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 0 : -1;
}

static void test_sigkill_loses_nothing(void)
{
    static report rep[MAX_REPORTED];
    int n_rep = 0, failed_children = 0;
    unsigned seed = 12345;
    for (int round = 0; round < ROUNDS; round++)
        if (round_run((int64_t)round * 100000, round & 1, rep, &n_rep, &seed))
            failed_children++;
    EXPECT_EQ_INT(failed_children, 0);
    ASSERT(n_rep >= ROUNDS / 2); /* half the kills landed among commits */
    hx_memory_params p = hx_memory_default_params();
    p.path = dbpath;
    hx_memory *m = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(&p, &m, &err) == HX_OK);
    int bad = 0;
    for (int i = 0; i < n_rep; i++) bad += !intact(m, &rep[i]);
    EXPECT_EQ_INT(bad, 0);
    EXPECT(hx_memory_episode_count(m) >= n_rep);
    int rc = hx_memory_check(m, &err);
    EXPECT_EQ_INT(rc, HX_OK);
    if (rc) printf("# %s\n", err.msg);
    printf("# %d rounds, %d committed episodes verified\n", ROUNDS, n_rep);
    hx_memory_close(m);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx_crash_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    snprintf(dbpath, sizeof dbpath, "%s/memory.db", tmpdir);
    RUN(test_sigkill_loses_nothing);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return test_summary();
}
