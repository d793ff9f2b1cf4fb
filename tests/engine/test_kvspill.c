/* test_kvspill.c: the KV cache spilling to disk beyond its memory cap: the
 * logits equal an unbounded cache's bit for bit on every attention path,
 * only resident pages count against the cap, the file is private and never
 * reached through a link, a damaged page is detected and rebuilt, and a
 * kill mid-spill leaves nothing that is read as valid. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/ctx_int.h"
#include "engine/engine.h"
#include "engine/kvfile.h"
#include "modelfile/modelfile.h"
#include "rng.h"
#include "test.h"

#define CAP_PAGES 3 /* the memory cap: 192 positions */
#define N_POS 600   /* a conversation over three times that */

static char g_dir[256];
static hx_model *g_m;

static const char *tmp_path(const char *name) { return test_path_in(g_dir, name); }

/* A small random qwen3 (head_dim 32: the 8-bit cache can hold it). */
static hx_model *make_model(void)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3";
    p.tied_output = 1;
    p.n_vocab = 128, p.n_layer = 2, p.n_embd = 128, p.n_head = 4, p.n_head_kv = 2;
    p.head_dim = 32, p.n_ff = 192, p.n_ctx = 1024, p.seed = 11;
    hx_err err = {0};
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    if (hx_mkmodel_write(&p, tmp_path("m.gguf"), &err) ||
        hx_model_load(tmp_path("m.gguf"), &mp, &m, &err))
        printf("# model: %s\n", err.msg);
    return m;
}

/* kv: 0 F16, 1 F32, 2 Q8. pages: the cap (0: none); spill_dir NULL: no spill. */
static hx_ctx *new_ctx(int kv, int pages, const char *spill_dir)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = 128;
    cp.n_threads = 2;
    cp.kv_f32 = kv == 1;
    cp.kv_q8 = kv == 2;
    size_t per_token, page;
    hx_kv_geometry(hx_model_hparams(g_m), &cp, &per_token, &page);
    cp.kv_max_bytes = (size_t)pages * page;
    cp.kv_spill = spill_dir != NULL;
    cp.kv_spill_dir = spill_dir;
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(g_m, &cp, &c, &err)) printf("# ctx: %s\n", err.msg);
    return c;
}

static void tokens(int32_t *t, int n, unsigned seed)
{
    rng_state = TEST_RNG_SEED + seed;
    for (int i = 0; i < n; i++) t[i] = (int32_t)(rnd() % 128u);
}

/* ---- a conversation: prompt batches, tokens one by one, a rewind ---- */
typedef struct step {
    int truncate_to; /* >= 0: hx_ctx_truncate first */
    int n;           /* tokens of this call */
} step;

static const step k_steps[] = {
    {-1, 100}, {-1, 1}, {-1, 1}, {-1, 150}, {-1, 1}, {-1, 1}, {-1, 70},
    {130, 1},  /* a rewind into a page that went to disk */
    {-1, 200}, {-1, 1}, {-1, 1}, {-1, 64}, {-1, 1},
};

/* Runs the conversation on c and a on the same tokens (one call at a time,
 * every call's logits compared bitwise; single tokens are repeated until
 * N_POS positions are cached); returns the calls whose logits differed. */
static int converse(hx_ctx *c, hx_ctx *a, const int32_t *t)
{
    const int nv = hx_model_hparams(g_m)->n_vocab;
    int diff = 0, at = 0;
    for (size_t i = 0; at < N_POS; i = i + 1 < sizeof k_steps / sizeof *k_steps ? i + 1 : i) {
        const step *s = &k_steps[i];
        if (s->truncate_to >= 0 && at > s->truncate_to) {
            hx_ctx_truncate(c, s->truncate_to);
            hx_ctx_truncate(a, s->truncate_to);
            at = s->truncate_to;
        }
        const int n = at + s->n > N_POS ? N_POS - at : s->n;
        int rc1 = hx_decode(c, t + at, n, 1), rc2 = hx_decode(a, t + at, n, 1);
        if (rc1 || rc2) {
            printf("# decode at %d: %s / %s\n", at, hx_ctx_errmsg(c), hx_ctx_errmsg(a));
            return -1;
        }
        for (int j = 0; j < n; j++)
            diff += memcmp(hx_ctx_logits(c, j), hx_ctx_logits(a, j), (size_t)nv * 4) != 0;
        at += n;
    }
    return diff;
}

/* Bit-equal logits on every path: F16 (tiled batches, the fp16 one-query
 * path of short passes and of single tokens over a split cache view past
 * 512), F32 and Q8. The spilled run holds 3 of its 10 pages in memory. */
