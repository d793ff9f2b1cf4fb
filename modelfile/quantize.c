/* quantize.c: hx_quantize_model (quantize.h): picks each tensor's type
 * (llama.cpp-like presets, glob overrides, block fallbacks) and streams the
 * file tensor by tensor through the GGUF writer's fill callback. */
#include "modelfile/quantize.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "modelfile/ftype_int.h"
#include "engine/engine_ext.h"

/* ---- presets ---- */
static const hx_ftype_info k_ftypes[] = {
    {"F32", HX_TYPE_F32, 0, 0, 0},      {"F16", HX_TYPE_F16, 0, 1, 0},
    {"BF16", HX_TYPE_BF16, 0, 32, 0},   {"Q8_0", HX_TYPE_Q8_0, 0, 7, 1},
    {"Q4_0", HX_TYPE_Q4_0, 0, 2, 1},    {"Q4_K", HX_TYPE_Q4_K, 0, 14, 1},
    {"Q5_K", HX_TYPE_Q5_K, 0, 16, 1},   {"Q6_K", HX_TYPE_Q6_K, 0, 18, 1},
    {"Q4_K_M", HX_TYPE_Q4_K, 1, 15, 1}, {"Q5_K_M", HX_TYPE_Q5_K, 1, 17, 1},
};

const hx_ftype_info *hx_ftype_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof k_ftypes / sizeof k_ftypes[0]; i++)
        if (!strcmp(k_ftypes[i].name, name)) return &k_ftypes[i];
    return NULL;
}

#define PRESET_NAMES "Q4_K_M Q5_K_M Q8_0 Q4_0 Q4_K Q5_K Q6_K"
#define OVERRIDE_NAMES "F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K"

static const hx_ftype_info *find_preset(const char *name)
{
    const hx_ftype_info *f = hx_ftype_find(name);
    return f && f->preset ? f : NULL;
}

int hx_quantize_ftype_number(const char *ftype)
{
    const hx_ftype_info *p = find_preset(ftype);
    return p ? p->file_type : -1;
}

hx_quantize_params hx_quantize_default_params(void)
{
    hx_quantize_params p;
    memset(&p, 0, sizeof p);
    p.ftype = "Q4_K_M";
    return p;
}

/* ---- the plan: one output type per tensor ---- */
typedef struct qz {
    const hx_quantize_params *p;
    const hx_ftype_info *pre;
    const hx_gguf *g;
    hx_threadpool *tp;
    int n_layer, n_expert, has_output;
    int *type_out; /* per input tensor */
    hx_quantize_stats *st;
    hx_err *err;
    int64_t elems_done, elems_total; /* progress */
} qz;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* Weight matrices are quantized; norms, biases, the MoE router and other
 * 1-D tensors are not (as llama.cpp). */
static int is_matrix(const hx_gguf_tensor *t)
{
    return t->n_dims >= 2 && ends_with(t->name, ".weight") &&
           !strstr(t->name, "ffn_gate_inp") && !strstr(t->name, "_norm");
}

static int layer_of(const char *name)
{
    int il = -1;
    return sscanf(name, "blk.%d.", &il) == 1 ? il : -1;
}

/* The preset's choice for a matrix, before overrides. */
static int preset_type(const qz *q, const char *name)
{
    const hx_ftype_info *pr = q->pre;
    int il = layer_of(name), base = pr->type;
    int is_output = !strcmp(name, "output.weight") ||
                    (!q->has_output && !strcmp(name, "token_embd.weight"));
    if (is_output) return base == HX_TYPE_Q8_0 ? base : HX_TYPE_Q6_K;
    if (q->n_expert == 8 && (strstr(name, "attn_v.") || strstr(name, "attn_k.")))
        return HX_TYPE_Q8_0; /* llama.cpp: cheap for 8-expert models */
    if (!pr->mix_m || il < 0) return base;
    if ((strstr(name, "attn_v.") || strstr(name, "ffn_down")) &&
        hx_ftype_more_bits(il, q->n_layer))
        return HX_TYPE_Q6_K;
    if (strstr(name, "attn_qkv."))
        return base == HX_TYPE_Q4_K ? HX_TYPE_Q5_K : HX_TYPE_Q6_K;
    if (q->n_expert == 8 && strstr(name, "attn_output.")) return HX_TYPE_Q5_K;
    return base;
}

