/* JSON-RPC 2.0 and the MCP lifecycle, shared by every transport. One session per client; calls
 * in flight are tracked so that a cancellation or a closing session ends them cleanly. */
#include "mcp.h"

#include "log.h"
#include "schema.h"
#include "service/loop.h"
#include "util.h"

#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <string.h>

#define RPC_PARSE_ERROR        -32700
#define RPC_INVALID_REQUEST    -32600
#define RPC_METHOD_NOT_FOUND   -32601
#define RPC_INVALID_PARAMS     -32602
#define RPC_RESOURCE_NOT_FOUND -32002

static const char *const supported_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

struct tool_entry {
    struct mcp_tool_def def;
    json_t *input;
    json_t *output;
    void *data;
};

struct resource_entry {
    struct mcp_resource_def def;
    void *data;
};

struct prompt_entry {
    struct mcp_prompt_def def;
    json_t *arguments;
    void *data;
};

struct mcp_server {
    struct resource_entry *resources, *templates;
    size_t n_resources, n_templates;
    struct prompt_entry *prompts;
    size_t n_prompts;
    struct ev_loop *loop;
    const struct sbx_config *cfg;
    struct tool_entry *tools;
    size_t n_tools;
    struct mcp_session *sessions;
    size_t n_subscribed;       /* sessions that ever subscribed: none, and a change costs no walk */
    const char *current_owner; /* set while a synchronous resource handler runs */
    mcp_owner_gone_fn owner_gone;
    mcp_owner_holds_fn owner_holds;
    void *owner_gone_data;
};

/* A request we sent to the client, waiting for its answer. */
struct pending_request {
    char id[32];
    const char *method; /* static: from mcp_call_request's table */
    struct mcp_call *call;
    mcp_reply_fn reply;
    void *data;
    struct pending_request *next;
};

struct mcp_session {
    struct mcp_server *srv;
    json_t *client_caps;
    struct pending_request *pending;
    uint64_t next_request_id;
    struct mcp_transport_ops ops;
    void *ctx;
    char *owner;
    bool initialized;
    char version[16];
    int log_level;
    json_t *subscriptions; /* uri -> true */
    struct mcp_call *calls;
    struct mcp_batch *batch; /* the batch being dispatched, whose answers it collects */
    bool closing;            /* being freed: nothing more is sent */
    struct mcp_session *next, *prev;
};

/* A JSON-RPC batch (2025-03-26 only: later versions removed them). Its responses go out
 * together, as one array, once every request in it has been answered or cancelled. */
struct mcp_batch {
    json_t *responses;
    json_t *first_id; /* the first request's id (mcp_batch_first_request_id), or NULL */
    unsigned open;    /* calls still running, plus one while the batch is dispatched */
};

struct mcp_call {
    struct mcp_session *s;
    json_t *id;
    json_t *progress_token;
    json_t *output_schema; /* the tool's outputSchema, or NULL */
    mcp_cancel_fn cancel_fn;
    void *cancel_data;
    struct mcp_batch *batch; /* the batch it came in, or NULL */
    char *notice;            /* mcp_call_notice's, or NULL */
    struct mcp_call *next, *prev;
};

/* ---- sending ---- */

struct dump_buf {
    char *p;
    size_t len, cap;
};

static int dump_append(const char *buf, size_t size, void *data)
{
    struct dump_buf *d = data;
    if (d->len + size + 1 > d->cap) {
        size_t cap = d->cap ? d->cap : 1024;
        while (cap < d->len + size + 1)
            cap *= 2;
        d->p = xrealloc(d->p, cap);
        d->cap = cap;
    }
    memcpy(d->p + d->len, buf, size);
    d->len += size;
    return 0;
}

char *mcp_dumps(const json_t *msg, size_t *len)
{
    struct dump_buf d = {0};
    if (json_dump_callback(msg, dump_append, &d, MCP_JSON_FLAGS) < 0 || !d.p) {
        free(d.p);
        return NULL;
    }
    d.p[d.len] = '\0';
    *len = d.len;
    return d.p;
}

static void send_msg(struct mcp_session *s, json_t *msg, const json_t *related)
{
    s->ops.send(s->ctx, msg, related);
    json_decref(msg);
}

/* A response goes into its batch, if it came in one, or out. */
static void respond(struct mcp_session *s, struct mcp_batch *b, json_t *m, const json_t *id)
{
    if (!m) {
        /* An answer that could not be built must not leave the request waiting for ever. */
        log_emit(LOG_LVL_ERROR, "an answer could not be encoded", NULL);
        m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                      "error", "code", -32603, "message",
                      "internal error: the answer could not be encoded");
    }
    if (b)
        json_array_append_new(b->responses, m);
    else
        send_msg(s, m, id);
}

/* send_error and send_result answer the request being dispatched (in s->batch, if any). */
static void send_error(struct mcp_session *s, const json_t *id, int code, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    /* The message may quote the client's text, cut anywhere by the buffer: keep it sendable. */
    utf8_scrub(text, strlen(text));
    json_t *m = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                          "error", "code", code, "message", text);
    respond(s, s->batch, m, id);
}

static void send_result(struct mcp_session *s, const json_t *id, json_t *result)
{
    json_t *m = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
    respond(s, s->batch, m, id);
}

/* One open request of the batch fewer; the last one sends the answers. A batch whose requests
 * were all cancelled has none: its transport is told the request ended. */
static void batch_release(struct mcp_session *s, struct mcp_batch *b)
{
    if (--b->open > 0)
        return;
    if (!s->closing) {
        if (json_array_size(b->responses) > 0)
            s->ops.send(s->ctx, b->responses, b->first_id);
        else if (b->first_id && s->ops.end_request)
            s->ops.end_request(s->ctx, b->first_id);
    }
    json_decref(b->responses);
    json_decref(b->first_id);
    free(b);
}

/* What a call's messages relate to: a batch's all go with the batch (one HTTP stream). */
static const json_t *call_related(const struct mcp_call *c)
{
    return c->batch && c->batch->first_id ? c->batch->first_id : c->id;
}

static void send_notification(struct mcp_session *s, const char *method, json_t *params,
                              const json_t *related)
{
    json_t *m = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
    send_msg(s, m, related);
}

/* ---- server and tools ---- */

static bool valid_tool_name(const char *n)
{
    size_t len = strlen(n);
    if (len < 1 || len > 128)
        return false;
    for (; *n; n++)
        if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') ||
              *n == '_' || *n == '-' || *n == '.'))
            return false;
    return true;
}

