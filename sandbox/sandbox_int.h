/* sandbox_int.h: sandbox-internal pieces: the Landlock ruleset and the
 * seccomp-bpf filter, both prepared in the parent (before fork) so that
 * the child only makes async-signal-safe system calls before exec. */
#ifndef HX_SANDBOX_INT_H
#define HX_SANDBOX_INT_H

#include <linux/filter.h>

#include "sandbox/sandbox.h"

/* A Landlock ruleset fd allowing reads of read_paths (plus what a dynamic
 * loader and shell need), reads and writes of write_paths, and, unless
 * allow_network, no TCP. Returns the fd, or -1 (Landlock missing or a
 * path failed: err says which). *applied gets HX_SB_LANDLOCK[_NET]. */
int sb_landlock_prepare(const hx_sandbox_params *p, unsigned *applied,
                        hx_err *err);
/* In the child: enforce the prepared ruleset (needs no_new_privs). */
int sb_landlock_enforce(int ruleset_fd);

/* The seccomp program: the deny list (kill for ptrace, modules, mounts,
 * keys, ...; EPERM for namespaces and io_uring) when deny_list, and
 * socket() of families other than AF_UNIX refused when no_network. */
typedef struct sb_filter {
    struct sock_filter insns[160];
    unsigned short n;
} sb_filter;
void sb_seccomp_build(sb_filter *f, int deny_list, int no_network);
/* In the child (or self): install it; needs no_new_privs first. */
int sb_seccomp_install(const sb_filter *f);

/* Whether HEARTH_SANDBOX_DISABLE (a comma list of "landlock",
 * "namespaces", "seccomp") switches mechanism what off: to run on and test
 * the degraded paths that old kernels take, and under qemu-user, which
 * has no seccomp. */
int sb_disabled(const char *what);

#endif /* HX_SANDBOX_INT_H */
