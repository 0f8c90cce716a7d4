/* Execution history in SQLite: WAL, synchronous=NORMAL (a crash may lose the last records,
 * never corrupt the file), schema migrations as data, prepared statements kept. */
#include "history.h"

#include "log.h"
#include "util.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Each step moves the schema one version up (PRAGMA user_version). */
static const char *const migrations[] = {
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT, profile TEXT,"
    "  created_ms INTEGER NOT NULL, closed_ms INTEGER, session_start_ms INTEGER NOT NULL,"
    "  packages TEXT NOT NULL DEFAULT '[]', seq INTEGER NOT NULL DEFAULT 0,"
    "  total INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE executions ("
    "  sandbox_id TEXT NOT NULL, seq INTEGER NOT NULL, timestamp_ms INTEGER NOT NULL,"
    "  language TEXT, success INTEGER NOT NULL, duration_ms INTEGER,"
    "  code_preview TEXT, stdout_preview TEXT, error TEXT,"
    "  PRIMARY KEY (sandbox_id, seq)) WITHOUT ROWID;",
    /* For the purge of closed sandboxes (history_purge). */
    "CREATE INDEX sandboxes_by_end ON sandboxes (closed_ms, created_ms);",
};

enum stmt_id {
    ST_RECORD,
    ST_CLOSE,
    ST_BUMP,
    ST_INSERT,
    ST_TRIM,
    ST_LIST,
    ST_TOTAL,
    ST_CLEAR_ROWS,
    ST_CLEAR_SANDBOX,
    ST_PACKAGES,
    ST_GET,
    ST_EXPIRED,
    ST_FORGET,
    ST_OLDEST_CLOSED,
    ST_USED_BYTES,
};

static const char *const stmt_sql[] = {
    [ST_RECORD] = "INSERT OR REPLACE INTO sandboxes (id, owner, name, profile, created_ms, "
                  "session_start_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
    [ST_CLOSE] = "UPDATE sandboxes SET closed_ms = ?2 WHERE id = ?1",
    [ST_BUMP] = "UPDATE sandboxes SET seq = seq + ?2, total = total + ?2 WHERE id = ?1 "
                "RETURNING seq",
    [ST_INSERT] = "INSERT INTO executions (sandbox_id, seq, timestamp_ms, language, success, "
                  "duration_ms, code_preview, stdout_preview, error) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [ST_TRIM] = "DELETE FROM executions WHERE sandbox_id = ?1 AND seq <= ?2",
    [ST_LIST] = "SELECT timestamp_ms, language, success, duration_ms, code_preview, "
                "stdout_preview, error FROM executions WHERE sandbox_id = ?1 "
                "ORDER BY seq DESC LIMIT ?2",
    [ST_TOTAL] = "SELECT total FROM sandboxes WHERE id = ?1",
    [ST_CLEAR_ROWS] = "DELETE FROM executions WHERE sandbox_id = ?1",
    [ST_CLEAR_SANDBOX] = "UPDATE sandboxes SET total = 0, session_start_ms = ?2 WHERE id = ?1",
    [ST_PACKAGES] = "UPDATE sandboxes SET packages = ?2 WHERE id = ?1",
    [ST_GET] = "SELECT owner, name, profile, created_ms, closed_ms, session_start_ms, packages "
               "FROM sandboxes WHERE id = ?1",
    [ST_EXPIRED] = "SELECT id FROM sandboxes WHERE closed_ms < ?1 "
                   "UNION ALL SELECT id FROM sandboxes WHERE closed_ms IS NULL AND created_ms < ?2 "
                   "LIMIT ?3",
    [ST_FORGET] = "DELETE FROM sandboxes WHERE id = ?1",
    [ST_OLDEST_CLOSED] = "SELECT id FROM sandboxes WHERE closed_ms IS NOT NULL "
                         "ORDER BY closed_ms LIMIT ?1",
    [ST_USED_BYTES] = "SELECT (p.page_count - f.freelist_count) * s.page_size "
                      "FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s",
};

