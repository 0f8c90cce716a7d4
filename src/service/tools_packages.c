/* install_packages: requirement strings are checked (shape, then packages.allowed) before
 * anything runs; then pip runs inside the sandbox, through its egress proxy, into the
 * sandbox's own package directory; its report says what was installed, the driver refreshes
 * its import caches, and the sandbox's package list (status, history) is updated. */
#include "sandbox.h"
#include "tools_common.h"

#include "files.h"
#include "egress_proxy.h"
#include "history.h"
#include "log.h"
#include "metrics.h"
#include "packages.h"
#include "protocol/mcp.h"
#include "requirements.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_REQUIREMENTS  32
#define REPORT_MAX_BYTES  (4u << 20)
#define OUTPUT_TAIL_BYTES (16u << 10) /* what of pip's chatter the result carries */

/* The report path is the argument after --report in the command the tool composed. */
static const char *report_path(const json_t *argv)
{
    size_t i;
    json_t *v;
    json_array_foreach(argv, i, v)
    {
        if (strcmp(json_string_value(v) ?: "", "--report") == 0)
            return json_string_value(json_array_get(argv, i + 1));
    }
    return NULL;
}

/* pip's stdout then stderr, the tail of each when long. */
static json_t *pip_output(struct exec *e, char **joined, size_t *joined_len)
{
    size_t out_len = 0, err_len = 0;
    char *out = outbuf_render(&e->out, &out_len);
    char *errs = outbuf_render(&e->err, &err_len);
    const char *o = out, *r = errs;
    if (out_len > OUTPUT_TAIL_BYTES) {
        o += out_len - OUTPUT_TAIL_BYTES;
        out_len = OUTPUT_TAIL_BYTES;
    }
    if (err_len > OUTPUT_TAIL_BYTES) {
        r += err_len - OUTPUT_TAIL_BYTES;
        err_len = OUTPUT_TAIL_BYTES;
    }
    size_t len = out_len + err_len + 1;
    char *all = xmalloc(len + 1);
    memcpy(all, o, out_len);
    size_t n = out_len;
    if (out_len && err_len && o[out_len - 1] != '\n')
        all[n++] = '\n';
    memcpy(all + n, r, err_len);
    n += err_len;
    all[n] = '\0';
    free(out);
    free(errs);
    *joined = all;
    *joined_len = n;
    return tool_string_lossy(all, n);
}

/* pip's report goes once read, or once nobody will (a sandbox without a root has none). */
static void remove_report(struct sandbox *sb, const char *path)
{
    struct sbx_err ignored = {0};
    if (path && sandbox_root_fd(sb) >= 0)
        files_remove(sandbox_root_fd(sb), path, &ignored);
}

/* Whether pip ran to its end and said it worked. */
static bool pip_succeeded(const struct exec_outcome *o)
{
    return o->frame && json_is_true(json_object_get(o->frame, "success")) && !o->timed_out;
}

/* pip's report at path, whole (malloc'd, its length in *len), or NULL with err: missing, or
 * larger than the REPORT_MAX_BYTES read. The report is removed either way. */
static char *report_text(struct sandbox *sb, const char *path, size_t *len, struct sbx_err *err)
{
    char *data = NULL;
    uint64_t size = 0;
    *len = 0;
    int rc = path ? sandbox_read_file(sb, path, 0, 0, REPORT_MAX_BYTES, &data, len, &size, err)
                  : sbx_fail(err, ENOENT, "pip wrote no report");
    if (rc == 0 && size > *len)
        rc = sbx_fail(err, EFBIG, "pip's report is %llu bytes, more than the %u MiB read",
                      (unsigned long long)size, REPORT_MAX_BYTES >> 20);
    if (rc < 0) {
        free(data);
        data = NULL;
    }
    remove_report(sb, path);
    return data;
}

