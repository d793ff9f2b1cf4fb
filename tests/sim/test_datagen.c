/* test_datagen.c: generated trajectories: held-out phrasings, determinism
 * from the seed, every trajectory valid, the rendering the same as the
 * planner's prompts, the command line. (Worlds: test_world.c.) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/sim.h"
#include "cli/cli.h"
#include "scratch.h"
#include "test.h"

/* Held-out tasks use only the held-out fifth of the phrasings; training
 * the rest and, for some kinds, phrasings of its own. */
static void test_heldout_templates(void)
{
    for (int split = 0; split < 2; split++) {
        hx_world w;
        hx_world_generate(5, split, 0, &w, NULL);
        int n = 0, bad = 0, extra = 0;
        for (int i = 0; i < 600; i++) {
            hx_rng r;
            hx_rng_seed(&r, 11, (uint64_t)i);
            cJSON *t = hx_dg_task_new(&w, &r, -1, NULL);
            if (!t) continue;
            int ti = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(t, "template"));
            if (ti >= HX_DG_EXTRA_TEMPLATE)
                extra++;
            else
                bad += (ti % 5 == 4) != (split == HX_SPLIT_HELDOUT);
            n++;
            cJSON_Delete(t);
        }
        printf("# %s: %d tasks, %d in training-only phrasings\n",
               split == HX_SPLIT_HELDOUT ? "held-out" : "training", n, extra);
        EXPECT(n > 500);
        EXPECT_EQ_INT(bad, 0);
        if (split == HX_SPLIT_HELDOUT) EXPECT_EQ_INT(extra, 0);
        else EXPECT(extra > 0);
    }
}

enum { MAX_HELDOUT = 256, KEY_LEN = 256 };

static int heldout_keys(char keys[][KEY_LEN])
{
    int n = 0;
    hx_dg_phrasings ph;
    for (int k = 0; hx_dg_phrasings_of(k, &ph); k++) {
        if (ph.train_only) continue;
        EXPECT(ph.n_base >= 5); /* fewer: held-out tasks would use training's */
        for (int i = 0; i < ph.n_base && n < MAX_HELDOUT; i++)
            if (hx_dg_template_heldout(i, ph.n_base)) hx_dg_phrasing_key(ph.base[i], keys[n++], KEY_LEN);
    }
    return n;
}

static int clashes(const char *kind, const char *tpl, char keys[][KEY_LEN], int n_keys)
{
    char key[KEY_LEN];
    hx_dg_phrasing_key(tpl, key, sizeof key);
    for (int i = 0; i < n_keys; i++)
        if (!strcmp(key, keys[i])) {
            printf("# %s: training phrasing \"%s\" is a held-out one\n", kind, tpl);
            return 1;
        }
    return 0;
}

/* No training phrasing (the other four fifths of a kind's templates, and
 * its training-only extras) is a held-out phrasing of any kind, case and
 * punctuation aside: the held-out score is on phrasings never trained on. */
static void test_heldout_phrasings_unseen(void)
{
    static char keys[MAX_HELDOUT][KEY_LEN];
    int n_keys = heldout_keys(keys), n_train = 0, bad = 0;
    hx_dg_phrasings ph;
    for (int k = 0; hx_dg_phrasings_of(k, &ph); k++) {
        for (int i = 0; i < ph.n_base; i++) {
            if (hx_dg_template_heldout(i, ph.n_base)) continue;
            n_train++;
            bad += clashes(ph.kind, ph.base[i], keys, n_keys);
        }
        for (int i = 0; i < ph.n_extra; i++, n_train++)
            bad += clashes(ph.kind, ph.extra[i], keys, n_keys);
    }
    printf("# %d held-out phrasings, %d training phrasings\n", n_keys, n_train);
    EXPECT(n_keys > 20 && n_keys < MAX_HELDOUT);
    EXPECT(n_train > 4 * n_keys);
    EXPECT_EQ_INT(bad, 0);
}


static int count_distinct(char keys[][KEY_LEN], int n)
{
    int d = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(keys[i], keys[j]);
        d += !seen;
    }
    return d;
}

/* Training requests composed from parts: about half of them, the same for
 * the same seed, never a held-out phrasing. */
static void test_composed_requests(void)
{
    enum { N = 1000 };
    static char held[MAX_HELDOUT][KEY_LEN];
    int n_held = heldout_keys(held), nc = 0, nt = 0, clash = 0, same = 0;
    for (int i = 0; i < N; i++) {
        hx_world w;
        hx_world_generate(100 + (uint64_t)i / 20, HX_SPLIT_TRAIN, 0, &w, NULL);
        cJSON *t[2];
        for (int k = 0; k < 2; k++) {
            hx_rng r;
            hx_rng_seed(&r, 31, (uint64_t)i);
            t[k] = hx_dg_task_new(&w, &r, HX_CAT_SINGLE + i % 2, NULL);
        }
        if (t[0] && t[1]) {
            const char *req = cJSON_GetStringValue(cJSON_GetObjectItem(t[0], "request"));
            same += !strcmp(req, cJSON_GetStringValue(cJSON_GetObjectItem(t[1], "request")));
            int composed = cJSON_GetNumberValue(cJSON_GetObjectItem(t[0], "template")) ==
                           HX_DG_COMPOSED_TEMPLATE;
            nc += composed, nt += !composed;
            char key[KEY_LEN];
            hx_dg_phrasing_key(req, key, sizeof key);
            for (int h = 0; h < n_held && composed; h++) clash += !strcmp(key, held[h]);
        }
        cJSON_Delete(t[0]);
        cJSON_Delete(t[1]);
    }
    printf("# %d composed requests, %d from templates\n", nc, nt);
    EXPECT(nc > N / 3 && nt > N / 3);
    EXPECT_EQ_INT(same, nc + nt);
    EXPECT_EQ_INT(clash, 0);
}

