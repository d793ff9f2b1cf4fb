/* hxref.c: the llama.cpp reference harness for differential tests: a
 * standalone program that dlopens the npm build of llama.cpp (see
 * ../shared/docs/REFERENCE.md) and tokenizes, detokenizes, computes logits
 * and decodes greedily, printing plain text or writing raw float32.
 * It links only -ldl: no Hearth code, so no symbol clashes. Usage: hxref -h.
 *
 * Environment: HEARTH_REFERENCE (default build/reference) holds bins/ and
 * include/; HXREF_VERBOSE=1 shows llama.cpp's log; HXREF_THREADS (default 1;
 * more is much slower on an oversubscribed machine, as ggml's threads spin);
 * HXREF_KV=f16 uses llama.cpp's default F16 KV cache, HXREF_KV=q8_0 its
 * 8-bit one (needs HXREF_FLASH=1) (default here: f32, the exact
 * reference); HXREF_FLASH=1 enables flash attention (default off);
 * HXREF_REPACK=0 turns off llama.cpp's load-time weight repacking (its
 * extra buffer types), which keeps a second copy of most weights: for
 * checking a model near the machine's memory size (default on). */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"
#include "ggml-backend.h"

/* Every llama.cpp function used, resolved with dlsym into a pointer of the
 * exact type the header declares. */
#define HXREF_FUNCS(X)                                                       \
    X(llama_backend_init) X(llama_log_set) X(llama_model_default_params)    \
    X(llama_context_default_params) X(llama_model_load_from_file)            \
    X(llama_model_free) X(llama_init_from_model) X(llama_free)               \
    X(llama_model_get_vocab) X(llama_vocab_n_tokens) X(llama_tokenize)       \
    X(llama_detokenize) X(llama_batch_init) X(llama_batch_free)              \
    X(llama_decode) X(llama_get_logits_ith) X(llama_vocab_is_eog)            \
    X(llama_adapter_lora_init) X(llama_set_adapters_lora)                   \
    X(llama_get_memory) X(llama_memory_clear)

#define DECLARE_FN(name) static __typeof__(&name) p_##name;
HXREF_FUNCS(DECLARE_FN)
static __typeof__(&ggml_backend_load_all_from_path) p_load_all;

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt,
                                                               ...)
{
    va_list ap;
    fprintf(stderr, "hxref: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)level, (void)text, (void)user;
}

static void *open_lib(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/bins/%s", dir, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) die("cannot load %s: %s (run sh scripts/fetch-reference.sh)", path,
                dlerror());
    return h;
}

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) die("symbol %s not found: %s", name, dlerror());
    return p;
}

/* Loads libllama, resolves the functions, silences logging, loads the
 * best CPU backend variant from bins/. */
