/* gemm_bf16.c: the matrix product of training with bfloat16 operands,
 * C (=|+=) alpha op(A) op(B): both operands rounded to bfloat16 (nearest,
 * ties to even) and packed in pairs along k, each output one F32 sum of
 * AVX512-BF16 pair products (vdpbf16ps: twice the products of an F32 FMA
 * per instruction) in a fixed order, whatever the thread count. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/engine_ext.h"
#include "lora/train_int.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "lora/tile512.h"
#define BF_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

enum { MR = 12, NR = 32, KC2 = 256 /* pairs of k per block */ };

int hx_tr_gemm_bf16_available(void)
{
    return hx_isa_current() >= HX_ISA_AVX512 && __builtin_cpu_supports("avx512bf16");
}

/* 16 pairs (x[q], y[q]) as bf16 in the lanes of a vector, from the first
 * n floats of x and of y (y NULL: zeros). */
BF_TARGET static __m512i pairs16(const float *x, const float *y, int n)
{
    static const uint16_t mix[32] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                     8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __mmask16 m = tile512_lanes(n);
    const __m512 vx = _mm512_maskz_loadu_ps(m, x);
    const __m512 vy = y ? _mm512_maskz_loadu_ps(m, y) : _mm512_setzero_ps();
    const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(vy, vx); /* x in 0..15, y in 16..31 */
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(mix), h);
}

/* The first n floats of x (n <= 32) as n/2 pairs, rounded up (the odd
 * last one paired with zero), in the lanes of a vector. */
BF_TARGET static __m512i row_pairs(const float *x, int n)
{
    const __m512 lo = _mm512_maskz_loadu_ps(tile512_lanes(n), x);
    const __m512 hi = _mm512_maskz_loadu_ps(tile512_lanes(n - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* A row of k floats as (k + 1) / 2 pairs at dst. */
BF_TARGET static void convert_row(uint32_t *dst, const float *x, int k)
{
    for (int p = 0; p < k; p += 32) {
        const int n = k - p < 32 ? k - p : 32;
        _mm512_mask_storeu_epi32(dst + p / 2, tile512_lanes((n + 1) / 2), row_pairs(x + p, n));
    }
}

/* Pairs q in [q0, q1) of every W-wide panel of a matrix whose element
 * (p, r) is x[p*ld + r], r < w (rows stored along r, so pairs interleave
 * two rows): (e(2q, r), e(2q+1, r)) at out[panel * W * k2 + q * W + r - panel
 * * W], zero past w. Row pairs outermost, so the rows stream. */
BF_TARGET static void pack_strided(uint32_t *out, int W, const float *x, int ld, int k,
                                   int w, int q0, int q1)
{
    const int k2 = (k + 1) / 2, np = (w + W - 1) / W;
    for (int q = q0; q < q1; q++) {
        const float *x0 = x + (size_t)2 * q * ld, *x1 = 2 * q + 1 < k ? x0 + ld : NULL;
        for (int p = 0; p < np; p++)
            for (int r = 0; r < W; r += 16) {
                const int c = p * W + r, n = w - c < 16 ? w - c : 16;
                _mm512_mask_storeu_epi32(out + ((size_t)p * k2 + q) * W + r,
                                         tile512_lanes(W - r),
                                         n > 0 ? pairs16(x0 + c, x1 ? x1 + c : NULL, n)
                                               : _mm512_setzero_si512());
            }
    }
}

/* Pairs of w rows stored along k (row r at x + r*ld), at out[q * W + r]:
 * each row converted, then the block transposed; rows past w are zero. */
BF_TARGET static void pack_rows(uint32_t *out, int W, const float *x, int ld, int k, int w)
{
    const int k2 = (k + 1) / 2;
    uint32_t t[16];
    for (int q0 = 0; q0 < k2; q0 += 16) {
        const int nq = k2 - q0 < 16 ? k2 - q0 : 16;
        for (int r = 0; r < W; r++) {
            if (r < w) {
                const int n = k - 2 * q0 < 32 ? k - 2 * q0 : 32;
                _mm512_storeu_si512(t, row_pairs(x + (size_t)r * ld + 2 * q0, n));
            } else {
                memset(t, 0, sizeof t);
            }
            for (int q = 0; q < nq; q++) out[(size_t)(q0 + q) * W + r] = t[q];
        }
    }
}

/* Where a tile's sums go: carried to the next block of k through t
 * (first: none yet), or, in the last block, the mr x nr corner of C. */
typedef struct btile {
    float *t, *c;
    int first, last, ldc, mr, nr, acc;
    float alpha;
} btile;

/* A tile over kc pairs: A's pair q of row i at a[i*ra + q*sa], B's 32
 * pairs of step q at b + q*NR. */
BF_TARGET static void kern_bf16(int kc, const uint32_t *a, ptrdiff_t ra, ptrdiff_t sa,
                                const uint32_t *b, const btile *o)
{
    __m512 s[MR][2];
    tile512_init(s, o->t, o->first);
    for (int q = 0; q < kc; q++, a += sa, b += NR) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[i * ra]);
            s[i][0] = _mm512_dpbf16_ps(s[i][0], av, b0);
            s[i][1] = _mm512_dpbf16_ps(s[i][1], av, b1);
        }
    }
    tile512_store(s, o->t, o->last, o->c, o->ldc, o->mr, o->nr, o->alpha, o->acc);
}

