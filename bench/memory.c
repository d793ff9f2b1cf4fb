/* memory.c (bench): fills a memory database with 100,000 memories and
 * 10,000 episodes of synthetic text and reports insert throughput and
 * recall latency (p50/p99).
 * Usage: memory [N_MEMORIES N_EPISODES N_QUERIES [KEEP_DB]] */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "memory/memory.h"

static unsigned long long rng = 0x2545F4914F6CDD1Dull;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* A vocabulary of pronounceable made-up words plus common English ones,
 * drawn with a skew (about Zipf) so some words are frequent. */
#define VOCAB 6000
static char vocab[VOCAB][16];
static const char *const common[] = {
    "the", "a", "to", "with", "on", "in", "for", "meeting", "email", "bob",
    "alice", "prefers", "likes", "before", "after", "noon", "morning",
    "friday", "project", "report", "call", "lunch", "team", "budget",
};

static void vocab_init(void)
{
    static const char *const syl[] = {"ka", "lo", "mi", "ten", "ra", "vo",
                                      "shi", "pe", "dan", "ul", "bri", "zo",
                                      "ne", "ta", "gor", "fi"};
    for (int i = 0; i < VOCAB; i++) {
        int n = 2 + i % 3, len = 0;
        for (int s = 0; s < n; s++)
            len += snprintf(vocab[i] + len, sizeof vocab[i] - (size_t)len, "%s",
                            syl[rnd(16)]);
    }
    for (size_t i = 0; i < sizeof common / sizeof *common; i++)
        snprintf(vocab[i], sizeof vocab[i], "%s", common[i]);
}

static const char *word(void)
{
    unsigned r = rnd(VOCAB);
    return vocab[rnd(r + 1)]; /* skewed toward low indexes */
}

static void sentence(char *buf, size_t n, int words)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < words && len + 20 < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? " " : "",
                                word());
}

static double now(void)
{
    return hx_time_mono();
}

/* CPU time of this thread: the machine is shared, so wall-clock latency
 * includes waiting for a core; both are reported. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *loadavg(void)
{
    static char buf[64] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) snprintf(buf, sizeof buf, "?");
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static const char *const kinds[] = {"preference", "person", "fact", "place"};

static int add_memory(hx_memory *m)
{
    char text[256];
    sentence(text, sizeof text, 6 + (int)rnd(9));
    hx_mem_new n = {.kind = kinds[rnd(4)], .text = text};
    hx_err err = {0};
    int rc = hx_memory_remember(m, &n, NULL, NULL, &err);
    if (rc) fprintf(stderr, "remember: %s\n", err.msg);
    return rc;
}

static int add_episode(hx_memory *m)
{
    char req[256], body[1024], msgs[1400], args[128];
    sentence(req, sizeof req, 8 + (int)rnd(8));
    sentence(body, sizeof body, 60 + (int)rnd(60));
    snprintf(msgs, sizeof msgs,
             "[{\"role\":\"user\",\"content\":\"%s\"},"
             "{\"role\":\"assistant\",\"content\":\"%s\"}]", req, body);
    snprintf(args, sizeof args, "{\"query\":\"%s\"}", word());
    hx_tool_call_rec calls[3] = {
        {"mail.search", args, "{\"hits\":[]}", HX_CALL_OK, 0},
        {"calendar.find_slots", args, "{\"slots\":[]}", HX_CALL_OK, 0},
        {"mail.send", args, NULL, HX_CALL_DENIED, 0}};
    hx_episode ep = {0};
    ep.request = req;
    ep.messages = msgs;
    ep.outcome = body;
    ep.model = "bench-model";
    ep.verdict = (int)rnd(4);
    ep.corrected = ep.verdict == 2 ? "corrected" : NULL;
    ep.calls = calls;
    ep.n_calls = (int)rnd(4);
    hx_err err = {0};
    int rc = hx_memory_episode_add(m, &ep, NULL, &err);
    if (rc) fprintf(stderr, "episode: %s\n", err.msg);
    return rc;
}

/* Inserts n items in transactions of batch (1: one commit each); returns
 * items per second of wall time, and in *per_cpu per second of CPU time. */
static double fill(hx_memory *m, int n, int batch, int (*add)(hx_memory *),
                   const char *label, double *per_cpu)
{
    hx_progress pr;
    hx_progress_start(&pr, label, n);
    double t0 = now(), c0 = cpu_now();
    for (int i = 0; i < n; i++) {
        if (batch > 1 && i % batch == 0) hx_memory_begin(m, NULL);
        if (add(m)) exit(1);
        if (batch > 1 && (i % batch == batch - 1 || i == n - 1))
            hx_memory_commit(m, NULL);
        if (i % 256 == 0) hx_progress_update(&pr, i, NULL);
    }
    hx_progress_finish(&pr);
    *per_cpu = n / (cpu_now() - c0);
    return n / (now() - t0);
}

typedef struct lat {
    double wall50, wall99, cpu50, cpu99, items;
} lat;

static void percentiles(double *t, int n, double *p50, double *p99)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *p50 = t[n / 2];
    *p99 = t[(n * 99) / 100];
}

