/* mime.c: RFC 5322 and MIME parsing for the mail tools: headers with
 * folding and RFC 2047 encoded words, multipart walking, base64 and
 * quoted-printable, charsets to UTF-8 (iconv), HTML reduced to text. */
#include <ctype.h>
#include <iconv.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/mail_int.h"

#define MAX_DEPTH 12     /* nested multiparts deeper than this are not opened */
#define MAX_PARTS 256
#define MAX_HEADERS 512

typedef struct header {
    const char *name;
    size_t name_len;
    const char *value; /* raw, still folded */
    size_t value_len;
} header;

typedef struct headers {
    header h[MAX_HEADERS];
    int n;
} headers;

typedef struct walk {
    hx_message *m;
    hx_buf plain, html, problems;
    hx_mail_att *att;
    int n_att, cap_att;
    int parts;
} walk;

/* ---- small string helpers ---- */

static void add_problem(walk *w, const char *what)
{
    if (w->problems.len) hx_buf_puts(&w->problems, "; ");
    hx_buf_puts(&w->problems, what);
}

/* Appends the UTF-8 encoding of cp. */
static void put_utf8(hx_buf *b, unsigned cp)
{
    char s[4];
    if (cp < 0x80) s[0] = (char)cp, hx_buf_append(b, s, 1);
    else if (cp < 0x800) {
        s[0] = (char)(0xc0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3f));
        hx_buf_append(b, s, 2);
    } else if (cp < 0x10000) {
        s[0] = (char)(0xe0 | (cp >> 12));
        s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        s[2] = (char)(0x80 | (cp & 0x3f));
        hx_buf_append(b, s, 3);
    } else {
        s[0] = (char)(0xf0 | (cp >> 18));
        s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        s[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        s[3] = (char)(0x80 | (cp & 0x3f));
        hx_buf_append(b, s, 4);
    }
}

/* Length of the valid UTF-8 sequence at s (max n bytes), 0 if invalid. */
static size_t utf8_valid_len(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80) return 1;
    size_t k;
    unsigned cp;
    if ((s[0] & 0xe0) == 0xc0) k = 2, cp = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0) k = 3, cp = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0) k = 4, cp = s[0] & 0x07;
    else return 0;
    if (k > n) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k;
}

static int is_valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = utf8_valid_len((const unsigned char *)s + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* Copies s to b as UTF-8: valid sequences as they are, other bytes as
 * U+FFFD. NUL bytes are dropped. */
static void put_sanitized(hx_buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_valid_len(u + i, n - i);
        if (!k) put_utf8(b, 0xfffd);
        else if (u[i]) hx_buf_append(b, u + i, k);
        i += k ? k : 1;
    }
}

char *hx_mail_to_utf8(const char *charset, const char *s, size_t len,
                      size_t *out_len)
{
    hx_buf b;
    hx_buf_init(&b);
    int utf8 = !charset || !*charset || !strcasecmp(charset, "utf-8") ||
               !strcasecmp(charset, "utf8") || !strcasecmp(charset, "us-ascii");
    iconv_t cd = utf8 ? (iconv_t)-1 : iconv_open("UTF-8", charset);
    if (cd == (iconv_t)-1 && !is_valid_utf8(s, len))
        cd = iconv_open("UTF-8", "WINDOWS-1252"); /* the most common mislabel */
    if (cd == (iconv_t)-1) {
        /* UTF-8 or ASCII: invalid sequences become U+FFFD */
        put_sanitized(&b, s, len);
    } else {
        char *in = (char *)s;
        size_t in_left = len;
        char tmp[4096];
        while (in_left) {
            char *o = tmp;
            size_t o_left = sizeof tmp;
            size_t r = iconv(cd, &in, &in_left, &o, &o_left);
            put_sanitized(&b, tmp, sizeof tmp - o_left);
            if (r == (size_t)-1 && o_left == sizeof tmp) {
                /* invalid or truncated input byte: replace and skip it */
                put_utf8(&b, 0xfffd);
                in++, in_left--;
            }
        }
        iconv_close(cd);
    }
    if (!b.data) hx_buf_reserve(&b, 0);
    return hx_buf_steal(&b, out_len);
}

/* ---- transfer encodings ---- */

