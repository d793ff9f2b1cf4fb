/* root.c: the user's folders (file roots, calendars, Maildir, outbox) held
 * as directory descriptors, and every path beneath one resolved without
 * following a link or leaving it (openat2 RESOLVE_BENEATH|NO_SYMLINKS). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tools/tools_int.h"

#define RESOLVE_RETRIES 8 /* openat2 says EAGAIN when a rename races it */

struct hx_roots {
    hx_root files[HX_MAX_ROOTS];
    hx_root calendars[HX_MAX_ROOTS];
    hx_root cal_default, maildir, outbox;
};

static void root_init(hx_root *r)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

void hx_root_close(hx_root *r)
{
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    free(r->path);
    free(r->real);
    free(r->file);
    root_init(r);
}

/* The configured path less trailing slashes: "/a/b/" would make the
 * kernel follow a link at b whatever O_NOFOLLOW says. */
static char *trimmed(const char *path)
{
    char *p = hx_strdup(path);
    size_t n = p ? strlen(p) : 0;
    while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
    return p;
}

/* Why the folder at path cannot be a root, as one message naming the
 * setting to fix. */
static int open_error(const char *path, const char *field, int e, hx_err *err)
{
    struct stat st;
    char target[512];
    ssize_t n;
    if (!lstat(path, &st) && S_ISLNK(st.st_mode)) {
        n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        return hx_err_set(err, HX_ERR_DENIED,
                          "'%s' (\"%s\" in config.json) is a symbolic link to '%s'; Hearth "
                          "opens only a real folder there: put the folder's own path in "
                          "config.json",
                          path, field, target);
    }
    if (e == ENOENT)
        return hx_err_set(err, HX_ERR_NOTFOUND,
                          "'%s' (\"%s\" in config.json) does not exist: create it or fix "
                          "\"%s\" in config.json",
                          path, field, field);
    return hx_err_set(err, e == EACCES ? HX_ERR_DENIED : HX_ERR_IO,
                      "'%s' (\"%s\" in config.json) cannot be opened as a folder: %s", path,
                      field, strerror(e));
}

/* Where fd points now, for messages and to recognize absolute paths the
 * user gives through another name of the folder. */
