/* fs.c: whole-file reads, mkdir -p and the XDG paths (writes: out.c). */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hx_read_file(const char *path, size_t max_size, char **out, size_t *len,
                 hx_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hx_err_set(err, errno == ENOENT ? HX_ERR_NOTFOUND : HX_ERR_IO,
                          "%s: %s", path, strerror(errno));
    int rc = hx_read_fd(fd, path, max_size, out, len, err);
    close(fd);
    return rc;
}

int hx_read_fd(int fd, const char *name, size_t max_size, char **out,
               size_t *len, hx_err *err)
{
    *out = NULL;
    hx_buf b;
    hx_buf_init(&b);
    for (;;) {
        if (hx_buf_reserve(&b, 65536)) {
            hx_buf_free(&b);
            return hx_err_set(err, HX_ERR_NOMEM, "%s: out of memory", name);
        }
        ssize_t n = read(fd, b.data + b.len, 65536);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            hx_buf_free(&b);
            return hx_err_set(err, HX_ERR_IO, "%s: %s", name, strerror(e));
        }
        if (n == 0) break;
        b.len += (size_t)n;
        b.data[b.len] = '\0';
        if (max_size && b.len > max_size) {
            hx_buf_free(&b);
            return hx_err_set(err, HX_ERR_RANGE,
                              "%s: larger than the limit of %zu bytes", name,
                              max_size);
        }
    }
    *out = hx_buf_steal(&b, len);
    return HX_OK;
}

int hx_mkdirs(const char *path, hx_err *err)
{
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s", path) >= sizeof p)
        return hx_err_set(err, HX_ERR_RANGE, "%s: path too long", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0700) && errno != EEXIST)
            return hx_err_set(err, HX_ERR_IO, "%s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0700) && errno != EEXIST)
        return hx_err_set(err, HX_ERR_IO, "%s: %s", p, strerror(errno));
    return HX_OK;
}

/* HEARTH_HOME/sub, or $XDG_VAR/hearth, or $HOME/fallback/hearth. */
static int xdg_path(char *buf, size_t n, const char *sub, const char *xdg_var,
                    const char *fallback)
{
    const char *home = getenv("HEARTH_HOME");
    const char *xdg = getenv(xdg_var);
    int len;
    if (home && *home)
        len = snprintf(buf, n, "%s/%s", home, sub);
    else if (xdg && *xdg)
        len = snprintf(buf, n, "%s/hearth", xdg);
    else
        len = snprintf(buf, n, "%s/%s/hearth",
                       getenv("HOME") ? getenv("HOME") : "/tmp", fallback);
    return len < 0 || (size_t)len >= n ? -1 : len;
}

int hx_path_config(char *buf, size_t n)
{
    return xdg_path(buf, n, "config", "XDG_CONFIG_HOME", ".config");
}

int hx_path_data(char *buf, size_t n)
{
    return xdg_path(buf, n, "data", "XDG_DATA_HOME", ".local/share");
}

int hx_path_cache(char *buf, size_t n)
{
    return xdg_path(buf, n, "cache", "XDG_CACHE_HOME", ".cache");
}

int hx_path_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/') return path[0] == '/';
    return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

const char *hx_shared_data_dir(void)
{
    const char *d = getenv("HEARTH_SHARED_DATA");
    return d && *d ? d : "../shared/data";
}

char *hx_path_expand(const char *p, const char *base_dir)
{
    const char *home = getenv("HOME");
    hx_buf b;
    hx_buf_init(&b);
    if (p[0] == '~' && (p[1] == '/' || !p[1]) && home) hx_buf_printf(&b, "%s%s", home, p + 1);
    else if (p[0] == '/' || !base_dir) hx_buf_puts(&b, p);
    else hx_buf_printf(&b, "%s/%s", base_dir, p);
    return hx_buf_steal(&b, NULL);
}
