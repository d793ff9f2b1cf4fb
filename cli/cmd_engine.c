/* cmd_engine.c: the engine's verbs: `hearth generate` (stream a
 * continuation), `hearth info` (what a GGUF model is) and `hearth mkmodel`. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"

/* ---- option parsing: "--name VALUE" or "--name=VALUE" ---- */
typedef struct opts {
    int argc, i;
    char **argv;
    const char *verb;
    const char *val; /* the value of the option just matched */
    int bad;         /* a usage error was printed */
} opts;

/* Matches argv[i] against a value option; consumes its value. */
static int opt_val(opts *o, const char *shrt, const char *lng)
{
    const char *a = o->argv[o->i];
    size_t n = strlen(lng);
    if (!strncmp(a, lng, n) && a[n] == '=') {
        o->val = a + n + 1;
        return 1;
    }
    if (strcmp(a, lng) && (!shrt || strcmp(a, shrt))) return 0;
    if (o->i + 1 >= o->argc) {
        fprintf(stderr, "hearth %s: %s needs a value\n", o->verb, a);
        o->bad = 1;
        o->val = "";
        return 1;
    }
    o->val = o->argv[++o->i];
    return 1;
}

static int opt_flag(opts *o, const char *lng) { return !strcmp(o->argv[o->i], lng); }

static long opt_long(opts *o, long lo, long hi)
{
    long v = lo;
    if (o->bad) return lo;
    if (hx_cli_opt_long(o->verb, o->argv[o->i - (o->val == o->argv[o->i] ? 1 : 0)], o->val, lo,
                        hi, &v))
        o->bad = 1;
    return o->bad ? lo : v;
}

static float opt_float(opts *o, double lo, double hi)
{
    double v = lo;
    if (o->bad) return (float)lo;
    if (hx_cli_opt_double(o->verb, o->argv[o->i - (o->val == o->argv[o->i] ? 1 : 0)], o->val, lo,
                          hi, &v))
        o->bad = 1;
    return (float)(o->bad ? lo : v);
}

/* --kv f16|f32|q8 and --max-memory SIZE into p; 1 if argv[i] was one. */
static int opt_memory(opts *o, hx_ctx_params *p)
{
    if (opt_val(o, NULL, "--kv")) {
        p->kv_f32 = !strcmp(o->val, "f32");
        p->kv_q8 = !strcmp(o->val, "q8") || !strcmp(o->val, "q8_0");
        if (!p->kv_f32 && !p->kv_q8 && strcmp(o->val, "f16") && !o->bad) {
            fprintf(stderr, "hearth %s: --kv is f16, f32 or q8\n", o->verb);
            o->bad = 1;
        }
        return 1;
    }
    if (!opt_val(o, NULL, "--max-memory")) return 0;
    if (!o->bad && hx_cli_parse_size(o->val, &p->max_bytes)) {
        fprintf(stderr, "hearth %s: --max-memory needs a size such as 2G or "
                "1500M, not '%s'\n", o->verb, o->val);
        o->bad = 1;
    }
    return 1;
}

#define MEMORY_HELP                                                           \
    "      --kv TYPE           KV cache: f16 (default), q8 (half the memory)\n" \
    "                          or f32\n"                                       \
    "      --max-memory SIZE   bound on weights (mapped) + KV cache + scratch,\n"\
    "                          e.g. 2G; the KV cache gets what is left. Below\n"\
    "                          the weights, they are read from the file into a\n"\
    "                          cache of that size (hearth info shows the plan)\n"

static int unknown_option(opts *o)
{
    fprintf(stderr, "hearth %s: unknown option '%s' (see --help)\n", o->verb,
            o->argv[o->i]);
    return HX_EXIT_USAGE;
}

static int load_model(const char *path, int no_vocab, hx_model **m)
{
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = no_vocab;
    hx_err err = {0};
    int rc = hx_model_load(path, &mp, m, &err);
    if (rc) fprintf(stderr, "hearth: %s\n", err.msg); /* names the file */
    return rc;
}

/* ---- generate ---- */
static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

typedef struct gen_opts {
    const char *model, *prompt;
    const char *json_schema; /* --json-schema FILE, or NULL */
    const char *adapters[HX_ADAPTER_MAX]; /* --adapter FILE[:SCALE] */
    int n_adapters;
    int n_predict, n_threads, n_ctx;
    hx_sampler_params sp;
    hx_ctx_params cp; /* --kv, --max-memory */
} gen_opts;

