/* fuzz_manifest.c: fuzz target for the manifest checks of registered tools
 * (tools/extools.c: fields, duplicates, control characters, bounds, paths
 * as the sandbox will see them): any bytes give a valid name or a clean
 * error. The bytes go through a file, as a manifest does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "tools/tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void remove_file(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) { /* in memory where there is a tmpfs: rewriting a file on disk is slow */
        const char *d = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
        snprintf(path, sizeof path, "%s/hx-fuzz-manifest-%d.json", d, (int)getpid());
        atexit(remove_file);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(data, 1, size, f);
    if (fclose(f) || w != size) return 0;
    hx_err err = {0};
    char name[96] = "";
    int rc = hx_manifest_check(path, NULL, name, sizeof name, &err);
    if (rc == HX_OK) HX_CHECK(name[0] != 0 && !hx_find_control(name, 0));
    else HX_CHECK(err.msg[0] != 0);
    return 0;
}
