/* test_fault.c: allocation failures swept over whole operations (SQLite's
 * discipline): a planner run with tool calls, a memory recall, a mail
 * search and the tool-call grammar's compile with a token mask, each repeated with its
 * first, second, ... allocation failing, until a run makes no failing
 * allocation: once with every later allocation failing too, once with
 * that one alone (the code goes on past it). Every failure must end as a clean
 * error or a degraded but complete result: no crash, no hang; under
 * `make asan` the leak checker sees no leak at exit. cJSON allocates
 * through the counting allocator too (cJSON_InitHooks), and so does
 * SQLite in the recall and the planner run (SQLITE_CONFIG_MALLOC). */
#include <fcntl.h>
#include <malloc.h>
#include <sqlite3.h>
#include <unistd.h>

#include "test.h"
#include "scripted.h"

/* Runs op with allocation k failing (sticky: and every later one), for
 * k = 1, 2, ... until op made fewer than k allocations (the run that saw
 * no failure); each run's result is checked by op itself. Returns the
 * number of allocations of a whole run. */
static long sweep_mode(int (*op)(void *ctx, int clean), void *ctx, const char *what, int sticky)
{
    long k = 1;
    int failures = 0;
    /* the warnings of the runs (an audit record not written, ...) go to
     * /dev/null: thousands of lines that say what was injected */
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    for (;; k++) {
        hx_fault_alloc(k, sticky);
        int rc = op(ctx, 0);
        long made = hx_fault_alloc_count();
        hx_fault_alloc(0, 0);
        if (made < k) {
            EXPECT_EQ_INT(rc, HX_OK); /* nothing failed: it must have worked */
            break;
        }
        failures += rc != HX_OK;
    }
    fflush(stderr);
    if (saved >= 0) dup2(saved, 2), close(saved);
    if (null >= 0) close(null);
    printf("# %s, %s: %ld allocations, %d of the runs failed cleanly\n", what,
           sticky ? "each and every later one failing" : "each alone failing", k - 1, failures);
    EXPECT(k > 1);
    EXPECT_EQ_INT(op(ctx, 1), HX_OK); /* and after the sweep all is well */
    return k - 1;
}

/* Both sweeps of op. */
static void sweep(int (*op)(void *ctx, int clean), void *ctx, const char *what)
{
    sweep_mode(op, ctx, what, 1);
    sweep_mode(op, ctx, what, 0);
}

/* ---- a recall over a few memories, SQLite's allocations counted too ---- */
static void *sq_malloc(int n) { return hx_malloc((size_t)n); }
static void sq_free(void *p) { free(p); }
static void *sq_realloc(void *p, int n) { return hx_realloc(p, (size_t)n); }
static int sq_size(void *p) { return (int)malloc_usable_size(p); }
static int sq_roundup(int n) { return (n + 7) & ~7; }
static int sq_init(void *u) { (void)u; return SQLITE_OK; }
static void sq_shutdown(void *u) { (void)u; }
static const sqlite3_mem_methods counting = {sq_malloc, sq_free, sq_realloc, sq_size,
                                             sq_roundup, sq_init, sq_shutdown, NULL};

static int recall_op(void *ctx, int clean)
{
    hx_memory *m = ctx;
    hx_recall_params rp = hx_recall_default_params();
    char *section = NULL;
    hx_mem_list *items = NULL;
    hx_err err = {0};
    int rc = hx_memory_recall(m, "when is the budget review with Bob?", &rp, &section, &items,
                              &err);
    if (!rc && clean) EXPECT(section && strstr(section, "budget review") != NULL);
    if (rc && clean) printf("# recall: %s\n", err.msg);
    free(section);
    hx_mem_list_free(items);
    return rc;
}

