#include "config.h"

#include "util.h"

#include <string.h>

static void profile_defaults(struct sbx_profile *p, const char *name, uint64_t mem_mib,
                             uint32_t millicpus, uint32_t timeout_s, uint32_t pids, uint64_t ws_mib,
                             bool guard)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->memory_bytes = mem_mib << 20;
    p->cpu_millicpus = millicpus;
    p->timeout_ms = timeout_s * 1000;
    p->pids = pids;
    p->workspace_bytes = ws_mib << 20;
    p->workspace_inodes = 16384;
    p->tmp_bytes = 64ull << 20;
    p->fsize_bytes = ws_mib << 20;
    p->nofile = 256;
    p->stack_bytes = 8ull << 20;
    p->static_guard = guard;
    snprintf(p->network, sizeof(p->network), "none");
    p->pool_size = 0;
}

void config_init_defaults(struct sbx_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_message_bytes = 16ull << 20;
    cfg->page_size = 50;
    cfg->log_level = xstrdup("info");
    cfg->sandbox_uid = 65534;
    cfg->host_uid = 65534;
    cfg->default_profile = xstrdup("standard");
    cfg->output_cap_bytes = 1ull << 20;
    cfg->max_sandboxes = 64;
    cfg->max_sandboxes_per_owner = 16;
    cfg->idle_ttl_s = 1800;
    cfg->max_lifetime_s = 86400;
    cfg->max_queue_depth = 32;
    cfg->only_binary = true;
    cfg->max_install_seconds = 120;
    cfg->http_listen = xstrdup("127.0.0.1:8080");
    cfg->http_max_body_bytes = 16ull << 20;
    cfg->http_max_connections = 1024;
    cfg->http_max_sessions = 256;
    cfg->http_session_idle_s = 3600;
    profile_defaults(&cfg->profiles[0], "standard", 256, 500, 10, 64, 512, false);
    profile_defaults(&cfg->profiles[1], "tight", 128, 250, 5, 32, 64, true);
    cfg->n_profiles = 2;
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
    free(cfg->state_dir);
    free(cfg->log_file);
    free(cfg->log_level);
    free(cfg->default_profile);
    free(cfg->index_url);
    free(cfg->http_listen);
    free(cfg->auth_tokens_file);
    free(cfg->authorization_server);
    free(cfg->loaded_from);
    string_list_free(&cfg->upload_roots);
    string_list_free(&cfg->extra_index_urls);
    string_list_free(&cfg->allowed_packages);
    string_list_free(&cfg->allowed_hosts);
    string_list_free(&cfg->allowed_origins);
    string_list_free(&cfg->cors_origins);
    string_list_free(&cfg->auth_token_hashes);
    memset(cfg, 0, sizeof(*cfg));
}

const struct sbx_profile *config_profile(const struct sbx_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_profiles; i++)
        if (strcmp(cfg->profiles[i].name, name) == 0)
            return &cfg->profiles[i];
    return NULL;
}

/* Placeholder until the TOML loader lands (owned by the config work). */
int config_load_all(struct sbx_config *cfg, const char *explicit_path, struct sbx_err *err)
{
    (void)cfg;
    (void)explicit_path;
    (void)err;
    return 0;
}

int config_set(struct sbx_config *cfg, const char *key, const char *value, enum config_source src,
               struct sbx_err *err)
{
    (void)src;
    if (strcmp(key, "log.level") == 0) {
        free(cfg->log_level);
        cfg->log_level = xstrdup(value);
        return 0;
    }
    return sbx_fail(err, EINVAL, "unknown configuration key '%s'", key);
}
