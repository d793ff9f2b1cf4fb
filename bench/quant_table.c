/* quant_table.c: what quantization costs a model that was trained for the
 * agent: for each GGUF given, its size, bits per weight, the held-out
 * loss on the assistant's tokens of generated conversations (computed by
 * the engine, as inference sees it) and the NMSE of its logits against
 * llama.cpp's on the same file. scripts/quant-table.sh adds the agent
 * evaluation and writes the table into bench/README.md.
 *
 * usage: quant-table --heldout FILE.jsonl [--n N] [--threads T] LABEL=MODEL...
 *        quant-table --heldout FILE.jsonl --skip K --n N --dump OUT.txt
 * (the second writes conversations K..K+N-1 as the model reads them: the
 * calibration text for hearth quantize --calibrate) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/agent_int.h"
#include "agent/chatdata.h"
#include "tests/ref/ref.h"

#define STOP (-1) /* a callback's "enough": not an hx_rc */

typedef struct opts {
    const char *heldout, *dump;
    int n_docs, n_threads, skip;
} opts;

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

/* Cross-entropy of token y under logits z (V). */
static double xent(const float *z, int V, int y)
{
    float mx = z[0];
    for (int i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
    double s = 0;
    for (int i = 0; i < V; i++) s += exp((double)(z[i] - mx));
    return mx + log(s) - z[y];
}

/* Mean loss over the masked tokens of every document, by the engine. */
static int heldout_loss(hx_model *m, const hx_chat_tokens *t, int n_threads, double *loss,
                        hx_err *err)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 4096;
    cp.n_threads = n_threads;
    cp.kv_f32 = 1;
    hx_ctx *c = NULL;
    int rc = hx_ctx_new(m, &cp, &c, err);
    const int V = hx_vocab_n_tokens(hx_model_vocab(m));
    double sum = 0;
    long cnt = 0;
    for (size_t s = 0; !rc && s < t->n;) {
        size_t e = s;
        while (e < t->n && t->doc[e] == t->doc[s]) e++;
        const int n = (int)(e - s) < cp.n_ctx ? (int)(e - s) : cp.n_ctx;
        hx_ctx_truncate(c, 0);
        if (hx_decode(c, t->tokens + s, n, 1))
            rc = hx_err_set(err, HX_ERR_STATE, "decode: %s", hx_ctx_errmsg(c));
        for (int i = 1; !rc && i < n; i++)
            if (t->mask[s + i]) sum += xent(hx_ctx_logits(c, i - 1), V, t->tokens[s + i]), cnt++;
        s = e;
    }
    hx_ctx_free(c);
    *loss = cnt ? sum / (double)cnt : NAN;
    return rc;
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
    double num = 0, den = 0;
    if (hx_ctx_new(m, &cp, &c, &err) == HX_OK && hx_decode(c, ids, n, 1) == HX_OK)
        for (int i = 0; i < n; i++) {
            const float *z = hx_ctx_logits(c, i), *r = ref + (size_t)i * V;
            for (int k = 0; k < V; k++) {
                num += ((double)z[k] - r[k]) * ((double)z[k] - r[k]);
                den += (double)r[k] * r[k];
            }
        }
    else snprintf(why, wn, "engine: %s", err.msg);
    hx_ctx_free(c);
    free(ref);
    return den > 0 ? num / den : -1;
}

static int row(const opts *o, const char *label, const char *path, hx_chat_tokens *t)
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
    double loss = NAN;
    if (!rc) rc = heldout_loss(m, t, o->n_threads, &loss, &err);
    char why[512] = "";
    const int n_ref = t->n < 96 ? (int)t->n : 96;
    const double nmse = rc ? -1 : llama_nmse(m, path, t->tokens, n_ref, why, sizeof why);
    if (rc) fprintf(stderr, "quant-table: %s: %s\n", path, err.msg);
    else if (nmse < 0) printf("| %s | %.0f | %.2f | %.4f | not checked (%s) |\n", label, bytes,
                              bits_per_weight(m, bytes), loss, why);
    else printf("| %s | %.0f | %.2f | %.4f | %.2e |\n", label, bytes, bits_per_weight(m, bytes),
                loss, nmse);
    fflush(stdout);
    hx_model_free(m);
    return rc ? 1 : 0;
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
    opts o = {NULL, NULL, 200, 2, 0};
    int first = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--heldout") && i + 1 < argc) o.heldout = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) o.n_docs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) o.n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--skip") && i + 1 < argc) o.skip = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) o.dump = argv[++i];
        else if (strchr(argv[i], '=')) { first = i; break; }
        else first = argc + 1;
    }
    if (o.heldout && o.dump && o.n_docs > 0) return dump(&o);
    if (!o.heldout || first >= argc || o.n_docs < 1) {
        fprintf(stderr, "usage: quant-table --heldout FILE.jsonl [--n N] [--threads T] "
                        "LABEL=MODEL.gguf...\n");
        return 2;
    }
    printf("| model | bytes | bits/weight | held-out loss (%d conversations) | logits NMSE "
           "vs llama.cpp |\n|---|---:|---:|---:|---:|\n", o.n_docs);
    hx_chat_tokens t;
    memset(&t, 0, sizeof t);
    int bad = 0;
    for (int i = first; i < argc; i++) {
        char label[256];
        const char *eq = strchr(argv[i], '=');
        snprintf(label, sizeof label, "%.*s", eq ? (int)(eq - argv[i]) : 0, argv[i]);
        bad |= row(&o, label, eq ? eq + 1 : argv[i], &t);
    }
    hx_chat_tokens_free(&t);
    return bad;
}
