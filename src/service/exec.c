/* One execution in a sandbox: queued in order, sent to the driver, its output captured head
 * and tail (and spilled whole into the workspace once it overflows), streamed as progress,
 * interrupted on timeout or cancel, and killed if the interrupt does not take. */
#include "sandbox.h"

#include "files.h"
#include "jail/jail.h"
#include "log.h"
#include "protocol/mcp.h"
#include "service/loop.h"
#include "spawner.h"
#include "tools_common.h"
#include "util.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define INTERRUPT_GRACE_MS   2000 /* the driver gives a bash child 1 s before killing it */
#define PROGRESS_INTERVAL_MS 250
#define SPILL_MAX            (64ull << 20)
/* How long a run's result may wait for its output files' writers, which have at most a pipe's
 * worth left: ample, since the loop serves everyone else meanwhile (writers under a flood of 64
 * sandboxes took up to 107 ms), and bounded, so that a writer stopped for good costs one
 * file, not the sandbox. */
#define SETTLE_WAIT_MS 10000
/* How long the loop may block for them where it cannot wait asynchronously: a pidfd that could
 * not be watched. */
#define SPILL_WAIT_MS 250

static void settle_launch(struct exec *e, int idx);

/* Ends stream idx's output file by deadline (ms), blocking: what is pending goes to the
 * writer, the writer is reaped (killed if late: the file is then said to be incomplete), and
 * the stream is read again. A no-op once the file has ended. */
static void spill_end(struct exec *e, int idx, uint64_t deadline)
{
    struct sandbox *sb = e->sb;
    struct jail_writer *w = &e->spill_writer[idx];
    if (e->launch[idx])
        settle_launch(e, idx);
    if (e->spill_w[idx]) {
        ev_unwatch(e->spill_w[idx]);
        e->spill_w[idx] = NULL;
        sandbox_hold_output(sb, idx + 1, false);
    }
    if (e->writer_w[idx]) {
        ev_unwatch(e->writer_w[idx]);
        e->writer_w[idx] = NULL;
    }
    size_t off = 0;
    while (off < e->spill_pending_len[idx] && !e->spill_failed[idx]) {
        ssize_t n =
            write(e->spill_fd[idx], e->spill_pending[idx] + off, e->spill_pending_len[idx] - off);
        uint64_t now = now_ms();
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && errno == EAGAIN && now < deadline) {
            struct pollfd p = {.fd = e->spill_fd[idx], .events = POLLOUT};
            poll(&p, 1, (int)(deadline - now));
        } else if (!(n < 0 && errno == EINTR)) {
            e->spill_failed[idx] = true;
        }
    }
    free(e->spill_pending[idx]);
    e->spill_pending[idx] = NULL;
    e->spill_pending_len[idx] = 0;
    if (w->pid > 0) {
        uint64_t now = now_ms();
        bool oom = false;
        struct sbx_err err = {0};
        e->spill_fd[idx] = -1; /* the writer's pipe: jail_writer_end closes it */
        if (jail_writer_end(w, now < deadline ? (int)(deadline - now) : 0, &oom, &err) < 0)
            e->spill_failed[idx] = true;
        /* The writer's own death is no process of the run's. */
        if (oom)
            sb->oom_kills_seen++;
    } else if (e->spill_fd[idx] >= 0) {
        close(e->spill_fd[idx]); /* the file, or the pipe of a writer that did not start */
        e->spill_fd[idx] = w->pipe_fd = -1;
    }
}

/* Ends both output files, before a result that names them is built. */
static void spill_end_all(struct exec *e, uint64_t wait_ms)
{
    ev_timer_clear(&e->settle_timer);
    uint64_t deadline = now_ms() + wait_ms;
    for (int i = 0; i < 2; i++)
        spill_end(e, i, deadline);
}

/* The timers of a running execution: its timeout, the grace after an interrupt, progress. */
static void cancel_run_timers(struct exec *e)
{
    struct ev_timer **timers[] = {&e->deadline, &e->grace, &e->progress_timer};
    for (size_t i = 0; i < ARRAY_SIZE(timers); i++)
        ev_timer_clear(timers[i]);
}

