/* test_kv_agent.c: the agent's side of the KV cache work: the planner
 * drops the oldest exchanges when the cache is full, the engine source
 * stops a long prefill at a cancel, and warms its first prompt from the
 * prefix cache on disk, in the chat-token styles and the brief one, and
 * reuses nothing past a change of the prompt. */
#include <dirent.h>

#include "test.h"
#include "agent_world.h"
#include "engine/engine.h"
#include "modelfile/modelfile.h"

/* ---- a test double that is full beyond a prompt size ---- */
typedef struct small_source {
    size_t limit;     /* prompts longer than this get HX_ERR_FULL */
    int n_full, n_begin;
    size_t last_len;  /* of the last prompt that fitted */
    const char *left; /* the turn being written */
} small_source;

static int small_begin(void *ctx, const char *prompt, int choice, int *n_prompt,
                       hx_err *err)
{
    small_source *s = ctx;
    (void)choice;
    s->n_begin++;
    *n_prompt = (int)strlen(prompt) / 4;
    if (strlen(prompt) > s->limit) {
        s->n_full++;
        return hx_err_set(err, HX_ERR_FULL, "the context is full (test double)");
    }
    s->last_len = strlen(prompt);
    s->left = "Done.";
    return HX_OK;
}

static int small_next(void *ctx, hx_buf *piece, int *end, hx_err *err)
{
    small_source *s = ctx;
    (void)err;
    *end = !*s->left;
    if (*end) return HX_OK;
    hx_buf_putc(piece, *s->left++);
    return HX_OK;
}

static void small_free(void *ctx) { (void)ctx; }

static int ask(hx_planner *pl, const char *req, cJSON **trace)
{
    hx_err err = {0};
    *trace = NULL;
    int rc = hx_planner_run(pl, req, NULL, trace, &err);
    if (rc) printf("# %s: %s\n", req, err.msg);
    return rc;
}

static int has_user(const cJSON *msgs, const char *text)
{
    for (const cJSON *m = msgs->child; m; m = m->next)
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "content")), text)) return 1;
    return 0;
}

/* When the prompt no longer fits, the oldest exchanges go, the current
 * request stays; a request that cannot fit alone ends with the error. */
static void test_planner_drops_old_exchanges(void)
{
    world w;
    ASSERT(world_open(&w, 1, 0, 0));
    small_source s = {1u << 30, 0, 0, 0, ""};
    hx_source src = {.api_version = HX_SOURCE_API, .name = "small (test double)", .ctx = &s,
                     .begin = small_begin, .next = small_next, .free = small_free};
    hx_planner_deps d = world_deps(&w, &src);
    hx_planner_params pp = hx_planner_default_params();
    pp.recall_budget = 0;
    hx_planner *pl = hx_planner_new(&d, &pp);
    ASSERT(pl);
    cJSON *t = NULL;
    ASSERT(ask(pl, "first request", &t) == HX_OK);
    cJSON_Delete(t);
    ASSERT(ask(pl, "second request", &t) == HX_OK);
    cJSON_Delete(t);
    ASSERT(ask(pl, "third request", &t) == HX_OK);
    cJSON_Delete(t);
    int before = cJSON_GetArraySize(hx_planner_messages(pl));
    EXPECT_EQ_INT(before, 10); /* system + 3 x (context, user, assistant) */
    /* the fourth prompt, with three exchanges before it, no longer fits;
     * with the oldest dropped it does */
    s.limit = s.last_len + 10;
    s.n_full = 0;
    ASSERT(ask(pl, "fourth request", &t) == HX_OK);
    EXPECT(s.n_full >= 1);
    const cJSON *msgs = hx_planner_messages(pl);
    EXPECT(!has_user(msgs, "first request"));
    EXPECT(has_user(msgs, "fourth request"));
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(t, "status")), "answered");
    /* the episode holds this request's messages, not a shifted slice */
    const cJSON *em = cJSON_GetObjectItem(t, "messages");
    EXPECT(has_user(em, "fourth request"));
    EXPECT(!has_user(em, "third request"));
    cJSON_Delete(t);
    /* undo still forgets exactly the last request */
    EXPECT(hx_planner_undo(pl));
    EXPECT(!has_user(hx_planner_messages(pl), "fourth request"));
    /* a request that cannot fit even alone: the clear error */
    s.limit = 10;
    EXPECT_EQ_INT(ask(pl, "fifth", &t), HX_ERR_FULL);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(t, "status")), "error");
    cJSON_Delete(t);
    hx_planner_free(pl);
    world_close(&w);
}

