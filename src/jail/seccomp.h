/* The syscall policy: a data table (one reason per row) compiled once with libseccomp into a
 * classic BPF program in the parent; the child installs the ready program with no allocation. */
#ifndef SBX_JAIL_SECCOMP_H
#define SBX_JAIL_SECCOMP_H

#include "err.h"

#include <linux/filter.h>
#include <stddef.h>

struct seccomp_rule_info {
    const char *syscall; /* name as libseccomp knows it */
    const char *reason;  /* why it is denied */
};

/* A compiled filter: a sock_fprog ready for seccomp(SECCOMP_SET_MODE_FILTER). */
struct seccomp_program {
    struct sock_fprog prog;
};

/* Compile the default policy (cached after the first call; the result is shared, never freed
 * by callers). Fails if libseccomp cannot build it. */
int seccomp_program_get(const struct seccomp_program **out, struct sbx_err *err);

/* Child side, after PR_SET_NO_NEW_PRIVS: install prog. Async-signal-safe. Returns -errno. */
int seccomp_program_install(const struct seccomp_program *p);

/* The table, for doctor and for the tests that walk every denied row. */
const struct seccomp_rule_info *seccomp_denied_table(size_t *n);

#endif
