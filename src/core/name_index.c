/*
 * name_index.c — open addressing with linear probing over FNV-1a hashes of the names (see
 * name_index.h). Entries are never removed, which the owners (append-only arrays) never need.
 */
#include "name_index.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

void name_index_init(name_index *ix, name_index_key key, const void *ctx)
{
    memset(ix, 0, sizeof *ix);
    ix->key = key;
    ix->ctx = ctx;
}

void name_index_rebind(name_index *ix, const void *ctx) { ix->ctx = ctx; }

void name_index_free(name_index *ix)
{
    free(ix->ids);
    free(ix->hashes);
    ix->ids = NULL;
    ix->hashes = NULL;
    ix->cap = ix->n = 0;
}

/* Places id with hash h in a table known to have room; a slot holding the same name takes
 * the new id (the latest definition wins). */
static void place(name_index *ix, int id, uint32_t h, const char *name)
{
    size_t i = h & (ix->cap - 1);
    while (ix->ids[i]) {
        if (name && ix->hashes[i] == h && !strcmp(ix->key(ix->ctx, ix->ids[i] - 1), name)) {
            ix->ids[i] = id + 1;
            return;
        }
        i = (i + 1) & (ix->cap - 1);
    }
    ix->ids[i] = id + 1;
    ix->hashes[i] = h;
    ix->n++;
}

static int grow(name_index *ix)
{
    size_t cap = ix->cap ? 2 * ix->cap : 64;
    int *ids = calloc(cap, sizeof *ids);
    uint32_t *hashes = calloc(cap, sizeof *hashes);
    if (!ids || !hashes) {
        free(ids);
        free(hashes);
        return -1;
    }
    name_index old = *ix;
    ix->ids = ids;
    ix->hashes = hashes;
    ix->cap = cap;
    ix->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.ids[i])
            place(ix, old.ids[i] - 1, old.hashes[i], NULL);   /* names are distinct already */
    free(old.ids);
    free(old.hashes);
    return 0;
}

int name_index_find(const name_index *ix, const char *name)
{
    if (!ix->cap || !name)
        return -1;
    const uint32_t h = hash_name(name);
    for (size_t i = h & (ix->cap - 1); ix->ids[i]; i = (i + 1) & (ix->cap - 1))
        if (ix->hashes[i] == h && !strcmp(ix->key(ix->ctx, ix->ids[i] - 1), name))
            return ix->ids[i] - 1;
    return -1;
}

int name_index_add(name_index *ix, int id)
{
    if (2 * (ix->n + 1) > ix->cap && grow(ix))
        return -1;
    const char *name = ix->key(ix->ctx, id);
    place(ix, id, hash_name(name), name);
    return 0;
}