/* Variety: 1000 composed skeletons of a kind ({slot}s unfilled, case and
 * punctuation aside) are many times the kind's fixed templates; the same
 * seed draws the same ones. */
static void test_composed_variety(void)
{
    enum { N = 1000 };
    static char keys[N][KEY_LEN];
    hx_dg_phrasings ph;
    int kinds = 0;
    for (int k = 0; hx_dg_phrasings_of(k, &ph); k++) {
        hx_rng r, r2;
        hx_rng_seed(&r, 5, (uint64_t)k);
        hx_rng_seed(&r2, 5, (uint64_t)k);
        char tpl[512], again[512];
        int n = 0, differ = 0;
        for (; n < N && hx_dg_compose(ph.kind, &r, tpl, sizeof tpl); n++) {
            hx_dg_compose(ph.kind, &r2, again, sizeof again);
            differ += strcmp(tpl, again) != 0;
            hx_dg_phrasing_key(tpl, keys[n], KEY_LEN);
        }
        if (!n) continue;
        kinds++;
        int d = count_distinct(keys, n);
        printf("# %-17s %4d distinct skeletons per 1000 (templates: %d)\n", ph.kind, d,
               ph.n_base + ph.n_extra);
        EXPECT_EQ_INT(differ, 0);
        EXPECT(d > 3 * (ph.n_base + ph.n_extra));
    }
    EXPECT(kinds >= 14);
}

/* Every composed training request gets its oracle's answer from the real
 * tools: nothing rejected in a training run where half are composed. */
static void test_composed_answered(void)
{
    hx_dg_stats st;
    char *out = NULL, home[128];
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    hx_dg_params p = hx_dg_default_params();
    snprintf(home, sizeof home, "%s/ca", scratch_dir());
    p.n = 120;
    p.seed = 17;
    p.split = HX_SPLIT_TRAIN;
    p.tasks = 1; /* tasks: the oracle ran and was verified, and "template" is kept */
    p.home = home;
    hx_err err = {0};
    EXPECT_EQ_INT(hx_datagen_run(&p, f, &st, &err), HX_OK);
    fclose(f);
    ASSERT(out);
    EXPECT_EQ_INT(st.written, 120);
    EXPECT_EQ_INT(st.rejected, 0);
    int composed = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        ASSERT(j);
        composed += cJSON_GetNumberValue(cJSON_GetObjectItem(j, "template")) == HX_DG_COMPOSED_TEMPLATE;
        cJSON_Delete(j);
    }
    printf("# %d of 120 composed\n", composed);
    EXPECT(composed > 20);
    free(out);
}

static void test_validator(void)
{
    hx_config *cfg = hx_config_default();
    hx_tools *reg = hx_tools_new(cfg);
    hx_err err = {0};
    ASSERT(hx_tools_register_builtins(reg, &err) == HX_OK);
    cJSON *tools = hx_tools_list_json(reg);
    hx_dg_validator *v = hx_dg_validator_new(tools, &err);
    ASSERT(v);
    char why[256];
    const char *good = "{\"text\":\"budget\",\"from\":\"Bob\"}";
    const char *bad[] = {
        "{\"from\":\"Bob\",\"text\":\"budget\"}",    /* not the schema's order */
        "{\"text\":\"budget\",\"frm\":\"Bob\"}",     /* unknown property */
        "{\"text\":\"a string of more than forty bytes, too long\"}",
        "{\"limit\":7}",                            /* not a round value */
    };
    cJSON *a = cJSON_Parse(good);
    EXPECT(hx_dg_call_valid(v, "mail.search", a, why, sizeof why));
    cJSON_Delete(a);
    for (int i = 0; i < 4; i++) { /* the last two: valid, but not compact */
        a = cJSON_Parse(bad[i]);
        why[0] = 0;
        EXPECT(i < 2 ? !hx_dg_call_valid(v, "mail.search", a, why, sizeof why)
                     : hx_dg_call_valid(v, "mail.search", a, why, sizeof why) &&
                           !hx_dg_call_compact(a, why, sizeof why));
        EXPECT(why[0] != 0);
        cJSON_Delete(a);
    }
    a = cJSON_Parse("{\"title\":\"x\"}"); /* start is required */
    EXPECT(!hx_dg_call_valid(v, "calendar.create_event", a, why, sizeof why));
    cJSON_Delete(a);
    hx_dg_validator_free(v);
    cJSON_Delete(tools);
    hx_tools_free(reg);
    hx_config_free(cfg);
}

/* Masks the values the tools make at random or from the process id (event
 * uids, outbox names "<time>.P<pid>Q<count>.<random>.hearth"). */
static void mask_random(char *s)
{
    for (char *p = s; *p; p++) {
        size_t n = strspn(p, "0123456789abcdef");
        if (n >= 16) memset(p, 'x', n);
        if (*p == 'P' && p > s && p[-1] == '.') {
            size_t d = strspn(p + 1, "0123456789");
            size_t q = d && p[1 + d] == 'Q' ? strspn(p + 2 + d, "0123456789") : 0;
            if (q) memset(p + 1, 'x', d + 1 + q); /* pid and the process's counter */
        }
        p += n ? n - 1 : 0;
    }
}

/* Held-out worlds asked in training's phrasings (--phrasings train):
 * the same worlds and kinds as the held-out tasks, only training's
 * templates. */