int mcp_server_add_tool(struct mcp_server *srv, const struct mcp_tool_def *def, void *tool_data,
                        struct sbx_err *err)
{
    if (!valid_tool_name(def->name))
        return sbx_fail(err, EINVAL, "tool name '%s' is not 1-128 of [A-Za-z0-9_.-]", def->name);
    json_error_t je;
    json_t *in = json_loads(def->input_schema, 0, &je);
    if (!json_is_object(in)) {
        json_decref(in);
        return sbx_fail(err, EINVAL, "tool %s: input schema: %s", def->name, je.text);
    }
    /* json_is_object() is a macro that evaluates its argument twice: parse first. */
    json_t *out = def->output_schema ? json_loads(def->output_schema, 0, &je) : NULL;
    if (def->output_schema && !json_is_object(out)) {
        json_decref(in);
        json_decref(out);
        return sbx_fail(err, EINVAL, "tool %s: output schema: %s", def->name, je.text);
    }
    srv->tools = xrealloc(srv->tools, (srv->n_tools + 1) * sizeof(*srv->tools));
    srv->tools[srv->n_tools++] = (struct tool_entry){*def, in, out, tool_data};
    return 0;
}

struct ev_loop *mcp_server_loop(struct mcp_server *srv)
{
    return srv->loop;
}

int mcp_server_new(struct ev_loop *loop, const struct mcp_server_opts *opts,
                   struct mcp_server **out, struct sbx_err *err)
{
    struct mcp_server *srv = xcalloc(1, sizeof(*srv));
    srv->loop = loop;
    srv->cfg = opts->cfg;
    if (opts->test_fixtures && mcp_fixtures_register(srv, err) < 0) {
        mcp_server_free(srv);
        return -1;
    }
    *out = srv;
    return 0;
}

void mcp_server_free(struct mcp_server *srv)
{
    if (!srv)
        return;
    while (srv->sessions)
        mcp_session_free(srv->sessions);
    for (size_t i = 0; i < srv->n_tools; i++) {
        json_decref(srv->tools[i].input);
        json_decref(srv->tools[i].output);
    }
    free(srv->tools);
    for (size_t i = 0; i < srv->n_prompts; i++)
        json_decref(srv->prompts[i].arguments);
    free(srv->prompts);
    free(srv->resources);
    free(srv->templates);
    free(srv);
}

static int add_resource(struct resource_entry **list, size_t *n, const struct mcp_resource_def *def,
                        void *data, struct sbx_err *err)
{
    if (!def->uri || !def->name || !def->read)
        return sbx_fail(err, EINVAL, "a resource needs a uri, a name and a read handler");
    *list = xrealloc(*list, (*n + 1) * sizeof(**list));
    (*list)[(*n)++] = (struct resource_entry){*def, data};
    return 0;
}

int mcp_server_add_resource(struct mcp_server *srv, const struct mcp_resource_def *def, void *data,
                            struct sbx_err *err)
{
    return add_resource(&srv->resources, &srv->n_resources, def, data, err);
}

int mcp_server_add_resource_template(struct mcp_server *srv, const struct mcp_resource_def *def,
                                     void *data, struct sbx_err *err)
{
    return add_resource(&srv->templates, &srv->n_templates, def, data, err);
}

int mcp_server_add_prompt(struct mcp_server *srv, const struct mcp_prompt_def *def, void *data,
                          struct sbx_err *err)
{
    json_error_t je;
    json_t *args = json_loads(def->arguments ? def->arguments : "[]", 0, &je);
    if (!json_is_array(args) || !def->get) {
        json_decref(args);
        return sbx_fail(err, EINVAL, "prompt %s: arguments must be a JSON array (%s)", def->name,
                        je.text);
    }
    srv->prompts = xrealloc(srv->prompts, (srv->n_prompts + 1) * sizeof(*srv->prompts));
    srv->prompts[srv->n_prompts++] = (struct prompt_entry){*def, args, data};
    return 0;
}

/* ---- sessions and calls ---- */

struct mcp_session *mcp_session_new(struct mcp_server *srv, const struct mcp_transport_ops *ops,
                                    void *transport_ctx, const char *owner)
{
    struct mcp_session *s = xcalloc(1, sizeof(*s));
    s->srv = srv;
    s->ops = *ops;
    s->ctx = transport_ctx;
    s->owner = xstrdup(owner ? owner : "anonymous");
    s->log_level = LOG_LVL_INFO;
    s->next = srv->sessions;
    if (srv->sessions)
        srv->sessions->prev = s;
    srv->sessions = s;
    return s;
}

/* Drop requests whose call has ended: a late answer then matches nothing and is ignored. */
static void drop_pending(struct mcp_session *s, const struct mcp_call *c)
{
    for (struct pending_request **pp = &s->pending; *pp;) {
        struct pending_request *r = *pp;
        if (!c || r->call == c) {
            *pp = r->next;
            free(r);
        } else {
            pp = &r->next;
        }
    }
}

/* The requests a call still waits on, when it ends before their answers: the client is told to
 * stop working on them (a user asked to approve a sampling request that no longer matters), on
 * the call's stream while that is still open. Dropped as well, so a late answer is ignored. */
static void cancel_pending_of(struct mcp_call *c, const char *reason)
{
    struct mcp_session *s = c->s;
    for (struct pending_request **pp = &s->pending; *pp;) {
        struct pending_request *r = *pp;
        if (r->call != c) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        if (!s->closing)
            send_notification(s, "notifications/cancelled",
                              json_pack("{s:s, s:s}", "requestId", r->id, "reason", reason),
                              call_related(c));
        free(r);
    }
}

static void call_unlink_free(struct mcp_call *c)
{
    struct mcp_session *s = c->s;
    drop_pending(s, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    json_decref(c->id);
    json_decref(c->progress_token);
    json_decref(c->output_schema);
    free(c->notice);
    if (c->batch)
        batch_release(s, c->batch);
    free(c);
}

static void call_cancel(struct mcp_call *c)
{
    if (c->cancel_fn)
        c->cancel_fn(c, c->cancel_data);
    cancel_pending_of(c, "the tool call that asked was cancelled");
    call_unlink_free(c);
}

/* Whether a session other than s has s's owner: ending s leaves the owner's sandboxes. */
static bool owner_has_another_session(const struct mcp_session *s)
{
    for (const struct mcp_session *o = s->srv->sessions; o; o = o->next)
        if (o != s && strcmp(o->owner, s->owner) == 0)
            return true;
    return false;
}

void mcp_session_free(struct mcp_session *s)
{
    if (!s)
        return;
    s->closing = true;
    while (s->calls)
        call_cancel(s->calls);
    drop_pending(s, NULL);
    json_decref(s->client_caps);
    if (s->subscriptions)
        s->srv->n_subscribed--;
    json_decref(s->subscriptions);
    if (s->prev)
        s->prev->next = s->next;
    else
        s->srv->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    struct mcp_server *srv = s->srv;
    if (!owner_has_another_session(s) && srv->owner_gone)
        srv->owner_gone(srv->owner_gone_data, s->owner);
    free(s->owner);
    free(s);
}

void mcp_session_end(struct mcp_session *s, const char *why)
{
    /* Answered before its tool is cancelled, while the transport can still route the answer
     * (to an HTTP POST's stream); a batch's last cancel sends the batch's answers. */
    while (s->calls) {
        struct mcp_call *c = s->calls;
        cancel_pending_of(c, why);
        respond(s, c->batch,
                json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", c->id, "error",
                          "code", -32000, "message", why),
                c->id);
        call_cancel(c);
    }
    mcp_session_free(s);
}

