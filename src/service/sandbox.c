/* Sandbox lifecycle: spawn a persistent jail with the Python driver in it, watch its control
 * channel, output pipes and workload status on the loop, restart a dead interpreter, enforce
 * the lifecycle limits, and keep a warm pool. */
#include "sandbox.h"

#include "egress_proxy.h"
#include "files.h"
#include "history.h"
#include "jail/features.h"
#include "jail/jail.h"
#include "log.h"
#include "protocol/mcp.h"
#include "metrics.h"
#include "packages.h"
#include "resolver.h"
#include "runtime_embed.h"
#include "service/loop.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define DRIVER_READY_MS  30000 /* a driver that is not ready by then is broken */
#define REFILL_RETRY_MS  10000 /* after a failed warm-pool refill */
#define SETUP_WAIT_MS    5000  /* the longest the loop waits for a sandbox's setup */
#define MAX_QUICK_DEATHS 3     /* consecutive deaths before ready: the sandbox is broken */
/* Frames that answer no request, in a row: the driver sends at most one a request (a late
 * result, or an error for one it does not know). More is sandbox code writing to its fd 4,
 * and parsing an endless stream of them would keep the server's loop busy. */
#define MAX_STRAY_FRAMES 64
/* What a new interpreter needs to start (about 10 MiB here), with a margin. */
#define INTERPRETER_ROOM (24ull << 20)
/* A reset of a sandbox whose interpreter kept dying: time for the processes it killed to go. */
#define REVIVE_DELAY_MS   50
#define SWEEP_INTERVAL_MS 5000

static json_t *string_array(const struct string_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; i < l->len; i++)
        json_array_append_new(a, json_string(l->items[i]));
    return a;
}

const char *sandbox_state_name(enum sandbox_state st)
{
    static const char *const names[] = {
        [SBX_STARTING] = "starting",     [SBX_READY] = "ready",   [SBX_BUSY] = "busy",
        [SBX_RESTARTING] = "restarting", [SBX_BROKEN] = "broken",
    };
    return names[st];
}

void sandbox_host_ids(const struct sandbox *sb, uid_t *uid, gid_t *gid)
{
    /* No jail, no files to reach: this process's own ids, which gain nothing. */
    *uid = sb->jail ? sb->jail->host_uid : geteuid();
    *gid = sb->jail ? sb->jail->host_gid : getegid();
}

static void settle_setup(struct sandbox *sb);
static void settle_spawn(struct sandbox *sb, bool need_jail);
static void abandon_setup(struct sandbox *sb);
static void pause_refill(struct sandbox_service *svc);
static void schedule_refill(struct sandbox_service *svc);

int sandbox_root_fd(struct sandbox *sb)
{
    return sb->jail && !sandbox_setting_up(sb) ? sb->jail->root_fd : -1;
}

bool sandbox_setting_up(const struct sandbox *sb)
{
    return sb->spawning || sb->setup_w;
}

/* A setup someone waits for gets setup_wait_ms: one that has not ended by then never will (a
 * stalled mount source, a stopped init). A jail still being begun gets another while. */
static void on_setup_wait_timeout(struct ev_loop *loop, void *data);

static void arm_setup_wait(struct sandbox *sb)
{
    sb->setup_wait_timer =
        ev_timer_add(sb->svc->loop, sb->svc->setup_wait_ms, on_setup_wait_timeout, sb);
}

static void on_setup_wait_timeout(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sandbox *sb = data;
    sb->setup_wait_timer = NULL;
    if (sb->setup_w)
        abandon_setup(sb);
    else if (sb->spawning)
        arm_setup_wait(sb);
}

void sandbox_wait_setup(struct sandbox *sb, struct sandbox_wait *w, ev_timer_cb fn, void *data)
{
    *w = (struct sandbox_wait){.task = {.cb = fn, .data = data}, .loop = sb->svc->loop};
    if (!sandbox_setting_up(sb) || sb->closing) {
        ev_task_post(w->loop, &w->task);
        return;
    }
    w->sb = sb;
    w->next = sb->setup_waits;
    sb->setup_waits = w;
    if (sb->spawning)
        spawner_hurry(sb->svc->spawner, &sb->spawn_job);
    if (!sb->setup_wait_timer)
        arm_setup_wait(sb);
}

void sandbox_wait_cancel(struct sandbox_wait *w)
{
    struct sandbox *sb = w->sb;
    if (sb) {
        struct sandbox_wait **pp = &sb->setup_waits;
        while (*pp != w)
            pp = &(*pp)->next;
        *pp = w->next;
        w->sb = NULL;
        /* Nobody waits any more: the setup has the ready timeout, as one nobody asked for. */
        if (!sb->setup_waits)
            ev_timer_clear(&sb->setup_wait_timer);
    }
    ev_task_cancel(w->loop, &w->task);
}

/* The setup has ended, or never will: whoever waited for it goes on, from the loop. */
static void wake_setup_waits(struct sandbox *sb)
{
    ev_timer_clear(&sb->setup_wait_timer);
    while (sb->setup_waits) {
        struct sandbox_wait *w = sb->setup_waits;
        sb->setup_waits = w->next;
        w->sb = NULL;
        ev_task_post(w->loop, &w->task);
    }
}

/* The root for a file tool, or -1 and why there is none: the reason a sandbox broke says more
 * than files.c can. The tools wait for a setup first (tool_wait_for_setup); what comes here
 * during one (a resources/read, a link) is told so rather than held, with the loop. */
static int root_for_files(struct sandbox *sb, struct sbx_err *err)
{
    if (sandbox_setting_up(sb))
        return sbx_fail(err, EAGAIN,
                        "sandbox %s is still starting: its files are there once its setup has "
                        "ended, in a moment",
                        sb->id);
    /* One that failed to start may have a root (its egress proxy failed, say): nothing goes
     * there, as it would be lost with the sandbox. */
    if (sb->failed_start)
        return sbx_fail(err, ENOENT, "sandbox %s has no files: %s", sb->id, sb->broken_reason);
    int fd = sandbox_root_fd(sb);
    if (fd < 0)
        sbx_fail(err, ENOENT, "sandbox %s has no files: %s", sb->id,
                 sb->state == SBX_BROKEN ? sb->broken_reason : "it is not running");
    return fd;
}

bool sandbox_oom_since_last_look(struct sandbox *sb, bool driver_died, uint64_t peak)
{
    if (!sb->jail || !(driver_died || peak + (1u << 20) >= sb->profile->memory_bytes))
        return false;
    uint64_t kills = jail_oom_kills(sb->jail);
    bool fired = kills > sb->oom_kills_seen;
    sb->oom_kills_seen = kills;
    return fired;
}

/* The sandbox user's ids on the host, for file access as that user. */
static struct fs_ids user_ids(const struct sandbox *sb)
{
    struct fs_ids ids;
    sandbox_host_ids(sb, &ids.uid, &ids.gid);
    return ids;
}

int sandbox_open_file(struct sandbox *sb, const char *canon, int flags, struct sbx_err *err)
{
    struct fs_ids user = user_ids(sb);
    int root = root_for_files(sb, err);
    return root < 0 ? -1 : files_open_as(root, canon, flags, user.uid, user.gid, err);
}

int sandbox_read_file(struct sandbox *sb, const char *canon, uint64_t offset, uint64_t length,
                      uint64_t max, char **data, size_t *len, uint64_t *size, struct sbx_err *err)
{
    struct fs_ids user = user_ids(sb);
    int root = root_for_files(sb, err);
    return root < 0 ? -1
                    : files_read(root, canon, user.uid, user.gid, offset, length, max, data, len,
                                 size, err);
}

int sandbox_list_files(struct sandbox *sb, const char *canon, bool recursive, size_t skip,
                       size_t max_entries, json_t **entries, bool *truncated, struct sbx_err *err)
{
    struct fs_ids user = user_ids(sb);
    int root = root_for_files(sb, err);
    return root < 0 ? -1
                    : files_list(root, canon, user.uid, user.gid, recursive, skip, max_entries,
                                 entries, truncated, err);
}

static bool metadata_name_of(const char *dist_info, void *ctx, char *buf, size_t size)
{
    char canon[FILES_PATH_MAX];
    if (snprintf(canon, sizeof(canon), "%s/METADATA", dist_info) >= (int)sizeof(canon))
        return false;
    char *data = NULL;
    size_t len = 0;
    uint64_t file_size = 0;
    struct sbx_err err = {0};
    /* The header comes first, Name second: its start is enough. */
    if (sandbox_read_file(ctx, canon, 0, 4096, 4096, &data, &len, &file_size, &err) < 0)
        return false;
    bool ok = packages_metadata_name(data, len, buf, size);
    free(data);
    return ok;
}

void sandbox_sync_packages(struct sandbox *sb)
{
    json_t *entries = NULL;
    bool truncated = false;
    struct sbx_err err = {0};
    if (sb->oneshot || sb->closing)
        return;
    if (sandbox_list_files(sb, PACKAGES_DIR, false, 0, 4 * PACKAGES_LIST_MAX, &entries, &truncated,
                           &err) < 0) {
        if (err.code != ENOENT)
            return; /* the files cannot be read now: the list stays as it was */
        entries = json_array();
    }
    if (truncated) { /* a listing cut short would drop what it did not reach */
        json_decref(entries);
        return;
    }
    json_t *now = packages_on_disk(sb->packages, entries, metadata_name_of, sb);
    json_decref(entries);
    if (json_equal(now, sb->packages)) {
        json_decref(now);
        return;
    }
    json_decref(sb->packages);
    sb->packages = now;
    if (sb->svc->history && history_set_packages(sb->svc->history, sb->id, sb->packages, &err) < 0)
        log_emit(LOG_LVL_WARNING, "history write failed", "error", err.msg, NULL);
    sandbox_history_changed(sb);
}

