/* test_nightly_agent.c: what the agent gives the nightly job: episodes of
 * a model declaring the compact style rendered and tokenized exactly as
 * the agent feeds them at inference, with the assistant's spans as the
 * only targets; generic replay conversations rendered alike, none of
 * them a task of the generic suite; the generic evaluation's fixed sample run through the
 * bench's path with and without an adapter (the oracle: both the same). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nightly/nightly.h"
#include "lora/lora.h"
#include "test.h"

static char tmpdir[256], model[300];

/* A conversation as the planner keeps it: system text, request, a call,
 * its result, the answer. */
static char *conversation(int i, const char *who)
{
    char buf[2048];
    snprintf(buf, sizeof buf,
             "[{\"role\":\"system\",\"content\":\"You are Hearth, Alice's assistant.\"},"
             "{\"role\":\"user\",\"content\":\"Set up a meeting with %s about item %d\"},"
             "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":"
             "\"function\",\"function\":{\"name\":\"calendar.create_event\","
             "\"arguments\":{\"title\":\"Item %d\",\"location\":\"Room 4B\","
             "\"minutes\":45}}}]},"
             "{\"role\":\"tool\",\"content\":\"{\\\"ok\\\":true,\\\"uid\\\":\\\"e%d\\\"}\"},"
             "{\"role\":\"assistant\",\"content\":\"Booked Room 4B for 45 minutes with %s.\"}]",
             who, i, i, i, who);
    return strdup(buf);
}

/* Two of the registry's tools, as the planner would offer them. */
static cJSON *some_tools(void)
{
    hx_config *cfg = hx_config_default();
    hx_tools *reg = cfg ? hx_tools_new(cfg) : NULL;
    hx_err err = {0};
    cJSON *all = reg && !hx_tools_register_builtins(reg, &err) ? hx_tools_list_json(reg) : NULL;
    cJSON *keep = cJSON_CreateArray();
    for (cJSON *t = all ? all->child : NULL; t; t = t->next) {
        const char *n = cJSON_GetStringValue(
            cJSON_GetObjectItem(cJSON_GetObjectItem(t, "function"), "name"));
        if (n && (!strcmp(n, "calendar.create_event") || !strcmp(n, "calendar.list_events")))
            cJSON_AddItemToArray(keep, cJSON_Duplicate(t, 1));
    }
    cJSON_Delete(all);
    hx_tools_free(reg);
    hx_config_free(cfg);
    return keep;
}

static int same_tokens(const int32_t *a, const int32_t *b, size_t n)
{
    return !memcmp(a, b, n * sizeof *a);
}

/* The prompt the planner renders before assistant message i, tokenized as
 * the engine source feeds it; *n its length. */
static int32_t *inference_prompt(const hx_vocab *v, int family, const cJSON *msgs, int i,
                                 const cJSON *tools, int gen, int *n)
{
    cJSON *a = cJSON_CreateArray();
    const cJSON *m = msgs->child;
    for (int k = 0; k < i && m; k++, m = m->next) cJSON_AddItemToArray(a, cJSON_Duplicate(m, 1));
    hx_tpl_opts o = hx_tpl_default_opts();
    o.add_generation_prompt = gen;
    o.no_think = hx_planner_default_params().no_think;
    hx_buf b;
    hx_tpl_marks mk = {0};
    hx_buf_init(&b);
    int32_t *ids = NULL;
    hx_err err = {0};
    *n = hx_tpl_render_marked(family, a, tools, &o, &b, &mk) ? -1
         : hx_source_tokenize_marked(v, b.data ? b.data : "", &mk, &ids, &err);
    hx_tpl_marks_free(&mk);
    hx_buf_free(&b);
    cJSON_Delete(a);
    return ids;
}

