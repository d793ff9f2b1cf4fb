/* persona.c: a sample user with habits no base model can know (one room,
 * 45-minute meetings, a colleague called by a nickname): their accepted
 * episodes, held-out requests and the check of a run's calls, for the
 * personalization proof (make bench-persona). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim/sim.h"

/* Colleagues, what the user calls them, the company and the room: plain
 * names and words (a small model's vocabulary spells them in a few
 * tokens; the habits are to be memorized, not copied). */
static const struct {
    const char *first, *nick, *last, *company, *room;
} colleagues[] = {
    {"Robert", "Bobby", "Keller", "northwind.com", "Room Cedar"},
    {"William", "Billy", "Hart", "bluepeak.io", "Room Orion"},
    {"Katherine", "Kate", "Moreno", "lakeside.org", "Room Maple"},
    {"Elizabeth", "Liz", "Brandt", "greenfield.net", "Room Atlas"},
    {"Alexander", "Sasha", "Volkov", "harborline.com", "Room Willow"},
    {"Margaret", "Maggie", "Doyle", "sunvale.io", "Room Summit"},
    {"Richard", "Rick", "Alvarez", "ironbridge.co", "Room Harbor"},
    {"Jennifer", "Jenny", "Lindgren", "copperleaf.com", "Room Beacon"},
};
#define N_COLLEAGUES ((int)(sizeof colleagues / sizeof colleagues[0]))

/* Phrasings of a meeting request; the held-out ones are never trained on,
 * nor their verbs ("arrange", "line up", "sort out", "grab", "pencil in")
 * or their "catch-up", "regarding", "go over". None names a length, a
 * room, or starts with the nickname (the style may lower-case a request's
 * first letter). Eight, not more: a history phrased 16 ways (6 with a
 * length) taught the habits worse, 14 and 11 of 20 held-out requests
 * against 15 (make bench-persona). */
static const char *const train_tpl[] = {
    "Set up a meeting with {who} about {topic} {when}",
    "Schedule a meeting with {who} {when} about {topic}",
    "Book a meeting with {who} {when} to talk about {topic}",
    "Find time {when} to meet {who} about {topic}",
    "Put a meeting with {who} in my calendar {when} about {topic}",
    "I need to meet {who} {when} about {topic}",
    "Organize a meeting about {topic} with {who} {when}",
    "Get some time with {who} {when} on {topic}",
};
/* Training phrasings that state a length (a share of the user's history:
 * the 45 minutes is what they get when they name none). */
static const char *const train_len_tpl[] = {
    "Set up a {dur}-minute meeting with {who} about {topic} {when}",
    "Schedule {dur} minutes with {who} {when} about {topic}",
    "Book a {dur}-minute meeting with {who} {when} to talk about {topic}",
    "Find {dur} minutes {when} to meet {who} about {topic}",
};
static const int stated_minutes[] = {15, 30, 60, 90};
static const char *const heldout_tpl[] = {
    "Arrange a catch-up with {who} {when} on {topic}",
    "Can you line up a meeting with {who} about {topic} {when}?",
    "Sort out a meeting with {who} {when} regarding {topic}",
    "Grab time with {who} {when} to go over {topic}",
    "Pencil in a meeting with {who} {when} about {topic}",
};
typedef struct tpl_set {
    const char *const *tpl;
    int n;
} tpl_set;
#define TPL_SET(a) {a, (int)(sizeof a / sizeof *a)}
static const tpl_set train_set = TPL_SET(train_tpl), train_len_set = TPL_SET(train_len_tpl),
                     heldout_set = TPL_SET(heldout_tpl);

static void lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z') *s = (char)(*s + 32);
}

/* people[0] becomes colleague k, and the user works at the same company. */
static void make_colleague(hx_persona *p, int k)
{
    hx_wperson *c = &p->w.people[0], *u = &p->w.user;
    char first[24], last[24];
    snprintf(c->first, sizeof c->first, "%s", colleagues[k].first);
    snprintf(c->last, sizeof c->last, "%s", colleagues[k].last);
    snprintf(c->name, sizeof c->name, "%s %s", c->first, c->last);
    snprintf(last, sizeof last, "%s", c->last);
    lower(last);
    snprintf(first, sizeof first, "%s", c->first);
    lower(first);
    snprintf(c->email, sizeof c->email, "%s.%s@%s", first, last, colleagues[k].company);
    snprintf(first, sizeof first, "%s", u->first);
    snprintf(last, sizeof last, "%s", u->last);
    lower(first), lower(last);
    snprintf(u->email, sizeof u->email, "%s.%s@%s", first, last, colleagues[k].company);
    if (strlen(u->email) > 36) snprintf(u->email, sizeof u->email, "%s@%s", first, colleagues[k].company);
    for (int i = 1; i < p->w.n_people; i++) /* nobody else answers to the nickname */
        if (!strcasecmp(p->w.people[i].first, colleagues[k].nick))
            snprintf(p->w.people[i].first, sizeof p->w.people[i].first, "%s", "Noor");
}