static void load_reference(void)
{
    const char *dir = getenv("HEARTH_REFERENCE");
    char bins[4096];
    if (!dir || !*dir) dir = "build/reference";
    void *llama = open_lib(dir, "libllama.v0.5.0.so");
    void *ggml = open_lib(dir, "libggml.v0.5.0.so");
#define RESOLVE_FN(name) *(void **)&p_##name = sym(llama, #name);
    HXREF_FUNCS(RESOLVE_FN)
    *(void **)&p_load_all = sym(ggml, "ggml_backend_load_all_from_path");
    if (!getenv("HXREF_VERBOSE")) p_llama_log_set(quiet_log, NULL);
    snprintf(bins, sizeof bins, "%s/bins", dir);
    p_load_all(bins);
    p_llama_backend_init();
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* vocab_only for tokenizing: the vocab GGUF files have no tensors. */
static struct llama_model *load_model(const char *path, int vocab_only)
{
    struct llama_model_params mp = p_llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = vocab_only != 0;
    mp.use_extra_bufts = env_int("HXREF_REPACK", 1) != 0;
    struct llama_model *m = p_llama_model_load_from_file(path, mp);
    if (!m) die("cannot load model %s (HXREF_VERBOSE=1 shows why)", path);
    return m;
}

/* A context for n tokens, all in one batch. */
static struct llama_context *new_context(struct llama_model *m, int n)
{
    struct llama_context_params cp = p_llama_context_default_params();
    uint32_t n_ctx = (uint32_t)((n + 16 + 255) / 256 * 256);
    const char *kv = getenv("HXREF_KV");
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = env_int("HXREF_THREADS", 1);
    cp.flash_attn_type = env_int("HXREF_FLASH", 0)
                             ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                             : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (kv && !strcmp(kv, "q8_0")) cp.type_k = cp.type_v = GGML_TYPE_Q8_0;
    else if (!kv || strcmp(kv, "f16") != 0) cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.no_perf = true;
    struct llama_context *ctx = p_llama_init_from_model(m, cp);
    if (!ctx) die("cannot create a context of %u tokens", n_ctx);
    return ctx;
}

static int parse_ids(int argc, char **argv, llama_token **out)
{
    llama_token *ids = malloc(sizeof *ids * (size_t)(argc > 0 ? argc : 1));
    if (!ids) die("out of memory");
    for (int i = 0; i < argc; i++) {
        char *end;
        errno = 0;
        long v = strtol(argv[i], &end, 10);
        if (errno || *end || end == argv[i] || v < 0 || v > INT32_MAX)
            die("bad token id '%s'", argv[i]);
        ids[i] = (llama_token)v;
    }
    *out = ids;
    return argc;
}

static void check_ids(const struct llama_vocab *vocab, const llama_token *ids,
                      int n)
{
    int nv = p_llama_vocab_n_tokens(vocab);
    for (int i = 0; i < n; i++)
        if (ids[i] >= nv) die("token id %d out of range (vocab %d)", ids[i], nv);
}

/* Decodes ids[0..n) at positions pos0.., with logits at every position
 * (all != 0) or only the last. */
static void decode(struct llama_context *ctx, const llama_token *ids, int n,
                   int pos0, int all)
{
    struct llama_batch b = p_llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = (int8_t)(all || i == n - 1);
    }
    b.n_tokens = n;
    int rc = p_llama_decode(ctx, b);
    p_llama_batch_free(b);
    if (rc != 0) die("llama_decode failed with %d", rc);
}

/* ---- subcommands ---- */

static char *read_stdin(size_t *len)
{
    size_t cap = 4096, n = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += k;
        if (n == cap && !(buf = realloc(buf, cap *= 2))) break;
    }
    if (!buf) die("out of memory");
    *len = n;
    return buf;
}

static int hx_cmd_tokenize(int argc, char **argv)
{
    int special = 0, bos = 0;
    size_t len;
    if (argc < 1) die("usage: hxref tokenize MODEL [--special] [--bos] < text");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--special")) special = 1;
        else if (!strcmp(argv[i], "--bos")) bos = 1;
        else die("unknown option %s", argv[i]);
    }
    char *text = read_stdin(&len);
    if (len > INT32_MAX / 2) die("input too long");
    struct llama_model *m = load_model(argv[0], 1);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(m);
    int cap = (int)len + 16;
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) die("out of memory");
    int n = p_llama_tokenize(vocab, text, (int32_t)len, ids, cap, bos, special);
    if (n < 0 && n != INT32_MIN) { /* -n is the count needed */
        cap = -n;
        if (!(ids = realloc(ids, sizeof *ids * (size_t)cap))) die("out of memory");
        n = p_llama_tokenize(vocab, text, (int32_t)len, ids, cap, bos, special);
    }
    if (n < 0) die("llama_tokenize failed (%d)", n);
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    free(text);
    p_llama_model_free(m);
    return 0;
}

static int cmd_detok(int argc, char **argv)
{
    int special = 0, first = 1;
    llama_token *ids;
    if (argc < 1) die("usage: hxref detok MODEL [--special] ID...");
    if (argc > 1 && !strcmp(argv[1], "--special")) special = 1, first = 2;
    int n = parse_ids(argc - first, argv + first, &ids);
    struct llama_model *m = load_model(argv[0], 1);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(m);
    check_ids(vocab, ids, n);
    int cap = 64 * n + 64;
    char *text = malloc((size_t)cap);
    if (!text) die("out of memory");
    int k = p_llama_detokenize(vocab, ids, n, text, cap, false, special);
    if (k < 0) {
        cap = -k;
        if (!(text = realloc(text, (size_t)cap))) die("out of memory");
        k = p_llama_detokenize(vocab, ids, n, text, cap, false, special);
    }
    if (k < 0) die("llama_detokenize failed (%d)", k);
    fwrite(text, 1, (size_t)k, stdout);
    free(text);
    free(ids);
    p_llama_model_free(m);
    return 0;
}

