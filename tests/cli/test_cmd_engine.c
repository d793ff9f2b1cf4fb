/* test_cmd_engine.c: the engine verbs as a user runs them: `hearth
 * generate` streams what greedy decoding gives, `hearth info` describes the
 * model, `hearth mkmodel` writes one, and bad command lines get exit codes. */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "test.h"
#include "cli_capture.h"

static char tmpdir[256];

/* Runs a verb with stdout (and stderr) captured into *out (caller frees). */
static int run_verb(int (*fn)(int, char **), char **argv, char **out)
{
    char path[512];
    int rc = cli_capture(fn, argv, tmpdir);
    size_t len;
    hx_err err;
    snprintf(path, sizeof path, "%s/out", tmpdir);
    if (hx_read_file(path, 0, out, &len, &err) != HX_OK) *out = NULL;
    return rc;
}

/* The greedy continuation through the library, detokenized. */
static char *library_greedy(const char *path, const char *prompt, int n)
{
    hx_model *m = NULL;
    hx_err err = {0};
    if (hx_model_load(path, NULL, &m, &err)) return NULL;
    const hx_vocab *v = hx_model_vocab(m);
    int32_t ids[64];
    int np = hx_tokenize(v, prompt, strlen(prompt), ids, 64, 1, 1);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = np + n;
    cp.n_threads = 1;
    hx_ctx *c = NULL;
    hx_buf b;
    hx_buf_init(&b);
    if (np > 0 && !hx_ctx_new(m, &cp, &c, &err) && !hx_decode(c, ids, np, 0)) {
        for (int i = 0; i < n; i++) {
            const float *l = hx_ctx_logits(c, -1);
            int32_t best = hx_argmax(l, hx_model_hparams(m)->n_vocab);
            if (hx_vocab_is_eog(v, best)) break;
            hx_detokenize(v, &best, 1, 0, &b);
            if (hx_decode(c, &best, 1, 0)) break;
        }
    }
    hx_ctx_free(c);
    hx_model_free(m);
    hx_buf_putc(&b, '\0');
    return hx_buf_steal(&b, NULL);
}

static void test_generate_streams_greedy(void)
{
    const char *path = test_shared_file("models/stories260K.gguf");
    if (!path) return;
    char *argv[] = {"generate", "-m", (char *)path, "-p", "Once upon a time",
                    "-n", "40", "--temp", "0", "-t", "1", NULL};
    char *out = NULL;
    EXPECT_EQ_INT(run_verb(hx_cmd_generate, argv, &out), HX_EXIT_OK);
    char *want = library_greedy(path, "Once upon a time", 40);
    ASSERT(out && want);
    EXPECT(strlen(want) > 40);
    EXPECT_STR_EQ(out, want);
    free(out);
    free(want);
}

static void test_generate_seeded_is_reproducible(void)
{
    const char *path = test_shared_file("models/stories260K.gguf");
    if (!path) return;
    char *argv[] = {"generate", "-m", (char *)path, "-p", "Once upon a time",
                    "-n", "30", "--seed", "7", "--temp", "1.0", "-t", "1", NULL};
    char *a = NULL, *b = NULL;
    EXPECT_EQ_INT(run_verb(hx_cmd_generate, argv, &a), HX_EXIT_OK);
    EXPECT_EQ_INT(run_verb(hx_cmd_generate, argv, &b), HX_EXIT_OK);
    ASSERT(a && b);
    EXPECT(strlen(a) > 20);
    EXPECT_STR_EQ(a, b);
    free(a);
    free(b);
}

static void test_info(void)
{
    const char *path = test_shared_file("models/stories260K.gguf");
    if (!path) return;
    char *argv[] = {"info", "-m", (char *)path, NULL};
    char *out = NULL;
    EXPECT_EQ_INT(run_verb(hx_cmd_info, argv, &out), HX_EXIT_OK);
    ASSERT(out);
    EXPECT(strstr(out, "architecture   llama") != NULL);
    EXPECT(strstr(out, "layers         5") != NULL);
    EXPECT(strstr(out, "512 tokens, SentencePiece") != NULL);
    EXPECT(strstr(out, "tensors        48") != NULL);
    EXPECT(strstr(out, "F32         48") != NULL);
    EXPECT(strstr(out, "memory (est.)") != NULL);
    free(out);
}

static void test_mkmodel_then_info(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/m.gguf", tmpdir);
    char *mk[] = {"mkmodel", "--arch", "qwen3moe", "--type", "Q4_K_M",
                  "--n-vocab", "512", "--layers", "3", "-o", path, NULL};
    char *out = NULL;
    EXPECT_EQ_INT(run_verb(hx_cmd_mkmodel, mk, &out), HX_EXIT_OK);
    free(out);
    char *info[] = {"info", "-m", path, NULL};
    EXPECT_EQ_INT(run_verb(hx_cmd_info, info, &out), HX_EXIT_OK);
    ASSERT(out);
    EXPECT(strstr(out, "architecture   qwen3moe") != NULL);
    EXPECT(strstr(out, "experts        4, 2 used, ffn 256 each") != NULL);
    EXPECT(strstr(out, "Q6_K") != NULL && strstr(out, "Q4_K") != NULL);
    EXPECT(strstr(out, "vocab          none") != NULL);
    free(out);
    /* no tokenizer: generate says so */
    char *gen[] = {"generate", "-m", path, "-p", "hi", NULL};
    EXPECT_EQ_INT(run_verb(hx_cmd_generate, gen, &out), HX_EXIT_INPUT);
    free(out);
}