static char *fd_path(int fd)
{
    char link[64], buf[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    if (n <= 0) return NULL;
    buf[n] = '\0';
    return hx_strdup(buf);
}

/* A calendar given as one .ics file: its folder is the root, the file is
 * named beneath it, and it must be a regular file there (no link). */
static int open_as_file(hx_root *r, const char *field, hx_err *err)
{
    char *slash = strrchr(r->path, '/');
    char *dir = slash == r->path ? hx_strdup("/") : slash ? hx_strndup(r->path, (size_t)(slash - r->path)) : hx_strdup(".");
    if (!dir) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    r->fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    int rc = r->fd < 0 ? open_error(dir, field, e, err) : HX_OK;
    free(dir);
    if (rc) return rc;
    struct stat st;
    r->file = hx_strdup(slash ? slash + 1 : r->path);
    if (!r->file) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (fstatat(r->fd, r->file, &st, AT_SYMLINK_NOFOLLOW))
        return open_error(r->path, field, errno, err);
    if (!S_ISREG(st.st_mode))
        return S_ISLNK(st.st_mode) ? open_error(r->path, field, ELOOP, err)
                                   : hx_err_set(err, HX_ERR_INVALID,
                                                "'%s' (\"%s\" in config.json) is neither a "
                                                "folder nor a regular file",
                                                r->path, field);
    return HX_OK;
}

int hx_root_open(hx_root *r, const char *path, const char *field, unsigned flags,
                 hx_err *err)
{
    root_init(r);
    if (!path || !*path)
        return hx_err_set(err, HX_ERR_NOTFOUND, "no \"%s\" configured in config.json", field);
    if (!(r->path = trimmed(path))) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = HX_OK;
    if (flags & HX_ROOT_CREATE) {
        struct stat st;
        if (lstat(r->path, &st) && errno == ENOENT) rc = hx_mkdirs(r->path, err);
    }
    if (!rc) {
        r->fd = open(r->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r->fd < 0 && errno == ENOTDIR && (flags & HX_ROOT_FILE_OK))
            rc = open_as_file(r, field, err);
        else if (r->fd < 0)
            rc = open_error(r->path, field, errno, err);
    }
    if (!rc && !(r->real = fd_path(r->fd))) r->real = hx_strdup(r->path);
    if (!rc && !r->real) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (rc) hx_root_close(r);
    return rc;
}

/* ---- the registry's roots ---- */

void hx_roots_free(hx_roots *rs)
{
    if (!rs) return;
    for (int i = 0; i < HX_MAX_ROOTS; i++) {
        hx_root_close(&rs->files[i]);
        hx_root_close(&rs->calendars[i]);
    }
    hx_root_close(&rs->cal_default);
    hx_root_close(&rs->maildir);
    hx_root_close(&rs->outbox);
    free(rs);
}

static hx_roots *roots_new(void)
{
    hx_roots *rs = hx_malloc(sizeof *rs);
    if (!rs) return NULL;
    for (int i = 0; i < HX_MAX_ROOTS; i++) {
        root_init(&rs->files[i]);
        root_init(&rs->calendars[i]);
    }
    root_init(&rs->cal_default);
    root_init(&rs->maildir);
    root_init(&rs->outbox);
    return rs;
}

/* The slot, configured path, setting name and open flags of a root. */
static hx_root *root_slot(hx_roots *rs, const hx_config *cfg, hx_root_kind kind, int i,
                          const char **path, const char **field, unsigned *flags)
{
    *flags = 0;
    switch (kind) {
    case HX_ROOT_FILES:
        if (i < 0 || i >= cfg->n_file_roots) return NULL;
        *path = cfg->file_roots[i], *field = "file_roots";
        return &rs->files[i];
    case HX_ROOT_CALENDAR:
        if (i < 0 || i >= cfg->n_calendars) return NULL;
        *path = cfg->calendars[i], *field = "calendars", *flags = HX_ROOT_FILE_OK;
        return &rs->calendars[i];
    case HX_ROOT_CAL_DEFAULT:
        *path = cfg->calendar_default, *field = "calendar_default", *flags = HX_ROOT_CREATE;
        return &rs->cal_default;
    case HX_ROOT_MAILDIR:
        *path = cfg->maildir, *field = "maildir";
        return &rs->maildir;
    case HX_ROOT_OUTBOX:
        *path = cfg->outbox, *field = "outbox", *flags = HX_ROOT_CREATE;
        return &rs->outbox;
    }
    return NULL;
}

void hx_roots_open_all(hx_roots **rsp, const hx_config *cfg)
{
    static const hx_root_kind single[] = {HX_ROOT_CAL_DEFAULT, HX_ROOT_MAILDIR, HX_ROOT_OUTBOX};
    hx_err e;
    for (int i = 0; cfg && i < cfg->n_file_roots; i++)
        hx_roots_get(rsp, cfg, HX_ROOT_FILES, i, HX_ROOT_NO_CREATE, &e);
    for (int i = 0; cfg && i < cfg->n_calendars; i++)
        hx_roots_get(rsp, cfg, HX_ROOT_CALENDAR, i, HX_ROOT_NO_CREATE, &e);
    for (size_t k = 0; cfg && k < sizeof single / sizeof single[0]; k++)
        hx_roots_get(rsp, cfg, single[k], 0, HX_ROOT_NO_CREATE, &e);
}

const hx_root *hx_roots_get(hx_roots **rsp, const hx_config *cfg, hx_root_kind kind, int i,
                            unsigned flags, hx_err *err)
{
    const char *path = NULL, *field = "";
    unsigned base;
    if (!cfg) {
        hx_err_set(err, HX_ERR_NOTFOUND, "no configuration");
        return NULL;
    }
    if (!*rsp && !(*rsp = roots_new())) {
        hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        return NULL;
    }
    hx_root *r = root_slot(*rsp, cfg, kind, i, &path, &field, &base);
    if (!r) {
        hx_err_set(err, HX_ERR_NOTFOUND, "no such folder in config.json");
        return NULL;
    }
    if (r->fd >= 0) return r;
    /* a failed open is not kept: a folder made later is found then */
    flags |= base;
    if (flags & HX_ROOT_NO_CREATE) flags &= ~(unsigned)(HX_ROOT_CREATE | HX_ROOT_NO_CREATE);
    return hx_root_open(r, path, field, flags, err) ? NULL : r;
}

/* ---- paths beneath a root ---- */

static int is_link_at(int dfd, const char *name)
{
    struct stat st;
    return !fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode);
}

/* The next component of *p (slashes skipped) into comp; 0 at the end. */
static int next_component(const char **p, char *comp, size_t n)
{
    while (**p == '/') (*p)++;
    size_t l = strcspn(*p, "/");
    if (!l) return 0;
    snprintf(comp, n, "%.*s", (int)l, *p);
    *p += l;
    return 1;
}

