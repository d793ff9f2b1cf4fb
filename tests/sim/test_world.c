/* test_world.c: generated sample worlds: the same seed gives the same
 * world and files, the tools read them cleanly, held-out pools are
 * disjoint from training's, dates spread over many years, and an opened
 * world leaves the environment as it found it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sim/sim.h"
#include "scratch.h"
#include "test.h"

static void test_world_deterministic(void)
{
    hx_world a, b, c;
    ASSERT(hx_world_generate(42, HX_SPLIT_TRAIN, 0, &a, NULL) == HX_OK);
    ASSERT(hx_world_generate(42, HX_SPLIT_TRAIN, 0, &b, NULL) == HX_OK);
    ASSERT(hx_world_generate(43, HX_SPLIT_TRAIN, 0, &c, NULL) == HX_OK);
    EXPECT(!memcmp(&a, &b, sizeof a));
    EXPECT(memcmp(&a, &c, sizeof a) != 0);
    EXPECT(a.n_people >= 5 && a.n_events >= 8 && a.n_mails >= 6 && a.n_files >= 4);
    int recurring = 0;
    for (int i = 0; i < a.n_events; i++) recurring += a.events[i].recur != 0;
    EXPECT(recurring >= 2);
    char h1[128], h2[128], p1[200], p2[200];
    snprintf(h1, sizeof h1, "%s/w1", scratch_dir());
    snprintf(h2, sizeof h2, "%s/w2", scratch_dir());
    ASSERT(hx_world_write(&a, h1, NULL) == HX_OK && hx_world_write(&b, h2, NULL) == HX_OK);
    const char *files[] = {"config.json", "calendars/personal.ics"};
    for (int i = 0; i < 2; i++) {
        snprintf(p1, sizeof p1, "%s/config/%s", h1, files[i]);
        snprintf(p2, sizeof p2, "%s/config/%s", h2, files[i]);
        char *s1 = slurp(p1), *s2 = slurp(p2);
        EXPECT(s1 && s2 && !strcmp(s1, s2));
        free(s1);
        free(s2);
    }
    /* the world is what the tools read: config and calendar load */
    hx_dg_world dw;
    hx_err err = {0};
    ASSERT(hx_dg_world_open(42, HX_SPLIT_TRAIN, 0, h1, &dw, &err) == HX_OK);
    cJSON *args = cJSON_Parse("{\"range\":\"next week\"}"), *res = NULL;
    EXPECT(hx_tools_call(dw.reg, "calendar.list_events", args, &res, &err) == HX_OK);
    EXPECT(cJSON_GetNumberValue(cJSON_GetObjectItem(res, "count")) >= 1);
    EXPECT(!cJSON_GetObjectItem(res, "problems"));
    cJSON_Delete(res);
    cJSON_Delete(args);
    args = cJSON_Parse("{\"limit\":50}");
    EXPECT(hx_tools_call(dw.reg, "mail.search", args, &res, &err) == HX_OK);
    EXPECT_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(res, "total")), dw.w.n_mails);
    cJSON_Delete(res);
    cJSON_Delete(args);
    hx_dg_world_close(&dw);
}

/* The calendar tools read every world without a problem: a world without
 * personal events once wrote an empty personal.ics, which the tools report
 * (with the world's path) in every calendar result, a line of noise in 1
 * of 5 worlds' find_slots results that the evaluation's path made differ
 * from training's. */
