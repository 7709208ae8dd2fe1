/*
 * external.h — the external layer (external.c): a layer computed by the caller's functions
 * (dtnn_external_ops), which no model file can name; src/model/model_external.c adds it.
 */
#ifndef DTNN_LAYER_EXTERNAL_H
#define DTNN_LAYER_EXTERNAL_H

#include "layer.h"

extern const layer_ops layer_external;

/* Gives a layer of type layer_external the caller's functions (before the model is built). */
void layer_external_bind(layer *l, const dtnn_external_ops *ops);

#endif
