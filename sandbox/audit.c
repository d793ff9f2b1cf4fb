/* audit.c: the audit log of tool calls, one JSON object per line, each
 * record written with one append and flushed to disk. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

struct hx_audit {
    int fd;
};

int hx_audit_open(const char *path, hx_audit **out, hx_err *err)
{
    char def[PATH_MAX];
    *out = NULL;
    if (!path) {
        char dir[PATH_MAX - 16];
        if (hx_path_data(dir, sizeof dir) < 0)
            return hx_err_set(err, HX_ERR_RANGE, "data path too long");
        int rc = hx_mkdirs(dir, err);
        if (rc) return rc;
        snprintf(def, sizeof def, "%s/audit.jsonl", dir);
        path = def;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return hx_err_set(err, HX_ERR_IO, "%s: %s", path, strerror(errno));
    hx_audit *a = hx_malloc(sizeof *a);
    if (!a) {
        close(fd);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    a->fd = fd;
    *out = a;
    return HX_OK;
}

void hx_audit_close(hx_audit *a)
{
    if (!a) return;
    close(a->fd);
    free(a);
}

/* Adds k: v when there is a v; 0 when out of memory. */
static int add_str(cJSON *o, const char *k, const char *v)
{
    return !v || cJSON_AddStringToObject(o, k, v);
}

int hx_audit_write(hx_audit *a, const hx_audit_rec *r, hx_err *err)
{
    char when[40], sb[256];
    int off;
    int64_t now = hx_now(&off);
    time_t t = (time_t)now;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    /* a record is written whole or not at all (an error) */
    cJSON *o = cJSON_CreateObject();
    int ok = o && add_str(o, "time", when) && add_str(o, "tool", r->tool) &&
             add_str(o, "effect", r->effect);
    cJSON *args = ok && r->args_json ? cJSON_Parse(r->args_json) : NULL;
    if (args && cJSON_AddItemToObject(o, "args", args)) args = NULL;
    else ok = ok && !args && add_str(o, "args", r->args_json);
    ok = ok && add_str(o, "decision", r->decision) && add_str(o, "by", r->by) &&
         add_str(o, "status", r->status) && add_str(o, "detail", r->detail) &&
         (!r->sandbox || add_str(o, "sandbox", hx_sandbox_describe(r->sandbox, sb, sizeof sb)));
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(args);
    cJSON_Delete(o);
    if (!line) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    size_t n = strlen(line);
    line[n] = '\n'; /* replaces the NUL; written with its length */
    ssize_t w = write(a->fd, line, n + 1);
    int e = errno;
    free(line);
    if (w != (ssize_t)(n + 1)) return hx_err_set(err, HX_ERR_IO, "audit log: %s", strerror(e));
    if (fdatasync(a->fd)) return hx_err_set(err, HX_ERR_IO, "audit log: %s", strerror(errno));
    return HX_OK;
}