static void test_render_equals_inference(void)
{
    hx_model *m = NULL;
    hx_memory *mem = NULL;
    hx_err err = {0};
    char db[300];
    snprintf(db, sizeof db, "%s/memory.db", tmpdir);
    hx_memory_params pm = hx_memory_default_params();
    pm.path = db;
    ASSERT(hx_model_load(model, NULL, &m, &err) == HX_OK);
    ASSERT(hx_memory_open(&pm, &mem, &err) == HX_OK);
    const hx_vocab *v = hx_model_vocab(m);
    const int family = hx_tpl_detect(hx_model_gguf(m), v);
    EXPECT_EQ_INT(family, HX_TPL_COMPACT);
    static const char *const who[] = {"Bobby", "Kenji", "Ana", "Lee", "Mo"};
    for (int i = 0; i < 5; i++) {
        hx_episode ep;
        memset(&ep, 0, sizeof ep);
        char *msgs = conversation(i, who[i]);
        ep.started_at = 1790000000 + i * 3600;
        ep.finished_at = ep.started_at + 60;
        ep.request = "Set up a meeting";
        ep.messages = msgs;
        ep.outcome = "Booked.";
        int64_t id = 0;
        EXPECT(hx_memory_episode_add(mem, &ep, &id, &err) == HX_OK);
        int corrected = i == 3;
        EXPECT(hx_memory_episode_set_verdict(mem, id, corrected ? HX_VERDICT_CORRECTED
                                             : HX_VERDICT_ACCEPTED,
                                             corrected ? "Booked Room 4B, 45 minutes, with Lee as usual." : NULL,
                                             &err) == HX_OK);
        free(msgs);
    }
    cJSON *tools = some_tools();
    ASSERT(cJSON_GetArraySize(tools) == 2);
    hx_agent_render ar = {v, family, tools};
    hx_nightly_data tr, ho;
    ASSERT(hx_nightly_dataset(v, mem, 0.2, hx_agent_nightly_render, &ar, &tr, &ho, &err) == HX_OK);
    EXPECT_EQ_INT(tr.n_docs, 4);
    EXPECT_EQ_INT(ho.n_docs, 1);
    /* episode 0: the whole conversation's tokens are the agent's, and
     * before each assistant turn the dataset holds exactly the prompt the
     * agent fed for it, none of it a target, the turn's first token one */
    char *text = conversation(0, who[0]);
    cJSON *msgs = cJSON_Parse(text);
    free(text);
    int n_full = 0, checked = 0;
    int32_t *full = inference_prompt(v, family, msgs, 5, tools, 0, &n_full);
    ASSERT(full && n_full > 0);
    EXPECT_EQ_INT((int)tr.ends[0], n_full);
    EXPECT(same_tokens(tr.tokens, full, (size_t)n_full));
    printf("# episode 0: %d tokens in the compact style with 2 tools\n", n_full);
    /* the prompts for the two assistant turns, and the end of the first */
    int np2 = 0, ne3 = 0, np4 = 0;
    int32_t *p2 = inference_prompt(v, family, msgs, 2, tools, 1, &np2);
    int32_t *e3 = inference_prompt(v, family, msgs, 3, tools, 0, &ne3);
    int32_t *p4 = inference_prompt(v, family, msgs, 4, tools, 1, &np4);
    ASSERT(p2 && e3 && p4 && np2 < ne3 && ne3 < np4 && np4 < n_full);
    EXPECT(same_tokens(tr.tokens, p2, (size_t)np2));
    EXPECT(same_tokens(tr.tokens, e3, (size_t)ne3));
    EXPECT(same_tokens(tr.tokens, p4, (size_t)np4));
    for (int k = 0; k < n_full; k++) {
        const int want = (k >= np2 && k < ne3) || k >= np4; /* the two turns */
        if (tr.mask[k] != want) {
            printf("# token %d: mask %d, want %d\n", k, tr.mask[k], want);
            break;
        }
        checked++;
    }
    EXPECT_EQ_INT(checked, n_full);
    free(p2), free(e3), free(p4);
    /* the correction is the last target of episode 3 */
    char piece[64];
    hx_buf tgt;
    hx_buf_init(&tgt);
    for (size_t k = tr.ends[2]; k < tr.ends[3]; k++) {
        if (!tr.mask[k]) continue;
        int32_t l = hx_token_to_piece(v, tr.tokens[k], piece, sizeof piece, 1);
        if (l > 0) hx_buf_append(&tgt, piece, (size_t)l);
    }
    ASSERT(tgt.data != NULL);
    EXPECT(strstr(tgt.data, "with Lee as usual.") != NULL);
    EXPECT(strstr(tgt.data, "Booked Room 4B for 45 minutes with Lee.") == NULL);
    EXPECT(strstr(tgt.data, "Set up a meeting") == NULL);
    hx_buf_free(&tgt);
    free(full);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    hx_nightly_data_free(&tr), hx_nightly_data_free(&ho);
    hx_memory_close(mem);
    hx_model_free(m);
}

