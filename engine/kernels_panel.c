/* kernels_panel.c: AVX-512 VNNI matmul for many tokens: 16 weight rows are
 * unpacked once into a thread-local panel (rows in lanes), then reused by
 * every token of the job, 8 tokens at a time held in registers. */
#include "engine/kernels_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* The arithmetic per (row, token) is the canonical one of kernels_impl.h
 * (HX_CANON_*), which the AVX-512 dots follow operation for operation, so
 * a panel lane gives exactly the dot of its row.
 *
 * Panel layout, per unit (32 values for Q4_0/Q8_0, 256 for K-quants):
 *   vals: per 32 values, 8 groups of 64 bytes: group g holds, for lane
 *         (row) r, the 4 unsigned weights of k = 4g..4g+3 at bytes 4r..4r+3,
 *         one zmm for vpdpbusd against 4 activation bytes broadcast;
 *   then per-lane int32 / float vectors of 16 (one per row) as each type
 *   needs. Rows past the matrix are zero (their lanes are discarded). */
#define LANES 16
#define NTOK 8
#define VALS32 (8 * 64) /* bytes of one 32-value block of a panel */

enum {
    U_Q80 = VALS32 + 64,                        /* vals, d */
    U_Q4K = 8 * VALS32 + 8 * 64 + 8 * 64 + 2 * 64, /* vals, sc, m pairs, d, -dmin */
    U_Q6K = 8 * VALS32 + 16 * 64 + 8 * 64 + 64,  /* vals, sc, sc pairs, d */
};

/* ---- packing: one row's units into its lane ---- */

/* The 32 unsigned values of block b of a unit (dword g: k = 4g..4g+3)
 * into the row's stage st: pack_panel then moves them into lane r of
 * the panel's block, 16 rows at a time (a transposition in registers;
 * a scatter per row and block cost as much as a third of the GEMM). */
AVX512 static inline void put32(uint8_t *st, int b, __m256i v)
{
    _mm256_storeu_si256((__m256i *)(st + 32 * b), v);
}

static inline void put_i32(uint8_t *vec, int r, int32_t x) { memcpy(vec + 4 * r, &x, 4); }

AVX512 static inline void put_h(uint8_t *vec, int r, uint16_t h)
{
    float f = _cvtsh_ss(h);
    memcpy(vec + 4 * r, &f, 4);
}

AVX512 static inline __m256i nibbles(__m128i raw)
{
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
}

AVX512 static void pack_q4_0(uint8_t *p, size_t ub, uint8_t *st, int r, const void *row, int64_t nu)
{
    const hx_block_q4_0 *x = row;
    for (int64_t i = 0; i < nu; i++, p += ub, st += 32) {
        put32(st, 0, nibbles(_mm_loadu_si128((const __m128i *)x[i].qs)));
        put_h(p + VALS32, r, x[i].d);
    }
}

AVX512 static void pack_q8_0(uint8_t *p, size_t ub, uint8_t *st, int r, const void *row, int64_t nu)
{
    const hx_block_q8_0 *x = row;
    for (int64_t i = 0; i < nu; i++, p += ub, st += 32) {
        put32(st, 0, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                     _mm256_set1_epi8((char)0x80)));
        put_h(p + VALS32, r, x[i].d);
    }
}

AVX512 static void pack_q4_K(uint8_t *p, size_t ub, uint8_t *st, int r, const void *row, int64_t nu)
{
    const hx_block_q4_K *x = row;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < nu; i++, p += ub, st += 256) {
        uint64_t sc, mn;
        hx_k_unpack(x[i].scales, &sc, &mn);
        uint8_t *sv = p + 8 * VALS32, *mv = sv + 8 * 64, *dv = mv + 8 * 64;
        for (int jp = 0; jp < 4; jp++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * jp));
            put32(st, 2 * jp, _mm256_and_si256(raw, m4));
            put32(st, 2 * jp + 1, _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
        }
        for (int j = 0; j < 8; j++) {
            put_i32(sv + j * 64, r, HX_K_BYTE(sc, j));
            /* the min meets bsums 2j and 2j+1: an int16 pair (m_j, m_j) */
            int32_t m = HX_K_BYTE(mn, j);
            put_i32(mv + j * 64, r, m | (m << 16));
        }
        put_h(dv, r, x[i].d);
        float nd = -_cvtsh_ss(x[i].dmin);
        memcpy(dv + 64 + 4 * r, &nd, 4);
    }
}