int hx_persona_generate(uint64_t seed, hx_persona *p, hx_err *err)
{
    memset(p, 0, sizeof *p);
    int rc = hx_world_generate(seed, HX_SPLIT_HELDOUT, 0, &p->w, err);
    if (rc) return rc;
    const int k = (int)((seed ? seed - 1 : 0) % N_COLLEAGUES);
    make_colleague(p, k);
    snprintf(p->nickname, sizeof p->nickname, "%s", colleagues[k].nick);
    snprintf(p->room, sizeof p->room, "%s", colleagues[k].room);
    p->minutes = 45;
    p->others_pct = 50;
    p->stated_pct = 25;
    p->first_day = (int)p->w.today;
    p->w.n_mems = 0; /* no memory names anyone: only the episodes teach the habits */
    return HX_OK;
}

/* ---- requests ---- */
static int is_weekday(int64_t day)
{
    const int wd = (int)(((day + 4) % 7 + 7) % 7);
    return wd != 0 && wd != 6;
}

/* w as it is on local day `day` at `minutes`: the request's "now". */
static void at_day(const hx_world *w, int64_t day, int minutes, hx_world *out)
{
    *out = *w;
    out->today = day;
    out->now = hx_world_local(w, day, minutes);
    hx_when_format(out->now, w->tz, 0, out->now_iso, sizeof out->now_iso);
}

/* Of a training request: with whom (0: the colleague by nickname, else
 * that person of the world, named by address) and the length it states
 * (0: none), in the persona's shares; held-out requests are always the
 * colleague's with no length. No draw where a share is 0, so shares of 0
 * give the history of a user who only ever meets the colleague. */
static void draw_history(const hx_persona *p, hx_rng *r, int split, int *other, int *stated)
{
    *other = 0, *stated = 0;
    if (split != HX_SPLIT_TRAIN) return;
    if (p->others_pct > 0 && p->w.n_people > 1 && hx_rng_below(r, 100) < p->others_pct)
        *other = 1 + hx_rng_below(r, p->w.n_people - 1);
    const int n_len = (int)(sizeof stated_minutes / sizeof *stated_minutes);
    if (p->stated_pct > 0 && hx_rng_below(r, 100) < p->stated_pct)
        *stated = stated_minutes[hx_rng_below(r, n_len)];
}

static cJSON *one_request(const hx_persona *p, const hx_world *wd, hx_rng *r, int split)
{
    int other, stated;
    draw_history(p, r, split, &other, &stated);
    const tpl_set *set = split != HX_SPLIT_TRAIN ? &heldout_set : stated ? &train_len_set : &train_set;
    char when[64], topic[32], req[512];
    cJSON *slots = cJSON_CreateObject(), *emails = cJSON_AddArrayToObject(slots, "emails");
    cJSON_AddItemToArray(emails, cJSON_CreateString(p->w.people[other].email));
    hx_dg_range_phrase(wd, r, hx_dg_future_weekday(wd, r, 1, 9), when, sizeof when);
    hx_world_topic(r, split, topic, sizeof topic);
    cJSON_AddStringToObject(slots, "who", other ? p->w.people[other].email : p->nickname);
    cJSON_AddStringToObject(slots, "nickname", other ? "" : p->nickname);
    cJSON_AddStringToObject(slots, "when", when);
    cJSON_AddStringToObject(slots, "topic", topic);
    cJSON_AddNumberToObject(slots, "dur", stated ? stated : p->minutes);
    cJSON_AddStringToObject(slots, "location", p->room);
    const int ti = hx_rng_below(r, set->n);
    hx_dg_phrase(r, set->tpl[ti], slots, req, sizeof req);
    return hx_dg_task_make(wd, HX_CAT_MULTI, "persona_meeting", req, ti, slots);
}

