/* What every tool handler of the sandbox service does alike: read arguments, find the caller's
 * sandbox, and finish with text plus structuredContent. */
#ifndef SBX_TOOLS_COMMON_H
#define SBX_TOOLS_COMMON_H

#include <jansson.h>

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
 * call is failed with the reason and NULL returned. */
struct sandbox *tool_sandbox(struct sandbox_service *svc, struct mcp_call *call,
                             const json_t *args);
/* The same for a tool that runs code or uses files there: a default sandbox that failed to start
 * is replaced first. */
struct sandbox *tool_sandbox_to_work(struct sandbox_service *svc, struct mcp_call *call,
                                     const json_t *args);
/* A JSON string of sandbox output, which is arbitrary bytes: when it is not valid UTF-8, the
 * bytes of each malformed sequence become '?' (buf is changed in place). */
json_t *tool_string_lossy(char *buf, size_t len);
/* Finishes the call with sc as structuredContent and text (NULL: sc as indented JSON). */
void tool_finish(struct mcp_call *call, const char *text, json_t *sc);

#endif