static void test_recall(void)
{
    char dir[] = "/tmp/hx_fault_XXXXXX", db[64];
    ASSERT(mkdtemp(dir));
    sqlite3_mem_methods was;
    ASSERT(sqlite3_shutdown() == SQLITE_OK && sqlite3_config(SQLITE_CONFIG_GETMALLOC, &was) == SQLITE_OK);
    ASSERT(sqlite3_config(SQLITE_CONFIG_MALLOC, &counting) == SQLITE_OK);
    snprintf(db, sizeof db, "%s/memory.db", dir);
    hx_memory_params mp = hx_memory_default_params();
    mp.path = db;
    mp.sync_full = 0;
    hx_memory *m = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(&mp, &m, &err) == HX_OK);
    const char *facts[] = {"The budget review with Bob is on Friday at 10",
                           "Bob's email is bob@example.org", "Alice prefers morning meetings",
                           "The team offsite is in Lisbon in March"};
    for (int i = 0; i < 4; i++) {
        hx_mem_new mn = {.kind = "fact", .text = facts[i]};
        ASSERT(hx_memory_remember(m, &mn, NULL, NULL, &err) == HX_OK);
    }
    sweep(recall_op, m, "recall");
    hx_memory_close(m);
    EXPECT(sqlite3_shutdown() == SQLITE_OK && sqlite3_config(SQLITE_CONFIG_MALLOC, &was) == SQLITE_OK);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

/* ---- a planner run: two calls in one turn, then the answer ---- */
typedef struct planner_case {
    world w;
} planner_case;

static int planner_op(void *ctx, int clean)
{
    planner_case *c = ctx;
    const char *turns[] = {
        "<tool_call>{\"name\": \"calendar.list_events\", \"arguments\": "
        "{\"range\": \"tomorrow\"}}</tool_call>\n<tool_call>{\"name\": \"mail.search\", "
        "\"arguments\": {\"text\": \"budget\"}}</tool_call>",
        "You have two events tomorrow and one mail about the budget."};
    scripted_source ss;
    hx_source src = scripted(&ss, turns, 2);
    hx_planner_deps d = world_deps(&c->w, &src);
    hx_planner_params pp = hx_planner_default_params();
    hx_planner *pl = hx_planner_new(&d, &pp);
    cJSON *trace = NULL;
    hx_err err = {0};
    int rc = pl ? hx_planner_run(pl, "what is on tomorrow, and any mail about the budget?",
                                 NULL, &trace, &err)
                : HX_ERR_NOMEM;
    if (!rc && !trace) rc = HX_ERR_NOMEM; /* the trace is the run's record */
    if (!rc && clean) {
        EXPECT_STR_EQ(tstr(trace, "status"), "answered");
        EXPECT_STR_EQ(call_status(trace, 0), "ok");
        EXPECT_STR_EQ(call_status(trace, 1), "ok");
    }
    if (rc && rc != HX_ERR_NOMEM && !strstr(err.msg, "memory"))
        printf("# planner failed otherwise: %s (%s)\n", hx_rc_str(rc), err.msg);
    cJSON_Delete(trace);
    hx_planner_free(pl);
    hx_source_free(&src);
    return rc;
}

static void test_planner_run(void)
{
    planner_case c;
    sqlite3_mem_methods was;
    ASSERT(sqlite3_shutdown() == SQLITE_OK && sqlite3_config(SQLITE_CONFIG_GETMALLOC, &was) == SQLITE_OK);
    ASSERT(sqlite3_config(SQLITE_CONFIG_MALLOC, &counting) == SQLITE_OK);
    ASSERT(world_open(&c.w, 0, 0, 0));
    ASSERT(planner_op(&c, 1) == HX_OK); /* the tools' caches warm, the index built */
    sweep(planner_op, &c, "planner run");
    world_close(&c.w);
    EXPECT(sqlite3_shutdown() == SQLITE_OK && sqlite3_config(SQLITE_CONFIG_MALLOC, &was) == SQLITE_OK);
}

/* ---- mail.search: a whole result or an error (a search cut short by a
 * failed step is not fewer messages) ---- */
typedef struct mail_case {
    world w;
    int n;       /* messages of the clean run */
    double total;
} mail_case;

