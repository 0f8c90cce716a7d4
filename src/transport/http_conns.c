/* Deadlines on HTTP connections (see http_conns.h). */
#include "http_conns.h"

#include "util.h"

#include <sys/socket.h>

struct http_conn *http_conn_add(struct http_conns *l, int fd, uint64_t now_ms)
{
    struct http_conn *c = xcalloc(1, sizeof(*c));
    c->fd = fd;
    c->deadline_ms = now_ms + l->headers_ms;
    c->next = l->head;
    if (l->head)
        l->head->prev = c;
    l->head = c;
    l->n++;
    return c;
}

void http_conn_remove(struct http_conns *l, struct http_conn *c)
{
    if (!c)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    l->n--;
    free(c);
}

void http_conn_headers_done(const struct http_conns *l, struct http_conn *c, uint64_t now_ms)
{
    if (c)
        c->deadline_ms = now_ms + l->body_ms;
}

void http_conn_body_done(struct http_conn *c)
{
    if (c)
        c->deadline_ms = 0;
}

void http_conn_request_done(const struct http_conns *l, struct http_conn *c, uint64_t now_ms)
{
    if (c)
        c->deadline_ms = now_ms + l->headers_ms;
}

size_t http_conns_answering(const struct http_conns *l)
{
    size_t n = 0;
    for (const struct http_conn *c = l->head; c; c = c->next)
        n += c->deadline_ms == 0;
    return n;
}

size_t http_conns_expire(struct http_conns *l, uint64_t now_ms)
{
    size_t n = 0;
    for (struct http_conn *c = l->head; c; c = c->next) {
        if (!c->deadline_ms || now_ms < c->deadline_ms)
            continue;
        /* Not closed here: the fd is the library's; it reads EOF and closes it itself. */
        shutdown(c->fd, SHUT_RDWR);
        c->deadline_ms = 0;
        n++;
    }
    return n;
}
