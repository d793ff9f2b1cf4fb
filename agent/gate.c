/* gate.c: the agent's only door to the sandbox module's policy and audit
 * log (kept apart: sandbox.h and memory.h both declare hx_verdict). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/gate.h"
#include "base/base.h"
#include "sandbox/sandbox.h"

static const char *decision_name(hx_decision d)
{
    return d == HX_ALLOW ? "allow" : d == HX_ASK ? "ask" : "deny";
}

void hx_gate_decide(hx_policy *p, const char *tool, int effect, int taint,
                    const char *args_json, const hx_consent *c, hx_gate *out)
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

void hx_gate_audit(hx_audit *a, const char *tool, const char *effect,
                   const char *args_json, const char *decision, const char *by,
                   const char *status, const char *detail, unsigned sandbox)
{
    if (!a) return;
    hx_audit_rec r = {tool, effect, args_json, decision, by, status, detail, sandbox};
    hx_err err = {0};
    if (hx_audit_write(a, &r, &err)) hx_log_warn("audit: %s", err.msg);
}

int hx_gate_open(const void *policy_cjson, const char *audit_path, hx_policy **p,
                 hx_audit **a, hx_err *err)
{
    char *pj = policy_cjson ? cJSON_PrintUnformatted(policy_cjson) : NULL;
    *p = NULL;
    *a = NULL;
    int rc = hx_policy_new(pj, p, err);
    cJSON_free(pj);
    if (!rc && audit_path) rc = hx_audit_open(*audit_path ? audit_path : NULL, a, err);
    if (rc) {
        hx_gate_close(*p, *a);
        *p = NULL;
        *a = NULL;
    }
    return rc;
}

void hx_gate_close(hx_policy *p, hx_audit *a)
{
    hx_policy_free(p);
    hx_audit_close(a);
}

hx_consent *hx_gate_consent_new(int yes, int no, int allow_tainted_send,
                                hx_gate_ask_fn ask, void *user)
{
    hx_consent *c = hx_calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (hx_consent){yes, no, allow_tainted_send, ask != NULL, ask, user};
    return c;
}

int hx_gate_no_network(hx_err *err) { return hx_sandbox_confine_self_no_network(err); }
int hx_gate_no_network_off(void) { return hx_sandbox_mechanism_disabled("seccomp"); }
