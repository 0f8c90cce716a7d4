/* The sandbox and execution tools: definitions as data, handlers that queue work on the
 * sandbox service and build the result when it is done. */
#include "sandbox.h"
#include "metrics.h"
#include "tools_common.h"

#include "egress_proxy.h"
#include "files.h"
#include "history.h"
#include "jail/jail.h"
#include "log.h"
#include "protocol/mcp.h"
#include "util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 20

/* ---- the result of an execution ---- */

#define EXEC_OUTPUT_SCHEMA                                                                         \
    "{\"type\":\"object\",\"properties\":{"                                                        \
    "\"sandbox_id\":{\"type\":\"string\"},\"execution_id\":{\"type\":\"string\"},"                 \
    "\"success\":{\"type\":\"boolean\"},\"stdout\":{\"type\":\"string\"},"                         \
    "\"stderr\":{\"type\":\"string\"},\"result\":{\"type\":[\"string\",\"null\"]},"                \
    "\"error\":{\"type\":[\"object\",\"null\"],\"properties\":{\"type\":{\"type\":\"string\"},"    \
    "\"message\":{\"type\":\"string\"},\"traceback\":{\"type\":[\"string\",\"null\"]}}},"          \
    "\"exit_code\":{\"type\":\"integer\"},\"duration_ms\":{\"type\":\"number\"},"                  \
    "\"timed_out\":{\"type\":\"boolean\"},\"truncated\":{\"type\":\"boolean\"},"                   \
    "\"interpreter_restarted\":{\"type\":\"boolean\"},"                                            \
    "\"memory_peak_bytes\":{\"type\":\"integer\"},\"cpu_ms\":{\"type\":\"number\"},"               \
    "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"                              \
    "\"files_incomplete\":{\"type\":\"boolean\"},\"oom_killed\":{\"type\":\"boolean\"}},"          \
    "\"required\":[\"sandbox_id\",\"execution_id\",\"success\",\"stdout\",\"stderr\","             \
    "\"result\",\"error\",\"exit_code\",\"duration_ms\",\"timed_out\",\"truncated\","              \
    "\"interpreter_restarted\",\"memory_peak_bytes\",\"cpu_ms\",\"files\",\"files_incomplete\","   \
    "\"oom_killed\"]}"

static const char *signal_label(int sig)
{
    const char *d = sigdescr_np(sig);
    return d ? d : "unknown signal";
}

/* A path the driver named: a string without a NUL inside, which C would read as a shorter
 * path. */
