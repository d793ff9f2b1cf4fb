/* assist.c: the assistant over HTTP: POST /v1/hearth/ask runs the planner
 * with Hearth's own tools, policy, memory and audit trail, streaming its
 * calls, their results and the answer; a write or send that needs consent
 * pauses the turn on a question that POST /v1/hearth/consent/ID answers.
 * The memory (list, search, forget) and the audit trail (read only). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/serve_int.h"

#define MAX_REQUEST 32768
#define MAX_DETAIL 65536

/* What POST /v1/hearth/ask asked. */
typedef struct ask_req {
    char *request;
    char *tools;     /* offered tools (as --tools), or NULL: all */
    int stream, yes, no;
    hx_planner_params pp;
    hx_sampler_params sp;
} ask_req;

static void free_ask(void *work)
{
    ask_req *a = work;
    if (!a) return;
    free(a->request);
    free(a->tools);
    free(a);
}

/* ---- reading the request ---- */
static int flag(const cJSON *o, const char *key, int *out, char *why, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return snprintf(why, n, "%s must be true or false", key), -1;
    *out = cJSON_IsTrue(v);
    return 0;
}

static int number(const cJSON *o, const char *key, double lo, double hi, double *out, char *why,
                  size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi)
        return snprintf(why, n, "%s must be a number from %g to %g", key, lo, hi), -1;
    *out = v->valuedouble;
    return 0;
}

/* The options `hearth ask` takes, by their JSON names. */
static int ask_options(const cJSON *o, ask_req *a, char *why, size_t n)
{
    double steps = a->pp.max_steps, tokens = a->pp.max_tokens, temp = a->sp.temp, seed = -1;
    const char *choice = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "tool_choice"));
    if (flag(o, "stream", &a->stream, why, n) || flag(o, "yes", &a->yes, why, n) ||
        flag(o, "no", &a->no, why, n) ||
        number(o, "max_steps", 1, 1000, &steps, why, n) ||
        number(o, "max_tokens", 1, 1e7, &tokens, why, n) ||
        number(o, "timeout", 0, 1e6, &a->pp.timeout_s, why, n) ||
        number(o, "temp", 0, 100, &temp, why, n) || number(o, "seed", 0, 9e15, &seed, why, n))
        return -1;
    a->pp.max_steps = (int)steps;
    a->pp.max_tokens = (int)tokens;
    a->sp.temp = (float)temp;
    if (seed >= 0) a->sp.seed = (uint64_t)seed;
    if (choice) {
        a->pp.tool_choice = !strcmp(choice, "auto")       ? HX_CHOICE_AUTO
                            : !strcmp(choice, "required") ? HX_CHOICE_REQUIRED
                            : !strcmp(choice, "none")     ? HX_CHOICE_NONE : -1;
        if (a->pp.tool_choice < 0) return snprintf(why, n, "tool_choice is auto, required or none"), -1;
    }
    const char *answer = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "answer"));
    if (answer) {
        a->pp.answer = !strcmp(answer, "model")     ? HX_ANSWER_MODEL
                       : !strcmp(answer, "results") ? HX_ANSWER_RESULTS : -1;
        if (a->pp.answer < 0) return snprintf(why, n, "answer is model or results"), -1;
    }
    if (a->yes && a->no) return snprintf(why, n, "yes and no contradict each other"), -1;
    return 0;
}

/* The tools a request may use, as the names a filter lists (*out, caller
 * frees; NULL when none): those both the server's --tools (if any) and
 * the request's "tools" (if any) offer, and the grammar can use. A
 * request narrows what the user started the server with, never widens it. */
static int offered_tools(const hx_server *s, const char *asked, char **out)
{
    hx_tool_spec *specs = NULL;
    hx_buf b;
    hx_buf_init(&b);
    *out = NULL;
    int k = hx_agent_tool_specs(s->d.reg, s->d.pp.tools, NULL, &specs);
    for (int i = 0; i < k; i++)
        if (hx_agent_tool_offered(asked, specs[i].name))
            hx_buf_printf(&b, "%s%s", b.len ? "," : "", specs[i].name);
    free(specs);
    if (k < 0 || b.oom) return hx_buf_free(&b), -1;
    if (!b.len) return hx_buf_free(&b), 0;
    *out = hx_buf_steal(&b, NULL);
    return *out ? 0 : -1;
}

