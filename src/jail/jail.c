/* Orchestration: prepare everything in the parent (seccomp program, cgroup, environment,
 * identity files), clone into fresh namespaces, map ids, attach the cgroup, then let the child
 * build its root, drop every privilege and exec. Fails closed: a missing layer refuses the
 * sandbox unless isolation.allow_degraded is set, and then the result says what is missing. */
#include "jail.h"

#include "cgroup.h"
#include "features.h"
#include "host_uid.h"
#include "jail_internal.h"
#include "landlock.h"
#include "rlimit.h"
#include "seccomp.h"
#include "util.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define NS_FLAGS                                                                                   \
    (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)

static const char *const step_names[] = {
    [STEP_SYNC] = "synchronising with the server",
    [STEP_CGROUP_NS] = "cgroup namespace",
    [STEP_HOSTNAME] = "uts namespace (hostname)",
    [STEP_LOOPBACK] = "network namespace (loopback)",
    [STEP_PROXY_SOCKET] = "network namespace (the egress proxy's socket)",
    [STEP_MOUNTS] = "mount namespace (building the root)",
    [STEP_PIVOT] = "mount namespace (pivot_root)",
    [STEP_IDS] = "switching to the sandbox uid",
    [STEP_CAPS] = "dropping capabilities",
    [STEP_NO_NEW_PRIVS] = "no_new_privs",
    [STEP_RLIMITS] = "rlimits",
    [STEP_LANDLOCK] = "Landlock",
    [STEP_SECCOMP] = "seccomp",
    [STEP_COMMAND] = "receiving the command",
    [STEP_FORK] = "starting the workload",
    [STEP_FDS] = "handing in file descriptors",
    [STEP_EXEC] = "exec",
};

const char *const jail_base_env[] = {
    "PATH=/usr/local/bin:/usr/bin:/bin",
    "HOME=/workspace",
    "LANG=C.UTF-8",
    "MPLBACKEND=Agg",
    "USER=sandbox",
    "TMPDIR=/tmp",
    "PYTHONDONTWRITEBYTECODE=1",
    NULL,
};

/* A user namespace made by an unprivileged writer (`unshare -r`, say) denies setgroups, and
 * every namespace made inside it inherits the denial. */
static bool own_setgroups_denied(void)
{
    static int cached = -1;
    if (cached < 0) {
        char *s = NULL;
        cached =
            read_file_max("/proc/self/setgroups", 64, &s, NULL) == 0 && strncmp(s, "deny", 4) == 0;
        free(s);
    }
    return cached;
}

static int cap_last_cap(void)
{
    static int cached = -1;
    if (cached < 0) {
        char *s = NULL;
        cached = 40;
        if (read_file_max("/proc/sys/kernel/cap_last_cap", 64, &s, NULL) == 0)
            cached = atoi(s);
        free(s);
    }
    return cached;
}

void jail_child_fail(const struct jail_child_plan *plan, enum jail_step step, int err)
{
    struct jail_child_report e = {.step = step, .err = err};
    ssize_t w = write(plan->err_fd, &e, sizeof(e));
    (void)w;
    _exit(127);
}

static int loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    int r = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        r = -errno;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (r == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        r = -errno;
    close(s);
    return r;
}

/* The egress proxy's listener lives in this network namespace, so that 127.0.0.1 inside
 * reaches the server and nothing else; the server keeps the only reference to it. */
static int send_proxy_listener(const struct jail_child_plan *plan)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(plan->proxy_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int r = 0;
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 64) < 0)
        r = -errno;
    if (r == 0)
        r = jail_send_fd(plan->status_fd, 'P', s);
    close(s);
    return r;
}

static void child_main(const struct jail_child_plan *plan)
{
    char c;
    enum jail_step step = STEP_SYNC;
    /* The server's other fds (other sandboxes' pipes among them) must not reach this one, and
     * a sparse table keeps the fd numbers we dup below under the sandbox's RLIMIT_NOFILE. */
    int keep[3 + 16 + 3];
    size_t nkeep = 0;
    for (int i = 0; i < 3; i++)
        keep[nkeep++] = plan->stdio[i];
    for (size_t i = 0; i < plan->n_pass_fds && i < 16; i++)
        keep[nkeep++] = plan->pass_fds[i];
    keep[nkeep++] = plan->sync_fd;
    keep[nkeep++] = plan->err_fd;
    keep[nkeep++] = plan->status_fd;
    jail_keep_only_fds(keep, nkeep);
    /* Hostname and loopback need only the capabilities clone gave us in the new user
     * namespace, not the id map: do them while the server writes the map. */
    if (sethostname("sandbox", 7) < 0)
        jail_child_fail(plan, STEP_HOSTNAME, errno);
    int r = plan->netns_ready ? 0 : loopback_up();
    if (r < 0)
        jail_child_fail(plan, STEP_LOOPBACK, -r);
    if (plan->proxy_port) {
        r = send_proxy_listener(plan);
        if (r < 0)
            jail_child_fail(plan, STEP_PROXY_SOCKET, -r);
    }
    /* First byte: the id maps are written. */
    if (read(plan->sync_fd, &c, 1) != 1)
        _exit(127); /* the server went away before we were set up */
    /* Become the sandbox uid at once: new inodes (the generated /etc, mount points) need a
     * mapped fsuid, and host root is deliberately unmapped. Capabilities in the new user
     * namespace survive, because uid 0 was never mapped there; they are dropped below. */
    /* Raw syscalls, not libc's: in a process that has ever had a second thread, libc would
     * try to apply the change to that process's other threads too, from a copy of its thread
     * list, under a lock another thread may have held when we were cloned. Where setgroups is
     * denied it is not tried: a child sharing a spawner's memory shares its errno too, which
     * the spawner may be writing as it moves us into our cgroup, so no decision here may rest
     * on errno's value (it once read 0 where setgroups had said EPERM, and refused). */
    if (!plan->setgroups_denied && syscall(SYS_setgroups, 0, NULL) < 0)
        jail_child_fail(plan, STEP_IDS, errno);
    if (syscall(SYS_setresgid, plan->gid, plan->gid, plan->gid) < 0 ||
        syscall(SYS_setresuid, plan->uid, plan->uid, plan->uid) < 0)
        jail_child_fail(plan, STEP_IDS, errno);
    r = jail_setup_rootfs(plan, &step);
    if (r < 0)
        jail_child_fail(plan, step, -r);
    /* Second byte: we are in our cgroup. On v1 we were born there; on v2 the server moves us
     * while we build the root. Nothing of the sandbox's has run yet, and nothing runs before
     * this point but this code. */
    if (read(plan->sync_fd, &c, 1) != 1)
        _exit(127);
    close(plan->sync_fd);
    /* Unshared only now, after the server moved us into our cgroup, so the sandbox sees its
     * own cgroup as the root of the hierarchy. */
    if (unshare(CLONE_NEWCGROUP) < 0)
        jail_child_fail(plan, STEP_CGROUP_NS, errno);
    /* No controlling terminal, so TIOCSTI has nothing to reach. */
    if (setsid() < 0)
        jail_child_fail(plan, STEP_IDS, errno);
    r = jail_drop_caps(plan->cap_last);
    if (r < 0)
        jail_child_fail(plan, STEP_CAPS, -r);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        jail_child_fail(plan, STEP_NO_NEW_PRIVS, errno);
    r = rlimits_apply(plan->profile, plan->cgroup_active);
    if (r < 0)
        jail_child_fail(plan, STEP_RLIMITS, -r);
    jail_open_oom_adj(); /* before Landlock, which closes /proc to writes */
    if (plan->want_landlock) {
        r = landlock_restrict_sandbox();
        if (r < 0)
            jail_child_fail(plan, STEP_LANDLOCK, -r);
    }
    if (plan->seccomp) {
        r = seccomp_program_install(plan->seccomp);
        if (r < 0)
            jail_child_fail(plan, STEP_SECCOMP, -r);
    }
    jail_run_init(plan);
}

