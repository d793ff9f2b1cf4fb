/* test_governor.c: the governor on fake sysfs/procfs trees: desktop (no
 * battery), battery and thermal levels, external power, peripherals'
 * batteries, hysteresis, the nightly go-ahead, malformed and missing
 * files, and the value parsers on broken input; the closed loop
 * (control.c) following a battery and a temperature that change during
 * sliced inference, and its latency hysteresis. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/model_write.h"
#include "test.h"

static char root[256], sys_dir[300], proc_dir[300];

/* Writes root/rel (directories made as needed). */
static void put(const char *rel, const char *text)
{
    char path[600], dir[600];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    hx_err err = {0};
    if (hx_mkdirs(dir, &err) || hx_write_file_atomic(path, text, strlen(text), &err))
        printf("     cannot write %s: %s\n", path, err.msg);
}

static void fresh_tree(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (root[0] && system(cmd)) printf("     rm failed\n");
    snprintf(root, sizeof root, "/tmp/hearth_test_governor_%d", (int)getpid());
    snprintf(sys_dir, sizeof sys_dir, "%s/sys", root);
    snprintf(proc_dir, sizeof proc_dir, "%s/proc", root);
    mkdir(root, 0700);
    mkdir(sys_dir, 0700);
    mkdir(proc_dir, 0700);
    put("proc/loadavg", "0.10 0.20 0.30 1/100 1234\n");
}

static void battery(const char *cap, const char *status)
{
    put("sys/class/power_supply/BAT0/type", "Battery\n");
    put("sys/class/power_supply/BAT0/capacity", cap);
    put("sys/class/power_supply/BAT0/status", status);
}

static void zone(int i, const char *temp)
{
    char rel[128];
    snprintf(rel, sizeof rel, "sys/class/thermal/thermal_zone%d/temp", i);
    put(rel, temp);
}

static hx_governor_params params(void)
{
    hx_governor_params p = hx_governor_default_params();
    p.max_threads = 4;
    return p;
}

/* Reads the tree and updates g. */
static hx_gov_decision step(hx_governor *g, hx_power *pw)
{
    hx_gov_decision d;
    hx_power_read(sys_dir, proc_dir, pw);
    hx_governor_update(g, pw, &d);
    return d;
}

static void test_desktop_unconstrained(void)
{
    fresh_tree();
    hx_governor_params p = params();
    hx_governor *g = hx_governor_new(&p);
    hx_power pw;
    hx_gov_decision d = step(g, &pw);
    EXPECT_EQ_INT(pw.n_batteries, 0);
    EXPECT_EQ_INT(pw.n_zones, 0);
    EXPECT_EQ_INT(d.level, HX_GOV_NORMAL);
    EXPECT_EQ_INT(d.n_threads, 4);
    EXPECT_EQ_INT(d.ctx_cap, 0);
    EXPECT_EQ_INT(d.nightly_ok, 1);
    EXPECT_STR_EQ(pw.problem, "");
    /* a mains supply alone, and a mouse's nearly empty battery */
    put("sys/class/power_supply/AC/type", "Mains\n");
    put("sys/class/power_supply/AC/online", "1\n");
    put("sys/class/power_supply/hidpp_battery_0/type", "Battery\n");
    put("sys/class/power_supply/hidpp_battery_0/scope", "Device\n");
    put("sys/class/power_supply/hidpp_battery_0/capacity", "3\n");
    put("sys/class/power_supply/hidpp_battery_0/status", "Discharging\n");
    d = step(g, &pw);
    EXPECT_EQ_INT(pw.n_batteries, 0);
    EXPECT_EQ_INT(pw.charging, 1);
    EXPECT_EQ_INT(d.level, HX_GOV_NORMAL);
    /* no tree at all */
    hx_power_read("/nonexistent/hearth-sysfs", "/nonexistent/hearth-procfs", &pw);
    hx_governor_update(g, &pw, &d);
    EXPECT_EQ_INT(pw.n_batteries, 0);
    EXPECT(pw.load1 < 0);
    EXPECT_EQ_INT(d.level, HX_GOV_NORMAL);
    EXPECT_EQ_INT(d.nightly_ok, 1);
    hx_governor_free(g);
}

