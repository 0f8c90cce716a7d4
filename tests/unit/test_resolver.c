/* Lookups off the loop: results arrive through the loop, more lookups than threads queue up,
 * a cancelled lookup never calls back, freeing the resolver with lookups in flight leaks
 * nothing (the sanitizer tier runs this too), and one owner's lookups that hang (a DNS server
 * that never answers) do not hold up another's, and a lookup that fails for want of file
 * descriptors says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#include "service/loop.h"
#include "service/resolver.h"

static int answered, loopback_seen, failed;

static void on_result(struct addrinfo *res, int gai_error, const char *why, void *data)
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
    (void)why;
    if (answered == 20)
        ev_loop_stop(loop);
}

static void on_never(struct addrinfo *res, int gai_error, const char *why, void *data)
{
    (void)res;
    (void)gai_error;
    (void)why;
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
        resolver_lookup(r, 0, "localhost", 8765, on_result, loop);
    resolver_lookup(r, 0, "no-such-host.invalid", 80, on_result, loop);
    struct resolver_job *gone = resolver_lookup(r, 0, "localhost", 1, on_never, NULL);
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
        resolver_lookup(r, 0, "localhost", 80, on_never, NULL);
    resolver_free(r);
    ev_loop_free(loop);
    /* the threads finish on their own and free their jobs */
    usleep(200000);
}

/* A world of this process's own (mount and network namespaces) whose only DNS server, on
 * 127.0.0.1, never answers: 1 if made, 0 where that is not allowed (not root). */
static int silent_dns_world(void)
{
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) < 0)
        return 0;
    char conf[] = "/tmp/sbx-resolv-XXXXXX";
    int fd = mkstemp(conf);
    const char text[] = "nameserver 127.0.0.1\noptions timeout:2 attempts:1\n";
    struct ifreq lo = {.ifr_flags = IFF_UP};
    snprintf(lo.ifr_name, sizeof(lo.ifr_name), "lo");
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in dns = {.sin_family = AF_INET, .sin_port = htons(53)};
    dns.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = fd >= 0 && write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1 &&
              mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
              mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) == 0 &&
              ioctl(s, SIOCSIFFLAGS, &lo) == 0 &&
              bind(s, (struct sockaddr *)&dns, sizeof(dns)) == 0; /* never read */
    unlink(conf);
    if (!ok) {
        fprintf(stderr, "silent DNS world: %m\n");
        exit(3);
    }
    return 1;
}

static int fair_answered;
static uint64_t fair_answer_ms;

static void on_fair(struct addrinfo *res, int gai_error, const char *why, void *data)
{
    (void)gai_error;
    (void)why;
    fair_answered = res != NULL;
    fair_answer_ms = now_ms();
    if (res)
        freeaddrinfo(res);
    ev_loop_stop(data);
}

static int slow_answered;

static void on_slow(struct addrinfo *res, int gai_error, const char *why, void *data)
{
    (void)gai_error;
    (void)why;
    (void)data;
    slow_answered++;
    if (res)
        freeaddrinfo(res);
}

/* In a child, where a sandbox (owner a) asks for more names than lookups run at once (it
 * used to take every thread), all of them hanging: another (owner b) is still answered at
 * once. The control: none of a's lookups has been answered by then. */
static void one_owners_hanging_lookups_do_not_hold_up_another(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!silent_dns_world())
            _exit(77);
        struct ev_loop *loop = NULL;
        struct resolver *r = NULL;
        if (ev_loop_new(&loop, NULL) < 0 || resolver_new(loop, &r, NULL) < 0)
            _exit(4);
        char name[64];
        for (int i = 0; i < 40; i++) {
            snprintf(name, sizeof(name), "slow-%d.example", i);
            resolver_lookup(r, 1, name, 443, on_slow, NULL);
        }
        uint64_t t0 = now_ms();
        resolver_lookup(r, 2, "localhost", 80, on_fair, loop);
        ev_timer_add(loop, 10000, give_up, NULL);
        ev_loop_run(loop);
        uint64_t took = fair_answer_ms - t0;
        fprintf(stderr, "b answered %d after %llu ms; a's answered by then: %d\n", fair_answered,
                (unsigned long long)took, slow_answered);
        _exit(fair_answered && took < 1000 && slow_answered == 0 ? 0 : 5);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77)
        skip(); /* no namespaces here (not root): nothing to test it with */
    assert_int_equal(WEXITSTATUS(st), 0);
}

static char emfile_why[200];
static int emfile_answered;

static void on_emfile(struct addrinfo *res, int gai_error, const char *why, void *data)
{
    (void)gai_error;
    emfile_answered = 1;
    snprintf(emfile_why, sizeof(emfile_why), "%s", res ? "resolved" : why ? why : "(null)");
    if (res)
        freeaddrinfo(res);
    ev_loop_stop(data);
}

/* In a child out of file descriptors, glibc answers "System error" (or "Name or service not
 * known") for any name: the lookup's failure says what the error was. */
static void a_lookup_out_of_fds_says_so(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct ev_loop *loop = NULL;
        struct resolver *r = NULL;
        if (ev_loop_new(&loop, NULL) < 0 || resolver_new(loop, &r, NULL) < 0)
            _exit(4);
        while (dup(0) >= 0)
            ;
        resolver_lookup(r, 1, "localhost", 80, on_emfile, loop);
        ev_timer_add(loop, 10000, give_up, NULL);
        ev_loop_run(loop);
        fprintf(stderr, "answered %d: %s\n", emfile_answered, emfile_why);
        _exit(emfile_answered && strstr(emfile_why, "Too many open files") ? 0 : 5);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lookups_answer_through_the_loop),
        cmocka_unit_test(freeing_with_lookups_in_flight_is_safe),
        cmocka_unit_test(one_owners_hanging_lookups_do_not_hold_up_another),
        cmocka_unit_test(a_lookup_out_of_fds_says_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
