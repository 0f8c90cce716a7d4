/* Tiny process-wide metrics registry rendered as Prometheus text
 * (exposition format 0.0.4) at /metrics. Any module can add series; the
 * server is single-threaded, so no locking. A series is (name, labels),
 * labels pre-formatted like `code="200"` or "" for none. */
#ifndef SBX_SERVICE_METRICS_H
#define SBX_SERVICE_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric_type { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM };

/* Counter += delta (created at 0 on first use). */
void metrics_counter_add(const char *name, const char *help, const char *labels, uint64_t delta);
/* Gauge = value. */
void metrics_gauge_set(const char *name, const char *help, const char *labels, double value);
/* Histogram: one observation against ascending bucket bounds (le="..." plus +Inf, _sum and
 * _count). */
void metrics_observe(const char *name, const char *help, double value, const double *bounds,
                     size_t n_bounds);
/* Current value of a series, 0 when absent (for tests and health checks). */
double metrics_value(const char *name, const char *labels);
/* Render every series, grouped by name with HELP/TYPE; malloc'd. */
char *metrics_render(size_t *len);
/* Drop all series (tests, shutdown). */
void metrics_reset(void);

#endif
