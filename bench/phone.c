/* phone.c: the 30B-A3B shape (and dense shapes) in a phone's memory: Hearth
 * with --max-memory below the weights against llama.cpp, each in the same
 * memory cgroup with a read-bandwidth limit (../shared/tools/phone-sim).
 *
 * usage: bench/phone [--moe FILE] [--dense FILE,...] [--budgets 16,12,8,6]
 *                    [--bw 2G] [--margin MIB] [--tokens N] [--no-llama]
 *                    [--readme FILE | --no-readme] [--work DIR]
 * Every measurement is a child process under phone-sim (page cache dropped
 * first, counted against the limit): Hearth is this program re-executed
 * with --child, llama.cpp the reference harness `hxref bench` (mmap, no
 * repack). A child prints one "result" line; phone-sim its peak memory and
 * the bytes read from the disk. Also: the disk's own speed (--disk-probe),
 * pread against madvise for reading experts (--io-probe), and the eviction
 * policies replayed on the file's routing trace (--simulate). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/turn.h"
#include "engine/ctx_int.h"

#define GEN_A 8 /* tokens generated in the first turn */

/* ---- the prompt: two agent turns after the cached system message ---- */

/* Token file: "n_head n_a n_b n_prep" then the ids of turn A, then of turn
 * B; both start with the same n_head tokens (system text and tools); the
 * first n_prep of B are what hx_planner_prepare decodes ahead while the
 * user types (the head and the clock line but its last character). */
/* Of prompt (tokens t, n of them), the tokens hx_planner_prepare decodes
 * ahead: those of its text up to its clock line's last character, but the
 * last, as far as they are the prompt's. */
static int prepared_tokens(const hx_vocab *v, const char *prompt, const int32_t *t, int n)
{
    const size_t len = prepared_bytes(prompt);
    if (!len) return 0;
    int32_t *u = malloc((size_t)n * sizeof *u);
    int k = u ? hx_tokenize(v, prompt, len, u, n, 0, 1) - 1 : 0;
    int same = 0;
    while (same < k && u[same] == t[same]) same++;
    free(u);
    return same;
}

static int write_tokens(const hx_model *m, const char *path)
{
    char home[] = "/tmp/hx_phone_XXXXXX";
    if (!mkdtemp(home)) return -1;
    setenv("HEARTH_HOME", home, 1);
    toolset t;
    if (open_tools(&t)) return -1;
    turn ta = {0}, tb = {0};
    ta.text = render(&t, HX_TPL_QWEN3, 0, requests[0], &ta.marks);
    tb.text = render(&t, HX_TPL_QWEN3, 1, requests[1], &tb.marks);
    const char *pa = ta.text, *pb = tb.text;
    const hx_vocab *v = hx_model_vocab(m);
    int32_t *ids = malloc(2 * 16384 * sizeof *ids);
    int na = pa && ids ? hx_tokenize(v, pa, strlen(pa), ids, 16384, 0, 1) : -1;
    int nb = pb && ids ? hx_tokenize(v, pb, strlen(pb), ids + 16384, 16384, 0, 1) : -1;
    int nh = pa ? head_tokens(m, &ta) : 0;
    int np = pb && nb > 0 ? prepared_tokens(v, pb, ids + 16384, nb) : 0;
    FILE *f = na > 0 && nb > 0 && nh > 0 && np >= nh ? fopen(path, "w") : NULL;
    if (f) {
        fprintf(f, "%d %d %d %d\n", nh, na, nb, np);
        for (int i = 0; i < na; i++) fprintf(f, "%d\n", ids[i]);
        for (int i = 0; i < nb; i++) fprintf(f, "%d\n", ids[16384 + i]);
        fclose(f);
    }
    free(ta.text);
    free(tb.text);
    hx_tpl_marks_free(&ta.marks);
    hx_tpl_marks_free(&tb.marks);
    free(ids);
    close_tools(&t);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
    if (system(cmd)) {}
    return f ? 0 : -1;
}

typedef struct turns {
    int nh, na, nb, np;
    int32_t *a, *b;
} turns;

