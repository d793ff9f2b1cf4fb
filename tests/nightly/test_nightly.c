/* test_nightly.c: the nightly job: the dataset (accepted as they were,
 * corrected with the correction as target, rejected and unjudged left
 * out, the latest held out), a forced run that trains, passes the held-out
 * gate and adopts through the store, a run whose gate discards the
 * adapter, replay conversations mixed into the training split in their
 * ratio (a stand-in replay), a run stopped between chunks that resumes
 * to the same result,
 * training on what the base gets wrong only (new_only), checked against
 * the base's own greedy tokens,
 * the generic-task gate (a stand-in evaluation) and its scales, early
 * stopping on the held-out curve, the memory bound, and the governor
 * refusing on battery. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nightly_fixture.h"
#include "modelfile/modelfile.h"

static hx_memory *mem;

static int64_t add_episode(int i, const char *request, const char *answer,
                           int verdict, const char *corrected)
{
    char msgs[2048];
    snprintf(msgs, sizeof msgs,
             "[{\"role\":\"user\",\"content\":\"%s\"},"
             "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":"
             "\"function\",\"function\":{\"name\":\"calendar.create_event\","
             "\"arguments\":{\"room\":\"4B\",\"minutes\":45}}}]},"
             "{\"role\":\"tool\",\"content\":\"{\\\"ok\\\":true}\"},"
             "{\"role\":\"assistant\",\"content\":\"%s\"}]", request, answer);
    hx_episode ep;
    memset(&ep, 0, sizeof ep);
    ep.started_at = 1790000000 + i * 3600;
    ep.finished_at = ep.started_at + 60;
    ep.request = (char *)request;
    ep.messages = msgs;
    ep.outcome = (char *)answer;
    int64_t id = 0;
    hx_err err = {0};
    if (hx_memory_episode_add(mem, &ep, &id, &err)) printf("# add: %s\n", err.msg);
    if (verdict && hx_memory_episode_set_verdict(mem, id, verdict, corrected, &err))
        printf("# verdict: %s\n", err.msg);
    return id;
}

/* Text of the tokens of d (only the masked ones if masked). */
static void detok(const hx_vocab *v, const hx_nightly_data *d, int masked, hx_buf *out)
{
    char piece[256];
    for (size_t i = 0; i < d->n; i++) {
        if (masked && !d->mask[i]) continue;
        int32_t k = hx_token_to_piece(v, d->tokens[i], piece, sizeof piece, 1);
        if (k > 0) hx_buf_append(out, piece, (size_t)k);
    }
}

static void fill_memory(void)
{
    static const char *const who[] = {"Bobby", "Kenji", "Ana", "Lee"};
    for (int i = 0; i < 10; i++) {
        char req[256], ans[256];
        snprintf(req, sizeof req, "Set up a meeting with %s about the budget", who[i % 4]);
        snprintf(ans, sizeof ans, "Booked Room %s for %d minutes with %s.",
                 i == 3 ? "9Z" : "4B", i == 3 ? 30 : 45, who[i % 4]);
        add_episode(i, req, ans, i == 3 ? HX_VERDICT_CORRECTED : HX_VERDICT_ACCEPTED,
                    i == 3 ? "Booked Room 4B for 45 minutes with Lee, as usual." : NULL);
    }
    add_episode(20, "Delete all my mail", "Deleted everything.", HX_VERDICT_REJECTED, NULL);
    add_episode(21, "What is unjudged", "Nobody said.", HX_VERDICT_NONE, NULL);
}

static void test_dataset(void)
{
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(model, NULL, &m, &err) == HX_OK);
    hx_nightly_data tr, ho;
    ASSERT(hx_nightly_dataset(hx_model_vocab(m), mem, 0.2, NULL, NULL, &tr, &ho, &err) == HX_OK);
    EXPECT_EQ_INT(tr.n_docs, 8);
    EXPECT_EQ_INT(ho.n_docs, 2); /* the latest two accepted ones */
    EXPECT(ho.split_at == 1790000000 + 8 * 3600 + 60);
    hx_buf all, targets;
    hx_buf_init(&all), hx_buf_init(&targets);
    detok(hx_model_vocab(m), &tr, 0, &all);
    detok(hx_model_vocab(m), &tr, 1, &targets);
    ASSERT(all.data && targets.data);
    EXPECT(strstr(all.data, "Delete all my mail") == NULL);  /* rejected */
    EXPECT(strstr(all.data, "What is unjudged") == NULL);    /* no verdict */
    EXPECT(strstr(all.data, "<|im_start|>user\nSet up a meeting with Bobby") != NULL);
    /* the correction is the target; the corrected answer is gone */
    EXPECT(strstr(targets.data, "with Lee, as usual.<|im_end|>") != NULL);
    EXPECT(strstr(all.data, "Room 9Z") == NULL);
    /* the assistant's calls and answers are targets, the requests are not */
    EXPECT(strstr(targets.data, "\"room\":\"4B\"") != NULL);
    EXPECT(strstr(targets.data, "Set up a meeting") == NULL);
    hx_buf_free(&all), hx_buf_free(&targets);
    hx_nightly_data_free(&tr), hx_nightly_data_free(&ho);
    hx_model_free(m);
}

/* A stand-in for the agent's replay (hx_agent_nightly_replay, tested in
 * tests/nightly/test_nightly_agent.c): conversation k is one document of
 * tokens 7, 7, k, 9 (all targets), marked by its leading 7s. */
typedef struct stub_replay {
    int calls, asked;
    uint64_t seed;
} stub_replay;

static int stub_replay_fn(void *user, int n, uint64_t seed, hx_nightly_data *out, hx_err *err)
{
    stub_replay *s = user;
    (void)err;
    s->calls++, s->asked = n, s->seed = seed;
    for (int k = 0; k < n; k++) {
        const int32_t t[4] = {7, 7, 100 + k, 9};
        const uint8_t m[4] = {1, 1, 1, 1};
        if (hx_nightly_data_add(out, t, m, 4)) return HX_ERR_NOMEM;
        out->n_episodes++;
    }
    return HX_OK;
}

static int is_replay_doc(const hx_nightly_data *d, int i)
{
    const size_t a = i ? d->ends[i - 1] : 0;
    return d->ends[i] - a == 4 && d->tokens[a] == 7 && d->tokens[a + 1] == 7;
}

/* Replay: the ratio's count of generic conversations mixed into the
 * training split, spread through it; the held-out split untouched. */