/* What pip installed, from its report; [] when the report cannot be read. */
static json_t *read_report(struct sandbox *sb, const char *path)
{
    struct sbx_err err = {0};
    size_t len = 0;
    json_t *installed = NULL;
    char *data = report_text(sb, path, &len, &err);
    if (data)
        packages_parse_report(data, len, &installed, &err);
    free(data);
    return installed ? installed : json_array();
}

/* Why an install was refused when its dry run's report could not be read whole. */
static char *unchecked_reason(const char *why)
{
    return xasprintf("what this install would bring in cannot be checked against "
                     "packages.allowed (%s); nothing was installed",
                     why);
}

/* One install_packages call, the data of its executions: with packages.allowed set, pip first
 * resolves without installing (--dry-run), and every project it would install, dependencies
 * included, must be on the list; only then does the install run, of exactly those files (a
 * second resolution could meet an index that changed since, and bring in what nobody checked). */
struct install {
    uint64_t denied_before; /* the proxy's refusals before the call: those after are its own */
    char report_path[64];   /* the install's report, once the check passed */
    char pins_path[64];     /* the checked files, once written there ("" before) */
    json_t *requested;      /* normalised names asked for, when the install is pinned */
    uint64_t deadline_ms;   /* both runs within packages.max_install_seconds */
};

static void install_free(void *data)
{
    struct install *in = data;
    json_decref(in->requested);
    free(in);
}

/* The pinned requirements go with the install that read them (or never ran). */
static void remove_pins(struct sandbox *sb, struct install *in)
{
    if (in->pins_path[0])
        remove_report(sb, in->pins_path);
    in->pins_path[0] = '\0';
}

/* The call's answer, its history record and its count; takes installed, reason and output
 * (pip_output). */
static void install_finish(struct exec *e, bool success, json_t *installed, char *reason,
                           json_t *output, bool oom)
{
    struct sandbox *sb = e->sb;
    struct sandbox_service *svc = sb->svc;
    const struct exec_outcome *o = &e->outcome;
    double duration_ms = exec_duration_ms(e);
    char labels[48];
    snprintf(labels, sizeof(labels), "outcome=\"%s\"",
             success        ? "ok"
             : o->timed_out ? "timeout"
                            : "error");
    metrics_counter_add("mcp_package_installs_total", "install_packages calls, by outcome", labels,
                        1);
    if (svc->history) {
        struct history_record rec = {
            .timestamp_ms = e->started_wall_ms ? e->started_wall_ms : (int64_t)wall_ms(),
            .language = "pip",
            .success = success,
            .duration_ms = (int64_t)duration_ms,
            .code = e->code,
            .stdout_text = json_string_value(output),
            .error = reason,
        };
        sandbox_history_add(sb, &rec);
    }

    if (e->call) {
        char *names = packages_summary(installed);
        char *text = success
                         ? xasprintf("Installed into sandbox %s: %s. They import right away "
                                     "in run_code (no restart needed).",
                                     sb->id, *names ? names : "nothing new")
                         : xasprintf("%s\n\npip's output:\n%s", reason, json_string_value(output));
        json_t *sc = json_pack("{s:s, s:b, s:O, s:O, s:o, s:s?, s:f, s:b, s:b}", "sandbox_id",
                               sb->id, "success", success, "installed", installed, "packages",
                               sb->packages, "output", output, "error", reason, "duration_ms",
                               duration_ms, "timed_out", o->timed_out, "oom_killed", oom);
        output = NULL;
        mcp_call_finish(e->call,
                        json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text",
                                  text, "structuredContent", sc, "isError", !success));
        free(text);
        free(names);
    }
    json_decref(output);
    json_decref(installed);
    free(reason);
}

