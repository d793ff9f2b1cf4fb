/* cmd_tools.c: `hearth tools list [--json]`, `hearth tools call NAME JSON`,
 * `hearth tools add MANIFEST` and `hearth init` (writes the commented
 * default configuration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/cli.h"
#include "sandbox/sandbox.h"
#include "tools/tools.h"

static void tools_usage(FILE *f)
{
    fprintf(f, "usage: hearth tools list [--json] [--config PATH]\n"
               "       hearth tools call NAME 'JSON' [--yes | --no] [--config PATH]\n"
               "       hearth tools add MANIFEST.json [--replace]\n\n"
               "Lists the built-in and registered tools (with --json, in the OpenAI/MCP\n"
               "tool shape with their JSON Schemas), calls one with JSON arguments and\n"
               "prints its JSON result, or validates a tool manifest and installs it in\n"
               "tools.d (see the README's guide for tool authors). Broken manifests and\n"
               "schemas the grammar cannot use are reported and skipped.\n\n"
               "A call goes through the same policy as the assistant's (config.json's\n"
               "\"policy\"): where it says ask, the question comes on the terminal;\n"
               "without one the call is refused unless --yes answers it (--no refuses\n"
               "every question). Every call is recorded in the audit log. Errors go to\n"
               "stderr; the exit code says what failed (1 failure, 2 bad command line or\n"
               "arguments, 3 bad input data, 4 refused).\n");
}

/* Removes "--config PATH" from argv; returns the path or NULL. */
static const char *take_config(int *argc, char **argv)
{
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--config") || i + 1 >= *argc) continue;
        const char *p = argv[i + 1];
        for (int k = i; k + 2 <= *argc; k++) argv[k] = argv[k + 2];
        *argc -= 2;
        return p;
    }
    return NULL;
}

/* Removes flag (and alt, if not NULL) from argv; returns whether it was there. */
static int take_flag(int *argc, char **argv, const char *flag, const char *alt)
{
    int found = 0;
    for (int i = 1; i < *argc;) {
        if (strcmp(argv[i], flag) && (!alt || strcmp(argv[i], alt))) {
            i++;
            continue;
        }
        found = 1;
        for (int k = i; k + 1 <= *argc; k++) argv[k] = argv[k + 1];
        (*argc)--;
    }
    return found;
}

/* Loads the configuration and a registry with the built-in tools and the
 * registered ones (tools.d); broken registrations are reported on stderr. */
static int open_tools(const char *cfg_path, hx_config **cfg, hx_tools **reg,
                      hx_extools **x)
{
    hx_err err = {0};
    int rc = hx_config_load(cfg_path, cfg, &err);
    if (rc) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        return cli_exit_code(rc);
    }
    *reg = hx_tools_new(*cfg);
    *x = NULL;
    hx_buf problems;
    hx_buf_init(&problems);
    if (!*reg || (rc = hx_tools_register_builtins(*reg, &err)) ||
        (rc = hx_extools_load(*reg, NULL, x, &problems, &err))) {
        fprintf(stderr, "hearth: %s\n", *reg ? err.msg : "out of memory");
        hx_buf_free(&problems);
        hx_tools_free(*reg);
        hx_config_free(*cfg);
        return HX_EXIT_FAIL;
    }
    if (problems.len) {
        fprintf(stderr, "hearth: registered tools skipped:\n");
        hx_term_fputs(stderr, problems.data, 1);
    }
    hx_buf_free(&problems);
    return HX_EXIT_OK;
}

static void print_sandbox_status(void)
{
    char buf[256];
    int abi = hx_sandbox_landlock_abi();
    printf("\nregistered tools run confined: %s",
           hx_sandbox_describe(hx_sandbox_available(), buf, sizeof buf));
    if (abi) printf(" (Landlock ABI %d)", abi);
    printf(", plus PID and network namespaces where the kernel allows\n");
}

