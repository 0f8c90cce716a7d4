/* pid 1 of the sandbox. It forks the workload, forwards signals to it, reaps every orphan,
 * and exits when the workload does; the kernel then kills whatever is left in the pid
 * namespace, so double-forked daemons cannot outlive the sandbox. */
#include "jail_internal.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

void jail_close_from(unsigned int first)
{
    if (syscall(SYS_close_range, first, ~0U, 0) == 0)
        return;
    for (int fd = (int)first; fd < 1024; fd++)
        close(fd);
}

/* fd, or /dev/null opened with flags when fd < 0, copied to 64 or above (close-on-exec): the
 * low numbers are the targets, and a copy already sitting on its target would keep its
 * close-on-exec flag through dup2 and be closed at the exec. */
static int high_copy(int fd, int null_flags)
{
    int own = fd < 0 ? open("/dev/null", null_flags | O_CLOEXEC) : -1;
    if (fd < 0 && own < 0)
        return -1;
    int high = fcntl(fd < 0 ? own : fd, F_DUPFD_CLOEXEC, 64);
    if (own >= 0)
        close(own);
    return high;
}

/* Put the handed-in fds at 0, 1, 2, 3.. without clobbering a source that sits on a target.
 * The error pipe goes right after them (close-on-exec), so a failed exec is still reported.
 * Returns the error pipe's new number, or -errno. */
static int place_fds(const struct jail_child_plan *plan)
{
    int tmp[3 + 16 + 1];
    size_t n = 3 + plan->n_pass_fds;
    if (plan->n_pass_fds > 16)
        return -EMFILE;
    for (size_t i = 0; i < n; i++) {
        tmp[i] = high_copy(i < 3 ? plan->stdio[i] : plan->pass_fds[i - 3], O_RDWR);
        if (tmp[i] < 0)
            return -errno;
    }
    /* A restarted workload has no error pipe: a failed exec shows as exit status 127. */
    tmp[n] = high_copy(plan->err_fd, O_WRONLY);
    if (tmp[n] < 0)
        return -errno;
    for (size_t i = 0; i < n; i++)
        if (dup2(tmp[i], (int)i) < 0)
            return -errno;
    if (dup3(tmp[n], (int)n, O_CLOEXEC) < 0)
        return -errno;
    jail_close_from((unsigned int)n + 1);
    return (int)n;
}

static void close_gap(int lo, int hi)
{
    if (lo <= hi)
        syscall(SYS_close_range, (unsigned int)lo, (unsigned int)hi, 0);
}

void jail_keep_only_fds(int *keep, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && keep[k - 1] > keep[k]; k--) {
            int t = keep[k];
            keep[k] = keep[k - 1];
            keep[k - 1] = t;
        }
    int lo = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < 0)
            continue;
        close_gap(lo, keep[i] - 1);
        lo = keep[i] + 1;
    }
    jail_close_from((unsigned int)lo);
}

/* Init keeps only its status socket and (persistent) the copies of the workload's fds. */
/* Init's own oom_score_adj (see start_workload), opened by jail_open_oom_adj. */
static int oom_adj_fd = -1;

void jail_open_oom_adj(void)
{
    /* The uid change made us non-dumpable, and our /proc files root's: dumpable for this
     * moment, before any sandbox code exists. */
    prctl(PR_SET_DUMPABLE, 1);
    oom_adj_fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
    prctl(PR_SET_DUMPABLE, 0);
}

static void close_all_but(int status_fd, const struct jail_child_plan *plan)
{
    int keep[2 + 3 + 16];
    size_t n = 0;
    keep[n++] = status_fd;
    if (oom_adj_fd >= 0)
        keep[n++] = oom_adj_fd;
    for (int i = 0; plan && i < 3; i++)
        if (plan->stdio[i] >= 0)
            keep[n++] = plan->stdio[i];
    for (size_t i = 0; plan && i < plan->n_pass_fds && i < 16; i++)
        if (plan->pass_fds[i] >= 0)
            keep[n++] = plan->pass_fds[i];
    jail_keep_only_fds(keep, n);
}

