/* Ownership through the real protocol layer and service, with real sandboxes: two sessions
 * with different owners (as HTTP principals will be). Bob must not tell Alice's sandbox from
 * an unknown one, whichever tool or resource he uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service_fixture.h"
#include "service_peer.h"

static void another_owner_sees_nothing(void **state)
{
    (void)state;
    struct peer alice, bob;
    peer_init(&alice, "alice");
    peer_init(&bob, "bob");

    json_t *r = tool(&alice, 10, "create_sandbox", json_pack("{s:s}", "name", "mine"));
    char sid[32];
    created_id(r, sid, sizeof(sid));
    json_decref(r);
    json_decref(tool(&alice, 11, "write_file",
                     json_pack("{s:s, s:s, s:s}", "sandbox_id", sid, "path", "secret.txt",
                               "content", "alice only")));
    r = tool(&alice, 12, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "6*7"));
    assert_string_equal(json_string_value(json_object_get(structured(r), "result")), "42");
    json_decref(r);

    /* Each of Bob's attempts must read exactly like the answer for an id that never existed. */
    static const struct {
        const char *tool, *extra_key, *extra;
    } probes[] = {
        {"run_code", "code", "1"},
        {"read_file", "path", "secret.txt"},
        {"list_files", "path", "/workspace"},
        {"get_sandbox_status", NULL, NULL},
        {"close_sandbox", NULL, NULL},
        {"reset_sandbox", NULL, NULL},
        {"get_execution_history", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        json_t *args_real = json_pack("{s:s}", "sandbox_id", sid);
        json_t *args_fake = json_pack("{s:s}", "sandbox_id", "sb-000000000000");
        if (probes[i].extra_key) {
            json_object_set_new(args_real, probes[i].extra_key, json_string(probes[i].extra));
            json_object_set_new(args_fake, probes[i].extra_key, json_string(probes[i].extra));
        }
        json_t *real = tool(&bob, 100 + (int)i, probes[i].tool, args_real);
        json_t *fake = tool(&bob, 200 + (int)i, probes[i].tool, args_fake);
        assert_true(is_error(real));
        assert_non_null(strstr(text_of(fake), "unknown sandbox_id"));
        char *a = json_dumps(json_object_get(real, "result"), JSON_COMPACT | JSON_SORT_KEYS);
        char *b = json_dumps(json_object_get(fake, "result"), JSON_COMPACT | JSON_SORT_KEYS);
        char *hit;
        while ((hit = strstr(a, sid)))
            memcpy(hit, "sb-000000000000", strlen(sid));
        assert_string_equal(a, b);
        assert_null(strstr(a, "alice only"));
        free(a);
        free(b);
        json_decref(real);
        json_decref(fake);
    }
    r = tool(&bob, 300, "list_sandboxes", json_object());
    char *list = json_dumps(r, JSON_COMPACT);
    assert_null(strstr(list, sid));
    free(list);
    json_decref(r);
    char uri[96];
    snprintf(uri, sizeof(uri), "sandbox://%s/files/secret.txt", sid);
    r = request(&bob, 301, "resources/read", json_pack("{s:s}", "uri", uri));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
                     -32002);
    json_decref(r);
    r = request(&alice, 302, "resources/read", json_pack("{s:s}", "uri", uri));
    char *mine = json_dumps(r, 0);
    assert_non_null(strstr(mine, "alice only"));
    free(mine);
    json_decref(r);

    /* Alice's sandbox is still hers and still works. */
    r = tool(&alice, 13, "read_file",
             json_pack("{s:s, s:s}", "sandbox_id", sid, "path", "secret.txt"));
    assert_non_null(strstr(text_of(r), "alice only"));
    json_decref(r);

    /* The last session of an owner ending closes that owner's sandboxes. */
    mcp_session_free(alice.s);
    r = tool(&bob, 400, "list_sandboxes", json_object());
    json_decref(r);
    int left = 0;
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        left += sb->owner && strcmp(sb->owner, "alice") == 0;
    assert_int_equal(left, 0);
    mcp_session_free(bob.s);
    json_decref(alice.inbox);
    json_decref(bob.inbox);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(another_owner_sees_nothing),
    };
    return cmocka_run_group_tests(tests, service_setup, service_teardown);
}
