/* test_vocab.c: the tokenizers against llama.cpp's test vectors (every case
 * of ../shared/data/vocab/ggml-vocab-NAME.gguf.inp/.out), round trips,
 * streaming, special tokens. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "test.h"

/* Loads vocab/NAME.gguf, closing the file right away (the vocab copies). */
static hx_vocab *load_vocab(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/%s.gguf", name);
    const char *path = test_shared_file(rel);
    if (!path) return NULL;
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    hx_err err = {0};
    if (hx_gguf_open(path, &g, &err) != HX_OK) {
        test_fail_at(__FILE__, __LINE__, "open %s: %s", path, err.msg);
        return NULL;
    }
    if (hx_vocab_load(g, &v, &err) != HX_OK)
        test_fail_at(__FILE__, __LINE__, "load %s: %s", path, err.msg);
    hx_gguf_close(g);
    return v;
}

static char *read_shared(const char *rel, size_t *len)
{
    const char *path = test_shared_file(rel);
    char *data = NULL;
    hx_err err = {0};
    if (!path) return NULL;
    if (hx_read_file(path, 0, &data, len, &err) != HX_OK) {
        test_fail_at(__FILE__, __LINE__, "%s", err.msg);
        return NULL;
    }
    return data;
}

/* Escapes text for a failure message (static buffer). */
static const char *esc(const char *s, size_t n)
{
    static char buf[1024];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < sizeof buf; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') o += (size_t)snprintf(buf + o, sizeof buf - o, "\\n");
        else if (c == '\t') o += (size_t)snprintf(buf + o, sizeof buf - o, "\\t");
        else if (c == '\r') o += (size_t)snprintf(buf + o, sizeof buf - o, "\\r");
        else if (c < 0x20) o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    buf[o] = 0;
    return buf;
}

static void ids_str(const int32_t *ids, int n, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o + 16 < size; i++)
        o += (size_t)snprintf(buf + o, size - o, " %d", ids[i]);
}

/* Parses one line of expected ids. */
static int parse_ids(const char *line, size_t len, int32_t *ids, int max)
{
    int n = 0;
    size_t i = 0;
    while (i < len && n < max) {
        while (i < len && line[i] == ' ') i++;
        if (i >= len) break;
        ids[n++] = (int32_t)strtol(line + i, NULL, 10);
        while (i < len && line[i] != ' ') i++;
    }
    return n;
}

#define SEP "\n__ggml_vocab_test__\n"
#define MAXT 4096

/* Checks one case; returns 1 if it matched. */
static int check_case(hx_vocab *v, int idx, const char *inp, size_t n_inp,
                      const char *exp_line, size_t n_exp)
{
    static int32_t exp[MAXT], got[MAXT];
    int ne = parse_ids(exp_line, n_exp, exp, MAXT);
    int ng = hx_tokenize(v, inp, n_inp, got, MAXT, 0, 0);
    if (ng == ne && !memcmp(exp, got, (size_t)ng * sizeof *got)) return 1;
    char se[2048], sg[2048];
    ids_str(exp, ne, se, sizeof se);
    ids_str(got, ng > 0 ? ng : 0, sg, sizeof sg);
    test_fail_at(__FILE__, __LINE__, "case %d \"%s\": expected [%s ] got [%s ]",
                 idx, esc(inp, n_inp), se, sg);
    return 0;
}

/* Detokenizing the ids gives the input back (SPM: after the space that
 * the tokenizer put in front). */
static void check_round_trip(hx_vocab *v, int idx, const char *inp, size_t n)
{
    int32_t ids[MAXT];
    int k = hx_tokenize(v, inp, n, ids, MAXT, 0, 0);
    hx_buf b;
    hx_buf_init(&b);
    hx_detokenize(v, ids, k, 0, &b);
    const char *s = b.data ? b.data : "";
    size_t len = b.len;
    if (hx_vocab_type(v) == HX_VOCAB_SPM && len && s[0] == ' ') s++, len--;
    if (len != n || memcmp(s, inp, n))
        test_fail_at(__FILE__, __LINE__, "case %d round trip: \"%s\"", idx,
                     esc(s, len));
    hx_buf_free(&b);
}

