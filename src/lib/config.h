/* Effective configuration: built-in defaults, then the config file, then MCP_SANDBOX_*
 * environment variables, then command-line flags. Each value remembers where it came
 * from so that `mcp-sandbox config --print` can say so. */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include "err.h"

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#define SBX_MAX_PROFILES 16
#define SBX_NAME_MAX     64

enum config_source {
    CONFIG_SRC_DEFAULT = 0,
    CONFIG_SRC_FILE,
    CONFIG_SRC_ENV,
    CONFIG_SRC_FLAG,
};

struct string_list {
    char **items;
    size_t len;
};

/* A resource profile: the limits a sandbox gets. Names are data, not code. */
struct sbx_profile {
    char name[SBX_NAME_MAX];
    uint64_t memory_bytes;     /* cgroup memory.max (or RLIMIT_AS fallback) */
    uint32_t cpu_millicpus;    /* 500 = half a CPU (cpu.max / cfs quota) */
    uint32_t timeout_ms;       /* wall-clock limit of one execution */
    uint32_t max_timeout_ms;   /* the longest a call's timeout_s may ask for */
    uint32_t pids;             /* pids.max (or RLIMIT_NPROC fallback) */
    uint64_t workspace_bytes;  /* tmpfs size of /workspace */
    uint64_t workspace_inodes; /* tmpfs nr_inodes of /workspace */
    uint64_t tmp_bytes;        /* tmpfs size of /tmp */
    uint64_t fsize_bytes;      /* RLIMIT_FSIZE */
    uint32_t nofile;           /* RLIMIT_NOFILE */
    uint64_t stack_bytes;      /* RLIMIT_STACK */
    bool static_guard;         /* AST guard in the Python driver before running code */
    char network[16];          /* "none" or "packages" */
    uint32_t pool_size;        /* warm sandboxes kept ready */
};

struct sbx_config {
    /* [server] */
    char *state_dir;                 /* NULL: chosen by the state-dir rules */
    uint64_t max_message_bytes;      /* JSON-RPC message cap, 16 MiB */
    uint32_t page_size;              /* items per page in list results */
    uint32_t history_retention_days; /* a closed sandbox's history is kept this long */
    uint64_t history_max_bytes;      /* past this, closed sandboxes' histories go, oldest first */

    /* [log] */
    char *log_file; /* NULL or "-" = stderr */
    char *log_level;

    /* [isolation] */
    bool allow_degraded;
    uint32_t sandbox_uid;      /* uid (and gid) inside the sandbox, 65534 */
    uint32_t host_uid;         /* root's sandboxes map to host uids from this one, */
    uint32_t host_uid_count;   /* one each, of this many (1: all share host_uid) */
    char *default_profile;     /* "standard" */
    uint64_t output_cap_bytes; /* captured output per stream, head+tail kept */

    /* [run]: `mcp-sandbox run` and the run pool that serves it (`mcp-sandbox pool`) */
    char *run_pool;        /* "auto": a pool that answers serves; "off"; "required" */
    char *run_pool_socket; /* empty: run-pool.sock in the state directory */

    /* [limits] */
    uint32_t max_sandboxes;
    uint32_t max_sandboxes_per_owner;
    uint32_t idle_ttl_s;
    uint32_t max_lifetime_s;
    uint32_t max_queue_depth;

    /* [files] */
    struct string_list upload_roots;

    /* [guard]: the static AST guard of profiles with static_guard */
    struct string_list guard_modules;
    struct string_list guard_calls;
    struct string_list guard_attributes;

    /* [packages]: install_packages and the egress proxy of `network: packages` sandboxes */
    char *index_url;
    struct string_list extra_index_urls;
    bool only_binary;
    struct string_list allowed_packages;
    uint32_t max_install_seconds;
    struct string_list proxy_allow;   /* "host[:port]" reachable besides the index hosts */
    struct string_list private_hosts; /* allowed hosts that may resolve to private addresses */
    uint32_t proxy_max_connections;   /* per sandbox, open at once */
    uint64_t proxy_max_bytes;         /* per sandbox, relayed over its life */
    uint32_t proxy_idle_timeout_s;
    uint32_t proxy_connect_timeout_s; /* a lookup, and then the dial of all its addresses */