static void test_spill_equals_unbounded(void)
{
    const char *names[3] = {"F16", "F32", "Q8"};
    int32_t t[N_POS];
    tokens(t, N_POS, 5);
    for (int kv = 0; kv < 3; kv++) {
        hx_ctx *c = new_ctx(kv, CAP_PAGES, tmp_path("spill")), *a = new_ctx(kv, 0, NULL);
        ASSERT(c && a);
        EXPECT_EQ_INT(converse(c, a, t), 0);
        hx_kv_stats st;
        hx_ctx_kv_stats(c, &st);
        printf("# %s: %d pages, %d in memory, %d spilled; %llu spill writes, %llu page "
               "reads, %llu slice reads (%.1f MiB)\n", names[kv], st.pages, st.resident,
               st.spilled, (unsigned long long)st.spill_writes,
               (unsigned long long)st.page_ins, (unsigned long long)st.slice_reads,
               (double)st.read_bytes / (1 << 20));
        EXPECT_EQ_INT(st.pages, (N_POS + 63) / 64);
        EXPECT(st.resident <= CAP_PAGES && st.spilled == st.pages - st.resident);
        EXPECT(st.page_ins >= 1); /* the rewind read its page back */
        EXPECT(hx_ctx_kv_bytes(c) <= (size_t)CAP_PAGES * c->page_bytes);
        hx_ctx_free(c);
        hx_ctx_free(a);
    }
}

/* The cap counts resident pages only: the estimate says all of n_ctx fits
 * with a spill (and its memory holds three pages); without one the same
 * cap ends the context at 192 positions (the control). Under --max-memory
 * the same. */
static void test_accounting(void)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = 2;
    size_t per_token, page;
    hx_kv_geometry(hx_model_hparams(g_m), &cp, &per_token, &page);
    cp.kv_max_bytes = CAP_PAGES * page;
    hx_ctx_mem mem, spill;
    hx_err err = {0};
    ASSERT(hx_ctx_memory(g_m, &cp, &mem, &err) == HX_OK);
    cp.kv_spill = 1;
    ASSERT(hx_ctx_memory(g_m, &cp, &spill, &err) == HX_OK);
    EXPECT_EQ_INT(mem.n_ctx_fit, CAP_PAGES * 64);
    EXPECT_EQ_INT(spill.n_ctx_fit, 1024);
    EXPECT(spill.kv_total == CAP_PAGES * page && mem.kv_total == spill.kv_total);
    EXPECT(spill.scratch > mem.scratch); /* the spill's read buffers and sums */
    int32_t t[N_POS];
    tokens(t, N_POS, 6);
    hx_ctx *plain = new_ctx(0, CAP_PAGES, NULL);
    ASSERT(plain);
    EXPECT_EQ_INT(hx_decode(plain, t, 200, 0), HX_ERR_FULL);
    EXPECT(strstr(hx_ctx_errmsg(plain), "KV cache full"));
    hx_ctx_free(plain);
    /* --max-memory: weights + scratch + three pages, with a spill */
    cp.kv_max_bytes = 0;
    cp.max_bytes = spill.weights + spill.scratch + CAP_PAGES * page;
    cp.kv_spill_dir = tmp_path("spill-mm");
    hx_ctx *c = NULL;
    ASSERT(hx_ctx_new(g_m, &cp, &c, &err) == HX_OK);
    EXPECT_EQ_INT(hx_decode(c, t, N_POS, 0), HX_OK);
    EXPECT(hx_ctx_kv_bytes(c) <= CAP_PAGES * page);
    EXPECT(c->n_batch == (CAP_PAGES - 1) * 64); /* a pass's pages fit */
    hx_ctx_free(c);
    /* a cap of one page cannot spill: said so */
    cp.max_bytes = 0;
    cp.kv_max_bytes = page;
    EXPECT_EQ_INT(hx_ctx_new(g_m, &cp, &c, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "two pages"));
}

/* The descriptor of c's spill file (found in /proc/self/fd by its folder),
 * or -1. */
