/* Layered configuration: defaults, then the file, then MCP_SANDBOX_* variables, then flags.
 * Every key is a row of a table (name, type, where it lives, help); the TOML loader, the
 * environment mapper, config_set and config_print all walk the same rows. */
#include "config.h"

#include "log.h"
#include "toml.h"
#include "util.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

enum key_type {
    KT_STRING,
    KT_BOOL,
    KT_U32,
    KT_SIZE,      /* u64 bytes: integer, or "256M" */
    KT_LIST,      /* array of strings; env: comma-separated */
    KT_LOG_LEVEL, /* string, one of the 8 syslog names */
    KT_CPUS,      /* profile: u32 millicpus, written "0.5" */
    KT_SECONDS,   /* profile: u32 milliseconds, written in whole seconds */
    KT_NETWORK,   /* profile: char[16], "none" or "packages" */
};

struct key_def {
    const char *name;
    enum key_type type;
    size_t off;
    uint64_t min, max; /* integer bounds */
};

#define G(name, type, field, min, max)                                                             \
    {                                                                                              \
        name, type, offsetof(struct sbx_config, field), min, max                                   \
    }
#define P(name, type, field, min, max)                                                             \
    {                                                                                              \
        name, type, offsetof(struct sbx_profile, field), min, max                                  \
    }

static const struct key_def global_keys[] = {
    G("server.state_dir", KT_STRING, state_dir, 0, 0),
    G("server.max_message_bytes", KT_SIZE, max_message_bytes, 1024, 1ull << 30),
    G("server.page_size", KT_U32, page_size, 1, 1000),
    G("server.history_retention_days", KT_U32, history_retention_days, 1, 36500),
    G("server.history_max_bytes", KT_SIZE, history_max_bytes, 1ull << 20, 1ull << 40),
    G("log.file", KT_STRING, log_file, 0, 0),
    G("log.level", KT_LOG_LEVEL, log_level, 0, 0),
    G("isolation.allow_degraded", KT_BOOL, allow_degraded, 0, 0),
    G("isolation.sandbox_uid", KT_U32, sandbox_uid, 1, 4294967294u),
    G("isolation.host_uid", KT_U32, host_uid, 1, 4294967294u),
    G("isolation.host_uid_count", KT_U32, host_uid_count, 1, 1u << 24),
    G("isolation.default_profile", KT_STRING, default_profile, 0, 0),
    G("isolation.output_cap_bytes", KT_SIZE, output_cap_bytes, 1024, 1ull << 30),
    G("run.pool", KT_STRING, run_pool, 0, 0),
    G("run.pool_socket", KT_STRING, run_pool_socket, 0, 0),
    G("limits.max_sandboxes", KT_U32, max_sandboxes, 1, 100000),
    G("limits.max_sandboxes_per_owner", KT_U32, max_sandboxes_per_owner, 1, 100000),
    G("limits.idle_ttl_s", KT_U32, idle_ttl_s, 1, 31536000),
    G("limits.max_lifetime_s", KT_U32, max_lifetime_s, 1, 31536000),
    G("limits.max_queue_depth", KT_U32, max_queue_depth, 1, 100000),
    G("files.upload_roots", KT_LIST, upload_roots, 0, 0),
    G("guard.denied_modules", KT_LIST, guard_modules, 0, 0),
    G("guard.denied_calls", KT_LIST, guard_calls, 0, 0),
    G("guard.denied_attributes", KT_LIST, guard_attributes, 0, 0),
    G("packages.index_url", KT_STRING, index_url, 0, 0),
    G("packages.extra_index_urls", KT_LIST, extra_index_urls, 0, 0),
    G("packages.only_binary", KT_BOOL, only_binary, 0, 0),
    G("packages.allowed", KT_LIST, allowed_packages, 0, 0),
    G("packages.max_install_seconds", KT_U32, max_install_seconds, 1, 86400),
    G("packages.proxy_allow", KT_LIST, proxy_allow, 0, 0),
    G("packages.private_hosts", KT_LIST, private_hosts, 0, 0),
    G("packages.proxy_max_connections", KT_U32, proxy_max_connections, 1, 10000),
    G("packages.proxy_max_bytes", KT_SIZE, proxy_max_bytes, 1ull << 20, 1ull << 40),
    G("packages.proxy_idle_timeout_s", KT_U32, proxy_idle_timeout_s, 1, 86400),
    G("packages.proxy_connect_timeout_s", KT_U32, proxy_connect_timeout_s, 1, 600),
    G("http.listen", KT_STRING, http_listen, 0, 0),
    G("http.public_url", KT_STRING, public_url, 0, 0),
    G("http.allowed_hosts", KT_LIST, allowed_hosts, 0, 0),
    G("http.allowed_origins", KT_LIST, allowed_origins, 0, 0),
    G("http.cors_origins", KT_LIST, cors_origins, 0, 0),
    G("http.auth_tokens_file", KT_STRING, auth_tokens_file, 0, 0),
    G("http.auth_token_hashes", KT_LIST, auth_token_hashes, 0, 0),
    G("http.authorization_server", KT_STRING, authorization_server, 0, 0),
    G("http.jwt_jwks_file", KT_STRING, jwt_jwks_file, 0, 0),
    G("http.jwt_jwks_url", KT_STRING, jwt_jwks_url, 0, 0),
    G("http.jwt_jwks_ca_file", KT_STRING, jwt_jwks_ca_file, 0, 0),
    G("http.jwt_issuer", KT_STRING, jwt_issuer, 0, 0),
    G("http.jwt_audience", KT_STRING, jwt_audience, 0, 0),
    G("http.jwt_principal_claim", KT_STRING, jwt_principal_claim, 0, 0),
    G("http.jwt_algorithms", KT_LIST, jwt_algorithms, 0, 0),
    G("http.jwt_leeway_s", KT_U32, jwt_leeway_s, 0, 600),
    G("http.jwt_jwks_reload_s", KT_U32, jwt_jwks_reload_s, 0, 86400),
    G("http.jwt_jwks_url_refresh_s", KT_U32, jwt_jwks_url_refresh_s, 0, 86400),
    G("http.max_body_bytes", KT_SIZE, http_max_body_bytes, 1024, 1ull << 30),
    G("http.max_body_bytes_total", KT_SIZE, http_max_body_bytes_total, 1024, 1ull << 40),
    G("http.max_connections", KT_U32, http_max_connections, 1, 1000000),
    G("http.max_sessions", KT_U32, http_max_sessions, 1, 1000000),
    G("http.max_sessions_per_principal", KT_U32, http_max_sessions_per_principal, 1, 1000000),
    G("http.max_open_requests_per_principal", KT_U32, http_max_open_requests_per_principal, 1,
      1000000),
    G("http.session_idle_s", KT_U32, http_session_idle_s, 1, 31536000),
    G("http.session_evict_idle_s", KT_U32, http_session_evict_idle_s, 1, 31536000),
    G("http.request_timeout_s", KT_U32, http_request_timeout_s, 1, 3600),
    G("http.keepalive_s", KT_U32, http_keepalive_s, 1, 3600),
};

