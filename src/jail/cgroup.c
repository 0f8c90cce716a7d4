/* cgroup limits behind one interface. Every group lives beneath this server's own cgroup
 * (read from /proc/self/cgroup) in a per-server parent, mcp-sandbox.<pid>, which is removed at
 * shutdown. v2 needs a delegated subtree with memory, pids and cpu enabled; v1 needs the
 * memory, pids, cpu and cpuacct hierarchies writable. Otherwise the backend is NONE and the
 * jail falls back to rlimits, saying so. */
#include "cgroup.h"

#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>

#define CGROUP2_MAGIC 0x63677270

enum v1_ctrl { V1_MEMORY, V1_PIDS, V1_CPU, V1_CPUACCT, V1__COUNT };
static const char *const v1_names[V1__COUNT] = {"memory", "pids", "cpu", "cpuacct"};

struct cgroup_state {
    bool probed;
    enum cgroup_backend_kind kind;
    const char *why;
    /* v2: the server's parent group; v1: one per controller (co-mounted ones share a path). */
    char *parent[V1__COUNT];
    /* v1: the group this process is in, per controller, where a thread returns to. */
    char *own[V1__COUNT];
    /* v1: threads may step into a sandbox's groups (cgroup_enter_thread): they can step back,
     * each own/tasks being writable. Threads spawning at once may both find that not. */
    atomic_bool thread_moves;
    bool parent_made[V1__COUNT];
    /* v2, when this process sits alone in a delegated cgroup whose children get no
     * controllers yet (a unit with Delegate=yes, `systemd-run --scope -p Delegate=yes`): the
     * kernel lets a cgroup hand controllers down only while it holds no process, so this
     * process first moves into a leaf of its own, own/mcp-sandbox.<pid>.self, and moves back
     * at shutdown. */
    char *v2_own;        /* the cgroup to enable controllers in; NULL if nothing to do */
    char *v2_leaf;       /* set while this process is in the leaf */
    char v2_enabled[64]; /* what was enabled, to disable again: "-memory -pids -cpu" */
    bool v2_undelegated; /* v2 is there, but this process's cgroup does not serve */
    char why_buf[768];
};

static struct cgroup_state state;

struct sbx_cgroup {
    enum cgroup_backend_kind kind;
    char *dir[V1__COUNT]; /* v2 uses dir[0] only */
    /* v2, made with lim.writer: the processes and cpu.max are in dir[0]/run, writers in
     * dir[0]/write (made on first use); NULL otherwise, the processes being in dir[0]. */
    char *run_dir;
    char *write_dir;
    /* Read around every execution, so kept open and pread (one syscall each); -1 before the
     * first use. */
    int peak_fd; /* memory high-water mark */
    int cpu_fd;  /* CPU time used */
    int oom_fd;  /* OOM kills */
};

/* The probe reads /proc/self/cgroup and /proc/self/mountinfo once each: it runs in every `run`
 * process, where a pass over each file per controller cost ~0.4 ms. */
struct proc_text {
    char *buf;
    size_t len;
};

/* Whether the comma-separated list [s, s+n) holds word. */
static bool list_has(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = s, *end = s + n; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (len == wl && memcmp(p, word, wl) == 0)
            return true;
        p += len + 1;
    }
    return false;
}

/* The server's own path in hierarchy ctrl, from /proc/self/cgroup lines "ID:CTRLS:PATH"; ctrl
 * "" is the v2 line "0::PATH". Returns a pointer into t (up to the newline) and its length. */
