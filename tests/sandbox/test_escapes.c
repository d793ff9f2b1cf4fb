/* test_escapes.c: the escapes an attacker tried on Hearth's sandbox, each
 * with its control (the same action succeeding where it is allowed, or
 * unconfined). This binary is also the hostile tool ("--hostile MODE
 * ARG"), reporting what it managed through its exit code. Run as root, it
 * runs everything again as an ordinary user (uid HX_TEST_UID, default
 * 1000), where the sandbox takes a user namespace instead of dropping to
 * nobody. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "sandbox/sandbox_int.h"
#include "as_user.h"
#include "test.h"

/* exit codes of the hostile modes */
enum { ESCAPED = 42, STOPPED = 7 };

static int in_tool_mode;
#ifdef __SANITIZE_ADDRESS__
/* The leak checker stops the world with ptrace, which the sandbox kills:
 * the hostile tool runs without it. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return in_tool_mode; }
#endif

static char self_path[PATH_MAX], dir[PATH_MAX];

/* ---- the hostile tool ---- */

static int unix_addr(const char *path, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path, sizeof a->sun_path, "%s", path);
    return (int)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
}

static int try_connect(const char *path)
{
    struct sockaddr_un a;
    socklen_t len = (socklen_t)unix_addr(path, &a);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    return s >= 0 && connect(s, (struct sockaddr *)&a, len) == 0 ? ESCAPED : STOPPED;
}

/* A datagram pair can name any socket path in sendto(). */
static int try_dgram(const char *path)
{
    struct sockaddr_un a;
    socklen_t len = (socklen_t)unix_addr(path, &a);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) return STOPPED;
    return sendto(sv[0], "x", 1, 0, (struct sockaddr *)&a, len) == 1 ? ESCAPED : STOPPED;
}

/* A stream pair, for talking to its own children: allowed. */
static int try_pair(void)
{
    int sv[2];
    char c = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || write(sv[0], "y", 1) != 1 ||
        read(sv[1], &c, 1) != 1)
        return STOPPED;
    return c == 'y' ? ESCAPED : STOPPED;
}

/* Types "x" into the controlling terminal (or the one at path). */
static int try_tiocsti(const char *path)
{
    const char *paths[] = {"/dev/tty", path};
    for (int i = 0; i < 2; i++) {
        int fd = *paths[i] ? open(paths[i], O_RDWR | O_NOCTTY) : -1;
        if (fd >= 0 && ioctl(fd, TIOCSTI, "x") == 0) return ESCAPED;
    }
    for (int fd = 0; fd < 3; fd++)
        if (ioctl(fd, TIOCSTI, "x") == 0) return ESCAPED;
    return STOPPED;
}

static int try_fd(const char *arg)
{
    char c;
    return read(atoi(arg), &c, 1) == 1 ? ESCAPED : STOPPED;
}

/* IORING_OP_SOCKET then IORING_OP_CONNECT to 127.0.0.1:port, without
 * the socket() system call. */
static int ring_op(int ring, struct io_uring_params *pr, void *sq, void *cq,
                   struct io_uring_sqe *sqes, const struct io_uring_sqe *op)
{
    unsigned *tail = (unsigned *)((char *)sq + pr->sq_off.tail);
    unsigned *array = (unsigned *)((char *)sq + pr->sq_off.array);
    unsigned mask = *(unsigned *)((char *)sq + pr->sq_off.ring_mask);
    unsigned t = *tail;
    sqes[t & mask] = *op;
    array[t & mask] = t & mask;
    __atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) return -1000;
    unsigned *head = (unsigned *)((char *)cq + pr->cq_off.head);
    struct io_uring_cqe *cqes = (void *)((char *)cq + pr->cq_off.cqes);
    unsigned cmask = *(unsigned *)((char *)cq + pr->cq_off.ring_mask);
    int res = cqes[*head & cmask].res;
    __atomic_store_n(head, *head + 1, __ATOMIC_RELEASE);
    return res;
}