static int read_tokens(const char *path, turns *t)
{
    FILE *f = fopen(path, "r");
    memset(t, 0, sizeof *t);
    if (!f || fscanf(f, "%d %d %d %d", &t->nh, &t->na, &t->nb, &t->np) != 4 || t->na < 1 ||
        t->nb < 1 || t->na > 16384 || t->nb > 16384 || t->np < t->nh || t->np >= t->nb) {
        if (f) fclose(f);
        return -1;
    }
    t->a = malloc((size_t)(t->na + t->nb) * sizeof(int32_t));
    t->b = t->a + t->na;
    int ok = t->a != NULL;
    for (int i = 0; ok && i < t->na + t->nb; i++) ok = fscanf(f, "%d", &t->a[i]) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* ---- the child: one measurement ---- */

static int greedy(const hx_ctx *c)
{
    const float *lg = hx_ctx_logits(c, -1);
    int best = 0, nv = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    for (int i = 1; i < nv; i++) best = lg[i] > lg[best] ? i : best;
    return best;
}

/* n greedy tokens, each folded into *hash (FNV-1a over the ids): equal
 * hashes, the same tokens as another run. */
static int gen(hx_ctx *c, int n, uint64_t *hash)
{
    for (int i = 0; i < n; i++) {
        int32_t t = greedy(c);
        *hash = (*hash ^ (uint32_t)t) * 0x100000001b3ull;
        if (hx_decode(c, &t, 1, 0)) return -1;
    }
    return 0;
}

static void stats(const hx_ctx *c, hx_wc_stats *s)
{
    if (c->wc) hx_wc_stats_get(c->wc, s);
    else memset(s, 0, sizeof *s);
}

typedef struct child_args {
    const char *model, *tokens, *prefix, *trace;
    size_t cap;
    int uniform, n_gen, threads;
} child_args;

/* The anonymous and page-cache bytes of this process's memory cgroup now
 * (cgroup v1 "rss" and "cache", or v2 "anon" and "file"), in MiB; -1
 * where unreadable. */
static void cgroup_mem(double *anon, double *file, double *peak)
{
    char path[700] = "", line[512];
    *anon = *file = *peak = -1;
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *v1 = strstr(line, ":memory:");
        if (v1) snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.stat", v1 + 8);
        else if (!strncmp(line, "0::", 3) && !path[0])
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.stat", line + 3);
    }
    if (f) fclose(f);
    char pk[720];
    snprintf(pk, sizeof pk, "%.*s/%s", (int)(strrchr(path, '/') ? strrchr(path, '/') - path : 0),
             path, strstr(path, "/memory/") ? "memory.max_usage_in_bytes" : "memory.peak");
    f = path[0] ? fopen(pk, "r") : NULL;
    if (f && fgets(line, sizeof line, f)) *peak = atof(line) / 1048576.0;
    if (f) fclose(f);
    f = path[0] ? fopen(path, "r") : NULL;
    while (f && fgets(line, sizeof line, f)) {
        const char *sp = strchr(line, ' ');
        double v = sp ? atof(sp + 1) / 1048576.0 : 0;
        if (!strncmp(line, "anon ", 5) || !strncmp(line, "rss ", 4)) *anon = v;
        if (!strncmp(line, "file ", 5) || !strncmp(line, "cache ", 6)) *file = v;
    }
    if (f) fclose(f);
}

/* The rest of a prompt after its cached start, as the agent's source
 * prefills it (the rows of the whole prompt's prefill). */
static int prefill_rest(hx_ctx *c, const int32_t *t, int n)
{
    hx_prefill_params pp = hx_prefill_default_params();
    pp.whole_prompt = 1;
    int done;
    return hx_prefill(c, t, n, &pp, &done);
}

/* The cached head from the prefix cache; a turn (TTFT: its uncached
 * tokens to the first token's logits); the next turn in the same process
 * (warm in-process); n_gen decoded tokens. */
static int child(const child_args *a)
{
    turns t;
    if (!strcmp(a->tokens, "-")) { /* no agent turn: a 64-token prompt, twice */
        t = (turns){.nh = 0, .na = 64, .nb = 64};
        t.a = malloc(128 * sizeof(int32_t));
        t.b = t.a + 64;
        for (int i = 0; t.a && i < 128; i++) t.a[i] = (i % 64) * 997 % 32000 + 10;
    } else if (read_tokens(a->tokens, &t))
        return fprintf(stderr, "phone: bad token file\n"), 1;
    double t0 = hx_time_mono();
    hx_model *m;
    hx_err err = {0};
    if (hx_model_load(a->model, NULL, &m, &err)) return fprintf(stderr, "phone: %s\n", err.msg), 1;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = t.nh ? 4096 : 512;
    cp.n_threads = a->threads;
    cp.max_bytes = a->cap;
    hx_ctx *c;
    if (hx_ctx_new(m, &cp, &c, &err)) return fprintf(stderr, "phone: %s\n", err.msg), 1;
    hx_ctx_set_routing(c, a->uniform, 7, NULL);
    const double t_load = hx_time_mono() - t0;
    double anon0, file0, peak0;
    cgroup_mem(&anon0, &file0, &peak0);
    int n_loaded = 0;
    t0 = hx_time_mono();
    if (t.nh) hx_ctx_prefix_load(c, a->prefix, t.a, t.nh, t.nh, &n_loaded);
    const double t_prefix = hx_time_mono() - t0;
    t0 = hx_time_mono();
    int rc = prefill_rest(c, t.a + n_loaded, t.na - n_loaded);
    const double ttft_disk = hx_time_mono() - t0;
    uint64_t hash = 0xcbf29ce484222325ull;
    if (!rc) rc = gen(c, GEN_A, &hash);
    hx_ctx_truncate(c, t.nh);
    hx_wc_stats s0, s1;
    stats(c, &s0);
    t0 = hx_time_mono();
    if (!rc) rc = prefill_rest(c, t.b + t.nh, t.nb - t.nh);
    const double ttft_mem = hx_time_mono() - t0;
    stats(c, &s1); /* what the warm turn read, and waited for */
    const double turn_mb = (double)(s1.bytes_read - s0.bytes_read) / 1e6;
    const double turn_wait = s1.wait_s - s0.wait_s;
    /* the same turn with its start decoded while the user typed
     * (hx_planner_prepare): only the request's own tokens are timed */
    double ttft_prep = -1;
    if (!rc && t.np > t.nh) {
        hx_ctx_truncate(c, t.nh);
        rc = prefill_rest(c, t.b + t.nh, t.np - t.nh);
        t0 = hx_time_mono();
        if (!rc) rc = prefill_rest(c, t.b + t.np, t.nb - t.np);
        ttft_prep = hx_time_mono() - t0;
    }
    FILE *tr = a->trace ? fopen(a->trace, "w") : NULL;
    if (tr) hx_ctx_set_routing(c, a->uniform, 7, tr);
    stats(c, &s0);
    t0 = hx_time_mono();
    if (!rc) rc = gen(c, a->n_gen, &hash);
    const double t_gen = hx_time_mono() - t0;
    stats(c, &s1);
    if (tr) fclose(tr);
    if (rc) fprintf(stderr, "phone: %s\n", hx_ctx_errmsg(c));
    double anon, file, peak;
    cgroup_mem(&anon, &file, &peak);
    const double n = a->n_gen;
    printf("result load %.2f prefix %.2f head %d of %d turn %d ttft_disk %.3f ttft_mem %.3f "
           "ttft_prep %.3f prep_turn %d turn_mb %.0f turn_wait %.3f tps %.3f bytes_tok %.0f uses_tok %.1f reads_tok %.1f wait_tok %.3f anon %.0f file %.0f peak_load %.0f anon_load %.0f file_load %.0f tokens %016llx\n",
           t_load, t_prefix, n_loaded, t.nh, t.nb - t.nh, ttft_disk, ttft_mem, ttft_prep,
           t.nb - t.np, turn_mb,
           turn_wait, n / t_gen,
           (double)(s1.bytes_read - s0.bytes_read) / n, (double)(s1.uses - s0.uses) / n,
           (double)(s1.misses - s0.misses) / n, (s1.wait_s - s0.wait_s) / n, anon, file, peak0, anon0, file0,
           (unsigned long long)hash);
    hx_ctx_free(c);
    hx_model_free(m);
    free(t.a);
    return rc ? 1 : 0;
}

