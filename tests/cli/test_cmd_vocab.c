/* test_cmd_vocab.c: `hearth vocab train`: learns a vocabulary from chat
 * JSONL and text files, writes a GGUF the engine loads, and rejects bad
 * command lines and broken inputs with clear messages. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "test.h"
#include "cli_capture.h"

static char g_out[8192], g_errbuf[8192], dir[256], chat[300], text[300], vocab[300];

/* Runs hx_cmd_vocab with args (NULL-terminated); output in g_out, g_errbuf. */
static int run(const char *const *args)
{
    const char *all[48] = {"vocab"};
    for (int i = 0; args[i] && i < 46; i++) all[i + 1] = args[i];
    return cli_run(hx_cmd_vocab, all, dir, g_out, sizeof g_out, g_errbuf, sizeof g_errbuf);
}

static void put(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(s, f);
    fclose(f);
}

static const char k_line[] =
    "{\"style\": \"compact\", \"messages\": [{\"role\": \"user\", \"content\": \"Find the "
    "report from Ilse Varga\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
    "[{\"type\": \"function\", \"function\": {\"name\": \"files.search\", \"arguments\": "
    "{\"name\": \"report\"}}}]}, {\"role\": \"tool\", \"content\": \"[]\"}, {\"role\": "
    "\"assistant\", \"content\": \"No report found.\"}], \"tools\": [{\"type\": \"function\", "
    "\"function\": {\"name\": \"files.search\", \"description\": \"Find files.\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}}}}]}\n";

static void test_train_chat_and_text(void)
{
    hx_buf b;
    hx_buf_init(&b);
    for (int i = 0; i < 50; i++) hx_buf_puts(&b, k_line);
    put(chat, b.data);
    hx_buf_free(&b);
    put(text, "Ilse Varga\nAmadou Keita\nSigrun Halvorsen\nreport quarterly budget\n");
    EXPECT_EQ_INT(run((const char *[]){"train", "--size", "400", "-o", vocab, "--chat", chat,
                                       text, NULL}), HX_EXIT_OK);
    /* every word of this small data gets merged whole before 400 */
    EXPECT(strstr(g_out, "note: fewer tokens than --size 400") != NULL);
    EXPECT(strstr(g_out, "from 51 documents") != NULL);
    EXPECT(strstr(g_out, "bytes/token") != NULL);
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    hx_err err = {0};
    ASSERT(hx_gguf_open(vocab, &g, &err) == HX_OK);
    ASSERT(hx_vocab_load(g, &v, &err) == HX_OK);
    hx_gguf_close(g);
    EXPECT(hx_vocab_n_tokens(v) > 300 && hx_vocab_n_tokens(v) < 400);
    /* the rendered chat was learned: "Assistant" is one token */
    int32_t ids[8];
    EXPECT_EQ_INT(hx_tokenize(v, "Assistant", 9, ids, 8, 0, 1), 1);
    int32_t call = hx_vocab_find(v, "<tool_call>", 11);
    EXPECT(call > 0 && hx_vocab_is_special(v, call));
    hx_vocab_free(v);
    /* a size the data reaches */
    EXPECT_EQ_INT(run((const char *[]){"train", "--size", "280", "-o", vocab, "--chat", chat,
                                       NULL}), HX_EXIT_OK);
    EXPECT(strstr(g_out, "vocabulary of 280 tokens") != NULL);
    EXPECT(strstr(g_out, "note:") == NULL);
}

/* A conversation whose only target word (a value after a JSON quote) is
 * "quixotrel" and whose prompt says "vendramox" three times. */
static const char k_weighted[] =
    "{\"style\": \"compact\", \"messages\": [{\"role\": \"user\", \"content\": \"vendramox "
    "vendramox vendramox\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
    "[{\"type\": \"function\", \"function\": {\"name\": \"files.search\", \"arguments\": "
    "{\"name\": \"quixotrel\"}}}]}, {\"role\": \"tool\", \"content\": \"[]\"}, {\"role\": "
    "\"assistant\", \"content\": \"No.\"}], \"tools\": []}\n";

static int pieces(const char *word)
{
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    hx_err err = {0};
    int32_t ids[32];
    if (hx_gguf_open(vocab, &g, &err) || hx_vocab_load(g, &v, &err)) {
        hx_gguf_close(g);
        return -1;
    }
    hx_gguf_close(g);
    int n = hx_tokenize(v, word, strlen(word), ids, 32, 0, 0);
    hx_vocab_free(v);
    return n;
}

