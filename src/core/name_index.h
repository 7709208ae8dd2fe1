/*
 * name_index.h — a hash index from names to the small integers that identify them in their
 * owner's array (a model's layers and tensors, an ONNX graph's values and layers), so that a
 * lookup by name costs O(1) rather than a scan: graphs of 100,000 nodes took minutes to load
 * with one scan per node. The index stores only the integers and the names' hashes; it asks the
 * owner for a name when it must compare one, so the owner may move its array (realloc) freely.
 */
#ifndef DTNN_NAME_INDEX_H
#define DTNN_NAME_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* The name of entry `id` of the owner ctx. */
typedef const char *(*name_index_key)(const void *ctx, int id);

typedef struct {
    int *ids;           /* id + 1 per slot; 0: empty */
    uint32_t *hashes;
    size_t cap, n;      /* cap: a power of two, at most half full */
    name_index_key key;
    const void *ctx;
} name_index;

/* An empty index over ctx's names (allocates nothing yet). */
void name_index_init(name_index *ix, name_index_key key, const void *ctx);
/* Rebinds the index to its owner, after the owner struct itself has moved. */
void name_index_rebind(name_index *ix, const void *ctx);
void name_index_free(name_index *ix);
/* The id of the most recently added entry called name, or -1. */
int name_index_find(const name_index *ix, const char *name);
/* Adds entry id under its name (the owner's key(ctx, id) must already return it; a name added
 * again hides the earlier id). 0, or -1 when out of memory. */
int name_index_add(name_index *ix, int id);

#endif
