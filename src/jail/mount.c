/* The sandbox's filesystem view, as a table walked by code: a tmpfs root with read-only binds
 * of the system directories, a generated /etc, a fresh /proc with its dangerous files covered,
 * a minimal /dev, and size-capped tmpfs for /tmp and /workspace. Nothing else from the host is
 * reachable after pivot_root. Runs in the child (in its own user and mount namespaces). */
#include "jail_internal.h"

#include "util.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>

/* The new root is built on a tmpfs mounted over this directory in the private mount ns. */
#define NEWROOT "/tmp"

enum mount_kind {
    MK_DIR,          /* mkdir dst */
    MK_BIND_RO,      /* bind src on dst, then read-only (dir or file) */
    MK_LINK_OR_BIND, /* host src is a symlink: copy the link; a directory: bind read-only */
    MK_COPY_LINK,    /* dst becomes the same symlink as src */
    MK_FILE,         /* dst gets generated content */
    MK_PROC,         /* fresh procfs for the sandbox's pid namespace */
    MK_COVER_FILE,   /* bind /dev/null over dst */
    MK_COVER_DIR,    /* empty read-only tmpfs over dst (one, bound over the others) */
    MK_DEV_NODE,     /* bind host device src onto an empty file dst */
    MK_TMPFS,        /* tmpfs with options from the plan (data names which) */
    MK_SYMLINK,      /* dst -> src */
};

struct mount_row {
    enum mount_kind kind;
    const char *src;
    const char *dst; /* relative to the new root */
    bool optional;   /* absent on the host: skip */
    const char *data;
};

static const char hosts_text[] = "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost\n";
static const char nsswitch_text[] = "passwd: files\ngroup: files\nhosts: files\n";

