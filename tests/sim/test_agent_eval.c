/* test_agent_eval.c: the agent evaluation's checker, proven on scripted
 * runs: the oracle's run of every held-out task passes; deliberately wrong
 * runs (wrong attendee, outside working hours, wrong title, a call where
 * none is needed, nothing remembered, no answer) fail with the right
 * reason; and a small fixed sample through a real model (hearth-tiny if
 * built, else stories260K) yields only schema-valid calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/sim.h"
#include "test.h"

static char g_dir[64];

static const char *dir(void)
{
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "%s/hx_eval_XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(g_dir)) g_dir[0] = 0;
    }
    return g_dir;
}

/* n tasks of a split and category (-1: the mix), with the oracle's calls. */
static cJSON *split_tasks(int split, long n, uint64_t seed, int cat)
{
    char *buf = NULL, home[128];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    hx_dg_params p = hx_dg_default_params();
    hx_dg_stats st;
    hx_err err = {0};
    snprintf(home, sizeof home, "%s/gen", dir());
    p.split = split;
    p.tasks = 1;
    p.n = n;
    p.seed = seed;
    p.category = cat;
    p.home = home;
    int rc = hx_datagen_run(&p, f, &st, &err);
    fclose(f);
    cJSON *all = cJSON_CreateArray();
    for (char *l = rc ? NULL : strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
        cJSON_AddItemToArray(all, cJSON_Parse(l));
    free(buf);
    return all;
}

/* n held-out tasks of a category (-1: the mix), with the oracle's calls. */
static cJSON *tasks(long n, uint64_t seed, int cat)
{
    return split_tasks(HX_SPLIT_HELDOUT, n, seed, cat);
}

/* ---- a wrong run: the oracle's turns, rewritten ---- */
typedef struct wrong {
    hx_source inner;
    void (*edit)(struct wrong *w, int turn, hx_buf *text);
    const cJSON *task;
    int turn, sent;
    hx_buf text;
} wrong;

static void replace(hx_buf *b, const char *from, const char *to)
{
    char *at = b->data ? strstr(b->data, from) : NULL;
    if (!at) return;
    hx_buf out;
    hx_buf_init(&out);
    hx_buf_append(&out, b->data, (size_t)(at - b->data));
    hx_buf_puts(&out, to);
    hx_buf_puts(&out, at + strlen(from));
    hx_buf_free(b);
    *b = out;
}

static int w_begin(void *ctx, const char *prompt, int choice, int *n, hx_err *err)
{
    wrong *w = ctx;
    int end = 0, rc = w->inner.begin(w->inner.ctx, prompt, choice, n, err);
    hx_buf_free(&w->text);
    hx_buf_init(&w->text);
    while (!rc && !end) rc = w->inner.next(w->inner.ctx, &w->text, &end, err);
    if (w->edit) w->edit(w, w->turn, &w->text);
    w->turn++;
    w->sent = 0;
    return rc;
}

static int w_next(void *ctx, hx_buf *piece, int *end, hx_err *err)
{
    wrong *w = ctx;
    (void)err;
    *end = w->sent;
    if (!w->sent && w->text.data) hx_buf_puts(piece, w->text.data);
    w->sent = 1;
    return HX_OK;
}

static const char *slot(const cJSON *task, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(task, "slots"), k));
}

/* Runs task in a fresh world with the oracle (edited by edit, if any) and
 * checks it; returns pass, why gets the reason. */