static int child_entry(void *plan)
{
    child_main(plan);
    return 127;
}

/* Init's stack when it shares the caller's memory: its setup runs the same code as a forked
 * child, with page-sized buffers at most, so 1 MiB (reserved, touched as used) is ample. A
 * guard page below catches an overflow. */
#define INIT_STACK_LEN (1024 * 1024)

static pid_t clone_sandbox(struct jail_child_plan *plan, void *shared_stack, int *pidfd)
{
    int ns = NS_FLAGS & ~(plan->netns_ready ? CLONE_NEWNET : 0);
    if (shared_stack)
        return clone(child_entry, (char *)shared_stack + INIT_STACK_LEN,
                     ns | CLONE_VM | CLONE_PIDFD | SIGCHLD, plan, pidfd);
    struct clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = (uint64_t)ns | CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)pidfd;
    args.exit_signal = SIGCHLD;
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
    if (pid >= 0 || errno != ENOSYS)
        return pid;
    /* Kernels before 5.3: clone() stores the pidfd through its parent_tid argument. */
    return (pid_t)syscall(SYS_clone, ns | CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL, 0);
}

/* A user namespace charges what its processes hold (pending signals, inotify instances, message
 * queue bytes, processes) to its creator's effective uid in the parent namespace as well, up to
 * that user's limits there: made by root, one sandbox could take root's RLIMIT_SIGPENDING and
 * inotify instances for the whole host (seen: 96364 signals queued inside, and root's sigqueue
 * answered EAGAIN). So root makes it as the unprivileged host uid the sandbox maps to, its own
 * (host_uid.h), so that sandboxes do not share those limits either. Only
 * this thread's effective uid changes (raw calls, which succeed: root keeps its real and saved
 * uid), only for the clone; the id maps and the cgroup come after, as root again. Once a child
 * exists nothing here writes errno, which a shared-memory init shares. Where an unprivileged
 * user cannot make a working user namespace (a sysctl, Ubuntu's AppArmor restriction), root
 * makes it, as before; doctor's "userns owner" row says so. */
static pid_t clone_sandbox_owned(struct jail_child_plan *plan, void *shared_stack, int *pidfd,
                                 uid_t owner)
{
    bool as_owner = geteuid() == 0 && owner != 0 && !features_userns_owner_capless() &&
                    syscall(SYS_setresuid, -1, owner, -1) == 0;
    pid_t pid = clone_sandbox(plan, shared_stack, pidfd);
    if (!as_owner || pid == 0)
        return pid;
    int e = errno;
    syscall(SYS_setresuid, -1, 0, -1);
    if (pid > 0)
        return pid;
    /* Refused to the unprivileged uid (unprivileged_userns_clone=0, max_user_namespaces=0, an
     * LSM): root makes it, as doctor's row says. */
    if (e == EPERM || e == EACCES || e == ENOSPC || e == EUSERS)
        return clone_sandbox(plan, shared_stack, pidfd);
    errno = e;
    return pid;
}

static int write_id_maps(pid_t pid, uid_t inside, uid_t host_uid, gid_t host_gid, bool rootless)
{
    char path[64], line[64];
    if (rootless) {
        /* An unprivileged writer must deny setgroups before it may write gid_map. */
        snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
        int r = write_file_str(path, "deny");
        if (r < 0 && r != -ENOENT)
            return r;
    }
    snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
    snprintf(line, sizeof(line), "%u %u 1\n", inside, host_gid);
    int r = write_file_str(path, line);
    if (r < 0)
        return r;
    snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
    snprintf(line, sizeof(line), "%u %u 1\n", inside, host_uid);
    return write_file_str(path, line);
}

static void add_degraded(struct jail *j, const char *layer)
{
    size_t len = strlen(j->degraded);
    snprintf(j->degraded + len, sizeof(j->degraded) - len, "%s%s", len ? "," : "", layer);
}

/* Signals this process ignores: SIG_IGN survives exec, so the workload must get them back at
 * SIG_DFL. The kernel's summary (SigIgn in /proc/self/status) is one read; asking signal by
 * signal took 64 rt_sigaction calls on every spawn, and could not see signals 32 and 33, which
 * glibc keeps for itself but a parent may well have ignored. Bit sig-1 stands for signal sig. */
