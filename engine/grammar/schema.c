/* schema.c: JSON Schema (cJSON) to a grammar regex with call leaves for
 * recursive $refs; keywords it cannot enforce are compile errors. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/grammar/gint.h"

#define MAX_DEPTH 64
#define MAX_BRANCHES 256
#define COMPILE_BUDGET_S 2

typedef struct refent {
    char *ptr;
    int state; /* 0 new, 1 compiling, 2 done */
    uint32_t result;
    int32_t rule; /* -1 none */
} refent;

typedef struct sc {
    hx_rx *rx;
    const cJSON *root;
    hx_err *err;
    int draft; /* 4, 6, 7, 2019, 2020 */
    uint32_t ws, comma, colon, any, str_any;
    int any_rule;
    refent *refs;
    int n_refs, cap_refs;
    cJSON **tmps; /* merged schemas we own */
    int n_tmps, cap_tmps;
    int depth;
    int int_exact;   /* number literals as integers only (draft 4 integer) */
    int gen;         /* hx_grammar_params.generation: bounded numbers */
    double deadline; /* compile budget (monotonic seconds) */
    char path[768];
    size_t plen;
} sc;

static int sc_value(sc *c, const cJSON *s, uint32_t *out);

/* ---- errors and paths ---- */
__attribute__((format(printf, 3, 4)))
static int sc_fail(sc *c, int rc, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hx_err_set(c->err, rc, "%s at %s", msg, c->plen ? c->path : "/");
}

static size_t path_push(sc *c, const char *a, const char *b)
{
    size_t old = c->plen;
    int n = snprintf(c->path + c->plen, sizeof c->path - c->plen, "/%s%s%s",
                     a, b ? "/" : "", b ? b : "");
    if (n > 0) c->plen += (size_t)n;
    if (c->plen >= sizeof c->path) c->plen = sizeof c->path - 1;
    return old;
}

static void path_pop(sc *c, size_t old)
{
    c->plen = old;
    c->path[old] = 0;
}

static cJSON *own(sc *c, cJSON *j)
{
    if (!j) return NULL;
    if (c->n_tmps == c->cap_tmps) {
        int nc = c->cap_tmps ? c->cap_tmps * 2 : 16;
        void *q = hx_realloc(c->tmps, (size_t)nc * sizeof *c->tmps);
        if (!q) { cJSON_Delete(j); return NULL; }
        c->tmps = q;
        c->cap_tmps = nc;
    }
    c->tmps[c->n_tmps++] = j;
    return j;
}

/* ---- keyword tables ---- */
static const char *const k_ignored[] = {
    "$schema", "$id", "id", "$comment", "title", "description", "default",
    "examples", "example", "readOnly", "writeOnly", "deprecated", "$defs",
    "definitions", "contentMediaType", "contentEncoding", "contentSchema",
    "$anchor", "$vocabulary", "discriminator", "nullable_hx_unused", NULL};
static const char *const k_handled[] = {
    "type", "properties", "required", "additionalProperties",
    "patternProperties", "items", "prefixItems", "additionalItems",
    "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf",
    "$ref", "minLength", "maxLength", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "uniqueItems", "minProperties", "maxProperties", "$hx_patterns",
    "$hx_anyofs", "$hx_oneofs", "$hx_enums", NULL};
static const char *const k_rejected[] = {
    "not", "if", "then", "else", "dependencies", "dependentSchemas",
    "dependentRequired", "contains", "minContains", "maxContains",
    "propertyNames", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor",
    "disallow", "extends", "divisibleBy", NULL};

static int in_list(const char *const *l, const char *k)
{
    for (; *l; l++)
        if (!strcmp(*l, k)) return 1;
    return 0;
}

/* A keyword whose value makes it a no-op. */
static int trivial_kw(const cJSON *k)
{
    const char *n = k->string;
    if (!strcmp(n, "uniqueItems")) return cJSON_IsFalse(k);
    if (!strcmp(n, "minProperties")) return cJSON_IsNumber(k) && k->valuedouble <= 0;
    if (!strcmp(n, "minContains")) return 1; /* only with contains */
    if (!strcmp(n, "propertyNames") || !strcmp(n, "not_unused")) return cJSON_IsTrue(k) || (cJSON_IsObject(k) && !k->child);
    if (!strcmp(n, "dependencies") || !strcmp(n, "dependentRequired") || !strcmp(n, "dependentSchemas"))
        return cJSON_IsObject(k) && !k->child;
    if (!strcmp(n, "then") || !strcmp(n, "else")) return 1; /* need "if" */
    return 0;
}

static int check_keywords(sc *c, const cJSON *s)
{
    const cJSON *iff = cJSON_GetObjectItemCaseSensitive(s, "if");
    for (const cJSON *k = s->child; k; k = k->next) {
        if (!k->string) continue;
        if (in_list(k_handled, k->string) || in_list(k_ignored, k->string)) continue;
        if (in_list(k_rejected, k->string)) {
            if (trivial_kw(k) && !(iff && (!strcmp(k->string, "then") || !strcmp(k->string, "else"))))
                continue;
            return sc_fail(c, HX_ERR_UNSUPPORTED, "unsupported keyword \"%s\"", k->string);
        }
        /* unknown keywords are annotations for the validators: ignored */
    }
    return HX_OK;
}

/* ---- $ref ---- */
static void unescape_ptr(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '~' && r[1] == '0') { *w++ = '~'; r++; }
        else if (r[0] == '~' && r[1] == '1') { *w++ = '/'; r++; }
        else if (r[0] == '%' && r[1] && r[2]) {
            int hi = r[1], lo = r[2], v = 0, ok = 1;
            for (int i = 0; i < 2; i++) {
                int ch = i ? lo : hi, d;
                if (ch >= '0' && ch <= '9') d = ch - '0';
                else if ((ch | 32) >= 'a' && (ch | 32) <= 'f') d = (ch | 32) - 'a' + 10;
                else { ok = 0; d = 0; }
                v = v * 16 + d;
            }
            if (ok) { *w++ = (char)v; r += 2; }
            else *w++ = *r;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

static const cJSON *resolve(sc *c, const char *ref)
{
    if (ref[0] != '#') {
        /* "file.json#/x" relative to our own $id is not supported */
        return NULL;
    }
    const cJSON *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') return NULL; /* $anchor-style names */
    while (*p == '/') {
        const char *q = strchr(p + 1, '/');
        size_t n = q ? (size_t)(q - p - 1) : strlen(p + 1);
        char tok[256];
        if (n >= sizeof tok) return NULL;
        memcpy(tok, p + 1, n);
        tok[n] = 0;
        unescape_ptr(tok);
        if (cJSON_IsArray(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            if (*end || i < 0) return NULL;
            cur = cJSON_GetArrayItem(cur, (int)i);
        } else if (cJSON_IsObject(cur)) {
            cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
        } else {
            return NULL;
        }
        if (!cur) return NULL;
        p += n + 1;
    }
    return cur;
}

static refent *ref_entry(sc *c, const char *ref)
{
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ptr, ref)) return &c->refs[i];
    if (c->n_refs == c->cap_refs) {
        int nc = c->cap_refs ? c->cap_refs * 2 : 16;
        void *q = hx_realloc(c->refs, (size_t)nc * sizeof *c->refs);
        if (!q) return NULL;
        c->refs = q;
        c->cap_refs = nc;
    }
    refent *e = &c->refs[c->n_refs];
    e->ptr = hx_strdup(ref);
    if (!e->ptr) return NULL;
    e->state = 0;
    e->result = RX_NONE;
    e->rule = -1;
    c->n_refs++;
    return e;
}