static void test_replay_mix(void)
{
    EXPECT_EQ_INT(hx_nightly_replay_count(1.0, 8), 8);
    EXPECT_EQ_INT(hx_nightly_replay_count(0.5, 8), 4);
    EXPECT_EQ_INT(hx_nightly_replay_count(0.3, 8), 2);  /* 2.4 */
    EXPECT_EQ_INT(hx_nightly_replay_count(0.0, 8), 0);
    EXPECT_EQ_INT(hx_nightly_replay_count(-1.0, 8), 0);
    EXPECT_EQ_INT(hx_nightly_replay_count(2.0, 0), 0);
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(model, NULL, &m, &err) == HX_OK);
    hx_nightly_data tr, ho;
    ASSERT(hx_nightly_dataset(hx_model_vocab(m), mem, 0.2, NULL, NULL, &tr, &ho, &err) == HX_OK);
    hx_model_free(m);
    const size_t user_tokens = tr.n, held_tokens = ho.n;
    const int user_docs = tr.n_docs;
    ASSERT(user_docs == 8);
    stub_replay sr = {0};
    hx_nightly_data rep;
    memset(&rep, 0, sizeof rep);
    ASSERT(stub_replay_fn(&sr, hx_nightly_replay_count(0.5, tr.n_episodes), 1, &rep, &err) == HX_OK);
    ASSERT(hx_nightly_mix(&tr, &rep, &err) == HX_OK);
    EXPECT_EQ_INT(tr.n_docs, 12);
    EXPECT_EQ_INT(tr.n_episodes, 8); /* the user's episodes still count alone */
    EXPECT_EQ_INT(tr.n_replay, 4);
    EXPECT(tr.n == user_tokens + 16);
    int n_rep = 0, run = 0, longest_run = 0, first = -1;
    for (int i = 0; i < tr.n_docs; i++) {
        const int r = is_replay_doc(&tr, i);
        n_rep += r;
        if (r && first < 0) first = i;
        run = r ? 0 : run + 1;
        longest_run = run > longest_run ? run : longest_run;
        for (size_t k = i ? tr.ends[i - 1] : 0; k < tr.ends[i]; k++)
            if (tr.doc[k] != i) { EXPECT(tr.doc[k] == i); break; }
    }
    EXPECT_EQ_INT(n_rep, 4); /* 1 replay conversation per 2 episodes */
    EXPECT(first >= 0 && first <= 2);
    EXPECT(longest_run <= 2); /* spread: never more than 2 user documents in a row */
    /* nothing of the replay in the held-out split, which stays as it was */
    EXPECT(ho.n == held_tokens);
    for (int i = 0; i < ho.n_docs; i++) EXPECT(!is_replay_doc(&ho, i));
    hx_nightly_data_free(&rep);
    hx_nightly_data_free(&tr), hx_nightly_data_free(&ho);
}

static hx_nightly_params params(hx_lora_store *st, const char *work)
{
    hx_nightly_params p = fixture_params(mem, st, work);
    p.train.opt.n_steps = 12;
    p.chunk = 5;
    p.n_threads = 2;
    return p;
}

/* A store in tmpdir/adapters<tag> (NULL on failure) and its work
 * directory's path, tmpdir/work<tag>, into work. */
static hx_lora_store *store_at(const char *tag, char work[300])
{
    char sd[300];
    snprintf(sd, sizeof sd, "%s/adapters%s", tmpdir, tag);
    snprintf(work, 300, "%s/work%s", tmpdir, tag);
    hx_lora_store *st = NULL;
    hx_err err = {0};
    return hx_lora_store_open(sd, &st, &err) == HX_OK ? st : NULL;
}

/* How many adapters of the store's active set load on the base at path
 * (-1 when the base or the set does not load). */
static int active_loads(hx_lora_store *st, const char *path)
{
    hx_model *m = NULL;
    hx_adapter *ads[HX_ADAPTER_MAX];
    float sc[HX_ADAPTER_MAX];
    int na = 0;
    hx_err err = {0};
    if (hx_model_load(path, NULL, &m, &err)) return -1;
    if (hx_lora_store_load_active(st, m, ads, sc, &na, &err)) na = -1;
    for (int i = 0; i < na; i++) hx_adapter_free(ads[i]);
    hx_model_free(m);
    return na;
}

static void test_run_adopts_and_gate_discards(void)
{
    char sd[300], work[300];
    snprintf(sd, sizeof sd, "%s/adapters", tmpdir);
    snprintf(work, sizeof work, "%s/work", tmpdir);
    hx_lora_store *st = NULL;
    hx_err err = {0};
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    hx_nightly_params p = params(st, work);
    hx_nightly_report r;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    printf("# nightly: %d train / %d held-out episodes (%lld / %lld tokens), %d "
           "steps: %s\n", r.n_train, r.n_heldout, (long long)r.train_tokens,
           (long long)r.heldout_tokens, r.steps, r.reason);
    EXPECT(r.adopted && r.loss_after < r.loss_before);
    EXPECT_EQ_INT(r.steps, 12);
    EXPECT_EQ_INT(r.trained_tokens, 12 * 32 * 2); /* steps x window x sequences */
    EXPECT(r.train_seconds > 0 && r.train_cpu_seconds > 0);
    hx_lora_use act[HX_ADAPTER_MAX];
    int n = 0;
    ASSERT(hx_lora_store_active(st, act, &n, &err) == HX_OK);
    EXPECT(n == 1 && !strcmp(act[0].name, r.adapter) && !strncmp(r.adapter, "nightly-", 8));
    EXPECT_EQ_INT(active_loads(st, model), 1); /* the adopted adapter loads on its base */
    /* an impossible gate: discarded, the active adapter unchanged */
    char adopted[96];
    snprintf(adopted, sizeof adopted, "%s", r.adapter);
    p.min_gain = 2.0;
    /* with replay: asked for the ratio's count, reported; the user's
     * episodes still counted alone */
    stub_replay sr = {0};
    p.replay = stub_replay_fn, p.replay_user = &sr, p.replay_ratio = 0.5;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    EXPECT(!r.adopted && strstr(r.reason, "discarded") != NULL);
    EXPECT(sr.calls == 1 && sr.asked == 4 && sr.seed == 1);
    EXPECT(r.n_train == 8 && r.n_replay == 4 && r.replay_tokens == 16);
    printf("# %s\n", r.reason);
    ASSERT(hx_lora_store_active(st, act, &n, &err) == HX_OK);
    EXPECT(n == 1 && !strcmp(act[0].name, adopted));
    hx_lora_store_free(st);
}

/* A stand-in for the agent's generic evaluation (nightly/nightly_agent.c
 * runs the real one; tests/nightly/test_nightly_agent.c): the base passes
 * base_pass tasks, the candidate adapter_pass, any other adapter set
 * active_pass. Records what it was asked. */
typedef struct stub_eval {
    int base_pass, adapter_pass, active_pass, calls, with_adapter, n_asked;
    int small_pass; /* > 0: the candidate at a scale of 0.5 or less passes this many */
    char last_set[4][512]; /* per call: "base" or the adapters' file names */
} stub_eval;

static int stub_eval_fn(void *user, const char *const *ads, const float *scales, int n_ads,
                        int n, uint8_t *pass, hx_err *err)
{
    stub_eval *s = user;
    (void)err;
    char *set = s->last_set[s->calls & 3];
    snprintf(set, 512, "%s", n_ads ? "" : "base");
    for (int i = 0; i < n_ads; i++) {
        const char *b = strrchr(ads[i], '/');
        size_t l = strlen(set);
        snprintf(set + l, 512 - l, "%s%s:%g", i ? "," : "", b ? b + 1 : ads[i],
                 (double)scales[i]);
    }
    s->calls++;
    s->n_asked = n;
    const int cand = n_ads == 1 && strstr(ads[0], "candidate.gguf") != NULL;
    if (cand) {
        struct stat st;
        s->with_adapter += stat(ads[0], &st) == 0; /* the candidate exists */
    }
    const int small = cand && s->small_pass > 0 && scales[0] <= 0.5f;
    const int k = small ? s->small_pass : cand ? s->adapter_pass
                  : n_ads ? s->active_pass : s->base_pass;
    for (int i = 0; i < n; i++) pass[i] = i < k; /* the first k tasks */
    return HX_OK;
}