static void generate_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth generate -m MODEL -p TEXT [options]\n\n"
        "Streams the model's continuation of TEXT to stdout; stops after N\n"
        "tokens or at an end-of-generation token. Speed goes to stderr.\n\n"
        "  -m, --model FILE        GGUF model\n"
        "  -p, --prompt TEXT       the text to continue (BOS added if the\n"
        "                          model wants it; <|special|> tokens parsed)\n"
        "  -n, --n-predict N       tokens to generate (default 128)\n"
        "      --temp T            temperature; 0 = greedy (default 0.8)\n"
        "      --top-k K           0 = off (default 40)\n"
        "      --top-p P           1 = off (default 0.95)\n"
        "      --min-p P           0 = off (default 0.05)\n"
        "      --repeat-penalty R  1 = off (default 1.0)\n"
        "      --repeat-last-n N   penalty window (default 64)\n"
        "      --presence-penalty P, --frequency-penalty P (default 0)\n"
        "      --seed S            sampling seed (default: random, printed)\n"
        "  -t, --threads N         0 = all cores (default)\n"
        "  -c, --ctx N             context size (default: prompt + N)\n"
        "      --adapter FILE[:SCALE]  apply a LoRA adapter at SCALE (default\n"
        "                          1); repeat for several\n"
        "      --json-schema FILE  constrain the output to JSON valid against\n"
        "                          the JSON Schema in FILE\n"
        MEMORY_HELP);
}

/* 0 ok, else an exit code (usage printed). */
static int parse_generate(int argc, char **argv, gen_opts *g)
{
    opts o = {argc, 1, argv, "generate", NULL, 0};
    memset(g, 0, sizeof *g);
    g->n_predict = 128;
    g->sp = hx_sampler_default_params();
    g->cp = hx_ctx_default_params();
    for (; o.i < argc && !o.bad; o.i++) {
        hx_sampler_params *s = &g->sp;
        if (opt_val(&o, "-m", "--model")) g->model = o.val;
        else if (opt_val(&o, "-p", "--prompt")) g->prompt = o.val;
        else if (opt_val(&o, "-n", "--n-predict")) g->n_predict = (int)opt_long(&o, 0, 1 << 24);
        else if (opt_val(&o, NULL, "--temp")) s->temp = opt_float(&o, 0, 1e6);
        else if (opt_val(&o, NULL, "--top-k")) s->top_k = (int)opt_long(&o, 0, 1 << 30);
        else if (opt_val(&o, NULL, "--top-p")) s->top_p = opt_float(&o, 0, 1);
        else if (opt_val(&o, NULL, "--min-p")) s->min_p = opt_float(&o, 0, 1);
        else if (opt_val(&o, NULL, "--repeat-penalty")) s->repeat_penalty = opt_float(&o, 0, 1e6);
        else if (opt_val(&o, NULL, "--repeat-last-n")) s->repeat_last_n = (int)opt_long(&o, 0, 1 << 20);
        else if (opt_val(&o, NULL, "--presence-penalty")) s->presence_penalty = opt_float(&o, -1e6, 1e6);
        else if (opt_val(&o, NULL, "--frequency-penalty")) s->frequency_penalty = opt_float(&o, -1e6, 1e6);
        else if (opt_val(&o, NULL, "--seed")) s->seed = (uint64_t)opt_long(&o, 0, 0x7fffffffL);
        else if (opt_val(&o, "-t", "--threads")) g->n_threads = (int)opt_long(&o, 0, 1024);
        else if (opt_val(&o, "-c", "--ctx")) g->n_ctx = (int)opt_long(&o, 1, 1 << 24);
        else if (opt_val(&o, NULL, "--json-schema")) g->json_schema = o.val;
        else if (opt_val(&o, NULL, "--adapter")) {
            if (g->n_adapters == HX_ADAPTER_MAX) o.bad = 1;
            else g->adapters[g->n_adapters++] = o.val;
        }
        else if (opt_memory(&o, &g->cp)) continue;
        else return unknown_option(&o);
    }
    if (o.bad) return HX_EXIT_USAGE;
    if (!g->model || !g->prompt) {
        fprintf(stderr, "hearth generate: -m MODEL and -p TEXT are required\n\n");
        generate_usage(stderr);
        return HX_EXIT_USAGE;
    }
    return 0;
}

/* Tokenizes the prompt (BOS as the model wants, special tokens parsed). */
static int tokenize_prompt(const hx_vocab *v, const char *text, int32_t **out,
                           int32_t *n)
{
    size_t len = strlen(text);
    int32_t need = hx_tokenize(v, text, len, NULL, 0, 1, 1);
    if (need < 0) need = -need;
    *out = hx_malloc_array((size_t)need + 1, sizeof **out);
    if (!*out) return HX_ERR_NOMEM;
    *n = hx_tokenize(v, text, len, *out, need + 1, 1, 1);
    return *n < 0 ? HX_ERR_INTERNAL : HX_OK;
}

/* Prints tok's text (tok < 0: what the detokenizer holds back) and keeps
 * it in all. */