void exec_free(struct exec *e)
{
    if (!e)
        return;
    cancel_run_timers(e);
    /* Cancels the settle timer; for the files a no-op once the run has settled. */
    spill_end_all(e, SPILL_WAIT_MS);
    outbuf_free(&e->out);
    outbuf_free(&e->err);
    if (e->done_data_free)
        e->done_data_free(e->done_data);
    json_decref(e->outcome.frame);
    json_decref(e->argv);
    json_decref(e->env);
    free(e->language);
    free(e->code);
    free(e->cwd);
    free(e);
}

static void unlink_exec(struct sandbox *sb, struct exec *e)
{
    struct exec *prev = NULL;
    for (struct exec *c = sb->queue; c; prev = c, c = c->next) {
        if (c != e)
            continue;
        if (prev)
            prev->next = c->next;
        else
            sb->queue = c->next;
        if (sb->queue_tail == c)
            sb->queue_tail = prev;
        sb->queue_len--;
        c->next = NULL;
        return;
    }
}

/* The CPU time of the run: of every process in the sandbox, from its cgroup (ns); without one,
 * what the driver measured of itself and the children it waited for. */
static void account_cpu(struct sandbox *sb, struct exec *e)
{
    uint64_t now = 0;
    if (e->cpu_start_known && sb->jail && jail_read_cpu_ns(sb->jail, &now) == 0 &&
        now >= e->cpu_start_ns)
        e->outcome.cpu_ns = now - e->cpu_start_ns;
    else if (e->outcome.frame)
        e->outcome.cpu_ns =
            (uint64_t)json_integer_value(json_object_get(e->outcome.frame, "cpu_ns"));
}

double exec_duration_ms(const struct exec *e)
{
    if (!e->started_ns)
        return 0;
    return (double)((e->ended_ns ? e->ended_ns : now_ns()) - e->started_ns) / 1e6;
}

/* The result goes out. An interpreter that died while the run settled died after it: the
 * result after this one says so. */
static void send_result(struct sandbox *sb, struct exec *e)
{
    e->done_data_free = NULL; /* done owns it now */
    bool unheard = !e->call;  /* done may end the call, leaving e->call stale */
    if (e->done)
        e->done(e);
    /* A cancelled run whose interpreter died (it ignored the interrupt, say) took the state
     * with it, and had nobody to tell: the next result says so, as after an idle death. */
    const struct exec_outcome *o = &e->outcome;
    if (unheard && o->driver_died && o->interpreter_restarted && !sb->oneshot && sb->owner)
        sb->idle_death = (struct idle_death){.pending = true,
                                             .exit_code = o->exit_code,
                                             .term_signal = o->term_signal,
                                             .oom_killed = o->oom_killed,
                                             .bad_frame = o->bad_frame,
                                             .in_cancelled_run = true};
    if (sb->death_after_run.pending) {
        sb->idle_death = sb->death_after_run;
        sb->death_after_run.pending = false;
    }
}

/* create_run_close's sandbox goes once its execution is over: answered, failed or cancelled
 * (enqueue lets no other in). */
static void end_oneshot(struct sandbox *sb)
{
    if (sb->oneshot && !sb->closing && !sb->queue)
        sandbox_close(sb, NULL);
}

/* The run's files are complete (or said not to be): its result goes out, and the next run
 * starts. */
static void settled(struct sandbox *sb, struct exec *e)
{
    unlink_exec(sb, e);
    if (sb->state == SBX_BUSY)
        sb->state = SBX_READY;
    sb->executions++;
    sandbox_touch(sb);
    send_result(sb, e);
    exec_free(e); /* the files have ended: this cancels the settle timer */
    end_oneshot(sb);
    if (!sb->closing)
        exec_start_next(sb);
}

/* Both output files have ended: no fd to write, no writer to wait for. */
static bool spills_ended(const struct exec *e)
{
    for (int i = 0; i < 2; i++)
        if (e->spill_fd[i] >= 0 || e->spill_writer[i].pid > 0 || e->launch[i])
            return false;
    return true;
}

static void settle_if_done(struct exec *e)
{
    if (e->settling && spills_ended(e))
        settled(e->sb, e);
}

