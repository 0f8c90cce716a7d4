/* Where a sandbox's processes and the thread that spawned it sit in the cgroup hierarchies.
 * On v1 the spawning thread steps into the sandbox's groups for the clone and out again
 * (cgroup_enter_thread): the sandbox must be in its groups from birth, and the thread, with
 * every other thread of this process, back where it was. Both spawn paths are checked: the
 * forked init of the server and the shared-memory init of `run`. These start real
 * sandboxes, as root (the unit tier's user). On cgroup v2 the process steps into a leaf of its
 * own cgroup first, and this checks where it and its threads are then. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "jail/cgroup.h"
#include "jail/jail.h"
#include "lib/config.h"
#include "lib/err.h"

static struct sbx_config cfg;

#define CGROUP_TEXT 4096

static void cgroup_of(const char *proc_path, char *buf)
{
    int fd = open(proc_path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, CGROUP_TEXT - 1);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
}

/* Every thread of this process is in the groups `want` lists. A thread that ends between the
 * listing and the reading (the spawner, released by jail_destroy) is in no group any more and
 * is passed over; every thread still there is checked. */
static void all_threads_are_in(const char *want)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], got[CGROUP_TEXT];
        snprintf(path, sizeof(path), "/proc/self/task/%s/cgroup", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && (errno == ENOENT || errno == ESRCH))
            continue;
        assert_true(fd >= 0);
        ssize_t n = read(fd, got, sizeof(got) - 1);
        int read_errno = errno;
        close(fd);
        if (n <= 0 && (n == 0 || read_errno == ESRCH))
            continue;
        assert_true(n > 0);
        got[n] = '\0';
        /* An ending thread is first moved to the root groups, then leaves /proc: one that is
         * gone within 100 ms was ending, and is passed over like one already gone. */
        bool gone = false;
        for (int i = 0; i < 100 && strcmp(got, want) != 0 && !gone; i++) {
            char dir[300];
            snprintf(dir, sizeof(dir), "/proc/self/task/%s", e->d_name);
            gone = access(dir, F_OK) != 0;
            if (!gone)
                usleep(1000);
        }
        if (!gone && strcmp(got, want) != 0)
            fail_msg("thread %s is in\n%s\nnot\n%s", e->d_name, got, want);
    }
    closedir(d);
}

static void check_spawn(bool share_memory)
{
    char before[CGROUP_TEXT];
    cgroup_of("/proc/thread-self/cgroup", before);
    int in[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    char *argv[] = {"/bin/sh", "-c", "read x; exit 3", NULL};
    struct jail_spec spec = {.profile = config_profile(&cfg, "standard"),
                             .cfg = &cfg,
                             .argv = argv,
                             .stdin_fd = in[0],
                             .stdout_fd = -1,
                             .stderr_fd = -1,
                             .share_memory = share_memory};
    struct jail *j = NULL;
    struct sbx_err err = {0};
    if (jail_spawn(&spec, &j, &err) < 0)
        fail_msg("spawn failed: %s", err.msg);
    close(in[0]);
    if (strncmp(j->limits_backend, "cgroup", 6) != 0)
        fail_msg("no cgroup backend (%s): run this test as root", j->limits_backend);

    /* v1: the spawning thread stepped in for the clone and out again, so every thread is where
     * it was. v2 moves no thread alone: a process that had to step into its leaf (cgroup.c) did
     * so whole, and every thread is where the process is now, which is not the sandbox's. */
    bool v2 = strcmp(j->limits_backend, "cgroup-v2") == 0;
    char now[CGROUP_TEXT];
    cgroup_of("/proc/self/cgroup", now);
    const char *want = v2 ? now : before;
    all_threads_are_in(want);
    /* init and the shell, nothing else: the spawning thread is not counted. */
    struct jail_usage u;
    assert_int_equal(jail_read_usage(j, &u), 0);
    assert_int_equal(u.pids_current, 2);
    /* init is in the sandbox's group in each hierarchy, not in ours. */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)j->pid);
    char init_cg[CGROUP_TEXT];
    cgroup_of(path, init_cg);
    static const char *const ctrls[] = {":memory:", ":pids:", ":cpu:", ":cpuacct:"};
    for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
        const char *line = strstr(init_cg, ctrls[i]);
        if (!line)
            continue; /* v2: one line for all */
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (!memmem(line, len, "mcp-sandbox.", 12))
            fail_msg("init's %s group is not the sandbox's:\n%s", ctrls[i], init_cg);
    }
    if (strcmp(init_cg, want) == 0)
        fail_msg("init is in this process's own group:\n%s", init_cg);

    assert_int_equal(write(in[1], "\n", 1), 1);
    close(in[1]);
    struct pollfd pfd = {.fd = j->pidfd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 10000), 1);
    int code = -1, sig = 0;
    assert_int_equal(jail_try_reap(j, &code, &sig), 1);
    assert_int_equal(code, 3);
    jail_destroy(j);
    all_threads_are_in(want);
}

