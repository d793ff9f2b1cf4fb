/* handrun.c: the hand-written evaluation's runs: a world written by hand
 * copied and opened, a request run by a model (or its ideal calls run
 * straight through the tools), checked, logged and transcribed. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/handeval.h"

static const char *js(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

/* ---- worlds ---- */

cJSON *hx_he_world_json(const char *dir, const char *name, hx_err *err)
{
    char path[1200];
    char *text = NULL;
    size_t len;
    if (!name || !*name || strchr(name, '/') || name[0] == '.') {
        hx_err_set(err, HX_ERR_FORMAT, "'%.60s' is not a world's name", name ? name : "");
        return NULL;
    }
    snprintf(path, sizeof path, "%s/worlds/%s/world.json", dir, name);
    if (hx_read_file(path, 1 << 20, &text, &len, err)) return NULL;
    cJSON *w = cJSON_Parse(text);
    free(text);
    if (!w || !*js(w, "now")) hx_err_set(err, HX_ERR_FORMAT, "%s: not JSON with a \"now\"", path);
    if (w && !*js(w, "now")) cJSON_Delete(w), w = NULL;
    return w;
}

/* Copies the tree at from to to: folders and regular files only (a link
 * is skipped, not followed), each file modified at mtime. */
static int copy_tree(const char *from, const char *to, int64_t mtime, int depth, hx_err *err)
{
    DIR *d = depth < 16 ? opendir(from) : NULL;
    int rc = d ? hx_mkdirs(to, err) : hx_err_set(err, HX_ERR_IO, "%s: cannot read", from);
    for (struct dirent *e; !rc && (e = readdir(d));) {
        char src[4096], dst[4096];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(src, sizeof src, "%s/%s", from, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, e->d_name);
        if (lstat(src, &st)) rc = hx_err_set(err, HX_ERR_IO, "%s: cannot read", src);
        else if (S_ISDIR(st.st_mode)) rc = copy_tree(src, dst, mtime, depth + 1, err);
        else if (S_ISREG(st.st_mode)) {
            char *data = NULL;
            size_t len = 0;
            rc = hx_read_file(src, 1 << 26, &data, &len, err);
            if (!rc) rc = hx_write_file_atomic(dst, data, len, err);
            free(data);
            struct timespec ts[2] = {{(time_t)mtime, 0}, {(time_t)mtime, 0}};
            if (!rc && utimensat(AT_FDCWD, dst, ts, AT_SYMLINK_NOFOLLOW))
                rc = hx_err_set(err, HX_ERR_IO, "%s: cannot set its time", dst);
        }
    }
    if (d) closedir(d);
    return rc;
}

static int seed_memories(hx_dg_world *dw, const cJSON *world, hx_err *err)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(world, "memories"))
    {
        hx_mem_new nm = {.kind = js(m, "kind"), .text = js(m, "text")}; /* the user's own */
        int rc = hx_memory_remember(dw->mem, &nm, NULL, NULL, err);
        if (rc) return rc;
    }
    return HX_OK;
}

int hx_he_world_open(const char *dir, const char *name, const char *home, hx_dg_world *dw,
                     hx_err *err)
{
    char from[1200], to[1200];
    hx_when_range now;
    memset(dw, 0, sizeof *dw);
    cJSON *world = hx_he_world_json(dir, name, err);
    if (!world) return err->rc ? err->rc : HX_ERR_FORMAT;
    int rc = hx_when_parse(js(world, "now"), 0, "UTC", &now, err);
    snprintf(dw->home, sizeof dw->home, "%s", home);
    snprintf(dw->w.now_iso, sizeof dw->w.now_iso, "%s", js(world, "now"));
    dw->w.now = now.start;
    snprintf(from, sizeof from, "%s/worlds/%s/config", dir, name);
    snprintf(to, sizeof to, "%s/config", home);
    if (!rc) rc = hx_world_rmtree(home, err);
    if (!rc) rc = copy_tree(from, to, now.start - 86400, 0, err);
    if (!rc) rc = hx_dg_world_open_written(dw, err);
    if (!rc) {
        snprintf(dw->w.tz, sizeof dw->w.tz, "%s", dw->cfg->timezone ? dw->cfg->timezone : "UTC");
        dw->w.today = (now.start + hx_when_utc_offset(dw->w.tz, now.start)) / 86400;
        rc = seed_memories(dw, world, err);
    }
    cJSON_Delete(world);
    return rc;
}

int64_t hx_he_today(const hx_dg_world *dw) { return dw->w.today; }

/* ---- facts that depend on the run ---- */

/* The local start time ("14:30") of the event the calls created last,
 * into hm; 0 if none was created. */
