/* Bearer tokens: hash specs, tokens file, constant-time lookup, header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>

#include "transport/http_auth.h"

/* sha256("secret") */
#define SECRET_HASH "sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"

static void hash_spec_matches_only_its_token(void **state)
{
    (void)state;
    struct http_auth a = {0};
    struct sbx_err err = {0};
    assert_int_equal(http_auth_add_hash(&a, "token-1", SECRET_HASH, &err), 0);
    assert_string_equal(http_auth_check(&a, "secret", 6), "token-1");
    assert_null(http_auth_check(&a, "secreT", 6));
    assert_null(http_auth_check(&a, "secret", 5));
    assert_null(http_auth_check(&a, "", 0));
    assert_int_equal(http_auth_add_hash(&a, "x", "sha256:abc", &err), -1);
    assert_int_equal(http_auth_add_hash(&a, "x", "md5:" SECRET_HASH, &err), -1);
    http_auth_free(&a);
}

static void tokens_file_plain_and_hashed(void **state)
{
    (void)state;
    struct http_auth a = {0};
    struct sbx_err err = {0};
    const char *text = "# team tokens\n\nalice:tok-a\r\n  bob:" SECRET_HASH "  \n";
    assert_int_equal(http_auth_load_text(&a, text, "tokens", &err), 0);
    assert_int_equal(a.len, 2);
    assert_string_equal(http_auth_check(&a, "tok-a", 5), "alice");
    assert_string_equal(http_auth_check(&a, "secret", 6), "bob");
    assert_null(http_auth_check(&a, "tok-b", 5));
    http_auth_free(&a);
    assert_int_equal(http_auth_load_text(&a, "ok:t\nnocolon\n", "f", &err), -1);
    assert_non_null(strstr(err.msg, "f:2:"));
    http_auth_free(&a);
    assert_int_equal(http_auth_load_text(&a, "bob:sha256:12\n", "f", &err), -1);
    http_auth_free(&a);
}

/* One token names one principal, and a tokens file cannot take a name the hash list gives. */
static void names_and_tokens_are_not_shared(void **state)
{
    (void)state;
    struct http_auth a = {0};
    struct sbx_err err = {0};
    assert_int_equal(http_auth_add_hash(&a, "token-1", SECRET_HASH, &err), 0);
    assert_int_equal(http_auth_add_hash(&a, "token-2", SECRET_HASH, &err), -1);
    assert_string_equal(err.msg, "auth token hash of token-2 is token-1's already");
    assert_int_equal(http_auth_load_text(&a, "carol:x\ntoken-1:tok-a\n", "tokens", &err), -1);
    assert_string_equal(err.msg,
                        "tokens:2: principal token-1 is the name of an http.auth_token_hashes "
                        "entry already");
    http_auth_free(&a);
    assert_int_equal(http_auth_add_hash(&a, "token-1", SECRET_HASH, &err), 0);
    assert_int_equal(http_auth_load_text(&a, "alice:tok-a\nbob:tok-a\n", "tokens", &err), -1);
    assert_string_equal(err.msg, "tokens:2: this token is alice's already");
    http_auth_free(&a);
    assert_int_equal(http_auth_add_hash(&a, "token-1", SECRET_HASH, &err), 0);
    assert_int_equal(http_auth_load_text(&a, "dave:secret\n", "tokens", &err), -1);
    assert_string_equal(err.msg, "tokens:1: this token is token-1's already");
    http_auth_free(&a);
    /* Allowed: token-2 when the list has one entry, a principal with two tokens (a rotation),
     * and the same line twice. */
    assert_int_equal(http_auth_add_hash(&a, "token-1", SECRET_HASH, &err), 0);
    assert_int_equal(
        http_auth_load_text(&a, "token-2:b\nalice:tok-a\nalice:tok-n\nalice:tok-a\n", "t", &err),
        0);
    assert_string_equal(http_auth_check(&a, "tok-n", 5), "alice");
    assert_string_equal(http_auth_check(&a, "b", 1), "token-2");
    http_auth_free(&a);
}

static void bearer_header(void **state)
{
    (void)state;
    size_t n = 0;
    const char *t = http_auth_bearer("Bearer abc", &n);
    assert_non_null(t);
    assert_int_equal(n, 3);
    assert_memory_equal(t, "abc", 3);
    t = http_auth_bearer("bearer  xyz ", &n);
    assert_non_null(t);
    assert_int_equal(n, 3);
    assert_null(http_auth_bearer("Basic abc", &n));
    assert_null(http_auth_bearer("Bearer ", &n));
    assert_null(http_auth_bearer(NULL, &n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hash_spec_matches_only_its_token),
        cmocka_unit_test(tokens_file_plain_and_hashed),
        cmocka_unit_test(names_and_tokens_are_not_shared),
        cmocka_unit_test(bearer_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
