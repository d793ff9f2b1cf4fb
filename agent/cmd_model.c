/* cmd_model.c: `hearth model diff|patch`: model updates that ship only the
 * tensors that changed. */
#include <stdio.h>
#include <string.h>

#include "agent/cli.h"
#include "engine/engine.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: hearth model diff OLD NEW -o DELTA\n"
               "       hearth model patch OLD DELTA -o NEW\n\n"
               "diff   writes a delta holding only the tensors of NEW that differ from OLD\n"
               "       (and the header bytes that changed), with both files' SHA-256\n"
               "patch  rebuilds NEW bit for bit from OLD and DELTA; refuses a delta made\n"
               "       for another base, checks the result before it replaces anything;\n"
               "       NEW may be OLD itself (replaced atomically)\n\n"
               "An output that is an input is refused; a device or - (standard output)\n"
               "is written through; a link's file is replaced, the link kept.\n");
}

/* Finds "-o FILE" and the two positional arguments. */
static int parse(int argc, char **argv, const char **a, const char **b, const char **o)
{
    int n = 0;
    *a = *b = *o = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) *o = argv[++i];
        else if (argv[i][0] == '-') return -1;
        else if (n == 0) *a = argv[i], n++;
        else if (n == 1) *b = argv[i], n++;
        else return -1;
    }
    return *a && *b && *o ? 0 : -1;
}

static int do_diff(const char *old, const char *new_path, const char *out)
{
    hx_delta_stats st;
    hx_err e;
    FILE *rep = hx_out_kind(out) == HX_OUT_STDOUT ? stderr : stdout;
    int rc = hx_model_diff(old, new_path, out, &st, &e);
    if (rc) {
        fprintf(stderr, "hearth: model diff: %s\n", e.msg);
        return cli_exit_code(rc);
    }
    fprintf(rep, "%d of %d tensors changed (%.1f MiB), header bytes %llu; delta %s: %.1f MiB\n",
            st.n_changed, st.n_tensors, st.changed_bytes / 1048576.0,
            (unsigned long long)st.header_bytes, out, st.delta_bytes / 1048576.0);
    return HX_EXIT_OK;
}

static int do_patch(const char *old, const char *delta, const char *out)
{
    hx_err e;
    FILE *rep = hx_out_kind(out) == HX_OUT_STDOUT ? stderr : stdout;
    int rc = hx_model_patch(old, delta, out, &e);
    if (rc) {
        fprintf(stderr, "hearth: model patch: %s\n", e.msg);
        return cli_exit_code(rc);
    }
    fprintf(rep, "%s rebuilt and verified\n", out);
    return HX_EXIT_OK;
}

int cmd_model(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return HX_EXIT_OK;
    }
    const char *a, *b, *o;
    if (argc < 2 || parse(argc, argv, &a, &b, &o)) {
        usage(stderr);
        return HX_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "diff")) return do_diff(a, b, o);
    if (!strcmp(argv[1], "patch")) return do_patch(a, b, o);
    usage(stderr);
    return HX_EXIT_USAGE;
}