static uint64_t ignored_signals(void)
{
    uint64_t mask = 0;
    char *status = NULL;
    const char *line = NULL;
    if (read_file_max("/proc/self/status", 1 << 16, &status, NULL) == 0)
        line = strstr(status, "\nSigIgn:\t");
    if (line) {
        mask = strtoull(line + 9, NULL, 16);
    } else {
        for (int sig = 1; sig < NSIG && sig <= 64; sig++) {
            struct sigaction sa;
            if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
                mask |= 1ull << (sig - 1);
        }
    }
    free(status);
    return mask;
}

/* Fails (-E2BIG) only when extra_env does not fit the plan's fixed environment space. */
static int build_plan(const struct jail_spec *spec, struct jail_child_plan *plan)
{
    const struct sbx_profile *p = spec->profile;
    uint32_t uid = spec->cfg->sandbox_uid;
    memset(plan, 0, sizeof(*plan));
    plan->profile = p;
    plan->uid = uid;
    plan->gid = uid;
    plan->argv = spec->argv;
    plan->stdio[0] = spec->stdin_fd;
    plan->stdio[1] = spec->stdout_fd;
    plan->stdio[2] = spec->stderr_fd;
    plan->pass_fds = spec->pass_fds;
    plan->n_pass_fds = spec->n_pass_fds;
    plan->persistent = spec->persistent;
    plan->deferred = spec->deferred;
    plan->setgroups_denied = geteuid() != 0 || own_setgroups_denied();
    plan->proxy_port = spec->persistent ? spec->proxy_port : 0;
    plan->cap_last = cap_last_cap();
    plan->ignored = ignored_signals();
    snprintf(plan->workspace_opts, sizeof(plan->workspace_opts),
             "mode=0700,uid=%u,gid=%u,size=%llu,nr_inodes=%llu", uid, uid,
             (unsigned long long)p->workspace_bytes, (unsigned long long)p->workspace_inodes);
    snprintf(plan->tmp_opts, sizeof(plan->tmp_opts), "mode=1777,size=%llu,nr_inodes=%llu",
             (unsigned long long)p->tmp_bytes, (unsigned long long)p->workspace_inodes);
    snprintf(plan->shm_opts, sizeof(plan->shm_opts), "mode=1777,size=%llu,nr_inodes=1024",
             (unsigned long long)(p->tmp_bytes / 2));
    snprintf(plan->passwd, sizeof(plan->passwd),
             "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
             "sandbox:x:%u:%u:sandbox:/workspace:/bin/bash\n",
             uid, uid);
    snprintf(plan->group, sizeof(plan->group), "root:x:0:\nsandbox:x:%u:\n", uid);

    /* The environment is rebuilt from nothing: no host variable leaks in. */
    size_t n = 0, off = 0;
    for (size_t i = 0; jail_base_env[i]; i++)
        plan->envp[n++] = (char *)jail_base_env[i];
    for (size_t i = 0; spec->extra_env && spec->extra_env[i]; i++) {
        size_t len = strlen(spec->extra_env[i]) + 1;
        if (off + len > sizeof(plan->env_store) || n + 1 >= ARRAY_SIZE(plan->envp))
            return -E2BIG;
        memcpy(plan->env_store + off, spec->extra_env[i], len);
        plan->envp[n++] = plan->env_store + off;
        off += len;
    }
    plan->envp[n] = NULL;
    return 0;
}

static int fail_layer(struct sbx_err *err, const char *layer, const char *hint)
{
    return sbx_fail(
        err, ENOTSUP,
        "sandbox refused: %s is not available (%s); set isolation.allow_degraded = true "
        "to run without it",
        layer, hint);
}

/* The child sends the proxy's listener ('P') during setup, and init the sandbox's root
 * directory ('F') once the workload is started, before its exec report: both are there when
 * the report is, and taking them does not wait. */
static int receive_fd(int sock, char tag)
{
    char byte;
    int fd = -1;
    size_t nfds;
    bool truncated;
    ssize_t n = recv_with_fds(sock, &byte, 1, 0, &fd, 1, &nfds, &truncated);
    if (n < 0)
        return -errno;
    if (n != 1 || byte != tag || nfds != 1 || truncated) {
        if (fd >= 0)
            close(fd); /* not the one expected: no fd is kept by mistake */
        return -EPROTO;
    }
    return fd;
}

/* Everything a spawn carries from its preparation to its launch. */
struct spawn_state {
    const struct jail_spec *spec;
    struct jail *j;
    struct jail_child_plan plan; /* the child reads it until the command's exec */
    void *shared_stack;          /* NULL: init is a copy of this process */
    int sync_pipe[2], err_pipe[2], status_pipe[2];
};

/* Before the clone: the plan, the layers the profile needs, the cgroup and the pipes. */
/* Programs reopen their stdio by name (`> /dev/stdout`, `tee /dev/stderr`), and the kernel
 * reopens a pipe only for its owner: host root, unmapped inside, when the server is root. The
 * pipes become the sandbox user's. Anonymous pipes only, never a caller's file or terminal; a
 * rootless caller's pipes are its own uid's, which is mapped already. */
static int give_stdio_pipes(const int stdio[3], uid_t host_uid)
{
    if (geteuid() != 0)
        return 0;
    for (int i = 0; i < 3; i++) {
        struct statfs fs;
        if (stdio[i] >= 0 && fstatfs(stdio[i], &fs) == 0 && fs.f_type == PIPEFS_MAGIC &&
            fchown(stdio[i], host_uid, host_uid) < 0)
            return -errno;
    }
    return 0;
}

/* Whether init's copy of argv (see jail_run_init) can hold it. */
static bool argv_fits_init(char *const *argv)
{
    size_t n = 0, bytes = 0;
    for (; argv[n]; n++)
        bytes += strlen(argv[n]) + 1;
    return n < INIT_ARGV_MAX && bytes <= INIT_ARGV_BYTES;
}

