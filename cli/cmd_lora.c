/* cmd_lora.c: `hearth lora list|show|use|rollback|train` over the adapter
 * store (train: the nightly run now, cli/cmd_nightly.c), and the
 * --adapter FILE[:SCALE] option that ask, chat and generate share. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "lora/lora.h"

static void lora_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth lora list [--json]\n"
        "       hearth lora show NAME|FILE [--json]\n"
        "       hearth lora use NAME|FILE[:SCALE]... [--model FILE]\n"
        "       hearth lora use --none\n"
        "       hearth lora rollback\n"
        "       hearth lora train [options]   (hearth lora train --help)\n\n"
        "LoRA adapters in the store ($XDG_DATA_HOME/hearth/adapters). The\n"
        "active set (ask and chat apply it) is changed atomically; earlier\n"
        "sets are kept for rollback. `use` stores a FILE first (under its\n"
        "base name); with --model it refuses adapters of another base model.\n"
        "SCALE defaults to 1. `train` trains and adopts an adapter from your\n"
        "accepted episodes now, as hearth nightly does without waiting for an\n"
        "idle, charging device.\n");
}

/* "NAME[:SCALE]" into name and *scale; 0 ok. */
static int split_spec(const char *spec, char *name, size_t n, float *scale)
{
    const char *colon = strrchr(spec, ':');
    *scale = 1.0f;
    if (colon) {
        char *end;
        *scale = strtof(colon + 1, &end);
        if (end == colon + 1 || *end) return -1;
    }
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= n) return -1;
    memcpy(name, spec, len);
    name[len] = '\0';
    return 0;
}

int hx_cli_load_adapters(const hx_model *m, const char *const *specs, int n_specs,
                         int active, hx_adapter **ads, float *scales, int *n,
                         hx_err *err)
{
    *n = 0;
    if (n_specs > HX_ADAPTER_MAX)
        return hx_err_set(err, HX_ERR_INVALID, "at most %d adapters", HX_ADAPTER_MAX);
    for (int i = 0; i < n_specs; i++) {
        char path[4096];
        if (split_spec(specs[i], path, sizeof path, &scales[i])) {
            hx_err_set(err, HX_ERR_INVALID, "--adapter %s: expected FILE[:SCALE]", specs[i]);
            break;
        }
        if (hx_adapter_load(m, path, &ads[i], err)) break;
        (*n)++;
    }
    if (*n < n_specs) {
        for (int i = 0; i < *n; i++) hx_adapter_free(ads[i]);
        *n = 0;
        return err->rc ? err->rc : HX_ERR_INVALID;
    }
    if (n_specs || !active) return HX_OK;
    /* the active set: one that does not fit this model (another base, a
     * damaged store) is left out with a warning; the request goes on */
    hx_lora_store *s = NULL;
    int rc = hx_lora_store_open(NULL, &s, err);
    if (!rc) rc = hx_lora_store_load_active(s, m, ads, scales, n, err);
    hx_lora_store_free(s);
    if (rc) fprintf(stderr, "hearth: not applying the active adapters "
                    "(hearth lora list): %s\n", err->msg);
    return HX_OK;
}

static int fail(int rc, const hx_err *err)
{
    fprintf(stderr, "hearth lora: %s\n", err->msg[0] ? err->msg : hx_rc_str(rc));
    return hx_cli_exit_code(rc);
}

/* One stored adapter's line, or its object under --json. */
static void list_entry(hx_lora_store *s, const char *name, const hx_lora_use *act, int na,
                       cJSON *arr)
{
    char p[4352];
    struct stat st;
    hx_lora_store_path(s, name, p, sizeof p);
    int k = 0;
    while (k < na && strcmp(act[k].name, name)) k++;
    double bytes = stat(p, &st) ? 0.0 : (double)st.st_size;
    if (arr) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "file", p);
        cJSON_AddNumberToObject(o, "bytes", bytes);
        cJSON_AddBoolToObject(o, "active", k < na);
        if (k < na) cJSON_AddNumberToObject(o, "scale", act[k].scale);
        cJSON_AddItemToArray(arr, o);
        return;
    }
    printf("%c %-40s %8.1f KiB", k < na ? '*' : ' ', name, bytes / 1024.0);
    if (k < na) printf("  active, scale %g", (double)act[k].scale);
    printf("\n");
}

