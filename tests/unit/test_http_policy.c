/* Host/Origin DNS-rebinding checks, Accept and Content-Type parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "transport/http_policy.h"

static void default_hosts_are_loopback_any_port(void **state)
{
    (void)state;
    assert_true(http_host_allowed("localhost", NULL, 0));
    assert_true(http_host_allowed("LOCALHOST:8080", NULL, 0));
    assert_true(http_host_allowed("127.0.0.1:1", NULL, 0));
    assert_true(http_host_allowed("[::1]:3000", NULL, 0));
    assert_true(http_host_allowed("[::1]", NULL, 0));
    assert_false(http_host_allowed("evil.example:8080", NULL, 0));
    assert_false(http_host_allowed("localhost.evil.example", NULL, 0));
    assert_false(http_host_allowed("127.0.0.1.nip.io", NULL, 0));
    assert_false(http_host_allowed(NULL, NULL, 0));
    assert_false(http_host_allowed("", NULL, 0));
    assert_false(http_host_allowed("localhost:", NULL, 0));
    assert_false(http_host_allowed("localhost:80x", NULL, 0));
    assert_false(http_host_allowed("[::1", NULL, 0));
}

static void configured_hosts_with_and_without_port(void **state)
{
    (void)state;
    const char *list[] = {"mcp.internal", "box:9000"};
    assert_true(http_host_allowed("mcp.internal:1234", list, 2));
    assert_true(http_host_allowed("box:9000", list, 2));
    assert_false(http_host_allowed("box:9001", list, 2));
    assert_false(http_host_allowed("box", list, 2));
    /* a port is at most 65535, however it is written */
    assert_true(http_host_allowed("mcp.internal:65535", list, 2));
    assert_false(http_host_allowed("mcp.internal:65536", list, 2));
    assert_false(http_host_allowed("mcp.internal:99999", list, 2));
    assert_false(http_host_allowed("mcp.internal:18446744073709551617", list, 2));
    /* a configured list replaces the defaults */
    assert_false(http_host_allowed("localhost", list, 2));
}

static void origin_rules(void **state)
{
    (void)state;
    assert_true(http_origin_allowed(NULL, NULL, 0));
    assert_true(http_origin_allowed("http://localhost:5173", NULL, 0));
    assert_true(http_origin_allowed("https://127.0.0.1", NULL, 0));
    assert_true(http_origin_allowed("http://[::1]:80", NULL, 0));
    assert_false(http_origin_allowed("http://evil.example", NULL, 0));
    assert_false(http_origin_allowed("null", NULL, 0));
    assert_false(http_origin_allowed("file://localhost", NULL, 0));
    assert_false(http_origin_allowed("http://localhost@evil.example", NULL, 0));
    assert_false(http_origin_allowed("http://localhost/path", NULL, 0));
    const char *list[] = {"https://app.example"};
    assert_true(http_origin_allowed("https://APP.example", list, 1));
    assert_false(http_origin_allowed("http://app.example", list, 1));
    assert_false(http_origin_allowed("http://localhost", list, 1));
}

static void accept_parsing(void **state)
{
    (void)state;
    assert_true(http_accept_post_ok("application/json, text/event-stream"));
    assert_true(http_accept_post_ok("text/event-stream;q=0.9,Application/JSON"));
    assert_true(http_accept_post_ok("application/*, text/*"));
    assert_true(http_accept_post_ok("*/*"));
    assert_false(http_accept_post_ok("application/json"));
    assert_false(http_accept_post_ok("text/event-stream"));
    assert_false(http_accept_post_ok("application/json, text/event-stream;q=0"));
    assert_false(http_accept_post_ok("application/jsonx, text/event-streams"));
    assert_false(http_accept_post_ok(NULL));
    assert_false(http_accept_post_ok(""));
    assert_true(http_accept_has(" text/event-stream ", "text/event-stream"));
    assert_false(http_accept_has("text/html", "text/event-stream"));
}

static void content_type_json(void **state)
{
    (void)state;
    assert_true(http_content_type_json("application/json"));
    assert_true(http_content_type_json("application/json; charset=utf-8"));
    assert_true(http_content_type_json("Application/JSON"));
    assert_false(http_content_type_json("text/plain"));
    assert_false(http_content_type_json("application/jsonp"));
    assert_false(http_content_type_json(NULL));
}

static void listen_loopback(void **state)
{
    (void)state;
    assert_true(http_listen_is_loopback("127.0.0.1"));
    assert_true(http_listen_is_loopback("127.1.2.3"));
    assert_true(http_listen_is_loopback("::1"));
    assert_true(http_listen_is_loopback("[::1]"));
    assert_true(http_listen_is_loopback("LocalHost"));
    assert_false(http_listen_is_loopback("0.0.0.0"));
    assert_false(http_listen_is_loopback("::"));
    assert_false(http_listen_is_loopback("10.0.0.1"));
    assert_false(http_listen_is_loopback("127.0.0.300"));
    assert_false(http_listen_is_loopback("127.0.0.1x"));
    assert_false(http_listen_is_loopback(NULL));
}