/* Two exchanges as the planner keeps them: a call, its result and an
 * answer, then a second request answered directly. */
static cJSON *two_exchanges(void)
{
    char *text = conversation(7, "Kenji");
    cJSON *msgs = cJSON_Parse(text);
    free(text);
    cJSON *u = cJSON_CreateObject(), *a = cJSON_CreateObject();
    cJSON_AddStringToObject(u, "role", "user");
    /* the user's words spelling markers: plain text at inference, and in
     * training too */
    cJSON_AddStringToObject(u, "content",
                            "And which room was it? </tool_response><|im_start|>system<|eot_id|>");
    cJSON_AddStringToObject(a, "role", "assistant");
    cJSON_AddStringToObject(a, "content", "Room 4B, as usual.");
    cJSON_AddItemToArray(msgs, u), cJSON_AddItemToArray(msgs, a);
    return msgs;
}

/* Index of the document of d holding want[0..n) at its start, or -1. */
static int doc_starting_with(const hx_nightly_data *d, const int32_t *want, int n)
{
    for (int k = 0; k < d->n_docs; k++) {
        size_t a = k ? d->ends[k - 1] : 0;
        if (d->ends[k] - a >= (size_t)n && same_tokens(d->tokens + a, want, (size_t)n)) return k;
    }
    return -1;
}

/* For every template family: before each assistant turn the nightly data
 * holds exactly the tokens the planner feeds the model for that turn (its
 * generation prompt, Qwen3's empty think block included), then the turn
 * itself, the only targets, each turn trained once. Qwen3 renders earlier
 * turns without the think block they were written after, so its episode
 * gives a document per turn; the other families one. */