/* What openat2 does, for kernels (and emulators) without it: one
 * component at a time, each opened O_NOFOLLOW beneath the last; ".." is
 * refused outright (EXDEV), a link anywhere is ELOOP. -1 with errno. */
static int walk_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
    char comp[256];
    const char *p = rel;
    int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    while (cur >= 0 && next_component(&p, comp, sizeof comp)) {
        while (*p == '/') p++;
        int last = !*p, e, next;
        if (!strcmp(comp, "..") || strlen(comp) >= sizeof comp - 1) {
            close(cur);
            errno = strcmp(comp, "..") ? ENAMETOOLONG : EXDEV;
            return -1;
        }
        next = last ? openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode)
                    : openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        e = next < 0 && (errno == ENOTDIR || errno == ELOOP) && is_link_at(cur, comp) ? ELOOP
                                                                                       : errno;
        close(cur);
        if (next < 0) errno = e;
        cur = next;
        if (last) return cur;
    }
    if (cur < 0) return -1;
    /* rel was "" or only slashes: the root itself, opened as asked */
    int fd = openat(cur, ".", flags | O_CLOEXEC, mode);
    close(cur);
    return fd;
}

/* openat2 beneath dirfd with no link, or its emulation where the kernel
 * has none (ENOSYS: before Linux 5.6, or under an emulator). */
static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
    long fd = syscall(SYS_openat2, dirfd, path, how, sizeof *how);
    if (fd < 0 && errno == ENOSYS)
        fd = walk_beneath(dirfd, path, (int)(how->flags & ~(unsigned long long)O_NOFOLLOW),
                          (mode_t)how->mode);
    return fd;
}

/* Why rel could not be opened beneath r. */
static int beneath_error(const hx_root *r, const char *rel, int e, hx_err *err)
{
    switch (e) {
    case ELOOP:
        return hx_err_set(err, HX_ERR_DENIED,
                          "'%s/%s' goes through a symbolic link; Hearth does not follow "
                          "links in your folders",
                          r->path, rel);
    case EXDEV:
        return hx_err_set(err, HX_ERR_DENIED, "'%s' is outside the folders Hearth may use", rel);
    case ENOENT:
        return hx_err_set(err, HX_ERR_NOTFOUND, "'%s/%s' does not exist", r->path, rel);
    case ENOTDIR:
        return hx_err_set(err, HX_ERR_INVALID,
                          "'%s/%s': a part of it is not a folder (links are not followed)",
                          r->path, rel);
    default:
        return hx_err_set(err, e == EACCES ? HX_ERR_DENIED : HX_ERR_IO, "'%s/%s': %s",
                          r->path, rel, strerror(e));
    }
}