static const struct key_def profile_keys[] = {
    P("memory", KT_SIZE, memory_bytes, 16ull << 20, 1ull << 40),
    P("cpus", KT_CPUS, cpu_millicpus, 10, 1024000),
    P("timeout_s", KT_SECONDS, timeout_ms, 1, 86400),
    P("max_timeout_s", KT_SECONDS, max_timeout_ms, 1, 86400),
    P("pids", KT_U32, pids, 4, 1000000),
    P("workspace_size", KT_SIZE, workspace_bytes, 1ull << 20, 1ull << 40),
    P("workspace_inodes", KT_SIZE, workspace_inodes, 64, 1ull << 32),
    P("tmp_size", KT_SIZE, tmp_bytes, 1ull << 20, 1ull << 40),
    P("fsize", KT_SIZE, fsize_bytes, 1ull << 20, 1ull << 40),
    P("nofile", KT_U32, nofile, 16, 1048576),
    P("stack", KT_SIZE, stack_bytes, 256ull << 10, 1ull << 30),
    P("static_guard", KT_BOOL, static_guard, 0, 0),
    P("network", KT_NETWORK, network, 0, 0),
    P("pool_size", KT_U32, pool_size, 0, 10000),
};

_Static_assert(ARRAY_SIZE(global_keys) <= 64, "src_global is too small");
_Static_assert(ARRAY_SIZE(profile_keys) <= 16, "src_profile is too small");

static const char *const source_names[] = {"default", "file", "env", "flag"};

/* ---- defaults ---- */

static void profile_defaults(struct sbx_profile *p, const char *name, uint64_t mem_mib,
                             uint32_t millicpus, uint32_t timeout_s, uint32_t max_timeout_s,
                             uint32_t pids, uint64_t ws_mib, bool guard, uint32_t pool)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->memory_bytes = mem_mib << 20;
    p->cpu_millicpus = millicpus;
    p->timeout_ms = timeout_s * 1000;
    p->max_timeout_ms = max_timeout_s * 1000;
    p->pids = pids;
    p->workspace_bytes = ws_mib << 20;
    p->workspace_inodes = 16384;
    p->tmp_bytes = 64ull << 20;
    p->fsize_bytes = ws_mib << 20;
    p->nofile = 256;
    p->stack_bytes = 8ull << 20;
    p->static_guard = guard;
    snprintf(p->network, sizeof(p->network), "none");
    p->pool_size = pool;
}

/* The static guard's defaults (profiles with static_guard, tight by default). Defence in
 * depth only: the kernel layers are the boundary, and Python is too dynamic for an AST check
 * to be one. */
