/* On a host with cgroup v2 only, a process can set cgroup limits only from a delegated cgroup
 * that it has to itself (src/jail/cgroup.c says why). One whose cgroup does not serve, such as
 * a command started from a login shell (a scope shared with the shell) or from a plain service
 * (no controllers handed down to it), asks systemd for a scope of its own: it runs itself again
 * under `systemd-run --scope -p Delegate=yes`, waits, and exits as the copy did. The copy says
 * through a pipe that it started; if it never does (no systemd, no bus, a refusal), the original
 * carries on with the rlimit fallback, as it would have without systemd. */
#include "cli.h"

#include "jail/cgroup.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Set in the copy's environment: the fd of the pipe's write end. */
#define SCOPE_FD_ENV "MCP_SANDBOX_SCOPE_FD"

static bool is_copy;

void cli_scope_copy_started(void)
{
    const char *v = getenv(SCOPE_FD_ENV);
    if (!v)
        return;
    is_copy = true;
    int fd = atoi(v);
    unsetenv(SCOPE_FD_ENV);
    struct stat st;
    /* Only the pipe the original made: a stray variable must not write into another fd. */
    if (fd > 2 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
        ssize_t w = write(fd, "1", 1);
        (void)w;
        close(fd);
    }
}

bool cli_is_scope_copy(void)
{
    return is_copy;
}

void cli_add_unless_ignored(sigset_t *set, int sig)
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        sigaddset(set, sig);
}

bool cli_is_stop_signal(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

void cli_passed_signals(sigset_t *set)
{
    static const int passed[] = {SIGINT, SIGTERM,   SIGHUP,  SIGQUIT, SIGUSR1,   SIGUSR2, SIGALRM,
                                 SIGIO,  SIGVTALRM, SIGPROF, SIGPWR,  SIGSTKFLT, SIGXCPU, SIGXFSZ};
    sigemptyset(set);
    for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++)
        cli_add_unless_ignored(set, passed[i]);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        cli_add_unless_ignored(set, sig);
}

/* Whether the manager systemd-run would ask is there: the system's, or for a user the user's
 * own (its private socket in $XDG_RUNTIME_DIR). Without one, trying would only print an error
 * on every run. */
static bool manager_is_reachable(bool user)
{
    if (!user)
        return access("/run/systemd/private", F_OK) == 0;
    const char *dir = getenv("XDG_RUNTIME_DIR");
    char path[PATH_MAX];
    if (!dir || snprintf(path, sizeof(path), "%s/systemd/private", dir) >= (int)sizeof(path))
        return false;
    return access(path, F_OK) == 0;
}

static const char *find_systemd_run(void)
{
    static const char *const paths[] = {"/usr/bin/systemd-run", "/bin/systemd-run"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

/* The copy's exit, as a shell reports it. */
static int exit_status_of(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Waits for the copy, passing on the signals sent to this process alone. A terminal's Ctrl-C
 * goes to the whole foreground process group, the copy included: passed on as well, it would
 * count twice. Sets *started when the copy has said so, and *signalled to the first signal. */
static int wait_for_copy(pid_t pid, int ready_fd, const sigset_t *passed, bool *started,
                         int *signalled)
{
    int sig_fd = signalfd(-1, passed, SFD_CLOEXEC | SFD_NONBLOCK);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    for (;;) {
        struct pollfd pfd[3] = {{.fd = pidfd, .events = POLLIN},
                                {.fd = ready_fd, .events = POLLIN},
                                {.fd = sig_fd, .events = POLLIN}};
        if (pidfd >= 0 && poll(pfd, 3, -1) < 0 && errno != EINTR)
            break;
        if (pfd[1].revents) {
            char c;
            ssize_t n = read(ready_fd, &c, 1);
            if (n == 1)
                *started = true;
            if (n <= 0) {
                close(ready_fd);
                ready_fd = -1;
            }
        }
        if (pfd[2].revents) {
            struct signalfd_siginfo si;
            while (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (!*signalled && cli_is_stop_signal((int)si.ssi_signo))
                    *signalled = (int)si.ssi_signo;
                if (si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE || si.ssi_code == SI_TKILL)
                    kill(pid, (int)si.ssi_signo);
            }
        }
        if (pidfd < 0 || pfd[0].revents)
            break;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (ready_fd >= 0) {
        char c;
        if (read(ready_fd, &c, 1) == 1)
            *started = true;
        close(ready_fd);
    }
    if (sig_fd >= 0)
        close(sig_fd);
    if (pidfd >= 0)
        close(pidfd);
    return st;
}

int cli_rerun_in_own_scope(struct cli_ctx *ctx)
{
    bool user = geteuid() != 0;
    if (is_copy || !cgroup_v2_needs_delegation() || access("/run/systemd/system", F_OK) < 0 ||
        !manager_is_reachable(user))
        return -1;
    const char *systemd_run = find_systemd_run();
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (!systemd_run || n <= 0)
        return -1;
    self[n] = '\0';
    int argc = 0;
    while (ctx->argv[argc])
        argc++;
    char **argv = calloc((size_t)argc + 12, sizeof(char *));
    if (!argv)
        return -1;
    int k = 0;
    argv[k++] = (char *)systemd_run;
    if (user)
        argv[k++] = "--user"; /* the user's own manager delegates to the user */
    argv[k++] = "--quiet";
    argv[k++] = "--scope";
    argv[k++] = "--collect";
    argv[k++] = "--property=Delegate=yes";
    argv[k++] = "--";
    argv[k++] = self;
    for (int i = 1; i < argc; i++)
        argv[k++] = ctx->argv[i];

    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0) {
        free(argv);
        return -1;
    }
    sigset_t passed, old;
    cli_passed_signals(&passed);
    sigprocmask(SIG_BLOCK, &passed, &old);
    pid_t pid = fork();
    if (pid == 0) {
        char fd_text[16];
        snprintf(fd_text, sizeof(fd_text), "%d", ready[1]);
        setenv(SCOPE_FD_ENV, fd_text, 1);
        fcntl(ready[1], F_SETFD, 0); /* through systemd-run's exec into the copy */
        sigprocmask(SIG_SETMASK, &old, NULL);
        execv(systemd_run, argv);
        _exit(127);
    }
    free(argv);
    close(ready[1]);
    if (pid < 0) {
        close(ready[0]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return -1;
    }
    bool started = false;
    int signalled = 0;
    int st = wait_for_copy(pid, ready[0], &passed, &started, &signalled);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (started)
        return exit_status_of(st);
    /* Told to stop while systemd was still being asked: stop, rather than run it here. */
    if (signalled)
        return 128 + signalled;
    fprintf(stderr, "mcp-sandbox: systemd-run could not give this process a delegated cgroup "
                    "(said above); carrying on without cgroup limits\n");
    return -1;
}