/* ---- a test double with a context limit (a token is 4 bytes) ---- */
typedef struct fit_source {
    int limit;
    const char *const *turns;
    int turn, n_full, longest;
    const char *left;
} fit_source;

static int fit_count(void *ctx, const char *text)
{
    (void)ctx;
    return (int)strlen(text) / 4;
}

static int fit_limit(void *ctx) { return ((fit_source *)ctx)->limit; }

static int fit_begin(void *ctx, const char *prompt, int choice, int *n_prompt, hx_err *err)
{
    fit_source *s = ctx;
    (void)choice;
    *n_prompt = fit_count(ctx, prompt);
    if (*n_prompt > s->limit) {
        s->n_full++;
        return hx_err_set(err, HX_ERR_FULL, "the context is full (test double)");
    }
    if (*n_prompt > s->longest) s->longest = *n_prompt;
    s->left = s->turns[s->turn] ? s->turns[s->turn++] : "Done.";
    return HX_OK;
}

static int fit_next(void *ctx, hx_buf *piece, int *end, hx_err *err)
{
    fit_source *s = ctx;
    (void)err;
    *end = !*s->left;
    if (!*end) hx_buf_putc(piece, *s->left++);
    return HX_OK;
}

/* Runs the turns with a context of limit positions, answer as
 * hx_planner_params': the trace. */
static cJSON *run_fit(world *w, fit_source *s, const char *request, int answer)
{
    hx_source src = {.api_version = HX_SOURCE_API, .name = "limited (test double)", .ctx = s,
                     .begin = fit_begin, .next = fit_next, .count = fit_count,
                     .free = small_free, .limit = fit_limit};
    hx_planner_deps d = world_deps(w, &src);
    hx_planner_params pp = hx_planner_default_params();
    pp.recall_budget = 0;
    pp.answer = answer;
    hx_planner *pl = hx_planner_new(&d, &pp);
    cJSON *t = NULL;
    if (pl) ask(pl, request, &t);
    hx_planner_free(pl);
    return t;
}

static const char *fed_result(const cJSON *trace, int i)
{
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(trace, "calls"), i);
    return cJSON_GetStringValue(cJSON_GetObjectItem(c, "result"));
}

/* A result longer than the room the context has left is cut, says how
 * many were left out and where the rest starts, and the request goes on
 * to its answer; with room, nothing is cut. */
static void test_result_cut_to_fit(void)
{
    world w;
    ASSERT(world_open(&w, 1, 0, 0));
    const char *const turns[] = {
        "<tool_call>{\"name\": \"calendar.list_events\", \"arguments\": "
        "{\"start\": \"2026-11-01\", \"end\": \"2027-02-28\"}}</tool_call>",
        "Done.", NULL};
    fit_source s = {.limit = 1 << 20, .turns = turns};
    cJSON *t = run_fit(&w, &s, "what is on my calendar this winter?", HX_ANSWER_MODEL);
    ASSERT(t);
    char *full = hx_strdup(fed_result(t, 0));
    ASSERT(full && strstr(full, "\"events\""));
    EXPECT(!strstr(full, "not_shown"));
    int whole = (int)strlen(full) / 4, prompt0 = s.longest - whole;
    cJSON_Delete(t);
    /* room for about a third of it */
    fit_source small = {.limit = prompt0 + whole / 3 + 256, .turns = turns};
    t = run_fit(&w, &small, "what is on my calendar this winter?", HX_ANSWER_MODEL);
    ASSERT(t);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(t, "status")), "answered");
    const char *cut = fed_result(t, 0);
    ASSERT(cut);
    EXPECT(strlen(cut) < strlen(full) / 2);
    EXPECT(strstr(cut, "more events not shown") != NULL);
    EXPECT(strstr(cut, "call calendar.list_events again with \\\"start\\\"") != NULL);
    EXPECT_EQ_INT(small.n_full, 0);
    EXPECT(small.longest <= small.limit - 128); /* room left for the next turn */
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(t, "calls"), 0);
    EXPECT(!cJSON_GetObjectItem(c0, "result_whole")); /* the model's answer keeps none */
    cJSON_Delete(t);
    /* a results answer says all the call returned, not only what the
     * context kept */
    fit_source res = {.limit = small.limit, .turns = turns};
    t = run_fit(&w, &res, "what is on my calendar this winter?", HX_ANSWER_RESULTS);
    ASSERT(t);
    c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(t, "calls"), 0);
    const char *kept = cJSON_GetStringValue(cJSON_GetObjectItem(c0, "result_whole"));
    cJSON *fj = cJSON_Parse(full), *kj = cJSON_Parse(kept ? kept : "");
    const int n_events = cJSON_GetArraySize(cJSON_GetObjectItem(fj, "events"));
    EXPECT(n_events > 3 && cJSON_GetArraySize(cJSON_GetObjectItem(kj, "events")) == n_events);
    const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(t, "answer"));
    int n_on = 0, n_cancelled = 0; /* "134 events (and 1 cancelled):", by the tool's count */
    if (a && sscanf(a, "%d events (and %d cancelled)", &n_on, &n_cancelled) < 1) n_on = -1;
    const int found = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(fj, "count")) +
                      (int)cJSON_GetNumberValue(cJSON_GetObjectItem(fj, "cancelled"));
    EXPECT_EQ_INT(n_on + n_cancelled, found);
    EXPECT(found > n_events && a && strstr(a, " more not listed)")); /* the tool's limit, said */
    EXPECT(a && !strstr(a, "not shown"));
    cJSON_Delete(fj);
    cJSON_Delete(kj);
    cJSON_Delete(t);
    free(full);
    world_close(&w);
}