static void write_logits(struct llama_context *ctx, int n_vocab, int n,
                         const char *out)
{
    FILE *f = fopen(out, "wb");
    if (!f) die("cannot create %s: %s", out, strerror(errno));
    for (int i = 0; i < n; i++) {
        const float *row = p_llama_get_logits_ith(ctx, i);
        if (!row) die("no logits at position %d", i);
        if (fwrite(row, sizeof *row, (size_t)n_vocab, f) != (size_t)n_vocab)
            die("writing %s: %s", out, strerror(errno));
    }
    if (fclose(f)) die("writing %s: %s", out, strerror(errno));
}

/* Applies the adapters of a comma-separated list with the scales of
 * another (same count, at most 8). */
static void set_adapters(struct llama_model *m, struct llama_context *ctx,
                         const char *adapters, const char *scales)
{
    struct llama_adapter_lora *a[8];
    float sc[8];
    char list[4096], *save = NULL, *end;
    int n = 0, k = 0;
    snprintf(list, sizeof list, "%s", adapters);
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (n == 8) die("at most 8 adapters");
        if (!(a[n++] = p_llama_adapter_lora_init(m, p)))
            die("cannot load LoRA adapter %s (HXREF_VERBOSE=1 shows why)", p);
    }
    for (const char *p = scales; k < 8; p = end + 1) {
        sc[k++] = strtof(p, &end);
        if (end == p || (*end && *end != ',')) die("bad scale list '%s'", scales);
        if (!*end) break;
    }
    if (k != n) die("%d adapters but %d scales", n, k);
    if (p_llama_set_adapters_lora(ctx, a, (size_t)n, sc) != 0)
        die("cannot apply LoRA adapters %s", adapters);
}

/* Teacher-forced logits of ids, with optional LoRA adapters. */
static int run_logits(const char *model, const char *adapter, const char *scale,
                      const char *out, int argc, char **argv)
{
    llama_token *ids;
    int n = parse_ids(argc, argv, &ids);
    if (n < 1) die("no token ids given");
    struct llama_model *m = load_model(model, 0);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(m);
    check_ids(vocab, ids, n);
    struct llama_context *ctx = new_context(m, n);
    if (adapter) set_adapters(m, ctx, adapter, scale);
    decode(ctx, ids, n, 0, 1);
    write_logits(ctx, p_llama_vocab_n_tokens(vocab), n, out);
    free(ids);
    p_llama_free(ctx);
    p_llama_model_free(m);
    return 0;
}

static int cmd_logits(int argc, char **argv)
{
    if (argc < 3) die("usage: hxref logits MODEL OUT.bin ID...");
    return run_logits(argv[0], NULL, NULL, argv[1], argc - 2, argv + 2);
}

static int hx_cmd_lora(int argc, char **argv)
{
    if (argc < 5) die("usage: hxref lora MODEL ADAPTER SCALE OUT.bin ID...");
    return run_logits(argv[0], argv[1], argv[2], argv[3], argc - 4, argv + 4);
}

