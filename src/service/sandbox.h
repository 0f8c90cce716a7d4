/* The sandbox service: a table of live sandboxes, each a persistent jail with a Python driver
 * in it, owned by one principal, with a queue of executions. Everything runs on the server's
 * one event loop: spawning, driver frames, output pipes, timeouts and the warm pool; only the
 * jails of the warm pool and of create_sandbox are begun on the spawner's thread (spawner.h). */
#ifndef SBX_SANDBOX_H
#define SBX_SANDBOX_H

#include "channel.h"
#include "config.h"
#include "err.h"
#include "jail/jail.h"
#include "log.h"
#include "loop.h"
#include "outbuf.h"
#include "spawner.h"
#include "strmap.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Output files kept per sandbox (a run that overflows both streams makes two). */
#define SANDBOX_SPILL_KEEP 4

struct egress_proxy;
struct ev_loop;
struct ev_watch;
struct ev_timer;
struct history;
struct history_record;
struct jail;
struct mcp_call;
struct mcp_server;
struct sandbox;
struct sandbox_service;

enum sandbox_state {
    SBX_STARTING = 0, /* jail up, driver not ready yet */
    SBX_READY,        /* idle, driver ready */
    SBX_BUSY,         /* an execution runs, or its result waits for its files (settling) */
    SBX_RESTARTING,   /* the driver died or was killed; a fresh one is on its way */
    SBX_BROKEN,       /* the sandbox ended (only close is left), or its interpreter cannot
                         start (broken_revivable: a reset may start one) */
};

/* How an interpreter that died between executions ended. Its successor has none of the state
 * of earlier cells, which the next result must say: the model would otherwise meet a NameError
 * it cannot explain. */
struct idle_death {
    bool pending; /* no result has said so yet */
    int exit_code;
    int term_signal;
    bool oom_killed;
    bool bad_frame;        /* the service killed it: its channel carried a bad frame, or a flood */
    bool in_cancelled_run; /* it died in a run whose client had cancelled it: nobody heard */
};

/* How an execution ended, for its result and the metrics. */
struct exec_outcome {
    json_t *frame; /* the driver's result frame, NULL if none came */
    bool timed_out;
    bool cancelled;
    bool interpreter_restarted;
    bool driver_died; /* the interpreter exited or was killed during the execution */
    int exit_code;    /* of the driver when it died */
    int term_signal;  /* that killed the driver */
    bool oom_killed;  /* the sandbox hit its memory limit */
    bool bad_frame;   /* killed by the service: its channel carried a bad frame, or a flood */
    uint64_t cpu_ns;  /* CPU time of the run (see account_cpu in exec.c) */
    char reason[256]; /* why it failed when there is no frame */
    /* Pending when the interpreter had died before this run, and this result says so. */
    struct idle_death idle_death;
};

struct exec;
/* Called once when an execution ends; e->call is NULL if the client cancelled it. */
typedef void (*exec_done_fn)(struct exec *e);

