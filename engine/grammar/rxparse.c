/* rxparse.c: character sets encoded as JSON-string bytes (raw UTF-8 plus
 * Python json.dumps escapes), Python-re patterns and the standard formats. */
#include <stdlib.h>
#include <string.h>

#include "engine/grammar/gint.h"

#define CP_MAX 0x10FFFFu

/* ---- code point sets ---- */
static int cps_add(rx_cps *s, uint32_t lo, uint32_t hi)
{
    if (lo > hi) return 0;
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 8;
        void *q = hx_realloc(s->r, (size_t)nc * sizeof *s->r);
        if (!q) return -1;
        s->r = q;
        s->cap = nc;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
    return 0;
}

static int cmp_rng(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void cps_norm(rx_cps *s)
{
    if (!s->n) return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_rng);
    int w = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[w][1] + 1) {
            if (s->r[i][1] > s->r[w][1]) s->r[w][1] = s->r[i][1];
        } else {
            s->r[++w][0] = s->r[i][0];
            s->r[w][1] = s->r[i][1];
        }
    }
    s->n = w + 1;
}

static int cps_negate(rx_cps *s)
{
    rx_cps o = {0};
    uint32_t next = 0;
    cps_norm(s);
    for (int i = 0; i < s->n; i++) {
        if (s->r[i][0] > next && cps_add(&o, next, s->r[i][0] - 1)) goto oom;
        next = s->r[i][1] + 1;
    }
    if (next <= CP_MAX && cps_add(&o, next, CP_MAX)) goto oom;
    free(s->r);
    *s = o;
    return 0;
oom:
    free(o.r);
    return -1;
}

/* Drops everything at or above lo. */
static void cps_cut(rx_cps *s, uint32_t lo)
{
    int w = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i][0] >= lo) continue;
        s->r[w][0] = s->r[i][0];
        s->r[w][1] = s->r[i][1] < lo ? s->r[i][1] : lo - 1;
        w++;
    }
    s->n = w;
}

/* ---- UTF-8 ranges ---- */
static int utf8_len(uint32_t c)
{
    return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

static int utf8_put(uint32_t c, uint8_t *o)
{
    int n = utf8_len(c);
    if (n == 1) { o[0] = (uint8_t)c; return 1; }
    for (int i = n - 1; i > 0; i--) { o[i] = 0x80 | (c & 0x3f); c >>= 6; }
    o[0] = (uint8_t)((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | c);
    return n;
}

static uint32_t utf8_seq(hx_rx *rx, uint32_t lo, uint32_t hi)
{
    int n = utf8_len(lo);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) == (hi & ~m)) continue;
        if (lo & m)
            return hx_rx_or(rx, utf8_seq(rx, lo, lo | m), utf8_seq(rx, (lo | m) + 1, hi));
        if ((hi & m) != m)
            return hx_rx_or(rx, utf8_seq(rx, lo, (hi & ~m) - 1), utf8_seq(rx, hi & ~m, hi));
    }
    uint8_t a[4], b[4];
    utf8_put(lo, a);
    utf8_put(hi, b);
    uint32_t r = RX_NIL;
    for (int i = n - 1; i >= 0; i--) r = hx_rx_cat(rx, hx_rx_range(rx, a[i], b[i]), r);
    return r;
}

static uint32_t utf8_ranges(hx_rx *rx, uint32_t lo, uint32_t hi)
{
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, CP_MAX};
    uint32_t r = RX_NONE;
    if (lo <= 0xDFFF && hi >= 0xD800) { /* no surrogates */
        if (lo < 0xD800) r = utf8_ranges(rx, lo, 0xD7FF);
        if (hi > 0xDFFF) r = hx_rx_or(rx, r, utf8_ranges(rx, 0xE000, hi));
        return r;
    }
    for (int i = 0; i < 4 && lo <= hi; i++) {
        if (lo > bounds[i]) continue;
        uint32_t h = hi < bounds[i] ? hi : bounds[i];
        r = hx_rx_or(rx, r, utf8_seq(rx, lo, h));
        lo = h + 1;
    }
    return r;
}

