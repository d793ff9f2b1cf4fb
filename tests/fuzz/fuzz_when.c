/* fuzz_when.c: fuzz target for the time-expression parser (tools/when.c):
 * any bytes must give a range with end >= start or a clean error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tools/tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const zones[] = {"Europe/Paris", "America/New_York",
                                        "UTC"};
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    hx_when_range r;
    hx_err err;
    int rc = hx_when_parse(s, 1796112000 /* 2026-12-01T08:00Z */,
                           zones[size % 3], &r, &err);
    if (rc == HX_OK) HX_CHECK(r.end >= r.start);
    else HX_CHECK(err.msg[0] != 0);
    free(s);
    return 0;
}
