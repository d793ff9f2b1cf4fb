/* args.c: reading the JSON arguments of the built-in tools: strings,
 * numbers, booleans and time arguments (ISO 8601 or time expressions). */
#include <string.h>

#include "tools/tools_int.h"

const char *hx_arg_str(const cJSON *args, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int hx_arg_int(const cJSON *args, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    if (!cJSON_IsNumber(v)) return dflt;
    double d = v->valuedouble;
    return d > 2e9 ? 2000000000 : d < -2e9 ? -2000000000 : (int)d;
}

int hx_arg_bool(const cJSON *args, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static const char *cfg_tz(const hx_tools *reg)
{
    const hx_config *c = hx_tools_config(reg);
    return c && c->timezone ? c->timezone : "UTC";
}

icaltimezone *hx_tools_tz(const hx_tools *reg)
{
    icaltimezone *z = hx_tz_find(cfg_tz(reg));
    return z ? z : icaltimezone_get_utc_timezone();
}

int hx_arg_when(const hx_tools *reg, const cJSON *args, const char *key,
                hx_when_range *out, hx_err *err)
{
    const char *s = hx_arg_str(args, key);
    if (!s) return hx_err_set(err, HX_ERR_INVALID, "missing argument '%s'", key);
    hx_err e = {0};
    const char *tz = hx_tz_find(cfg_tz(reg)) ? cfg_tz(reg) : "UTC";
    int rc = hx_when_parse(s, hx_now(NULL), tz, out, &e);
    if (rc) return hx_err_set(err, rc, "argument '%s': %s", key, e.msg);
    return HX_OK;
}