/* The system message prefilled once without a cap and saved to the prefix
 * cache the children load from. */
static int setup(const char *model, const char *tokens, const char *prefix)
{
    hx_model *m;
    hx_err err = {0};
    if (hx_model_load(model, NULL, &m, &err)) return fprintf(stderr, "phone: %s\n", err.msg), 1;
    turns t;
    if (write_tokens(m, tokens) || read_tokens(tokens, &t)) return 1;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 4096;
    cp.n_threads = 2;
    hx_ctx *c;
    int rc = hx_ctx_new(m, &cp, &c, &err);
    if (!rc) rc = hx_decode(c, t.a, t.nh, 0);
    if (!rc) rc = hx_ctx_prefix_save(c, prefix, t.a, t.nh, 0);
    if (rc) fprintf(stderr, "phone: setup: %s\n", c ? hx_ctx_errmsg(c) : err.msg);
    fprintf(stderr, "phone: %s: head %d tokens, turns %d and %d\n", model, t.nh, t.na, t.nb);
    hx_ctx_free(c);
    hx_model_free(m);
    free(t.a);
    return rc ? 1 : 0;
}

/* ---- disk and I/O probes ---- */

static double probe_read(int fd, char *buf, size_t len, const uint64_t *offs, int n)
{
    double t0 = hx_time_mono();
    size_t got = 0;
    for (int i = 0; i < n; i++) {
        ssize_t r = pread(fd, buf, len, (off_t)offs[i]);
        if (r > 0) got += (size_t)r;
    }
    return (double)got / (hx_time_mono() - t0);
}

/* Sequential 8 MiB and random expert-sized (2.6 MiB) direct reads of the
 * file, unthrottled: the disk's speed. */
static int disk_probe(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECT);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) return perror(path), 1;
    const size_t big = (size_t)8 << 20, ex = (size_t)2654208 / 4096 * 4096;
    char *buf = hx_aligned_alloc(4096, big);
    uint64_t offs[256];
    for (int i = 0; i < 256; i++) offs[i] = (uint64_t)i * big;
    double seq = probe_read(fd, buf, big, offs, 256);
    uint64_t s = 12345;
    for (int i = 0; i < 256; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        offs[i] = (s >> 16) % (uint64_t)(st.st_size - (off_t)ex) / 4096 * 4096;
    }
    double rnd = probe_read(fd, buf, ex, offs, 256);
    printf("disk sequential %.2f GB/s, random 2.6 MB %.2f GB/s (O_DIRECT, one thread)\n",
           seq / 1e9, rnd / 1e9);
    free(buf);
    close(fd);
    return 0;
}

typedef struct io_job {
    const char *mode;
    int fd;
    const char *map;
    uint64_t *offs;
    int n;
    size_t len;
    double sum;
} io_job;

/* Reads its share of ranges as the cache would with one mode: direct
 * pread, buffered pread then fadvise(DONTNEED), or madvise(WILLNEED) on
 * the mapping, a touch of every page, madvise(DONTNEED) + fadvise. */
