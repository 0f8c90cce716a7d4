/* jail_spawn_begin / jail_spawn_end, the halves the server's event loop uses so that it does
 * not wait for a sandbox's setup: the setup fd says when the setup has ended, and the end
 * reports the exec or what failed. These start real sandboxes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jail/jail.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/util.h"

static struct sbx_config cfg;

static struct jail *begin(char **argv, int stdin_fd)
{
    struct jail_spec spec = {.profile = config_profile(&cfg, "standard"),
                             .cfg = &cfg,
                             .argv = argv,
                             .stdin_fd = stdin_fd,
                             .stdout_fd = -1,
                             .stderr_fd = -1,
                             .persistent = true};
    struct jail *j = NULL;
    struct sbx_err err = {0};
    if (jail_spawn_begin(&spec, &j, &err) < 0)
        fail_msg("begin failed: %s", err.msg);
    assert_true(j->setup_fd >= 0);
    assert_int_equal(j->root_fd, -1); /* it comes with the end of the setup */
    struct pollfd p = {.fd = j->setup_fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    return j;
}

static void a_setup_that_ends_in_the_exec_hands_over_the_sandbox(void **state)
{
    (void)state;
    int in[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    char *argv[] = {"/bin/sh", "-c", "read x", NULL};
    struct jail *j = begin(argv, in[0]);
    close(in[0]);
    struct sbx_err err = {0};
    if (jail_spawn_end(j, &err) < 0)
        fail_msg("end failed: %s", err.msg);
    assert_int_equal(j->setup_fd, -1);
    assert_true(j->setup_ns > 0);
    /* The sandbox's root, as the file tools use it: its /workspace is there. */
    assert_true(j->root_fd >= 0);
    struct stat st;
    assert_int_equal(fstatat(j->root_fd, "workspace", &st, 0), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_true(j->workload_running);
    /* a second end has nothing to end */
    assert_int_equal(jail_spawn_end(j, &err), -1);
    close(in[1]);
    jail_destroy(j);
}

/* setup_ns ends at the exec as init saw it, not when the caller got round to looking: here the
 * caller looks 300 ms late, and the figure stays within the time the setup really took. */
static void the_setup_time_ends_at_the_exec_not_when_the_caller_looks(void **state)
{
    (void)state;
    int in[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    char *argv[] = {"/bin/sh", "-c", "read x", NULL};
    uint64_t before = now_ns();
    struct jail *j = begin(argv, in[0]); /* returns once the setup fd is readable */
    uint64_t ready = now_ns();
    close(in[0]);
    struct timespec late = {0, 300 * 1000 * 1000};
    nanosleep(&late, NULL);
    struct sbx_err err = {0};
    if (jail_spawn_end(j, &err) < 0)
        fail_msg("end failed: %s", err.msg);
    assert_true(j->setup_ns > 0);
    assert_true(j->setup_ns <= ready - before);
    close(in[1]);
    jail_destroy(j);
}

static void a_setup_that_fails_says_why_at_its_end(void **state)
{
    (void)state;
    char *argv[] = {"/nonexistent/interpreter", NULL};
    struct jail *j = begin(argv, -1);
    struct sbx_err err = {0};
    assert_int_equal(jail_spawn_end(j, &err), -1);
    assert_non_null(strstr(err.msg, "cannot run /nonexistent/interpreter"));
    assert_int_equal(j->root_fd, -1);
    jail_destroy(j);
}

int main(void)
{
    config_init_defaults(&cfg);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_setup_that_ends_in_the_exec_hands_over_the_sandbox),
        cmocka_unit_test(the_setup_time_ends_at_the_exec_not_when_the_caller_looks),
        cmocka_unit_test(a_setup_that_fails_says_why_at_its_end),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    jail_shutdown();
    config_free(&cfg);
    return rc;
}
