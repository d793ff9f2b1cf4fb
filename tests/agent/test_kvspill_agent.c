/* test_kvspill_agent.c: a conversation over three times the KV cache's
 * memory budget, through the planner on the project's model: with the
 * spill it keeps its history and answers a question about its first
 * exchange as the unbounded run does, call for call and token for token;
 * without it (the control) the budget drops the first exchange. The three
 * runs use one world path, so tool results are alike to the byte. The
 * unbounded run asks questions in between until its text is past three
 * budgets, however long the model's answers; the other two ask the same. */
#include "test.h"
#include "agent_world.h"
#include "engine/engine.h"

#define MODEL "models/hearth-tiny.gguf"
#define BUDGET_PAGES 5 /* 320 positions of KV cache in memory */
#define TOOLS "calendar.list_events,calendar.create_event,calendar.find_free"

static const char k_first[] = "Create an event called Bike repair on Friday at 10am";
static const char *const k_between[] = {
    "When am I free on Friday?",   "What is on my calendar on Monday?",
    "When am I free on Tuesday?",  "When am I free on Wednesday?",
    "What is on my calendar on Thursday?", "When am I free on Monday?",
};
#define N_BETWEEN ((int)(sizeof k_between / sizeof *k_between))
#define MAX_BETWEEN 16 /* the questions in between, at most */
static const char k_last[] = "When is the bike repair?";
#define MAX_REQ (MAX_BETWEEN + 2)

typedef struct run_out {
    cJSON *traces[MAX_REQ]; /* each request's answer, calls, status, steps
                             * and prompt tokens */
    int n;                  /* requests asked */
    int first_kept;         /* the first request is still in the conversation */
    int tokens;             /* the conversation's message text, in tokens */
} run_out;

static int has_user(const cJSON *msgs, const char *text)
{
    for (const cJSON *m = msgs ? msgs->child : NULL; m; m = m->next)
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "role")), "user") &&
            cJSON_GetStringValue(cJSON_GetObjectItem(m, "content")) &&
            strstr(cJSON_GetStringValue(cJSON_GetObjectItem(m, "content")), text))
            return 1;
    return 0;
}

/* Tokens of the messages' text: a lower bound of the prompt, which adds
 * the template's markup. */
static int text_tokens(const hx_vocab *v, const cJSON *msgs)
{
    int n = 0;
    for (const cJSON *m = msgs ? msgs->child : NULL; m; m = m->next) {
        const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
        if (s) n -= hx_tokenize(v, s, strlen(s), NULL, 0, 0, 0);
        const cJSON *calls = cJSON_GetObjectItem(m, "tool_calls");
        char *c = calls ? cJSON_PrintUnformatted(calls) : NULL;
        if (c) n -= hx_tokenize(v, c, strlen(c), NULL, 0, 0, 0);
        free(c);
    }
    return n;
}

/* What the source's context would take for the KV pages of budget
 * (max_bytes 0: unbounded). */
static size_t budget_bytes(hx_model *m, int pages)
{
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_threads = 1;
    cp.kv_spill = 1;
    hx_ctx_mem mem;
    hx_err err = {0};
    if (hx_ctx_memory(m, &cp, &mem, &err)) return 0;
    return mem.weights + mem.scratch + (size_t)pages * mem.kv_page;
}

/* One request through pl, its trace kept in o. */
static void ask(hx_planner *pl, const char *request, run_out *o)
{
    cJSON *t = NULL;
    hx_err err = {0};
    if (hx_planner_run(pl, request, NULL, &t, &err)) printf("# %s: %s\n", request, err.msg);
    cJSON *kept = o->traces[o->n++] = cJSON_CreateObject();
    const char *keys[] = {"answer", "calls", "status", "prompt_tokens", "steps"};
    for (int k = 0; t && k < 5; k++)
        cJSON_AddItemToObject(kept, keys[k], cJSON_Duplicate(cJSON_GetObjectItem(t, keys[k]), 1));
    cJSON_Delete(t);
}

/* The first request, questions in between, the last one. grow_to > 0:
 * as many in between as the text needs to reach grow_to tokens (at most
 * MAX_BETWEEN), their number put in *n_between; 0: *n_between of them. */
