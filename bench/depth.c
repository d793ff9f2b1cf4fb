/* depth.c: logits error by depth on random-weight models of one layer
 * shape (default Qwen3-30B-A3B at Q4_K_M): Hearth, llama.cpp with and
 * without weight repacking, each against the exact reference (exact.h).
 *
 * Usage: bench/depth [--layers 1,2,4,8,16|none] [--tokens N] [--threads N]
 *                    [--experts N] [--vocab N] [--ftype T] [--no-repack]
 *                    [--shape 30b|small]
 *                    [--file PATH]... [--cache DIR] [--keep] [--hxref PATH]
 * For each depth a model is written by hx_mkmodel_write (the 30B-A3B layer
 * shape of bench/engine.c: width 2048, 32 query heads on 4 KV heads of
 * 128, 128 experts of 768, 8 used, the real Qwen2 vocabulary; --shape
 * small: test_exact.c's width 256, 16 experts of 256, 4 used) into the
 * cache directory (default /tmp), measured and deleted (--keep keeps it);
 * --file adds an existing GGUF (e.g. the 48-layer bench file; --layers
 * none for only that). Teacher-
 * forced logits of N tokens (default 8), F32 KV cache everywhere; per pair
 * the max and mean over positions of nmse = sum((a-b)^2) / sum(a^2), with
 * a the first named (the exact reference X, else llama.cpp without
 * repacking L0). llama.cpp runs as `hxref logits` (HXREF_REPACK=0 for L0,
 * 1 for L1; --no-repack skips L1, which keeps a second copy of the
 * weights: too big for the 48-layer file here). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "bench/bench.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "engine/engine_ext.h"

typedef struct opts {
    int layers[16], n_layers;
    const char *files[8];
    int n_files;
    int tokens, threads, experts, vocab, repack, keep;
    int small;            /* --shape small: the test's shape (test_exact.c) */
    const char *ftype;
    char cache[1024], hxref[1024];
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: bench/depth [--layers 1,2,4,8,16|none] [--tokens N] [--threads N]\n"
               "                   [--experts N] [--vocab N] [--ftype T] [--no-repack]\n"
               "                   [--shape 30b|small]\n"
               "                   [--file PATH]... [--cache DIR] [--keep] [--hxref PATH]\n");
}

static int parse_list(const char *v, int *out, int cap)
{
    int n = 0;
    for (const char *p = v; *p && n < cap; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
        if ((out[n++] = atoi(p)) < 1) return -1;
    return n;
}

static int parse_opts(int argc, char **argv, opts *o)
{
    static const int def[] = {1, 2, 4, 8, 16};
    memset(o, 0, sizeof *o);
    memcpy(o->layers, def, sizeof def);
    o->n_layers = 5, o->tokens = 8, o->threads = 2, o->experts = 128, o->repack = 1;
    o->ftype = "Q4_K_M";
    const char *b = getenv("HEARTH_BUILD"), *t = getenv("TMPDIR");
    snprintf(o->hxref, sizeof o->hxref, "%s/tests/ref/hxref", b && *b ? b : "build");
    snprintf(o->cache, sizeof o->cache, "%s", t && *t ? t : "/tmp");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-repack")) o->repack = 0;
        else if (!strcmp(a, "--keep")) o->keep = 1;
        else if (!v) return -1;
        else if (!strcmp(a, "--layers")) { /* "none": only the --file rows */
            if (!strcmp(v, "none")) o->n_layers = 0;
            else if ((o->n_layers = parse_list(v, o->layers, 16)) < 0) return -1;
            i++;
        } else if (!strcmp(a, "--tokens")) o->tokens = atoi(v), i++;
        else if (!strcmp(a, "--threads")) o->threads = atoi(v), i++;
        else if (!strcmp(a, "--experts")) o->experts = atoi(v), i++;
        else if (!strcmp(a, "--vocab")) o->vocab = atoi(v), i++;
        else if (!strcmp(a, "--ftype")) o->ftype = v, i++;
        else if (!strcmp(a, "--shape") && (!strcmp(v, "small") || !strcmp(v, "30b")))
            o->small = !strcmp(v, "small"), i++;
        else if (!strcmp(a, "--cache")) snprintf(o->cache, sizeof o->cache, "%s", v), i++;
        else if (!strcmp(a, "--hxref")) snprintf(o->hxref, sizeof o->hxref, "%s", v), i++;
        else if (!strcmp(a, "--file") && o->n_files < 8) o->files[o->n_files++] = v, i++;
        else return -1;
    }
    return o->tokens >= 1 && o->tokens <= 512 && o->threads >= 1 && o->experts >= 8 && o->vocab >= 0 ? 0 : -1;
}

