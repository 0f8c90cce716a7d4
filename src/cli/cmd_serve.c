/* `mcp-sandbox serve`: the MCP server on the event loop, over stdio or Streamable HTTP. */
#include "cli.h"

#include "jail/jail.h"
#include "lib/log.h"
#include "lib/util.h"
#include "protocol/mcp.h"
#include "service/loop.h"
#include "service/sandbox.h"
#include "transport/http.h"
#include "transport/stdio.h"

#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

int cmd_serve(int argc, char **argv, struct cli_ctx *ctx)
{
    enum { O_STDIO = 1, O_HTTP, O_FIXTURES, O_MAX_MSG, O_HELP };
    static const struct option opts[] = {
        {"stdio", no_argument, NULL, O_STDIO},
        {"http", optional_argument, NULL, O_HTTP},
        {"test-fixtures", no_argument, NULL, O_FIXTURES},
        {"max-message-bytes", required_argument, NULL, O_MAX_MSG},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    bool use_stdio = false, fixtures = false;
    const char *http = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_STDIO:
            use_stdio = true;
            break;
        case O_HTTP:
            /* "--http ADDR" as well as "--http=ADDR"; a bare --http listens where http.listen
             * says (the key is otherwise read by nothing). */
            if (optarg)
                http = optarg;
            else if (optind < argc && argv[optind][0] != '-')
                http = argv[optind++];
            else
                http = ctx->cfg.http_listen;
            break;
        case O_FIXTURES:
            fixtures = true;
            break;
        case O_MAX_MSG: {
            /* Held to server.max_message_bytes's own range (the flag sets that key). */
            struct sbx_err ferr = {0};
            if (config_set(&ctx->cfg, "server.max_message_bytes", optarg, CONFIG_SRC_FLAG, &ferr) <
                0)
                return cli_usage_error("serve: --max-message-bytes: %s", ferr.msg);
            break;
        }
        case O_HELP:
            puts(
                "usage: mcp-sandbox serve --stdio | --http [ADDR:PORT] [--max-message-bytes SIZE]\n"
                "  --http without an address listens at http.listen (127.0.0.1:8080)");
            return 0;
        default:
            return cli_usage_error("serve: unknown option");
        }
    }
    if (optind < argc)
        return cli_usage_error("serve: unexpected argument '%s'", argv[optind]);
    if (use_stdio && http)
        return cli_usage_error("serve: choose one of --stdio and --http");
    if (!use_stdio && !http)
        return cli_usage_error("serve: say --stdio (for MCP hosts) or --http [ADDR:PORT]");

    struct sbx_err err = {0};
    struct ev_loop *loop = NULL;
    struct mcp_server *srv = NULL;
    struct stdio_transport *st = NULL;
    struct http_transport *ht = NULL;
    struct sandbox_service *svc = NULL;
    struct cli_stop stop = {.fd = -1};
    int rc = 1;
    /* Each sandbox holds a few fds here (pipes, pidfd, root, status). */
    cli_long_running_limits();
    /* Every call allocates and frees a few kB of JSON: keep the heap top instead of trimming
     * and regrowing it with brk() on each request. */
    mallopt(M_TRIM_THRESHOLD, 4 << 20);
    mallopt(M_TOP_PAD, 1 << 20);
    /* A host that does not read our stderr must not stop the loop (MCP lets it ignore it). */
    log_never_block();
    if (ev_loop_new(&loop, &err) < 0 || cli_stop_on_signals(loop, &stop, &err) < 0)
        goto out;
    int swept = jail_sweep_stale();
    if (swept > 0) {
        char n[16];
        snprintf(n, sizeof(n), "%d", swept);
        log_emit(LOG_LVL_INFO, "removed cgroups left by servers that were killed", "count", n,
                 NULL);
    }
    struct mcp_server_opts so = {
        .cfg = &ctx->cfg, .test_fixtures = fixtures, .transport_name = http ? "http" : "stdio"};
    if (mcp_server_new(loop, &so, &srv, &err) < 0 ||
        sandbox_service_new(loop, srv, &ctx->cfg, &svc, &err) < 0)
        goto out;
    if (use_stdio) {
        if (stdio_transport_start(loop, srv, 0, 1, &st, &err) < 0)
            goto out;
        stdio_transport_set_max(st, ctx->cfg.max_message_bytes);
    } else {
        if (http_transport_start(loop, srv, &ctx->cfg, http, &ht, &err) < 0)
            goto out;
        http_transport_serve_files(ht, svc);
        const char *u = http_transport_url(ht);
        fprintf(stderr,
                "mcp-sandbox: MCP over Streamable HTTP at %s/mcp\n"
                "  Claude Code: claude mcp add --transport http sandbox %s/mcp\n"
                "  .mcp.json:   {\"mcpServers\":{\"sandbox\":{\"type\":\"http\",\"url\":"
                "\"%s/mcp\"}}}\n"
                "  REST: POST %s/api/v1/tools/{name}; the API is described at %s/docs\n",
                u, u, u, u, u);
    }
    log_emit(LOG_LVL_INFO, "serving", "transport", http ? "http" : "stdio", NULL);
    rc = ev_loop_run(loop) < 0 ? 1 : 0;
out:
    if (rc && err.msg[0])
        fprintf(stderr, "mcp-sandbox: %s\n", err.msg);
    /* The transport first (its sessions end, their calls are cancelled), then the sandboxes. */
    stdio_transport_stop(st);
    http_transport_stop(ht);
    sandbox_service_free(svc);
    mcp_server_free(srv);
    cli_stop_free(&stop);
    ev_loop_free(loop);
    jail_shutdown();
    return rc;
}