static int emit(hx_detok *d, const hx_vocab *v, int32_t tok, hx_buf *b, hx_buf *all)
{
    b->len = 0;
    int rc = tok < 0 ? hx_detok_flush(d, b) : hx_detok_push(d, v, tok, 0, b);
    if (rc) return rc;
    if (b->len) {
        fwrite(b->data, 1, b->len, stdout);
        fflush(stdout);
        hx_buf_append(all, b->data, b->len);
    }
    return HX_OK;
}

static int interrupted(void *user)
{
    (void)user;
    return g_interrupted;
}

typedef struct gen_stats {
    int n_prompt, n_gen;
    double t_prompt, t_gen;
    int ended;   /* an end-of-generation token came (not the -n budget) */
    hx_buf text; /* everything printed */
} gen_stats;

/* The decode loop: prompt, then sample / accept / decode one at a time. */
static int run_generation(hx_ctx *c, const hx_vocab *v, hx_sampler *s,
                          const int32_t *prompt, int n_prompt, int n_predict,
                          gen_stats *st)
{
    double t0 = hx_time_mono();
    hx_prefill_params pp = hx_prefill_default_params();
    pp.slice = 64; /* Ctrl-C is seen between slices */
    pp.cancel = interrupted;
    int done = 0, rc = hx_prefill(c, prompt, n_prompt, &pp, &done);
    st->t_prompt = hx_time_mono() - t0;
    st->n_prompt = n_prompt;
    if (rc) return rc;
    for (int i = 0; i < n_prompt; i++) hx_sampler_note(s, prompt[i]);
    hx_detok d;
    hx_detok_init(&d);
    hx_buf out;
    hx_buf_init(&out);
    int32_t n_vocab = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    t0 = hx_time_mono();
    for (int i = 0; i < n_predict && !rc && !g_interrupted; i++) {
        int32_t tok = hx_sampler_sample(s, hx_ctx_logits(c, -1), n_vocab);
        if (tok < 0 || hx_sampler_accept(s, tok) != HX_OK) {
            fprintf(stderr, "\nhearth generate: no token may follow here "
                    "(every token masked or refused by the constraint)\n");
            rc = HX_ERR_STATE;
            break;
        }
        if ((st->ended = hx_vocab_is_eog(v, tok))) break;
        st->n_gen++;
        rc = emit(&d, v, tok, &out, &st->text);
        if (!rc && i + 1 < n_predict) rc = hx_decode(c, &tok, 1, 0);
    }
    st->t_gen = hx_time_mono() - t0;
    if (!rc) rc = emit(&d, v, -1, &out, &st->text);
    hx_buf_free(&out);
    if (g_interrupted && !rc) rc = HX_ERR_CANCELLED;
    return rc;
}

static void print_speed(const gen_stats *st, uint64_t seed, double temp)
{
    fprintf(stderr, "\n[prompt %d tok, %.1f tok/s | generated %d tok, %.1f tok/s",
            st->n_prompt, st->t_prompt > 0 ? st->n_prompt / st->t_prompt : 0.0,
            st->n_gen, st->t_gen > 0 ? st->n_gen / st->t_gen : 0.0);
    if (temp > 0) fprintf(stderr, " | seed %llu", (unsigned long long)seed);
    fprintf(stderr, "]\n");
}

/* The JSON-Schema grammar as the sampler's first stage. *gram and *gv
 * must outlive the sampler (the stage borrows them). */
static int add_schema_stage(hx_sampler *s, const hx_vocab *v, const char *path,
                            hx_grammar **gram, hx_gvocab **gv)
{
    char *txt = NULL;
    size_t len = 0;
    hx_err err = {0};
    hx_sampler_stage stage;
    /* at most one whitespace byte in a row: JSON allows any run, and models
     * (small ones above all) can spend every token on spaces */
    hx_grammar_params gp = hx_grammar_default_params();
    gp.ws_max = 1;
    int rc = hx_read_file(path, 1 << 24, &txt, &len, &err);
    if (!rc) rc = hx_grammar_from_schema(txt, len, &gp, gram, &err);
    if (!rc) rc = hx_gvocab_from_vocab(v, gv, &err);
    if (!rc && !(rc = hx_grammar_stage(*gram, *gv, &stage)) &&
        (rc = hx_sampler_add_stage(s, &stage)) && stage.free)
        stage.free(stage.ctx);
    free(txt);
    if (rc) fprintf(stderr, "hearth generate: %s: %s\n", path,
                    err.msg[0] ? err.msg : hx_rc_str(rc));
    return rc;
}

/* Whether text is one whole JSON value (the schema's grammar allows an
 * end only there). */
