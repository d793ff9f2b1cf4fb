/* cmd_quantize.c: `hearth quantize`: mixed-precision quantization of a
 * GGUF model, optionally calibrated on the user's own text (imatrix). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hearth quantize IN.gguf OUT.gguf --type TYPE [options]\n\n"
            "OUT may be - (standard output) or a device; it may not be IN\n"
            "TYPE          Q4_K_M Q5_K_M (llama.cpp mixes) or Q8_0 Q4_0 Q4_K Q5_K Q6_K\n"
            "--override 'GLOB=TYPE'  type for tensors whose name matches (repeatable,\n"
            "              applied last, later wins), e.g. '*attn_output*=Q8_0';\n"
            "              TYPE one of F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K\n"
            "--imatrix FILE          importance matrix to weight the rounding error\n"
            "--calibrate FILES...    collect one by running IN over these text files\n"
            "--imatrix-out FILE      save the collected importance matrix\n"
            "--calib-special         the calibration text holds the model's control\n"
            "              tokens (<|im_start|>..., e.g. chats rendered with its\n"
            "              template): read them as such, not as plain text\n"
            "--threads N\n"
            "--json                  the result as one JSON object\n");
}

typedef struct qargs {
    const char *in, *out, *type, *imatrix, *imatrix_out;
    const char **overrides, **calib;
    int n_overrides, n_calib, threads, calib_special, json;
} qargs;

static int parse(int argc, char **argv, qargs *a)
{
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(s, "--calibrate")) {
            while (i + 1 < argc && argv[i + 1][0] != '-') a->calib[a->n_calib++] = argv[++i];
            if (!a->n_calib) return -1;
        } else if (!strcmp(s, "--calib-special")) {
            a->calib_special = 1;
        } else if (!strcmp(s, "--json")) {
            a->json = 1;
        } else if (s[0] == '-' && s[1] && !v) {
            if (strcmp(s, "--type") && strcmp(s, "--override") && strcmp(s, "--imatrix") &&
                strcmp(s, "--imatrix-out") && strcmp(s, "--threads"))
                return hx_cli_bad_word("quantize", "option", s), -2;
            return fprintf(stderr, "hearth quantize: %s needs a value\n", s), -2;
        } else if (!strcmp(s, "--type")) a->type = argv[++i];
        else if (!strcmp(s, "--override")) a->overrides[a->n_overrides++] = argv[++i];
        else if (!strcmp(s, "--imatrix")) a->imatrix = argv[++i];
        else if (!strcmp(s, "--imatrix-out")) a->imatrix_out = argv[++i];
        else if (!strcmp(s, "--threads")) {
            long n;
            if (hx_cli_opt_long("quantize", s, argv[++i], 0, 1024, &n)) return -2; /* said */
            a->threads = (int)n;
        }
        else if (s[0] == '-' && s[1]) return hx_cli_bad_word("quantize", "option", s), -2;
        else if (npos == 0) a->in = s, npos++;
        else if (npos == 1) a->out = s, npos++;
        else return -1;
    }
    if (!a->in || !a->out || !a->type) return -1;
    if (a->imatrix && a->n_calib) return -1;
    if ((a->imatrix_out || a->calib_special) && !a->n_calib) return -1;
    return 0;
}

typedef struct prog {
    hx_progress bar;
    int warned;
} prog;

static void on_tensor(void *user, int i, int n, const char *name, int tin,
                      int tout, int64_t done, int64_t total)
{
    prog *p = user;
    if (tin != tout && hx_type_block_elems(tin) > 1 && !p->warned) {
        fprintf(stderr, "hearth: quantize: warning: %s is already %s; "
                        "requantizing through F32 loses accuracy\n",
                name, hx_type_name(tin));
        p->warned = 1;
    }
    char extra[160];
    snprintf(extra, sizeof extra, "tensor %d/%d %s -> %s", i + 1, n, name,
             hx_type_name(tout));
    p->bar.total = (double)total;
    hx_progress_update(&p->bar, (double)done, extra);
}

