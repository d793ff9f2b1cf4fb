/* mounts.c: the file-system view of a tool: its listed paths reached
 * without following symbolic links, checked in the parent, and bound in
 * the child onto a fresh tmpfs root in a new mount namespace, so that the
 * tool sees exactly those paths and the system's loader and libraries. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox_int.h"

const char *const hx_sb_system_paths[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
    "/etc/localtime", "/etc/alternatives", "/dev/null", "/dev/zero",
    "/dev/full", "/dev/random", "/dev/urandom",
};
const int hx_sb_n_system_paths = sizeof hx_sb_system_paths / sizeof *hx_sb_system_paths;

/* The mount point of the new root in the child's namespace (a tmpfs is
 * mounted over it there; the host's folder is untouched). */
#define NEW_ROOT "/tmp"

/* ---- opening without links (async-signal-safe) ---- */

int hx_sb_open_nofollow(const char *path, size_t *bad)
{
    size_t i = 0;
    if (bad) *bad = 0;
    if (path[0] != '/') return errno = EINVAL, -1;
    int dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    while (dfd >= 0) {
        while (path[i] == '/') i++;
        if (!path[i]) return dfd;
        size_t n = 0;
        char comp[NAME_MAX + 1];
        while (path[i + n] && path[i + n] != '/' && n < NAME_MAX) comp[n] = path[i + n], n++;
        comp[n] = '\0';
        i += n;
        int e = path[i] && path[i] != '/' ? ENAMETOOLONG
              : !strcmp(comp, ".") || !strcmp(comp, "..") ? EINVAL : 0;
        int fd = e ? -1 : openat(dfd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) || S_ISLNK(st.st_mode))) {
            e = S_ISLNK(st.st_mode) ? ELOOP : errno;
            close(fd);
            fd = -1;
        }
        if (fd < 0 && !e) e = errno;
        close(dfd);
        if (fd < 0) {
            if (bad) *bad = i;
            return errno = e, -1;
        }
        dfd = fd;
    }
    return -1;
}

/* ---- the plan (parent) ---- */

/* A path Hearth never grants: the kernel's and the devices' trees. */
static int forbidden(const char *path)
{
    static const char *const trees[] = {"/dev", "/proc", "/sys"};
    for (size_t i = 0; i < sizeof trees / sizeof *trees; i++)
        if (hx_path_within(path, trees[i]) || hx_path_within(trees[i], path)) return 1;
    return 0;
}

static int explain_open(const char *field, const char *path, size_t bad, int e,
                        hx_err *err)
{
    if (e == ELOOP)
        return hx_err_set(err, HX_ERR_DENIED,
                          "%s %s: %.*s is a symbolic link; list the real path "
                          "(Hearth never follows a link in a granted path)",
                          field, path, (int)bad, path);
    if (e == EINVAL)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "%s %s: give an absolute path without \".\" or \"..\"", field, path);
    return hx_err_set(err, e == ENOENT ? HX_ERR_NOTFOUND : HX_ERR_IO, "%s %s: %s",
                      field, path, strerror(e));
}

/* Absolute, without "//", "." or "..", a trailing '/' or a control
 * character: the form the containment checks compare. */
static int canonical(const char *path)
{
    if (path[0] != '/') return 0;
    for (const char *s = path; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 0;
        if (*s != '/') continue;
        if (s[1] == '/' || (!s[1] && s != path)) return 0;
        const char *c = s + 1 + (s[1] == '.') + (s[1] == '.' && s[2] == '.');
        if (c > s + 1 && (*c == '/' || !*c)) return 0;
    }
    return 1;
}

