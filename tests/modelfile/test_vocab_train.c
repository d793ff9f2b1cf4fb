/* test_vocab_train.c: the BPE trainer: the written vocabulary loads, text
 * round-trips through it, special tokens are single ids, the engine
 * segments the training text as the trainer did, llama.cpp tokenizes like
 * the engine with it, and bad uses fail with clear errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "ref/ref.h"
#include "test.h"

/* the corpus has about 400 distinct merges with a count of 2 or more */
#define NV 384
static char g_vocab[256], g_model[256];
static hx_buf g_corpus;

static const char *const k_words[] = {
    "the", "meeting", "calendar", "invite", "Alice", "Bob", "Zoë", "Müller",
    "schedule", "tomorrow", "at", "with", "and", "mail", "file", "search",
    "create_event", "\"title\"", "{\"name\":", "report.pdf", "café", "日本",
    "remember", "that", "Tuesday", "3pm", "free", "slot", "—", "😀"};

/* A deterministic corpus of sentences, numbers, JSON-ish calls and the
 * special tokens' texts. */
static void make_corpus(hx_buf *b)
{
    uint64_t s = 42;
    for (int i = 0; i < 6000; i++) {
        for (int w = 0; w < 8; w++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            hx_buf_printf(b, "%s%s", w ? " " : "", k_words[(s >> 33) % 30]);
        }
        hx_buf_printf(b, " %d-%02d-%02d.\n", 2000 + (int)(s >> 40) % 40,
                      1 + (int)(s >> 20) % 12, 1 + (int)(s >> 10) % 28);
        if (i % 7 == 0) hx_buf_puts(b, "<tool_call>{\"name\": \"x\"}</tool_call><|im_end|>\n");
    }
}

static hx_vocab *load_vocab(const char *path)
{
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    hx_err err = {0};
    if (hx_gguf_open(path, &g, &err) || hx_vocab_load(g, &v, &err))
        test_fail_at(__FILE__, __LINE__, "%s: %s", path, err.msg);
    hx_gguf_close(g);
    return v;
}

static hx_bpe_stats g_stats;

static void test_train_and_load(void)
{
    hx_bpe_params p = hx_bpe_default_params();
    p.vocab_size = NV;
    hx_bpe *b = NULL;
    hx_err err = {0};
    ASSERT(hx_bpe_new(&p, &b, &err) == HX_OK);
    ASSERT(hx_bpe_add_text(b, g_corpus.data, g_corpus.len, &err) == HX_OK);
    ASSERT(hx_bpe_train(b, &err) == HX_OK);
    ASSERT(hx_bpe_write_gguf(b, g_vocab, &err) == HX_OK);
    hx_bpe_get_stats(b, &g_stats);
    hx_bpe_free(b);
    EXPECT_EQ_INT(g_stats.n_tokens, NV);
    EXPECT(g_stats.n_merges >= NV - 256 - HX_BPE_N_SPECIALS);
    EXPECT(g_stats.unique_chunks < g_stats.chunks);
    EXPECT(g_stats.tokens > 0 && g_stats.tokens < g_stats.bytes / 2);
    hx_vocab *v = load_vocab(g_vocab);
    ASSERT(v);
    EXPECT_EQ_INT(hx_vocab_type(v), HX_VOCAB_BPE);
    EXPECT_STR_EQ(hx_vocab_pre(v), "qwen2");
    EXPECT_EQ_INT(hx_vocab_n_tokens(v), NV);
    EXPECT_EQ_INT(hx_vocab_eos(v), NV - HX_BPE_N_SPECIALS);
    EXPECT_EQ_INT(hx_vocab_bos(v), NV - HX_BPE_N_SPECIALS);
    EXPECT_EQ_INT(hx_vocab_pad(v), NV - HX_BPE_N_SPECIALS);
    EXPECT(!hx_vocab_add_bos(v));
    hx_vocab_free(v);
}

/* The engine's tokens of the corpus other than the special tokens (ids
 * from n_tokens - HX_BPE_N_SPECIALS on), or 0 on error. */
