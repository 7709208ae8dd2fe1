/*
 * model_access.c — model.h's answers: the model's backend and flat buffers for the files
 * outside src/model/ that work on them.
 */
#include <string.h>

#include "model.h"
#include "model_internal.h"

dtnn_backend *model_backend(const dtnn_model *m) { return m->be; }
const dtnn_build_params *model_build_params(const dtnn_model *m) { return &m->bp; }
int model_is_built(const dtnn_model *m) { return m->built; }
float *model_params(dtnn_model *m) { return m->params; }
float *model_grads(dtnn_model *m) { return m->grads; }
unsigned char *model_buffers(dtnn_model *m) { return m->buffers; }
size_t model_param_count(const dtnn_model *m) { return m->n_params; }

unsigned model_tensor_groups(const dtnn_model *m, int i)
{
    for (int k = 0; k < m->n_layers; k++) {
        const layer *l = m->layers[k];
        for (int t = 0; t < l->n_tensors; t++)
            if (l->t[t].model_index == i)
                return (l->ops->normalizes ? MODEL_GROUP_NORM : 0u) |
                       (!strcmp(l->t[t].suffix, "bias") ? MODEL_GROUP_BIAS : 0u);
    }
    return 0;
}
