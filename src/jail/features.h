/* Kernel features, probed once and cached. `doctor` prints them; the jail refuses a sandbox
 * whose required layer is missing unless isolation.allow_degraded is set. */
#ifndef SBX_JAIL_FEATURES_H
#define SBX_JAIL_FEATURES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum feature_id {
    FEAT_USERNS = 0,
    FEAT_NS_PID,
    FEAT_NS_MNT,
    FEAT_NS_NET,
    FEAT_NS_IPC,
    FEAT_NS_UTS,
    FEAT_NS_CGROUP,
    FEAT_SECCOMP,
    FEAT_CGROUP,
    FEAT_LANDLOCK,
    FEAT_OPENAT2,
    FEAT_CLONE3,
    FEAT_PIDFD,
    FEAT_USERNS_OWNER,
    FEAT_HOST_UIDS,
    FEAT__COUNT,
};

struct feature_status {
    const char *name; /* "user namespaces", "seccomp-bpf", ... */
    bool available;
    bool required;    /* the default profile needs it */
    bool degradable;  /* isolation.allow_degraded lets a sandbox run without it */
    char detail[160]; /* "ABI 7", "v1: memory pids cpu cpuacct writable", ... */
    char hint[1024];  /* how to enable it when missing (the cgroup's names a path) */
};

/* Probe (first call) and return the cached table of FEAT__COUNT entries; host_uid and
 * host_uid_count are the configuration's (isolation.host_uid, isolation.host_uid_count). */
const struct feature_status *features_probe(uid_t host_uid, uint32_t host_uid_count);
/* The setting under which an unprivileged user's user namespace comes without capabilities
 * (Ubuntu's AppArmor restriction): the clone succeeds, and a sandbox made so would not work.
 * NULL when none applies. Read once. Settings that refuse the clone itself, the clone reports. */
const char *features_userns_owner_capless(void);

#endif
