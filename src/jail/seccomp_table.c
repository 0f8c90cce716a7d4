/* The syscall policy as data: one row per denied call, with the reason it is denied. Kept apart
 * from the compiler (seccomp_policy.c, libseccomp) so that doctor and the tests can walk the
 * table without linking libseccomp. */
#include "seccomp.h"

#include "util.h"

static const struct seccomp_rule_info denied[] = {
    {"keyctl", "kernel keyrings are shared with the host and a frequent source of CVEs"},
    {"add_key", "kernel keyrings are shared with the host"},
    {"request_key", "kernel keyrings are shared with the host"},
    {"bpf", "eBPF programs run in the kernel"},
    {"perf_event_open", "performance counters leak host activity and have a long CVE history"},
    {"userfaultfd", "lets code stall the kernel mid-copy, a building block of exploits"},
    {"io_uring_setup", "io_uring bypasses seccomp for the operations it performs"},
    {"io_uring_enter", "io_uring bypasses seccomp for the operations it performs"},
    {"io_uring_register", "io_uring bypasses seccomp for the operations it performs"},
    {"ptrace", "tracing could rewrite another process's syscalls"},
    {"process_vm_readv", "reads another process's memory"},
    {"process_vm_writev", "writes another process's memory"},
    {"kcmp", "compares kernel objects across processes (an information leak)"},
    {"pidfd_getfd", "copies another process's file descriptors: the access ptrace would give, "
                    "without ptrace"},
    {"mount", "the filesystem view is fixed by the server"},
    {"umount2", "the filesystem view is fixed by the server"},
    {"pivot_root", "the filesystem view is fixed by the server"},
    {"chroot", "the filesystem view is fixed by the server"},
    {"fsopen", "new mount API: the filesystem view is fixed"},
    {"fsmount", "new mount API: the filesystem view is fixed"},
    {"fsconfig", "new mount API: the filesystem view is fixed"},
    {"fspick", "new mount API: the filesystem view is fixed"},
    {"move_mount", "new mount API: the filesystem view is fixed"},
    {"open_tree", "new mount API: the filesystem view is fixed"},
    {"mount_setattr", "new mount API: the filesystem view is fixed"},
    {"unshare", "nested namespaces expose more kernel code to unprivileged users"},
    {"setns", "joining other namespaces"},
    {"kexec_load", "loads a new kernel"},
    {"kexec_file_load", "loads a new kernel"},
    {"init_module", "loads kernel code"},
    {"finit_module", "loads kernel code"},
    {"delete_module", "unloads kernel code"},
    {"open_by_handle_at", "opens files by handle, bypassing path checks (the 'shocker' escape)"},
    {"name_to_handle_at", "pairs with open_by_handle_at"},
    {"reboot", "system administration"},
    {"swapon", "system administration"},
    {"swapoff", "system administration"},
    {"acct", "system administration"},
    {"settimeofday", "the clock is host-global"},
    {"clock_settime", "the clock is host-global"},
    {"clock_adjtime", "the clock is host-global"},
    {"adjtimex", "the clock is host-global"},
    {"syslog", "the kernel log leaks host information"},
    {"iopl", "raw I/O port access"},
    {"ioperm", "raw I/O port access"},
    {"quotactl", "system administration"},
    {"quotactl_fd", "system administration"},
    {"mbind", "NUMA policy affects the host's memory placement"},
    {"set_mempolicy", "NUMA policy affects the host's memory placement"},
    {"migrate_pages", "NUMA: moves pages of other processes"},
    {"move_pages", "NUMA: moves pages of other processes"},
    {"set_mempolicy_home_node", "NUMA policy affects the host's memory placement"},
    {"modify_ldt", "rewrites the process's segment descriptors: rarely needed, a past source of "
                   "kernel exploits (CVE-2015-5157, CVE-2017-17053)"},
    {"memfd_secret", "takes its pages out of the kernel's direct map, splitting it for the whole "
                     "host; nothing a sandbox runs needs it"},
    {"fanotify_init", "an inode mark reports every process's opens and reads of a file the "
                      "sandbox shares with the host (/usr, /etc): a side channel into the host and "
                      "other sandboxes; Docker grants it only with CAP_SYS_ADMIN"},
    {"lookup_dcookie", "kernel profiling interface"},
    {"vhangup", "terminal administration"},
    {"nfsservctl", "removed kernel interface"},
};

const struct seccomp_rule_info *seccomp_denied_table(size_t *n)
{
    *n = ARRAY_SIZE(denied);
    return denied;
}
