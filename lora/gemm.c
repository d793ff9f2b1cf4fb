/* gemm.c: the F32 matrix product of training, C (=|+=) alpha op(A) op(B):
 * operands read in place or packed into zero-padded panels, register-blocked
 * micro-kernels (AVX-512 12x32, AVX2 6x16, NEON 8x12, scalar 4x16), threads
 * over tiles. */
#include <stddef.h>
#include <string.h>

#include "engine/engine_ext.h"
#include "lora/train_int.h"

/* The AVX kernels are x86-64 code, the NEON kernel aarch64 code; each
 * architecture compiles only its own (the ISA levels 1 and 2 mean AVX2 and
 * AVX-512 on x86-64, NEON and NEON+SDOT on aarch64). */
#if defined(__x86_64__)
#include <immintrin.h>

#include "lora/tile512.h"
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

/* Every output is alpha times one sum over k in increasing order (plus C
 * when accumulating), whatever the thread count or tile a thread takes, so
 * training is bit-reproducible across thread counts on one ISA. On
 * AVX-512 A's full row panels are read in place (its rows along k); a
 * transposed A and an untransposed B, whose panels are strided rows of the
 * matrix, are copied a block of k at a time by the task that uses them
 * (rows a few KB apart thrash the L1 cache's sets); the rest is packed up
 * front. */

/* A micro-kernel's operands: A(i, p) at a[i*ra + p*sa], B(p, j) at
 * b[p*sb + j] (NR contiguous); the mr x nr corner of the tile is stored. */
typedef struct kop {
    const float *a, *b;
    ptrdiff_t ra, sa, sb;
} kop;

/* k steps of one output tile. Long products run in blocks of k: the raw
 * sums then carry between blocks through t (the tile's MR x NR floats,
 * exact), loaded unless first, stored there unless last; the last block
 * stores the mr x nr corner of alpha sum (+ C). */
typedef struct kstep {
    float *t;
    int first, last;
} kstep;

typedef void (*kernel_fn)(int k, const kop *o, float *c, int ldc, int mr,
                          int nr, float alpha, int acc, kstep ks);

/* ---- micro-kernels ---- */

/* Stores the corner of a tile held in an array (AVX2, NEON and scalar), or
 * the whole tile to ks.t when not the last block. */
static void store_tile(const float *t, int MR, int NR, float *c, int ldc,
                       int mr, int nr, float alpha, int acc, kstep ks)
{
    if (!ks.last) {
        memcpy(ks.t, t, (size_t)MR * NR * sizeof(float));
        return;
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *y = c + (size_t)i * ldc + j;
            const float v = t[i * NR + j] * alpha;
            *y = acc ? *y + v : v;
        }
}

#if defined(__x86_64__)
/* A's 12 values of step p contiguous (ra == 1), sa apart. */
__attribute__((target("avx512f"))) static void
kern_avx512(int k, const kop *o, float *c, int ldc, int mr, int nr,
            float alpha, int acc, kstep ks)
{
    __m512 s[12][2];
    tile512_init(s, ks.t, ks.first);
    const float *ap = o->a, *bp = o->b;
    const ptrdiff_t sa = o->sa, sb = o->sb;
    for (int p = 0; p < k; p++, ap += sa, bp += sb) {
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) {
            const __m512 a = _mm512_set1_ps(ap[i]);
            s[i][0] = _mm512_fmadd_ps(a, b0, s[i][0]);
            s[i][1] = _mm512_fmadd_ps(a, b1, s[i][1]);
        }
    }
    tile512_store(s, ks.t, ks.last, c, ldc, mr, nr, alpha, acc);
}