AVX512 static void pack_q6_K(uint8_t *p, size_t ub, uint8_t *st, int r, const void *row, int64_t nu)
{
    const hx_block_q6_K *x = row;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    for (int64_t i = 0; i < nu; i++, p += ub, st += 256) {
        for (int h = 0; h < 2; h++) { /* values 128h + 32k + l in block 4h + k */
            const uint8_t *ql = x[i].ql + 64 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
            const int b = 4 * h;
            put32(st, b, _mm256_or_si256(_mm256_and_si256(l0, m4),
                                         _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2)));
            put32(st, b + 1, _mm256_or_si256(_mm256_and_si256(l1, m4),
                                             _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2)));
            put32(st, b + 2, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                             _mm256_and_si256(hb, m2)));
            put32(st, b + 3,
                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                  _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2)));
        }
        uint8_t *sv = p + 8 * VALS32, *pv = sv + 16 * 64, *dv = pv + 8 * 64;
        for (int j = 0; j < 16; j++) put_i32(sv + j * 64, r, x[i].scales[j]);
        for (int q = 0; q < 8; q++)
            put_i32(pv + q * 64, r,
                    (int32_t)((uint32_t)(uint16_t)x[i].scales[2 * q] |
                              ((uint32_t)(uint16_t)x[i].scales[2 * q + 1] << 16)));
        put_h(dv, r, x[i].d);
    }
}

/* all n_units units of one row: the per-lane scalars into lane r of the
 * panel p (unit bytes ub), the values into the row's stage st (n bytes) */
typedef void (*pack_fn)(uint8_t *p, size_t ub, uint8_t *st, int r, const void *row,
                        int64_t n_units);

/* One 32-value block of 16 rows: dword g of row r's 32 bytes at
 * st + r * sst to bytes 4r.. of group g of blk (64 * 8 bytes). */
AVX512 static void transpose16(uint8_t *blk, const uint8_t *st, size_t sst)
{
    __m512i z[8], t[8], u[8];
    #pragma GCC unroll 8
    for (int k = 0; k < 8; k++) /* rows k and k + 8 */
        z[k] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(st + (size_t)k * sst))),
            _mm256_loadu_si256((const __m256i *)(st + (size_t)(k + 8) * sst)), 1);
    #pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm512_unpacklo_epi32(z[k], z[k + 1]);
        t[k + 1] = _mm512_unpackhi_epi32(z[k], z[k + 1]);
    }
    /* per 128-bit lane of u[4a + c]: dword c (lanes 0, 2) or 4 + c (lanes
     * 1, 3) of rows 4a..4a+3 (lanes 0, 1) and 8+4a.. (lanes 2, 3) */
    #pragma GCC unroll 2
    for (int a = 0; a < 2; a++) {
        u[4 * a] = _mm512_unpacklo_epi64(t[4 * a], t[4 * a + 2]);
        u[4 * a + 1] = _mm512_unpackhi_epi64(t[4 * a], t[4 * a + 2]);
        u[4 * a + 2] = _mm512_unpacklo_epi64(t[4 * a + 1], t[4 * a + 3]);
        u[4 * a + 3] = _mm512_unpackhi_epi64(t[4 * a + 1], t[4 * a + 3]);
    }
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        _mm512_store_si512((void *)(blk + 64 * c), _mm512_permutex2var_epi64(u[c], lo, u[4 + c]));
        _mm512_store_si512((void *)(blk + 64 * (4 + c)), _mm512_permutex2var_epi64(u[c], hi, u[4 + c]));
    }
}

/* Rows [0, nr) of w (stride ws) into the panel p; lanes nr..15 zero. st:
 * 16 rows of n bytes of staged values. */
static void pack_panel(uint8_t *p, size_t ub, pack_fn fn, const void *w, size_t ws, int nr,
                       int64_t n_units, int unit, uint8_t *st)
{
    const size_t n = (size_t)unit * (size_t)n_units;
    if (nr < LANES) {
        memset(p, 0, ub * (size_t)n_units);
        memset(st + (size_t)nr * n, 0, (size_t)(LANES - nr) * n);
    }
    for (int r = 0; r < nr; r++) fn(p, ub, st + (size_t)r * n, r, (const char *)w + (size_t)r * ws, n_units);
    for (int64_t i = 0; i < n_units; i++)
        for (int b = 0; b < unit / 32; b++)
            transpose16(p + (size_t)i * ub + (size_t)b * VALS32, st + (size_t)i * unit + 32 * (size_t)b, n);
}

/* ---- micro-kernels: one panel against 8 tokens ----
 * res[t][r] for t < 8 and the 16 lanes. */

