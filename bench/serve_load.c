/* serve_load.c: hearth serve's figures (make bench-serve): (1) a thousand
 * concurrent loopback connections, a fifth of them bad clients, GET
 * /v1/models answered per second, its latency percentiles and the
 * server's memory; (2) several conversations streaming at once through
 * it, against one alone; (3) conversations decoding together in the
 * engine, batched into one forward pass per token (hx_decode_seqs, as
 * hearth serve runs them) against taking turns.
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

/* k conversations streaming together on k slots; aggregate tokens/s.
 * model: the server's (-m, with threads), NULL: the world's. */
static void streams(int k_max, int n_tokens, const char *model, int threads)
{
    sv_server s = {0};
    char slots[8], th[8];
    snprintf(slots, sizeof slots, "%d", k_max);
    snprintf(th, sizeof th, "%d", threads);
    const char *args[] = {"--slots", slots, model ? "-m" : NULL, model, "-t", th, NULL};
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
        const char *name = model && strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
        printf("| %s | %d | %ld | %.2f | %.1f | %.1f |\n", name ? name : "hearth-tiny.gguf", k,
               tokens, dt, (double)tokens / dt,
               (double)tokens / k / dt);
    }
    sv_cleanup(&s);
}

/* Conversations decoding together: N contexts at depths about 512 (each
 * a little less than the one before, loaded from one prefilled cache)
 * decode g_steps tokens each (16 or more, as many as take a quarter of a
 * second alone, at most MAX_STEPS), greedy, taking turns (one hx_decode each in
 * turn, as hearth serve did) or batched (one hx_decode_seqs for all per
 * step, as it does now); tokens per second of both, measured in the same
 * run, best of REPS each, alternating. */
#define MAX_CONV 8
#define DEPTH 512
#define MAX_STEPS 256
static int g_steps = 16;
#define REPS 5

static int32_t greedy(const hx_ctx *c)
{
    const float *lg = hx_ctx_logits(c, -1);
    const int nv = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    int32_t best = 0;
    for (int i = 1; i < nv; i++) best = lg[i] > lg[best] ? i : best;
    return best;
}

/* Seconds of g_steps tokens for each of n conversations (0: failed). */
static double conv_seconds(hx_ctx **c, int n, int batched)
{
    int32_t tok[MAX_CONV];
    for (int i = 0; i < n; i++) {
        hx_ctx_truncate(c[i], DEPTH - 8 * i);
        tok[i] = (int32_t)(100 + i);
    }
    const double t0 = ld_now();
    for (int s = 0; s < g_steps; s++) {
        hx_seq_step q[MAX_CONV];
        for (int i = 0; i < n; i++) q[i] = (hx_seq_step){c[i], &tok[i], 1, 0, 0};
        if (batched ? hx_decode_seqs(q, n) != HX_OK : 0) return 0;
        for (int i = 0; i < n; i++) {
            if (!batched && hx_decode(c[i], &tok[i], 1, 0)) return 0;
            tok[i] = greedy(c[i]);
        }
    }
    return ld_now() - t0;
}

/* The best of REPS runs taking turns (*turns) and batched (*batched),
 * alternating, so that both see the machine's load alike; 0 if one
 * failed. */
static int best_of(hx_ctx **c, int n, double *turns, double *batched)
{
    *turns = *batched = 0;
    for (int r = 0; r < 2 * REPS; r++) {
        double *best = r % 2 ? batched : turns, t = conv_seconds(c, n, r % 2);
        if (t <= 0) return 0;
        *best = *best == 0 || t < *best ? t : *best;
    }
    return 1;
}

/* MAX_CONV contexts of path's model, their caches filled from one
 * prefilled prompt saved to dir and loaded into each. */
