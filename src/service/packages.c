/* The pip command line is fixed here and only requirement strings that requirements.c has
 * accepted are appended to it, so what reaches pip is always: install these names, from these
 * indexes, into the sandbox's package directory, wheels only unless configured otherwise. */
#include "packages.h"

#include "jail/jail.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void env_add(char ***env, size_t *n, char *kv)
{
    *env = xrealloc(*env, (*n + 2) * sizeof(char *));
    (*env)[(*n)++] = kv;
    (*env)[*n] = NULL;
}

char **packages_sandbox_env(const struct sbx_config *cfg, uint16_t proxy_port)
{
    char **env = NULL;
    size_t n = 0;
    char proxy[32];
    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%u", proxy_port);
    /* Lower and upper case: curl reads only http_proxy in lower case, others either. */
    static const char *const proxy_vars[] = {"http_proxy", "https_proxy", "HTTP_PROXY",
                                             "HTTPS_PROXY"};
    for (size_t i = 0; i < ARRAY_SIZE(proxy_vars); i++)
        env_add(&env, &n, xasprintf("%s=%s", proxy_vars[i], proxy));
    if (cfg->index_url && *cfg->index_url)
        env_add(&env, &n, xasprintf("PIP_INDEX_URL=%s", cfg->index_url));
    if (cfg->extra_index_urls.len) {
        size_t len = 0;
        for (size_t i = 0; i < cfg->extra_index_urls.len; i++)
            len += strlen(cfg->extra_index_urls.items[i]) + 1;
        char *joined = xcalloc(1, len + 1);
        for (size_t i = 0; i < cfg->extra_index_urls.len; i++) {
            if (i)
                strcat(joined, " ");
            strcat(joined, cfg->extra_index_urls.items[i]);
        }
        env_add(&env, &n, xasprintf("PIP_EXTRA_INDEX_URL=%s", joined));
        free(joined);
    }
    if (cfg->only_binary)
        env_add(&env, &n, xstrdup("PIP_ONLY_BINARY=:all:"));
    env_add(&env, &n, xstrdup("PIP_TARGET=" PACKAGES_DIR));
    env_add(&env, &n, xstrdup("PIP_NO_CACHE_DIR=1"));
    env_add(&env, &n, xstrdup("PIP_DISABLE_PIP_VERSION_CHECK=1"));
    env_add(&env, &n, xstrdup("PYTHONPATH=" PACKAGES_DIR));
    return env;
}

void packages_env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

json_t *packages_pip_env(uint16_t proxy_port)
{
    char proxy[32];
    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%u", proxy_port);
    json_t *env = json_object();
    for (size_t i = 0; jail_base_env[i]; i++) {
        const char *eq = strchr(jail_base_env[i], '=');
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - jail_base_env[i]), jail_base_env[i]);
        json_object_set_new(env, name, json_string(eq + 1));
    }
    /* pip reaches the index only through the egress proxy, and reads no config file. */
    static const char *const proxy_vars[] = {"http_proxy", "https_proxy", "HTTP_PROXY",
                                             "HTTPS_PROXY"};
    for (size_t i = 0; i < ARRAY_SIZE(proxy_vars); i++)
        json_object_set_new(env, proxy_vars[i], json_string(proxy));
    json_object_set_new(env, "PIP_CONFIG_FILE", json_string("/dev/null"));
    return env;
}

json_t *packages_pip_argv(const struct sbx_config *cfg, const char *const *reqs, size_t n,
                          const char *report_path, bool dry_run)
{
    json_t *a = json_pack("[s,s,s,s,s,s,s,s,s,s,s,s,s]", "/usr/bin/python3", "-I", "-m", "pip",
                          "install", "--no-input", "--disable-pip-version-check", "--no-cache-dir",
                          "--progress-bar=off", "--upgrade", "--target=" PACKAGES_DIR, "--report",
                          report_path);
    if (dry_run)
        json_array_append_new(a, json_string("--dry-run"));
    if (cfg->only_binary)
        json_array_append_new(a, json_string("--only-binary=:all:"));
    if (cfg->index_url && *cfg->index_url) {
        char *opt = xasprintf("--index-url=%s", cfg->index_url);
        json_array_append_new(a, json_string(opt));
        free(opt);
    }
    for (size_t i = 0; i < cfg->extra_index_urls.len; i++) {
        char *opt = xasprintf("--extra-index-url=%s", cfg->extra_index_urls.items[i]);
        json_array_append_new(a, json_string(opt));
        free(opt);
    }
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(reqs[i]));
    return a;
}

