/* test_policy.c: the permission policy (classes, tool rules, the taint
 * rule for sends, consent answers) and the audit log's records. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "test.h"

static int asked;
static int answer_with;
static int fake_ask(void *user, const char *tool, const char *args, const char *why)
{
    (void)user, (void)tool, (void)args, (void)why;
    asked++;
    return answer_with;
}

static void test_defaults(void)
{
    hx_policy *p;
    hx_err e;
    ASSERT(hx_policy_new(NULL, &p, &e) == HX_OK);
    EXPECT_EQ_INT(hx_policy_decide(p, "mail.search", 0, 0).decision, HX_ALLOW);
    EXPECT_EQ_INT(hx_policy_decide(p, "calendar.create_event", 1, 0).decision, HX_ASK);
    EXPECT_EQ_INT(hx_policy_decide(p, "mail.send", 2, 0).decision, HX_ASK);
    EXPECT_EQ_INT(hx_policy_decide(p, "weird", 7, 0).decision, HX_ASK); /* unknown class: as send */
    hx_policy_free(p);
    hx_policy_free(NULL);
}

static void test_rules(void)
{
    hx_policy *p;
    hx_err e;
    ASSERT(hx_policy_new("{\"write\":\"allow\",\"tools\":{\"calendar.*\":\"allow\","
                         "\"calendar.cancel_event\":\"deny\",\"mail.send\":\"allow\"}}",
                         &p, &e) == HX_OK);
    EXPECT_EQ_INT(hx_policy_decide(p, "calendar.create_event", 1, 0).decision, HX_ALLOW);
    EXPECT_EQ_INT(hx_policy_decide(p, "calendar.cancel_event", 1, 0).decision, HX_DENY);
    EXPECT_EQ_INT(hx_policy_decide(p, "files.search", 0, 0).decision, HX_ALLOW);
    EXPECT_EQ_INT(hx_policy_decide(p, "mail.send", 2, 0).decision, HX_ALLOW);
    hx_policy_free(p);
    EXPECT(hx_policy_new("{\"send\":\"sometimes\"}", &p, &e) == HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "policy.send") != NULL);
    EXPECT(hx_policy_new("{\"tools\":{\"x\":1}}", &p, &e) == HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "policy.tools.x") != NULL);
    EXPECT(hx_policy_new("{nope", &p, &e) == HX_ERR_FORMAT);
}

/* A mail that says "forward the inbox" must not get a send through, even
 * where the user allowed sends and a script passed --yes. */
static void test_taint_rule(void)
{
    hx_policy *p;
    hx_err e;
    ASSERT(hx_policy_new("{\"tools\":{\"mail.send\":\"allow\"}}", &p, &e) == HX_OK);
    hx_policy_verdict v = hx_policy_decide(p, "mail.send", 2, 1);
    EXPECT_EQ_INT(v.decision, HX_ASK);
    EXPECT(v.forced_by_taint);
    const char *by;
    hx_consent yes = {.yes = 1};
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "mail.send", "{}", &yes, &by), 0);
    EXPECT(strstr(by, "taint") != NULL);
    hx_consent explicit_opt = {.allow_tainted_send = 1};
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "mail.send", "{}", &explicit_opt, &by), 1);
    EXPECT_STR_EQ(by, "--allow-tainted-send");
    hx_consent tty = {.interactive = 1, .ask = fake_ask, .yes = 1};
    asked = 0, answer_with = 'n';
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "mail.send", "{}", &tty, &by), 0);
    EXPECT_EQ_INT(asked, 1); /* asked although --yes was given */
    answer_with = 'a'; /* "always" is not remembered for a taint question */
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "mail.send", "{}", &tty, &by), 1);
    v = hx_policy_decide(p, "mail.send", 2, 1);
    EXPECT_EQ_INT(v.decision, HX_ASK);
    /* untainted conversations keep the user's allow */
    EXPECT_EQ_INT(hx_policy_decide(p, "mail.send", 2, 0).decision, HX_ALLOW);
    hx_policy_free(p);
    /* deny stays deny when tainted */
    ASSERT(hx_policy_new("{\"send\":\"deny\"}", &p, &e) == HX_OK);
    EXPECT_EQ_INT(hx_policy_decide(p, "mail.reply", 2, 1).decision, HX_DENY);
    hx_policy_free(p);
}

/* A tool that keeps what it is given for later conversations
 * (memory.remember) is under the taint rule as a send is: after taint it
 * asks even where writes are allowed, and --yes does not answer; "always"
 * is not remembered for it. The controls: untainted, the user's allow
 * stands; tainted, a write that keeps nothing keeps the allow. */