struct charged_write {
    struct jail *jail;
    bool oom_killed;
};

static int write_charged(int fd, const void *data, size_t len, void *ctx, struct sbx_err *err)
{
    struct charged_write *w = ctx;
    return jail_write_charged(w->jail, fd, data, len, &w->oom_killed, err);
}

int sandbox_write_file(struct sandbox *sb, const char *canon, const void *data, size_t len,
                       struct sbx_err *err)
{
    /* A static guard checks the cell, not the modules it imports, so only pip (install_packages)
     * puts modules where they import from; the workspace itself is not on the path there. */
    size_t pl = strlen(PACKAGES_DIR);
    if (sb->profile->static_guard && strncmp(canon, PACKAGES_DIR, pl) == 0 &&
        (canon[pl] == '/' || canon[pl] == '\0'))
        return sbx_fail(err, EACCES,
                        "%s: not written: profile %s checks code with a static guard, which does "
                        "not read the modules a cell imports, and " PACKAGES_DIR
                        " is where they import from; install_packages installs there",
                        canon, sb->profile->name);
    struct fs_ids user = user_ids(sb);
    int root_fd = root_for_files(sb, err);
    if (root_fd < 0)
        return -1;
    struct charged_write w = {.jail = sb->jail};
    if (files_write(root_fd, canon, data, len, user.uid, user.gid, write_charged, &w, err) == 0)
        return 0;
    /* The writer's own death is no run's: the next result must not report it. */
    if (w.oom_killed)
        sb->oom_kills_seen++;
    if (err->code == ENOMEM) {
        char files[160];
        sandbox_memory_in_files(sb, files, sizeof(files));
        sbx_fail(err, ENOMEM,
                 "%s: not written: it does not fit in the sandbox's %llu MiB memory limit%s", canon,
                 (unsigned long long)(sb->profile->memory_bytes >> 20),
                 files[0] ? files : " (files in /workspace, /tmp and /dev/shm are memory)");
    }
    return -1;
}

uint64_t sandbox_fs_used_bytes(struct sandbox *sb, const char *dir)
{
    int root = sandbox_root_fd(sb); /* none during the setup: nothing is there yet */
    if (root < 0)
        return 0;
    struct sbx_err err = {0};
    cleanup_fd int fd = files_open(root, dir, O_RDONLY | O_DIRECTORY, &err);
    struct statfs st;
    if (fd < 0 || fstatfs(fd, &st) < 0)
        return 0;
    return (uint64_t)(st.f_blocks - st.f_bfree) * (uint64_t)st.f_bsize;
}

static uint64_t files_memory_bytes(struct sandbox *sb)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < FILES_N_AREAS; i++)
        sum += sandbox_fs_used_bytes(sb, files_areas[i]);
    return sum;
}

void sandbox_memory_in_files(struct sandbox *sb, char *buf, size_t len)
{
    uint64_t held = files_memory_bytes(sb);
    buf[0] = '\0';
    if (held >= sb->profile->memory_bytes / 4)
        snprintf(buf, len,
                 ", of which files in /workspace, /tmp and /dev/shm hold %llu MiB: files there "
                 "are memory; delete some, or reset_sandbox with clear_files",
                 (unsigned long long)(held >> 20));
}

static void new_id(char *buf, size_t size)
{
    unsigned char r[6];
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        uint64_t t = now_ns();
        memcpy(r, &t, sizeof(r));
    }
    snprintf(buf, size, "sb-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

static void req_clear(struct sandbox *sb)
{
    ev_unwatch(sb->req_w);
    sb->req_w = NULL;
    free(sb->req_buf);
    sb->req_buf = NULL;
    sb->req_len = sb->req_off = 0;
}

/* Writes what fits; returns the bytes taken, or -errno (EPIPE: the driver is gone). */
static ssize_t req_write(struct sandbox *sb, const char *data, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(sb->req_fd, data + done, len - done);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        return -errno;
    }
    return (ssize_t)done;
}

static void on_req_writable(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    struct sandbox *sb = data;
    ssize_t n = req_write(sb, sb->req_buf + sb->req_off, sb->req_len - sb->req_off);
    if (n < 0) {
        /* The driver is gone; its status record arrives and ends what was running. */
        req_clear(sb);
        jail_workload_kill(sb->jail);
        return;
    }
    sb->req_off += (size_t)n;
    if (sb->req_off == sb->req_len)
        req_clear(sb);
}

/* Requests never block the loop: what the pipe has no room for (a large program) waits here
 * and goes out as the driver reads. A wedged driver is the deadline timer's business. */
static int req_send(struct sandbox *sb, const char *data, size_t len)
{
    if (!sb->req_buf) {
        ssize_t n = req_write(sb, data, len);
        if (n < 0)
            return (int)n;
        data += n;
        len -= (size_t)n;
        if (!len)
            return 0;
    }
    sb->req_buf = xrealloc(sb->req_buf, sb->req_len + len);
    memcpy(sb->req_buf + sb->req_len, data, len);
    sb->req_len += len;
    if (!sb->req_w) {
        struct sbx_err err = {0};
        sb->req_w = ev_watch(sb->svc->loop, sb->req_fd, EPOLLOUT, on_req_writable, sb, &err);
        if (!sb->req_w) {
            req_clear(sb);
            return -ENOMEM;
        }
    }
    return 0;
}

int sandbox_send(struct sandbox *sb, json_t *frame)
{
    char *buf = NULL;
    size_t len = 0;
    int r = channel_encode(frame, &buf, &len);
    json_decref(frame);
    if (r < 0)
        return -ENOMEM;
    r = req_send(sb, buf, len);
    free(buf);
    return r;
}

static json_t *init_frame(struct sandbox *sb)
{
    json_t *guard = json_null();
    if (sb->profile->static_guard)
        guard = json_pack("{s:o, s:o, s:o}", "modules", string_array(&sb->svc->cfg->guard_modules),
                          "calls", string_array(&sb->svc->cfg->guard_calls), "attributes",
                          string_array(&sb->svc->cfg->guard_attributes));
    /* Without a cgroup the server cannot read the CPU time and memory peak: the driver reports
     * its own. */
    uint64_t text_cap = sb->svc->cfg->output_cap_bytes;
    if (text_cap > CHANNEL_MAX_TEXT_BYTES)
        text_cap = CHANNEL_MAX_TEXT_BYTES;
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:i, s:i, s:I, s:s, s:b}", "op", "init",
                     "workspace", "/workspace", "packages_dir", PACKAGES_DIR, "profile",
                     sb->profile->name, "guard", guard, "max_images", CHANNEL_MAX_IMAGES,
                     "max_image_bytes", CHANNEL_MAX_IMAGE_BYTES, "max_files", CHANNEL_MAX_FILES,
                     "max_scan_files", CHANNEL_SCAN_FILES, "max_text_bytes", (json_int_t)text_cap,
                     "figures_dir", "/workspace/.mcp", "report_usage", sb->jail->cg == NULL);
}

/* Sends the driver (bytecode and source), then its configuration; all wait in the pipe (or the
 * queue) until the interpreter reads them. */
static int start_driver(struct sandbox *sb)
{
    struct iovec pieces[RUNTIME_DRIVER_PIECES];
    runtime_python_driver_frames(pieces);
    for (size_t i = 0; i < RUNTIME_DRIVER_PIECES; i++) {
        int r = req_send(sb, pieces[i].iov_base, pieces[i].iov_len);
        if (r < 0)
            return r;
    }
    return sandbox_send(sb, init_frame(sb));
}

/* ---- fd callbacks ---- */

static void mark_broken(struct sandbox *sb, const char *why)
{
    /* Whatever broke it last, a reset can no longer just start an interpreter; one broken
     * only for want of one (init died meanwhile, say) is told the new reason, not that way. */
    bool was_revivable = sb->broken_revivable;
    sb->broken_revivable = sb->broken_for_room = false;
    if (sb->state == SBX_BROKEN && !was_revivable)
        return;
    snprintf(sb->broken_reason, sizeof(sb->broken_reason), "%s", why);
    sb->state = SBX_BROKEN;
    sandbox_update_gauges(sb->svc); /* a pooled one is ready no more */
    log_emit(LOG_LVL_WARNING, "sandbox broken", "sandbox", sb->id, "reason", why, NULL);
    exec_fail_all(sb, why);
}

/* The jail could not be made, its setup failed, or its first interpreter was late: nothing will
 * run in this sandbox. A default sandbox is replaced by the owner's next call without an id that
 * works in it (sandbox_lookup_to_work); create_run_close's goes with its execution. */
static void mark_failed_start(struct sandbox *sb, const char *msg)
{
    char why[sizeof(sb->broken_reason)];
    snprintf(why, sizeof(why), "%.110s%s", msg,
             sb->is_default ? " (the next call without a sandbox_id starts a new default sandbox)"
             : sb->oneshot  ? ""
                            : " (close this sandbox and create another)");
    sb->failed_start = true;
    mark_broken(sb, why);
}

/* A setup that has not ended in time never will (a stalled mount source, a stopped init):
 * nothing may wait for it from now on, or the loop would stall with it. */
static void abandon_setup(struct sandbox *sb)
{
    ev_unwatch(sb->setup_w);
    sb->setup_w = NULL;
    jail_kill(sb->jail);
    if (sb->pooled)
        pause_refill(sb->svc);
    mark_failed_start(sb, "the sandbox's setup did not finish in time");
    wake_setup_waits(sb);
}

static void on_ready_timeout(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sandbox *sb = data;
    sb->start_timer = NULL;
    if (sb->setup_w)
        abandon_setup(sb);
    else if (sb->state == SBX_STARTING) /* its first interpreter: nothing has run there */
        mark_failed_start(sb, "the Python interpreter did not start in time");
    else
        mark_broken(sb, "the Python interpreter did not start in time");
}