static int b64_val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Lenient base64: skips characters outside the alphabet, stops at '='. */
static void decode_base64(hx_buf *out, const char *s, size_t n)
{
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) continue;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char c = (char)((acc >> bits) & 0xff);
            hx_buf_append(out, &c, 1);
        }
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Quoted-printable; q_header: RFC 2047 "Q" (underscore is a space). */
static void decode_qp(hx_buf *out, const char *s, size_t n, int q_header)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '_' && q_header) c = ' ';
        else if (c == '=' && i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
                 hexval((unsigned char)s[i + 2]) >= 0) {
            c = (char)(hexval((unsigned char)s[i + 1]) * 16 +
                       hexval((unsigned char)s[i + 2]));
            i += 2;
        } else if (c == '=' && !q_header) {
            /* soft line break "=\r\n" or "=\n"; a stray '=' is kept */
            size_t j = i + 1;
            while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
            if (j < n && s[j] == '\r') j++;
            if (j < n && s[j] == '\n') {
                i = j;
                continue;
            }
            if (j >= n) break;
        }
        hx_buf_append(out, &c, 1);
    }
}

/* ---- headers ---- */

/* Splits raw into headers and the body offset. Unfolding happens when a
 * value is decoded; here a continuation line just extends the value. */
static size_t parse_headers(const char *raw, size_t len, headers *hs)
{
    size_t i = 0;
    hs->n = 0;
    while (i < len) {
        size_t eol = i;
        while (eol < len && raw[eol] != '\n') eol++;
        size_t line_end = eol > i && raw[eol - 1] == '\r' ? eol - 1 : eol;
        size_t next = eol < len ? eol + 1 : eol;
        if (line_end == i) return next; /* blank line: body follows */
        if ((raw[i] == ' ' || raw[i] == '\t') && hs->n) {
            header *h = &hs->h[hs->n - 1];
            h->value_len = line_end - (size_t)(h->value - raw);
        } else {
            const char *colon = memchr(raw + i, ':', line_end - i);
            if (colon && hs->n < MAX_HEADERS) {
                header *h = &hs->h[hs->n++];
                h->name = raw + i;
                h->name_len = (size_t)(colon - (raw + i));
                while (h->name_len && isspace((unsigned char)h->name[h->name_len - 1]))
                    h->name_len--;
                h->value = colon + 1;
                h->value_len = line_end - (size_t)(colon + 1 - raw);
            } else if (!colon && hs->n == 0) {
                return i; /* no header at all: everything is body */
            }
        }
        i = next;
    }
    return len;
}

static const header *find_header(const headers *hs, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < hs->n; i++)
        if (hs->h[i].name_len == n && !strncasecmp(hs->h[i].name, name, n))
            return &hs->h[i];
    return NULL;
}

/* Decodes one encoded word "=?cs?E?text?=" at s; returns its length or 0. */
static size_t encoded_word(hx_buf *out, const char *s, size_t n)
{
    if (n < 8 || s[0] != '=' || s[1] != '?') return 0;
    const char *q1 = memchr(s + 2, '?', n - 2);
    if (!q1 || (size_t)(q1 - s) + 3 >= n || q1[2] != '?') return 0;
    char enc = (char)toupper((unsigned char)q1[1]);
    if (enc != 'B' && enc != 'Q') return 0;
    const char *text = q1 + 3;
    const char *end = NULL;
    for (const char *p = text; p + 1 < s + n; p++)
        if (p[0] == '?' && p[1] == '=') {
            end = p;
            break;
        }
    if (!end) return 0;
    char cs[64];
    size_t csl = (size_t)(q1 - (s + 2));
    if (csl >= sizeof cs) return 0;
    memcpy(cs, s + 2, csl);
    cs[csl] = '\0';
    char *star = strchr(cs, '*'); /* RFC 2231 language suffix */
    if (star) *star = '\0';
    hx_buf raw;
    hx_buf_init(&raw);
    if (enc == 'B') decode_base64(&raw, text, (size_t)(end - text));
    else decode_qp(&raw, text, (size_t)(end - text), 1);
    size_t ul;
    char *u = hx_mail_to_utf8(cs, raw.data ? raw.data : "", raw.len, &ul);
    hx_buf_append(out, u, ul);
    free(u);
    hx_buf_free(&raw);
    return (size_t)(end + 2 - s);
}

