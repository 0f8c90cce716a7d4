/* The server's way of using cgroups, on cgroup v2, for the cgroup2-vm tier: several persistent
 * sandboxes at once, each in a named group beneath this process's mcp-sandbox.<pid>, usage
 * read back from each, then torn down one at a time, and at shutdown everything handed back.
 * Built static (like the front end) so that it runs in the VM's busybox initramfs, where the
 * dynamically linked server cannot. Usage: vm-sandboxes OWN_CGROUP_DIR (under /sys/fs/cgroup,
 * the cgroup this process was started alone in). Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "jail/jail.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/util.h"

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

static long long file_number(const char *path)
{
    char buf[64];
    first_line(path, buf, sizeof(buf));
    return strtoll(buf, NULL, 10);
}

/* jail_write_charged of len bytes into the sandbox's /tmp/name, as write_file does (with the
 * sandbox user's fs ids: root has no id in the sandbox's tmpfs): 0 or -errno. */
static int charged_write(struct jail *j, const char *name, const char *data, size_t len)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "tmp/%s", name);
    struct fs_ids ids = fs_ids_switch(j->host_uid, j->host_gid);
    int fd = openat(j->root_fd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = errno;
    fs_ids_restore(ids);
    if (fd < 0)
        return -e;
    bool oom = false;
    struct sbx_err err = {0};
    int r = jail_write_charged(j, fd, data, len, &oom, &err);
    close(fd);
    return r < 0 ? -err.code : 0;
}

static struct jail *start(const struct sbx_config *cfg, const struct sbx_profile *profile,
                          const char *name, char *script, int stdin_fd)
{
    char *sh_argv[] = {"/bin/sh", "-c", script, NULL};
    struct jail_spec spec = {.profile = profile,
                             .cfg = cfg,
                             .argv = sh_argv,
                             .stdin_fd = stdin_fd,
                             .stdout_fd = -1,
                             .stderr_fd = -1,
                             .name = name,
                             .persistent = true};
    struct jail *j = NULL;
    struct sbx_err err = {0};
    int r = jail_spawn(&spec, &j, &err);
    check(r == 0, "server path: persistent sandbox %s starts (%s)", name,
          r == 0 ? j->limits_backend : err.msg);
    return r == 0 ? j : NULL;
}

/* write_file's bytes, written by jail_write_charged into sandbox j (standard profile, named
 * name), are charged to its memory, and a write past its limit is refused. */
static void charged_writes(struct jail *j, const char *own, const char *name)
{
    int pid = (int)getpid();
    char group[512], path[600], got[64];
    snprintf(group, sizeof(group), "%s/mcp-sandbox.%d/%s", own, pid, name);
    size_t len = 8 << 20;
    char *data = malloc(len);
    memset(data, 'x', len); /* touched now, so that the server's own memory moves no more */
    snprintf(path, sizeof(path), "%s/memory.current", group);
    char self[600];
    snprintf(self, sizeof(self), "%s/mcp-sandbox.%d.self/memory.current", own, pid);
    long long sb0 = file_number(path), srv0 = file_number(self);
    uint64_t cpu0 = 0, cpu1 = 0;
    jail_read_cpu_ns(j, &cpu0);
    int r = charged_write(j, "charged", data, len);
    jail_read_cpu_ns(j, &cpu1);
    long long sb = file_number(path) - sb0, srv = file_number(self) - srv0;
    check(r == 0 && sb >= 7 << 20,
          "charged write: 8 MiB in the sandbox's /tmp add %lld KiB to its memory.current (r=%d)",
          sb >> 10, r);
    check(srv < 2 << 20, "charged write: and %lld KiB to the server's", srv >> 10);
    /* The idle sandbox's CPU time stays put: the writer's (some ms here) is no run's. */
    check(cpu1 - cpu0 < 1000000, "charged write: the sandbox's CPU time moves by %llu us",
          (unsigned long long)(cpu1 - cpu0) / 1000);
    free(data);
    size_t big = (size_t)300 << 20;
    char *untouched = malloc(big); /* never read: the write is refused before it starts */
    r = charged_write(j, "too-big", untouched, big);
    check(r == -ENOMEM, "charged write: 300 MiB into a 256 MiB sandbox is refused (r=%d)", r);
    free(untouched);
    /* The quota sits with the processes, not above the writer. */
    snprintf(path, sizeof(path), "%s/run/cpu.max", group);
    first_line(path, got, sizeof(got));
    check(strcmp(got, "50000 100000") == 0, "charged write: the processes' group has cpu.max (%s)",
          got);
    snprintf(path, sizeof(path), "%s/cpu.max", group);
    first_line(path, got, sizeof(got));
    check(strcmp(got, "max 100000") == 0, "charged write: the sandbox's group above has none (%s)",
          got);
    snprintf(path, sizeof(path), "%s/write/cgroup.procs", group);
    first_line(path, got, sizeof(got));
    check(exists(path) && got[0] == '\0', "charged write: the writer's group is left empty");
}