static void on_writer_exit(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)events;
    struct exec *e = data;
    int idx = fd == e->spill_writer[0].pidfd ? 0 : 1;
    ev_unwatch(e->writer_w[idx]);
    e->writer_w[idx] = NULL;
    spill_end(e, idx, 0); /* it has exited: this reaps it, and says how it went */
    settle_if_done(e);
}

/* Once what was pending has gone to stream idx's writer: its input ends, and its exit is
 * waited for without blocking the loop. */
static void spill_close_input(struct exec *e, int idx)
{
    struct jail_writer *w = &e->spill_writer[idx];
    if ((e->spill_pending_len[idx] && !e->spill_failed[idx]) || e->spill_fd[idx] < 0)
        return;
    if (e->launch[idx])
        return; /* its done comes back here */
    if (w->pid <= 0) {
        /* the file itself, where the sandbox has no cgroup; or the pipe of a writer that did
         * not start */
        close(e->spill_fd[idx]);
        e->spill_fd[idx] = w->pipe_fd = -1;
        return;
    }
    struct sbx_err err = {0};
    e->writer_w[idx] = ev_watch(e->sb->svc->loop, w->pidfd, EPOLLIN, on_writer_exit, e, &err);
    if (!e->writer_w[idx]) {
        spill_end(e, idx, now_ms() + SPILL_WAIT_MS); /* then the loop waits, as it once did */
        return;
    }
    close(w->pipe_fd); /* cat copies the rest, then exits */
    w->pipe_fd = e->spill_fd[idx] = -1;
}

static void on_settle_timeout(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct exec *e = data;
    e->settle_timer = NULL;
    spill_end_all(e, 0); /* the writers left are killed: their files are said to be cut */
    settled(e->sb, e);
}

static void finish(struct sandbox *sb, struct exec *e)
{
    e->ended_ns = now_ns();
    account_cpu(sb, e);
    cancel_run_timers(e); /* a settling run is over: no timeout, interrupt or progress */
    for (int i = 0; i < 2; i++) {
        if (e->spill_w[i])
            sandbox_hold_output(sb, i + 1, false); /* the run has ended: nothing more is kept */
        spill_close_input(e, i);
    }
    if (spills_ended(e)) {
        settled(sb, e);
        return;
    }
    e->settling = true;
    e->settle_timer = ev_timer_add(sb->svc->loop, SETTLE_WAIT_MS, on_settle_timeout, e);
}

static void on_grace(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct exec *e = data;
    e->grace = NULL;
    /* The interpreter ignored the interrupt: kill it; on_status restarts a fresh one. */
    if (log_rate_take(&e->sb->log_rate, e->sb->id))
        log_emit(LOG_LVL_INFO, "interrupt ignored; killing the interpreter", "sandbox", e->sb->id,
                 NULL);
    jail_workload_kill(e->sb->jail);
}

static void interrupt(struct exec *e)
{
    if (e->interrupting)
        return;
    e->interrupting = true;
    jail_signal(e->sb->jail, SIGINT);
    e->grace = ev_timer_add(e->sb->svc->loop, INTERRUPT_GRACE_MS, on_grace, e);
}

static void on_deadline(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct exec *e = data;
    e->deadline = NULL;
    e->outcome.timed_out = true;
    interrupt(e);
}

static void on_cancel(struct mcp_call *call, void *data)
{
    (void)call;
    struct exec *e = data;
    struct sandbox *sb = e->sb;
    e->call = NULL;
    e->outcome.cancelled = true;
    if (e->settling)
        return; /* it has run: only its files are being finished */
    /* create_run_close's sandbox lives for the call alone: it goes now, with its processes,
     * rather than after an interrupt the code may ignore for the whole grace period, holding
     * one of its owner's sandboxes meanwhile. */
    if (sb->oneshot) {
        sandbox_close(sb, NULL); /* frees e (exec_fail_all) */
        return;
    }
    if (sb->state == SBX_BUSY && sb->queue == e) {
        interrupt(e); /* it finishes (and is recorded) without a response */
        return;
    }
    unlink_exec(sb, e);
    exec_free(e);
    end_oneshot(sb);
}

