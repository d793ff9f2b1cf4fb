/* test_cmd_train.c: `hearth train`: trains a byte-level model on a text
 * file, resumes from its checkpoint, writes a loadable GGUF and an SVG,
 * trains a LoRA adapter over it (over a MoE base within --max-memory
 * too), and rejects bad command lines. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "test.h"
#include "cli_capture.h"

static char g_out[65536], g_errbuf[4096], dir[256];

/* Runs hx_cmd_train with args (NULL-terminated); output in g_out, g_errbuf. */
static int run(const char *const *args)
{
    const char *all[48] = {"train"};
    for (int i = 0; args[i] && i < 46; i++) all[i + 1] = args[i];
    return cli_run(hx_cmd_train, all, dir, g_out, sizeof g_out, g_errbuf, sizeof g_errbuf);
}

static char data[300], model[300], ckpt[300], svg[300], adapter[300];

#define SMALL "--layers", "1", "--embd", "32", "--heads", "2", "--kv-heads", "1", \
              "--head-dim", "16", "--ff", "64", "--ctx", "64", "--seq", "32",  \
              "--batch", "2", "--lr", "3e-3", "--threads", "1"

static void test_train_resume_write(void)
{
    FILE *f = fopen(data, "w");
    ASSERT(f);
    for (int i = 0; i < 40; i++) fputs("the cat sat on the mat. ", f);
    fclose(f);
    EXPECT_EQ_INT(run((const char *[]){data, "--out", model, "--steps", "30", "--ckpt",
                                       ckpt, "--recompute", "on", SMALL, NULL}), 0);
    EXPECT(strstr(g_out, "trained 30 steps") != NULL);
    EXPECT_EQ_INT(run((const char *[]){data, "--out", model, "--steps", "60", "--ckpt",
                                       ckpt, "--resume", SMALL, NULL}), 0);
    EXPECT(strstr(g_out, "trained 60 steps") != NULL);
    float l0 = 0, l1 = 0;
    const char *p = strstr(g_out, "loss ");
    ASSERT(p && sscanf(p, "loss %f -> %f", &l0, &l1) == 2);
    EXPECT(l0 > 5.0f && l1 < 0.5f * l0); /* ln 256 = 5.55 at the start */
    hx_model_params mp = hx_model_default_params();
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(model, &mp, &m, &err) == HX_OK);
    EXPECT_STR_EQ(hx_model_hparams(m)->arch, "qwen3");
    EXPECT_EQ_INT(hx_model_hparams(m)->n_vocab, 256);
    hx_model_free(m);
    char *s = NULL;
    size_t n = 0;
    ASSERT(hx_read_file(svg, 0, &s, &n, &err) == HX_OK);
    EXPECT(strstr(s, "<polyline") != NULL);
    free(s);
    /* --bf16: the summary names bfloat16 products exactly when they were
     * granted (refused: a CPU without AVX512-BF16, which stderr says) */
    char bf[320];
    snprintf(bf, sizeof bf, "%s/bf16.gguf", dir);
    EXPECT_EQ_INT(run((const char *[]){data, "--out", bf, "--steps", "2", "--bf16", SMALL,
                                       NULL}), 0);
    EXPECT((strstr(g_out, ", bfloat16 products)") != NULL) ==
           (strstr(g_errbuf, "products stay F32") == NULL));
    /* --products auto: stderr says which it took, and the summary agrees */
    EXPECT_EQ_INT(run((const char *[]){data, "--out", bf, "--steps", "2", "--products", "auto",
                                       SMALL, NULL}), 0);
    const char *took = strstr(g_errbuf, "--products auto: ");
    EXPECT(took != NULL);
    if (took)
        EXPECT((strstr(g_out, ", bfloat16 products)") != NULL) ==
               !strncmp(took + strlen("--products auto: "), "bfloat16", 8));
    EXPECT_EQ_INT(run((const char *[]){data, "--out", bf, "--products", "fast", NULL}),
                  HX_EXIT_USAGE);
    unlink(bf);
    strcat(bf, ".svg");
    unlink(bf);
    /* the model just written deepened by a layer (block expansion) */
    char grown[320];
    snprintf(grown, sizeof grown, "%s/grown.gguf", dir);
    EXPECT_EQ_INT(run((const char *[]){data, "--out", grown, "--base", model, "--grow-layers",
                                       "1", "--steps", "2", "--seq", "32", "--batch", "2",
                                       NULL}), 0);
    ASSERT(hx_model_load(grown, &mp, &m, &err) == HX_OK);
    EXPECT_EQ_INT(hx_model_hparams(m)->n_layer, 2);
    hx_model_free(m);
    EXPECT(run((const char *[]){data, "--out", grown, "--base", model, "--grow-layers", "2",
                                NULL}) != 0);
    EXPECT(strstr(g_errbuf, "from 0 to the base's 1") != NULL);
    EXPECT_EQ_INT(run((const char *[]){data, "--out", grown, "--grow-layers", "1", SMALL,
                                       NULL}), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "--grow-layers needs --base") != NULL);
    unlink(grown);
    strcat(grown, ".svg");
    unlink(grown);
    /* a LoRA adapter over the model just written */
    EXPECT_EQ_INT(run((const char *[]){data, "--out", adapter, "--base", model,
                                       "--lora-rank", "4", "--steps", "3", "--seq",
                                       "32", "--batch", "2", NULL}), 0);
    EXPECT(strstr(g_out, "LoRA") != NULL);
    hx_gguf *g = NULL;
    const char *t = NULL;
    ASSERT(hx_gguf_open(adapter, &g, &err) == HX_OK);
    EXPECT(hx_gguf_get_str(g, "general.type", &t) == HX_OK && t && !strcmp(t, "adapter"));
    EXPECT(hx_gguf_find_tensor(g, "blk.0.attn_q.weight.lora_a") != NULL);
    hx_gguf_close(g);
    char as[320];
    snprintf(as, sizeof as, "%s.svg", adapter);
    unlink(adapter);
    unlink(as);
}

