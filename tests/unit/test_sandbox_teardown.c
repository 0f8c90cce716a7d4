/* Closed sandboxes are torn down while the loop serves others (their init's exit takes a
 * millisecond or more), but never more than limits.max_sandboxes of them at once: they still
 * hold their memory and cgroups, so past that a close waits for its sandbox to be gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "service_fixture.h"

static void closes_past_max_sandboxes_dying_at_once_wait_for_the_sandbox(void **state)
{
    (void)state;
    cfg.max_sandboxes = 2;
    pid_t inits[4];
    /* Two rounds of two, and the loop never runs meanwhile: nothing gets buried by it. */
    for (int i = 0; i < 4; i += 2) {
        struct sandbox *sb[2];
        for (int k = 0; k < 2; k++) {
            struct sbx_err err = {0};
            if (sandbox_create(svc, "tester", NULL, NULL, NULL, &sb[k], &err) < 0)
                fail_msg("create: %s", err.msg);
            inits[i + k] = sb[k]->jail->pid;
        }
        for (int k = 0; k < 2; k++)
            sandbox_close(sb[k], NULL);
    }
    /* The first two are dying (killed, not yet reaped); the last two were waited for. */
    assert_int_equal(svc->n_dying, 2);
    for (int i = 2; i < 4; i++) {
        assert_int_equal(kill(inits[i], 0), -1);
        assert_int_equal(errno, ESRCH);
    }
    /* The loop buries the others. */
    for (int spins = 0; spins < 100 && svc->dying; spins++) {
        run_loop_ms(20);
    }
    assert_null(svc->dying);
    assert_int_equal(svc->n_dying, 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kill(inits[i], 0), -1);
        assert_int_equal(errno, ESRCH);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(closes_past_max_sandboxes_dying_at_once_wait_for_the_sandbox),
    };
    return cmocka_run_group_tests(tests, service_setup, service_teardown);
}