/* Output saved as it arrives, as the server saves it (jail_writer_open, output into the pipe,
 * jail_writer_launch, more output): the pipe's bytes land whole in the file, charged to the
 * sandbox, those sent before the copier was started too. what names the case. */
static void streamed_writes(struct jail *j, const char *own, const char *name, const char *what)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/%s/memory.current", own, (int)getpid(), name);
    struct fs_ids ids = fs_ids_switch(j->host_uid, j->host_gid);
    int fd = openat(j->root_fd, "tmp/streamed", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    fs_ids_restore(ids);
    struct jail_writer w;
    struct sbx_err err = {0};
    char self[600];
    snprintf(self, sizeof(self), "%s/mcp-sandbox.%d.self/memory.current", own, (int)getpid());
    long long sb0 = file_number(path), srv0 = file_number(self);
    int r = fd < 0 ? -1 : jail_writer_open(j, fd, &w, &err);
    if (fd >= 0)
        close(fd);
    static char chunk[64 << 10];
    memset(chunk, 'z', sizeof(chunk));
    size_t sent = 0, total = 6 << 20;
    /* What the pipe takes before the copier exists (1 MiB, as root). */
    while (r == 0) {
        ssize_t n = write(w.pipe_fd, chunk, sizeof(chunk));
        if (n <= 0)
            break;
        sent += (size_t)n;
    }
    size_t early = sent;
    if (r == 0 && jail_writer_launch(j, &w, &err) < 0) {
        jail_writer_end(&w, 0, &(bool){false}, &(struct sbx_err){0});
        r = -1;
    }
    check(r == 0 && early >= 512 << 10,
          "streamed write, %s: the writer starts, %zu KiB sent before (%s)", what, early >> 10,
          r == 0 ? "ok" : err.msg);
    if (r < 0)
        return;
    int waits = 0;
    /* Stopped until its pipe is full, the writer is behind at least once (it kept up with the
     * caller in one run here, which then never waited). */
    kill(w.pid, SIGSTOP);
    while (sent < total) {
        ssize_t n = write(w.pipe_fd, chunk, sizeof(chunk) - sent % sizeof(chunk));
        if (n > 0) {
            sent += (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            if (!waits)
                kill(w.pid, SIGCONT);
            struct pollfd p = {.fd = w.pipe_fd, .events = POLLOUT};
            poll(&p, 1, 1000);
            waits++;
        } else {
            break;
        }
    }
    bool oom = false;
    r = jail_writer_end(&w, 5000, &oom, &err);
    struct stat st;
    ids = fs_ids_switch(j->host_uid, j->host_gid);
    int got = fstatat(j->root_fd, "tmp/streamed", &st, 0);
    fs_ids_restore(ids);
    long long sb = file_number(path) - sb0, srv = file_number(self) - srv0;
    /* More than the pipe holds, and the writer was behind: the caller waited. */
    check(r == 0 && sent == total && got == 0 && st.st_size == (off_t)total && waits > 0,
          "streamed write, %s: 6 MiB through the pipe are in the file (%lld B, %d waits for room)",
          what, got == 0 ? (long long)st.st_size : -1LL, waits);
    /* Under the 1 MiB sent early: a copier that copied before it was placed left them here. */
    check(sb >= 5 << 20 && srv < 512 << 10,
          "streamed write, %s: %lld KiB are charged to the sandbox, %lld KiB to the server", what,
          sb >> 10, srv >> 10);
}

/* Writes what to tracefs's file name under /sys/kernel/tracing; 0 or -errno. */
static int tracing(const char *name, const char *what)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/kernel/tracing/%s", name);
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, what, strlen(what));
    int e = n < 0 ? errno : 0;
    close(fd);
    return -e;
}