/* Bytes of a file (malloc'd into *buf). */
static size_t slurp(const char *path, char **buf)
{
    size_t n = 0;
    hx_err err = {0};
    *buf = NULL;
    return hx_read_file(path, 0, buf, &n, &err) == HX_OK ? n : 0;
}

/* --max-memory over a MoE base: under the bound that leaves it only the
 * weight cache's smallest (the rest of training + what the refusal says
 * it needs at least), the base goes through the cache, as the report
 * says, and the adapter is the unbounded run's, byte for byte; below it,
 * refused, saying what would fit. A dense base takes no cache. */
static void test_max_memory(void)
{
    char moe[320], ua[320], ca[320], bound[64];
    snprintf(moe, sizeof moe, "%s/moe.gguf", dir);
    snprintf(ua, sizeof ua, "%s/u.gguf", dir);
    snprintf(ca, sizeof ca, "%s/c.gguf", dir);
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.arch = "qwen3moe", mp.n_vocab = 256, mp.n_layer = 2, mp.n_embd = 128;
    mp.n_head = 2, mp.n_head_kv = 1, mp.head_dim = 64, mp.n_ctx = 64;
    mp.n_expert = 16, mp.n_expert_used = 2, mp.n_ff_exp = 256;
    hx_err err = {0};
    ASSERT(hx_mkmodel_write(&mp, moe, &err) == HX_OK);
#define LORA data, "--base", moe, "--lora-rank", "4", "--steps", "3", "--seq", "32", \
             "--batch", "2", "--threads", "1", "--svg", "/dev/null"
    EXPECT_EQ_INT(run((const char *[]){LORA, "--out", ua, NULL}), 0);
    EXPECT(strstr(g_out, "weight cache") == NULL);
    EXPECT_EQ_INT(run((const char *[]){LORA, "--out", ca, "--max-memory", "1M", NULL}),
                  HX_EXIT_FAIL);
    const char *at = strstr(g_errbuf, "at least ");
    double need = 0, least = 0;
    EXPECT(sscanf(strstr(g_errbuf, "needs about ") ? strstr(g_errbuf, "needs about ") : "",
                  "needs about %lf", &need) == 1);
    ASSERT(at && sscanf(at, "at least %lf MiB with the base's experts read", &least) == 1);
    EXPECT(strstr(g_errbuf, "over the bound of 1.0 MiB") != NULL);
    ASSERT(least + 0.1 < need);
    snprintf(bound, sizeof bound, "%zu", (size_t)((least + 0.1) * 1048576.0));
    EXPECT_EQ_INT(run((const char *[]){LORA, "--out", ca, "--max-memory", bound, NULL}), 0);
    printf("# bound %s bytes (unbounded %.1f MiB): %.*s", bound, need,
           (int)strcspn(g_out, "\n") + 1, g_out);
    EXPECT(strstr(g_out, "the base read through a weight cache of") != NULL);
    char *u = NULL, *c = NULL;
    const size_t nu = slurp(ua, &u), nc = slurp(ca, &c);
    EXPECT(nu > 0 && nu == nc && !memcmp(u, c, nu));
    free(u), free(c);
    /* a dense base over the bound: refused, no cache offered */
    EXPECT(run((const char *[]){data, "--base", model, "--lora-rank", "4", "--out", ca,
                                "--max-memory", "1M", NULL}) != 0);
    EXPECT(strstr(g_errbuf, "over the bound") && !strstr(g_errbuf, "experts"));
    EXPECT_EQ_INT(run((const char *[]){data, "--out", ca, "--max-memory", "lots", NULL}),
                  HX_EXIT_USAGE);
    unlink(moe), unlink(ua), unlink(ca);
#undef LORA
}

