/* Steps shared between the jail's files; child-side functions run after clone, before exec,
 * and return -errno without allocating or printing. */
#ifndef SBX_JAIL_INTERNAL_H
#define SBX_JAIL_INTERNAL_H

#include "config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Which setup step failed in the child: reported to the parent over the error pipe. */
enum jail_step {
    STEP_EXECED = 0, /* no failure: init's report that the command was exec'd */
    STEP_ARMED,      /* no failure: a deferred sandbox is built and waits for its command */
    STEP_SYNC,
    STEP_CGROUP_NS,
    STEP_HOSTNAME,
    STEP_LOOPBACK,
    STEP_PROXY_SOCKET,
    STEP_MOUNTS,
    STEP_PIVOT,
    STEP_IDS,
    STEP_CAPS,
    STEP_NO_NEW_PRIVS,
    STEP_RLIMITS,
    STEP_LANDLOCK,
    STEP_SECCOMP,
    STEP_COMMAND,
    STEP_FORK,
    STEP_FDS,
    STEP_EXEC,
};

/* What the child writes on the error pipe: the step that failed and its errno, or, once,
 * STEP_EXECED with the moment init saw the command's exec (a deferred sandbox's init first
 * writes STEP_ARMED, with the moment it began to wait for the command). */
struct jail_child_report {
    int32_t step;
    int32_t err;
    uint64_t at_ns; /* STEP_EXECED: CLOCK_MONOTONIC, comparable with the parent's clock */
};

/* Everything the child needs, prepared by the parent before clone so the child never allocates. */
struct jail_child_plan {
    const struct sbx_profile *profile;
    uid_t uid; /* inside */
    gid_t gid;
    char *const *argv;
    char *envp[48];
    char env_store[4096];
    int stdio[3];
    const int *pass_fds;
    size_t n_pass_fds;
    int sync_fd;     /* parent writes a byte when the id maps, then one when the cgroup, is set */
    int err_fd;      /* cloexec: EOF at exec means success */
    int status_fd;   /* init reports the workload's wait status (a socket when persistent or
                      * deferred) */
    bool persistent; /* init outlives the workload and can start it again */
    bool deferred;   /* argv and stdio come later, over status_fd (jail_start_command) */
    /* The server is not root (it writes the id maps unprivileged, which denies setgroups in
     * the new user namespace), or setgroups is denied in its own user namespace already. */
    bool setgroups_denied;
    uint16_t proxy_port; /* listen here in the new network namespace; 0: no listener */
    int cap_last;
    uint64_t ignored; /* signals the server ignores (bit sig-1): SIG_IGN would survive exec */
    bool cgroup_active;
    /* The cloning thread is already in a fresh network namespace with loopback up (made ahead
     * by a spawner thread): the clone inherits it instead of making one. */
    bool netns_ready;
    bool want_landlock;
    const void *seccomp; /* const struct seccomp_program * or NULL */
    /* The caller's environment as /proc/<init>/environ would show it; init wipes it. NULL:
     * init's own (a copy, when init is a fork). */
    char **env_to_wipe;
    /* Init shares the caller's memory (jail_spec.share_memory) instead of being a copy of it:
     * it then neither rewrites the command line nor gives the heap back, both the caller's. */
    bool shares_memory;
    char workspace_opts[96];
    char tmp_opts[96];
    char shm_opts[96];
    char passwd[256];
    char group[128];
};

/* init.c: init's own oom_score_adj, opened in the child before Landlock closes /proc to
 * writes; init raises it while it clones the workload, which so inherits a score that makes
 * the OOM killer take it before init. */
void jail_open_oom_adj(void);

/* mount.c: build the root on tmpfs, pivot into it, leave the old root behind. */
int jail_setup_rootfs(const struct jail_child_plan *plan, enum jail_step *step);

/* caps.c: drop every capability (bounding, ambient, inheritable, permitted, effective). */
int jail_drop_caps(int cap_last);

/* What a persistent init keeps of the command line to start the workload again, and what a
 * deferred init can take (argv's pointers, NULL included, and its strings); a longer one is
 * refused before it is sent. */
#define INIT_ARGV_MAX   256
#define INIT_ARGV_BYTES (32 * 1024)

/* init.c: pid 1 of the sandbox; forks the workload and reaps. Never returns. A forked init
 * gives the caller's heap back once set up: from then on nothing init runs may allocate (a
 * malloc would find the heap zeroed) or read what plan pointed to there. */
void jail_run_init(const struct jail_child_plan *plan) __attribute__((noreturn));

/* init.c: close every fd but these (keep is sorted in place; -1 entries are ignored). */
void jail_keep_only_fds(int *keep, size_t n);
/* init.c: close every fd from first up (close_range; before Linux 5.9 one by one below 1024). */
void jail_close_from(unsigned int first);

/* init.c: send fd over a unix socket with a one-byte tag the receiver checks. Returns 0 or
 * -errno. */
int jail_send_fd(int sock, char tag, int fd);

/* jail.c: report a failed step to the parent and exit. */
void jail_child_fail(const struct jail_child_plan *plan, enum jail_step step, int err)
    __attribute__((noreturn));

#endif