/* The request that sends execution e to the driver (its id, seq, is given when it starts). */
static json_t *exec_frame(const struct exec *e)
{
    return json_pack("{s:s, s:I, s:s, s:s, s:s?, s:O?, s:O?}", "op", "exec", "id",
                     (json_int_t)e->seq, "language", e->language, "code", e->code, "cwd", e->cwd,
                     "argv", e->argv, "env", e->env);
}

/* Whether e's request fits one channel frame. Escaping at most sextuples a string, so only a
 * long program is measured; one past the frame could never be sent, and the sandbox's
 * interpreter (and its state) would go for it. */
static bool exec_fits(const struct exec *e)
{
    if (strlen(e->code) + (e->cwd ? strlen(e->cwd) : 0) < CHANNEL_MAX_FRAME / 6 - 4096 &&
        !e->argv && !e->env)
        return true;
    json_t *frame = exec_frame(e);
    /* The id is still 0 here: room for its 20 digits. */
    size_t n = frame ? json_dumpb(frame, NULL, 0, JSON_COMPACT) : 0;
    json_decref(frame);
    return n > 0 && n + 20 <= CHANNEL_MAX_FRAME;
}

/* The new execution, or NULL (and why) when the sandbox takes no more. */
static struct exec *enqueue(struct sandbox *sb, struct mcp_call *call, const char *language,
                            const char *code, const char *cwd, json_t *argv, json_t *env,
                            uint32_t timeout_ms, exec_done_fn done, void *data, struct sbx_err *err)
{
    const struct sbx_config *cfg = sb->svc->cfg;
    if (sb->state == SBX_BROKEN && !sandbox_revive_if_room(sb)) {
        json_decref(argv);
        json_decref(env);
        sbx_fail(err, EIO, "sandbox %s cannot run code: %s", sb->id, sb->broken_reason);
        return NULL;
    }
    /* (A run's done may ask for another while its sandbox closes: nothing would end that.) */
    if (sb->closing) {
        json_decref(argv);
        json_decref(env);
        sbx_fail(err, ESHUTDOWN, "sandbox %s is closing", sb->id);
        return NULL;
    }
    if (sb->oneshot && (sb->queue || sb->executions)) {
        json_decref(argv);
        json_decref(env);
        sbx_fail(err, EPERM,
                 "sandbox %s is create_run_close's: it runs that one execution and ends "
                 "(create_sandbox makes a sandbox to keep)",
                 sb->id);
        return NULL;
    }
    if (sb->queue_len >= cfg->max_queue_depth) {
        json_decref(argv);
        json_decref(env);
        sandbox_count_rejection("limits.max_queue_depth");
        sbx_fail(err, EBUSY,
                 "limit reached: limits.max_queue_depth = %u executions are already queued "
                 "(running or waiting) for sandbox %s",
                 cfg->max_queue_depth, sb->id);
        return NULL;
    }
    struct exec *e = xcalloc(1, sizeof(*e));
    e->argv = argv;
    e->env = env;
    e->sb = sb;
    e->call = call;
    snprintf(e->id, sizeof(e->id), "ex-%llu", (unsigned long long)++sb->svc->exec_counter);
    e->language = xstrdup(language);
    e->code = xstrdup(code);
    e->cwd = cwd ? xstrdup(cwd) : NULL;
    e->timeout_ms = timeout_ms;
    for (int i = 0; i < 2; i++) {
        e->spill_fd[i] = -1;
        e->spill_writer[i] =
            (struct jail_writer){.pid = -1, .pidfd = -1, .pipe_fd = -1, .in = -1, .out = -1};
    }
    if (!exec_fits(e)) {
        sbx_fail(err, EFBIG,
                 "the code is too large to send to the sandbox: its request must fit in %u MiB",
                 CHANNEL_MAX_FRAME >> 20);
        exec_free(e); /* with argv and env */
        return NULL;
    }
    e->done = done;
    e->done_data = data;
    outbuf_init(&e->out, cfg->output_cap_bytes);
    outbuf_init(&e->err, cfg->output_cap_bytes);
    if (sb->queue_tail)
        sb->queue_tail->next = e;
    else
        sb->queue = e;
    sb->queue_tail = e;
    sb->queue_len++;
    sandbox_touch(sb);
    if (call)
        mcp_call_on_cancel(call, on_cancel, e);
    exec_start_next(sb);
    return e;
}