static uint64_t engine_tokens(const hx_vocab *v, int32_t n_tokens)
{
    int32_t n = hx_tokenize(v, g_corpus.data, g_corpus.len, NULL, 0, 0, 1);
    n = n < 0 ? -n : n;
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids || hx_tokenize(v, g_corpus.data, g_corpus.len, ids, n, 0, 1) != n) {
        free(ids);
        return 0;
    }
    int specials = 0;
    for (int32_t i = 0; i < n; i++) specials += ids[i] >= n_tokens - HX_BPE_N_SPECIALS;
    free(ids);
    return (uint64_t)(n - specials);
}

/* The engine's encoding of the training text has exactly as many tokens
 * as the trainer's own segmentation (same merges, same chunks). */
static void test_engine_segments_as_trained(void)
{
    hx_vocab *v = load_vocab(g_vocab);
    ASSERT(v);
    EXPECT_EQ_INT(engine_tokens(v, NV), g_stats.tokens);
    hx_vocab_free(v);
}

static const char *const k_texts[] = {
    "Schedule a meeting with Alice Müller tomorrow at 3pm.",
    "{\"name\": \"create_event\", \"arguments\": {\"title\": \"Sync\", \"when\": \"2031-04-05T09:30\"}}",
    "  two spaces,\ttab\nnewline\r\n\n\nand   runs   ",
    "unseen words: xylophone quokka ZZZ 1234567890",
    "日本語のテキストと😀 emoji, café, naïve, Straße",
    "",
    "a",
};

static void test_round_trip(void)
{
    hx_vocab *v = load_vocab(g_vocab);
    ASSERT(v);
    for (size_t i = 0; i < sizeof k_texts / sizeof *k_texts; i++) {
        const char *t = k_texts[i];
        int32_t ids[512];
        int32_t n = hx_tokenize(v, t, strlen(t), ids, 512, 0, 1);
        ASSERT(n >= 0);
        hx_buf out;
        hx_buf_init(&out);
        EXPECT_EQ_INT(hx_detokenize(v, ids, n, 1, &out), HX_OK);
        EXPECT_STR_EQ(out.data ? out.data : "", t);
        hx_buf_free(&out);
        for (int32_t k = 0; k < n; k++) EXPECT(ids[k] < NV - HX_BPE_N_SPECIALS);
    }
    /* digits are single tokens (the qwen2 split) */
    int32_t ids[16];
    EXPECT_EQ_INT(hx_tokenize(v, "2031", 4, ids, 16, 0, 1), 4);
    hx_vocab_free(v);
}

static void test_specials_single(void)
{
    hx_vocab *v = load_vocab(g_vocab);
    ASSERT(v);
    for (int i = 0; i < HX_BPE_N_SPECIALS; i++) {
        const char *s = hx_bpe_specials[i];
        int32_t ids[64];
        EXPECT_EQ_INT(hx_tokenize(v, s, strlen(s), ids, 64, 0, 1), 1);
        EXPECT_EQ_INT(ids[0], NV - HX_BPE_N_SPECIALS + i);
        EXPECT(hx_vocab_attr(v, ids[0]) & HX_TOKEN_CONTROL);
        /* read as plain text they are never produced */
        int32_t n = hx_tokenize(v, s, strlen(s), ids, 64, 0, 0);
        EXPECT(n > 1);
        for (int32_t k = 0; k < n; k++) EXPECT(ids[k] < NV - HX_BPE_N_SPECIALS);
    }
    EXPECT(hx_vocab_is_eog(v, hx_vocab_find(v, "<|im_end|>", 10)));
    EXPECT(hx_vocab_is_eog(v, hx_vocab_eos(v)));
    const char *mix = "x<tool_call>{\"a\": 1}</tool_call>y";
    int32_t ids[64];
    int32_t n = hx_tokenize(v, mix, strlen(mix), ids, 64, 0, 1);
    ASSERT(n > 3);
    EXPECT_EQ_INT(ids[1], hx_vocab_find(v, "<tool_call>", 11));
    EXPECT_EQ_INT(ids[n - 2], hx_vocab_find(v, "</tool_call>", 12));
    hx_vocab_free(v);
}