/* One execution waiting in, or running or settling at the head of, a sandbox's queue. */
struct exec {
    struct sandbox *sb;
    struct mcp_call *call; /* NULL once the client cancelled: the run still finishes */
    char id[24];           /* execution_id */
    uint64_t seq;          /* channel request id */
    char *language;
    char *code;
    char *cwd;
    json_t *argv; /* a command run as is instead of code (install_packages), or NULL */
    json_t *env;  /* with argv: its whole environment (an object), or NULL */
    uint32_t timeout_ms;
    uint64_t started_ns;
    uint64_t ended_ns; /* when the run ended, before its files settled; 0 until then */
    int64_t started_wall_ms;
    uint64_t cpu_start_ns; /* the sandbox cgroup's CPU time at the start */
    bool cpu_start_known;
    struct outbuf out, err;
    /* Full output files in the workspace once a stream overflows: spill_fd is the pipe to
     * the writer that copies into the file, charged to the sandbox (jail_writer_open), or
     * the file itself where the sandbox has no cgroup; -1 before. */
    int spill_fd[2];
    struct jail_writer spill_writer[2];
    /* What the writer's full pipe did not take yet; the stream is held meanwhile. */
    char *spill_pending[2];
    size_t spill_pending_len[2];
    struct ev_watch *spill_w[2];  /* the pipe, while something is pending */
    struct ev_watch *writer_w[2]; /* the writer's pidfd, while the run settles */
    /* The writer's copier being started off the loop; its pipe takes the output meanwhile. */
    struct writer_launch *launch[2];
    char spill_path[2][96];
    uint64_t spilled[2];
    bool spill_capped[2]; /* the stream went on past what its file takes */
    struct ev_timer *deadline;
    struct ev_timer *grace;
    struct ev_timer *progress_timer;
    uint64_t last_progress_ns;
    size_t progress_sent[2]; /* bytes of each stream already streamed as progress */
    unsigned progress_count;
    char recent[1024]; /* the newest output, streamed as progress messages */
    size_t recent_len;
    bool interrupting;
    bool spill_failed[2];
    char spill_why[2][256]; /* why, where it is known: the file or its writer could not be made */
    /* The run has ended, and its result waits for the output files' writers to finish; the
     * sandbox stays busy meanwhile, and the loop serves everyone else. */
    bool settling;
    bool sandbox_ending; /* ended by exec_fail_all: the sandbox closes, broke or is reset */
    struct ev_timer *settle_timer;
    struct exec_outcome outcome;
    exec_done_fn done;
    void *done_data;
    /* Frees done_data when done is never called (a queued run cancelled); done owns it. */
    void (*done_data_free)(void *data);
    struct exec *next;
};

/* A call that needs a sandbox's files, waiting for its jail and setup (sandbox_wait_setup). */
struct sandbox_wait {
    struct ev_task task;  /* posted once the setup has ended or the sandbox closes */
    struct sandbox *sb;   /* while queued on it */
    struct ev_loop *loop; /* the task's */
    struct sandbox_wait *next;
};