/* new_only: the base's forward over each training document decides,
 * token by token, what is left out: exactly the targets whose greedy
 * token (recomputed here) is the target; the rest train and the run is
 * otherwise the same. */
static void test_train_on_new(void)
{
    char work[300];
    hx_err err = {0};
    hx_lora_store *st = store_at("new", work);
    ASSERT(st != NULL);
    hx_nightly_params p = params(st, work);
    p.new_only = 1;
    /* a trained base knows some of the episodes' tokens (the random one
     * none): hearth-tiny, from the repository */
    const char *base = access("models/hearth-tiny.gguf", R_OK) ? model : "models/hearth-tiny.gguf";
    p.model = base;
    p.lora.targets = HX_LORA_UP | HX_LORA_DOWN;
    hx_nightly_report r;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    /* the oracle: the same documents, the base's argmax at every target */
    hx_model *m = NULL;
    hx_trainer *tr = NULL;
    hx_nightly_data d, ho;
    ASSERT(hx_model_load(base, NULL, &m, &err) == HX_OK);
    ASSERT(hx_nightly_dataset(hx_model_vocab(m), mem, p.heldout_frac, NULL, NULL, &d, &ho,
                              &err) == HX_OK);
    ASSERT(hx_nightly_trainer(&p, base, &tr, &err) == HX_OK);
    const int32_t nv = hx_trainer_hparams(tr)->n_vocab;
    int64_t all = 0, known = 0;
    for (int i = 0; i < d.n_docs; i++) {
        size_t a = i ? d.ends[i - 1] : 0, n = d.ends[i] - a - 1;
        float *lg = malloc(n * (size_t)nv * sizeof *lg);
        hx_batch b = {.n_seq = 1, .n_tok = (int)n, .tokens = d.tokens + a,
                      .targets = d.tokens + a + 1, .mask = d.mask + a + 1};
        ASSERT(lg && hx_trainer_forward(tr, &b, lg, NULL, NULL, &err) == HX_OK);
        for (size_t j = 0; j < n; j++) {
            if (!d.mask[a + 1 + j]) continue;
            all++, known += hx_argmax(lg + j * (size_t)nv, nv) == d.tokens[a + 1 + j];
        }
        free(lg);
    }
    printf("# new only: %lld of %lld targets known to the base (oracle %lld of %lld); %s\n",
           (long long)r.known_targets, (long long)r.all_targets, (long long)known,
           (long long)all, r.reason);
    EXPECT(all > 0 && r.all_targets == all && r.known_targets == known);
    EXPECT(base == model || (known > 0 && known < all)); /* some known, some not */
    EXPECT(r.steps == 12 && !isnan(r.loss_after)); /* trained on the rest */
    hx_trainer_free(tr);
    hx_nightly_data_free(&d), hx_nightly_data_free(&ho);
    hx_model_free(m);
    hx_lora_store_free(st);
}

/* params() with the stand-in replay, one conversation per 2 episodes. */
static hx_nightly_params replay_params(hx_lora_store *st, const char *work, stub_replay *sr)
{
    hx_nightly_params p = params(st, work);
    p.replay = stub_replay_fn, p.replay_user = sr, p.replay_ratio = 0.5;
    return p;
}

/* Two runs on the stand-in replay that differ in one option: each its own
 * store and work directory. The params point into the pair: keep it put. */
typedef struct {
    char work[2][300];
    hx_lora_store *st[2];
    stub_replay sr[2];
    hx_nightly_params p[2];
} replay_pair;

static int pair_open(replay_pair *pr, const char *a, const char *b)
{
    memset(pr, 0, sizeof *pr);
    pr->st[0] = store_at(a, pr->work[0]), pr->st[1] = store_at(b, pr->work[1]);
    for (int i = 0; i < 2 && pr->st[i]; i++)
        pr->p[i] = replay_params(pr->st[i], pr->work[i], &pr->sr[i]);
    return pr->st[0] && pr->st[1];
}

/* replay_soft: the replay's targets, and only those, are learned as the
 * base's distribution (one per predicted token of each replay
 * conversation: 3 of the stand-in's 4 tokens); the run trains otherwise
 * the same data and ends elsewhere than with the tokens as targets. */
static void test_replay_soft(void)
{
    hx_err err = {0};
    replay_pair pr;
    ASSERT(pair_open(&pr, "soft", "hard"));
    hx_nightly_params p = pr.p[0], q = pr.p[1];
    p.replay_soft = 4;
    hx_nightly_report r, rh;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    ASSERT(hx_nightly_run(&q, &rh, &err) == HX_OK);
    printf("# soft replay: %lld targets, held-out loss %.4f -> %.4f (tokens: %.4f)\n",
           (long long)r.soft_targets, r.loss_before, r.loss_after, rh.loss_after);
    EXPECT(r.n_replay == 4 && r.soft_targets == 12);
    EXPECT(rh.soft_targets == 0);
    EXPECT(r.steps == 12 && !isnan(r.loss_after) && r.loss_before == rh.loss_before);
    EXPECT(r.loss_after != rh.loss_after);
    hx_lora_store_free(pr.st[0]), hx_lora_store_free(pr.st[1]);
}

/* keep_generic: the sums come from the replay (its tokens counted in the
 * log), every step logs the penalty, the estimate counts the sums, and
 * the run ends elsewhere than without it; without a replay it refuses. */
static void test_keep_generic(void)
{
    hx_err err = {0};
    replay_pair pr;
    ASSERT(pair_open(&pr, "keep", "nokeep"));
    hx_nightly_params p = pr.p[0], q = pr.p[1];
    p.keep_generic = 50.0;
    char *log = NULL;
    size_t log_n = 0;
    p.log = open_memstream(&log, &log_n);
    hx_nightly_report r, rq;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fclose(p.log);
    ASSERT(hx_nightly_run(&q, &rq, &err) == HX_OK);
    printf("# keep 50: held-out loss %.4f -> %.4f (without: %.4f); estimate %zu (without %zu)\n",
           r.loss_before, r.loss_after, rq.loss_after, r.mem_estimate, rq.mem_estimate);
    /* 4 replay conversations of 4 tokens: 3 predicted each */
    EXPECT(log && strstr(log, "nightly: keep: the adapter's change on the replay's 12 tokens"));
    EXPECT(log && strstr(log, "step 12 loss ") && strstr(strstr(log, "step 12 loss "), " keep "));
    EXPECT(r.mem_estimate > rq.mem_estimate);
    EXPECT(r.steps == 12 && r.loss_after != rq.loss_after);
    free(log);
    /* at the positions that decide the replay's answers: here all 12 */
    log = NULL, log_n = 0;
    p.keep_at_targets = 1;
    p.log = open_memstream(&log, &log_n);
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fclose(p.log);
    EXPECT(log && strstr(log, "on the replay's 12 positions of the assistant's tokens"));
    free(log);
    /* no replay: nothing to keep */
    p.replay = NULL, p.log = NULL;
    EXPECT(hx_nightly_run(&p, &r, &err) == HX_ERR_INVALID);
    EXPECT(strstr(err.msg, "--keep-generic needs the replay") != NULL);
    hx_lora_store_free(pr.st[0]), hx_lora_store_free(pr.st[1]);
}

