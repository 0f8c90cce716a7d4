/* run's side of the run pool (src/service/run_pool.h): find it, hand it a command with the
 * command's stdio, pass signals on, and take its report. */
#ifndef SBX_CLI_RUN_POOL_CLIENT_H
#define SBX_CLI_RUN_POOL_CLIENT_H

#include "config.h"
#include "err.h"
#include "run_pool_wire.h"

#include <stddef.h>

/* run.pool_socket, or run-pool.sock in the state directory. */
int run_pool_socket_path(const struct sbx_config *cfg, char **out, struct sbx_err *err);

enum run_pool_answer {
    RUN_POOL_SERVED, /* the command runs in a sandbox of the pool: *fd is the connection */
    RUN_POOL_MISSED, /* no sandbox of the pool took it (why says so): build one here */
    RUN_POOL_FAILED, /* the command could not start there (why: its errno and message) */
};

/* Connects to the pool at path, sends the command with stdio, and waits at most wait_ms for the
 * answer. A pool that is not there, not ours, or slow is a miss. On SERVED, started has the
 * sandbox's setup and handover times. */
enum run_pool_answer run_pool_offer(const char *path, const void *key, size_t key_len,
                                    char *const *argv, const int stdio[3], int wait_ms, int *fd,
                                    struct run_pool_report *started, struct sbx_err *why);
/* Passes a signal on to the command (SIGKILL: kill everything in the sandbox). */
int run_pool_signal(int fd, int sig);
/* What the pool sent since: 1 with the report once the command has ended, 0 for nothing yet,
 * -1 when the pool went away without one. */
int run_pool_take_end(int fd, struct run_pool_report *ended);
/* The pool's answer to a query (a line per profile), for `pool --status`. */
int run_pool_query(const char *path, char *text, size_t size, struct sbx_err *err);

#endif