/* The request's fields; -1 with why. The taint rule's way past it
 * (--allow-tainted-send) is the user's at the terminal, not an app's. */
static int ask_parse(const hx_server *s, const cJSON *o, ask_req *a, char *why, size_t n)
{
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(o, "request");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools");
    a->stream = 1;
    a->pp = s->d.pp;
    a->sp = s->d.ep.sp;
    if (!cJSON_IsString(req) || !*req->valuestring || strlen(req->valuestring) > MAX_REQUEST)
        return snprintf(why, n, "request must be a text of 1 to %d bytes", MAX_REQUEST), -1;
    if (cJSON_GetObjectItemCaseSensitive(o, "allow_tainted_send"))
        return snprintf(why, n, "allow_tainted_send is not taken over HTTP: a send after "
                        "untrusted content asks its consent question instead"), -1;
    if (tools && !cJSON_IsNull(tools) && !cJSON_IsString(tools))
        return snprintf(why, n, "tools is a comma-separated list of names or prefix.*"), -1;
    if (ask_options(o, a, why, n)) return -1;
    a->request = hx_strdup(req->valuestring);
    if (!a->request) return snprintf(why, n, "out of memory"), -1;
    const char *asked = cJSON_GetStringValue(tools);
    if (offered_tools(s, asked, &a->tools)) return snprintf(why, n, "out of memory"), -1;
    if (!a->tools)
        return snprintf(why, n, "tools '%.60s' offers no tool%s", asked ? asked : "",
                        s->d.pp.tools ? " that hearth serve --tools offers" : ""), -1;
    return 0;
}

enum MHD_Result hx_sv_ask(sv_req *r)
{
    char why[200];
    cJSON *o = hx_sv_parse_object(r->body, r->body_len, why, sizeof why);
    ask_req *a = hx_calloc(1, sizeof *a);
    int bad = !o || !a || ask_parse(r->srv, o, a, why, sizeof why);
    cJSON_Delete(o);
    if (bad) {
        free_ask(a);
        return hx_sv_error(r->conn, a ? 400 : 500, NULL, NULL, "%s", a ? why : "out of memory");
    }
    return hx_sv_submit(r, SV_JOB_ASK, a, free_ask, NULL);
}

/* ---- consent: a question the turn waits on ---- */
struct sv_consent {
    char id[33];
    int answer; /* 0 while waiting, then 'y', 'n' or 'a' */
    struct sv_consent *next;
};

/* One run's context for the planner's callbacks. */
typedef struct run {
    hx_server *srv;
    sv_job *j;
    ask_req *a;
} run;

static void send_event(sv_job *j, const char *event, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s) hx_sv_job_send_event(j, event, s);
    cJSON_free(s);
    cJSON_Delete(o);
}

/* A call's arguments as JSON when they parse, else as the text. */
static cJSON *args_value(const char *args)
{
    cJSON *a = cJSON_Parse(args);
    return a ? a : cJSON_CreateString(args);
}

static void link_consent(hx_server *s, sv_consent *c, int add)
{
    pthread_mutex_lock(&s->consent_mu);
    if (add) {
        c->next = s->consents;
        s->consents = c;
    } else {
        for (sv_consent **p = &s->consents; *p; p = &(*p)->next)
            if (*p == c) {
                *p = c->next;
                break;
            }
    }
    pthread_mutex_unlock(&s->consent_mu);
}

/* Waits for the answer (1 s at a time, watching the client and the
 * server): 'y', 'n' or 'a', and *by who gave it. */
static int wait_answer(run *r, sv_consent *c, const char **by)
{
    hx_server *s = r->srv;
    double deadline = hx_time_mono() + s->p.consent_timeout_s;
    int answer = 0;
    *by = "user";
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_mutex_lock(&s->consent_mu);
        if (!c->answer && !s->stopping) pthread_cond_timedwait(&s->consent_cv, &s->consent_mu, &ts);
        answer = c->answer;
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->consent_mu);
        if (answer) return answer;
        if (stopping) return *by = "the server stopping", 'n';
        if (hx_sv_job_gone(r->j)) return *by = "the client leaving", 'n';
        if (hx_time_mono() >= deadline) return *by = "no answer in time", 'n';
    }
}

