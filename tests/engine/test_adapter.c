/* test_adapter.c: LoRA adapters applied at run time: logits against
 * llama.cpp (tests/ref) at several scales, two at once, on F32, Q8_0 and
 * Q4_K_M bases; scale 0 and B = 0 equal the base bit for bit; merged
 * equals unmerged; switching between requests; base identity; malformed
 * adapters refused with the problem named. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "ref/ref.h"
#include "test.h"

#define N_SEQ 8
static char tmpdir[256];

static int ref_ready(void)
{
    char why[512];
    if (ref_available(why, sizeof why)) return 1;
    test_skip("%s", why);
    return 0;
}

/* ---- models and adapters ---- */

/* A random qwen3 model; small F32/Q8_0 shapes, or K-quant shapes (256). */
static int make_base(const char *path, const char *ftype, int kquant,
                     uint64_t seed, const char *vocab)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.ftype = ftype;
    p.vocab_path = vocab;
    p.n_vocab = 300;
    p.seed = seed;
    p.tied_output = 1;
    if (!kquant) {
        p.n_embd = 32, p.n_head = 2, p.n_head_kv = 1, p.head_dim = 16;
        p.n_ff = 64;
        p.tied_output = vocab != NULL; /* keep the big vocabulary small */
    }
    p.n_ctx = 64;
    hx_err err = {0};
    int rc = hx_mkmodel_write(&p, path, &err);
    if (rc) printf("# mkmodel: %s\n", err.msg);
    return rc;
}

typedef struct ad_spec {
    int rank;
    float alpha;
    const char *targets; /* letters: q k v o g u d (h: output head) */
    float b_std;         /* 0: B = 0 */
    uint64_t seed;
    int type;            /* HX_TYPE_F32 or HX_TYPE_F16 */
    const char *base_id; /* NULL: no identity key */
} ad_spec;

static float rnd_normal(uint64_t *s)
{
    double u1 = 0, u2 = 0;
    for (int i = 0; i < 2; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        double u = ((*s >> 11) + 0.5) / 9007199254740992.0;
        if (i == 0) u1 = u;
        else u2 = u;
    }
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

static const char *const k_kinds = "qkvogud";
static const char *const k_names[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                      "ffn_gate", "ffn_up", "ffn_down"};

/* Writes an adapter for the model at base_path following spec. */
static int make_adapter(const char *base_path, const char *path,
                        const ad_spec *sp)
{
    hx_gguf *g = NULL;
    hx_err err = {0};
    if (hx_gguf_open(base_path, &g, &err)) return -1;
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_gguf_set_str(w, "general.architecture", "qwen3");
    hx_gguf_set_str(w, "general.type", "adapter");
    hx_gguf_set_str(w, "adapter.type", "lora");
    hx_gguf_set_f32(w, "adapter.lora.alpha", sp->alpha);
    if (sp->base_id) hx_gguf_set_str(w, HX_ADAPTER_BASE_KEY, sp->base_id);
    uint64_t s = sp->seed;
    void *bufs[128];
    int nb = 0;
    for (int64_t i = 0; i < hx_gguf_n_tensors(g) && nb < 120; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        int want = 0;
        for (int k = 0; k < 7; k++) {
            char nm[64];
            snprintf(nm, sizeof nm, ".%s.weight", k_names[k]);
            size_t ln = strlen(t->name), lm = strlen(nm);
            if (ln > lm && !strcmp(t->name + ln - lm, nm) && strchr(sp->targets, k_kinds[k]))
                want = 1;
        }
        if (!strcmp(t->name, "output.weight") && strchr(sp->targets, 'h')) want = 1;
        if (!want) continue;
        const int64_t in = t->ne[0], out = t->ne[1], r = sp->rank;
        int64_t nea[2] = {in, r}, neb[2] = {r, out};
        float *a = malloc((size_t)(in * r) * 4), *b = malloc((size_t)(out * r) * 4);
        for (int64_t j = 0; j < in * r; j++) a[j] = rnd_normal(&s) / sqrtf((float)in);
        for (int64_t j = 0; j < out * r; j++) b[j] = sp->b_std * rnd_normal(&s);
        void *pa = a, *pb = b;
        if (sp->type == HX_TYPE_F16) {
            uint16_t *ha = malloc((size_t)(in * r) * 2), *hb = malloc((size_t)(out * r) * 2);
            for (int64_t j = 0; j < in * r; j++) ha[j] = hx_fp32_to_fp16(a[j]);
            for (int64_t j = 0; j < out * r; j++) hb[j] = hx_fp32_to_fp16(b[j]);
            free(a), free(b);
            pa = ha, pb = hb;
        }
        char na[128], nbn[128];
        snprintf(na, sizeof na, "%s.lora_a", t->name);
        snprintf(nbn, sizeof nbn, "%s.lora_b", t->name);
        hx_gguf_add_tensor(w, na, sp->type, 2, nea, pa, NULL, NULL);
        hx_gguf_add_tensor(w, nbn, sp->type, 2, neb, pb, NULL, NULL);
        bufs[nb++] = pa, bufs[nb++] = pb;
    }
    int rc = hx_gguf_writer_write(w, path, &err);
    if (rc) printf("# adapter write: %s\n", err.msg);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    hx_gguf_writer_free(w);
    hx_gguf_close(g);
    return rc;
}

static hx_model *load_model(const char *path)
{
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    mp.no_vocab = 1;
    hx_err err = {0};
    if (hx_model_load(path, &mp, &m, &err)) printf("# load %s: %s\n", path, err.msg);
    return m;
}

static hx_ctx *new_ctx(hx_model *m)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 64;
    cp.kv_f32 = 1;
    cp.n_threads = 2;
    hx_ctx *c = NULL;
    hx_err err = {0};
    if (hx_ctx_new(m, &cp, &c, &err)) printf("# ctx: %s\n", err.msg);
    return c;
}