static void run_vectors(const char *name)
{
    char rel[256];
    size_t n_inp, n_out;
    hx_vocab *v = load_vocab(name);
    if (!v) return;
    snprintf(rel, sizeof rel, "vocab/%s.gguf.inp", name);
    char *inp = read_shared(rel, &n_inp);
    snprintf(rel, sizeof rel, "vocab/%s.gguf.out", name);
    char *out = read_shared(rel, &n_out);
    if (!inp || !out) goto done;
    const char *p = inp, *end = inp + n_inp, *o = out, *oend = out + n_out;
    int idx = 0, ok = 0;
    while (p < end) {
        const char *s = memmem(p, (size_t)(end - p), SEP, strlen(SEP));
        if (!s) break; /* every case ends with the separator */
        const char *nl = memchr(o, '\n', (size_t)(oend - o));
        if (!nl) {
            test_fail_at(__FILE__, __LINE__, "%s: .out has fewer lines", name);
            break;
        }
        ok += check_case(v, idx, p, (size_t)(s - p), o, (size_t)(nl - o));
        check_round_trip(v, idx, p, (size_t)(s - p));
        idx++;
        p = s + strlen(SEP);
        o = nl + 1;
    }
    EXPECT(idx >= 40); /* 46 cases in each file */
    EXPECT(p == end);
    EXPECT(o == oend);
    printf("     %s: %d/%d cases match\n", name, ok, idx);
done:
    free(inp);
    free(out);
    hx_vocab_free(v);
}

static void test_vectors_qwen2(void) { run_vectors("ggml-vocab-qwen2"); }
static void test_vectors_llama_bpe(void) { run_vectors("ggml-vocab-llama-bpe"); }
static void test_vectors_llama_spm(void) { run_vectors("ggml-vocab-llama-spm"); }

static void test_metadata(void)
{
    hx_vocab *q = load_vocab("ggml-vocab-qwen2");
    if (!q) return;
    EXPECT_EQ_INT(hx_vocab_type(q), HX_VOCAB_BPE);
    EXPECT_STR_EQ(hx_vocab_pre(q), "qwen2");
    EXPECT(hx_vocab_n_tokens(q) > 151000);
    int32_t im_end = hx_vocab_find(q, "<|im_end|>", 10);
    int32_t eot = hx_vocab_find(q, "<|endoftext|>", 13);
    EXPECT(im_end > 0 && eot > 0);
    EXPECT(hx_vocab_is_eog(q, im_end));
    EXPECT(hx_vocab_is_eog(q, eot));
    EXPECT(!hx_vocab_is_eog(q, hx_vocab_find(q, "hello", 5)));
    EXPECT(hx_vocab_attr(q, im_end) & HX_TOKEN_CONTROL);
    EXPECT_EQ_INT(hx_vocab_add_bos(q), 0);
    EXPECT_EQ_INT(hx_vocab_find(q, "no such piece at all", 20), -1);
    EXPECT_EQ_INT(hx_vocab_attr(q, -1), HX_TOKEN_UNDEFINED);
    EXPECT(hx_vocab_text(q, hx_vocab_n_tokens(q), NULL) == NULL);
    hx_vocab_free(q);

    hx_vocab *l = load_vocab("ggml-vocab-llama-spm");
    if (!l) return;
    EXPECT_EQ_INT(hx_vocab_type(l), HX_VOCAB_SPM);
    EXPECT_EQ_INT(hx_vocab_bos(l), 1);
    EXPECT_EQ_INT(hx_vocab_eos(l), 2);
    EXPECT(hx_vocab_add_bos(l));
    EXPECT(hx_vocab_is_eog(l, 2));
    int32_t ids[8];
    EXPECT_EQ_INT(hx_tokenize(l, "", 0, ids, 8, 1, 0), 1);
    EXPECT_EQ_INT(ids[0], 1);
    EXPECT_EQ_INT(hx_tokenize(l, "", 0, ids, 8, 0, 0), 0);
    hx_vocab_free(l);

    hx_vocab *b = load_vocab("ggml-vocab-llama-bpe");
    if (!b) return;
    int32_t bot = hx_vocab_find(b, "<|begin_of_text|>", 17);
    EXPECT(hx_vocab_add_bos(b));
    EXPECT_EQ_INT(hx_vocab_bos(b), bot);
    EXPECT(hx_vocab_is_eog(b, hx_vocab_find(b, "<|eot_id|>", 10)));
    EXPECT_EQ_INT(hx_tokenize(b, "Hi", 2, ids, 8, 1, 0), 2);
    EXPECT_EQ_INT(ids[0], bot);
    hx_vocab_free(b);
}