static void test_phrasings(void)
{
    char *def[2] = {NULL, NULL};
    for (int v = 0; v < 2; v++) {
        size_t len = 0;
        FILE *f = open_memstream(&def[v], &len);
        hx_dg_params p = hx_dg_default_params();
        char home[128];
        snprintf(home, sizeof home, "%s/ph%d", scratch_dir(), v);
        p.n = 8;
        p.seed = 2001;
        p.split = HX_SPLIT_HELDOUT;
        p.tasks = 1;
        p.home = home;
        p.phrasings = v ? HX_SPLIT_TRAIN : -1;
        hx_dg_stats st;
        hx_err err = {0};
        EXPECT_EQ_INT(hx_datagen_run(&p, f, &st, &err), HX_OK);
        fclose(f);
    }
    ASSERT(def[0] && def[1]);
    int lines = 0, same = 0, train_tpl = 0;
    for (char *a = def[0], *b = def[1]; a && b && *a && *b; lines++) {
        char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        ASSERT(ea && eb);
        *ea = *eb = 0;
        cJSON *ta = cJSON_Parse(a), *tb = cJSON_Parse(b);
        ASSERT(ta && tb);
        const char *keys[] = {"world_seed", "kind", "split"};
        int eq = 1;
        for (int k = 0; k < 3; k++)
            eq &= !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(ta, keys[k])),
                          cJSON_GetStringValue(cJSON_GetObjectItem(tb, keys[k])));
        same += eq;
        train_tpl += (int)cJSON_GetNumberValue(cJSON_GetObjectItem(tb, "template")) % 5 != 4;
        cJSON_Delete(ta);
        cJSON_Delete(tb);
        a = ea + 1;
        b = eb + 1;
    }
    EXPECT_EQ_INT(lines, 8);
    EXPECT_EQ_INT(same, 8);
    EXPECT_EQ_INT(train_tpl, 8);
    free(def[0]);
    free(def[1]);
}

static char *run_datagen_cat(long n, uint64_t seed, int split, int cat, const char *sub,
                             hx_dg_stats *st)
{
    char *buf = NULL, home[128];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    hx_dg_params p = hx_dg_default_params();
    snprintf(home, sizeof home, "%s/%s", scratch_dir(), sub);
    p.category = cat;
    p.n = n;
    p.seed = seed;
    p.split = split;
    p.home = home;
    hx_err err = {0};
    int rc = hx_datagen_run(&p, f, st, &err);
    fclose(f);
    if (rc) printf("# datagen: %s\n", err.msg);
    return rc ? (free(buf), NULL) : buf;
}

static char *run_datagen(long n, uint64_t seed, int split, const char *sub, hx_dg_stats *st)
{
    return run_datagen_cat(n, seed, split, -1, sub, st);
}

static const char *jstr(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

static int is_kind(const char *kind, const char *const *kinds)
{
    for (; *kinds; kinds++)
        if (!strcmp(kind, *kinds)) return 1;
    return 0;
}

static const char *const recovery_kinds[] = {"schedule_fix", "send_fix", "bad_address",
                                             "bad_send_address", "declined_schedule", NULL};

/* One recovery lesson, checked message by message: a slip (schedule_fix,
 * send_fix) is the first assistant turn, marked "loss": false, refused by
 * the real tool with the address message, then the same tool succeeds and
 * the answer reports success; an unusable address of the user's is tried,
 * refused, and the answer says so; a declined booking is never "Booked". */
static void check_lesson(const cJSON *j, int *fixes, int *honest)
{
    const char *kind = jstr(j, "kind");
    const cJSON *msgs = cJSON_GetObjectItem(j, "messages"), *m;
    const cJSON *first_call = NULL, *first_result = NULL, *last_result = NULL;
    int n_assist = 0, no_loss = 0, n_ok = 0;
    cJSON_ArrayForEach(m, msgs)
    {
        if (!strcmp(jstr(m, "role"), "assistant")) {
            n_assist++;
            if (cJSON_IsFalse(cJSON_GetObjectItem(m, "loss"))) no_loss += n_assist == 1 ? 1 : 100;
            if (!first_call) first_call = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "tool_calls"), 0);
        }
        if (!strcmp(jstr(m, "role"), "tool")) {
            if (!first_result) first_result = m;
            last_result = m;
            n_ok += !strstr(jstr(m, "content"), "\"error\"");
        }
    }
    const char *ans = jstr(cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1), "content");
    ASSERT(first_call && first_result);
    int slip = !strcmp(kind, "schedule_fix") || !strcmp(kind, "send_fix");
    EXPECT_EQ_INT(no_loss, slip); /* only a slip is kept out of the loss */
    if (slip) {
        EXPECT(strstr(jstr(first_result, "content"), "is not an address") != NULL); /* or no name known */
        EXPECT(n_ok >= 1);
        EXPECT(!strncmp(ans, !strcmp(kind, "send_fix") ? "Sent to " : "Booked \"", 8));
        ++*fixes;
        return;
    }
    /* the honest ones: the last result is an error, and the answer says so */
    EXPECT(strstr(jstr(last_result, "content"), "\"error\"") != NULL);
    EXPECT(strncmp(ans, "Booked", 6) && strncmp(ans, "Sent", 4));
    if (strcmp(kind, "declined_schedule")) {
        EXPECT(strstr(ans, "is not a valid email address") != NULL);
        EXPECT_EQ_INT(n_ok, 0);
    } else {
        EXPECT(strstr(ans, "you declined") != NULL);
    }
    ++*honest;
}

/* Recovery lessons in training: every kind present, run through the real
 * tools (the verifier accepted them), each checked above; about 5% of a
 * default training mix; never in held-out data, whose mix is unchanged;
 * and no answer in any conversation says "Booked" or "Sent" after a
 * refused last call. */