static hx_adapter *load_adapter(hx_model *m, const char *path)
{
    hx_adapter *a = NULL;
    hx_err err = {0};
    if (hx_adapter_load(m, path, &a, &err)) printf("# adapter: %s\n", err.msg);
    return a;
}

/* Teacher-forced logits of ids on c from position 0 (n * n_vocab, malloc'd). */
static float *logits_of(hx_ctx *c, const int32_t *ids, int n)
{
    hx_ctx_truncate(c, 0);
    if (hx_decode(c, ids, n, 1)) {
        printf("# decode: %s\n", hx_ctx_errmsg(c));
        return NULL;
    }
    const int V = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    float *out = malloc((size_t)n * V * sizeof(float));
    for (int i = 0; out && i < n; i++)
        memcpy(out + (size_t)i * V, hx_ctx_logits(c, i), (size_t)V * sizeof(float));
    return out;
}

static double worst_nmse(const float *ref, const float *got, int n, int V)
{
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double e = test_nmse(ref + (size_t)i * V, got + (size_t)i * V, (size_t)V);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

static void make_ids(int32_t *ids, int n, int32_t n_normal)
{
    uint64_t x = 777;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)n_normal);
    }
}

static void ref_config(void)
{
    setenv("HXREF_KV", "f32", 1);
    setenv("HXREF_FLASH", "0", 1);
    setenv("HXREF_THREADS", "1", 0);
}

/* ---- against llama.cpp ---- */

