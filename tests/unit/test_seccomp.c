/* The syscall policy compiles, and every row of its table names a syscall this architecture
 * has, so no denial silently drops out of the filter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jail/seccomp.h"

static void every_row_resolves_on_x86_64(void **state)
{
    (void)state;
    size_t n = 0;
    const struct seccomp_rule_info *t = seccomp_denied_table(&n);
    assert_true(n >= 50);
    for (size_t i = 0; i < n; i++) {
        int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, t[i].syscall);
        if (nr == __NR_SCMP_ERROR)
            fail_msg("%s does not resolve", t[i].syscall);
        assert_true(strlen(t[i].reason) > 10);
    }
}

static void issue_required_rows_are_present(void **state)
{
    (void)state;
    static const char *const required[] = {
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kcmp",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "unshare",
        "setns",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "open_by_handle_at",
        "name_to_handle_at",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "syslog",
        "iopl",
        "ioperm",
        "quotactl",
        "mbind",
        "set_mempolicy",
        "migrate_pages",
        "move_pages",
        "set_mempolicy_home_node",
    };
    size_t n = 0;
    const struct seccomp_rule_info *t = seccomp_denied_table(&n);
    for (size_t r = 0; r < sizeof(required) / sizeof(required[0]); r++) {
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found |= strcmp(t[i].syscall, required[r]) == 0;
        if (!found)
            fail_msg("%s missing from the table", required[r]);
    }
}

/* The binaries embed the program compiled at build time (tools/seccomp_gen.c); it must be
 * exactly what the table compiles to now, instruction for instruction. */
static void embedded_program_equals_a_fresh_compile(void **state)
{
    (void)state;
    struct seccomp_program fresh;
    struct sbx_err err = {0};
    assert_int_equal(seccomp_policy_compile(&fresh, &err), 0);
    const struct seccomp_program *built = seccomp_program();
    assert_non_null(built);
    assert_true(built->prog.len > 50);
    assert_int_equal(built->prog.len, fresh.prog.len);
    for (unsigned i = 0; i < fresh.prog.len; i++) {
        const struct sock_filter *a = &built->prog.filter[i], *b = &fresh.prog.filter[i];
        if (a->code != b->code || a->jt != b->jt || a->jf != b->jf || a->k != b->k)
            fail_msg("instruction %u differs: built-in {0x%x,%u,%u,0x%x}, fresh {0x%x,%u,%u,0x%x}",
                     i, a->code, a->jt, a->jf, a->k, b->code, b->jt, b->jf, b->k);
    }
    free(fresh.prog.filter);
}

/* Native calls past the review get ENOSYS from the first instructions, before libseccomp's
 * program: arch x86_64, nr >= SECCOMP_FIRST_UNREVIEWED_NR and below the x32 bit. Another
 * architecture skips them all, to libseccomp's check that kills it. */
static void calls_past_the_review_get_enosys(void **state)
{
    (void)state;
    const struct sock_fprog *p = &seccomp_program()->prog;
    assert_true(p->len > 6);
    const struct sock_filter *f = p->filter;
    assert_int_equal(f[0].code, BPF_LD | BPF_W | BPF_ABS);
    assert_int_equal(f[0].k, offsetof(struct seccomp_data, arch));
    assert_int_equal(f[1].code, BPF_JMP | BPF_JEQ | BPF_K);
    assert_int_equal(f[1].k, AUDIT_ARCH_X86_64);
    assert_int_equal(f[1].jt, 0);
    assert_int_equal(f[1].jf, 4); /* past the ENOSYS return */
    assert_int_equal(f[2].code, BPF_LD | BPF_W | BPF_ABS);
    assert_int_equal(f[2].k, offsetof(struct seccomp_data, nr));
    assert_int_equal(f[3].code, BPF_JMP | BPF_JGE | BPF_K);
    assert_int_equal(f[3].k, SECCOMP_FIRST_UNREVIEWED_NR);
    assert_int_equal(f[3].jt, 0);
    assert_int_equal(f[3].jf, 2);
    assert_int_equal(f[4].code, BPF_JMP | BPF_JGE | BPF_K);
    assert_int_equal(f[4].k, 0x40000000);
    assert_int_equal(f[4].jt, 1);
    assert_int_equal(f[4].jf, 0);
    assert_int_equal(f[5].code, BPF_RET | BPF_K);
    assert_int_equal(f[5].k, SECCOMP_RET_ERRNO | 38 /* ENOSYS */);
    /* Every call the table names lies below the range, or its row would never be reached. */
    size_t n = 0;
    const struct seccomp_rule_info *t = seccomp_denied_table(&n);
    for (size_t i = 0; i < n; i++)
        assert_true(seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, t[i].syscall) <
                    SECCOMP_FIRST_UNREVIEWED_NR);
}

/* Independent of libseccomp's encoding: the built-in program compares the syscall number with
 * every row of the table. */
static void program_denies_every_table_row(void **state)
{
    (void)state;
    size_t n = 0;
    const struct seccomp_rule_info *t = seccomp_denied_table(&n);
    const struct sock_fprog *p = &seccomp_program()->prog;
    for (size_t i = 0; i < n; i++) {
        int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, t[i].syscall);
        bool found = false;
        for (unsigned k = 0; k < p->len && !found; k++)
            found =
                p->filter[k].code == (BPF_JMP | BPF_JEQ | BPF_K) && p->filter[k].k == (uint32_t)nr;
        if (!found)
            fail_msg("no comparison with %s (%d) in the built-in program", t[i].syscall, nr);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_row_resolves_on_x86_64),
        cmocka_unit_test(issue_required_rows_are_present),
        cmocka_unit_test(embedded_program_equals_a_fresh_compile),
        cmocka_unit_test(program_denies_every_table_row),
        cmocka_unit_test(calls_past_the_review_get_enosys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