static const char *frame_path(const json_t *v)
{
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

/* A workspace path as a resource link the client can read back; over HTTP it also carries a
 * signed download URL (in _meta and, for the model, in the description). */
static json_t *resource_link(const struct sandbox *sb, const char *path)
{
    const char *rel = sandbox_file_rel(path);
    char *uri = sandbox_file_uri(sb, path);
    /* The file is not read here: a type only where its name says it (text/plain for a binary
     * file was wrong), none otherwise. */
    json_t *link = json_pack("{s:s, s:s, s:s, s:s*}", "type", "resource_link", "uri", uri, "name",
                             rel, "mimeType", files_mime_type(path, NULL));
    free(uri);
    if (sb->svc->link_fn) {
        char *url = sb->svc->link_fn(sb->svc->link_data, sb->id, rel);
        if (url) {
            char *desc = xasprintf("download: %s (expires in an hour)", url);
            json_object_set_new(link, "description", json_string(desc));
            json_object_set_new(link, "_meta", json_pack("{s:s}", "mcp-sandbox/download", url));
            free(desc);
            free(url);
        }
    }
    return link;
}

static json_t *error_object(const char *type, const char *message, const char *traceback)
{
    return json_pack("{s:s, s:s, s:s?}", "type", type, "message", message, "traceback", traceback);
}

static const char state_lost[] = "the interpreter was restarted, so variables and imports were "
                                 "lost; files in /workspace are kept";

static const char oneshot_closed[] = "this create_run_close sandbox was closed after its run";

/* What a run whose interpreter died left behind. */
static const char *state_after(const struct sandbox *sb, const struct exec_outcome *o)
{
    return sb->oneshot ? oneshot_closed
           : o->interpreter_restarted
               ? state_lost
               : "variables and imports were lost, and no interpreter is started again while "
                 "files in /workspace, /tmp and /dev/shm leave no room for one (reset_sandbox "
                 "with clear_files deletes them)";
}

/* How the interpreter died, as a clause for a message. */
static void describe_death(char *buf, size_t size, struct sandbox *sb, int exit_code,
                           int term_signal, bool oom_killed, bool bad_frame)
{
    char files[160];
    if (oom_killed) {
        sandbox_memory_in_files(sb, files, sizeof(files));
        snprintf(buf, size, "the interpreter was killed: out of memory (limit %llu MiB%s)",
                 (unsigned long long)(sb->profile->memory_bytes >> 20), files);
    } else if (bad_frame)
        snprintf(buf, size,
                 "the interpreter's control channel carried a malformed or oversized frame, or "
                 "more frames than any request asked for (code in the sandbox wrote to its fd "
                 "4), so everything in the sandbox was stopped");
    else if (term_signal)
        snprintf(buf, size, "the interpreter was killed by signal %d (%s)%s", term_signal,
                 signal_label(term_signal),
                 term_signal == SIGKILL ? ", possibly by the memory limit" : "");
    else
        snprintf(buf, size, "the interpreter exited with status %d (os._exit or a fatal error)",
                 exit_code);
}

/* Why an execution without a result frame ended, in words for the caller. */
static json_t *failure_error(const struct exec *e)
{
    const struct exec_outcome *o = &e->outcome;
    char msg[512];
    const char *type = "SandboxError";
    if (o->driver_died && o->timed_out) {
        type = "TimeoutError";
        snprintf(msg, sizeof(msg),
                 "execution timed out after %.1f s and did not stop on "
                 "interrupt; %s",
                 e->timeout_ms / 1000.0, state_after(e->sb, o));
    } else if (o->driver_died && o->cancelled) {
        type = "Cancelled";
        snprintf(msg, sizeof(msg), "cancelled; the execution did not stop on interrupt; %s",
                 state_after(e->sb, o));
    } else if (o->driver_died) {
        type = o->oom_killed                    ? "MemoryError"
               : o->bad_frame || o->term_signal ? "InterpreterCrashed"
                                                : "InterpreterExited";
        char death[256];
        describe_death(death, sizeof(death), e->sb, o->exit_code, o->term_signal, o->oom_killed,
                       o->bad_frame);
        snprintf(msg, sizeof(msg), "%s; %s", death, state_after(e->sb, o));
    } else if (o->cancelled && e->sb->oneshot) { /* closed at the cancel (exec.c) */
        type = "Cancelled";
        snprintf(msg, sizeof(msg), "cancelled by the client; %s", oneshot_closed);
    } else {
        snprintf(msg, sizeof(msg), "%s", o->reason[0] ? o->reason : "the execution did not finish");
    }
    return error_object(type, msg, NULL);
}

/* The text block of a result, parts joined by newlines. Lengths are kept: a NUL in the output
 * (binary data printed) must not cut off what follows it. */
struct text_block {
    char *buf;
    size_t len;
};

static void text_part(struct text_block *t, const char *prefix, const char *s, size_t n)
{
    size_t pl = strlen(prefix), sep = t->len ? 1 : 0;
    t->buf = xrealloc(t->buf, t->len + sep + pl + n + 1);
    char *at = t->buf + t->len;
    if (sep)
        *at++ = '\n';
    memcpy(at, prefix, pl);
    if (n)
        memcpy(at + pl, s, n);
    t->len += sep + pl + n;
    t->buf[t->len] = '\0';
}

static void text_string(struct text_block *t, const char *prefix, const json_t *s)
{
    text_part(t, prefix, json_string_value(s), json_string_length(s));
}

static void text_printf(struct text_block *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void text_printf(struct text_block *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *add = NULL;
    int n = vasprintf(&add, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    text_part(t, "", add, (size_t)n);
    free(add);
}

/* Builds the tool result of a finished execution and records it in the history. */
static json_t *exec_result(struct exec *e, bool *is_error)
{
    struct sandbox *sb = e->sb;
    const struct exec_outcome *o = &e->outcome;
    const json_t *f = o->frame;
    double duration_ms = exec_duration_ms(e);
    /* The cgroup's high-water mark covers every process of the sandbox when there is one. */
    uint64_t cpu_ns = o->cpu_ns;
    uint64_t peak = 0;
    if (!sb->jail || jail_read_memory_peak(sb->jail, &peak) < 0)
        peak = (uint64_t)json_integer_value(json_object_get(f, "maxrss_bytes"));
    e->outcome.oom_killed = sandbox_oom_since_last_look(sb, o->driver_died, peak);

    /* The interpreter died between executions: the first result someone reads since then says
     * so, unless its own run killed the interpreter again, which says as much. */
    if (sb->idle_death.pending && e->call) {
        if (!o->driver_died)
            e->outcome.idle_death = sb->idle_death;
        e->outcome.interpreter_restarted = true;
        sb->idle_death.pending = false;
    }
    const struct idle_death *idle = &o->idle_death;
    bool oom_killed = o->oom_killed || (idle->pending && idle->oom_killed);

    size_t out_len = 0, err_len = 0;
    char *out = outbuf_render(&e->out, &out_len);
    char *errs = outbuf_render(&e->err, &err_len);
    json_t *jout = tool_string_lossy(out, out_len);
    json_t *jerr = tool_string_lossy(errs, err_len);
    bool truncated = outbuf_truncated(&e->out) || outbuf_truncated(&e->err) ||
                     json_is_true(json_object_get(f, "truncated"));
    /* More files changed than listed, or some lie past the driver's scan (see driver.py). */
    bool files_incomplete = json_is_true(json_object_get(f, "files_incomplete")) ||
                            json_array_size(json_object_get(f, "files")) > CHANNEL_MAX_FILES;

    bool success = false;
    json_t *error = NULL;
    const char *result = NULL;
    int exit_code = -1;
    /* The deadline came once the driver was done with the code (drawing figures, scanning the
     * workspace), which only its own interrupt handler can tell: the run is what it says. */
    bool timed_out = o->timed_out;
    if (f && timed_out && json_is_true(json_object_get(f, "interrupt_after_code")))
        timed_out = false;
    if (f) {
        success = json_is_true(json_object_get(f, "success"));
        result = json_string_value(json_object_get(f, "result"));
        exit_code = (int)json_integer_value(json_object_get(f, "exit_code"));
        const char *rejected = json_string_value(json_object_get(f, "rejected"));
        const json_t *fe = json_object_get(f, "error");
        if (rejected) {
            error = error_object("PolicyViolation", rejected, NULL);
            sandbox_count_rejection("policy");
        } else if (timed_out) {
            const char *tb = json_string_value(json_object_get(fe, "traceback"));
            bool command = e->language && strcmp(e->language, "bash") == 0;
            /* The driver sends a command SIGINT, and SIGKILL when it is still there 1 s on. */
            const char *what = !command ? "was interrupted (KeyboardInterrupt)"
                               : exit_code == 128 + SIGKILL
                                   ? "was sent SIGINT, and killed when it did not stop"
                                   : "was sent SIGINT";
            char msg[256];
            snprintf(msg, sizeof(msg), "execution timed out after %.1f s and %s; %s",
                     e->timeout_ms / 1000.0, what,
                     sb->oneshot ? oneshot_closed
                     : command   ? "the sandbox and its files were kept"
                                 : "the interpreter state was kept");
            error = error_object("TimeoutError", msg, tb);
            success = false;
        } else if (json_is_object(fe)) {
            /* The frame is the sandbox's to forge: strings only, as the output schema says
             * (kept as JSON strings: a message may hold NUL). */
            json_t *type = json_object_get(fe, "type"), *msg = json_object_get(fe, "message"),
                   *tb = json_object_get(fe, "traceback");
            error = json_pack("{s:o, s:o, s:o}", "type",
                              json_is_string(type) ? json_incref(type) : json_string("Error"),
                              "message", json_is_string(msg) ? json_incref(msg) : json_string(""),
                              "traceback", json_is_string(tb) ? json_incref(tb) : json_null());
        }
    } else {
        error = failure_error(e);
        if (o->driver_died)
            exit_code = o->term_signal ? 128 + o->term_signal : o->exit_code;
    }
    if (!error)
        error = json_null();
    const char *outcome = success ? "ok" : timed_out ? "timeout" : "error";
    char labels[48];
    snprintf(labels, sizeof(labels), "outcome=\"%s\"", outcome);
    metrics_counter_add("mcp_executions_total", "Executions, by outcome", labels, 1);
    static const double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                    0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                    1,      2.5,     5,      10,    30,     60};
    metrics_observe("mcp_execution_seconds", "Execution time, from dispatch to result",
                    duration_ms / 1000.0, bounds, ARRAY_SIZE(bounds));

    json_t *files = json_array();
    json_t *content = json_array();
    struct text_block text = {0};
    /* First, so that it is read before the NameError it explains. */
    if (idle->pending) {
        char death[256];
        describe_death(death, sizeof(death), sb, idle->exit_code, idle->term_signal,
                       idle->oom_killed, idle->bad_frame);
        if (idle->in_cancelled_run && !idle->oom_killed && idle->term_signal == SIGKILL)
            text_printf(&text,
                        "[before this run, an execution that was cancelled did not stop on "
                        "interrupt, so the interpreter was killed; %s]",
                        state_lost);
        else
            text_printf(&text, "[before this run, %s, %s; %s]",
                        idle->in_cancelled_run ? "in an execution that was cancelled"
                                               : "while the sandbox was idle",
                        death, state_lost);
    }
    if (out_len)
        text_string(&text, "", jout);
    if (err_len)
        text_string(&text, "[stderr]\n", jerr);
    if (result)
        text_string(&text, "Out: ", json_object_get(f, "result"));
    if (json_is_object(error)) {
        const json_t *tb = json_object_get(error, "traceback");
        if (json_string_length(tb))
            text_string(&text, "", tb);
        if (!json_string_length(tb) || timed_out) {
            char *type = xasprintf("%s: ", json_string_value(json_object_get(error, "type")));
            text_string(&text, type, json_object_get(error, "message"));
            free(type);
        }
    }
    if (!f && o->driver_died && !sb->oneshot) /* a one-shot's error says it was closed */
        text_printf(&text, o->interpreter_restarted
                               ? "[interpreter restarted: variables were lost; files kept]"
                               : "[interpreter not restarted: files leave it no room]");
    if (o->oom_killed && !o->driver_died) {
        char held[160];
        sandbox_memory_in_files(sb, held, sizeof(held));
        text_printf(&text,
                    "[the OOM killer took a process of this run: the sandbox's memory limit is "
                    "%llu MiB%s]",
                    (unsigned long long)(sb->profile->memory_bytes >> 20), held);
    }
    if (files_incomplete)
        text_printf(&text,
                    "[not every changed file is listed: more than %d changed, or /workspace "
                    "holds over %d files; list_files shows them all]",
                    CHANNEL_MAX_FILES, CHANNEL_SCAN_FILES);
    for (int i = 0; i < 2; i++) {
        const char *stream = i ? "stderr" : "stdout";
        if (!e->spill_path[i][0])
            continue;
        if (e->spill_failed[i]) {
            text_printf(&text,
                        "[%s was cut to its head and tail; saving it whole to %s failed: %s]",
                        stream, e->spill_path[i],
                        e->spill_why[i][0] ? e->spill_why[i]
                                           : "the workspace or the sandbox's memory is full, or "
                                             "the copy fell behind");
            continue;
        }
        bool mib = e->spilled[i] >= 1u << 20;
        if (e->spill_capped[i])
            text_printf(&text, "[%s was cut to its head and tail; its first %llu %s are in %s]",
                        stream, (unsigned long long)(e->spilled[i] >> (mib ? 20 : 10)),
                        mib ? "MiB" : "KiB", e->spill_path[i]);
        else
            text_printf(&text, "[%s was cut to its head and tail; the whole %s is in %s]", stream,
                        stream, e->spill_path[i]);
    }
    if (sb->oneshot) {
        size_t gone_files = json_array_size(json_object_get(f, "files")),
               gone_figures = json_array_size(json_object_get(f, "image_files"));
        if (gone_files || gone_figures)
            text_printf(&text,
                        "[%s, and its files with it: %zu file(s) the run wrote (named in files) "
                        "and %zu figure(s) past the first %d; create_sandbox keeps a sandbox and "
                        "its files between calls]",
                        oneshot_closed, gone_files, gone_figures, CHANNEL_MAX_IMAGES);
    }
    json_t *jtext = text.len ? tool_string_lossy(text.buf, text.len)
                             : json_string(success ? "(no output)" : "(failed without output)");
    json_array_append_new(content, json_pack("{s:s, s:o}", "type", "text", "text", jtext));

    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(f, "images"), i, v)
    {
        const char *data = json_string_value(json_object_get(v, "data"));
        if (data && i < CHANNEL_MAX_IMAGES)
            json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "image", "data",
                                                     data, "mimeType", "image/png"));
    }
    /* A create_run_close sandbox is gone by the time this is read: no link to its files. */
    size_t links = sb->oneshot ? MAX_LINKS : 0;
    json_array_foreach(json_object_get(f, "image_files"), i, v)
    {
        const char *path = frame_path(v);
        if (path && links++ < MAX_LINKS)
            json_array_append_new(content, resource_link(sb, path));
    }
    for (int k = 0; k < 2; k++)
        if (e->spill_path[k][0] && !e->spill_failed[k] && links++ < MAX_LINKS)
            json_array_append_new(content, resource_link(sb, e->spill_path[k]));
    /* No more than the driver was asked for: a forged frame's list would cost a link and a
     * notification per entry. */
    json_array_foreach(json_object_get(f, "files"), i, v)
    {
        if (i >= CHANNEL_MAX_FILES)
            break;
        const char *path = frame_path(v);
        if (!path)
            continue;
        json_array_append(files, v);
        if (sb->oneshot)
            continue;
        /* Subscribers to this file's resource hear that it changed. */
        sandbox_file_changed(sb, path);
        if (links++ < MAX_LINKS)
            json_array_append_new(content, resource_link(sb, path));
    }

    if (sb->svc->history) {
        const char *err_text =
            json_is_object(error) ? json_string_value(json_object_get(error, "message")) : NULL;
        char err_line[512];
        if (err_text) {
            snprintf(err_line, sizeof(err_line), "%s: %s",
                     json_string_value(json_object_get(error, "type")), err_text);
            utf8_scrub(err_line, strlen(err_line)); /* the cut may split a character */
            err_text = err_line;
        }
        struct history_record rec = {
            .timestamp_ms = e->started_wall_ms ? e->started_wall_ms : (int64_t)wall_ms(),
            .language = e->language,
            .success = success,
            .duration_ms = (int64_t)duration_ms,
            .code = e->code,
            .stdout_text = json_string_value(jout),
            .error = err_text,
        };
        sandbox_history_add(sb, &rec);
    }
    /* Where pip can fetch, code may have run it: the package list follows the directory. */
    if (strcmp(sb->network, "packages") == 0)
        sandbox_sync_packages(sb);

    json_t *sc = json_pack(
        "{s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:i, s:f, s:b, s:b, s:b, s:I, s:f, s:o, s:b, s:b}",
        "sandbox_id", sb->id, "execution_id", e->id, "success", success, "stdout", jout, "stderr",
        jerr, "result", result ? json_string(result) : json_null(), "error", error, "exit_code",
        exit_code, "duration_ms", duration_ms, "timed_out", timed_out, "truncated", truncated,
        "interpreter_restarted", o->interpreter_restarted, "memory_peak_bytes", (json_int_t)peak,
        "cpu_ms", (double)cpu_ns / 1e6, "files", files, "files_incomplete", files_incomplete,
        "oom_killed", oom_killed);
    free(out);
    free(errs);
    free(text.buf);
    *is_error = !success;
    return json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", sc, "isError",
                     !success);
}

