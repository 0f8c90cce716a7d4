/* The execution history: SQLite (WAL) in the state directory, so it survives restarts.
 * One row per sandbox (owner, profile, packages) and one per execution, with capped
 * previews and a per-sandbox retention cap. Called on the hot path of every run_code. */
#ifndef SBX_HISTORY_H
#define SBX_HISTORY_H

#include "err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define HISTORY_PREVIEW_MAX 2048
/* Records kept in memory until the next flush, at most (then history_add writes through). */
#define HISTORY_PENDING_MAX   8192
#define HISTORY_PENDING_BYTES (2u << 20)
/* Sandbox rows queued while writes fail, past which the oldest rows of sandboxes that already
 * ended go (a live sandbox's row is always kept: there are at most limits.max_sandboxes). */
#define HISTORY_ROWS_MAX 4096
/* After a failed write (a full disk, say), the next try waits this long. */
#define HISTORY_RETRY_MS 1000
/* How long a write waits for another process's lock (a second server on the same state dir,
 * the sqlite3 shell): the wait is on the event loop, and a write that gives up stays queued. */
#define HISTORY_BUSY_MS 100

struct history;

struct history_record {
    int64_t timestamp_ms;
    const char *language;
    bool success;
    int64_t duration_ms;
    const char *code;
    const char *stdout_text;
    const char *error; /* NULL on success */
};

/* Opens (or creates, mode 0600, parents 0700) the database at path. */
int history_open(const char *path, struct history **out, struct sbx_err *err);
void history_close(struct history *h);
/* Newest records kept per sandbox (default 1000). */
void history_set_retention(struct history *h, unsigned max_records);

/* A sandbox's row (created, then closed): queued like the records, written first at the next
 * flush; errors surface there. A close whose creation is still queued joins it. */
int history_record_sandbox(struct history *h, const char *id, const char *owner, const char *name,
                           const char *profile, int64_t created_ms, struct sbx_err *err);
int history_close_sandbox(struct history *h, const char *id, int64_t closed_ms,
                          struct sbx_err *err);
/* Queues a record; it reaches the database at the next history_flush (the service flushes
 * shortly after, so a burst of executions costs one transaction). Reads flush first. */
int history_add(struct history *h, const char *sandbox_id, const struct history_record *r,
                struct sbx_err *err);
/* Writes what is queued in one transaction. When that fails, everything stays queued for the
 * next try (until HISTORY_RETRY_MS has passed, a flush only says why it failed), the oldest
 * records going past the queue's bounds; the first failure and the recovery are logged. */
int history_flush(struct history *h, struct sbx_err *err);
bool history_pending(const struct history *h);
/* The newest last_n records, oldest first: {timestamp, language, success, duration_ms,
 * code_preview, stdout_preview, error}. */
int history_list(struct history *h, const char *sandbox_id, unsigned last_n, json_t **records,
                 struct sbx_err *err);
/* Executions since the sandbox was created or last cleared. */
int64_t history_total(struct history *h, const char *sandbox_id);
/* Forgets the executions (reset_sandbox); the session starts again now. */
int history_clear(struct history *h, const char *sandbox_id, struct sbx_err *err);
int history_set_packages(struct history *h, const char *sandbox_id, const json_t *packages,
                         struct sbx_err *err);
/* Deletes, with their executions, at most max sandboxes closed before closed_before_ms, or
 * never closed (their server was killed) and created before created_before_ms; *purged says
 * how many (max: call again). */
int history_purge(struct history *h, int64_t closed_before_ms, int64_t created_before_ms,
                  unsigned max, size_t *purged, struct sbx_err *err);
/* The same for the max sandboxes that closed first, whenever that was (the size cap). */
int history_purge_oldest_closed(struct history *h, unsigned max, size_t *purged,
                                struct sbx_err *err);
/* The bytes the database's pages hold (free pages, which new rows reuse, not counted). */
int history_used_bytes(struct history *h, uint64_t *bytes, struct sbx_err *err);
/* {owner, name, profile, created_at, closed_at, session_start, packages}; ENOENT if unknown. */
int history_get_sandbox(struct history *h, const char *sandbox_id, json_t **info,
                        struct sbx_err *err);

#endif
