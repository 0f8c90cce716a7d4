/* Landlock, as defence in depth behind the mount namespace: even if some path in the view
 * were writable by mistake, only /workspace, /tmp, /dev/shm and the harmless devices are.
 * Debian 12's headers stop at ABI 1, so the ABI we use is spelled out here. */
#include "landlock.h"

#include "util.h"

#include <fcntl.h>
#include <linux/types.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule       445
#define SYS_landlock_restrict_self  446
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH      1

#define LL_FS_EXECUTE     (1ULL << 0)
#define LL_FS_WRITE_FILE  (1ULL << 1)
#define LL_FS_READ_FILE   (1ULL << 2)
#define LL_FS_READ_DIR    (1ULL << 3)
#define LL_FS_ABI1_ALL    ((1ULL << 13) - 1) /* EXECUTE .. MAKE_SYM */
#define LL_FS_REFER       (1ULL << 13)       /* ABI 2 */
#define LL_FS_TRUNCATE    (1ULL << 14)       /* ABI 3 */
#define LL_FS_IOCTL_DEV   (1ULL << 15)       /* ABI 5 */
#define LL_SCOPE_ABSTRACT (1ULL << 0)        /* ABI 6 */
#define LL_SCOPE_SIGNAL   (1ULL << 1)        /* ABI 6 */

struct ll_ruleset_attr {
    __u64 handled_access_fs;
    __u64 handled_access_net;
    __u64 scoped;
};

struct ll_path_beneath {
    __u64 allowed_access;
    __s32 parent_fd;
} __attribute__((packed));

int landlock_abi_version(void)
{
    static int cached = -1;
    if (cached < 0) {
        long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
        cached = v < 0 ? 0 : (int)v;
    }
    return cached;
}

static __u64 fs_rights_for_abi(int abi)
{
    __u64 r = LL_FS_ABI1_ALL;
    if (abi >= 2)
        r |= LL_FS_REFER;
    if (abi >= 3)
        r |= LL_FS_TRUNCATE;
    if (abi >= 5)
        r |= LL_FS_IOCTL_DEV;
    return r;
}

struct ll_rule {
    const char *path;
    __u64 access; /* masked by what the ABI handles */
};

static int add_path(int ruleset, const char *path, __u64 access)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    struct ll_path_beneath pb = {.allowed_access = access, .parent_fd = fd};
    long r = syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
    int e = errno;
    close(fd);
    return r < 0 ? -e : 0;
}

int landlock_restrict_sandbox(void)
{
    int abi = landlock_abi_version();
    if (abi <= 0)
        return -EOPNOTSUPP;
    __u64 all = fs_rights_for_abi(abi);
    __u64 read_exec = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR;
    __u64 dev_rw = LL_FS_WRITE_FILE | LL_FS_READ_FILE | (all & (LL_FS_TRUNCATE | LL_FS_IOCTL_DEV));
    const struct ll_rule rules[] = {
        {"/", read_exec},      {"/workspace", all},   {"/tmp", all},         {"/dev/shm", all},
        {"/dev/null", dev_rw}, {"/dev/zero", dev_rw}, {"/dev/full", dev_rw},
    };
    struct ll_ruleset_attr attr = {.handled_access_fs = all};
    size_t attr_size = sizeof(__u64);
    if (abi >= 6) {
        /* Abstract unix sockets and signals outside this sandbox become unreachable. */
        attr.scoped = LL_SCOPE_ABSTRACT | LL_SCOPE_SIGNAL;
        attr_size = sizeof(attr);
    }
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (ruleset < 0)
        return -errno;
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(rules) && r == 0; i++)
        r = add_path(ruleset, rules[i].path, rules[i].access & all);
    if (r == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
        r = -errno;
    close(ruleset);
    return r;
}
