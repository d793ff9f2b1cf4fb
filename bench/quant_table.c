/* quant_table.c: what quantization costs a model that was trained for the
 * agent: for each GGUF given, its size, bits per weight, the held-out
 * loss on the assistant's tokens of generated conversations (computed by
 * the engine, as inference sees it), its paired difference to the first
 * model with a standard error, and the NMSE of its logits against
 * llama.cpp's on the same file. --pair A,B adds the paired difference of
 * B against A (e.g. calibrated against not). scripts/quant-table.sh adds
 * the agent evaluation and writes the table as Markdown
 * ($TINY_DIR/quant-table.md).
 *
 * usage: quant-table --heldout FILE.jsonl [--n N] [--threads T]
 *                    [--pair A,B]... LABEL=MODEL...
 *        quant-table --heldout FILE.jsonl --skip K --n N --dump OUT.txt
 * (the second writes conversations K..K+N-1 as the model reads them: the
 * calibration text for hearth quantize --calibrate --calib-special) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/agent.h"
#include "nightly/nightly.h"
#include "tests/ref/ref.h"
#include "tests/test.h"

#define STOP (-1) /* a callback's "enough": not an hx_rc */

#define MAX_PAIRS 8

typedef struct opts {
    const char *heldout, *dump;
    int n_docs, n_threads, skip;
    const char *pairs[MAX_PAIRS]; /* "A,B" */
    int n_pairs;
} opts;

/* One model's held-out loss, per conversation (summed cross-entropy over
 * its masked tokens, and their count), for paired comparisons. */
typedef struct result {
    char label[64];
    double *sum;
    long *cnt;
    int n; /* conversations */
} result;

/* The first n conversations of the held-out file, tokenized with v. */
typedef struct collect {
    const hx_vocab *v;
    hx_chat_tokens *t;
    int left;
} collect;

static int add_doc(void *user, const hx_chat_doc *d, hx_err *err)
{
    collect *c = user;
    if (c->left-- <= 0) return STOP;
    hx_buf text;
    hx_buf_init(&text);
    hx_chat_span *spans = NULL;
    int n = 0, rc = hx_chat_render(d, &text, &spans, &n, err);
    if (!rc) rc = hx_chat_tokens_add(c->t, c->v, text.data, text.len, spans, n, err);
    free(spans);
    hx_buf_free(&text);
    return rc;
}

/* Bits per weight: the file's bits over the elements of its tensors. */
static double bits_per_weight(const hx_model *m, double bytes)
{
    const hx_gguf *g = hx_model_gguf(m);
    double n = 0;
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        double e = 1;
        for (int d = 0; d < t->n_dims; d++) e *= (double)t->ne[d];
        n += e;
    }
    return n > 0 ? bytes * 8 / n : 0;
}

/* Loss of every conversation by the engine into r (per conversation:
 * summed cross-entropy of its masked tokens, and their count). */
static int heldout_loss(hx_model *m, const hx_chat_tokens *t, int n_threads, result *r,
                        hx_err *err)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 4096;
    cp.n_threads = n_threads;
    cp.kv_f32 = 1;
    hx_ctx *c = NULL;
    int rc = hx_ctx_new(m, &cp, &c, err);
    const int V = hx_vocab_n_tokens(hx_model_vocab(m));
    r->sum = hx_calloc((size_t)t->n_docs + 1, sizeof *r->sum);
    r->cnt = hx_calloc((size_t)t->n_docs + 1, sizeof *r->cnt);
    if (!rc && (!r->sum || !r->cnt)) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    for (size_t s = 0; !rc && s < t->n; r->n++) {
        size_t e = s;
        while (e < t->n && t->doc[e] == t->doc[s]) e++;
        const int n = (int)(e - s) < cp.n_ctx ? (int)(e - s) : cp.n_ctx;
        hx_ctx_truncate(c, 0);
        if (r->n >= t->n_docs || hx_decode(c, t->tokens + s, n, 1))
            rc = hx_err_set(err, HX_ERR_STATE, "decode: %s", hx_ctx_errmsg(c));
        for (int i = 1; !rc && i < n; i++)
            if (t->mask[s + i]) {
                const float *z = hx_ctx_logits(c, i - 1);
                r->sum[r->n] += hx_logsumexp(z, V) - z[t->tokens[s + i]];
                r->cnt[r->n]++;
            }
        s = e;
    }
    hx_ctx_free(c);
    return rc;
}

