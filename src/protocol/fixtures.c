/* Hidden tools for the test suites (serve --test-fixtures). Never registered otherwise. They
 * run on timers, never sleeping, so they also prove that a slow call blocks nothing else. */
#include "mcp.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "service/loop.h"
#include "util.h"

/* What every timer-driven fixture holds first: its call and the pending timer. */
struct timed_fixture {
    struct mcp_call *call;
    struct ev_timer *timer;
};

/* A client cancel ends the fixture: its timer is stopped and its state freed. */
static void timed_fixture_cancelled(struct mcp_call *call, void *data)
{
    (void)call;
    struct timed_fixture *tf = data;
    ev_timer_cancel(tf->timer);
    free(tf);
}

struct slow_call {
    struct timed_fixture base;
    int step, steps;
    uint64_t step_ms;
};

static void slow_tick(struct ev_loop *loop, void *data)
{
    struct slow_call *sc = data;
    sc->base.timer = NULL;
    sc->step++;
    mcp_call_progress(sc->base.call, sc->step, sc->steps, "working");
    if (sc->step < sc->steps) {
        sc->base.timer = ev_timer_add(loop, sc->step_ms, slow_tick, sc);
        return;
    }
    struct mcp_call *call = sc->base.call;
    free(sc);
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "done"));
}

static void fx_slow(struct mcp_call *call, json_t *args, void *data)
{
    struct ev_loop *loop = data;
    struct slow_call *sc = xcalloc(1, sizeof(*sc));
    sc->base.call = call;
    json_int_t ms = json_integer_value(json_object_get(args, "ms"));
    json_int_t steps = json_integer_value(json_object_get(args, "steps"));
    sc->steps = steps > 0 ? (int)steps : 1;
    sc->step_ms = (uint64_t)(ms / sc->steps);
    sc->base.timer = ev_timer_add(loop, sc->step_ms, slow_tick, sc);
    mcp_call_on_cancel(call, timed_fixture_cancelled, sc);
}

/* SEP-1699 polling: the call's stream is closed by the server 50 ms in, and the result comes
 * 100 ms later, reaching the client only when it reconnects with Last-Event-ID. */
struct reconnection {
    struct timed_fixture base;
    bool closed;
};

static void reconnection_tick(struct ev_loop *loop, void *data)
{
    struct reconnection *rc = data;
    rc->base.timer = NULL;
    if (!rc->closed) {
        rc->closed = true;
        mcp_call_close_stream(rc->base.call);
        rc->base.timer = ev_timer_add(loop, 100, reconnection_tick, rc);
        return;
    }
    struct mcp_call *call = rc->base.call;
    free(rc);
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text",
                                    "Reconnection test completed"));
}

static void fx_reconnection(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    struct reconnection *rc = xcalloc(1, sizeof(*rc));
    rc->base.call = call;
    rc->base.timer = ev_timer_add(data, 50, reconnection_tick, rc);
    mcp_call_on_cancel(call, timed_fixture_cancelled, rc);
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

/* Sampling and elicitation: ask the client, then report what it answered. error is the
 * client's own, or one saying its response was malformed. */
static void fail_refused(struct mcp_call *call, const json_t *error)
{
    const char *m = json_string_value(json_object_get(error, "message"));
    mcp_call_fail(call, "the client gave no result: %s", m ? m : "no reason given");
}

static void on_client_reply(struct mcp_call *call, const json_t *result, const json_t *error,
                            void *data)
{
    (void)data;
    if (!result) {
        fail_refused(call, error);
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

/* Minimal media for the content-type fixtures: a 1x1 PNG and an 8-sample 8 kHz WAV. */
static const char png_1x1[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
    "60e6kgAAAABJRU5ErkJggg==";
static const char wav_tiny[] =
    "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

static void fx_image(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s, s:s}]}", "content", "type", "image", "data",
                                    png_1x1, "mimeType", "image/png"));
}

static void fx_audio(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s, s:s}]}", "content", "type", "audio", "data",
                                    wav_tiny, "mimeType", "audio/wav"));
}

static void fx_embedded_resource(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_finish(call, json_pack("{s:[{s:s, s:{s:s, s:s, s:s}}]}", "content", "type", "resource",
                                    "resource", "uri", "test://embedded-resource", "mimeType",
                                    "text/plain", "text", "This is an embedded resource content."));
}