static void report_and_exit(int err_fd, enum jail_step step, int err)
{
    struct jail_child_report e = {.step = step, .err = err};
    ssize_t w = write(err_fd, &e, sizeof(e));
    (void)w;
    _exit(127);
}

/* execvpe would search the server's PATH, not the sandbox's: a bare command name is looked up
 * in the PATH of the environment the sandbox gets, the way a shell would. Runs in the vfork
 * child, so nothing here allocates. */
static void exec_searching_path(const struct jail_child_plan *plan)
{
    const char *file = plan->argv[0];
    if (strchr(file, '/')) {
        execve(file, plan->argv, (char *const *)plan->envp);
        /* execve says EACCES for a directory; a shell says what it is. */
        struct stat st;
        if (errno == EACCES && stat(file, &st) == 0 && S_ISDIR(st.st_mode))
            errno = EISDIR;
        return;
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (char *const *e = plan->envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            path = *e + 5;
    size_t flen = strlen(file);
    bool denied = false;
    char full[PATH_MAX];
    for (const char *dir = path;; dir++) {
        const char *end = strchrnul(dir, ':');
        size_t dlen = (size_t)(end - dir);
        if (dlen == 0)
            dir = ".", dlen = 1; /* an empty entry is the cwd, as in the shell */
        if (dlen + 1 + flen < sizeof(full)) {
            memcpy(full, dir, dlen);
            full[dlen] = '/';
            memcpy(full + dlen + 1, file, flen + 1);
            execve(full, plan->argv, (char *const *)plan->envp);
            if (errno == EACCES)
                denied = true;
            else if (errno != ENOENT && errno != ENOTDIR)
                return; /* found, but it cannot run: that error is the answer */
        }
        if (*end == '\0')
            break;
        dir = end;
    }
    errno = denied ? EACCES : ENOENT;
}

static void exec_workload(const struct jail_child_plan *plan)
{
    sigset_t none;
    sigemptyset(&none);
    /* exec resets handled signals by itself; only an ignored one (the server ignores
     * SIGPIPE) would leak into the workload. The raw call, because glibc refuses to touch
     * signals 32 and 33, which a parent may have ignored all the same. */
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } dfl = {SIG_DFL, 0, NULL, 0};
    for (int sig = 1; sig <= 64; sig++)
        if (plan->ignored & (1ull << (sig - 1)))
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
    sigprocmask(SIG_SETMASK, &none, NULL);
    int err_fd = place_fds(plan);
    if (err_fd < 0)
        jail_child_fail(plan, STEP_FDS, -err_fd);
    if (chdir("/workspace") < 0)
        report_and_exit(err_fd, STEP_EXEC, errno);
    exec_searching_path(plan);
    report_and_exit(err_fd, STEP_EXEC, errno);
}

static int workload_main(void *arg)
{
    exec_workload(arg);
    return 127;
}

int jail_send_fd(int sock, char tag, int fd)
{
    return send_with_fds(sock, &tag, 1, &fd, 1);
}

/* Sends the sandbox's root directory to the server once, so that file tools can resolve paths
 * inside it (openat2 RESOLVE_IN_ROOT) without /proc/<pid>/root, which a non-dumpable init
 * refuses to a rootless server. */
static void send_root_fd(int sock)
{
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return;
    jail_send_fd(sock, 'F', root);
    close(root);
}

static pid_t start_workload(const struct jail_child_plan *plan)
{
    /* The OOM killer is to take the sandbox's processes before init, which holds the caller's
     * memory (all of run's, shared): were init its pick, the caller would go with it. The
     * workload inherits init's score at the clone, so init raises its own for that moment;
     * raising needs no privilege, and going back to where it was never does either. */
    char was[16] = "";
    ssize_t n = oom_adj_fd >= 0 ? pread(oom_adj_fd, was, sizeof(was) - 1, 0) : -1;
    bool raised = n > 0 && pwrite(oom_adj_fd, "1000", 4, 0) == 4;
    /* posix_spawn's technique: share init's memory until exec (no page tables copied) and let
     * the child run first on this CPU; it writes only to its own stack below. */
    static char stack[64 * 1024] __attribute__((aligned(16)));
    pid_t pid =
        clone(workload_main, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)plan);
    if (raised) {
        ssize_t w = pwrite(oom_adj_fd, was, (size_t)n, 0);
        (void)w;
    }
    return pid;
}

