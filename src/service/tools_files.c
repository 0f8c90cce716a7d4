/* File tools: list, read, write and upload files of a sandbox. All paths go through files.c
 * (openat2 from the sandbox's root fd), never through a joined host path. */
#include "sandbox.h"
#include "tools_common.h"

#include "base64.h"
#include "files.h"
#include "protocol/mcp.h"
#include "util.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define READ_MAX   (4u << 20) /* bytes returned by one read_file */
#define LIST_MAX   1000
#define UPLOAD_MAX (256ull << 20)

static bool canonical_arg(struct mcp_call *call, const char *path, char *canon, size_t size)
{
    struct sbx_err err = {0};
    if (files_canonical(path, canon, size, &err) < 0) {
        mcp_call_fail(call, "path: %s", err.msg);
        return false;
    }
    return true;
}

/* A file's path: one ending in '/', "." or ".." names a directory (as it would for open(2)),
 * which the canonical form would quietly drop ("new/." would write a file named new). */
static bool file_path_arg(struct mcp_call *call, const char *path, char *canon, size_t size)
{
    size_t n = path ? strlen(path) : 0;
    if (n && path[n - 1] == '/') {
        mcp_call_fail(call, "path: %s ends with '/', which names a directory, not a file", path);
        return false;
    }
    const char *last = path ? strrchr(path, '/') : NULL;
    last = last ? last + 1 : path;
    if (last && (strcmp(last, ".") == 0 || strcmp(last, "..") == 0)) {
        mcp_call_fail(call, "path: %s ends with '%s', which names a directory, not a file", path,
                      last);
        return false;
    }
    return canonical_arg(call, path, canon, size);
}

/* Whether a name holds what a reader would not see as itself: a control character (a line
 * break, an escape sequence that clears a terminal), or a Unicode format character that
 * reorders or hides text (U+202E shows "exe.txt" for "txt.exe"). Quoted, with every
 * non-ASCII character escaped, such a name shows what it holds. */
static bool name_misleads(const char *name)
{
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            return true;
        if (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) /* C1 controls */
            return true;
        if (c[0] == 0xd8 && c[1] == 0x9c) /* U+061C arabic letter mark */
            return true;
        /* U+200B-U+200F (zero width, directional marks), U+2028-U+202E (line and paragraph
         * separators, embeddings and overrides), U+2060-U+2064 (invisible operators),
         * U+2066-U+2069 (isolates) */
        if (c[0] == 0xe2 && c[1] == 0x80 &&
            ((c[2] >= 0x8b && c[2] <= 0x8f) || (c[2] >= 0xa8 && c[2] <= 0xae)))
            return true;
        if (c[0] == 0xe2 && c[1] == 0x81 && c[2] >= 0xa0 && c[2] <= 0xa9 && c[2] != 0xa5)
            return true;
        if (c[0] == 0xc2 && c[1] == 0xad) /* U+00AD soft hyphen */
            return true;
        if (c[0] == 0xf3 && c[1] == 0xa0 && (c[2] == 0x80 || c[2] == 0x81)) /* tags U+E00xx */
            return true;
        if (c[0] == 0xef && c[1] == 0xbb && c[2] == 0xbf) /* U+FEFF */
            return true;
    }
    return false;
}

