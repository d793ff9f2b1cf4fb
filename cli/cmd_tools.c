/* cmd_tools.c: `hearth tools list [--json]`, `hearth tools call NAME JSON`,
 * `hearth tools add MANIFEST` and `hearth tools remove NAME`. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "sandbox/sandbox.h"
#include "tools/tools.h"

static void tools_usage(FILE *f)
{
    fprintf(f, "usage: hearth tools list [--json] [--config PATH]\n"
               "       hearth tools call NAME 'JSON' [--yes | --no] [--config PATH]\n"
               "       hearth tools add MANIFEST.json [--replace]\n"
               "       hearth tools remove NAME\n\n"
               "Lists the built-in, memory and registered tools (with --json, in the\n"
               "OpenAI/MCP tool shape with their JSON Schemas), calls one with JSON\n"
               "arguments and prints its JSON result, validates a tool manifest and\n"
               "installs it in tools.d (see the README's guide for tool authors: its\n"
               "command and folders must exist, its name must be free), or removes a\n"
               "registered tool. Broken manifests and schemas the grammar cannot use are\n"
               "reported and skipped.\n\n"
               "A call goes through the same policy as the assistant's (config.json's\n"
               "\"policy\"): where it says ask, the question comes on the terminal;\n"
               "without one the call is refused unless --yes answers it (--no refuses\n"
               "every question). Every call is recorded in the audit log. Errors go to\n"
               "stderr; the exit code says what failed (1 failure, 2 bad command line or\n"
               "unknown tool, 3 bad input: a manifest, JSON arguments, a missing folder\n"
               "or name, 4 refused).\n");
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

/* The tools every command offers: built-in, and the memory tools on mem
 * (NULL: none). */
static int base_tools(const hx_config *cfg, hx_memory *mem, hx_tools **reg, hx_err *err)
{
    *reg = hx_tools_new(cfg);
    if (!*reg) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = hx_tools_register_builtins(*reg, err);
    if (!rc && mem) rc = hx_agent_register_memory_tools(*reg, mem, err);
    return rc;
}

/* The memory database for the memory tools, or NULL (said on stderr:
 * the other tools still load). */
static hx_memory *open_memory(void)
{
    hx_memory *m = NULL;
    hx_memory_params mp = hx_memory_default_params();
    hx_err err = {0};
    if (hx_memory_open(&mp, &m, &err))
        fprintf(stderr, "hearth: the memory tools are left out: %s\n", err.msg);
    return m;
}

/* Loads the configuration and a registry with the built-in tools, the
 * memory tools and the registered ones (tools.d); broken registrations are
 * reported on stderr. */
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
                      hx_extools **x, hx_memory **mem)
{
    hx_err err = {0};
    int rc = hx_config_load(cfg_path, cfg, &err);
    if (rc) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        return hx_cli_exit_code(rc);
    }
    *x = NULL;
    *mem = open_memory();
    hx_buf problems;
    hx_buf_init(&problems);
    if ((rc = base_tools(*cfg, *mem, reg, &err)) ||
        (rc = hx_extools_load(*reg, NULL, x, &problems, &err))) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        hx_buf_free(&problems);
        hx_tools_free(*reg);
        hx_memory_close(*mem);
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

void hx_cli_print_tools(const hx_tools *reg, const hx_extools *x, int describe)
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
        b.len = 0;
        if (x && hx_extools_describe_grants(x, d->name, &b)) {
            printf("%-24s        ", "");
            hx_term_fputs(stdout, b.data, 0);
            putchar('\n');
        }
        if (describe && hx_agent_schema_usable(d->schema_json, &e)) {
            printf("%-24s        unusable by the model: ", "");
            hx_term_fputs(stdout, e.msg, 0);
            putchar('\n');
        }
    }
    hx_buf_free(&b);
}

static int tools_list(hx_tools *reg, const hx_extools *x, int json)
{
    if (json) {
        cJSON *l = hx_tools_list_json(reg);
        int rc = print_json(l);
        cJSON_Delete(l);
        return rc;
    }
    hx_cli_print_tools(reg, x, 1);
    print_sandbox_status();
    return HX_EXIT_OK;
}

/* tools.d, where registered manifests live. */
static int tools_dir(char *buf, size_t n)
{
    char cfg[PATH_MAX];
    if (hx_path_config(cfg, sizeof cfg) < 0) return -1;
    return snprintf(buf, n, "%s/tools.d", cfg) >= (int)n ? -1 : 0;
}

/* The file in tools.d other than skip whose manifest is named name, into
 * found (n bytes); 1 if there is one. */
static int registered_as(const char *name, const char *skip, char *found, size_t n)
{
    char dir[PATH_MAX], other[96];
    DIR *d = tools_dir(dir, sizeof dir) ? NULL : opendir(dir);
    struct dirent *e;
    int hit = 0;
    hx_err err;
    while (d && !hit && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        snprintf(found, n, "%s/%s", dir, e->d_name);
        hit = strcmp(found, skip) && !hx_manifest_check(found, NULL, other, sizeof other, &err) &&
              !strcmp(other, name);
    }
    if (d) closedir(d);
    return hit;
}