static int booked_time(const cJSON *calls, char *hm, size_t n)
{
    int found = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, calls)
    {
        if (strcmp(js(k, "name"), "calendar.create_event") || strcmp(js(k, "status"), "ok")) continue;
        cJSON *res = cJSON_Parse(js(k, "result"));
        const char *start = js(cJSON_GetObjectItemCaseSensitive(res, "created"), "start");
        if (strlen(start) >= 16) snprintf(hm, n, "%.5s", start + 11), found = 1;
        cJSON_Delete(res);
    }
    return found;
}

/* The task with each fact {"booked": "time"} made the start time of the
 * event the calls created, which the answer must state; with none
 * created, a fact no answer states (the event was not booked). Caller
 * frees. */
static cJSON *with_booked(const cJSON *task, const cJSON *calls)
{
    cJSON *t = cJSON_Duplicate(task, 1), *f;
    char hm[8];
    int have = booked_time(calls, hm, sizeof hm);
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(t, "facts"))
    {
        if (!cJSON_GetObjectItemCaseSensitive(f, "booked")) continue;
        cJSON_DeleteItemFromObjectCaseSensitive(f, "booked");
        if (have) cJSON_AddStringToObject(f, "time", hm);
        else cJSON_AddStringToObject(f, "say", "the time of the event booked (none was)");
    }
    return t;
}

/* ---- the ideal calls ---- */

/* Runs the task's ideal calls in dw: a trace-like array of {name,
 * arguments, status, result}; their results' text appended to text. */
static cJSON *ideal_calls(const cJSON *task, hx_dg_world *dw, hx_buf *text)
{
    cJSON *calls = cJSON_CreateArray();
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(task, "ideal"))
    {
        cJSON *res = NULL, *k = cJSON_CreateObject();
        hx_err e = {0};
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "arguments");
        int rc = hx_tools_call(dw->reg, js(c, "name"), args, &res, &e);
        char *r = res ? cJSON_PrintUnformatted(res) : NULL;
        cJSON_AddStringToObject(k, "name", js(c, "name"));
        cJSON_AddItemToObject(k, "arguments", cJSON_Duplicate(args, 1));
        cJSON_AddStringToObject(k, "status", rc ? "error" : "ok");
        cJSON_AddStringToObject(k, "result", r ? r : e.msg);
        if (r) hx_buf_printf(text, "%s\n", r);
        cJSON_AddItemToArray(calls, k);
        cJSON_free(r);
        cJSON_Delete(res);
    }
    return calls;
}

/* The task with only the expected calls a run straight through the tools
 * can make: those the planner refuses need the planner (caller frees). */
static cJSON *without_refusals(const cJSON *task)
{
    cJSON *t = cJSON_Duplicate(task, 1), *calls = cJSON_GetObjectItemCaseSensitive(t, "calls");
    cJSON *e = calls ? calls->child : NULL;
    while (e) {
        cJSON *next = e->next;
        if (*js(e, "status") && strcmp(js(e, "status"), "ok")) cJSON_Delete(cJSON_DetachItemViaPointer(calls, e));
        e = next;
    }
    return t;
}

static int first_error(const cJSON *calls, char *why, size_t n)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, calls) if (strcmp(js(k, "status"), "ok"))
    {
        snprintf(why, n, "ideal call %s failed: %.200s", js(k, "name"), js(k, "result"));
        return 0;
    }
    return 1;
}

int hx_he_run_ideal(const char *dir, const cJSON *task, const char *home, hx_he_outcome *out,
                    cJSON **record, hx_err *err)
{
    hx_dg_world dw;
    hx_buf text;
    memset(out, 0, sizeof *out);
    if (record) *record = NULL;
    hx_buf_init(&text);
    hx_buf_printf(&text, "%s\n", js(task, "request")); /* names the user gave */
    int rc = hx_he_world_open(dir, js(task, "world"), home, &dw, err);
    cJSON *before = rc ? NULL : hx_he_snapshot(&dw);
    cJSON *calls = rc ? NULL : ideal_calls(task, &dw, &text), *t = without_refusals(task);
    if (!rc) {
        out->answered = 1;
        out->n_calls = cJSON_GetArraySize(calls);
        out->calls_ok = first_error(calls, out->why_calls, sizeof out->why_calls) &&
                        hx_he_check_calls(t, calls, out->why_calls, sizeof out->why_calls);
        out->state_ok = hx_he_check_state(task, before, &dw, out->why_state, sizeof out->why_state);
        cJSON *tb = with_booked(task, calls);
        out->answer_ok = hx_he_facts_in(tb, text.data ? text.data : "", hx_he_today(&dw), &out->n_found,
                                        &out->n_facts, out->why_answer, sizeof out->why_answer);
        cJSON_Delete(tb);
        out->success = out->calls_ok && out->state_ok && out->answer_ok;
    }
    if (!rc && record) {
        *record = cJSON_CreateObject();
        cJSON_AddStringToObject(*record, "id", js(task, "id"));
        cJSON_AddBoolToObject(*record, "success", out->success);
        cJSON_AddStringToObject(*record, "why", out->success ? "ok" : !out->calls_ok ? out->why_calls
                                                : !out->state_ok ? out->why_state : out->why_answer);
        cJSON_AddItemToObject(*record, "calls", cJSON_Duplicate(calls, 1));
    }
    cJSON_Delete(t);
    cJSON_Delete(calls);
    cJSON_Delete(before);
    hx_buf_free(&text);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return rc;
}

