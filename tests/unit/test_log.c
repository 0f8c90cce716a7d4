/* Structured logs: a long value is cut whole characters short, and a source that logs too much
 * is held to its rate, with a line that says how many of its lines went. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static char path[] = "/tmp/test-log-XXXXXX";

static int setup(void **state)
{
    (void)state;
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    return log_open(path, LOG_LVL_DEBUG);
}

static int teardown(void **state)
{
    (void)state;
    log_close();
    unlink(path);
    return 0;
}

/* The lines logged since the last call, as JSON objects. */
static json_t *take_lines(void)
{
    static long seen;
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, seen, SEEK_SET);
    json_t *lines = json_array();
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        json_array_append_new(lines, o);
    }
    seen = ftell(f);
    free(line);
    fclose(f);
    return lines;
}

static void a_long_value_is_cut_between_characters(void **state)
{
    (void)state;
    /* 'a' then 2-byte characters: the limit falls inside one */
    size_t n = 1 + 2 * LOG_VALUE_MAX;
    char *v = malloc(n + 1);
    v[0] = 'a';
    for (size_t i = 1; i < n; i += 2)
        memcpy(v + i, "\xc3\xa9", 2);
    v[n] = '\0';
    log_emit(LOG_LVL_INFO, "long", "value", v, "short", "x", NULL);
    free(v);
    json_t *lines = take_lines();
    assert_int_equal(json_array_size(lines), 1);
    const json_t *o = json_array_get(lines, 0);
    const char *got = json_string_value(json_object_get(o, "value"));
    assert_non_null(got);
    assert_true(strlen(got) < LOG_VALUE_MAX + 64);
    char tail[64];
    snprintf(tail, sizeof(tail), "... [%zu bytes cut]", n - (LOG_VALUE_MAX - 1));
    assert_non_null(strstr(got, tail));
    assert_string_equal(json_string_value(json_object_get(o, "short")), "x");
    json_decref(lines);
}

static void a_source_is_held_to_its_rate_and_told_what_it_lost(void **state)
{
    (void)state;
    struct log_rate r = {0};
    int taken = 0;
    for (int i = 0; i < LOG_RATE_BURST + 5; i++)
        taken += log_rate_take(&r, "sb-1");
    assert_int_equal(taken, LOG_RATE_BURST);
    json_t *lines = take_lines();
    assert_int_equal(json_array_size(lines), 0);
    json_decref(lines);

    /* the next interval: one line says what went, and the source may log again */
    r.start_ms -= LOG_RATE_INTERVAL_MS;
    assert_true(log_rate_take(&r, "sb-1"));
    lines = take_lines();
    assert_int_equal(json_array_size(lines), 1);
    const json_t *o = json_array_get(lines, 0);
    assert_string_equal(json_string_value(json_object_get(o, "sandbox")), "sb-1");
    assert_string_equal(json_string_value(json_object_get(o, "dropped")), "5");
    json_decref(lines);
    /* nothing dropped in an interval: no such line */
    r.start_ms -= LOG_RATE_INTERVAL_MS;
    assert_true(log_rate_take(&r, "sb-1"));
    lines = take_lines();
    assert_int_equal(json_array_size(lines), 0);
    json_decref(lines);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_long_value_is_cut_between_characters),
        cmocka_unit_test(a_source_is_held_to_its_rate_and_told_what_it_lost),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
