/* test_cmd_lora.c: `hearth lora list|show|use|rollback` in a temporary
 * HEARTH_HOME, `use --model` refusing an adapter of another base, and
 * `hearth generate --adapter` applying an adapter (and refusing a wrong
 * one), `hearth nightly --force` training on the memory's episodes. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "memory/memory.h"
#include "test.h"
#include "cli_capture.h"

static char g_out[65536], g_errbuf[8192], dir[256];

/* Runs fn with args (NULL-terminated, args[0] the verb); output in g_out,
 * g_errbuf. */
static int run(int (*fn)(int, char **), const char *const *args)
{
    return cli_run(fn, args, dir, g_out, sizeof g_out, g_errbuf, sizeof g_errbuf);
}

static int make_model(const char *path, uint64_t seed, const char *vocab)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.vocab_path = vocab;
    p.n_layer = 1, p.n_vocab = 16, p.n_embd = 32, p.n_head = 2;
    p.n_head_kv = 1, p.head_dim = 16, p.n_ff = 32, p.n_ctx = 64, p.seed = seed;
    p.tied_output = 1;
    hx_err err = {0};
    return hx_mkmodel_write(&p, path, &err);
}

/* An adapter on blk.0's attn_q and ffn_up of the model at base (rank 2),
 * recording its identity. */
static int make_adapter(const char *base, const char *path, float v)
{
    hx_model *m = NULL;
    hx_err err = {0};
    if (hx_model_load(base, NULL, &m, &err)) return -1;
    char id[65];
    hx_model_identity(m, id);
    hx_model_free(m);
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_gguf_set_str(w, "general.architecture", "qwen3");
    hx_gguf_set_str(w, "general.type", "adapter");
    hx_gguf_set_str(w, "adapter.type", "lora");
    hx_gguf_set_f32(w, "adapter.lora.alpha", 2.0f);
    hx_gguf_set_str(w, HX_ADAPTER_BASE_KEY, id);
    static float d[64];
    for (int i = 0; i < 64; i++) d[i] = v * (float)((i * 7) % 5 - 2);
    int64_t na[2] = {32, 2}, nb[2] = {2, 32};
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight.lora_a", HX_TYPE_F32, 2, na, d, NULL, NULL);
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight.lora_b", HX_TYPE_F32, 2, nb, d, NULL, NULL);
    hx_gguf_add_tensor(w, "blk.0.ffn_up.weight.lora_a", HX_TYPE_F32, 2, na, d, NULL, NULL);
    hx_gguf_add_tensor(w, "blk.0.ffn_up.weight.lora_b", HX_TYPE_F32, 2, nb, d, NULL, NULL);
    int rc = hx_gguf_writer_write(w, path, &err);
    hx_gguf_writer_free(w);
    return rc;
}

static char m1[300], m2[300], a1[300], a2[300];