/* <|im_start|>user: one control token when parsing specials, plain text
 * otherwise; detokenized with or without the control text. */
static void test_special_parsing(void)
{
    hx_vocab *q = load_vocab("ggml-vocab-qwen2");
    if (!q) return;
    const char *s = "<|im_start|>user\nHi<|im_end|>";
    int32_t ids[64];
    int32_t ims = hx_vocab_find(q, "<|im_start|>", 12);
    int32_t ime = hx_vocab_find(q, "<|im_end|>", 10);
    int n = hx_tokenize(q, s, strlen(s), ids, 64, 0, 1);
    ASSERT(n == 5);
    EXPECT_EQ_INT(ids[0], ims);
    EXPECT_EQ_INT(ids[1], hx_vocab_find(q, "user", 4));
    EXPECT_EQ_INT(ids[4], ime);
    int m = hx_tokenize(q, s, strlen(s), ids, 64, 0, 0);
    EXPECT(m > 5);
    for (int i = 0; i < m; i++) EXPECT(ids[i] != ims && ids[i] != ime);
    hx_buf b;
    hx_buf_init(&b);
    hx_detokenize(q, ids, m, 0, &b);
    EXPECT_STR_EQ(b.data, s); /* the plain-text reading round-trips */
    hx_buf_free(&b);
    n = hx_tokenize(q, s, strlen(s), ids, 64, 0, 1);
    hx_buf_init(&b);
    hx_detokenize(q, ids, n, 0, &b);
    EXPECT_STR_EQ(b.data, "user\nHi");
    hx_buf_free(&b);
    hx_buf_init(&b);
    hx_detokenize(q, ids, n, 1, &b);
    EXPECT_STR_EQ(b.data, s);
    hx_buf_free(&b);
    char piece[32];
    EXPECT_EQ_INT(hx_token_to_piece(q, ims, piece, sizeof piece, 0), 0);
    EXPECT_EQ_INT(hx_token_to_piece(q, ims, piece, sizeof piece, 1), 12);
    EXPECT_EQ_INT(hx_token_to_piece(q, ims, piece, 4, 1), -12);
    hx_vocab_free(q);
}

/* The caller-buffer protocol of hx_tokenize. */
static void test_buffer_protocol(void)
{
    hx_vocab *q = load_vocab("ggml-vocab-qwen2");
    if (!q) return;
    int32_t ids[4];
    const char *s = "one two three four five six";
    int n = hx_tokenize(q, s, strlen(s), NULL, 0, 0, 0);
    EXPECT_EQ_INT(n, -6);
    EXPECT_EQ_INT(hx_tokenize(q, s, strlen(s), ids, 4, 0, 0), -6);
    EXPECT_EQ_INT(ids[0], hx_vocab_find(q, "one", 3));
    hx_vocab_free(q);
}

/* An emoji split over several byte tokens comes out whole and only once
 * complete; a broken tail is flushed as U+FFFD. */
