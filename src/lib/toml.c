#include "toml.h"

#include "util.h"

#include <string.h>

struct parser {
    const char *s, *end, *line_start;
    int line;
    const char *file;
    char table[256];
    char **seen; /* "table\x1fkey" and "[table" entries, to refuse duplicates */
    size_t n_seen;
    struct sbx_err *err;
};

static int perr(struct parser *p, const char *at, const char *fmt, const char *arg)
{
    char msg[256];
    snprintf(msg, sizeof(msg), fmt, arg ? arg : "");
    return sbx_fail(p->err, EINVAL, "%s:%d:%d: %s", p->file, p->line, (int)(at - p->line_start) + 1,
                    msg);
}

/* FILE:LINE:COLUMN of byte at in text, as the parser's own errors say it. */
static int fail_at(struct sbx_err *err, const char *file, const char *text, size_t at,
                   const char *what)
{
    int line = 1;
    size_t col_start = 0;
    for (size_t i = 0; i < at; i++)
        if (text[i] == '\n')
            line++, col_start = i + 1;
    return sbx_fail(err, EINVAL, "%s:%d:%zu: %s", file, line, at - col_start + 1, what);
}

static void skip_ws(struct parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t'))
        p->s++;
}

/* A comment up to its line break. TOML 1.0 allows no control character but tab in one: a
 * lone CR, which editors and terminals show as a line break, would hide what follows it. */
static int skip_comment(struct parser *p)
{
    if (p->s >= p->end || *p->s != '#')
        return 0;
    for (; p->s < p->end && *p->s != '\n'; p->s++) {
        unsigned char c = (unsigned char)*p->s;
        if (c == '\r' && p->s + 1 < p->end && p->s[1] == '\n')
            break;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return perr(p, p->s, "control character in a comment%s", NULL);
    }
    return 0;
}

/* Whitespace, newlines and comments (inside arrays). */
static int skip_ws_nl(struct parser *p)
{
    for (;;) {
        skip_ws(p);
        if (skip_comment(p) < 0)
            return -1;
        if (p->s < p->end &&
            (*p->s == '\n' || (*p->s == '\r' && p->s + 1 < p->end && p->s[1] == '\n'))) {
            p->s += *p->s == '\r' ? 2 : 1;
            p->line++;
            p->line_start = p->s;
            continue;
        }
        return 0;
    }
}

/* After a value or header: optional comment, then end of line or input. */
static int end_of_line(struct parser *p)
{
    skip_ws(p);
    if (skip_comment(p) < 0)
        return -1;
    if (p->s + 1 < p->end && p->s[0] == '\r' && p->s[1] == '\n')
        p->s++;
    if (p->s < p->end && *p->s != '\n')
        return perr(p, p->s, "unexpected text after the value%s", NULL);
    return 0;
}

static void put_utf8(char *out, size_t *o, unsigned cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xc0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xe0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*o)++] = (char)(0xf0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (cp & 0x3f));
    }
}

/* A basic "..." or literal '...' string on one line; returns a malloc'd copy. */
static char *parse_string(struct parser *p)
{
    char q = *p->s;
    const char *start = p->s++;
    if (p->s + 1 < p->end && p->s[0] == q && p->s[1] == q) {
        perr(p, start, "multi-line strings are not supported%s", NULL);
        return NULL;
    }
    char *out = xmalloc((size_t)(p->end - p->s) + 1);
    size_t o = 0;
    while (p->s < p->end && *p->s != q) {
        unsigned char c = (unsigned char)*p->s;
        if (c == '\n' || (c < 0x20 && c != '\t') || c == 0x7f) {
            perr(p, p->s, "control character or line break in a string%s", NULL);
            free(out);
            return NULL;
        }
        if (q == '"' && c == '\\') {
            const char *esc = p->s++;
            if (p->s >= p->end)
                break;
            char e = *p->s++;
            static const char from[] = "\"\\bfnrt", to[] = "\"\\\b\f\n\r\t";
            const char *k = e ? strchr(from, e) : NULL;
            if (k) {
                out[o++] = to[k - from];
                continue;
            }
            if (e == 'u' || e == 'U') {
                int nd = e == 'u' ? 4 : 8;
                unsigned cp = 0;
                for (int i = 0; i < nd; i++, p->s++) {
                    char h = p->s < p->end ? *p->s : 0;
                    int v = (h >= '0' && h <= '9')   ? h - '0'
                            : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                            : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                     : -1;
                    if (v < 0) {
                        perr(p, esc, "bad \\u escape%s", NULL);
                        free(out);
                        return NULL;
                    }
                    cp = cp * 16 + (unsigned)v;
                }
                if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
                    perr(p, esc, "escape is not a Unicode scalar value (or is NUL)%s", NULL);
                    free(out);
                    return NULL;
                }
                put_utf8(out, &o, cp);
                continue;
            }
            perr(p, esc, "unknown escape in a string%s", NULL);
            free(out);
            return NULL;
        }
        out[o++] = (char)c;
        p->s++;
    }
    if (p->s >= p->end) {
        perr(p, start, "unterminated string%s", NULL);
        free(out);
        return NULL;
    }
    p->s++;
    out[o] = '\0';
    return out;
}

