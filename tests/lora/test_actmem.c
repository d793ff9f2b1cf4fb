/* test_actmem.c: activation checkpointing and the chunked loss head give
 * the gradients of the plain backward (bit for bit where the order of
 * sums is kept), and forward-only passes hold less memory. */
#include <stdint.h>
#include <unistd.h>

#include "lora/train_int.h"
#include "test.h"
#include "trainer_fill.h"
#include "modelfile/modelfile.h"

static char tmpdir[256];

/* Two sequences of 48, the second packing three documents, a quarter of
 * the targets masked off: enough rows for many head chunks. */
enum { NS = 2, NT = 48 };
static int32_t toks[NS * NT], tgts[NS * NT], docs[NS * NT];
static uint8_t mask[NS * NT];

static hx_batch make_batch(int V)
{
    uint64_t s = 11;
    for (int i = 0; i < NS * NT; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((s >> 33) % (uint64_t)V);
        tgts[i] = (int32_t)((s >> 45) % (uint64_t)V);
        mask[i] = (uint8_t)(i % 4 != 1);
        docs[i] = i < NT ? 0 : (i - NT) / 17 + 1;
    }
    hx_batch b = {.n_seq = NS, .n_tok = NT, .tokens = toks, .targets = tgts, .mask = mask, .doc = docs};
    return b;
}

/* Gradients (a copy) and loss of one micro-batch, with recompute mode and
 * head_rows (0: auto). */
static float *grads_of(hx_trainer *tr, const hx_batch *b, int mode, int rows,
                       double *loss)
{
    hx_err err = {0};
    hx_trainer_set_recompute(tr, mode);
    tr->head_rows = rows;
    hx_trainer_zero_grad(tr);
    if (hx_trainer_grad(tr, b, 100.0, loss, &err)) {
        printf("# grad: %s\n", err.msg);
        return NULL;
    }
    const size_t np = hx_trainer_n_params(tr);
    float *g = malloc(np * sizeof(float));
    if (g) memcpy(g, hx_trainer_grads(tr), np * sizeof(float));
    return g;
}

/* Worst NMSE over tensors named with or without "token_embd" (the tied
 * head's weight: its gradient sums over the head's chunks). */
static double worst_nmse(const hx_trainer *tr, const float *ref, const float *got,
                         int embd, int *identical)
{
    double worst = 0;
    *identical = 1;
    for (int t = 0; t < hx_trainer_n_tensors(tr); t++) {
        size_t off, n;
        const char *name = hx_trainer_tensor(tr, t, &off, &n);
        if ((strstr(name, "token_embd") != NULL) != embd) continue;
        if (memcmp(ref + off, got + off, n * sizeof(float))) *identical = 0;
        const double e = test_nmse(ref + off, got + off, n);
        if (e > worst) worst = e;
    }
    return worst;
}

/* Full training: recomputed layers give the saved-activation gradients
 * bit for bit; head chunks of 8 rows change only the order of the tied
 * embedding's sum over rows. */
static void test_full_recompute_exact(void)
{
    hx_train_config c = hx_train_default_config();
    c.n_vocab = 97, c.n_ctx = 64, c.n_embd = 32, c.n_layer = 3, c.n_head = 4;
    c.n_head_kv = 2, c.head_dim = 8, c.n_ff = 48;
    hx_trainer *tr = NULL;
    hx_err err = {0};
    ASSERT(hx_trainer_new_scratch(&c, 3, 2, &tr, &err) == HX_OK);
    randomize(tr, 0.5f);
    hx_batch b = make_batch(c.n_vocab);
    double l0 = 0, l1 = 0, l2 = 0;
    EXPECT_EQ_INT(hx_tr_layout(tr, NS * NT), TR_SAVE); /* auto: small, all saved */
    float *g0 = grads_of(tr, &b, HX_RECOMPUTE_OFF, 0, &l0);
    float *g1 = grads_of(tr, &b, HX_RECOMPUTE_ON, 0, &l1);
    float *g2 = grads_of(tr, &b, HX_RECOMPUTE_ON, 8, &l2);
    ASSERT(g0 && g1 && g2);
    EXPECT_EQ_INT(hx_tr_layout(tr, NS * NT), TR_CKPT);
    const size_t np = hx_trainer_n_params(tr);
    EXPECT(memcmp(g0, g1, np * sizeof(float)) == 0);
    EXPECT(l0 == l1 && l0 == l2);
    int same_rest, same_embd;
    const double rest = worst_nmse(tr, g0, g2, 0, &same_rest);
    const double embd = worst_nmse(tr, g0, g2, 1, &same_embd);
    printf("#   full, chunks of 8 rows: other tensors %s (NMSE %.2e), token_embd "
           "NMSE %.2e\n", same_rest ? "identical" : "DIFFER", rest, embd);
    EXPECT(same_rest);
    EXPECT(embd < 1e-12);
    free(g0), free(g1), free(g2);
    hx_trainer_free(tr);
}

