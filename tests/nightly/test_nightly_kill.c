/* test_nightly_kill.c: a nightly run killed (SIGKILL) at pseudo-random
 * moments of its training, in a child process: the previously adopted
 * adapter stays active and byte-identical, nothing new enters the store,
 * each rerun resumes from the last checkpoint, and a final uninterrupted
 * run ends exactly where a run never killed ends. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nightly_fixture.h"

enum { N_STEPS = 14, N_KILLS = 4 };

static void fill_memory(void)
{
    static const char *const who[] = {"Bobby", "Kenji", "Ana", "Lee"};
    hx_memory_params pm = hx_memory_default_params();
    pm.path = memdb;
    hx_memory *mem = NULL;
    hx_err err = {0};
    if (hx_memory_open(&pm, &mem, &err)) return (void)printf("# memory: %s\n", err.msg);
    for (int i = 0; i < 10; i++) {
        char msgs[512], req[96], ans[96];
        snprintf(req, sizeof req, "Set up a meeting with %s about item %d", who[i % 4], i);
        snprintf(ans, sizeof ans, "Booked Room 4B for 45 minutes with %s.", who[i % 4]);
        snprintf(msgs, sizeof msgs, "[{\"role\":\"user\",\"content\":\"%s\"},"
                 "{\"role\":\"assistant\",\"content\":\"%s\"}]", req, ans);
        hx_episode ep;
        memset(&ep, 0, sizeof ep);
        ep.started_at = 1790000000 + i * 3600;
        ep.finished_at = ep.started_at + 60;
        ep.request = req, ep.messages = msgs, ep.outcome = ans;
        int64_t id = 0;
        if (hx_memory_episode_add(mem, &ep, &id, &err) ||
            hx_memory_episode_set_verdict(mem, id, HX_VERDICT_ACCEPTED, NULL, &err))
            printf("# episode: %s\n", err.msg);
    }
    hx_memory_close(mem);
}

/* One nightly run over the store in sd and the work directory work, with
 * its own memory handle (a child must not share the parent's); log (or
 * NULL) gets its lines. */
static int run_nightly(const char *sd, const char *work, FILE *log, hx_nightly_report *r,
                       hx_err *err)
{
    hx_memory_params pm = hx_memory_default_params();
    pm.path = memdb;
    hx_memory *mem = NULL;
    hx_lora_store *st = NULL;
    int rc = hx_memory_open(&pm, &mem, err);
    if (!rc) rc = hx_lora_store_open(sd, &st, err);
    hx_nightly_params p = fixture_params(mem, st, work);
    p.train.opt.n_steps = N_STEPS;
    p.chunk = 1; /* a checkpoint after every step: kills land in its writing too */
    p.n_threads = 1, p.log = log;
    if (!rc) rc = hx_nightly_run(&p, r, err);
    hx_lora_store_free(st);
    hx_memory_close(mem);
    return rc;
}

/* The store's state: every file's name and SHA-256, sorted by readdir
 * order made stable by concatenating in name order. */
static void store_state(const char *sd, hx_buf *out)
{
    struct dirent **ents = NULL;
    int n = scandir(sd, &ents, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char p[600], hex[65] = "";
        hx_err err = {0};
        if (ents[i]->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", sd, ents[i]->d_name);
            hx_sha256_file(p, NULL, hex, &err);
            hx_buf_printf(out, "%s %s\n", ents[i]->d_name, hex);
        }
        free(ents[i]);
    }
    free(ents);
}

/* How many "step N" lines the run's log has so far; *last (or NULL) the
 * highest N (0: none). */
static int steps_logged(const char *path, int *last)
{
    char *text = NULL;
    size_t len = 0;
    hx_err err = {0};
    int n = 0;
    if (last) *last = 0;
    if (hx_read_file(path, 0, &text, &len, &err)) return 0;
    for (char *s = strstr(text, "step "); s; s = strstr(s + 1, "step ")) {
        if (s != text && s[-1] != '\n') continue;
        n++;
        if (last && atoi(s + 5) > *last) *last = atoi(s + 5);
    }
    free(text);
    return n;
}

/* Forks a nightly run, waits until its log shows `at` training steps of
 * this run (or it ended), waits delay_us more, kills it. Returns 1 if it
 * was killed, 0 if it had ended by itself; *step gets the last step it
 * logged. */