static int json_complete(const hx_buf *text)
{
    cJSON *j = text->len ? cJSON_ParseWithLength(text->data, text->len) : NULL;
    cJSON_Delete(j);
    return j != NULL;
}

static int generate_with(hx_model *m, const gen_opts *g)
{
    const hx_vocab *v = hx_model_vocab(m);
    if (!v) {
        fprintf(stderr, "hearth generate: %s has no tokenizer\n", g->model);
        return HX_EXIT_INPUT;
    }
    int32_t *prompt = NULL, n_prompt = 0;
    if (tokenize_prompt(v, g->prompt, &prompt, &n_prompt) || n_prompt == 0) {
        fprintf(stderr, "hearth generate: the prompt gives no tokens\n");
        free(prompt);
        return HX_EXIT_USAGE;
    }
    hx_ctx_params cp = g->cp;
    cp.n_threads = g->n_threads;
    cp.n_ctx = g->n_ctx ? g->n_ctx : n_prompt + g->n_predict;
    int n_predict = g->n_predict;
    if (n_prompt > cp.n_ctx) {
        fprintf(stderr, "hearth generate: the prompt (%d tokens) does not fit "
                "the context (%d)\n", n_prompt, cp.n_ctx);
        free(prompt);
        return HX_EXIT_USAGE;
    }
    if (n_prompt + n_predict > cp.n_ctx) n_predict = cp.n_ctx - n_prompt;
    hx_ctx *c = NULL;
    hx_err err = {0};
    hx_sampler *s = hx_sampler_new(&g->sp);
    hx_grammar *gram = NULL;
    hx_gvocab *gv = NULL;
    int rc = s ? HX_OK : HX_ERR_NOMEM, schema_rc = HX_OK;
    if (!rc && g->json_schema)
        rc = schema_rc = add_schema_stage(s, v, g->json_schema, &gram, &gv);
    hx_adapter *ads[HX_ADAPTER_MAX];
    float ascale[HX_ADAPTER_MAX];
    int n_ads = 0;
    if (!rc) rc = hx_cli_load_adapters(m, g->adapters, g->n_adapters, 0, ads, ascale, &n_ads, &err);
    if (!rc) rc = hx_ctx_new(m, &cp, &c, &err);
    if (!rc && n_ads) rc = hx_ctx_set_adapters(c, ads, ascale, n_ads);
    gen_stats st = {0};
    hx_buf_init(&st.text);
    if (!rc) rc = run_generation(c, v, s, prompt, n_prompt, n_predict, &st);
    if (!rc && g->json_schema && !st.ended && !json_complete(&st.text)) {
        fprintf(stderr, "\nhearth generate: the %d-token budget ran out inside the JSON "
                "value: the output above is incomplete (allow more with -n)\n", n_predict);
        rc = HX_ERR_STATE; /* said */
    }
    hx_buf_free(&st.text);
    if (rc == HX_ERR_STATE) { /* reported by run_generation */
    } else if (rc && c) fprintf(stderr, "\nhearth generate: %s\n",
                              rc == HX_ERR_CANCELLED ? "interrupted" : hx_ctx_errmsg(c));
    else if (rc && !schema_rc) fprintf(stderr, "hearth generate: %s\n",
                                       err.msg[0] ? err.msg : hx_rc_str(rc));
    else if (!rc) print_speed(&st, hx_sampler_seed(s), g->sp.temp);
    hx_ctx_free(c);
    for (int i = 0; i < n_ads; i++) hx_adapter_free(ads[i]);
    hx_sampler_free(s); /* before the grammar its stage borrows */
    hx_grammar_free(gram);
    hx_gvocab_free(gv);
    free(prompt);
    return hx_cli_exit_code(rc);
}

int hx_cmd_generate(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        generate_usage(stdout);
        return HX_EXIT_OK;
    }
    gen_opts g;
    int ex = parse_generate(argc, argv, &g);
    if (ex) return ex;
    hx_model *m = NULL;
    int rc = load_model(g.model, 0, &m);
    if (rc) return hx_cli_exit_code(rc);
    g_interrupted = 0;
    void (*old)(int) = signal(SIGINT, on_sigint);
    ex = generate_with(m, &g);
    signal(SIGINT, old);
    hx_model_free(m);
    return ex;
}

/* ---- info ---- */
static void info_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth info -m MODEL [--ctx N] [--kv TYPE] [--max-memory SIZE] [--json]\n\n"
        "Describes a GGUF model: architecture and shapes, tokenizer, tensors\n"
        "by type, file size and the memory a run needs (the engine's own\n"
        "allocation formulas, 2 threads' scratch by default).\n\n"
        "  -m, --model FILE        GGUF model\n"
        "  -c, --ctx N             context size for the memory estimate (default\n"
        "                          min(training context, 4096))\n"
        "  -t, --threads N         threads (scratch per thread; default all)\n"
        "      --json              the same as one JSON object\n"
        MEMORY_HELP);
}

