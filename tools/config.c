/* config.c: the user's configuration (config.json with // and block
 * comments): identity, time zone, working hours, calendars, mail, files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/tools_int.h"

#define CONFIG_MAX (1 << 20)

static const char *const day_names[7] = {"sun", "mon", "tue", "wed",
                                         "thu", "fri", "sat"};

void hx_config_free(hx_config *c)
{
    if (!c) return;
    free(c->user_name);
    free(c->user_email);
    free(c->timezone);
    for (int i = 0; i < c->n_calendars; i++) free(c->calendars[i]);
    free(c->calendar_default);
    free(c->maildir);
    free(c->outbox);
    for (int i = 0; i < c->n_file_roots; i++) free(c->file_roots[i]);
    free(c->model);
    free(c->small_model);
    free(c->path);
    cJSON_Delete(c->raw);
    free(c);
}

/* $TZ (if it names a zone libical knows), else /etc/timezone, else UTC. */
static char *default_tz(void)
{
    const char *tz = getenv("TZ");
    if (tz && *tz == ':') tz++;
    if (tz && *tz && strcmp(tz, "UTC") && hx_tz_find(tz)) return hx_strdup(tz);
    char *s = NULL;
    size_t n;
    if (hx_read_file("/etc/timezone", 256, &s, &n, NULL) == HX_OK) {
        s[strcspn(s, " \t\r\n")] = 0;
        if (*s && hx_tz_find(s)) return s;
    }
    free(s);
    return hx_strdup("UTC");
}

static char *join(const char *dir, const char *rel)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "%s/%s", dir, rel);
    return hx_buf_steal(&b, NULL);
}

hx_config *hx_config_default(void)
{
    hx_config *c = hx_calloc(1, sizeof *c);
    char data[4096];
    if (!c) return NULL;
    if (hx_path_data(data, sizeof data) < 0) snprintf(data, sizeof data, ".");
    const char *user = getenv("USER");
    c->user_name = hx_strdup(user ? user : "");
    c->user_email = hx_strdup("");
    c->timezone = default_tz();
    c->work_start_min = 9 * 60;
    c->work_end_min = 17 * 60;
    c->work_days = 0x3e; /* Monday to Friday */
    c->calendars[c->n_calendars++] = join(data, "calendars/personal");
    c->calendar_default = join(data, "calendars/personal");
    c->maildir = join(data, "mail");
    c->outbox = join(data, "outbox");
    const char *home = getenv("HOME");
    if (home && *home) c->file_roots[c->n_file_roots++] = join(home, "Documents");
    if (!c->user_name || !c->timezone || !c->calendar_default || !c->maildir ||
        !c->outbox) {
        hx_config_free(c);
        return NULL;
    }
    return c;
}

/* Removes // and block comments outside strings, in place. */
static void strip_comments(char *s)
{
    char *w = s;
    int in_str = 0;
    while (*s) {
        if (in_str) {
            if (*s == '\\' && s[1]) *w++ = *s++;
            else if (*s == '"') in_str = 0;
            *w++ = *s++;
        } else if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n') s++;
        } else if (s[0] == '/' && s[1] == '*') {
            char *e = strstr(s + 2, "*/");
            s = e ? e + 2 : s + strlen(s);
            *w++ = ' ';
        } else {
            if (*s == '"') in_str = 1;
            *w++ = *s++;
        }
    }
    *w = 0;
}

typedef struct loader {
    hx_config *c;
    const char *path, *dir;
    hx_err *err;
} loader;

static int field_err(loader *l, const char *field, const char *want)
{
    return hx_err_set(l->err, HX_ERR_FORMAT, "%s: '%s' must be %s", l->path,
                      field, want);
}

/* Replaces *dst with the string at obj.key (if present). */
static int get_str(loader *l, const cJSON *obj, const char *key,
                   const char *field, int is_path, char **dst)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v)) return HX_OK;
    if (!cJSON_IsString(v)) return field_err(l, field, "a string");
    char *s = is_path && *v->valuestring ? hx_path_expand(v->valuestring, l->dir)
                                         : hx_strdup(v->valuestring);
    if (!s) return hx_err_set(l->err, HX_ERR_NOMEM, "out of memory");
    free(*dst);
    *dst = s;
    return HX_OK;
}

