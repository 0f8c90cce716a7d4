/* Sandboxes whose interpreter or init died, through the real service: what the next call
 * hears, and whether the way out the error names still works later on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service_fixture.h"
#include "service_peer.h"
#include "service/metrics.h"

/* The host pid of init's child (the interpreter), waiting up to 2 s for one; 0 if none. */
static pid_t interpreter_of(pid_t init)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init, (int)init);
    for (int i = 0; i < 20000; i++) {
        char *text = NULL;
        size_t len = 0;
        long pid = 0;
        if (read_file_max(path, 4096, &text, &len) == 0)
            pid = strtol(text, NULL, 10);
        free(text);
        if (pid > 0)
            return (pid_t)pid;
        usleep(100);
    }
    return 0;
}

/* Kills each interpreter as soon as init has started it, long before it could be ready (the
 * loop turns only to hear of the death and start the next), until the sandbox gives up. */
static void kill_interpreters_until_broken(struct sandbox *sb)
{
    pid_t init = sb->jail->pid;
    for (int round = 0; round < 20 && sb->state != SBX_BROKEN; round++) {
        pid_t pid = interpreter_of(init);
        assert_true(pid > 0);
        kill(pid, SIGKILL);
        unsigned was = sb->restarts;
        for (int i = 0; i < 2000 && sb->restarts == was && sb->state != SBX_BROKEN; i++)
            run_loop_ms(1);
    }
    assert_int_equal(sb->state, SBX_BROKEN);
}

/* A sandbox of p's (ids 10 and 11) that ran once, then broken by interpreters that keep dying. */
static struct sandbox *broken_sandbox(struct peer *p, char *sid, size_t size)
{
    create_sandbox_as(p, 10, sid, size);
    json_t *r = tool(p, 11, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "1"));
    assert_false(is_error(r));
    json_decref(r);
    struct sandbox *sb = sandbox_find(svc, sid);
    kill_interpreters_until_broken(sb);
    return sb;
}

/* An interpreter that dies before it is ready, again and again, breaks the sandbox; a reset
 * (which kills every process there first) starts one again. That must hold after the ready
 * timeout of the interpreters that died has passed too: theirs is no one's timeout now. */
static void a_sandbox_whose_interpreter_kept_dying_can_still_be_reset(void **state)
{
    (void)state;
    svc->ready_timeout_ms = 1500;
    struct peer p;
    peer_init(&p, "tester");
    char sid[32];
    broken_sandbox(&p, sid, sizeof(sid));
    json_t *r = tool(&p, 12, "get_sandbox_status", json_pack("{s:s}", "sandbox_id", sid));
    assert_non_null(strstr(json_string_value(json_object_get(structured(r), "broken_reason")),
                           "keeps dying at startup"));
    json_decref(r);
    run_loop_ms(2000); /* past the ready timeout armed for the first of them */
    r = tool(&p, 13, "reset_sandbox", json_pack("{s:s}", "sandbox_id", sid));
    assert_false(is_error(r));
    json_decref(r);
    r = tool(&p, 14, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "6*7"));
    assert_false(is_error(r));
    assert_string_equal(json_string_value(json_object_get(structured(r), "result")), "42");
    json_decref(r);
    svc->ready_timeout_ms = 60000;
    mcp_session_free(p.s);
    json_decref(p.inbox);
}

static json_int_t restarts_reported(struct peer *p, int id, const char *sid)
{
    json_t *r = tool(p, id, "get_sandbox_status", json_pack("{s:s}", "sandbox_id", sid));
    json_int_t n = json_integer_value(
        json_object_get(json_object_get(structured(r), "interpreter"), "restarts"));
    json_decref(r);
    return n;
}

/* Two resets at once, a run, then the interpreter killed: restarts as reported before and
 * after the death (ids first..first+4). */