/* Same input, same file. */
static void test_deterministic(void)
{
    char other[300];
    snprintf(other, sizeof other, "%s.2", g_vocab);
    hx_bpe_params p = hx_bpe_default_params();
    p.vocab_size = NV;
    hx_bpe *b = NULL;
    hx_err err = {0};
    ASSERT(hx_bpe_new(&p, &b, &err) == HX_OK);
    EXPECT(hx_bpe_add_text(b, g_corpus.data, g_corpus.len, &err) == HX_OK);
    EXPECT(hx_bpe_train(b, &err) == HX_OK);
    EXPECT(hx_bpe_write_gguf(b, other, &err) == HX_OK);
    hx_bpe_free(b);
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    ASSERT(!hx_read_file(g_vocab, 0, &x, &nx, &err) && !hx_read_file(other, 0, &y, &ny, &err));
    EXPECT(nx == ny && !memcmp(x, y, nx));
    free(x);
    free(y);
    unlink(other);
}

static void test_bad_uses(void)
{
    hx_bpe_params p = hx_bpe_default_params();
    hx_bpe *b = NULL;
    hx_err err = {0};
    p.vocab_size = 100;
    EXPECT_EQ_INT(hx_bpe_new(&p, &b, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "vocabulary size 100") != NULL);
    EXPECT(b == NULL);
    p.vocab_size = 300;
    ASSERT(hx_bpe_new(&p, &b, &err) == HX_OK);
    EXPECT_EQ_INT(hx_bpe_write_gguf(b, g_vocab, &err), HX_ERR_STATE);
    /* invalid UTF-8 and NUL bytes are just text */
    EXPECT_EQ_INT(hx_bpe_add_text(b, "ab\xff\0cd <tool_", 13, &err), HX_OK);
    EXPECT_EQ_INT(hx_bpe_train(b, &err), HX_OK);
    EXPECT_EQ_INT(hx_bpe_train(b, &err), HX_ERR_STATE);
    EXPECT_EQ_INT(hx_bpe_add_text(b, "x", 1, &err), HX_ERR_STATE);
    hx_bpe_stats s;
    hx_bpe_get_stats(b, &s);
    EXPECT_EQ_INT(s.n_tokens, 256 + HX_BPE_N_SPECIALS); /* no pair twice */
    hx_bpe_free(b);
    hx_bpe_free(NULL);
}

#define MAXI 65536

/* llama.cpp loads a model carrying the trained vocabulary and tokenizes
 * the texts and the corpus with specials as the engine does. */
static void test_llama_cpp_agrees(void)
{
    char why[512];
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.vocab_path = g_vocab;
    mp.n_layer = 1;
    mp.n_embd = 64;
    mp.n_head = 1;
    mp.n_head_kv = 1;
    mp.n_ff = 64;
    hx_err err = {0};
    ASSERT(hx_mkmodel_write(&mp, g_model, &err) == HX_OK);
    hx_vocab *v = load_vocab(g_vocab);
    ASSERT(v);
    hx_buf text;
    hx_buf_init(&text);
    for (size_t i = 0; i < sizeof k_texts / sizeof *k_texts; i++) {
        hx_buf_puts(&text, k_texts[i]);
        hx_buf_puts(&text, "<|im_start|>");
    }
    hx_buf_append(&text, g_corpus.data, 20000);
    static int32_t ref[MAXI], mine[MAXI];
    int n_ref = ref_tokenize(g_model, text.data, text.len, 1, 0, ref, MAXI);
    int n = hx_tokenize(v, text.data, text.len, mine, MAXI, 0, 1);
    if (n_ref < 0) test_fail_at(__FILE__, __LINE__, "reference: %s", ref_error());
    else EXPECT(n == n_ref && !memcmp(mine, ref, (size_t)n * sizeof *mine));
    for (int i = 0; i < n && i < n_ref; i++)
        if (mine[i] != ref[i]) {
            printf("     first difference at %d: %d vs llama.cpp %d\n", i, mine[i], ref[i]);
            break;
        }
    /* without special parsing too */
    n_ref = ref_tokenize(g_model, text.data, text.len, 0, 0, ref, MAXI);
    n = hx_tokenize(v, text.data, text.len, mine, MAXI, 0, 0);
    if (n_ref < 0) test_fail_at(__FILE__, __LINE__, "reference: %s", ref_error());
    else EXPECT(n == n_ref && !memcmp(mine, ref, (size_t)n * sizeof *mine));
    printf("     llama.cpp: %d tokens identical\n", n);
    hx_buf_free(&text);
    hx_vocab_free(v);
    unlink(g_model);
}