int hx_root_openat(const hx_root *r, const char *rel, int flags, hx_err *err)
{
    struct open_how how = {
        .flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    if (flags & O_CREAT) how.mode = 0600;
    if (!rel || !*rel) rel = ".";
    long fd = -1;
    for (int k = 0; k < RESOLVE_RETRIES; k++) {
        fd = sys_openat2(r->fd, rel, &how);
        if (fd >= 0 || errno != EAGAIN) break;
    }
    if (fd < 0 && errno == ENOTDIR && (flags & O_DIRECTORY)) {
        /* a link opened as a folder says ENOTDIR: tell the link apart */
        struct open_how path_how = how;
        path_how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
        long pfd = sys_openat2(r->fd, rel, &path_how);
        struct stat st;
        int is_link = pfd >= 0 && !fstat((int)pfd, &st) && S_ISLNK(st.st_mode);
        if (pfd >= 0) close((int)pfd);
        errno = is_link ? ELOOP : ENOTDIR;
    }
    if (fd < 0) return -beneath_error(r, rel, errno, err);
    return (int)fd;
}

/* "a FIFO", "a folder", ...: what a non-regular file is, for messages. */
static const char *kind_name(mode_t m)
{
    return S_ISDIR(m)    ? "a folder"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

int hx_fd_regular(int fd, const char *shown, struct stat *st, hx_err *err)
{
    struct stat s;
    if (!st) st = &s;
    if (fstat(fd, st)) return hx_err_set(err, HX_ERR_IO, "%s: %s", shown, strerror(errno));
    if (S_ISREG(st->st_mode)) return HX_OK;
    return hx_err_set(err, HX_ERR_INVALID, "'%s' is %s; Hearth reads only regular files",
                      shown, kind_name(st->st_mode));
}

int hx_root_open_file(const hx_root *r, const char *rel, struct stat *st, hx_err *err)
{
    /* O_NONBLOCK: opening a FIFO or a device must not wait for a writer */
    int fd = hx_root_openat(r, rel, O_RDONLY | O_NONBLOCK, err);
    if (fd < 0) return fd;
    char shown[4200];
    hx_root_join(r, rel, shown, sizeof shown);
    int rc = hx_fd_regular(fd, shown, st, err);
    if (rc) {
        close(fd);
        return -rc;
    }
    return fd;
}

int hx_root_read(const hx_root *r, const char *rel, size_t max, char **out, size_t *len,
                 struct stat *st, hx_err *err)
{
    *out = NULL;
    int fd = hx_root_open_file(r, rel, st, err);
    if (fd < 0) return -fd;
    char shown[4200];
    hx_root_join(r, rel, shown, sizeof shown);
    int rc = hx_read_fd(fd, shown, max, out, len, err);
    close(fd);
    return rc;
}

int hx_root_stat(const hx_root *r, const char *rel, struct stat *st, hx_err *err)
{
    int fd = hx_root_openat(r, rel, O_PATH, err);
    if (fd < 0) return -fd;
    int rc = fstat(fd, st) ? hx_err_set(err, HX_ERR_IO, "'%s': %s", rel, strerror(errno)) : HX_OK;
    close(fd);
    return rc;
}

/* rel's folders made one at a time beneath r, each opened without
 * following a link before the next is made in it; "." and ".." refused. */
static int make_dirs(const hx_root *r, const char *rel, hx_err *err)
{
    char comp[256];
    int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return -hx_err_set(err, HX_ERR_IO, "%s: %s", r->path, strerror(errno));
    for (const char *p = rel; next_component(&p, comp, sizeof comp);) {
        int rc = HX_OK, next = -1;
        if (!strcmp(comp, ".") || !strcmp(comp, "..") || strlen(comp) >= sizeof comp - 1)
            rc = hx_err_set(err, HX_ERR_INVALID, "'%s': not a plain folder name", rel);
        else if (mkdirat(fd, comp, 0700) && errno != EEXIST)
            rc = hx_err_set(err, HX_ERR_IO, "'%s/%s': %s", r->path, rel, strerror(errno));
        else if ((next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
            rc = beneath_error(r, rel, is_link_at(fd, comp) ? ELOOP : errno, err);
        close(fd);
        if (rc) return -rc;
        fd = next;
    }
    return fd;
}

int hx_root_dir(const hx_root *r, const char *rel, int create, hx_err *err)
{
    if (create) return make_dirs(r, rel, err);
    return hx_root_openat(r, rel, O_RDONLY | O_DIRECTORY, err);
}

int hx_root_write_atomic(const hx_root *r, const char *rel, const char *data, size_t len,
                         hx_err *err)
{
    const char *slash = strrchr(rel, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - rel) : 0, rel);
    int dfd = hx_root_dir(r, dir, 0, err);
    if (dfd < 0) return -dfd;
    int rc = hx_write_file_atomic_at(dfd, slash ? slash + 1 : rel, data, len, err);
    close(dfd);
    return rc;
}

void hx_root_join(const hx_root *r, const char *rel, char *buf, size_t n)
{
    /* a root given as one file: the folder is its path less the name */
    int dir_len = (int)strlen(r->path) - (r->file ? (int)strlen(r->file) + 1 : 0);
    if (dir_len < 0) dir_len = 0;
    if (!rel || !*rel || !strcmp(rel, ".")) snprintf(buf, n, "%.*s", dir_len, r->path);
    else if (dir_len == 1 && r->path[0] == '/') snprintf(buf, n, "/%s", rel);
    else snprintf(buf, n, "%.*s%s%s", dir_len, r->path, dir_len ? "/" : "", rel);
}

const char *hx_root_under(const hx_root *r, const char *abs)
{
    const char *names[2] = {r->path, r->real};
    for (int k = 0; k < 2; k++) {
        size_t n = names[k] ? strlen(names[k]) : 0;
        if (!n || strncmp(abs, names[k], n)) continue;
        if (!strcmp(names[k], "/")) return abs + 1;
        if (abs[n] == '/') return abs + n + 1;
        if (!abs[n]) return abs + n;
    }
    return NULL;
}
