/*
 * model_prefetch.c — a device backend's batch upload overlapping compute: the trainer hands
 * the next step's batch over (dtnn_model_prefetch) while the device still computes this one;
 * the batch is copied into pinned staging on the host and queued on the backend's copy queue
 * into the device input that the current step is not reading. The two device inputs and their
 * staging are used in turn, and each copy waits on the device until the compute that last read
 * its destination is done (upload_release after backward), so no step waits for its data on
 * the host and no buffer is overwritten while read. A forward given a batch that was not
 * prefetched uploads it as before, into the slot no copy is filling.
 *
 * Host backends read the caller's batch where it is: nothing is allocated and prefetching does
 * nothing. A backend without a copy queue (cpu-guarded) gets synchronous uploads through the
 * same bookkeeping, which is how the tests run this file without a GPU.
 */
#include <string.h>

#include "model_internal.h"

static size_t batch_floats(const dtnn_model *m, int n)
{
    return shape_size(m->input) * (size_t)n;
}

dtnn_status model_prefetch_alloc(dtnn_model *m, dtnn_error *err)
{
    model_prefetch *pf = &m->prefetch;
    memset(pf, 0, sizeof *pf);
    if (m->be->host_memory || !m->bp.training)
        return DTNN_OK;
    const size_t bytes = sizeof(float) * batch_floats(m, m->bp.max_batch);
    pf->dev[0] = m->input_buf;
    for (int k = 1; k < UPLOAD_SLOTS; k++)
        if (!(pf->dev[k] = be_alloc(m->be, bytes)))
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of device memory for a second "
                                  "input batch (%.1f MiB)", (double)bytes / 1048576.0);
    for (int k = 0; m->be->op->upload_start && k < UPLOAD_SLOTS; k++)
        if (!(pf->stage[k] = m->be->op->host_alloc(m->be, bytes)))
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of pinned host memory for batch "
                                  "staging (%.1f MiB)", (double)bytes / 1048576.0);
    return DTNN_OK;
}

void model_prefetch_free(dtnn_model *m)
{
    model_prefetch *pf = &m->prefetch;
    for (int k = 1; k < UPLOAD_SLOTS; k++)
        be_free(m->be, pf->dev[k]);
    for (int k = 0; k < UPLOAD_SLOTS; k++)
        if (pf->stage[k])
            m->be->op->host_free(m->be, pf->stage[k]);
    memset(pf, 0, sizeof *pf);
}

dtnn_status dtnn_model_prefetch(dtnn_model *m, const float *x, int n, dtnn_error *err)
{
    if (!m->built)
        return dtnn_error_set(err, DTNN_ERR_ARG, "model is not built");
    if (n <= 0 || n > m->bp.max_batch)
        return dtnn_error_set(err, DTNN_ERR_ARG, "prefetch of %d samples: must be in [1, %d] "
                              "(the max_batch the model was built for)", n, m->bp.max_batch);
    model_prefetch *pf = &m->prefetch;
    if (!pf->dev[0])
        return DTNN_OK;
    const int k = (pf->current + 1) % UPLOAD_SLOTS;
    const size_t bytes = sizeof(float) * batch_floats(m, n);
    dtnn_backend *be = m->be;
    if (be->op->upload_start) {
        be_enter(be);
        be->op->upload_finish(be, k);   /* the staging's previous copy */
        be_leave(be);
        memcpy(pf->stage[k], x, bytes);
        be_enter(be);
        be->op->upload_start(be, k, pf->dev[k], pf->stage[k], bytes);
        be_leave(be);
    } else {
        be_upload(be, pf->dev[k], x, bytes);
    }
    pf->x = x;
    pf->n = n;
    pf->used = 0;
    pf->next = k;
    return be_check(be, err);
}

int dtnn_model_prefetches(const dtnn_model *m) { return m->prefetch.dev[0] != NULL; }

const float *model_prefetch_input(dtnn_model *m, const float *x, int n)
{
    model_prefetch *pf = &m->prefetch;
    const size_t per = shape_size(m->input);
    /* The prefetched batch serves the forwards that cover it once (the micro-batches of a
     * step); a forward of anything else gives it up. Either way it is then forgotten, so a
     * later batch at the same address (a loader reuses its buffers) is never taken for it. */
    const int hit = pf->x && x >= pf->x && x + per * (size_t)n <= pf->x + per * (size_t)pf->n;
    if (hit) {
        if (m->be->op->upload_use)
            be_run(m->be, upload_use, pf->next);
        pf->current = pf->next;
        const float *dev = pf->dev[pf->next] + (x - pf->x);
        pf->used += n;
        if (pf->used >= pf->n)
            pf->x = NULL;
        return dev;
    }
    pf->x = NULL;
    /* the slot of the last forward: no copy is filling it */
    float *dst = pf->dev[0] ? pf->dev[pf->current] : m->input_buf;
    be_upload(m->be, dst, x, sizeof(float) * per * (size_t)n);
    return dst;
}

void model_prefetch_release(dtnn_model *m)
{
    if (m->prefetch.dev[0] && m->be->op->upload_release)
        be_run(m->be, upload_release, m->prefetch.current);
}
