/* A slot is one sandbox of the pool, from its build to its teardown:
 *
 *   SPAWNING  the spawner thread begins it (cgroup, clone, id maps)
 *   ARMING    its init builds the rest (root, caps, Landlock, seccomp) and says when armed
 *   READY     armed, waiting for a command
 *   STARTING  a client's command handed over, its exec not reported yet
 *   RUNNING   the command runs; the status socket says when it has ended
 *   ENDING    the client has its report; init ends (without a cgroup: the report waits for it,
 *             since the usage then comes from init's rusage)
 *   DYING     init went without a status record (killed, or the OOM killer's pick): its wait
 *             status is the report
 *
 * A slot is handed out once; once its init is gone the slot goes, and the pool builds another.
 * One watch per slot at a time: the setup fd (ARMING to STARTING: its EOF also says that an
 * armed init died), the status socket (RUNNING), init's pidfd (ENDING, DYING). */
#include "run_pool.h"

#include "jail/jail.h"
#include "lib/log.h"
#include "lib/run_pool_wire.h"
#include "lib/util.h"
#include "service/loop.h"
#include "service/spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

enum slot_state {
    SLOT_SPAWNING,
    SLOT_ARMING,
    SLOT_READY,
    SLOT_STARTING,
    SLOT_RUNNING,
    SLOT_ENDING,
    SLOT_DYING,
};

struct kind {
    struct run_pool *pool;
    struct sbx_profile profile;
    struct jail_build_key key;
    size_t ready, building; /* READY; SPAWNING and ARMING */
    bool built_once;
    unsigned failures;      /* builds failed in a row: refills back off */
    struct ev_timer *retry; /* set while backing off */
};

struct client;

struct slot {
    struct kind *kind;
    enum slot_state state;
    struct jail_spec spec;
    char name[32];
    struct jail *j;
    struct spawn_job job;
    int job_rc;
    struct sbx_err job_err;
    struct ev_watch *w;
    struct client *client; /* the one it serves, or waits for (claimed while building) */
    bool have_status;      /* the workload's record came (ENDING): */
    int exit_code, term_signal;
    struct slot *prev, *next;
};

struct client {
    struct run_pool *pool;
    int fd;
    struct ev_watch *w;
    struct ev_timer *timer; /* for its request; then, waiting for a slot, for that */
    struct slot *slot;
    bool requested;
    /* Refused at its connection (another uid, too many runs): told why once its first message
     * is read. Closed with that message unread, its run would get ECONNRESET, not the reason. */
    const char *refusal;
    char refusal_buf[64];
    /* A request that waits for a slot still in its setup. */
    char *msg_buf;
    struct run_pool_msg *req;
    int fds[3];
    struct client *prev, *next;
};

struct run_pool {
    struct ev_loop *loop;
    struct spawner *spawner;
    const struct sbx_config *cfg;
    struct kind kinds[SBX_MAX_PROFILES];
    size_t n_kinds;
    uint32_t size, max_clients, wait_ms;
    int listen_fd;
    ino_t socket_ino;
    struct ev_watch *listen_w;
    char *socket_path;
    struct slot *slots;
    struct client *clients;
    size_t n_clients;
    uint64_t built; /* names slots */
    bool stopping;
    char failure[SBX_ERR_MSG_MAX];
    void (*ready)(void *data);
    void *ready_data;
};

/* How long a connection may take to send its request. */
#define REQUEST_WAIT_MS 5000
/* Refills after failed builds wait 50 ms, doubling to this. */
#define RETRY_MAX_MS 5000

static void refill(struct kind *k);
static void slot_destroy(struct slot *s);
static void client_free(struct client *c);
static void on_setup(struct ev_loop *loop, int fd, uint32_t events, void *data);

/* --- messages ---------------------------------------------------------------------------- */

/* A client that cannot take a message is gone: its EOF or error comes next. */
static void send_msg(struct client *c, const char *buf, size_t n)
{
    if (n && send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)n)
        log_debug("run pool: a client did not take its message: %s", strerror(errno));
}