json_t *packages_pip_pinned_argv(const struct sbx_config *cfg, const char *pins_path,
                                 const char *report_path)
{
    json_t *a = packages_pip_argv(cfg, NULL, 0, report_path, false);
    json_t *pinned = json_pack("[s,s,s,s]", "--no-deps", "--require-hashes", "-r", pins_path);
    json_array_extend(a, pinned);
    json_decref(pinned);
    return a;
}

/* pip's report as a JSON object, within the value cap, or NULL with err. */
static json_t *load_report(const char *text, size_t len, struct sbx_err *err)
{
    if (!json_text_values_within(text, len, PACKAGES_REPORT_MAX_VALUES)) {
        sbx_fail(err, E2BIG, "pip's report holds more than %d JSON values",
                 PACKAGES_REPORT_MAX_VALUES);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        sbx_fail(err, EINVAL, "pip's report is not a JSON object (%s)", je.text);
        return NULL;
    }
    return root;
}

/* The report's "install" list, for a reader that must see every project (the root, to be
 * released, in *root), or NULL with err. */
static const json_t *load_install_list(const char *text, size_t len, json_t **root,
                                       struct sbx_err *err)
{
    *root = load_report(text, len, err);
    if (!*root)
        return NULL;
    const json_t *install = json_object_get(*root, "install");
    if (!json_is_array(install)) {
        json_decref(*root);
        *root = NULL;
        sbx_fail(err, EINVAL, "pip's report has no \"install\" list");
        return NULL;
    }
    return install;
}

int packages_parse_report(const char *text, size_t len, json_t **installed, struct sbx_err *err)
{
    json_t *root = load_report(text, len, err);
    if (!root)
        return -1;
    json_t *out = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(root, "install"), i, item)
    {
        if (json_array_size(out) >= PACKAGES_REPORT_MAX)
            break;
        const json_t *meta = json_object_get(item, "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *version = json_string_value(json_object_get(meta, "version"));
        if (!name || !version)
            continue;
        /* What pip installed is shown, however long its name or version (a local version
         * can be long): cut, and said to be. */
        char *shown_name = utf8_cut_marked(name, REQUIREMENT_NAME_MAX, "...");
        char *shown_version = utf8_cut_marked(version, PACKAGES_VERSION_MAX, "...");
        json_array_append_new(out, json_pack("{s:s, s:s, s:b}", "name", shown_name, "version",
                                             shown_version, "requested",
                                             json_is_true(json_object_get(item, "requested"))));
        free(shown_name);
        free(shown_version);
    }
    json_decref(root);
    *installed = out;
    return 0;
}

int packages_report_projects(const char *text, size_t len, json_t **names, struct sbx_err *err)
{
    *names = NULL;
    json_t *root;
    const json_t *install = load_install_list(text, len, &root, err);
    if (!install)
        return -1;
    json_t *out = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(install, i, item)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
        if (!name) {
            json_decref(out);
            json_decref(root);
            return sbx_fail(err, EINVAL, "entry %zu of pip's report names no project", i);
        }
        json_array_append_new(out, json_string(name));
    }
    json_decref(root);
    *names = out;
    return 0;
}

/* The hashes pip's --hash takes, and their hex lengths. */
static const struct {
    const char *name;
    size_t hex_len;
} pin_hashes[] = {{"sha256", 64}, {"sha384", 96}, {"sha512", 128}};

/* ALGO:HEX for --hash from "ALGO=HEX" (archive_info's "hash"), or false when pip would not
 * take it: the line it goes into must hold nothing but the pin. */
static bool pin_hash(const char *algo, size_t algo_len, const char *hex, char *out, size_t size)
{
    for (size_t i = 0; i < ARRAY_SIZE(pin_hashes); i++) {
        if (algo_len != strlen(pin_hashes[i].name) ||
            strncmp(algo, pin_hashes[i].name, algo_len) != 0 ||
            strlen(hex) != pin_hashes[i].hex_len)
            continue;
        for (const char *c = hex; *c; c++)
            if (hex_digit(*c) < 0)
                return false;
        return snprintf(out, size, "%s:%s", pin_hashes[i].name, hex) < (int)size;
    }
    return false;
}

