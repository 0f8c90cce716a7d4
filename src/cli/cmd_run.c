/* `mcp-sandbox run`: the engine's own front end. Streams the command's output (or captures
 * it, bounded, with --json), passes stdin through, enforces the wall-clock limit, and exits
 * like the command: 124 on timeout, 137 when the OOM killer fired, 128+N on signal N.
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed to the command; a second one kills everything
 * in the sandbox. Either way `run` cleans up (its cgroups) before it exits. SIGTSTP (Ctrl-Z)
 * stops everything in the sandbox, then `run`; once continued, `run` continues the sandbox, and
 * the time it stood stopped does not count against the timeout. */
#include "cli.h"

#include "jail/jail.h"
#include "lib/log.h"
#include "lib/outbuf.h"
#include "lib/util.h"
#include "run_pool_client.h"

#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>

static const char run_usage[] =
    "usage: mcp-sandbox run [--profile NAME] [--memory SIZE] [--cpus N] [--timeout SECONDS]\n"
    "                       [--pids N] [--workspace-size SIZE] [--json] -- CMD [ARGS...]\n";

struct run_opts {
    struct sbx_profile profile;
    bool json;
};

static int parse_args(int argc, char **argv, struct cli_ctx *ctx, struct run_opts *o, int *cmd_idx)
{
    enum { O_PROFILE = 1, O_MEMORY, O_CPUS, O_TIMEOUT, O_PIDS, O_WS, O_JSON, O_HELP };
    static const struct option opts[] = {
        {"profile", required_argument, NULL, O_PROFILE},
        {"memory", required_argument, NULL, O_MEMORY},
        {"cpus", required_argument, NULL, O_CPUS},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"pids", required_argument, NULL, O_PIDS},
        {"workspace-size", required_argument, NULL, O_WS},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    const char *profile = ctx->cfg.default_profile;
    const char *memory = NULL, *cpus = NULL, *timeout = NULL, *pids = NULL, *ws = NULL;
    int c;
    /* "+" stops at the first non-option, so CMD's own flags are never taken for ours. */
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (c) {
        case O_PROFILE:
            profile = optarg;
            break;
        case O_MEMORY:
            memory = optarg;
            break;
        case O_CPUS:
            cpus = optarg;
            break;
        case O_TIMEOUT:
            timeout = optarg;
            break;
        case O_PIDS:
            pids = optarg;
            break;
        case O_WS:
            ws = optarg;
            break;
        case O_JSON:
            o->json = true;
            break;
        case O_HELP:
            fputs(run_usage, stdout);
            return 0;
        default:
            return cli_usage_error("run: unknown option");
        }
    }
    if (optind >= argc)
        return cli_usage_error("run: no command given (usage: run [OPTIONS] -- CMD [ARGS...])");
    if (!argv[optind][0])
        return cli_usage_error("run: the command is an empty string");
    /* mcp-sandbox's global flags may stand anywhere before "--": without it, a --log-file or
     * --config among CMD's own arguments would be taken as ours. */
    if (strcmp(argv[optind - 1], "--") != 0)
        return cli_usage_error("run: put -- before the command: run [OPTIONS] -- %s ...",
                               argv[optind]);
    const struct sbx_profile *p = config_profile(&ctx->cfg, profile);
    if (!p)
        return cli_usage_error("run: unknown profile '%s'", profile);
    o->profile = *p;
    uint64_t v;
    /* The bounds of the same settings in a profile (config.c). */
    if (memory && (parse_size(memory, &v) < 0 || v < (16ull << 20) || v > (1ull << 40)))
        return cli_usage_error("run: --memory wants a size from 16M to 1T, e.g. 256M");
    if (memory)
        o->profile.memory_bytes = v;
    if (ws && (parse_size(ws, &v) < 0 || v < (1ull << 20) || v > (1ull << 40)))
        return cli_usage_error("run: --workspace-size wants a size from 1M to 1T");
    if (ws)
        o->profile.workspace_bytes = o->profile.fsize_bytes = v;
    if (cpus && parse_cpus(cpus, 10, 1024000, &o->profile.cpu_millicpus) < 0)
        return cli_usage_error("run: --cpus wants a number from 0.01 to 1024, e.g. 0.5");
    uint32_t t;
    if (timeout && parse_u32(timeout, 1, 86400, &t) < 0)
        return cli_usage_error("run: --timeout wants whole seconds from 1 to 86400");
    if (timeout)
        o->profile.timeout_ms = t * 1000;
    if (pids && parse_u32(pids, 4, 1000000, &o->profile.pids) < 0)
        return cli_usage_error("run: --pids wants a number from 4 upward");
    *cmd_idx = optind;
    return -1;
}

