/* test_persona.c: the persona, the mechanics of its proof: requests
 * that never name the habits, accepted episodes in a memory database with
 * the habit values in the calls, the contrast replay's tasks kept free of
 * them, the held-out checker on hand-built calls,
 * and `hearth nightly --force` on that database training a couple of steps
 * and adopting, or saying why not (the figures: make bench-persona). */
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "nightly/nightly.h"
#include "cli/cli.h"
#include "lora/lora.h"
#include "test.h"
#include "tests/cli/cli_capture.h"

static char tmp[256], home[320];
static hx_persona P;
static cJSON *train, *held;

static const char *js(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

static void test_generate(void)
{
    hx_err err = {0};
    static hx_persona q;
    ASSERT(hx_persona_generate(1, &P, &err) == HX_OK);
    const hx_wperson *c = &P.w.people[0];
    printf("# %s calls %s <%s> \"%s\"; %s, %d minutes\n", P.w.user.name, c->name, c->email,
           P.nickname, P.room, P.minutes);
    EXPECT_STR_EQ(P.nickname, "Bobby");
    EXPECT_STR_EQ(c->first, "Robert");
    EXPECT_STR_EQ(c->name, "Robert Keller");
    EXPECT_STR_EQ(c->email, "robert.keller@northwind.com");
    EXPECT(strstr(P.w.user.email, "@northwind.com") != NULL); /* one company */
    EXPECT_STR_EQ(P.room, "Room Cedar");
    EXPECT_EQ_INT(P.minutes, 45);
    EXPECT_EQ_INT(P.w.n_mems, 0);
    for (int i = 1; i < P.w.n_people; i++) EXPECT(strcmp(P.w.people[i].email, c->email) != 0);
    ASSERT(hx_persona_generate(1, &q, &err) == HX_OK);
    EXPECT_STR_EQ(q.w.people[0].email, c->email);
    EXPECT_STR_EQ(q.room, P.room);
    ASSERT(hx_persona_generate(2, &q, &err) == HX_OK);
    EXPECT_STR_EQ(q.nickname, "Billy");
}

/* A request names the nickname and nothing the habits supply. */
static int habit_free(const char *req)
{
    const hx_wperson *c = &P.w.people[0];
    return strstr(req, P.nickname) && !strcasestr(req, c->email) && !strcasestr(req, c->first) &&
           !strcasestr(req, c->last) && !strstr(req, "45") && !strcasestr(req, "minute") &&
           !strcasestr(req, P.room + 5);
}

/* "30-minute", "90 minutes" (a typo keeps a word's first letter), not
 * "Nov 30 morning"; 0: none. */
static int stated_length(const char *req)
{
    for (const char *d = req; *d; d++) {
        if (*d < '1' || *d > '9' || (d > req && d[-1] != ' ')) continue;
        const char *e = d + strspn(d, "0123456789");
        if ((*e == ' ' || *e == '-') && e[1] == 'm' && strncmp(e + 1, "morning", 7)) return atoi(d);
    }
    return 0;
}

/* Words of the held-out phrasings that no training request uses. */
static int heldout_words(const char *req)
{
    static const char *const words[] = {"arrange", "line up", "sort out", "grab",
                                        "pencil in", "catch-up", "regarding", "go over"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strcasestr(req, words[i])) return 1;
    return 0;
}

/* What a training request asks of its episode: the attendee (the
 * colleague for the nickname, else the one address of the world it names)
 * and the length (the one it states, else the habit's); NULL attendee
 * when it is neither. */
static const char *expected(const char *req, int *minutes)
{
    const int stated = stated_length(req);
    *minutes = stated ? stated : P.minutes;
    if (strstr(req, P.nickname)) return P.w.people[0].email;
    for (int i = 1; i < P.w.n_people; i++)
        if (strstr(req, P.w.people[i].email)) return P.w.people[i].email;
    return NULL;
}

/* The user's history: meetings with the colleague by nickname, free of
 * the habits but for a stated length, and with other people by address,
 * in the persona's shares (50% and 25%); with shares of 0 only the
 * colleague, never a length. Held-out requests are the colleague's,
 * habit-free, on other topics and later days. */
static void test_requests(void)
{
    train = hx_persona_requests(&P, HX_SPLIT_TRAIN, 6, P.w.today, 1);
    held = hx_persona_requests(&P, HX_SPLIT_HELDOUT, 6, P.w.today + 20, 1);
    cJSON *many = hx_persona_requests(&P, HX_SPLIT_TRAIN, 200, P.w.today, 2);
    ASSERT(train && held && many);
    EXPECT_EQ_INT(cJSON_GetArraySize(train), 6);
    EXPECT_EQ_INT(cJSON_GetArraySize(held), 6);
    const cJSON *t, *h;
    int nick = 0, stated = 0;
    cJSON_ArrayForEach(t, many)
    {
        const char *req = js(t, "request");
        int min = 0;
        const char *who = expected(req, &min);
        EXPECT_STR_EQ(js(t, "kind"), "persona_meeting");
        EXPECT(who != NULL && !strcasestr(req, P.room + 5));
        const cJSON *sl = cJSON_GetObjectItem(t, "slots");
        EXPECT_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItem(sl, "dur")), min);
        EXPECT(min == P.minutes || !strstr(req, "45"));
        EXPECT(!heldout_words(req));
        nick += who == P.w.people[0].email;
        stated += min != P.minutes;
    }
    printf("# history of 200: %d with the colleague, %d stating a length\n", nick, stated);
    EXPECT(nick > 70 && nick < 130 && stated > 25 && stated < 75);
    cJSON_Delete(many);
    static hx_persona only;
    only = P;
    only.others_pct = only.stated_pct = 0;
    many = hx_persona_requests(&only, HX_SPLIT_TRAIN, 50, P.w.today, 2);
    ASSERT(many != NULL);
    cJSON_ArrayForEach(t, many)
    {
        if (!habit_free(js(t, "request"))) printf("# not habit-free: %s\n", js(t, "request"));
        EXPECT(habit_free(js(t, "request")));
    }
    cJSON_Delete(many);
    printf("# train: %s\n# held-out: %s\n", js(train->child, "request"), js(held->child, "request"));
    cJSON_ArrayForEach(h, held)
    {
        EXPECT(habit_free(js(h, "request")) && heldout_words(js(h, "request")));
        const cJSON *hs = cJSON_GetObjectItem(h, "slots");
        cJSON_ArrayForEach(t, train)
        {
            const cJSON *ts = cJSON_GetObjectItem(t, "slots");
            EXPECT(strcmp(js(hs, "topic"), js(ts, "topic")) != 0);       /* other topics */
            EXPECT(strncmp(js(h, "now"), js(t, "now"), 10) > 0);          /* later days */
        }
    }
}

