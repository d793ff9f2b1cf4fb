/* cli.c: helpers shared by the `hearth` verbs. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "tools/tools.h"

int hx_cli_exit_code(int rc)
{
    switch (rc) {
    case HX_OK: return HX_EXIT_OK;
    case HX_ERR_FORMAT:
    case HX_ERR_NOTFOUND: /* a file, an episode, an adapter the user named */
    case HX_ERR_UNSUPPORTED: return HX_EXIT_INPUT;
    case HX_ERR_INVALID: return HX_EXIT_USAGE;
    case HX_ERR_DENIED: return HX_EXIT_DENIED;
    case HX_ERR_CANCELLED: return HX_EXIT_CANCEL;
    default: return HX_EXIT_FAIL;
    }
}

static int file_exists(const char *p) { return p && access(p, R_OK) == 0; }

const char *hx_cli_self_path(char *buf, size_t n)
{
    ssize_t len = n > 1 ? readlink("/proc/self/exe", buf, n - 1) : -1;
    if (len <= 0) return "hearth";
    buf[len] = 0;
    return buf;
}

const char *hx_cli_default_model(char *buf, size_t n)
{
    static const char *const beside[] = {"../share/hearth/hearth-tiny.gguf",
                                          "../" CLI_DEFAULT_MODEL, "../../" CLI_DEFAULT_MODEL};
    const char *env = getenv("HEARTH_DEFAULT_MODEL");
    if (env) return *env && file_exists(env) ? env : NULL;
    if (file_exists(CLI_DEFAULT_MODEL)) return CLI_DEFAULT_MODEL;
    char exe[4096];
    char *slash = strrchr(hx_cli_self_path(exe, sizeof exe), '/');
    if (!slash) return NULL;
    *slash = 0;
    for (size_t i = 0; i < sizeof beside / sizeof *beside; i++) {
        snprintf(buf, n, "%s/%s", exe, beside[i]);
        if (file_exists(buf)) return buf;
    }
    return NULL;
}

int hx_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

int hx_cli_bad_word(const char *verb, const char *what, const char *word)
{
    fprintf(stderr, "hearth %s: unknown %s '%s' (see 'hearth %s --help')\n", verb, what,
            word ? word : "", verb);
    return HX_EXIT_USAGE;
}

int hx_cli_json_out(cJSON *j)
{
    char *s = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!s) {
        fprintf(stderr, "hearth: out of memory\n");
        return HX_EXIT_FAIL;
    }
    printf("%s\n", s);
    cJSON_free(s);
    return HX_EXIT_OK;
}

int hx_cli_parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : -1;
    if (!s || errno || end == s || !(v >= 0)) return -1;
    static const char *units[] = {"", "K", "M", "G", "T"};
    int u = -1;
    for (int i = 0; i < 5 && u < 0; i++) {
        size_t n = strlen(units[i]);
        if (!strncmp(end, units[i], n) &&
            (!end[n] || !strcmp(end + n, "B") || (i && !strcmp(end + n, "iB"))))
            u = i;
    }
    if (u < 0) return -1;
    for (int i = 0; i < u; i++) v *= 1024;
    if (v > 1.8e19) return -1;
    *out = (size_t)v;
    return 0;
}

int hx_cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    const long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int hx_cli_parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    const double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int hx_cli_opt_long(const char *verb, const char *opt, const char *s, long lo, long hi,
                    long *out)
{
    if (!hx_cli_parse_long(s, lo, hi, out)) return 0;
    fprintf(stderr, "hearth %s: %s: '%s' is not an integer in %ld..%ld\n", verb, opt,
            s ? s : "", lo, hi);
    return -1;
}

int hx_cli_opt_double(const char *verb, const char *opt, const char *s, double lo, double hi,
                      double *out)
{
    if (!hx_cli_parse_double(s, lo, hi, out)) return 0;
    fprintf(stderr, "hearth %s: %s: '%s' is not a number in %g..%g\n", verb, opt,
            s ? s : "", lo, hi);
    return -1;
}

const char *hx_cli_find_model(const char *opt, const hx_config *cfg, char *buf, size_t n)
{
    if (opt) return opt;
    if (cfg && cfg->model && *cfg->model) return cfg->model;
    return hx_cli_default_model(buf, n);
}

int hx_cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("hearth 0.1.0\n");
    return HX_EXIT_OK;
}