/* One base type: adapters at several scales, and two at once. */
static void compare_base(const char *ftype, int kquant, double tol,
                         int n_scales)
{
    ref_config();
    if (!ref_ready()) return;
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    char base[512], a1[512], a2[512];
    snprintf(base, sizeof base, "%s/base-%s.gguf", tmpdir, ftype);
    snprintf(a1, sizeof a1, "%s/a1-%s.gguf", tmpdir, ftype);
    snprintf(a2, sizeof a2, "%s/a2-%s.gguf", tmpdir, ftype);
    ASSERT(make_base(base, ftype, kquant, 3, vocab) == 0);
    ad_spec s1 = {4, 8.0f, "qkvogud", 0.5f, 11, HX_TYPE_F32, NULL};
    ad_spec s2 = {2, 0.0f, "qvd", 0.3f, 12, HX_TYPE_F32, NULL}; /* alpha 0: scale 1 */
    ASSERT(make_adapter(base, a1, &s1) == 0 && make_adapter(base, a2, &s2) == 0);
    hx_model *m = load_model(base);
    ASSERT(m);
    hx_ctx *c = new_ctx(m);
    hx_adapter *ad1 = load_adapter(m, a1), *ad2 = load_adapter(m, a2);
    ASSERT(c && ad1 && ad2);
    const int V = hx_model_hparams(m)->n_vocab;
    int32_t ids[N_SEQ];
    make_ids(ids, N_SEQ, 151643);
    float *plain = logits_of(c, ids, N_SEQ), *ref = NULL;
    int nv = 0;
    static const float scales[] = {1.0f, 0.5f, 2.0f, -1.0f};
    for (int i = 0; i < n_scales; i++) {
        char sc[32];
        snprintf(sc, sizeof sc, "%.9g", (double)scales[i]);
        ASSERT(hx_ctx_set_adapters(c, &ad1, &scales[i], 1) == HX_OK);
        float *got = logits_of(c, ids, N_SEQ);
        ASSERT(got);
        if (ref_loras_logits(base, a1, sc, ids, N_SEQ, &ref, &nv) != 0) {
            test_fail_at(__FILE__, __LINE__, "llama.cpp: %s", ref_error());
            free(got);
            break;
        }
        ASSERT(nv == V);
        double e = worst_nmse(ref, got, N_SEQ, V), moved = worst_nmse(plain, got, N_SEQ, V);
        printf("# %-6s scale %5s: nmse vs llama.cpp %.2e (tolerance %.0e), "
               "adapter moves logits by %.2e\n", ftype, sc, e, tol, moved);
        EXPECT(e <= tol);
        EXPECT(moved > 1e-3);
        free(got), free(ref);
        ref = NULL;
    }
    /* two at once, with their own scales */
    hx_adapter *both[2] = {ad1, ad2};
    const float bs[2] = {0.7f, 1.5f};
    char list[1100];
    snprintf(list, sizeof list, "%s,%s", a1, a2);
    ASSERT(hx_ctx_set_adapters(c, both, bs, 2) == HX_OK);
    float *got = logits_of(c, ids, N_SEQ);
    ASSERT(got);
    if (ref_loras_logits(base, list, "0.7,1.5", ids, N_SEQ, &ref, &nv) != 0)
        test_fail_at(__FILE__, __LINE__, "llama.cpp: %s", ref_error());
    else {
        double e = worst_nmse(ref, got, N_SEQ, V);
        printf("# %-6s two adapters (0.7, 1.5): nmse vs llama.cpp %.2e\n", ftype, e);
        EXPECT(e <= tol);
    }
    free(got), free(ref), free(plain);
    hx_ctx_free(c);
    hx_adapter_free(ad1);
    hx_adapter_free(ad2);
    hx_model_free(m);
    unlink(base), unlink(a1), unlink(a2);
}

/* Tolerances of test_diff.c (F32 KV cache on both sides); every scale on
 * the F32 base, one on the quantized ones (each llama.cpp run reloads);
 * under make asan / ubsan two scales (1 and 0.5: the same code path). */
static void test_llama_cpp_f32(void)
{
    compare_base("F32", 0, 1e-9, test_sanitized() ? 2 : 4);
}
static void test_llama_cpp_q8_0(void) { compare_base("Q8_0", 0, 1e-3, 1); }
static void test_llama_cpp_q4_k_m(void) { compare_base("Q4_K_M", 1, 1e-3, 1); }

/* ---- Hearth alone ---- */

