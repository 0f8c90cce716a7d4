/* The run pool's messages: what each side encodes decodes to the same, and what is malformed
 * in any way is refused whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "lib/run_pool_wire.h"

static char buf[RUN_POOL_MSG_MAX];
static struct run_pool_msg m;

static void a_request_comes_back_whole(void **state)
{
    (void)state;
    const char key[] = "0123456789abcdef";
    char *argv[] = {"/usr/bin/python3", "-c", "print('x y')", "", NULL};
    size_t n = run_pool_encode_request(buf, sizeof(buf), key, sizeof(key), argv);
    assert_true(n > 0);
    assert_true(run_pool_decode(buf, n, &m));
    assert_int_equal(m.type, RP_REQUEST);
    assert_int_equal(m.key_len, sizeof(key));
    assert_memory_equal(m.key, key, sizeof(key));
    assert_int_equal(m.argc, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(m.argv[i], argv[i]);
    assert_null(m.argv[4]);
}

static void every_other_message_comes_back_whole(void **state)
{
    (void)state;
    size_t n = run_pool_encode_signal(buf, sizeof(buf), 15);
    assert_true(run_pool_decode(buf, n, &m));
    assert_int_equal(m.type, RP_SIGNAL);
    assert_int_equal(m.sig, 15);

    n = run_pool_encode_bare(buf, sizeof(buf), RP_KILL);
    assert_true(run_pool_decode(buf, n, &m));
    assert_int_equal(m.type, RP_KILL);
    n = run_pool_encode_bare(buf, sizeof(buf), RP_QUERY);
    assert_true(run_pool_decode(buf, n, &m));
    assert_int_equal(m.type, RP_QUERY);

    n = run_pool_encode_text(buf, sizeof(buf), RP_FAILED, 2, "cannot run x: No such file");
    assert_true(run_pool_decode(buf, n, &m));
    assert_int_equal(m.type, RP_FAILED);
    assert_int_equal(m.code, 2);
    assert_string_equal(m.text, "cannot run x: No such file");

    struct run_pool_report r = {.exit_code = -1,
                                .term_signal = 9,
                                .oom_killed = true,
                                .memory_peak_bytes = 1ull << 40,
                                .cpu_ns = 123456789,
                                .setup_ns = 987654,
                                .command_ns = 4321,
                                .limits_backend = "cgroup-v1",
                                .degraded = "landlock,seccomp"};
    n = run_pool_encode_report(buf, sizeof(buf), RP_ENDED, &r);
    assert_true(run_pool_decode(buf, n, &m));
    assert_int_equal(m.type, RP_ENDED);
    assert_int_equal(m.report.exit_code, -1);
    assert_int_equal(m.report.term_signal, 9);
    assert_true(m.report.oom_killed);
    assert_true(m.report.memory_peak_bytes == 1ull << 40);
    assert_int_equal(m.report.cpu_ns, 123456789);
    assert_int_equal(m.report.setup_ns, 987654);
    assert_int_equal(m.report.command_ns, 4321);
    assert_string_equal(m.report.limits_backend, "cgroup-v1");
    assert_string_equal(m.report.degraded, "landlock,seccomp");
}

/* Each cut of a good message, and each byte added to it, is refused. */
static void a_message_cut_short_or_too_long_is_refused(void **state)
{
    (void)state;
    char *argv[] = {"/bin/true", "a", NULL};
    size_t n = run_pool_encode_request(buf, sizeof(buf), "key", 3, argv);
    for (size_t cut = 0; cut < n; cut++)
        assert_false(run_pool_decode(buf, cut, &m));
    buf[n] = 'x';
    assert_false(run_pool_decode(buf, n + 1, &m));
    assert_true(run_pool_decode(buf, n, &m)); /* (control) */
}

