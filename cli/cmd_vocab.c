/* cmd_vocab.c: `hearth vocab train`: learns a byte-level BPE vocabulary
 * (modelfile/vocab_train.h) from chat JSONL rendered as the agent renders it
 * and from plain text files, and writes it as a GGUF; `hearth vocab
 * coverage`: how evenly training data makes the model emit each token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "nightly/nightly.h"
#include "cli/cli.h"
#include "modelfile/modelfile.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hearth vocab train --size N -o VOCAB.gguf [--chat FILE.jsonl]...\n"
            "                          [--style STYLE] [TEXTFILE]...\n\n"
            "Learns a byte-level BPE vocabulary (gpt2 model, qwen2 pre-tokenizer with\n"
            "single digits) of N tokens: 256 bytes, the merges, then the special\n"
            "tokens <|endoftext|> <tool_call> </tool_call> <tool_response>\n"
            "</tool_response> <|im_start|> <|im_end|> <tools> </tools>.\n\n"
            "  --size N          tokens in all (default 4096)\n"
            "  -o, --out FILE    the GGUF vocabulary to write\n"
            "  --chat FILE       conversations, one JSON object a line ({\"messages\",\n"
            "                    \"tools\", \"style\"}), rendered as the agent renders them\n"
            "  --style STYLE     render every --chat file in STYLE (compact, brief,\n"
            "                    qwen3, chatml, llama3) instead of each line's \"style\"\n"
            "  --min-count C     stop when the best pair occurs fewer times (default 2)\n"
            "  --target-weight K count the assistant's turns of --chat files K times\n"
            "                    (default 1): the merges then favour what the model\n"
            "                    writes, such as value words after a JSON quote, over\n"
            "                    the prompt and tool results it only reads\n"
            "  --split-initial   a word's leading space or punctuation never merges with\n"
            "                    it: \"Lunch\" after a JSON quote is the same tokens as\n"
            "                    \" Lunch\" in the request, so a model copies it token for\n"
            "                    token (one token more per word)\n"
            "  TEXTFILE          plain text (e.g. name and word lists), one document each\n\n"
            "usage: hearth vocab coverage --vocab VOCAB.gguf --chat FILE.jsonl [--below N]\n"
            "                             [--style STYLE]\n\n"
            "Counts how often each token is a training target (the assistant's tokens,\n"
            "as `hearth train --chat` masks them) and reports how many tokens of the\n"
            "vocabulary are emitted fewer than N times (default 20) and never. A model\n"
            "copies a string badly when one of its tokens is rarely a target.\n");
}

typedef struct vargs {
    const char *out;
    const char **chats, **texts;
    int n_chats, n_texts, style;
    long target_weight;
    hx_bpe_params bp;
} vargs;

static int parse(int argc, char **argv, vargs *a)
{
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(s, "--split-initial")) {
            a->bp.split_initial = 1;
            continue;
        }
        if (s[0] == '-' && s[1] && !v) {
            fprintf(stderr, "hearth vocab train: %s needs a value\n", s);
            return -1;
        }
        if (!strcmp(s, "-o") || !strcmp(s, "--out")) a->out = argv[++i];
        else if (!strcmp(s, "--chat")) a->chats[a->n_chats++] = argv[++i];
        else if (!strcmp(s, "--style")) {
            a->style = hx_tpl_parse_name(argv[++i]);
            if (a->style <= 0) {
                fprintf(stderr, "hearth vocab train: unknown style '%s'\n", argv[i]);
                return -1;
            }
        } else if (!strcmp(s, "--target-weight")) {
            if (hx_cli_parse_long(argv[++i], 1, 1000, &a->target_weight)) {
                fprintf(stderr, "hearth vocab train: bad %s '%s' (1 to 1000)\n", s, argv[i]);
                return -1;
            }
        } else if (!strcmp(s, "--size") || !strcmp(s, "--min-count")) {
            if (hx_cli_parse_long(argv[++i], 1, 1 << 24, &x)) {
                fprintf(stderr, "hearth vocab train: bad %s '%s'\n", s, argv[i]);
                return -1;
            }
            if (s[2] == 's') a->bp.vocab_size = (int32_t)x;
            else a->bp.min_count = x;
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "hearth vocab train: unknown option '%s'\n", s);
            return -1;
        } else a->texts[a->n_texts++] = s;
    }
    if (!a->out) fprintf(stderr, "hearth vocab train: no output (-o VOCAB.gguf)\n");
    else if (!a->n_chats && !a->n_texts) fprintf(stderr, "hearth vocab train: no data\n");
    return !a->out || (!a->n_chats && !a->n_texts) ? -1 : 0;
}

typedef struct add_ctx {
    hx_bpe *b;
    hx_buf text;
    long docs, target_weight;
    hx_progress pr;
} add_ctx;

/* One conversation, its assistant turns (the loss targets) weighted. */
static int add_conv(void *user, const hx_chat_doc *d, hx_err *err)
{
    add_ctx *c = user;
    hx_chat_span *sp = NULL;
    int n_sp = 0, extra = c->target_weight > 1;
    c->text.len = 0;
    int rc = hx_chat_render(d, &c->text, extra ? &sp : NULL, &n_sp, err);
    if (!rc) rc = hx_bpe_add_text(c->b, c->text.data, c->text.len, err);
    for (long k = 1; !rc && k < c->target_weight; k++)
        for (int i = 0; !rc && i < n_sp; i++)
            rc = hx_bpe_add_text(c->b, c->text.data + sp[i].start, sp[i].end - sp[i].start, err);
    free(sp);
    c->docs++;
    hx_progress_update(&c->pr, (double)d->line, NULL);
    return rc;
}

