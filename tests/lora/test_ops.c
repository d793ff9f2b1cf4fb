/* test_ops.c: every backward op of the training engine against central
 * differences: embedding-style matmul, RMSNorm, RoPE, attention (GQA,
 * causal, packed docs), q/k norm, SwiGLU, masked cross-entropy, LoRA. */
#include <stdint.h>

#include "engine/kernels.h"
#include "lora/train_int.h"
#include "test.h"

/* The ops are float; L = sum(w * op(x)) is accumulated in double and the
 * derivative is Richardson-extrapolated from central differences at h and
 * h/2. Float rounding of op outputs (~6e-8 relative) over step 1e-2 leaves
 * errors of ~1e-5 relative to the gradient scale: checked as
 * ||a - n|| / ||n|| < TOL over each input. */
#define H 1e-2
#define TOL 2e-4

static uint64_t rs = 1;
static float frand(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rs >> 40) / 16777216.0) * 2.0f - 1.0f;
}
static void fill(float *p, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) p[i] = s * frand();
}

/* The op under test maps the inputs (set up in ctx) to out; returns n. */
typedef struct op_case {
    void (*fwd)(struct op_case *c, float *out);
    size_t n_out;
    float *w; /* projection */
} op_case;

static double L_of(op_case *c, float *out)
{
    c->fwd(c, out);
    double s = 0;
    for (size_t i = 0; i < c->n_out; i++) s += (double)c->w[i] * out[i];
    return s;
}

/* Relative error of the analytic gradient g of input x (n) vs FD. */
static double check_input(op_case *c, float *x, size_t n, const float *g)
{
    float *out = malloc(c->n_out * sizeof(float));
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d[2];
        for (int k = 0; k < 2; k++) {
            const double h = k ? H / 2 : H;
            const float x0 = x[i];
            x[i] = (float)(x0 + h);
            const double hp = (double)x[i] - x0, lp = L_of(c, out);
            x[i] = (float)(x0 - h);
            const double hm = x0 - (double)x[i], lm = L_of(c, out);
            x[i] = x0;
            d[k] = (lp - lm) / (hp + hm);
        }
        const double fd = (4 * d[1] - d[0]) / 3;
        num += (fd - g[i]) * (fd - g[i]);
        den += fd * fd;
    }
    free(out);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- RMSNorm (also the q/k norm: same op on head_dim with a gain) ---- */
enum { RN = 24, RT = 3 };
static float rn_x[RT * RN], rn_g[RN], rn_w[RT * RN];

static void rn_fwd(op_case *c, float *out)
{
    (void)c;
    float r;
    for (int t = 0; t < RT; t++) hx_tr_rmsnorm_fwd(out + t * RN, &r, rn_x + t * RN, rn_g, RN, 1e-6f);
}

static void test_rmsnorm(void)
{
    fill(rn_x, RT * RN, 1.5f);
    fill(rn_g, RN, 1.0f);
    fill(rn_w, RT * RN, 1.0f);
    op_case c = {rn_fwd, RT * RN, rn_w};
    float dx[RT * RN] = {0}, dg[RN] = {0}, y[RN];
    for (int t = 0; t < RT; t++) {
        float r;
        hx_tr_rmsnorm_fwd(y, &r, rn_x + t * RN, rn_g, RN, 1e-6f);
        hx_tr_rmsnorm_bwd(dx + t * RN, dg, rn_w + t * RN, rn_x + t * RN, r, rn_g, RN);
    }
    double ex = check_input(&c, rn_x, RT * RN, dx), eg = check_input(&c, rn_g, RN, dg);
    printf("#   rmsnorm: dx %.1e, dgain (summed over rows) %.1e\n", ex, eg);
    EXPECT(ex < TOL);
    EXPECT(eg < TOL);
}

/* ---- RoPE (NEOX pairs i, i + d/2) ---- */
enum { RD = 16, RP = 5 };
static float ro_x[RP * RD], ro_w[RP * RD], ro_cs[RP * RD];

