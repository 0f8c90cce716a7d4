/* Placeholder: replaced by the work that owns this subcommand. */
#include "cli.h"

int cmd_run(int argc, char **argv, struct cli_ctx *ctx)
{
    (void)argc;
    (void)argv;
    (void)ctx;
    return cli_usage_error("'run' is not built yet");
}
