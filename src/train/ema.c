/*
 * ema.c — the exponential moving average of the weights that torchvision's reference keeps
 * with --model-ema (ExponentialMovingAverage, an AveragedModel with use_buffers=True): the
 * parameters and the float buffers (batch-norm running statistics) averaged as
 * avg = decay avg + (1 - decay) w, the first update a copy; integer buffers (batch counts)
 * copied, where torchvision truncates their average. It lives in the model's backend beside
 * the weights (every update is the backend's axpby, so cpu-guarded and cuda get it), and is
 * the same on every rank because the weights are. The trainer evaluates and saves it by
 * swapping it into the model (three device copies), so every path the model has (fused
 * layers, devices, checkpoint names) serves the average unchanged.
 */
#include <stdlib.h>

#include "../backend/backend.h"
#include "../model/model.h"
#include "ema.h"

struct train_ema {
    dtnn_model *m;
    dtnn_backend *be;
    float decay;
    size_t n_params, buffer_bytes;
    float *params, *spare_params;            /* [n_params] backend memory */
    unsigned char *buffers, *spare_buffers;  /* [buffer_bytes] backend memory */
    int64_t count;
};

train_ema *train_ema_create(dtnn_model *m, float decay, dtnn_error *err)
{
    train_ema *e = calloc(1, sizeof *e);
    if (!e) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the weights' average");
        return NULL;
    }
    e->m = m;
    e->be = model_backend(m);
    e->decay = decay;
    e->n_params = dtnn_model_params_padded(m);
    e->buffer_bytes = dtnn_model_buffer_bytes(m);
    /* The spares are the swap's room: allocated now, so no evaluation fails for memory. */
    e->params = be_alloc(e->be, sizeof(float) * e->n_params);
    e->spare_params = be_alloc(e->be, sizeof(float) * e->n_params);
    if (e->buffer_bytes) {
        e->buffers = be_alloc(e->be, e->buffer_bytes);
        e->spare_buffers = be_alloc(e->be, e->buffer_bytes);
    }
    if (!e->params || !e->spare_params ||
        (e->buffer_bytes && (!e->buffers || !e->spare_buffers))) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory: the weights' average (--ema) needs "
                       "%.1f MiB more in the model's backend",
                       (double)(2 * (sizeof(float) * e->n_params + e->buffer_bytes)) / 1048576.0);
        train_ema_free(e);
        return NULL;
    }
    return e;
}

void train_ema_free(train_ema *e)
{
    if (!e)
        return;
    be_free(e->be, e->params);
    be_free(e->be, e->spare_params);
    be_free(e->be, e->buffers);
    be_free(e->be, e->spare_buffers);
    free(e);
}

void train_ema_update(train_ema *e, int restart)
{
    unsigned char *model_buffers_p = model_buffers(e->m);
    if (restart || e->count == 0) {
        be_run(e->be, copy, e->params, model_params(e->m), sizeof(float) * e->n_params);
        if (e->buffer_bytes)
            be_run(e->be, copy, e->buffers, model_buffers_p, e->buffer_bytes);
        e->count = 1;
        return;
    }
    const float keep = e->decay, take = 1.0f - e->decay;
    be_run(e->be, axpby, e->n_params, take, model_params(e->m), keep, e->params);
    for (int i = 0; i < dtnn_model_tensor_count(e->m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(e->m, i);
        if (t->kind != DTNN_TENSOR_BUFFER)
            continue;
        if (t->dtype == DTNN_F32)
            be_run(e->be, axpby, t->count, take,
                   (const float *)(const void *)(model_buffers_p + t->offset), keep,
                   (float *)(void *)(e->buffers + t->offset));
        else
            be_run(e->be, copy, e->buffers + t->offset, model_buffers_p + t->offset,
                   t->count * sizeof(int64_t));
    }
    e->count++;
}

/* a <-> b through spare */
static void exchange(dtnn_backend *be, void *a, void *b, void *spare, size_t bytes)
{
    if (!bytes)
        return;
    be_run(be, copy, spare, a, bytes);
    be_run(be, copy, a, b, bytes);
    be_run(be, copy, b, spare, bytes);
}

void train_ema_swap(train_ema *e)
{
    exchange(e->be, model_params(e->m), e->params, e->spare_params,
             sizeof(float) * e->n_params);
    exchange(e->be, model_buffers(e->m), e->buffers, e->spare_buffers, e->buffer_bytes);
}

int64_t train_ema_count(const train_ema *e) { return e->count; }

dtnn_status train_ema_to_host(train_ema *e, float **params, void **buffers, dtnn_error *err)
{
    *params = malloc(sizeof(float) * (e->n_params ? e->n_params : 1));
    *buffers = malloc(e->buffer_bytes ? e->buffer_bytes : 1);
    if (!*params || !*buffers) {
        free(*params);
        free(*buffers);
        *params = NULL;
        *buffers = NULL;
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for a host copy of the "
                              "weights' average");
    }
    be_download(e->be, *params, e->params, sizeof(float) * e->n_params);
    be_download(e->be, *buffers, e->buffers, e->buffer_bytes);
    return DTNN_OK;
}

void train_ema_from_host(train_ema *e, const float *params, const void *buffers, int64_t count)
{
    be_upload(e->be, e->params, params, sizeof(float) * e->n_params);
    be_upload(e->be, e->buffers, buffers, e->buffer_bytes);
    e->count = count;
}
