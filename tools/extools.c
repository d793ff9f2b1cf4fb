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

/* Bounds of what a manifest may ask for. */
#define MAX_TIMEOUT_S 600.0
#define MIN_MEMORY_MB 16.0
#define MAX_MEMORY_MB 65536.0

/* ---- parsing ---- */

static void manifest_free(ext_manifest *m)
{
    if (!m) return;
    free(m->description);
    free(m->schema_json);
    for (char **a = m->command; a && *a; a++) free(*a);
    free(m->command);
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

/* "~/x" -> $HOME/x; other paths must be absolute. Repeated and trailing
 * slashes go; "." and ".." stay, for the sandbox to refuse. */
static char *expand_path(const char *p)
{
    const char *home = p[0] == '~' && (p[1] == '/' || !p[1]) ? getenv("HOME") : NULL;
    if (!home && p[0] != '/') return NULL;
    hx_buf raw;
    hx_buf_init(&raw);
    if (home) hx_buf_printf(&raw, "%s/%s", home, p + 1);
    else hx_buf_puts(&raw, p);
    char *s = hx_buf_steal(&raw, NULL), *w = s;
    for (const char *c = s; s && *c; c++)
        if (*c != '/' || w == s || w[-1] != '/') *w++ = *c;
    while (s && w > s + 1 && w[-1] == '/') w--;
    if (s) *w = '\0';
    return s;
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
    m->command = hx_calloc((size_t)n + 1, sizeof *m->command);
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
    return HX_OK;
}

static int parse_effect(const cJSON *v, ext_manifest *m, hx_err *err)
{
    static const char *const names[] = {"read", "write", "send"};
    for (int i = 0; i < 3 && cJSON_IsString(v); i++)
        if (!strcmp(v->valuestring, names[i])) return m->effect = i, HX_OK;
    return hx_err_set(err, HX_ERR_FORMAT, "effect: expected \"read\", \"write\" or \"send\"");
}

static const cJSON *schema_of(const cJSON *root)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "input_schema");
    if (!s) s = cJSON_GetObjectItemCaseSensitive(root, "inputSchema");
    return s ? s : cJSON_GetObjectItemCaseSensitive(root, "parameters");
}

static int parse_schema(const cJSON *root, ext_manifest *m, hx_err *err)
{
    const cJSON *s = schema_of(root);
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
        if (!cJSON_IsObject(mcp) || cJSON_GetArraySize(mcp) != 1)
            return hx_err_set(err, HX_ERR_FORMAT, "mcp: expected {\"command\": [...]} and nothing else");
        return parse_command(cJSON_GetObjectItemCaseSensitive(mcp, "command"), "mcp.command", m, err);
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "description");
    if (!cJSON_IsString(d) || !d->valuestring[0])
        return hx_err_set(err, HX_ERR_FORMAT, "description: required for a command tool");
    m->description = hx_strdup(d->valuestring);
    int rc = parse_schema(root, m, err);
    return rc ? rc : parse_command(cmd, "command", m, err);
}

/* A number field within [lo, hi], def when absent. */
static int parse_bounded(const cJSON *root, const char *field, double lo, double hi,
                         double def, double *out, hx_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, field);
    if (!v) return *out = def, HX_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return hx_err_set(err, HX_ERR_RANGE, "%s: expected a number from %g to %g", field,
                          lo, hi);
    *out = v->valuedouble;
    return HX_OK;
}

static const char *const known_fields[] = {
    "name", "description", "input_schema", "inputSchema", "parameters", "command",
    "mcp", "effect", "read_paths", "write_paths", "timeout_s", "max_memory_mb", "network",
};

/* Only known fields, one schema: a misspelt limit ("timeout") must not
 * pass for a default. */
static int check_fields(const cJSON *root, hx_err *err)
{
    int schemas = 0;
    for (const cJSON *f = root->child; f; f = f->next) {
        size_t k = 0, n = sizeof known_fields / sizeof *known_fields;
        while (k < n && strcmp(f->string, known_fields[k])) k++;
        if (k == n)
            return hx_err_set(err, HX_ERR_FORMAT,
                              "unknown field \"%.64s\" (the fields are name, description, "
                              "input_schema, command or mcp, effect, read_paths, "
                              "write_paths, timeout_s, max_memory_mb)", f->string);
        schemas += k >= 2 && k <= 4;
    }
    if (schemas > 1)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "give one of input_schema, inputSchema or parameters");
    return HX_OK;
}

