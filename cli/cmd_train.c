/* cmd_train.c: `hearth train` (developer verb): trains a qwen3 model from
 * scratch, fully fine-tunes one, or trains a LoRA adapter, on a text file
 * or on chat conversations (loss on the assistant's tokens only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "nightly/nightly.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "lora/lora.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hearth train DATA.txt --out OUT.gguf [options]\n"
            "       hearth train --chat FILE.jsonl --vocab GGUF --out OUT.gguf [options]\n\n"
            "Trains on every token of DATA (random windows). Without --base a new\n"
            "qwen3 model is trained from scratch.\n\n"
            "--chat FILE      conversations, one JSON object a line ({\"messages\",\n"
            "                 \"tools\", \"style\"}), rendered as the agent renders\n"
            "                 them; the loss counts only the tokens the assistant\n"
            "                 writes; conversations are packed documents. Tokens are\n"
            "                 cached in FILE.tok. OUT gets hearth.prompt_style\n"
            "--style STYLE    render --chat in STYLE instead of each line's \"style\"\n"
            "--vocab GGUF     tokenize with this file's tokenizer and copy it into OUT\n"
            "                 (default: bytes, a vocabulary of 256, no tokenizer)\n"
            "--base GGUF      start from this model (its tokenizer is used; bytes if none)\n"
            "--lora-rank R    train a LoRA adapter of rank R over the frozen --base\n"
            "                 (OUT is then the adapter); --lora-alpha A (default R),\n"
            "                 --lora-targets qkvo|all (default qkvo)\n"
            "--grow-layers N  full training of --base with N more layers (up to its\n"
            "                 count): each a copy of the layer before it whose\n"
            "                 attention output and FFN down projections start at\n"
            "                 zero, so training starts from what --base computes\n"
            "model:  --layers 2 --embd 64 --heads 4 --kv-heads 2 --head-dim 16\n"
            "        --ff 128 --ctx 256\n"
            "train:  --steps 100 --seq 64 --batch 4 --accum 1 --lr 1e-3 --warmup 0\n"
            "        --wd 0.1 --clip 1 --seed 1 --threads N\n"
            "        with --chat --seq may exceed --ctx: a window then packs\n"
            "        more conversations (each from position 0; one longer than\n"
            "        --ctx is cut there), and a shared prefix costs once a window\n"
            "--wsd            warmup, constant rate, then linear decay to 0.1x over\n"
            "                 the last 20%% of the steps (default: cosine)\n"
            "--products P     f32 (default), bf16 or auto: bf16 takes the linear\n"
            "                 layers' products and the attention scores in bfloat16,\n"
            "                 sums in F32 (AVX512-BF16 CPUs; F32 elsewhere), twice\n"
            "                 the F32 speed on some CPUs and slower on others; auto\n"
            "                 times both on this model's shape and takes the faster\n"
            "                 (--resume: what the checkpoint used). --bf16: bf16\n"
            "--time-budget S  train for about S seconds in all (resumes included):\n"
            "                 the steps that fit, at most --steps\n"
            "--ckpt FILE      checkpoint every --ckpt-every N steps (default 50) and\n"
            "                 at the end; --resume continues from it\n"
            "--svg FILE       loss curve (default OUT.svg, none when OUT is a device or\n"
            "                 standard output); --log prints each step\n"
            "--max-memory SIZE  bound on training's memory (activations, adapter\n"
            "                 state, base; e.g. 2G): a MoE --base over it is read\n"
            "                 through a weight cache of what is left (its experts from\n"
            "                 the file as they are used; the same adapter), else\n"
            "                 training refuses to start\n"
            "--recompute M   auto (default), on or off: keep each layer's input\n"
            "                 only and recompute its activations in the backward\n"
            "                 (auto: for LoRA, or when saving all would pass 1 GiB)\n"
            "--share-prefix N with --chat: a conversation whose first N or more\n"
            "                 tokens equal those of its window's first one (the\n"
            "                 same system prompt and tool list) is packed without\n"
            "                 them and attends to that copy (default 32; 0: off)\n"
            "--value-weight W with --chat: the targets where a tool call's argument\n"
            "                 value starts or ends (which word a copy starts at,\n"
            "                 where it stops) count W times in the loss (1..255,\n"
            "                 default 1)\n");
}

typedef struct targs {
    const char *data, *out, *vocab, *base, *ckpt, *svg, *targets, *chat;
    FILE *rep; /* the report: stderr when OUT is standard output */
    size_t max_bytes; /* --max-memory, 0: none */
    int resume, log, threads, lora_rank, grow, style, recompute, bf16, value_weight;
    float lora_alpha;
    hx_train_config cfg;
    hx_train_params tp;
} targs;

