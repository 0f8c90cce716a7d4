/* `serve` in the front-end binary: exec mcp-sandbox-server, which sits next to this binary,
 * with the command line exactly as given.
 *
 * Why two executables: only the server needs libmicrohttpd (and through it gnutls, p11-kit,
 * libtasn1, ...), SQLite and nettle. Loading those costs every process that starts: on this
 * machine kind (expensive page faults) `mcp-sandbox --version` took 6.2 ms with them against
 * 2.1 ms with libc and jansson alone, and `run` paid it on every cold sandbox. The front end
 * (run, pool, doctor, config) links only libc and jansson, so a heavy dependency creeping into the
 * run path breaks its link instead of slowing it down. Server start pays one exec, once. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SERVER_NAME "mcp-sandbox-server"

int cmd_serve(int argc, char **argv, struct cli_ctx *ctx)
{
    (void)argc;
    (void)argv;
    int rc = cli_rerun_in_own_scope(ctx);
    if (rc >= 0)
        return rc;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "mcp-sandbox: cannot find this program's path (/proc/self/exe): %s\n",
                strerror(n < 0 ? errno : ENOENT));
        return 1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    char server[PATH_MAX];
    int len = snprintf(server, sizeof(server), "%.*s/%s", slash ? (int)(slash - self) : 1,
                       slash ? self : ".", SERVER_NAME);
    if (len < 0 || (size_t)len >= sizeof(server)) {
        fprintf(stderr, "mcp-sandbox: path too long for %s\n", SERVER_NAME);
        return 1;
    }
    execv(server, ctx->argv);
    fprintf(stderr, "mcp-sandbox: serve needs %s next to this binary: %s: %s\n", SERVER_NAME,
            server, strerror(errno));
    return 1;
}
