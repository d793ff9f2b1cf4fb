/* test_wbudget.c: LoRA over a MoE base read through the engine's weight
 * cache (hx_trainer_set_weight_budget): the same logits, gradients,
 * trained adapter and top-k tokens, bit for bit, as over the mapped base,
 * at the smallest budget (nearly every expert read at every use) and a
 * larger one; the cache within its slots; refusals; a failed read as an
 * error. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lora/train_int.h"
#include "engine/small_model.h"
#include "modelfile/modelfile.h"
#include "test.h"

static char g_dir[256];

#define N_TOK 48
#define N_STEPS 3
#define TOP_K 3

/* A small qwen3moe in the real files' layout (Q4_K_M: Q6_K ffn_down in
 * some layers, so the layers' slots differ in size): 3 layers of 8
 * experts, 2 used. */
static int write_model(const char *path, const char *arch)
{
    hx_mkmodel_params p = small_model_params(arch, 512, 128);
    hx_err err = {0};
    int rc = hx_mkmodel_write(&p, path, &err);
    if (rc) printf("# mkmodel: %s\n", err.msg);
    return rc;
}

static hx_trainer *new_trainer(const char *path)
{
    hx_lora_params lp = hx_lora_default_params();
    lp.init_b = 0.02f; /* B != 0: the adapter changes the logits from the start */
    hx_trainer *tr = NULL;
    hx_err err = {0};
    if (hx_trainer_new_gguf(path, &lp, 2, &tr, &err)) printf("# trainer: %s\n", err.msg);
    return tr;
}

typedef struct run_out {
    float *logits;  /* N_TOK x n_vocab */
    float *grads;   /* the first step's */
    float *params;  /* after N_STEPS */
    int32_t top_id[N_TOK * TOP_K]; /* hx_trainer_topk after N_STEPS */
    float top_p[N_TOK * TOP_K];
    size_t n_params;
    double loss;
} run_out;

static void run_out_free(run_out *o)
{
    free(o->logits), free(o->grads), free(o->params);
}

/* The forward's logits, then N_STEPS optimizer steps on one batch; the
 * first step's gradients, the final parameters and the top TOP_K tokens
 * then (a forward-only pass holding a few rows of logits) kept. */
static int train(hx_trainer *tr, run_out *o)
{
    const int V = hx_trainer_hparams(tr)->n_vocab;
    int32_t tok[N_TOK], tgt[N_TOK];
    for (int i = 0; i < N_TOK; i++) tok[i] = (int32_t)((i * 37 + 11) % V);
    for (int i = 0; i < N_TOK; i++) tgt[i] = tok[(i + 1) % N_TOK];
    const hx_batch b = {.n_seq = 1, .n_tok = N_TOK, .tokens = tok, .targets = tgt};
    hx_opt_params op = hx_opt_default_params();
    op.lr = 1e-2f;
    op.n_steps = N_STEPS;
    hx_err err = {0};
    memset(o, 0, sizeof *o);
    o->n_params = hx_trainer_n_params(tr);
    o->logits = malloc((size_t)N_TOK * V * sizeof(float));
    o->grads = malloc(o->n_params * sizeof(float));
    o->params = malloc(o->n_params * sizeof(float));
    if (!o->logits || !o->grads || !o->params) return HX_ERR_NOMEM;
    int rc = hx_trainer_forward(tr, &b, o->logits, &o->loss, NULL, &err);
    for (int s = 0; !rc && s < N_STEPS; s++) {
        double g;
        hx_trainer_zero_grad(tr);
        rc = hx_trainer_grad(tr, &b, N_TOK, NULL, &err);
        if (!rc && s == 0) memcpy(o->grads, hx_trainer_grads(tr), o->n_params * sizeof(float));
        if (!rc) rc = hx_trainer_step(tr, &op, &g);
    }
    if (!rc) rc = hx_trainer_topk(tr, &b, TOP_K, o->top_id, o->top_p, &err);
    if (rc) printf("# train: %s\n", err.msg);
    memcpy(o->params, hx_trainer_params(tr), o->n_params * sizeof(float));
    return rc;
}

static int same(const run_out *a, const run_out *b, int V)
{
    return a->n_params == b->n_params &&
           !memcmp(a->logits, b->logits, (size_t)N_TOK * V * sizeof(float)) &&
           !memcmp(a->grads, b->grads, a->n_params * sizeof(float)) &&
           !memcmp(a->params, b->params, a->n_params * sizeof(float)) &&
           !memcmp(a->top_id, b->top_id, sizeof a->top_id) &&
           !memcmp(a->top_p, b->top_p, sizeof a->top_p);
}

/* The smallest budget (two slots a layer for 8 experts: every expert a
 * pass uses is read for that use, but the two the pass before ended with)
 * and one with room for 6 of a layer's 8:
 * the mapped base's logits, gradients and parameters, bit for bit. */
