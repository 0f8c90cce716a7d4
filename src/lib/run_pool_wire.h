/* The messages between `mcp-sandbox run` and the run pool (`mcp-sandbox pool`), one per
 * SOCK_SEQPACKET datagram: a type byte and a version byte, then the fields, little-endian.
 * Pure code: encoding into a caller's buffer and strict decoding, so that each side checks
 * every byte the other sent (the pool trusts no client further than its uid). */
#ifndef SBX_RUN_POOL_WIRE_H
#define SBX_RUN_POOL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUN_POOL_VERSION 1
/* The largest message either side sends: a request with the longest command line. */
#define RUN_POOL_MSG_MAX    (40 * 1024)
#define RUN_POOL_KEY_MAX    512
#define RUN_POOL_ARGC_MAX   255
#define RUN_POOL_ARGV_BYTES (32 * 1024)
#define RUN_POOL_TEXT_MAX   1024

enum run_pool_type {
    /* run to the pool */
    RP_REQUEST = 'R', /* the build key and the command; three fds (stdin, stdout, stderr) */
    RP_QUERY = 'Q',   /* how many sandboxes are ready */
    RP_SIGNAL = 'S',  /* a signal for the command (its init forwards it) */
    RP_KILL = 'K',    /* kill everything in the sandbox */
    /* the pool to run */
    RP_MISS = 'M',    /* no sandbox for this request (text: why); run builds its own */
    RP_FAILED = 'F',  /* the command could not start (code: errno, text: why) */
    RP_STARTED = 'A', /* the command runs (report: setup and command times) */
    RP_ENDED = 'X',   /* the command has ended and nothing of it runs (report) */
    RP_STATE = 'T',   /* the answer to a query (text) */
};

struct run_pool_report {
    int32_t exit_code; /* -1 when the command did not exit by itself */
    int32_t term_signal;
    bool oom_killed;
    uint64_t memory_peak_bytes;
    uint64_t cpu_ns;
    uint64_t setup_ns;   /* the sandbox's own setup: clone until armed */
    uint64_t command_ns; /* the command handed over until its exec */
    char limits_backend[16];
    char degraded[256];
};

struct run_pool_msg {
    enum run_pool_type type;
    /* RP_REQUEST: pointers into the decoded buffer */
    const void *key;
    size_t key_len;
    const char *argv[RUN_POOL_ARGC_MAX + 1]; /* NULL-terminated */
    size_t argc;
    /* RP_SIGNAL */
    int sig;
    /* RP_MISS, RP_FAILED, RP_STATE */
    int code;
    char text[RUN_POOL_TEXT_MAX];
    /* RP_STARTED, RP_ENDED */
    struct run_pool_report report;
};

/* Each returns the message's length in buf, or 0 when it does not fit in cap (or an argument
 * is out of the bounds above). */
size_t run_pool_encode_request(char *buf, size_t cap, const void *key, size_t key_len,
                               char *const *argv);
size_t run_pool_encode_bare(char *buf, size_t cap, enum run_pool_type type); /* QUERY, KILL */
size_t run_pool_encode_signal(char *buf, size_t cap, int sig);
size_t run_pool_encode_text(char *buf, size_t cap, enum run_pool_type type, int code,
                            const char *text); /* MISS, FAILED, STATE; text is cut to fit */
size_t run_pool_encode_report(char *buf, size_t cap, enum run_pool_type type,
                              const struct run_pool_report *r); /* STARTED, ENDED */

/* Decodes one whole message; false when it is malformed in any way (unknown type or version,
 * a length past the end or the bounds, bytes left over, an argv string with no end). Texts come
 * out NUL-terminated, with what is not UTF-8 replaced. */
bool run_pool_decode(const char *buf, size_t len, struct run_pool_msg *out);

#endif