/* Scale 0 and an adapter with B = 0 leave the logits bit for bit. */
static void test_noop_is_bit_exact(void)
{
    char base[512], az[512], a1[512];
    snprintf(base, sizeof base, "%s/nb.gguf", tmpdir);
    snprintf(az, sizeof az, "%s/nz.gguf", tmpdir);
    snprintf(a1, sizeof a1, "%s/n1.gguf", tmpdir);
    ASSERT(make_base(base, "Q8_0", 0, 5, NULL) == 0);
    ad_spec zero = {4, 4.0f, "qkvogudh", 0.0f, 1, HX_TYPE_F32, NULL};
    ad_spec one = {4, 4.0f, "qkvogudh", 0.5f, 2, HX_TYPE_F16, NULL};
    ASSERT(make_adapter(base, az, &zero) == 0 && make_adapter(base, a1, &one) == 0);
    hx_model *m = load_model(base);
    hx_ctx *c = m ? new_ctx(m) : NULL;
    hx_adapter *z = m ? load_adapter(m, az) : NULL, *o = m ? load_adapter(m, a1) : NULL;
    ASSERT(c && z && o);
    const int V = hx_model_hparams(m)->n_vocab;
    int32_t ids[N_SEQ];
    make_ids(ids, N_SEQ, V);
    float *plain = logits_of(c, ids, N_SEQ);
    const float s0 = 0.0f, s1 = 1.0f;
    ASSERT(hx_ctx_set_adapters(c, &o, &s0, 1) == HX_OK);
    float *scale0 = logits_of(c, ids, N_SEQ);
    ASSERT(hx_ctx_set_adapters(c, &z, &s1, 1) == HX_OK);
    float *bzero = logits_of(c, ids, N_SEQ);
    ASSERT(plain && scale0 && bzero);
    EXPECT(memcmp(plain, scale0, (size_t)N_SEQ * V * sizeof(float)) == 0);
    EXPECT(memcmp(plain, bzero, (size_t)N_SEQ * V * sizeof(float)) == 0);
    free(plain), free(scale0), free(bzero);
    hx_ctx_free(c);
    hx_adapter_free(z), hx_adapter_free(o);
    hx_model_free(m);
    unlink(base), unlink(az), unlink(a1);
}

/* W + s B A written into an F32 model (the Q8_0 base dequantized) gives the
 * logits of the dequantized base with the adapter unmerged. */
static int write_merged(const char *qpath, const char *apath, float scale,
                        const char *plain_out, const char *merged_out)
{
    hx_gguf *g = NULL, *ga = NULL;
    hx_err err = {0};
    if (hx_gguf_open(qpath, &g, &err) || hx_gguf_open(apath, &ga, &err)) return -1;
    float alpha = 0;
    hx_gguf_get_f32(ga, "adapter.lora.alpha", &alpha);
    hx_gguf_writer *wp = hx_gguf_writer_new(), *wm = hx_gguf_writer_new();
    hx_gguf_copy_kv(wp, g), hx_gguf_copy_kv(wm, g);
    hx_gguf_set_u32(wp, "general.file_type", 0), hx_gguf_set_u32(wm, "general.file_type", 0);
    float *bufs[256];
    int nb = 0;
    for (int64_t i = 0; i < hx_gguf_n_tensors(g) && nb < 250; i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        const int64_t cols = t->ne[0], rows = t->n_dims > 1 ? t->ne[1] : 1;
        float *f = malloc((size_t)(cols * rows) * 4), *mg = malloc((size_t)(cols * rows) * 4);
        const size_t rb = hx_type_row_bytes(t->type, cols);
        for (int64_t r = 0; r < rows; r++)
            hx_dequantize_row(t->type, (const char *)t->data + r * rb, f + r * cols, cols);
        memcpy(mg, f, (size_t)(cols * rows) * 4);
        char na[128], nbn[128];
        snprintf(na, sizeof na, "%s.lora_a", t->name);
        snprintf(nbn, sizeof nbn, "%s.lora_b", t->name);
        const hx_gguf_tensor *A = hx_gguf_find_tensor(ga, na), *B = hx_gguf_find_tensor(ga, nbn);
        if (A && B) {
            const int64_t rk = A->ne[1];
            const float s = alpha ? scale * alpha / (float)rk : scale;
            const float *a = A->data, *b = B->data;
            for (int64_t o = 0; o < rows; o++)
                for (int64_t k = 0; k < cols; k++) {
                    double acc = 0;
                    for (int64_t j = 0; j < rk; j++) acc += (double)b[o * rk + j] * a[j * cols + k];
                    mg[o * cols + k] += (float)(s * acc);
                }
        }
        hx_gguf_add_tensor(wp, t->name, HX_TYPE_F32, t->n_dims, t->ne, f, NULL, NULL);
        hx_gguf_add_tensor(wm, t->name, HX_TYPE_F32, t->n_dims, t->ne, mg, NULL, NULL);
        bufs[nb++] = f, bufs[nb++] = mg;
    }
    int rc = hx_gguf_writer_write(wp, plain_out, &err);
    if (!rc) rc = hx_gguf_writer_write(wm, merged_out, &err);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    hx_gguf_writer_free(wp), hx_gguf_writer_free(wm);
    hx_gguf_close(g), hx_gguf_close(ga);
    return rc;
}