static void test_worlds_read_cleanly(void)
{
    int without_personal = 0;
    for (uint64_t seed = 1; seed <= 30; seed++) {
        hx_dg_world dw;
        hx_err err = {0};
        char home[128];
        snprintf(home, sizeof home, "%s/clean", scratch_dir());
        ASSERT(hx_dg_world_open(seed, seed % 2 ? HX_SPLIT_TRAIN : HX_SPLIT_HELDOUT, 0, home, &dw, &err) == HX_OK);
        int personal = 0;
        for (int i = 0; i < dw.w.n_events; i++) personal |= dw.w.events[i].personal;
        without_personal += !personal;
        cJSON *args = cJSON_Parse("{\"range\":\"next week\",\"duration_minutes\":30}"), *res = NULL;
        EXPECT(hx_tools_call(dw.reg, "calendar.find_slots", args, &res, &err) == HX_OK);
        if (cJSON_GetObjectItem(res, "problems")) printf("# world %d: %s\n", (int)seed,
                                                         cJSON_PrintUnformatted(cJSON_GetObjectItem(res, "problems")));
        EXPECT(res && !cJSON_GetObjectItem(res, "problems"));
        cJSON_Delete(res);
        cJSON_Delete(args);
        hx_dg_world_close(&dw);
    }
    EXPECT(without_personal > 0); /* the case that once made the noise */
}

/* Names drawn from one split never come from the other. */
static void test_pools_disjoint(void)
{
    enum { N = 1500 };
    static hx_wperson tr[N], ho[N];
    static char ttr[N][32], tho[N][32];
    hx_rng r;
    hx_rng_seed(&r, 7, 0);
    for (int i = 0; i < N; i++) {
        hx_world_person(&r, HX_SPLIT_TRAIN, &tr[i]);
        hx_world_person(&r, HX_SPLIT_HELDOUT, &ho[i]);
        hx_world_topic(&r, HX_SPLIT_TRAIN, ttr[i], 32);
        hx_world_topic(&r, HX_SPLIT_HELDOUT, tho[i], 32);
    }
    int clash = 0, distinct = 0;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            clash += !strcmp(tr[i].first, ho[j].first) || !strcmp(tr[i].last, ho[j].last) ||
                     !strcmp(ttr[i], tho[j]);
        }
        distinct += i == 0 || strcmp(tr[i].name, tr[i - 1].name);
    }
    EXPECT_EQ_INT(clash, 0);
    EXPECT(distinct > N * 9 / 10);
    for (int s = 0; s < 40; s++) {
        hx_world w;
        hx_world_generate((uint64_t)s, s & 1, 0, &w, NULL);
        int y, m, d;
        hx_civil_from_days(w.today, &y, &m, &d);
        EXPECT((y == 2028) == (w.split == HX_SPLIT_HELDOUT));
    }
}

static int in_words(char set[][24], int n, const char *w)
{
    for (int i = 0; i < n; i++)
        if (!strcasecmp(set[i], w)) return 1;
    return 0;
}

/* Adds the words of s (split at spaces) to set. */
static int add_words(char set[][24], int n, int max, const char *s)
{
    while (*s && n < max) {
        size_t l = strcspn(s, " ");
        snprintf(set[n], 24, "%.*s", (int)l, s);
        if (l && !in_words(set, n, set[n])) n++;
        s += l + (s[l] == ' ');
    }
    return n;
}

/* Made-up training words start with many letters and clusters (copy
 * practice for word-initial pieces: the narrow held-out inventory has no
 * c, j, q, w, x, y or vowel start), and none is a word of a held-out name
 * or topic, made-up or from the fixed lists ("freeze" of "code freeze"). */
