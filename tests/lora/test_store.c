/* test_store.c: the adapter store: use and rollback, adoption killed at
 * random moments (the active set is always the old or the new one, each
 * intact), a kill between the write and the pointer move, adapters of
 * another base refused when loaded for a model, bad names and damaged
 * pointer files. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lora/lora.h"
#include "test.h"
#include "modelfile/modelfile.h"

static char tmpdir[256];

static int make_model(const char *path, uint64_t seed)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.n_layer = 1, p.n_vocab = 16, p.n_embd = 32, p.n_head = 2;
    p.n_head_kv = 1, p.head_dim = 16, p.n_ff = 32, p.n_ctx = 8, p.seed = seed;
    hx_err err = {0};
    return hx_mkmodel_write(&p, path, &err);
}

/* An adapter on blk.0.attn_q of the model above (rows: its rank; a large
 * rank makes a large file), recording base_id when not NULL. */
static int make_adapter(const char *path, int rank, float v, const char *base_id)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_gguf_set_str(w, "general.architecture", "qwen3");
    hx_gguf_set_str(w, "general.type", "adapter");
    hx_gguf_set_str(w, "adapter.type", "lora");
    hx_gguf_set_f32(w, "adapter.lora.alpha", 2.0f);
    if (base_id) hx_gguf_set_str(w, HX_ADAPTER_BASE_KEY, base_id);
    float *d = malloc((size_t)rank * 32 * sizeof(float));
    for (int i = 0; i < rank * 32; i++) d[i] = v + (float)(i % 7) * 0.01f;
    int64_t na[2] = {32, rank}, nb[2] = {rank, 32};
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight.lora_a", HX_TYPE_F32, 2, na, d, NULL, NULL);
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight.lora_b", HX_TYPE_F32, 2, nb, d, NULL, NULL);
    hx_err err = {0};
    int rc = hx_gguf_writer_write(w, path, &err);
    hx_gguf_writer_free(w);
    free(d);
    return rc;
}

static void sha_of(const char *path, char out[65])
{
    hx_err err = {0};
    if (hx_sha256_file(path, NULL, out, &err)) strcpy(out, "missing");
}

static hx_lora_store *open_store(const char *sub)
{
    char d[512];
    snprintf(d, sizeof d, "%s/%s", tmpdir, sub);
    hx_lora_store *s = NULL;
    hx_err err = {0};
    if (hx_lora_store_open(d, &s, &err)) printf("# store: %s\n", err.msg);
    return s;
}

static void test_use_and_rollback(void)
{
    hx_lora_store *s = open_store("ur");
    ASSERT(s);
    char a1[512], a2[512];
    snprintf(a1, sizeof a1, "%s/a1.gguf", tmpdir);
    snprintf(a2, sizeof a2, "%s/a2.gguf", tmpdir);
    ASSERT(make_adapter(a1, 2, 0.1f, NULL) == 0 && make_adapter(a2, 4, 0.2f, NULL) == 0);
    hx_err err = {0};
    hx_lora_use act[HX_ADAPTER_MAX];
    int n = -1, depth = -1;
    ASSERT(hx_lora_store_active(s, act, &n, &err) == HX_OK);
    EXPECT_EQ_INT(n, 0);
    EXPECT(hx_lora_store_rollback(s, &err) == HX_ERR_NOTFOUND);
    ASSERT(hx_lora_store_adopt(s, a1, "first.gguf", 1.0f, &err) == HX_OK);
    ASSERT(hx_lora_store_add(s, a2, "second.gguf", &err) == HX_OK);
    EXPECT(hx_lora_store_add(s, a2, "second.gguf", &err) == HX_ERR_STATE);
    hx_lora_use two[2] = {{"first.gguf", 0.5f}, {"second.gguf", 2.0f}};
    ASSERT(hx_lora_store_use(s, two, 2, &err) == HX_OK);
    ASSERT(hx_lora_store_active(s, act, &n, &err) == HX_OK);
    EXPECT_EQ_INT(n, 2);
    EXPECT_STR_EQ(act[1].name, "second.gguf");
    EXPECT(act[0].scale == 0.5f && act[1].scale == 2.0f);
    char **names = NULL;
    int nn = 0;
    ASSERT(hx_lora_store_list(s, &names, &nn, &err) == HX_OK);
    EXPECT_EQ_INT(nn, 2); /* active.json and temporaries are not adapters */
    EXPECT(nn == 2 && !strcmp(names[0], "first.gguf"));
    hx_lora_names_free(names, nn);
    ASSERT(hx_lora_store_history(s, &depth, &err) == HX_OK);
    EXPECT_EQ_INT(depth, 2);
    ASSERT(hx_lora_store_rollback(s, &err) == HX_OK);
    ASSERT(hx_lora_store_active(s, act, &n, &err) == HX_OK);
    EXPECT(n == 1 && !strcmp(act[0].name, "first.gguf") && act[0].scale == 1.0f);
    ASSERT(hx_lora_store_rollback(s, &err) == HX_OK);
    ASSERT(hx_lora_store_active(s, act, &n, &err) == HX_OK);
    EXPECT_EQ_INT(n, 0);
    EXPECT(hx_lora_store_rollback(s, &err) == HX_ERR_NOTFOUND);
    /* previous adapters stay stored */
    ASSERT(hx_lora_store_list(s, &names, &nn, &err) == HX_OK);
    EXPECT_EQ_INT(nn, 2);
    hx_lora_names_free(names, nn);
    /* the history keeps the last 16 sets */
    for (int i = 0; i < 20; i++) {
        hx_lora_use u = {"second.gguf", (float)i};
        ASSERT(hx_lora_store_use(s, &u, 1, &err) == HX_OK);
    }
    ASSERT(hx_lora_store_history(s, &depth, &err) == HX_OK);
    EXPECT_EQ_INT(depth, 16);
    hx_lora_store_free(s);
}