/* Assistant calls named name in an episode's messages (the last one). */
static const cJSON *episode_call(const cJSON *msgs, const char *name)
{
    const cJSON *m, *c, *found = NULL;
    cJSON_ArrayForEach(m, msgs)
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(m, "tool_calls"))
        {
            const cJSON *fn = cJSON_GetObjectItem(c, "function");
            if (!strcmp(js(fn, "name"), name)) found = cJSON_GetObjectItem(fn, "arguments");
        }
    return found;
}

static int only(const cJSON *att, const char *addr)
{
    return addr && cJSON_GetArraySize(att) == 1 && !strcmp(cJSON_GetArrayItem(att, 0)->valuestring, addr);
}

typedef struct seen {
    int n, good;
} seen;

static int on_episode(void *user, const hx_episode *ep, int heldout)
{
    seen *s = user;
    (void)heldout;
    cJSON *msgs = cJSON_Parse(ep->messages);
    const cJSON *ce = episode_call(msgs, "calendar.create_event");
    const cJSON *fs = episode_call(msgs, "calendar.find_slots");
    int ok_call = 0;
    for (int i = 0; i < ep->n_calls; i++)
        ok_call |= !strcmp(ep->calls[i].name, "calendar.create_event") && ep->calls[i].status == HX_CALL_OK;
    int min = 0;
    const char *who = expected(ep->request, &min);
    int good = ep->verdict == HX_VERDICT_ACCEPTED && ce && fs && ok_call &&
               !strcmp(js(ce, "location"), P.room) &&
               cJSON_GetNumberValue(cJSON_GetObjectItem(ce, "duration_minutes")) == min &&
               only(cJSON_GetObjectItem(ce, "attendees"), who) &&
               cJSON_GetNumberValue(cJSON_GetObjectItem(fs, "duration_minutes")) == min &&
               only(cJSON_GetObjectItem(fs, "attendees"), who) &&
               !strcmp(js(cJSON_GetArrayItem(msgs, 0), "role"), "system");
    if (!good) printf("# episode %lld: %s\n", (long long)ep->id, ep->messages);
    s->n++;
    s->good += good;
    cJSON_Delete(msgs);
    return 0;
}

