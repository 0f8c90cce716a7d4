/* Safe file access inside a sandbox from the server side.
 *
 * The server is more privileged than the sandbox, so it never joins strings into a host path.
 * Every path is resolved from the sandbox's root fd with openat2 and must lie in an area
 * (/workspace or /tmp, the only trees the tools touch). A read resolves the path as the sandbox
 * sees it (RESOLVE_IN_ROOT, magic links refused), so a symlink made by sandbox code names the
 * file it names for the sandbox, and succeeds only if that file lies on an area's own mount
 * ("x -> /etc/shadow", "x -> /proc/1/root" fail). Writes follow no symlink at all: each
 * directory is walked with RESOLVE_NO_SYMLINKS from the area's root. */
#ifndef SBX_FILES_H
#define SBX_FILES_H

#include "err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FILES_PATH_MAX 1024

/* The trees the file tools reach: every place the sandbox can make files in, each a tmpfs, and
 * so memory. */
#define FILES_N_AREAS 3
extern const char *const files_areas[FILES_N_AREAS];

/* openat2(2) with O_CLOEXEC added (-1 and errno on failure). */
int files_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);
/* What path_fd (an O_PATH fd) names, opened for real with flags (and O_CLOEXEC), through its
 * /proc link: the same inode, whatever became of the path it was found by. -1 with errno. */
int files_reopen(int path_fd, int flags);

/* Lexically normalises a user path: relative paths are under /workspace; "." and ".." are
 * folded; the result must lie in /workspace, /tmp or /dev/shm. canon gets an absolute path. */
int files_canonical(const char *user_path, char *canon, size_t size, struct sbx_err *err);

/* Opens canon (from files_canonical) with flags (O_CLOEXEC added). */
int files_open(int root_fd, const char *canon, int flags, struct sbx_err *err);
/* Same, with the file access rights of uid:gid, the sandbox user's: what it may not read (a
 * file of mode 000, say), the server does not read for it either. */
int files_open_as(int root_fd, const char *canon, int flags, uid_t uid, gid_t gid,
                  struct sbx_err *err);

/* Removes a file (or the symlink itself) at canon; a missing file is not an error. */
int files_remove(int root_fd, const char *canon, struct sbx_err *err);

/* Reads up to length bytes (0: up to max) from offset of a regular file, opened as uid:gid
 * (see files_open_as). *size gets the file size. */
int files_read(int root_fd, const char *canon, uid_t uid, gid_t gid, uint64_t offset,
               uint64_t length, uint64_t max, char **data, size_t *len, uint64_t *size,
               struct sbx_err *err);

/* How files_write puts the bytes into the file it opened (write_all when NULL): 0, or -1 with
 * err set (the errno of a failed write, and words for any other failure). */
typedef int (*files_writer)(int fd, const void *data, size_t len, void *ctx, struct sbx_err *err);

/* Creates or replaces a regular file (parents created, owned by uid:gid like the sandbox
 * user's own files), whole or not at all: a failed write leaves the old content. Refuses to
 * write through a symlink. */
int files_write(int root_fd, const char *canon, const void *data, size_t len, uid_t uid, gid_t gid,
                files_writer writer, void *ctx, struct sbx_err *err);
/* Same, returning an open fd for appending (output spill files). */
int files_create(int root_fd, const char *canon, uid_t uid, gid_t gid, struct sbx_err *err);

/* Lists a directory as uid:gid may (see files_open_as): entries {path, type, size, mtime}, and
 * "unreadable" on a directory in it that the user may not list. Recursion does not follow
 * symlinks. The first skip entries are passed over, at most max_entries are returned, and
 * *truncated says that more exist (or that a tree is deeper than is listed). */
int files_list(int root_fd, const char *canon, uid_t uid, gid_t gid, bool recursive, size_t skip,
               size_t max_entries, json_t **entries, bool *truncated, struct sbx_err *err);

/* Removes everything inside dir (/workspace, /tmp or /dev/shm: reset_sandbox clear_files),
 * however deep; uid:gid is the sandbox user's. Fails when something could not be removed. */
int files_clear_dir(int root_fd, const char *dir, uid_t uid, gid_t gid, struct sbx_err *err);

/* A MIME type from the file name's extension, or unknown for an extension not in the table. */
const char *files_mime_type(const char *path, const char *unknown);
bool files_looks_text(const char *data, size_t len);

#endif