static int run_checked(const cJSON *task, void (*edit)(wrong *, int, hx_buf *), char *why, size_t n,
                       int *valid, int *calls)
{
    char home[128];
    snprintf(home, sizeof home, "%s/run", dir());
    hx_dg_world dw;
    hx_err err = {0};
    if (hx_dg_task_world(task, home, &dw, &err)) {
        snprintf(why, n, "world: %s", err.msg);
        return 0;
    }
    cJSON *tools = hx_tools_list_json(dw.reg), *trace = NULL;
    hx_dg_validator *v = hx_dg_validator_new(tools, &err);
    hx_planner *pl = NULL;
    wrong w = {{0}, edit, task, 0, 0, {0}};
    hx_dg_oracle_new(task, &dw.w, dw.reg, &pl, &w.inner);
    hx_source src = {.api_version = HX_SOURCE_API, .name = "wrong (test double)", .ctx = &w,
                     .begin = w_begin, .next = w_next};
    cJSON *before = hx_dg_check_before(task, &dw);
    hx_dg_run(&dw, task, &src, &pl, NULL, &trace, &err);
    int pass = trace && hx_dg_check(task, before, trace, &dw, v, valid, calls, why, n);
    if (!trace) snprintf(why, n, "no trace: %s", err.msg);
    cJSON_Delete(trace);
    cJSON_Delete(before);
    hx_source_free(&w.inner);
    hx_buf_free(&w.text);
    hx_dg_validator_free(v);
    cJSON_Delete(tools);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return pass;
}

static void test_oracle_passes(void)
{
    cJSON *all = tasks(36, 21, -1), *t;
    int n = 0, pass = 0, valid = 0, calls = 0, cats[HX_CAT_COUNT] = {0};
    char why[300];
    cJSON_ArrayForEach(t, all)
    {
        n++;
        cats[hx_dg_category_parse(cJSON_GetStringValue(cJSON_GetObjectItem(t, "category")))]++;
        if (run_checked(t, NULL, why, sizeof why, &valid, &calls)) pass++;
        else printf("# %s: %s\n", cJSON_GetStringValue(cJSON_GetObjectItem(t, "request")), why);
    }
    EXPECT_EQ_INT(n, 36);
    EXPECT_EQ_INT(pass, n);
    EXPECT(calls > n);
    EXPECT_EQ_INT(valid, calls);
    for (int c = 0; c < HX_CAT_COUNT; c++) EXPECT(cats[c] > 0);
    cJSON_Delete(all);
}

/* The training split's recovery kinds (schedule_fix, send_fix,
 * bad_address, bad_send_address, declined_schedule) have checks too: the
 * oracle's run of each passes (a slip refused then corrected; nothing
 * booked or sent for an unusable address or a declined booking). */
static void test_recovery_tasks_pass(void)
{
    static const char *const kinds[] = {"schedule_fix", "send_fix", "bad_address", "bad_send_address",
                                        "declined_schedule"};
    int seen[5] = {0}, n = 0, pass = 0, valid = 0, calls = 0;
    char why[300];
    for (int c = 0; c < 2; c++) {
        cJSON *all = split_tasks(HX_SPLIT_TRAIN, 30, 5, c ? HX_CAT_REFUSAL : HX_CAT_ERROR), *t;
        cJSON_ArrayForEach(t, all)
        {
            const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(t, "kind"));
            int k = 0;
            while (k < 5 && strcmp(kind, kinds[k])) k++;
            if (k == 5) continue;
            seen[k]++, n++;
            if (run_checked(t, NULL, why, sizeof why, &valid, &calls)) pass++;
            else printf("# %s: %s\n", kind, why);
        }
        cJSON_Delete(all);
    }
    for (int k = 0; k < 5; k++) EXPECT(seen[k] > 0);
    EXPECT_EQ_INT(pass, n);
    EXPECT_EQ_INT(valid, calls);
}

/* ---- the deliberate mistakes ---- */
static void e_attendee(wrong *w, int turn, hx_buf *t)
{
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(w->task, "slots"), "emails"), 0);
    if (turn == 1) replace(t, e->valuestring, "someone@else.example");
}

static void e_midnight(wrong *w, int turn, hx_buf *t)
{
    (void)w;
    char *s = turn == 1 && t->data ? strstr(t->data, "\"start\":\"") : NULL;
    if (s && strlen(s) > 32) memcpy(s + 20, "00:00", 5); /* "start":"YYYY-MM-DDT|HH:MM */
}