void mcp_server_on_owner_gone(struct mcp_server *srv, mcp_owner_gone_fn gone,
                              mcp_owner_holds_fn holds, void *data)
{
    srv->owner_gone = gone;
    srv->owner_holds = holds;
    srv->owner_gone_data = data;
}

bool mcp_session_end_closes_sandboxes(const struct mcp_session *s)
{
    return !owner_has_another_session(s) && s->srv->owner_holds &&
           s->srv->owner_holds(s->srv->owner_gone_data, s->owner);
}

const char *mcp_server_current_owner(const struct mcp_server *srv)
{
    return srv->current_owner;
}

const char *mcp_session_protocol_version(const struct mcp_session *s)
{
    return s->version[0] ? s->version : NULL;
}

bool mcp_session_initialized(const struct mcp_session *s)
{
    return s->initialized;
}

bool mcp_session_busy(const struct mcp_session *s)
{
    return s->calls || s->pending;
}

/* The result's content array, made (empty) when it has none. */
static json_t *content_of(json_t *result)
{
    json_t *content = json_object_get(result, "content");
    if (!json_is_array(content)) {
        content = json_array();
        json_object_set_new(result, "content", content);
    }
    return content;
}

/* A structured result must match the tool's outputSchema, and its JSON is mirrored in a text
 * item for clients that ignore structuredContent. A mismatch is a server bug, refused rather
 * than sent; every build checks (about 2 us for run_code's result), so the server users run
 * is the one the tests and the benchmark run. */
static json_t *check_structured(const struct mcp_call *c, json_t *result)
{
    json_t *sc = json_object_get(result, "structuredContent");
    if (!c->output_schema || !sc || json_is_true(json_object_get(result, "isError")))
        return result;
    char why[512];
    if (schema_validate(c->output_schema, sc, why, sizeof(why)) < 0) {
        log_emit(LOG_LVL_ERROR, "tool result violates its outputSchema", "why", why, NULL);
        json_decref(result);
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                         "internal error: the tool's result did not match its outputSchema",
                         "isError", 1);
    }
    json_t *content = content_of(result);
    if (json_array_size(content) == 0) {
        char *text = json_dumps(sc, MCP_JSON_FLAGS);
        if (text)
            json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
        free(text);
    }
    return result;
}

/* resource_link content came with 2025-06-18: a 2025-03-26 client, which may check content
 * against its own types, gets the link as text. */
static void downgrade_content(const struct mcp_session *s, json_t *result)
{
    if (strcmp(s->version, "2025-03-26") != 0)
        return;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(result, "content"), i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "type")) ?: "", "resource_link") != 0)
            continue;
        const char *desc = json_string_value(json_object_get(item, "description"));
        char *text = xasprintf("%s: %s%s%s", json_string_value(json_object_get(item, "name")) ?: "",
                               json_string_value(json_object_get(item, "uri")) ?: "",
                               desc ? "; " : "", desc ? desc : "");
        json_array_set_new(json_object_get(result, "content"), i,
                           json_pack("{s:s, s:s}", "type", "text", "text", text));
        free(text);
    }
}

void mcp_call_finish(struct mcp_call *c, json_t *result)
{
    result = check_structured(c, result);
    downgrade_content(c->s, result);
    if (c->notice) {
        json_array_insert_new(content_of(result), 0,
                              json_pack("{s:s, s:s}", "type", "text", "text", c->notice));
    }
    cancel_pending_of(c, "the tool call that asked has ended");
    /* Not send_result: a call may end while another request (or batch) is dispatched. */
    respond(c->s, c->batch,
            json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", c->id, "result", result), c->id);
    call_unlink_free(c);
}

void mcp_call_fail(struct mcp_call *c, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    /* The message may quote the caller's text, cut anywhere by the buffer: keep it sendable. */
    utf8_scrub(text, strlen(text));
    mcp_call_finish(c, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
                                 "isError", 1));
}

bool mcp_call_wants_progress(const struct mcp_call *c)
{
    return c->progress_token != NULL;
}

void mcp_call_progress(struct mcp_call *c, double progress, double total, const char *message)
{
    if (!c->progress_token)
        return;
    json_t *p = json_pack("{s:O, s:f}", "progressToken", c->progress_token, "progress", progress);
    if (total > 0)
        json_object_set_new(p, "total", json_real(total));
    if (message)
        json_object_set_new(p, "message", json_string(message));
    send_notification(c->s, "notifications/progress", p, call_related(c));
}

void mcp_call_log(struct mcp_call *c, const char *level, const char *logger, json_t *data)
{
    int lvl = log_level_from_name(level);
    if (lvl < 0 || lvl < c->s->log_level) {
        json_decref(data);
        return;
    }
    json_t *p = json_pack("{s:s, s:o}", "level", level, "data", data);
    if (logger)
        json_object_set_new(p, "logger", json_string(logger));
    send_notification(c->s, "notifications/message", p, call_related(c));
}

void mcp_call_on_cancel(struct mcp_call *c, mcp_cancel_fn fn, void *data)
{
    c->cancel_fn = fn;
    c->cancel_data = data;
}

void mcp_call_notice(struct mcp_call *c, const char *text)
{
    char *joined = c->notice ? xasprintf("%s\n%s", c->notice, text) : xstrdup(text);
    free(c->notice);
    c->notice = joined;
}

void mcp_call_close_stream(struct mcp_call *c)
{
    /* A batch's stream carries its other requests too: it stays. */
    if (c->s->ops.close_stream && !c->batch)
        c->s->ops.close_stream(c->s->ctx, c->id);
}

const char *mcp_call_owner(const struct mcp_call *c)
{
    return c->s->owner;
}

int mcp_call_request(struct mcp_call *c, const char *method, json_t *params, mcp_reply_fn reply,
                     void *data, struct sbx_err *err)
{
    static const struct {
        const char *method, *capability;
    } needs[] = {
        {"sampling/createMessage", "sampling"},
        {"elicitation/create", "elicitation"},
        {"roots/list", "roots"},
    };
    struct mcp_session *s = c->s;
    const char *cap = NULL, *known = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(needs); i++)
        if (strcmp(needs[i].method, method) == 0) {
            cap = needs[i].capability;
            known = needs[i].method;
        }
    if (!cap) {
        json_decref(params);
        return sbx_fail(err, EINVAL, "%s is not a server-to-client request", method);
    }
    if (!json_object_get(s->client_caps, cap)) {
        json_decref(params);
        return sbx_fail(err, ENOTSUP, "the client did not declare the '%s' capability", cap);
    }
    struct pending_request *r = xcalloc(1, sizeof(*r));
    snprintf(r->id, sizeof(r->id), "srv-%llu", (unsigned long long)++s->next_request_id);
    r->method = known;
    r->call = c;
    r->reply = reply;
    r->data = data;
    r->next = s->pending;
    s->pending = r;
    json_t *m = json_pack("{s:s, s:s, s:s, s:o}", "jsonrpc", "2.0", "id", r->id, "method", method,
                          "params", params);
    send_msg(s, m, call_related(c));
    return 0;
}

