/* handfacts.c: the facts a text states (times, dates, weekdays, addresses,
 * file names, numbers), read in the forms people write them, and the
 * hand-written evaluation's answer check built on them. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/handeval.h"

/* ---- folding ---- */

/* Base letters of U+00C0..U+00FF and U+0100..U+017F; '*' marks the ones
 * that fold to two letters (fold2), '.' those kept as they are. */
static const char latin1[] = "aaaaaa*ceeeeiiiidnooooo.ouuuuy**aaaaaa*ceeeeiiiidnooooo.ouuuuy*y";
static const char latin_ext[] = "aaaaaaccccccccddddeeeeeeeeeegggggggghhhhiiiiiiiiii**jjkkk"
                                "llllllllllnnnnnnnnnoooooo**rrrrrrssssssssttttttuuuuuuuuuuuu"
                                "wwyyyzzzzzzs";

static const char *fold2(unsigned cp)
{
    switch (cp) {
    case 0xC6: case 0xE6: return "ae";
    case 0xDE: case 0xFE: return "th";
    case 0xDF: return "ss";
    case 0x132: case 0x133: return "ij";
    case 0x152: case 0x153: return "oe";
    }
    return NULL;
}

/* Decodes one UTF-8 sequence at s (n bytes left): its length, or 0 when
 * it is not a valid one. */
static int utf8_next(const unsigned char *s, size_t n, unsigned *cp)
{
    int len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (!len || s[0] >= 0xF5 || (size_t)len > n) return 0;
    unsigned c = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    *cp = c;
    return len;
}

/* The plain ASCII a typographic or full-width punctuation or space
 * stands for, or NULL. */
static const char *plain(unsigned cp)
{
    switch (cp) {
    case 0x2018: case 0x2019: case 0x201A: case 0x201B: case 0x2032: return "'";
    case 0x201C: case 0x201D: case 0x201E: case 0xAB: case 0xBB: return "\"";
    case 0x2010: case 0x2011: case 0x2012: case 0x2013: case 0x2014: case 0x2015:
    case 0x2212: return "-";
    case 0xA0: case 0x2007: case 0x2009: case 0x200A: case 0x202F: case 0x3000: return " ";
    case 0x2026: return "...";
    case 0xFF1A: return ":";
    case 0xFF0F: return "/";
    }
    return NULL;
}

/* What code point cp folds to: a static string, one (filled), or NULL
 * (kept as it is). */
static const char *fold_cp(unsigned cp, char one[2])
{
    const char *two = fold2(cp);
    if (two) return two;
    one[1] = 0;
    if (cp >= 0xFF10 && cp <= 0xFF19) return one[0] = (char)('0' + cp - 0xFF10), one; /* full-width digits */
    if (cp >= 0xC0 && cp <= 0xFF && latin1[cp - 0xC0] != '.') return one[0] = latin1[cp - 0xC0], one;
    if (cp >= 0x100 && cp <= 0x17F) return one[0] = latin_ext[cp - 0x100], one;
    return plain(cp);
}

void hx_he_fold(const char *s, hx_buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n) {
        unsigned cp = 0;
        int len = *p >= 0x80 ? utf8_next(p, n, &cp) : 0;
        char one[2];
        const char *f = len ? fold_cp(cp, one) : NULL;
        /* a JSON escape of a line break or a tab (tool results are JSON)
         * is white space */
        int esc = !len && *p == '\\' && n > 1 && strchr("nrt", p[1]);
        if (f) hx_buf_puts(out, f);
        else if (len) hx_buf_append(out, p, (size_t)len);
        else if (esc) hx_buf_puts(out, "  ");
        else hx_buf_putc(out, (char)tolower(*p));
        len = len ? len : esc ? 2 : 1;
        p += len, n -= (size_t)len;
    }
}

/* ---- reading mentions ---- */

typedef struct scan {
    const char *s;
    size_t len;
    int64_t today;
    hx_he_text *t;
    unsigned char *covered; /* 1: inside an address or a file name */
} scan;

static int is_alnum(char c) { return isalnum((unsigned char)c); }
static int is_alpha(char c) { return isalpha((unsigned char)c); }
static int is_digit(char c) { return isdigit((unsigned char)c); }

static int add(scan *sc, hx_he_mention m)
{
    hx_he_text *t = sc->t;
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        hx_he_mention *nm = hx_realloc(t->m, (size_t)cap * sizeof *nm);
        if (!nm) return HX_ERR_NOMEM;
        t->m = nm, t->cap = cap;
    }
    t->m[t->n++] = m;
    return HX_OK;
}

static hx_he_mention mention(int kind, size_t at, size_t end)
{
    return (hx_he_mention){.kind = kind, .at = (int)at, .end = (int)end};
}

/* Digits at s[i..], at most max (<= 18) of them: their value (an int for
 * the few digits of a date or a time), *n their count. */
static int64_t digits(const scan *sc, size_t i, int max, int *n)
{
    int64_t v = 0;
    *n = 0;
    while (i + (size_t)*n < sc->len && *n < max && is_digit(sc->s[i + (size_t)*n]))
        v = v * 10 + (sc->s[i + (size_t)*n] - '0'), (*n)++;
    return v;
}

/* Whether s[i..] starts with word w (ASCII, the folded form) followed by a
 * non-letter. */
static int word_at(const scan *sc, size_t i, const char *w)
{
    size_t l = strlen(w);
    return i + l <= sc->len && !memcmp(sc->s + i, w, l) && (i + l == sc->len || !is_alpha(sc->s[i + l]));
}

static int starts(const scan *sc, size_t i, const char *w)
{
    size_t l = strlen(w);
    return i + l <= sc->len && !memcmp(sc->s + i, w, l);
}

static int valid_date(int m, int d) { return m >= 1 && m <= 12 && d >= 1 && d <= 31; }

/* Addresses: the run of address characters around each '@'. */
static int addr_char(char c) { return is_alnum(c) || strchr("._%+-", c); }
static int dom_char(char c) { return is_alnum(c) || c == '.' || c == '-'; }

