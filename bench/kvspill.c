/* kvspill.c: the cost of attention over spilled KV history: single-token
 * decodes after a long context, the cache all in memory vs capped with the
 * rest spilled to disk, on Qwen3-30B-A3B's attention shape (32 query heads,
 * 4 KV heads of 128) with a narrow residual and FFN, so that the
 * difference is attention's reads. `make bench-kvspill`.
 *
 * usage: kvspill [--layers N] [--ctx N] [--cap-pages N] [--tokens N]
 *                [--threads N] [--kv f16|q8]
 * The model is written to a temporary folder, the spill goes to its own
 * folder there; both are removed at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "engine/engine.h"

typedef struct opts {
    int layers, ctx, cap_pages, tokens, threads, kv_q8;
} opts;

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.layers = 12, .ctx = 4096, .cap_pages = 8, .tokens = 16, .threads = 2};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return -1;
        if (!strcmp(a, "--layers")) o->layers = atoi(v);
        else if (!strcmp(a, "--ctx")) o->ctx = atoi(v);
        else if (!strcmp(a, "--cap-pages")) o->cap_pages = atoi(v);
        else if (!strcmp(a, "--tokens")) o->tokens = atoi(v);
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--kv")) o->kv_q8 = !strcmp(v, "q8");
        else return -1;
        i++;
    }
    return o->layers > 0 && o->ctx > 256 && o->cap_pages >= 2 && o->tokens > 0 ? 0 : -1;
}

static hx_ctx *context(hx_model *m, const opts *o, int spill, const char *dir)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = o->ctx + o->tokens;
    cp.n_threads = o->threads;
    cp.kv_q8 = o->kv_q8;
    cp.n_batch = (o->cap_pages - 1) * HX_KV_PAGE_POSITIONS; /* both runs: same passes */
    if (spill) {
        hx_ctx_mem mem;
        hx_err err = {0};
        if (hx_ctx_memory(m, &cp, &mem, &err)) return NULL;
        cp.kv_max_bytes = (size_t)o->cap_pages * mem.kv_page;
        cp.kv_spill = 1;
        cp.kv_spill_dir = dir;
    }
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err)) fprintf(stderr, "kvspill: %s\n", err.msg);
    return c;
}

/* A context filled with o->ctx positions (NULL on failure). */
static hx_ctx *filled(hx_model *m, const opts *o, int spill, const char *dir,
                      const int32_t *t)
{
    hx_ctx *c = context(m, o, spill, dir);
    if (c && hx_decode(c, t, o->ctx, 0)) {
        fprintf(stderr, "kvspill: %s\n", hx_ctx_errmsg(c));
        hx_ctx_free(c);
        return NULL;
    }
    return c;
}

/* Seconds of one token decoded after the context (then dropped again):
 * wall time, and the process's CPU time into *cpu (with one thread the
 * work itself, however loaded the machine). */
static double one_token(hx_ctx *c, const opts *o, int32_t tok, double *cpu)
{
    const double t0 = hx_time_mono(), c0 = bench_cpu_seconds();
    int rc = hx_decode(c, &tok, 1, 0);
    const double s = hx_time_mono() - t0;
    *cpu = bench_cpu_seconds() - c0;
    hx_ctx_truncate(c, o->ctx);
    return rc ? -1 : s;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The fastest and the median of n times (sorted in place). */
static void summary(double *v, int n, double *best, double *median)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *best = v[0];
    *median = v[n / 2];
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: kvspill [--layers N] [--ctx N] [--cap-pages N] "
                        "[--tokens N] [--threads N] [--kv f16|q8]\n");
        return 2;
    }
    char dir[] = "/tmp/hx_bench_kvspill_XXXXXX", path[64], sdir[64];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    snprintf(sdir, sizeof sdir, "%s/spill", dir);
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3";
    p.ftype = "Q8_0";
    p.n_vocab = 256, p.n_layer = o.layers, p.n_embd = 256, p.n_head = 32, p.n_head_kv = 4;
    p.head_dim = 128, p.n_ff = 256, p.n_ctx = o.ctx + o.tokens, p.tied_output = 1;
    hx_err err = {0};
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    if (hx_mkmodel_write(&p, path, &err) || hx_model_load(path, &mp, &m, &err)) {
        fprintf(stderr, "kvspill: %s\n", err.msg);
        return 1;
    }
    int32_t *t = malloc((size_t)o.ctx * sizeof *t);
    double *ta = malloc(4 * (size_t)o.tokens * sizeof *ta), *ts = ta + o.tokens;
    double *ca = ts + o.tokens, *cs = ca + o.tokens;
    if (!t || !ta) return 1;
    for (int i = 0; i < o.ctx; i++) t[i] = (int32_t)((i * 37 + 11) % 200);
    const double c0 = bench_cpu_seconds();
    hx_ctx *a = filled(m, &o, 0, NULL, t), *c = filled(m, &o, 1, sdir, t);
    int ok = a && c;
    for (int i = 0; ok && i < o.tokens; i++) { /* alternately: both see the same load */
        ta[i] = one_token(a, &o, 5, &ca[i]);
        ts[i] = one_token(c, &o, 5, &cs[i]);
        ok = ta[i] > 0 && ts[i] > 0;
    }
    if (ok) {
        hx_kv_stats st;
        hx_ctx_kv_stats(c, &st);
        double ba, ma, bs, ms, bca, mca, bcs, mcs;
        summary(ta, o.tokens, &ba, &ma);
        summary(ts, o.tokens, &bs, &ms);
        summary(ca, o.tokens, &bca, &mca);
        summary(cs, o.tokens, &bcs, &mcs);
        const double page_mib = (double)hx_ctx_kv_bytes(c) / o.cap_pages / (1 << 20);
        printf("%d layers, attention 32/4 heads x 128, KV %s, %d threads, context %d, "
               "%d single tokens each, alternately (load %.2f, cpu %.1f s)\n", o.layers,
               o.kv_q8 ? "q8" : "f16", o.threads, o.ctx, o.tokens, bench_load1(),
               bench_cpu_seconds() - c0);
        printf("  in memory: %.2f ms/token fastest, %.2f median, cpu %.2f fastest; KV %.1f "
               "MiB resident\n", ba * 1e3, ma * 1e3, bca * 1e3,
               (double)hx_ctx_kv_bytes(a) / (1 << 20));
        printf("  spilled:   %.2f ms/token fastest, %.2f median, cpu %.2f fastest; KV %.1f "
               "MiB resident (%d pages), %.1f MiB (%d pages) on disk\n", bs * 1e3, ms * 1e3,
               bcs * 1e3,
               (double)hx_ctx_kv_bytes(c) / (1 << 20), st.resident, st.spilled * page_mib,
               st.spilled);
        const double kpos = st.spilled * HX_KV_PAGE_POSITIONS / 1000.0;
        printf("  spill cost (fastest): %+.2f ms/token wall (x%.2f), %+.2f cpu (x%.2f); "
               "%.3f ms wall, %.3f cpu per layer per 1,000 spilled positions\n",
               (bs - ba) * 1e3, bs / ba, (bcs - bca) * 1e3, bcs / bca,
               (bs - ba) * 1e3 / o.layers / kpos, (bcs - bca) * 1e3 / o.layers / kpos);
    }
    hx_ctx_free(a);
    hx_ctx_free(c);
    free(t);
    free(ta);
    hx_model_free(m);
    unlink(path);
    rmdir(sdir);
    rmdir(dir);
    return ok ? 0 : 1;
}