/* The process moves traced since the trace was last cleared, -1 if it cannot be read. */
static int traced_moves(void)
{
    FILE *f = fopen("/sys/kernel/tracing/trace", "re");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        if (line[0] != '#' && strstr(line, "cgroup_attach_task"))
            n++;
    fclose(f);
    return n;
}

/* A writer is born in its group (clone3's CLONE_INTO_CGROUP): moving a process takes a lock
 * that waits for an RCU grace period. The kernel's cgroup_attach_task event counts moves. */
static void writers_born_in_group(struct jail *j, const char *own, const char *name)
{
    if (!exists("/sys/kernel/tracing/trace"))
        mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL);
    int r = tracing("events/cgroup/cgroup_attach_task/enable", "1");
    check(r == 0, "born in the group: tracing process moves (%s)", strerror(-r));
    if (r < 0)
        return;
    tracing("trace", "");
    int before = traced_moves();
    char data[4096];
    memset(data, 'z', sizeof(data));
    int w = 0;
    for (int i = 0; i < 10 && w == 0; i++)
        w = charged_write(j, "born", data, sizeof(data));
    int moves = traced_moves() - before;
    check(w == 0 && before == 0 && moves == 0,
          "born in the group: 10 charged writes move %d processes (w=%d)", moves, w);
    before += moves;
    /* (control) a process moved into the same group is seen moving. */
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    char path[600], v[16];
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/%s/write/cgroup.procs", own, (int)getpid(),
             name);
    snprintf(v, sizeof(v), "%d", (int)child);
    FILE *f = fopen(path, "we");
    bool moved = f && fputs(v, f) >= 0;
    moved = f && fclose(f) == 0 && moved;
    moves = traced_moves() - before;
    check(moved && moves == 1, "born in the group: (control) a process moved there shows (%d)",
          moves);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    tracing("events/cgroup/cgroup_attach_task/enable", "0");
}

/* A sandbox at its pids.max: the copier cannot be born in its group (clone3 says EAGAIN), so it
 * moves itself there before its exec, and what it copies is the sandbox's all the same. (A
 * build that moved it after its exec charged what the pipe held by then to the server.) */
static void writers_at_pids_max(struct jail *j, const char *own, const char *name)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/%s/pids.max", own, (int)getpid(), name);
    int r = tracing("events/cgroup/cgroup_attach_task/enable", "1");
    tracing("trace", "");
    FILE *f = fopen(path, "we");
    bool full = f && fputs("2", f) >= 0; /* init and its sh */
    full = f && fclose(f) == 0 && full;
    check(full, "at pids.max: the sandbox's pids.max is set to its 2 processes");
    streamed_writes(j, own, name, "at pids.max");
    int moves = r == 0 ? traced_moves() : -1;
    check(moves == 1, "at pids.max: the copier, born outside, moved itself in (%d moves)", moves);
    f = fopen(path, "we");
    if (f) {
        fputs("64", f);
        fclose(f);
    }
    tracing("events/cgroup/cgroup_attach_task/enable", "0");
}