static void test_training_words(void)
{
    enum { N = 3000, MAXW = 6000 };
    static char held[MAXW][24];
    int nh = 0, starts[26] = {0}, n_starts = 0, clash = 0;
    hx_rng r;
    hx_rng_seed(&r, 9, 1);
    for (int i = 0; i < N; i++) {
        hx_wperson p;
        char t[32];
        hx_world_person(&r, HX_SPLIT_HELDOUT, &p);
        hx_world_topic(&r, HX_SPLIT_HELDOUT, t, sizeof t);
        nh = add_words(held, nh, MAXW, p.name);
        nh = add_words(held, nh, MAXW, t);
    }
    for (int i = 0; i < N; i++) {
        char w[24];
        hx_world_word(&r, HX_SPLIT_TRAIN, w, sizeof w);
        int c = (w[0] | 32) - 'a';
        if (c >= 0 && c < 26 && !starts[c]++) n_starts++;
        if (in_words(held, nh, w) && strcasecmp(w, "project") && strcasecmp(w, "plan")) {
            if (!clash++) printf("# training word %s is a held-out word\n", w);
        }
    }
    /* the first word of a training topic: made up, a training entry's or
     * an English word of the lexicon ("pottery plan"), never held out */
    int topic_clash = 0, english = 0;
    for (int i = 0; i < N; i++) {
        char t[32];
        hx_world_topic(&r, HX_SPLIT_TRAIN, t, sizeof t);
        t[strcspn(t, " ")] = 0;
        english += !strcmp(t, "pottery") || !strcmp(t, "harvest") || !strcmp(t, "violin");
        if (in_words(held, nh, t) && !topic_clash++) printf("# training topic word %s is held out\n", t);
    }
    EXPECT_EQ_INT(topic_clash, 0);
    EXPECT(english > 0);
    printf("# %d held-out words; training words start with %d letters\n", nh, n_starts);
    EXPECT(nh > 1000);
    EXPECT_EQ_INT(clash, 0);
    EXPECT(n_starts >= 24);
    EXPECT(starts['c' - 'a'] > N / 100 && starts['w' - 'a'] > N / 100 && starts['a' - 'a'] > N / 100);
}

/* Training worlds made with HX_WORLD_BUSY_DAYS: about half have a busy
 * day (two or three one-off events on one working day of the coming
 * week) and about a third one cancelled one-off event, on the busy day
 * when there is one, written as STATUS:CANCELLED; held-out worlds have
 * neither, and without the flag a training world has neither and is
 * otherwise the same world (the flag draws from a stream of its own). */
static void test_busy_days(void)
{
    int busy = 0, cancelled = 0, written = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        hx_world w, h, plain;
        ASSERT(hx_world_generate(seed, HX_SPLIT_TRAIN, HX_WORLD_BUSY_DAYS, &w, NULL) == HX_OK);
        ASSERT(hx_world_generate(seed, HX_SPLIT_HELDOUT, HX_WORLD_BUSY_DAYS, &h, NULL) == HX_OK);
        ASSERT(hx_world_generate(seed, HX_SPLIT_TRAIN, 0, &plain, NULL) == HX_OK);
        EXPECT(h.busy_day == 0 && plain.busy_day == 0);
        EXPECT(!memcmp(plain.mails, w.mails, sizeof w.mails) && !memcmp(plain.files, w.files, sizeof w.files));
        EXPECT(plain.n_events == w.n_events);
        for (int i = 0; i < plain.n_events; i++) {
            EXPECT(!plain.events[i].cancelled);
            EXPECT(!strcmp(plain.events[i].title, w.events[i].title));
        }
        for (int i = 0; i < h.n_events; i++) EXPECT(!h.events[i].cancelled);
        int on_day = 0, n_canc = 0;
        for (int i = 0; i < w.n_events; i++) {
            const hx_wevent *e = &w.events[i];
            on_day += w.busy_day && !e->recur && e->day == w.busy_day;
            if (!e->cancelled) continue;
            n_canc++;
            EXPECT(!e->recur && (!w.busy_day || e->day == w.busy_day));
            if (written++ || e->personal) continue;
            char home[128], p[256];
            snprintf(home, sizeof home, "%s/busy", scratch_dir());
            ASSERT(hx_world_write(&w, home, NULL) == HX_OK);
            snprintf(p, sizeof p, "%s/config/calendars/work/%.*s.ics", home,
                     (int)strcspn(e->uid, "@"), e->uid);
            char *text = slurp(p);
            EXPECT(text && strstr(text, "STATUS:CANCELLED"));
            free(text);
        }
        if (w.busy_day) {
            busy++;
            EXPECT(on_day >= 2 && w.busy_day > w.today && w.busy_day <= w.today + 8);
        }
        EXPECT(n_canc <= 1);
        cancelled += n_canc;
    }
    printf("#   of 60 training worlds: %d with a busy day, %d with a cancelled event\n", busy,
           cancelled);
    EXPECT(busy >= 18 && busy <= 42);
    EXPECT(cancelled >= 8 && cancelled <= 36);
}

