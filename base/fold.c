/* fold.c: the one text folding every search filter shares (mail, calendar,
 * files, memory): case and accents removed so that "JÜRGEN WEISS" finds
 * "Jürgen Weiß" and "fundacion" finds "Fundación".
 *
 * What it covers, code point by code point (UTF-8 in, UTF-8 out):
 * - ASCII letters: lower case;
 * - Latin-1 Supplement, Latin Extended-A, -B and Extended Additional
 *   (U+00C0..U+024F, U+1E00..U+1EFF): the base letter(s), lower case
 *   ("É" e, "ß" and "ẞ" ss, "Æ" ae, "Œ" oe, "ø" o, "ł" l, "þ" th, "ǅ" dz);
 * - Greek and Cyrillic (U+0370..U+04FF): lower case without accents
 *   ("Ά" α, "ς" σ, "Ё" е); Russian's "й" stays itself;
 * - combining marks (U+0300..U+036F) are dropped, so text decomposed
 *   (NFD, as some file systems write names) folds as composed text does;
 * - fullwidth ASCII letters and digits (U+FF10..U+FF5A): ASCII, lower case;
 *   the ligatures U+FB00..U+FB06 ("ﬁ" fi); typographic quotes U+2018,
 *   U+2019 as "'", U+201C, U+201D as '"'; no-break space U+00A0 as ' '.
 * Everything else (Japanese, Chinese, Arabic, symbols, invalid bytes) is
 * copied unchanged, so a folded needle is still found as a substring. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/fold_table.h"

/* The code point at s (n bytes left) and its length; *len 1 and -1 for an
 * invalid or cut sequence (the byte is then copied as it is). */
static int32_t decode(const unsigned char *s, size_t n, int *len)
{
    int k = s[0] < 0x80 ? 1 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : s[0] >= 0xE0 && s[0] < 0xF0 ? 3
          : s[0] >= 0xF0 && s[0] < 0xF5 ? 4 : 0;
    *len = 1;
    if (!k || (size_t)k > n) return -1;
    int32_t cp = k == 1 ? s[0] : s[0] & (0x7F >> k);
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    *len = k;
    return cp;
}

/* The table entry of cp ("" keeps it), or NULL when no table covers it. */
static const char *table_entry(int32_t cp)
{
    if (cp >= FOLD_LATIN_FIRST && cp <= FOLD_LATIN_LAST) return fold_latin[cp - FOLD_LATIN_FIRST];
    if (cp >= FOLD_GREEK_FIRST && cp <= FOLD_GREEK_LAST) return fold_greek[cp - FOLD_GREEK_FIRST];
    if (cp >= FOLD_CYRILLIC_FIRST && cp <= FOLD_CYRILLIC_LAST)
        return fold_cyrillic[cp - FOLD_CYRILLIC_FIRST];
    if (cp >= FOLD_LATIN_ADD_FIRST && cp <= FOLD_LATIN_ADD_LAST)
        return fold_latin_add[cp - FOLD_LATIN_ADD_FIRST];
    return NULL;
}

/* The folding of cp outside the tables: a string (static, or one[]), ""
 * to drop it, or NULL to keep it. */
static const char *special(int32_t cp, char one[2])
{
    static const char *const lig[] = {"ff", "fi", "fl", "ffi", "ffl", "st", "st"};
    if (cp >= 0x300 && cp <= 0x36F) return "";
    if (cp >= 0xFB00 && cp <= 0xFB06) return lig[cp - 0xFB00];
    if (cp == 0x2018 || cp == 0x2019) return "'";
    if (cp == 0x201C || cp == 0x201D) return "\"";
    if (cp == 0xA0) return " ";
    if ((cp >= 0xFF10 && cp <= 0xFF19) || (cp >= 0xFF21 && cp <= 0xFF3A) ||
        (cp >= 0xFF41 && cp <= 0xFF5A)) {
        one[0] = (char)(cp - 0xFEE0);
        one[1] = 0;
        if (one[0] >= 'A' && one[0] <= 'Z') one[0] = (char)(one[0] - 'A' + 'a');
        return one;
    }
    return NULL;
}

int hx_fold_append(hx_buf *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { /* the common case, a byte at a time */
            char c = (char)p[i++];
            hx_buf_putc(out, c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c);
            continue;
        }
        int len;
        char one[2];
        int32_t cp = decode(p + i, n - i, &len);
        const char *f = cp < 0 ? NULL : table_entry(cp);
        if (f && !*f) f = NULL;
        if (!f && cp >= 0) f = special(cp, one);
        if (f) hx_buf_puts(out, f);
        else hx_buf_append(out, p + i, (size_t)len);
        i += (size_t)len;
    }
    return out->oom ? HX_ERR_NOMEM : HX_OK;
}