static int run_and_kill(const char *sd, const char *work, const char *logp, int at,
                        long delay_us, int *step)
{
    remove(logp);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *log = fopen(logp, "a");
        if (log) setvbuf(log, NULL, _IOLBF, 0);
        hx_nightly_report r;
        hx_err err = {0};
        int rc = run_nightly(sd, work, log, &r, &err);
        _exit(rc == HX_OK ? 0 : 1);
    }
    if (pid < 0) return -1;
    int status = 0, ended = 0;
    const double t0 = hx_time_mono();
    while (!ended && steps_logged(logp, NULL) < at && hx_time_mono() - t0 < 120)
        if (waitpid(pid, &status, WNOHANG) == pid) ended = 1;
        else usleep(1000);
    if (!ended) {
        struct timespec ts = {0, delay_us * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    steps_logged(logp, step);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static void test_kill_during_training(void)
{
    char sd[300], work[300], logp[300], ref_sd[300], ref_work[300], prev[300];
    snprintf(sd, sizeof sd, "%s/adapters", tmpdir);
    snprintf(work, sizeof work, "%s/work", tmpdir);
    snprintf(logp, sizeof logp, "%s/nightly.log", tmpdir);
    snprintf(ref_sd, sizeof ref_sd, "%s/ref-adapters", tmpdir);
    snprintf(ref_work, sizeof ref_work, "%s/ref-work", tmpdir);
    snprintf(prev, sizeof prev, "%s/previous.gguf", tmpdir);
    hx_err err = {0};
    /* the adapter the user runs now: a LoRA of this base (B = 0) */
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = 4, lp.alpha = 8;
    hx_trainer *tr = NULL;
    hx_lora_store *st = NULL;
    ASSERT(hx_trainer_new_gguf(model, &lp, 1, &tr, &err) == HX_OK);
    ASSERT(hx_trainer_write_gguf(tr, prev, NULL, &err) == HX_OK);
    hx_trainer_free(tr);
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    ASSERT(hx_lora_store_adopt(st, prev, "previous.gguf", 1.0f, &err) == HX_OK);
    hx_lora_store_free(st);
    hx_buf before;
    hx_buf_init(&before);
    store_state(sd, &before);
    ASSERT(before.data && strstr(before.data, "active.json ") && strstr(before.data, "previous.gguf "));
    /* kills at pseudo-random steps after a pseudo-random extra delay */
    uint64_t s = 0x2545f4914f6cdd1dull;
    int killed = 0, mid = 0, bad = 0;
    for (int k = 0; k < N_KILLS; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int at = 1 + (int)((s >> 33) % 3); /* 4 runs of 1-3 steps: < N_STEPS */
        const long delay = (long)((s >> 20) % 40000); /* 0-40 ms */
        int step = 0;
        const int was_killed = run_and_kill(sd, work, logp, at, delay, &step);
        hx_buf now;
        hx_buf_init(&now);
        store_state(sd, &now);
        printf("# kill %d: after %d steps of this run + %ld us: %s after step %d\n", k,
               at, delay, was_killed ? "killed" : "ended by itself", step);
        if (!was_killed) break; /* a whole run: the state may rightly change */
        killed++;
        mid += step < N_STEPS;
        bad += !now.data || strcmp(now.data, before.data) != 0;
        hx_buf_free(&now);
    }
    EXPECT_EQ_INT(bad, 0); /* the old adapter active, byte for byte; nothing added */
    EXPECT(killed > 0 && mid > 0);
    /* the store still loads the old adapter for its base */
    hx_model *m = NULL;
    hx_adapter *ads[HX_ADAPTER_MAX];
    float sc[HX_ADAPTER_MAX];
    int na = 0;
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    ASSERT(hx_model_load(model, NULL, &m, &err) == HX_OK);
    EXPECT(hx_lora_store_load_active(st, m, ads, sc, &na, &err) == HX_OK && na == 1);
    for (int i = 0; i < na; i++) hx_adapter_free(ads[i]);
    hx_model_free(m);
    /* a rerun resumes and ends where an uninterrupted run ends */
    hx_nightly_report r, ref;
    ASSERT(run_nightly(sd, work, NULL, &r, &err) == HX_OK);
    ASSERT(run_nightly(ref_sd, ref_work, NULL, &ref, &err) == HX_OK);
    printf("# rerun resumed at step %d: held-out loss %.6f (never killed: %.6f); %s\n",
           r.resumed_at, r.loss_after, ref.loss_after, r.reason);
    EXPECT(r.resumed_at > 0 && r.resumed_at <= N_STEPS);
    EXPECT_EQ_INT(r.steps, N_STEPS);
    EXPECT(r.loss_after == ref.loss_after);
    EXPECT_EQ_INT(r.adopted, ref.adopted);
    /* adopted or not, the old adapter is there to roll back to, unchanged */
    char hex[65], hex0[65];
    ASSERT(hx_sha256_file(prev, NULL, hex0, &err) == HX_OK);
    char stored[600];
    hx_lora_store_path(st, "previous.gguf", stored, sizeof stored);
    ASSERT(hx_sha256_file(stored, NULL, hex, &err) == HX_OK);
    EXPECT_STR_EQ(hex, hex0);
    if (r.adopted) {
        hx_lora_use u[HX_ADAPTER_MAX];
        int n = 0;
        EXPECT(hx_lora_store_rollback(st, &err) == HX_OK);
        EXPECT(hx_lora_store_active(st, u, &n, &err) == HX_OK && n == 1 &&
               !strcmp(u[0].name, "previous.gguf"));
    }
    hx_lora_store_free(st);
    hx_buf_free(&before);
}

int main(void)
{
    const int ready = fixture_open("hx_test_nightly_kill");
    if (ready < 0) return 1;
    if (ready) {
        fill_memory();
        RUN(test_kill_during_training);
    }
    fixture_remove();
    return test_summary();
}