static void test_bad_input(void)
{
    hx_lora_store *s = open_store("bad");
    ASSERT(s);
    hx_err err = {0};
    char model[512], ptr[512];
    snprintf(model, sizeof model, "%s/bm.gguf", tmpdir);
    ASSERT(make_model(model, 1) == 0);
    EXPECT(hx_lora_store_add(s, model, "m.gguf", &err) == HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "not an adapter") != NULL);
    EXPECT(hx_lora_store_add(s, model, "../evil.gguf", &err) == HX_ERR_INVALID);
    EXPECT(hx_lora_store_add(s, model, "noext", &err) == HX_ERR_INVALID);
    hx_lora_use u = {"absent.gguf", 1.0f};
    EXPECT(hx_lora_store_use(s, &u, 1, &err) == HX_ERR_NOTFOUND);
    EXPECT(strstr(err.msg, "absent.gguf") != NULL);
    snprintf(ptr, sizeof ptr, "%s/active.json", hx_lora_store_dir(s));
    static const char *const damaged[] = {"{", "[]", "{\"active\": 3}",
        "{\"active\": [{\"name\": \"../x.gguf\", \"scale\": 1}]}",
        "{\"active\": [], \"history\": 5}"};
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        ASSERT(hx_write_file_atomic(ptr, damaged[i], strlen(damaged[i]), &err) == HX_OK);
        hx_lora_use act[HX_ADAPTER_MAX];
        int n = 0;
        if (hx_lora_store_active(s, act, &n, &err) != HX_ERR_FORMAT ||
            !strstr(err.msg, "damaged"))
            test_fail_at(__FILE__, __LINE__, "pointer '%s' accepted", damaged[i]);
    }
    hx_lora_store_free(s);
    unlink(model);
}

/* A child adopting is killed between the write and the pointer move, and
 * at random moments of whole adoptions: the active set is always the old
 * one or the new one, and its file is intact. */