/* --target-weight counts the assistant's turns K times, so a word only
 * the model writes wins merges over a word it only reads; `vocab
 * coverage` counts the targets per token. */
static void test_target_weight_and_coverage(void)
{
    hx_buf b;
    hx_buf_init(&b);
    for (int i = 0; i < 40; i++) hx_buf_puts(&b, k_weighted);
    put(chat, b.data);
    hx_buf_free(&b);
    const char *size = "300";
    EXPECT_EQ_INT(run((const char *[]){"train", "--size", size, "-o", vocab, "--chat", chat, NULL}),
                  HX_EXIT_OK);
    int read_plain = pieces(" vendramox"), write_plain = pieces("quixotrel");
    EXPECT_EQ_INT(run((const char *[]){"train", "--size", size, "-o", vocab, "--chat", chat,
                                       "--target-weight", "8", NULL}),
                  HX_EXIT_OK);
    int read_w = pieces(" vendramox"), write_w = pieces("quixotrel");
    printf("# pieces: vendramox %d -> %d, quixotrel %d -> %d\n", read_plain, read_w, write_plain,
           write_w);
    EXPECT(write_w < write_plain); /* the written word got the merges */
    EXPECT(read_w >= read_plain);
    EXPECT_EQ_INT(run((const char *[]){"coverage", "--vocab", vocab, "--chat", chat, "--below",
                                       "50", NULL}),
                  HX_EXIT_OK);
    EXPECT(strstr(g_out, "40 conversations") != NULL);
    EXPECT(strstr(g_out, "targets fewer than 50 times") != NULL);
    EXPECT_EQ_INT(run((const char *[]){"coverage", "--chat", chat, NULL}), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "needs --vocab and --chat") != NULL);
    EXPECT_EQ_INT(run((const char *[]){"coverage", "--vocab", vocab, "--chat", chat, "--below",
                                       "x", NULL}),
                  HX_EXIT_USAGE);
    EXPECT_EQ_INT(run((const char *[]){"coverage", "--vocab", "/nonexistent.gguf", "--chat", chat,
                                       NULL}),
                  HX_EXIT_INPUT);
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--chat", chat, "--target-weight",
                                       "0", NULL}),
                  HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "bad --target-weight '0'") != NULL);
    char tok[320];
    snprintf(tok, sizeof tok, "%s.tok", chat);
    unlink(tok);
}

static void test_bad_inputs(void)
{
    EXPECT_EQ_INT(run((const char *[]){"train", text, NULL}), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "no output") != NULL);
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, NULL}), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "no data") != NULL);
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--size", "12x", text, NULL}),
                  HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "bad --size '12x'") != NULL);
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--size", "100", text, NULL}),
                  HX_EXIT_FAIL);
    EXPECT(strstr(g_errbuf, "vocabulary size 100 out of range") != NULL);
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--style", "fancy", text, NULL}),
                  HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "unknown style 'fancy'") != NULL);
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--bogus", "1", text, NULL}),
                  HX_EXIT_USAGE);
    EXPECT_EQ_INT(run((const char *[]){"frobnicate", NULL}), HX_EXIT_USAGE);
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "/nonexistent/x.txt", NULL}),
                  HX_EXIT_INPUT);
    EXPECT(strstr(g_errbuf, "/nonexistent/x.txt") != NULL);
    put(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"style\": \"compact\"}\n"
              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]\n");
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--chat", chat, NULL}),
                  HX_EXIT_INPUT);
    EXPECT(strstr(g_errbuf, "chat.jsonl:2: not valid JSON") != NULL);
    put(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--chat", chat, NULL}),
                  HX_EXIT_INPUT);
    EXPECT(strstr(g_errbuf, "no \"style\"") != NULL);
    /* --style gives the style the lines lack */
    EXPECT_EQ_INT(run((const char *[]){"train", "-o", vocab, "--size", "265", "--chat", chat,
                                       "--style", "compact", NULL}), HX_EXIT_OK);
    EXPECT_EQ_INT(run((const char *[]){"--help", NULL}), HX_EXIT_OK);
    EXPECT(strstr(g_out, "usage: hearth vocab train") != NULL);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hx_cmdvocab_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) return 1;
    snprintf(chat, sizeof chat, "%s/chat.jsonl", dir);
    snprintf(text, sizeof text, "%s/names.txt", dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    RUN(test_train_chat_and_text);
    RUN(test_bad_inputs);
    RUN(test_target_weight_and_coverage);
    unlink(chat);
    unlink(text);
    unlink(vocab);
    rmdir(dir);
    return test_summary();
}