static int sc_ref(sc *c, const char *ref, uint32_t *out)
{
    const cJSON *t = resolve(c, ref);
    if (!t) return sc_fail(c, HX_ERR_UNSUPPORTED, "unresolvable $ref \"%s\"", ref);
    refent *e = ref_entry(c, ref);
    if (!e) return hx_err_set(c->err, HX_ERR_NOMEM, "out of memory");
    int idx = (int)(e - c->refs);
    if (e->state == 2) { *out = e->result; return HX_OK; }
    if (e->state == 1) {
        if (e->rule < 0) e->rule = (int32_t)hx_rx_new_rule(c->rx);
        *out = hx_rx_call(c->rx, (uint32_t)e->rule);
        return HX_OK;
    }
    e->state = 1;
    size_t old = path_push(c, "$ref", NULL);
    int rc = sc_value(c, t, out);
    path_pop(c, old);
    e = &c->refs[idx];
    if (rc) { e->state = 0; return rc; }
    e->state = 2;
    e->result = *out;
    if (e->rule >= 0) hx_rx_set_rule(c->rx, (uint32_t)e->rule, *out);
    return HX_OK;
}

/* ---- JSON values: whitespace, any value ---- */
static uint32_t lit(sc *c, const char *s)
{
    return hx_rx_lit(c->rx, s, strlen(s));
}

static uint32_t json_string_any(sc *c)
{
    return hx_rx_cat3(c->rx, lit(c, "\""), hx_rx_rep(c->rx, hx_rx_enc_any(c->rx), 0, RX_INF), lit(c, "\""));
}

static uint32_t digits(sc *c, uint32_t mn, uint32_t mx)
{
    return hx_rx_rep(c->rx, hx_rx_range(c->rx, '0', '9'), mn, mx);
}

/* Digit counts: unbounded, or the generation bounds (grammar.h). */
static uint32_t gen_max(const sc *c, uint32_t bound)
{
    return c->gen ? bound : RX_INF;
}

static uint32_t nat_any(sc *c) /* 0 | [1-9][0-9]* */
{
    uint32_t more = digits(c, 0, gen_max(c, HX_GEN_INT_DIGITS - 1));
    return hx_rx_or(c->rx, lit(c, "0"), hx_rx_cat(c->rx, hx_rx_range(c->rx, '1', '9'), more));
}

static uint32_t frac_any(sc *c)
{
    return hx_rx_opt(c->rx, hx_rx_cat(c->rx, lit(c, "."), digits(c, 1, gen_max(c, HX_GEN_FRAC_DIGITS))));
}

static uint32_t exp_part(sc *c)
{
    hx_rx *rx = c->rx;
    return hx_rx_opt(rx, hx_rx_cat3(rx, hx_rx_or(rx, lit(c, "e"), lit(c, "E")),
                                    hx_rx_opt(rx, hx_rx_or(rx, lit(c, "+"), lit(c, "-"))),
                                    digits(c, 1, gen_max(c, HX_GEN_EXP_DIGITS))));
}

static uint32_t number_any(sc *c)
{
    return hx_rx_cat(c->rx, hx_rx_opt(c->rx, lit(c, "-")), hx_rx_cat3(c->rx, nat_any(c), frac_any(c), exp_part(c)));
}

/* [ WS (e (, e)*)? WS ] or { WS (k : v (, k : v)*)? WS } over elem. */
static uint32_t list_of(sc *c, const char *open, const char *close, uint32_t elem)
{
    hx_rx *rx = c->rx;
    uint32_t more = hx_rx_rep(rx, hx_rx_cat(rx, c->comma, elem), 0, RX_INF);
    uint32_t body = hx_rx_opt(rx, hx_rx_cat(rx, elem, more));
    return hx_rx_cat(rx, lit(c, open), hx_rx_cat3(rx, c->ws, body, hx_rx_cat(rx, c->ws, lit(c, close))));
}

static uint32_t any_value(sc *c)
{
    hx_rx *rx = c->rx;
    if (c->any) return c->any;
    uint32_t rule = hx_rx_new_rule(rx);
    uint32_t inner = hx_rx_call(rx, rule);
    uint32_t kv = hx_rx_cat3(rx, c->str_any, c->colon, inner);
    uint32_t v[6] = {lit(c, "null"), lit(c, "true"), lit(c, "false"), number_any(c),
                     c->str_any, list_of(c, "[", "]", inner)};
    uint32_t body = hx_rx_or(rx, hx_rx_orv(rx, v, 6), list_of(c, "{", "}", kv));
    hx_rx_set_rule(rx, rule, body);
    c->any = body;
    return body;
}

