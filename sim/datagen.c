/* datagen.c: requests in many phrasings over generated worlds, and the
 * oracle that answers them through the real planner and tools (training
 * trajectories for hearth-tiny, and the tasks of the agent evaluation). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim/sim.h"

static const char *const cat_names[HX_CAT_COUNT] = {"single", "multi", "none",
                                                    "refusal", "error", "memory"};

const char *hx_dg_category_name(int cat)
{
    return cat >= 0 && cat < HX_CAT_COUNT ? cat_names[cat] : "unknown";
}

int hx_dg_category_parse(const char *name)
{
    for (int i = 0; i < HX_CAT_COUNT; i++)
        if (name && !strcmp(name, cat_names[i])) return i;
    return -1;
}

/* ---- phrasing: templates with {slot}s, crossed with style ---- */

int hx_dg_template_heldout(int i, int n)
{
    return n >= 5 && i % 5 == 4;
}

/* Training also draws from n_extra phrasings after a kind's n templates
 * (index n and up) that held-out tasks never use, so extras leave
 * held-out task files unchanged. A kind of fewer than five templates
 * uses them all in both splits. */
static int pick_template(hx_rng *r, int split, int n, int n_extra)
{
    if (split != HX_SPLIT_TRAIN) n_extra = 0;
    for (;;) {
        int i = hx_rng_below(r, n + n_extra);
        if (i >= n || n < 5 || hx_dg_template_heldout(i, n) == (split == HX_SPLIT_HELDOUT))
            return i;
    }
}

/* One typo in a literal word of at least 5 letters: two letters swapped
 * or one dropped. */
static void typo(hx_rng *r, char *s)
{
    size_t n = strlen(s);
    for (int tries = 0; tries < 6; tries++) {
        size_t i = (size_t)hx_rng_below(r, (int)n), j = i;
        while (j < n && s[j] >= 'a' && s[j] <= 'z') j++;
        if (j - i < 5 || (i && s[i - 1] != ' ')) continue;
        size_t k = i + 1 + (size_t)hx_rng_below(r, (int)(j - i - 2));
        if (hx_rng_chance(r, 0.5)) {
            char c = s[k];
            s[k] = s[k + 1];
            s[k + 1] = c;
        } else {
            memmove(s + k, s + k + 1, n - k);
        }
        return;
    }
}

/* Expands {name} from slots; literal text may get a typo (never a slot). */
static void expand(hx_rng *r, const char *tpl, const cJSON *slots, int typos, hx_buf *out)
{
    char lit[512];
    size_t nl = 0;
    for (const char *p = tpl;; p++) {
        if (*p && *p != '{' && nl + 1 < sizeof lit) {
            lit[nl++] = *p;
            continue;
        }
        lit[nl] = 0;
        if (typos && nl >= 5 && hx_rng_chance(r, 0.5)) typo(r, lit), typos--;
        hx_buf_puts(out, lit);
        nl = 0;
        if (!*p) break;
        const char *e = strchr(p, '}');
        if (!e) break;
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)(e - p - 1), p + 1);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(slots, key);
        if (cJSON_IsString(v)) hx_buf_puts(out, v->valuestring);
        else if (cJSON_IsNumber(v)) hx_buf_printf(out, "%d", v->valueint);
        p = e;
    }
}

static const char *const prefixes[] = {"Please ", "Could you ", "Can you ", "Hey, ",
                                       "Quick one: ", "Hi! ", "I need you to "};
static const char *const contexts[] = {"I'm swamped this week. ", "Before I forget: ",
                                       "For the team: ", "Small favour. ", "Busy day. "};
static const char *const suffixes[] = {" please", ", thanks", " thx", ", thank you"};

/* A composed request (its opener, closer, case and end drawn already):
 * the slots filled, maybe a typo, maybe a capital first letter. */
static void phrase_composed(hx_rng *r, const char *tpl, const cJSON *slots, char *buf, size_t n)
{
    hx_buf out;
    hx_buf_init(&out);
    expand(r, tpl, slots, hx_rng_chance(r, 0.15), &out);
    char *o = out.data ? out.data : "";
    if (hx_rng_chance(r, 0.5) && o[0] >= 'a' && o[0] <= 'z') o[0] = (char)(o[0] - 32);
    snprintf(buf, n, "%s", o);
    hx_buf_free(&out);
}

/* The request: a template, the slots and a style (politeness, extra
 * context, lower case, typos, end punctuation). */
void hx_dg_phrase(hx_rng *r, const char *tpl, const cJSON *slots, char *buf, size_t n)
{
    hx_buf body, out;
    hx_buf_init(&body);
    hx_buf_init(&out);
    expand(r, tpl, slots, hx_rng_chance(r, 0.15), &body);
    char *s = body.data ? body.data : "";
    size_t l = strlen(s);
    int question = l && s[l - 1] == '?';
    if (l && (s[l - 1] == '?' || s[l - 1] == '.')) s[--l] = 0;
    if (hx_rng_chance(r, 0.12)) hx_buf_puts(&out, contexts[hx_rng_below(r, 5)]);
    int pre = !question && hx_rng_chance(r, 0.3);
    if (pre) hx_buf_puts(&out, prefixes[hx_rng_below(r, 7)]);
    if ((pre || hx_rng_chance(r, 0.2)) && s[0] >= 'A' && s[0] <= 'Z' && (s[1] < 'A' || s[1] > 'Z'))
        s[0] = (char)(s[0] + 32);
    hx_buf_puts(&out, s);
    if (!question && hx_rng_chance(r, 0.2)) hx_buf_puts(&out, suffixes[hx_rng_below(r, 4)]);
    int end = hx_rng_below(r, 4);
    if (question) hx_buf_puts(&out, "?");
    else if (end == 1) hx_buf_puts(&out, ".");
    else if (end == 2) hx_buf_puts(&out, "!");
    char *o = out.data ? out.data : "";
    if (hx_rng_chance(r, 0.5) && o[0] >= 'a' && o[0] <= 'z') o[0] = (char)(o[0] - 32);
    snprintf(buf, n, "%s", o);
    hx_buf_free(&body);
    hx_buf_free(&out);
}

/* ---- time phrases, each checked with the reader the tools use ---- */
static int when_ok(const hx_world *w, const char *p, int point)
{
    hx_when_range rg;
    if (hx_when_parse(p, w->now, w->tz, &rg, NULL)) return 0;
    return point ? rg.is_point : !rg.is_point;
}

int64_t hx_dg_future_weekday(const hx_world *w, hx_rng *r, int lo, int hi)
{
    for (;;) {
        int64_t d = w->today + lo + hx_rng_below(r, hi - lo + 1);
        int wd = (int)(((d + 4) % 7 + 7) % 7);
        if (wd != 0 && wd != 6) return d;
    }
}

/* A period on day (or this/next week): "tomorrow afternoon", "on Friday". */
void hx_dg_range_phrase(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n)
{
    static const char *const parts[] = {" morning", " afternoon"};
    char d[40], p[64];
    hx_world_day_phrase(w, r, day, d, sizeof d);
    if (hx_rng_chance(r, 0.4)) {
        snprintf(p, sizeof p, "%s%s", d, parts[hx_rng_below(r, 2)]);
        if (when_ok(w, p, 0)) {
            snprintf(buf, n, "%s", p);
            return;
        }
    }
    snprintf(buf, n, "%s", d);
}

/* A moment on day inside working hours: "tomorrow at 10am". */
static void point_phrase(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n, int *minutes)
{
    char d[40], p[64], t[16];
    hx_world_day_phrase(w, r, day, d, sizeof d);
    for (int tries = 0; tries < 10; tries++) {
        int m = w->work_start + 30 * hx_rng_below(r, (w->work_end - w->work_start) / 30 - 1);
        int h = m / 60, mm = m % 60, h12 = h > 12 ? h - 12 : h;
        switch (hx_rng_below(r, 3)) {
        case 0: snprintf(t, sizeof t, "%02d:%02d", h, mm); break;
        case 1:
            if (mm) snprintf(t, sizeof t, "%d:%02d%s", h12, mm, h >= 12 ? "pm" : "am");
            else snprintf(t, sizeof t, "%d%s", h12, h >= 12 ? "pm" : "am");
            break;
        default: snprintf(t, sizeof t, "%d:%02d", h, mm);
        }
        snprintf(p, sizeof p, "%s at %s", strncmp(d, "on ", 3) ? d : d + 3, t);
        hx_when_range rg;
        if (!hx_when_parse(p, w->now, w->tz, &rg, NULL) && rg.is_point &&
            rg.start == hx_world_local(w, day, m)) {
            snprintf(buf, n, "%s", p);
            *minutes = m;
            return;
        }
    }
    int y, mo, dd;
    hx_civil_from_days(day, &y, &mo, &dd);
    *minutes = w->work_start;
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d", y, mo, dd, *minutes / 60, *minutes % 60);
}

static const int durs[] = {15, 20, 30, 45, 60, 90, 120};

/* A request that names no length gets create_event's documented default,
 * an hour (training phrasings only: every held-out one names a length). */
static void default_length(cJSON *slots)
{
    cJSON_ReplaceItemInObjectCaseSensitive(slots, "dur", cJSON_CreateNumber(60));
}

static void dur_phrases(hx_rng *r, int dur, cJSON *slots)
{
    char adj[32], noun[32];
    int v = hx_rng_below(r, 2);
    if (dur == 60) snprintf(adj, sizeof adj, v ? "one-hour" : "60-minute"), snprintf(noun, sizeof noun, v ? "an hour" : "60 minutes");
    else if (dur == 120) snprintf(adj, sizeof adj, v ? "two-hour" : "2-hour"), snprintf(noun, sizeof noun, "2 hours");
    else if (dur == 30 && v) snprintf(adj, sizeof adj, "half-hour"), snprintf(noun, sizeof noun, "half an hour");
    else snprintf(adj, sizeof adj, "%d-minute", dur), snprintf(noun, sizeof noun, "%d %s", dur, v ? "min" : "minutes");
    cJSON_AddNumberToObject(slots, "dur", dur);
    cJSON_AddStringToObject(slots, "durp", adj);
    cJSON_AddStringToObject(slots, "durn", noun);
}

/* ---- the kinds of request: templates and slot builders ----
 * A builder fills slots from the world (and marks targets in used); it
 * returns 0 when the world has nothing that fits. */
typedef int (*build_fn)(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used);