/* Python json.dumps escape of an ASCII control or special character. */
static int esc_of(uint32_t c, char *o)
{
    switch (c) {
    case '"': strcpy(o, "\\\""); return 2;
    case '\\': strcpy(o, "\\\\"); return 2;
    case '\b': strcpy(o, "\\b"); return 2;
    case '\f': strcpy(o, "\\f"); return 2;
    case '\n': strcpy(o, "\\n"); return 2;
    case '\r': strcpy(o, "\\r"); return 2;
    case '\t': strcpy(o, "\\t"); return 2;
    default:
        if (c < 0x20) {
            static const char hx[] = "0123456789abcdef";
            memcpy(o, "\\u00", 4);
            o[4] = hx[c >> 4];
            o[5] = hx[c & 15];
            o[6] = 0;
            return 6;
        }
        return 0;
    }
}

/* Escapes factored as \\ (short | u00 (0 lo0 | 1 lo1)) so that
 * derivatives stay small. */
static uint32_t enc_escapes(hx_rx *rx, const uint8_t *need)
{
    static const char hx[] = "0123456789abcdef";
    uint32_t shortb[8] = {0}, lo[2][8] = {{0}, {0}};
    int any = 0;
    char e[8];
    for (int c = 0; c < 0x80; c++) {
        if (!need[c]) continue;
        int n = esc_of((uint32_t)c, e);
        any = 1;
        if (n == 2) shortb[(uint8_t)e[1] >> 5] |= 1u << ((uint8_t)e[1] & 31);
        else lo[c >> 4][(uint8_t)hx[c & 15] >> 5] |= 1u << ((uint8_t)hx[c & 15] & 31);
    }
    if (!any) return RX_NONE;
    uint32_t u = hx_rx_or(rx, hx_rx_cat(rx, hx_rx_byte(rx, '0'), hx_rx_class(rx, lo[0])),
                          hx_rx_cat(rx, hx_rx_byte(rx, '1'), hx_rx_class(rx, lo[1])));
    uint32_t tail = hx_rx_or(rx, hx_rx_class(rx, shortb), hx_rx_cat(rx, hx_rx_lit(rx, "u00", 3), u));
    return hx_rx_cat(rx, hx_rx_byte(rx, '\\'), tail);
}

uint32_t hx_rx_enc_class(hx_rx *rx, const rx_cps *set)
{
    uint32_t bits[8] = {0}, r = RX_NONE;
    uint8_t need[0x80] = {0};
    char e[8];
    for (int i = 0; i < set->n; i++) {
        uint32_t lo = set->r[i][0], hi = set->r[i][1];
        for (uint32_t c = lo; c <= hi && c < 0x80; c++) {
            if (c == 0 && rx->no_nul) continue;
            if (esc_of(c, e)) need[c] = 1;
            else bits[c >> 5] |= 1u << (c & 31);
        }
        if (hi >= 0x80) r = hx_rx_or(rx, r, utf8_ranges(rx, lo < 0x80 ? 0x80 : lo, hi));
    }
    r = hx_rx_or(rx, r, enc_escapes(rx, need));
    return hx_rx_or(rx, r, hx_rx_class(rx, bits));
}

uint32_t hx_rx_enc_any(hx_rx *rx)
{
    if (!rx->any_char) {
        uint32_t rr[1][2] = {{0, CP_MAX}};
        rx_cps s = {rr, 1, 1};
        rx->any_char = hx_rx_enc_class(rx, &s);
    }
    return rx->any_char;
}

uint32_t hx_rx_enc_string(hx_rx *rx, const char *s, size_t n)
{
    hx_buf b;
    char e[8];
    hx_buf_init(&b);
    for (size_t i = 0; i < n; i++) {
        int k = esc_of((uint8_t)s[i], e);
        if (k) hx_buf_append(&b, e, (size_t)k);
        else hx_buf_putc(&b, s[i]);
    }
    uint32_t r = b.oom ? RX_NONE : hx_rx_lit(rx, b.data ? b.data : "", b.len);
    if (b.oom) rx->failed = 1;
    hx_buf_free(&b);
    return r;
}