static int prepare_locked(struct spawn_state *st, struct sbx_err *err)
{
    const struct jail_spec *spec = st->spec;
    bool degraded_ok = spec->cfg->allow_degraded;
    struct jail *j = st->j;
    struct jail_child_plan *plan = &st->plan;
    struct sbx_err sub = {0};

    if (spec->deferred && (spec->persistent || spec->share_memory))
        return sbx_fail(err, EINVAL, "a deferred sandbox is one-shot and has its own memory");
    if (build_plan(spec, plan) < 0)
        return sbx_fail(err, E2BIG, "the sandbox's environment does not fit (%zu bytes at most)",
                        sizeof(plan->env_store));
    if (spec->persistent && !argv_fits_init(spec->argv))
        return sbx_fail(err, E2BIG,
                        "the command line does not fit a persistent sandbox (%d arguments and "
                        "%d bytes at most)",
                        INIT_ARGV_MAX - 1, INIT_ARGV_BYTES);

    if (seccomp_filter_available(&sub) == 0) {
        plan->seccomp = seccomp_program();
    } else {
        if (!degraded_ok)
            return fail_layer(err, "seccomp", sub.msg);
        add_degraded(j, "seccomp");
    }

    plan->want_landlock = landlock_abi_version() > 0;
    if (!plan->want_landlock) {
        if (!degraded_ok)
            return fail_layer(err, "Landlock",
                              "boot Linux 5.13+ with landlock in lsm=..., not inside a sandbox "
                              "that blocks landlock_create_ruleset");
        add_degraded(j, "landlock");
    }

    enum cgroup_backend_kind backend = cgroup_backend(NULL);
    if (backend != CGROUP_BACKEND_NONE) {
        struct cgroup_limits lim = {
            .memory_bytes = spec->profile->memory_bytes,
            .cpu_millicpus = spec->profile->cpu_millicpus,
            .pids = spec->profile->pids,
            .writer = spec->persistent, /* write_file: jail_write_charged */
        };
        if (cgroup_create(spec->name, &lim, &j->cg, err) < 0)
            return sbx_err_wrap(err, "cgroup limits");
        j->limits_backend = backend == CGROUP_BACKEND_V2 ? "cgroup-v2" : "cgroup-v1";
    } else {
        /* Rootless without a delegated cgroup: rlimits carry the limits; reported, not hidden. */
        j->limits_backend = "rlimit";
    }
    plan->cgroup_active = j->cg != NULL;
    char why[400];
    if (rlimits_check(spec->profile, plan->cgroup_active, why, sizeof(why)) < 0)
        return sbx_fail(err, EPERM, "sandbox refused: %s", why);
    if (geteuid() != 0) {
        j->host_uid = geteuid();
        j->host_gid = getegid();
    } else {
        struct host_uid_claim claim;
        if (host_uid_claim(spec->cfg->host_uid, spec->cfg->host_uid_count, &claim, err) < 0)
            return -1;
        j->host_uid = j->host_gid = claim.uid;
        j->host_uid_lock_fd = claim.lock_fd;
    }
    int r = give_stdio_pipes(plan->stdio, j->host_uid);
    if (r < 0)
        return sbx_fail_errno(err, -r, "handing the sandbox its stdout and stderr pipes");

    if (pipe2(st->sync_pipe, O_CLOEXEC) < 0 || pipe2(st->err_pipe, O_CLOEXEC) < 0 ||
        (spec->persistent || spec->deferred
             ? socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, st->status_pipe)
             : pipe2(st->status_pipe, O_CLOEXEC)) < 0)
        return sbx_fail_errno(err, errno, "pipe");
    plan->sync_fd = st->sync_pipe[0];
    plan->err_fd = st->err_pipe[1];
    plan->status_fd = st->status_pipe[1];
    return 0;
}

/* Spawns may begin on two threads at once (the server's loop and its spawner): the probes'
 * caches and the server's own cgroups are made on first use, here. */
static int spawn_prepare(struct spawn_state *st, struct sbx_err *err)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    int rc = prepare_locked(st, err);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The clone, the id maps and the cgroup move: the child is then on its way to the exec. */
static int spawn_launch(struct spawn_state *st, struct sbx_err *err)
{
    const struct jail_spec *spec = st->spec;
    const struct sbx_config *cfg = spec->cfg;
    struct jail *j = st->j;

    uint64_t t0 = now_ns();
    /* On cgroup v1 the clone is born in its group: this thread steps in for the clone and
     * out again. Otherwise (v2) the child is moved once it exists. */
    bool born_inside = j->cg && cgroup_enter_thread(j->cg, false) == 0;
    j->pid = clone_sandbox_owned(&st->plan, st->shared_stack, &j->pidfd, j->host_uid);
    if (j->pid == 0)
        child_main(&st->plan); /* never returns; a shared-memory child starts in child_entry */
    int e = errno;
    /* From here until init reports, a shared-memory init has this thread's errno for its own:
     * nothing here may write errno but a call that fails (and then the sandbox is refused). */
    /* Left inside, this thread would count against the sandbox's pids and keep its group
     * from being removed. */
    int left = born_inside ? cgroup_leave_thread(j->cg, false) : 0;
    if (left < 0)
        return sbx_fail_errno(err, -left, "leaving the sandbox's cgroup after the clone");
    if (j->pid < 0) {
        if (e == EPERM || e == EINVAL || e == ENOSPC || e == EUSERS)
            return sbx_fail_errno(
                err, e,
                "sandbox refused: cannot create user/pid/mount/net/ipc/uts namespaces "
                "(enable user namespaces: sysctl kernel.unprivileged_userns_clone=1 "
                "and user.max_user_namespaces > 0; Ubuntu, rootless: "
                "kernel.apparmor_restrict_unprivileged_userns=0)");
        return sbx_fail_errno(err, e, "clone");
    }

    /* The child's ends: closing ours lets EOF mean that the child died. */
    cleanup_closep(&st->sync_pipe[0]);
    cleanup_closep(&st->err_pipe[1]);
    cleanup_closep(&st->status_pipe[1]);

    int r = write_id_maps(j->pid, cfg->sandbox_uid, j->host_uid, j->host_gid, geteuid() != 0);
    if (r < 0)
        return sbx_fail_errno(err, -r, "user namespace: writing the uid/gid map");
    if (write(st->sync_pipe[1], "m", 1) != 1)
        return sbx_fail_errno(err, errno, "starting the sandbox");
    if (j->cg && !born_inside && cgroup_attach(j->cg, j->pid, err) < 0)
        return sbx_err_wrap(err, "cgroup limits");
    if (write(st->sync_pipe[1], "c", 1) != 1)
        return sbx_fail_errno(err, errno, "starting the sandbox");

    j->status_fd = steal_fd(&st->status_pipe[0]);
    j->setup_fd = steal_fd(&st->err_pipe[0]);
    j->setup_t0 = t0;
    return 0;
}