typedef struct kind_def {
    const char *name;
    int cat;
    double weight; /* within its category */
    const char *const *tpl;
    int n_tpl;
    build_fn build;
    int train_only; /* recovery lessons: never in held-out tasks, which stay comparable */
} kind_def;

#define TPL(...) (const char *const[]){__VA_ARGS__}, (int)(sizeof (const char *const[]){__VA_ARGS__} / sizeof(const char *))

static void add_str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v); }

static void add_day(const hx_world *w, cJSON *slots, const char *key, int64_t t)
{
    char d[40];
    hx_world_date(w, t, d, sizeof d);
    add_str(slots, key, d);
}

static int b_list(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char p[64];
    /* a week lists many events: rare, the context is short; a training
     * world's busy day half the time (held-out draws as before) */
    if (w->busy_day && hx_rng_chance(r, 0.5)) hx_dg_range_phrase(w, r, w->busy_day, p, sizeof p);
    else if (hx_rng_chance(r, 0.05)) snprintf(p, sizeof p, "%s", hx_rng_chance(r, 0.5) ? "this week" : "next week");
    else hx_dg_range_phrase(w, r, w->today + hx_rng_below(r, 9) - 1, p, sizeof p);
    add_str(slots, "when", p);
    return 1;
}

static int b_slots(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char p[64];
    hx_dg_range_phrase(w, r, hx_dg_future_weekday(w, r, 1, 9), p, sizeof p);
    add_str(slots, "when", p);
    dur_phrases(r, durs[hx_rng_below(r, 7)], slots);
    return 1;
}

/* form with its "%s"s replaced in turn by a, then b (a form from a
 * table, so not a format string). */
static void fill_form(const char *form, const char *a, const char *b, char *buf, size_t n)
{
    size_t k = 0;
    for (const char *f = form; *f && k + 1 < n; f++) {
        if (f[0] != '%' || f[1] != 's') {
            buf[k++] = *f;
            continue;
        }
        const char *v = a ? a : "";
        a = b, b = NULL, f++;
        while (*v && k + 1 < n) buf[k++] = *v++;
    }
    buf[k] = 0;
}

static void title_for(hx_rng *r, const char *topic, char *buf, size_t n)
{
    static const char *const forms[] = {"%s review", "%s sync", "%s", "%s workshop", "%s prep"};
    fill_form(forms[hx_rng_below(r, 5)], topic, NULL, buf, n);
    if (buf[0] >= 'a' && buf[0] <= 'z' && hx_rng_chance(r, 0.5)) buf[0] = (char)(buf[0] - 32);
}

static int b_create(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char p[64], topic[32], title[48];
    int m;
    point_phrase(w, r, hx_dg_future_weekday(w, r, 1, 12), p, sizeof p, &m);
    hx_world_topic(r, w->split, topic, sizeof topic);
    title_for(r, topic, title, sizeof title);
    add_str(slots, "at", p);
    add_str(slots, "title", title);
    dur_phrases(r, durs[2 + hx_rng_below(r, 5)], slots);
    return 1;
}

/* "remind me to call the bank tomorrow at 3pm": a task said as a verb
 * phrase, its event titled with the phrase's first letter raised, at a
 * moment and with no length (the event's default). */
static int b_remind(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    static const char *const forms[] = {"call %s", "email %s about the %s", "pay the %s invoice",
                                        "send %s the %s notes", "check the %s numbers",
                                        "book the %s venue", "prepare the %s slides",
                                        "pick up the %s forms", "renew the %s contract"};
    char topic[32], task[80], p[64];
    const hx_wperson *who = &w->people[hx_rng_below(r, w->n_people)];
    const char *f = forms[hx_rng_below(r, (int)(sizeof forms / sizeof *forms))];
    int m;
    hx_world_topic(r, w->split, topic, sizeof topic);
    const int person = !strncmp(f, "call", 4) || strstr(f, "%s about") || strstr(f, "%s the");
    fill_form(f, person ? who->first : topic, topic, task, sizeof task);
    point_phrase(w, r, hx_dg_future_weekday(w, r, 1, 12), p, sizeof p, &m);
    add_str(slots, "task", task);
    task[0] = (char)(task[0] - 32);
    add_str(slots, "title", task);
    add_str(slots, "at", p);
    return 1;
}

/* A task-like title a user quotes ("Pick up the X forms", "Call Dana"). */
static void task_title(const hx_world *w, hx_rng *r, char *title, size_t n)
{
    static const char *const forms[] = {"Call %s", "Pick up the %s forms", "Send %s the %s notes",
                                        "Review the %s draft", "Lunch with %s", "%s prep",
                                        "Confirm the %s booking", "Go over the %s numbers with %s"};
    char topic[32];
    const hx_wperson *who = &w->people[hx_rng_below(r, w->n_people)];
    const char *f = forms[hx_rng_below(r, (int)(sizeof forms / sizeof *forms))];
    hx_world_topic(r, w->split, topic, sizeof topic);
    const int person = !strncmp(f, "Call", 4) || !strncmp(f, "Lunch", 5) || !strncmp(f, "Send", 4);
    fill_form(f, person ? who->first : topic, person ? topic : who->first, title, n);
    if ('a' <= title[0] && title[0] <= 'z') title[0] = (char)(title[0] - 32);
}

/* An event whose title the user quotes, at a moment, its length said
 * after it ("put 'Call Dana' on Friday at 3pm, half an hour"). */
static int b_create_said(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char title[64], p[64];
    int m;
    task_title(w, r, title, sizeof title);
    if (strlen(title) > 40) return 0;
    point_phrase(w, r, hx_dg_future_weekday(w, r, 1, 12), p, sizeof p, &m);
    add_str(slots, "title", title);
    add_str(slots, "at", p);
    dur_phrases(r, durs[hx_rng_below(r, 7)], slots);
    return 1;
}

/* An event from one time to another on a day ("block Thursday 13:00 to
 * 14:30 for X"): the span is the start, and no length is said. */
static int b_block_span(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    static const char *const forms[] = {"%s %s to %s", "%s from %s to %s", "%s %s-%s", "%s, %s until %s"};
    char title[64], d[40], a[8], b[8], span[96];
    const int64_t day = hx_dg_future_weekday(w, r, 1, 12);
    const int m = w->work_start + 30 * hx_rng_below(r, (w->work_end - w->work_start) / 30 - 4);
    const int len = 30 * (1 + hx_rng_below(r, 4));
    task_title(w, r, title, sizeof title);
    if (strlen(title) > 40) return 0;
    hx_world_day_phrase(w, r, day, d, sizeof d);
    snprintf(a, sizeof a, "%02d:%02d", m / 60, m % 60);
    snprintf(b, sizeof b, "%02d:%02d", (m + len) / 60, (m + len) % 60);
    const char *f = forms[hx_rng_below(r, (int)(sizeof forms / sizeof *forms))];
    snprintf(span, sizeof span, "%s", d);
    const size_t k = strlen(span);
    if (!strcmp(f, "%s %s to %s")) snprintf(span + k, sizeof span - k, " %s to %s", a, b);
    else if (!strcmp(f, "%s from %s to %s")) snprintf(span + k, sizeof span - k, " from %s to %s", a, b);
    else if (!strcmp(f, "%s %s-%s")) snprintf(span + k, sizeof span - k, " %s-%s", a, b);
    else snprintf(span + k, sizeof span - k, ", %s until %s", a, b);
    hx_when_range rg;
    if (hx_when_parse(span, w->now, w->tz, &rg, NULL) || rg.start != hx_world_local(w, day, m) ||
        rg.end != hx_world_local(w, day, m + len) || strlen(span) > 40)
        return 0;
    add_str(slots, "title", title);
    add_str(slots, "at", span);
    return 1;
}

/* An all-day event on a day ("block all of Friday for the offsite"). */
static int b_all_day(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    static const char *const forms[] = {"%s offsite", "Vacation", "%s conference", "%s day",
                                        "Out of office", "%s workshop", "Moving day"};
    char topic[32], title[48], p[64];
    const char *f = forms[hx_rng_below(r, (int)(sizeof forms / sizeof *forms))];
    hx_world_topic(r, w->split, topic, sizeof topic);
    fill_form(f, topic, NULL, title, sizeof title);
    if ('a' <= title[0] && title[0] <= 'z') title[0] = (char)(title[0] - 32);
    hx_world_day_phrase(w, r, hx_dg_future_weekday(w, r, 1, 40), p, sizeof p);
    add_str(slots, "title", title);
    add_str(slots, "day", p);
    return 1;
}

static const hx_wperson *mail_person(const hx_world *w, const hx_wmail *m) { return &w->people[m->from]; }

/* A mail not used yet in this world. */
static int pick_mail(const hx_world *w, hx_rng *r, unsigned *used)
{
    for (int tries = 0; tries < 10; tries++) {
        int i = hx_rng_below(r, w->n_mails);
        if (!used || !(used[1] >> i & 1)) {
            if (used) used[1] |= 1u << i;
            return i;
        }
    }
    return -1;
}

/* Who wrote it, as the request names them: full name, first name or address. */
static void who_slots(hx_rng *r, const hx_wperson *p, cJSON *slots)
{
    int v = hx_rng_below(r, 3);
    add_str(slots, "who", v == 0 ? p->name : v == 1 ? p->first : p->email);
}

static int b_mail_search(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_mail(w, r, used);
    if (i < 0) return 0;
    const hx_wmail *m = &w->mails[i];
    who_slots(r, mail_person(w, m), slots);
    if (hx_rng_chance(r, 0.2)) { /* a topic they did not write about */
        char t[32];
        hx_world_topic(r, w->split, t, sizeof t);
        add_str(slots, "topic", t);
    } else {
        add_str(slots, "topic", m->topic);
    }
    add_str(slots, "mail_id", m->id);
    return 1;
}

/* Mail asked for by its sender alone ("anything from Jonas?"): the name
 * as people type it, the first name or the whole, lower-cased at times. */
static int b_mail_from(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_mail(w, r, used);
    if (i < 0) return 0;
    const hx_wperson *p = mail_person(w, &w->mails[i]);
    char who[64];
    snprintf(who, sizeof who, "%s", hx_rng_chance(r, 0.6) ? p->first : p->name);
    if (hx_rng_chance(r, 0.4))
        for (char *c = who; *c; c++) *c = (char)tolower((unsigned char)*c);
    add_str(slots, "who", who);
    return 1;
}

static int b_plain(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)w, (void)r, (void)slots, (void)used;
    return 1;
}

static int pick_file(const hx_world *w, hx_rng *r, unsigned *used)
{
    int i = hx_rng_below(r, w->n_files);
    if (used) used[2] |= 1u << i;
    return i;
}

