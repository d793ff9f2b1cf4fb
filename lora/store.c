/* store.c: the user's adapter store ($XDG_DATA_HOME/hearth/adapters/):
 * stored adapters, the pointer file naming the active set, and the
 * history of earlier sets for rollback; every change is atomic. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lora/lora.h"

#define POINTER "active.json"
#define HISTORY_MAX 16

struct hx_lora_store {
    char dir[4096];
};

int hx_lora_store_open(const char *dir, hx_lora_store **out, hx_err *err)
{
    *out = NULL;
    char def[4096];
    if (!dir) {
        if (hx_path_data(def, sizeof def - 16) < 0)
            return hx_err_set(err, HX_ERR_RANGE, "data directory path too long");
        strcat(def, "/adapters");
        dir = def;
    }
    hx_lora_store *s = hx_calloc(1, sizeof *s);
    if (!s) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if ((size_t)snprintf(s->dir, sizeof s->dir, "%s", dir) >= sizeof s->dir - 128) {
        free(s);
        return hx_err_set(err, HX_ERR_RANGE, "%s: path too long", dir);
    }
    int rc = hx_mkdirs(s->dir, err);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return HX_OK;
}

void hx_lora_store_free(hx_lora_store *s) { free(s); }

const char *hx_lora_store_dir(const hx_lora_store *s) { return s->dir; }

/* Stored names: [A-Za-z0-9._-]+ ending in .gguf, not starting with '.'. */
static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n < 6 || n >= sizeof ((hx_lora_use *)0)->name || name[0] == '.' ||
        strcmp(name + n - 5, ".gguf"))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789._-", name[i]))
            return 0;
    return 1;
}

int hx_lora_store_path(const hx_lora_store *s, const char *name, char *buf,
                       size_t n)
{
    return snprintf(buf, n, "%s/%s", s->dir, name);
}

static int is_stored(const hx_lora_store *s, const char *name)
{
    char p[4352];
    struct stat st;
    hx_lora_store_path(s, name, p, sizeof p);
    return name_ok(name) && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int hx_lora_store_list(hx_lora_store *s, char ***names, int *n, hx_err *err)
{
    *names = NULL, *n = 0;
    DIR *d = opendir(s->dir);
    if (!d) return hx_err_set(err, HX_ERR_IO, "%s: cannot list", s->dir);
    int cap = 0, rc = HX_OK;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!is_stored(s, e->d_name)) continue; /* temporaries, the pointer */
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **p = hx_realloc(*names, (size_t)cap * sizeof *p);
            if (!p) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
            else *names = p;
        }
        if (!rc && !((*names)[*n] = hx_strdup(e->d_name)))
            rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        if (!rc) (*n)++;
    }
    closedir(d);
    if (rc) {
        hx_lora_names_free(*names, *n);
        *names = NULL, *n = 0;
        return rc;
    }
    if (*n) qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return HX_OK;
}

void hx_lora_names_free(char **names, int n)
{
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

/* ---- the pointer file: {"version":1,"active":[{"name","scale"}...],
 * "history":[[...], ...]} (oldest set first) ---- */

static int parse_set(const cJSON *arr, hx_lora_use *out, int *n)
{
    *n = 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > HX_ADAPTER_MAX) return -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(e, "scale");
        if (!cJSON_IsString(nm) || !name_ok(nm->valuestring) || !cJSON_IsNumber(sc))
            return -1;
        snprintf(out[*n].name, sizeof out[*n].name, "%s", nm->valuestring);
        out[(*n)++].scale = (float)sc->valuedouble;
    }
    return 0;
}

typedef struct ptr_state {
    hx_lora_use active[HX_ADAPTER_MAX];
    int n_active;
    hx_lora_use hist[HISTORY_MAX][HX_ADAPTER_MAX];
    int n_hist[HISTORY_MAX];
    int depth;
} ptr_state;

static int read_pointer(const hx_lora_store *s, ptr_state *st, hx_err *err)
{
    memset(st, 0, sizeof *st);
    char p[4352], *text = NULL;
    size_t len = 0;
    hx_lora_store_path(s, POINTER, p, sizeof p);
    struct stat sb;
    if (stat(p, &sb) != 0) return HX_OK; /* nothing adopted yet */
    int rc = hx_read_file(p, 1 << 20, &text, &len, err);
    if (rc) return rc;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *hist = cJSON_GetObjectItemCaseSensitive(j, "history"), *h;
    rc = !j || parse_set(cJSON_GetObjectItemCaseSensitive(j, "active"),
                         st->active, &st->n_active) ||
         (hist && !cJSON_IsArray(hist));
    cJSON_ArrayForEach(h, hist) {
        if (rc || st->depth == HISTORY_MAX) break;
        rc = parse_set(h, st->hist[st->depth], &st->n_hist[st->depth]);
        st->depth++;
    }
    cJSON_Delete(j);
    return rc ? hx_err_set(err, HX_ERR_FORMAT, "%s is damaged (expected "
                           "{\"active\": [{\"name\", \"scale\"}], \"history\": "
                           "[...]})", p)
              : HX_OK;
}

