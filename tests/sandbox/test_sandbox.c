/* test_sandbox.c: escape tests. This binary is also each hostile tool: run
 * with "--hostile MODE" it tries one escape (read a secret, write outside,
 * open a TCP socket, fork without end, spin, flood stdout, ptrace its
 * parent, mount) and reports what it managed through its exit code. The
 * tests run it confined and check that every attempt was stopped, and that
 * a well-behaved tool still works. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "test.h"

#ifdef __SANITIZE_ADDRESS__
const char *__asan_default_options(void);
/* The leak checker stops the world with ptrace, which the sandbox kills,
 * and a confined child cannot read its own environment: so the hostile
 * child (nobody, uid 65534, in the sandbox) runs without it. */
const char *__asan_default_options(void)
{
    return getuid() == 65534 ? "detect_leaks=0" : "";
}
#endif

/* exit codes of the hostile modes */
enum { ESCAPED = 42, STOPPED = 7 };

static char self_path[PATH_MAX];
static char root_dir[PATH_MAX], secret_dir[PATH_MAX], work_dir[PATH_MAX];

static int hostile(const char *mode, const char *arg)
{
    if (!strcmp(mode, "read")) {
        int fd = open(arg, O_RDONLY);
        return fd >= 0 ? ESCAPED : STOPPED;
    }
    if (!strcmp(mode, "write")) {
        int fd = open(arg, O_WRONLY | O_CREAT, 0644);
        return fd >= 0 ? ESCAPED : STOPPED;
    }
    if (!strcmp(mode, "tcp")) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) return STOPPED;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(arg))};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return connect(s, (struct sockaddr *)&a, sizeof a) == 0 ? ESCAPED : STOPPED;
    }
    if (!strcmp(mode, "forkbomb")) {
        for (;;) fork();
    }
    if (!strcmp(mode, "spin")) {
        for (volatile unsigned long i = 0;; i++) {
        }
    }
    if (!strcmp(mode, "flood")) {
        static char buf[1 << 16];
        memset(buf, 'x', sizeof buf);
        for (;;)
            if (write(1, buf, sizeof buf) < 0) return STOPPED;
    }
    if (!strcmp(mode, "ptrace")) {
        return ptrace(PTRACE_ATTACH, getppid(), 0, 0) == 0 ? ESCAPED : STOPPED;
    }
    if (!strcmp(mode, "mount")) {
        return mount("none", "/tmp", "tmpfs", 0, NULL) == 0 ? ESCAPED : STOPPED;
    }
    if (!strcmp(mode, "good")) { /* reads its input, writes in its folder */
        char buf[256] = {0}, path[PATH_MAX];
        ssize_t n = read(0, buf, sizeof buf - 1);
        snprintf(path, sizeof path, "%s/out.txt", arg);
        FILE *f = fopen(path, "w");
        if (!f || n <= 0) return 1;
        fputs(buf, f);
        fclose(f);
        printf("{\"echo\": %s}\n", buf);
        return 0;
    }
    return 2;
}

static hx_sandbox_params params_for(const char *mode, const char *arg)
{
    static const char *argv[5];
    argv[0] = self_path, argv[1] = "--hostile", argv[2] = mode, argv[3] = arg, argv[4] = NULL;
    hx_sandbox_params p = hx_sandbox_default_params();
    p.argv = argv;
    p.write_paths[p.n_write++] = work_dir;
    p.timeout_s = 3;
    p.cpu_s = 5;
    p.max_output = 1 << 20;
#ifdef __SANITIZE_ADDRESS__
    p.max_memory = 0; /* ASan's shadow memory needs terabytes of addresses */
#endif
    return p;
}

static int run_mode(const char *mode, const char *arg, hx_sandbox_result *r)
{
    hx_sandbox_params p = params_for(mode, arg);
    hx_err e;
    int rc = hx_sandbox_run(&p, NULL, 0, r, &e);
    if (rc) printf("     sandbox error: %s\n", e.msg);
    return rc;
}

static void expect_stopped(const char *mode, const char *arg)
{
    hx_sandbox_result r;
    ASSERT(run_mode(mode, arg, &r) == HX_OK);
    int stopped = !(r.exited && r.exit_code == ESCAPED);
    if (!stopped) printf("     %s escaped the sandbox\n", mode);
    EXPECT(stopped);
    hx_sandbox_result_free(&r);
}

static void test_good_tool_runs(void)
{
    hx_sandbox_params p = params_for("good", work_dir);
    hx_sandbox_result r;
    hx_err e;
    ASSERT(hx_sandbox_run(&p, "\"hi\"", 4, &r, &e) == HX_OK);
    EXPECT(r.exited && r.exit_code == 0);
    if (r.err_len) printf("     tool stderr: %s\n", r.err);
    EXPECT_STR_EQ(r.out, "{\"echo\": \"hi\"}\n");
    char buf[512];
    printf("     applied: %s\n", hx_sandbox_describe(r.applied, buf, sizeof buf));
    EXPECT(r.applied & HX_SB_SECCOMP);
    hx_sandbox_result_free(&r);
}