/* Why a response is not one the reply callback can take, or NULL. JSON-RPC lets a result be
 * any value, but every result MCP has a client return (sampling, elicitation, roots/list) is
 * an object; a callback must get that object or an error object, never neither. */
static const char *response_defect(const json_t *result, const json_t *error, char *buf,
                                   size_t size)
{
    if (result && error)
        return "carried both a result and an error";
    if (result && !json_is_object(result)) {
        snprintf(buf, size, "carried a result of type %s, not an object", schema_type_name(result));
        return buf;
    }
    if (!result && !json_is_object(error))
        return "carried an error that is not an object";
    return NULL;
}

/* The request of ours that id answers, taken off the list; NULL if none is waiting. */
static struct pending_request *take_pending(struct mcp_session *s, const char *id)
{
    for (struct pending_request **pp = &s->pending; id && *pp; pp = &(*pp)->next) {
        struct pending_request *r = *pp;
        if (strcmp(r->id, id) == 0) {
            *pp = r->next;
            return r;
        }
    }
    return NULL;
}

/* The reply callback hears why the client's response could not be taken. */
static void fail_pending(struct mcp_session *s, struct pending_request *r, const char *defect)
{
    char *text = xasprintf("the client's response to %s %s", r->method, defect);
    log_emit(LOG_LVL_WARNING, "malformed response from the client", "owner", s->owner, "why", text,
             NULL);
    json_t *e = json_pack("{s:i, s:s}", "code", RPC_INVALID_REQUEST, "message", text);
    r->reply(r->call, NULL, e, r->data);
    json_decref(e);
    free(text);
    free(r);
}

bool mcp_session_refuse_response(struct mcp_session *s, const json_t *id, const char *why)
{
    struct pending_request *r = take_pending(s, json_string_value(id));
    if (r)
        fail_pending(s, r, why);
    return r != NULL;
}

static void on_response(struct mcp_session *s, const json_t *msg)
{
    struct pending_request *r = take_pending(s, json_string_value(json_object_get(msg, "id")));
    if (!r) {
        log_emit(LOG_LVL_DEBUG, "response to no pending request ignored", "owner", s->owner, NULL);
        return;
    }
    const json_t *result = json_object_get(msg, "result");
    const json_t *error = json_object_get(msg, "error");
    char buf[96];
    const char *defect = response_defect(result, error, buf, sizeof(buf));
    if (defect) {
        fail_pending(s, r, defect);
        return;
    }
    r->reply(r->call, result, error, r->data);
    free(r);
}

/* ---- method handlers: each answers through send_result/send_error ---- */

typedef void (*method_fn)(struct mcp_session *s, const json_t *id, json_t *params);

static void h_initialize(struct mcp_session *s, const json_t *id, json_t *params)
{
    if (s->initialized) {
        send_error(s, id, RPC_INVALID_REQUEST, "already initialized");
        return;
    }
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    if (!want) {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "initialize: params.protocolVersion (string) is required");
        return;
    }
    const char *chosen = supported_versions[0];
    for (size_t i = 0; i < ARRAY_SIZE(supported_versions); i++)
        if (strcmp(want, supported_versions[i]) == 0)
            chosen = supported_versions[i];
    snprintf(s->version, sizeof(s->version), "%s", chosen);
    s->initialized = true;
    const json_t *caps = json_object_get(params, "capabilities");
    s->client_caps = json_is_object(caps) ? json_deep_copy(caps) : json_object();
    json_t *r = json_pack(
        "{s:s, s:{s:{s:b}, s:{s:b, s:b}, s:{s:b}, s:{}, s:{}}, s:{s:s, s:s, s:s}, s:s}",
        "protocolVersion", chosen, "capabilities", "tools", "listChanged", 0, "resources",
        "subscribe", 1, "listChanged", 0, "prompts", "listChanged", 0, "logging", "completions",
        "serverInfo", "name", "mcp-sandbox", "title", "mcp-sandbox", "version", SBX_VERSION,
        "instructions",
        "Sandboxes built from Linux kernel primitives for running code. Each sandbox keeps its "
        "Python state and files between calls.");
    send_result(s, id, r);
}

static void h_ping(struct mcp_session *s, const json_t *id, json_t *params)
{
    (void)params;
    send_result(s, id, json_object());
}

/* Cursors are opaque to clients: "o" followed by the offset. */
static int page_bounds(const json_t *params, size_t total, size_t page, size_t *start, size_t *end)
{
    const json_t *cur = json_object_get(params, "cursor");
    *start = 0;
    if (cur) {
        const char *c = json_string_value(cur);
        char *e = NULL;
        /* Only what nextCursor gave out: "o" and digits ("o 1", "o+1" are not). */
        if (!c || c[0] != 'o' || c[1] < '0' || c[1] > '9')
            return -1;
        unsigned long v = strtoul(c + 1, &e, 10);
        if (*e || v > total)
            return -1;
        *start = v;
    }
    *end = *start + page < total ? *start + page : total;
    return 0;
}

static json_t *tool_item(struct mcp_server *srv, size_t i)
{
    const struct tool_entry *t = &srv->tools[i];
    json_t *o = json_pack("{s:s, s:s, s:O, s:{s:b, s:b, s:b, s:b}}", "name", t->def.name,
                          "description", t->def.description, "inputSchema", t->input, "annotations",
                          "readOnlyHint", t->def.read_only, "destructiveHint", t->def.destructive,
                          "idempotentHint", t->def.idempotent, "openWorldHint", t->def.open_world);
    if (t->def.title)
        json_object_set_new(o, "title", json_string(t->def.title));
    if (t->output)
        json_object_set(o, "outputSchema", t->output);
    return o;
}

static void send_page(struct mcp_session *s, const json_t *id, json_t *params, const char *key,
                      size_t total, json_t *(*item)(struct mcp_server *, size_t));

static void h_tools_list(struct mcp_session *s, const json_t *id, json_t *params)
{
    send_page(s, id, params, "tools", s->srv->n_tools, tool_item);
}

