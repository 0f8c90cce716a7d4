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
#include <stdio.h>
#include <string.h>
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

static int again_rc = 1;
static char again_why[SBX_ERR_MSG_MAX];

static void run_again(struct exec *e)
{
    struct sbx_err err = {0};
    again_rc = sandbox_exec_argv(e->sb, NULL, "pip", "again", json_pack("[s]", "/bin/true"),
                                 json_object(), "/", 1000, NULL, NULL, NULL, &err);
    snprintf(again_why, sizeof(again_why), "%s", err.msg);
}

/* A run's done that asks for another run while its sandbox closes (install_packages' check
 * does) is refused: that run would be queued after the close had ended every run, so nothing
 * would ever end it, answer its call or free it. */
static void a_run_asked_for_while_its_sandbox_closes_is_refused(void **state)
{
    (void)state;
    struct sandbox *sb = NULL;
    struct sbx_err err = {0};
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &sb, &err) < 0)
        fail_msg("create: %s", err.msg);
    assert_int_equal(sandbox_exec_argv(sb, NULL, "pip", "first",
                                       json_pack("[s,s]", "/bin/sleep", "30"), json_object(), "/",
                                       60000, run_again, NULL, NULL, &err),
                     0);
    sandbox_close(sb, NULL);
    assert_int_equal(again_rc, -1);
    assert_non_null(strstr(again_why, "is closing"));
    for (int spins = 0; spins < 100 && svc->dying; spins++)
        run_loop_ms(20);
    assert_null(svc->dying);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(closes_past_max_sandboxes_dying_at_once_wait_for_the_sandbox),
        cmocka_unit_test(a_run_asked_for_while_its_sandbox_closes_is_refused),
    };
    return cmocka_run_group_tests(tests, service_setup, service_teardown);
}