/* One chat file, with its lines as progress on a terminal. */
static int add_chat(const char *path, int style, add_ctx *c, hx_err *err)
{
    char *t = NULL;
    size_t n = 0;
    int rc = hx_read_file(path, 0, &t, &n, err);
    if (rc) return rc;
    long lines = 1;
    for (const char *p = t; (p = memchr(p, '\n', n - (size_t)(p - t))); p++) lines++;
    hx_progress_start(&c->pr, path, (double)lines);
    rc = hx_chat_each_buf(path, t, n, style, add_conv, c, err);
    hx_progress_finish(&c->pr);
    free(t);
    return rc;
}

static int add_all(const vargs *a, add_ctx *c, hx_err *err)
{
    int rc = HX_OK;
    for (int i = 0; !rc && i < a->n_chats; i++)
        rc = add_chat(a->chats[i], a->style, c, err);
    for (int i = 0; !rc && i < a->n_texts; i++) {
        char *t = NULL;
        size_t n = 0;
        rc = hx_read_file(a->texts[i], 0, &t, &n, err);
        if (!rc) rc = hx_bpe_add_text(c->b, t, n, err);
        c->docs++;
        free(t);
    }
    return rc;
}

static void report(const vargs *a, const hx_bpe *b, long docs, double secs)
{
    FILE *f = hx_out_kind(a->out) == HX_OUT_STDOUT ? stderr : stdout;
    hx_bpe_stats s;
    hx_bpe_get_stats(b, &s);
    fprintf(f, "vocabulary of %d tokens (%d merges) from %ld documents: %llu bytes, "
           "%llu chunks (%llu unique)\n"
           "training text -> %llu tokens, %.2f bytes/token; merges %.1f s, "
           "total %.1f s\nwrote %s\n", s.n_tokens, s.n_merges, docs,
           (unsigned long long)s.bytes, (unsigned long long)s.chunks,
           (unsigned long long)s.unique_chunks, (unsigned long long)s.tokens,
           s.tokens ? (double)s.bytes / (double)s.tokens : 0.0, s.train_seconds,
           secs, a->out);
    if (s.n_tokens < a->bp.vocab_size)
        fprintf(f, "note: fewer tokens than --size %d: no pair occurs %lld times or "
               "more (add data or lower --min-count)\n", a->bp.vocab_size,
               (long long)a->bp.min_count);
}

