/* registry.c: the tool registry: tools registered with a JSON Schema for
 * their arguments, called by name with the arguments checked first. */
#include <stdlib.h>
#include <string.h>

#include "tools/tools_int.h"

typedef struct tool {
    hx_tool_def def; /* strings owned (copies) */
    cJSON *schema;   /* parsed schema_json, owned */
} tool;

struct hx_tools {
    const hx_config *cfg; /* borrowed */
    hx_roots *roots;      /* the configured folders, opened on first use */
    tool *tools;
    int n, cap;
    hx_call_trust *trust; /* the call under way's, for its function */
};

/* Names Hearth's own tools live under: a registered tool there could
 * borrow the user's rules and trust for the built-ins. */
static const char *const reserved[] = {"calendar.", "mail.", "files.", "memory."};

const char *hx_effect_name(int effect)
{
    switch (effect) {
    case HX_EFFECT_READ: return "read";
    case HX_EFFECT_WRITE: return "write";
    case HX_EFFECT_SEND: return "send";
    default: return "unknown";
    }
}

hx_tools *hx_tools_new(const hx_config *cfg)
{
    hx_tools *r = hx_calloc(1, sizeof *r);
    if (r) r->cfg = cfg;
    return r;
}

static void tool_free(tool *t)
{
    free((char *)t->def.name);
    free((char *)t->def.description);
    free((char *)t->def.schema_json);
    cJSON_Delete(t->schema);
}

void hx_tools_free(hx_tools *reg)
{
    if (!reg) return;
    for (int i = 0; i < reg->n; i++) tool_free(&reg->tools[i]);
    free(reg->tools);
    hx_roots_free(reg->roots);
    free(reg);
}

const hx_config *hx_tools_config(const hx_tools *reg) { return reg->cfg; }

/* The length of name's leading run of letters, digits, '.', '_', '-'. */
static size_t name_span(const char *name)
{
    return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789._-");
}

/* A schema's keys and strings, at any depth, hold no control character
 * (but tab, newline, CR): they reach a terminal in error messages. */
static const char *schema_control(const cJSON *v)
{
    for (const cJSON *c = v->child; c; c = c->next) {
        const char *bad = c->string ? hx_find_control(c->string, 1) : NULL;
        if (!bad && cJSON_IsString(c)) bad = hx_find_control(c->valuestring, 1);
        if (!bad) bad = schema_control(c);
        if (bad) return bad;
    }
    return NULL;
}

/* What a tool shows the user is text, not terminal commands: the name is
 * letters, digits, '.', '_', '-'; the description and the schema hold no
 * control character but tab, newline and CR. */
static int check_text(const hx_tool_def *def, const cJSON *schema, hx_err *err)
{
    size_t ok = name_span(def->name), n = strlen(def->name);
    if (ok < n || n > 160)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "tool '%.*s': a name is at most 160 letters, digits, '.', '_' "
                          "or '-'", (int)(ok < 64 ? ok : 64), def->name);
    const char *bad = def->description ? hx_find_control(def->description, 1) : NULL;
    const char *what = "description";
    if (!bad) bad = schema_control(schema), what = "schema";
    if (bad)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "tool '%s': its %s holds a control character (byte 0x%02x)",
                          def->name, what, (unsigned char)*bad);
    return HX_OK;
}

void hx_tools_open_roots(hx_tools *reg) { hx_roots_open_all(&reg->roots, reg->cfg); }

const hx_root *hx_tools_root(const hx_tools *reg, hx_root_kind kind, int i, unsigned flags,
                             hx_err *err)
{
    /* the roots are opened on first use: a cache, not part of what the
     * registry is, so a const registry may open one */
    hx_tools *r = (hx_tools *)reg;
    return hx_roots_get(&r->roots, reg->cfg, kind, i, flags, err);
}

static int check_def(const hx_tools *reg, const hx_tool_def *def, cJSON **schema,
                     hx_err *err)
{
    if (!def || !def->name || !*def->name || !def->call)
        return hx_err_set(err, HX_ERR_INVALID, "tool definition without a name or function");
    if (def->api_version != HX_TOOL_API_VERSION)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "tool '%s': api_version %d, expected %d",
                          def->name, def->api_version, HX_TOOL_API_VERSION);
    if (hx_tools_find(reg, def->name))
        return hx_err_set(err, HX_ERR_STATE, "tool '%s' is already registered", def->name);
    if (hx_tools_name_reserved(def->name) && !(def->flags & HX_TOOL_BUILTIN))
        return hx_err_set(err, HX_ERR_DENIED, "tool '%s': names under calendar., mail., "
                          "files. and memory. are reserved for Hearth's own tools",
                          def->name);
    *schema = cJSON_Parse(def->schema_json ? def->schema_json : "");
    if (!cJSON_IsObject(*schema)) {
        cJSON_Delete(*schema);
        return hx_err_set(err, HX_ERR_FORMAT, "tool '%s': the schema is not a JSON object",
                          def->name);
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(*schema, "type");
    int rc = HX_OK;
    if (t && !(cJSON_IsString(t) && !strcmp(t->valuestring, "object")))
        rc = hx_err_set(err, HX_ERR_FORMAT,
                        "tool '%s': the schema's type must be \"object\"", def->name);
    if (!rc) rc = check_text(def, *schema, err);
    if (rc) cJSON_Delete(*schema), *schema = NULL;
    return rc;
}

/* Tabs, newlines and CRs of a description become spaces: it is shown on
 * one line. */
