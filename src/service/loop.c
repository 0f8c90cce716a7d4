#include "loop.h"

#include "util.h"

#include <string.h>
#include <sys/timerfd.h>

struct ev_watch {
    struct ev_loop *loop;
    int fd;
    ev_fd_cb cb;
    void *data;
    bool dead;
    struct ev_watch *next_dead;
};

/* Timers are kept in a binary min-heap behind one timerfd, so thousands of deadlines
 * cost one fd and O(log n) each. */
struct ev_timer {
    struct ev_loop *loop;
    uint64_t due_ns;
    ev_timer_cb cb;
    void *data;
    size_t heap_idx; /* SIZE_MAX when not in the heap */
};

struct ev_loop {
    int epfd;
    int timerfd;
    bool stop;
    struct ev_watch *dead; /* unwatched during dispatch, freed after the batch */
    struct ev_timer **heap;
    size_t heap_len, heap_cap;
    uint64_t armed_ns; /* when the timerfd fires next; 0 when it is not armed */
    struct ev_task *tasks, **tasks_tail;
    uint64_t task_turn; /* run_tasks calls so far: a task posted during one waits for the next */
};

static void heap_swap(struct ev_loop *l, size_t a, size_t b)
{
    struct ev_timer *t = l->heap[a];
    l->heap[a] = l->heap[b];
    l->heap[b] = t;
    l->heap[a]->heap_idx = a;
    l->heap[b]->heap_idx = b;
}

static void heap_up(struct ev_loop *l, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (l->heap[p]->due_ns <= l->heap[i]->due_ns)
            break;
        heap_swap(l, p, i);
        i = p;
    }
}

static void heap_down(struct ev_loop *l, size_t i)
{
    for (;;) {
        size_t a = 2 * i + 1, b = a + 1, m = i;
        if (a < l->heap_len && l->heap[a]->due_ns < l->heap[m]->due_ns)
            m = a;
        if (b < l->heap_len && l->heap[b]->due_ns < l->heap[m]->due_ns)
            m = b;
        if (m == i)
            return;
        heap_swap(l, i, m);
        i = m;
    }
}

static void heap_remove(struct ev_loop *l, struct ev_timer *t)
{
    size_t i = t->heap_idx;
    if (i == SIZE_MAX)
        return;
    l->heap_len--;
    if (i != l->heap_len) {
        l->heap[i] = l->heap[l->heap_len];
        l->heap[i]->heap_idx = i;
        heap_down(l, i);
        heap_up(l, i);
    }
    t->heap_idx = SIZE_MAX;
}

/* Arms the timerfd for the earliest timer, but only when that is earlier than what it is
 * armed for: a timerfd that fires too early (its timer was cancelled or pushed back) costs
 * one idle wake-up, while re-arming on every add and cancel cost a syscall per execution. */