/* ---- pattern parser (Python re subset) ---- */
typedef struct pp {
    hx_rx *rx;
    const char *s;
    size_t i, n;
    hx_err *err;
    int bad;
} pp;

static int pp_fail(pp *p, const char *what)
{
    if (!p->bad)
        hx_err_set(p->err, HX_ERR_UNSUPPORTED, "regex: %s at offset %zu", what, p->i);
    p->bad = 1;
    return -1;
}

/* Decodes one UTF-8 code point from the pattern. */
static uint32_t pp_cp(pp *p)
{
    const uint8_t *u = (const uint8_t *)p->s + p->i;
    uint32_t c = u[0];
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (p->i + (size_t)n > p->n) n = 1;
    if (n > 1) {
        c &= 0x3F >> (n - 1);
        for (int k = 1; k < n; k++) c = c << 6 | (u[k] & 0x3F);
    }
    p->i += (size_t)n;
    return c;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int pp_hex(pp *p, int k, uint32_t *out)
{
    uint32_t v = 0;
    for (int j = 0; j < k; j++) {
        if (p->i >= p->n || hexval(p->s[p->i]) < 0) return pp_fail(p, "bad hex escape");
        v = v * 16 + (uint32_t)hexval(p->s[p->i++]);
    }
    *out = v;
    return 0;
}

/* Shorthand classes as under-approximations of Python's Unicode classes:
 * positive ones are ASCII (Python's are larger); negated ones exclude
 * everything non-ASCII. 'approx' is set when a set is such a shorthand. */
static int shorthand(int c, rx_cps *s, int *approx)
{
    int neg = c >= 'A' && c <= 'Z';
    switch (c | 0x20) {
    case 'd': cps_add(s, '0', '9'); break;
    case 'w':
        cps_add(s, '0', '9'); cps_add(s, 'A', 'Z'); cps_add(s, 'a', 'z');
        cps_add(s, '_', '_');
        break;
    case 's': cps_add(s, 9, 13); cps_add(s, 0x1c, 0x20); break;
    default: return 0;
    }
    if (neg) {
        if (cps_negate(s)) return -1;
        cps_cut(s, 0x80);
    }
    *approx = 1;
    return 1;
}

/* An escape: fills set (or returns a code point in *cp with set empty). */
static int pp_escape(pp *p, rx_cps *set, uint32_t *cp, int *approx, int in_class)
{
    if (p->i >= p->n) return pp_fail(p, "trailing backslash");
    char c = p->s[p->i];
    if (strchr("dDwWsS", c)) { p->i++; return shorthand(c, set, approx) < 0 ? -1 : 0; }
    p->i++;
    switch (c) {
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'a': *cp = 7; return 0;
    case '0': *cp = 0; return 0;
    case 'x': return pp_hex(p, 2, cp);
    case 'u': return pp_hex(p, 4, cp);
    case 'U': return pp_hex(p, 8, cp);
    case 'b':
        if (in_class) { *cp = 8; return 0; }
        return pp_fail(p, "word boundary \\b");
    default:
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '1' && c <= '9'))
            return pp_fail(p, "unsupported escape or backreference");
        p->i--;
        *cp = pp_cp(p);
        return 0;
    }
}

