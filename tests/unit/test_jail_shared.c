/* Sandboxes whose init shares the caller's memory (jail_spec.share_memory, what
 * `mcp-sandbox run` asks for): they start and end like any other, and the spawner thread
 * that init borrows its thread-local storage from goes away with them, fds and all, on
 * success and on failure alike. These start real sandboxes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jail/jail.h"
#include "lib/config.h"
#include "lib/err.h"

static struct sbx_config cfg;
static char *shown; /* JAIL_SHARED_MARK=... in the area this process started with */

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n; /* in /proc/self/fd, the DIR's own fd too: the same in every count compared */
}

/* The spawner is detached and, once released, closes its ends and ends on its own: give it
 * a moment. */
static int after_settling(const char *dir, int want)
{
    int n = count_entries(dir);
    for (int i = 0; i < 200 && n != want; i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        n = count_entries(dir);
    }
    return n;
}

/* Runs argv in a shared-memory sandbox; returns its exit code and what it printed. */
static int run_shared(char *const *argv, char *out, size_t cap, struct sbx_err *err)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    struct jail_spec spec = {.profile = config_profile(&cfg, "standard"),
                             .cfg = &cfg,
                             .argv = argv,
                             .stdin_fd = -1,
                             .stdout_fd = p[1],
                             .stderr_fd = -1,
                             .share_memory = true};
    struct jail *j = NULL;
    int rc = jail_spawn(&spec, &j, err);
    close(p[1]);
    if (rc < 0) {
        close(p[0]);
        return -1000;
    }
    size_t len = 0;
    ssize_t n;
    while ((n = read(p[0], out + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(p[0]);
    struct pollfd pfd = {.fd = j->pidfd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 10000), 1);
    int code = -1, sig = 0;
    assert_int_equal(jail_try_reap(j, &code, &sig), 1);
    jail_destroy(j);
    return code;
}

static void shared_memory_sandboxes_run_and_leave_nothing_behind(void **state)
{
    (void)state;
    int fds = count_entries("/proc/self/fd"), tasks = count_entries("/proc/self/task");
    char out[4096];
    struct sbx_err err = {0};
    for (int i = 0; i < 10; i++) {
        char *argv[] = {"/bin/sh", "-c", "echo $$ $(id -u); exit 7", NULL};
        int code = run_shared(argv, out, sizeof(out), &err);
        if (code == -1000)
            fail_msg("spawn %d failed: %s", i, err.msg);
        assert_int_equal(code, 7);
        /* pid 2 inside (init is 1), as the sandbox uid */
        assert_string_equal(out, "2 65534\n");
    }
    assert_int_equal(after_settling("/proc/self/fd", fds), fds);
    assert_int_equal(after_settling("/proc/self/task", tasks), tasks);
}

/* Init wipes the environment the caller started with (what /proc/<init>/environ would show)
 * in the memory it shares with the caller, who goes on reading a copy. */
static void the_callers_environment_is_wiped_where_init_shows_it_but_still_readable(void **state)
{
    (void)state;
    assert_non_null(shown);
    char out[256];
    struct sbx_err err = {0};
    char *argv[] = {"/bin/true", NULL};
    assert_int_equal(run_shared(argv, out, sizeof(out), &err), 0);
    assert_int_equal(shown[0], '\0');
    assert_non_null(getenv("JAIL_SHARED_MARK"));
    assert_string_equal(getenv("JAIL_SHARED_MARK"), "secret-value");
}

static void a_failed_shared_memory_spawn_releases_its_spawner(void **state)
{
    (void)state;
    int fds = count_entries("/proc/self/fd"), tasks = count_entries("/proc/self/task");
    char out[256];
    struct sbx_err err = {0};
    char *argv[] = {"/nonexistent/command", NULL};
    assert_int_equal(run_shared(argv, out, sizeof(out), &err), -1000);
    assert_non_null(strstr(err.msg, "cannot run /nonexistent/command"));
    assert_int_equal(after_settling("/proc/self/fd", fds), fds);
    assert_int_equal(after_settling("/proc/self/task", tasks), tasks);
    /* and the next one is unaffected */
    char *ok[] = {"/bin/sh", "-c", "echo fine", NULL};
    assert_int_equal(run_shared(ok, out, sizeof(out), &err), 0);
    assert_string_equal(out, "fine\n");
}

int main(int argc, char **argv)
{
    (void)argc;
    /* The mark must be in the environment this process started with: start again with it. */
    if (!getenv("JAIL_SHARED_MARK")) {
        setenv("JAIL_SHARED_MARK", "secret-value", 1);
        execv("/proc/self/exe", argv);
        return 1;
    }
    extern char **environ;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "JAIL_SHARED_MARK=", 17) == 0)
            shown = *e;
    config_init_defaults(&cfg);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shared_memory_sandboxes_run_and_leave_nothing_behind),
        cmocka_unit_test(a_failed_shared_memory_spawn_releases_its_spawner),
        cmocka_unit_test(the_callers_environment_is_wiped_where_init_shows_it_but_still_readable),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    jail_shutdown();
    config_free(&cfg);
    return rc;
}
