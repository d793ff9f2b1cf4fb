/* fuzz_tokenizer.c: fuzz target for the tokenizers: tokenizes the input
 * with the real Qwen2 and Llama 2 vocabularies (from HEARTH_SHARED_DATA;
 * without them it returns at once), with and without special tokens and
 * with special tokens read only in marked ranges, and checks the ids, the
 * round trip and the streaming detokenizer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hx_vocab *g_qwen2, *g_spm;
static int g_loaded;

static hx_vocab *load(const char *name)
{
    const char *dir = getenv("HEARTH_SHARED_DATA");
    char path[4096];
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    hx_err err = {0};
    snprintf(path, sizeof path, "%s/vocab/%s", dir && *dir ? dir : "../shared/data",
             name);
    if (hx_gguf_open(path, &g, &err) == HX_OK) hx_vocab_load(g, &v, &err);
    hx_gguf_close(g);
    return v;
}

/* Strictly valid UTF-8 (no overlongs, surrogates or > U+10FFFF)? */
static int valid_utf8(const uint8_t *s, size_t n)
{
    hx_detok d;
    hx_buf b;
    hx_detok_init(&d);
    hx_buf_init(&b);
    hx_detok_push_bytes(&d, (const char *)s, n, &b);
    hx_detok_flush(&d, &b);
    int ok = b.len == n && (n == 0 || !memcmp(b.data, s, n));
    hx_buf_free(&b);
    return ok;
}

static int32_t *tokenize(const hx_vocab *v, const uint8_t *s, size_t n,
                         int special, int32_t *count)
{
    int32_t need = hx_tokenize(v, (const char *)s, n, NULL, 0, 1, special);
    if (need == INT32_MIN) abort();
    int32_t k = need < 0 ? -need : need;
    int32_t *ids = malloc(((size_t)k + 1) * sizeof *ids);
    if (!ids) abort();
    if (hx_tokenize(v, (const char *)s, n, ids, k, 1, special) != k) abort();
    for (int32_t i = 0; i < k; i++)
        if (ids[i] < 0 || ids[i] >= hx_vocab_n_tokens(v)) abort();
    *count = k;
    return ids;
}

/* The streaming detokenizer always emits valid UTF-8, and for valid pieces
 * the same bytes as the plain concatenation. */
static void check_stream(const hx_vocab *v, const int32_t *ids, int32_t n,
                         int special)
{
    hx_detok d;
    hx_buf whole, stream;
    hx_detok_init(&d);
    hx_buf_init(&whole);
    hx_buf_init(&stream);
    hx_detokenize(v, ids, n, special, &whole);
    for (int32_t i = 0; i < n; i++) hx_detok_push(&d, v, ids[i], special, &stream);
    hx_detok_flush(&d, &stream);
    if (!valid_utf8((const uint8_t *)stream.data, stream.len)) abort();
    if (valid_utf8((const uint8_t *)whole.data, whole.len) &&
        (whole.len != stream.len ||
         (whole.len && memcmp(whole.data, stream.data, whole.len))))
        abort();
    hx_buf_free(&whole);
    hx_buf_free(&stream);
}

/* Valid UTF-8 detokenizes back to itself. SPM only without specials (a
 * space goes in front of each text fragment), after the space in front of
 * the text, and for text without U+2581 (read as a space) or '<' (merges
 * may spell a control token such as <s>). */
static void check_round_trip(const hx_vocab *v, const uint8_t *s, size_t n,
                             const int32_t *ids, int32_t k, int special)
{
    int spm = hx_vocab_type(v) == HX_VOCAB_SPM;
    if (spm && (special || memmem(s, n, "\xe2\x96\x81", 3) || memchr(s, '<', n)))
        return;
    hx_buf b;
    hx_buf_init(&b);
    hx_detokenize(v, ids, k, special, &b);
    const char *p = b.data ? b.data : "";
    size_t len = b.len, bl = 0;
    if (special && k && ids[0] == hx_vocab_bos(v) && hx_vocab_add_bos(v)) {
        hx_vocab_piece(v, ids[0], &bl);
        p += bl, len -= bl;
    }
    if (spm && n) {
        if (!len || p[0] != ' ') abort();
        p++, len--;
    }
    if (len != n || (n && memcmp(p, s, n))) abort();
    hx_buf_free(&b);
}

/* hx_tokenize_marked with ranges cut from the input itself (every other
 * block of 1 + data[0] % 32 bytes): ids in range, and with one range over
 * everything the same ids as hx_tokenize with specials. */
static void check_marked(const hx_vocab *v, const uint8_t *s, size_t n)
{
    hx_span marks[4096 / 2 + 1];
    int k = 0;
    size_t step = n ? 1 + s[0] % 32 : 1;
    for (size_t at = 0; at < n && k < (int)(sizeof marks / sizeof *marks); at += 2 * step)
        marks[k++] = (hx_span){at, at + step < n ? at + step : n};
    int32_t need = hx_tokenize_marked(v, (const char *)s, n, marks, k, NULL, 0, 1);
    int32_t m = need < 0 ? -need : need, *ids = malloc(((size_t)m + 1) * sizeof *ids);
    if (need == INT32_MIN || !ids) abort();
    if (hx_tokenize_marked(v, (const char *)s, n, marks, k, ids, m, 1) != m) abort();
    for (int32_t i = 0; i < m; i++)
        if (ids[i] < 0 || ids[i] >= hx_vocab_n_tokens(v)) abort();
    check_stream(v, ids, m, 1);
    free(ids);
    const hx_span all = {0, n};
    int32_t c, *whole = tokenize(v, s, n, 1, &c);
    ids = malloc(((size_t)c + 1) * sizeof *ids);
    if (!ids || hx_tokenize_marked(v, (const char *)s, n, &all, 1, ids, c, 1) != c ||
        (c && memcmp(ids, whole, (size_t)c * sizeof *ids)))
        abort();
    free(ids);
    free(whole);
}

static void check(const hx_vocab *v, const uint8_t *data, size_t size)
{
    int valid = valid_utf8(data, size);
    for (int special = 0; special <= 1; special++) {
        int32_t n;
        int32_t *ids = tokenize(v, data, size, special, &n);
        check_stream(v, ids, n, special);
        if (valid) check_round_trip(v, data, size, ids, n, special);
        free(ids);
    }
    check_marked(v, data, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_loaded) {
        g_loaded = 1;
        g_qwen2 = load("ggml-vocab-qwen2.gguf");
        g_spm = load("ggml-vocab-llama-spm.gguf");
    }
    if (size > 4096) size = 4096; /* keep each run short */
    if (g_qwen2) check(g_qwen2, data, size);
    if (g_spm) check(g_spm, data, size);
    return 0;
}