static int vocab_train(int argc, char **argv)
{
    vargs a;
    memset(&a, 0, sizeof a);
    a.bp = hx_bpe_default_params();
    a.bp.progress = 1;
    a.chats = hx_calloc((size_t)argc, sizeof *a.chats);
    a.texts = hx_calloc((size_t)argc, sizeof *a.texts);
    if (!a.chats || !a.texts || parse(argc, argv, &a)) {
        free(a.chats);
        free(a.texts);
        if (a.chats && a.texts) usage(stderr);
        return a.chats && a.texts ? HX_EXIT_USAGE : HX_EXIT_FAIL;
    }
    hx_err err = {0};
    double t0 = hx_time_mono();
    add_ctx c;
    memset(&c, 0, sizeof c);
    c.target_weight = a.target_weight ? a.target_weight : 1;
    hx_buf_init(&c.text);
    /* the output is checked before the training; the data is its input */
    int rc = hx_out_check(a.out, (const char *const *)a.chats, &err);
    if (!rc) rc = hx_out_check(a.out, (const char *const *)a.texts, &err);
    if (!rc) rc = hx_bpe_new(&a.bp, &c.b, &err);
    if (!rc) rc = add_all(&a, &c, &err);
    if (!rc) rc = hx_bpe_train(c.b, &err);
    if (!rc) rc = hx_bpe_write_gguf(c.b, a.out, &err);
    if (!rc) report(&a, c.b, c.docs, hx_time_mono() - t0);
    else fprintf(stderr, "hearth vocab train: %s\n", err.msg[0] ? err.msg : hx_rc_str(rc));
    hx_bpe_free(c.b);
    hx_buf_free(&c.text);
    free(a.chats);
    free(a.texts);
    return hx_cli_exit_code(rc);
}

/* ---- hearth vocab coverage ---- */
static int vocab_coverage(int argc, char **argv)
{
    const char *vocab = NULL, *chat = NULL;
    int style = 0;
    long below = 20;
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "hearth vocab coverage: %s needs a value\n", s);
            return HX_EXIT_USAGE;
        }
        if (!strcmp(s, "--vocab")) vocab = argv[++i];
        else if (!strcmp(s, "--chat")) chat = argv[++i];
        else if (!strcmp(s, "--style") && (style = hx_tpl_parse_name(argv[++i])) > 0) continue;
        else if (!strcmp(s, "--below") && !hx_cli_parse_long(argv[++i], 1, 1L << 40, &below)) continue;
        else {
            fprintf(stderr, "hearth vocab coverage: bad option '%s'%s%s\n", s, v ? " " : "",
                    v && strcmp(s, "--vocab") && strcmp(s, "--chat") ? v : "");
            return HX_EXIT_USAGE;
        }
    }
    if (!vocab || !chat) {
        fprintf(stderr, "hearth vocab coverage: needs --vocab and --chat\n");
        return HX_EXIT_USAGE;
    }
    hx_err err = {0};
    hx_chat_tokens t;
    memset(&t, 0, sizeof t);
    int family = 0, rc = hx_chat_load(chat, style, vocab, 1, &t, &family, &err);
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    if (!rc) rc = hx_gguf_open(vocab, &g, &err);
    if (!rc) rc = hx_vocab_load(g, &v, &err);
    long *count = NULL;
    int32_t nv = v ? hx_vocab_n_tokens(v) : 0;
    if (!rc && !(count = hx_calloc((size_t)nv, sizeof *count))) rc = hx_err_set(&err, HX_ERR_NOMEM, "out of memory");
    if (!rc) {
        for (size_t i = 0; i < t.n; i++)
            if (t.mask[i] && t.tokens[i] >= 0 && t.tokens[i] < nv) count[t.tokens[i]]++;
        long rare = 0, never = 0, normal = 0;
        for (int32_t i = 0; i < nv; i++) {
            if (hx_vocab_is_special(v, i)) continue;
            normal++;
            rare += count[i] < below;
            never += count[i] == 0;
        }
        printf("%s: %d conversations, %zu tokens, %zu targets\n"
               "%ld of %ld tokens are targets fewer than %ld times (%ld never)\n",
               chat, t.n_docs, t.n, t.n_masked, rare, normal, below, never);
    } else {
        fprintf(stderr, "hearth vocab coverage: %s\n", err.msg[0] ? err.msg : hx_rc_str(rc));
    }
    free(count);
    hx_vocab_free(v);
    hx_gguf_close(g);
    hx_chat_tokens_free(&t);
    return hx_cli_exit_code(rc);
}

int hx_cmd_vocab(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? HX_EXIT_USAGE : HX_EXIT_OK;
    }
    if (!strcmp(argv[1], "train")) {
        if (hx_cli_wants_help(argc, argv)) {
            usage(stdout);
            return HX_EXIT_OK;
        }
        return vocab_train(argc, argv);
    }
    if (!strcmp(argv[1], "coverage")) {
        if (hx_cli_wants_help(argc, argv)) {
            usage(stdout);
            return HX_EXIT_OK;
        }
        return vocab_coverage(argc, argv);
    }
    fprintf(stderr, "hearth vocab: unknown command '%s' (see --help)\n", argv[1]);
    return HX_EXIT_USAGE;
}
