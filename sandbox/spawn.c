/* spawn.c: starting a tool process confined (a new session, namespaces
 * with a mount namespace holding only its paths, rlimits, no_new_privs,
 * Landlock, seccomp, dropped root), feeding it, collecting its output under
 * caps and a wall-clock timeout, and killing its whole process tree. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/close_range.h>

#include "sandbox/sandbox_int.h"

#define NOBODY 65534
#define MAX_ENV 48

struct hx_sandbox_proc {
    pid_t pid;
    int in_fd, out_fd, err_fd; /* parent ends; -1 once closed */
    unsigned applied;
    int reaped, status;
    hx_buf out_pending;        /* bytes read past the last line */
    hx_buf err;
    size_t max_stderr;
};

hx_sandbox_params hx_sandbox_default_params(void)
{
    hx_sandbox_params p;
    memset(&p, 0, sizeof p);
    p.timeout_s = 10;
    p.cpu_s = 10;
    p.max_memory = (size_t)1 << 30;
    p.max_file_size = (size_t)64 << 20;
    p.max_open_files = 64;
    p.max_procs = 32;
    p.max_output = (size_t)4 << 20;
    p.max_stderr = (size_t)64 << 10;
    return p;
}

int hx_sb_disabled(const char *what)
{
    const char *v = getenv("HEARTH_SANDBOX_DISABLE");
    size_t n = strlen(what);
    for (const char *p = v; p && *p;) {
        const char *c = strchr(p, ',');
        size_t k = c ? (size_t)(c - p) : strlen(p);
        if (k == n && !strncmp(p, what, n)) return 1;
        p += k + (c ? 1 : 0);
    }
    return 0;
}

int hx_sandbox_mechanism_disabled(const char *what) { return hx_sb_disabled(what); }

/* ---- what the child needs, prepared in the parent ---- */

typedef struct prep {
    char exe[PATH_MAX];
    sb_plan plan;
    char *envp[MAX_ENV + 1];
    char env_store[4][PATH_MAX + 16];
    const char *cwd;
    int landlock_fd;
    sb_filter filter;
    int pin[2], pout[2], perr[2], pstat[2];
    struct rlimit lim_cpu, lim_as, lim_fsize, lim_nofile, lim_nproc;
    int drop_root;
    int use_seccomp;
    unsigned long ns_flags;    /* the namespaces the child was cloned into */
} prep;

/* Resolves argv[0] through PATH (the parent's), so the child only execs. */
static int resolve_exe(const char *name, char *out, hx_err *err)
{
    if (strchr(name, '/')) {
        if (!realpath(name, out))
            return hx_err_set(err, HX_ERR_NOTFOUND, "tool command %s: %s", name,
                              strerror(errno));
        return HX_OK;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        const char *c = strchr(p, ':');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        char cand[PATH_MAX];
        snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, name);
        if (n && access(cand, X_OK) == 0 && realpath(cand, out)) return HX_OK;
        p += n + (c ? 1 : 0);
    }
    return hx_err_set(err, HX_ERR_NOTFOUND, "tool command '%s' not found in PATH", name);
}

static void build_env(prep *pr, const hx_sandbox_params *p)
{
    const char *home = p->n_write ? p->write_paths[0] : "/nonexistent";
    int n = 0;
    snprintf(pr->env_store[0], sizeof pr->env_store[0], "PATH=/usr/local/bin:/usr/bin:/bin");
    snprintf(pr->env_store[1], sizeof pr->env_store[1], "HOME=%s", home);
    snprintf(pr->env_store[2], sizeof pr->env_store[2], "LANG=C.UTF-8");
    snprintf(pr->env_store[3], sizeof pr->env_store[3], "TMPDIR=%s",
             p->n_write ? p->write_paths[0] : "/nonexistent");
    for (int i = 0; i < 4; i++) pr->envp[n++] = pr->env_store[i];
    for (int i = 0; p->env && p->env[i] && n < MAX_ENV; i++)
        pr->envp[n++] = (char *)p->env[i];
    pr->envp[n] = NULL;
}