static int spill_fd(const char *dir)
{
    DIR *d = opendir("/proc/self/fd");
    int found = -1;
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[64], target[1024];
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(p, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = '\0';
        if (!strncmp(target, dir, strlen(dir)) && target[strlen(dir)] == '/' &&
            (strstr(target, ".kvs") || strstr(target, "/#")))
            found = atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

static int count_names(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, part) != NULL;
    if (d) closedir(d);
    return n;
}

/* The file: private (0600, its folder 0700), unnamed (O_TMPFILE) or, in
 * the named fallback, there while the context lives and removed with it. */
static void test_file_private_and_removed(void)
{
    int32_t t[400];
    tokens(t, 400, 7);
    for (int named = 0; named < 2; named++) {
        const char *dir = tmp_path(named ? "priv-named" : "priv");
        hx_kv_spill_named = named;
        hx_ctx *c = new_ctx(0, CAP_PAGES, dir);
        ASSERT(c);
        ASSERT(hx_decode(c, t, 400, 0) == HX_OK);
        struct stat st;
        ASSERT(stat(dir, &st) == 0);
        EXPECT_EQ_INT((int)(st.st_mode & 0777), 0700);
        int fd = spill_fd(dir);
        ASSERT(fd >= 0);
        ASSERT(fstat(fd, &st) == 0);
        EXPECT_EQ_INT((int)(st.st_mode & 0777), 0600);
        EXPECT(st.st_size > (off_t)(3 * c->page_bytes)); /* pages 0..3 went to it */
        EXPECT_EQ_INT(count_names(dir, ".kvs"), named);
        hx_ctx_free(c);
        EXPECT_EQ_INT(count_names(dir, ".kvs"), 0);
        EXPECT_EQ_INT(spill_fd(dir), -1);
    }
    hx_kv_spill_named = 0;
}

/* Links: a spill folder that is a symbolic link is refused (nothing is
 * written where it points; the cache is full, as without a spill); a
 * name taken by a planted link is never opened through it; the sweep of
 * leftovers removes an unlocked file but neither a locked one nor what a
 * link points to. Controls: a real folder spills, a free name opens. */
static void test_no_link_followed(void)
{
    int32_t t[300];
    tokens(t, 300, 8);
    const char *target = tmp_path("elsewhere"), *link = tmp_path("linked");
    ASSERT(mkdir(target, 0700) == 0 && symlink(target, link) == 0);
    hx_ctx *c = new_ctx(0, CAP_PAGES, link);
    ASSERT(c);
    EXPECT_EQ_INT(hx_decode(c, t, 300, 0), HX_ERR_FULL);
    EXPECT(strstr(hx_ctx_errmsg(c), "symbolic link"));
    EXPECT_EQ_INT(count_names(target, ""), 2); /* "." and ".." */
    hx_ctx_free(c);
    c = new_ctx(0, CAP_PAGES, target); /* control */
    ASSERT(c);
    EXPECT_EQ_INT(hx_decode(c, t, 300, 0), HX_OK);
    hx_ctx_free(c);
    hx_err err = {0};
    int dfd = hx_kvf_open_dir(target, &err);
    ASSERT(dfd >= 0);
    const char *victim = tmp_path("victim");
    ASSERT(hx_write_file_atomic(victim, "keep", 4, &err) == HX_OK);
    ASSERT(symlinkat(victim, dfd, "planted.kvs") == 0);
    EXPECT_EQ_INT(hx_kvf_create(dfd, "planted.kvs"), -1);
    int fd = hx_kvf_create(dfd, "fresh.kvs"); /* control */
    EXPECT(fd >= 0);
    int orphan = openat(dfd, "orphan.kvs", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    ASSERT(orphan >= 0);
    close(orphan);
    hx_kvf_sweep(dfd, ".kvs");
    EXPECT(faccessat(dfd, "orphan.kvs", F_OK, 0) != 0);             /* swept */
    EXPECT(faccessat(dfd, "fresh.kvs", F_OK, 0) == 0);              /* locked: kept */
    EXPECT(faccessat(dfd, "planted.kvs", F_OK, AT_SYMLINK_NOFOLLOW) == 0);
    char *s = NULL;
    size_t len = 0;
    ASSERT(hx_read_file(victim, 0, &s, &len, &err) == HX_OK);
    EXPECT(len == 4 && !memcmp(s, "keep", 4));
    free(s);
    close(fd);
    close(dfd);
}

/* ---- damage ---- */

/* Flips a byte of page p's record (in its first K slice) in the file fd. */
static void damage_page(const hx_ctx *c, int fd, int p)
{
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    off_t at = hx_kvf_records_at(0) + (off_t)p * (off_t)g.stride + (off_t)g.rec_head + 5;
    char path[64], b = 0;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int w = open(path, O_RDWR | O_CLOEXEC);
    ASSERT(w >= 0 && pread(w, &b, 1, at) == 1);
    b ^= 0x5a;
    ASSERT(pwrite(w, &b, 1, at) == 1);
    close(w);
}

/* A spilled page that comes back damaged is never used: the decode says
 * so and drops the positions from that page on; decoding them again
 * rebuilds them, and the logits are the unbounded run's again. */
static void test_damaged_page_rebuilt(void)
{
    const int nv = hx_model_hparams(g_m)->n_vocab, n = 400;
    int32_t t[401];
    tokens(t, 401, 9);
    const char *dir = tmp_path("damage");
    hx_ctx *c = new_ctx(0, CAP_PAGES, dir), *a = new_ctx(0, 0, NULL);
    ASSERT(c && a);
    for (int at = 0; at < n; at += 64) { /* the same passes both times */
        const int k = n - at < 64 ? n - at : 64;
        ASSERT(hx_decode(c, t + at, k, 0) == HX_OK && hx_decode(a, t + at, k, 0) == HX_OK);
    }
    int fd = spill_fd(dir);
    ASSERT(fd >= 0);
    damage_page(c, fd, 1);
    EXPECT_EQ_INT(hx_decode(c, t + n, 1, 0), HX_ERR_IO);
    EXPECT(strstr(hx_ctx_errmsg(c), "page 1 is damaged"));
    EXPECT_EQ_INT(hx_ctx_n_past(c), 64);
    for (int at = 64; at < n; at += 64) {
        const int k = n - at < 64 ? n - at : 64;
        ASSERT(hx_decode(c, t + at, k, 0) == HX_OK);
    }
    ASSERT(hx_decode(c, t + n, 1, 0) == HX_OK && hx_decode(a, t + n, 1, 0) == HX_OK);
    EXPECT(memcmp(hx_ctx_logits(c, -1), hx_ctx_logits(a, -1), (size_t)nv * 4) == 0);
    /* damage met when a rewind reads a page back whole: the same */
    damage_page(c, spill_fd(dir), 2);
    hx_ctx_truncate(c, 150);
    EXPECT_EQ_INT(hx_decode(c, t + 150, 1, 0), HX_ERR_IO);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 128);
    hx_ctx_free(c);
    hx_ctx_free(a);
}

/* ---- a kill mid-spill ---- */
static int g_pipe = -1;

static void stop_mid_spill(int page)
{
    if (page != 2) return;
    char b = 'x';
    if (write(g_pipe, &b, 1)) {}
    for (;;) pause(); /* page 2's data is written, its header is not */
}

/* A child that saves a prefix, then spills until stopped in the middle of
 * its third page; never returns. */
static void child(const char *dir, const char *pfx, int named, const int32_t *t)
{
    hx_kv_spill_named = named;
    hx_kv_spill_test_hook = stop_mid_spill;
    hx_ctx *c = new_ctx(0, CAP_PAGES, dir);
    if (!c || hx_decode(c, t, 100, 0) || hx_ctx_prefix_save(c, pfx, t, 100, 0)) _exit(2);
    for (int at = 100; at < N_POS; at++)
        if (hx_decode(c, t + at, 1, 0)) _exit(3);
    _exit(4); /* the hook never stopped it */
}

/* Runs a child to its stop and kills it; 1 if it was stopped mid-spill. */
static int kill_mid_spill(const char *dir, const char *pfx, int named, const int32_t *t)
{
    int fds[2];
    if (pipe(fds)) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        g_pipe = fds[1];
        child(dir, pfx, named, t);
    }
    close(fds[1]);
    char b = 0;
    int got = read(fds[0], &b, 1) == 1;
    close(fds[0]);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    return got && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

/* The name of the one file of dir whose name contains part, into out. */
static int one_file(const char *dir, const char *part, char *out, size_t n)
{
    DIR *d = opendir(dir);
    int k = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, part)) k++, snprintf(out, n, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    return k == 1;
}

