/* What every tool handler of the sandbox service does alike: read arguments, find the caller's
 * sandbox, and finish with text plus structuredContent. */
#ifndef SBX_TOOLS_COMMON_H
#define SBX_TOOLS_COMMON_H

#include <jansson.h>
#include <stdbool.h>

struct mcp_call;
struct mcp_tool_def;
struct sandbox;
struct sbx_err;
struct sandbox_service;

/* Registers a table of tool definitions, each handled with svc as its data. */
int tool_register(struct sandbox_service *svc, const struct mcp_tool_def *defs, size_t n,
                  struct sbx_err *err);
const char *tool_arg_str(const json_t *args, const char *key);
/* The caller's sandbox named by args.sandbox_id (its default one when absent); on failure the
 * call is failed with the reason and NULL returned. A notice the sandbox holds (it replaced a
 * default sandbox that ended) goes to the call's result. */
struct sandbox *tool_sandbox(struct sandbox_service *svc, struct mcp_call *call,
                             const json_t *args);
/* The same for a tool that runs code or uses files there: a default sandbox that failed to start
 * or has ended is replaced first. */
struct sandbox *tool_sandbox_to_work(struct sandbox_service *svc, struct mcp_call *call,
                                     const json_t *args);
/* Whether the call waits for sb's jail and setup, which have not ended: then handler runs
 * again with the same arguments once they have, and the loop serves others meanwhile. So the
 * handler must ask before it changes anything. */
bool tool_wait_for_setup(struct sandbox_service *svc, struct mcp_call *call, json_t *args,
                         struct sandbox *sb, void (*handler)(struct mcp_call *, json_t *, void *));
/* The caller's sandbox for a tool that uses its files (as tool_sandbox_to_work), its setup
 * ended; NULL if the call failed or waits (tool_wait_for_setup). */
struct sandbox *tool_sandbox_with_files(struct sandbox_service *svc, struct mcp_call *call,
                                        json_t *args,
                                        void (*handler)(struct mcp_call *, json_t *, void *));
/* A JSON string of sandbox output, which is arbitrary bytes: when it is not valid UTF-8, each
 * byte of a malformed sequence becomes U+FFFD. */
json_t *tool_string_lossy(const char *buf, size_t len);
/* Finishes the call with sc as structuredContent and text (NULL: sc as indented JSON). */
void tool_finish(struct mcp_call *call, const char *text, json_t *sc);

#endif