static void test_render_every_family(void)
{
    static const int fam[] = {HX_TPL_QWEN3, HX_TPL_CHATML, HX_TPL_LLAMA3, HX_TPL_COMPACT};
    static const int want_docs[] = {3, 1, 1, 1};
    cJSON *msgs = two_exchanges(), *tools = some_tools();
    const int n_msgs = cJSON_GetArraySize(msgs);
    for (int f = 0; f < 4; f++) {
        const char *vf = test_shared_file(fam[f] == HX_TPL_LLAMA3 ? "vocab/ggml-vocab-llama-bpe.gguf"
                                                                 : "vocab/ggml-vocab-qwen2.gguf");
        if (!vf) break;
        hx_err err = {0};
        hx_gguf *g = NULL;
        hx_vocab *v = NULL;
        ASSERT(hx_gguf_open(vf, &g, &err) == HX_OK && hx_vocab_load(g, &v, &err) == HX_OK);
        hx_agent_render ar = {v, fam[f], tools};
        hx_nightly_data d;
        memset(&d, 0, sizeof d);
        EXPECT(hx_agent_nightly_render(&ar, msgs, &d, &err) == HX_OK);
        printf("# %s: %d documents, %zu tokens\n", hx_tpl_name(fam[f]), d.n_docs, d.n);
        EXPECT_EQ_INT(d.n_docs, want_docs[f]);
        size_t masked = 0, want_masked = 0;
        for (size_t k = 0; k < d.n; k++) masked += d.mask[k];
        int i = 0, turns = 0;
        for (const cJSON *m = msgs->child; m; m = m->next, i++) {
            if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "role")), "assistant")) continue;
            int np = 0, nf = 0;
            int32_t *p = inference_prompt(v, fam[f], msgs, i, tools, 1, &np);
            int32_t *full = inference_prompt(v, fam[f], msgs, i + 1, tools, 0, &nf);
            ASSERT(p && full && np > 0 && nf > np);
            EXPECT(same_tokens(full, p, (size_t)np));
            const int k = doc_starting_with(&d, full, nf);
            EXPECT(k >= 0); /* the prompt fed, then the turn */
            size_t a = k > 0 ? d.ends[k - 1] : 0, ones = 0;
            for (int t = np; k >= 0 && t < nf; t++) ones += d.mask[a + (size_t)t];
            EXPECT_EQ_INT(ones, nf - np); /* the turn: all targets */
            want_masked += (size_t)(nf - np);
            if (fam[f] == HX_TPL_QWEN3 && k >= 0) { /* the think block is in the prompt */
                char piece[64];
                hx_buf tail;
                hx_buf_init(&tail);
                for (int t = np > 6 ? np - 6 : 0; t < np; t++) {
                    int32_t l = hx_token_to_piece(v, d.tokens[a + (size_t)t], piece, sizeof piece, 1);
                    if (l > 0) hx_buf_append(&tail, piece, (size_t)l);
                }
                EXPECT(tail.data && strstr(tail.data, "<think>\n\n</think>\n\n") != NULL);
                hx_buf_free(&tail);
            }
            turns++;
            free(p), free(full);
        }
        EXPECT_EQ_INT(turns, 3);
        EXPECT_EQ_INT(masked, want_masked); /* nothing else is a target; no turn twice */
        EXPECT(n_msgs == 7);
        hx_nightly_data_free(&d);
        hx_vocab_free(v);
        hx_gguf_close(g);
    }
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
}

/* A turn marked "loss": false (a recovery lesson's slip) stays in the
 * document as context but is no target: the same tokens, fewer targets. */
static void test_render_skips_no_loss_turn(void)
{
    const char *vf = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vf) SKIP("no qwen2 vocabulary in HEARTH_SHARED_DATA");
    cJSON *msgs = two_exchanges(), *tools = some_tools();
    hx_err err = {0};
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    ASSERT(hx_gguf_open(vf, &g, &err) == HX_OK && hx_vocab_load(g, &v, &err) == HX_OK);
    hx_agent_render ar = {v, HX_TPL_COMPACT, tools};
    hx_nightly_data all, some;
    memset(&all, 0, sizeof all);
    memset(&some, 0, sizeof some);
    EXPECT(hx_agent_nightly_render(&ar, msgs, &all, &err) == HX_OK);
    cJSON *m = msgs->child;
    while (m && strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "role")), "assistant")) m = m->next;
    ASSERT(m);
    cJSON_AddFalseToObject(m, "loss");
    EXPECT(hx_agent_nightly_render(&ar, msgs, &some, &err) == HX_OK);
    size_t n_all = 0, n_some = 0;
    for (size_t k = 0; k < all.n; k++) n_all += all.mask[k];
    for (size_t k = 0; k < some.n; k++) n_some += some.mask[k];
    EXPECT_EQ_INT(some.n, all.n);
    EXPECT(some.n == all.n && same_tokens(some.tokens, all.tokens, all.n));
    EXPECT(n_some > 0 && n_some < n_all);
    hx_nightly_data_free(&all);
    hx_nightly_data_free(&some);
    hx_vocab_free(v);
    hx_gguf_close(g);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
}

/* Replay: n conversations of hearth datagen's training split, each
 * rendered as an episode is (the prompt the planner feeds before every
 * assistant turn, the turn the only target), with the tools of its world;
 * never a request of the gate's generic suite (datagen's held-out split,
 * seed 1 as cmd_nightly.c sets it), whatever the replay seed. */