static int lora_list(hx_lora_store *s, int json)
{
    hx_err err = {0};
    char **names = NULL;
    int n = 0, na = 0;
    hx_lora_use act[HX_ADAPTER_MAX];
    int rc = hx_lora_store_list(s, &names, &n, &err);
    if (!rc) rc = hx_lora_store_active(s, act, &na, &err);
    if (rc) {
        hx_lora_names_free(names, n);
        return fail(rc, &err);
    }
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (n == 0 && !json) printf("no adapters in %s\n", hx_lora_store_dir(s));
    for (int i = 0; i < n; i++) list_entry(s, names[i], act, na, arr);
    hx_lora_names_free(names, n);
    return json ? hx_cli_json_out(arr) : HX_EXIT_OK;
}

/* What lora show prints, as one object. */
static int show_json(const char *p, const char *type, const char *name, const char *arch,
                     float alpha, int rank, int pairs, int64_t params, const char *base)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", p);
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "architecture", arch);
    cJSON_AddNumberToObject(o, "alpha", alpha);
    cJSON_AddNumberToObject(o, "rank", rank);
    cJSON_AddNumberToObject(o, "matrices", pairs);
    cJSON_AddNumberToObject(o, "parameters", (double)params);
    cJSON_AddStringToObject(o, "base_model", base);
    return hx_cli_json_out(o);
}

/* Shows an adapter's metadata and shape without a model. */
static int lora_show(hx_lora_store *s, const char *what, int json)
{
    char p[4352];
    struct stat st;
    if (strchr(what, '/') || stat(what, &st) == 0) snprintf(p, sizeof p, "%s", what);
    else hx_lora_store_path(s, what, p, sizeof p);
    hx_gguf *g = NULL;
    hx_err err = {0};
    int rc = hx_gguf_open(p, &g, &err);
    if (rc) return fail(rc, &err);
    const char *type = "", *arch = "", *name = "", *base = "(not recorded)";
    float alpha = 0;
    hx_gguf_get_str(g, "general.type", &type);
    hx_gguf_get_str(g, "general.architecture", &arch);
    hx_gguf_get_str(g, "general.name", &name);
    hx_gguf_get_str(g, HX_ADAPTER_BASE_KEY, &base);
    hx_gguf_get_f32(g, "adapter.lora.alpha", &alpha);
    int pairs = 0, rank = 0;
    int64_t params = 0;
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        size_t l = strlen(t->name);
        params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        if (l > 7 && !strcmp(t->name + l - 7, ".lora_a")) {
            pairs++;
            if (t->ne[1] > rank) rank = (int)t->ne[1];
        }
    }
    int adapter = !strcmp(type, "adapter"); /* type lives in g */
    if (json && adapter) show_json(p, type, name, arch, alpha, rank, pairs, params, base);
    else if (!json)
        printf("file:       %s\ntype:       %s\nname:       %s\narchitecture: %s\n"
               "alpha:      %g\nrank:       %d\nmatrices:   %d\nparameters: %lld\n"
               "base model: %s\n", p, type, name, arch, (double)alpha, rank, pairs,
               (long long)params, base);
    hx_gguf_close(g);
    if (!adapter) {
        fprintf(stderr, "hearth lora: %s is not an adapter\n", p);
        return HX_EXIT_INPUT;
    }
    return HX_EXIT_OK;
}

/* Stores a file argument under its base name unless that is stored. */
static int store_arg(hx_lora_store *s, const char *arg, char *name, size_t n,
                     hx_err *err)
{
    struct stat st;
    char p[4352];
    const char *base = strrchr(arg, '/') ? strrchr(arg, '/') + 1 : arg;
    snprintf(name, n, "%s", base);
    hx_lora_store_path(s, base, p, sizeof p);
    if (strchr(arg, '/') && stat(arg, &st) != 0) /* a path, not a stored name */
        return hx_err_set(err, HX_ERR_NOTFOUND, "%s: no such file", arg);
    if (stat(p, &st) == 0 || stat(arg, &st) != 0)
        return HX_OK; /* a stored name (use reports unknown ones) */
    return hx_lora_store_add(s, arg, base, err);
}

