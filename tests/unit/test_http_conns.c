/* Connection deadlines: a request's headers, then its body, then none while it is answered;
 * a connection past its deadline is shut down (its peer reads EOF), and only once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/http_conns.h"

/* Whether the other end of a pair was shut down (EOF) rather than still open (EAGAIN). */
static bool peer_ended(int fd)
{
    char b;
    return recv(fd, &b, 1, MSG_DONTWAIT) == 0;
}

static void headers_then_body_then_none(void **state)
{
    (void)state;
    struct http_conns l = {.headers_ms = 100, .body_ms = 400};
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct http_conn *c = http_conn_add(&l, sv[0], 1000);
    assert_int_equal(l.n, 1);
    assert_int_equal(http_conns_expire(&l, 1099), 0);
    assert_false(peer_ended(sv[1]));
    http_conn_headers_done(&l, c, 1050); /* the body is due at 1450 */
    assert_int_equal(http_conns_expire(&l, 1449), 0);
    assert_int_equal(http_conns_answering(&l), 0);
    http_conn_body_done(c);                        /* answered for as long as it takes */
    assert_int_equal(http_conns_answering(&l), 1); /* what a stopping server waits for */
    assert_int_equal(http_conns_expire(&l, 1000000), 0);
    assert_false(peer_ended(sv[1]));
    http_conn_request_done(&l, c, 2000); /* the next request's headers: due at 2100 */
    assert_int_equal(http_conns_answering(&l), 0);
    assert_int_equal(http_conns_expire(&l, 2099), 0);
    assert_int_equal(http_conns_expire(&l, 2100), 1);
    assert_true(peer_ended(sv[1]));
    assert_int_equal(http_conns_expire(&l, 9999), 0); /* once */
    http_conn_remove(&l, c);
    assert_int_equal(l.n, 0);
    assert_null(l.head);
    close(sv[0]);
    close(sv[1]);
}

static void a_dribbling_body_is_cut_and_others_are_not(void **state)
{
    (void)state;
    struct http_conns l = {.headers_ms = 100, .body_ms = 400};
    int a[2], b[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, a), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, b), 0);
    struct http_conn *slow = http_conn_add(&l, a[0], 0);
    struct http_conn *quick = http_conn_add(&l, b[0], 0);
    http_conn_headers_done(&l, slow, 50);
    http_conn_headers_done(&l, quick, 50);
    http_conn_body_done(quick);
    assert_int_equal(http_conns_expire(&l, 450), 1);
    assert_true(peer_ended(a[1]));
    assert_false(peer_ended(b[1]));
    http_conn_remove(&l, quick);
    http_conn_remove(&l, slow);
    http_conn_remove(&l, NULL);
    assert_int_equal(l.n, 0);
    for (int i = 0; i < 2; i++)
        close(a[i]), close(b[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(headers_then_body_then_none),
        cmocka_unit_test(a_dribbling_body_is_cut_and_others_are_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