static void t_list_files(struct mcp_call *call, json_t *args, void *data)
{
    const char *path = tool_arg_str(args, "path");
    char canon[FILES_PATH_MAX];
    if (!canonical_arg(call, path ? path : "/workspace", canon, sizeof(canon)))
        return;
    struct sandbox *sb = tool_sandbox_with_files(data, call, args, t_list_files);
    if (!sb)
        return;
    const json_t *jo = json_object_get(args, "offset");
    size_t offset = json_is_integer(jo) ? (size_t)json_integer_value(jo) : 0;
    struct sbx_err err = {0};
    json_t *entries = NULL;
    bool truncated = false;
    if (sandbox_list_files(sb, canon, json_is_true(json_object_get(args, "recursive")), offset,
                           LIST_MAX, &entries, &truncated, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    /* One line per entry, in one growing buffer; a name that would not show as itself is
     * quoted (name_misleads), so it cannot pass for two entries or for another name. */
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    if (!out) {
        json_decref(entries);
        mcp_call_fail(call, "listing %s: out of memory", canon);
        return;
    }
    fprintf(out, "%s (%zu entries)", canon, json_array_size(entries));
    size_t i;
    json_t *v;
    json_array_foreach(entries, i, v)
    {
        const json_t *p = json_object_get(v, "path");
        char *quoted = name_misleads(json_string_value(p))
                           ? json_dumps(p, JSON_ENCODE_ANY | JSON_ENSURE_ASCII)
                           : NULL;
        fprintf(out, "\n%-9s %10lld  %s%s", json_string_value(json_object_get(v, "type")),
                (long long)json_integer_value(json_object_get(v, "size")),
                quoted ? quoted : json_string_value(p),
                json_is_true(json_object_get(v, "unreadable")) ? "  [unreadable]" : "");
        free(quoted);
    }
    if (truncated)
        fprintf(out, "\n[more entries: list on with offset %zu]",
                offset + json_array_size(entries));
    fclose(out);
    tool_finish(call, text,
                json_pack("{s:s, s:o, s:b, s:I}", "path", canon, "entries", entries, "truncated",
                          truncated, "offset", (json_int_t)offset));
    free(text);
}

static bool is_image(const char *mime)
{
    return strncmp(mime, "image/", 6) == 0 && strcmp(mime, "image/svg+xml") != 0;
}

/* A slice of a text file may start or end inside a character: its ends move to character
 * boundaries (at most 3 bytes each) so that it reads as the text it is. The start moves only
 * past an offset, the end only when the file goes on. */
static void trim_to_characters(const char *buf, size_t len, bool at_start, bool file_goes_on,
                               size_t *skip, size_t *keep)
{
    size_t a = 0;
    while (!at_start && a < len && a < 3 && ((unsigned char)buf[a] & 0xC0) == 0x80)
        a++;
    size_t b = len;
    if (file_goes_on) {
        /* The last lead byte within 3 of the end, and whether its sequence is complete. */
        for (size_t back = 1; back <= 3 && back <= len - a; back++) {
            unsigned char c = (unsigned char)buf[len - back];
            if ((c & 0xC0) == 0x80)
                continue;
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if (need > back)
                b = len - back;
            break;
        }
    }
    *skip = a;
    *keep = b - a;
}

static void t_read_file(struct mcp_call *call, json_t *args, void *data)
{
    char canon[FILES_PATH_MAX];
    if (!file_path_arg(call, tool_arg_str(args, "path"), canon, sizeof(canon)))
        return;
    struct sandbox *sb = tool_sandbox_with_files(data, call, args, t_read_file);
    if (!sb)
        return;
    const char *encoding = tool_arg_str(args, "encoding");
    const json_t *jo = json_object_get(args, "offset"), *jl = json_object_get(args, "length");
    uint64_t offset = json_is_integer(jo) ? (uint64_t)json_integer_value(jo) : 0;
    uint64_t length = json_is_integer(jl) ? (uint64_t)json_integer_value(jl) : 0;
    struct sbx_err err = {0};
    char *buf = NULL;
    size_t len = 0;
    uint64_t size = 0;
    if (sandbox_read_file(sb, canon, offset, length, READ_MAX, &buf, &len, &size, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    bool want_b64 = encoding && strcmp(encoding, "base64") == 0;
    size_t skip = 0, keep = len;
    if (!want_b64)
        trim_to_characters(buf, len, offset == 0, offset + len < size, &skip, &keep);
    /* A slice too short to hold one whole character is shown as the bytes it is. */
    bool text = (keep > 0 || len == 0) && files_looks_text(buf + skip, keep);
    if (text && (skip || keep < len)) {
        memmove(buf, buf + skip, keep);
        offset += skip;
        len = keep;
    }
    const char *mime = files_mime_type(canon, text ? "text/plain" : "application/octet-stream");
    bool b64 = want_b64 || !text;
    bool truncated = offset + len < size;
    json_t *content = json_array();
    json_t *sc;
    if (b64) {
        char *enc = base64_encode_alloc(buf, len);
        /* Base64 is ASCII: its 5.6 MB (of a 4 MiB read) need no UTF-8 check, twice. */
        size_t enc_len = strlen(enc);
        sc = json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, s:o, s:b}", "path", canon, "size",
                       (json_int_t)size, "offset", (json_int_t)offset, "length", (json_int_t)len,
                       "encoding", "base64", "mime_type", mime, "content",
                       json_stringn_nocheck(enc, enc_len), "truncated", truncated);
        /* The whole image is shown as one; other bytes go in the text too, for a host that
         * gives the model only the content blocks. */
        bool image = is_image(mime) && offset == 0 && !truncated;
        char *note = xasprintf("%s: %zu bytes of %llu%s, base64 (%s)%s%s%s", canon, len,
                               (unsigned long long)size, truncated ? " (truncated)" : "", mime,
                               text ? "" : "; the file is binary, so base64 was used",
                               image ? "" : ":\n", image ? "" : enc);
        /* UTF-8 already: canon came in a JSON string, the rest is ASCII. */
        json_array_append_new(content, json_pack("{s:s, s:o}", "type", "text", "text",
                                                 json_stringn_nocheck(note, strlen(note))));
        free(note);
        if (image)
            json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "image", "data",
                                                     enc, "mimeType", mime));
        free(enc);
    } else {
        sc = json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, s:s%, s:b}", "path", canon, "size",
                       (json_int_t)size, "offset", (json_int_t)offset, "length", (json_int_t)len,
                       "encoding", "utf-8", "mime_type", mime, "content", buf, len, "truncated",
                       truncated);
        json_array_append_new(content, json_pack("{s:s, s:s%}", "type", "text", "text", buf, len));
        if (truncated) {
            char *note = xasprintf("[%zu of %llu bytes shown; read on with offset %llu]", len,
                                   (unsigned long long)size, (unsigned long long)(offset + len));
            json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", note));
            free(note);
        }
    }
    free(buf);
    mcp_call_finish(call, json_pack("{s:o, s:o}", "content", content, "structuredContent", sc));
}

