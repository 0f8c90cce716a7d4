/* The egress proxy's pure policy: the allow-list built from the configuration, host:port
 * matching by name, address classes, and the parsing and rewriting of request heads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "service/egress_policy.h"

static void authorities_and_urls_parse_strictly(void **state)
{
    (void)state;
    char host[256];
    uint16_t port = 0;
    bool tls = false;
    assert_int_equal(egress_parse_authority("PyPI.org.", 9, 443, host, sizeof(host), &port), 0);
    assert_string_equal(host, "pypi.org");
    assert_int_equal(port, 443);
    assert_int_equal(egress_parse_authority("h:8080", 6, 0, host, sizeof(host), &port), 0);
    assert_int_equal(port, 8080);
    assert_int_equal(egress_parse_authority("[::1]:99", 8, 0, host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    static const char *const bad[] = {"h",     "h:",     "h:0",   "h:65536", "h:8x",
                                      ":80",   "[::1",   "[zz]",  "a b:80",  "a/b:80",
                                      ".h:80", "h:80:1", "[]:80", "h@x:1",   "h:1234567"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (egress_parse_authority(bad[i], strlen(bad[i]), 0, host, sizeof(host), &port) == 0)
            fail_msg("'%s' accepted", bad[i]);

    assert_int_equal(egress_parse_url("https://pypi.org/simple", host, sizeof(host), &port, &tls),
                     0);
    assert_string_equal(host, "pypi.org");
    assert_int_equal(port, 443);
    assert_true(tls);
    assert_int_equal(
        egress_parse_url("HTTP://127.0.0.1:8765/simple/", host, sizeof(host), &port, &tls), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 8765);
    assert_false(tls);
    assert_int_equal(egress_parse_url("http://m?x=1", host, sizeof(host), &port, &tls), 0);
    assert_int_equal(port, 80);
    assert_int_equal(egress_parse_url("ftp://x/", host, sizeof(host), &port, &tls), -1);
    assert_int_equal(egress_parse_url("http://user:pw@x/", host, sizeof(host), &port, &tls), -1);
    assert_int_equal(egress_parse_url("http:///x", host, sizeof(host), &port, &tls), -1);
}

static void the_allow_list_comes_from_the_index_urls(void **state)
{
    (void)state;
    struct sbx_config cfg;
    config_init_defaults(&cfg);
    struct egress_policy p = {0};
    struct sbx_err err = {0};
    /* defaults: PyPI and its file host */
    assert_int_equal(egress_policy_build(&cfg, &p, &err), 0);
    const char *why = NULL;
    assert_non_null(egress_policy_match(&p, "pypi.org", 443, true, &why));
    assert_non_null(egress_policy_match(&p, "FILES.pythonhosted.org", 443, true, &why));
    assert_null(egress_policy_match(&p, "pypi.org", 80, true, &why));
    assert_string_equal(why, "the port is not allowed for this host");
    assert_null(egress_policy_match(&p, "evil.example", 443, true, &why));
    assert_string_equal(why, "the host is not on the list");
    assert_null(egress_policy_match(&p, "pypi.org.evil.example", 443, true, &why));
    char *d = egress_policy_describe(&p);
    assert_string_equal(d, "https://pypi.org:443, https://files.pythonhosted.org:443");
    free(d);
    egress_policy_free(&p);

    assert_int_equal(config_set(&cfg, "packages.index_url", "http://127.0.0.1:8765/simple",
                                CONFIG_SRC_FLAG, &err),
                     0);
    assert_int_equal(config_set(&cfg, "packages.proxy_allow",
                                "localhost:8765,mirror.internal,http://plain.example:8080",
                                CONFIG_SRC_FLAG, &err),
                     0);
    assert_int_equal(
        config_set(&cfg, "packages.private_hosts", "mirror.internal", CONFIG_SRC_FLAG, &err), 0);
    assert_int_equal(egress_policy_build(&cfg, &p, &err), 0);
    const struct egress_rule *r = egress_policy_match(&p, "127.0.0.1", 8765, false, &why);
    assert_non_null(r);
    assert_true(r->ip_literal); /* named as an address: loopback is what it asks for */
    r = egress_policy_match(&p, "localhost", 8765, true, &why);
    assert_non_null(r);
    assert_false(r->ip_literal || r->private_ok); /* a name must resolve to a public address */
    r = egress_policy_match(&p, "mirror.internal", 443, true, &why);
    assert_non_null(r);
    assert_true(r->private_ok);
    /* plain http is forwarded, never tunnelled; https is tunnelled, never forwarded */
    assert_null(egress_policy_match(&p, "127.0.0.1", 8765, true, &why));
    assert_non_null(strstr(why, "plain http"));
    assert_null(egress_policy_match(&p, "mirror.internal", 443, false, &why));
    assert_non_null(strstr(why, "CONNECT"));
    r = egress_policy_match(&p, "plain.example", 8080, false, &why);
    assert_true(r && !r->tls);
    egress_policy_free(&p);
    assert_int_equal(
        config_set(&cfg, "packages.private_hosts", "mirror.internal:443", CONFIG_SRC_FLAG, &err),
        0);
    assert_int_equal(egress_policy_build(&cfg, &p, &err), -1);
    assert_int_equal(
        config_set(&cfg, "packages.private_hosts", "unknown.example", CONFIG_SRC_FLAG, &err), 0);
    assert_int_equal(egress_policy_build(&cfg, &p, &err), -1);
    assert_non_null(strstr(err.msg, "packages.private_hosts"));
    assert_int_equal(config_set(&cfg, "packages.private_hosts", "", CONFIG_SRC_FLAG, &err), 0);
    assert_int_equal(config_set(&cfg, "packages.index_url", "file:///srv", CONFIG_SRC_FLAG, &err),
                     0);
    assert_int_equal(egress_policy_build(&cfg, &p, &err), -1);
    assert_non_null(strstr(err.msg, "packages.index_url"));
    config_free(&cfg);
}

