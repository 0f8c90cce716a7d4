/* A small, strict parser for the TOML subset the configuration uses: [table] and [a.b]
 * headers, key = value with basic or literal strings, integers, booleans and arrays of
 * strings, and comments. Anything else (floats, dates, inline tables, dotted keys, duplicate
 * keys, redefined tables, invalid UTF-8, control characters) is an error with line and column. */
#ifndef SBX_TOML_H
#define SBX_TOML_H

#include "err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum toml_type { TOML_STRING, TOML_INTEGER, TOML_BOOL, TOML_STRING_ARRAY };

struct toml_value {
    enum toml_type type;
    const char *str; /* TOML_STRING */
    int64_t integer; /* TOML_INTEGER */
    bool boolean;    /* TOML_BOOL */
    char **items;    /* TOML_STRING_ARRAY */
    size_t n_items;
};

/* Called once per key; table is "" at the top level, "a.b" under [a.b]. Called also once per
 * [table] header, with key and v NULL. Return < 0 (with err filled) to stop: the parser
 * prefixes "FILE:LINE:COL: ". */
typedef int (*toml_key_fn)(void *ud, const char *table, const char *key, const struct toml_value *v,
                           struct sbx_err *err);

#define TOML_MAX_INPUT (1u << 20)

int toml_parse(const char *text, size_t len, const char *filename, toml_key_fn fn, void *ud,
               struct sbx_err *err);

#endif
