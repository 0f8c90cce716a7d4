/* The event loop: timers fire in deadline order, cancel works, fds dispatch, stop stops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timers_fire_in_deadline_order),
        cmocka_unit_test(fd_watch_dispatches_and_unwatches),
        cmocka_unit_test(bad_fd_is_an_error_not_a_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