static int try_uring(const char *port)
{
    struct io_uring_params pr;
    memset(&pr, 0, sizeof pr);
    int ring = (int)syscall(__NR_io_uring_setup, 4, &pr);
    if (ring < 0) return STOPPED;
    size_t sq_len = pr.sq_off.array + pr.sq_entries * sizeof(unsigned);
    size_t cq_len = pr.cq_off.cqes + pr.cq_entries * sizeof(struct io_uring_cqe);
    void *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQ_RING);
    void *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(NULL, pr.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE,
                                     MAP_SHARED, ring, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return STOPPED;
    struct io_uring_sqe op = {.opcode = IORING_OP_SOCKET, .fd = AF_INET, .off = SOCK_STREAM};
    int s = ring_op(ring, &pr, sq, cq, sqes, &op);
    if (s < 0) return STOPPED;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    op = (struct io_uring_sqe){.opcode = IORING_OP_CONNECT, .fd = s,
                               .addr = (uint64_t)(uintptr_t)&a, .off = sizeof a};
    return ring_op(ring, &pr, sq, cq, sqes, &op) == 0 ? ESCAPED : STOPPED;
}

static int hostile(const char *mode, const char *arg)
{
    if (!strcmp(mode, "read")) return open(arg, O_RDONLY) >= 0 ? ESCAPED : STOPPED;
    if (!strcmp(mode, "write"))
        return open(arg, O_WRONLY | O_CREAT, 0644) >= 0 ? ESCAPED : STOPPED;
    if (!strcmp(mode, "connect")) return try_connect(arg);
    if (!strcmp(mode, "dgram")) return try_dgram(arg);
    if (!strcmp(mode, "pair")) return try_pair();
    if (!strcmp(mode, "tiocsti")) return try_tiocsti(arg);
    if (!strcmp(mode, "fd")) return try_fd(arg);
    if (!strcmp(mode, "uring")) return try_uring(arg);
    return 2;
}

/* ---- running it ---- */

typedef struct run {
    const char *mode, *arg;
    const char *read[4], *write[4];
    const char *exe;       /* NULL: this binary */
} run;

static hx_sandbox_params params_of(const run *w, const char **argv)
{
    hx_sandbox_params p = hx_sandbox_default_params();
    argv[0] = w->exe ? w->exe : self_path, argv[1] = "--hostile", argv[2] = w->mode;
    argv[3] = w->arg ? w->arg : "", argv[4] = NULL;
    p.argv = argv;
    for (int i = 0; i < 4 && w->read[i]; i++) p.read_paths[p.n_read++] = w->read[i];
    for (int i = 0; i < 4 && w->write[i]; i++) p.write_paths[p.n_write++] = w->write[i];
    p.timeout_s = 20;
#ifdef __SANITIZE_ADDRESS__
    p.max_memory = 0; /* ASan's shadow memory needs terabytes of addresses */
#endif
    return p;
}

/* Runs the hostile tool confined: its exit code, or -1 if the sandbox
 * refused to start it (err says why). */
static int confined(const run *w, hx_err *err)
{
    const char *argv[5];
    hx_sandbox_params p = params_of(w, argv);
    hx_sandbox_result r;
    if (hx_sandbox_run(&p, NULL, 0, &r, err)) return -1;
    int code = r.exited ? r.exit_code : 128 + r.term_signal;
    if (code != ESCAPED && code != STOPPED && r.err_len) printf("     tool stderr: %s\n", r.err);
    hx_sandbox_result_free(&r);
    return code;
}

static int confined_ok(const run *w)
{
    hx_err e = {0};
    int code = confined(w, &e);
    if (code < 0) printf("     sandbox refused %s: %s\n", w->mode, e.msg);
    return code;
}

