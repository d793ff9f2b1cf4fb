/* test_cmd_tokenize.c: `hearth tokenize`: ids of a text or of stdin, BOS
 * and special-token options, and clear errors for bad models and usage. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "test.h"

static char g_out[65536], g_errbuf[4096];

/* Reads a temp file back into buf and removes it. */
static void slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    unlink(path);
}

/* Runs hx_cmd_tokenize with argv (NULL-terminated) and stdin from in
 * (NULL: /dev/null); stdout and stderr land in g_out and g_errbuf. */
static int run(const char *in, const char *const *args)
{
    char po[] = "/tmp/hx_tok_out_XXXXXX", pe[] = "/tmp/hx_tok_err_XXXXXX";
    char pi[] = "/tmp/hx_tok_in_XXXXXX";
    char *argv[16];
    int argc = 0, fo = mkstemp(po), fe = mkstemp(pe), fi = mkstemp(pi);
    if (in && write(fi, in, strlen(in)) < 0) in = NULL;
    lseek(fi, 0, SEEK_SET);
    argv[argc++] = (char *)"tokenize";
    while (*args && argc < 15) argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2), si = dup(0);
    dup2(fo, 1), dup2(fe, 2), dup2(fi, 0);
    clearerr(stdin);
    int rc = hx_cmd_tokenize(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1), dup2(se, 2), dup2(si, 0);
    close(so), close(se), close(si), close(fo), close(fe), close(fi);
    clearerr(stdin);
    slurp(po, g_out, sizeof g_out);
    slurp(pe, g_errbuf, sizeof g_errbuf);
    unlink(pi);
    return rc;
}

static void test_ids(void)
{
    const char *q = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!q) return;
    char qp[4096];
    snprintf(qp, sizeof qp, "%s", q);
    EXPECT_EQ_INT(run(NULL, (const char *[]){"-m", qp, "Hello world", NULL}), 0);
    EXPECT_STR_EQ(g_out, "9707 1879\n");
    EXPECT_EQ_INT(run("<|im_start|>user\n",
                      (const char *[]){"--special", "-m", qp, "-", NULL}), 0);
    EXPECT_STR_EQ(g_out, "151644 872 198\n");
    EXPECT_EQ_INT(run("<|im_start|>", (const char *[]){"--model", qp, "-", NULL}), 0);
    EXPECT(strncmp(g_out, "151644", 6) != 0); /* plain text without --special */
    EXPECT_EQ_INT(run("", (const char *[]){"-m", qp, "-", NULL}), 0);
    EXPECT_STR_EQ(g_out, "\n");
    const char *l = test_shared_file("vocab/ggml-vocab-llama-bpe.gguf");
    if (!l) return;
    EXPECT_EQ_INT(run(NULL, (const char *[]){"-m", l, "Hello world", NULL}), 0);
    EXPECT_STR_EQ(g_out, "128000 9906 1917\n"); /* Llama 3 asks for BOS */
    EXPECT_EQ_INT(run(NULL, (const char *[]){"-m", l, "--no-bos", "Hello world", NULL}), 0);
    EXPECT_STR_EQ(g_out, "9906 1917\n");
}

static void test_errors(void)
{
    EXPECT_EQ_INT(run(NULL, (const char *[]){"--help", NULL}), HX_EXIT_OK);
    EXPECT(strstr(g_out, "usage: hearth tokenize") != NULL);
    EXPECT_EQ_INT(run(NULL, (const char *[]){"text", NULL}), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "no model") != NULL);
    EXPECT_EQ_INT(run(NULL, (const char *[]){"-m", NULL}), HX_EXIT_USAGE);
    EXPECT_EQ_INT(run(NULL, (const char *[]){"-m", "x.gguf", "--bogus", "t", NULL}),
                  HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "--bogus") != NULL);
    EXPECT_EQ_INT(run(NULL, (const char *[]){"-m", "/nonexistent.gguf", "hi", NULL}),
                  HX_EXIT_INPUT);
    EXPECT(strstr(g_errbuf, "/nonexistent.gguf") != NULL);
    /* a file that is not GGUF */
    char path[] = "/tmp/hx_tok_bad_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    EXPECT(write(fd, "not a model at all, just text\n", 30) == 30);
    close(fd);
    EXPECT_EQ_INT(run(NULL, (const char *[]){"-m", path, "hi", NULL}), HX_EXIT_INPUT);
    EXPECT(strstr(g_errbuf, "GGUF") != NULL);
    unlink(path);
}

int main(void)
{
    RUN(test_ids);
    RUN(test_errors);
    return test_summary();
}
