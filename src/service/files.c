/* Safe file access inside a sandbox: openat2 from the sandbox's root fd (see files.h). */
#include "files.h"

#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 32

/* The file areas (files.h); each one's name below the sandbox root is its path without the
 * leading '/'. */
const char *const files_areas[FILES_N_AREAS] = {"/workspace", "/tmp", "/dev/shm"};

int files_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
    struct open_how how = {.flags = flags | O_CLOEXEC, .mode = mode, .resolve = resolve};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

int files_reopen(int path_fd, int flags)
{
    char self[32];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
    return open(self, flags | O_CLOEXEC);
}

/* Inside an area: never out of it, never through /proc magic, never onto another mount. */
#define IN_AREA (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
/* One component we create or walk ourselves: no symlink at all. */
#define STRICT (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* strict: the open followed no symlink at all (a write, or the walk to its directory). */
static int open_fail(struct sbx_err *err, int e, const char *canon, bool strict)
{
    if (e == ENOSYS)
        return sbx_fail(err, e, "file access needs openat2 (Linux 5.6 or later)");
    if (strict && e == ELOOP)
        return sbx_fail(err, ENOENT,
                        "%s: refused: a symbolic link is on the path, and files are written "
                        "only through real directories",
                        canon);
    if (e == ELOOP || e == EXDEV)
        return sbx_fail(err, ENOENT,
                        "%s: refused: the path goes through a link that leaves the sandbox "
                        "area or crosses a mount",
                        canon);
    return sbx_fail_errno(err, e, "%s", canon);
}

/* The area canon lies in (its index in files_areas), or -1. */
static int area_of(const char *canon)
{
    for (size_t i = 0; i < FILES_N_AREAS; i++) {
        size_t pl = strlen(files_areas[i]);
        if (strncmp(canon, files_areas[i], pl) == 0 && (canon[pl] == '\0' || canon[pl] == '/'))
            return (int)i;
    }
    return -1;
}

int files_canonical(const char *user_path, char *canon, size_t size, struct sbx_err *err)
{
    char tmp[FILES_PATH_MAX * 2];
    if (!user_path || !*user_path)
        return sbx_fail(err, EINVAL, "path is empty");
    if (strlen(user_path) >= FILES_PATH_MAX)
        return sbx_fail(err, ENAMETOOLONG, "path is longer than %d bytes", FILES_PATH_MAX);
    snprintf(tmp, sizeof(tmp), "%s%s", user_path[0] == '/' ? "" : "/workspace/", user_path);

    /* Fold "." and ".." component by component into out. */
    char out[FILES_PATH_MAX * 2];
    size_t olen = 0;
    char *save = NULL;
    for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            while (olen > 0 && out[olen - 1] != '/')
                olen--;
            if (olen > 0)
                olen--;
            continue;
        }
        size_t cl = strlen(c);
        if (olen + 1 + cl >= sizeof(out))
            return sbx_fail(err, ENAMETOOLONG, "path too long");
        out[olen++] = '/';
        memcpy(out + olen, c, cl);
        olen += cl;
    }
    out[olen] = '\0';
    if (olen == 0)
        snprintf(out, sizeof(out), "/");
    if (area_of(out) >= 0) {
        if (olen >= size)
            return sbx_fail(err, ENAMETOOLONG, "path too long");
        memcpy(canon, out, olen + 1);
        return 0;
    }
    return sbx_fail(err, EACCES,
                    "%s is outside the sandbox's files: use a path in /workspace "
                    "(or /tmp, /dev/shm)",
                    user_path);
}

/* canon's area in a running sandbox (its index in files_areas), or -1 with err. */
static int check_area(int root_fd, const char *canon, struct sbx_err *err)
{
    if (root_fd < 0)
        return sbx_fail(err, ENOENT, "the sandbox has no files (it is not running)");
    int i = area_of(canon);
    if (i < 0)
        return sbx_fail(err, EACCES, "%s is outside the sandbox's files", canon);
    return i;
}