/* The same tool, not confined: a plain fork and exec (the control). */
static int unconfined(const char *mode, const char *arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(self_path, self_path, "--hostile", mode, arg, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs fn in a child process (for what cannot be undone: seccomp on
 * oneself, namespaces), returning its exit code. */
static int in_child(int (*fn)(void *), void *arg)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(fn(arg));
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void path_in(char *buf, size_t n, const char *rel)
{
    snprintf(buf, n, "%s/%s", dir, rel);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
    chmod(path, 0644);
}

/* ---- 1: listed paths are never resolved through a link ---- */

static void test_listed_link_refused(void)
{
    char link[PATH_MAX + 16], home_key[PATH_MAX + 32], real[PATH_MAX + 16];
    path_in(link, sizeof link, "work/notes");
    path_in(home_key, sizeof home_key, "work/notes/id_ed25519");
    path_in(real, sizeof real, "home/.ssh");
    ASSERT(symlink(real, link) == 0); /* planted by a tool that writes work/ */
    run w = {.mode = "read", .arg = home_key, .read = {link}};
    hx_err e = {0};
    EXPECT_EQ_INT(confined(&w, &e), -1);
    EXPECT(strstr(e.msg, "symbolic link") != NULL);
    unlink(link);
    /* a link in the middle of a path too */
    path_in(link, sizeof link, "work/h");
    ASSERT(symlink("../home", link) == 0);
    path_in(home_key, sizeof home_key, "work/h/.ssh");
    run w2 = {.mode = "read", .arg = "/nonexistent", .read = {home_key}};
    EXPECT_EQ_INT(confined(&w2, &e), -1);
    EXPECT(strstr(e.msg, "work/h is a symbolic link") != NULL);
    unlink(link);
    /* the control: the real folder, listed, is readable */
    path_in(home_key, sizeof home_key, "home/.ssh/id_ed25519");
    run ok = {.mode = "read", .arg = home_key, .read = {real}};
    EXPECT_EQ_INT(confined_ok(&ok), ESCAPED);
}

static void test_nested_and_forbidden_paths_refused(void)
{
    char work[PATH_MAX], inner[PATH_MAX + 16], file[PATH_MAX + 16];
    path_in(work, sizeof work, "work");
    path_in(inner, sizeof inner, "work/sub");
    mkdir(inner, 0755);
    path_in(file, sizeof file, "work/sub/f");
    write_text(file, "data");
    hx_err e = {0};
    run nested = {.mode = "read", .arg = file, .read = {inner}, .write = {work}};
    EXPECT_EQ_INT(confined(&nested, &e), -1);
    EXPECT(strstr(e.msg, "inside the write path") != NULL);
    run dev = {.mode = "read", .arg = "/dev/tty", .read = {"/dev/tty"}};
    EXPECT_EQ_INT(confined(&dev, &e), -1);
    EXPECT(strstr(e.msg, "/dev, /proc and /sys") != NULL);
    run root = {.mode = "read", .arg = "/etc/hostname", .read = {"/"}};
    EXPECT_EQ_INT(confined(&root, &e), -1);
    run dots = {.mode = "read", .arg = file, .read = {"/tmp/../etc"}};
    EXPECT_EQ_INT(confined(&dots, &e), -1);
    /* the control: the inner folder alone is readable */
    run ok = {.mode = "read", .arg = file, .read = {inner}};
    EXPECT_EQ_INT(confined_ok(&ok), ESCAPED);
}

/* ---- 2: the command's folder is not granted ---- */

static void test_command_folder_not_granted(void)
{
    char bin[PATH_MAX + 16], tool[PATH_MAX + 32], secret[PATH_MAX + 32], cmd[3 * PATH_MAX];
    path_in(bin, sizeof bin, "bin");
    path_in(tool, sizeof tool, "bin/helper");
    path_in(secret, sizeof secret, "bin/secret.txt");
    mkdir(bin, 0755);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", self_path, tool);
    ASSERT(system(cmd) == 0);
    write_text(secret, "the folder's other files");
    run w = {.mode = "read", .arg = secret, .exe = tool};
    EXPECT_EQ_INT(confined_ok(&w), STOPPED); /* it ran: its command file was granted */
    run listing = {.mode = "read", .arg = bin, .exe = tool};
    EXPECT_EQ_INT(confined_ok(&listing), STOPPED);
    /* the control: the folder, listed, is readable */
    run ok = {.mode = "read", .arg = secret, .read = {bin}, .exe = tool};
    EXPECT_EQ_INT(confined_ok(&ok), ESCAPED);
    /* a command inside a write path, or a link there to one outside: the
     * tool could replace it, or point it at any file, for its next run */
    char work[PATH_MAX], link[PATH_MAX + 16];
    path_in(work, sizeof work, "work");
    path_in(link, sizeof link, "work/tool");
    ASSERT(symlink(tool, link) == 0);
    hx_err e = {0};
    run moved = {.mode = "read", .arg = secret, .write = {work}, .exe = link};
    EXPECT_EQ_INT(confined(&moved, &e), -1);
    EXPECT(strstr(e.msg, "tool command") && strstr(e.msg, "inside the write path"));
    unlink(link);
    run beside = {.mode = "read", .arg = secret, .write = {work}, .exe = tool};
    EXPECT_EQ_INT(confined_ok(&beside), STOPPED); /* the control: it runs */
}

/* ---- 3: no host sockets ---- */

static int listen_unix(const char *path, int type)
{
    struct sockaddr_un a;
    socklen_t len = (socklen_t)unix_addr(path, &a);
    int s = socket(AF_UNIX, type, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, len)) return -1;
    chmod(path, 0777);
    return type == SOCK_STREAM && listen(s, 8) ? -1 : s;
}

static void test_host_sockets_unreachable(void)
{
    char agent[PATH_MAX + 16], work[PATH_MAX], listed[PATH_MAX + 16], journal[PATH_MAX + 16];
    path_in(agent, sizeof agent, "run/agent.sock"); /* like ssh-agent, not listed */
    path_in(work, sizeof work, "work");
    path_in(listed, sizeof listed, "work/bus.sock"); /* in a listed folder */
    path_in(journal, sizeof journal, "run/journal.sock");
    int s1 = listen_unix(agent, SOCK_STREAM), s2 = listen_unix(listed, SOCK_STREAM);
    int s3 = listen_unix(journal, SOCK_DGRAM);
    ASSERT(s1 >= 0 && s2 >= 0 && s3 >= 0);
    /* the controls: unconfined, each is reachable */
    EXPECT_EQ_INT(unconfined("connect", agent), ESCAPED);
    EXPECT_EQ_INT(unconfined("connect", listed), ESCAPED);
    EXPECT_EQ_INT(unconfined("dgram", journal), ESCAPED);
    run a = {.mode = "connect", .arg = agent, .write = {work}};
    run b = {.mode = "connect", .arg = listed, .write = {work}};
    run c = {.mode = "dgram", .arg = journal, .write = {work}};
    run pair = {.mode = "pair", .write = {work}};
    EXPECT_EQ_INT(confined_ok(&a), STOPPED);
    EXPECT_EQ_INT(confined_ok(&b), STOPPED);
    EXPECT_EQ_INT(confined_ok(&c), STOPPED);
    EXPECT_EQ_INT(confined_ok(&pair), ESCAPED); /* a stream pair still works */
    /* each layer alone: seccomp refuses socket(); the mount namespace
     * hides what is not listed */
    setenv("HEARTH_SANDBOX_DISABLE", "namespaces,landlock", 1);
    EXPECT_EQ_INT(confined_ok(&a), STOPPED);
    EXPECT_EQ_INT(confined_ok(&b), STOPPED);
    EXPECT_EQ_INT(confined_ok(&c), STOPPED);
    EXPECT_EQ_INT(confined_ok(&pair), ESCAPED);
    setenv("HEARTH_SANDBOX_DISABLE", "seccomp,landlock", 1);
    EXPECT_EQ_INT(confined_ok(&a), STOPPED);
    unsetenv("HEARTH_SANDBOX_DISABLE");
    close(s1), close(s2), close(s3);
}

/* ---- 4: no typing into the user's terminal ---- */

typedef struct tty_case {
    int master, slave;
    const char *disable; /* HEARTH_SANDBOX_DISABLE, or NULL */
    int confine;
} tty_case;

/* In a session whose controlling terminal is the pty (the user's shell). */
static int tty_session(void *arg)
{
    const tty_case *t = arg;
    if (setsid() < 0 || ioctl(t->slave, TIOCSCTTY, 0)) return 3;
    if (!t->confine) {
        execl(self_path, self_path, "--hostile", "tiocsti", "", (char *)NULL);
        return 4;
    }
    if (t->disable) setenv("HEARTH_SANDBOX_DISABLE", t->disable, 1);
    run w = {.mode = "tiocsti", .arg = ""};
    return confined_ok(&w);
}

static int open_pty(tty_case *t)
{
    t->master = posix_openpt(O_RDWR | O_NOCTTY);
    if (t->master < 0 || grantpt(t->master) || unlockpt(t->master)) return -1;
    t->slave = open(ptsname(t->master), O_RDWR | O_NOCTTY);
    struct termios tio;
    if (t->slave < 0 || tcgetattr(t->slave, &tio)) return -1;
    cfmakeraw(&tio);
    return tcsetattr(t->slave, TCSANOW, &tio);
}

/* The tool filter alone, in a process that has the terminal. */
static int filtered_tiocsti(void *arg)
{
    const tty_case *t = arg;
    sb_filter f;
    hx_sb_seccomp_build(&f, SB_SC_TOOL | SB_SC_NO_NET);
    if (setsid() < 0 || ioctl(t->slave, TIOCSCTTY, 0) ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || hx_sb_seccomp_install(&f, 0))
        return 3;
    unsigned long high = 0x100000000UL | TIOCSTI; /* the kernel reads 32 bits */
    int plain = ioctl(t->slave, TIOCSTI, "x") < 0 && errno == EPERM;
    int wide = syscall(SYS_ioctl, t->slave, high, "x") < 0 && errno == EPERM;
    return plain && wide ? STOPPED : ESCAPED;
}

static void test_no_terminal_injection(void)
{
    tty_case t = {0};
    ASSERT(open_pty(&t) == 0);
    int control = in_child(tty_session, &t);
    if (control != ESCAPED) SKIP("TIOCSTI does not work here (dev.tty.legacy_tiocsti=0?)");
    char c;
    EXPECT(read(t.slave, &c, 1) == 1 && c == 'x'); /* the control typed it */
    t.confine = 1;
    EXPECT_EQ_INT(in_child(tty_session, &t), STOPPED);
    t.disable = "namespaces,landlock"; /* /dev/tty exists: setsid and seccomp */
    EXPECT_EQ_INT(in_child(tty_session, &t), STOPPED);
    t.disable = "namespaces,landlock,seccomp"; /* setsid alone */
    EXPECT_EQ_INT(in_child(tty_session, &t), STOPPED);
    EXPECT_EQ_INT(in_child(filtered_tiocsti, &t), STOPPED); /* seccomp alone */
    close(t.master), close(t.slave);
}

/* ---- 5: Hearth's own filter: io_uring, every thread, every family ---- */

static int tcp_listener(char *port, size_t n)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 8)) return -1;
    getsockname(s, (struct sockaddr *)&a, &len);
    snprintf(port, n, "%d", ntohs(a.sin_port));
    return s;
}