static void *io_thread(void *p)
{
    io_job *j = p;
    char *buf = hx_aligned_alloc(4096, j->len + 8192);
    for (int i = 0; i < j->n; i++) {
        uint64_t a = j->offs[i];
        if (!strcmp(j->mode, "madvise")) {
            const char *q = j->map + a;
            madvise((void *)q, j->len, MADV_WILLNEED);
            for (size_t k = 0; k < j->len; k += 4096) j->sum += q[k];
            madvise((void *)q, j->len, MADV_DONTNEED);
            posix_fadvise(j->fd, (off_t)a, (off_t)j->len, POSIX_FADV_DONTNEED);
        } else {
            if (pread(j->fd, buf, j->len, (off_t)a) < 0) j->sum = -1;
            if (!strcmp(j->mode, "buffered"))
                posix_fadvise(j->fd, (off_t)a, (off_t)j->len, POSIX_FADV_DONTNEED);
        }
    }
    free(buf);
    return NULL;
}

static int io_probe(const char *path, const char *mode, int nth)
{
    int fd = open(path, O_RDONLY | (!strcmp(mode, "direct") ? O_DIRECT : 0));
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) return perror(path), 1;
    const char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    enum { N = 384, TH_MAX = 16 };
    const int TH = nth < 1 ? 1 : nth > TH_MAX ? TH_MAX : nth;
    const size_t len = (size_t)2654208 / 4096 * 4096;
    uint64_t offs[N], s = 99;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        offs[i] = (s >> 16) % (uint64_t)(st.st_size - (off_t)len) / 4096 * 4096;
    }
    io_job j[TH_MAX];
    pthread_t th[TH_MAX];
    double t0 = hx_time_mono();
    for (int i = 0; i < TH; i++) {
        j[i] = (io_job){mode, fd, map, offs + i * (N / TH), N / TH, len, 0};
        pthread_create(&th[i], NULL, io_thread, &j[i]);
    }
    for (int i = 0; i < TH; i++) pthread_join(th[i], NULL);
    double dt = hx_time_mono() - t0;
    printf("result io %s %.3f GB/s (%d reads of %zu KiB, %d threads)\n", mode,
           (double)N * (double)len / dt / 1e9, N, len >> 10, TH);
    munmap((void *)map, (size_t)st.st_size);
    close(fd);
    return 0;
}

/* ---- eviction policies replayed on a routing trace ---- */

typedef struct sim {
    int ne, nl, slots;      /* per layer */
    int global;             /* 1: one pool of nl * slots for all layers */
    int lfu;                /* 1: evict the least used so far, else LRU */
    int *held;              /* (nl, ne) 1 when in the cache */
    uint64_t *last, *freq;  /* (nl, ne) */
    int *count;             /* (nl) held per layer, or [0] for global */
    uint64_t clock, hits, uses;
} sim;

static void sim_use(sim *s, int l, int x)
{
    const int k = l * s->ne + x;
    s->uses++;
    s->freq[k]++;
    s->last[k] = ++s->clock;
    if (s->held[k]) {
        s->hits++;
        return;
    }
    int *cnt = &s->count[s->global ? 0 : l];
    const int cap = s->global ? s->slots * s->nl : s->slots;
    if (*cnt >= cap) { /* evict within the layer, or anywhere */
        int v = -1;
        for (int j = s->global ? 0 : l * s->ne; j < (s->global ? s->nl : l + 1) * s->ne; j++) {
            if (!s->held[j] || j == k) continue;
            if (v < 0 || (s->lfu ? s->freq[j] < s->freq[v] ||
                                       (s->freq[j] == s->freq[v] && s->last[j] < s->last[v])
                                 : s->last[j] < s->last[v]))
                v = j;
        }
        s->held[v] = 0;
        (*cnt)--;
    }
    s->held[k] = 1;
    (*cnt)++;
}

/* Hit rates of LRU, LFU (per layer) and LRU over one pool, for the given
 * slots per layer, on the trace (lines "layer e1 e2 ..."). */
static int simulate(const char *path, int ne, int nl, int nu, const char *slot_list)
{
    FILE *f = fopen(path, "r");
    if (!f) return perror(path), 1;
    int cap = 1 << 20, n = 0, *tr = malloc((size_t)cap * sizeof(int));
    int l, x;
    while (tr && fscanf(f, "%d", &l) == 1) {
        for (int u = 0; u < nu && fscanf(f, "%d", &x) == 1; u++) {
            if (n + 2 > cap) break;
            tr[n++] = l;
            tr[n++] = x;
        }
    }
    fclose(f);
    printf("trace %s: %d uses\n", path, n / 2);
    for (const char *p = slot_list; p && *p;) {
        int slots = atoi(p);
        printf("slots/layer %3d (%4.1f%%):", slots, 100.0 * slots / ne);
        for (int pol = 0; pol < 3; pol++) {
            const size_t nk = (size_t)ne * (size_t)nl;
            sim s = {.ne = ne, .nl = nl, .slots = slots, .global = pol == 2, .lfu = pol == 1,
                     .held = calloc(nk, sizeof(int)), .last = calloc(nk, 8),
                     .freq = calloc(nk, 8), .count = calloc((size_t)nl, sizeof(int))};
            for (int i = 0; i < n; i += 2) sim_use(&s, tr[i], tr[i + 1]);
            printf("  %s %.1f%%", pol == 0 ? "LRU" : pol == 1 ? "LFU" : "global-LRU",
                   100.0 * (double)s.hits / (double)(s.uses ? s.uses : 1));
            free(s.held), free(s.last), free(s.freq), free(s.count);
        }
        printf("\n");
        p = strchr(p, ',');
        if (p) p++;
    }
    free(tr);
    return 0;
}