static void report_status(int status_fd, int st)
{
    int32_t v = st;
    ssize_t w = write(status_fd, &v, sizeof(v));
    (void)w;
}

/* Reaps everything that exited; returns true if the workload was among them (its wait status
 * in *workload_st). */
static bool reap_all(pid_t child, int *workload_st)
{
    bool workload_done = false;
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
        if (p == child) {
            *workload_st = st;
            workload_done = true;
        }
    }
    return workload_done;
}

/* A one-shot sandbox's end: whatever the workload left behind is killed and reaped before its
 * status goes out, so that a caller who has the status knows that no process of the sandbox
 * runs any more (init's own exit, the namespaces' teardown, can then overlap the caller's
 * work). */
static void __attribute__((noreturn)) end_sandbox(int status_fd, int workload_st)
{
    /* From pid 1 of a pid namespace, -1 means everything in it but init. Raw syscalls: an init
     * that shares run's memory runs on a stack of its own, where a sanitizer's wrappers of
     * libc (a test build's) are not at home. */
    syscall(SYS_kill, -1, SIGKILL);
    while (syscall(SYS_wait4, -1, NULL, __WALL, NULL) > 0 || errno == EINTR)
        ;
    report_status(status_fd, workload_st);
    _exit(0);
}

/* Persistent sandboxes: the workload (an interpreter) may die or be killed and started again
 * while the sandbox, its mounts and its files live on. Commands arrive on the status socket:
 * 'K' kills every process but init, 'R' starts the workload again. EOF there ends the
 * sandbox. */
static void __attribute__((noreturn))
serve_persistent(struct jail_child_plan *plan, pid_t child, int status_fd, const sigset_t *all)
{
    int sfd = signalfd(-1, all, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        _exit(125);
    for (;;) {
        struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN}, {.fd = status_fd, .events = POLLIN}};
        if (poll(pfd, 2, -1) < 0)
            continue;
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo != SIGCHLD) {
                    if (child > 0)
                        kill(child, (int)si.ssi_signo);
                    continue;
                }
            }
            int st = 0;
            if (reap_all(child, &st)) {
                report_status(status_fd, st);
                child = -1;
            }
        }
        if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            char cmd;
            ssize_t n = read(status_fd, &cmd, 1);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                _exit(0);
            if (n != 1)
                continue;
            if (cmd == 'K') {
                /* From pid 1 of a pid namespace, -1 means everything in it but init. */
                kill(-1, SIGKILL);
            } else if (cmd == 'R' && child < 0) {
                child = start_workload(plan);
                if (child < 0)
                    report_status(status_fd, 127 << 8);
            }
        }
    }
}

/* Fields field and field + 1 of /proc/self/stat, numbered as in proc(5); the scan starts after
 * the name, which may hold spaces and parentheses, hence the last ')'. */
static bool stat_pair(int field, unsigned long *a, unsigned long *b)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    /* A space precedes each field from the third on: stop at the one before field. */
    for (int f = 3; p && f <= field; f++)
        p = strchr(p + 1, ' ');
    return p && sscanf(p, "%lu %lu", a, b) == 2;
}

/* /proc/1/cmdline is readable by everyone, dumpable or not: a fork of the server would show the
 * server's command line (its host paths and flags) to the sandbox. Init's private copy of it
 * (fields 48 and 49 of /proc/self/stat bound it) is overwritten. */
static void hide_command_line(void)
{
    static const char name[] = "mcp-sandbox-init";
    unsigned long start = 0, end = 0;
    if (!stat_pair(48, &start, &end) || end <= start)
        return;
    size_t len = end - start;
    memset((void *)start, 0, len);
    memcpy((void *)start, name, len > sizeof(name) ? sizeof(name) : len - 1);
}

/* Init's plan for restarts (see jail_run_init): what it points to is made init's own, since
 * the heap is given back and the caller's stack frame is no business of init's. The command
 * line fits: spawn_prepare refused a longer one. */
