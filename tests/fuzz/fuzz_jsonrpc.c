/* libFuzzer target: arbitrary bytes as one framed message to an initialized session (with the
 * fixtures registered, so tool-call paths and schema validation are reached too), and its two
 * ends to the reader of an oversized stdio line's id. */
#include "config.h"
#include "protocol/mcp.h"
#include "service/loop.h"
#include "transport/stdio.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void discard(void *ctx, json_t *msg, const json_t *related)
{
    (void)ctx;
    (void)related;
    char *s = json_dumps(msg, JSON_COMPACT);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sbx_config cfg;
    static struct ev_loop *loop;
    static struct mcp_server *srv;
    if (!srv) {
        config_init_defaults(&cfg);
        cfg.max_message_bytes = 1 << 20;
        ev_loop_new(&loop, NULL);
        struct mcp_server_opts o = {.cfg = &cfg, .test_fixtures = true};
        mcp_server_new(loop, &o, &srv, NULL);
    }
    static const struct mcp_transport_ops ops = {.send = discard};
    struct mcp_session *s = mcp_session_new(srv, &ops, NULL, "fuzz");
    static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
                               "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}";
    /* Half the inputs hit a fresh session, half an initialized one. */
    if (size && (data[0] & 1))
        mcp_session_receive(s, init, sizeof(init) - 1);
    mcp_session_receive(s, (const char *)data, size);
    mcp_session_free(s); /* cancels whatever the input left in flight */
    /* What the stdio transport keeps of a line over the cap: at most 256 bytes of each end. An
     * id read from them is a string or an integer, never anything else. */
    char head[257], tail[257];
    size_t keep = size < 256 ? size : 256;
    memcpy(head, data, keep);
    head[keep] = '\0';
    memcpy(tail, data + size - keep, keep);
    tail[keep] = '\0';
    json_t *id = mcp_id_from_ends(head, tail);
    if (id && !json_is_string(id) && !json_is_integer(id))
        abort();
    json_decref(id);
    return 0;
}