static void test_list_use_show_rollback(void)
{
    ASSERT(make_model(m1, 1, NULL) == 0 && make_model(m2, 2, NULL) == 0);
    ASSERT(make_adapter(m1, a1, 0.1f) == 0 && make_adapter(m2, a2, 0.2f) == 0);
    const char *list[] = {"lora", "list", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, list), 0);
    EXPECT(strstr(g_out, "no adapters") != NULL);
    const char *use1[] = {"lora", "use", a1, "--model", m1, NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, use1), 0);
    EXPECT(strstr(g_out, "active: a1.gguf (scale 1)") != NULL);
    /* another base's adapter is refused by `use --model` and not activated */
    char spec[320];
    snprintf(spec, sizeof spec, "%s:0.5", a2);
    const char *use2[] = {"lora", "use", spec, "--model", m1, NULL};
    EXPECT(run(hx_cmd_lora, use2) != 0);
    EXPECT(strstr(g_errbuf, "another base model") != NULL);
    EXPECT_EQ_INT(run(hx_cmd_lora, list), 0);
    EXPECT(strstr(g_out, "* a1.gguf") && strstr(g_out, "  a2.gguf"));
    const char *use3[] = {"lora", "use", "a2.gguf:0.5", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, use3), 0);
    EXPECT_EQ_INT(run(hx_cmd_lora, list), 0);
    EXPECT(strstr(g_out, "* a2.gguf") && strstr(g_out, "scale 0.5"));
    const char *show[] = {"lora", "show", "a2.gguf", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, show), 0);
    EXPECT(strstr(g_out, "rank:       2") && strstr(g_out, "matrices:   2"));
    const char *rb[] = {"lora", "rollback", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, rb), 0);
    EXPECT(strstr(g_out, "rolled back: a1.gguf") != NULL);
    EXPECT_EQ_INT(run(hx_cmd_lora, rb), 0);
    EXPECT(strstr(g_out, "no adapter active") != NULL);
    EXPECT(run(hx_cmd_lora, rb) != 0);
    EXPECT(strstr(g_errbuf, "nothing to roll back") != NULL);
    /* ask/chat on another base: the active set is skipped with a warning */
    {
        const char *use_a1[] = {"lora", "use", "a1.gguf", NULL};
        EXPECT_EQ_INT(run(hx_cmd_lora, use_a1), 0);
        hx_model *mo = NULL;
        hx_err err = {0};
        ASSERT(hx_model_load(m2, NULL, &mo, &err) == HX_OK);
        hx_adapter *ads[HX_ADAPTER_MAX];
        float sc[HX_ADAPTER_MAX];
        int na = -1;
        EXPECT(hx_cli_load_adapters(mo, NULL, 0, 1, ads, sc, &na, &err) == HX_OK);
        EXPECT_EQ_INT(na, 0);
        const char *one[] = {a2};
        EXPECT(hx_cli_load_adapters(mo, one, 1, 1, ads, sc, &na, &err) == HX_OK && na == 1);
        for (int i = 0; i < na; i++) hx_adapter_free(ads[i]);
        const char *wrong[] = {a1};
        EXPECT(hx_cli_load_adapters(mo, wrong, 1, 1, ads, sc, &na, &err) == HX_ERR_INVALID);
        EXPECT(na == 0 && strstr(err.msg, "another base model"));
        hx_model_free(mo);
    }
    const char *bad[] = {"lora", "use", "missing.gguf", NULL};
    EXPECT(run(hx_cmd_lora, bad) != 0);
    EXPECT(strstr(g_errbuf, "missing.gguf") != NULL);
    const char *usage[] = {"lora", "frobnicate", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, usage), HX_EXIT_USAGE);
}

/* generate --adapter: applied (the greedy output changes with a strong
 * adapter), refused for another base. */
static void test_generate_adapter(void)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    char mv[300], av[300], strong[320];
    snprintf(mv, sizeof mv, "%s/mv.gguf", dir);
    snprintf(av, sizeof av, "%s/av.gguf", dir);
    ASSERT(make_model(mv, 3, vocab) == 0 && make_adapter(mv, av, 3.0f) == 0);
    snprintf(strong, sizeof strong, "%s:4", av);
    const char *plain[] = {"generate", "-m", mv, "-p", "Hello", "-n", "6", "--temp", "0",
                           "-t", "1", NULL};
    const char *with[] = {"generate", "-m", mv, "-p", "Hello", "-n", "6", "--temp", "0",
                          "-t", "1", "--adapter", strong, NULL};
    const char *zero[] = {"generate", "-m", mv, "-p", "Hello", "-n", "6", "--temp", "0",
                          "-t", "1", "--adapter", NULL, NULL};
    char zspec[320];
    snprintf(zspec, sizeof zspec, "%s:0", av);
    zero[12] = zspec;
    ASSERT(run(hx_cmd_generate, plain) == 0);
    char base_out[4096];
    snprintf(base_out, sizeof base_out, "%s", g_out);
    ASSERT(run(hx_cmd_generate, with) == 0);
    EXPECT(strcmp(base_out, g_out) != 0);
    ASSERT(run(hx_cmd_generate, zero) == 0);
    EXPECT_STR_EQ(base_out, g_out);
    const char *wrong[] = {"generate", "-m", mv, "-p", "Hello", "-n", "2", "--adapter", a1,
                           NULL};
    EXPECT(run(hx_cmd_generate, wrong) != 0);
    EXPECT(strstr(g_errbuf, "adapter") != NULL);
    unlink(mv), unlink(av);
}

/* n greedy tokens of a free-text turn after prompt from src, into out. */
static int src_text(hx_source *src, const char *prompt, int n, char *out, size_t size)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_err err = {0};
    int np = 0, end = 0, rc = src->begin(src->ctx, prompt, HX_CHOICE_NONE, &np, &err);
    for (int i = 0; !rc && !end && i < n; i++) rc = src->next(src->ctx, &b, &end, &err);
    snprintf(out, size, "%s", b.data ? b.data : "");
    hx_buf_free(&b);
    if (rc) printf("# source: %s\n", err.msg);
    return rc;
}