static void keep_plan(struct jail_child_plan *again, const struct jail_child_plan *from)
{
    static char store[INIT_ARGV_BYTES];
    static char *argv[INIT_ARGV_MAX];
    size_t used = 0, n = 0;
    for (; from->argv[n] && n + 1 < INIT_ARGV_MAX; n++) {
        size_t len = strlen(from->argv[n]) + 1;
        if (len > sizeof(store) - used)
            break;
        argv[n] = memcpy(store + used, from->argv[n], len);
        used += len;
    }
    argv[n] = NULL;
    again->argv = argv;
}

/* A copy of the plan that init keeps past its setup: the environment's own strings were copied
 * with it (the base ones are constants), and what it points to elsewhere is not init's. */
static void own_plan(struct jail_child_plan *again, const struct jail_child_plan *from)
{
    *again = *from;
    uintptr_t store_at = (uintptr_t)from->env_store;
    for (size_t i = 0; again->envp[i]; i++) {
        uintptr_t at = (uintptr_t)from->envp[i];
        if (at >= store_at && at < store_at + sizeof(from->env_store))
            again->envp[i] = again->env_store + (at - store_at);
    }
    again->profile = NULL;
    again->seccomp = NULL;
    again->env_to_wipe = NULL;
}

/* A deferred sandbox, built whole: says so, and waits for its command (argv's strings one
 * after another, each with its NUL, and three fds for stdio) on the status socket. EOF there
 * means it will get none: init ends, and the sandbox with it. Returns init's own plan for the
 * command. */
static const struct jail_child_plan *await_command(const struct jail_child_plan *from)
{
    static struct jail_child_plan armed;
    static char store[INIT_ARGV_BYTES];
    static char *argv[INIT_ARGV_MAX];
    own_plan(&armed, from);
    armed.pass_fds = NULL;
    armed.n_pass_fds = 0;
    struct jail_child_report ready = {.step = STEP_ARMED, .at_ns = now_ns()};
    if (write(armed.err_fd, &ready, sizeof(ready)) != (ssize_t)sizeof(ready))
        _exit(127);
    size_t nfds;
    bool truncated;
    ssize_t n =
        recv_with_fds(armed.status_fd, store, sizeof(store), 0, armed.stdio, 3, &nfds, &truncated);
    if (n == 0)
        _exit(0);
    bool fds_ok = nfds == 3;
    size_t argc = 0;
    bool argv_ok = n > 1 && !truncated && store[n - 1] == '\0' && store[0];
    for (ssize_t at = 0; argv_ok && at < n; at += (ssize_t)strlen(store + at) + 1) {
        if (argc + 1 >= INIT_ARGV_MAX)
            argv_ok = false;
        else
            argv[argc++] = store + at;
    }
    argv[argc] = NULL;
    if (!fds_ok || !argv_ok)
        jail_child_fail(&armed, STEP_COMMAND, n < 0 ? errno : EPROTO);
    armed.argv = argv;
    return &armed;
}

/* A forked init is a copy of the server's memory, and its heap is the bulk of that: every page
 * the server changes after the fork is one that init alone goes on holding, and with it the
 * server's data of that moment, other sandboxes' code and output among them (with 100
 * sandboxes, 3.1 of the newest init's 3.2 MiB of private memory was heap). What init does
 * from here on (poll, reap, send its root, start the workload again from its own copy of the
 * plan) touches no heap, so the heap is given back; what glibc maps apart from it (large
 * blocks, other threads' arenas) and the stacks stay. Not when the thread's own storage lies
 * there, as it does in a static-pie program: the stack protector's canary is in it. */