int sandbox_exec(struct sandbox *sb, struct mcp_call *call, const char *language, const char *code,
                 const char *cwd, uint32_t timeout_ms, exec_done_fn done, void *data,
                 struct sbx_err *err)
{
    /* The guard reads Python; a shell command would walk past it (python3 -c, say). */
    if (sb->profile->static_guard && strcmp(language, "bash") == 0)
        return sbx_fail(err, EPERM,
                        "profile %s checks code with a static guard, which reads Python only: "
                        "shell commands are not available in it (use a profile without "
                        "static_guard for them)",
                        sb->profile->name);
    return enqueue(sb, call, language, code, cwd, NULL, NULL, timeout_ms, done, data, err) ? 0 : -1;
}

int sandbox_exec_argv(struct sandbox *sb, struct mcp_call *call, const char *language,
                      const char *summary, json_t *argv, json_t *env, const char *cwd,
                      uint32_t timeout_ms, exec_done_fn done, void *data,
                      void (*data_free)(void *data), struct sbx_err *err)
{
    struct exec *e =
        enqueue(sb, call, language, summary, cwd, argv, env, timeout_ms, done, data, err);
    if (!e)
        return -1;
    e->done_data_free = data_free;
    return 0;
}

void exec_start_next(struct sandbox *sb)
{
    /* A settling run is at the head until its result is out (a restarted interpreter may be
     * ready before that). */
    if (sb->closing || sb->state != SBX_READY || !sb->queue || sb->queue->settling)
        return;
    struct exec *e = sb->queue;
    sb->state = SBX_BUSY;
    sandbox_output_for_run(sb);
    e->seq = ++sb->next_seq;
    e->started_ns = now_ns();
    e->started_wall_ms = (int64_t)wall_ms();
    e->cpu_start_known = sb->jail && jail_read_cpu_ns(sb->jail, &e->cpu_start_ns) == 0;
    json_t *frame = exec_frame(e);
    e->deadline = ev_timer_add(sb->svc->loop, e->timeout_ms, on_deadline, e);
    channel_allow_large(&sb->dec); /* its result */
    if (sandbox_send(sb, frame) < 0) {
        /* The driver is gone; its status record arrives and ends this execution. */
        jail_workload_kill(sb->jail);
    }
}

static void keep_recent(struct exec *e, const char *data, size_t len)
{
    if (len >= sizeof(e->recent)) {
        data += len - sizeof(e->recent);
        len = sizeof(e->recent);
    }
    size_t keep = sizeof(e->recent) - len;
    if (e->recent_len > keep) {
        memmove(e->recent, e->recent + e->recent_len - keep, keep);
        e->recent_len = keep;
    }
    memcpy(e->recent + e->recent_len, data, len);
    e->recent_len += len;
}

static void send_progress(struct exec *e)
{
    e->last_progress_ns = now_ns();
    if (!e->call || e->recent_len == 0)
        return;
    /* Progress messages must be valid UTF-8: skip a sequence cut at the start, mask the rest. */
    size_t start = 0;
    while (start < e->recent_len && ((unsigned char)e->recent[start] & 0xC0) == 0x80)
        start++;
    json_t *msg = tool_string_lossy(e->recent + start, e->recent_len - start);
    mcp_call_progress(e->call, (double)++e->progress_count, 0, json_string_value(msg));
    json_decref(msg);
    e->recent_len = 0;
}

static void on_progress_timer(struct ev_loop *loop, void *data)
{
    (void)loop;
    struct exec *e = data;
    e->progress_timer = NULL;
    send_progress(e);
}

/* What one output file may hold: at most a sixteenth of the workspace, so that the files kept
 * (SANDBOX_SPILL_KEEP) take at most a quarter of it. */
static uint64_t spill_cap(const struct sandbox *sb)
{
    uint64_t share = sb->profile->workspace_bytes / 16;
    return share < SPILL_MAX ? share : SPILL_MAX;
}

/* A writer's copier being started on the spawner's thread: the writer is the job's until its
 * done, and the pipe meanwhile takes the output (or holds the stream, full). */