/* A long text is cut at its beginning, and files.read says from which
 * offset to read on. */
static void test_text_cut_to_fit(void)
{
    world w;
    ASSERT(world_open(&w, 1, 0, 0));
    char path[400];
    snprintf(path, sizeof path, "%s/world/files/long.txt", w.dir);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    for (int i = 0; i < 4000; i++) fprintf(f, "line %d of a long note\n", i);
    fclose(f);
    const char *const turns[] = {
        "<tool_call>{\"name\": \"files.read\", \"arguments\": {\"path\": \"long.txt\"}}</tool_call>",
        "Done.", NULL};
    fit_source s = {.limit = 6000, .turns = turns};
    cJSON *t = run_fit(&w, &s, "read my long note", HX_ANSWER_MODEL);
    ASSERT(t);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(t, "status")), "answered");
    const char *cut = fed_result(t, 0);
    ASSERT(cut);
    EXPECT(strstr(cut, "line 0 of a long note") != NULL);
    EXPECT(strstr(cut, "call files.read again with \\\"offset\\\": ") != NULL);
    EXPECT_EQ_INT(s.n_full, 0);
    cJSON_Delete(t);
    world_close(&w);
}

/* ---- the engine source on a random-weight model with a real tokenizer ---- */
static const char *g_model;

static const char *model_path(void)
{
    if (g_model) return g_model;
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return NULL;
    static char path[256];
    snprintf(path, sizeof path, "/tmp/hx_test_kv_agent_%d.gguf", (int)getpid());
    hx_mkmodel_params p = tiny_model_params("qwen3", vocab, 2);
    p.ftype = "Q8_0";
    hx_err err = {0};
    if (hx_mkmodel_write(&p, path, &err)) {
        printf("# mkmodel: %s\n", err.msg);
        return NULL;
    }
    return g_model = path;
}

static int g_polls, g_stop_after;
static int stop_after(void *user)
{
    (void)user;
    return ++g_polls > g_stop_after;
}

static hx_source engine_source(hx_model *m, int prefix_cache, int (*cancel)(void *))
{
    hx_source_engine_params ep = hx_source_engine_default_params();
    ep.n_ctx = 8192;
    ep.n_threads = 2;
    ep.prefix_cache = prefix_cache;
    ep.cancelled = cancel;
    hx_source src;
    hx_err err = {0};
    if (hx_source_engine_new(m, NULL, 0, &ep, &src, &err)) {
        printf("# source: %s\n", err.msg);
        memset(&src, 0, sizeof src);
    }
    return src;
}

/* A long prompt (thousands of tokens) is cancelled between slices: the
 * source stops after the slices the cancel allowed, no more. */
