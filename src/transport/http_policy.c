/* Header policy (see http_policy.h). Pure string handling only. */
#include "transport/http_policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const http_default_hosts[] = {"localhost", "127.0.0.1", "[::1]"};
const size_t http_default_hosts_len = sizeof(http_default_hosts) / sizeof(http_default_hosts[0]);

/* Split "name[:port]" / "[v6][:port]" into name length and port (NULL if
 * none). Returns false when malformed. */
static bool split_host(const char *s, size_t len, size_t *name_len, const char **port,
                       size_t *port_len)
{
    *port = NULL;
    *port_len = 0;
    if (len == 0)
        return false;
    size_t end;
    if (s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb)
            return false;
        end = (size_t)(rb - s) + 1;
    } else {
        const char *c = memchr(s, ':', len);
        end = c ? (size_t)(c - s) : len;
        if (end == 0)
            return false;
    }
    *name_len = end;
    if (end == len)
        return true;
    if (s[end] != ':' || end + 1 == len)
        return false;
    unsigned long value = 0;
    for (size_t i = end + 1; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        value = value * 10 + (unsigned long)(s[i] - '0');
        if (value > 65535) /* no port: and no overflow however many digits */
            return false;
    }
    *port = s + end + 1;
    *port_len = len - end - 1;
    return true;
}

static bool host_matches(const char *h, size_t hlen, const char *entry)
{
    size_t hn, en, hp_len, ep_len;
    const char *hp, *ep;
    if (!split_host(h, hlen, &hn, &hp, &hp_len) ||
        !split_host(entry, strlen(entry), &en, &ep, &ep_len))
        return false;
    if (hn != en || strncasecmp(h, entry, hn) != 0)
        return false;
    if (!ep)
        return true; /* entry without port: any port */
    return hp && hp_len == ep_len && memcmp(hp, ep, hp_len) == 0;
}

static bool host_in(const char *h, size_t hlen, const char *const *allowed, size_t n)
{
    if (n == 0) {
        allowed = http_default_hosts;
        n = http_default_hosts_len;
    }
    for (size_t i = 0; i < n; i++)
        if (host_matches(h, hlen, allowed[i]))
            return true;
    return false;
}

size_t http_host_name_len(const char *host)
{
    size_t name_len, port_len;
    const char *port;
    if (!host || !split_host(host, strlen(host), &name_len, &port, &port_len))
        return 0;
    return name_len;
}

bool http_host_allowed(const char *host, const char *const *allowed, size_t n)
{
    if (!host)
        return false;
    return host_in(host, strlen(host), allowed, n);
}

bool http_origin_allowed(const char *origin, const char *const *allowed, size_t n)
{
    if (!origin)
        return true;
    if (n > 0) {
        for (size_t i = 0; i < n; i++)
            if (strcasecmp(origin, allowed[i]) == 0)
                return true;
        return false;
    }
    const char *rest;
    if (strncasecmp(origin, "http://", 7) == 0)
        rest = origin + 7;
    else if (strncasecmp(origin, "https://", 8) == 0)
        rest = origin + 8;
    else
        return false; /* includes the opaque "null" origin */
    if (strpbrk(rest, "/?#@"))
        return false; /* a serialized origin has no path or userinfo */
    return host_in(rest, strlen(rest), NULL, 0);
}

static size_t trim(const char **p, size_t len)
{
    while (len && isspace((unsigned char)**p)) {
        (*p)++;
        len--;
    }
    while (len && isspace((unsigned char)(*p)[len - 1]))
        len--;
    return len;
}

/* q=0 in the parameters of one media range means "not acceptable". */
static bool q_is_zero(const char *params, size_t len)
{
    while (len) {
        const char *semi = memchr(params, ';', len);
        size_t plen = semi ? (size_t)(semi - params) : len;
        const char *p = params;
        size_t l = trim(&p, plen);
        if (l >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            char buf[16];
            size_t vl = l - 2 < sizeof(buf) - 1 ? l - 2 : sizeof(buf) - 1;
            memcpy(buf, p + 2, vl);
            buf[vl] = '\0';
            return strtod(buf, NULL) <= 0.0;
        }
        if (!semi)
            break;
        len -= plen + 1;
        params = semi + 1;
    }
    return false;
}

bool http_accept_has(const char *accept, const char *type)
{
    if (!accept || !type)
        return false;
    const char *slash = strchr(type, '/');
    size_t major = slash ? (size_t)(slash - type) : strlen(type);
    const char *p = accept;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *semi = memchr(p, ';', len);
        const char *range = p;
        size_t rlen = trim(&range, semi ? (size_t)(semi - p) : len);
        bool match = (rlen == strlen(type) && strncasecmp(range, type, rlen) == 0) ||
                     (rlen == 3 && memcmp(range, "*/*", 3) == 0) ||
                     (rlen == major + 2 && strncasecmp(range, type, major) == 0 &&
                      range[major] == '/' && range[major + 1] == '*');
        if (match && !(semi && q_is_zero(semi + 1, len - (size_t)(semi - p) - 1)))
            return true;
        if (!comma)
            break;
        p = comma + 1;
    }
    return false;
}