/* The gate's second half: a drop over the margin on the generic tasks
 * discards an adapter that lowered the held-out loss; a drop within it
 * adopts; the peak RSS and the memory estimate are reported. */
static void test_generic_gate(void)
{
    char sd[300], work[300];
    snprintf(sd, sizeof sd, "%s/adapters5", tmpdir);
    snprintf(work, sizeof work, "%s/work5", tmpdir);
    hx_lora_store *st = NULL;
    hx_err err = {0};
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    hx_nightly_params p = params(st, work);
    stub_eval se = {.base_pass = 10, .adapter_pass = 9};
    char logbuf[4096] = "";
    FILE *log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    ASSERT(log != NULL);
    p.eval = stub_eval_fn, p.eval_user = &se, p.eval_tasks = 20, p.eval_margin = 0.02;
    p.n_scales = 1; /* one candidate (the default tries 0.9 after 1) */
    p.log = log;
    hx_nightly_report r;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fflush(log);
    printf("# %s\n", r.reason);
    EXPECT(r.loss_after < r.loss_before);  /* the loss half passed */
    EXPECT(!r.adopted && strstr(r.reason, "generic tasks 10/20 with the base -> "
                                       "9/20 with the new adapter") != NULL);
    EXPECT(strstr(logbuf, "nightly: discarded: generic tasks") != NULL);
    EXPECT(strstr(logbuf, "nightly: generic tasks: the base against the new adapter") != NULL);
    EXPECT_STR_EQ(se.last_set[0], "base"); /* nothing active: the base */
    EXPECT_STR_EQ(se.last_set[1], "candidate.gguf:1");
    EXPECT_EQ_INT(se.calls, 2);
    EXPECT_EQ_INT(se.with_adapter, 1);
    EXPECT_EQ_INT(se.n_asked, 20);
    EXPECT_EQ_INT(r.eval_n, 20);
    char cand[400];
    struct stat sst;
    snprintf(cand, sizeof cand, "%s/candidate.gguf", work);
    EXPECT(stat(cand, &sst) != 0); /* the discarded candidate is removed */
    hx_lora_use act[HX_ADAPTER_MAX];
    int n = -1;
    ASSERT(hx_lora_store_active(st, act, &n, &err) == HX_OK);
    EXPECT_EQ_INT(n, 0);
    /* a drop within the margin (5 points of 5 allowed): adopted */
    p.eval_margin = 0.05;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    printf("# %s\n", r.reason);
    EXPECT(r.adopted && strstr(r.reason, "generic tasks 10/20 with the base -> 9/20") != NULL);
    EXPECT(r.peak_rss_kb > 0);
    EXPECT(r.mem_estimate > 0);
    printf("# memory estimate %.2f MiB, peak RSS %.1f MiB\n", r.mem_estimate / 1048576.0,
           r.peak_rss_kb / 1024.0);
    fclose(log);
    hx_lora_store_free(st);
}

static void set_now(int night)
{
    char b[64];
    snprintf(b, sizeof b, "2026-12-%02dT03:15:00+00:00", night);
    setenv("HEARTH_NOW", b, 1);
}

/* The generic tasks compare against what the user runs now: the active
 * adapter once one is adopted (a candidate better than the base but worse
 * than the active one is discarded, the reason naming it), and the base
 * again when the active adapter belongs to another base model. */
static void test_gate_against_active(void)
{
    char sd[300], work[300], other[300], oad[300];
    snprintf(sd, sizeof sd, "%s/adapters7", tmpdir);
    snprintf(work, sizeof work, "%s/work7", tmpdir);
    hx_lora_store *st = NULL;
    hx_err err = {0};
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    hx_nightly_params p = params(st, work);
    p.train.opt.n_steps = 4;
    stub_eval se = {.base_pass = 10, .adapter_pass = 12, .active_pass = 15};
    char logbuf[8192] = "";
    FILE *log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    ASSERT(log != NULL);
    p.eval = stub_eval_fn, p.eval_user = &se, p.eval_tasks = 20, p.eval_margin = 0.02;
    p.log = log;
    hx_nightly_report r;
    set_now(1); /* adopted names carry the time: one adoption per "night" */
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK); /* 10 -> 12 against the base */
    EXPECT(r.adopted);
    EXPECT_STR_EQ(r.eval_ref, "the base");
    char first[96];
    snprintf(first, sizeof first, "%s", r.adapter);
    /* now the active adapter passes 15: a candidate passing 12 is a drop */
    set_now(2);
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fflush(log);
    printf("# %s\n", r.reason);
    char want[200];
    snprintf(want, sizeof want, "the active adapter %s", first);
    EXPECT_STR_EQ(r.eval_ref, want);
    EXPECT(!r.adopted && strstr(r.reason, "generic tasks 15/20 with the active adapter") != NULL);
    EXPECT(strstr(r.reason, first) != NULL);
    snprintf(want, sizeof want, "nightly: generic tasks: the active adapter %s against", first);
    EXPECT(strstr(logbuf, want) != NULL);
    snprintf(want, sizeof want, "%s:1", first);
    EXPECT_STR_EQ(se.last_set[2], want); /* the active file at its scale */
    hx_lora_use act[HX_ADAPTER_MAX];
    int n = 0;
    ASSERT(hx_lora_store_active(st, act, &n, &err) == HX_OK);
    EXPECT(n == 1 && !strcmp(act[0].name, first)); /* unchanged */
    /* an active adapter of another base: ask and chat run the base, so
     * does the comparison (10 -> 12: adopted) */
    snprintf(other, sizeof other, "%s/other.gguf", tmpdir);
    snprintf(oad, sizeof oad, "%s/other-adapter.gguf", tmpdir);
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.vocab_path = vocab_path;
    mp.n_layer = 2, mp.n_embd = 32, mp.n_head = 2, mp.n_head_kv = 1;
    mp.head_dim = 16, mp.n_ff = 64, mp.n_ctx = 256, mp.tied_output = 1, mp.seed = 99;
    hx_trainer *tr = NULL;
    ASSERT(hx_mkmodel_write(&mp, other, &err) == HX_OK);
    ASSERT(hx_nightly_trainer(&p, other, &tr, &err) == HX_OK);
    ASSERT(hx_trainer_write_gguf(tr, oad, NULL, &err) == HX_OK);
    hx_trainer_free(tr);
    hx_lora_use u = {"other-adapter.gguf", 1.0f};
    ASSERT(hx_lora_store_add(st, oad, u.name, &err) == HX_OK);
    ASSERT(hx_lora_store_use(st, &u, 1, &err) == HX_OK);
    set_now(3);
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fflush(log);
    printf("# %s\n", r.reason);
    EXPECT_STR_EQ(r.eval_ref, "the base");
    EXPECT(r.adopted && strstr(r.reason, "generic tasks 10/20 with the base -> 12/20") != NULL);
    EXPECT(strstr(logbuf, "not what ask and chat run") != NULL);
    unsetenv("HEARTH_NOW");
    fclose(log);
    hx_lora_store_free(st);
}

