/* ref.h: header-only helpers for differential tests against llama.cpp: they
 * run the reference harness hxref (tests/ref/hxref.c, built by `make test`
 * into $HEARTH_BUILD/tests/ref/hxref) and parse what it prints.
 *
 * Typical use in a test:
 *     char why[256];
 *     if (!ref_available(why, sizeof why)) SKIP("%s", why);
 *     int32_t ids[64];
 *     int n = ref_tokenize(model, "Hello", 5, 0, 1, ids, 64);
 *     ASSERT(n >= 0);  // on failure ref_error() says why
 * Every function returns a negative value on failure and then ref_error()
 * holds hxref's message. Numbers are computed with F32 KV cache and without
 * flash attention (hxref's defaults; set HXREF_KV=f16 for llama.cpp's default
 * F16 cache), one thread (HXREF_THREADS). Logits are n_ids * n_vocab floats,
 * row i the logits after ids[0..i].
 * Keep HXREF_THREADS at 1 on a shared machine: ggml's workers spin at every
 * node barrier, so with more busy threads than cores 2 threads are far
 * slower (greedy 200 tokens on stories260K: 0.47 s with 1 thread, 5.9 s with
 * 2, minutes under heavier load); the numbers are bit-identical for any
 * thread count. */
#ifndef HX_TESTS_REF_H
#define HX_TESTS_REF_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char ref_err_buf[1024];

/* The message of the last failed ref_* call. */
__attribute__((unused)) static const char *ref_error(void)
{
    return ref_err_buf;
}

__attribute__((unused)) static const char *ref_hxref_path(void)
{
    static char path[4096];
    const char *b = getenv("HEARTH_BUILD");
    snprintf(path, sizeof path, "%s/tests/ref/hxref", b && *b ? b : "build");
    return path;
}

__attribute__((unused)) static const char *ref_dir(void)
{
    const char *d = getenv("HEARTH_REFERENCE");
    return d && *d ? d : "build/reference";
}

/* 1 if hxref and the llama.cpp libraries are there; else 0 and the reason
 * in why (for SKIP). */
__attribute__((unused)) static int ref_available(char *why, size_t n)
{
    char lib[4096];
    snprintf(lib, sizeof lib, "%s/bins/libllama.v0.5.0.so", ref_dir());
    if (access(lib, R_OK) != 0) {
        snprintf(why, n, "llama.cpp reference not fetched (%.300s missing; run "
                 "make reference, needs npm)", lib);
        return 0;
    }
    if (access(ref_hxref_path(), X_OK) != 0) {
        snprintf(why, n, "reference harness %.300s not built (make test builds "
                 "it; set HEARTH_BUILD)", ref_hxref_path());
        return 0;
    }
    return 1;
}

/* A temporary file path (created empty); returns the fd or -1. */
__attribute__((unused)) static int ref_tmpfile(char *path, size_t n)
{
    const char *t = getenv("TMPDIR");
    snprintf(path, n, "%s/hxref_XXXXXX", t && *t ? t : "/tmp");
    return mkstemp(path);
}

/* An unnamed temporary file (created and unlinked at once, so that nothing
 * is left behind even if the test is killed). Returns the fd or -1. */
__attribute__((unused)) static int ref_anon_tmp(void)
{
    char path[512];
    int fd = ref_tmpfile(path, sizeof path);
    if (fd >= 0) unlink(path);
    return fd;
}

/* ref_error() = what + ": " + the text in fd (hxref's stderr). */
__attribute__((unused)) static void ref_set_err_fd(int fd, const char *what)
{
    int off = snprintf(ref_err_buf, sizeof ref_err_buf, "%s: ", what);
    ssize_t k = pread(fd, ref_err_buf + off,
                      sizeof ref_err_buf - (size_t)off - 1, 0);
    if (k < 0) k = 0;
    ref_err_buf[off + k] = '\0';
    while (k > 0 && ref_err_buf[off + k - 1] == '\n') ref_err_buf[off + --k] = '\0';
}