/* ---- the parent: every row under phone-sim ---- */

typedef struct opts {
    char moe[1024], dense[2048], budgets[128], bw[32], work[1024], readme[1024];
    char phone_sim[1024], hxref[1024], self[1024];
    int margin_mib, tokens, llama, threads;
} opts;

typedef struct meas {
    int ok;
    double peak_mib, read_mib, wall;
    char line[512];
} meas;

/* Runs argv under phone-sim (mem, read bandwidth; mem "" runs it as it is)
 * and collects its "result" line and phone-sim's figures. */
static meas run_sim(const opts *o, const char *mem, char *const *argv)
{
    meas r = {0};
    char out[1100], err[1100], cmd[8192];
    snprintf(out, sizeof out, "%s/child.out", o->work);
    snprintf(err, sizeof err, "%s/child.err", o->work);
    int n = mem[0] ? snprintf(cmd, sizeof cmd, "%s --mem %s --read-bw %s --dev %s --",
                              o->phone_sim, mem, o->bw, o->work)
                   : snprintf(cmd, sizeof cmd, "exec");
    for (int i = 0; argv[i]; i++) n += snprintf(cmd + n, sizeof cmd - (size_t)n, " '%s'", argv[i]);
    snprintf(cmd + n, sizeof cmd - (size_t)n, " >'%s' 2>'%s'", out, err);
    fprintf(stderr, "phone: %s\n", cmd);
    double t0 = hx_time_mono();
    int rc = system(cmd);
    r.wall = hx_time_mono() - t0;
    char buf[4096];
    FILE *f = fopen(out, "r");
    while (f && fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "result", 6) || strchr(buf, '.')) snprintf(r.line, sizeof r.line, "%s", buf);
    if (f) fclose(f);
    f = fopen(err, "r");
    while (f && fgets(buf, sizeof buf, f)) {
        const char *p = strstr(buf, "phone-sim: mem limit");
        if (p) sscanf(strstr(p, "peak"), "peak %lf MiB", &r.peak_mib);
        if (p && strstr(p, "read from disk")) sscanf(strstr(p, "read from disk"), "read from disk %lf", &r.read_mib);
        if (!p && buf[0] && !strstr(buf, "llama") && strstr(buf, "phone:")) fputs(buf, stderr);
    }
    if (f) fclose(f);
    r.ok = rc == 0;
    return r;
}

static double field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? atof(p + strlen(key)) : -1;
}

/* ---- main ---- */

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->budgets, sizeof o->budgets, "16,12,8,6");
    snprintf(o->bw, sizeof o->bw, "2G");
    o->margin_mib = 384;
    o->tokens = 24;
    o->llama = 1;
    o->threads = 2;
    const char *sd = getenv("HEARTH_SHARED_DATA");
    snprintf(o->phone_sim, sizeof o->phone_sim, "%s/../tools/phone-sim", sd ? sd : "../shared/data");
    snprintf(o->hxref, sizeof o->hxref, "%s/tests/ref/hxref", getenv("HEARTH_BUILD") ? getenv("HEARTH_BUILD") : "build");
    snprintf(o->work, sizeof o->work, "%s/phone", getenv("HEARTH_BUILD") ? getenv("HEARTH_BUILD") : "build");
    snprintf(o->readme, sizeof o->readme, "bench/README.md");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *dst = NULL;
        size_t dn = 0;
        if (!strcmp(a, "--no-llama")) { o->llama = 0; continue; }
        if (!strcmp(a, "--no-readme")) { o->readme[0] = 0; continue; }
        if (!v) return -1;
        if (!strcmp(a, "--moe")) dst = o->moe, dn = sizeof o->moe;
        else if (!strcmp(a, "--dense")) dst = o->dense, dn = sizeof o->dense;
        else if (!strcmp(a, "--budgets")) dst = o->budgets, dn = sizeof o->budgets;
        else if (!strcmp(a, "--bw")) dst = o->bw, dn = sizeof o->bw;
        else if (!strcmp(a, "--work")) dst = o->work, dn = sizeof o->work;
        else if (!strcmp(a, "--readme")) dst = o->readme, dn = sizeof o->readme;
        else if (!strcmp(a, "--phone-sim")) dst = o->phone_sim, dn = sizeof o->phone_sim;
        else if (!strcmp(a, "--hxref")) dst = o->hxref, dn = sizeof o->hxref;
        else if (!strcmp(a, "--margin")) o->margin_mib = atoi(v);
        else if (!strcmp(a, "--tokens")) o->tokens = atoi(v);
        else return -1;
        if (dst) snprintf(dst, dn, "%s", v);
        i++;
    }
    return 0;
}

/* Hearth under phone-sim (mem "" : as it is) with a cap of cap_mib. */
static meas hearth(const opts *o, const char *model, const char *mem, size_t cap_mib,
                   int uniform, const char *trace, int agent_turn)
{
    char cap[32], uni[8], ntok[16], tok[1100], pre[1100];
    snprintf(cap, sizeof cap, "%zu", cap_mib << 20);
    snprintf(uni, sizeof uni, "%d", uniform);
    snprintf(ntok, sizeof ntok, "%d", o->tokens);
    snprintf(tok, sizeof tok, "%s/%s.tokens", o->work, strrchr(model, '/') ? strrchr(model, '/') + 1 : model);
    snprintf(pre, sizeof pre, "%s/prefix", o->work);
    if (!agent_turn) snprintf(tok, sizeof tok, "-");
    char *argv[] = {(char *)o->self, "--child", (char *)model, cap, uni, ntok, tok, pre,
                    (char *)(trace ? trace : "-"), NULL};
    return run_sim(o, mem, argv);
}

