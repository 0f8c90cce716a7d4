/* Sandbox resources: sandbox://{sandbox_id}/files/{+path} and sandbox://{sandbox_id}/history.
 * Every resource_link in a tool result points at one of these. Only the owner can read them;
 * anyone else gets "not found", exactly as for an unknown id. */
#include "sandbox.h"

#include "base64.h"
#include "files.h"
#include "history.h"
#include "protocol/mcp.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

#define RESOURCE_READ_MAX (16u << 20)

/* Splits "sandbox://ID/KIND/REST" into its parts; false if uri is not ours. */
static bool parse_uri(const char *uri, char *id, size_t id_size, const char **kind_rest)
{
    static const char scheme[] = "sandbox://";
    if (strncmp(uri, scheme, sizeof(scheme) - 1) != 0)
        return false;
    const char *p = uri + sizeof(scheme) - 1;
    const char *slash = strchr(p, '/');
    if (!slash || slash == p || (size_t)(slash - p) >= id_size)
        return false;
    memcpy(id, p, (size_t)(slash - p));
    id[slash - p] = '\0';
    *kind_rest = slash + 1;
    return true;
}

static int read_file_resource(const char *uri, void *data, json_t **contents, struct sbx_err *err)
{
    struct sandbox_service *svc = data;
    char id[64];
    const char *rest;
    if (!parse_uri(uri, id, sizeof(id), &rest) || strncmp(rest, "files/", 6) != 0)
        return sbx_fail(err, ENOENT, "not a sandbox file");
    const char *owner = mcp_server_current_owner(svc->srv);
    struct sandbox *sb = NULL;
    if (!owner || sandbox_lookup(svc, owner, id, &sb, err) < 0)
        return sbx_fail(err, ENOENT, "not found");
    char rel[FILES_PATH_MAX], canon[FILES_PATH_MAX];
    if (!uri_path_decode(rest + 6, rel, sizeof(rel)))
        return sbx_fail(err, ENOENT, "bad path");
    char *path = xasprintf("/workspace/%s", rel);
    int r = files_canonical(path, canon, sizeof(canon), err);
    free(path);
    if (r < 0)
        return sbx_fail(err, ENOENT, "%s", err->msg);
    char *buf = NULL;
    size_t len = 0;
    uint64_t size = 0;
    if (sandbox_read_file(sb, canon, 0, 0, RESOURCE_READ_MAX, &buf, &len, &size, err) < 0) {
        /* Missing, a directory, or a link out of the sandbox: all look like "not found". One
         * still in its setup is not: its owner may read the file in a moment. */
        if (err->code != EAGAIN)
            err->code = ENOENT;
        return -1;
    }
    if (len < size) {
        /* A resource is returned whole or not at all: cut, it would pass for the file. */
        free(buf);
        return sbx_fail(err, EFBIG,
                        "the file is %llu bytes, more than a resource read returns (%u MiB): read "
                        "it in parts with read_file (offset, length)",
                        (unsigned long long)size, RESOURCE_READ_MAX >> 20);
    }
    bool text = files_looks_text(buf, len);
    const char *mime = files_mime_type(canon, text ? "text/plain" : "application/octet-stream");
    json_t *item;
    if (text) {
        item = json_pack("{s:s, s:s, s:s%}", "uri", uri, "mimeType", mime, "text", buf, len);
    } else {
        char *b64 = base64_encode_alloc(buf, len);
        item = json_pack("{s:s, s:s, s:s}", "uri", uri, "mimeType", mime, "blob", b64);
        free(b64);
    }
    free(buf);
    *contents = json_pack("[o]", item);
    return 0;
}

static int read_history_resource(const char *uri, void *data, json_t **contents,
                                 struct sbx_err *err)
{
    struct sandbox_service *svc = data;
    char id[64];
    const char *rest;
    if (!parse_uri(uri, id, sizeof(id), &rest) || strcmp(rest, "history") != 0)
        return sbx_fail(err, ENOENT, "not a sandbox history");
    const char *owner = mcp_server_current_owner(svc->srv);
    struct sandbox *open = owner ? sandbox_find(svc, id) : NULL;
    if (open && strcmp(open->owner, owner) == 0)
        sandbox_sync_packages(open);
    json_t *info = NULL;
    if (!owner || history_get_sandbox(svc->history, id, &info, err) < 0 ||
        strcmp(json_string_value(json_object_get(info, "owner")) ?: "", owner) != 0) {
        json_decref(info);
        return sbx_fail(err, ENOENT, "not found");
    }
    json_t *records = NULL;
    if (history_list(svc->history, id, 50, &records, err) < 0) {
        json_decref(info);
        return -1;
    }
    json_t *doc = json_pack("{s:s, s:I, s:O?, s:o, s:o}", "sandbox_id", id, "total",
                            (json_int_t)history_total(svc->history, id), "session_start",
                            json_object_get(info, "session_start"), "installed_packages",
                            sandbox_info_packages(info), "records", records);
    json_decref(info);
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    json_decref(doc);
    *contents = json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "application/json", "text",
                          text ? text : "{}");
    free(text);
    return 0;
}

static const struct mcp_resource_def templates[] = {
    {"sandbox://{sandbox_id}/files/{+path}", "sandbox-file",
     "A file in a sandbox's /workspace (text, or a base64 blob with its MIME type)", NULL,
     read_file_resource},
    {"sandbox://{sandbox_id}/history", "sandbox-history",
     "The newest executions of a sandbox, as JSON", "application/json", read_history_resource},
};

int resources_sandbox_register(struct sandbox_service *svc, struct sbx_err *err)
{
    for (size_t i = 0; i < ARRAY_SIZE(templates); i++)
        if (mcp_server_add_resource_template(svc->srv, &templates[i], svc, err) < 0)
            return -1;
    return 0;
}