static void test_recovery_lessons(void)
{
    hx_dg_stats st;
    int fixes = 0, honest = 0, seen[5] = {0};
    const int cats[] = {HX_CAT_ERROR, HX_CAT_REFUSAL};
    for (int c = 0; c < 2; c++) {
        char *out = run_datagen_cat(60, 21, HX_SPLIT_TRAIN, cats[c], "rec", &st);
        ASSERT(out);
        EXPECT_EQ_INT(st.rejected, 0);
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
            cJSON *j = cJSON_Parse(line);
            ASSERT(j);
            for (int k = 0; recovery_kinds[k]; k++) seen[k] += !strcmp(jstr(j, "kind"), recovery_kinds[k]);
            if (is_kind(jstr(j, "kind"), recovery_kinds)) check_lesson(j, &fixes, &honest);
            cJSON_Delete(j);
        }
        free(out);
    }
    for (int k = 0; recovery_kinds[k]; k++) EXPECT(seen[k] > 0);
    EXPECT(fixes >= 15);
    EXPECT(honest >= 10);
    int in_mix[2] = {0}, booked_after_error = 0;
    for (int split = 0; split < 2; split++) {
        char *out = run_datagen(250, 22, split, "mix", &st);
        ASSERT(out);
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
            cJSON *j = cJSON_Parse(line);
            ASSERT(j);
            in_mix[split] += is_kind(jstr(j, "kind"), recovery_kinds);
            const cJSON *msgs = cJSON_GetObjectItem(j, "messages");
            int n = cJSON_GetArraySize(msgs);
            const char *ans = jstr(cJSON_GetArrayItem(msgs, n - 1), "content");
            const cJSON *before = cJSON_GetArrayItem(msgs, n - 2);
            if (!strcmp(jstr(before, "role"), "tool") && strstr(jstr(before, "content"), "{\"error\"") &&
                (!strncmp(ans, "Booked", 6) || !strncmp(ans, "Sent", 4) || !strncmp(ans, "Added", 5)))
                booked_after_error++;
            cJSON_Delete(j);
        }
        free(out);
    }
    printf("# recovery lessons: %d of 250 training conversations, %d of 250 held-out\n",
           in_mix[HX_SPLIT_TRAIN], in_mix[HX_SPLIT_HELDOUT]);
    EXPECT(in_mix[HX_SPLIT_TRAIN] >= 5 && in_mix[HX_SPLIT_TRAIN] <= 30); /* ~5% */
    EXPECT_EQ_INT(in_mix[HX_SPLIT_HELDOUT], 0);
    EXPECT_EQ_INT(booked_after_error, 0);
}

/* Calls fn(j, split, ctx) on each of n conversations (seed, scratch
 * directory sub) of each category of cats[0, n_cats), in both splits. */
static void each_conversation(long n, uint64_t seed, const int *cats, int n_cats, const char *sub,
                              void (*fn)(const cJSON *j, int split, void *ctx), void *ctx)
{
    hx_dg_stats st;
    for (int split = 0; split < 2; split++)
        for (int c = 0; c < n_cats; c++) {
            char *out = run_datagen_cat(n, seed, split, cats[c], sub, &st);
            ASSERT(out);
            for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                cJSON *j = cJSON_Parse(line);
                ASSERT(j);
                fn(j, split, ctx);
                cJSON_Delete(j);
            }
            free(out);
        }
}

/* One memory-in-the-prompt conversation: a fact stored while a related
 * memory is recalled calls memory.remember (never memory.search) with the
 * fact; a question a recalled memory answers makes no call and quotes a
 * memory line of the prompt. Counts the checked ones of each. */
static void check_memory_in_prompt(const cJSON *j, int *stored, int *answered)
{
    const cJSON *msgs = cJSON_GetObjectItem(j, "messages"), *m;
    const char *ctx = jstr(cJSON_GetArrayItem(msgs, 1), "content"), *kind = jstr(j, "kind");
    const char *ans = jstr(cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1), "content");
    int calls = 0, remembers = 0;
    cJSON_ArrayForEach(m, msgs)
    {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(m, "tool_calls"))
        {
            const cJSON *fn = cJSON_GetObjectItem(c, "function");
            calls++;
            remembers += !strcmp(jstr(fn, "name"), "memory.remember");
        }
    }
    EXPECT(strstr(ctx, "Things you remember about the user") != NULL);
    if (!strcmp(kind, "remember_related")) {
        EXPECT_EQ_INT(calls, 1);
        EXPECT_EQ_INT(remembers, 1);
        EXPECT(!strncmp(ans, "Noted: ", 7));
        *stored += calls == 1 && remembers == 1;
        return;
    }
    char fact[256]; /* "You told me: <memory>." and "] <memory>\n" in the prompt */
    snprintf(fact, sizeof fact, "] %s", ans + strlen("You told me: "));
    size_t n = strlen(fact);
    if (n > 2 && fact[n - 1] == '.') fact[n - 1] = '\n';
    EXPECT_EQ_INT(calls, 0);
    EXPECT(!strncmp(ans, "You told me: ", 13) && strstr(ctx, fact) != NULL);
    *answered += calls == 0 && strstr(ctx, fact) != NULL;
}

/* Memory in the prompt, in training only: facts stored while a related
 * memory is recalled (memory.remember, not a search) and questions the
 * recalled memory answers with no call; never in held-out data. */
struct memory_seen {
    int stored, answered, heldout;
};

static void memory_one(const cJSON *j, int split, void *ctx)
{
    static const char *const kinds[] = {"remember_related", "recall_known", NULL};
    struct memory_seen *m = ctx;
    if (!is_kind(jstr(j, "kind"), kinds)) return;
    if (split == HX_SPLIT_TRAIN) check_memory_in_prompt(j, &m->stored, &m->answered);
    else m->heldout++;
}

