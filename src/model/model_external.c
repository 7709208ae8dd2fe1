/*
 * model_external.c — layers computed outside the library (dtnn_model_add_external, the layer
 * in src/layers/external.c) and the run-time failures of such layers, which the model reports
 * after a forward or backward.
 */
#include "model_internal.h"
#include "../layers/external.h"

int dtnn_model_add_external(dtnn_model *m, const char *name, const dtnn_external_ops *ops,
                            const int *inputs, int n_inputs, dtnn_error *err)
{
    if (!ops || !ops->forward) {
        dtnn_error_set(err, DTNN_ERR_ARG, "external layer '%s': a forward function is needed",
                       name ? name : "?");
        return -1;
    }
    int id = model_append_layer(m, &layer_external, name, NULL, NULL, 0, inputs, n_inputs,
                                NULL, err);
    if (id >= 0)
        layer_external_bind(m->layers[id], ops);
    return id;
}

dtnn_status model_layers_failure(const dtnn_model *m, dtnn_error *err)
{
    for (int i = 0; i < m->n_layers; i++) {
        const layer *l = m->layers[i];
        dtnn_status st = l->ops->failure ? l->ops->failure(l, err) : DTNN_OK;
        if (st)
            return st;
    }
    return DTNN_OK;
}