/* The file's strong hash from an entry's download_info: "hash" (every pip with --report),
 * else the first strong one of "hashes" (pip 23.1 and later). */
static bool artifact_hash(const json_t *download_info, char *out, size_t size)
{
    const json_t *archive = json_object_get(download_info, "archive_info");
    const char *hash = json_string_value(json_object_get(archive, "hash"));
    const char *eq = hash ? strchr(hash, '=') : NULL;
    if (eq && pin_hash(hash, (size_t)(eq - hash), eq + 1, out, size))
        return true;
    const json_t *hashes = json_object_get(archive, "hashes");
    for (size_t i = 0; i < ARRAY_SIZE(pin_hashes); i++) {
        const char *hex = json_string_value(json_object_get(hashes, pin_hashes[i].name));
        if (hex && pin_hash(pin_hashes[i].name, strlen(pin_hashes[i].name), hex, out, size))
            return true;
    }
    return false;
}

/* A version pip reads as one version after "==": PEP 440's characters, nothing that could end
 * the pin or start an option. */
static bool pin_version(const char *v)
{
    if (!*v)
        return false;
    for (const char *c = v; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              strchr(".!+_-", *c)))
            return false;
    return true;
}

int packages_report_pins(const char *text, size_t len, char **pins, size_t *count,
                         json_t **requested, struct sbx_err *err)
{
    *pins = NULL;
    *requested = NULL;
    *count = 0;
    json_t *root;
    const json_t *install = load_install_list(text, len, &root, err);
    if (!install)
        return -1;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (!f)
        abort(); /* out of memory, as xmalloc */
    json_t *asked = json_object();
    int rc = 0;
    size_t i;
    json_t *item;
    json_array_foreach(install, i, item)
    {
        const json_t *meta = json_object_get(item, "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *version = json_string_value(json_object_get(meta, "version"));
        const json_t *info = json_object_get(item, "download_info");
        const char *url = json_string_value(json_object_get(info, "url"));
        char hash[160];
        if (!name || !*name || strlen(name) > REQUIREMENT_NAME_MAX ||
            requirement_identifier(name) != strlen(name) || !version || !pin_version(version)) {
            rc = sbx_fail(err, EINVAL,
                          "entry %zu of pip's report names no project and version "
                          "that can be pinned",
                          i);
            break;
        }
        /* A local directory, a VCS checkout or a file the index gave no hash for: nothing
         * would hold the install to the file the check saw. */
        if (!artifact_hash(info, hash, sizeof(hash))) {
            char *shown = utf8_cut_marked(url ? url : "an unknown place", 200, "...");
            rc = sbx_fail(err, EINVAL,
                          "pip's report gives no sha256, sha384 or sha512 hash for %s %s (from "
                          "%s), so the install cannot be held to the file that was checked",
                          name, version, shown);
            free(shown);
            break;
        }
        fprintf(f, "%s==%s --hash=%s\n", name, version, hash);
        if (json_is_true(json_object_get(item, "requested"))) {
            char norm[REQUIREMENT_NAME_MAX + 1];
            requirement_normalize(name, norm, sizeof(norm));
            json_object_set_new(asked, norm, json_true());
        }
    }
    fclose(f);
    size_t n = json_array_size(install);
    json_decref(root);
    if (rc < 0) {
        free(out);
        json_decref(asked);
        return -1;
    }
    *pins = out;
    *count = n;
    *requested = asked;
    return 0;
}

void packages_mark_requested(json_t *installed, const json_t *requested)
{
    char norm[REQUIREMENT_NAME_MAX + 1];
    size_t i;
    json_t *pkg;
    json_array_foreach(installed, i, pkg)
    {
        requirement_normalize(json_string_value(json_object_get(pkg, "name")) ?: "", norm,
                              sizeof(norm));
        json_object_set_new(pkg, "requested", json_boolean(json_object_get(requested, norm)));
    }
}

void packages_merge(json_t *list, const json_t *installed)
{
    /* An index by normalised name: one pass over each side, whatever their sizes. */
    json_t *at = json_object();
    char norm[REQUIREMENT_NAME_MAX + 1];
    size_t i;
    json_t *pkg;
    json_array_foreach(list, i, pkg)
    {
        requirement_normalize(json_string_value(json_object_get(pkg, "name")) ?: "", norm,
                              sizeof(norm));
        json_object_set_new(at, norm, json_integer((json_int_t)i));
    }
    json_array_foreach(installed, i, pkg)
    {
        const char *name = json_string_value(json_object_get(pkg, "name"));
        if (!name)
            continue;
        requirement_normalize(name, norm, sizeof(norm));
        json_t *entry =
            json_pack("{s:s, s:O}", "name", name, "version", json_object_get(pkg, "version"));
        const json_t *k = json_object_get(at, norm);
        if (k) {
            json_array_set_new(list, (size_t)json_integer_value(k), entry);
        } else if (json_array_size(list) < PACKAGES_LIST_MAX) {
            json_object_set_new(at, norm, json_integer((json_int_t)json_array_size(list)));
            json_array_append_new(list, entry);
        } else {
            json_decref(entry);
        }
    }
    json_decref(at);
}

/* NAME-VERSION.dist-info (the wheel spec escapes any '-' in the name): NAME and VERSION
 * copied out, or false. */
static bool dist_info_name(const char *path, char *name, size_t name_size, char *version,
                           size_t version_size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    const char *dash = strchr(base, '-');
    if (len <= 10 || strcmp(base + len - 10, ".dist-info") != 0 || !dash || dash == base)
        return false;
    size_t n = (size_t)(dash - base), v = (size_t)(base + len - 10 - dash - 1);
    if (!v || n >= name_size || v >= version_size)
        return false;
    memcpy(name, base, n);
    name[n] = '\0';
    memcpy(version, dash + 1, v);
    version[v] = '\0';
    return true;
}

json_t *packages_on_disk(const json_t *recorded, const json_t *entries, packages_name_fn real_name,
                         void *ctx)
{
    /* normalised name -> {name, version, mtime, path, newest: {version: true}}: its newest
     * dist-info directory, and every version whose directory is that new. */
    json_t *found = json_object();
    json_t *order = json_array(); /* those, in the directory's order */
    char name[REQUIREMENT_NAME_MAX + 1], version[PACKAGES_VERSION_MAX + 1];
    char norm[REQUIREMENT_NAME_MAX + 1];
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        const char *path = json_string_value(json_object_get(e, "path"));
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *mtime = json_string_value(json_object_get(e, "mtime"));
        if (!path || !type || !mtime || strcmp(type, "directory") != 0 ||
            !dist_info_name(path, name, sizeof(name), version, sizeof(version)) ||
            requirement_identifier(name) != strlen(name))
            continue;
        requirement_normalize(name, norm, sizeof(norm));
        json_t *pkg = json_object_get(found, norm);
        if (!pkg) {
            if (json_array_size(order) >= PACKAGES_LIST_MAX)
                continue;
            pkg = json_pack("{s:s}", "name", name);
            json_object_set_new(found, norm, pkg);
            json_array_append(order, pkg);
        }
        /* ISO 8601 to the millisecond: the later string is the later time. */
        const char *newest = json_string_value(json_object_get(pkg, "mtime"));
        int later = newest ? strcmp(mtime, newest) : 1;
        if (later > 0) {
            json_object_set_new(pkg, "version", json_string(version));
            json_object_set_new(pkg, "mtime", json_string(mtime));
            json_object_set_new(pkg, "path", json_string(path));
            json_object_set_new(pkg, "newest", json_object());
        }
        if (later >= 0)
            json_object_set_new(json_object_get(pkg, "newest"), version, json_true());
    }
    json_t *list = json_array();
    json_t *pkg;
    json_array_foreach(recorded, i, pkg)
    {
        const char *rname = json_string_value(json_object_get(pkg, "name"));
        const char *rversion = json_string_value(json_object_get(pkg, "version"));
        requirement_normalize(rname ? rname : "", norm, sizeof(norm));
        json_t *there = json_object_get(found, norm);
        if (!there || json_object_get(there, "taken"))
            continue; /* removed since */
        /* The newest dist-info is the live one (pip --target --upgrade, by the tool or by
         * hand, leaves the old one behind, older); the version pip reported breaks a tie. */
        bool tie = rversion && json_object_get(json_object_get(there, "newest"), rversion);
        json_array_append_new(list, json_pack("{s:s, s:O}", "name", rname, "version",
                                              tie ? json_object_get(pkg, "version")
                                                  : json_object_get(there, "version")));
        json_object_set_new(there, "taken", json_true());
    }
    json_array_foreach(order, i, pkg)
    {
        if (json_object_get(pkg, "taken") || json_array_size(list) >= PACKAGES_LIST_MAX)
            continue;
        /* The directory's name escapes the project's (Sbx-Mixed.Case is Sbx_Mixed_Case):
         * its METADATA says it as its author wrote it, if that is the same project. (Another
         * name would also be read again at every look, never matching what was recorded.) */
        char shown[REQUIREMENT_NAME_MAX + 1], shown_norm[REQUIREMENT_NAME_MAX + 1];
        const char *n = json_string_value(json_object_get(pkg, "name"));
        requirement_normalize(n, norm, sizeof(norm));
        if (real_name &&
            real_name(json_string_value(json_object_get(pkg, "path")), ctx, shown, sizeof(shown))) {
            requirement_normalize(shown, shown_norm, sizeof(shown_norm));
            if (strcmp(shown_norm, norm) == 0)
                n = shown;
        }
        json_array_append_new(
            list, json_pack("{s:s, s:O}", "name", n, "version", json_object_get(pkg, "version")));
    }
    json_decref(found);
    json_decref(order);
    return list;
}

