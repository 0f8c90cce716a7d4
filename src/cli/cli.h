/* The subcommands behind the thin main.c. Each parses its own flags (any order) and
 * returns the process exit code; usage errors return 2 after a short message on stderr. */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include "config.h"

#define EXIT_USAGE 2

struct cli_ctx {
    struct sbx_config cfg; /* defaults + file + env + global flags already applied */
    const char *config_path;
    char **argv; /* main's argv, untouched (global flags included) */
};

/* Print "mcp-sandbox: MSG" and a hint to stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int cmd_serve(int argc, char **argv, struct cli_ctx *ctx);
int cmd_run(int argc, char **argv, struct cli_ctx *ctx);
int cmd_doctor(int argc, char **argv, struct cli_ctx *ctx);
int cmd_config(int argc, char **argv, struct cli_ctx *ctx);

#endif