/* Rows that do not fit the type's blocks: llama.cpp takes Q5_0/Q5_1 for
 * K-quants, which Hearth does not implement; Q8_0 is the nearest wider
 * type it has (F16 if not even 32 fits). */
static int fallback(int type, int64_t ncols, int *fell)
{
    *fell = 0;
    if (ncols % hx_type_block_elems(type) == 0) return type;
    *fell = 1;
    return ncols % HX_QK == 0 ? HX_TYPE_Q8_0 : HX_TYPE_F16;
}

static int tensor_type(qz *q, const hx_gguf_tensor *t, int *fell)
{
    *fell = 0;
    if (!is_matrix(t)) return t->type;
    int type = preset_type(q, t->name);
    for (int i = 0; i < q->p->n_overrides; i++) {
        const char *o = q->p->overrides[i], *eq = strrchr(o, '=');
        char pat[256];
        snprintf(pat, sizeof pat, "%.*s", (int)(eq - o), o);
        if (!fnmatch(pat, t->name, 0)) type = hx_ftype_single(eq + 1);
    }
    return fallback(type, t->ne[0], fell);
}

static int check_overrides(const hx_quantize_params *p, hx_err *err)
{
    for (int i = 0; i < p->n_overrides; i++) {
        const char *o = p->overrides[i], *eq = o ? strrchr(o, '=') : NULL;
        if (!eq || eq == o || eq - o >= 255 || hx_ftype_single(eq + 1) < 0)
            return hx_err_set(err, HX_ERR_INVALID,
                              "bad override '%s': want PATTERN=TYPE, TYPE one "
                              "of " OVERRIDE_NAMES, o ? o : "(null)");
    }
    return HX_OK;
}

static int arch_u32(const hx_gguf *g, const char *arch, const char *key,
                    int *out)
{
    char k[160];
    uint32_t v = 0;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int rc = hx_gguf_get_u32(g, k, &v);
    *out = rc ? 0 : (int)v;
    return rc;
}

/* Reads what the plan needs and checks the input is a model. */
static int plan(qz *q, const char *path)
{
    const char *arch = NULL;
    if (hx_gguf_get_str(q->g, "general.architecture", &arch) != HX_OK)
        return hx_err_set(q->err, HX_ERR_FORMAT,
                          "%s: not a model (no general.architecture)", path);
    arch_u32(q->g, arch, "block_count", &q->n_layer);
    arch_u32(q->g, arch, "expert_count", &q->n_expert);
    q->has_output = hx_gguf_find_tensor(q->g, "output.weight") != NULL;
    int64_t n = hx_gguf_n_tensors(q->g), n_mat = 0;
    q->type_out = hx_malloc_array((size_t)(n ? n : 1), sizeof *q->type_out);
    if (!q->type_out) return hx_err_set(q->err, HX_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(q->g, i);
        int fell;
        q->type_out[i] = tensor_type(q, t, &fell);
        q->st->n_fallback += fell;
        n_mat += is_matrix(t);
        if (is_matrix(t) && !hx_quant_supported(t->type))
            return hx_err_set(q->err, HX_ERR_UNSUPPORTED,
                              "%s: tensor %s has type %s, which Hearth cannot "
                              "read", path, t->name, hx_type_ggml_name(t->type));
    }
    if (!n_mat)
        return hx_err_set(q->err, HX_ERR_FORMAT,
                          "%s: not a model (no weight matrix)", path);
    return HX_OK;
}

/* ---- streaming ---- */
typedef struct qjob {
    qz *q;
    int64_t index; /* input tensor */
} qjob;

typedef struct rows_job {
    const hx_gguf_tensor *src;
    int type;
    void *dst;
    const float *imat;
    int64_t row0, row1, chunk; /* this slice: rows [row0, row1) */
    float *scratch; /* per thread, ncols floats */
} rows_job;