static void test_cancel_long_prefill(void)
{
    const char *path = model_path();
    if (!path) return;
    hx_model_params mp = hx_model_default_params();
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(path, &mp, &m, &err) == HX_OK);
    hx_source src = engine_source(m, 0, stop_after);
    ASSERT(src.ctx);
    hx_buf p;
    hx_buf_init(&p);
    for (int i = 0; i < 600; i++) hx_buf_printf(&p, "word%d and ", i);
    g_polls = 0;
    g_stop_after = 3;
    int n = 0;
    EXPECT_EQ_INT(src.begin(src.ctx, p.data, HX_CHOICE_NONE, &n, &err), HX_ERR_CANCELLED);
    EXPECT_EQ_INT(g_polls, 4); /* checked before each slice: stopped at the 4th */
    EXPECT(strstr(err.msg, "cancelled") != NULL);
    /* the next turn goes on from the 3 slices cached */
    g_stop_after = 1 << 30;
    g_polls = 0;
    EXPECT_EQ_INT(src.begin(src.ctx, p.data, HX_CHOICE_NONE, &n, &err), HX_OK);
    EXPECT(n > 2000);
    EXPECT_EQ_INT(g_polls, (n - 192) / 64); /* a short tail rides with the last slice */
    hx_buf_free(&p);
    hx_source_free(&src);
    hx_model_free(m);
}

/* Greedy text of a turn after prompt (n tokens at most); marks: the
 * template's, or NULL. */
static int greedy(hx_source *src, const char *prompt, const hx_tpl_marks *marks, int n,
                  hx_buf *out)
{
    hx_err err = {0};
    int np = 0, end = 0;
    int rc = marks ? src->begin_marked(src->ctx, prompt, marks, HX_CHOICE_NONE, &np, &err)
                   : src->begin(src->ctx, prompt, HX_CHOICE_NONE, &np, &err);
    for (int i = 0; i < n && !rc && !end; i++) rc = src->next(src->ctx, out, &end, &err);
    if (rc) printf("# greedy: %s\n", err.msg);
    return rc;
}

static int cache_files(const char *home)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache/prefix", home);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".kv") != NULL;
    if (d) closedir(d);
    return n;
}

/* The random model loaded into *m and a HEARTH_HOME in *w; 0 (skipped or
 * failed, said) if either cannot be had. */
static int open_model_home(world *w, hx_model **m)
{
    const char *path = model_path();
    if (!path) return 0;
    hx_model_params mp = hx_model_default_params();
    hx_err err = {0};
    int ok = world_open(w, 1, 0, 0);
    EXPECT(ok);
    if (!ok) return 0;
    ok = hx_model_load(path, &mp, m, &err) == HX_OK;
    EXPECT(ok);
    if (!ok) {
        printf("# load: %s\n", err.msg);
        world_close(w);
    }
    return ok;
}

/* A new source (a new process) warmed from the prefix cache at home
 * writes after prompt what a cold one writes, and the cache holds one
 * file: the head was not written again. */
static void expect_warm_as_cold(hx_model *m, const char *home, const char *prompt,
                                const hx_tpl_marks *marks)
{
    hx_buf b, c;
    hx_buf_init(&b);
    hx_buf_init(&c);
    hx_source warm = engine_source(m, 1, NULL), cold = engine_source(m, 0, NULL);
    ASSERT(warm.ctx && cold.ctx);
    ASSERT(greedy(&warm, prompt, marks, 8, &b) == HX_OK);
    ASSERT(greedy(&cold, prompt, marks, 8, &c) == HX_OK);
    EXPECT(b.len > 0);
    EXPECT_STR_EQ(b.data, c.data);
    EXPECT_EQ_INT(cache_files(home), 1);
    hx_source_free(&warm);
    hx_source_free(&cold);
    hx_buf_free(&b);
    hx_buf_free(&c);
}

#define SYS "<|im_start|>system\nYou are Hearth. Tools: calendar.find_free, mail.search, " \
            "files.search, memory.remember, and a longer description of each.<|im_end|>\n"
/* Two requests after it. */
#define SLOT_PROMPT SYS "<|im_start|>user\nfind a slot<|im_end|>\n<|im_start|>assistant\n"
#define MAIL_PROMPT SYS "<|im_start|>user\nsearch my mail<|im_end|>\n<|im_start|>assistant\n"

/* The first prompt of a process saves the system message's KV to disk;
 * a new source (a new process) loads it and writes the same text as a
 * cold one. */
