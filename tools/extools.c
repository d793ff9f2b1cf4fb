/* extools.c: tools registered by manifests in tools.d: validating and
 * installing manifests, and running plain command tools in the sandbox
 * (JSON arguments on stdin, a JSON object on stdout). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/ext_int.h"

#define MAX_MANIFEST_BYTES (256u << 10)

/* ---- parsing ---- */

static void manifest_free(ext_manifest *m)
{
    if (!m) return;
    free(m->description);
    free(m->schema_json);
    for (char **a = m->command; a && *a; a++) free(*a);
    free(m->command);
    free(m->exe_dir);
    for (int i = 0; i < m->n_read; i++) free(m->read_paths[i]);
    for (int i = 0; i < m->n_write; i++) free(m->write_paths[i]);
    free(m);
}

static int valid_name(const char *s)
{
    if (!*s || strlen(s) > 64 || !isalpha((unsigned char)*s)) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-", *s)) return 0;
    return 1;
}

/* "~/x" -> $HOME/x; other paths must be absolute. */
static char *expand_path(const char *p)
{
    if (p[0] == '~' && (p[1] == '/' || !p[1])) {
        const char *home = getenv("HOME");
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s%s", home ? home : "", p + 1);
        return hx_strdup(buf);
    }
    return p[0] == '/' ? hx_strdup(p) : NULL;
}

static int parse_paths(const cJSON *arr, const char *field, char **out, int *n,
                       hx_err *err)
{
    if (!arr) return HX_OK;
    if (!cJSON_IsArray(arr))
        return hx_err_set(err, HX_ERR_FORMAT, "%s: expected an array of paths", field);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if (*n == HX_SANDBOX_MAX_PATHS)
            return hx_err_set(err, HX_ERR_RANGE, "%s: at most %d paths", field,
                              HX_SANDBOX_MAX_PATHS);
        if (!cJSON_IsString(it) || !(out[*n] = expand_path(it->valuestring)))
            return hx_err_set(err, HX_ERR_FORMAT,
                              "%s: each path must be absolute or start with ~/", field);
        (*n)++;
    }
    return HX_OK;
}

static int parse_command(const cJSON *cmd, const char *field, ext_manifest *m,
                         hx_err *err)
{
    int n = cJSON_IsArray(cmd) ? cJSON_GetArraySize(cmd) : cJSON_IsString(cmd) ? 1 : 0;
    if (!n || n > 64)
        return hx_err_set(err, HX_ERR_FORMAT, "%s: expected a command (an array of strings)", field);
    m->command = calloc((size_t)n + 1, sizeof *m->command);
    if (!m->command) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_IsArray(cmd) ? cJSON_GetArrayItem(cmd, i) : cmd;
        if (!cJSON_IsString(a) || !a->valuestring[0])
            return hx_err_set(err, HX_ERR_FORMAT, "%s[%d]: expected a non-empty string", field, i);
        /* "~/..." in any argument is the user's home, like in the paths */
        const char *v = a->valuestring;
        m->command[i] = v[0] == '~' && v[1] == '/' ? expand_path(v) : hx_strdup(v);
    }
    char *exe = expand_path(m->command[0]);
    if (!exe || access(exe, X_OK)) {
        free(exe);
        return hx_err_set(err, HX_ERR_NOTFOUND,
                          "%s: '%s' is not an executable file (give an absolute path)",
                          field, m->command[0]);
    }
    free(m->command[0]);
    m->command[0] = exe;
    m->exe_dir = hx_strdup(exe);
    *strrchr(m->exe_dir, '/') = '\0';
    if (!m->exe_dir[0]) strcpy(m->exe_dir, "/");
    return HX_OK;
}

static int parse_effect(const cJSON *v, ext_manifest *m, hx_err *err)
{
    static const char *const names[] = {"read", "write", "send"};
    for (int i = 0; i < 3 && cJSON_IsString(v); i++)
        if (!strcmp(v->valuestring, names[i])) return m->effect = i, HX_OK;
    return hx_err_set(err, HX_ERR_FORMAT, "effect: expected \"read\", \"write\" or \"send\"");
}

