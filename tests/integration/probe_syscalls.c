/* One row per syscall the seccomp policy denies, with arguments chosen so that outside a
 * sandbox (as root) the call fails with anything but EPERM: inside, EPERM can then only come
 * from the filter. Plus controls that must stay allowed, and the foreign-ABI rows. */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NONE "/nonexistent-probe-path"

#define ROW(name, nr, a, b, c, d, e, f)                                                            \
    static int row_##name(int argc, char **argv)                                                   \
    {                                                                                              \
        (void)argc;                                                                                \
        (void)argv;                                                                                \
        long r = syscall(nr, a, b, c, d, e, f);                                                    \
        return r < 0 ? errno : 0;                                                                  \
    }

ROW(keyctl, SYS_keyctl, 0x7fff, 0, 0, 0, 0, 0)
ROW(add_key, SYS_add_key, NULL, NULL, NULL, 0, 0, 0)
ROW(request_key, SYS_request_key, NULL, NULL, NULL, 0, 0, 0)
ROW(bpf, SYS_bpf, 0x7fff, NULL, 0, 0, 0, 0)
ROW(perf_event_open, SYS_perf_event_open, NULL, 0, -1, -1, 0, 0)
ROW(userfaultfd, SYS_userfaultfd, 0xffff, 0, 0, 0, 0, 0)
ROW(io_uring_setup, SYS_io_uring_setup, 0, NULL, 0, 0, 0, 0)
ROW(io_uring_enter, SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0)
ROW(io_uring_register, SYS_io_uring_register, -1, 0, NULL, 0, 0, 0)
ROW(ptrace, SYS_ptrace, 0x7fff, 0, 0, 0, 0, 0)
ROW(process_vm_readv, SYS_process_vm_readv, 0, NULL, 0, NULL, 0, 0)
ROW(process_vm_writev, SYS_process_vm_writev, 0, NULL, 0, NULL, 0, 0)
ROW(kcmp, SYS_kcmp, 0, 0, 0x7fff, 0, 0, 0)
ROW(pidfd_getfd, SYS_pidfd_getfd, -1, 0, 0, 0, 0, 0)
ROW(memfd_secret, SYS_memfd_secret, 0x7fffffff, 0, 0, 0, 0, 0)
/* FAN_REPORT_FID, the flag an unprivileged caller may use, with bad event flags: EINVAL for
 * root and for the sandbox user alike, so only the filter says EPERM. */