/* ---- number literals (Python repr) ---- */
int hx_py_float_repr(double v, char *out, size_t n)
{
    char tmp[40];
    int prec;
    if (!isfinite(v)) return snprintf(out, n, "%s", isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    /* tmp = [-]d.ddde[+-]XX */
    char mant[24];
    int mlen = 0, neg = tmp[0] == '-';
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') mant[mlen++] = *p;
    mant[mlen] = 0;
    while (mlen > 1 && mant[mlen - 1] == '0') mant[--mlen] = 0;
    int e = atoi(p + 1);
    char buf[64];
    int w = 0;
    if (neg) buf[w++] = '-';
    if (e >= -5 && e < 16) {
        if (e < 0) {
            w += sprintf(buf + w, "0.");
            for (int i = 0; i < -e - 1; i++) buf[w++] = '0';
            w += sprintf(buf + w, "%s", mant);
        } else {
            for (int i = 0; i <= e; i++) buf[w++] = i < mlen ? mant[i] : '0';
            buf[w++] = '.';
            if (mlen > e + 1) w += sprintf(buf + w, "%s", mant + e + 1);
            else buf[w++] = '0';
            buf[w] = 0;
        }
    } else {
        buf[w++] = mant[0];
        if (mlen > 1) { buf[w++] = '.'; w += sprintf(buf + w, "%s", mant + 1); }
        w += sprintf(buf + w, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    buf[w] = 0;
    return snprintf(out, n, "%s", buf);
}

/* ".0", ".00", ... after an integer value; generation writes none. */
static uint32_t zero_frac(sc *c)
{
    if (c->gen) return RX_NIL;
    return hx_rx_opt(c->rx, hx_rx_cat(c->rx, lit(c, "."), hx_rx_rep(c->rx, lit(c, "0"), 1, RX_INF)));
}

static uint32_t number_literal(sc *c, double v)
{
    char b[64];
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(b, sizeof b, "%.0f", fabs(v));
        /* 1.0 equals 1, but is no "integer" before draft 6 */
        uint32_t r = hx_rx_cat(c->rx, lit(c, b), c->int_exact ? RX_NIL : zero_frac(c));
        if (v < 0) return hx_rx_cat(c->rx, lit(c, "-"), r);
        if (v == 0) return hx_rx_cat(c->rx, hx_rx_opt(c->rx, lit(c, "-")), r);
        return r;
    }
    hx_py_float_repr(v, b, sizeof b);
    return lit(c, b);
}

static uint32_t json_literal(sc *c, const cJSON *v)
{
    hx_rx *rx = c->rx;
    if (cJSON_IsNull(v)) return lit(c, "null");
    if (cJSON_IsTrue(v)) return lit(c, "true");
    if (cJSON_IsFalse(v)) return lit(c, "false");
    if (cJSON_IsNumber(v)) return number_literal(c, v->valuedouble);
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        return hx_rx_cat3(rx, lit(c, "\""), hx_rx_enc_string(rx, s, strlen(s)), lit(c, "\""));
    }
    int obj = cJSON_IsObject(v);
    uint32_t acc = RX_NIL;
    int first = 1;
    for (const cJSON *k = v->child; k; k = k->next) {
        uint32_t e = json_literal(c, k);
        if (obj)
            e = hx_rx_cat3(rx, hx_rx_cat3(rx, lit(c, "\""), hx_rx_enc_string(rx, k->string, strlen(k->string)), lit(c, "\"")),
                           c->colon, e);
        acc = hx_rx_cat3(rx, acc, first ? RX_NIL : c->comma, e);
        first = 0;
    }
    return hx_rx_cat3(rx, lit(c, obj ? "{" : "["), hx_rx_cat3(rx, c->ws, acc, c->ws), lit(c, obj ? "}" : "]"));
}

/* ---- integer ranges ---- */
/* Digit strings of length n in [a, b] (same length, as decimal strings). */
static uint32_t same_len(sc *c, const char *a, const char *b, int n)
{
    hx_rx *rx = c->rx;
    if (n == 0) return RX_NIL;
    if (a[0] == b[0]) return hx_rx_cat(rx, hx_rx_byte(rx, a[0]), same_len(c, a + 1, b + 1, n - 1));
    int full = 1;
    for (int i = 1; i < n; i++) full &= a[i] == '0' && b[i] == '9';
    if (full) return hx_rx_cat(rx, hx_rx_range(rx, a[0], b[0]), digits(c, (uint32_t)n - 1, (uint32_t)n - 1));
    char nines[24], zeros[24];
    memset(nines, '9', (size_t)n);
    memset(zeros, '0', (size_t)n);
    uint32_t lo = hx_rx_cat(rx, hx_rx_byte(rx, a[0]), same_len(c, a + 1, nines + 1, n - 1));
    uint32_t hi = hx_rx_cat(rx, hx_rx_byte(rx, b[0]), same_len(c, zeros + 1, b + 1, n - 1));
    uint32_t mid = a[0] + 1 <= b[0] - 1
        ? hx_rx_cat(rx, hx_rx_range(rx, a[0] + 1, b[0] - 1), digits(c, (uint32_t)n - 1, (uint32_t)n - 1))
        : RX_NONE;
    return hx_rx_or(rx, hx_rx_or(rx, lo, mid), hi);
}

/* Natural numbers in [a, b] without leading zeros; b < 0 = unbounded. */
static uint32_t nat_range(sc *c, int64_t a, int64_t b)
{
    hx_rx *rx = c->rx;
    char sa[24], sb[24];
    uint32_t r = RX_NONE;
    if (a < 0) a = 0;
    if (b >= 0 && a > b) return RX_NONE;
    int la = snprintf(sa, sizeof sa, "%lld", (long long)a);
    int lb = b >= 0 ? snprintf(sb, sizeof sb, "%lld", (long long)b) : 20;
    for (int L = la; L <= lb && L <= 19; L++) {
        char lo[24], hi[24];
        if (L == la) strcpy(lo, sa);
        else { memset(lo, '0', (size_t)L); lo[0] = '1'; lo[L] = 0; }
        if (b >= 0 && L == lb) strcpy(hi, sb);
        else { memset(hi, '9', (size_t)L); hi[L] = 0; }
        r = hx_rx_or(rx, r, same_len(c, lo, hi, L));
    }
    if (b < 0) /* 20 digits and more */
        r = hx_rx_or(rx, r, hx_rx_cat(rx, hx_rx_range(rx, '1', '9'), digits(c, 19, RX_INF)));
    return r;
}

/* Magnitude (unsigned decimal, optional fraction) comparisons to an
 * integer L >= 0. fz: fraction all zeros allowed form; fa: any. */
static uint32_t mag_ge(sc *c, int64_t L, uint32_t fa) { return hx_rx_cat(c->rx, nat_range(c, L, -1), fa); }
static uint32_t mag_gt(sc *c, int64_t L, uint32_t fa, uint32_t fnz)
{
    return hx_rx_or(c->rx, hx_rx_cat(c->rx, nat_range(c, L + 1, -1), fa),
                    fnz == RX_NONE ? RX_NONE : hx_rx_cat(c->rx, nat_range(c, L, L), fnz));
}
static uint32_t mag_le(sc *c, int64_t L, uint32_t fa, uint32_t fz)
{
    return hx_rx_or(c->rx, L > 0 ? hx_rx_cat(c->rx, nat_range(c, 0, L - 1), fa) : RX_NONE,
                    hx_rx_cat(c->rx, nat_range(c, L, L), fz));
}
static uint32_t mag_lt(sc *c, int64_t L, uint32_t fa)
{
    return L > 0 ? hx_rx_cat(c->rx, nat_range(c, 0, L - 1), fa) : RX_NONE;
}

typedef struct bounds {
    int has_lo, has_hi, lo_ex, hi_ex;
    double lo, hi;
} bounds;

static int get_bounds(sc *c, const cJSON *s, bounds *b)
{
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
    const cJSON *emn = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum");
    const cJSON *emx = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
    memset(b, 0, sizeof *b);
    if (cJSON_IsNumber(mn)) { b->has_lo = 1; b->lo = mn->valuedouble; }
    if (cJSON_IsNumber(mx)) { b->has_hi = 1; b->hi = mx->valuedouble; }
    if (cJSON_IsTrue(emn)) b->lo_ex = b->has_lo;
    if (cJSON_IsTrue(emx)) b->hi_ex = b->has_hi;
    if (cJSON_IsNumber(emn) && (!b->has_lo || emn->valuedouble >= b->lo)) {
        b->has_lo = 1; b->lo = emn->valuedouble; b->lo_ex = 1;
    }
    if (cJSON_IsNumber(emx) && (!b->has_hi || emx->valuedouble <= b->hi)) {
        b->has_hi = 1; b->hi = emx->valuedouble; b->hi_ex = 1;
    }
    if ((mn && !cJSON_IsNumber(mn)) || (mx && !cJSON_IsNumber(mx)))
        return sc_fail(c, HX_ERR_FORMAT, "%s must be a number", "minimum/maximum");
    if ((b->has_lo && fabs(b->lo) > 9e15) || (b->has_hi && fabs(b->hi) > 9e15))
        return sc_fail(c, HX_ERR_UNSUPPORTED, "numeric bound too large%s", "");
    return HX_OK;
}

/* x >= L (or > L when ex) over signed numbers with the given fraction
 * forms; L is an integer here. */
static uint32_t num_lower(sc *c, int64_t L, int ex, uint32_t fa, uint32_t fz, uint32_t fnz, uint32_t mag_all)
{
    hx_rx *rx = c->rx;
    uint32_t minus = lit(c, "-");
    if (!ex) {
        if (L > 0) return mag_ge(c, L, fa);
        return hx_rx_or(rx, mag_all, hx_rx_cat(rx, minus, mag_le(c, -L, fa, fz)));
    }
    if (L >= 0) return mag_gt(c, L, fa, fnz);
    return hx_rx_or(rx, mag_all, hx_rx_cat(rx, minus, mag_lt(c, -L, fa)));
}

static uint32_t num_upper(sc *c, int64_t H, int ex, uint32_t fa, uint32_t fz, uint32_t fnz, uint32_t mag_all)
{
    hx_rx *rx = c->rx;
    uint32_t minus = lit(c, "-");
    if (!ex) {
        if (H >= 0) return hx_rx_or(rx, mag_le(c, H, fa, fz), hx_rx_cat(rx, minus, mag_all));
        return hx_rx_cat(rx, minus, mag_ge(c, -H, fa));
    }
    if (H > 0) return hx_rx_or(rx, mag_lt(c, H, fa), hx_rx_cat(rx, minus, mag_all));
    return hx_rx_cat(rx, minus, mag_gt(c, -H, fa, fnz));
}

static int sc_number(sc *c, const cJSON *s, int integer, uint32_t *out)
{
    hx_rx *rx = c->rx;
    bounds b;
    int rc = get_bounds(c, s, &b);
    if (rc) return rc;
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(s, "multipleOf");
    if (mo) {
        if (!cJSON_IsNumber(mo) || mo->valuedouble != 1.0)
            return sc_fail(c, HX_ERR_UNSUPPORTED, "unsupported keyword \"%s\"", "multipleOf");
        integer = 1;
    }
    int int_dot0 = integer && (c->draft >= 6 || mo);
    uint32_t fz = (int_dot0 || !integer) ? zero_frac(c) : RX_NIL;
    uint32_t fa = integer ? fz : frac_any(c);
    uint32_t fnz = integer ? RX_NONE
        : hx_rx_cat3(rx, lit(c, "."), digits(c, 0, RX_INF),
                     hx_rx_cat(rx, hx_rx_range(rx, '1', '9'), digits(c, 0, RX_INF)));
    if (!b.has_lo && !b.has_hi) {
        if (!integer) { *out = number_any(c); return HX_OK; }
        *out = hx_rx_cat3(rx, hx_rx_opt(rx, lit(c, "-")), nat_any(c), fz);
        return HX_OK;
    }
    uint32_t mag_all = hx_rx_cat(rx, nat_any(c), fa);
    uint32_t r = hx_rx_not(rx, RX_NONE);
    if (b.has_lo) {
        /* conservative for fractional bounds: round towards the inside */
        double L = ceil(b.lo);
        int ex = b.lo_ex && L == b.lo;
        if (integer && ex) { L += 1; ex = 0; }
        r = hx_rx_and(rx, r, num_lower(c, (int64_t)L, ex, fa, fz, fnz, mag_all));
    }
    if (b.has_hi) {
        double H = floor(b.hi);
        int ex = b.hi_ex && H == b.hi;
        if (integer && ex) { H -= 1; ex = 0; }
        r = hx_rx_and(rx, r, num_upper(c, (int64_t)H, ex, fa, fz, fnz, mag_all));
    }
    /* the range regexes allow any number of digits past the bounds */
    if (c->gen) r = hx_rx_and(rx, r, integer ? hx_rx_cat(rx, hx_rx_opt(rx, lit(c, "-")), nat_any(c)) : number_any(c));
    *out = r;
    return HX_OK;
}

/* ---- strings ---- */
static int get_count(sc *c, const cJSON *s, const char *k, uint32_t dflt, uint32_t *v)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(s, k);
    *v = dflt;
    if (!j) return HX_OK;
    if (!cJSON_IsNumber(j) || j->valuedouble < 0)
        return sc_fail(c, HX_ERR_FORMAT, "%s must be a non-negative number", k);
    *v = j->valuedouble > 1e6 ? 1000000 : (uint32_t)ceil(j->valuedouble);
    return HX_OK;
}