static int parse_schema(const cJSON *root, ext_manifest *m, hx_err *err)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "input_schema");
    if (!s) s = cJSON_GetObjectItemCaseSensitive(root, "inputSchema");
    if (!s) s = cJSON_GetObjectItemCaseSensitive(root, "parameters");
    if (!cJSON_IsObject(s))
        return hx_err_set(err, HX_ERR_FORMAT, "input_schema: expected a JSON Schema object");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "object"))
        return hx_err_set(err, HX_ERR_FORMAT, "input_schema.type: must be \"object\"");
    m->schema_json = cJSON_PrintUnformatted(s);
    return m->schema_json ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
}

static int parse_kind(const cJSON *root, ext_manifest *m, hx_err *err)
{
    const cJSON *mcp = cJSON_GetObjectItemCaseSensitive(root, "mcp");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(root, "command");
    if (mcp && cmd)
        return hx_err_set(err, HX_ERR_FORMAT, "give either \"command\" or \"mcp\", not both");
    if (mcp) {
        m->is_mcp = 1;
        if (!cJSON_IsObject(mcp))
            return hx_err_set(err, HX_ERR_FORMAT, "mcp: expected {\"command\": [...]}");
        return parse_command(cJSON_GetObjectItemCaseSensitive(mcp, "command"), "mcp.command", m, err);
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (!cJSON_IsString(d) || !d->valuestring[0])
        return hx_err_set(err, HX_ERR_FORMAT, "description: required for a command tool");
    m->description = hx_strdup(d->valuestring);
    int rc = parse_schema(root, m, err);
    return rc ? rc : parse_command(cmd, "command", m, err);
}

static int parse_manifest(const cJSON *root, ext_manifest *m, hx_err *err)
{
    if (!cJSON_IsObject(root)) return hx_err_set(err, HX_ERR_FORMAT, "expected a JSON object");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!cJSON_IsString(name) || !valid_name(name->valuestring))
        return hx_err_set(err, HX_ERR_FORMAT,
                          "name: required; letters, digits, '.', '_' or '-', starting with a letter");
    snprintf(m->name, sizeof m->name, "%s", name->valuestring);
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(root, "network");
    if (cJSON_IsTrue(net))
        return hx_err_set(err, HX_ERR_DENIED, "network: Hearth tools never get the network");
    int rc = parse_effect(cJSON_GetObjectItemCaseSensitive(root, "effect"), m, err);
    if (!rc) rc = parse_kind(root, m, err);
    if (!rc) rc = parse_paths(cJSON_GetObjectItemCaseSensitive(root, "read_paths"),
                              "read_paths", m->read_paths, &m->n_read, err);
    if (!rc) rc = parse_paths(cJSON_GetObjectItemCaseSensitive(root, "write_paths"),
                              "write_paths", m->write_paths, &m->n_write, err);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "timeout_s");
    m->timeout_s = cJSON_IsNumber(t) && t->valuedouble > 0 && t->valuedouble <= 600
                       ? t->valuedouble : 10;
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "max_memory_mb");
    m->max_memory_mb = cJSON_IsNumber(mem) && mem->valuedouble >= 0 ? mem->valuedouble : 1024;
    return rc;
}

/* Reads and parses a manifest file; *out owned by the caller. */
static int load_manifest(const char *path, ext_manifest **out, hx_err *err)
{
    char *text;
    size_t len;
    hx_err e;
    *out = NULL;
    int rc = hx_read_file(path, MAX_MANIFEST_BYTES, &text, &len, &e);
    if (rc) return hx_err_set(err, rc, "%s", e.msg);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    ext_manifest *m = calloc(1, sizeof *m);
    if (!m) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    else if (!root) rc = hx_err_set(err, HX_ERR_FORMAT, "%s: not valid JSON", path);
    else if ((rc = parse_manifest(root, m, &e)))
        hx_err_set(err, rc, "%s: %s", path, e.msg);
    cJSON_Delete(root);
    if (rc) manifest_free(m);
    else *out = m;
    return rc;
}

int hx_manifest_check(const char *path, char *name, size_t n, hx_err *err)
{
    ext_manifest *m;
    int rc = load_manifest(path, &m, err);
    if (rc) return rc;
    if (name) snprintf(name, n, "%s", m->name);
    manifest_free(m);
    return HX_OK;
}

static int tools_dir(const char *dir, char *out, size_t n, hx_err *err)
{
    if (dir) return snprintf(out, n, "%s", dir), HX_OK;
    char cfg[PATH_MAX - 16];
    if (hx_path_config(cfg, sizeof cfg) < 0)
        return hx_err_set(err, HX_ERR_RANGE, "config path too long");
    snprintf(out, n, "%s/tools.d", cfg);
    return HX_OK;
}

