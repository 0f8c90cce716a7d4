/* The driver channel's framing: partial reads, several frames per read, hostile lengths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "service/channel.h"

static void round_trip_byte_by_byte(void **state)
{
    (void)state;
    json_t *in = json_pack("{s:s, s:i, s:s}", "op", "exec", "id", 7, "code", "print('é')");
    char *buf;
    size_t len;
    assert_int_equal(channel_encode(in, &buf, &len), 0);
    struct channel_decoder d;
    channel_decoder_init(&d, 0, 0);
    json_t *out = NULL;
    for (size_t i = 0; i < len; i++) {
        assert_null(out);
        assert_int_equal(channel_feed(&d, buf + i, 1), 0);
        int r = channel_next(&d, &out);
        assert_int_equal(r, i + 1 == len ? 1 : 0);
    }
    assert_true(json_equal(in, out));
    json_decref(in);
    json_decref(out);
    free(buf);
    channel_decoder_free(&d);
}

/* Python strings may hold NUL (an exception's message): \u0000 is valid JSON and arrives whole,
 * where it once made the frame "malformed" and cost the sandbox its interpreter. */
static void a_nul_inside_a_string_is_kept(void **state)
{
    (void)state;
    json_t *in = json_pack("{s:s, s:o}", "op", "result", "message", json_stringn("x\0y", 3));
    char *buf;
    size_t len;
    assert_int_equal(channel_encode(in, &buf, &len), 0);
    struct channel_decoder d;
    channel_decoder_init(&d, 0, 0);
    channel_feed(&d, buf, len);
    json_t *out = NULL;
    assert_int_equal(channel_next(&d, &out), 1);
    const json_t *m = json_object_get(out, "message");
    assert_int_equal(json_string_length(m), 3);
    assert_memory_equal(json_string_value(m), "x\0y", 3);
    json_decref(in);
    json_decref(out);
    free(buf);
    channel_decoder_free(&d);
}

static void two_frames_in_one_read(void **state)
{
    (void)state;
    json_t *a = json_pack("{s:i}", "id", 1), *b = json_pack("{s:i}", "id", 2);
    char *ba, *bb;
    size_t la, lb;
    channel_encode(a, &ba, &la);
    channel_encode(b, &bb, &lb);
    struct channel_decoder d;
    channel_decoder_init(&d, 0, 0);
    channel_feed(&d, ba, la);
    channel_feed(&d, bb, lb);
    json_t *o1, *o2, *o3;
    assert_int_equal(channel_next(&d, &o1), 1);
    assert_int_equal(channel_next(&d, &o2), 1);
    assert_int_equal(channel_next(&d, &o3), 0);
    assert_int_equal(json_integer_value(json_object_get(o1, "id")), 1);
    assert_int_equal(json_integer_value(json_object_get(o2, "id")), 2);
    json_decref(a), json_decref(b), json_decref(o1), json_decref(o2);
    free(ba), free(bb);
    channel_decoder_free(&d);
}

static void oversized_length_is_an_error(void **state)
{
    (void)state;
    struct channel_decoder d;
    channel_decoder_init(&d, 1024, 0);
    const unsigned char hdr[4] = {0, 0, 0x10, 0x01}; /* 4097 > 1024 */
    channel_feed(&d, hdr, 4);
    json_t *o;
    assert_int_equal(channel_next(&d, &o), -1);
    assert_null(o);
    channel_decoder_free(&d);
}

/* A frame of n bytes of JSON (n >= 16), fed whole. */
static void feed_frame_of(struct channel_decoder *d, size_t n)
{
    char *body = malloc(n);
    memset(body, ' ', n);
    memcpy(body, "{\"op\":\"x\"}", 10);
    unsigned char hdr[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};
    assert_int_equal(channel_feed(d, hdr, 4), 0);
    assert_int_equal(channel_feed(d, body, n), 0);
    free(body);
}

static int next_of(struct channel_decoder *d)
{
    json_t *o = NULL;
    int r = channel_next(d, &o);
    json_decref(o);
    return r;
}

/* With a small limit, one large frame per allowance: a frame at the small limit always passes,
 * one past it only after channel_allow_large, and only once; a forbid or a reset takes the
 * allowance back. */