static int lora_use(hx_lora_store *s, int argc, char **argv)
{
    hx_lora_use u[HX_ADAPTER_MAX];
    int n = 0, none = 0;
    const char *model = NULL;
    hx_err err = {0};
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--none")) none = 1;
        else if (!strcmp(argv[i], "--model") || !strcmp(argv[i], "-m")) {
            if (++i == argc) return lora_usage(stderr), HX_EXIT_USAGE;
            model = argv[i];
        } else if (n == HX_ADAPTER_MAX || split_spec(argv[i], u[n].name,
                                                     sizeof u[n].name, &u[n].scale)) {
            fprintf(stderr, "hearth lora use: bad adapter '%s' (NAME[:SCALE], at "
                    "most %d)\n", argv[i], HX_ADAPTER_MAX);
            return HX_EXIT_USAGE;
        } else {
            char spec[4096];
            snprintf(spec, sizeof spec, "%s", u[n].name);
            int rc = store_arg(s, spec, u[n].name, sizeof u[n].name, &err);
            if (rc) return fail(rc, &err);
            n++;
        }
    }
    if (none == (n > 0)) return lora_usage(stderr), HX_EXIT_USAGE;
    if (model) {
        hx_model *m = NULL;
        hx_model_params mp = hx_model_default_params();
        mp.no_vocab = 1;
        int rc = hx_model_load(model, &mp, &m, &err);
        for (int i = 0; !rc && i < n; i++) {
            char p[4352];
            hx_adapter *a = NULL;
            hx_lora_store_path(s, u[i].name, p, sizeof p);
            rc = hx_adapter_load(m, p, &a, &err);
            hx_adapter_free(a);
        }
        hx_model_free(m);
        if (rc) return fail(rc, &err);
    }
    int rc = hx_lora_store_use(s, u, n, &err);
    if (rc) return fail(rc, &err);
    if (!n) printf("no adapter active\n");
    for (int i = 0; i < n; i++)
        printf("active: %s (scale %g)\n", u[i].name, (double)u[i].scale);
    return HX_EXIT_OK;
}

static int lora_rollback(hx_lora_store *s)
{
    hx_err err = {0};
    hx_lora_use u[HX_ADAPTER_MAX];
    int n = 0;
    int rc = hx_lora_store_rollback(s, &err);
    if (!rc) rc = hx_lora_store_active(s, u, &n, &err);
    if (rc) return fail(rc, &err);
    if (!n) printf("rolled back: no adapter active\n");
    for (int i = 0; i < n; i++)
        printf("rolled back: %s (scale %g)\n", u[i].name, (double)u[i].scale);
    return HX_EXIT_OK;
}

/* Removes a --json after the subcommand from argv; 1 if there was one. */
static int take_json(int *argc, char **argv)
{
    for (int i = 2; i < *argc; i++) {
        if (strcmp(argv[i], "--json")) continue;
        for (int k = i; k + 1 <= *argc; k++) argv[k] = argv[k + 1];
        (*argc)--;
        return 1;
    }
    return 0;
}

int hx_cmd_lora(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "train"))
        return hx_cli_nightly_run(argc - 1, argv + 1, "lora train", 1);
    int json = take_json(&argc, argv);
    if (hx_cli_wants_help(argc, argv)) return lora_usage(stdout), HX_EXIT_OK;
    if (argc < 2) return lora_usage(stderr), HX_EXIT_USAGE;
    const char *sub = argv[1];
    int known = !strcmp(sub, "list") || !strcmp(sub, "show") ||
                !strcmp(sub, "use") || !strcmp(sub, "rollback");
    if (!known) return hx_cli_bad_word("lora", "command", sub);
    if ((!strcmp(sub, "show") && argc != 3) ||
        ((!strcmp(sub, "list") || !strcmp(sub, "rollback")) && argc != 2))
        return fprintf(stderr, "hearth lora %s: wrong arguments (see 'hearth lora --help')\n",
                       sub), HX_EXIT_USAGE;
    hx_lora_store *s = NULL;
    hx_err err = {0};
    int rc = hx_lora_store_open(NULL, &s, &err);
    if (rc) return fail(rc, &err);
    int ex = !strcmp(sub, "list")  ? lora_list(s, json)
             : !strcmp(sub, "show") ? lora_show(s, argv[2], json)
             : !strcmp(sub, "use")  ? lora_use(s, argc, argv)
                                    : lora_rollback(s);
    hx_lora_store_free(s);
    return ex;
}