static int conv_contexts(hx_model *m, int threads, const char *dir, hx_ctx **c)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = DEPTH + MAX_STEPS + 8;
    cp.n_batch = 64;
    cp.n_threads = threads;
    int32_t prompt[DEPTH];
    for (int i = 0; i < DEPTH; i++) prompt[i] = 50 + i % 200;
    for (int i = 0; i < MAX_CONV; i++) {
        int got = 0;
        if (hx_ctx_new(m, &cp, &c[i], NULL)) return -1;
        if (i == 0 && (hx_decode(c[0], prompt, DEPTH, 0) ||
                       hx_ctx_prefix_save(c[0], dir, prompt, DEPTH, 0)))
            return -1;
        if (i > 0 && (hx_ctx_prefix_load(c[i], dir, prompt, DEPTH, DEPTH, &got) || got != DEPTH))
            return -1;
    }
    return 0;
}

static void batching(const char *path, int threads)
{
    hx_model *m = NULL;
    hx_ctx *c[MAX_CONV] = {0};
    hx_err err = {0};
    char dir[] = "/tmp/hx_serve_load_XXXXXX";
    hx_model_params mp = hx_model_default_params();
    if (!mkdtemp(dir) || hx_model_load(path, &mp, &m, &err) ||
        conv_contexts(m, threads, dir, c)) {
        printf("# %s: cannot set up the conversations %s\n", path, err.msg);
        exit(1);
    }
    const char *slash = strrchr(path, '/');
    double one = 0, t16;
    g_steps = 16;
    if ((t16 = conv_seconds(c, 1, 0)) <= 0) exit(1);
    g_steps = (int)(0.25 / (t16 / 16));
    g_steps = g_steps < 16 ? 16 : g_steps > MAX_STEPS ? MAX_STEPS : g_steps;
    for (int n = 1; n <= MAX_CONV; n *= 2) {
        double turns, batched;
        if (!best_of(c, n, &turns, &batched)) exit(1);
        const double tt = n * g_steps / turns, tb = n * g_steps / batched;
        if (n == 1) one = tb;
        printf("| %s | %d | %d | %d | %.1f | %.1f | %.2fx | %.2fx |\n", slash ? slash + 1 : path,
               threads, g_steps, n, tt, tb, tb / tt, tb / one);
        fflush(stdout);
    }
    for (int i = 0; i < MAX_CONV; i++) hx_ctx_free(c[i]);
    hx_model_free(m);
    sv_sh("rm -rf '%s'", dir);
}

/* The streams on the world's hearth-tiny (200 tokens each), then on
 * each model after the first given (32 tokens each: bigger ones). */
static void streams_all(const char *const *models, int n_models, int threads)
{
    printf("\n### Conversations streaming together (each on a slot of its own)\n\n"
           "| model | streams | tokens | seconds | tokens/s in all | tokens/s each |\n"
           "|---|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    streams(4, 200, NULL, threads);
    for (int i = 1; i < n_models; i++) streams(4, 32, models[i], threads);
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
    if (getenv("SERVE_LOAD_ONLY_STREAMS")) {
        streams_all(models, n_models, threads);
        return 0;
    }
    if (getenv("SERVE_LOAD_ONLY_BATCH")) {
        for (int i = 0; i < n_models; i++) batching(models[i], threads);
        return 0;
    }
    printf("### Loopback load (GET /v1/models over keep-alive; bad clients each get their status)\n\n"
           "| connections | bad | seconds | requests/s | p50 ms | p99 ms | max ms | bad answered | "
           "wrong | server RSS MiB | peak MiB |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    load(conns, seconds);
    streams_all(models, n_models, threads);
    printf("\n### Conversations decoding at depth about %d: taking turns against one batched "
           "pass per token\n\n| model | threads | tokens each | conversations | tokens/s "
           "taking turns | tokens/s batched | batched against turns | batched against one |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|\n", DEPTH);
    if (!n_models) models[n_models++] = "models/hearth-tiny.gguf";
    for (int i = 0; i < n_models; i++) batching(models[i], threads);
    return 0;
}