static void ask_all(hx_planner *pl, const hx_vocab *v, int grow_to, int *n_between, run_out *o)
{
    ask(pl, k_first, o);
    int i = 0;
    for (; grow_to ? i < MAX_BETWEEN && text_tokens(v, hx_planner_messages(pl)) < grow_to : i < *n_between; i++)
        ask(pl, k_between[i % N_BETWEEN], o);
    *n_between = i;
    ask(pl, k_last, o);
}

/* The conversation in a fresh world, one planner over all requests. */
static int converse(hx_model *m, size_t max_bytes, int no_spill, int grow_to, int *n_between,
                    run_out *o)
{
    memset(o, 0, sizeof *o);
    world w;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/hx_kvspill_agent_%d", (int)getpid());
    if (!world_open_at(&w, dir, 1, 0, 0)) return -1;
    const int family = hx_tpl_detect(hx_model_gguf(m), hx_model_vocab(m));
    hx_tool_spec *specs;
    int n = hx_agent_tool_specs(w.reg, TOOLS, NULL, &specs);
    hx_source_engine_params ep = hx_source_engine_default_params();
    hx_source_engine_style(&ep, family, m);
    ep.n_threads = 1;
    ep.max_bytes = max_bytes;
    ep.no_kv_spill = no_spill;
    hx_source src;
    hx_err err = {0};
    int rc = n < 0 ? HX_ERR_NOMEM : hx_source_engine_new(m, specs, n, &ep, &src, &err);
    free(specs);
    if (rc) {
        printf("# source: %s\n", err.msg);
        world_close(&w);
        return -1;
    }
    hx_planner_params pp = hx_dg_planner_params(family);
    pp.recall_budget = 0;
    pp.tools = TOOLS;
    hx_planner_deps d = world_deps(&w, &src);
    hx_planner *pl = hx_planner_new(&d, &pp);
    if (pl) {
        ask_all(pl, hx_model_vocab(m), grow_to, n_between, o);
        o->first_kept = has_user(hx_planner_messages(pl), k_first);
        o->tokens = text_tokens(hx_model_vocab(m), hx_planner_messages(pl));
    }
    hx_planner_free(pl);
    hx_source_free(&src);
    world_close(&w);
    return pl ? 0 : -1;
}

static void run_free(run_out *o)
{
    for (int i = 0; i < o->n; i++) cJSON_Delete(o->traces[i]);
}

static void test_spill_keeps_history(void)
{
    if (access(MODEL, R_OK)) SKIP("%s is not here (run from the repository root)", MODEL);
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(MODEL, NULL, &m, &err) == HX_OK);
    const size_t cap = budget_bytes(m, BUDGET_PAGES);
    ASSERT(cap > 0);
    const int budget = BUDGET_PAGES * HX_KV_PAGE_POSITIONS;
    run_out full, spill, ctl;
    int n_between = 0;
    ASSERT(converse(m, 0, 0, 3 * budget, &n_between, &full) == 0);
    ASSERT(converse(m, cap, 0, 0, &n_between, &spill) == 0);
    ASSERT(converse(m, cap, 1, 0, &n_between, &ctl) == 0);
    char *last = cJSON_PrintUnformatted(spill.traces[spill.n - 1]);
    printf("# %d exchanges (%d in between), at least %d tokens of text, KV budget %d positions "
           "(%.1f x); last answer %s\n", spill.n, n_between, spill.tokens, budget,
           (double)spill.tokens / budget, last);
    free(last);
    EXPECT(spill.tokens >= 3 * budget);
    EXPECT(full.first_kept && spill.first_kept);
    EXPECT_EQ_INT(spill.n, full.n);
    int same = 0;
    for (int i = 0; i < full.n && i < spill.n; i++) same += cJSON_Compare(full.traces[i], spill.traces[i], 1);
    EXPECT_EQ_INT(same, full.n);
    /* the control: without the spill the same budget drops the first
     * exchange (and fails the requests longer than it) */
    EXPECT(!ctl.first_kept);
    run_free(&full);
    run_free(&spill);
    run_free(&ctl);
    hx_model_free(m);
}

int main(void)
{
    RUN(test_spill_keeps_history);
    return test_summary();
}
