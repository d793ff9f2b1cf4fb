/* lora.c: cost of LoRA adapters applied unmerged: decode (one token per
 * pass) and prefill time per token of a model alone and with a random
 * rank-R adapter on q, k, v, o of every layer, alternating runs, medians.
 * Usage: bench/lora MODEL.gguf [RANK=16] [THREADS=2] [TOKENS=64]. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A random adapter of rank r on attn_q/k/v/output of every layer. */
static int write_adapter(const char *base, const char *path, int r)
{
    hx_gguf *g = NULL;
    hx_err err = {0};
    if (hx_gguf_open(base, &g, &err)) return fprintf(stderr, "%s\n", err.msg), -1;
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_gguf_set_str(w, "general.architecture", "qwen3");
    hx_gguf_set_str(w, "general.type", "adapter");
    hx_gguf_set_str(w, "adapter.type", "lora");
    hx_gguf_set_f32(w, "adapter.lora.alpha", (float)r);
    float *bufs[1024];
    int nb = 0;
    uint64_t s = 1;
    static const char *const k[] = {".attn_q.weight", ".attn_k.weight", ".attn_v.weight",
                                    ".attn_output.weight"};
    for (int64_t i = 0; i < hx_gguf_n_tensors(g) && nb < 1020; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        int want = 0;
        for (int j = 0; j < 4; j++) {
            size_t ln = strlen(t->name), lk = strlen(k[j]);
            want |= ln > lk && !strcmp(t->name + ln - lk, k[j]);
        }
        if (!want) continue;
        int64_t na[2] = {t->ne[0], r}, nbb[2] = {r, t->ne[1]};
        float *a = malloc((size_t)(t->ne[0] * r) * 4), *b = malloc((size_t)(t->ne[1] * r) * 4);
        for (int64_t j = 0; j < t->ne[0] * r; j++)
            a[j] = (float)((int64_t)((s = s * 6364136223846793005ull + 1) >> 40) % 2001 - 1000) * 1e-5f;
        for (int64_t j = 0; j < t->ne[1] * r; j++)
            b[j] = (float)((int64_t)((s = s * 6364136223846793005ull + 1) >> 40) % 2001 - 1000) * 1e-5f;
        char na_[160], nb_[160];
        snprintf(na_, sizeof na_, "%s.lora_a", t->name);
        snprintf(nb_, sizeof nb_, "%s.lora_b", t->name);
        hx_gguf_add_tensor(w, na_, HX_TYPE_F32, 2, na, a, NULL, NULL);
        hx_gguf_add_tensor(w, nb_, HX_TYPE_F32, 2, nbb, b, NULL, NULL);
        bufs[nb++] = a, bufs[nb++] = b;
    }
    int rc = hx_gguf_writer_write(w, path, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    return rc;
}

/* Seconds per token: prefill of n tokens in one call, then n decode steps. */
static void run(hx_ctx *c, int n, int V, double *pp, double *tg)
{
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = (i * 7919) % V;
    hx_ctx_truncate(c, 0);
    double t0 = hx_time_mono();
    hx_decode(c, t, n, 0);
    double t1 = hx_time_mono();
    for (int i = 0; i < n; i++) hx_decode(c, &t[i], 1, 0);
    double t2 = hx_time_mono();
    *pp = (t1 - t0) / n, *tg = (t2 - t1) / n;
    free(t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [RANK=16] [THREADS=2] [TOKENS=64]\n", argv[0]);
        return 2;
    }
    const int r = argc > 2 ? atoi(argv[2]) : 16, th = argc > 3 ? atoi(argv[3]) : 2;
    const int n = argc > 4 ? atoi(argv[4]) : 64, reps = 5;
    char ad[] = "/tmp/hx_bench_lora_XXXXXX";
    int fd = mkstemp(ad);
    if (fd < 0 || write_adapter(argv[1], ad, r)) return 1;
    hx_model *m = NULL;
    hx_adapter *a = NULL;
    hx_ctx *c = NULL;
    hx_err err = {0};
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 2 * n + 8;
    cp.n_threads = th;
    if (hx_model_load(argv[1], &mp, &m, &err) || hx_adapter_load(m, ad, &a, &err) ||
        hx_ctx_new(m, &cp, &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    remove(ad);
    const int V = hx_model_hparams(m)->n_vocab;
    double pp[2][8], tg[2][8];
    const float one = 1.0f;
    for (int i = 0; i < reps; i++)
        for (int k = 0; k < 2; k++) {
            hx_ctx_set_adapters(c, &a, &one, k);
            run(c, n, V, &pp[k][i], &tg[k][i]);
        }
    for (int k = 0; k < 2; k++) {
        qsort(pp[k], reps, sizeof(double), cmp_d);
        qsort(tg[k], reps, sizeof(double), cmp_d);
    }
    const hx_adapter_info *in = hx_adapter_get_info(a);
    printf("model %s (%.0fM params), adapter rank %d on q/k/v/o: %d matrices, %.2fM "
           "params; %d threads, %d tokens, median of %d\n", argv[1],
           (double)hx_model_n_params(m) / 1e6, r, in->n_pairs, (double)in->n_params / 1e6,
           th, n, reps);
    printf("prefill: base %.3f ms/token, with adapter %.3f ms/token (x%.3f)\n",
           pp[0][reps / 2] * 1e3, pp[1][reps / 2] * 1e3, pp[1][reps / 2] / pp[0][reps / 2]);
    printf("decode:  base %.3f ms/token, with adapter %.3f ms/token (x%.3f)\n",
           tg[0][reps / 2] * 1e3, tg[1][reps / 2] * 1e3, tg[1][reps / 2] / tg[0][reps / 2]);
    hx_ctx_free(c);
    hx_adapter_free(a);
    hx_model_free(m);
    return 0;
}
