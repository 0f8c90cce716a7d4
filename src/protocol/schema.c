#include "schema.h"

#include <math.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *schema_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

/* Whether schema s says its value is of type want (alone). */
static bool type_is(const json_t *s, const char *want)
{
    const json_t *t = json_object_get(s, "type");
    return json_is_string(t) && strcmp(json_string_value(t), want) == 0;
}

static bool real_is_whole(const json_t *v)
{
    return json_is_real(v) && floor(json_real_value(v)) == json_real_value(v);
}

/* A whole real that a json_int_t holds: 1e19 is whole, but no cast makes it an integer. */
static bool real_is_integer(const json_t *v)
{
    double d = json_real_value(v);
    return real_is_whole(v) && d >= -0x1p63 && d < 0x1p63;
}

static bool type_matches(const char *want, const json_t *v)
{
    if (strcmp(want, schema_type_name(v)) == 0)
        return true;
    /* An integer is a number too; a whole real (5.0) passes as an integer. */
    if (json_is_integer(v))
        return strcmp(want, "number") == 0;
    return strcmp(want, "integer") == 0 && real_is_integer(v);
}

/* Where the validator is in the value: a chain of keys and indexes back to the root, spelled
 * out only when something fails (formatting it at every step cost more than the checks). */
struct path {
    const struct path *up;
    const char *key; /* NULL: an array element, at index */
    size_t index;
};

/* Writes "a.b[2].c" into out (cut at len); returns the length it wanted. */
static size_t path_format(const struct path *p, char *out, size_t len)
{
    if (!p) {
        out[0] = '\0';
        return 0;
    }
    size_t n = path_format(p->up, out, len);
    if (n >= len - 1)
        return n;
    int w = p->key ? snprintf(out + n, len - n, "%s%s", n ? "." : "", p->key)
                   : snprintf(out + n, len - n, "[%zu]", p->index);
    return w < 0 ? n : n + (size_t)w;
}

static int fail(char *msg, size_t len, const struct path *path, const char *fmt, const char *a,
                const char *b)
{
    char detail[256], where[256];
    snprintf(detail, sizeof(detail), fmt, a, b);
    path_format(path, where, sizeof(where));
    if (where[0])
        snprintf(msg, len, "argument '%s': %s", where, detail);
    else
        snprintf(msg, len, "arguments: %s", detail);
    return -1;
}

/* The keywords a schema node uses. One walk over its keys finds them: a node names one to three
 * of the dozen keywords, and a lookup of each absent one cost more than the checks (a tool's
 * result is checked against its outputSchema on every call). */
struct keywords {
    const json_t *type, *enum_, *const_, *minimum, *maximum, *min_length, *max_length, *min_items,
        *max_items, *items, *properties, *required, *additional;
};

/* The keyword slot for k, or NULL for a key the validator ignores ("description", say). */
static const json_t **keyword_slot(struct keywords *kw, const char *k)
{
    static const struct {
        const char *name;
        size_t offset;
    } names[] = {
        {"type", offsetof(struct keywords, type)},
        {"enum", offsetof(struct keywords, enum_)},
        {"const", offsetof(struct keywords, const_)},
        {"minimum", offsetof(struct keywords, minimum)},
        {"maximum", offsetof(struct keywords, maximum)},
        {"minLength", offsetof(struct keywords, min_length)},
        {"maxLength", offsetof(struct keywords, max_length)},
        {"minItems", offsetof(struct keywords, min_items)},
        {"maxItems", offsetof(struct keywords, max_items)},
        {"items", offsetof(struct keywords, items)},
        {"properties", offsetof(struct keywords, properties)},
        {"required", offsetof(struct keywords, required)},
        {"additionalProperties", offsetof(struct keywords, additional)},
    };
    /* The first letter rules out most names without a compare. */
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].name[0] == k[0] && strcmp(k, names[i].name) == 0)
            return (const json_t **)((char *)kw + names[i].offset);
    return NULL;
}

static void find_keywords(const json_t *s, struct keywords *kw)
{
    memset(kw, 0, sizeof(*kw));
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)s, k, val)
    {
        const json_t **slot = keyword_slot(kw, k);
        if (slot)
            *slot = val;
    }
}