/* Whether the frame was one the service waits for: the driver's ready as it starts, or the
 * running execution's result. */
static bool handle_frame(struct sandbox *sb, json_t *frame)
{
    const char *op = json_string_value(json_object_get(frame, "op"));
    if (op && strcmp(op, "ready") == 0 &&
        (sb->state == SBX_STARTING || sb->state == SBX_RESTARTING)) {
        ev_timer_clear(&sb->start_timer);
        sb->restarts = 0;
        const char *loaded = json_string_value(json_object_get(frame, "driver"));
        if (loaded && strcmp(loaded, "source") == 0 && log_rate_take(&sb->log_rate, sb->id))
            log_emit(LOG_LVL_INFO,
                     "the sandbox's Python is not the build's: the driver was compiled from "
                     "source, which leaves each interpreter about 0.5 MiB larger (rebuild to fix)",
                     "sandbox", sb->id, "python",
                     json_string_value(json_object_get(frame, "python")), NULL);
        if (sb->state == SBX_STARTING || sb->state == SBX_RESTARTING) {
            sb->state = SBX_READY;
            sandbox_update_gauges(sb->svc);
            exec_start_next(sb);
        }
        return true;
    }
    return exec_on_frame(sb, frame);
}

/* Stops the driver whose channel carried what no driver sends: the sandbox's code wrote to
 * its fd 4 (or the driver is broken). Everything in the sandbox goes, and it starts again. */
static void poison_channel(struct sandbox *sb, const char *why)
{
    if (log_rate_take(&sb->log_rate, sb->id))
        log_emit(LOG_LVL_WARNING, why, "sandbox", sb->id, NULL);
    channel_decoder_reset(&sb->dec);
    sb->channel_poisoned = true;
    jail_workload_kill(sb->jail);
}

static void on_channel(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    struct sandbox *sb = data;
    /* A frame means the driver runs, so its setup has ended: take that first, whatever order
     * the loop reports the two in. */
    settle_setup(sb);
    if (sb->closing)
        return;
    char buf[65536];
    /* Sandbox code can write to fd 4 too: a bounded bite per turn, like the output pipes. */
    for (int bites = 0; bites < 16; bites++) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            /* A bad stream's rest is dropped until the restart. */
            if (!sb->channel_poisoned) {
                if (channel_feed(&sb->dec, buf, (size_t)n) < 0)
                    break;
                json_t *frame;
                int r;
                while (!sb->closing && !sb->channel_poisoned &&
                       (r = channel_next(&sb->dec, &frame)) != 0) {
                    if (r < 0) {
                        /* A corrupt channel means a compromised or broken driver: replace it. */
                        poison_channel(sb, "bad frame from the driver; restarting it");
                        break;
                    }
                    if (handle_frame(sb, frame))
                        sb->stray_frames = 0;
                    else if (++sb->stray_frames > MAX_STRAY_FRAMES)
                        poison_channel(sb, "frames no request asked for flood the channel; "
                                           "restarting the driver");
                    json_decref(frame);
                }
                if (sb->closing)
                    return;
            }
            /* A short read emptied the pipe; the (level-triggered) loop calls again when
             * more comes, so no read is spent to learn EAGAIN. */
            if ((size_t)n < sizeof(buf))
                break;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {
            /* Every writer is gone (init died): a hang-up stays readable, so stop watching. */
            ev_unwatch(sb->chan_w);
            sb->chan_w = NULL;
        }
        break;
    }
    (void)events;
}

/* Reads at most limit bytes of one stream. A background process in the sandbox may write
 * forever, so no loop here runs until EAGAIN: each turn takes a bounded bite and the event
 * loop serves everyone else in between. */
static void drain_pipe(struct sandbox *sb, int stream, size_t limit)
{
    int fd = stream == 1 ? sb->out_fd : sb->err_fd;
    char buf[65536];
    size_t done = 0;
    while (done < limit) {
        size_t want = limit - done < sizeof(buf) ? limit - done : sizeof(buf);
        ssize_t n = read(fd, buf, want);
        if (n > 0) {
            done += (size_t)n;
            exec_on_output(sb, stream, buf, (size_t)n);
            if (sb->closing || (size_t)n < want)
                return; /* closed, or the pipe is empty for now */
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) {
            /* Every writer is gone: stop watching the hang-up. */
            struct ev_watch **w = stream == 1 ? &sb->out_w : &sb->err_w;
            ev_unwatch(*w);
            *w = NULL;
        }
        return;
    }
}

/* After a result frame: what the driver wrote before it is in the pipes now; take exactly
 * that, not what a background writer adds meanwhile. */
void sandbox_drain_output(struct sandbox *sb)
{
    /* One poll says which pipe holds anything (after most executions, neither). */
    struct pollfd p[2] = {{.fd = sb->out_fd, .events = POLLIN},
                          {.fd = sb->err_fd, .events = POLLIN}};
    if (poll(p, 2, 0) <= 0)
        return;
    for (int stream = 1; stream <= 2 && !sb->closing; stream++) {
        int avail = 0;
        if ((p[stream - 1].revents & POLLIN) && ioctl(p[stream - 1].fd, FIONREAD, &avail) == 0 &&
            avail > 0)
            drain_pipe(sb, stream, (size_t)avail);
    }
}

void sandbox_hold_output(struct sandbox *sb, int stream, bool hold)
{
    struct ev_watch *w = stream == 1 ? sb->out_w : sb->err_w;
    if (w)
        ev_watch_modify(w, hold ? 0 : EPOLLIN);
}

/* Reads away what is in fd now, not what a leftover writer keeps adding. */
static void discard_pending(int fd)
{
    int avail = 0;
    char buf[4096];
    if (ioctl(fd, FIONREAD, &avail) < 0)
        avail = 0;
    while (avail > 0) {
        ssize_t n = read(fd, buf, sizeof(buf) < (size_t)avail ? sizeof(buf) : (size_t)avail);
        if (n <= 0)
            break;
        avail -= (int)n;
    }
}

/* Output no run takes (a background writer between runs) is read and dropped a bite per stream
 * every IDLE_OUTPUT_PAUSE_MS: an endless printer then costs the server little, and waits on
 * its full pipe in between, instead of the server reading as fast as it writes. */
#define IDLE_OUTPUT_PAUSE_MS 100

static void on_idle_output_timer(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sandbox *sb = data;
    sb->idle_output_timer = NULL;
    sandbox_hold_output(sb, 1, false);
    sandbox_hold_output(sb, 2, false);
}

void sandbox_output_for_run(struct sandbox *sb)
{
    if (!sb->idle_output_timer)
        return;
    ev_timer_clear(&sb->idle_output_timer);
    discard_pending(sb->out_fd);
    discard_pending(sb->err_fd);
    sandbox_hold_output(sb, 1, false);
    sandbox_hold_output(sb, 2, false);
}

static void on_output(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)events;
    struct sandbox *sb = data;
    drain_pipe(sb, fd == sb->out_fd ? 1 : 2, 64 << 10);
    if (!sb->closing && !exec_wants_output(sb) && !sb->idle_output_timer) {
        sandbox_hold_output(sb, 1, true);
        sandbox_hold_output(sb, 2, true);
        sb->idle_output_timer = ev_timer_add(loop, IDLE_OUTPUT_PAUSE_MS, on_idle_output_timer, sb);
    }
}

static void start_interpreter_again(struct sandbox *sb);

/* Files in the sandbox's tmpfs may be what fills its memory: then a new interpreter would die
 * at once, and init, raising its OOM score as it starts one, with it (the files too).
 * in_files: files_memory_bytes, read once for the run that died and for the restart. */
static bool interpreter_fits(const struct sandbox *sb, uint64_t in_files)
{
    return in_files + INTERPRETER_ROOM <= sb->profile->memory_bytes;
}

static void restart_driver(struct sandbox *sb, uint64_t in_files)
{
    channel_decoder_reset(&sb->dec);
    /* Whatever the dead driver left in the channel belongs to no request, and what it did not
     * read (a request half sent) must not reach the new one as the start of its source. */
    discard_pending(sb->chan_fd);
    req_clear(sb);
    discard_pending(sb->req_rfd);
    sb->channel_poisoned = false;
    sb->stray_frames = 0;
    if (!sb->reset_restart || sb->reset_gen != sb->interpreter_gen)
        sb->restarts_total++;
    sb->reset_restart = false;
    /* Without room, say why, and let a reset, which can delete the files, start one again. */
    char why[sizeof(sb->broken_reason)];
    if (!interpreter_fits(sb, in_files))
        snprintf(why, sizeof(why),
                 "no Python interpreter is started while files in /workspace, /tmp and /dev/shm "
                 "hold %llu MiB of the sandbox's %llu MiB memory limit: files there are memory. "
                 "Empty a large one (write_file with content \"\") and the next run starts one; "
                 "reset_sandbox with clear_files deletes them all",
                 (unsigned long long)(in_files >> 20),
                 (unsigned long long)(sb->profile->memory_bytes >> 20));
    else if (++sb->restarts > MAX_QUICK_DEATHS) {
        char files[160];
        sandbox_memory_in_files(sb, files, sizeof(files));
        if (files[0])
            snprintf(why, sizeof(why),
                     "the Python interpreter keeps dying at startup: out of memory (limit %llu "
                     "MiB%s)",
                     (unsigned long long)(sb->profile->memory_bytes >> 20), files);
        else
            snprintf(why, sizeof(why), "the Python interpreter keeps dying at startup");
    } else {
        start_interpreter_again(sb);
        return;
    }
    /* No interpreter is starting now: the ready timeout of one that died must not fire later
     * and, as mark_broken, take from a reset the restart this sandbox is left waiting for. */
    ev_timer_clear(&sb->start_timer);
    mark_broken(sb, why);
    sb->broken_revivable = true;
    sb->broken_for_room = !interpreter_fits(sb, in_files);
}

