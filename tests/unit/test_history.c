/* The SQLite history: records, previews, retention, reset, packages, restarts, bad files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "service/history.h"

#include <sqlite3.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sbx-history-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static struct history *open_db(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct history *h = NULL;
    struct sbx_err err = {0};
    assert_int_equal(history_open(path, &h, &err), 0);
    return h;
}

static void add(struct history *h, const char *id, const char *code, bool ok)
{
    struct history_record r = {.timestamp_ms = 1700000000123,
                               .language = "python",
                               .success = ok,
                               .duration_ms = 3,
                               .code = code,
                               .stdout_text = "out",
                               .error = ok ? NULL : "E: boom"};
    struct sbx_err err = {0};
    assert_int_equal(history_add(h, id, &r, &err), 0);
}

static void records_survive_a_restart(void **state)
{
    (void)state;
    struct history *h = open_db("a/b/h.sqlite3");
    struct sbx_err err = {0};
    assert_int_equal(history_record_sandbox(h, "sb-1", "alice", "n", "standard", 1000, &err), 0);
    add(h, "sb-1", "x = 1", true);
    add(h, "sb-1", "1/0", false);
    history_close(h); /* pending records are flushed on close */
    h = open_db("a/b/h.sqlite3");
    assert_int_equal(history_total(h, "sb-1"), 2);
    json_t *recs = NULL;
    assert_int_equal(history_list(h, "sb-1", 10, &recs, &err), 0);
    assert_int_equal(json_array_size(recs), 2);
    json_t *last = json_array_get(recs, 1);
    assert_string_equal(json_string_value(json_object_get(last, "code_preview")), "1/0");
    assert_string_equal(json_string_value(json_object_get(last, "error")), "E: boom");
    assert_string_equal(json_string_value(json_object_get(last, "timestamp")),
                        "2023-11-14T22:13:20.123Z");
    json_decref(recs);
    json_t *info = NULL;
    assert_int_equal(history_get_sandbox(h, "sb-1", &info, &err), 0);
    assert_string_equal(json_string_value(json_object_get(info, "owner")), "alice");
    json_decref(info);
    assert_int_equal(history_get_sandbox(h, "sb-unknown", &info, &err), -1);
    assert_int_equal(err.code, ENOENT);
    history_close(h);
}

/* A sandbox's row is queued like its executions; whatever reads it sees it (reads flush first),
 * and a row created, used and closed within one batch comes out whole. */
static void a_sandbox_row_is_queued_and_read_back(void **state)
{
    (void)state;
    struct history *h = open_db("q.sqlite3");
    struct sbx_err err = {0};
    assert_int_equal(history_record_sandbox(h, "sb-q", "bob", "n", "tight", 5000, &err), 0);
    assert_true(history_pending(h));
    add(h, "sb-q", "a", true);
    add(h, "sb-q", "b", true);
    assert_int_equal(history_close_sandbox(h, "sb-q", 9000, &err), 0);
    json_t *info = NULL;
    assert_int_equal(history_get_sandbox(h, "sb-q", &info, &err), 0);
    assert_false(history_pending(h));
    assert_string_equal(json_string_value(json_object_get(info, "owner")), "bob");
    assert_string_equal(json_string_value(json_object_get(info, "profile")), "tight");
    assert_true(json_is_string(json_object_get(info, "closed_at")));
    json_decref(info);
    assert_int_equal(history_total(h, "sb-q"), 2);
    history_close(h);
}

static void previews_are_capped_on_a_utf8_boundary(void **state)
{
    (void)state;
    struct history *h = open_db("p.sqlite3");
    struct sbx_err err = {0};
    history_record_sandbox(h, "sb-2", "o", NULL, "standard", 1, &err);
    char *code = malloc(5001);
    for (int i = 0; i < 2500; i++)
        memcpy(code + 2 * i, "\xc3\xa9", 2); /* "é" */
    code[5000] = '\0';
    add(h, "sb-2", code, true);
    json_t *recs = NULL;
    history_list(h, "sb-2", 1, &recs, &err);
    const char *p = json_string_value(json_object_get(json_array_get(recs, 0), "code_preview"));
    assert_non_null(p); /* jansson accepted it: valid UTF-8 */
    assert_true(strlen(p) <= HISTORY_PREVIEW_MAX);
    assert_non_null(strstr(p, "\xe2\x80\xa6"));
    json_decref(recs);
    free(code);
    history_close(h);
}