/* Opens a listed path (no links), checks its kind, records it. */
static int plan_listed(sb_plan *plan, const char *path, unsigned flags,
                       const char *field, hx_err *err)
{
    if (!canonical(path))
        return hx_err_set(err, HX_ERR_FORMAT,
                          "%s %s: give an absolute path without \"//\", \".\", \"..\", a "
                          "trailing '/' or control characters", field, path);
    if (forbidden(path))
        return hx_err_set(err, HX_ERR_DENIED,
                          "%s %s: /dev, /proc and /sys (or a folder holding them) are "
                          "never granted to a tool", field, path);
    size_t bad;
    int fd = hx_sb_open_nofollow(path, &bad);
    if (fd < 0) return explain_open(field, path, bad, errno, err);
    struct stat st;
    int e = fstat(fd, &st) ? errno : 0;
    close(fd);
    if (e) return hx_err_set(err, HX_ERR_IO, "%s %s: %s", field, path, strerror(e));
    int want_file = flags & SB_M_EXEC;
    if (want_file ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        return hx_err_set(err, HX_ERR_DENIED, "%s %s: %s", field, path,
                          want_file ? "not a regular file"
                                    : "neither a folder nor a regular file (devices, "
                                      "sockets and pipes are never granted)");
    sb_mount *m = &plan->m[plan->n++];
    *m = (sb_mount){path, S_ISDIR(st.st_mode) ? SB_M_DIR : SB_M_FILE, flags,
                    st.st_dev, st.st_ino, -1};
    return HX_OK;
}

/* A system path as it is on the host: a link is recreated as a link. */
static void plan_system(sb_plan *plan, const char *path)
{
    struct stat st;
    if (lstat(path, &st)) return; /* not on this system */
    sb_mount *m = &plan->m[plan->n];
    *m = (sb_mount){path, S_ISDIR(st.st_mode) ? SB_M_DIR : SB_M_FILE, SB_M_SYSTEM,
                    st.st_dev, st.st_ino, -1};
    if (S_ISLNK(st.st_mode)) {
        size_t room = sizeof plan->links - plan->links_len;
        ssize_t n = readlink(path, plan->links + plan->links_len, room - 1);
        if (n <= 0 || (size_t)n >= room - 1) return;
        m->kind = SB_M_LINK;
        m->link = (int)plan->links_len;
        plan->links[plan->links_len + (size_t)n] = '\0';
        plan->links_len += (size_t)n + 1;
    }
    plan->n++;
}

/* A listed path inside a write path: the tool could replace it. */
static int nested_in_write(const hx_sandbox_params *p, const char *path, int self,
                           const char *field, hx_err *err)
{
    for (int i = 0; i < p->n_write; i++)
        if (i != self && hx_path_within(path, p->write_paths[i]))
            return hx_err_set(err, HX_ERR_DENIED,
                              "%s %s: inside the write path %s, where the tool could "
                              "replace it; list one or the other", field, path,
                              p->write_paths[i]);
    return HX_OK;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const sb_mount *)a)->path, ((const sb_mount *)b)->path);
}

int hx_sb_plan_build(const hx_sandbox_params *p, const char *exe, sb_plan *plan,
                     hx_err *err)
{
    memset(plan, 0, sizeof *plan);
    if (p->n_read > HX_SANDBOX_MAX_PATHS || p->n_write > HX_SANDBOX_MAX_PATHS)
        return hx_err_set(err, HX_ERR_RANGE, "at most %d read and %d write paths",
                          HX_SANDBOX_MAX_PATHS, HX_SANDBOX_MAX_PATHS);
    int rc = HX_OK;
    for (int i = 0; i < hx_sb_n_system_paths; i++) plan_system(plan, hx_sb_system_paths[i]);
    for (int i = 0; i < p->n_read && !rc; i++)
        if (!(rc = nested_in_write(p, p->read_paths[i], -1, "read path", err)))
            rc = plan_listed(plan, p->read_paths[i], 0, "read path", err);
    for (int i = 0; i < p->n_write && !rc; i++)
        if (!(rc = nested_in_write(p, p->write_paths[i], i, "write path", err)))
            rc = plan_listed(plan, p->write_paths[i], SB_M_RW, "write path", err);
    /* the command as given too: a link there would be the tool's to move */
    if (!rc && p->argv[0][0] == '/') rc = nested_in_write(p, p->argv[0], -1, "tool command", err);
    if (!rc && !(rc = nested_in_write(p, exe, -1, "tool command", err)))
        rc = plan_listed(plan, exe, SB_M_EXEC, "tool command", err);
    if (rc) return rc;
    qsort(plan->m, (size_t)plan->n, sizeof *plan->m, by_path);
    snprintf(plan->uid_map, sizeof plan->uid_map, "%u %u 1\n", (unsigned)geteuid(),
             (unsigned)geteuid());
    snprintf(plan->gid_map, sizeof plan->gid_map, "%u %u 1\n", (unsigned)getegid(),
             (unsigned)getegid());
    return HX_OK;
}

/* ---- in the child: async-signal-safe only ---- */

static int write_proc(const char *file, const char *text)
{
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : (errno = n < 0 ? e : EIO, -1);
}

int hx_sb_userns_map(const sb_plan *plan)
{
    if (write_proc("/proc/self/setgroups", "deny") ||
        write_proc("/proc/self/gid_map", plan->gid_map) ||
        write_proc("/proc/self/uid_map", plan->uid_map))
        return -1;
    return 0;
}

/* NEW_ROOT + path into buf (PATH_MAX + 8 bytes); -1 if too long. */
static int inside(const char *path, char *buf)
{
    size_t a = sizeof NEW_ROOT - 1, b = strlen(path);
    if (a + b >= PATH_MAX + 8) return errno = ENAMETOOLONG, -1;
    memcpy(buf, NEW_ROOT, a);
    memcpy(buf + a, path, b + 1);
    return 0;
}

/* mkdir -p of dst's parent folders inside the new root. */
static int make_parents(char *dst)
{
    for (char *s = dst + sizeof NEW_ROOT; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        int rc = mkdir(dst, 0755);
        *s = '/';
        if (rc && errno != EEXIST) return -1;
    }
    return 0;
}