static void test_streaming(void)
{
    hx_vocab *q = load_vocab("ggml-vocab-qwen2");
    if (!q) return;
    const char *s = "a\xf0\x9f\xa6\x99\xe2\x80\x8d\xf0\x9f\x94\xa5 \xe4\xbd\xa0\xe5\xa5\xbd!";
    int32_t ids[64];
    int n = hx_tokenize(q, s, strlen(s), ids, 64, 0, 0);
    ASSERT(n > 0);
    hx_detok d;
    hx_detok_init(&d);
    hx_buf out;
    hx_buf_init(&out);
    int partial = 0;
    for (int i = 0; i < n; i++) {
        size_t before = out.len;
        EXPECT_EQ_INT(hx_detok_push(&d, q, ids[i], 0, &out), HX_OK);
        if (d.n_pending) partial++;
        /* whatever was emitted is whole UTF-8: no lone lead byte at the end */
        if (out.len > before) {
            unsigned char last = (unsigned char)out.data[out.len - 1];
            EXPECT(last < 0x80 || (last & 0xc0) == 0x80);
        }
    }
    EXPECT(partial > 0); /* some token did end mid-character */
    hx_detok_flush(&d, &out);
    EXPECT_STR_EQ(out.data, s);
    hx_buf_free(&out);

    hx_buf_init(&out);
    hx_detok_init(&d);
    hx_detok_push_bytes(&d, "x\xf0\x9f", 3, &out);
    EXPECT_STR_EQ(out.data, "x");
    hx_detok_push_bytes(&d, "\xff", 1, &out); /* breaks the sequence */
    hx_detok_push_bytes(&d, "\xe4\xbd", 2, &out);
    hx_detok_flush(&d, &out);
    EXPECT_STR_EQ(out.data, "x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    hx_buf_free(&out);
    hx_vocab_free(q);
}

/* Invalid UTF-8 tokenizes (as U+FFFD, like llama.cpp) and never crashes. */
static void test_invalid_utf8(void)
{
    const char *names[] = {"ggml-vocab-qwen2", "ggml-vocab-llama-bpe",
                           "ggml-vocab-llama-spm"};
    for (int k = 0; k < 3; k++) {
        hx_vocab *v = load_vocab(names[k]);
        if (!v) return;
        const char s[] = "ok\xff\xfe\xc3 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\x80\x00z\xe4\xbd";
        int32_t ids[128];
        int n = hx_tokenize(v, s, sizeof s - 1, ids, 128, 1, 1);
        EXPECT(n > 0);
        for (int i = 0; i < n; i++)
            EXPECT(ids[i] >= 0 && ids[i] < hx_vocab_n_tokens(v));
        if (hx_vocab_type(v) == HX_VOCAB_BPE) {
            /* invalid bytes read as U+FFFD, as llama.cpp does; above
             * U+10FFFF (where llama.cpp throws) too */
            int32_t a[16], b[16];
            int na = hx_tokenize(v, "a\xff" "b", 3, a, 16, 0, 0);
            int nb = hx_tokenize(v, "a\xef\xbf\xbd" "b", 5, b, 16, 0, 0);
            EXPECT(na == nb && !memcmp(a, b, (size_t)na * sizeof *a));
            na = hx_tokenize(v, "a\xf4\x90\x80\x80" "b", 6, a, 16, 0, 0);
            EXPECT(na == nb && !memcmp(a, b, (size_t)na * sizeof *a));
        }
        hx_vocab_free(v);
    }
}

/* A long text (100 KB, with a 20 KB word) tokenizes and round-trips. */
static void test_long_text(void)
{
    hx_vocab *q = load_vocab("ggml-vocab-qwen2");
    if (!q) return;
    hx_buf b;
    hx_buf_init(&b);
    while (b.len < 80000)
        hx_buf_puts(&b, "The quick brown fox, \xe7\x8b\x90\xe7\x8b\xb8 \xf0\x9f\xa6\x8a, "
                        "jumps over 12345 lazy dogs.\n\t  ");
    for (int i = 0; i < 20000; i++) hx_buf_putc(&b, (char)('a' + i % 3));
    size_t cap = b.len + 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    double t0 = hx_time_mono();
    int n = hx_tokenize(q, b.data, b.len, ids, (int32_t)cap, 0, 1);
    double dt = hx_time_mono() - t0;
    printf("     %zu bytes -> %d tokens in %.3f s\n", b.len, n, dt);
    ASSERT(n > 0);
    hx_buf d;
    hx_buf_init(&d);
    hx_detokenize(q, ids, n, 0, &d);
    EXPECT(d.len == b.len && !memcmp(d.data, b.data, b.len));
    hx_buf_free(&d);
    hx_buf_free(&b);
    free(ids);
    hx_vocab_free(q);
}

/* Metadata that is missing or wrong gets a clear error, not a crash. */
static void test_broken_metadata(void)
{
    char path[] = "/tmp/hx_vocab_test_XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    const char *toks[] = {"a", "b", "ab"};
    struct {
        const char *model, *pre;
        int merges, n_scores, rc;
    } cases[] = {
        {NULL, NULL, 0, 3, HX_ERR_FORMAT},          /* no model */
        {"bert", NULL, 0, 3, HX_ERR_UNSUPPORTED},   /* WordPiece */
        {"gpt2", "qwen2", 0, 3, HX_ERR_FORMAT},     /* no merges */
        {"gpt2", "gpt-4o", 1, 3, HX_ERR_UNSUPPORTED},
        {"gpt2", NULL, 1, 3, HX_ERR_UNSUPPORTED},   /* no pre-tokenizer */
        {"llama", NULL, 0, 2, HX_ERR_FORMAT},       /* short scores */
        {"gpt2", "qwen2", 1, 3, HX_OK},
        {"llama", NULL, 0, 3, HX_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hx_gguf_writer *w = hx_gguf_writer_new();
        hx_err err = {0};
        if (cases[i].model) hx_gguf_set_str(w, "tokenizer.ggml.model", cases[i].model);
        if (cases[i].pre) hx_gguf_set_str(w, "tokenizer.ggml.pre", cases[i].pre);
        if (cases[i].model && !strcmp(cases[i].model, "llama"))
            hx_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", 0);
        hx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 3);
        if (cases[i].merges) {
            const char *m[] = {"a b"};
            hx_gguf_set_arr_str(w, "tokenizer.ggml.merges", m, NULL, 1);
        }
        float scores[3] = {0, 0, 1};
        hx_gguf_set_arr(w, "tokenizer.ggml.scores", HX_GGUF_F32, scores,
                        (uint64_t)cases[i].n_scores);
        ASSERT(hx_gguf_writer_write(w, path, &err) == HX_OK);
        hx_gguf_writer_free(w);
        hx_gguf *g = NULL;
        hx_vocab *v = NULL;
        ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
        int rc = hx_vocab_load(g, &v, &err);
        hx_gguf_close(g);
        EXPECT_EQ_INT(rc, cases[i].rc);
        if (rc == HX_OK) {
            int32_t ids[8];
            ASSERT(v != NULL);
            EXPECT_EQ_INT(hx_tokenize(v, "ab", 2, ids, 8, 0, 0), 1);
            EXPECT_EQ_INT(ids[0], 2);
        } else {
            EXPECT(v == NULL && err.msg[0]);
        }
        hx_vocab_free(v);
    }
    unlink(path);
}

/* Writes a small byte-level BPE vocabulary with a user-defined token <t>
 * (as Qwen's <tool_call>) and a control token <c>, and loads it. */
static hx_vocab *tiny_vocab(const char *path)
{
    const char *toks[] = {"a", "b", "c", "<", ">", "t", "<t>", "<c>", "ab"};
    int32_t types[] = {1, 1, 1, 1, 1, 1, 4, 3, 1};
    const char *merges[] = {"a b"};
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_err err = {0};
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    hx_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    hx_gguf_set_str(w, "tokenizer.ggml.pre", "qwen2");
    hx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 9);
    hx_gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_I32, types, 9);
    hx_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
    if (hx_gguf_writer_write(w, path, &err) == HX_OK &&
        hx_gguf_open(path, &g, &err) == HX_OK)
        hx_vocab_load(g, &v, &err);
    hx_gguf_close(g);
    hx_gguf_writer_free(w);
    return v;
}

