/* half.c: IEEE half and bfloat16 conversions (round to nearest even). */
#include "base.h"

#include <string.h>

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float hx_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return u2f(sign | 0x7f800000 | (man << 13));
    if (exp == 0) {
        if (!man) return u2f(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t hx_fp32_to_fp16(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffff;
    if (abs > 0x7f800000) return sign | 0x7e00;        /* NaN */
    if (abs >= 0x477ff000) return sign | 0x7c00;       /* overflow to inf */
    if (abs < 0x38800000) {                            /* subnormal or zero */
        float v = u2f(abs) * 16777216.0f;              /* to units of 2^-24 */
        uint32_t m = (uint32_t)v;
        float r = v - (float)m;
        if (r > 0.5f || (r == 0.5f && (m & 1))) m++;
        return sign | (uint16_t)m;
    }
    uint32_t e = ((abs >> 23) - 112) << 10;
    uint32_t m = (abs >> 13) & 0x3ff;
    uint32_t rest = abs & 0x1fff;
    uint32_t h = e | m;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float hx_bf16_to_fp32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t hx_fp32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