static void unknown_types_versions_and_values_are_refused(void **state)
{
    (void)state;
    size_t n = run_pool_encode_signal(buf, sizeof(buf), 2);
    buf[1] = RUN_POOL_VERSION + 1;
    assert_false(run_pool_decode(buf, n, &m));
    buf[1] = RUN_POOL_VERSION;
    buf[0] = 'Z';
    assert_false(run_pool_decode(buf, n, &m));
    /* signals 1..64 only */
    n = run_pool_encode_signal(buf, sizeof(buf), 0);
    assert_false(run_pool_decode(buf, n, &m));
    n = run_pool_encode_signal(buf, sizeof(buf), 65);
    assert_false(run_pool_decode(buf, n, &m));
    /* a report's exit code and signal in their ranges, the OOM flag a flag */
    struct run_pool_report r = {.exit_code = 256};
    n = run_pool_encode_report(buf, sizeof(buf), RP_ENDED, &r);
    assert_false(run_pool_decode(buf, n, &m));
    r.exit_code = 0;
    n = run_pool_encode_report(buf, sizeof(buf), RP_ENDED, &r);
    assert_true(run_pool_decode(buf, n, &m));
    buf[10] = 2; /* the OOM byte: type, version, two 32-bit fields */
    assert_false(run_pool_decode(buf, n, &m));
    /* a type encoded by the wrong function gives nothing */
    assert_int_equal(run_pool_encode_bare(buf, sizeof(buf), RP_SIGNAL), 0);
    assert_int_equal(run_pool_encode_text(buf, sizeof(buf), RP_KILL, 0, "x"), 0);
    assert_int_equal(run_pool_encode_report(buf, sizeof(buf), RP_MISS, &r), 0);
}

/* argv in a request: no empty command, no NUL inside a string, each string ended by its NUL. */
static void a_request_with_a_bad_command_line_is_refused(void **state)
{
    (void)state;
    char *empty_cmd[] = {"", NULL};
    assert_int_equal(run_pool_encode_request(buf, sizeof(buf), "k", 1, empty_cmd), 0);
    char *none[] = {NULL};
    assert_int_equal(run_pool_encode_request(buf, sizeof(buf), "k", 1, none), 0);
    char *argv[] = {"/bin/echo", "abc", NULL};
    size_t n = run_pool_encode_request(buf, sizeof(buf), "k", 1, argv);
    assert_true(run_pool_decode(buf, n, &m));
    /* "abc\0" is the last string: its NUL replaced, then a NUL put inside it */
    buf[n - 1] = 'x';
    assert_false(run_pool_decode(buf, n, &m));
    buf[n - 1] = '\0';
    buf[n - 3] = '\0';
    assert_false(run_pool_decode(buf, n, &m));
}

static void limits_are_kept_on_both_sides(void **state)
{
    (void)state;
    static char *argv[RUN_POOL_ARGC_MAX + 2];
    for (int i = 0; i < RUN_POOL_ARGC_MAX + 1; i++)
        argv[i] = "x";
    argv[RUN_POOL_ARGC_MAX + 1] = NULL;
    assert_int_equal(run_pool_encode_request(buf, sizeof(buf), "k", 1, argv), 0);
    argv[RUN_POOL_ARGC_MAX] = NULL;
    assert_true(run_pool_encode_request(buf, sizeof(buf), "k", 1, argv) > 0);
    static char big[RUN_POOL_ARGV_BYTES + 1];
    memset(big, 'a', sizeof(big) - 1);
    char *long_argv[] = {big, NULL};
    assert_int_equal(run_pool_encode_request(buf, sizeof(buf), "k", 1, long_argv), 0);
    static char key[RUN_POOL_KEY_MAX + 1];
    char *one[] = {"/bin/true", NULL};
    assert_int_equal(run_pool_encode_request(buf, sizeof(buf), key, sizeof(key), one), 0);
    /* a buffer too small gives nothing rather than half a message */
    assert_int_equal(run_pool_encode_request(buf, 8, "k", 1, one), 0);
    /* a long text is cut to fit, and says so */
    static char text[4000];
    memset(text, 'e', sizeof(text) - 1);
    size_t n = run_pool_encode_text(buf, sizeof(buf), RP_MISS, 0, text);
    assert_true(run_pool_decode(buf, n, &m));
    assert_int_equal(strlen(m.text), RUN_POOL_TEXT_MAX - 1);
    assert_non_null(strstr(m.text, "..."));
}

/* A text is shown to the user: what is not UTF-8, and a NUL, do not come through. */
static void texts_come_out_clean(void **state)
{
    (void)state;
    char raw[] = {2, 1, 0, 0, 0, 0, 5, 0, 0, 0, 'a', '\0', (char)0xff, 'b', 'c'};
    raw[0] = RP_MISS;
    raw[1] = RUN_POOL_VERSION;
    assert_true(run_pool_decode(raw, sizeof(raw), &m));
    assert_string_equal(m.text, "a??bc");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_request_comes_back_whole),
        cmocka_unit_test(every_other_message_comes_back_whole),
        cmocka_unit_test(a_message_cut_short_or_too_long_is_refused),
        cmocka_unit_test(unknown_types_versions_and_values_are_refused),
        cmocka_unit_test(a_request_with_a_bad_command_line_is_refused),
        cmocka_unit_test(limits_are_kept_on_both_sides),
        cmocka_unit_test(texts_come_out_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