static int add_pattern(sc *c, const char *pat, uint32_t *content)
{
    uint32_t r;
    int rc = hx_rx_pattern(c->rx, pat, &r, c->err);
    if (rc) {
        char msg[sizeof c->err->msg];
        snprintf(msg, sizeof msg, "%s", c->err->msg);
        return sc_fail(c, rc, "pattern: %s", msg);
    }
    *content = *content == RX_NIL ? r : hx_rx_and(c->rx, *content, r);
    return HX_OK;
}

static int sc_string_content(sc *c, const cJSON *s, uint32_t *out)
{
    hx_rx *rx = c->rx;
    uint32_t mn, mx, content;
    int rc = get_count(c, s, "minLength", 0, &mn);
    if (!rc) rc = get_count(c, s, "maxLength", RX_INF, &mx);
    if (rc) return rc;
    if (mx != RX_INF && mx > 100000) mx = RX_INF, mn = mn > 100000 ? 100000 : mn;
    /* RX_NIL stands for "no constraint yet" (any string) */
    content = mn == 0 && mx == RX_INF ? RX_NIL : hx_rx_rep(rx, hx_rx_enc_any(rx), mn, mx);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    if (p) {
        if (!cJSON_IsString(p)) return sc_fail(c, HX_ERR_FORMAT, "%s must be a string", "pattern");
        if ((rc = add_pattern(c, p->valuestring, &content))) return rc;
    }
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(s, "$hx_patterns");
    for (const cJSON *q = ps ? ps->child : NULL; q; q = q->next)
        if ((rc = add_pattern(c, q->valuestring, &content))) return rc;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (cJSON_IsString(f)) {
        uint32_t fr;
        int k = hx_rx_format(rx, f->valuestring, &fr);
        if (k < 0) return sc_fail(c, HX_ERR_UNSUPPORTED, "unsupported format \"%s\"", f->valuestring);
        if (k > 0) content = content == RX_NIL ? fr : hx_rx_and(rx, content, fr);
    }
    *out = content == RX_NIL ? hx_rx_rep(rx, hx_rx_enc_any(rx), 0, RX_INF) : content;
    return HX_OK;
}

static int sc_string(sc *c, const cJSON *s, uint32_t *out)
{
    uint32_t content = RX_NONE;
    int rc = sc_string_content(c, s, &content);
    if (rc) return rc;
    *out = hx_rx_cat3(c->rx, lit(c, "\""), content, lit(c, "\""));
    return HX_OK;
}

/* ---- arrays ---- */
static int sc_sub(sc *c, const cJSON *s, const char *k1, const char *k2, uint32_t *out)
{
    size_t old = path_push(c, k1, k2);
    int rc = sc_value(c, s, out);
    path_pop(c, old);
    return rc;
}

static int sc_array(sc *c, const cJSON *s, uint32_t *out)
{
    hx_rx *rx = c->rx;
    const cJSON *pi = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *ai = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
    const cJSON *rest = it;
    uint32_t mn, mx, R, E[64];
    int k = 0, rc;
    if (cJSON_IsArray(it)) { pi = it; rest = ai; }
    else if (ai && !pi) ai = NULL; /* additionalItems without tuple: no-op */
    if (pi && !cJSON_IsArray(pi)) return sc_fail(c, HX_ERR_FORMAT, "%s must be an array", "prefixItems");
    if ((rc = get_count(c, s, "minItems", 0, &mn)) || (rc = get_count(c, s, "maxItems", RX_INF, &mx)))
        return rc;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(s, "uniqueItems");
    if (cJSON_IsTrue(u) && !(mx != RX_INF && mx <= 1))
        return sc_fail(c, HX_ERR_UNSUPPORTED, "unsupported keyword \"%s\"", "uniqueItems");
    for (const cJSON *e = pi ? pi->child : NULL; e; e = e->next, k++) {
        char num[16];
        if (k >= 64) return sc_fail(c, HX_ERR_UNSUPPORTED, "too many %s", "prefixItems");
        snprintf(num, sizeof num, "%d", k);
        if ((rc = sc_sub(c, e, cJSON_IsArray(it) ? "items" : "prefixItems", num, &E[k]))) return rc;
    }
    if (rest) {
        if ((rc = sc_sub(c, rest, rest == ai ? "additionalItems" : "items", NULL, &R))) return rc;
    } else {
        R = any_value(c);
    }
    if (mx != RX_INF && mx > 100000) mx = RX_INF;
    if (mn > 100000) return sc_fail(c, HX_ERR_UNSUPPORTED, "minItems too large%s", "");
    /* tail after the prefix: (sep R){...} */
    uint32_t kk = (uint32_t)k, S;
    uint32_t tmin = mn > kk ? mn - kk : 0, tmax = mx == RX_INF ? RX_INF : mx > kk ? mx - kk : 0;
    if (k == 0) {
        S = tmax == 0 ? RX_NIL
          : hx_rx_cat(rx, R, hx_rx_rep(rx, hx_rx_cat(rx, c->comma, R), tmin ? tmin - 1 : 0, tmax == RX_INF ? RX_INF : tmax - 1));
        if (tmin == 0) S = hx_rx_opt(rx, S);
    } else {
        S = hx_rx_rep(rx, hx_rx_cat(rx, c->comma, R), tmin, tmax);
    }
    for (int j = k - 1; j >= 0; j--) {
        uint32_t uj = (uint32_t)j;
        if (mx != RX_INF && uj >= mx) { S = uj < mn ? RX_NONE : RX_NIL; continue; }
        uint32_t el = hx_rx_cat3(rx, j ? c->comma : RX_NIL, E[j], S);
        S = uj >= mn ? hx_rx_opt(rx, el) : el;
    }
    *out = hx_rx_cat3(rx, lit(c, "["), hx_rx_cat3(rx, c->ws, S, c->ws), lit(c, "]"));
    return HX_OK;
}

/* ---- objects ---- */
static uint32_t key_lit(sc *c, const char *k)
{
    return hx_rx_cat3(c->rx, lit(c, "\""), hx_rx_enc_string(c->rx, k, strlen(k)), lit(c, "\""));
}

static int prop_count_ok(const cJSON *s, int n_req, int n_props, int closed)
{
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minProperties");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxProperties");
    if (mn && !(cJSON_IsNumber(mn) && mn->valuedouble <= n_req)) return 0;
    if (mx && !(cJSON_IsNumber(mx) && closed && mx->valuedouble >= n_props)) return 0;
    return 1;
}