cJSON *hx_persona_requests(const hx_persona *p, int split, int n, int64_t day0, uint64_t seed)
{
    cJSON *all = cJSON_CreateArray();
    hx_world *wd = hx_calloc(1, sizeof *wd);
    hx_rng r;
    hx_rng_seed(&r, seed, 0x9e76 + (uint64_t)split);
    int64_t day = day0;
    for (int i = 0; all && wd && i < n; i++, day++) {
        while (!is_weekday(day)) day++;
        at_day(&p->w, day, p->w.work_start + 30, wd);
        cJSON *t = one_request(p, wd, &r, split);
        if (!t) break;
        char id[48];
        snprintf(id, sizeof id, "persona-%s-%d", split == HX_SPLIT_TRAIN ? "train" : "heldout", i);
        cJSON_AddStringToObject(t, "id", id);
        cJSON_AddItemToArray(all, t);
    }
    if (!wd || cJSON_GetArraySize(all) != n) cJSON_Delete(all), all = NULL;
    free(wd);
    return all;
}

/* ---- checking a run's calls ---- */
static const char *js(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

static int64_t iso_t(const char *iso)
{
    hx_when_range r;
    return hx_when_parse(iso, 0, "UTC", &r, NULL) ? -1 : r.start;
}

/* The created event's length (the tool's result), else the asked one,
 * else the tool's default hour. */
static int call_minutes(const cJSON *call)
{
    if (!strcmp(js(call, "status"), "ok")) {
        cJSON *res = cJSON_Parse(js(call, "result"));
        const cJSON *c = cJSON_GetObjectItem(res, "created");
        int64_t s = iso_t(js(c, "start")), e = iso_t(js(c, "end"));
        cJSON_Delete(res);
        if (s >= 0 && e >= s) return (int)((e - s) / 60);
    }
    const cJSON *d = cJSON_GetObjectItem(cJSON_GetObjectItem(call, "arguments"), "duration_minutes");
    return cJSON_IsNumber(d) ? d->valueint : 60;
}

/* The attendees are exactly the colleague ("addr" or "Name <addr>"). */
static int only_colleague(const hx_persona *p, const cJSON *att)
{
    const cJSON *a = cJSON_GetArrayItem(att, 0);
    return cJSON_GetArraySize(att) == 1 && cJSON_IsString(a) &&
           strcasestr(a->valuestring, p->w.people[0].email) != NULL;
}

int hx_persona_check(const hx_persona *p, const cJSON *calls, char *why, size_t n)
{
    const cJSON *last = NULL, *slots = NULL, *c;
    cJSON_ArrayForEach(c, calls)
    {
        if (!strcmp(js(c, "name"), "calendar.create_event")) last = c;
        if (!strcmp(js(c, "name"), "calendar.find_slots")) slots = c;
    }
    if (!last && !slots) return snprintf(why, n, "no calendar.create_event or find_slots call"), 0;
    if (!last) { /* no booking: the search's length and attendees, no room */
        const cJSON *a = cJSON_GetObjectItem(slots, "arguments");
        const cJSON *d = cJSON_GetObjectItem(a, "duration_minutes");
        int bits = (cJSON_IsNumber(d) && d->valueint == p->minutes ? HX_HABIT_MINUTES : 0) |
                   (only_colleague(p, cJSON_GetObjectItem(a, "attendees")) ? HX_HABIT_NICKNAME : 0);
        snprintf(why, n, "no calendar.create_event call (find_slots: %d minutes, %s)",
                 cJSON_IsNumber(d) ? d->valueint : 0,
                 bits & HX_HABIT_NICKNAME ? "the colleague" : "not the colleague alone");
        return bits;
    }
    const cJSON *args = cJSON_GetObjectItem(last, "arguments");
    const cJSON *att = cJSON_GetObjectItem(args, "attendees");
    const int minutes = call_minutes(last);
    int bits = 0;
    bits |= !strcasecmp(js(args, "location"), p->room) ? HX_HABIT_ROOM : 0;
    bits |= minutes == p->minutes ? HX_HABIT_MINUTES : 0;
    bits |= only_colleague(p, att) ? HX_HABIT_NICKNAME : 0;
    char *a = cJSON_PrintUnformatted(att);
    if (!(bits & HX_HABIT_ROOM))
        snprintf(why, n, "location \"%.60s\", not \"%s\"", js(args, "location"), p->room);
    else if (!(bits & HX_HABIT_MINUTES))
        snprintf(why, n, "%d minutes, not %d", minutes, p->minutes);
    else if (!(bits & HX_HABIT_NICKNAME))
        snprintf(why, n, "attendees %.100s, not %s", a ? a : "none", p->w.people[0].email);
    else snprintf(why, n, "ok");
    cJSON_free(a);
    return bits;
}

static int booked(const cJSON *trace)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(trace, "calls"))
        if (!strcmp(js(c, "name"), "calendar.create_event") && !strcmp(js(c, "status"), "ok"))
            return 1;
    return 0;
}

