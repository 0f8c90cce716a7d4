/* mcp-sandbox: parse global flags, load configuration, dispatch to a subcommand. */
#include "cli/cli.h"
#include "lib/log.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>

static const char usage_text[] =
    "usage: mcp-sandbox [--config FILE] [--log-level LEVEL] [--log-file FILE]\n"
    "                   [--state-dir DIR] COMMAND [ARGS...]\n"
    "\n"
    "commands:\n"
    "  serve --stdio              serve MCP over stdin/stdout (for Claude Desktop, Cursor, ...)\n"
    "  serve --http [ADDR:PORT]   serve MCP over Streamable HTTP at /mcp (default: http.listen)\n"
    "  run [OPTIONS] -- CMD...    run CMD in a fresh sandbox (see `run --help`)\n"
    "  pool [--size N]            keep sandboxes ready for run (see `pool --help`)\n"
    "  doctor                     check the isolation layers and the Python this machine has\n"
    "  config --print             show the effective configuration and where each value came from\n"
    "\n"
    "  --version                  print the version\n"
    "  --help                     print this help\n";

struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv, struct cli_ctx *ctx);
};

static const struct subcommand subcommands[] = {
    {"serve", cmd_serve},   {"run", cmd_run},       {"pool", cmd_pool},
    {"doctor", cmd_doctor}, {"config", cmd_config},
};

/* Global flags that take a value, mapped to the config key they set. */
static const struct {
    const char *flag;
    const char *key;
} global_flags[] = {
    {"--log-level", "log.level"},
    {"--log-file", "log.file"},
    {"--state-dir", "server.state_dir"},
};

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("mcp-sandbox: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'mcp-sandbox --help'.\n", stderr);
    return EXIT_USAGE;
}

/* "--flag=value" or "--flag value"; returns the value and advances *i, or NULL. */
static const char *flag_value(const char *flag, int argc, char **argv, int *i, bool *bad)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *bad = true;
        return NULL;
    }
    return argv[++*i];
}

int main(int argc, char **argv)
{
    /* Started with 0, 1 or 2 closed, the first pipe we make would take its place (and `run`
     * would read its own output as its stdin): /dev/null holds each closed one. */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) != fd)
            return 125;
    cli_scope_copy_started();
    static struct cli_ctx ctx;
    ctx.argv = argv;
    const struct subcommand *cmd = NULL;
    char **rest = xcalloc((size_t)argc + 1, sizeof(char *));
    int nrest = 0;
    const char *flag_vals[ARRAY_SIZE(global_flags)] = {0};
    bool after_dashdash = false;
    int unknown_flag = -1; /* where a flag no global one matched stood, before the command */

    bool has_dashdash = false;
    for (int i = 1; i < argc && !has_dashdash; i++)
        has_dashdash = strcmp(argv[i], "--") == 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        /* After "--", and after `run` when no "--" follows (it refuses that), the words are
         * the command's: none of them is taken for a global flag. */
        if (after_dashdash || (cmd && strcmp(cmd->name, "run") == 0 && !has_dashdash)) {
            rest[nrest++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            after_dashdash = true;
            rest[nrest++] = argv[i];
            continue;
        }
        if (strcmp(a, "--version") == 0 && !cmd) {
            printf("mcp-sandbox %s\n", SBX_VERSION);
            free(rest);
            return 0;
        }
        if ((strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) && !cmd) {
            fputs(usage_text, stdout);
            free(rest);
            return 0;
        }
        bool bad = false, matched = false;
        const char *v = flag_value("--config", argc, argv, &i, &bad);
        if (v) {
            ctx.config_path = v;
            continue;
        }
        for (size_t f = 0; f < ARRAY_SIZE(global_flags) && !bad; f++) {
            v = flag_value(global_flags[f].flag, argc, argv, &i, &bad);
            if (v) {
                flag_vals[f] = v;
                matched = true;
                break;
            }
        }
        if (bad) {
            free(rest);
            return cli_usage_error("option '%s' needs a value", a);
        }
        if (matched)
            continue;
        if (!cmd && a[0] != '-') {
            for (size_t c = 0; c < ARRAY_SIZE(subcommands); c++)
                if (strcmp(a, subcommands[c].name) == 0)
                    cmd = &subcommands[c];
            if (!cmd) {
                free(rest);
                /* "--log-levelx debug run": the word is a misspelt flag's value. */
                if (unknown_flag == i - 1)
                    return cli_usage_error("unknown command '%s' (after '%s', which is not a "
                                           "flag mcp-sandbox takes before a command)",
                                           a, argv[i - 1]);
                return cli_usage_error("unknown command '%s'", a);
            }
            continue;
        }
        if (!cmd)
            unknown_flag = i; /* the subcommand's, or a misspelling */
        rest[nrest++] = argv[i];
    }
    if (!cmd) {
        int rc = nrest > 1 ? cli_usage_error("unknown option '%s'", rest[1])
                           : cli_usage_error("no command given");
        free(rest);
        return rc;
    }

    struct sbx_err err = {0};
    config_init_defaults(&ctx.cfg);
    if (config_load_all(&ctx.cfg, ctx.config_path, &err) < 0) {
        fprintf(stderr, "mcp-sandbox: %s\n", err.msg);
        free(rest);
        config_free(&ctx.cfg);
        return 1;
    }
    for (size_t f = 0; f < ARRAY_SIZE(global_flags); f++) {
        if (flag_vals[f] &&
            config_set(&ctx.cfg, global_flags[f].key, flag_vals[f], CONFIG_SRC_FLAG, &err) < 0) {
            free(rest);
            config_free(&ctx.cfg);
            return cli_usage_error("%s", err.msg);
        }
    }
    if (config_check(&ctx.cfg, &err) < 0) {
        fprintf(stderr, "mcp-sandbox: %s\n", err.msg);
        free(rest);
        config_free(&ctx.cfg);
        return 1;
    }
    int lvl = log_level_from_name(ctx.cfg.log_level);
    int opened = log_open(ctx.cfg.log_file, lvl < 0 ? LOG_LVL_INFO : (enum log_level)lvl);
    if (opened < 0) {
        fprintf(stderr, "mcp-sandbox: cannot open log file %s: %s\n", ctx.cfg.log_file,
                strerror(-opened));
        free(rest);
        config_free(&ctx.cfg);
        return 1;
    }

    optind = 1;
    int rc = cmd->fn(nrest, rest, &ctx);
    log_close();
    config_free(&ctx.cfg);
    free(rest);
    return rc;
}
