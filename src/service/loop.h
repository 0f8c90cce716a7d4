/* The one event loop that owns all service state: epoll for fds, timerfd for deadlines,
 * signalfd for signals, pidfd for child exits. Single-threaded; the hot path takes no locks. */
#ifndef SBX_LOOP_H
#define SBX_LOOP_H

#include "err.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct ev_loop;
struct ev_watch;
struct ev_timer;

/* events is the epoll mask that fired (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR ...). */
typedef void (*ev_fd_cb)(struct ev_loop *loop, int fd, uint32_t events, void *data);
typedef void (*ev_timer_cb)(struct ev_loop *loop, void *data);

int ev_loop_new(struct ev_loop **out, struct sbx_err *err);
/* Frees the loop; watches and timers still registered are freed too (fds are not closed). */
void ev_loop_free(struct ev_loop *loop);

/* Watch fd. The returned handle stays valid until ev_unwatch. The loop never closes fd. */
struct ev_watch *ev_watch(struct ev_loop *loop, int fd, uint32_t events, ev_fd_cb cb, void *data,
                          struct sbx_err *err);
int ev_watch_modify(struct ev_watch *w, uint32_t events);
/* Safe to call from inside any callback, including the watch's own. */
void ev_unwatch(struct ev_watch *w);

/* One-shot timer after ms milliseconds. Cancel with ev_timer_cancel (safe inside callbacks;
 * a timer that has fired is freed by the loop after its callback returns, so do not cancel
 * it from its own callback). */
struct ev_timer *ev_timer_add(struct ev_loop *loop, uint64_t ms, ev_timer_cb cb, void *data);
/* A NULL timer is nothing to cancel. */
void ev_timer_cancel(struct ev_timer *t);
/* Cancels *t if it is set, and clears it. */
void ev_timer_clear(struct ev_timer **t);
/* When the timer is due (CLOCK_MONOTONIC, ns, the clock of now_ns()). */
uint64_t ev_timer_due(const struct ev_timer *t);

/* A callback to run once on this turn of the loop, after the events at hand have been
 * dispatched and before the loop waits again: "soon", without a timer or a syscall. The
 * caller owns the struct (zeroed before first use); posting it again while it is queued does
 * nothing, and a task posted by a task runs on the next turn. Cancel it before freeing it. */
struct ev_task {
    ev_timer_cb cb;
    void *data;
    bool queued;
    uint64_t turn; /* the loop's */
    struct ev_task *next;
};
void ev_task_post(struct ev_loop *loop, struct ev_task *t);
void ev_task_cancel(struct ev_loop *loop, struct ev_task *t);

/* Runs until ev_loop_stop. Returns 0, or -1 on an epoll failure. */
int ev_loop_run(struct ev_loop *loop);
void ev_loop_stop(struct ev_loop *loop);
bool ev_loop_stopping(const struct ev_loop *loop);

#endif