struct sandbox {
    struct sandbox_service *svc;
    char id[24];
    char *name;
    char *owner; /* NULL while the sandbox waits in the warm pool */
    const struct sbx_profile *profile;
    char network[16];
    int64_t created_ms, last_used_ms;  /* wall clock: the dates shown */
    uint64_t created_ns, last_used_ns; /* monotonic: what the lifecycle limits measure */
    enum sandbox_state state;
    struct jail *jail;
    int chan_fd, out_fd, err_fd; /* our ends: the driver's frames, its stdout and stderr */
    int req_fd, req_rfd;         /* the pipe the driver reads requests from: both ends */
    struct ev_watch *chan_w, *out_w, *err_w, *status_w;
    struct ev_watch *setup_w; /* until the jail's setup has ended (jail_spawn_begin) */
    /* The spawner is still beginning its jail (a refill, or sandbox_create_soon): it has no
     * jail and no watches yet. */
    bool spawning;
    struct spawn_job spawn_job;
    struct jail_spec spec; /* what the jail is begun from */
    char *argv[6];         /* spec's */
    int pass_fds[2];       /* spec's: fd 3 and fd 4 in the sandbox */
    int child_fds[3];      /* the driver's ends of the channel, stdout and stderr, until cloned */
    struct jail *spawned;  /* what the spawner began, or NULL and spawn_err says why */
    struct sbx_err spawn_err;
    /* Who waits for the jail of a sandbox handed out while spawning (sandbox_create_soon). */
    void (*begun_fn)(struct sandbox *sb, const char *error, void *data);
    void *begun_data;
    struct sandbox_wait *setup_waits;  /* calls waiting for the setup to end */
    struct ev_timer *setup_wait_timer; /* how long they wait at most (setup_wait_ms) */
    struct ev_watch *req_w;            /* while requests wait for room in the pipe */
    char *req_buf; /* those requests (a bounded queue: one execution at a time) */
    size_t req_len, req_off;
    struct channel_decoder dec;
    uint64_t next_seq;
    uint64_t executions;
    unsigned restarts;       /* quick deaths in a row: too many mark the sandbox broken */
    uint64_t restarts_total; /* interpreter restarts since creation or reset, as reported */
    uint64_t oom_kills_seen; /* the cgroup's OOM kill count when last looked at */
    /* Interpreters started again in this sandbox: the one a status record is for. */
    uint64_t interpreter_gen;
    /* A reset killed interpreter reset_gen: its restart is the reset's, not a death's. A reset
     * that found none running (its start pending on the revival timer) kills nothing, and the
     * next interpreter's death is a death. */
    bool reset_restart;
    uint64_t reset_gen;
    /* The interpreter died while ready, for the next result to say. */
    struct idle_death idle_death;
    /* It died while the last run settled: after that run, so the result after it says so. */
    struct idle_death death_after_run;
    bool pooled;
    bool is_default;   /* the owner's default sandbox */
    bool oneshot;      /* create_run_close's: closed once its one execution is over */
    bool failed_start; /* its jail, setup or first interpreter failed: it never ran anything */
    bool ended;        /* its init died: nothing runs there again */
    /* A default sandbox made in place of one that ended: what the next call's result says
     * first (sandbox_take_notice). */
    char *notice;
    bool closing;
    bool channel_poisoned;           /* a bad frame came: drop channel bytes until the restart */
    uint32_t stray_frames;           /* frames no request asked for, since the last result */
    struct exec *queue, *queue_tail; /* head runs, or settles, when state is SBX_BUSY */
    size_t queue_len;
    struct ev_timer *start_timer; /* the driver must be ready in time */
    json_t *packages;             /* [{name, version}] installed in this sandbox */
    struct egress_proxy *proxy;   /* network: packages only */
    char broken_reason[320];
    bool broken_revivable; /* only the interpreter keeps dying: a reset may start it again */
    bool broken_for_room;  /* files left it no room: the next run starts one if they shrank */
    struct ev_timer *revive_timer; /* such a reset's start of a new interpreter */
    /* Output while no run takes it is read a bite at a time; this reads the next bite. */
    struct ev_timer *idle_output_timer;
    /* The newest output files (exec.c): older ones are deleted, or they would fill /workspace. */
    char spill_kept[SANDBOX_SPILL_KEEP][96];
    unsigned spill_kept_next;
    struct ev_timer *free_timer;
    struct log_rate log_rate; /* for the lines its code can repeat (its interpreter's deaths) */
    struct sandbox *next;
};

/* Builds a download URL for a workspace file (the HTTP transport provides it); malloc'd. */
typedef char *(*sandbox_link_fn)(void *data, const char *sandbox_id, const char *rel_path);

struct dying_jail;

struct sandbox_service {
    struct ev_loop *loop;
    struct mcp_server *srv;
    const struct sbx_config *cfg;
    struct history *history;
    struct sandbox *list;
    struct strmap by_id;       /* the sandboxes of list, by id */
    struct strmap defaults;    /* each owner's default sandbox, by owner */
    struct sandbox *graveyard; /* closed, freed on the next loop turn */
    struct dying_jail *dying;  /* closed sandboxes' jails, killed, until init is gone */
    size_t n_dying;            /* at most max_sandboxes */
    size_t n_live;             /* owned sandboxes (pool excluded) */
    size_t n_pool;
    struct ev_timer *sweeper;
    struct ev_timer *refill;
    struct spawner *spawner;        /* jails begun off the loop (the pool's, create_sandbox's) */
    struct ev_timer *history_timer; /* batched history writes */
    struct ev_timer *purge_timer;   /* deleting closed sandboxes past their retention */
    uint64_t exec_counter;
    /* How long a sandbox may take from its spawn until its driver says ready (tests shorten
     * it). */
    int ready_timeout_ms;
    /* The longest the loop waits for a setup that something needs before it has ended (tests
     * shorten it); past it the setup is abandoned like at the ready timeout. */
    int setup_wait_ms;
    /* A refill failed: refills wait until a sandbox is taken from the pool, or until
     * refill_retry fires (refill_retry_ms later; tests shorten it). */
    bool refill_paused;
    struct ev_timer *refill_retry;
    int refill_retry_ms;
    bool stopping;           /* the server is shutting down: free at once, no refills */
    sandbox_link_fn link_fn; /* set by the HTTP transport: download URLs in links */
    void *link_data;
    /* network: packages sandboxes: what their proxies allow, their lookups, their environment */
    struct egress_policy *egress;
    struct resolver *resolver;
    char **packages_env;
    /* Sandboxes the server closed on a limit (idle, age), so that their owner's next call
     * hears why instead of "unknown": the last 32, the oldest overwritten. */
    struct expired_sandbox {
        char id[24];
        char *owner;
        char why[128];
    } expired[32];
    unsigned expired_next;
};

