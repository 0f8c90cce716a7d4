/* The string-keyed map behind the per-call lookups, checked against a plain array model under
 * random puts and removals (removal shifts entries back, the subtle part), with a tiny map
 * forced to wrap around its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strmap.h"

#define KEYS 3000

static char keys[KEYS][16];
static int values[KEYS];

static void get_put_replace_and_remove(void **state)
{
    (void)state;
    struct strmap m;
    strmap_init(&m);
    assert_null(strmap_get(&m, "a"));
    assert_false(strmap_del(&m, "a", NULL));
    int one = 1, two = 2;
    strmap_put(&m, "a", &one);
    assert_ptr_equal(strmap_get(&m, "a"), &one);
    strmap_put(&m, "a", &two); /* replaces */
    assert_ptr_equal(strmap_get(&m, "a"), &two);
    assert_int_equal(m.len, 1);
    /* Only the value that is there is removed: a stale owner cannot drop its successor. */
    assert_false(strmap_del(&m, "a", &one));
    assert_ptr_equal(strmap_get(&m, "a"), &two);
    assert_true(strmap_del(&m, "a", &two));
    assert_null(strmap_get(&m, "a"));
    assert_int_equal(m.len, 0);
    strmap_free(&m);
}

static void matches_a_model_under_random_churn(void **state)
{
    (void)state;
    struct strmap m;
    strmap_init(&m);
    bool in[KEYS] = {0};
    size_t n = 0;
    for (int i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "sb-%08x", (unsigned)i * 2654435761u);
        values[i] = i;
    }
    srand(7);
    for (int step = 0; step < 200000; step++) {
        int k = rand() % KEYS;
        if (rand() % 3) {
            if (!in[k])
                n++;
            in[k] = true;
            strmap_put(&m, keys[k], &values[k]);
        } else {
            assert_int_equal(strmap_del(&m, keys[k], &values[k]), in[k]);
            n -= in[k];
            in[k] = false;
        }
        if (step % 997 == 0)
            for (int j = 0; j < KEYS; j++)
                assert_ptr_equal(strmap_get(&m, keys[j]), in[j] ? &values[j] : NULL);
        assert_int_equal(m.len, n);
    }
    assert_true(m.len * 4 <= m.cap * 3);
    strmap_free(&m);
}

/* Sixteen slots and up to twelve keys: runs of probes wrap past the last slot, and removals
 * must shift entries across that edge. */
static void a_small_map_wraps_around(void **state)
{
    (void)state;
    for (int round = 0; round < 2000; round++) {
        struct strmap m;
        strmap_init(&m);
        bool in[12] = {0};
        for (int step = 0; step < 60; step++) {
            int k = rand() % 12;
            if (rand() % 2) {
                strmap_put(&m, keys[k], &values[k]);
                in[k] = true;
            } else {
                assert_int_equal(strmap_del(&m, keys[k], &values[k]), in[k]);
                in[k] = false;
            }
            assert_true(m.cap <= 16);
            for (int j = 0; j < 12; j++)
                assert_ptr_equal(strmap_get(&m, keys[j]), in[j] ? &values[j] : NULL);
        }
        strmap_free(&m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(get_put_replace_and_remove),
        cmocka_unit_test(matches_a_model_under_random_churn),
        cmocka_unit_test(a_small_map_wraps_around),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
