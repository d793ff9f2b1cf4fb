/* names.c: a person named where an address belongs ("attendees":
 * ["Dana"]), found among the people of the user's mail. A model that
 * knows a colleague only by name writes the name; the call resolves it to
 * the one address the user's mail gives that name, before the user is
 * asked to allow the call, or says why it cannot (no one of that name,
 * or several, each listed). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/tools_int.h"

#define NAME_BYTES 64 /* longer is no name a user types */
#define NAME_WORDS 4

/* Whether s may be a person's name: no address, no brackets, 1 to
 * NAME_WORDS words, NAME_BYTES at most, a letter in it. */
static int name_like(const char *s)
{
    const size_t n = strlen(s);
    if (!n || n > NAME_BYTES || strpbrk(s, "@<>\"(),;:[]\\/")) return 0;
    int words = 0, letter = 0;
    for (size_t i = 0; i < n; i++) {
        words += s[i] != ' ' && (i == 0 || s[i - 1] == ' ');
        letter |= (unsigned char)s[i] >= 0x80 || ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z');
    }
    return letter && words <= NAME_WORDS;
}

/* Whether the folded word w (NUL-ended) is one of words (NUL-separated,
 * len bytes). */
static int has_word(const char *words, size_t len, const char *w)
{
    for (const char *p = words; p < words + len; p += strlen(p) + 1)
        if (!strcmp(p, w)) return 1;
    return 0;
}

/* One person of the correspondents (a line "address\tname"), and the key
 * by which an address is listed once ("\naddress\n", lower case). */
typedef struct person {
    char email[256], display[256], key[260];
} person;

/* Reads the line at l into p; returns where the next line starts. */
static const char *read_person(const char *l, person *p)
{
    const size_t len = strcspn(l, "\n"), tab = strcspn(l, "\t");
    snprintf(p->email, sizeof p->email, "%.*s", (int)(tab < len ? tab : len), l);
    snprintf(p->display, sizeof p->display, "%.*s", tab < len ? (int)(len - tab - 1) : 0, l + tab + 1);
    snprintf(p->key, sizeof p->key, "\n%s\n", p->email);
    for (char *c = p->key; *c; c++) *c = (char)((*c >= 'A' && *c <= 'Z') ? *c + 32 : *c);
    return l + len + (l[len] == '\n');
}

/* Whether p is no one to list: the user, or an address listed already
 * (its key in seen). */
static int passed_over(const hx_config *cfg, const person *p, const hx_buf *seen)
{
    return (cfg && cfg->user_email && !strcasecmp(p->email, cfg->user_email)) ||
           (seen->data && strstr(seen->data, p->key));
}

/* The folded words a person is named by: the display name's and the
 * address's local part's (all its words, or the first alone: "kenta" of
 * kenta.mori@...), appended to words. 0, or -1 when out of memory. */
static int person_words(const person *p, int first_only, hx_buf *words)
{
    char local[256];
    snprintf(local, sizeof local, "%.*s", (int)strcspn(p->email, first_only ? "@._-+" : "@"), p->email);
    for (char *c = local; *c; c++)
        if (*c == '.' || *c == '_' || *c == '-' || *c == '+') *c = ' ';
    return hx_fold_words(p->display, 0, words) < 0 || hx_fold_words(local, 0, words) < 0 ? -1 : 0;
}

/* Whether every word of the name (folded words q) is a word of the
 * person's display name or address's local part. */
static int person_is(const hx_buf *q, const person *p)
{
    hx_buf words;
    hx_buf_init(&words);
    int ok = person_words(p, 0, &words) == 0;
    for (const char *w = q->data; ok && w < q->data + q->len; w += strlen(w) + 1)
        ok = has_word(words.data, words.len, w);
    hx_buf_free(&words);
    return ok;
}

/* The people named name among the correspondents (lines "address\tname"),
 * each address once, as "Name <address>" lines appended to found; the
 * user's own address is not one. Returns how many. */