/* What the world holds, as the agent's tools see it: recurring meetings
 * in the calendar files, a Maildir with unread mail, files under folders. */
static void test_world_layout(void)
{
    hx_world w;
    char home[128], p[256];
    ASSERT(hx_world_generate(8, HX_SPLIT_HELDOUT, 0, &w, NULL) == HX_OK);
    snprintf(home, sizeof home, "%s/layout", scratch_dir());
    ASSERT(hx_world_write(&w, home, NULL) == HX_OK);
    int rrules = 0;
    for (int i = 0; i < w.n_events; i++) {
        if (w.events[i].personal) continue;
        snprintf(p, sizeof p, "%s/config/calendars/work/%.*s.ics", home,
                 (int)strcspn(w.events[i].uid, "@"), w.events[i].uid);
        char *s = slurp(p);
        EXPECT(s && strstr(s, w.events[i].uid) && strstr(s, "BEGIN:VEVENT"));
        rrules += s && strstr(s, "RRULE:FREQ=WEEKLY") != NULL;
        free(s);
    }
    EXPECT(rrules >= 1);
    int unread = 0;
    for (int i = 0; i < w.n_mails; i++) {
        snprintf(p, sizeof p, "%s/config/mail/%s/%s%s", home, w.mails[i].unread ? "new" : "cur",
                 w.mails[i].id, w.mails[i].unread ? "" : ":2,S");
        char *s = slurp(p);
        EXPECT(s && strstr(s, w.mails[i].fact) && strstr(s, "Subject: "));
        unread += w.mails[i].unread;
        free(s);
    }
    for (int i = 0; i < w.n_files; i++) {
        snprintf(p, sizeof p, "%s/config/files/%s/%s", home, w.files[i].folder, w.files[i].name);
        EXPECT(access(p, R_OK) == 0);
    }
    snprintf(p, sizeof p, "%s/config/config.json", home);
    hx_config *cfg = NULL;
    ASSERT(hx_config_load(p, &cfg, NULL) == HX_OK);
    EXPECT_STR_EQ(cfg->user_email, w.user.email);
    EXPECT_STR_EQ(cfg->timezone, w.tz);
    EXPECT_EQ_INT(cfg->work_start_min, w.work_start);
    EXPECT_EQ_INT(cfg->n_calendars, 2);
    hx_config_free(cfg);
    /* written again over the old one: nothing of it is left */
    hx_world w2;
    hx_world_generate(9, HX_SPLIT_HELDOUT, 0, &w2, NULL);
    ASSERT(hx_world_write(&w2, home, NULL) == HX_OK);
    snprintf(p, sizeof p, "%s/config/files/%s/%s", home, w.files[0].folder, w.files[0].name);
    int same = 0;
    for (int i = 0; i < w2.n_files; i++) same |= !strcmp(w2.files[i].name, w.files[0].name);
    EXPECT(same || access(p, F_OK) != 0);
}

/* The training split's dates spread over many years, never 2028. */
static void test_years(void)
{
    int seen[40] = {0}, distinct = 0;
    for (int s = 0; s < 200; s++) {
        hx_world w;
        int y, m, d;
        hx_world_generate((uint64_t)s * 7919, HX_SPLIT_TRAIN, 0, &w, NULL);
        hx_civil_from_days(w.today, &y, &m, &d);
        EXPECT(y != 2028 && y >= 2021 && y <= 2035);
        if (y >= 2000 && y < 2040 && !seen[y - 2000]++) distinct++;
    }
    EXPECT(distinct >= 12);
}