static void test_prefix_cache_across_sources(void)
{
    world w; /* a HEARTH_HOME: the cache goes to its cache/prefix */
    hx_model *m = NULL;
    if (!open_model_home(&w, &m)) return;
    const char *p1 = SLOT_PROMPT, *p2 = MAIL_PROMPT;
    hx_buf a;
    hx_buf_init(&a);
    hx_source s1 = engine_source(m, 1, NULL);
    ASSERT(s1.ctx);
    ASSERT(greedy(&s1, p1, NULL, 8, &a) == HX_OK);
    hx_source_free(&s1);
    EXPECT_EQ_INT(cache_files(w.dir), 1);
    expect_warm_as_cold(m, w.dir, p2, NULL);
    hx_buf_free(&a);
    hx_model_free(m);
    world_close(&w);
}

/* The bytes of the one prefix file in dir into *out (owned); 0 if there
 * is not exactly one. */
static int prefix_file(const char *dir, char **out, size_t *len)
{
    DIR *d = opendir(dir);
    char path[600] = "";
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".kv") && ++n == 1)
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    return n == 1 && hx_read_file(path, 1 << 30, out, len, NULL) == HX_OK;
}

/* What the prefix cache held when the head was saved right after the
 * prefill: a context prefilled with prompt as the source does it (slices
 * of 64, the whole prompt) and its head (up to the first end-of-turn
 * token) saved at once into dir. */
static void save_after_prefill(hx_model *m, const char *prompt, const char *dir)
{
    hx_err err = {0};
    int32_t *t = NULL;
    const int n = hx_source_tokenize(hx_model_vocab(m), prompt, &t, &err);
    ASSERT(n > 0);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_ctx = 8192;
    cp.n_threads = 2;
    cp.kv_spill = 1;
    hx_ctx *c = NULL;
    ASSERT(hx_ctx_new(m, &cp, &c, &err) == HX_OK);
    hx_prefill_params pp = hx_prefill_default_params();
    pp.slice = 64;
    pp.whole_prompt = 1;
    int done = 0, head = 0;
    EXPECT(hx_prefill(c, t, n, &pp, &done) == HX_OK);
    while (head < n && !hx_vocab_is_eog(hx_model_vocab(m), t[head])) head++;
    EXPECT(head < n);
    EXPECT(hx_ctx_prefix_save(c, dir, t, head + 1, 0) == HX_OK);
    hx_ctx_free(c);
    free(t);
}

/* A cold turn saves its head to the prefix cache after its first token,
 * when the turn ends: nothing on disk at the first token (the timing has
 * no save yet), one file once the turn ended, byte for byte the file a
 * save right after the prefill writes. */
static void test_prefix_saved_after_first_token(void)
{
    world w;
    hx_model *m = NULL;
    if (!open_model_home(&w, &m)) return;
    hx_source s = engine_source(m, 1, NULL);
    ASSERT(s.ctx);
    hx_err err = {0};
    hx_buf piece;
    hx_buf_init(&piece);
    hx_turn_timing t;
    int np = 0, end = 0;
    ASSERT(s.begin(s.ctx, SLOT_PROMPT, HX_CHOICE_NONE, &np, &err) == HX_OK);
    ASSERT(s.next(s.ctx, &piece, &end, &err) == HX_OK);
    hx_source_engine_timing(&s, &t);
    EXPECT(t.first_ms > 0 && t.save_ms == 0);
    EXPECT_EQ_INT(cache_files(w.dir), 0);
    for (int i = 0; i < 6 && !end; i++) EXPECT(s.next(s.ctx, &piece, &end, &err) == HX_OK);
    hx_source_engine_end_turn(&s);
    hx_source_engine_timing(&s, &t);
    EXPECT(t.save_ms > 0);
    EXPECT_EQ_INT(cache_files(w.dir), 1);
    char dir[300], old[320];
    snprintf(dir, sizeof dir, "%s/cache/prefix", w.dir);
    snprintf(old, sizeof old, "%s/after-prefill", w.dir);
    save_after_prefill(m, SLOT_PROMPT, old);
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    EXPECT(prefix_file(dir, &a, &na) && prefix_file(old, &b, &nb));
    EXPECT(a && b && na == nb && na > 0 && !memcmp(a, b, na));
    free(a);
    free(b);
    hx_buf_free(&piece);
    hx_source_free(&s);
    hx_model_free(m);
    world_close(&w);
}

/* A prefill cancelled after its head's positions were cached saves no
 * head, not at the next turn's start nor when the source goes; nor does a
 * turn whose prefill completed when Ctrl-C came after its first token (the
 * process ends at once); control: the same prompt prefilled to its end
 * saves it when its turn ends. */