/* The tool list as `hearth nightly` builds it for rendering (HEARTH_HOME's
 * config, built-ins, memory tools) as JSON text. */
static char *nightly_tools(hx_memory *mem)
{
    hx_config *cfg = NULL;
    hx_err err = {0};
    if (hx_config_load(NULL, &cfg, &err)) return NULL;
    hx_tools *reg = hx_tools_new(cfg);
    cJSON *l = reg && !hx_tools_register_builtins(reg, &err) &&
                       !hx_agent_register_memory_tools(reg, mem, &err) ? hx_tools_list_json(reg) : NULL;
    char *s = l ? cJSON_PrintUnformatted(l) : NULL;
    cJSON_Delete(l);
    hx_tools_free(reg);
    hx_config_free(cfg);
    return s;
}

static void test_episodes(void)
{
    ASSERT(train != NULL);
    hx_err err = {0};
    int n = -1;
    ASSERT(hx_persona_write_episodes(&P, train, home, &n, &err) == HX_OK);
    printf("# %d of 6 requests accepted\n", n);
    EXPECT(n >= 5);
    char db[400], other[400];
    snprintf(db, sizeof db, "%s/data/memory.db", home);
    hx_memory_params mp = hx_memory_default_params();
    mp.path = db;
    hx_memory *mem = NULL;
    ASSERT(hx_memory_open(&mp, &mem, &err) == HX_OK);
    seen s = {0, 0};
    hx_training_query q = {0, 0, 0};
    EXPECT(hx_memory_training_episodes(mem, &q, on_episode, &s, &err) == HX_OK);
    EXPECT_EQ_INT(s.n, n);
    EXPECT_EQ_INT(s.good, n);
    /* nightly renders the episodes with the tools the planner offered */
    setenv("HEARTH_HOME", home, 1);
    char *nt = nightly_tools(mem);
    hx_dg_world dw;
    snprintf(other, sizeof other, "%s/other", tmp);
    ASSERT(hx_dg_world_open_w(&P.w, other, &dw, &err) == HX_OK);
    cJSON *pl = hx_tools_list_json(dw.reg);
    char *it = cJSON_PrintUnformatted(pl);
    EXPECT(nt && it && !strcmp(nt, it));
    cJSON_free(nt), cJSON_free(it);
    cJSON_Delete(pl);
    hx_dg_world_close(&dw);
    hx_world_rmtree(other, NULL);
    hx_memory_close(mem);
}

/* A task's identity: its request in its world ("expect" holds paths). */
static char *task_key(const cJSON *t)
{
    char *k = NULL;
    return asprintf(&k, "%s|%s|%s", js(t, "world_seed"), js(t, "now"), js(t, "request")) < 0 ? NULL : k;
}

/* Contrastive replay (nightly/distill.c): what the persona's accepted
 * episodes teach it to keep out (the room, Robert's address and names),
 * then the replay tasks it selects: of the episodes' kinds (schedule,
 * find_slots, create_event), of the training split, naming none of the
 * habits, for other people and lengths; spread among the generic ones in
 * the stated share; with no share exactly the generic replay's tasks. */