static void a_large_frame_needs_an_allowance_and_uses_it_up(void **state)
{
    (void)state;
    struct channel_decoder d;
    channel_decoder_init(&d, 4096, 256);
    feed_frame_of(&d, 256);
    assert_int_equal(next_of(&d), 1);
    feed_frame_of(&d, 257);
    assert_int_equal(next_of(&d), -1);
    channel_decoder_reset(&d);

    channel_allow_large(&d);
    feed_frame_of(&d, 100); /* small frames leave the allowance */
    assert_int_equal(next_of(&d), 1);
    feed_frame_of(&d, 4096);
    assert_int_equal(next_of(&d), 1);
    feed_frame_of(&d, 300); /* used up */
    assert_int_equal(next_of(&d), -1);
    channel_decoder_reset(&d);

    channel_allow_large(&d);
    feed_frame_of(&d, 4097); /* past the largest */
    assert_int_equal(next_of(&d), -1);
    channel_decoder_reset(&d);
    channel_allow_large(&d);
    channel_forbid_large(&d);
    feed_frame_of(&d, 300);
    assert_int_equal(next_of(&d), -1);
    channel_decoder_reset(&d);
    channel_allow_large(&d);
    channel_decoder_reset(&d);
    feed_frame_of(&d, 300);
    assert_int_equal(next_of(&d), -1);
    channel_decoder_free(&d);
}

static void non_object_or_garbage_is_an_error(void **state)
{
    (void)state;
    static const char *const bodies[] = {"[1,2]", "42", "{\"a\":", "\xff\xfe", "{\"a\":1,\"a\":2}"};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct channel_decoder d;
        channel_decoder_init(&d, 0, 0);
        size_t n = strlen(bodies[i]);
        unsigned char hdr[4] = {0, 0, 0, (unsigned char)n};
        channel_feed(&d, hdr, 4);
        channel_feed(&d, bodies[i], n);
        json_t *o;
        assert_int_equal(channel_next(&d, &o), -1);
        channel_decoder_free(&d);
    }
}

/* A frame of many tiny values is refused before it is parsed; commas and braces inside
 * strings do not count, and a frame at the limit passes. */
static void too_many_values_is_an_error(void **state)
{
    (void)state;
    size_t n_items = CHANNEL_MAX_VALUES + 10, cap = 16 + 5 * n_items;
    char *body = malloc(cap);
    size_t n = (size_t)sprintf(body, "{\"a\":[");
    for (size_t i = 0; i < n_items; i++)
        n += (size_t)sprintf(body + n, "%s{}", i ? "," : "");
    n += (size_t)sprintf(body + n, "]}");
    struct channel_decoder d;
    channel_decoder_init(&d, 0, 0);
    unsigned char hdr[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};
    channel_feed(&d, hdr, 4);
    channel_feed(&d, body, n);
    json_t *o;
    assert_int_equal(channel_next(&d, &o), -1);
    assert_null(o);
    /* The same count of commas and braces inside one string is just text. */
    size_t m = (size_t)sprintf(body, "{\"a\":\"");
    for (size_t i = 0; i < n_items; i++)
        m += (size_t)sprintf(body + m, ",{\\\"");
    m += (size_t)sprintf(body + m, "\"}");
    unsigned char hdr2[4] = {(unsigned char)(m >> 24), (unsigned char)(m >> 16),
                             (unsigned char)(m >> 8), (unsigned char)m};
    channel_feed(&d, hdr2, 4);
    channel_feed(&d, body, m);
    assert_int_equal(channel_next(&d, &o), 1);
    assert_int_equal(json_string_length(json_object_get(o, "a")), 3 * n_items);
    json_decref(o);
    channel_decoder_free(&d);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_byte_by_byte),
        cmocka_unit_test(a_nul_inside_a_string_is_kept),
        cmocka_unit_test(two_frames_in_one_read),
        cmocka_unit_test(oversized_length_is_an_error),
        cmocka_unit_test(a_large_frame_needs_an_allowance_and_uses_it_up),
        cmocka_unit_test(non_object_or_garbage_is_an_error),
        cmocka_unit_test(too_many_values_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