/* A's 12 rows in place (sa == 1, rows ra apart), all 12 inside A. */
__attribute__((target("avx512f"))) static void
kern_avx512_rows(int k, const kop *o, float *c, int ldc, int mr, int nr,
                 float alpha, int acc, kstep ks)
{
    __m512 s[12][2];
    tile512_init(s, ks.t, ks.first);
    const ptrdiff_t L = o->ra, sb = o->sb;
    const float *a0 = o->a, *a4 = a0 + 4 * L, *a8 = a0 + 8 * L, *bp = o->b;
    for (int p = 0; p < k; p++, a0++, a4++, a8++, bp += sb) {
        const __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);
        const float av[12] = {a0[0], a0[L], a0[2 * L], a0[3 * L], a4[0], a4[L],
                              a4[2 * L], a4[3 * L], a8[0], a8[L], a8[2 * L], a8[3 * L]};
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) {
            const __m512 a = _mm512_set1_ps(av[i]);
            s[i][0] = _mm512_fmadd_ps(a, b0, s[i][0]);
            s[i][1] = _mm512_fmadd_ps(a, b1, s[i][1]);
        }
    }
    tile512_store(s, ks.t, ks.last, c, ldc, mr, nr, alpha, acc);
}

__attribute__((target("avx2,fma"))) static void
kern_avx2(int k, const kop *o, float *c, int ldc, int mr, int nr, float alpha,
          int acc, kstep ks)
{
    __m256 s[6][2];
    for (int i = 0; i < 6; i++) {
        s[i][0] = ks.first ? _mm256_setzero_ps() : _mm256_loadu_ps(ks.t + 16 * i);
        s[i][1] = ks.first ? _mm256_setzero_ps() : _mm256_loadu_ps(ks.t + 16 * i + 8);
    }
    const float *ap = o->a, *bp = o->b;
    for (int p = 0; p < k; p++, ap += o->sa, bp += o->sb) {
        const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            const __m256 a = _mm256_broadcast_ss(ap + i);
            s[i][0] = _mm256_fmadd_ps(a, b0, s[i][0]);
            s[i][1] = _mm256_fmadd_ps(a, b1, s[i][1]);
        }
    }
    float t[6 * 16] __attribute__((aligned(32)));
    for (int i = 0; i < 6; i++) {
        _mm256_store_ps(t + i * 16, s[i][0]);
        _mm256_store_ps(t + i * 16 + 8, s[i][1]);
    }
    store_tile(t, 6, 16, c, ldc, mr, nr, alpha, acc, ks);
}
#endif /* __x86_64__ */

#if defined(__aarch64__)
/* 8 rows x 12 columns: 24 accumulators, A's 8 values of a step in two
 * vectors (ra == 1), each multiplied by lane into B's three. */
static void kern_neon(int k, const kop *o, float *c, int ldc, int mr, int nr,
                      float alpha, int acc, kstep ks)
{
    float32x4_t s[8][3];
    for (int i = 0; i < 8; i++)
        for (int v = 0; v < 3; v++)
            s[i][v] = ks.first ? vdupq_n_f32(0) : vld1q_f32(ks.t + 12 * i + 4 * v);
    const float *ap = o->a, *bp = o->b;
    for (int p = 0; p < k; p++, ap += o->sa, bp += o->sb) {
        const float32x4_t b0 = vld1q_f32(bp), b1 = vld1q_f32(bp + 4), b2 = vld1q_f32(bp + 8);
        const float32x4_t a0 = vld1q_f32(ap), a4 = vld1q_f32(ap + 4);
#define HX_NEON_ROW(i, av, l)                            \
    s[i][0] = vfmaq_laneq_f32(s[i][0], b0, av, l);       \
    s[i][1] = vfmaq_laneq_f32(s[i][1], b1, av, l);       \
    s[i][2] = vfmaq_laneq_f32(s[i][2], b2, av, l);
        HX_NEON_ROW(0, a0, 0) HX_NEON_ROW(1, a0, 1) HX_NEON_ROW(2, a0, 2) HX_NEON_ROW(3, a0, 3)
        HX_NEON_ROW(4, a4, 0) HX_NEON_ROW(5, a4, 1) HX_NEON_ROW(6, a4, 2) HX_NEON_ROW(7, a4, 3)
#undef HX_NEON_ROW
    }
    float t[8 * 12];
    for (int i = 0; i < 8; i++)
        for (int v = 0; v < 3; v++) vst1q_f32(t + 12 * i + 4 * v, s[i][v]);
    store_tile(t, 8, 12, c, ldc, mr, nr, alpha, acc, ks);
}
#endif /* __aarch64__ */