/* The second asked person written twice in place of the first. */
static void e_dup_attendee(wrong *w, int turn, hx_buf *t)
{
    const cJSON *emails = cJSON_GetObjectItem(cJSON_GetObjectItem(w->task, "slots"), "emails");
    if (turn == 1) replace(t, cJSON_GetArrayItem(emails, 0)->valuestring, cJSON_GetArrayItem(emails, 1)->valuestring);
}

/* A wrong title and a time outside working hours at once. */
static void e_title_midnight(wrong *w, int turn, hx_buf *t)
{
    e_midnight(w, turn, t);
    if (turn == 1) replace(t, slot(w->task, "topic"), "Something else");
}

static void e_title(wrong *w, int turn, hx_buf *t)
{
    if (turn == 0) replace(t, slot(w->task, "title"), "Something else");
}

static void e_call(wrong *w, int turn, hx_buf *t)
{
    (void)w;
    hx_buf_free(t);
    hx_buf_init(t);
    hx_buf_puts(t, turn == 0 ? "<tool_call>{\"name\": \"calendar.list_events\", \"arguments\": {}}</tool_call>"
                             : "Done.");
}

static void e_no_call(wrong *w, int turn, hx_buf *t)
{
    (void)w, (void)turn;
    hx_buf_free(t);
    hx_buf_init(t);
    hx_buf_puts(t, "Noted.");
}

static void e_loop(wrong *w, int turn, hx_buf *t)
{
    (void)w, (void)turn;
    hx_buf_free(t);
    hx_buf_init(t);
    hx_buf_puts(t, "<tool_call>{\"name\": \"calendar.list_events\", \"arguments\": {}}</tool_call>");
}

/* The right calls, then calls again and again instead of the answer. */
static void e_no_answer(wrong *w, int turn, hx_buf *t)
{
    if (turn >= 2) e_loop(w, turn, t);
}

static void e_other_mail(wrong *w, int turn, hx_buf *t)
{
    (void)w;
    char *id = turn == 1 && t->data ? strstr(t->data, "\"id\":\"") : NULL;
    if (id) id[6] = id[6] == '9' ? '8' : '9';
}

static void expect_fail(int cat, const char *kind, void (*edit)(wrong *, int, hx_buf *), const char *reason)
{
    static cJSON *by_cat[HX_CAT_COUNT];
    if (!by_cat[cat]) by_cat[cat] = tasks(16, 33, cat);
    cJSON *all = by_cat[cat], *t;
    int tried = 0;
    char why[300];
    cJSON_ArrayForEach(t, all)
    {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t, "kind")), kind) || tried >= 2) continue;
        tried++;
        EXPECT(run_checked(t, NULL, why, sizeof why, NULL, NULL));
        EXPECT(!run_checked(t, edit, why, sizeof why, NULL, NULL));
        if (!strstr(why, reason)) printf("# %s: got \"%s\", wanted \"%s\"\n", kind, why, reason);
        EXPECT(strstr(why, reason) != NULL);
    }
    if (!tried) printf("# no %s task in the sample\n", kind);
    EXPECT(tried > 0);
}

static void test_wrong_runs_fail(void)
{
    expect_fail(HX_CAT_MULTI, "schedule", e_attendee, "attendees are not the asked people");
    expect_fail(HX_CAT_MULTI, "schedule", e_midnight, "outside working hours");
    expect_fail(HX_CAT_MULTI, "mail_read", e_other_mail, "was not read");
    expect_fail(HX_CAT_SINGLE, "create_event", e_title, "the new event is not");
    expect_fail(HX_CAT_NONE, "no_tool", e_call, "a tool was called");
    expect_fail(HX_CAT_MEMORY, "remember", e_no_call, "is not remembered");
    expect_fail(HX_CAT_SINGLE, "list_events", e_loop, "no answer (step limit); ");
    expect_fail(HX_CAT_MULTI, "schedule", e_no_answer, "no answer (step limit), though the final state is right");
}

/* Scheduling with several asked people: an event that has one of them
 * twice instead of another fails on its attendees (the check once only
 * counted them); and every flaw of an event is named, not only the first. */
