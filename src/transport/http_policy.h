/* Pure request-header policy for the HTTP transport: DNS-rebinding checks on
 * Host and Origin, and Accept negotiation. No I/O, so it is unit-tested
 * directly (tests/unit/test_http_policy.c). */
#ifndef SBX_TRANSPORT_HTTP_POLICY_H
#define SBX_TRANSPORT_HTTP_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Loopback names allowed when no list is configured (any port). */
extern const char *const http_default_hosts[];
extern const size_t http_default_hosts_len;

/* Host header ("name", "name:port", "[v6]", "[v6]:port") against `allowed`
 * entries; an entry without a port matches any port, one with a port
 * matches only that port. Names compare case-insensitively. An empty list
 * means the loopback defaults. A missing or malformed Host is refused. */
bool http_host_allowed(const char *host, const char *const *allowed, size_t n);

/* The name part of a Host header ("name", or "[v6]" with its brackets), without the port:
 * its length, or 0 when the header is malformed. */
size_t http_host_name_len(const char *host);

/* Origin header: absent (NULL) is allowed (non-browser clients send none).
 * With a configured list, the serialized origin ("scheme://host[:port]")
 * must equal an entry (case-insensitive); "null" and foreign origins are
 * refused. With an empty list, an http/https origin whose host is a
 * loopback default is allowed. */
bool http_origin_allowed(const char *origin, const char *const *allowed, size_t n);

/* Whether an Accept header lists `type` ("application/json"), honouring
 * type-wildcard and any-type ranges and ignoring parameters; q=0 excludes. */
bool http_accept_has(const char *accept, const char *type);

/* POST /mcp needs both application/json and text/event-stream. */
bool http_accept_post_ok(const char *accept);

/* Content-Type is application/json, parameters (charset) ignored. */
bool http_content_type_json(const char *ctype);

/* Whether a listen host ("127.0.0.1", "::1", "[::1]", "localhost") is
 * loopback-only; any other address (incl. 0.0.0.0) reaches the network and
 * is refused at startup unless authentication is configured. */
bool http_listen_is_loopback(const char *host);

/* Where clients reach this server, as the base of the URLs it hands out (download links, the
 * OpenAPI servers, the resource metadata): `public_url` when set, without a trailing '/';
 * else "http://<listen host>:<port>", and for a wildcard listen (0.0.0.0, ::) the first
 * allowed host (with the port when it names none), or loopback without one. NULL, with why,
 * when public_url is not an http:// or https:// URL with a host and nothing after its path. */
#define HTTP_PUBLIC_URL_MAX 512
char *http_public_base(const char *public_url, const char *listen_host, uint16_t port,
                       const char *const *allowed, size_t n_allowed, const char **why);

enum http_range { HTTP_RANGE_IGNORED, HTTP_RANGE_SATISFIABLE, HTTP_RANGE_UNSATISFIABLE };

/* One byte range, "bytes=a-b", "bytes=a-" or "bytes=-n", against size (RFC 9110 14.1.2):
 * *from and *to (inclusive) when satisfiable. Another unit, several ranges or a malformed one
 * are ignored (the whole file goes out, as the RFC allows, and requires for a unit it does not
 * know); a well-formed range that starts past the end is unsatisfiable. */
enum http_range http_range_parse(const char *h, uint64_t size, uint64_t *from, uint64_t *to);

#endif
