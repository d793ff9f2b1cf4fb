/* cli_power.c: the governor for the command line: its policy from
 * config.json's "governor" object, one reading of the device (battery,
 * heat, load), and the lines `hearth info` prints about it. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "agent/cli.h"
#include "engine/engine.h"

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

void cli_governor(const cJSON *cfg, hx_gov_decision *d, hx_power *pw)
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

void cli_print_power(FILE *f, const hx_power *pw, const hx_gov_decision *d)
{
    fprintf(f, "power          %s\n", d->why);
    fprintf(f, "governor       %d threads, ", d->n_threads);
    if (d->ctx_cap) fprintf(f, "context at most %d", d->ctx_cap);
    else fprintf(f, "no context cap");
    fprintf(f, "; nightly job %s", d->nightly_ok ? "may run" : "waits");
    if (pw->load1 >= 0) fprintf(f, " (load %.2f on %d CPUs)", pw->load1, pw->n_cpus);
    fprintf(f, "\n");
}