static void write_bytes(struct mcp_call *call, struct sandbox *sb, const char *canon,
                        const char *data, size_t len)
{
    struct sbx_err err = {0};
    if (sandbox_write_file(sb, canon, data, len, &err) < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    sandbox_file_changed(sb, canon);
    char *text = xasprintf("wrote %zu bytes to %s", len, canon);
    tool_finish(
        call, text,
        json_pack("{s:s, s:I, s:s}", "path", canon, "size", (json_int_t)len, "sandbox_id", sb->id));
    free(text);
}

static void t_write_file(struct mcp_call *call, json_t *args, void *data)
{
    char canon[FILES_PATH_MAX];
    if (!file_path_arg(call, tool_arg_str(args, "path"), canon, sizeof(canon)))
        return;
    const json_t *c = json_object_get(args, "content");
    const char *encoding = tool_arg_str(args, "encoding");
    cleanup_free char *decoded = NULL;
    const char *bytes = json_string_value(c);
    size_t len = json_string_length(c);
    if (encoding && strcmp(encoding, "base64") == 0) {
        if (base64_decode_alloc(bytes, &decoded, &len) < 0) {
            mcp_call_fail(call, "content: not valid base64");
            return;
        }
        bytes = decoded;
    }
    struct sandbox *sb = tool_sandbox_with_files(data, call, args, t_write_file);
    if (!sb)
        return;
    write_bytes(call, sb, canon, bytes, len);
}

/* A host file below one of files.upload_roots, opened so that neither ".." nor a symlink can
 * lead out of that root. */
static int open_upload(const struct sbx_config *cfg, const char *local, struct sbx_err *err)
{
    if (local[0] != '/')
        return sbx_fail(err, EINVAL, "local_path must be absolute");
    for (size_t i = 0; i < cfg->upload_roots.len; i++) {
        const char *root = cfg->upload_roots.items[i];
        /* "/" and "/dir/" are roots too; "//" in local_path is one '/'. */
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
            rl--;
        if (strncmp(local, root, rl) != 0 || (local[rl] != '/' && local[rl] != '\0'))
            continue;
        const char *rel = local + rl;
        while (*rel == '/')
            rel++;
        cleanup_fd int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0)
            return sbx_fail_errno(err, errno, "upload root %s", root);
        /* Found as a bare O_PATH first: a device's open may act (a watchdog starts, a tape
         * rewinds) and a fifo's wakes its writer, so only a regular file is opened for real. */
        cleanup_fd int path = files_openat2(rfd, *rel ? rel : ".", O_PATH, 0,
                                            RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
        /* RESOLVE_BENEATH answers EXDEV for any step it cannot prove stays below the root. */
        if (path < 0 && (errno == EXDEV || errno == ELOOP))
            return sbx_fail(err, EACCES,
                            "%s is refused: on the way from the upload root %s it meets a '..', "
                            "a symlink with an absolute target, a symlink loop, or a link out of "
                            "the root",
                            local, root);
        if (path < 0)
            return sbx_fail_errno(err, errno, "%s", local);
        struct stat st;
        if (fstat(path, &st) < 0)
            return sbx_fail_errno(err, errno, "%s", local);
        if (!S_ISREG(st.st_mode))
            return sbx_fail(err, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "%s is %s", local,
                            S_ISDIR(st.st_mode) ? "a directory: upload_file copies one file"
                                                : "not a regular file");
        int fd = files_reopen(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
            return sbx_fail_errno(err, errno, "%s", local);
        return fd;
    }
    return sbx_fail(err, EACCES, "%s is not below any of files.upload_roots", local);
}

static void t_upload_file(struct mcp_call *call, json_t *args, void *data)
{
    struct sandbox_service *svc = data;
    const struct sbx_config *cfg = svc->cfg;
    if (cfg->upload_roots.len == 0) {
        mcp_call_fail(call, "upload_file is disabled: no host directory is allowed. An "
                            "administrator can enable it with files.upload_roots = "
                            "[\"/some/dir\"] in the config file. Use write_file to send "
                            "content directly.");
        return;
    }
    const char *local = tool_arg_str(args, "local_path");
    struct sbx_err err = {0};
    cleanup_fd int fd = open_upload(cfg, local, &err);
    if (fd < 0) {
        mcp_call_fail(call, "%s", err.msg);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        mcp_call_fail(call, "%s: %s", local, strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode)) { /* open_upload opens none other */
        mcp_call_fail(call, "%s is not a regular file", local);
        return;
    }
    if ((uint64_t)st.st_size > UPLOAD_MAX) {
        mcp_call_fail(call, "%s is larger than %llu MiB", local,
                      (unsigned long long)(UPLOAD_MAX >> 20));
        return;
    }
    const char *dest = tool_arg_str(args, "path");
    const char *base = strrchr(local, '/') + 1;
    char canon[FILES_PATH_MAX];
    if (!file_path_arg(call, dest ? dest : base, canon, sizeof(canon)))
        return;
    struct sandbox *sb = tool_sandbox_with_files(svc, call, args, t_upload_file);
    if (!sb)
        return;
    cleanup_free char *buf = NULL;
    size_t len = 0;
    buf = xmalloc((size_t)st.st_size + 1);
    while (len < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) { /* a part of the file is not a file: say so rather than copy it */
            mcp_call_fail(call, "%s: reading it: %s", local, strerror(errno));
            return;
        }
        if (n == 0) /* it shrank meanwhile: what it now holds */
            break;
        len += (size_t)n;
    }
    write_bytes(call, sb, canon, buf, len);
}

#define SANDBOX_ID_ARG                                                                             \
    "\"sandbox_id\":{\"type\":\"string\",\"maxLength\":64,\"description\":\"Omit for your "        \
    "default sandbox\"}"

static const struct mcp_tool_def tool_defs[] = {
    {"list_files", "List files in a sandbox",
     "List files and directories in a sandbox (default /workspace, where code runs and files "
     "persist between calls), in name order. Paths are inside the sandbox, never on the host. "
     "At most 1000 entries per call: when truncated is true, call again with the offset it names.",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"maxLength\":1024}"
     "," SANDBOX_ID_ARG ",\"recursive\":{\"type\":\"boolean\"},\"offset\":{\"type\":\"integer\","
     "\"minimum\":0,\"description\":\"Entries to skip: where a truncated listing goes on\"}},"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"entries\":{\"type\":"
     "\"array\",\"items\":{\"type\":\"object\"}},\"truncated\":{\"type\":\"boolean\"}},"
     "\"required\":[\"path\",\"entries\"]}",
     true, false, true, false, t_list_files},
    {"read_file", "Read a file from a sandbox",
     "Read a file from the sandbox's /workspace (or /tmp, /dev/shm). Text comes back as UTF-8, "
     "binary as base64; an image file also comes back as an image. Large files are read in "
     "pieces with offset and length (at most 4 MiB per call).",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"minLength\":1,"
     "\"maxLength\":1024}," SANDBOX_ID_ARG ",\"encoding\":{\"type\":\"string\",\"enum\":["
     "\"utf-8\",\"base64\"]},\"offset\":{\"type\":\"integer\",\"minimum\":0},\"length\":{"
     "\"type\":\"integer\",\"minimum\":1}},\"required\":[\"path\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{\"type\":"
     "\"integer\"},\"encoding\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},"
     "\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"path\",\"size\",\"encoding\","
     "\"content\"]}",
     true, false, true, false, t_read_file},
    {"write_file", "Write a file into a sandbox",
     "Create or replace a file in the sandbox's /workspace (parent directories are created). "
     "Use encoding base64 for binary content. The file persists until the sandbox is closed.",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"minLength\":1,"
     "\"maxLength\":1024},\"content\":{\"type\":\"string\"},\"encoding\":{\"type\":\"string\","
     "\"enum\":[\"utf-8\",\"base64\"]}," SANDBOX_ID_ARG "},\"required\":[\"path\",\"content\"],"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{\"type\":"
     "\"integer\"}},\"required\":[\"path\",\"size\"]}",
     false, true, true, false, t_write_file},
    {"upload_file", "Copy a host file into a sandbox",
     "Copy a file from the server's machine into the sandbox. Only files below the directories "
     "an administrator listed in files.upload_roots can be copied (none by default).",
     "{\"type\":\"object\",\"properties\":{\"local_path\":{\"type\":\"string\",\"minLength\":1,"
     "\"maxLength\":4096},\"path\":{\"type\":\"string\",\"maxLength\":1024}," SANDBOX_ID_ARG
     "},\"required\":[\"local_path\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{\"type\":"
     "\"integer\"}},\"required\":[\"path\",\"size\"]}",
     false, true, true, false, t_upload_file},
};

int tools_files_register(struct sandbox_service *svc, struct sbx_err *err)
{
    return tool_register(svc, tool_defs, ARRAY_SIZE(tool_defs), err);
}
