/* Bounded capture: head and tail kept, the middle counted and marked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/outbuf.h"

static void small_output_is_kept_whole(void **state)
{
    (void)state;
    struct outbuf b;
    outbuf_init(&b, 16);
    outbuf_append(&b, "hello", 5);
    size_t len;
    char *s = outbuf_render(&b, &len);
    assert_string_equal(s, "hello");
    assert_int_equal(len, 5);
    assert_false(outbuf_truncated(&b));
    free(s);
    outbuf_free(&b);
}

static void overflow_keeps_head_and_tail_with_marker(void **state)
{
    (void)state;
    struct outbuf b;
    outbuf_init(&b, 8); /* 4 head + 4 tail */
    outbuf_append(&b, "0123456789", 10);
    outbuf_append(&b, "abcdef", 6);
    char *s = outbuf_render(&b, NULL);
    assert_string_equal(s, "0123\n[... 8 bytes cut ...]\ncdef");
    assert_true(outbuf_truncated(&b));
    assert_int_equal(outbuf_dropped(&b), 8);
    assert_int_equal(b.total, 16);
    free(s);
    outbuf_free(&b);
}

static void byte_by_byte_equals_one_write(void **state)
{
    (void)state;
    char data[1000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)('a' + i % 26);
    struct outbuf a, b;
    outbuf_init(&a, 100);
    outbuf_init(&b, 100);
    outbuf_append(&a, data, sizeof(data));
    for (size_t i = 0; i < sizeof(data); i++)
        outbuf_append(&b, data + i, 1);
    char *sa = outbuf_render(&a, NULL), *sb = outbuf_render(&b, NULL);
    assert_string_equal(sa, sb);
    assert_memory_equal(sa + strlen(sa) - 50, data + sizeof(data) - 50, 50);
    free(sa);
    free(sb);
    outbuf_free(&a);
    outbuf_free(&b);
}

static void a_gigabyte_costs_the_cap(void **state)
{
    (void)state;
    static char chunk[1 << 16];
    memset(chunk, 'z', sizeof(chunk));
    struct outbuf b;
    outbuf_init(&b, 1024);
    for (int i = 0; i < (1 << 14); i++)
        outbuf_append(&b, chunk, sizeof(chunk));
    assert_int_equal(b.total, 1ull << 30);
    assert_int_equal(b.head_len + b.tail_len, 1024);
    outbuf_free(&b);
}

static void reset_starts_over(void **state)
{
    (void)state;
    struct outbuf b;
    outbuf_init(&b, 4);
    outbuf_append(&b, "abcdefgh", 8);
    outbuf_reset(&b);
    outbuf_append(&b, "xy", 2);
    char *s = outbuf_render(&b, NULL);
    assert_string_equal(s, "xy");
    free(s);
    outbuf_free(&b);
}

/* A cut never splits a character: what it would split goes with the middle, and is counted
 * there (once, the tail began with the end of an 'é', which became '?' in the result). */
static void cuts_fall_between_characters(void **state)
{
    (void)state;
    struct outbuf b;
    outbuf_init(&b, 8); /* 4 head + 4 tail */
    /* "ab" then three é (2 bytes each), "xyz": head "abé", tail is "\xa9xyz". */
    outbuf_append(&b, "ab\xc3\xa9\xc3\xa9\xc3\xa9xyz", 11);
    char *s = outbuf_render(&b, NULL);
    assert_string_equal(s, "ab\xc3\xa9\n[... 4 bytes cut ...]\nxyz");
    free(s);
    outbuf_free(&b);
    /* A head that ends inside a 3-byte character gives it to the middle. */
    outbuf_init(&b, 8);
    outbuf_append(&b, "abc\xe2\x82\xac-middle-1234", 18);
    s = outbuf_render(&b, NULL);
    assert_string_equal(s, "abc\n[... 11 bytes cut ...]\n1234");
    free(s);
    outbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_output_is_kept_whole),
        cmocka_unit_test(overflow_keeps_head_and_tail_with_marker),
        cmocka_unit_test(byte_by_byte_equals_one_write),
        cmocka_unit_test(a_gigabyte_costs_the_cap),
        cmocka_unit_test(reset_starts_over),
        cmocka_unit_test(cuts_fall_between_characters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
