/* fit.c: a tool result cut to the room the model's context has left, so
 * that a long result is read in part ("and 37 more ...") instead of failing
 * the request: the longest list loses its last items, or the longest text
 * its end, and the result says what was left out and how to get it. */
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

/* Positions kept free after the tool message for the model's next turn. */
#define FIT_RESERVE 256
/* A string is cut only when it is at least this long (bytes). */
#define FIT_MIN_TEXT 64

typedef struct fit_cx {
    const hx_fit *f;
    int room; /* tokens the tool message's content may take */
} fit_cx;

static int tokens_of(const hx_source *src, const char *text)
{
    return src->count ? src->count(src->ctx, text) : (int)(strlen(text) / 3);
}

static int result_tokens(const fit_cx *c, const cJSON *result)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_json_py(result, 0, &b);
    int n = b.oom ? 1 << 30 : tokens_of(c->f->src, b.data ? b.data : "");
    hx_buf_free(&b);
    return n;
}

/* The tokens of the prompt as the next turn will see it, the tool message
 * empty: the system message and the current request's messages (older
 * exchanges are dropped when the context is full, not this one's). */
static int prompt_tokens(const hx_fit *f)
{
    cJSON *msgs = cJSON_CreateArray(), *m;
    int i = 0, n = -1;
    cJSON_ArrayForEach(m, f->msgs)
    if (i++ == 0 || i > f->from) cJSON_AddItemReferenceToArray(msgs, m);
    cJSON *tool = cJSON_CreateObject();
    cJSON_AddStringToObject(tool, "role", "tool");
    cJSON_AddStringToObject(tool, "content", "");
    cJSON_AddStringToObject(tool, "name", f->tool);
    cJSON_AddItemToArray(msgs, tool);
    hx_buf b;
    hx_buf_init(&b);
    if (!hx_tpl_render(f->family, msgs, f->tools, NULL, &b)) n = tokens_of(f->src, b.data ? b.data : "");
    hx_buf_free(&b);
    cJSON_Delete(msgs);
    return n;
}

/* The result's longest array at its top level (by printed size), or NULL. */
static cJSON *longest_array(cJSON *result)
{
    cJSON *best = NULL, *it;
    size_t best_n = 0;
    cJSON_ArrayForEach(it, result)
    {
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) == 0) continue;
        char *s = cJSON_PrintUnformatted(it);
        size_t n = s ? strlen(s) : 0;
        free(s);
        if (n > best_n) best = it, best_n = n;
    }
    return best;
}

/* How to get what was cut from a list: from the first item left out. */
static void rest_hint(const hx_fit *f, const cJSON *first_cut, hx_buf *b)
{
    const char *start = cJSON_GetStringValue(cJSON_GetObjectItem(first_cut, "start"));
    const char *date = cJSON_GetStringValue(cJSON_GetObjectItem(first_cut, "date"));
    if (start)
        hx_buf_printf(b, "; the first not shown starts %s: call %s again with \"start\": \"%s\" "
                         "for them", start, f->tool, start);
    else if (date)
        hx_buf_printf(b, "; the first not shown is dated %s: narrow the search (words, "
                         "since/until) to see them", date);
    else
        hx_buf_puts(b, "; ask for less (a narrower search, a shorter period, a folder) to see them");
}

/* Notes the cut: "and 37 more events not shown ...; <how to get them>". */
static void note_list_cut(const hx_fit *f, cJSON *result, const char *key, int cut,
                          const cJSON *first_cut)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "and %d more %s not shown: the context has no room for them", cut, key);
    rest_hint(f, first_cut, &b);
    cJSON_DeleteItemFromObject(result, "not_shown");
    cJSON_AddStringToObject(result, "not_shown", b.data ? b.data : "");
    hx_buf_free(&b);
}

/* Keeps the first k items of arr (a copy of all of them in all), with the
 * note; returns the result's tokens then. */
static int keep_items(const fit_cx *c, cJSON *result, cJSON *arr, const cJSON *all, int k)
{
    while (cJSON_GetArraySize(arr) > 0) cJSON_DeleteItemFromArray(arr, 0);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, all)
    if (i++ < k) cJSON_AddItemToArray(arr, cJSON_Duplicate(it, 1));
    if (k < cJSON_GetArraySize(all))
        note_list_cut(c->f, result, arr->string, cJSON_GetArraySize(all) - k,
                      cJSON_GetArrayItem(all, k));
    return result_tokens(c, result);
}