/* Numeric option s with value v into a; 1 if s was one, -1 if bad. */
static int parse_num(targs *a, const char *s, const char *v)
{
    static const char *const ints[] = {"--layers", "--embd", "--heads", "--kv-heads",
                                       "--head-dim", "--ff", "--ctx", "--steps",
                                       "--seq", "--batch", "--accum", "--warmup",
                                       "--threads", "--lora-rank", "--ckpt-every",
                                       "--value-weight", "--grow-layers"};
    int *const iptr[] = {&a->cfg.n_layer, &a->cfg.n_embd, &a->cfg.n_head,
                         &a->cfg.n_head_kv, &a->cfg.head_dim, &a->cfg.n_ff,
                         &a->cfg.n_ctx, &a->tp.opt.n_steps, &a->tp.seq_len,
                         &a->tp.n_seq, &a->tp.accum, &a->tp.opt.warmup,
                         &a->threads, &a->lora_rank, &a->tp.ckpt_every,
                         &a->value_weight, &a->grow};
    static const char *const flts[] = {"--lr", "--wd", "--clip", "--lora-alpha"};
    float *const fptr[] = {&a->tp.opt.lr, &a->tp.opt.wd, &a->tp.opt.clip, &a->lora_alpha};
    char *end;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(s, ints[i])) {
            long x;
            if (hx_cli_parse_long(v, 0, 1 << 30, &x)) return -1;
            *iptr[i] = (int)x;
            return 1;
        }
    for (size_t i = 0; i < sizeof flts / sizeof flts[0]; i++)
        if (!strcmp(s, flts[i])) {
            *fptr[i] = strtof(v, &end);
            return *end ? -1 : 1;
        }
    if (!strcmp(s, "--seed")) {
        a->tp.seed = strtoull(v, &end, 10);
        return *end ? -1 : 1;
    }
    if (!strcmp(s, "--share-prefix")) {
        a->tp.share_prefix = (int)strtol(v, &end, 10);
        return *end || a->tp.share_prefix < 0 ? -1 : 1;
    }
    if (!strcmp(s, "--time-budget")) {
        a->tp.time_budget = strtod(v, &end);
        return *end || a->tp.time_budget < 0 ? -1 : 1;
    }
    return 0;
}

/* Says what is wrong with option s (value v) on stderr; -1. */
static int bad_value(const char *s, const char *v)
{
    if (!v) fprintf(stderr, "hearth train: %s needs a value\n", s);
    else fprintf(stderr, "hearth train: %s: '%s' is not a valid value (see 'hearth train "
                 "--help')\n", s, v);
    return -1;
}

/* Whether s is an option that takes a value (tried on a scratch copy). */
static int takes_value(const targs *a, const char *s)
{
    static const char *const strs[] = {"--out", "--vocab", "--base", "--ckpt", "--svg",
                                       "--lora-targets", "--chat", "--recompute",
                                       "--products", "--style", "--max-memory"};
    targs scratch = *a;
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        if (!strcmp(s, strs[i])) return 1;
    return parse_num(&scratch, s, "0") != 0;
}

/* Says what the command line lacks on stderr; -1. */
static int missing(const char *what)
{
    fprintf(stderr, "hearth train: %s (see 'hearth train --help')\n", what);
    return -1;
}