static void test_memory_in_prompt(void)
{
    const int cats[] = {HX_CAT_MEMORY, HX_CAT_NONE};
    struct memory_seen m = {0};
    each_conversation(120, 23, cats, 2, "mem", memory_one, &m);
    printf("# memory in the prompt: %d stored, %d answered from recall\n", m.stored, m.answered);
    EXPECT(m.stored >= 10);
    EXPECT(m.answered >= 5);
    EXPECT_EQ_INT(m.heldout, 0);
}

/* One "when is ...?" conversation: a single calendar.list_events with
 * the event's name as the request spells it as its only argument (a
 * query looks ahead), and an answer that begins with the title of an
 * event of its result and gives that event's day. */
static int check_event_when(const cJSON *j)
{
    const cJSON *msgs = cJSON_GetObjectItem(j, "messages");
    const int n = cJSON_GetArraySize(msgs);
    const char *req = jstr(cJSON_GetArrayItem(msgs, 2), "content");
    const char *ans = jstr(cJSON_GetArrayItem(msgs, n - 1), "content");
    const cJSON *calls = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 3), "tool_calls");
    const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function");
    const cJSON *args = cJSON_GetObjectItem(fn, "arguments"), *e;
    const char *query = jstr(args, "query");
    EXPECT_EQ_INT(n, 6); /* system, now, request, call, result, answer */
    EXPECT_EQ_INT(cJSON_GetArraySize(calls), 1);
    EXPECT_STR_EQ(jstr(fn, "name"), "calendar.list_events");
    EXPECT_EQ_INT(cJSON_GetArraySize(args), 1);
    EXPECT(*query && strstr(req, query) != NULL);
    cJSON *res = cJSON_Parse(jstr(cJSON_GetArrayItem(msgs, 4), "content"));
    int named = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(res, "events"))
    {
        char day[11];
        snprintf(day, sizeof day, "%s", jstr(e, "start"));
        named |= !strncasecmp(jstr(e, "title"), query, strlen(query)) &&
                 !strncmp(ans, jstr(e, "title"), strlen(jstr(e, "title"))) && strstr(ans, day);
    }
    EXPECT(named);
    cJSON_Delete(res);
    return named;
}

/* One conversation of a kind that adds or keeps what the request says
 * (remind, all_day, remember_dated, create_said with its length,
 * block_span with a span for its start): a single call of the tool with the
 * request's own words as its values, and an answer that says it was
 * done. Returns 1 when it was checked. */
static int check_request_copied(const cJSON *j)
{
    const char *kind = jstr(j, "kind");
    const cJSON *msgs = cJSON_GetObjectItem(j, "messages");
    const int n = cJSON_GetArraySize(msgs);
    const char *req = jstr(cJSON_GetArrayItem(msgs, 2), "content");
    const char *ans = jstr(cJSON_GetArrayItem(msgs, n - 1), "content");
    const cJSON *calls = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 3), "tool_calls");
    const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function");
    const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
    EXPECT_EQ_INT(n, 6);
    EXPECT_EQ_INT(cJSON_GetArraySize(calls), 1);
    if (!strcmp(kind, "remember_dated")) {
        const char *text = jstr(args, "text");
        EXPECT_STR_EQ(jstr(fn, "name"), "memory.remember");
        EXPECT(*text && strstr(req, text) && strpbrk(text, "0123456789"));
        EXPECT(!strncmp(ans, "Noted: ", 7));
        return 1;
    }
    const char *title = jstr(args, "title"), *start = jstr(args, "start");
    const int all_day = !strcmp(kind, "all_day"), sized = !strcmp(kind, "create_said");
    EXPECT_STR_EQ(jstr(fn, "name"), "calendar.create_event");
    EXPECT_EQ_INT(cJSON_GetArraySize(args), all_day || sized ? 3 : 2);
    EXPECT(!sized || cJSON_GetNumberValue(cJSON_GetObjectItem(args, "duration_minutes")) >= 15);
    EXPECT_EQ_INT(cJSON_IsTrue(cJSON_GetObjectItem(args, "all_day")), all_day);
    EXPECT(*title && strcasestr(req, title + 1) && *start && strstr(req, start));
    EXPECT(!strncmp(ans, "Added \"", 7) && strstr(ans, all_day ? "(all day)" : " at "));
    return 1;
}

/* The kinds written for everyday requests the generator had not made
 * (an event asked about by name, a reminder, a whole day, a note with a
 * date or a number), in training only: each checked above; never in
 * held-out data, whose kinds and mix are unchanged. */
struct everyday_seen {
    int by_name, added, heldout;
};

static void everyday_one(const cJSON *j, int split, void *ctx)
{
    static const char *const copied[] = {"remind", "all_day", "remember_dated", "create_said", "block_span", NULL};
    struct everyday_seen *e = ctx;
    const int by_name = !strcmp(jstr(j, "kind"), "event_when"), added = is_kind(jstr(j, "kind"), copied);
    if (split == HX_SPLIT_HELDOUT) e->heldout += by_name || added;
    else if (by_name) e->by_name += check_event_when(j);
    else if (added) e->added += check_request_copied(j);
}

static void test_everyday_kinds(void)
{
    const int cats[] = {HX_CAT_SINGLE, HX_CAT_MEMORY};
    struct everyday_seen e = {0};
    each_conversation(200, 24, cats, 2, "every", everyday_one, &e);
    printf("# everyday kinds: %d events asked about by name, %d added or noted\n", e.by_name, e.added);
    EXPECT(e.by_name >= 5);
    EXPECT(e.added >= 15);
    EXPECT_EQ_INT(e.heldout, 0);
}