static void fx_multiple_content(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_finish(
        call, json_pack("{s:[{s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:{s:s, s:s, s:s}}]}", "content",
                        "type", "text", "text", "Multiple content types test:", "type", "image",
                        "data", png_1x1, "mimeType", "image/png", "type", "resource", "resource",
                        "uri", "test://mixed-content-resource", "mimeType", "application/json",
                        "text", "{\"test\":\"data\",\"value\":123}"));
}

/* Three steps 50 ms apart, each a log message or a progress notification (on timers, so the
 * loop keeps serving meanwhile). */
struct stepper {
    struct timed_fixture base;
    int step;
    bool progress;
};

static void stepper_tick(struct ev_loop *loop, void *data)
{
    static const char *const logs[] = {"Tool execution started", "Tool processing data",
                                       "Tool execution completed"};
    struct stepper *st = data;
    st->base.timer = NULL;
    if (st->progress)
        mcp_call_progress(st->base.call, st->step * 50.0, 100, NULL);
    else
        mcp_call_log(st->base.call, "info", "fixture", json_string(logs[st->step]));
    if (++st->step < 3) {
        st->base.timer = ev_timer_add(loop, 50, stepper_tick, st);
        return;
    }
    struct mcp_call *call = st->base.call;
    bool progress = st->progress;
    free(st);
    mcp_call_finish(call,
                    json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text",
                              progress ? "Progress test completed" : "Logging test completed"));
}

static void start_stepper(struct mcp_call *call, struct ev_loop *loop, bool progress)
{
    struct stepper *st = xcalloc(1, sizeof(*st));
    st->base.call = call;
    st->progress = progress;
    mcp_call_on_cancel(call, timed_fixture_cancelled, st);
    stepper_tick(loop, st);
}

static void fx_with_logging(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    start_stepper(call, data, false);
}

static void fx_with_progress(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    start_stepper(call, data, true);
}

static void on_elicited(struct mcp_call *call, const json_t *result, const json_t *error,
                        void *data)
{
    (void)data;
    if (!result) {
        fail_refused(call, error);
        return;
    }
    char *content = json_dumps(json_object_get(result, "content") ?: json_null(),
                               JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    char *text = xasprintf("Elicitation completed: action=%s, content=%s",
                           json_string_value(json_object_get(result, "action")) ?: "?",
                           content ? content : "null");
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text));
    free(text);
    free(content);
}

static void elicit(struct mcp_call *call, const char *message, const char *schema_text)
{
    struct sbx_err err = {0};
    json_t *schema = json_loads(schema_text, 0, NULL);
    if (mcp_call_request(call, "elicitation/create",
                         json_pack("{s:s, s:o}", "message", message, "requestedSchema", schema),
                         on_elicited, NULL, &err) < 0)
        mcp_call_fail(call, "%s", err.msg);
}

static void fx_elicitation_defaults(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    elicit(call, "Please review and update the form fields with defaults",
           "{\"type\":\"object\",\"properties\":{"
           "\"name\":{\"type\":\"string\",\"description\":\"User name\",\"default\":\"John Doe\"},"
           "\"age\":{\"type\":\"integer\",\"description\":\"User age\",\"default\":30},"
           "\"score\":{\"type\":\"number\",\"description\":\"User score\",\"default\":95.5},"
           "\"status\":{\"type\":\"string\",\"description\":\"User status\","
           "\"enum\":[\"active\",\"inactive\",\"pending\"],\"default\":\"active\"},"
           "\"verified\":{\"type\":\"boolean\",\"description\":\"Verification status\","
           "\"default\":true}},\"required\":[]}");
}

static void fx_elicitation_enums(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    elicit(
        call, "Please select options from the enum fields",
        "{\"type\":\"object\",\"properties\":{"
        "\"untitledSingle\":{\"type\":\"string\",\"description\":\"Select one option\","
        "\"enum\":[\"option1\",\"option2\",\"option3\"]},"
        "\"titledSingle\":{\"type\":\"string\",\"description\":\"Select one option with titles\","
        "\"oneOf\":[{\"const\":\"value1\",\"title\":\"First Option\"},"
        "{\"const\":\"value2\",\"title\":\"Second Option\"},"
        "{\"const\":\"value3\",\"title\":\"Third Option\"}]},"
        "\"legacyEnum\":{\"type\":\"string\",\"description\":\"Select one option (legacy)\","
        "\"enum\":[\"opt1\",\"opt2\",\"opt3\"],"
        "\"enumNames\":[\"Option One\",\"Option Two\",\"Option Three\"]},"
        "\"untitledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options\","
        "\"minItems\":1,\"maxItems\":3,"
        "\"items\":{\"type\":\"string\",\"enum\":[\"option1\",\"option2\",\"option3\"]}},"
        "\"titledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options with "
        "titles\","
        "\"minItems\":1,\"maxItems\":3,\"items\":{\"anyOf\":["
        "{\"const\":\"value1\",\"title\":\"First Choice\"},"
        "{\"const\":\"value2\",\"title\":\"Second Choice\"},"
        "{\"const\":\"value3\",\"title\":\"Third Choice\"}]}}},\"required\":[]}");
}