/* A record waiting for the next batched write. */
struct pending {
    char *sandbox_id;
    struct history_record r; /* strings owned, previews already cut */
    uint64_t order;          /* arrival, to keep a sandbox's records in order when grouped */
    struct pending *next;
};

/* A change to a sandbox's row, applied at the next flush before the executions, in order:
 * its creation (with its end, when that came before the flush), or the end of one whose
 * creation was written before. */
struct sandbox_op {
    bool close;
    bool ended;
    char *id, *owner, *name, *profile;
    int64_t ms, ended_ms;
    struct sandbox_op *next;
};

struct history {
    sqlite3 *db;
    sqlite3_stmt *st[ARRAY_SIZE(stmt_sql)];
    unsigned retention;
    struct pending *pending, **pending_tail;
    size_t n_pending, pending_bytes;
    uint64_t next_order;
    struct sandbox_op *ops, **ops_tail;
    size_t n_ops;
    /* While writes fail (a full disk), what is queued stays for the next try, which waits
     * HISTORY_RETRY_MS; past the queue's bounds the oldest records go, and are counted. */
    bool failing;
    uint64_t retry_at_ms;
    uint64_t dropped, rows_dropped;
    char failure[SBX_ERR_MSG_MAX];
};

static void free_pending(struct pending *p)
{
    free(p->sandbox_id);
    free((char *)p->r.language);
    free((char *)p->r.code);
    free((char *)p->r.stdout_text);
    free((char *)p->r.error);
    free(p);
}

static void free_op(struct sandbox_op *op)
{
    free(op->id);
    free(op->owner);
    free(op->name);
    free(op->profile);
    free(op);
}

static int db_fail(struct history *h, struct sbx_err *err, const char *what)
{
    return sbx_fail(err, EIO, "history database: %s: %s", what,
                    h && h->db ? sqlite3_errmsg(h->db) : "cannot open");
}