char *hx_mail_decode_header(const char *v, size_t n)
{
    hx_buf raw, out;
    hx_buf_init(&raw);
    hx_buf_init(&out);
    /* unfold: CRLF + WSP becomes the WSP */
    for (size_t i = 0; i < n; i++)
        if (v[i] != '\r' && v[i] != '\n') hx_buf_append(&raw, v + i, 1);
    const char *s = raw.data ? raw.data : "";
    size_t len = raw.len, i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
    int prev_word = 0;
    while (i < len) {
        size_t k = encoded_word(&out, s + i, len - i);
        if (k) {
            i += k;
            prev_word = 1;
            continue;
        }
        if (prev_word && (s[i] == ' ' || s[i] == '\t')) {
            /* whitespace between two encoded words is dropped */
            size_t j = i;
            while (j < len && (s[j] == ' ' || s[j] == '\t')) j++;
            hx_buf tmp;
            hx_buf_init(&tmp);
            size_t k2 = j < len ? encoded_word(&tmp, s + j, len - j) : 0;
            hx_buf_free(&tmp);
            if (k2) {
                i = j;
                continue;
            }
        }
        prev_word = 0;
        size_t start = i;
        while (i < len && !(s[i] == '=' && i + 1 < len && s[i + 1] == '?')) i++;
        if (i == start) i++; /* a "=?" that is not an encoded word */
        if (is_valid_utf8(s + start, i - start))
            hx_buf_append(&out, s + start, i - start);
        else { /* raw 8-bit header: most often Windows-1252 */
            size_t ul;
            char *u = hx_mail_to_utf8("WINDOWS-1252", s + start, i - start, &ul);
            hx_buf_append(&out, u, ul);
            free(u);
        }
    }
    hx_buf_free(&raw);
    while (out.len && (out.data[out.len - 1] == ' ' || out.data[out.len - 1] == '\t'))
        out.data[--out.len] = '\0';
    if (!out.data) hx_buf_reserve(&out, 0);
    return hx_buf_steal(&out, NULL);
}

static char *header_text(const headers *hs, const char *name)
{
    const header *h = find_header(hs, name);
    return h ? hx_mail_decode_header(h->value, h->value_len) : hx_strdup("");
}

/* Finds parameter `param` in a structured header value such as
 * `multipart/mixed; boundary="x"`; handles quotes and RFC 2231 `param*`.
 * Returns a malloc'd value or NULL. */
static char *header_param(const char *v, size_t n, const char *param)
{
    size_t pl = strlen(param);
    for (size_t i = 0; i < n; i++) {
        if (v[i] != ';') continue;
        size_t j = i + 1;
        while (j < n && isspace((unsigned char)v[j])) j++;
        if (n - j < pl || strncasecmp(v + j, param, pl)) continue;
        j += pl;
        int ext = j < n && v[j] == '*';
        if (ext) j++;
        while (j < n && isspace((unsigned char)v[j])) j++;
        if (j >= n || v[j] != '=') continue;
        j++;
        while (j < n && isspace((unsigned char)v[j])) j++;
        hx_buf b;
        hx_buf_init(&b);
        if (j < n && v[j] == '"') {
            for (j++; j < n && v[j] != '"'; j++) {
                if (v[j] == '\\' && j + 1 < n) j++;
                hx_buf_append(&b, v + j, 1);
            }
        } else {
            while (j < n && v[j] != ';' && !isspace((unsigned char)v[j]))
                hx_buf_append(&b, v + j++, 1);
        }
        if (!b.data) hx_buf_reserve(&b, 0);
        if (ext) { /* charset'lang'percent-encoded */
            char *q = strchr(b.data, '\'');
            char *q2 = q ? strchr(q + 1, '\'') : NULL;
            if (q2) {
                hx_buf dec;
                hx_buf_init(&dec);
                for (char *p = q2 + 1; *p; p++) {
                    if (*p == '%' && hexval((unsigned char)p[1]) >= 0 &&
                        hexval((unsigned char)p[2]) >= 0) {
                        char c = (char)(hexval((unsigned char)p[1]) * 16 +
                                        hexval((unsigned char)p[2]));
                        hx_buf_append(&dec, &c, 1);
                        p += 2;
                    } else
                        hx_buf_append(&dec, p, 1);
                }
                *q = '\0';
                char *u = hx_mail_to_utf8(b.data, dec.data ? dec.data : "",
                                          dec.len, NULL);
                hx_buf_free(&dec);
                hx_buf_free(&b);
                return u;
            }
        }
        char *r = hx_buf_steal(&b, NULL);
        if (!r) return NULL; /* out of memory */
        char *u = hx_mail_decode_header(r, strlen(r));
        free(r);
        return u;
    }
    return NULL;
}