/* Why each row exists is the point of the table: read it top to bottom as the view. */
static const struct mount_row rootfs_plan[] = {
    {MK_BIND_RO, "/usr", "usr", false, NULL},
    /* Debian 12 is merged-usr: these are symlinks into /usr, recreated as such. */
    {MK_LINK_OR_BIND, "/bin", "bin", true, NULL},
    {MK_LINK_OR_BIND, "/sbin", "sbin", true, NULL},
    {MK_LINK_OR_BIND, "/lib", "lib", true, NULL},
    {MK_LINK_OR_BIND, "/lib64", "lib64", true, NULL},
    {MK_LINK_OR_BIND, "/lib32", "lib32", true, NULL},
    /* A curated /etc: generated identity files, the loader cache, certificates, and the
     * interpreter configs Python and matplotlib read. Nothing else. */
    {MK_DIR, NULL, "etc", false, NULL},
    {MK_FILE, NULL, "etc/passwd", false, "passwd"},
    {MK_FILE, NULL, "etc/group", false, "group"},
    {MK_FILE, NULL, "etc/hosts", false, hosts_text},
    {MK_FILE, NULL, "etc/hostname", false, "sandbox\n"},
    {MK_FILE, NULL, "etc/nsswitch.conf", false, nsswitch_text},
    {MK_BIND_RO, "/etc/ld.so.cache", "etc/ld.so.cache", true, NULL},
    {MK_COPY_LINK, "/etc/localtime", "etc/localtime", true, NULL},
    {MK_DIR, NULL, "etc/ssl", false, NULL},
    {MK_BIND_RO, "/etc/ssl/certs", "etc/ssl/certs", true, NULL},
    {MK_BIND_RO, "/etc/ssl/openssl.cnf", "etc/ssl/openssl.cnf", true, NULL},
    {MK_BIND_RO, "/etc/ca-certificates", "etc/ca-certificates", true, NULL},
    {MK_BIND_RO, "/etc/alternatives", "etc/alternatives", true, NULL},
    {MK_BIND_RO, "/etc/python3", "etc/python3", true, NULL},
    {MK_BIND_RO, "/etc/python3.11", "etc/python3.11", true, NULL},
    {MK_BIND_RO, "/etc/matplotlibrc", "etc/matplotlibrc", true, NULL},
    {MK_BIND_RO, "/etc/fonts", "etc/fonts", true, NULL},
    /* /proc of the sandbox's own pid namespace, with the host-global knobs covered. */
    {MK_DIR, NULL, "proc", false, NULL},
    {MK_PROC, NULL, "proc", false, NULL},
    {MK_BIND_RO, "proc/sys", "proc/sys", false, NULL},
    {MK_COVER_FILE, NULL, "proc/sysrq-trigger", true, NULL},
    {MK_COVER_FILE, NULL, "proc/kcore", true, NULL},
    {MK_COVER_FILE, NULL, "proc/keys", true, NULL},
    {MK_COVER_FILE, NULL, "proc/timer_list", true, NULL},
    {MK_COVER_FILE, NULL, "proc/sched_debug", true, NULL},
    {MK_COVER_FILE, NULL, "proc/latency_stats", true, NULL},
    /* Kernel addresses (where kptr_restrict lets them show) and the host's interrupt counts,
     * hard and soft (a timing side channel). */
    {MK_COVER_FILE, NULL, "proc/kallsyms", true, NULL},
    {MK_COVER_FILE, NULL, "proc/interrupts", true, NULL},
    {MK_COVER_FILE, NULL, "proc/softirqs", true, NULL},
    /* Every file lock on the host: among them the claims on the host-uid lock file, one per
     * live sandbox, with its uid. And the host's disk and memory activity. */
    {MK_COVER_FILE, NULL, "proc/locks", true, NULL},
    {MK_COVER_FILE, NULL, "proc/diskstats", true, NULL},
    {MK_COVER_FILE, NULL, "proc/vmstat", true, NULL},
    {MK_COVER_FILE, NULL, "proc/zoneinfo", true, NULL},
    {MK_COVER_FILE, NULL, "proc/buddyinfo", true, NULL},
    /* The host kernel's boot parameters: a hypervisor's or an installer's settings, tokens
     * and ports, none of them the sandbox's business. */
    {MK_COVER_FILE, NULL, "proc/cmdline", true, NULL},
    {MK_COVER_DIR, NULL, "proc/acpi", true, NULL},
    {MK_COVER_DIR, NULL, "proc/scsi", true, NULL},
    {MK_COVER_DIR, NULL, "proc/irq", true, NULL},
    {MK_COVER_DIR, NULL, "proc/bus", true, NULL},
    {MK_COVER_DIR, NULL, "proc/fs", true, NULL},
    /* The host's stall figures (PSI): how much other sandboxes wait on CPU, memory and I/O. */
    {MK_COVER_DIR, NULL, "proc/pressure", true, NULL},
    /* A minimal /dev: the harmless character devices and a private /dev/shm. A directory of
     * the root, so read-only with it: a tmpfs of its own would be one more superblock to make
     * and to kill for nothing writable. */
    {MK_DIR, NULL, "dev", false, NULL},
    {MK_DEV_NODE, "/dev/null", "dev/null", false, NULL},
    {MK_DEV_NODE, "/dev/zero", "dev/zero", false, NULL},
    {MK_DEV_NODE, "/dev/full", "dev/full", false, NULL},
    {MK_DEV_NODE, "/dev/random", "dev/random", false, NULL},
    {MK_DEV_NODE, "/dev/urandom", "dev/urandom", false, NULL},
    {MK_DIR, NULL, "dev/shm", false, NULL},
    {MK_TMPFS, NULL, "dev/shm", false, "shm"},
    {MK_SYMLINK, "/proc/self/fd", "dev/fd", false, NULL},
    {MK_SYMLINK, "/proc/self/fd/0", "dev/stdin", false, NULL},
    {MK_SYMLINK, "/proc/self/fd/1", "dev/stdout", false, NULL},
    {MK_SYMLINK, "/proc/self/fd/2", "dev/stderr", false, NULL},
    /* Writable, size- and inode-capped scratch space. Not noexec: running what the user just
     * wrote (a script, a compiled binary) is the point; nosuid and nodev still hold, and
     * no_new_privs plus the empty capability sets make exec gain nothing. */
    {MK_DIR, NULL, "tmp", false, NULL},
    {MK_TMPFS, NULL, "tmp", false, "tmp"},
    {MK_DIR, NULL, "workspace", false, NULL},
    {MK_TMPFS, NULL, "workspace", false, "workspace"},
};

/* Flags a user namespace may not clear on a bind remount: they are locked to the source
 * mount, so a read-only remount must repeat them or the kernel answers EPERM. */
static unsigned long locked_flags(const char *path)
{
    struct statvfs sv;
    unsigned long f = 0;
    if (statvfs(path, &sv) < 0)
        return 0;
    if (sv.f_flag & ST_NOSUID)
        f |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV)
        f |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC)
        f |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME)
        f |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME)
        f |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME)
        f |= MS_RELATIME;
    return f;
}

/* A bind made read-only, nosuid and nodev together with every mount under it: a host mount
 * below /usr or /etc/ssl/certs comes along with MS_REC, and a remount would change only the
 * top one. mount_setattr (Linux 5.12) adds the flags in one call and leaves the locked ones
 * alone. Older kernels get the remount of the top mount, which is all they can do in one
 * call. */
static int make_read_only(const char *dst)
{
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
    };
    if (syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof(attr)) == 0)
        return 0;
    if (errno != ENOSYS)
        return -errno;
    unsigned long fl = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(dst);
    return mount(NULL, dst, NULL, fl, NULL) < 0 ? -errno : 0;
}

static int make_empty_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return errno == EEXIST ? 0 : -errno;
    close(fd);
    return 0;
}

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -errno;
    int r = write_all(fd, text, strlen(text));
    close(fd);
    return r;
}