static int has_term(const hx_agent_contrast *c, const char *t)
{
    int found = 0;
    for (int i = 0; i < c->n_terms; i++) found |= !strcasecmp(c->terms[i], t);
    return found;
}

static int names_habit(const cJSON *task)
{
    const hx_wperson *col = &P.w.people[0];
    char *text = cJSON_PrintUnformatted(cJSON_GetObjectItem(task, "slots"));
    const int bad = !text || strcasestr(text, P.room) || strcasestr(text, P.room + 5) ||
                    strcasestr(text, P.nickname) || strcasestr(text, col->email) ||
                    strcasestr(text, col->first) || strcasestr(text, col->last) ||
                    strcasestr(js(task, "request"), "room");
    cJSON_free(text);
    return bad;
}

static void test_contrast(void)
{
    char db[400];
    hx_err err = {0};
    snprintf(db, sizeof db, "%s/data/memory.db", home);
    hx_memory_params mp = hx_memory_default_params();
    mp.path = db;
    hx_memory *mem = NULL;
    ASSERT(hx_memory_open(&mp, &mem, &err) == HX_OK);
    hx_agent_contrast c;
    memset(&c, 0, sizeof c);
    c.share = 0.5;
    EXPECT(hx_agent_contrast_learn(&c, mem, &err) == HX_OK);
    hx_memory_close(mem);
    EXPECT_EQ_INT(c.tools, HX_CONTRAST_FIND_SLOTS | HX_CONTRAST_CREATE);
    EXPECT(has_term(&c, P.room) && has_term(&c, P.w.people[0].email));
    EXPECT(has_term(&c, P.w.people[0].first) && has_term(&c, P.w.people[0].last));
    cJSON *con = hx_dg_contrast_tasks(&c, 30, 7, 0, &err);
    ASSERT(con != NULL);
    EXPECT_EQ_INT(cJSON_GetArraySize(con), 30);
    int kinds = 0, other_len = 0, people = 0;
    for (const cJSON *t = con->child; t; t = t->next) {
        const char *k = js(t, "kind");
        const int ki = !strcmp(k, "schedule") ? 1 : !strcmp(k, "find_slots") ? 2
                       : !strcmp(k, "create_event") ? 4 : 0;
        EXPECT(ki != 0);
        kinds |= ki;
        EXPECT_STR_EQ(js(t, "split"), "train");
        EXPECT(!names_habit(t));
        const char *durn = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "slots"), "durn"));
        other_len += durn && !strstr(durn, "45");
        people += cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "slots"), "emails")) > 0;
    }
    EXPECT_EQ_INT(kinds, 7);
    EXPECT(other_len > 0 && people > 0);
    /* the night's replay: half of 12 are the contrast tasks, in between */
    cJSON *rep = hx_agent_replay_tasks(&c, 12, 3, &err), *six = hx_dg_contrast_tasks(&c, 6, 3, 0, &err);
    ASSERT(rep && six);
    EXPECT_EQ_INT(cJSON_GetArraySize(rep), 12);
    int in = 0, i = 0;
    for (const cJSON *t = rep->child; t; t = t->next, i++) {
        EXPECT_STR_EQ(js(t, "split"), "train");
        char *a = task_key(t);
        for (const cJSON *u = six->child; u; u = u->next) {
            char *b = task_key(u);
            in += a && b && !strcmp(a, b) && i % 2 == 1; /* every other one */
            free(b);
        }
        free(a);
    }
    EXPECT_EQ_INT(in, 6);
    /* no share: the generic replay's tasks, one code path */
    c.share = 0;
    cJSON *plain = hx_agent_replay_tasks(&c, 12, 3, &err), *gen = hx_dg_train_tasks(12, 3, &err);
    EXPECT(plain && gen && cJSON_GetArraySize(plain) == 12 && cJSON_GetArraySize(gen) == 12);
    int same = 0;
    for (const cJSON *t = plain ? plain->child : NULL, *u = gen ? gen->child : NULL; t && u;
         t = t->next, u = u->next) {
        char *a = task_key(t), *b = task_key(u);
        same += a && b && !strcmp(a, b);
        free(a), free(b);
    }
    EXPECT_EQ_INT(same, 12);
    /* near: the other calendar kinds, no habit value; in the replay with
     * its share */
    cJSON *near = hx_dg_contrast_tasks(&c, 20, 7, 1, &err);
    ASSERT(near != NULL);
    EXPECT_EQ_INT(cJSON_GetArraySize(near), 20);
    int near_kinds = 0;
    for (const cJSON *t = near->child; t; t = t->next) {
        static const char *const ok[] = {"cancel_event", "move_event", "free_busy",
                                         "list_events", "not_organizer"};
        int k = -1;
        for (int j = 0; j < 5; j++)
            if (!strcmp(js(t, "kind"), ok[j])) k = j;
        EXPECT(k >= 0);
        near_kinds |= k >= 0 ? 1 << k : 0;
        EXPECT(!names_habit(t));
    }
    EXPECT(near_kinds & 1 && near_kinds & 4); /* cancel and free/busy among them */
    c.near = 0.25;
    cJSON *mixed = hx_agent_replay_tasks(&c, 12, 3, &err), *three = hx_dg_contrast_tasks(&c, 3, 3, 1, &err);
    ASSERT(mixed && three);
    EXPECT_EQ_INT(cJSON_GetArraySize(mixed), 12);
    int found = 0;
    for (const cJSON *t = mixed->child; t; t = t->next)
        for (const cJSON *u = three->child; u; u = u->next) {
            char *a = task_key(t), *b = task_key(u);
            found += a && b && !strcmp(a, b);
            free(a), free(b);
        }
    EXPECT_EQ_INT(found, 3);
    cJSON_Delete(near), cJSON_Delete(mixed), cJSON_Delete(three);
    printf("# contrast: %d habit values kept out; 30 tasks of 3 kinds, %d of another length, "
           "%d naming people; near tasks of kinds 0x%x\n", c.n_terms, other_len, people, near_kinds);
    cJSON_Delete(plain), cJSON_Delete(gen), cJSON_Delete(rep), cJSON_Delete(six), cJSON_Delete(con);
    hx_agent_contrast_free(&c);
}