/* A sandbox that has spent its CPU quota does not hold up a write into it. */
static void writes_past_a_spent_quota(const struct sbx_config *cfg, const char *own)
{
    struct sbx_profile tight = *config_profile(cfg, "standard");
    tight.cpu_millicpus = 10; /* 1 ms per 100 ms, the least cpu.max takes */
    struct jail *j = start(cfg, &tight, "sb-spin", "while :; do :; done", -1);
    if (!j)
        return;
    struct timespec settle = {0, 300 * 1000000};
    nanosleep(&settle, NULL);
    char data[256 << 10];
    memset(data, 'y', sizeof(data));
    int r = 0;
    uint64_t t0 = now_ms();
    for (int i = 0; i < 5 && r == 0; i++)
        r = charged_write(j, "spin", data, sizeof(data));
    uint64_t ms = now_ms() - t0;
    char path[600], stat[4096];
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/sb-spin/run/cpu.stat", own, (int)getpid());
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(stat, 1, sizeof(stat) - 1, f) : 0;
    stat[n] = '\0';
    if (f)
        fclose(f);
    const char *nt = strstr(stat, "nr_throttled ");
    long long throttled = nt ? strtoll(nt + 13, NULL, 10) : 0;
    check(throttled > 0, "spent quota: (control) the spinning sandbox is throttled (%lld times)",
          throttled);
    /* Measured: about 80 ms here; 6 s with the writer placed beside the spinner, in run. */
    check(r == 0 && ms < 750,
          "spent quota: 5 charged writes into it take %llu ms, not a quota period each (r=%d)",
          (unsigned long long)ms, r);
    jail_destroy(j);
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
        jails[i] = start(&cfg, config_profile(&cfg, "standard"), names[i], "read x; exit 0", p[0]);
        close(p[0]);
        if (!jails[i])
            continue;
        check(strcmp(jails[i]->limits_backend, "cgroup-v2") == 0,
              "server path: %s has cgroup-v2 limits", names[i]);
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)jails[i]->pid);
        first_line(path, got, sizeof(got));
        snprintf(want, sizeof(want), "0::%s/mcp-sandbox.%d/%s/run", own_rel, pid, names[i]);
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

    if (jails[0]) {
        charged_writes(jails[0], own, names[0]);
        streamed_writes(jails[0], own, names[0], "born in the group");
        writers_born_in_group(jails[0], own, names[0]);
    }
    if (jails[1])
        writers_at_pids_max(jails[1], own, names[1]);
    writes_past_a_spent_quota(&cfg, own);
    snprintf(path, sizeof(path), "%s/mcp-sandbox.%d/sb-spin", own, pid);
    check(!exists(path), "spent quota: its group, run and write are removed with it");

    /* What a server that died uncleanly left, two levels deep, is swept; a live pid's stays. */
    static const char *const stale[] = {"mcp-sandbox.999999", "sb-x", "run"};
    static const char *const live[] = {"mcp-sandbox.1", "sb-y", "run"};
    char stale_dir[600] = "", live_dir[600] = "";
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", i ? stale_dir : own, stale[i]);
        snprintf(stale_dir, sizeof(stale_dir), "%s", path);
        mkdir(stale_dir, 0755);
        snprintf(path, sizeof(path), "%s/%s", i ? live_dir : own, live[i]);
        snprintf(live_dir, sizeof(live_dir), "%s", path);
        mkdir(live_dir, 0755);
    }
    /* A process left in a dead server's run (it outlived its server) keeps that group. */
    pid_t stray = fork();
    if (stray == 0) {
        pause();
        _exit(0);
    }
    snprintf(path, sizeof(path), "%s/cgroup.procs", stale_dir);
    char stray_pid[16];
    snprintf(stray_pid, sizeof(stray_pid), "%d", (int)stray);
    FILE *f = fopen(path, "we");
    bool moved = f && fputs(stray_pid, f) >= 0;
    moved = f && fclose(f) == 0 && moved;
    int swept = jail_sweep_stale();
    check(moved && swept == 0 && exists(stale_dir),
          "sweep: a dead server's group that still holds a process stays (%d)", swept);
    kill(stray, SIGKILL);
    waitpid(stray, NULL, 0);
    swept = jail_sweep_stale();
    snprintf(path, sizeof(path), "%s/mcp-sandbox.999999", own);
    check(swept == 1 && !exists(path),
          "sweep: once empty, it goes with its subgroups, two levels deep (%d)", swept);
    check(exists(live_dir), "sweep: (control) pid 1's groups stay");
    for (int i = 2; i >= 0; i--) {
        rmdir(live_dir);
        *strrchr(live_dir, '/') = '\0';
    }

    /* One torn down while the others live: its group goes (with run and write), theirs stay. */
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