/* The media type of a Content-Type value, lower case ("text/plain"). */
static void media_type(const header *h, char *out, size_t n)
{
    size_t i = 0, k = 0;
    if (!h) {
        snprintf(out, n, "text/plain");
        return;
    }
    while (i < h->value_len && isspace((unsigned char)h->value[i])) i++;
    while (i < h->value_len && h->value[i] != ';' &&
           !isspace((unsigned char)h->value[i]) && k + 1 < n)
        out[k++] = (char)tolower((unsigned char)h->value[i++]);
    out[k] = '\0';
    if (!k || !strchr(out, '/')) snprintf(out, n, "text/plain");
}

/* ---- HTML to text ---- */

static const struct {
    const char *name;
    unsigned cp;
} entities[] = {
    {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''},
    {"nbsp", ' '}, {"copy", 0xa9}, {"reg", 0xae}, {"euro", 0x20ac},
    {"mdash", 0x2014}, {"ndash", 0x2013}, {"hellip", 0x2026},
    {"laquo", 0xab}, {"raquo", 0xbb}, {"eacute", 0xe9}, {"egrave", 0xe8},
    {"agrave", 0xe0}, {"uuml", 0xfc}, {"ouml", 0xf6}, {"auml", 0xe4},
    {"szlig", 0xdf}, {"ccedil", 0xe7}, {"rsquo", 0x2019}, {"lsquo", 0x2018},
    {"rdquo", 0x201d}, {"ldquo", 0x201c},
};

/* Decodes the entity at s ('&' first); returns its length or 0. */
static size_t html_entity(hx_buf *b, const char *s, size_t n)
{
    const char *semi = memchr(s, ';', n < 12 ? n : 12);
    if (!semi) return 0;
    size_t el = (size_t)(semi - s) - 1;
    if (el >= 2 && s[1] == '#') {
        unsigned long cp = s[2] == 'x' || s[2] == 'X'
                               ? strtoul(s + 3, NULL, 16)
                               : strtoul(s + 2, NULL, 10);
        if (!cp || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) cp = 0xfffd;
        put_utf8(b, (unsigned)cp);
        return el + 2;
    }
    for (size_t i = 0; i < sizeof entities / sizeof entities[0]; i++)
        if (strlen(entities[i].name) == el && !strncmp(s + 1, entities[i].name, el)) {
            put_utf8(b, entities[i].cp);
            return el + 2;
        }
    return 0;
}

static int tag_is(const char *tag, size_t n, const char *name)
{
    size_t l = strlen(name);
    return n >= l && !strncasecmp(tag, name, l) &&
           (n == l || !isalnum((unsigned char)tag[l]));
}

/* Handles the tag starting at s[0] == '<'; returns the index after it. */
static size_t html_tag(hx_buf *b, const char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    int closing = j < n && s[j] == '/';
    if (closing) j++;
    const char *name = s + j;
    size_t rest = n - j;
    if (rest >= 3 && !strncmp(name, "!--", 3)) {
        const char *end = NULL;
        for (size_t k = j + 3; k + 2 < n; k++)
            if (!strncmp(s + k, "-->", 3)) { end = s + k; break; }
        return end ? (size_t)(end - s) + 3 : n;
    }
    size_t close = j;
    while (close < n && s[close] != '>') close++;
    if (!closing && (tag_is(name, rest, "script") || tag_is(name, rest, "style"))) {
        const char *which = tag_is(name, rest, "script") ? "</script" : "</style";
        for (size_t k = close; k + strlen(which) <= n; k++)
            if (!strncasecmp(s + k, which, strlen(which))) {
                while (k < n && s[k] != '>') k++;
                return k < n ? k + 1 : n;
            }
        return n;
    }
    static const char *const breaks[] = {"br", "p", "div", "li", "tr", "h1",
                                         "h2", "h3", "h4", "h5", "h6",
                                         "table", "ul", "ol", "blockquote"};
    for (size_t k = 0; k < sizeof breaks / sizeof breaks[0]; k++)
        if (tag_is(name, rest, breaks[k])) {
            hx_buf_putc(b, '\n');
            if (!closing && tag_is(name, rest, "li")) hx_buf_puts(b, "- ");
            break;
        }
    if (tag_is(name, rest, "td") || tag_is(name, rest, "th")) hx_buf_putc(b, ' ');
    return close < n ? close + 1 : n;
}