static const char *answer_name(int a) { return a == 'y' ? "yes" : a == 'a' ? "always" : "no"; }

/* The consent question (hx_consent_new's ask) of the HTTP assistant: the question as a "consent"
 * event; the turn waits for POST /v1/hearth/consent/ID, the client's
 * leaving, the server's stopping or the timeout (the last three: no). */
static int http_consent(void *user, const char *tool, const char *args, const char *why)
{
    run *r = user;
    sv_consent *c = hx_calloc(1, sizeof *c);
    if (!c || hx_sv_random_hex(c->id, 16)) {
        free(c);
        return 'n';
    }
    link_consent(r->srv, c, 1);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", c->id);
    cJSON_AddStringToObject(e, "tool", tool);
    cJSON_AddItemToObject(e, "arguments", args_value(args));
    cJSON_AddStringToObject(e, "why", why);
    cJSON_AddNumberToObject(e, "timeout", r->srv->p.consent_timeout_s);
    send_event(r->j, "consent", e);
    const char *by;
    int answer = wait_answer(r, c, &by);
    link_consent(r->srv, c, 0);
    e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", c->id);
    cJSON_AddStringToObject(e, "answer", answer_name(answer));
    cJSON_AddStringToObject(e, "by", by);
    send_event(r->j, "consent_answered", e);
    free(c);
    return answer;
}

enum MHD_Result hx_sv_consent_answer(sv_req *r, const char *id)
{
    char why[200];
    cJSON *o = hx_sv_parse_object(r->body, r->body_len, why, sizeof why);
    const char *ans = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "answer"));
    int a = !ans ? 0 : !strcmp(ans, "yes") ? 'y' : !strcmp(ans, "no") ? 'n'
                     : !strcmp(ans, "always") ? 'a' : 0;
    int parsed = o != NULL;
    cJSON_Delete(o);
    if (!a)
        return hx_sv_error(r->conn, 400, "answer", NULL, "%s",
                        parsed ? "answer is yes, no or always" : why);
    hx_server *s = r->srv;
    int found = 0, taken = 0;
    pthread_mutex_lock(&s->consent_mu);
    for (sv_consent *c = s->consents; c; c = c->next) {
        if (strcmp(c->id, id)) continue;
        found = 1;
        taken = c->answer != 0;
        if (!taken) c->answer = a;
    }
    pthread_cond_broadcast(&s->consent_cv);
    pthread_mutex_unlock(&s->consent_mu);
    if (!found) return hx_sv_error(r->conn, 404, NULL, "unknown_consent", "no question %.40s is "
                                "waiting (answered, timed out, or its request ended)", id);
    if (taken) return hx_sv_error(r->conn, 409, NULL, "answered", "question %.40s has its answer", id);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "id", id);
    cJSON_AddStringToObject(res, "answer", answer_name(a));
    return hx_sv_json(r->conn, 200, res);
}

void hx_sv_consent_stop(hx_server *s)
{
    pthread_mutex_lock(&s->consent_mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->consent_cv);
    pthread_mutex_unlock(&s->consent_mu);
}

/* ---- the run ---- */
static void on_text(void *user, const char *s, size_t n)
{
    run *r = user;
    char *t = hx_strndup(s, n);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "text", t ? t : "");
    free(t);
    send_event(r->j, "text", e);
}

static void on_call(void *user, const char *name, const char *args)
{
    run *r = user;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddItemToObject(e, "arguments", args_value(args));
    send_event(r->j, "call", e);
}

static void on_result(void *user, const char *name, const char *status, const char *detail)
{
    run *r = user;
    cJSON *e = cJSON_CreateObject();
    char *d = hx_strndup(detail, strnlen(detail, MAX_DETAIL));
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "status", status);
    cJSON_AddStringToObject(e, "detail", d ? d : "");
    cJSON_AddNumberToObject(e, "bytes", (double)strlen(detail));
    free(d);
    send_event(r->j, "result", e);
}

static int on_cancelled(void *user)
{
    run *r = user;
    return r->srv->stopping || hx_sv_job_gone(r->j);
}

/* Why a write or send did not happen, from its record's "by" (who
 * decided: sandbox/policy.c) and status. */
