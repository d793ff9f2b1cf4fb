/* cmd_tools.c: `hearth tools list [--json]`, `hearth tools call NAME JSON`,
 * `hearth tools add MANIFEST` and `hearth init` (writes the commented
 * default configuration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent_int.h"
#include "agent/cli.h"
#include "sandbox/sandbox.h"
#include "tools/tools.h"

static void tools_usage(FILE *f)
{
    fprintf(f, "usage: hearth tools list [--json] [--config PATH]\n"
               "       hearth tools call NAME 'JSON' [--config PATH]\n"
               "       hearth tools add MANIFEST.json [--replace]\n\n"
               "Lists the built-in and registered tools (with --json, in the OpenAI/MCP\n"
               "tool shape with their JSON Schemas), calls one with JSON arguments and\n"
               "prints its JSON result, or validates a tool manifest and installs it in\n"
               "tools.d (see the README's guide for tool authors). Broken manifests and\n"
               "schemas the grammar cannot use are reported and skipped. Errors go to\n"
               "stderr; the exit code says what failed (1 failure, 2 bad command line or\n"
               "arguments, 3 bad input data).\n");
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
    if (problems.len) fprintf(stderr, "hearth: registered tools skipped:\n%s", problems.data);
    hx_buf_free(&problems);
    return HX_EXIT_OK;
}

static void print_sandbox_status(void)
{
    char buf[256];
    int abi = hx_sandbox_landlock_abi();
    hx_buf sys;
    hx_buf_init(&sys);
    hx_sandbox_describe_grants(NULL, &sys);
    printf("\nregistered tools run confined: %s",
           hx_sandbox_describe(hx_sandbox_available(), buf, sizeof buf));
    if (abi) printf(" (Landlock ABI %d)", abi);
    printf("\neach also reads %s\n", sys.data ? sys.data : "");
    hx_buf_free(&sys);
}

static int print_json(cJSON *j)
{
    char *s = cJSON_Print(j);
    if (!s) return HX_EXIT_FAIL;
    printf("%s\n", s);
    cJSON_free(s);
    return HX_EXIT_OK;
}

static int tools_list(hx_tools *reg, const hx_extools *x, int json)
{
    if (json) {
        cJSON *l = hx_tools_list_json(reg);
        int rc = print_json(l);
        cJSON_Delete(l);
        return rc;
    }
    for (int i = 0; i < hx_tools_count(reg); i++) {
        const hx_tool_def *d = hx_tools_at(reg, i);
        hx_err e;
        printf("%-24s %-5s  %s\n", d->name, hx_effect_name(d->effect), d->description);
        hx_buf g;
        hx_buf_init(&g);
        if (hx_extools_describe_grants(x, d->name, &g)) printf("%-24s        %s\n", "", g.data);
        hx_buf_free(&g);
        if (hx_agent_schema_usable(d->schema_json, &e))
            printf("%-24s        unusable by the model: %s\n", "", e.msg);
    }
    print_sandbox_status();
    return HX_EXIT_OK;
}

/* Validates a manifest (fields, command, schema usable by the grammar) and
 * installs it into tools.d. */
static int tools_add(const char *path, const char *cfg_path, int replace)
{
    char name[96];
    hx_err e;
    hx_config *cfg = NULL;
    int rc = hx_config_load(cfg_path, &cfg, &e);
    if (!rc) rc = hx_manifest_check(path, cfg, name, sizeof name, &e);
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
    if (!rc) rc = hx_manifest_install(path, cfg, NULL, replace, &e);
    hx_config_free(cfg);
    if (rc) {
        fprintf(stderr, "hearth: tools add: %s\n", e.msg);
        return cli_exit_code(rc);
    }
    printf("installed %s\n", name);
    return HX_EXIT_OK;
}

static int tools_call(hx_tools *reg, const char *name, const char *json)
{
    cJSON *args = cJSON_Parse(json), *res = NULL;
    hx_err err = {0};
    if (!args) {
        fprintf(stderr, "hearth: the arguments are not valid JSON: %s\n", json);
        return HX_EXIT_USAGE;
    }
    int rc = hx_tools_call(reg, name, args, &res, &err);
    cJSON_Delete(args);
    if (rc) {
        fprintf(stderr, "hearth: %s: %s\n", name, err.msg);
        return rc == HX_ERR_NOTFOUND && !hx_tools_find(reg, name) ? HX_EXIT_USAGE
                                                                   : cli_exit_code(rc);
    }
    rc = print_json(res);
    cJSON_Delete(res);
    return rc;
}

int cmd_tools(int argc, char **argv)
{
    const char *cfg_path = take_config(&argc, argv);
    if (cli_wants_help(argc, argv)) {
        tools_usage(stdout);
        return HX_EXIT_OK;
    }
    int is_list = argc >= 2 && !strcmp(argv[1], "list");
    int json = argc == 3 && !strcmp(argv[2], "--json");
    if (argc >= 3 && !strcmp(argv[1], "add")) {
        int replace = argc == 4 && !strcmp(argv[3], "--replace");
        if (argc == 3 || replace) return tools_add(argv[2], cfg_path, replace);
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
    rc = is_list ? tools_list(reg, x, json) : tools_call(reg, argv[2], argv[3]);
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