/* The one call of a conversation (its function), and the parsed result. */
static const cJSON *only_call(const cJSON *msgs, cJSON **res)
{
    const cJSON *calls = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 3), "tool_calls");
    EXPECT_EQ_INT(cJSON_GetArraySize(msgs), 6); /* system, now, request, call, result, answer */
    EXPECT_EQ_INT(cJSON_GetArraySize(calls), 1);
    *res = cJSON_Parse(jstr(cJSON_GetArrayItem(msgs, 4), "content"));
    return cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 0), "function");
}

/* A figure in a note: files.search of the contents by words the request
 * holds (the note's topic), and an answer that quotes a line of the found
 * note past its title, with the note's path. */
static void check_file_figure(const cJSON *msgs, const char *req, const char *ans)
{
    cJSON *res = NULL;
    const cJSON *fn = only_call(msgs, &res), *args = cJSON_GetObjectItem(fn, "arguments"), *m;
    const char *words = jstr(args, "content");
    EXPECT_STR_EQ(jstr(fn, "name"), "files.search");
    EXPECT_EQ_INT(cJSON_GetArraySize(args), 1);
    const char *noun = strrchr(words, ' ');
    ASSERT(noun);
    char topic[64];
    snprintf(topic, sizeof topic, "%.*s", (int)(noun - words), words);
    EXPECT(strcasestr(req, topic) != NULL);
    const cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "files"), 0);
    int quoted = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(f, "matches"))
    quoted |= cJSON_GetNumberValue(cJSON_GetObjectItem(m, "line")) > 1 &&
              !strncmp(ans, jstr(m, "text"), strlen(jstr(m, "text")));
    /* "(folder/name)" at the end: the tail of the found note's path */
    const char *path = jstr(f, "path"), *open = strrchr(ans, '(');
    const size_t k = open ? strlen(open) - 2 : 0;
    EXPECT(quoted);
    EXPECT(open && k > 0 && k < strlen(path) && !strncmp(path + strlen(path) - k, open + 1, k));
    cJSON_Delete(res);
}

/* Mail asked for by its sender alone: mail.search with the sender as the
 * request spells it and nothing else, and an answer that gives the
 * subject of the newest message found. */
static void check_mail_from(const cJSON *msgs, const char *req, const char *ans)
{
    cJSON *res = NULL;
    const cJSON *fn = only_call(msgs, &res), *args = cJSON_GetObjectItem(fn, "arguments");
    EXPECT_STR_EQ(jstr(fn, "name"), "mail.search");
    EXPECT_EQ_INT(cJSON_GetArraySize(args), 1);
    EXPECT(*jstr(args, "from") && strstr(req, jstr(args, "from")) != NULL);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "messages"), 0);
    EXPECT(first ? strstr(ans, jstr(first, "subject")) != NULL : !strncmp(ans, "I found no mail", 15));
    cJSON_Delete(res);
}

/* A mail to someone named by first name: mail.send to the address a
 * recalled memory (in the prompt) gives, or no call and an answer that
 * asks for the address where none was recalled. */
static void check_send_named(const cJSON *msgs, const char *ans)
{
    const char *ctx = jstr(cJSON_GetArrayItem(msgs, 1), "content");
    if (cJSON_GetArraySize(msgs) == 4) {
        EXPECT(!strncmp(ans, "I don't know ", 13));
        return;
    }
    cJSON *res = NULL;
    const cJSON *fn = only_call(msgs, &res), *args = cJSON_GetObjectItem(fn, "arguments");
    EXPECT_STR_EQ(jstr(fn, "name"), "mail.send");
    EXPECT(*jstr(args, "to") && strstr(ctx, jstr(args, "to")) != NULL);
    cJSON_Delete(res);
}

/* The kinds asked the way people ask (a figure in a note, mail by its
 * sender alone, mail to a first name) and the requests no tool can do
 * (no call; the answer says so), in training only. */
struct asked_seen {
    int figure, from, named, meetings, cannot, heldout;
};

/* A meeting with people named by first name: find_slots, then
 * create_event, each attendee an address the request's context lists. */
static void check_schedule_named(const cJSON *msgs)
{
    const char *ctx = jstr(cJSON_GetArrayItem(msgs, 1), "content"), *req = jstr(cJSON_GetArrayItem(msgs, 2), "content");
    const cJSON *m, *c, *a;
    int n = 0;
    EXPECT(strchr(req, '@') == NULL);
    cJSON_ArrayForEach(m, msgs) cJSON_ArrayForEach(c, cJSON_GetObjectItem(m, "tool_calls"))
    {
        const cJSON *fn = cJSON_GetObjectItem(c, "function");
        EXPECT_STR_EQ(jstr(fn, "name"), n++ ? "calendar.create_event" : "calendar.find_slots");
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(cJSON_GetObjectItem(fn, "arguments"), "attendees"))
        EXPECT(strstr(ctx, a->valuestring) != NULL);
    }
    EXPECT(n == 2 || n == 1); /* one where no slot was free */
}