static void set_lim(struct rlimit *l, double v)
{
    l->rlim_cur = l->rlim_max = v > 0 ? (rlim_t)v : RLIM_INFINITY;
}

/* Moves fd above stdio: where Hearth started with 0, 1 or 2 closed, the
 * child's dup2 onto stdio would otherwise replace it. */
static int above_stdio(int *fd)
{
    if (*fd < 0 || *fd > 2) return 0;
    int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (moved < 0) return -1;
    close(*fd);
    *fd = moved;
    return 0;
}

static int open_pipes(prep *pr, hx_err *err)
{
    int *ps[] = {pr->pin, pr->pout, pr->perr, pr->pstat};
    for (int i = 0; i < 4; i++)
        if (pipe2(ps[i], O_CLOEXEC) || above_stdio(&ps[i][0]) || above_stdio(&ps[i][1]))
            return hx_err_set(err, HX_ERR_IO, "pipe: %s", strerror(errno));
    return HX_OK;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void prep_close(prep *pr)
{
    int *fds[] = {&pr->pin[0], &pr->pin[1], &pr->pout[0], &pr->pout[1],
                  &pr->perr[0], &pr->perr[1], &pr->pstat[0], &pr->pstat[1],
                  &pr->landlock_fd};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) close_fd(fds[i]);
}

static int prepare(const hx_sandbox_params *p, prep *pr, unsigned *applied,
                   hx_err *err)
{
    memset(pr, 0, sizeof *pr);
    int *fds[] = {pr->pin, pr->pout, pr->perr, pr->pstat};
    for (int i = 0; i < 4; i++) fds[i][0] = fds[i][1] = -1; /* none to close yet */
    pr->landlock_fd = -1;
    if (!p->argv || !p->argv[0])
        return hx_err_set(err, HX_ERR_INVALID, "sandbox: empty command");
    int rc = resolve_exe(p->argv[0], pr->exe, err);
    if (!rc) rc = hx_sb_plan_build(p, pr->exe, &pr->plan, err);
    if (rc) return rc;
    build_env(pr, p);
    pr->cwd = p->cwd ? p->cwd : p->n_write ? p->write_paths[0] : "/";
    int fd = hx_sb_disabled("landlock") ? -1 : hx_sb_landlock_prepare(p, pr->exe, applied, err);
    if (fd == -2) return err->rc ? err->rc : HX_ERR_IO; /* a listed path is bad */
    pr->landlock_fd = fd;
    if (above_stdio(&pr->landlock_fd))
        return hx_err_set(err, HX_ERR_IO, "landlock: %s", strerror(errno));
    hx_sb_seccomp_build(&pr->filter, SB_SC_TOOL | (p->allow_network ? 0 : SB_SC_NO_NET));
    pr->use_seccomp = !hx_sb_disabled("seccomp");
    if (!pr->use_seccomp) *applied &= ~(unsigned)HX_SB_SECCOMP;
    int mem = p->max_memory && !hx_sb_disabled("memory");
    if (mem) *applied |= HX_SB_MEMLIMIT;
    set_lim(&pr->lim_cpu, p->cpu_s);
    set_lim(&pr->lim_as, mem ? (double)p->max_memory : 0);
    set_lim(&pr->lim_fsize, (double)p->max_file_size);
    set_lim(&pr->lim_nofile, p->max_open_files);
    set_lim(&pr->lim_nproc, p->max_procs);
    pr->drop_root = geteuid() == 0;
    return open_pipes(pr, err);
}

int hx_sandbox_check(const hx_sandbox_params *p, hx_err *err)
{
    char exe[PATH_MAX];
    sb_plan *plan = hx_malloc(sizeof *plan);
    if (!plan) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    int rc = !p->argv || !p->argv[0]
                 ? hx_err_set(err, HX_ERR_INVALID, "sandbox: empty command")
                 : resolve_exe(p->argv[0], exe, err);
    if (!rc) rc = hx_sb_plan_build(p, exe, plan, err);
    free(plan);
    return rc;
}

static void put_list(hx_buf *out, const char *what, const char *const *paths, int n)
{
    for (int i = 0; i < n; i++) hx_buf_printf(out, "%s%s", i ? ", " : what, paths[i]);
}