static sqlite3_stmt *stmt(struct history *h, enum stmt_id id)
{
    sqlite3_stmt *s = h->st[id];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

static int migrate(struct history *h, struct sbx_err *err)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(h->db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
        return db_fail(h, err, "reading its version");
    int version = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
    sqlite3_finalize(s);
    if (version < 0)
        return db_fail(h, err, "reading its version");
    if ((size_t)version > ARRAY_SIZE(migrations))
        return sbx_fail(err, EPROTO,
                        "history database: schema version %d is newer than this build knows "
                        "(%zu); use a newer mcp-sandbox or another --state-dir",
                        version, ARRAY_SIZE(migrations));
    for (size_t v = (size_t)version; v < ARRAY_SIZE(migrations); v++) {
        char *msg = NULL;
        char *sql = xasprintf("BEGIN; %s PRAGMA user_version = %zu; COMMIT;", migrations[v], v + 1);
        int rc = sqlite3_exec(h->db, sql, NULL, NULL, &msg);
        free(sql);
        if (rc != SQLITE_OK) {
            sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
            sbx_fail(err, EIO, "history database: migrating to version %zu: %s", v + 1,
                     msg ? msg : "failed");
            sqlite3_free(msg);
            return -1;
        }
    }
    return 0;
}

int history_open(const char *path, struct history **out, struct sbx_err *err)
{
    if (mkdir_parents(path, err) < 0)
        return -1;
    /* Create it private before SQLite does (SQLite would use the umask). */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sbx_fail_errno(err, errno, "history database %s", path);
    close(fd);
    struct history *h = xcalloc(1, sizeof(*h));
    h->retention = 1000;
    h->pending_tail = &h->pending;
    h->ops_tail = &h->ops;
    if (sqlite3_open_v2(path, &h->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        db_fail(h, err, path);
        goto fail;
    }
    sqlite3_busy_timeout(h->db, HISTORY_BUSY_MS);
    char *msg = NULL;
    if (sqlite3_exec(h->db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", NULL, NULL,
                     &msg) != SQLITE_OK) {
        sbx_fail(err, EIO, "history database %s: %s (is it a SQLite file?)", path,
                 msg ? msg : "unreadable");
        sqlite3_free(msg);
        goto fail;
    }
    if (migrate(h, err) < 0)
        goto fail;
    for (size_t i = 0; i < ARRAY_SIZE(stmt_sql); i++)
        if (sqlite3_prepare_v3(h->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &h->st[i],
                               NULL) != SQLITE_OK) {
            db_fail(h, err, "preparing statements");
            goto fail;
        }
    *out = h;
    return 0;
fail:
    history_close(h);
    return -1;
}

void history_close(struct history *h)
{
    if (!h)
        return;
    h->retry_at_ms = 0; /* a last try, whenever the one before was */
    if (h->db && h->st[ARRAY_SIZE(h->st) - 1] && history_flush(h, NULL) < 0)
        log_msgf(LOG_LVL_WARNING, "history: %llu execution records were not written: %s",
                 (unsigned long long)(h->n_pending + h->dropped), h->failure);
    while (h->pending) {
        struct pending *p = h->pending;
        h->pending = p->next;
        free_pending(p);
    }
    while (h->ops) {
        struct sandbox_op *op = h->ops;
        h->ops = op->next;
        free_op(op);
    }
    for (size_t i = 0; i < ARRAY_SIZE(h->st); i++)
        sqlite3_finalize(h->st[i]);
    sqlite3_close(h->db);
    free(h);
}

void history_set_retention(struct history *h, unsigned max_records)
{
    h->retention = max_records ? max_records : 1;
}

static int run_done(struct history *h, sqlite3_stmt *s, struct sbx_err *err, const char *what)
{
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_fail(h, err, what);
    return 0;
}

/* A sandbox's row is written with the next flush, not at once: an autocommit of its own cost
 * create_sandbox about 0.4 ms. Whatever reads the table flushes first. */
static void queue_op(struct history *h, struct sandbox_op *op)
{
    *h->ops_tail = op;
    h->ops_tail = &op->next;
    h->n_ops++;
}

static size_t drop_pending_of(struct history *h, const char *sandbox_id);

/* While writes fail, sandboxes come and go: past HISTORY_ROWS_MAX the oldest rows of those that
 * ended go, their queued records with them, and both are counted. */
static void drop_oldest_rows(struct history *h)
{
    for (struct sandbox_op **pp = &h->ops; *pp && h->n_ops > HISTORY_ROWS_MAX;) {
        struct sandbox_op *op = *pp;
        if (op->close || !op->ended) {
            pp = &op->next;
            continue;
        }
        *pp = op->next;
        if (!*pp)
            h->ops_tail = pp;
        h->dropped += drop_pending_of(h, op->id);
        free_op(op);
        h->n_ops--;
        h->rows_dropped++;
    }
}

int history_record_sandbox(struct history *h, const char *id, const char *owner, const char *name,
                           const char *profile, int64_t created_ms, struct sbx_err *err)
{
    (void)err;
    struct sandbox_op *op = xcalloc(1, sizeof(*op));
    op->id = xstrdup(id);
    op->owner = xstrdup(owner);
    op->name = name ? xstrdup(name) : NULL;
    op->profile = profile ? xstrdup(profile) : NULL;
    op->ms = created_ms;
    queue_op(h, op);
    return 0;
}

int history_close_sandbox(struct history *h, const char *id, int64_t closed_ms, struct sbx_err *err)
{
    (void)err;
    for (struct sandbox_op *op = h->ops; op; op = op->next)
        if (!op->close && strcmp(op->id, id) == 0) {
            op->ended = true;
            op->ended_ms = closed_ms;
            if (h->failing)
                drop_oldest_rows(h);
            return 0;
        }
    struct sandbox_op *op = xcalloc(1, sizeof(*op));
    op->close = true;
    op->id = xstrdup(id);
    op->ms = closed_ms;
    queue_op(h, op);
    return 0;
}

static int write_close(struct history *h, const char *id, int64_t ms, struct sbx_err *err)
{
    sqlite3_stmt *s = stmt(h, ST_CLOSE);
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, ms);
    return run_done(h, s, err, "closing a sandbox");
}

static int write_op(struct history *h, const struct sandbox_op *op, struct sbx_err *err)
{
    if (op->close)
        return write_close(h, op->id, op->ms, err);
    sqlite3_stmt *s = stmt(h, ST_RECORD);
    sqlite3_bind_text(s, 1, op->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, op->owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, op->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, op->profile, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, op->ms);
    if (run_done(h, s, err, "recording a sandbox") < 0)
        return -1;
    return op->ended ? write_close(h, op->id, op->ended_ms, err) : 0;
}

/* At most HISTORY_PREVIEW_MAX bytes, cut on a UTF-8 boundary, with a marker when cut. */
static char *preview(const char *text)
{
    return text ? utf8_cut_marked(text, HISTORY_PREVIEW_MAX, "\xe2\x80\xa6") : NULL; /* "…" */
}

/* Writes one sandbox's records (in order): they are numbered as a block with one update, and
 * the old ones past the retention go with one delete. The caller holds the transaction. */
static int write_group(struct history *h, struct pending **v, size_t n, struct sbx_err *err)
{
    const char *sandbox_id = v[0]->sandbox_id;
    sqlite3_stmt *s = stmt(h, ST_BUMP);
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (int64_t)n);
    int step = sqlite3_step(s);
    if (step != SQLITE_ROW) {
        /* Only "no such row" may drop the records: a busy or failing database must keep them
         * queued for the next try, as any other failed write does. */
        int r = step == SQLITE_DONE
                    ? sbx_fail(err, ENOENT, "history: unknown sandbox %s", sandbox_id)
                    : db_fail(h, err, "numbering executions");
        sqlite3_reset(s);
        return r;
    }
    int64_t last = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct history_record *r = &v[i]->r;
        s = stmt(h, ST_INSERT);
        sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, last - (int64_t)(n - 1 - i));
        sqlite3_bind_int64(s, 3, r->timestamp_ms);
        sqlite3_bind_text(s, 4, r->language, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 5, r->success);
        sqlite3_bind_int64(s, 6, r->duration_ms);
        sqlite3_bind_text(s, 7, r->code, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 8, r->stdout_text, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 9, r->error, -1, SQLITE_STATIC);
        rc = run_done(h, s, err, "adding an execution");
        sqlite3_reset(s);
    }
    if (rc == 0 && last > (int64_t)h->retention) {
        s = stmt(h, ST_TRIM);
        sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, last - (int64_t)h->retention);
        rc = run_done(h, s, err, "trimming old executions");
    }
    return rc;
}