/* The child's report on the error pipe: init's STEP_EXECED record, or the step that failed.
 * EOF alone (init gone before it could report) counts as an exec, as it always has: what
 * became of the sandbox then shows in its status. A deferred sandbox reports twice: STEP_ARMED
 * when its setup has ended (the pipe stays open), then its command's exec; there EOF is a
 * failure, since no command of the caller's ran. */
static int await_exec(struct jail *j, struct sbx_err *err)
{
    struct jail_child_report ce;
    ssize_t n;
    do
        n = read(j->setup_fd, &ce, sizeof(ce));
    while (n < 0 && errno == EINTR);
    uint64_t seen = now_ns();
    bool arming = j->deferred && !j->armed;
    bool ok = n == (ssize_t)sizeof(ce) && ce.step == (arming ? STEP_ARMED : STEP_EXECED);
    if (!ok || !arming)
        cleanup_closep(&j->setup_fd);
    /* The setup ends at the exec itself (or the arming), as init saw it; seeing it here comes a
     * wake-up later (0.3 ms and more on this kind of machine, much more under load). */
    uint64_t t0 = j->command_sent ? j->command_t0 : j->setup_t0;
    uint64_t took = (ok && ce.at_ns > t0 && ce.at_ns <= seen ? ce.at_ns : seen) - t0;
    *(j->command_sent ? &j->command_ns : &j->setup_ns) = took;
    if (ok) {
        j->armed = j->armed || arming;
        return 0;
    }
    if (n == (ssize_t)sizeof(ce)) {
        const char *what =
            (ce.step > 0 && (size_t)ce.step < ARRAY_SIZE(step_names) && step_names[ce.step])
                ? step_names[ce.step]
                : "setup";
        if (ce.step == STEP_EXEC)
            return sbx_fail_errno(err, ce.err, "cannot run %s", j->command);
        /* A kernel layer that is there but refuses its use (a container's masked /proc makes
         * the kernel refuse a new proc): doctor probes the same steps and says what to do. A
         * resource running out (fds, memory, pids) is no missing layer, and doctor would say
         * all is well. */
        bool exhausted = ce.err == EMFILE || ce.err == ENFILE || ce.err == ENOMEM ||
                         ce.err == EAGAIN || ce.err == ENOSPC;
        return sbx_fail(err, ce.err, "sandbox refused: %s failed: %s%s", what, strerror(ce.err),
                        exhausted ? ""
                                  : "; `mcp-sandbox doctor` says what this machine lacks and "
                                    "how to enable it");
    }
    if (n != 0)
        return sbx_fail(err, EPROTO, "sandbox setup ended without a report");
    if (j->deferred)
        return sbx_fail(err, EPIPE, "the sandbox ended before %s",
                        arming ? "its setup did" : "its command started");
    return 0;
}

/* After the exec: the fds a persistent sandbox hands back. */
static int spawn_finish(struct jail *j, struct sbx_err *err)
{
    if (j->expect_proxy) {
        j->proxy_fd = receive_fd(j->status_fd, 'P');
        if (j->proxy_fd < 0)
            return sbx_fail_errno(err, -j->proxy_fd, "sandbox setup: receiving the proxy's socket");
    }
    if (j->persistent) {
        /* Init is never the OOM killer's pick, where we may say so (CAP_SYS_RESOURCE): with the
         * sandbox's memory full of its tmpfs files and its interpreter gone, init would be the
         * last process to take, and the files would go with it. Init has raised its score for
         * its workload and set it back by now. */
        if (j->cg) {
            char adj[48];
            snprintf(adj, sizeof(adj), "/proc/%d/oom_score_adj", (int)j->pid);
            write_file_str(adj, "-1000");
        }
        j->root_fd = receive_fd(j->status_fd, 'F');
        if (j->root_fd < 0)
            return sbx_fail_errno(err, -j->root_fd, "sandbox setup: receiving its root directory");
        fcntl(j->status_fd, F_SETFL, O_NONBLOCK);
        j->workload_running = true;
    }
    return 0;
}

/* A one-shot caller's sandbox: init shares the caller's memory instead of a copy of it. On a
 * paravirtualized host a new address space is the dearest part of a spawn (measured here: a
 * fork into every namespace took 1.7 ms from clone until reaped, a CLONE_VM clone 0.6 ms).
 * Init then also shares the thread-local storage (errno) of the thread that clones it, so a
 * thread of its own, the spawner, does the launch and then nothing more: it parks, with every
 * signal blocked, until jail_destroy has reaped init, and then unmaps init's stack. The child
 * code allocates nothing and changes ids by raw syscalls, so no libc state is shared beyond
 * errno. The spawner starts first, but on this 2-CPU guest its work does not overlap the
 * preparation: the new thread lands on its creator's CPU and runs once the creator blocks
 * (0.4-0.55 ms after pthread_create). Started earlier and pinned to the other CPU, it made the
 * whole run slower (1.19x bare python against 1.16x, 100 interleaved rounds). */
struct jail_spawner {
    int to_spawner;   /* write end: a byte starts the launch, EOF ends the spawner */
    int from_spawner; /* read end: a byte when the launch is done */
};

struct spawner_start {
    struct spawn_state *st;
    struct sbx_err *err;
    int rc;
    int to_spawner, from_spawner; /* the spawner's ends */
    void *stack_map;
    size_t stack_map_len;
};

/* The sandbox's network namespace, made by the spawner before the clone: a new network
 * namespace is the dearest one to clone (measured here: a fork into user+net took 0.43 ms more
 * than into user alone), and bringing loopback up in the child took 0.17 ms more. The clone
 * then passes on the spawner's namespace instead of making one.
 *
 * It must not belong to the host's user namespace: the kernel broadcasts device events
 * (uevents) into every network namespace that the initial user namespace owns, and the sandbox
 * could listen. A short-lived helper makes it together with a user namespace of its own, which
 * owns it and nothing else; the spawner, as that namespace's creator in the parent, may enter
 * the network namespace, while the sandbox (in a sibling user namespace, without capabilities)
 * holds none over it. Only a privileged caller can enter it; otherwise the clone makes the
 * namespace, owned by the sandbox's user namespace. */
