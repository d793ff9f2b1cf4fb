/* cli_power.c: the governor for the command line: its policy from
 * config.json's "governor" object, one reading of the device (battery,
 * heat, load), the small model it switches to, and the lines `hearth info`
 * prints about it. */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "tools/tools.h"

/* config "governor": {"enabled": true, "low_battery": 20, ...}; a key of
 * the wrong type or range is reported and its default kept. */
static void num_key(const cJSON *o, const char *key, double lo, double hi, double *v)
{
    const cJSON *j = cJSON_GetObjectItem(o, key);
    if (!j) return;
    if (cJSON_IsNumber(j) && j->valuedouble >= lo && j->valuedouble <= hi) *v = j->valuedouble;
    else fprintf(stderr, "hearth: config governor.%s must be a number from %g to %g; "
                 "using %g\n", key, lo, hi, *v);
}

static void int_key(const cJSON *o, const char *key, int lo, int hi, int *v)
{
    double d = *v;
    num_key(o, key, lo, hi, &d);
    *v = (int)d;
}

static hx_governor_params policy(const cJSON *o)
{
    hx_governor_params p = hx_governor_default_params();
    if (!cJSON_IsObject(o)) return p;
    int_key(o, "low_battery", 0, 100, &p.low_battery);
    int_key(o, "critical_battery", 0, 100, &p.critical_battery);
    num_key(o, "hot_c", 0, 150, &p.hot_c);
    num_key(o, "critical_c", 0, 150, &p.critical_c);
    int_key(o, "saving_ctx", 64, 1 << 20, &p.saving_ctx);
    int_key(o, "critical_ctx", 64, 1 << 20, &p.critical_ctx);
    int_key(o, "nightly_battery", 0, 100, &p.nightly_battery);
    num_key(o, "nightly_c", 0, 150, &p.nightly_c);
    return p;
}

void hx_cli_governor(const cJSON *cfg, hx_gov_decision *d, hx_power *pw)
{
    hx_power local;
    if (!pw) pw = &local;
    hx_power_read(NULL, NULL, pw);
    int off = cJSON_IsFalse(cJSON_GetObjectItem(cfg, "enabled"));
    hx_power seen = *pw;
    if (off) seen.n_batteries = seen.n_zones = 0; /* nothing to save */
    hx_governor_params p = policy(cfg);
    hx_governor *g = hx_governor_new(&p);
    memset(d, 0, sizeof *d);
    d->n_threads = pw->n_cpus;
    if (g) hx_governor_update(g, &seen, d);
    hx_governor_free(g);
    if (off) snprintf(d->why, sizeof d->why, "governor off (config governor.enabled)");
    if (pw->problem[0]) fprintf(stderr, "hearth: governor: %s\n", pw->problem);
}

void hx_cli_print_power(FILE *f, const hx_power *pw, const hx_gov_decision *d)
{
    fprintf(f, "power          %s\n", d->why);
    fprintf(f, "governor       %d threads, ", d->n_threads);
    if (d->ctx_cap) fprintf(f, "context at most %d", d->ctx_cap);
    else fprintf(f, "no context cap");
    fprintf(f, "; nightly job %s", d->nightly_ok ? "may run" : "waits");
    if (!d->nightly_ok) fprintf(f, " (%s)", d->nightly_why);
    else if (pw->load1 >= 0) fprintf(f, " (load %.2f on %d CPUs)", pw->load1, pw->n_cpus);
    fprintf(f, "\n");
}

/* governor.small_model_level: "saving" (the default) or "critical". */
static int small_model_level(const cJSON *o)
{
    const cJSON *j = cJSON_GetObjectItem(o, "small_model_level");
    const char *s = cJSON_GetStringValue(j);
    if (!j || (s && !strcmp(s, "saving"))) return HX_GOV_SAVING;
    if (s && !strcmp(s, "critical")) return HX_GOV_CRITICAL;
    fprintf(stderr, "hearth: config governor.small_model_level must be \"saving\" or "
                    "\"critical\"; using \"saving\"\n");
    return HX_GOV_SAVING;
}

