/* File paths in URIs (resource links, download links): encoded so that any name survives the
 * trip, and decoded strictly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

static void round_trip(const char *path)
{
    char *enc = uri_path_encode(path);
    char back[256];
    assert_true(uri_path_decode(enc, back, sizeof(back)));
    assert_string_equal(back, path);
    free(enc);
}

static void plain_names_stay_readable(void **state)
{
    (void)state;
    char *enc = uri_path_encode("out/data-1.csv");
    assert_string_equal(enc, "out/data-1.csv");
    free(enc);
}

static void reserved_and_other_bytes_are_encoded(void **state)
{
    (void)state;
    char *enc = uri_path_encode("p%41 a#b?c\xc3\xa9");
    assert_string_equal(enc, "p%2541%20a%23b%3Fc%C3%A9");
    free(enc);
    round_trip("p%41.txt");
    round_trip("pA.txt");
    round_trip("pc%2e%2e.txt");
    round_trip("sp ace/h#sh/q?x/\xc3\xa9t\xc3\xa9");
}

static void malformed_escapes_are_refused(void **state)
{
    (void)state;
    char out[64];
    assert_true(uri_path_decode("a%2Fb", out, sizeof(out)));
    assert_string_equal(out, "a/b");
    assert_false(uri_path_decode("a% 1", out, sizeof(out)));
    assert_false(uri_path_decode("a%4", out, sizeof(out)));
    assert_false(uri_path_decode("a%", out, sizeof(out)));
    assert_false(uri_path_decode("a%zz", out, sizeof(out)));
    assert_false(uri_path_decode("a%00b", out, sizeof(out)));
    assert_false(uri_path_decode("0123456789", out, 10)); /* no room for the NUL */
    assert_true(uri_path_decode("012345678", out, 10));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_names_stay_readable),
        cmocka_unit_test(reserved_and_other_bytes_are_encoded),
        cmocka_unit_test(malformed_escapes_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