int sandbox_service_new(struct ev_loop *loop, struct mcp_server *srv, const struct sbx_config *cfg,
                        struct sandbox_service **out, struct sbx_err *err);
void sandbox_service_free(struct sandbox_service *svc);

/* Creates a sandbox for owner, from the warm pool when one is ready. Limits are checked and
 * named in the error. */
int sandbox_create(struct sandbox_service *svc, const char *owner, const char *name,
                   const char *profile, const char *network, struct sandbox **out,
                   struct sbx_err *err);
/* Like sandbox_create, except that the loop does not wait while a jail is begun: the sandbox
 * may come back spawning (listed, and usable by id: what needs the jail waits for it), and
 * then fn is called once from the loop when its jail exists (error NULL) or could not be made
 * (error says why; the sandbox is broken, and fn closes it), or with "the sandbox was closed"
 * from inside a close. fn may so be called from inside another operation on the sandbox (a
 * file tool, a reset, a close). Not called for a sandbox that did not come back spawning.
 * fn may be NULL: executions queued meanwhile start once the interpreter is ready, or fail
 * with why it could not start. */
int sandbox_create_soon(struct sandbox_service *svc, const char *owner, const char *name,
                        const char *profile, const char *network,
                        void (*fn)(struct sandbox *sb, const char *error, void *data), void *data,
                        struct sandbox **out, struct sbx_err *err);
/* Whoever waited for the jail went away: fn is not called. */
void sandbox_forget_begun(struct sandbox *sb);
/* Finds owner's sandbox by id; another owner's id answers like an unknown one (ENOENT). With
 * id NULL, the owner's default sandbox, created on first use as sandbox_create_soon does, with
 * no fn: it may come back spawning. */
int sandbox_lookup(struct sandbox_service *svc, const char *owner, const char *id,
                   struct sandbox **out, struct sbx_err *err);
/* The same, for a call that runs code or uses files there: a default sandbox that failed to
 * start, or whose init died, is replaced (sandbox_lookup returns it, to be looked at or
 * closed); the one in place of a dead one holds a notice saying so. */
int sandbox_lookup_to_work(struct sandbox_service *svc, const char *owner, const char *id,
                           struct sandbox **out, struct sbx_err *err);
/* The notice the sandbox holds for the next call's result (NULL if none), handed over once. */
char *sandbox_take_notice(struct sandbox *sb);
/* The error for an id that none of the owner's sandboxes, open or closed, has: the same words
 * wherever an id is looked up. Returns -1. */
int sandbox_fail_unknown_id(const char *id, struct sbx_err *err);
/* Any owner's sandbox by id (for signed links, which carry their own authority), or NULL. */
struct sandbox *sandbox_find(struct sandbox_service *svc, const char *id);
/* Ends the sandbox: queued executions fail, the running one is abandoned, the jail is
 * destroyed. final_usage (optional) gets its last usage. */