void hx_sandbox_describe_grants(const hx_sandbox_params *p, hx_buf *out)
{
    if (!p) {
        put_list(out, "", hx_sb_system_paths, hx_sb_n_system_paths);
        hx_buf_puts(out, " (read-only, those that exist), /proc of its own processes");
        return;
    }
    char exe[PATH_MAX];
    hx_err e;
    if (!p->argv || !p->argv[0] || resolve_exe(p->argv[0], exe, &e))
        snprintf(exe, sizeof exe, "%s (not found)", p->argv && p->argv[0] ? p->argv[0] : "?");
    hx_buf_printf(out, "runs %s", exe);
    put_list(out, "; reads ", p->read_paths, p->n_read);
    put_list(out, "; writes ", p->write_paths, p->n_write);
}

/* ---- the child, between clone and exec: async-signal-safe only ---- */

static void child_fail_at(int fd, int step, int at)
{
    int msg[3] = {step, errno, at};
    ssize_t w = write(fd, msg, sizeof msg);
    (void)w;
    _exit(127);
}

static void child_fail(int fd, int step) { child_fail_at(fd, step, -1); }

enum { ST_SETSID = 1, ST_DUP, ST_FDS, ST_USERNS, ST_MOUNT, ST_RLIMIT, ST_DROP,
       ST_CHDIR, ST_NNP, ST_LANDLOCK, ST_SECCOMP, ST_EXEC };

struct dirent64_raw {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Marks each descriptor /proc/self/fd lists from 3 on close-on-exec. */
static int cloexec_listed(void)
{
    int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -1;
    _Alignas(8) char buf[2048];
    long n;
    while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0)
        for (long off = 0; off < n;) {
            const struct dirent64_raw *d = (const void *)(buf + off);
            int fd = 0;
            for (const char *c = d->d_name; *c >= '0' && *c <= '9'; c++) fd = fd * 10 + (*c - '0');
            off += d->d_reclen;
            if (fd >= 3 && fd != dfd && fcntl(fd, F_SETFD, FD_CLOEXEC)) n = -1;
        }
    close(dfd);
    return n < 0 ? -1 : 0;
}

/* Every inherited descriptor but stdio closes at exec: close_range where
 * the kernel has it (5.11), else each one /proc lists; else the spawn
 * fails. */
static int cloexec_from_3(void)
{
    if (!syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC)) return 0;
    return cloexec_listed();
}

static void child_limits(const prep *pr)
{
    struct rlimit zero = {0, 0};
    if (setrlimit(RLIMIT_CPU, &pr->lim_cpu) || setrlimit(RLIMIT_AS, &pr->lim_as) ||
        setrlimit(RLIMIT_FSIZE, &pr->lim_fsize) ||
        setrlimit(RLIMIT_NOFILE, &pr->lim_nofile) ||
        setrlimit(RLIMIT_NPROC, &pr->lim_nproc) || setrlimit(RLIMIT_CORE, &zero))
        child_fail(pr->pstat[1], ST_RLIMIT);
}

static void child_main(const prep *pr, const char *const *argv)
{
    int sfd = pr->pstat[1], at;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* a session of its own: no controlling terminal to type into */
    if (setsid() < 0) child_fail(sfd, ST_SETSID);
    if (dup2(pr->pin[0], 0) < 0 || dup2(pr->pout[1], 1) < 0 || dup2(pr->perr[1], 2) < 0)
        child_fail(sfd, ST_DUP);
    if (cloexec_from_3()) child_fail(sfd, ST_FDS);
    if ((pr->ns_flags & CLONE_NEWUSER) && hx_sb_userns_map(&pr->plan)) child_fail(sfd, ST_USERNS);
    if ((pr->ns_flags & CLONE_NEWNS) && hx_sb_mounts_apply(&pr->plan, &at))
        child_fail_at(sfd, ST_MOUNT, at);
    child_limits(pr);
    if (pr->drop_root &&
        (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)))
        child_fail(sfd, ST_DROP);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a change of user cleared it */
    if (chdir(pr->cwd)) child_fail(sfd, ST_CHDIR);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) child_fail(sfd, ST_NNP);
    int own_proc = (pr->ns_flags & (CLONE_NEWNS | CLONE_NEWPID)) == (CLONE_NEWNS | CLONE_NEWPID);
    if (pr->landlock_fd >= 0 && hx_sb_landlock_enforce(pr->landlock_fd, own_proc))
        child_fail(sfd, ST_LANDLOCK);
    if (pr->use_seccomp && hx_sb_seccomp_install(&pr->filter, 0)) child_fail(sfd, ST_SECCOMP);
    execve(pr->exe, (char *const *)argv, pr->envp);
    child_fail(sfd, ST_EXEC);
}

