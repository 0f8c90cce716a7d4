/* Lookups off the loop: results arrive through the loop, more lookups than threads queue up,
 * a cancelled lookup never calls back, and freeing the resolver with lookups in flight leaks
 * nothing (the sanitizer tier runs this too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "service/loop.h"
#include "service/resolver.h"

static int answered, loopback_seen, failed;

static void on_result(struct addrinfo *res, int gai_error, void *data)
{
    struct ev_loop *loop = data;
    answered++;
    if (!res)
        failed++;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET &&
            ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
            ntohs(((struct sockaddr_in *)a->ai_addr)->sin_port) == 8765)
            loopback_seen++;
    }
    if (res)
        freeaddrinfo(res);
    (void)gai_error;
    if (answered == 20)
        ev_loop_stop(loop);
}

static void on_never(struct addrinfo *res, int gai_error, void *data)
{
    (void)res;
    (void)gai_error;
    (void)data;
    fail_msg("a cancelled lookup called back");
}

static void give_up(struct ev_loop *loop, void *data)
{
    (void)data;
    ev_loop_stop(loop);
}

static void lookups_answer_through_the_loop(void **state)
{
    (void)state;
    struct ev_loop *loop = NULL;
    struct resolver *r = NULL;
    assert_int_equal(ev_loop_new(&loop, NULL), 0);
    assert_int_equal(resolver_new(loop, &r, NULL), 0);
    answered = loopback_seen = failed = 0;
    /* more than run at once: the rest wait their turn */
    for (int i = 0; i < 19; i++)
        resolver_lookup(r, "localhost", 8765, on_result, loop);
    resolver_lookup(r, "no-such-host.invalid", 80, on_result, loop);
    struct resolver_job *gone = resolver_lookup(r, "localhost", 1, on_never, NULL);
    resolver_cancel(gone);
    struct ev_timer *t = ev_timer_add(loop, 20000, give_up, NULL);
    assert_int_equal(ev_loop_run(loop), 0);
    ev_timer_cancel(t);
    assert_int_equal(answered, 20);
    assert_int_equal(loopback_seen, 19);
    assert_int_equal(failed, 1);
    resolver_free(r);
    ev_loop_free(loop);
}

static void freeing_with_lookups_in_flight_is_safe(void **state)
{
    (void)state;
    struct ev_loop *loop = NULL;
    struct resolver *r = NULL;
    assert_int_equal(ev_loop_new(&loop, NULL), 0);
    assert_int_equal(resolver_new(loop, &r, NULL), 0);
    for (int i = 0; i < 12; i++)
        resolver_lookup(r, "localhost", 80, on_never, NULL);
    resolver_free(r);
    ev_loop_free(loop);
    /* the threads finish on their own and free their jobs */
    usleep(200000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lookups_answer_through_the_loop),
        cmocka_unit_test(freeing_with_lookups_in_flight_is_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
