/* unique.c: bytes for names that must not repeat (event UIDs, mail file
 * names, Message-IDs): random, except under a pinned clock, where a
 * replayed run must see the same names. */
#include "base.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
    return hx_splitmix64(&x);
}

int hx_unique_pinned(void)
{
    const char *env = getenv("HEARTH_NOW");
    return env && *env;
}

void hx_unique_bytes(const void *salt, size_t salt_n, unsigned k, void *buf, size_t n)
{
    unsigned char *out = buf;
    const char *pin = hx_unique_pinned() ? getenv("HEARTH_NOW") : NULL;
    if (!pin && getrandom(buf, n, 0) == (ssize_t)n) return;
    /* pinned: the clock, the salt and k; no entropy source: the time and
     * pid too */
    uint64_t x = pin ? hx_fnv1a(HX_FNV1A_BASIS_SHORT, pin, strlen(pin))
                     : (uint64_t)(hx_time_mono() * 1e9) ^ (uint64_t)getpid() << 32;
    x = mix(hx_fnv1a(x, salt, salt ? salt_n : 0) ^ mix(k));
    for (size_t i = 0; i < n; i++) {
        if (i && i % 8 == 0) x = mix(x);
        out[i] = (unsigned char)(x >> (i % 8 * 8));
    }
}