ROW(fanotify_init, SYS_fanotify_init, 0x200, 0xffffffffu, 0, 0, 0, 0)
ROW(mount, SYS_mount, NULL, NULL, NULL, 0, NULL, 0)
ROW(umount2, SYS_umount2, NONE, 0, 0, 0, 0, 0)
ROW(pivot_root, SYS_pivot_root, NULL, NULL, 0, 0, 0, 0)
ROW(chroot, SYS_chroot, NONE, 0, 0, 0, 0, 0)
ROW(fsopen, SYS_fsopen, NULL, 0, 0, 0, 0, 0)
ROW(fsmount, SYS_fsmount, -1, 0, 0, 0, 0, 0)
ROW(fsconfig, SYS_fsconfig, -1, 0, NULL, NULL, 0, 0)
ROW(fspick, SYS_fspick, -1, NULL, 0, 0, 0, 0)
ROW(move_mount, SYS_move_mount, -1, NULL, -1, NULL, 0, 0)
ROW(open_tree, SYS_open_tree, -1, NULL, 0, 0, 0, 0)
ROW(mount_setattr, SYS_mount_setattr, -1, NULL, 0, NULL, 0, 0)
ROW(unshare, SYS_unshare, 0, 0, 0, 0, 0, 0)
ROW(setns, SYS_setns, -1, 0, 0, 0, 0, 0)
ROW(kexec_load, SYS_kexec_load, 0, 0, NULL, 0xffffffffUL, 0, 0)
ROW(kexec_file_load, SYS_kexec_file_load, -1, -1, 0, NULL, 0x7fff, 0)
ROW(init_module, SYS_init_module, NULL, 0, NULL, 0, 0, 0)
ROW(finit_module, SYS_finit_module, -1, NULL, 0, 0, 0, 0)
ROW(delete_module, SYS_delete_module, NULL, 0, 0, 0, 0, 0)
ROW(open_by_handle_at, SYS_open_by_handle_at, -1, NULL, 0, 0, 0, 0)
ROW(name_to_handle_at, SYS_name_to_handle_at, -1, NULL, NULL, NULL, 0, 0)
ROW(reboot, SYS_reboot, 0, 0, 0, NULL, 0, 0)
ROW(swapon, SYS_swapon, NULL, 0, 0, 0, 0, 0)
ROW(swapoff, SYS_swapoff, NULL, 0, 0, 0, 0, 0)
ROW(acct, SYS_acct, NONE, 0, 0, 0, 0, 0)
ROW(settimeofday, SYS_settimeofday, NULL, NULL, 0, 0, 0, 0)
ROW(clock_settime, SYS_clock_settime, 0x7fff, NULL, 0, 0, 0, 0)
ROW(clock_adjtime, SYS_clock_adjtime, 0x7fff, NULL, 0, 0, 0, 0)
ROW(adjtimex, SYS_adjtimex, NULL, 0, 0, 0, 0, 0)
ROW(syslog, SYS_syslog, 0x7fff, NULL, 0, 0, 0, 0)
ROW(iopl, SYS_iopl, 0xff, 0, 0, 0, 0, 0)
ROW(ioperm, SYS_ioperm, 0, 0, 0, 0, 0, 0)
ROW(quotactl, SYS_quotactl, 0, NULL, 0, NULL, 0, 0)
ROW(quotactl_fd, SYS_quotactl_fd, -1, 0, 0, NULL, 0, 0)
ROW(mbind, SYS_mbind, NULL, 0, 0x7fff, NULL, 0, 0)
ROW(set_mempolicy, SYS_set_mempolicy, 0x7fff, NULL, 0, 0, 0, 0)
ROW(migrate_pages, SYS_migrate_pages, 0, 0, NULL, NULL, 0, 0)
ROW(move_pages, SYS_move_pages, 0, 0, NULL, NULL, NULL, 0)
ROW(lookup_dcookie, SYS_lookup_dcookie, 0, NULL, 0, 0, 0, 0)
ROW(set_mempolicy_home_node, SYS_set_mempolicy_home_node, 0, 0, 0x7fff, 0, 0, 0)
ROW(modify_ldt, SYS_modify_ldt, 0x7fff, NULL, 0, 0, 0, 0)
/* open_tree_attr (Linux 6.15), past the policy's review: ENOSYS inside, EBADF outside. */
ROW(open_tree_attr, 467, -1, NULL, 0, NULL, 0, 0)
ROW(clone3, SYS_clone3, NULL, 0, 0, 0, 0, 0)
ROW(personality_rie, SYS_personality, 0x0400000, 0, 0, 0, 0, 0)

/* AF_VSOCK (40): the hypervisor's channel, outside every network namespace. Outside a sandbox
 * the socket is made (or EAFNOSUPPORT without vsock); the high bits, which socket()'s int
 * drops, must not slip past the filter. */
ROW(socket_vsock, SYS_socket, 40, SOCK_STREAM, 0, 0, 0, 0)
ROW(socket_vsock_highbits, SYS_socket, 0xdead000000000000UL | 40, SOCK_STREAM, 0, 0, 0, 0)

/* Controls that must stay allowed. */
ROW(socket_inet, SYS_socket, AF_INET, SOCK_STREAM, 0, 0, 0, 0)
ROW(getpid, SYS_getpid, 0, 0, 0, 0, 0, 0)
ROW(memfd_create, SYS_memfd_create, "probe", 0, 0, 0, 0, 0)
ROW(personality_query, SYS_personality, 0xffffffffUL, 0, 0, 0, 0, 0)
ROW(personality_default, SYS_personality, 0, 0, 0, 0, 0, 0)

static int ioctl_on_null(unsigned long req)
{
    int fd = open("/dev/null", O_RDONLY);
    if (fd < 0)
        return errno;
    char c = 'x';
    long r = syscall(SYS_ioctl, fd, req, &c);
    int e = r < 0 ? errno : 0;
    close(fd);
    return e;
}