static void a_forked_sandbox_is_in_its_groups_and_the_spawner_is_not(void **state)
{
    (void)state;
    check_spawn(false);
}

static void a_shared_memory_sandbox_is_in_its_groups_and_the_spawner_is_not(void **state)
{
    (void)state;
    check_spawn(true);
}

/* A process of our own to be killed, or spared: it waits to be killed. dir (a mkdtemp
 * template) becomes the group's directory, path its cgroup.procs, still to be made. */
static pid_t start_victim(char *dir, char *path, size_t size)
{
    assert_non_null(mkdtemp(dir));
    snprintf(path, size, "%s/cgroup.procs", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (;;)
            pause();
    }
    return pid;
}

/* Whether pid ended by SIGKILL (it is reaped either way). */
static bool killed_by_sigkill(pid_t pid)
{
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static void a_listed_process_is_killed(void **state)
{
    (void)state;
    char dir[] = "/tmp/mcp-test-procs-XXXXXX", path[64];
    pid_t victim = start_victim(dir, path, sizeof(path));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%d\n", (int)victim);
    fclose(f);
    assert_int_equal(cgroup_kill_listed(dir), 1);
    assert_true(killed_by_sigkill(victim));
    unlink(path);
    rmdir(dir);
}

/* cgroup.procs as a fifo: what each of its two reads shows. */
struct two_listings {
    const char *path;
    char first[32], second[32];
    int pidfds_before; /* this process's pidfds before the kill */
};

/* How many pidfds this process holds. */
static int pidfds_held(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char fd_path[300], target[64];
        snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(fd_path, target, sizeof(target) - 1);
        n += len > 0 && (target[len] = '\0', strcmp(target, "anon_inode:[pidfd]") == 0);
    }
    if (d)
        closedir(d);
    return n;
}

static void *serve_listings(void *arg)
{
    struct two_listings *l = arg;
    for (int i = 0; i < 2; i++) {
        /* The second listing waits for the pidfd the kill takes between its reads: a writer
         * opening while the first read still has the fifo open would join that read. */
        for (int waited = 0; i == 1 && pidfds_held() <= l->pidfds_before; waited++) {
            if (waited == 10000)
                return NULL; /* no second read is coming: the test fails, not hangs */
            usleep(1000);
        }
        int fd = open(l->path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return NULL;
        const char *text = i == 0 ? l->first : l->second;
        ssize_t w = write(fd, text, strlen(text));
        (void)w;
        close(fd);
    }
    return NULL;
}

/* A pid listed at the first read and gone from the second (its process reaped, the number
 * taken by a process of another group) is not signalled. */
static void a_pid_no_longer_listed_is_spared(void **state)
{
    (void)state;
    char dir[] = "/tmp/mcp-test-procs-XXXXXX", path[64];
    pid_t victim = start_victim(dir, path, sizeof(path));
    assert_int_equal(mkfifo(path, 0600), 0);
    struct two_listings l = {.path = path, .pidfds_before = pidfds_held()};
    snprintf(l.first, sizeof(l.first), "%d\n", (int)victim);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve_listings, &l), 0);
    assert_int_equal(cgroup_kill_listed(dir), 0);
    pthread_join(t, NULL);
    /* Still alive: the kill below is the first it gets. */
    assert_int_equal(waitpid(victim, NULL, WNOHANG), 0);
    kill(victim, SIGKILL);
    assert_true(killed_by_sigkill(victim));
    unlink(path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    (void)argc;
    /* On a host with cgroup v2 only, under systemd, a delegated scope of its own, as `run`
     * gets one: a plain service's or a login shell's cgroup gives no limits. */
    cli_scope_copy_started();
    static struct cli_ctx ctx;
    ctx.argv = argv;
    int rc = cli_rerun_in_own_scope(&ctx);
    if (rc >= 0)
        return rc;
    config_init_defaults(&cfg);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_forked_sandbox_is_in_its_groups_and_the_spawner_is_not),
        cmocka_unit_test(a_shared_memory_sandbox_is_in_its_groups_and_the_spawner_is_not),
        cmocka_unit_test(a_listed_process_is_killed),
        cmocka_unit_test(a_pid_no_longer_listed_is_spared),
    };
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    jail_shutdown();
    config_free(&cfg);
    return rc;
}