static void test_keeps_rule(void)
{
    hx_policy *p;
    hx_err e;
    const char *by;
    ASSERT(hx_policy_new("{\"write\": \"allow\"}", &p, &e) == HX_OK);
    hx_policy_verdict v = hx_policy_decide(p, "memory.remember", 1, HX_TAINTED | HX_TAINT_KEEPS);
    EXPECT_EQ_INT(v.decision, HX_ASK);
    EXPECT(v.forced_by_taint);
    EXPECT(strstr(v.rule, "keeping it for later") != NULL);
    hx_consent yes = {.yes = 1};
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "memory.remember", "{}", &yes, &by), 0);
    EXPECT(strstr(by, "taint") != NULL);
    hx_consent tty = {.interactive = 1, .ask = fake_ask};
    asked = 0, answer_with = 'a';
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "memory.remember", "{}", &tty, &by), 1);
    EXPECT_EQ_INT(asked, 1);
    EXPECT_EQ_INT(hx_policy_decide(p, "memory.remember", 1, HX_TAINTED | HX_TAINT_KEEPS).decision,
                  HX_ASK);
    EXPECT_EQ_INT(hx_policy_decide(p, "memory.remember", 1, HX_TAINT_KEEPS).decision, HX_ALLOW);
    EXPECT_EQ_INT(hx_policy_decide(p, "calendar.create_event", 1, HX_TAINTED).decision, HX_ALLOW);
    hx_policy_free(p);
}

static void test_consent_answers(void)
{
    hx_policy *p;
    hx_err e;
    const char *by;
    ASSERT(hx_policy_new(NULL, &p, &e) == HX_OK);
    hx_policy_verdict v = hx_policy_decide(p, "calendar.create_event", 1, 0);
    hx_consent none = {0}, yes = {.yes = 1}, no = {.no = 1, .yes = 1};
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "calendar.create_event", "{}", &none, &by), 0);
    EXPECT_STR_EQ(by, "no terminal");
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "calendar.create_event", "{}", &yes, &by), 1);
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "calendar.create_event", "{}", &no, &by), 0);
    hx_consent tty = {.interactive = 1, .ask = fake_ask};
    answer_with = 'a';
    EXPECT_EQ_INT(hx_policy_resolve(p, &v, "calendar.create_event", "{}", &tty, &by), 1);
    EXPECT_EQ_INT(hx_policy_decide(p, "calendar.create_event", 1, 0).decision, HX_ALLOW);
    hx_policy_free(p);
}

static void test_audit_lines(void)
{
    char path[] = "/tmp/hx-audit-XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    hx_audit *a;
    hx_err e;
    ASSERT(hx_audit_open(path, &a, &e) == HX_OK);
    hx_audit_rec r = {.tool = "mail.send", .effect = "send", .args_json = "{\"to\":\"x@y\"}",
                      .decision = "ask", .by = "taint rule", .status = "refused"};
    EXPECT_EQ_INT(hx_audit_write(a, &r, &e), HX_OK);
    r.args_json = "not json \"quoted\"";
    r.status = "killed", r.detail = "timeout after 10 s", r.sandbox = HX_SB_LANDLOCK | HX_SB_SECCOMP;
    EXPECT_EQ_INT(hx_audit_write(a, &r, &e), HX_OK);
    hx_audit_close(a);
    char *text;
    size_t n;
    ASSERT(hx_read_file(path, 0, &text, &n, &e) == HX_OK);
    char *nl = strchr(text, '\n');
    ASSERT(nl);
    *nl = '\0';
    cJSON *l1 = cJSON_Parse(text), *l2 = cJSON_Parse(nl + 1);
    ASSERT(l1 && l2);
    EXPECT_STR_EQ(cJSON_GetObjectItem(cJSON_GetObjectItem(l1, "args"), "to")->valuestring, "x@y");
    EXPECT_STR_EQ(cJSON_GetObjectItem(l2, "args")->valuestring, "not json \"quoted\"");
    EXPECT_STR_EQ(cJSON_GetObjectItem(l2, "sandbox")->valuestring, "landlock, seccomp");
    cJSON_Delete(l1);
    cJSON_Delete(l2);
    free(text);
    unlink(path);
}

int main(void)
{
    RUN(test_defaults);
    RUN(test_rules);
    RUN(test_taint_rule);
    RUN(test_keeps_rule);
    RUN(test_consent_answers);
    RUN(test_audit_lines);
    return test_summary();
}
