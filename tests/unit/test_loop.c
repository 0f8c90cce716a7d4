/* The event loop: timers fire in deadline order, cancel works, fds dispatch, stop stops, tasks
 * run once per post on the next turn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/loop.h"

static char order[16];
static size_t norder;

static void mark(struct ev_loop *l, void *data)
{
    order[norder++] = *(const char *)data;
    if (norder == 3)
        ev_loop_stop(l);
}

static void timers_fire_in_deadline_order(void **state)
{
    (void)state;
    struct ev_loop *l = NULL;
    assert_int_equal(ev_loop_new(&l, NULL), 0);
    norder = 0;
    static const char a = 'a', b = 'b', c = 'c', x = 'x';
    ev_timer_add(l, 30, mark, (void *)&c);
    ev_timer_add(l, 10, mark, (void *)&a);
    struct ev_timer *t = ev_timer_add(l, 15, mark, (void *)&x);
    ev_timer_add(l, 20, mark, (void *)&b);
    ev_timer_cancel(t);
    assert_int_equal(ev_loop_run(l), 0);
    assert_memory_equal(order, "abc", 3);
    ev_loop_free(l);
}

static int got_bytes;

static void on_read(struct ev_loop *l, int fd, uint32_t events, void *data)
{
    (void)events;
    char buf[8];
    got_bytes += (int)read(fd, buf, sizeof(buf));
    ev_unwatch(data ? *(struct ev_watch **)data : NULL);
    ev_loop_stop(l);
}

static void fd_watch_dispatches_and_unwatches(void **state)
{
    (void)state;
    struct ev_loop *l = NULL;
    assert_int_equal(ev_loop_new(&l, NULL), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    static struct ev_watch *w;
    w = ev_watch(l, p[0], EPOLLIN, on_read, &w, NULL);
    assert_non_null(w);
    assert_int_equal(write(p[1], "hey", 3), 3);
    got_bytes = 0;
    assert_int_equal(ev_loop_run(l), 0);
    assert_int_equal(got_bytes, 3);
    close(p[0]);
    close(p[1]);
    ev_loop_free(l);
}

static void bad_fd_is_an_error_not_a_crash(void **state)
{
    (void)state;
    struct ev_loop *l = NULL;
    struct sbx_err err = {0};
    assert_int_equal(ev_loop_new(&l, NULL), 0);
    assert_null(ev_watch(l, 9999, EPOLLIN, on_read, NULL, &err));
    assert_true(strstr(err.msg, "epoll_ctl") != NULL);
    ev_loop_free(l);
}

/* The timerfd is re-armed lazily: a timer earlier than the one it is armed for must still
 * fire first (if it did not, this test would wait a minute for the late one). */
static void earlier_timer_rearms_the_timerfd(void **state)
{
    (void)state;
    struct ev_loop *l = NULL;
    assert_int_equal(ev_loop_new(&l, NULL), 0);
    norder = 0;
    static const char a = 'a', b = 'b', c = 'c', z = 'z';
    ev_timer_add(l, 60000, mark, (void *)&z);
    struct ev_timer *gone = ev_timer_add(l, 5, mark, (void *)&z);
    ev_timer_add(l, 30, mark, (void *)&c);
    ev_timer_cancel(gone); /* the timerfd stays armed for it and fires idle */
    ev_timer_add(l, 10, mark, (void *)&a);
    ev_timer_add(l, 20, mark, (void *)&b);
    assert_int_equal(ev_loop_run(l), 0);
    assert_memory_equal(order, "abc", 3);
    ev_loop_free(l);
}

static int task_runs;
static struct ev_task tasks[3];

static void count_task(struct ev_loop *l, void *data)
{
    (void)l;
    task_runs += *(const int *)data;
}

static void repost_task(struct ev_loop *l, void *data)
{
    (void)data;
    /* A task posted by a task waits for the next turn, so this cannot spin inside one turn. */
    if (++task_runs < 5)
        ev_task_post(l, &tasks[2]);
    else
        ev_loop_stop(l);
}

static void tasks_run_once_per_post(void **state)
{
    (void)state;
    struct ev_loop *l = NULL;
    assert_int_equal(ev_loop_new(&l, NULL), 0);
    static const int one = 1, hundred = 100;
    memset(tasks, 0, sizeof(tasks));
    task_runs = 0;
    tasks[0] = (struct ev_task){.cb = count_task, .data = (void *)&one};
    tasks[1] = (struct ev_task){.cb = count_task, .data = (void *)&hundred};
    tasks[2] = (struct ev_task){.cb = repost_task};
    ev_task_post(l, &tasks[0]);
    ev_task_post(l, &tasks[0]); /* already queued: runs once */
    ev_task_post(l, &tasks[1]);
    ev_task_cancel(l, &tasks[1]);
    assert_false(tasks[1].queued);
    ev_task_post(l, &tasks[2]);
    assert_int_equal(ev_loop_run(l), 0);
    /* tasks[0] once (1), tasks[1] never, tasks[2] four times until the fifth stops. */
    assert_int_equal(task_runs, 5);
    assert_false(tasks[0].queued);
    ev_loop_free(l);
}

/* A task that cancels and frees another queued in the same turn (a call cancelled while its
 * wake-up waits behind another task): the freed one is not run. */
static struct ev_task *doomed;

static void cancel_doomed(struct ev_loop *l, void *data)
{
    (void)data;
    ev_task_cancel(l, doomed);
    free(doomed);
    doomed = NULL;
}

static void stop_task(struct ev_loop *l, void *data)
{
    (void)data;
    ev_loop_stop(l);
}

static void a_task_may_cancel_and_free_another_of_its_turn(void **state)
{
    (void)state;
    struct ev_loop *l = NULL;
    assert_int_equal(ev_loop_new(&l, NULL), 0);
    static const int ten = 10;
    task_runs = 0;
    struct ev_task first = {.cb = cancel_doomed}, last = {.cb = stop_task};
    doomed = calloc(1, sizeof(*doomed));
    *doomed = (struct ev_task){.cb = count_task, .data = (void *)&ten};
    ev_task_post(l, &first);
    ev_task_post(l, doomed);
    ev_task_post(l, &last);
    assert_int_equal(ev_loop_run(l), 0); /* under ASan: no use after free */
    assert_int_equal(task_runs, 0);
    assert_null(doomed);
    ev_loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_task_may_cancel_and_free_another_of_its_turn),
        cmocka_unit_test(timers_fire_in_deadline_order),
        cmocka_unit_test(fd_watch_dispatches_and_unwatches),
        cmocka_unit_test(bad_fd_is_an_error_not_a_crash),
        cmocka_unit_test(earlier_timer_rearms_the_timerfd),
        cmocka_unit_test(tasks_run_once_per_post),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