static void send_text(struct client *c, enum run_pool_type type, int code, const char *text)
{
    char buf[RUN_POOL_TEXT_MAX + 64];
    send_msg(c, buf, run_pool_encode_text(buf, sizeof(buf), type, code, text));
}

static void send_report(struct client *c, enum run_pool_type type, const struct run_pool_report *r)
{
    char buf[512];
    send_msg(c, buf, run_pool_encode_report(buf, sizeof(buf), type, r));
}

/* A miss ends the conversation: the client builds its own sandbox. */
static void miss(struct client *c, const char *why)
{
    send_text(c, RP_MISS, 0, why);
    client_free(c);
}

/* --- slots ------------------------------------------------------------------------------- */

static void set_state(struct slot *s, enum slot_state to)
{
    struct kind *k = s->kind;
    if (s->state == SLOT_READY)
        k->ready--;
    else if (s->state == SLOT_SPAWNING || s->state == SLOT_ARMING)
        k->building--;
    if (to == SLOT_READY)
        k->ready++;
    else if (to == SLOT_SPAWNING || to == SLOT_ARMING)
        k->building++;
    s->state = to;
}

/* Watches fd for the slot's next step. Without a watch nothing would ever end the slot: it
 * goes now (killed and reaped), and its client with it, which then sees the pool go. Returns
 * false then, s freed. */
static bool watch_slot(struct slot *s, int fd, ev_fd_cb cb)
{
    struct sbx_err err = {0};
    ev_unwatch(s->w);
    s->w = ev_watch(s->kind->pool->loop, fd, EPOLLIN, cb, s, &err);
    if (s->w)
        return true;
    log_warn("run pool: %s", err.msg);
    struct client *c = s->client;
    if (c) {
        s->client = NULL;
        c->slot = NULL;
        client_free(c);
    }
    slot_destroy(s);
    return false;
}

static void check_ready(struct run_pool *p)
{
    if (!p->ready)
        return;
    for (size_t i = 0; i < p->n_kinds; i++)
        if (p->kinds[i].ready < p->size)
            return;
    void (*cb)(void *) = p->ready;
    p->ready = NULL;
    cb(p->ready_data);
}

static void on_retry(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct kind *k = data;
    k->retry = NULL;
    refill(k);
}

/* A build that failed: the first of a kind stops the pool (it cannot serve that kind at all,
 * and says why); later ones back off. A client that waited for it builds its own sandbox. */
static void build_failed(struct slot *s, const char *why)
{
    struct kind *k = s->kind;
    struct run_pool *p = k->pool;
    struct client *c = s->client;
    if (c) {
        s->client = NULL;
        c->slot = NULL;
        miss(c, why);
    }
    /* The last of a kind's first builds to fail, none armed: that kind cannot be served. */
    if (!k->built_once && k->building <= 1 && !p->stopping) {
        snprintf(p->failure, sizeof(p->failure), "profile %s: %s", k->profile.name, why);
        p->stopping = true; /* no more builds: none would do better */
        ev_loop_stop(p->loop);
    } else if (!p->stopping) {
        log_warn("run pool: building a %s sandbox failed: %s", k->profile.name, why);
        k->failures++;
        if (!k->retry) {
            unsigned shift = k->failures < 8 ? k->failures : 8;
            uint64_t ms = 25ull << shift;
            k->retry = ev_timer_add(p->loop, ms < RETRY_MAX_MS ? ms : RETRY_MAX_MS, on_retry, k);
        }
    }
    slot_destroy(s);
}

static void spawn_run(struct spawn_job *job)
{
    struct slot *s = job->data;
    s->job_rc = jail_spawn_begin(&s->spec, &s->j, &s->job_err);
}

