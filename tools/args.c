/* args.c: reading the JSON arguments of the built-in tools: strings,
 * numbers, booleans, addresses and time arguments (ISO 8601 or time
 * expressions); the terms and notes of a search by words. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

int hx_parse_address(const char *s, char *name, size_t nn, char *email, size_t en)
{
    const char *lt = strchr(s, '<'), *gt = lt ? strchr(lt, '>') : NULL;
    const char *a = lt && gt ? lt + 1 : s;
    size_t al = lt && gt ? (size_t)(gt - lt - 1) : strlen(s);
    while (al && (*a == ' ')) a++, al--;
    while (al && a[al - 1] == ' ') al--;
    if (!strncasecmp(a, "mailto:", 7)) a += 7, al -= al >= 7 ? 7 : al;
    if (al == 0 || al >= en || !memchr(a, '@', al)) return -1;
    for (size_t i = 0; i < al; i++)
        if ((unsigned char)a[i] <= ' ' || strchr("<>\",;:()[]\\", a[i])) return -1;
    /* one '@' with something on both sides */
    const char *at = memchr(a, '@', al);
    if (at == a || at == a + al - 1 || memchr(at + 1, '@', al - (size_t)(at - a) - 1)) return -1;
    if (gt && gt[1 + strspn(gt + 1, " ")]) return -1; /* text after "<...>" */
    memcpy(email, a, al);
    email[al] = 0;
    size_t nl = lt && gt ? (size_t)(lt - s) : 0;
    while (nl && s[nl - 1] == ' ') nl--;
    const char *ns = s;
    if (nl && *ns == '"') ns++, nl -= nl >= 2 ? 2 : nl;
    if (nn == 0) return 0;
    if (nl >= nn) nl = nn - 1;
    memcpy(name, ns, nl);
    name[nl] = 0;
    return 0;
}

/* The examples are no address (no dotted domain): a model copies what a
 * conversation holds, and with a real-looking one (it was
 * bob@example.org) the next try invited that made-up person. */
int hx_address_error(const char *key, const char *value, hx_err *err)
{
    return hx_err_set(err, HX_ERR_INVALID,
                      "argument '%s': '%s' is not an address like "
                      "\"name@domain\" or \"Name <name@domain>\"",
                      key, value ? value : "(not a string)");
}

int hx_address_list_next(const char **s, char *piece, size_t n)
{
    while (**s) {
        size_t len = 0;
        int quoted = 0;
        while ((*s)[len] && (quoted || (*s)[len] != ',')) quoted ^= (*s)[len++] == '"';
        const size_t keep = len < n ? len : n - 1;
        memcpy(piece, *s, keep);
        piece[keep] = 0;
        *s += len + ((*s)[len] == ',');
        if (piece[strspn(piece, " ")]) return 1; /* "a@b, " has no third piece */
    }
    return 0;
}

/* Checks one comma-separated list of addresses ("a@b, Bob <c@d>"). */
static int check_address_list(const char *key, const char *s, hx_err *err)
{
    char piece[512], name[256], email[256];
    int n = 0;
    while (hx_address_list_next(&s, piece, sizeof piece)) {
        if (hx_parse_address(piece, name, sizeof name, email, sizeof email))
            return hx_address_error(key, piece, err);
        n++;
    }
    return n ? HX_OK : hx_address_error(key, "", err);
}

int hx_arg_addresses(const cJSON *args, const char *key, hx_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key), *a;
    char name[256], email[256];
    if (!v) return HX_OK;
    if (cJSON_IsString(v)) return check_address_list(key, v->valuestring, err);
    if (!cJSON_IsArray(v))
        return hx_err_set(err, HX_ERR_INVALID, "argument '%s' must be a list of addresses", key);
    cJSON_ArrayForEach(a, v) if (!cJSON_IsString(a) ||
                                  hx_parse_address(a->valuestring, name, sizeof name, email,
                                                   sizeof email))
        return hx_address_error(key, cJSON_IsString(a) ? a->valuestring : NULL, err);
    return HX_OK;
}

/* ---- a search by words ---- */

const char *hx_term_at(const hx_buf *terms, int i)
{
    size_t at = 0;
    while (i-- > 0) at += strlen(terms->data + at) + 1;
    return terms->data + at;
}

cJSON *hx_terms_json(const hx_buf *terms, int n, int mask)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        if (mask & (1 << i)) cJSON_AddItemToArray(a, cJSON_CreateString(hx_term_at(terms, i)));
    return a;
}

void hx_text_notes(const hx_buf *terms, int n_terms, const hx_buf *ignored, int best,
                   int total, const char *noun, cJSON *out)
{
    char words[512] = "", note[700];
    for (int i = 0; i < n_terms; i++)
        snprintf(words + strlen(words), sizeof words - strlen(words), "%s%s", i ? ", " : "",
                 hx_term_at(terms, i));
    if (!total) {
        snprintf(note, sizeof note, "no %s has any of the words", noun);
        cJSON_AddStringToObject(out, "note", note);
    } else if (best < n_terms) {
        snprintf(note, sizeof note, "no %s has all of the words (%s): these have some of "
                 "them, best match first, each with the words it has", noun, words);
        cJSON_AddStringToObject(out, "note", note);
    }
    int n_ignored = 0;
    for (size_t i = 0; ignored->data && i < ignored->len; i += strlen(ignored->data + i) + 1)
        n_ignored++;
    if (n_ignored) cJSON_AddItemToObject(out, "ignored_words", hx_terms_json(ignored, n_ignored, -1));
}
