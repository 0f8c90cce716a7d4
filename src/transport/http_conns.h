/* Deadlines on HTTP connections, which libmicrohttpd's timeout does not give: that one counts
 * idle time only, so a client that sends a request's headers a byte every few seconds holds
 * its connection for ever, and a thousand such clients hold them all. Each connection has at
 * most one deadline at a time: for the next request's headers, then for that request's body,
 * then none while the request is answered (an SSE stream may rightly last for hours). */
#ifndef SBX_TRANSPORT_HTTP_CONNS_H
#define SBX_TRANSPORT_HTTP_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_conn {
    int fd;
    uint64_t deadline_ms; /* 0: none */
    bool url_had_nul;     /* the current request's URL decoded a %00 (http.c refuses it) */
    struct http_conn *prev, *next;
};

struct http_conns {
    struct http_conn *head;
    size_t n;
    uint64_t headers_ms; /* how long a request's headers may take */
    uint64_t body_ms;    /* and its body, once the headers are in */
};

/* A new connection: its first request's headers are due by now + headers_ms. */
struct http_conn *http_conn_add(struct http_conns *l, int fd, uint64_t now_ms);
void http_conn_remove(struct http_conns *l, struct http_conn *c);

/* The request's headers are in: its body is due. */
void http_conn_headers_done(const struct http_conns *l, struct http_conn *c, uint64_t now_ms);
/* The whole request is in: no deadline while it is answered. */
void http_conn_body_done(struct http_conn *c);
/* Answered: the connection waits for the next request's headers. */
void http_conn_request_done(const struct http_conns *l, struct http_conn *c, uint64_t now_ms);

/* How many connections have a whole request in and its answer not yet sent (or were shut
 * down past their deadline, and the library has not yet seen it). */
size_t http_conns_answering(const struct http_conns *l);

/* Shuts down (SHUT_RDWR) every socket past its deadline, so that the library sees the
 * connection end on its next read; returns how many. Each is shut down once. */
size_t http_conns_expire(struct http_conns *l, uint64_t now_ms);

#endif