/* First index of the largest logit, as llama.cpp's greedy sampler picks. */
static llama_token argmax(const float *row, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

static int hx_cmd_generate(int argc, char **argv)
{
    int stop_eog = 0, first = 2;
    llama_token *ids;
    if (argc < 3) die("usage: hxref generate MODEL N [--stop-eog] ID...");
    int n_gen = atoi(argv[1]);
    if (n_gen < 0) die("bad count '%s'", argv[1]);
    if (!strcmp(argv[2], "--stop-eog")) stop_eog = 1, first = 3;
    int n = parse_ids(argc - first, argv + first, &ids);
    if (n < 1) die("no prompt ids given");
    struct llama_model *m = load_model(argv[0], 0);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(m);
    int n_vocab = p_llama_vocab_n_tokens(vocab);
    check_ids(vocab, ids, n);
    struct llama_context *ctx = new_context(m, n + n_gen);
    decode(ctx, ids, n, 0, 0);
    for (int i = 0; i < n_gen; i++) {
        llama_token t = argmax(p_llama_get_logits_ith(ctx, -1), n_vocab);
        printf(i ? " %d" : "%d", t);
        if (stop_eog && p_llama_vocab_is_eog(vocab, t)) break;
        if (i + 1 < n_gen) decode(ctx, &t, 1, n + i, 0);
    }
    printf("\n");
    free(ids);
    p_llama_free(ctx);
    p_llama_model_free(m);
    return 0;
}

/* ---- bench: llama.cpp's speed for bench/engine.c ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds for one pass over n pseudo-random ids at positions 0.. (one
 * batch when batch, else one decode per token), from an empty cache; the
 * process CPU seconds spent into *cpu when not NULL. */
static double bench_run(struct llama_context *ctx, int n_vocab, int n,
                        int batch, unsigned seed, double *cpu)
{
    llama_token *ids = malloc(sizeof *ids * (size_t)n);
    if (!ids) die("out of memory");
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        ids[i] = (llama_token)((seed >> 8) % (unsigned)n_vocab);
    }
    p_llama_memory_clear(p_llama_get_memory(ctx), true);
    double c0 = cpu_now_s(), t0 = now_s();
    if (batch) decode(ctx, ids, n, 0, 0);
    else
        for (int i = 0; i < n; i++) decode(ctx, &ids[i], 1, i, 0);
    double t = now_s() - t0;
    if (cpu) *cpu = cpu_now_s() - c0;
    free(ids);
    return t;
}

/* llama.cpp's default context settings (F16 cache, its flash-attention
 * choice), THREADS threads, a cache of PP + TG positions; a warm-up pass,
 * then prints "pp_seconds tg_seconds pp_cpu_seconds tg_cpu_seconds". */
static int cmd_bench(int argc, char **argv)
{
    if (argc != 4) die("usage: hxref bench MODEL THREADS PP TG");
    int nth = atoi(argv[1]), pp = atoi(argv[2]), tg = atoi(argv[3]);
    if (nth < 1 || pp < 1 || tg < 1) die("bad bench arguments");
    struct llama_model *m = load_model(argv[0], 0);
    int n_vocab = p_llama_vocab_n_tokens(p_llama_model_get_vocab(m));
    struct llama_context_params cp = p_llama_context_default_params();
    cp.n_ctx = (uint32_t)((pp + tg + 255) / 256 * 256);
    cp.n_batch = cp.n_ubatch = (uint32_t)pp;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = nth;
    cp.no_perf = true;
    struct llama_context *ctx = p_llama_init_from_model(m, cp);
    if (!ctx) die("cannot create a context of %u tokens", cp.n_ctx);
    double c_pp, c_tg;
    bench_run(ctx, n_vocab, 16, 1, 7, NULL);
    bench_run(ctx, n_vocab, 2, 0, 7, NULL);
    double t_pp = bench_run(ctx, n_vocab, pp, 1, 1, &c_pp);
    double t_tg = bench_run(ctx, n_vocab, tg, 0, 2, &c_tg);
    printf("%.6f %.6f %.6f %.6f\n", t_pp, t_tg, c_pp, c_tg);
    p_llama_free(ctx);
    p_llama_model_free(m);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hxref tokenize MODEL [--special] [--bos] < TEXT\n"
            "       hxref detok MODEL [--special] ID...\n"
            "       hxref logits MODEL OUT.bin ID...\n"
            "       hxref generate MODEL N [--stop-eog] ID...\n"
            "       hxref lora MODEL ADAPTER SCALE OUT.bin ID...\n"
            "  (ADAPTER and SCALE may be comma-separated lists: several at once)\n"
            "       hxref bench MODEL THREADS PP TG\n"
            "logits/lora write n_ids * n_vocab float32 (little-endian);\n"
            "the others print ids separated by spaces, or the bytes.\n"
            "env: HEARTH_REFERENCE HXREF_VERBOSE HXREF_THREADS HXREF_KV=f16 "
            "HXREF_FLASH=1\n");
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"tokenize", hx_cmd_tokenize}, {"detok", cmd_detok},
                {"logits", cmd_logits},     {"generate", hx_cmd_generate},
                {"lora", hx_cmd_lora},         {"bench", cmd_bench}};
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) {
            load_reference();
            return cmds[i].fn(argc - 2, argv + 2);
        }
    usage(stderr);
    die("unknown command '%s'", argv[1]);
}
