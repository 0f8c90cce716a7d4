/* Allow-list, address classes and request-head parsing for the egress proxy. Everything a
 * sandbox sends the proxy passes through egress_parse_request first, so it is strict: CRLF
 * line ends, token methods, bounded sizes, no line folding, and only the two request forms a
 * proxy needs (CONNECT host:port, and absolute-form http:// URLs). */
#include "egress_policy.h"

#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

/* ---- names and authorities ---- */

static bool reg_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

int egress_parse_authority(const char *s, size_t len, uint16_t default_port, char *host,
                           size_t host_size, uint16_t *port)
{
    const char *h = s, *end = s + len;
    size_t hlen;
    const char *rest;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return -1;
        h = s + 1;
        hlen = (size_t)(close - h);
        rest = close + 1;
        char tmp[INET6_ADDRSTRLEN];
        struct in6_addr a6;
        if (hlen == 0 || hlen >= sizeof(tmp))
            return -1;
        memcpy(tmp, h, hlen);
        tmp[hlen] = '\0';
        if (inet_pton(AF_INET6, tmp, &a6) != 1)
            return -1;
    } else {
        const char *colon = memchr(s, ':', len);
        hlen = colon ? (size_t)(colon - s) : len;
        rest = s + hlen;
        for (size_t i = 0; i < hlen; i++)
            if (!reg_name_char(s[i]))
                return -1;
    }
    if (hlen > 0 && h[hlen - 1] == '.' && h[0] != '.')
        hlen--;
    if (hlen == 0 || hlen >= host_size || hlen > EGRESS_HOST_MAX || h[0] == '.')
        return -1;
    for (size_t i = 0; i < hlen; i++)
        host[i] = (char)tolower((unsigned char)h[i]);
    host[hlen] = '\0';
    if (rest == end) {
        if (default_port == 0)
            return -1;
        *port = default_port;
        return 0;
    }
    if (*rest != ':' || rest + 1 == end || end - rest > 6)
        return -1;
    unsigned long v = 0;
    for (const char *c = rest + 1; c < end; c++) {
        if (!isdigit((unsigned char)*c))
            return -1;
        v = v * 10 + (unsigned long)(*c - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

int egress_parse_url(const char *url, char *host, size_t host_size, uint16_t *port, bool *tls)
{
    uint16_t def;
    const char *p;
    if (strncasecmp(url, "https://", 8) == 0) {
        def = 443;
        p = url + 8;
        *tls = true;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        def = 80;
        p = url + 7;
        *tls = false;
    } else {
        return -1;
    }
    size_t alen = strcspn(p, "/?#");
    if (memchr(p, '@', alen))
        return -1; /* credentials in the URL: not an authority this proxy matches */
    return egress_parse_authority(p, alen, def, host, host_size, port);
}

static bool is_ip_literal(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* ---- the allow-list ---- */

static void add_rule(struct egress_policy *p, const char *host, uint16_t port, bool tls)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->rules[i].port == port && p->rules[i].tls == tls &&
            strcmp(p->rules[i].host, host) == 0)
            return;
    p->rules = xrealloc(p->rules, (p->n + 1) * sizeof(*p->rules));
    struct egress_rule *r = &p->rules[p->n++];
    memset(r, 0, sizeof(*r));
    snprintf(r->host, sizeof(r->host), "%s", host);
    r->port = port;
    r->tls = tls;
    r->ip_literal = is_ip_literal(host);
}

int egress_policy_build(const struct sbx_config *cfg, struct egress_policy *out,
                        struct sbx_err *err)
{
    struct egress_policy p = {0};
    char host[EGRESS_HOST_MAX + 1];
    uint16_t port;
    bool tls;
    /* The index URLs first, then the extra ones: each names a host and port to reach. */
    size_t n_urls = cfg->extra_index_urls.len + 1;
    for (size_t i = 0; i < n_urls; i++) {
        const char *u = i == 0 ? cfg->index_url : cfg->extra_index_urls.items[i - 1];
        if (i == 0 && (!u || !*u))
            continue;
        if (egress_parse_url(u, host, sizeof(host), &port, &tls) < 0) {
            egress_policy_free(&p);
            return sbx_fail(err, EINVAL, "%s: '%s' is not an http:// or https:// URL with a host",
                            i == 0 ? "packages.index_url" : "packages.extra_index_urls", u);
        }
        add_rule(&p, host, port, tls);
    }
    /* host[:port] means https (port 443 by default); http:// and https:// say it outright. */
    for (size_t i = 0; i < cfg->proxy_allow.len; i++) {
        const char *a = cfg->proxy_allow.items[i];
        tls = true;
        int r = strstr(a, "://")
                    ? egress_parse_url(a, host, sizeof(host), &port, &tls)
                    : egress_parse_authority(a, strlen(a), 443, host, sizeof(host), &port);
        if (r < 0) {
            egress_policy_free(&p);
            return sbx_fail(err, EINVAL,
                            "packages.proxy_allow: '%s' is not host, host:port (https, port 443 "
                            "by default) or an http:// or https:// URL",
                            a);
        }
        add_rule(&p, host, port, tls);
    }
    for (size_t i = 0; i < cfg->private_hosts.len; i++) {
        const char *h = cfg->private_hosts.items[i];
        bool found = false;
        /* A name, without a port: the rules say which ports. */
        if (egress_parse_authority(h, strlen(h), 1, host, sizeof(host), &port) == 0 && port == 1)
            for (size_t k = 0; k < p.n; k++)
                if (strcmp(p.rules[k].host, host) == 0)
                    p.rules[k].private_ok = found = true;
        if (!found) {
            egress_policy_free(&p);
            return sbx_fail(err, EINVAL,
                            "packages.private_hosts: '%s' is not a host name (without a port) of "
                            "the index URLs or of packages.proxy_allow",
                            h);
        }
    }
    *out = p;
    return 0;
}

void egress_policy_free(struct egress_policy *p)
{
    free(p->rules);
    p->rules = NULL;
    p->n = 0;
}

char *egress_policy_describe(const struct egress_policy *p)
{
    if (p->n == 0)
        return xstrdup("none configured");
    size_t cap = p->n * (EGRESS_HOST_MAX + 20) + 1, off = 0;
    char *s = xmalloc(cap);
    s[0] = '\0';
    for (size_t i = 0; i < p->n; i++) {
        bool v6 = strchr(p->rules[i].host, ':') != NULL;
        off += (size_t)snprintf(s + off, cap - off, "%s%s://%s%s%s:%u", i ? ", " : "",
                                p->rules[i].tls ? "https" : "http", v6 ? "[" : "", p->rules[i].host,
                                v6 ? "]" : "", p->rules[i].port);
    }
    return s;
}

const struct egress_rule *egress_policy_match(const struct egress_policy *p, const char *host,
                                              uint16_t port, bool tunnel, const char **why)
{
    bool host_known = false, other_kind = false;
    for (size_t i = 0; i < p->n; i++) {
        if (strcasecmp(p->rules[i].host, host) != 0)
            continue;
        host_known = true;
        if (p->rules[i].port != port)
            continue;
        if (p->rules[i].tls == tunnel)
            return &p->rules[i];
        other_kind = true;
    }
    /* A tunnel to a plain-HTTP origin would carry any Host and any number of requests, which
     * forwarding pins down; https origins are reached only through tunnels. */
    *why = other_kind   ? (tunnel ? "this host:port is plain http: send the request as an absolute "
                                    "http:// URL, not through CONNECT"
                                  : "this host:port is https: reach it through CONNECT")
           : host_known ? "the port is not allowed for this host"
                        : "the host is not on the list";
    return NULL;
}

/* ---- address classes ---- */

static bool in4(uint32_t a, uint32_t net, unsigned bits)
{
    uint32_t mask = bits ? ~0u << (32 - bits) : 0;
    return (a & mask) == (net & mask);
}

static const char *class4(uint32_t a)
{
    static const struct {
        uint32_t net;
        unsigned bits;
        const char *what;
    } nets[] = {
        {0x00000000, 8, "unspecified"},    {0x7f000000, 8, "loopback"},
        {0x0a000000, 8, "private"},        {0xac100000, 12, "private"},
        {0xc0a80000, 16, "private"},       {0x64400000, 10, "shared (CGNAT)"},
        {0xa9fe0000, 16, "link-local"},    {0xc0000000, 24, "IETF protocol assignment"},
        {0xc0000200, 24, "documentation"}, {0xc6120000, 15, "benchmarking"},
        {0xc6336400, 24, "documentation"}, {0xcb007100, 24, "documentation"},
        {0xc0586300, 24, "6to4 relay"},    {0xe0000000, 4, "multicast"},
        {0xf0000000, 4, "reserved"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(nets); i++)
        if (in4(a, nets[i].net, nets[i].bits))
            return nets[i].what;
    return NULL;
}

static bool prefix6(const uint8_t *b, const uint8_t *net, unsigned bits)
{
    for (unsigned i = 0; i < bits / 8; i++)
        if (b[i] != net[i])
            return false;
    uint8_t mask = (uint8_t)(0xff00 >> (bits % 8));
    return (bits % 8) == 0 || (b[bits / 8] & mask) == (net[bits / 8] & mask);
}

/* IPv6 is judged the other way round from IPv4: only global unicast (2000::/3) is public,
 * less the blocks in it that are not ordinary hosts. Whatever IANA assigns next outside
 * 2000::/3 is then refused until this table learns it. */
static const char *class6(const struct in6_addr *a)
{
    static const struct {
        uint8_t net[16];
        unsigned bits;
        const char *what;
    } nets[] = {
        /* Each of these carries an IPv4 address that a name could use to reach a local one. */
        {{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0}, 96, "IPv4-translated"},
        {{0x00, 0x64, 0xff, 0x9b}, 32, "NAT64"},
        {{0x20, 0x01, 0x00, 0x00}, 32, "Teredo"},
        {{0x20, 0x02}, 16, "6to4"},
        {{0x01, 0x00, 0, 0, 0, 0, 0, 0}, 64, "discard-only"},
        {{0xfc}, 7, "private"},
        {{0xfe, 0x80}, 10, "link-local"},
        {{0xfe, 0xc0}, 10, "site-local"},
        {{0xff}, 8, "multicast"},
        {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation"},
        {{0x3f, 0xff, 0x00}, 20, "documentation"},
        {{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48, "benchmarking"},
        {{0x20, 0x01, 0x00}, 23, "IETF protocol assignment"},
    };
    const uint8_t *b = a->s6_addr;
    for (size_t i = 0; i < ARRAY_SIZE(nets); i++)
        if (prefix6(b, nets[i].net, nets[i].bits))
            return nets[i].what;
    if ((b[0] & 0xe0) != 0x20)
        return "reserved (not global unicast)";
    return NULL;
}

const char *egress_address_class(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return class4(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
    if (sa->sa_family != AF_INET6)
        return "not an internet address";
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_UNSPECIFIED(a))
        return "unspecified";
    if (IN6_IS_ADDR_LOOPBACK(a))
        return "loopback";
    /* IPv4 wrapped in IPv6 reaches the IPv4 address: judge that one. */
    if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a)) {
        uint32_t v4;
        memcpy(&v4, a->s6_addr + 12, 4);
        return class4(ntohl(v4));
    }
    return class6(a);
}

/* ---- request heads ---- */

static bool tchar(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Headers that concern the hop between client and proxy, not the origin server. */
static bool header_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

static bool hop_by_hop(const char *name, size_t len)
{
    static const char *const names[] = {
        "connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate",
        "te",         "trailer",          "upgrade"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (header_is(name, len, names[i]))
            return true;
    return false;
}

/* A Content-Length value (digits, optional spaces around); a second one must agree. */
static int content_length(const char *v, const char *end, uint64_t *out, bool *seen)
{
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (v == end || end - v > 15)
        return -1;
    uint64_t n = 0;
    for (; v < end; v++) {
        if (!isdigit((unsigned char)*v))
            return -1;
        n = n * 10 + (uint64_t)(*v - '0');
    }
    if (*seen && n != *out)
        return -1;
    *out = n;
    *seen = true;
    return 0;
}

static const char *find_crlf(const char *s, const char *end)
{
    for (const char *p = s; p + 1 < end; p++)
        if (p[0] == '\r' && p[1] == '\n')
            return p;
    return NULL;
}

/* Whether a Connection header among the lines from `first` to `end` lists this header's name:
 * such a header is for this hop alone and is not forwarded (RFC 9110 7.6.1). */
static bool named_by_connection(const char *first, const char *end, const char *name, size_t len)
{
    for (const char *line = first; line < end;) {
        const char *lend = find_crlf(line, end);
        if (!lend)
            return false;
        const char *colon = memchr(line, ':', (size_t)(lend - line));
        if (colon && header_is(line, (size_t)(colon - line), "connection"))
            for (const char *p = colon + 1; p < lend;) {
                while (p < lend && (*p == ' ' || *p == '\t' || *p == ','))
                    p++;
                const char *token = p;
                while (p < lend && *p != ',' && *p != ' ' && *p != '\t')
                    p++;
                if ((size_t)(p - token) == len && strncasecmp(token, name, len) == 0)
                    return true;
            }
        line = lend + 2;
    }
    return false;
}

/* The request line: METHOD SP target SP HTTP/1.x. */
static int parse_request_line(const char *s, const char *eol, struct egress_request *req,
                              const char **target, size_t *target_len, const char **why)
{
    const char *sp1 = memchr(s, ' ', (size_t)(eol - s));
    if (!sp1 || sp1 == s || (size_t)(sp1 - s) >= sizeof(req->method)) {
        *why = "malformed request line";
        return -1;
    }
    for (const char *c = s; c < sp1; c++)
        if (!tchar(*c)) {
            *why = "malformed method";
            return -1;
        }
    memcpy(req->method, s, (size_t)(sp1 - s));
    req->method[sp1 - s] = '\0';
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(eol - t));
    if (!sp2 || sp2 == t || eol - sp2 != 9 ||
        (strncmp(sp2 + 1, "HTTP/1.1", 8) != 0 && strncmp(sp2 + 1, "HTTP/1.0", 8) != 0)) {
        *why = "malformed request line (expected METHOD target HTTP/1.1)";
        return -1;
    }
    for (const char *c = t; c < sp2; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
            *why = "malformed request target";
            return -1;
        }
    *target = t;
    *target_len = (size_t)(sp2 - t);
    return 0;
}

static int parse_target(const char *t, size_t tlen, struct egress_request *req, const char **path,
                        size_t *path_len, const char **why)
{
    if (strcmp(req->method, "CONNECT") == 0) {
        req->kind = EGRESS_CONNECT;
        if (egress_parse_authority(t, tlen, 0, req->host, sizeof(req->host), &req->port) < 0) {
            *why = "CONNECT needs host:port";
            return -1;
        }
        return 0;
    }
    req->kind = EGRESS_FORWARD;
    if (tlen >= 8 && strncasecmp(t, "https://", 8) == 0) {
        *why = "https:// URLs go through CONNECT (this proxy does not speak TLS for you)";
        return -1;
    }
    if (tlen < 7 || strncasecmp(t, "http://", 7) != 0) {
        *why = "a proxy request needs an absolute http:// URL";
        return -1;
    }
    const char *a = t + 7, *end = t + tlen;
    const char *slash = a;
    while (slash < end && *slash != '/' && *slash != '?')
        slash++;
    if (memchr(a, '@', (size_t)(slash - a))) {
        *why = "credentials in the URL are not forwarded";
        return -1;
    }
    if (egress_parse_authority(a, (size_t)(slash - a), 80, req->host, sizeof(req->host),
                               &req->port) < 0) {
        *why = "malformed host in the URL";
        return -1;
    }
    *path = slash;
    *path_len = (size_t)(end - slash);
    return 0;
}

int egress_parse_request(const char *buf, size_t len, struct egress_request *req, const char **why)
{
    memset(req, 0, sizeof(*req));
    const char *end = buf + (len > EGRESS_HEAD_MAX ? EGRESS_HEAD_MAX : len);
    /* The head ends at the first empty line. */
    const char *blank = NULL;
    for (const char *p = buf; p + 3 < end; p++)
        if (p[0] == '\r' && p[1] == '\n' && p[2] == '\r' && p[3] == '\n') {
            blank = p;
            break;
        }
    if (!blank) {
        if (len >= EGRESS_HEAD_MAX) {
            *why = "request head too large";
            return -1;
        }
        /* Bytes that cannot start a request need not wait for the rest, nor a head that is
         * already longer than a request line and the header limit allow. */
        if (len > 0 && !tchar(buf[0])) {
            *why = "not an HTTP request";
            return -1;
        }
        /* A head whose lines end in a bare LF would never show the blank line: refused now,
         * not left to time out as if it were slow. */
        size_t lines = 0;
        for (const char *p = buf; p < end; p++) {
            if ((p[0] == '\n' && (p == buf || p[-1] != '\r')) ||
                (p[0] == '\r' && p + 1 < end && p[1] != '\n')) {
                *why = "malformed line ending (HTTP lines end in CRLF)";
                return -1;
            }
            lines += p[0] == '\n';
        }
        if (lines > EGRESS_HEADERS_MAX + 1) {
            *why = "malformed header";
            return -1;
        }
        return 0;
    }
    req->head_len = (size_t)(blank - buf) + 4;
    const char *eol = find_crlf(buf, blank + 2);
    const char *target = NULL, *path = NULL;
    size_t target_len = 0, path_len = 0;
    if (parse_request_line(buf, eol, req, &target, &target_len, why) < 0 ||
        parse_target(target, target_len, req, &path, &path_len, why) < 0)
        return -1;

    /* Headers: validated for both kinds, rewritten for forwarding. */
    size_t cap = req->head_len + EGRESS_HOST_MAX + 64;
    char *up = req->kind == EGRESS_FORWARD ? xmalloc(cap) : NULL;
    size_t o = 0;
    if (up) {
        o += (size_t)snprintf(up, cap, "%s ", req->method);
        if (path_len == 0 || path[0] == '?')
            up[o++] = '/';
        memcpy(up + o, path, path_len);
        o += path_len;
        o += (size_t)snprintf(up + o, cap - o, " HTTP/1.1\r\n");
    }
    /* Headers the proxy itself reads cannot be made this hop's alone: dropping Content-Length
     * while relaying its body would smuggle a second request, with any Host. */
    static const char *const read_here[] = {"content-length", "host", "transfer-encoding"};
    for (size_t i = 0; up && i < ARRAY_SIZE(read_here); i++)
        if (named_by_connection(eol + 2, blank + 2, read_here[i], strlen(read_here[i]))) {
            free(up);
            *why = "Connection names Content-Length, Host or Transfer-Encoding";
            return -1;
        }
    int count = 0;
    bool have_length = false;
    for (const char *line = eol + 2; line < blank + 2;) {
        const char *lend = find_crlf(line, blank + 2);
        const char *colon = memchr(line, ':', (size_t)(lend - line));
        bool bad = !colon || colon == line || ++count > EGRESS_HEADERS_MAX;
        for (const char *c = line; !bad && c < colon; c++)
            bad = !tchar(*c);
        for (const char *c = colon ? colon + 1 : lend; !bad && c < lend; c++)
            bad = (*c != '\t' && (unsigned char)*c < 0x20) || *c == 0x7f;
        if (bad) {
            free(up);
            *why = "malformed header";
            return -1;
        }
        size_t nlen = (size_t)(colon - line);
        /* Host always names the URL's host: a different one would let a shared front end
         * (a CDN) route the request to a site that is not on the list. */
        bool is_host = nlen == 4 && strncasecmp(line, "host", 4) == 0;
        if (up && header_is(line, nlen, "transfer-encoding")) {
            free(up);
            *why = "request bodies with Transfer-Encoding are not supported (send Content-Length)";
            return -1;
        }
        if (up && header_is(line, nlen, "content-length") &&
            content_length(colon + 1, lend, &req->body_len, &have_length) < 0) {
            free(up);
            *why = "malformed or conflicting Content-Length";
            return -1;
        }
        if (up && !is_host && !hop_by_hop(line, nlen) &&
            !named_by_connection(eol + 2, blank + 2, line, nlen)) {
            memcpy(up + o, line, (size_t)(lend - line) + 2);
            o += (size_t)(lend - line) + 2;
        }
        line = lend + 2;
    }
    if (up) {
        bool v6 = strchr(req->host, ':') != NULL;
        o += (size_t)snprintf(up + o, cap - o, "Host: %s%s%s:%u\r\nConnection: close\r\n\r\n",
                              v6 ? "[" : "", req->host, v6 ? "]" : "", req->port);
        req->upstream = up;
        req->upstream_len = o;
    }
    return 1;
}
