/* fuzz_kvfile.c: fuzz target for the KV page files (engine/kvfile.h) as the
 * prefix cache reads them: the input, written as the only file of a prefix
 * folder, is looked up with its own token ids (so a file whose header fits
 * the model is read page by page) into a context of a fixed random qwen3
 * (1 layer, one KV head of 16, F16 cache, 256 positions); whatever it
 * loads, the context then decodes a token. Seeds (corpus/fuzz_kvfile/)
 * are prefix files of 3, 64 and 70 positions that this model saved:
 * HX_FUZZ_KVFILE_SEEDS=DIR writes them there. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/kvfile.h"
#include "modelfile/modelfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { N_CTX = 256, N_VOCAB = 16 };
static hx_model *g_model;
static hx_ctx *g_ctx;
static char g_dir[64], g_file[96];

static void write_seeds(const char *dir)
{
    int32_t t[70];
    for (int i = 0; i < 70; i++) t[i] = (i * 7 + 3) % N_VOCAB;
    const int lens[3] = {3, 64, 70};
    hx_ctx_truncate(g_ctx, 0);
    if (hx_decode(g_ctx, t, 70, 0)) abort();
    for (int i = 0; i < 3; i++)
        if (hx_ctx_prefix_save(g_ctx, dir, t, lens[i], 0)) abort();
    hx_ctx_truncate(g_ctx, 0);
}

static void cleanup(void)
{
    unlink(g_file);
    rmdir(g_dir);
}

/* The model, written once to a temporary file and loaded; the folder
 * (removed at exit). */
static int setup(void)
{
    if (g_ctx) return 0;
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_fuzz_kvfile_%d", (int)getpid());
    snprintf(g_file, sizeof g_file, "%s/input.kv", g_dir);
    char path[96];
    snprintf(path, sizeof path, "%s.gguf", g_dir);
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.n_layer = 1, p.n_vocab = N_VOCAB, p.n_embd = 32, p.n_head = 2;
    p.n_head_kv = 1, p.head_dim = 16, p.n_ff = 32, p.n_ctx = N_CTX;
    hx_err err = {0};
    hx_model_params mp = hx_model_default_params();
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 1;
    int rc = hx_mkmodel_write(&p, path, &err);
    if (!rc) rc = hx_model_load(path, &mp, &g_model, &err);
    unlink(path);
    if (!rc) rc = hx_ctx_new(g_model, &cp, &g_ctx, &err);
    if (!rc && mkdir(g_dir, 0700)) rc = HX_ERR_IO;
    if (!rc) atexit(cleanup);
    const char *seeds = getenv("HX_FUZZ_KVFILE_SEEDS");
    if (!rc && seeds) write_seeds(seeds);
    return rc ? -1 : 0;
}

/* The input's token ids (as its header counts them, within bounds) and one
 * more: the query a file holding exactly them matches. */
static int query(const uint8_t *data, size_t size, int32_t *q)
{
    hx_kvf_header h;
    int n = 0;
    if (size >= sizeof h) {
        memcpy(&h, data, sizeof h);
        const size_t room = (size - sizeof h) / 4;
        n = h.n_tokens < room ? (int)h.n_tokens : (int)room;
        n = n < N_CTX - 1 ? n : N_CTX - 1;
        memcpy(q, data + sizeof h, (size_t)n * 4);
    }
    q[n] = 1;
    return n + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (setup()) abort();
    FILE *f = fopen(g_file, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) abort();
    int32_t q[N_CTX];
    const int n = query(data, size, q);
    int got = -1;
    hx_ctx_truncate(g_ctx, 0);
    if (hx_ctx_prefix_load(g_ctx, g_dir, q, n, n - 1, &got) != HX_OK) abort();
    if (got < 0 || got > n - 1 || hx_ctx_n_past(g_ctx) != got) abort();
    int32_t tok = 1;
    if (got < N_CTX && hx_decode(g_ctx, &tok, 1, 0) != HX_OK) abort();
    unlink(g_file); /* a damaged file may have been removed already */
    return 0;
}