static void retention_and_reset(void **state)
{
    (void)state;
    struct history *h = open_db("r.sqlite3");
    struct sbx_err err = {0};
    history_set_retention(h, 5);
    history_record_sandbox(h, "sb-3", "o", NULL, "standard", 1, &err);
    for (int i = 0; i < 12; i++) {
        char code[16];
        snprintf(code, sizeof(code), "c%d", i);
        add(h, "sb-3", code, true);
    }
    json_t *recs = NULL;
    history_list(h, "sb-3", 50, &recs, &err);
    assert_int_equal(json_array_size(recs), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 4), "code_preview")),
                        "c11");
    json_decref(recs);
    assert_int_equal(history_total(h, "sb-3"), 12);
    assert_int_equal(history_clear(h, "sb-3", &err), 0);
    assert_int_equal(history_total(h, "sb-3"), 0);
    add(h, "sb-3", "after", true);
    assert_int_equal(history_total(h, "sb-3"), 1);
    json_t *pk = json_pack("[{s:s, s:s}]", "name", "numpy", "version", "1.24.2");
    assert_int_equal(history_set_packages(h, "sb-3", pk, &err), 0);
    json_t *info = NULL;
    history_get_sandbox(h, "sb-3", &info, &err);
    assert_true(json_equal(json_object_get(info, "packages"), pk));
    json_decref(info);
    json_decref(pk);
    history_close(h);
}

static bool known(struct history *h, const char *id)
{
    json_t *info = NULL;
    struct sbx_err err = {0};
    int r = history_get_sandbox(h, id, &info, &err);
    json_decref(info);
    return r == 0;
}

static size_t records_of(struct history *h, const char *id)
{
    json_t *recs = NULL;
    struct sbx_err err = {0};
    assert_int_equal(history_list(h, id, 50, &recs, &err), 0);
    size_t n = json_array_size(recs);
    json_decref(recs);
    return n;
}

/* Closed sandboxes' histories are deleted once past the retention, and the ones never closed
 * (their server was killed) once even the longest lifetime would have ended; nothing else. */
static void closed_sandboxes_go_after_their_retention(void **state)
{
    (void)state;
    struct history *h = open_db("purge.sqlite3");
    struct sbx_err err = {0};
    static const struct {
        const char *id;
        int64_t created, closed; /* closed 0: never */
        bool stays;
    } rows[] = {
        {"closed-long-ago", 100, 1000, false}, {"closed-lately", 100, 5000, true},
        {"killed-long-ago", 50, 0, false},     {"killed-lately", 3000, 0, true},
        {"closed-queued", 100, 1500, false},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        history_record_sandbox(h, rows[i].id, "o", NULL, "standard", rows[i].created, &err);
        add(h, rows[i].id, "a", true);
        add(h, rows[i].id, "b", false);
        if (rows[i].closed && strcmp(rows[i].id, "closed-queued") != 0)
            history_close_sandbox(h, rows[i].id, rows[i].closed, &err);
    }
    assert_int_equal(history_flush(h, &err), 0);
    /* A close still waiting for the flush counts too. */
    history_close_sandbox(h, "closed-queued", 1500, &err);
    size_t purged = 99;
    assert_int_equal(history_purge(h, 2000, 2000, 10, &purged, &err), 0);
    assert_int_equal(purged, 3);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(known(h, rows[i].id), rows[i].stays);
        assert_int_equal(records_of(h, rows[i].id), rows[i].stays ? 2 : 0);
    }
    assert_int_equal(history_purge(h, 2000, 2000, 10, &purged, &err), 0);
    assert_int_equal(purged, 0);
    /* A batch at a time. */
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "old-%d", i);
        history_record_sandbox(h, id, "o", NULL, "standard", 10, &err);
        add(h, id, "x", true);
        history_close_sandbox(h, id, 20, &err);
    }
    size_t batches[] = {2, 2, 1, 0};
    for (size_t i = 0; i < sizeof(batches) / sizeof(batches[0]); i++) {
        assert_int_equal(history_purge(h, 2000, 2000, 2, &purged, &err), 0);
        assert_int_equal(purged, batches[i]);
    }
    assert_true(known(h, "closed-lately") && known(h, "killed-lately"));
    add(h, "killed-lately", "c", true);
    assert_int_equal(records_of(h, "killed-lately"), 3);
    history_close(h);
}

