/* Name lookups off the event loop. getaddrinfo blocks (a slow DNS server can take seconds),
 * and the loop must never wait: each lookup runs in a short-lived thread that hands its
 * result back through a socket the loop watches. The thread touches nothing but its own job;
 * everything else stays on the loop's thread. */
#ifndef SBX_RESOLVER_H
#define SBX_RESOLVER_H

#include "err.h"

#include <netdb.h>
#include <stdint.h>

struct ev_loop;
struct resolver;
struct resolver_job;

/* res (owned by the callee: freeaddrinfo it), or gai_error (an EAI_* code) and why, what to
 * tell a person, when it failed. */
typedef void (*resolver_fn)(struct addrinfo *res, int gai_error, const char *why, void *data);

int resolver_new(struct ev_loop *loop, struct resolver **out, struct sbx_err *err);
/* Jobs still running finish in their threads and are discarded. */
void resolver_free(struct resolver *r);

/* Looks up host (TCP addresses for port) for owner (who asks, an id never used again: lookups
 * are shared out fairly among owners, and a cancelled one counts until its thread ends); fn is
 * called later from the loop, never from here. At most a few lookups run at once, and two of
 * one owner; the rest wait their turn. */
struct resolver_job *resolver_lookup(struct resolver *r, uint64_t owner, const char *host,
                                     uint16_t port, resolver_fn fn, void *data);
/* fn will not be called; safe until fn has been called. */
void resolver_cancel(struct resolver_job *job);

#endif
