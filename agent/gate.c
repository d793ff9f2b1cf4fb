/* gate.c: the agent's only door to the sandbox module's policy and audit
 * log (kept apart: sandbox.h and memory.h both declare hx_verdict). */
#include <stdio.h>
#include <string.h>

#include "agent/gate.h"
#include "base/base.h"
#include "sandbox/sandbox.h"

static const char *decision_name(hx_decision d)
{
    return d == HX_ALLOW ? "allow" : d == HX_ASK ? "ask" : "deny";
}

void hx_gate_decide(hx_policy *p, const char *tool, int effect, int tainted,
                    const char *args_json, const hx_consent *c, hx_gate *out)
{
    static const hx_consent none = {0};
    hx_verdict v = hx_policy_decide(p, tool, effect, tainted);
    memset(out, 0, sizeof *out);
    out->decision = decision_name(v.decision);
    out->forced_by_taint = v.forced_by_taint;
    snprintf(out->rule, sizeof out->rule, "%s", v.rule);
    out->allowed = hx_policy_resolve(p, &v, tool, args_json, c ? c : &none, &out->by);
    out->confirmed = out->allowed && v.decision == HX_ASK;
}

void hx_gate_audit(hx_audit *a, const char *tool, const char *effect,
                   const char *args_json, const char *decision, const char *by,
                   const char *status, const char *detail, unsigned sandbox)
{
    if (!a) return;
    hx_audit_rec r = {tool, effect, args_json, decision, by, status, detail, sandbox};
    hx_err err = {0};
    if (hx_audit_write(a, &r, &err)) hx_log_warn("audit: %s", err.msg);
}