/* An engine source switched to an adapter between requests writes what a
 * fresh source made with it writes, and back to none what it wrote at
 * first: nothing computed under the old set is reused. */
static void test_source_adapter_switch(void)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    char mv[300], av[300], base[512], with[512], got[512];
    snprintf(mv, sizeof mv, "%s/ms.gguf", dir);
    snprintf(av, sizeof av, "%s/as.gguf", dir);
    ASSERT(make_model(mv, 5, vocab) == 0 && make_adapter(mv, av, 3.0f) == 0);
    hx_model *m = NULL;
    hx_adapter *a = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(mv, NULL, &m, &err) == HX_OK);
    ASSERT(hx_adapter_load(m, av, &a, &err) == HX_OK);
    float scale = 4.0f;
    hx_source_engine_params ep = hx_source_engine_default_params();
    ep.n_threads = 1;
    hx_source plain, fresh;
    ASSERT(hx_source_engine_new(m, NULL, 0, &ep, &plain, &err) == HX_OK);
    ep.adapters = &a, ep.adapter_scales = &scale, ep.n_adapters = 1;
    ASSERT(hx_source_engine_new(m, NULL, 0, &ep, &fresh, &err) == HX_OK);
    const char *prompt = "Hello there, how are";
    EXPECT(src_text(&plain, prompt, 8, base, sizeof base) == HX_OK);
    EXPECT(src_text(&fresh, prompt, 8, with, sizeof with) == HX_OK);
    EXPECT(strcmp(base, with) != 0); /* the adapter changes the text */
    EXPECT(hx_source_engine_set_adapters(&plain, &a, &scale, 1, &err) == HX_OK);
    EXPECT(src_text(&plain, prompt, 8, got, sizeof got) == HX_OK);
    EXPECT_STR_EQ(got, with);
    EXPECT(hx_source_engine_set_adapters(&plain, NULL, NULL, 0, &err) == HX_OK);
    EXPECT(src_text(&plain, prompt, 8, got, sizeof got) == HX_OK);
    EXPECT_STR_EQ(got, base);
    hx_source none = {0};
    EXPECT_EQ_INT(hx_source_engine_set_adapters(&none, NULL, NULL, 0, &err), HX_ERR_INVALID);
    hx_source_free(&plain), hx_source_free(&fresh);
    hx_adapter_free(a);
    hx_model_free(m);
    unlink(mv), unlink(av);
}

/* hearth nightly --force on a few accepted episodes: trains and reports
 * the held-out gate's decision; without --force on this busy machine the
 * governor may say "not now", which is no failure. */
