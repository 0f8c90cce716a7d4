/* A JSON Schema (2020-12) validator for the subset tool input schemas use: type (with
 * integer distinct from number), properties, required, additionalProperties: false, enum,
 * const, items, minItems/maxItems, minimum/maximum, minLength/maxLength. Pure code. */
#ifndef SBX_SCHEMA_H
#define SBX_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

/* Returns 0 when value conforms; otherwise -1 with msg naming the argument path and what was
 * expected, e.g. "argument 'timeout_s': expected integer, got string". */
int schema_validate(const json_t *schema, const json_t *value, char *msg, size_t msg_len);
/* After validation: whole numbers written as reals (5.0), which "integer" admits, become
 * integers, the type handlers read (depth 0 at the top). */
void schema_whole_numbers(const json_t *schema, json_t *value, int depth);
/* A value's JSON Schema type: "object", "integer", "null", ... */
const char *schema_type_name(const json_t *v);

#endif
