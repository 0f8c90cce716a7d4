#include "rlimit.h"

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

/* Address space is not resident memory: the interpreter and numpy map far more than they
 * touch (numpy + matplotlib peak near 81 MiB of address space), so the RLIMIT_AS fallback
 * allows this much on top of the memory limit. */
#define AS_MARGIN (128ull << 20)

struct wanted_limit {
    int resource;
    rlim_t value;
    const char *key; /* the profile's, for a refusal */
};

/* The limits a sandbox of p sets, in the order they are set. */
static size_t wanted_limits(const struct sbx_profile *p, bool cgroup_active,
                            struct wanted_limit out[7])
{
    size_t n = 0;
    out[n++] = (struct wanted_limit){RLIMIT_CORE, 0, NULL};
    out[n++] = (struct wanted_limit){RLIMIT_FSIZE, p->fsize_bytes, "fsize"};
    out[n++] = (struct wanted_limit){RLIMIT_NOFILE, p->nofile, "nofile"};
    out[n++] = (struct wanted_limit){RLIMIT_STACK, p->stack_bytes, "stack"};
    if (cgroup_active)
        return n;
    /* No cgroup carries memory, CPU and pids limits: the per-process fallbacks do. */
    out[n++] = (struct wanted_limit){RLIMIT_AS, p->memory_bytes + AS_MARGIN, "memory"};
    out[n++] = (struct wanted_limit){RLIMIT_CPU, p->timeout_ms / 1000 + 1, "timeout_s"};
    out[n++] = (struct wanted_limit){RLIMIT_NPROC, p->pids, "pids"};
    return n;
}

int rlimits_apply(const struct sbx_profile *p, bool cgroup_active)
{
    struct wanted_limit w[7];
    size_t n = wanted_limits(p, cgroup_active, w);
    for (size_t i = 0; i < n; i++) {
        struct rlimit rl = {.rlim_cur = w[i].value, .rlim_max = w[i].value};
        if (setrlimit(w[i].resource, &rl) < 0)
            return -errno;
    }
    return 0;
}

int rlimits_check(const struct sbx_profile *p, bool cgroup_active, char *why, size_t size)
{
    static const char *const names[] = {
        [RLIMIT_FSIZE] = "RLIMIT_FSIZE", [RLIMIT_NOFILE] = "RLIMIT_NOFILE",
        [RLIMIT_STACK] = "RLIMIT_STACK", [RLIMIT_AS] = "RLIMIT_AS",
        [RLIMIT_CPU] = "RLIMIT_CPU",     [RLIMIT_NPROC] = "RLIMIT_NPROC",
    };
    struct wanted_limit w[7];
    size_t n = wanted_limits(p, cgroup_active, w);
    for (size_t i = 0; i < n; i++) {
        struct rlimit rl;
        if (!w[i].key || getrlimit(w[i].resource, &rl) < 0 || rl.rlim_max == RLIM_INFINITY ||
            w[i].value <= rl.rlim_max)
            continue;
        snprintf(why, size,
                 "profile %s needs %s %llu (from its %s), above this process's hard limit %llu, "
                 "which no sandbox can raise: raise the hard limit where the server starts "
                 "(ulimit -H, systemd's Limit*=) or lower the profile's %s",
                 p->name, names[w[i].resource], (unsigned long long)w[i].value, w[i].key,
                 (unsigned long long)rl.rlim_max, w[i].key);
        return -1;
    }
    return 0;
}