static void spawn_done(struct spawn_job *job)
{
    struct slot *s = job->data;
    if (s->job_rc < 0) {
        s->j = NULL; /* a failed begin destroyed its jail */
        build_failed(s, s->job_err.msg);
        return;
    }
    if (s->kind->pool->stopping) {
        slot_destroy(s);
        return;
    }
    set_state(s, SLOT_ARMING);
    watch_slot(s, s->j->setup_fd, on_setup);
}

static void refill(struct kind *k)
{
    struct run_pool *p = k->pool;
    while (!p->stopping && !k->retry && k->ready + k->building < p->size) {
        struct slot *s = xcalloc(1, sizeof(*s));
        s->kind = k;
        s->state = SLOT_SPAWNING;
        k->building++;
        snprintf(s->name, sizeof(s->name), "pool-%llu", (unsigned long long)++p->built);
        s->spec = (struct jail_spec){.profile = &k->profile,
                                     .cfg = p->cfg,
                                     .stdin_fd = -1,
                                     .stdout_fd = -1,
                                     .stderr_fd = -1,
                                     .name = s->name,
                                     .deferred = true};
        s->job = (struct spawn_job){.run = spawn_run, .done = spawn_done, .data = s};
        s->next = p->slots;
        if (p->slots)
            p->slots->prev = s;
        p->slots = s;
        spawner_submit(p->spawner, &s->job);
    }
}

static void slot_unlink(struct slot *s)
{
    struct run_pool *p = s->kind->pool;
    if (s->prev)
        s->prev->next = s->next;
    else
        p->slots = s->next;
    if (s->next)
        s->next->prev = s->prev;
}

/* Kills what is left, reaps, removes the cgroup; the kind builds another. */
static void slot_destroy(struct slot *s)
{
    struct kind *k = s->kind;
    ev_unwatch(s->w);
    s->w = NULL;
    if (s->client) {
        s->client->slot = NULL;
        s->client = NULL;
    }
    set_state(s, SLOT_ENDING); /* out of the counts */
    jail_destroy(s->j);
    slot_unlink(s);
    free(s);
    refill(k);
}

/* What the report needs of the cgroup, read from fds opened while the slot was ready (one
 * pread each then); without a cgroup, init's rusage. */
static void report_usage(struct slot *s, struct run_pool_report *r)
{
    if (s->j->cg && jail_read_memory_peak(s->j, &r->memory_peak_bytes) == 0 &&
        r->memory_peak_bytes) {
        if (jail_read_cpu_ns(s->j, &r->cpu_ns) < 0)
            r->cpu_ns = 0;
        r->oom_killed = jail_oom_killed(s->j);
    } else {
        /* No cgroup, or no memory.peak (before Linux 5.19): jail_read_usage's fallbacks. */
        struct jail_usage u;
        if (jail_read_usage(s->j, &u) == 0) {
            r->memory_peak_bytes = u.memory_peak_bytes;
            r->cpu_ns = u.cpu_ns;
            r->oom_killed = u.oom_killed;
        }
    }
    snprintf(r->limits_backend, sizeof(r->limits_backend), "%s", s->j->limits_backend);
    snprintf(r->degraded, sizeof(r->degraded), "%s", s->j->degraded);
    r->setup_ns = s->j->setup_ns;
    r->command_ns = s->j->command_ns;
}

/* The end of a run: its client gets the report and goes. */
static void send_ended(struct slot *s)
{
    struct client *c = s->client;
    if (!c)
        return;
    struct run_pool_report r = {.exit_code = s->exit_code, .term_signal = s->term_signal};
    report_usage(s, &r);
    send_report(c, RP_ENDED, &r);
    s->client = NULL;
    c->slot = NULL;
    client_free(c);
}

static void on_pidfd(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    struct slot *s = data;
    /* Without the workload's record, init's own wait status says how the sandbox ended. */
    int ignored_code, ignored_sig;
    int r = s->have_status ? jail_try_reap(s->j, &ignored_code, &ignored_sig)
                           : jail_try_reap(s->j, &s->exit_code, &s->term_signal);
    if (r == 0)
        return;
    send_ended(s);
    slot_destroy(s);
}