static int make_point(const sb_plan *plan, const sb_mount *m, char *dst)
{
    if (make_parents(dst)) return -1;
    int rc;
    if (m->kind == SB_M_LINK) rc = symlink(plan->links + m->link, dst);
    else if (m->kind == SB_M_DIR) rc = mkdir(dst, 0755);
    else {
        int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        rc = fd < 0 ? -1 : close(fd);
    }
    return rc && errno != EEXIST ? -1 : 0;
}

/* "/proc/self/fd/N": the bind source of an open descriptor. */
static void fd_path(int fd, char *buf)
{
    char digits[12];
    int n = 0;
    do digits[n++] = (char)('0' + fd % 10), fd /= 10;
    while (fd);
    memcpy(buf, "/proc/self/fd/", 14);
    for (int i = 0; i < n; i++) buf[14 + i] = digits[n - 1 - i];
    buf[14 + n] = '\0';
}

/* Opens the source of entry m: a listed path again without links, and it
 * must be what the parent checked (a system path is trusted as it is: a
 * package upgrade may have replaced it meanwhile). */
static int open_source(const sb_mount *m)
{
    if (m->kind == SB_M_LINK) return -1;
    if (m->flags & SB_M_SYSTEM) return open(m->path, O_PATH | O_CLOEXEC);
    int fd = hx_sb_open_nofollow(m->path, NULL);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) || st.st_dev != m->dev || st.st_ino != m->ino)) {
        close(fd);
        return errno = ESTALE, -1;
    }
    return fd;
}

/* Binds fd onto dst, then makes it read-only (but for write paths),
 * nosuid and (but for the system's devices) nodev, keeping the flags the
 * source mount has and a user namespace may not drop. */
static int bind(const sb_mount *m, int fd, const char *dst)
{
    char src[32];
    fd_path(fd, src);
    /* without the mounts beneath it, unless they are locked to it */
    if (mount(src, dst, NULL, MS_BIND, NULL) &&
        (errno != EINVAL || mount(src, dst, NULL, MS_BIND | MS_REC, NULL)))
        return -1;
    struct statfs sf;
    if (fstatfs(fd, &sf)) return -1;
    unsigned long keep = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME |
                         MS_NODIRATIME | MS_RELATIME;
    unsigned long fl = ((unsigned long)sf.f_flags & keep) | MS_REMOUNT | MS_BIND | MS_NOSUID;
    if (!(m->flags & SB_M_RW)) fl |= MS_RDONLY;
    if (!(m->flags & SB_M_SYSTEM)) fl |= MS_NODEV;
    return mount(NULL, dst, NULL, fl, NULL);
}

static int mount_proc(void)
{
    if (mkdir(NEW_ROOT "/proc", 0555)) return -1;
    unsigned long fl = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    /* only the processes, without /proc/sys and the kernel's files */
    if (!mount("proc", NEW_ROOT "/proc", "proc", fl, "subset=pid")) return 0;
    return mount("proc", NEW_ROOT "/proc", "proc", fl, NULL);
}

static int pivot(void)
{
    if (chdir(NEW_ROOT) || syscall(SYS_pivot_root, ".", ".") ||
        umount2(".", MNT_DETACH) || chdir("/"))
        return -1;
    return mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                 NULL);
}

static int fail_at(int *at, int i, int *fds, int n)
{
    int e = errno;
    *at = i;
    for (int k = 0; k < n; k++)
        if (fds[k] >= 0) close(fds[k]);
    return errno = e, -1;
}

int hx_sb_mounts_apply(const sb_plan *plan, int *at)
{
    int fds[SB_MAX_MOUNTS];
    char dst[PATH_MAX + 8];
    *at = -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) return -1;
    /* every source first: the tmpfs root may hide some (under /tmp) */
    for (int i = 0; i < plan->n; i++) {
        const sb_mount *m = &plan->m[i];
        fds[i] = open_source(m);
        if (fds[i] < 0 && m->kind != SB_M_LINK && !(m->flags & SB_M_SYSTEM))
            return fail_at(at, i, fds, i);
    }
    if (mount("hearth", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m"))
        return fail_at(at, -1, fds, plan->n);
    for (int i = 0; i < plan->n; i++) {
        const sb_mount *m = &plan->m[i];
        if (m->kind != SB_M_LINK && fds[i] < 0) continue; /* a system path gone */
        if (inside(m->path, dst) || make_point(plan, m, dst) ||
            (m->kind != SB_M_LINK && bind(m, fds[i], dst)))
            return fail_at(at, i, fds, plan->n);
    }
    for (int i = 0; i < plan->n; i++)
        if (fds[i] >= 0) close(fds[i]);
    mount_proc(); /* optional: refused where /proc is partly hidden */
    return pivot();
}