/* Writes the 30B-A3B layer shape with n layers; 0 or -1. */
static int write_model(const opts *o, int n, const char *path)
{
    static char vocab[1024];
    hx_mkmodel_params p = hx_mkmodel_default_params();
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-qwen2.gguf", hx_shared_data_dir());
    p.arch = "qwen3moe";
    p.ftype = o->ftype;
    p.vocab_path = !o->vocab && access(vocab, R_OK) == 0 ? vocab : NULL;
    p.n_vocab = o->vocab ? o->vocab : 151936;
    p.n_ctx = 40960;
    p.n_layer = n;
    p.n_embd = 2048;
    p.n_head = 32;
    p.n_head_kv = 4;
    p.head_dim = 128;
    p.n_ff = 6144;
    p.n_expert = o->experts;
    p.n_expert_used = 8;
    p.n_ff_exp = 768;
    if (o->small) { /* tests/engine/test_exact.c's shape, with a vocabulary */
        p.n_ctx = 256, p.n_embd = 256, p.n_head = 4, p.n_head_kv = 2, p.head_dim = 64;
        p.n_ff = 512, p.n_expert = 16, p.n_expert_used = 4, p.n_ff_exp = 256;
    }
    hx_err err = {0};
    if (hx_mkmodel_write(&p, path, &err) != HX_OK) {
        fprintf(stderr, "bench/depth: mkmodel: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Hearth's logits (F32 KV cache) and the exact reference's, each n * nv
 * floats (malloc'd); 0 or -1. */
static int hearth_and_exact(const opts *o, const char *path, const int32_t *ids,
                            float **hx, float **ex, int *nv, double *ex_cpu)
{
    hx_err err = {0};
    hx_model *m = NULL;
    hx_ctx *c = NULL;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 2 * o->tokens + 16;
    cp.kv_f32 = 1;
    cp.n_threads = o->threads;
    int rc = hx_model_load(path, &mp, &m, &err);
    if (!rc) rc = hx_ctx_new(m, &cp, &c, &err);
    if (!rc && (rc = hx_decode(c, ids, o->tokens, 1)))
        hx_err_set(&err, rc, "%s", hx_ctx_errmsg(c));
    if (!rc) {
        const size_t n = (size_t)(*nv = hx_model_hparams(m)->n_vocab);
        *hx = malloc(n * (size_t)o->tokens * sizeof **hx);
        *ex = malloc(n * (size_t)o->tokens * sizeof **ex);
        if (!*hx || !*ex) rc = hx_err_set(&err, HX_ERR_NOMEM, "out of memory");
        for (int i = 0; !rc && i < o->tokens; i++)
            memcpy(*hx + (size_t)i * n, hx_ctx_logits(c, i), n * sizeof **hx);
        double c0 = bench_cpu_seconds();
        if (!rc) rc = hx_exact_logits(m, ids, o->tokens, o->threads, *ex, &err);
        *ex_cpu = bench_cpu_seconds() - c0;
    }
    hx_ctx_free(c);
    hx_model_free(m);
    if (rc) fprintf(stderr, "bench/depth: %s: %s\n", path, err.msg);
    return rc ? -1 : 0;
}

/* llama.cpp's logits through `hxref logits` with HXREF_REPACK=repack into
 * a malloc'd n * nv array; 0 or -1. */
static int llama_logits(const opts *o, const char *path, const int32_t *ids, int nv,
                        int repack, float **out)
{
    char bin[1100], cmd[8192];
    snprintf(bin, sizeof bin, "%s/hx_depth_%d.bin", o->cache, (int)getpid());
    /* one thread: ggml's workers spin, and its numbers do not depend on it */
    int k = snprintf(cmd, sizeof cmd, "HXREF_REPACK=%d HXREF_THREADS=1 '%s' logits '%s' '%s'",
                     repack, o->hxref, path, bin);
    for (int i = 0; i < o->tokens && k < (int)sizeof cmd - 16; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " %d", ids[i]);
    int st = system(cmd);
    char *data = NULL;
    size_t len = 0, want = (size_t)o->tokens * (size_t)nv * sizeof(float);
    hx_err err = {0};
    int rc = st == 0 ? hx_read_file(bin, want, &data, &len, &err) : HX_ERR_IO;
    unlink(bin);
    if (rc || len != want) {
        fprintf(stderr, "bench/depth: hxref (repack %d) failed on %s\n", repack, path);
        free(data);
        return -1;
    }
    *out = (float *)data;
    return 0;
}

static void nmse_pair(const float *a, const float *b, int n, int nv, double *mx, double *mean)
{
    *mx = *mean = 0;
    for (int i = 0; i < n; i++) {
        double num = 0, den = 0;
        for (int j = 0; j < nv; j++) {
            double d = (double)a[(size_t)i * nv + j] - b[(size_t)i * nv + j];
            num += d * d;
            den += (double)a[(size_t)i * nv + j] * a[(size_t)i * nv + j];
        }
        double e = den > 0 ? num / den : num;
        *mx = e > *mx || isnan(e) ? e : *mx;
        *mean += e / n;
    }
}

/* Positions where two logits arrays pick the same top token. */
static int same_top(const float *a, const float *b, int n, int nv)
{
    int same = 0;
    for (int i = 0; i < n; i++) {
        int ia = 0, ib = 0;
        for (int j = 1; j < nv; j++) {
            if (a[(size_t)i * nv + j] > a[(size_t)i * nv + ia]) ia = j;
            if (b[(size_t)i * nv + j] > b[(size_t)i * nv + ib]) ib = j;
        }
        same += ia == ib;
    }
    return same;
}

static void print_pair(const float *a, const float *b, int n, int nv)
{
    double mx, mean;
    if (!a || !b) {
        printf(" - |");
        return;
    }
    nmse_pair(a, b, n, nv, &mx, &mean);
    printf(" %.2e / %.2e (%d/%d) |", mx, mean, same_top(a, b, n, nv), n);
}

/* One table row: depth label, then X-H, X-L0, X-L1, L0-H, L0-L1. */
static int measure(const opts *o, const char *path, const char *label)
{
    int32_t ids[512];
    uint64_t x = 12345;
    /* ordinary Qwen2 tokens (ids below the special ones at 151643) */
    const uint64_t top = o->vocab ? (uint64_t)o->vocab : 151643;
    for (int i = 0; i < o->tokens; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % top);
    }
    float *hx = NULL, *ex = NULL, *l0 = NULL, *l1 = NULL;
    int nv = 0;
    double ex_cpu = 0;
    if (hearth_and_exact(o, path, ids, &hx, &ex, &nv, &ex_cpu)) return -1;
    /* llama.cpp needs a tokenizer: without one (--vocab) its columns are - */
    int ok = llama_logits(o, path, ids, nv, 0, &l0) == 0 || o->vocab;
    if (ok && l0 && o->repack) ok = llama_logits(o, path, ids, nv, 1, &l1) == 0;
    if (ok) {
        printf("| %s |", label);
        print_pair(ex, hx, o->tokens, nv);
        print_pair(ex, l0, o->tokens, nv);
        print_pair(ex, l1, o->tokens, nv);
        print_pair(l0, hx, o->tokens, nv);
        print_pair(l0, l1, o->tokens, nv);
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "bench/depth: %s: exact reference %.0f CPU s\n", label, ex_cpu);
    }
    free(hx), free(ex), free(l0), free(l1);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse_opts(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    if (access(o.hxref, X_OK) != 0) {
        fprintf(stderr, "bench/depth: %s not built (make %s)\n", o.hxref, o.hxref);
        return 1;
    }
    printf("%s shape, %s, %d tokens, F32 KV cache; max / mean NMSE over positions (same top "
           "token); X exact, H Hearth, L0 llama.cpp repack off, L1 repack on\n\n",
           o.small ? "small (test_exact)" : "30B-A3B", o.ftype, o.tokens);
    printf("| layers | X vs H | X vs L0 | X vs L1 | L0 vs H | L0 vs L1 |\n"
           "|---|---|---|---|---|---|\n");
    fflush(stdout);
    int fails = 0;
    for (int i = 0; i < o.n_layers; i++) {
        char path[1200], label[32];
        snprintf(path, sizeof path, "%s/hx-depth-%s-%s-e%d-v%d-l%d.gguf", o.cache,
                 o.small ? "small" : "30b", o.ftype, o.experts, o.vocab, o.layers[i]);
        snprintf(label, sizeof label, "%d", o.layers[i]);
        struct stat st;
        if (stat(path, &st) != 0 && write_model(&o, o.layers[i], path)) return 1;
        fails += measure(&o, path, label) != 0;
        if (!o.keep) unlink(path);
    }
    for (int i = 0; i < o.n_files; i++) {
        hx_gguf *g = NULL;
        hx_err err = {0};
        uint32_t nl = 0;
        char label[64] = "?";
        if (hx_gguf_open(o.files[i], &g, &err) == HX_OK &&
            (hx_gguf_get_u32(g, "qwen3moe.block_count", &nl) == HX_OK ||
             hx_gguf_get_u32(g, "qwen3.block_count", &nl) == HX_OK))
            snprintf(label, sizeof label, "%u (file)", nl);
        hx_gguf_close(g);
        fails += measure(&o, o.files[i], label) != 0;
    }
    return fails ? 1 : 0;
}