static void on_exec_done(struct exec *e)
{
    bool is_error = false;
    json_t *res = exec_result(e, &is_error);
    if (e->call)
        mcp_call_finish(e->call, res);
    else
        json_decref(res);
}

/* ---- argument helpers ---- */

/* The call's timeout_s, within its profile's max_timeout_s; false (the call failed) past it. */
static bool timeout_arg(struct mcp_call *call, const json_t *args, const struct sandbox *sb,
                        uint32_t *ms)
{
    const struct sbx_profile *p = sb->profile;
    const json_t *t = json_object_get(args, "timeout_s");
    *ms = p->timeout_ms;
    if (!json_is_number(t) || json_number_value(t) <= 0)
        return true;
    uint32_t max = p->max_timeout_ms; /* never under timeout_ms (config_check) */
    double want = json_number_value(t) * 1000.0;
    if (want > max) {
        mcp_call_fail(call,
                      "timeout_s %g is more than profile %s allows (max_timeout_s = %u); ask for "
                      "%u at most, or use a profile that allows longer",
                      json_number_value(t), p->name, max / 1000, max / 1000);
        return false;
    }
    *ms = (uint32_t)want;
    return true;
}

static void queue_exec(struct mcp_call *call, struct sandbox *sb, const char *language,
                       const char *code, const char *cwd, uint32_t timeout_ms, exec_done_fn done)
{
    struct sbx_err err = {0};
    if (sandbox_exec(sb, call, language, code, cwd, timeout_ms, done, NULL, &err) < 0)
        mcp_call_fail(call, "%s", err.msg);
}

