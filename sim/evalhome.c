/* evalhome.c: the fixed directory evaluation worlds are written in: its
 * path is in tool results (event files, queued mail), so a random one
 * made the same task give other answers from run to run; a lock lets
 * concurrent evaluations take turns instead. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/sim.h"

int hx_eval_home_take(const char *dir, char *base, size_t n, int *fd, hx_err *err)
{
    char lock[600];
    const char *tmp = dir ? dir : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    *fd = -1;
    if ((size_t)snprintf(base, n, "%s/hearth-eval", tmp) >= n)
        return hx_err_set(err, HX_ERR_RANGE, "evaluation directory path too long");
    snprintf(lock, sizeof lock, "%s.lock", base);
    int f = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600); /* /tmp: no planted link */
    if (f < 0 || flock(f, LOCK_EX)) {
        if (f >= 0) close(f);
        return hx_err_set(err, HX_ERR_IO, "cannot lock %s", lock);
    }
    hx_world_rmtree(base, NULL); /* left by a run that was killed */
    if (mkdir(base, 0700)) {
        close(f);
        return hx_err_set(err, HX_ERR_IO, "cannot create %s", base);
    }
    *fd = f;
    return HX_OK;
}

void hx_eval_home_give(const char *base, int fd)
{
    if (fd < 0) return;
    hx_world_rmtree(base, NULL);
    close(fd); /* releases the lock */
}
