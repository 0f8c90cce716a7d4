/* The policy compiler: the table (seccomp_table.c) plus the rules that compare arguments,
 * compiled with libseccomp into a classic BPF program. It runs at build time
 * (tools/seccomp_gen.c embeds the result into the binary) and in the unit test that checks the
 * embedded program against a fresh compile; the binaries that run sandboxes never call it. */
#include "seccomp.h"

#include "util.h"

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/inotify.h>
#include <string.h>

static int add_rules(scmp_filter_ctx ctx, struct sbx_err *err)
{
    size_t n_denied = 0;
    const struct seccomp_rule_info *denied = seccomp_denied_table(&n_denied);
    for (size_t i = 0; i < n_denied; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i].syscall);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (r < 0)
            return sbx_fail_errno(err, -r, "seccomp rule for %s", denied[i].syscall);
    }
    struct {
        int nr;
        uint32_t action;
        unsigned n_args;
        struct scmp_arg_cmp arg;
    } const conditional[] = {
        /* clone3 passes its flags in memory that BPF cannot read: ENOSYS makes libc fall back
         * to clone, whose flags we can check. */
        {SCMP_SYS(clone3), SCMP_ACT_ERRNO(ENOSYS), 0, {0}},
        /* CVE-2019-10063: compare only the low 32 bits, as the kernel does, so a request with
         * high bits set cannot slip past. */
        {SCMP_SYS(ioctl), SCMP_ACT_ERRNO(EPERM), 1,
         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI)},
        {SCMP_SYS(ioctl), SCMP_ACT_ERRNO(EPERM), 1,
         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX)},
        /* AF_VSOCK is the one address family here that no network namespace confines: on a
         * virtual machine it reaches the hypervisor's host (CID 2) and the guest's own vsock
         * listeners from inside an otherwise empty namespace. socket() takes an int, so only
         * the low 32 bits are compared, as above. */
        {SCMP_SYS(socket), SCMP_ACT_ERRNO(EPERM), 1,
         SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_VSOCK)},
    };
    for (size_t i = 0; i < ARRAY_SIZE(conditional); i++) {
        int r;
        if (conditional[i].n_args == 0)
            r = seccomp_rule_add(ctx, conditional[i].action, conditional[i].nr, 0);
        else
            r = seccomp_rule_add(ctx, conditional[i].action, conditional[i].nr, 1,
                                 conditional[i].arg);
        if (r < 0)
            return sbx_fail_errno(err, -r, "seccomp conditional rule %zu", i);
    }
    /* clone with any namespace flag: one rule per flag, since "any bit of the mask set" is
     * not expressible as a single masked compare. */
    static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                             CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                             CLONE_NEWNET, CLONE_NEWTIME};
    for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
        if (r < 0)
            return sbx_fail_errno(err, -r, "seccomp rule for clone flags");
    }
    /* inotify watches that report reads: an IN_ACCESS, IN_OPEN or IN_CLOSE_NOWRITE watch on a
     * file the sandbox shares with the host (/usr, /etc) hears every process on the machine
     * open and read it, other sandboxes' too, as fanotify_init would (denied). Watches for
     * changes (IN_MODIFY, IN_CLOSE_WRITE, IN_CREATE...) stay allowed: nobody but the host's
     * root changes a shared file, and they are what tail -f and file watchers use. One rule
     * per bit, as for clone's flags. */
    static const unsigned long read_events[] = {IN_ACCESS, IN_OPEN, IN_CLOSE_NOWRITE};
    for (size_t i = 0; i < ARRAY_SIZE(read_events); i++) {
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(inotify_add_watch), 1,
                                 SCMP_A2(SCMP_CMP_MASKED_EQ, read_events[i], read_events[i]));
        if (r < 0)
            return sbx_fail_errno(err, -r, "seccomp rule for inotify_add_watch");
    }
    /* personality: only the default persona (0) and the query (0xffffffff) are allowed;
     * READ_IMPLIES_EXEC and friends weaken memory protections. libseccomp takes one comparison
     * per argument, so: a 32-bit value other than all-zeros or all-ones always has a set bit
     * whose cyclic neighbour is clear, and one rule per such pair denies exactly those. */
    for (unsigned i = 0; i < 32; i++) {
        uint64_t bit = 1ull << i, next = 1ull << ((i + 1) % 32);
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, bit | next, bit));
        if (r < 0)
            return sbx_fail_errno(err, -r, "seccomp rule for personality");
    }
    return 0;
}

int seccomp_policy_compile(struct seccomp_program *out, struct sbx_err *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return sbx_fail(err, ENOMEM, "seccomp_init failed");
    int rc = -1;
    int fds[2] = {-1, -1};
    /* Foreign ABIs (i386 int 0x80, x32) are killed outright: the rules above name x86_64
     * numbers only. */
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0) {
        sbx_fail_errno(err, -r, "seccomp bad-arch action");
        goto out;
    }
    /* A binary tree over syscall numbers instead of a chain of comparisons: the kernel runs
     * the program once per syscall number when it is loaded (to cache the calls it always
     * allows), and the shorter paths made that load about 15% cheaper here (225 -> 185 us,
     * four interleaved runs of 100 loads each). */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (r < 0) {
        sbx_fail_errno(err, -r, "seccomp binary-tree layout");
        goto out;
    }
    if (add_rules(ctx, err) < 0)
        goto out;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        sbx_fail_errno(err, errno, "pipe");
        goto out;
    }
    r = seccomp_export_bpf(ctx, fds[1]);
    close(fds[1]);
    fds[1] = -1;
    if (r < 0) {
        sbx_fail_errno(err, -r, "seccomp_export_bpf");
        goto out;
    }
    size_t cap = 4096, len = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (len == cap)
            buf = xrealloc(buf, cap *= 2);
        ssize_t n = read(fds[0], buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (len == 0 || len % sizeof(struct sock_filter) != 0) {
        free(buf);
        sbx_fail(err, EINVAL, "seccomp produced an unusable program (%zu bytes)", len);
        goto out;
    }
    /* Ahead of libseccomp's program, which can name only the calls it knows and allows the
     * rest: a native call numbered past the review gets ENOSYS. Only a refusal is added. Any
     * other architecture (i386) goes straight on to libseccomp's architecture check and is
     * killed, whatever its number; x32 numbers (bit 30) go on to it too, and are killed. */
    static const struct sock_filter newer_than_review[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, SECCOMP_FIRST_UNREVIEWED_NR, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    };
    size_t n_insns = len / sizeof(struct sock_filter) + ARRAY_SIZE(newer_than_review);
    if (n_insns > BPF_MAXINSNS) {
        free(buf);
        sbx_fail(err, EINVAL, "seccomp produced an unusable program (%zu instructions)", n_insns);
        goto out;
    }
    struct sock_filter *prog = xmalloc(n_insns * sizeof(*prog));
    memcpy(prog, newer_than_review, sizeof(newer_than_review));
    memcpy(prog + ARRAY_SIZE(newer_than_review), buf, len);
    free(buf);
    out->prog.len = (unsigned short)n_insns;
    out->prog.filter = prog;
    rc = 0;
out:
    if (fds[0] >= 0)
        close(fds[0]);
    seccomp_release(ctx);
    return rc;
}