static void one_line(char *s)
{
    for (; s && *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r') *s = ' ';
}

int hx_tools_register(hx_tools *reg, const hx_tool_def *def, hx_err *err)
{
    cJSON *schema = NULL;
    int rc = check_def(reg, def, &schema, err);
    if (rc) return rc;
    if (reg->n == reg->cap) {
        int cap = reg->cap ? reg->cap * 2 : 16;
        tool *nt = hx_realloc(reg->tools, (size_t)cap * sizeof *nt);
        if (!nt) {
            cJSON_Delete(schema);
            return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        }
        reg->tools = nt;
        reg->cap = cap;
    }
    tool *t = &reg->tools[reg->n];
    t->def = *def;
    t->def.name = hx_strdup(def->name);
    t->def.description = hx_strdup(def->description ? def->description : "");
    one_line((char *)t->def.description);
    t->def.schema_json = hx_strdup(def->schema_json);
    t->schema = schema;
    if (!t->def.name || !t->def.description || !t->def.schema_json) {
        tool_free(t);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    reg->n++;
    return HX_OK;
}

int hx_tools_register_all(hx_tools *reg, const hx_tool_def *defs, size_t n, hx_err *err)
{
    for (size_t i = 0; i < n; i++) {
        int rc = hx_tools_register(reg, &defs[i], err);
        if (rc) return rc;
    }
    return HX_OK;
}

int hx_tools_count(const hx_tools *reg) { return reg ? reg->n : 0; }

const hx_tool_def *hx_tools_at(const hx_tools *reg, int i)
{
    return reg && i >= 0 && i < reg->n ? &reg->tools[i].def : NULL;
}

static tool *find(const hx_tools *reg, const char *name)
{
    for (int i = 0; reg && name && i < reg->n; i++)
        if (!strcmp(reg->tools[i].def.name, name)) return &reg->tools[i];
    return NULL;
}

const hx_tool_def *hx_tools_find(const hx_tools *reg, const char *name)
{
    tool *t = find(reg, name);
    return t ? &t->def : NULL;
}

int hx_tools_untrusted_output(const hx_tools *reg, const char *name)
{
    tool *t = find(reg, name);
    return t && (t->def.flags & HX_TOOL_UNTRUSTED);
}

int hx_tools_name_reserved(const char *name)
{
    for (size_t i = 0; name && i < sizeof reserved / sizeof *reserved; i++)
        if (!strncmp(name, reserved[i], strlen(reserved[i]))) return 1;
    return 0;
}

int hx_tools_call_tainted(const hx_tools *reg) { return reg->trust && reg->trust->tainted; }

void hx_tools_mark_untrusted(hx_tools *reg)
{
    if (reg->trust) reg->trust->untrusted = 1;
}

/* Runs t's function with trust visible to it; a tool whose output is
 * untrusted taints whether it succeeded or failed (its error text is
 * its own words too). */
static int run_tool(hx_tools *reg, tool *t, const cJSON *args, hx_call_trust *trust,
                    cJSON **result, hx_err *err)
{
    hx_call_trust none = {0}, *saved = reg->trust;
    reg->trust = trust ? trust : &none;
    reg->trust->untrusted = (t->def.flags & HX_TOOL_UNTRUSTED) != 0;
    int rc = t->def.call(reg, t->def.user, args, result, err);
    reg->trust = saved;
    return rc;
}

int hx_tools_call(hx_tools *reg, const char *name, const cJSON *args,
                  cJSON **result, hx_err *err)
{
    return hx_tools_call_trust(reg, name, args, NULL, result, err);
}

int hx_tools_call_trust(hx_tools *reg, const char *name, const cJSON *args,
                        hx_call_trust *trust, cJSON **result, hx_err *err)
{
    *result = NULL;
    if (trust) trust->untrusted = 0;
    tool *t = find(reg, name);
    if (!t) return hx_err_set(err, HX_ERR_NOTFOUND, "no tool named '%s'", name ? name : "");
    cJSON *empty = NULL;
    if (!args) args = empty = cJSON_CreateObject();
    int rc = hx_schema_check(t->schema, args, err);
    if (rc == HX_OK) rc = run_tool(reg, t, args, trust, result, err);
    cJSON_Delete(empty);
    if (rc == HX_OK && !cJSON_IsObject(*result)) {
        cJSON_Delete(*result);
        *result = NULL;
        rc = hx_err_set(err, HX_ERR_INTERNAL, "tool '%s' returned no result object", name);
    }
    if (rc != HX_OK) {
        cJSON_Delete(*result);
        *result = NULL;
    }
    return rc;
}

int hx_json_add(cJSON *obj, const char *key, cJSON *item)
{
    if (obj && item && (key ? cJSON_AddItemToObject(obj, key, item) : cJSON_AddItemToArray(obj, item)))
        return 1;
    cJSON_Delete(item);
    return 0;
}

/* {"type": "function", "function": {"name", "description", "parameters"}}
 * of t, or NULL when out of memory. */
static cJSON *tool_json(const tool *t)
{
    cJSON *item = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    int ok = item && fn && cJSON_AddStringToObject(item, "type", "function") &&
             cJSON_AddStringToObject(fn, "name", t->def.name) &&
             cJSON_AddStringToObject(fn, "description", t->def.description) &&
             hx_json_add(fn, "parameters", cJSON_Duplicate(t->schema, 1));
    if (ok && hx_json_add(item, "function", fn)) return item;
    if (!ok) cJSON_Delete(fn);
    cJSON_Delete(item);
    return NULL;
}

cJSON *hx_tools_list_json(const hx_tools *reg)
{
    cJSON *list = cJSON_CreateArray();
    for (int i = 0; list && i < hx_tools_count(reg); i++) {
        cJSON *item = tool_json(&reg->tools[i]);
        if (!item || !cJSON_AddItemToArray(list, item)) {
            cJSON_Delete(item);
            cJSON_Delete(list);
            return NULL;
        }
    }
    return list;
}