void sandbox_close(struct sandbox *sb, json_t **final_usage);
void sandbox_close_owner(struct sandbox_service *svc, const char *owner);

/* Queues an execution. done is called exactly once (from the loop) with the outcome. */
int sandbox_exec(struct sandbox *sb, struct mcp_call *call, const char *language, const char *code,
                 const char *cwd, uint32_t timeout_ms, exec_done_fn done, void *data,
                 struct sbx_err *err);
/* Queues a command the server composed, run without a shell: argv (an array of strings) with
 * exactly the environment env (an object of strings, or NULL for the sandbox's), in cwd; both
 * stolen. Nothing the sandbox's own code changed in the interpreter's environment reaches it.
 * summary stands for it in the history. Otherwise like sandbox_exec. */
int sandbox_exec_argv(struct sandbox *sb, struct mcp_call *call, const char *language,
                      const char *summary, json_t *argv, json_t *env, const char *cwd,
                      uint32_t timeout_ms, exec_done_fn done, void *data,
                      void (*data_free)(void *data), struct sbx_err *err);
/* Refuses a reset of create_run_close's sandbox, which ends with its one execution. */
int sandbox_check_reset(const struct sandbox *sb, struct sbx_err *err);
/* A sandbox whose files left no room for an interpreter starts one if they shrank since
 * (write_file, say): true when it does, and a run may be queued. */
bool sandbox_revive_if_room(struct sandbox *sb);
/* Kills the interpreter and starts a fresh one (variables gone, files kept). A sandbox broken
 * only because its interpreter kept dying at startup gets a fresh one too. */
int sandbox_restart_interpreter(struct sandbox *sb, struct sbx_err *err);
/* Records an execution in the history (written in a batch shortly after); subscribers to the
 * sandbox's history resource hear of it. */
void sandbox_history_add(struct sandbox *sb, const struct history_record *rec);
/* Tells the owner's sessions subscribed to sandbox://ID/history, or to the file (a path in the
 * sandbox: only /workspace's files are resources), that it changed. */
void sandbox_history_changed(const struct sandbox *sb);
void sandbox_file_changed(const struct sandbox *sb, const char *path);
/* A path in the sandbox as the files resources name it: below /workspace, without it. */
const char *sandbox_file_rel(const char *path);
/* The resource URI of a file in the sandbox, sandbox://ID/files/REL, REL encoded (malloc'd). */
char *sandbox_file_uri(const struct sandbox *sb, const char *path);
/* Prometheus series: active sandboxes and the warm pool; refusals by the limit that fired. */
void sandbox_update_gauges(struct sandbox_service *svc);
/* The sandbox was used now: its idle TTL starts again. */
void sandbox_touch(struct sandbox *sb);
void sandbox_count_rejection(const char *reason);
/* Whether the service can take work now: the warm pool, if configured, has a ready sandbox. */
bool sandbox_service_ready(const struct sandbox_service *svc, json_t **detail);
/* The host uid and gid that the sandbox user maps to: files the server writes get them. */
void sandbox_host_ids(const struct sandbox *sb, uid_t *uid, gid_t *gid);
/* Reads whatever the pipes hold into the running execution (after its result frame). */
void sandbox_drain_output(struct sandbox *sb);
/* A run starts: output held back while none ran is dropped, and reading goes on at once. */
void sandbox_output_for_run(struct sandbox *sb);
/* Stops (hold) or resumes reading a stream (1 stdout, 2 stderr) of the sandbox: while held,
 * what its processes write waits in the pipe, and they block once it is full. */
void sandbox_hold_output(struct sandbox *sb, int stream, bool hold);
/* Sends a request frame that is not an execution (refresh_imports). */
int sandbox_send(struct sandbox *sb, json_t *frame);

