/* One probe per layer, run once. Namespaces are probed by actually unsharing in a child, so
 * the verdict is what the kernel does, not what a sysctl claims. */
#include "features.h"

#include "cgroup.h"
#include "host_uid.h"
#include "landlock.h"
#include "seccomp.h"
#include "util.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static struct feature_status table[FEAT__COUNT];

/* A probe child's verdict: the errno it exited with, 0, or EIO if it did not exit. */
static int exit_code_of(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
}

/* Try unshare(CLONE_NEWUSER | flag) in a child, as nobody when unprivileged is set (root's
 * own success says nothing of what an ordinary user may do); returns 0 or the errno it got. */
static int try_unshare_as(int flag, bool unprivileged)
{
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        /* (setgroups is refused in a user namespace that denies it; the groups do not matter
         * to the unshare.) */
        if (unprivileged &&
            ((setgroups(0, NULL) < 0 && errno != EPERM) || setresgid(65534, 65534, 65534) < 0 ||
             setresuid(65534, 65534, 65534) < 0))
            _exit(errno & 0x7f);
        _exit(unshare(CLONE_NEWUSER | flag) == 0 ? 0 : (errno & 0x7f));
    }
    return exit_code_of(pid);
}

static int try_unshare(int flag)
{
    return try_unshare_as(flag, false);
}

/* A sysctl's number, or -1 when this kernel has no such file. */
static long sysctl_number(const char *path)
{
    char buf[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

const char *features_userns_owner_capless(void)
{
    static atomic_int verdict = -1; /* a race reads twice, alike */
    int v = atomic_load(&verdict);
    if (v < 0) {
        v = sysctl_number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1;
        atomic_store(&verdict, v);
    }
    return v ? "kernel.apparmor_restrict_unprivileged_userns is 1" : NULL;
}

/* For doctor: every setting that keeps an unprivileged user from a working user namespace. The
 * jail reads only the one a clone does not report (each /proc/sys file costs `run` about 15 us
 * the first time); a refused clone it retries as root (clone_sandbox_owned). */
static const char *userns_owner_refusal(void)
{
    if (sysctl_number("/proc/sys/kernel/unprivileged_userns_clone") == 0)
        return "kernel.unprivileged_userns_clone is 0";
    if (sysctl_number("/proc/sys/user/max_user_namespaces") == 0)
        return "user.max_user_namespaces is 0";
    return features_userns_owner_capless();
}

/* What the jail does with its mount namespace first: a fresh proc for its own pid namespace.
 * The kernel refuses that in a user namespace while any of /proc is covered by another mount
 * (mnt_too_revealing, Linux 3.8+): a container's masked /proc paths do it. The namespaces
 * alone are then created fine and every sandbox is refused. Returns 0 or the errno got. */
static int try_fresh_proc(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
            _exit(errno & 0x7f);
        /* The new pid namespace is for children only: proc is mounted from one. */
        pid_t inner = fork();
        if (inner < 0)
            _exit(errno & 0x7f);
        if (inner == 0) {
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
            _exit(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0
                      ? 0
                      : (errno & 0x7f));
        }
        _exit(exit_code_of(inner));
    }
    return exit_code_of(pid);
}

static void set(enum feature_id id, const char *name, bool ok, bool required, const char *detail,
                const char *hint)
{
    struct feature_status *f = &table[id];
    f->name = name;
    f->available = ok;
    f->required = required;
    /* The jail can leave out exactly these two (jail_spawn); namespaces it cannot. */
    f->degradable = id == FEAT_SECCOMP || id == FEAT_LANDLOCK;
    snprintf(f->detail, sizeof(f->detail), "%s", detail ? detail : "");
    snprintf(f->hint, sizeof(f->hint), "%s", ok || !hint ? "" : hint);
}

static void probe_namespaces(void)
{
    static const struct {
        enum feature_id id;
        const char *name;
        int flag;
    } ns[] = {
        {FEAT_NS_PID, "pid namespace", CLONE_NEWPID},
        {FEAT_NS_MNT, "mount namespace", CLONE_NEWNS},
        {FEAT_NS_NET, "network namespace", CLONE_NEWNET},
        {FEAT_NS_IPC, "ipc namespace", CLONE_NEWIPC},
        {FEAT_NS_UTS, "uts namespace", CLONE_NEWUTS},
        {FEAT_NS_CGROUP, "cgroup namespace", CLONE_NEWCGROUP},
    };
    int e = try_unshare(0);
    char detail[96];
    if (e)
        snprintf(detail, sizeof(detail), "unshare: %s", strerror(e));
    else if (geteuid() != 0)
        snprintf(detail, sizeof(detail), "unprivileged creation works");
    else {
        int u = try_unshare_as(0, true);
        /* EINVAL: setresuid found no nobody to become (uid 65534 is not mapped here). */
        snprintf(detail, sizeof(detail), "creation works (as root; for an ordinary user: %s)",
                 u == EINVAL ? "not tried, no uid 65534 here"
                 : u         ? strerror(u)
                             : "works too");
    }
    set(FEAT_USERNS, "user namespaces", e == 0, true, detail,
        "sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces=15000 (and, on "
        "Ubuntu, kernel.apparmor_restrict_unprivileged_userns=0)");
    for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
        int r = e ? e : try_unshare(ns[i].flag);
        snprintf(detail, sizeof(detail), r ? "unshare: %s" : "ok", strerror(r));
        const char *hint =
            "the kernel lacks this namespace (CONFIG_*_NS) or user namespaces are off";
        /* (Without pid namespaces, whose row says so, there is no fresh proc to try.) */
        if (r == 0 && ns[i].id == FEAT_NS_MNT && table[FEAT_NS_PID].available) {
            r = try_fresh_proc();
            if (r) {
                snprintf(detail, sizeof(detail), "mounting a fresh /proc in it: %s", strerror(r));
                hint =
                    "part of /proc is covered by another mount (a container's masked paths): run "
                    "on the host, or unmask /proc (docker: --security-opt "
                    "systempaths=unconfined); or the user namespace gets no capabilities "
                    "(Ubuntu: sysctl kernel.apparmor_restrict_unprivileged_userns=0)";
            }
        }
        set(ns[i].id, ns[i].name, r == 0, true, detail, hint);
    }
}