/* A tool named name would clash: with a built-in or memory tool (or, for
 * an MCP server, one under "name."), or with another registered manifest. */
static int name_clash(const hx_config *cfg, const char *name, hx_err *e)
{
    char dir[PATH_MAX], own[PATH_MAX + 112], other[PATH_MAX + 300];
    hx_tools *reg = NULL;
    hx_memory *mem = open_memory();
    int rc = base_tools(cfg, mem, &reg, e);
    size_t n = strlen(name);
    for (int i = 0; !rc && i < hx_tools_count(reg); i++) {
        const char *t = hx_tools_at(reg, i)->name;
        if (!strcmp(t, name) || (!strncmp(t, name, n) && t[n] == '.'))
            rc = hx_err_set(e, HX_ERR_STATE, "the name '%s' is taken by Hearth's own tool %s: "
                            "give your tool another \"name\"", name, t);
    }
    hx_tools_free(reg);
    hx_memory_close(mem);
    if (rc || tools_dir(dir, sizeof dir)) return rc;
    snprintf(own, sizeof own, "%s/%s.json", dir, name);
    if (registered_as(name, own, other, sizeof other))
        rc = hx_err_set(e, HX_ERR_STATE, "a tool named '%s' is already registered by %s: "
                        "give yours another \"name\", or 'hearth tools remove %s' first",
                        name, other, name);
    return rc;
}

/* Each of the manifest's read_paths and write_paths must be a folder or
 * file that is there: the sandbox cannot grant a path that is not. */
static int paths_exist(const cJSON *m, hx_err *e)
{
    static const char *const keys[] = {"read_paths", "write_paths"};
    struct stat st;
    for (int k = 0; k < 2; k++) {
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(m, keys[k]))
        {
            char *full = cJSON_IsString(p) ? hx_path_expand(p->valuestring, NULL) : NULL;
            int missing = full && stat(full, &st);
            if (missing)
                hx_err_set(e, HX_ERR_NOTFOUND, "%s: %s (%s) does not exist: create it "
                           "(mkdir -p %s), then add the tool again", keys[k], p->valuestring,
                           full, full);
            free(full);
            if (missing) return HX_ERR_NOTFOUND;
        }
    }
    return HX_OK;
}

/* The manifest's JSON Schema must be one the grammar can compile. */
static int schema_usable(const cJSON *m, hx_err *e)
{
    const cJSON *schema = cJSON_GetObjectItem(m, "input_schema");
    if (!schema) schema = cJSON_GetObjectItem(m, "inputSchema");
    if (!schema) schema = cJSON_GetObjectItem(m, "parameters");
    char *sj = schema ? cJSON_PrintUnformatted(schema) : NULL;
    int rc = sj && hx_agent_schema_usable(sj, e) ? (e->rc ? e->rc : HX_ERR_UNSUPPORTED) : HX_OK;
    free(sj);
    return rc;
}

/* Validates a manifest (fields, command, folders there, schema usable by
 * the grammar, name free) and installs it into tools.d. */
static int tools_add(const char *cfg_path, const char *path, int replace)
{
    char name[96];
    hx_err e;
    char *text = NULL;
    size_t len;
    cJSON *m = NULL;
    hx_config *cfg = NULL;
    int rc = hx_config_load(cfg_path, &cfg, &e);
    if (!rc) rc = hx_manifest_check(path, cfg, name, sizeof name, &e);
    if (!rc && !(rc = hx_read_file(path, 1 << 20, &text, &len, &e)))
        m = cJSON_Parse(text);
    if (!rc && !(rc = paths_exist(m, &e)) && !(rc = schema_usable(m, &e)) &&
        !(rc = name_clash(cfg, name, &e)))
        rc = hx_manifest_install(path, cfg, NULL, replace, &e);
    hx_config_free(cfg);
    cJSON_Delete(m);
    free(text);
    if (rc) {
        fprintf(stderr, "hearth tools add: %s\n", e.msg);
        return rc == HX_ERR_STATE ? HX_EXIT_INPUT : hx_cli_exit_code(rc);
    }
    printf("installed %s\n", name);
    return HX_EXIT_OK;
}

/* Removes the registered tool name: tools.d/NAME.json (broken or not), or
 * the manifest that declares that name. */