static int parse(int argc, char **argv, targs *a)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(s, "--resume")) a->resume = 1;
        else if (!strcmp(s, "--log")) a->log = 1;
        else if (!strcmp(s, "--wsd")) a->tp.opt.wsd = 1;
        else if (!strcmp(s, "--bf16")) a->bf16 = HX_BF16_ON;
        else if (s[0] == '-' && !v) return takes_value(a, s) ? bad_value(s, NULL)
                                                             : (hx_cli_bad_word("train", "option", s), -1);
        else if (!strcmp(s, "--out")) a->out = argv[++i];
        else if (!strcmp(s, "--vocab")) a->vocab = argv[++i];
        else if (!strcmp(s, "--base")) a->base = argv[++i];
        else if (!strcmp(s, "--ckpt")) a->ckpt = argv[++i];
        else if (!strcmp(s, "--svg")) a->svg = argv[++i];
        else if (!strcmp(s, "--lora-targets")) a->targets = argv[++i];
        else if (!strcmp(s, "--chat")) a->chat = argv[++i];
        else if (!strcmp(s, "--recompute")) {
            const char *m = argv[++i];
            a->recompute = !strcmp(m, "auto") ? HX_RECOMPUTE_AUTO : !strcmp(m, "off") ? HX_RECOMPUTE_OFF
                           : !strcmp(m, "on") ? HX_RECOMPUTE_ON : -1;
            if (a->recompute < 0) return bad_value(s, m);
        }
        else if (!strcmp(s, "--products")) {
            const char *m = argv[++i];
            a->bf16 = !strcmp(m, "auto") ? HX_BF16_AUTO : !strcmp(m, "bf16") ? HX_BF16_ON
                      : !strcmp(m, "f32") ? HX_BF16_OFF : -1;
            if (a->bf16 < 0) return bad_value(s, m);
        }
        else if (!strcmp(s, "--max-memory")) {
            if (hx_cli_parse_size(argv[++i], &a->max_bytes)) return bad_value(s, argv[i]);
        }
        else if (!strcmp(s, "--style")) {
            if ((a->style = hx_tpl_parse_name(argv[++i])) <= 0) return bad_value(s, argv[i]);
        }
        else if (s[0] == '-') {
            int r = parse_num(a, s, v);
            if (r < 0) return bad_value(s, v);
            if (r == 0) return hx_cli_bad_word("train", "option", s), -1;
            i++;
        } else if (!a->data) a->data = s;
        else return missing("one DATA file only");
    }
    if (!a->data == !a->chat) return missing("needs DATA.txt or --chat FILE.jsonl (one of them)");
    if (!a->out) return missing("needs --out OUT.gguf");
    if (a->resume && !a->ckpt) return missing("--resume needs --ckpt FILE");
    if (a->chat && !a->vocab && !a->base) return missing("--chat needs --vocab or --base");
    if (a->lora_rank && !a->base) return missing("--lora-rank needs --base");
    if (a->grow && (!a->base || a->lora_rank))
        return missing("--grow-layers needs --base and full training (no --lora-rank)");
    if (a->value_weight > 255 || (a->value_weight > 1 && !a->chat))
        return missing("--value-weight is 0..255 and only with --chat");
    return 0;
}

/* Tokens of the data file: with the vocabulary in vocab_path, or bytes. */
static int load_tokens(const char *path, const char *vocab_path,
                       int32_t **out, size_t *n, hx_err *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = hx_read_file(path, 0, &text, &len, err);
    if (rc) return rc;
    *out = hx_malloc_array(len ? len : 1, sizeof(int32_t));
    if (!*out) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    if (!rc && vocab_path && !(rc = hx_gguf_open(vocab_path, &g, err)) &&
        hx_gguf_find_key(g, "tokenizer.ggml.model") >= 0) /* else bytes */
        rc = hx_vocab_load(g, &v, err);
    if (!rc && v) {
        int32_t k = hx_tokenize(v, text, len, *out, (int32_t)len, 0, 0);
        if (k < 0) rc = hx_err_set(err, HX_ERR_NOMEM, "%s: tokenizing failed", path);
        *n = k < 0 ? 0 : (size_t)k;
    } else if (!rc) {
        for (size_t i = 0; i < len; i++) (*out)[i] = (unsigned char)text[i];
        *n = len;
    }
    hx_vocab_free(v);
    hx_gguf_close(g);
    free(text);
    return rc;
}

static int make_trainer(const targs *a, hx_trainer **tr, hx_err *err)
{
    if (!a->base) return hx_trainer_new_scratch(&a->cfg, a->tp.seed, a->threads, tr, err);
    if (!a->lora_rank) return hx_trainer_new_grown(a->base, a->grow, a->threads, tr, err);
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = a->lora_rank;
    lp.alpha = a->lora_alpha > 0 ? a->lora_alpha : (float)a->lora_rank;
    lp.seed = a->tp.seed;
    if (a->targets && !strcmp(a->targets, "all")) lp.targets = HX_LORA_ALL;
    return hx_trainer_new_gguf(a->base, &lp, a->threads, tr, err);
}