static int print_json(cJSON *j)
{
    char *s = cJSON_Print(j);
    if (!s) return HX_EXIT_FAIL;
    printf("%s\n", s);
    cJSON_free(s);
    return HX_EXIT_OK;
}

void cli_print_tools(const hx_tools *reg, int describe)
{
    hx_buf b;
    hx_buf_init(&b);
    for (int i = 0; i < hx_tools_count(reg); i++) {
        const hx_tool_def *d = hx_tools_at(reg, i);
        hx_err e;
        b.len = 0;
        hx_term_escape(&b, d->name, strlen(d->name), 0);
        printf("%-24s %-5s", b.data ? b.data : "", hx_effect_name(d->effect));
        if (describe) fputs("  ", stdout), hx_term_fputs(stdout, d->description, 0);
        putchar('\n');
        if (describe && hx_agent_schema_usable(d->schema_json, &e)) {
            printf("%-24s        unusable by the model: ", "");
            hx_term_fputs(stdout, e.msg, 0);
            putchar('\n');
        }
    }
    hx_buf_free(&b);
}

static int tools_list(hx_tools *reg, int json)
{
    if (json) {
        cJSON *l = hx_tools_list_json(reg);
        int rc = print_json(l);
        cJSON_Delete(l);
        return rc;
    }
    cli_print_tools(reg, 1);
    print_sandbox_status();
    return HX_EXIT_OK;
}

/* Validates a manifest (fields, command, schema usable by the grammar) and
 * installs it into tools.d. */
static int tools_add(const char *path, int replace)
{
    char name[96];
    hx_err e;
    int rc = hx_manifest_check(path, name, sizeof name, &e);
    char *text = NULL;
    size_t len;
    cJSON *m = NULL;
    if (!rc && !(rc = hx_read_file(path, 1 << 20, &text, &len, &e)))
        m = cJSON_Parse(text);
    const cJSON *schema = cJSON_GetObjectItem(m, "input_schema");
    if (!schema) schema = cJSON_GetObjectItem(m, "inputSchema");
    if (!schema) schema = cJSON_GetObjectItem(m, "parameters");
    char *sj = schema ? cJSON_PrintUnformatted(schema) : NULL;
    if (!rc && sj && hx_agent_schema_usable(sj, &e))
        rc = e.rc ? e.rc : HX_ERR_UNSUPPORTED;
    free(sj);
    cJSON_Delete(m);
    free(text);
    if (!rc) rc = hx_manifest_install(path, NULL, replace, &e);
    if (rc) {
        fprintf(stderr, "hearth: tools add: %s\n", e.msg);
        return cli_exit_code(rc);
    }
    printf("installed %s\n", name);
    return HX_EXIT_OK;
}

/* The user's own call: no conversation, so no taint, but the same policy,
 * consent and audit records as the assistant's calls (hx_agent_call). */
static int run_call(const hx_config *cfg, hx_tools *reg, const hx_extools *x,
                    const char *name, const cJSON *args, int yes, int no,
                    hx_call_outcome *o)
{
    hx_memory *mem = NULL;
    hx_memory_params mp = hx_memory_default_params();
    hx_err err = {0};
    if (hx_memory_open(&mp, &mem, &err))
        fprintf(stderr, "hearth: the audit trail in memory is not written: %s\n", err.msg);
    struct hx_policy *policy = NULL;
    struct hx_audit *audit = NULL;
    if (hx_gate_open(cJSON_GetObjectItem(cfg->raw, "policy"), "", &policy, &audit, &err)) {
        hx_memory_close(mem);
        fprintf(stderr, "hearth: %s\n", err.msg);
        return cli_exit_code(err.rc);
    }
    int tty = isatty(0) && isatty(2);
    struct hx_consent *c = hx_gate_consent_new(yes, no, 0, tty ? cli_ask_consent : NULL, NULL);
    hx_planner_deps d = {NULL, reg, x, policy, audit, mem, c};
    char *aj = cJSON_PrintUnformatted(args);
    if (c && aj) {
        hx_agent_call(&d, name, args, aj, 0, o);
        hx_agent_audit(&d, name, aj, o);
    }
    cJSON_free(aj);
    free(c);
    hx_gate_close(policy, audit);
    hx_memory_close(mem);
    return c && aj ? HX_EXIT_OK : HX_EXIT_FAIL;
}