static void test_kill_during_adoption(void)
{
    hx_lora_store *s = open_store("kill");
    ASSERT(s);
    char old[512], big[512], old_path[4400];
    snprintf(old, sizeof old, "%s/old.gguf", tmpdir);
    snprintf(big, sizeof big, "%s/big.gguf", tmpdir);
    ASSERT(make_adapter(old, 2, 0.1f, NULL) == 0);
    ASSERT(make_adapter(big, 32768, 0.3f, NULL) == 0); /* 8 MiB */
    hx_err err = {0};
    ASSERT(hx_lora_store_adopt(s, old, "old.gguf", 1.0f, &err) == HX_OK);
    char want_old[65], want_big[65], got[65];
    hx_lora_store_path(s, "old.gguf", old_path, sizeof old_path);
    sha_of(old, want_old);
    sha_of(big, want_big);
    /* killed right after the write, before the pointer moves */
    pid_t pid = fork();
    if (pid == 0) {
        hx_err e = {0};
        if (hx_lora_store_add(s, big, "new0.gguf", &e) == HX_OK) raise(SIGKILL);
        _exit(1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFSIGNALED(status));
    hx_lora_use act[HX_ADAPTER_MAX];
    int n = 0;
    ASSERT(hx_lora_store_active(s, act, &n, &err) == HX_OK);
    EXPECT(n == 1 && !strcmp(act[0].name, "old.gguf"));
    sha_of(old_path, got);
    EXPECT_STR_EQ(got, want_old);
    /* killed at random moments */
    int saw_old = 0, saw_new = 0;
    srand(7);
    for (int k = 1; k <= 12; k++) {
        char name[64], p[4400];
        snprintf(name, sizeof name, "new%d.gguf", k);
        pid = fork();
        if (pid == 0) {
            hx_err e = {0};
            _exit(hx_lora_store_adopt(s, big, name, 1.0f, &e) ? 1 : 0);
        }
        /* spread over the adoption's duration (8 MiB written, fsynced) */
        struct timespec ts = {0, (long)(k * 50000 + rand() % 50000) * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (getenv("HX_STORE_DEBUG"))
            printf("# kill %d: %s %d\n", k, WIFSIGNALED(status) ? "killed" : "exited",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        ASSERT(hx_lora_store_active(s, act, &n, &err) == HX_OK);
        ASSERT(n == 1);
        hx_lora_store_path(s, act[0].name, p, sizeof p);
        sha_of(p, got);
        if (!strcmp(act[0].name, name)) {
            saw_new++;
            EXPECT_STR_EQ(got, want_big);
            ASSERT(hx_lora_store_rollback(s, &err) == HX_OK);
        } else {
            saw_old++;
            EXPECT_STR_EQ(act[0].name, "old.gguf");
            EXPECT_STR_EQ(got, want_old);
        }
        /* a stored name is complete, or absent */
        hx_lora_store_path(s, name, p, sizeof p);
        sha_of(p, got);
        EXPECT(!strcmp(got, "missing") || !strcmp(got, want_big));
    }
    printf("# 12 adoptions killed at random: %d left the old set, %d the new "
           "one\n", saw_old, saw_new);
    hx_lora_store_free(s);
}

/* The active set loads for its base and is refused on another one. */
static void test_wrong_base_refused(void)
{
    hx_lora_store *s = open_store("base");
    ASSERT(s);
    char m1[512], m2[512], ad[512];
    snprintf(m1, sizeof m1, "%s/m1.gguf", tmpdir);
    snprintf(m2, sizeof m2, "%s/m2.gguf", tmpdir);
    snprintf(ad, sizeof ad, "%s/ad.gguf", tmpdir);
    ASSERT(make_model(m1, 1) == 0 && make_model(m2, 2) == 0);
    hx_model *a = NULL, *b = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(m1, NULL, &a, &err) == HX_OK);
    ASSERT(hx_model_load(m2, NULL, &b, &err) == HX_OK);
    char id[65];
    hx_model_identity(a, id);
    ASSERT(make_adapter(ad, 2, 0.1f, id) == 0);
    ASSERT(hx_lora_store_adopt(s, ad, "mine.gguf", 0.5f, &err) == HX_OK);
    hx_adapter *ads[HX_ADAPTER_MAX];
    float sc[HX_ADAPTER_MAX];
    int n = 0;
    ASSERT(hx_lora_store_load_active(s, a, ads, sc, &n, &err) == HX_OK);
    EXPECT(n == 1 && sc[0] == 0.5f);
    for (int i = 0; i < n; i++) hx_adapter_free(ads[i]);
    EXPECT(hx_lora_store_load_active(s, b, ads, sc, &n, &err) == HX_ERR_INVALID);
    EXPECT(n == 0 && strstr(err.msg, "another base model"));
    printf("# %s\n", err.msg);
    hx_model_free(a), hx_model_free(b);
    hx_lora_store_free(s);
    unlink(m1), unlink(m2), unlink(ad);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_store.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    RUN(test_use_and_rollback);
    RUN(test_bad_input);
    RUN(test_kill_during_adoption);
    RUN(test_wrong_base_refused);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return test_summary();
}
