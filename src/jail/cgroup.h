/* Resource limits through cgroups, behind one interface with a v2 (delegated subtree) and a
 * v1 (memory, pids, cpu, cpuacct) backend. Groups are created only beneath the server's own
 * cgroup as read from /proc/self/cgroup, never at the top of a hierarchy others own. */
#ifndef SBX_JAIL_CGROUP_H
#define SBX_JAIL_CGROUP_H

#include "err.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cgroup_backend_kind {
    CGROUP_BACKEND_NONE = 0, /* nothing writable: limits fall back to rlimits */
    CGROUP_BACKEND_V1,
    CGROUP_BACKEND_V2,
};

struct cgroup_limits {
    uint64_t memory_bytes;  /* memory.max / memory.limit_in_bytes; swap pinned to 0 */
    uint32_t cpu_millicpus; /* cpu.max / cfs_quota_us over a 100 ms period */
    uint32_t pids;          /* pids.max */
    /* Room for a writer (cgroup_open_writer_procs): on v2 the group's processes then live in a
     * child group, run, which alone carries cpu.max, so that a writer placed beside it is charged
     * to the group's memory without waiting on its CPU quota. */
    bool writer;
};

struct cgroup_usage {
    uint64_t memory_current_bytes;
    uint64_t memory_peak_bytes;
    uint64_t cpu_usage_ns;
    uint32_t pids_current;
    bool oom_killed; /* the OOM killer fired inside this group */
};

struct sbx_cgroup;

/* Which backend is usable by this process (probed once). why gets a hint when NONE. */
enum cgroup_backend_kind cgroup_backend(const char **why);
/* v2: whether this process must first step into a leaf of its own cgroup to hand controllers
 * down (it sits alone in a delegated cgroup that hands none down yet). */
bool cgroup_v2_steps_aside(void);
/* v2: whether limits are missing for want of a delegated cgroup of this process's own (its
 * cgroup is shared with other processes, as a login shell's scope is, or is given no
 * controllers, as a plain service's is). */
bool cgroup_v2_needs_delegation(void);

/* v2, where this process hands the controllers down itself: moves it into its leaf now (once;
 * cgroup_create does it otherwise). For a caller about to start a helper process, which would
 * join this process's cgroup: a cgroup with another process in it cannot hand controllers
 * down, so the probe would find no usable cgroup and the step aside would fail (EBUSY).
 * 0 where there is nothing to do. */
int cgroup_step_aside(struct sbx_err *err);

/* Create a group named name (unique per sandbox) with lim applied, beneath this process's
 * mcp-sandbox.<pid>. name NULL: a process that runs one sandbox only (`run`) uses
 * mcp-sandbox.<pid> itself. */
int cgroup_create(const char *name, const struct cgroup_limits *lim, struct sbx_cgroup **out,
                  struct sbx_err *err);
/* Move pid into the group (before it execs anything untrusted). */
int cgroup_attach(struct sbx_cgroup *cg, pid_t pid, struct sbx_err *err);
/* Where the group's memory limit counts what a writer allocates but its CPU quota does not hold
 * it back: on v1 the memory hierarchy's group alone; on v2 the child group write, made on first
 * use. Its cgroup.procs, opened for writing, so that a child writes "0" there to move itself;
 * -errno (-ENOTSUP for a v2 group made without lim.writer). */
int cgroup_open_writer_procs(struct sbx_cgroup *cg);
/* v2: the writer's group, made on first use, as a directory fd for clone3's CLONE_INTO_CGROUP:
 * a child born there spares the move. -ENOTSUP on v1 or without lim.writer. */
int cgroup_open_writer_group(struct sbx_cgroup *cg);
/* How many more bytes the group may be charged before its memory limit bites, counting the
 * page cache of files as free; UINT64_MAX without a limit, or when it cannot tell. */
uint64_t cgroup_memory_headroom(struct sbx_cgroup *cg);
/* v1: move the calling thread alone (not its process) into the group, so that what it clones
 * next is born there, and back out after the clone. A thread that moves itself skips the lock
 * that moving a process takes for writing (cgroup_threadgroup_rwsem, whose RCU grace period cost
 * ~0.8 ms here, and which stalls every fork and exit on the machine meanwhile). While inside,
 * the thread's CPU time counts to the group, and so could a page its process faults in.
 * writer: the memory group alone, where cgroup_open_writer_procs would put a process. -ENOTSUP on
 * v2, where a thread cannot sit apart from its process: use cgroup_attach, or clone3. */
int cgroup_enter_thread(struct sbx_cgroup *cg, bool writer);
int cgroup_leave_thread(struct sbx_cgroup *cg, bool writer);
int cgroup_read_usage(struct sbx_cgroup *cg, struct cgroup_usage *u);
/* How many processes the OOM killer has killed in the group since it was made (one read). */
uint64_t cgroup_oom_kills(struct sbx_cgroup *cg);
/* Just the memory high-water mark, cheaply (after every execution). */
int cgroup_read_memory_peak(struct sbx_cgroup *cg, uint64_t *out);
/* The CPU time every process of the group has used so far, in ns (around every execution). */
int cgroup_read_cpu_ns(struct sbx_cgroup *cg, uint64_t *out);
/* SIGKILL each process dir/cgroup.procs lists, through a pidfd, and only if a second read
 * still lists it (a dying process's pid may be reused meanwhile). Returns how many. */
int cgroup_kill_listed(const char *dir);
/* Kill every process in the group (v2 cgroup.kill; else SIGKILL each listed process). */
int cgroup_kill_all(struct sbx_cgroup *cg);
/* Remove the group (killing what is left first). Frees cg. */
int cgroup_destroy(struct sbx_cgroup *cg);
/* Remove this server's parent groups; call once at shutdown. */
void cgroup_cleanup_all(void);
/* Remove empty groups left by servers that died uncleanly; returns how many went. */
int cgroup_sweep_stale(void);

#endif
