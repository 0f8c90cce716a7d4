/* One host uid per sandbox (see host_uid.h). Each claim opens the lock file anew and takes a
 * write lock on the uid's byte (at offset uid): open file description locks conflict between two
 * opens even in one process, so the kernel alone keeps the claims of this process's threads and of
 * every other process apart, and frees them with the fd, whatever way the holder ends. */
#include "host_uid.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where this process tries next. Claims go round the range rather than back to the lowest free
 * uid, so a uid is used again as late as possible: whatever a sandbox's end leaves counted for
 * a moment (a user namespace freed after an RCU grace period) is long gone by then. Processes
 * start at random points, so that two rarely contend for the same uids. */
static _Atomic uint64_t next_index;
static atomic_bool next_seeded;

static uint32_t start_index(uint32_t count)
{
    if (!atomic_exchange(&next_seeded, true))
        atomic_store(&next_index, unguessable_u64() % count);
    return (uint32_t)(atomic_fetch_add(&next_index, 1) % count);
}

static int open_lock_file(struct sbx_err *err)
{
    int fd = open(HOST_UID_LOCK_PATH, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sbx_fail_errno(err, errno,
                              "sandbox refused: cannot open " HOST_UID_LOCK_PATH
                              ", where sandboxes claim their host uids (/run must exist and be "
                              "root's; or set isolation.host_uid_count = 1 to share one uid)");
    /* Only root may make files in /run: one that is not root's alone was planted. Nobody else
     * may even read it: a reader can hold read locks on every byte, and refuse every claim. */
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077)) {
        close(fd);
        return sbx_fail(err, EPERM,
                        "sandbox refused: " HOST_UID_LOCK_PATH
                        " is not a regular file that only root can read and write; remove it");
    }
    return fd;
}

/* Whether [first, first + count) lies within the ids map_path (this process's uid_map or
 * gid_map) maps: a root that is root only in a user namespace of its own (a container) can give
 * a sandbox only ids that namespace has, and the id map write would fail with a bare EINVAL. */
static bool range_mapped(const char *map_path, uint64_t first, uint64_t count)
{
    FILE *f = fopen(map_path, "re");
    if (!f)
        return false;
    uint64_t inside[340], length[340]; /* the kernel's limit on extents */
    size_t n = 0;
    unsigned long long in, out, len;
    while (n < 340 && fscanf(f, "%llu %llu %llu", &in, &out, &len) == 3) {
        inside[n] = in;
        length[n++] = len;
    }
    fclose(f);
    /* Walk from first, one extent at a time (extents never overlap). */
    uint64_t at = first, end = first + count;
    for (size_t step = 0; at < end && step <= n; step++)
        for (size_t i = 0; i < n; i++)
            if (at >= inside[i] && at < inside[i] + length[i]) {
                at = inside[i] + length[i];
                break;
            }
    return at >= end;
}

/* A yes-or-no verdict on a range, kept for the process: the answer and the range it is for in
 * one word, so that threads never mix two. 0: none; else first, count, bit 1 set, the answer in
 * bit 0 (count <= 2^24, the configuration's bound). */
typedef _Atomic uint64_t range_verdict;

static uint64_t verdict_key(uint32_t first, uint32_t count)
{
    return (uint64_t)first << 32 | (uint64_t)count << 2 | 2;
}

/* The verdict kept for the range (0 or 1), or -1. */
static int verdict_kept(range_verdict *v, uint32_t first, uint32_t count)
{
    uint64_t k = atomic_load(v);
    return (k & ~1ull) == verdict_key(first, count) ? (int)(k & 1) : -1;
}

static bool verdict_keep(range_verdict *v, uint32_t first, uint32_t count, bool yes)
{
    atomic_store(v, verdict_key(first, count) | yes);
    return yes;
}

/* Read once per range: a process's maps cannot change, and the first read of a /proc file
 * costs tens of microseconds. The range is the configuration's, the same at nearly every call. */
static bool range_mapped_here(uint32_t first, uint32_t count)
{
    static range_verdict mapped;
    int kept = verdict_kept(&mapped, first, count);
    if (kept >= 0)
        return kept;
    return verdict_keep(&mapped, first, count,
                        range_mapped("/proc/self/uid_map", first, count) &&
                            range_mapped("/proc/self/gid_map", first, count));
}

/* The line of a colon-separated id file (/etc/passwd and /etc/group: name:x:id:...;
 * /etc/subuid and /etc/subgid: name:start:count) whose ids meet [first, end), described in who.
 * Read whole and parsed here: glibc's fgetpwent seeks once per line, up to 490 µs for a short
 * file on a machine where syscalls are dear, and `run` pays this in every sandbox's setup. */