static void on_chunk(void *user, int64_t done, int64_t total)
{
    hx_progress *bar = user;
    bar->total = (double)total;
    hx_progress_update(bar, (double)done, NULL);
}

static void print_table(FILE *f, const hx_quantize_stats *st)
{
    fprintf(f, "%-6s %8s %12s %12s %6s\n", "type", "tensors", "params", "MiB", "bpw");
    for (int t = 0; t < HX_TYPE_COUNT; t++) {
        if (!st->count[t]) continue;
        fprintf(f, "%-6s %8d %12lld %12.2f %6.2f\n", hx_type_name(t), st->count[t],
                (long long)st->elems[t], st->bytes[t] / 1048576.0,
                8.0 * (double)st->bytes[t] / (double)st->elems[t]);
    }
    fprintf(f, "%-6s %8d %12lld %12.2f %6.2f\n", "total", st->n_tensors,
            (long long)st->n_elems, st->bytes_out / 1048576.0,
            8.0 * (double)st->bytes_out / (double)st->n_elems);
    fprintf(f, "input %.2f MiB -> output file %.2f MiB", st->bytes_in / 1048576.0,
            st->file_bytes / 1048576.0);
    if (st->n_imatrix) fprintf(f, "; %d tensors with importances", st->n_imatrix);
    if (st->n_imatrix_missing)
        fprintf(f, "; %d K-quant tensors had no importances in the imatrix",
                st->n_imatrix_missing);
    if (st->n_fallback)
        fprintf(f, "; %d tensors in a wider type (rows not a multiple of the block)",
                st->n_fallback);
    fprintf(f, "\n");
}

/* OUT and --imatrix-out, checked before any work: neither an input nor
 * the other output, a folder or in a missing folder. *rep: where the
 * report goes (stderr when OUT is standard output). */
static int check_outputs(const qargs *a, FILE **rep, hx_err *e)
{
    *rep = hx_out_kind(a->out) == HX_OUT_STDOUT ? stderr : stdout;
    const char **in = hx_calloc((size_t)a->n_calib + 5, sizeof *in);
    if (!in) return hx_err_set(e, HX_ERR_NOMEM, "out of memory");
    int n = 0;
    in[n++] = a->in;
    if (a->imatrix) in[n++] = a->imatrix;
    for (int i = 0; i < a->n_calib; i++) in[n++] = a->calib[i];
    in[n] = a->imatrix_out;
    int rc = hx_out_check(a->out, in, e);
    in[n] = a->out;
    if (!rc && a->imatrix_out) rc = hx_out_check(a->imatrix_out, in, e);
    free(in);
    return rc;
}

/* The stats as one object: per output type and the totals. */
static int print_json(const char *out, const hx_quantize_stats *st)
{
    cJSON *o = cJSON_CreateObject(), *types = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "output", out);
    for (int t = 0; t < HX_TYPE_COUNT; t++) {
        if (!st->count[t]) continue;
        cJSON *e = cJSON_AddObjectToObject(types, hx_type_name(t));
        cJSON_AddNumberToObject(e, "tensors", st->count[t]);
        cJSON_AddNumberToObject(e, "params", (double)st->elems[t]);
        cJSON_AddNumberToObject(e, "bytes", (double)st->bytes[t]);
    }
    cJSON_AddItemToObject(o, "by_type", types);
    cJSON_AddNumberToObject(o, "tensors", st->n_tensors);
    cJSON_AddNumberToObject(o, "params", (double)st->n_elems);
    cJSON_AddNumberToObject(o, "bytes_in", (double)st->bytes_in);
    cJSON_AddNumberToObject(o, "bytes_out", (double)st->bytes_out);
    cJSON_AddNumberToObject(o, "file_bytes", (double)st->file_bytes);
    cJSON_AddNumberToObject(o, "bits_per_weight",
                            st->n_elems ? 8.0 * (double)st->bytes_out / (double)st->n_elems : 0);
    cJSON_AddNumberToObject(o, "with_importances", st->n_imatrix);
    cJSON_AddNumberToObject(o, "importances_missing", st->n_imatrix_missing);
    cJSON_AddNumberToObject(o, "wider_type_fallbacks", st->n_fallback);
    return hx_cli_json_out(o);
}

