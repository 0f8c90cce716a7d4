/* Placeholder: replaced by the work that owns this subcommand. */
#include "cli.h"

int cmd_config(int argc, char **argv, struct cli_ctx *ctx)
{
    (void)argc;
    (void)argv;
    (void)ctx;
    return cli_usage_error("'config' is not built yet");
}