static int tools_remove(const char *name)
{
    char dir[PATH_MAX], p[PATH_MAX + 112], other[PATH_MAX + 300];
    if (tools_dir(dir, sizeof dir)) return fprintf(stderr, "hearth: path too long\n"), HX_EXIT_FAIL;
    snprintf(p, sizeof p, "%s/%s.json", dir, name);
    const char *victim = !strchr(name, '/') && !access(p, F_OK) ? p
                         : registered_as(name, "", other, sizeof other) ? other : NULL;
    if (!victim) {
        fputs("hearth tools remove: no registered tool named '", stderr);
        hx_term_fputs(stderr, name, 0);
        fprintf(stderr, "' in %s (built-in tools cannot be removed; 'hearth tools list' "
                "shows the names)\n", dir);
        return HX_EXIT_INPUT;
    }
    if (unlink(victim)) {
        fprintf(stderr, "hearth tools remove: cannot remove %s: %s\n", victim, strerror(errno));
        return HX_EXIT_FAIL;
    }
    printf("removed %s (%s)\n", name, victim);
    return HX_EXIT_OK;
}

/* The user's own call: no conversation, so no taint, but the same policy,
 * consent and audit records as the assistant's calls (hx_agent_call). */
static int run_call(const hx_config *cfg, hx_tools *reg, const hx_extools *x,
                    hx_memory *mem, const char *name, const cJSON *args, int yes, int no,
                    hx_call_outcome *o)
{
    hx_err err = {0};
    if (!mem) fprintf(stderr, "hearth: the audit trail in the memory database is not written\n");
    struct hx_policy *policy = NULL;
    struct hx_audit *audit = NULL;
    if (hx_agent_policy_open(cJSON_GetObjectItem(cfg->raw, "policy"), "", &policy, &audit, &err)) {
        fprintf(stderr, "hearth: %s\n", err.msg);
        return hx_cli_exit_code(err.rc);
    }
    int tty = isatty(0) && isatty(2);
    struct hx_consent *c = hx_consent_new(yes, no, 0, tty ? hx_cli_ask_consent : NULL, NULL);
    hx_planner_deps d = {NULL, reg, x, policy, audit, mem, c};
    char *aj = cJSON_PrintUnformatted(args);
    if (c && aj) {
        hx_agent_call(&d, name, args, aj, 0, o);
        hx_agent_audit(&d, name, aj, o);
    }
    cJSON_free(aj);
    free(c);
    hx_agent_policy_close(policy, audit);
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
                      hx_memory *mem, const char *name, const char *json, int yes, int no)
{
    if (!hx_tools_find(reg, name)) {
        print_call_error(name, "no such tool ('hearth tools list' shows them)");
        return HX_EXIT_USAGE;
    }
    cJSON *args = cJSON_Parse(json);
    if (!args) {
        print_call_error(name, "the arguments are not valid JSON");
        return HX_EXIT_INPUT;
    }
    hx_call_outcome o = {.status = "", .decision = "", .by = ""};
    int ex = run_call(cfg, reg, x, mem, name, args, yes, no, &o);
    cJSON_Delete(args);
    if (!ex && o.rc) print_call_error(name, o.detail), ex = hx_cli_exit_code(o.rc);
    else if (!ex) ex = print_json(o.result);
    cJSON_Delete(o.result);
    return ex;
}

int hx_cmd_tools(int argc, char **argv)
{
    const char *cfg_path = take_config(&argc, argv);
    if (hx_cli_wants_help(argc, argv)) {
        tools_usage(stdout);
        return HX_EXIT_OK;
    }
    const char *sub = argc >= 2 ? argv[1] : "";
    int is_call = !strcmp(sub, "call");
    int yes = is_call && take_flag(&argc, argv, "--yes", "-y");
    int no = is_call && take_flag(&argc, argv, "--no", NULL);
    if (yes && no) {
        fprintf(stderr, "hearth tools call: --yes and --no contradict each other\n");
        return HX_EXIT_USAGE;
    }
    int is_list = !strcmp(sub, "list");
    int json = argc == 3 && !strcmp(argv[2], "--json");
    int replace = argc == 4 && !strcmp(sub, "add") && !strcmp(argv[3], "--replace");
    if (!strcmp(sub, "add") && (argc == 3 || replace)) return tools_add(cfg_path, argv[2], replace);
    if (!strcmp(sub, "remove") && argc == 3) return tools_remove(argv[2]);
    if (!is_list && strcmp(sub, "call") && strcmp(sub, "add") && strcmp(sub, "remove"))
        return argc < 2 ? (tools_usage(stderr), HX_EXIT_USAGE)
                        : hx_cli_bad_word("tools", "command", sub);
    if (!(is_list && (argc == 2 || json)) && !(argc == 4 && !strcmp(sub, "call"))) {
        fprintf(stderr, "hearth tools %s: wrong arguments (see 'hearth tools --help')\n", sub);
        return HX_EXIT_USAGE;
    }
    hx_config *cfg;
    hx_tools *reg;
    hx_extools *x;
    hx_memory *mem;
    int rc = open_tools(cfg_path, &cfg, &reg, &x, &mem);
    if (rc) return rc;
    rc = is_list ? tools_list(reg, x, json) : tools_call(cfg, reg, x, mem, argv[2], argv[3], yes, no);
    hx_tools_free(reg);
    hx_extools_free(x);
    hx_memory_close(mem);
    hx_config_free(cfg);
    return rc;
}