static void ro_fwd(op_case *c, float *out)
{
    (void)c;
    memcpy(out, ro_x, sizeof ro_x);
    for (int p = 0; p < RP; p++) hx_tr_rope_fwd(out + p * RD, ro_cs + p * RD, RD);
}

static void test_rope(void)
{
    hx_tr_rope_table(ro_cs, RP, RD, 10000.0f);
    fill(ro_x, RP * RD, 1.0f);
    fill(ro_w, RP * RD, 1.0f);
    float dx[RP * RD];
    memcpy(dx, ro_w, sizeof dx);
    for (int p = 0; p < RP; p++) hx_tr_rope_bwd(dx + p * RD, ro_cs + p * RD, RD);
    op_case c = {ro_fwd, RP * RD, ro_w};
    double e = check_input(&c, ro_x, RP * RD, dx);
    printf("#   rope: %.1e\n", e);
    EXPECT(e < TOL);
    /* NEOX pairing: position 1 rotates x[0] with x[d/2], not with x[1] */
    float v[RD] = {0};
    v[0] = 1.0f;
    hx_tr_rope_fwd(v, ro_cs + RD, RD);
    EXPECT(fabsf(v[RD / 2] - sinf(1.0f)) < 1e-6f && v[1] == 0.0f);
}

/* ---- SwiGLU ---- */
enum { SN = 40 };
static float sw_a[SN], sw_b[SN], sw_w[SN];

static void sw_fwd(op_case *c, float *out)
{
    (void)c;
    hx_tr_swiglu_fwd(out, sw_a, sw_b, SN);
}

static void test_swiglu(void)
{
    fill(sw_a, SN, 6.0f); /* both signs, large |a| for the stable sigmoid */
    fill(sw_b, SN, 1.0f);
    fill(sw_w, SN, 1.0f);
    float da[SN] = {0}, db[SN] = {0};
    hx_tr_swiglu_bwd(da, db, sw_w, sw_a, sw_b, SN);
    op_case c = {sw_fwd, SN, sw_w};
    double ea = check_input(&c, sw_a, SN, da), eb = check_input(&c, sw_b, SN, db);
    printf("#   swiglu: da %.1e, db %.1e\n", ea, eb);
    EXPECT(ea < TOL);
    EXPECT(eb < TOL);
}

/* ---- masked cross-entropy over rows ---- */
enum { XV = 20, XT = 4 };
static float xe_z[XT * XV];
static const int xe_y[XT] = {3, 0, 19, 7};
static const int xe_m[XT] = {1, 0, 1, 1};
static float xe_one = 1.0f;

static void xe_fwd(op_case *c, float *out)
{
    (void)c;
    double s = 0;
    for (int t = 0; t < XT; t++)
        if (xe_m[t]) s += hx_tr_xent(xe_z + t * XV, XV, xe_y[t], 0, NULL);
    out[0] = (float)(s / 3.0);
}

static void test_xent(void)
{
    fill(xe_z, XT * XV, 4.0f);
    float dz[XT * XV] = {0};
    for (int t = 0; t < XT; t++)
        if (xe_m[t]) hx_tr_xent(xe_z + t * XV, XV, xe_y[t], 1.0f / 3.0f, dz + t * XV);
    op_case c = {xe_fwd, 1, &xe_one};
    double e = check_input(&c, xe_z, XT * XV, dz);
    printf("#   xent: %.1e\n", e);
    EXPECT(e < 1e-3); /* one float output: coarser */
    for (int i = 0; i < XV; i++) EXPECT(dz[XV + i] == 0.0f); /* masked row */
    /* stable for huge logits */
    float big[3] = {1000.0f, -1000.0f, 999.0f};
    double l = hx_tr_xent(big, 3, 2, 0, NULL);
    EXPECT(fabs(l - (log(1 + exp(-1.0)) + 1.0)) < 1e-9);
}

/* Against a distribution (distillation): the gradient by finite
 * differences; a one-point distribution is the hard target, bit for bit. */
