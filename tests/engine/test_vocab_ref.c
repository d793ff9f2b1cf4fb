/* test_vocab_ref.c: Hearth's tokenizers against llama.cpp (the reference
 * harness, tests/ref/ref.h) on our own cases, for the three vocabularies. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "ref/ref.h"
#include "test.h"

#define T(s) {s, sizeof(s) - 1}
typedef struct tcase {
    const char *s;
    size_t n;
} tcase;

/* Each case is tokenized on its own by Hearth. llama.cpp gets all of them
 * in one text, joined by a control token and parsed with specials, which
 * splits the text into fragments tokenized independently (one process
 * start per vocabulary instead of one per case). No case may contain the
 * separator's text. */
static const tcase k_cases[] = {
    /* Chinese, Japanese, Korean */
    T("\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81"
      "\xe4\xbb\x8a\xe5\xa4\xa9\xe5\xa4\xa9\xe6\xb0\x94\xe5\xbe\x88\xe5\xa5\xbd\xe3\x80\x82"),
    T("\xe6\x88\x91\xe7\x9a\x84\xe7\x94\xb5\xe8\x84\x91\xe6\x98\xaf" "2024\xe5\xb9\xb4"
      "\xe4\xb9\xb0\xe7\x9a\x84 MacBook Pro\xe3\x80\x82"),
    T("\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\xa7\xe3\x81\x99\xe3\x81\x97\xe3\x82\x92"
      "\xe9\xa3\x9f\xe3\x81\xb9\xe3\x81\xbe\xe3\x81\x97\xe3\x81\x9f\xe3\x80\x82"
      "\xe3\x82\xab\xe3\x82\xbf\xe3\x82\xab\xe3\x83\x8a\xe3\x81\xa8\xef\xbe\x8a\xef\xbe\x9d"
      "\xef\xbd\xb6\xef\xbd\xb8\xef\xbe\x9e"),
    T("\xec\x95\x88\xeb\x85\x95\xed\x95\x98\xec\x84\xb8\xec\x9a\x94 \xec\x84\xb8\xea\xb3\x84"),
    /* emoji: single, skin tone, ZWJ families, flags, keycaps, text+emoji */
    T("\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d"
      "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7\xe2\x80\x8d\xf0\x9f\x91\xa6"),
    T("\xf0\x9f\x87\xab\xf0\x9f\x87\xb7\xf0\x9f\x87\xaf\xf0\x9f\x87\xb5 1\xef\xb8\x8f"
      "\xe2\x83\xa3 \xe2\x9d\xa4\xef\xb8\x8f\xe2\x80\x8d\xf0\x9f\x94\xa5"),
    T("Meeting at 3pm \xf0\x9f\x93\x85\xe2\x9c\x85 ok?\xf0\x9f\x99\x82\xf0\x9f\x99\x82"),
    T("\xf0\x9f\xa7\x91\xf0\x9f\x8f\xbf\xe2\x80\x8d\xf0\x9f\x92\xbb\xf0\x9f\x8f\xb3\xef\xb8\x8f"
      "\xe2\x80\x8d\xf0\x9f\x8c\x88"),
    /* mixed scripts */
    T("Hello \xd0\x9c\xd0\xb8\xd1\x80 \xce\x93\xce\xb5\xce\xb9\xce\xb1 \xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d "
      "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 "
      "\xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5"),
    T("Caf\xc3\xa9 cafe\xcc\x81 na\xc3\xafve \xc3\x9c" "ber stra\xc3\x9f" "e \xc3\x85ngstr\xc3\xb6m"),
    T("abc\xe4\xb8\xad\xe6\x96\x87" "def\xd1\x80\xd1\x83\xd1\x81" "123\xe0\xb9\x94\xe0\xb9\x95"),
    /* whitespace runs */
    T("a  b   c    d"),
    T("\t\tindented\n\n\n  x  \n"),
    T("line1\r\nline2\r\n\r\nline3\r"),
    T("   \n\t \r\n  "),
    T("trailing spaces    "),
    T("nbsp\xc2\xa0here \xe3\x80\x80ideo\xe2\x80\x83" "em\xc2\x85nel\xe2\x80\xa8ls"),
    T(" \t \t\n"),
    /* digits */
    T("1234567890 12 123 1234 12345"),
    T("3.14159 -42 1,000,000 0x1F 1e-9 $19.99"),
    T("\xd9\xa1\xd9\xa2\xd9\xa3 \xef\xbc\x91\xef\xbc\x92\xef\xbc\x93 \xc2\xb2\xc2\xbd \xe2\x85\xa0\xe2\x85\xab"),
    T("2026-11-29T09:00:00+01:00"),
    /* code */
    T("int main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n"),
    T("def f(x):\n\tif x >= 10 and x != 3:\n\t\treturn [i**2 for i in range(x)]\n"),
    T("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}"),
    T("a->b && c || !d; x += y << 2; /* comment */ // more ~~~ @@@ ###"),
    T("I'm can't we'll they've she'd IT'S You'RE WE'VE 'tis o'clock"),
    /* very long words */
    T("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    T("Donaudampfschifffahrtselektrizit\xc3\xa4tenhauptbetriebswerkbauunterbeamtengesellschaft"),
    T("https://example.com/a/very/long/path?with=query&and=more#fragment_1234567890"),
    T("\xe4\xb8\x80\xe4\xba\x8c\xe4\xb8\x89\xe5\x9b\x9b\xe4\xba\x94\xe5\x85\xad\xe4\xb8\x83"
      "\xe5\x85\xab\xe4\xb9\x9d\xe5\x8d\x81\xe4\xb8\x80\xe4\xba\x8c\xe4\xb8\x89\xe5\x9b\x9b"
      "\xe4\xba\x94\xe5\x85\xad\xe4\xb8\x83\xe5\x85\xab\xe4\xb9\x9d\xe5\x8d\x81"),
    /* punctuation and symbols */
    T("...!!!???,,,;;;:::\xe2\x80\x94\xe2\x80\x93\xe2\x80\xa6\xc2\xab\xc2\xbb\xe2\x80\x9c\xe2\x80\x9d"),
    T("\xe2\x88\x91\xe2\x88\xab\xe2\x88\x9e \xe2\x89\xa0 \xe2\x82\xac\xc2\xa3\xc2\xa5 \xc2\xa9\xc2\xae\xe2\x84\xa2"),
    /* invalid UTF-8: stray, truncated, overlong, surrogate, NUL */
    T("bad\xff" "byte"),
    T("trunc\xe4\xbd" " end\xf0\x9f\x98"),
    T("\x80\x81\x82 cont"),
    T("over\xc0\x80long sur\xed\xa0\x80rogate"),
    T("nul\x00inside"),
};
#define N_CASES (sizeof k_cases / sizeof k_cases[0])

/* Texts with special tokens, per vocabulary, tokenized alone with and
 * without parse_special. */
typedef struct vocab_ref {
    const char *name;
    const char *sep;      /* control token joining the cases */
    const char *special;  /* a prompt with special tokens */
} vocab_ref;

static const vocab_ref k_vocabs[] = {
    {"ggml-vocab-qwen2", "<|endoftext|>",
     "<|im_start|>system\nYou are Hearth.<|im_end|>\n<|im_start|>user\n"
     "Hi <|im_end|> there<|im_start|>"},
    {"ggml-vocab-llama-bpe", "<|end_of_text|>",
     "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi"
     "<|eot_id|><|reserved_special_token_3|>x"},
    {"ggml-vocab-llama-spm", "</s>", "<s>[INST] Hi <s> there [/INST]"},
};

static char g_model[4096];

static hx_vocab *load(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/%s.gguf", name);
    const char *path = test_shared_file(rel);
    if (!path) return NULL;
    snprintf(g_model, sizeof g_model, "%s", path);
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    hx_err err = {0};
    if (hx_gguf_open(path, &g, &err) || hx_vocab_load(g, &v, &err))
        test_fail_at(__FILE__, __LINE__, "%s: %s", path, err.msg);
    hx_gguf_close(g);
    return v;
}

static void print_ids(const char *what, const int32_t *ids, int n)
{
    printf("       %s:", what);
    for (int i = 0; i < n && i < 64; i++) printf(" %d", ids[i]);
    printf(n > 64 ? " ...\n" : "\n");
}

#define MAXI 8192

/* Compares one case: Hearth alone vs llama.cpp's slice of the batch. */
static int cmp_case(hx_vocab *v, size_t c, tcase t, const int32_t *ref,
                    int n_ref)
{
    static int32_t got[MAXI];
    int n = hx_tokenize(v, t.s, t.n, got, MAXI, 0, 1);
    if (n == n_ref && !memcmp(got, ref, (size_t)n * sizeof *got)) return 1;
    test_fail_at(__FILE__, __LINE__, "case %zu differs from llama.cpp", c);
    print_ids("llama.cpp", ref, n_ref);
    print_ids("hearth   ", got, n);
    return 0;
}

static void run_batch(const vocab_ref *r)
{
    char why[512];
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    hx_vocab *v = load(r->name);
    if (!v) return;
    int32_t sep = hx_vocab_find(v, r->sep, strlen(r->sep));
    hx_buf text;
    hx_buf_init(&text);
    for (size_t c = 0; c <= N_CASES; c++) { /* the cases, then the prompt */
        tcase t = c < N_CASES ? k_cases[c] : (tcase){r->special, strlen(r->special)};
        ASSERT(!memmem(t.s, t.n, r->sep, strlen(r->sep)));
        hx_buf_append(&text, t.s, t.n);
        hx_buf_puts(&text, r->sep);
    }
    static int32_t ref[MAXI], mine[MAXI];
    int n_ref = ref_tokenize(g_model, text.data, text.len, 1, 1, ref, MAXI);
    if (n_ref < 0) {
        test_fail_at(__FILE__, __LINE__, "reference: %s", ref_error());
        goto done;
    }
    /* the whole batch, with BOS as the model asks */
    int n = hx_tokenize(v, text.data, text.len, mine, MAXI, 1, 1);
    EXPECT(n == n_ref && !memcmp(mine, ref, (size_t)n * sizeof *mine));
    /* case by case, tokenized alone */
    int pos = hx_vocab_add_bos(v) ? 1 : 0, ok = 0;
    if (pos) EXPECT_EQ_INT(ref[0], hx_vocab_bos(v));
    for (size_t c = 0; c <= N_CASES && pos <= n_ref; c++) {
        tcase t = c < N_CASES ? k_cases[c] : (tcase){r->special, strlen(r->special)};
        int end = pos;
        while (end < n_ref && ref[end] != sep) end++;
        ok += cmp_case(v, c, t, ref + pos, end - pos);
        pos = end + 1;
    }
    EXPECT_EQ_INT(ok, (int)N_CASES + 1);
    printf("     %s: %d/%zu cases as llama.cpp\n", r->name, ok, N_CASES + 1);
done:
    hx_buf_free(&text);
    hx_vocab_free(v);
}

/* The prompt with special tokens read as plain text (parsed, it is the
 * last case of the batch). */
static void run_special(const vocab_ref *r)
{
    char why[512];
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    hx_vocab *v = load(r->name);
    if (!v) return;
    int32_t ref[512], mine[512];
    size_t len = strlen(r->special);
    int n_ref = ref_tokenize(g_model, r->special, len, 0, 0, ref, 512);
    int n = hx_tokenize(v, r->special, len, mine, 512, 0, 0);
    if (n_ref < 0) {
        test_fail_at(__FILE__, __LINE__, "reference: %s", ref_error());
    } else if (n != n_ref || memcmp(mine, ref, (size_t)n * sizeof *mine)) {
        test_fail_at(__FILE__, __LINE__, "%s without parse_special differs",
                     r->name);
        print_ids("llama.cpp", ref, n_ref);
        print_ids("hearth   ", mine, n);
    }
    hx_vocab_free(v);
}

/* Detokenizing Qwen2 ids (no space clean-up in this vocabulary) gives the
 * same bytes as llama_detokenize (control tokens not rendered). */
static void test_detok_qwen2(void)
{
    char why[512];
    if (!ref_available(why, sizeof why)) SKIP("%s", why);
    hx_vocab *v = load(k_vocabs[0].name);
    if (!v) return;
    const char *s = k_vocabs[0].special;
    int32_t ids[512];
    int n = hx_tokenize(v, s, strlen(s), ids, 512, 0, 1);
    char *ref = NULL;
    size_t ref_len = 0;
    hx_buf b;
    hx_buf_init(&b);
    hx_detokenize(v, ids, n, 0, &b);
    if (ref_detok(g_model, ids, n, 0, &ref, &ref_len))
        test_fail_at(__FILE__, __LINE__, "reference: %s", ref_error());
    else
        EXPECT(ref_len == b.len && !memcmp(ref, b.data, b.len));
    free(ref);
    hx_buf_free(&b);
    hx_vocab_free(v);
}

static void test_qwen2_cases(void) { run_batch(&k_vocabs[0]); }
static void test_llama_bpe_cases(void) { run_batch(&k_vocabs[1]); }
static void test_llama_spm_cases(void) { run_batch(&k_vocabs[2]); }
static void test_qwen2_special(void) { run_special(&k_vocabs[0]); }
static void test_llama_bpe_special(void) { run_special(&k_vocabs[1]); }
static void test_llama_spm_special(void) { run_special(&k_vocabs[2]); }

int main(void)
{
    RUN(test_qwen2_cases);
    RUN(test_llama_bpe_cases);
    RUN(test_llama_spm_cases);
    RUN(test_qwen2_special);
    RUN(test_llama_bpe_special);
    RUN(test_llama_spm_special);
    RUN(test_detok_qwen2);
    return test_summary();
}
