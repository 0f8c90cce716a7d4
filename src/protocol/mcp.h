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

/* How messages, and the JSON text in results, are written: compact, and numbers with 15
 * significant digits, as many as a double keeps of any decimal, so that 1.14 goes out as 1.14
 * rather than 1.1399999999999999. */
#define MCP_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* json_dumps with MCP_JSON_FLAGS, and its length in *len; NULL on failure. Grown in place
 * (realloc), where json_dumps doubles a buffer of its own and copies the result out: for a
 * 4 MiB read_file's 11 MB that was three copies more, each of fresh pages. */
char *mcp_dumps(const json_t *msg, size_t *len);

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
    /* Optional: end the stream carrying request related_id now; the client resumes the rest
     * (HTTP: a GET with Last-Event-ID). NULL where a transport has no such streams. */
    void (*close_stream)(void *transport_ctx, const json_t *related_id);
    /* Optional: request related_id ended without a response (the client cancelled it). */
    void (*end_request)(void *transport_ctx, const json_t *related_id);
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
/* The same, but each request still in flight is first answered with an error saying why (a
 * batch's together, as its answers go): its client is not left waiting on a request whose
 * session is gone. */
void mcp_session_end(struct mcp_session *s, const char *why);

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
/* The same for a message the transport has already parsed (as
 * json_loadb(..., JSON_REJECT_DUPLICATES | JSON_DECODE_ANY) would) from len bytes, so that
 * it is not parsed twice. msg is borrowed. */
enum mcp_msg_kind mcp_session_receive_json(struct mcp_session *s, json_t *msg, size_t len);
/* A batch (a JSON array of messages) is taken only by a session that negotiated 2025-03-26;
 * 2025-06-18 removed them. Its answers go out as one array, related to its first request's
 * id: the first element with a string method and a string or integer id (NULL: none). */
bool mcp_session_accepts_batches(const struct mcp_session *s);
const json_t *mcp_batch_first_request_id(const json_t *batch);

/* Why msg could be answered only with id null, or NULL when it is a request, notification or
 * response the session can tie to its id. A transport that must answer each POST with its own
 * request's answer refuses such a message itself, with the reason. */
const char *mcp_message_shape_error(const json_t *msg);

/* The id of a request that cannot be read whole (too large, or refused by the parser), from
 * the first and last bytes of its text (NUL-ended): the top-level "id" right after the opening
 * brace (or after "jsonrpc"), or right before the closing one. A nested "id" is never in
 * either place, and inside a string every quote is escaped. NULL if neither end shows one. */
json_t *mcp_id_from_ends(const char *head, const char *tail);
/* The same from a whole text: its first and last MCP_ID_END_BYTES. */
#define MCP_ID_END_BYTES 256
json_t *mcp_id_from_text(const char *buf, size_t len);
/* The two ends of a message that comes in pieces and is not kept whole (over a size cap), for
 * its id; bytes counts every piece. Zeroed, it is empty. */
struct mcp_message_ends {
    char head[MCP_ID_END_BYTES + 1], tail[MCP_ID_END_BYTES + 1];
    size_t head_len, tail_len, bytes;
};
void mcp_message_ends_add(struct mcp_message_ends *e, const char *p, size_t n);
/* mcp_id_from_ends of what was added. */
json_t *mcp_message_ends_id(struct mcp_message_ends *e);
/* A message that could not be read whole (too large) whose id is that of a request the server
 * is waiting on is the client's response to it: the request fails with why, and nothing is
 * sent back (a response is never answered). False, and nothing done, for any other id. */
bool mcp_session_refuse_response(struct mcp_session *s, const json_t *id, const char *why);
/* Whether a text the strict parse refuses (mcp_parse) is a request all the same: valid JSON with
 * a method and an id it can be answered under. Such a text is never the client's answer to a
 * request of ours, whatever its id (the client picks its ids; "srv-1" is one it may pick). */
bool mcp_text_is_request(const char *buf, size_t len);
/* Parses a message as the protocol does (a key given twice refused; NUL inside strings let
 * through, for the schema to refuse under the request's own id). NULL on failure, with why
 * it failed in words in why[size]. */
json_t *mcp_parse(const char *buf, size_t len, char *why, size_t size);
/* The longest uri resources/subscribe keeps: a sandbox file's, its 1024-byte path
 * percent-encoded, is a little over 3 KiB. */
#define MCP_URI_MAX 8192

/* Tools are data: a definition table plus a handler. Handlers are asynchronous: they get a
 * call and finish it later (from a timer or fd callback on the same loop), or right away. */
struct mcp_call;
typedef void (*mcp_tool_fn)(struct mcp_call *call, json_t *args, void *tool_data);
typedef void (*mcp_cancel_fn)(struct mcp_call *call, void *data);

struct mcp_tool_def {
    const char *name;
    const char *title;
    const char *description;   /* written for an LLM: when to use it, what persists */
    const char *input_schema;  /* JSON Schema text; additionalProperties false, items on arrays */
    const char *output_schema; /* JSON Schema text or NULL */
    bool read_only, destructive, idempotent, open_world;
    mcp_tool_fn fn;
};

/* Registers a copy of def; fails on a bad name or unparsable schema. */
int mcp_server_add_tool(struct mcp_server *srv, const struct mcp_tool_def *def, void *tool_data,
                        struct sbx_err *err);