static void test_cancelled_prefill_saves_nothing(void)
{
    world w;
    hx_model *m = NULL;
    if (!open_model_home(&w, &m)) return;
    hx_source s = engine_source(m, 1, stop_after);
    ASSERT(s.ctx);
    hx_buf p;
    hx_buf_init(&p);
    hx_buf_printf(&p, SYS "<|im_start|>user\n");
    for (int i = 0; i < 400; i++) hx_buf_printf(&p, "word%d and ", i);
    hx_buf_printf(&p, "<|im_end|>\n<|im_start|>assistant\n");
    hx_err err = {0};
    int n = 0;
    g_polls = 0;
    g_stop_after = 2; /* 128 positions: the head's are among them */
    EXPECT_EQ_INT(s.begin(s.ctx, p.data, HX_CHOICE_NONE, &n, &err), HX_ERR_CANCELLED);
    hx_source_engine_end_turn(&s);
    EXPECT_EQ_INT(cache_files(w.dir), 0);
    g_stop_after = 1 << 30;
    hx_source_free(&s);
    EXPECT_EQ_INT(cache_files(w.dir), 0);
    s = engine_source(m, 1, stop_after);
    ASSERT(s.ctx);
    hx_buf piece;
    hx_buf_init(&piece);
    int end = 0;
    EXPECT_EQ_INT(s.begin(s.ctx, p.data, HX_CHOICE_NONE, &n, &err), HX_OK);
    EXPECT_EQ_INT(s.next(s.ctx, &piece, &end, &err), HX_OK);
    g_polls = g_stop_after = 0; /* Ctrl-C */
    hx_source_engine_end_turn(&s);
    hx_source_free(&s);
    EXPECT_EQ_INT(cache_files(w.dir), 0);
    hx_buf_free(&piece);
    g_stop_after = 1 << 30;
    s = engine_source(m, 1, stop_after);
    ASSERT(s.ctx);
    EXPECT_EQ_INT(s.begin(s.ctx, p.data, HX_CHOICE_NONE, &n, &err), HX_OK);
    EXPECT_EQ_INT(cache_files(w.dir), 0);
    hx_source_engine_end_turn(&s);
    EXPECT_EQ_INT(cache_files(w.dir), 1);
    hx_source_free(&s);
    hx_buf_free(&p);
    hx_model_free(m);
    world_close(&w);
}

/* Greedy text of prompt from src (8 tokens), and the turn's timing. */
static void turn_text(hx_source *src, const char *prompt, hx_buf *out, hx_turn_timing *tm)
{
    out->len = 0;
    if (out->data) out->data[0] = 0;
    EXPECT(greedy(src, prompt, NULL, 8, out) == HX_OK);
    hx_source_engine_timing(src, tm);
}

/* Bytes two strings share from their start. */
static size_t common_bytes(const char *a, const char *b)
{
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return i;
}

/* A warm turn reuses what it shares with the cached prompt and writes what
 * a cold source writes; a prompt changed inside its system message reuses
 * nothing past the change, in memory and from the prefix cache on disk
 * (whose file holds the old system message), and writes what a cold
 * source writes on it. Control: the unchanged prompt reuses the whole
 * system message. */