static int get_paths(loader *l, const cJSON *root, const char *key,
                     char **dst, int *n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key), *e;
    if (!v) return HX_OK;
    if (!cJSON_IsArray(v)) return field_err(l, key, "an array of paths");
    if (cJSON_GetArraySize(v) > HX_MAX_ROOTS)
        return hx_err_set(l->err, HX_ERR_RANGE, "%s: '%s' has more than %d entries",
                          l->path, key, HX_MAX_ROOTS);
    for (int i = 0; i < *n; i++) free(dst[i]);
    *n = 0;
    cJSON_ArrayForEach(e, v)
    {
        if (!cJSON_IsString(e) || !*e->valuestring)
            return field_err(l, key, "an array of non-empty path strings");
        if (!(dst[*n] = hx_path_expand(e->valuestring, l->dir)))
            return hx_err_set(l->err, HX_ERR_NOMEM, "out of memory");
        (*n)++;
    }
    return HX_OK;
}

/* "HH:MM" -> minutes, -1 if malformed. */
static int parse_hhmm(const char *s)
{
    int h, m, n = 0;
    if (sscanf(s, "%2d:%2d%n", &h, &m, &n) != 2 || s[n] || h < 0 || h > 24 ||
        m < 0 || m > 59 || (h == 24 && m))
        return -1;
    return h * 60 + m;
}

static int get_hhmm(loader *l, const cJSON *wh, const char *key, int *dst)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(wh, key);
    char field[64];
    snprintf(field, sizeof field, "working_hours.%s", key);
    if (!v) return HX_OK;
    int m = cJSON_IsString(v) ? parse_hhmm(v->valuestring) : -1;
    if (m < 0) return field_err(l, field, "a time \"HH:MM\"");
    *dst = m;
    return HX_OK;
}

static int get_days(loader *l, const cJSON *wh)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(wh, "days"), *e;
    if (!v) return HX_OK;
    if (!cJSON_IsArray(v)) return field_err(l, "working_hours.days", "an array like [\"mon\", \"tue\"]");
    int mask = 0;
    cJSON_ArrayForEach(e, v)
    {
        int d = -1;
        for (int k = 0; cJSON_IsString(e) && k < 7; k++)
            if (!strncasecmp(e->valuestring, day_names[k], 3) && strlen(e->valuestring) >= 3)
                d = k;
        if (d < 0)
            return field_err(l, "working_hours.days",
                             "an array of day names (\"mon\" ... \"sun\")");
        mask |= 1 << d;
    }
    l->c->work_days = mask;
    return HX_OK;
}

static int get_hours(loader *l, const cJSON *root)
{
    const cJSON *wh = cJSON_GetObjectItemCaseSensitive(root, "working_hours");
    int rc;
    if (!wh) return HX_OK;
    if (!cJSON_IsObject(wh)) return field_err(l, "working_hours", "an object");
    if ((rc = get_hhmm(l, wh, "start", &l->c->work_start_min)) ||
        (rc = get_hhmm(l, wh, "end", &l->c->work_end_min)) || (rc = get_days(l, wh)))
        return rc;
    if (l->c->work_end_min <= l->c->work_start_min)
        return hx_err_set(l->err, HX_ERR_FORMAT,
                          "%s: 'working_hours.end' must be after 'working_hours.start'",
                          l->path);
    return HX_OK;
}

static int get_user(loader *l, const cJSON *root)
{
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "user");
    int rc;
    if (!u) return HX_OK;
    if (!cJSON_IsObject(u)) return field_err(l, "user", "an object {\"name\", \"email\"}");
    if ((rc = get_str(l, u, "name", "user.name", 0, &l->c->user_name)) ||
        (rc = get_str(l, u, "email", "user.email", 0, &l->c->user_email)))
        return rc;
    if (*l->c->user_email && !strchr(l->c->user_email, '@'))
        return field_err(l, "user.email", "an address like \"alice@example.org\"");
    return HX_OK;
}

static int get_tz(loader *l, const cJSON *root)
{
    int rc = get_str(l, root, "timezone", "timezone", 0, &l->c->timezone);
    if (rc) return rc;
    if (!hx_tz_find(l->c->timezone))
        return hx_err_set(l->err, HX_ERR_FORMAT,
                          "%s: 'timezone': unknown time zone '%s' (an IANA name "
                          "like \"Europe/Paris\")",
                          l->path, l->c->timezone);
    return HX_OK;
}