static void test_schedule_flaws(void)
{
    cJSON *all = tasks(24, 35, HX_CAT_MULTI), *t;
    int tried = 0;
    char why[300];
    cJSON_ArrayForEach(t, all)
    {
        const cJSON *emails = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "slots"), "emails");
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t, "kind")), "schedule") ||
            cJSON_GetArraySize(emails) < 2 || tried >= 2)
            continue;
        tried++;
        EXPECT(!run_checked(t, e_dup_attendee, why, sizeof why, NULL, NULL));
        EXPECT(strstr(why, "attendees are not the asked people") != NULL);
        EXPECT(!run_checked(t, e_title_midnight, why, sizeof why, NULL, NULL));
        if (!strstr(why, "outside working hours")) printf("# got \"%s\"\n", why);
        EXPECT(strstr(why, "the event's title is \"Something else\"") && strstr(why, "outside working hours"));
    }
    if (!tried) printf("# no scheduling task with two people in the sample\n");
    EXPECT(tried > 0);
    cJSON_Delete(all);
}

/* What hx_dg_answer_faithful says of a run of a kind whose one call (tool,
 * status) gave result, answered with answer. */
static int answer_ok(const char *kind, const char *tool, const char *result, const char *status,
                     const char *answer)
{
    cJSON *task = cJSON_CreateObject(), *trace = cJSON_CreateObject();
    cJSON *calls = cJSON_AddArrayToObject(trace, "calls"), *k = cJSON_CreateObject();
    cJSON_AddStringToObject(task, "kind", kind);
    cJSON_AddStringToObject(k, "name", tool);
    cJSON_AddStringToObject(k, "status", status);
    cJSON_AddStringToObject(k, "result", result);
    cJSON_AddItemToArray(calls, k);
    cJSON_AddStringToObject(trace, "answer", answer);
    int r = hx_dg_answer_faithful(task, trace);
    cJSON_Delete(task);
    cJSON_Delete(trace);
    return r;
}

/* The demo's day: five events, one of them cancelled, and an all-day one. */
static const char k_list_result[] =
    "{\"events\": [{\"title\": \"Team standup\", \"start\": \"2026-12-02T09:30:00+01:00\"},"
    "{\"title\": \"Vendor demo\", \"start\": \"2026-12-02T11:00:00+01:00\", \"status\": \"cancelled\"},"
    "{\"title\": \"Dentist\", \"start\": \"2026-12-02T16:00:00+01:00\"},"
    "{\"title\": \"Piano lesson (L\u00e9a)\", \"start\": \"2026-12-02T17:00:00+01:00\"},"
    "{\"title\": \"Yoga\", \"start\": \"2026-12-02T18:30:00+01:00\"},"
    "{\"title\": \"Offsite\", \"start\": \"2026-12-02T00:00:00+01:00\", \"all_day\": true}], \"count\": 6}";

static int list_ok(const char *result, const char *status, const char *answer)
{
    return answer_ok("list_events", "calendar.list_events", result, status, answer);
}

/* A list answer states the count without the cancelled event and the
 * first four others' titles and times (the demo's repeated "Dentist at
 * 11:00" does not); nothing to check without a listing or with an empty
 * one. */