/* ---- starting ---- */

/* fork() in new namespaces where possible, plain fork() otherwise; a tool
 * allowed the network keeps the host's network namespace. *used gets the
 * namespace flags, set before the call so that the child sees them too. */
static pid_t clone_confined(int keep_net, unsigned long *used, unsigned *applied)
{
    static const struct {
        unsigned long flags;
        unsigned bits;
    } tries[] = {
        {CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET,
         HX_SB_USERNS | HX_SB_MNTNS | HX_SB_PIDNS | HX_SB_NETNS},
        {CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET, HX_SB_MNTNS | HX_SB_PIDNS | HX_SB_NETNS},
        {CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET, HX_SB_USERNS | HX_SB_MNTNS | HX_SB_NETNS},
        {0, 0},
    };
    /* as root the user namespace adds nothing (root stays root outside) */
    size_t first = hx_sb_disabled("namespaces") ? 3 : geteuid() == 0 ? 1 : 0;
    for (size_t i = first; i < sizeof tries / sizeof *tries; i++) {
        *used = tries[i].flags & ~(keep_net ? CLONE_NEWNET : 0UL);
        unsigned bits = tries[i].bits & ~(keep_net ? HX_SB_NETNS : 0u);
        pid_t pid = (pid_t)syscall(SYS_clone, *used | SIGCHLD, 0, 0, 0, 0);
        if (pid >= 0) {
            if (pid > 0) *applied |= bits;
            return pid;
        }
        if (errno != EPERM && errno != EINVAL && errno != ENOSPC && errno != EUSERS)
            return -1;
    }
    return -1;
}

static const char *step_name(int step)
{
    static const char *const names[] = {
        "?", "starting a session", "redirecting stdio", "closing inherited descriptors",
        "mapping the user namespace", "building the mount namespace", "setting rlimits",
        "dropping root", "changing directory", "setting no_new_privs", "enforcing Landlock",
        "installing seccomp", "executing"};
    return step > 0 && step <= ST_EXEC ? names[step] : "?";
}

/* Waits for exec (the status pipe closes) or a setup failure report. */
static int await_exec(hx_sandbox_proc *c, const prep *pr, hx_err *err)
{
    int msg[3];
    ssize_t n;
    do n = read(pr->pstat[0], msg, sizeof msg);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof msg) return HX_OK;
    waitpid(c->pid, &c->status, 0);
    c->reaped = 1;
    const char *at = msg[2] >= 0 && msg[2] < pr->plan.n ? pr->plan.m[msg[2]].path : NULL;
    return hx_err_set(err, msg[0] == ST_EXEC ? HX_ERR_NOTFOUND : HX_ERR_DENIED,
                      "could not start %s: %s%s%s failed: %s", pr->exe, step_name(msg[0]),
                      at ? " at " : "", at ? at : "",
                      msg[1] == ESTALE ? "the path changed since it was checked"
                                       : strerror(msg[1]));
}

static void warn_missing_once(unsigned applied)
{
    static int warned;
    unsigned want = HX_SB_LANDLOCK | HX_SB_NETNS | HX_SB_PIDNS | HX_SB_MNTNS | HX_SB_SECCOMP;
    if (warned || (applied & want) == want) return;
    warned = 1;
    char buf[256];
    hx_log_warn("tool sandbox is partial on this system: only %s",
                hx_sandbox_describe(applied, buf, sizeof buf));
}

