/* imatrix.c: importance matrices (quantize.h): collected through the
 * forward pass's act_hook over calibration text, saved and loaded as
 * versioned GGUF files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "modelfile/quantize.h"

/* One weight: n_cols importances, or for a 3-D MoE expert tensor n_exp
 * blocks of ne[0] (expert e's matrix at e * ne[0]), n_cols = ne[0]*n_exp. */
typedef struct im_entry {
    char *name;
    int64_t n_cols;
    double *sum2;  /* collecting: sums of squares; loaded: unused */
    float *mean;   /* mean of squares (filled on save/load) */
    int64_t count; /* tokens seen (for experts: routed tokens, all experts) */
    int n_exp;     /* collecting: experts (0: a plain matrix) */
    int64_t *ecount; /* collecting, experts: tokens routed to each */
} im_entry;

struct hx_imatrix {
    im_entry *e;
    int n, cap;
    int64_t n_tokens, n_chunks;
    uint64_t dataset_bytes;
    char **datasets;
    int n_datasets;
};

void hx_imatrix_free(hx_imatrix *m)
{
    if (!m) return;
    for (int i = 0; i < m->n; i++) {
        free(m->e[i].name);
        free(m->e[i].sum2);
        free(m->e[i].mean);
        free(m->e[i].ecount);
    }
    for (int i = 0; i < m->n_datasets; i++) free(m->datasets[i]);
    free(m->datasets);
    free(m->e);
    free(m);
}

static im_entry *find(const hx_imatrix *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].name, name)) return &m->e[i];
    return NULL;
}

const float *hx_imatrix_find(const hx_imatrix *m, const char *tensor,
                             int64_t n_cols)
{
    const im_entry *e = m ? find(m, tensor) : NULL;
    return e && e->n_cols == n_cols ? e->mean : NULL;
}

int hx_imatrix_n_entries(const hx_imatrix *m) { return m ? m->n : 0; }
int64_t hx_imatrix_n_tokens(const hx_imatrix *m) { return m ? m->n_tokens : 0; }

static im_entry *add_entry(hx_imatrix *m, const char *name, int64_t n_cols)
{
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        im_entry *e = hx_realloc(m->e, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        m->e = e;
        m->cap = cap;
    }
    im_entry *e = &m->e[m->n];
    memset(e, 0, sizeof *e);
    e->name = hx_strdup(name);
    e->n_cols = n_cols;
    e->mean = hx_calloc((size_t)n_cols, sizeof *e->mean);
    if (!e->name || !e->mean) {
        free(e->name);
        free(e->mean);
        return NULL;
    }
    m->n++;
    return e;
}

/* ---- collection ---- */
typedef struct collector {
    hx_imatrix *m;
    int n_expert; /* the model's */
    int failed;   /* out of memory or inconsistent widths */
} collector;

/* The entry of a tensor, created on first sight. */
static im_entry *entry_for(collector *c, const char *tensor, int expert,
                           int64_t n_cols)
{
    int n_exp = expert >= 0 ? c->n_expert : 0;
    int64_t width = n_cols * (n_exp ? n_exp : 1);
    im_entry *e = find(c->m, tensor);
    if (!e) {
        if (!(e = add_entry(c->m, tensor, width))) return NULL;
        e->n_exp = n_exp;
        e->sum2 = hx_calloc((size_t)width, sizeof *e->sum2);
        e->ecount = n_exp ? hx_calloc((size_t)n_exp, sizeof *e->ecount) : NULL;
        if (!e->sum2 || (n_exp && !e->ecount)) return NULL;
    }
    if (e->n_cols != width || e->n_exp != n_exp || expert >= c->n_expert) return NULL;
    return e;
}

static void on_act(void *user, const char *tensor, int expert,
                   const float *x, int n_tokens, int64_t n_cols)
{
    collector *c = user;
    im_entry *e = entry_for(c, tensor, expert, n_cols);
    if (!e) {
        c->failed = 1;
        return;
    }
    double *s = e->sum2 + (expert > 0 ? (size_t)expert * (size_t)n_cols : 0);
    for (int t = 0; t < n_tokens; t++)
        for (int64_t j = 0; j < n_cols; j++) {
            double v = x[(size_t)t * (size_t)n_cols + (size_t)j];
            s[j] += v * v;
        }
    e->count += n_tokens;
    if (expert >= 0) e->ecount[expert] += n_tokens;
}

hx_calib_params hx_calib_default_params(void)
{
    hx_calib_params p;
    memset(&p, 0, sizeof p);
    p.n_chunk = 512;
    return p;
}

/* Appends the tokens of one file to *ids (special: control tokens in the
 * text are recognised). */