static void on_install_done(struct exec *e)
{
    struct sandbox *sb = e->sb;
    struct sandbox_service *svc = sb->svc;
    const struct exec_outcome *o = &e->outcome;
    struct install *in = e->done_data;
    char *all = NULL;
    size_t all_len = 0;
    json_t *output = pip_output(e, &all, &all_len);
    const char *path = report_path(e->argv);
    bool success = pip_succeeded(o);
    int exit_code = (int)json_integer_value(json_object_get(o->frame, "exit_code"));
    remove_pins(sb, in);

    uint64_t peak = 0;
    bool oom = sb->jail && jail_read_memory_peak(sb->jail, &peak) == 0 &&
               sandbox_oom_since_last_look(sb, o->driver_died, peak);
    char *reason = NULL;
    json_t *installed;
    if (success) {
        installed = read_report(sb, path);
        /* Every pin is "requested" to pip; the dry run knew which the caller asked for. */
        if (in->requested)
            packages_mark_requested(installed, in->requested);
        packages_merge(sb->packages, installed);
        struct sbx_err err = {0};
        if (svc->history && history_set_packages(svc->history, sb->id, sb->packages, &err) < 0)
            log_emit(LOG_LVL_WARNING, "history write failed", "error", err.msg, NULL);
        /* The running interpreter sees the new packages without a restart. (A sandbox that
         * broke or closed while the install's files were saved has none to tell.) */
        if (!sb->closing && sb->state != SBX_BROKEN)
            sandbox_send(sb, json_pack("{s:s, s:I}", "op", "refresh_imports", "id",
                                       (json_int_t)++sb->next_seq));
    } else {
        installed = json_array();
        remove_report(sb, path);
        if (o->timed_out)
            reason = xasprintf("the install timed out after %u s (packages.max_install_seconds) "
                               "and was stopped; nothing was installed",
                               svc->cfg->max_install_seconds);
        else if (!o->frame)
            reason = xstrdup(o->reason[0] ? o->reason
                                          : "pip did not finish: the sandbox's interpreter "
                                            "was restarted");
        else {
            char *why = packages_failure_reason(all, all_len);
            char held[160] = "";
            /* Without a cgroup the limit is an address-space rlimit: no kill, a MemoryError. */
            bool memory_error = !oom && memmem(all, all_len, "\nMemoryError", 12);
            if (oom || memory_error) {
                sandbox_memory_in_files(sb, held, sizeof(held));
                reason = xasprintf(
                    "pip %s: the sandbox's memory limit is %llu MiB%s (a larger "
                    "profile has more). pip's exit code %d: %s",
                    oom ? "was killed by the OOM killer" : "ran out of memory (MemoryError)",
                    (unsigned long long)(sb->profile->memory_bytes >> 20), held, exit_code, why);
            } else {
                /* Wheels only: a project that publishes only a source release has "no
                 * versions" to pip, which does not say why. */
                bool none = svc->cfg->only_binary && strstr(why, "(from versions: none)");
                /* pip's words for it speak of a requirements file the caller never wrote. */
                bool swapped = in->requested && strstr(why, "DO NOT MATCH THE HASHES");
                reason = xasprintf(
                    "pip failed (exit code %d): %s%s", exit_code, why,
                    none      ? "\n(packages.only_binary is on, so only wheels are installed: a "
                                "project with only a source release, or none for this Python, has no "
                                "version pip may use)"
                    : swapped ? "\n(the package index now serves a different file than the one "
                                "that was resolved and checked against packages.allowed moments "
                                "before; the install is held to the checked files, so nothing "
                                "was installed. Try again to check what the index serves now)"
                              : "");
            }
            free(why);
        }
        /* pip never shows a proxy's refusal: "no matching distribution" may be the byte
         * budget, or a host off the list. Said when the proxy refused anything meanwhile. */
        struct egress_stats st;
        if (sb->proxy && (egress_proxy_stats(sb->proxy, &st), st.denied > in->denied_before)) {
            char *with = xasprintf("%s. Meanwhile the sandbox's egress proxy refused %llu "
                                   "request(s), the last with: %s",
                                   reason, (unsigned long long)(st.denied - in->denied_before),
                                   egress_proxy_last_refusal(sb->proxy));
            free(reason);
            reason = with;
        }
    }
    free(all);
    install_free(in);
    install_finish(e, success, installed, reason, output, oom);
}