static void test_merged_equals_unmerged(void)
{
    char base[512], ad[512], plain[512], merged[512];
    snprintf(base, sizeof base, "%s/mq.gguf", tmpdir);
    snprintf(ad, sizeof ad, "%s/ma.gguf", tmpdir);
    snprintf(plain, sizeof plain, "%s/mp.gguf", tmpdir);
    snprintf(merged, sizeof merged, "%s/mm.gguf", tmpdir);
    ASSERT(make_base(base, "Q8_0", 0, 9, NULL) == 0);
    ad_spec sp = {4, 8.0f, "qkvogudh", 0.5f, 3, HX_TYPE_F32, NULL};
    ASSERT(make_adapter(base, ad, &sp) == 0);
    const float scale = 0.75f;
    ASSERT(write_merged(base, ad, scale, plain, merged) == 0);
    hx_model *mp = load_model(plain), *mm = load_model(merged);
    ASSERT(mp && mm);
    hx_ctx *cp = new_ctx(mp), *cm = new_ctx(mm);
    hx_adapter *a = load_adapter(mp, ad);
    ASSERT(cp && cm && a);
    ASSERT(hx_ctx_set_adapters(cp, &a, &scale, 1) == HX_OK);
    const int V = hx_model_hparams(mp)->n_vocab;
    int32_t ids[N_SEQ];
    make_ids(ids, N_SEQ, V);
    float *un = logits_of(cp, ids, N_SEQ), *me = logits_of(cm, ids, N_SEQ);
    ASSERT(un && me);
    hx_ctx_set_adapters(cp, NULL, NULL, 0);
    float *pl = logits_of(cp, ids, N_SEQ);
    double e = worst_nmse(me, un, N_SEQ, V), moved = worst_nmse(pl, un, N_SEQ, V);
    printf("# merged vs unmerged (Q8_0 base dequantized): nmse %.2e; adapter "
           "moves logits by %.2e\n", e, moved);
    EXPECT(e < 1e-10);
    EXPECT(moved > 1e-3);
    free(un), free(me), free(pl);
    hx_ctx_free(cp), hx_ctx_free(cm);
    hx_adapter_free(a);
    hx_model_free(mp), hx_model_free(mm);
    unlink(base), unlink(ad), unlink(plain), unlink(merged);
}

/* Attach, switch and detach on one context between requests: each gives
 * what a fresh context with that set gives; the key follows the set. */