static void reset_twice_run_then_kill(struct peer *p, struct sandbox *sb, const char *sid,
                                      int first, int *before, int *after)
{
    for (int id = first; id <= first + 1; id++) {
        json_t *r = tool(p, id, "reset_sandbox", json_pack("{s:s}", "sandbox_id", sid));
        assert_false(is_error(r));
        json_decref(r);
    }
    json_t *r =
        tool(p, first + 2, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "6*7"));
    assert_false(is_error(r));
    json_decref(r);
    *before = restarts_reported(p, first + 3, sid);
    pid_t pid = interpreter_of(sb->jail->pid);
    assert_true(pid > 0);
    kill(pid, SIGKILL);
    for (int i = 0; i < 3000 && !(sb->state == SBX_READY && sb->idle_death.pending); i++)
        run_loop_ms(1);
    assert_int_equal(sb->state, SBX_READY);
    *after = restarts_reported(p, first + 4, sid);
}

/* A reset of a sandbox without an interpreter starts one from a timer, not from a status
 * record; a second reset before that timer fires killed nothing, and must not make the death
 * of the interpreter the timer starts pass for a reset's restart. */
static void a_second_reset_before_the_revival_leaves_later_deaths_counted(void **state)
{
    (void)state;
    struct peer p;
    peer_init(&p, "tester");
    char sid[32];
    struct sandbox *sb = broken_sandbox(&p, sid, sizeof(sid));
    /* Both answer at once: the second comes long before the revival's timer. A real death
     * after them is counted. */
    int before, after;
    reset_twice_run_then_kill(&p, sb, sid, 12, &before, &after);
    assert_int_equal(before, 0);
    assert_int_equal(after, 1);
    /* The same with a living interpreter: each reset's kill is its own restart, none a death. */
    reset_twice_run_then_kill(&p, sb, sid, 17, &before, &after);
    assert_int_equal(before, 0);
    assert_int_equal(after, 1);
    mcp_session_free(p.s);
    json_decref(p.inbox);
}

/* The sandbox itself ends (its init died) while it waits, without an interpreter, for a reset:
 * nothing can start one now, and the reason said from then on is that, not the reset it named
 * before. */
static void a_sandbox_whose_init_died_says_so_even_when_it_was_broken_before(void **state)
{
    (void)state;
    struct peer p;
    peer_init(&p, "tester");
    char sid[32];
    struct sandbox *sb = broken_sandbox(&p, sid, sizeof(sid));
    json_t *r;
    kill(sb->jail->pid, SIGKILL);
    run_loop_ms(300);
    r = tool(&p, 12, "get_sandbox_status", json_pack("{s:s}", "sandbox_id", sid));
    assert_string_equal(json_string_value(json_object_get(structured(r), "broken_reason")),
                        "the sandbox ended unexpectedly; close it and create a new one");
    json_decref(r);
    r = tool(&p, 13, "reset_sandbox", json_pack("{s:s}", "sandbox_id", sid));
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "ended unexpectedly"));
    json_decref(r);
    r = tool(&p, 14, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "1"));
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "ended unexpectedly"));
    json_decref(r);
    mcp_session_free(p.s);
    json_decref(p.inbox);
}

static struct sandbox *pooled_sandbox(void)
{
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        if (sb->pooled)
            return sb;
    return NULL;
}

/* An interpreter that died in the warm pool held nobody's state: the sandbox handed out has
 * had no restarts, as far as its owner can tell. */
static void restarts_in_the_pool_are_not_the_owners(void **state)
{
    (void)state;
    struct peer p;
    peer_init(&p, "tester");
    cfg.profiles[0].pool_size = 1;
    svc->refill_paused = false;
    char first[32];
    create_sandbox_as(&p, 10, first, sizeof(first)); /* schedules the refill */
    struct sandbox *pooled = NULL;
    for (int i = 0; i < 3000 && !(pooled && pooled->state == SBX_READY); i++) {
        run_loop_ms(10);
        pooled = pooled_sandbox();
    }
    assert_non_null(pooled);
    assert_int_equal(pooled->state, SBX_READY);
    char pooled_id[32];
    snprintf(pooled_id, sizeof(pooled_id), "%s", pooled->id);
    pid_t pid = interpreter_of(pooled->jail->pid);
    assert_true(pid > 0);
    kill(pid, SIGKILL);
    for (int i = 0; i < 3000 && !(pooled->restarts_total == 1 && pooled->state == SBX_READY); i++)
        run_loop_ms(10);
    assert_int_equal(pooled->state, SBX_READY);
    cfg.profiles[0].pool_size = 0;

    char sid[32];
    create_sandbox_as(&p, 11, sid, sizeof(sid));
    assert_string_equal(sid, pooled_id);
    json_t *r = tool(&p, 12, "get_sandbox_status", json_pack("{s:s}", "sandbox_id", sid));
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(structured(r), "interpreter"), "restarts")),
                     0);
    json_decref(r);
    mcp_session_free(p.s);
    json_decref(p.inbox);
}

