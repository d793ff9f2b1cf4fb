/* serve_load.c: hearth serve's figures (make bench-serve): (1) a thousand
 * concurrent loopback connections, a fifth of them bad clients, GET
 * /v1/models answered per second, its latency percentiles and the
 * server's memory; (2) several conversations streaming at once, taking
 * their turns one decode at a time, against one alone; (3) what batching
 * conversations into one forward pass would gain: the engine's pass over
 * B tokens against B passes of one, at a conversation's depth.
 * Usage: serve-load [--conns N] [--seconds S] [--model FILE.gguf]... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "load.h"

static void load(int conns, double seconds)
{
    static const char *const args[] = {"--idle-timeout", "5", NULL};
    sv_server s = {0};
    if (!sv_world(&s) || !sv_start(&s, args)) exit(1);
    double rss0, peak0, rss, peak;
    ld_memory(s.pid, &rss0, &peak0);
    for (int bad = 0; bad <= 20; bad += 20) {
        ld_params p = {s.port, s.token, conns, seconds, bad};
        ld_stats st;
        if (ld_run(&p, &st)) exit(1);
        ld_memory(s.pid, &rss, &peak);
        long wrong = 0, other = 0;
        for (int k = 0; k < LD_KINDS; k++) wrong += st.wrong[k], other += k ? st.as_expected[k] : 0;
        double p50 = ld_quantile(&st, 0.5), p99 = ld_quantile(&st, 0.99), max = ld_quantile(&st, 1);
        printf("| %d | %d%% | %.1f | %.0f | %.1f | %.1f | %.1f | %ld | %ld | %.1f (%.1f idle) | %.1f |\n",
               conns, bad, st.seconds, (double)st.n_lat / st.seconds, p50, p99, max, other, wrong,
               rss, rss0, peak);
        free(st.lat_ms);
    }
    sv_cleanup(&s);
}

/* One streaming chat completion of n tokens on fd; its tokens (chunks). */
static void stream_start(int fd, int n, int seed)
{
    char body[512], raw[1024];
    snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me "
             "about the weather this week, %d\"}], \"stream\": true, \"max_tokens\": %d, "
             "\"temperature\": 1, \"seed\": %d, \"stream_options\": {\"include_usage\": true}}",
             seed, n, seed);
    int k = snprintf(raw, sizeof raw, "POST /v1/chat/completions HTTP/1.0\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    sv_send_all(fd, raw, (size_t)k);
}

/* The tokens a stream generated (its usage chunk). */
static int stream_tokens(const char *s)
{
    const char *u = strstr(s, "\"completion_tokens\":");
    return u ? atoi(u + 20) : 0;
}

/* k conversations streaming together on k slots; aggregate tokens/s. */
static void streams(int k_max, int n_tokens)
{
    sv_server s = {0};
    char slots[8];
    snprintf(slots, sizeof slots, "%d", k_max);
    const char *args[] = {"--slots", slots, NULL};
    if (!sv_world(&s) || !sv_start(&s, args)) exit(1);
    for (int k = 1; k <= k_max; k *= 2) {
        int fds[16];
        double t0 = ld_now();
        for (int i = 0; i < k; i++) stream_start(fds[i] = sv_connect_unix(s.sock), n_tokens, 7 + i);
        long tokens = 0;
        for (int i = 0; i < k; i++) {
            size_t n;
            char *got = sv_read_all(fds[i], &n, 600000);
            tokens += stream_tokens(got);
            free(got);
            close(fds[i]);
        }
        double dt = ld_now() - t0;
        printf("| %d | %ld | %.2f | %.1f | %.1f |\n", k, tokens, dt, (double)tokens / dt,
               (double)tokens / k / dt);
    }
    sv_cleanup(&s);
}

/* Seconds per forward pass of b tokens at depth `at` (median of reps). */
static double pass_seconds(hx_ctx *c, int b, int at, int reps)
{
    int32_t t[64];
    double best[32];
    for (int i = 0; i < b; i++) t[i] = 100 + i;
    for (int r = 0; r < reps; r++) {
        hx_ctx_truncate(c, at);
        double t0 = ld_now();
        if (hx_decode(c, t, b, 0)) return -1;
        best[r] = ld_now() - t0;
    }
    qsort(best, (size_t)reps, sizeof *best, ld_cmp);
    return best[reps / 2];
}

static void batching(const char *path, int threads)
{
    hx_model *m = NULL;
    hx_ctx *c = NULL;
    hx_err err = {0};
    hx_model_params mp = hx_model_default_params();
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = threads;
    if (hx_model_load(path, &mp, &m, &err) || hx_ctx_new(m, &cp, &c, &err)) {
        printf("# %s: %s\n", path, err.msg);
        exit(1);
    }
    int32_t prompt[512];
    for (int i = 0; i < 512; i++) prompt[i] = 50 + i % 200;
    if (hx_decode(c, prompt, 512, 0)) exit(1);
    const char *slash = strrchr(path, '/');
    double t1 = pass_seconds(c, 1, 512, 15);
    for (int b = 1; b <= 8; b *= 2) {
        double tb = b == 1 ? t1 : pass_seconds(c, b, 512, 15);
        printf("| %s | %d | %.2f | %.1f | %.2fx |\n", slash ? slash + 1 : path, b, tb * 1000,
               b / tb, (b / tb) / (1 / t1));
    }
    hx_ctx_free(c);
    hx_model_free(m);
}

int main(int argc, char **argv)
{
    int conns = 1000, threads = 2;
    double seconds = 10;
    const char *models[8];
    int n_models = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--conns") && i + 1 < argc) conns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc && n_models < 8) models[n_models++] = argv[++i];
        else return fprintf(stderr, "usage: serve-load [--conns N] [--seconds S] [--threads N] "
                                    "[--model FILE]...\n"), 2;
    }
    if (!sv_hearth()) return fprintf(stderr, "serve-load: hearth is not built\n"), 1;
    if (getenv("SERVE_LOAD_ONLY_BATCH")) {
        for (int i = 0; i < n_models; i++) batching(models[i], threads);
        return 0;
    }
    printf("### Loopback load (GET /v1/models over keep-alive; bad clients each get their status)\n\n"
           "| connections | bad | seconds | requests/s | p50 ms | p99 ms | max ms | bad answered | "
           "wrong | server RSS MiB | peak MiB |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    load(conns, seconds);
    printf("\n### Conversations streaming together (hearth-tiny, 200 tokens each, one slot each)\n\n"
           "| streams | tokens | seconds | tokens/s in all | tokens/s each |\n|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    streams(4, 200);
    printf("\n### One forward pass over B tokens at depth 512 (%d threads): what batching B "
           "conversations could gain\n\n| model | B | ms per pass | tokens/s | against B = 1 |\n"
           "|---|---:|---:|---:|---:|\n", threads);
    if (!n_models) models[n_models++] = "models/hearth-tiny.gguf";
    for (int i = 0; i < n_models; i++) batching(models[i], threads);
    return 0;
}
