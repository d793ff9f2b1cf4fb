/* gate.h: internal header of the agent's door to the sandbox module (policy
 * and audit log), usable next to memory/memory.h. Not public. */
#ifndef HX_AGENT_GATE_H
#define HX_AGENT_GATE_H

#include "base/base.h"

/* sandbox/sandbox.h cannot be included next to memory/memory.h (both
 * declare a type hx_verdict), so the agent reaches the sandbox through
 * agent/gate.c, which includes only sandbox.h, and these handles. */
struct hx_policy;
struct hx_audit;
struct hx_consent;

/* ---- the sandbox gate (agent/gate.c) ---- */
typedef struct hx_gate {
    int allowed;          /* 1: run the call */
    int confirmed;        /* the policy said ask and the answer was yes */
    int forced_by_taint;  /* the taint rule made it ask */
    const char *decision; /* "allow", "ask", "deny" (static) */
    const char *by;       /* who decided (static, see hx_policy_resolve) */
    char rule[96];
} hx_gate;
/* Decides a call: the policy's verdict for tool/effect with the taint
 * (bits of sandbox.h: HX_TAINTED, HX_TAINT_KEEPS), resolved with
 * consent c. */
void hx_gate_decide(struct hx_policy *p, const char *tool, int effect,
                    int taint, const char *args_json,
                    const struct hx_consent *c, hx_gate *out);
/* Appends an audit record; errors are logged, not returned. a may be NULL. */
void hx_gate_audit(struct hx_audit *a, const char *tool, const char *effect,
                   const char *args_json, const char *decision, const char *by,
                   const char *status, const char *detail, unsigned sandbox);

/* Opens the policy from the config's "policy" object (a cJSON tree, NULL:
 * the defaults) and, if audit_path is not NULL ("" = the data dir's
 * audit.jsonl), the audit log. Free both with hx_gate_close. */
int hx_gate_open(const void *policy_cjson, const char *audit_path,
                 struct hx_policy **p, struct hx_audit **a, hx_err *err);
void hx_gate_close(struct hx_policy *p, struct hx_audit *a);
/* How "ask" is answered; ask may be NULL (no terminal). Caller frees the
 * result with free(). */
typedef int (*hx_gate_ask_fn)(void *user, const char *tool,
                              const char *args_json, const char *why);
struct hx_consent *hx_gate_consent_new(int yes, int no, int allow_tainted_send,
                                       hx_gate_ask_fn ask, void *user);
/* Hearth confines itself, on every thread: from here on no socket opens
 * (socketpair does), nor io_uring (hx_sandbox_confine_self_no_network). */
int hx_gate_no_network(hx_err *err);
/* Whether HEARTH_SANDBOX_DISABLE switched that confinement off. */
int hx_gate_no_network_off(void);

#endif /* HX_AGENT_GATE_H */