static int load_fields(loader *l, const cJSON *root)
{
    hx_config *c = l->c;
    int rc;
    if ((rc = get_user(l, root)) || (rc = get_tz(l, root)) || (rc = get_hours(l, root)) ||
        (rc = get_paths(l, root, "calendars", c->calendars, &c->n_calendars)) ||
        (rc = get_str(l, root, "calendar_default", "calendar_default", 1,
                      &c->calendar_default)) ||
        (rc = get_str(l, root, "maildir", "maildir", 1, &c->maildir)) ||
        (rc = get_str(l, root, "outbox", "outbox", 1, &c->outbox)) ||
        (rc = get_paths(l, root, "file_roots", c->file_roots, &c->n_file_roots)) ||
        (rc = get_str(l, root, "model", "model", 1, &c->model)) ||
        (rc = get_str(l, cJSON_GetObjectItemCaseSensitive(root, "governor"), "small_model",
                      "governor.small_model", 1, &c->small_model)))
        return rc;
    /* With calendars but no explicit default, new events go to the first. */
    if (!cJSON_GetObjectItemCaseSensitive(root, "calendar_default") && c->n_calendars) {
        free(c->calendar_default);
        c->calendar_default = hx_strdup(c->calendars[0]);
    }
    return HX_OK;
}

/* Why text (comments stripped) is no configuration: empty, a JSON value
 * that is not an object, or a syntax error (its line). */
static int not_an_object(const char *path, const char *text, const cJSON *root,
                         const char *end, hx_err *err)
{
    if (!text[strspn(text, " \t\r\n")])
        return hx_err_set(err, HX_ERR_FORMAT, "%s is empty: it must hold a JSON object "
                          "{...}; remove it and run 'hearth init' to write one", path);
    if (root)
        return hx_err_set(err, HX_ERR_FORMAT, "%s holds a JSON %s, not the object {...} "
                          "of a configuration", path,
                          cJSON_IsArray(root) ? "array" : cJSON_IsString(root) ? "string"
                          : cJSON_IsNumber(root) ? "number" : "literal");
    int line = 1;
    for (const char *s = text; end && s < end; s++) line += *s == '\n';
    return hx_err_set(err, HX_ERR_FORMAT, "%s: not valid JSON (syntax error near line %d)",
                      path, line);
}

static int parse_text(hx_config *c, const char *path, char *text, hx_err *err)
{
    strip_comments(text);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!cJSON_IsObject(root)) {
        int rc = not_an_object(path, text, root, end, err);
        cJSON_Delete(root);
        return rc;
    }
    c->raw = root;
    char *dir = hx_strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) *slash = 0;
    loader l = {c, path, slash ? dir : ".", err};
    int rc = load_fields(&l, root);
    free(dir);
    return rc;
}

static int std_path(char *buf, size_t n)
{
    char dir[4000];
    if (hx_path_config(dir, sizeof dir) < 0) return -1;
    return snprintf(buf, n, "%s/config.json", dir) >= (int)n ? -1 : 0;
}

int hx_config_load(const char *path, hx_config **out, hx_err *err)
{
    char std[4096];
    *out = NULL;
    if (!path) {
        if (std_path(std, sizeof std)) return hx_err_set(err, HX_ERR_RANGE, "config path too long");
        path = std;
    }
    hx_config *c = hx_config_default();
    if (c && !(c->path = hx_strdup(path))) hx_config_free(c), c = NULL;
    if (!c) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    char *text = NULL;
    size_t len;
    struct stat st;
    if (stat(path, &st) && errno == ENOENT) {
        c->missing = 1;
        *out = c;
        return HX_OK;
    }
    int rc = hx_read_file(path, CONFIG_MAX, &text, &len, err);
    if (rc == HX_OK) rc = parse_text(c, path, text, err);
    free(text);
    if (rc) {
        hx_config_free(c);
        return rc;
    }
    *out = c;
    return HX_OK;
}

static void put_json_str(hx_buf *b, const char *s)
{
    cJSON *item = cJSON_CreateString(s ? s : "");
    char *q = item ? cJSON_PrintUnformatted(item) : NULL;
    hx_buf_puts(b, q ? q : "\"\"");
    cJSON_free(q);
    cJSON_Delete(item);
}

static void put_paths(hx_buf *b, char *const *paths, int n)
{
    hx_buf_puts(b, "[");
    for (int i = 0; i < n; i++) {
        if (i) hx_buf_puts(b, ", ");
        put_json_str(b, paths[i]);
    }
    hx_buf_puts(b, "]");
}