static int write_base(const char *path, const char *ftype, int C, int V)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3";
    p.ftype = ftype;
    p.n_vocab = V;
    p.n_ctx = 128;
    p.n_layer = 3;
    p.n_embd = C;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = C / 4;
    p.n_ff = 2 * C;
    p.tied_output = 1;
    hx_err err = {0};
    int rc = hx_mkmodel_write(&p, path, &err);
    if (rc) printf("# mkmodel: %s\n", err.msg);
    return rc;
}

static hx_trainer *lora_over(const char *ftype, int C, int V)
{
    char path[512];
    snprintf(path, sizeof path, "%s/base-%s.gguf", tmpdir, ftype);
    if (write_base(path, ftype, C, V)) return NULL;
    hx_lora_params lp = hx_lora_default_params();
    lp.rank = 4;
    lp.targets = HX_LORA_ALL;
    lp.init_b = 0.2f;
    hx_trainer *tr = NULL;
    hx_err err = {0};
    if (hx_trainer_new_gguf(path, &lp, 2, &tr, &err)) printf("# %s\n", err.msg);
    unlink(path);
    return tr;
}

/* LoRA over frozen bases (the head frozen too): checkpointed, chunked,
 * and plain backward give the same bits; a forward-only pass between two
 * backward passes changes nothing. */
static void lora_exact(const char *ftype, int C)
{
    hx_trainer *tr = lora_over(ftype, C, 211);
    ASSERT(tr);
    EXPECT_EQ_INT(hx_tr_layout(tr, NS * NT), TR_CKPT); /* auto: LoRA checkpoints */
    hx_batch b = make_batch(211);
    double l0 = 0, l1 = 0, l2 = 0, lf = 0;
    int nf = 0;
    hx_err err = {0};
    float *g0 = grads_of(tr, &b, HX_RECOMPUTE_OFF, 0, &l0);
    float *g1 = grads_of(tr, &b, HX_RECOMPUTE_AUTO, 0, &l1);
    EXPECT(hx_trainer_forward(tr, &b, NULL, &lf, &nf, &err) == HX_OK);
    float *g2 = grads_of(tr, &b, HX_RECOMPUTE_AUTO, 8, &l2);
    ASSERT(g0 && g1 && g2);
    const size_t np = hx_trainer_n_params(tr);
    EXPECT(memcmp(g0, g1, np * sizeof(float)) == 0);
    EXPECT(memcmp(g0, g2, np * sizeof(float)) == 0);
    EXPECT(l0 == l1 && l0 == l2 && l0 == lf);
    EXPECT_EQ_INT(nf, 72);
    printf("#   lora over %s: loss %.6f over %d targets, gradients identical "
           "(saved / recomputed / head chunks of 8)\n", ftype, l0, nf);
    free(g0), free(g1), free(g2);
    hx_trainer_free(tr);
}

static void test_lora_recompute_exact_q8_0(void) { lora_exact("Q8_0", 32); }
static void test_lora_recompute_exact_q4_k(void) { lora_exact("Q4_K_M", 256); }

/* Losses and parameters of a short LoRA run: checkpointed and not give
 * the same bits (so a checkpoint written by either resumes exactly). */