static const char *const default_guard_modules[] = {
    "os",
    "sys",
    "subprocess",
    "socket",
    "ctypes",
    "importlib",
    "pickle",
    "marshal",
    "shutil",
    "multiprocessing",
    "builtins",
    "io",
    "pathlib",
    "signal",
    "threading",
    "resource",
    "pty",
    "fcntl",
    "posix",
    "gc",
    "inspect",
    "code",
    "codeop",
    "runpy",
    "tempfile",
    "glob",
    "mmap",
    "asyncio",
    "_thread",
    "select",
    "selectors",
    "http",
    "urllib",
    "ftplib",
    "smtplib",
    "ssl",
    "imp",
    "posixsubprocess",
    "frozen_importlib",
    "frozen_importlib_external",
    "pdb",
    "zipimport",
    /* They import a module by its name, run code from a string, start a shell, or read any
     * file, which the calls below cannot see. */
    "pkgutil",
    "pydoc",
    "unittest",
    "timeit",
    "cProfile",
    "profile",
    "trace",
    "doctest",
    "webbrowser",
    "linecache",
    "codecs",
    "fileinput",
};
static const char *const default_guard_calls[] = {
    "eval",    "exec",   "compile", "__import__", "open",    "breakpoint", "input",
    "globals", "locals", "vars",    "getattr",    "setattr", "delattr",    "memoryview",
};
static const char *const default_guard_attributes[] = {
    "__subclasses__", "__globals__", "__builtins__", "__mro__",    "__code__",
    "__bases__",      "__base__",    "__class__",    "__dict__",   "__getattribute__",
    "__closure__",    "__func__",    "__self__",     "__loader__", "__spec__",
    "f_globals",      "f_locals",    "f_builtins",   "gi_frame",   "gi_code",
    "cr_frame",       "co_code",     "tb_frame",     "f_back",     "attrgetter",
    "methodcaller",
};

static const char *const default_jwt_algorithms[] = {"RS256", "ES256"};

static void list_defaults(struct string_list *l, const char *const *items, size_t n)
{
    l->items = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        l->items[i] = xstrdup(items[i]);
    l->len = n;
}

void config_init_defaults(struct sbx_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_message_bytes = 16ull << 20;
    cfg->page_size = 50;
    cfg->history_retention_days = 30;
    cfg->history_max_bytes = 1ull << 30;
    cfg->log_level = xstrdup("info");
    cfg->sandbox_uid = 65534;
    /* 65,536 uids where systemd's table has none in use (after its container ranges, below
     * 2^31), one per live sandbox. */
    cfg->host_uid = 1879048192;
    cfg->host_uid_count = 65536;
    cfg->default_profile = xstrdup("standard");
    cfg->output_cap_bytes = 64ull << 10;
    cfg->run_pool = xstrdup("auto");
    cfg->max_sandboxes = 64;
    cfg->max_sandboxes_per_owner = 16;
    cfg->idle_ttl_s = 1800;
    cfg->max_lifetime_s = 86400;
    cfg->max_queue_depth = 32;
    cfg->index_url = xstrdup("https://pypi.org/simple");
    cfg->only_binary = true;
    cfg->max_install_seconds = 300;
    /* PyPI serves its files from a second host. */
    static const char *const pypi_files[] = {"files.pythonhosted.org:443"};
    list_defaults(&cfg->proxy_allow, pypi_files, ARRAY_SIZE(pypi_files));
    cfg->proxy_max_connections = 16;
    cfg->proxy_max_bytes = 2ull << 30;
    cfg->proxy_idle_timeout_s = 60;
    cfg->proxy_connect_timeout_s = 10;
    cfg->http_listen = xstrdup("127.0.0.1:8080");
    cfg->http_max_body_bytes = 16ull << 20;
    cfg->http_max_body_bytes_total = 256ull << 20;
    cfg->http_max_connections = 1024;
    cfg->http_max_sessions = 256;
    cfg->http_session_idle_s = 3600;
    cfg->http_session_evict_idle_s = 60;
    cfg->http_request_timeout_s = 30;
    cfg->http_max_sessions_per_principal = 64;
    cfg->http_max_open_requests_per_principal = 256;
    cfg->http_keepalive_s = 15;
    cfg->jwt_principal_claim = xstrdup("sub");
    cfg->jwt_leeway_s = 60;
    cfg->jwt_jwks_reload_s = 5;
    cfg->jwt_jwks_url_refresh_s = 300;
    profile_defaults(&cfg->profiles[0], "standard", 256, 500, 10, 3600, 64, 512, false, 2);
    /* tight's limits are limits: a call may not ask for more time than its default. */
    profile_defaults(&cfg->profiles[1], "tight", 128, 250, 5, 5, 32, 64, true, 0);
    cfg->n_profiles = 2;
    list_defaults(&cfg->guard_modules, default_guard_modules, ARRAY_SIZE(default_guard_modules));
    list_defaults(&cfg->guard_calls, default_guard_calls, ARRAY_SIZE(default_guard_calls));
    list_defaults(&cfg->guard_attributes, default_guard_attributes,
                  ARRAY_SIZE(default_guard_attributes));
    list_defaults(&cfg->jwt_algorithms, default_jwt_algorithms, ARRAY_SIZE(default_jwt_algorithms));
}