/* A gate with scales: the candidate is tried at each in order until one
 * passes, adopted at that scale, which the store keeps (hearth ask and
 * chat load the active set with its scales) and the next night's gate
 * runs the active adapter at; none passing discards it; the trained
 * candidate is kept at keep_candidate either way. */
static void test_gate_scales(void)
{
    char sd[300], work[300], kept[300];
    snprintf(sd, sizeof sd, "%s/adapters8", tmpdir);
    snprintf(work, sizeof work, "%s/work8", tmpdir);
    snprintf(kept, sizeof kept, "%s/kept.gguf", tmpdir);
    hx_lora_store *st = NULL;
    hx_err err = {0};
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    hx_nightly_params p = params(st, work);
    p.train.opt.n_steps = 4;
    /* 10 -> 8 at scales above 0.5 (10 points over 20 tasks), 10 at 0.5 */
    stub_eval se = {.base_pass = 10, .adapter_pass = 8, .small_pass = 10, .active_pass = 10};
    p.eval = stub_eval_fn, p.eval_user = &se, p.eval_tasks = 20, p.eval_margin = 0.02;
    p.scales[0] = 1.0f, p.scales[1] = 0.75f, p.scales[2] = 0.5f, p.n_scales = 3;
    p.keep_candidate = kept;
    hx_nightly_report r;
    set_now(10);
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    printf("# %s\n", r.reason);
    EXPECT_EQ_INT(se.calls, 4); /* the base, then 1, 0.75, 0.5 */
    EXPECT_STR_EQ(se.last_set[1], "candidate.gguf:1");
    EXPECT_STR_EQ(se.last_set[2], "candidate.gguf:0.75");
    EXPECT_STR_EQ(se.last_set[3], "candidate.gguf:0.5");
    EXPECT(r.adopted && r.scale == 0.5f && strstr(r.reason, "at scale 0.50") != NULL);
    EXPECT(r.eval_adapter == 10 && r.eval_lost == 0);
    hx_lora_use act[HX_ADAPTER_MAX];
    int n = 0;
    ASSERT(hx_lora_store_active(st, act, &n, &err) == HX_OK);
    EXPECT(n == 1 && !strcmp(act[0].name, r.adapter) && act[0].scale == 0.5f);
    hx_model *m = NULL;
    hx_adapter *ads[HX_ADAPTER_MAX];
    float sc[HX_ADAPTER_MAX];
    int na = 0;
    ASSERT(hx_model_load(model, NULL, &m, &err) == HX_OK);
    EXPECT(hx_lora_store_load_active(st, m, ads, sc, &na, &err) == HX_OK && na == 1 &&
           sc[0] == 0.5f);
    for (int i = 0; i < na; i++) hx_adapter_free(ads[i]);
    /* the kept candidate is the adopted adapter's file */
    hx_adapter *k = NULL;
    EXPECT(hx_adapter_load(m, kept, &k, &err) == HX_OK);
    hx_adapter_free(k);
    char first[96], want[200];
    snprintf(first, sizeof first, "%s", r.adapter);
    /* the next night compares against the active adapter at its scale;
     * no scale passes now (the candidate's 8 at every scale): discarded,
     * the reason giving each scale's drop, the candidate still kept */
    remove(kept);
    se = (stub_eval){.base_pass = 10, .adapter_pass = 8, .active_pass = 10};
    set_now(11);
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    printf("# %s\n", r.reason);
    snprintf(want, sizeof want, "%s:0.5", first);
    EXPECT_STR_EQ(se.last_set[0], want);
    EXPECT_EQ_INT(se.calls, 4);
    EXPECT(!r.adopted && strstr(r.reason, "drops of 10.0 points at scale 1.00, 10.0 points at "
                                          "scale 0.75, 10.0 points at scale 0.50") != NULL);
    EXPECT(access(kept, R_OK) == 0);
    ASSERT(hx_lora_store_active(st, act, &n, &err) == HX_OK);
    EXPECT(n == 1 && !strcmp(act[0].name, first) && act[0].scale == 0.5f);
    unsetenv("HEARTH_NOW");
    hx_model_free(m);
    hx_lora_store_free(st);
}

/* Early stopping: with stop_delta the held-out loss is measured after each
 * chunk and training stops when a chunk lowered it by less than
 * stop_delta of the starting loss; the loss after is the last measured;
 * without it the whole schedule runs and no chunk is measured. */
static void test_early_stop(void)
{
    char sd[300], work[300];
    snprintf(sd, sizeof sd, "%s/adapters9", tmpdir);
    snprintf(work, sizeof work, "%s/work9", tmpdir);
    hx_lora_store *st = NULL;
    hx_err err = {0};
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    hx_nightly_params p = params(st, work);
    char logbuf[16384] = "";
    FILE *log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    ASSERT(log != NULL);
    p.log = log;
    /* a chunk must lower the loss by 90% of where it started: it cannot */
    p.stop_delta = 0.9;
    hx_nightly_report r;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fflush(log);
    printf("# stopped early at %d of 12: held-out loss %.4f -> %.4f\n", r.steps,
           r.loss_before, r.loss_after);
    EXPECT(r.stopped_early);
    EXPECT_EQ_INT(r.steps, 5); /* after the first chunk */
    double logged = -1;
    const char *at = strstr(logbuf, "nightly: step 5: held-out loss ");
    EXPECT(at && sscanf(at, "nightly: step 5: held-out loss %lf", &logged) == 1);
    EXPECT(fabs(logged - r.loss_after) < 1e-4); /* the curve's last point */
    EXPECT(strstr(logbuf, "nightly: early stop at step 5 of 12") != NULL);
    EXPECT(strstr(logbuf, "nightly: step 10:") == NULL);
    /* a tiny delta: the loss falls by more after every chunk, all 12
     * steps run, the curve logged at 5 and 10 */
    rewind(log);
    memset(logbuf, 0, sizeof logbuf);
    p.stop_delta = 1e-9;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fflush(log);
    printf("# stop_delta 1e-9: %d steps, early %d\n", r.steps, r.stopped_early);
    EXPECT(r.stopped_early || r.steps == 12);
    EXPECT(strstr(logbuf, "nightly: step 5: held-out loss ") != NULL);
    /* none: no curve, the whole schedule */
    rewind(log);
    memset(logbuf, 0, sizeof logbuf);
    p.stop_delta = 0;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fflush(log);
    EXPECT(!r.stopped_early && r.steps == 12);
    EXPECT(strstr(logbuf, "nightly: step ") == NULL);
    fclose(log);
    hx_lora_store_free(st);
}

/* Documents longer than the window: each becomes windows of its head and
 * a slice ending on a target; every target is a target in exactly one
 * window, after its real predecessor; the windows are full. Tokens are
 * 1000 * (document) + their position, so a window shows where it came
 * from. */