/* ---- the user's accepted episodes ---- */

/* One training request run by the oracle in dw: the planner records the
 * episode in dw's memory; the user accepts it if it is good. */
static int run_episode(hx_dg_world *dw, const cJSON *task, const cJSON *tools,
                       hx_dg_validator *v, int *accepted, hx_err *err)
{
    hx_source src;
    hx_planner *pl = NULL;
    cJSON *trace = NULL;
    hx_err e2 = {0};
    char why[256] = "";
    if (hx_dg_oracle_new(task, &dw->w, dw->reg, &pl, &src)) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_dg_run(dw, task, &src, &pl, NULL, &trace, &e2);
    const int good = trace && hx_dg_verify(task, trace, &src, v, tools, why, sizeof why) && booked(trace);
    const int64_t id = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(trace, "episode"));
    int rc = HX_OK;
    if (id > 0)
        rc = hx_memory_episode_set_verdict(dw->mem, id, good ? HX_VERDICT_ACCEPTED : HX_VERDICT_REJECTED,
                                           NULL, err);
    else if (trace) rc = hx_err_set(err, HX_ERR_INTERNAL, "the planner recorded no episode");
    if (!good) hx_log_debug("persona: %s rejected: %s", js(task, "id"), trace ? why : e2.msg);
    *accepted = !rc && good && id > 0;
    cJSON_Delete(trace);
    hx_source_free(&src);
    return rc;
}

int hx_persona_write_episodes(const hx_persona *p, const cJSON *requests, const char *home,
                              int *n_accepted, hx_err *err)
{
    hx_dg_world dw;
    hx_dg_validator *v = NULL;
    cJSON *tools = NULL;
    int n = 0, rc = hx_dg_world_open_w(&p->w, home, &dw, err);
    if (!rc && !(tools = hx_tools_list_json(dw.reg))) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!rc && !(v = hx_dg_validator_new(tools, err))) rc = err->rc ? err->rc : HX_ERR_INTERNAL;
    for (const cJSON *t = rc ? NULL : requests->child; t && !rc; t = t->next) {
        int ok = 0;
        rc = run_episode(&dw, t, tools, v, &ok, err);
        n += ok;
    }
    if (n_accepted) *n_accepted = n;
    hx_dg_validator_free(v);
    cJSON_Delete(tools);
    hx_dg_world_close(&dw);
    return rc;
}

/* ---- held-out runs ---- */
int hx_persona_eval(const hx_persona *p, const hx_dg_eval_run *o, const cJSON *request,
                    const char *home, int *habits, int *was_booked, cJSON **record, hx_err *err)
{
    hx_dg_world dw;
    hx_source src = {0};
    hx_planner *pl = NULL;
    cJSON *trace = NULL;
    char why[256];
    *habits = 0, *was_booked = 0;
    if (record) *record = NULL;
    int rc = hx_dg_world_open_w(&p->w, home, &dw, err);
    if (!rc) rc = o->oracle ? hx_dg_oracle_new(request, &dw.w, dw.reg, &pl, &src)
                            : hx_dg_engine_source_run(o, dw.reg, &src, err);
    if (!rc) {
        hx_err e2 = {0};
        hx_planner_params pp = hx_dg_eval_params(o);
        hx_dg_run(&dw, request, &src, &pl, &pp, &trace, &e2);
    }
    if (trace) {
        *habits = hx_persona_check(p, cJSON_GetObjectItem(trace, "calls"), why, sizeof why);
        *was_booked = booked(trace);
        if (record) {
            *record = hx_dg_eval_record(request, trace, *habits == HX_HABIT_ALL, why);
            cJSON_AddNumberToObject(*record, "habits", *habits);
        }
    }
    cJSON_Delete(trace);
    hx_source_free(&src);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return rc;
}
