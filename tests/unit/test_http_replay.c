/* SSE replay buffer: ids, per-stream replay, eviction and gap detection, streams' ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>

#include "transport/http_replay.h"

struct seen {
    char out[256];
    int n;
};

static void collect(void *ctx, const struct http_replay_event *ev)
{
    struct seen *s = ctx;
    strcat(s->out, ev->data);
    s->n++;
}

static void ids_round_trip_and_reject_garbage(void **state)
{
    (void)state;
    char buf[48];
    http_event_id_format(buf, sizeof(buf), 3, 42);
    assert_string_equal(buf, "3-42");
    uint64_t st, sq;
    assert_true(http_event_id_parse(buf, &st, &sq));
    assert_int_equal(st, 3);
    assert_int_equal(sq, 42);
    assert_false(http_event_id_parse("3-", &st, &sq));
    assert_false(http_event_id_parse("-4", &st, &sq));
    assert_false(http_event_id_parse("3-0", &st, &sq));
    assert_false(http_event_id_parse("a-1", &st, &sq));
    assert_false(http_event_id_parse("1-2-3", &st, &sq));
    assert_false(http_event_id_parse("99999999999999999999-1", &st, &sq));
    assert_false(http_event_id_parse(NULL, &st, &sq));
}

static void replays_only_later_events_of_the_stream(void **state)
{
    (void)state;
    struct http_replay r;
    http_replay_init(&r, 8, 1024);
    assert_int_equal(http_replay_push(&r, 1, "a", 1), 1);
    assert_int_equal(http_replay_push(&r, 2, "X", 1), 2);
    assert_int_equal(http_replay_push(&r, 1, "b", 1), 3);
    assert_int_equal(http_replay_push(&r, 1, "c", 1), 4);
    struct seen s = {0};
    assert_int_equal(http_replay_since(&r, 1, 1, collect, &s), 2);
    assert_string_equal(s.out, "bc");
    memset(&s, 0, sizeof(s));
    assert_int_equal(http_replay_since(&r, 1, 4, collect, &s), 0);
    /* an id never issued cannot be resumed */
    assert_int_equal(http_replay_since(&r, 1, 9, collect, &s), -1);
    http_replay_free(&r);
}

static void eviction_by_count_and_bytes_is_detected(void **state)
{
    (void)state;
    struct http_replay r;
    http_replay_init(&r, 2, 1024);
    http_replay_push(&r, 1, "a", 1);
    http_replay_push(&r, 1, "b", 1);
    http_replay_push(&r, 1, "c", 1); /* evicts a */
    struct seen s = {0};
    assert_int_equal(http_replay_since(&r, 1, 0, collect, &s), -1);
    assert_int_equal(http_replay_since(&r, 1, 1, collect, &s), 2);
    assert_string_equal(s.out, "bc");
    http_replay_free(&r);

    http_replay_init(&r, 16, 4);
    http_replay_push(&r, 1, "aa", 2);
    http_replay_push(&r, 1, "bb", 2);
    http_replay_push(&r, 1, "cc", 2); /* 6 > 4 bytes: evicts aa */
    assert_int_equal(r.bytes, 4);
    assert_int_equal(http_replay_since(&r, 1, 0, collect, &s), -1);
    /* an event larger than the whole buffer is numbered, not kept, and
     * makes earlier resume points unrecoverable */
    assert_int_equal(http_replay_push(&r, 1, "toolarge", 8), 4);
    assert_int_equal(r.count, 0);
    assert_int_equal(http_replay_since(&r, 1, 3, collect, &s), -1);
    assert_int_equal(http_replay_since(&r, 1, 4, collect, &s), 0);
    http_replay_free(&r);
}

/* The end of a stream is the newest event of that stream, marked as it is pushed; other
 * streams' events are not. */
static void a_stream_ends_at_its_newest_event(void **state)
{
    (void)state;
    struct http_replay r;
    http_replay_init(&r, 8, 1024);
    http_replay_push(&r, 1, "a", 1);
    http_replay_push(&r, 1, "b", 1);
    http_replay_push(&r, 2, "X", 1);
    assert_false(http_replay_stream_ended(&r, 1));
    http_replay_end_stream(&r, 1);
    assert_true(http_replay_stream_ended(&r, 1));
    assert_false(http_replay_stream_ended(&r, 2));
    assert_false(r.ring[0].last);
    assert_true(r.ring[1].last);
    assert_false(r.ring[2].last);
    http_replay_end_stream(&r, 7); /* no event of it: nothing marked */
    assert_false(http_replay_stream_ended(&r, 7));
    http_replay_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_round_trip_and_reject_garbage),
        cmocka_unit_test(replays_only_later_events_of_the_stream),
        cmocka_unit_test(eviction_by_count_and_bytes_is_detected),
        cmocka_unit_test(a_stream_ends_at_its_newest_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
