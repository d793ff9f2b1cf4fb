/* out.c: the one writer of output files: what a path names is resolved
 * (links, devices, descriptors), never destroyed, and written atomically. */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the temporary files a signal removes ----
 * A slot's path is written before the slot is marked used and the mark is
 * cleared before the path changes, so the handler reads only whole paths. */
#define N_SLOTS 16
static char g_tmp[N_SLOTS][HX_PATH_MAX];
static volatile sig_atomic_t g_used[N_SLOTS];
static pthread_mutex_t g_slots_mu = PTHREAD_MUTEX_INITIALIZER;
static const int g_sigs[] = {SIGINT, SIGTERM, SIGHUP};
#define N_SIGS (sizeof g_sigs / sizeof g_sigs[0])

/* Removes the temporaries, then lets the signal kill the process as it
 * would have (SA_RESETHAND: the default action; a shell sees status 130
 * for Ctrl-C). Async-signal-safe: unlink and raise only. */
static void on_signal(int sig)
{
    int e = errno;
    for (int i = 0; i < N_SLOTS; i++)
        if (__atomic_load_n(&g_used[i], __ATOMIC_ACQUIRE)) unlink(g_tmp[i]);
    errno = e;
    raise(sig); /* pending until this returns, then the default action */
}

/* Installs on_signal where the action is the default one; a program that
 * handles a signal itself (cooperative cancel) keeps its handler and
 * aborts its outputs itself. */
static void catch_signals(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_SIGS; i++) sigaddset(&sa.sa_mask, g_sigs[i]);
    for (size_t i = 0; i < N_SIGS; i++)
        if (!sigaction(g_sigs[i], NULL, &old) && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sigaction(g_sigs[i], &sa, NULL);
}