/* One of the command's output streams. Without --json what it prints is passed on as the
 * reader takes it: one chunk at a time, written only when our fd is writable, so that a reader
 * that stalls holds up the command (through its full pipe) but never this loop, which keeps
 * the deadline and the signals. */
struct stream {
    int fd;     /* our read end, -1 once done */
    int out_fd; /* where to stream (non-json) */
    struct outbuf buf;
    char chunk[65536]; /* read, not yet written: chunk[off..len) */
    size_t off, len;
};

/* Field by field: an initializer would zero the chunk too, 16 pages that each cost a fault
 * (14 us here) before the command has written a byte. */
static void stream_init(struct stream *s, int fd, int out_fd, size_t cap)
{
    s->fd = fd;
    s->out_fd = out_fd;
    s->off = s->len = 0;
    outbuf_init(&s->buf, cap);
}

/* Reads what the command wrote: into the capture with --json, else one chunk to pass on. */
static void stream_read(struct stream *s, bool json)
{
    for (;;) {
        ssize_t n = read(s->fd, s->chunk, sizeof(s->chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close(s->fd);
            s->fd = -1;
            return;
        }
        if (!json) {
            s->off = 0;
            s->len = (size_t)n;
            return;
        }
        outbuf_append(&s->buf, s->chunk, (size_t)n);
    }
}

/* Writes some of the chunk; poll said our fd is writable, and a pipe then takes PIPE_BUF
 * bytes without blocking. A reader that left (EPIPE) gets nothing more: the command's pipe is
 * closed too, so that it ends as it would in a shell pipeline (yes | head -1). */
static void stream_write(struct stream *s)
{
    size_t n = s->len - s->off < PIPE_BUF ? s->len - s->off : PIPE_BUF;
    ssize_t w = write(s->out_fd, s->chunk + s->off, n);
    if (w < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (w < 0) {
        s->off = s->len = 0;
        if (s->fd >= 0)
            close(s->fd);
        s->fd = -1;
        return;
    }
    s->off += (size_t)w;
    if (s->off == s->len)
        s->off = s->len = 0;
}

static json_t *stream_json(struct stream *s)
{
    size_t len;
    char *text = outbuf_render(&s->buf, &len);
    /* Sandbox output is arbitrary bytes, and the head and tail cut may split a character:
     * what is not UTF-8 becomes '?', the characters around it stay. */
    json_t *j = json_stringn(text, len);
    if (!j) {
        utf8_scrub(text, len);
        j = json_stringn(text, len);
    }
    free(text);
    return j ? j : json_string("");
}

/* What --json reports about a run. */
struct run_report {
    int exit_code; /* -1 when the command did not exit by itself */
    int term_signal;
    bool timed_out, oom_killed;
    uint64_t duration_ns;
    struct jail_usage usage;
    double setup_us;
    bool pooled;            /* the run pool's sandbox, built before the run */
    double handover_us;     /* pooled: the command handed over until its exec */
    struct stream *streams; /* stdout, stderr; NULL when the command never started */
    const char *limits_backend;
    const char *degraded; /* comma-separated */
    const char *error;    /* why the command never started */
};

/* The one JSON report, on stdout, also when the command could not start. */
static void print_report(const struct run_report *r)
{
    json_t *rep = json_object();
    json_object_set_new(rep, "exit_code",
                        r->exit_code >= 0 ? json_integer(r->exit_code) : json_null());
    json_object_set_new(rep, "signal", json_integer(r->term_signal));
    json_object_set_new(rep, "timed_out", json_boolean(r->timed_out));
    json_object_set_new(rep, "oom_killed", json_boolean(r->oom_killed));
    json_object_set_new(rep, "duration_ms", json_real((double)r->duration_ns / 1e6));
    json_object_set_new(rep, "cpu_ms", json_real((double)r->usage.cpu_ns / 1e6));
    json_object_set_new(rep, "memory_peak_bytes",
                        json_integer((json_int_t)r->usage.memory_peak_bytes));
    json_object_set_new(rep, "setup_us", json_real(r->setup_us));
    json_object_set_new(rep, "pooled", json_boolean(r->pooled));
    if (r->pooled)
        json_object_set_new(rep, "handover_us", json_real(r->handover_us));
    static const char *const names[] = {"stdout", "stderr"};
    struct stream *of[2] = {r->streams, r->streams ? &r->streams[1] : NULL};
    char key[32];
    for (int k = 0; k < 2; k++)
        json_object_set_new(rep, names[k], of[k] ? stream_json(of[k]) : json_string(""));
    for (int k = 0; k < 2; k++) {
        snprintf(key, sizeof(key), "%s_truncated", names[k]);
        json_object_set_new(rep, key, json_boolean(of[k] && outbuf_truncated(&of[k]->buf)));
    }
    for (int k = 0; k < 2; k++) {
        snprintf(key, sizeof(key), "%s_bytes", names[k]);
        json_object_set_new(rep, key, json_integer(of[k] ? (json_int_t)of[k]->buf.total : 0));
    }
    json_object_set_new(rep, "limits_backend", json_string(r->limits_backend));
    json_t *deg = json_array();
    char *list = xstrdup(r->degraded ? r->degraded : ""), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(deg, json_string(t));
    free(list);
    json_object_set_new(rep, "degraded", deg);
    if (r->error)
        json_object_set_new(rep, "error", json_string(r->error));
    char *text = json_dumps(rep, JSON_COMPACT);
    puts(text);
    free(text);
    json_decref(rep);
}

/* The sandbox the command runs in: one built here (j), or one of the run pool's (pool_fd),
 * which reports how the command ended and what it used. */
struct target {
    struct jail *j;
    int pool_fd;
    struct run_pool_report pool_report;
    bool pool_lost; /* the pool went away before it reported */
};

static int target_fd(const struct target *t)
{
    return t->j ? t->j->pidfd : t->pool_fd;
}

static void target_signal(struct target *t, int sig)
{
    if (t->j)
        jail_signal(t->j, sig);
    else
        run_pool_signal(t->pool_fd, sig);
}

static void target_kill(struct target *t)
{
    if (t->j)
        jail_kill(t->j);
    else
        run_pool_signal(t->pool_fd, SIGKILL);
}

/* 1 once the command has ended and nothing of it runs any more, else 0. */
static int target_try_end(struct target *t, int *exit_code, int *term_signal)
{
    if (t->j)
        return jail_try_reap(t->j, exit_code, term_signal) == 1;
    int r = run_pool_take_end(t->pool_fd, &t->pool_report);
    if (r == 0)
        return 0;
    t->pool_lost = r < 0;
    /* A pool that went away took its sandboxes with it. */
    *exit_code = t->pool_lost ? -1 : t->pool_report.exit_code;
    *term_signal = t->pool_lost ? SIGKILL : t->pool_report.term_signal;
    return 1;
}

/* Ctrl-Z: init stops every process in the sandbox, then this one stops as a shell expects (by
 * SIGTSTP itself, which the kernel discards in an orphaned process group, where nothing would
 * ever continue us). Returns how long we stood stopped. */
static uint64_t stop_with_sandbox(struct target *t)
{
    uint64_t at = now_ns();
    target_signal(t, SIGTSTP);
    sigset_t tstp;
    sigemptyset(&tstp);
    sigaddset(&tstp, SIGTSTP);
    raise(SIGTSTP); /* pending while blocked: its default action runs as it is unblocked */
    sigprocmask(SIG_UNBLOCK, &tstp, NULL);
    sigprocmask(SIG_BLOCK, &tstp, NULL);
    target_signal(t, SIGCONT);
    return now_ns() - at;
}

#define RUN_OUTPUT_CAP (1u << 20) /* per stream, for --json, unless configured */

/* How long output left may still go to a slow reader once a timeout or a stop signal has
 * ended the command. */
#define FLUSH_GRACE_NS 1000000000ull

/* How long a kill may take to show as the end before it is sent again, or (a run pool's
 * sandbox) the pool is given up on. */
#define KILL_GRACE_NS 2000000000ull

/* How long a run pool may take to start the command before run builds its own sandbox. */
#define POOL_ANSWER_MS 1000

/* The shell's codes for a command that did not start: not found 127; found but not runnable
 * (a directory, no x bit, no format the kernel knows) 126; the sandbox itself failed 125. */
static int status_not_started(int code)
{
    return code == ENOENT ? 127 : code == EACCES || code == EISDIR || code == ENOEXEC ? 126 : 125;
}

static int not_started(const struct run_opts *o, const struct sbx_err *err, uint64_t t0,
                       bool pooled)
{
    fprintf(stderr, "mcp-sandbox: %s\n", err->msg);
    int status = status_not_started(err->code);
    if (o->json)
        print_report(&(struct run_report){.exit_code = status,
                                          .duration_ns = now_ns() - t0,
                                          .pooled = pooled,
                                          .limits_backend = "none",
                                          .error = err->msg});
    return status;
}

struct stdio_pipes {
    int out[2], err[2], in[2];
};

static int make_pipes(struct stdio_pipes *p)
{
    if (pipe2(p->out, O_CLOEXEC) < 0 || pipe2(p->err, O_CLOEXEC) < 0 ||
        pipe2(p->in, O_CLOEXEC) < 0) {
        perror("mcp-sandbox: pipe");
        return -1;
    }
    return 0;
}

static void close_pipes(struct stdio_pipes *p)
{
    for (int i = 0; i < 2; i++) {
        cleanup_closep(&p->out[i]);
        cleanup_closep(&p->err[i]);
        cleanup_closep(&p->in[i]);
    }
}

/* Offers the command to a run pool (run.pool = auto or required): *answer says what became of
 * it. SERVED: t->pool_fd runs it. MISSED: the pipes are made anew (a pool that answered late
 * may hold the old ones), and run builds its own sandbox, unless the pool is required.
 * Returns -1 when the pipes could not be made again (said on stderr). */
static int offer_to_pool(struct cli_ctx *ctx, const struct run_opts *o, char *const *argv,
                         struct stdio_pipes *pipes, struct target *t, enum run_pool_answer *answer,
                         struct sbx_err *why)
{
    *answer = RUN_POOL_MISSED;
    cleanup_free char *path = NULL;
    if (run_pool_socket_path(&ctx->cfg, &path, why) < 0)
        return 0;
    struct jail_build_key key;
    jail_build_key(&o->profile, &ctx->cfg, &key);
    int stdio[3] = {pipes->in[0], pipes->out[1], pipes->err[1]};
    *answer = run_pool_offer(path, &key, sizeof(key), argv, stdio, POOL_ANSWER_MS, &t->pool_fd,
                             &t->pool_report, why);
    if (*answer != RUN_POOL_MISSED)
        return 0;
    close_pipes(pipes);
    return make_pipes(pipes);
}

int cmd_run(int argc, char **argv, struct cli_ctx *ctx)
{
    struct run_opts o = {0};
    int cmd_idx = 0;
    int rc = parse_args(argc, argv, ctx, &o, &cmd_idx);
    if (rc >= 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    struct stdio_pipes pipes;
    if (make_pipes(&pipes) < 0)
        return 1;
    struct target t = {.pool_fd = -1};
    struct sbx_err err = {0};
    uint64_t t0 = now_ns();
    /* Taken from a signalfd in the loop, so that a Ctrl-C reaches the command and never
     * leaves this process dead with its cgroups behind. Blocked before the pool is asked (one
     * that comes while it starts the command reaches the command too) and before the spawn:
     * the spawner and init inherit the mask (and block everything anyway); the command gets a
     * clean one. */
    sigset_t passed, unblocked;
    cli_passed_signals(&passed);
    sigaddset(&passed, SIGTSTP);
    sigprocmask(SIG_BLOCK, &passed, &unblocked);
    /* Made before the spawn, as it always was: made after it, the sanitizer build's init (which
     * shares our memory) died of SIGSEGV in about 1 run in 60 under load (the release build
     * in none of 300); we did not find why. */
    int sig_fd = signalfd(-1, &passed, SFD_CLOEXEC | SFD_NONBLOCK);
    /* The copy that runs in a scope of its own was offered to the pool already. */
    enum run_pool_answer pool = RUN_POOL_MISSED;
    if (strcmp(ctx->cfg.run_pool, "off") != 0 && !cli_is_scope_copy()) {
        if (offer_to_pool(ctx, &o, &argv[cmd_idx], &pipes, &t, &pool, &err) < 0)
            return 1;
        if (pool == RUN_POOL_FAILED)
            return not_started(&o, &err, t0, true);
        if (pool == RUN_POOL_MISSED && strcmp(ctx->cfg.run_pool, "required") == 0) {
            char why[SBX_ERR_MSG_MAX + 64];
            snprintf(why, sizeof(why), "run.pool = \"required\", and no run pool served: %s",
                     err.msg);
            fprintf(stderr, "mcp-sandbox: %s\n", why);
            /* --json promises its report also for a command that never started. */
            if (o.json)
                print_report(&(struct run_report){.exit_code = 125,
                                                  .duration_ns = now_ns() - t0,
                                                  .limits_backend = "none",
                                                  .error = why});
            return 125;
        }
    }
    if (pool == RUN_POOL_MISSED) {
        /* The copy starts with our signal mask: not with these blocked. */
        sigprocmask(SIG_SETMASK, &unblocked, NULL);
        rc = cli_rerun_in_own_scope(ctx);
        if (rc >= 0)
            return rc;
        sigprocmask(SIG_BLOCK, &passed, NULL);
        struct jail_spec spec = {
            .profile = &o.profile,
            .cfg = &ctx->cfg,
            .argv = &argv[cmd_idx],
            .stdin_fd = pipes.in[0],
            .stdout_fd = pipes.out[1],
            .stderr_fd = pipes.err[1],
            .name = NULL,         /* this process's only sandbox: its cgroup is mcp-sandbox.<pid> */
            .share_memory = true, /* we live exactly as long as it: init needs no copy of us */
        };
        t0 = now_ns();
        if (jail_spawn(&spec, &t.j, &err) < 0) {
            jail_shutdown();
            return not_started(&o, &err, t0, false);
        }
        /* And init is spared outright where we may lower the score (root with
         * CAP_SYS_RESOURCE): the kernel applies it to every process of this memory, init's
         * too, not the command's. */
        if (t.j->cg)
            write_file_str("/proc/self/oom_score_adj", "-1000");
    }
    close(pipes.in[0]);
    close(pipes.out[1]);
    close(pipes.err[1]);
    fcntl(pipes.out[0], F_SETFL, O_NONBLOCK);
    fcntl(pipes.err[0], F_SETFL, O_NONBLOCK);
    fcntl(pipes.in[1], F_SETFL, O_NONBLOCK);

    /* A command's output is kept to 1 MiB per stream unless the configuration says otherwise
     * (its own default, 64 KiB, is for tool results, which a model reads). */
    size_t cap = config_source_of(&ctx->cfg, "isolation.output_cap_bytes") == CONFIG_SRC_DEFAULT
                     ? RUN_OUTPUT_CAP
                     : ctx->cfg.output_cap_bytes;
    struct stream streams[2];
    stream_init(&streams[0], pipes.out[0], 1, cap);
    stream_init(&streams[1], pipes.err[0], 2, cap);
    int child_in = pipes.in[1];
    bool stdin_open = true;
    char inbuf[65536];
    size_t in_len = 0, in_off = 0;
    uint64_t deadline = t0 + (uint64_t)o.profile.timeout_ms * 1000000ull;
    bool timed_out = false, exited = false, grace_over = false;
    int exit_code = -1, term_signal = 0;
    int signals_seen = 0;
    int abandoned_by = 0; /* the signal that came once it had ended, output still waiting */
    /* Once the sandbox has ended, what is left of its output still goes to our reader; but
     * not past a signal, nor (when a timeout or a stop signal ended it) past a short grace
     * from its end, whatever the reader does. */
    uint64_t flush_until = UINT64_MAX;

    while (!abandoned_by && (!exited || streams[0].fd >= 0 || streams[1].fd >= 0 ||
                             streams[0].len || streams[1].len)) {
        struct pollfd pfd[6];
        int n = 0, i_in = -1, i_child = -1, i_end = -1, i_sig = -1, i_stream[2] = {-1, -1};
        for (int k = 0; k < 2; k++) {
            /* A chunk to pass on waits for our reader; only then is more read. */
            if (streams[k].len)
                i_stream[k] = n, pfd[n++] = (struct pollfd){streams[k].out_fd, POLLOUT, 0};
            else if (streams[k].fd >= 0)
                i_stream[k] = n, pfd[n++] = (struct pollfd){streams[k].fd, POLLIN, 0};
        }
        if (stdin_open && child_in >= 0 && in_len == in_off)
            i_in = n, pfd[n++] = (struct pollfd){0, POLLIN, 0};
        if (child_in >= 0 && in_len > in_off)
            i_child = n, pfd[n++] = (struct pollfd){child_in, POLLOUT, 0};
        if (!exited)
            i_end = n, pfd[n++] = (struct pollfd){target_fd(&t), POLLIN, 0};
        if (sig_fd >= 0)
            i_sig = n, pfd[n++] = (struct pollfd){sig_fd, POLLIN, 0};
        uint64_t now = now_ns(), until = exited ? flush_until : deadline;
        int wait_ms = -1;
        if (until != UINT64_MAX)
            wait_ms = now >= until ? 0 : (int)((until - now) / 1000000ull) + 1;
        int r = poll(pfd, (nfds_t)n, wait_ms);
        if (r < 0 && errno != EINTR)
            break;
        if (!exited && now_ns() >= deadline) {
            if (!timed_out) {
                timed_out = true;
                target_kill(&t);
            } else if (t.j) {
                target_kill(&t);
            } else {
                /* A pool told to kill that has not reported the end (stopped, stuck): given up
                 * on; closing the connection tells it again. */
                t.pool_lost = true;
                exited = true;
                term_signal = SIGKILL;
                flush_until = now_ns() + FLUSH_GRACE_NS;
                cleanup_closep(&child_in);
            }
            deadline = now_ns() + KILL_GRACE_NS;
        }
        if (exited && now_ns() >= flush_until) {
            grace_over = true;
            break;
        }
        if (r <= 0)
            continue;
        for (int k = 0; k < 2; k++) {
            if (i_stream[k] < 0 || !pfd[i_stream[k]].revents)
                continue;
            if (streams[k].len)
                stream_write(&streams[k]);
            else
                stream_read(&streams[k], o.json);
        }
        if (i_in >= 0 && pfd[i_in].revents) {
            ssize_t got = read(0, inbuf, sizeof(inbuf));
            if (got <= 0) {
                stdin_open = false;
                close(child_in);
                child_in = -1;
            } else {
                in_len = (size_t)got;
                in_off = 0;
            }
        }
        if (i_child >= 0 && pfd[i_child].revents) {
            ssize_t w = write(child_in, inbuf + in_off, in_len - in_off);
            if (w < 0 && errno != EAGAIN) {
                close(child_in); /* the command closed its stdin */
                child_in = -1;
                stdin_open = false;
            } else if (w > 0) {
                in_off += (size_t)w;
            }
        }
        if (i_sig >= 0 && pfd[i_sig].revents) {
            struct signalfd_siginfo si;
            while (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                int sig = (int)si.ssi_signo;
                if (sig == SIGTSTP) {
                    uint64_t stopped = stop_with_sandbox(&t);
                    deadline += stopped;
                    if (flush_until != UINT64_MAX)
                        flush_until += stopped;
                } else if (exited) {
                    abandoned_by = sig; /* told to go while output waited for its reader */
                } else if (!cli_is_stop_signal(sig)) {
                    target_signal(&t, sig); /* SIGUSR1 and the like: the command's to handle */
                } else {
                    /* The first goes to the command (through init), which may handle it; a
                     * second means stop now. */
                    if (signals_seen++ == 0)
                        target_signal(&t, sig);
                    else
                        target_kill(&t);
                }
            }
        }
        if (i_end >= 0 && pfd[i_end].revents) {
            if (target_try_end(&t, &exit_code, &term_signal) == 1) {
                exited = true;
                /* Told to stop (or timed out): output is not held for long after the end. */
                if (timed_out || signals_seen)
                    flush_until = now_ns() + FLUSH_GRACE_NS;
                /* Whatever is left in the sandbox died with its init. */
                if (child_in >= 0) {
                    close(child_in);
                    child_in = -1;
                }
            }
        }
    }
    uint64_t duration_ns = now_ns() - t0;
    /* Without --json only the OOM verdict is needed. */
    struct jail_usage usage = {0};
    if (!t.j) {
        usage.memory_peak_bytes = t.pool_report.memory_peak_bytes;
        usage.cpu_ns = t.pool_report.cpu_ns;
        usage.oom_killed = t.pool_report.oom_killed;
    } else if (o.json) {
        jail_read_usage(t.j, &usage);
    } else {
        usage.oom_killed = jail_oom_killed(t.j);
    }
    bool oom = usage.oom_killed && !timed_out;
    const char *degraded = t.j ? t.j->degraded : t.pool_report.degraded;

    int status;
    if (timed_out)
        status = 124;
    else if (t.pool_lost)
        status = 125;
    else if (oom)
        status = 137;
    else if (term_signal)
        status = 128 + term_signal;
    else
        status = exit_code;
    /* Told to go while output still waited for its reader: as if the signal had ended us,
     * which the caller can tell from the command's own status. */
    if (abandoned_by)
        status = 128 + abandoned_by;

    if (t.pool_lost && !timed_out)
        fprintf(stderr, "mcp-sandbox: the run pool ended while the command ran (it was "
                        "killed with the pool's sandboxes)\n");
    else if (t.pool_lost)
        fprintf(stderr, "mcp-sandbox: the run pool did not report the end of the command it was "
                        "told to kill; run stopped waiting for it\n");
    if (o.json) {
        print_report(&(struct run_report){
            .exit_code = exit_code,
            .term_signal = term_signal,
            .timed_out = timed_out,
            .oom_killed = oom,
            .duration_ns = duration_ns,
            .usage = usage,
            .setup_us = (double)(t.j ? t.j->setup_ns : t.pool_report.setup_ns) / 1e3,
            .pooled = !t.j,
            .handover_us = (double)t.pool_report.command_ns / 1e3,
            .streams = streams,
            .limits_backend = t.j ? t.j->limits_backend : t.pool_report.limits_backend,
            .degraded = degraded,
            .error = t.pool_lost ? "the run pool ended while the command ran" : NULL});
    } else if (timed_out) {
        fprintf(stderr, "mcp-sandbox: timed out after %u s; everything in the sandbox was killed\n",
                o.profile.timeout_ms / 1000);
    } else if (oom) {
        fprintf(stderr, "mcp-sandbox: the OOM killer fired (memory limit %llu bytes)\n",
                (unsigned long long)o.profile.memory_bytes);
    }
    if (signals_seen > 1 && !o.json)
        fprintf(stderr, "mcp-sandbox: signalled twice: everything in the sandbox was killed\n");
    if ((abandoned_by || grace_over) && !o.json)
        fprintf(stderr, "mcp-sandbox: output the reader had not taken was dropped (%s)\n",
                abandoned_by ? "a signal came after the command ended"
                             : "a second after a stopped or timed-out command ended");
    if (degraded[0])
        fprintf(stderr, "mcp-sandbox: DEGRADED: running without %s\n", degraded);
    outbuf_free(&streams[0].buf);
    outbuf_free(&streams[1].buf);
    if (child_in >= 0)
        close(child_in);
    for (int i = 0; i < 2; i++)
        if (streams[i].fd >= 0)
            close(streams[i].fd);
    if (t.j) {
        /* The groups of a run that was SIGKILLed are removed by the next one that builds its
         * own sandbox (about 30 us here, once the caller has its output). */
        jail_sweep_stale();
        jail_destroy(t.j);
        jail_shutdown();
    } else {
        close(t.pool_fd);
    }
    if (sig_fd >= 0)
        close(sig_fd);
    return status;
}
