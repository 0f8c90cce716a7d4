/* Requirement strings for install_packages, checked before pip ever sees them. Only a project
 * name (PEP 508) with optional extras and version specifiers passes: no options, paths, URLs,
 * direct references or markers, so nothing can reach pip's command line but a package to
 * fetch from the configured index. Pure code, unit-tested and fuzzed. */
#ifndef SBX_REQUIREMENTS_H
#define SBX_REQUIREMENTS_H

#include "config.h"
#include "err.h"

#include <stdbool.h>
#include <stddef.h>

#define REQUIREMENT_MAX      200 /* characters in one requirement string */
#define REQUIREMENT_NAME_MAX 100

struct requirement {
    char name[REQUIREMENT_NAME_MAX + 1];       /* as written */
    char normalized[REQUIREMENT_NAME_MAX + 1]; /* PEP 503: lower case, runs of -_. as one - */
    bool pinned;                               /* "==" with an exact version */
};

/* Parses one requirement ("numpy", "requests==2.31.0", "pandas[excel]>=2,<3"). On refusal the
 * message says what is wrong and what to write instead. */
int requirement_parse(const char *text, struct requirement *out, struct sbx_err *err);

/* PEP 503 normalisation of a project name into out (size bytes). */
void requirement_normalize(const char *name, char *out, size_t size);
/* The length of the PEP 508 identifier (a project's name) at s: alphanumerics, with . _ -
 * inside only; 0 if none starts there. */
size_t requirement_identifier(const char *s);

/* Whether a normalised name is on packages.allowed (entries normalised the same way); an empty
 * list allows every name. */
bool requirement_allowed(const struct string_list *allowed, const char *normalized);

#endif