AVX512 static inline __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* 32 values of one block: acc[t] += sum over the block of u * y_t */
#define DOT32(ACC, BLK, YQ)                                                      \
    _Pragma("GCC unroll 16")                                                     \
    for (int g = 0; g < 8; g++) {                                                \
        __m512i w_ = _mm512_load_si512((const void *)((BLK) + g * 64));          \
        _Pragma("GCC unroll 16")                                                 \
        for (int t = 0; t < NTOK; t++)                                           \
            ACC[t] = _mm512_dpbusd_epi32(ACC[t], w_, bcast4((YQ)[t] + 4 * g));   \
    }

/* One 32-value block of the panel into a[t] for the 8 tokens. */
AVX512 static inline __attribute__((always_inline)) void q8a_block(
    const uint8_t *p, const hx_block_q8a *const *y, int64_t i, int off, __m512 *a)
{
    __m512i s[NTOK];
    const int8_t *yq[NTOK];
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) s[t] = _mm512_setzero_si512(), yq[t] = y[t][i].qs;
    DOT32(s, p, yq);
    __m512 dw = _mm512_load_ps((const void *)(p + VALS32));
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) {
        __m512i v = _mm512_sub_epi32(s[t], _mm512_set1_epi32(off * y[t][i].s));
        a[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(dw, _mm512_set1_ps(y[t][i].d)),
                               a[t]);
    }
}

/* Even blocks into one accumulator, odd into another, summed at the end
 * (HX_CANON_Q8A). */
AVX512 static void mk_q8a(const uint8_t *p, int64_t nb, const hx_block_q8a *const *y, int off,
                          float *res)
{
    __m512 a0[NTOK], a1[NTOK];
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) a0[t] = a1[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        q8a_block(p + U_Q80 * (size_t)i, y, i, off, a0);
        q8a_block(p + U_Q80 * (size_t)(i + 1), y, i + 1, off, a1);
    }
    if (i < nb) q8a_block(p + U_Q80 * (size_t)i, y, i, off, a0);
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) _mm512_storeu_ps(res + LANES * t, _mm512_add_ps(a0[t], a1[t]));
}

AVX512 static void mk_q4_0(const uint8_t *p, int64_t n, const void *const *y, float *res)
{
    mk_q8a(p, n / HX_QK, (const hx_block_q8a *const *)y, 8, res);
}

AVX512 static void mk_q8_0(const uint8_t *p, int64_t n, const void *const *y, float *res)
{
    mk_q8a(p, n / HX_QK, (const hx_block_q8a *const *)y, 128, res);
}

/* sum over the 8 int16 pairs of bsums: corr[t] += pairs_p . bsums_t[2p..2p+1] */
#define BSUM_PAIRS(CORR, PV, YB)                                                 \
    _Pragma("GCC unroll 16")                                                     \
    for (int pp = 0; pp < 8; pp++) {                                             \
        __m512i pv_ = _mm512_load_si512((const void *)((PV) + pp * 64));         \
        _Pragma("GCC unroll 16")                                                 \
        for (int t = 0; t < NTOK; t++) {                                         \
            int32_t b_;                                                          \
            memcpy(&b_, (YB)[t]->bsums + 2 * pp, 4);                             \
            CORR[t] = _mm512_dpwssd_epi32(CORR[t], pv_, _mm512_set1_epi32(b_));  \
        }                                                                        \
    }

AVX512 static void mk_q4_K(const uint8_t *p, int64_t n, const void *const *yv, float *res)
{
    const hx_block_q8_K *const *y = (const hx_block_q8_K *const *)yv;
    __m512 acc[NTOK];
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++, p += U_Q4K) {
        const uint8_t *sv = p + 8 * VALS32, *mv = sv + 8 * 64, *dv = mv + 8 * 64;
        const hx_block_q8_K *yb[NTOK];
        __m512i is[NTOK];
        #pragma GCC unroll 16
        for (int t = 0; t < NTOK; t++) yb[t] = &y[t][i], is[t] = _mm512_setzero_si512();
        #pragma GCC unroll 16
        for (int j = 0; j < 8; j++) {
            __m512i s[NTOK];
            const int8_t *yq[NTOK];
            #pragma GCC unroll 16
            for (int t = 0; t < NTOK; t++) s[t] = _mm512_setzero_si512(), yq[t] = yb[t]->qs + 32 * j;
            DOT32(s, p + j * VALS32, yq);
            __m512i sc = _mm512_load_si512((const void *)(sv + j * 64));
            #pragma GCC unroll 16
            for (int t = 0; t < NTOK; t++) is[t] = _mm512_add_epi32(is[t], _mm512_mullo_epi32(s[t], sc));
        }
        __m512i mc[NTOK];
        #pragma GCC unroll 16
        for (int t = 0; t < NTOK; t++) mc[t] = _mm512_setzero_si512();
        BSUM_PAIRS(mc, mv, yb);
        __m512 d = _mm512_load_ps((const void *)dv), nm = _mm512_load_ps((const void *)(dv + 64));
        #pragma GCC unroll 16
        for (int t = 0; t < NTOK; t++) {
            __m512 dy = _mm512_set1_ps(yb[t]->d);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), _mm512_mul_ps(d, dy), acc[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mc[t]), _mm512_mul_ps(nm, dy), acc[t]);
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) _mm512_storeu_ps(res + LANES * t, acc[t]);
}