static void test_reuse_stops_at_a_change(void)
{
    world w; /* a HEARTH_HOME: the cache goes to its cache/prefix */
    hx_model *m = NULL;
    if (!open_model_home(&w, &m)) return;
    const char *p1 = SLOT_PROMPT, *p2 = MAIL_PROMPT;
    char *p3 = hx_strdup(p2);
    ASSERT(p3);
    char *at = strstr(p3, "files.search");
    ASSERT(at);
    memcpy(at, "files.delete", 12); /* the tool list changed */
    hx_buf got, want;
    hx_buf_init(&got);
    hx_buf_init(&want);
    hx_turn_timing t, c;
    hx_source warm = engine_source(m, 1, NULL), cold = engine_source(m, 0, NULL);
    ASSERT(warm.ctx && cold.ctx);
    turn_text(&warm, p1, &got, &t); /* writes the system message's prefix file */
    EXPECT_EQ_INT(t.n_reused, 0);
    turn_text(&warm, p2, &got, &t); /* control: in memory, all of SYS */
    turn_text(&cold, p2, &want, &c);
    EXPECT(t.n_reused >= c.n_prompt - 12 && t.n_loaded == 0);
    EXPECT_STR_EQ(got.data, want.data);
    hx_source_free(&cold);
    const int32_t n_same = hx_tokenize(hx_model_vocab(m), p2, common_bytes(p2, p3), NULL, 0, 0, 1);
    const int same = n_same < 0 ? -n_same : n_same;
    turn_text(&warm, p3, &got, &t); /* in memory: up to the change */
    cold = engine_source(m, 0, NULL);
    ASSERT(cold.ctx);
    turn_text(&cold, p3, &want, &c);
    EXPECT(t.n_reused > 0 && t.n_reused <= same);
    EXPECT_STR_EQ(got.data, want.data);
    hx_source_free(&warm);
    warm = engine_source(m, 1, NULL); /* a new process: the file holds SYS */
    ASSERT(warm.ctx);
    turn_text(&warm, p3, &got, &t);
    EXPECT(t.n_loaded > 0 && t.n_loaded <= same);
    EXPECT_STR_EQ(got.data, want.data);
    hx_source_free(&warm);
    hx_source_free(&cold);
    hx_buf_free(&got);
    hx_buf_free(&want);
    free(p3);
    hx_model_free(m);
    world_close(&w);
}

/* A brief-style prompt (compact markers: no end-of-turn token) as the
 * planner renders it, with the request's own clock line: marks get the
 * head's end. */
static char *brief_prompt(const char *now, const char *request, hx_tpl_marks *marks)
{
    cJSON *msgs = cJSON_CreateArray(), *tools = cJSON_Parse(
        "[{\"type\": \"function\", \"function\": {\"name\": \"calendar.list_events\", "
        "\"parameters\": {\"type\": \"object\", \"properties\": {\"range\": "
        "{\"type\": \"string\"}}}}}]");
    const char *roles[] = {"system", "system", "user"};
    const char *texts[] = {"You are Hearth, on the user's own device.\nUser: Ann <ann@x.org>", now,
                           request};
    for (int i = 0; i < 3; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", roles[i]);
        cJSON_AddStringToObject(m, "content", texts[i]);
        cJSON_AddItemToArray(msgs, m);
    }
    hx_buf b;
    hx_buf_init(&b);
    int rc = hx_tpl_render_marked(HX_TPL_BRIEF, msgs, tools, NULL, &b, marks);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    return rc ? NULL : hx_buf_steal(&b, NULL);
}

/* The brief and compact styles have no end-of-turn token after the tool
 * list: the template marks where the head (tool list and system text)
 * ends, and the source caches it there; a request of another process
 * (another clock line) reuses it and writes what a cold source writes.
 * Control: the same prompt unmarked has no head to cache. */
static void test_prefix_cache_brief(void)
{
    world w; /* a HEARTH_HOME: the cache goes to its cache/prefix */
    hx_model *m = NULL;
    hx_err err = {0};
    if (!open_model_home(&w, &m)) return;
    hx_tpl_marks k1 = {0}, k2 = {0};
    char *p1 = brief_prompt("Now: 2026-12-01T09:00", "find a slot", &k1);
    char *p2 = brief_prompt("Now: 2026-12-02T17:30", "search my mail", &k2);
    ASSERT(p1 && p2 && k1.head > 0 && k1.head == k2.head);
    EXPECT(!strncmp(p1, p2, k1.head) && strcmp(p1 + k1.head, p2 + k1.head));
    EXPECT(!strncmp(p1 + k1.head, "System: Now:", 12)); /* the clock is after the head */
    int n = 0;
    hx_source s0 = engine_source(m, 1, NULL); /* control: no marks, no head */
    ASSERT(s0.ctx && s0.begin(s0.ctx, p1, HX_CHOICE_NONE, &n, &err) == HX_OK);
    hx_source_free(&s0);
    EXPECT_EQ_INT(cache_files(w.dir), 0);
    hx_source s1 = engine_source(m, 1, NULL);
    ASSERT(s1.ctx && s1.begin_marked(s1.ctx, p1, &k1, HX_CHOICE_NONE, &n, &err) == HX_OK);
    hx_source_free(&s1);
    EXPECT_EQ_INT(cache_files(w.dir), 1);
    expect_warm_as_cold(m, w.dir, p2, &k2);
    free(p1);
    free(p2);
    hx_tpl_marks_free(&k1);
    hx_tpl_marks_free(&k2);
    hx_model_free(m);
    world_close(&w);
}