static const char *own_path(const struct proc_text *t, const char *ctrl, size_t *len)
{
    for (const char *line = t->buf; *line;) {
        const char *nl = strchr(line, '\n');
        const char *end = nl ? nl : line + strlen(line);
        const char *c1 = memchr(line, ':', (size_t)(end - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        if (c2) {
            size_t n = (size_t)(c2 - c1 - 1);
            if (ctrl[0] ? list_has(c1 + 1, n, ctrl) : n == 0) {
                *len = (size_t)(end - c2 - 1);
                return c2 + 1;
            }
        }
        line = nl ? nl + 1 : end;
    }
    return NULL;
}

/* The mount point of the v1 hierarchy carrying ctrl: a mountinfo line whose filesystem type
 * is "cgroup" and whose super options (the last field) name ctrl. Returns a pointer into t. */
static const char *v1_mount_of(const struct proc_text *t, const char *ctrl, size_t *len)
{
    for (const char *line = t->buf; *line;) {
        const char *nl = strchr(line, '\n');
        const char *end = nl ? nl : line + strlen(line);
        const char *sep = strstr(line, " - cgroup ");
        if (sep && sep < end) {
            const char *opts = end;
            while (opts > sep && opts[-1] != ' ')
                opts--;
            if (list_has(opts, (size_t)(end - opts), ctrl)) {
                /* Fields: ID PARENT MAJ:MIN ROOT MOUNTPOINT ...; the fifth is the mount point
                 * (octal escapes for spaces never occur under /sys/fs/cgroup). */
                const char *f = line;
                for (int k = 0; k < 4 && f; k++) {
                    f = memchr(f, ' ', (size_t)(end - f));
                    f = f ? f + 1 : NULL;
                }
                const char *fe = f ? memchr(f, ' ', (size_t)(end - f)) : NULL;
                if (fe) {
                    *len = (size_t)(fe - f);
                    return f;
                }
            }
        }
        line = nl ? nl + 1 : end;
    }
    return NULL;
}

/* Whether the space-separated text s (a cgroup.controllers line) holds every one of words. */
static bool text_has_words(const char *s, const char *const *words, size_t n)
{
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const char *p = s;
        size_t wl = strlen(words[i]);
        bool found = false;
        while ((p = strstr(p, words[i]))) {
            if ((p == s || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\n' || p[wl] == '\0')) {
                found = true;
                break;
            }
            p += wl;
        }
        ok = found;
    }
    return ok;
}

static bool file_has_words(const char *path, const char *const *words, size_t n)
{
    cleanup_free char *s = NULL;
    if (read_file_max(path, 4096, &s, NULL) < 0)
        return false;
    return text_has_words(s, words, n);
}

bool cgroup_v2_steps_aside(void)
{
    return cgroup_backend(NULL) == CGROUP_BACKEND_V2 && state.v2_own;
}

bool cgroup_v2_needs_delegation(void)
{
    return cgroup_backend(NULL) == CGROUP_BACKEND_NONE && state.v2_undelegated;
}

static int write_in(const char *dir, const char *file, const char *value)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    return write_file_str(path, value);
}

static const char *const v2_need[] = {"memory", "pids", "cpu"};

/* Whether pid is the only process listed in dir/cgroup.procs. */
static bool only_process_in(const char *dir, pid_t pid)
{
    cleanup_free char *path = xasprintf("%s/cgroup.procs", dir);
    cleanup_free char *s = NULL;
    if (read_file_max(path, 1 << 20, &s, NULL) < 0)
        return false;
    char *end;
    long first = strtol(s, &end, 10);
    while (*end == '\n')
        end++;
    return first == (long)pid && *end == '\0';
}

static bool probe_v2(const struct proc_text *self_cg)
{
    struct statfs sf;
    if (statfs("/sys/fs/cgroup", &sf) < 0 || sf.f_type != CGROUP2_MAGIC)
        return false;
    size_t n = 0;
    const char *own = own_path(self_cg, "", &n);
    if (!own)
        return false;
    bool root = n == 1 && own[0] == '/';
    cleanup_free char *dir = xasprintf("/sys/fs/cgroup%.*s", root ? 0 : (int)n, own);
    cleanup_free char *ctl = xasprintf("%s/cgroup.subtree_control", dir);
    cleanup_free char *avail = xasprintf("%s/cgroup.controllers", dir);
    cleanup_free char *procs = xasprintf("%s/cgroup.procs", dir);
    /* Ready: the controllers are already handed down. Otherwise this process must enable them
     * itself, which takes writing subtree_control and cgroup.procs too. */
    bool ready = file_has_words(ctl, v2_need, ARRAY_SIZE(v2_need));
    const char *why = NULL;
    if (!ready && !file_has_words(avail, v2_need, ARRAY_SIZE(v2_need)))
        why = "is not given the memory, pids and cpu controllers by its parent: delegate them "
              "(systemd: Delegate=yes)";
    else if (access(dir, W_OK) < 0 ||
             (!ready && (access(ctl, W_OK) < 0 || access(procs, W_OK) < 0)))
        why = "is not writable by this user: delegate it (systemd: Delegate=yes)";
    else if (!ready && !only_process_in(dir, getpid()))
        /* The kernel hands controllers down only from a cgroup with no process in it. */
        why = "holds other processes, so it cannot hand controllers down: start mcp-sandbox "
              "alone in a delegated cgroup (systemd-run --scope -p Delegate=yes mcp-sandbox "
              "..., or a unit with Delegate=yes)";
    else if (!ready)
        state.v2_own = xstrdup(dir);
    if (why) {
        state.v2_undelegated = true;
        snprintf(state.why_buf, sizeof(state.why_buf),
                 "cgroup v2: this process's cgroup %s %s. Where systemd runs the machine, run and "
                 "serve ask it for such a cgroup themselves",
                 dir, why);
        state.why = state.why_buf;
        return false;
    }
    state.parent[0] = xasprintf("%s/mcp-sandbox.%d", dir, (int)getpid());
    return true;
}

/* v2: move this process into own/mcp-sandbox.<pid>.self and enable the controllers in own, once,
 * before the first group is made. A process that joined own since the probe makes the enabling
 * fail (EBUSY): then this process moves back and the sandbox is refused. */
static int v2_step_aside(struct sbx_err *err)
{
    if (!state.v2_own || state.v2_leaf)
        return 0;
    cleanup_free char *ctl = xasprintf("%s/cgroup.subtree_control", state.v2_own);
    cleanup_free char *enabled = NULL;
    if (read_file_max(ctl, 4096, &enabled, NULL) < 0)
        enabled = xstrdup("");
    char enable[64] = "", disable[64] = "";
    for (size_t i = 0; i < ARRAY_SIZE(v2_need); i++) {
        if (text_has_words(enabled, &v2_need[i], 1))
            continue;
        size_t e = strlen(enable), d = strlen(disable);
        snprintf(enable + e, sizeof(enable) - e, "%s+%s", e ? " " : "", v2_need[i]);
        snprintf(disable + d, sizeof(disable) - d, "%s-%s", d ? " " : "", v2_need[i]);
    }
    char *leaf = xasprintf("%s/mcp-sandbox.%d.self", state.v2_own, (int)getpid());
    if (mkdir(leaf, 0755) < 0 && errno != EEXIST) {
        sbx_fail_errno(err, errno, "creating %s", leaf);
        free(leaf);
        return -1;
    }
    int r = write_in(leaf, "cgroup.procs", "0");
    if (r < 0) {
        rmdir(leaf);
        sbx_fail_errno(err, -r, "moving this process into %s", leaf);
        free(leaf);
        return -1;
    }
    if (enable[0] && (r = write_in(state.v2_own, "cgroup.subtree_control", enable)) < 0) {
        write_in(state.v2_own, "cgroup.procs", "0");
        rmdir(leaf);
        free(leaf);
        return sbx_fail_errno(err, -r,
                              "enabling %s in %s (a process that joined it since the start "
                              "prevents it: start mcp-sandbox alone in a delegated cgroup)",
                              enable, state.v2_own);
    }
    state.v2_leaf = leaf;
    snprintf(state.v2_enabled, sizeof(state.v2_enabled), "%s", disable);
    return 0;
}

/* v2: undo v2_step_aside once the groups beneath are gone. */
static void v2_step_back(void)
{
    if (!state.v2_leaf)
        return;
    if (state.v2_enabled[0])
        write_in(state.v2_own, "cgroup.subtree_control", state.v2_enabled);
    if (write_in(state.v2_own, "cgroup.procs", "0") == 0)
        rmdir(state.v2_leaf);
    free(state.v2_leaf);
    state.v2_leaf = NULL;
}

static bool probe_v1(const struct proc_text *self_cg)
{
    bool moves = true;
    cleanup_free char *text = NULL;
    struct proc_text mounts = {0};
    /* Hosts running many containers have thousands of mounts. */
    if (read_file_max("/proc/self/mountinfo", 8 << 20, &text, &mounts.len) < 0)
        return false;
    mounts.buf = text;
    for (int c = 0; c < V1__COUNT; c++) {
        size_t mn = 0, on = 0;
        const char *mnt = v1_mount_of(&mounts, v1_names[c], &mn);
        const char *own = own_path(self_cg, v1_names[c], &on);
        if (!mnt || !own)
            return false;
        bool root = on == 1 && own[0] == '/';
        cleanup_free char *dir = xasprintf("%.*s%.*s", (int)mn, mnt, root ? 0 : (int)on, own);
        if (access(dir, W_OK) < 0)
            return false;
        state.parent[c] = xasprintf("%s/mcp-sandbox.%d", dir, (int)getpid());
        state.own[c] = xstrdup(dir);
        cleanup_free char *tasks = xasprintf("%s/tasks", dir);
        if (access(tasks, W_OK) < 0)
            moves = false;
    }
    state.thread_moves = moves;
    return true;
}

enum cgroup_backend_kind cgroup_backend(const char **why)
{
    if (!state.probed) {
        state.probed = true;
        cleanup_free char *text = NULL;
        struct proc_text self_cg = {0};
        bool have_self = read_file_max("/proc/self/cgroup", 1 << 20, &text, &self_cg.len) == 0;
        self_cg.buf = text;
        if (have_self && probe_v2(&self_cg)) {
            state.kind = CGROUP_BACKEND_V2;
        } else if (have_self && probe_v1(&self_cg)) {
            state.kind = CGROUP_BACKEND_V1;
        } else {
            for (int c = 0; c < V1__COUNT; c++) {
                free(state.parent[c]);
                free(state.own[c]);
                state.parent[c] = state.own[c] = NULL;
            }
            state.kind = CGROUP_BACKEND_NONE;
            /* A v2 probe that found the hierarchy says what is missing there. */
            if (!state.why)
                state.why = "no writable cgroup: run as root, or delegate a cgroup v2 subtree "
                            "with memory, pids and cpu enabled (systemd: Delegate=yes)";
        }
    }
    if (why)
        *why = state.why;
    return state.kind;
}

static int ensure_parent(int c, struct sbx_err *err)
{
    if (state.parent_made[c])
        return 0;
    if (mkdir(state.parent[c], 0755) < 0 && errno != EEXIST)
        return sbx_fail_errno(err, errno, "creating %s", state.parent[c]);
    if (state.kind == CGROUP_BACKEND_V2) {
        int r = write_in(state.parent[c], "cgroup.subtree_control", "+memory +pids +cpu");
        if (r < 0)
            return sbx_fail_errno(err, -r, "enabling controllers in %s", state.parent[c]);
    }
    state.parent_made[c] = true;
    return 0;
}

struct limit_row {
    int ctrl;
    const char *file;
    uint64_t value;
    bool optional;
};

/* v2: where the group's processes live, and its CPU quota with them. */
static const char *procs_dir(const struct sbx_cgroup *cg)
{
    return cg->run_dir ? cg->run_dir : cg->dir[0];
}

/* v2, lim.writer: the CPU quota goes down to dir[0]/run, where the processes live, so that a
 * writer in dir[0]/write is held by the group's memory and pids limits but not by its quota
 * (which the processes may have spent). Only cpu is handed down: memory and pids are counted
 * and limited in dir[0], for its whole subtree. */
static int make_run_group(struct sbx_cgroup *cg, struct sbx_err *err)
{
    int r = write_in(cg->dir[0], "cgroup.subtree_control", "+cpu");
    if (r < 0)
        return sbx_fail_errno(err, -r, "enabling cpu in %s", cg->dir[0]);
    cg->run_dir = xasprintf("%s/run", cg->dir[0]);
    cg->write_dir = xasprintf("%s/write", cg->dir[0]);
    if (mkdir(cg->run_dir, 0755) < 0 && errno != EEXIST)
        return sbx_fail_errno(err, errno, "creating %s", cg->run_dir);
    return 0;
}

static int apply_limits(struct sbx_cgroup *cg, const struct cgroup_limits *lim, struct sbx_err *err)
{
    char v[64];
    struct limit_row rows[8];
    size_t n = 0;
    uint64_t quota = (uint64_t)lim->cpu_millicpus * 100; /* per 100 ms period */
    if (cg->kind == CGROUP_BACKEND_V2) {
        rows[n++] = (struct limit_row){0, "memory.max", lim->memory_bytes, false};
        rows[n++] = (struct limit_row){0, "memory.swap.max", 0, true};
        rows[n++] = (struct limit_row){0, "pids.max", lim->pids, false};
    } else {
        rows[n++] =
            (struct limit_row){V1_MEMORY, "memory.limit_in_bytes", lim->memory_bytes, false};
        /* memsw = memory: no swap beyond the limit (absent when swap accounting is off). */
        rows[n++] =
            (struct limit_row){V1_MEMORY, "memory.memsw.limit_in_bytes", lim->memory_bytes, true};
        rows[n++] = (struct limit_row){V1_MEMORY, "memory.swappiness", 0, true};
        rows[n++] = (struct limit_row){V1_PIDS, "pids.max", lim->pids, false};
        if (lim->cpu_millicpus) {
            rows[n++] = (struct limit_row){V1_CPU, "cpu.cfs_period_us", 100000, false};
            rows[n++] = (struct limit_row){V1_CPU, "cpu.cfs_quota_us", quota, false};
        }
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(v, sizeof(v), "%llu", (unsigned long long)rows[i].value);
        int r = write_in(cg->dir[rows[i].ctrl], rows[i].file, v);
        if (r < 0 && !rows[i].optional)
            return sbx_fail_errno(err, -r, "setting %s", rows[i].file);
    }
    if (cg->kind == CGROUP_BACKEND_V2 && lim->cpu_millicpus) {
        snprintf(v, sizeof(v), "%llu 100000", (unsigned long long)quota);
        int r = write_in(procs_dir(cg), "cpu.max", v);
        if (r < 0)
            return sbx_fail_errno(err, -r, "setting cpu.max");
    }
    return 0;
}

static int nctrl(enum cgroup_backend_kind k)
{
    return k == CGROUP_BACKEND_V2 ? 1 : V1__COUNT;
}

int cgroup_step_aside(struct sbx_err *err)
{
    return cgroup_backend(NULL) == CGROUP_BACKEND_V2 ? v2_step_aside(err) : 0;
}

int cgroup_create(const char *name, const struct cgroup_limits *lim, struct sbx_cgroup **out,
                  struct sbx_err *err)
{
    enum cgroup_backend_kind kind = cgroup_backend(NULL);
    if (kind == CGROUP_BACKEND_NONE)
        return sbx_fail(err, ENOTSUP, "%s", state.why);
    if (kind == CGROUP_BACKEND_V2 && v2_step_aside(err) < 0)
        return -1;
    struct sbx_cgroup *cg = xcalloc(1, sizeof(*cg));
    cg->peak_fd = cg->cpu_fd = cg->oom_fd = -1;
    cg->kind = kind;
    for (int c = 0; c < nctrl(kind); c++) {
        if (!name) {
            /* The process's only sandbox: its group is the per-process one itself, which
             * saves a level of mkdir and rmdir in every hierarchy. */
            if (state.parent_made[c]) {
                sbx_fail(err, EEXIST, "this process's cgroup already holds sandboxes");
                goto fail;
            }
            cg->dir[c] = xstrdup(state.parent[c]);
            /* Co-mounted controllers (cpu,cpuacct) share a path: made once. */
            bool shared = false;
            for (int k = 0; k < c; k++)
                shared |= strcmp(state.parent[k], state.parent[c]) == 0;
            /* A group of this name outlived a process that had our pid (killed before it
             * could remove it): ours now, so the empty leftover goes. */
            int r = shared ? 0 : mkdir(cg->dir[c], 0755);
            if (r < 0 && errno == EEXIST && rmdir(cg->dir[c]) == 0)
                r = mkdir(cg->dir[c], 0755);
            if (r < 0) {
                sbx_fail_errno(err, errno, "creating %s", cg->dir[c]);
                free(cg->dir[c]);
                cg->dir[c] = NULL;
                goto fail;
            }
            continue;
        }
        if (ensure_parent(c, err) < 0)
            goto fail;
        cg->dir[c] = xasprintf("%s/%s", state.parent[c], name);
        if (mkdir(cg->dir[c], 0755) < 0 && errno != EEXIST) {
            sbx_fail_errno(err, errno, "creating %s", cg->dir[c]);
            free(cg->dir[c]);
            cg->dir[c] = NULL;
            goto fail;
        }
    }
    if (kind == CGROUP_BACKEND_V2 && lim->writer && make_run_group(cg, err) < 0)
        goto fail;
    if (apply_limits(cg, lim, err) < 0)
        goto fail;
    *out = cg;
    return 0;
fail:
    cgroup_destroy(cg);
    return -1;
}

static int attach_in(const char *dir, pid_t pid, struct sbx_err *err)
{
    char v[32];
    snprintf(v, sizeof(v), "%d", (int)pid);
    int r = write_in(dir, "cgroup.procs", v);
    return r < 0 ? sbx_fail_errno(err, -r, "moving process %d into %s", (int)pid, dir) : 0;
}

int cgroup_attach(struct sbx_cgroup *cg, pid_t pid, struct sbx_err *err)
{
    if (cg->kind == CGROUP_BACKEND_V2)
        return attach_in(procs_dir(cg), pid, err);
    for (int c = 0; c < V1__COUNT; c++)
        if (attach_in(cg->dir[c], pid, err) < 0)
            return -1;
    return 0;
}

/* v2: the writers' group, made on first use; 0 or -errno. */
static int make_write_group(const struct sbx_cgroup *cg)
{
    return mkdir(cg->write_dir, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

int cgroup_open_writer_procs(struct sbx_cgroup *cg)
{
    /* v1 keeps each controller apart: the memory hierarchy's group alone. (A process move
     * takes a lock that waits for an RCU grace period: start_copier, in writer.c, has the copier
     * born there instead where it can.) */
    const char *dir = cg->kind == CGROUP_BACKEND_V1 ? cg->dir[V1_MEMORY] : cg->write_dir;
    if (!dir)
        return -ENOTSUP; /* a v2 group made without room for a writer */
    if (cg->kind == CGROUP_BACKEND_V2) {
        int r = make_write_group(cg);
        if (r < 0)
            return r;
    }
    cleanup_free char *path = xasprintf("%s/cgroup.procs", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int cgroup_open_writer_group(struct sbx_cgroup *cg)
{
    if (cg->kind != CGROUP_BACKEND_V2 || !cg->write_dir)
        return -ENOTSUP;
    int r = make_write_group(cg);
    if (r < 0)
        return r;
    int fd = open(cg->write_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Writes "0" (the caller) to each dirs[c]/tasks; on a failure, moves back to back[c] what it
 * had moved. */
static int move_thread(char *const *dirs, char *const *back, int n)
{
    for (int c = 0; c < n; c++) {
        int r = write_in(dirs[c], "tasks", "0");
        if (r < 0) {
            while (back && c-- > 0)
                write_in(back[c], "tasks", "0");
            return r;
        }
    }
    return 0;
}

/* The controllers a thread steps into: all, or for a writer the memory one alone (V1_MEMORY is
 * the first). */
static int thread_ctrls(bool writer)
{
    return writer ? V1_MEMORY + 1 : V1__COUNT;
}

int cgroup_enter_thread(struct sbx_cgroup *cg, bool writer)
{
    if (cg->kind != CGROUP_BACKEND_V1 || !state.thread_moves)
        return -ENOTSUP;
    int r = move_thread(cg->dir, state.own, thread_ctrls(writer));
    if (r < 0)
        state.thread_moves = false; /* the slow way from now on: it cannot strand a thread */
    return r;
}

int cgroup_leave_thread(struct sbx_cgroup *cg, bool writer)
{
    if (cg->kind != CGROUP_BACKEND_V1)
        return -ENOTSUP;
    int n = thread_ctrls(writer);
    int r = move_thread(state.own, NULL, n);
    if (r < 0 && (r = move_thread(state.own, NULL, n)) < 0)
        state.thread_moves = false;
    return r;
}

/* The number after "key " at the start of a line of text (memory.stat, cpu.stat, ...). */
static int keyed_number(const char *text, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    const char *at = text;
    while (at && !(strncmp(at, key, kl) == 0 && at[kl] == ' ')) {
        at = strchr(at, '\n');
        if (at)
            at++;
    }
    if (!at)
        return -ENOENT;
    *out = strtoull(at + kl + 1, NULL, 10);
    return 0;
}

/* The number in dir/file, or the one after "key " when key is set; *fd opened on first use. */
static int pread_number(int *fd, const char *dir, const char *file, const char *key, uint64_t *out)
{
    if (*fd < 0) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        *fd = open(path, O_RDONLY | O_CLOEXEC);
        if (*fd < 0)
            return -errno;
    }
    char buf[4096];
    ssize_t n = pread(*fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return n < 0 ? -errno : -EIO;
    buf[n] = '\0';
    if (key)
        return keyed_number(buf, key, out);
    *out = strtoull(buf, NULL, 10);
    return 0;
}

/* One reading of a file that is not kept open: the number after "key " (memory.events,
 * cpu.stat, memory.oom_control), or the file's only number when key is NULL; 0 if unreadable. */
static uint64_t read_keyed(const char *dir, const char *file, const char *key)
{
    int fd = -1;
    uint64_t v = 0;
    if (pread_number(&fd, dir, file, key, &v) < 0)
        v = 0;
    if (fd >= 0)
        close(fd);
    return v;
}

static uint64_t read_u64(const char *dir, const char *file)
{
    return read_keyed(dir, file, NULL);
}

int cgroup_read_memory_peak(struct sbx_cgroup *cg, uint64_t *out)
{
    if (cg->kind == CGROUP_BACKEND_V2)
        return pread_number(&cg->peak_fd, cg->dir[0], "memory.peak", NULL, out);
    return pread_number(&cg->peak_fd, cg->dir[V1_MEMORY], "memory.max_usage_in_bytes", NULL, out);
}

int cgroup_read_cpu_ns(struct sbx_cgroup *cg, uint64_t *out)
{
    if (cg->kind == CGROUP_BACKEND_V2) {
        /* The processes' own: a writer's (in write, beside them) is no run's. */
        uint64_t us = 0;
        int r = pread_number(&cg->cpu_fd, procs_dir(cg), "cpu.stat", "usage_usec", &us);
        *out = us * 1000;
        return r;
    }
    return pread_number(&cg->cpu_fd, cg->dir[V1_CPUACCT], "cpuacct.usage", NULL, out);
}

uint64_t cgroup_memory_headroom(struct sbx_cgroup *cg)
{
    bool v2 = cg->kind == CGROUP_BACKEND_V2;
    const char *dir = cg->dir[v2 ? 0 : V1_MEMORY];
    /* "max" reads as 0, as does a file that cannot be read: no limit that this can tell. */
    uint64_t limit = read_u64(dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    if (!limit)
        return UINT64_MAX;
    /* The page cache of files read (the interpreter's libraries) is given back on demand. */
    uint64_t used = read_u64(dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    uint64_t inactive = 0, active = 0;
    cleanup_free char *path = xasprintf("%s/memory.stat", dir);
    cleanup_free char *stat = NULL;
    if (read_file_max(path, 64 << 10, &stat, NULL) == 0) {
        keyed_number(stat, v2 ? "inactive_file" : "total_inactive_file", &inactive);
        keyed_number(stat, v2 ? "active_file" : "total_active_file", &active);
    }
    uint64_t cache = inactive + active;
    used = used > cache ? used - cache : 0;
    return used < limit ? limit - used : 0;
}

uint64_t cgroup_oom_kills(struct sbx_cgroup *cg)
{
    bool v2 = cg->kind == CGROUP_BACKEND_V2;
    uint64_t v = 0;
    if (pread_number(&cg->oom_fd, cg->dir[v2 ? 0 : V1_MEMORY],
                     v2 ? "memory.events" : "memory.oom_control", "oom_kill", &v) < 0)
        v = 0;
    return v;
}

int cgroup_read_usage(struct sbx_cgroup *cg, struct cgroup_usage *u)
{
    memset(u, 0, sizeof(*u));
    bool v2 = cg->kind == CGROUP_BACKEND_V2;
    u->memory_current_bytes =
        read_u64(cg->dir[v2 ? 0 : V1_MEMORY], v2 ? "memory.current" : "memory.usage_in_bytes");
    /* Kernels before 5.19 have no memory.peak: the current use is the best lower bound. */
    if (cgroup_read_memory_peak(cg, &u->memory_peak_bytes) < 0 || !u->memory_peak_bytes)
        u->memory_peak_bytes = u->memory_current_bytes;
    if (cgroup_read_cpu_ns(cg, &u->cpu_usage_ns) < 0)
        u->cpu_usage_ns = 0;
    u->oom_killed = cgroup_oom_kills(cg) > 0;
    u->pids_current = (uint32_t)read_u64(cg->dir[v2 ? 0 : V1_PIDS], "pids.current");
    return 0;
}

/* The pids listed in dir/cgroup.procs, but never this process: on v1 it is listed while one of
 * its threads is in the group (cgroup_enter_thread). *out is freed by the caller. */
static size_t read_listed(const char *dir, pid_t **out)
{
    char path[512];
    char *s = NULL;
    *out = NULL;
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    if (read_file_max(path, 1 << 20, &s, NULL) < 0)
        return 0;
    size_t n = 0, cap = 0;
    for (char *p = s; *p;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 0 && pid != getpid()) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                *out = xrealloc(*out, cap * sizeof(**out));
            }
            (*out)[n++] = (pid_t)pid;
        }
        p = end;
        while (*p == '\n')
            p++;
    }
    free(s);
    return n;
}

static bool listed(const pid_t *pids, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* SIGKILL every process listed in dir/cgroup.procs: all of them were started by this server.
 * They are dying already (init went first), so a pid read from the file may be reaped and
 * reused by a host process before it is signalled. Each is held by a pidfd first and killed
 * only if the file still lists it: a pidfd names one process for good, and a reused number is
 * listed only if its new process is in this group too. */
int cgroup_kill_listed(const char *dir)
{
    pid_t *pids;
    size_t n = read_listed(dir, &pids);
    if (n == 0)
        return 0;
    /* -1: gone already; -2: no pidfd to be had (no pidfd_open, out of fds): a plain kill. */
    int *pidfds = xmalloc(n * sizeof(*pidfds));
    bool any_pidfd = false;
    for (size_t i = 0; i < n; i++) {
        pidfds[i] = (int)syscall(SYS_pidfd_open, pids[i], 0);
        if (pidfds[i] < 0)
            pidfds[i] = errno == ESRCH ? -1 : -2;
        any_pidfd = any_pidfd || pidfds[i] >= 0;
    }
    pid_t *still = NULL;
    size_t m = any_pidfd ? read_listed(dir, &still) : 0;
    int killed = 0;
    for (size_t i = 0; i < n; i++) {
        if (pidfds[i] == -2)
            killed += kill(pids[i], SIGKILL) == 0;
        else if (pidfds[i] >= 0 && listed(still, m, pids[i]))
            killed += syscall(SYS_pidfd_send_signal, pidfds[i], SIGKILL, NULL, 0) == 0;
        if (pidfds[i] >= 0)
            close(pidfds[i]);
    }
    free(still);
    free(pidfds);
    free(pids);
    return killed;
}

int cgroup_kill_all(struct sbx_cgroup *cg)
{
    if (cg->kind == CGROUP_BACKEND_V2) {
        /* cgroup.kill takes the whole subtree; cgroup.procs lists one group's own. */
        if (write_in(cg->dir[0], "cgroup.kill", "1") == 0)
            return 0;
        cgroup_kill_listed(procs_dir(cg));
        if (cg->write_dir)
            cgroup_kill_listed(cg->write_dir);
        return 0;
    }
    cgroup_kill_listed(cg->dir[V1_PIDS]);
    return 0;
}

/* rmdir dir, killing what is listed in it; killed processes leave asynchronously, so it
 * retries briefly. 0 once gone (or never made), else -errno. */
static int remove_group(const char *dir)
{
    for (int tries = 0; tries < 200; tries++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            return -errno;
        cgroup_kill_listed(dir);
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
    return -EBUSY;
}

int cgroup_destroy(struct sbx_cgroup *cg)
{
    if (!cg)
        return 0;
    int rc = 0;
    if (cg->peak_fd >= 0)
        close(cg->peak_fd);
    if (cg->cpu_fd >= 0)
        close(cg->cpu_fd);
    if (cg->oom_fd >= 0)
        close(cg->oom_fd);
    /* Children first: a group with a child cannot be removed. */
    char *dirs[2 + V1__COUNT] = {cg->write_dir, cg->run_dir};
    for (int c = 0; c < nctrl(cg->kind); c++)
        dirs[2 + c] = cg->dir[c];
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        if (!dirs[i])
            continue;
        int r = remove_group(dirs[i]);
        if (r < 0 && r != -EBUSY)
            rc = r;
        free(dirs[i]);
    }
    free(cg);
    return rc;
}

void cgroup_cleanup_all(void)
{
    for (int c = 0; c < V1__COUNT; c++) {
        if (state.parent_made[c] && state.parent[c])
            rmdir(state.parent[c]);
        state.parent_made[c] = false;
    }
    v2_step_back();
}

/* rmdir path after its subgroups, depth levels deep; only empty groups can go. */
static int remove_empty_tree(const char *path, int depth)
{
    DIR *d = depth > 0 ? opendir(path) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        cleanup_free char *child = xasprintf("%s/%s", path, e->d_name);
        remove_empty_tree(child, depth - 1);
    }
    if (d)
        closedir(d);
    return rmdir(path) < 0 ? -errno : 0;
}

/* Removes the empty groups of an earlier server or `run` that died without cleaning up (a
 * SIGKILL, an OOM kill): siblings named mcp-sandbox.<pid> whose pid no longer exists. Only
 * empty groups can be removed at all (rmdir answers EBUSY while a process is in one), so
 * nothing running is touched; a live pid, ours or anyone's, is never swept. Only from the
 * first pid namespace: from another, a server's pid may look dead while it lives. */
/* Whether we see every pid: in the kernel's first pid namespace (its inode is fixed,
 * PROC_PID_INIT_INO). Elsewhere a pid we cannot see may still be alive. */
static bool in_initial_pid_ns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 && st.st_ino == 0xEFFFFFFCu;
}

int cgroup_sweep_stale(void)
{
    if (cgroup_backend(NULL) == CGROUP_BACKEND_NONE || !in_initial_pid_ns())
        return 0;
    int removed = 0;
    for (int c = 0; c < nctrl(state.kind); c++) {
        const char *slash = strrchr(state.parent[c], '/');
        if (!slash)
            continue;
        cleanup_free char *base =
            xasprintf("%.*s", (int)(slash - state.parent[c]), state.parent[c]);
        DIR *d = opendir(base);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            char *end;
            if (strncmp(e->d_name, "mcp-sandbox.", 12) != 0 || e->d_type != DT_DIR)
                continue;
            long pid = strtol(e->d_name + 12, &end, 10);
            /* mcp-sandbox.<pid>, or the leaf a v2 process stepped into (.self) */
            if (end == e->d_name + 12 || (*end && strcmp(end, ".self") != 0) || pid <= 0 ||
                pid == (long)getpid())
                continue;
            if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                continue;
            cleanup_free char *group = xasprintf("%s/%s", base, e->d_name);
            /* mcp-sandbox.<pid>/<sandbox>/{run,write}: two levels below. */
            if (remove_empty_tree(group, 2) == 0)
                removed++;
        }
        closedir(d);
    }
    return removed;
}