/* Token ids of text (no specials parsed); the count. */
static int ids_of(const hx_vocab *v, const char *text, int32_t *ids, int max)
{
    return hx_tokenize(v, text, strlen(text), ids, max, 0, 0);
}

/* split_initial: a word is the same tokens after a space, a quote or
 * nothing (the leading byte its own token), and the engine still segments
 * the training text as the trainer did. Without it, " meeting" is one
 * token that "meeting" is not. */
static void test_split_initial(void)
{
    hx_bpe_params p = hx_bpe_default_params();
    p.vocab_size = NV;
    p.split_initial = 1;
    hx_bpe *b = NULL;
    hx_err err = {0};
    char path[300];
    snprintf(path, sizeof path, "%s.split.gguf", g_vocab);
    ASSERT(hx_bpe_new(&p, &b, &err) == HX_OK);
    ASSERT(hx_bpe_add_text(b, g_corpus.data, g_corpus.len, &err) == HX_OK);
    ASSERT(hx_bpe_train(b, &err) == HX_OK);
    ASSERT(hx_bpe_write_gguf(b, path, &err) == HX_OK);
    hx_bpe_stats st;
    hx_bpe_get_stats(b, &st);
    hx_bpe_free(b);
    hx_vocab *v = load_vocab(path), *v0 = load_vocab(g_vocab);
    ASSERT(v && v0);
    static const char *const words[] = {"meeting", "Alice", "Müller", "Zoë", "calendar",
                                        "xylophone", "create_event", "Tuesday"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        char sp[64], qu[64];
        int32_t a[32], bsp[33], bqu[33];
        snprintf(sp, sizeof sp, " %s", words[i]);
        snprintf(qu, sizeof qu, "\"%s", words[i]);
        int na = ids_of(v, words[i], a, 32), ns = ids_of(v, sp, bsp, 33), nq = ids_of(v, qu, bqu, 33);
        EXPECT(na > 0 && ns == na + 1 && nq == na + 1);
        EXPECT(!memcmp(bsp + 1, a, (size_t)na * sizeof *a) && !memcmp(bqu + 1, a, (size_t)na * sizeof *a));
        EXPECT_EQ_INT(ids_of(v, " ", bsp, 33), 1);
    }
    int differ = 0; /* without: some word changes tokens after a space */
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        char sp[64];
        int32_t a[32], bsp[33];
        snprintf(sp, sizeof sp, " %s", words[i]);
        int na = ids_of(v0, words[i], a, 32), ns = ids_of(v0, sp, bsp, 33);
        differ += ns != na + 1 || memcmp(bsp + 1, a, (size_t)na * sizeof *a) != 0;
    }
    EXPECT(differ > 0);
    EXPECT_EQ_INT(engine_tokens(v, st.n_tokens), st.tokens);
    printf("     %llu tokens with split_initial, %llu without\n", (unsigned long long)st.tokens,
           (unsigned long long)g_stats.tokens);
    hx_vocab_free(v);
    hx_vocab_free(v0);
    unlink(path);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(g_vocab, sizeof g_vocab, "%s/hx_bpe_%d.gguf", t && *t ? t : "/tmp", (int)getpid());
    snprintf(g_model, sizeof g_model, "%s/hx_bpe_model_%d.gguf", t && *t ? t : "/tmp",
             (int)getpid());
    hx_buf_init(&g_corpus);
    make_corpus(&g_corpus);
    RUN(test_train_and_load);
    RUN(test_engine_segments_as_trained);
    RUN(test_round_trip);
    RUN(test_specials_single);
    RUN(test_deterministic);
    RUN(test_llama_cpp_agrees);
    RUN(test_bad_uses);
    RUN(test_split_initial);
    unlink(g_vocab);
    hx_buf_free(&g_corpus);
    return test_summary();
}