static meas llama(const opts *o, const char *model, const char *mem, int pp, int tg)
{
    char spp[16], stg[16];
    snprintf(spp, sizeof spp, "%d", pp);
    snprintf(stg, sizeof stg, "%d", tg);
    setenv("HXREF_REPACK", "0", 1); /* mmap, no copy: what fits a phone at all */
    char *argv[] = {(char *)o->hxref, "bench", (char *)model, "2", spp, stg, NULL};
    return run_sim(o, mem, argv);
}

typedef struct row {
    char shape[64], budget[16], engine[16], routing[16];
    char tokens[20], same[8]; /* the decoded tokens' hash; "yes": as uncapped */
    meas m;
    double tps, ttft_mem, ttft_disk, ttft_prep, bytes_tok, hit; /* ttft_prep: the turn
                          prepared while the user typed (hx_planner_prepare); < 0: none */
    double turn_mb, turn_wait; /* the warm turn's reads of the file, and the wait */
} row;

static void hearth_row(row *r, const meas *m)
{
    r->m = *m;
    r->tps = m->ok ? field(m->line, "tps ") : -1;
    r->ttft_mem = field(m->line, "ttft_mem ");
    r->ttft_disk = field(m->line, "ttft_disk ");
    r->ttft_prep = strstr(m->line, "ttft_prep ") ? field(m->line, "ttft_prep ") : -1;
    r->turn_mb = field(m->line, "turn_mb ");
    r->turn_wait = field(m->line, "turn_wait ");
    r->bytes_tok = field(m->line, "bytes_tok ");
    double uses = field(m->line, "uses_tok "), reads = field(m->line, "reads_tok ");
    r->hit = uses > 0 ? 1.0 - reads / uses : -1;
    const char *t = strstr(m->line, "tokens ");
    if (m->ok && t) snprintf(r->tokens, sizeof r->tokens, "%.16s", t + 7);
}

/* Whether r decoded the tokens of the uncapped run ref. */
static void same_tokens(row *r, const row *ref)
{
    snprintf(r->same, sizeof r->same, "%s", !r->tokens[0] || !ref->tokens[0] ? "-"
             : strcmp(r->tokens, ref->tokens) ? "NO" : "yes");
}

static void llama_row(row *r, const meas *m, int pp, int tg)
{
    double tpp = 0, ttg = 0;
    r->m = *m;
    r->tps = m->ok && sscanf(m->line, "%lf %lf", &tpp, &ttg) == 2 && ttg > 0 ? tg / ttg : -1;
    r->ttft_mem = r->ttft_disk = m->ok ? tpp : -1;
    r->ttft_prep = -1;
    r->bytes_tok = -1;
    r->hit = -1;
    r->tokens[0] = r->same[0] = 0;
    (void)pp;
}

static void print_row(hx_buf *b, const row *r)
{
    char hit[16] = "-", bt[16] = "-";
    if (r->hit >= 0) snprintf(hit, sizeof hit, "%.0f%%", 100 * r->hit);
    if (r->bytes_tok >= 0) snprintf(bt, sizeof bt, "%.0f", r->bytes_tok / 1e6);
    char tps[16] = "failed", prep[16] = "-";
    if (r->tps >= 0) snprintf(tps, sizeof tps, "%.2f", r->tps);
    if (r->ttft_prep >= 0) snprintf(prep, sizeof prep, "%.2f", r->ttft_prep);
    hx_buf_printf(b, "| %s | %s | %s | %s | %s | %.2f / %s / %.2f | %s | %s | %.0f | %.0f | %s |\n",
                  r->shape, r->budget, r->engine, r->routing, tps, r->ttft_mem, prep,
                  r->ttft_disk, bt, hit, r->m.peak_mib, r->m.read_mib,
                  r->same[0] ? r->same : "-");
}


/* Slots per layer of a cap on a MoE model (its plan), or 0. */
static int slots_per_layer(const char *model, size_t cap)
{
    hx_model *m;
    hx_err err = {0};
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    if (hx_model_load(model, &mp, &m, &err)) return 0;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 4096;
    cp.n_threads = 2;
    cp.max_bytes = cap;
    hx_ctx_mem mem;
    int n = hx_ctx_memory(m, &cp, &mem, &err) || !mem.streamed ? 0
            : mem.w_slots / hx_model_hparams(m)->n_layer;
    hx_model_free(m);
    return n;
}

static const char *base_name(const char *p) { return strrchr(p, '/') ? strrchr(p, '/') + 1 : p; }