const char *hx_cli_gov_model(const hx_config *cfg, const hx_gov_decision *d, const char *path)
{
    const char *small = cfg ? cfg->small_model : NULL;
    if (!small || !*small || (path && !strcmp(path, small))) return path;
    if (d->level < small_model_level(cJSON_GetObjectItem(cfg->raw, "governor"))) return path;
    if (access(small, R_OK)) {
        fprintf(stderr, "hearth: governor: %s, but the small model %s cannot be read (%s); "
                        "keeping %s\n", d->why, small, strerror(errno), path ? path : "none");
        return path;
    }
    fprintf(stderr, "hearth: governor: %s: using the small model %s%s%s (config "
                    "governor.small_model)\n", d->why, small, path ? " instead of " : "",
            path ? path : "");
    return small;
}

/* ---- the closed loop ---- */

static hx_loop_targets targets(const cJSON *o)
{
    hx_loop_targets t = hx_loop_default_targets();
    if (!cJSON_IsObject(o)) return t;
    num_key(o, "ttft_ms", 10, 600000, &t.ttft_ms);
    num_key(o, "decode_floor", 0, 10000, &t.decode_floor);
    int_key(o, "reread_slices", 1, 1000000, &t.reread_slices);
    t.small_level = small_model_level(o);
    return t;
}

/* $HEARTH data dir/governor-loop.json: the loop's latency state. */
static int memo_path(char *path, size_t n)
{
    char dir[4096];
    if (hx_path_data(dir, sizeof dir) < 0) return -1;
    return snprintf(path, n, "%s/governor-loop.json", dir) < (int)n ? 0 : -1;
}

/* The latency state the last session left (absent or malformed: none;
 * a malformed file is said on stderr). */
static void memo_load(hx_loop *k)
{
    char path[4200], *text = NULL;
    size_t len;
    if (memo_path(path, sizeof path) || hx_read_file(path, 4096, &text, &len, NULL)) return;
    cJSON *j = cJSON_ParseWithLength(text, len);
    const cJSON *l = cJSON_GetObjectItem(j, "latency_level"), *o = cJSON_GetObjectItem(j, "over");
    const cJSON *u = cJSON_GetObjectItem(j, "under");
    if (cJSON_IsNumber(l) && cJSON_IsNumber(o) && cJSON_IsNumber(u)) {
        hx_loop_memo m = {(int)cJSON_GetNumberValue(l), (int)cJSON_GetNumberValue(o),
                          (int)cJSON_GetNumberValue(u)};
        hx_loop_memo_set(k, &m);
    } else {
        fprintf(stderr, "hearth: governor: %s is malformed; starting afresh\n", path);
    }
    cJSON_Delete(j);
    free(text);
}

hx_loop *hx_cli_loop_new(const cJSON *cfg)
{
    if (cJSON_IsFalse(cJSON_GetObjectItem(cfg, "enabled"))) return NULL;
    hx_governor_params p = policy(cfg);
    hx_loop_targets t = targets(cfg);
    hx_loop *k = hx_loop_new(&p, &t, NULL, NULL);
    if (k) memo_load(k);
    return k;
}

void hx_cli_loop_save(hx_loop *k)
{
    char path[4200], dir[4096], text[128];
    hx_loop_memo m;
    if (!k || memo_path(path, sizeof path) || hx_path_data(dir, sizeof dir) < 0) return;
    hx_loop_memo_get(k, &m);
    int n = snprintf(text, sizeof text, "{\"latency_level\": %d, \"over\": %d, \"under\": %d}\n",
                     m.latency_level, m.over, m.under);
    hx_err err = {0};
    if (hx_mkdirs(dir, &err) || hx_write_file_atomic(path, text, (size_t)n, &err))
        fprintf(stderr, "hearth: governor: the loop's state was not saved: %s\n", err.msg);
}