static int scan_addresses(scan *sc)
{
    for (size_t i = 1; i + 1 < sc->len; i++) {
        if (sc->s[i] != '@') continue;
        size_t a = i, b = i + 1;
        while (a > 0 && addr_char(sc->s[a - 1])) a--;
        while (b < sc->len && dom_char(sc->s[b])) b++;
        while (b > i + 1 && (sc->s[b - 1] == '.' || sc->s[b - 1] == '-')) b--;
        const char *dot = memchr(sc->s + i + 1, '.', b - i - 1);
        if (a == i || !dot || dot == sc->s + i + 1 || dot == sc->s + b - 1) continue;
        hx_he_mention m = mention(HX_HE_ADDR, a, b);
        snprintf(m.s, sizeof m.s, "%.*s", (int)(b - a), sc->s + a);
        memset(sc->covered + a, 1, b - a);
        if (add(sc, m)) return HX_ERR_NOMEM;
    }
    return HX_OK;
}

/* File names: a name ending in one of the extensions people's files
 * have; the name is read back from the extension to the last space or
 * slash (a name's last word: "swim schedule.txt" gives "schedule.txt"). */
static const char *const file_exts[] = {"md", "txt", "pdf", "csv", "ics", "doc", "docx", "xls",
                                        "xlsx", "ppt", "pptx", "odt", "ods", "odp", "json", "png",
                                        "jpg", "jpeg", "fig", "zip", "rtf", "eml", "key", "pages"};

static int name_char(char c) { return is_alnum(c) || c == '_' || c == '-' || c == '.' || (unsigned char)c >= 0x80; }

static int scan_files(scan *sc)
{
    for (size_t i = 1; i + 1 < sc->len; i++) {
        if (sc->s[i] != '.' || sc->covered[i]) continue;
        size_t e = i + 1;
        while (e < sc->len && is_alnum(sc->s[e])) e++;
        int known = 0;
        for (size_t k = 0; k < sizeof file_exts / sizeof *file_exts && !known; k++)
            known = e - i - 1 == strlen(file_exts[k]) && !memcmp(sc->s + i + 1, file_exts[k], e - i - 1);
        size_t a = i;
        while (a > 0 && name_char(sc->s[a - 1]) && !sc->covered[a - 1]) a--;
        if (!known || a == i) continue;
        hx_he_mention m = mention(HX_HE_FILE, a, e);
        snprintf(m.s, sizeof m.s, "%.*s", (int)(e - a), sc->s + a);
        memset(sc->covered + a, 1, e - a);
        if (add(sc, m)) return HX_ERR_NOMEM;
    }
    return HX_OK;
}

/* "am"/"pm"/"a.m."/"p.m." at s[i..] (one space before it allowed): 1 am,
 * 2 pm, 0 none; *n the bytes. */
static int meridiem(const scan *sc, size_t i, size_t *n)
{
    size_t j = i + (i < sc->len && sc->s[i] == ' ');
    static const char *const forms[] = {"a.m.", "p.m.", "am", "pm"};
    for (int k = 0; k < 4; k++)
        if (starts(sc, j, forms[k]) && (j + strlen(forms[k]) == sc->len || !is_alpha(sc->s[j + strlen(forms[k])]))) {
            *n = j + strlen(forms[k]) - i;
            return forms[k][0] == 'a' ? 1 : 2;
        }
    return 0;
}

/* A time h:min; mer 1 am, 2 pm, 0 neither, or 3: neither, written as a
 * 12-hour clock may be ("3:00", "11:30": also 15:00, 23:30). */
static int add_time(scan *sc, size_t at, size_t end, int h, int min, int mer)
{
    int twelve = mer == 3 && h >= 1 && h <= 11;
    if (mer == 3) mer = 0;
    if (mer && (h < 1 || h > 12)) return 0;
    if (mer) h = h % 12 + (mer == 2 ? 12 : 0);
    if (h > 24 || min > 59) return 0;
    hx_he_mention m = mention(HX_HE_TIME, at, end);
    m.minutes = (h % 24) * 60 + min;
    m.minutes2 = twelve ? m.minutes + 720 : m.minutes;
    return add(sc, m) ? -1 : (int)(end - at);
}

static int add_date(scan *sc, size_t at, size_t end, int y, int mo, int d, int mo2, int d2)
{
    if (!valid_date(mo, d)) {
        if (!valid_date(mo2, d2)) return 0;
        mo = mo2, d = d2, mo2 = d2 = 0;
    }
    hx_he_mention m = mention(HX_HE_DATE, at, end);
    m.y = y, m.m = mo, m.d = d;
    if (valid_date(mo2, d2) && (mo2 != mo || d2 != d)) m.m2 = mo2, m.d2 = d2;
    return add(sc, m) ? -1 : (int)(end - at);
}

/* "2027-03-11", with "T14:00[:00][offset]" or " 14:00" after it. */
static int scan_iso(scan *sc, size_t i)
{
    int n1, n2, n3, n4, n5;
    int y = digits(sc, i, 4, &n1);
    if (n1 != 4 || i + 10 > sc->len || sc->s[i + 4] != '-' || sc->s[i + 7] != '-') return 0;
    int mo = digits(sc, i + 5, 2, &n2), d = digits(sc, i + 8, 2, &n3);
    if (n2 != 2 || n3 != 2 || !valid_date(mo, d)) return 0;
    size_t e = i + 10;
    if (add_date(sc, i, e, y, mo, d, 0, 0) < 0) return -1;
    if (e + 6 > sc->len || (sc->s[e] != 't' && sc->s[e] != ' ')) return (int)(e - i);
    int h = digits(sc, e + 1, 2, &n4), mi = 0;
    if (n4 != 2 || sc->s[e + 3] != ':' || (mi = digits(sc, e + 4, 2, &n5), n5 != 2)) return (int)(e - i);
    size_t te = e + 6;
    if (te + 3 <= sc->len && sc->s[te] == ':' && is_digit(sc->s[te + 1]) && is_digit(sc->s[te + 2])) te += 3;
    if (add_time(sc, e + 1, te, h, mi, 0) < 0) return -1;
    if (te < sc->len && sc->s[te] == 'z') te++;
    else if (te + 3 <= sc->len && (sc->s[te] == '+' || sc->s[te] == '-') && is_digit(sc->s[te + 1]))
        te += 3 + (te + 6 <= sc->len && sc->s[te + 3] == ':') * 3;
    return (int)(te - i);
}