static void test_switch_between_requests(void)
{
    char base[512], a1[512], a2[512];
    snprintf(base, sizeof base, "%s/sb.gguf", tmpdir);
    snprintf(a1, sizeof a1, "%s/s1.gguf", tmpdir);
    snprintf(a2, sizeof a2, "%s/s2.gguf", tmpdir);
    ASSERT(make_base(base, "F32", 0, 6, NULL) == 0);
    ad_spec s1 = {4, 4.0f, "qkvo", 0.5f, 1, HX_TYPE_F32, NULL};
    ad_spec s2 = {8, 16.0f, "gud", 0.5f, 2, HX_TYPE_F32, NULL};
    ASSERT(make_adapter(base, a1, &s1) == 0 && make_adapter(base, a2, &s2) == 0);
    hx_model *m = load_model(base);
    ASSERT(m);
    hx_ctx *c = new_ctx(m), *f = new_ctx(m);
    hx_adapter *x = load_adapter(m, a1), *y = load_adapter(m, a2);
    ASSERT(c && f && x && y);
    const int V = hx_model_hparams(m)->n_vocab;
    int32_t ids[N_SEQ];
    make_ids(ids, N_SEQ, V);
    const size_t bytes = (size_t)N_SEQ * V * sizeof(float);
    EXPECT_STR_EQ(hx_ctx_adapter_key(c), "");
    ASSERT(hx_ctx_attach_adapter(c, x, 1.0f) == HX_OK);
    ASSERT(hx_decode(c, ids, 4, 0) == HX_OK);
    char key1[512];
    snprintf(key1, sizeof key1, "%s", hx_ctx_adapter_key(c));
    ASSERT(hx_ctx_attach_adapter(c, y, 0.5f) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_past(c), 0); /* the cache was computed under x alone */
    EXPECT(strcmp(key1, hx_ctx_adapter_key(c)) != 0);
    EXPECT(strstr(hx_ctx_adapter_key(c), ";") != NULL);
    float *got = logits_of(c, ids, N_SEQ);
    hx_adapter *both[2] = {x, y};
    const float sc[2] = {1.0f, 0.5f};
    ASSERT(hx_ctx_set_adapters(f, both, sc, 2) == HX_OK);
    float *want = logits_of(f, ids, N_SEQ);
    ASSERT(got && want);
    EXPECT(memcmp(got, want, bytes) == 0);
    free(got), free(want);
    ASSERT(hx_ctx_detach_adapter(c, x) == HX_OK);
    EXPECT_EQ_INT(hx_ctx_n_adapters(c), 1);
    EXPECT(hx_ctx_detach_adapter(c, x) == HX_ERR_NOTFOUND);
    got = logits_of(c, ids, N_SEQ);
    ASSERT(hx_ctx_set_adapters(f, &y, &sc[1], 1) == HX_OK);
    want = logits_of(f, ids, N_SEQ);
    EXPECT(got && want && memcmp(got, want, bytes) == 0);
    free(got), free(want);
    ASSERT(hx_ctx_detach_adapter(c, y) == HX_OK);
    EXPECT_STR_EQ(hx_ctx_adapter_key(c), "");
    got = logits_of(c, ids, N_SEQ);
    ASSERT(hx_ctx_set_adapters(f, NULL, NULL, 0) == HX_OK);
    want = logits_of(f, ids, N_SEQ);
    EXPECT(got && want && memcmp(got, want, bytes) == 0);
    free(got), free(want);
    /* the same adapter twice, or too many, is refused */
    hx_adapter *dup[2] = {x, x};
    EXPECT(hx_ctx_set_adapters(c, dup, sc, 2) == HX_ERR_INVALID);
    hx_ctx_free(c), hx_ctx_free(f);
    hx_adapter_free(x), hx_adapter_free(y);
    hx_model_free(m);
    unlink(base), unlink(a1), unlink(a2);
}

/* The identity tells bases apart; an adapter recording another base is
 * refused, one recording this base is taken. */
