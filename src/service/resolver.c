/* Each job is shared by the loop and at most one lookup thread, with a reference count of two
 * while both hold it. The thread writes only the job's result fields and then a pointer-sized
 * notification to a datagram socket; the loop reads the notification and takes the result. If
 * the resolver goes away first, the thread's notification fails harmlessly and whichever side
 * drops the last reference frees the job. */
#include "resolver.h"

#include "service/loop.h"
#include "util.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_RUNNING       32 /* lookups at once; more wait in line */
#define MAX_RUNNING_OWNER 2  /* of one owner (a sandbox's proxy), cancelled ones included */

struct notify_socket {
    int fd; /* the threads' end */
    atomic_int refs;
};

struct resolver_job {
    struct resolver *r;
    struct notify_socket *notify;
    char host[256];
    char port[8];
    resolver_fn fn;
    void *data;
    uint64_t owner;
    bool started, cancelled; /* loop thread only */
    atomic_int refs;
    struct addrinfo *res; /* written by the thread before it notifies */
    int gai_error;
    int sys_errno; /* errno after getaddrinfo: a fresh thread's starts at 0 */
    struct resolver_job *next;
};

struct resolver {
    struct ev_loop *loop;
    int fd; /* the loop's end */
    struct ev_watch *w;
    struct notify_socket *notify;
    struct resolver_job *jobs; /* started or waiting, oldest first */
    size_t running;
};

static void notify_release(struct notify_socket *n)
{
    if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) == 1) {
        close(n->fd);
        free(n);
    }
}

static void job_release(struct resolver_job *job)
{
    if (atomic_fetch_sub_explicit(&job->refs, 1, memory_order_acq_rel) == 1) {
        if (job->res)
            freeaddrinfo(job->res);
        free(job);
    }
}

static void *lookup_thread(void *arg)
{
    struct resolver_job *job = arg;
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    errno = 0;
    job->gai_error = getaddrinfo(job->host, job->port, &hints, &job->res);
    job->sys_errno = errno;
    struct notify_socket *n = job->notify;
    ssize_t sent = send(n->fd, &job, sizeof(job), MSG_NOSIGNAL);
    (void)sent; /* the resolver is gone: nobody waits for this job */
    job_release(job);
    notify_release(n);
    return NULL;
}

static void unlink_job(struct resolver *r, struct resolver_job *job)
{
    for (struct resolver_job **pp = &r->jobs; *pp; pp = &(*pp)->next)
        if (*pp == job) {
            *pp = job->next;
            return;
        }
}

/* The lookups running now, by owner, those cancelled included: their threads hold a slot until
 * getaddrinfo returns, which a silent DNS server can make 30 s or more. There are at most
 * MAX_RUNNING, so a short array counted once per pass serves every job in line. */
struct owner_running {
    uint64_t owner;
    size_t n;
};

static size_t *running_of(struct owner_running *busy, size_t *n_busy, uint64_t owner)
{
    for (size_t i = 0; i < *n_busy; i++)
        if (busy[i].owner == owner)
            return &busy[i].n;
    assert(*n_busy < MAX_RUNNING);
    busy[*n_busy] = (struct owner_running){.owner = owner};
    return &busy[(*n_busy)++].n;
}

/* Oldest first, but no owner gets more than MAX_RUNNING_OWNER at once: a sandbox asking for
 * names that never resolve cannot make every other sandbox's lookups wait behind its own. */