/* The UTF-8 of the Japanese characters dates and times are written with. */
#define JP_YEAR "\xe5\xb9\xb4"
#define JP_MONTH "\xe6\x9c\x88"
#define JP_DAY "\xe6\x97\xa5"
#define JP_HOUR "\xe6\x99\x82"
#define JP_MIN "\xe5\x88\x86"
#define JP_AM "\xe5\x8d\x88\xe5\x89\x8d"       /* 午前 */
#define JP_PM "\xe5\x8d\x88\xe5\xbe\x8c"       /* 午後 */
#define JP_MORNING "\xe6\x9c\x9d"               /* 朝 */
#define JP_EVENING "\xe5\xa4\x95\xe6\x96\xb9"   /* 夕方 */
#define JP_NIGHT "\xe5\xa4\x9c"                 /* 夜 */

/* Whether s[..i) ends with the word w. */
static int ends_with(const scan *sc, size_t i, const char *w)
{
    size_t l = strlen(w);
    return i >= l && !memcmp(sc->s + i - l, w, l);
}

/* Morning or afternoon as a Japanese time names it before the hour
 * ("午後3時", "夜7時"): 1 am, 2 pm, 0 neither. */
static int jp_meridiem(const scan *sc, size_t i)
{
    if (ends_with(sc, i, JP_PM) || ends_with(sc, i, JP_EVENING) || ends_with(sc, i, JP_NIGHT)) return 2;
    return ends_with(sc, i, JP_AM) || ends_with(sc, i, JP_MORNING) ? 1 : 0;
}

/* "2027年3月11日", "3月11日", "午後3時", "夜7時", "9時30分". */
static int scan_japanese(scan *sc, size_t i)
{
    int n1, n2, n3;
    int a = digits(sc, i, 4, &n1), y = 0;
    size_t j = i + (size_t)n1;
    if (n1 == 4 && starts(sc, j, JP_YEAR)) y = a, a = digits(sc, j += 3, 2, &n1), j += (size_t)n1;
    if (n1 && n1 <= 2 && starts(sc, j, JP_MONTH)) {
        int d = digits(sc, j + 3, 2, &n2);
        if (n2 && starts(sc, j + 3 + (size_t)n2, JP_DAY))
            return add_date(sc, i, j + 6 + (size_t)n2, y, a, d, 0, 0);
    }
    if (y || !n1 || n1 > 2 || !starts(sc, j, JP_HOUR)) return 0;
    int mi = digits(sc, j + 3, 2, &n3);
    size_t e = j + 3 + (n3 && starts(sc, j + 3 + (size_t)n3, JP_MIN) ? (size_t)n3 + 3 : 0);
    return add_time(sc, i, e, a, e > j + 3 ? mi : 0, jp_meridiem(sc, i));
}

/* "14:00", "2:30 pm", "9.30am", "14h", "14h30", "3 pm", "15 uhr". */
static int scan_clock(scan *sc, size_t i)
{
    int n1, n2 = 0, mi = 0;
    int h = digits(sc, i, 2, &n1);
    size_t j = i + (size_t)n1, e, k;
    if (j < sc->len && is_digit(sc->s[j])) return 0;
    char sep = j < sc->len ? sc->s[j] : 0;
    if ((sep == ':' || sep == '.') && (mi = digits(sc, j + 1, 2, &n2), n2 == 2) &&
        !(j + 3 < sc->len && is_digit(sc->s[j + 3]))) {
        e = j + 3;
        if (sep == ':' && e + 2 < sc->len && sc->s[e] == ':' && is_digit(sc->s[e + 1]) && is_digit(sc->s[e + 2])) e += 3;
        int mer = meridiem(sc, e, &k);
        if (mer) return add_time(sc, i, e + k, h, mi, mer);
        if (sep == ':') return add_time(sc, i, e, h, mi, sc->s[i] == '0' ? 0 : 3);
        if (word_at(sc, e + (e < sc->len && sc->s[e] == ' '), "uhr") || (e < sc->len && sc->s[e] == 'h' && !(e + 1 < sc->len && is_alpha(sc->s[e + 1]))))
            return add_time(sc, i, e, h, mi, 0);
        return 0;
    }
    if (sep == 'h') {
        mi = digits(sc, j + 1, 2, &n2);
        e = j + 1 + (size_t)n2;
        if ((n2 == 0 || n2 == 2) && !(e < sc->len && is_alnum(sc->s[e]))) return add_time(sc, i, e, h, n2 ? mi : 0, 0);
        return 0;
    }
    int mer = meridiem(sc, j, &k);
    if (mer) return add_time(sc, i, j + k, h, 0, mer);
    if (word_at(sc, j + (sep == ' '), "uhr")) return add_time(sc, i, j, h, 0, 0);
    return 0;
}

/* "3/11", "3/11/2027" (month first or day first: both readings kept),
 * "11.03." and "11.03.2027" (day first). */