AVX512 static void mk_q6_K(const uint8_t *p, int64_t n, const void *const *yv, float *res)
{
    const hx_block_q8_K *const *y = (const hx_block_q8_K *const *)yv;
    __m512 acc[NTOK];
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / HX_QK_K; i++, p += U_Q6K) {
        const uint8_t *sv = p + 8 * VALS32, *pv = sv + 16 * 64, *dv = pv + 8 * 64;
        const hx_block_q8_K *yb[NTOK];
        __m512i is[NTOK];
        #pragma GCC unroll 16
        for (int t = 0; t < NTOK; t++) yb[t] = &y[t][i], is[t] = _mm512_setzero_si512();
        #pragma GCC unroll 16
        for (int j = 0; j < 16; j++) { /* sub-blocks of 16: 4 groups each */
            __m512i s[NTOK];
            #pragma GCC unroll 16
            for (int t = 0; t < NTOK; t++) s[t] = _mm512_setzero_si512();
            const uint8_t *blk = p + (j / 2) * VALS32 + (j & 1) * 4 * 64;
            #pragma GCC unroll 16
            for (int g = 0; g < 4; g++) {
                __m512i w = _mm512_load_si512((const void *)(blk + g * 64));
                #pragma GCC unroll 16
                for (int t = 0; t < NTOK; t++)
                    s[t] = _mm512_dpbusd_epi32(s[t], w, bcast4(yb[t]->qs + 16 * j + 4 * g));
            }
            __m512i sc = _mm512_load_si512((const void *)(sv + j * 64));
            #pragma GCC unroll 16
            for (int t = 0; t < NTOK; t++) is[t] = _mm512_add_epi32(is[t], _mm512_mullo_epi32(s[t], sc));
        }
        __m512i oc[NTOK];
        #pragma GCC unroll 16
        for (int t = 0; t < NTOK; t++) oc[t] = _mm512_setzero_si512();
        BSUM_PAIRS(oc, pv, yb);
        __m512 d = _mm512_load_ps((const void *)dv);
        #pragma GCC unroll 16
        for (int t = 0; t < NTOK; t++) {
            __m512i v = _mm512_sub_epi32(is[t], _mm512_slli_epi32(oc[t], 5));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(d, _mm512_set1_ps(yb[t]->d)),
                                     acc[t]);
        }
    }
    #pragma GCC unroll 16
    for (int t = 0; t < NTOK; t++) _mm512_storeu_ps(res + LANES * t, acc[t]);
}

/* ---- the tile function ---- */

typedef void (*mk_fn)(const uint8_t *p, int64_t n, const void *const *y, float *res);

typedef struct panel_type {
    pack_fn pack;
    mk_fn mk;
    int unit;  /* values per unit */
    size_t ub; /* panel bytes per unit */
} panel_type;

static const panel_type *panel_type_of(int wtype)
{
    static const panel_type q4_0 = {pack_q4_0, mk_q4_0, HX_QK, U_Q80};
    static const panel_type q8_0 = {pack_q8_0, mk_q8_0, HX_QK, U_Q80};
    static const panel_type q4_K = {pack_q4_K, mk_q4_K, HX_QK_K, U_Q4K};
    static const panel_type q6_K = {pack_q6_K, mk_q6_K, HX_QK_K, U_Q6K};
    switch (wtype) {
    case HX_TYPE_Q4_0: return &q4_0;
    case HX_TYPE_Q8_0: return &q8_0;
    case HX_TYPE_Q4_K: return &q4_K;
    case HX_TYPE_Q6_K: return &q6_K;
    default: return NULL;
    }
}

/* y[t*ldy + r] = res[16t + r] for t < tn, r < rn: one 64-byte store per
 * token (memcpy's pieces stalled on the output's cache misses). */
AVX512 static void store_res(float *y, size_t ldy, const float *res, int tn, int rn)
{
    const __mmask16 k = (__mmask16)((1u << rn) - 1);
    for (int t = 0; t < tn; t++)
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, k, _mm512_loadu_ps(res + LANES * t));
}