static const int32_t xs_y[3] = {5, 2, 17};
static const float xs_q[3] = {0.6f, 0.3f, 0.1f};

static void xs_fwd(op_case *c, float *out)
{
    (void)c;
    out[0] = (float)hx_tr_xent_soft(xe_z, XV, xs_y, xs_q, 3, 0, NULL);
}

static void test_xent_soft(void)
{
    fill(xe_z, XT * XV, 4.0f);
    float dz[XV] = {0};
    const double l = hx_tr_xent_soft(xe_z, XV, xs_y, xs_q, 3, 1.0f, dz);
    double want = 0;
    for (int j = 0; j < 3; j++) want += xs_q[j] * hx_tr_xent(xe_z, XV, xs_y[j], 0, NULL);
    EXPECT(fabs(l - want) < 1e-9);
    op_case c = {xs_fwd, 1, &xe_one};
    double e = check_input(&c, xe_z, XV, dz);
    printf("#   xent against a distribution: %.1e\n", e);
    EXPECT(e < 1e-3);
    float ds = 0; /* softmax minus q sums to 0 */
    for (int i = 0; i < XV; i++) ds += dz[i];
    EXPECT(fabs(ds) < 1e-5);
    float h[XV], g[XV];
    memcpy(h, xe_z, sizeof h), memcpy(g, xe_z, sizeof g);
    const int32_t y = 7;
    const double lh = hx_tr_xent(h, XV, 7, 0.5f, h), ls = hx_tr_xent_soft(g, XV, &y, &xe_one, 1, 0.5f, g);
    EXPECT(lh == ls);
    EXPECT(!memcmp(h, g, sizeof h));
}

/* ---- matmul, as linear layers and the head / embedding ---- */
enum { MR = 10, MC = 12, MN = 3 };
static float mm_w[MR * MC], mm_x[MN * MC], mm_wt[MN * MR];

static void mm_fwd(op_case *c, float *out)
{
    (void)c;
    tr_w w = {.f = mm_w, .rows = MR, .cols = MC};
    float sc[16 * MC];
    hx_tr_mm_fwd(NULL, &w, mm_x, MN, out, 1.0f, 0, sc);
}

static void test_matmul(void)
{
    fill(mm_w, MR * MC, 1.0f);
    fill(mm_x, MN * MC, 1.0f);
    fill(mm_wt, MN * MR, 1.0f);
    float dw[MR * MC] = {0}, dx[MN * MC] = {0}, sc[16 * MC];
    tr_w w = {.f = mm_w, .rows = MR, .cols = MC};
    hx_tr_mm_bwd_w(NULL, dw, MR, MC, mm_wt, mm_x, MN, 1.0f, 0);
    hx_tr_mm_bwd_x(NULL, &w, mm_wt, MN, dx, 1.0f, sc);
    op_case c = {mm_fwd, MN * MR, mm_wt};
    double ew = check_input(&c, mm_w, MR * MC, dw), ex = check_input(&c, mm_x, MN * MC, dx);
    printf("#   matmul: dW %.1e, dx %.1e\n", ew, ex);
    EXPECT(ew < TOL);
    EXPECT(ex < TOL);
}

/* ---- LoRA linear: y = W x + s B A x ---- */
enum { LR = 3 };
static float lo_a[LR * MC], lo_b[MR * LR];

static tr_lin lo_lin(float *da, float *db)
{
    tr_lin l = {.w = {.f = mm_w, .rows = MR, .cols = MC}, .a = lo_a, .b = lo_b, .da = da,
                .db = db, .r = LR, .s = 0.75f};
    return l;
}

static void lo_fwd(op_case *c, float *out)
{
    (void)c;
    tr_lin l = lo_lin(NULL, NULL);
    float u[MN * LR], sc[16 * MC];
    hx_tr_lin_fwd(NULL, &l, mm_x, MN, out, u, sc);
}