int hx_manifest_install(const char *path, const char *dir, int replace, hx_err *err)
{
    char name[96], d[PATH_MAX], dst[PATH_MAX + 112];
    int rc = hx_manifest_check(path, name, sizeof name, err);
    if (!rc) rc = tools_dir(dir, d, sizeof d, err);
    if (!rc) rc = hx_mkdirs(d, err);
    if (rc) return rc;
    snprintf(dst, sizeof dst, "%s/%s.json", d, name);
    if (!replace && access(dst, F_OK) == 0)
        return hx_err_set(err, HX_ERR_STATE, "a tool named '%s' is already installed (%s)",
                          name, dst);
    char *text;
    size_t len;
    rc = hx_read_file(path, MAX_MANIFEST_BYTES, &text, &len, err);
    if (rc) return rc;
    rc = hx_write_file_atomic(dst, text, len, err);
    free(text);
    return rc;
}

/* ---- running a command tool ---- */

hx_sandbox_params ext_sandbox_params(const ext_manifest *m)
{
    hx_sandbox_params p = hx_sandbox_default_params();
    p.argv = (const char *const *)m->command;
    for (int i = 0; i < m->n_read; i++) p.read_paths[p.n_read++] = m->read_paths[i];
    for (int i = 0; i < m->n_write; i++) p.write_paths[p.n_write++] = m->write_paths[i];
    /* the program's own folder, so it can be executed and find its files */
    if (p.n_read < HX_SANDBOX_MAX_PATHS) p.read_paths[p.n_read++] = m->exe_dir;
    p.timeout_s = m->timeout_s;
    p.cpu_s = m->timeout_s;
    p.max_memory = (size_t)(m->max_memory_mb * 1024 * 1024);
    return p;
}

/* Explains how a run ended badly, for the model and the audit log. */
static int run_failure(const ext_tool *t, const hx_sandbox_result *r, hx_err *err)
{
    if (r->timed_out)
        return hx_err_set(err, HX_ERR_TIMEOUT, "tool %s ran past its %g s limit and was stopped",
                          t->name, t->m->timeout_s);
    if (r->output_exceeded)
        return hx_err_set(err, HX_ERR_RANGE, "tool %s printed more than its output limit and was stopped",
                          t->name);
    if (r->term_signal == SIGSYS)
        return hx_err_set(err, HX_ERR_DENIED,
                          "tool %s was stopped for a forbidden system call", t->name);
    if (r->term_signal)
        return hx_err_set(err, HX_ERR_IO, "tool %s was killed by signal %d (%s)", t->name,
                          r->term_signal, strsignal(r->term_signal));
    size_t n = r->err_len > 300 ? 300 : r->err_len;
    return hx_err_set(err, HX_ERR_IO, "tool %s failed with exit code %d: %.*s", t->name,
                      r->exit_code, (int)n, r->err ? r->err + r->err_len - n : "");
}

static int parse_output(const ext_tool *t, const hx_sandbox_result *r, cJSON **result,
                        hx_err *err)
{
    cJSON *v = cJSON_ParseWithLength(r->out, r->out_len);
    if (!v)
        return hx_err_set(err, HX_ERR_FORMAT, "tool %s answered with invalid JSON: %.120s",
                          t->name, r->out_len ? r->out : "(nothing)");
    if (!cJSON_IsObject(v)) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "result", v);
        v = o;
    }
    *result = v;
    return HX_OK;
}

static int call_command(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                        hx_err *err)
{
    (void)reg;
    ext_tool *t = user;
    char *in = cJSON_PrintUnformatted(args);
    if (!in) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_sandbox_params p = ext_sandbox_params(t->m);
    hx_sandbox_result r;
    int rc = hx_sandbox_run(&p, in, strlen(in), &r, err);
    free(in);
    if (rc) return rc;
    t->last_sandbox = r.applied;
    if (!r.exited || r.exit_code || r.output_exceeded) rc = run_failure(t, &r, err);
    else rc = parse_output(t, &r, result, err);
    hx_sandbox_result_free(&r);
    return rc;
}

/* ---- loading ---- */

int ext_effect(const ext_manifest *m, int read_only_hint)
{
    if (m->n_write) return m->effect > HX_EFFECT_WRITE ? m->effect : HX_EFFECT_WRITE;
    return read_only_hint ? HX_EFFECT_READ : m->effect;
}