static void kern_scalar(int k, const kop *o, float *c, int ldc, int mr, int nr,
                        float alpha, int acc, kstep ks)
{
    float s[4 * 16] = {0};
    if (!ks.first) memcpy(s, ks.t, sizeof s);
    const float *ap = o->a, *bp = o->b;
    for (int p = 0; p < k; p++, ap += o->sa, bp += o->sb)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 16; j++) s[i * 16 + j] += ap[i] * bp[j];
    store_tile(s, 4, 16, c, ldc, mr, nr, alpha, acc, ks);
}

typedef struct isa_kern {
    int MR, NR;
    kernel_fn fn;
    kernel_fn rows; /* A read by rows in place, or NULL (A packed) */
} isa_kern;

/* Per ISA level (engine/kernels.h): on aarch64 NEON and NEON+SDOT alike
 * (a float product has no use for SDOT). */
#if defined(__x86_64__)
static const isa_kern k_kerns[3] = {{4, 16, kern_scalar, NULL},
                                    {6, 16, kern_avx2, NULL},
                                    {12, 32, kern_avx512, kern_avx512_rows}};
#elif defined(__aarch64__)
static const isa_kern k_kerns[3] = {{4, 16, kern_scalar, NULL},
                                    {8, 12, kern_neon, NULL},
                                    {8, 12, kern_neon, NULL}};
#else
static const isa_kern k_kerns[3] = {{4, 16, kern_scalar, NULL},
                                    {4, 16, kern_scalar, NULL},
                                    {4, 16, kern_scalar, NULL}};
#endif

/* ---- packing ---- */

/* A (m x k; element (i, p) at a[i*lda + p], or a[p*lda + i] when ta) rows
 * [i0, i0+MR) into ap (k x MR), zero past m. */
static void pack_a(float *ap, const float *a, int lda, int ta, int m, int k,
                   int i0, int MR)
{
    const int mr = m - i0 < MR ? m - i0 : MR;
    if (ta) {
        for (int p = 0; p < k; p++) {
            const float *src = a + (size_t)p * lda + i0;
            float *dst = ap + (size_t)p * MR;
            memcpy(dst, src, (size_t)mr * sizeof(float));
            if (mr < MR) memset(dst + mr, 0, (size_t)(MR - mr) * sizeof(float));
        }
        return;
    }
    for (int i = 0; i < MR; i++) {
        if (i >= mr) {
            for (int p = 0; p < k; p++) ap[(size_t)p * MR + i] = 0.0f;
            continue;
        }
        const float *src = a + (size_t)(i0 + i) * lda;
        for (int p = 0; p < k; p++) ap[(size_t)p * MR + i] = src[p];
    }
}

/* B (k x n; element (p, j) at b[p*ldb + j], or b[j*ldb + p] when tb)
 * columns [j0, j0+NR) into bp (k x NR), zero past n. */
static void pack_b(float *bp, const float *b, int ldb, int tb, int n, int k,
                   int j0, int NR)
{
    pack_a(bp, b, ldb, !tb, n, k, j0, NR);
}

/* ---- the product on the pool ---- */

/* Panels per task: rows of MR and columns of NR. */
#define ROW_PANELS 8
#define COL_PANELS 8
#define PACK_PANELS 2

typedef struct gemm_job {
    const isa_kern *kn;
    int m, n, k, lda, ldb, ldc, ta, tb, acc;
    int mp, np, n_rb, n_cb; /* panels; row and column blocks */
    int pa0;                /* A's panels from this on are packed up front (B's
                             * all when tb); a transposed A and an untransposed
                             * B are copied a block at a time (block_operands) */
    const float *a, *b;
    float *c, *ap, *bp;
    float *carry;           /* per thread, CARRY tiles */
    float *blk;             /* per thread, blk_floats(): a task's blocks of A and B */
    float alpha;
} gemm_job;

