/* governor.h: the device's power and heat (battery and thermal zones from
 * sysfs, load from procfs), the policy that turns them into a thread
 * count, a context cap and the nightly job's go-ahead, and the closed loop
 * that keeps deciding during a session (control.c). Part of engine.h. */
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

/* ---- the closed loop (control.c) ----
 * Each turn's measurements and the device, re-read every reread_slices
 * slices of long work, choose what the next slice or turn runs with:
 * threads (at once, hx_ctx_set_threads), and for the next turn the
 * context cap, the KV type, the speculation depth, the small model and a
 * trimmed prompt (the tool list cut to what the request needs). Every
 * change is recorded with its reason. */
typedef struct hx_loop_targets {
    double ttft_ms;      /* warm-turn time to first token at most; 500 */
    double decode_floor; /* decode tokens/s at least; 5 */
    int reread_slices;   /* re-read the device every this many slices; 50 */
    int small_level;     /* HX_GOV_* from which the small model runs;
                            HX_GOV_SAVING */
    int turns_hyst;      /* misses in a row before the latency level goes
                            up, comfortable turns (under half the target)
                            before it comes down; 2 */
} hx_loop_targets;
hx_loop_targets hx_loop_default_targets(void);

/* What the loop chose. */
typedef struct hx_loop_choice {
    int level;           /* the governor's HX_GOV_* */
    int latency_level;   /* 0 none, 1 prompt trimmed, 2 small model too */
    int n_threads;
    int ctx_cap;         /* 0: no cap */
    int kv_q8;           /* 1: 8-bit KV cache */
    int spec_depth;      /* draft tokens per pass; 0: none */
    int small_model;     /* 1: the small model */
    int trim_prompt;     /* 1: only the tools the request needs */
} hx_loop_choice;

/* One turn's measurements. */
typedef struct hx_turn_stats {
    double ttft_ms;
    int warm;            /* the prompt's head came from the KV cache */
    double prefill_tps, decode_tps;
} hx_turn_stats;

/* A recorded decision. */
typedef struct hx_loop_event {
    int seq;             /* 1 for the opening decision, then 2, 3... */
    long slice;          /* slices counted when it was made */
    int turn;            /* turns counted */
    int capacity;        /* the reading: battery percent (HX_POWER_UNKNOWN) */
    double temp_c;
    hx_loop_choice choice;
    char why[200];
} hx_loop_event;

typedef struct hx_loop hx_loop;
/* A loop reading the device under sysfs and procfs (NULL: as
 * hx_power_read) with the governor's policy gp and targets t (NULL:
 * defaults); it reads once now. Strings are copied. NULL: out of memory. */
hx_loop *hx_loop_new(const hx_governor_params *gp, const hx_loop_targets *t,
                     const char *sysfs, const char *procfs);
void hx_loop_free(hx_loop *k); /* NULL is a no-op */
/* The current choice; the targets. */
void hx_loop_get(const hx_loop *k, hx_loop_choice *out);
const hx_loop_targets *hx_loop_get_targets(const hx_loop *k);
/* Counts a slice; every reread_slices-th re-reads the device. 1 when the
 * choice changed (recorded), else 0. */
int hx_loop_slice(hx_loop *k);
/* Re-reads the device now (before a request: a session's next request
 * runs with its state then). 1 when the choice changed (recorded). */
int hx_loop_poll(hx_loop *k);
/* A turn ended with stats t: the latency level moves with hysteresis;
 * the device is re-read. 1 when the choice changed. */
int hx_loop_turn(hx_loop *k, const hx_turn_stats *t);
/* The latency part of the loop's state, to carry it from one session to
 * the next (a request per process still sees its earlier turns). */
typedef struct hx_loop_memo {
    int latency_level;   /* 0..2 */
    int over, under;     /* turns in a row over / well inside the targets */
} hx_loop_memo;
void hx_loop_memo_get(const hx_loop *k, hx_loop_memo *out);
/* Sets it (values out of range are clamped) and decides again; a change
 * is recorded as carried over. */
void hx_loop_memo_set(hx_loop *k, const hx_loop_memo *m);
/* The recorded decisions, oldest first (the first is the opening one);
 * at most HX_LOOP_EVENTS kept (the oldest dropped). */
#define HX_LOOP_EVENTS 64
const hx_loop_event *hx_loop_events(hx_loop *k, int *n);

#endif /* HX_GOVERNOR_H */
