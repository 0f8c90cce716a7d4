/* `mcp-sandbox doctor`: what this machine offers, layer by layer, with a hint for each gap.
 * Exits non-zero when the default profile cannot run. */
#include "cli.h"

#include "jail/features.h"

#include <getopt.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

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
    const char *mode = geteuid() == 0 ? "root" : "rootless";
    if (json) {
        json_t *o = json_pack("{s:o, s:s, s:b, s:o, s:b}", "layers", rows, "mode", mode,
                              "default_profile_runs", ok, "degraded", deg, "allow_degraded",
                              ctx->cfg.allow_degraded);
        char *s = json_dumps(o, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(o);
    } else {
        json_decref(rows);
        json_decref(deg);
        printf("\nmode: %s; default profile '%s': %s%s%s\n", mode, ctx->cfg.default_profile,
               !ok           ? "CANNOT run (see the hints above)"
               : degraded[0] ? "can run DEGRADED, without "
                             : "can run",
               ok ? degraded : "", ok && degraded[0] ? " (isolation.allow_degraded)" : "");
    }
    return ok ? 0 : 1;
}