#define ROW_PANELS 8
#define COL_PANELS 4
#define CARRY (ROW_PANELS * COL_PANELS)

typedef struct bjob {
    int m, n, k, k2, lda, ldb, ldc, ta, tb, acc, mp, np, n_rb;
    const float *a, *b;
    float *c, *carry;
    uint32_t *ap, *bp; /* A: rows (ta 0: m rounded to MR, k2 each) or
                        * panels (ta 1: [panel][q][MR]); B: [panel][q][NR] */
    float alpha;
} bjob;

/* Pairs of k a strided packing task takes (all panels at once). */
#define QCH 64

/* Packing tasks of A: one per row panel (A read by rows), or one per QCH
 * pairs of k (A transposed: its rows along m); of B likewise. */
static int a_tasks(const bjob *j) { return j->ta ? (j->k2 + QCH - 1) / QCH : j->mp; }
static int b_tasks(const bjob *j) { return j->tb ? j->np : (j->k2 + QCH - 1) / QCH; }

static void bpack_task(void *ctx, int t, int thread)
{
    const bjob *j = ctx;
    (void)thread;
    const int na = a_tasks(j);
    if (t < na && j->ta) {
        const int q0 = t * QCH, q1 = q0 + QCH < j->k2 ? q0 + QCH : j->k2;
        pack_strided(j->ap, MR, j->a, j->lda, j->k, j->m, q0, q1);
    } else if (t < na) {
        const int i0 = t * MR, w = j->m - i0 < MR ? j->m - i0 : MR;
        uint32_t *out = j->ap + (size_t)i0 * j->k2;
        for (int i = 0; i < MR; i++) {
            if (i < w) convert_row(out + (size_t)i * j->k2, j->a + (size_t)(i0 + i) * j->lda, j->k);
            else memset(out + (size_t)i * j->k2, 0, (size_t)j->k2 * sizeof *out);
        }
    } else if (j->tb) {
        const int j0 = (t - na) * NR, w = j->n - j0 < NR ? j->n - j0 : NR;
        pack_rows(j->bp + (size_t)j0 * j->k2, NR, j->b + (size_t)j0 * j->ldb, j->ldb, j->k, w);
    } else {
        const int q0 = (t - na) * QCH, q1 = q0 + QCH < j->k2 ? q0 + QCH : j->k2;
        pack_strided(j->bp, NR, j->b, j->ldb, j->k, j->n, q0, q1);
    }
}

