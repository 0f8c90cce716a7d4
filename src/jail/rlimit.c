#include "rlimit.h"

#include <errno.h>
#include <sys/resource.h>

/* Address space is not resident memory: the interpreter and numpy map far more than they
 * touch (numpy + matplotlib peak near 81 MiB of address space), so the RLIMIT_AS fallback
 * allows this much on top of the memory limit. */
#define AS_MARGIN (128ull << 20)

static int set1(int res, rlim_t v)
{
    struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
    return setrlimit(res, &rl) < 0 ? -errno : 0;
}

int rlimits_apply(const struct sbx_profile *p, bool cgroup_active)
{
    int r;
    if ((r = set1(RLIMIT_CORE, 0)) < 0 || (r = set1(RLIMIT_FSIZE, p->fsize_bytes)) < 0 ||
        (r = set1(RLIMIT_NOFILE, p->nofile)) < 0 || (r = set1(RLIMIT_STACK, p->stack_bytes)) < 0)
        return r;
    if (cgroup_active)
        return 0;
    /* No cgroup carries memory, CPU and pids limits: the per-process fallbacks do. */
    rlim_t cpu_s = p->timeout_ms / 1000 + 1;
    if ((r = set1(RLIMIT_AS, p->memory_bytes + AS_MARGIN)) < 0 ||
        (r = set1(RLIMIT_CPU, cpu_s)) < 0 || (r = set1(RLIMIT_NPROC, p->pids)) < 0)
        return r;
    return 0;
}