/* Past the size cap the sandboxes that closed first go, however recently that was; open ones
 * stay (their records are bounded by the retention count). */
static void past_the_size_cap_the_sandboxes_closed_first_go(void **state)
{
    (void)state;
    struct history *h = open_db("cap.sqlite3");
    struct sbx_err err = {0};
    char out[2049];
    memset(out, 'o', sizeof(out) - 1);
    out[sizeof(out) - 1] = '\0';
    static const struct {
        const char *id;
        int64_t closed; /* 0: open */
    } rows[] = {{"third", 3000}, {"first", 1000}, {"open", 0}, {"second", 2000}};
    uint64_t empty = 0, used = 0, after = 0;
    assert_int_equal(history_used_bytes(h, &empty, &err), 0);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        history_record_sandbox(h, rows[i].id, "o", NULL, "standard", 100, &err);
        for (int k = 0; k < 20; k++) {
            struct history_record r = {.timestamp_ms = 1700000000123,
                                       .language = "python",
                                       .success = true,
                                       .code = "print('o' * 2048)",
                                       .stdout_text = out};
            assert_int_equal(history_add(h, rows[i].id, &r, &err), 0);
        }
        if (rows[i].closed)
            history_close_sandbox(h, rows[i].id, rows[i].closed, &err);
    }
    assert_int_equal(history_flush(h, &err), 0);
    assert_int_equal(history_used_bytes(h, &used, &err), 0);
    assert_true(used > empty + 4 * 20 * 2048); /* the previews are in */
    size_t purged = 0;
    assert_int_equal(history_purge_oldest_closed(h, 2, &purged, &err), 0);
    assert_int_equal(purged, 2);
    assert_false(known(h, "first"));
    assert_false(known(h, "second"));
    assert_true(known(h, "third") && known(h, "open"));
    assert_int_equal(records_of(h, "third"), 20);
    assert_int_equal(history_used_bytes(h, &after, &err), 0);
    assert_true(after < used - 2 * 20 * 2048); /* their pages are free for new rows */
    assert_int_equal(history_purge_oldest_closed(h, 10, &purged, &err), 0);
    assert_int_equal(purged, 1);
    assert_int_equal(history_purge_oldest_closed(h, 10, &purged, &err), 0);
    assert_int_equal(purged, 0);
    assert_true(known(h, "open"));
    assert_int_equal(records_of(h, "open"), 20);
    history_close(h);
}

/* A database written by the previous schema (version 1) gains the purge's index. */
static void a_version_1_database_is_upgraded(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/v1.sqlite3", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT,"
                     " profile TEXT, created_ms INTEGER NOT NULL, closed_ms INTEGER,"
                     " session_start_ms INTEGER NOT NULL, packages TEXT NOT NULL DEFAULT '[]',"
                     " seq INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0);"
                     "CREATE TABLE executions (sandbox_id TEXT NOT NULL, seq INTEGER NOT NULL,"
                     " timestamp_ms INTEGER NOT NULL, language TEXT, success INTEGER NOT NULL,"
                     " duration_ms INTEGER, code_preview TEXT, stdout_preview TEXT, error TEXT,"
                     " PRIMARY KEY (sandbox_id, seq)) WITHOUT ROWID;"
                     "INSERT INTO sandboxes (id, owner, created_ms, closed_ms, session_start_ms)"
                     " VALUES ('sb-v1', 'o', 1, 2, 1);"
                     "PRAGMA user_version = 1;",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    struct history *h = open_db("v1.sqlite3");
    assert_true(known(h, "sb-v1"));
    size_t purged = 0;
    struct sbx_err err = {0};
    assert_int_equal(history_purge(h, 2000, 2000, 10, &purged, &err), 0);
    assert_int_equal(purged, 1);
    history_close(h);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                                        "AND name = 'sandboxes_by_end'",
                                        -1, &s, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), 1);
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* One flush with records of several sandboxes interleaved (and of one the table does not
 * know): each sandbox's records keep their order and numbering, and the retention holds. */
