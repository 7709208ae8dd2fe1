/*
 * registry.c — looks layer types up by name in the list of registry.h.
 */
#include <string.h>

#include "layer.h"
#include "registry.h"

#define DTNN_X_DECLARE(ident) extern const layer_ops layer_##ident;
DTNN_LAYER_LIST(DTNN_X_DECLARE)
#undef DTNN_X_DECLARE

static const layer_ops *const all_layers[] = {
#define DTNN_X_ENTRY(ident) &layer_##ident,
    DTNN_LAYER_LIST(DTNN_X_ENTRY)
#undef DTNN_X_ENTRY
};

const layer_ops *layer_ops_at(int i)
{
    if (i < 0 || i >= (int)(sizeof all_layers / sizeof all_layers[0]))
        return NULL;
    return all_layers[i];
}

const layer_ops *layer_ops_find(const char *type)
{
    const layer_ops *o;
    for (int i = 0; (o = layer_ops_at(i)) != NULL; i++)
        if (!strcmp(o->type, type))
            return o;
    return NULL;
}

const char *dtnn_layer_type_name(int i)
{
    const layer_ops *o = layer_ops_at(i);
    return o ? o->type : NULL;
}