static bool bare_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/* A bare or quoted key; returns malloc'd text. */
static char *parse_key(struct parser *p)
{
    if (p->s < p->end && (*p->s == '"' || *p->s == '\'')) {
        char *k = parse_string(p);
        if (k && !*k) {
            perr(p, p->s, "empty key%s", NULL);
            free(k);
            return NULL;
        }
        return k;
    }
    const char *a = p->s;
    while (p->s < p->end && bare_char(*p->s))
        p->s++;
    if (p->s == a) {
        perr(p, a, "expected a key%s", NULL);
        return NULL;
    }
    char *k = xmalloc((size_t)(p->s - a) + 1);
    memcpy(k, a, (size_t)(p->s - a));
    k[p->s - a] = '\0';
    return k;
}

static int parse_integer(struct parser *p, int64_t *out)
{
    const char *a = p->s;
    bool neg = false;
    if (*p->s == '+' || *p->s == '-')
        neg = *p->s++ == '-';
    if (p->s >= p->end || *p->s < '0' || *p->s > '9')
        return perr(p, a, "expected a value (string, integer, true, false or [strings])%s", NULL);
    if (*p->s == '0' && p->s + 1 < p->end && ((p->s[1] >= '0' && p->s[1] <= '9') || p->s[1] == '_'))
        return perr(p, a, "leading zeros are not allowed%s", NULL);
    uint64_t v = 0;
    bool last_digit = false;
    while (p->s < p->end && ((*p->s >= '0' && *p->s <= '9') || *p->s == '_')) {
        if (*p->s == '_') {
            if (!last_digit || p->s + 1 >= p->end || p->s[1] < '0' || p->s[1] > '9')
                return perr(p, p->s, "an underscore must sit between digits%s", NULL);
            last_digit = false;
            p->s++;
            continue;
        }
        unsigned d = (unsigned)(*p->s - '0');
        if (v > (UINT64_MAX - d) / 10 || v * 10 + d > (uint64_t)INT64_MAX + (neg ? 1 : 0))
            return perr(p, a, "integer out of range%s", NULL);
        v = v * 10 + d;
        last_digit = true;
        p->s++;
    }
    if (p->s < p->end && (*p->s == '.' || *p->s == 'e' || *p->s == 'E' || *p->s == ':' ||
                          *p->s == 'x' || *p->s == 'o' || *p->s == 'b'))
        return perr(p, p->s, "only decimal integers are supported (no floats, dates or bases)%s",
                    NULL);
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static void value_free(struct toml_value *v)
{
    free((char *)v->str);
    for (size_t i = 0; i < v->n_items; i++)
        free(v->items[i]);
    free(v->items);
}

static int parse_value(struct parser *p, struct toml_value *v)
{
    memset(v, 0, sizeof(*v));
    if (p->s >= p->end || *p->s == '\n' || *p->s == '#')
        return perr(p, p->s, "missing value%s", NULL);
    char c = *p->s;
    if (c == '"' || c == '\'') {
        v->type = TOML_STRING;
        v->str = parse_string(p);
        return v->str ? 0 : -1;
    }
    if (c == '[') {
        v->type = TOML_STRING_ARRAY;
        p->s++;
        for (;;) {
            if (skip_ws_nl(p) < 0) {
                value_free(v);
                return -1;
            }
            if (p->s < p->end && *p->s == ']') {
                p->s++;
                return 0;
            }
            if (p->s >= p->end || (*p->s != '"' && *p->s != '\'')) {
                value_free(v);
                return perr(p, p->s, "arrays may hold only strings%s", NULL);
            }
            char *item = parse_string(p);
            if (!item) {
                value_free(v);
                return -1;
            }
            if (v->n_items >= 4096) {
                free(item);
                value_free(v);
                return perr(p, p->s, "array too long%s", NULL);
            }
            v->items = xrealloc(v->items, (v->n_items + 1) * sizeof(char *));
            v->items[v->n_items++] = item;
            if (skip_ws_nl(p) < 0) {
                value_free(v);
                return -1;
            }
            if (p->s < p->end && *p->s == ',') {
                p->s++;
                continue;
            }
            if (p->s < p->end && *p->s == ']') {
                p->s++;
                return 0;
            }
            value_free(v);
            return perr(p, p->s, "expected , or ] in the array%s", NULL);
        }
    }
    if (c == '{')
        return perr(p, p->s, "inline tables are not supported; use a [table]%s", NULL);
    size_t left = (size_t)(p->end - p->s);
    if (left >= 4 && !memcmp(p->s, "true", 4) && (left == 4 || !bare_char(p->s[4]))) {
        v->type = TOML_BOOL;
        v->boolean = true;
        p->s += 4;
        return 0;
    }
    if (left >= 5 && !memcmp(p->s, "false", 5) && (left == 5 || !bare_char(p->s[5]))) {
        v->type = TOML_BOOL;
        p->s += 5;
        return 0;
    }
    v->type = TOML_INTEGER;
    return parse_integer(p, &v->integer);
}

/* Remember name; fail if it was seen. */
static bool seen_before(struct parser *p, char *name)
{
    for (size_t i = 0; i < p->n_seen; i++)
        if (!strcmp(p->seen[i], name)) {
            free(name);
            return true;
        }
    p->seen = xrealloc(p->seen, (p->n_seen + 1) * sizeof(char *));
    p->seen[p->n_seen++] = name;
    return false;
}

static int parse_header(struct parser *p, toml_key_fn fn, void *ud)
{
    const char *at = p->s++;
    if (p->s < p->end && *p->s == '[')
        return perr(p, at, "arrays of tables ([[...]]) are not supported%s", NULL);
    char path[256] = "";
    for (;;) {
        skip_ws(p);
        const char *k_at = p->s;
        char *k = parse_key(p);
        if (!k)
            return -1;
        /* ["a.b"] is one name holding a dot, not [a.b]: joined, the two would be taken alike. */
        if (strchr(k, '.')) {
            free(k);
            return perr(p, k_at, "a table name part holding '.' is not supported%s", NULL);
        }
        size_t used = strlen(path);
        if (used + strlen(k) + 2 > sizeof(path)) {
            free(k);
            return perr(p, at, "table name too long%s", NULL);
        }
        snprintf(path + used, sizeof(path) - used, "%s%s", used ? "." : "", k);
        free(k);
        skip_ws(p);
        if (p->s < p->end && *p->s == '.') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == ']') {
            p->s++;
            break;
        }
        return perr(p, p->s, "expected ] to close the table header%s", NULL);
    }
    if (seen_before(p, xasprintf("[%s", path)))
        return perr(p, at, "table [%s] is defined twice", path);
    snprintf(p->table, sizeof(p->table), "%s", path);
    if (end_of_line(p) < 0)
        return -1;
    /* The header itself is news: a table may mean something with no key in it. */
    struct sbx_err inner = {0};
    if (fn && fn(ud, p->table, NULL, NULL, &inner) < 0)
        return perr(p, at, "%.200s", inner.msg);
    return 0;
}