static int parse_manifest(const cJSON *root, ext_manifest *m, hx_err *err)
{
    if (!cJSON_IsObject(root)) return hx_err_set(err, HX_ERR_FORMAT, "expected a JSON object");
    int rc = check_fields(root, err);
    if (rc) return rc;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!cJSON_IsString(name) || !valid_name(name->valuestring))
        return hx_err_set(err, HX_ERR_FORMAT,
                          "name: required; letters, digits, '.', '_' or '-', starting with a letter");
    snprintf(m->name, sizeof m->name, "%s", name->valuestring);
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(root, "network");
    if (cJSON_IsTrue(net))
        return hx_err_set(err, HX_ERR_DENIED, "network: Hearth tools never get the network");
    if (net && !cJSON_IsFalse(net)) return hx_err_set(err, HX_ERR_FORMAT, "network: false or absent");
    rc = parse_effect(cJSON_GetObjectItemCaseSensitive(root, "effect"), m, err);
    if (!rc) rc = parse_kind(root, m, err);
    if (!rc) rc = parse_paths(cJSON_GetObjectItemCaseSensitive(root, "read_paths"),
                              "read_paths", m->read_paths, &m->n_read, err);
    if (!rc) rc = parse_paths(cJSON_GetObjectItemCaseSensitive(root, "write_paths"),
                              "write_paths", m->write_paths, &m->n_write, err);
    if (!rc) rc = parse_bounded(root, "timeout_s", 0.1, MAX_TIMEOUT_S, 10, &m->timeout_s, err);
    if (!rc) rc = parse_bounded(root, "max_memory_mb", MIN_MEMORY_MB, MAX_MEMORY_MB, 1024,
                                &m->max_memory_mb, err);
    return rc;
}

/* ---- what JSON readers could disagree on ---- */

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* No object holds a key twice, at any depth: Hearth reads the first, most
 * JSON readers the last, and the user must see what Hearth runs. */