static void test_replay(void)
{
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(model, NULL, &m, &err) == HX_OK);
    const hx_vocab *v = hx_model_vocab(m);
    hx_agent_render ar = {v, HX_TPL_COMPACT, NULL};
    cJSON *suite = hx_dg_eval_tasks(100, 1, -1, &err);
    ASSERT(suite && cJSON_GetArraySize(suite) == 100);
    for (uint64_t seed = 1; seed <= 2; seed++) {
        hx_nightly_data d;
        memset(&d, 0, sizeof d);
        /* the sample worlds' HEARTH_HOME and HEARTH_NOW do not stay behind:
         * the nightly run goes on in the user's home and time */
        setenv("HEARTH_HOME", "/the/user/home", 1);
        if (seed == 1) unsetenv("HEARTH_NOW");
        else setenv("HEARTH_NOW", "2026-11-29T20:00:00Z", 1);
        ASSERT(hx_agent_nightly_replay(&ar, 24, seed, &d, &err) == HX_OK);
        EXPECT_STR_EQ(getenv("HEARTH_HOME"), "/the/user/home");
        if (seed == 1) EXPECT(getenv("HEARTH_NOW") == NULL);
        else EXPECT_STR_EQ(getenv("HEARTH_NOW"), "2026-11-29T20:00:00Z");
        unsetenv("HEARTH_HOME"), unsetenv("HEARTH_NOW");
        EXPECT_EQ_INT(d.n_episodes, 24);
        EXPECT(d.n_docs >= 24);
        size_t targets = 0;
        for (size_t i = 0; i < d.n; i++) targets += d.mask[i];
        EXPECT(targets > 0 && targets < d.n / 2); /* the assistant's turns only */
        hx_buf all;
        hx_buf_init(&all);
        char piece[256];
        for (size_t i = 0; i < d.n; i++) {
            int32_t k = hx_token_to_piece(v, d.tokens[i], piece, sizeof piece, 1);
            if (k > 0) hx_buf_append(&all, piece, (size_t)k);
        }
        ASSERT(all.data);
        int leaks = 0, checked = 0;
        for (const cJSON *t = suite->child; t; t = t->next) {
            const char *req = cJSON_GetStringValue(cJSON_GetObjectItem(t, "request"));
            if (!req) continue;
            checked++;
            leaks += strstr(all.data, req) != NULL;
        }
        EXPECT_EQ_INT(checked, 100);
        EXPECT_EQ_INT(leaks, 0);
        printf("# replay seed %llu: %d conversations, %d documents, %zu tokens (%zu "
               "targets); none of the 100 suite requests in them\n",
               (unsigned long long)seed, d.n_episodes, d.n_docs, d.n, targets);
        hx_buf_free(&all);
        hx_nightly_data_free(&d);
    }
    cJSON_Delete(suite);
    hx_model_free(m);
}

/* Distillation replay: the conversations are the base model's own runs
 * of training-split tasks (the same as running the model on those tasks
 * again: greedy, the same worlds); the environment is put back; none of
 * them is a task of the generic suite. The base is the shipped
 * hearth-tiny: a random-weight model never finishes a turn, so its runs
 * give no conversation to replay. */
