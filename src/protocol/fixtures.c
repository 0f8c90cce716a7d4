/* Hidden tools for the test suites (serve --test-fixtures). Never registered otherwise. They
 * run on timers, never sleeping, so they also prove that a slow call blocks nothing else. */
#include "mcp.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "service/loop.h"
#include "util.h"

struct slow_call {
    struct mcp_call *call;
    struct ev_timer *timer;
    int step, steps;
    uint64_t step_ms;
};

static void slow_cancelled(struct mcp_call *call, void *data)
{
    (void)call;
    struct slow_call *sc = data;
    ev_timer_cancel(sc->timer);
    free(sc);
}

static void slow_tick(struct ev_loop *loop, void *data)
{
    struct slow_call *sc = data;
    sc->timer = NULL;
    sc->step++;
    mcp_call_progress(sc->call, sc->step, sc->steps, "working");
    if (sc->step < sc->steps) {
        sc->timer = ev_timer_add(loop, sc->step_ms, slow_tick, sc);
        return;
    }
    struct mcp_call *call = sc->call;
    free(sc);
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "done"));
}

static void fx_slow(struct mcp_call *call, json_t *args, void *data)
{
    struct ev_loop *loop = data;
    struct slow_call *sc = xcalloc(1, sizeof(*sc));
    sc->call = call;
    json_int_t ms = json_integer_value(json_object_get(args, "ms"));
    json_int_t steps = json_integer_value(json_object_get(args, "steps"));
    sc->steps = steps > 0 ? (int)steps : 1;
    sc->step_ms = (uint64_t)(ms / sc->steps);
    sc->timer = ev_timer_add(loop, sc->step_ms, slow_tick, sc);
    mcp_call_on_cancel(call, slow_cancelled, sc);
}

static void fx_log(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};
    for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
        mcp_call_log(call, levels[i], "fixture", json_sprintf("a %s message", levels[i]));
    mcp_call_finish(call,
                    json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "logged"));
}

/* Conformance suite: the reference everything-server's exact text. */
static void fx_simple_text(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text",
                                    "This is a simple text response for testing."));
}

/* Conformance suite: the reference throws, which its SDK turns into this isError result. */
static void fx_error_handling(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_fail(call, "This tool intentionally returns an error for testing");
}

static void fx_error(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_fail(call, "this tool always fails");
}

/* Sampling and elicitation: ask the client, then report what it answered. */
static void on_client_reply(struct mcp_call *call, const json_t *result, const json_t *error,
                            void *data)
{
    (void)data;
    if (!result) {
        const char *m = json_string_value(json_object_get(error, "message"));
        mcp_call_fail(call, "the client refused: %s", m ? m : "no reason given");
        return;
    }
    char *text = json_dumps(result, JSON_COMPACT | JSON_SORT_KEYS);
    mcp_call_finish(
        call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text ? text : "{}"));
    free(text);
}

static void ask_client(struct mcp_call *call, const char *method, json_t *params)
{
    struct sbx_err err = {0};
    if (mcp_call_request(call, method, params, on_client_reply, NULL, &err) < 0)
        mcp_call_fail(call, "%s", err.msg);
}

static void fx_sampling(struct mcp_call *call, json_t *args, void *data)
{
    (void)data;
    const char *prompt = json_string_value(json_object_get(args, "prompt"));
    ask_client(call, "sampling/createMessage",
               json_pack("{s:[{s:s, s:{s:s, s:s}}], s:i}", "messages", "role", "user", "content",
                         "type", "text", "text", prompt, "maxTokens", 100));
}

static void fx_elicitation(struct mcp_call *call, json_t *args, void *data)
{
    (void)data;
    const char *message = json_string_value(json_object_get(args, "message"));
    ask_client(call, "elicitation/create",
               json_pack("{s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}", "message", message,
                         "requestedSchema", "type", "object", "properties", "username", "type",
                         "string", "required", "username"));
}

static const struct mcp_tool_def fixtures[] = {
    {"test_simple_text", NULL, "Tests simple text content response",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", NULL, true, false,
     true, false, fx_simple_text},
    {"test_error_handling", NULL, "Tests error response handling",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", NULL, true, false,
     true, false, fx_error_handling},
    {"test_sampling", "Sampling fixture",
     "Test fixture: asks the client to sample an LLM completion and returns its answer.",
     "{\"type\":\"object\",\"properties\":{\"prompt\":{\"type\":\"string\"}},"
     "\"required\":[\"prompt\"],\"additionalProperties\":false}",
     NULL, true, false, false, true, fx_sampling},
    {"test_elicitation", "Elicitation fixture",
     "Test fixture: asks the user (through the client) for a username and returns the answer.",
     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}},"
     "\"required\":[\"message\"],\"additionalProperties\":false}",
     NULL, true, false, false, true, fx_elicitation},
    {"test_slow", "Slow fixture",
     "Test fixture: completes after ms milliseconds, in steps with "
     "progress notifications.",
     "{\"type\":\"object\",\"properties\":{\"ms\":{\"type\":\"integer\",\"minimum\":0,"
     "\"maximum\":600000},\"steps\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}},"
     "\"required\":[\"ms\"],\"additionalProperties\":false}",
     NULL, true, false, true, false, fx_slow},
    {"test_log", "Logging fixture", "Test fixture: sends one log message at every level.",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", NULL, true, false,
     true, false, fx_log},
    {"test_error", "Failing fixture", "Test fixture: always returns a tool error.",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}", NULL, true, false,
     true, false, fx_error},
};