struct writer_launch {
    struct spawn_job job;
    struct exec *e;
    int idx;
    struct jail *jail;
    struct jail_writer w;
    int rc;
    struct sbx_err err;
    bool awaited; /* done comes from spill_end's wait, which goes on by itself */
};

static void launch_run(struct spawn_job *job)
{
    struct writer_launch *l = job->data;
    l->rc = jail_writer_launch(l->jail, &l->w, &l->err);
}

/* The stream's file is given up for a reason the result can name (cut to fit). */
static void spill_failed_because(struct exec *e, int idx, const char *why)
{
    e->spill_failed[idx] = true;
    size_t n = strnlen(why, sizeof(e->spill_why[idx]) - 1);
    memcpy(e->spill_why[idx], why, n);
    e->spill_why[idx][n] = '\0';
}

/* Stream idx's file takes nothing more: what waits for the pipe is dropped, and the stream is
 * let go. */
static void spill_abandon(struct exec *e, int idx)
{
    if (e->spill_w[idx]) {
        ev_unwatch(e->spill_w[idx]);
        e->spill_w[idx] = NULL;
        sandbox_hold_output(e->sb, idx + 1, false);
    }
    free(e->spill_pending[idx]);
    e->spill_pending[idx] = NULL;
    e->spill_pending_len[idx] = 0;
    e->spill_failed[idx] = true;
}

static void launch_done(struct spawn_job *job)
{
    struct writer_launch *l = job->data;
    struct exec *e = l->e;
    int idx = l->idx;
    bool awaited = l->awaited;
    e->launch[idx] = NULL;
    if (l->rc == 0) {
        e->spill_writer[idx].pid = l->w.pid;
        e->spill_writer[idx].pidfd = l->w.pidfd;
    } else {
        log_emit(LOG_LVL_WARNING, "output file writer failed", "error", l->err.msg, NULL);
        spill_abandon(e, idx);
        spill_failed_because(e, idx, l->err.msg);
    }
    free(l);
    if (!awaited && e->settling) {
        spill_close_input(e, idx);
        settle_if_done(e);
    }
}

static void launch_writer(struct exec *e, int idx, struct jail_writer *opened)
{
    struct writer_launch *l = xcalloc(1, sizeof(*l));
    l->job = (struct spawn_job){.run = launch_run, .done = launch_done, .data = l};
    l->e = e;
    l->idx = idx;
    l->jail = e->sb->jail;
    l->w = *opened;
    e->launch[idx] = l;
    spawner_submit(e->sb->svc->spawner, &l->job);
}

/* Before the loop waits for stream idx's writer: its launch is taken back, or has ended. */
static void settle_launch(struct exec *e, int idx)
{
    struct writer_launch *l = e->launch[idx];
    struct spawner *s = e->sb->svc->spawner;
    if (spawner_cancel(s, &l->job)) {
        bool oom = false;
        struct sbx_err err = {0};
        jail_writer_end(&l->w, 0, &oom, &err); /* its ends of the pipe and the file */
        e->launch[idx] = NULL;
        free(l);
        spill_abandon(e, idx); /* the pipe's bytes had no reader: the file is cut */
        return;
    }
    l->awaited = true;
    spawner_await(s, &l->job); /* done now, unless the loop already called it */
}

/* Keeps the newest output files only: the oldest goes when a new one is made. */
static void keep_spill(struct sandbox *sb, const char *path)
{
    char *slot = sb->spill_kept[sb->spill_kept_next++ % SANDBOX_SPILL_KEEP];
    if (slot[0]) {
        struct sbx_err err = {0};
        files_remove(sandbox_root_fd(sb), slot, &err);
    }
    snprintf(slot, sizeof(sb->spill_kept[0]), "%s", path);
}

static void on_spill_room(struct ev_loop *loop, int fd, uint32_t events, void *data);
static void spill_close_input(struct exec *e, int idx);
static void settle_if_done(struct exec *e);

/* Keeps what the writer's pipe did not take, and holds the stream until it has room: the
 * sandbox then waits on its own output, and the server on nothing. */
