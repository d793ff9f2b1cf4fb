/* bench.h: what the benchmarks share to report a run on a busy machine:
 * this process's CPU seconds and the 1-minute load average. */
#ifndef HX_BENCH_H
#define HX_BENCH_H

#include <stdio.h>
#include <time.h>

/* CPU seconds (user + system, all threads) of this process so far: on a
 * loaded machine wall time mostly measures the wait for a core, this the
 * work. */
__attribute__((unused)) static double bench_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The 1-minute load average, or -1 where /proc/loadavg cannot be read. */
__attribute__((unused)) static double bench_load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1;
        fclose(f);
    }
    return l;
}

#endif /* HX_BENCH_H */
