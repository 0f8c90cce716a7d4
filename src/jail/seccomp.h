/* The syscall policy: a data table (one reason per row), compiled with libseccomp at build time
 * into a classic BPF program that is embedded in the binary; the child installs it with no
 * allocation. */
#ifndef SBX_JAIL_SECCOMP_H
#define SBX_JAIL_SECCOMP_H

#include "err.h"

#include <linux/filter.h>
#include <stddef.h>

struct seccomp_rule_info {
    const char *syscall; /* name as libseccomp knows it */
    const char *reason;  /* why it is denied */
};

/* Syscall numbers from this one up (x86_64: 454, futex_wake, Linux 6.7, and everything after)
 * are newer than the table's review, which covered every call below it: the filter answers
 * them ENOSYS, as a kernel without them would, instead of letting them through by default. */
#define SECCOMP_FIRST_UNREVIEWED_NR 454

/* A compiled filter: a sock_fprog ready for seccomp(SECCOMP_SET_MODE_FILTER). */
struct seccomp_program {
    struct sock_fprog prog;
};

/* The default policy as compiled at build time. Shared, never freed. */
const struct seccomp_program *seccomp_program(void);

/* Whether this process may install a filter at all (kernel support, the actions the program
 * uses, no outer filter blocking seccomp(2)). Probed once. Returns 0, or -1 with err naming
 * what is missing. */
int seccomp_filter_available(struct sbx_err *err);

/* Child side, after PR_SET_NO_NEW_PRIVS: install prog. Async-signal-safe. Returns -errno. */
int seccomp_program_install(const struct seccomp_program *p);

/* The table, for doctor and for the tests that walk every denied row. */
const struct seccomp_rule_info *seccomp_denied_table(size_t *n);

/* Compile the table with libseccomp (build time and tests only; links libseccomp). The caller
 * frees out->prog.filter. */
int seccomp_policy_compile(struct seccomp_program *out, struct sbx_err *err);

#endif