static void test_reports_what_was_applied(void)
{
    hx_sandbox_result r;
    ASSERT(run_mode("good", work_dir, &r) == HX_OK);
    if (hx_sandbox_landlock_abi()) EXPECT(r.applied & HX_SB_LANDLOCK);
    EXPECT(r.applied & HX_SB_NO_NEW_PRIVS);
    EXPECT(r.applied & HX_SB_RLIMITS);
    hx_sandbox_result_free(&r);
}

static void test_cannot_read_outside(void)
{
    if (!hx_sandbox_landlock_abi()) SKIP("Landlock unavailable on this kernel");
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/id_ed25519", secret_dir);
    expect_stopped("read", path);
    expect_stopped("read", "/etc/shadow");
}

/* The control: the same read succeeds when the folder is listed, so the
 * test above can tell an escape from a broken test tool. */
static void test_listed_folder_readable(void)
{
    hx_sandbox_params p = params_for("read", NULL);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/id_ed25519", secret_dir);
    const char *argv[] = {self_path, "--hostile", "read", path, NULL};
    p.argv = argv;
    p.read_paths[p.n_read++] = secret_dir;
    hx_sandbox_result r;
    hx_err e;
    ASSERT(hx_sandbox_run(&p, NULL, 0, &r, &e) == HX_OK);
    EXPECT(r.exited && r.exit_code == ESCAPED);
    hx_sandbox_result_free(&r);
}

static void test_cannot_write_outside(void)
{
    if (!hx_sandbox_landlock_abi()) SKIP("Landlock unavailable on this kernel");
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/planted", secret_dir);
    expect_stopped("write", path);
    EXPECT(access(path, F_OK) != 0);
}

static void test_no_network(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT(s >= 0);
    ASSERT(bind(s, (struct sockaddr *)&a, sizeof a) == 0 && listen(s, 4) == 0);
    getsockname(s, (struct sockaddr *)&a, &len);
    char port[16];
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    expect_stopped("tcp", port);
    close(s);
}

static void test_fork_bomb_contained(void)
{
    hx_sandbox_result r;
    ASSERT(run_mode("forkbomb", "", &r) == HX_OK);
    /* it never ends by itself: the wall-clock timeout (or the CPU limit)
     * ends it, and the whole tree goes with the PID namespace */
    EXPECT(r.timed_out || r.term_signal == SIGKILL || r.term_signal == SIGXCPU);
    EXPECT(!r.exited);
    hx_sandbox_result_free(&r);
    /* nothing of the tree survives (the kernel tears it down right after) */
    int left = 1;
    for (int i = 0; i < 50 && left; i++) {
        left = system("test -z \"$(pgrep -f -- '[-]-hostile forkbomb')\"") != 0;
        if (left) usleep(100000);
    }
    EXPECT(!left);
}

static void test_spin_killed_by_timeout(void)
{
    hx_sandbox_result r;
    ASSERT(run_mode("spin", "", &r) == HX_OK);
    EXPECT(r.timed_out || r.term_signal == SIGXCPU || r.term_signal == SIGKILL);
    EXPECT(!r.exited);
    hx_sandbox_result_free(&r);
}

static void test_flood_capped(void)
{
    hx_sandbox_result r;
    ASSERT(run_mode("flood", "", &r) == HX_OK);
    EXPECT(r.output_exceeded);
    EXPECT(r.out_len <= (size_t)1 << 20);
    hx_sandbox_result_free(&r);
}

static void test_ptrace_and_mount_stopped(void)
{
    hx_sandbox_result r;
    ASSERT(run_mode("ptrace", "", &r) == HX_OK);
    EXPECT(r.term_signal == SIGSYS || (r.exited && r.exit_code == STOPPED));
    hx_sandbox_result_free(&r);
    ASSERT(run_mode("mount", "", &r) == HX_OK);
    EXPECT(r.term_signal == SIGSYS || (r.exited && r.exit_code == STOPPED));
    hx_sandbox_result_free(&r);
}

/* Without Landlock, namespaces and seccomp (old kernels), tools still run
 * with what is left, the result says what was applied, and Hearth warns
 * once per process. */