static int scan_numeric_date(scan *sc, size_t i)
{
    int n1, n2, n3 = 0, y = 0;
    int a = digits(sc, i, 2, &n1);
    size_t j = i + (size_t)n1;
    if (j + 1 >= sc->len || (sc->s[j] != '/' && sc->s[j] != '.')) return 0;
    char sep = sc->s[j];
    int b = digits(sc, j + 1, 2, &n2);
    size_t e = j + 1 + (size_t)n2;
    if (!n2 || (e < sc->len && is_digit(sc->s[e]))) return 0;
    if (e + 1 < sc->len && sc->s[e] == sep && is_digit(sc->s[e + 1])) {
        y = digits(sc, e + 1, 4, &n3);
        if (n3 != 2 && n3 != 4) return 0;
        y += n3 == 2 ? 2000 : 0;
        e += 1 + (size_t)n3;
    } else if (sep == '.' && e < sc->len && sc->s[e] == '.') e++;
    else if (sep == '.') return 0;
    if (e < sc->len && is_alnum(sc->s[e])) return 0;
    return sep == '/' ? add_date(sc, i, e, y, a, b, b, a) : add_date(sc, i, e, y, b, a, 0, 0);
}

static const char *const month_names[13][7] = {
    {0},
    {"january", "jan", "januar", "janvier", "enero"},
    {"february", "feb", "februar", "fevrier", "febrero"},
    {"march", "mar", "marz", "mars", "marzo"},
    {"april", "apr", "avril", "abril"},
    {"may", "mai", "mayo"},
    {"june", "jun", "juni", "juin", "junio"},
    {"july", "jul", "juli", "juillet", "julio"},
    {"august", "aug", "aout", "agosto"},
    {"september", "sep", "sept", "septembre", "septiembre"},
    {"october", "oct", "oktober", "okt", "octobre", "octubre"},
    {"november", "nov", "novembre", "noviembre"},
    {"december", "dec", "dezember", "dez", "decembre", "diciembre"},
};

/* The month a word at s[i..] names (1..12, 0 none); *n its bytes with a
 * period after an abbreviation. */
static int month_at(const scan *sc, size_t i, size_t *n)
{
    for (int m = 1; m <= 12; m++)
        for (int k = 0; k < 7 && month_names[m][k]; k++)
            if (word_at(sc, i, month_names[m][k])) {
                *n = strlen(month_names[m][k]);
                if (*n <= 4 && i + *n < sc->len && sc->s[i + *n] == '.') (*n)++;
                return m;
            }
    return 0;
}

/* An optional year after a date: ", 2027" or " 2027"; *e moved past it. */
static int year_after(const scan *sc, size_t *e)
{
    size_t j = *e + (*e < sc->len && sc->s[*e] == ',');
    int n;
    if (j >= sc->len || sc->s[j] != ' ') return 0;
    int y = digits(sc, j + 1, 4, &n);
    if (n != 4 || (j + 5 < sc->len && is_alnum(sc->s[j + 5])) || y < 1900 || y > 2200) return 0;
    *e = j + 5;
    return y;
}

/* The second day of a range after a day ("13-17", "13 to 17", "du 13
 * au 17"): its number (0: none), *e moved past it. */
static int range_day(const scan *sc, size_t *e)
{
    static const char *const seps[] = {"-", " - ", " to ", " au ", " bis ", " al ", " until "};
    for (size_t k = 0; k < sizeof seps / sizeof *seps; k++) {
        size_t j = *e + strlen(seps[k]);
        int n, d;
        if (!starts(sc, *e, seps[k]) || (d = digits(sc, j, 2, &n), !n)) continue;
        if (j + (size_t)n < sc->len && (is_digit(sc->s[j + (size_t)n]) || sc->s[j + (size_t)n] == ':')) continue;
        *e = j + (size_t)n;
        return d;
    }
    return 0;
}

/* A day ending a range that starts at a date just added: the same month
 * and year. */
static int add_range_end(scan *sc, size_t at, size_t end, int d)
{
    const hx_he_mention *first = &sc->t->m[sc->t->n - 1];
    return d > first->d ? add_date(sc, at, end, first->y, first->m, d, 0, 0) : 0;
}

/* "11 March", "11th of March", "3. Mai", "1er avril", "17 de marzo", and
 * ranges of days in a month ("13-17 September", "du 13 au 17 septembre"). */
static int scan_day_month(scan *sc, size_t i)
{
    int n;
    int d = digits(sc, i, 2, &n);
    size_t j = i + (size_t)n, mn, r0 = j;
    if (j < sc->len && is_digit(sc->s[j])) return 0;
    int d2 = range_day(sc, &j);
    if (!d2) j = r0;
    static const char *const suffix[] = {"st", "nd", "rd", "th", "er", "."};
    for (int k = 0; k < 6; k++)
        if (starts(sc, j, suffix[k]) && !(k < 5 && j + 2 < sc->len && is_alpha(sc->s[j + 2]))) {
            j += strlen(suffix[k]);
            break;
        }
    if (j >= sc->len || sc->s[j] != ' ') return 0;
    j++;
    if (starts(sc, j, "of ")) j += 3;
    else if (starts(sc, j, "de ")) j += 3;
    int m = month_at(sc, j, &mn);
    if (!m) return 0;
    size_t e = j + mn;
    int y = year_after(sc, &e);
    int r = add_date(sc, i, e, y, m, d, 0, 0);
    if (r > 0 && d2 && add_range_end(sc, i, e, d2) < 0) return -1;
    return r;
}

/* "March 11", "Mar 11th, 2027", "marzo 17", "September 13-17". */
static int scan_month_day(scan *sc, size_t i)
{
    size_t mn;
    int n;
    int m = month_at(sc, i, &mn);
    if (!m || i + mn + 1 >= sc->len || sc->s[i + mn] != ' ') return 0;
    int d = digits(sc, i + mn + 1, 2, &n);
    size_t e = i + mn + 1 + (size_t)n;
    if (!n || (e < sc->len && (is_digit(sc->s[e]) || sc->s[e] == ':'))) return 0;
    static const char *const suffix[] = {"st", "nd", "rd", "th"};
    for (int k = 0; k < 4; k++)
        if (starts(sc, e, suffix[k]) && !(e + 2 < sc->len && is_alpha(sc->s[e + 2]))) e += 2;
    if (e < sc->len && is_alpha(sc->s[e])) return 0;
    size_t de = e;
    int d2 = range_day(sc, &e);
    if (!d2) e = de;
    int y = year_after(sc, &e);
    int r = add_date(sc, i, de, y, m, d, 0, 0);
    if (r > 0 && d2 && add_range_end(sc, de, e, d2) < 0) return -1;
    return r > 0 ? (int)(e - i) : r;
}