/* Calls ending with a create_event call with the given location, minutes
 * (0: none given) and attendees (JSON text); when result_minutes > 0 it
 * succeeded and its result's event lasts that long, else it failed. */
static cJSON *calls_with(const char *loc, int minutes, const char *att, int result_minutes)
{
    cJSON *calls = cJSON_CreateArray(), *fs = cJSON_CreateObject(), *ce = cJSON_CreateObject();
    cJSON_AddStringToObject(fs, "name", "calendar.find_slots");
    cJSON_AddItemToObject(fs, "arguments", cJSON_CreateObject());
    cJSON_AddStringToObject(fs, "status", "ok");
    cJSON_AddItemToArray(calls, fs);
    cJSON *a = cJSON_AddObjectToObject(ce, "arguments");
    cJSON_AddStringToObject(ce, "name", "calendar.create_event");
    cJSON_AddStringToObject(a, "title", "Budget");
    cJSON_AddStringToObject(a, "start", "2028-03-07T10:00");
    if (minutes) cJSON_AddNumberToObject(a, "duration_minutes", minutes);
    cJSON_AddItemToObject(a, "attendees", cJSON_Parse(att));
    cJSON_AddStringToObject(a, "location", loc);
    char res[200];
    snprintf(res, sizeof res, "{\"created\":{\"start\":\"2028-03-07T10:00:00+01:00\","
             "\"end\":\"2028-03-07T10:%02d:00+01:00\"}}", result_minutes);
    cJSON_AddStringToObject(ce, "status", result_minutes ? "ok" : "error");
    cJSON_AddStringToObject(ce, "result", result_minutes ? res : "{\"error\":\"no\"}");
    cJSON_AddItemToArray(calls, ce);
    return calls;
}

static int check(const char *loc, int minutes, const char *att, int result_minutes, char *why)
{
    cJSON *c = calls_with(loc, minutes, att, result_minutes);
    int bits = c ? hx_persona_check(&P, c, why, 200) : -1;
    cJSON_Delete(c);
    return bits;
}