int hx_sandbox_spawn(const hx_sandbox_params *p, hx_sandbox_proc **out,
                     hx_err *err)
{
    *out = NULL;
    unsigned applied = HX_SB_SECCOMP | HX_SB_NO_NEW_PRIVS | HX_SB_RLIMITS;
    prep *pr = hx_malloc(sizeof *pr);
    hx_sandbox_proc *c = hx_calloc(1, sizeof *c);
    if (!pr || !c) {
        free(pr);
        free(c);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    int rc = prepare(p, pr, &applied, err);
    if (rc) goto fail;
    if (pr->drop_root) applied |= HX_SB_DROPPED_ROOT;
    c->pid = clone_confined(p->allow_network, &pr->ns_flags, &applied);
    if (c->pid < 0) {
        rc = hx_err_set(err, HX_ERR_IO, "fork: %s", strerror(errno));
        goto fail;
    }
    if (c->pid == 0) child_main(pr, p->argv);
    c->in_fd = pr->pin[1], c->out_fd = pr->pout[0], c->err_fd = pr->perr[0];
    pr->pin[1] = pr->pout[0] = pr->perr[0] = -1;
    close_fd(&pr->pstat[1]);
    c->applied = applied;
    c->max_stderr = p->max_stderr;
    hx_buf_init(&c->out_pending);
    hx_buf_init(&c->err);
    rc = await_exec(c, pr, err);
    prep_close(pr);
    free(pr);
    if (rc) {
        hx_sandbox_proc_free(c);
        return rc;
    }
    fcntl(c->in_fd, F_SETFL, O_NONBLOCK);
    warn_missing_once(applied);
    *out = c;
    return HX_OK;
fail:
    prep_close(pr);
    free(pr);
    free(c);
    return rc;
}

/* ---- talking to the child ---- */

static void kill_tree(hx_sandbox_proc *c)
{
    if (c->reaped || c->pid <= 0) return;
    if (!(c->applied & HX_SB_PIDNS)) kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL); /* init of its PID namespace: all of it dies */
}

static void reap(hx_sandbox_proc *c, int block)
{
    if (c->reaped) return;
    pid_t r;
    do r = waitpid(c->pid, &c->status, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == c->pid || (r < 0 && errno == ECHILD)) c->reaped = 1;
}

/* Appends what the stderr pipe has to c->err, up to the cap. */
static void drain_stderr(hx_sandbox_proc *c)
{
    char buf[4096];
    ssize_t n = read(c->err_fd, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(&c->err_fd);
        return;
    }
    size_t room = c->err.len < c->max_stderr ? c->max_stderr - c->err.len : 0;
    hx_buf_append(&c->err, buf, (size_t)n < room ? (size_t)n : room);
}