/* The projects of a dry run (names) that packages.allowed does not list, comma-separated (""
 * for none). A name too long to be a project's is not on the list. */
static char *not_allowed(const struct sbx_config *cfg, const json_t *names)
{
    char *list = xstrdup("");
    size_t i;
    json_t *p;
    json_array_foreach(names, i, p)
    {
        const char *name = json_string_value(p);
        char norm[REQUIREMENT_NAME_MAX + 1];
        requirement_normalize(name, norm, sizeof(norm));
        if (strlen(name) <= REQUIREMENT_NAME_MAX &&
            requirement_allowed(&cfg->allowed_packages, norm))
            continue;
        char *longer = xasprintf("%s%s%s", list, *list ? ", " : "", name);
        free(list);
        list = longer;
    }
    return list;
}

/* The check ends the call: nothing was installed, for reason (taken). */
static void install_refused(struct exec *e, struct install *in, char *reason)
{
    install_free(in);
    char *all = NULL;
    size_t all_len = 0;
    json_t *output = pip_output(e, &all, &all_len);
    free(all);
    install_finish(e, false, json_array(), reason, output, false);
}

/* What the dry run would install (its report's text) is on packages.allowed: *pins, the
 * requirements that hold the install to it (packages_report_pins), or -1 with the reason
 * (malloc'd) in *why. */
static int check_report(const struct sbx_config *cfg, const char *text, size_t len, char **pins,
                        size_t *count, json_t **requested, char **why)
{
    struct sbx_err err = {0};
    json_t *would = NULL;
    /* Fails closed: a report that cannot be read whole names projects nobody checked. */
    if (packages_report_projects(text, len, &would, &err) < 0) {
        *why = unchecked_reason(err.msg);
        return -1;
    }
    char *refused = not_allowed(cfg, would);
    json_decref(would);
    if (*refused) {
        *why = xasprintf("this install would also bring in %s, not on this server's list of "
                         "installable packages (packages.allowed); nothing was installed",
                         refused);
        free(refused);
        return -1;
    }
    free(refused);
    if (packages_report_pins(text, len, pins, count, requested, &err) < 0) {
        *why = xasprintf("what this install would bring in was checked against "
                         "packages.allowed, but the install cannot be held to it (%s); nothing "
                         "was installed",
                         err.msg);
        return -1;
    }
    return 0;
}

/* The dry run has resolved: the install runs if every project is allowed, of exactly the files
 * the dry run chose. */