/* ---- handlers ---- */

static void t_run_code(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox *sb = tool_sandbox_to_work(data, call, args);
    if (!sb)
        return;
    const char *lang = tool_arg_str(args, "language");
    uint32_t timeout_ms;
    if (timeout_arg(call, args, sb, &timeout_ms))
        queue_exec(call, sb, lang ? lang : "python", tool_arg_str(args, "code"), NULL, timeout_ms,
                   on_exec_done);
}

static void t_execute_command(struct mcp_call *call, json_t *args, void *data)
{
    const char *cwd = tool_arg_str(args, "cwd");
    char canon[FILES_PATH_MAX];
    if (cwd) {
        struct sbx_err err = {0};
        if (files_canonical(cwd, canon, sizeof(canon), &err) < 0) {
            mcp_call_fail(call, "cwd: %s", err.msg);
            return;
        }
        cwd = canon;
    }
    struct sandbox *sb = tool_sandbox_to_work(data, call, args);
    if (!sb)
        return;
    uint32_t timeout_ms;
    if (timeout_arg(call, args, sb, &timeout_ms))
        queue_exec(call, sb, "bash", tool_arg_str(args, "command"), cwd, timeout_ms, on_exec_done);
}

/* The sandbox is oneshot: it goes once its execution is over (exec.c), and nothing waits for
 * its jail on the loop; the execution starts once its interpreter is ready. */
