/* test_llama_calls.c: the Llama 3.1 call style through the real engine: a
 * random-weight llama model (hx_mkmodel_write) with the real Llama 3
 * vocabulary writes calls under the grammar; the planner parses every
 * call and each validates against its tool's schema. */
#include "test.h"
#include "agent_world.h"
#include "modelfile/modelfile.h"

#define TOOLS "calendar.*"

static char model_path[300];

/* A one-layer random llama with the real Llama 3 tokenizer (0 if the
 * vocabulary is not in the shared data). */
static hx_model *random_llama(void)
{
    const char *vocab = test_shared_file("vocab/ggml-vocab-llama-bpe.gguf");
    if (!vocab) return NULL;
    char dir[] = "/tmp/hx_llama_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    snprintf(model_path, sizeof model_path, "%s/llama.gguf", dir);
    hx_mkmodel_params p = tiny_model_params("llama", vocab, 1);
    p.seed = 7;
    hx_err err = {0};
    hx_model *m = NULL;
    if (hx_mkmodel_write(&p, model_path, &err) || hx_model_load(model_path, NULL, &m, &err)) {
        printf("# %s\n", err.msg);
        m = NULL;
    }
    return m;
}

static void remove_model(void)
{
    char *slash = strrchr(model_path, '/');
    unlink(model_path);
    if (slash) *slash = 0, rmdir(model_path);
}

/* Runs requests with the given first-turn choice; counts the calls (every
 * one well-formed and valid) and the turns that were plain text. */
static void run_requests(world *w, hx_source *src, int choice, int n_runs, int max_tokens,
                         int *n_calls, int *n_text)
{
    for (int i = 0; i < n_runs; i++) {
        hx_planner_params pp = hx_planner_default_params();
        pp.family = HX_TPL_LLAMA3;
        pp.tool_choice = choice;
        pp.max_steps = 1;
        pp.max_tokens = max_tokens;
        pp.tools = TOOLS;
        pp.recall_budget = 0;
        hx_planner_deps d = world_deps(w, src);
        hx_planner *pl = hx_planner_new(&d, &pp);
        cJSON *t = NULL;
        hx_err err = {0};
        ASSERT(pl);
        hx_planner_run(pl, "What is on my calendar tomorrow?", NULL, &t, &err);
        ASSERT(t);
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(t, "status"));
        EXPECT(st && (!strcmp(st, "answered") || !strcmp(st, "step limit") ||
                      !strcmp(st, "token budget")));
        const cJSON *calls = cJSON_GetObjectItem(t, "calls");
        for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
            const char *cs = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
            EXPECT(cs && strcmp(cs, "malformed") != 0);
            EXPECT(name && hx_agent_tool_offered(TOOLS, name));
            EXPECT(name && world_args_valid(w, name, cJSON_GetObjectItem(c, "arguments")));
            (*n_calls)++;
        }
        if (st && !strcmp(st, "answered")) (*n_text)++;
        /* a required turn is a call unless the budget cut it */
        if (choice == HX_CHOICE_REQUIRED)
            EXPECT(cJSON_GetArraySize(calls) == 1 || (st && !strcmp(st, "token budget")));
        cJSON_Delete(t);
        hx_planner_free(pl);
    }
}

static void test_llama_calls_random_model(void)
{
    hx_model *m = random_llama();
    if (!m) SKIP("vocab/ggml-vocab-llama-bpe.gguf not available");
    world w;
    ASSERT(world_open(&w, 1, 0, 0));
    hx_tool_spec *specs;
    int n = hx_agent_tool_specs(w.reg, TOOLS, NULL, &specs);
    hx_source_engine_params ep = hx_source_engine_default_params();
    ep.call_style = hx_agent_call_style(HX_TPL_LLAMA3);
    ep.compact_json = 1; /* random weights: short strings, round numbers */
    ep.n_ctx = 2048;
    ep.n_threads = 1;
    ep.sp.temp = 1.0f;
    ep.sp.seed = 3;
    hx_source src;
    hx_err err = {0};
    ASSERT(hx_source_engine_new(m, specs, n, &ep, &src, &err) == HX_OK);
    free(specs); /* the source copied them */
    int calls = 0, text = 0, lazy_calls = 0, lazy_text = 0;
    run_requests(&w, &src, HX_CHOICE_REQUIRED, 5, 160, &calls, &text);
    /* lazy: random text rarely ends; what matters is that nothing the
     * grammar let through is a malformed call */
    run_requests(&w, &src, HX_CHOICE_AUTO, 2, 40, &lazy_calls, &lazy_text);
    printf("# required: %d calls of 5 turns; lazy: %d calls, %d text answers of 2 turns\n",
           calls, lazy_calls, lazy_text);
    EXPECT(calls >= 3);
    hx_source_free(&src);
    world_close(&w);
    hx_model_free(m);
    remove_model();
}

int main(void)
{
    RUN(test_llama_calls_random_model);
    return test_summary();
}