static void on_status(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    struct slot *s = data;
    int r = jail_workload_status(s->j, &s->exit_code, &s->term_signal);
    if (r == 0)
        return;
    /* A record: nothing of the command runs any more. With a cgroup its usage is there to read
     * now; without, it is init's rusage, which its wait status brings. */
    s->have_status = r == 1;
    set_state(s, r == 1 ? SLOT_ENDING : SLOT_DYING);
    if (s->have_status && s->j->cg)
        send_ended(s);
    watch_slot(s, s->j->pidfd, on_pidfd);
}

/* Hands a ready slot the client's command. */
static void dispatch(struct slot *s, struct client *c)
{
    struct sbx_err err = {0};
    int r = jail_start_command(s->j, (char *const *)c->req->argv, c->fds, &err);
    for (int i = 0; i < 3; i++)
        cleanup_closep(&c->fds[i]);
    if (r < 0) {
        /* Too long a command line for init to take: the sandbox is as it was. Anything else
         * and it is not to be trusted with another command. */
        s->client = NULL;
        c->slot = NULL;
        miss(c, err.msg);
        if (err.code != E2BIG)
            slot_destroy(s);
        return;
    }
    ev_timer_clear(&c->timer);
    s->client = c;
    c->slot = s;
    set_state(s, SLOT_STARTING);
    /* Its successor is built once it has ended (slot_destroy): building one now would compete
     * with the command for the kernel's locks (mounts, namespaces, cgroups), which slowed a
     * `run -- /bin/true` from 3.3 to 5.0 ms here. Unless none is left ready. */
    if (s->kind->ready == 0)
        refill(s->kind);
}

static void on_setup(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    struct slot *s = data;
    struct sbx_err err = {0};
    switch (s->state) {
    case SLOT_ARMING: {
        struct run_pool *p = s->kind->pool;
        /* Off epoll before the end of the setup may close the fd, watched again once armed. */
        ev_unwatch(s->w);
        s->w = NULL;
        if (jail_spawn_end(s->j, &err) < 0) {
            build_failed(s, err.msg);
            return;
        }
        if (!watch_slot(s, s->j->setup_fd, on_setup))
            return;
        s->kind->built_once = true;
        s->kind->failures = 0;
        set_state(s, SLOT_READY);
        if (s->j->cg) {
            struct run_pool_report primed;
            report_usage(s, &primed); /* opens what the report will read */
        }
        if (s->client) {
            struct client *c = s->client;
            s->client = NULL;
            dispatch(s, c); /* may destroy s */
        }
        check_ready(p);
        return;
    }
    case SLOT_READY:
        /* Nothing comes here while armed but the end of init. */
        log_warn("run pool: a ready %s sandbox ended by itself", s->kind->profile.name);
        slot_destroy(s);
        return;
    case SLOT_STARTING: {
        ev_unwatch(s->w); /* the report closes the fd */
        s->w = NULL;
        struct client *c = s->client;
        if (jail_command_end(s->j, &err) < 0) {
            if (c)
                send_text(c, RP_FAILED, err.code, err.msg);
            slot_destroy(s);
            if (c)
                client_free(c);
            return;
        }
        if (c) {
            struct run_pool_report r = {.setup_ns = s->j->setup_ns, .command_ns = s->j->command_ns};
            send_report(c, RP_STARTED, &r);
        }
        set_state(s, SLOT_RUNNING);
        watch_slot(s, s->j->status_fd, on_status);
        return;
    }
    default:
        return;
    }
}

/* The oldest ready slot of a kind, or else one of its builds that no client has claimed. */
static struct slot *find_slot(struct kind *k, bool *ready)
{
    struct slot *building = NULL, *best = NULL;
    for (struct slot *s = k->pool->slots; s; s = s->next) {
        if (s->kind != k || s->client)
            continue;
        if (s->state == SLOT_READY)
            best = s; /* the list is newest first: the last one seen is the oldest */
        else if (s->state == SLOT_SPAWNING || s->state == SLOT_ARMING)
            building = s;
    }
    *ready = best != NULL;
    return best ? best : building;
}