static int no_duplicate_keys(const cJSON *v, hx_err *err)
{
    int n = 0, rc = HX_OK;
    for (const cJSON *c = v->child; c; c = c->next) n++;
    const cJSON **keys = cJSON_IsObject(v) && n > 1 ? hx_malloc((size_t)n * sizeof *keys) : NULL;
    if (keys) {
        int k = 0;
        for (const cJSON *c = v->child; c; c = c->next) keys[k++] = c;
        qsort(keys, (size_t)n, sizeof *keys, by_key);
        for (int i = 1; i < n && !rc; i++)
            if (!strcmp(keys[i - 1]->string, keys[i]->string))
                rc = hx_err_set(err, HX_ERR_FORMAT, "the key \"%.64s\" appears twice in one object",
                                keys[i]->string);
        free(keys);
    } else if (cJSON_IsObject(v) && n > 1) {
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    for (const cJSON *c = v->child; c && !rc; c = c->next) rc = no_duplicate_keys(c, err);
    return rc;
}

/* No key or string drives a terminal (tab, newline and CR are left for the
 * registry to turn into spaces in descriptions). */
static int no_controls(const cJSON *v, hx_err *err)
{
    for (const cJSON *c = v->child; c; c = c->next) {
        const char *bad = c->string ? hx_find_control(c->string, 0) : NULL;
        if (!bad && cJSON_IsString(c)) bad = hx_find_control(c->valuestring, 1);
        if (bad)
            return hx_err_set(err, HX_ERR_FORMAT,
                              "%s%.64s: a control character (byte 0x%02x); manifests may not "
                              "hold any", c->string ? "field " : "a string in ",
                              c->string ? c->string : "an array", (unsigned char)*bad);
        int rc = no_controls(c, err);
        if (rc) return rc;
    }
    return HX_OK;
}

/* "\u0000" ends the C string the parser gives: Hearth would read less
 * than another reader. */
static int has_nul_escape(const char *t, size_t n)
{
    for (size_t i = 0; i + 5 < n; i++) {
        if (t[i] != '\\') continue;
        if (t[i + 1] == 'u' && !memcmp(t + i + 2, "0000", 4)) return 1;
        i++; /* the escaped character */
    }
    return 0;
}

static int parse_text(const char *text, size_t len, cJSON **root, hx_err *err)
{
    const char *end = NULL;
    *root = NULL;
    if (memchr(text, '\0', len) || has_nul_escape(text, len))
        return hx_err_set(err, HX_ERR_FORMAT, "a string holds \\u0000, which Hearth refuses");
    *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (!*root) return hx_err_set(err, HX_ERR_FORMAT, "not valid JSON");
    int rc = no_duplicate_keys(*root, err);
    return rc ? rc : no_controls(*root, err);
}

/* ---- where a tool may never reach ---- */

/* Where p really is: the real path of its longest existing part, with the
 * rest appended (a folder Hearth has not made yet), without a trailing
 * '/'. */
static void real_path(const char *p, char *out, size_t n)
{
    char part[PATH_MAX], real[PATH_MAX];
    snprintf(part, sizeof part, "%s", p);
    const char *rest = "";
    for (;;) {
        if (realpath(part, real)) {
            rest = p + strlen(part);
            break;
        }
        char *slash = strrchr(part, '/');
        if (!slash || slash == part) {
            snprintf(real, sizeof real, "%s", p);
            break;
        }
        *slash = '\0';
    }
    snprintf(out, n, "%s%s", strcmp(real, "/") ? real : "", rest);
    size_t k = strlen(out);
    while (k > 1 && out[k - 1] == '/') out[--k] = '\0';
    if (!k) snprintf(out, n, "/");
}

typedef struct guarded {
    const char *what;
    char path[PATH_MAX];
    int own;   /* Hearth's own: no listed path may overlap it */
} guarded;

static int n_guarded(const hx_config *cfg, guarded *g)
{
    static const char *const own[] = {"Hearth's configuration", "Hearth's data", "Hearth's cache"};
    int (*const dirs[])(char *, size_t) = {hx_path_config, hx_path_data, hx_path_cache};
    char raw[PATH_MAX];
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (dirs[i](raw, sizeof raw) > 0) g[n].what = own[i], g[n].own = 1, real_path(raw, g[n++].path, PATH_MAX);
    if (!cfg) return n;
    const struct { const char *what, *path; int own; } roots[] = {
        {"the outbox", cfg->outbox, 1}, {"the Maildir", cfg->maildir, 0},
        {"the default calendar", cfg->calendar_default, 0}};
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++)
        if (roots[i].path && *roots[i].path)
            g[n].what = roots[i].what, g[n].own = roots[i].own,
            real_path(roots[i].path, g[n++].path, PATH_MAX);
    for (int i = 0; i < cfg->n_calendars; i++)
        g[n].what = "a calendar", g[n].own = 0, real_path(cfg->calendars[i], g[n++].path, PATH_MAX);
    for (int i = 0; i < cfg->n_file_roots; i++)
        g[n].what = "a file root", g[n].own = 0, real_path(cfg->file_roots[i], g[n++].path, PATH_MAX);
    return n;
}

static int overlap(const char *field, const char *path, const guarded *g, hx_err *err)
{
    return hx_err_set(err, HX_ERR_DENIED, "%s %s: %s %s (%s); a registered tool may not "
                      "reach it", field, path,
                      hx_path_within(g->path, path) ? "holds" : "lies inside", g->what, g->path);
}

/* No write path holds a root of Hearth's built-in tools (it could replace
 * it with a link), no listed path overlaps Hearth's own folders. */