static int read_static_text(const char *uri, void *data, json_t **contents, struct sbx_err *err)
{
    (void)data;
    (void)err;
    *contents = json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "text/plain", "text",
                          "This is the content of the static text resource.");
    return 0;
}

/* A 1x1 PNG, as a binary resource. */
static int read_static_binary(const char *uri, void *data, json_t **contents, struct sbx_err *err)
{
    (void)data;
    (void)err;
    *contents = json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "image/png", "blob",
                          "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
                          "60e6kgAAAABJRU5ErkJggg==");
    return 0;
}

/* test://template/{id}/data: any id of word characters. */
static int read_template(const char *uri, void *data, json_t **contents, struct sbx_err *err)
{
    (void)data;
    static const char prefix[] = "test://template/", suffix[] = "/data";
    size_t n = strlen(uri), p = sizeof(prefix) - 1, q = sizeof(suffix) - 1;
    if (n <= p + q || strncmp(uri, prefix, p) != 0 || strcmp(uri + n - q, suffix) != 0)
        return sbx_fail(err, ENOENT, "not a template URI");
    size_t idlen = n - p - q;
    for (size_t i = 0; i < idlen; i++)
        if (!isalnum((unsigned char)uri[p + i]) && uri[p + i] != '_' && uri[p + i] != '-')
            return sbx_fail(err, ENOENT, "not a template URI");
    char *text = xasprintf("{\"id\":\"%.*s\",\"templateTest\":true,\"data\":\"Data for ID: %.*s\"}",
                           (int)idlen, uri + p, (int)idlen, uri + p);
    *contents =
        json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "application/json", "text", text);
    free(text);
    return 0;
}

static int get_simple_prompt(const json_t *args, void *data, json_t **messages, struct sbx_err *err)
{
    (void)args;
    (void)data;
    (void)err;
    *messages = json_pack("[{s:s, s:{s:s, s:s}}]", "role", "user", "content", "type", "text",
                          "text", "This is a simple prompt for testing.");
    return 0;
}

static int get_prompt_with_arguments(const json_t *args, void *data, json_t **messages,
                                     struct sbx_err *err)
{
    (void)data;
    (void)err;
    const char *a1 = json_string_value(json_object_get(args, "arg1"));
    const char *a2 = json_string_value(json_object_get(args, "arg2"));
    char *text = xasprintf("Prompt with arguments: arg1='%s', arg2='%s'", a1, a2);
    *messages =
        json_pack("[{s:s, s:{s:s, s:s}}]", "role", "user", "content", "type", "text", "text", text);
    free(text);
    return 0;
}

static const struct mcp_resource_def fixture_resources[] = {
    {"test://static-text", "Static Text Resource", "A static text resource for testing",
     "text/plain", read_static_text},
    {"test://static-binary", "Static Binary Resource", "A static binary resource (PNG)",
     "image/png", read_static_binary},
};

static const struct mcp_resource_def fixture_template = {
    "test://template/{id}/data", "Resource Template", "A resource template with a parameter",
    "application/json", read_template};

static const struct mcp_prompt_def fixture_prompts[] = {
    {"test_simple_prompt", "A simple prompt without arguments", "[]", get_simple_prompt},
    {"test_prompt_with_arguments", "A prompt with required arguments",
     "[{\"name\":\"arg1\",\"description\":\"First test argument\",\"required\":true},"
     "{\"name\":\"arg2\",\"description\":\"Second test argument\",\"required\":true}]",
     get_prompt_with_arguments},
};

int mcp_fixtures_register(struct mcp_server *srv, struct sbx_err *err)
{
    for (size_t i = 0; i < ARRAY_SIZE(fixture_resources); i++)
        if (mcp_server_add_resource(srv, &fixture_resources[i], NULL, err) < 0)
            return -1;
    if (mcp_server_add_resource_template(srv, &fixture_template, NULL, err) < 0)
        return -1;
    for (size_t i = 0; i < ARRAY_SIZE(fixture_prompts); i++)
        if (mcp_server_add_prompt(srv, &fixture_prompts[i], NULL, err) < 0)
            return -1;
    for (size_t i = 0; i < ARRAY_SIZE(fixtures); i++)
        if (mcp_server_add_tool(srv, &fixtures[i], mcp_server_loop(srv), err) < 0)
            return -1;
    return 0;
}