/* A denied ioctl answers EPERM; an allowed one reaches /dev/null, which says ENOTTY. */
static int row_tiocsti(int argc, char **argv)
{
    (void)argc, (void)argv;
    return ioctl_on_null(TIOCSTI);
}

static int row_tiocsti_highbits(int argc, char **argv)
{
    (void)argc, (void)argv;
    return ioctl_on_null(0xdead000000000000UL | TIOCSTI);
}

static int row_tioclinux(int argc, char **argv)
{
    (void)argc, (void)argv;
    return ioctl_on_null(TIOCLINUX);
}

static int row_tiocgwinsz(int argc, char **argv)
{
    (void)argc, (void)argv;
    int e = ioctl_on_null(TIOCGWINSZ);
    return e == ENOTTY ? 0 : e;
}

/* cachestat (451, Linux 6.5), the last number below the review's end the table leaves open:
 * the fd is bad, so EBADF means the kernel got the call. */
static int row_cachestat(int argc, char **argv)
{
    (void)argc, (void)argv;
    long r = syscall(451, -1, NULL, NULL, 0);
    return r < 0 && errno != EBADF ? errno : 0;
}

/* A pidfd for a live child, and signalling through it, stay allowed. */
static int row_pidfd_open(int argc, char **argv)
{
    (void)argc, (void)argv;
    pid_t p = fork();
    if (p < 0)
        return errno;
    if (p == 0) {
        pause();
        _exit(0);
    }
    long fd = syscall(SYS_pidfd_open, p, 0);
    int e = fd < 0 ? errno : 0;
    if (fd >= 0 && syscall(SYS_pidfd_send_signal, (int)fd, SIGKILL, NULL, 0) < 0)
        e = errno;
    if (fd < 0)
        kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    if (fd >= 0)
        close((int)fd);
    return e;
}

/* An inotify watch on a file shared with the host, for events of mask: 0 or an errno. */
static int inotify_watch(const char *path, uint32_t mask)
{
    int fd = (int)syscall(SYS_inotify_init1, 0);
    if (fd < 0)
        return errno;
    int e = syscall(SYS_inotify_add_watch, fd, path, mask) < 0 ? errno : 0;
    close(fd);
    return e;
}

/* Watches that hear reads of a shared file: other processes' opens, reads and closes. */
static int row_inotify_open(int argc, char **argv)
{
    (void)argc, (void)argv;
    return inotify_watch("/usr/bin", IN_OPEN);
}

static int row_inotify_access(int argc, char **argv)
{
    (void)argc, (void)argv;
    return inotify_watch("/usr/bin/env", IN_ACCESS);
}

static int row_inotify_close_nowrite(int argc, char **argv)
{
    (void)argc, (void)argv;
    return inotify_watch("/etc", IN_MODIFY | IN_CLOSE_NOWRITE);
}

/* A watch for changes of the same shared file stays allowed: only the host's root makes any. */
static int row_inotify_changes(int argc, char **argv)
{
    (void)argc, (void)argv;
    return inotify_watch("/usr/bin/env",
                         IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF);
}

/* inotify, the ordinary way to watch files, stays allowed (fanotify_init is denied). */
static int row_inotify(int argc, char **argv)
{
    (void)argc, (void)argv;
    int fd = (int)syscall(SYS_inotify_init1, 0);
    if (fd < 0)
        return errno;
    int e = syscall(SYS_inotify_add_watch, fd, "/tmp", 0x100 /* IN_CREATE */) < 0 ? errno : 0;
    close(fd);
    return e;
}

static int row_fork(int argc, char **argv)
{
    (void)argc, (void)argv;
    pid_t p = fork();
    if (p < 0)
        return errno;
    if (p == 0)
        _exit(0);
    int st;
    waitpid(p, &st, 0);
    return 0;
}

static int row_clone_newuser(int argc, char **argv)
{
    (void)argc, (void)argv;
    long p = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (p < 0)
        return errno;
    if (p == 0)
        _exit(0);
    int st;
    waitpid((pid_t)p, &st, 0);
    return 0;
}

/* i386 getpid through the legacy gate: the filter must kill us (SIGSYS). */
static int row_int80(int argc, char **argv)
{
    (void)argc, (void)argv;
    long ret = 20;
    /* The 32-bit gate zeroes r8-r11 on return in 64-bit mode. */
    __asm__ volatile("int $0x80" : "+a"(ret) : : "r8", "r9", "r10", "r11", "memory");
    return ret < 0 ? (int)-ret : 0;
}

