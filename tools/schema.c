/* schema.c: checks tool arguments against the JSON Schema subset the
 * built-in tools use: type, properties, required, enum, items,
 * minimum/maximum, minLength/maxLength, minItems/maxItems and
 * additionalProperties:false. Errors name the argument ("attendees[1]"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/tools_int.h"

static const char *json_kind(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsNumber(v))
        return v->valuedouble == floor(v->valuedouble) ? "an integer"
                                                         : "a number";
    return "an invalid value";
}

static int type_is(const cJSON *v, const char *t)
{
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
               fabs(v->valuedouble) < 9007199254740992.0;
    return 1; /* unknown type names are not ours to reject */
}

static int check_type(const cJSON *schema, const cJSON *v, const char *path,
                      hx_err *err)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(schema, "type");
    if (!t) return HX_OK;
    if (cJSON_IsString(t)) {
        if (type_is(v, t->valuestring)) return HX_OK;
        return hx_err_set(err, HX_ERR_INVALID,
                          "argument '%s': expected %s, got %s", path,
                          t->valuestring, json_kind(v));
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, t) if (cJSON_IsString(e) && type_is(v, e->valuestring)) return HX_OK;
    return hx_err_set(err, HX_ERR_INVALID, "argument '%s': %s is not an allowed type",
                      path, json_kind(v));
}

static int check_enum(const cJSON *schema, const cJSON *v, const char *path,
                      hx_err *err)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum"), *e;
    if (!cJSON_IsArray(en)) return HX_OK;
    cJSON_ArrayForEach(e, en) if (cJSON_Compare(e, v, 1)) return HX_OK;
    char *allowed = cJSON_PrintUnformatted(en);
    hx_err_set(err, HX_ERR_INVALID, "argument '%s': must be one of %s", path,
               allowed ? allowed : "the listed values");
    cJSON_free(allowed);
    return HX_ERR_INVALID;
}

static double num_kw(const cJSON *schema, const char *kw, double dflt)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(schema, kw);
    return cJSON_IsNumber(k) ? k->valuedouble : dflt;
}

static int check_bounds(const cJSON *schema, const cJSON *v, const char *path,
                        hx_err *err)
{
    double x, lo = -INFINITY, hi = INFINITY;
    const char *what = "";
    if (cJSON_IsNumber(v)) {
        x = v->valuedouble;
        lo = num_kw(schema, "minimum", lo);
        hi = num_kw(schema, "maximum", hi);
    } else if (cJSON_IsString(v)) {
        x = (double)strlen(v->valuestring);
        lo = num_kw(schema, "minLength", lo);
        hi = num_kw(schema, "maxLength", hi);
        what = " characters long";
    } else if (cJSON_IsArray(v)) {
        x = cJSON_GetArraySize(v);
        lo = num_kw(schema, "minItems", lo);
        hi = num_kw(schema, "maxItems", hi);
        what = " items";
    } else
        return HX_OK;
    if (x < lo)
        return hx_err_set(err, HX_ERR_INVALID, "argument '%s': must be at least %g%s",
                          path, lo, what);
    if (x > hi)
        return hx_err_set(err, HX_ERR_INVALID, "argument '%s': must be at most %g%s",
                          path, hi, what);
    return HX_OK;
}

static int check_value(const cJSON *schema, const cJSON *v, const char *path,
                       hx_err *err);

static int check_items(const cJSON *schema, const cJSON *v, const char *path,
                       hx_err *err)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items"), *e;
    if (!cJSON_IsObject(items) || !cJSON_IsArray(v)) return HX_OK;
    int i = 0;
    cJSON_ArrayForEach(e, v)
    {
        char sub[256];
        snprintf(sub, sizeof sub, "%s[%d]", path, i++);
        int rc = check_value(items, e, sub, err);
        if (rc) return rc;
    }
    return HX_OK;
}

static void join_path(char *out, size_t n, const char *path, const char *key)
{
    if (*path) snprintf(out, n, "%s.%s", path, key);
    else snprintf(out, n, "%s", key);
}

static int check_required(const cJSON *schema, const cJSON *v, const char *path,
                          hx_err *err)
{
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required"), *r;
    cJSON_ArrayForEach(r, req)
    {
        if (!cJSON_IsString(r) ||
            cJSON_GetObjectItemCaseSensitive(v, r->valuestring))
            continue;
        char sub[256];
        join_path(sub, sizeof sub, path, r->valuestring);
        return hx_err_set(err, HX_ERR_INVALID, "missing required argument '%s'", sub);
    }
    return HX_OK;
}

static int check_object(const cJSON *schema, const cJSON *v, const char *path,
                        hx_err *err)
{
    if (!cJSON_IsObject(v)) return HX_OK;
    int rc = check_required(schema, v, path, err);
    if (rc) return rc;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *addl =
        cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    const cJSON *m;
    cJSON_ArrayForEach(m, v)
    {
        char sub[256];
        join_path(sub, sizeof sub, path, m->string ? m->string : "");
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, m->string);
        if (!ps && cJSON_IsFalse(addl))
            return hx_err_set(err, HX_ERR_INVALID, "unknown argument '%s'", sub);
        if (!ps && cJSON_IsObject(addl)) ps = addl;
        if (ps && (rc = check_value(ps, m, sub, err))) return rc;
    }
    return HX_OK;
}

static int check_value(const cJSON *schema, const cJSON *v, const char *path,
                       hx_err *err)
{
    int rc;
    if (!cJSON_IsObject(schema)) return HX_OK;
    if ((rc = check_type(schema, v, path, err)) ||
        (rc = check_enum(schema, v, path, err)) ||
        (rc = check_bounds(schema, v, path, err)) ||
        (rc = check_items(schema, v, path, err)) ||
        (rc = check_object(schema, v, path, err)))
        return rc;
    return HX_OK;
}

int hx_schema_check(const cJSON *schema, const cJSON *args, hx_err *err)
{
    if (!cJSON_IsObject(args))
        return hx_err_set(err, HX_ERR_INVALID,
                          "the arguments must be a JSON object, got %s",
                          json_kind(args));
    return check_value(schema, args, "", err);
}