/* The token stream: the text file's tokens (no mask), or the chat file's
 * with the assistant mask and document ids. *family: the chat style. */
static int load_data(const targs *a, hx_chat_tokens *t, int *family, hx_err *err)
{
    const char *vocab = a->base ? a->base : a->vocab;
    memset(t, 0, sizeof *t);
    *family = 0;
    if (a->chat) {
        int rc = hx_chat_load(a->chat, a->style, vocab, 1, t, family, err);
        if (!rc)
            fprintf(a->rep, "%s: %d conversations, %zu tokens (%.0f per conversation, "
                   "%.2f bytes/token), %zu in assistant turns%s\n", a->chat,
                   t->n_docs, t->n, (double)t->n / t->n_docs,
                   (double)t->bytes / (double)(t->n ? t->n : 1), t->n_masked,
                   t->from_cache ? " (cached)" : "");
        return rc;
    }
    return load_tokens(a->data, vocab, &t->tokens, &t->n, err);
}

/* The vocabulary size of a GGUF's tokenizer (0 if none). */
static int32_t vocab_size(const char *path, hx_err *err)
{
    hx_gguf *g = NULL;
    uint64_t nt = 0;
    int et;
    if (hx_gguf_open(path, &g, err)) return -1;
    if (hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &nt)) nt = 0;
    hx_gguf_close(g);
    return (int32_t)nt;
}

static void report(const targs *a, hx_trainer *tr, size_t n, double el, int s0)
{
    const int s = hx_trainer_steps_done(tr);
    const double toks = (double)(s - s0) * a->tp.seq_len * a->tp.n_seq * a->tp.accum;
    fprintf(a->rep, "trained %d steps (%zu parameters%s%s) on %zu tokens: loss %.4f -> "
            "%.4f, %.0f tokens/s\nwrote %s%s%s\n", s, hx_trainer_n_params(tr),
            hx_trainer_is_lora(tr) ? ", LoRA" : "", a->bf16 ? ", bfloat16 products" : "", n,
            s ? hx_trainer_losses(tr)[0] : 0.0, s ? hx_trainer_losses(tr)[s - 1] : 0.0,
            el > 0 ? toks / el : 0.0, a->out, a->tp.svg_path ? " and " : "",
            a->tp.svg_path ? a->tp.svg_path : "");
}

/* --max-memory: the training within it, a MoE base through a weight
 * cache if need be (said on the report). */
static int fit_memory(const targs *a, hx_trainer *tr, hx_err *err)
{
    size_t need, budget;
    if (!a->max_bytes) return HX_OK;
    int rc = hx_trainer_fit_memory(tr, a->tp.seq_len * a->tp.n_seq, 0, a->max_bytes, &need,
                                   &budget, err);
    if (rc) return rc;
    fprintf(a->rep, "memory: estimate %.1f MiB within %.1f MiB", need / 1048576.0,
            a->max_bytes / 1048576.0);
    if (budget) fprintf(a->rep, " (the base read through a weight cache of %.1f MiB)",
                        budget / 1048576.0);
    fprintf(a->rep, "\n");
    return HX_OK;
}

/* The targets' weights: w at the value edges, else 1 (malloc'd). */
static uint8_t *value_weights(const hx_chat_tokens *t, int w)
{
    uint8_t *out = hx_malloc_array(t->n ? t->n : 1, 1);
    for (size_t i = 0; out && i < t->n; i++)
        out[i] = t->mask[i] == HX_CHAT_VALUE_EDGE ? (uint8_t)w : 1;
    return out;
}

/* The outputs, checked before the training: none an input or another
 * output, none a folder or in a missing folder. The loss curve goes
 * beside OUT unless OUT is a device or standard output. */
