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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jail/jail.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/util.h"

static struct sbx_config cfg;

/* A persistent sandbox (the server's kind) running argv; stderr goes nowhere. */
static struct jail_spec persistent_spec(char **argv, int stdin_fd, int stdout_fd)
{
    return (struct jail_spec){.profile = config_profile(&cfg, "standard"),
                              .cfg = &cfg,
                              .argv = argv,
                              .stdin_fd = stdin_fd,
                              .stdout_fd = stdout_fd,
                              .stderr_fd = -1,
                              .persistent = true};
}

static struct jail *begin(char **argv, int stdin_fd)
{
    struct jail_spec spec = persistent_spec(argv, stdin_fd, -1);
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

/* The [heap] line of /proc/<pid>/maps: its bounds, false if there is none. */
static bool heap_bounds(pid_t pid, unsigned long *lo, unsigned long *hi)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, "[heap]") && sscanf(line, "%lx-%lx", lo, hi) == 2;
    fclose(f);
    return found;
}

/* The kB of the [heap] mapping that are in memory, from /proc/<pid>/smaps; -1 if none. */
static long heap_rss_kb(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    bool in_heap = false;
    long kb = -1;
    unsigned long a, b;
    while (kb < 0 && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%lx-%lx", &a, &b) == 2) /* a mapping's first line */
            in_heap = strstr(line, "[heap]") != NULL;
        else if (in_heap && strncmp(line, "Rss:", 4) == 0)
            kb = strtol(line + 4, NULL, 10);
    }
    fclose(f);
    return kb;
}

/* A forked init is a copy of the caller's memory: it gives the heap back once it is set up
 * (what the server had there, other sandboxes' code and output among it, is not left in
 * every sandbox's init), and still starts its workload again from its own copy of the
 * command line. As root, the test reads init's memory. */
static void a_forked_init_gives_back_the_callers_heap_and_still_restarts(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* init's memory is readable by root only */
    char *mark = malloc(64);
    assert_non_null(mark);
    snprintf(mark, 64, "heap-mark-%d-%s", (int)getpid(), "0123456789");
    unsigned long lo = 0, hi = 0;
    /* Under ASan malloc takes no memory from the heap: the mark is then not looked for. */
    bool mark_in_heap =
        heap_bounds(getpid(), &lo, &hi) && (unsigned long)mark >= lo && (unsigned long)mark < hi;
    /* The command line is in the heap too, as a caller's may be. */
    char *argv[] = {strdup("/bin/sh"), strdup("-c"), strdup("echo started; read x; exit 3"), NULL};
    int in[2], out[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    struct jail_spec spec = persistent_spec(argv, in[0], out[1]);
    struct jail *j = NULL;
    struct sbx_err err = {0};
    if (jail_spawn(&spec, &j, &err) < 0)
        fail_msg("spawn failed: %s", err.msg);
    close(in[0]);
    close(out[1]);
    char buf[64] = "";
    assert_int_equal(read(out[0], buf, sizeof(buf) - 1), 8);
    assert_string_equal(buf, "started\n");

    /* By now init has given its heap back (it does so before it serves the status socket,
     * whose root fd jail_spawn waited for): none of it is in memory (-1: no heap at all, as
     * under ASan, whose malloc does not use it). */
    assert_true(heap_rss_kb(j->pid) <= 0);
    unsigned long ilo = 0, ihi = 0;
    if (mark_in_heap && heap_bounds(j->pid, &ilo, &ihi)) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/mem", (int)j->pid);
        int mem = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(mem >= 0);
        size_t len = ihi - ilo;
        char *copy = malloc(len);
        assert_non_null(copy);
        assert_int_equal(pread(mem, copy, len, (off_t)ilo), (ssize_t)len);
        close(mem);
        assert_null(memmem(copy, len, mark, strlen(mark)));
        free(copy);
    }

    /* The workload ends (its stdin closes) and starts again from init's copy of argv. */
    close(in[1]);
    struct pollfd p = {.fd = j->status_fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    int code = -1, sig = -1;
    assert_int_equal(jail_workload_status(j, &code, &sig), 1);
    assert_int_equal(code, 3);
    assert_int_equal(jail_workload_restart(j), 0);
    memset(buf, 0, sizeof(buf));
    p = (struct pollfd){.fd = out[0], .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    assert_int_equal(read(out[0], buf, sizeof(buf) - 1), 8);
    assert_string_equal(buf, "started\n");
    close(out[0]);
    jail_destroy(j);
    for (int i = 0; i < 3; i++)
        free(argv[i]);
    free(mark);
}

/* Init keeps the command line to restart the workload with, in room of its own: one that would
 * not fit is refused before anything is cloned, with the limit in the message. */
static void a_command_line_too_long_to_keep_is_refused_before_the_clone(void **state)
{
    (void)state;
    char *argv[302];
    argv[0] = "/bin/true";
    for (int i = 1; i < 301; i++)
        argv[i] = "x";
    argv[301] = NULL;
    struct jail_spec spec = persistent_spec(argv, -1, -1);
    struct jail *j = NULL;
    struct sbx_err err = {0};
    assert_int_equal(jail_spawn_begin(&spec, &j, &err), -1);
    assert_null(j);
    assert_non_null(strstr(err.msg, "does not fit a persistent sandbox (255 arguments"));
    /* as many as fit start */
    argv[255] = NULL;
    j = begin(argv, -1);
    assert_int_equal(jail_spawn_end(j, &err), 0);
    jail_destroy(j);
}

int main(void)
{
    config_init_defaults(&cfg);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_setup_that_ends_in_the_exec_hands_over_the_sandbox),
        cmocka_unit_test(the_setup_time_ends_at_the_exec_not_when_the_caller_looks),
        cmocka_unit_test(a_setup_that_fails_says_why_at_its_end),
        cmocka_unit_test(a_forked_init_gives_back_the_callers_heap_and_still_restarts),
        cmocka_unit_test(a_command_line_too_long_to_keep_is_refused_before_the_clone),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    jail_shutdown();
    config_free(&cfg);
    return rc;
}