static const char *undone_reason(const cJSON *c)
{
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
    const char *by = cJSON_GetStringValue(cJSON_GetObjectItem(c, "by"));
    if (!strcmp(status ? status : "", "not run")) return "it was stopped before it ran (see its limit)";
    if (strcmp(status ? status : "", "refused")) return "it failed (see its result)";
    if (!strcmp(by ? by : "", "user")) return "you declined it, or nobody answered in time";
    if (!strcmp(by ? by : "", "policy")) return "your policy denies it (\"policy\" in config.json)";
    if (!strcmp(by ? by : "", "--no")) return "the request said no to every question";
    return "it was refused";
}

/* The run's end: {"episode", "status", "answer", "error", "calls",
 * "not_done"}; not_done names every write or send that did not happen. */
static cJSON *outcome(const run *r, int rc, const hx_err *err, cJSON *trace)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *undone = trace ? hx_agent_undone(r->srv->d.reg, trace) : cJSON_CreateArray();
    const cJSON *c;
    cJSON_ArrayForEach(c, undone) cJSON_AddStringToObject((cJSON *)c, "reason", undone_reason(c));
    cJSON_AddNumberToObject(o, "episode", cJSON_GetNumberValue(cJSON_GetObjectItem(trace, "episode")));
    cJSON_AddStringToObject(o, "status", trace ? cJSON_GetStringValue(cJSON_GetObjectItem(trace,
                                                 "status")) : "error");
    cJSON_AddStringToObject(o, "answer", trace ? cJSON_GetStringValue(cJSON_GetObjectItem(trace,
                                                 "answer")) : "");
    cJSON_AddItemToObject(o, "error", rc ? cJSON_CreateString(err->msg) : cJSON_CreateNull());
    if (trace) cJSON_AddItemToObject(o, "calls", cJSON_DetachItemFromObject(trace, "calls"));
    cJSON_AddItemToObject(o, "not_done", undone);
    return o;
}

static int ask_planner(sv_slot *slot, run *r, hx_planner **pl, struct hx_consent **consent,
                       hx_err *err)
{
    const hx_serve_deps *d = &r->srv->d;
    hx_tool_spec *specs = NULL;
    int k = hx_agent_tool_specs(d->reg, r->a->tools, NULL, &specs);
    hx_engine_turn t = {r->a->sp, specs, k > 0 ? k : 0, NULL, d->ep.copy_bias};
    int rc = k > 0 ? hx_sv_slot_configure(slot, &t, err) : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    free(specs);
    if (rc) return rc;
    *consent = hx_consent_new(r->a->yes, r->a->no, 0, http_consent, r);
    hx_planner_params pp = r->a->pp;
    pp.tools = r->a->tools;
    hx_planner_deps deps = {hx_sv_slot_planner_source(slot), d->reg, d->x, d->policy, d->audit,
                            d->mem, *consent};
    if (!*consent || !(*pl = hx_planner_new(&deps, &pp)))
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    return HX_OK;
}

void hx_sv_ask_run(sv_slot *slot, sv_job *j)
{
    run r = {hx_sv_slot_server(slot), j, j->work};
    hx_planner *pl = NULL;
    struct hx_consent *consent = NULL;
    cJSON *trace = NULL;
    hx_err err = {0};
    int rc = ask_planner(slot, &r, &pl, &consent, &err);
    if (rc) { /* nothing ran: one error */
        hx_sv_job_fail(j, 500, NULL, NULL, err.msg);
        hx_planner_free(pl);
        free(consent);
        return;
    }
    if (r.a->stream) hx_sv_job_start_stream(j);
    hx_planner_io io = {&r, on_text, on_call, on_result, on_cancelled};
    hx_planner_io quiet = {&r, NULL, NULL, NULL, on_cancelled};
    rc = hx_planner_run(pl, r.a->request, r.a->stream ? &io : &quiet, &trace, &err);
    cJSON *o = outcome(&r, rc, &err, trace);
    if (r.a->stream) {
        send_event(j, "done", o);
    } else {
        char *s = cJSON_PrintUnformatted(o);
        hx_sv_job_respond(j, trace ? 200 : 500, s ? s : "{}");
        cJSON_free(s);
        cJSON_Delete(o);
    }
    cJSON_Delete(trace);
    hx_planner_free(pl);
    free(consent);
}