static int check_guarded(const ext_manifest *m, const hx_config *cfg, hx_err *err)
{
    guarded *g = hx_malloc((3 + 3 + 2 * HX_MAX_ROOTS) * sizeof *g);
    if (!g) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int n = n_guarded(cfg, g), rc = HX_OK;
    for (int i = 0; i < n && !rc; i++) {
        for (int k = 0; k < m->n_write && !rc; k++)
            if (hx_path_within(g[i].path, m->write_paths[k]) ||
                (g[i].own && hx_path_within(m->write_paths[k], g[i].path)))
                rc = overlap("write path", m->write_paths[k], &g[i], err);
        for (int k = 0; k < m->n_read && !rc && g[i].own; k++)
            if (hx_path_within(g[i].path, m->read_paths[k]) ||
                hx_path_within(m->read_paths[k], g[i].path))
                rc = overlap("read path", m->read_paths[k], &g[i], err);
    }
    free(g);
    return rc;
}

/* Reads, parses and checks a manifest file against cfg (NULL: Hearth's
 * own folders only); *out owned by the caller. */
static int load_manifest(const char *path, const hx_config *cfg, ext_manifest **out,
                         hx_err *err)
{
    char *text;
    size_t len;
    hx_err e;
    cJSON *root = NULL;
    *out = NULL;
    int rc = hx_read_file(path, MAX_MANIFEST_BYTES, &text, &len, &e);
    if (rc) return hx_err_set(err, rc, "%s", e.msg);
    ext_manifest *m = hx_calloc(1, sizeof *m);
    if (!m) rc = hx_err_set(&e, HX_ERR_NOMEM, "out of memory");
    if (!rc) rc = parse_text(text, len, &root, &e);
    free(text);
    if (!rc) rc = parse_manifest(root, m, &e);
    cJSON_Delete(root);
    if (!rc) {
        hx_sandbox_params p = hx_ext_sandbox_params(m);
        rc = hx_sandbox_check(&p, &e);
    }
    if (!rc) rc = check_guarded(m, cfg, &e);
    if (rc) {
        hx_err_set(err, rc, "%s: %s", path, e.msg);
        manifest_free(m);
    } else {
        *out = m;
    }
    return rc;
}