/* Tokens and the prefix cache of a model, made once. */
static int prepare(const opts *o, const char *model, int *turn_tokens)
{
    char tok[1100], pre[1100];
    snprintf(tok, sizeof tok, "%s/%s.tokens", o->work, base_name(model));
    snprintf(pre, sizeof pre, "%s/prefix", o->work);
    turns t;
    if (read_tokens(tok, &t)) {
        char *argv[] = {(char *)o->self, "--setup", (char *)model, tok, pre, NULL};
        if (!run_sim(o, "", argv).ok || read_tokens(tok, &t)) return -1;
    }
    *turn_tokens = t.nb - t.nh;
    free(t.a);
    return 0;
}

/* Reads the whole file once so that the uncapped runs find it in the page
 * cache (the unconstrained speed: the file fits in this machine's RAM). */
static void warm(const char *path)
{
    int fd = open(path, O_RDONLY);
    char *buf = malloc((size_t)8 << 20);
    while (fd >= 0 && buf && read(fd, buf, (size_t)8 << 20) > 0) {}
    free(buf);
    if (fd >= 0) close(fd);
}

static const char *HEAD =
    "| shape | budget | engine | routing | decode tok/s | TTFT warm s (in-process / prepared "
    "while the user types / from disk) "
    "| MB read/token | hit rate | peak MiB (page cache incl.) | MiB read from disk "
    "| tokens as uncapped |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|\n";

/* The fastest reading of the file the probes measured (bytes/s): the disk
 * delivers no more than that, whatever phone-sim's limit. */
static double g_disk_best;