static void spill_hold(struct exec *e, int idx, const char *data, size_t len)
{
    struct sandbox *sb = e->sb;
    e->spill_pending[idx] = xrealloc(e->spill_pending[idx], e->spill_pending_len[idx] + len);
    memcpy(e->spill_pending[idx] + e->spill_pending_len[idx], data, len);
    e->spill_pending_len[idx] += len;
    if (e->spill_w[idx])
        return;
    struct sbx_err err = {0};
    e->spill_w[idx] = ev_watch(sb->svc->loop, e->spill_fd[idx], EPOLLOUT, on_spill_room, e, &err);
    if (!e->spill_w[idx])
        e->spill_failed[idx] = true;
    else if (!e->settling) /* once it has ended, the sandbox's output is nobody's */
        sandbox_hold_output(sb, idx + 1, true);
}

/* Writes to the stream's file (or its writer's pipe) what it takes now. */
static void spill_put(struct exec *e, int idx, const char *data, size_t len)
{
    if (e->spill_pending_len[idx]) {
        spill_hold(e, idx, data, len); /* after what waits, never before it */
        return;
    }
    while (len) {
        ssize_t n = write(e->spill_fd[idx], data, len);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            spill_hold(e, idx, data, len);
            return;
        } else if (!(n < 0 && errno == EINTR)) {
            /* the workspace is full, or the writer is gone: head and tail still come back */
            e->spill_failed[idx] = true;
            return;
        }
    }
}

static void on_spill_room(struct ev_loop *loop, int fd, uint32_t events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    struct exec *e = data;
    int idx = fd == e->spill_fd[0] ? 0 : 1;
    char *pending = e->spill_pending[idx];
    size_t len = e->spill_pending_len[idx];
    e->spill_pending[idx] = NULL;
    e->spill_pending_len[idx] = 0;
    ev_unwatch(e->spill_w[idx]);
    e->spill_w[idx] = NULL;
    sandbox_hold_output(e->sb, idx + 1, false);
    spill_put(e, idx, pending, len); /* holds again if the pipe is still short of room */
    free(pending);
    if (e->settling) {
        spill_close_input(e, idx);
        settle_if_done(e);
    }
}

/* Appends to a stream's file what its share of the workspace still takes; past that the stream
 * is only marked as cut. */
static void spill_write(struct exec *e, int idx, const char *data, size_t len)
{
    uint64_t cap = spill_cap(e->sb);
    size_t n = len;
    if (e->spilled[idx] + n > cap) {
        n = e->spilled[idx] < cap ? (size_t)(cap - e->spilled[idx]) : 0;
        e->spill_capped[idx] = true;
    }
    if (n)
        spill_put(e, idx, data, n);
    e->spilled[idx] += n;
}

/* Once a stream overflows its cap, the stream also goes to a workspace file (up to spill_cap)
 * so that nothing is lost; the server itself keeps only head and tail. */
static void spill(struct exec *e, int idx, struct outbuf *b, const char *data, size_t len)
{
    struct sandbox *sb = e->sb;
    /* A create_run_close sandbox goes with its run: a file there would be read by nobody. */
    if (e->spill_failed[idx] || sb->oneshot)
        return;
    if (e->spill_fd[idx] < 0) {
        if (outbuf_truncated(b) || b->total + len <= b->cap)
            return;
        snprintf(e->spill_path[idx], sizeof(e->spill_path[idx]), "/workspace/.mcp/output/%s.%s",
                 e->id, idx == 0 ? "stdout" : "stderr");
        uid_t uid;
        gid_t gid;
        sandbox_host_ids(sb, &uid, &gid);
        struct sbx_err err = {0};
        int fd = files_create(sandbox_root_fd(sb), e->spill_path[idx], uid, gid, &err);
        if (fd < 0) {
            spill_failed_because(e, idx, err.msg);
            return;
        }
        /* Its pages are the sandbox's memory: a writer in its group makes them. Its pipe takes
         * the output at once; the copier is started off the loop. */
        struct jail_writer opened;
        if (jail_writer_open(sb->jail, fd, &opened, &err) == 0) {
            close(fd);
            e->spill_fd[idx] = e->spill_writer[idx].pipe_fd = steal_fd(&opened.pipe_fd);
            launch_writer(e, idx, &opened);
        } else if (err.code == ENOTSUP) {
            e->spill_fd[idx] = fd; /* no group to charge, or no pidfd to wait on */
        } else {
            close(fd);
            spill_failed_because(e, idx, err.msg);
            files_remove(sandbox_root_fd(sb), e->spill_path[idx], &err);
            return;
        }
        keep_spill(sb, e->spill_path[idx]);
        /* Not cut yet (checked above): this is the stream so far. */
        size_t have = 0;
        char *sofar = outbuf_render(b, &have);
        spill_write(e, idx, sofar, have);
        free(sofar);
    }
    if (!e->spill_failed[idx])
        spill_write(e, idx, data, len);
}