static int by_sandbox_then_arrival(const void *a, const void *b)
{
    const struct pending *x = *(struct pending *const *)a, *y = *(struct pending *const *)b;
    int c = strcmp(x->sandbox_id, y->sandbox_id);
    if (c)
        return c;
    return x->order < y->order ? -1 : x->order > y->order;
}

static size_t pending_size(const struct pending *p)
{
    return sizeof(*p) + strlen(p->sandbox_id) + (p->r.code ? strlen(p->r.code) : 0) +
           (p->r.stdout_text ? strlen(p->r.stdout_text) : 0) +
           (p->r.error ? strlen(p->r.error) : 0);
}

/* While writes fail, the queue keeps its bounds by letting its oldest records go. */
static void drop_oldest(struct history *h)
{
    while (h->pending &&
           (h->n_pending > HISTORY_PENDING_MAX || h->pending_bytes > HISTORY_PENDING_BYTES)) {
        struct pending *p = h->pending;
        h->pending = p->next;
        if (!h->pending)
            h->pending_tail = &h->pending;
        h->n_pending--;
        h->pending_bytes -= pending_size(p);
        free_pending(p);
        h->dropped++;
    }
}

int history_add(struct history *h, const char *sandbox_id, const struct history_record *r,
                struct sbx_err *err)
{
    struct pending *p = xcalloc(1, sizeof(*p));
    p->sandbox_id = xstrdup(sandbox_id);
    p->r = *r;
    p->r.language = r->language ? xstrdup(r->language) : NULL;
    p->r.code = preview(r->code);
    p->r.stdout_text = preview(r->stdout_text);
    p->r.error = preview(r->error);
    p->order = h->next_order++;
    *h->pending_tail = p;
    h->pending_tail = &p->next;
    h->n_pending++;
    h->pending_bytes += pending_size(p);
    /* Bounded even if nobody flushes: write through once enough piled up. The bound is in
     * bytes (previews can be 2 KiB each), so that a busy server (thousands of executions a
     * second) commits a few large transactions per flush interval, not one per 256. */
    if (h->n_pending >= HISTORY_PENDING_MAX || h->pending_bytes >= HISTORY_PENDING_BYTES) {
        int rc = history_flush(h, err);
        drop_oldest(h);
        return rc;
    }
    return 0;
}