static void test_degrades_and_says_so_once(void)
{
    char log[] = "/tmp/hx-sb-warn-XXXXXX";
    int fd = mkstemp(log), saved = dup(2);
    ASSERT(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    setenv("HEARTH_SANDBOX_DISABLE", "landlock,namespaces,seccomp", 1);
    hx_sandbox_result r1, r2;
    hx_sandbox_params p = params_for("good", work_dir);
    hx_err e1;
    int rc1 = hx_sandbox_run(&p, "1", 1, &r1, &e1), rc2 = hx_sandbox_run(&p, "2", 1, &r2, &e1);
    unsetenv("HEARTH_SANDBOX_DISABLE");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    ASSERT(rc1 == HX_OK && rc2 == HX_OK);
    EXPECT(r1.exited && r1.exit_code == 0);
    EXPECT(!(r1.applied & (HX_SB_LANDLOCK | HX_SB_NETNS | HX_SB_PIDNS | HX_SB_SECCOMP)));
    EXPECT(r1.applied & HX_SB_NO_NEW_PRIVS);
    EXPECT(r1.applied & HX_SB_RLIMITS);
    hx_sandbox_result_free(&r1);
    hx_sandbox_result_free(&r2);
    char *text;
    size_t n;
    hx_err e;
    ASSERT(hx_read_file(log, 0, &text, &n, &e) == HX_OK);
    char *first = strstr(text, "sandbox is partial");
    EXPECT(first != NULL);
    EXPECT(first && strstr(first + 1, "sandbox is partial") == NULL);
    free(text);
    unlink(log);
}

static void test_missing_command(void)
{
    const char *argv[] = {"/nonexistent/tool", NULL};
    hx_sandbox_params p = hx_sandbox_default_params();
    p.argv = argv;
    hx_sandbox_result r;
    hx_err e;
    EXPECT(hx_sandbox_run(&p, NULL, 0, &r, &e) == HX_ERR_NOTFOUND);
    EXPECT(strstr(e.msg, "/nonexistent/tool") != NULL);
}

static void test_self_no_network(void)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        hx_err e;
        if (hx_sandbox_confine_self_no_network(&e)) _exit(3);
        int s = socket(AF_INET, SOCK_STREAM, 0), sv[2];
        int u = socket(AF_UNIX, SOCK_STREAM, 0), u_errno = errno;
        int pair = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
        _exit(s < 0 && u < 0 && u_errno == EACCES && pair == 0 ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* HEARTH_SANDBOX_DISABLE=seccomp (qemu-user has no seccomp) makes the
 * self-confinement a no-op that succeeds: sockets still open. */
static void test_self_no_network_disabled(void)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        hx_err e;
        setenv("HEARTH_SANDBOX_DISABLE", "namespaces,seccomp", 1);
        if (!hx_sandbox_mechanism_disabled("seccomp") || hx_sandbox_mechanism_disabled("secc") ||
            hx_sandbox_mechanism_disabled("landlock"))
            _exit(4);
        if (hx_sandbox_confine_self_no_network(&e)) _exit(3);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        _exit(s >= 0 ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Folders a tool run as nobody can use: 0755 root, secret 0755 too (so
 * that only Landlock, not file modes, keeps the tool out). */
static int setup_dirs(void)
{
    snprintf(root_dir, sizeof root_dir, "/tmp/hx-sandbox-XXXXXX");
    if (!mkdtemp(root_dir)) return -1;
    chmod(root_dir, 0755);
    snprintf(secret_dir, sizeof secret_dir, "%s/home/.ssh", root_dir);
    snprintf(work_dir, sizeof work_dir, "%s/work", root_dir);
    hx_err e;
    if (hx_mkdirs(secret_dir, &e) || hx_mkdirs(work_dir, &e)) return -1;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/home", root_dir);
    chmod(p, 0755);
    chmod(secret_dir, 0755);
    chmod(work_dir, 0777);
    snprintf(p, sizeof p, "%s/id_ed25519", secret_dir);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fputs("-----BEGIN OPENSSH PRIVATE KEY-----\n", f);
    fclose(f);
    chmod(p, 0644);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--hostile"))
        return hostile(argv[2], argc > 3 ? argv[3] : "");
    if (!realpath(argv[0], self_path)) return 1;
    if (setup_dirs()) {
        printf("FAIL setup: cannot create test folders\n");
        return 1;
    }
    RUN(test_good_tool_runs);
    RUN(test_reports_what_was_applied);
    RUN(test_cannot_read_outside);
    RUN(test_listed_folder_readable);
    RUN(test_cannot_write_outside);
    RUN(test_no_network);
    RUN(test_fork_bomb_contained);
    RUN(test_spin_killed_by_timeout);
    RUN(test_flood_capped);
    RUN(test_ptrace_and_mount_stopped);
    RUN(test_missing_command);
    RUN(test_degrades_and_says_so_once);
    RUN(test_self_no_network);
    RUN(test_self_no_network_disabled);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root_dir);
    if (system(cmd)) return 1;
    return test_summary();
}
