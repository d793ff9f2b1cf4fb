/* control.c: the closed loop over latency, battery and heat: per-turn
 * measurements and periodic readings of the device choose threads, the
 * context cap, KV type, speculation, the small model and the prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/governor.h"

struct hx_loop {
    hx_governor *gov;
    hx_loop_targets t;
    char *sysfs, *procfs;
    hx_power pw;
    hx_gov_decision d;
    hx_loop_choice cur;
    int latency_level, over, under;
    long slices;
    int turns;
    hx_loop_event ev[HX_LOOP_EVENTS];
    int n_ev, first_ev, seq;
};

hx_loop_targets hx_loop_default_targets(void)
{
    hx_loop_targets t = {500.0, 5.0, 50, HX_GOV_SAVING, 2};
    return t;
}

/* Draft tokens per pass by level: speculation spends compute on drafts
 * that may be rejected, so less of it as the power budget shrinks. */
static const int spec_by_level[3] = {8, 4, 0};

static void choose(const hx_loop *k, hx_loop_choice *c)
{
    memset(c, 0, sizeof *c);
    c->level = k->d.level;
    c->latency_level = k->latency_level;
    c->n_threads = k->d.n_threads;
    c->ctx_cap = k->d.ctx_cap;
    c->kv_q8 = c->level >= HX_GOV_SAVING;
    c->spec_depth = spec_by_level[c->level];
    c->small_model = c->level >= k->t.small_level || c->latency_level >= 2;
    c->trim_prompt = c->level >= HX_GOV_CRITICAL || c->latency_level >= 1;
}

static void record(hx_loop *k, const char *why)
{
    int i = (k->first_ev + k->n_ev) % HX_LOOP_EVENTS;
    if (k->n_ev == HX_LOOP_EVENTS) k->first_ev = (k->first_ev + 1) % HX_LOOP_EVENTS;
    else k->n_ev++;
    hx_loop_event *e = &k->ev[i];
    e->seq = ++k->seq;
    e->slice = k->slices;
    e->turn = k->turns;
    e->capacity = k->pw.n_batteries ? k->pw.capacity : HX_POWER_UNKNOWN;
    e->temp_c = k->pw.temp_c;
    e->choice = k->cur;
    snprintf(e->why, sizeof e->why, "%s", why);
}

/* Reads the device, decides, and records a change (or the first). */
static int update(hx_loop *k, const char *latency_why)
{
    hx_power_read(k->sysfs, k->procfs, &k->pw);
    hx_governor_update(k->gov, &k->pw, &k->d);
    hx_loop_choice c;
    choose(k, &c);
    int changed = memcmp(&c, &k->cur, sizeof c) != 0;
    if (!changed && k->n_ev) return 0;
    k->cur = c;
    char why[200];
    snprintf(why, sizeof why, "%s%s%s", k->d.why, latency_why ? "; " : "",
             latency_why ? latency_why : "");
    record(k, why);
    return 1;
}

hx_loop *hx_loop_new(const hx_governor_params *gp, const hx_loop_targets *t,
                     const char *sysfs, const char *procfs)
{
    hx_loop *k = hx_calloc(1, sizeof *k);
    if (!k) return NULL;
    k->t = t ? *t : hx_loop_default_targets();
    if (k->t.reread_slices < 1) k->t.reread_slices = 1;
    k->gov = hx_governor_new(gp);
    k->sysfs = sysfs ? hx_strdup(sysfs) : NULL;
    k->procfs = procfs ? hx_strdup(procfs) : NULL;
    if (!k->gov || (sysfs && !k->sysfs) || (procfs && !k->procfs)) {
        hx_loop_free(k);
        return NULL;
    }
    update(k, NULL);
    return k;
}

void hx_loop_free(hx_loop *k)
{
    if (!k) return;
    hx_governor_free(k->gov);
    free(k->sysfs);
    free(k->procfs);
    free(k);
}

void hx_loop_get(const hx_loop *k, hx_loop_choice *out) { *out = k->cur; }
const hx_loop_targets *hx_loop_get_targets(const hx_loop *k) { return &k->t; }

int hx_loop_slice(hx_loop *k)
{
    return ++k->slices % k->t.reread_slices == 0 ? update(k, NULL) : 0;
}

int hx_loop_poll(hx_loop *k) { return update(k, NULL); }

/* The latency level after a turn: up after turns_hyst warm turns in a row
 * over the TTFT target or under the decode floor, down after turns_hyst
 * turns in a row well inside both. */
static const char *latency_step(hx_loop *k, const hx_turn_stats *t)
{
    const int slow = (t->warm && t->ttft_ms > k->t.ttft_ms) ||
                     (t->decode_tps > 0 && t->decode_tps < k->t.decode_floor);
    const int easy = t->ttft_ms < k->t.ttft_ms / 2 &&
                     (t->decode_tps <= 0 || t->decode_tps > 2 * k->t.decode_floor);
    k->over = slow ? k->over + 1 : 0;
    k->under = easy ? k->under + 1 : 0;
    if (k->over >= k->t.turns_hyst && k->latency_level < 2) {
        k->latency_level++;
        k->over = 0;
        return "latency over target: lighter turns";
    }
    if (k->under >= k->t.turns_hyst && k->latency_level > 0) {
        k->latency_level--;
        k->under = 0;
        return "latency well inside target: fuller turns";
    }
    return NULL;
}

int hx_loop_turn(hx_loop *k, const hx_turn_stats *t)
{
    k->turns++;
    return update(k, latency_step(k, t));
}

const hx_loop_event *hx_loop_events(hx_loop *k, int *n)
{
    *n = k->n_ev;
    if (k->first_ev) { /* wrapped: rotate so the oldest comes first */
        hx_loop_event tmp[HX_LOOP_EVENTS];
        const int head = HX_LOOP_EVENTS - k->first_ev;
        memcpy(tmp, k->ev + k->first_ev, (size_t)head * sizeof *tmp);
        memcpy(tmp + head, k->ev, (size_t)k->first_ev * sizeof *tmp);
        memcpy(k->ev, tmp, sizeof tmp);
        k->first_ev = 0;
    }
    return k->ev;
}

void hx_loop_memo_get(const hx_loop *k, hx_loop_memo *out)
{
    out->latency_level = k->latency_level;
    out->over = k->over;
    out->under = k->under;
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void hx_loop_memo_set(hx_loop *k, const hx_loop_memo *m)
{
    k->latency_level = clamp(m->latency_level, 0, 2);
    k->over = clamp(m->over, 0, k->t.turns_hyst);
    k->under = clamp(m->under, 0, k->t.turns_hyst);
    update(k, "latency level carried over from the last session");
}
