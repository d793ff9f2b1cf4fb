/* seccomp.c: the seccomp-bpf deny list of tool processes, and the
 * no-network filter Hearth can put on itself. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <string.h>
#include <stddef.h>
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

#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARG0_LO BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]))

/* Calls a tool never needs and an attacker wants: the process is killed. */
static const int kill_list[] = {
    __NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev,
    __NR_init_module, __NR_finit_module, __NR_delete_module,
    __NR_kexec_load, __NR_kexec_file_load, __NR_mount, __NR_umount2,
    __NR_pivot_root, __NR_swapon, __NR_swapoff, __NR_reboot, __NR_add_key,
    __NR_request_key, __NR_keyctl, __NR_bpf, __NR_open_by_handle_at,
    __NR_acct, __NR_quotactl, __NR_settimeofday, __NR_clock_settime,
    __NR_clock_adjtime, __NR_chroot,
#ifdef __NR_iopl
    __NR_iopl, __NR_ioperm,
#endif
#ifdef __NR_fsopen
    __NR_fsopen, __NR_fsmount, __NR_move_mount, __NR_open_tree, __NR_fsconfig,
    __NR_fspick,
#endif
};

/* Refused with EPERM: probing them is common and harmless. */
static const int eperm_list[] = {
    __NR_unshare, __NR_setns, __NR_perf_event_open, __NR_userfaultfd,
    __NR_name_to_handle_at, __NR_vhangup,
#ifdef __NR_io_uring_setup
    __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
#endif
};

static void emit(sb_filter *f, struct sock_filter s)
{
    if (f->n < sizeof f->insns / sizeof f->insns[0]) f->insns[f->n++] = s;
}

/* if (nr == n) return ret; assumes nr is loaded */
static void match_nr(sb_filter *f, int n, unsigned ret)
{
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)n, 0, 1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret));
}

static void deny_list(sb_filter *f)
{
    for (size_t i = 0; i < sizeof kill_list / sizeof *kill_list; i++)
        match_nr(f, kill_list[i], SECCOMP_RET_KILL_PROCESS);
    for (size_t i = 0; i < sizeof eperm_list / sizeof *eperm_list; i++)
        match_nr(f, eperm_list[i], SECCOMP_RET_ERRNO | EPERM);
    /* clone3 passes flags in memory the filter cannot read: ENOSYS makes
     * libc fall back to clone, whose namespace flags are checked here */
#ifdef __NR_clone3
    match_nr(f, __NR_clone3, SECCOMP_RET_ERRNO | ENOSYS);
#endif
    const unsigned ns_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                              CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                              CLONE_NEWCGROUP;
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4));
    emit(f, (struct sock_filter)LD_ARG0_LO);
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, ns_flags, 0, 1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
    emit(f, (struct sock_filter)LD_NR);
}

static void no_network(sb_filter *f)
{
    /* socket(family, ...): only AF_UNIX */
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 4));
    emit(f, (struct sock_filter)LD_ARG0_LO);
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 1, 0));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES));
    emit(f, (struct sock_filter)LD_NR);
}

void sb_seccomp_build(sb_filter *f, int deny, int no_net)
{
    f->n = 0;
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                         offsetof(struct seccomp_data, arch)));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SB_ARCH, 1, 0));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    emit(f, (struct sock_filter)LD_NR);
#if defined(__x86_64__)
    /* x32 system calls (bit 30) would bypass the numbers below */
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x40000000, 0, 1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
    if (deny) deny_list(f);
    if (no_net) no_network(f);
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
}

int sb_seccomp_install(const sb_filter *f)
{
    struct sock_fprog prog = {.len = f->n, .filter = (struct sock_filter *)f->insns};
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int hx_sandbox_confine_self_no_network(hx_err *err)
{
    sb_filter f;
    if (sb_disabled("seccomp")) return HX_OK; /* HEARTH_SANDBOX_DISABLE */
    sb_seccomp_build(&f, 0, 1);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || sb_seccomp_install(&f))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "seccomp unavailable: %s",
                          strerror(errno));
    return HX_OK;
}
