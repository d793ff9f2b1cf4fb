/* rng.h: the engine tests' random data, repeatable from a fixed seed:
 * xorshift64 words, uniform floats in [0, 1) and Box-Muller gaussians.
 * Define TEST_RNG_SEED before including it for another sequence. */
#ifndef HX_TEST_RNG_H
#define HX_TEST_RNG_H

#include <math.h>
#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = TEST_RNG_SEED;

__attribute__((unused)) static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

__attribute__((unused)) static float frand(void)
{
    return (rnd() & 0xffffff) / 16777216.0f;
}

__attribute__((unused)) static float gauss(void)
{
    float u = frand() + 1e-7f, v = frand();
    return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v);
}

#endif /* HX_TEST_RNG_H */