/* ---- memory and audit views ---- */
static int query_int(struct MHD_Connection *c, const char *key, int dflt, int max)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
    char *end;
    long n = v ? strtol(v, &end, 10) : dflt;
    if (v && (*end || n < 1)) return -1;
    return n > max ? max : (int)n;
}

static cJSON *list_json(const hx_mem_list *l)
{
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    cJSON_AddStringToObject(o, "object", "list");
    for (int i = 0; l && i < l->n; i++) {
        char *s = hx_mem_item_to_json(&l->items[i], 0);
        cJSON *it = s ? cJSON_Parse(s) : NULL;
        if (it) cJSON_AddItemToArray(data, it);
        free(s);
    }
    return o;
}

static enum MHD_Result memory_off(sv_req *r)
{
    return hx_sv_error(r->conn, 404, NULL, "memory_off", "memory is off (hearth serve --no-memory)");
}

/* One memory: GET shows it, DELETE forgets it (and the words it held). */
static enum MHD_Result memory_one(sv_req *r, const char *id)
{
    hx_server *s = r->srv;
    char *end;
    errno = 0;
    long long n = strtoll(id, &end, 10);
    if (*end || n < 1 || errno) return hx_sv_error(r->conn, 404, NULL, NULL, "no memory %.40s", id);
    hx_err err = {0};
    hx_mem_list *l = NULL;
    int del = !strcmp(r->method, "DELETE");
    pthread_mutex_lock(&s->mem_mu);
    int rc = del ? hx_memory_forget(s->mem_http, n, &err) : hx_memory_get(s->mem_http, n, &l, &err);
    pthread_mutex_unlock(&s->mem_mu);
    if (!rc && !del && (!l || !l->n)) rc = hx_err_set(&err, HX_ERR_NOTFOUND, "no memory %lld", n);
    if (rc) {
        hx_mem_list_free(l);
        return hx_sv_error(r->conn, rc == HX_ERR_NOTFOUND ? 404 : 500, NULL, NULL, "%s", err.msg);
    }
    cJSON *o = del ? cJSON_CreateObject() : list_json(l);
    if (del) cJSON_AddNumberToObject(o, "id", (double)n), cJSON_AddTrueToObject(o, "deleted");
    hx_mem_list_free(l);
    return hx_sv_json(r->conn, 200, o);
}

enum MHD_Result hx_sv_memory(sv_req *r, const char *id)
{
    hx_server *s = r->srv;
    if (!s->mem_http) return memory_off(r);
    if (id) return memory_one(r, id);
    const char *q = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "q");
    const char *kind = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "kind");
    int limit = query_int(r->conn, "limit", 50, 1000);
    if (limit < 0) return hx_sv_error(r->conn, 400, "limit", NULL, "limit is a positive number");
    hx_mem_list *l = NULL;
    hx_err err = {0};
    pthread_mutex_lock(&s->mem_mu);
    int rc = q && *q ? hx_memory_search(s->mem_http, q, limit, &l, &err)
                     : hx_memory_list(s->mem_http, kind, limit, 0, &l, &err);
    pthread_mutex_unlock(&s->mem_mu);
    if (rc) return hx_sv_error(r->conn, 500, NULL, NULL, "%s", err.msg);
    cJSON *o = list_json(l);
    hx_mem_list_free(l);
    return hx_sv_json(r->conn, 200, o);
}

enum MHD_Result hx_sv_audit(sv_req *r)
{
    hx_server *s = r->srv;
    if (!s->mem_http) return memory_off(r);
    int limit = query_int(r->conn, "limit", 100, 1000);
    if (limit < 0) return hx_sv_error(r->conn, 400, "limit", NULL, "limit is a positive number");
    char *text = NULL;
    hx_err err = {0};
    pthread_mutex_lock(&s->mem_mu);
    int rc = hx_memory_audit_json(s->mem_http, limit, &text, &err);
    pthread_mutex_unlock(&s->mem_mu);
    if (rc) return hx_sv_error(r->conn, 500, NULL, NULL, "%s", err.msg);
    cJSON *o = cJSON_CreateObject(), *data = cJSON_Parse(text);
    free(text);
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToObject(o, "data", data ? data : cJSON_CreateArray());
    return hx_sv_json(r->conn, 200, o);
}
