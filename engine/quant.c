/* quant.c: reference (scalar) quantization and dequantization of rows for
 * F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and Q8_K, in ggml's layouts. */
#include "engine/quant.h"

#include <math.h>
#include <string.h>

_Static_assert(sizeof(hx_block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(hx_block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(hx_block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(hx_block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(hx_block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(hx_block_q8_K) == 292, "q8_K layout");

/* Values below this are treated as an all-zero group. */
#define GROUP_EPS 1e-15f

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Round to nearest, ties to even, for |v| < 2^22 (the float-add trick). */
static int nearest_int(float v)
{
    float t = v + 12582912.0f;
    return (int)(f2u(t) & 0x007fffffu) - 0x00400000;
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* ---- importance-weighted symmetric search ---- */

/* Weights of n values for an importance-weighted search: the importances
 * themselves (the search then minimises sum imx (x - q)^2, the expected
 * squared output error over the calibration activations), floored at 1%
 * of their mean so a channel that was silent in calibration still counts
 * a little; plain least squares when the group saw no activation at all.
 * (llama.cpp tempers them with sqrt(sigma2 + x^2); on hearth-tiny and on
 * test_quant's layers the plain importances gave the lower error.) */
static void imx_weights(int n, const float *imx, float *w)
{
    float m = 0;
    for (int i = 0; i < n; i++) m += imx[i];
    m /= (float)n;
    for (int i = 0; i < n; i++) w[i] = m > 0 ? imx[i] + 0.01f * m : 1.0f;
}

/* Levels of x at inverse scale iscale, clamped to lo..hi, and the sums
 * sum w x l and sum w l^2 of the least-squares scale fit (sxl / sl2, which
 * lowers the weighted error by sxl^2 / sl2). l may be NULL. */
static void sym_fit(int n, int lo, int hi, const float *x, const float *w,
                    float iscale, int8_t *l, float *sxl, float *sl2)
{
    float a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        int q = clampi(nearest_int(iscale * x[i]), lo, hi);
        if (l) l[i] = (int8_t)q;
        a += w[i] * x[i] * q;
        b += w[i] * (float)(q * q);
    }
    *sxl = a;
    *sl2 = b;
}

/* Symmetric quantization of n values to levels lo..hi (lo = -hi or
 * -hi - 1) minimising sum w (x - s l)^2: tries 2 nstep + 1 inverse scales,
 * step levels apart, around the one mapping the value of largest
 * magnitude to lo, takes the least-squares scale of the best, then
 * re-rounds at that scale and refits while the error falls. Returns the
 * scale (0 for an all-zero group); the caller rounds x / scale again. */
static float search_sym_w(int n, int lo, int hi, const float *x, const float *w,
                          int nstep, float step)
{
    float amax = 0, max = 0, sxl, sl2, s = 0, gain = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < GROUP_EPS) return 0;
    for (int k = -nstep; k <= nstep; k++) {
        sym_fit(n, lo, hi, x, w, ((float)lo - step * (float)k) / max, NULL, &sxl, &sl2);
        if (sl2 > 0 && sxl * sxl > gain * sl2) {
            gain = sxl * sxl / sl2;
            s = sxl / sl2;
        }
    }
    for (int it = 0; it < 4 && s != 0; it++) {
        sym_fit(n, lo, hi, x, w, 1 / s, NULL, &sxl, &sl2);
        if (!(sl2 > 0 && sxl * sxl > gain * sl2 * 1.000001f)) break;
        gain = sxl * sxl / sl2;
        s = sxl / sl2;
    }
    return s;
}

/* One 32-block of Q8_0 (lo -127) or Q4_0 (lo -8) with importances: the
 * weighted search, the scale rounded to fp16, the levels rounded to it.
 * Returns the fp16 scale; q gets the levels. */
static uint16_t sym_block_w(const float *x, const float *imx, int lo, int hi,
                            int nstep, float step, int8_t *q)
{
    float w[HX_QK];
    imx_weights(HX_QK, imx, w);
    uint16_t dh = hx_fp32_to_fp16(search_sym_w(HX_QK, lo, hi, x, w, nstep, step));
    float d = hx_fp16_to_fp32(dh), id = d != 0 ? 1 / d : 0;
    for (int j = 0; j < HX_QK; j++) q[j] = (int8_t)clampi(nearest_int(x[j] * id), lo, hi);
    return dh;
}

/* ---- Q8_0 and Q4_0 ----
 * Without importances, ggml's reference rounding (bit for bit); with
 * them, the weighted search above. */

static void quantize_q8_0(const float *x, hx_block_q8_0 *y, int64_t nb,
                          const float *imx)
{
    for (int64_t i = 0; i < nb; i++, x += HX_QK) {
        if (imx) {
            y[i].d = sym_block_w(x, imx + i * HX_QK, -127, 127, 8, 1.0f, y[i].qs);
            continue;
        }
        float amax = 0;
        for (int j = 0; j < HX_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = hx_fp32_to_fp16(d);
        for (int j = 0; j < HX_QK; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static void quantize_q4_0(const float *x, hx_block_q4_0 *y, int64_t nb,
                          const float *imx)
{
    int8_t q[HX_QK];
    for (int64_t i = 0; i < nb; i++, x += HX_QK) {
        if (imx) {
            y[i].d = sym_block_w(x, imx + i * HX_QK, -8, 7, 15, 0.1f, q);
            for (int j = 0; j < HX_QK / 2; j++)
                y[i].qs[j] = (uint8_t)((q[j] + 8) | ((q[j + HX_QK / 2] + 8) << 4));
            continue;
        }
        float amax = 0, max = 0;
        for (int j = 0; j < HX_QK; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        /* The largest magnitude maps to -8, the one value with no +8. */
        float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = hx_fp32_to_fp16(d);
        for (int j = 0; j < HX_QK / 2; j++) {
            int lo = (int)(int8_t)(x[j] * id + 8.5f);
            int hi = (int)(int8_t)(x[j + HX_QK / 2] * id + 8.5f);
            lo = lo > 15 ? 15 : lo;
            hi = hi > 15 ? 15 : hi;
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static void dequantize_q8_0(const hx_block_q8_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += HX_QK) {
        float d = hx_fp16_to_fp32(x[i].d);
        for (int j = 0; j < HX_QK; j++) y[j] = x[i].qs[j] * d;
    }
}

static void dequantize_q4_0(const hx_block_q4_0 *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += HX_QK) {
        float d = hx_fp16_to_fp32(x[i].d);
        for (int j = 0; j < HX_QK / 2; j++) {
            y[j] = ((x[i].qs[j] & 0xf) - 8) * d;
            y[j + HX_QK / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* ---- Q8_K ---- */

/* Activations for the K-quant dots: NaNs are left out of amax and
 * quantize to 0, as in Q8_0's (engine/kernels.c), so the SIMD versions,
 * whose conversions give 0 or INT_MIN for a NaN, can agree bit for bit
 * (the rounding trick would turn a NaN's payload into a value). */
static void quantize_q8_K(const float *x, hx_block_q8_K *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += HX_QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < HX_QK_K; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0) continue;
        float iscale = -127.0f / max;
        for (int j = 0; j < HX_QK_K; j++) {
            float f = iscale * x[j]; /* NaN for a NaN, and for an inf (iscale 0) */
            int v = f == f ? nearest_int(f) : 0;
            y[i].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int j = 0; j < HX_QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1.0f / iscale;
    }
}

static void dequantize_q8_K(const hx_block_q8_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += HX_QK_K)
        for (int j = 0; j < HX_QK_K; j++) y[j] = x[i].d * x[i].qs[j];
}

/* ---- K-quant scale searches ---- */

/* Asymmetric quantization of n values to 0..nmax minimising the weighted
 * squared error: start from the min/max grid, then try nstep scales
 * around it (iscale = (nmax + rmin + rdelta*k) / range) and keep the
 * least-squares (scale, min) fit of the best one. Returns the scale and
 * the (non-negative) offset in *neg_min; L gets the levels. */
static float search_scale_min(int n, int nmax, const float *x, const float *w,
                              uint8_t *L, float *neg_min, uint8_t *Laux,
                              float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sxl += w[i] * l * x[i];
        }
        float D = sum_w * sl2 - sl * sl;
        if (D <= 0) continue;
        float this_scale = (sum_w * sxl - sum_x * sl) / D;
        float this_min = (sl2 * sum_x - sl * sxl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sxl / sl2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            diff = diff * diff;
            err += w[i] * diff;
        }
        if (err < best) {
            memcpy(L, Laux, (size_t)n);
            best = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

/* Symmetric quantization of n values to -nmax..nmax-1 (stored + nmax in
 * L), weights x^2 (ggml's reference for Q6_K without importances). Tries
 * 19 scales around -nmax/max (the value of largest magnitude maps to
 * -nmax) and keeps the least-squares best. */
static float search_scale_sym(int n, int nmax, const float *x, uint8_t *L)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    /* The plain grid (step 0) first, then 18 neighbours. */
    float best_scale = 0, best = 0;
    for (int k = 0; k < 19; k++) {
        int is = k == 0 ? 0 : k <= 9 ? k - 10 : k - 9;
        float iscale = -(nmax + 0.1f * is) / max, slx = 0, sl2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float wi = x[i] * x[i];
            slx += wi * x[i] * l;
            sl2 += wi * l * l;
        }
        /* Error reduction of the least-squares fit is slx^2 / sl2. */
        if (k == 0 || (sl2 > 0 && slx * slx > best * sl2)) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(nmax + clampi(nearest_int(iscale * x[i]),
                                               -nmax, nmax - 1));
            best_scale = sl2 > 0 ? slx / sl2 : 0;
            best = best_scale * slx;
        }
    }
    return best_scale;
}

/* Per-element weights of one 32-sub-block of a super-block: without an
 * importance matrix, av + |x| (av the sub-block's rms, ggml's reference);
 * with one, imx_weights. */
static void subblock_weights(const float *x, const float *imx, float *w)
{
    if (imx) {
        imx_weights(32, imx, w);
        return;
    }
    float s2 = 0;
    for (int l = 0; l < 32; l++) s2 += x[l] * x[l];
    float av = sqrtf(s2 / 32);
    for (int l = 0; l < 32; l++) w[l] = av + fabsf(x[l]);
}

/* The 6-bit scale and min of sub-block j from Q4_K/Q5_K's packed bytes. */
static void get_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void put_scale_min(int j, uint8_t *q, int sc, int m)
{
    if (j < 4) {
        q[j] = (uint8_t)sc;
        q[j + 4] = (uint8_t)m;
    } else {
        q[j + 4] = (uint8_t)((sc & 0xf) | ((m & 0xf) << 4));
        q[j - 4] |= (uint8_t)((sc >> 4) << 6);
        q[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* 6-bit levels of the 8 sub-block scales (or mins) v at step d. */
static void six_bit(const float *v, float d, int *q)
{
    for (int j = 0; j < 8; j++) q[j] = d > 0 ? clampi(nearest_int(v[j] / d), 0, 63) : 0;
}

static float fp16_round(float v)
{
    return hx_fp16_to_fp32(hx_fp32_to_fp16(v));
}

/* Weighted error of a super-block whose sub-block j has scale d ls[j] and
 * min dmin lm[j], each value at its nearest level 0..nmax. */
static float kx_err(const float *x, const float *w, int nmax, float d,
                    float dmin, const int *ls, const int *lm)
{
    float err = 0;
    for (int j = 0; j < 8; j++) {
        float dj = d * (float)ls[j], mj = dmin * (float)lm[j];
        float id = dj != 0 ? 1 / dj : 0;
        for (int l = 32 * j; l < 32 * j + 32; l++) {
            float diff = dj * (float)clampi(nearest_int((x[l] + mj) * id), 0, nmax) - mj - x[l];
            err += w[l] * diff * diff;
        }
    }
    return err;
}

/* With importances: the super-block steps d (of the scales sc) and dmin
 * (of the mins mn), fp16, chosen by the weighted error of the whole block
 * rather than by max / 63 (rounding every sub-block's scale to 6 bits
 * alone ignores which sub-blocks matter): 17 candidates within 12% for d,
 * then for dmin. ls and lm get the 6-bit levels. */
static void search_kx_steps(const float *x, const float *w, int nmax,
                            const float *sc, const float *mn, float *d,
                            float *dmin, int *ls, int *lm)
{
    float d0 = *d, m0 = *dmin;
    int tl[8];
    six_bit(sc, *d, ls);
    six_bit(mn, *dmin, lm);
    float best = kx_err(x, w, nmax, *d, *dmin, ls, lm);
    for (int pass = 0; pass < 2; pass++) {
        float base = pass ? m0 : d0;
        for (int k = -8; base > 0 && k <= 8; k++) {
            float c = fp16_round(base * (1 + 0.015f * (float)k));
            six_bit(pass ? mn : sc, c, tl);
            float e = pass ? kx_err(x, w, nmax, *d, c, ls, tl)
                           : kx_err(x, w, nmax, c, *dmin, tl, lm);
            if (!(e < best)) continue;
            best = e;
            *(pass ? dmin : d) = c;
            memcpy(pass ? lm : ls, tl, sizeof tl);
        }
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): searches the 8 sub-block
 * scales and mins, quantizes them to 6 bits against fp16 d and dmin, then
 * re-quantizes the values with the rounded scales. L gets 0..nmax.
 * Without importances this is ggml's reference, bit for bit; with them,
 * a finer first search and search_kx_steps. */
static void quantize_kx_block(const float *x, const float *imx, int nmax,
                              uint16_t *d_out, uint16_t *dmin_out,
                              uint8_t *scales, uint8_t *L)
{
    float w[HX_QK_K], sc[8], mn[8], max_sc = 0, max_mn = 0;
    uint8_t Laux[32];
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float *wj = w + 32 * j;
        subblock_weights(xj, imx ? imx + 32 * j : NULL, wj);
        if (imx) /* half the step, twice the range of levels */
            sc[j] = search_scale_min(32, nmax, xj, wj, L + 32 * j, &mn[j], Laux,
                                     nmax == 15 ? -1.0f : -0.5f, 0.05f,
                                     nmax == 15 ? 40 : 20);
        else
            sc[j] = nmax == 15
                        ? search_scale_min(32, 15, xj, wj, L + 32 * j, &mn[j],
                                           Laux, -1.0f, 0.1f, 20)
                        : search_scale_min(32, 31, xj, wj, L + 32 * j, &mn[j],
                                           Laux, -0.5f, 0.1f, 15);
        if (sc[j] > max_sc) max_sc = sc[j];
        if (mn[j] > max_mn) max_mn = mn[j];
    }
    float inv_sc = max_sc > 0 ? 63 / max_sc : 0, inv_mn = max_mn > 0 ? 63 / max_mn : 0;
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = clampi(nearest_int(inv_sc * sc[j]), 0, 63);
        lm[j] = clampi(nearest_int(inv_mn * mn[j]), 0, 63);
    }
    *d_out = hx_fp32_to_fp16(max_sc / 63);
    *dmin_out = hx_fp32_to_fp16(max_mn / 63);
    float d = hx_fp16_to_fp32(*d_out), dmin = hx_fp16_to_fp32(*dmin_out);
    if (imx) {
        search_kx_steps(x, w, nmax, sc, mn, &d, &dmin, ls, lm);
        *d_out = hx_fp32_to_fp16(d);
        *dmin_out = hx_fp32_to_fp16(dmin);
    }
    memset(scales, 0, HX_K_SCALE_BYTES);
    for (int j = 0; j < 8; j++) put_scale_min(j, scales, ls[j], lm[j]);
    for (int j = 0; j < 8; j++) {
        float dj = d * (float)ls[j], mj = dmin * (float)lm[j];
        if (dj == 0) continue;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clampi(
                nearest_int((x[32 * j + l] + mj) / dj), 0, nmax);
    }
}

static void quantize_q4_K(const float *x, hx_block_q4_K *y, int64_t nb,
                          const float *imx)
{
    uint8_t L[HX_QK_K];
    for (int64_t i = 0; i < nb; i++, x += HX_QK_K) {
        quantize_kx_block(x, imx ? imx + i * HX_QK_K : NULL, 15, &y[i].d,
                          &y[i].dmin, y[i].scales, L);
        for (int j = 0; j < HX_QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void quantize_q5_K(const float *x, hx_block_q5_K *y, int64_t nb,
                          const float *imx)
{
    uint8_t L[HX_QK_K];
    for (int64_t i = 0; i < nb; i++, x += HX_QK_K) {
        quantize_kx_block(x, imx ? imx + i * HX_QK_K : NULL, 31, &y[i].d,
                          &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int j = 0; j < HX_QK_K; j += 64)
            for (int l = 0; l < 32; l++) {
                int a = L[j + l], b = L[j + l + 32], bit = j / 32;
                y[i].qh[l] |= (uint8_t)(((a >> 4) << bit) | ((b >> 4) << (bit + 1)));
                y[i].qs[j / 2 + l] = (uint8_t)((a & 0xf) | ((b & 0xf) << 4));
            }
    }
}

static void pack_q6_K(const uint8_t *L, hx_block_q6_K *y)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *Lh = L + 128 * h;
        uint8_t *ql = y->ql + 64 * h, *qh = y->qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((Lh[l] & 0xf) | ((Lh[l + 64] & 0xf) << 4));
            ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xf) | ((Lh[l + 96] & 0xf) << 4));
            qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                              ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
        }
    }
}

static void quantize_q6_K(const float *x, hx_block_q6_K *y, int64_t nb,
                          const float *imx)
{
    uint8_t L[HX_QK_K];
    float sc[16];
    for (int64_t i = 0; i < nb; i++, x += HX_QK_K) {
        float max_abs = 0, max_sc = 0, w[16];
        for (int j = 0; j < 16; j++) {
            if (imx) { /* the weighted search; levels re-rounded below */
                imx_weights(16, imx + i * HX_QK_K + 16 * j, w);
                sc[j] = search_sym_w(16, -32, 31, x + 16 * j, w, 9, 0.1f);
                memset(L + 16 * j, 32, 16);
            } else {
                sc[j] = search_scale_sym(16, 32, x + 16 * j, L + 16 * j);
            }
            if (fabsf(sc[j]) > max_abs) {
                max_abs = fabsf(sc[j]);
                max_sc = sc[j];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (max_abs < GROUP_EPS) continue;
        float iscale = -128.0f / max_sc;
        y[i].d = hx_fp32_to_fp16(1 / iscale);
        float d = hx_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; j++) {
            int s = nearest_int(iscale * sc[j]);
            y[i].scales[j] = (int8_t)(s > 127 ? 127 : s);
            float dj = d * y[i].scales[j];
            if (dj == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)(32 + clampi(nearest_int(x[16 * j + l] / dj), -32, 31));
        }
        pack_q6_K(L, &y[i]);
    }
}

/* One Q4_K or Q5_K super-block (the same layout but for Q5_K's fifth
 * bits): w = d*sc_j * q - dmin*m_j, q the nibble plus, for Q5_K, bit j of
 * qh[l] as its fifth bit (qh NULL for Q4_K). */
static void dequantize_kx_block(uint16_t d16, uint16_t dmin16,
                                const uint8_t *scales, const uint8_t *qs,
                                const uint8_t *qh, float *y)
{
    float d = hx_fp16_to_fp32(d16), dmin = hx_fp16_to_fp32(dmin16);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        get_scale_min(j, scales, &sc, &m);
        float dj = d * sc, mj = dmin * m;
        const uint8_t *q = qs + 32 * (j / 2);
        int shift = 4 * (j & 1);
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> shift) & 0xf;
            if (qh) v |= ((qh[l] >> j) & 1) << 4;
            y[32 * j + l] = dj * v - mj;
        }
    }
}

static void dequantize_q4_K(const hx_block_q4_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += HX_QK_K)
        dequantize_kx_block(x[i].d, x[i].dmin, x[i].scales, x[i].qs, NULL, y);
}

static void dequantize_q5_K(const hx_block_q5_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += HX_QK_K)
        dequantize_kx_block(x[i].d, x[i].dmin, x[i].scales, x[i].qs, x[i].qh, y);
}

static void dequantize_q6_K(const hx_block_q6_K *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, y += HX_QK_K) {
        float d = hx_fp16_to_fp32(x[i].d);
        for (int e = 0; e < HX_QK_K; e++) {
            int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
            uint8_t lo = x[i].ql[64 * h + l + 32 * (quarter & 1)];
            int q = ((quarter < 2 ? lo : lo >> 4) & 0xf) |
                    (((x[i].qh[32 * h + l] >> (2 * quarter)) & 3) << 4);
            y[e] = d * x[i].scales[e / 16] * (q - 32);
        }
    }
}

/* ---- dispatch ---- */

int hx_quant_supported(int type)
{
    switch (type) {
    case HX_TYPE_F32: case HX_TYPE_F16: case HX_TYPE_BF16: case HX_TYPE_Q8_0:
    case HX_TYPE_Q4_0: case HX_TYPE_Q4_K: case HX_TYPE_Q5_K: case HX_TYPE_Q6_K:
    case HX_TYPE_Q8_K:
        return 1;
    default:
        return 0;
    }
}

void hx_quantize_row(int type, const float *x, void *y, int64_t n,
                     const float *imatrix)
{
    int64_t nb = hx_type_block_elems(type) > 0 ? n / hx_type_block_elems(type) : 0;
    switch (type) {
    case HX_TYPE_F32: memcpy(y, x, (size_t)n * 4); break;
    case HX_TYPE_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)y)[i] = hx_fp32_to_fp16(x[i]);
        break;
    case HX_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)y)[i] = hx_fp32_to_bf16(x[i]);
        break;
    case HX_TYPE_Q8_0: quantize_q8_0(x, y, nb, imatrix); break;
    case HX_TYPE_Q4_0: quantize_q4_0(x, y, nb, imatrix); break;
    case HX_TYPE_Q4_K: quantize_q4_K(x, y, nb, imatrix); break;
    case HX_TYPE_Q5_K: quantize_q5_K(x, y, nb, imatrix); break;
    case HX_TYPE_Q6_K: quantize_q6_K(x, y, nb, imatrix); break;
    case HX_TYPE_Q8_K: quantize_q8_K(x, y, nb); break;
    default: break;
    }
}

size_t hx_quantize_rows(int type, const float *src, void *dst, int64_t nrows,
                        int64_t ncols, const float *imatrix)
{
    size_t rb = hx_type_row_bytes(type, ncols);
    if (!hx_quant_supported(type) || rb == 0 || nrows < 0) return 0;
    for (int64_t r = 0; r < nrows; r++)
        hx_quantize_row(type, src + r * ncols, (char *)dst + (size_t)r * rb,
                        ncols, imatrix);
    return rb * (size_t)nrows;
}

void hx_dequantize_row(int type, const void *x, float *y, int64_t n)
{
    int64_t nb = hx_type_block_elems(type) > 0 ? n / hx_type_block_elems(type) : 0;
    switch (type) {
    case HX_TYPE_F32: memcpy(y, x, (size_t)n * 4); break;
    case HX_TYPE_F16:
        for (int64_t i = 0; i < n; i++) y[i] = hx_fp16_to_fp32(((const uint16_t *)x)[i]);
        break;
    case HX_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) y[i] = hx_bf16_to_fp32(((const uint16_t *)x)[i]);
        break;
    case HX_TYPE_Q8_0: dequantize_q8_0(x, y, nb); break;
    case HX_TYPE_Q4_0: dequantize_q4_0(x, y, nb); break;
    case HX_TYPE_Q4_K: dequantize_q4_K(x, y, nb); break;
    case HX_TYPE_Q5_K: dequantize_q5_K(x, y, nb); break;
    case HX_TYPE_Q6_K: dequantize_q6_K(x, y, nb); break;
    case HX_TYPE_Q8_K: dequantize_q8_K(x, y, nb); break;
    default: break;
    }
}