static void release_heap(void)
{
    extern char _end[]; /* the end of the program's own data: the heap begins above */
    unsigned long start_brk = 0, arg_start = 0;
    if (!stat_pair(47, &start_brk, &arg_start) || start_brk < (unsigned long)_end)
        return;
    unsigned long page = (unsigned long)getpagesize();
    unsigned long lo = start_brk & ~(page - 1);
    unsigned long hi = ((unsigned long)syscall(SYS_brk, 0) + page - 1) & ~(page - 1);
    unsigned long tls = (unsigned long)&errno;
    if (hi <= lo || (tls >= lo && tls < hi))
        return;
    madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void jail_run_init(const struct jail_child_plan *const_plan)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    /* Read now: a plan in a caller's memory is gone once the caller has the exec report. */
    extern char **environ;
    char **env = const_plan->env_to_wipe ? const_plan->env_to_wipe : environ;
    int err_fd = const_plan->err_fd;
    /* Init is a fork of the server, or shares the memory of `run`: either way that memory
     * holds the caller's environment and state. Rootless, the workload has init's uid, so a
     * dumpable init would let it open /proc/1/environ and /proc/1/mem, and an fd opened in the
     * moment before init turned non-dumpable would stay open. Both happen before the workload
     * exists: the environment wiped, init non-dumpable (its /proc entries then refuse anyone
     * without CAP_SYS_PTRACE over its memory, which the workload never has). */
    for (char **e = env; e && *e; e++)
        memset(*e, 0, strlen(*e));
    /* Sharing `run`'s memory, the command line is run's own, still in use (and the user's). */
    if (!const_plan->shares_memory)
        hide_command_line();
    prctl(PR_SET_DUMPABLE, 0);
    /* The sandbox dies with the server. Set here, after the last change of ids (which clears
     * it), and before the workload exists: a server that dies before this point is caught by
     * the exec report below, which then finds no reader. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (const_plan->deferred)
        const_plan = await_command(const_plan);
    pid_t child = start_workload(const_plan);
    if (child < 0)
        jail_child_fail(const_plan, STEP_FORK, errno);
    /* vfork returns once the command has exec'd (or, failing, has written why and exited). */
    struct jail_child_report execed = {.step = STEP_EXECED, .at_ns = now_ns()};

    /* Only the status channel stays open in init (and, for a persistent sandbox, copies of the
     * workload's fds so it can be started again). */
    int status_fd = fcntl(const_plan->status_fd, F_DUPFD_CLOEXEC, 3);
    if (status_fd < 0)
        _exit(125);
    struct jail_child_plan *plan = NULL;
    if (const_plan->persistent) {
        /* Init is a private copy of the server's memory: the plan can live on here. */
        static struct jail_child_plan again;
        static int kept_pass[16];
        own_plan(&again, const_plan);
        keep_plan(&again, const_plan);
        plan = &again;
        int next = status_fd + 1;
        for (int i = 0; i < 3; i++)
            if (again.stdio[i] >= 0)
                again.stdio[i] = fcntl(const_plan->stdio[i], F_DUPFD_CLOEXEC, next);
        for (size_t i = 0; i < again.n_pass_fds && i < 16; i++)
            kept_pass[i] = fcntl(const_plan->pass_fds[i], F_DUPFD_CLOEXEC, next);
        again.pass_fds = kept_pass;
        again.err_fd = -1;
    }
    /* The root goes first: the caller takes it as soon as it has the report, on its loop, and
     * it waited there meanwhile (80 ms while 64 sandboxes printed, init being slow to go on). */
    if (plan)
        send_root_fd(status_fd);
    /* Reported only now: the caller may let the plan go once it has the report, and init is
     * done with it. A failed exec's report came first and is the one the caller reads. A write
     * that fails (EPIPE; errno itself may be a sharing spawner's) finds the server gone before
     * the parent-death signal was set, or done with this sandbox: a one-shot init would
     * otherwise go on running its command unwatched, with no end. */
    if (write(err_fd, &execed, sizeof(execed)) < 0)
        _exit(0);
    close_all_but(status_fd, plan);
    if (!const_plan->shares_memory)
        release_heap();

    if (plan)
        serve_persistent(plan, child, status_fd, &all);
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&all, &info);
        if (sig < 0)
            continue;
        /* The caller's Ctrl-Z and its continue reach every process of the sandbox (kill -1
         * spares init), with a stop that cannot be caught. */
        if (sig == SIGTSTP || sig == SIGCONT) {
            kill(-1, sig == SIGTSTP ? SIGSTOP : SIGCONT);
            continue;
        }
        if (sig != SIGCHLD) {
            kill(child, sig);
            continue;
        }
        int st = 0;
        if (reap_all(child, &st))
            end_sandbox(status_fd, st);
    }
}