/* --- clients ----------------------------------------------------------------------------- */

/* What the client sent that was not read (a signal that crossed its report, a refused
 * request), with any fds it carried: a socket closed with messages unread makes the client's
 * next receive fail (ECONNRESET) before it reads what it was sent. */
static void drain(int fd)
{
    char buf[256];
    for (int i = 0; i < 64; i++) {
        int fds[MSG_FDS_MAX];
        size_t got;
        bool truncated;
        ssize_t n =
            recv_with_fds(fd, buf, sizeof(buf), MSG_DONTWAIT, fds, MSG_FDS_MAX, &got, &truncated);
        for (size_t k = 0; k < got; k++)
            close(fds[k]);
        if (n <= 0)
            return;
    }
}

static void client_free(struct client *c)
{
    struct run_pool *p = c->pool;
    if (c->slot) {
        struct slot *s = c->slot;
        s->client = NULL;
        c->slot = NULL;
        /* Its run went with it: what it started is killed (a build it waited for stays). */
        if (s->state == SLOT_STARTING || s->state == SLOT_RUNNING)
            jail_kill(s->j);
    }
    ev_timer_clear(&c->timer);
    ev_unwatch(c->w);
    drain(c->fd);
    close(c->fd);
    for (int i = 0; i < 3; i++)
        cleanup_closep(&c->fds[i]);
    free(c->req);
    free(c->msg_buf);
    if (c->prev)
        c->prev->next = c->next;
    else
        p->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    p->n_clients--;
    free(c);
}

static void on_client_timer(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct client *c = data;
    c->timer = NULL;
    if (c->slot) {
        /* Waited for a build too long: on its own the client is quicker now. */
        c->slot->client = NULL;
        c->slot = NULL;
        miss(c, "no sandbox of this kind became ready in time");
        return;
    }
    client_free(c); /* never sent its request */
}

static void answer_query(struct client *c)
{
    struct run_pool *p = c->pool;
    char text[RUN_POOL_TEXT_MAX] = "";
    size_t len = 0;
    for (size_t i = 0; i < p->n_kinds && len < sizeof(text); i++) {
        struct kind *k = &p->kinds[i];
        int n = snprintf(text + len, sizeof(text) - len, "%s ready=%zu size=%u building=%zu\n",
                         k->profile.name, k->ready, p->size, k->building);
        len += n > 0 ? (size_t)n : 0;
    }
    send_text(c, RP_STATE, 0, text);
    client_free(c);
}

/* Takes buf and m (the request points into buf), and the fds when there are three. */
static void take_request(struct client *c, char *buf, struct run_pool_msg *m, int *fds, int nfds)
{
    struct run_pool *p = c->pool;
    c->msg_buf = buf;
    c->req = m;
    if (nfds != 3) {
        miss(c, "a request must come with three fds (stdin, stdout, stderr)");
        return;
    }
    struct kind *k = NULL;
    for (size_t i = 0; i < p->n_kinds && !k; i++)
        if (m->key_len == sizeof(p->kinds[i].key) &&
            memcmp(m->key, &p->kinds[i].key, m->key_len) == 0)
            k = &p->kinds[i];
    if (!k) {
        miss(c, "the pool keeps no sandbox of this profile and these limits (or this build)");
        return;
    }
    memcpy(c->fds, fds, sizeof(c->fds));
    for (int i = 0; i < 3; i++)
        fds[i] = -1;
    bool ready = false;
    struct slot *s = find_slot(k, &ready);
    if (!s) {
        miss(c, "every sandbox of the pool is in use");
        return;
    }
    if (ready) {
        dispatch(s, c);
        return;
    }
    s->client = c;
    c->slot = s;
    ev_timer_clear(&c->timer);
    c->timer = ev_timer_add(p->loop, p->wait_ms, on_client_timer, c);
}