/* "1 thread, context at most 1024, 8-bit KV, no drafts, the small model,
 * the request's tools only" */
static void describe(char *buf, size_t n, const hx_loop_choice *c)
{
    char cap[40] = "no context cap", drafts[24] = "no drafts";
    if (c->ctx_cap) snprintf(cap, sizeof cap, "context at most %d", c->ctx_cap);
    if (c->spec_depth) snprintf(drafts, sizeof drafts, "drafts up to %d", c->spec_depth);
    snprintf(buf, n, "%d thread%s, %s, %s KV, %s%s%s", c->n_threads, c->n_threads == 1 ? "" : "s",
             cap, c->kv_q8 ? "8-bit" : "16-bit", drafts, c->small_model ? ", the small model" : "",
             c->trim_prompt ? ", the request's tools only" : "");
}

/* A decision as {"slice", "turn", "why", "choice"}, its choice described
 * into what. */
static cJSON *event_json(const hx_loop_event *ev, char *what, size_t n)
{
    describe(what, n, &ev->choice);
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "slice", (double)ev->slice);
        cJSON_AddNumberToObject(o, "turn", ev->turn);
        cJSON_AddStringToObject(o, "why", ev->why);
        cJSON_AddStringToObject(o, "choice", what);
    }
    return o;
}

void hx_cli_loop_report(FILE *f, hx_loop *k, int *seen, cJSON *trace)
{
    if (!k) return;
    int n;
    const hx_loop_event *ev = hx_loop_events(k, &n);
    cJSON *arr = trace ? cJSON_AddArrayToObject(trace, "governor") : NULL;
    for (int i = 0; i < n; i++) {
        if (ev[i].seq <= *seen) continue;
        char what[200];
        cJSON *o = event_json(&ev[i], what, sizeof what);
        fprintf(f, "hearth: governor: after %ld slices, %d turns: %s: %s (threads at once; "
                   "context, cache and drafts from the next turn; tools and the model from "
                   "the next request)\n", ev[i].slice, ev[i].turn, ev[i].why, what);
        if (!arr || !cJSON_AddItemToArray(arr, o)) cJSON_Delete(o);
        *seen = ev[i].seq;
    }
}

cJSON *hx_cli_loop_since(hx_loop *k, int from)
{
    if (!k) return NULL;
    int n;
    const hx_loop_event *ev = hx_loop_events(k, &n);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) {
        char what[200];
        cJSON *o = ev[i].seq >= from ? event_json(&ev[i], what, sizeof what) : NULL;
        if (o && !cJSON_AddItemToArray(arr, o)) cJSON_Delete(o);
    }
    return arr;
}

void hx_cli_print_loop(FILE *f, hx_loop *k)
{
    if (!k) {
        fprintf(f, "loop           off (config governor.enabled)\n");
        return;
    }
    const hx_loop_targets *t = hx_loop_get_targets(k);
    hx_loop_choice c;
    hx_loop_get(k, &c);
    char what[200];
    describe(what, sizeof what, &c);
    fprintf(f, "loop           targets: warm TTFT <= %.0f ms, decode >= %.1f tokens/s; "
               "the device re-read every %d slices\n", t->ttft_ms, t->decode_floor,
            t->reread_slices);
    fprintf(f, "               now: %s\n", what);
}

void hx_cli_lower_priority(const cJSON *cfg)
{
    double nice = 10;
    if (cJSON_IsObject(cfg)) num_key(cfg, "nice", 0, 19, &nice);
    if (cJSON_IsFalse(cJSON_GetObjectItem(cfg, "enabled")) || nice <= 0) return;
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, 0);
    if (!errno && cur < (int)nice && setpriority(PRIO_PROCESS, 0, (int)nice))
        fprintf(stderr, "hearth: governor: could not lower the priority: %s\n", strerror(errno));
}