static void file_slots(const hx_world *w, int i, cJSON *slots)
{
    char rel[80];
    snprintf(rel, sizeof rel, "%s/%s", w->files[i].folder, w->files[i].name);
    add_str(slots, "topic", w->files[i].topic);
    add_str(slots, "path", rel);
    add_str(slots, "folder", w->files[i].folder);
    add_str(slots, "fact", w->files[i].fact);
}

static int b_file(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    file_slots(w, pick_file(w, r, used), slots);
    return 1;
}

static const char *const short_msgs[] = {
    "I'll be ten minutes late", "the draft is ready", "please call me back", "see you there",
    "can we move it to Friday?", "thanks for the notes", "the slides are attached", "I'm out today",
    "let's keep it short", "I booked the room", "running late, start without me",
    "the numbers look good", "please review by Monday", "lunch is on me",
};

static int b_send(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char t[32];
    const hx_wperson *p = &w->people[hx_rng_below(r, w->n_people)];
    hx_world_topic(r, w->split, t, sizeof t);
    add_str(slots, "email", p->email);
    add_str(slots, "topic", t);
    if (hx_rng_chance(r, 0.3)) {
        char room[40], msg[48];
        hx_world_room(r, w->split, room, sizeof room);
        snprintf(msg, sizeof msg, "we meet in %s", room);
        add_str(slots, "msg", msg);
    } else {
        add_str(slots, "msg", short_msgs[hx_rng_below(r, (int)(sizeof short_msgs / sizeof *short_msgs))]);
    }
    return 1;
}

/* A meeting's when (a day of the coming days), topic and length. */
static void meeting_slots(const hx_world *w, hx_rng *r, cJSON *slots)
{
    char p[64], topic[32];
    hx_dg_range_phrase(w, r, hx_dg_future_weekday(w, r, 1, 9), p, sizeof p);
    add_str(slots, "when", p);
    hx_world_topic(r, w->split, topic, sizeof topic);
    add_str(slots, "topic", topic);
    dur_phrases(r, durs[2 + hx_rng_below(r, 4)], slots);
}

/* Attendees: 1 to 3 people, named as "Name <addr>", "addr", "Name (addr)"
 * or, when a memory holds the address, by first name only. */
static int b_schedule(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    int n = 1 + (hx_rng_chance(r, 0.3) ? 1 + hx_rng_chance(r, 0.3) : 0), who[3];
    hx_buf b;
    hx_buf_init(&b);
    cJSON *emails = cJSON_AddArrayToObject(slots, "emails");
    for (int i = 0; i < n; i++) {
        who[i] = hx_rng_below(r, w->n_people);
        for (int j = 0; j < i; j++)
            if (who[j] == who[i]) who[i--] = -1;
    }
    for (int i = 0; i < n; i++) {
        const hx_wperson *q = &w->people[who[i]];
        char mem[96];
        snprintf(mem, sizeof mem, "%s's email is %s", q->first, q->email);
        int by_memory = 0;
        for (int k = 0; k < w->n_mems; k++) by_memory |= !strcmp(w->mems[k].text, mem);
        if (i) hx_buf_puts(&b, i == n - 1 ? " and " : ", ");
        int v = hx_rng_below(r, 3);
        if (by_memory && hx_rng_chance(r, 0.7)) hx_buf_puts(&b, q->first);
        else if (v == 0) hx_buf_printf(&b, "%s <%s>", q->name, q->email);
        else if (v == 1) hx_buf_puts(&b, q->email);
        else hx_buf_printf(&b, "%s (%s)", q->first, q->email);
        cJSON_AddItemToArray(emails, cJSON_CreateString(q->email));
    }
    add_str(slots, "who", b.data);
    hx_buf_free(&b);
    meeting_slots(w, r, slots);
    return 1;
}

/* A meeting with people named by first name alone, as users name
 * colleagues ("set up 30 min with Dana tomorrow ... and invite her"):
 * people who wrote to the user, whose addresses the request's context
 * lists (the people of the mail it names), one or two. */
static int b_schedule_named(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    int who[2] = {-1, -1}, n = 0;
    for (int tries = 0; tries < 12 && n < 1 + hx_rng_chance(r, 0.3); tries++) {
        const int k = w->mails[hx_rng_below(r, w->n_mails)].from;
        if (k != who[0]) who[n++] = k;
    }
    if (!n) return 0;
    hx_buf b;
    hx_buf_init(&b);
    cJSON *emails = cJSON_AddArrayToObject(slots, "emails");
    const int lower = hx_rng_chance(r, 0.3);
    for (int i = 0; i < n; i++) {
        const hx_wperson *q = &w->people[who[i]];
        if (i) hx_buf_puts(&b, " and ");
        const size_t at = b.len;
        hx_buf_puts(&b, q->first);
        if (lower && b.data) b.data[at] = (char)tolower((unsigned char)b.data[at]);
        cJSON_AddItemToArray(emails, cJSON_CreateString(q->email));
    }
    add_str(slots, "who", b.data);
    hx_buf_free(&b);
    meeting_slots(w, r, slots);
    return 1;
}

/* An address mangled so that the tools refuse it. A copying model's slip
 * (model = 1) breaks the start of the local part or loses the domain; a
 * typing user's (model = 0) writes " at " or a comma for a dot. */
static void mangle_address(hx_rng *r, const char *email, int model, char *buf, size_t n)
{
    static const char *const junk[] = {"]", "[", " ", "\"", "<", ":"};
    const char *at = strchr(email, '@');
    int local = at ? (int)(at - email) : (int)strlen(email);
    const char *dot = strrchr(email, '.');
    int v = model ? hx_rng_below(r, 3) : 3 + hx_rng_below(r, 3);
    if (v == 2 && local < 2) v = 0;
    if (v == 5 && (!dot || dot < at)) v = 3;
    switch (v) {
    case 0: snprintf(buf, n, "%.*s@", local, email); break; /* no domain (the local part alone is a
                                                                name the tools resolve) */
    case 1: snprintf(buf, n, "%.*s%s", local, email, at ? at + 1 : ""); break; /* no '@' */
    case 2: { /* junk inside the first word */
        int k = 1 + hx_rng_below(r, local - 1 < 3 ? local - 1 : 3);
        snprintf(buf, n, "%.*s%s%s", k, email, junk[hx_rng_below(r, 6)], email + k);
        break;
    }
    case 3: snprintf(buf, n, "%.*s at %s", local, email, at ? at + 1 : ""); break;
    case 4: snprintf(buf, n, "%.*s(at)%s", local, email, at ? at + 1 : ""); break;
    default: snprintf(buf, n, "%.*s,%s", (int)(dot - email), email, dot + 1); break;
    }
}

/* A schedule whose i-th address is mangled: "bad" and "bad_i" in slots.
 * model: the request is right and the oracle's first call carries the
 * slip (schedule_fix); otherwise the user typed it (bad_address), so the
 * request and "emails" carry it too. */
static int bad_attendee(const hx_world *w, hx_rng *r, cJSON *slots, int model)
{
    cJSON *emails = cJSON_GetObjectItemCaseSensitive(slots, "emails");
    int i = hx_rng_below(r, cJSON_GetArraySize(emails));
    cJSON *e = cJSON_GetArrayItem(emails, i);
    const char *who = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(slots, "who"));
    char bad[96], fixed[512];
    mangle_address(r, e->valuestring, model, bad, sizeof bad);
    if (strlen(bad) > 40) return 0; /* the compact decoding writes at most 40 bytes */
    add_str(slots, "bad", bad);
    cJSON_AddNumberToObject(slots, "bad_i", i);
    if (model) return 1;
    const char *at = strstr(who, e->valuestring);
    if (!at) return 0; /* named by first name: the memory holds the address */
    snprintf(fixed, sizeof fixed, "%.*s%s%s", (int)(at - who), who, bad, at + strlen(e->valuestring));
    cJSON_ReplaceItemInObjectCaseSensitive(slots, "who", cJSON_CreateString(fixed));
    cJSON_ReplaceItemInArray(emails, i, cJSON_CreateString(bad));
    (void)w;
    return 1;
}

static int b_schedule_fix(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    return b_schedule(w, r, slots, used) && bad_attendee(w, r, slots, 1);
}

static int b_bad_address(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    return b_schedule(w, r, slots, used) && bad_attendee(w, r, slots, 0);
}

/* A mail whose address the oracle's first call mangles (send_fix), or
 * the user typed mangled (bad_send_address). */
static int bad_recipient(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used, int model)
{
    char bad[96];
    if (!b_send(w, r, slots, used)) return 0;
    mangle_address(r, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(slots, "email")), model,
                   bad, sizeof bad);
    if (strlen(bad) > 40) return 0;
    add_str(slots, "bad", bad);
    if (!model) cJSON_ReplaceItemInObjectCaseSensitive(slots, "email", cJSON_CreateString(bad));
    return 1;
}

static int b_send_fix(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    return bad_recipient(w, r, slots, used, 1);
}

static int b_bad_send_address(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    return bad_recipient(w, r, slots, used, 0);
}

static int b_mail_read(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_mail(w, r, used);
    if (i < 0) return 0;
    const hx_wmail *m = &w->mails[i];
    who_slots(r, mail_person(w, m), slots);
    add_str(slots, "topic", m->topic);
    add_str(slots, "mail_id", m->id);
    add_str(slots, "fact", m->fact);
    return 1;
}

/* An event of the world not used yet; mine: organized by the user (or
 * without attendees); once: not recurring. */
static int pick_event(const hx_world *w, hx_rng *r, unsigned *used, int mine, int once, int future)
{
    for (int tries = 0; tries < 30; tries++) {
        int i = hx_rng_below(r, w->n_events);
        const hx_wevent *e = &w->events[i];
        if ((used && (used[0] >> i & 1)) || e->cancelled) continue;
        if ((mine == 1 && e->organizer >= 0) || (mine == 0 && e->organizer < 0)) continue;
        if ((once && e->recur) || (future && !e->recur && e->day <= w->today)) continue;
        if (used) used[0] |= 1u << i;
        return i;
    }
    return -1;
}

/* The day of event e's occurrence to act on: its day, or for a recurring
 * one an occurrence in the coming days. */
static int64_t event_day(const hx_world *w, hx_rng *r, const hx_wevent *e)
{
    if (!e->recur) return e->day;
    int step = e->recur == 2 ? 14 : 7;
    int64_t d = e->day;
    while (d <= w->today) d += step;
    if (e->recur == 3) {
        d = hx_dg_future_weekday(w, r, 1, 6);
    }
    return d;
}

