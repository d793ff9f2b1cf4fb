/* fuzz_governor.c: fuzz target for the governor's sysfs/procfs value
 * parsers (engine/governor.c): any bytes give a value in range or -1; the
 * policy on any reading; the closed loop (engine/control.c) on any turns
 * and carried state: its choice stays in range. */
#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    long v = 12345;
    if (hx_sysfs_parse_long(s, size, 0, 100, &v) == 0) HX_CHECK(v >= 0 && v <= 100);
    else HX_CHECK(v == 12345);
    if (hx_sysfs_parse_long(s, size, -50000, 200000, &v) == 0)
        HX_CHECK(v >= -50000 && v <= 200000);
    int st = hx_sysfs_parse_status(s, size);
    HX_CHECK(st == 0 || st == 1 || st == HX_POWER_UNKNOWN);
    double l = -7;
    if (hx_procfs_parse_load(s, size, &l) == 0) HX_CHECK(l >= 0);
    else HX_CHECK(l == -7);
    /* the policy on any reading */
    hx_power pw;
    memset(&pw, 0, sizeof pw);
    pw.n_batteries = size > 0 ? data[0] % 3 : 0;
    pw.capacity = size > 1 ? data[1] % 102 - 1 : -1;
    pw.charging = size > 2 ? data[2] % 3 - 1 : -1;
    pw.n_zones = size > 3 ? data[3] % 2 : 0;
    pw.temp_c = size > 4 ? data[4] - 40.0 : 0;
    pw.load1 = size > 5 ? data[5] / 16.0 - 1 : -1;
    pw.n_cpus = size > 6 ? data[6] % 8 + 1 : 1;
    hx_governor *g = hx_governor_new(NULL);
    if (!g) return 0;
    hx_gov_decision d;
    hx_governor_update(g, &pw, &d);
    HX_CHECK(d.level >= 0 && d.level <= 2 && d.n_threads >= 1);
    HX_CHECK(d.why[0] != 0);
    hx_governor_free(g);
    hx_loop *k = hx_loop_new(NULL, NULL, "/nonexistent", "/nonexistent");
    if (!k) return 0;
    hx_loop_memo m = {size > 0 ? (int8_t)data[0] : 0, size > 1 ? (int8_t)data[1] : 0,
                      size > 2 ? (int8_t)data[2] : 0};
    hx_loop_memo_set(k, &m);
    for (size_t i = 0; i + 2 < size; i += 3) {
        hx_turn_stats t = {data[i] * 8.0, data[i + 1] & 1, data[i + 1] / 2.0, data[i + 2] / 4.0};
        hx_loop_turn(k, &t);
        if (data[i] & 1) hx_loop_slice(k);
        hx_loop_choice c;
        hx_loop_get(k, &c);
        HX_CHECK(c.level >= 0 && c.level <= 2 && c.latency_level >= 0 && c.latency_level <= 2);
        HX_CHECK(c.n_threads >= 1 && c.spec_depth >= 0);
    }
    int n;
    const hx_loop_event *ev = hx_loop_events(k, &n);
    HX_CHECK(n >= 1 && n <= HX_LOOP_EVENTS && ev[n - 1].seq >= n);
    hx_loop_free(k);
    return 0;
}