static void pack_task(void *ctx, int task, int thread)
{
    const gemm_job *j = ctx;
    const int MR = j->kn->MR, NR = j->kn->NR;
    const int na = (j->mp - j->pa0 + PACK_PANELS - 1) / PACK_PANELS;
    (void)thread;
    if (task < na) {
        const int p0 = j->pa0 + task * PACK_PANELS;
        const int p1 = p0 + PACK_PANELS < j->mp ? p0 + PACK_PANELS : j->mp;
        for (int p = p0; p < p1; p++)
            pack_a(j->ap + (size_t)(p - j->pa0) * MR * j->k, j->a, j->lda, j->ta, j->m, j->k, p * MR, MR);
        return;
    }
    const int p0 = (task - na) * PACK_PANELS;
    const int p1 = p0 + PACK_PANELS < j->np ? p0 + PACK_PANELS : j->np;
    for (int p = p0; p < p1; p++)
        pack_b(j->bp + (size_t)p * NR * j->k, j->b, j->ldb, j->tb, j->n, j->k, p * NR, NR);
}

/* Steps of k per block: a block's panels stay in cache across the tiles
 * of a task. Block boundaries depend only on k. */
#define KC 256
#define KC_MAX (KC + KC / 2)
#define CARRY (ROW_PANELS * COL_PANELS)

/* Floats of a thread's block buffer for panels of MR and NR. */
static size_t blk_floats(int MR, int NR)
{
    return (size_t)KC_MAX * (ROW_PANELS * MR + COL_PANELS * NR);
}

/* A task's operands for the block of k [kb, kb+kc): strided ones (A
 * transposed, B untransposed) copied into the thread's buffer, panel after
 * panel, so the kernel streams them from cache; the rest in place or in
 * the panels packed up front. */
static void block_operands(const gemm_job *j, int thread, int kb, int kc, int i0, int i1,
                           int c0, int c1, float **ab, float **bb)
{
    const int MR = j->kn->MR, NR = j->kn->NR;
    float *buf = j->blk + (size_t)thread * blk_floats(MR, NR);
    *ab = buf;
    *bb = buf + (size_t)KC_MAX * ROW_PANELS * MR;
    for (int ip = i0; ip < i1 && j->ta; ip++)
        pack_a(*ab + (size_t)(ip - i0) * kc * MR, j->a + (size_t)kb * j->lda, j->lda, 1, j->m,
               kc, ip * MR, MR);
    for (int jp = c0; jp < c1 && !j->tb; jp++)
        pack_b(*bb + (size_t)(jp - c0) * kc * NR, j->b + (size_t)kb * j->ldb, j->ldb, 0, j->n,
               kc, jp * NR, NR);
}

static void tile_task(void *ctx, int task, int thread)
{
    const gemm_job *j = ctx;
    const int MR = j->kn->MR, NR = j->kn->NR;
    const int rb = task % j->n_rb, cb = task / j->n_rb;
    const int i0 = rb * ROW_PANELS, i1 = i0 + ROW_PANELS < j->mp ? i0 + ROW_PANELS : j->mp;
    const int c0 = cb * COL_PANELS, c1 = c0 + COL_PANELS < j->np ? c0 + COL_PANELS : j->np;
    const ptrdiff_t lda = j->lda;
    for (int kb = 0; kb < j->k; kb += KC) {
        const int kc = j->k - kb <= KC + KC / 2 ? j->k - kb : KC;
        kstep ks = {NULL, kb == 0, kb + kc == j->k};
        float *ab, *bb;
        block_operands(j, thread, kb, kc, i0, i1, c0, c1, &ab, &bb);
        for (int jp = c0; jp < c1; jp++) {
            const int nr = j->n - jp * NR < NR ? j->n - jp * NR : NR;
            kop o = {NULL, bb + (size_t)(jp - c0) * kc * NR, 1, MR, NR};
            if (j->tb) o.b = j->bp + ((size_t)jp * j->k + kb) * NR;
            for (int ip = i0; ip < i1; ip++) {
                const int mr = j->m - ip * MR < MR ? j->m - ip * MR : MR;
                kernel_fn fn = j->kn->fn;
                if (j->ta)
                    o.a = ab + (size_t)(ip - i0) * kc * MR, o.ra = 1, o.sa = MR;
                else if (ip >= j->pa0)
                    o.a = j->ap + ((size_t)(ip - j->pa0) * j->k + kb) * MR, o.ra = 1, o.sa = MR;
                else
                    o.a = j->a + (ptrdiff_t)ip * MR * lda + kb, o.ra = lda, o.sa = 1, fn = j->kn->rows;
                ks.t = j->carry + ((size_t)thread * CARRY + (size_t)(jp - c0) * ROW_PANELS + (ip - i0)) * MR * NR;
                fn(kc, &o, j->c + (size_t)ip * MR * j->ldc + (size_t)jp * NR, j->ldc, mr, nr,
                   j->alpha, j->acc, ks);
            }
        }
        if (ks.last) break;
    }
}