static void a_batch_of_several_sandboxes_keeps_each_order(void **state)
{
    (void)state;
    struct history *h = open_db("g.sqlite3");
    struct sbx_err err = {0};
    history_set_retention(h, 4);
    history_record_sandbox(h, "sb-b", "o", NULL, "standard", 1, &err);
    history_record_sandbox(h, "sb-a", "o", NULL, "standard", 1, &err);
    for (int i = 0; i < 7; i++) {
        char code[16];
        snprintf(code, sizeof(code), "a%d", i);
        add(h, "sb-a", code, true);
        snprintf(code, sizeof(code), "b%d", i);
        add(h, "sb-b", code, i % 2 == 0);
        add(h, "sb-gone", "x", true);
    }
    assert_true(history_pending(h));
    assert_int_equal(history_flush(h, &err), 0);
    assert_false(history_pending(h));
    static const char *const want[2][4] = {{"a3", "a4", "a5", "a6"}, {"b3", "b4", "b5", "b6"}};
    for (int k = 0; k < 2; k++) {
        const char *id = k ? "sb-b" : "sb-a";
        json_t *recs = NULL;
        assert_int_equal(history_list(h, id, 50, &recs, &err), 0);
        assert_int_equal(json_array_size(recs), 4);
        for (size_t i = 0; i < 4; i++)
            assert_string_equal(
                json_string_value(json_object_get(json_array_get(recs, i), "code_preview")),
                want[k][i]);
        if (k)
            assert_false(json_is_true(json_object_get(json_array_get(recs, 0), "success")));
        json_decref(recs);
        assert_int_equal(history_total(h, id), 7);
    }
    assert_int_equal(history_total(h, "sb-gone"), 0);
    history_close(h);
}

/* Records wait for the service's flush, but never without bound: a pile of small ones
 * writes through at HISTORY_PENDING_MAX, a pile of large ones at HISTORY_PENDING_BYTES. */
static void pending_records_are_bounded_in_count_and_bytes(void **state)
{
    (void)state;
    struct history *h = open_db("b.sqlite3");
    struct sbx_err err = {0};
    history_record_sandbox(h, "sb-5", "o", NULL, "standard", 1, &err);
    history_set_retention(h, 1u << 20);
    for (int i = 0; i < HISTORY_PENDING_MAX - 1; i++)
        add(h, "sb-5", "x=1", true);
    assert_true(history_pending(h));
    add(h, "sb-5", "x=1", true); /* the last one that fits: all of them are written */
    assert_false(history_pending(h));
    char *big = malloc(HISTORY_PREVIEW_MAX + 1);
    memset(big, 'a', HISTORY_PREVIEW_MAX);
    big[HISTORY_PREVIEW_MAX] = '\0';
    int n = 0;
    do {
        add(h, "sb-5", big, true);
        n++;
    } while (history_pending(h));
    /* Written through by bytes, long before the count bound. */
    assert_true(n < HISTORY_PENDING_MAX / 4);
    assert_true((size_t)n * HISTORY_PREVIEW_MAX >= HISTORY_PENDING_BYTES / 2);
    assert_int_equal(history_total(h, "sb-5"), HISTORY_PENDING_MAX + n);
    free(big);
    history_close(h);
}

static void corrupt_or_unwritable_gives_a_clear_error(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/corrupt.sqlite3", dir);
    FILE *f = fopen(path, "w");
    fputs("this is not a database, just text that is long enough to look like a header....", f);
    fclose(f);
    struct history *h = NULL;
    struct sbx_err err = {0};
    assert_int_equal(history_open(path, &h, &err), -1);
    assert_null(h);
    assert_non_null(strstr(err.msg, "history database"));
    snprintf(path, sizeof(path), "/proc/sbx-no-such-dir/h.sqlite3");
    memset(&err, 0, sizeof(err));
    assert_int_equal(history_open(path, &h, &err), -1);
    assert_true(err.msg[0] != '\0');
}

