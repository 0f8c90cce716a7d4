/* MCP Streamable HTTP (and the legacy HTTP+SSE transport) on libmicrohttpd, driven from the
 * server's event loop. Shares the protocol layer (mcp.h) with stdio. */
#ifndef SBX_TRANSPORT_HTTP_H
#define SBX_TRANSPORT_HTTP_H

#include "config.h"
#include "err.h"

struct ev_loop;
struct mcp_server;
struct http_transport;

/* listen_addr "127.0.0.1:8080" (port 0 picks a free port; see http_transport_port). */
int http_transport_start(struct ev_loop *loop, struct mcp_server *srv, const struct sbx_config *cfg,
                         const char *listen_addr, struct http_transport **out, struct sbx_err *err);
unsigned http_transport_port(const struct http_transport *t);
void http_transport_stop(struct http_transport *t);

#endif
