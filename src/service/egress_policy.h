/* The egress proxy's policy, as pure code: which host:port pairs a `network: packages` sandbox
 * may reach (derived from the package index URLs plus packages.proxy_allow), which resolved
 * addresses are off limits, and the parsing of the HTTP request heads that sandbox code sends
 * to the proxy. No I/O here: unit-tested and fuzzed directly. */
#ifndef SBX_EGRESS_POLICY_H
#define SBX_EGRESS_POLICY_H

#include "config.h"
#include "err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EGRESS_HOST_MAX    253
#define EGRESS_HEAD_MAX    (16 * 1024) /* a request head larger than this is refused */
#define EGRESS_HEADERS_MAX 100         /* and one with more header lines */

struct egress_rule {
    char host[EGRESS_HOST_MAX + 1]; /* lower case, no brackets around IPv6 literals */
    uint16_t port;
    bool tls;        /* https: reached through CONNECT; otherwise plain http, forwarded */
    bool ip_literal; /* the rule names an address: it may be loopback or private */
    bool private_ok; /* the host is on packages.private_hosts */
};

struct egress_policy {
    struct egress_rule *rules;
    size_t n;
};

/* From packages.index_url, packages.extra_index_urls, packages.proxy_allow and
 * packages.private_hosts. Errors name the key and the entry. */
int egress_policy_build(const struct sbx_config *cfg, struct egress_policy *out,
                        struct sbx_err *err);
void egress_policy_free(struct egress_policy *p);
/* "https://pypi.org:443, https://files.pythonhosted.org:443" for messages; malloc'd. */
char *egress_policy_describe(const struct egress_policy *p);

/* The rule allowing host:port for a tunnel (CONNECT, https rules only) or a forwarded
 * request (plain http rules only), or NULL with *why saying what is not allowed. host is
 * matched as a name (case-insensitive, one trailing dot ignored), before any DNS lookup. */
const struct egress_rule *egress_policy_match(const struct egress_policy *p, const char *host,
                                              uint16_t port, bool tunnel, const char **why);

/* Why an address may not be dialled ("loopback", "private", "link-local", ...), or NULL when
 * it is a public unicast address. */
const char *egress_address_class(const struct sockaddr *sa);

/* Splits "host", "host:port", "[v6]" or "[v6]:port" (len bytes at s). The host is lowered and
 * stripped of brackets and one trailing dot. Without a port, default_port is used, unless it
 * is 0, which makes the port required. Returns 0 or -1. */
int egress_parse_authority(const char *s, size_t len, uint16_t default_port, char *host,
                           size_t host_size, uint16_t *port);

/* "http(s)://host[:port]/..." into host, port (80 or 443 by default) and whether it is https.
 * Returns 0 or -1. */
int egress_parse_url(const char *url, char *host, size_t host_size, uint16_t *port, bool *tls);

enum egress_kind {
    EGRESS_CONNECT, /* a tunnel: "CONNECT host:port HTTP/1.1" */
    EGRESS_FORWARD, /* plain HTTP in absolute form: "GET http://host/path HTTP/1.1" */
};

struct egress_request {
    enum egress_kind kind;
    char method[16];
    char host[EGRESS_HOST_MAX + 1];
    uint16_t port;
    size_t head_len; /* bytes of the head in the client's buffer, through the blank line */
    /* EGRESS_FORWARD: the head to send upstream (origin-form target, hop-by-hop headers
     * dropped, "Connection: close" added); malloc'd, upstream_len bytes. */
    char *upstream;
    size_t upstream_len;
    /* EGRESS_FORWARD: the request body that follows the head (Content-Length); nothing after
     * it is forwarded, so one request goes upstream per connection. */
    uint64_t body_len;
};

/* Parses the head of one proxy request at buf. Returns 1 when a whole head was parsed (req
 * filled; free req->upstream), 0 when more bytes are needed, or -1 with *why when the request
 * is malformed or not something the proxy serves. */
int egress_parse_request(const char *buf, size_t len, struct egress_request *req, const char **why);

#endif
