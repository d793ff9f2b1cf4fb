/* scratch.h: a scratch directory for the agent's tests that write worlds
 * (removed at the end), and reading a file back whole; shared by
 * test_world.c and test_datagen.c. */
#ifndef HX_TEST_AGENT_SCRATCH_H
#define HX_TEST_AGENT_SCRATCH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/sim.h"

static char g_scratch[64];

/* The test's scratch directory, made on first use; "" if it could not be.
 * Worlds are rewritten often: in memory where there is /dev/shm. */
__attribute__((unused)) static const char *scratch_dir(void)
{
    if (!g_scratch[0]) {
        snprintf(g_scratch, sizeof g_scratch, "%s/hx_%.24s_XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
                 program_invocation_short_name);
        if (!mkdtemp(g_scratch)) g_scratch[0] = 0;
    }
    return g_scratch;
}

/* Removes the scratch directory, if one was made (end of main). */
__attribute__((unused)) static void scratch_remove(void)
{
    if (g_scratch[0]) hx_world_rmtree(g_scratch, NULL);
}

/* The whole file at path, NUL-terminated (the caller frees it), or NULL. */
__attribute__((unused)) static char *slurp(const char *path)
{
    char *s = NULL;
    size_t n;
    return hx_read_file(path, 0, &s, &n, NULL) ? NULL : s;
}

#endif /* HX_TEST_AGENT_SCRATCH_H */