static void event_slots(const hx_world *w, hx_rng *r, int i, cJSON *slots)
{
    const hx_wevent *e = &w->events[i];
    char p[64];
    int64_t day = event_day(w, r, e);
    hx_world_day_phrase(w, r, day, p, sizeof p);
    add_str(slots, "title", e->title);
    add_str(slots, "when", p);
    add_str(slots, "uid", e->uid);
    add_day(w, slots, "date", hx_world_local(w, day, e->start_min));
    cJSON_AddBoolToObject(slots, "recurring", e->recur != 0);
    if (e->organizer >= 0) add_str(slots, "organizer", w->people[e->organizer].email);
}

static int b_cancel(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_event(w, r, used, 1, 0, 1);
    if (i < 0) return 0;
    event_slots(w, r, i, slots);
    return 1;
}

/* An event asked about by its title alone ("when is the budget review?"),
 * the user's or another's, once or recurring, lower-cased half the time
 * as people type it. */
static int b_event_when(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_event(w, r, used, -1, 0, 1);
    if (i < 0) return 0;
    char name[48];
    snprintf(name, sizeof name, "%s", w->events[i].title);
    if (hx_rng_chance(r, 0.5))
        for (char *c = name; *c; c++)
            if ('A' <= *c && *c <= 'Z') *c = (char)(*c + 32);
    add_str(slots, "name", name);
    return 1;
}

static int b_move(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_event(w, r, used, 1, 1, 1), m;
    if (i < 0) return 0;
    event_slots(w, r, i, slots);
    char p[64];
    point_phrase(w, r, hx_dg_future_weekday(w, r, 1, 12), p, sizeof p, &m);
    add_str(slots, "at", p);
    return 1;
}

static int b_not_organizer(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_event(w, r, used, 0, 0, 1);
    if (i < 0) return 0;
    event_slots(w, r, i, slots);
    return 1;
}

static int b_city(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    add_str(slots, "city", hx_world_city(r, w->split));
    return 1;
}

/* A request no tool can do, about the user's own world: mail deleted or
 * filed, money paid, something booked, bought or ordered, a phone call.
 * P is a person's first name, T a topic, C a city. */
static const struct {
    const char *form;
    char a, b;
} cannot_asks[] = {
    {"Delete the email from %s", 'P', 0},           {"Delete %s's mail about the %s", 'P', 'T'},
    {"Remove the %s email from my inbox", 'T', 0},  {"Archive the mail from %s", 'P', 0},
    {"Move %s's email to the trash", 'P', 0},       {"Pay the %s invoice", 'T', 0},
    {"Transfer 200 euros to %s", 'P', 0},           {"Send %s the money for the %s", 'P', 'T'},
    {"Book a table for four in %s tonight", 'C', 0}, {"Book a hotel in %s for next week", 'C', 0},
    {"Book train tickets to %s", 'C', 0},           {"Buy me a plane ticket to %s", 'C', 0},
    {"Order a ride to %s", 'C', 0},                 {"Order lunch for the %s", 'T', 0},
    {"Call %s on the phone", 'P', 0},               {"Text %s that I'm late", 'P', 0},
    {"Print the %s notes", 'T', 0},                 {"Unsubscribe me from the %s newsletter", 'T', 0},
};

static const char *cannot_slot(const hx_world *w, hx_rng *r, char kind, char *buf, size_t n)
{
    if (kind == 'P') return w->people[hx_rng_below(r, w->n_people)].first;
    if (kind == 'C') return hx_world_city(r, w->split);
    if (kind != 'T') return NULL;
    hx_world_topic(r, w->split, buf, n);
    return buf;
}

static int b_cannot(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    const int k = hx_rng_below(r, (int)(sizeof cannot_asks / sizeof *cannot_asks));
    char ta[32], tb[32], ask[160];
    const char *a = cannot_slot(w, r, cannot_asks[k].a, ta, sizeof ta);
    const char *b = cannot_slot(w, r, cannot_asks[k].b, tb, sizeof tb);
    fill_form(cannot_asks[k].form, a, b, ask, sizeof ask);
    add_str(slots, "ask", ask);
    return 1;
}

static int b_reply(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    if (!b_mail_read(w, r, slots, used)) return 0;
    add_str(slots, "msg", short_msgs[hx_rng_below(r, (int)(sizeof short_msgs / sizeof *short_msgs))]);
    return 1;
}

/* A question about one figure or fact a note holds, asked the way people
 * ask it ("how much is ...", "who approved ..."), with the words a search
 * of the files' contents needs: the note's topic and the fact's own noun. */
static const struct {
    const char *has;   /* in the fact's text */
    const char *noun;  /* searched with the topic */
    const char *ask[5];
} figure_asks[] = {
    {" budget is ", "budget",
     {"How much is the %s budget?", "What's the budget for the %s?", "How much money do we have for the %s?",
      "what budget did we set for the %s?", "How big is the %s budget?"}},
    {"access code", "code",
     {"What's the access code for the %s?", "What is the code for the %s?", "Tell me the %s access code",
      "code for the %s?", "Which code gets me into the %s?"}},
    {" approved the ", "approved",
     {"Who approved the %s?", "Has anyone approved the %s?", "who signed off the %s?",
      "Did the %s get approved, and by whom?", "Who gave the ok for the %s?"}},
    {" moved to ", "room",
     {"Which room is the %s in now?", "Where did the %s move to?", "what room is the %s in?",
      "Where is the %s now?", "Which room did the %s go to?"}},
    {" deadline is ", "deadline",
     {"What's the deadline for the %s?", "When is the %s due?", "what's the %s deadline?",
      "How long do I have for the %s?", "By when is the %s due?"}},
    {"ready for review", "review",
     {"When is the %s ready for review?", "When can I review the %s?", "when will the %s be ready?",
      "When does the %s go to review?", "Is the %s ready for review yet?"}},
    {" signed up ", "signed",
     {"How many people signed up for the %s?", "how many are coming to the %s?", "How many sign-ups for the %s?",
      "How many people are on the %s?", "What's the head count for the %s?"}},
    {" total is ", "total",
     {"What's the %s total?", "How much is the %s in total?", "what does the %s come to?",
      "How much does the %s cost altogether?", "What's the total for the %s?"}},
};

static int b_file_figure(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_file(w, r, used);
    const hx_wfile *f = &w->files[i];
    for (size_t k = 0; k < sizeof figure_asks / sizeof *figure_asks; k++) {
        if (!strstr(f->fact, figure_asks[k].has)) continue;
        char ask[160], words[64];
        fill_form(figure_asks[k].ask[hx_rng_below(r, 5)], f->topic, NULL, ask, sizeof ask);
        snprintf(words, sizeof words, "%s %s", f->topic, figure_asks[k].noun);
        file_slots(w, i, slots);
        add_str(slots, "ask", ask);
        add_str(slots, "words", words);
        return 1;
    }
    return 0;
}

static int b_file_missing(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    int i = pick_file(w, r, used);
    file_slots(w, i, slots);
    const hx_wfile *f = &w->files[i];
    char stem[40], wrong[80];
    snprintf(stem, sizeof stem, "%.*s", (int)strcspn(f->name, "."), f->name);
    snprintf(wrong, sizeof wrong, "%s/%s%s", f->folder, stem, strstr(f->name, ".md") ? ".txt" : ".md");
    add_str(slots, "wrong", wrong);
    add_str(slots, "stem", stem);
    return 1;
}

static int b_bad_when(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    static const char *const bad[] = {"sometime soon", "after the holidays", "at teatime",
                                      "whenever works", "around the usual time", "later-ish",
                                      "the day after the offsite", "in a bit"};
    (void)used;
    const char *p = bad[hx_rng_below(r, 8)];
    if (when_ok(w, p, 0) || when_ok(w, p, 1)) return 0;
    add_str(slots, "when", p);
    return 1;
}

/* A fact to keep that holds a date, a time or a number, the words a
 * calendar or a search also reads: the request is still a note. */
static int b_remember_dated(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char fact[96], topic[32], d1[24], d2[24];
    const hx_wperson *p = &w->people[hx_rng_below(r, w->n_people)];
    const int64_t day = w->today + 3 + hx_rng_below(r, 60);
    const char *kind = "fact";
    hx_world_topic(r, w->split, topic, sizeof topic);
    hx_world_month_day(day, d1, sizeof d1);
    hx_world_month_day(day + 2 + hx_rng_below(r, 10), d2, sizeof d2);
    switch (hx_rng_below(r, 7)) {
    case 0: snprintf(fact, sizeof fact, "%s is on vacation from %s to %s", p->first, d1, d2); break;
    case 1:
        snprintf(fact, sizeof fact, "%s prefers calls before %dam", p->first, 9 + hx_rng_below(r, 3));
        kind = "preference";
        break;
    case 2: snprintf(fact, sizeof fact, "the %s door code is %d", topic, 1000 + hx_rng_below(r, 9000)); break;
    case 3:
        snprintf(fact, sizeof fact, "%s's phone number is 0%d %d %d", p->first, 20 + hx_rng_below(r, 70),
                 100 + hx_rng_below(r, 900), 1000 + hx_rng_below(r, 9000));
        kind = "person";
        break;
    case 4: snprintf(fact, sizeof fact, "the %s fair is on %s", topic, d1); break;
    case 5: snprintf(fact, sizeof fact, "%s could start on %s", p->first, d1); break;
    default: snprintf(fact, sizeof fact, "the %s budget is %d,%03d euros", topic, 2 + hx_rng_below(r, 90),
                      100 * hx_rng_below(r, 10));
    }
    add_str(slots, "fact", fact);
    add_str(slots, "kind", kind);
    return 1;
}

static int b_remember(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char fact[64], room[40];
    const hx_wperson *p = &w->people[hx_rng_below(r, w->n_people)];
    const char *kind = "fact";
    switch (hx_rng_below(r, 6)) {
    case 0:
        snprintf(fact, sizeof fact, "I prefer %s meetings", hx_rng_chance(r, 0.5) ? "morning" : "afternoon");
        kind = "preference";
        break;
    case 1: snprintf(fact, sizeof fact, "%s is my manager", p->first), kind = "person"; break;
    case 2:
        hx_world_room(r, w->split, room, sizeof room);
        snprintf(fact, sizeof fact, "my desk is in %s", room), kind = "place";
        break;
    case 3: snprintf(fact, sizeof fact, "my badge number is %d", 1000 + hx_rng_below(r, 9000)); break;
    case 4: snprintf(fact, sizeof fact, "%s's email is %s", p->first, p->email), kind = "person"; break;
    default: snprintf(fact, sizeof fact, "I park on level %d", 1 + hx_rng_below(r, 6));
    }
    if (strlen(fact) > 40) return 0;
    add_str(slots, "fact", fact);
    add_str(slots, "kind", kind);
    return 1;
}