static void human(double b, char *buf, size_t n)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

static void print_tensor_types(const hx_gguf *g)
{
    int64_t count[HX_TYPE_COUNT] = {0};
    double bytes[HX_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        if (t->type < 0 || t->type >= HX_TYPE_COUNT) continue;
        count[t->type]++;
        bytes[t->type] += (double)t->nbytes;
    }
    printf("tensors        %lld\n", (long long)hx_gguf_n_tensors(g));
    printf("  %-6s %7s %12s\n", "type", "count", "bytes");
    for (int ty = 0; ty < HX_TYPE_COUNT; ty++) {
        if (!count[ty]) continue;
        char h[32];
        human(bytes[ty], h, sizeof h);
        printf("  %-6s %7lld %12s\n", hx_type_ggml_name(ty), (long long)count[ty], h);
    }
}

static void print_hparams(const hx_hparams *h)
{
    printf("architecture   %s\n", h->arch);
    printf("layers         %d\n", h->n_layer);
    printf("embedding      %d\n", h->n_embd);
    printf("heads          %d (kv %d, head dim %d)\n", h->n_head, h->n_head_kv,
           h->head_dim);
    if (h->n_expert)
        printf("experts        %d, %d used, ffn %d each\n", h->n_expert,
               h->n_expert_used, h->n_ff_exp);
    else printf("ffn            %d\n", h->n_ff);
    printf("context train  %d\n", h->n_ctx_train);
    printf("rope           %s, base %g\n",
           h->rope_type == HX_ROPE_NEOX ? "neox" : "normal", h->rope_base);
    printf("rms eps        %g\n", h->rms_eps);
    printf("output         %s\n", h->tied_output ? "tied to token_embd" : "separate");
}

static void print_vocab(const hx_vocab *v)
{
    if (!v) {
        printf("vocab          none\n");
        return;
    }
    int32_t bos = hx_vocab_bos(v), eos = hx_vocab_eos(v);
    printf("vocab          %d tokens, %s", hx_vocab_n_tokens(v),
           hx_vocab_type(v) == HX_VOCAB_BPE ? "byte-level BPE" : "SentencePiece");
    if (hx_vocab_pre(v)[0]) printf(" (pre %s)", hx_vocab_pre(v));
    printf(", bos %d%s, eos %d\n", bos, hx_vocab_add_bos(v) ? " (added)" : "", eos);
}

/* The plan of a cap below the weights: what stays resident, what is read
 * from the file into how many slots. */
static void print_weight_cache(const hx_model *m, const hx_ctx_mem *mem)
{
    char a[32], b[32], f[32];
    human((double)mem->w_resident, a, sizeof a);
    human((double)mem->w_cache, b, sizeof b);
    human((double)hx_model_size_bytes(m), f, sizeof f);
    const hx_hparams *hp = hx_model_hparams(m);
    printf("weight cache   the cap is below the weights (%s): %s resident (%s), %s of\n", f, a,
           hp->n_expert ? "attention, router, norms, output head"
                        : "norms and the layers or head runs that fit", b);
    if (hp->n_expert)
        printf("               slots: %d experts (%d a layer of %d on average, shared by the "
               "layers whose experts are of one size), read from the file, least recently "
               "used evicted\n", mem->w_slots, mem->w_slots / hp->n_layer, hp->n_expert);
    else
        printf("               slots: %d of %d items (layers, then head runs) resident, the "
               "other %d read in turn through %d slots\n", mem->w_pinned, mem->w_items,
               mem->w_items - mem->w_pinned, mem->w_slots);
}

/* What hx_ctx_new would allocate for these parameters: weights are
 * mapped (paged in on use), the KV cache grows a page at a time up to the
 * context or the cap, scratch is a 512-token batch's activations. */
static int print_memory(const hx_model *m, const hx_ctx_params *p)
{
    hx_ctx_mem mem;
    hx_err err = {0};
    if (hx_ctx_memory(m, p, &mem, &err)) {
        fprintf(stderr, "hearth info: %s\n", err.msg);
        return HX_EXIT_USAGE;
    }
    char a[32], b[32], c[32], d[32], t[32];
    human((double)mem.weights, a, sizeof a);
    human((double)mem.kv_total, b, sizeof b);
    human((double)mem.scratch, c, sizeof c);
    human((double)mem.total, d, sizeof d);
    human((double)mem.kv_per_token, t, sizeof t);
    printf("parameters     %.2f M\n", (double)hx_model_n_params(m) / 1e6);
    printf("memory (est.)  %s = weights %s (%s) + KV cache %s (ctx %d, %s, "
           "%s per token) + scratch %s\n", d, a, mem.streamed ? "resident + cache" : "mapped",
           b, mem.n_ctx_fit,
           p->kv_f32 ? "F32" : p->kv_q8 ? "Q8_0" : "F16", t, c);
    if (mem.n_ctx_fit < mem.n_ctx)
        printf("               --max-memory keeps %d of %d positions in memory (ask and "
               "chat spill the rest to disk)\n", mem.n_ctx_fit, mem.n_ctx);
    if (mem.streamed) print_weight_cache(m, &mem);
    return HX_EXIT_OK;
}