static const char *const weekday_names[7][8] = {
    {"sunday", "sonntag", "dimanche", "domingo", "sun"},
    {"monday", "montag", "lundi", "lunes", "mon"},
    {"tuesday", "dienstag", "mardi", "martes", "tue", "tues"},
    {"wednesday", "mittwoch", "mercredi", "miercoles", "wed"},
    {"thursday", "donnerstag", "jeudi", "jueves", "thu", "thur", "thurs"},
    {"friday", "freitag", "vendredi", "viernes", "fri"},
    {"saturday", "samstag", "samedi", "sabado", "sat"},
};

/* A weekday name; an abbreviation only before ",", "." or a day number
 * ("sat" and "sun" are words too). */
static int scan_weekday(scan *sc, size_t i)
{
    for (int w = 0; w < 7; w++)
        for (int k = 0; k < 8 && weekday_names[w][k]; k++) {
            const char *name = weekday_names[w][k];
            size_t l = strlen(name);
            if (!word_at(sc, i, name)) continue;
            size_t mn;
            int abbrev = k >= 4;
            int before_day = i + l + 1 < sc->len && (sc->s[i + l] == ',' || sc->s[i + l] == '.' ||
                             (sc->s[i + l] == ' ' && (is_digit(sc->s[i + l + 1]) || month_at(sc, i + l + 1, &mn))));
            if (abbrev && !before_day) continue;
            hx_he_mention m = mention(HX_HE_WEEKDAY, i, i + l);
            m.wday = w;
            return add(sc, m) ? -1 : (int)l;
        }
    return 0;
}

/* "today", "tonight", "tomorrow", "yesterday", "day after tomorrow";
 * "noon", "midnight". */
static int scan_words(scan *sc, size_t i)
{
    static const struct {
        const char *w;
        int days, minutes; /* minutes < 0: a day word */
    } words[] = {
        {"day after tomorrow", 2, -1}, {"today", 0, -1}, {"tonight", 0, -1}, {"tomorrow", 1, -1},
        {"yesterday", -1, -1}, {"noon", 0, 720}, {"midday", 0, 720}, {"midnight", 0, 0},
    };
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
        if (!word_at(sc, i, words[k].w)) continue;
        size_t e = i + strlen(words[k].w);
        if (words[k].minutes >= 0) return add_time(sc, i, e, words[k].minutes / 60, 0, 0);
        int y, m, d;
        hx_civil_from_days(sc->today + words[k].days, &y, &m, &d);
        return add_date(sc, i, e, y, m, d, 0, 0);
    }
    return 0;
}

/* A number: "12,400", "48.500", "12 400", "287.40", "1,5", "2027". */
static int scan_number(scan *sc, size_t i)
{
    int n;
    double v = (double)digits(sc, i, 18, &n);
    size_t j = i + (size_t)n;
    char group = 0;
    while (n <= 3 && v > 0 && j + 4 <= sc->len && sc->s[j] && strchr(",. '", sc->s[j]) &&
           (!group || sc->s[j] == group) && is_digit(sc->s[j + 1]) && is_digit(sc->s[j + 2]) &&
           is_digit(sc->s[j + 3]) && !(j + 4 < sc->len && is_digit(sc->s[j + 4]))) {
        group = sc->s[j];
        v = v * 1000 + (sc->s[j + 1] - '0') * 100 + (sc->s[j + 2] - '0') * 10 + (sc->s[j + 3] - '0');
        j += 4;
    }
    double whole = v;
    int comma = 0;
    if (j + 1 < sc->len && (sc->s[j] == '.' || sc->s[j] == ',') && sc->s[j] != group && is_digit(sc->s[j + 1])) {
        double scale = 0.1;
        comma = sc->s[j] == ',';
        for (j++; j < sc->len && is_digit(sc->s[j]); j++, scale /= 10) v += (sc->s[j] - '0') * scale;
    }
    hx_he_mention m = mention(HX_HE_NUMBER, i, j);
    m.value = v;
    m.value2 = comma ? whole : v; /* "940,11" may be 940.11 or a list: 940, 11 */
    return add(sc, m) ? -1 : (int)(j - i);
}

/* The mention starting at s[i] (a token's start), in the order that
 * tells forms apart; its length (0: none, -1: out of memory). */
static int scan_at(scan *sc, size_t i)
{
    int (*const digit_led[])(scan *, size_t) = {scan_iso, scan_japanese, scan_clock, scan_numeric_date,
                                               scan_day_month, scan_number};
    int (*const letter_led[])(scan *, size_t) = {scan_month_day, scan_weekday, scan_words};
    int r = 0;
    if (is_digit(sc->s[i]))
        for (size_t k = 0; !r && k < sizeof digit_led / sizeof *digit_led; k++) r = digit_led[k](sc, i);
    else if (is_alpha(sc->s[i]))
        for (size_t k = 0; !r && k < sizeof letter_led / sizeof *letter_led; k++) r = letter_led[k](sc, i);
    return r;
}

int hx_he_scan(const char *s, int64_t today, hx_he_text *out)
{
    hx_buf b;
    hx_buf_init(&b);
    memset(out, 0, sizeof *out);
    hx_he_fold(s ? s : "", &b);
    hx_buf_putc(&b, 0);
    if (b.oom) {
        hx_buf_free(&b);
        return HX_ERR_NOMEM;
    }
    out->text = hx_buf_steal(&b, &out->len);
    out->len--; /* the NUL put above */
    scan sc = {out->text, out->len, today, out, hx_calloc(out->len + 1, 1)};
    int rc = sc.covered ? scan_addresses(&sc) : HX_ERR_NOMEM;
    if (!rc) rc = scan_files(&sc);
    for (size_t i = 0; !rc && i < sc.len;) {
        int r = sc.covered[i] || (i && is_alnum(sc.s[i - 1])) ? 0 : scan_at(&sc, i);
        if (r < 0) rc = HX_ERR_NOMEM;
        i += r > 0 ? (size_t)r : 1;
    }
    free(sc.covered);
    if (rc) hx_he_text_free(out);
    return rc;
}

