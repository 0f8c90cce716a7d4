/* The syscall policy at run time. Default allow (the kernel namespaces, Landlock and the uid do
 * the containment); deny what widens the kernel's attack surface or escapes those layers. The
 * rules are the table in seccomp_table.c, compiled by libseccomp at build time
 * (tools/seccomp_gen.c) into the program embedded here: compiling it in every `run` process
 * cost about 0.9 ms and kept libseccomp in the binary. tests/unit/test_seccomp.c checks that
 * the embedded program equals a fresh compile of the same table. */
#include "seccomp.h"

#include "util.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

/* Generated at build time into build/gen/seccomp_filter.c. */
extern const struct seccomp_program seccomp_embedded_program;

const struct seccomp_program *seccomp_program(void)
{
    return &seccomp_embedded_program;
}

/* Probed once: the actions the program uses, then filter mode itself. A NULL program is refused
 * with EFAULT only after the kernel has accepted the mode, so nothing gets installed. */
static int probe_filter_mode(char *why, size_t n)
{
    static const struct {
        unsigned int action;
        const char *name;
    } actions[] = {{SECCOMP_RET_ERRNO, "errno"}, {SECCOMP_RET_KILL_PROCESS, "kill_process"}};
    for (size_t i = 0; i < ARRAY_SIZE(actions); i++) {
        unsigned int a = actions[i].action;
        if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &a) < 0) {
            int e = errno;
            if (e == ENOSYS)
                snprintf(why, n,
                         "seccomp(2) is missing (Linux 3.17+, CONFIG_SECCOMP_FILTER) "
                         "or blocked by an outer sandbox's filter");
            else
                snprintf(why, n, "the kernel does not offer the %s action (Linux 4.14+)",
                         actions[i].name);
            return -e;
        }
    }
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, NULL) < 0 && errno == EFAULT)
        return 0;
    int e = errno ? errno : EPROTO;
    snprintf(why, n, "the kernel refuses seccomp filter mode (CONFIG_SECCOMP_FILTER)");
    return -e;
}

int seccomp_filter_available(struct sbx_err *err)
{
    static bool probed;
    static int status;
    static char why[160];
    if (!probed) {
        status = probe_filter_mode(why, sizeof(why));
        probed = true;
    }
    if (status < 0)
        return sbx_fail_errno(err, -status, "%s", why);
    return 0;
}

int seccomp_program_install(const struct seccomp_program *p)
{
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p->prog) < 0)
        return -errno;
    return 0;
}