/* A new interpreter in the living sandbox, once the old one is gone. */
static void start_interpreter_again(struct sandbox *sb)
{
    sb->interpreter_gen++;
    if (jail_workload_restart(sb->jail) < 0 || start_driver(sb) < 0) {
        mark_broken(sb, "could not restart the Python interpreter");
        return;
    }
    sb->state = SBX_RESTARTING;
    if (!sb->start_timer)
        sb->start_timer =
            ev_timer_add(sb->svc->loop, sb->svc->ready_timeout_ms, on_ready_timeout, sb);
}

/* A ready interpreter held the state of the owner's earlier cells (a pooled one held nobody's):
 * the next result says it is gone, and why. */
static void note_idle_death(struct sandbox *sb, struct idle_death *into, int exit_code,
                            int term_signal)
{
    uint64_t kills = jail_oom_kills(sb->jail);
    *into = (struct idle_death){
        .pending = true,
        .exit_code = exit_code,
        .term_signal = term_signal,
        .oom_killed = kills > sb->oom_kills_seen,
        .bad_frame = sb->channel_poisoned,
    };
    /* Seen now: the next run's own OOM check must not count this kill again. */
    sb->oom_kills_seen = kills;
}

static void on_status(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    struct sandbox *sb = data;
    for (;;) {
        int code = 0, sig = 0;
        int r = jail_workload_status(sb->jail, &code, &sig);
        if (r == 0)
            return;
        if (r < 0) {
            ev_unwatch(sb->status_w);
            sb->status_w = NULL;
            sb->ended = true;
            mark_broken(sb, sb->is_default
                                ? "the sandbox ended unexpectedly; the next call without a "
                                  "sandbox_id starts a new default sandbox, without this one's "
                                  "variables, files and installed packages"
                                : "the sandbox ended unexpectedly; close it and create a new one");
            return;
        }
        if (log_rate_take(&sb->log_rate, sb->id))
            log_emit(LOG_LVL_INFO, "interpreter exited", "sandbox", sb->id, NULL);
        /* A run whose files are still being saved had ended: the interpreter died after it. */
        bool settling = sb->queue && sb->queue->settling;
        bool was_busy = sb->state == SBX_BUSY && !settling;
        uint64_t in_files = files_memory_bytes(sb);
        if ((sb->state == SBX_READY || settling) && sb->owner)
            note_idle_death(sb, settling ? &sb->death_after_run : &sb->idle_death, code, sig);
        if (sb->state != SBX_BROKEN)
            sb->state = SBX_RESTARTING;
        sandbox_update_gauges(sb->svc); /* a pooled one is ready again once its new one is */
        if (was_busy) {
            sandbox_drain_output(sb);
            if (sb->closing)
                return;
            exec_on_driver_exit(sb, code, sig, interpreter_fits(sb, in_files));
            if (sb->closing)
                return;
        }
        if (sb->state != SBX_BROKEN)
            restart_driver(sb, in_files);
        if (sb->closing) /* broken, a one-shot sandbox goes (exec.c) */
            return;
    }
}

/* ---- spawn and close ---- */

/* A closed sandbox's jail: killed at once, cleaned up when its init has gone. Init's exit
 * (its pid namespace emptied, its mounts undone) takes a millisecond or more, which the loop
 * spends serving everyone else. */
struct dying_jail {
    struct sandbox_service *svc;
    struct jail *jail;
    struct ev_watch *w;
    struct dying_jail *next;
};

static void bury_jail(struct dying_jail *d)
{
    for (struct dying_jail **pp = &d->svc->dying; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            d->svc->n_dying--;
            break;
        }
    ev_unwatch(d->w);
    jail_destroy(d->jail); /* init has gone, unless the server is stopping: no wait */
    free(d);
}

static void on_jail_gone(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    bury_jail(data);
}

static void retire_jail(struct sandbox_service *svc, struct jail *j)
{
    if (!j)
        return;
    struct sbx_err err = {0};
    struct dying_jail *d = NULL;
    /* Dying sandboxes still hold their memory and cgroups: past max_sandboxes of them (inits
     * that do not die, say), the next one is waited for here instead. */
    if (!svc->stopping && j->pidfd >= 0 && !j->reaped && svc->n_dying < svc->cfg->max_sandboxes) {
        jail_kill(j);
        d = xcalloc(1, sizeof(*d));
        d->w = ev_watch(svc->loop, j->pidfd, EPOLLIN, on_jail_gone, d, &err);
    }
    if (!d || !d->w) {
        free(d);
        jail_destroy(j);
        return;
    }
    d->svc = svc;
    d->jail = j;
    d->next = svc->dying;
    svc->dying = d;
    svc->n_dying++;
}

/* What a sandbox holds beyond its struct: watches, proxy, jail and pipes. Safe on a sandbox
 * that was only partly built. */
static void release_sandbox(struct sandbox *sb)
{
    req_clear(sb);
    ev_timer_clear(&sb->idle_output_timer);
    ev_unwatch(sb->chan_w);
    ev_unwatch(sb->out_w);
    ev_unwatch(sb->err_w);
    ev_unwatch(sb->status_w);
    ev_unwatch(sb->setup_w);
    sb->chan_w = sb->out_w = sb->err_w = sb->status_w = sb->setup_w = NULL;
    egress_proxy_free(sb->proxy);
    sb->proxy = NULL;
    retire_jail(sb->svc, sb->jail);
    sb->jail = NULL;
    for (int i = 0; i < 3; i++)
        cleanup_closep(&sb->child_fds[i]);
    cleanup_closep(&sb->chan_fd);
    cleanup_closep(&sb->req_fd);
    cleanup_closep(&sb->req_rfd);
    cleanup_closep(&sb->out_fd);
    cleanup_closep(&sb->err_fd);
}

/* After the exec: the egress proxy (network "packages") and the workload's status. */
static int finish_spawn(struct sandbox *sb, struct sbx_err *err)
{
    struct sandbox_service *svc = sb->svc;
    if (strcmp(sb->network, "packages") == 0) {
        const struct sbx_config *cfg = svc->cfg;
        struct egress_limits lim = {
            .max_connections = cfg->proxy_max_connections,
            .max_bytes = cfg->proxy_max_bytes,
            .idle_ms = cfg->proxy_idle_timeout_s * 1000,
            .connect_ms = cfg->proxy_connect_timeout_s * 1000,
        };
        if (egress_proxy_new(svc->loop, svc->resolver, svc->egress, &lim, sb->id,
                             steal_fd(&sb->jail->proxy_fd), &sb->proxy, err) < 0)
            return sbx_err_wrap(err, "the sandbox's egress proxy");
    }
    sb->status_w = ev_watch(svc->loop, sb->jail->status_fd, EPOLLIN, on_status, sb, err);
    return sb->status_w ? 0 : -1;
}

/* The child's setup takes milliseconds, during which the loop serves everyone else. This
 * ends it: at once when the loop saw it end, or by waiting when something needs it first,
 * for setup_wait_ms at most (after the jail itself, if it was still being begun). */
static void settle_setup(struct sandbox *sb)
{
    /* A jail still being begun comes first. */
    settle_spawn(sb, true);
    if (!sb->setup_w)
        return;
    struct pollfd p = {.fd = sb->jail->setup_fd, .events = POLLIN};
    int ready;
    do
        ready = poll(&p, 1, sb->svc->setup_wait_ms);
    while (ready < 0 && errno == EINTR);
    if (ready == 0) {
        abandon_setup(sb);
        return;
    }
    ev_unwatch(sb->setup_w);
    sb->setup_w = NULL;
    struct sbx_err err = {0};
    if (jail_spawn_end(sb->jail, &err) < 0 || finish_spawn(sb, &err) < 0) {
        jail_kill(sb->jail);
        if (sb->pooled) {
            log_emit(LOG_LVL_WARNING, "warm pool refill failed", "error", err.msg, NULL);
            pause_refill(sb->svc);
        }
        mark_failed_start(sb, err.msg);
    }
    wake_setup_waits(sb);
}

static void on_setup_done(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    settle_setup(data);
}

/* The jail exists: the child has its ends of the pipes, the loop watches ours, and the driver
 * is on its way. On failure the caller releases the sandbox, jail included. */
static int attach_jail(struct sandbox *sb, struct jail *j, struct sbx_err *err)
{
    struct sandbox_service *svc = sb->svc;
    sb->jail = j;
    for (int i = 0; i < 3; i++)
        cleanup_closep(&sb->child_fds[i]);
    sb->chan_w = ev_watch(svc->loop, sb->chan_fd, EPOLLIN, on_channel, sb, err);
    sb->out_w = sb->chan_w ? ev_watch(svc->loop, sb->out_fd, EPOLLIN, on_output, sb, err) : NULL;
    sb->err_w = sb->out_w ? ev_watch(svc->loop, sb->err_fd, EPOLLIN, on_output, sb, err) : NULL;
    sb->setup_w =
        sb->err_w ? ev_watch(svc->loop, j->setup_fd, EPOLLIN, on_setup_done, sb, err) : NULL;
    if (!sb->setup_w)
        return -1;
    if (start_driver(sb) < 0)
        return sbx_fail(err, EPIPE, "the sandbox's interpreter did not accept its configuration");
    sb->start_timer = ev_timer_add(svc->loop, svc->ready_timeout_ms, on_ready_timeout, sb);
    return 0;
}

/* On the spawner's thread: it writes sb->spawned and sb->spawn_err only, and reads sb->spec
 * (and the argv, fds and id it points to), which the loop leaves alone meanwhile. */
static void begin_jail(struct spawn_job *job)
{
    struct sandbox *sb = job->data;
    if (jail_spawn_begin(&sb->spec, &sb->spawned, &sb->spawn_err) < 0)
        sb->spawned = NULL;
}