/* The options' strict number parsers: all of the text, in range. */
static void test_parse_numbers(void)
{
    long n = -7;
    EXPECT_EQ_INT(hx_cli_parse_long("12", 0, 100, &n), 0);
    EXPECT_EQ_INT((int)n, 12);
    const char *bad_long[] = {"", "12abc", "abc", "-1", "101", " 5x", "99999999999999999999", "1.5"};
    for (size_t i = 0; i < sizeof bad_long / sizeof bad_long[0]; i++) {
        n = -7;
        EXPECT_EQ_INT(hx_cli_parse_long(bad_long[i], 0, 100, &n), -1);
        EXPECT_EQ_INT((int)n, -7); /* untouched */
    }
    EXPECT_EQ_INT(hx_cli_parse_long(NULL, 0, 100, &n), -1);
    double d = -7;
    EXPECT_EQ_INT(hx_cli_parse_double("0.25", 0, 1, &d), 0);
    EXPECT(d == 0.25);
    const char *bad_double[] = {"", "0.5x", "nan", "1e999", "-0.1", "1.01", "x"};
    for (size_t i = 0; i < sizeof bad_double / sizeof bad_double[0]; i++) {
        d = -7;
        EXPECT_EQ_INT(hx_cli_parse_double(bad_double[i], 0, 1, &d), -1);
        EXPECT(d == -7);
    }
}

static void test_bad_command_lines(void)
{
    char notgguf[512], schema[512];
    snprintf(notgguf, sizeof notgguf, "%s/not.gguf", tmpdir);
    snprintf(schema, sizeof schema, "%s/s.json", tmpdir);
    hx_err err;
    hx_write_file_atomic(notgguf, "hello world, not a model", 24, &err);
    hx_write_file_atomic(schema, "{\"not\": {}}", 11, &err);
    const char *stories = getenv("HEARTH_SHARED_DATA");
    char model[512];
    snprintf(model, sizeof model, "%s/models/stories260K.gguf",
             stories && *stories ? stories : "../shared/data");
    struct {
        int (*fn)(int, char **);
        char *argv[12];
        int want;
    } cases[] = {
        {hx_cmd_generate, {"generate", "-p", "x", NULL}, HX_EXIT_USAGE},
        {hx_cmd_generate, {"generate", "-m", model, "-p", "x", "--bogus", NULL}, HX_EXIT_USAGE},
        {hx_cmd_generate, {"generate", "-m", model, "-p", "x", "--temp", "hot", NULL}, HX_EXIT_USAGE},
        {hx_cmd_generate, {"generate", "-m", model, "-p", "x", "-n", NULL}, HX_EXIT_USAGE},
        {hx_cmd_generate, {"generate", "-m", "/nonexistent.gguf", "-p", "x", NULL}, HX_EXIT_INPUT},
        {hx_cmd_generate, {"generate", "-m", notgguf, "-p", "x", NULL}, HX_EXIT_INPUT},
        {hx_cmd_info, {"info", NULL}, HX_EXIT_USAGE},
        {hx_cmd_info, {"info", "-m", notgguf, NULL}, HX_EXIT_INPUT},
        {hx_cmd_mkmodel, {"mkmodel", "--type", "Q3_K", "-o", notgguf, NULL}, HX_EXIT_USAGE},
        {hx_cmd_mkmodel, {"mkmodel", "--layers", "0", "-o", notgguf, NULL}, HX_EXIT_USAGE},
        {hx_cmd_mkmodel, {"mkmodel", NULL}, HX_EXIT_USAGE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        int rc = run_verb(cases[i].fn, cases[i].argv, &out);
        if (rc != cases[i].want)
            printf("     case %zu (%s): exit %d, want %d\n", i, cases[i].argv[0],
                   rc, cases[i].want);
        EXPECT_EQ_INT(rc, cases[i].want);
        free(out);
    }
    if (access(model, R_OK) == 0) {
        char *argv[] = {"generate", "-m", model, "-p", "x", "--json-schema",
                        schema, NULL};
        char *out = NULL;
        EXPECT_EQ_INT(run_verb(hx_cmd_generate, argv, &out), HX_EXIT_INPUT);
        free(out);
    }
    char *help[] = {"generate", "--help", NULL};
    char *out = NULL;
    EXPECT_EQ_INT(run_verb(hx_cmd_generate, help, &out), HX_EXIT_OK);
    EXPECT(out && strstr(out, "--top-p") && strstr(out, "--json-schema"));
    free(out);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hx_test_cmd_engine.XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_generate_streams_greedy);
    RUN(test_generate_seeded_is_reproducible);
    RUN(test_info);
    RUN(test_mkmodel_then_info);
    RUN(test_bad_command_lines);
    RUN(test_parse_numbers);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmpdir);
    return test_summary();
}
