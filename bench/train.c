/* train.c: training throughput benchmark: optimizer steps of the tiny-model
 * recipe (or a given shape) on random packed documents; tok/s, CPU, RSS.
 * Usage: bench/train [steps] [threads] [bf16]; see main for the environment
 * knobs. With bf16: the products of the shape's linear layers in F32 and
 * in bfloat16 (GFLOP/s), then steps alternating F32 and bf16 products
 * (each step count is per precision), and the ratios. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/base.h"
#include "bench/bench.h"
#include "lora/lora.h"
#include "lora/train_int.h"

static int env_int(const char *name, int def)
{
    const char *e = getenv(name);
    return e && *e ? atoi(e) : def;
}

/* Documents of 64..1087 tokens; about half of each (its second half, as
 * an assistant reply would be) counts in the loss. */
static void fill_batch(uint64_t *s, int32_t *tok, int32_t *tgt, uint8_t *mask,
                       int32_t *doc, int n, int T, int V)
{
    int id = 0, left = 0, len = 0;
    for (int i = 0; i < n; i++) {
        if (i % T == 0 || left == 0) {
            *s = *s * 6364136223846793005ull + 1442695040888963407ull;
            len = left = 64 + (int)((*s >> 33) % 1024);
            id++;
        }
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((*s >> 33) % (uint64_t)V);
        tgt[i] = (int32_t)((*s >> 13) % (uint64_t)V);
        mask[i] = left <= len / 2 && left > 1;
        doc[i] = id;
        left--;
    }
}

typedef int (*gemm_fn)(hx_threadpool *, int, int, int, float, const float *, int, int,
                       const float *, int, int, float *, int, int);

/* Best of 3 wall seconds of one product (m, n, k) of fn. */
static double time_gemm(gemm_fn fn, hx_threadpool *tp, int m, int n, int k, int ta,
                        const float *a, const float *b, float *c)
{
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        const double t0 = hx_time_mono();
        if (fn(tp, m, n, k, 1.0f, a, ta ? m : k, ta, b, n, 0, c, n, 0)) return -1;
        const double t = hx_time_mono() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* The linear layers' products of a micro-batch of n tokens (forward x W^T
 * as x (n, in) . B (in, out); the weight gradient dy^T x), F32 against
 * bfloat16. */
static void gemm_table(const hx_train_config *c, int n, int nth)
{
    const int C = c->n_embd, F = c->n_ff, Q = c->n_head * c->head_dim;
    const int shapes[][4] = {{n, F, C, 0}, {n, C, F, 0}, {n, Q, C, 0}, {F, C, n, 1}};
    hx_threadpool *tp = hx_threadpool_new(nth);
    const size_t big = (size_t)n * (size_t)(F > Q ? (F > C ? F : C) : (Q > C ? Q : C));
    float *a = malloc(big * 4), *b = malloc(big * 4), *o = malloc(big * 4);
    if (!tp || !a || !b || !o) return;
    for (size_t i = 0; i < big; i++) a[i] = (float)(i % 13) * 0.05f, b[i] = (float)(i % 7) * 0.1f;
    printf("products (m x n x k), GFLOP/s, best of 3:\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int m = shapes[i][0], nn = shapes[i][1], k = shapes[i][2], ta = shapes[i][3];
        const double f = time_gemm(hx_tr_gemm_ex, tp, m, nn, k, ta, a, b, o);
        const double h = time_gemm(hx_tr_gemm_bf16, tp, m, nn, k, ta, a, b, o);
        const double fl = 2.0 * m * nn * k / 1e9;
        printf("  %5d x %4d x %5d%s  F32 %6.1f  bf16 %6.1f  ratio %.2f\n", m, nn, k,
               ta ? " (A^T)" : "      ", fl / f, h > 0 ? fl / h : 0.0, h > 0 ? f / h : 0.0);
    }
    free(a), free(b), free(o);
    hx_threadpool_free(tp);
}

/* Environment: HX_BENCH_LAYERS, _EMBD, _HEADS, _KV, _HDIM, _FF, _VOCAB,
 * _SEQ (tokens per sequence), _NSEQ (sequences per micro-batch) override
 * the recipe (6 x 256, 4/2 heads of 64, F 768, V 4096, 4 x 1024).
 * HX_BENCH_BASE=model.gguf trains a LoRA (rank HX_BENCH_RANK, default 16,
 * on q k v o) over that frozen model instead. */