/* Collapses runs of spaces and more than two newlines. */
static char *tidy_text(const char *s, size_t n)
{
    hx_buf b;
    hx_buf_init(&b);
    int spaces = 0, newlines = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\r') continue;
        if (c == '\n') {
            spaces = 0;
            while (b.len && b.data[b.len - 1] == ' ') b.data[--b.len] = '\0';
            if (++newlines <= 2 && b.len) hx_buf_putc(&b, '\n');
            continue;
        }
        if (c == ' ' || c == '\t') {
            if (!spaces++ && !newlines && b.len) hx_buf_putc(&b, ' ');
            continue;
        }
        spaces = newlines = 0;
        hx_buf_putc(&b, c);
    }
    while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
        b.data[--b.len] = '\0';
    if (!b.data) hx_buf_reserve(&b, 0);
    return hx_buf_steal(&b, NULL);
}

char *hx_mail_html_to_text(const char *s, size_t n)
{
    hx_buf b;
    hx_buf_init(&b);
    for (size_t i = 0; i < n;) {
        if (s[i] == '<') {
            i = html_tag(&b, s, n, i);
        } else if (s[i] == '&') {
            size_t k = html_entity(&b, s + i, n - i);
            if (!k) hx_buf_putc(&b, '&');
            i += k ? k : 1;
        } else {
            char c = s[i] == '\n' || s[i] == '\r' || s[i] == '\t' ? ' ' : s[i];
            hx_buf_putc(&b, c);
            i++;
        }
    }
    char *t = tidy_text(b.data ? b.data : "", b.len);
    hx_buf_free(&b);
    if (!t || is_valid_utf8(t, strlen(t))) return t;
    hx_buf_init(&b); /* the input was not UTF-8: never pass bad bytes on */
    put_sanitized(&b, t, strlen(t));
    free(t);
    return hx_buf_steal(&b, NULL);
}

/* ---- dates ---- */

static const char *const months[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                     "jul", "aug", "sep", "oct", "nov", "dec"};