/* The thread's panel buffer (grown as needed, kept for the thread's life:
 * tens to a few hundred KB; freed by the key's destructor when the thread
 * exits). */
typedef struct panel_buf {
    uint8_t *p;
    size_t size;
} panel_buf;

static pthread_key_t g_panel_key;
static pthread_once_t g_panel_once = PTHREAD_ONCE_INIT;
static int g_panel_key_ok;

static void panel_buf_free(void *v)
{
    panel_buf *b = v;
    if (b) free(b->p);
    free(b);
}

static void panel_key_init(void) { g_panel_key_ok = pthread_key_create(&g_panel_key, panel_buf_free) == 0; }

static uint8_t *panel_buffer(size_t size)
{
    pthread_once(&g_panel_once, panel_key_init);
    if (!g_panel_key_ok) return NULL;
    panel_buf *b = pthread_getspecific(g_panel_key);
    if (!b) {
        if (!(b = hx_calloc(1, sizeof *b))) return NULL;
        if (pthread_setspecific(g_panel_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (size <= b->size) return b->p;
    free(b->p);
    b->p = hx_aligned_alloc(64, size);
    b->size = b->p ? size : 0;
    return b->p;
}

/* y[t*ldy + r] = dot(row r of w, a[t]) for r < nr, t < nt, one panel of 16
 * rows at a time. Returns 0 if the buffer cannot be had (the caller then
 * uses the dots). */
static int tile_generic(const panel_type *pt, int64_t n, const void *w, size_t ws, int nr,
                        const void *const *a, int nt, float *y, size_t ldy)
{
    int64_t n_units = n / pt->unit;
    size_t pb = pt->ub * (size_t)n_units;
    uint8_t *p = panel_buffer(pb + LANES * (size_t)n);
    if (!p) return 0;
    float res[NTOK * LANES];
    const size_t n_groups = (size_t)(nt + NTOK - 1) / NTOK;
    for (int r0 = 0; r0 < nr; r0 += LANES) {
        int rn = nr - r0 < LANES ? nr - r0 : LANES;
        pack_panel(p, pt->ub, pt->pack, (const char *)w + (size_t)r0 * ws, ws, rn, n_units, pt->unit,
                   p + pb);
        /* the next panel's rows (contiguous) are fetched while this one
         * computes, a share per token group: read row by row at unpacking,
         * short runs the hardware prefetcher does not catch in time */
        const int rnext = nr - r0 - rn < LANES ? nr - r0 - rn : LANES;
        const char *next = (const char *)w + (size_t)(r0 + rn) * ws;
        const size_t lines = rnext > 0 ? ((size_t)rnext * ws + 63) / 64 : 0;
        const size_t per = (lines + n_groups - 1) / n_groups;
        for (int t0 = 0; t0 < nt; t0 += NTOK) {
            int tn = nt - t0 < NTOK ? nt - t0 : NTOK;
            const size_t l0 = (size_t)(t0 / NTOK) * per;
            for (size_t li = l0; li < l0 + per && li < lines; li++)
                __builtin_prefetch(next + 64 * li, 0, 2);
            const void *yt[NTOK];
            for (int t = 0; t < NTOK; t++) yt[t] = a[t0 + (t < tn ? t : tn - 1)];
            pt->mk(p, n, yt, res);
            store_res(y + (size_t)t0 * ldy + r0, ldy, res, tn, rn);
        }
    }
    return 1;
}

#define TILE_FN(NAME, WT)                                                        \
    static int NAME(int64_t n, const void *w, size_t ws, int nr, const void *const *a, \
                    int nt, float *y, size_t ldy)                                \
    {                                                                            \
        return tile_generic(panel_type_of(WT), n, w, ws, nr, a, nt, y, ldy);     \
    }

TILE_FN(tile_q4_0, HX_TYPE_Q4_0)
TILE_FN(tile_q8_0, HX_TYPE_Q8_0)
TILE_FN(tile_q4_K, HX_TYPE_Q4_K)
TILE_FN(tile_q6_K, HX_TYPE_Q6_K)

void hx_kernels_fill_avx512_panel(hx_kernels *k)
{
    k->tile[HX_TYPE_Q4_0] = tile_q4_0;
    k->tile[HX_TYPE_Q8_0] = tile_q8_0;
    k->tile[HX_TYPE_Q4_K] = tile_q4_K;
    k->tile[HX_TYPE_Q6_K] = tile_q6_K;
}

#else /* not x86-64 */

void hx_kernels_fill_avx512_panel(hx_kernels *k) { (void)k; }

#endif