/* As llama.cpp: user-defined tokens are matched in text even without
 * parse_special and always rendered; control tokens only when asked. */
/* tiny_vocab in a temporary file (removed), or NULL. */
static hx_vocab *tiny_vocab_tmp(void)
{
    char path[] = "/tmp/hx_vocab_ud_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    hx_vocab *v = tiny_vocab(path);
    unlink(path);
    return v;
}

static void test_user_defined(void)
{
    hx_vocab *v = tiny_vocab_tmp();
    ASSERT(v != NULL);
    int32_t ids[16];
    int n = hx_tokenize(v, "ab<t>a<c>", 9, ids, 16, 0, 0);
    ASSERT(n == 6);
    EXPECT_EQ_INT(ids[0], 8); /* "ab" merged */
    EXPECT_EQ_INT(ids[1], 6); /* <t> */
    EXPECT_EQ_INT(ids[2], 0);
    EXPECT_EQ_INT(ids[3], 3); /* "<" "c" ">" as text */
    n = hx_tokenize(v, "ab<t>a<c>", 9, ids, 16, 0, 1);
    ASSERT(n == 4);
    EXPECT_EQ_INT(ids[3], 7); /* <c> */
    char piece[8];
    EXPECT_EQ_INT(hx_token_to_piece(v, 6, piece, 8, 0), 3);
    EXPECT_EQ_INT(hx_token_to_piece(v, 7, piece, 8, 0), 0);
    EXPECT_EQ_INT(hx_token_to_piece(v, 7, piece, 8, 1), 3);
    EXPECT(!hx_vocab_is_special(v, 6) && hx_vocab_is_special(v, 7));
    hx_vocab_free(v);
}