static void moe_rows(const opts *o, hx_buf *b, hx_buf *v)
{
    int nt = 0;
    if (prepare(o, o->moe, &nt)) {
        hx_buf_printf(b, "MoE setup failed\n");
        return;
    }
    char trace[1100];
    snprintf(trace, sizeof trace, "%s/route.trace", o->work);
    row unc[2];
    for (int u = 0; u < 2; u++) {
        warm(o->moe);
        meas m = hearth(o, o->moe, "", 0, u, u ? NULL : trace, 1);
        unc[u] = (row){.shape = "30B-A3B", .budget = "none", .engine = "Hearth"};
        snprintf(unc[u].routing, sizeof unc[u].routing, u ? "uniform" : "file");
        hearth_row(&unc[u], &m);
        print_row(b, &unc[u]);
    }
    char slots[256] = "";
    for (const char *p = o->budgets; *p;) {
        const int gib = atoi(p);
        const size_t cap = ((size_t)gib << 10) - (size_t)o->margin_mib;
        char mem[16];
        snprintf(mem, sizeof mem, "%dG", gib);
        row r[3];
        for (int u = 0; u < 2; u++) {
            meas m = hearth(o, o->moe, mem, cap, u, NULL, 1);
            r[u] = (row){.shape = "30B-A3B", .engine = "Hearth"};
            snprintf(r[u].budget, sizeof r[u].budget, "%d GiB", gib);
            snprintf(r[u].routing, sizeof r[u].routing, u ? "uniform" : "file");
            hearth_row(&r[u], &m);
            same_tokens(&r[u], &unc[u]);
            print_row(b, &r[u]);
        }
        if (o->llama) {
            meas m = llama(o, o->moe, mem, nt, 4);
            r[2] = (row){.shape = "30B-A3B", .engine = "llama.cpp", .routing = "file"};
            snprintf(r[2].budget, sizeof r[2].budget, "%d GiB", gib);
            llama_row(&r[2], &m, nt, 4);
            print_row(b, &r[2]);
        }
        const double disk = r[1].bytes_tok > 0 ? atof(o->bw) * 1e9 / r[1].bytes_tok : 0;
        const double best = r[1].bytes_tok > 0 ? g_disk_best / r[1].bytes_tok : 0;
        hx_buf_printf(v, "- %d GiB: file router %.2f tok/s = %.2fx the unconstrained %.2f "
                      "(target >= 0.5); uniform %.2f tok/s = %.2fx what the disk allows (%.2f: "
                      "%.0f MB missed a token at %s/s; target >= 0.8)", gib, r[0].tps,
                      r[0].tps / unc[0].tps, unc[0].tps, r[1].tps, disk > 0 ? r[1].tps / disk : 0,
                      disk, r[1].bytes_tok / 1e6, o->bw);
        if (best > 0 && best < disk)
            hx_buf_printf(v, ", %.2fx what this disk delivered at best (%.2f GB/s: %.2f tok/s)",
                          r[1].tps / best, g_disk_best / 1e9, best);
        if (o->llama)
            hx_buf_printf(v, "; llama.cpp %.3f tok/s: Hearth %.1fx (target >= 10)", r[2].tps,
                          r[2].tps > 0 ? r[0].tps / r[2].tps : 0);
        hx_buf_printf(v, "; warm TTFT %.2f s (it read %.0f MB of weights and waited %.2f s "
                      "for them), %.2f s with the prompt's start decoded while the user "
                      "types (hearth chat; target < 2)\n", r[0].ttft_mem, r[0].turn_mb,
                      r[0].turn_wait, r[0].ttft_prep);
        size_t sl = strlen(slots);
        snprintf(slots + sl, sizeof slots - sl, "%s%d", sl ? "," : "",
                 slots_per_layer(o->moe, cap << 20));
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    char out[1100];
    char *argv[] = {(char *)o->self, "--simulate", trace, "128", "48", "8", slots, NULL};
    meas m = run_sim(o, "", argv);
    char *txt = NULL;
    size_t n = 0;
    snprintf(out, sizeof out, "%s/child.out", o->work);
    if (m.ok && hx_read_file(out, 1 << 20, &txt, &n, NULL) == HX_OK)
        hx_buf_printf(v, "\nEviction policies replayed on the file router's trace (%d decoded "
                      "tokens, uncapped run):\n```\n%s```\n", o->tokens, txt);
    free(txt);
}

static void dense_rows(const opts *o, hx_buf *b)
{
    for (const char *p = o->dense; *p;) {
        char model[1024];
        size_t len = strcspn(p, ",");
        snprintf(model, sizeof model, "%.*s", (int)len, p);
        struct stat st;
        const int nt = 64;
        if (stat(model, &st)) {
            hx_buf_printf(b, "| %s | | | | setup failed | | | | | |\n", base_name(model));
            break;
        }
        const size_t half = (size_t)st.st_size / 2 >> 20, cap = half - half / 8;
        char mem[16], bud[16];
        snprintf(mem, sizeof mem, "%zuM", half);
        snprintf(bud, sizeof bud, "%zu MiB", half);
        row r = {.budget = "none", .engine = "Hearth", .routing = "-"};
        snprintf(r.shape, sizeof r.shape, "%s", base_name(model));
        warm(model);
        meas m = hearth(o, model, "", 0, 0, NULL, 0);
        hearth_row(&r, &m);
        print_row(b, &r);
        snprintf(r.budget, sizeof r.budget, "%s", bud);
        const row ref = r;
        m = hearth(o, model, mem, cap, 0, NULL, 0);
        hearth_row(&r, &m);
        same_tokens(&r, &ref);
        print_row(b, &r);
        if (o->llama) {
            snprintf(r.engine, sizeof r.engine, "llama.cpp");
            m = llama(o, model, mem, nt, 8);
            llama_row(&r, &m, nt, 8);
            print_row(b, &r);
        }
        p += len;
        if (*p) p++;
    }
}

static int run_all(const opts *o)
{
    if (hx_mkdirs(o->work, NULL)) return fprintf(stderr, "phone: cannot create %s\n", o->work), 1;
    hx_buf b, v;
    hx_buf_init(&b);
    hx_buf_init(&v);
    hx_buf_printf(&b, "Load average at the start %.2f (2 cores); read bandwidth limit %s/s; "
                  "%d decoded tokens a run, 2 threads.\n\n", bench_load1(), o->bw, o->tokens);
    const char *probe_file = o->moe[0] ? o->moe : o->dense;
    char pf[1024];
    snprintf(pf, sizeof pf, "%.*s", (int)strcspn(probe_file, ","), probe_file);
    char *dp[] = {(char *)o->self, "--disk-probe", pf, NULL};
    meas d = run_sim(o, "", dp);
    hx_buf_printf(&b, "Disk: %s", d.line);
    const char *rnd = strstr(d.line, "2.6 MB ");
    g_disk_best = rnd ? atof(rnd + 7) * 1e9 : 0;
    static const char *modes[] = {"direct", "buffered", "madvise"};
    for (int i = 0; i < 3; i++) {
        char *ip[] = {(char *)o->self, "--io-probe", pf, (char *)modes[i], NULL};
        meas m = run_sim(o, "2G", ip);
        const double got = m.line[0] ? field(m.line, modes[i]) * 1e9 : 0;
        if (got > g_disk_best) g_disk_best = got;
        hx_buf_printf(&b, "%s, peak %.0f MiB%s", m.line[0] ? m.line + 7 : "failed\n",
                      m.peak_mib, "\n");
    }
    hx_buf_printf(&b, "\n%s", HEAD);
    if (o->moe[0]) moe_rows(o, &b, &v);
    if (o->dense[0]) dense_rows(o, &b);
    hx_buf_printf(&b, "\n%s", v.data ? v.data : "");
    fputs(b.data, stdout);
    char out[1100];
    snprintf(out, sizeof out, "%s/report.md", o->work);
    FILE *f = fopen(out, "w");
    if (f) fputs(b.data, f), fclose(f);
    hx_buf_free(&b);
    hx_buf_free(&v);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 9 && !strcmp(argv[1], "--child")) {
        child_args a = {argv[2], argv[6], argv[7], strcmp(argv[8], "-") ? argv[8] : NULL,
                        (size_t)strtoull(argv[3], NULL, 10), atoi(argv[4]), atoi(argv[5]), 2};
        return child(&a);
    }
    if (argc == 5 && !strcmp(argv[1], "--setup")) return setup(argv[2], argv[3], argv[4]);
    if (argc == 3 && !strcmp(argv[1], "--disk-probe")) return disk_probe(argv[2]);
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--io-probe"))
        return io_probe(argv[2], argv[3], argc == 5 ? atoi(argv[4]) : 2);
    if (argc == 7 && !strcmp(argv[1], "--simulate"))
        return simulate(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argv[6]);
    opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: bench/phone [--moe FILE] [--dense FILE,...] [--budgets 16,12,8,6]\n"
                        "  [--bw 2G] [--margin MIB] [--tokens N] [--no-llama] [--work DIR]\n"
                        "  [--readme FILE | --no-readme] [--phone-sim PATH] [--hxref PATH]\n");
        return 2;
    }
    if (!realpath("/proc/self/exe", o.self)) return 1;
    return run_all(&o);
}
