/* The subcommands behind the thin main.c. Each parses its own flags (any order) and
 * returns the process exit code; usage errors return 2 after a short message on stderr. */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include "config.h"

#include <signal.h>

#define EXIT_USAGE 2

struct cli_ctx {
    struct sbx_config cfg; /* defaults + file + env + global flags already applied */
    const char *config_path;
    char **argv; /* main's argv, untouched (global flags included) */
};

/* Print "mcp-sandbox: MSG" and a hint to stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* cgroup v2 only, in a cgroup that gives no limits (shared, not delegated), under systemd: run
 * this command again in a delegated scope of its own (own_scope.c) and return its exit status;
 * -1 when that does not apply or systemd cannot, and the caller carries on. */
int cli_rerun_in_own_scope(struct cli_ctx *ctx);
/* First thing in main: a copy started by cli_rerun_in_own_scope tells the original. */
void cli_scope_copy_started(void);
/* Whether this process is such a copy. */
bool cli_is_scope_copy(void);
/* The signals run passes on to the command, and the original to its copy: SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT, and every other that another process sends to end one by default (SIGUSR1,
 * SIGUSR2, SIGALRM, SIGIO, SIGVTALRM, SIGPROF, SIGPWR, SIGSTKFLT, SIGXCPU, SIGXFSZ and the
 * real-time ones), which would end us with the sandbox's cgroups behind; each only if it was
 * not ignored when we started (nohup, a script's background job): that one stays ignored.
 * Not the faults (SIGSEGV and the like, SIGABRT, SIGSYS, SIGTRAP): they are ours. */
void cli_passed_signals(sigset_t *set);
/* Adds sig to set unless its disposition is SIG_IGN. */
void cli_add_unless_ignored(sigset_t *set, int sig);
/* Whether sig is one a user sends to stop a command (the second of them kills outright). */
bool cli_is_stop_signal(int sig);

/* The long-running commands (serve, pool): the fd limit raised to the hard one, SIGPIPE
 * ignored; and SIGTERM, SIGINT and SIGHUP (those not ignored at start) blocked and taken from a
 * signalfd on loop, where each stops it. Call before any thread starts. */
struct ev_loop;
struct ev_watch;
struct cli_stop {
    int fd;
    struct ev_watch *w;
};
void cli_long_running_limits(void);
int cli_stop_on_signals(struct ev_loop *loop, struct cli_stop *stop, struct sbx_err *err);
void cli_stop_free(struct cli_stop *stop);

int cmd_serve(int argc, char **argv, struct cli_ctx *ctx);
int cmd_run(int argc, char **argv, struct cli_ctx *ctx);
int cmd_pool(int argc, char **argv, struct cli_ctx *ctx);
int cmd_doctor(int argc, char **argv, struct cli_ctx *ctx);
int cmd_config(int argc, char **argv, struct cli_ctx *ctx);

#endif