/* A day phrase reads back, through the tools' time reader, as that day. */
static void test_day_phrases(void)
{
    hx_world w;
    hx_world_generate(4, HX_SPLIT_TRAIN, 0, &w, NULL);
    hx_rng r;
    hx_rng_seed(&r, 1, 2);
    for (int64_t d = w.today - 7; d <= w.today + 30; d++)
        for (int k = 0; k < 4; k++) {
            char p[64];
            hx_when_range rg;
            hx_world_day_phrase(&w, &r, d, p, sizeof p);
            ASSERT(hx_when_parse(p, w.now, w.tz, &rg, NULL) == HX_OK);
            char want[40], got[40];
            hx_world_date(&w, hx_world_local(&w, d, 720), want, sizeof want);
            hx_world_date(&w, rg.start, got, sizeof got);
            if (strcmp(want, got)) printf("# '%s' read as %s, not %s\n", p, got, want);
            EXPECT_STR_EQ(got, want);
        }
}

/* A time phrase said another way reads as the same range (a day, a part
 * of one, a moment), in several ways; a phrase the reader refuses comes
 * back unchanged (control). */
static void test_resay_when(void)
{
    hx_world w;
    hx_world_generate(6, HX_SPLIT_TRAIN, 0, &w, NULL);
    hx_rng r;
    hx_rng_seed(&r, 3, 4);
    int changed = 0, n = 0;
    for (int64_t d = w.today + 1; d <= w.today + 12; d++) {
        char day[40], ph[3][64];
        hx_world_day_phrase(&w, &r, d, day, sizeof day);
        snprintf(ph[0], sizeof ph[0], "%s", day);
        snprintf(ph[1], sizeof ph[1], "%s afternoon", strncmp(day, "on ", 3) ? day : day + 3);
        snprintf(ph[2], sizeof ph[2], "%s at 3pm", strncmp(day, "on ", 3) ? day : day + 3);
        for (int k = 0; k < 3; k++) {
            hx_when_range a, b;
            if (hx_when_parse(ph[k], w.now, w.tz, &a, NULL)) continue;
            for (int rep = 0; rep < 4; rep++, n++) {
                char again[64];
                hx_world_resay_when(&w, &r, ph[k], again, sizeof again);
                ASSERT(hx_when_parse(again, w.now, w.tz, &b, NULL) == HX_OK);
                if (a.start != b.start || a.end != b.end || a.is_point != b.is_point)
                    printf("# '%s' -> '%s' reads otherwise\n", ph[k], again);
                EXPECT(a.start == b.start && a.end == b.end && a.is_point == b.is_point);
                changed += strcmp(again, ph[k]) != 0;
            }
        }
    }
    printf("# %d of %d time phrases said another way\n", changed, n);
    EXPECT(n > 100 && changed > n / 2);
    char same[64];
    hx_world_resay_when(&w, &r, "at teatime", same, sizeof same);
    EXPECT_STR_EQ(same, "at teatime");
}

/* The whole environment as one string, a NAME=VALUE line each. */
extern char **environ;
static char *env_text(void)
{
    size_t n = 1;
    for (char **e = environ; *e; e++) n += strlen(*e) + 1;
    char *s = malloc(n), *p = s;
    if (!s) abort();
    for (char **e = environ; *e; e++) p += sprintf(p, "%s\n", *e);
    *p = 0;
    return s;
}

/* One open and close with HEARTH_HOME and HEARTH_NOW as given (NULL:
 * unset): inside, the world's; after close, each as before, and no other
 * variable touched. */
