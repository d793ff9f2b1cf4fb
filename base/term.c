/* term.c: text that came from outside (a tool, a mail, a memory) made safe
 * to show a person: no escape sequence, no hidden control, no reordering. */
#include "base.h"

#include <string.h>

/* The length of the valid UTF-8 sequence at s (n bytes left) and its code
 * point, or 0 if the bytes there are not one (overlong forms, surrogates
 * and values above U+10FFFF included). */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    static const uint32_t min_of[] = {0, 0, 0x80, 0x800, 0x10000};
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!len || s[0] > 0xF4 || len > n) return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    if (c < min_of[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

/* Code points a terminal acts on or that reorder what is shown. */
static int hidden_cp(uint32_t c)
{
    return (c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
           (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

int hx_term_escape(hx_buf *out, const char *s, size_t n, int keep_lines)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n && !out->oom;) {
        unsigned char c = p[i];
        uint32_t cp = 0;
        size_t len = c < 0x80 ? 1 : utf8_seq(p + i, n - i, &cp);
        if (c == '\n' || c == '\t') {
            if (keep_lines) hx_buf_putc(out, (char)c);
            else hx_buf_puts(out, c == '\n' ? "\\n" : "\\t");
        } else if (c < 0x20 || c == 0x7F || !len) {
            hx_buf_printf(out, "\\x%02x", c);
            len = 1;
        } else if (c >= 0x80 && hidden_cp(cp)) {
            hx_buf_printf(out, "\\u%04x", (unsigned)cp);
        } else {
            hx_buf_append(out, p + i, len);
        }
        i += len;
    }
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}

size_t hx_utf8_cut(const char *s, size_t upto, size_t from)
{
    while (upto > from && ((unsigned char)s[upto] & 0xC0) == 0x80) upto--;
    return upto;
}

void hx_term_fputs(FILE *f, const char *s, int keep_lines)
{
    hx_buf b;
    hx_buf_init(&b);
    if (s) hx_term_escape(&b, s, strlen(s), keep_lines);
    if (b.data) fputs(b.data, f);
    hx_buf_free(&b);
}
