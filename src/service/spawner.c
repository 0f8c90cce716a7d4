/* One thread and two lists under one lock, both oldest first: jobs waiting, and jobs ended
 * whose done has not been called. Whoever takes a job off the ended list (the loop's notification,
 * or spawner_await) calls its done, so each done is called once. */
#include "spawner.h"

#include "service/loop.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct spawner {
    struct ev_loop *loop;
    int notify_fd; /* eventfd: written by the thread once per ended job */
    struct ev_watch *w;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work;  /* to the thread: a job came, or stop */
    pthread_cond_t ended; /* to spawner_await: a job ended */
    struct spawn_job *queue, **queue_tail;
    struct spawn_job *done_list, **done_tail; /* ended, done not called yet; oldest first */
    bool stop;
};

/* Puts job at the end of a list (the queue, or the ended ones). Under the lock. */
static void append(struct spawn_job ***tail, struct spawn_job *job)
{
    job->next = NULL;
    **tail = job;
    *tail = &job->next;
}

/* Takes job off a list (the queue, or the ended ones); false if it is not there. Under the
 * lock. */
static bool take(struct spawn_job **head, struct spawn_job ***tail, struct spawn_job *job)
{
    for (struct spawn_job **pp = head; *pp; pp = &(*pp)->next)
        if (*pp == job) {
            *pp = job->next;
            if (!*pp)
                *tail = pp;
            return true;
        }
    return false;
}

static void *spawner_main(void *arg)
{
    struct spawner *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->queue && !s->stop)
            pthread_cond_wait(&s->work, &s->lock);
        struct spawn_job *job = s->queue;
        if (!job)
            break;
        take(&s->queue, &s->queue_tail, job);
        pthread_mutex_unlock(&s->lock);

        job->run(job);

        pthread_mutex_lock(&s->lock);
        job->ended = true;
        append(&s->done_tail, job);
        pthread_cond_broadcast(&s->ended);
        uint64_t one = 1;
        ssize_t w = write(s->notify_fd, &one, sizeof(one));
        (void)w; /* the counter cannot overflow at one per job */
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static bool take_ended(struct spawner *s, struct spawn_job *job)
{
    return take(&s->done_list, &s->done_tail, job);
}

static void call_done(struct spawn_job *job)
{
    job->next = NULL;
    job->done(job);
}

/* One job at a time, the lock released for its done: a done may await or submit another. */
static void on_notify(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)events;
    struct spawner *s = data;
    uint64_t count;
    ssize_t r = read(fd, &count, sizeof(count));
    (void)r; /* EAGAIN: spawner_await took them all */
    for (;;) {
        pthread_mutex_lock(&s->lock);
        struct spawn_job *job = s->done_list;
        if (job)
            take_ended(s, job);
        pthread_mutex_unlock(&s->lock);
        if (!job)
            return;
        call_done(job);
    }
}

/* What spawner_new made, the thread aside. */
static void release(struct spawner *s)
{
    ev_unwatch(s->w);
    if (s->notify_fd >= 0)
        close(s->notify_fd);
    pthread_cond_destroy(&s->ended);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int spawner_new(struct ev_loop *loop, struct spawner **out, struct sbx_err *err)
{
    struct spawner *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->queue_tail = &s->queue;
    s->done_tail = &s->done_list;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->ended, NULL);
    s->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->notify_fd < 0) {
        sbx_fail_errno(err, errno, "the spawner's eventfd");
        goto fail;
    }
    s->w = ev_watch(loop, s->notify_fd, EPOLLIN, on_notify, s, err);
    if (!s->w)
        goto fail;
    /* Signals are the loop's; the sandboxes' inits set their own masks. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&s->thread, NULL, spawner_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        sbx_fail_errno(err, e, "starting the spawner thread");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    release(s);
    return -1;
}

void spawner_submit(struct spawner *s, struct spawn_job *job)
{
    job->ended = job->hurried = false;
    pthread_mutex_lock(&s->lock);
    append(&s->queue_tail, job);
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
}

void spawner_hurry(struct spawner *s, struct spawn_job *job)
{
    pthread_mutex_lock(&s->lock);
    if (!job->hurried && take(&s->queue, &s->queue_tail, job)) {
        struct spawn_job **pp = &s->queue;
        while (*pp && (*pp)->hurried)
            pp = &(*pp)->next;
        job->hurried = true;
        job->next = *pp;
        *pp = job;
        if (!job->next)
            s->queue_tail = &job->next;
    }
    pthread_mutex_unlock(&s->lock);
}

void spawner_await(struct spawner *s, struct spawn_job *job)
{
    pthread_mutex_lock(&s->lock);
    while (!job->ended)
        pthread_cond_wait(&s->ended, &s->lock);
    bool mine = take_ended(s, job);
    pthread_mutex_unlock(&s->lock);
    if (mine)
        call_done(job);
}

bool spawner_cancel(struct spawner *s, struct spawn_job *job)
{
    pthread_mutex_lock(&s->lock);
    bool taken = take(&s->queue, &s->queue_tail, job);
    pthread_mutex_unlock(&s->lock);
    return taken;
}

void spawner_free(struct spawner *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL); /* after the queue has run */
    on_notify(s->loop, s->notify_fd, EPOLLIN, s);
    release(s);
}