static void string_list_free(struct string_list *l)
{
    for (size_t i = 0; i < l->len; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->len = 0;
}

void config_free(struct sbx_config *cfg)
{
    for (size_t i = 0; i < ARRAY_SIZE(global_keys); i++) {
        void *field = (char *)cfg + global_keys[i].off;
        if (global_keys[i].type == KT_STRING || global_keys[i].type == KT_LOG_LEVEL)
            free(*(char **)field);
        else if (global_keys[i].type == KT_LIST)
            string_list_free(field);
    }
    free(cfg->loaded_from);
    memset(cfg, 0, sizeof(*cfg));
}

const struct sbx_profile *config_profile(const struct sbx_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_profiles; i++)
        if (strcmp(cfg->profiles[i].name, name) == 0)
            return &cfg->profiles[i];
    return NULL;
}

/* ---- setting one value ---- */

/* A value as it arrives: typed from TOML, or text from env and flags. */
struct raw_value {
    const struct toml_value *toml; /* NULL: use text */
    const char *text;
};

static int want_integer(const struct key_def *k, const struct raw_value *v, bool size_ok,
                        uint64_t *out, struct sbx_err *err)
{
    if (v->toml && v->toml->type == TOML_INTEGER) {
        if (v->toml->integer < 0)
            return sbx_fail(err, EINVAL, "%s must not be negative", k->name);
        *out = (uint64_t)v->toml->integer;
    } else {
        const char *t = v->toml ? (v->toml->type == TOML_STRING ? v->toml->str : NULL) : v->text;
        if (!t || (v->toml && !size_ok))
            return sbx_fail(err, EINVAL, "%s wants %s", k->name,
                            size_ok ? "an integer or a size string like \"256M\"" : "an integer");
        if (size_ok ? parse_size(t, out) < 0
                    : (parse_size(t, out) < 0 || strspn(t, "0123456789") != strlen(t)))
            return sbx_fail(err, EINVAL, "%s: '%s' is not %s", k->name, t,
                            size_ok ? "a size (e.g. 256M, 1G, 4096)" : "a whole number");
    }
    if (*out < k->min || *out > k->max)
        return sbx_fail(err, ERANGE, "%s must be between %llu and %llu", k->name,
                        (unsigned long long)k->min, (unsigned long long)k->max);
    return 0;
}

static int want_string(const struct key_def *k, const struct raw_value *v, const char **out,
                       struct sbx_err *err)
{
    if (v->toml && v->toml->type != TOML_STRING)
        return sbx_fail(err, EINVAL, "%s wants a string", k->name);
    *out = v->toml ? v->toml->str : v->text;
    return 0;
}

static int set_value(const struct key_def *k, void *base, const struct raw_value *v,
                     struct sbx_err *err)
{
    void *field = (char *)base + k->off;
    uint64_t n = 0;
    const char *s = NULL;
    switch (k->type) {
    case KT_STRING:
    case KT_LOG_LEVEL:
        if (want_string(k, v, &s, err) < 0)
            return -1;
        if (k->type == KT_LOG_LEVEL && log_level_from_name(s) < 0)
            return sbx_fail(err, EINVAL,
                            "%s must be one of debug, info, notice, warning, error, critical, "
                            "alert, emergency",
                            k->name);
        free(*(char **)field);
        *(char **)field = xstrdup(s);
        return 0;
    case KT_BOOL:
        if (v->toml) {
            if (v->toml->type != TOML_BOOL)
                return sbx_fail(err, EINVAL, "%s wants true or false", k->name);
            *(bool *)field = v->toml->boolean;
        } else if (!strcmp(v->text, "true") || !strcmp(v->text, "1")) {
            *(bool *)field = true;
        } else if (!strcmp(v->text, "false") || !strcmp(v->text, "0")) {
            *(bool *)field = false;
        } else {
            return sbx_fail(err, EINVAL, "%s wants true or false", k->name);
        }
        return 0;
    case KT_U32:
    case KT_SECONDS:
        if (want_integer(k, v, false, &n, err) < 0)
            return -1;
        *(uint32_t *)field = (uint32_t)(k->type == KT_SECONDS ? n * 1000 : n);
        return 0;
    case KT_SIZE:
        if (want_integer(k, v, true, &n, err) < 0)
            return -1;
        *(uint64_t *)field = n;
        return 0;
    case KT_CPUS: {
        if (want_string(k, v, &s, err) < 0)
            return -1;
        if (parse_cpus(s, (uint32_t)k->min, (uint32_t)k->max, (uint32_t *)field) < 0)
            return sbx_fail(err, EINVAL, "%s wants a CPU count as a string, e.g. \"0.5\"", k->name);
        return 0;
    }
    case KT_NETWORK:
        if (want_string(k, v, &s, err) < 0)
            return -1;
        if (strcmp(s, "none") != 0 && strcmp(s, "packages") != 0)
            return sbx_fail(err, EINVAL, "%s must be \"none\" or \"packages\"", k->name);
        snprintf((char *)field, 16, "%s", s);
        return 0;
    case KT_LIST: {
        struct string_list *l = field;
        string_list_free(l);
        if (v->toml) {
            if (v->toml->type != TOML_STRING_ARRAY)
                return sbx_fail(err, EINVAL, "%s wants an array of strings", k->name);
            for (size_t i = 0; i < v->toml->n_items; i++) {
                l->items = xrealloc(l->items, (l->len + 1) * sizeof(char *));
                l->items[l->len++] = xstrdup(v->toml->items[i]);
            }
            return 0;
        }
        char *copy = xstrdup(v->text), *save = NULL;
        /* "a, b": the spaces around an item are the list's, not the item's. */
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            t += strspn(t, " \t");
            size_t tlen = strlen(t);
            while (tlen && (t[tlen - 1] == ' ' || t[tlen - 1] == '\t'))
                tlen--;
            if (!tlen)
                continue;
            l->items = xrealloc(l->items, (l->len + 1) * sizeof(char *));
            l->items[l->len++] = xstrndup(t, tlen);
        }
        free(copy);
        return 0;
    }
    }
    return -1;
}

