/* Hidden tools for the test suites (serve --test-fixtures). Never registered otherwise. They
 * run on timers, never sleeping, so they also prove that a slow call blocks nothing else. */
#include "mcp.h"

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

static void fx_error(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    (void)data;
    mcp_call_fail(call, "this tool always fails");
}

static const struct mcp_tool_def fixtures[] = {
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

int mcp_fixtures_register(struct mcp_server *srv, struct sbx_err *err)
{
    for (size_t i = 0; i < ARRAY_SIZE(fixtures); i++)
        if (mcp_server_add_tool(srv, &fixtures[i], mcp_server_loop(srv), err) < 0)
            return -1;
    return 0;
}