static int validate(const json_t *s, const json_t *v, const struct path *path, char *msg,
                    size_t len, int depth)
{
    if (depth > 32)
        return fail(msg, len, path, "%s%s", "schema nested too deeply", "");
    if (!json_is_object(s))
        return 0;
    struct keywords kw;
    find_keywords(s, &kw);
    const json_t *t = kw.type;
    if (json_is_string(t) && !type_matches(json_string_value(t), v)) {
        if (strcmp(json_string_value(t), "integer") == 0 && real_is_whole(v))
            return fail(msg, len, path, "is a whole number too large for an integer%s%s", "", "");
        return fail(msg, len, path, "expected %s, got %s", json_string_value(t),
                    schema_type_name(v));
    }
    if (json_is_array(t)) {
        bool any = false;
        size_t i;
        const json_t *e;
        json_array_foreach(t, i, e) any |=
            json_is_string(e) && type_matches(json_string_value(e), v);
        if (!any)
            return fail(msg, len, path, "has the wrong type (%s)%s", schema_type_name(v), "");
    }
    const json_t *en = kw.enum_;
    if (json_is_array(en)) {
        bool found = false;
        size_t i;
        const json_t *e;
        json_array_foreach(en, i, e) found |= json_equal(e, v);
        if (!found) {
            char *opts = json_dumps(en, JSON_COMPACT);
            fail(msg, len, path, "expected one of %s%s", opts ? opts : "the allowed values", "");
            free(opts);
            return -1;
        }
    }
    if (kw.const_ && !json_equal(kw.const_, v))
        return fail(msg, len, path, "must equal the constant value%s%s", "", "");
    if (json_is_number(v)) {
        double x = json_number_value(v);
        const json_t *mn = kw.minimum, *mx = kw.maximum;
        char lim[64];
        if (json_is_number(mn) && x < json_number_value(mn)) {
            snprintf(lim, sizeof(lim), "%g", json_number_value(mn));
            return fail(msg, len, path, "must be at least %s%s", lim, "");
        }
        if (json_is_number(mx) && x > json_number_value(mx)) {
            snprintf(lim, sizeof(lim), "%g", json_number_value(mx));
            return fail(msg, len, path, "must be at most %s%s", lim, "");
        }
    }
    if (json_is_string(v) && (kw.min_length || kw.max_length)) {
        /* Lengths count characters (code points), as JSON Schema does, not bytes. */
        size_t n = 0;
        const char *str = json_string_value(v);
        for (size_t b = 0, bytes = json_string_length(v); b < bytes; b++)
            n += ((unsigned char)str[b] & 0xC0) != 0x80;
        const json_t *mn = kw.min_length, *mx = kw.max_length;
        char lim[64];
        if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn)) {
            snprintf(lim, sizeof(lim), "%lld", (long long)json_integer_value(mn));
            return fail(msg, len, path, "must be at least %s characters%s", lim, "");
        }
        if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx)) {
            snprintf(lim, sizeof(lim), "%lld", (long long)json_integer_value(mx));
            return fail(msg, len, path, "must be at most %s characters%s", lim, "");
        }
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        const json_t *mn = kw.min_items, *mx = kw.max_items;
        if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn))
            return fail(msg, len, path, "has too few items%s%s", "", "");
        if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx))
            return fail(msg, len, path, "has too many items%s%s", "", "");
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e)
        {
            struct path sub = {.up = path, .index = i};
            if (validate(kw.items, e, &sub, msg, len, depth + 1) < 0)
                return -1;
        }
    }
    if (json_is_object(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(kw.required, i, e)
        {
            if (json_is_string(e) && !json_object_get(v, json_string_value(e))) {
                struct path sub = {.up = path, .key = json_string_value(e)};
                return fail(msg, len, &sub, "is required%s%s", "", "");
            }
        }
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)v, k, val)
        {
            struct path sub = {.up = path, .key = k};
            const json_t *ps = json_object_get(kw.properties, k);
            if (!ps && json_is_false(kw.additional))
                return fail(msg, len, &sub, "is not a known argument%s%s", "", "");
            if (ps && validate(ps, val, &sub, msg, len, depth + 1) < 0)
                return -1;
        }
    }
    return 0;
}

int schema_validate(const json_t *schema, const json_t *value, char *msg, size_t msg_len)
{
    msg[0] = '\0';
    return validate(schema, value, NULL, msg, msg_len, 0);
}

void schema_whole_numbers(const json_t *s, json_t *v, int depth)
{
    if (!json_is_object(s) || depth > 32)
        return;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            const json_t *items = json_object_get(s, "items");
            if (json_is_real(e) && type_is(items, "integer"))
                json_array_set_new(v, i, json_integer((json_int_t)json_real_value(e)));
            else
                schema_whole_numbers(items, e, depth + 1);
        }
    } else if (json_is_object(v)) {
        const json_t *props = json_object_get(s, "properties");
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val)
        {
            const json_t *ps = json_object_get(props, k);
            if (json_is_real(val) && type_is(ps, "integer"))
                json_object_set_new(v, k, json_integer((json_int_t)json_real_value(val)));
            else
                schema_whole_numbers(ps, val, depth + 1);
        }
    }
}
