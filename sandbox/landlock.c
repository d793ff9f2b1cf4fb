/* landlock.c: the file-system (and, from ABI 4, TCP) confinement of tool
 * processes with Landlock, built in the parent and enforced in the child:
 * the second layer under the mount namespace, and the only one where the
 * kernel gives no namespaces. */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox_int.h"

/* Rights and structures of newer ABIs than the installed kernel headers
 * may describe; the values are fixed by the kernel ABI. */
#define LL_FS_TRUNCATE (1ULL << 14)   /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15)  /* ABI 5 */
#define LL_NET_BIND_TCP (1ULL << 0)   /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

#define LL_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | \
                 LANDLOCK_ACCESS_FS_READ_DIR)

int hx_sandbox_landlock_abi(void)
{
    static int abi = -1;
    if (abi < 0) {
        long v = syscall(SYS_landlock_create_ruleset, NULL, 0,
                         LANDLOCK_CREATE_RULESET_VERSION);
        abi = v > 0 ? (int)v : 0;
    }
    return abi;
}

static uint64_t fs_rights(int abi)
{
    uint64_t r = (1ULL << 13) - 1; /* ABI 1: execute .. make_sym */
    if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) r |= LL_FS_TRUNCATE;
    if (abi >= 5) r |= LL_FS_IOCTL_DEV;
    return r;
}

static int add_rule(int rfd, int fd, uint64_t access)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                  LANDLOCK_ACCESS_FS_WRITE_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
    struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};
    return (int)syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
}

/* Adds a path-beneath rule: a system path (trusted, may be a link, may be
 * missing) or a listed one (never through a link). */
static int add_path(int rfd, const char *path, uint64_t access, int system,
                    hx_err *err)
{
    int fd = system ? open(path, O_PATH | O_CLOEXEC) : hx_sb_open_nofollow(path, NULL);
    if (fd < 0) {
        if (system) return 0;
        return hx_err_set(err, HX_ERR_NOTFOUND, "sandbox path %s: %s", path,
                          strerror(errno)), -1;
    }
    int rc = add_rule(rfd, fd, access), e = errno;
    close(fd);
    if (rc) {
        hx_err_set(err, HX_ERR_IO, "landlock rule for %s: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

int hx_sb_landlock_prepare(const hx_sandbox_params *p, const char *exe,
                           unsigned *applied, hx_err *err)
{
    int abi = hx_sandbox_landlock_abi();
    if (!abi) return -1;
    uint64_t fs = fs_rights(abi);
    struct ll_ruleset_attr attr = {.handled_access_fs = fs};
    size_t size = sizeof attr.handled_access_fs;
    if (abi >= 4 && !p->allow_network) {
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
        size = 2 * sizeof(uint64_t);
    }
    if (abi >= 6) {
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
        size = sizeof attr;
    }
    int rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (rfd < 0) return -1;
    int bad = 0;
    for (int i = 0; i < hx_sb_n_system_paths; i++) {
        const char *s = hx_sb_system_paths[i];
        /* the null and random devices take writes too ("> /dev/null") */
        uint64_t dev = hx_path_within(s, "/dev") ? LANDLOCK_ACCESS_FS_WRITE_FILE : 0;
        bad |= add_path(rfd, s, LL_READ | dev, 1, err);
    }
    /* the command file itself, not its folder */
    bad |= add_path(rfd, exe, LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE, 0, err);
    for (int i = 0; i < p->n_read && !bad; i++)
        bad |= add_path(rfd, p->read_paths[i], LL_READ, 0, err);
    for (int i = 0; i < p->n_write && !bad; i++)
        bad |= add_path(rfd, p->write_paths[i], fs, 0, err);
    if (bad) {
        close(rfd);
        return -2;
    }
    *applied |= HX_SB_LANDLOCK;
    if (attr.handled_access_net) *applied |= HX_SB_LANDLOCK_NET;
    return rfd;
}

int hx_sb_landlock_enforce(int ruleset_fd, int own_proc)
{
    /* the loader and sanitizers read /proc/self: in a mount and PID
     * namespace of its own /proc holds only the tool's processes */
    int fd = open(own_proc ? "/proc" : "/proc/self", O_PATH | O_CLOEXEC);
    if (fd >= 0) {
        add_rule(ruleset_fd, fd, LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR);
        close(fd);
    }
    return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, 0);
}