/* Where m says "<first>'s email is <address>": the address, first set to
 * the name; NULL for another kind of memory. */
static const char *memory_email(const hx_wmem *m, char *first, size_t n)
{
    static const char says[] = "'s email is ";
    const char *e = strstr(m->text, says);
    if (!e) return NULL;
    snprintf(first, n, "%.*s", (int)(e - m->text), m->text);
    return e + strlen(says);
}

/* A mail to someone the user names by first name alone ("email Jonas
 * that ..."): one who wrote to the user, or whose address a memory holds.
 * The request's context lists the address (the people of the mail it
 * names, or the recalled memory), and the call copies it from there. */
static int b_send_named(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    char first[24];
    const char *email = NULL;
    for (int i = 0; !email && hx_rng_chance(r, 0.4) && i < w->n_mems; i++)
        email = memory_email(&w->mems[i], first, sizeof first);
    if (!email) {
        const hx_wperson *p = &w->people[w->mails[hx_rng_below(r, w->n_mails)].from];
        snprintf(first, sizeof first, "%s", p->first);
        email = p->email;
    }
    const char *msg = short_msgs[hx_rng_below(r, (int)(sizeof short_msgs / sizeof *short_msgs))];
    add_str(slots, "who", first);
    add_str(slots, "email", email);
    add_str(slots, "msg", msg);
    add_str(slots, "topic", msg);
    return 1;
}

/* A fact to store that changes or restates one the world's memory holds,
 * so that recall puts the related memory in the prompt: the right call is
 * still memory.remember, not a search (a new address for the same person,
 * another manager, desk or meeting time). */
static int b_remember_related(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    if (!w->n_mems) return 0;
    const hx_wmem *m = &w->mems[hx_rng_below(r, w->n_mems)];
    const hx_wperson *p = &w->people[hx_rng_below(r, w->n_people)];
    char fact[64], room[40], first[24];
    const char *kind = "person", *email = memory_email(m, first, sizeof first);
    if (email) { /* the same address, or its local part at another domain */
        const char *at = strchr(email, '@'), *dom = strchr(p->email, '@');
        if (hx_rng_chance(r, 0.3) || !at || !dom) snprintf(fact, sizeof fact, "%s", m->text);
        else snprintf(fact, sizeof fact, "%s's email is %.*s%s", first, (int)(at - email), email, dom);
    } else if (strstr(m->text, "meetings")) {
        snprintf(fact, sizeof fact, "I prefer %s meetings", hx_rng_chance(r, 0.5) ? "morning" : "afternoon");
        kind = "preference";
    } else if (strstr(m->text, "manager")) {
        snprintf(fact, sizeof fact, "%s is my manager", p->first);
    } else {
        hx_world_room(r, w->split, room, sizeof room);
        snprintf(fact, sizeof fact, "my desk is in %s", room), kind = "place";
    }
    if (strlen(fact) > 40) return 0;
    add_str(slots, "fact", fact);
    add_str(slots, "kind", kind);
    add_str(slots, "memory", m->text);
    return 1;
}

/* A question the recalled memories answer (an address, the manager, the
 * desk, the preferred meeting time): the answer quotes the memory with no
 * call, so that a memory in the prompt does not always mean a tool. */
static int b_recall_known(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    if (!w->n_mems) return 0;
    const hx_wmem *m = &w->mems[hx_rng_below(r, w->n_mems)];
    char ask[64], first[24];
    if (memory_email(m, first, sizeof first))
        snprintf(ask, sizeof ask, "%s's email%s", first, hx_rng_chance(r, 0.5) ? " address" : "");
    else if (strstr(m->text, "meetings"))
        snprintf(ask, sizeof ask, "%s", hx_rng_chance(r, 0.5) ? "the time I prefer for meetings"
                                                             : "the time of day I like meetings");
    else if (strstr(m->text, "manager"))
        snprintf(ask, sizeof ask, "%s", hx_rng_chance(r, 0.5) ? "my manager's name" : "the name of my manager");
    else snprintf(ask, sizeof ask, "%s", hx_rng_chance(r, 0.5) ? "my desk's room" : "the room my desk is in");
    add_str(slots, "ask", ask);
    add_str(slots, "memory", m->text);
    return 1;
}

static int b_recall(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    (void)used;
    if (w->n_mems && hx_rng_chance(r, 0.8)) {
        const hx_wmem *m = &w->mems[hx_rng_below(r, w->n_mems)];
        const char *x = strstr(m->text, "meetings") ? "meetings" : strstr(m->text, "desk") ? "my desk"
                        : NULL;
        char first[24];
        if (!x) {
            snprintf(first, sizeof first, "%.*s", (int)strcspn(m->text, " '"), m->text);
            x = first;
        }
        add_str(slots, "x", x);
        return 1;
    }
    hx_wperson p;
    hx_world_person(r, w->split, &p);
    add_str(slots, "x", p.first);
    return 1;
}

static int b_forget(const hx_world *w, hx_rng *r, cJSON *slots, unsigned *used)
{
    if (!w->n_mems) return 0;
    int i = hx_rng_below(r, w->n_mems);
    if (strlen(w->mems[i].text) > 40) return 0; /* the query copies it: compact strings */
    if (used && (used[3] >> i & 1)) return 0;
    if (used) used[3] |= 1u << i;
    add_str(slots, "fact", w->mems[i].text);
    return 1;
}

/* Templates shared by a kind and its error-recovery kinds. */
#define SCHEDULE_TPL \
    TPL("Schedule a {durp} meeting with {who} {when} about {topic}",\
         "Set up {durn} with {who} {when} to discuss {topic}",\
         "Book a {durp} call with {who} {when} about {topic}",\
         "Find time {when} for a {durp} meeting with {who} about {topic}",\
         "Arrange a {durp} meeting about {topic} with {who} {when}",\
         "Plan a {durp} chat with {who} about {topic} {when}",\
         "Meet {who} {when} for {durn} about {topic}",\
         "Get {who} and me together {when} for {durn} about {topic}",\
         "Organize a {durp} meeting with {who} {when} on {topic}",\
         "I need {durn} with {who} {when} about {topic}",\
         "Schedule {durn} with {who} {when}, topic {topic}",\
         "Invite {who} to a {durp} meeting about {topic} {when}",\
         "Set a {durp} meeting on {topic} with {who} {when}",\
         "Can you book {durn} with {who} {when} to talk about {topic}?",\
         "Put a {durp} {topic} meeting with {who} in my calendar {when}")
#define SEND_TPL \
    TPL("Email {email} about {topic}: {msg}", "Send {email} a mail about {topic} saying {msg}",\
         "Write to {email}, subject {topic}: {msg}", "Mail {email} re {topic}: {msg}",\
         "Tell {email} by email about {topic}: {msg}",\
         "Send a message to {email} about {topic}: {msg}",\
         "Email {email} with subject {topic}: {msg}", "Drop {email} a line about {topic}: {msg}",\
         "Shoot {email} an email about {topic} saying {msg}",\
         "Message {email} about {topic}: {msg}", "Send an email to {email} on {topic}: {msg}",\
         "Let {email} know about {topic}: {msg}",\
         "Write {email} an email, subject {topic}, saying {msg}",\
         "Compose a mail to {email} about {topic}: {msg}")

