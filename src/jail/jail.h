/* The isolation engine's public API: one call builds a sandbox from kernel primitives and
 * execs a command in it. Non-blocking after spawn: callers watch pidfd (readable on exit) and
 * the stdio pipes from their own event loop. */
#ifndef SBX_JAIL_H
#define SBX_JAIL_H

#include "config.h"
#include "err.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

struct jail_spec {
    const struct sbx_profile *profile;
    const struct sbx_config *cfg;
    char *const *argv;      /* argv[0] is an absolute path inside the sandbox */
    char *const *extra_env; /* "K=V" entries added to the rebuilt environment; may be NULL */
    int stdin_fd;           /* become fds 0, 1, 2 inside; -1 means /dev/null */
    int stdout_fd;
    int stderr_fd;
    const int *pass_fds; /* handed in on purpose, renumbered from 3 */
    size_t n_pass_fds;
    const char *name; /* unique per sandbox: names its cgroup; NULL: the process's only one */
    /* Init outlives the workload: the sandbox (mounts, files, cgroup) stays until destroyed,
     * and the workload can be killed and started again (a crashed interpreter). */
    bool persistent;
    /* Persistent only: a TCP socket listening on 127.0.0.1:proxy_port inside the sandbox's
     * network namespace, made before any sandbox code runs and handed to the caller (the
     * server's egress proxy) as jail.proxy_fd. 0: none. */
    uint16_t proxy_port;
    /* A one-shot caller that lives as long as this, its only sandbox (mcp-sandbox run): init
     * may share the caller's memory rather than copy it. Ignored when persistent. */
    bool share_memory;
    /* One-shot, with the command to come: the sandbox is built whole, every layer on, and
     * init then waits for argv and stdio (jail_start_command); argv, the stdio fds and
     * pass_fds here should be left unset (-1, NULL). The run pool keeps sandboxes ready this
     * way. Not with persistent or share_memory. */
    bool deferred;
};

/* What decides how a sandbox is built, as bytes: two spawns with equal keys build the same
 * sandbox, so a deferred one made for one key may serve a caller that has that key. The
 * engine's own identity (this executable) is part of it: another build may build another
 * sandbox. So is what the command inherits from the process that spawns it, rather than from
 * the profile: the resource limits the sandbox does not set itself, the umask, the nice value,
 * the scheduling policy, the I/O priority and the CPU affinity (a caller's `ulimit -t 5`,
 * `nice`, `taskset` or `ionice` holds in a sandbox it builds, and must not be lost in one built
 * by another process). Computed before any other thread may change the umask. */
#define JAIL_KEY_RLIMITS 12
struct jail_build_key {
    uint64_t memory_bytes, workspace_bytes, workspace_inodes, tmp_bytes, fsize_bytes, stack_bytes;
    uint64_t engine_dev, engine_ino, engine_size, engine_mtime_ns;
    uint64_t inherited_rlimits[JAIL_KEY_RLIMITS][2]; /* soft and hard */
    uint64_t cpu_affinity[16];                       /* CPUs 0 to 1023 */
    uint32_t umask;
    int32_t nice, sched_policy, sched_priority, ioprio;
    uint32_t cpu_millicpus, pids, nofile;
    uint32_t timeout_ms; /* RLIMIT_CPU where no cgroup holds the CPU */
    uint32_t sandbox_uid, host_uid, host_uid_count, allow_degraded;
    uint32_t version;
};
void jail_build_key(const struct sbx_profile *profile, const struct sbx_config *cfg,
                    struct jail_build_key *key);

struct jail_usage {
    uint64_t memory_peak_bytes;
    uint64_t memory_current_bytes;
    uint64_t cpu_ns;
    uint32_t pids_current;
    bool oom_killed;
};

struct sbx_cgroup;
struct jail_spawner;

struct jail {
    pid_t pid;                  /* host pid of the sandbox's init (pid 1 inside) */
    int pidfd;                  /* readable when init exits */
    int status_fd;              /* init writes the workload's wait status here */
    int root_fd;                /* O_PATH fd of the sandbox's "/" (persistent only, else -1) */
    int proxy_fd;               /* the listener asked for by spec.proxy_port, or -1 */
    bool workload_running;      /* persistent: between a start and its status record */
    struct sbx_cgroup *cg;      /* NULL when limits are rlimits only */
    const char *limits_backend; /* "cgroup-v2", "cgroup-v1" or "rlimit" */
    char degraded[256];         /* comma-separated missing layers (allow_degraded only) */
    uint64_t setup_ns;          /* clone until the exec of the command */
    int setup_fd;               /* jail_spawn_begin: readable once the setup has ended, else -1 */
    uint64_t setup_t0;          /* when the clone began */
    bool persistent;
    bool deferred;
    bool armed;          /* deferred: the setup has ended, init waits for the command */
    bool command_sent;   /* deferred: jail_start_command has handed it over */
    uint64_t command_t0; /* when it was handed over */
    uint64_t command_ns; /* from then until the exec, as init saw it */
    /* The host ids the sandbox user maps to: a root caller's claim (see host_uid.h), released
     * by jail_destroy; a rootless caller's own. Its files on the host are theirs, and a root
     * caller's stdio pipes go to them (see jail_start_command). */
    uid_t host_uid;
    gid_t host_gid;
    int host_uid_lock_fd;
    bool expect_proxy; /* spec.proxy_port: the listener comes with the setup's end */
    char command[128]; /* argv[0], for "cannot run ..." */
    bool reaped;
    int init_status;              /* wait status of init, valid when reaped */
    struct rusage rusage;         /* of init and what it reaped */
    struct jail_spawner *spawner; /* share_memory: the thread init borrowed its TLS from */
};

/* Build the sandbox and exec argv in it. Returns once the command has been exec'd (or with
 * an error naming the layer that could not be set up). */