/* kill -9 in the middle of writing a page: an unnamed file leaves
 * nothing; a named one leaves a file whose torn page does not read as
 * valid (its finished pages do), which the next run sweeps unread before
 * spilling afresh, its logits those of an unbounded cache. The prefix the
 * child saved before is intact. */
static void test_kill_mid_spill(void)
{
    const int nv = hx_model_hparams(g_m)->n_vocab;
    int32_t t[N_POS];
    tokens(t, N_POS, 10);
    const char *dir = tmp_path("killed"), *pfx = tmp_path("killed-pfx");
    ASSERT(kill_mid_spill(dir, pfx, 0, t));
    EXPECT_EQ_INT(count_names(dir, ".kvs") + count_names(dir, "#"), 0);
    ASSERT(kill_mid_spill(dir, pfx, 1, t));
    char orphan[600];
    ASSERT(one_file(dir, ".kvs", orphan, sizeof orphan));
    hx_ctx *c = new_ctx(0, CAP_PAGES, dir), *a = new_ctx(0, 0, NULL);
    ASSERT(c && a);
    int fd = open(orphan, O_RDONLY | O_CLOEXEC), n_pos = 0;
    ASSERT(fd >= 0);
    hx_kvf_header h;
    ASSERT(pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h);
    EXPECT(hx_kvf_header_ok(&h, NULL) && h.kind == HX_KVF_SPILL);
    char *page = malloc(c->page_bytes);
    hx_kvf_geo g;
    hx_kvf_geometry(c, &g);
    const off_t r0 = hx_kvf_records_at(0);
    EXPECT_EQ_INT(hx_kvf_get_page(c, fd, r0, 0, page, NULL, &n_pos), 0);
    EXPECT_EQ_INT(hx_kvf_get_page(c, fd, r0 + 2 * (off_t)g.stride, 2, page, NULL, &n_pos), -1);
    free(page);
    close(fd);
    /* the next run: the prefix loads, the orphan goes at the first spill */
    int got = 0;
    ASSERT(hx_ctx_prefix_load(c, pfx, t, N_POS, N_POS - 1, &got) == HX_OK);
    EXPECT_EQ_INT(got, 100);
    ASSERT(hx_decode(a, t, 100, 0) == HX_OK);
    int diff = 0;
    for (int at = 100; at < N_POS; at++) {
        ASSERT(hx_decode(c, t + at, 1, 0) == HX_OK && hx_decode(a, t + at, 1, 0) == HX_OK);
        diff += memcmp(hx_ctx_logits(c, -1), hx_ctx_logits(a, -1), (size_t)nv * 4) != 0;
    }
    EXPECT_EQ_INT(diff, 0);
    EXPECT(access(orphan, F_OK) != 0);
    hx_ctx_free(c);
    hx_ctx_free(a);
}