/* Reads fd to its end into a malloc'd NUL-terminated buffer, or NULL. */
__attribute__((unused)) static char *ref_read_all(int fd, size_t *len)
{
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    for (ssize_t k; buf && (k = read(fd, buf + n, cap - n - 1)) > 0;) {
        n += (size_t)k;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

/* Runs hxref with args (NULL-terminated), stdin from in[0..in_len) (empty
 * when in is NULL); its stdout into a malloc'd NUL-terminated *out (caller
 * frees). Returns 0, or -1 with ref_error() set. */
__attribute__((unused)) static int ref_run(const char *const *args,
                                           const char *in, size_t in_len,
                                           char **out, size_t *out_len)
{
    const char *argv[256];
    int pipefd[2] = {-1, -1}, status = 0;
    int infd = ref_anon_tmp(), errfd = ref_anon_tmp();
    size_t na = 0, len = 0;
    argv[na++] = ref_hxref_path();
    while (*args && na < 255) argv[na++] = *args++;
    argv[na] = NULL;
    if (infd < 0 || errfd < 0 || pipe(pipefd) != 0 ||
        (in && in_len && write(infd, in, in_len) != (ssize_t)in_len)) {
        snprintf(ref_err_buf, sizeof ref_err_buf, "cannot set up hxref's I/O");
        close(infd), close(errfd), close(pipefd[0]), close(pipefd[1]);
        return -1;
    }
    lseek(infd, 0, SEEK_SET);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(infd, 0);
        dup2(pipefd[1], 1);
        dup2(errfd, 2);
        close(pipefd[0]);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s\n", argv[0]);
        _exit(127);
    }
    close(pipefd[1]);
    close(infd);
    char *buf = pid > 0 ? ref_read_all(pipefd[0], &len) : NULL;
    close(pipefd[0]);
    if (pid > 0) waitpid(pid, &status, 0);
    if (!buf || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ref_set_err_fd(errfd, "hxref failed");
        free(buf);
        close(errfd);
        return -1;
    }
    close(errfd);
    *out = buf;
    if (out_len) *out_len = len;
    return 0;
}

/* Parses up to max space-separated ids; returns the count or -1. */
__attribute__((unused)) static int ref_parse_ids(const char *s, int32_t *out, int max)
{
    int n = 0;
    char *end;
    for (;;) {
        while (*s == ' ' || *s == '\n') s++;
        if (!*s) return n;
        long v = strtol(s, &end, 10);
        if (end == s || n >= max) {
            snprintf(ref_err_buf, sizeof ref_err_buf, "%s", end == s
                     ? "hxref printed something that is not an id"
                     : "more ids than the output array holds");
            return -1;
        }
        out[n++] = (int32_t)v;
        s = end;
    }
}

/* argv for ids: the caller's fixed args, then the ids as strings. The
 * strings live in *store (free it). */
__attribute__((unused)) static const char **ref_ids_args(const char *const *fixed, const int32_t *ids,
                                 int n, char **store)
{
    size_t nf = 0;
    while (fixed[nf]) nf++;
    const char **a = calloc(nf + (size_t)n + 1, sizeof *a);
    *store = malloc((size_t)n * 12 + 1);
    if (!a || !*store) {
        free(a);
        free(*store);
        *store = NULL;
        return NULL;
    }
    memcpy(a, fixed, nf * sizeof *a);
    for (int i = 0; i < n; i++) {
        char *p = *store + (size_t)i * 12;
        snprintf(p, 12, "%d", ids[i]);
        a[nf + (size_t)i] = p;
    }
    return a;
}

/* Tokenizes text[0..len) with llama_tokenize(add_special=bos,
 * parse_special=special) into out (max ids). Returns the count or -1. */
__attribute__((unused)) static int ref_tokenize(const char *model,
                                                const char *text, size_t len,
                                                int special, int bos,
                                                int32_t *out, int max)
{
    const char *args[6] = {"tokenize", model};
    int na = 2, n;
    char *res;
    if (special) args[na++] = "--special";
    if (bos) args[na++] = "--bos";
    args[na] = NULL;
    if (ref_run(args, text, len, &res, NULL)) return -1;
    n = ref_parse_ids(res, out, max);
    free(res);
    return n;
}

/* Detokenizes ids (special tokens rendered if special) into a malloc'd
 * NUL-terminated *out of *len bytes. Returns 0 or -1. */
__attribute__((unused)) static int ref_detok(const char *model,
                                             const int32_t *ids, int n,
                                             int special, char **out,
                                             size_t *len)
{
    const char *fixed[4] = {"detok", model, special ? "--special" : NULL, NULL};
    char *store;
    const char **a = ref_ids_args(fixed, ids, n, &store);
    if (!a) return -1;
    int rc = ref_run(a, NULL, 0, out, len);
    free(a);
    free(store);
    return rc;
}

/* Reads OUT.bin of n rows into a malloc'd *out; sets *n_vocab. */
__attribute__((unused)) static int ref_read_logits(const char *path, int n, float **out, int *n_vocab)
{
    FILE *f = fopen(path, "rb");
    long size;
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size <= 0 || size % ((long)n * 4) != 0 ||
        !(*out = malloc((size_t)size)) ||
        fread(*out, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        snprintf(ref_err_buf, sizeof ref_err_buf, "bad logits file %s", path);
        return -1;
    }
    fclose(f);
    *n_vocab = (int)(size / 4 / n);
    return 0;
}

__attribute__((unused)) static int ref_logits_run(const char *const *fixed, int n_fixed_out,
                          const int32_t *ids, int n, float **out,
                          int *n_vocab)
{
    char path[512], *store, *res = NULL;
    const char *f2[8];
    int fd = ref_tmpfile(path, sizeof path), rc = -1;
    if (fd < 0) return -1;
    close(fd);
    memcpy(f2, fixed, sizeof f2);
    f2[n_fixed_out] = path;
    const char **a = ref_ids_args(f2, ids, n, &store);
    *out = NULL;
    if (a && ref_run(a, NULL, 0, &res, NULL) == 0)
        rc = ref_read_logits(path, n, out, n_vocab);
    free(res);
    free(a);
    free(store);
    unlink(path);
    return rc;
}

/* Teacher-forced logits at every position of ids: *out gets n * *n_vocab
 * floats (caller frees). Returns 0 or -1. */
__attribute__((unused)) static int ref_logits(const char *model,
                                              const int32_t *ids, int n,
                                              float **out, int *n_vocab)
{
    const char *fixed[8] = {"logits", model, "OUT", NULL};
    return ref_logits_run(fixed, 2, ids, n, out, n_vocab);
}

/* The same with a LoRA adapter applied at scale. */
__attribute__((unused)) static int ref_lora_logits(const char *model,
                                                   const char *adapter,
                                                   float scale,
                                                   const int32_t *ids, int n,
                                                   float **out, int *n_vocab)
{
    char s[32];
    snprintf(s, sizeof s, "%.9g", scale);
    const char *fixed[8] = {"lora", model, adapter, s, "OUT", NULL};
    return ref_logits_run(fixed, 4, ids, n, out, n_vocab);
}

/* The same with several adapters at once: adapters and scales are
 * comma-separated lists of the same length ("a.gguf,b.gguf", "1,0.5"). */
__attribute__((unused)) static int ref_loras_logits(const char *model,
                                                    const char *adapters,
                                                    const char *scales,
                                                    const int32_t *ids, int n,
                                                    float **out, int *n_vocab)
{
    const char *fixed[8] = {"lora", model, adapters, scales, "OUT", NULL};
    return ref_logits_run(fixed, 4, ids, n, out, n_vocab);
}

/* Greedy decoding (argmax, first on ties) of n_gen tokens after the prompt
 * ids; out holds n_gen ids. Returns the count (n_gen) or -1. */
__attribute__((unused)) static int ref_generate(const char *model,
                                                const int32_t *ids, int n,
                                                int n_gen, int32_t *out)
{
    char ngen[16], *store, *res;
    snprintf(ngen, sizeof ngen, "%d", n_gen);
    const char *fixed[4] = {"generate", model, ngen, NULL};
    const char **a = ref_ids_args(fixed, ids, n, &store);
    int rc = -1;
    if (a && ref_run(a, NULL, 0, &res, NULL) == 0) {
        rc = ref_parse_ids(res, out, n_gen);
        free(res);
    }
    free(a);
    free(store);
    return rc;
}

#endif /* HX_TESTS_REF_H */