static void test_lora_linear(void)
{
    fill(mm_w, MR * MC, 1.0f);
    fill(mm_x, MN * MC, 1.0f);
    fill(mm_wt, MN * MR, 1.0f);
    fill(lo_a, LR * MC, 1.0f);
    fill(lo_b, MR * LR, 1.0f);
    float da[LR * MC] = {0}, db[MR * LR] = {0}, dx[MN * MC] = {0};
    float u[MN * LR], du[MN * LR], y[MN * MR], sc[16 * MC];
    tr_lin l = lo_lin(da, db);
    hx_tr_lin_fwd(NULL, &l, mm_x, MN, y, u, sc);
    hx_tr_lin_bwd(NULL, &l, mm_x, u, mm_wt, MN, dx, du, sc);
    op_case c = {lo_fwd, MN * MR, mm_wt};
    double ea = check_input(&c, lo_a, LR * MC, da), eb = check_input(&c, lo_b, MR * LR, db);
    double ex = check_input(&c, mm_x, MN * MC, dx);
    printf("#   lora linear: dA %.1e, dB %.1e, dx %.1e\n", ea, eb, ex);
    EXPECT(ea < TOL);
    EXPECT(eb < TOL);
    EXPECT(ex < TOL);
}

/* ---- attention: 4 query heads over 2 KV heads, T = 6, two documents ---- */
enum { AT = 6, AH = 4, AK = 2, AD = 8 };
static float at_q[AT * AH * AD], at_k[AT * AK * AD], at_v[AT * AK * AD];
static float at_w[AT * AH * AD];
static const int32_t at_start[AT] = {0, 0, 0, 3, 3, 3};
static const tr_attn at_a = {AT, AH, AK, AD, at_start, NULL, 0};

static void at_fwd(op_case *c, float *out)
{
    (void)c;
    float lse[AT * AH], sc[AT];
    for (int h = 0; h < AH; h++) hx_tr_attn_fwd_head(&at_a, h, at_q, at_k, at_v, out, lse, sc);
}

static void test_attention(void)
{
    fill(at_q, sizeof at_q / 4, 2.0f);
    fill(at_k, sizeof at_k / 4, 2.0f);
    fill(at_v, sizeof at_v / 4, 1.0f);
    fill(at_w, sizeof at_w / 4, 1.0f);
    float o[AT * AH * AD], lse[AT * AH], sc[AT];
    for (int h = 0; h < AH; h++) hx_tr_attn_fwd_head(&at_a, h, at_q, at_k, at_v, o, lse, sc);
    float dq[AT * AH * AD] = {0}, dk[AT * AK * AD] = {0}, dv[AT * AK * AD] = {0};
    for (int g = 0; g < AK; g++)
        hx_tr_attn_bwd_group(&at_a, g, at_q, at_k, at_v, o, lse, at_w, dq, dk, dv, sc);
    op_case c = {at_fwd, AT * AH * AD, at_w};
    double eq = check_input(&c, at_q, sizeof at_q / 4, dq);
    double ek = check_input(&c, at_k, sizeof at_k / 4, dk);
    double ev = check_input(&c, at_v, sizeof at_v / 4, dv);
    printf("#   attention: dq %.1e, dk %.1e, dv %.1e\n", eq, ek, ev);
    EXPECT(eq < TOL);
    EXPECT(ek < TOL);
    EXPECT(ev < TOL);
    /* causal + doc mask: token 0 sees only itself, token 3 only itself */
    for (int h = 0; h < AH; h++)
        for (int e = 0; e < AD; e++) {
            const int g = h / (AH / AK);
            EXPECT(fabsf(o[h * AD + e] - at_v[g * AD + e]) < 1e-6f);
            EXPECT(fabsf(o[(3 * AH + h) * AD + e] - at_v[(3 * AK + g) * AD + e]) < 1e-6f);
        }
}

/* A GEMM test's product: shape (m, n, k); mode's bits: A transposed, B
 * transposed, accumulate; leading dimensions wider than the rows. */
typedef struct gcase {
    int m, n, k, ta, tb, acc, lda, ldb, ldc;
    size_t na, nb, nc; /* floats of A, B, C */
} gcase;