static void asked_one(const cJSON *j, int split, void *ctx)
{
    static const char *const asked[] = {"file_figure", "mail_from", "send_named", "schedule_named", "cannot",
                                        NULL};
    struct asked_seen *a = ctx;
    const char *kind = jstr(j, "kind");
    if (!is_kind(kind, asked)) return;
    if (split == HX_SPLIT_HELDOUT) {
        a->heldout++;
        return;
    }
    const cJSON *msgs = cJSON_GetObjectItem(j, "messages"), *m;
    const int n = cJSON_GetArraySize(msgs);
    const char *req = jstr(cJSON_GetArrayItem(msgs, 2), "content");
    const char *ans = jstr(cJSON_GetArrayItem(msgs, n - 1), "content");
    if (!strcmp(kind, "file_figure")) {
        check_file_figure(msgs, req, ans);
        a->figure++;
    } else if (!strcmp(kind, "send_named")) {
        check_send_named(msgs, ans);
        a->named++;
    } else if (!strcmp(kind, "schedule_named")) {
        check_schedule_named(msgs);
        a->meetings++;
    } else if (!strcmp(kind, "mail_from")) {
        check_mail_from(msgs, req, ans);
        a->from++;
    } else {
        int calls = 0;
        cJSON_ArrayForEach(m, msgs) calls += cJSON_GetArraySize(cJSON_GetObjectItem(m, "tool_calls"));
        EXPECT_EQ_INT(calls, 0);
        EXPECT_EQ_INT(n, 4); /* system, now, request, answer */
        EXPECT(!strncmp(ans, "I can't do that", 15));
        a->cannot++;
    }
}

static void test_asked_kinds(void)
{
    const int cats[] = {HX_CAT_SINGLE, HX_CAT_NONE, HX_CAT_MULTI};
    struct asked_seen a = {0};
    each_conversation(240, 31, cats, 3, "asked", asked_one, &a);
    printf("# asked kinds: %d figures in notes, %d mail by sender, %d mail to a first name, %d meetings with "
           "first names, %d no tool can do\n",
           a.figure, a.from, a.named, a.meetings, a.cannot);
    EXPECT(a.figure >= 5);
    EXPECT(a.named >= 5);
    EXPECT(a.meetings >= 5);
    EXPECT(a.from >= 5);
    EXPECT(a.cannot >= 5);
    EXPECT_EQ_INT(a.heldout, 0);
}

static void test_datagen_deterministic(void)
{
    hx_dg_stats s1, s2;
    char *a = run_datagen(24, 9, HX_SPLIT_TRAIN, "d", &s1);
    char *b = run_datagen(24, 9, HX_SPLIT_TRAIN, "d", &s2);
    char *c = run_datagen(24, 10, HX_SPLIT_TRAIN, "d", &s2);
    ASSERT(a && b && c);
    mask_random(a);
    mask_random(b);
    mask_random(c);
    EXPECT(!strcmp(a, b));
    if (strcmp(a, b)) {
        size_t i = 0;
        while (a[i] == b[i]) i++;
        printf("# differ at %zu: ...%.200s\n#  vs ...%.200s\n", i, a + (i > 100 ? i - 100 : 0),
               b + (i > 100 ? i - 100 : 0));
    }
    EXPECT(strcmp(a, c) != 0);
    free(a);
    free(b);
    free(c);
}

/* Every line: the plan's fields, the compact style, calls valid against
 * the tools it lists, one-line answers, every category present. */
static void test_every_trajectory_valid(void)
{
    hx_dg_stats st;
    char *out = run_datagen(240, 3, HX_SPLIT_HELDOUT, "v", &st);
    ASSERT(out);
    EXPECT_EQ_INT(st.written, 240);
    for (int c = 0; c < HX_CAT_COUNT; c++) EXPECT(st.per_cat[c] > 0);
    hx_dg_validator *v = NULL;
    int lines = 0, calls = 0, bad = 0;
    char why[256];
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        cJSON *j = cJSON_Parse(line);
        ASSERT(j);
        const cJSON *msgs = cJSON_GetObjectItem(j, "messages"), *m;
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(j, "style")), "compact");
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(j, "split")), "heldout");
        EXPECT(hx_dg_category_parse(cJSON_GetStringValue(cJSON_GetObjectItem(j, "category"))) >= 0);
        if (!v) v = hx_dg_validator_new(cJSON_GetObjectItem(j, "tools"), NULL);
        ASSERT(v);
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "role")), "system");
        cJSON_ArrayForEach(m, msgs)
        {
            const cJSON *tc, *calls_j = cJSON_GetObjectItem(m, "tool_calls");
            cJSON_ArrayForEach(tc, calls_j)
            {
                const cJSON *fn = cJSON_GetObjectItem(tc, "function");
                calls++;
                const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
                if (!hx_dg_call_valid(v, cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name")), args,
                                      why, sizeof why) ||
                    !hx_dg_call_compact(args, why, sizeof why)) {
                    if (!bad++) printf("# %s\n", why);
                }
            }
        }
        const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
        const char *ans = cJSON_GetStringValue(cJSON_GetObjectItem(last, "content"));
        EXPECT(ans && *ans && !strchr(ans, '\n') && !cJSON_GetObjectItem(last, "tool_calls"));
        cJSON_Delete(j);
    }
    EXPECT_EQ_INT(lines, 240);
    EXPECT(calls > 240);
    EXPECT_EQ_INT(bad, 0);
    hx_dg_validator_free(v);
    free(out);
}

/* The oracle's run: what the planner rendered for each turn is a prefix
 * of the compact rendering of the finished conversation; a changed
 * message breaks it. */
