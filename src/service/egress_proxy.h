/* The egress proxy of a `network: packages` sandbox. The server holds a listening socket that
 * lives in the sandbox's own network namespace (made by the jail before any sandbox code ran),
 * so the sandbox reaches it at 127.0.0.1:EGRESS_PROXY_PORT while it has no other route out.
 * Each request is checked against the allow-list by name, resolved off the loop, checked
 * again by address, and dialled from the host side; then bytes are relayed both ways within
 * the sandbox's connection, byte and idle budgets. Everything runs on the server's loop. */
#ifndef SBX_EGRESS_PROXY_H
#define SBX_EGRESS_PROXY_H

#include "egress_policy.h"
#include "err.h"

#include <stdint.h>

#define EGRESS_PROXY_PORT 3128

struct ev_loop;
struct resolver;
struct egress_proxy;

struct egress_limits {
    uint32_t max_connections; /* open at once per sandbox */
    uint64_t max_bytes;       /* relayed in both directions over the sandbox's life */
    uint32_t idle_ms;         /* a connection with no traffic this long is closed */
    uint32_t connect_ms;      /* a lookup, and then the dial of all its addresses, at most */
};

struct egress_stats {
    uint64_t allowed, denied, bytes;
    uint32_t open;
};

/* Takes listen_fd. policy and resolver must outlive the proxy. */
int egress_proxy_new(struct ev_loop *loop, struct resolver *resolver,
                     const struct egress_policy *policy, const struct egress_limits *limits,
                     const char *sandbox_id, int listen_fd, struct egress_proxy **out,
                     struct sbx_err *err);
/* Closes the listener and every connection. */
void egress_proxy_free(struct egress_proxy *px);
void egress_proxy_stats(const struct egress_proxy *px, struct egress_stats *out);
/* What the last refused client was told (its 403 or 502 body's line), or "". */
const char *egress_proxy_last_refusal(const struct egress_proxy *px);

#endif