/* The installed packages recorded in a history_get_sandbox() answer (a new reference). */
json_t *sandbox_info_packages(const json_t *info);
json_t *sandbox_limits_json(const struct sbx_profile *p);
json_t *sandbox_usage_json(struct sandbox *sb);
const char *sandbox_state_name(enum sandbox_state st);
/* The sandbox's root directory (for the file tools), or -1 if it has none. It arrives with
 * the end of the setup, which this never waits for: a tool waits first, off the loop
 * (sandbox_wait_setup). */
int sandbox_root_fd(struct sandbox *sb);
/* Whether the sandbox's jail is still being begun or set up. */
bool sandbox_setting_up(const struct sandbox *sb);
/* Posts fn(data) on the loop once that has ended (whether it worked or not) or the sandbox is
 * closed: then sandbox_root_fd has the root, if there is one. w is the caller's until then, or
 * until sandbox_wait_cancel. */
void sandbox_wait_setup(struct sandbox *sb, struct sandbox_wait *w, ev_timer_cb fn, void *data);
void sandbox_wait_cancel(struct sandbox_wait *w);
/* Whether the OOM killer took a process of the sandbox (a child, or the interpreter) since the
 * last look, given the run's memory peak: only a group that reached its limit can have had
 * one, so the count is read only then (or when the interpreter died). */
bool sandbox_oom_since_last_look(struct sandbox *sb, bool driver_died, uint64_t peak);
/* sb->packages made what its packages directory holds: pip run by hand adds to it, and what
 * was removed goes; the history is told of a change. */
void sandbox_sync_packages(struct sandbox *sb);
/* files_open_as, files_read and files_list in the sandbox, with its user's access rights. */
int sandbox_open_file(struct sandbox *sb, const char *canon, int flags, struct sbx_err *err);
int sandbox_list_files(struct sandbox *sb, const char *canon, bool recursive, size_t skip,
                       size_t max_entries, json_t **entries, bool *truncated, struct sbx_err *err);
int sandbox_read_file(struct sandbox *sb, const char *canon, uint64_t offset, uint64_t length,
                      uint64_t max, char **data, size_t *len, uint64_t *size, struct sbx_err *err);
/* files_write in the sandbox, its pages charged to the sandbox's memory (jail_write_charged). */
int sandbox_write_file(struct sandbox *sb, const char *canon, const void *data, size_t len,
                       struct sbx_err *err);
/* The bytes used on the file system of dir (one of files_areas), 0 if unknown. */
uint64_t sandbox_fs_used_bytes(struct sandbox *sb, const char *dir);
/* ", of which files in /workspace, /tmp and /dev/shm hold N MiB (...)" when they hold a quarter
 * of the memory limit or more, else "": tmpfs files are memory, charged to the sandbox that
 * wrote them. */
void sandbox_memory_in_files(struct sandbox *sb, char *buf, size_t len);

/* exec.c: the execution engine behind sandbox_exec. */
void exec_start_next(struct sandbox *sb);
/* Whether the frame was the result the running execution waits for. */
bool exec_on_frame(struct sandbox *sb, json_t *frame);
void exec_on_output(struct sandbox *sb, int stream, const char *data, size_t len);
/* Whether a run takes the sandbox's output now (else it is dropped). */
bool exec_wants_output(const struct sandbox *sb);
/* The interpreter died during the running execution; restarting: whether a new one starts. */
void exec_on_driver_exit(struct sandbox *sb, int exit_code, int term_signal, bool restarting);
void exec_fail_all(struct sandbox *sb, const char *reason);
void exec_free(struct exec *e);
/* From the run's start to its end (not to its files' settling); 0 if it never started. */
double exec_duration_ms(const struct exec *e);

/* Registers every sandbox tool and resource with the protocol layer. */
int tools_sandbox_register(struct sandbox_service *svc, struct sbx_err *err);
int tools_packages_register(struct sandbox_service *svc, struct sbx_err *err);
int tools_files_register(struct sandbox_service *svc, struct sbx_err *err);
int resources_sandbox_register(struct sandbox_service *svc, struct sbx_err *err);

#endif