static const kind_def kinds[] = {
    /* single */
    {"list_events", HX_CAT_SINGLE, 1.0,
     TPL("What's on my calendar {when}?", "What do I have {when}?", "Show me my events {when}",
         "List my meetings {when}", "Anything on my schedule {when}?", "Do I have meetings {when}?",
         "Check my calendar for {when}", "What's planned {when}?",
         "Tell me what I have on {when}", "Do I have anything {when}?", "My agenda {when}?",
         "Give me my schedule {when}", "Which meetings are {when}?", "Read me my calendar {when}",
         "What meetings do I have {when}?"),
     b_list, 0},
    {"find_slots", HX_CAT_SINGLE, 1.0,
     TPL("Find a {durp} slot {when}", "When am I free for {durn} {when}?",
         "Find me {durn} of free time {when}", "Look for a free {durp} window {when}",
         "Can I fit a {durp} meeting {when}?", "Suggest a {durp} slot {when}",
         "Where do I have {durn} free {when}?",
         "I need {durn} {when}, when works?", "Is there a {durp} gap {when}?",
         "Get me a free {durp} slot {when}", "Any {durp} openings {when}?",
         "Show free slots of {durn} {when}", "When could I squeeze in {durn} {when}?",
         "Look for {durn} of free time {when}", "Free {durp} slots {when}?"),
     b_slots, 0},
    {"event_when", HX_CAT_SINGLE, 1.5,
     TPL("When is {name}?", "When's the {name}?", "What time is {name}?", "What day is {name}?",
         "When do I have {name}?", "When is my next {name}?", "What time does {name} start?",
         "Is {name} still on?", "Tell me when {name} is", "{name}: when is it?"),
     b_event_when, 1},
    {"remind", HX_CAT_SINGLE, 1.0,
     TPL("Remind me to {task} {at}", "Set a reminder to {task} {at}", "{at}, remind me to {task}",
         "Put a reminder in my calendar to {task} {at}", "I need to {task} {at}, add it",
         "Add a reminder: {task}, {at}"),
     b_remind, 1},
    {"create_said", HX_CAT_SINGLE, 1.0,
     TPL("put '{title}' {at}, {durn}", "add '{title}' {at}, {durn}", "Add \"{title}\" {at} for {durn}",
         "pencil in '{title}' {at}, {durn} long", "book me '{title}' {at}, {durn}",
         "{title}: {at}, {durn}. add it", "put {title} in my calendar {at}, {durn}",
         "add a {durp} slot for '{title}' {at}"),
     b_create_said, 1},
    {"block_span", HX_CAT_SINGLE, 0.6,
     TPL("Block {at} for {title}", "block {at} for '{title}'", "put '{title}' in my calendar {at}",
         "add {title} {at}", "reserve {at} for {title}"),
     b_block_span, 1},
    {"all_day", HX_CAT_SINGLE, 0.8,
     TPL("Add {title} {day} as an all-day event", "Block all day {day} for {title}",
         "Put {title} in my calendar {day}, all day", "{title} all day {day}, add it",
         "Create an all-day event {title} {day}"),
     b_all_day, 1},
    {"free_busy", HX_CAT_SINGLE, 0.6,
     TPL("Am I free {when}?", "Am I busy {when}?", "How busy am I {when}?",
         "Is my calendar free {when}?", "Do I have any free time {when}?", "When am I busy {when}?",
         "Is my schedule open {when}?", "Am I available {when}?", "Any gaps in my calendar {when}?",
         "Check whether I'm free {when}", "Do I have time {when}?", "Am I booked {when}?"),
     b_list, 0},
    {"create_event", HX_CAT_SINGLE, 1.0,
     TPL("Add \"{title}\" to my calendar {at} for {durn}", "Put {title} in my calendar {at}, {durn}",
         "Block {durn} {at} for {title}", "Create an event \"{title}\" {at} lasting {durn}",
         "Schedule {title} {at} for {durn}", "New event: {title}, {at}, {durn}",
         "Add a {durp} event called {title} {at}",
         "Book {title} {at} for {durn}", "Put a {durp} {title} on my calendar {at}",
         "Calendar: {title} {at}, {durn}", "Make an event {title} {at}, {durn} long",
         "I have {title} {at} for {durn}, add it", "Add {title} {at} ({durn})",
         "Create {title} {at} for {durn}", "Please log {title} {at}, it takes {durn}"),
     b_create, 0},
    {"mail_search", HX_CAT_SINGLE, 1.0,
     TPL("Did {who} email me about {topic}?", "Find the mail from {who} about {topic}",
         "Search my mail for {topic} from {who}", "Any messages from {who} about {topic}?",
         "Look up {who}'s email about {topic}", "Is there a mail from {who} on {topic}?",
         "Check if {who} sent anything about {topic}", "Show me mail from {who} about {topic}",
         "Did I get an email from {who} about {topic}?", "Search for {who}'s message on {topic}",
         "Find emails from {who} regarding {topic}", "Has {who} written to me about {topic}?",
         "Mail from {who} about {topic}?", "Look for {topic} emails from {who}",
         "Get the {topic} message from {who}"),
     b_mail_search, 0},
    {"mail_from", HX_CAT_SINGLE, 1.0,
     TPL("Did {who} send me anything?", "Anything from {who}?", "Mails from {who}?", "What did {who} write?",
         "Any news from {who}?", "Have I heard from {who}?", "Show me {who}'s emails", "{who}'s mail?",
         "Did {who} write to me?", "Is there mail from {who}?", "Find the emails {who} sent me",
         "What has {who} sent me?"),
     b_mail_from, 1},
    {"unread_mail", HX_CAT_SINGLE, 0.5,
     TPL("Do I have unread mail?", "Any new messages?", "What's unread in my inbox?",
         "Show my unread emails", "Check for new mail", "Anything new in my mailbox?",
         "Check my inbox", "Any unread mail?", "Did I get new email?", "What new mail do I have?",
         "List unread messages", "Show me new emails"),
     b_plain, 0},
    {"file_search", HX_CAT_SINGLE, 0.8,
     TPL("Where is my file about {topic}?", "Find my {topic} file", "Search my files for {topic}",
         "Which file has the {topic} notes?", "Locate the {topic} document",
         "Do I have a file on {topic}?",
         "Look for the {topic} file", "Find files about {topic}", "Search for {topic} in my files",
         "Where did I save the {topic} notes?", "Is there a document about {topic}?",
         "Find the {topic} document", "Which of my files mentions {topic}?",
         "Search my documents for {topic}", "Get me the file on {topic}"),
     b_file, 0},
    {"file_figure", HX_CAT_SINGLE, 1.2, TPL("{ask}"), b_file_figure, 1},
    {"files_list", HX_CAT_SINGLE, 0.5,
     TPL("What's in my {folder} folder?", "List the files in {folder}", "Show me my {folder} files",
         "What files do I have in {folder}?", "Open my {folder} folder", "List {folder}",
         "Show the {folder} folder", "List everything in my {folder} folder",
         "What's inside {folder}?", "Which files are in {folder}?", "Browse my {folder} folder",
         "Files in {folder}?"),
     b_file, 0},
    {"send_named", HX_CAT_SINGLE, 0.8,
     TPL("Email {who} that {msg}", "Tell {who} by mail that {msg}", "Let {who} know: {msg}",
         "Send {who} a mail: {msg}", "Write to {who}: {msg}", "Mail {who} saying {msg}",
         "Drop {who} a note that {msg}", "email {who}: {msg}"),
     b_send_named, 1},
    {"send_mail", HX_CAT_SINGLE, 0.8,
     SEND_TPL,
     b_send, 0},
    /* multi */
    {"schedule_named", HX_CAT_MULTI, 1.2,
     TPL("Set up {durn} with {who} {when} to go over {topic}, and send the invite",
         "Find {durn} with {who} {when} about {topic} and invite them",
         "Book {durn} with {who} {when} for {topic}, invites please",
         "Schedule a {durp} meeting with {who} {when} about {topic} and send invitations",
         "get {who} and me together {when} for {durn} about {topic}",
         "invite {who} to a {durp} call {when} about {topic}",
         "{who} and I need {durn} {when} for {topic}. book it and invite them",
         "put a {durp} {topic} meeting with {who} in my calendar {when}, with an invite"),
     b_schedule_named, 1},
    {"schedule", HX_CAT_MULTI, 2.0,
     SCHEDULE_TPL,
     b_schedule, 0},
    {"mail_read", HX_CAT_MULTI, 1.0,
     TPL("What did {who} say about {topic}?", "Read me {who}'s mail about {topic}",
         "Open the email from {who} about {topic}", "What's in {who}'s message about {topic}?",
         "Summarize {who}'s email on {topic}", "What did {who} write about {topic}?",
         "Tell me what {who} wrote about {topic}", "Read the {topic} mail from {who}",
         "What does {who}'s {topic} email say?", "Show me the message {who} sent about {topic}",
         "Open {who}'s email about {topic}", "What was in the mail from {who} on {topic}?",
         "Read {who}'s message on {topic}", "Give me the gist of {who}'s {topic} email",
         "Read out the mail {who} sent about {topic}"),
     b_mail_read, 0},
    {"file_read", HX_CAT_MULTI, 0.8,
     TPL("What does my {topic} file say?", "Read my notes on {topic}", "Open the {topic} file",
         "What's written in my {topic} document?", "Show me the contents of my {topic} file",
         "Read the {topic} file to me",
         "Read the file about {topic}", "Open my {topic} notes", "What is in the {topic} file?",
         "Tell me what my {topic} file says", "Show my {topic} notes",
         "What did I write about {topic}?", "Read my {topic} document",
         "Open the document on {topic}", "Read out my file on {topic}"),
     b_file, 0},
    {"cancel_event", HX_CAT_MULTI, 0.8,
     TPL("Cancel {title} {when}", "Remove {title} from my calendar {when}",
         "Call off the {title} {when}", "Delete my {title} event {when}", "Drop {title} {when}",
         "Cancel the {title} meeting {when}"),
     b_cancel, 0},
    {"move_event", HX_CAT_MULTI, 0.8,
     TPL("Move {title} {when} to {at}", "Reschedule {title} {when} to {at}",
         "Push {title} {when} to {at}", "Change {title} {when} so it starts {at}",
         "Shift my {title} {when} to {at}", "Move the {title} meeting {when} to {at}"),
     b_move, 0},
    /* none */
    {"chat", HX_CAT_NONE, 1.0,
     TPL("Thanks!", "Hello", "Who are you?", "Good morning", "Thank you, that's all",
         "What can you do?", "Hi there"),
     b_plain, 0},
    {"no_tool", HX_CAT_NONE, 1.0,
     TPL("What's the weather in {city}?", "Book me a flight to {city}", "Order a taxi to {city} station",
         "What's the news in {city} today?", "Find a hotel in {city}",
         "Translate this into the language of {city}", "How far is {city} from here?"),
     b_city, 0},
    {"cannot", HX_CAT_NONE, 1.0, TPL("{ask}"), b_cannot, 1},
    {"now", HX_CAT_NONE, 0.6,
     TPL("What's today's date?", "What time is it?", "Which time zone am I in?",
         "What day is it today?", "What's the date?", "What's my time zone?"),
     b_plain, 0},
    /* refusal */
    {"declined_send", HX_CAT_REFUSAL, 1.0,
     TPL("Email {email} about {topic}: {msg}", "Send {email} a mail about {topic} saying {msg}",
         "Write to {email}, subject {topic}: {msg}", "Mail {email} re {topic}: {msg}",
         "Tell {email} by email about {topic}: {msg}",
         "Send a message to {email} about {topic}: {msg}"),
     b_send, 0},
    {"declined_create", HX_CAT_REFUSAL, 0.7,
     TPL("Add \"{title}\" to my calendar {at} for {durn}", "Put {title} in my calendar {at}, {durn}",
         "Block {durn} {at} for {title}", "Create an event \"{title}\" {at} lasting {durn}",
         "Schedule {title} {at} for {durn}", "New event: {title}, {at}, {durn}"),
     b_create, 0},
    /* the slot is found, then booking is declined: no "Booked" (training only) */
    {"declined_schedule", HX_CAT_REFUSAL, 0.7, SCHEDULE_TPL, b_schedule, 1},
    {"taint_reply", HX_CAT_REFUSAL, 1.0,
     TPL("Reply to {who}'s mail about {topic}: {msg}", "Answer {who}'s email on {topic} saying {msg}",
         "Respond to {who} about {topic}: {msg}", "Reply to the {topic} mail from {who}: {msg}",
         "Write back to {who} on {topic}: {msg}", "Send {who} a reply about {topic}: {msg}"),
     b_reply, 0},
    {"policy_deny", HX_CAT_REFUSAL, 0.7,
     TPL("Email {email} about {topic}: {msg}", "Send {email} a mail about {topic} saying {msg}",
         "Write to {email}, subject {topic}: {msg}", "Mail {email} re {topic}: {msg}",
         "Tell {email} by email about {topic}: {msg}",
         "Send a message to {email} about {topic}: {msg}"),
     b_send, 0},
    /* error */
    {"file_missing", HX_CAT_ERROR, 1.0,
     TPL("Read {wrong}", "Open {wrong} for me", "What does {wrong} say?", "Show me {wrong}",
         "Read the file {wrong}", "Print {wrong}"),
     b_file_missing, 0},
    {"not_organizer", HX_CAT_ERROR, 1.0,
     TPL("Cancel {title} {when}", "Remove {title} from my calendar {when}",
         "Call off the {title} {when}", "Delete my {title} event {when}", "Drop {title} {when}",
         "Cancel the {title} meeting {when}"),
     b_not_organizer, 0},
    {"bad_when", HX_CAT_ERROR, 0.8,
     TPL("What's on my calendar {when}?", "What do I have {when}?", "Show me my events {when}",
         "List my meetings {when}", "Anything on my schedule {when}?", "Check my calendar {when}"),
     b_bad_when, 0},
    /* error recovery (training only): the oracle's first call carries a
     * copying slip the tool refuses (its turn is left out of the loss),
     * then the corrected call and the real answer; or the user's own
     * address is unusable and the answer says so */
    {"schedule_fix", HX_CAT_ERROR, 2.0, SCHEDULE_TPL, b_schedule_fix, 1},
    {"send_fix", HX_CAT_ERROR, 0.8, SEND_TPL, b_send_fix, 1},
    {"bad_address", HX_CAT_ERROR, 0.8, SCHEDULE_TPL, b_bad_address, 1},
    {"bad_send_address", HX_CAT_ERROR, 0.4, SEND_TPL, b_bad_send_address, 1},
    /* memory */
    {"remember", HX_CAT_MEMORY, 1.0,
     TPL("Remember that {fact}", "Please note: {fact}", "Don't forget that {fact}",
         "Keep in mind that {fact}", "Make a note that {fact}", "Remember this: {fact}"),
     b_remember, 0},
    {"remember_dated", HX_CAT_MEMORY, 1.0,
     TPL("Remember that {fact}", "note for later: {fact}", "remember: {fact}",
         "Keep in mind: {fact}", "Save this for me: {fact}",
         "Make a note: {fact}", "FYI for later, {fact}"),
     b_remember_dated, 1},
    {"recall", HX_CAT_MEMORY, 0.8,
     TPL("What do you remember about {x}?", "What do you know about {x}?",
         "Do you remember anything about {x}?", "What did I tell you about {x}?",
         "Remind me what you know about {x}", "Search your memory for {x}"),
     b_recall, 0},
    {"forget", HX_CAT_MEMORY, 0.5,
     TPL("Forget that {fact}", "Please forget this: {fact}", "Delete the memory that {fact}",
         "Stop remembering that {fact}", "Erase the note that {fact}",
         "Forget the fact that {fact}"),
     b_forget, 0},
    /* a fact stored while a related memory is recalled (training only) */
    {"remember_related", HX_CAT_MEMORY, 1.2,
     TPL("Remember that {fact}", "Please note: {fact}", "Update your memory: {fact}",
         "Correction: {fact}", "Make a note that {fact}", "Note that {fact} now",
         "Keep in mind that {fact}", "Remember this instead: {fact}", "From now on, {fact}",
         "Store this: {fact}"),
     b_remember_related, 1},
    /* a question a recalled memory answers: no call (training only) */
    {"recall_known", HX_CAT_NONE, 0.8,
     TPL("What's {ask}?", "What is {ask} again?", "Remind me of {ask}", "Do you know {ask}?",
         "Tell me {ask}", "I forgot {ask}, can you tell me?", "Can you remind me of {ask}?",
         "Sorry, what's {ask}?"),
     b_recall_known, 1},
};
#define N_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