static cJSON *set_json(const hx_lora_use *u, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", u[i].name);
        cJSON_AddNumberToObject(e, "scale", (double)u[i].scale);
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

static int write_pointer(const hx_lora_store *s, const ptr_state *st,
                         hx_err *err)
{
    cJSON *j = cJSON_CreateObject(), *h = cJSON_CreateArray();
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddItemToObject(j, "active", set_json(st->active, st->n_active));
    for (int i = 0; i < st->depth; i++)
        cJSON_AddItemToArray(h, set_json(st->hist[i], st->n_hist[i]));
    cJSON_AddItemToObject(j, "history", h);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    char p[4352];
    hx_lora_store_path(s, POINTER, p, sizeof p);
    int rc = hx_write_file_atomic(p, text, strlen(text), err);
    free(text);
    return rc;
}

int hx_lora_store_active(hx_lora_store *s, hx_lora_use *out, int *n,
                         hx_err *err)
{
    ptr_state st;
    *n = 0;
    int rc = read_pointer(s, &st, err);
    if (rc) return rc;
    memcpy(out, st.active, sizeof st.active);
    *n = st.n_active;
    return HX_OK;
}

int hx_lora_store_history(hx_lora_store *s, int *depth, hx_err *err)
{
    ptr_state st;
    int rc = read_pointer(s, &st, err);
    *depth = rc ? 0 : st.depth;
    return rc;
}

int hx_lora_store_add(hx_lora_store *s, const char *src, const char *name,
                      hx_err *err)
{
    if (!name_ok(name))
        return hx_err_set(err, HX_ERR_INVALID, "'%s' is not a store name "
                          "(letters, digits, '.', '_', '-', ending in .gguf)", name);
    hx_gguf *g = NULL;
    const char *type = NULL;
    int rc = hx_gguf_open(src, &g, err);
    if (!rc && (hx_gguf_get_str(g, "general.type", &type) || strcmp(type, "adapter")))
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s is not an adapter (general.type "
                        "'%s')", src, type ? type : "missing");
    hx_gguf_close(g);
    if (rc) return rc;
    if (is_stored(s, name))
        return hx_err_set(err, HX_ERR_STATE, "an adapter named %s is already "
                          "stored", name);
    char *data = NULL, dst[4352];
    size_t len = 0;
    rc = hx_read_file(src, 0, &data, &len, err);
    hx_lora_store_path(s, name, dst, sizeof dst);
    /* temporary file, fsync, rename, fsync of the directory */
    if (!rc) rc = hx_write_file_atomic(dst, data, len, err);
    free(data);
    return rc;
}

int hx_lora_store_use(hx_lora_store *s, const hx_lora_use *uses, int n,
                      hx_err *err)
{
    if (n < 0 || n > HX_ADAPTER_MAX)
        return hx_err_set(err, HX_ERR_INVALID, "at most %d adapters at once",
                          HX_ADAPTER_MAX);
    for (int i = 0; i < n; i++)
        if (!is_stored(s, uses[i].name))
            return hx_err_set(err, HX_ERR_NOTFOUND, "no stored adapter named "
                              "'%s' (hearth lora list)", uses[i].name);
    ptr_state st;
    int rc = read_pointer(s, &st, err);
    if (rc) return rc;
    if (st.depth == HISTORY_MAX) { /* forget the oldest set */
        memmove(st.hist[0], st.hist[1], sizeof st.hist[0] * (HISTORY_MAX - 1));
        memmove(st.n_hist, st.n_hist + 1, sizeof st.n_hist[0] * (HISTORY_MAX - 1));
        st.depth--;
    }
    memcpy(st.hist[st.depth], st.active, sizeof st.active);
    st.n_hist[st.depth++] = st.n_active;
    memcpy(st.active, uses, (size_t)n * sizeof *uses);
    st.n_active = n;
    return write_pointer(s, &st, err);
}

int hx_lora_store_rollback(hx_lora_store *s, hx_err *err)
{
    ptr_state st;
    int rc = read_pointer(s, &st, err);
    if (rc) return rc;
    if (st.depth == 0)
        return hx_err_set(err, HX_ERR_NOTFOUND, "nothing to roll back to");
    st.depth--;
    memcpy(st.active, st.hist[st.depth], sizeof st.active);
    st.n_active = st.n_hist[st.depth];
    for (int i = 0; i < st.n_active; i++)
        if (!is_stored(s, st.active[i].name))
            return hx_err_set(err, HX_ERR_NOTFOUND, "the previous set names %s, "
                              "which is no longer stored", st.active[i].name);
    return write_pointer(s, &st, err);
}

int hx_lora_store_adopt(hx_lora_store *s, const char *src, const char *name,
                        float scale, hx_err *err)
{
    /* the adapter is complete and on disk before the pointer names it */
    int rc = hx_lora_store_add(s, src, name, err);
    hx_lora_use u;
    snprintf(u.name, sizeof u.name, "%s", name);
    u.scale = scale;
    return rc ? rc : hx_lora_store_use(s, &u, 1, err);
}

int hx_lora_store_load_active(hx_lora_store *s, const hx_model *m,
                              hx_adapter **ads, float *scales, int *n,
                              hx_err *err)
{
    hx_lora_use u[HX_ADAPTER_MAX];
    int k = 0;
    *n = 0;
    int rc = hx_lora_store_active(s, u, &k, err);
    for (int i = 0; !rc && i < k; i++) {
        char p[4352];
        hx_lora_store_path(s, u[i].name, p, sizeof p);
        rc = hx_adapter_load(m, p, &ads[i], err);
        if (rc) break;
        scales[i] = u[i].scale;
        (*n)++;
    }
    if (rc) {
        for (int i = 0; i < *n; i++) hx_adapter_free(ads[i]);
        *n = 0;
    }
    return rc;
}