struct netns_helper {
    int fd;  /* the helper's network namespace, opened into the shared fd table */
    int err; /* or why not */
};

static int netns_helper_main(void *arg)
{
    struct netns_helper *h = arg;
    int r = loopback_up();
    if (r == 0 && (h->fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        r = -errno;
    h->err = -r;
    return 0;
}

static bool spawner_make_netns(void)
{
    if (geteuid() != 0)
        return false;
    /* The helper runs on this stack until it exits (CLONE_VFORK), sharing memory and fds. */
    char stack[16 * 1024] __attribute__((aligned(16)));
    struct netns_helper h = {.fd = -1, .err = 0};
    pid_t pid =
        clone(netns_helper_main, stack + sizeof(stack),
              CLONE_NEWUSER | CLONE_NEWNET | CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, &h);
    if (pid < 0)
        return false;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    bool entered = h.fd >= 0 && h.err == 0 && setns(h.fd, CLONE_NEWNET) == 0;
    if (h.fd >= 0)
        close(h.fd);
    return entered;
}

static void *spawner_main(void *arg)
{
    struct spawner_start *start = arg;
    int in = start->to_spawner, out = start->from_spawner;
    void *stack_map = start->stack_map;
    size_t stack_map_len = start->stack_map_len;
    bool netns_ready = spawner_make_netns();
    char byte;
    if (read(in, &byte, 1) == 1) {
        /* The plan is complete once the launch byte came: set only now. */
        start->st->plan.netns_ready = netns_ready;
        start->rc = spawn_launch(start->st, start->err);
        if (start->rc == 0)
            start->rc = await_exec(start->st->j, start->err);
        /* start lives on the caller's stack: not touched after this. */
        ssize_t w = write(out, "d", 1);
        (void)w;
        while (read(in, &byte, 1) > 0)
            ;
    }
    /* Init is reaped (or was never cloned): its stack is free. */
    munmap(stack_map, stack_map_len);
    close(in);
    close(out);
    return NULL;
}

static void spawner_release(struct jail_spawner *s)
{
    if (!s)
        return;
    if (s->to_spawner >= 0)
        close(s->to_spawner);
    close(s->from_spawner);
    free(s);
}

/* Init will wipe the environment the caller started with, in the caller's own memory: the
 * caller goes on with a copy (once per process; later spawns wipe the same, already empty,
 * strings). */
static char **environment_to_wipe(void)
{
    static char **original;
    if (!original) {
        extern char **environ;
        size_t n = 0;
        while (environ && environ[n])
            n++;
        char **copy = xcalloc(n + 1, sizeof(*copy));
        for (size_t i = 0; i < n; i++)
            copy[i] = xstrdup(environ[i]);
        original = environ;
        environ = copy;
    }
    return original;
}

static int spawn_sharing_memory(struct spawn_state *st, struct sbx_err *err)
{
    /* The spawner's network-namespace helper is a process of our cgroup while it lives: on v2
     * this process must have stepped into its leaf before, or its cgroup would hold two
     * processes just when the probe looks (no limits then) or the step aside writes (EBUSY). */
    if (cgroup_step_aside(err) < 0)
        return sbx_err_wrap(err, "cgroup limits");
    size_t guard = (size_t)getpagesize(), map_len = INIT_STACK_LEN + guard;
    char *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (map == MAP_FAILED)
        return sbx_fail_errno(err, errno, "mapping the sandbox init's stack");
    mprotect(map, guard, PROT_NONE);
    int to[2] = {-1, -1}, from[2] = {-1, -1};
    int e = 0;
    const char *what = "pipe";
    if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0) {
        e = errno;
        goto fail;
    }
    st->shared_stack = map + guard;
    struct spawner_start start = {.st = st,
                                  .err = err,
                                  .rc = -1,
                                  .to_spawner = to[0],
                                  .from_spawner = from[1],
                                  .stack_map = map,
                                  .stack_map_len = map_len};
    /* Every signal blocked in the spawner, and so in init: no EINTR reaches their errno. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t thread;
    e = pthread_create(&thread, &attr, spawner_main, &start);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        what = "starting the spawner thread";
        goto fail;
    }
    struct jail_spawner *s = xcalloc(1, sizeof(*s));
    s->to_spawner = to[1];
    s->from_spawner = from[0];
    int rc = spawn_prepare(st, err);
    st->plan.env_to_wipe = environment_to_wipe();
    st->plan.shares_memory = true;
    char byte;
    ssize_t n = 0;
    if (rc == 0 && write(s->to_spawner, "l", 1) != 1)
        rc = sbx_fail_errno(err, errno, "starting the spawner thread");
    if (rc == 0) {
        do
            n = read(s->from_spawner, &byte, 1);
        while (n < 0 && errno == EINTR);
        rc = n == 1 ? start.rc : sbx_fail(err, EPROTO, "the spawner thread did not report");
    } else {
        /* No launch: the spawner, told so by EOF, must be done with start (on this stack)
         * before we return; it may not even have read it yet. It closes its end as it ends. */
        close(s->to_spawner);
        s->to_spawner = -1;
        for (;;) {
            n = read(s->from_spawner, &byte, 1);
            if (n == 0 || (n < 0 && errno != EINTR))
                break;
        }
    }
    /* Whatever happened, init has its spawner until jail_destroy releases it. */
    st->j->spawner = s;
    return rc;
fail:
    st->shared_stack = NULL;
    for (int i = 0; i < 2; i++) {
        cleanup_closep(&to[i]);
        cleanup_closep(&from[i]);
    }
    munmap(map, map_len);
    return sbx_fail_errno(err, e, "%s", what);
}

static struct jail *jail_new(const struct jail_spec *spec)
{
    struct jail *j = xcalloc(1, sizeof(*j));
    j->pidfd = j->status_fd = j->root_fd = j->proxy_fd = j->setup_fd = j->host_uid_lock_fd = -1;
    j->pid = -1;
    j->persistent = spec->persistent;
    j->deferred = spec->deferred;
    j->expect_proxy = spec->persistent && spec->proxy_port;
    snprintf(j->command, sizeof(j->command), "%s",
             spec->deferred || !spec->argv ? "" : spec->argv[0]);
    return j;
}