/* Sets the file size limit (a write at or past it fails, as on a full disk), or restores it. */
static void file_size_limit(bool on)
{
    static struct rlimit saved;
    if (on) {
        signal(SIGXFSZ, SIG_IGN);
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
        struct rlimit tiny = {.rlim_cur = 1, .rlim_max = saved.rlim_max};
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &tiny), 0);
    } else {
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
    }
}

/* A write that fails loses nothing: the sandbox's row and the records stay queued, the reason
 * given is SQLite's own, and a flush once HISTORY_RETRY_MS has passed writes them all. Past the
 * queue's bounds while it fails, the oldest records go (memory stays bounded). */
static void a_failed_write_keeps_what_was_queued_for_the_next_try(void **state)
{
    (void)state;
    struct history *h = open_db("full.sqlite3");
    struct sbx_err err = {0};
    history_record_sandbox(h, "sb-a", "o", NULL, "standard", 1, &err);
    add(h, "sb-a", "first", true);
    assert_int_equal(history_flush(h, &err), 0);

    file_size_limit(true);
    history_record_sandbox(h, "sb-b", "o", NULL, "standard", 2, &err);
    add(h, "sb-b", "made while full", true);
    add(h, "sb-a", "second", true);
    history_record_sandbox(h, "sb-c", "o", NULL, "standard", 3, &err);
    add(h, "sb-c", "before its reset", true);
    assert_int_equal(history_flush(h, &err), -1);
    file_size_limit(false);
    /* Before the fix: "cannot rollback - no transaction is active". */
    assert_null(strstr(err.msg, "no transaction"));
    assert_non_null(strstr(err.msg, "history database: "));
    assert_true(history_pending(h));
    /* Within the retry wait nothing is tried (a full disk is not hammered). */
    memset(&err, 0, sizeof(err));
    assert_int_equal(history_flush(h, &err), -1);
    assert_true(err.msg[0]);
    /* A reset meanwhile: what was kept of that sandbox came before it, and is not written. */
    assert_int_equal(history_clear(h, "sb-c", &err), 0);
    usleep((HISTORY_RETRY_MS + 50) * 1000);
    assert_int_equal(history_flush(h, &err), 0);
    assert_false(history_pending(h));
    assert_int_equal(history_total(h, "sb-a"), 2);
    assert_int_equal(history_total(h, "sb-b"), 1);
    assert_int_equal(history_total(h, "sb-c"), 0);
    json_t *recs = NULL;
    assert_int_equal(history_list(h, "sb-b", 10, &recs, &err), 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(recs, 0), "code_preview")),
                        "made while full");
    json_decref(recs);

    file_size_limit(true);
    struct history_record r = {
        .timestamp_ms = 1, .language = "python", .success = true, .code = "x"};
    for (int i = 0; i < HISTORY_PENDING_MAX + 10; i++)
        history_add(h, "sb-a", &r, &err);
    file_size_limit(false);
    usleep((HISTORY_RETRY_MS + 50) * 1000);
    assert_int_equal(history_flush(h, &err), 0);
    assert_int_equal(history_total(h, "sb-a"), 2 + HISTORY_PENDING_MAX);
    history_close(h);
}

/* A database another process holds locked (a second server on the same state directory, a
 * backup) fails the numbering of the records, not only their insert: they stay queued like
 * those of any failed write, instead of being taken for a vanished sandbox's and dropped. */
