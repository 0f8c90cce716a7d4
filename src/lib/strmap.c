/* Open addressing with linear probing, at most 3/4 full; a removal shifts the entries after it
 * back, so there are no tombstones and a lookup stops at the first empty slot. The hash is
 * seeded per map: keys that collide on purpose cannot be chosen from outside. */
#include "strmap.h"

#include "util.h"

#include <stdbool.h>
#include <string.h>

static uint64_t hash_key(uint64_t seed, const char *key)
{
    /* FNV-1a over the bytes, then a final mix so that the low bits (the slot) depend on all. */
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

void strmap_init(struct strmap *m)
{
    memset(m, 0, sizeof(*m));
    m->seed = unguessable_u64();
}

void strmap_free(struct strmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->len = 0;
}

static struct strmap_slot *find(const struct strmap *m, const char *key, uint64_t h)
{
    if (m->cap == 0)
        return NULL;
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct strmap_slot *s = &m->slots[i];
        if (!s->key)
            return NULL;
        if (s->hash == h && strcmp(s->key, key) == 0)
            return s;
    }
}

void *strmap_get(const struct strmap *m, const char *key)
{
    struct strmap_slot *s = find(m, key, hash_key(m->seed, key));
    return s ? s->value : NULL;
}

static void place(struct strmap *m, const char *key, void *value, uint64_t h)
{
    size_t i = h & (m->cap - 1);
    while (m->slots[i].key)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (struct strmap_slot){.key = key, .value = value, .hash = h};
    m->len++;
}

static void grow(struct strmap *m)
{
    struct strmap_slot *old = m->slots;
    size_t old_cap = m->cap;
    m->cap = old_cap ? old_cap * 2 : 16;
    m->slots = xcalloc(m->cap, sizeof(*m->slots));
    m->len = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key)
            place(m, old[i].key, old[i].value, old[i].hash);
    free(old);
}

void strmap_put(struct strmap *m, const char *key, void *value)
{
    uint64_t h = hash_key(m->seed, key);
    struct strmap_slot *s = find(m, key, h);
    if (s) {
        s->key = key;
        s->value = value;
        return;
    }
    if ((m->len + 1) * 4 > m->cap * 3)
        grow(m);
    place(m, key, value, h);
}

bool strmap_del(struct strmap *m, const char *key, const void *value)
{
    struct strmap_slot *s = find(m, key, hash_key(m->seed, key));
    if (!s || s->value != value)
        return false;
    size_t mask = m->cap - 1, hole = (size_t)(s - m->slots);
    m->slots[hole].key = NULL;
    m->len--;
    /* Move back every following entry that the hole would otherwise cut off from its home. */
    for (size_t i = (hole + 1) & mask; m->slots[i].key; i = (i + 1) & mask) {
        size_t home = m->slots[i].hash & mask;
        bool reachable = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
        if (reachable) {
            m->slots[hole] = m->slots[i];
            m->slots[i].key = NULL;
            hole = i;
        }
    }
    return true;
}