void hx_he_text_free(hx_he_text *t)
{
    if (!t) return;
    free(t->text);
    free(t->m);
    memset(t, 0, sizeof *t);
}

/* ---- facts ---- */

/* A fact entry of a task, parsed: any of its parts may be absent. */
#define FACT_ALTS 8
typedef struct fact {
    const cJSON *json;
    char *text[FACT_ALTS]; /* folded alternatives */
    int n_text;
    int minutes;           /* -1: no time */
    int y, m, d;           /* m 0: no date */
    char *addr, *file;     /* folded; NULL: none */
    int has_number;
    double number;
    int say;               /* "say" in place of "text": a conclusion the
                              answer draws ("nothing found", "can't"), not
                              a fact the tools' results hold */
} fact;

static char *folded(const char *s)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_he_fold(s, &b);
    hx_buf_putc(&b, 0);
    return b.oom ? (hx_buf_free(&b), NULL) : hx_buf_steal(&b, NULL);
}

static void fact_free(fact *f)
{
    for (int i = 0; i < f->n_text; i++) free(f->text[i]);
    free(f->addr);
    free(f->file);
}

static const char *jstr(const cJSON *o, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* Parses entry j; 0 if it is none of the shapes a fact has. */
static int fact_parse(const cJSON *j, fact *f)
{
    memset(f, 0, sizeof *f);
    f->json = j;
    f->minutes = -1;
    const cJSON *text = cJSON_IsString(j) ? j : cJSON_GetObjectItemCaseSensitive(j, "text"), *a;
    if (!text && (text = cJSON_GetObjectItemCaseSensitive(j, "say"))) f->say = 1;
    if (cJSON_IsString(text) && (f->text[f->n_text] = folded(text->valuestring))) f->n_text++;
    const cJSON *alts = cJSON_IsArray(text) ? text : NULL;
    cJSON_ArrayForEach(a, alts)
        if (cJSON_IsString(a) && f->n_text < FACT_ALTS && (f->text[f->n_text] = folded(a->valuestring))) f->n_text++;
    if (!cJSON_IsObject(j)) return f->n_text > 0;
    const char *t = jstr(j, "time"), *d = jstr(j, "date"), *ad = jstr(j, "addr"), *fi = jstr(j, "file");
    int h, mi;
    if (t && sscanf(t, "%d:%d", &h, &mi) == 2) f->minutes = h * 60 + mi;
    if (d && sscanf(d, "%d-%d-%d", &f->y, &f->m, &f->d) != 3) f->m = 0;
    if (ad) f->addr = folded(ad);
    if (fi) f->file = folded(strrchr(fi, '/') ? strrchr(fi, '/') + 1 : fi);
    const cJSON *num = cJSON_GetObjectItemCaseSensitive(j, "number");
    if (cJSON_IsNumber(num)) f->has_number = 1, f->number = num->valuedouble;
    if (cJSON_IsString(num)) {
        hx_he_text nt;
        if (!hx_he_scan(num->valuestring, 0, &nt))
            for (int i = 0; i < nt.n; i++)
                if (nt.m[i].kind == HX_HE_NUMBER && !f->has_number) f->has_number = 1, f->number = nt.m[i].value;
        hx_he_text_free(&nt);
    }
    return f->n_text || f->minutes >= 0 || f->m || f->addr || f->file || f->has_number;
}

static int has_when(const fact *f) { return f->minutes >= 0 || f->m; }

void hx_he_fact_str(const cJSON *j, char *buf, size_t n)
{
    fact f;
    size_t l = 0;
    buf[0] = 0;
    if (!fact_parse(j, &f)) {
        snprintf(buf, n, "(unreadable fact)");
        fact_free(&f);
        return;
    }
    const cJSON *text = cJSON_IsString(j) ? j : cJSON_GetObjectItemCaseSensitive(j, f.say ? "say" : "text");
    const char *first = cJSON_IsString(text) ? text->valuestring
                        : cJSON_GetStringValue(cJSON_GetArrayItem(text, 0));
#define PUT(...) (l += (size_t)snprintf(buf + l, l < n ? n - l : 0, __VA_ARGS__), l = l < n ? l : n - 1)
    if (first) PUT("\"%s\"", first);
    if (f.m) PUT("%s%04d-%02d-%02d", l ? " " : "", f.y, f.m, f.d);
    if (f.minutes >= 0) PUT("%s%02d:%02d", l ? " " : "", f.minutes / 60, f.minutes % 60);
    if (f.addr) PUT("%s%s", l ? " " : "", jstr(j, "addr"));
    if (f.file) PUT("%s%s", l ? " " : "", jstr(j, "file"));
    if (f.has_number) PUT("%s%g", l ? " " : "", f.number);
#undef PUT
    fact_free(&f);
}

/* ---- matching facts in a scanned text ---- */

static int same_date(const hx_he_mention *m, int y, int mo, int d)
{
    int ymatch = !m->y || !y || m->y == y;
    return ymatch && ((m->m == mo && m->d == d) || (m->m2 == mo && m->d2 == d));
}

static int weekday_of(int y, int m, int d) { return (int)(((hx_days_from_civil(y, m, d) % 7) + 11) % 7); }

/* Whether mention x states f's time (part 't') or date (part 'd'). With
 * weekdays, a date in the coming week can be named by its weekday. */
static int states_when(const hx_he_mention *x, const fact *f, char part, int64_t today, int weekdays)
{
    if (part == 't') return x->kind == HX_HE_TIME && (x->minutes == f->minutes || x->minutes2 == f->minutes);
    if (x->kind == HX_HE_DATE) return same_date(x, f->y, f->m, f->d);
    if (x->kind != HX_HE_WEEKDAY || !weekdays || !f->y) return 0;
    int64_t day = hx_days_from_civil(f->y, f->m, f->d);
    return day >= today && day < today + 7 && weekday_of(f->y, f->m, f->d) == x->wday;
}

/* Occurrences of a folded string in the text, at word bounds: *spans
 * (pairs, caller frees) and their count. */
static int find_all(const hx_he_text *t, const char *w, int **spans)
{
    size_t l = strlen(w);
    int n = 0, cap = 0;
    *spans = NULL;
    if (!l) return 0;
    for (const char *p = t->text; (p = strstr(p, w)); p++) {
        size_t at = (size_t)(p - t->text);
        int left = at == 0 || !is_alnum(w[0]) || !is_alnum(t->text[at - 1]);
        int right = at + l == t->len || !is_alnum(w[l - 1]) || !is_alnum(t->text[at + l]);
        if (!left || !right) continue;
        if (n == cap) {
            int *ns = hx_realloc(*spans, (size_t)(cap = cap ? cap * 2 : 8) * 2 * sizeof *ns);
            if (!ns) break;
            *spans = ns;
        }
        (*spans)[2 * n] = (int)at, (*spans)[2 * n + 1] = (int)(at + l), n++;
    }
    return n;
}

static int text_stated(const hx_he_text *t, const fact *f)
{
    for (int i = 0; i < f->n_text; i++) {
        int *sp, n = find_all(t, f->text[i], &sp);
        free(sp);
        if (n) return 1;
    }
    return 0;
}

/* The parts of f other than its text and its when, each stated in t. */
static int others_stated(const hx_he_text *t, const fact *f)
{
    int ok = 1;
    if (f->addr) {
        int *sp, n = find_all(t, f->addr, &sp);
        free(sp);
        ok &= n > 0;
    }
    if (f->file) {
        int *sp, n = find_all(t, f->file, &sp);
        free(sp);
        ok &= n > 0;
    }
    if (f->has_number) {
        int found = 0;
        for (int i = 0; i < t->n; i++)
            found |= t->m[i].kind == HX_HE_NUMBER && (fabs(t->m[i].value - f->number) < 1e-6 * fmax(1, fabs(f->number)) ||
                                                      fabs(t->m[i].value2 - f->number) < 1e-6 * fmax(1, fabs(f->number)));
        ok &= found;
    }
    return ok;
}

/* The anchors of a text: every occurrence of the text of a fact that has
 * a time or a date, with the fact it belongs to. */
typedef struct anchor {
    int at, end;
    const fact *f;
} anchor;

typedef struct anchors {
    anchor *a;
    int n, cap;
} anchors;

static void anchors_add(anchors *as, const hx_he_text *t, const fact *f)
{
    for (int i = 0; has_when(f) && i < f->n_text; i++) {
        int *sp, n = find_all(t, f->text[i], &sp);
        for (int k = 0; k < n; k++) {
            if (as->n == as->cap) {
                anchor *na = hx_realloc(as->a, (size_t)(as->cap = as->cap ? as->cap * 2 : 16) * sizeof *na);
                if (!na) break;
                as->a = na;
            }
            as->a[as->n++] = (anchor){sp[2 * k], sp[2 * k + 1], f};
        }
        free(sp);
    }
}

/* The distance between two spans of text: the bytes between them, and 20
 * more for each clause mark (",", ";", ".", a line break) between: "the
 * focus block, at 2 pm the review" says 2 pm of the review. */
static int gap(const char *text, int a0, int a1, int b0, int b1)
{
    int from = b0 >= a1 ? a1 : a0 >= b1 ? b1 : 0, to = b0 >= a1 ? b0 : a0 >= b1 ? a0 : 0, g = to - from;
    for (int i = from; i < to; i++) g += strchr(",;.!?\n", text[i]) ? 20 : 0;
    return g;
}

/* Whether the anchor nearest mention x (the earlier one on a tie) is an
 * occurrence of f's text: the time is said of f. */
static int said_of(const hx_he_text *t, const anchors *as, const hx_he_mention *x, const fact *f)
{
    int best = -1, dist = 0;
    for (int i = 0; i < as->n; i++) {
        int g = gap(t->text, as->a[i].at, as->a[i].end, x->at, x->end);
        if (best < 0 || g < dist || (g == dist && as->a[i].at < as->a[best].at)) best = i, dist = g;
    }
    for (int k = 0; best >= 0 && k < as->n; k++)
        if (as->a[k].f == f && as->a[k].at == as->a[best].at && as->a[k].end == as->a[best].end) return 1;
    return 0;
}

/* Whether t states fact f: each part; the time of a fact with a text said
 * of that text (as, the anchors; NULL: anywhere). A date need only be
 * stated: one date often heads a list of times. */
static int stated(const hx_he_text *t, const fact *f, const anchors *as, int64_t today, int weekdays)
{
    if (f->n_text && !text_stated(t, f)) return 0;
    if (!others_stated(t, f)) return 0;
    const char parts[2] = {'t', 'd'};
    for (int p = 0; p < 2; p++) {
        if ((parts[p] == 't' && f->minutes < 0) || (parts[p] == 'd' && !f->m)) continue;
        int found = 0;
        for (int i = 0; i < t->n && !found; i++)
            found = states_when(&t->m[i], f, parts[p], today, weekdays) &&
                    (!as || !f->n_text || parts[p] == 'd' || said_of(t, as, &t->m[i], f));
        if (!found) return 0;
    }
    return 1;
}

/* ---- the answer check ---- */

typedef struct facts {
    fact *f;
    int n;
} facts;

static void facts_parse(const cJSON *arr, facts *fs)
{
    fs->n = 0;
    fs->f = hx_calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *fs->f);
    const cJSON *j, *items = fs->f ? arr : NULL;
    cJSON_ArrayForEach(j, items)
    {
        if (fact_parse(j, &fs->f[fs->n])) fs->n++;
        else fact_free(&fs->f[fs->n]);
    }
}

