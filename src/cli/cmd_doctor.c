/* `mcp-sandbox doctor`: what this machine offers, layer by layer, with a hint for each gap.
 * Exits non-zero when the default profile cannot run. */
#include "cli.h"

#include "jail/features.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/util.h"

extern char **environ;

/* What the sandboxes' interpreter can do, as run_code's driver sees it (-I -S, Debian's
 * dist-packages put back): its version, and whether pip (install_packages) and matplotlib
 * (plots) import. One line each; nothing printed when the interpreter cannot run. */
#define PYTHON "/usr/bin/python3"
static const char python_probe[] =
    "import sys, importlib.util as u\n"
    "v = sys.version_info\n"
    "sys.path += ['/usr/local/lib/python3.%d/dist-packages' % v[1], "
    "'/usr/lib/python3/dist-packages']\n"
    "print('%d.%d.%d' % v[:3])\n"
    "for m in ('pip', 'matplotlib'): print(1 if u.find_spec(m) else 0)\n";

struct runtime_row {
    const char *name;
    bool available, required;
    char detail[96];
    const char *hint;
};

static void probe_runtime(struct runtime_row rows[3])
{
    rows[0] = (struct runtime_row){.name = "python3",
                                   .required = true,
                                   .hint = "apt-get install python3: run_code needs " PYTHON};
    rows[1] = (struct runtime_row){
        .name = "pip", .hint = "apt-get install python3-pip: install_packages needs it"};
    rows[2] = (struct runtime_row){
        .name = "matplotlib", .hint = "apt-get install python3-matplotlib: for plots as images"};
    snprintf(rows[0].detail, sizeof(rows[0].detail), "%s cannot run", PYTHON);
    snprintf(rows[1].detail, sizeof(rows[1].detail), "not importable");
    snprintf(rows[2].detail, sizeof(rows[2].detail), "not importable");
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return;
    char *const argv[] = {PYTHON, "-I", "-S", "-c", (char *)python_probe, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int r = posix_spawn(&pid, PYTHON, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    char buf[256] = "";
    size_t len = 0;
    ssize_t n;
    while (r == 0 && len < sizeof(buf) - 1 &&
           (n = read(out[0], buf + len, sizeof(buf) - 1 - len)) != 0) {
        if (n < 0 && errno != EINTR)
            break;
        len += n > 0 ? (size_t)n : 0;
    }
    close(out[0]);
    buf[len] = '\0';
    int status = 0;
    if (r != 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        return;
    char version[32];
    int pip = 0, plots = 0;
    if (sscanf(buf, "%31s %d %d", version, &pip, &plots) != 3)
        return;
    rows[0].available = true;
    snprintf(rows[0].detail, sizeof(rows[0].detail), "%s (%s), run_code's interpreter", version,
             PYTHON);
    if ((rows[1].available = pip == 1))
        snprintf(rows[1].detail, sizeof(rows[1].detail), "install_packages can install");
    if ((rows[2].available = plots == 1))
        snprintf(rows[2].detail, sizeof(rows[2].detail), "plots come back as images");
}

int cmd_doctor(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    int c;
    while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
        if (c == 'j')
            json = true;
        else if (c == 'h') {
            puts("usage: mcp-sandbox doctor [--json]");
            return 0;
        } else
            return cli_usage_error("doctor: unknown option");
    }
    if (optind < argc)
        return cli_usage_error("doctor: unexpected argument '%s'", argv[optind]);

    const struct feature_status *f = features_probe(ctx->cfg.host_uid, ctx->cfg.host_uid_count);
    bool ok = true;
    char degraded[128] = "";
    json_t *rows = json_array();
    json_t *deg = json_array();
    if (!json)
        printf("%-20s %-9s %s\n", "layer", "verdict", "detail / hint");
    for (int i = 0; i < FEAT__COUNT; i++) {
        const char *verdict = f[i].available ? "ok" : f[i].required ? "missing" : "fallback";
        /* A missing required layer stops the default profile, unless it is one the jail may
         * leave out and the configuration allows that: then sandboxes run, reported degraded. */
        if (!f[i].available && f[i].required) {
            if (f[i].degradable && ctx->cfg.allow_degraded) {
                size_t len = strlen(degraded);
                snprintf(degraded + len, sizeof(degraded) - len, "%s%s", len ? ", " : "",
                         f[i].name);
                json_array_append_new(deg, json_string(f[i].name));
            } else {
                ok = false;
            }
        }
        if (json) {
            json_array_append_new(rows, json_pack("{s:s, s:s, s:b, s:s, s:s}", "layer", f[i].name,
                                                  "verdict", verdict, "required", f[i].required,
                                                  "detail", f[i].detail, "hint", f[i].hint));
        } else {
            printf("%-20s %-9s %s%s%s\n", f[i].name, verdict, f[i].detail,
                   f[i].hint[0] ? " -- " : "", f[i].hint);
        }
    }
    struct runtime_row rt[3];
    probe_runtime(rt);
    json_t *rt_rows = json_array();
    if (!json)
        printf("\n%-20s %-9s %s\n", "runtime", "verdict", "detail / hint");
    for (size_t i = 0; i < ARRAY_SIZE(rt); i++) {
        ok = ok && (rt[i].available || !rt[i].required);
        const char *verdict = rt[i].available ? "ok" : "missing";
        const char *hint = rt[i].available ? "" : rt[i].hint;
        if (json)
            json_array_append_new(rt_rows,
                                  json_pack("{s:s, s:s, s:b, s:s, s:s}", "name", rt[i].name,
                                            "verdict", verdict, "required", rt[i].required,
                                            "detail", rt[i].detail, "hint", hint));
        else
            printf("%-20s %-9s %s%s%s\n", rt[i].name, verdict, rt[i].detail, hint[0] ? " -- " : "",
                   hint);
    }
    const char *mode = geteuid() == 0 ? "root" : "rootless";
    if (json) {
        json_t *o = json_pack("{s:o, s:o, s:s, s:b, s:o, s:b}", "layers", rows, "runtime", rt_rows,
                              "mode", mode, "default_profile_runs", ok, "degraded", deg,
                              "allow_degraded", ctx->cfg.allow_degraded);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        json_decref(rows);
        json_decref(rt_rows);
        json_decref(deg);
        printf("\nmode: %s; default profile '%s': %s%s%s\n", mode, ctx->cfg.default_profile,
               !ok           ? "CANNOT run (see the hints above)"
               : degraded[0] ? "can run DEGRADED, without "
                             : "can run",
               ok ? degraded : "", ok && degraded[0] ? " (isolation.allow_degraded)" : "");
    }
    return ok ? 0 : 1;
}