static int mail_op(void *ctx, int clean)
{
    mail_case *c = ctx;
    cJSON *args = cJSON_Parse("{\"text\": \"budget\"}"), *res = NULL;
    hx_err err = {0};
    int rc = args ? hx_tools_call(c->w.reg, "mail.search", args, &res, &err) : HX_ERR_NOMEM;
    const int n = cJSON_GetArraySize(cJSON_GetObjectItem(res, "messages"));
    const double total = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total"));
    if (!rc && clean) c->n = n, c->total = total;
    if (!rc && !clean) {
        EXPECT_EQ_INT(n, c->n);
        EXPECT(total == c->total);
    }
    cJSON_Delete(args);
    cJSON_Delete(res);
    return rc;
}

static void test_mail_search(void)
{
    mail_case c = {0};
    sqlite3_mem_methods was;
    ASSERT(sqlite3_shutdown() == SQLITE_OK && sqlite3_config(SQLITE_CONFIG_GETMALLOC, &was) == SQLITE_OK);
    ASSERT(sqlite3_config(SQLITE_CONFIG_MALLOC, &counting) == SQLITE_OK);
    ASSERT(world_open(&c.w, 0, 0, 0));
    ASSERT(mail_op(&c, 1) == HX_OK); /* the index built, the whole result known */
    EXPECT(c.n > 0 && c.total >= c.n);
    sweep(mail_op, &c, "mail search");
    world_close(&c.w);
    EXPECT(sqlite3_shutdown() == SQLITE_OK && sqlite3_config(SQLITE_CONFIG_MALLOC, &was) == SQLITE_OK);
}

/* ---- the tool-call grammar of the built-in tools, and a mask ---- */
typedef struct grammar_case {
    hx_tool_spec *specs;
    int n;
    hx_gvocab *gv;
} grammar_case;

static int grammar_op(void *ctx, int clean)
{
    grammar_case *c = ctx;
    hx_grammar_params gp = hx_grammar_default_params();
    hx_grammar *g = NULL;
    hx_err err = {0};
    int rc = hx_grammar_tool_calls(c->specs, c->n, HX_TOOLS_LAZY, &gp, &g, &err);
    hx_matcher *m = rc ? NULL : hx_matcher_new(g, c->gv);
    if (!rc && !m) rc = HX_ERR_NOMEM;
    uint32_t mask[(256 + 31) / 32 + 8];
    const char *text = "Sure.<tool_call>{\"name\": \"calendar.find_slots\", \"arguments\": {";
    if (!rc) rc = hx_matcher_feed(m, text, strlen(text));
    if (!rc) rc = hx_matcher_mask(m, mask);
    if (!rc && clean) EXPECT(hx_matcher_can_continue(m));
    hx_matcher_free(m);
    hx_grammar_free(g);
    return rc;
}

static void test_grammar_compile(void)
{
    world w;
    ASSERT(world_open(&w, 0, 0, 0));
    grammar_case c = {0};
    c.n = hx_agent_tool_specs(w.reg, NULL, NULL, &c.specs);
    ASSERT(c.n > 0);
    /* a byte vocabulary: every byte a token */
    char bytes[256][2];
    const char *pieces[256];
    size_t lens[256];
    for (int i = 0; i < 256; i++) bytes[i][0] = (char)i, bytes[i][1] = 0, pieces[i] = bytes[i], lens[i] = 1;
    hx_err err = {0};
    ASSERT(hx_gvocab_new(256, pieces, lens, NULL, &c.gv, &err) == HX_OK);
    sweep(grammar_op, &c, "tool-call grammar and a mask");
    hx_gvocab_free(c.gv);
    free(c.specs);
    world_close(&w);
}

int main(void)
{
    cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = hx_malloc, .free_fn = free});
    RUN(test_grammar_compile);
    RUN(test_recall);
    RUN(test_planner_run);
    RUN(test_mail_search);
    return test_summary();
}