static void block_signals(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    for (size_t i = 0; i < N_SIGS; i++) sigaddset(&s, g_sigs[i]);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

/* A free slot holding path, or -1 when all are taken. */
static int track(const char *path)
{
    int slot = -1;
    pthread_mutex_lock(&g_slots_mu);
    for (int i = 0; i < N_SLOTS && slot < 0; i++)
        if (!g_used[i]) slot = i;
    if (slot >= 0) {
        snprintf(g_tmp[slot], sizeof g_tmp[slot], "%s", path);
        __atomic_store_n(&g_used[slot], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_slots_mu);
    if (slot >= 0) catch_signals();
    return slot;
}

static void untrack(int slot)
{
    if (slot < 0) return;
    pthread_mutex_lock(&g_slots_mu);
    __atomic_store_n(&g_used[slot], 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_slots_mu);
}

/* ---- small file helpers ---- */

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The folder of path into dir (size HX_PATH_MAX): "." for a bare name. */
static void dir_of(const char *path, char *dir)
{
    snprintf(dir, HX_PATH_MAX, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, HX_PATH_MAX, ".");
}

/* fsync of the folder holding path (relative to dirfd, or AT_FDCWD). */
static void fsync_dir_of(int dirfd, const char *path)
{
    char dir[HX_PATH_MAX];
    dir_of(path, dir);
    int fd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

/* ---- resolving what a path names ---- */

/* The descriptor a path names when it is one already open: /dev/stdout,
 * /dev/stderr, /dev/fd/N, /proc/self/fd/N; else -1. Writing through the
 * descriptor keeps its offset and mode (a shell's `>>`), which reopening
 * the /proc link would not. */
static int fd_alias(const char *p)
{
    if (!strcmp(p, "/dev/stdout")) return 1;
    if (!strcmp(p, "/dev/stderr")) return 2;
    const char *n = !strncmp(p, "/dev/fd/", 8)         ? p + 8
                    : !strncmp(p, "/proc/self/fd/", 14) ? p + 14
                                                        : NULL;
    long v;
    char *end;
    if (!n || *n < '0' || *n > '9') return -1;
    errno = 0;
    v = strtol(n, &end, 10);
    return *end || errno || v > INT_MAX ? -1 : (int)v;
}

/* The kernel's protected_symlinks and protected_regular rule: in a sticky,
 * world-writable folder (/tmp) a link or file owned by someone other than
 * us or the folder's owner may have been planted for us to follow or
 * overwrite; refuse it. */
static int check_planted(const char *user_path, const char *path, uid_t owner,
                         const char *what, hx_err *err)
{
    char dir[HX_PATH_MAX];
    struct stat ds;
    dir_of(path, dir);
    if (stat(dir, &ds) || !(ds.st_mode & S_ISVTX) || !(ds.st_mode & S_IWOTH) ||
        owner == geteuid() || owner == ds.st_uid)
        return HX_OK;
    return hx_err_set(err, HX_ERR_DENIED,
                      "%s: %s is a %s of another user (uid %u) in the shared folder %s; "
                      "refused (it may have been planted there)", user_path, path, what,
                      (unsigned)owner, dir);
}

/* Replaces t (a link's path) by the path the link names. */
static int follow(const char *user_path, char *t, hx_err *err)
{
    char to[HX_PATH_MAX], dir[HX_PATH_MAX];
    ssize_t n = readlink(t, to, sizeof to - 1);
    if (n < 0) return hx_err_set(err, HX_ERR_IO, "%s: %s: %s", user_path, t, strerror(errno));
    to[n] = '\0';
    dir_of(t, dir);
    int len = to[0] == '/' ? snprintf(t, HX_PATH_MAX, "%s", to)
                           : snprintf(t, HX_PATH_MAX, "%s/%s", dir, to);
    if (len < 0 || len >= HX_PATH_MAX)
        return hx_err_set(err, HX_ERR_RANGE, "%s: the path its link names is too long", user_path);
    return HX_OK;
}

/* What an output path names after its links. */
typedef struct target {
    int fd;          /* >= 0: an open descriptor ("-", /dev/stdout) */
    int exists;      /* st holds path's lstat */
    struct stat st;
    char path[HX_PATH_MAX];
} target;

static int resolve(const char *user_path, target *t, hx_err *err)
{
    memset(t, 0, sizeof *t);
    t->fd = strcmp(user_path, "-") ? -1 : STDOUT_FILENO;
    if (t->fd >= 0) return HX_OK;
    if (!*user_path) return hx_err_set(err, HX_ERR_INVALID, "an empty output path");
    if ((size_t)snprintf(t->path, sizeof t->path, "%s", user_path) >= sizeof t->path)
        return hx_err_set(err, HX_ERR_RANGE, "%s: path too long", user_path);
    for (int hops = 0;; hops++) {
        if ((t->fd = fd_alias(t->path)) >= 0) return HX_OK;
        if (lstat(t->path, &t->st)) {
            if (errno == ENOENT) return HX_OK; /* a new file (its folder is checked on create) */
            return hx_err_set(err, HX_ERR_IO, "%s: %s", user_path, strerror(errno));
        }
        t->exists = 1;
        if (!S_ISLNK(t->st.st_mode)) return HX_OK;
        if (hops == 40)
            return hx_err_set(err, HX_ERR_INVALID, "%s: too many levels of links", user_path);
        int rc = check_planted(user_path, t->path, t->st.st_uid, "link", err);
        if (!rc) rc = follow(user_path, t->path, err);
        if (rc) return rc;
        t->exists = 0;
    }
}

/* Refuses an output that is one of the inputs (same device and inode). */
static int check_inputs(const char *user_path, const struct stat *st,
                        const char *const *inputs, hx_err *err)
{
    for (int i = 0; inputs && inputs[i]; i++) {
        struct stat in;
        if (stat(inputs[i], &in) || in.st_dev != st->st_dev || in.st_ino != st->st_ino) continue;
        return hx_err_set(err, HX_ERR_INVALID,
                          "%s is the input %s itself; write the output to another path",
                          user_path, inputs[i]);
    }
    return HX_OK;
}

/* The temporary file goes beside path: its folder must exist and be
 * writable (checked before long work, with the message create_tmp gives). */
static int check_folder(const char *path, hx_err *err)
{
    char dir[HX_PATH_MAX];
    dir_of(path, dir);
    if (!faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS)) return HX_OK;
    return hx_err_set(err, HX_ERR_IO, "%s: cannot create a file in %s: %s", path, dir,
                      errno == ENOENT ? "no such folder" : strerror(errno));
}

/* What hx_out_open would do with t: 0 ok, or the refusal. */
static int check_target(const char *user_path, const target *t, const char *const *inputs,
                        hx_err *err)
{
    struct stat st;
    if (t->fd >= 0) {
        if (fstat(t->fd, &st))
            return hx_err_set(err, HX_ERR_INVALID, "%s: descriptor %d is not open",
                              user_path, t->fd);
        return S_ISREG(st.st_mode) ? check_inputs(user_path, &st, inputs, err) : HX_OK;
    }
    if (!t->exists) return check_folder(t->path, err);
    mode_t m = t->st.st_mode;
    if (S_ISDIR(m)) return hx_err_set(err, HX_ERR_INVALID, "%s is a folder", user_path);
    if (S_ISREG(m)) {
        int rc = check_inputs(user_path, &t->st, inputs, err);
        if (!rc) rc = check_planted(user_path, t->path, t->st.st_uid, "file", err);
        if (!rc && faccessat(AT_FDCWD, t->path, W_OK, AT_EACCESS)) /* as `>` would refuse */
            rc = hx_err_set(err, HX_ERR_DENIED, "%s: %s: %s", user_path, t->path,
                            strerror(errno));
        return rc ? rc : check_folder(t->path, err);
    }
    if (S_ISCHR(m) || S_ISBLK(m) || S_ISFIFO(m)) return HX_OK;
    return hx_err_set(err, HX_ERR_INVALID, "%s is neither a file, a device nor a FIFO",
                      user_path);
}

/* ---- the temporary file ---- */

/* Creates o->tmp beside final (never through a planted file or link: a
 * name taken is skipped) and puts it on the signal list. */
static int create_tmp(hx_out *o, const char *final, unsigned mode, hx_err *err)
{
    sigset_t old;
    int fd = -1, e = 0;
    block_signals(&old); /* no death between create and track */
    for (unsigned k = 0; k < 100 && fd < 0; k++) {
        int n = k ? snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld.%u", final, (long)getpid(), k)
                  : snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", final, (long)getpid());
        if (n < 0 || (size_t)n >= sizeof o->tmp) {
            e = ENAMETOOLONG;
            break;
        }
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    o->slot = fd >= 0 ? track(o->tmp) : -1;
    if (fd >= 0 && o->slot < 0) {
        unlink(o->tmp);
        close(fd);
        fd = -1;
        e = EMFILE;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        char dir[HX_PATH_MAX];
        dir_of(final, dir);
        o->tmp[0] = '\0';
        return hx_err_set(err, HX_ERR_IO, "%s: cannot create a file in %s: %s", final, dir,
                          e == ENOENT ? "no such folder" : strerror(e));
    }
    o->fd = fd;
    return HX_OK;
}

static void out_init(hx_out *o)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->slot = -1;
}

/* Opens t for writing through (a descriptor, a device or a FIFO). */
static int open_through(hx_out *o, const char *user_path, const target *t, hx_err *err)
{
    o->fd = t->fd >= 0 ? fcntl(t->fd, F_DUPFD_CLOEXEC, 3)
                       : open(t->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (o->fd < 0) return hx_err_set(err, HX_ERR_IO, "%s: %s", user_path, strerror(errno));
    return HX_OK;
}

int hx_out_open(hx_out *o, const char *path, const char *const *inputs, unsigned mode,
                hx_err *err)
{
    target t;
    out_init(o);
    int rc = resolve(path, &t, err);
    if (!rc) rc = check_target(path, &t, inputs, err);
    if (rc) return rc;
    snprintf(o->path, sizeof o->path, "%s", t.fd >= 0 ? path : t.path);
    if (t.fd >= 0 || (t.exists && !S_ISREG(t.st.st_mode)))
        return open_through(o, path, &t, err);
    if ((rc = create_tmp(o, t.path, mode, err))) return rc;
    if (t.exists) { /* the replaced file's mode and, for root, owner */
        fchmod(o->fd, t.st.st_mode & 07777);
        if (geteuid() == 0 && fchown(o->fd, t.st.st_uid, t.st.st_gid)) { /* best effort */ }
    }
    return HX_OK;
}

int hx_out_check(const char *path, const char *const *inputs, hx_err *err)
{
    target t;
    int rc = resolve(path, &t, err);
    return rc ? rc : check_target(path, &t, inputs, err);
}

int hx_out_kind(const char *path)
{
    target t;
    struct stat a, b;
    if (!path || resolve(path, &t, NULL) || check_target(path, &t, NULL, NULL)) return 0;
    if (t.fd >= 0) return t.fd == STDOUT_FILENO ? HX_OUT_STDOUT : HX_OUT_DEVICE;
    if (t.exists && !fstat(STDOUT_FILENO, &b) && !stat(t.path, &a) && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return HX_OUT_STDOUT;
    return !t.exists || S_ISREG(t.st.st_mode) ? HX_OUT_FILE : HX_OUT_DEVICE;
}

int hx_out_write(hx_out *o, const void *p, size_t n, hx_err *err)
{
    int bad = o->f ? fwrite(p, 1, n, o->f) != n : write_all(o->fd, p, n);
    if (bad) return hx_err_set(err, HX_ERR_IO, "%s: %s", o->path, strerror(errno));
    o->written += n;
    return HX_OK;
}

FILE *hx_out_stdio(hx_out *o)
{
    if (!o->f && o->fd >= 0 && (o->f = fdopen(o->fd, "w"))) o->fd = -1;
    return o->f;
}

/* Flushes and closes the stream or descriptor; fsyncs a temporary. */
static int out_close(hx_out *o, int sync, hx_err *err)
{
    int fd = o->f ? fileno(o->f) : o->fd, rc = HX_OK;
    if (o->f && (fflush(o->f) || ferror(o->f)))
        rc = hx_err_set(err, HX_ERR_IO, "%s: %s", o->path, strerror(errno ? errno : EIO));
    if (!rc && sync && fsync(fd))
        rc = hx_err_set(err, HX_ERR_IO, "%s: fsync: %s", o->path, strerror(errno));
    if ((o->f ? fclose(o->f) : close(fd)) && !rc)
        rc = hx_err_set(err, HX_ERR_IO, "%s: %s", o->path, strerror(errno));
    o->f = NULL;
    o->fd = -1;
    return rc;
}

int hx_out_commit(hx_out *o, hx_err *err)
{
    if (!o->f && o->fd < 0) return hx_err_set(err, HX_ERR_STATE, "%s: not open", o->path);
    int rc = out_close(o, o->tmp[0] != '\0', err);
    if (!rc && o->tmp[0] && rename(o->tmp, o->path))
        rc = hx_err_set(err, HX_ERR_IO, "%s: %s", o->path, strerror(errno));
    if (o->tmp[0]) {
        if (rc) unlink(o->tmp);
        else fsync_dir_of(AT_FDCWD, o->path);
    }
    untrack(o->slot);
    o->slot = -1;
    o->tmp[0] = '\0';
    return rc;
}

void hx_out_abort(hx_out *o)
{
    if (o->f || o->fd >= 0) out_close(o, 0, NULL);
    if (o->tmp[0]) unlink(o->tmp);
    untrack(o->slot);
    o->slot = -1;
    o->tmp[0] = '\0';
}

int hx_out_end(hx_out *o, int rc, hx_err *err)
{
    if (rc) {
        hx_out_abort(o);
        return rc;
    }
    return hx_out_commit(o, err);
}

int hx_out_write_file(const char *path, const char *const *inputs, const void *data,
                      size_t len, unsigned mode, hx_err *err)
{
    hx_out o;
    int rc = hx_out_open(&o, path, inputs, mode, err);
    if (rc) return rc;
    return hx_out_end(&o, hx_out_write(&o, data, len, err), err);
}

int hx_write_file_atomic(const char *path, const void *data, size_t len, hx_err *err)
{
    hx_out o;
    out_init(&o);
    if ((size_t)snprintf(o.path, sizeof o.path, "%s", path) >= sizeof o.path)
        return hx_err_set(err, HX_ERR_RANGE, "%s: path too long", path);
    int rc = create_tmp(&o, path, 0600, err);
    if (rc) return rc;
    return hx_out_end(&o, hx_out_write(&o, data, len, err), err);
}

int hx_write_file_atomic_at(int dirfd, const char *path, const void *data, size_t len,
                            hx_err *err)
{
    if (dirfd == AT_FDCWD) return hx_write_file_atomic(path, data, len, err);
    char tmp[HX_PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return hx_err_set(err, HX_ERR_RANGE, "%s: path too long", path);
    /* a stale temporary of an earlier process with this pid goes first; the
     * new one is created, never opened: no link or FIFO planted at its name
     * is ever followed or written through */
    unlinkat(dirfd, tmp, 0);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return hx_err_set(err, HX_ERR_IO, "%s: %s", tmp, strerror(errno));
    if (write_all(fd, data, len) || fsync(fd)) {
        int e = errno;
        close(fd);
        unlinkat(dirfd, tmp, 0);
        return hx_err_set(err, HX_ERR_IO, "%s: %s", tmp, strerror(e));
    }
    close(fd);
    if (renameat(dirfd, tmp, dirfd, path)) {
        int e = errno;
        unlinkat(dirfd, tmp, 0);
        return hx_err_set(err, HX_ERR_IO, "%s: %s", path, strerror(e));
    }
    fsync_dir_of(dirfd, path);
    return HX_OK;
}