static void btile_task(void *ctx, int task, int thread)
{
    const bjob *j = ctx;
    const int rb = task % j->n_rb, cb = task / j->n_rb;
    const int i0 = rb * ROW_PANELS, i1 = i0 + ROW_PANELS < j->mp ? i0 + ROW_PANELS : j->mp;
    const int c0 = cb * COL_PANELS, c1 = c0 + COL_PANELS < j->np ? c0 + COL_PANELS : j->np;
    for (int qb = 0; qb < j->k2; qb += KC2) {
        const int kc = j->k2 - qb <= KC2 + KC2 / 2 ? j->k2 - qb : KC2;
        const int first = qb == 0, last = qb + kc == j->k2;
        for (int jp = c0; jp < c1; jp++) {
            const int nr = j->n - jp * NR < NR ? j->n - jp * NR : NR;
            const uint32_t *b = j->bp + ((size_t)jp * j->k2 + qb) * NR;
            for (int ip = i0; ip < i1; ip++) {
                const int mr = j->m - ip * MR < MR ? j->m - ip * MR : MR;
                const uint32_t *a = j->ap + (size_t)ip * MR * j->k2;
                float *t = j->carry + ((size_t)thread * CARRY + (size_t)(jp - c0) * ROW_PANELS +
                                       (ip - i0)) * MR * NR;
                const btile o = {t, j->c + (size_t)ip * MR * j->ldc + (size_t)jp * NR, first,
                                 last, j->ldc, mr, nr, j->acc, j->alpha};
                if (j->ta) kern_bf16(kc, a + (size_t)qb * MR, 1, MR, b, &o);
                else kern_bf16(kc, a + qb, j->k2, 1, b, &o);
            }
        }
        if (last) break;
    }
}

/* The packed operands and carry tiles: held until hx_tr_gemm_bf16_release. */
static tr_scratch g_pack = TR_SCRATCH_INIT;

void hx_tr_gemm_bf16_release(void) { hx_tr_scratch_release(&g_pack); }

int hx_tr_gemm_bf16(hx_threadpool *tp, int m, int n, int k, float alpha, const float *a,
                    int lda, int ta, const float *b, int ldb, int tb, float *c, int ldc, int acc)
{
    if (!hx_tr_gemm_bf16_available()) return -1;
    if (m <= 0 || n <= 0) return 0;
    if (k <= 0) {
        for (int i = 0; i < m && !acc; i++) memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof(float));
        return 0;
    }
    bjob j = {m, n, k, (k + 1) / 2, lda, ldb, ldc, ta, tb, acc, (m + MR - 1) / MR,
              (n + NR - 1) / NR, 0, a, b, c, NULL, NULL, NULL, alpha};
    j.n_rb = (j.mp + ROW_PANELS - 1) / ROW_PANELS;
    const int n_cb = (j.np + COL_PANELS - 1) / COL_PANELS;
    const size_t na = (size_t)j.mp * MR * j.k2, nb = (size_t)j.np * NR * j.k2;
    const size_t nc = (size_t)hx_threadpool_n_threads(tp) * CARRY * MR * NR;
    const size_t need = ((na + nb + 15) / 16 * 16 + nc) * 4;
    j.ap = hx_tr_scratch_lock(&g_pack, need);
    if (!j.ap) return -1;
    j.bp = j.ap + na;
    j.carry = (float *)(j.ap + (na + nb + 15) / 16 * 16);
    hx_threadpool_run(tp, a_tasks(&j) + b_tasks(&j), bpack_task, &j);
    hx_threadpool_run(tp, j.n_rb * n_cb, btile_task, &j);
    hx_tr_scratch_unlock(&g_pack);
    return 0;
}

#else /* no AVX512-BF16 code off x86-64 */

int hx_tr_gemm_bf16_available(void) { return 0; }
void hx_tr_gemm_bf16_release(void) {}
int hx_tr_gemm_bf16(hx_threadpool *tp, int m, int n, int k, float alpha, const float *a,
                    int lda, int ta, const float *b, int ldb, int tb, float *c, int ldc, int acc)
{
    (void)tp, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)ta;
    (void)b, (void)ldb, (void)tb, (void)c, (void)ldc, (void)acc;
    return -1;
}
#endif