bool history_pending(const struct history *h)
{
    return h->pending != NULL || h->ops != NULL;
}

/* Writes what is queued in one transaction; on failure it is all rolled back, and the
 * reason (SQLite's own, read before the rollback replaces it) is in err. */
static int write_queued(struct history *h, struct sbx_err *err)
{
    struct pending **v = xmalloc((h->n_pending ? h->n_pending : 1) * sizeof(*v));
    size_t n = 0;
    for (struct pending *p = h->pending; p; p = p->next)
        v[n++] = p;
    /* Grouped by sandbox: one numbering update and one trim per sandbox, not per record. */
    qsort(v, n, sizeof(*v), by_sandbox_then_arrival);
    int rc = sqlite3_exec(h->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK
                 ? 0
                 : db_fail(h, err, "starting a transaction");
    /* Sandbox rows first: executions are numbered in their row. */
    for (struct sandbox_op *op = h->ops; op && rc == 0; op = op->next)
        rc = write_op(h, op, err);
    for (size_t a = 0, b; a < n && rc == 0; a = b) {
        for (b = a + 1; b < n && strcmp(v[b]->sandbox_id, v[a]->sandbox_id) == 0; b++)
            ;
        /* Records of a sandbox that is gone from the table are dropped, not fatal. */
        struct sbx_err sub = {0};
        if (write_group(h, v + a, b - a, &sub) < 0 && sub.code != ENOENT)
            rc = sbx_fail(err, sub.code, "%s", sub.msg);
    }
    free(v);
    if (rc == 0 && sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        rc = db_fail(h, err, "writing executions");
    if (rc < 0)
        sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int history_flush(struct history *h, struct sbx_err *err)
{
    if (!h->pending && !h->ops)
        return 0;
    if (h->failing && now_ms() < h->retry_at_ms)
        return sbx_fail(err, EIO, "%s", h->failure);
    struct sbx_err why = {0};
    if (write_queued(h, &why) < 0) {
        if (!h->failing)
            log_emit(LOG_LVL_WARNING, "history write failed; kept to be tried again", "error",
                     why.msg, NULL);
        h->failing = true;
        h->retry_at_ms = now_ms() + HISTORY_RETRY_MS;
        snprintf(h->failure, sizeof(h->failure), "%s", why.msg);
        drop_oldest(h);
        drop_oldest_rows(h);
        return sbx_fail(err, why.code ? why.code : EIO, "%s", why.msg);
    }
    while (h->ops) {
        struct sandbox_op *op = h->ops;
        h->ops = op->next;
        free_op(op);
    }
    h->ops_tail = &h->ops;
    h->n_ops = 0;
    while (h->pending) {
        struct pending *p = h->pending;
        h->pending = p->next;
        free_pending(p);
    }
    h->pending_tail = &h->pending;
    h->n_pending = h->pending_bytes = 0;
    if (h->failing) {
        char lost[32], rows_lost[32];
        snprintf(lost, sizeof(lost), "%llu", (unsigned long long)h->dropped);
        snprintf(rows_lost, sizeof(rows_lost), "%llu", (unsigned long long)h->rows_dropped);
        log_emit(LOG_LVL_NOTICE, "history writes work again", "records_lost", lost,
                 "ended_sandboxes_lost", rows_lost, NULL);
        h->failing = false;
        h->dropped = h->rows_dropped = 0;
    }
    return 0;
}

static json_t *iso_time(int64_t ms)
{
    char buf[64];
    format_iso8601_ms(buf, sizeof(buf), ms);
    return json_string(buf);
}

/* A text column as a JSON string. What is written is UTF-8, but a record an older build wrote
 * may end in half a character: it is listed with '?' there rather than dropped. */
static json_t *column_text(sqlite3_stmt *s, int col)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    if (!t)
        return json_null();
    size_t n = (size_t)sqlite3_column_bytes(s, col);
    json_t *j = json_stringn((const char *)t, n);
    if (j)
        return j;
    char *copy = xmalloc(n + 1);
    memcpy(copy, t, n + 1);
    utf8_scrub(copy, n);
    j = json_stringn(copy, n);
    free(copy);
    return j ? j : json_string("");
}

int history_list(struct history *h, const char *sandbox_id, unsigned last_n, json_t **records,
                 struct sbx_err *err)
{
    history_flush(h, NULL);
    sqlite3_stmt *s = stmt(h, ST_LIST);
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, (int)last_n);
    json_t *arr = json_array();
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *rec =
            json_pack("{s:o, s:o, s:b, s:I, s:o, s:o, s:o}", "timestamp",
                      iso_time(sqlite3_column_int64(s, 0)), "language", column_text(s, 1),
                      "success", sqlite3_column_int(s, 2), "duration_ms",
                      (json_int_t)sqlite3_column_int64(s, 3), "code_preview", column_text(s, 4),
                      "stdout_preview", column_text(s, 5), "error", column_text(s, 6));
        json_array_insert_new(arr, 0, rec);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return db_fail(h, err, "listing executions");
    }
    *records = arr;
    return 0;
}