int main(int argc, char **argv)
{
    const int steps = argc > 1 ? atoi(argv[1]) : 3;
    const int nth = argc > 2 ? atoi(argv[2]) : 2;
    const int both = argc > 3 && !strcmp(argv[3], "bf16");
    hx_train_config c = hx_train_default_config();
    c.n_layer = env_int("HX_BENCH_LAYERS", 6);
    c.n_embd = env_int("HX_BENCH_EMBD", 256);
    c.n_head = env_int("HX_BENCH_HEADS", 4);
    c.n_head_kv = env_int("HX_BENCH_KV", 2);
    c.head_dim = env_int("HX_BENCH_HDIM", 64);
    c.n_ff = env_int("HX_BENCH_FF", 768);
    c.n_vocab = env_int("HX_BENCH_VOCAB", 4096);
    const int T = env_int("HX_BENCH_SEQ", 1024), ns = env_int("HX_BENCH_NSEQ", 4);
    c.n_ctx = T;
    hx_err err = {0};
    hx_trainer *tr = NULL;
    const char *base = getenv("HX_BENCH_BASE");
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = env_int("HX_BENCH_RANK", 16);
    lp.alpha = (float)lp.rank;
    int bad = steps < 1;
    if (!bad && base && *base) {
        bad = hx_trainer_new_gguf(base, &lp, nth, &tr, &err) != HX_OK;
        if (!bad) { /* the model's shape */
            const hx_hparams *hp = hx_trainer_hparams(tr);
            c.n_layer = hp->n_layer, c.n_embd = hp->n_embd, c.n_head = hp->n_head;
            c.n_head_kv = hp->n_head_kv, c.head_dim = hp->head_dim, c.n_ff = hp->n_ff;
            c.n_vocab = hp->n_vocab;
        }
    } else if (!bad)
        bad = hx_trainer_new_scratch(&c, 1, nth, &tr, &err) != HX_OK;
    if (bad) {
        fprintf(stderr, "bench/train: %s\n", err.msg[0] ? err.msg : "usage: train [steps] [threads]");
        return 1;
    }
    const int n = T * ns;
    if (both && !hx_trainer_set_bf16(tr, 1)) {
        fprintf(stderr, "bench/train: this CPU has no AVX512-BF16\n");
        return 1;
    }
    if (both) gemm_table(&c, n, nth);
    int32_t *tok = malloc((size_t)n * 4), *tgt = malloc((size_t)n * 4), *doc = malloc((size_t)n * 4);
    uint8_t *mask = malloc((size_t)n);
    if (!tok || !tgt || !doc || !mask) return 1;
    uint64_t s = 7;
    hx_opt_params o = hx_opt_default_params();
    o.n_steps = steps + 1;
    printf("train bench: %s%d layers, C %d, heads %d/%d x %d, F %d, V %d; %zu "
           "trainable parameters; micro-batch %d x %d tokens; %d threads\n",
           hx_trainer_is_lora(tr) ? "LoRA over " : "", c.n_layer,
           c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab,
           hx_trainer_n_params(tr), ns, T, nth);
    double wall = 0, cpu = 0, l0 = bench_load1(), pw[2] = {0, 0};
    /* the first step warms up (allocations, page faults) and is not
     * counted; with bf16 the steps alternate F32 (even) and bf16 (odd)
     * products, and the first of each warms up */
    const int total = both ? 2 * steps : steps, warm = both ? 2 : 1;
    for (int i = 0; i < warm + total; i++) {
        if (both) hx_trainer_set_bf16(tr, i % 2);
        fill_batch(&s, tok, tgt, mask, doc, n, T, c.n_vocab);
        int cnt = 0;
        for (int k = 0; k < n; k++) cnt += mask[k];
        hx_batch b = {.n_seq = ns, .n_tok = T, .tokens = tok, .targets = tgt, .mask = mask, .doc = doc};
        const double w0 = hx_time_mono(), c0 = bench_cpu_seconds();
        double loss = 0;
        hx_trainer_zero_grad(tr);
        if (hx_trainer_grad(tr, &b, cnt, &loss, &err)) {
            fprintf(stderr, "bench/train: %s\n", err.msg);
            return 1;
        }
        hx_trainer_step(tr, &o, NULL);
        const double dw = hx_time_mono() - w0, dc = bench_cpu_seconds() - c0;
        printf("step %d%s: loss %.4f  %.2f s wall  %.2f s cpu  %.0f tok/s\n", i,
               both ? (i % 2 ? " bf16" : " F32") : "", loss / cnt, dw, dc, n / dw);
        if (i >= warm) wall += dw, cpu += dc, pw[i % 2] += dw;
    }
    if (both)
        printf("F32 %.0f tok/s, bf16 %.0f tok/s: bf16/F32 %.2f\n", (double)n * steps / pw[0],
               (double)n * steps / pw[1], pw[0] / pw[1]);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("tok/s %.0f (wall)  %.0f (cpu/threads)  cpu/wall %.2f  load %.2f -> "
           "%.2f  peak RSS %ld MB\n", (double)n * total / wall,
           (double)n * total / (cpu / nth), cpu / wall, l0, bench_load1(), ru.ru_maxrss / 1024);
    hx_trainer_free(tr);
    free(tok);
    free(tgt);
    free(doc);
    free(mask);
    return 0;
}