int64_t hx_mail_parse_date(const char *s)
{
    if (!s) return 0;
    const char *comma = strchr(s, ',');
    if (comma) s = comma + 1;
    int d, y, h, mi, se = 0;
    char mon[8], zone[16] = "";
    int n = sscanf(s, " %d %7s %d %d:%d:%d %15s", &d, mon, &y, &h, &mi, &se, zone);
    if (n < 5) return 0;
    if (n == 5) { /* no seconds: "%d:%d zone" */
        if (sscanf(s, " %d %7s %d %d:%d %15s", &d, mon, &y, &h, &mi, zone) < 5)
            return 0;
        se = 0;
    }
    int m = -1;
    for (int i = 0; i < 12; i++)
        if (!strncasecmp(mon, months[i], 3)) m = i + 1;
    if (m < 0 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return 0;
    if (y < 100) y += y < 50 ? 2000 : 1900;
    int off = 0;
    if ((zone[0] == '+' || zone[0] == '-') && strlen(zone) >= 5) {
        int z = atoi(zone + 1);
        off = ((z / 100) * 3600 + (z % 100) * 60) * (zone[0] == '-' ? -1 : 1);
    }
    return hx_days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + se - off;
}

void hx_mail_format_date(int64_t t, int off, char *buf, size_t n)
{
    static const char *const wd[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
    static const char *const mn[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int64_t lt = t + off;
    int64_t days = lt >= 0 ? lt / 86400 : (lt - 86399) / 86400;
    int64_t secs = lt - days * 86400;
    int y, m, d;
    hx_civil_from_days(days, &y, &m, &d);
    int ao = off < 0 ? -off : off;
    snprintf(buf, n, "%s, %d %s %lld %02d:%02d:%02d %c%02d%02d",
             wd[((days % 7) + 7) % 7], d, mn[m - 1], (long long)y,
             (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60),
             off < 0 ? '-' : '+', ao / 3600, ao / 60 % 60);
}

/* ---- MIME walk ---- */

static void walk_part(walk *w, const char *raw, size_t len, int depth);

static void add_attachment(walk *w, const headers *hs, const char *type,
                           size_t size)
{
    if (w->n_att == w->cap_att) {
        int cap = w->cap_att ? w->cap_att * 2 : 4;
        hx_mail_att *a = hx_realloc(w->att, (size_t)cap * sizeof *a);
        if (!a) return;
        w->att = a;
        w->cap_att = cap;
    }
    const header *cd = find_header(hs, "Content-Disposition");
    const header *ct = find_header(hs, "Content-Type");
    char *name = cd ? header_param(cd->value, cd->value_len, "filename") : NULL;
    if (!name && ct) name = header_param(ct->value, ct->value_len, "name");
    hx_mail_att *a = &w->att[w->n_att++];
    a->filename = name ? name : hx_strdup("");
    a->content_type = hx_strdup(type);
    a->size = size;
}

/* Decodes a leaf part's body per its Content-Transfer-Encoding. */
static void decode_body(const headers *hs, const char *body, size_t n,
                        hx_buf *out)
{
    const header *cte = find_header(hs, "Content-Transfer-Encoding");
    char enc[32] = "";
    if (cte) {
        size_t i = 0, k = 0;
        while (i < cte->value_len && isspace((unsigned char)cte->value[i])) i++;
        while (i < cte->value_len && k + 1 < sizeof enc &&
               !isspace((unsigned char)cte->value[i]))
            enc[k++] = (char)tolower((unsigned char)cte->value[i++]);
        enc[k] = '\0';
    }
    if (!strcmp(enc, "base64")) decode_base64(out, body, n);
    else if (!strcmp(enc, "quoted-printable")) decode_qp(out, body, n, 0);
    else hx_buf_append(out, body, n);
}

static void walk_leaf(walk *w, const headers *hs, const char *type,
                      const char *body, size_t n)
{
    hx_buf dec;
    hx_buf_init(&dec);
    decode_body(hs, body, n, &dec);
    const header *cd = find_header(hs, "Content-Disposition");
    int attachment = cd && cd->value_len >= 11 &&
                     !strncasecmp(cd->value + strspn(cd->value, " \t"),
                                  "attachment", 10);
    int is_text = !strcmp(type, "text/plain") || !strcmp(type, "text/html");
    if (attachment || !is_text) {
        add_attachment(w, hs, type, dec.len);
    } else {
        const header *ct = find_header(hs, "Content-Type");
        char *cs = ct ? header_param(ct->value, ct->value_len, "charset") : NULL;
        size_t ul;
        char *u = hx_mail_to_utf8(cs, dec.data ? dec.data : "", dec.len, &ul);
        hx_buf *dst = !strcmp(type, "text/plain") ? &w->plain : &w->html;
        if (dst->len) hx_buf_puts(dst, "\n\n");
        hx_buf_append(dst, u, ul);
        free(u);
        free(cs);
    }
    hx_buf_free(&dec);
}

/* Finds the next boundary line "--b" (at a line start) in s[from..n).
 * Returns its offset or n; *closing set if it is "--b--". */
static size_t next_boundary(const char *s, size_t n, size_t from,
                            const char *b, size_t bl, int *closing)
{
    for (size_t i = from; i + 2 + bl <= n; i++) {
        if ((i == 0 || s[i - 1] == '\n') && s[i] == '-' && s[i + 1] == '-' &&
            !memcmp(s + i + 2, b, bl)) {
            *closing = i + 4 + bl <= n && s[i + 2 + bl] == '-' &&
                       s[i + 3 + bl] == '-';
            return i;
        }
    }
    *closing = 0;
    return n;
}

static size_t skip_line(const char *s, size_t n, size_t i)
{
    while (i < n && s[i] != '\n') i++;
    return i < n ? i + 1 : n;
}

/* Strips the CRLF that belongs to the boundary from a part's end. */
static size_t part_end(const char *s, size_t start, size_t at)
{
    if (at > start && s[at - 1] == '\n') at--;
    if (at > start && s[at - 1] == '\r') at--;
    return at;
}

static void walk_multipart(walk *w, const headers *hs, const char *body,
                           size_t n, int depth)
{
    const header *ct = find_header(hs, "Content-Type");
    char *b = ct ? header_param(ct->value, ct->value_len, "boundary") : NULL;
    if (!b || !*b || strlen(b) > 200) {
        add_problem(w, "multipart without a usable boundary; read as text");
        free(b);
        size_t ul;
        char *u = hx_mail_to_utf8(NULL, body, n, &ul);
        hx_buf_append(&w->plain, u, ul);
        free(u);
        return;
    }
    size_t bl = strlen(b);
    int closing = 0;
    size_t at = next_boundary(body, n, 0, b, bl, &closing);
    if (at == n) add_problem(w, "multipart boundary never appears");
    while (at < n && !closing) {
        size_t start = skip_line(body, n, at);
        size_t next = next_boundary(body, n, start, b, bl, &closing);
        if (next == n) add_problem(w, "multipart not closed");
        walk_part(w, body + start, part_end(body, start, next) - start, depth + 1);
        at = next;
    }
    free(b);
}

static void walk_part(walk *w, const char *raw, size_t len, int depth)
{
    if (++w->parts > MAX_PARTS || depth > MAX_DEPTH) {
        if (w->parts == MAX_PARTS + 1 || depth == MAX_DEPTH + 1)
            add_problem(w, "MIME structure too large or deep; rest skipped");
        return;
    }
    headers *hs = hx_malloc(sizeof *hs);
    if (!hs) return;
    size_t body = parse_headers(raw, len, hs);
    char type[128];
    media_type(find_header(hs, "Content-Type"), type, sizeof type);
    if (!strncmp(type, "multipart/", 10))
        walk_multipart(w, hs, raw + body, len - body, depth);
    else if (!strcmp(type, "message/rfc822"))
        walk_part(w, raw + body, len - body, depth + 1);
    else
        walk_leaf(w, hs, type, raw + body, len - body);
    free(hs);
}

static void fill_envelope(hx_message *m, const headers *hs)
{
    m->message_id = header_text(hs, "Message-ID");
    m->from = header_text(hs, "From");
    m->to = header_text(hs, "To");
    m->cc = header_text(hs, "Cc");
    m->subject = header_text(hs, "Subject");
    m->in_reply_to = header_text(hs, "In-Reply-To");
    m->references = header_text(hs, "References");
    m->date_raw = header_text(hs, "Date");
    m->date = hx_mail_parse_date(m->date_raw);
}

static int message_complete(const hx_message *m)
{
    return m->message_id && m->from && m->to && m->cc && m->subject &&
           m->in_reply_to && m->references && m->date_raw && m->text &&
           m->problems;
}

int hx_message_parse(const char *raw, size_t len, hx_message **out, hx_err *err)
{
    *out = NULL;
    hx_message *m = hx_calloc(1, sizeof *m);
    headers *hs = hx_malloc(sizeof *hs);
    if (!m || !hs) {
        free(m);
        free(hs);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory parsing a message");
    }
    parse_headers(raw, len, hs);
    fill_envelope(m, hs);
    free(hs);
    walk w = {.m = m};
    hx_buf_init(&w.plain);
    hx_buf_init(&w.html);
    hx_buf_init(&w.problems);
    walk_part(&w, raw, len, 0);
    if (w.plain.len) m->text = tidy_text(w.plain.data, w.plain.len);
    else if (w.html.len) m->text = hx_mail_html_to_text(w.html.data, w.html.len);
    else m->text = hx_strdup("");
    m->att = w.att;
    m->n_att = w.n_att;
    if (!w.problems.data) hx_buf_reserve(&w.problems, 0);
    m->problems = hx_buf_steal(&w.problems, NULL);
    hx_buf_free(&w.plain);
    hx_buf_free(&w.html);
    if (!message_complete(m)) {
        hx_message_free(m);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory parsing a message");
    }
    *out = m;
    return HX_OK;
}

void hx_message_free(hx_message *m)
{
    if (!m) return;
    free(m->message_id);
    free(m->from);
    free(m->to);
    free(m->cc);
    free(m->subject);
    free(m->in_reply_to);
    free(m->references);
    free(m->date_raw);
    free(m->text);
    for (int i = 0; i < m->n_att; i++) {
        free(m->att[i].filename);
        free(m->att[i].content_type);
    }
    free(m->att);
    free(m->problems);
    free(m);
}