char *hx_he_ideal_text(const char *dir, const cJSON *task, const char *home, hx_err *err)
{
    hx_dg_world dw;
    hx_buf text;
    hx_buf_init(&text);
    int rc = hx_he_world_open(dir, js(task, "world"), home, &dw, err);
    if (!rc) cJSON_Delete(ideal_calls(task, &dw, &text));
    hx_buf_putc(&text, 0);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    if (!rc && text.oom) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (rc) hx_buf_free(&text);
    return rc ? NULL : hx_buf_steal(&text, NULL);
}

/* ---- a model's run ---- */

/* What the run's answer may state: the request, the system text, every
 * successful call's result (whole, where the context's cut kept it for a
 * results answer), and what the ideal calls found. */
static char *sources(const cJSON *trace, const char *ideal)
{
    hx_buf b;
    const cJSON *m;
    hx_buf_init(&b);
    hx_buf_printf(&b, "%s\n%s\n", js(trace, "request"), ideal ? ideal : "");
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(trace, "messages"))
        if (!strcmp(js(m, "role"), "system")) hx_buf_printf(&b, "%s\n", js(m, "content"));
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(trace, "calls"))
        if (!strcmp(js(m, "status"), "ok"))
            hx_buf_printf(&b, "%s\n", *js(m, "result_whole") ? js(m, "result_whole") : js(m, "result"));
    hx_buf_putc(&b, 0);
    return b.oom ? (hx_buf_free(&b), NULL) : hx_buf_steal(&b, NULL);
}

static void count_valid(const cJSON *trace, hx_dg_validator *v, hx_he_outcome *out)
{
    const cJSON *k;
    char why[300];
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(trace, "calls"))
    {
        out->n_calls++;
        out->n_valid += strcmp(js(k, "status"), "malformed") &&
                        hx_dg_call_valid(v, js(k, "name"), cJSON_GetObjectItemCaseSensitive(k, "arguments"), why, sizeof why);
    }
}

static void check_run(const cJSON *task, const cJSON *trace, const cJSON *before, hx_dg_world *dw,
                      const char *ideal, hx_he_outcome *out)
{
    out->answered = !strcmp(js(trace, "status"), "answered");
    out->calls_ok = hx_he_check_calls(task, cJSON_GetObjectItemCaseSensitive(trace, "calls"), out->why_calls,
                                      sizeof out->why_calls);
    out->state_ok = hx_he_check_state(task, before, dw, out->why_state, sizeof out->why_state);
    char *src = sources(trace, ideal);
    cJSON *tb = with_booked(task, cJSON_GetObjectItemCaseSensitive(trace, "calls"));
    if (!out->answered) snprintf(out->why_answer, sizeof out->why_answer, "no answer (%s)", js(trace, "status"));
    else out->answer_ok = hx_he_check_answer(tb, js(trace, "answer"), src, hx_he_today(dw), out->why_answer,
                                             sizeof out->why_answer);
    cJSON_Delete(tb);
    free(src);
    out->success = out->answered && out->calls_ok && out->state_ok && out->answer_ok;
}

/* The log line: the generated evaluation's (hx_dg_eval_record: the
 * request, calls, answer, status, steps, tokens) with this one's world and
 * verdicts. Caller frees. */
static cJSON *run_record(const cJSON *task, const cJSON *trace, const hx_he_outcome *o)
{
    const char *first = !o->calls_ok ? o->why_calls : !o->state_ok ? o->why_state : o->why_answer;
    cJSON *r = hx_dg_eval_record(task, trace, o->success, o->success ? "ok" : first), *why = cJSON_CreateObject();
    cJSON_AddItemToObject(r, "world", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(task, "world"), 1));
    cJSON_AddBoolToObject(r, "success", o->success);
    cJSON_AddBoolToObject(r, "calls_ok", o->calls_ok);
    cJSON_AddBoolToObject(r, "state_ok", o->state_ok);
    cJSON_AddBoolToObject(r, "answer_ok", o->answer_ok);
    cJSON_AddStringToObject(why, "calls", o->why_calls);
    cJSON_AddStringToObject(why, "state", o->why_state);
    cJSON_AddStringToObject(why, "answer", o->why_answer);
    cJSON_AddItemToObject(r, "why", why);
    return r;
}

