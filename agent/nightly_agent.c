/* nightly_agent.c: what the agent gives lora/nightly: episodes rendered
 * and masked as `hearth train --chat` does (agent/chatdata.c), and the
 * generic evaluation (the agent-eval bench's per-task path) with and
 * without a candidate adapter. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/chatdata.h"

/* ---- rendering ---- */

int hx_agent_nightly_render(void *user, const cJSON *messages, int32_t **tokens,
                            uint8_t **mask, size_t *n, hx_err *err)
{
    const hx_agent_render *ar = user;
    hx_chat_doc d = {"episode", 0, messages, ar->tools, ar->family};
    hx_buf text;
    hx_buf_init(&text);
    hx_chat_span *spans = NULL;
    int n_spans = 0;
    hx_chat_tokens t;
    memset(&t, 0, sizeof t);
    int rc = hx_chat_render(&d, &text, &spans, &n_spans, err);
    if (!rc) rc = hx_chat_tokens_add(&t, ar->v, text.data ? text.data : "", text.len,
                                     spans, n_spans, err);
    free(spans);
    hx_buf_free(&text);
    if (rc) return hx_chat_tokens_free(&t), rc;
    *tokens = t.tokens, *mask = t.mask, *n = t.n;
    free(t.doc);
    return HX_OK;
}

/* ---- the evaluation ---- */

cJSON *hx_dg_eval_tasks(long n, uint64_t seed, int category, hx_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hx_dg_params p = hx_dg_default_params();
    hx_dg_stats st;
    p.split = HX_SPLIT_HELDOUT;
    p.tasks = 1;
    p.n = n;
    p.seed = seed;
    p.category = category;
    int rc = f ? hx_datagen_run(&p, f, &st, err) : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (f) fclose(f);
    cJSON *all = rc ? NULL : cJSON_CreateArray();
    for (char *line = all ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *t = cJSON_Parse(line);
        if (t) cJSON_AddItemToArray(all, t);
    }
    free(text);
    return all;
}

int hx_dg_eval_task(const hx_dg_eval_run *o, const cJSON *task, const char *home,
                    hx_dg_validator **v, int *pass, int *n_valid, int *n_calls,
                    cJSON **record, hx_err *err)
{
    hx_dg_world dw;
    hx_source src = {0};
    hx_planner *pl = NULL;
    cJSON *trace = NULL;
    char why[300];
    *pass = 0;
    if (record) *record = NULL;
    int rc = hx_dg_task_world(task, home, &dw, err);
    if (!rc && !*v) {
        cJSON *tools = hx_tools_list_json(dw.reg);
        if (!(*v = hx_dg_validator_new(tools, err))) rc = HX_ERR_INTERNAL;
        cJSON_Delete(tools);
    }
    if (!rc) rc = o->oracle ? hx_dg_oracle_new(task, &dw.w, dw.reg, &pl, &src)
                            : hx_dg_engine_source_with(o->model, dw.reg, o->family,
                                                       o->n_threads, o->adapters,
                                                       o->scales, o->n_adapters, &src, err);
    cJSON *before = rc ? NULL : hx_dg_check_before(task, &dw);
    if (!rc) {
        hx_err e2 = {0};
        hx_planner_params pp = hx_dg_planner_params(o->family);
        hx_dg_run(&dw, task, &src, &pl, &pp, &trace, &e2);
    }
    if (trace) {
        *pass = hx_dg_check(task, before, trace, &dw, *v, n_valid, n_calls, why, sizeof why);
        if (record) *record = hx_dg_eval_record(task, trace, *pass, why);
    }
    cJSON_Delete(trace);
    cJSON_Delete(before);
    hx_source_free(&src);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return rc;
}

/* The sample's tasks, generated once. */
static int eval_sample(hx_agent_eval *ae, int n_tasks, hx_err *err)
{
    if (ae->tasks && cJSON_GetArraySize(ae->tasks) == n_tasks) return HX_OK;
    cJSON_Delete(ae->tasks);
    ae->tasks = hx_dg_eval_tasks(n_tasks, ae->seed, -1, err);
    if (!ae->tasks) return err->rc ? err->rc : HX_ERR_INTERNAL;
    if (cJSON_GetArraySize(ae->tasks) != n_tasks)
        return hx_err_set(err, HX_ERR_INTERNAL, "generated %d of %d evaluation tasks",
                          cJSON_GetArraySize(ae->tasks), n_tasks);
    return HX_OK;
}

int hx_agent_nightly_eval(void *user, const char *adapter, int n_tasks, int *passed,
                          hx_err *err)
{
    hx_agent_eval *ae = user;
    hx_adapter *ad = NULL;
    const float scale = 1.0f;
    *passed = 0;
    int rc = eval_sample(ae, n_tasks, err);
    if (!rc && adapter && !ae->oracle) rc = hx_adapter_load(ae->model, adapter, &ad, err);
    char base[300], home[320];
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(base, sizeof base, "%s/hearth-nightly-eval-XXXXXX", ae->dir ? ae->dir : tmp);
    const int made = !rc && mkdtemp(base);
    if (!rc && !made) rc = hx_err_set(err, HX_ERR_IO, "cannot create %s", base);
    snprintf(home, sizeof home, "%s/world", base);
    hx_dg_eval_run o = {ae->model, ae->family, ae->n_threads, ae->oracle,
                        ad ? &ad : NULL, ad ? &scale : NULL, ad ? 1 : 0};
    hx_dg_validator *v = NULL;
    for (const cJSON *t = rc ? NULL : ae->tasks->child; t && !rc; t = t->next) {
        int pass = 0;
        rc = hx_dg_eval_task(&o, t, home, &v, &pass, NULL, NULL, NULL, err);
        *passed += pass;
    }
    if (made) hx_world_rmtree(base, NULL);
    hx_dg_validator_free(v);
    hx_adapter_free(ad);
    return rc;
}

void hx_agent_eval_free_tasks(hx_agent_eval *ae)
{
    if (!ae) return;
    cJSON_Delete(ae->tasks);
    ae->tasks = NULL;
}
