/* libFuzzer target: arbitrary bytes as a config file, parsed and applied to fresh defaults. */
#include "config.h"
#include "toml.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int apply_key(void *ud, const char *table, const char *key, const struct toml_value *v,
                     struct sbx_err *err)
{
    if (!key)
        return 0; /* a [table] header */
    char full[512];
    snprintf(full, sizeof(full), "%s%s%s", table, table[0] ? "." : "", key);
    /* Exercise the typed setters through the text path too. */
    return v->type == TOML_STRING ? config_set(ud, full, v->str, CONFIG_SRC_FILE, err) : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sbx_config cfg;
    struct sbx_err err;
    config_init_defaults(&cfg);
    toml_parse((const char *)data, size, "fuzz", apply_key, &cfg, &err);
    config_free(&cfg);
    return 0;
}