int jail_spawn(const struct jail_spec *spec, struct jail **out, struct sbx_err *err);
/* jail_spawn in two halves, for an event loop that must not wait for the child's setup
 * (a few milliseconds). jail_spawn_begin returns once the child is cloned and on its way;
 * j->setup_fd then becomes readable when the command has been exec'd or the setup failed,
 * and jail_spawn_end says which. A failed begin has destroyed j itself; after a failed end
 * the caller destroys j. Not for spec.share_memory. */
int jail_spawn_begin(const struct jail_spec *spec, struct jail **out, struct sbx_err *err);
int jail_spawn_end(struct jail *j, struct sbx_err *err);
/* A deferred sandbox whose setup has ended (jail_spawn_end returned 0: every layer is on, init
 * waits): hand it its command. stdio (three pipes or sockets, EINVAL otherwise; the caller
 * keeps its own) become fds 0, 1 and 2 inside. Does not wait: j->setup_fd becomes readable once the
 * command has been exec'd or could not be, and jail_command_end says which (as jail_spawn_end does
 * for a spawn's command). */
int jail_start_command(struct jail *j, char *const *argv, const int stdio[3], struct sbx_err *err);
int jail_command_end(struct jail *j, struct sbx_err *err);
/* The environment every sandbox starts from ("NAME=value", NULL-terminated); nothing of the
 * caller's is in it. Commands composed with a whole environment of their own start from it. */
extern const char *const jail_base_env[];

/* Persistent sandboxes, and deferred ones once their command runs. status_fd is non-blocking
 * and readable when the workload ends (a one-shot sandbox's record comes once init has killed
 * and reaped everything else in it, just before init itself ends).
 * jail_workload_status reads one record: 1 with the exit code or signal, 0 if none is there. */
int jail_workload_status(struct jail *j, int *exit_code, int *term_signal);
/* Kill every process in the sandbox except init; a status record follows if the workload
 * was running. */
int jail_workload_kill(struct jail *j);
/* Start the workload again (same argv, fds and environment) once its status was read. */
int jail_workload_restart(struct jail *j);
/* Deliver sig to the workload (init forwards it). */
int jail_signal(struct jail *j, int sig);

/* SIGKILL everything in the sandbox (init's death empties the pid namespace). */
void jail_kill(struct jail *j);

/* Non-blocking reap. Returns 1 when exited (fills exit_code/signal of the workload), 0 if still
 * running, -errno on failure. */
int jail_try_reap(struct jail *j, int *exit_code, int *term_signal);

int jail_read_usage(struct jail *j, struct jail_usage *u);
/* Just usage.oom_killed, for callers that need nothing else (one file read, not five). */
bool jail_oom_killed(struct jail *j);
/* How many processes the OOM killer took in the sandbox since it was made; 0 without a cgroup. */
uint64_t jail_oom_kills(struct jail *j);
/* The sandbox's memory high-water mark, cheap enough for every execution; -ENOTSUP without a
 * cgroup. */
int jail_read_memory_peak(struct jail *j, uint64_t *out);
/* The CPU time all of the sandbox's processes have used, in ns; -ENOTSUP without a cgroup. */
int jail_read_cpu_ns(struct jail *j, uint64_t *out);

/* Writes charged to the sandbox (writer.c). */

/* write_all to fd, so that the pages the write makes (the sandbox's tmpfs is memory) are
 * charged to the sandbox: through a copier, /bin/cat, placed under the sandbox's memory limit
 * but not its CPU quota (cgroup_open_writer_procs); by the caller where the sandbox has no cgroup.
 * A write that does not fit fails with ENOMEM; *oom_killed says the OOM killer took the copier
 * for it. A full file system fails it with ENOSPC. */
int jail_write_charged(struct jail *j, int fd, const void *data, size_t len, bool *oom_killed,
                       struct sbx_err *err);

/* The same for a stream (output saved as it arrives): a copier placed as jail_write_charged's
 * copies into fd what arrives on pipe_fd (non-blocking: EAGAIN says the writer is behind) until
 * pipe_fd is closed. ENOTSUP where the sandbox has no cgroup (or the kernel
 * no pidfd_open): then write fd directly. */
struct jail_writer {
    pid_t pid;
    int pidfd;
    int pipe_fd;
    int in, out; /* the copier's ends, from jail_writer_open until its launch */
};
/* The writer's start in two steps, so that a caller with a loop can launch on another thread:
 * the copier's start waits for its exec (CLONE_VFORK), which took up to milliseconds each while
 * 64 sandboxes printed. Open makes the pipe, which takes writes at once (they wait in it);
 * launch starts the copier, and touches only *w and the jail's cgroup. A writer opened but not
 * launched is closed by jail_writer_end. */
int jail_writer_open(struct jail *j, int fd, struct jail_writer *w, struct sbx_err *err);
int jail_writer_launch(struct jail *j, struct jail_writer *w, struct sbx_err *err);
/* Closes pipe_fd and waits up to timeout_ms for the writer to copy the rest, then kills it.
 * 0 once all was written; ENOMEM (*oom_killed) when the OOM killer took it, ETIMEDOUT, or
 * the write's own error. A caller that must not block may close pipe_fd itself (and set it
 * to -1), wait for pidfd to become readable, and then call this to reap the writer at once. */
int jail_writer_end(struct jail_writer *w, int timeout_ms, bool *oom_killed, struct sbx_err *err);

/* Kill, reap and remove everything the sandbox held. */
void jail_destroy(struct jail *j);

/* Remove the per-server cgroup parent; call once at shutdown. */
void jail_shutdown(void);
/* At a server's start: remove what servers killed before their cleanup left behind. */
int jail_sweep_stale(void);

#endif
