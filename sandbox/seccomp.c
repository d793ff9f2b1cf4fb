/* seccomp.c: the seccomp-bpf deny list of tool processes, and the filter
 * Hearth puts on itself (no network, on every thread). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <string.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox_int.h"

#if defined(__x86_64__)
#define SB_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SB_ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp filter: unsupported architecture"
#endif

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

#define STMT(code, k) ((struct sock_filter)BPF_STMT(code, k))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP(code, k, jt, jf))
#define LD_OFF(off) STMT(BPF_LD | BPF_W | BPF_ABS, (unsigned)(off))
/* the low 32 bits of an argument (little-endian: at its offset) */
#define LD_ARG(i) LD_OFF(offsetof(struct seccomp_data, args[i]))
#define LD_NR LD_OFF(offsetof(struct seccomp_data, nr))
#define RET(v) STMT(BPF_RET | BPF_K, v)

/* Calls a tool never needs and an attacker wants: a tool is killed,
 * Hearth itself refused (EPERM). ptrace must stay first: sanitizer builds
 * of Hearth keep it, their leak checker stops the process's threads with
 * it at exit. */
static const int danger_list[] = {
    __NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev,
    __NR_init_module, __NR_finit_module, __NR_delete_module,
    __NR_kexec_load, __NR_kexec_file_load, __NR_swapon, __NR_swapoff,
    __NR_reboot, __NR_add_key, __NR_request_key, __NR_keyctl, __NR_bpf,
    __NR_open_by_handle_at, __NR_acct, __NR_quotactl, __NR_settimeofday,
    __NR_clock_settime, __NR_clock_adjtime, __NR_chroot,
#ifdef __NR_iopl
    __NR_iopl, __NR_ioperm,
#endif
};

/* Refused with EPERM: probing them is common and harmless. */
static const int probe_list[] = {
    __NR_perf_event_open, __NR_userfaultfd, __NR_name_to_handle_at, __NR_vhangup,
};

/* What Hearth's sandbox uses to start a tool, refused to the tool. */
static const int confine_kill_list[] = {
    __NR_mount, __NR_umount2, __NR_pivot_root,
#ifdef __NR_fsopen
    __NR_fsopen, __NR_fsmount, __NR_move_mount, __NR_open_tree, __NR_fsconfig,
    __NR_fspick,
#endif
};
static const int confine_eperm_list[] = {__NR_unshare, __NR_setns};

static const int io_uring_list[] = {
#ifdef __NR_io_uring_setup
    __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
#endif
    -1,
};

static void emit(sb_filter *f, struct sock_filter s)
{
    HX_CHECK(f->n < sizeof f->insns / sizeof f->insns[0]);
    f->insns[f->n++] = s;
}

/* if (nr == n) return ret; assumes nr is loaded */
static void match_nr(sb_filter *f, int n, unsigned ret)
{
    emit(f, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)n, 0, 1));
    emit(f, RET(ret));
}

static void refuse_all(sb_filter *f, const int *nrs, size_t n, unsigned ret)
{
    for (size_t i = 0; i < n; i++)
        if (nrs[i] >= 0) match_nr(f, nrs[i], ret);
}

#define N_OF(a) (sizeof a / sizeof *a)

/* clone(): no new namespaces; clone3() passes its flags in memory the
 * filter cannot read: ENOSYS makes libc fall back to clone. */
static void no_namespaces(sb_filter *f)
{
#ifdef __NR_clone3
    match_nr(f, __NR_clone3, SECCOMP_RET_ERRNO | ENOSYS);
#endif
    const unsigned ns_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                              CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                              CLONE_NEWCGROUP;
    emit(f, JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4));
    emit(f, LD_ARG(0));
    emit(f, JUMP(BPF_JMP | BPF_JSET | BPF_K, ns_flags, 0, 1));
    emit(f, RET(SECCOMP_RET_ERRNO | EPERM));
    emit(f, LD_NR);
}

/* if (nr == n) { x = arg i & mask; if ((x == a || x == b) == in) return ret; }
 * assumes nr is loaded, and reloads it */
static void match_arg(sb_filter *f, int n, int i, unsigned mask, unsigned a, unsigned b,
                      int in, unsigned ret)
{
    emit(f, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)n, 0, 5));
    emit(f, LD_ARG(i));
    emit(f, STMT(BPF_ALU | BPF_AND | BPF_K, mask));
    emit(f, JUMP(BPF_JMP | BPF_JEQ | BPF_K, a, in ? 1 : 2, 0));
    emit(f, JUMP(BPF_JMP | BPF_JEQ | BPF_K, b, in ? 0 : 1, in ? 1 : 0));
    emit(f, RET(ret));
    emit(f, LD_NR);
}

