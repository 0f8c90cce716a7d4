/* `mcp-sandbox config --print`: the effective configuration, as TOML that parses back, with
 * where each value came from. */
#include "cli.h"

#include <getopt.h>

int cmd_config(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"print", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool print = false;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'p')
            print = true;
        else if (c == 'h') {
            puts("usage: mcp-sandbox [--config FILE] config --print");
            return 0;
        } else
            return cli_usage_error("config: unknown option");
    }
    if (optind < argc)
        return cli_usage_error("config: unexpected argument '%s'", argv[optind]);
    if (!print)
        return cli_usage_error("config: say --print");
    config_print(&ctx->cfg, stdout);
    return 0;
}