static gcase gemm_case(const int shape[3], int mode)
{
    gcase g = {shape[0], shape[1], shape[2], mode & 1, mode >> 1 & 1, mode >> 2, 0, 0, 0, 0, 0, 0};
    g.lda = (g.ta ? g.m : g.k) + 3, g.ldb = (g.tb ? g.k : g.n) + 5, g.ldc = g.n + 2;
    g.na = (size_t)(g.ta ? g.k : g.m) * g.lda, g.nb = (size_t)(g.tb ? g.n : g.k) * g.ldb;
    g.nc = (size_t)g.m * g.ldc;
    return g;
}

/* ---- the packed GEMM against a double reference, on odd shapes (one
 * long enough in k to run in blocks, one wide enough in m and n for
 * tasks past the first row and column block on every ISA), every
 * transpose combination, leading dimensions wider than the rows, every ISA
 * the CPU has; one thread and two give the same bits ---- */
static void test_gemm_shapes(void)
{
    static const int shapes[][3] = {{1, 1, 1},  {13, 37, 29}, {25, 33, 70},
                                    {12, 32, 64}, {50, 17, 3}, {7, 100, 257},
                                    {37, 65, 1}, {13, 37, 530}, {101, 263, 530}};
    hx_threadpool *tp = hx_threadpool_new(2);
    ASSERT(tp);
    const int isa0 = hx_isa_current();
    double worst = 0;
    int same = 1, runs = 0;
    for (int isa = HX_ISA_SCALAR; isa <= hx_isa_detect(); isa++) {
        hx_isa_set(isa);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int mode = 0; mode < 8; mode++) {
                const gcase g = gemm_case(shapes[si], mode);
                const int m = g.m, n = g.n, k = g.k, ta = g.ta, tb = g.tb, acc = g.acc;
                const int lda = g.lda, ldb = g.ldb, ldc = g.ldc;
                const size_t na = g.na, nb = g.nb, nc = g.nc;
                float *a = malloc(na * 4), *b = malloc(nb * 4), *c0 = malloc(nc * 4);
                float *c1 = malloc(nc * 4), *c2 = malloc(nc * 4);
                ASSERT(a && b && c0 && c1 && c2);
                fill(a, na, 1.0f);
                fill(b, nb, 1.0f);
                fill(c0, nc, 1.0f);
                memcpy(c1, c0, nc * 4);
                memcpy(c2, c0, nc * 4);
                hx_tr_gemm_ref(m, n, k, 0.7f, a, lda, ta, b, ldb, tb, c0, ldc, acc);
                EXPECT(hx_tr_gemm_ex(NULL, m, n, k, 0.7f, a, lda, ta, b, ldb, tb, c1, ldc, acc) == 0);
                EXPECT(hx_tr_gemm_ex(tp, m, n, k, 0.7f, a, lda, ta, b, ldb, tb, c2, ldc, acc) == 0);
                const double e = test_nmse(c0, c1, nc);
                worst = e > worst ? e : worst;
                same &= memcmp(c1, c2, nc * 4) == 0;
                runs++;
                free(a);
                free(b);
                free(c0);
                free(c1);
                free(c2);
            }
    }
    hx_isa_set(isa0);
    hx_threadpool_free(tp);
    hx_tr_gemm_release();
    printf("#   gemm: %d products, worst nmse %.1e vs the double reference\n", runs, worst);
    EXPECT(worst < 1e-10);
    EXPECT(same);
}

/* bf16 rounding of n floats at x (ld apart rows of w) */
static void round_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = hx_bf16_to_fp32(hx_fp32_to_bf16(x[i]));
}

/* ---- the bfloat16 GEMM: on operands already bfloat16 the double
 * reference's result (the products are exact, the sums F32), on any
 * operands within bf16 rounding of it; every transpose, odd k, ragged
 * panels, blocks of k; one thread and two give the same bits ---- */