static void test_usage(void)
{
    EXPECT_EQ_INT(run((const char *[]){"--help", NULL}), HX_EXIT_OK);
    EXPECT(strstr(g_out, "usage: hearth train") != NULL);
    EXPECT_EQ_INT(run((const char *[]){data, NULL}), HX_EXIT_USAGE); /* no --out */
    EXPECT_EQ_INT(run((const char *[]){data, "--out", model, "--lora-rank", "4", NULL}),
                  HX_EXIT_USAGE); /* LoRA needs --base */
    EXPECT_EQ_INT(run((const char *[]){data, "--out", model, "--steps", "x", NULL}),
                  HX_EXIT_USAGE);
    EXPECT_EQ_INT(run((const char *[]){data, "--out", model, "--resume", NULL}),
                  HX_EXIT_USAGE); /* --resume needs --ckpt */
    EXPECT_EQ_INT(run((const char *[]){data, "--out", model, "--recompute", "maybe", NULL}),
                  HX_EXIT_USAGE);
    char missing[320];
    snprintf(missing, sizeof missing, "%s/none.txt", dir);
    EXPECT(run((const char *[]){missing, "--out", model, NULL}) != 0);
    EXPECT(strstr(g_errbuf, "none.txt") != NULL);
    EXPECT(run((const char *[]){data, "--out", model, "--heads", "3", "--kv-heads",
                                "2", NULL}) != 0);
    EXPECT(strstr(g_errbuf, "shape") != NULL);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hx_test_cmd_train.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) return 1;
    snprintf(data, sizeof data, "%s/data.txt", dir);
    snprintf(model, sizeof model, "%s/m.gguf", dir);
    snprintf(ckpt, sizeof ckpt, "%s/m.ckpt", dir);
    snprintf(svg, sizeof svg, "%s/m.gguf.svg", dir);
    snprintf(adapter, sizeof adapter, "%s/a.gguf", dir);
    RUN(test_train_resume_write);
    RUN(test_max_memory);
    RUN(test_usage);
    unlink(data);
    unlink(model);
    unlink(ckpt);
    unlink(svg);
    rmdir(dir);
    return test_summary();
}