static void put_config_text(hx_buf *b, const hx_config *c)
{
    hx_buf_puts(b, "// Hearth configuration. Comments like this one are allowed.\n"
                   "// Relative paths are relative to this file; \"~/\" is your home.\n"
                   "{\n  // Who you are: invitations and mail are sent in this name.\n"
                   "  \"user\": {\"name\": ");
    put_json_str(b, c->user_name);
    hx_buf_puts(b, ", \"email\": ");
    put_json_str(b, c->user_email);
    hx_buf_puts(b, "},\n\n  // Your time zone (IANA name); times you type are read in it.\n"
                   "  \"timezone\": ");
    put_json_str(b, c->timezone);
    hx_buf_puts(b, ",\n\n  // When meetings may be proposed (calendar.find_slots).\n"
                   "  \"working_hours\": {\"start\": \"09:00\", \"end\": \"17:00\",\n"
                   "                    \"days\": [\"mon\", \"tue\", \"wed\", \"thu\", \"fri\"]},\n\n"
                   "  // Calendars: vdir directories (one .ics per event) or .ics files.\n"
                   "  \"calendars\": ");
    put_paths(b, c->calendars, c->n_calendars);
    hx_buf_puts(b, ",\n  // Where new events are written (a vdir directory).\n"
                   "  \"calendar_default\": ");
    put_json_str(b, c->calendar_default);
    hx_buf_puts(b, ",\n\n  // Your mail (a Maildir) and the outbox for mail to send when online.\n"
                   "  \"maildir\": ");
    put_json_str(b, c->maildir);
    hx_buf_puts(b, ",\n  \"outbox\": ");
    put_json_str(b, c->outbox);
    hx_buf_puts(b, ",\n\n  // The only directories the files tools may read.\n  \"file_roots\": ");
    put_paths(b, c->file_roots, c->n_file_roots);
    hx_buf_puts(b, ",\n\n  // The model to load (a GGUF file); null for the default.\n"
                   "  \"model\": ");
    if (c->model) put_json_str(b, c->model);
    else hx_buf_puts(b, "null");
    hx_buf_puts(b, "\n}\n");
}

int hx_config_write(const hx_config *c, const char *path, hx_err *err)
{
    struct stat st;
    if (!stat(path, &st))
        return hx_err_set(err, HX_ERR_STATE, "%s already exists; not overwriting it", path);
    hx_buf b;
    hx_buf_init(&b);
    put_config_text(&b, c);
    char *dir = hx_strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    int rc = b.oom || !dir ? hx_err_set(err, HX_ERR_NOMEM, "out of memory") : HX_OK;
    if (rc == HX_OK && slash && slash != dir) {
        *slash = 0;
        rc = hx_mkdirs(dir, err);
    }
    if (rc == HX_OK) rc = hx_write_file_atomic(path, b.data, b.len, err);
    free(dir);
    hx_buf_free(&b);
    return rc;
}

int hx_config_write_default(const char *path, hx_err *err)
{
    char std[4096];
    if (!path) {
        if (std_path(std, sizeof std)) return hx_err_set(err, HX_ERR_RANGE, "config path too long");
        path = std;
    }
    hx_config *c = hx_config_default();
    if (!c) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = hx_config_write(c, path, err);
    hx_config_free(c);
    return rc;
}

/* ---- checking what the configuration names ---- */
static int is_dir(const char *p)
{
    struct stat st;
    return p && !stat(p, &st) && S_ISDIR(st.st_mode);
}

static int is_file(const char *p)
{
    struct stat st;
    return p && !stat(p, &st) && S_ISREG(st.st_mode);
}

static int maildir_ok(const char *p)
{
    char sub[4200];
    int ok = is_dir(p);
    for (int i = 0; ok && i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/%s", p, i ? "new" : "cur");
        ok = is_dir(sub);
    }
    return ok;
}

/* One problem line: WHAT P does not exist, and how to fix that. */
static int problem(hx_buf *out, const hx_config *c, const char *what, const char *p,
                   const char *key)
{
    hx_buf_printf(out, "%s %s does not exist: create it (mkdir -p %s) or change \"%s\" in %s\n",
                  what, p, p, key, c->path);
    return 1;
}

int hx_config_check(const hx_config *c, hx_buf *out)
{
    if (c->missing) {
        hx_buf_printf(out, "no configuration at %s: run 'hearth init' to write one\n",
                      c->path ? c->path : "config.json");
        return 1;
    }
    int n = 0;
    for (int i = 0; i < c->n_calendars; i++)
        if (!is_dir(c->calendars[i]) && !is_file(c->calendars[i]))
            n += problem(out, c, "calendar", c->calendars[i], "calendars");
    if (!is_dir(c->calendar_default))
        n += problem(out, c, "calendar folder", c->calendar_default, "calendar_default");
    if (c->maildir && *c->maildir && !maildir_ok(c->maildir)) {
        hx_buf_printf(out, "Maildir %s (with cur/ and new/) does not exist: create it "
                      "(mkdir -p %s/cur %s/new %s/tmp) or change \"maildir\" in %s\n",
                      c->maildir, c->maildir, c->maildir, c->maildir, c->path);
        n++;
    }
    for (int i = 0; i < c->n_file_roots; i++)
        if (!is_dir(c->file_roots[i]))
            n += problem(out, c, "file root", c->file_roots[i], "file_roots");
    return n;
}