static struct sbx_profile *profile_get_or_add(struct sbx_config *cfg, const char *name,
                                              struct sbx_err *err, size_t *idx)
{
    for (size_t i = 0; i < cfg->n_profiles; i++)
        if (strcmp(cfg->profiles[i].name, name) == 0) {
            *idx = i;
            return &cfg->profiles[i];
        }
    size_t len = strlen(name);
    if (len == 0 || len >= SBX_NAME_MAX ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != len) {
        sbx_fail(err, EINVAL, "profile name '%s' must be 1-63 of [a-z0-9_-]", name);
        return NULL;
    }
    if (cfg->n_profiles == SBX_MAX_PROFILES) {
        sbx_fail(err, ENOSPC, "at most %d profiles", SBX_MAX_PROFILES);
        return NULL;
    }
    /* A new profile starts from the standard one's limits. */
    *idx = cfg->n_profiles;
    struct sbx_profile *p = &cfg->profiles[cfg->n_profiles++];
    *p = cfg->profiles[0];
    snprintf(p->name, sizeof(p->name), "%s", name);
    memset(cfg->src_profile[*idx], 0, sizeof(cfg->src_profile[*idx]));
    return p;
}

/* Where key stands in global_keys, or -1. */
static int global_key_index(const char *key)
{
    for (size_t i = 0; i < ARRAY_SIZE(global_keys); i++)
        if (strcmp(global_keys[i].name, key) == 0)
            return (int)i;
    return -1;
}

/* key is "section.name" or "profiles.NAME.field". */
static int apply(struct sbx_config *cfg, const char *key, const struct raw_value *v,
                 enum config_source src, struct sbx_err *err)
{
    if (strncmp(key, "profiles.", 9) == 0) {
        const char *name = key + 9, *dot = strrchr(name, '.');
        if (!dot || dot == name)
            return sbx_fail(err, EINVAL, "unknown configuration key '%s'", key);
        char pname[SBX_NAME_MAX];
        snprintf(pname, sizeof(pname), "%.*s", (int)(dot - name), name);
        for (size_t i = 0; i < ARRAY_SIZE(profile_keys); i++) {
            if (strcmp(profile_keys[i].name, dot + 1) != 0)
                continue;
            size_t idx;
            struct sbx_profile *p = profile_get_or_add(cfg, pname, err, &idx);
            if (!p)
                return -1;
            struct key_def k = profile_keys[i];
            char full[128];
            snprintf(full, sizeof(full), "profiles.%s.%s", pname, k.name);
            k.name = full;
            if (set_value(&k, p, v, err) < 0)
                return -1;
            cfg->src_profile[idx][i] = (unsigned char)src;
            return 0;
        }
        return sbx_fail(err, EINVAL, "unknown configuration key '%s'", key);
    }
    int i = global_key_index(key);
    if (i < 0)
        return sbx_fail(err, EINVAL, "unknown configuration key '%s'", key);
    if (set_value(&global_keys[i], cfg, v, err) < 0)
        return -1;
    cfg->src_global[i] = (unsigned char)src;
    return 0;
}

int config_set(struct sbx_config *cfg, const char *key, const char *value, enum config_source src,
               struct sbx_err *err)
{
    struct raw_value v = {NULL, value};
    return apply(cfg, key, &v, src, err);
}