bool http_accept_post_ok(const char *accept)
{
    return http_accept_has(accept, "application/json") &&
           http_accept_has(accept, "text/event-stream");
}

bool http_content_type_json(const char *ctype)
{
    if (!ctype)
        return false;
    const char *p = ctype;
    const char *semi = strchr(p, ';');
    size_t len = trim(&p, semi ? (size_t)(semi - ctype) : strlen(ctype));
    return len == 16 && strncasecmp(p, "application/json", 16) == 0;
}

bool http_listen_is_loopback(const char *host)
{
    static const char *const loopback[] = {"localhost", "::1", "[::1]"};
    if (!host)
        return false;
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
        if (strcasecmp(host, loopback[i]) == 0)
            return true;
    /* all of 127.0.0.0/8 is loopback */
    unsigned a, b, c, d;
    char tail;
    return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

/* 0.0.0.0, or [::] however it is written ([::0], [0:0:0:0:0:0:0:0]): a listen address that is
 * no address a client can use. */
static bool listen_is_wildcard(const char *host)
{
    char bare[64];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
        snprintf(bare, sizeof(bare), "%.*s", (int)(n - 2), host + 1);
    else
        snprintf(bare, sizeof(bare), "%s", host);
    struct in_addr v4;
    struct in6_addr v6;
    return (inet_pton(AF_INET, bare, &v4) == 1 && v4.s_addr == 0) ||
           (inet_pton(AF_INET6, bare, &v6) == 1 && IN6_IS_ADDR_UNSPECIFIED(&v6));
}

static char *checked_public_url(const char *url, const char **why)
{
    size_t scheme = strncasecmp(url, "https://", 8) == 0  ? 8
                    : strncasecmp(url, "http://", 7) == 0 ? 7
                                                          : 0;
    if (!scheme) {
        *why = "http.public_url must start with http:// or https://";
        return NULL;
    }
    if (strlen(url) > HTTP_PUBLIC_URL_MAX) {
        *why = "http.public_url is too long";
        return NULL;
    }
    const char *host = url + scheme;
    size_t host_len = strcspn(host, "/");
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f || strchr("?#\\\"<>`{}|^", *p)) {
            *why = "http.public_url may hold no spaces, query, fragment or quotes";
            return NULL;
        }
    size_t name_len, port_len;
    const char *port;
    if (host_len == 0 || memchr(host, '@', host_len) ||
        !split_host(host, host_len, &name_len, &port, &port_len)) {
        *why = "http.public_url needs a host (and no user name)";
        return NULL;
    }
    size_t len = strlen(url);
    while (len > scheme + host_len && url[len - 1] == '/')
        len--;
    return strndup(url, len);
}

char *http_public_base(const char *public_url, const char *listen_host, uint16_t port,
                       const char *const *allowed, size_t n_allowed, const char **why)
{
    if (public_url && *public_url)
        return checked_public_url(public_url, why);
    char *url = NULL;
    int n;
    if (!listen_is_wildcard(listen_host)) {
        bool v6 = strchr(listen_host, ':') && listen_host[0] != '[';
        n = asprintf(&url, "http://%s%s%s:%u", v6 ? "[" : "", listen_host, v6 ? "]" : "",
                     (unsigned)port);
    } else if (n_allowed > 0) {
        size_t name_len, port_len;
        const char *p;
        bool has_port = split_host(allowed[0], strlen(allowed[0]), &name_len, &p, &port_len) && p;
        n = has_port ? asprintf(&url, "http://%s", allowed[0])
                     : asprintf(&url, "http://%s:%u", allowed[0], (unsigned)port);
    } else {
        n = asprintf(&url, "http://%s:%u", listen_host[0] == '0' ? "127.0.0.1" : "[::1]",
                     (unsigned)port);
    }
    if (n < 0) {
        *why = "out of memory";
        return NULL;
    }
    return url;
}

enum http_range http_range_parse(const char *h, uint64_t size, uint64_t *from, uint64_t *to)
{
    if (strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
        return HTTP_RANGE_IGNORED;
    const char *p = h + 6, *dash = strchr(p, '-');
    if (!dash)
        return HTTP_RANGE_IGNORED;
    bool has_a = dash > p, has_b = dash[1] != '\0';
    unsigned long long a = 0, b = 0;
    char *end;
    if (has_a && (!isdigit((unsigned char)*p) || (a = strtoull(p, &end, 10), end != dash)))
        return HTTP_RANGE_IGNORED;
    if (has_b && (!isdigit((unsigned char)dash[1]) || (b = strtoull(dash + 1, &end, 10), *end)))
        return HTTP_RANGE_IGNORED;
    if (!has_a && !has_b)
        return HTTP_RANGE_IGNORED;
    if (!has_a) { /* the last b bytes */
        if (b == 0 || size == 0)
            return HTTP_RANGE_UNSATISFIABLE;
        *from = b >= size ? 0 : size - b;
        *to = size - 1;
        return HTTP_RANGE_SATISFIABLE;
    }
    if (has_b && b < a)
        return HTTP_RANGE_IGNORED;
    if (a >= size)
        return HTTP_RANGE_UNSATISFIABLE;
    *from = a;
    *to = has_b && b < size ? b : size - 1;
    return HTTP_RANGE_SATISFIABLE;
}