static void test_same_bits(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/moe.gguf", g_dir);
    ASSERT(write_model(path, "qwen3moe") == HX_OK);
    hx_trainer *tr = new_trainer(path);
    ASSERT(tr);
    const int V = hx_trainer_hparams(tr)->n_vocab;
    run_out ref;
    ASSERT(train(tr, &ref) == HX_OK);
    const size_t mapped = hx_trainer_weight_bytes(tr), est = hx_trainer_memory_estimate(tr, N_TOK);
    hx_trainer_free(tr);
    EXPECT(ref.params[0] != 0 || ref.params[1] != 0);

    tr = new_trainer(path);
    ASSERT(tr);
    const size_t lo = hx_trainer_weight_budget_min(tr);
    EXPECT(lo > 0 && lo < mapped);
    for (int k = 0; k < 2; k++) {
        hx_trainer *t = k ? new_trainer(path) : tr;
        ASSERT(t);
        hx_err err = {0};
        hx_wc_plan p;
        hx_wc_plan_make(t->base, 0, &p);
        const size_t budget = k ? lo + 2 * p.min_cache : lo; /* 2 or 6 slots a layer */
        ASSERT(hx_trainer_set_weight_budget(t, budget, &err) == HX_OK);
        EXPECT(hx_trainer_weight_bytes(t) <= budget);
        EXPECT(hx_trainer_memory_estimate(t, N_TOK) < est);
        run_out o;
        ASSERT(train(t, &o) == HX_OK);
        EXPECT(same(&ref, &o, V));
        hx_wc_stats st;
        hx_wc_stats_get(t->wc, &st);
        printf("# budget %.2f MiB (mapped %.2f): %llu expert uses, %llu reads, "
               "%.2f MiB read, slots held at most %zu of %zu bytes\n",
               budget / 1048576.0, mapped / 1048576.0, (unsigned long long)st.uses,
               (unsigned long long)st.misses, st.bytes_read / 1048576.0, st.held_peak,
               st.budget);
        EXPECT(st.uses > 0 && st.held_peak <= st.budget);
        /* two slots a layer: most uses are reads (a layer's pass finds
         * in the shared slots only what the last passes left); six: most
         * are not */
        if (k == 0) EXPECT(st.misses <= st.uses && st.misses > st.uses / 2);
        else EXPECT(st.misses < st.uses / 2);
        run_out_free(&o);
        if (k) hx_trainer_free(t);
    }
    /* back to the mapping: the same again */
    hx_err err = {0};
    EXPECT_EQ_INT(hx_trainer_set_weight_budget(tr, 0, &err), HX_OK);
    EXPECT(tr->wc == NULL && hx_trainer_weight_bytes(tr) == mapped);
    hx_trainer_free(tr);
    run_out_free(&ref);
}

/* A budget one byte short is refused, saying what it needs; the control:
 * the smallest one is taken. A dense base and full training take none. */
static void test_refusals(void)
{
    char path[512], dense[512];
    snprintf(path, sizeof path, "%s/moe_r.gguf", g_dir);
    snprintf(dense, sizeof dense, "%s/dense.gguf", g_dir);
    ASSERT(write_model(path, "qwen3moe") == HX_OK);
    ASSERT(write_model(dense, "qwen3") == HX_OK);
    hx_trainer *tr = new_trainer(path);
    ASSERT(tr);
    hx_err err = {0};
    const size_t lo = hx_trainer_weight_budget_min(tr);
    EXPECT_EQ_INT(hx_trainer_set_weight_budget(tr, lo - 1, &err), HX_ERR_RANGE);
    EXPECT(strstr(err.msg, "too small") && strstr(err.msg, "at least"));
    EXPECT(tr->wc == NULL);
    EXPECT_EQ_INT(hx_trainer_set_weight_budget(tr, lo, &err), HX_OK);
    EXPECT(tr->wc != NULL);
    hx_trainer_free(tr);
    ASSERT((tr = new_trainer(dense)));
    EXPECT_EQ_INT(hx_trainer_weight_budget_min(tr), 0);
    EXPECT_EQ_INT(hx_trainer_set_weight_budget(tr, (size_t)1 << 30, &err), HX_ERR_UNSUPPORTED);
    EXPECT(strstr(err.msg, "MoE") != NULL);
    hx_trainer_free(tr);
    ASSERT(hx_trainer_new_gguf(dense, NULL, 1, &tr, &err) == HX_OK);
    EXPECT_EQ_INT(hx_trainer_set_weight_budget(tr, (size_t)1 << 30, &err), HX_ERR_UNSUPPORTED);
    hx_trainer_free(tr);
}

/* The file shrinks under a trainer: the next pass says so (HX_ERR_IO,
 * short read), and again; the control trains before it changes. */
static void test_short_read(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/moe_t.gguf", g_dir);
    ASSERT(write_model(path, "qwen3moe") == HX_OK);
    hx_trainer *tr = new_trainer(path);
    ASSERT(tr);
    hx_err err = {0};
    ASSERT(hx_trainer_set_weight_budget(tr, hx_trainer_weight_budget_min(tr), &err) == HX_OK);
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const hx_batch b = {.n_seq = 1, .n_tok = 8, .tokens = tok, .targets = tok};
    EXPECT_EQ_INT(hx_trainer_grad(tr, &b, 8, NULL, &err), HX_OK);
    ASSERT(truncate(path, 4096) == 0);
    EXPECT_EQ_INT(hx_trainer_grad(tr, &b, 8, NULL, &err), HX_ERR_IO);
    EXPECT(strstr(err.msg, "short read") != NULL);
    EXPECT_EQ_INT(hx_trainer_forward(tr, &b, NULL, NULL, NULL, &err), HX_ERR_IO);
    hx_trainer_free(tr);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/hx_test_wbudget.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_same_bits);
    RUN(test_refusals);
    RUN(test_short_read);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) printf("# could not remove %s\n", g_dir);
    return test_summary();
}
