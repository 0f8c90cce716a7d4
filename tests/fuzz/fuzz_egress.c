/* libFuzzer target: what sandbox code sends the egress proxy, through the request-head parser,
 * plus the authority and URL parsers the policy uses. A parsed head must name a host and port,
 * and a forwarded head must come out with exactly one Host header, no proxy headers, and the
 * blank line that ends it. */
#include "service/egress_policy.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t count_headers(const char *head, size_t len, const char *name)
{
    size_t n = 0, nl = strlen(name);
    for (size_t i = 0; i + nl + 2 < len; i++)
        if (head[i] == '\n' && strncasecmp(head + i + 1, name, nl) == 0 && head[i + 1 + nl] == ':')
            n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct egress_request req;
    const char *why = NULL;
    int r = egress_parse_request(buf, size, &req, &why);
    if (r < 0 && !why)
        abort();
    if (r == 1) {
        if (req.head_len > size || !req.host[0] || req.port == 0)
            abort();
        for (const char *c = req.host; *c; c++)
            if (isupper((unsigned char)*c))
                abort();
        if (req.kind == EGRESS_FORWARD) {
            if (!req.upstream || req.upstream_len < 4 ||
                memcmp(req.upstream + req.upstream_len - 4, "\r\n\r\n", 4) != 0 ||
                count_headers(req.upstream, req.upstream_len, "host") != 1 ||
                count_headers(req.upstream, req.upstream_len, "proxy-authorization") != 0 ||
                count_headers(req.upstream, req.upstream_len, "proxy-connection") != 0)
                abort();
        } else if (req.upstream) {
            abort();
        }
        free(req.upstream);
    }

    char host[EGRESS_HOST_MAX + 1];
    uint16_t port = 0;
    if (egress_parse_authority(buf, size, 443, host, sizeof(host), &port) == 0 &&
        (!host[0] || port == 0))
        abort();
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    bool tls;
    if (egress_parse_url(text, host, sizeof(host), &port, &tls) == 0 && (!host[0] || port == 0))
        abort();
    free(text);
    return 0;
}