/* Splits canon into its area's fd and the rest ("." for the area itself). */
static int open_area(int root_fd, const char *canon, const char **rest, struct sbx_err *err)
{
    int i = check_area(root_fd, canon, err);
    if (i < 0)
        return -1;
    int fd = files_openat2(root_fd, files_areas[i] + 1, O_PATH | O_DIRECTORY, 0,
                           STRICT & ~RESOLVE_NO_XDEV);
    if (fd < 0)
        return open_fail(err, errno, files_areas[i], true);
    size_t pl = strlen(files_areas[i]);
    *rest = canon[pl] ? canon + pl + 1 : ".";
    return fd;
}

/* Whether dev is the device of an area's own mount. */
static bool on_an_area(int root_fd, dev_t dev)
{
    for (size_t i = 0; i < FILES_N_AREAS; i++) {
        struct stat st;
        if (fstatat(root_fd, files_areas[i] + 1, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == dev)
            return true;
    }
    return false;
}

/* A read is resolved as the sandbox sees the path, from its root: rooted in the area instead,
 * "latest -> /tmp/out.txt" (or "../tmp/out.txt") would name /workspace/tmp/out.txt, another file
 * than the sandbox's when that one exists, and nothing when it does not. Found as a bare O_PATH
 * (no device or fifo is opened for real before the check), it is opened again only if it lies
 * on an area's own mount. -1 with errno on failure; EXDEV: found, but off the areas. */
static int open_as_seen_inside(int root_fd, const char *canon, int flags)
{
    int path = files_openat2(root_fd, canon + 1, O_PATH | (flags & (O_NOFOLLOW | O_DIRECTORY)), 0,
                             RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
    if (path < 0)
        return -1;
    struct stat st;
    int fd = -1, e = EXDEV;
    if (fstat(path, &st) < 0) {
        e = errno;
    } else if (on_an_area(root_fd, st.st_dev)) {
        fd = (flags & O_PATH) ? dup(path) : files_reopen(path, flags);
        e = errno;
    }
    close(path);
    errno = e;
    return fd;
}

static bool is_read(int flags)
{
    return (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_CREAT | O_TRUNC));
}

int files_open(int root_fd, const char *canon, int flags, struct sbx_err *err)
{
    int fd;
    if (is_read(flags)) {
        /* Resolved from the root: the area only has to be the path's. */
        if (check_area(root_fd, canon, err) < 0)
            return -1;
        fd = open_as_seen_inside(root_fd, canon, flags);
    } else {
        const char *rest;
        int area = open_area(root_fd, canon, &rest, err);
        if (area < 0)
            return -1;
        fd = files_openat2(area, rest, (uint64_t)flags, 0, IN_AREA);
        int e = errno;
        close(area);
        errno = e;
    }
    if (fd < 0)
        return open_fail(err, errno, canon, false);
    return fd;
}

/* New inodes on the sandbox's tmpfs must belong to an id mapped in its user namespace (a
 * root server's uid 0 is not), and should belong to the sandbox user anyway; and what the
 * sandbox user may not read, the server does not read for it. So file access runs with that
 * user's fs ids, which belong to this thread alone. */
int files_open_as(int root_fd, const char *canon, int flags, uid_t uid, gid_t gid,
                  struct sbx_err *err)
{
    struct fs_ids old = fs_ids_switch(uid, gid);
    int fd = files_open(root_fd, canon, flags, err);
    fs_ids_restore(old);
    return fd;
}

int files_remove(int root_fd, const char *canon, struct sbx_err *err)
{
    const char *slash = strrchr(canon, '/');
    if (!slash || slash == canon || !slash[1])
        return sbx_fail(err, EINVAL, "%s: not a file path", canon);
    char parent[FILES_PATH_MAX];
    snprintf(parent, sizeof(parent), "%.*s", (int)(slash - canon), canon);
    cleanup_fd int dir = files_open(root_fd, parent, O_PATH | O_DIRECTORY, err);
    if (dir < 0)
        return -1;
    /* unlinkat never follows the last component, so a planted symlink is what goes. */
    if (unlinkat(dir, slash + 1, 0) < 0 && errno != ENOENT)
        return sbx_fail_errno(err, errno, "removing %s", canon);
    return 0;
}

int files_read(int root_fd, const char *canon, uid_t uid, gid_t gid, uint64_t offset,
               uint64_t length, uint64_t max, char **data, size_t *len, uint64_t *size,
               struct sbx_err *err)
{
    /* O_NONBLOCK: a FIFO planted by sandbox code must not hang the server. */
    cleanup_fd int fd =
        files_open_as(root_fd, canon, O_RDONLY | O_NONBLOCK | O_NOCTTY, uid, gid, err);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sbx_fail_errno(err, errno, "%s", canon);
    if (S_ISDIR(st.st_mode))
        return sbx_fail(err, EISDIR, "%s is a directory: use list_files", canon);
    if (!S_ISREG(st.st_mode))
        return sbx_fail(err, EINVAL, "%s is not a regular file", canon);
    *size = (uint64_t)st.st_size;
    uint64_t want = length ? length : max;
    if (want > max)
        want = max;
    if (offset >= (uint64_t)st.st_size)
        want = 0;
    else if (want > (uint64_t)st.st_size - offset)
        want = (uint64_t)st.st_size - offset;
    char *buf = xmalloc(want + 1);
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(fd, buf + got, want - got, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            return sbx_fail_errno(err, errno, "reading %s", canon);
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return 0;
}

/* Walks (and creates) the directories of canon's parent; returns an fd of the parent and the
 * last component in *base. */
static int open_parent(int root_fd, const char *canon, bool create, char *base, size_t base_size,
                       struct sbx_err *err)
{
    const char *rest;
    int cur = open_area(root_fd, canon, &rest, err);
    if (cur < 0)
        return -1;
    if (strcmp(rest, ".") == 0) {
        close(cur);
        return sbx_fail(err, EISDIR, "%s is a directory", canon);
    }
    char path[FILES_PATH_MAX * 2];
    snprintf(path, sizeof(path), "%s", rest);
    char *last = strrchr(path, '/');
    const char *file = last ? last + 1 : path;
    if (strlen(file) >= base_size) {
        close(cur);
        return sbx_fail(err, ENAMETOOLONG, "file name too long");
    }
    snprintf(base, base_size, "%s", file);
    if (!last) {
        return cur;
    }
    *last = '\0';
    char *save = NULL;
    for (char *c = strtok_r(path, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (create && mkdirat(cur, c, 0755) < 0 && errno != EEXIST) {
            int e = errno;
            close(cur);
            return sbx_fail_errno(err, e, "%s: creating %s", canon, c);
        }
        int next = files_openat2(cur, c, O_PATH | O_DIRECTORY, 0, STRICT);
        int e = errno;
        close(cur);
        if (next < 0)
            return open_fail(err, e, canon, true);
        cur = next;
    }
    return cur;
}

static int create_as_user(int root_fd, const char *canon, uid_t uid, gid_t gid, struct sbx_err *err)
{
    char base[256];
    cleanup_fd int dir = open_parent(root_fd, canon, true, base, sizeof(base), err);
    if (dir < 0)
        return -1;
    int fd = files_openat2(dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0644,
                           STRICT);
    if (fd < 0)
        return open_fail(err, errno, canon, true);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sbx_fail(err, EINVAL, "%s exists and is not a regular file", canon);
    }
    if (st.st_uid != uid || st.st_gid != gid) {
        close(fd);
        return sbx_fail(err, EPERM, "%s belongs to another user", canon);
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int files_create(int root_fd, const char *canon, uid_t uid, gid_t gid, struct sbx_err *err)
{
    struct fs_ids old = fs_ids_switch(uid, gid);
    int fd = create_as_user(root_fd, canon, uid, gid, err);
    fs_ids_restore(old);
    return fd;
}

/* The new content goes to a hidden file beside the target, renamed over it once complete: a
 * write that fails (the workspace full) leaves the old file as it was, and no half-written one.
 * The existing file is opened first, as the in-place write did, so that its type, owner and
 * permissions refuse what they refused before; its mode carries over. */
static int replace_as_user(int root_fd, const char *canon, const void *data, size_t len, uid_t uid,
                           gid_t gid, files_writer writer, void *ctx, struct sbx_err *err)
{
    char base[256];
    cleanup_fd int dir = open_parent(root_fd, canon, true, base, sizeof(base), err);
    if (dir < 0)
        return -1;
    mode_t mode = 0644;
    bool existed = false;
    /* A fifo or a socket is named as what it is, not opened: the open would answer "No such
     * device or address" without a reader, and end a reader's input with one. */
    struct stat was;
    if (fstatat(dir, base, &was, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(was.st_mode) &&
        !S_ISLNK(was.st_mode) && !S_ISDIR(was.st_mode))
        return sbx_fail(err, EINVAL, "%s exists and is not a regular file", canon);
    int old = files_openat2(dir, base, O_WRONLY | O_NOFOLLOW | O_NONBLOCK, 0, STRICT);
    if (old < 0 && errno != ENOENT)
        return open_fail(err, errno, canon, true);
    if (old >= 0) {
        struct stat st;
        int r = fstat(old, &st);
        close(old);
        if (r < 0 || !S_ISREG(st.st_mode))
            return sbx_fail(err, EINVAL, "%s exists and is not a regular file", canon);
        if (st.st_uid != uid || st.st_gid != gid)
            return sbx_fail(err, EPERM, "%s belongs to another user", canon);
        mode = st.st_mode & 07777;
        existed = true;
    }
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".mcp-write-%016llx", (unsigned long long)unguessable_u64());
    cleanup_fd int fd =
        files_openat2(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode & 0777, STRICT);
    if (fd < 0)
        return open_fail(err, errno, canon, true);
    struct sbx_err werr = {0};
    int r = writer ? writer(fd, data, len, ctx, &werr) : write_all(fd, data, len);
    int e = r == 0 ? 0 : writer ? werr.code : -r;
    /* The old file's mode exactly, which the umask would have trimmed. */
    if (!e && existed && fchmod(fd, mode) < 0)
        e = errno;
    if (!e && renameat(dir, tmp, dir, base) < 0)
        e = errno;
    if (!e)
        return 0;
    unlinkat(dir, tmp, 0);
    if (e == ENOSPC || e == EFBIG || e == EDQUOT) {
        int area = area_of(canon); /* one, or the file would not have been opened */
        return sbx_fail(err, e, "%s: no space left: the sandbox's %s is full (its size cap)", canon,
                        files_areas[area < 0 ? 0 : area]);
    }
    if (werr.msg[0])
        return sbx_fail(err, e, "writing %s: %s", canon, werr.msg);
    return sbx_fail_errno(err, e, "writing %s", canon);
}

int files_write(int root_fd, const char *canon, const void *data, size_t len, uid_t uid, gid_t gid,
                files_writer writer, void *ctx, struct sbx_err *err)
{
    struct fs_ids old = fs_ids_switch(uid, gid);
    int r = replace_as_user(root_fd, canon, data, len, uid, gid, writer, ctx, err);
    fs_ids_restore(old);
    return r;
}

static const char *type_of(mode_t m)
{
    if (S_ISREG(m))
        return "file";
    if (S_ISDIR(m))
        return "directory";
    if (S_ISLNK(m))
        return "symlink";
    return "other";
}

struct listing {
    bool recursive;
    size_t skip, max; /* entries passed over first, then taken at most */
    size_t seen;
    json_t *entries;
    bool truncated;  /* more entries than taken, or a tree deeper than MAX_DEPTH */
    bool top_denied; /* the directory asked for may be read but not searched */
};

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in a directory in byte order (LC_ALL=C ls), NULL-terminated: sorted for the reader,
 * and so that an offset names the same entries from one call to the next. A directory holds at
 * most the sandbox's inode limit, so reading it whole first costs little. */
static char **sorted_names(DIR *d)
{
    size_t n = 0, cap = 16;
    char **names = xmalloc(cap * sizeof(*names));
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n + 1 == cap)
            names = xrealloc(names, (cap *= 2) * sizeof(*names));
        names[n++] = xstrdup(de->d_name);
    }
    qsort(names, n, sizeof(*names), by_name);
    names[n] = NULL;
    return names;
}

static void free_names(char **names)
{
    for (char **p = names; *p; p++)
        free(*p);
    free(names);
}

/* self: the entry of the directory listed (NULL for the top, or one passed over). */
static void list_dir(int dfd, const char *prefix, int depth, json_t *self, struct listing *l)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    char **names = sorted_names(d);
    for (char **name = names; *name && !(l->truncated && json_array_size(l->entries) >= l->max);
         name++) {
        struct stat st;
        if (fstatat(dirfd(d), *name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            /* A directory that may be read but not searched names entries that cannot be
             * looked at: none of them can, and the listing says so instead of showing none. */
            if (errno == EACCES) {
                if (self)
                    json_object_set_new(self, "unreadable", json_true());
                else if (depth == 0)
                    l->top_denied = true;
                break;
            }
            continue;
        }
        char *path = xasprintf("%s/%s", strcmp(prefix, "/") ? prefix : "", *name);
        json_t *entry = NULL;
        if (l->seen++ < l->skip) {
            /* passed over, but its subtree is counted the same way */
        } else if (json_array_size(l->entries) >= l->max) {
            l->truncated = true;
            free(path);
            break;
        } else {
            char mtime[64];
            format_iso8601_ms(mtime, sizeof(mtime),
                              (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000);
            /* A name that is not UTF-8 is listed with '?' for its bad bytes, and says so:
             * hidden, it would hide its whole subtree too. */
            char *shown = xstrdup(path);
            bool lossy = utf8_scrub(shown, strlen(shown)) > 0;
            entry = json_pack("{s:s, s:s, s:I, s:s}", "path", shown, "type", type_of(st.st_mode),
                              "size", (json_int_t)st.st_size, "mtime", mtime);
            if (lossy)
                json_object_set_new(entry, "path_not_utf8", json_true());
            json_array_append_new(l->entries, entry);
            free(shown);
        }
        if (l->recursive && S_ISDIR(st.st_mode)) {
            int sub = depth < MAX_DEPTH
                          ? files_openat2(dirfd(d), *name, O_RDONLY | O_DIRECTORY, 0, STRICT)
                          : -1;
            if (sub >= 0)
                list_dir(sub, path, depth + 1, entry, l);
            else if (depth >= MAX_DEPTH)
                l->truncated = true; /* deeper than listed: said, not hidden */
            else if (errno == EACCES && entry)
                json_object_set_new(entry, "unreadable", json_true());
        }
        free(path);
    }
    free_names(names);
    closedir(d);
}

int files_list(int root_fd, const char *canon, uid_t uid, gid_t gid, bool recursive, size_t skip,
               size_t max_entries, json_t **entries, bool *truncated, struct sbx_err *err)
{
    struct fs_ids old = fs_ids_switch(uid, gid);
    int fd = files_open(root_fd, canon, O_RDONLY | O_DIRECTORY, err);
    if (fd < 0) {
        fs_ids_restore(old);
        if (err->code == ENOTDIR)
            sbx_fail(err, ENOTDIR, "%s is not a directory: use read_file", canon);
        return -1;
    }
    struct listing l = {
        .recursive = recursive, .skip = skip, .max = max_entries, .entries = json_array()};
    list_dir(fd, canon, 0, NULL, &l);
    fs_ids_restore(old);
    if (l.top_denied) {
        json_decref(l.entries);
        return sbx_fail_errno(err, EACCES, "%s", canon);
    }
    *entries = l.entries;
    *truncated = l.truncated;
    return 0;
}

/* chmod of a directory entry that is a directory, never through a symlink (the sandbox may
 * swap one in at any moment): the inode is pinned first, then changed through its fd's link. */
static int chmod_dir_entry(int dfd, const char *name, mode_t mode)
{
    int fd = files_openat2(dfd, name, O_PATH | O_DIRECTORY, 0, STRICT);
    if (fd < 0)
        return -1;
    char link[32];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    int r = chmod(link, mode);
    close(fd);
    return r;
}

struct clearing {
    int top_fd;
    struct fs_ids ids; /* a rename in the sandbox's tmpfs needs ids mapped there */
    unsigned moved;
};

/* Removes what dfd holds, MAX_DEPTH levels down at most; a directory deeper than that is moved
 * up beside the top for the next pass (renamed within the one tmpfs). Returns whether anything
 * is left. */
static bool remove_tree(int dfd, int depth, struct clearing *c)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return true;
    }
    bool left = false;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        /* A directory its owner locked (chmod 0, 0500) is opened up first: the server is
         * root, or rootless the same user as the sandbox's. */
        int r = unlinkat(dirfd(d), de->d_name, 0);
        if (r < 0 && errno == EACCES && fchmod(dirfd(d), 0700) == 0)
            r = unlinkat(dirfd(d), de->d_name, 0);
        if (r == 0)
            continue;
        if (errno != EISDIR) {
            left |= errno != ENOENT;
            continue;
        }
        if (depth >= MAX_DEPTH) {
            char name[32];
            snprintf(name, sizeof(name), ".mcp-clear-%u", c->moved++);
            struct fs_ids old = fs_ids_switch(c->ids.uid, c->ids.gid);
            renameat(dirfd(d), de->d_name, c->top_fd, name);
            fs_ids_restore(old);
            left = true;
            continue;
        }
        int sub = files_openat2(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY, 0, STRICT);
        if (sub < 0 && errno == EACCES && chmod_dir_entry(dirfd(d), de->d_name, 0700) == 0)
            sub = files_openat2(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY, 0, STRICT);
        if (sub >= 0)
            left |= remove_tree(sub, depth + 1, c);
        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
            left = true;
    }
    closedir(d);
    return left;
}