/* ---- file ---- */

/* A [table] header: [profiles.NAME] alone defines that profile (standard's values, see
 * config_check); [profiles] (valid TOML before its subtables) means nothing; any other table
 * must be a section that keys live in. */
static int on_toml_table(struct sbx_config *cfg, const char *table, struct sbx_err *err)
{
    if (strcmp(table, "profiles") == 0)
        return 0;
    if (strncmp(table, "profiles.", 9) == 0 && !strchr(table + 9, '.')) {
        size_t idx;
        return profile_get_or_add(cfg, table + 9, err, &idx) ? 0 : -1;
    }
    size_t n = strlen(table);
    for (size_t i = 0; i < ARRAY_SIZE(global_keys); i++)
        if (strncmp(global_keys[i].name, table, n) == 0 && global_keys[i].name[n] == '.')
            return 0;
    return sbx_fail(err, EINVAL, "unknown table [%s]", table);
}

static int on_toml_key(void *ud, const char *table, const char *key, const struct toml_value *v,
                       struct sbx_err *err)
{
    if (!key)
        return on_toml_table(ud, table, err);
    /* A quoted "limits.max_sandboxes" is one key of that name, which no table has; read as a
     * path it would slip past the duplicate check. */
    if (strchr(key, '.'))
        return sbx_fail(err, EINVAL, "unknown key \"%s\" (no key name holds a '.')", key);
    char full[320];
    snprintf(full, sizeof(full), "%s%s%s", table, table[0] ? "." : "", key);
    struct raw_value rv = {v, NULL};
    return apply(ud, full, &rv, CONFIG_SRC_FILE, err);
}

int config_load_file(struct sbx_config *cfg, const char *explicit_path, struct sbx_err *err)
{
    const char *path = explicit_path ? explicit_path : "/etc/mcp-sandbox/config.toml";
    char *text = NULL;
    size_t len = 0;
    int r = read_file_max(path, TOML_MAX_INPUT + 1, &text, &len);
    if (r == -ENOENT && !explicit_path)
        return 0; /* no system-wide file: defaults stand */
    if (r < 0)
        return sbx_fail_errno(err, -r, "config file %s", path);
    r = toml_parse(text, len, path, on_toml_key, cfg, err);
    free(text);
    if (r == 0) {
        free(cfg->loaded_from);
        cfg->loaded_from = xstrdup(path);
    }
    return r;
}

/* ---- environment ---- */

/* MCP_SANDBOX_LIMITS_MAX_SANDBOXES -> limits.max_sandboxes: match each key's env spelling. */
static void env_name(const char *key, char *out, size_t n)
{
    size_t o = 0;
    o += (size_t)snprintf(out, n, "MCP_SANDBOX_");
    for (; *key && o + 1 < n; key++)
        out[o++] = *key == '.' || *key == '-' ? '_' : (char)toupper((unsigned char)*key);
    out[o] = '\0';
}

/* The value of name in envp, or NULL. */
static const char *env_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