bool exec_wants_output(const struct sandbox *sb)
{
    return sb->state == SBX_BUSY && sb->queue && !sb->queue->settling;
}

void exec_on_output(struct sandbox *sb, int stream, const char *data, size_t len)
{
    if (!exec_wants_output(sb)) /* background processes printing between runs: dropped */
        return;
    struct exec *e = sb->queue;
    int idx = stream == 1 ? 0 : 1;
    struct outbuf *b = idx == 0 ? &e->out : &e->err;
    spill(e, idx, b, data, len);
    outbuf_append(b, data, len);
    if (!e->call || !mcp_call_wants_progress(e->call))
        return;
    keep_recent(e, data, len);
    uint64_t since = (now_ns() - e->last_progress_ns) / 1000000;
    if (since >= PROGRESS_INTERVAL_MS)
        send_progress(e);
    else if (!e->progress_timer)
        e->progress_timer =
            ev_timer_add(sb->svc->loop, PROGRESS_INTERVAL_MS - since, on_progress_timer, e);
}

bool exec_on_frame(struct sandbox *sb, json_t *frame)
{
    const char *op = json_string_value(json_object_get(frame, "op"));
    json_int_t id = json_integer_value(json_object_get(frame, "id"));
    struct exec *e = sb->queue;
    if (op && strcmp(op, "result") == 0 && sb->state == SBX_BUSY && e && !e->settling &&
        (uint64_t)id == e->seq) {
        channel_forbid_large(&sb->dec);
        e->outcome.frame = json_incref(frame);
        sandbox_drain_output(sb);
        if (!sb->closing && sb->queue == e)
            finish(sb, e);
        return true;
    }
    /* The driver reports only requests it does not know; sandbox code can forge any number. */
    if (op && strcmp(op, "error") == 0 && log_rate_take(&sb->log_rate, sb->id))
        log_emit(LOG_LVL_WARNING, "driver reported an error", "sandbox", sb->id, "message",
                 json_string_value(json_object_get(frame, "message")), NULL);
    return false;
}

void exec_on_driver_exit(struct sandbox *sb, int exit_code, int term_signal, bool restarting)
{
    struct exec *e = sb->queue;
    if (!e || e->settling)
        return; /* a settling run had ended before: the interpreter's restart is another matter */
    e->outcome.driver_died = true;
    /* A create_run_close sandbox goes with its run: nothing starts again there. */
    e->outcome.interpreter_restarted = restarting && !sb->oneshot;
    e->outcome.exit_code = exit_code;
    e->outcome.term_signal = term_signal;
    e->outcome.bad_frame = sb->channel_poisoned;
    finish(sb, e);
}

void exec_fail_all(struct sandbox *sb, const char *reason)
{
    struct exec *list = sb->queue;
    sb->queue = sb->queue_tail = NULL;
    sb->queue_len = 0;
    if (sb->state == SBX_BUSY)
        sb->state = SBX_READY;
    while (list) {
        struct exec *e = list;
        list = e->next;
        if (!e->settling) /* else it had ended, and its outcome stands */
            snprintf(e->outcome.reason, sizeof(e->outcome.reason), "%s", reason);
        e->sandbox_ending = true;
        /* Its files end now, cut if their writers are not done: the sandbox is going (closed,
         * broken) or its processes are being killed (reset), and the loop must not wait for a
         * writer that may be stopped for good while everyone else waits too. */
        spill_end_all(e, 0);
        send_result(sb, e);
        exec_free(e);
    }
    end_oneshot(sb);
}