static int check_outputs(targs *a, char *svg, size_t n, hx_err *err)
{
    if (!a->svg && hx_out_kind(a->out) == HX_OUT_FILE) {
        snprintf(svg, n, "%s.svg", a->out);
        a->svg = svg;
    }
    a->tp.svg_path = a->svg;
    const char *in[] = {a->data, a->chat, a->vocab, a->base, a->out, a->svg, a->ckpt};
    const char *outs[] = {a->out, a->svg, a->ckpt};
    int rc = HX_OK;
    for (int o = 0; o < 3 && !rc; o++) {
        const char *others[8];
        int k = 0;
        for (int i = 0; i < 7; i++) /* a resumed checkpoint is its own input */
            if (in[i] && in[i] != outs[o]) others[k++] = in[i];
        others[k] = NULL;
        if (outs[o]) rc = hx_out_check(outs[o], others, err);
    }
    return rc;
}

static int run(targs *a, hx_err *err)
{
    hx_chat_tokens t;
    int family = 0;
    hx_trainer *tr = NULL;
    char svg[HX_PATH_MAX];
    memset(&t, 0, sizeof t);
    int rc = check_outputs(a, svg, sizeof svg, err);
    if (!rc) rc = load_data(a, &t, &family, err);
    if (!rc && !a->base) {
        int32_t nv = a->vocab ? vocab_size(a->vocab, err) : 256;
        if (nv < 0) rc = err->rc ? err->rc : HX_ERR_IO;
        a->cfg.n_vocab = nv;
    }
    if (!rc) rc = make_trainer(a, &tr, err);
    if (!rc && a->resume) rc = hx_trainer_load(tr, a->ckpt, err);
    if (tr) hx_trainer_set_recompute(tr, a->recompute);
    if (!rc) rc = fit_memory(a, tr, err);
    /* a->bf16 from here: whether the products are bfloat16 (report says so) */
    const int asked = a->bf16;
    if (tr) a->bf16 = hx_trainer_set_bf16(tr, asked);
    if (tr && asked == HX_BF16_ON && !a->bf16)
        fprintf(stderr, "hearth train: --products bf16: products stay F32 (no AVX512-BF16 "
                        "in this CPU, or a LoRA adapter)\n");
    if (tr && asked == HX_BF16_AUTO)
        fprintf(stderr, "hearth train: --products auto: %s%s\n",
                a->bf16 ? "bfloat16" : "F32 (bfloat16 not faster on this CPU, or not possible)",
                a->resume ? ", as the checkpoint's where it records them" : "");
    a->tp.ckpt_path = a->ckpt;
    a->tp.log = a->log ? a->rep : NULL;
    a->tp.progress = 1;
    uint8_t *weight = NULL;
    if (!rc && a->value_weight > 1 && !(weight = value_weights(&t, a->value_weight)))
        rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_train_data d = {.tokens = t.tokens, .mask = t.mask, .n = t.n, .doc = t.doc,
                       .weight = weight};
    const double t0 = hx_time_mono();
    const int s0 = tr ? hx_trainer_steps_done(tr) : 0;
    const char *kv[] = {"hearth.prompt_style", family ? hx_tpl_name(family) : NULL, NULL};
    if (!rc) rc = hx_train_run(tr, &d, &a->tp, err);
    /* the tokenizer: --vocab's, else a full-mode base's own (if it has one) */
    hx_err e2 = {0};
    const char *tok = a->vocab ? a->vocab
                      : a->base && vocab_size(a->base, &e2) > 0 ? a->base : NULL;
    if (!rc) rc = hx_trainer_write_gguf_kv(tr, a->out, tok, kv, err);
    if (!rc) report(a, tr, t.n, hx_time_mono() - t0, s0);
    hx_trainer_free(tr);
    hx_chat_tokens_free(&t);
    free(weight);
    return rc;
}

int hx_cmd_train(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        usage(stdout);
        return HX_EXIT_OK;
    }
    targs a;
    memset(&a, 0, sizeof a);
    a.cfg = hx_train_default_config();
    a.tp = hx_train_default_params();
    a.tp.ckpt_every = 50;
    a.tp.share_prefix = -1; /* unset */
    if (parse(argc, argv, &a)) return HX_EXIT_USAGE;
    if (a.tp.share_prefix < 0) a.tp.share_prefix = a.chat ? 32 : 0;
    hx_err err = {0};
    a.rep = hx_out_kind(a.out) == HX_OUT_STDOUT ? stderr : stdout;
    int rc = run(&a, &err);
    if (rc) {
        fprintf(stderr, "hearth: train: %s\n", err.msg[0] ? err.msg : hx_rc_str(rc));
        return hx_cli_exit_code(rc);
    }
    return HX_EXIT_OK;
}