int hx_manifest_check(const char *path, const hx_config *cfg, char *name, size_t n,
                      hx_err *err)
{
    ext_manifest *m;
    int rc = load_manifest(path, cfg, &m, err);
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

int hx_manifest_install(const char *path, const hx_config *cfg, const char *dir,
                        int replace, hx_err *err)
{
    char name[96], d[PATH_MAX], dst[PATH_MAX + 112];
    int rc = hx_manifest_check(path, cfg, name, sizeof name, err);
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

hx_sandbox_params hx_ext_sandbox_params(const ext_manifest *m)
{
    hx_sandbox_params p = hx_sandbox_default_params();
    p.argv = (const char *const *)m->command;
    for (int i = 0; i < m->n_read; i++) p.read_paths[p.n_read++] = m->read_paths[i];
    for (int i = 0; i < m->n_write; i++) p.write_paths[p.n_write++] = m->write_paths[i];
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
    hx_sandbox_params p = hx_ext_sandbox_params(t->m);
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

int hx_ext_effect(const ext_manifest *m, int read_only_hint)
{
    if (m->n_write) return m->effect > HX_EFFECT_WRITE ? m->effect : HX_EFFECT_WRITE;
    return read_only_hint ? HX_EFFECT_READ : m->effect;
}

int hx_ext_add_tool(hx_extools *x, ext_manifest *m, mcp_conn *conn, const char *name,
                    const char *remote, const char *description, const char *schema_json,
                    int effect, hx_tool_fn call, hx_err *err)
{
    ext_tool **ts = hx_realloc(x->tools, (size_t)(x->n_tools + 1) * sizeof *ts);
    ext_tool *t = hx_calloc(1, sizeof *t);
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
    ext_manifest **ms = hx_realloc(x->mans, (size_t)(x->n_mans + 1) * sizeof *ms);
    if (!ms) return -1;
    x->mans = ms;
    x->mans[x->n_mans++] = m;
    return 0;
}

static int keep_conn(hx_extools *x, mcp_conn *c)
{
    mcp_conn **cs = hx_realloc(x->conns, (size_t)(x->n_conns + 1) * sizeof *cs);
    if (!cs) return -1;
    x->conns = cs;
    x->conns[x->n_conns++] = c;
    return 0;
}

/* Registers the tool of a checked manifest (or its MCP server's tools);
 * a failure is a problem line, not an error. x keeps m. */
static void register_one(hx_extools *x, const char *path, ext_manifest *m, hx_buf *problems)
{
    hx_err e;
    int rc;
    if (m->is_mcp) {
        mcp_conn *c = NULL;
        rc = hx_mcp_connect(x, m, problems, &c, &e);
        if (!rc && keep_conn(x, c)) hx_mcp_close(c), rc = HX_ERR_NOMEM;
    } else {
        rc = hx_ext_add_tool(x, m, NULL, m->name, NULL, m->description, m->schema_json,
                             hx_ext_effect(m, 0), call_command, &e);
    }
    if (rc) {
        char line[700];
        snprintf(line, sizeof line, "%s: %s", path, e.msg);
        note_problem(problems, line);
    }
    if (keep_manifest(x, m)) manifest_free(m); /* tools that registered keep pointing at m */
}

/* Another registered tool's command inside m's write paths: m could
 * rewrite that tool's code, which then runs with that tool's grants. */
static int holds_command(const ext_manifest *m, ext_manifest *const *all, int n, hx_err *err)
{
    for (int i = 0; i < n; i++) {
        char exe[PATH_MAX];
        if (!all[i] || all[i] == m || !realpath(all[i]->command[0], exe)) continue;
        for (int k = 0; k < m->n_write; k++)
            if (hx_path_within(exe, m->write_paths[k]) ||
                hx_path_within(all[i]->command[0], m->write_paths[k]))
                return hx_err_set(err, HX_ERR_DENIED,
                                  "write path %s holds %s, the command of the tool %s, "
                                  "which this tool could rewrite", m->write_paths[k],
                                  all[i]->command[0], all[i]->name);
    }
    return HX_OK;
}

/* Checks every manifest of the listing, then registers those that pass,
 * alone and against each other. */
static void load_all(hx_extools *x, const char *d, struct dirent **list, int n,
                     hx_buf *problems)
{
    ext_manifest **ms = hx_calloc((size_t)n, sizeof *ms);
    int *refused = hx_calloc((size_t)n, sizeof *refused);
    char path[PATH_MAX + 256];
    hx_err e;
    for (int i = 0; i < n && ms && refused; i++) {
        snprintf(path, sizeof path, "%s/%s", d, list[i]->d_name);
        if (load_manifest(path, hx_tools_config(x->reg), &ms[i], &e)) note_problem(problems, e.msg);
    }
    for (int i = 0; i < n && ms && refused; i++)
        if (ms[i] && (refused[i] = holds_command(ms[i], ms, n, &e) != HX_OK)) {
            snprintf(path, sizeof path, "%s/%s: %s", d, list[i]->d_name, e.msg);
            note_problem(problems, path);
        }
    for (int i = 0; i < n && ms && refused; i++) {
        snprintf(path, sizeof path, "%s/%s", d, list[i]->d_name);
        if (refused[i]) manifest_free(ms[i]);
        else if (ms[i]) register_one(x, path, ms[i], problems);
    }
    if (!ms || !refused) note_problem(problems, "out of memory loading registered tools");
    free(ms);
    free(refused);
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
    hx_extools *x = hx_calloc(1, sizeof *x);
    if (!x) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    x->reg = reg;
    struct dirent **list;
    int n = scandir(d, &list, is_json_file, by_name);
    if (n > 0) load_all(x, d, list, n, problems);
    for (int i = 0; i < n; i++) free(list[i]);
    if (n >= 0) free(list);
    *out = x;
    return HX_OK;
}

void hx_extools_free(hx_extools *x)
{
    if (!x) return;
    for (int i = 0; i < x->n_conns; i++) hx_mcp_close(x->conns[i]);
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

int hx_extools_describe_grants(const hx_extools *x, const char *name, hx_buf *out)
{
    const ext_tool *t = find_ext(x, name);
    if (!t) return 0;
    hx_sandbox_params p = hx_ext_sandbox_params(t->m);
    hx_sandbox_describe_grants(&p, out);
    return 1;
}
