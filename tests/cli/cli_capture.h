/* cli_capture.h: runs a `hearth` verb's function in-process with its
 * standard output and error captured, for the tests of the command-line
 * verbs. Header-only; include after test.h. */
#ifndef HX_TESTS_CLI_CAPTURE_H
#define HX_TESTS_CLI_CAPTURE_H

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads path into buf (size bytes, NUL-terminated, cut to fit) and removes
 * the file; an unreadable file gives "". */
__attribute__((unused)) static void cli_slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    unlink(path);
}

/* Runs fn(argc, argv) (argv NULL-terminated) with file descriptors 1 and 2
 * sent to dir/out and dir/err, and returns its result; the files stay for
 * the caller to read. */
__attribute__((unused)) static int cli_capture(int (*fn)(int, char **), char **argv,
                                               const char *dir)
{
    char po[512], pe[512];
    snprintf(po, sizeof po, "%s/out", dir);
    snprintf(pe, sizeof pe, "%s/err", dir);
    int argc = 0;
    while (argv[argc]) argc++;
    int fo = open(po, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    int fe = open(pe, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    dup2(fo, 1), dup2(fe, 2);
    int rc = fn(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1), dup2(se, 2);
    close(so), close(se), close(fo), close(fe);
    return rc;
}

/* cli_capture, then the output and error text into out and err (on and en
 * bytes, NUL-terminated, cut to fit). args: the verb's arguments, argv[0]
 * first, NULL-terminated (at most 47). */
__attribute__((unused)) static int cli_run(int (*fn)(int, char **), const char *const *args,
                                           const char *dir, char *out, size_t on, char *err,
                                           size_t en)
{
    char *argv[48], path[512];
    int argc = 0;
    while (*args && argc < 47) argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    int rc = cli_capture(fn, argv, dir);
    snprintf(path, sizeof path, "%s/out", dir);
    cli_slurp(path, out, on);
    snprintf(path, sizeof path, "%s/err", dir);
    cli_slurp(path, err, en);
    return rc;
}

/* The built program's absolute path ($HEARTH_BUILD/hearth, default
 * build/hearth) into out (PATH_MAX bytes): 0, or -1 when it is not built
 * (the test then skips, saying so). */
__attribute__((unused)) static int cli_hearth_path(char *out)
{
    const char *b = getenv("HEARTH_BUILD");
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/hearth", b && *b ? b : "build");
    if (realpath(rel, out)) return 0;
    printf("skip all: %s not built\n", rel);
    return -1;
}

#endif /* HX_TESTS_CLI_CAPTURE_H */