static void h_tools_call(struct mcp_session *s, const json_t *id, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!name) {
        send_error(s, id, RPC_INVALID_PARAMS, "tools/call: params.name (string) is required");
        return;
    }
    struct tool_entry *t = NULL;
    for (size_t i = 0; i < s->srv->n_tools; i++)
        if (strcmp(s->srv->tools[i].def.name, name) == 0)
            t = &s->srv->tools[i];
    if (!t) {
        send_error(s, id, RPC_INVALID_PARAMS, "unknown tool: %s", name);
        return;
    }
    json_t *args = json_object_get(params, "arguments");
    json_t *owned = args ? json_incref(args) : json_object();
    struct mcp_call *c = xcalloc(1, sizeof(*c));
    c->s = s;
    c->id = json_deep_copy(id);
    const json_t *meta = json_object_get(params, "_meta");
    const json_t *tok = json_object_get(meta, "progressToken");
    if (json_is_string(tok) || json_is_integer(tok))
        c->progress_token = json_incref((json_t *)tok);
    c->output_schema = json_incref(t->output);
    if ((c->batch = s->batch))
        c->batch->open++;
    c->next = s->calls;
    if (s->calls)
        s->calls->prev = c;
    s->calls = c;
    char why[512];
    if (!json_is_object(owned)) {
        mcp_call_fail(c, "arguments must be an object");
    } else if (schema_validate(t->input, owned, why, sizeof(why)) < 0) {
        mcp_call_fail(c, "invalid arguments for %s: %s", name, why);
    } else {
        schema_whole_numbers(t->input, owned, 0);
        t->def.fn(c, owned, t->data);
    }
    json_decref(owned);
}

static size_t page_of(const struct mcp_session *s)
{
    return s->srv->cfg->page_size ? s->srv->cfg->page_size : 50;
}

/* One paginated list answer: key holds item(i) for the page the cursor names. */
static void send_page(struct mcp_session *s, const json_t *id, json_t *params, const char *key,
                      size_t total, json_t *(*item)(struct mcp_server *, size_t))
{
    size_t a, b;
    if (page_bounds(params, total, page_of(s), &a, &b) < 0) {
        send_error(s, id, RPC_INVALID_PARAMS, "%s: invalid cursor", key);
        return;
    }
    json_t *list = json_array();
    for (size_t i = a; i < b; i++)
        json_array_append_new(list, item(s->srv, i));
    json_t *r = json_pack("{s:o}", key, list);
    if (b < total)
        json_object_set_new(r, "nextCursor", json_sprintf("o%zu", b));
    send_result(s, id, r);
}

static json_t *resource_json(const struct mcp_resource_def *d, const char *uri_key)
{
    json_t *o = json_pack("{s:s, s:s}", uri_key, d->uri, "name", d->name);
    if (d->description)
        json_object_set_new(o, "description", json_string(d->description));
    if (d->mime_type)
        json_object_set_new(o, "mimeType", json_string(d->mime_type));
    return o;
}

static json_t *resource_item(struct mcp_server *srv, size_t i)
{
    return resource_json(&srv->resources[i].def, "uri");
}

static json_t *template_item(struct mcp_server *srv, size_t i)
{
    return resource_json(&srv->templates[i].def, "uriTemplate");
}

static json_t *prompt_item(struct mcp_server *srv, size_t i)
{
    const struct prompt_entry *p = &srv->prompts[i];
    json_t *o = json_pack("{s:s, s:O}", "name", p->def.name, "arguments", p->arguments);
    if (p->def.description)
        json_object_set_new(o, "description", json_string(p->def.description));
    return o;
}

static void h_resources_list(struct mcp_session *s, const json_t *id, json_t *params)
{
    send_page(s, id, params, "resources", s->srv->n_resources, resource_item);
}

static void h_resource_templates_list(struct mcp_session *s, const json_t *id, json_t *params)
{
    send_page(s, id, params, "resourceTemplates", s->srv->n_templates, template_item);
}

static void h_resources_read(struct mcp_session *s, const json_t *id, json_t *params)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    if (!uri) {
        send_error(s, id, RPC_INVALID_PARAMS, "resources/read: params.uri (string) is required");
        return;
    }
    struct mcp_server *srv = s->srv;
    struct sbx_err err = {.code = ENOENT};
    json_t *contents = NULL;
    int r = -1;
    srv->current_owner = s->owner;
    for (size_t i = 0; i < srv->n_resources && r < 0 && err.code == ENOENT; i++)
        if (strcmp(srv->resources[i].def.uri, uri) == 0)
            r = srv->resources[i].def.read(uri, srv->resources[i].data, &contents, &err);
    for (size_t i = 0; i < srv->n_templates && r < 0 && err.code == ENOENT; i++)
        r = srv->templates[i].def.read(uri, srv->templates[i].data, &contents, &err);
    srv->current_owner = NULL;
    if (r == 0) {
        send_result(s, id, json_pack("{s:o}", "contents", contents));
        return;
    }
    if (err.code == ENOENT)
        send_error(s, id, RPC_RESOURCE_NOT_FOUND, "resource not found: %s", uri);
    else if (err.code == EFBIG) /* it exists, but cannot be returned whole */
        send_error(s, id, RPC_INVALID_PARAMS, "%s: %s", uri, err.msg);
    else
        send_error(s, id, -32603, "reading %s: %s", uri, err.msg);
}

static void h_prompts_list(struct mcp_session *s, const json_t *id, json_t *params)
{
    send_page(s, id, params, "prompts", s->srv->n_prompts, prompt_item);
}

static void h_prompts_get(struct mcp_session *s, const json_t *id, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    const struct prompt_entry *p = NULL;
    for (size_t i = 0; name && i < s->srv->n_prompts; i++)
        if (strcmp(s->srv->prompts[i].def.name, name) == 0)
            p = &s->srv->prompts[i];
    if (!p) {
        send_error(s, id, RPC_INVALID_PARAMS, "unknown prompt: %s",
                   name ? name : "(no name given)");
        return;
    }
    const json_t *args = json_object_get(params, "arguments");
    if (args && !json_is_object(args)) {
        send_error(s, id, RPC_INVALID_PARAMS, "prompts/get: arguments must be an object");
        return;
    }
    size_t i;
    const json_t *a;
    json_array_foreach(p->arguments, i, a)
    {
        const char *an = json_string_value(json_object_get(a, "name"));
        if (json_is_true(json_object_get(a, "required")) && an &&
            !json_is_string(json_object_get(args, an))) {
            send_error(s, id, RPC_INVALID_PARAMS, "prompt %s: argument '%s' (string) is required",
                       name, an);
            return;
        }
    }
    json_t *empty = json_object(), *messages = NULL;
    struct sbx_err err = {0};
    int r = p->def.get(args ? args : empty, p->data, &messages, &err);
    json_decref(empty);
    if (r < 0) {
        send_error(s, id, err.code == ENOENT ? RPC_INVALID_PARAMS : -32603, "prompt %s: %s", name,
                   err.msg);
        return;
    }
    json_t *res = json_pack("{s:o}", "messages", messages);
    if (p->def.description)
        json_object_set_new(res, "description", json_string(p->def.description));
    send_result(s, id, res);
}

static void h_set_level(struct mcp_session *s, const json_t *id, json_t *params)
{
    int lvl = log_level_from_name(json_string_value(json_object_get(params, "level")));
    if (lvl < 0) {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "logging/setLevel: level must be one of debug, info, notice, warning, error, "
                   "critical, alert, emergency");
        return;
    }
    s->log_level = lvl;
    send_result(s, id, json_object());
}

#define MAX_SUBSCRIPTIONS 1024