static const char *class_of(const char *text)
{
    static struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (strchr(text, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, text, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, text, &a->sin_addr), 1);
    }
    return egress_address_class((struct sockaddr *)&ss);
}

static void private_and_special_addresses_are_classified(void **state)
{
    (void)state;
    static const struct {
        const char *addr, *cls;
    } cases[] = {
        {"127.0.0.1", "loopback"},
        {"127.8.9.10", "loopback"},
        {"10.1.2.3", "private"},
        {"172.16.0.1", "private"},
        {"172.31.255.255", "private"},
        {"192.168.1.1", "private"},
        {"169.254.169.254", "link-local"},
        {"0.0.0.0", "unspecified"},
        {"100.64.0.1", "shared (CGNAT)"},
        {"224.0.0.1", "multicast"},
        {"255.255.255.255", "reserved"},
        {"::1", "loopback"},
        {"::", "unspecified"},
        {"::ffff:127.0.0.1", "loopback"},
        {"::ffff:10.0.0.1", "private"},
        {"fd00::1", "private"},
        {"fe80::1", "link-local"},
        {"ff02::1", "multicast"},
        {"64:ff9b::a00:1", "NAT64"},
        {"2002:a00:1::", "6to4"},
        {"::ffff:0:7f00:1", "IPv4-translated"},
        {"::ffff:0:808:808", "IPv4-translated"},
        {"64:ff9b:1::a00:1", "NAT64"},
        {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
        {"100::1", "discard-only"},
        {"2001:2::1", "benchmarking"},
        {"2001:10::1", "IETF protocol assignment"},
        {"2001:1ff:ffff::1", "IETF protocol assignment"},
        {"3fff:fff::1", "documentation"},
        {"2001:db8::1", "documentation"},
        {"fec0::1", "site-local"},
        {"5f00::1", "reserved (not global unicast)"},
        {"4000::1", "reserved (not global unicast)"},
        {"1::1", "reserved (not global unicast)"},
        {"192.88.99.1", "6to4 relay"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *c = class_of(cases[i].addr);
        if (!c || strcmp(c, cases[i].cls) != 0)
            fail_msg("%s: got %s, want %s", cases[i].addr, c ? c : "public", cases[i].cls);
    }
    static const char *const public[] = {
        "151.101.0.223",  "8.8.8.8",     "172.32.0.1",   "11.0.0.1", "2a04:4e42::223",
        "::ffff:8.8.8.8", "2001:200::1", "3fff:1000::1", "2600::1",  "3ffe::1"};
    for (size_t i = 0; i < sizeof(public) / sizeof(public[0]); i++)
        if (class_of(public[i]))
            fail_msg("%s is public, classified %s", public[i], class_of(public[i]));
}

static void connect_heads_parse(void **state)
{
    (void)state;
    struct egress_request req;
    const char *why = NULL;
    const char *h = "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n\x16\x03\x01";
    assert_int_equal(egress_parse_request(h, strlen(h), &req, &why), 1);
    assert_int_equal(req.kind, EGRESS_CONNECT);
    assert_string_equal(req.host, "pypi.org");
    assert_int_equal(req.port, 443);
    assert_int_equal(req.head_len, strlen(h) - 3); /* the TLS bytes after it stay the client's */
    assert_null(req.upstream);

    /* incomplete, then complete */
    assert_int_equal(egress_parse_request("CONNECT pypi.org:443 HTTP/1.1\r\n", 31, &req, &why), 0);
    h = "CONNECT pypi.org HTTP/1.1\r\n\r\n";
    assert_int_equal(egress_parse_request(h, strlen(h), &req, &why), -1);
    assert_string_equal(why, "CONNECT needs host:port");
}

static void forwarded_heads_are_rewritten(void **state)
{
    (void)state;
    struct egress_request req;
    const char *why = NULL;
    const char *h = "GET http://Mirror.Example:8080/simple/numpy/?x=1 HTTP/1.1\r\n"
                    "Host: evil.example\r\nAccept: */*\r\nProxy-Connection: keep-alive\r\n"
                    "Proxy-Authorization: Basic eA==\r\nConnection: keep-alive\r\n"
                    "User-Agent: pip/23\r\n\r\n";
    assert_int_equal(egress_parse_request(h, strlen(h), &req, &why), 1);
    assert_int_equal(req.kind, EGRESS_FORWARD);
    assert_string_equal(req.method, "GET");
    assert_string_equal(req.host, "mirror.example");
    assert_int_equal(req.port, 8080);
    assert_int_equal(req.head_len, strlen(h));
    char *up = strndup(req.upstream, req.upstream_len);
    assert_string_equal(up, "GET /simple/numpy/?x=1 HTTP/1.1\r\nAccept: */*\r\n"
                            "User-Agent: pip/23\r\nHost: mirror.example:8080\r\n"
                            "Connection: close\r\n\r\n");
    free(up);
    free(req.upstream);

    /* Headers that a Connection header names are for this hop (RFC 9110 7.6.1): not forwarded,
     * in whatever case or order, before or after the Connection header. */
    h = "GET http://h/ HTTP/1.1\r\nX-Secret: 1\r\nConnection: keep-alive,, x-SECRET\t, "
        "X-Other\r\nX-Other: 2\r\nX-Secret-Not: 3\r\nconnection: x-late\r\nX-Late: 4\r\n\r\n";
    assert_int_equal(egress_parse_request(h, strlen(h), &req, &why), 1);
    up = strndup(req.upstream, req.upstream_len);
    assert_string_equal(up, "GET / HTTP/1.1\r\nX-Secret-Not: 3\r\nHost: h:80\r\n"
                            "Connection: close\r\n\r\n");
    free(up);
    free(req.upstream);
    /* But not one the proxy itself reads: without Content-Length the body it still relays
     * would be the origin's next request. */
    static const char *const read_here[] = {"Content-Length", "host", "Transfer-Encoding"};
    for (size_t i = 0; i < sizeof(read_here) / sizeof(read_here[0]); i++) {
        char head[256];
        snprintf(head, sizeof(head),
                 "POST http://h/ HTTP/1.1\r\nConnection: close, %s\r\nContent-Length: 3\r\n"
                 "\r\nabc",
                 read_here[i]);
        why = NULL;
        assert_int_equal(egress_parse_request(head, strlen(head), &req, &why), -1);
        assert_string_equal(why, "Connection names Content-Length, Host or Transfer-Encoding");
    }

    h = "POST http://h/upload HTTP/1.1\r\nContent-Length: 5\r\ncontent-length:5\r\n\r\nhello";
    assert_int_equal(egress_parse_request(h, strlen(h), &req, &why), 1);
    assert_int_equal(req.body_len, 5);
    assert_int_equal(req.head_len, strlen(h) - 5);
    free(req.upstream);

    h = "HEAD http://h HTTP/1.0\r\n\r\n";
    assert_int_equal(egress_parse_request(h, strlen(h), &req, &why), 1);
    assert_int_equal(req.port, 80);
    assert_true(strncmp(req.upstream, "HEAD / HTTP/1.1\r\n", 17) == 0);
    free(req.upstream);
}

static void malformed_heads_are_refused_with_a_reason(void **state)
{
    (void)state;
    static const struct {
        const char *head, *why;
    } bad[] = {
        {"GET /simple HTTP/1.1\r\n\r\n", "absolute http:// URL"},
        {"GET https://pypi.org/ HTTP/1.1\r\n\r\n", "CONNECT"},
        {"GET http://u:p@h/ HTTP/1.1\r\n\r\n", "credentials"},
        {"GET http://h/ HTTP/2\r\n\r\n", "request line"},
        {"GET  http://h/ HTTP/1.1\r\n\r\n", "request line"},
        {"G(T http://h/ HTTP/1.1\r\n\r\n", "method"},
        {"GET http://h/\x01 HTTP/1.1\r\n\r\n", "target"},
        {"GET http://h/ HTTP/1.1\r\nNoColon\r\n\r\n", "header"},
        {"GET http://h/ HTTP/1.1\r\n folded: x\r\n\r\n", "header"},
        {"GET http://h/ HTTP/1.1\r\nX: a\x01b\r\n\r\n", "header"},
        {"GET http://h:x/ HTTP/1.1\r\n\r\n", "host"},
        {"GET http://a!b/ HTTP/1.1\r\n\r\n", "host"},
        {"\x16\x03\x01\x02", "not an HTTP request"},
        /* bare LF or CR: refused at once, before the head could end */
        {"GET http://h/ HTTP/1.1\n\n", "line ending"},
        {"GET http://h/ HTTP/1.1\r\nHost: h\n", "line ending"},
        {"GET http://h/ HTTP/1.1\rX", "line ending"},
        {"POST http://h/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "Transfer-Encoding"},
        {"POST http://h/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
         "Content-Length"},
        {"POST http://h/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "Content-Length"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct egress_request req;
        const char *why = NULL;
        if (egress_parse_request(bad[i].head, strlen(bad[i].head), &req, &why) != -1)
            fail_msg("'%s' accepted", bad[i].head);
        if (!why || !strstr(why, bad[i].why))
            fail_msg("'%s': reason '%s' lacks '%s'", bad[i].head, why, bad[i].why);
    }
    /* a head cut after its CR, or between lines, still waits for the rest */
    static const char *const partial[] = {"GET http://h/ HTTP/1.1\r",
                                          "GET http://h/ HTTP/1.1\r\nX: 1\r\n"};
    for (size_t i = 0; i < sizeof(partial) / sizeof(partial[0]); i++) {
        struct egress_request req;
        const char *why = NULL;
        assert_int_equal(egress_parse_request(partial[i], strlen(partial[i]), &req, &why), 0);
    }
    /* a head of more lines than any request has is refused before it ends */
    char lines[4096] = "GET http://h/ HTTP/1.1\r\n";
    for (int i = 0; i <= EGRESS_HEADERS_MAX + 1; i++)
        strcat(lines, "X: 1\r\n");
    struct egress_request r2;
    const char *why2 = NULL;
    assert_int_equal(egress_parse_request(lines, strlen(lines), &r2, &why2), -1);
    assert_string_equal(why2, "malformed header");
    /* a head that never ends is cut off at the cap */
    char *big = malloc(EGRESS_HEAD_MAX + 10);
    memcpy(big, "GET http://h/ HTTP/1.1\r\nX: ", 27);
    memset(big + 27, 'a', EGRESS_HEAD_MAX + 10 - 27);
    struct egress_request req;
    const char *why = NULL;
    assert_int_equal(egress_parse_request(big, EGRESS_HEAD_MAX + 10, &req, &why), -1);
    assert_string_equal(why, "request head too large");
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(authorities_and_urls_parse_strictly),
        cmocka_unit_test(the_allow_list_comes_from_the_index_urls),
        cmocka_unit_test(private_and_special_addresses_are_classified),
        cmocka_unit_test(connect_heads_parse),
        cmocka_unit_test(forwarded_heads_are_rewritten),
        cmocka_unit_test(malformed_heads_are_refused_with_a_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
