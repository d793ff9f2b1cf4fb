/* sandbox_int.h: sandbox-internal pieces: the file-system view (Landlock
 * ruleset and mount namespace plan) and the seccomp-bpf filter, all
 * prepared in the parent (before fork) so that the child only makes
 * async-signal-safe system calls before exec. */
#ifndef HX_SANDBOX_INT_H
#define HX_SANDBOX_INT_H

#include <linux/filter.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

/* ---- the paths a tool gets (sandbox/mounts.c) ---- */

/* What every process needs to start: the loader, libraries, a shell, the
 * null devices. Trusted (owned by root): they may be symbolic links. */
extern const char *const hx_sb_system_paths[];
extern const int hx_sb_n_system_paths;

/* Opens an absolute path O_PATH without following a symbolic link at any
 * component, so that a link a tool planted can never redirect a grant.
 * Returns the descriptor, or -1 with errno (ELOOP: a component is a link;
 * EINVAL: not absolute, or a "." or ".." component); *bad (if not NULL)
 * gets the length of the prefix that failed. Async-signal-safe. */
int hx_sb_open_nofollow(const char *path, size_t *bad);

enum { SB_M_DIR, SB_M_FILE, SB_M_LINK };          /* sb_mount.kind */
enum { SB_M_RW = 1, SB_M_SYSTEM = 2, SB_M_EXEC = 4 }; /* sb_mount.flags */
#define SB_MAX_MOUNTS (2 * HX_SANDBOX_MAX_PATHS + 24)

/* One path of the tool's view, bound at the same path inside. */
typedef struct sb_mount {
    const char *path;   /* absolute; borrowed from the params or static */
    int kind;
    unsigned flags;
    dev_t dev;          /* what the parent found there: the child refuses */
    ino_t ino;          /* anything else (a swap between the two opens) */
    int link;           /* SB_M_LINK: offset of the target in links */
} sb_mount;

typedef struct sb_plan {
    sb_mount m[SB_MAX_MOUNTS];  /* sorted by path: parents first */
    int n;
    char links[2048];
    size_t links_len;
    char uid_map[32], gid_map[32]; /* "U U 1": the caller, in a user ns */
} sb_plan;

/* Checks the listed paths and the command (exe, already resolved) and
 * plans the view: each listed path reached without a symbolic link, a
 * folder or a regular file, outside /dev, /proc and /sys, not inside a
 * listed write path, the command a regular file outside the write paths.
 * err names the path at fault. */
int hx_sb_plan_build(const hx_sandbox_params *p, const char *exe, sb_plan *plan,
                     hx_err *err);
/* In the child, in a new mount namespace: builds a tmpfs root holding only
 * the planned paths (read-only but for the write paths), a /proc of the
 * child's PID namespace, and pivots into it. On failure returns -1 with
 * errno, *at the index of the entry at fault (or -1). */
int hx_sb_mounts_apply(const sb_plan *plan, int *at);
/* In the child, in a new user namespace: maps the caller's uid and gid. */
int hx_sb_userns_map(const sb_plan *plan);

/* ---- Landlock (sandbox/landlock.c) ---- */

/* A Landlock ruleset fd allowing reads of the system paths, reads and
 * execution of the command file, reads of read_paths, reads and writes of
 * write_paths, and, unless allow_network, no TCP. Returns the fd, -1 when
 * Landlock is missing, -2 when a rule failed (err says which).
 * *applied gets HX_SB_LANDLOCK[_NET]. */
int hx_sb_landlock_prepare(const hx_sandbox_params *p, const char *exe,
                           unsigned *applied, hx_err *err);
/* In the child: adds /proc (own_proc: the child's own, in its mount and
 * PID namespaces) or else /proc/self, if there, and enforces the prepared
 * ruleset (needs no_new_privs). */
int hx_sb_landlock_enforce(int ruleset_fd, int own_proc);

/* ---- seccomp (sandbox/seccomp.c) ---- */

/* What a filter holds (bits of hx_sb_seccomp_build's what):
 * SB_SC_TOOL: the tool's deny list (kill for ptrace, modules, mounts,
 *   keys ...; EPERM for namespaces and io_uring), no AF_UNIX socket()
 *   (host services listen on them), socketpair() of stream or seqpacket
 *   sockets only (a datagram one could send to a socket path);
 * SB_SC_SELF: Hearth's own: the same calls refused with EPERM, but those
 *   its sandbox needs to start a tool (namespaces, mounts, pivot_root),
 *   and the same socket rules;
 * SB_SC_NO_NET: no socket() of any family, no io_uring (which opens and
 *   connects sockets without the socket() system call).
 * TOOL and SELF refuse TIOCSTI and TIOCLINUX (typing into a terminal). */
enum { SB_SC_TOOL = 1, SB_SC_SELF = 2, SB_SC_NO_NET = 4 };
typedef struct sb_filter {
    struct sock_filter insns[256];
    unsigned short n;
} sb_filter;
void hx_sb_seccomp_build(sb_filter *f, unsigned what);
/* Installs it (needs no_new_privs first); tsync: on every thread of the
 * process, failing if one cannot take it. */
int hx_sb_seccomp_install(const sb_filter *f, int tsync);

/* Whether HEARTH_SANDBOX_DISABLE (a comma list of "landlock",
 * "namespaces", "seccomp", "memory") switches mechanism what off: to run
 * on and test the degraded paths that old kernels take, under qemu-user,
 * which has no seccomp, and in sanitizer builds, whose shadow memory needs
 * terabytes of address space. */
int hx_sb_disabled(const char *what);

#endif /* HX_SANDBOX_INT_H */
