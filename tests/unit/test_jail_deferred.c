/* Deferred sandboxes (jail_spec.deferred), the kind the run pool keeps ready: built whole with
 * no command, armed, then handed argv and stdio by jail_start_command. These start real
 * sandboxes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/jail.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/util.h"

static struct sbx_config cfg;

static void wait_readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
}

/* A deferred sandbox of the standard profile, its setup ended: armed. */
static struct jail *armed_sandbox(void)
{
    struct jail_spec spec = {.profile = config_profile(&cfg, "standard"),
                             .cfg = &cfg,
                             .stdin_fd = -1,
                             .stdout_fd = -1,
                             .stderr_fd = -1,
                             .deferred = true};
    struct jail *j = NULL;
    struct sbx_err err = {0};
    if (jail_spawn_begin(&spec, &j, &err) < 0)
        fail_msg("begin failed: %s", err.msg);
    wait_readable(j->setup_fd);
    if (jail_spawn_end(j, &err) < 0)
        fail_msg("end failed: %s", err.msg);
    assert_true(j->armed);
    assert_true(j->setup_ns > 0);
    /* The pipe stays open for the command's exec report. */
    assert_true(j->setup_fd >= 0);
    return j;
}

struct stdio_pipes {
    int in[2], out[2], err[2];
    int child[3]; /* the sandbox's ends */
};

static void make_pipes(struct stdio_pipes *p)
{
    assert_int_equal(pipe2(p->in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(p->out, O_CLOEXEC), 0);
    assert_int_equal(pipe2(p->err, O_CLOEXEC), 0);
    p->child[0] = p->in[0];
    p->child[1] = p->out[1];
    p->child[2] = p->err[1];
}

static void close_child_ends(struct stdio_pipes *p)
{
    for (int i = 0; i < 3; i++)
        close(p->child[i]);
}

static int start(struct jail *j, char **argv, struct stdio_pipes *p, struct sbx_err *err)
{
    if (jail_start_command(j, argv, p->child, err) < 0)
        return -1;
    close_child_ends(p);
    wait_readable(j->setup_fd);
    return jail_command_end(j, err);
}

/* Everything a stream holds until its writers are gone. */
static void read_all(int fd, char *buf, size_t size)
{
    size_t len = 0;
    ssize_t n;
    while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
}

static void an_armed_sandbox_runs_the_command_it_is_handed(void **state)
{
    (void)state;
    struct jail *j = armed_sandbox();
    struct stdio_pipes p;
    make_pipes(&p);
    char *argv[] = {"sh", "-c",
                    "read line; echo \"got $line as $(id -u) in $PWD\"; echo e >&2; exit 3", NULL};
    struct sbx_err err = {0};
    if (start(j, argv, &p, &err) < 0)
        fail_msg("start failed: %s", err.msg);
    assert_int_equal(j->setup_fd, -1);
    assert_true(j->command_ns > 0);
    assert_int_equal(write(p.in[1], "hello\n", 6), 6);
    close(p.in[1]);
    char out[256], errs[64];
    read_all(p.out[0], out, sizeof(out));
    read_all(p.err[0], errs, sizeof(errs));
    char want[128];
    snprintf(want, sizeof(want), "got hello as %u in /workspace\n", cfg.sandbox_uid);
    assert_string_equal(out, want);
    assert_string_equal(errs, "e\n");
    wait_readable(j->status_fd);
    int code = -1, sig = -1;
    assert_int_equal(jail_workload_status(j, &code, &sig), 1);
    assert_int_equal(code, 3);
    assert_int_equal(sig, 0);
    close(p.out[0]);
    close(p.err[0]);
    jail_destroy(j);
}

static int count_marked_processes(const char *marker)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], buf[256];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len > 0) {
            buf[len] = '\0';
            n += strcmp(buf, marker) == 0;
        }
    }
    closedir(d);
    return n;
}

/* A one-shot sandbox's status goes out once nothing of the workload's runs any more: a
 * background process it left (holding stdout) is gone by the time the status can be read. */