char *hx_fold(const char *s)
{
    hx_buf b;
    hx_buf_init(&b);
    if (!s) s = "";
    if (hx_buf_reserve(&b, strlen(s) + 1) || hx_fold_append(&b, s, strlen(s))) {
        hx_buf_free(&b);
        return NULL;
    }
    return hx_buf_steal(&b, NULL);
}

int hx_fold_contains(const char *hay, const char *needle)
{
    if (!needle || !*needle) return 1;
    if (!hay) return 0;
    char *h = hx_fold(hay), *nd = hx_fold(needle);
    int found = h && nd && strstr(h, nd) != NULL;
    free(h);
    free(nd);
    return found;
}

/* Function words of the languages Hearth's users write requests and mail
 * in (English, German, French, Spanish), folded, sorted for bsearch, and
 * the tails an apostrophe splits off English words ("Bob's", "that's",
 * "don't", "I'll", "we're", "I've", "I'd", "I'm"), which alone would match
 * every possessive: "Thank you, that's all" recalled "the user's manager".
 * Words that are also names or topics ("mit", "die", "also") are left out. */
static const char *const stop_words[] = {
    "a", "about", "al", "an", "and", "any", "are", "as", "at", "au", "auf",
    "aux", "be", "bitte", "by", "can", "con", "could", "cuando", "d", "dans", "das",
    "de", "del", "dem", "den", "der", "des", "do", "donde", "du", "ein", "eine",
    "einem", "einen", "einer", "el", "en", "es", "est", "et", "for", "from",
    "fur", "had", "has", "have", "he", "her", "him", "his", "how", "i", "ich",
    "if", "im", "in", "is", "ist", "it", "its", "la", "las", "le", "les", "ll", "lo",
    "los", "m", "ma", "me", "mein", "meine", "meinen", "mes", "mi", "mis", "mon",
    "my", "nicht", "of", "on", "or", "our", "par", "para", "please", "por",
    "pour", "quand", "que", "qui", "re", "s", "se", "she", "sie", "so", "sur", "t", "that",
    "the", "their", "them", "then", "there", "they", "this", "to", "un", "una",
    "und", "une", "uno", "us", "ve", "von", "wann", "was", "we", "were", "what", "when",
    "where", "which", "who", "wie", "will", "with", "wo", "would", "y", "you",
    "your", "zu",
};