static void on_client(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)events;
    struct client *c = data;
    char *buf = xmalloc(RUN_POOL_MSG_MAX + 1);
    int fds[MSG_FDS_MAX];
    size_t got;
    bool truncated;
    ssize_t n = recv_with_fds(fd, buf, RUN_POOL_MSG_MAX + 1, MSG_DONTWAIT, fds, MSG_FDS_MAX, &got,
                              &truncated);
    if (n < 0 && errno == EAGAIN) {
        free(buf);
        return;
    }
    int nfds = (int)got;
    struct run_pool_msg *m = xcalloc(1, sizeof(*m));
    bool ok = n > 0 && !truncated && run_pool_decode(buf, (size_t)n, m);
    bool first = !c->requested;
    c->requested = true;
    if (c->refusal && n > 0) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        free(buf);
        free(m);
        miss(c, c->refusal);
        return;
    }
    if (ok && first && m->type == RP_REQUEST) {
        take_request(c, buf, m, fds, nfds);
        for (int i = 0; i < nfds; i++)
            cleanup_closep(&fds[i]);
        return;
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    free(buf);
    enum run_pool_type type = ok ? m->type : 0;
    int sig = m->sig;
    free(m);
    if (ok && first && type == RP_QUERY && nfds == 0) {
        answer_query(c);
        return;
    }
    struct slot *s = c->slot;
    if (ok && !first && nfds == 0 && s && s->state >= SLOT_STARTING &&
        (type == RP_SIGNAL || type == RP_KILL)) {
        /* Once the command has ended (ENDING, DYING) a signal finds nothing to reach: its
         * report is on the way. */
        bool running = s->state == SLOT_STARTING || s->state == SLOT_RUNNING;
        if (running && (type == RP_KILL || sig == SIGKILL))
            jail_kill(s->j);
        else if (running && sig != SIGSTOP)
            jail_signal(s->j, sig); /* init forwards it; SIGTSTP and SIGCONT stop all */
        return;
    }
    /* EOF, an error, or anything out of turn: the client is gone, and so is its run. */
    if (ok || n > 0)
        log_debug("run pool: a client sent a message out of turn or malformed; closed");
    client_free(c);
}

static void on_accept(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)events;
    struct run_pool *p = data;
    for (;;) {
        int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                log_warn("run pool: accept: %s", strerror(errno));
            return;
        }
        struct client *c = xcalloc(1, sizeof(*c));
        c->pool = p;
        c->fd = cfd;
        c->fds[0] = c->fds[1] = c->fds[2] = -1;
        c->next = p->clients;
        if (p->clients)
            p->clients->prev = c;
        p->clients = c;
        p->n_clients++;
        /* Past twice the runs it serves, a connection is closed unanswered: refusals are
         * bounded too. */
        if (p->n_clients > 2 * (size_t)p->max_clients) {
            client_free(c);
            continue;
        }
        struct ucred cred;
        socklen_t len = sizeof(cred);
        /* The socket is the pool's uid's alone (0600); the check stands even where someone
         * has loosened that. */
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
            snprintf(c->refusal_buf, sizeof(c->refusal_buf), "this pool serves uid %u only",
                     (unsigned)geteuid());
            c->refusal = c->refusal_buf;
        } else if (p->n_clients > p->max_clients) {
            c->refusal = "the pool serves as many runs as it takes already";
        }
        struct sbx_err err = {0};
        c->w = ev_watch(loop, cfd, EPOLLIN, on_client, c, &err);
        if (!c->w) {
            miss(c, err.msg);
            continue;
        }
        c->timer = ev_timer_add(loop, REQUEST_WAIT_MS, on_client_timer, c);
    }
}

/* --- the pool ---------------------------------------------------------------------------- */

/* A socket file at path: one a pool answers at is not ours to take; one nobody answers at is
 * left by a pool that died, and goes. */