static void h_subscribe(struct mcp_session *s, const json_t *id, json_t *params)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    if (!uri) {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "resources/subscribe: params.uri (string) is required");
        return;
    }
    /* Kept for the session's life: no resource has a longer uri, and without a bound 1024 of
     * them could hold a message's worth each. */
    if (strlen(uri) > MCP_URI_MAX) {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "resources/subscribe: a uri of at most %d bytes (no resource has a longer one)",
                   MCP_URI_MAX);
        return;
    }
    if (!s->subscriptions) {
        s->subscriptions = json_object();
        s->srv->n_subscribed++;
    }
    if (json_object_size(s->subscriptions) >= MAX_SUBSCRIPTIONS) {
        send_error(s, id, RPC_INVALID_PARAMS, "resources/subscribe: at most %d subscriptions",
                   MAX_SUBSCRIPTIONS);
        return;
    }
    json_object_set_new(s->subscriptions, uri, json_true());
    send_result(s, id, json_object());
}

static void h_unsubscribe(struct mcp_session *s, const json_t *id, json_t *params)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    if (!uri) {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "resources/unsubscribe: params.uri (string) is required");
        return;
    }
    if (s->subscriptions)
        json_object_del(s->subscriptions, uri);
    send_result(s, id, json_object());
}

void mcp_server_resource_updated(struct mcp_server *srv, const char *owner, const char *uri)
{
    /* Called for every run: with hundreds of sessions and no subscriber, the walk was the
     * server's most costly function of its own. */
    if (!srv->n_subscribed)
        return;
    for (struct mcp_session *s = srv->sessions; s; s = s->next)
        if (s->subscriptions && strcmp(s->owner, owner) == 0 &&
            json_object_get(s->subscriptions, uri))
            send_notification(s, "notifications/resources/updated", json_pack("{s:s}", "uri", uri),
                              NULL);
}

/* No argument has completions to offer; a reference to nothing, or a request without the
 * argument to complete, is still refused, as the spec asks. */
static void h_complete(struct mcp_session *s, const json_t *id, json_t *params)
{
    const json_t *ref = json_object_get(params, "ref");
    const char *type = json_string_value(json_object_get(ref, "type"));
    const json_t *arg = json_object_get(params, "argument");
    if (!type) {
        send_error(s, id, RPC_INVALID_PARAMS, "completion/complete: params.ref.type is required");
        return;
    }
    bool found = false;
    if (strcmp(type, "ref/prompt") == 0) {
        const char *name = json_string_value(json_object_get(ref, "name"));
        for (size_t i = 0; name && i < s->srv->n_prompts && !found; i++)
            found = strcmp(s->srv->prompts[i].def.name, name) == 0;
    } else if (strcmp(type, "ref/resource") == 0) {
        const char *uri = json_string_value(json_object_get(ref, "uri"));
        for (size_t i = 0; uri && i < s->srv->n_templates && !found; i++)
            found = strcmp(s->srv->templates[i].def.uri, uri) == 0;
    } else {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "completion/complete: ref.type must be ref/prompt or ref/resource");
        return;
    }
    if (!found) {
        send_error(s, id, RPC_INVALID_PARAMS, "completion/complete: no such %s",
                   strcmp(type, "ref/prompt") == 0 ? "prompt" : "resource template");
        return;
    }
    if (!json_is_string(json_object_get(arg, "name")) ||
        !json_is_string(json_object_get(arg, "value"))) {
        send_error(s, id, RPC_INVALID_PARAMS,
                   "completion/complete: params.argument needs a name and a value");
        return;
    }
    send_result(
        s, id, json_pack("{s:{s:[], s:i, s:b}}", "completion", "values", "total", 0, "hasMore", 0));
}

static const struct {
    const char *method;
    method_fn fn;
    bool before_init;
} methods[] = {
    {"initialize", h_initialize, true},
    {"ping", h_ping, true},
    {"tools/list", h_tools_list, false},
    {"tools/call", h_tools_call, false},
    {"resources/list", h_resources_list, false},
    {"resources/read", h_resources_read, false},
    {"resources/templates/list", h_resource_templates_list, false},
    {"resources/subscribe", h_subscribe, false},
    {"resources/unsubscribe", h_unsubscribe, false},
    {"prompts/list", h_prompts_list, false},
    {"prompts/get", h_prompts_get, false},
    {"logging/setLevel", h_set_level, false},
    {"completion/complete", h_complete, false},
};

static void on_cancelled(struct mcp_session *s, json_t *params)
{
    const json_t *rid = json_object_get(params, "requestId");
    if (!rid)
        return;
    for (struct mcp_call *c = s->calls; c; c = c->next) {
        if (json_equal(c->id, rid)) {
            log_emit(LOG_LVL_DEBUG, "request cancelled by the client", "owner", s->owner, NULL);
            json_t *id = json_incref(c->id);
            bool batched = c->batch != NULL;
            call_cancel(c); /* no response is sent for a cancelled request */
            /* A batch's request ends with the batch (batch_release). */
            if (s->ops.end_request && !batched)
                s->ops.end_request(s->ctx, id);
            json_decref(id);
            return;
        }
    }
}

/* Whether a string anywhere in v holds a NUL: valid JSON (\u0000), but every name, path and
 * command is a C string here, where it would end early. */
static bool holds_nul(const json_t *v)
{
    const char *key;
    const json_t *e;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return strlen(json_string_value(v)) != json_string_length(v);
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, key, e) if (holds_nul(e)) return true;
        return false;
    case JSON_ARRAY:
        json_array_foreach(v, i, e) if (holds_nul(e)) return true;
        return false;
    default:
        return false;
    }
}

json_t *mcp_id_from_ends(const char *head, const char *tail)
{
    static regex_t first, last;
    static int ready; /* 1 compiled, -1 failed */
#define ID_VALUE "[[:space:]]*\"id\"[[:space:]]*:[[:space:]]*(-?[0-9]+|\"[^\"\\]*\")"
    if (!ready)
        ready = regcomp(&first,
                        "^[[:space:]]*\\{[[:space:]]*(\"jsonrpc\"[[:space:]]*:[[:space:]]*"
                        "\"2\\.0\"[[:space:]]*,)?" ID_VALUE "[[:space:]]*[,}]",
                        REG_EXTENDED) == 0 &&
                        regcomp(&last, "[,{]" ID_VALUE "[[:space:]]*\\}[[:space:]]*$",
                                REG_EXTENDED) == 0
                    ? 1
                    : -1;
#undef ID_VALUE
    if (ready < 0)
        return NULL;
    regmatch_t m[3];
    const char *text = NULL;
    if (regexec(&first, head, 3, m, 0) == 0)
        text = head;
    else if (regexec(&last, tail, 2, m, 0) == 0)
        text = tail, m[2] = m[1];
    if (!text || m[2].rm_so < 0)
        return NULL;
    return json_loadb(text + m[2].rm_so, (size_t)(m[2].rm_eo - m[2].rm_so), JSON_DECODE_ANY, NULL);
}