/* The spawner began a sandbox's jail, or could not (or settle_spawn took the job back). */
static void on_spawned(struct spawn_job *job)
{
    struct sandbox *sb = job->data;
    struct sandbox_service *svc = sb->svc;
    sb->spawning = false;
    void (*fn)(struct sandbox *, const char *, void *) = sb->begun_fn;
    sb->begun_fn = NULL;
    if (sb->closing) { /* close_because waited for this: the jail is only to be ended */
        sb->jail = sb->spawned;
        sb->spawned = NULL;
        if (fn)
            fn(sb, "the sandbox was closed", sb->begun_data);
        return;
    }
    struct sbx_err why = sb->spawn_err;
    int r = sb->spawned ? attach_jail(sb, sb->spawned, &why) : -1;
    sb->spawned = NULL;
    if (r == 0) {
        /* The setup itself gets the whole wait, whatever the jail's beginning took. */
        if (sb->setup_wait_timer) {
            ev_timer_clear(&sb->setup_wait_timer);
            arm_setup_wait(sb);
        }
        if (fn)
            fn(sb, NULL, sb->begun_data);
        return;
    }
    if (sb->pooled) {
        log_emit(LOG_LVL_WARNING, "warm pool refill failed", "error", why.msg, NULL);
        pause_refill(svc);
        sandbox_close(sb, NULL);
        return;
    }
    mark_failed_start(sb, why.msg);
    wake_setup_waits(sb);
    if (fn)
        fn(sb, why.msg, sb->begun_data);
}

/* A jail still being begun, now: one still queued is taken back from the spawner, and begun
 * here if need_jail (the wait of one spawn, not of the queue ahead of it) or not at all; one
 * the spawner has started is waited for (one spawn at most). */
static void settle_spawn(struct sandbox *sb, bool need_jail)
{
    if (!sb->spawning)
        return;
    struct spawner *spawner = sb->svc->spawner;
    if (!spawner_cancel(spawner, &sb->spawn_job)) {
        spawner_await(spawner, &sb->spawn_job);
        return;
    }
    if (need_jail)
        begin_jail(&sb->spawn_job);
    on_spawned(&sb->spawn_job);
}

/* A sandbox with its pipes, its jail begun and its driver sent; in_background (the warm pool,
 * create_sandbox), the spawner begins the jail and the sandbox stays spawning until
 * on_spawned. */
