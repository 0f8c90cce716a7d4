/* Structured logs: a long value is cut whole characters short, and a source that logs too much
 * is held to its rate, with a line that says how many of its lines went. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
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

/* A value that is not UTF-8 (a path or a message from a sandbox) still gives its line: jansson
 * will not encode it, and the line was dropped without a word. */
static void a_value_that_is_not_utf8_keeps_its_line(void **state)
{
    (void)state;
    log_emit(LOG_LVL_WARNING, "bad bytes", "path", "/work/caf\xe9\xff", NULL);
    json_t *lines = take_lines();
    assert_int_equal(json_array_size(lines), 1);
    const json_t *o = json_array_get(lines, 0);
    assert_string_equal(json_string_value(json_object_get(o, "msg")), "bad bytes");
    const char *got = json_string_value(json_object_get(o, "path"));
    assert_non_null(got);
    assert_non_null(strstr(got, "/work/caf"));
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

/* The log goes to a pipe that stands for stderr (p[0] reads it), never blocking, as the
 * server's does; returns the real stderr, for log_back_to_the_file. */
static int log_to_a_pipe(int p[2])
{
    assert_int_equal(pipe(p), 0);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], 2), 2);
    assert_int_equal(log_open(NULL, LOG_LVL_DEBUG), 0);
    log_never_block();
    return saved;
}

static void log_back_to_the_file(int p[2], int saved)
{
    dup2(saved, 2);
    close(saved);
    close(p[0]);
    close(p[1]);
    assert_int_equal(log_open(path, LOG_LVL_DEBUG), 0);
}

/* A host that does not read our stderr (a pipe) costs log lines, never a wait; once it reads,
 * a line says how many were lost, and every line that went in is whole. */
static void a_full_pipe_costs_lines_not_a_wait(void **state)
{
    (void)state;
    int p[2], saved = log_to_a_pipe(p);
    /* The pipe's own description stays blocking: others write through it. */
    assert_false(fcntl(2, F_GETFL) & O_NONBLOCK);
    char value[1000];
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    alarm(10);                    /* a blocked write would hang here */
    for (int i = 0; i < 200; i++) /* 200 kB into a 64 kB pipe */
        log_emit(LOG_LVL_INFO, "filler", "value", value, NULL);
    alarm(0);
    /* Read all there is, then one more line: the loss is said first. */
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    static char buf[1 << 18];
    size_t len = 0;
    ssize_t r;
    while ((r = read(p[0], buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)r;
    log_emit(LOG_LVL_INFO, "after", NULL);
    while ((r = read(p[0], buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)r;
    log_back_to_the_file(p, saved);

    int fillers = 0, lost = 0, after = 0;
    char *save = NULL;
    buf[len] = '\0';
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o); /* whole lines only */
        const char *msg = json_string_value(json_object_get(o, "msg"));
        fillers += strcmp(msg, "filler") == 0;
        if (strstr(msg, "log lines lost")) {
            lost += atoi(json_string_value(json_object_get(o, "lost")));
            assert_int_equal(after, 0);
        }
        after += strcmp(msg, "after") == 0;
        json_decref(o);
    }
    assert_true(fillers > 10 && fillers < 200);
    assert_int_equal(fillers + lost, 200);
    assert_int_equal(after, 1);
}

/* A line longer than the pipe takes at once goes in part, and its rest before the next line:
 * no wait, and no line runs into another. */
static void a_line_that_goes_in_part_is_finished_before_the_next(void **state)
{
    (void)state;
    int p[2], saved = log_to_a_pipe(p);
    char filler[1000];
    memset(filler, 'f', sizeof(filler) - 1);
    filler[sizeof(filler) - 1] = '\0';
    for (int i = 0; i < 100; i++) /* full */
        log_emit(LOG_LVL_INFO, "filler", "value", filler, NULL);
    static char all[1 << 19];
    size_t len = 0;
    ssize_t r = read(p[0], all, 6000); /* room for part of the long line */
    assert_true(r > 0);
    len += (size_t)r;
    char control[1500]; /* each \u0001 in the JSON: 9 kB of line */
    memset(control, 1, sizeof(control) - 1);
    control[sizeof(control) - 1] = '\0';
    uint64_t t0 = now_ms();
    log_emit(LOG_LVL_INFO, "long", "value", control, NULL);
    assert_true(now_ms() - t0 < 100);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    while ((r = read(p[0], all + len, sizeof(all) - len)) > 0)
        len += (size_t)r;
    log_flush(); /* the rest, with nothing more to log */
    assert_true(len > 0 && (r = read(p[0], all + len, sizeof(all) - len)) > 0);
    len += (size_t)r;
    assert_int_equal(all[len - 1], '\n');
    log_emit(LOG_LVL_INFO, "next", NULL);
    while ((r = read(p[0], all + len, sizeof(all) - len)) > 0)
        len += (size_t)r;
    log_back_to_the_file(p, saved);

    int longs = 0, nexts = 0;
    char *save = NULL;
    all[len] = '\0';
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o); /* whole lines only */
        const char *msg = json_string_value(json_object_get(o, "msg"));
        if (strcmp(msg, "long") == 0) {
            longs++;
            assert_int_equal(strlen(json_string_value(json_object_get(o, "value"))), 1499);
        }
        nexts += strcmp(msg, "next") == 0;
        json_decref(o);
    }
    assert_int_equal(longs, 1);
    assert_int_equal(nexts, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_long_value_is_cut_between_characters),
        cmocka_unit_test(a_value_that_is_not_utf8_keeps_its_line),
        cmocka_unit_test(a_source_is_held_to_its_rate_and_told_what_it_lost),
        cmocka_unit_test(a_full_pipe_costs_lines_not_a_wait),
        cmocka_unit_test(a_line_that_goes_in_part_is_finished_before_the_next),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