/* ---- info --json: the same facts as one object ---- */
static cJSON *json_hparams(const hx_hparams *h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "architecture", h->arch);
    cJSON_AddNumberToObject(o, "layers", h->n_layer);
    cJSON_AddNumberToObject(o, "embedding", h->n_embd);
    cJSON_AddNumberToObject(o, "heads", h->n_head);
    cJSON_AddNumberToObject(o, "heads_kv", h->n_head_kv);
    cJSON_AddNumberToObject(o, "head_dim", h->head_dim);
    cJSON_AddNumberToObject(o, "ffn", h->n_expert ? h->n_ff_exp : h->n_ff);
    cJSON_AddNumberToObject(o, "experts", h->n_expert);
    cJSON_AddNumberToObject(o, "experts_used", h->n_expert_used);
    cJSON_AddNumberToObject(o, "context_train", h->n_ctx_train);
    cJSON_AddStringToObject(o, "rope", h->rope_type == HX_ROPE_NEOX ? "neox" : "normal");
    cJSON_AddNumberToObject(o, "rope_base", h->rope_base);
    cJSON_AddBoolToObject(o, "tied_output", h->tied_output);
    return o;
}

static cJSON *json_vocab(const hx_vocab *v)
{
    if (!v) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tokens", hx_vocab_n_tokens(v));
    cJSON_AddStringToObject(o, "type", hx_vocab_type(v) == HX_VOCAB_BPE ? "bpe" : "spm");
    cJSON_AddStringToObject(o, "pre", hx_vocab_pre(v));
    cJSON_AddNumberToObject(o, "bos", hx_vocab_bos(v));
    cJSON_AddNumberToObject(o, "eos", hx_vocab_eos(v));
    return o;
}

static cJSON *json_tensors(const hx_gguf *g)
{
    cJSON *o = cJSON_CreateObject(), *types = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "count", (double)hx_gguf_n_tensors(g));
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        if (t->type < 0 || t->type >= HX_TYPE_COUNT) continue;
        const char *name = hx_type_ggml_name(t->type);
        cJSON *e = cJSON_GetObjectItem(types, name);
        if (!e) {
            e = cJSON_AddObjectToObject(types, name);
            cJSON_AddNumberToObject(e, "count", 0);
            cJSON_AddNumberToObject(e, "bytes", 0);
        }
        cJSON *c = cJSON_GetObjectItem(e, "count"), *b = cJSON_GetObjectItem(e, "bytes");
        cJSON_SetNumberValue(c, c->valuedouble + 1);
        cJSON_SetNumberValue(b, b->valuedouble + (double)t->nbytes);
    }
    cJSON_AddItemToObject(o, "by_type", types);
    return o;
}

static cJSON *json_memory(const hx_ctx_mem *mem, const hx_ctx_params *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "total_bytes", (double)mem->total);
    cJSON_AddNumberToObject(o, "weights_bytes", (double)mem->weights);
    cJSON_AddNumberToObject(o, "kv_cache_bytes", (double)mem->kv_total);
    cJSON_AddNumberToObject(o, "kv_bytes_per_token", (double)mem->kv_per_token);
    cJSON_AddStringToObject(o, "kv_type", p->kv_f32 ? "F32" : p->kv_q8 ? "Q8_0" : "F16");
    cJSON_AddNumberToObject(o, "scratch_bytes", (double)mem->scratch);
    cJSON_AddNumberToObject(o, "context", mem->n_ctx);
    cJSON_AddNumberToObject(o, "context_fit", mem->n_ctx_fit);
    if (!mem->streamed) return o;
    cJSON *w = cJSON_AddObjectToObject(o, "weight_cache");
    cJSON_AddNumberToObject(w, "resident_bytes", (double)mem->w_resident);
    cJSON_AddNumberToObject(w, "cache_bytes", (double)mem->w_cache);
    cJSON_AddNumberToObject(w, "slots", mem->w_slots);
    cJSON_AddNumberToObject(w, "items", mem->w_items);
    cJSON_AddNumberToObject(w, "pinned", mem->w_pinned);
    return o;
}