/* The prefix cache over a spilled context: a prefix saved from one whose
 * first pages are on disk equals one saved from memory, and a prefix
 * longer than the cap loads into a spilling context (spilling as it
 * loads); the logits after it are the unbounded run's. */
static void test_prefix_and_spill_share_pages(void)
{
    const int nv = hx_model_hparams(g_m)->n_vocab, pre = 450;
    int32_t t[500];
    tokens(t, 500, 12);
    const char *pa = tmp_path("pfx-spilled"), *pb = tmp_path("pfx-memory");
    hx_ctx *c = new_ctx(0, CAP_PAGES, tmp_path("pfx-spill")), *a = new_ctx(0, 0, NULL);
    ASSERT(c && a);
    ASSERT(hx_decode(c, t, pre, 0) == HX_OK && hx_decode(a, t, pre, 0) == HX_OK);
    ASSERT(hx_ctx_prefix_save(c, pa, t, pre, 0) == HX_OK);
    ASSERT(hx_ctx_prefix_save(a, pb, t, pre, 0) == HX_OK);
    char fa[600], fb[600], *da = NULL, *db = NULL;
    size_t la = 0, lb = 0;
    hx_err err = {0};
    ASSERT(one_file(pa, ".kv", fa, sizeof fa) && one_file(pb, ".kv", fb, sizeof fb));
    ASSERT(hx_read_file(fa, 0, &da, &la, &err) == HX_OK);
    ASSERT(hx_read_file(fb, 0, &db, &lb, &err) == HX_OK);
    EXPECT(la == lb && !memcmp(da, db, la));
    free(da);
    free(db);
    ASSERT(hx_decode(a, t + pre, 50, 0) == HX_OK);
    hx_ctx_free(c);
    c = new_ctx(0, CAP_PAGES, tmp_path("pfx-spill"));
    int got = 0;
    ASSERT(c && hx_ctx_prefix_load(c, pb, t, 500, 499, &got) == HX_OK);
    EXPECT_EQ_INT(got, pre);
    ASSERT(hx_decode(c, t + pre, 50, 0) == HX_OK);
    EXPECT(memcmp(hx_ctx_logits(c, -1), hx_ctx_logits(a, -1), (size_t)nv * 4) == 0);
    EXPECT(hx_ctx_kv_bytes(c) <= CAP_PAGES * c->page_bytes);
    hx_ctx_free(c);
    hx_ctx_free(a);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_test_kvspill_%d", (int)getpid());
    mkdir(g_dir, 0700);
    g_m = make_model();
    if (!g_m) return 1;
    RUN(test_spill_equals_unbounded);
    RUN(test_accounting);
    RUN(test_file_private_and_removed);
    RUN(test_no_link_followed);
    RUN(test_damaged_page_rebuilt);
    RUN(test_kill_mid_spill);
    RUN(test_prefix_and_spill_share_pages);
    hx_model_free(g_m);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) {}
    return test_summary();
}
