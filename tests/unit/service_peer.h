/* A client session on the fixture's protocol server (service_fixture.h): requests go in as
 * raw JSON-RPC, and what the server sends comes back through an inbox. */
#ifndef SBX_TEST_SERVICE_PEER_H
#define SBX_TEST_SERVICE_PEER_H

#include "service_fixture.h"

struct peer {
    struct mcp_session *s;
    json_t *inbox;
};

static inline void collect(void *ctx, json_t *msg, const json_t *related)
{
    (void)related;
    json_array_append(((struct peer *)ctx)->inbox, msg);
}

static const struct mcp_transport_ops ops = {.send = collect};

/* Sends one message without waiting: a request (id > 0) or a notification (id 0). */
static inline void peer_send(struct peer *p, int id, const char *method, json_t *params)
{
    json_t *msg =
        json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
    if (id > 0)
        json_object_set_new(msg, "id", json_integer(id));
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    mcp_session_receive(p->s, text, strlen(text));
    free(text);
}

/* The client gives up on request id (notifications/cancelled). */
static inline void peer_cancel(struct peer *p, int id)
{
    peer_send(p, 0, "notifications/cancelled", json_pack("{s:i}", "requestId", id));
}

/* The response to request id if it has come (taken out of the inbox), or NULL. */
static inline json_t *peer_take(struct peer *p, int id)
{
    size_t i;
    json_t *m;
    json_array_foreach(p->inbox, i, m)
    {
        if (json_integer_value(json_object_get(m, "id")) == id) {
            json_incref(m);
            json_array_remove(p->inbox, i);
            return m;
        }
    }
    return NULL;
}

/* Runs the loop until the response to request id arrives (or 30 s pass). */
static inline json_t *peer_wait(struct peer *p, int id)
{
    for (int spins = 0; spins < 3000; spins++) {
        json_t *m = peer_take(p, id);
        if (m)
            return m;
        run_loop_ms(10);
    }
    fail_msg("no response to request %d", id);
    return NULL;
}

/* Sends one request and runs the loop until its response arrives (or 30 s pass). */
static inline json_t *request(struct peer *p, int id, const char *method, json_t *params)
{
    peer_send(p, id, method, params);
    return peer_wait(p, id);
}

static inline json_t *tool(struct peer *p, int id, const char *name, json_t *args)
{
    return request(p, id, "tools/call", json_pack("{s:s, s:o}", "name", name, "arguments", args));
}

static inline const char *text_of(const json_t *resp)
{
    return json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(resp, "result"), "content"), 0), "text"));
}

/* A tool result's structuredContent. */
static inline json_t *structured(const json_t *resp)
{
    return json_object_get(json_object_get(resp, "result"), "structuredContent");
}

/* Whether a tool result is a tool-level failure. */
static inline bool is_error(const json_t *resp)
{
    return json_is_true(json_object_get(json_object_get(resp, "result"), "isError"));
}

/* The sandbox_id a create_sandbox answered with, copied into sid. */
static inline void created_id(const json_t *resp, char *sid, size_t size)
{
    const char *id = json_string_value(json_object_get(structured(resp), "sandbox_id"));
    assert_non_null(id);
    snprintf(sid, size, "%s", id);
}

/* A new sandbox of p's (call id), its id in sid. */
static inline void create_sandbox_as(struct peer *p, int id, char *sid, size_t size)
{
    json_t *r = tool(p, id, "create_sandbox", json_object());
    created_id(r, sid, size);
    json_decref(r);
}

static inline void peer_init(struct peer *p, const char *owner)
{
    p->inbox = json_array();
    p->s = mcp_session_new(srv, &ops, p, owner);
    json_decref(request(p, 1, "initialize",
                        json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", "2025-11-25",
                                  "capabilities", "clientInfo", "name", "t", "version", "1")));
}

#endif