static void spawn_state_close(struct spawn_state *st)
{
    for (int i = 0; i < 2; i++) {
        cleanup_closep(&st->sync_pipe[i]);
        cleanup_closep(&st->err_pipe[i]);
        cleanup_closep(&st->status_pipe[i]);
    }
}

int jail_spawn(const struct jail_spec *spec, struct jail **out, struct sbx_err *err)
{
    struct jail *j = NULL;
    if (!spec->share_memory || spec->persistent || spec->deferred) {
        if (jail_spawn_begin(spec, &j, err) < 0)
            return -1;
        if (jail_spawn_end(j, err) < 0) {
            jail_destroy(j);
            return -1;
        }
        *out = j;
        return 0;
    }
    struct spawn_state st = {
        .spec = spec, .sync_pipe = {-1, -1}, .err_pipe = {-1, -1}, .status_pipe = {-1, -1}};
    st.j = jail_new(spec);
    int rc = spawn_sharing_memory(&st, err);
    if (rc == 0)
        rc = spawn_finish(st.j, err);
    spawn_state_close(&st);
    if (rc < 0) {
        jail_destroy(st.j); /* kills and reaps init if there is one, then frees its spawner */
        return -1;
    }
    *out = st.j;
    return 0;
}

int jail_spawn_begin(const struct jail_spec *spec, struct jail **out, struct sbx_err *err)
{
    struct spawn_state st = {
        .spec = spec, .sync_pipe = {-1, -1}, .err_pipe = {-1, -1}, .status_pipe = {-1, -1}};
    st.j = jail_new(spec);
    /* Init is a copy of this process: the plan on this stack is its own from the clone on. */
    int rc = spawn_prepare(&st, err);
    if (rc == 0)
        rc = spawn_launch(&st, err);
    spawn_state_close(&st);
    if (rc < 0) {
        jail_destroy(st.j);
        return -1;
    }
    *out = st.j;
    return 0;
}

int jail_spawn_end(struct jail *j, struct sbx_err *err)
{
    if (j->setup_fd < 0)
        return sbx_fail(err, EINVAL, "no sandbox setup is under way");
    if (await_exec(j, err) < 0 || spawn_finish(j, err) < 0)
        return -1;
    return 0;
}

int jail_start_command(struct jail *j, char *const *argv, const int stdio[3], struct sbx_err *err)
{
    if (!j->deferred || !j->armed || j->command_sent || j->setup_fd < 0)
        return sbx_fail(err, EINVAL, "the sandbox is not waiting for a command");
    /* What init takes: argv's strings one after another, each with its NUL. */
    char blob[INIT_ARGV_BYTES];
    size_t len = 0, n = 0;
    for (; argv && argv[n]; n++) {
        size_t l = strlen(argv[n]) + 1;
        if (n + 1 >= INIT_ARGV_MAX || l > sizeof(blob) - len)
            return sbx_fail(err, E2BIG,
                            "the command line does not fit a sandbox made ahead (%d arguments "
                            "and %d bytes at most)",
                            INIT_ARGV_MAX - 1, INIT_ARGV_BYTES);
        memcpy(blob + len, argv[n], l);
        len += l;
    }
    if (n == 0 || !argv[0][0])
        return sbx_fail(err, EINVAL, "no command given");
    /* Pipes and sockets only, as a sandbox built on demand gets: never a caller's file,
     * directory or terminal. */
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (fstat(stdio[i], &st) < 0)
            return sbx_fail_errno(err, EBADF, "the command's fd %d", i);
        if (!S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
            return sbx_fail(err, EINVAL, "the command's fd %d is not a pipe or a socket", i);
    }
    int r = give_stdio_pipes(stdio, j->host_uid);
    if (r < 0)
        return sbx_fail_errno(err, -r, "handing the sandbox its stdout and stderr pipes");
    snprintf(j->command, sizeof(j->command), "%s", argv[0]);
    j->command_t0 = now_ns();
    r = send_with_fds(j->status_fd, blob, len, stdio, 3);
    if (r < 0)
        return sbx_fail_errno(err, -r, "handing the sandbox its command");
    j->command_sent = true;
    return 0;
}

int jail_command_end(struct jail *j, struct sbx_err *err)
{
    if (!j->command_sent || j->setup_fd < 0)
        return sbx_fail(err, EINVAL, "no command is starting");
    if (await_exec(j, err) < 0)
        return -1;
    fcntl(j->status_fd, F_SETFL, O_NONBLOCK);
    j->workload_running = true;
    return 0;
}

void jail_build_key(const struct sbx_profile *p, const struct sbx_config *cfg,
                    struct jail_build_key *key)
{
    memset(key, 0, sizeof(*key));
    key->version = 3;
    key->memory_bytes = p->memory_bytes;
    key->workspace_bytes = p->workspace_bytes;
    key->workspace_inodes = p->workspace_inodes;
    key->tmp_bytes = p->tmp_bytes;
    key->fsize_bytes = p->fsize_bytes;
    key->stack_bytes = p->stack_bytes;
    key->cpu_millicpus = p->cpu_millicpus;
    key->pids = p->pids;
    key->nofile = p->nofile;
    key->timeout_ms = p->timeout_ms;
    key->sandbox_uid = cfg->sandbox_uid;
    key->host_uid = cfg->host_uid;
    key->host_uid_count = cfg->host_uid_count;
    key->allow_degraded = cfg->allow_degraded;
    /* Every limit but those rlimits_apply always sets (core, fsize, nofile, stack). */
    static const int inherited[JAIL_KEY_RLIMITS] = {
        RLIMIT_CPU,      RLIMIT_DATA, RLIMIT_RSS,    RLIMIT_NPROC,
        RLIMIT_MEMLOCK,  RLIMIT_AS,   RLIMIT_LOCKS,  RLIMIT_SIGPENDING,
        RLIMIT_MSGQUEUE, RLIMIT_NICE, RLIMIT_RTPRIO, RLIMIT_RTTIME};
    for (size_t i = 0; i < JAIL_KEY_RLIMITS; i++) {
        struct rlimit rl;
        if (getrlimit(inherited[i], &rl) == 0) {
            key->inherited_rlimits[i][0] = rl.rlim_cur;
            key->inherited_rlimits[i][1] = rl.rlim_max;
        }
    }
    mode_t mask = umask(0);
    umask(mask);
    key->umask = mask;
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, 0);
    key->nice = errno ? INT32_MIN : prio;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
        memcpy(key->cpu_affinity, &cpus,
               sizeof(cpus) < sizeof(key->cpu_affinity) ? sizeof(cpus) : sizeof(key->cpu_affinity));
    struct sched_param sp = {0};
    key->sched_policy = sched_getscheduler(0);
    key->sched_priority = sched_getparam(0, &sp) == 0 ? sp.sched_priority : -1;
    key->ioprio = (int32_t)syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
    struct stat st;
    if (stat("/proc/self/exe", &st) == 0) {
        key->engine_dev = st.st_dev;
        key->engine_ino = st.st_ino;
        key->engine_size = (uint64_t)st.st_size;
        key->engine_mtime_ns =
            (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    }
}