static void test_list_answers(void)
{
    EXPECT_EQ_INT(list_ok(k_list_result, "ok",
                          "You have 5 events tomorrow: Team standup at 09:30, Dentist at "
                          "16:00, Piano lesson (L\u00e9a) at 17:00, Yoga at 18:30 and 1 more."),
                  1);
    EXPECT_EQ_INT(list_ok(k_list_result, "ok",
                          "You have 5 events tomorrow: Team standup at 09:30, Dentist at "
                          "11:00, Dentist at 11:00, Dentist at 11:00 and 1 more."),
                  0);
    EXPECT_EQ_INT(list_ok(k_list_result, "ok",
                          "You have 15 events tomorrow: team standup at 09:30, dentist at "
                          "16:00, piano lesson (l\u00e9a) at 17:00, yoga at 18:30 and 1 more."),
                  0);
    EXPECT_EQ_INT(list_ok(k_list_result, "ok",
                          "You have 6 events tomorrow: Team standup at 09:30, Dentist at "
                          "16:00, Piano lesson (L\u00e9a) at 17:00, Yoga at 18:30 and 2 more."),
                  0); /* the cancelled one counted */
    EXPECT_EQ_INT(list_ok("{\"events\": [{\"title\": \"Offsite\", \"start\": "
                          "\"2026-12-02\", \"all_day\": true}], \"count\": 1}",
                          "ok", "You have 1 event tomorrow: Offsite (all day)."),
                  1);
    EXPECT_EQ_INT(list_ok("{\"events\": [], \"count\": 0}", "ok", "Nothing."), -1);
    EXPECT_EQ_INT(list_ok(k_list_result, "error", "You have 5 events."), -1);
    /* a result that is not JSON, or cut short: nothing to check, no crash */
    EXPECT_EQ_INT(list_ok("{\"events\": [{\"title\": ", "ok", "You have 1 event."), -1);
    EXPECT_EQ_INT(list_ok("not json", "ok", "You have 1 event."), -1);
}

/* The other reads: slots' times, busy periods (or their count past five),
 * the first message's subject (or, after a read, its body's first
 * paragraph), file paths from the file root, folder entries; a kind that
 * reads nothing has nothing to check. */
static void test_read_answers(void)
{
    const char *slots = "{\"slots\": [{\"start\": \"2026-12-08T10:00:00+01:00\"}, "
                        "{\"start\": \"2026-12-08T14:30:00+01:00\"}]}";
    EXPECT_EQ_INT(answer_ok("find_slots", "calendar.find_slots", slots, "ok",
                            "You are free for 30 minutes at 2026-12-08 10:00 and 2026-12-08 14:30."),
                  1);
    EXPECT_EQ_INT(answer_ok("find_slots", "calendar.find_slots", slots, "ok",
                            "You are free for 30 minutes at 2026-12-08 10:00."),
                  0);
    const char *busy = "{\"busy\": [{\"start\": \"2026-12-08T10:00:00+01:00\", "
                       "\"end\": \"2026-12-08T11:00:00+01:00\"}]}";
    EXPECT_EQ_INT(answer_ok("free_busy", "calendar.free_busy", busy, "ok",
                            "You are busy from 10:00 to 11:00."), 1);
    EXPECT_EQ_INT(answer_ok("free_busy", "calendar.free_busy", busy, "ok", "You are busy at 10:00."), 0);
    const char *mail = "{\"messages\": [{\"subject\": \"Budget review\"}, "
                       "{\"subject\": \"Lunch\"}], \"total\": 2}";
    EXPECT_EQ_INT(answer_ok("mail_search", "mail.search", mail, "ok",
                            "Bob wrote \"Budget review\" on 2026-11-30 (2 messages in all)."), 1);
    EXPECT_EQ_INT(answer_ok("mail_search", "mail.search", mail, "ok", "Bob wrote \"Budget rev\"."), 0);
    /* a search the model followed with a read: what the read found */
    const char *read = "{\"from\": \"Bob Lee <bob@x.io>\", \"text\": \"Hi Alice,\\n\\n"
                       "The budget review moved to Friday.\\n\\nBob\"}";
    EXPECT_EQ_INT(answer_ok("mail_search", "mail.read", read, "ok",
                            "Bob Lee wrote: The budget review moved to Friday."), 1);
    EXPECT_EQ_INT(answer_ok("mail_search", "mail.read", read, "ok", "Bob wrote \"Budget review\"."), 0);
    EXPECT_EQ_INT(answer_ok("unread_mail", "mail.search", mail, "ok",
                            "You have 2 unread messages: \"Budget review\" from Bob."), 0);
    const char *files = "{\"files\": [{\"path\": \"/home/a/.config/hearth/files/notes/budget.txt\"}]}";
    EXPECT_EQ_INT(answer_ok("file_search", "files.search", files, "ok", "It is notes/budget.txt."), 1);
    EXPECT_EQ_INT(answer_ok("file_search", "files.search", files, "ok", "It is notes/budget."), 0);
    EXPECT_EQ_INT(answer_ok("files_list", "files.list", "{\"entries\": [{\"name\": \"a.txt\"}]}",
                            "ok", "Your notes folder has 1 file: a.txt."),
                  1);
    EXPECT_EQ_INT(answer_ok("send_mail", "mail.send", "{}", "ok", "Sent."), -1);
}