int config_load_env(struct sbx_config *cfg, char *const *envp, struct sbx_err *err)
{
    extern char **environ;
    if (!envp)
        envp = environ;
    /* The short form and the long one, both set and apart: which one won would hang on the
     * order of the environment, and the server would keep its state somewhere unexpected. */
    const char *short_dir = env_lookup(envp, "MCP_SANDBOX_STATE_DIR");
    const char *long_dir = env_lookup(envp, "MCP_SANDBOX_SERVER_STATE_DIR");
    if (short_dir && long_dir && strcmp(short_dir, long_dir) != 0)
        return sbx_fail(err, EINVAL,
                        "MCP_SANDBOX_STATE_DIR (%s) and MCP_SANDBOX_SERVER_STATE_DIR (%s) are both "
                        "set, to different directories: set one",
                        short_dir, long_dir);
    for (char *const *e = envp; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || strncmp(*e, "MCP_SANDBOX_", 12) != 0)
            continue;
        size_t nlen = (size_t)(eq - *e);
        /* As in a file: a value that is not UTF-8 could not be printed back as TOML. */
        if (utf8_valid_prefix(eq + 1, strlen(eq + 1)) != strlen(eq + 1))
            return sbx_fail(err, EINVAL, "%.*s is not valid UTF-8", (int)nlen, *e);
        char name[160];
        bool matched = false;
        /* The documented short form for the state directory. */
        if (nlen == 21 && !strncmp(*e, "MCP_SANDBOX_STATE_DIR", 21)) {
            if (config_set(cfg, "server.state_dir", eq + 1, CONFIG_SRC_ENV, err) < 0)
                return sbx_err_wrap(err, "MCP_SANDBOX_STATE_DIR");
            continue;
        }
        for (size_t i = 0; i < ARRAY_SIZE(global_keys) && !matched; i++) {
            env_name(global_keys[i].name, name, sizeof(name));
            if (strlen(name) == nlen && !strncmp(name, *e, nlen)) {
                matched = true;
                if (config_set(cfg, global_keys[i].name, eq + 1, CONFIG_SRC_ENV, err) < 0)
                    return sbx_err_wrap(err, "%.*s", (int)nlen, *e);
            }
        }
        /* MCP_SANDBOX_PROFILES_<NAME>_<FIELD>: the field is matched from the end, the longest
         * that fits (MAX_TIMEOUT_S, not TIMEOUT_S of a profile "<name>_max"). */
        if (!matched && nlen > 21 && !strncmp(*e, "MCP_SANDBOX_PROFILES_", 21)) {
            size_t best = ARRAY_SIZE(profile_keys), best_len = 0;
            for (size_t i = 0; i < ARRAY_SIZE(profile_keys); i++) {
                env_name(profile_keys[i].name, name, sizeof(name));
                const char *field = name + 12; /* "MEMORY" */
                size_t flen = strlen(field);
                if (flen > best_len && nlen > 21 + flen + 1 &&
                    !strncmp(*e + nlen - flen, field, flen) && (*e)[nlen - flen - 1] == '_') {
                    best = i;
                    best_len = flen;
                }
            }
            char key[160], pname[SBX_NAME_MAX];
            size_t plen = nlen - 21 - best_len - 1;
            if (best < ARRAY_SIZE(profile_keys) && plen < sizeof(pname)) {
                for (size_t c = 0; c < plen; c++)
                    pname[c] = (char)tolower((unsigned char)(*e)[21 + c]);
                pname[plen] = '\0';
                snprintf(key, sizeof(key), "profiles.%s.%s", pname, profile_keys[best].name);
                matched = true;
                if (config_set(cfg, key, eq + 1, CONFIG_SRC_ENV, err) < 0)
                    return sbx_err_wrap(err, "%.*s", (int)nlen, *e);
            }
        }
        if (!matched)
            return sbx_fail(err, EINVAL, "%.*s is not a configuration variable", (int)nlen, *e);
    }
    return 0;
}

static size_t profile_field_size(enum key_type t)
{
    switch (t) {
    case KT_SIZE:
        return sizeof(uint64_t);
    case KT_BOOL:
        return sizeof(bool);
    case KT_NETWORK:
        return sizeof(((struct sbx_profile *)0)->network);
    default: /* KT_U32, KT_CPUS, KT_SECONDS */
        return sizeof(uint32_t);
    }
}

enum config_source config_source_of(const struct sbx_config *cfg, const char *key)
{
    int i = global_key_index(key);
    return i < 0 ? CONFIG_SRC_DEFAULT : (enum config_source)cfg->src_global[i];
}

int config_check(struct sbx_config *cfg, struct sbx_err *err)
{
    /* A profile the configuration adds starts from standard as it finally stands, whatever the
     * order of the tables (standard's own table may come after). The first two are built in. */
    for (size_t p = 2; p < cfg->n_profiles; p++)
        for (size_t k = 0; k < ARRAY_SIZE(profile_keys); k++)
            if (cfg->src_profile[p][k] == CONFIG_SRC_DEFAULT)
                memcpy((char *)&cfg->profiles[p] + profile_keys[k].off,
                       (char *)&cfg->profiles[0] + profile_keys[k].off,
                       profile_field_size(profile_keys[k].type));
    /* A profile's own default must be within its maximum: a contradiction is refused rather
     * than one of the two rewritten. */
    for (size_t p = 0; p < cfg->n_profiles; p++) {
        const struct sbx_profile *pr = &cfg->profiles[p];
        if (pr->max_timeout_ms < pr->timeout_ms)
            return sbx_fail(err, EINVAL,
                            "profiles.%s.timeout_s = %u is more than its max_timeout_s = %u "
                            "(a call's default cannot exceed what a call may ask for): raise "
                            "max_timeout_s too, or lower timeout_s",
                            pr->name, pr->timeout_ms / 1000, pr->max_timeout_ms / 1000);
    }
    if ((uint64_t)cfg->host_uid + cfg->host_uid_count - 1 > 4294967294u)
        return sbx_fail(err, EINVAL,
                        "isolation.host_uid = %u with host_uid_count = %u runs past the last "
                        "uid, 4294967294",
                        cfg->host_uid, cfg->host_uid_count);
    /* 65535 is (uint16_t)-1, which 16-bit interfaces and some programs read as no uid at all. */
    if (cfg->host_uid <= 65535 && (uint64_t)cfg->host_uid + cfg->host_uid_count > 65535)
        return sbx_fail(err, EINVAL,
                        "isolation.host_uid = %u with host_uid_count = %u includes 65535, the "
                        "16-bit -1: start the range above it, or share one uid with "
                        "host_uid_count = 1",
                        cfg->host_uid, cfg->host_uid_count);
    if (!config_profile(cfg, cfg->default_profile))
        return sbx_fail(err, EINVAL, "isolation.default_profile = \"%s\" names no profile",
                        cfg->default_profile);
    if (strcmp(cfg->run_pool, "auto") != 0 && strcmp(cfg->run_pool, "off") != 0 &&
        strcmp(cfg->run_pool, "required") != 0)
        return sbx_fail(err, EINVAL, "run.pool = \"%s\" must be \"auto\", \"off\" or \"required\"",
                        cfg->run_pool);
    return 0;
}