/* A sandbox that cannot claim one is refused, so this is required as root; one uid shared by
 * configuration is a fallback (the per-user counts are shared too, which the detail says). */
static void probe_host_uids(uid_t first, uint32_t count)
{
    char detail[160];
    struct sbx_err err = {0};
    if (geteuid() != 0) {
        set(FEAT_HOST_UIDS, "host uids", true, false, "rootless: the caller's own", "");
    } else if (host_uid_claims_usable(first, count, &err) < 0) {
        set(FEAT_HOST_UIDS, "host uids", false, true, "cannot claim one", err.msg);
    } else if (count <= 1) {
        snprintf(detail, sizeof(detail),
                 "shared: every sandbox maps to host uid %u, and shares its per-user limits",
                 (unsigned)first);
        set(FEAT_HOST_UIDS, "host uids", false, false, detail,
            "give each sandbox its own: isolation.host_uid_count = 65536 (a range no user has)");
    } else {
        snprintf(detail, sizeof(detail), "%u-%u, one per live sandbox", (unsigned)first,
                 (unsigned)(first + count - 1));
        set(FEAT_HOST_UIDS, "host uids", true, false, detail, "");
    }
}

const struct feature_status *features_probe(uid_t host_uid, uint32_t host_uid_count)
{
    static bool done;
    if (done)
        return table;
    done = true;
    probe_namespaces();

    /* The same probe the jail uses, so doctor and a refused sandbox always agree. */
    struct sbx_err err = {0};
    bool sc = seccomp_filter_available(&err) == 0;
    char detail[160];
    size_t nrules = 0;
    seccomp_denied_table(&nrules);
    if (sc)
        snprintf(detail, sizeof(detail), "%zu denied calls, %u BPF instructions (built in)", nrules,
                 (unsigned)seccomp_program()->prog.len);
    else
        snprintf(detail, sizeof(detail), "%.150s", err.msg);
    set(FEAT_SECCOMP, "seccomp-bpf", sc, true, detail,
        "a kernel with CONFIG_SECCOMP_FILTER (Linux 4.14+), not inside a sandbox that blocks "
        "seccomp(2)");

    const char *why = NULL;
    enum cgroup_backend_kind cg = cgroup_backend(&why);
    snprintf(detail, sizeof(detail), "%s",
             cg == CGROUP_BACKEND_V2 && cgroup_v2_steps_aside()
                 ? "v2, alone in a delegated cgroup: steps into a leaf to hand memory pids cpu down"
             : cg == CGROUP_BACKEND_V2 ? "v2 delegated subtree: memory pids cpu writable"
             : cg == CGROUP_BACKEND_V1 ? "v1: memory pids cpu cpuacct writable"
                                       : "none writable: limits fall back to rlimits");
    /* Not required: without it the limits fall back to rlimits, which is reported. */
    set(FEAT_CGROUP, "cgroup limits", cg != CGROUP_BACKEND_NONE, false, detail, why);

    int abi = landlock_abi_version();
    snprintf(detail, sizeof(detail), abi ? "ABI %d" : "not enabled", abi);
    set(FEAT_LANDLOCK, "Landlock", abi > 0, true, detail,
        "Linux 5.13+ with landlock in the lsm= boot parameter, not inside a sandbox that blocks "
        "landlock_create_ruleset");

    long r = syscall(SYS_openat2, -1, NULL, 0);
    bool has_openat2 = !(r < 0 && errno == ENOSYS);
    set(FEAT_OPENAT2, "openat2", has_openat2, false, has_openat2 ? "ok" : "missing",
        "Linux 5.6+; file tools fall back to a component walk with O_NOFOLLOW");
    r = syscall(SYS_clone3, NULL, 0);
    bool has_clone3 = !(r < 0 && errno == ENOSYS);
    set(FEAT_CLONE3, "clone3", has_clone3, false, has_clone3 ? "ok" : "missing (clone fallback)",
        "Linux 5.3+; clone() is used instead");
    int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    set(FEAT_PIDFD, "pidfd", pfd >= 0, true, pfd >= 0 ? "ok" : strerror(errno), "Linux 5.3+");
    if (pfd >= 0)
        close(pfd);

    /* Not required: made as root instead, a sandbox's pending signals and inotify instances
     * count against root's own per-user limits, which the detail says. */
    const char *refusal = userns_owner_refusal();
    if (geteuid() != 0)
        snprintf(detail, sizeof(detail), "rootless: the caller makes them, with its own limits");
    else if (host_uid == 0 || refusal)
        snprintf(detail, sizeof(detail),
                 "made as root (%s): sandboxes' signals and inotify count as root's",
                 refusal ? refusal : "isolation.host_uid is 0");
    else
        snprintf(detail, sizeof(detail),
                 "made as the sandbox's host uid: per-user counts are not root's");
    set(FEAT_USERNS_OWNER, "userns owner", geteuid() != 0 || (host_uid != 0 && !refusal), false,
        detail,
        "let unprivileged users make working user namespaces (sysctl "
        "kernel.unprivileged_userns_clone=1; Ubuntu: "
        "kernel.apparmor_restrict_unprivileged_userns=0)");
    probe_host_uids(host_uid, host_uid_count);
    return table;
}
