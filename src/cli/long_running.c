/* What the long-running commands (serve, pool) set up alike: the fd limit, SIGPIPE, and a clean
 * end on a signal that asks for one, taken by the loop. */
#include "cli.h"

#include "lib/log.h"
#include "service/loop.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void on_signal(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)events;
    (void)data;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        log_info("signal %u received; shutting down", si.ssi_signo);
    ev_loop_stop(loop);
}

void cli_long_running_limits(void)
{
    /* Every sandbox holds a few fds here: allow as many as the hard limit does, so the
     * sandbox limits, not the fd table, bound the count. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    /* A vanished client must not kill us through SIGPIPE; writes report EPIPE instead. */
    signal(SIGPIPE, SIG_IGN);
}

int cli_stop_on_signals(struct ev_loop *loop, struct cli_stop *stop, struct sbx_err *err)
{
    stop->fd = -1;
    stop->w = NULL;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    /* Ctrl-C, and a terminal or ssh session that closed: the same clean end, unless they were
     * ignored when we started (nohup, a background job of a script), as they would be. */
    cli_add_unless_ignored(&set, SIGINT);
    cli_add_unless_ignored(&set, SIGHUP);
    /* Before any thread starts: each inherits the mask. */
    sigprocmask(SIG_BLOCK, &set, NULL);
    stop->fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (stop->fd < 0)
        return sbx_fail_errno(err, errno, "signalfd");
    stop->w = ev_watch(loop, stop->fd, EPOLLIN, on_signal, NULL, err);
    return stop->w ? 0 : -1;
}

void cli_stop_free(struct cli_stop *stop)
{
    ev_unwatch(stop->w);
    stop->w = NULL;
    if (stop->fd >= 0)
        close(stop->fd);
    stop->fd = -1;
}