/* The packing buffer: held until hx_tr_gemm_release. */
static tr_scratch g_pack = TR_SCRATCH_INIT;

void hx_tr_gemm_release(void) { hx_tr_scratch_release(&g_pack); }

int hx_tr_gemm_ex(hx_threadpool *tp, int m, int n, int k, float alpha,
                  const float *a, int lda, int ta, const float *b, int ldb, int tb,
                  float *c, int ldc, int acc)
{
    if (m <= 0 || n <= 0) return 0;
    if (k <= 0) {
        for (int i = 0; i < m && !acc; i++) memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof(float));
        return 0;
    }
    const int isa = hx_isa_current();
    gemm_job j = {&k_kerns[isa < 0 ? 0 : isa > 2 ? 2 : isa], m, n, k, lda, ldb, ldc, ta, tb, acc,
                  0, 0, 0, 0, 0, a, b, c, NULL, NULL, NULL, NULL, alpha};
    const int MR = j.kn->MR, NR = j.kn->NR;
    j.mp = (m + MR - 1) / MR;
    j.np = (n + NR - 1) / NR;
    j.n_rb = (j.mp + ROW_PANELS - 1) / ROW_PANELS;
    j.n_cb = (j.np + COL_PANELS - 1) / COL_PANELS;
    /* A untransposed: its full panels read in place when the kernel can,
     * the rest packed up front; B transposed: packed up front. A
     * transposed and B untransposed: each task packs its block of k. */
    j.pa0 = ta ? j.mp : j.kn->rows ? m / MR : 0;
    /* only the panels packed up front take room */
    const size_t na = (size_t)(j.mp - j.pa0) * MR * k, nb = tb ? (size_t)j.np * NR * k : 0;
    const size_t nt = (size_t)hx_threadpool_n_threads(tp);
    const size_t nc = nt * CARRY * MR * NR, nk = nt * blk_floats(MR, NR);
    const size_t need = (na + 15) / 16 * 16 + (nb + 15) / 16 * 16 + (nc + 15) / 16 * 16 + nk;
    float *buf = hx_tr_scratch_lock(&g_pack, need * sizeof(float));
    if (!buf) return -1;
    j.ap = buf;
    j.bp = buf + (na + 15) / 16 * 16;
    j.carry = j.bp + (nb + 15) / 16 * 16;
    j.blk = j.carry + (nc + 15) / 16 * 16;
    const int n_pack = (j.mp - j.pa0 + PACK_PANELS - 1) / PACK_PANELS +
                       (tb ? (j.np + PACK_PANELS - 1) / PACK_PANELS : 0);
    if (n_pack) hx_threadpool_run(tp, n_pack, pack_task, &j);
    hx_threadpool_run(tp, j.n_rb * j.n_cb, tile_task, &j);
    hx_tr_scratch_unlock(&g_pack);
    return 0;
}

/* Scalar reference for the tests: one double sum per output. */
void hx_tr_gemm_ref(int m, int n, int k, float alpha, const float *a, int lda,
                    int ta, const float *b, int ldb, int tb, float *c, int ldc,
                    int acc)
{
    for (int i = 0; i < m; i++)
        for (int jj = 0; jj < n; jj++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p]) *
                     (tb ? b[(size_t)jj * ldb + p] : b[(size_t)p * ldb + jj]);
            float *y = c + (size_t)i * ldc + jj;
            *y = (float)(alpha * s + (acc ? *y : 0.0));
        }
}

void hx_tr_gemm(hx_threadpool *tp, const float *A, int n, int K, const float *B,
                int M, float *Y, float alpha, int acc)
{
    if (hx_tr_gemm_ex(tp, n, M, K, alpha, A, K, 0, B, M, 0, Y, M, acc))
        hx_tr_gemm_ref(n, M, K, alpha, A, K, 0, B, M, 0, Y, M, acc);
}