static void world_env_round(const char *home_before, const char *now_before)
{
    char h[160];
    snprintf(h, sizeof h, "%s/wenv", scratch_dir());
    if (home_before) setenv("HEARTH_HOME", home_before, 1);
    else unsetenv("HEARTH_HOME");
    if (now_before) setenv("HEARTH_NOW", now_before, 1);
    else unsetenv("HEARTH_NOW");
    char *before = env_text();
    hx_dg_world dw;
    hx_err err = {0};
    ASSERT(hx_dg_world_open(42, HX_SPLIT_TRAIN, 0, h, &dw, &err) == HX_OK);
    EXPECT_STR_EQ(getenv("HEARTH_HOME"), h);
    EXPECT(getenv("HEARTH_NOW") && !strcmp(getenv("HEARTH_NOW"), dw.w.now_iso));
    /* a task's own clock (hx_dg_run) is the world's business too */
    setenv("HEARTH_NOW", "2031-01-01T00:00:00Z", 1);
    hx_dg_world_close(&dw);
    if (home_before) EXPECT_STR_EQ(getenv("HEARTH_HOME"), home_before);
    else EXPECT(getenv("HEARTH_HOME") == NULL);
    if (now_before) EXPECT_STR_EQ(getenv("HEARTH_NOW"), now_before);
    else EXPECT(getenv("HEARTH_NOW") == NULL);
    char *after = env_text();
    /* the same variables with the same values (order may differ only for
     * a variable unset and set again, which none of these is) */
    EXPECT_EQ_INT((int)strlen(after), (int)strlen(before));
    for (char *line = strtok(before, "\n"); line; line = strtok(NULL, "\n")) {
        char *eq = strchr(line, '=');
        ASSERT(eq);
        *eq = 0;
        const char *v = getenv(line);
        EXPECT(v && !strcmp(v, eq + 1));
    }
    free(before);
    free(after);
    hx_world_rmtree(h, NULL);
}

/* Close puts the caller's HEARTH_HOME and HEARTH_NOW back: set or unset,
 * both or one; a second close, and a close after a failed open, change
 * nothing. */
static void test_world_env_restored(void)
{
    world_env_round("/the/user/home", "2026-11-29T20:00:00Z");
    world_env_round(NULL, NULL);
    world_env_round("/the/user/home", NULL);
    world_env_round(NULL, "2026-11-29T20:00:00Z");
    /* twice closed: the second is a no-op */
    char h[160];
    snprintf(h, sizeof h, "%s/wenv2", scratch_dir());
    setenv("HEARTH_HOME", "/u", 1);
    unsetenv("HEARTH_NOW");
    hx_dg_world dw;
    hx_err err = {0};
    ASSERT(hx_dg_world_open(43, HX_SPLIT_TRAIN, 0, h, &dw, &err) == HX_OK);
    hx_dg_world_close(&dw);
    setenv("HEARTH_HOME", "/changed/after", 1);
    hx_dg_world_close(&dw);
    EXPECT_STR_EQ(getenv("HEARTH_HOME"), "/changed/after");
    EXPECT(getenv("HEARTH_NOW") == NULL);
    hx_world_rmtree(h, NULL);
    /* a task that names no world: nothing opened, close is safe and
     * leaves the environment alone */
    cJSON *bad = cJSON_Parse("{\"world_seed\":\"x1\",\"split\":\"train\"}");
    EXPECT_EQ_INT(hx_dg_task_world(bad, h, &dw, &err), HX_ERR_FORMAT);
    hx_dg_world_close(&dw);
    EXPECT_STR_EQ(getenv("HEARTH_HOME"), "/changed/after");
    EXPECT(getenv("HEARTH_NOW") == NULL);
    cJSON_Delete(bad);
    unsetenv("HEARTH_HOME");
}

int main(void)
{
    RUN(test_world_deterministic);
    RUN(test_pools_disjoint);
    RUN(test_training_words);
    RUN(test_busy_days);
    RUN(test_world_layout);
    RUN(test_worlds_read_cleanly);
    RUN(test_years);
    RUN(test_day_phrases);
    RUN(test_resay_when);
    RUN(test_world_env_restored);
    scratch_remove();
    return test_summary();
}