static void the_status_comes_once_everything_in_the_sandbox_is_gone(void **state)
{
    (void)state;
    char marker[64], script[160];
    snprintf(marker, sizeof(marker), "deferred-marker-%d", (int)getpid());
    snprintf(script, sizeof(script), "(exec -a %s sleep 100) & sleep 0.2; exit 0", marker);
    struct jail *j = armed_sandbox();
    struct stdio_pipes p;
    make_pipes(&p);
    char *argv[] = {"/bin/bash", "-c", script, NULL};
    struct sbx_err err = {0};
    if (start(j, argv, &p, &err) < 0)
        fail_msg("start failed: %s", err.msg);
    close(p.in[1]);
    /* (control) the marked process is there while the command runs */
    int seen = 0;
    for (int i = 0; i < 100 && !seen; i++) {
        seen = count_marked_processes(marker);
        if (!seen)
            usleep(10000);
    }
    assert_int_equal(seen, 1);
    wait_readable(j->status_fd);
    /* The background process held the stdout pipe: it is closed at once, no wait. */
    struct pollfd eof = {.fd = p.out[0], .events = POLLIN};
    assert_int_equal(poll(&eof, 1, 0), 1);
    assert_true(eof.revents & POLLHUP);
    assert_int_equal(count_marked_processes(marker), 0);
    int code = -1, sig = -1;
    assert_int_equal(jail_workload_status(j, &code, &sig), 1);
    assert_int_equal(code, 0);
    close(p.out[0]);
    close(p.err[0]);
    jail_destroy(j);
}

static void a_command_that_cannot_run_is_named_at_its_end(void **state)
{
    (void)state;
    struct jail *j = armed_sandbox();
    struct stdio_pipes p;
    make_pipes(&p);
    char *argv[] = {"/nonexistent/tool", "x", NULL};
    struct sbx_err err = {0};
    assert_int_equal(start(j, argv, &p, &err), -1);
    assert_int_equal(err.code, ENOENT);
    assert_non_null(strstr(err.msg, "cannot run /nonexistent/tool"));
    close(p.in[1]);
    close(p.out[0]);
    close(p.err[0]);
    jail_destroy(j);
}

static void a_sandbox_takes_one_command_and_only_when_armed(void **state)
{
    (void)state;
    struct jail *j = armed_sandbox();
    struct stdio_pipes p;
    make_pipes(&p);
    struct sbx_err err = {0};
    /* nothing to run */
    char *empty[] = {NULL};
    assert_int_equal(jail_start_command(j, empty, p.child, &err), -1);
    assert_int_equal(err.code, EINVAL);
    /* a command line longer than init takes */
    static char *lots[300];
    for (int i = 0; i < 299; i++)
        lots[i] = "x";
    lots[299] = NULL;
    assert_int_equal(jail_start_command(j, lots, p.child, &err), -1);
    assert_int_equal(err.code, E2BIG);
    /* a closed fd for stdio */
    int bad[3] = {p.child[0], 1000, p.child[2]};
    char *argv[] = {"/bin/true", NULL};
    assert_int_equal(jail_start_command(j, argv, bad, &err), -1);
    assert_int_equal(err.code, EBADF);
    /* a file, not a pipe or a socket */
    int file = open("/dev/null", O_RDWR | O_CLOEXEC);
    int with_file[3] = {p.child[0], file, p.child[2]};
    assert_int_equal(jail_start_command(j, argv, with_file, &err), -1);
    assert_int_equal(err.code, EINVAL);
    close(file);
    /* (control) the sandbox still takes a good one, once */
    if (start(j, argv, &p, &err) < 0)
        fail_msg("start failed: %s", err.msg);
    assert_int_equal(jail_start_command(j, argv, p.child, &err), -1);
    assert_int_equal(err.code, EINVAL);
    close(p.in[1]);
    close(p.out[0]);
    close(p.err[0]);
    jail_destroy(j);
}

/* An armed sandbox nobody hands a command ends with its owner's jail_destroy. */
static void an_armed_sandbox_without_a_command_is_destroyed_whole(void **state)
{
    (void)state;
    struct jail *j = armed_sandbox();
    pid_t pid = j->pid;
    jail_destroy(j);
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(errno, ESRCH);
}