/* hx_tokenize_marked: a special token's spelling is one only inside a
 * marked range; elsewhere (the escape: someone else's text spelling
 * "<t>" or "<c>") it is plain text, user-defined tokens included; inside
 * the marks (the control) it is the token, as hx_tokenize reads it. */
static void test_marked(void)
{
    hx_vocab *v = tiny_vocab_tmp();
    ASSERT(v != NULL);
    const char *text = "<c>ab<t>a<c>"; /* a template's <c>, then content */
    const hx_span first = {0, 3}, all = {0, 12};
    int32_t ids[16], ref[16];
    int n = hx_tokenize_marked(v, text, 12, &first, 1, ids, 16, 0);
    ASSERT(n > 2);
    EXPECT_EQ_INT(ids[0], 7);
    for (int i = 1; i < n; i++) EXPECT(ids[i] != 6 && ids[i] != 7);
    int m = hx_tokenize_marked(v, text, 12, &all, 1, ids, 16, 0);
    EXPECT_EQ_INT(m, hx_tokenize(v, text, 12, ref, 16, 0, 1));
    EXPECT(m > 0 && !memcmp(ids, ref, (size_t)m * sizeof *ids));
    /* a token straddling a mark's edge is not one */
    const hx_span half = {0, 6};
    n = hx_tokenize_marked(v, text, 12, &half, 1, ids, 16, 0);
    for (int i = 1; i < n; i++) EXPECT(ids[i] != 6);
    EXPECT(hx_tokenize_marked(v, text, 12, NULL, 0, ids, 16, 0) > 4); /* no marks: all text */
    hx_vocab_free(v);
}

int main(void)
{
    RUN(test_vectors_qwen2);
    RUN(test_vectors_llama_bpe);
    RUN(test_vectors_llama_spm);
    RUN(test_metadata);
    RUN(test_special_parsing);
    RUN(test_buffer_protocol);
    RUN(test_streaming);
    RUN(test_invalid_utf8);
    RUN(test_long_text);
    RUN(test_broken_metadata);
    RUN(test_user_defined);
    RUN(test_marked);
    return test_summary();
}