/* The readable transcript of an oracle run names the request, the calls,
 * the tool results with their status, the expected calls and the verdict. */
static void test_transcript(void)
{
    cJSON *all = tasks(16, 33, HX_CAT_MULTI), *t, *rec = NULL, *trace = NULL;
    for (t = all->child; t && strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t, "kind")), "schedule");) t = t->next;
    ASSERT(t);
    char home[128], *text = NULL;
    size_t len = 0;
    snprintf(home, sizeof home, "%s/tr", dir());
    hx_dg_eval_run er = {NULL, HX_TPL_COMPACT, 1, 1, NULL, NULL, 0, 0, NULL, 0, NULL, 0};
    hx_dg_validator *v = NULL;
    hx_err err = {0};
    int pass = 0;
    ASSERT(hx_dg_eval_task_traced(&er, t, home, &v, &pass, NULL, NULL, &rec, &trace, &err) == HX_OK);
    EXPECT(pass && trace && rec);
    FILE *f = open_memstream(&text, &len);
    hx_dg_transcript(f, t, trace, pass, cJSON_GetStringValue(cJSON_GetObjectItem(rec, "reason")));
    fclose(f);
    EXPECT(strstr(text, cJSON_GetStringValue(cJSON_GetObjectItem(t, "request"))) != NULL);
    EXPECT(strstr(text, "schedule PASS: ok") != NULL);
    EXPECT(strstr(text, "[tool calendar.find_slots: ok] {\"range\"") != NULL);
    EXPECT(strstr(text, "call {\"name\":\"calendar.create_event\"") != NULL);
    EXPECT(strstr(text, "[tool calendar.create_event: ok]") != NULL);
    EXPECT(strstr(text, "expected calendar.create_event {") != NULL);
    EXPECT(strstr(text, "status: answered") != NULL);
    /* no trace (a run that never started): the task and verdict still */
    free(text);
    f = open_memstream(&text, &len);
    hx_dg_transcript(f, t, NULL, 0, "no run");
    fclose(f);
    EXPECT(strstr(text, "FAIL: no run") && strstr(text, "expected calendar.find_slots"));
    free(text);
    cJSON_Delete(rec);
    cJSON_Delete(trace);
    hx_dg_validator_free(v);
    cJSON_Delete(all);
}

/* A small fixed sample through a real model and the grammar: whatever it
 * decides, every call it makes is valid against the schemas. */
