/* policy.c: the permission policy: per tool and per effect class allow /
 * ask / deny, the taint rule for sends, and how a question is answered. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"

#define MAX_RULES 128

typedef struct rule {
    char *pattern; /* "mail.send" or "calendar.*" */
    hx_decision d;
} rule;

struct hx_policy {
    hx_decision by_class[3];
    rule rules[MAX_RULES];
    int n_rules;
    char **always; /* tools the user answered "always" for */
    int n_always;
};

static const char *const class_names[] = {"read", "write", "send"};

static int parse_decision(const cJSON *v, hx_decision *d)
{
    if (!cJSON_IsString(v)) return -1;
    if (!strcmp(v->valuestring, "allow")) *d = HX_ALLOW;
    else if (!strcmp(v->valuestring, "ask")) *d = HX_ASK;
    else if (!strcmp(v->valuestring, "deny")) *d = HX_DENY;
    else return -1;
    return 0;
}

static int parse_rules(hx_policy *p, const cJSON *tools, hx_err *err)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, tools)
    {
        if (p->n_rules == MAX_RULES)
            return hx_err_set(err, HX_ERR_RANGE, "policy: more than %d tool rules", MAX_RULES);
        rule *r = &p->rules[p->n_rules];
        if (parse_decision(it, &r->d))
            return hx_err_set(err, HX_ERR_FORMAT,
                              "policy.tools.%s: expected \"allow\", \"ask\" or \"deny\"",
                              it->string);
        if (!(r->pattern = hx_strdup(it->string)))
            return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        p->n_rules++;
    }
    return HX_OK;
}

static int parse_policy(hx_policy *p, const cJSON *root, hx_err *err)
{
    if (!cJSON_IsObject(root))
        return hx_err_set(err, HX_ERR_FORMAT, "policy: expected an object");
    for (int c = 0; c < 3; c++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, class_names[c]);
        if (v && parse_decision(v, &p->by_class[c]))
            return hx_err_set(err, HX_ERR_FORMAT,
                              "policy.%s: expected \"allow\", \"ask\" or \"deny\"",
                              class_names[c]);
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsObject(tools))
        return hx_err_set(err, HX_ERR_FORMAT, "policy.tools: expected an object");
    return tools ? parse_rules(p, tools, err) : HX_OK;
}

int hx_policy_new(const char *json, hx_policy **out, hx_err *err)
{
    *out = NULL;
    hx_policy *p = hx_calloc(1, sizeof *p);
    if (!p) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    p->by_class[0] = HX_ALLOW;
    p->by_class[1] = p->by_class[2] = HX_ASK;
    int rc = HX_OK;
    if (json) {
        cJSON *root = cJSON_Parse(json);
        rc = root ? parse_policy(p, root, err)
                  : hx_err_set(err, HX_ERR_FORMAT, "policy: not valid JSON");
        cJSON_Delete(root);
    }
    if (rc) {
        hx_policy_free(p);
        return rc;
    }
    *out = p;
    return HX_OK;
}

void hx_policy_free(hx_policy *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_rules; i++) free(p->rules[i].pattern);
    for (int i = 0; i < p->n_always; i++) free(p->always[i]);
    free(p->always);
    free(p);
}

/* Exact rules win over "prefix.*" rules; the longest prefix wins. */
static const rule *match_rule(const hx_policy *p, const char *tool)
{
    const rule *best = NULL;
    size_t best_len = 0;
    for (int i = 0; i < p->n_rules; i++) {
        const char *pat = p->rules[i].pattern;
        size_t n = strlen(pat);
        if (!strcmp(pat, tool)) return &p->rules[i];
        if (n >= 2 && pat[n - 1] == '*' && !strncmp(pat, tool, n - 1) && n > best_len) {
            best = &p->rules[i];
            best_len = n;
        }
    }
    return best;
}

static int is_always(const hx_policy *p, const char *tool)
{
    for (int i = 0; i < p->n_always; i++)
        if (!strcmp(p->always[i], tool)) return 1;
    return 0;
}

hx_policy_verdict hx_policy_decide(const hx_policy *p, const char *tool, int effect,
                                   int taint)
{
    hx_policy_verdict v = {0};
    if (effect < 0 || effect > 2) effect = 2; /* unknown: treat as the riskiest */
    const rule *r = match_rule(p, tool);
    if (r) {
        v.decision = r->d;
        snprintf(v.rule, sizeof v.rule, "tool rule %s", r->pattern);
    } else {
        v.decision = p->by_class[effect];
        snprintf(v.rule, sizeof v.rule, "class %s", class_names[effect]);
    }
    if (v.decision == HX_ASK && is_always(p, tool)) {
        v.decision = HX_ALLOW;
        snprintf(v.rule, sizeof v.rule, "answered always for %s", tool);
    }
    int guarded = (taint & HX_TAINTED) && (effect == 2 || (taint & HX_TAINT_KEEPS));
    if (guarded && v.decision == HX_ALLOW) {
        v.decision = HX_ASK;
        v.forced_by_taint = 1;
        snprintf(v.rule, sizeof v.rule, "taint rule: untrusted content before %s",
                 effect == 2 ? "a send" : "keeping it for later");
    } else if (guarded && v.decision == HX_ASK) {
        v.forced_by_taint = 1; /* --yes must not answer it */
    }
    return v;
}

static void remember_always(hx_policy *p, const char *tool)
{
    char **a = hx_realloc(p->always, (size_t)(p->n_always + 1) * sizeof *a);
    if (!a) return;
    p->always = a;
    if ((a[p->n_always] = hx_strdup(tool))) p->n_always++;
}

hx_consent *hx_consent_new(int yes, int no, int allow_tainted_send,
                           int (*ask)(void *user, const char *tool,
                                      const char *args_json, const char *why),
                           void *user)
{
    hx_consent *c = hx_calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (hx_consent){.yes = yes, .no = no, .allow_tainted_send = allow_tainted_send,
                      .interactive = ask != NULL, .ask = ask, .user = user};
    return c;
}

int hx_policy_resolve(hx_policy *p, const hx_policy_verdict *v, const char *tool,
                      const char *args_json, const hx_consent *c, const char **by)
{
    if (v->decision == HX_ALLOW) return *by = "policy", 1;
    if (v->decision == HX_DENY) return *by = "policy", 0;
    if (c->no) return *by = "--no", 0;
    if (v->forced_by_taint && c->allow_tainted_send) return *by = "--allow-tainted-send", 1;
    if (!v->forced_by_taint && c->yes) return *by = "--yes", 1;
    if (!c->interactive || !c->ask)
        return *by = v->forced_by_taint ? "taint rule (no terminal to ask)" : "no terminal", 0;
    const char *why = v->forced_by_taint
                          ? "untrusted content (a mail, an invitation, a file, a tool's "
                            "output, error or own description, a memory) is in this "
                            "conversation; it may be steering this call"
                          : v->rule;
    int ans = c->ask(c->user, tool, args_json, why);
    *by = "user";
    if (ans == 'a' && !v->forced_by_taint) remember_always(p, tool);
    return ans == 'y' || ans == 'a';
}
