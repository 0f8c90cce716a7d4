/* MCP over stdin/stdout: newline-delimited JSON-RPC, UTF-8. stdout carries protocol lines only. */
#ifndef SBX_TRANSPORT_STDIO_H
#define SBX_TRANSPORT_STDIO_H

#include "err.h"

#include <jansson.h>
#include <stddef.h>

struct ev_loop;
struct mcp_server;
struct stdio_transport;

/* Reads in_fd, writes out_fd; stops the loop on EOF. */
int stdio_transport_start(struct ev_loop *loop, struct mcp_server *srv, int in_fd, int out_fd,
                          struct stdio_transport **out, struct sbx_err *err);
/* Messages longer than max bytes are refused (the stream stays in sync). */
void stdio_transport_set_max(struct stdio_transport *t, size_t max);
void stdio_transport_stop(struct stdio_transport *t);

#endif