static void records_of_a_locked_database_are_kept(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/locked.sqlite3", dir);
    struct history *h = open_db("locked.sqlite3");
    struct sbx_err err = {0};
    history_record_sandbox(h, "sb-l", "o", NULL, "standard", 1, &err);
    assert_int_equal(history_flush(h, &err), 0);

    sqlite3 *other = NULL;
    assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    add(h, "sb-l", "while locked", true);
    /* The loop waits for the lock HISTORY_BUSY_MS, not seconds (bounded loosely: a liveness
     * check, not a timing one). */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(history_flush(h, &err), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long waited_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (waited_ms >= 1000)
        fail_msg("a locked database held the flush %ld ms", waited_ms);
    assert_non_null(strstr(err.msg, "history database: "));
    assert_true(history_pending(h));
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(other);

    usleep((HISTORY_RETRY_MS + 50) * 1000);
    assert_int_equal(history_flush(h, &err), 0);
    assert_int_equal(history_total(h, "sb-l"), 1);
    history_close(h);
}

/* -1 for a sandbox with no row, 0 for one that has not ended, 1 for one that has. */
static int ended(struct history *h, const char *id)
{
    json_t *info = NULL;
    struct sbx_err err = {0};
    if (history_get_sandbox(h, id, &info, &err) < 0)
        return -1;
    int closed = !json_is_null(json_object_get(info, "closed_at"));
    json_decref(info);
    return closed;
}

/* While writes fail, sandboxes created and closed meanwhile cost one queued row each, and past
 * HISTORY_ROWS_MAX the oldest of those that ended go; a live sandbox's row and the end of one
 * written before are kept whatever the churn. */
static void rows_queued_while_writes_fail_are_bounded(void **state)
{
    (void)state;
    struct history *h = open_db("rows.sqlite3");
    struct sbx_err err = {0};
    history_record_sandbox(h, "before", "o", NULL, "standard", 1, &err);
    assert_int_equal(history_flush(h, &err), 0);

    file_size_limit(true);
    history_record_sandbox(h, "live", "o", NULL, "standard", 2, &err);
    assert_int_equal(history_flush(h, &err), -1);
    history_close_sandbox(h, "before", 3, &err);
    char id[32];
    int churn = HISTORY_ROWS_MAX + 100;
    for (int i = 0; i < churn; i++) {
        snprintf(id, sizeof(id), "churn-%d", i);
        history_record_sandbox(h, id, "o", NULL, "standard", 10 + i, &err);
        if (i < 2)
            add(h, id, "goes with its row", true); /* dropped with it, and counted */
        history_close_sandbox(h, id, 20 + i, &err);
    }
    file_size_limit(false);
    usleep((HISTORY_RETRY_MS + 50) * 1000);
    assert_int_equal(history_flush(h, &err), 0);

    assert_int_equal(ended(h, "before"), 1);
    assert_int_equal(ended(h, "live"), 0);
    assert_int_equal(history_total(h, "churn-0"), 0);
    /* The rows kept: the live one, the close of "before", and the newest ended ones. */
    int kept_from = churn - (HISTORY_ROWS_MAX - 2);
    snprintf(id, sizeof(id), "churn-%d", kept_from - 1);
    assert_int_equal(ended(h, id), -1);
    snprintf(id, sizeof(id), "churn-%d", kept_from);
    assert_int_equal(ended(h, id), 1);
    snprintf(id, sizeof(id), "churn-%d", churn - 1);
    assert_int_equal(ended(h, id), 1);
    history_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(records_survive_a_restart),
        cmocka_unit_test(a_sandbox_row_is_queued_and_read_back),
        cmocka_unit_test(previews_are_capped_on_a_utf8_boundary),
        cmocka_unit_test(retention_and_reset),
        cmocka_unit_test(closed_sandboxes_go_after_their_retention),
        cmocka_unit_test(past_the_size_cap_the_sandboxes_closed_first_go),
        cmocka_unit_test(a_version_1_database_is_upgraded),
        cmocka_unit_test(a_batch_of_several_sandboxes_keeps_each_order),
        cmocka_unit_test(pending_records_are_bounded_in_count_and_bytes),
        cmocka_unit_test(corrupt_or_unwritable_gives_a_clear_error),
        cmocka_unit_test(a_failed_write_keeps_what_was_queued_for_the_next_try),
        cmocka_unit_test(rows_queued_while_writes_fail_are_bounded),
        cmocka_unit_test(records_of_a_locked_database_are_kept),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