static int pp_class(pp *p, uint32_t *out)
{
    rx_cps s = {0};
    int neg = 0, approx = 0, first = 1;
    if (p->i < p->n && p->s[p->i] == '^') { neg = 1; p->i++; }
    while (p->i < p->n && (p->s[p->i] != ']' || first)) {
        uint32_t lo = UINT32_MAX, hi;
        first = 0;
        if (p->s[p->i] == '[' && p->i + 1 < p->n && p->s[p->i + 1] == ':')
            goto bad;
        if (p->s[p->i] == '\\') {
            p->i++;
            if (pp_escape(p, &s, &lo, &approx, 1)) goto fail;
            if (lo == UINT32_MAX) continue;
        } else {
            lo = pp_cp(p);
        }
        hi = lo;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            if (p->s[p->i] == '\\') {
                p->i++;
                rx_cps tmp = {0};
                hi = UINT32_MAX;
                if (pp_escape(p, &tmp, &hi, &approx, 1)) { free(tmp.r); goto fail; }
                free(tmp.r);
                if (hi == UINT32_MAX) goto bad;
            } else {
                hi = pp_cp(p);
            }
            if (hi < lo) goto bad;
        }
        if (cps_add(&s, lo, hi)) goto fail;
    }
    if (p->i >= p->n) { pp_fail(p, "unterminated character class"); goto fail; }
    p->i++;
    cps_norm(&s);
    if (neg) {
        if (cps_negate(&s)) goto fail;
        if (approx) cps_cut(&s, 0x80);
    }
    *out = hx_rx_enc_class(p->rx, &s);
    free(s.r);
    return 0;
bad:
    pp_fail(p, "unsupported character class");
fail:
    free(s.r);
    return -1;
}

static int pp_alt(pp *p, int depth, uint32_t *out);

static int pp_group(pp *p, int depth, uint32_t *out)
{
    if (p->i < p->n && p->s[p->i] == '?') {
        if (p->i + 1 < p->n && p->s[p->i + 1] == ':') p->i += 2;
        else if (p->i + 2 < p->n && p->s[p->i + 1] == 'P' && p->s[p->i + 2] == '<') {
            while (p->i < p->n && p->s[p->i] != '>') p->i++;
            p->i++;
        } else {
            return pp_fail(p, "lookaround or inline flag group");
        }
    }
    if (pp_alt(p, depth + 1, out)) return -1;
    if (p->i >= p->n || p->s[p->i] != ')') return pp_fail(p, "missing )");
    p->i++;
    return 0;
}

static int pp_atom(pp *p, int depth, uint32_t *out)
{
    uint32_t c = (uint8_t)p->s[p->i];
    if (c == '(') { p->i++; return pp_group(p, depth, out); }
    if (c == '[') { p->i++; return pp_class(p, out); }
    if (c == '.') {
        rx_cps s = {0};
        p->i++;
        cps_add(&s, '\n', '\n');
        if (cps_negate(&s)) return pp_fail(p, "out of memory");
        *out = hx_rx_enc_class(p->rx, &s);
        free(s.r);
        return 0;
    }
    if (c == '*' || c == '+' || c == '?') return pp_fail(p, "nothing to repeat");
    rx_cps s = {0};
    int approx = 0;
    uint32_t cp = UINT32_MAX;
    if (c == '\\') {
        p->i++;
        if (pp_escape(p, &s, &cp, &approx, 0)) { free(s.r); return -1; }
    } else {
        cp = pp_cp(p);
    }
    if (cp != UINT32_MAX) cps_add(&s, cp, cp);
    *out = hx_rx_enc_class(p->rx, &s);
    free(s.r);
    return 0;
}

/* {m}, {m,}, {m,n}, {,n}; returns 1 if a quantifier was read. */
static int pp_braces(pp *p, uint32_t *mn, uint32_t *mx)
{
    size_t j = p->i + 1;
    uint32_t a = 0, b;
    int da = 0, db = 0;
    while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && da < 6) a = a * 10 + (uint32_t)(p->s[j++] - '0'), da++;
    b = a;
    if (j < p->n && p->s[j] == ',') {
        j++;
        b = 0;
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9' && db < 6) b = b * 10 + (uint32_t)(p->s[j++] - '0'), db++;
        if (!db) b = RX_INF;
    } else if (!da) {
        return 0;
    }
    if (j >= p->n || p->s[j] != '}') return 0;
    p->i = j + 1;
    *mn = a;
    *mx = b;
    return 1;
}