static void facts_free(facts *fs)
{
    for (int i = 0; i < fs->n; i++) fact_free(&fs->f[i]);
    free(fs->f);
    fs->f = NULL;
    fs->n = 0;
}

/* The values of facts as text, appended to b: what they allow to say. */
static void facts_text(const cJSON *arr, hx_buf *b)
{
    const cJSON *j;
    cJSON_ArrayForEach(j, arr)
    {
        char s[400];
        hx_he_fact_str(j, s, sizeof s);
        hx_buf_printf(b, "\n%s", s);
    }
}

/* Whether answer mention x is allowed: among the allowed text's. */
static int allowed(const hx_he_mention *x, const hx_he_text *ok, int64_t today)
{
    int ty, tm, td;
    hx_civil_from_days(today, &ty, &tm, &td);
    for (int i = 0; i < ok->n; i++) {
        const hx_he_mention *a = &ok->m[i];
        switch (x->kind) {
        case HX_HE_TIME:
            if (a->kind == HX_HE_TIME && (a->minutes == x->minutes || a->minutes == x->minutes2 || a->minutes2 == x->minutes))
                return 1;
            break;
        case HX_HE_DATE:
            if (a->kind == HX_HE_DATE && (same_date(x, a->y, a->m, a->d) || (a->m2 && same_date(x, a->y, a->m2, a->d2))))
                return 1;
            break;
        case HX_HE_WEEKDAY:
            if (a->kind == HX_HE_DATE && weekday_of(a->y ? a->y : ty, a->m, a->d) == x->wday) return 1;
            if (a->kind == HX_HE_WEEKDAY && a->wday == x->wday) return 1;
            break;
        case HX_HE_ADDR:
        case HX_HE_FILE:
            if (a->kind == x->kind && !strcmp(a->s, x->s)) return 1;
            break;
        }
    }
    return x->kind == HX_HE_NUMBER;
}

