/* cmd_tokenize.c: `hearth tokenize -m MODEL [--special] [--no-bos] TEXT`:
 * prints the token ids of TEXT (or of stdin with `-`) separated by spaces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/engine.h"

static void tokenize_usage(FILE *f)
{
    fprintf(f,
            "usage: hearth tokenize -m MODEL [--special] [--no-bos] TEXT\n\n"
            "Prints the token ids of TEXT as the model's tokenizer gives them,\n"
            "separated by spaces. TEXT '-' reads the text from stdin.\n\n"
            "  -m, --model FILE  a GGUF model or vocabulary file\n"
            "  --special         recognise special tokens (<|im_start|>...) in TEXT\n"
            "  --no-bos          do not add BOS even if the model asks for it\n");
}

typedef struct tok_args {
    const char *model, *text;
    int special, bos;
} tok_args;

static int parse_tok_args(int argc, char **argv, tok_args *a)
{
    a->bos = 1;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-m") || !strcmp(s, "--model")) {
            if (++i >= argc) {
                fprintf(stderr, "hearth tokenize: %s needs a file\n", s);
                return HX_EXIT_USAGE;
            }
            a->model = argv[i];
        } else if (!strncmp(s, "--model=", 8)) {
            a->model = s + 8;
        } else if (!strcmp(s, "--special")) {
            a->special = 1;
        } else if (!strcmp(s, "--no-bos")) {
            a->bos = 0;
        } else if (s[0] == '-' && s[1] && strcmp(s, "--")) {
            fprintf(stderr, "hearth tokenize: unknown option '%s' (see --help)\n", s);
            return HX_EXIT_USAGE;
        } else {
            if (!strcmp(s, "--") && ++i >= argc) break;
            if (a->text) {
                fprintf(stderr, "hearth tokenize: give the text as one argument "
                                "(quote it) or '-' for stdin\n");
                return HX_EXIT_USAGE;
            }
            a->text = argv[i];
        }
    }
    if (!a->model || !a->text) {
        fprintf(stderr, "hearth tokenize: %s\n\n", !a->model ? "no model (-m MODEL)"
                                                           : "no text");
        tokenize_usage(stderr);
        return HX_EXIT_USAGE;
    }
    return HX_EXIT_OK;
}

/* Reads all of stdin into a malloc'd buffer. */
static char *read_stdin(size_t *len)
{
    hx_buf b;
    hx_buf_init(&b);
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, stdin)) > 0) hx_buf_append(&b, chunk, k);
    if (b.oom || ferror(stdin)) {
        hx_buf_free(&b);
        return NULL;
    }
    if (!b.data) hx_buf_puts(&b, "");
    return hx_buf_steal(&b, len);
}

static int print_ids(const hx_vocab *v, const char *text, size_t len,
                     const tok_args *a)
{
    int32_t need = hx_tokenize(v, text, len, NULL, 0, a->bos, a->special);
    if (need == INT32_MIN) {
        fprintf(stderr, "hearth tokenize: out of memory\n");
        return HX_EXIT_FAIL;
    }
    int32_t n = need < 0 ? -need : need;
    int32_t *ids = hx_malloc_array((size_t)n + 1, sizeof *ids);
    if (!ids) {
        fprintf(stderr, "hearth tokenize: out of memory\n");
        return HX_EXIT_FAIL;
    }
    n = hx_tokenize(v, text, len, ids, n, a->bos, a->special);
    for (int32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    return fflush(stdout) ? HX_EXIT_FAIL : HX_EXIT_OK;
}

int hx_cmd_tokenize(int argc, char **argv)
{
    tok_args a = {0};
    if (hx_cli_wants_help(argc, argv)) {
        tokenize_usage(stdout);
        return HX_EXIT_OK;
    }
    int ec = parse_tok_args(argc, argv, &a);
    if (ec) return ec;
    hx_err err = {0};
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    int rc = hx_gguf_open(a.model, &g, &err);
    if (!rc) rc = hx_vocab_load(g, &v, &err);
    hx_gguf_close(g);
    if (rc) {
        if (strstr(err.msg, a.model)) /* the reader names the file */
            fprintf(stderr, "hearth tokenize: %s\n", err.msg);
        else
            fprintf(stderr, "hearth tokenize: %s: %s\n", a.model, err.msg);
        return hx_cli_exit_code(rc);
    }
    size_t len = strlen(a.text);
    char *in = NULL;
    if (!strcmp(a.text, "-") && !(in = read_stdin(&len))) {
        fprintf(stderr, "hearth tokenize: cannot read stdin\n");
        hx_vocab_free(v);
        return HX_EXIT_FAIL;
    }
    ec = print_ids(v, in ? in : a.text, len, &a);
    free(in);
    hx_vocab_free(v);
    return ec;
}
