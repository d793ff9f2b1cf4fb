/* toolrun.c: one tool call as the agent makes it, for the planner and for
 * `hearth tools call` alike: the policy's decision, the run, the audit. */
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"

/* What the policy and the consent decided about a call. */
typedef struct gate {
    int allowed;          /* 1: run the call */
    int confirmed;        /* the policy said ask and the answer was yes */
    int forced_by_taint;  /* the taint rule made it ask */
    const char *decision; /* "allow", "ask", "deny" (static) */
    const char *by;       /* who decided (static, see hx_policy_resolve) */
    char rule[96];
} gate;

static const char *decision_name(hx_decision d)
{
    return d == HX_ALLOW ? "allow" : d == HX_ASK ? "ask" : "deny";
}

static void decide(hx_policy *p, const char *tool, int effect, int taint,
                   const char *args_json, const hx_consent *c, gate *out)
{
    static const hx_consent none = {0};
    hx_policy_verdict v = hx_policy_decide(p, tool, effect, taint);
    memset(out, 0, sizeof *out);
    out->decision = decision_name(v.decision);
    out->forced_by_taint = v.forced_by_taint;
    snprintf(out->rule, sizeof out->rule, "%s", v.rule);
    out->allowed = hx_policy_resolve(p, &v, tool, args_json, c ? c : &none, &out->by);
    out->confirmed = out->allowed && v.decision == HX_ASK;
}

int hx_agent_policy_open(const cJSON *policy, const char *audit_path, hx_policy **p,
                         hx_audit **a, hx_err *err)
{
    char *pj = policy ? cJSON_PrintUnformatted(policy) : NULL;
    *p = NULL;
    *a = NULL;
    int rc = hx_policy_new(pj, p, err);
    cJSON_free(pj);
    if (!rc && audit_path) rc = hx_audit_open(*audit_path ? audit_path : NULL, a, err);
    if (rc) {
        hx_agent_policy_close(*p, *a);
        *p = NULL;
        *a = NULL;
    }
    return rc;
}

void hx_agent_policy_close(hx_policy *p, hx_audit *a)
{
    hx_policy_free(p);
    hx_audit_close(a);
}

static void refuse(const gate *g, hx_call_outcome *o)
{
    o->status = "refused";
    o->rc = HX_ERR_DENIED;
    snprintf(o->detail, sizeof o->detail, "refused (%s; decided by %s)%s", g->rule, g->by,
             g->forced_by_taint ? ": untrusted content is in this conversation" : "");
}

void hx_agent_call(const hx_planner_deps *d, const char *name, const cJSON *args,
                   const char *args_json, int tainted, hx_call_outcome *o)
{
    const hx_tool_def *def = hx_tools_find(d->reg, name);
    if (!def) {
        o->status = "error";
        o->rc = HX_ERR_NOTFOUND;
        snprintf(o->detail, sizeof o->detail, "unknown tool %s", name);
        return;
    }
    int taint = (tainted ? HX_TAINTED : 0) | (def->flags & HX_TOOL_KEEPS ? HX_TAINT_KEEPS : 0);
    gate g;
    decide(d->policy, name, def->effect, taint, args_json, d->consent, &g);
    o->decision = g.decision;
    o->by = g.by;
    o->confirmed = g.confirmed;
    if (!g.allowed) return refuse(&g, o);
    hx_call_trust trust = {.tainted = tainted};
    hx_err err = {0};
    o->rc = hx_tools_call_trust(d->reg, name, args, &trust, &o->result, &err);
    o->status = o->rc ? "error" : "ok";
    o->untrusted = trust.untrusted;
    if (o->rc) snprintf(o->detail, sizeof o->detail, "%s", err.msg);
}

void hx_agent_audit(const hx_planner_deps *d, const char *name, const char *args_json,
                    const hx_call_outcome *o)
{
    const hx_tool_def *def = hx_tools_find(d->reg, name);
    const char *effect = def ? hx_effect_name(def->effect) : "unknown";
    const char *by = o->by ? o->by : "";
    unsigned sb = hx_extools_last_sandbox(d->x, name);
    hx_audit_rec rec = {name, effect, args_json, o->decision, by, o->status, o->detail, sb};
    hx_err e;
    if (d->audit && hx_audit_write(d->audit, &rec, &e)) hx_log_warn("audit: %s", e.msg);
    if (!d->mem) return;
    char sbs[256];
    hx_audit_row row = {hx_now(NULL), name, effect, args_json, o->decision, by, o->status,
                        o->detail[0] ? o->detail : NULL,
                        sb ? hx_sandbox_describe(sb, sbs, sizeof sbs) : NULL};
    if (hx_memory_audit_add(d->mem, &row, &e)) hx_log_warn("audit trail: %s", e.msg);
}

