/* Signed download links: a good signature passes until it expires; any change fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "transport/http_links.h"

static const uint8_t key[HTTP_LINK_KEY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

static void signature_round_trip_and_tampering(void **state)
{
    (void)state;
    char sig[65];
    http_link_sign(key, "sb-000000000001", "plots/a.png", 2000, sig);
    assert_int_equal(strlen(sig), 64);
    assert_true(http_link_verify(key, "sb-000000000001", "plots/a.png", 2000, sig, 1999));
    assert_false(http_link_verify(key, "sb-000000000001", "plots/a.png", 2000, sig, 2000));
    assert_false(http_link_verify(key, "sb-000000000002", "plots/a.png", 2000, sig, 1000));
    assert_false(http_link_verify(key, "sb-000000000001", "plots/b.png", 2000, sig, 1000));
    assert_false(http_link_verify(key, "sb-000000000001", "plots/a.png", 2001, sig, 1000));
    uint8_t other[HTTP_LINK_KEY_LEN] = {9};
    assert_false(http_link_verify(other, "sb-000000000001", "plots/a.png", 2000, sig, 1000));
    sig[10] ^= 1;
    assert_false(http_link_verify(key, "sb-000000000001", "plots/a.png", 2000, sig, 1000));
    assert_false(http_link_verify(key, "sb-000000000001", "plots/a.png", 2000, "abc", 1000));
    assert_false(http_link_verify(key, "sb-000000000001", "plots/a.png", 2000, NULL, 1000));
    /* Field boundaries are part of the signature. */
    char s1[65], s2[65];
    http_link_sign(key, "ab", "c", 5, s1);
    http_link_sign(key, "a", "bc", 5, s2);
    assert_string_not_equal(s1, s2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(signature_round_trip_and_tampering),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
