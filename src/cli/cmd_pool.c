/* `mcp-sandbox pool`: keeps sandboxes built ahead for `mcp-sandbox run` (src/service/run_pool.h),
 * in the foreground until SIGINT or SIGTERM; `pool --status` asks a running one. */
#include "cli.h"

#include "jail/cgroup.h"
#include "jail/jail.h"
#include "lib/log.h"
#include "lib/util.h"
#include "run_pool_client.h"
#include "service/loop.h"
#include "service/run_pool.h"

#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const char pool_usage[] =
    "usage: mcp-sandbox pool [--size N] [--profile NAME]...   keep sandboxes ready for run\n"
    "       mcp-sandbox pool --status                         what a running pool holds\n";

#define POOL_SIZE_DEFAULT 2
#define POOL_SIZE_MAX     256

struct ready_note {
    const char *path;
    uint32_t size;
    size_t n_profiles;
};

static void on_ready(void *data)
{
    const struct ready_note *n = data;
    fprintf(stderr, "mcp-sandbox: run pool at %s: %u sandbox%s ready for each of %zu profile%s\n",
            n->path, n->size, n->size == 1 ? "" : "es", n->n_profiles,
            n->n_profiles == 1 ? "" : "s");
    log_emit(LOG_LVL_INFO, "run pool ready", "socket", n->path, NULL);
}

static int print_status(const char *path)
{
    char text[RUN_POOL_TEXT_MAX];
    struct sbx_err err = {0};
    if (run_pool_query(path, text, sizeof(text), &err) < 0) {
        fprintf(stderr, "mcp-sandbox: %s\n", err.msg);
        return 1;
    }
    fputs(text, stdout);
    return 0;
}

int cmd_pool(int argc, char **argv, struct cli_ctx *ctx)
{
    enum { O_SIZE = 1, O_PROFILE, O_STATUS, O_HELP };
    static const struct option opts[] = {
        {"size", required_argument, NULL, O_SIZE},
        {"profile", required_argument, NULL, O_PROFILE},
        {"status", no_argument, NULL, O_STATUS},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    uint32_t size = POOL_SIZE_DEFAULT;
    struct sbx_profile profiles[SBX_MAX_PROFILES];
    size_t n_profiles = 0;
    bool status = false;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_SIZE:
            if (parse_u32(optarg, 1, POOL_SIZE_MAX, &size) < 0)
                return cli_usage_error("pool: --size wants a number from 1 to %d", POOL_SIZE_MAX);
            break;
        case O_PROFILE: {
            const struct sbx_profile *p = config_profile(&ctx->cfg, optarg);
            if (!p)
                return cli_usage_error("pool: unknown profile '%s'", optarg);
            for (size_t i = 0; i < n_profiles; i++)
                if (strcmp(profiles[i].name, optarg) == 0)
                    return cli_usage_error("pool: profile '%s' named twice", optarg);
            profiles[n_profiles++] = *p; /* at most as many as there are profiles */
            break;
        }
        case O_STATUS:
            status = true;
            break;
        case O_HELP:
            fputs(pool_usage, stdout);
            return 0;
        default:
            return cli_usage_error("pool: unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error("pool: unexpected argument '%s'", argv[optind]);
    struct sbx_err err = {0};
    cleanup_free char *path = NULL;
    if (run_pool_socket_path(&ctx->cfg, &path, &err) < 0) {
        fprintf(stderr, "mcp-sandbox: %s\n", err.msg);
        return 1;
    }
    if (status)
        return print_status(path);
    if (n_profiles == 0)
        profiles[n_profiles++] = *config_profile(&ctx->cfg, ctx->cfg.default_profile);
    int rc = cli_rerun_in_own_scope(ctx);
    if (rc >= 0)
        return rc;
    /* A run could get cgroup limits in a scope of its own where the pool has none: the pool's
     * sandboxes would then be weaker than the ones they stand in for. */
    if (cgroup_backend(NULL) == CGROUP_BACKEND_NONE && cgroup_v2_needs_delegation()) {
        fprintf(stderr, "mcp-sandbox: the run pool has no cgroup of its own to set limits in, "
                        "where a run could have one: start it in a delegated scope "
                        "(systemd-run --user --scope -p Delegate=yes mcp-sandbox pool)\n");
        return 1;
    }

    /* Each sandbox holds a few fds here (pidfd, status, setup, and with a cgroup the three
     * its report reads), and each run one more. */
    cli_long_running_limits();
    struct ev_loop *loop = NULL;
    struct cli_stop stop = {.fd = -1};
    struct run_pool *pool = NULL;
    rc = 1;
    if (ev_loop_new(&loop, &err) < 0 || cli_stop_on_signals(loop, &stop, &err) < 0)
        goto out;
    jail_sweep_stale();
    struct ready_note note = {.path = path, .size = size, .n_profiles = n_profiles};
    struct run_pool_options po = {.cfg = &ctx->cfg,
                                  .socket_path = path,
                                  .profiles = profiles,
                                  .n_profiles = n_profiles,
                                  .size = size,
                                  .max_clients = 256,
                                  .wait_ms = 200,
                                  .ready = on_ready,
                                  .ready_data = &note};
    if (run_pool_new(loop, &po, &pool, &err) < 0)
        goto out;
    rc = ev_loop_run(loop) < 0 ? 1 : 0;
    if (run_pool_failure(pool)) {
        sbx_fail(&err, EIO, "the run pool cannot build its sandboxes: %s", run_pool_failure(pool));
        rc = 1;
    }
out:
    if (rc && err.msg[0])
        fprintf(stderr, "mcp-sandbox: %s\n", err.msg);
    run_pool_free(pool);
    cli_stop_free(&stop);
    ev_loop_free(loop);
    jail_shutdown();
    return rc;
}