int64_t history_total(struct history *h, const char *sandbox_id)
{
    history_flush(h, NULL);
    sqlite3_stmt *s = stmt(h, ST_TOTAL);
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    return n;
}

/* Lets go of the queued records of one sandbox (those before its reset). */
static size_t drop_pending_of(struct history *h, const char *sandbox_id)
{
    size_t dropped = 0;
    struct pending **pp = &h->pending;
    h->pending_tail = &h->pending;
    while (*pp) {
        struct pending *p = *pp;
        if (strcmp(p->sandbox_id, sandbox_id) != 0) {
            pp = &p->next;
            h->pending_tail = pp;
            continue;
        }
        *pp = p->next;
        h->n_pending--;
        h->pending_bytes -= pending_size(p);
        free_pending(p);
        dropped++;
    }
    return dropped;
}

int history_clear(struct history *h, const char *sandbox_id, struct sbx_err *err)
{
    history_flush(h, NULL);
    /* What a failed write kept of this sandbox's records came before the reset: not after. */
    drop_pending_of(h, sandbox_id);
    sqlite3_exec(h->db, "BEGIN", NULL, NULL, NULL);
    sqlite3_stmt *s = stmt(h, ST_CLEAR_ROWS);
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    int rc = run_done(h, s, err, "clearing executions");
    if (rc == 0) {
        s = stmt(h, ST_CLEAR_SANDBOX);
        sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, (int64_t)wall_ms());
        rc = run_done(h, s, err, "restarting the session");
    }
    sqlite3_exec(h->db, rc == 0 ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int history_set_packages(struct history *h, const char *sandbox_id, const json_t *packages,
                         struct sbx_err *err)
{
    history_flush(h, NULL);
    char *text = json_dumps(packages, JSON_COMPACT);
    sqlite3_stmt *s = stmt(h, ST_PACKAGES);
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, text ? text : "[]", -1, SQLITE_STATIC);
    int rc = run_done(h, s, err, "recording packages");
    sqlite3_reset(s);
    free(text);
    return rc;
}