static int uring_after_confine(void *port)
{
    hx_err e;
    if (hx_sandbox_confine_self_no_network(&e)) return 3;
    return hostile("uring", port);
}

static int uring_plain(void *port) { return hostile("uring", port); }

static void test_self_io_uring_refused(void)
{
    char port[16];
    int l = tcp_listener(port, sizeof port);
    ASSERT(l >= 0);
    int control = in_child(uring_plain, port);
    if (control != ESCAPED) {
        close(l);
        SKIP("io_uring cannot connect here (kernel.io_uring_disabled?)");
    }
    EXPECT_EQ_INT(in_child(uring_after_confine, port), STOPPED);
    close(l);
}

static int gate[2];

/* A thread started before the filter: it waits, then tries a socket. */
static void *late_socket(void *arg)
{
    char c;
    int *result = arg;
    if (read(gate[0], &c, 1) != 1) return NULL;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    *result = s < 0 && errno == EACCES ? STOPPED : ESCAPED;
    return NULL;
}

static int thread_after_confine(void *unused)
{
    (void)unused;
    pthread_t th;
    int result = 0;
    hx_err e;
    if (pipe(gate) || pthread_create(&th, NULL, late_socket, &result)) return 3;
    if (hx_sandbox_confine_self_no_network(&e)) return 4;
    if (write(gate[1], "g", 1) != 1 || pthread_join(th, NULL)) return 5;
    int u = socket(AF_UNIX, SOCK_STREAM, 0), sv[2];
    int pair = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    /* the unix socket is refused like the others; a stream pair works */
    return result == STOPPED && u < 0 && pair == 0 ? STOPPED : ESCAPED;
}