/* The training split's mix: the kinds a small model fails most on
 * held-out tasks are drawn `boost` times as often, and some get training
 * phrasings of their own, so that each kind is taught in the shapes people
 * phrase it: titles and bodies copied straight after a verb, a label or a
 * length; a mail read after its search, and a search by the sender's
 * possessive; free/busy asked without a duration, and the event list asked
 * with "any" and "anything" (no free/busy phrasing asks what is on, or
 * "anything" would come to mean free/busy); file searches with the topic
 * after words that are not it, reads that ask for the contents, folder
 * listings that ask "which"; slot searches for a meeting with nobody named
 * (never the word "room": a room is a habit the nightly adapter learns,
 * and its contrast tasks must not name one); meeting requests that name no
 * length (they book an hour) or put the topic before "meeting"; thanks,
 * greetings, replies and requests no tool serves. None is a held-out
 * phrasing, and held-out tasks do not use this table, so task files stay
 * the same. models/HISTORY.md tells which model's failures each answered. */
static const struct train_mix {
    const char *kind;
    double boost;
    const char *const *extra;
    int n_extra;
} train_mix[] = {
    {"free_busy", 1.5,
     TPL("Is there any free time in my calendar {when}?", "Check if I'm free {when}", "Check my availability {when}", "Am I open {when}?",
         "Tell me if I'm free {when}", "See whether I'm busy {when}", "How free am I {when}?",
         "Any free time on my calendar {when}?", "Am I tied up {when}?",
         "Check if my calendar is clear {when}", "Is my time taken {when}?",
         "Would I be free {when}?", "Let me know if I'm busy {when}",
         "Is my calendar blocked {when}?", "Have I any free time left {when}?")},
    {"chat", 1.0,
     TPL("Thanks a lot", "Great, thank you", "Nothing else for now, thanks", "Cheers", "Good night",
         "Perfect, thanks", "How are you?", "Nice work", "Okay, thanks", "Good evening",
         "That's all for now", "Thank you, I'm done", "Many thanks, that is everything",
         "Thanks, nothing more", "All done, thank you")},
    {"taint_reply", 2.0,
     TPL("Reply to {who} on {topic}: {msg}", "Get back to {who} about {topic}: {msg}",
         "Answer the {topic} mail from {who}: {msg}", "Write a reply to {who} about {topic}: {msg}",
         "Reply on {topic} to {who}: {msg}", "Respond to {who}'s {topic} mail: {msg}")},
    {"create_event", 2.5,
     TPL("Enter {title} {at} for {durn}", "Reserve {durn} {at} for {title}",
         "Set {title} for {at}, {durn} long", "Record {title} on my calendar {at}, {durn}",
         "Add an entry {title} {at} lasting {durn}", "Plan {title} {at} for {durn}",
         "Put down {title} {at}, {durn}", "Note {title} in my calendar {at} for {durn}",
         "Mark {title} {at} in my calendar, {durn}", "Hold {durn} {at}: {title}",
         "Log {title} {at}, it lasts {durn}", "Slot {title} {at} for {durn}",
         "Add {title} {at}; it runs {durn}", "Diary: {title} {at} for {durn}",
         "Arrange {title} {at}, {durn} long", "Put {title} down for {at}, {durn}",
         "Agenda: {title} {at}, {durn}", "Appointment: {title} {at} for {durn}",
         "Organise {title} {at} for {durn}", "Register {title} {at}, {durn}",
         "Please enter {title} {at}, it needs {durn}", "Kindly add {title} {at}, it runs {durn}",
         "Add a {durp} {title} {at}", "Put a {durp} {title} in my diary {at}",
         "Pencil in a {durp} {title} {at}", "Fit a {durp} {title} in {at}",
         "Add an event \"{title}\" {at} for {durn}", "Create \"{title}\" {at}, {durn} long")},
    {"file_search", 2.0,
     TPL("Where did I put the {topic} notes?", "Where are my {topic} notes?",
         "Where have I kept the {topic} file?", "Which folder has my {topic} file?",
         "Find where my {topic} notes are", "Tell me where the {topic} document is",
         "Track down where my {topic} notes are", "I need the path of the file on {topic}",
         "Hunt for the {topic} document", "Search for the file on {topic}",
         "Can you find the document about {topic}?", "Which file is the one on {topic}?",
         "Where did I keep the {topic} notes?", "Spot the {topic} document",
         "Fetch me the file on {topic}", "Dig up the {topic} document",
         "Where did I store the {topic} notes?", "Bring me the file on {topic}")},
    {"mail_search", 1.5,
     TPL("Find {who}'s mail about {topic}", "Check {who}'s email on {topic}",
         "Pull up {who}'s message about {topic}", "Where is {who}'s mail on {topic}?",
         "Show me {who}'s emails about {topic}", "Dig out {who}'s note on {topic}")},
    {"list_events", 1.0,
     TPL("Is there anything on my calendar {when}?", "Have I got anything on {when}?",
         "Anything planned {when}?", "Got anything {when}?", "Is anything booked {when}?",
         "Any meetings {when}?", "Any events on my calendar {when}?",
         "Anything in my diary {when}?", "What's happening {when}?")},
    {"send_mail", 1.5,
     TPL("Inform {email} by mail about {topic}: {msg}", "Notify {email} via email on {topic}: {msg}",
         "Send word to {email} about {topic}: {msg}",
         "Could you mail {email} about {topic}? Say {msg}",
         "Write an email to {email} about {topic} that says {msg}",
         "Use email to tell {email} about {topic}: {msg}")},
    {"no_tool", 1.5,
     TPL("Find a restaurant in {city}", "Get me train tickets to {city}",
         "What's the population of {city}?", "Rent a car in {city}", "Is it raining in {city}?",
         "Show me a map of {city}", "Find flights to {city}", "Buy a ticket to {city}",
         "Which museums are open in {city}?", "Find an apartment in {city}",
         "Call a cab to {city} airport", "Search the web for {city}")},
    {"recall", 1.5,
     TPL("Tell me what you remember about {x}", "Anything in your memory about {x}?",
         "Recall what I said about {x}", "What have I told you about {x}?",
         "What do you have on {x}?", "Do you know anything about {x}?",
         "Check your memory for {x}", "Refresh my memory about {x}")},
    {"forget", 1.5,
     TPL("Remove the memory that {fact}", "Delete the note that {fact}",
         "Drop the note that {fact}", "Clear the memory that {fact}", "Unlearn that {fact}",
         "Wipe the fact that {fact}")},
    {"schedule", 2.5,
     TPL("Schedule a meeting with {who} {when} about {topic}",
         "Set up a meeting with {who} {when} to discuss {topic}",
         "Meet with {who} {when} to talk about {topic}", "Book time with {who} {when} on {topic}",
         "Could you set a meeting with {who} about {topic} {when}?",
         "Find a time to meet {who} {when} regarding {topic}",
         "I'd like to see {who} {when} about {topic}",
         "Slot in a meeting with {who} {when} about {topic}",
         "Squeeze in a {durp} meeting with {who} {when} about {topic}",
         "Make time for {who} {when}: {durn} on {topic}",
         "Let's get {durn} with {who} {when} regarding {topic}",
         "Fix a {durp} call with {who} {when} to discuss {topic}",
         "Add a {durp} {topic} meeting with {who} {when}",
         "Book a {durp} {topic} call with {who} {when}",
         "Set up a {topic} meeting with {who} {when}, {durn}",
         "Enter a {durp} {topic} session with {who} on my calendar {when}",
         "Pencil a {durp} meeting with {who} into my calendar {when} about {topic}",
         "I want a {topic} meeting with {who} {when} for {durn}",
         "Get a {durp} {topic} chat with {who} into the calendar {when}")},
    {"mail_read", 2.0,
     TPL("Give me a summary of {who}'s mail about {topic}",
         "What's in the email {who} sent me about {topic}?", "Display {who}'s {topic} message",
         "Recap the mail from {who} on {topic}", "Can you read {who}'s note about {topic} to me?",
         "I want to know what {who}'s email about {topic} says",
         "Go through {who}'s message on {topic}",
         "Pull up the email from {who} about {topic} and read it",
         "Let me see the mail {who} wrote on {topic}", "Brief me on {who}'s {topic} email")},
    {"file_read", 2.0,
     TPL("Pull up the document on {topic} and read it", "Read me what's in my {topic} notes",
         "What do my {topic} notes say?", "Let me hear my {topic} file",
         "Go through my {topic} document", "Bring up my file on {topic} and read it to me",
         "What's inside my {topic} file?", "Give me the contents of the {topic} notes")},
    {"move_event", 1.5, NULL, 0},
    {"find_slots", 1.2,
     TPL("Is there time for a {durp} meeting {when}?", "Could I squeeze a {durp} meeting in {when}?",
         "Where would a {durp} meeting fit {when}?", "Find time for a {durp} call {when}",
         "When could a {durn} meeting happen {when}?", "Is there space for a {durp} meeting {when}?",
         "Find a free {durp} meeting slot {when}", "Have I got space for a {durp} call {when}?")},
    {"files_list", 1.0,
     TPL("Which documents are in my {folder} folder?", "Which files do I keep in {folder}?",
         "Which notes sit in {folder}?", "Which files does my {folder} folder hold?",
         "Which things are saved in {folder}?", "What documents do I have in {folder}?")},
};