bool packages_metadata_name(const char *metadata, size_t len, char *out, size_t size)
{
    /* The header ends at the first empty line; "Name: x" is one of its lines. */
    const char *end = metadata + len;
    for (const char *line = metadata; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t l = nl ? (size_t)(nl - line) : (size_t)(end - line);
        if (l && line[l - 1] == '\r')
            l--;
        if (l == 0)
            break;
        if (l > 6 && strncmp(line, "Name: ", 6) == 0) {
            size_t n = l - 6;
            if (n >= size)
                return false;
            memcpy(out, line + 6, n);
            out[n] = '\0';
            return requirement_identifier(out) == n;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    return false;
}

char *packages_summary(const json_t *installed)
{
    size_t cap = 2048, off = 0, shown = 0;
    char *text = xmalloc(cap);
    text[0] = '\0';
    size_t i;
    json_t *p;
    json_array_foreach(installed, i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *version = json_string_value(json_object_get(p, "version"));
        size_t need = strlen(name ?: "") + strlen(version ?: "") + 4;
        if (off + need + 32 > cap)
            break;
        off += (size_t)snprintf(text + off, cap - off, "%s%s %s", i ? ", " : "", name ?: "?",
                                version ?: "?");
        shown++;
    }
    if (shown < json_array_size(installed))
        snprintf(text + off, cap - off, " and %zu more", json_array_size(installed) - shown);
    return text;
}

char *packages_failure_reason(const char *output, size_t len)
{
    /* pip says why in lines starting "ERROR:"; keep those (bounded). */
    size_t cap = 2048, o = 0;
    char *why = xmalloc(cap);
    const char *end = output + len;
    for (const char *line = output; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t l = nl ? (size_t)(nl - line) : (size_t)(end - line);
        if (l >= 6 && strncmp(line, "ERROR:", 6) == 0 && o + l + 2 < cap) {
            memcpy(why + o, line, l);
            o += l;
            why[o++] = '\n';
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    if (o == 0) {
        /* No ERROR line (a crash, a kill): the last lines say most, from a character's start. */
        size_t take = len < cap - 1 ? len : cap - 1;
        const char *from = end - take;
        while (take > 0 && ((unsigned char)*from & 0xC0) == 0x80)
            from++, take--;
        memcpy(why, from, take);
        o = take;
    }
    while (o > 0 && (why[o - 1] == '\n' || why[o - 1] == ' '))
        o--;
    /* pip's output is not always UTF-8, nor free of NULs: the reason travels in JSON, whole,
     * with U+FFFD for what it cannot carry (a NUL is made a byte that is never UTF-8 first). */
    for (char *nul = memchr(why, '\0', o); nul; nul = memchr(nul, '\0', o - (size_t)(nul - why)))
        *nul = (char)0xFF;
    size_t n;
    char *shown = utf8_with_replacements(why, o, &n);
    free(why);
    return shown;
}