static void rearm(struct ev_loop *l)
{
    if (!l->heap_len)
        return;
    uint64_t due = l->heap[0]->due_ns;
    if (l->armed_ns && l->armed_ns <= due)
        return;
    struct itimerspec its = {0};
    its.it_value.tv_sec = (time_t)(due / 1000000000ull);
    its.it_value.tv_nsec = (long)(due % 1000000000ull);
    timerfd_settime(l->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
    l->armed_ns = due;
}

int ev_loop_new(struct ev_loop **out, struct sbx_err *err)
{
    struct ev_loop *l = xcalloc(1, sizeof(*l));
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        free(l);
        return sbx_fail_errno(err, errno, "epoll_create1");
    }
    l->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (l->timerfd < 0) {
        int e = errno;
        close(l->epfd);
        free(l);
        return sbx_fail_errno(err, e, "timerfd_create");
    }
    /* data.ptr NULL marks the timerfd. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->timerfd, &ev) < 0) {
        int e = errno;
        close(l->timerfd);
        close(l->epfd);
        free(l);
        return sbx_fail_errno(err, e, "epoll_ctl(timerfd)");
    }
    l->tasks_tail = &l->tasks;
    *out = l;
    return 0;
}

static void free_dead(struct ev_loop *l)
{
    while (l->dead) {
        struct ev_watch *w = l->dead;
        l->dead = w->next_dead;
        free(w);
    }
}

void ev_loop_free(struct ev_loop *l)
{
    if (!l)
        return;
    free_dead(l);
    for (size_t i = 0; i < l->heap_len; i++)
        free(l->heap[i]);
    free(l->heap);
    close(l->timerfd);
    close(l->epfd);
    free(l);
}

struct ev_watch *ev_watch(struct ev_loop *l, int fd, uint32_t events, ev_fd_cb cb, void *data,
                          struct sbx_err *err)
{
    struct ev_watch *w = xcalloc(1, sizeof(*w));
    w->loop = l;
    w->fd = fd;
    w->cb = cb;
    w->data = data;
    struct epoll_event ev = {.events = events, .data.ptr = w};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        sbx_fail_errno(err, errno, "epoll_ctl(add fd %d)", fd);
        free(w);
        return NULL;
    }
    return w;
}

int ev_watch_modify(struct ev_watch *w, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = w};
    return epoll_ctl(w->loop->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void ev_unwatch(struct ev_watch *w)
{
    if (!w || w->dead)
        return;
    epoll_ctl(w->loop->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->dead = true;
    w->next_dead = w->loop->dead;
    w->loop->dead = w;
}

struct ev_timer *ev_timer_add(struct ev_loop *l, uint64_t ms, ev_timer_cb cb, void *data)
{
    struct ev_timer *t = xcalloc(1, sizeof(*t));
    t->loop = l;
    t->due_ns = now_ns() + ms * 1000000ull;
    t->cb = cb;
    t->data = data;
    if (l->heap_len == l->heap_cap) {
        l->heap_cap = l->heap_cap ? l->heap_cap * 2 : 16;
        l->heap = xrealloc(l->heap, l->heap_cap * sizeof(*l->heap));
    }
    t->heap_idx = l->heap_len;
    l->heap[l->heap_len++] = t;
    heap_up(l, t->heap_idx);
    rearm(l);
    return t;
}

uint64_t ev_timer_due(const struct ev_timer *t)
{
    return t->due_ns;
}

void ev_timer_cancel(struct ev_timer *t)
{
    if (!t)
        return;
    struct ev_loop *l = t->loop;
    heap_remove(l, t);
    free(t);
    rearm(l);
}

void ev_timer_clear(struct ev_timer **t)
{
    ev_timer_cancel(*t);
    *t = NULL;
}

static void run_timers(struct ev_loop *l)
{
    uint64_t expirations;
    /* One read resets the expiration count (the fd is non-blocking); it has fired. */
    if (read(l->timerfd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
        return;
    uint64_t now = now_ns();
    l->armed_ns = 0;
    while (l->heap_len && l->heap[0]->due_ns <= now && !l->stop) {
        struct ev_timer *t = l->heap[0];
        heap_remove(l, t);
        t->cb(l, t->data);
        free(t);
    }
    rearm(l);
}

void ev_task_post(struct ev_loop *l, struct ev_task *t)
{
    if (t->queued)
        return;
    t->queued = true;
    t->turn = l->task_turn;
    t->next = NULL;
    *l->tasks_tail = t;
    l->tasks_tail = &t->next;
}

void ev_task_cancel(struct ev_loop *l, struct ev_task *t)
{
    if (!t->queued)
        return;
    for (struct ev_task **pp = &l->tasks; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            if (l->tasks_tail == &t->next)
                l->tasks_tail = pp;
            break;
        }
    t->queued = false;
    t->next = NULL;
}

/* Runs the tasks queued before this call; those they post wait for the next turn. One at a
 * time off the queue itself, so that a task may cancel another still queued (and free it). */
static void run_tasks(struct ev_loop *l)
{
    uint64_t turn = l->task_turn++;
    while (l->tasks && l->tasks->turn <= turn && !l->stop) {
        struct ev_task *t = l->tasks;
        l->tasks = t->next;
        if (!l->tasks)
            l->tasks_tail = &l->tasks;
        t->next = NULL;
        t->queued = false;
        t->cb(l, t->data);
    }
}

int ev_loop_run(struct ev_loop *l)
{
    struct epoll_event evs[64];
    l->stop = false;
    while (!l->stop) {
        run_tasks(l);
        if (l->stop)
            break;
        int n = epoll_wait(l->epfd, evs, (int)ARRAY_SIZE(evs), l->tasks ? 0 : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        for (int i = 0; i < n && !l->stop; i++) {
            struct ev_watch *w = evs[i].data.ptr;
            if (!w) {
                run_timers(l);
                continue;
            }
            if (w->dead)
                continue;
            w->cb(l, w->fd, evs[i].events, w->data);
        }
        free_dead(l);
    }
    return 0;
}

void ev_loop_stop(struct ev_loop *l)
{
    l->stop = true;
}

bool ev_loop_stopping(const struct ev_loop *l)
{
    return l->stop;
}
