/* nightly.c: the nightly LoRA run as a user gets it (`hearth nightly
 * --force`: dataset, held-out loss, training, gate, adoption) on generated
 * accepted episodes in a temporary HEARTH_HOME; training tokens/s (wall
 * and per CPU-second), the whole run's time, peak RSS, load.
 * Usage: bench/nightly MODEL.gguf [STEPS=3] [THREADS=2] [EPISODES=10]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "bench/bench.h"

/* n accepted episodes as the planner records them: a request, a calendar
 * call, its result, the answer; names, topics and rooms vary. */
static int write_episodes(int n, hx_err *err)
{
    static const char *const who[] = {"Bobby", "Kenji", "Ana", "Lee", "Mo", "Priya", "Olu"};
    static const char *const what[] = {"the budget", "the roadmap", "hiring", "the offsite",
                                       "Q3 numbers"};
    hx_memory *mem = NULL;
    int rc = hx_memory_open(NULL, &mem, err);
    for (int i = 0; !rc && i < n; i++) {
        char msgs[2048], req[160], ans[160];
        const char *w = who[i % 7], *t = what[i % 5];
        snprintf(req, sizeof req, "Set up a meeting with %s about %s on day %d", w, t, i + 1);
        snprintf(ans, sizeof ans, "Booked Room 4B for 45 minutes with %s about %s.", w, t);
        snprintf(msgs, sizeof msgs,
                 "[{\"role\":\"system\",\"content\":\"You are Hearth, Alice's assistant.\"},"
                 "{\"role\":\"user\",\"content\":\"%s\"},"
                 "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":"
                 "\"function\",\"function\":{\"name\":\"calendar.create_event\","
                 "\"arguments\":{\"title\":\"%s\",\"start\":\"2026-12-%02dT10:00\","
                 "\"minutes\":45,\"location\":\"Room 4B\",\"attendees\":[\"%s\"]}}}]},"
                 "{\"role\":\"tool\",\"content\":\"{\\\"ok\\\":true,\\\"uid\\\":\\\"e%d\\\"}\"},"
                 "{\"role\":\"assistant\",\"content\":\"%s\"}]",
                 req, t, i % 28 + 1, w, i, ans);
        hx_episode ep;
        memset(&ep, 0, sizeof ep);
        ep.started_at = 1790000000 + (int64_t)i * 3600;
        ep.finished_at = ep.started_at + 60;
        ep.request = req, ep.messages = msgs, ep.outcome = ans;
        int64_t id = 0;
        rc = hx_memory_episode_add(mem, &ep, &id, err);
        if (!rc) rc = hx_memory_episode_set_verdict(mem, id, HX_VERDICT_ACCEPTED, NULL, err);
    }
    hx_memory_close(mem);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench/nightly MODEL.gguf [STEPS=3] [THREADS=2] [EPISODES=10]\n");
        return 2;
    }
    const char *steps = argc > 2 ? argv[2] : "3", *threads = argc > 3 ? argv[3] : "2";
    const int n_ep = argc > 4 ? atoi(argv[4]) : 10;
    char home[] = "/tmp/hearth-bench-nightly-XXXXXX";
    if (!mkdtemp(home)) return perror("mkdtemp"), 1;
    setenv("HEARTH_HOME", home, 1);
    hx_err err = {0};
    if (write_episodes(n_ep, &err)) {
        fprintf(stderr, "bench/nightly: %s\n", err.msg);
        return 1;
    }
    printf("nightly bench: %s, %d accepted episodes, %s steps, %s threads\n", argv[1], n_ep,
           steps, threads);
    fflush(stdout);
    char *args[] = {"nightly", "--force", "-m", argv[1], "--steps", (char *)steps,
                    "--eval-tasks", "0", "-t", (char *)threads, NULL};
    const double l0 = bench_load1(), t0 = hx_time_mono(), c0 = bench_cpu_seconds();
    const int ex = hx_cli_nightly_run(10, args, "nightly", 1);
    const double wall = hx_time_mono() - t0, cpu = bench_cpu_seconds() - c0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("whole run: %.1f s wall, %.1f CPU-s; peak RSS %.1f MiB; load %.2f -> %.2f; "
           "exit %d\n", wall, cpu, ru.ru_maxrss / 1024.0, l0, bench_load1(), ex);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
    if (system(cmd)) fprintf(stderr, "bench/nightly: could not remove %s\n", home);
    return ex;
}