static bool id_file_meets(const char *path, bool ranges, uint64_t first, uint64_t end, char *who,
                          size_t size)
{
    char *text = NULL;
    if (read_file_max(path, 16u << 20, &text, NULL) < 0)
        return false;
    bool met = false;
    for (char *line = text, *next; line && *line && !met; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *name = line, *f1 = strchr(line, ':'), *f2 = f1 ? strchr(f1 + 1, ':') : NULL;
        if (!f2)
            continue;
        *f1 = '\0';
        unsigned long long lo = strtoull(ranges ? f1 + 1 : f2 + 1, NULL, 10);
        unsigned long long n = ranges ? strtoull(f2 + 1, NULL, 10) : 1;
        /* 65534 (nobody, nogroup) aside: sharing it is the documented fallback, which doctor
         * reports as such. */
        if (n == 0 || (!ranges && lo == 65534))
            continue;
        if ((met = lo < end && first < lo + n)) {
            if (ranges)
                snprintf(who, size, "%.64s's subordinate ids %llu-%llu in %s", name, lo, lo + n - 1,
                         path);
            else
                snprintf(who, size, "%s %.64s (%s %llu in %s)",
                         strcmp(path, "/etc/group") == 0 ? "group" : "user", name,
                         strcmp(path, "/etc/group") == 0 ? "gid" : "uid", lo, path);
        }
    }
    free(text);
    return met;
}

/* Who else has an id of [first, first + count): an account of /etc/passwd or a group of
 * /etc/group, or a user's subordinate range in /etc/subuid or /etc/subgid (their containers),
 * named in who. A process of such a uid would own the user namespaces of the sandboxes mapped to
 * it, and could enter them with every capability there. */
static bool range_taken(uint64_t first, uint64_t count, char *who, size_t size)
{
    uint64_t end = first + count;
    return id_file_meets("/etc/passwd", false, first, end, who, size) ||
           id_file_meets("/etc/group", false, first, end, who, size) ||
           id_file_meets("/etc/subuid", true, first, end, who, size) ||
           id_file_meets("/etc/subgid", true, first, end, who, size);
}

/* range_taken, read once per range like range_mapped_here: a refusal reads the files again,
 * for the name. An account made later in the server's life is not seen. */
static bool range_taken_here(uint32_t first, uint32_t count, char *who, size_t size)
{
    static range_verdict taken;
    if (verdict_kept(&taken, first, count) == 0)
        return false;
    return verdict_keep(&taken, first, count, range_taken(first, count, who, size));
}

int host_uid_claim(uint32_t first, uint32_t count, struct host_uid_claim *out, struct sbx_err *err)
{
    out->uid = first;
    out->lock_fd = -1;
    if (!range_mapped_here(first, count))
        return sbx_fail(err, EINVAL,
                        "sandbox refused: host uids %u-%u (isolation.host_uid, "
                        "isolation.host_uid_count) are not all mapped in this process's user "
                        "namespace (/proc/self/uid_map): set them to a range it maps; "
                        "host_uid_count = 1 shares one uid (e.g. host_uid = 65534)",
                        first, (uint32_t)(first + count - 1));
    char who[400];
    if (range_taken_here(first, count, who, sizeof(who)))
        return sbx_fail(err, EEXIST,
                        "sandbox refused: host uids %u-%u (isolation.host_uid, "
                        "isolation.host_uid_count) take in %s, which would own those sandboxes' "
                        "user namespaces: choose a range nobody has (the default, 1879048192 and "
                        "65536, is above the ranges Debian and systemd give out)",
                        first, (uint32_t)(first + count - 1), who);
    if (count <= 1)
        return 0;
    int fd = open_lock_file(err);
    if (fd < 0)
        return -1;
    uint32_t start = start_index(count);
    for (uint32_t tried = 0; tried < count; tried++) {
        uint32_t idx = (start + tried) % count;
        /* The uid's own byte, not its place in this range: processes configured with ranges
         * that overlap must still conflict over a uid both could give. */
        struct flock lk = {
            .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)first + idx, .l_len = 1};
        if (fcntl(fd, F_OFD_SETLK, &lk) == 0) {
            if (tried)
                atomic_store(&next_index, (uint64_t)idx + 1);
            out->uid = first + idx;
            out->lock_fd = fd;
            return 0;
        }
        if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
            int e = errno;
            close(fd);
            return sbx_fail_errno(err, e, "sandbox refused: claiming a host uid");
        }
    }
    close(fd);
    return sbx_fail(err, EUSERS,
                    "sandbox refused: all %u host uids from %u (isolation.host_uid, "
                    "isolation.host_uid_count) are in use by live sandboxes",
                    count, first);
}

void host_uid_release(struct host_uid_claim *c)
{
    if (c->lock_fd >= 0)
        close(c->lock_fd);
    c->lock_fd = -1;
}

int host_uid_claims_usable(uint32_t first, uint32_t count, struct sbx_err *err)
{
    struct host_uid_claim c;
    if (host_uid_claim(first, count, &c, err) < 0)
        return -1;
    host_uid_release(&c);
    return 0;
}
