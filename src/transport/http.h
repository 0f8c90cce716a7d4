/* The Streamable HTTP transport (MCP 2025-11-25): POST/GET/DELETE on /mcp, sessions, SSE
 * streams with resumable event ids, DNS-rebinding checks, bearer tokens and JWT access tokens,
 * health and metrics.
 * libmicrohttpd runs inside the server's one event loop (its epoll fd is watched there); the
 * protocol layer is the same one stdio uses. */
#ifndef SBX_TRANSPORT_HTTP_H
#define SBX_TRANSPORT_HTTP_H

#include "config.h"
#include "err.h"

#include <stdint.h>

struct ev_loop;
struct mcp_server;
struct http_transport;

/* listen: "127.0.0.1:8080", "[::1]:8080", port 0 picks a free one. A non-loopback address
 * without configured tokens or JWT validation is refused. */
int http_transport_start(struct ev_loop *loop, struct mcp_server *srv, const struct sbx_config *cfg,
                         const char *listen, struct http_transport **out, struct sbx_err *err);
uint16_t http_transport_port(const struct http_transport *t);
/* "http://127.0.0.1:8080": where clients reach the server. */
const char *http_transport_url(const struct http_transport *t);
/* Serves GET /files/{id}/{path} and /sandbox/file from svc, and makes tool results' resource
 * links carry signed, expiring download URLs. */
struct sandbox_service;
void http_transport_serve_files(struct http_transport *t, struct sandbox_service *svc);
/* Ends every session (their sandboxes close) and stops listening. */
void http_transport_stop(struct http_transport *t);

#endif
