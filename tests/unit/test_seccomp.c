/* The syscall policy compiles, and every row of its table names a syscall this architecture
 * has, so no denial silently drops out of the filter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
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

static void program_compiles_once_and_is_cached(void **state)
{
    (void)state;
    const struct seccomp_program *a = NULL, *b = NULL;
    struct sbx_err err = {0};
    assert_int_equal(seccomp_program_get(&a, &err), 0);
    assert_int_equal(seccomp_program_get(&b, &err), 0);
    assert_ptr_equal(a, b);
    assert_true(a->prog.len > 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_row_resolves_on_x86_64),
        cmocka_unit_test(issue_required_rows_are_present),
        cmocka_unit_test(program_compiles_once_and_is_cached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
