/* A hash map from strings to pointers, for the lookups every call makes (a sandbox by id, an
 * HTTP session by id): a list walk costs a strcmp per entry, and there may be thousands.
 * Keys are not copied: each must stay valid, unchanged, while its entry is in the map (it is
 * normally a field of the value). */
#ifndef SBX_STRMAP_H
#define SBX_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
    const char *key; /* NULL: empty */
    void *value;
    uint64_t hash;
};

struct strmap {
    struct strmap_slot *slots;
    size_t cap; /* 0 or a power of two */
    size_t len;
    uint64_t seed;
};

void strmap_init(struct strmap *m);
void strmap_free(struct strmap *m);
void *strmap_get(const struct strmap *m, const char *key);
/* Adds key or replaces its value. */
void strmap_put(struct strmap *m, const char *key, void *value);
/* Removes key if its value is value (another entry under the same key stays); true if it did. */
bool strmap_del(struct strmap *m, const char *key, const void *value);

#endif