static int cmp_word(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

int hx_fold_stop_word(const char *w, size_t n)
{
    char k[8];
    if (n == 0 || n >= sizeof k) return 0;
    memcpy(k, w, n);
    k[n] = 0;
    return bsearch(k, stop_words, sizeof stop_words / sizeof *stop_words, sizeof *stop_words,
                   cmp_word) != NULL;
}

int hx_fold_spaceless(int32_t cp)
{
    return (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7AF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFF66 && cp <= 0xFF9F);
}

/* Punctuation and spaces beyond ASCII: Latin-1's, general punctuation,
 * CJK punctuation, fullwidth punctuation. */
static int punct(int32_t cp)
{
    return (cp >= 0xA1 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 ||
           (cp >= 0x2000 && cp <= 0x206F) || (cp >= 0x2E00 && cp <= 0x2E7F) ||
           (cp >= 0x3000 && cp <= 0x303F) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
           (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
           (cp >= 0xFF5B && cp <= 0xFF65);
}

/* The code point at s[i] (n bytes), its length in *len; -1 if invalid. */
static int32_t cp_of(const char *s, size_t i, size_t n, int *len)
{
    return decode((const unsigned char *)s + i, n - i, len);
}

static int word_char(const char *s, size_t i, size_t n, int *len)
{
    unsigned char c = (unsigned char)s[i];
    *len = 1;
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    int32_t cp = cp_of(s, i, n, len);
    return cp >= 0 && !punct(cp);
}

int hx_fold_pieces(const char *w, size_t n, int (*emit)(void *u, const char *p, size_t n),
                   void *u)
{
    int rc = 0, la, lb;
    size_t i = 0;
    while (i < n && !rc) {
        int cjk = hx_fold_spaceless(cp_of(w, i, n, &la));
        size_t j = i + (size_t)la;
        while (j < n && hx_fold_spaceless(cp_of(w, j, n, &lb)) == cjk) j += (size_t)lb;
        if (!cjk || j - i == (size_t)la) rc = emit(u, w + i, j - i);
        for (size_t k = i; cjk && !rc; k += (size_t)la) {
            cp_of(w, k, n, &la);
            if (k + (size_t)la >= j) break;
            cp_of(w, k + (size_t)la, n, &lb);
            rc = emit(u, w + k, (size_t)(la + lb));
        }
        i = j;
    }
    return rc;
}

/* Appends term (n bytes) and its NUL to the hx_buf u unless it has it. */
static int add_term(void *u, const char *t, size_t n)
{
    hx_buf *out = u;
    for (size_t i = 0; out->data && i < out->len; i += strlen(out->data + i) + 1)
        if (strlen(out->data + i) == n && !memcmp(out->data + i, t, n)) return 0;
    hx_buf_append(out, t, n);
    hx_buf_putc(out, '\0');
    return 0;
}

/* How many NUL-ended terms b holds. */
static int n_terms(const hx_buf *b)
{
    int n = 0;
    for (size_t i = 0; b->data && i < b->len; i += strlen(b->data + i) + 1) n++;
    return n;
}

/* hx_fold_terms over folded text f, with or without function words. */
static int terms_of(const char *f, size_t n, int keep_stop, hx_buf *terms, hx_buf *ignored)
{
    int len, n0 = n_terms(terms);
    size_t i = 0;
    while (i < n && n_terms(terms) - n0 < HX_FOLD_MAX_TERMS) {
        size_t j = i;
        while (j < n && word_char(f, j, n, &len)) j += (size_t)len;
        if (j == i) {
            i += (size_t)len;
            continue;
        }
        if (!keep_stop && hx_fold_stop_word(f + i, j - i)) {
            if (ignored) add_term(ignored, f + i, j - i);
        } else {
            hx_fold_pieces(f + i, j - i, add_term, terms);
        }
        i = j;
    }
    return n_terms(terms) - n0;
}

int hx_fold_terms(const char *text, hx_buf *terms, hx_buf *ignored)
{
    hx_buf f;
    hx_buf_init(&f);
    size_t t0 = terms->len, i0 = ignored ? ignored->len : 0;
    hx_fold_append(&f, text ? text : "", text ? strlen(text) : 0);
    int n = terms_of(f.data ? f.data : "", f.len, 0, terms, ignored);
    if (n == 0) { /* only function words: they are what there is */
        if (ignored) ignored->len = i0;
        n = terms_of(f.data ? f.data : "", f.len, 1, terms, NULL);
    }
    int oom = f.oom || terms->oom || (ignored && ignored->oom);
    hx_buf_free(&f);
    if (n > HX_FOLD_MAX_TERMS) { /* a long run of pairs */
        size_t at = t0;
        for (int k = 0; k < HX_FOLD_MAX_TERMS; k++) at += strlen(terms->data + at) + 1;
        terms->len = at;
        n = HX_FOLD_MAX_TERMS;
    }
    if (oom) {
        terms->len = t0;
        return -1;
    }
    return n;
}

int hx_fold_count_terms(const char *folded, const hx_buf *terms)
{
    int n = 0;
    for (size_t i = 0; terms->data && i < terms->len; i += strlen(terms->data + i) + 1)
        n += strstr(folded ? folded : "", terms->data + i) != NULL;
    return n;
}

int hx_fold_n_terms(const hx_buf *terms) { return n_terms(terms); }

int hx_fold_has_terms(const char *folded, const hx_buf *terms)
{
    return hx_fold_count_terms(folded, terms) == n_terms(terms);
}

/* Punctuation around a filter word, not part of it: "(Lyon)," is lyon. */
static int edge_punct(char c)
{
    return c && strchr(",;:<>\"'()[]{}!?.", c) != NULL;
}

/* hx_fold_words over folded text f. */
static int words_of(const char *f, int drop_stop, hx_buf *words)
{
    int n0 = n_terms(words);
    for (const char *p = f; *p;) {
        size_t n = strcspn(p, " \t\r\n");
        const char *w = p;
        size_t k = n;
        while (k && edge_punct(*w)) w++, k--;
        while (k && edge_punct(w[k - 1])) k--;
        if (k && (!drop_stop || !hx_fold_stop_word(w, k))) add_term(words, w, k);
        p += n + (p[n] != '\0');
    }
    return n_terms(words) - n0;
}

int hx_fold_words(const char *text, int drop_stop, hx_buf *words)
{
    char *f = hx_fold(text);
    if (!f) return -1;
    size_t w0 = words->len;
    int n = words_of(f, drop_stop, words);
    if (n == 0 && drop_stop) n = words_of(f, 0, words);
    free(f);
    if (words->oom) {
        words->len = w0;
        return -1;
    }
    return n;
}