static int tokenize_file(const hx_vocab *v, const char *path, int special,
                         int32_t **ids, int64_t *n, hx_imatrix *m, hx_err *err)
{
    char *text = NULL;
    size_t len = 0;
    hx_err e = {0};
    int rc = hx_read_file(path, 0, &text, &len, &e);
    if (rc) return hx_err_wrap(err, &e, path);
    int32_t need = -hx_tokenize(v, text, len, NULL, 0, 0, special);
    int32_t *p = need > 0 ? hx_realloc(*ids, (size_t)(*n + need) * sizeof **ids) : *ids;
    if (need > 0 && p) {
        *ids = p;
        *n += hx_tokenize(v, text, len, p + *n, need, 0, special);
    }
    free(text);
    if (need > 0 && !p) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    m->dataset_bytes += len;
    char **d = hx_realloc(m->datasets, (size_t)(m->n_datasets + 1) * sizeof *d);
    if (!d || !(d[m->n_datasets] = hx_strdup(path)))
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    m->datasets = d;
    m->n_datasets++;
    return HX_OK;
}

/* Logits floats one decode call of calibration may keep (64 MiB). */
#define CALIB_LOGITS (16 << 20)

/* Runs the chunks of ids through a context hooked to the collector. Every
 * position's logits are computed, so the output head sees every token like
 * the other matrices (in calls of at most CALIB_LOGITS / n_vocab tokens,
 * continuing the chunk in the cache, to bound the logits buffer). */
static int run_chunks(hx_model *model, const int32_t *ids, int64_t n,
                      const hx_calib_params *p, collector *col, hx_err *err)
{
    int chunk = p->n_chunk > 0 ? p->n_chunk : 512;
    int64_t nv = hx_model_hparams(model)->n_vocab;
    int sub = nv > 0 && CALIB_LOGITS / nv < chunk ? (int)(CALIB_LOGITS / nv) : chunk;
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = chunk;
    cp.n_threads = p->n_threads;
    cp.act_hook = on_act;
    cp.act_hook_user = col;
    hx_ctx *c = NULL;
    int rc = hx_ctx_new(model, &cp, &c, err);
    for (int64_t at = 0; !rc && at < n; at += chunk) {
        int len = n - at < chunk ? (int)(n - at) : chunk;
        hx_ctx_truncate(c, 0);
        for (int k = 0; !rc && k < len; k += sub)
            if ((rc = hx_decode(c, ids + at + k, len - k < sub ? len - k : sub, 1)))
                hx_err_set(err, rc, "calibration: %s", hx_ctx_errmsg(c));
        col->m->n_chunks++;
        col->m->n_tokens += len;
        if (!rc && col->failed)
            rc = hx_err_set(err, HX_ERR_NOMEM, "calibration: out of memory "
                            "or inconsistent matrix widths");
        if (!rc && p->progress) p->progress(p->progress_user, at + len, n);
    }
    hx_ctx_free(c);
    return rc;
}

/* Means of the entries that saw every token (experts: per expert; one
 * that got no token has importances 1, no preference); the others (none
 * in a full run) are dropped. */
static void finish_means(hx_imatrix *m)
{
    int k = 0;
    for (int i = 0; i < m->n; i++) {
        im_entry *e = &m->e[i];
        if (!e->n_exp && e->count != m->n_tokens) {
            free(e->name);
            free(e->sum2);
            free(e->mean);
            free(e->ecount);
            continue;
        }
        int nb = e->n_exp ? e->n_exp : 1;
        int64_t w = e->n_cols / nb;
        for (int b = 0; b < nb; b++) {
            int64_t n = e->n_exp ? e->ecount[b] : e->count;
            for (int64_t j = b * w; j < (b + 1) * w; j++)
                e->mean[j] = n ? (float)(e->sum2[j] / (double)n) : 1.0f;
        }
        m->e[k++] = *e;
    }
    m->n = k;
}

int hx_imatrix_calibrate(const char *model_path, const char *const *files,
                         int n_files, const hx_calib_params *params,
                         hx_imatrix **out, hx_err *err)
{
    hx_calib_params dp = hx_calib_default_params();
    const hx_calib_params *p = params ? params : &dp;
    *out = NULL;
    hx_model *model = NULL;
    int rc = hx_model_load(model_path, NULL, &model, err);
    if (rc) return rc;
    hx_imatrix *m = hx_calloc(1, sizeof *m);
    collector col = {m, hx_model_hparams(model)->n_expert, 0};
    int32_t *ids = NULL;
    int64_t n = 0;
    if (!m) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    else if (!hx_model_vocab(model))
        rc = hx_err_set(err, HX_ERR_INVALID, "%s: the model has no tokenizer "
                        "to read calibration text with", model_path);
    for (int i = 0; !rc && i < n_files; i++)
        rc = tokenize_file(hx_model_vocab(model), files[i], p->parse_special,
                           &ids, &n, m, err);
    if (!rc && n < 1)
        rc = hx_err_set(err, HX_ERR_INVALID, "no calibration text (0 tokens)");
    if (!rc) rc = run_chunks(model, ids, n, p, &col, err);
    if (!rc) finish_means(m);
    free(ids);
    hx_model_free(model);
    if (rc) hx_imatrix_free(m);
    else *out = m;
    return rc;
}