    /* [http] */
    char *http_listen; /* "127.0.0.1:8080" */
    char *public_url;  /* where clients reach the server, behind a proxy: "https://name" */
    struct string_list allowed_hosts;
    struct string_list allowed_origins;
    struct string_list cors_origins;
    char *auth_tokens_file;
    struct string_list auth_token_hashes; /* "sha256:<hex>" */
    char *authorization_server;
    /* JWT access tokens, checked against the keys of a JWKS file or URL (transport/http_jwks.h) */
    char *jwt_jwks_file;
    char *jwt_jwks_url;
    char *jwt_jwks_ca_file; /* PEM CAs for an https jwt_jwks_url; empty: the system's */
    char *jwt_issuer;
    char *jwt_audience; /* empty: the resource URL, "http://<Host>/mcp" */
    char *jwt_principal_claim;
    struct string_list jwt_algorithms;
    uint32_t jwt_leeway_s;
    uint32_t jwt_jwks_reload_s;      /* 0: the JWKS file is read once, at startup */
    uint32_t jwt_jwks_url_refresh_s; /* 0: the URL is fetched again only for an unknown kid */
    uint64_t http_max_body_bytes;
    uint64_t http_max_body_bytes_total; /* the request bodies held at once, all connections */
    uint32_t http_max_connections;
    uint32_t http_max_sessions;
    uint32_t http_max_sessions_per_principal; /* with tokens: sessions one principal may hold */
    /* with tokens: the connections one principal may hold open (a waiting call, an event stream,
     * a REST call) */
    uint32_t http_max_open_requests_per_principal;
    uint32_t http_session_idle_s;
    /* at a session limit: a session unused this long makes room for a new one */
    uint32_t http_session_evict_idle_s;
    uint32_t http_request_timeout_s; /* for a request's headers; its body gets 4 times that */
    uint32_t http_keepalive_s;       /* a comment on an SSE stream with nothing to send */

    /* [profiles.NAME] */
    struct sbx_profile profiles[SBX_MAX_PROFILES];
    size_t n_profiles;

    /* Where the file came from, NULL if none was read. */
    char *loaded_from;

    /* Provenance of each value (enum config_source), indexed like the key tables in config.c. */
    unsigned char src_global[64];
    unsigned char src_profile[SBX_MAX_PROFILES][16];
};

/* Built-in defaults (standard and tight profiles included). */
void config_init_defaults(struct sbx_config *cfg);
void config_free(struct sbx_config *cfg);

/* Apply a config file. explicit_path NULL: /etc/mcp-sandbox/config.toml if it exists.
 * Errors carry "FILE:LINE:COL: message". */
int config_load_file(struct sbx_config *cfg, const char *explicit_path, struct sbx_err *err);
/* Apply MCP_SANDBOX_* variables from envp (environ if NULL). */
int config_load_env(struct sbx_config *cfg, char *const *envp, struct sbx_err *err);
/* Set one dotted key ("limits.max_sandboxes", "profiles.tight.memory") from a flag. */
int config_set(struct sbx_config *cfg, const char *key, const char *value, enum config_source src,
               struct sbx_err *err);
/* Where a global key's value came from (CONFIG_SRC_DEFAULT for an unknown key). */
enum config_source config_source_of(const struct sbx_config *cfg, const char *key);
/* Load everything in order (defaults, file, env). Flags are applied afterwards by callers. */
int config_load_all(struct sbx_config *cfg, const char *explicit_path, struct sbx_err *err);
/* Once every source is in (after the flags): added profiles take what they did not set from
 * standard as it finally stands; a timeout_s over its max_timeout_s is refused; the default
 * profile must exist. */
int config_check(struct sbx_config *cfg, struct sbx_err *err);

const struct sbx_profile *config_profile(const struct sbx_config *cfg, const char *name);
/* Print effective configuration as TOML, with "# from: default|file|env|flag" per value. The
 * output parses back into the same configuration. */
void config_print(const struct sbx_config *cfg, FILE *out);
/* The state directory: server.state_dir (--state-dir, then MCP_SANDBOX_STATE_DIR), else
 * $XDG_STATE_HOME/mcp-sandbox, else /var/lib/mcp-sandbox as root or
 * ~/.local/state/mcp-sandbox otherwise. Returns a malloc'd path. */
int config_state_dir(const struct sbx_config *cfg, char **out, struct sbx_err *err);

#endif