static void on_check_done(struct exec *e)
{
    struct sandbox *sb = e->sb;
    const struct sbx_config *cfg = sb->svc->cfg;
    struct install *in = e->done_data;
    const struct exec_outcome *o = &e->outcome;
    if (!pip_succeeded(o)) {
        on_install_done(e); /* pip could not resolve: said as an install's failure */
        return;
    }
    /* Resolved, but the sandbox closes, broke or is being reset meanwhile: no install. */
    if (e->sandbox_ending || sb->closing || sb->state == SBX_BROKEN) {
        remove_report(sb, report_path(e->argv));
        install_refused(e, in,
                        xasprintf("the install did not run: sandbox %s %s; nothing was installed",
                                  sb->id,
                                  sb->closing ? "was closed" : "was reset or broke meanwhile"));
        return;
    }
    if (!e->call) { /* cancelled: nothing was installed, nothing more runs */
        remove_report(sb, report_path(e->argv));
        install_free(in);
        return;
    }
    struct sbx_err err = {0};
    size_t len = 0, count = 0;
    char *text = report_text(sb, report_path(e->argv), &len, &err);
    char *pins = NULL, *why = NULL;
    if (!text)
        why = unchecked_reason(err.msg);
    else
        check_report(cfg, text, len, &pins, &count, &in->requested, &why);
    free(text);
    if (why) {
        sandbox_count_rejection("packages.allowed");
        install_refused(e, in, why);
        return;
    }
    /* pip --target resolves as if nothing were installed, so an empty report is a forged or
     * odd one: nothing to install, and nothing installed. */
    if (count == 0) {
        free(pins);
        install_free(in);
        char *all = NULL;
        size_t all_len = 0;
        json_t *output = pip_output(e, &all, &all_len);
        free(all);
        install_finish(e, true, json_array(), NULL, output, false);
        return;
    }
    /* In /tmp, as the report is: sandbox code could rewrite it, as it could run pip itself
     * (packages.allowed governs the tool, not code the sandbox runs). */
    snprintf(in->pins_path, sizeof(in->pins_path), "/tmp/.mcp-pip-pins-%016llx.txt",
             (unsigned long long)unguessable_u64());
    int rc = sandbox_write_file(sb, in->pins_path, pins, strlen(pins), &err);
    free(pins);
    if (rc < 0) {
        in->pins_path[0] = '\0';
        install_refused(e, in,
                        xasprintf("the checked packages could not be written into the sandbox "
                                  "for the install (%s); nothing was installed",
                                  err.msg));
        return;
    }
    uint64_t now = now_ms();
    uint32_t left = in->deadline_ms > now + 1000 ? (uint32_t)(in->deadline_ms - now) : 1000;
    json_t *argv = packages_pip_pinned_argv(cfg, in->pins_path, in->report_path);
    if (sandbox_exec_argv(sb, e->call, "pip", e->code, argv, packages_pip_env(EGRESS_PROXY_PORT),
                          "/", left, on_install_done, in, install_free, &err) < 0) {
        remove_pins(sb, in);
        install_free(in);
        mcp_call_fail(e->call, "%s", err.msg);
    }
}

static void t_install_packages(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox_service *svc = data;
    const struct sbx_config *cfg = svc->cfg;
    const json_t *list = json_object_get(args, "packages");
    size_t n = json_array_size(list);
    if (n == 0 || n > MAX_REQUIREMENTS) {
        mcp_call_fail(call, "packages: give 1 to %d requirement strings", MAX_REQUIREMENTS);
        return;
    }
    /* Every string is checked before a sandbox is touched or pip runs. */
    const char *reqs[MAX_REQUIREMENTS];
    char summary[MAX_REQUIREMENTS * (REQUIREMENT_MAX + 1) + 16] = "pip install";
    for (size_t i = 0; i < n; i++) {
        struct requirement r;
        struct sbx_err err = {0};
        reqs[i] = json_string_value(json_array_get(list, i));
        if (!reqs[i] || requirement_parse(reqs[i], &r, &err) < 0) {
            sandbox_count_rejection("packages.invalid");
            mcp_call_fail(call, "packages[%zu]: %s", i,
                          reqs[i] ? err.msg : "a requirement is a string");
            return;
        }
        if (!requirement_allowed(&cfg->allowed_packages, r.normalized)) {
            sandbox_count_rejection("packages.allowed");
            mcp_call_fail(call,
                          "packages[%zu]: '%s' is not on this server's list of installable "
                          "packages (packages.allowed); nothing was installed",
                          i, r.name);
            return;
        }
        size_t off = strlen(summary);
        snprintf(summary + off, sizeof(summary) - off, " %s", reqs[i]);
    }
    struct sandbox *sb = tool_sandbox_to_work(svc, call, args);
    if (!sb)
        return;
    if (strcmp(sb->network, "packages") != 0) {
        mcp_call_fail(call,
                      "sandbox %s has no network (network: %s), so pip cannot reach a package "
                      "index; create a sandbox with create_sandbox {\"network\": \"packages\"} "
                      "and install into that one (an operator can also set network = "
                      "\"packages\" in [profiles.%s] to give every sandbox of that profile "
                      "package access)",
                      sb->id, sb->network, sb->profile->name);
        return;
    }
    /* Names sandbox code cannot know beforehand, so it cannot lay a report there first. */
    char path[64], check_path[64];
    snprintf(path, sizeof(path), "/tmp/.mcp-pip-report-%016llx.json",
             (unsigned long long)unguessable_u64());
    snprintf(check_path, sizeof(check_path), "/tmp/.mcp-pip-check-%016llx.json",
             (unsigned long long)unguessable_u64());
    struct install *in = xcalloc(1, sizeof(*in));
    /* The proxy's refusals so far: those after are this install's (on_install_done). */
    struct egress_stats st = {0};
    if (sb->proxy)
        egress_proxy_stats(sb->proxy, &st);
    in->denied_before = st.denied;
    in->deadline_ms = now_ms() + (uint64_t)cfg->max_install_seconds * 1000;
    memcpy(in->report_path, path, sizeof(path));
    /* Without packages.allowed nothing is checked, so one resolution that installs is enough. */
    bool check = cfg->allowed_packages.len > 0;
    struct sbx_err err = {0};
    /* cwd /: read-only, so nothing there can pass for a local archive or project. */
    if (sandbox_exec_argv(sb, call, "pip", summary,
                          packages_pip_argv(cfg, reqs, n, check ? check_path : path, check),
                          packages_pip_env(EGRESS_PROXY_PORT), "/", cfg->max_install_seconds * 1000,
                          check ? on_check_done : on_install_done, in, install_free, &err) < 0) {
        install_free(in);
        mcp_call_fail(call, "%s", err.msg);
    }
}