static void fx_schema_2020_12(struct mcp_call *call, json_t *args, void *data)
{
    (void)data;
    char *text = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
    mcp_call_finish(
        call, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text ? text : "{}"));
    free(text);
}

#define NO_ARGS "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"

static const struct mcp_tool_def fixtures[] = {
    {"json_schema_2020_12_tool", NULL, "Tool with JSON Schema 2020-12 features",
     "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","
     "\"$defs\":{\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":"
     "\"string\"},\"city\":{\"type\":\"string\"}}}},\"properties\":{\"name\":{\"type\":"
     "\"string\"},\"address\":{\"$ref\":\"#/$defs/address\"}},\"additionalProperties\":false}",
     NULL, true, false, true, false, fx_schema_2020_12},
    {"test_image_content", NULL, "Tests image content response", NO_ARGS, NULL, true, false, true,
     false, fx_image},
    {"test_audio_content", NULL, "Tests audio content response", NO_ARGS, NULL, true, false, true,
     false, fx_audio},
    {"test_embedded_resource", NULL, "Tests embedded resource content response", NO_ARGS, NULL,
     true, false, true, false, fx_embedded_resource},
    {"test_multiple_content_types", NULL, "Tests response with multiple content types", NO_ARGS,
     NULL, true, false, true, false, fx_multiple_content},
    {"test_tool_with_logging", NULL, "Tests tool that emits log messages during execution", NO_ARGS,
     NULL, true, false, true, false, fx_with_logging},
    {"test_tool_with_progress", NULL, "Tests tool that reports progress notifications", NO_ARGS,
     NULL, true, false, true, false, fx_with_progress},
    {"test_elicitation_sep1034_defaults", NULL,
     "Tests elicitation with default values for every primitive type (SEP-1034)", NO_ARGS, NULL,
     true, false, false, true, fx_elicitation_defaults},
    {"test_elicitation_sep1330_enums", NULL, "Tests elicitation with every enum variant (SEP-1330)",
     NO_ARGS, NULL, true, false, false, true, fx_elicitation_enums},
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
    {"test_reconnection", NULL,
     "Tests SSE stream disconnection and client reconnection (SEP-1699): the server closes the "
     "stream mid-call and the result arrives after the client resumes",
     NO_ARGS, NULL, true, false, true, false, fx_reconnection},
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
    *contents =
        json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "image/png", "blob", png_1x1);
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

static int get_prompt_with_embedded_resource(const json_t *args, void *data, json_t **messages,
                                             struct sbx_err *err)
{
    (void)data;
    (void)err;
    const char *uri = json_string_value(json_object_get(args, "resourceUri"));
    *messages =
        json_pack("[{s:s, s:{s:s, s:{s:s, s:s, s:s}}}, {s:s, s:{s:s, s:s}}]", "role", "user",
                  "content", "type", "resource", "resource", "uri", uri, "mimeType", "text/plain",
                  "text", "Embedded resource content for testing.", "role", "user", "content",
                  "type", "text", "text", "Please process the embedded resource above.");
    return 0;
}

static int get_prompt_with_image(const json_t *args, void *data, json_t **messages,
                                 struct sbx_err *err)
{
    (void)args;
    (void)data;
    (void)err;
    *messages =
        json_pack("[{s:s, s:{s:s, s:s, s:s}}, {s:s, s:{s:s, s:s}}]", "role", "user", "content",
                  "type", "image", "data", png_1x1, "mimeType", "image/png", "role", "user",
                  "content", "type", "text", "text", "Please analyze the image above.");
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
    {"test_prompt_with_embedded_resource", "A prompt that embeds a resource",
     "[{\"name\":\"resourceUri\",\"description\":\"URI of the resource to embed\","
     "\"required\":true}]",
     get_prompt_with_embedded_resource},
    {"test_prompt_with_image", "A prompt with an image", "[]", get_prompt_with_image},
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