static int pp_seq(pp *p, int depth, uint32_t *out, int *end_anchor)
{
    uint32_t acc = RX_NIL;
    while (p->i < p->n && p->s[p->i] != '|' && p->s[p->i] != ')') {
        uint32_t a, mn = 1, mx = 1;
        if (p->s[p->i] == '$') {
            p->i++;
            if (depth == 0 && (p->i >= p->n || p->s[p->i] == '|')) { *end_anchor = 1; break; }
            return pp_fail(p, "$ anchor not at the end");
        }
        if (p->s[p->i] == '^') return pp_fail(p, "^ anchor not at the start");
        if (pp_atom(p, depth, &a)) return -1;
        if (p->i < p->n) {
            char q = p->s[p->i];
            if (q == '*') { mn = 0; mx = RX_INF; p->i++; }
            else if (q == '+') { mn = 1; mx = RX_INF; p->i++; }
            else if (q == '?') { mn = 0; mx = 1; p->i++; }
            else if (q == '{' && pp_braces(p, &mn, &mx)) {}
            if ((mn != 1 || mx != 1) && p->i < p->n) {
                if (p->s[p->i] == '?') p->i++;
                else if (p->s[p->i] == '+') return pp_fail(p, "possessive quantifier");
                if (p->i < p->n && strchr("*+?", p->s[p->i])) return pp_fail(p, "multiple repeat");
            }
            if (mx != RX_INF && mx > 10000) return pp_fail(p, "repetition count too large");
            if (mn > mx) return pp_fail(p, "bad repetition range");
        }
        acc = hx_rx_cat(p->rx, acc, hx_rx_rep(p->rx, a, mn, mx));
    }
    *out = acc;
    return 0;
}

static int pp_alt(pp *p, int depth, uint32_t *out)
{
    uint32_t acc = RX_NONE;
    uint32_t any_star = hx_rx_rep(p->rx, hx_rx_enc_any(p->rx), 0, RX_INF);
    for (;;) {
        int start = 0, end = 0;
        uint32_t seq;
        if (p->i < p->n && p->s[p->i] == '^') {
            if (depth) return pp_fail(p, "^ anchor inside a group");
            start = 1;
            p->i++;
        }
        if (pp_seq(p, depth, &seq, &end)) return -1;
        if (depth == 0) {
            uint32_t nl = hx_rx_opt(p->rx, hx_rx_lit(p->rx, "\\n", 2));
            seq = hx_rx_cat3(p->rx, start ? RX_NIL : any_star, seq, end ? nl : any_star);
        }
        acc = hx_rx_or(p->rx, acc, seq);
        if (p->i < p->n && p->s[p->i] == '|') { p->i++; continue; }
        break;
    }
    *out = acc;
    return 0;
}

int hx_rx_pattern(hx_rx *rx, const char *pat, uint32_t *out, hx_err *err)
{
    pp p = {rx, pat, 0, strlen(pat), err, 0};
    if (pp_alt(&p, 0, out)) return HX_ERR_UNSUPPORTED;
    if (p.i != p.n) { pp_fail(&p, "unbalanced )"); return HX_ERR_UNSUPPORTED; }
    if (rx->failed) return hx_err_set(err, HX_ERR_RANGE, "regex too large");
    return HX_OK;
}

/* An exact (anchored, no trailing-newline) regex for format checks. */
static uint32_t exact(hx_rx *rx, const char *pat)
{
    pp p = {rx, pat, 0, strlen(pat), NULL, 0};
    uint32_t r;
    if (pp_seq(&p, 1, &r, NULL) || p.i != p.n) return RX_NONE;
    return r;
}

#define D "[0-9]"
#define YEAR D D D D
#define LEAP "([0-9][0-9](0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
#define DATE "(" YEAR "-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|" \
    YEAR "-(0[469]|11)-(0[1-9]|[12][0-9]|30)|" YEAR "-02-(0[1-9]|1[0-9]|2[0-8])|" \
    LEAP "-02-29)"
