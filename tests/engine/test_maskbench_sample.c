/* test_maskbench_sample.c: a fixed sample of MaskBench schemas (every
 * 60th file) through the full protocol: no invalid instance accepted, and
 * at least a floor of passing schemas. Skips without the shared data. */
#include <dirent.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/maskbench_run.h"
#include "test.h"

#define EVERY 60
#define PASS_FLOOR_PCT 70 /* of the sampled schemas */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_sample(void)
{
    char dir[1024], vpath[1024];
    snprintf(dir, sizeof dir, "%s/maskbench/data", hx_shared_data_dir());
    snprintf(vpath, sizeof vpath, "%s/vocab/ggml-vocab-llama-bpe.gguf", hx_shared_data_dir());
    DIR *d = opendir(dir);
    if (!d || access(vpath, R_OK)) {
        if (d) closedir(d);
        SKIP("MaskBench data or the Llama 3 vocabulary not found under %s", hx_shared_data_dir());
    }
    char **files = NULL;
    size_t nf = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        if (nf == cap) {
            cap = cap ? cap * 2 : 1024;
            files = realloc(files, cap * sizeof *files);
        }
        files[nf++] = hx_strdup(e->d_name);
    }
    closedir(d);
    qsort(files, nf, sizeof *files, cmp_str);

    hx_err err = {0};
    hx_gguf *gg;
    hx_vocab *v;
    mb_ctx cx = {0};
    ASSERT(hx_gguf_open(vpath, &gg, &err) == HX_OK);
    ASSERT(hx_vocab_load(gg, &v, &err) == HX_OK);
    hx_gguf_close(gg);
    ASSERT(hx_gvocab_from_vocab(v, &cx.gv, &err) == HX_OK);
    cx.vocab = v;
    uint32_t *samples = malloc(MAX_SAMPLES * 4);
    int n = 0, counts[4] = {0}, lost = 0;
    for (size_t i = 0; i < nf; i += EVERY, n++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        /* in a child, so that a crash or a hang is reported, not fatal */
        int fd[2];
        result r;
        ASSERT(pipe(fd) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            struct itimerval lim = {{0, 0}, {15, 0}}; /* CPU time: the machine is shared */
            setitimer(ITIMER_PROF, &lim, NULL);
            run_schema(&cx, path, &r, samples);
            _exit(write(fd[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
        }
        close(fd[1]);
        int got = read(fd[0], &r, sizeof r) == (ssize_t)sizeof r;
        close(fd[0]);
        int st;
        waitpid(pid, &st, 0);
        if (!got || !WIFEXITED(st) || WEXITSTATUS(st)) {
            lost++;
            printf("     crash or timeout: %s\n", files[i]);
            continue;
        }
        counts[r.status]++;
        if (r.status == R_INVALIDATION) printf("     invalidation: %s: %s\n", files[i], r.msg);
    }
    printf("     sample of %d: %d passing, %d compile errors, %d validation, %d invalidation, %d crash/timeout\n",
           n, counts[R_PASS], counts[R_COMPILE], counts[R_VALIDATION], counts[R_INVALIDATION], lost);
    EXPECT_EQ_INT(counts[R_INVALIDATION], 0);
    EXPECT_EQ_INT(lost, 0);
    EXPECT(counts[R_PASS] * 100 >= n * PASS_FLOOR_PCT);
    free(samples);
    for (size_t i = 0; i < nf; i++) free(files[i]);
    free(files);
    hx_gvocab_free(cx.gv);
    hx_vocab_free(v);
}

int main(void)
{
    RUN(test_sample);
    return test_summary();
}