typedef struct prop {
    const char *name;
    uint32_t kv;
    int req;
} prop;

static int req_has(const cJSON *req, const char *k)
{
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !strcmp(r->valuestring, k)) return 1;
    return 0;
}

static int sc_extra(sc *c, const cJSON *s, const prop *P, int n, uint32_t *out)
{
    hx_rx *rx = c->rx;
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    uint32_t listed = RX_NONE, key_any = json_string_any(c), extra = RX_NONE;
    uint32_t pats[32], not_pats = hx_rx_not(rx, RX_NONE);
    int np = 0, rc;
    for (int i = 0; i < n; i++) listed = hx_rx_or(rx, listed, key_lit(c, P[i].name));
    uint32_t free_key = listed == RX_NONE ? key_any : hx_rx_and(rx, key_any, hx_rx_not(rx, listed));
    for (const cJSON *e = pp ? pp->child : NULL; e; e = e->next) {
        uint32_t content = RX_NIL, v;
        if (np >= 32) return sc_fail(c, HX_ERR_UNSUPPORTED, "too many %s", "patternProperties");
        size_t old = path_push(c, "patternProperties", e->string);
        rc = add_pattern(c, e->string, &content);
        if (!rc) rc = sc_value(c, e, &v);
        path_pop(c, old);
        if (rc) return rc;
        uint32_t key = hx_rx_cat3(rx, lit(c, "\""), content, lit(c, "\""));
        for (int i = 0; i < n; i++) {
            const char *nm = P[i].name;
            uint32_t kl = key_lit(c, nm);
            if (hx_rx_is_empty(rx, hx_rx_and(rx, kl, key), 100000) != 1)
                return sc_fail(c, HX_ERR_UNSUPPORTED, "property \"%s\" also matches patternProperties", nm);
        }
        for (int j = 0; j < np; j++)
            if (hx_rx_is_empty(rx, hx_rx_and(rx, pats[j], key), 2000) != 1)
                return sc_fail(c, HX_ERR_UNSUPPORTED, "overlapping patternProperties%s", "");
        pats[np++] = key;
        not_pats = hx_rx_and(rx, not_pats, hx_rx_not(rx, key));
        extra = hx_rx_or(rx, extra, hx_rx_cat3(rx, hx_rx_and(rx, free_key, key), c->colon, v));
    }
    if (!cJSON_IsFalse(ap)) {
        uint32_t v;
        if (ap && !cJSON_IsTrue(ap)) {
            if ((rc = sc_sub(c, ap, "additionalProperties", NULL, &v))) return rc;
        } else {
            v = any_value(c);
        }
        uint32_t key = np ? hx_rx_and(rx, free_key, not_pats) : free_key;
        extra = hx_rx_or(rx, extra, hx_rx_cat3(rx, key, c->colon, v));
    }
    *out = extra;
    return HX_OK;
}

/* Schema for a required name not in properties: patternProperties that
 * match it, else additionalProperties. */
static int sc_required_extra(sc *c, const cJSON *s, const char *name, uint32_t *v)
{
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (pp && pp->child) return sc_fail(c, HX_ERR_UNSUPPORTED, "required \"%s\" with patternProperties", name);
    if (cJSON_IsFalse(ap)) { *v = RX_NONE; return HX_OK; }
    if (ap && !cJSON_IsTrue(ap)) return sc_sub(c, ap, "additionalProperties", NULL, v);
    *v = any_value(c);
    return HX_OK;
}

static int sc_object(sc *c, const cJSON *s, uint32_t *out)
{
    hx_rx *rx = c->rx;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    int n = 0, cap = 16, rc = HX_OK, n_req = 0;
    prop *P = hx_malloc((size_t)cap * sizeof *P);
    if (!P) return hx_err_set(c->err, HX_ERR_NOMEM, "out of memory");
    if (props && !cJSON_IsObject(props)) { rc = sc_fail(c, HX_ERR_FORMAT, "%s must be an object", "properties"); goto done; }
    if (req && !cJSON_IsArray(req)) { rc = sc_fail(c, HX_ERR_FORMAT, "%s must be an array", "required"); goto done; }
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *e = pass == 0 ? (props ? props->child : NULL) : (req ? req->child : NULL);
        for (; e; e = e->next) {
            const char *name = pass == 0 ? e->string : e->valuestring;
            uint32_t v;
            if (!name) {
                rc = sc_fail(c, pass ? HX_ERR_FORMAT : HX_ERR_INTERNAL, "%s",
                             pass ? "required names must be strings" : "unnamed property");
                goto done;
            }
            int dup = 0;
            for (int i = 0; i < n; i++) dup |= !strcmp(P[i].name, name);
            if (dup) continue;
            if (n == cap) {
                void *q = hx_realloc(P, (size_t)(cap *= 2) * sizeof *P);
                if (!q) { rc = hx_err_set(c->err, HX_ERR_NOMEM, "out of memory"); goto done; }
                P = q;
            }
            if (pass == 0) rc = sc_sub(c, e, "properties", name, &v);
            else rc = sc_required_extra(c, s, name, &v);
            if (rc) goto done;
            P[n].name = name;
            P[n].req = req_has(req, name);
            P[n].kv = hx_rx_cat3(rx, key_lit(c, name), c->colon, v);
            n_req += P[n].req;
            if (v == RX_NONE && P[n].req) { *out = RX_NONE; goto done; }
            n++;
        }
    }
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    int closed = cJSON_IsFalse(ap) && !(pp && pp->child);
    if (!prop_count_ok(s, n_req, n, closed)) {
        rc = sc_fail(c, HX_ERR_UNSUPPORTED, "unsupported keyword \"%s\"", "minProperties/maxProperties");
        goto done;
    }
    uint32_t extra = RX_NONE;
    if ((rc = sc_extra(c, s, P, n, &extra))) goto done;
    uint32_t more = hx_rx_rep(rx, hx_rx_cat(rx, c->comma, extra), 0, RX_INF);
    uint32_t A = hx_rx_opt(rx, hx_rx_cat(rx, extra, more)), B = more;
    for (int i = n - 1; i >= 0; i--) {
        uint32_t a = hx_rx_cat(rx, P[i].kv, B), b = hx_rx_cat3(rx, c->comma, P[i].kv, B);
        if (!P[i].req) { a = hx_rx_or(rx, a, A); b = hx_rx_or(rx, b, B); }
        A = a;
        B = b;
    }
    *out = hx_rx_cat3(rx, lit(c, "{"), hx_rx_cat3(rx, c->ws, A, c->ws), lit(c, "}"));
done:
    free(P);
    return rc;
}

/* ---- allOf merging ---- */
enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_NUM = 32, T_INT = 64, T_ALL = 127 };

static int type_bit(const char *t)
{
    static const char *const n[] = {"null", "boolean", "object", "array", "string", "number", "integer"};
    for (int i = 0; i < 7; i++)
        if (!strcmp(t, n[i])) return 1 << i;
    return -1;
}

static int types_of(sc *c, const cJSON *s, int *out)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    *out = T_ALL;
    if (!t) return HX_OK;
    int m = 0;
    if (cJSON_IsString(t)) {
        m = type_bit(t->valuestring);
        if (m < 0) return sc_fail(c, HX_ERR_FORMAT, "unknown type \"%s\"", t->valuestring);
    } else if (cJSON_IsArray(t)) {
        for (const cJSON *e = t->child; e; e = e->next) {
            int b = cJSON_IsString(e) ? type_bit(e->valuestring) : -1;
            if (b < 0) return sc_fail(c, HX_ERR_FORMAT, "bad %s", "type");
            m |= b;
        }
    } else {
        return sc_fail(c, HX_ERR_FORMAT, "bad %s", "type");
    }
    if (m & T_NUM) m |= T_INT;
    *out = m;
    return HX_OK;
}