static void test_windows_cover_targets(void)
{
    enum { W = 33, L = 100 };
    static const int heads[] = {25, 10}; /* capped at 3/4 W; a short one */
    static const int spans[2][3][2] = {{{30, 40}, {60, 65}, {90, 100}},
                                       {{10, 14}, {40, 78}, {0, 0}}};
    hx_nightly_data src, dst;
    memset(&src, 0, sizeof src);
    int32_t t[L];
    uint8_t m[L], want[2][L];
    hx_err err = {0};
    memset(want, 0, sizeof want);
    for (int i = 0; i < L; i++) t[i] = 900 + i;
    memset(m, 0, sizeof m); /* a short document: copied as it is */
    m[5] = m[6] = 1;
    ASSERT(hx_nightly_data_add(&src, t, m, 10) == HX_OK);
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < L; i++) t[i] = 1000 * (d + 1) + i;
        for (int k = 0; k < 3; k++)
            for (int i = spans[d][k][0]; i < spans[d][k][1]; i++) want[d][i] = 1;
        ASSERT(hx_nightly_data_add(&src, t, want[d], d ? 80 : L) == HX_OK);
    }
    memset(m, 0, sizeof m); /* long, no target: left out */
    ASSERT(hx_nightly_data_add(&src, t, m, 50) == HX_OK);
    src.n_episodes = 3;
    ASSERT(hx_nightly_windows(&src, W, &dst, &err) == HX_OK);
    EXPECT_EQ_INT(dst.n_episodes, 3);
    ASSERT(dst.n_docs > 3);
    EXPECT_EQ_INT(dst.ends[0], 10);
    int covered[2][L], bad = 0;
    memset(covered, 0, sizeof covered);
    for (int k = 1; k < dst.n_docs; k++) {
        const size_t a = dst.ends[k - 1], n = dst.ends[k] - a;
        const int32_t *w = dst.tokens + a;
        const uint8_t *wm = dst.mask + a;
        const int d = w[0] / 1000 - 1, base = 1000 * (d + 1);
        ASSERT(d == 0 || d == 1);
        bad += n > W || !wm[n - 1];            /* at most W, ends on a target */
        bad += n < W && w[n - 1] - base >= W;  /* full unless from the start */
        for (int j = 0; j < heads[d] && j < (int)n; j++) bad += w[j] != base + j;
        for (size_t j = 1; j < n; j++) {
            if (!wm[j]) continue;
            bad += w[j - 1] != w[j] - 1; /* after its real predecessor */
            covered[d][w[j] - base]++;
        }
    }
    EXPECT_EQ_INT(bad, 0);
    int wrong = 0, n_t = 0;
    for (int d = 0; d < 2; d++)
        for (int x = 1; x < L; x++) wrong += covered[d][x] != want[d][x], n_t += covered[d][x];
    printf("# %d windows of at most %d tokens; %d targets, each once\n", dst.n_docs - 1, W, n_t);
    EXPECT_EQ_INT(wrong, 0);
    hx_nightly_data_free(&dst);
    EXPECT(hx_nightly_windows(&src, 2, &dst, &err) == HX_ERR_INVALID);
    hx_nightly_data_free(&src);
}

/* Episodes whose assistant turns all lie past the model's context (256)
 * and far past the window (32): before, no held-out target was in reach
 * and the run discarded its adapter; now the turns are trained on in
 * windows and the held-out loss is measured on all of them. */
static void test_long_episodes(void)
{
    char db[300], sd[300], work[300];
    snprintf(db, sizeof db, "%s/long.db", tmpdir);
    snprintf(sd, sizeof sd, "%s/adapters8", tmpdir);
    snprintf(work, sizeof work, "%s/work8", tmpdir);
    hx_memory_params pm = hx_memory_default_params();
    pm.path = db;
    hx_memory *m2 = NULL;
    hx_lora_store *st = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(&pm, &m2, &err) == HX_OK);
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    hx_buf mail;
    hx_buf_init(&mail);
    for (int w = 0; w < 160; w++) hx_buf_printf(&mail, "line %d of the pasted minutes; ", w);
    for (int i = 0; i < 8; i++) {
        char req[64], ans[128];
        snprintf(req, sizeof req, "Set up a meeting with person %d about these minutes", i);
        snprintf(ans, sizeof ans, "Booked Room 4B for 45 minutes with person %d.", i);
        hx_buf msgs;
        hx_buf_init(&msgs);
        hx_buf_printf(&msgs, "[{\"role\":\"user\",\"content\":\"%s: %s\"},"
                      "{\"role\":\"assistant\",\"content\":\"%s\"}]", req, mail.data, ans);
        hx_episode ep;
        memset(&ep, 0, sizeof ep);
        ep.started_at = 1790000000 + i * 3600;
        ep.finished_at = ep.started_at + 60;
        ep.request = req, ep.messages = msgs.data, ep.outcome = ans;
        int64_t id = 0;
        EXPECT(hx_memory_episode_add(m2, &ep, &id, &err) == HX_OK);
        EXPECT(hx_memory_episode_set_verdict(m2, id, HX_VERDICT_ACCEPTED, NULL, &err) == HX_OK);
        hx_buf_free(&msgs);
    }
    hx_buf_free(&mail);
    hx_nightly_params p = params(st, work);
    p.memory = m2;
    char logbuf[8192] = "";
    FILE *log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    ASSERT(log != NULL);
    p.log = log;
    hx_nightly_report r;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fflush(log);
    printf("# %d + %d episodes of %lld + %lld tokens: %s\n", r.n_train, r.n_heldout,
           (long long)r.train_tokens, (long long)r.heldout_tokens, r.reason);
    EXPECT(r.train_tokens > 8 * 256 / 2 && r.heldout_tokens > 256);
    EXPECT(isfinite(r.loss_before) && r.loss_after < r.loss_before);
    EXPECT(r.adopted);
    EXPECT(strstr(logbuf, "nightly: sequences of 32 tokens: 6 + 2 documents (training + "
                          "held out), 8 of them longer") != NULL);
    EXPECT_EQ_INT(r.seq_len, 32);
    EXPECT_EQ_INT(r.docs_cut, 8);
    fclose(log);
    hx_lora_store_free(st);
    hx_memory_close(m2);
}

/* By default nightly adapts the later half of the layers: of the fixture's
 * 2, layer 1 alone; first_layer 0 adapts both. */
static void test_later_half(void)
{
    hx_err err = {0};
    hx_nightly_params p = hx_nightly_default_params();
    p.model = model;
    EXPECT_EQ_INT(p.lora.first_layer, HX_LORA_LATER_HALF);
    static const int firsts[] = {HX_LORA_LATER_HALF, 0};
    for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
        const int first = firsts[f];
        p.lora.first_layer = first;
        hx_trainer *tr = NULL;
        ASSERT(hx_nightly_trainer(&p, NULL, &tr, &err) == HX_OK);
        int l0 = 0, l1 = 0;
        for (int i = 0; i < hx_trainer_n_tensors(tr); i++) {
            size_t off, n;
            const char *name = hx_trainer_tensor(tr, i, &off, &n);
            l0 += !strncmp(name, "blk.0.", 6), l1 += !strncmp(name, "blk.1.", 6);
        }
        EXPECT(l1 > 0 && (first == 0 ? l0 == l1 : l0 == 0));
        hx_trainer_free(tr);
    }
    p.lora.first_layer = HX_LORA_LATER_HALF; /* resolved from a base that is not there */
    hx_trainer *none = NULL;
    EXPECT(hx_nightly_trainer(&p, "/nonexistent.gguf", &none, &err) != HX_OK && !none);
}

/* A random qwen3moe base of 2 layers (2 heads, tied head, the fixture's
 * vocabulary) of width C with E experts of F, 2 used. */