json_t *mcp_id_from_text(const char *buf, size_t len)
{
    char head[MCP_ID_END_BYTES + 1], tail[MCP_ID_END_BYTES + 1];
    size_t keep = len < MCP_ID_END_BYTES ? len : MCP_ID_END_BYTES;
    memcpy(head, buf, keep);
    head[keep] = '\0';
    memcpy(tail, buf + len - keep, keep);
    tail[keep] = '\0';
    return mcp_id_from_ends(head, tail);
}

void mcp_message_ends_add(struct mcp_message_ends *e, const char *p, size_t n)
{
    e->bytes += n;
    size_t take = n < MCP_ID_END_BYTES - e->head_len ? n : MCP_ID_END_BYTES - e->head_len;
    memcpy(e->head + e->head_len, p, take);
    e->head_len += take;
    if (n >= MCP_ID_END_BYTES) {
        memcpy(e->tail, p + n - MCP_ID_END_BYTES, MCP_ID_END_BYTES);
        e->tail_len = MCP_ID_END_BYTES;
        return;
    }
    size_t keep = e->tail_len + n > MCP_ID_END_BYTES ? MCP_ID_END_BYTES - n : e->tail_len;
    memmove(e->tail, e->tail + e->tail_len - keep, keep);
    memcpy(e->tail + keep, p, n);
    e->tail_len = keep + n;
}

json_t *mcp_message_ends_id(struct mcp_message_ends *e)
{
    e->head[e->head_len] = '\0';
    e->tail[e->tail_len] = '\0';
    return mcp_id_from_ends(e->head, e->tail);
}

/* Answered under id when there is one: its client waits for that, not for null. */
static bool too_big(struct mcp_session *s, size_t len, const json_t *id)
{
    if (len <= s->srv->cfg->max_message_bytes)
        return false;
    send_error(s, id, RPC_INVALID_REQUEST, "message of %zu bytes exceeds the limit of %llu", len,
               (unsigned long long)s->srv->cfg->max_message_bytes);
    return true;
}

/* The id of a request that is valid JSON but that the strict parse refuses (an integer past
 * 64 bits, a key given twice, a key holding \u0000), read by a lenient parse: its client waits for
 * an answer under that id, not under null. NULL when there is none, or none that survives a double
 * exactly; *valid says whether the lenient parse took the text. */
static json_t *refused_request_id(const char *buf, size_t len, bool *valid)
{
    json_error_t je;
    json_t *loose = json_loadb(buf, len, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
    /* A key holding \u0000 is valid JSON that no parse here takes. */
    *valid = loose != NULL || json_error_code(&je) == json_error_null_byte_in_key;
    const json_t *id = json_object_get(loose, "id");
    json_t *out = NULL;
    if (json_is_string(json_object_get(loose, "method"))) {
        double d = json_real_value(id);
        if (json_is_string(id))
            out = json_incref((json_t *)id);
        else if (json_is_real(id) && floor(d) == d && fabs(d) < 0x1p53)
            out = json_integer((json_int_t)d);
    }
    json_decref(loose);
    return out;
}

bool mcp_text_is_request(const char *buf, size_t len)
{
    bool valid;
    json_t *id = refused_request_id(buf, len, &valid);
    bool request = id != NULL;
    json_decref(id);
    return request;
}

json_t *mcp_parse(const char *buf, size_t len, char *why, size_t size)
{
    json_error_t je;
    json_t *msg =
        json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!msg) {
        /* jansson's wording for bad bytes is cryptic; name the actual problem. */
        bool bad_utf8 = strstr(je.text, "decode byte") || strstr(je.text, "UTF-8");
        snprintf(why, size, "parse error: %s%s (line %d, column %d)",
                 bad_utf8 ? "invalid UTF-8: " : "", je.text, je.line, je.column);
    }
    return msg;
}

enum mcp_msg_kind mcp_session_receive(struct mcp_session *s, const char *buf, size_t len)
{
    if (len > s->srv->cfg->max_message_bytes) {
        json_t *id = mcp_id_from_text(buf, len);
        char why[96];
        snprintf(why, sizeof(why), "exceeds the size limit (%zu bytes, limit %llu)", len,
                 (unsigned long long)s->srv->cfg->max_message_bytes);
        bool response = mcp_session_refuse_response(s, id, why);
        if (!response)
            too_big(s, len, id);
        json_decref(id);
        return response ? MCP_MSG_RESPONSE : MCP_MSG_INVALID;
    }
    char why[JSON_ERROR_TEXT_LENGTH + 64];
    json_t *msg = mcp_parse(buf, len, why, sizeof(why));
    if (!msg) {
        /* Valid JSON the strict parse refuses is an invalid request under its id. Text that
         * neither parse takes (bad bytes, a lone surrogate) is a parse error, under the id
         * its ends show if they show one. */
        bool valid;
        json_t *id = refused_request_id(buf, len, &valid);
        int code = valid ? RPC_INVALID_REQUEST : RPC_PARSE_ERROR;
        /* Not a request: under the id of one of ours, it is the client's answer to it. */
        bool response = false;
        if (!id) {
            id = mcp_id_from_text(buf, len);
            char refused[sizeof(why) + 32];
            snprintf(refused, sizeof(refused), "could not be read: %s", why);
            response = mcp_session_refuse_response(s, id, refused);
        }
        if (!response)
            send_error(s, id, code, "%s", why);
        json_decref(id);
        return response ? MCP_MSG_RESPONSE : MCP_MSG_INVALID;
    }
    enum mcp_msg_kind kind = mcp_session_receive_json(s, msg, len);
    json_decref(msg);
    return kind;
}

static bool valid_id(const json_t *id)
{
    return id && (json_is_string(id) || json_is_integer(id));
}

static const char NOT_AN_OBJECT[] = "a JSON-RPC message must be an object";
static const char BAD_ID[] = "id must be a string or an integer";
static const char NO_METHOD_OR_RESULT[] =
    "a message needs a method, or an id with a result or error";

const char *mcp_message_shape_error(const json_t *msg)
{
    if (!json_is_object(msg))
        return NOT_AN_OBJECT;
    const json_t *method = json_object_get(msg, "method"), *id = json_object_get(msg, "id");
    bool response = !method && (json_object_get(msg, "result") || json_object_get(msg, "error"));
    /* A client's error response may carry id null (a message it could not read). */
    bool null_error = json_is_null(id) && response && json_object_get(msg, "error");
    if (id && !valid_id(id) && !null_error)
        return BAD_ID;
    if (method && !json_is_string(method))
        return "method must be a string";
    if (!method && !response)
        return NO_METHOD_OR_RESULT;
    return NULL;
}

const json_t *mcp_batch_first_request_id(const json_t *batch)
{
    size_t i;
    const json_t *m;
    json_array_foreach(batch, i, m)
    {
        const json_t *id = json_object_get(m, "id");
        if (json_is_string(json_object_get(m, "method")) && valid_id(id))
            return id;
    }
    return NULL;
}

bool mcp_session_accepts_batches(const struct mcp_session *s)
{
    return s->initialized && strcmp(s->version, "2025-03-26") == 0;
}

