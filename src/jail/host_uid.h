/* The host uid a root caller's sandbox maps to: one of isolation.host_uid_count consecutive
 * uids from isolation.host_uid, none used by another live sandbox of any process on this host.
 * The kernel counts what a sandbox holds (pending signals, inotify instances and watches,
 * message queue bytes, processes, user namespaces) per host uid: sandboxes that shared one
 * would share those limits, and one could use them all up for the rest. */
#ifndef SBX_JAIL_HOST_UID_H
#define SBX_JAIL_HOST_UID_H

#include "err.h"

#include <stdint.h>
#include <sys/types.h>

/* Where the claims are kept: a byte-range lock per uid (the byte at offset uid) on this
 * root-only file. Another process's live claims hold there, and a claim ends with the process
 * that made it. */
#define HOST_UID_LOCK_PATH "/run/mcp-sandbox.host-uids.lock"

struct host_uid_claim {
    uid_t uid;
    int lock_fd; /* holds the claim (its own open file: closing it ends the claim); -1: none */
};

/* Claims a free uid of the range. A range of one is shared by configuration and takes no
 * lock. Returns 0, or -1 with err (the range is not mapped in this process's user namespace,
 * the lock file cannot be opened, or all are in use). */
int host_uid_claim(uint32_t first, uint32_t count, struct host_uid_claim *out, struct sbx_err *err);
void host_uid_release(struct host_uid_claim *c);
/* For doctor: 0 when a claim can be made now (the range is mapped here, the lock file opens
 * and is root's alone, a uid is free), else -1 with the reason a claim would give. */
int host_uid_claims_usable(uint32_t first, uint32_t count, struct sbx_err *err);

#endif