/* Cuts the longest list to the most items that fit; 1 if it then fits. */
static int cut_list(const fit_cx *c, cJSON *result)
{
    cJSON *arr = longest_array(result);
    if (!arr) return 0;
    cJSON *all = cJSON_Duplicate(arr, 1);
    int lo = 0, hi = cJSON_GetArraySize(all) - 1; /* the most that fit is in [lo, hi] */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (keep_items(c, result, arr, all, mid) <= c->room) lo = mid;
        else hi = mid - 1;
    }
    int fits = keep_items(c, result, arr, all, lo) <= c->room;
    cJSON_Delete(all);
    return fits;
}

/* The result's longest string at its top level, or NULL; never the note
 * of a cut before (keep_text replaces that note, and the item with it). */
static cJSON *longest_text(cJSON *result)
{
    cJSON *best = NULL, *it;
    cJSON_ArrayForEach(it, result)
    if (cJSON_IsString(it) && strcmp(it->string, "not_shown") &&
        strlen(it->valuestring) >= FIT_MIN_TEXT &&
        (!best || strlen(it->valuestring) > strlen(best->valuestring)))
        best = it;
    return best;
}

/* Sets the string item to the first n bytes of text (never half a
 * character), with the note on how much was shown. */
static int keep_text(const fit_cx *c, cJSON *result, cJSON *item, const char *text, size_t n)
{
    while (n && ((unsigned char)text[n] & 0xC0) == 0x80) n--;
    char *part = hx_strndup(text, n);
    cJSON_SetValuestring(item, part ? part : "");
    free(part);
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "%s cut after %zu of its %zu bytes: the context has no room for the rest",
                  item->string, n, strlen(text));
    if (!strcmp(c->f->tool, "files.read"))
        hx_buf_printf(&b, "; call files.read again with \"offset\": %.0f for it",
                      cJSON_GetNumberValue(cJSON_GetObjectItem(result, "offset")) + (double)n);
    cJSON_DeleteItemFromObject(result, "not_shown");
    cJSON_AddStringToObject(result, "not_shown", b.data ? b.data : "");
    hx_buf_free(&b);
    return result_tokens(c, result);
}

/* Cuts the longest text to the most bytes that fit; 1 if it then fits. */
static int cut_text(const fit_cx *c, cJSON *result)
{
    cJSON *item = longest_text(result);
    if (!item) return 0;
    char *text = hx_strdup(item->valuestring);
    size_t lo = 0, hi = text ? strlen(text) : 0;
    while (lo + 16 < hi) { /* to 16 bytes: a token is about 4 */
        size_t mid = lo + (hi - lo) / 2;
        if (keep_text(c, result, item, text, mid) <= c->room) lo = mid;
        else hi = mid;
    }
    int fits = text && keep_text(c, result, item, text, lo) <= c->room;
    free(text);
    return fits;
}

/* Nothing fits: the result becomes what it was too large for. */
static void say_too_large(const fit_cx *c, cJSON *result, int tokens)
{
    while (result->child) cJSON_Delete(cJSON_DetachItemViaPointer(result, result->child));
    char note[256];
    snprintf(note, sizeof note, "the result (%d tokens) is larger than the room left in the "
             "context (%d tokens): ask for less", tokens, c->room);
    cJSON_AddStringToObject(result, "not_shown", note);
}

int hx_fit_result(const hx_fit *f, cJSON *result)
{
    const hx_source *src = f->src;
    int limit = src->api_version >= 6 && src->limit ? src->limit(src->ctx) : 0;
    if (limit <= 0 || !cJSON_IsObject(result)) return 0;
    int reserve = FIT_RESERVE < limit / 8 ? FIT_RESERVE : limit / 8;
    int used = prompt_tokens(f);
    fit_cx c = {f, limit - reserve - (used < 0 ? 0 : used)};
    int tokens = result_tokens(&c, result);
    if (tokens <= c.room) return 0;
    if (!cut_list(&c, result) && !cut_text(&c, result)) say_too_large(&c, result, tokens);
    return 1;
}
