/* evalrun.c: the agent evaluation's runs: held-out (or training) tasks
 * from the generator, and one task run in a fresh world by the model or the
 * oracle and checked; the agent-eval bench and the nightly gate share them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

cJSON *hx_dg_tasks(int split, long n, uint64_t seed, int category, hx_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hx_dg_params p = hx_dg_default_params();
    hx_dg_stats st;
    p.split = split;
    p.tasks = 1;
    p.n = n;
    p.seed = seed;
    p.category = category;
    int rc = f ? hx_datagen_run(&p, f, &st, err) : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (f) fclose(f);
    cJSON *all = rc ? NULL : cJSON_CreateArray();
    for (char *line = all && text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *t = cJSON_Parse(line);
        if (t) cJSON_AddItemToArray(all, t);
    }
    free(text);
    return all;
}

cJSON *hx_dg_eval_tasks(long n, uint64_t seed, int category, hx_err *err)
{
    return hx_dg_tasks(HX_SPLIT_HELDOUT, n, seed, category, err);
}

int hx_dg_eval_task(const hx_dg_eval_run *o, const cJSON *task, const char *home,
                    hx_dg_validator **v, int *pass, int *n_valid, int *n_calls,
                    cJSON **record, hx_err *err)
{
    return hx_dg_eval_task_traced(o, task, home, v, pass, n_valid, n_calls, record, NULL, err);
}

/* One task as hx_dg_eval_task_traced runs it, so (ro; *tier set). */
static int eval_task(const hx_dg_eval_run *o, const hx_dg_run_opts *ro, int *tier,
                     const cJSON *task, const char *home, hx_dg_validator **v, int *pass,
                     int *n_valid, int *n_calls, cJSON **record, cJSON **trace_out,
                     hx_err *err)
{
    hx_dg_world dw;
    hx_source src = {0};
    hx_planner *pl = NULL;
    cJSON *trace = NULL;
    char why[300];
    *pass = 0;
    if (record) *record = NULL;
    if (trace_out) *trace_out = NULL;
    int rc = hx_dg_task_world(task, home, &dw, err);
    if (!rc && !*v) {
        cJSON *tools = hx_tools_list_json(dw.reg);
        if (!(*v = hx_dg_validator_new(tools, err))) rc = HX_ERR_INTERNAL;
        cJSON_Delete(tools);
    }
    const char *tool = NULL;
    cJSON *args = NULL;
    const char *request = cJSON_GetStringValue(cJSON_GetObjectItem(task, "request"));
    if (!rc && ro->tool_tier && !o->oracle) hx_agent_tool_tier(dw.reg, request, &tool, &args);
    if (tier) *tier = args != NULL;
    if (!rc && !args)
        rc = o->oracle ? hx_dg_oracle_new(task, &dw.w, dw.reg, &pl, &src)
                       : hx_dg_engine_source_run(o, dw.reg, &src, err);
    cJSON *before = rc ? NULL : hx_dg_check_before(task, &dw);
    if (!rc) {
        hx_err e2 = {0};
        hx_planner_params pp = hx_dg_eval_params(o);
        pp.tools = ro->tools;
        if (args) hx_dg_run_call(&dw, task, tool, args, &trace, &e2);
        else hx_dg_run(&dw, task, &src, &pl, &pp, &trace, &e2);
    }
    cJSON_Delete(args);
    if (trace) {
        *pass = hx_dg_check(task, before, trace, &dw, *v, n_valid, n_calls, why, sizeof why);
        if (record) *record = hx_dg_eval_record(task, trace, *pass, why);
    }
    if (trace_out) *trace_out = trace;
    else cJSON_Delete(trace);
    cJSON_Delete(before);
    if (o->gen) hx_source_engine_add_stats(&src, o->gen);
    hx_source_free(&src);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return rc;
}

int hx_dg_eval_task_traced(const hx_dg_eval_run *o, const cJSON *task, const char *home,
                           hx_dg_validator **v, int *pass, int *n_valid, int *n_calls,
                           cJSON **record, cJSON **trace_out, hx_err *err)
{
    const hx_dg_run_opts plain = {0, NULL};
    return eval_task(o, &plain, NULL, task, home, v, pass, n_valid, n_calls, record, trace_out,
                     err);
}

int hx_dg_eval_task_with(const hx_dg_eval_run *o, const hx_dg_run_opts *ro, const cJSON *task,
                         const char *home, hx_dg_validator **v, int *pass, int *tier,
                         cJSON **record, cJSON **trace, hx_err *err)
{
    return eval_task(o, ro, tier, task, home, v, pass, NULL, NULL, record, trace, err);
}
