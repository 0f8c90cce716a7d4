/* The run pool (`mcp-sandbox pool`): sandboxes built ahead, every layer on, armed and waiting
 * for a command, so that `mcp-sandbox run` pays for none of the namespaces, mounts, cgroup or
 * filters when it runs one. A sandbox serves one command and is torn down; another is built in
 * its place. run finds the pool at a unix socket, sends the key of the sandbox it would build
 * (jail_build_key), its command and its stdio; a sandbox with that key takes them. Anything
 * the pool cannot serve (another key, none ready, another uid) is a miss, and run builds its
 * own sandbox as it always has.
 *
 * On the event loop: the spawner builds, the loop hands out, watches and reports. */
#ifndef SBX_RUN_POOL_H
#define SBX_RUN_POOL_H

#include "config.h"
#include "err.h"

#include <stddef.h>
#include <stdint.h>

struct ev_loop;
struct run_pool;

struct run_pool_options {
    const struct sbx_config *cfg;
    const char *socket_path;
    const struct sbx_profile *profiles; /* the kinds kept ready, one per profile */
    size_t n_profiles;
    uint32_t size;             /* ready sandboxes kept per profile */
    uint32_t max_clients;      /* connections served at once; more get a miss */
    uint32_t wait_ms;          /* how long a request may wait for a sandbox in its setup */
    void (*ready)(void *data); /* once, when every kind first has size sandboxes ready */
    void *ready_data;
};

/* Binds the socket (0600, in a directory made 0700 if it is new; taking over the path from a
 * pool that died, never from one that answers) and starts building. A kind whose first sandbox
 * cannot be built stops the loop: run_pool_failure then says why. */
int run_pool_new(struct ev_loop *loop, const struct run_pool_options *o, struct run_pool **out,
                 struct sbx_err *err);
/* Why the pool stopped the loop, or NULL. */
const char *run_pool_failure(const struct run_pool *p);
/* Kills every sandbox (a command still running ends with it, and its run is told nothing more:
 * it sees the pool go), closes every connection and removes the socket. */
void run_pool_free(struct run_pool *p);

#endif