int files_clear_dir(int root_fd, const char *dir, uid_t uid, gid_t gid, struct sbx_err *err)
{
    cleanup_fd int top = files_open(root_fd, dir, O_RDONLY | O_DIRECTORY, err);
    if (top < 0)
        return -1;
    struct clearing c = {.top_fd = top, .ids = {uid, gid}};
    /* Each pass takes MAX_DEPTH levels: the inode cap bounds the depth, and so the passes. */
    for (int pass = 0; pass < 1024; pass++) {
        int fd = files_open(root_fd, dir, O_RDONLY | O_DIRECTORY, err);
        if (fd < 0)
            return -1;
        if (!remove_tree(fd, 0, &c))
            return 0;
    }
    return sbx_fail(err, ENOTEMPTY, "some of %s could not be removed", dir);
}

static const struct {
    const char *ext;
    const char *mime;
} mime_table[] = {
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"svg", "image/svg+xml"},
    {"pdf", "application/pdf"},
    {"json", "application/json"},
    {"csv", "text/csv"},
    {"txt", "text/plain"},
    {"md", "text/markdown"},
    {"html", "text/html"},
    {"py", "text/x-python"},
    {"sh", "text/x-shellscript"},
    {"xml", "application/xml"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"log", "text/plain"},
    {"tsv", "text/tab-separated-values"},
    {"ipynb", "application/x-ipynb+json"},
    {"jsonl", "application/jsonl"},
    {"js", "text/javascript"},
    {"css", "text/css"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"toml", "application/toml"},
    {"tar", "application/x-tar"},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {"bin", "application/octet-stream"},
    {"npy", "application/octet-stream"},
    {"pkl", "application/octet-stream"},
};

const char *files_mime_type(const char *path, const char *unknown)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < ARRAY_SIZE(mime_table); i++)
            if (strcasecmp(dot + 1, mime_table[i].ext) == 0)
                return mime_table[i].mime;
    return unknown;
}

bool files_looks_text(const char *data, size_t len)
{
    if (memchr(data, '\0', len))
        return false;
    /* Valid UTF-8 is text; jansson checks it for us. */
    json_t *s = json_stringn(data, len);
    bool ok = s != NULL;
    json_decref(s);
    return ok;
}
