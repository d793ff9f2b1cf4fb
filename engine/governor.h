/* governor.h: the device's power and heat (battery and thermal zones from
 * sysfs, load from procfs) and the policy that turns them into a thread
 * count, a context cap and the nightly job's go-ahead. Part of engine.h. */
#ifndef HX_GOVERNOR_H
#define HX_GOVERNOR_H

#include <stddef.h>

/* ---- reading the device ---- */
enum { HX_POWER_UNKNOWN = -1 };

typedef struct hx_power {
    int n_batteries;  /* system batteries found (peripherals' are skipped);
                         0 on a desktop: nothing to save */
    int capacity;     /* percent, the lowest battery's; HX_POWER_UNKNOWN */
    int charging;     /* 1 on external power (a battery charging, full or
                         held, or a mains/USB supply online), 0 on battery,
                         HX_POWER_UNKNOWN */
    int n_zones;      /* thermal zones that gave a temperature */
    double temp_c;    /* the hottest of them, degrees C; 0 without zones */
    double load1;     /* 1-minute load average; < 0 if unknown */
    int n_cpus;       /* online CPUs */
    char problem[160]; /* the first malformed or unreadable value, named
                          by its file ("" if none): it is ignored */
} hx_power;

/* Reads the state under sysfs root (NULL: $HEARTH_SYSFS, else "/sys"):
 * class/power_supply/NAME/{type,scope,capacity,status,online} and
 * class/thermal/thermal_zoneN/temp (millidegrees); the load from procfs
 * root (NULL: $HEARTH_PROCFS, else "/proc") loadavg. Missing files mean
 * absent parts; a malformed value is skipped and named in problem. Never
 * fails. */
void hx_power_read(const char *sysfs, const char *procfs, hx_power *out);

/* The parsers behind it (exposed for tests and the fuzzer). A decimal
 * integer in [lo, hi] with optional sign and surrounding whitespace, as
 * sysfs writes it: 0 and *out, or -1 if malformed or out of range. */
int hx_sysfs_parse_long(const char *text, size_t n, long lo, long hi, long *out);
/* A power_supply status ("Charging", "Discharging", "Full", "Not
 * charging", "Unknown"): 1 on external power, 0 on battery,
 * HX_POWER_UNKNOWN otherwise. */
int hx_sysfs_parse_status(const char *text, size_t n);
/* /proc/loadavg's first field: 0 and *out, or -1. */
int hx_procfs_parse_load(const char *text, size_t n, double *out);

/* ---- the policy ---- */
enum { HX_GOV_NORMAL = 0, HX_GOV_SAVING = 1, HX_GOV_CRITICAL = 2 };

typedef struct hx_governor_params {
    int max_threads;      /* threads when unconstrained; 0: online CPUs */
    int low_battery;      /* percent, on battery: saving; default 20 */
    int critical_battery; /* critical; default 10 */
    int battery_hyst;     /* a level is left at its threshold + this
                             (or on external power); default 5 */
    double hot_c;         /* saving from this temperature; default 70 */
    double critical_c;    /* critical; default 85 */
    double thermal_hyst;  /* a level is left below its threshold - this;
                             default 5 */
    int saving_ctx;       /* context cap when saving; default 2048 */
    int critical_ctx;     /* when critical; default 1024 */
    /* the nightly job (training) runs only idle, charging and cool: */
    int nightly_battery;  /* percent at least; default 30 */
    double nightly_c;     /* below this temperature; default 45 */
    double idle_load;     /* load average per CPU below this; default 0.3 */
} hx_governor_params;
hx_governor_params hx_governor_default_params(void);

/* What the governor decided from one reading. */
typedef struct hx_gov_decision {
    int level;        /* HX_GOV_*: the worse of the two below */
    int battery_level, thermal_level;
    int n_threads;    /* threads to use */
    int ctx_cap;      /* most context positions; 0: no cap */
    int nightly_ok;   /* 1: idle, charging and cool */
    char why[160];    /* the reason, for `hearth info` and logs */
    char nightly_why[128]; /* why the nightly job waits ("" when it may run) */
} hx_gov_decision;

/* A governor remembers its levels between readings (hysteresis). */
typedef struct hx_governor hx_governor;
hx_governor *hx_governor_new(const hx_governor_params *p); /* NULL: OOM */
void hx_governor_free(hx_governor *g); /* NULL is a no-op */
/* Updates the levels from pw and fills *d. */
void hx_governor_update(hx_governor *g, const hx_power *pw, hx_gov_decision *d);
/* n_ctx (0: the default) capped by the decision; threads likewise
 * (requested 0: the decision's). */
int hx_gov_cap_ctx(const hx_gov_decision *d, int n_ctx, int n_ctx_default);
int hx_gov_threads(const hx_gov_decision *d, int requested);

#endif /* HX_GOVERNOR_H */