static cJSON *types_json(int m)
{
    static const char *const n[] = {"null", "boolean", "object", "array", "string", "number", "integer"};
    cJSON *a = cJSON_CreateArray();
    if ((m & T_NUM) && (m & T_INT)) m &= ~T_INT;
    for (int i = 0; i < 7 && a; i++)
        if (m & (1 << i)) cJSON_AddItemToArray(a, cJSON_CreateString(n[i]));
    return a;
}

static cJSON *mk_allof2(const cJSON *a, const cJSON *b)
{
    cJSON *o = cJSON_CreateObject(), *l = cJSON_AddArrayToObject(o, "allOf");
    cJSON_AddItemToArray(l, cJSON_Duplicate(a, 1));
    cJSON_AddItemToArray(l, cJSON_Duplicate(b, 1));
    return o;
}

static void append_list(cJSON *dst, const char *key, const cJSON *item)
{
    cJSON *l = cJSON_GetObjectItemCaseSensitive(dst, key);
    if (!l) l = cJSON_AddArrayToObject(dst, key);
    if (l) cJSON_AddItemToArray(l, cJSON_Duplicate(item, 1));
}

static const cJSON *deref(sc *c, const cJSON *s, int *rc);

/* Replaces member old of object o by item, under old's name (cJSON's
 * ReplaceItemViaPointer would leave the new member nameless). */
static void replace_prop(cJSON *o, cJSON *old, cJSON *item)
{
    char *name = hx_strdup(old->string);
    if (name && item) cJSON_ReplaceItemInObjectCaseSensitive(o, name, item);
    else cJSON_Delete(item);
    free(name);
}

/* Merges b into the merged object m (a copy we own). */
static int merge_into(sc *c, cJSON *m, const cJSON *b)
{
    int rc = HX_OK;
    if (cJSON_IsTrue(b)) return HX_OK;
    if (cJSON_IsFalse(b)) { cJSON_AddItemToObject(m, "enum", cJSON_CreateArray()); return HX_OK; }
    b = deref(c, b, &rc);
    if (rc) return rc;
    for (const cJSON *k = b->child; k; k = k->next) {
        const char *n = k->string;
        cJSON *mine = cJSON_GetObjectItemCaseSensitive(m, n);
        if (in_list(k_ignored, n)) continue;
        if (!strcmp(n, "allOf")) {
            for (const cJSON *e = k->child; e; e = e->next)
                if ((rc = merge_into(c, m, e))) return rc;
            continue;
        }
        if (!strcmp(n, "anyOf") || !strcmp(n, "oneOf")) {
            append_list(m, !strcmp(n, "anyOf") ? "$hx_anyofs" : "$hx_oneofs", k);
            continue;
        }
        if (!mine) {
            if (!strcmp(n, "properties") || !strcmp(n, "additionalProperties") || !strcmp(n, "patternProperties"))
                goto props;
            cJSON_AddItemToObject(m, n, cJSON_Duplicate(k, 1));
            continue;
        }
        if (cJSON_Compare(mine, k, 1)) continue;
        if (!strcmp(n, "type")) {
            int ta, tb;
            if ((rc = types_of(c, m, &ta)) || (rc = types_of(c, b, &tb))) return rc;
            cJSON_ReplaceItemInObjectCaseSensitive(m, "type", types_json(ta & tb));
        } else if (!strcmp(n, "required")) {
            for (const cJSON *r = k->child; r; r = r->next)
                if (!req_has(mine, r->valuestring)) cJSON_AddItemToArray(mine, cJSON_Duplicate(r, 1));
        } else if (!strcmp(n, "minimum") || !strcmp(n, "minLength") || !strcmp(n, "minItems") ||
                   (!strcmp(n, "exclusiveMinimum") && cJSON_IsNumber(k) && cJSON_IsNumber(mine))) {
            if (k->valuedouble > mine->valuedouble) cJSON_SetNumberValue(mine, k->valuedouble);
        } else if (!strcmp(n, "maximum") || !strcmp(n, "maxLength") || !strcmp(n, "maxItems") ||
                   (!strcmp(n, "exclusiveMaximum") && cJSON_IsNumber(k) && cJSON_IsNumber(mine))) {
            if (k->valuedouble < mine->valuedouble) cJSON_SetNumberValue(mine, k->valuedouble);
        } else if (!strcmp(n, "pattern")) {
            append_list(m, "$hx_patterns", k);
        } else if (!strcmp(n, "enum") || !strcmp(n, "const")) {
            append_list(m, "$hx_enums", k);
        } else if (!strcmp(n, "items") && cJSON_IsObject(k) && cJSON_IsObject(mine)) {
            cJSON_ReplaceItemInObjectCaseSensitive(m, "items", mk_allof2(mine, k));
        } else if (!strcmp(n, "properties") || !strcmp(n, "additionalProperties") || !strcmp(n, "patternProperties")) {
            goto props;
        } else {
            return sc_fail(c, HX_ERR_UNSUPPORTED, "cannot merge \"%s\" in allOf", n);
        }
        continue;
    props:
        /* object keywords of b merged as a whole, once */
        if (strcmp(n, "properties") && cJSON_GetObjectItemCaseSensitive(b, "properties")) continue;
        if (!strcmp(n, "patternProperties") && cJSON_GetObjectItemCaseSensitive(b, "additionalProperties")) continue;
        {
            const cJSON *bp = cJSON_GetObjectItemCaseSensitive(b, "properties");
            const cJSON *bap = cJSON_GetObjectItemCaseSensitive(b, "additionalProperties");
            const cJSON *bpp = cJSON_GetObjectItemCaseSensitive(b, "patternProperties");
            cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "properties");
            cJSON *map = cJSON_GetObjectItemCaseSensitive(m, "additionalProperties");
            cJSON *mpp = cJSON_GetObjectItemCaseSensitive(m, "patternProperties");
            if ((bpp && bpp->child) || (mpp && mpp->child))
                return sc_fail(c, HX_ERR_UNSUPPORTED, "cannot merge \"%s\" in allOf", "patternProperties");
            if (!mp) mp = cJSON_AddObjectToObject(m, "properties");
            /* names only in m: constrained by b's additionalProperties */
            for (cJSON *p = mp->child, *nx; p; p = nx) {
                nx = p->next;
                if (!cJSON_GetObjectItemCaseSensitive(bp, p->string) && bap && !cJSON_IsTrue(bap))
                    replace_prop(mp, p, mk_allof2(p, bap));
            }
            for (const cJSON *p = bp ? bp->child : NULL; p; p = p->next) {
                cJSON *q = cJSON_GetObjectItemCaseSensitive(mp, p->string);
                if (q) replace_prop(mp, q, mk_allof2(q, p));
                else if (map && !cJSON_IsTrue(map)) cJSON_AddItemToObject(mp, p->string, mk_allof2(p, map));
                else cJSON_AddItemToObject(mp, p->string, cJSON_Duplicate(p, 1));
            }
            if (bap && !cJSON_IsTrue(bap)) {
                if (map && !cJSON_IsTrue(map)) cJSON_ReplaceItemInObjectCaseSensitive(m, "additionalProperties", mk_allof2(map, bap));
                else if (map) cJSON_ReplaceItemInObjectCaseSensitive(m, "additionalProperties", cJSON_Duplicate(bap, 1));
                else cJSON_AddItemToObject(m, "additionalProperties", cJSON_Duplicate(bap, 1));
            }
        }
    }
    return HX_OK;
}

/* Follows $ref (draft <= 7 ignores siblings; later drafts merge them). */
static const cJSON *deref(sc *c, const cJSON *s, int *rc)
{
    int hops = 0;
    *rc = HX_OK;
    while (cJSON_IsObject(s)) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!cJSON_IsString(r)) return s;
        const cJSON *t = resolve(c, r->valuestring);
        if (!t) { *rc = sc_fail(c, HX_ERR_UNSUPPORTED, "unresolvable $ref \"%s\"", r->valuestring); return s; }
        if (++hops > 32) { *rc = sc_fail(c, HX_ERR_UNSUPPORTED, "$ref loop%s", ""); return s; }
        int siblings = 0;
        for (const cJSON *k = s->child; k; k = k->next)
            siblings |= !in_list(k_ignored, k->string) && strcmp(k->string, "$ref");
        if (siblings && c->draft >= 2019) {
            cJSON *m = own(c, cJSON_CreateObject());
            if (!m) { *rc = HX_ERR_NOMEM; return s; }
            for (const cJSON *k = s->child; k; k = k->next)
                if (strcmp(k->string, "$ref")) cJSON_AddItemToObject(m, k->string, cJSON_Duplicate(k, 1));
            if ((*rc = merge_into(c, m, t))) return s;
            return m;
        }
        s = t;
    }
    return s;
}

