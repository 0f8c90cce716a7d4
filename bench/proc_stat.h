/* Shared by the benchmark's C clients (httpload, pipefloor): the machine's busy CPU time. */
#ifndef BENCH_PROC_STAT_H
#define BENCH_PROC_STAT_H

#include <stdio.h>
#include <unistd.h>

/* Seconds of CPU the whole machine has been busy so far: user, nice, system, irq, softirq and
 * steal (all but idle and iowait), from /proc/stat; 0 if it cannot be read. */
static inline double machine_busy_seconds(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 5)
        return 0;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

#endif