/* ---- file ---- */
int hx_imatrix_save(const hx_imatrix *m, const char *path, hx_err *err)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    uint64_t *counts = hx_malloc_array((size_t)m->n + 1, sizeof *counts);
    int rc = w && counts ? HX_OK : HX_ERR_NOMEM;
    for (int i = 0; counts && i < m->n; i++) counts[i] = (uint64_t)m->e[i].count;
    rc = rc ? rc : hx_gguf_set_str(w, "general.type", "imatrix");
    rc = rc ? rc : hx_gguf_set_u32(w, "hearth.imatrix.version", HX_IMATRIX_VERSION);
    rc = rc ? rc : hx_gguf_set_u64(w, "hearth.imatrix.n_tokens", (uint64_t)m->n_tokens);
    rc = rc ? rc : hx_gguf_set_u64(w, "hearth.imatrix.n_chunks", (uint64_t)m->n_chunks);
    rc = rc ? rc : hx_gguf_set_u64(w, "hearth.imatrix.dataset_bytes", m->dataset_bytes);
    rc = rc ? rc : hx_gguf_set_arr_str(w, "hearth.imatrix.datasets",
                                       (const char *const *)m->datasets, NULL,
                                       (uint64_t)m->n_datasets);
    rc = rc ? rc : hx_gguf_set_arr(w, "hearth.imatrix.counts", HX_GGUF_U64,
                                   counts, (uint64_t)m->n);
    for (int i = 0; !rc && i < m->n; i++)
        rc = hx_gguf_add_tensor(w, m->e[i].name, HX_TYPE_F32, 1, &m->e[i].n_cols,
                                m->e[i].mean, NULL, NULL);
    if (rc) hx_err_set(err, rc, "%s: %s", path, hx_rc_str(rc));
    else rc = hx_gguf_writer_write(w, path, err);
    hx_gguf_writer_free(w);
    free(counts);
    return rc;
}

static void load_meta(hx_imatrix *m, const hx_gguf *g)
{
    int64_t v;
    if (!hx_gguf_get_i64(g, "hearth.imatrix.n_tokens", &v)) m->n_tokens = v;
    if (!hx_gguf_get_i64(g, "hearth.imatrix.n_chunks", &v)) m->n_chunks = v;
    if (!hx_gguf_get_i64(g, "hearth.imatrix.dataset_bytes", &v))
        m->dataset_bytes = (uint64_t)v;
}

static int load_entries(hx_imatrix *m, const hx_gguf *g, const char *path,
                        hx_err *err)
{
    int et = 0;
    uint64_t nc = 0;
    int has_counts = !hx_gguf_get_arr(g, "hearth.imatrix.counts", &et, &nc) &&
                     nc == (uint64_t)hx_gguf_n_tensors(g);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        if (t->type != HX_TYPE_F32 || t->n_dims != 1)
            return hx_err_set(err, HX_ERR_FORMAT, "%s: entry %s is not a 1-D "
                              "F32 tensor", path, t->name);
        im_entry *e = add_entry(m, t->name, t->ne[0]);
        if (!e) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        memcpy(e->mean, t->data, (size_t)t->ne[0] * sizeof(float));
        e->count = has_counts ? hx_gguf_arr_i64(g, "hearth.imatrix.counts", (uint64_t)i) : 0;
    }
    return HX_OK;
}

int hx_imatrix_load(const char *path, hx_imatrix **out, hx_err *err)
{
    *out = NULL;
    hx_gguf *g = NULL;
    int rc = hx_gguf_open(path, &g, err);
    if (rc) return rc;
    const char *type = NULL;
    uint32_t ver = 0;
    if (hx_gguf_get_str(g, "general.type", &type) || strcmp(type, "imatrix") ||
        hx_gguf_get_u32(g, "hearth.imatrix.version", &ver))
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s: not a Hearth imatrix file "
                        "(no general.type = imatrix and hearth.imatrix.version)",
                        path);
    else if (ver != HX_IMATRIX_VERSION)
        rc = hx_err_set(err, HX_ERR_UNSUPPORTED, "%s: imatrix version %u; this "
                        "Hearth reads version %d", path, ver, HX_IMATRIX_VERSION);
    hx_imatrix *m = rc ? NULL : hx_calloc(1, sizeof *m);
    if (!rc && !m) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!rc) load_meta(m, g);
    if (!rc) rc = load_entries(m, g, path, err);
    hx_gguf_close(g);
    if (rc) hx_imatrix_free(m);
    else *out = m;
    return rc;
}