/* One request of pl: its trace's answer and status into out (the model's
 * work), the first turn's timing into tm. */
static void request_of(hx_planner *pl, hx_source *src, const char *req, hx_buf *out,
                       hx_turn_timing *tm)
{
    cJSON *t = NULL;
    hx_err err = {0};
    hx_planner_run(pl, req, NULL, &t, &err);
    hx_source_engine_timing(src, tm);
    out->len = 0;
    hx_buf_printf(out, "%s|%s|%d", cJSON_GetStringValue(cJSON_GetObjectItem(t, "answer")),
                  cJSON_GetStringValue(cJSON_GetObjectItem(t, "status")),
                  (int)cJSON_GetNumberValue(cJSON_GetObjectItem(t, "tokens")));
    cJSON_Delete(t);
}

/* The next request's prompt start decoded ahead while the user types
 * (hx_planner_prepare: system text, tools, the conversation, the clock
 * line): the request then decodes only its own part, and writes what a
 * planner that prepared nothing writes, in a first request and the next
 * one of the conversation, in the chat-token and the brief style.
 * Control: the same requests unprepared decode more of their prompt (the
 * first all of it). */
static void prepare_ahead(int family)
{
    world w;
    hx_model *m = NULL;
    if (!open_model_home(&w, &m)) return;
    hx_source sa = engine_source(m, 0, NULL), sb = engine_source(m, 0, NULL);
    ASSERT(sa.ctx && sb.ctx);
    hx_planner_deps da = world_deps(&w, &sa), db = world_deps(&w, &sb);
    hx_planner_params pp = hx_planner_default_params();
    pp.max_steps = 1; /* one turn a request: the timing is the request's */
    pp.max_tokens = 8;
    pp.recall_budget = 0;
    pp.family = family;
    hx_planner *pa = hx_planner_new(&da, &pp), *pb = hx_planner_new(&db, &pp);
    ASSERT(pa && pb);
    const char *reqs[] = {"What is on my calendar tomorrow?", "And on Friday?"};
    hx_buf got, want;
    hx_buf_init(&got);
    hx_buf_init(&want);
    hx_err err = {0};
    for (int i = 0; i < 2; i++) {
        hx_turn_timing ta, tb;
        const int own = hx_tokenize(hx_model_vocab(m), reqs[i], strlen(reqs[i]), NULL, 0, 0, 1);
        EXPECT(hx_planner_prepare(pa, &err) == HX_OK);
        request_of(pa, &sa, reqs[i], &got, &ta);
        request_of(pb, &sb, reqs[i], &want, &tb);
        EXPECT_STR_EQ(got.data, want.data);
        EXPECT_EQ_INT(ta.n_prompt, tb.n_prompt);
        printf("# style %d, request %d: prepared %d of %d positions decoded, unprepared %d\n", family, i,
               ta.n_prompt - ta.n_reused, ta.n_prompt, tb.n_prompt - tb.n_reused);
        /* the request's words, its ends of message and the assistant's start */
        EXPECT(ta.n_prompt - ta.n_reused <= (own < 0 ? -own : own) + 24);
        EXPECT(ta.n_prompt - ta.n_reused < tb.n_prompt - tb.n_reused);
        if (i == 0) EXPECT_EQ_INT(tb.n_reused, 0);
    }
    hx_planner_free(pa);
    hx_planner_free(pb);
    hx_source_free(&sa);
    hx_source_free(&sb);
    hx_buf_free(&got);
    hx_buf_free(&want);
    hx_model_free(m);
    world_close(&w);
}

static void test_prepare_ahead(void)
{
    prepare_ahead(HX_TPL_QWEN3);
    prepare_ahead(HX_TPL_BRIEF);
}

int main(void)
{
    RUN(test_planner_drops_old_exchanges);
    RUN(test_result_cut_to_fit);
    RUN(test_text_cut_to_fit);
    RUN(test_cancel_long_prefill);
    RUN(test_prefix_cache_across_sources);
    RUN(test_prefix_cache_brief);
    RUN(test_reuse_stops_at_a_change);
    RUN(test_prefix_saved_after_first_token);
    RUN(test_cancelled_prefill_saves_nothing);
    RUN(test_prepare_ahead);
    if (g_model) unlink(g_model);
    return test_summary();
}