int jail_workload_status(struct jail *j, int *exit_code, int *term_signal)
{
    int32_t ws;
    ssize_t n = read(j->status_fd, &ws, sizeof(ws));
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
    if (n == 0)
        return -EPIPE; /* init is gone: the whole sandbox ended */
    if (n != (ssize_t)sizeof(ws))
        return -EPROTO;
    j->workload_running = false;
    *exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    *term_signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
    return 1;
}

static int send_command(struct jail *j, char cmd)
{
    if (j->status_fd < 0 || j->root_fd < 0)
        return -EINVAL;
    if (send(j->status_fd, &cmd, 1, MSG_NOSIGNAL) != 1)
        return -errno;
    return 0;
}

int jail_workload_kill(struct jail *j)
{
    return send_command(j, 'K');
}

int jail_workload_restart(struct jail *j)
{
    if (j->workload_running)
        return -EBUSY;
    int r = send_command(j, 'R');
    if (r == 0)
        j->workload_running = true;
    return r;
}

int jail_signal(struct jail *j, int sig)
{
    if (j->pidfd < 0 || j->reaped)
        return -ESRCH;
    if (syscall(SYS_pidfd_send_signal, j->pidfd, sig, NULL, 0) < 0)
        return -errno;
    return 0;
}

void jail_kill(struct jail *j)
{
    if (j->pidfd >= 0 && !j->reaped)
        syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
    if (j->cg)
        cgroup_kill_all(j->cg);
}

int jail_try_reap(struct jail *j, int *exit_code, int *term_signal)
{
    if (!j->reaped) {
        int st;
        pid_t p = wait4(j->pid, &st, WNOHANG, &j->rusage);
        if (p == 0)
            return 0;
        if (p < 0)
            return -errno;
        j->reaped = true;
        j->init_status = st;
    }
    int32_t ws;
    ssize_t n = j->status_fd >= 0 ? read(j->status_fd, &ws, sizeof(ws)) : -1;
    int st = n == (ssize_t)sizeof(ws) ? ws : j->init_status;
    /* Init killed from outside (timeout, OOM of init): report the signal that ended it. */
    *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    *term_signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    return 1;
}

int jail_read_usage(struct jail *j, struct jail_usage *u)
{
    memset(u, 0, sizeof(*u));
    if (j->cg) {
        struct cgroup_usage cu;
        int r = cgroup_read_usage(j->cg, &cu);
        if (r < 0)
            return r;
        u->memory_peak_bytes = cu.memory_peak_bytes;
        u->memory_current_bytes = cu.memory_current_bytes;
        u->cpu_ns = cu.cpu_usage_ns;
        u->pids_current = cu.pids_current;
        u->oom_killed = cu.oom_killed;
        return 0;
    }
    /* No cgroup: what the kernel accounted to init and the children it reaped. */
    u->memory_peak_bytes = (uint64_t)j->rusage.ru_maxrss * 1024;
    u->cpu_ns =
        ((uint64_t)j->rusage.ru_utime.tv_sec + (uint64_t)j->rusage.ru_stime.tv_sec) *
            1000000000ull +
        ((uint64_t)j->rusage.ru_utime.tv_usec + (uint64_t)j->rusage.ru_stime.tv_usec) * 1000ull;
    return 0;
}

bool jail_oom_killed(struct jail *j)
{
    return jail_oom_kills(j) > 0;
}

uint64_t jail_oom_kills(struct jail *j)
{
    return j->cg ? cgroup_oom_kills(j->cg) : 0;
}

int jail_read_memory_peak(struct jail *j, uint64_t *out)
{
    if (!j->cg)
        return -ENOTSUP;
    return cgroup_read_memory_peak(j->cg, out);
}

int jail_read_cpu_ns(struct jail *j, uint64_t *out)
{
    if (!j->cg)
        return -ENOTSUP;
    return cgroup_read_cpu_ns(j->cg, out);
}

void jail_destroy(struct jail *j)
{
    if (!j)
        return;
    if (j->pid > 0 && !j->reaped) {
        int st;
        /* An init that has already gone (a closed sandbox the server killed and waited for)
         * needs no second kill. */
        if (wait4(j->pid, &st, WNOHANG, &j->rusage) == 0) {
            jail_kill(j);
            while (wait4(j->pid, &st, 0, &j->rusage) < 0 && errno == EINTR)
                ;
        }
        j->reaped = true;
    }
    if (j->cg)
        cgroup_destroy(j->cg);
    if (j->pidfd >= 0)
        close(j->pidfd);
    if (j->status_fd >= 0)
        close(j->status_fd);
    if (j->root_fd >= 0)
        close(j->root_fd);
    if (j->proxy_fd >= 0)
        close(j->proxy_fd);
    if (j->setup_fd >= 0)
        close(j->setup_fd);
    /* Init is reaped, and with it everything in its pid namespace: the uid is free. */
    if (j->host_uid_lock_fd >= 0)
        close(j->host_uid_lock_fd);
    /* Only now that init is reaped may the thread whose TLS it used end. */
    spawner_release(j->spawner);
    free(j);
}

void jail_shutdown(void)
{
    cgroup_cleanup_all();
}

int jail_sweep_stale(void)
{
    return cgroup_sweep_stale();
}
