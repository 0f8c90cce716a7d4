#include "run_pool_client.h"

#include "util.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

int run_pool_socket_path(const struct sbx_config *cfg, char **out, struct sbx_err *err)
{
    if (cfg->run_pool_socket && cfg->run_pool_socket[0]) {
        *out = xstrdup(cfg->run_pool_socket);
        return 0;
    }
    char *dir = NULL;
    if (config_state_dir(cfg, &dir, err) < 0)
        return -1;
    *out = xasprintf("%s/run-pool.sock", dir);
    free(dir);
    return 0;
}

/* Non-blocking throughout: a pool that is stopped or swamped (its backlog full) is a miss at
 * once, never a wait. */
static int connect_to(const char *path, struct sbx_err *why)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return sbx_fail(why, ENAMETOOLONG, "the pool's socket path is too long: %s", path);
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return sbx_fail_errno(why, errno, "socket");
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;
        close(fd);
        return sbx_fail_errno(why, e, "no run pool answers at %s", path);
    }
    /* Our command, its input and its output go only to a pool of our own uid: anyone else
     * listening at the path (a shared directory, a state directory taken from another user's
     * environment) could answer for a sandbox it never built. */
    struct ucred cred = {.uid = (uid_t)-1};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
        close(fd);
        return sbx_fail(why, EPERM, "the run pool at %s is not this user's (uid %u)", path,
                        (unsigned)cred.uid);
    }
    return fd;
}

/* One message, without waiting. A pool that closed with a message of ours unread leaves
 * ECONNRESET to be read first; what it sent before is still there behind it. */
static ssize_t recv_message(int fd, char *buf, size_t size)
{
    ssize_t n = recv(fd, buf, size, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && errno == ECONNRESET)
        n = recv(fd, buf, size, MSG_DONTWAIT | MSG_TRUNC);
    return n;
}

/* One whole message, waited for at most wait_ms (-1: as long as it takes). False with errno
 * ETIMEDOUT when none came, EPROTO when the pool closed or sent something unreadable. */
static bool receive(int fd, int wait_ms, char *buf, size_t size, struct run_pool_msg *m)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, wait_ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        errno = ETIMEDOUT;
        return false;
    }
    ssize_t n = recv_message(fd, buf, size);
    if (n > 0 && (size_t)n <= size && run_pool_decode(buf, (size_t)n, m))
        return true;
    errno = EPROTO;
    return false;
}

enum run_pool_answer run_pool_offer(const char *path, const void *key, size_t key_len,
                                    char *const *argv, const int stdio[3], int wait_ms, int *fd,
                                    struct run_pool_report *started, struct sbx_err *why)
{
    *fd = -1;
    static char buf[RUN_POOL_MSG_MAX];
    size_t len = run_pool_encode_request(buf, sizeof(buf), key, key_len, argv);
    if (len == 0) {
        sbx_fail(why, E2BIG, "the command line is longer than the run pool takes");
        return RUN_POOL_MISSED;
    }
    int c = connect_to(path, why);
    if (c < 0)
        return RUN_POOL_MISSED;
    static struct run_pool_msg m;
    int sent = send_with_fds(c, buf, len, stdio, 3);
    if (sent < 0) {
        /* A pool that refuses at once has closed before the request went: its answer is
         * waiting all the same. */
        int e = -sent;
        if (!receive(c, 0, buf, sizeof(buf), &m) || m.type != RP_MISS) {
            sbx_fail_errno(why, e, "the run pool did not take the request");
            close(c);
            return RUN_POOL_MISSED;
        }
    } else if (!receive(c, wait_ms, buf, sizeof(buf), &m)) {
        if (errno == ETIMEDOUT)
            sbx_fail(why, ETIMEDOUT, "the run pool gave no answer within %d ms", wait_ms);
        else
            sbx_fail(why, EPROTO, "the run pool closed without an answer");
        close(c);
        return RUN_POOL_MISSED;
    }
    switch (m.type) {
    case RP_STARTED:
        *started = m.report;
        *fd = c;
        return RUN_POOL_SERVED;
    case RP_FAILED:
        sbx_fail(why, m.code > 0 ? m.code : EIO, "%s", m.text);
        close(c);
        return RUN_POOL_FAILED;
    case RP_MISS:
        sbx_fail(why, EAGAIN, "%s", m.text);
        break;
    default:
        sbx_fail(why, EPROTO, "the run pool answered out of turn");
        break;
    }
    close(c);
    return RUN_POOL_MISSED;
}

int run_pool_signal(int fd, int sig)
{
    char buf[16];
    size_t n = sig == SIGKILL ? run_pool_encode_bare(buf, sizeof(buf), RP_KILL)
                              : run_pool_encode_signal(buf, sizeof(buf), sig);
    return send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n ? 0 : -errno;
}

int run_pool_take_end(int fd, struct run_pool_report *ended)
{
    char buf[1024];
    ssize_t n = recv_message(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    static struct run_pool_msg m;
    if (n <= 0 || (size_t)n > sizeof(buf) || !run_pool_decode(buf, (size_t)n, &m) ||
        m.type != RP_ENDED)
        return -1;
    *ended = m.report;
    return 1;
}

int run_pool_query(const char *path, char *text, size_t size, struct sbx_err *err)
{
    int fd = connect_to(path, err);
    if (fd < 0)
        return -1;
    char buf[RUN_POOL_TEXT_MAX + 64];
    size_t n = run_pool_encode_bare(buf, sizeof(buf), RP_QUERY);
    static struct run_pool_msg m;
    int rc = 0;
    if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
        rc = sbx_fail_errno(err, errno, "asking the run pool at %s", path);
    else if (!receive(fd, 5000, buf, sizeof(buf), &m) || m.type != RP_STATE)
        rc = sbx_fail(err, EPROTO, "the run pool at %s gave no answer", path);
    else
        snprintf(text, size, "%s", m.text);
    close(fd);
    return rc;
}