static int write_moe(const char *path, int C, int E, int F)
{
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.arch = "qwen3moe", mp.vocab_path = vocab_path;
    mp.n_layer = 2, mp.n_embd = C, mp.n_head = 2, mp.n_head_kv = 1;
    mp.head_dim = C / 2, mp.n_ctx = 256, mp.tied_output = 1;
    mp.n_expert = E, mp.n_expert_used = 2, mp.n_ff_exp = F;
    hx_err err = {0};
    int rc = hx_mkmodel_write(&mp, path, &err);
    if (rc) printf("# mkmodel: %s\n", err.msg);
    return rc;
}

/* A qwen3moe base: the nightly run trains on it and adopts what passes its
 * gate; its default FFN targets become the attention's (the router and
 * experts stay frozen), as its log says, and the adapter loads on it. */
static void test_moe_base(void)
{
    char moe[300], work[300], logbuf[4096] = "";
    snprintf(moe, sizeof moe, "%s/base-moe.gguf", tmpdir);
    hx_err err = {0};
    ASSERT(write_moe(moe, 32, 4, 32) == HX_OK);
    hx_lora_store *st = store_at("-moe", work);
    ASSERT(st != NULL);
    hx_nightly_params p = params(st, work);
    p.model = moe;
    p.log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    ASSERT(p.log);
    EXPECT_EQ_INT((int)p.lora.targets, HX_LORA_UP | HX_LORA_DOWN);
    hx_nightly_report r;
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fclose(p.log);
    p.log = NULL;
    printf("# nightly on qwen3moe: %d steps, held-out loss %.4f -> %.4f: %s\n", r.steps,
           r.loss_before, r.loss_after, r.reason);
    EXPECT(strstr(logbuf, "is a MoE model") && strstr(logbuf, "(q, k, v, o)"));
    EXPECT(r.steps == 12 && r.adopted && r.loss_after < r.loss_before);
    hx_trainer *tr = NULL;
    ASSERT(hx_nightly_trainer(&p, NULL, &tr, &err) == HX_OK);
    int attn = 0, other = 0;
    for (int i = 0; i < hx_trainer_n_tensors(tr); i++) {
        const char *name = hx_trainer_tensor(tr, i, NULL, NULL);
        attn += strstr(name, ".attn_") != NULL, other += strstr(name, ".attn_") == NULL;
    }
    EXPECT(attn == 8 && other == 0); /* layer 1 (the later half): q, k, v, o x (A, B) */
    hx_trainer_free(tr);
    EXPECT_EQ_INT(active_loads(st, moe), 1);
    hx_lora_store_free(st);
}

/* A qwen3moe base over the memory bound: the run reads it through a
 * weight cache of what the bound leaves (the smallest here: every expert
 * read at every use), within the bound, and ends exactly where the
 * uncapped run ends; one byte less is refused, saying what would fit. */
static void test_moe_under_bound(void)
{
    char moe[300], work[300], logbuf[4096] = "";
    snprintf(moe, sizeof moe, "%s/base-moe-bound.gguf", tmpdir);
    hx_err err = {0};
    ASSERT(write_moe(moe, 64, 8, 128) == HX_OK);
    hx_lora_store *st = store_at("-moeb", work);
    ASSERT(st != NULL);
    hx_nightly_params p = params(st, work);
    p.model = moe;
    hx_nightly_report ref, r;
    ASSERT(hx_nightly_run(&p, &ref, &err) == HX_OK);
    EXPECT(ref.weight_budget == 0);
    hx_trainer *tr = NULL;
    ASSERT(hx_nightly_trainer(&p, NULL, &tr, &err) == HX_OK);
    const size_t mapped = hx_trainer_weight_bytes(tr), lo = hx_trainer_weight_budget_min(tr);
    hx_trainer_free(tr);
    ASSERT(lo > 0 && lo < mapped);
    hx_lora_store_free(st);
    ASSERT((st = store_at("-moeb2", work)) != NULL);
    p = params(st, work);
    p.model = moe;
    p.max_bytes = ref.mem_estimate - (mapped - lo); /* the rest + the smallest cache */
    p.log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    ASSERT(p.log);
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    fclose(p.log);
    p.log = NULL;
    printf("# bound %.2f MiB (uncapped estimate %.2f): weight cache %.2f MiB of a %.2f MiB "
           "base; held-out loss %.6f -> %.6f (uncapped %.6f)\n", p.max_bytes / 1048576.0,
           ref.mem_estimate / 1048576.0, r.weight_budget / 1048576.0, mapped / 1048576.0,
           r.loss_before, r.loss_after, ref.loss_after);
    EXPECT(r.weight_budget > 0 && r.weight_budget <= lo && r.mem_estimate <= p.max_bytes);
    EXPECT(strstr(logbuf, "weight cache") != NULL);
    EXPECT(r.steps == ref.steps && r.loss_before == ref.loss_before &&
           r.loss_after == ref.loss_after && r.adopted == ref.adopted);
    hx_lora_store_free(st);
    ASSERT((st = store_at("-moeb3", work)) != NULL);
    p = params(st, work);
    p.model = moe;
    p.max_bytes = ref.mem_estimate - (mapped - lo) - 1;
    EXPECT(hx_nightly_run(&p, &r, &err) == HX_ERR_RANGE);
    printf("# %s\n", err.msg);
    EXPECT(strstr(err.msg, "experts read from the file") && strstr(err.msg, "over the bound"));
    EXPECT(r.steps == 0);
    hx_lora_store_free(st);
}

/* new_only over a MoE base under a bound: the pass that finds what the
 * base already writes (whole documents, so the run's largest pass here)
 * reads the base through the weight cache as training does, and the run
 * counts the targets the mapped run counts (a random base knows none of
 * them; test_wbudget shows the greedy tokens through the cache are the
 * mapped base's, bit for bit). */
static void test_keep_new_under_bound(void)
{
    char moe[300], work[300], logbuf[8192] = "";
    snprintf(moe, sizeof moe, "%s/base-moe-new.gguf", tmpdir);
    hx_err err = {0};
    ASSERT(write_moe(moe, 64, 8, 128) == HX_OK);
    hx_lora_store *st = store_at("-moen", work);
    ASSERT(st != NULL);
    hx_nightly_params p = params(st, work);
    p.model = moe;
    p.new_only = 1;
    hx_nightly_report ref, r;
    ASSERT(hx_nightly_run(&p, &ref, &err) == HX_OK);
    hx_trainer *tr = NULL;
    ASSERT(hx_nightly_trainer(&p, NULL, &tr, &err) == HX_OK);
    const size_t mapped = hx_trainer_weight_bytes(tr), lo = hx_trainer_weight_budget_min(tr);
    hx_trainer_free(tr);
    hx_lora_store_free(st);
    ASSERT((st = store_at("-moen2", work)) != NULL);
    p = params(st, work);
    p.model = moe;
    p.new_only = 1;
    p.max_bytes = ref.mem_estimate - (mapped - lo) / 2;
    p.log = fmemopen(logbuf, sizeof logbuf - 1, "w");
    ASSERT(p.log);
    int rc = hx_nightly_run(&p, &r, &err);
    printf("# %s\n", err.msg);
    ASSERT(rc == HX_OK);
    fclose(p.log);
    p.log = NULL;
    const char *first = strstr(logbuf, "weight cache");
    const char *known = strstr(logbuf, "what the base writes already");
    printf("# bound %.2f MiB of %.2f: %lld of %lld targets known (mapped: %lld of %lld)\n",
           p.max_bytes / 1048576.0, ref.mem_estimate / 1048576.0, (long long)r.known_targets,
           (long long)r.all_targets, (long long)ref.known_targets, (long long)ref.all_targets);
    EXPECT(first && known && first < known); /* the pass itself was bounded */
    EXPECT(r.weight_budget > 0 && r.mem_estimate <= p.max_bytes);
    EXPECT(r.all_targets == ref.all_targets && r.all_targets > 0);
    EXPECT(r.known_targets == ref.known_targets);
    EXPECT(r.loss_after == ref.loss_after && r.steps == ref.steps);
    hx_lora_store_free(st);
}