static void rows_task(void *ctx, int task, int thread)
{
    const rows_job *j = ctx;
    int64_t ncols = j->src->ne[0];
    size_t in_rb = hx_type_row_bytes(j->src->type, ncols);
    size_t out_rb = hx_type_row_bytes(j->type, ncols);
    float *x = j->scratch + (size_t)thread * (size_t)ncols;
    int64_t r0 = j->row0 + task * j->chunk;
    int64_t r1 = r0 + j->chunk < j->row1 ? r0 + j->chunk : j->row1;
    for (int64_t r = r0; r < r1; r++) {
        /* experts: row r belongs to matrix r / ne[1], with its importances */
        const float *im = j->imat ? j->imat + (r / j->src->ne[1]) * ncols : NULL;
        hx_dequantize_row(j->src->type, (const char *)j->src->data + r * in_rb, x, ncols);
        hx_quantize_row(j->type, x, (char *)j->dst + r * out_rb, ncols, im);
    }
}

/* Lets the kernel drop the input pages of [p, p + n) (the mapping is read
 * only: they come back from the file if touched again). */
static void drop_pages(const void *p, size_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(ps - 1), b = (uintptr_t)p + n;
    if (ps > 0 && b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

#define SLICE_BYTES (16u << 20) /* input read between two page drops */

/* Converts (or copies) the tensor slice by slice, dropping each slice's
 * input pages after use, so the resident input stays near SLICE_BYTES
 * even for a 300 MB embedding. */
static void convert(qz *q, rows_job *j, int copy)
{
    int64_t ncols = j->src->ne[0], nrows = j->src->nbytes / hx_type_row_bytes(j->src->type, ncols);
    size_t in_rb = hx_type_row_bytes(j->src->type, ncols);
    int64_t slice = (int64_t)(SLICE_BYTES / in_rb) > j->chunk ? (int64_t)(SLICE_BYTES / in_rb) : j->chunk;
    int drop = hx_gguf_path(q->g)[0] != 0; /* a file, not a caller's buffer */
    for (int64_t r = 0; r < nrows; r += slice) {
        j->row0 = r;
        j->row1 = r + slice < nrows ? r + slice : nrows;
        const char *in = (const char *)j->src->data + r * in_rb;
        size_t n = (size_t)(j->row1 - r) * in_rb;
        if (copy) memcpy((char *)j->dst + r * in_rb, in, n);
        else hx_threadpool_run(q->tp, (int)((j->row1 - r + j->chunk - 1) / j->chunk), rows_task, j);
        if (drop) drop_pages(in, n);
    }
}

static int fill(void *user, const hx_gguf_tensor *out, void *buf)
{
    const qjob *qj = user;
    qz *q = qj->q;
    const hx_gguf_tensor *src = hx_gguf_tensor_at(q->g, qj->index);
    if (q->p->progress)
        q->p->progress(q->p->progress_user, (int)qj->index,
                       (int)hx_gguf_n_tensors(q->g), src->name, src->type,
                       out->type, q->elems_done, q->elems_total);
    q->elems_done += src->ne[0] * src->ne[1] * src->ne[2] * src->ne[3];
    rows_job j = {src, out->type, buf, NULL, 0, 0, 16, NULL};
    if (out->type == src->type) {
        convert(q, &j, 1);
        return HX_OK;
    }
    int kq = out->type == HX_TYPE_Q4_K || out->type == HX_TYPE_Q5_K ||
             out->type == HX_TYPE_Q6_K || out->type == HX_TYPE_Q4_0 ||
             out->type == HX_TYPE_Q8_0; /* the types that use importances */
    if (q->p->imatrix && is_matrix(src) && kq)
        j.imat = hx_imatrix_find(q->p->imatrix, src->name, src->ne[0] * src->ne[2]);
    q->st->n_imatrix += j.imat != NULL;
    q->st->n_imatrix_missing += q->p->imatrix && is_matrix(src) && kq && !j.imat;
    q->st->n_requant += hx_type_block_elems(src->type) > 1;
    j.scratch = hx_malloc_array((size_t)hx_threadpool_n_threads(q->tp) * (size_t)src->ne[0],
                                sizeof(float));
    if (!j.scratch) return HX_ERR_NOMEM;
    convert(q, &j, 0);
    free(j.scratch);
    return HX_OK;
}

static void count(hx_quantize_stats *st, const hx_gguf_tensor *t, int type)
{
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    uint64_t bytes = hx_type_row_bytes(type, t->ne[0]) * (uint64_t)(n / t->ne[0]);
    st->n_tensors++;
    st->count[type]++;
    st->bytes[type] += bytes;
    st->elems[type] += n;
    st->bytes_in += t->nbytes;
    st->bytes_out += bytes;
    st->n_elems += n;
}

static int set_meta(hx_gguf_writer *w, const qz *q)
{
    int rc = hx_gguf_copy_kv(w, q->g);
    rc = rc ? rc : hx_gguf_set_u32(w, "general.file_type", (uint32_t)q->pre->file_type);
    rc = rc ? rc : hx_gguf_set_u32(w, "general.quantization_version", 2);
    if (!rc && q->p->imatrix) {
        rc = hx_gguf_set_str(w, "quantize.imatrix.file", "hearth imatrix");
        rc = rc ? rc : hx_gguf_set_i32(w, "quantize.imatrix.entries_count",
                                       hx_imatrix_n_entries(q->p->imatrix));
    }
    hx_gguf_writer_set_alignment(w, hx_gguf_alignment(q->g));
    return rc;
}

static int write_all(qz *q, hx_out *out, qjob *jobs)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    if (!w) return hx_err_set(q->err, HX_ERR_NOMEM, "out of memory");
    int rc = set_meta(w, q);
    if (rc) hx_err_set(q->err, rc, "copying metadata: %s", hx_rc_str(rc));
    for (int64_t i = 0; !rc && i < hx_gguf_n_tensors(q->g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(q->g, i);
        jobs[i].q = q;
        jobs[i].index = i;
        count(q->st, t, q->type_out[i]);
        rc = hx_gguf_add_tensor(w, t->name, q->type_out[i], t->n_dims, t->ne,
                                NULL, fill, &jobs[i]);
        if (rc) hx_err_set(q->err, rc, "adding tensor %s: %s", t->name, hx_rc_str(rc));
    }
    q->elems_total = q->st->n_elems;
    if (!rc) rc = hx_gguf_writer_write_out(w, out, q->err);
    hx_gguf_writer_free(w);
    return rc;
}

int hx_quantize_model(const char *in_path, const char *out_path,
                      const hx_quantize_params *p, hx_quantize_stats *stats,
                      hx_err *err)
{
    hx_quantize_params dp = hx_quantize_default_params();
    hx_quantize_stats st_local;
    qz q;
    memset(&q, 0, sizeof q);
    q.p = p ? p : &dp;
    q.st = stats ? stats : &st_local;
    q.err = err;
    memset(q.st, 0, sizeof *q.st);
    if (!(q.pre = find_preset(q.p->ftype)))
        return hx_err_set(err, HX_ERR_INVALID, "unknown type '%s' (" PRESET_NAMES ")",
                          q.p->ftype ? q.p->ftype : "(null)");
    int rc = check_overrides(q.p, err);
    if (rc) return rc;
    hx_gguf *g = NULL;
    hx_out out;
    const char *inputs[] = {in_path, NULL};
    if ((rc = hx_out_open(&out, out_path, inputs, 0666, err))) return rc;
    if ((rc = hx_gguf_open(in_path, &g, err))) return hx_out_end(&out, rc, err);
    q.g = g;
    qjob *jobs = NULL;
    if (!(rc = plan(&q, in_path))) {
        jobs = hx_calloc((size_t)hx_gguf_n_tensors(g) + 1, sizeof *jobs);
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        q.tp = hx_threadpool_new(q.p->n_threads > 0 ? q.p->n_threads
                                 : ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu);
        rc = jobs && q.tp ? write_all(&q, &out, jobs)
                          : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    q.st->file_bytes = out.written;
    rc = hx_out_end(&out, rc, err);
    hx_threadpool_free(q.tp);
    free(jobs);
    free(q.type_out);
    hx_gguf_close(g);
    return rc;
}