static void test_rendering_identity(void)
{
    char home[128];
    snprintf(home, sizeof home, "%s/r", scratch_dir());
    hx_dg_world dw;
    hx_err err = {0};
    ASSERT(hx_dg_world_open(77, HX_SPLIT_TRAIN, 0, home, &dw, &err) == HX_OK);
    cJSON *tools = hx_tools_list_json(dw.reg);
    hx_dg_validator *v = hx_dg_validator_new(tools, &err);
    int checked = 0;
    for (int i = 0; i < 20 && v; i++) {
        hx_rng r;
        hx_rng_seed(&r, 77, (uint64_t)i);
        cJSON *task = hx_dg_task_new(&dw.w, &r, HX_CAT_MULTI, NULL), *trace = NULL;
        if (!task) continue;
        hx_source src;
        hx_planner *pl = NULL;
        char why[256] = "";
        ASSERT(hx_dg_oracle_new(task, &dw.w, dw.reg, &pl, &src) == HX_OK);
        hx_dg_run(&dw, task, &src, &pl, NULL, &trace, &err);
        ASSERT(trace);
        const char **prompts;
        int np = hx_dg_oracle_prompts(&src, &prompts);
        if (hx_dg_verify(task, trace, &src, v, tools, why, sizeof why)) {
            EXPECT(np >= 2);
            /* the tool list first (a prefix shared by every user), then the system message */
            EXPECT(!strncmp(prompts[np - 1], "Tools (call", 11));
            EXPECT(strstr(prompts[0], "\nSystem: You are Hearth") != NULL);
            cJSON *msgs = cJSON_GetObjectItem(trace, "messages");
            cJSON *u = cJSON_GetArrayItem(msgs, 1);
            cJSON_ReplaceItemInObject(u, "content", cJSON_CreateString("something else"));
            EXPECT(!hx_dg_verify(task, trace, &src, v, tools, why, sizeof why));
            EXPECT(strstr(why, "does not extend") != NULL);
            checked++;
        } else {
            printf("# rejected: %s\n", why);
        }
        cJSON_Delete(trace);
        cJSON_Delete(task);
        hx_source_free(&src);
    }
    EXPECT(checked >= 15);
    hx_dg_validator_free(v);
    cJSON_Delete(tools);
    hx_dg_world_close(&dw);
}

/* Runs `hearth datagen` with args (NULL-terminated), its stderr muted. */
static int datagen_cli(const char *const *args)
{
    char *argv[20];
    int argc = 0;
    argv[argc++] = (char *)"datagen";
    while (*args && argc < 19) argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    fflush(stderr);
    int se = dup(2), dn = open("/dev/null", O_WRONLY);
    dup2(dn, 2);
    int rc = hx_cmd_datagen(argc, argv);
    fflush(stderr);
    dup2(se, 2);
    close(se);
    close(dn);
    return rc;
}

static int count_lines_with(const char *path, const char *needle)
{
    char *s = slurp(path);
    int n = 0;
    for (char *l = s ? strtok(s, "\n") : NULL; l; l = strtok(NULL, "\n")) n += strstr(l, needle) != NULL;
    free(s);
    return n;
}

static void test_cmd_datagen(void)
{
    char out[128], tasks[128], home[128];
    snprintf(out, sizeof out, "%s/cli.jsonl", scratch_dir());
    snprintf(tasks, sizeof tasks, "%s/tasks.jsonl", scratch_dir());
    snprintf(home, sizeof home, "%s/cli", scratch_dir());
    const char *a1[] = {"--n", "5", "--seed", "2", "-o", out, "--dir", home, NULL};
    EXPECT_EQ_INT(datagen_cli(a1), HX_EXIT_OK);
    EXPECT_EQ_INT(count_lines_with(out, "\"style\":\"compact\""), 5);
    const char *a2[] = {"--tasks", "--split", "heldout", "--n", "3", "-o", tasks, "--dir", home, NULL};
    EXPECT_EQ_INT(datagen_cli(a2), HX_EXIT_OK);
    EXPECT_EQ_INT(count_lines_with(tasks, "\"expect\":"), 3);
    EXPECT_EQ_INT(count_lines_with(tasks, "\"split\":\"heldout\""), 3);
    const char *b1[] = {"--split", "test", NULL}, *b2[] = {"--n", NULL}, *b3[] = {"--n", "0", NULL};
    const char *b4[] = {"--category", "gossip", NULL}, *b5[] = {"--frobnicate", "1", NULL};
    EXPECT_EQ_INT(datagen_cli(b1), HX_EXIT_USAGE);
    EXPECT_EQ_INT(datagen_cli(b2), HX_EXIT_USAGE);
    EXPECT_EQ_INT(datagen_cli(b3), HX_EXIT_USAGE);
    EXPECT_EQ_INT(datagen_cli(b4), HX_EXIT_USAGE);
    EXPECT_EQ_INT(datagen_cli(b5), HX_EXIT_USAGE);
    const char *b6[] = {"--n", "1", "-o", "/nonexistent-dir/x.jsonl", NULL};
    EXPECT_EQ_INT(datagen_cli(b6), HX_EXIT_FAIL);
    /* busy days change training worlds only: a task file's worlds are
     * made again from their seeds without them */
    const char *b7[] = {"--tasks", "--busy-days", "--n", "1", NULL};
    EXPECT_EQ_INT(datagen_cli(b7), HX_EXIT_USAGE);
    const char *a3[] = {"--busy-days", "--n", "5", "--seed", "2", "-o", out, "--dir", home, NULL};
    EXPECT_EQ_INT(datagen_cli(a3), HX_EXIT_OK);
    EXPECT_EQ_INT(count_lines_with(out, "\"style\":\"compact\""), 5);
}

int main(void)
{
    RUN(test_heldout_templates);
    RUN(test_heldout_phrasings_unseen);
    RUN(test_phrasings);
    RUN(test_composed_requests);
    RUN(test_composed_variety);
    RUN(test_composed_answered);
    RUN(test_validator);
    RUN(test_datagen_deterministic);
    RUN(test_every_trajectory_valid);
    RUN(test_rendering_identity);
    RUN(test_recovery_lessons);
    RUN(test_memory_in_prompt);
    RUN(test_everyday_kinds);
    RUN(test_asked_kinds);
    RUN(test_cmd_datagen);
    scratch_remove();
    return test_summary();
}
