/* Placeholder: replaced by the seccomp work. */
#include "probe.h"

#include <stddef.h>

const struct probe_op probe_ops_syscalls[] = {
    {NULL, NULL, NULL},
};