static void test_lora_run_identical(void)
{
    static int32_t d[600];
    uint64_t s = 3;
    for (int i = 0; i < 600; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        d[i] = i % 5 ? (int32_t)((s >> 33) % 211) : 1;
    }
    hx_train_data td = {.tokens = d, .n = 600};
    hx_train_params p = hx_train_default_params();
    p.opt.n_steps = 3, p.seq_len = 32, p.n_seq = 2, p.accum = 2;
    float *params[2] = {NULL, NULL}, loss[2][3];
    size_t np = 0;
    for (int k = 0; k < 2; k++) {
        hx_trainer *tr = lora_over("Q8_0", 32, 211);
        ASSERT(tr);
        hx_trainer_set_recompute(tr, k ? HX_RECOMPUTE_ON : HX_RECOMPUTE_OFF);
        hx_err err = {0};
        ASSERT(hx_train_run(tr, &td, &p, &err) == HX_OK);
        np = hx_trainer_n_params(tr);
        params[k] = malloc(np * sizeof(float));
        ASSERT(params[k]);
        memcpy(params[k], hx_trainer_params(tr), np * sizeof(float));
        memcpy(loss[k], tr->losses, sizeof loss[k]);
        hx_trainer_free(tr);
    }
    EXPECT(memcmp(loss[0], loss[1], sizeof loss[0]) == 0);
    EXPECT(memcmp(params[0], params[1], np * sizeof(float)) == 0);
    printf("#   3 LoRA steps, losses %.5f %.5f %.5f either way\n", loss[1][0],
           loss[1][1], loss[1][2]);
    free(params[0]), free(params[1]);
}

/* Memory: a forward-only pass carves less than training, checkpointed
 * training less than saving every layer, the head's logits scale with
 * its chunk, and the estimates order the same way and cover what was
 * allocated. */
static void test_memory(void)
{
    hx_trainer *tr = lora_over("Q8_0", 32, 211);
    ASSERT(tr);
    hx_batch b = make_batch(211);
    hx_err err = {0};
    const int n = NS * NT;
    size_t fl[4];
    const int modes[4] = {-1, HX_RECOMPUTE_ON, HX_RECOMPUTE_OFF, HX_RECOMPUTE_ON};
    for (int k = 0; k < 4; k++) { /* forward; ckpt; save; ckpt, chunks of 8 */
        free(tr->mem); /* measure each layout from scratch */
        tr->mem = NULL, tr->mem_floats = 0;
        tr->head_rows = k == 3 ? 8 : 0;
        double l = 0;
        if (modes[k] < 0) {
            ASSERT(hx_trainer_forward(tr, &b, NULL, &l, NULL, &err) == HX_OK);
        } else {
            hx_trainer_set_recompute(tr, modes[k]);
            ASSERT(hx_trainer_grad(tr, &b, 1.0, &l, &err) == HX_OK);
        }
        fl[k] = tr->mem_floats;
    }
    printf("#   activation floats for %d tokens: forward %zu, checkpointed %zu, "
           "saved %zu, checkpointed with 8-row head chunks %zu\n", n, fl[0], fl[1],
           fl[2], fl[3]);
    EXPECT(fl[0] < fl[1] && fl[1] < fl[2]);
    /* logits: n rows of 211 against 8 + 7 */
    EXPECT(fl[1] - fl[3] == (size_t)(n - 15) * (211 + 32 + 32));
    tr->head_rows = 0;
    hx_trainer_set_recompute(tr, HX_RECOMPUTE_AUTO);
    const size_t ef = hx_trainer_forward_memory_estimate(tr, n);
    const size_t et = hx_trainer_memory_estimate(tr, n);
    hx_trainer_set_recompute(tr, HX_RECOMPUTE_OFF);
    const size_t es = hx_trainer_memory_estimate(tr, n);
    printf("#   estimates: forward %zu, training %zu (all saved: %zu) bytes\n", ef, et, es);
    EXPECT(ef < et && et < es);
    EXPECT(et - ef >= (fl[1] - fl[0]) * sizeof(float));
    EXPECT(es - et == (fl[2] - fl[1]) * sizeof(float));
    const size_t have = (tr->mem_floats + tr->scratch_n * 2 + 4 * hx_trainer_n_params(tr)) *
                        sizeof(float) + hx_model_size_bytes(tr->base);
    EXPECT(et >= have);
    hx_trainer_free(tr);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_actmem.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_full_recompute_exact);
    RUN(test_lora_recompute_exact_q8_0);
    RUN(test_lora_recompute_exact_q4_k);
    RUN(test_lora_run_identical);
    RUN(test_memory);
    rmdir(tmpdir);
    return test_summary();
}