static void test_base_identity(void)
{
    char b1[512], b2[512], bq[512], ad[512];
    snprintf(b1, sizeof b1, "%s/i1.gguf", tmpdir);
    snprintf(b2, sizeof b2, "%s/i2.gguf", tmpdir);
    snprintf(bq, sizeof bq, "%s/iq.gguf", tmpdir);
    snprintf(ad, sizeof ad, "%s/ia.gguf", tmpdir);
    ASSERT(make_base(b1, "F32", 0, 1, NULL) == 0 && make_base(b2, "F32", 0, 2, NULL) == 0 &&
           make_base(bq, "Q8_0", 0, 1, NULL) == 0);
    hx_model *m1 = load_model(b1), *m2 = load_model(b2), *mq = load_model(bq);
    hx_model *m1b = load_model(b1);
    ASSERT(m1 && m2 && mq && m1b);
    char i1[65], i2[65], iq[65], i1b[65];
    hx_model_identity(m1, i1), hx_model_identity(m2, i2);
    hx_model_identity(mq, iq), hx_model_identity(m1b, i1b);
    EXPECT_STR_EQ(i1, i1b);
    EXPECT(strcmp(i1, i2) != 0 && strcmp(i1, iq) != 0);
    ad_spec sp = {4, 4.0f, "qv", 0.1f, 1, HX_TYPE_F32, i1};
    ASSERT(make_adapter(b1, ad, &sp) == 0);
    hx_adapter *a = NULL;
    hx_err err = {0};
    EXPECT(hx_adapter_load(m1, ad, &a, &err) == HX_OK);
    EXPECT(a && strcmp(hx_adapter_get_info(a)->base_id, i1) == 0);
    EXPECT(a && hx_adapter_get_info(a)->n_pairs == 4 && hx_adapter_get_info(a)->rank == 4);
    hx_adapter_free(a);
    a = NULL;
    EXPECT(hx_adapter_load(m2, ad, &a, &err) == HX_ERR_INVALID);
    EXPECT(!a && strstr(err.msg, "another base model"));
    printf("# wrong base: %s\n", err.msg);
    hx_model_free(m1), hx_model_free(m2), hx_model_free(mq), hx_model_free(m1b);
    unlink(b1), unlink(b2), unlink(bq), unlink(ad);
}

/* ---- malformed adapters ---- */

typedef struct bad_case {
    const char *what;
    int rc;
    const char *msg; /* a substring of the message */
} bad_case;

/* Writes an adapter with one defect (case k) to path. */
static void write_bad(const char *path, int k)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_gguf_set_str(w, "general.architecture", k == 2 ? "llama" : "qwen3");
    hx_gguf_set_str(w, "general.type", k == 0 ? "model" : "adapter");
    hx_gguf_set_str(w, "adapter.type", k == 1 ? "control_vector" : "lora");
    if (k == 9) hx_gguf_set_u32(w, "adapter.lora.alpha", 3);
    else hx_gguf_set_f32(w, "adapter.lora.alpha", 4.0f);
    static float buf[64 * 64];
    static int32_t ibuf[64 * 64];
    const char *q = "blk.0.attn_q.weight";
    char na[96], nb[96];
    snprintf(na, sizeof na, "%s.lora_a", k == 5 ? "blk.7.attn_q.weight"
                                        : k == 6 ? "token_embd.weight" : q);
    snprintf(nb, sizeof nb, "%s.lora_b", k == 5 ? "blk.7.attn_q.weight"
                                        : k == 6 ? "token_embd.weight" : q);
    int64_t nea[2] = {k == 3 ? 31 : 32, 4}, neb[2] = {k == 8 ? 5 : 4, 32};
    if (k == 6) nea[1] = 300, neb[0] = 4, nea[0] = 4;
    if (k == 7) hx_gguf_add_tensor(w, na, HX_TYPE_I32, 2, nea, ibuf, NULL, NULL);
    else hx_gguf_add_tensor(w, na, HX_TYPE_F32, 2, nea, buf, NULL, NULL);
    if (k != 4) hx_gguf_add_tensor(w, nb, HX_TYPE_F32, 2, neb, buf, NULL, NULL);
    if (k == 10) hx_gguf_add_tensor(w, "blk.0.attn_q.weight.extra", HX_TYPE_F32, 2, neb, buf, NULL, NULL);
    if (k == 11) {
        int64_t ne3[3] = {32, 4, 2};
        hx_gguf_add_tensor(w, "blk.0.attn_k.weight.lora_a", HX_TYPE_F32, 3, ne3, buf, NULL, NULL);
    }
    hx_err err = {0};
    hx_gguf_writer_write(w, path, &err);
    hx_gguf_writer_free(w);
}