int config_load_all(struct sbx_config *cfg, const char *explicit_path, struct sbx_err *err)
{
    if (config_load_file(cfg, explicit_path, err) < 0)
        return -1;
    return config_load_env(cfg, NULL, err);
}

/* ---- printing ---- */

static void print_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void print_value(FILE *out, const struct key_def *k, const void *base)
{
    const void *field = (const char *)base + k->off;
    switch (k->type) {
    case KT_STRING:
    case KT_LOG_LEVEL:
        print_string(out, *(char *const *)field ? *(char *const *)field : "");
        break;
    case KT_BOOL:
        fputs(*(const bool *)field ? "true" : "false", out);
        break;
    case KT_U32:
        fprintf(out, "%u", *(const uint32_t *)field);
        break;
    case KT_SECONDS:
        fprintf(out, "%u", *(const uint32_t *)field / 1000);
        break;
    case KT_SIZE:
        fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case KT_CPUS: {
        uint32_t m = *(const uint32_t *)field;
        fprintf(out, "\"%u.%03u\"", m / 1000, m % 1000);
        break;
    }
    case KT_NETWORK:
        print_string(out, (const char *)field);
        break;
    case KT_LIST: {
        const struct string_list *l = field;
        fputc('[', out);
        for (size_t i = 0; i < l->len; i++) {
            if (i)
                fputs(", ", out);
            print_string(out, l->items[i]);
        }
        fputc(']', out);
        break;
    }
    }
}

static void print_source(FILE *out, const struct sbx_config *cfg, unsigned src, const char *key)
{
    char env[160];
    fprintf(out, "  # from: %s", source_names[src < 4 ? src : 0]);
    if (src == CONFIG_SRC_FILE && cfg->loaded_from)
        fprintf(out, " (%s)", cfg->loaded_from);
    if (src == CONFIG_SRC_ENV) {
        env_name(key, env, sizeof(env));
        fprintf(out, " (%s)", env);
    }
    fputc('\n', out);
}

void config_print(const struct sbx_config *cfg, FILE *out)
{
    fprintf(out, "# effective configuration of mcp-sandbox %s\n", SBX_VERSION);
    const char *section = "";
    size_t slen = 0;
    for (size_t i = 0; i < ARRAY_SIZE(global_keys); i++) {
        const char *name = global_keys[i].name, *dot = strchr(name, '.');
        if ((size_t)(dot - name) != slen || strncmp(name, section, slen) != 0) {
            section = name;
            slen = (size_t)(dot - name);
            fprintf(out, "\n[%.*s]\n", (int)slen, name);
        }
        fprintf(out, "%s = ", dot + 1);
        print_value(out, &global_keys[i], cfg);
        print_source(out, cfg, cfg->src_global[i], name);
    }
    for (size_t p = 0; p < cfg->n_profiles; p++) {
        fprintf(out, "\n[profiles.%s]\n", cfg->profiles[p].name);
        for (size_t i = 0; i < ARRAY_SIZE(profile_keys); i++) {
            char key[160];
            snprintf(key, sizeof(key), "profiles.%s.%s", cfg->profiles[p].name,
                     profile_keys[i].name);
            fprintf(out, "%s = ", profile_keys[i].name);
            print_value(out, &profile_keys[i], &cfg->profiles[p]);
            if (p >= 2 && cfg->src_profile[p][i] == CONFIG_SRC_DEFAULT)
                fputs("  # from: profiles.standard\n", out); /* see config_check */
            else
                print_source(out, cfg, cfg->src_profile[p][i], key);
        }
    }
}

int config_state_dir(const struct sbx_config *cfg, char **out, struct sbx_err *err)
{
    if (cfg->state_dir && cfg->state_dir[0]) {
        *out = xstrdup(cfg->state_dir);
        return 0;
    }
    const char *xdg = getenv("XDG_STATE_HOME");
    if (xdg && xdg[0] == '/') {
        *out = xasprintf("%s/mcp-sandbox", xdg);
        return 0;
    }
    if (geteuid() == 0) {
        *out = xstrdup("/var/lib/mcp-sandbox");
        return 0;
    }
    const char *home = getenv("HOME");
    if (!home || home[0] != '/')
        return sbx_fail(err, ENOENT,
                        "no state directory: set --state-dir or MCP_SANDBOX_STATE_DIR");
    *out = xasprintf("%s/.local/state/mcp-sandbox", home);
    return 0;
}
