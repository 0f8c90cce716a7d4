/* The server's way of using cgroups, on cgroup v2, for the cgroup2-vm tier: several persistent
 * sandboxes at once, each in a named group beneath this process's mcp-sandbox.<pid>, usage
 * read back from each, then torn down one at a time, and at shutdown everything handed back.
 * Built static (like the front end) so that it runs in the VM's busybox initramfs, where the
 * dynamically linked server cannot. Usage: vm-sandboxes OWN_CGROUP_DIR (under /sys/fs/cgroup,
 * the cgroup this process was started alone in). Prints TAP. */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/jail.h"
#include "lib/config.h"
#include "lib/err.h"

static int n_tests, n_failed;

static void check(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", ok ? "" : "not ", ++n_tests);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    n_failed += !ok;
}

/* The first line of path, without its newline; "" when unreadable. */
static void first_line(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(buf, (int)n, f))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OWN_CGROUP_DIR\n", argv[0]);
        return 2;
    }
    const char *own = argv[1]; /* e.g. /sys/fs/cgroup/svc */
    const char *own_rel = own + strlen("/sys/fs/cgroup");
    struct sbx_config cfg;
    config_init_defaults(&cfg);
    static const char *const names[] = {"sb-a", "sb-b", "sb-c"};
    enum { N = 3 };
    struct jail *jails[N] = {0};
    int feed[N];
    char want[512], got[512], path[600];
    int pid = (int)getpid();

    for (int i = 0; i < N; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return 1;
        feed[i] = p[1];
        char *sh_argv[] = {"/bin/sh", "-c", "read x; exit 0", NULL};
        struct jail_spec spec = {.profile = config_profile(&cfg, "standard"),
                                 .cfg = &cfg,
                                 .argv = sh_argv,
                                 .stdin_fd = p[0],
                                 .stdout_fd = -1,
                                 .stderr_fd = -1,
                                 .name = names[i],
                                 .persistent = true};
        struct sbx_err err = {0};
        int r = jail_spawn(&spec, &jails[i], &err);
        close(p[0]);
        check(r == 0, "server path: persistent sandbox %s starts (%s)", names[i],
              r == 0 ? jails[i]->limits_backend : err.msg);
        if (r < 0)
            continue;
        check(strcmp(jails[i]->limits_backend, "cgroup-v2") == 0,
              "server path: %s has cgroup-v2 limits", names[i]);
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)jails[i]->pid);
        first_line(path, got, sizeof(got));
        snprintf(want, sizeof(want), "0::%s/mcp-sandbox.%d/%s", own_rel, pid, names[i]);
        check(strcmp(got, want) == 0, "server path: %s's init is in %s (got %s)", names[i], want,
              got);
    }

    first_line("/proc/self/cgroup", got, sizeof(got));
    snprintf(want, sizeof(want), "0::%s/mcp-sandbox.%d.self", own_rel, pid);
    check(strcmp(got, want) == 0, "server path: the server itself is in its leaf %s (got %s)", want,
          got);
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/cgroup.subtree_control", own, pid);
    first_line(path, got, sizeof(got));
    check(strstr(got, "memory") && strstr(got, "pids") && strstr(got, "cpu"),
          "server path: the per-server group hands memory, pids and cpu down (%s)", got);
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/%s/pids.max", own, pid, names[1]);
    first_line(path, got, sizeof(got));
    check(strcmp(got, "64") == 0, "server path: the standard profile's pids.max (%s)", got);

    for (int i = 0; i < N; i++) {
        if (!jails[i])
            continue;
        struct jail_usage u;
        int r = jail_read_usage(jails[i], &u);
        check(r == 0 && u.pids_current == 2 && u.memory_current_bytes > 0 && u.cpu_ns > 0,
              "server path: %s's usage reads back (pids %u, memory %llu B, cpu %llu ns)", names[i],
              u.pids_current, (unsigned long long)u.memory_current_bytes,
              (unsigned long long)u.cpu_ns);
    }

    /* One torn down while the others live: its group goes, theirs stay. */
    if (jails[0]) {
        jail_destroy(jails[0]);
        jails[0] = NULL;
        close(feed[0]);
        snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/%s", own, pid, names[0]);
        check(!exists(path), "server path: a destroyed sandbox's group is removed");
        snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/%s", own, pid, names[1]);
        check(exists(path), "server path: (control) the other sandboxes' groups stay");
    }
    for (int i = 1; i < N; i++) {
        if (jails[i])
            jail_destroy(jails[i]);
        close(feed[i]);
    }
    jail_shutdown();

    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d", own, pid);
    check(!exists(path), "server path: at shutdown the per-server group is removed");
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d.self", own, pid);
    check(!exists(path), "server path: at shutdown the leaf is removed");
    first_line("/proc/self/cgroup", got, sizeof(got));
    snprintf(want, sizeof(want), "0::%s", own_rel);
    check(strcmp(got, want) == 0, "server path: the server is back in its own cgroup (%s)", got);
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", own);
    first_line(path, got, sizeof(got));
    check(got[0] == '\0', "server path: its own cgroup's controllers are handed back ('%s')", got);
    config_free(&cfg);
    return n_failed ? 1 : 0;
}