static void host_name_part(void **state)
{
    (void)state;
    assert_int_equal(http_host_name_len("localhost:3000"), 9);
    assert_int_equal(http_host_name_len("localhost"), 9);
    assert_int_equal(http_host_name_len("[::1]:8000"), 5);
    assert_int_equal(http_host_name_len("[::1]"), 5);
    assert_int_equal(http_host_name_len("example.com:"), 0);
    assert_int_equal(http_host_name_len(":80"), 0);
    assert_int_equal(http_host_name_len("[::1"), 0);
    assert_int_equal(http_host_name_len("host:8x"), 0);
    assert_int_equal(http_host_name_len(NULL), 0);
}

static void byte_ranges(void **state)
{
    (void)state;
    uint64_t from = 0, to = 0;
    assert_int_equal(http_range_parse("bytes=10-19", 100, &from, &to), HTTP_RANGE_SATISFIABLE);
    assert_true(from == 10 && to == 19);
    assert_int_equal(http_range_parse("bytes=90-", 100, &from, &to), HTTP_RANGE_SATISFIABLE);
    assert_true(from == 90 && to == 99);
    assert_int_equal(http_range_parse("bytes=-5", 100, &from, &to), HTTP_RANGE_SATISFIABLE);
    assert_true(from == 95 && to == 99);
    assert_int_equal(http_range_parse("bytes=0-500", 100, &from, &to), HTTP_RANGE_SATISFIABLE);
    assert_true(from == 0 && to == 99);
    assert_int_equal(http_range_parse("bytes=100-", 100, &from, &to), HTTP_RANGE_UNSATISFIABLE);
    assert_int_equal(http_range_parse("bytes=-0", 100, &from, &to), HTTP_RANGE_UNSATISFIABLE);
    static const char *const ignored[] = {"items=0-1", "bytes=0-1,3-4", "bytes=-1-2", "bytes=5-3",
                                          "bytes=x-1", "bytes=",        "bytes=-",    "bytes=1"};
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        assert_int_equal(http_range_parse(ignored[i], 100, &from, &to), HTTP_RANGE_IGNORED);
}

static void assert_base(const char *want, const char *public_url, const char *listen,
                        const char *const *allowed, size_t n)
{
    const char *why = NULL;
    char *got = http_public_base(public_url, listen, 8080, allowed, n, &why);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void refused_public_url(const char *public_url, const char *why_part)
{
    const char *why = NULL;
    assert_null(http_public_base(public_url, "127.0.0.1", 8080, NULL, 0, &why));
    assert_non_null(strstr(why, why_part));
}

/* The base of the URLs handed out: what a client outside can use, not a wildcard address. */
static void public_base_urls(void **state)
{
    (void)state;
    const char *const named[] = {"sandbox.example.internal", "other"};
    const char *const with_port[] = {"sandbox.example.internal:9000"};
    assert_base("http://127.0.0.1:8080", NULL, "127.0.0.1", named, 2);
    assert_base("http://[::1]:8080", "", "[::1]", NULL, 0);
    assert_base("http://sandbox.example.internal:8080", NULL, "0.0.0.0", named, 2);
    assert_base("http://sandbox.example.internal:9000", NULL, "[::]", with_port, 1);
    assert_base("http://127.0.0.1:8080", NULL, "0.0.0.0", NULL, 0);
    assert_base("http://[::1]:8080", NULL, "[::]", NULL, 0);
    assert_base("http://[::1]:8080", NULL, "[::0]", NULL, 0);
    assert_base("http://sandbox.example.internal:8080", NULL, "[0:0:0:0:0:0:0:0]", named, 2);
    /* public_url wins, without its trailing slashes; a path prefix stays */
    assert_base("https://sandbox.example.internal", "https://sandbox.example.internal/", "0.0.0.0",
                named, 2);
    assert_base("https://h.example:8443/sbx", "https://h.example:8443/sbx//", "127.0.0.1", NULL, 0);
    assert_base("http://[2001:db8::1]:80", "http://[2001:db8::1]:80", "127.0.0.1", NULL, 0);
    refused_public_url("ftp://h.example", "http:// or https://");
    refused_public_url("sandbox.example.internal", "http:// or https://");
    refused_public_url("https://", "needs a host");
    refused_public_url("https:///path", "needs a host");
    refused_public_url("https://user@h.example", "needs a host");
    refused_public_url("https://h.example:80x", "needs a host");
    refused_public_url("https://h.example/a b", "no spaces");
    refused_public_url("https://h.example/?q=1", "query");
    refused_public_url("https://h.example/#f", "query");
    refused_public_url("https://h.example/\"x", "quotes");
    char long_url[HTTP_PUBLIC_URL_MAX + 16] = "https://h.example/";
    size_t start = strlen(long_url);
    memset(long_url + start, 'a', sizeof(long_url) - start - 1);
    long_url[sizeof(long_url) - 1] = '\0';
    refused_public_url(long_url, "too long");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_name_part),
        cmocka_unit_test(default_hosts_are_loopback_any_port),
        cmocka_unit_test(configured_hosts_with_and_without_port),
        cmocka_unit_test(origin_rules),
        cmocka_unit_test(accept_parsing),
        cmocka_unit_test(content_type_json),
        cmocka_unit_test(listen_loopback),
        cmocka_unit_test(byte_ranges),
        cmocka_unit_test(public_base_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
