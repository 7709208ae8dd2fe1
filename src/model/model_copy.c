/*
 * model_copy.c — values in and out of a built model. Its memory belongs to the backend (a
 * device's memory may not be the host's), so the public API reaches values only through these
 * copies: the flat buffers by region and byte range, single tensors, the output, the output
 * gradient, the input gradient; and the finite checks, which the backend reduces.
 */
#include <string.h>

#include "model_internal.h"

void dtnn_model_read_output(const dtnn_model *m, float *dst)
{
    const layer *last = m->layers[m->n_layers - 1];
    be_download(m->be, dst, last->y, sizeof(float) * shape_size(last->out) * (size_t)m->n);
}

dtnn_status dtnn_model_set_output_grad(dtnn_model *m, const float *dz, dtnn_error *err)
{
    if (!m->built || !m->bp.training)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the output gradient needs a model built for "
                              "training");
    if (!m->forward_done)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the output gradient needs a forward pass "
                              "first");
    const layer *last = m->layers[m->n_layers - 1];
    be_upload(m->be, last->dy, dz, sizeof(float) * shape_size(last->out) * (size_t)m->n);
    m->loss_done = 1;
    return DTNN_OK;
}

dtnn_status dtnn_model_read_input_grad(const dtnn_model *m, float *dst, dtnn_error *err)
{
    if (!m->input_grad)
        return dtnn_error_set(err, DTNN_ERR_ARG, "the model was not built with input_grad");
    be_download(m->be, dst, m->input_grad, sizeof(float) * shape_size(m->input) * (size_t)m->n);
    return DTNN_OK;
}
/* A region's backend address and size in bytes (NULL, 0 when the model has none). */
static unsigned char *region_base(const dtnn_model *m, dtnn_region r, size_t *size)
{
    *size = 0;
    if (!m->built)
        return NULL;
    if (r == DTNN_REGION_PARAMS) {
        *size = sizeof(float) * m->n_params_padded;
        return (unsigned char *)m->params;
    }
    if (r == DTNN_REGION_GRADS && m->grads) {
        *size = sizeof(float) * m->n_grads;
        return (unsigned char *)m->grads;
    }
    if (r == DTNN_REGION_BUFFERS) {
        *size = m->buffer_bytes;
        return m->buffers;
    }
    return NULL;
}

/* The region's backend address at a byte offset, or NULL (with the error) when out of range. */
static unsigned char *region_at(const dtnn_model *m, dtnn_region r, size_t offset,
                                size_t bytes, dtnn_error *err)
{
    static const char *const names[] = {"parameters", "gradients", "buffers"};
    size_t size;
    unsigned char *base = region_base(m, r, &size);
    if (!base || offset > size || bytes > size - offset) {
        dtnn_error_set(err, DTNN_ERR_ARG, "bytes [%zu, %zu) of the model's %s are outside its "
                       "%zu bytes%s", offset, offset + bytes,
                       (int)r >= 0 && (int)r < 3 ? names[r] : "(unknown region)", size,
                       m->built ? "" : " (the model is not built)");
        return NULL;
    }
    return base + offset;
}

void *model_region_to_host(const dtnn_model *m, dtnn_region r, size_t *bytes, dtnn_error *err)
{
    region_base(m, r, bytes);
    void *host = malloc(DTNN_MAX(*bytes, 1));
    if (!host) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory copying the model (%.1f MiB)",
                       (double)*bytes / 1048576.0);
        return NULL;
    }
    if (dtnn_model_read(m, r, 0, host, *bytes, err)) {
        free(host);
        return NULL;
    }
    return host;
}

dtnn_status dtnn_model_read(const dtnn_model *m, dtnn_region r, size_t offset, void *dst,
                            size_t bytes, dtnn_error *err)
{
    unsigned char *src = region_at(m, r, offset, bytes, err);
    if (!src)
        return err->code;
    be_download(m->be, dst, src, bytes);
    return DTNN_OK;
}

dtnn_status dtnn_model_write(dtnn_model *m, dtnn_region r, size_t offset, const void *src,
                             size_t bytes, dtnn_error *err)
{
    unsigned char *dst = region_at(m, r, offset, bytes, err);
    if (!dst)
        return err->code;
    be_upload(m->be, dst, src, bytes);
    return DTNN_OK;
}

/* Where a tensor lives: its region and byte offset. */
static void tensor_place(const dtnn_tensor_info *t, dtnn_region *r, size_t *offset, size_t *bytes)
{
    const int param = t->kind == DTNN_TENSOR_PARAM;
    *r = param ? DTNN_REGION_PARAMS : DTNN_REGION_BUFFERS;
    *offset = param ? sizeof(float) * t->offset : t->offset;
    *bytes = t->count * (t->dtype == DTNN_I64 ? 8 : 4);
}

dtnn_status dtnn_model_tensor_read(const dtnn_model *m, const dtnn_tensor_info *t, void *dst,
                                   dtnn_error *err)
{
    dtnn_region r;
    size_t offset, bytes;
    tensor_place(t, &r, &offset, &bytes);
    return dtnn_model_read(m, r, offset, dst, bytes, err);
}

dtnn_status dtnn_model_tensor_write(dtnn_model *m, const dtnn_tensor_info *t, const void *src,
                                    dtnn_error *err)
{
    dtnn_region r;
    size_t offset, bytes;
    tensor_place(t, &r, &offset, &bytes);
    int64_t bad = t->dtype == DTNN_F32 && !m->bp.allow_nonfinite_weights
                      ? first_nonfinite_f32(src, t->count) : -1;
    if (bad >= 0) {
        float v;
        memcpy(&v, (const char *)src + (size_t)bad * sizeof v, sizeof v);
        return dtnn_error_set(err, DTNN_ERR_NONFINITE, "tensor '%s' would hold %s at index %lld "
                              "of %zu; --allow-nonfinite-weights (allow_nonfinite_weights in "
                              "dtnn_build_params) lets it in, for forensics", t->name,
                              v != v ? "NaN" : "Inf", (long long)bad, t->count);
    }
    return dtnn_model_write(m, r, offset, src, bytes, err);
}
static int all_finite(const dtnn_model *m, const float *v, size_t n)
{
    return be_count_nonfinite(m->be, v, n) == 0;
}

int dtnn_model_grads_finite(const dtnn_model *m)
{
    return all_finite(m, m->grads, m->n_grads);
}

int dtnn_model_find_nonfinite(const dtnn_model *m, char *where, size_t len)
{
    /* Forward order for outputs: the first layer whose output went bad is where it began. */
    for (int i = 0; m->forward_done && i < m->n_layers; i++) {
        const layer *l = m->layers[i];
        if (l->y && !all_finite(m, l->y, shape_size(l->out) * (size_t)m->n)) {
            snprintf(where, len, "the output of layer '%s' (%s)", l->name, l->ops->type);
            return 1;
        }
    }
    /* Then the parameter gradients in backward order (the output layer's first). The output
     * gradients between layers cannot tell more: they share memory (plan_gradient_pool), so
     * after backward each holds whatever the last layer to use it wrote. A non-finite value
     * born in a layer without parameters shows in the next parameter gradient backward. */
    for (int i = m->n_tensors - 1; i >= 0; i--) {
        const dtnn_tensor_info *t = &m->tensors[i];
        if (t->kind == DTNN_TENSOR_PARAM && !t->frozen &&
            !all_finite(m, m->grads + t->offset, t->count)) {
            snprintf(where, len, "the gradient of '%s'", t->name);
            return 1;
        }
    }
    return 0;
}