/* A deferred spawn is one-shot with its own memory. */
static void deferred_is_refused_with_persistent_or_shared_memory(void **state)
{
    (void)state;
    struct jail_spec spec = {.profile = config_profile(&cfg, "standard"),
                             .cfg = &cfg,
                             .stdin_fd = -1,
                             .stdout_fd = -1,
                             .stderr_fd = -1,
                             .deferred = true,
                             .persistent = true};
    struct jail *j = NULL;
    struct sbx_err err = {0};
    assert_int_equal(jail_spawn_begin(&spec, &j, &err), -1);
    assert_int_equal(err.code, EINVAL);
    spec.persistent = false;
    spec.share_memory = true;
    assert_int_equal(jail_spawn(&spec, &j, &err), -1);
    assert_int_equal(err.code, EINVAL);
}

/* The build key: equal for the same profile and configuration, different when a limit or the
 * sandbox's identity differs. */
static void the_build_key_follows_what_builds_the_sandbox(void **state)
{
    (void)state;
    struct sbx_profile p = *config_profile(&cfg, "standard");
    struct jail_build_key a, b;
    jail_build_key(&p, &cfg, &a);
    jail_build_key(&p, &cfg, &b);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_true(a.engine_ino != 0);
    p.memory_bytes += 1 << 20;
    jail_build_key(&p, &cfg, &b);
    assert_memory_not_equal(&a, &b, sizeof(a));
    p = *config_profile(&cfg, "standard");
    p.timeout_ms += 1000;
    jail_build_key(&p, &cfg, &b);
    assert_memory_not_equal(&a, &b, sizeof(a));
    p = *config_profile(&cfg, "standard");
    struct sbx_config other = cfg;
    other.sandbox_uid = 1000;
    jail_build_key(&p, &other, &b);
    assert_memory_not_equal(&a, &b, sizeof(a));
    /* what the command inherits from the process that builds the sandbox: a lower CPU-time or
     * address-space limit, another umask, another nice value */
    p = *config_profile(&cfg, "standard");
    struct rlimit saved, lower;
    assert_int_equal(getrlimit(RLIMIT_CPU, &saved), 0);
    lower = saved;
    lower.rlim_cur = saved.rlim_cur == RLIM_INFINITY ? 100000 : saved.rlim_cur - 1;
    assert_int_equal(setrlimit(RLIMIT_CPU, &lower), 0);
    jail_build_key(&p, &cfg, &b);
    assert_int_equal(setrlimit(RLIMIT_CPU, &saved), 0);
    assert_memory_not_equal(&a, &b, sizeof(a));
    assert_int_equal(getrlimit(RLIMIT_AS, &saved), 0);
    lower = saved;
    lower.rlim_cur = saved.rlim_cur == RLIM_INFINITY ? (1ull << 40) : saved.rlim_cur - 4096;
    assert_int_equal(setrlimit(RLIMIT_AS, &lower), 0);
    jail_build_key(&p, &cfg, &b);
    assert_int_equal(setrlimit(RLIMIT_AS, &saved), 0);
    assert_memory_not_equal(&a, &b, sizeof(a));
    mode_t mask = umask(0);
    umask(mask ^ 077);
    jail_build_key(&p, &cfg, &b);
    umask(mask);
    assert_memory_not_equal(&a, &b, sizeof(a));
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    if (CPU_COUNT(&all) > 1) {
        assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
        jail_build_key(&p, &cfg, &b);
        assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
        assert_memory_not_equal(&a, &b, sizeof(a));
    }
    jail_build_key(&p, &cfg, &b);
    assert_memory_equal(&a, &b, sizeof(a)); /* all restored: the same again */
    /* what only the caller uses (the name, the pool's size) is not part of it */
    snprintf(p.name, sizeof(p.name), "renamed");
    p.pool_size = 7;
    jail_build_key(&p, &cfg, &b);
    assert_memory_equal(&a, &b, sizeof(a));
}

int main(void)
{
    config_init_defaults(&cfg);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_armed_sandbox_runs_the_command_it_is_handed),
        cmocka_unit_test(the_status_comes_once_everything_in_the_sandbox_is_gone),
        cmocka_unit_test(a_command_that_cannot_run_is_named_at_its_end),
        cmocka_unit_test(a_sandbox_takes_one_command_and_only_when_armed),
        cmocka_unit_test(an_armed_sandbox_without_a_command_is_destroyed_whole),
        cmocka_unit_test(deferred_is_refused_with_persistent_or_shared_memory),
        cmocka_unit_test(the_build_key_follows_what_builds_the_sandbox),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    jail_shutdown();
    config_free(&cfg);
    return rc;
}