/* Mean loss per token over all conversations. */
static double mean_loss(const result *r)
{
    double s = 0, n = 0;
    for (int i = 0; i < r->n; i++) s += r->sum[i], n += (double)r->cnt[i];
    return n > 0 ? s / n : NAN;
}

/* Paired difference of b's mean loss to a's on the same conversations, and
 * its standard error with conversations as the unit (the linearised
 * variance of a ratio of sums: the tokens of one conversation are not
 * independent). *better: conversations where b's loss is lower. */
static double paired(const result *a, const result *b, double *se, int *better)
{
    double d = 0, n = 0, v = 0;
    *better = 0;
    for (int i = 0; i < a->n; i++) {
        d += b->sum[i] - a->sum[i];
        n += (double)a->cnt[i];
        *better += b->sum[i] < a->sum[i];
    }
    const double mean = n > 0 ? d / n : NAN;
    for (int i = 0; i < a->n; i++) {
        double r = b->sum[i] - a->sum[i] - mean * (double)a->cnt[i];
        v += r * r;
    }
    *se = a->n > 1 && n > 0 ? sqrt(v * a->n / (a->n - 1)) / n : NAN;
    return mean;
}

/* NMSE of the engine's logits against llama.cpp's over the first n tokens;
 * -1 when the reference is missing (why says so). */
static double llama_nmse(hx_model *m, const char *path, const int32_t *ids, int n,
                         char *why, size_t wn)
{
    if (!ref_available(why, wn)) return -1;
    float *ref = NULL;
    int V = 0;
    if (ref_logits(path, ids, n, &ref, &V) < 0) {
        snprintf(why, wn, "llama.cpp: %s", ref_error());
        return -1;
    }
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = n;
    cp.n_threads = 1;
    cp.kv_f32 = 1;
    hx_ctx *c = NULL;
    hx_err err = {0};
    double nmse = -1;
    if (hx_ctx_new(m, &cp, &c, &err) == HX_OK && hx_decode(c, ids, n, 1) == HX_OK)
        nmse = test_nmse(ref, hx_ctx_logits(c, 0), (size_t)n * (size_t)V);
    else snprintf(why, wn, "engine: %s", err.msg);
    hx_ctx_free(c);
    free(ref);
    return nmse;
}

/* "+0.0012 ± 0.0003" for b against a, or "" when b is a. */
static void diff_text(const result *a, const result *b, char *out, size_t n)
{
    double se;
    int better;
    if (a == b) {
        snprintf(out, n, "(reference)");
        return;
    }
    double d = paired(a, b, &se, &better);
    snprintf(out, n, "%+.4f ± %.4f", d, se);
}

/* One model: its row of the table; r gets its per-conversation loss. ref
 * is the first model's result (r itself for the first). */
static int row(const opts *o, const char *path, hx_chat_tokens *t, result *r,
               const result *ref)
{
    hx_err err = {0};
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    if (hx_model_load(path, &mp, &m, &err)) {
        fprintf(stderr, "quant-table: %s: %s\n", path, err.msg);
        return 1;
    }
    struct stat st;
    const double bytes = stat(path, &st) == 0 ? (double)st.st_size : 0;
    int rc = HX_OK;
    if (!t->n) {
        collect c = {hx_model_vocab(m), t, o->n_docs};
        rc = hx_chat_each(o->heldout, 0, add_doc, &c, &err);
        if (rc == STOP) rc = HX_OK;
    }
    if (!rc) rc = heldout_loss(m, t, o->n_threads, r, &err);
    char why[512] = "", nm[600], diff[64];
    const int n_ref = t->n < 96 ? (int)t->n : 96;
    const double nmse = rc ? -1 : llama_nmse(m, path, t->tokens, n_ref, why, sizeof why);
    if (nmse < 0) snprintf(nm, sizeof nm, "not checked (%s)", why);
    else snprintf(nm, sizeof nm, "%.2e", nmse);
    if (rc) fprintf(stderr, "quant-table: %s: %s\n", path, err.msg);
    else {
        diff_text(ref, r, diff, sizeof diff);
        printf("| %s | %.0f | %.2f | %.4f | %s | %s |\n", r->label, bytes,
               bits_per_weight(m, bytes), mean_loss(r), diff, nm);
    }
    fflush(stdout);
    hx_model_free(m);
    return rc ? 1 : 0;
}

static const result *find_result(const result *r, int n, const char *label, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(r[i].label) == len && !strncmp(r[i].label, label, len)) return &r[i];
    return NULL;
}