static void recall_latency(hx_memory *m, int n, int mark_used, lat *r)
{
    double *wall = malloc(sizeof *wall * (size_t)n);
    double *cpu = malloc(sizeof *cpu * (size_t)n);
    hx_recall_params rp = hx_recall_default_params();
    rp.mark_used = mark_used;
    long items = 0;
    hx_progress pr;
    hx_progress_start(&pr, mark_used ? "recall" : "recall (read only)", n);
    for (int i = 0; i < n; i++) {
        char req[256];
        sentence(req, sizeof req, 5 + (int)rnd(8));
        char *sec = NULL;
        hx_mem_list *l = NULL;
        double t0 = now(), c0 = cpu_now();
        if (hx_memory_recall(m, req, &rp, &sec, &l, NULL)) exit(1);
        cpu[i] = (cpu_now() - c0) * 1e3;
        wall[i] = (now() - t0) * 1e3;
        items += l->n;
        free(sec);
        hx_mem_list_free(l);
        if (i % 16 == 0) hx_progress_update(&pr, i, NULL);
    }
    hx_progress_finish(&pr);
    percentiles(wall, n, &r->wall50, &r->wall99);
    percentiles(cpu, n, &r->cpu50, &r->cpu99);
    r->items = (double)items / n;
    free(wall);
    free(cpu);
}

static void print_lat(const char *what, const lat *r)
{
    printf("%s: p50 %.3f ms  p99 %.3f ms wall;  p50 %.3f ms  p99 %.3f ms "
           "CPU  (%.1f memories per section)\n", what, r->wall50, r->wall99,
           r->cpu50, r->cpu99, r->items);
}

static double forget_ms(hx_memory *m, int n)
{
    hx_mem_list *l = NULL;
    hx_memory_list(m, NULL, n, 1, &l, NULL);
    double t0 = now();
    for (int i = 0; i < l->n; i++) hx_memory_forget(m, l->items[i].id, NULL);
    double ms = (now() - t0) * 1e3 / (l->n ? l->n : 1);
    hx_mem_list_free(l);
    return ms;
}

static void fill_all(hx_memory *m, int n_mem, int n_ep)
{
    double cb[2], c1[2];
    double mem_b = fill(m, n_mem, 1000, add_memory, "memories", &cb[0]);
    double ep_b = fill(m, n_ep, 1000, add_episode, "episodes", &cb[1]);
    double mem_1 = fill(m, 500, 1, add_memory, "memories, 1/commit", &c1[0]);
    double ep_1 = fill(m, 200, 1, add_episode, "episodes, 1/commit", &c1[1]);
    printf("insert, 1000 per transaction: %.0f memories/s (with consolidation"
           " check), %.0f episodes/s wall;  %.0f and %.0f per CPU second\n",
           mem_b, ep_b, cb[0], cb[1]);
    printf("insert, one commit each (fsync): %.0f memories/s, %.0f "
           "episodes/s wall;  %.0f and %.0f per CPU second\n", mem_1, ep_1,
           c1[0], c1[1]);
}

/* With KEEP_DB the database is kept there, and reused (no filling, no
 * forgets) when it already exists: recall can be re-measured quickly. */
int main(int argc, char **argv)
{
    int n_mem = argc > 1 ? atoi(argv[1]) : 100000;
    int n_ep = argc > 2 ? atoi(argv[2]) : 10000;
    int n_q = argc > 3 ? atoi(argv[3]) : 2000;
    const char *keep = argc > 4 ? argv[4] : NULL;
    char dir[] = "/tmp/hx_bench_memory_XXXXXX", path[512];
    struct stat st;
    int reuse = keep && stat(keep, &st) == 0;
    if (keep) snprintf(path, sizeof path, "%s", keep);
    else if (!mkdtemp(dir)) return 1;
    else snprintf(path, sizeof path, "%s/memory.db", dir);
    vocab_init();
    hx_memory_params p = hx_memory_default_params();
    p.path = path;
    hx_memory *m = NULL;
    hx_err err = {0};
    if (hx_memory_open(&p, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("memory bench: %d memories, %d episodes, %d recall queries "
           "(synchronous=FULL, WAL)%s\n", n_mem, n_ep, n_q,
           reuse ? ", reusing the database" : "");
    if (!reuse) fill_all(m, n_mem, n_ep);
    lat r;
    recall_latency(m, n_q, 0, &r);
    print_lat("recall, read only", &r);
    recall_latency(m, n_q, 1, &r);
    print_lat("recall, marking use (default)", &r);
    printf("load average at the end: %s\n", loadavg());
    if (!reuse)
        printf("forget (incl. FTS merge): %.1f ms each\n", forget_ms(m, 10));
    if (stat(path, &st) == 0)
        printf("database: %.1f MB (%lld memories, %lld episodes)\n",
               st.st_size / 1e6, (long long)hx_memory_count(m),
               (long long)hx_memory_episode_count(m));
    hx_memory_close(m);
    if (keep) return 0;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) ? 1 : 0;
}