static void test_battery_levels(void)
{
    static const struct {
        const char *cap, *status;
        int level, threads, ctx;
    } cases[] = {
        {"80\n", "Discharging\n", HX_GOV_NORMAL, 4, 0},
        {"15\n", "Discharging\n", HX_GOV_SAVING, 2, 2048},
        {"5\n", "Discharging\n", HX_GOV_CRITICAL, 1, 1024},
        {"5\n", "Charging\n", HX_GOV_NORMAL, 4, 0},
        {"15\n", "Full\n", HX_GOV_NORMAL, 4, 0},
        {"15\n", "Not charging\n", HX_GOV_NORMAL, 4, 0},
        {"20\n", "Discharging\n", HX_GOV_SAVING, 2, 2048},
        {"10", "Discharging", HX_GOV_CRITICAL, 1, 1024}, /* no newline */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fresh_tree();
        battery(cases[i].cap, cases[i].status);
        hx_governor_params p = params();
        hx_governor *g = hx_governor_new(&p);
        hx_power pw;
        hx_gov_decision d = step(g, &pw);
        EXPECT_EQ_INT(pw.n_batteries, 1);
        EXPECT_EQ_INT(d.level, cases[i].level);
        EXPECT_EQ_INT(d.n_threads, cases[i].threads);
        EXPECT_EQ_INT(d.ctx_cap, cases[i].ctx);
        EXPECT_STR_EQ(pw.problem, "");
        hx_governor_free(g);
    }
    /* on battery with a mains supply online: external power wins */
    fresh_tree();
    battery("12\n", "Unknown\n");
    put("sys/class/power_supply/ADP1/type", "Mains\n");
    put("sys/class/power_supply/ADP1/online", "1\n");
    hx_governor *g = hx_governor_new(NULL);
    hx_power pw;
    hx_gov_decision d = step(g, &pw);
    EXPECT_EQ_INT(pw.charging, 1);
    EXPECT_EQ_INT(d.level, HX_GOV_NORMAL);
    EXPECT(strstr(d.why, "battery 12% charging") != NULL);
    hx_governor_free(g);
}

static void test_thermal_levels(void)
{
    fresh_tree();
    zone(0, "45000\n");
    zone(1, "72000\n");
    put("sys/class/thermal/cooling_device0/cur_state", "1\n"); /* not a zone */
    hx_governor_params p = params();
    hx_governor *g = hx_governor_new(&p);
    hx_power pw;
    hx_gov_decision d = step(g, &pw);
    EXPECT_EQ_INT(pw.n_zones, 2);
    EXPECT(fabs(pw.temp_c - 72.0) < 1e-9);
    EXPECT_EQ_INT(d.thermal_level, HX_GOV_SAVING);
    EXPECT_EQ_INT(d.n_threads, 2);
    EXPECT_EQ_INT(d.nightly_ok, 0);
    zone(1, "90000\n");
    d = step(g, &pw);
    EXPECT_EQ_INT(d.level, HX_GOV_CRITICAL);
    EXPECT_EQ_INT(d.n_threads, 1);
    EXPECT_EQ_INT(d.ctx_cap, 1024);
    EXPECT(strstr(d.why, "critical") && strstr(d.why, "90.0 C"));
    /* battery saving and thermal critical: the worse wins */
    battery("15\n", "Discharging\n");
    d = step(g, &pw);
    EXPECT_EQ_INT(d.battery_level, HX_GOV_SAVING);
    EXPECT_EQ_INT(d.level, HX_GOV_CRITICAL);
    hx_governor_free(g);
}

