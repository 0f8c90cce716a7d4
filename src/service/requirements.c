/* A strict subset of PEP 508: name, extras, version specifiers. Everything else is refused
 * with a reason, since pip would read it as an option, a path or a URL. */
#include "requirements.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

static bool version_char(char c)
{
    return isalnum((unsigned char)c) || (c && strchr(".*+!_-", c) != NULL);
}

size_t requirement_identifier(const char *s)
{
    if (!isalnum((unsigned char)s[0]))
        return 0;
    size_t n = 1;
    while (name_char(s[n]))
        n++;
    while (n > 1 && !isalnum((unsigned char)s[n - 1]))
        n--;
    return n;
}

static const char *skip_spaces(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* Comparison operators, longest first so "===" is not read as "==". */
static const char *const operators[] = {"===", "~=", "==", "!=", "<=", ">=", "<", ">"};

static size_t operator_at(const char *s)
{
    for (size_t i = 0; i < sizeof(operators) / sizeof(operators[0]); i++) {
        size_t n = strlen(operators[i]);
        if (strncmp(s, operators[i], n) == 0)
            return n;
    }
    return 0;
}

/* Refusals that name the thing pip would have done with the string instead. */
static int refuse_shape(const char *text, struct sbx_err *err)
{
    const char *example = "install_packages takes requirement strings such as numpy or "
                          "requests==2.31.0";
    if (text[0] == '-')
        return sbx_fail(err, EINVAL, "'%s' is a pip option, not a package; %s", text, example);
    if (strstr(text, "://"))
        return sbx_fail(err, EINVAL,
                        "'%s' is a URL; packages come only from the configured index (%s)", text,
                        example);
    if (strchr(text, '/') || strchr(text, '\\') || text[0] == '.' || text[0] == '~')
        return sbx_fail(err, EINVAL,
                        "'%s' is a path; packages come only from the configured index (%s)", text,
                        example);
    if (strchr(text, '@'))
        return sbx_fail(err, EINVAL,
                        "'%s' is a direct reference (name @ url); packages come only from the "
                        "configured index (%s)",
                        text, example);
    if (strchr(text, ';'))
        return sbx_fail(err, EINVAL, "'%s': environment markers (;) are not supported; %s", text,
                        example);
    /* pip reads a name ending like an archive as a file in its working directory. */
    static const char *const archives[] = {".whl", ".zip",     ".tar.gz", ".tgz",
                                           ".tar", ".tar.bz2", ".tbz",    ".tar.xz",
                                           ".txz", ".tlz",     ".tar.lz", ".tar.lzma"};
    size_t len = strcspn(text, " \t[<>=!~,");
    for (size_t i = 0; i < sizeof(archives) / sizeof(archives[0]); i++) {
        size_t n = strlen(archives[i]);
        if (len > n && strncasecmp(text + len - n, archives[i], n) == 0)
            return sbx_fail(err, EINVAL,
                            "'%s' names an archive file; packages come only from the configured "
                            "index (%s)",
                            text, example);
    }
    return 0;
}

int requirement_parse(const char *text, struct requirement *out, struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    size_t len = strlen(text);
    if (len == 0)
        return sbx_fail(err, EINVAL, "an empty string is not a package name");
    if (len > REQUIREMENT_MAX)
        return sbx_fail(err, EINVAL, "requirement longer than %d characters", REQUIREMENT_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] >= 0x7f)
            return sbx_fail(err, EINVAL,
                            "requirement %zu: only printable ASCII is allowed in package names "
                            "and versions",
                            i);
    if (refuse_shape(text, err) < 0)
        return -1;

    const char *p = skip_spaces(text);
    size_t n = requirement_identifier(p);
    if (n == 0 || (p[n] && !strchr(" \t[<>=!~,", p[n])))
        return sbx_fail(err, EINVAL,
                        "'%s' is not a package name: names are letters, digits and . _ - "
                        "(starting and ending with a letter or digit), optionally followed by "
                        "[extras] and version specifiers such as ==1.2 or >=2,<3",
                        text);
    if (n > REQUIREMENT_NAME_MAX)
        return sbx_fail(err, EINVAL, "package name longer than %d characters",
                        REQUIREMENT_NAME_MAX);
    memcpy(out->name, p, n);
    requirement_normalize(out->name, out->normalized, sizeof(out->normalized));
    p = skip_spaces(p + n);

    if (*p == '[') {
        p = skip_spaces(p + 1);
        for (;;) {
            size_t e = requirement_identifier(p);
            if (e == 0)
                return sbx_fail(err, EINVAL, "'%s': malformed extras (write name[extra1,extra2])",
                                text);
            p = skip_spaces(p + e);
            if (*p == ']')
                break;
            if (*p != ',')
                return sbx_fail(err, EINVAL, "'%s': malformed extras (write name[extra1,extra2])",
                                text);
            p = skip_spaces(p + 1);
        }
        p = skip_spaces(p + 1);
    }

    size_t specs = 0;
    while (*p) {
        if (specs > 0) {
            if (*p != ',')
                return sbx_fail(err, EINVAL,
                                "'%s': unexpected '%c'; separate version specifiers with commas",
                                text, *p);
            p = skip_spaces(p + 1);
        }
        size_t op = operator_at(p);
        if (op == 0)
            return sbx_fail(err, EINVAL,
                            "'%s': expected a version specifier (==, !=, <=, >=, <, >, ~=, ===) "
                            "at '%s'",
                            text, p);
        bool exact = op == 2 && p[0] == '=';
        bool may_wildcard = exact || (op == 2 && p[0] == '!');
        p = skip_spaces(p + op);
        size_t v = 0;
        while (version_char(p[v]))
            v++;
        if (v == 0)
            return sbx_fail(err, EINVAL, "'%s': a version must follow the operator", text);
        /* A wildcard is only meaningful as a trailing ".*" of == and != (PEP 440). */
        const char *star = memchr(p, '*', v);
        if (star && (!may_wildcard || star != p + v - 1 || v < 2 || p[v - 2] != '.'))
            return sbx_fail(err, EINVAL, "'%s': '*' may only end a version, as in ==1.2.*", text);
        out->pinned = specs == 0 && exact && !star;
        p = skip_spaces(p + v);
        specs++;
    }
    if (specs != 1)
        out->pinned = false;
    return 0;
}

void requirement_normalize(const char *name, char *out, size_t size)
{
    size_t o = 0;
    bool sep = false;
    for (const char *c = name; *c && o + 1 < size; c++) {
        if (*c == '-' || *c == '_' || *c == '.') {
            sep = true;
            continue;
        }
        if (sep && o > 0 && o + 2 < size)
            out[o++] = '-';
        sep = false;
        out[o++] = (char)tolower((unsigned char)*c);
    }
    if (size)
        out[o] = '\0';
}

bool requirement_allowed(const struct string_list *allowed, const char *normalized)
{
    if (!allowed || allowed->len == 0)
        return true;
    for (size_t i = 0; i < allowed->len; i++) {
        char norm[REQUIREMENT_NAME_MAX + 1];
        requirement_normalize(allowed->items[i], norm, sizeof(norm));
        if (strcmp(norm, normalized) == 0)
            return true;
    }
    return false;
}