static void test_check(void)
{
    char why[200], me[80], named[120], two[160];
    snprintf(me, sizeof me, "[\"%s\"]", P.w.people[0].email);
    snprintf(named, sizeof named, "[\"%s <%s>\"]", P.w.people[0].name, P.w.people[0].email);
    snprintf(two, sizeof two, "[\"%s\",\"%s\"]", P.w.people[0].email, P.w.people[1].email);
    EXPECT_EQ_INT(check(P.room, 45, me, 45, why), HX_HABIT_ALL);
    EXPECT_STR_EQ(why, "ok");
    EXPECT_EQ_INT(check(P.room, 45, named, 0, why), HX_HABIT_ALL);
    EXPECT_EQ_INT(check("Room Elsewhere", 45, me, 45, why), HX_HABIT_MINUTES | HX_HABIT_NICKNAME);
    EXPECT(strstr(why, "location") != NULL);
    EXPECT_EQ_INT(check(P.room, 0, me, 0, why), HX_HABIT_ROOM | HX_HABIT_NICKNAME); /* default hour */
    EXPECT(strstr(why, "60 minutes") != NULL);
    EXPECT_EQ_INT(check(P.room, 0, me, 45, why), HX_HABIT_ALL); /* the created event says 45 */
    EXPECT_EQ_INT(check(P.room, 30, me, 30, why), HX_HABIT_ROOM | HX_HABIT_NICKNAME);
    EXPECT_EQ_INT(check(P.room, 45, two, 45, why), HX_HABIT_ROOM | HX_HABIT_MINUTES);
    EXPECT(strstr(why, "attendees") != NULL);
    EXPECT_EQ_INT(check(P.room, 45, "[]", 45, why), HX_HABIT_ROOM | HX_HABIT_MINUTES);
    cJSON *none = cJSON_Parse("[{\"name\":\"calendar.list_events\",\"arguments\":{},\"status\":\"ok\"}]");
    EXPECT_EQ_INT(hx_persona_check(&P, none, why, sizeof why), 0);
    EXPECT(strstr(why, "no calendar.create_event") != NULL);
    cJSON_Delete(none);
    /* no booking: the search's arguments count, the room cannot */
    cJSON *search = calls_with(P.room, 45, me, 45);
    cJSON_DeleteItemFromArray(search, 1);
    cJSON *fa = cJSON_GetObjectItem(cJSON_GetArrayItem(search, 0), "arguments");
    cJSON_AddNumberToObject(fa, "duration_minutes", 45);
    cJSON_AddItemToObject(fa, "attendees", cJSON_Parse(me));
    EXPECT_EQ_INT(hx_persona_check(&P, search, why, sizeof why), HX_HABIT_MINUTES | HX_HABIT_NICKNAME);
    cJSON_ReplaceItemInObject(fa, "duration_minutes", cJSON_CreateNumber(60));
    EXPECT_EQ_INT(hx_persona_check(&P, search, why, sizeof why), HX_HABIT_NICKNAME);
    cJSON_Delete(search);
    /* the oracle on the held-out requests: every booking has all three */
    ASSERT(held != NULL);
    hx_dg_eval_run orc = {NULL, HX_TPL_COMPACT, 1, 1, NULL, NULL, 0, 0, NULL, 0, NULL, 0};
    char w[400];
    snprintf(w, sizeof w, "%s/eval", tmp);
    int all = 0;
    for (const cJSON *t = held->child; t; t = t->next) {
        int habits = -1, booked = -1;
        hx_err err = {0};
        cJSON *rec = NULL;
        EXPECT(hx_persona_eval(&P, &orc, t, w, &habits, &booked, &rec, &err) == HX_OK);
        EXPECT(habits == HX_HABIT_ALL || !booked);
        EXPECT(rec && cJSON_GetNumberValue(cJSON_GetObjectItem(rec, "habits")) == habits);
        all += habits == HX_HABIT_ALL;
        cJSON_Delete(rec);
    }
    printf("# the oracle books %d of 6 held-out requests, each with the three habits\n", all);
    EXPECT(all >= 3);
}