static void test_hysteresis(void)
{
    fresh_tree();
    hx_governor_params p = params();
    hx_governor *g = hx_governor_new(&p);
    hx_power pw;
    /* battery: enters saving at <= 20, leaves at >= 25 */
    static const struct { const char *cap; int level; } bat[] = {
        {"21", 0}, {"20", 1}, {"22", 1}, {"24", 1}, {"25", 0}, {"21", 0},
        {"9", 2}, {"12", 2}, {"15", 1}, {"19", 1}, {"30", 0},
    };
    for (size_t i = 0; i < sizeof bat / sizeof *bat; i++) {
        battery(bat[i].cap, "Discharging");
        hx_gov_decision d = step(g, &pw);
        if (d.battery_level != bat[i].level)
            printf("     battery step %zu (%s%%): level %d, want %d\n", i, bat[i].cap,
                   d.battery_level, bat[i].level);
        EXPECT_EQ_INT(d.battery_level, bat[i].level);
    }
    /* plugging in resets at once */
    battery("9", "Discharging");
    EXPECT_EQ_INT(step(g, &pw).battery_level, 2);
    battery("9", "Charging");
    EXPECT_EQ_INT(step(g, &pw).battery_level, 0);
    /* heat: saving from 70 C until below 65 C */
    static const struct { const char *t; int level; } heat[] = {
        {"69999", 0}, {"70000", 1}, {"67000", 1}, {"65000", 1}, {"64999", 0},
        {"86000", 2}, {"81000", 2}, {"79999", 1}, {"60000", 0},
    };
    for (size_t i = 0; i < sizeof heat / sizeof *heat; i++) {
        zone(0, heat[i].t);
        hx_gov_decision d = step(g, &pw);
        EXPECT_EQ_INT(d.thermal_level, heat[i].level);
    }
    hx_governor_free(g);
}

static void test_nightly(void)
{
    static const struct {
        const char *cap, *status, *temp, *load;
        int ok;
    } cases[] = {
        {"80", "Charging", "35000", "0.10 0.1 0.1 1/1 1", 1},
        {"80", "Full", "35000", "0.10 0.1 0.1 1/1 1", 1},
        {"80", "Discharging", "35000", "0.10 0.1 0.1 1/1 1", 0},
        {"20", "Charging", "35000", "0.10 0.1 0.1 1/1 1", 0},  /* battery low */
        {"80", "Charging", "50000", "0.10 0.1 0.1 1/1 1", 0},  /* warm */
        {"80", "Charging", "35000", "64.00 9 9 1/1 1", 0},     /* busy */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fresh_tree();
        battery(cases[i].cap, cases[i].status);
        zone(0, cases[i].temp);
        put("proc/loadavg", cases[i].load);
        hx_governor *g = hx_governor_new(NULL);
        hx_power pw;
        hx_gov_decision d = step(g, &pw);
        if (d.nightly_ok != cases[i].ok) printf("     nightly case %zu: %s\n", i, d.why);
        EXPECT_EQ_INT(d.nightly_ok, cases[i].ok);
        hx_governor_free(g);
    }
}

static void test_malformed_files(void)
{
    static const char *const caps[] = {"abc\n", "150\n", "", "-3\n", "4 2\n",
                                       "99999999999999999999999\n", "\x01\xff"};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        fresh_tree();
        battery(caps[i], "Discharging\n");
        zone(0, "hot\n");
        hx_governor *g = hx_governor_new(NULL);
        hx_power pw;
        hx_gov_decision d = step(g, &pw);
        EXPECT_EQ_INT(pw.n_batteries, 1);
        EXPECT_EQ_INT(pw.capacity, HX_POWER_UNKNOWN);
        EXPECT_EQ_INT(pw.n_zones, 0);
        EXPECT(strstr(pw.problem, "BAT0/capacity") != NULL);
        EXPECT_EQ_INT(d.level, HX_GOV_NORMAL); /* unknown is not low */
        hx_governor_free(g);
    }
    fresh_tree();
    battery("50\n", "Exploding\n");
    zone(3, "1000000000\n");
    put("proc/loadavg", "lots\n");
    hx_power pw;
    hx_power_read(sys_dir, proc_dir, &pw);
    EXPECT_EQ_INT(pw.capacity, 50);
    EXPECT_EQ_INT(pw.charging, HX_POWER_UNKNOWN);
    EXPECT(strstr(pw.problem, "BAT0/status: unknown status") != NULL);
    EXPECT_EQ_INT(pw.n_zones, 0);
    EXPECT(pw.load1 < 0);
    /* a capacity that is a directory, a type file that is empty */
    fresh_tree();
    put("sys/class/power_supply/BAT1/type", "Battery\n");
    put("sys/class/power_supply/BAT1/capacity/x", "1\n");
    put("sys/class/power_supply/weird/type", "");
    hx_power_read(sys_dir, proc_dir, &pw);
    EXPECT_EQ_INT(pw.n_batteries, 1);
    EXPECT_EQ_INT(pw.capacity, HX_POWER_UNKNOWN);
}