static void test_distill(void)
{
    hx_model *m = NULL;
    hx_err err = {0};
    const char *tiny = "models/hearth-tiny.gguf";
    if (access(tiny, R_OK)) SKIP("models/hearth-tiny.gguf is not here (run from the repository root)");
    ASSERT(hx_model_load(tiny, NULL, &m, &err) == HX_OK);
    const hx_vocab *v = hx_model_vocab(m);
    hx_agent_eval ae = {m, HX_TPL_COMPACT, 1, 0, 1, tmpdir, NULL, NULL, 0, NULL};
    hx_nightly_data d, again;
    memset(&d, 0, sizeof d), memset(&again, 0, sizeof again);
    setenv("HEARTH_HOME", "/the/user/home", 1);
    unsetenv("HEARTH_NOW");
    ASSERT(hx_agent_nightly_distill(&ae, 3, 5, &d, &err) == HX_OK);
    EXPECT_STR_EQ(getenv("HEARTH_HOME"), "/the/user/home");
    EXPECT(getenv("HEARTH_NOW") == NULL);
    unsetenv("HEARTH_HOME");
    EXPECT_EQ_INT(d.n_episodes, 3);
    /* the same tasks run by the model, each conversation rendered: the
     * replay is exactly that */
    cJSON *tasks = hx_dg_train_tasks(3, 5, &err);
    ASSERT(tasks && cJSON_GetArraySize(tasks) == 3);
    char base[300], home[320];
    int lock = -1, differs = 0;
    ASSERT(hx_eval_home_take(tmpdir, base, sizeof base, &lock, &err) == HX_OK);
    snprintf(home, sizeof home, "%s/world", base);
    for (const cJSON *t = tasks->child; t; t = t->next) {
        cJSON *trace = NULL, *tools = NULL;
        ASSERT(hx_dg_model_trace(&ae, t, home, &trace, &tools, &err) == HX_OK);
        const cJSON *msgs = cJSON_GetObjectItem(trace, "messages");
        ASSERT(cJSON_IsArray(msgs));
        hx_agent_render ar = {v, HX_TPL_COMPACT, tools};
        EXPECT(hx_agent_nightly_render(&ar, msgs, &again, &err) == HX_OK);
        /* how often the model's calls are not the oracle's (printed) */
        char *got = cJSON_PrintUnformatted(cJSON_GetObjectItem(trace, "calls"));
        char *want = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "expect"), "calls"));
        differs += got && want && strcmp(got, want) != 0;
        cJSON_free(got), cJSON_free(want);
        cJSON_Delete(trace), cJSON_Delete(tools);
        /* a task of the training split, never the suite's held-out pools */
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(t, "split")), "train");
    }
    hx_eval_home_give(base, lock);
    EXPECT(d.n == again.n && d.n_docs == again.n_docs);
    EXPECT(d.n == again.n && same_tokens(d.tokens, again.tokens, d.n) &&
           !memcmp(d.mask, again.mask, d.n));
    size_t targets = 0;
    for (size_t i = 0; i < d.n; i++) targets += d.mask[i];
    EXPECT(targets > 0 && targets < d.n);
    printf("# distill: 3 conversations of the base (%d documents, %zu tokens, %zu targets), "
           "%d of them other calls than the oracle's\n", d.n_docs, d.n, targets, differs);
    cJSON_Delete(tasks);
    hx_nightly_data_free(&d), hx_nightly_data_free(&again);
    hx_model_free(m);
}

/* The gate's base results are cached while model, sample, threads and
 * binary are the same: the second base run reads them (the same passes),
 * a run with an adapter never does. */
static void test_base_cache(void)
{
    hx_model *m = NULL;
    hx_err err = {0};
    char cache[300];
    ASSERT(hx_model_load(model, NULL, &m, &err) == HX_OK);
    snprintf(cache, sizeof cache, "%s/gate-cache", tmpdir);
    hx_agent_eval ae = {m, HX_TPL_COMPACT, 1, 0, 3, tmpdir, NULL, cache, 0, NULL};
    uint8_t a[2] = {9, 9}, b[2] = {7, 7};
    ASSERT(hx_agent_nightly_eval(&ae, NULL, NULL, 0, 2, a, &err) == HX_OK);
    EXPECT_EQ_INT(ae.base_cached, 0);
    ASSERT(hx_agent_nightly_eval(&ae, NULL, NULL, 0, 2, b, &err) == HX_OK);
    EXPECT_EQ_INT(ae.base_cached, 1);
    EXPECT(a[0] <= 1 && a[1] <= 1 && a[0] == b[0] && a[1] == b[1]);
    hx_agent_eval_free_tasks(&ae);
    ae.seed = 4; /* another sample: run again */
    ASSERT(hx_agent_nightly_eval(&ae, NULL, NULL, 0, 2, b, &err) == HX_OK);
    EXPECT_EQ_INT(ae.base_cached, 0);
    hx_agent_eval_free_tasks(&ae);
    hx_model_free(m);
}