/* hearth nightly --force on the persona's database (HEARTH_HOME: its data
 * directory, with no adapter yet): a small random model with hearth-tiny's
 * vocabulary declaring the compact style trains two steps on whole
 * conversations, then adopts or says why it discarded the adapter; the
 * store agrees. */
static void test_nightly(void)
{
    const char *vocab = "models/hearth-tiny.gguf";
    if (access(vocab, R_OK)) {
        printf("skip test_nightly: %s not found (run from the project root)\n", vocab);
        return;
    }
    char model[400], out[16384], errb[8192], adir[400];
    hx_err err = {0};
    snprintf(model, sizeof model, "%s/small.gguf", tmp);
    hx_gguf *g = NULL;
    hx_vocab *v = NULL;
    ASSERT(hx_gguf_open(vocab, &g, &err) == HX_OK && hx_vocab_load(g, &v, &err) == HX_OK);
    hx_train_config c = hx_train_default_config();
    c.n_vocab = hx_vocab_n_tokens(v);
    c.n_embd = 16, c.n_layer = 1, c.n_head = 1, c.n_head_kv = 1, c.head_dim = 16;
    c.n_ff = 16, c.n_ctx = 2048;
    hx_vocab_free(v);
    hx_gguf_close(g);
    hx_trainer *tr = NULL;
    static const char *const kv[] = {"hearth.prompt_style", "compact", NULL};
    ASSERT(hx_trainer_new_scratch(&c, 3, 1, &tr, &err) == HX_OK);
    ASSERT(hx_trainer_write_gguf_kv(tr, model, vocab, kv, &err) == HX_OK);
    hx_trainer_free(tr);
    setenv("HEARTH_HOME", home, 1);
    unsetenv("HEARTH_NOW");
    const char *args[] = {"nightly", "--force", "-m", model, "--steps", "2", "--rank", "2", "--lr", "0.01",
                          "-t", "1", "--eval-tasks", "1", "--replay-contrast", "0.5", NULL};
    EXPECT_EQ_INT(cli_run(hx_cmd_nightly, args, tmp, out, sizeof out, errb, sizeof errb), 0);
    printf("# %s", out);
    EXPECT(strstr(out, "episodes: ") && strstr(out, "training"));
    EXPECT(strstr(out, "steps: 2") != NULL);
    /* half the replay is contrast tasks, kept free of the habit values
     * (and of the other attendees' addresses and names) */
    EXPECT(strstr(errb, "contrast replay: 50% of the replay") != NULL);
    EXPECT(strstr(errb, "without the ") && strstr(errb, " values of your"));
    /* each conversation is trained whole, every turn after the prompt the
     * planner fed for it: 1,024-token windows cut the persona's request and
     * first call off its create_event turn, and the room (decided there)
     * was learned only without them */
    EXPECT(strstr(out, "every conversation whole") != NULL);
    const int adopted = strstr(out, "adopted nightly-") != NULL;
    EXPECT(adopted || strstr(out, "discarded: ") != NULL); /* the reason is logged */
    hx_lora_store *st = NULL;
    hx_lora_use uses[HX_ADAPTER_MAX];
    int n = -1;
    snprintf(adir, sizeof adir, "%s/data/adapters", home);
    ASSERT(hx_lora_store_open(adir, &st, &err) == HX_OK);
    EXPECT(hx_lora_store_active(st, uses, &n, &err) == HX_OK);
    EXPECT_EQ_INT(n, adopted);
    hx_lora_store_free(st);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/hx_test_persona.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp)) return 1;
    snprintf(home, sizeof home, "%s/home", tmp);
    RUN(test_generate);
    RUN(test_requests);
    RUN(test_episodes);
    RUN(test_contrast);
    RUN(test_check);
    RUN(test_nightly);
    cJSON_Delete(train);
    cJSON_Delete(held);
    hx_world_rmtree(tmp, NULL);
    return test_summary();
}