static void start_waiting(struct resolver *r)
{
    if (r->running >= MAX_RUNNING)
        return;
    /* One entry per owner of a started job, and one per job started in this pass: at most
     * MAX_RUNNING in all. */
    struct owner_running busy[MAX_RUNNING];
    size_t n_busy = 0;
    for (const struct resolver_job *job = r->jobs; job; job = job->next)
        if (job->started)
            (*running_of(busy, &n_busy, job->owner))++;
    for (struct resolver_job *job = r->jobs; job && r->running < MAX_RUNNING; job = job->next) {
        if (job->started)
            continue;
        size_t *owner_running = running_of(busy, &n_busy, job->owner);
        if (*owner_running >= MAX_RUNNING_OWNER)
            continue;
        (*owner_running)++;
        job->started = true;
        r->running++;
        atomic_store(&job->refs, 2);
        atomic_fetch_add(&r->notify->refs, 1);
        job->notify = r->notify;
        pthread_attr_t attr;
        pthread_t tid;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 << 10);
        /* The loop owns every signal (signalfd); a lookup thread takes none. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = pthread_create(&tid, &attr, lookup_thread, job);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        if (e != 0) {
            /* No thread: the job fails through the same path, from the loop. */
            atomic_store(&job->refs, 1);
            notify_release(r->notify);
            job->gai_error = EAI_SYSTEM;
            job->sys_errno = e;
            ssize_t sent = send(r->notify->fd, &job, sizeof(job), MSG_NOSIGNAL);
            (void)sent;
        }
    }
}

/* glibc can answer EAI_NONAME ("Name or service not known") when it could not open a socket or
 * /etc/hosts for want of file descriptors (glibc 2.36): the name is fine and the server is
 * out of fds, which is what the sandbox's client is told. EAI_SYSTEM's cause is in errno. */
static void describe_failure(const struct resolver_job *job, char *why, size_t n)
{
    int e = job->sys_errno;
    if (job->gai_error == EAI_SYSTEM && e)
        snprintf(why, n, "%s", strerror(e));
    else if (e == EMFILE || e == ENFILE || e == ENOMEM)
        snprintf(why, n, "the lookup could not be made here (%s)", strerror(e));
    else
        snprintf(why, n, "%s", gai_strerror(job->gai_error));
}

static void on_notify(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)events;
    struct resolver *r = data;
    struct resolver_job *job;
    while (recv(fd, &job, sizeof(job), MSG_DONTWAIT) == (ssize_t)sizeof(job)) {
        unlink_job(r, job);
        r->running--;
        struct addrinfo *res = job->res;
        job->res = NULL;
        if (job->cancelled) {
            if (res)
                freeaddrinfo(res);
        } else {
            char why[160] = "";
            if (!res)
                describe_failure(job, why, sizeof(why));
            job->fn(res, job->gai_error, res ? NULL : why, job->data);
        }
        job_release(job);
    }
    start_waiting(r);
}

int resolver_new(struct ev_loop *loop, struct resolver **out, struct sbx_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
        return sbx_fail_errno(err, errno, "resolver: socketpair");
    struct resolver *r = xcalloc(1, sizeof(*r));
    r->loop = loop;
    r->fd = sv[0];
    r->notify = xcalloc(1, sizeof(*r->notify));
    r->notify->fd = sv[1];
    atomic_init(&r->notify->refs, 1);
    r->w = ev_watch(loop, r->fd, EPOLLIN, on_notify, r, err);
    if (!r->w) {
        resolver_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

void resolver_free(struct resolver *r)
{
    if (!r)
        return;
    ev_unwatch(r->w);
    close(r->fd);
    while (r->jobs) {
        struct resolver_job *job = r->jobs;
        r->jobs = job->next;
        if (!job->started) {
            free(job);
            continue;
        }
        job_release(job); /* a running thread frees it when it is done */
    }
    notify_release(r->notify);
    free(r);
}

struct resolver_job *resolver_lookup(struct resolver *r, uint64_t owner, const char *host,
                                     uint16_t port, resolver_fn fn, void *data)
{
    struct resolver_job *job = xcalloc(1, sizeof(*job));
    job->r = r;
    job->owner = owner;
    snprintf(job->host, sizeof(job->host), "%s", host);
    snprintf(job->port, sizeof(job->port), "%u", port);
    job->fn = fn;
    job->data = data;
    atomic_init(&job->refs, 1);
    struct resolver_job **pp = &r->jobs;
    while (*pp)
        pp = &(*pp)->next;
    *pp = job;
    start_waiting(r);
    return job;
}

void resolver_cancel(struct resolver_job *job)
{
    if (job->started) {
        job->cancelled = true; /* its notification still comes, and frees it */
        return;
    }
    unlink_job(job->r, job);
    free(job);
}
