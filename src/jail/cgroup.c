/* Placeholder: replaced by the work that owns this facility. */
#include "cgroup.h"

#include <errno.h>
#include <stddef.h>

enum cgroup_backend_kind cgroup_backend(const char **why)
{
    if (why)
        *why = "cgroup backend is not built yet";
    return CGROUP_BACKEND_NONE;
}

int cgroup_create(const char *name, const struct cgroup_limits *lim, struct sbx_cgroup **out,
                  struct sbx_err *err)
{
    (void)name;
    (void)lim;
    *out = NULL;
    return sbx_fail(err, ENOSYS, "cgroup backend is not built yet");
}

int cgroup_attach(struct sbx_cgroup *cg, pid_t pid, struct sbx_err *err)
{
    (void)cg;
    (void)pid;
    return sbx_fail(err, ENOSYS, "cgroup backend is not built yet");
}

int cgroup_dirfd(struct sbx_cgroup *cg)
{
    (void)cg;
    return -1;
}

int cgroup_read_usage(struct sbx_cgroup *cg, struct cgroup_usage *u)
{
    (void)cg;
    (void)u;
    return -ENOSYS;
}

int cgroup_kill_all(struct sbx_cgroup *cg)
{
    (void)cg;
    return -ENOSYS;
}

int cgroup_destroy(struct sbx_cgroup *cg)
{
    (void)cg;
    return 0;
}
