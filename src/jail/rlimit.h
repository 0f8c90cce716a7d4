/* rlimits: always FSIZE, NOFILE, CORE=0 and STACK; AS, CPU and NPROC too when no cgroup
 * carries the memory, CPU and pids limits. Child side, before exec. */
#ifndef SBX_JAIL_RLIMIT_H
#define SBX_JAIL_RLIMIT_H

#include "config.h"

#include <stdbool.h>

/* Returns 0 or -errno. */
int rlimits_apply(const struct sbx_profile *p, bool cgroup_active);
/* Parent side: -1, and why, when a limit p needs is above this process's hard limit. The
 * sandbox's child could not raise it (in its user namespace, CAP_SYS_RESOURCE does not count),
 * and its setrlimit would fail with a bare EPERM. */
int rlimits_check(const struct sbx_profile *p, bool cgroup_active, char *why, size_t size);

#endif