static int parse_keyval(struct parser *p, toml_key_fn fn, void *ud)
{
    const char *at = p->s;
    char *key = parse_key(p);
    if (!key)
        return -1;
    skip_ws(p);
    if (p->s < p->end && *p->s == '.') {
        free(key);
        return perr(p, p->s, "dotted keys are not supported; use a [table]%s", NULL);
    }
    if (p->s >= p->end || *p->s != '=') {
        free(key);
        return perr(p, p->s, "expected = after the key%s", NULL);
    }
    p->s++;
    skip_ws(p);
    if (seen_before(p, xasprintf("%s\x1f%s", p->table, key))) {
        int r = perr(p, at, "key '%s' is defined twice", key);
        free(key);
        return r;
    }
    struct toml_value v;
    if (parse_value(p, &v) < 0) {
        free(key);
        return -1;
    }
    int r = end_of_line(p);
    if (r == 0) {
        struct sbx_err inner = {0};
        if (fn(ud, p->table, key, &v, &inner) < 0)
            r = perr(p, at, "%.200s", inner.msg);
    }
    value_free(&v);
    free(key);
    return r;
}

int toml_parse(const char *text, size_t len, const char *filename, toml_key_fn fn, void *ud,
               struct sbx_err *err)
{
    struct parser p = {.s = text,
                       .end = text + len,
                       .line_start = text,
                       .line = 1,
                       .file = filename ? filename : "<config>",
                       .err = err};
    int rc = 0;
    if (len > TOML_MAX_INPUT)
        return sbx_fail(err, EFBIG, "%s: larger than %u bytes", p.file, TOML_MAX_INPUT);
    size_t bad = utf8_valid_prefix(text, len);
    if (bad < len)
        return fail_at(err, p.file, text, bad, "not valid UTF-8");
    const char *nul = memchr(text, '\0', len);
    if (nul)
        return fail_at(err, p.file, text, (size_t)(nul - text), "a NUL byte");
    /* A byte order mark, as Windows editors write: invisible there, so not part of line 1. */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3))
        p.s = p.line_start = text + 3;
    while (rc == 0) {
        if (skip_ws_nl(&p) < 0) {
            rc = -1;
            break;
        }
        if (p.s >= p.end)
            break;
        rc = *p.s == '[' ? parse_header(&p, fn, ud) : parse_keyval(&p, fn, ud);
    }
    for (size_t i = 0; i < p.n_seen; i++)
        free(p.seen[i]);
    free(p.seen);
    return rc;
}