/* Loads --imatrix or runs --calibrate (saving to --imatrix-out). */
static int get_imatrix(const qargs *a, FILE *rep, hx_imatrix **im)
{
    hx_err e = {0};
    int rc = HX_OK;
    if (a->imatrix) rc = hx_imatrix_load(a->imatrix, im, &e);
    else if (a->n_calib) {
        hx_calib_params cp = hx_calib_default_params();
        hx_progress bar;
        hx_progress_start(&bar, "calibrating", 1);
        cp.n_threads = a->threads;
        cp.parse_special = a->calib_special;
        cp.progress = on_chunk;
        cp.progress_user = &bar;
        rc = hx_imatrix_calibrate(a->in, a->calib, a->n_calib, &cp, im, &e);
        hx_progress_finish(&bar);
        if (!rc)
            fprintf(a->json ? stderr : rep, "calibrated on %lld tokens: %d matrices\n",
                   (long long)hx_imatrix_n_tokens(*im), hx_imatrix_n_entries(*im));
        if (!rc && a->imatrix_out) rc = hx_imatrix_save(*im, a->imatrix_out, &e);
    }
    if (rc) fprintf(stderr, "hearth: quantize: %s\n", e.msg);
    return rc;
}

int hx_cmd_quantize(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        usage(stdout);
        return HX_EXIT_OK;
    }
    qargs a;
    memset(&a, 0, sizeof a);
    a.overrides = hx_calloc((size_t)argc, sizeof *a.overrides);
    a.calib = hx_calloc((size_t)argc, sizeof *a.calib);
    int code = HX_EXIT_OK;
    hx_imatrix *im = NULL;
    hx_err e = {0};
    FILE *rep = stdout;
    int bad = !a.overrides || !a.calib ? -1 : parse(argc, argv, &a);
    if (bad) {
        if (bad == -1) usage(stderr); /* -2: the option was named */
        code = HX_EXIT_USAGE;
    } else if (hx_quantize_ftype_number(a.type) < 0) {
        fprintf(stderr, "hearth: quantize: unknown type '%s' (Q4_K_M Q5_K_M "
                        "Q8_0 Q4_0 Q4_K Q5_K Q6_K)\n", a.type);
        code = HX_EXIT_USAGE;
    } else if (check_outputs(&a, &rep, &e)) {
        fprintf(stderr, "hearth: quantize: %s\n", e.msg);
        code = hx_cli_exit_code(e.rc);
    } else if (get_imatrix(&a, rep, &im)) {
        code = HX_EXIT_INPUT;
    } else {
        hx_quantize_params p = hx_quantize_default_params();
        prog pg = {{0}, 0};
        hx_quantize_stats st;
        p.ftype = a.type;
        p.overrides = a.overrides;
        p.n_overrides = a.n_overrides;
        p.imatrix = im;
        p.n_threads = a.threads;
        p.progress = on_tensor;
        p.progress_user = &pg;
        hx_progress_start(&pg.bar, "quantizing", 1);
        int rc = hx_quantize_model(a.in, a.out, &p, &st, &e);
        hx_progress_finish(&pg.bar);
        if (rc) {
            fprintf(stderr, "hearth: quantize: %s\n", e.msg);
            code = hx_cli_exit_code(rc);
        } else if (a.json) {
            code = print_json(a.out, &st);
        } else {
            print_table(rep, &st);
        }
    }
    hx_imatrix_free(im);
    free(a.overrides);
    free(a.calib);
    return code;
}