static int ms_left(double deadline)
{
    double left = deadline - hx_time_mono();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* write() to a pipe whose reader died raises SIGPIPE, which would kill
 * Hearth: block it for the call and swallow a pending one. */
static ssize_t write_nosigpipe(int fd, const void *p, size_t n)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t w = write(fd, p, n);
    int e = errno;
    if (w < 0 && e == EPIPE) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

int hx_sandbox_proc_write(hx_sandbox_proc *c, const void *data, size_t len,
                          int timeout_ms, hx_err *err)
{
    double deadline = hx_time_mono() + timeout_ms / 1000.0;
    const char *p = data;
    while (len) {
        if (c->in_fd < 0) return hx_err_set(err, HX_ERR_IO, "tool closed its input");
        struct pollfd pf = {c->in_fd, POLLOUT, 0};
        int t = ms_left(deadline);
        if (!t || poll(&pf, 1, t) == 0)
            return hx_err_set(err, HX_ERR_TIMEOUT, "tool did not read its input in time");
        ssize_t n = write_nosigpipe(c->in_fd, p, len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n < 0) {
            close_fd(&c->in_fd);
            return hx_err_set(err, HX_ERR_IO, "writing to tool: %s", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
    }
    return HX_OK;
}

/* Moves one complete line from out_pending to line, if there is one. */
static int take_line(hx_sandbox_proc *c, hx_buf *line)
{
    char *nl = c->out_pending.len ? memchr(c->out_pending.data, '\n', c->out_pending.len) : NULL;
    if (!nl) return 0;
    size_t n = (size_t)(nl - c->out_pending.data);
    line->len = 0;
    hx_buf_append(line, c->out_pending.data, n);
    memmove(c->out_pending.data, nl + 1, c->out_pending.len - n - 1);
    c->out_pending.len -= n + 1;
    c->out_pending.data[c->out_pending.len] = '\0';
    return 1;
}

int hx_sandbox_proc_read_line(hx_sandbox_proc *c, hx_buf *line, size_t max,
                              int timeout_ms, hx_err *err)
{
    double deadline = hx_time_mono() + timeout_ms / 1000.0;
    while (!take_line(c, line)) {
        if (c->out_pending.len > max) {
            kill_tree(c);
            return hx_err_set(err, HX_ERR_RANGE, "tool wrote a line longer than %zu bytes", max);
        }
        if (c->out_fd < 0) return hx_err_set(err, HX_ERR_IO, "tool closed its output");
        struct pollfd pf[2] = {{c->out_fd, POLLIN, 0}, {c->err_fd, POLLIN, 0}};
        int t = ms_left(deadline);
        if (!t || poll(pf, c->err_fd >= 0 ? 2 : 1, t) == 0)
            return hx_err_set(err, HX_ERR_TIMEOUT, "tool did not answer within %d ms", timeout_ms);
        if (c->err_fd >= 0 && pf[1].revents) drain_stderr(c);
        if (!pf[0].revents) continue;
        char buf[8192];
        ssize_t n = read(c->out_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) close_fd(&c->out_fd);
        else hx_buf_append(&c->out_pending, buf, (size_t)n);
    }
    return HX_OK;
}

const char *hx_sandbox_proc_stderr(hx_sandbox_proc *c)
{
    return c->err.data ? c->err.data : "";
}

unsigned hx_sandbox_proc_applied(const hx_sandbox_proc *c) { return c->applied; }

void hx_sandbox_proc_free(hx_sandbox_proc *c)
{
    if (!c) return;
    close_fd(&c->in_fd);
    kill_tree(c);
    reap(c, 1);
    close_fd(&c->out_fd);
    close_fd(&c->err_fd);
    hx_buf_free(&c->out_pending);
    hx_buf_free(&c->err);
    free(c);
}

/* ---- one-shot runs ---- */

typedef struct run_state {
    hx_sandbox_proc *c;
    const char *in;
    size_t in_left;
    hx_buf out;
    size_t max_output;
    int exceeded;
} run_state;

/* One poll round: feed stdin, collect stdout and stderr. */
static void pump(run_state *s, int timeout_ms)
{
    hx_sandbox_proc *c = s->c;
    struct pollfd pf[3];
    int n = 0, ii = -1, io = -1, ie = -1;
    if (c->in_fd >= 0) ii = n, pf[n++] = (struct pollfd){c->in_fd, POLLOUT, 0};
    if (c->out_fd >= 0) io = n, pf[n++] = (struct pollfd){c->out_fd, POLLIN, 0};
    if (c->err_fd >= 0) ie = n, pf[n++] = (struct pollfd){c->err_fd, POLLIN, 0};
    if (!n || poll(pf, (nfds_t)n, timeout_ms) <= 0) return;
    if (ii >= 0 && pf[ii].revents) {
        ssize_t w = s->in_left ? write_nosigpipe(c->in_fd, s->in, s->in_left) : 0;
        if (w > 0) s->in += w, s->in_left -= (size_t)w;
        if (!s->in_left || (w < 0 && errno != EAGAIN)) close_fd(&c->in_fd);
    }
    if (io >= 0 && pf[io].revents) {
        char buf[16384];
        ssize_t r = read(c->out_fd, buf, sizeof buf);
        if (r <= 0) close_fd(&c->out_fd);
        else if (s->out.len + (size_t)r > s->max_output) s->exceeded = 1;
        else hx_buf_append(&s->out, buf, (size_t)r);
    }
    if (ie >= 0 && pf[ie].revents) drain_stderr(c);
}

static void fill_result(run_state *s, hx_sandbox_result *r, double t0)
{
    hx_sandbox_proc *c = s->c;
    r->applied = c->applied;
    r->output_exceeded = s->exceeded;
    r->exited = WIFEXITED(c->status);
    r->exit_code = r->exited ? WEXITSTATUS(c->status) : -1;
    r->term_signal = WIFSIGNALED(c->status) ? WTERMSIG(c->status) : 0;
    r->out = hx_buf_steal(&s->out, &r->out_len);
    r->err = hx_buf_steal(&c->err, &r->err_len);
    r->wall_s = hx_time_mono() - t0;
}

int hx_sandbox_run(const hx_sandbox_params *p, const void *input,
                   size_t input_len, hx_sandbox_result *r, hx_err *err)
{
    memset(r, 0, sizeof *r);
    double t0 = hx_time_mono(), deadline = t0 + (p->timeout_s > 0 ? p->timeout_s : 1e9);
    run_state s = {.in = input, .in_left = input_len, .max_output = p->max_output};
    hx_buf_init(&s.out);
    int rc = hx_sandbox_spawn(p, &s.c, err);
    if (rc) return rc;
    if (!input_len) close_fd(&s.c->in_fd);
    while (!s.c->reaped) {
        if (s.exceeded || !ms_left(deadline)) {
            r->timed_out = !s.exceeded;
            kill_tree(s.c);
            reap(s.c, 1);
            break;
        }
        int t = ms_left(deadline);
        pump(&s, t < 50 ? t : 50);
        reap(s.c, 0);
    }
    /* what the pipes still hold after the exit */
    while (!s.exceeded && (s.c->out_fd >= 0 || s.c->err_fd >= 0) && ms_left(deadline))
        pump(&s, 10);
    kill_tree(s.c); /* grandchildren left behind (no PID namespace) */
    fill_result(&s, r, t0);
    hx_sandbox_proc_free(s.c);
    return HX_OK;
}

void hx_sandbox_result_free(hx_sandbox_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

const char *hx_sandbox_describe(unsigned a, char *buf, size_t n)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{HX_SB_LANDLOCK, "landlock"}, {HX_SB_LANDLOCK_NET, "landlock-net"},
                 {HX_SB_NETNS, "netns"}, {HX_SB_PIDNS, "pidns"},
                 {HX_SB_MNTNS, "mntns"}, {HX_SB_USERNS, "userns"},
                 {HX_SB_SECCOMP, "seccomp"}, {HX_SB_NO_NEW_PRIVS, "no_new_privs"},
                 {HX_SB_RLIMITS, "rlimits"}, {HX_SB_MEMLIMIT, "memory-limit"},
                 {HX_SB_DROPPED_ROOT, "as-nobody"}};
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (a & names[i].bit) {
            int w = snprintf(buf + k, n - k, "%s%s", k ? ", " : "", names[i].name);
            if (w < 0 || (size_t)w >= n - k) break;
            k += (size_t)w;
        }
    if (!k) snprintf(buf, n, "none");
    return buf;
}

/* The namespaces a child gets here: one clone that exits at once. */
static unsigned probe_namespaces(void)
{
    unsigned long used;
    unsigned bits = 0;
    pid_t pid = clone_confined(0, &used, &bits);
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid(pid, NULL, 0);
    return pid > 0 ? bits : 0;
}

unsigned hx_sandbox_available(void)
{
    static unsigned ns = ~0u;
    if (ns == ~0u) ns = probe_namespaces();
    unsigned a = HX_SB_NO_NEW_PRIVS | HX_SB_RLIMITS | HX_SB_MEMLIMIT | ns;
    if (!hx_sb_disabled("seccomp")) a |= HX_SB_SECCOMP;
    if (hx_sb_disabled("memory")) a &= ~(unsigned)HX_SB_MEMLIMIT;
    if (hx_sandbox_landlock_abi() && !hx_sb_disabled("landlock")) a |= HX_SB_LANDLOCK;
    if (hx_sandbox_landlock_abi() >= 4 && !hx_sb_disabled("landlock")) a |= HX_SB_LANDLOCK_NET;
    if (geteuid() == 0) a |= HX_SB_DROPPED_ROOT;
    return a;
}