/* ---- anyOf / oneOf / enum ---- */
static cJSON *without(sc *c, const cJSON *s, const char *k1, const char *k2)
{
    cJSON *m = own(c, cJSON_CreateObject());
    if (!m) return NULL;
    for (const cJSON *k = s->child; k; k = k->next)
        if (strcmp(k->string, k1) && strcmp(k->string, k2)) cJSON_AddItemToObject(m, k->string, cJSON_Duplicate(k, 1));
    return m;
}

static int only_keys(const cJSON *s, const char *const *allowed);

static int type_of_value(const cJSON *v);

/* The enum list or the const value of s (NULL if neither); *list set. */
static const cJSON *value_set(const cJSON *s, int *list)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum");
    *list = e != NULL;
    if (e) return cJSON_IsArray(e) ? e : NULL;
    return cJSON_GetObjectItemCaseSensitive(s, "const");
}

static int sets_disjoint(const cJSON *a, int la, const cJSON *b, int lb)
{
    for (const cJSON *x = la ? a->child : a; x; x = la ? x->next : NULL)
        for (const cJSON *y = lb ? b->child : b; y; y = lb ? y->next : NULL)
            if (cJSON_Compare(x, y, 1)) return 0;
    return 1;
}

/* JSON types a schema's instances can have (from type, enum and const). */
static int possible_types(sc *c, const cJSON *s)
{
    int t, l;
    if (types_of(c, s, &t)) return T_ALL;
    const cJSON *v = value_set(s, &l);
    if (v) {
        int vt = 0;
        for (const cJSON *x = l ? v->child : v; x; x = l ? x->next : NULL) vt |= type_of_value(x);
        t &= vt;
    }
    return t;
}

/* 1 if no instance can be valid under both a and b. Decided on the
 * schemas, not on the grammars: a grammar may accept fewer texts than its
 * schema allows (property order, rounded bounds), so an empty grammar
 * intersection would prove nothing. Sound cases only: disjoint types,
 * disjoint enum/const sets, or a property required by both whose
 * enum/const sets are disjoint (a discriminator), or one that a requires
 * and b forbids. */
static int schema_disjoint(sc *c, const cJSON *a, const cJSON *b)
{
    int rc, la, lb;
    hx_err saved = *c->err;
    a = deref(c, a, &rc);
    if (!rc) b = deref(c, b, &rc);
    *c->err = saved;
    if (rc) return 0;
    if (cJSON_IsFalse(a) || cJSON_IsFalse(b)) return 1;
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b)) return 0;
    if (!(possible_types(c, a) & possible_types(c, b))) return 1;
    const cJSON *va = value_set(a, &la), *vb = value_set(b, &lb);
    if (va && vb && sets_disjoint(va, la, vb, lb)) return 1;
    /* key-based arguments only hold when every common instance is an object */
    if ((possible_types(c, a) & possible_types(c, b)) != T_OBJ) return 0;
    for (int pass = 0; pass < 2; pass++) {
        const cJSON *x = pass ? b : a, *y = pass ? a : b;
        const cJSON *rx_ = cJSON_GetObjectItemCaseSensitive(x, "required");
        const cJSON *px = cJSON_GetObjectItemCaseSensitive(x, "properties");
        const cJSON *py = cJSON_GetObjectItemCaseSensitive(y, "properties");
        const cJSON *ry = cJSON_GetObjectItemCaseSensitive(y, "required");
        const cJSON *apy = cJSON_GetObjectItemCaseSensitive(y, "additionalProperties");
        const cJSON *ppy = cJSON_GetObjectItemCaseSensitive(y, "patternProperties");
        for (const cJSON *k = rx_ ? rx_->child : NULL; k; k = k->next) {
            if (!cJSON_IsString(k)) continue;
            const cJSON *sx = cJSON_GetObjectItemCaseSensitive(px, k->valuestring);
            const cJSON *sy = cJSON_GetObjectItemCaseSensitive(py, k->valuestring);
            if (!sy && cJSON_IsFalse(apy) && !(ppy && ppy->child)) return 1; /* y forbids k */
            if (!sx || !sy || !req_has(ry, k->valuestring)) continue;
            int l1, l2, e1 = 0, e2 = 0;
            sx = deref(c, sx, &e1);
            sy = deref(c, sy, &e2);
            *c->err = saved;
            if (e1 || e2) continue;
            const cJSON *v1 = value_set(sx, &l1), *v2 = value_set(sy, &l2);
            if (v1 && v2 && sets_disjoint(v1, l1, v2, l2)) return 1;
            if (!(possible_types(c, sx) & possible_types(c, sy))) return 1;
        }
    }
    return 0;
}

static int sc_branches(sc *c, const cJSON *s, const char *key, const cJSON *list, int one, uint32_t *out)
{
    hx_rx *rx = c->rx;
    uint32_t br[MAX_BRANCHES];
    const cJSON *bs[MAX_BRANCHES];
    int n = 0, rc;
    cJSON *rest = without(c, s, key, one ? "oneOf" : "anyOf");
    if (!rest) return HX_ERR_NOMEM;
    int alone = only_keys(rest, (const char *const[]){NULL});
    for (const cJSON *b = list->child; b; b = b->next) {
        char num[16];
        if (n >= MAX_BRANCHES) return sc_fail(c, HX_ERR_UNSUPPORTED, "too many %s branches", key);
        snprintf(num, sizeof num, "%d", n);
        size_t old = path_push(c, key, num);
        if (alone) {
            bs[n] = b;
            rc = sc_value(c, b, &br[n]);
        } else {
            cJSON *m = own(c, cJSON_Duplicate(rest, 1));
            if (!m) return HX_ERR_NOMEM;
            bs[n] = m;
            rc = merge_into(c, m, b);
            if (!rc) rc = sc_value(c, m, &br[n]);
        }
        path_pop(c, old);
        if (rc) return rc;
        n++;
    }
    if (one) {
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                if (!schema_disjoint(c, bs[i], bs[j]))
                    return sc_fail(c, HX_ERR_UNSUPPORTED, "oneOf branches %d and %d not provably disjoint", i, j);
            }
    }
    *out = hx_rx_orv(rx, br, (uint32_t)n);
    return HX_OK;
}

static int type_of_value(const cJSON *v)
{
    if (cJSON_IsNull(v)) return T_NULL;
    if (cJSON_IsBool(v)) return T_BOOL;
    if (cJSON_IsObject(v)) return T_OBJ;
    if (cJSON_IsArray(v)) return T_ARR;
    if (cJSON_IsString(v)) return T_STR;
    return v->valuedouble == floor(v->valuedouble) ? T_INT | T_NUM : T_NUM;
}

static uint32_t enum_regex(sc *c, const cJSON *e, int types)
{
    uint32_t r = RX_NONE;
    c->int_exact = c->draft < 6 && !(types & T_NUM) && (types & T_INT);
    if (cJSON_IsArray(e) && e->string && !strcmp(e->string, "enum")) {
        for (const cJSON *v = e->child; v; v = v->next)
            if (type_of_value(v) & types) r = hx_rx_or(c->rx, r, json_literal(c, v));
        c->int_exact = 0;
        return r;
    }
    r = (type_of_value(e) & types) ? json_literal(c, e) : RX_NONE;
    c->int_exact = 0;
    return r;
}

/* ---- main dispatch ---- */
static int only_keys(const cJSON *s, const char *const *allowed)
{
    for (const cJSON *k = s->child; k; k = k->next)
        if (!in_list(allowed, k->string) && !in_list(k_ignored, k->string)) return 0;
    return 1;
}