static void test_model_sample(void)
{
    const char *path = "models/hearth-tiny.gguf";
    if (access(path, R_OK) != 0 && !(path = test_shared_file("models/stories260K.gguf"))) return;
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    hx_err err = {0};
    ASSERT(hx_model_load(path, &mp, &m, &err) == HX_OK);
    int tiny = strstr(path, "hearth-tiny") != NULL;
    int family = tiny ? hx_tpl_detect(hx_model_gguf(m), hx_model_vocab(m)) : HX_TPL_COMPACT;
    cJSON *all = tasks(3, 5, -1), *t;
    int n = 0, pass = 0, valid = 0, calls = 0;
    char home[128], why[300];
    snprintf(home, sizeof home, "%s/model", dir());
    cJSON_ArrayForEach(t, all)
    {
        hx_dg_world dw;
        hx_source src;
        cJSON *trace = NULL, *tools;
        ASSERT(hx_dg_task_world(t, home, &dw, &err) == HX_OK);
        tools = hx_tools_list_json(dw.reg);
        hx_dg_validator *v = hx_dg_validator_new(tools, &err);
        ASSERT(v && hx_dg_engine_source(m, dw.reg, family, 1, &src, &err) == HX_OK);
        cJSON *before = hx_dg_check_before(t, &dw);
        /* stories260K never calls on its own: its first turn must call,
         * and its nonsense is cut short */
        hx_planner_params pp = hx_dg_planner_params(family);
        if (!tiny) pp.tool_choice = HX_CHOICE_REQUIRED, pp.max_steps = 2, pp.max_tokens = 400;
        hx_dg_run(&dw, t, &src, NULL, &pp, &trace, &err);
        ASSERT(trace);
        pass += hx_dg_check(t, before, trace, &dw, v, &valid, &calls, why, sizeof why);
        cJSON *rec = hx_dg_eval_record(t, trace, 0, why);
        EXPECT(cJSON_GetObjectItem(rec, "reason") && cJSON_GetObjectItem(rec, "calls"));
        cJSON_Delete(rec);
        n++;
        cJSON_Delete(before);
        cJSON_Delete(trace);
        hx_source_free(&src);
        hx_dg_validator_free(v);
        cJSON_Delete(tools);
        hx_dg_world_close(&dw);
        hx_world_rmtree(home, NULL);
    }
    printf("# %s: %d/%d tasks passed, %d/%d calls schema-valid\n", path, pass, n, valid, calls);
    EXPECT_EQ_INT(n, 3);
    EXPECT(tiny || calls >= n);
    EXPECT_EQ_INT(valid, calls);
    cJSON_Delete(all);
    hx_model_free(m);
}

/* --decode both's parts: a task run one token per pass and speculatively
 * makes the same calls and answer; the counters add up (every generated
 * token once, tool-call turns a part of them, fewer passes than tokens
 * speculatively, one pass per token plainly, pass time within the total),
 * and the oracle's source adds nothing. */
static void test_generation_counters(void)
{
    const char *path = "models/hearth-tiny.gguf";
    if (access(path, R_OK)) SKIP("%s is not here (run from the repository root)", path);
    hx_model *m = NULL;
    hx_err err = {0};
    ASSERT(hx_model_load(path, NULL, &m, &err) == HX_OK);
    int family = hx_tpl_detect(hx_model_gguf(m), hx_model_vocab(m));
    cJSON *all = tasks(4, 5, HX_CAT_SINGLE), *t;
    char home[128];
    snprintf(home, sizeof home, "%s/gen", dir());
    hx_dg_validator *v = NULL;
    hx_gen_stats g[2] = {{0}, {0}};
    int same = 0, n = 0;
    cJSON_ArrayForEach(t, all)
    {
        cJSON *r[2] = {NULL, NULL};
        for (int plain = 0; plain < 2; plain++) {
            hx_dg_eval_run er = {m, family, 1, 0, NULL, NULL, 0, plain, &g[plain], 0, NULL, 0};
            int pass = 0;
            EXPECT(hx_dg_eval_task(&er, t, home, &v, &pass, NULL, NULL, &r[plain], &err) == HX_OK);
        }
        same += r[0] && r[1] &&
                cJSON_Compare(cJSON_GetObjectItem(r[0], "calls"), cJSON_GetObjectItem(r[1], "calls"), 1) &&
                cJSON_Compare(cJSON_GetObjectItem(r[0], "answer"), cJSON_GetObjectItem(r[1], "answer"), 1);
        n++;
        cJSON_Delete(r[0]);
        cJSON_Delete(r[1]);
    }
    EXPECT_EQ_INT(same, n);
    EXPECT(g[0].tokens > 0 && g[0].tokens == g[1].tokens);
    EXPECT(g[0].call_tokens > 0 && g[0].call_tokens == g[1].call_tokens && g[0].call_tokens <= g[0].tokens);
    EXPECT(g[1].spec.passes <= g[1].tokens && g[1].spec.drafted == 0);
    EXPECT(g[0].spec.passes < g[0].tokens);
    for (int k = 0; k < 2; k++)
        EXPECT(g[k].seconds > 0 && g[k].spec.pass_seconds <= g[k].seconds &&
               g[k].call_seconds <= g[k].seconds);
    printf("     %d tasks: %lld tokens (%lld in tool-call turns), %lld passes plain, %lld speculative\n",
           n, (long long)g[0].tokens, (long long)g[0].call_tokens, (long long)g[1].spec.passes,
           (long long)g[0].spec.passes);
    hx_gen_stats o = {0};
    hx_dg_eval_run orc = {NULL, HX_TPL_COMPACT, 1, 1, NULL, NULL, 0, 0, &o, 0, NULL, 0};
    int pass = 0;
    EXPECT(hx_dg_eval_task(&orc, all->child, home, &v, &pass, NULL, NULL, NULL, &err) == HX_OK);
    EXPECT(pass && o.tokens == 0 && o.spec.passes == 0);
    hx_dg_validator_free(v);
    cJSON_Delete(all);
    hx_model_free(m);
}