struct ev_loop *mcp_server_loop(struct mcp_server *srv);

/* Completing a call sends the response and frees the call. result is stolen. */
void mcp_call_finish(struct mcp_call *call, json_t *result);
/* A tool-level failure: a result with isError true and this text. */
void mcp_call_fail(struct mcp_call *call, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool mcp_call_wants_progress(const struct mcp_call *call);
/* notifications/progress when the request carried a progressToken (no-op otherwise). */
void mcp_call_progress(struct mcp_call *call, double progress, double total, const char *message);
/* notifications/message at level (syslog name), if the session's level lets it through. */
void mcp_call_log(struct mcp_call *call, const char *level, const char *logger, json_t *data);
/* Called once if the client cancels (or the session ends) before the call finishes; the call
 * is freed right after, and must not be finished. */
void mcp_call_on_cancel(struct mcp_call *call, mcp_cancel_fn fn, void *data);
const char *mcp_call_owner(const struct mcp_call *call);
/* Text the result begins with, as its own content item, whatever the handler answers (success
 * or isError): what happened before the call that its reader must hear first. */
void mcp_call_notice(struct mcp_call *call, const char *text);
/* Asks the transport to close the stream this call answers on (SEP-1699 polling); the call
 * goes on, and its messages reach the client when it reconnects. No-op without the op. */
void mcp_call_close_stream(struct mcp_call *call);

/* A server-to-client request made while handling call (sampling/createMessage needs the
 * client's "sampling" capability, elicitation/create its "elicitation" one; otherwise this
 * fails without sending). reply gets the client's result object or an error object (exactly
 * one is NULL): a response that is no valid answer (a result that is not an object, as every
 * result MCP asks of a client is one; an error that is not an object; both) comes as an error
 * whose message says what was wrong. It is not called if the call ends first. params is
 * stolen. */
typedef void (*mcp_reply_fn)(struct mcp_call *call, const json_t *result, const json_t *error,
                             void *data);
int mcp_call_request(struct mcp_call *call, const char *method, json_t *params, mcp_reply_fn reply,
                     void *data, struct sbx_err *err);

/* Resources, resource templates and prompts are data too, with synchronous handlers that
 * answer from what the server holds. A handler returns 0 and fills *out, or -1 with err; an
 * err->code of ENOENT becomes -32002 (resource not found) or -32602 (bad prompt arguments). */
typedef int (*mcp_read_fn)(const char *uri, void *data, json_t **contents, struct sbx_err *err);
typedef int (*mcp_prompt_fn)(const json_t *args, void *data, json_t **messages,
                             struct sbx_err *err);

struct mcp_resource_def {
    const char *uri; /* exact URI; for a template, the RFC 6570 uriTemplate */
    const char *name;
    const char *description;
    const char *mime_type;
    mcp_read_fn read; /* contents: an array of {uri, mimeType, text|blob} */
};

struct mcp_prompt_def {
    const char *name;
    const char *description;
    const char *arguments; /* JSON text: [{"name","description","required"}...] */
    mcp_prompt_fn get;     /* messages: an array of {role, content} */
};

int mcp_server_add_resource(struct mcp_server *srv, const struct mcp_resource_def *def, void *data,
                            struct sbx_err *err);
/* A template's read is asked for every URI no exact resource matched; it answers ENOENT for
 * URIs that are not its own. */
int mcp_server_add_resource_template(struct mcp_server *srv, const struct mcp_resource_def *def,
                                     void *data, struct sbx_err *err);
int mcp_server_add_prompt(struct mcp_server *srv, const struct mcp_prompt_def *def, void *data,
                          struct sbx_err *err);

/* The owner whose request a synchronous resource handler is answering (NULL elsewhere):
 * sandbox resources answer only their owner. */
const char *mcp_server_current_owner(const struct mcp_server *srv);
/* Called when the last session of an owner ends (HTTP DELETE, expiry, stdio EOF), so that
 * the service can close that owner's sandboxes; holds says whether the owner has any. */
typedef void (*mcp_owner_gone_fn)(void *data, const char *owner);
typedef bool (*mcp_owner_holds_fn)(void *data, const char *owner);
void mcp_server_on_owner_gone(struct mcp_server *srv, mcp_owner_gone_fn gone,
                              mcp_owner_holds_fn holds, void *data);
/* Whether ending the session would close sandboxes: it is its owner's last, and the owner
 * holds some. */
bool mcp_session_end_closes_sandboxes(const struct mcp_session *s);

/* notifications/resources/updated to every session of owner subscribed to uri: anyone may
 * subscribe to any uri, but only the owner's sessions hear about the owner's resources. */
void mcp_server_resource_updated(struct mcp_server *srv, const char *owner, const char *uri);

/* Registers the hidden fixtures used by the test suites (serve --test-fixtures). */
int mcp_fixtures_register(struct mcp_server *srv, struct sbx_err *err);

/* For HTTP: the session after initialize reports the negotiated version. */
const char *mcp_session_protocol_version(const struct mcp_session *s);
bool mcp_session_initialized(const struct mcp_session *s);
/* Whether a call of the session's runs, or a request of the server's waits for its client. */
bool mcp_session_busy(const struct mcp_session *s);

#endif