static int sc_typed(sc *c, const cJSON *s, int types, uint32_t *out)
{
    hx_rx *rx = c->rx;
    uint32_t acc = RX_NONE, r = RX_NONE;
    int rc;
    if (types & T_NULL) acc = hx_rx_or(rx, acc, lit(c, "null"));
    if (types & T_BOOL) acc = hx_rx_or(rx, acc, hx_rx_or(rx, lit(c, "true"), lit(c, "false")));
    if (types & (T_NUM | T_INT)) {
        if ((rc = sc_number(c, s, !(types & T_NUM), &r))) return rc;
        acc = hx_rx_or(rx, acc, r);
    }
    if (types & T_STR) {
        if ((rc = sc_string(c, s, &r))) return rc;
        acc = hx_rx_or(rx, acc, r);
    }
    if (types & T_ARR) {
        if ((rc = sc_array(c, s, &r))) return rc;
        acc = hx_rx_or(rx, acc, r);
    }
    if (types & T_OBJ) {
        if ((rc = sc_object(c, s, &r))) return rc;
        acc = hx_rx_or(rx, acc, r);
    }
    *out = acc;
    return HX_OK;
}

static int sc_object_schema(sc *c, const cJSON *s, uint32_t *out)
{
    int rc, types;
    const cJSON *l;
    if ((rc = check_keywords(c, s))) return rc;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (cJSON_IsString(ref)) {
        int sib = 0;
        for (const cJSON *k = s->child; k; k = k->next)
            sib |= !in_list(k_ignored, k->string) && strcmp(k->string, "$ref");
        if (!sib || c->draft < 2019) return sc_ref(c, ref->valuestring, out);
        const cJSON *m = deref(c, s, &rc);
        return rc ? rc : sc_value(c, m, out);
    }
    if ((l = cJSON_GetObjectItemCaseSensitive(s, "allOf"))) {
        cJSON *m = without(c, s, "allOf", "allOf");
        if (!m) return HX_ERR_NOMEM;
        size_t old = path_push(c, "allOf", NULL);
        for (const cJSON *e = l->child; e && !rc; e = e->next) rc = merge_into(c, m, e);
        path_pop(c, old);
        return rc ? rc : sc_value(c, m, out);
    }
    if ((l = cJSON_GetObjectItemCaseSensitive(s, "anyOf"))) return sc_branches(c, s, "anyOf", l, 0, out);
    if ((l = cJSON_GetObjectItemCaseSensitive(s, "oneOf"))) return sc_branches(c, s, "oneOf", l, 1, out);
    if ((l = cJSON_GetObjectItemCaseSensitive(s, "$hx_anyofs")) && l->child) {
        cJSON *m = own(c, cJSON_Duplicate(s, 1));
        cJSON *first = cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(m, "$hx_anyofs"), 0);
        cJSON_AddItemToObject(m, "anyOf", first);
        return sc_value(c, m, out);
    }
    if ((l = cJSON_GetObjectItemCaseSensitive(s, "$hx_oneofs")) && l->child) {
        cJSON *m = own(c, cJSON_Duplicate(s, 1));
        cJSON *first = cJSON_DetachItemFromArray(cJSON_GetObjectItemCaseSensitive(m, "$hx_oneofs"), 0);
        cJSON_AddItemToObject(m, "oneOf", first);
        return sc_value(c, m, out);
    }
    if ((rc = types_of(c, s, &types))) return rc;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *ens = cJSON_GetObjectItemCaseSensitive(s, "$hx_enums");
    if (en || cn || ens) {
        static const char *const simple[] = {"enum", "const", "type", "$hx_enums", NULL};
        uint32_t r = hx_rx_not(c->rx, RX_NONE);
        if (en && !cJSON_IsArray(en)) return sc_fail(c, HX_ERR_FORMAT, "%s must be an array", "enum");
        if (en) r = hx_rx_and(c->rx, r, enum_regex(c, en, types));
        if (cn) r = hx_rx_and(c->rx, r, enum_regex(c, cn, types));
        for (const cJSON *e = ens ? ens->child : NULL; e; e = e->next) r = hx_rx_and(c->rx, r, enum_regex(c, e, types));
        if (!only_keys(s, simple)) {
            uint32_t rest;
            if ((rc = sc_typed(c, s, types, &rest))) return rc;
            if (c->rx->nodes[rest].has_call)
                return sc_fail(c, HX_ERR_UNSUPPORTED, "enum beside recursive keywords%s", "");
            r = hx_rx_and(c->rx, r, rest);
        }
        *out = r;
        return HX_OK;
    }
    return sc_typed(c, s, types, out);
}

static int sc_value(sc *c, const cJSON *s, uint32_t *out)
{
    int rc;
    if (cJSON_IsTrue(s)) { *out = any_value(c); return HX_OK; }
    if (cJSON_IsFalse(s)) { *out = RX_NONE; return HX_OK; }
    if (!cJSON_IsObject(s)) return sc_fail(c, HX_ERR_FORMAT, "schema must be an object or a boolean%s", "");
    if (++c->depth > MAX_DEPTH) { c->depth--; return sc_fail(c, HX_ERR_RANGE, "schema nested too deeply%s", ""); }
    if (hx_time_mono() > c->deadline) {
        c->depth--;
        return sc_fail(c, HX_ERR_RANGE, "schema too complex: compile budget of %d s exceeded", COMPILE_BUDGET_S);
    }
    rc = sc_object_schema(c, s, out);
    c->depth--;
    if (!rc && c->rx->failed) rc = hx_err_set(c->err, HX_ERR_RANGE, "grammar too large");
    return rc;
}

static int detect_draft(const cJSON *root)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "$schema");
    if (!cJSON_IsString(s)) return 2020;
    const char *v = s->valuestring;
    if (strstr(v, "draft-03") || strstr(v, "draft-04")) return 4;
    if (strstr(v, "draft-06")) return 6;
    if (strstr(v, "draft-07")) return 7;
    if (strstr(v, "2019-09")) return 2019;
    return 2020;
}

uint32_t hx_json_ws(hx_rx *rx, const hx_grammar_params *p)
{
    static const uint32_t ws_bits[8] = {0x2600, 1, 0, 0, 0, 0, 0, 0}; /* \t \n \r space */
    if (p->compact) return RX_NIL;
    uint32_t max = p->ws_max > 0 ? (uint32_t)p->ws_max : p->generation ? HX_GEN_WS : RX_INF;
    return hx_rx_rep(rx, hx_rx_class(rx, ws_bits), 0, max);
}

int hx_schema_compile_rx(hx_rx *rx, const cJSON *schema, const hx_grammar_params *p, uint32_t *out,
                         hx_err *err)
{
    sc c;
    memset(&c, 0, sizeof c);
    c.rx = rx;
    c.root = schema;
    c.err = err;
    c.draft = cJSON_IsObject(schema) ? detect_draft(schema) : 2020;
    c.deadline = hx_time_mono() + COMPILE_BUDGET_S;
    c.gen = p->generation != 0;
    c.ws = hx_json_ws(rx, p);
    c.comma = hx_rx_cat3(rx, c.ws, lit(&c, ","), c.ws);
    c.colon = hx_rx_cat3(rx, c.ws, lit(&c, ":"), c.ws);
    c.str_any = json_string_any(&c);
    int rc = sc_value(&c, schema, out);
    for (int i = 0; i < c.n_refs; i++) {
        if (c.refs[i].rule >= 0 && c.refs[i].state != 2 && !rc)
            rc = hx_err_set(err, HX_ERR_INTERNAL, "unfinished $ref rule");
        free(c.refs[i].ptr);
    }
    free(c.refs);
    for (int i = 0; i < c.n_tmps; i++) cJSON_Delete(c.tmps[i]);
    free(c.tmps);
    if (!rc && *out == RX_NONE) rc = hx_err_set(err, HX_ERR_UNSUPPORTED, "schema is unsatisfiable");
    return rc;
}