#define TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define UNRES "[A-Za-z0-9._~-]"
#define PCT "%[0-9A-Fa-f][0-9A-Fa-f]"
#define SUBD "[!$&'()*+,;=]"
#define PCHAR "(" UNRES "|" PCT "|" SUBD "|[:@])"
#define OCTET "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define IPV4 OCTET "\\." OCTET "\\." OCTET "\\." OCTET
#define URI "[A-Za-z][A-Za-z0-9+.-]*:(//((" UNRES "|" PCT "|" SUBD "|:)*@)?(" \
    UNRES "|" PCT "|" SUBD ")*(:[0-9]*)?(/" PCHAR "*)*|/(" PCHAR "+(/" PCHAR \
    "*)*)?|" PCHAR "+(/" PCHAR "*)*|)(\\?(" PCHAR "|[/?])*)?(#(" PCHAR "|[/?])*)?"
#define H "[0-9a-fA-F]"

/* An address as RFC 5321 bounds it: a local part of 1 to 64 characters
 * without controls, spaces or the specials ("(),:;<>@[\]), a domain of labels of 1
 * to 63 letters, digits (or non-ASCII, for IDNs) and inner hyphens, at
 * most 253 characters in all (or an address literal), at most 254 in all:
 * a model cannot ramble inside one. */
#define EMAIL_LOCAL "[^\\x00-\\x20\\x7f\"(),:;<>@\\[\\\\\\]\\xa0\\u2000-\\u200b\\u2028\\u2029\\u3000]{1,64}"
#define ALNUM_U "[^\\x00-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7f]"
#define LABEL ALNUM_U "(" ALNUM_U "|-){0,61}" ALNUM_U "|" ALNUM_U
#define EMAIL_DOMAIN "((" LABEL ")\\.)*(" LABEL ")"
#define EMAIL_LITERAL "\\[[0-9A-Fa-f.:]{2,45}\\]"

static uint32_t email(hx_rx *rx)
{
    static const char *const parts[] = {EMAIL_DOMAIN, ".{1,253}", EMAIL_LOCAL, "@",
                                        EMAIL_LITERAL, ".{3,254}"};
    uint32_t r[6];
    for (int i = 0; i < 6; i++)
        if ((r[i] = exact(rx, parts[i])) == RX_NONE) return RX_NONE;
    uint32_t addr = hx_rx_cat3(rx, r[2], r[3], hx_rx_or(rx, hx_rx_and(rx, r[0], r[1]), r[4]));
    return hx_rx_and(rx, addr, r[5]);
}

int hx_rx_format(hx_rx *rx, const char *fmt, uint32_t *out)
{
    /* each bounded, so that a value ends: a URI at 2,048 characters */
    static const struct { const char *name, *pattern, *bound; } known[] = {
        {"date-time", DATE "[Tt]" TIME, NULL},
        {"date", DATE, NULL},
        {"time", TIME, NULL},
        {"email", NULL, NULL},
        {"idn-email", NULL, NULL},
        {"uuid", H H H H H H H H "-" H H H H "-" H H H H "-" H H H H "-" H H H H H H H H H H H H, NULL},
        {"uri", URI, ".{1,2048}"},
        {"ipv4", IPV4, NULL},
    };
    static const char *const unsupported[] = {
        "hostname", "idn-hostname", "ipv6", "uri-reference", "iri",
        "iri-reference", "regex", "json-pointer", "relative-json-pointer",
        "uri-template", "duration", "color",
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(fmt, known[i].name)) continue;
        *out = known[i].pattern ? exact(rx, known[i].pattern) : email(rx);
        if (*out != RX_NONE && known[i].bound) *out = hx_rx_and(rx, *out, exact(rx, known[i].bound));
        return *out == RX_NONE || rx->failed ? -1 : 1;
    }
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (!strcmp(fmt, unsupported[i])) return -1;
    return 0;
}
