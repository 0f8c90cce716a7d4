/* Shared pieces of the sandbox service's tool handlers. */
#include "tools_common.h"

#include "protocol/mcp.h"
#include "sandbox.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>

int tool_register(struct sandbox_service *svc, const struct mcp_tool_def *defs, size_t n,
                  struct sbx_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (mcp_server_add_tool(svc->srv, &defs[i], svc, err) < 0)
            return -1;
    return 0;
}

const char *tool_arg_str(const json_t *args, const char *key)
{
    return json_string_value(json_object_get(args, key));
}

static struct sandbox *
sandbox_of_call(struct mcp_call *call, const json_t *args, struct sandbox_service *svc,
                int (*lookup)(struct sandbox_service *, const char *, const char *,
                              struct sandbox **, struct sbx_err *))
{
    struct sbx_err err = {0};
    struct sandbox *sb = NULL;
    if (lookup(svc, mcp_call_owner(call), tool_arg_str(args, "sandbox_id"), &sb, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return NULL;
    }
    char *notice = sandbox_take_notice(sb);
    if (notice)
        mcp_call_notice(call, notice);
    free(notice);
    return sb;
}

struct sandbox *tool_sandbox(struct sandbox_service *svc, struct mcp_call *call, const json_t *args)
{
    return sandbox_of_call(call, args, svc, sandbox_lookup);
}

struct sandbox *tool_sandbox_to_work(struct sandbox_service *svc, struct mcp_call *call,
                                     const json_t *args)
{
    return sandbox_of_call(call, args, svc, sandbox_lookup_to_work);
}

struct setup_wait {
    struct sandbox_wait wait;
    struct mcp_call *call;
    json_t *args;
    char id[sizeof(((struct sandbox *)0)->id)]; /* the sandbox waited for */
    void (*handler)(struct mcp_call *, json_t *, void *);
    struct sandbox_service *svc;
};

static void free_setup_wait(struct setup_wait *w)
{
    json_decref(w->args);
    free(w);
}

static void on_setup_wait_cancelled(struct mcp_call *call, void *data)
{
    (void)call;
    struct setup_wait *w = data;
    sandbox_wait_cancel(&w->wait);
    free_setup_wait(w);
}

/* The call starts over: the sandbox may have been closed or replaced meanwhile. A default
 * sandbox that failed to start while the call waited is named, so that the call hears why
 * (the next call gets a new one), rather than making another and waiting again. */
static void on_setup_ended(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct setup_wait *w = data;
    mcp_call_on_cancel(w->call, NULL, NULL);
    const struct sandbox *sb = sandbox_find(w->svc, w->id);
    if (sb && sb->failed_start && !json_object_get(w->args, "sandbox_id")) {
        json_t *named = json_copy(w->args);
        json_object_set_new(named, "sandbox_id", json_string(w->id));
        json_decref(w->args);
        w->args = named;
    }
    w->handler(w->call, w->args, w->svc);
    free_setup_wait(w);
}

bool tool_wait_for_setup(struct sandbox_service *svc, struct mcp_call *call, json_t *args,
                         struct sandbox *sb, void (*handler)(struct mcp_call *, json_t *, void *))
{
    if (!sandbox_setting_up(sb))
        return false;
    struct setup_wait *w = xcalloc(1, sizeof(*w));
    *w = (struct setup_wait){
        .call = call, .args = json_incref(args), .handler = handler, .svc = svc};
    snprintf(w->id, sizeof(w->id), "%s", sb->id);
    sandbox_wait_setup(sb, &w->wait, on_setup_ended, w);
    mcp_call_on_cancel(call, on_setup_wait_cancelled, w);
    return true;
}

struct sandbox *tool_sandbox_with_files(struct sandbox_service *svc, struct mcp_call *call,
                                        json_t *args,
                                        void (*handler)(struct mcp_call *, json_t *, void *))
{
    struct sandbox *sb = tool_sandbox_to_work(svc, call, args);
    if (!sb || tool_wait_for_setup(svc, call, args, sb, handler))
        return NULL;
    /* Working with its files is using the sandbox: its idle TTL starts again. */
    sandbox_touch(sb);
    return sb;
}

json_t *tool_string_lossy(const char *buf, size_t len)
{
    json_t *j = json_stringn(buf, len);
    if (j)
        return j;
    size_t n;
    char *fixed = utf8_with_replacements(buf, len, &n);
    j = json_stringn(fixed, n);
    free(fixed);
    return j;
}

void tool_finish(struct mcp_call *call, const char *text, json_t *sc)
{
    char *dumped = text ? NULL : json_dumps(sc, JSON_INDENT(1) | MCP_JSON_FLAGS);
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s}], s:o}", "content", "type", "text", "text",
                                    text     ? text
                                    : dumped ? dumped
                                             : "",
                                    "structuredContent", sc));
    free(dumped);
}