static void put_list(char *buf, size_t n, const char *item)
{
    size_t l = strlen(buf);
    if (l + 3 < n) snprintf(buf + l, n - l, "%s%s", l ? ", " : "", item);
}

static void mention_str(const hx_he_text *t, const hx_he_mention *x, char *s, size_t n)
{
    snprintf(s, n, "%.*s", x->end - x->at, t->text + x->at);
}

int hx_he_check_answer(const cJSON *task, const char *answer, const char *sources, int64_t today,
                       char *why, size_t n)
{
    facts req, bad;
    hx_he_text at, ok;
    hx_buf allow;
    char missing[400] = "", wrong[400] = "", s[400];
    hx_buf_init(&allow);
    hx_buf_puts(&allow, sources ? sources : "");
    facts_text(cJSON_GetObjectItemCaseSensitive(task, "facts"), &allow);
    facts_text(cJSON_GetObjectItemCaseSensitive(task, "allow"), &allow);
    hx_buf_putc(&allow, 0);
    int rc = allow.oom ? HX_ERR_NOMEM : hx_he_scan(answer, today, &at);
    if (!rc && (rc = hx_he_scan(allow.data, today, &ok))) hx_he_text_free(&at);
    hx_buf_free(&allow);
    if (rc) return snprintf(why, n, "out of memory"), 0;
    facts_parse(cJSON_GetObjectItemCaseSensitive(task, "facts"), &req);
    facts_parse(cJSON_GetObjectItemCaseSensitive(task, "forbid"), &bad);
    anchors as = {0};
    for (int i = 0; i < req.n; i++) anchors_add(&as, &at, &req.f[i]);
    for (int i = 0; i < bad.n; i++) anchors_add(&as, &at, &bad.f[i]);
    for (int i = 0; i < req.n; i++)
        if (!stated(&at, &req.f[i], &as, today, 1))
            hx_he_fact_str(req.f[i].json, s, sizeof s), put_list(missing, sizeof missing, s);
    for (int i = 0; i < bad.n; i++)
        if (stated(&at, &bad.f[i], &as, today, 0))
            hx_he_fact_str(bad.f[i].json, s, sizeof s), put_list(wrong, sizeof wrong, s);
    for (int i = 0; i < at.n; i++)
        if (!allowed(&at.m[i], &ok, today)) mention_str(&at, &at.m[i], s, sizeof s), put_list(wrong, sizeof wrong, s);
    free(as.a);
    facts_free(&req);
    facts_free(&bad);
    hx_he_text_free(&at);
    hx_he_text_free(&ok);
    if (!missing[0] && !wrong[0]) return snprintf(why, n, "ok"), 1;
    snprintf(why, n, "%s%s%s%s%s", missing[0] ? "missing: " : "", missing, missing[0] && wrong[0] ? "; " : "",
             wrong[0] ? "wrong: " : "", wrong);
    return 0;
}

int hx_he_facts_in(const cJSON *task, const char *text, int64_t today, int *n_found, int *n_facts,
                   char *why, size_t n)
{
    facts req;
    hx_he_text t;
    if (hx_he_scan(text, today, &t)) return snprintf(why, n, "out of memory"), 0;
    facts_parse(cJSON_GetObjectItemCaseSensitive(task, "facts"), &req);
    int ok = 1;
    snprintf(why, n, "ok");
    for (int i = 0; i < req.n; i++) {
        if (req.f[i].say) continue;
        int in = stated(&t, &req.f[i], NULL, today, 0);
        *n_facts += 1, *n_found += in;
        if (in || !ok) continue;
        char s[300];
        hx_he_fact_str(req.f[i].json, s, sizeof s);
        snprintf(why, n, "not in the tools' results: %s", s);
        ok = 0;
    }
    facts_free(&req);
    hx_he_text_free(&t);
    return ok;
}