static void test_env_override(void)
{
    fresh_tree();
    battery("7\n", "Discharging\n");
    setenv("HEARTH_SYSFS", sys_dir, 1);
    setenv("HEARTH_PROCFS", proc_dir, 1);
    hx_power pw;
    hx_power_read(NULL, NULL, &pw);
    EXPECT_EQ_INT(pw.capacity, 7);
    EXPECT(fabs(pw.load1 - 0.10) < 1e-9);
    unsetenv("HEARTH_SYSFS");
    unsetenv("HEARTH_PROCFS");
}

static void test_parsers(void)
{
    long v = 0;
    EXPECT(hx_sysfs_parse_long("42\n", 3, 0, 100, &v) == 0 && v == 42);
    EXPECT(hx_sysfs_parse_long(" -5 ", 4, -10, 10, &v) == 0 && v == -5);
    EXPECT(hx_sysfs_parse_long("+3", 2, 0, 10, &v) == 0 && v == 3);
    static const char *const bad[] = {"", "-", "+", "4 2", "1e3", "0x10", "12a",
                                      "9999999999999999999", " ", "--1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        EXPECT(hx_sysfs_parse_long(bad[i], strlen(bad[i]), -1000000, 1000000, &v) == -1);
    EXPECT(hx_sysfs_parse_long("101", 3, 0, 100, &v) == -1);
    EXPECT(hx_sysfs_parse_long(NULL, 0, 0, 1, &v) == -1);
    EXPECT_EQ_INT(hx_sysfs_parse_status("Charging\n", 9), 1);
    EXPECT_EQ_INT(hx_sysfs_parse_status("Discharging", 11), 0);
    EXPECT_EQ_INT(hx_sysfs_parse_status("Charging!", 9), HX_POWER_UNKNOWN);
    EXPECT_EQ_INT(hx_sysfs_parse_status("Char", 4), HX_POWER_UNKNOWN);
    double l = 0;
    EXPECT(hx_procfs_parse_load("1.50 2 3 4/5 6\n", 15, &l) == 0 && fabs(l - 1.5) < 1e-12);
    EXPECT(hx_procfs_parse_load("x 1 2", 5, &l) == -1);
    EXPECT(hx_procfs_parse_load("1.2.3 1", 7, &l) == -1);
    EXPECT(hx_procfs_parse_load("", 0, &l) == -1);
}

static void test_caps(void)
{
    hx_gov_decision d = {0};
    d.n_threads = 2;
    d.ctx_cap = 2048;
    EXPECT_EQ_INT(hx_gov_cap_ctx(&d, 8192, 4096), 2048);
    EXPECT_EQ_INT(hx_gov_cap_ctx(&d, 1024, 4096), 1024);
    EXPECT_EQ_INT(hx_gov_cap_ctx(&d, 0, 4096), 2048);
    EXPECT_EQ_INT(hx_gov_cap_ctx(&d, 0, 0), 2048);
    EXPECT_EQ_INT(hx_gov_threads(&d, 0), 2);
    EXPECT_EQ_INT(hx_gov_threads(&d, 8), 2);
    EXPECT_EQ_INT(hx_gov_threads(&d, 1), 1);
    d.ctx_cap = 0;
    EXPECT_EQ_INT(hx_gov_cap_ctx(&d, 0, 4096), 4096);
    EXPECT_EQ_INT(hx_gov_cap_ctx(&d, 0, 0), 0);
}

/* ---- the closed loop ---- */

/* Sliced inference whose slicer counts slices into the loop, applies its
 * thread choice at once, and at slice `flip` turns the device's battery
 * to 5% discharging and its heat to 95 C; at `back` to charging and 40 C. */
typedef struct drive {
    hx_loop *k;
    hx_ctx *c;
    long n, flip, back;
    int threads; /* the count hx_ctx_set_threads last set */
} drive;

static int on_slice(void *user)
{
    drive *d = user;
    d->n++;
    if (d->n == d->flip) {
        battery("5\n", "Discharging\n");
        zone(0, "95000\n");
    }
    if (d->n == d->back) {
        battery("80\n", "Charging\n");
        zone(0, "40000\n");
    }
    if (hx_loop_slice(d->k)) {
        hx_loop_choice ch;
        hx_loop_get(d->k, &ch);
        d->threads = hx_ctx_set_threads(d->c, ch.n_threads);
    }
    return 0;
}

static hx_model *small_model(void)
{
    hx_mkmodel_params p = hx_mkmodel_default_params();
    p.arch = "qwen3";
    p.ftype = "Q8_0";
    p.n_vocab = 512;
    p.n_layer = 4;
    p.n_embd = 128;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 32;
    p.n_ff = 256;
    p.n_ctx = 512;
    char path[400];
    snprintf(path, sizeof path, "%s/loop.gguf", root);
    hx_err err = {0};
    hx_model *m = NULL;
    if (hx_mkmodel_write(&p, path, &err) || hx_model_load(path, NULL, &m, &err))
        printf("     model: %s\n", err.msg);
    return m;
}

/* The decisions follow the device within reread_slices slices of each
 * change, in the recorded trace: critical (one thread, a context cap, 8-bit
 * cache, no drafts, the small model, the prompt trimmed), then normal
 * again; the thread choice reached the context at once. */
static void test_loop_follows_device(void)
{
    fresh_tree();
    battery("90\n", "Discharging\n");
    zone(0, "40000\n");
    hx_model *m = small_model();
    ASSERT(m);
    hx_loop_targets t = hx_loop_default_targets();
    t.reread_slices = 8;
    hx_governor_params gp = params();
    gp.max_threads = 2;
    drive d = {hx_loop_new(&gp, &t, sys_dir, proc_dir), NULL, 0, 40, 200, 0};
    ASSERT(d.k);
    hx_ctx_params cp = hx_ctx_default_params();
    cp.n_threads = 2;
    cp.n_ctx = 512;
    ASSERT(hx_ctx_new(m, &cp, &d.c, NULL) == HX_OK);
    hx_ctx_set_slicer(d.c, 0.0001, on_slice, &d);
    int32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = i * 7 % 512;
    for (int r = 0; r < 6 && d.n < 400; r++) {
        hx_ctx_truncate(d.c, 0);
        ASSERT(hx_decode(d.c, tok, 64, 0) == HX_OK);
    }
    EXPECT(d.n >= 400);
    int n;
    const hx_loop_event *ev = hx_loop_events(d.k, &n);
    ASSERT(n == 3);
    EXPECT_EQ_INT(ev[0].choice.level, HX_GOV_NORMAL);
    EXPECT_EQ_INT(ev[0].choice.n_threads, 2);
    EXPECT_EQ_INT(ev[0].choice.small_model, 0);
    /* critical within one re-read of slice 40 */
    EXPECT(ev[1].slice >= 40 && ev[1].slice < 40 + t.reread_slices);
    EXPECT_EQ_INT(ev[1].choice.level, HX_GOV_CRITICAL);
    EXPECT_EQ_INT(ev[1].choice.n_threads, 1);
    EXPECT_EQ_INT(ev[1].choice.ctx_cap, gp.critical_ctx);
    EXPECT_EQ_INT(ev[1].choice.kv_q8, 1);
    EXPECT_EQ_INT(ev[1].choice.spec_depth, 0);
    EXPECT_EQ_INT(ev[1].choice.small_model, 1);
    EXPECT_EQ_INT(ev[1].choice.trim_prompt, 1);
    EXPECT_EQ_INT(ev[1].capacity, 5);
    EXPECT(strstr(ev[1].why, "critical (battery 5% discharging, 95.0 C)"));
    /* back to normal on external power and cool */
    EXPECT(ev[2].slice >= 200 && ev[2].slice < 200 + t.reread_slices);
    EXPECT_EQ_INT(ev[2].choice.level, HX_GOV_NORMAL);
    EXPECT_EQ_INT(ev[2].choice.n_threads, 2);
    EXPECT_EQ_INT(d.threads, 2);
    /* between requests: a poll reads the device at once; the control: a
     * poll with nothing changed decides nothing */
    battery("5\n", "Discharging\n");
    EXPECT_EQ_INT(hx_loop_poll(d.k), 1);
    hx_loop_choice ch;
    hx_loop_get(d.k, &ch);
    EXPECT_EQ_INT(ch.level, HX_GOV_CRITICAL);
    EXPECT_EQ_INT(hx_loop_poll(d.k), 0);
    hx_loop_events(d.k, &n);
    EXPECT_EQ_INT(n, 4);
    hx_ctx_free(d.c);
    hx_model_free(m);
    hx_loop_free(d.k);
}

/* Warm turns over the TTFT target twice in a row trim the prompt, twice
 * more add the small model; one slow turn alone changes nothing; turns
 * well inside the target undo it one level per two turns. Cold turns
 * (the prompt's head not cached) do not count against the target. */
static void test_loop_latency(void)
{
    fresh_tree();
    put("sys/class/power_supply/AC/type", "Mains\n");
    put("sys/class/power_supply/AC/online", "1\n");
    hx_loop *k = hx_loop_new(NULL, NULL, sys_dir, proc_dir);
    ASSERT(k);
    hx_loop_choice c;
    const hx_turn_stats slow = {900, 1, 200, 20}, cold = {2000, 0, 200, 20};
    const hx_turn_stats fast = {100, 1, 800, 30};
    EXPECT_EQ_INT(hx_loop_turn(k, &slow), 0);
    EXPECT_EQ_INT(hx_loop_turn(k, &fast), 0); /* the miss was not in a row */
    EXPECT_EQ_INT(hx_loop_turn(k, &slow), 0);
    EXPECT_EQ_INT(hx_loop_turn(k, &cold), 0);
    EXPECT_EQ_INT(hx_loop_turn(k, &slow), 0); /* the cold turn broke the row */
    EXPECT_EQ_INT(hx_loop_turn(k, &slow), 1);
    hx_loop_get(k, &c);
    EXPECT_EQ_INT(c.latency_level, 1);
    EXPECT_EQ_INT(c.trim_prompt, 1);
    EXPECT_EQ_INT(c.small_model, 0);
    hx_loop_turn(k, &slow);
    EXPECT_EQ_INT(hx_loop_turn(k, &slow), 1);
    hx_loop_get(k, &c);
    EXPECT_EQ_INT(c.small_model, 1);
    EXPECT_EQ_INT(hx_loop_turn(k, &slow), 0); /* no level beyond */
    /* recovery, one level per two comfortable turns */
    hx_loop_turn(k, &fast);
    EXPECT_EQ_INT(hx_loop_turn(k, &fast), 1);
    hx_loop_get(k, &c);
    EXPECT_EQ_INT(c.latency_level, 1);
    hx_loop_turn(k, &fast);
    hx_loop_turn(k, &fast);
    hx_loop_get(k, &c);
    EXPECT_EQ_INT(c.latency_level, 0);
    EXPECT_EQ_INT(c.trim_prompt, 0);
    int n;
    const hx_loop_event *ev = hx_loop_events(k, &n);
    EXPECT_EQ_INT(n, 5);
    EXPECT(strstr(ev[1].why, "latency over target"));
    EXPECT(strstr(ev[4].why, "well inside target"));
    /* carried to a new loop: the level (clamped) and its counts */
    hx_loop_memo m = {9, 1, -4};
    hx_loop *k2 = hx_loop_new(NULL, NULL, sys_dir, proc_dir);
    ASSERT(k2);
    hx_loop_memo_set(k2, &m);
    hx_loop_memo_get(k2, &m);
    EXPECT_EQ_INT(m.latency_level, 2);
    EXPECT_EQ_INT(m.over, 1);
    EXPECT_EQ_INT(m.under, 0);
    hx_loop_get(k2, &c);
    EXPECT_EQ_INT(c.small_model, 1);
    ev = hx_loop_events(k2, &n);
    EXPECT_EQ_INT(n, 2);
    EXPECT(strstr(ev[1].why, "carried over"));
    hx_loop_free(k2);
    hx_loop_free(k);
}

int main(void)
{
    RUN(test_desktop_unconstrained);
    RUN(test_battery_levels);
    RUN(test_thermal_levels);
    RUN(test_hysteresis);
    RUN(test_nightly);
    RUN(test_malformed_files);
    RUN(test_env_override);
    RUN(test_parsers);
    RUN(test_caps);
    RUN(test_loop_follows_device);
    RUN(test_loop_latency);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (root[0] && system(cmd)) printf("cleanup failed\n");
    return test_summary();
}