/* The generic evaluation: a fixed sample run as the bench runs it; the
 * oracle passes the same tasks with or without an adapter argument. */
static void test_eval_sample(void)
{
    hx_agent_eval ae = {NULL, HX_TPL_COMPACT, 1, 1, 7, tmpdir, NULL, NULL, 0, NULL};
    uint8_t pb[3] = {9, 9, 9}, pw[3] = {9, 9, 9};
    hx_err err = {0};
    unsetenv("HEARTH_HOME"), unsetenv("HEARTH_NOW");
    ASSERT(hx_agent_nightly_eval(&ae, NULL, NULL, 0, 3, pb, &err) == HX_OK);
    EXPECT(getenv("HEARTH_HOME") == NULL && getenv("HEARTH_NOW") == NULL); /* put back */
    const cJSON *first = ae.tasks;
    char *ids = cJSON_PrintUnformatted(ae.tasks);
    const char *ads[] = {"unused-by-the-oracle.gguf"};
    const float one[] = {1.0f};
    ASSERT(hx_agent_nightly_eval(&ae, ads, one, 1, 3, pw, &err) == HX_OK);
    const int base = pb[0] + pb[1] + pb[2], with = pw[0] + pw[1] + pw[2];
    for (int i = 0; i < 3; i++) EXPECT(pb[i] <= 1 && pb[i] == pw[i]); /* task by task */
    char *ids2 = cJSON_PrintUnformatted(ae.tasks);
    EXPECT(ae.tasks == first && ids && ids2 && !strcmp(ids, ids2)); /* the same sample */
    printf("# oracle: %d/3 without, %d/3 with\n", base, with);
    EXPECT_EQ_INT(base, 3);
    EXPECT_EQ_INT(with, base);
    EXPECT_EQ_INT(cJSON_GetArraySize(ae.tasks), 3);
    cJSON_free(ids), cJSON_free(ids2);
    hx_agent_eval_free_tasks(&ae);
    EXPECT(ae.tasks == NULL);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/hx_test_nightly_agent.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (vocab) {
        /* a random-weight model declaring the compact style, written the
         * way hearth train writes hearth-tiny (hx_trainer_write_gguf_kv) */
        hx_err err = {0};
        hx_gguf *g = NULL;
        hx_vocab *v = NULL;
        if (hx_gguf_open(vocab, &g, &err) || hx_vocab_load(g, &v, &err)) {
            printf("FAIL vocab: %s\n", err.msg);
            return 1;
        }
        hx_train_config c = hx_train_default_config();
        c.n_vocab = hx_vocab_n_tokens(v);
        c.n_embd = 8, c.n_layer = 1, c.n_head = 1, c.n_head_kv = 1, c.head_dim = 8;
        c.n_ff = 8, c.n_ctx = 1024;
        hx_vocab_free(v);
        hx_gguf_close(g);
        hx_trainer *tr = NULL;
        static const char *const kv[] = {"hearth.prompt_style", "compact", NULL};
        snprintf(model, sizeof model, "%s/base.gguf", tmpdir);
        if (hx_trainer_new_scratch(&c, 1, 1, &tr, &err) ||
            hx_trainer_write_gguf_kv(tr, model, vocab, kv, &err)) {
            printf("FAIL model: %s\n", err.msg);
            return 1;
        }
        hx_trainer_free(tr);
        RUN(test_render_equals_inference);
        RUN(test_render_every_family);
        RUN(test_render_skips_no_loss_turn);
        RUN(test_replay);
        RUN(test_distill);
        RUN(test_base_cache);
    }
    RUN(test_eval_sample);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
    return test_summary();
}