static int people_named(const hx_tools *reg, const char *name, const char *people, hx_buf *found)
{
    const hx_config *cfg = hx_tools_config(reg);
    hx_buf q, seen;
    hx_buf_init(&q);
    hx_buf_init(&seen);
    int n = 0;
    person p;
    if (hx_fold_words(name, 0, &q) > 0)
        for (const char *l = people; *l;) {
            l = read_person(l, &p);
            if (passed_over(cfg, &p, &seen) || !person_is(&q, &p)) continue;
            hx_buf_puts(&seen, p.key);
            hx_buf_printf(found, *p.display ? "%s <%s>\n" : "%s%s\n", p.display, p.email);
            n++;
        }
    hx_buf_free(&q);
    hx_buf_free(&seen);
    return n;
}

/* The one address of name into *out (a new string), or the error that
 * says there is none or which there are. */
static int resolve_one(const hx_tools *reg, const char *key, const char *name, const char *people,
                       cJSON **out, hx_err *err)
{
    hx_buf found;
    hx_buf_init(&found);
    const int n = people_named(reg, name, people, &found);
    int rc = HX_OK;
    if (found.oom) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    else if (n == 0)
        rc = hx_err_set(err, HX_ERR_NOTFOUND,
                        "argument '%s': '%s' is not an address, and no one of that name is in "
                        "your mail: write the address (name@domain)", key, name);
    else if (n > 1) {
        for (char *c = found.data; *c; c++)
            if (*c == '\n' && c[1]) *c = ';';
        found.data[found.len - 1] = 0;
        rc = hx_err_set(err, HX_ERR_INVALID, "argument '%s': '%s' could be any of: %s; write the address",
                        key, name, found.data);
    } else {
        found.data[found.len - 1] = 0;
        *out = cJSON_CreateString(found.data);
        if (!*out) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    hx_buf_free(&found);
    return rc;
}

/* Resolves the names of one string value (one address or a comma list):
 * *val replaced by the resolved list when a piece was a name, each name
 * and its address added to resolved. */
static int resolve_value(const hx_tools *reg, const char *key, cJSON *val, const char **people,
                         hx_buf *held, cJSON *resolved, hx_err *err)
{
    const char *s = val->valuestring;
    char piece[512], name[256], email[256];
    hx_buf list;
    hx_buf_init(&list);
    int rc = HX_OK, changed = 0;
    while (!rc && hx_address_list_next(&s, piece, sizeof piece)) {
        const char *p = piece + strspn(piece, " ");
        cJSON *addr = NULL;
        if (hx_parse_address(p, name, sizeof name, email, sizeof email) && name_like(p)) {
            if (!*people && !(rc = hx_tools_correspondents(reg, held, err)))
                *people = held->data ? held->data : "";
            if (!rc) rc = resolve_one(reg, key, p, *people, &addr, err);
            if (!rc && !cJSON_GetObjectItemCaseSensitive(resolved, p) &&
                !hx_json_add(resolved, p, cJSON_Duplicate(addr, 0)))
                rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
            changed = 1;
        }
        if (!rc) hx_buf_printf(&list, "%s%s", list.len ? ", " : "", addr ? addr->valuestring : p);
        cJSON_Delete(addr);
    }
    if (!rc && changed) {
        cJSON_SetValuestring(val, list.data);
        if (list.oom || strcmp(val->valuestring, list.data)) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    hx_buf_free(&list);
    return rc;
}

int hx_tools_resolve_names(const hx_tools *reg, const char *tool, const cJSON *args, cJSON **named,
                           cJSON **resolved, hx_err *err)
{
    static const char *const keys[] = {"attendees", "to", "cc", "bcc"};
    const hx_tool_def *d = tool ? hx_tools_find(reg, tool) : NULL;
    *named = *resolved = NULL;
    if (!d || !(d->flags & HX_TOOL_BUILTIN) || !cJSON_IsObject(args)) return HX_OK;
    cJSON *copy = cJSON_Duplicate(args, 1), *found = cJSON_CreateObject();
    const char *people = NULL; /* read once, when a name needs it */
    hx_buf held;
    hx_buf_init(&held);
    int rc = copy && found ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    cJSON *schema = d->schema_json ? cJSON_Parse(d->schema_json) : NULL;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    for (size_t k = 0; !rc && k < sizeof keys / sizeof *keys; k++) {
        if (!cJSON_GetObjectItemCaseSensitive(props, keys[k])) continue; /* not an address of this tool */
        cJSON *v = cJSON_GetObjectItemCaseSensitive(copy, keys[k]), *it;
        if (cJSON_IsString(v)) rc = resolve_value(reg, keys[k], v, &people, &held, found, err);
        if (!cJSON_IsArray(v)) continue;
        cJSON_ArrayForEach(it, v)
        if (!rc && cJSON_IsString(it)) rc = resolve_value(reg, keys[k], it, &people, &held, found, err);
    }
    hx_buf_free(&held);
    cJSON_Delete(schema);
    if (rc || !cJSON_GetArraySize(found)) {
        cJSON_Delete(copy);
        cJSON_Delete(found);
        return rc;
    }
    *named = copy;
    *resolved = found;
    return HX_OK;
}

/* ---- the people a request names ---- */
#define NAMED_MAX 5 /* people listed at most */

/* Whether folded word w is a word of the person's display name or the
 * first word of the address's local part. */
static int names_person(const char *w, const person *p)
{
    hx_buf words;
    hx_buf_init(&words);
    int ok = person_words(p, 1, &words) == 0 && has_word(words.data, words.len, w);
    hx_buf_free(&words);
    return ok;
}

/* The word of the request that folds to w, as the user wrote it, into
 * buf: the prompt names the person in the user's words, not in the
 * display name another chose. */
static void as_written(const char *request, const char *w, char *buf, size_t n)
{
    snprintf(buf, n, "%s", w);
    for (const char *p = request; *p;) {
        const size_t k = strcspn(p, " \t\r\n,;:!?()\"");
        hx_buf one;
        hx_buf_init(&one);
        char word[128];
        snprintf(word, sizeof word, "%.*s", (int)(k < 127 ? k : 127), p);
        const int same = k && hx_fold_words(word, 0, &one) == 1 && !strcmp(one.data, w);
        hx_buf_free(&one);
        if (same) { /* the word without the punctuation around it, as folding takes it */
            const char *a = word;
            size_t m = strlen(word);
            while (m && (unsigned char)*a < 0x80 && ispunct((unsigned char)*a)) a++, m--;
            while (m && (unsigned char)a[m - 1] < 0x80 && ispunct((unsigned char)a[m - 1])) m--;
            snprintf(buf, n, "%.*s", (int)m, a);
            return;
        }
        p += k + (p[k] != 0);
    }
}

int hx_tools_people_named(const hx_tools *reg, const char *request, hx_buf *out, hx_err *err)
{
    const hx_config *cfg = hx_tools_config(reg);
    hx_buf q, people, seen;
    hx_buf_init(&q);
    hx_buf_init(&people);
    hx_buf_init(&seen);
    /* "Dana's", "Dana’s": the name before the apostrophe */
    char *req = hx_strdup(request ? request : "");
    for (char *c = req; c && *c; c++)
        if (*c == '\'') *c = ' ';
        else if (!strncmp(c, "\xe2\x80\x99", 3)) c[0] = c[1] = c[2] = ' ';
    int n = 0, rc = !req || hx_fold_words(req, 1, &q) < 0 ? hx_err_set(err, HX_ERR_NOMEM, "out of memory")
                                                          : hx_tools_correspondents(reg, &people, err);
    free(req);
    person p;
    for (const char *l = people.data ? people.data : ""; !rc && *l && n < NAMED_MAX;) {
        l = read_person(l, &p);
        if (passed_over(cfg, &p, &seen)) continue;
        const char *named = NULL;
        for (const char *w = q.data; !named && w && w < q.data + q.len; w += strlen(w) + 1)
            if (strlen(w) >= 2 && strspn(w, "0123456789") < strlen(w) && names_person(w, &p))
                named = w;
        if (!named) continue;
        char word[128];
        as_written(request, named, word, sizeof word);
        hx_buf_puts(&seen, p.key);
        hx_buf_printf(out, "- %s <%s>\n", word, p.email);
        n++;
    }
    hx_buf_free(&q);
    hx_buf_free(&people);
    hx_buf_free(&seen);
    if (!rc && out->oom) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    return rc ? -rc : n;
}