int ext_add_tool(hx_extools *x, ext_manifest *m, mcp_conn *conn, const char *name,
                 const char *remote, const char *description, const char *schema_json,
                 int effect, hx_tool_fn call, hx_err *err)
{
    ext_tool **ts = realloc(x->tools, (size_t)(x->n_tools + 1) * sizeof *ts);
    ext_tool *t = calloc(1, sizeof *t);
    if (ts) x->tools = ts;
    if (!ts || !t) {
        free(t);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->remote, sizeof t->remote, "%s", remote ? remote : "");
    t->m = m, t->conn = conn, t->owner = x;
    hx_tool_def def = {HX_TOOL_API_VERSION, t->name, description, schema_json, effect,
                       call, t, HX_TOOL_UNTRUSTED | (conn ? HX_TOOL_SELF_DESCRIBED : 0)};
    int rc = hx_tools_register(x->reg, &def, err);
    if (rc) {
        free(t);
        return rc;
    }
    x->tools[x->n_tools++] = t;
    return HX_OK;
}

static void note_problem(hx_buf *problems, const char *msg)
{
    if (!problems) return;
    hx_buf_puts(problems, msg);
    hx_buf_putc(problems, '\n');
}

static int keep_manifest(hx_extools *x, ext_manifest *m)
{
    ext_manifest **ms = realloc(x->mans, (size_t)(x->n_mans + 1) * sizeof *ms);
    if (!ms) return -1;
    x->mans = ms;
    x->mans[x->n_mans++] = m;
    return 0;
}

static int keep_conn(hx_extools *x, mcp_conn *c)
{
    mcp_conn **cs = realloc(x->conns, (size_t)(x->n_conns + 1) * sizeof *cs);
    if (!cs) return -1;
    x->conns = cs;
    x->conns[x->n_conns++] = c;
    return 0;
}

/* Loads one manifest file; a failure is a problem line, not an error. */
static void load_one(hx_extools *x, const char *path, hx_buf *problems)
{
    ext_manifest *m;
    hx_err e;
    if (load_manifest(path, &m, &e)) {
        note_problem(problems, e.msg);
        return;
    }
    int rc;
    if (m->is_mcp) {
        mcp_conn *c = NULL;
        rc = mcp_connect(x, m, &c, &e);
        if (!rc && keep_conn(x, c)) mcp_close(c), rc = HX_ERR_NOMEM;
    } else {
        rc = ext_add_tool(x, m, NULL, m->name, NULL, m->description, m->schema_json,
                          ext_effect(m, 0), call_command, &e);
    }
    if (rc) {
        char line[700];
        snprintf(line, sizeof line, "%s: %s", path, e.msg);
        note_problem(problems, line);
    }
    if (keep_manifest(x, m)) manifest_free(m); /* tools that registered keep pointing at m */
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_json_file(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 5 && !strcmp(d->d_name + n - 5, ".json");
}

int hx_extools_load(hx_tools *reg, const char *dir, hx_extools **out, hx_buf *problems,
                    hx_err *err)
{
    char d[PATH_MAX];
    *out = NULL;
    int rc = tools_dir(dir, d, sizeof d, err);
    if (rc) return rc;
    hx_extools *x = calloc(1, sizeof *x);
    if (!x) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    x->reg = reg;
    struct dirent **list;
    int n = scandir(d, &list, is_json_file, by_name);
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", d, list[i]->d_name);
        load_one(x, path, problems);
        free(list[i]);
    }
    if (n >= 0) free(list);
    *out = x;
    return HX_OK;
}

void hx_extools_free(hx_extools *x)
{
    if (!x) return;
    for (int i = 0; i < x->n_conns; i++) mcp_close(x->conns[i]);
    for (int i = 0; i < x->n_tools; i++) free(x->tools[i]);
    for (int i = 0; i < x->n_mans; i++) manifest_free(x->mans[i]);
    free(x->conns);
    free(x->tools);
    free(x->mans);
    free(x);
}

static const ext_tool *find_ext(const hx_extools *x, const char *name)
{
    for (int i = 0; x && i < x->n_tools; i++)
        if (!strcmp(x->tools[i]->name, name)) return x->tools[i];
    return NULL;
}

unsigned hx_extools_last_sandbox(const hx_extools *x, const char *name)
{
    const ext_tool *t = find_ext(x, name);
    return t ? t->last_sandbox : 0;
}
