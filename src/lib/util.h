/* Scope-based cleanup helpers and small utilities shared by every layer. */
#ifndef SBX_UTIL_H
#define SBX_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void cleanup_freep(void *p)
{
    free(*(void **)p);
}

/* Closes *fd if open and marks it closed, so it is safe to call twice. */
static inline void cleanup_closep(int *fd)
{
    if (*fd >= 0) {
        /* errno kept for the caller's return, and written only if close failed: a thread
         * that cloned a sandbox's init shares its errno with init while init sets up. */
        int saved = errno;
        if (close(*fd) < 0)
            errno = saved;
        *fd = -1;
    }
}

static inline void cleanup_fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define cleanup_free __attribute__((cleanup(cleanup_freep)))
#define cleanup_fd   __attribute__((cleanup(cleanup_closep)))
#define cleanup_file __attribute__((cleanup(cleanup_fclosep)))

/* Hand ownership out of a cleanup-tagged variable. */
static inline void *steal_ptr(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}
#define steal_pointer(pp) steal_ptr(pp)

static inline int steal_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}

/* Allocation that cannot fail silently: abort on OOM, as redis does. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t now_ns(void);
uint64_t now_ms(void);
/* Wall clock, milliseconds since the epoch. */
uint64_t wall_ms(void);
/* "2026-11-22T12:55:45.864Z" for a wall-clock time in ms (UTC). */
void format_iso8601_ms(char *buf, size_t size, int64_t ms);

/* The ids that file access checks use (setfsuid, setfsgid). They belong to the calling thread
 * alone, and a switch away from root drops its override of file permissions as well.
 * fs_ids_switch returns the ids it replaced, for fs_ids_restore. */
struct fs_ids {
    uid_t uid;
    gid_t gid;
};
struct fs_ids fs_ids_switch(uid_t uid, gid_t gid);
void fs_ids_restore(struct fs_ids old);

struct sbx_err;
/* Creates the directories above path (mode 0700) that do not exist yet; the last component of
 * path (a file to come) is left alone. Returns 0, or -1 with err naming the one that failed. */
int mkdir_parents(const char *path, struct sbx_err *err);

/* Write all of buf, retrying on EINTR/partial writes. Returns 0 or -errno. */
int write_all(int fd, const void *buf, size_t len);
/* Read a whole small file into a NUL-terminated buffer (at most max bytes). Returns -errno. */
int read_file_max(const char *path, size_t max, char **out, size_t *out_len);
/* Write a string to an existing file (procfs, sysfs, cgroupfs). Returns 0 or -errno. */
int write_file_str(const char *path, const char *s);

/* Replaces every byte that is not part of a well-formed UTF-8 sequence (stray continuation
 * bytes, cut or overlong sequences, surrogates) with '?', in place, so the text can travel
 * in JSON; valid multi-byte characters are kept. Returns how many bytes were replaced. */
size_t utf8_scrub(char *buf, size_t len);
/* A copy of buf (malloc'd, NUL-terminated, its length in *out_len) in which every byte that is
 * not part of a well-formed UTF-8 sequence is U+FFFD, as Python's errors="replace" shows it:
 * unlike '?', it cannot be taken for a character the text held. */
char *utf8_with_replacements(const char *buf, size_t len, size_t *out_len);
/* s whole when it has at most max bytes, else its first bytes (not splitting a UTF-8 sequence)
 * and marker, at most max bytes in all (max > strlen(marker)). */
char *utf8_cut_marked(const char *s, size_t max, const char *marker);
/* Where the first byte that is not part of well-formed UTF-8 is, or len when there is none. */
size_t utf8_valid_prefix(const char *buf, size_t len);
/* Whether the JSON text holds at most max values, counted as the commas, colons and openings
 * outside strings (an upper bound): a linear scan, before a parser builds anything (jansson
 * spends about 200 bytes on each {}). */
bool json_text_values_within(const char *s, size_t n, size_t max);

/* 64 random bits for a name sandbox code must not guess (getrandom; the clock if that fails). */
uint64_t unguessable_u64(void);
/* The value of one hex digit (either case), or -1. */
int hex_digit(char c);
/* A file path as a URI path: every byte but the unreserved characters and '/' as %XX. */
char *uri_path_encode(const char *path);
/* Its inverse, strict: '%' takes two hex digits, and no %00. False when malformed or when it
 * does not fit in size. */
bool uri_path_decode(const char *in, char *out, size_t size);

/* Parse a whole number of digits only (no sign, no space) within [min, max]. Returns 0 or
 * -EINVAL. */
int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);

/* The most fds one message carries (send_with_fds, recv_with_fds). */
#define MSG_FDS_MAX 8

/* One message on a unix socket with fds attached (SCM_RIGHTS); MSG_NOSIGNAL, retried on EINTR.
 * Returns 0 when all of buf went, else -errno (-EPROTO for a short send). */
int send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t nfds);
/* One message from a unix socket (flags as recvmsg's; MSG_CMSG_CLOEXEC added, EINTR retried),
 * and the fds it carried: the first max (at most MSG_FDS_MAX) into fds, how many in *nfds, the rest
 * closed. *truncated when the data or the fds did not fit. Allocates nothing (a sandbox's init
 * uses it after its setup). Returns recvmsg's result (-1 with errno). */
ssize_t recv_with_fds(int sock, void *buf, size_t len, int flags, int *fds, size_t max,
                      size_t *nfds, bool *truncated);

/* Parse "256M", "1G", "1T", "512k", "1024" into bytes (binary units; "MiB" and "MB" mean
 * "M"). Returns 0, -EINVAL, or -ERANGE past 2^64. */
int parse_size(const char *s, uint64_t *out);
/* Parse a CPU count ("0.5") into thousandths, within [min_millis, max_millis]. Returns 0 or
 * -EINVAL (NaN, trailing text, out of range). */
int parse_cpus(const char *s, uint32_t min_millis, uint32_t max_millis, uint32_t *millis);

#endif