/* The task as the planner runs it: the world's now unless it has one. */
static cJSON *run_task(const cJSON *task, const hx_dg_world *dw)
{
    cJSON *t = cJSON_Duplicate(task, 1);
    if (t && !*js(t, "now")) cJSON_AddStringToObject(t, "now", dw->w.now_iso);
    return t;
}

/* One task as hx_he_run_model runs it, so (ro; *tier set). */
static int run_he(const hx_dg_eval_run *o, const hx_dg_run_opts *ro, int *tier, const char *dir,
                  const cJSON *task, const char *home, hx_dg_validator **v, hx_he_outcome *out,
                  cJSON **record, cJSON **trace_out, hx_err *err)
{
    hx_dg_world dw;
    hx_source src = {0};
    cJSON *trace = NULL, *before = NULL, *t = NULL;
    memset(out, 0, sizeof *out);
    if (record) *record = NULL;
    if (trace_out) *trace_out = NULL;
    char *ideal = hx_he_ideal_text(dir, task, home, err);
    int rc = ideal ? hx_he_world_open(dir, js(task, "world"), home, &dw, err) : (memset(&dw, 0, sizeof dw), err->rc);
    if (!rc && !*v) {
        cJSON *tools = hx_tools_list_json(dw.reg);
        if (!(*v = hx_dg_validator_new(tools, err))) rc = err->rc ? err->rc : HX_ERR_INTERNAL;
        cJSON_Delete(tools);
    }
    const char *tool = NULL;
    cJSON *args = NULL;
    if (!rc && ro->tool_tier) hx_agent_tool_tier(dw.reg, js(task, "request"), &tool, &args);
    if (tier) *tier = args != NULL;
    if (!rc && !args) rc = hx_dg_engine_source_run(o, dw.reg, &src, err);
    if (!rc && !(t = run_task(task, &dw))) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!rc) {
        hx_err e2 = {0};
        hx_planner_params pp = hx_dg_eval_params(o);
        pp.tools = ro->tools;
        before = hx_he_snapshot(&dw);
        if (args) hx_dg_run_call(&dw, t, tool, args, &trace, &e2);
        else hx_dg_run(&dw, t, &src, NULL, &pp, &trace, &e2);
    }
    cJSON_Delete(args);
    if (trace) {
        count_valid(trace, *v, out);
        check_run(task, trace, before, &dw, ideal, out);
        if (record) *record = run_record(task, trace, out);
    }
    if (trace_out) *trace_out = trace;
    else cJSON_Delete(trace);
    if (o->gen) hx_source_engine_add_stats(&src, o->gen);
    hx_source_free(&src);
    cJSON_Delete(before);
    cJSON_Delete(t);
    free(ideal);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return rc;
}

int hx_he_run_model(const hx_dg_eval_run *o, const char *dir, const cJSON *task,
                    const char *home, hx_dg_validator **v, hx_he_outcome *out, cJSON **record,
                    cJSON **trace, hx_err *err)
{
    const hx_dg_run_opts plain = {0, NULL};
    return run_he(o, &plain, NULL, dir, task, home, v, out, record, trace, err);
}

int hx_he_run_with(const hx_dg_eval_run *o, const hx_dg_run_opts *ro, const char *dir,
                   const cJSON *task, const char *home, hx_dg_validator **v,
                   hx_he_outcome *out, int *tier, cJSON **record, cJSON **trace,
                   hx_err *err)
{
    return run_he(o, ro, tier, dir, task, home, v, out, record, trace, err);
}

/* ---- the transcript ---- */

static void put_json(FILE *f, const char *lead, const cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    fprintf(f, "%s%s\n", lead, s ? s : "null");
    cJSON_free(s);
}

void hx_he_transcript(FILE *f, const cJSON *task, const cJSON *trace, const hx_he_outcome *o)
{
    const cJSON *c;
    fprintf(f, "=== %s %s %s\n  request: %s\n  world %s\n", js(task, "id"), js(task, "category"),
            o->success ? "PASS" : "FAIL", js(task, "request"), js(task, "world"));
    if (trace) hx_dg_transcript_run(f, trace);
    fprintf(f, "  calls: %s\n  state: %s\n  answer: %s\n", o->why_calls, o->why_state, o->why_answer);
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(task, "ideal"))
    {
        fprintf(f, "  ideal %s ", js(c, "name"));
        put_json(f, "", cJSON_GetObjectItemCaseSensitive(c, "arguments"));
    }
    put_json(f, "  facts: ", cJSON_GetObjectItemCaseSensitive(task, "facts"));
    if (cJSON_GetObjectItemCaseSensitive(task, "forbid")) put_json(f, "  forbid: ", cJSON_GetObjectItemCaseSensitive(task, "forbid"));
    fprintf(f, "\n");
}
