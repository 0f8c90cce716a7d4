/* Placeholder: replaced by the work that owns this facility. */
#include "http.h"

#include <errno.h>

int http_transport_start(struct ev_loop *loop, struct mcp_server *srv, const struct sbx_config *cfg,
                         const char *listen_addr, struct http_transport **out, struct sbx_err *err)
{
    (void)loop;
    (void)srv;
    (void)cfg;
    (void)listen_addr;
    (void)out;
    return sbx_fail(err, ENOSYS, "HTTP transport is not built yet");
}

unsigned http_transport_port(const struct http_transport *t)
{
    (void)t;
    return 0;
}

void http_transport_stop(struct http_transport *t)
{
    (void)t;
}