/* The wall clock set back (by an administrator, or NTP stepping it) must not keep an idle
 * sandbox alive for as long again, nor one set forward close every sandbox at once: the idle
 * and lifetime limits measure time that has passed, not the dates shown. */
static void the_idle_ttl_is_not_the_wall_clocks(void **state)
{
    (void)state;
    struct peer p;
    peer_init(&p, "tester");
    char sid[32];
    create_sandbox_as(&p, 10, sid, sizeof(sid));
    char busy[32];
    create_sandbox_as(&p, 11, busy, sizeof(busy));
    /* As if the clock had since been set back a day (sid) and forward a day (busy). */
    struct sandbox *sb = sandbox_find(svc, sid);
    sb->created_ms = sb->last_used_ms = (int64_t)wall_ms() + 86400 * 1000ll;
    sb = sandbox_find(svc, busy);
    sb->created_ms = sb->last_used_ms = (int64_t)wall_ms() - 86400 * 1000ll;
    /* A sweep comes within 5 s: neither is idle or old. */
    for (int i = 0; i < 55; i++) {
        run_loop_ms(100);
        assert_non_null(sandbox_find(svc, busy));
    }
    assert_non_null(sandbox_find(svc, sid));
    /* Idle for more than a second now, whatever the clock says. */
    unsigned ttl = cfg.idle_ttl_s;
    cfg.idle_ttl_s = 1;
    for (int i = 0; i < 80 && sandbox_find(svc, sid); i++)
        run_loop_ms(100);
    assert_null(sandbox_find(svc, sid));
    cfg.idle_ttl_s = ttl;
    mcp_session_free(p.s);
    json_decref(p.inbox);
}

/* mcp_pool_ready counts warm sandboxes with a ready interpreter: one whose interpreter died
 * there, or that broke, is not one, from that moment (not from the next sweep or create). */
static void the_pool_ready_gauge_follows_a_pooled_sandbox_that_breaks(void **state)
{
    (void)state;
    cfg.profiles[0].pool_size = 1;
    svc->refill_paused = false;
    struct sandbox *made = NULL;
    struct sbx_err err = {0};
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &made, &err) < 0) /* schedules a refill */
        fail_msg("create: %s", err.msg);
    struct sandbox *pooled = NULL;
    for (int i = 0; i < 3000 && !(pooled && pooled->state == SBX_READY); i++) {
        run_loop_ms(10);
        pooled = pooled_sandbox();
    }
    assert_non_null(pooled);
    assert_int_equal(pooled->state, SBX_READY);
    assert_true(metrics_value("mcp_pool_ready", "") == 1.0);
    cfg.profiles[0].pool_size = 0; /* no refill to replace it meanwhile */
    kill_interpreters_until_broken(pooled);
    assert_true(metrics_value("mcp_pool_ready", "") == 0.0);
    sandbox_close(pooled, NULL);
    sandbox_close(made, NULL);
    run_loop_ms(50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_sandbox_whose_interpreter_kept_dying_can_still_be_reset),
        cmocka_unit_test(a_second_reset_before_the_revival_leaves_later_deaths_counted),
        cmocka_unit_test(a_sandbox_whose_init_died_says_so_even_when_it_was_broken_before),
        cmocka_unit_test(restarts_in_the_pool_are_not_the_owners),
        cmocka_unit_test(the_idle_ttl_is_not_the_wall_clocks),
        cmocka_unit_test(the_pool_ready_gauge_follows_a_pooled_sandbox_that_breaks),
    };
    return cmocka_run_group_tests(tests, service_setup, service_teardown);
}