int history_get_sandbox(struct history *h, const char *sandbox_id, json_t **info,
                        struct sbx_err *err)
{
    history_flush(h, NULL);
    sqlite3_stmt *s = stmt(h, ST_GET);
    sqlite3_bind_text(s, 1, sandbox_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(s);
        return sbx_fail(err, ENOENT, "unknown sandbox %s", sandbox_id);
    }
    if (rc != SQLITE_ROW) {
        sqlite3_reset(s);
        return db_fail(h, err, "reading a sandbox");
    }
    const char *pk = (const char *)sqlite3_column_text(s, 6);
    json_t *packages = pk ? json_loads(pk, 0, NULL) : NULL;
    *info =
        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "owner", column_text(s, 0), "name",
                  column_text(s, 1), "profile", column_text(s, 2), "created_at",
                  iso_time(sqlite3_column_int64(s, 3)), "closed_at",
                  sqlite3_column_type(s, 4) == SQLITE_NULL ? json_null()
                                                           : iso_time(sqlite3_column_int64(s, 4)),
                  "session_start", iso_time(sqlite3_column_int64(s, 5)), "packages",
                  json_is_array(packages) ? packages : json_array());
    if (packages && !json_is_array(packages))
        json_decref(packages);
    sqlite3_reset(s);
    return 0;
}

/* Deletes, with their executions, the sandboxes that s (bound, its limit max) selects. */
static int forget_selected(struct history *h, sqlite3_stmt *s, unsigned max, size_t *purged,
                           struct sbx_err *err)
{
    *purged = 0;
    char **ids = xcalloc(max ? max : 1, sizeof(*ids));
    size_t n = 0;
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW && n < max)
        ids[n++] = xstrdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_reset(s);
    int rc = 0;
    if (step != SQLITE_ROW && step != SQLITE_DONE) {
        rc = db_fail(h, err, "finding old sandboxes");
    } else if (n) {
        sqlite3_exec(h->db, "BEGIN", NULL, NULL, NULL);
        for (size_t i = 0; i < n && rc == 0; i++) {
            s = stmt(h, ST_CLEAR_ROWS);
            sqlite3_bind_text(s, 1, ids[i], -1, SQLITE_STATIC);
            rc = run_done(h, s, err, "deleting old executions");
            if (rc == 0) {
                s = stmt(h, ST_FORGET);
                sqlite3_bind_text(s, 1, ids[i], -1, SQLITE_STATIC);
                rc = run_done(h, s, err, "deleting old sandboxes");
            }
            sqlite3_reset(s);
        }
        if (rc == 0 && sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
            rc = db_fail(h, err, "deleting old sandboxes");
        if (rc < 0)
            sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (rc == 0)
        *purged = n;
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return rc;
}

int history_purge(struct history *h, int64_t closed_before_ms, int64_t created_before_ms,
                  unsigned max, size_t *purged, struct sbx_err *err)
{
    *purged = 0;
    /* A close still queued must count, and no record may arrive for a row deleted here. */
    if (history_flush(h, err) < 0)
        return -1;
    sqlite3_stmt *s = stmt(h, ST_EXPIRED);
    sqlite3_bind_int64(s, 1, closed_before_ms);
    sqlite3_bind_int64(s, 2, created_before_ms);
    sqlite3_bind_int(s, 3, (int)max);
    return forget_selected(h, s, max, purged, err);
}

int history_purge_oldest_closed(struct history *h, unsigned max, size_t *purged,
                                struct sbx_err *err)
{
    *purged = 0;
    if (history_flush(h, err) < 0)
        return -1;
    sqlite3_stmt *s = stmt(h, ST_OLDEST_CLOSED);
    sqlite3_bind_int(s, 1, (int)max);
    return forget_selected(h, s, max, purged, err);
}

int history_used_bytes(struct history *h, uint64_t *bytes, struct sbx_err *err)
{
    sqlite3_stmt *s = stmt(h, ST_USED_BYTES);
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW)
        *bytes = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return step == SQLITE_ROW ? 0 : db_fail(h, err, "measuring the database");
}