/* The --pair lines: B against A, paired over the same conversations. */
static int print_pairs(const opts *o, const result *r, int n)
{
    int bad = 0;
    for (int i = 0; i < o->n_pairs; i++) {
        const char *p = o->pairs[i], *comma = strchr(p, ',');
        const result *a = comma ? find_result(r, n, p, (size_t)(comma - p)) : NULL;
        const result *b = comma ? find_result(r, n, comma + 1, strlen(comma + 1)) : NULL;
        if (!a || !b || !a->n || a->n != b->n) {
            fprintf(stderr, "quant-table: --pair %s: no such pair of models\n", p);
            bad = 1;
            continue;
        }
        double se;
        int better;
        double d = paired(a, b, &se, &better);
        printf("- %s against %s: %+.4f ± %.4f nats per token (paired over %d "
               "conversations, ± one standard error; %.1f SE), lower loss in %d of %d\n",
               b->label, a->label, d, se, a->n, se > 0 ? d / se : 0.0, better, a->n);
    }
    return bad;
}

/* Rendered conversations skip..skip+n-1 into a text file. */
typedef struct dumper {
    FILE *f;
    int skip, left;
} dumper;

static int dump_doc(void *user, const hx_chat_doc *d, hx_err *err)
{
    dumper *u = user;
    if (u->skip > 0) return u->skip--, 0;
    if (u->left-- <= 0) return STOP;
    hx_buf text;
    hx_buf_init(&text);
    int rc = hx_chat_render(d, &text, NULL, NULL, err);
    if (!rc && fwrite(text.data, 1, text.len, u->f) != text.len)
        rc = hx_err_set(err, HX_ERR_IO, "write failed");
    hx_buf_free(&text);
    return rc;
}

static int dump(const opts *o)
{
    hx_err err = {0};
    FILE *f = fopen(o->dump, "w");
    if (!f) {
        fprintf(stderr, "quant-table: cannot write %s\n", o->dump);
        return 1;
    }
    dumper u = {f, o->skip, o->n_docs};
    int rc = hx_chat_each(o->heldout, 0, dump_doc, &u, &err);
    if (rc == STOP) rc = HX_OK;
    if (fclose(f) && !rc) rc = hx_err_set(&err, HX_ERR_IO, "write failed");
    if (rc) fprintf(stderr, "quant-table: %s\n", err.msg);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    opts o;
    memset(&o, 0, sizeof o);
    o.n_docs = 200;
    o.n_threads = 2;
    int first = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--heldout") && i + 1 < argc) o.heldout = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) o.n_docs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) o.n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip") && i + 1 < argc) o.skip = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) o.dump = argv[++i];
        else if (!strcmp(argv[i], "--pair") && i + 1 < argc && o.n_pairs < MAX_PAIRS)
            o.pairs[o.n_pairs++] = argv[++i];
        else if (strchr(argv[i], '=')) { first = i; break; }
        else first = argc + 1;
    }
    if (o.heldout && o.dump && o.n_docs > 0) return dump(&o);
    if (!o.heldout || first >= argc || o.n_docs < 1) {
        fprintf(stderr, "usage: quant-table --heldout FILE.jsonl [--n N] [--threads T] "
                        "[--pair A,B]... LABEL=MODEL.gguf...\n");
        return 2;
    }
    int n_models = argc - first, bad = 0;
    result *r = hx_calloc((size_t)n_models, sizeof *r);
    hx_chat_tokens t;
    memset(&t, 0, sizeof t);
    for (int i = 0; r && i < n_models; i++) {
        const char *arg = argv[first + i], *eq = strchr(arg, '=');
        snprintf(r[i].label, sizeof r[i].label, "%.*s", eq ? (int)(eq - arg) : 0, arg);
        if (i == 0)
            printf("| model | bytes | bits/weight | held-out loss | against %s (paired, ± SE) "
                   "| logits NMSE vs llama.cpp |\n|---|---:|---:|---:|---:|---:|\n",
                   r[0].label);
        bad |= row(&o, eq ? eq + 1 : arg, &t, &r[i], &r[0]);
    }
    if (r && r[0].n)
        printf("\nHeld-out loss: mean cross-entropy per assistant token over %d conversations "
               "(%zu tokens).\n\n", r[0].n, t.n_masked);
    if (r) bad |= print_pairs(&o, r, n_models);
    for (int i = 0; r && i < n_models; i++) {
        free(r[i].sum);
        free(r[i].cnt);
    }
    free(r);
    hx_chat_tokens_free(&t);
    return bad || !r;
}