/* The memory bound: an estimate over it refuses to start, naming both. */
static void test_memory_bound(void)
{
    char work[300];
    hx_err err = {0};
    hx_lora_store *st = store_at("6", work);
    ASSERT(st != NULL);
    hx_nightly_params p = params(st, work);
    p.max_bytes = 4096;
    hx_nightly_report r;
    EXPECT(hx_nightly_run(&p, &r, &err) == HX_ERR_RANGE);
    printf("# %s\n", err.msg);
    EXPECT(strstr(err.msg, "over the bound") != NULL && r.steps == 0);
    EXPECT(r.mem_estimate > 4096);
    /* the estimate counts the mapped base and grows with the batch */
    hx_trainer *tr = NULL;
    ASSERT(hx_nightly_trainer(&p, model, &tr, &err) == HX_OK);
    size_t e1 = hx_trainer_memory_estimate(tr, 64), e2 = hx_trainer_memory_estimate(tr, 128);
    struct stat sst;
    ASSERT(stat(model, &sst) == 0);
    EXPECT(e2 > e1 && e1 > (size_t)hx_trainer_n_params(tr) * 16);
    hx_trainer_free(tr);
    p.max_bytes = (size_t)1 << 34; /* 16 GiB: starts */
    EXPECT(hx_nightly_run(&p, &r, &err) == HX_OK && r.steps == 12);
    hx_lora_store_free(st);
}

/* Stopped after one chunk (as the governor would stop it), then run again:
 * it resumes from the checkpoint and ends where an uninterrupted run ends. */
static void test_stop_and_resume(void)
{
    char sd[300], work[300], sd2[300], work2[300];
    snprintf(sd, sizeof sd, "%s/adapters3", tmpdir);
    snprintf(work, sizeof work, "%s/work3", tmpdir);
    snprintf(sd2, sizeof sd2, "%s/adapters4", tmpdir);
    snprintf(work2, sizeof work2, "%s/work4", tmpdir);
    hx_lora_store *st = NULL, *st2 = NULL;
    hx_err err = {0};
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    ASSERT(hx_lora_store_open(sd2, &st2, &err) == HX_OK);
    hx_nightly_params p = params(st, work);
    hx_nightly_report r, whole;
    p.stop_after_chunks = 1;
    EXPECT(hx_nightly_run(&p, &r, &err) == HX_ERR_CANCELLED);
    EXPECT_EQ_INT(r.steps, 5);
    hx_lora_use act[HX_ADAPTER_MAX];
    int n = -1;
    ASSERT(hx_lora_store_active(st, act, &n, &err) == HX_OK);
    EXPECT_EQ_INT(n, 0); /* nothing adopted by a stopped run */
    p.stop_after_chunks = 0;
    /* the same parameters, whatever bytes pad their structs (a rerun's
     * stack holds others): the run's key is its fields' */
    const size_t tail = offsetof(hx_lora_params, first_layer) + sizeof p.lora.first_layer;
    memset((char *)&p.lora + tail, 0xA5, sizeof p.lora - tail);
    ASSERT(hx_nightly_run(&p, &r, &err) == HX_OK);
    EXPECT_EQ_INT(r.resumed_at, 5);
    EXPECT_EQ_INT(r.steps, 12);
    hx_nightly_params q = params(st2, work2);
    ASSERT(hx_nightly_run(&q, &whole, &err) == HX_OK);
    EXPECT_EQ_INT(whole.resumed_at, 0);
    printf("# stopped at 5, resumed: held-out loss %.6f; uninterrupted %.6f\n",
           r.loss_after, whole.loss_after);
    EXPECT(r.loss_after == whole.loss_after);
    EXPECT(r.adopted == whole.adopted);
    hx_lora_store_free(st), hx_lora_store_free(st2);
}

/* On battery (a fake sysfs), the governor says no unless forced. */
static void test_governor_refuses(void)
{
    char bat[400], f[460];
    snprintf(bat, sizeof bat, "%s/sys/class/power_supply/BAT0", tmpdir);
    hx_err err = {0};
    ASSERT(hx_mkdirs(bat, &err) == HX_OK);
    static const char *const files[][2] = {{"type", "Battery\n"}, {"scope", "System\n"},
        {"capacity", "80\n"}, {"status", "Discharging\n"}};
    for (int i = 0; i < 4; i++) {
        snprintf(f, sizeof f, "%s/%s", bat, files[i][0]);
        ASSERT(hx_write_file_atomic(f, files[i][1], strlen(files[i][1]), &err) == HX_OK);
    }
    char sys[300];
    snprintf(sys, sizeof sys, "%s/sys", tmpdir);
    setenv("HEARTH_SYSFS", sys, 1);
    char sd[300], work[300];
    snprintf(sd, sizeof sd, "%s/adapters2", tmpdir);
    snprintf(work, sizeof work, "%s/work2", tmpdir);
    hx_lora_store *st = NULL;
    ASSERT(hx_lora_store_open(sd, &st, &err) == HX_OK);
    hx_nightly_params p = params(st, work);
    p.force = 0;
    hx_nightly_report r;
    EXPECT(hx_nightly_run(&p, &r, &err) == HX_ERR_STATE);
    EXPECT(strstr(err.msg, "not now") != NULL);
    printf("# %s\n", err.msg);
    unsetenv("HEARTH_SYSFS");
    hx_lora_store_free(st);
}

int main(void)
{
    const int ready = fixture_open("hx_test_nightly");
    if (ready < 0) return 1;
    if (ready) {
        hx_err err = {0};
        hx_memory_params pm = hx_memory_default_params();
        pm.path = memdb;
        if (hx_memory_open(&pm, &mem, &err)) {
            printf("FAIL setup: %s\n", err.msg);
            return 1;
        }
        fill_memory();
        RUN(test_dataset);
        RUN(test_replay_mix);
        RUN(test_run_adopts_and_gate_discards);
        RUN(test_train_on_new);
        RUN(test_replay_soft);
        RUN(test_keep_generic);
        RUN(test_stop_and_resume);
        RUN(test_generic_gate);
        RUN(test_gate_against_active);
        RUN(test_gate_scales);
        RUN(test_early_stop);
        RUN(test_windows_cover_targets);
        RUN(test_long_episodes);
        RUN(test_later_half);
        RUN(test_moe_base);
        RUN(test_moe_under_bound);
        RUN(test_keep_new_under_bound);
        RUN(test_memory_bound);
        RUN(test_governor_refuses);
        hx_memory_close(mem);
    }
    fixture_remove();
    return test_summary();
}