static int spawn(struct sandbox_service *svc, const struct sbx_profile *profile,
                 const char *network, bool in_background, struct sandbox **out, struct sbx_err *err)
{
    int chan[2] = {-1, -1}, req[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1};
    struct sandbox *sb = xcalloc(1, sizeof(*sb));
    sb->svc = svc;
    sb->profile = profile;
    sb->chan_fd = sb->req_fd = sb->req_rfd = sb->out_fd = sb->err_fd = -1;
    sb->child_fds[0] = sb->child_fds[1] = sb->child_fds[2] = -1;
    snprintf(sb->network, sizeof(sb->network), "%s", network);
    new_id(sb->id, sizeof(sb->id));
    sb->created_ms = sb->last_used_ms = (int64_t)wall_ms();
    sb->created_ns = sb->last_used_ns = now_ns();
    sb->packages = json_array();
    channel_decoder_init(&sb->dec, CHANNEL_MAX_FRAME, CHANNEL_SMALL_FRAME);

    if (pipe2(chan, O_CLOEXEC) < 0 || pipe2(req, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0 ||
        pipe2(errp, O_CLOEXEC) < 0) {
        sbx_fail_errno(err, errno, "creating the sandbox's channels");
        for (int i = 0; i < 2; i++) {
            cleanup_closep(&chan[i]);
            cleanup_closep(&req[i]);
            cleanup_closep(&outp[i]);
            cleanup_closep(&errp[i]);
        }
        goto fail;
    }
    sb->chan_fd = chan[0];
    sb->child_fds[0] = chan[1];
    sb->req_fd = req[1];
    sb->req_rfd = req[0]; /* the driver's fd 3; kept only to clear it for a restarted driver */
    sb->out_fd = outp[0];
    sb->child_fds[1] = outp[1];
    sb->err_fd = errp[0];
    sb->child_fds[2] = errp[1];
    fcntl(sb->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(sb->err_fd, F_SETFL, O_NONBLOCK);
    fcntl(sb->chan_fd, F_SETFL, O_NONBLOCK);
    /* Not req_rfd: it shares its file description (and so O_NONBLOCK) with the driver's
     * fd 3, which must block; discard_pending never reads more than FIONREAD says. */
    fcntl(sb->req_fd, F_SETFL, O_NONBLOCK);

    char *argv[] = {"/usr/bin/python3", "-I", "-S", "-c", (char *)runtime_python_bootstrap(), NULL};
    memcpy(sb->argv, argv, sizeof(argv));
    sb->pass_fds[0] = sb->req_rfd;      /* fd 3: requests in */
    sb->pass_fds[1] = sb->child_fds[0]; /* fd 4: frames out */
    bool packages = strcmp(network, "packages") == 0;
    sb->spec = (struct jail_spec){
        .profile = profile,
        .cfg = svc->cfg,
        .argv = sb->argv,
        .extra_env = packages ? svc->packages_env : NULL,
        .stdin_fd = -1,
        .stdout_fd = sb->child_fds[1],
        .stderr_fd = sb->child_fds[2],
        .pass_fds = sb->pass_fds,
        .n_pass_fds = 2,
        .name = sb->id,
        .persistent = true,
        .proxy_port = packages ? EGRESS_PROXY_PORT : 0,
    };
    if (in_background) {
        sb->spawning = true;
        sb->spawn_job = (struct spawn_job){.run = begin_jail, .done = on_spawned, .data = sb};
        spawner_submit(svc->spawner, &sb->spawn_job);
    } else {
        struct jail *j = NULL;
        if (jail_spawn_begin(&sb->spec, &j, err) < 0 || attach_jail(sb, j, err) < 0)
            goto fail;
    }
    sb->state = SBX_STARTING;
    sb->next = svc->list;
    svc->list = sb;
    strmap_put(&svc->by_id, sb->id, sb);
    *out = sb;
    return 0;
fail:
    release_sandbox(sb);
    channel_decoder_free(&sb->dec);
    json_decref(sb->packages);
    free(sb);
    return -1;
}

static void free_sandbox(struct sandbox *sb)
{
    channel_decoder_free(&sb->dec);
    json_decref(sb->packages);
    free(sb->notice);
    free(sb->name);
    free(sb->owner);
    free(sb);
}

static void free_later(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sandbox *sb = data;
    for (struct sandbox **pp = &sb->svc->graveyard; *pp; pp = &(*pp)->next)
        if (*pp == sb) {
            *pp = sb->next;
            break;
        }
    free_sandbox(sb);
}

static void unlink_sandbox(struct sandbox *sb)
{
    strmap_del(&sb->svc->by_id, sb->id, sb);
    if (sb->is_default)
        strmap_del(&sb->svc->defaults, sb->owner, sb);
    for (struct sandbox **pp = &sb->svc->list; *pp; pp = &(*pp)->next)
        if (*pp == sb) {
            *pp = sb->next;
            return;
        }
}

json_t *sandbox_usage_json(struct sandbox *sb)
{
    struct jail_usage u = {0};
    if (sb->jail)
        jail_read_usage(sb->jail, &u);
    return json_pack("{s:I, s:I, s:I, s:i, s:b}", "memory_bytes",
                     (json_int_t)u.memory_current_bytes, "memory_peak_bytes",
                     (json_int_t)u.memory_peak_bytes, "cpu_ms", (json_int_t)(u.cpu_ns / 1000000),
                     "pids", (int)u.pids_current, "oom_killed", u.oom_killed);
}

static void schedule_refill(struct sandbox_service *svc);
static void history_soon(struct sandbox_service *svc);

void sandbox_update_gauges(struct sandbox_service *svc)
{
    size_t ready = 0;
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        ready += sb->pooled && sb->state == SBX_READY;
    metrics_gauge_set("mcp_sandboxes_active", "Sandboxes in use (warm pool excluded)", "",
                      (double)svc->n_live);
    metrics_gauge_set("mcp_pool_ready", "Warm sandboxes with a ready interpreter", "",
                      (double)ready);
}

void sandbox_touch(struct sandbox *sb)
{
    sb->last_used_ms = (int64_t)wall_ms();
    sb->last_used_ns = now_ns();
}

void sandbox_count_rejection(const char *reason)
{
    char labels[96];
    snprintf(labels, sizeof(labels), "reason=\"%s\"", reason);
    metrics_counter_add("mcp_rejections_total", "Requests refused, by reason", labels, 1);
}

static void close_because(struct sandbox *sb, json_t **final_usage, const char *reason)
{
    if (sb->closing)
        return;
    struct sandbox_service *svc = sb->svc;
    sb->closing = true;
    /* A jail still being begun ends with the sandbox, or is never begun. */
    settle_spawn(sb, false);
    if (final_usage)
        *final_usage = sandbox_usage_json(sb);
    unlink_sandbox(sb);
    if (sb->pooled)
        svc->n_pool--;
    else
        svc->n_live--;
    exec_fail_all(sb, reason);
    wake_setup_waits(sb);
    ev_timer_cancel(sb->start_timer);
    ev_timer_cancel(sb->revive_timer);
    release_sandbox(sb);
    if (sb->owner && svc->history) {
        history_close_sandbox(svc->history, sb->id, (int64_t)wall_ms(), NULL);
        history_soon(svc);
    }
    log_emit(LOG_LVL_INFO, "sandbox closed", "sandbox", sb->id, NULL);
    sandbox_update_gauges(svc);
    if (svc->stopping) {
        free_sandbox(sb);
        return;
    }
    /* Callers up the stack may still hold sb: free it from the loop. */
    sb->next = svc->graveyard;
    svc->graveyard = sb;
    sb->free_timer = ev_timer_add(svc->loop, 0, free_later, sb);
    schedule_refill(svc);
}

void sandbox_close(struct sandbox *sb, json_t **final_usage)
{
    close_because(sb, final_usage, "the sandbox was closed");
}

void sandbox_close_owner(struct sandbox_service *svc, const char *owner)
{
    struct sandbox *sb = svc->list;
    while (sb) {
        struct sandbox *next = sb->next;
        if (sb->owner && strcmp(sb->owner, owner) == 0)
            sandbox_close(sb, NULL);
        sb = next;
    }
}

/* ---- the warm pool ---- */

static size_t pool_want(const struct sandbox_service *svc, const struct sbx_profile **which)
{
    const struct sbx_config *cfg = svc->cfg;
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        const struct sbx_profile *p = &cfg->profiles[i];
        size_t have = 0;
        for (struct sandbox *sb = svc->list; sb; sb = sb->next)
            if (sb->pooled && sb->profile == p)
                have++;
        if (have < p->pool_size) {
            *which = p;
            return p->pool_size - have;
        }
    }
    return 0;
}

static void on_refill(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sandbox_service *svc = data;
    svc->refill = NULL;
    const struct sbx_profile *p = NULL;
    if (svc->refill_paused || !pool_want(svc, &p) ||
        svc->n_live + svc->n_pool >= svc->cfg->max_sandboxes)
        return;
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (spawn(svc, p, p->network, true, &sb, &err) < 0) {
        log_emit(LOG_LVL_WARNING, "warm pool refill failed", "error", err.msg, NULL);
        pause_refill(svc);
        return;
    }
    sb->pooled = true;
    svc->n_pool++;
    /* The next on the next loop turn; the spawner begins them in order. */
    schedule_refill(svc);
}

static void schedule_refill(struct sandbox_service *svc)
{
    if (!svc->refill)
        svc->refill = ev_timer_add(svc->loop, 0, on_refill, svc);
}

static void on_refill_retry(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sandbox_service *svc = data;
    svc->refill_retry = NULL;
    svc->refill_paused = false;
    schedule_refill(svc);
}

/* A refill failed: no new attempt before the pool is used (each attempt costs a spawn), or
 * before a while has passed, so that a server nobody calls still gets its pool back (and
 * /readyz its 200) once the cause has gone. */
static void pause_refill(struct sandbox_service *svc)
{
    svc->refill_paused = true;
    if (!svc->refill_retry && !svc->stopping)
        svc->refill_retry = ev_timer_add(svc->loop, svc->refill_retry_ms, on_refill_retry, svc);
}

/* ---- create, lookup, limits ---- */

static size_t owner_count(const struct sandbox_service *svc, const char *owner)
{
    size_t n = 0;
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        if (sb->owner && strcmp(sb->owner, owner) == 0)
            n++;
    return n;
}

/* Which pooled sandbox to hand out first: a ready one, then one past its setup (its driver
 * starting), then one still in its setup. */
static int pool_rank(const struct sandbox *sb)
{
    return sb->state == SBX_READY ? 2 : !sb->setup_w;
}

/* in_background: the sandbox may come back spawning (the loop does not wait for a jail). */
static int create(struct sandbox_service *svc, const char *owner, const char *name,
                  const char *profile_name, const char *network, bool in_background,
                  struct sandbox **out, struct sbx_err *err)
{
    const struct sbx_config *cfg = svc->cfg;
    if (!profile_name)
        profile_name = cfg->default_profile;
    const struct sbx_profile *p = config_profile(cfg, profile_name);
    if (!p) {
        char names[256] = "";
        for (size_t i = 0; i < cfg->n_profiles; i++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", i ? ", " : "",
                     cfg->profiles[i].name);
        return sbx_fail(err, EINVAL, "unknown profile '%s' (profiles: %s)", profile_name, names);
    }
    if (!network)
        network = p->network;
    if (strcmp(network, "none") != 0 && strcmp(network, "packages") != 0)
        return sbx_fail(err, EINVAL, "unknown network '%s' (none or packages)", network);
    if (strcmp(network, "packages") == 0 && svc->egress->n == 0)
        return sbx_fail(err, ENOTSUP,
                        "network 'packages' needs a package index: set packages.index_url (or "
                        "packages.proxy_allow) in the configuration");
    if (owner_count(svc, owner) >= cfg->max_sandboxes_per_owner)
        return sandbox_count_rejection("limits.max_sandboxes_per_owner"),
               sbx_fail(err, EUSERS,
                        "limit reached: limits.max_sandboxes_per_owner = %u; close a sandbox "
                        "first (close_sandbox)",
                        cfg->max_sandboxes_per_owner);
    if (svc->n_live >= cfg->max_sandboxes)
        return sandbox_count_rejection("limits.max_sandboxes"),
               sbx_fail(err, EUSERS,
                        "limit reached: limits.max_sandboxes = %u sandboxes on this server",
                        cfg->max_sandboxes);

    svc->refill_paused = false; /* the pool is in use: worth another try */
    struct sandbox *sb = NULL, *oldest_spawning = NULL;
    for (struct sandbox *c = svc->list; c; c = c->next) {
        if (!c->pooled || c->profile != p || c->state == SBX_BROKEN ||
            strcmp(c->network, network) != 0)
            continue;
        if (c->spawning)
            oldest_spawning = c; /* the list is newest first */
        else if (!sb || pool_rank(c) > pool_rank(sb))
            sb = c;
    }
    /* Only ones still being begun: the oldest, which the spawner began first, will have its
     * jail soonest. Not for a caller that needs the jail now: its wait would be the queue's. */
    if (!sb && oldest_spawning && in_background)
        sb = oldest_spawning;
    /* One still in its setup is handed out as one made now would be: the loop does not wait
     * for it, its first call does (and hears it if that setup fails). */
    if (sb) {
        sb->pooled = false;
        svc->n_pool--;
        /* Its life starts now: the wait in the pool is no one's uptime, and an interpreter
         * that died there held no one's state (get_sandbox_status). */
        sb->created_ms = sb->last_used_ms = (int64_t)wall_ms();
        sb->created_ns = sb->last_used_ns = now_ns();
        sb->restarts_total = 0;
    } else {
        /* Without a pooled sandbox, one pooled slot may have to give way to stay in limits:
         * the newest, most likely one whose jail is not begun yet (and never will be). */
        if (svc->n_live + svc->n_pool >= cfg->max_sandboxes) {
            for (struct sandbox *c = svc->list; c; c = c->next)
                if (c->pooled) {
                    sandbox_close(c, NULL);
                    break;
                }
        }
        if (spawn(svc, p, network, in_background, &sb, err) < 0)
            return -1;
    }
    /* A caller waits for this jail; refills queued before it wait for nobody. */
    if (sb->spawning)
        spawner_hurry(svc->spawner, &sb->spawn_job);
    svc->n_live++;
    sb->owner = xstrdup(owner);
    sb->name = name ? xstrdup(name) : NULL;
    if (svc->history) {
        history_record_sandbox(svc->history, sb->id, owner, name ? name : "", p->name,
                               sb->created_ms, NULL);
        history_soon(svc);
    }
    log_emit(LOG_LVL_INFO, "sandbox created", "sandbox", sb->id, "profile", p->name, NULL);
    sandbox_update_gauges(svc);
    schedule_refill(svc);
    *out = sb;
    return 0;
}

int sandbox_create(struct sandbox_service *svc, const char *owner, const char *name,
                   const char *profile, const char *network, struct sandbox **out,
                   struct sbx_err *err)
{
    return create(svc, owner, name, profile, network, false, out, err);
}

int sandbox_create_soon(struct sandbox_service *svc, const char *owner, const char *name,
                        const char *profile, const char *network,
                        void (*fn)(struct sandbox *sb, const char *error, void *data), void *data,
                        struct sandbox **out, struct sbx_err *err)
{
    if (create(svc, owner, name, profile, network, true, out, err) < 0)
        return -1;
    if ((*out)->spawning) {
        (*out)->begun_fn = fn;
        (*out)->begun_data = data;
    }
    return 0;
}

void sandbox_forget_begun(struct sandbox *sb)
{
    sb->begun_fn = NULL;
    sb->begun_data = NULL;
}

struct sandbox *sandbox_find(struct sandbox_service *svc, const char *id)
{
    struct sandbox *sb = strmap_get(&svc->by_id, id);
    return sb && sb->owner ? sb : NULL;
}

/* An id none of the owner's open sandboxes has: one of theirs that ended says when, from the
 * history (to anyone else it is unknown, as any other id). */
static int unknown_id(struct sandbox_service *svc, const char *owner, const char *id,
                      struct sbx_err *err)
{
    json_t *info = NULL;
    struct sbx_err ignored = {0};
    if (svc->history && history_get_sandbox(svc->history, id, &info, &ignored) == 0 &&
        strcmp(json_string_value(json_object_get(info, "owner")) ?: "", owner) == 0) {
        const char *closed = json_string_value(json_object_get(info, "closed_at"));
        sbx_fail(err, ENOENT,
                 "sandbox %s %s%s, and its files with it (get_execution_history still shows "
                 "what ran there); create_sandbox makes a new one",
                 id, closed ? "was closed at " : "ended when the server restarted",
                 closed ? closed : "");
        json_decref(info);
        return -1;
    }
    json_decref(info);
    return sandbox_fail_unknown_id(id, err);
}

int sandbox_fail_unknown_id(const char *id, struct sbx_err *err)
{
    return sbx_fail(err, ENOENT,
                    "unknown sandbox_id '%s': none of your open sandboxes has it "
                    "(list_sandboxes shows them)",
                    id);
}

static int lookup(struct sandbox_service *svc, const char *owner, const char *id,
                  bool replace_failed, struct sandbox **out, struct sbx_err *err)
{
    struct sandbox *sb = id ? strmap_get(&svc->by_id, id) : strmap_get(&svc->defaults, owner);
    /* A default sandbox that never started is replaced for work: the calls that waited for it
     * heard why, and this one may find the fault gone (a limit, fds, memory). One whose init
     * died is too: its owner never made it, and has no reason to close it; what it held is
     * lost, which the first result from the new one says. */
    char ended_id[sizeof(sb->id)] = "";
    if (!id && sb && (sb->failed_start || sb->ended) && replace_failed) {
        if (sb->ended && !sb->failed_start)
            snprintf(ended_id, sizeof(ended_id), "%s", sb->id);
        sandbox_close(sb, NULL);
        sb = NULL;
    }
    if (sb && sb->owner && strcmp(sb->owner, owner) == 0) {
        *out = sb;
        return 0;
    }
    /* One the server closed on a limit says so, to its owner only (to anyone else it is an
     * unknown id like any other). */
    for (size_t i = 0; id && i < ARRAY_SIZE(svc->expired); i++) {
        const struct expired_sandbox *x = &svc->expired[i];
        if (x->owner && strcmp(x->id, id) == 0 && strcmp(x->owner, owner) == 0)
            return sbx_fail(err, ENOENT, "sandbox %s is gone: %s; create_sandbox makes a new one",
                            id, x->why);
    }
    if (id)
        return unknown_id(svc, owner, id, err);
    /* Its jail is begun off the loop; the call waits for the interpreter anyway. */
    if (create(svc, owner, "default", NULL, NULL, true, out, err) < 0)
        return -1;
    (*out)->is_default = true;
    strmap_put(&svc->defaults, (*out)->owner, *out);
    if (ended_id[0])
        (*out)->notice = xasprintf(
            "[the default sandbox %s ended unexpectedly (its init process died) and was replaced "
            "by a new one, %s: the old one's variables, files and installed packages are lost]",
            ended_id, (*out)->id);
    return 0;
}

char *sandbox_take_notice(struct sandbox *sb)
{
    char *n = sb->notice;
    sb->notice = NULL;
    return n;
}

int sandbox_lookup(struct sandbox_service *svc, const char *owner, const char *id,
                   struct sandbox **out, struct sbx_err *err)
{
    return lookup(svc, owner, id, false, out, err);
}

int sandbox_lookup_to_work(struct sandbox_service *svc, const char *owner, const char *id,
                           struct sandbox **out, struct sbx_err *err)
{
    return lookup(svc, owner, id, true, out, err);
}

static void on_revive(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct sandbox *sb = data;
    sb->revive_timer = NULL;
    start_interpreter_again(sb);
}

/* Whether the sandbox has no interpreter until sandbox_restart_interpreter starts one. */
static bool interpreter_down(const struct sandbox *sb)
{
    return sb->state == SBX_BROKEN && sb->broken_revivable;
}

int sandbox_check_reset(const struct sandbox *sb, struct sbx_err *err)
{
    if (sb->oneshot)
        return sbx_fail(err, EPERM,
                        "sandbox %s is create_run_close's: it ends with its one execution, and "
                        "cannot be reset",
                        sb->id);
    return 0;
}

/* No interpreter runs, so no status record comes to start one: a timer does, once the
 * processes left (a command still writing a file, say) are gone with what they hold. */
static void start_revival(struct sandbox *sb)
{
    /* The kills that ended the last interpreter were reported then: the next run's result
     * must not claim them as its own. */
    if (sb->jail)
        sb->oom_kills_seen = jail_oom_kills(sb->jail);
    sb->broken_revivable = sb->broken_for_room = false;
    sb->broken_reason[0] = '\0';
    sb->state = SBX_RESTARTING;
    sb->revive_timer = ev_timer_add(sb->svc->loop, REVIVE_DELAY_MS, on_revive, sb);
}

bool sandbox_revive_if_room(struct sandbox *sb)
{
    if (!interpreter_down(sb) || !sb->broken_for_room ||
        !interpreter_fits(sb, files_memory_bytes(sb)) || jail_workload_kill(sb->jail) < 0)
        return false;
    sb->restarts = 0;
    log_emit(LOG_LVL_INFO, "interpreter started again: files left it room", "sandbox", sb->id,
             NULL);
    start_revival(sb);
    return true;
}

int sandbox_restart_interpreter(struct sandbox *sb, struct sbx_err *err)
{
    if (sandbox_check_reset(sb, err) < 0)
        return -1;
    settle_setup(sb);
    bool revive = interpreter_down(sb);
    if (sb->state == SBX_BROKEN && !revive)
        return sbx_fail(err, EIO, "%s", sb->broken_reason);
    /* What was running or waiting loses the interpreter's state, and its result says so. */
    for (struct exec *e = sb->queue; e; e = e->next)
        if (!e->settling) /* it had ended before the reset */
            e->outcome.interpreter_restarted = true;
    exec_fail_all(sb, "the sandbox was reset");
    if (jail_workload_kill(sb->jail) < 0)
        return sbx_fail(err, EIO, "could not stop the interpreter");
    sb->restarts = 0;
    sb->restarts_total = 0;
    /* the reset's own result says the interpreter restarted */
    sb->idle_death.pending = sb->death_after_run.pending = false;
    sb->state = SBX_RESTARTING;
    if (!revive) {
        /* The status record of the killed workload triggers the restart (on_status). */
        sb->reset_restart = true;
        sb->reset_gen = sb->interpreter_gen;
        return 0;
    }
    start_revival(sb); /* after the caller has cleared the files, if asked */
    return 0;
}

json_t *sandbox_info_packages(const json_t *info)
{
    json_t *p = json_object_get(info, "packages");
    return json_is_array(p) ? json_incref(p) : json_array();
}

json_t *sandbox_limits_json(const struct sbx_profile *p)
{
    return json_pack("{s:I, s:f, s:i, s:i, s:i, s:I, s:I}", "memory_bytes",
                     (json_int_t)p->memory_bytes, "cpus", p->cpu_millicpus / 1000.0, "timeout_s",
                     (int)(p->timeout_ms / 1000), "max_timeout_s", (int)(p->max_timeout_ms / 1000),
                     "pids", (int)p->pids, "workspace_bytes", (json_int_t)p->workspace_bytes,
                     "tmp_bytes", (json_int_t)p->tmp_bytes);
}

/* ---- sweeping idle and old sandboxes ---- */

/* Often enough that a sandbox outlives its TTL by at most half of it. */
static uint64_t sweep_interval_ms(const struct sbx_config *cfg)
{
    uint64_t shortest =
        cfg->idle_ttl_s < cfg->max_lifetime_s ? cfg->idle_ttl_s : cfg->max_lifetime_s;
    uint64_t ms = shortest * 1000 / 2;
    return ms < 100 ? 100 : ms > SWEEP_INTERVAL_MS ? SWEEP_INTERVAL_MS : ms;
}

static void remember_expired(struct sandbox_service *svc, const struct sandbox *sb, const char *why)
{
    struct expired_sandbox *x = &svc->expired[svc->expired_next++ % ARRAY_SIZE(svc->expired)];
    free(x->owner);
    x->owner = xstrdup(sb->owner);
    snprintf(x->id, sizeof(x->id), "%s", sb->id);
    snprintf(x->why, sizeof(x->why), "%s", why);
}

static void on_sweep(struct ev_loop *loop, void *data)
{
    struct sandbox_service *svc = data;
    const struct sbx_config *cfg = svc->cfg;
    /* Time passed, not the wall clock: set back, it kept idle sandboxes for as long again;
     * set forward, it closed every sandbox at once. */
    uint64_t now = now_ns();
    log_flush(); /* a log line cut by a full reader, on a server with nothing more to log */
    struct sandbox *sb = svc->list;
    while (sb) {
        struct sandbox *next = sb->next;
        if (sb->owner) {
            bool idle = sb->queue_len == 0 &&
                        now - sb->last_used_ns > (uint64_t)cfg->idle_ttl_s * 1000000000ull;
            bool old = now - sb->created_ns > (uint64_t)cfg->max_lifetime_s * 1000000000ull;
            if (idle || old) {
                char why[128];
                snprintf(why, sizeof(why), "the sandbox was closed: it reached %s = %u",
                         old ? "limits.max_lifetime_s" : "limits.idle_ttl_s",
                         old ? cfg->max_lifetime_s : cfg->idle_ttl_s);
                log_emit(LOG_LVL_INFO, "sandbox expired", "sandbox", sb->id, "reason", why, NULL);
                remember_expired(svc, sb, why);
                close_because(sb, NULL, why);
            }
        } else if (sb->state == SBX_BROKEN) {
            sandbox_close(sb, NULL);
        }
        sb = next;
    }
    svc->sweeper = ev_timer_add(loop, sweep_interval_ms(cfg), on_sweep, svc);
}

#define HISTORY_FLUSH_MS 100

/* Closed sandboxes' histories go server.history_retention_days after they closed (kept, the
 * database grew with every sandbox ever made), a batch at a time so that the loop never waits
 * long. One never closed (its server was killed) goes once even the longest lifetime a
 * configuration allows would have ended. Past server.history_max_bytes, the sandboxes that
 * closed first go too, whenever that was: a client making sandboxes without end would
 * otherwise fill the disk within the retention (4.7 KB a run that prints 2.5 KB, measured). */
#define HISTORY_PURGE_EVERY_MS (3600 * 1000)
#define HISTORY_PURGE_SOON_MS  200
#define HISTORY_PURGE_BATCH    64
#define LONGEST_LIFETIME_MS    (31536000ll * 1000)

static void on_history_purge(struct ev_loop *loop, void *data);

/* Whether the database holds more than server.history_max_bytes. */
static bool history_over_cap(struct sandbox_service *svc, uint64_t *used)
{
    *used = 0;
    return history_used_bytes(svc->history, used, NULL) == 0 && *used > svc->cfg->history_max_bytes;
}

/* A write that failed (history.c says why in the log) keeps what was queued: it is tried
 * again a while later, even if nothing new comes. */
static void on_history_flush(struct ev_loop *loop, void *data)
{
    struct sandbox_service *svc = data;
    svc->history_timer = NULL;
    if (history_flush(svc->history, NULL) < 0) {
        if (!svc->stopping)
            svc->history_timer = ev_timer_add(loop, HISTORY_RETRY_MS, on_history_flush, svc);
        return;
    }
    /* Runs without end (create_run_close in a loop) must not wait for the hourly purge to
     * find the database past its cap. */
    uint64_t used;
    if (!svc->stopping && svc->purge_timer && history_over_cap(svc, &used) &&
        ev_timer_due(svc->purge_timer) > now_ns() + HISTORY_PURGE_SOON_MS * 1000000ull) {
        ev_timer_clear(&svc->purge_timer);
        svc->purge_timer = ev_timer_add(loop, HISTORY_PURGE_SOON_MS, on_history_purge, svc);
    }
}

/* What is queued reaches the database within HISTORY_FLUSH_MS, in one transaction. */
static void history_soon(struct sandbox_service *svc)
{
    if (history_pending(svc->history) && !svc->history_timer && !svc->stopping)
        svc->history_timer = ev_timer_add(svc->loop, HISTORY_FLUSH_MS, on_history_flush, svc);
}

static void on_history_purge(struct ev_loop *loop, void *data)
{
    struct sandbox_service *svc = data;
    svc->purge_timer = NULL;
    int64_t now = (int64_t)wall_ms();
    int64_t closed_before = now - (int64_t)svc->cfg->history_retention_days * 86400 * 1000;
    size_t purged = 0;
    struct sbx_err err = {0};
    if (history_purge(svc->history, closed_before, closed_before - LONGEST_LIFETIME_MS,
                      HISTORY_PURGE_BATCH, &purged, &err) < 0)
        log_emit(LOG_LVL_WARNING, "history purge failed", "error", err.msg, NULL);
    else if (purged)
        log_msgf(LOG_LVL_INFO, "history: deleted %zu closed sandboxes past their retention",
                 purged);
    bool more = purged == HISTORY_PURGE_BATCH;
    /* One at a time, only until the database is under its cap again. With nothing closed left
     * it stays over: the open sandboxes' records are bounded (1,000 each). */
    uint64_t used = 0, first_used = 0;
    size_t capped = 0;
    while (!more && capped < HISTORY_PURGE_BATCH && history_over_cap(svc, &used)) {
        if (!capped)
            first_used = used;
        if (history_purge_oldest_closed(svc->history, 1, &purged, &err) < 0) {
            log_emit(LOG_LVL_WARNING, "history purge failed", "error", err.msg, NULL);
            break;
        }
        if (!purged)
            break;
        capped++;
    }
    if (capped)
        log_msgf(LOG_LVL_INFO,
                 "history: %llu bytes, over server.history_max_bytes (%llu): deleted the %zu "
                 "sandboxes that closed first",
                 (unsigned long long)first_used, (unsigned long long)svc->cfg->history_max_bytes,
                 capped);
    more = more || capped == HISTORY_PURGE_BATCH;
    /* More to do: the rest after a pause in which the loop serves everyone else. */
    svc->purge_timer = ev_timer_add(loop, more ? HISTORY_PURGE_SOON_MS : HISTORY_PURGE_EVERY_MS,
                                    on_history_purge, svc);
}

void sandbox_history_add(struct sandbox *sb, const struct history_record *rec)
{
    struct sandbox_service *svc = sb->svc;
    history_add(svc->history, sb->id, rec, NULL); /* a failure is logged there, and kept */
    history_soon(svc);
    sandbox_history_changed(sb);
}

void sandbox_history_changed(const struct sandbox *sb)
{
    if (!sb->svc->srv)
        return;
    char uri[sizeof(sb->id) + 32];
    snprintf(uri, sizeof(uri), "sandbox://%s/history", sb->id);
    mcp_server_resource_updated(sb->svc->srv, sb->owner, uri);
}

const char *sandbox_file_rel(const char *path)
{
    if (strncmp(path, "/workspace/", 11) == 0)
        return path + 11;
    return *path == '/' ? path + 1 : path;
}

char *sandbox_file_uri(const struct sandbox *sb, const char *path)
{
    /* A name may hold '%', '#', '?' or spaces: the URI carries it encoded. */
    char *enc = uri_path_encode(sandbox_file_rel(path));
    char *uri = xasprintf("sandbox://%s/files/%s", sb->id, enc);
    free(enc);
    return uri;
}

void sandbox_file_changed(const struct sandbox *sb, const char *path)
{
    if (!sb->svc->srv || strncmp(path, "/workspace/", 11) != 0)
        return;
    char *uri = sandbox_file_uri(sb, path);
    mcp_server_resource_updated(sb->svc->srv, sb->owner, uri);
    free(uri);
}

bool sandbox_service_ready(const struct sandbox_service *svc, json_t **detail)
{
    size_t want = 0, ready = 0;
    for (size_t i = 0; i < svc->cfg->n_profiles; i++)
        want += svc->cfg->profiles[i].pool_size;
    for (const struct sandbox *sb = svc->list; sb; sb = sb->next)
        ready += sb->pooled && sb->state == SBX_READY;
    bool ok = want == 0 || ready > 0;
    if (detail)
        *detail = json_pack("{s:b, s:I, s:I, s:I}", "ready", ok, "pool_ready", (json_int_t)ready,
                            "pool_target", (json_int_t)want, "sandboxes", (json_int_t)svc->n_live);
    return ok;
}

static void on_owner_gone(void *data, const char *owner)
{
    sandbox_close_owner(data, owner);
}

static bool on_owner_holds(void *data, const char *owner)
{
    const struct sandbox_service *svc = data;
    for (const struct sandbox *sb = svc->list; sb; sb = sb->next)
        if (sb->owner && strcmp(sb->owner, owner) == 0)
            return true;
    return false;
}

static void free_network(struct sandbox_service *svc)
{
    resolver_free(svc->resolver);
    if (svc->egress)
        egress_policy_free(svc->egress);
    free(svc->egress);
    packages_env_free(svc->packages_env);
}

int sandbox_service_new(struct ev_loop *loop, struct mcp_server *srv, const struct sbx_config *cfg,
                        struct sandbox_service **out, struct sbx_err *err)
{
    struct sandbox_service *svc = xcalloc(1, sizeof(*svc));
    svc->loop = loop;
    svc->srv = srv;
    svc->cfg = cfg;
    svc->ready_timeout_ms = DRIVER_READY_MS;
    svc->setup_wait_ms = SETUP_WAIT_MS;
    svc->refill_retry_ms = REFILL_RETRY_MS;
    strmap_init(&svc->by_id);
    strmap_init(&svc->defaults);
    svc->egress = xcalloc(1, sizeof(*svc->egress));
    if (egress_policy_build(cfg, svc->egress, err) < 0 ||
        resolver_new(loop, &svc->resolver, err) < 0 || spawner_new(loop, &svc->spawner, err) < 0)
        goto fail;
    svc->packages_env = packages_sandbox_env(cfg, EGRESS_PROXY_PORT);
    char *dir = NULL;
    if (config_state_dir(cfg, &dir, err) < 0)
        goto fail;
    char *path = xasprintf("%s/history.sqlite3", dir);
    free(dir);
    int r = history_open(path, &svc->history, err);
    free(path);
    if (r < 0) {
        sbx_err_wrap(err, "execution history");
        goto fail;
    }
    if (tools_sandbox_register(svc, err) < 0 || tools_files_register(svc, err) < 0 ||
        tools_packages_register(svc, err) < 0 || resources_sandbox_register(svc, err) < 0)
        goto fail;
    mcp_server_on_owner_gone(srv, on_owner_gone, on_owner_holds, svc);
    svc->sweeper = ev_timer_add(loop, sweep_interval_ms(cfg), on_sweep, svc);
    svc->purge_timer = ev_timer_add(loop, 1000, on_history_purge, svc);
    schedule_refill(svc);
    *out = svc;
    return 0;
fail:
    history_close(svc->history);
    spawner_free(svc->spawner);
    free_network(svc);
    strmap_free(&svc->by_id);
    strmap_free(&svc->defaults);
    free(svc);
    return -1;
}

void sandbox_service_free(struct sandbox_service *svc)
{
    if (!svc)
        return;
    mcp_server_on_owner_gone(svc->srv, NULL, NULL, NULL);
    svc->stopping = true;
    while (svc->list)
        sandbox_close(svc->list, NULL);
    while (svc->dying)
        bury_jail(svc->dying);
    /* After every jail it began is gone: their inits die with its thread. */
    spawner_free(svc->spawner);
    while (svc->graveyard) {
        struct sandbox *sb = svc->graveyard;
        svc->graveyard = sb->next;
        ev_timer_cancel(sb->free_timer);
        free_sandbox(sb);
    }
    ev_timer_cancel(svc->sweeper);
    ev_timer_cancel(svc->refill);
    ev_timer_cancel(svc->refill_retry);
    ev_timer_cancel(svc->history_timer);
    ev_timer_cancel(svc->purge_timer);
    history_close(svc->history); /* flushes what is pending */
    free_network(svc);
    for (size_t i = 0; i < ARRAY_SIZE(svc->expired); i++)
        free(svc->expired[i].owner);
    strmap_free(&svc->by_id);
    strmap_free(&svc->defaults);
    free(svc);
}