static void t_create_run_close(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox_service *svc = data;
    struct sbx_err err = {0};
    struct sandbox *sb = NULL;
    if (sandbox_create_soon(svc, mcp_call_owner(call), "create_run_close",
                            tool_arg_str(args, "profile"), NULL, NULL, NULL, &sb, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    sb->oneshot = true;
    const char *lang = tool_arg_str(args, "language");
    uint32_t timeout_ms;
    if (!timeout_arg(call, args, sb, &timeout_ms)) {
        sandbox_close(sb, NULL);
        return;
    }
    if (sandbox_exec(sb, call, lang ? lang : "python", tool_arg_str(args, "code"), NULL, timeout_ms,
                     on_exec_done, NULL, &err) < 0) {
        sandbox_close(sb, NULL);
        mcp_call_fail(call, "%s", err.msg);
    }
}

static json_t *iso_json(int64_t ms)
{
    char buf[64];
    format_iso8601_ms(buf, sizeof(buf), ms);
    return json_string(buf);
}

static void finish_created(struct mcp_call *call, const struct sandbox *sb)
{
    json_t *sc =
        json_pack("{s:s, s:s?, s:s, s:s, s:o, s:o}", "sandbox_id", sb->id, "name", sb->name,
                  "profile", sb->profile->name, "network", sb->network, "limits",
                  sandbox_limits_json(sb->profile), "created_at", iso_json(sb->created_ms));
    bool packages = strcmp(sb->network, "packages") == 0;
    char *text = xasprintf("created sandbox %s (profile %s, network %s); pass sandbox_id \"%s\" to "
                           "run_code, execute_command%s and the file tools",
                           sb->id, sb->profile->name, sb->network, sb->id,
                           packages ? ", install_packages" : "");
    mcp_call_finish(call, json_pack("{s:[{s:s, s:s}], s:o}", "content", "type", "text", "text",
                                    text, "structuredContent", sc));
    free(text);
}

/* The sandbox's jail exists (error NULL), or could not be made: the sandbox goes, and the
 * create answers with why. */
static void on_created_begun(struct sandbox *sb, const char *error, void *data)
{
    struct mcp_call *call = data;
    if (!error) {
        finish_created(call, sb);
        return;
    }
    mcp_call_fail(call, "%s", error);
    sandbox_close(sb, NULL);
}

/* The client gave up on the create (or its session ended): the sandbox it never heard of goes. */
static void on_create_cancelled(struct mcp_call *call, void *data)
{
    (void)call;
    struct sandbox *sb = data;
    sandbox_forget_begun(sb);
    sandbox_close(sb, NULL);
}

/* The answer waits for the sandbox's jail, the loop does not: others are served meanwhile. */
static void t_create_sandbox(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox_service *svc = data;
    struct sbx_err err = {0};
    struct sandbox *sb = NULL;
    if (sandbox_create_soon(svc, mcp_call_owner(call), tool_arg_str(args, "name"),
                            tool_arg_str(args, "profile"), tool_arg_str(args, "network"),
                            on_created_begun, call, &sb, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    if (sb->spawning)
        mcp_call_on_cancel(call, on_create_cancelled, sb);
    else
        finish_created(call, sb);
}

static json_t *sandbox_summary(const struct sandbox *sb)
{
    return json_pack("{s:s, s:s?, s:s, s:s, s:s, s:o, s:o, s:I, s:b}", "id", sb->id, "name",
                     sb->name, "profile", sb->profile->name, "network", sb->network, "state",
                     sandbox_state_name(sb->state), "created_at", iso_json(sb->created_ms),
                     "last_used_at", iso_json(sb->last_used_ms), "executions",
                     (json_int_t)sb->executions, "default", sb->is_default);
}

static void t_list_sandboxes(struct mcp_call *call, json_t *args, void *data)
{
    (void)args;
    struct sandbox_service *svc = data;
    const char *owner = mcp_call_owner(call);
    json_t *arr = json_array();
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        if (sb->owner && strcmp(sb->owner, owner) == 0)
            json_array_append_new(arr, sandbox_summary(sb));
    tool_finish(call, NULL, json_pack("{s:o}", "sandboxes", arr));
}

static json_t *layers_json(const struct sandbox *sb)
{
    const struct jail *j = sb->jail;
    const struct sbx_config *cfg = sb->svc->cfg;
    return json_pack(
        "{s:[s,s,s,s,s,s,s], s:b, s:b, s:s, s:i, s:b, s:b, s:s}", "namespaces", "user", "pid",
        "mount", "net", "ipc", "uts", "cgroup", "seccomp", !j || !strstr(j->degraded, "seccomp"),
        "landlock", !j || !strstr(j->degraded, "landlock"), "limits",
        j && j->limits_backend ? j->limits_backend : "none", "uid", (int)cfg->sandbox_uid,
        "read_only_root", true, "no_new_privs", true, "degraded", j ? j->degraded : "");
}

/* The sandbox's network policy, and what its egress proxy has done so far. */
static json_t *network_json(const struct sandbox *sb)
{
    json_t *n = json_pack("{s:s}", "mode", sb->network);
    if (sb->proxy) {
        struct egress_stats st;
        egress_proxy_stats(sb->proxy, &st);
        char *allowed = egress_policy_describe(sb->svc->egress);
        char proxy[32];
        snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", EGRESS_PROXY_PORT);
        json_object_set_new(n, "proxy", json_string(proxy));
        json_object_set_new(n, "allowed_hosts", json_string(allowed));
        json_object_set_new(n, "connections_allowed", json_integer((json_int_t)st.allowed));
        json_object_set_new(n, "connections_denied", json_integer((json_int_t)st.denied));
        json_object_set_new(n, "connections_open", json_integer((json_int_t)st.open));
        json_object_set_new(n, "bytes", json_integer((json_int_t)st.bytes));
        free(allowed);
    }
    return n;
}

static void t_get_sandbox_status(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox *sb = tool_sandbox(data, call, args);
    if (!sb)
        return;
    sandbox_sync_packages(sb);
    json_t *usage = sandbox_usage_json(sb);
    json_object_set_new(usage, "workspace_bytes",
                        json_integer((json_int_t)sandbox_fs_used_bytes(sb, "/workspace")));
    bool alive = sb->state == SBX_READY || sb->state == SBX_BUSY;
    json_t *sc = json_pack("{s:s, s:s?, s:s, s:s, s:f, s:o, s:o, s:{s:b, s:I, s:I}, s:O, s:o, s:I}",
                           "sandbox_id", sb->id, "name", sb->name, "profile", sb->profile->name,
                           "state", sandbox_state_name(sb->state), "uptime_s",
                           (double)(now_ns() - sb->created_ns) / 1e9, "limits",
                           sandbox_limits_json(sb->profile), "usage", usage, "interpreter", "alive",
                           alive, "executions", (json_int_t)sb->executions, "restarts",
                           (json_int_t)sb->restarts_total, "installed_packages", sb->packages,
                           "isolation", layers_json(sb), "queued", (json_int_t)sb->queue_len);
    json_object_set_new(sc, "network", network_json(sb));
    if (sb->state == SBX_BROKEN)
        json_object_set_new(sc, "broken_reason", json_string(sb->broken_reason));
    tool_finish(call, NULL, sc);
}

static void t_close_sandbox(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox *sb = tool_sandbox(data, call, args);
    if (!sb)
        return;
    char id[sizeof(sb->id)];
    snprintf(id, sizeof(id), "%s", sb->id);
    json_t *usage = NULL;
    sandbox_close(sb, &usage);
    tool_finish(
        call, NULL,
        json_pack("{s:s, s:b, s:o}", "sandbox_id", id, "closed", true, "final_usage", usage));
}

static void t_reset_sandbox(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox_service *svc = data;
    struct sandbox *sb = tool_sandbox(svc, call, args);
    if (!sb)
        return;
    struct sbx_err err = {0};
    if (sandbox_check_reset(sb, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    if (tool_wait_for_setup(svc, call, args, sb, t_reset_sandbox))
        return;
    bool clear = json_is_true(json_object_get(args, "clear_files"));
    /* The interpreter is stopped now and starts again later, in the loop: the files go
     * before it does (they may be what filled its memory). */
    if (sandbox_restart_interpreter(sb, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    uid_t uid;
    gid_t gid;
    sandbox_host_ids(sb, &uid, &gid);
    /* Every file the sandbox can make is memory: all of them go. */
    for (size_t i = 0; clear && i < FILES_N_AREAS; i++)
        if (files_clear_dir(sandbox_root_fd(sb), files_areas[i], uid, gid, &err) < 0) {
            mcp_call_fail(call, "reset: clearing files: %s", err.msg);
            return;
        }
    if (svc->history && history_clear(svc->history, sb->id, &err) < 0) {
        mcp_call_fail(call, "reset: clearing the history: %s", err.msg);
        return;
    }
    sb->executions = 0;
    sandbox_history_changed(sb);
    tool_finish(call, NULL,
                json_pack("{s:s, s:b, s:b, s:b}", "sandbox_id", sb->id, "reset", true,
                          "interpreter_restarted", true, "files_cleared", clear));
}

static void t_get_execution_history(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox_service *svc = data;
    const char *owner = mcp_call_owner(call);
    const char *id = tool_arg_str(args, "sandbox_id");
    struct sbx_err err = {0};
    char idbuf[32];
    if (!id) {
        struct sandbox *sb = tool_sandbox(svc, call, args);
        if (!sb)
            return;
        snprintf(idbuf, sizeof(idbuf), "%s", sb->id);
        id = idbuf;
    }
    /* An open one's package list is brought up to date first (see sandbox_sync_packages). */
    struct sandbox *open = sandbox_find(svc, id);
    if (open && strcmp(open->owner, owner) == 0)
        sandbox_sync_packages(open);
    /* Closed sandboxes keep their history (also across restarts) for their owner. */
    json_t *info = NULL;
    if (history_get_sandbox(svc->history, id, &info, &err) < 0 && err.code != ENOENT) {
        mcp_call_fail(call, "history: %s", err.msg);
        return;
    }
    if (!info || strcmp(json_string_value(json_object_get(info, "owner")) ?: "", owner) != 0) {
        json_decref(info);
        sandbox_fail_unknown_id(id, &err);
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    const json_t *ln = json_object_get(args, "last_n");
    unsigned last_n = json_is_integer(ln) ? (unsigned)json_integer_value(ln) : 10;
    json_t *records = NULL;
    if (history_list(svc->history, id, last_n, &records, &err) < 0) {
        json_decref(info);
        mcp_call_fail(call, "history: %s", err.msg);
        return;
    }
    json_t *sc = json_pack("{s:s, s:I, s:O?, s:o, s:o}", "sandbox_id", id, "total",
                           (json_int_t)history_total(svc->history, id), "session_start",
                           json_object_get(info, "session_start"), "installed_packages",
                           sandbox_info_packages(info), "records", records);
    json_decref(info);
    tool_finish(call, NULL, sc);
}

/* ---- definitions ---- */

#define SANDBOX_ID_ARG                                                                             \
    "\"sandbox_id\":{\"type\":\"string\",\"maxLength\":64,\"description\":\"A sandbox from "       \
    "create_sandbox; omit it to use your default sandbox (created on first use)\"}"
#define TIMEOUT_ARG                                                                                \
    "\"timeout_s\":{\"type\":\"number\",\"minimum\":0.1,\"maximum\":3600,\"description\":"         \
    "\"Wall-clock limit for this call (default: the profile's timeout_s; at most its "             \
    "max_timeout_s)\"}"

static const struct mcp_tool_def tool_defs[] = {
    {"run_code", "Run code in a persistent sandbox",
     "Run Python (default) or bash code in an isolated sandbox. Python state persists between "
     "calls like a notebook: variables, imports and functions defined in one call are there in "
     "the next. The value of a trailing expression comes back as `result`. Figures left open "
     "(matplotlib) come back as images, and new or changed files in /workspace as links. Output "
     "is capped per stream (head and tail kept, the rest saved to a file). On timeout the "
     "execution is interrupted (state kept); if it will not stop, the interpreter is restarted "
     "and variables are lost, but files stay. No network, except the package index for "
     "sandboxes created with network: packages (see install_packages).",
     "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\",\"minLength\":1,"
     "\"description\":\"The code to run\"},\"language\":{\"type\":\"string\",\"enum\":[\"python\","
     "\"bash\"],\"description\":\"python (default) or bash\"}," SANDBOX_ID_ARG "," TIMEOUT_ARG
     "},\"required\":[\"code\"],\"additionalProperties\":false}",
     EXEC_OUTPUT_SCHEMA, false, false, false, false, t_run_code},
    {"execute_command", "Run a shell command in a sandbox",
     "Run a shell command with `bash -c` in the sandbox (cwd /workspace unless given). Files it "
     "writes persist in the sandbox; the Python interpreter's state is not touched. Returns "
     "stdout, stderr and the exit code.",
     "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\",\"minLength\":1}"
     "," SANDBOX_ID_ARG "," TIMEOUT_ARG ",\"cwd\":{\"type\":\"string\",\"maxLength\":1024,"
     "\"description\":\"Working directory in /workspace or /tmp\"}},\"required\":[\"command\"],"
     "\"additionalProperties\":false}",
     EXEC_OUTPUT_SCHEMA, false, false, false, false, t_execute_command},
    {"create_sandbox", "Create a sandbox",
     "Create a new isolated sandbox and return its sandbox_id. Use it when you need a separate "
     "environment (other variables and files) besides your default sandbox. It lives until "
     "close_sandbox, or until it is idle for the server's idle TTL.",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":64},"
     "\"profile\":{\"type\":\"string\",\"maxLength\":64,\"description\":\"Resource profile: "
     "standard (default) or tight (smaller limits and a static code guard)\"},\"network\":{"
     "\"type\":\"string\",\"enum\":[\"none\",\"packages\"],\"description\":\"none (the default: "
     "loopback only) or packages (the package index, through the server's proxy, for "
     "install_packages)\"}},"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"name\":{"
     "\"type\":[\"string\",\"null\"]},\"profile\":{\"type\":\"string\"},\"network\":{\"type\":"
     "\"string\"},"
     "\"limits\":{\"type\":\"object\"},\"created_at\":{\"type\":\"string\"}},\"required\":["
     "\"sandbox_id\",\"profile\",\"limits\",\"created_at\"]}",
     false, false, false, false, t_create_sandbox},
    {"list_sandboxes", "List your sandboxes",
     "List the sandboxes you own, with their state, profile and how many executions ran.",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"sandboxes\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"object\"}}},\"required\":[\"sandboxes\"]}",
     true, false, true, false, t_list_sandboxes},
    {"get_sandbox_status", "Show a sandbox's state and usage",
     "State, uptime, limits, resource usage (memory, CPU, pids, workspace bytes), whether the "
     "interpreter is alive, installed packages and the isolation layers in force.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_ID_ARG "},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"state\":{"
     "\"type\":\"string\"},\"usage\":{\"type\":\"object\"},\"limits\":{\"type\":\"object\"}},"
     "\"required\":[\"sandbox_id\",\"state\",\"usage\",\"limits\"]}",
     true, false, true, false, t_get_sandbox_status},
    {"close_sandbox", "Close a sandbox",
     "Close a sandbox: every process in it ends and its files are deleted. Its execution "
     "history stays readable.",
     "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\",\"minLength\":1,"
     "\"maxLength\":64}},\"required\":[\"sandbox_id\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"closed\":{"
     "\"type\":\"boolean\"},\"final_usage\":{\"type\":\"object\"}},\"required\":[\"closed\"]}",
     false, true, true, false, t_close_sandbox},
    {"create_run_close", "Run code once in a fresh sandbox",
     "Run code in a brand-new sandbox that is closed right after: nothing (variables, files, "
     "processes) outlives the call. Use run_code instead when you want state to persist.",
     "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\",\"minLength\":1},"
     "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"bash\"]},\"profile\":{\"type\":"
     "\"string\",\"maxLength\":64}," TIMEOUT_ARG "},\"required\":[\"code\"],"
     "\"additionalProperties\":false}",
     EXEC_OUTPUT_SCHEMA, false, false, false, false, t_create_run_close},
    {"get_execution_history", "Show past executions",
     "The newest executions of a sandbox (code, success, output previews, errors), the total "
     "since its last reset, and its installed packages. History survives server restarts.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_ID_ARG ",\"last_n\":{\"type\":\"integer\","
     "\"minimum\":1,\"maximum\":50,\"description\":\"How many records (default 10)\"}},"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"total\":{\"type\":\"integer\"},\"session_start\":{"
     "\"type\":[\"string\",\"null\"]},\"installed_packages\":{\"type\":\"array\"},\"records\":{"
     "\"type\":\"array\",\"items\":{\"type\":\"object\"}}},\"required\":[\"total\",\"records\"]}",
     true, false, true, false, t_get_execution_history},
    {"reset_sandbox", "Reset a sandbox",
     "Restart the sandbox's Python interpreter (all variables and imports are cleared) and clear "
     "its history. Files in /workspace, /tmp and /dev/shm stay unless clear_files is true.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_ID_ARG ",\"clear_files\":{\"type\":"
     "\"boolean\"}},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"reset\":{"
     "\"type\":\"boolean\"}},\"required\":[\"reset\"]}",
     false, true, false, false, t_reset_sandbox},
};

int tools_sandbox_register(struct sandbox_service *svc, struct sbx_err *err)
{
    return tool_register(svc, tool_defs, ARRAY_SIZE(tool_defs), err);
}
