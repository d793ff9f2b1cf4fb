/* distill.c: nightly's distillation replay: generic requests of hearth
 * datagen's training split run by the base model itself (greedy, through
 * the real planner and tools in their sample worlds, as the generic suite
 * runs it) and its own conversations rendered as the user's episodes are,
 * so that the adapter learns to keep what the base does on generic work
 * while it learns the user's habits (issue 10: replaying the oracle's
 * trajectories instead pulled the adapter away from the base there). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "lora/lora.h"

cJSON *hx_dg_train_tasks(long n, uint64_t seed, hx_err *err)
{
    return hx_dg_tasks(HX_SPLIT_TRAIN, n, seed, -1, err); /* never the suite's held-out pools */
}

int hx_dg_model_trace(const hx_agent_eval *ae, const cJSON *task, const char *home,
                      cJSON **trace, cJSON **tools, hx_err *err)
{
    hx_dg_world dw;
    hx_source src = {0};
    *trace = *tools = NULL;
    memset(&dw, 0, sizeof dw);
    int rc = hx_dg_task_world(task, home, &dw, err);
    if (!rc) rc = hx_dg_engine_source(ae->model, dw.reg, ae->family, ae->n_threads, &src, err);
    if (!rc) {
        hx_err e2 = {0}; /* a run that failed still has its conversation */
        hx_planner_params pp = hx_dg_planner_params(ae->family);
        hx_dg_run(&dw, task, &src, NULL, &pp, trace, &e2);
        if (!(*tools = hx_tools_list_json(dw.reg))) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    hx_source_free(&src);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return rc;
}

/* One task: the base's conversation rendered into out. */
static int distill_one(const hx_agent_eval *ae, const cJSON *task, const char *home,
                       hx_nightly_data *out, hx_err *err)
{
    cJSON *trace = NULL, *tools = NULL;
    int rc = hx_dg_model_trace(ae, task, home, &trace, &tools, err);
    const cJSON *msgs = cJSON_GetObjectItem(trace, "messages");
    if (!rc && cJSON_IsArray(msgs)) {
        hx_agent_render ar = {hx_model_vocab(ae->model), ae->family, tools};
        const int before = out->n_docs;
        rc = hx_agent_nightly_render(&ar, msgs, out, err);
        out->n_episodes += !rc && out->n_docs > before;
    }
    cJSON_Delete(trace);
    cJSON_Delete(tools);
    return rc;
}

int hx_agent_nightly_distill(void *user, int n, uint64_t seed, hx_nightly_data *out,
                             hx_err *err)
{
    const hx_agent_eval *ae = user;
    char base[300] = "", home[320]; /* each world puts the environment back */
    cJSON *tasks = hx_dg_train_tasks(n, seed, err);
    int fd = -1;
    int rc = !tasks ? (err->rc ? err->rc : HX_ERR_INTERNAL)
             : !ae->model ? hx_err_set(err, HX_ERR_INVALID, "distillation needs the base model")
             : hx_eval_home_take(ae->dir, base, sizeof base, &fd, err);
    snprintf(home, sizeof home, "%s/world", base);
    hx_progress pr;
    int i = 0;
    hx_progress_start(&pr, "replay: the base's own runs", rc ? 0 : cJSON_GetArraySize(tasks));
    for (const cJSON *t = rc ? NULL : tasks->child; t && !rc; t = t->next) {
        rc = distill_one(ae, t, home, out, err);
        hx_progress_update(&pr, ++i, NULL);
    }
    hx_progress_finish(&pr);
    hx_eval_home_give(base, fd);
    cJSON_Delete(tasks);
    return rc;
}