static int clear_stale_socket(const char *path, struct sbx_err *err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : sbx_fail_errno(err, errno, "%s", path);
    if (!S_ISSOCK(st.st_mode))
        return sbx_fail(err, EEXIST, "%s exists and is not a socket", path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sbx_fail_errno(err, errno, "socket");
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
    int e = errno;
    close(fd);
    if (r == 0)
        return sbx_fail(err, EADDRINUSE, "another run pool serves %s", path);
    if (e != ECONNREFUSED)
        return sbx_fail_errno(err, e, "%s", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return sbx_fail_errno(err, errno, "removing the stale socket %s", path);
    return 0;
}

static int listen_at(struct run_pool *p, const char *path, struct sbx_err *err)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return sbx_fail(err, ENAMETOOLONG,
                        "the socket path %s is longer than a unix socket takes (%zu bytes)", path,
                        sizeof(a.sun_path) - 1);
    if (mkdir_parents(path, err) < 0 || clear_stale_socket(path, err) < 0)
        return -1;
    memcpy(a.sun_path, path, strlen(path) + 1);
    p->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (p->listen_fd < 0)
        return sbx_fail_errno(err, errno, "socket");
    mode_t old = umask(0177); /* created 0600, never wider for a moment */
    int r = bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a));
    int e = errno;
    umask(old);
    if (r < 0)
        return sbx_fail_errno(err, e, "binding %s", path);
    struct stat st;
    if (stat(path, &st) == 0)
        p->socket_ino = st.st_ino;
    p->socket_path = xstrdup(path);
    if (listen(p->listen_fd, 128) < 0)
        return sbx_fail_errno(err, errno, "listening at %s", path);
    p->listen_w = ev_watch(p->loop, p->listen_fd, EPOLLIN, on_accept, p, err);
    return p->listen_w ? 0 : -1;
}

int run_pool_new(struct ev_loop *loop, const struct run_pool_options *o, struct run_pool **out,
                 struct sbx_err *err)
{
    struct run_pool *p = xcalloc(1, sizeof(*p));
    p->loop = loop;
    p->cfg = o->cfg;
    p->size = o->size;
    p->max_clients = o->max_clients;
    p->wait_ms = o->wait_ms;
    p->ready = o->ready;
    p->ready_data = o->ready_data;
    p->listen_fd = -1;
    for (size_t i = 0; i < o->n_profiles && i < SBX_MAX_PROFILES; i++) {
        struct kind *k = &p->kinds[p->n_kinds++];
        k->pool = p;
        k->profile = o->profiles[i];
        jail_build_key(&k->profile, o->cfg, &k->key);
    }
    if (spawner_new(loop, &p->spawner, err) < 0 || listen_at(p, o->socket_path, err) < 0) {
        run_pool_free(p);
        return -1;
    }
    for (size_t i = 0; i < p->n_kinds; i++)
        refill(&p->kinds[i]);
    *out = p;
    return 0;
}

const char *run_pool_failure(const struct run_pool *p)
{
    return p && p->failure[0] ? p->failure : NULL;
}

void run_pool_free(struct run_pool *p)
{
    if (!p)
        return;
    p->stopping = true;
    ev_unwatch(p->listen_w);
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    /* Only our own socket goes: a pool started since may have taken the path. */
    struct stat st;
    if (p->socket_path && stat(p->socket_path, &st) == 0 && st.st_ino == p->socket_ino)
        unlink(p->socket_path);
    free(p->socket_path);
    while (p->clients)
        client_free(p->clients);
    /* Builds not begun are taken back; the one under way ends in spawner_free, whose done
     * destroys it (stopping); every other sandbox goes here. */
    for (struct slot *s = p->slots, *next; s; s = next) {
        next = s->next;
        if (s->state != SLOT_SPAWNING) {
            slot_destroy(s);
        } else if (spawner_cancel(p->spawner, &s->job)) {
            set_state(s, SLOT_ENDING);
            slot_unlink(s);
            free(s);
        }
    }
    spawner_free(p->spawner);
    for (size_t i = 0; i < p->n_kinds; i++)
        ev_timer_clear(&p->kinds[i].retry);
    free(p);
}