static void test_gemm_bf16(void)
{
    if (!hx_tr_gemm_bf16_available()) SKIP("no AVX512-BF16 (the CPU, or HEARTH_ISA below avx512)");
    static const int shapes[][3] = {{1, 1, 1},  {13, 37, 29}, {25, 33, 70}, {12, 32, 64},
                                    {50, 17, 3}, {7, 100, 257}, {37, 65, 1}, {13, 37, 1100}};
    hx_threadpool *tp = hx_threadpool_new(2);
    ASSERT(tp);
    double worst_exact = 0, worst_round = 0;
    int same = 1, runs = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int mode = 0; mode < 8; mode++) {
            const gcase g = gemm_case(shapes[si], mode);
            const int m = g.m, n = g.n, k = g.k, ta = g.ta, tb = g.tb, acc = g.acc;
            const int lda = g.lda, ldb = g.ldb, ldc = g.ldc;
            const size_t na = g.na, nb = g.nb, nc = g.nc;
            float *a = malloc(na * 4), *b = malloc(nb * 4), *ar = malloc(na * 4), *br = malloc(nb * 4);
            float *c0 = malloc(nc * 4), *c1 = malloc(nc * 4), *c2 = malloc(nc * 4), *c3 = malloc(nc * 4);
            ASSERT(a && b && ar && br && c0 && c1 && c2 && c3);
            fill(a, na, 1.0f);
            fill(b, nb, 1.0f);
            fill(c0, nc, 1.0f);
            memcpy(ar, a, na * 4);
            memcpy(br, b, nb * 4);
            round_bf16(ar, na);
            round_bf16(br, nb);
            memcpy(c1, c0, nc * 4);
            memcpy(c2, c0, nc * 4);
            memcpy(c3, c0, nc * 4);
            hx_tr_gemm_ref(m, n, k, 0.7f, ar, lda, ta, br, ldb, tb, c0, ldc, acc);
            hx_tr_gemm_ref(m, n, k, 0.7f, a, lda, ta, b, ldb, tb, c3, ldc, acc);
            EXPECT(hx_tr_gemm_bf16(NULL, m, n, k, 0.7f, a, lda, ta, b, ldb, tb, c1, ldc, acc) == 0);
            EXPECT(hx_tr_gemm_bf16(tp, m, n, k, 0.7f, a, lda, ta, b, ldb, tb, c2, ldc, acc) == 0);
            const double e = test_nmse(c0, c1, nc), r = test_nmse(c3, c1, nc);
            worst_exact = e > worst_exact ? e : worst_exact;
            worst_round = r > worst_round ? r : worst_round;
            same &= memcmp(c1, c2, nc * 4) == 0;
            runs++;
            free(a), free(b), free(ar), free(br);
            free(c0), free(c1), free(c2), free(c3);
        }
    hx_threadpool_free(tp);
    hx_tr_gemm_bf16_release();
    printf("#   gemm bf16: %d products, worst nmse %.1e vs the double reference on bf16 "
           "operands, %.1e on F32 ones\n", runs, worst_exact, worst_round);
    EXPECT(worst_exact < 1e-10);
    EXPECT(worst_round < 1e-4);
    EXPECT(same);
}

/* ---- the blocked AVX-512 attention (head dim 64) against the scalar one,
 * over three query blocks, with a document boundary inside one and a
 * shared prefix (its own columns in the last block) ---- */
enum { FT = 77, FH = 4, FK = 2, FD = 64 };
static float ft_q[FT * FH * FD], ft_k[FT * FK * FD], ft_v[FT * FK * FD], ft_do[FT * FH * FD];
static int ft_bf16; /* attn_run's products in bfloat16 */