/* src_st: src's stat if the caller already has it (following links), else NULL. */
static int bind_ro(const char *src, const char *dst, const struct stat *src_st)
{
    struct stat st;
    if (!src_st) {
        if (stat(src, &st) < 0)
            return -errno;
        src_st = &st;
    }
    if (S_ISDIR(src_st->st_mode)) {
        if (mkdir(dst, 0755) < 0 && errno != EEXIST)
            return -errno;
    } else {
        int r = make_empty_file(dst);
        if (r < 0)
            return r;
    }
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        return -errno;
    return make_read_only(dst);
}

static int copy_link(const char *src, const char *dst)
{
    char target[512];
    ssize_t n = readlink(src, target, sizeof(target) - 1);
    if (n < 0)
        return -errno;
    target[n] = '\0';
    return symlink(target, dst) < 0 ? -errno : 0;
}

static const char *tmpfs_options(const struct jail_child_plan *plan, const char *which,
                                 unsigned long *flags)
{
    *flags = MS_NOSUID | MS_NODEV;
    if (strcmp(which, "shm") == 0) {
        *flags |= MS_NOEXEC;
        return plan->shm_opts;
    }
    if (strcmp(which, "tmp") == 0)
        return plan->tmp_opts;
    return plan->workspace_opts;
}

struct rootfs_state {
    const char *cover_dir; /* the first MK_COVER_DIR mounted, bound over the later ones */
};

static int apply_row(const struct jail_child_plan *plan, const struct mount_row *row,
                     struct rootfs_state *state)
{
    struct stat st;
    bool have_st = false;
    unsigned long fl;
    if (row->src && row->optional && row->kind != MK_SYMLINK) {
        if (lstat(row->src, &st) < 0)
            return 0;
        have_st = true;
    }
    switch (row->kind) {
    case MK_DIR:
        return mkdir(row->dst, 0755) < 0 && errno != EEXIST ? -errno : 0;
    case MK_BIND_RO:
        /* An lstat of anything but a link is the stat bind_ro needs. */
        return bind_ro(row->src, row->dst, have_st && !S_ISLNK(st.st_mode) ? &st : NULL);
    case MK_LINK_OR_BIND:
        if (!have_st && lstat(row->src, &st) < 0)
            return -errno;
        return S_ISLNK(st.st_mode) ? copy_link(row->src, row->dst)
                                   : bind_ro(row->src, row->dst, &st);
    case MK_COPY_LINK:
        return copy_link(row->src, row->dst);
    case MK_FILE:
        if (strcmp(row->data, "passwd") == 0)
            return write_text(row->dst, plan->passwd);
        if (strcmp(row->data, "group") == 0)
            return write_text(row->dst, plan->group);
        return write_text(row->dst, row->data);
    case MK_PROC:
        return mount("proc", row->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ? -errno
                                                                                           : 0;
    /* Covers go over files of the fresh /proc, which no code has run in yet: the mount itself
     * says whether the kernel has one (ENOENT), without a lookup of its own first. */
    case MK_COVER_FILE:
        if (mount("/dev/null", row->dst, NULL, MS_BIND, NULL) == 0)
            return 0;
        return errno == ENOENT && row->optional ? 0 : -errno;
    case MK_COVER_DIR:
        /* One empty read-only tmpfs, bound over the rest: a bind costs far less than a new
         * superblock, at setup and again at teardown, and keeps the read-only flag. */
        if (state->cover_dir) {
            if (mount(state->cover_dir, row->dst, NULL, MS_BIND, NULL) == 0)
                return 0;
        } else if (mount("tmpfs", row->dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                         "size=0,nr_inodes=1") == 0) {
            state->cover_dir = row->dst;
            return 0;
        }
        return errno == ENOENT && row->optional ? 0 : -errno;
    case MK_DEV_NODE: {
        int r = make_empty_file(row->dst);
        if (r < 0)
            return r;
        return mount(row->src, row->dst, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
    }
    case MK_TMPFS: {
        const char *opts = tmpfs_options(plan, row->data, &fl);
        return mount("tmpfs", row->dst, "tmpfs", fl, opts) < 0 ? -errno : 0;
    }
    case MK_SYMLINK:
        return symlink(row->src, row->dst) < 0 ? -errno : 0;
    }
    return -EINVAL;
}

int jail_setup_rootfs(const struct jail_child_plan *plan, enum jail_step *step)
{
    *step = STEP_MOUNTS;
    /* Nothing we mount may propagate back to the host. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -errno;
    if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=256") <
        0)
        return -errno;
    if (chdir(NEWROOT) < 0)
        return -errno;
    struct rootfs_state state = {0};
    for (size_t i = 0; i < ARRAY_SIZE(rootfs_plan); i++) {
        int r = apply_row(plan, &rootfs_plan[i], &state);
        if (r < 0)
            return r;
    }
    *step = STEP_PIVOT;
    /* pivot_root(".", ".") stacks the old root under the new one; detaching it leaves only
     * the new root (the technique runc uses, with no directory left behind). */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return -errno;
    if (umount2(".", MNT_DETACH) < 0)
        return -errno;
    if (chdir("/") < 0)
        return -errno;
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        return -errno;
    return 0;
}