static const struct train_mix *mix_of(const kind_def *k, int split)
{
    if (split != HX_SPLIT_TRAIN || k->train_only) return NULL;
    for (size_t i = 0; i < sizeof train_mix / sizeof *train_mix; i++)
        if (!strcmp(train_mix[i].kind, k->name)) return &train_mix[i];
    return NULL;
}

int hx_dg_phrasings_of(int i, hx_dg_phrasings *out)
{
    if (i < 0 || i >= N_KINDS) return 0;
    const kind_def *k = &kinds[i];
    const struct train_mix *m = mix_of(k, HX_SPLIT_TRAIN);
    *out = (hx_dg_phrasings){k->name, k->train_only, k->tpl, k->n_tpl, m ? m->extra : NULL,
                             m ? m->n_extra : 0};
    return 1;
}

/* Default mix: ~45% single, 30% multi, 8% none, 6% refusal, 5% error, 6%
 * memory. Training takes 4 points more errors, mostly the recovery kinds
 * (about 5% of its conversations): the shipped model had never seen a
 * refused call, and answered "Booked" after one. It takes 7% memory, a
 * third of it facts stored while a related memory is recalled (a model
 * that had seen few called memory.search when asked to store an address a
 * recalled memory also named), and among the no-call requests questions a
 * recalled memory answers, so a memory in the prompt does not always
 * mean a call. Held-out tasks keep the
 * default mix and kinds, so task files stay comparable. */
static const double cat_mix[2][HX_CAT_COUNT] = {{0.42, 0.29, 0.07, 0.06, 0.09, 0.07},
                                                {0.45, 0.30, 0.08, 0.06, 0.05, 0.06}};

static int pick_cat(hx_rng *r, int split)
{
    const double *mix = cat_mix[split == HX_SPLIT_TRAIN ? 0 : 1];
    double u = (double)(hx_rng_next(r) >> 11) / 9007199254740992.0, acc = 0;
    for (int c = 0; c < HX_CAT_COUNT; c++)
        if (u < (acc += mix[c])) return c;
    return HX_CAT_SINGLE;
}

static int kind_in(const kind_def *k, int cat, int split)
{
    return k->cat == cat && (!k->train_only || split == HX_SPLIT_TRAIN);
}

static double kind_weight(const kind_def *k, int cat, int split)
{
    if (!kind_in(k, cat, split)) return 0;
    const struct train_mix *m = mix_of(k, split);
    return m ? k->weight * m->boost : k->weight;
}

static const kind_def *pick_kind(hx_rng *r, int cat, int split)
{
    double total = 0, acc = 0;
    for (int i = 0; i < N_KINDS; i++) total += kind_weight(&kinds[i], cat, split);
    double u = (double)(hx_rng_next(r) >> 11) / 9007199254740992.0 * total;
    for (int i = 0; i < N_KINDS; i++) {
        double wt = kind_weight(&kinds[i], cat, split);
        if (wt > 0 && u < (acc += wt)) return &kinds[i];
    }
    for (int i = N_KINDS - 1; i >= 0; i--)
        if (kind_in(&kinds[i], cat, split)) return &kinds[i];
    return &kinds[0];
}

void hx_dg_phrasing_key(const char *s, char *out, size_t n)
{
    size_t j = 0;
    for (; *s && j + 1 < n; s++)
        if ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '{' || *s == '}')
            out[j++] = *s;
        else if (*s >= 'A' && *s <= 'Z')
            out[j++] = (char)(*s - 'A' + 'a');
    out[j] = 0;
}

/* Whether tpl is a held-out phrasing of any kind, case and punctuation aside. */
static int heldout_phrasing(const char *tpl)
{
    char key[512], h[512];
    hx_dg_phrasing_key(tpl, key, sizeof key);
    for (int i = 0; i < N_KINDS; i++)
        for (int j = 0; j < kinds[i].n_tpl; j++) {
            if (!hx_dg_template_heldout(j, kinds[i].n_tpl)) continue;
            hx_dg_phrasing_key(kinds[i].tpl[j], h, sizeof h);
            if (!strcmp(key, h)) return 1;
        }
    return 0;
}

/* Training only: half the requests of a kind with a grammar are composed
 * (never a held-out phrasing), and half the time phrases of any kind are
 * said another way the tools read the same. 0: use a template. */
static int compose(const hx_world *w, hx_rng *r, const kind_def *k, cJSON *slots, char *tpl, size_t n)
{
    static const char *const times[] = {"when", "at"};
    for (int i = 0; i < 2; i++) {
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(slots, times[i]));
        char again[64];
        if (!p || !hx_rng_chance(r, 0.5)) continue;
        hx_world_resay_when(w, r, p, again, sizeof again);
        cJSON_ReplaceItemInObjectCaseSensitive(slots, times[i], cJSON_CreateString(again));
    }
    if (!hx_rng_chance(r, 0.5)) return 0;
    for (int tries = 0; tries < 8; tries++)
        if (hx_dg_compose(k->name, r, tpl, n) && !heldout_phrasing(tpl)) return 1;
    return 0;
}

cJSON *hx_dg_task_new(const hx_world *w, hx_rng *r, int cat, unsigned *used)
{
    return hx_dg_task_new_phrased(w, r, cat, used, w->split);
}

cJSON *hx_dg_task_new_phrased(const hx_world *w, hx_rng *r, int cat, unsigned *used, int phrase_split)
{
    const kind_def *k = pick_kind(r, cat < 0 ? pick_cat(r, w->split) : cat, w->split);
    cJSON *slots = cJSON_CreateObject();
    if (!slots || !k->build(w, r, slots, used)) {
        cJSON_Delete(slots);
        return NULL;
    }
    char req[512], composed[512];
    const struct train_mix *m = mix_of(k, phrase_split);
    const char *tpl = composed;
    int ti = HX_DG_COMPOSED_TEMPLATE;
    if (phrase_split != HX_SPLIT_TRAIN || !compose(w, r, k, slots, composed, sizeof composed)) {
        ti = pick_template(r, phrase_split, k->n_tpl, m ? m->n_extra : 0);
        if (ti < k->n_tpl) {
            tpl = k->tpl[ti];
        } else {
            tpl = m->extra[ti - k->n_tpl];
            ti = HX_DG_EXTRA_TEMPLATE + ti - k->n_tpl;
        }
    }
    if (!strstr(tpl, "{dur") && cJSON_GetObjectItemCaseSensitive(slots, "dur"))
        default_length(slots);
    if (k->cat == HX_CAT_NONE && k->build == b_plain) { /* small talk: as written */
        hx_buf b;
        hx_buf_init(&b);
        expand(r, tpl, slots, 0, &b);
        snprintf(req, sizeof req, "%s", b.data ? b.data : "");
        hx_buf_free(&b);
    } else if (ti == HX_DG_COMPOSED_TEMPLATE) {
        phrase_composed(r, tpl, slots, req, sizeof req);
    } else {
        hx_dg_phrase(r, tpl, slots, req, sizeof req);
    }
    return hx_dg_task_make(w, k->cat, k->name, req, ti, slots);
}

cJSON *hx_dg_task_make(const hx_world *w, int cat, const char *kind, const char *request,
                       int template_i, cJSON *slots)
{
    cJSON *t = cJSON_CreateObject();
    if (!t) return cJSON_Delete(slots), NULL;
    add_str(t, "split", w->split == HX_SPLIT_TRAIN ? "train" : "heldout");
    char seed[32]; /* a string: JSON numbers are doubles, seeds are 64 bits */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)w->seed);
    add_str(t, "world_seed", seed);
    add_str(t, "now", w->now_iso);
    add_str(t, "category", hx_dg_category_name(cat));
    add_str(t, "kind", kind);
    add_str(t, "request", request);
    cJSON_AddNumberToObject(t, "template", template_i);
    add_str(t, "consent", strncmp(kind, "declined", 8) ? "yes" : "no");
    if (!strcmp(kind, "policy_deny")) {
        cJSON *pol = cJSON_AddObjectToObject(t, "policy"), *tools = cJSON_AddObjectToObject(pol, "tools");
        add_str(tools, "mail.send", "deny");
    } else {
        cJSON_AddNullToObject(t, "policy");
    }
    cJSON_AddItemToObject(t, "slots", slots);
    return t;
}