/* ioctl(fd, TIOCSTI or TIOCLINUX): typing into a terminal. The kernel
 * reads the command as 32 bits, so the low word is what counts. */
static void no_terminal_injection(sb_filter *f)
{
    match_arg(f, __NR_ioctl, 1, 0xffffffffu, TIOCSTI, TIOCLINUX, 1, SECCOMP_RET_ERRNO | EPERM);
}

/* socket(AF_UNIX, ...) refused: pathname sockets reach host services
 * (D-Bus, ssh-agent, docker) that no mount namespace may hide. */
static void no_unix_socket(sb_filter *f)
{
    match_arg(f, __NR_socket, 0, 0xffffffffu, AF_UNIX, AF_UNIX, 1, SECCOMP_RET_ERRNO | EACCES);
}

/* socketpair(): stream and seqpacket pairs only (the type without
 * SOCK_CLOEXEC and SOCK_NONBLOCK); a datagram socket could sendto() any
 * socket path. */
static void connected_pairs_only(sb_filter *f)
{
    match_arg(f, __NR_socketpair, 1, 0xf, SOCK_STREAM, SOCK_SEQPACKET, 0,
              SECCOMP_RET_ERRNO | EACCES);
}

static void tool_list(sb_filter *f)
{
    refuse_all(f, danger_list, N_OF(danger_list), SECCOMP_RET_KILL_PROCESS);
    refuse_all(f, confine_kill_list, N_OF(confine_kill_list), SECCOMP_RET_KILL_PROCESS);
    refuse_all(f, probe_list, N_OF(probe_list), SECCOMP_RET_ERRNO | EPERM);
    refuse_all(f, confine_eperm_list, N_OF(confine_eperm_list), SECCOMP_RET_ERRNO | EPERM);
    refuse_all(f, io_uring_list, N_OF(io_uring_list), SECCOMP_RET_ERRNO | EPERM);
    no_namespaces(f);
    no_unix_socket(f);
}

static void self_list(sb_filter *f)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    size_t first = 1; /* ptrace: the leak checker */
#else
    size_t first = 0;
#endif
    refuse_all(f, danger_list + first, N_OF(danger_list) - first, SECCOMP_RET_ERRNO | EPERM);
    refuse_all(f, probe_list, N_OF(probe_list), SECCOMP_RET_ERRNO | EPERM);
}

void hx_sb_seccomp_build(sb_filter *f, unsigned what)
{
    f->n = 0;
    emit(f, LD_OFF(offsetof(struct seccomp_data, arch)));
    emit(f, JUMP(BPF_JMP | BPF_JEQ | BPF_K, SB_ARCH, 1, 0));
    emit(f, RET(SECCOMP_RET_KILL_PROCESS));
    emit(f, LD_NR);
#if defined(__x86_64__)
    /* x32 system calls (bit 30) would bypass the numbers below */
    emit(f, JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x40000000, 0, 1));
    emit(f, RET(SECCOMP_RET_KILL_PROCESS));
#endif
    if (what & SB_SC_TOOL) tool_list(f);
    if (what & SB_SC_SELF) self_list(f);
    if (what & (SB_SC_TOOL | SB_SC_SELF)) {
        connected_pairs_only(f);
        no_terminal_injection(f);
    }
    if (what & SB_SC_NO_NET) {
        match_nr(f, __NR_socket, SECCOMP_RET_ERRNO | EACCES);
        refuse_all(f, io_uring_list, N_OF(io_uring_list), SECCOMP_RET_ERRNO | EPERM);
    }
    emit(f, RET(SECCOMP_RET_ALLOW));
}

int hx_sb_seccomp_install(const sb_filter *f, int tsync)
{
    struct sock_fprog prog = {.len = f->n, .filter = (struct sock_filter *)f->insns};
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      tsync ? SECCOMP_FILTER_FLAG_TSYNC : 0, &prog);
    if (rc > 0) errno = EBUSY; /* thread rc has a filter this one cannot join */
    return rc ? -1 : 0;
}

int hx_sandbox_confine_self_no_network(hx_err *err)
{
    sb_filter f;
    if (hx_sb_disabled("seccomp")) return HX_OK; /* HEARTH_SANDBOX_DISABLE */
    hx_sb_seccomp_build(&f, SB_SC_SELF | SB_SC_NO_NET);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || hx_sb_seccomp_install(&f, 1))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "seccomp unavailable: %s",
                          strerror(errno));
    return HX_OK;
}