static int thread_plain(void *unused)
{
    (void)unused;
    pthread_t th;
    int result = 0;
    if (pipe(gate) || pthread_create(&th, NULL, late_socket, &result)) return 3;
    if (write(gate[1], "g", 1) != 1 || pthread_join(th, NULL)) return 5;
    return result;
}

static void test_self_filter_on_every_thread(void)
{
    EXPECT_EQ_INT(in_child(thread_plain, NULL), ESCAPED); /* the control */
    EXPECT_EQ_INT(in_child(thread_after_confine, NULL), STOPPED);
}

/* ---- 6: inherited descriptors close even without close_range ---- */

/* close_range() fails with ENOSYS, as on kernels before 5.11. */
static int no_close_range(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_close_range, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof *f, f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
           syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

static char leaked_path[PATH_MAX + 32];

/* Hearth with a secret open without O_CLOEXEC, on an old kernel. */
static int leak_and_spawn(void *mode)
{
    int fd = open(leaked_path, O_RDONLY);
    char arg[16];
    snprintf(arg, sizeof arg, "%d", fd);
    if (fd < 0 || no_close_range()) return 3;
    if (!strcmp(mode, "unconfined")) return unconfined("fd", arg);
    run w = {.mode = "fd", .arg = arg};
    hx_err e = {0};
    int code = confined(&w, &e);
    if (code < 0) printf("     %s\n", e.msg);
    return code < 0 && strstr(e.msg, "closing inherited descriptors") ? 99 : code;
}

/* ... and without /proc either: the spawn fails. */
static int leak_without_proc(void *unused)
{
    (void)unused;
    char map[32];
    unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
    if (uid && unshare(CLONE_NEWUSER | CLONE_NEWNS)) return 4;
    if (!uid && unshare(CLONE_NEWNS)) return 4;
    if (uid) {
        int fds[3] = {open("/proc/self/setgroups", O_WRONLY), -1, -1};
        if (fds[0] < 0 || write(fds[0], "deny", 4) != 4) return 5;
        snprintf(map, sizeof map, "%u %u 1", gid, gid);
        fds[1] = open("/proc/self/gid_map", O_WRONLY);
        if (fds[1] < 0 || write(fds[1], map, strlen(map)) < 0) return 5;
        snprintf(map, sizeof map, "%u %u 1", uid, uid);
        fds[2] = open("/proc/self/uid_map", O_WRONLY);
        if (fds[2] < 0 || write(fds[2], map, strlen(map)) < 0) return 5;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
        mount("none", "/proc", "tmpfs", 0, NULL))
        return 6;
    return leak_and_spawn("confined");
}

static void test_descriptors_closed_without_close_range(void)
{
    path_in(leaked_path, sizeof leaked_path, "home/.ssh/id_ed25519");
    EXPECT_EQ_INT(in_child(leak_and_spawn, "unconfined"), ESCAPED); /* the control */
    EXPECT_EQ_INT(in_child(leak_and_spawn, "confined"), STOPPED);
    EXPECT_EQ_INT(in_child(leak_without_proc, NULL), 99);
}

/* ---- what is applied, and the degraded paths ---- */

static void test_mount_namespace_reported(void)
{
    char work[PATH_MAX];
    path_in(work, sizeof work, "work");
    const char *argv[5];
    run w = {.mode = "pair", .write = {work}};
    hx_sandbox_params p = params_of(&w, argv);
    hx_sandbox_result r;
    hx_err e;
    ASSERT(hx_sandbox_run(&p, NULL, 0, &r, &e) == HX_OK);
    EXPECT(r.applied & HX_SB_MNTNS);
    EXPECT(r.applied & HX_SB_PIDNS);
    EXPECT(hx_sandbox_available() & HX_SB_MNTNS);
    EXPECT((r.applied & HX_SB_USERNS) == (geteuid() ? HX_SB_USERNS : 0u));
    hx_sandbox_result_free(&r);
    hx_buf g;
    hx_buf_init(&g);
    hx_sandbox_describe_grants(&p, &g);
    EXPECT(strstr(g.data, self_path) && strstr(g.data, work));
    hx_buf_free(&g);
}

/* ---- setup, and the second pass as an ordinary user ---- */

static int setup_dirs(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-escapes-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    chmod(dir, 0755);
    const char *sub[] = {"home", "home/.ssh", "work", "run"};
    char p[PATH_MAX + 32];
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
        path_in(p, sizeof p, sub[i]);
        if (mkdir(p, 0755)) return -1;
        chmod(p, i == 2 ? 0777 : 0755);
    }
    path_in(p, sizeof p, "home/.ssh/id_ed25519");
    write_text(p, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    return 0;
}

static void test_as_ordinary_user(void) { test_again_as_user(self_path); }

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--hostile")) {
        in_tool_mode = 1;
        return hostile(argv[2], argc > 3 ? argv[3] : "");
    }
    if (!realpath(argv[0], self_path) || setup_dirs()) {
        printf("FAIL setup: cannot create test folders\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    RUN(test_listed_link_refused);
    RUN(test_nested_and_forbidden_paths_refused);
    RUN(test_command_folder_not_granted);
    RUN(test_host_sockets_unreachable);
    RUN(test_no_terminal_injection);
    RUN(test_self_io_uring_refused);
    RUN(test_self_filter_on_every_thread);
    RUN(test_descriptors_closed_without_close_range);
    RUN(test_mount_namespace_reported);
    if (test_wants_user_pass()) RUN(test_as_ordinary_user);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return test_summary();
}