static void test_nightly_cli(void)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return;
    char mv[300];
    snprintf(mv, sizeof mv, "%s/nb.gguf", dir);
    ASSERT(make_model(mv, 4, vocab) == 0);
    hx_memory *mem = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(NULL, &mem, &err) == HX_OK);
    for (int i = 0; i < 6; i++) {
        hx_episode ep;
        memset(&ep, 0, sizeof ep);
        ep.started_at = 1790000000 + i * 600;
        ep.finished_at = ep.started_at + 30;
        ep.request = (char *)"Book the usual room";
        ep.messages = (char *)"[{\"role\":\"user\",\"content\":\"Book the usual room\"},"
                      "{\"role\":\"assistant\",\"content\":\"Room 4B, 45 minutes.\"}]";
        int64_t id = 0;
        ASSERT(hx_memory_episode_add(mem, &ep, &id, &err) == HX_OK);
        ASSERT(hx_memory_episode_set_verdict(mem, id, HX_VERDICT_ACCEPTED, NULL, &err) == HX_OK);
    }
    hx_memory_close(mem);
    /* a memory bound below the estimate: refused before training */
    const char *small[] = {"nightly", "--force", "-m", mv, "--max-memory", "1M",
                           "--eval-tasks", "0", "-t", "1", NULL};
    EXPECT(run(hx_cmd_nightly, small) != 0);
    EXPECT(strstr(g_errbuf, "over the bound of 1.0 MiB") != NULL);
    EXPECT(strstr(g_out, "memory: estimate") != NULL);
    /* both adoptions below in the same second: the second gets its own name */
    setenv("HEARTH_NOW", "2026-11-29T20:00:00Z", 1);
    /* no replay: 3 steps of mechanics (replay: test_persona.c, test_nightly_agent.c) */
    const char *args[] = {"nightly", "--force", "-m", mv, "--steps", "3", "--rank", "2",
                          "--lr", "0.01", "-t", "1", "--eval-tasks", "0", "--replay", "0", NULL};
    EXPECT_EQ_INT(run(hx_cmd_nightly, args), 0);
    EXPECT(strstr(g_out, "episodes: 4 training") != NULL);
    EXPECT(strstr(g_out, "adopted nightly-") || strstr(g_out, "discarded"));
    EXPECT(strstr(g_out, "peak RSS") != NULL);
    EXPECT(strstr(g_out, "replay:") == NULL);
    printf("# %s", g_out);
    /* hearth lora train: the same run, no governor, no --force needed */
    const char *train[] = {"lora", "train", "-m", mv, "--steps", "2", "--rank", "2",
                           "--lr", "0.01", "-t", "1", "--eval-tasks", "0", "--replay", "0", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, train), 0);
    EXPECT(strstr(g_out, "steps: 2;") != NULL);
    EXPECT(strstr(g_out, "adopted nightly-20261129-200000-2.gguf") != NULL);
    unsetenv("HEARTH_NOW");
    /* config.json's nightly object sets the defaults (the options win);
     * a bad value is named */
    char cfg[400];
    snprintf(cfg, sizeof cfg, "%s/config", dir);
    mkdir(cfg, 0700);
    snprintf(cfg, sizeof cfg, "%s/config/config.json", dir);
    static const char good[] = "{\"nightly\": {\"replay\": 0, \"steps\": 2, \"rank\": 2, "
                               "\"lr\": 0.01, \"eval_tasks\": 0, \"targets\": \"q,v\"}}";
    ASSERT(hx_write_file_atomic(cfg, good, sizeof good - 1, NULL) == HX_OK);
    const char *bycfg[] = {"lora", "train", "-m", mv, "-t", "1", "--steps", "1", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, bycfg), 0);
    EXPECT(strstr(g_out, "steps: 1;") != NULL && strstr(g_out, "replay:") == NULL);
    static const char bad[] = "{\"nightly\": {\"replay\": -1}}";
    ASSERT(hx_write_file_atomic(cfg, bad, sizeof bad - 1, NULL) == HX_OK);
    EXPECT(run(hx_cmd_lora, bycfg) != 0);
    EXPECT(strstr(g_errbuf, "nightly.replay is not a number") != NULL);
    static const char badt[] = "{\"nightly\": {\"targets\": \"q,x\"}}";
    ASSERT(hx_write_file_atomic(cfg, badt, sizeof badt - 1, NULL) == HX_OK);
    EXPECT(run(hx_cmd_lora, bycfg) != 0);
    EXPECT(strstr(g_errbuf, "nightly.targets") != NULL);
    static const char badl[] = "{\"nightly\": {\"first_layer\": 1}}"; /* a 1-layer model */
    ASSERT(hx_write_file_atomic(cfg, badl, sizeof badl - 1, NULL) == HX_OK);
    EXPECT(run(hx_cmd_lora, bycfg) != 0);
    EXPECT(strstr(g_errbuf, "first layer 1 (of 1)") != NULL);
    static const char badr[] = "{\"nightly\": {\"replay_from\": \"teacher\"}}";
    ASSERT(hx_write_file_atomic(cfg, badr, sizeof badr - 1, NULL) == HX_OK);
    EXPECT(run(hx_cmd_lora, bycfg) != 0);
    EXPECT(strstr(g_errbuf, "nightly.replay_from is not \"base\" or \"oracle\"") != NULL);
    static const char badn[] = "{\"nightly\": {\"replay_near\": 2}}";
    ASSERT(hx_write_file_atomic(cfg, badn, sizeof badn - 1, NULL) == HX_OK);
    EXPECT(run(hx_cmd_lora, bycfg) != 0);
    EXPECT(strstr(g_errbuf, "nightly.replay_near is not a number") != NULL);
    static const char bads[] = "{\"nightly\": {\"replay_soft\": -3}}";
    ASSERT(hx_write_file_atomic(cfg, bads, sizeof bads - 1, NULL) == HX_OK);
    EXPECT(run(hx_cmd_lora, bycfg) != 0);
    EXPECT(strstr(g_errbuf, "nightly.replay_soft is not a number") != NULL);
    static const char badk[] = "{\"nightly\": {\"keep_generic\": -1}}";
    ASSERT(hx_write_file_atomic(cfg, badk, sizeof badk - 1, NULL) == HX_OK);
    EXPECT(run(hx_cmd_lora, bycfg) != 0);
    EXPECT(strstr(g_errbuf, "nightly.keep_generic is not a number") != NULL);
    unlink(cfg);
    /* the near share is the base's runs: not with the oracle's replay */
    const char *oracle_near[] = {"lora", "train", "-m", mv, "-t", "1", "--steps", "1",
                                 "--replay-from", "oracle", "--replay-near", "0.3", NULL};
    EXPECT(run(hx_cmd_lora, oracle_near) != 0);
    EXPECT(strstr(g_errbuf, "need --replay-from base") != NULL);
    const char *near_big[] = {"lora", "train", "--replay-near", "2", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, near_big), HX_EXIT_USAGE);
    const char *first_neg[] = {"lora", "train", "--first-layer", "-1", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, first_neg), HX_EXIT_USAGE);
    /* numbers are read whole: "abc" is not layer 0, "10x" not 10 steps */
    const char *first_abc[] = {"lora", "train", "--first-layer", "abc", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, first_abc), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "hearth lora train: --first-layer: 'abc' is not an integer") != NULL);
    const char *steps_x[] = {"nightly", "--steps", "10x", NULL};
    EXPECT_EQ_INT(run(hx_cmd_nightly, steps_x), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "hearth nightly: --steps: '10x' is not an integer") != NULL);
    const char *keep_neg[] = {"lora", "train", "--keep-generic", "-2", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, keep_neg), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "--keep-generic: '-2' is not a number") != NULL);
    const char *keep_at[] = {"lora", "train", "--keep-at", "prompts", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, keep_at), HX_EXIT_USAGE);
    const char *lr_zero[] = {"lora", "train", "--lr", "0", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, lr_zero), HX_EXIT_USAGE);
    EXPECT(strstr(g_errbuf, "--lr: '0' is not a number") != NULL);
    const char *train_on[] = {"lora", "train", "--train-on", "some", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, train_on), HX_EXIT_USAGE);
    const char *soft_frac[] = {"lora", "train", "--replay-soft", "2.5", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, soft_frac), HX_EXIT_USAGE);
    const char *soft_big[] = {"lora", "train", "--replay-soft", "1000", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, soft_big), HX_EXIT_USAGE);
    const char *badopt[] = {"lora", "train", "--replay-from", "teacher", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, badopt), HX_EXIT_USAGE);
    const char *forced[] = {"lora", "train", "--force", NULL};
    EXPECT_EQ_INT(run(hx_cmd_lora, forced), HX_EXIT_USAGE); /* not an option of train */
    const char *inst[] = {"nightly", "--install", NULL};
    EXPECT_EQ_INT(run(hx_cmd_nightly, inst), 0);
    /* the lines name the running program by its absolute path */
    char self[4096], want[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    snprintf(want, sizeof want, "15 3 * * * d=\"${XDG_STATE_HOME:-$HOME/.local/state}\"; "
             "mkdir -p \"$d\" && \"%s\" nightly >> \"$d/hearth-nightly.log\" 2>&1\n", self);
    EXPECT(self[0] == '/' && strstr(g_out, want) != NULL);
    EXPECT(strstr(g_out, "[Timer]\nOnCalendar=*-*-* 03:15:00") != NULL);
    snprintf(want, sizeof want, "ExecStart=\"%s\" nightly\n", self);
    EXPECT(strstr(g_out, want) != NULL);
    EXPECT(strstr(g_out, "WantedBy=timers.target") != NULL);
    unlink(mv);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hx_test_cmd_lora.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) return 1;
    setenv("HEARTH_HOME", dir, 1);
    snprintf(m1, sizeof m1, "%s/m1.gguf", dir);
    snprintf(m2, sizeof m2, "%s/m2.gguf", dir);
    snprintf(a1, sizeof a1, "%s/a1.gguf", dir);
    snprintf(a2, sizeof a2, "%s/a2.gguf", dir);
    RUN(test_list_use_show_rollback);
    RUN(test_generate_adapter);
    RUN(test_source_adapter_switch);
    RUN(test_nightly_cli);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) printf("# could not remove %s\n", dir);
    return test_summary();
}