static void attn_run(float *o, float *lse, float *dq, float *dk, float *dv)
{
    int32_t start[FT], pre[FT]; /* the second document sees the first 7 tokens */
    for (int i = 0; i < FT; i++) start[i] = i < 19 ? 0 : 19, pre[i] = i < 19 ? 0 : 7;
    const tr_attn a = {FT, FH, FK, FD, start, pre, ft_bf16};
    float *sc = malloc(hx_tr_attn_scratch(FT, FD) * sizeof(float));
    ASSERT(sc);
    memset(dq, 0, sizeof ft_q);
    memset(dk, 0, sizeof ft_k);
    memset(dv, 0, sizeof ft_v);
    for (int h = 0; h < FH; h++) hx_tr_attn_fwd_head(&a, h, ft_q, ft_k, ft_v, o, lse, sc);
    for (int g = 0; g < FK; g++)
        hx_tr_attn_bwd_group(&a, g, ft_q, ft_k, ft_v, o, lse, ft_do, dq, dk, dv, sc);
    free(sc);
}

/* The blocked attention (bf16: its products in bfloat16) against the scalar
 * F32 one on the same data: NMSE of o, lse, dq, dk, dv into e. */
static void attn_compare(int bf16, double e[5])
{
    fill(ft_q, sizeof ft_q / 4, 2.0f);
    fill(ft_k, sizeof ft_k / 4, 2.0f);
    fill(ft_v, sizeof ft_v / 4, 1.0f);
    fill(ft_do, sizeof ft_do / 4, 1.0f);
    static float o[2][FT * FH * FD], lse[2][FT * FH], dq[2][FT * FH * FD];
    static float dk[2][FT * FK * FD], dv[2][FT * FK * FD];
    const int isa0 = hx_isa_current();
    for (int r = 0; r < 2; r++) {
        hx_isa_set(r ? HX_ISA_AVX2 : HX_ISA_AVX512); /* AVX2: the scalar F32 ops */
        ft_bf16 = bf16 && !r;
        attn_run(o[r], lse[r], dq[r], dk[r], dv[r]);
    }
    ft_bf16 = 0;
    hx_isa_set(isa0);
    e[0] = test_nmse(o[1], o[0], sizeof o[0] / 4);
    e[1] = test_nmse(lse[1], lse[0], sizeof lse[0] / 4);
    e[2] = test_nmse(dq[1], dq[0], sizeof dq[0] / 4);
    e[3] = test_nmse(dk[1], dk[0], sizeof dk[0] / 4);
    e[4] = test_nmse(dv[1], dv[0], sizeof dv[0] / 4);
    printf("#   %s vs scalar nmse: o %.1e lse %.1e dq %.1e dk %.1e dv %.1e\n",
           bf16 ? "bf16 products" : "blocked", e[0], e[1], e[2], e[3], e[4]);
}

static void test_attention_blocked(void)
{
#if !defined(__x86_64__)
    SKIP("not x86-64: the blocked attention is AVX-512 code");
#endif
    if (hx_isa_detect() < HX_ISA_AVX512) {
        SKIP("no AVX-512: the blocked attention is not used here");
    }
    double e[5];
    attn_compare(0, e);
    for (int i = 0; i < 5; i++) EXPECT(e[i] < 1e-10);
}

/* ---- the blocked attention with bfloat16 products: within bfloat16
 * rounding of its operands of the scalar F32 one (same data and mask; the
 * shared prefix of 7 keys, the second document from key 19 and the last
 * block's 13 rows pair keys and rows from odd places) ---- */
static void test_attention_bf16(void)
{
#if !defined(__x86_64__)
    SKIP("not x86-64: the blocked attention is AVX-512 code");
#endif
    if (!hx_tr_gemm_bf16_available()) {
        SKIP("no AVX512-BF16 (the CPU, or HEARTH_ISA below avx512)");
    }
    double e[5];
    attn_compare(1, e);
    for (int i = 0; i < 5; i++) EXPECT(e[i] < 1e-4);
}

int main(void)
{
    RUN(test_rmsnorm);
    RUN(test_rope);
    RUN(test_swiglu);
    RUN(test_xent);
    RUN(test_xent_soft);
    RUN(test_matmul);
    RUN(test_lora_linear);
    RUN(test_attention);
    RUN(test_gemm_shapes);
    RUN(test_gemm_bf16);
    RUN(test_attention_blocked);
    RUN(test_attention_bf16);
    return test_summary();
}
