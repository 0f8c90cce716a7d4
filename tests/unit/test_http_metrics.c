/* Metrics registry rendered as Prometheus text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "service/metrics.h"

static void counters_and_gauges_render_grouped(void **state)
{
    (void)state;
    metrics_reset();
    metrics_counter_add("http_requests_total", "HTTP requests by code", "code=\"200\"", 2);
    metrics_gauge_set("mcp_sessions_active", "Open sessions", "", 3);
    metrics_counter_add("http_requests_total", "HTTP requests by code", "code=\"404\"", 1);
    metrics_counter_add("http_requests_total", "HTTP requests by code", "code=\"200\"", 1);
    assert_true(metrics_value("http_requests_total", "code=\"200\"") == 3);
    assert_true(metrics_value("nope", NULL) == 0);
    size_t len;
    char *s = metrics_render(&len);
    assert_string_equal(s, "# HELP http_requests_total HTTP requests by code\n"
                           "# TYPE http_requests_total counter\n"
                           "http_requests_total{code=\"200\"} 3\n"
                           "http_requests_total{code=\"404\"} 1\n"
                           "# HELP mcp_sessions_active Open sessions\n"
                           "# TYPE mcp_sessions_active gauge\n"
                           "mcp_sessions_active 3\n");
    assert_int_equal(len, strlen(s));
    free(s);
    metrics_gauge_set("mcp_sessions_active", "Open sessions", NULL, 0);
    assert_true(metrics_value("mcp_sessions_active", "") == 0);
    metrics_reset();
    s = metrics_render(&len);
    assert_int_equal(len, 0);
    free(s);
}

static void histogram_buckets_are_cumulative(void **state)
{
    (void)state;
    metrics_reset();
    static const double bounds[] = {0.001, 0.01, 0.1};
    metrics_observe("lat_seconds", "Latency", 0.005, bounds, 3);
    metrics_observe("lat_seconds", "Latency", 0.5, bounds, 3);
    assert_int_equal((int)metrics_value("lat_seconds", "le=\"0.001\""), 0);
    char *text = metrics_render(NULL);
    assert_non_null(strstr(text, "# TYPE lat_seconds histogram\n"));
    assert_non_null(strstr(text, "lat_seconds_bucket{le=\"0.01\"} 1\n"));
    assert_non_null(strstr(text, "lat_seconds_bucket{le=\"0.1\"} 1\n"));
    assert_non_null(strstr(text, "lat_seconds_bucket{le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(text, "lat_seconds_count 2\n"));
    assert_non_null(strstr(text, "lat_seconds_sum 0.505"));
    free(text);
    metrics_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(counters_and_gauges_render_grouped),
        cmocka_unit_test(histogram_buckets_are_cumulative),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