/* Broken tasks: a clear error or a failed check with a reason, never a
 * crash. */
static void test_broken_tasks(void)
{
    static const char *const bad_worlds[] = {
        "{}", "{\"world_seed\": 5, \"split\": \"train\"}",
        "{\"world_seed\": \"12x\", \"split\": \"train\"}",
        "{\"world_seed\": \"12\", \"split\": \"test\"}",
    };
    char home[128], why[300];
    hx_err err = {0};
    hx_dg_world dw;
    snprintf(home, sizeof home, "%s/broken", dir());
    for (int i = 0; i < 4; i++) {
        cJSON *t = cJSON_Parse(bad_worlds[i]);
        memset(&err, 0, sizeof err);
        EXPECT_EQ_INT(hx_dg_task_world(t, home, &dw, &err), HX_ERR_FORMAT);
        EXPECT(strstr(err.msg, "world_seed") || strstr(err.msg, "split"));
        cJSON_Delete(t);
    }
    static const char *const kinds[] = {
        "list_events", "find_slots", "free_busy", "create_event", "mail_search", "unread_mail",
        "file_search", "files_list", "send_mail", "schedule", "mail_read", "file_read",
        "cancel_event", "move_event", "chat", "no_tool", "now", "declined_send",
        "declined_create", "taint_reply", "policy_deny", "file_missing", "not_organizer",
        "bad_when", "remember", "recall", "forget", "no_such_kind"};
    cJSON *t0 = cJSON_Parse("{\"world_seed\": \"3\", \"split\": \"heldout\"}");
    ASSERT(hx_dg_task_world(t0, home, &dw, &err) == HX_OK);
    cJSON *tools = hx_tools_list_json(dw.reg);
    hx_dg_validator *v = hx_dg_validator_new(tools, &err);
    cJSON *trace = cJSON_Parse("{\"status\": \"answered\", \"answer\": \"x\", \"calls\": "
                               "[{\"name\": \"mail.read\", \"arguments\": 7, \"status\": \"ok\"}, {}]}");
    int fails = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        cJSON *t = cJSON_Duplicate(t0, 1);
        cJSON_AddStringToObject(t, "kind", kinds[i]);
        cJSON_AddStringToObject(t, "slots", "not an object");
        cJSON *before = hx_dg_check_before(t, &dw);
        int ok = hx_dg_check(t, before, trace, &dw, v, NULL, NULL, why, sizeof why);
        fails += !ok;
        EXPECT(ok || why[0]);
        cJSON_Delete(before);
        cJSON_Delete(t);
    }
    EXPECT(fails > 20);
    cJSON_Delete(trace);
    hx_dg_validator_free(v);
    cJSON_Delete(tools);
    cJSON_Delete(t0);
    hx_dg_world_close(&dw);
}

int main(void)
{
    RUN(test_oracle_passes);
    RUN(test_recovery_tasks_pass);
    RUN(test_wrong_runs_fail);
    RUN(test_schedule_flaws);
    RUN(test_list_answers);
    RUN(test_read_answers);
    RUN(test_transcript);
    RUN(test_broken_tasks);
    RUN(test_generation_counters);
    RUN(test_model_sample);
    if (g_dir[0]) hx_world_rmtree(g_dir, NULL);
    return test_summary();
}