static cJSON *json_governor(const hx_power *pw, const hx_gov_decision *d)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "level", d->level);
    cJSON_AddStringToObject(o, "why", d->why);
    cJSON_AddNumberToObject(o, "threads", d->n_threads);
    cJSON_AddNumberToObject(o, "context_cap", d->ctx_cap);
    cJSON_AddBoolToObject(o, "nightly_ok", d->nightly_ok);
    cJSON_AddStringToObject(o, "nightly_why", d->nightly_why);
    cJSON_AddNumberToObject(o, "load1", pw->load1);
    cJSON_AddNumberToObject(o, "cpus", pw->n_cpus);
    hx_loop *k = hx_cli_loop_new(NULL);
    if (k) { /* the closed loop's opening choice */
        hx_loop_choice c;
        hx_loop_get(k, &c);
        cJSON_AddNumberToObject(o, "ttft_target_ms", hx_loop_get_targets(k)->ttft_ms);
        cJSON_AddBoolToObject(o, "kv_q8", c.kv_q8);
        cJSON_AddNumberToObject(o, "max_draft", c.spec_depth);
        cJSON_AddBoolToObject(o, "small_model", c.small_model);
        cJSON_AddBoolToObject(o, "trim_prompt", c.trim_prompt);
    }
    hx_loop_free(k);
    return o;
}

static int info_json(const char *path, const hx_model *m, const hx_ctx_params *cp)
{
    hx_ctx_mem mem;
    hx_err err = {0};
    if (hx_ctx_memory(m, cp, &mem, &err)) {
        fprintf(stderr, "hearth info: %s\n", err.msg);
        return HX_EXIT_USAGE;
    }
    const hx_gguf *g = hx_model_gguf(m);
    hx_power pw;
    hx_gov_decision gd;
    hx_cli_governor(NULL, &gd, &pw);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddNumberToObject(o, "size_bytes", (double)hx_gguf_file_size(g));
    cJSON_AddNumberToObject(o, "gguf_version", hx_gguf_version(g));
    cJSON_AddItemToObject(o, "model", json_hparams(hx_model_hparams(m)));
    cJSON_AddItemToObject(o, "vocab", json_vocab(hx_model_vocab(m)));
    cJSON_AddItemToObject(o, "tensors", json_tensors(g));
    cJSON_AddNumberToObject(o, "parameters", (double)hx_model_n_params(m));
    cJSON_AddItemToObject(o, "memory", json_memory(&mem, cp));
    cJSON_AddItemToObject(o, "governor", json_governor(&pw, &gd));
    return hx_cli_json_out(o);
}

int hx_cmd_info(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        info_usage(stdout);
        return HX_EXIT_OK;
    }
    opts o = {argc, 1, argv, "info", NULL, 0};
    const char *path = NULL;
    int json = 0;
    hx_ctx_params cp = hx_ctx_default_params();
    for (; o.i < argc && !o.bad; o.i++) {
        if (opt_flag(&o, "--json")) json = 1;
        else if (opt_val(&o, "-m", "--model")) path = o.val;
        else if (opt_val(&o, "-c", "--ctx")) cp.n_ctx = (int)opt_long(&o, 1, 1 << 24);
        else if (opt_val(&o, "-t", "--threads")) cp.n_threads = (int)opt_long(&o, 0, 1024);
        else if (opt_memory(&o, &cp)) continue;
        else return unknown_option(&o);
    }
    if (o.bad) return HX_EXIT_USAGE;
    if (!path) {
        fprintf(stderr, "hearth info: -m MODEL is required\n\n");
        info_usage(stderr);
        return HX_EXIT_USAGE;
    }
    hx_model *m = NULL;
    int rc = load_model(path, 0, &m);
    if (rc) return hx_cli_exit_code(rc);
    if (json) {
        int ex = info_json(path, m, &cp);
        hx_model_free(m);
        return ex;
    }
    const hx_gguf *g = hx_model_gguf(m);
    char sz[32];
    human((double)hx_gguf_file_size(g), sz, sizeof sz);
    printf("file           %s\n", path);
    printf("size           %s (%zu bytes), GGUF v%u\n", sz, hx_gguf_file_size(g),
           hx_gguf_version(g));
    print_hparams(hx_model_hparams(m));
    print_vocab(hx_model_vocab(m));
    print_tensor_types(g);
    int ex = print_memory(m, &cp);
    hx_power pw;
    hx_gov_decision gd;
    hx_cli_governor(NULL, &gd, &pw);
    hx_cli_print_power(stdout, &pw, &gd);
    hx_loop *k = hx_cli_loop_new(NULL);
    hx_cli_print_loop(stdout, k);
    hx_loop_free(k);
    hx_model_free(m);
    return ex;
}