static void print_call_error(const char *name, const char *detail)
{
    fputs("hearth: ", stderr);
    hx_term_fputs(stderr, name, 0);
    fputs(": ", stderr);
    hx_term_fputs(stderr, detail, 0);
    fputc('\n', stderr);
}

static int tools_call(const hx_config *cfg, hx_tools *reg, const hx_extools *x,
                      const char *name, const char *json, int yes, int no)
{
    if (!hx_tools_find(reg, name)) {
        print_call_error(name, "no such tool ('hearth tools list' shows them)");
        return HX_EXIT_USAGE;
    }
    cJSON *args = cJSON_Parse(json);
    if (!args) {
        print_call_error(name, "the arguments are not valid JSON");
        return HX_EXIT_USAGE;
    }
    hx_call_outcome o = {.status = "", .decision = "", .by = ""};
    int ex = run_call(cfg, reg, x, name, args, yes, no, &o);
    cJSON_Delete(args);
    if (!ex && o.rc) print_call_error(name, o.detail), ex = cli_exit_code(o.rc);
    else if (!ex) ex = print_json(o.result);
    cJSON_Delete(o.result);
    return ex;
}

int cmd_tools(int argc, char **argv)
{
    const char *cfg_path = take_config(&argc, argv);
    if (cli_wants_help(argc, argv)) {
        tools_usage(stdout);
        return HX_EXIT_OK;
    }
    int is_call = argc >= 2 && !strcmp(argv[1], "call");
    int yes = is_call && take_flag(&argc, argv, "--yes", "-y");
    int no = is_call && take_flag(&argc, argv, "--no", NULL);
    if (yes && no) {
        fprintf(stderr, "hearth tools call: --yes and --no contradict each other\n");
        return HX_EXIT_USAGE;
    }
    int is_list = argc >= 2 && !strcmp(argv[1], "list");
    int json = argc == 3 && !strcmp(argv[2], "--json");
    if (argc >= 3 && !strcmp(argv[1], "add")) {
        int replace = argc == 4 && !strcmp(argv[3], "--replace");
        if (argc == 3 || replace) return tools_add(argv[2], replace);
    }
    if (!(is_list && (argc == 2 || json)) &&
        !(argc == 4 && !strcmp(argv[1], "call"))) {
        tools_usage(stderr);
        return HX_EXIT_USAGE;
    }
    hx_config *cfg;
    hx_tools *reg;
    hx_extools *x;
    int rc = open_tools(cfg_path, &cfg, &reg, &x);
    if (rc) return rc;
    rc = is_list ? tools_list(reg, json) : tools_call(cfg, reg, x, argv[2], argv[3], yes, no);
    hx_tools_free(reg);
    hx_extools_free(x);
    hx_config_free(cfg);
    return rc;
}

int cmd_init(int argc, char **argv)
{
    const char *path = take_config(&argc, argv);
    if (cli_wants_help(argc, argv) || argc != 1) {
        fprintf(argc != 1 ? stderr : stdout,
                "usage: hearth init [--config PATH]\n\n"
                "Writes a commented default configuration (by default\n"
                "$XDG_CONFIG_HOME/hearth/config.json, or $HEARTH_HOME/config/config.json);\n"
                "never overwrites an existing one.\n");
        return argc != 1 ? HX_EXIT_USAGE : HX_EXIT_OK;
    }
    hx_err err = {0};
    char std[4096];
    if (!path && hx_path_config(std, sizeof std - 16) >= 0) {
        strcat(std, "/config.json");
        path = std;
    }
    int rc = hx_config_write_default(path, &err);
    if (rc) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        return cli_exit_code(rc);
    }
    printf("wrote %s\n", path);
    return HX_EXIT_OK;
}