static const struct mcp_tool_def tool_defs[] = {
    {"install_packages", "Install Python packages into a sandbox",
     "Install Python packages from the server's package index into one sandbox, with pip. The "
     "sandbox must have been created with create_sandbox {\"network\": \"packages\"}: its code "
     "then reaches the package index (and nothing else) through the server's proxy. Packages "
     "import right away in run_code, without a restart, and stay for the sandbox's life; other "
     "sandboxes and the server are not changed. Give requirement strings such as numpy or "
     "requests==2.31.0 (no pip options, paths or URLs). Only prebuilt wheels are installed "
     "unless the server allows source builds.",
     "{\"type\":\"object\",\"properties\":{\"packages\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"string\",\"minLength\":1,\"maxLength\":200},\"minItems\":1,\"maxItems\":32,"
     "\"description\":\"Requirement strings, e.g. [\\\"numpy\\\", \\\"requests==2.31.0\\\"]\"},"
     "\"sandbox_id\":{\"type\":\"string\",\"maxLength\":64,\"description\":\"A sandbox created "
     "with network: packages; omit it to use your default sandbox\"}},\"required\":["
     "\"packages\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"success\":{"
     "\"type\":\"boolean\"},\"installed\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
     "\"properties\":{\"name\":{\"type\":\"string\"},\"version\":{\"type\":\"string\"},"
     "\"requested\":{\"type\":\"boolean\"}}}},\"packages\":{\"type\":\"array\",\"items\":{"
     "\"type\":\"object\"}},\"output\":{\"type\":\"string\"},\"error\":{\"type\":[\"string\","
     "\"null\"]},\"duration_ms\":{\"type\":\"number\"},\"timed_out\":{\"type\":\"boolean\"},"
     "\"oom_killed\":{\"type\":\"boolean\"}},\"required\":[\"sandbox_id\",\"success\","
     "\"installed\",\"packages\",\"output\",\"duration_ms\",\"timed_out\",\"oom_killed\"]}",
     false, false, true, true, t_install_packages},
};

int tools_packages_register(struct sandbox_service *svc, struct sbx_err *err)
{
    return tool_register(svc, tool_defs, ARRAY_SIZE(tool_defs), err);
}