/* ---- mkmodel ---- */
static void mkmodel_usage(FILE *f)
{
    hx_mkmodel_params d = hx_mkmodel_default_params();
    fprintf(f,
        "usage: hearth mkmodel -o FILE [options]\n\n"
        "Developer tool: writes a GGUF model with random weights (seeded),\n"
        "laid out as llama.cpp expects, for tests and benchmarks.\n\n"
        "  -o, --output FILE     the GGUF to write\n"
        "      --arch A          llama, qwen3, qwen3moe (default %s)\n"
        "      --type T          F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K, or the\n"
        "                        mixes Q4_K_M Q5_K_M (default %s)\n"
        "      --tensor-types L  per-tensor types after --type, e.g.\n"
        "                        ffn_down=Q8_0,output=F32\n"
        "      --vocab FILE      copy the tokenizer of this GGUF (sets n_vocab)\n"
        "      --n-vocab N       vocabulary size without --vocab (default %d)\n"
        "      --layers N        (default %d)\n"
        "      --embd N          (default %d)\n"
        "      --heads N         (default %d)\n"
        "      --heads-kv N      (default %d)\n"
        "      --head-dim N      (default %d)\n"
        "      --ff N            dense FFN width (default %d)\n"
        "      --experts N       qwen3moe (default %d)\n"
        "      --experts-used N  qwen3moe (default %d)\n"
        "      --ff-exp N        qwen3moe expert FFN width (default %d)\n"
        "      --ctx N           training context written (default %d)\n"
        "      --tied            no output.weight (tied to token_embd)\n"
        "      --seed S          (default %llu)\n"
        "      --embed FILE      weights of this small trained qwen3 model instead of\n"
        "                        random ones: the written model computes its function\n"
        "                        at this shape's cost (zeros elsewhere; a benchmark\n"
        "                        stand-in for a trained model of the real shape)\n",
        d.arch, d.ftype, d.n_vocab, d.n_layer, d.n_embd, d.n_head, d.n_head_kv,
        d.head_dim, d.n_ff, d.n_expert, d.n_expert_used, d.n_ff_exp, d.n_ctx,
        (unsigned long long)d.seed);
}

static int mk_int(opts *o, const char *name, int *dst)
{
    if (!opt_val(o, NULL, name)) return 0;
    *dst = (int)opt_long(o, 1, 1 << 30);
    return 1;
}

int hx_cmd_mkmodel(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        mkmodel_usage(stdout);
        return HX_EXIT_OK;
    }
    opts o = {argc, 1, argv, "mkmodel", NULL, 0};
    hx_mkmodel_params p = hx_mkmodel_default_params();
    const char *out = NULL;
    for (; o.i < argc && !o.bad; o.i++) {
        if (opt_val(&o, "-o", "--output")) out = o.val;
        else if (opt_val(&o, NULL, "--arch")) p.arch = o.val;
        else if (opt_val(&o, NULL, "--type")) p.ftype = o.val;
        else if (opt_val(&o, NULL, "--vocab")) p.vocab_path = o.val;
        else if (opt_val(&o, NULL, "--embed")) p.embed_path = o.val;
        else if (opt_val(&o, NULL, "--tensor-types")) p.tensor_types = o.val;
        else if (opt_val(&o, NULL, "--seed")) p.seed = (uint64_t)opt_long(&o, 0, 0x7fffffffL);
        else if (opt_flag(&o, "--tied")) p.tied_output = 1;
        else if (mk_int(&o, "--n-vocab", &p.n_vocab) || mk_int(&o, "--layers", &p.n_layer) ||
                 mk_int(&o, "--embd", &p.n_embd) || mk_int(&o, "--heads", &p.n_head) ||
                 mk_int(&o, "--heads-kv", &p.n_head_kv) ||
                 mk_int(&o, "--head-dim", &p.head_dim) || mk_int(&o, "--ff", &p.n_ff) ||
                 mk_int(&o, "--experts", &p.n_expert) ||
                 mk_int(&o, "--experts-used", &p.n_expert_used) ||
                 mk_int(&o, "--ff-exp", &p.n_ff_exp) || mk_int(&o, "--ctx", &p.n_ctx))
            continue;
        else return unknown_option(&o);
    }
    if (o.bad) return HX_EXIT_USAGE;
    if (!out) {
        fprintf(stderr, "hearth mkmodel: -o FILE is required\n\n");
        mkmodel_usage(stderr);
        return HX_EXIT_USAGE;
    }
    hx_err err = {0};
    int rc = hx_mkmodel_write(&p, out, &err);
    if (rc) {
        fprintf(stderr, "hearth mkmodel: %s\n", err.msg);
        return hx_cli_exit_code(rc);
    }
    fprintf(stderr, "hearth mkmodel: wrote %s (%s, %s)\n", out, p.arch, p.ftype);
    return HX_EXIT_OK;
}