static void test_malformed_adapters(void)
{
    static const bad_case cases[] = {
        {"general.type model", HX_ERR_FORMAT, "general.type is 'model'"},
        {"adapter.type", HX_ERR_UNSUPPORTED, "control_vector"},
        {"architecture", HX_ERR_INVALID, "architecture 'llama'"},
        {"lora_a shape", HX_ERR_FORMAT, "do not fit"},
        {"missing lora_b", HX_ERR_FORMAT, "no lora_b"},
        {"layer beyond the base", HX_ERR_FORMAT, "does not have"},
        {"token_embd", HX_ERR_UNSUPPORTED, "not supported"},
        {"tensor type", HX_ERR_UNSUPPORTED, "I32"},
        {"ranks differ", HX_ERR_FORMAT, "ranks"},
        {"alpha type", HX_ERR_FORMAT, "adapter.lora.alpha"},
        {"unexpected tensor", HX_ERR_FORMAT, "neither"},
        {"3-D tensor", HX_ERR_FORMAT, "dimensions"},
    };
    char base[512], path[512];
    snprintf(base, sizeof base, "%s/bad-base.gguf", tmpdir);
    snprintf(path, sizeof path, "%s/bad.gguf", tmpdir);
    ASSERT(make_base(base, "F32", 0, 1, NULL) == 0);
    hx_model *m = load_model(base);
    ASSERT(m);
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        write_bad(path, k);
        hx_adapter *a = NULL;
        hx_err err = {0};
        int rc = hx_adapter_load(m, path, &a, &err);
        if (rc != cases[k].rc || !strstr(err.msg, cases[k].msg) || a)
            test_fail_at(__FILE__, __LINE__, "%s: rc %d (%s), expected %d with '%s'",
                         cases[k].what, rc, err.msg, cases[k].rc, cases[k].msg);
        hx_adapter_free(a);
    }
    /* a good adapter, then every truncation of it */
    ad_spec sp = {4, 4.0f, "qkvo", 0.1f, 1, HX_TYPE_F32, NULL};
    ASSERT(make_adapter(base, path, &sp) == 0);
    char *data = NULL;
    size_t len = 0;
    hx_err err = {0};
    ASSERT(hx_read_file(path, 0, &data, &len, &err) == HX_OK);
    hx_adapter *a = NULL;
    EXPECT(hx_adapter_load_buffer(m, data, len, &a, &err) == HX_OK);
    hx_adapter_free(a);
    int refused = 0, tried = 0;
    for (size_t cut = 0; cut < len; cut += 1 + cut / 7, tried++) {
        a = NULL;
        if (hx_adapter_load_buffer(m, data, cut, &a, &err) != HX_OK && !a) refused++;
        hx_adapter_free(a);
    }
    EXPECT_EQ_INT(refused, tried);
    free(data);
    hx_model_free(m);
    unlink(base), unlink(path);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_adapter.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_noop_is_bit_exact);
    RUN(test_merged_equals_unmerged);
    RUN(test_switch_between_requests);
    RUN(test_base_identity);
    RUN(test_malformed_adapters);
    RUN(test_llama_cpp_f32);
    RUN(test_llama_cpp_q8_0);
    RUN(test_llama_cpp_q4_k_m);
    rmdir(tmpdir);
    return test_summary();
}