/* An i386 call numbered past the review (500): killed as a foreign ABI like any other, not
 * answered ENOSYS as a native one would be. */
static int row_int80_unreviewed(int argc, char **argv)
{
    (void)argc, (void)argv;
    long ret = 500;
    __asm__ volatile("int $0x80" : "+a"(ret) : : "r8", "r9", "r10", "r11", "memory");
    return ret < 0 ? (int)-ret : 0;
}

/* x32 getpid: same number space flag, also killed. */
static int row_x32(int argc, char **argv)
{
    (void)argc, (void)argv;
    long r = syscall(39 | 0x40000000L);
    return r < 0 ? errno : 0;
}

#define D(n)                                                                                       \
    {                                                                                              \
        "sys-" #n, "denied: " #n, row_##n                                                          \
    }

const struct probe_op probe_ops_syscalls[] = {
    D(keyctl),
    D(add_key),
    D(request_key),
    D(bpf),
    D(perf_event_open),
    D(userfaultfd),
    D(io_uring_setup),
    D(io_uring_enter),
    D(io_uring_register),
    D(ptrace),
    D(process_vm_readv),
    D(process_vm_writev),
    D(kcmp),
    D(pidfd_getfd),
    D(memfd_secret),
    D(fanotify_init),
    D(mount),
    D(umount2),
    D(pivot_root),
    D(chroot),
    D(fsopen),
    D(fsmount),
    D(fsconfig),
    D(fspick),
    D(move_mount),
    D(open_tree),
    D(mount_setattr),
    D(unshare),
    D(setns),
    D(kexec_load),
    D(kexec_file_load),
    D(init_module),
    D(finit_module),
    D(delete_module),
    D(open_by_handle_at),
    D(name_to_handle_at),
    D(reboot),
    D(swapon),
    D(swapoff),
    D(acct),
    D(settimeofday),
    D(clock_settime),
    D(clock_adjtime),
    D(adjtimex),
    D(syslog),
    D(iopl),
    D(ioperm),
    D(quotactl),
    D(quotactl_fd),
    D(mbind),
    D(set_mempolicy),
    D(migrate_pages),
    D(move_pages),
    D(lookup_dcookie),
    D(set_mempolicy_home_node),
    D(modify_ldt),
    D(open_tree_attr),
    D(personality_rie),
    D(tiocsti),
    D(tiocsti_highbits),
    D(tioclinux),
    D(clone_newuser),
    D(socket_vsock),
    D(socket_vsock_highbits),
    D(inotify_open),
    D(inotify_access),
    D(inotify_close_nowrite),
    {"sys-clone3", "clone3: ENOSYS so libc falls back to clone", row_clone3},
    {"allow-getpid", "control: getpid", row_getpid},
    {"allow-pidfd_open", "control: a pidfd for a child, the handle pidfd_getfd would use",
     row_pidfd_open},
    {"allow-memfd_create", "control: an ordinary memfd (memfd_secret is denied)", row_memfd_create},
    {"allow-inotify", "control: inotify on /tmp (fanotify_init is denied)", row_inotify},
    {"allow-inotify-changes", "control: inotify for changes of a shared file", row_inotify_changes},
    {"allow-socket_inet", "control: an ordinary socket (another family than AF_VSOCK)",
     row_socket_inet},
    {"allow-fork", "control: fork and wait", row_fork},
    {"allow-personality-query", "control: personality(0xffffffff)", row_personality_query},
    {"allow-personality-default", "control: personality(PER_LINUX)", row_personality_default},
    {"allow-tiocgwinsz", "control: a harmless ioctl", row_tiocgwinsz},
    {"allow-cachestat", "control: a reviewed call just below the ENOSYS range", row_cachestat},
    {"abi-int80", "i386 int 0x80: the process is killed", row_int80},
    {"abi-int80-unreviewed", "i386 int 0x80, a number past the review: killed too",
     row_int80_unreviewed},
    {"abi-x32", "x32 syscall: the process is killed", row_x32},
    {NULL, NULL, NULL},
};
