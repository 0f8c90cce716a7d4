/* rlimits: always FSIZE, NOFILE, CORE=0 and STACK; AS, CPU and NPROC too when no cgroup
 * carries the memory, CPU and pids limits. Child side, before exec. */
#ifndef SBX_JAIL_RLIMIT_H
#define SBX_JAIL_RLIMIT_H

#include "config.h"

#include <stdbool.h>

/* Returns 0 or -errno. cpu_seconds is the RLIMIT_CPU fallback (0 = none). */
int rlimits_apply(const struct sbx_profile *p, bool cgroup_active);

#endif
