/* cmd_model.c: `hearth model diff|patch`: model updates that ship only the
 * tensors that changed. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: hearth model diff OLD NEW -o DELTA [--json]\n"
               "       hearth model patch OLD DELTA -o NEW [--json]\n\n"
               "diff   writes a delta holding only the tensors of NEW that differ from OLD\n"
               "       (and the header bytes that changed), with both files' SHA-256\n"
               "patch  rebuilds NEW bit for bit from OLD and DELTA; refuses a delta made\n"
               "       for another base, checks the result before it replaces anything;\n"
               "       NEW may be OLD itself (replaced atomically)\n"
               "--json prints the result as one JSON object\n\n"
               "An output that is an input is refused; a device or - (standard output)\n"
               "is written through; a link's file is replaced, the link kept.\n");
}

/* Finds "-o FILE", --json and the two positional arguments. */
static int parse(int argc, char **argv, const char **a, const char **b, const char **o,
                 int *json)
{
    int n = 0;
    *a = *b = *o = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) *o = argv[++i];
        else if (!strcmp(argv[i], "--json")) *json = 1;
        else if (argv[i][0] == '-') return -1;
        else if (n == 0) *a = argv[i], n++;
        else if (n == 1) *b = argv[i], n++;
        else return -1;
    }
    return *a && *b && *o ? 0 : -1;
}

static int do_diff(const char *old, const char *new_path, const char *out, int json)
{
    hx_delta_stats st;
    hx_err e;
    FILE *rep = hx_out_kind(out) == HX_OUT_STDOUT ? stderr : stdout;
    int rc = hx_model_diff(old, new_path, out, &st, &e);
    if (rc) {
        fprintf(stderr, "hearth: model diff: %s\n", e.msg);
        return hx_cli_exit_code(rc);
    }
    if (!json) {
        fprintf(rep, "%d of %d tensors changed (%.1f MiB), header bytes %llu; delta %s: %.1f MiB\n",
                st.n_changed, st.n_tensors, st.changed_bytes / 1048576.0,
                (unsigned long long)st.header_bytes, out, st.delta_bytes / 1048576.0);
        return HX_EXIT_OK;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "delta", out);
    cJSON_AddNumberToObject(j, "tensors", st.n_tensors);
    cJSON_AddNumberToObject(j, "changed", st.n_changed);
    cJSON_AddNumberToObject(j, "changed_bytes", (double)st.changed_bytes);
    cJSON_AddNumberToObject(j, "header_bytes", (double)st.header_bytes);
    cJSON_AddNumberToObject(j, "delta_bytes", (double)st.delta_bytes);
    return hx_cli_json_out(j);
}

static int do_patch(const char *old, const char *delta, const char *out, int json)
{
    hx_err e;
    FILE *rep = hx_out_kind(out) == HX_OUT_STDOUT ? stderr : stdout;
    int rc = hx_model_patch(old, delta, out, &e);
    if (rc) {
        fprintf(stderr, "hearth: model patch: %s\n", e.msg);
        return hx_cli_exit_code(rc);
    }
    if (!json) return fprintf(rep, "%s rebuilt and verified\n", out), HX_EXIT_OK;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "output", out);
    cJSON_AddBoolToObject(j, "verified", 1);
    return hx_cli_json_out(j);
}

int hx_cmd_model(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        usage(stdout);
        return HX_EXIT_OK;
    }
    const char *a, *b, *o;
    int json = 0;
    if (argc < 2) return usage(stderr), HX_EXIT_USAGE;
    if (strcmp(argv[1], "diff") && strcmp(argv[1], "patch"))
        return hx_cli_bad_word("model", "command", argv[1]);
    if (parse(argc, argv, &a, &b, &o, &json)) {
        fprintf(stderr, "hearth model %s: needs OLD %s -o OUT (see 'hearth model --help')\n",
                argv[1], strcmp(argv[1], "diff") ? "DELTA" : "NEW");
        return HX_EXIT_USAGE;
    }
    return !strcmp(argv[1], "diff") ? do_diff(a, b, o, json) : do_patch(a, b, o, json);
}
