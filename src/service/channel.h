/* The private control channel between the service and the Python driver inside a sandbox.
 *
 * Transport: two pipes; the driver reads requests from fd 3 and writes its frames to fd 4.
 * Not a socketpair: a socket has one wait queue for both directions, so each time the service
 * read a result the driver, asleep in read(), was woken for nothing (a context switch per
 * execution); a pipe wakes only its readers or only its writers. Never the user's stdout:
 * user output goes to fds 1 and 2 (pipes the service reads), so nothing the user prints can
 * forge a frame.
 *
 * Framing: a 4-byte big-endian length, then that many bytes of one JSON object. Frames larger
 * than CHANNEL_MAX_FRAME, or holding more than CHANNEL_MAX_VALUES JSON values, are a protocol
 * error (the service kills everything in the sandbox and restarts the driver). Sandbox code can
 * write to fd 4 as well, and the service parses on its one loop, outside the sandbox's limits:
 * a 15 MiB frame of empty objects took 1.2 GB and seconds of the loop to parse.
 *
 * Output sync: the driver flushes sys.stdout/sys.stderr before it writes a result frame, and
 * a bash child has exited before it does. A pipe write is in the pipe once write() returns,
 * so when the service reads a result frame it drains both pipes until EAGAIN and has all the
 * output of that execution. Background processes' output goes to the execution running when it
 * is read; what they write between executions is read and dropped, so that it can neither fill
 * the pipe and block them nor land in a later, unrelated result.
 *
 * Service -> driver (every request but init carries an integer "id"):
 *   {"op":"init","workspace":"/workspace","packages_dir":"/workspace/.packages",
 *    "profile":"standard","guard":null | {"modules":[..],"calls":[..],"attributes":[..]},
 *    "max_images":4,"max_image_bytes":1048576,"max_files":20,"max_scan_files":2000,
 *    "max_text_bytes":65536,
 *    "figures_dir":"/workspace/.mcp"}
 *   {"op":"exec","id":N,"language":"python"|"bash","code":"...","cwd":null|"/workspace/sub"}
 *   {"op":"ping","id":N}
 *   {"op":"refresh_imports","id":N}
 * Driver -> service:
 *   {"op":"ready","python":"3.11.2"}                     once, after init
 *   {"op":"result","id":N,"success":bool,"result":null|"repr",
 *    "error":null|{"type":"ZeroDivisionError","message":"...","traceback":"..."},
 *    "rejected":null|"rejected by policy (profile tight): import of module 'os'",
 *    "interrupted":bool,"exit_code":int,
 *    "images":[{"mime":"image/png","data":"<base64>"}],   at most max_images, each <= max
 *    "image_files":["/workspace/.mcp/figures/fig-3.png"], figures too big to inline
 *    "files":["/workspace/out.csv"],                      created or modified, <= max_files
 *    "files_incomplete":bool,                             more changed, or past the scan's cap
 *    "truncated":bool,                                    result or error cut to max_text_bytes
 *    "cpu_ns":int, "maxrss_bytes":int}                    maxrss only when asked (no cgroup)
 *   A result leaves out the fields that hold their default (null, false, 0, []): the usual
 *   frame is {"op":"result","id":N,"success":true}.
 *   {"op":"pong","id":N}
 *   {"op":"refreshed","id":N}
 *   {"op":"error","id":N|null,"message":"..."}           unknown op; the driver survives
 */
#ifndef SBX_CHANNEL_H
#define SBX_CHANNEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHANNEL_MAX_FRAME (16u * 1024 * 1024)
/* What the driver sends besides a result (ready, refreshed, error) is small. Sandbox code can
 * write to fd 4 too: a larger frame is taken only while a result is awaited, one per execution,
 * so that it cannot make the service hold or parse large frames while it idles, nor one after
 * another while it runs. */
#define CHANNEL_SMALL_FRAME (64u * 1024)
/* A result holds a few dozen values (files, images and errors are capped); this is ample. */
#define CHANNEL_MAX_VALUES 10000
/* What the driver is told to send at most (init), and what the service takes from a result
 * whatever it holds. */
#define CHANNEL_MAX_IMAGES      4
#define CHANNEL_MAX_IMAGE_BYTES (1u << 20)
#define CHANNEL_MAX_FILES       20
/* The driver's search for changed files looks at this many files in the workspace. */
#define CHANNEL_SCAN_FILES 2000
/* A result's repr and an error's message and traceback, each: the output cap, up to this. */
#define CHANNEL_MAX_TEXT_BYTES (1u << 20)

/* Incremental decoder: feed whatever read() returned, take complete frames out. */
struct channel_decoder {
    char *buf;
    size_t len, cap;
    size_t max_frame;   /* the largest frame taken */
    size_t small_frame; /* the largest unless a large one is allowed; 0: max_frame */
    bool large_allowed;
};

/* max_frame 0: CHANNEL_MAX_FRAME. With small_frame, a frame past it is an error unless
 * channel_allow_large came since the last such frame. */
void channel_decoder_init(struct channel_decoder *d, size_t max_frame, size_t small_frame);
/* The next frame may be large; channel_forbid_large takes that back. */
void channel_allow_large(struct channel_decoder *d);
void channel_forbid_large(struct channel_decoder *d);
void channel_decoder_reset(struct channel_decoder *d);
void channel_decoder_free(struct channel_decoder *d);
/* Appends bytes. Returns 0, or -1 if memory ran out. */
int channel_feed(struct channel_decoder *d, const void *data, size_t len);
/* Takes the next complete frame: 1 with *out set (caller owns it), 0 if more bytes are needed,
 * -1 on a protocol error (oversized length, too many values, or not a JSON object). */
int channel_next(struct channel_decoder *d, json_t **out);

/* Encodes obj as one frame (length prefix included) into a malloc'd buffer. */
int channel_encode(const json_t *obj, char **out, size_t *len);

#endif
