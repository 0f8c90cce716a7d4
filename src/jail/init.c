/* pid 1 of the sandbox. It forks the workload, forwards signals to it, reaps every orphan,
 * and exits when the workload does; the kernel then kills whatever is left in the pid
 * namespace, so double-forked daemons cannot outlive the sandbox. */
#include "jail_internal.h"

#include "util.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static void close_from(unsigned int first)
{
    if (syscall(SYS_close_range, first, ~0U, 0) == 0)
        return;
    for (int fd = (int)first; fd < 1024; fd++)
        close(fd);
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
        int src = i < 3 ? plan->stdio[i] : plan->pass_fds[i - 3];
        if (src < 0) {
            src = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (src < 0)
                return -errno;
            tmp[i] = src;
            continue;
        }
        tmp[i] = fcntl(src, F_DUPFD_CLOEXEC, 64);
        if (tmp[i] < 0)
            return -errno;
    }
    tmp[n] = fcntl(plan->err_fd, F_DUPFD_CLOEXEC, 64);
    if (tmp[n] < 0)
        return -errno;
    for (size_t i = 0; i < n; i++)
        if (dup2(tmp[i], (int)i) < 0)
            return -errno;
    if (dup3(tmp[n], (int)n, O_CLOEXEC) < 0)
        return -errno;
    close_from((unsigned int)n + 1);
    return (int)n;
}

static void report_and_exit(int err_fd, enum jail_step step, int err)
{
    struct jail_child_error e = {.step = step, .err = err};
    ssize_t w = write(err_fd, &e, sizeof(e));
    (void)w;
    _exit(127);
}

static void exec_workload(const struct jail_child_plan *plan)
{
    sigset_t none;
    sigemptyset(&none);
    /* exec resets handled signals by itself; only an ignored one (the server ignores
     * SIGPIPE) would leak into the workload. */
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&plan->ignored, sig) == 1)
            signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int err_fd = place_fds(plan);
    if (err_fd < 0)
        jail_child_fail(plan, STEP_FDS, -err_fd);
    if (chdir("/workspace") < 0)
        report_and_exit(err_fd, STEP_EXEC, errno);
    execve(plan->argv[0], plan->argv, (char *const *)plan->envp);
    report_and_exit(err_fd, STEP_EXEC, errno);
}

static int workload_main(void *arg)
{
    exec_workload(arg);
    return 127;
}

void jail_run_init(const struct jail_child_plan *plan)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    /* posix_spawn's technique: share init's memory until exec (no page tables copied) and let
     * the child run first on this CPU; it writes only to its own stack below. */
    static char stack[64 * 1024] __attribute__((aligned(16)));
    pid_t child =
        clone(workload_main, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)plan);
    if (child < 0)
        jail_child_fail(plan, STEP_FORK, errno);

    /* Only the status pipe stays open in init; the parent sees EOF on the error pipe once the
     * workload has exec'd. */
    int status_fd = fcntl(plan->status_fd, F_DUPFD, 3);
    if (status_fd < 0)
        _exit(125);
    for (int fd = 0; fd < 3; fd++)
        close(fd);
    for (int fd = 3; fd < status_fd; fd++)
        close(fd);
    close_from((unsigned int)status_fd + 1);
    /* Set after the uid change, which clears it: the sandbox dies with the server. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Init is a fork of the server: its memory still holds the server's environment, which
     * /proc/1/environ would show to the workload (same uid when rootless). Wipe it, and make
     * init non-dumpable so its /proc entries belong to root and refuse the workload. */
    extern char **environ;
    for (char **e = environ; e && *e; e++)
        memset(*e, 0, strlen(*e));
    prctl(PR_SET_DUMPABLE, 0);

    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&all, &info);
        if (sig < 0)
            continue;
        if (sig != SIGCHLD) {
            kill(child, sig);
            continue;
        }
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
            if (p == child) {
                int32_t v = st;
                ssize_t w = write(status_fd, &v, sizeof(v));
                (void)w;
                _exit(0);
            }
        }
    }
}
