/* The MCP protocol layer, shared by every transport (stdio, Streamable HTTP, legacy SSE).
 * A transport owns bytes; this layer owns JSON-RPC and MCP semantics. There is exactly one
 * implementation of the protocol: transports only frame and route messages. */
#ifndef SBX_MCP_H
#define SBX_MCP_H

#include "config.h"
#include "err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct ev_loop;
struct mcp_server;
struct mcp_session;

/* How the protocol layer hands outgoing messages back to the transport.
 * send: one complete JSON-RPC message (the callee does not take ownership of msg).
 *   related_id is the id of the client request this message belongs to (its response,
 *   or a progress/log notification or server-to-client request made while handling it),
 *   or NULL for messages that belong to no request. HTTP routes on it: a POST's SSE stream
 *   carries the related messages and ends after the response; the rest go to the GET stream.
 * closed: the session is ending (server shutdown or fatal transport error). */
struct mcp_transport_ops {
    void (*send)(void *transport_ctx, json_t *msg, const json_t *related_id);
};

struct mcp_server_opts {
    const struct sbx_config *cfg;
    bool test_fixtures; /* register the conformance suite's test_* tools, resources, prompts */
    const char *transport_name; /* "stdio" or "http", for serverInfo / instructions */
};

int mcp_server_new(struct ev_loop *loop, const struct mcp_server_opts *opts,
                   struct mcp_server **out, struct sbx_err *err);
/* Cancels in-flight work and frees every session still open. */
void mcp_server_free(struct mcp_server *srv);

/* owner: the principal that owns this session's sandboxes ("stdio", a token's principal,
 * or the session id when auth is off). Copied. */
struct mcp_session *mcp_session_new(struct mcp_server *srv, const struct mcp_transport_ops *ops,
                                    void *transport_ctx, const char *owner);
/* Ends the session: in-flight requests are cancelled and send is not called again. */
void mcp_session_free(struct mcp_session *s);

/* One raw framed message (a line on stdio, a POST body on HTTP). Handles parse errors,
 * size caps, invalid UTF-8 and nesting itself, answering with JSON-RPC errors via send.
 * Returns the kind of message seen, so HTTP can answer 202 for notifications/responses. */
enum mcp_msg_kind {
    MCP_MSG_INVALID = 0, /* an error response was sent */
    MCP_MSG_REQUEST,
    MCP_MSG_NOTIFICATION,
    MCP_MSG_RESPONSE,
};
enum mcp_msg_kind mcp_session_receive(struct mcp_session *s, const char *buf, size_t len);

/* For HTTP: the session after initialize reports the negotiated version. */
const char *mcp_session_protocol_version(const struct mcp_session *s);
bool mcp_session_initialized(const struct mcp_session *s);

#endif