static enum mcp_msg_kind receive_one(struct mcp_session *s, json_t *msg);

/* Each message of the batch is handled as if it came alone; the answers are collected
 * (s->batch) and sent as one array when the last request is done. */
static enum mcp_msg_kind receive_batch(struct mcp_session *s, json_t *batch)
{
    if (json_array_size(batch) == 0) {
        send_error(s, NULL, RPC_INVALID_REQUEST, "an empty batch");
        return MCP_MSG_INVALID;
    }
    struct mcp_batch *b = xcalloc(1, sizeof(*b));
    b->responses = json_array();
    const json_t *first = mcp_batch_first_request_id(batch);
    b->first_id = first ? json_deep_copy(first) : NULL;
    b->open = 1;
    s->batch = b;
    enum mcp_msg_kind kind = MCP_MSG_INVALID;
    size_t i;
    json_t *m;
    json_array_foreach(batch, i, m)
    {
        enum mcp_msg_kind k;
        const json_t *id = json_object_get(m, "id");
        if (strcmp(json_string_value(json_object_get(m, "method")) ?: "", "initialize") == 0) {
            send_error(s, valid_id(id) ? id : NULL, RPC_INVALID_REQUEST,
                       "initialize must not be part of a batch");
            k = MCP_MSG_INVALID;
        } else {
            k = receive_one(s, m);
        }
        if (kind != MCP_MSG_REQUEST && k != MCP_MSG_INVALID)
            kind = k;
    }
    s->batch = NULL;
    batch_release(s, b);
    return kind;
}

enum mcp_msg_kind mcp_session_receive_json(struct mcp_session *s, json_t *msg, size_t len)
{
    const json_t *id = json_object_get(msg, "id");
    if (too_big(s, len, valid_id(id) ? id : NULL))
        return MCP_MSG_INVALID;
    if (!json_is_array(msg))
        return receive_one(s, msg);
    if (mcp_session_accepts_batches(s))
        return receive_batch(s, msg);
    if (s->initialized)
        send_error(s, NULL, RPC_INVALID_REQUEST,
                   "batches are not supported in protocol version %s (2025-06-18 removed them)",
                   s->version);
    else
        send_error(s, NULL, RPC_INVALID_REQUEST,
                   "a batch cannot come before initialize, which must be sent alone");
    return MCP_MSG_INVALID;
}

static enum mcp_msg_kind receive_one(struct mcp_session *s, json_t *msg)
{
    enum mcp_msg_kind kind = MCP_MSG_INVALID;
    const json_t *id = json_is_object(msg) ? json_object_get(msg, "id") : NULL;
    bool id_ok = valid_id(id);
    const json_t *reply_id = id_ok ? id : NULL;
    if (!json_is_object(msg)) {
        send_error(s, NULL, RPC_INVALID_REQUEST, NOT_AN_OBJECT);
        goto out;
    }
    json_t *method_v = json_object_get(msg, "method");
    bool response = !method_v && (json_object_get(msg, "result") || json_object_get(msg, "error"));
    const char *ver = json_string_value(json_object_get(msg, "jsonrpc"));
    if (!ver || strcmp(ver, "2.0") != 0) {
        /* Not even a malformed response is answered: its id is the client's own, and the error
         * would go to the client's request of that id, if one is open. The request it answers
         * fails (it would wait for ever otherwise). */
        if (!method_v && mcp_session_refuse_response(s, id, "lacks \"jsonrpc\": \"2.0\"")) {
            kind = MCP_MSG_RESPONSE;
        } else if (response) {
            log_emit(LOG_LVL_DEBUG, "response without \"jsonrpc\": \"2.0\" ignored", "owner",
                     s->owner, NULL);
            kind = MCP_MSG_RESPONSE;
        } else {
            send_error(s, reply_id, RPC_INVALID_REQUEST, "\"jsonrpc\": \"2.0\" is required");
        }
        goto out;
    }
    if (holds_nul(msg)) {
        /* A request is refused with its id, a response fails the request it answers (which
         * would wait for ever otherwise); anything else is dropped. */
        if (method_v && id_ok)
            send_error(s, id, RPC_INVALID_PARAMS,
                       "a string holds a NUL character (\\u0000); send binary file content "
                       "base64-encoded");
        else if (response &&
                 mcp_session_refuse_response(s, id, "holds a NUL character (\\u0000) in a string"))
            kind = MCP_MSG_RESPONSE;
        goto out;
    }
    if (!method_v) {
        /* A response is never answered, not even one whose id is null or missing (a client's
         * error about a message it could not read): one that matches nothing is dropped. */
        if (response) {
            kind = MCP_MSG_RESPONSE;
            if (id_ok)
                on_response(s, msg);
        } else if (mcp_session_refuse_response(s, id, "has neither a result nor an error")) {
            /* The id of a request of the server's: a client's broken answer to it, which
             * fails it; an error sent back under that id would reach nobody. */
            kind = MCP_MSG_RESPONSE;
        } else {
            send_error(s, reply_id, RPC_INVALID_REQUEST, NO_METHOD_OR_RESULT);
        }
        goto out;
    }
    const char *method = json_string_value(method_v);
    json_t *params = json_object_get(msg, "params");
    /* JSON-RPC allows params by position (an array); MCP's methods take them by name, which
     * makes an array invalid params, not an invalid request. */
    if (!method || (params && !json_is_object(params) && !json_is_array(params))) {
        send_error(s, reply_id, RPC_INVALID_REQUEST,
                   !method ? "method must be a string" : "params must be an object");
        goto out;
    }
    if (!id) {
        kind = MCP_MSG_NOTIFICATION;
        if (strcmp(method, "notifications/cancelled") == 0)
            on_cancelled(s, params);
        /* notifications/initialized and unknown notifications need no answer */
        goto out;
    }
    if (!id_ok) {
        send_error(s, NULL, RPC_INVALID_REQUEST, BAD_ID);
        goto out;
    }
    kind = MCP_MSG_REQUEST;
    /* An id names one request: another with the id of a call in flight, whatever its method,
     * would make the client's matching of answers and its cancel ambiguous. */
    for (const struct mcp_call *o = s->calls; o; o = o->next)
        if (json_equal(o->id, id)) {
            send_error(s, id, RPC_INVALID_REQUEST, "a request with this id is still in flight");
            goto out;
        }
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        if (strcmp(methods[i].method, method) != 0)
            continue;
        if (!s->initialized && !methods[i].before_init) {
            send_error(s, id, RPC_INVALID_REQUEST, "server not initialized: send initialize first");
            goto out;
        }
        if (json_is_array(params)) {
            send_error(s, id, RPC_INVALID_PARAMS,
                       "params must be an object: %s takes its parameters by name", method);
            goto out;
        }
        json_t *p = params ? json_incref(params) : json_object();
        methods[i].fn(s, id, p);
        json_decref(p);
        goto out;
    }
    send_error(s, id, RPC_METHOD_NOT_FOUND, "method not found: %s", method);
out:
    return kind;
}
