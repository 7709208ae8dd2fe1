/*
 * grad_sync.c — the gradient all-reduce of data-parallel training, in three strategies:
 *   blocking      one blocking all-reduce (MPI_Allreduce) of the whole flat gradient after
 *                 backward;
 *   overlap       contiguous buckets of --bucket-mb (auto: src/perf/bucket_auto.c), taken
 *                 from the end of the flat buffer (the last layers, whose gradients backward
 *                 finishes first), each started with a non-blocking all-reduce from the
 *                 backward hook as soon as it is complete; every hook call also tests the
 *                 requests in flight, because Open MPI makes no progress on MPI_Iallreduce
 *                 unless the program calls into MPI; all are completed before the optimizer
 *                 step;
 *   hierarchical  per bucket: reduce inside the node, all-reduce among one leader per node,
 *                 broadcast inside the node.
 * Each rank's gradient is already scaled by 1/global batch, so the sum is the global mean.
 *
 * Half-precision transport (fp16 / bf16): a bucket is converted into a uint16 staging buffer,
 * summed in that type (MPI user operations widen to float per addition), and widened back;
 * weights and the optimizer stay fp32. fp16 has a small range, so each bucket is multiplied by
 * a power of two chosen from the previous step's reduced gradient, which is identical on every
 * rank, so all ranks pick the same scale without extra communication. A bucket whose sum still
 * overflows is redone in fp32 and its scale lowered, again identically on all ranks.
 *
 * Backend memory: where the communicator reduces the backend's memory itself (MPI on the cpu
 * backend, whose memory is the host's: comm_reduces_backend_memory), it works on the gradient
 * in place. Elsewhere (a GPU or cpu-guarded under MPI) each bucket is downloaded into a host
 * staging copy of the gradient (the backend's host_alloc: pinned on a GPU) when it is started
 * (from the backward hook, so the copies overlap with the rest of backward as the all-reduces
 * do), reduced there, and uploaded when it completes. fp16 / bf16 conversion works on the
 * host copy; a communicator of device memory would need it on the device (the CUDA issue).
 */
#include <math.h>
#include <string.h>

#include "../model/model_internal.h"
#include "comm_internal.h"
#include "grad_sync.h"
#include "../perf/trace.h"
#include "../core/half.h"

typedef struct {
    size_t begin, end;          /* float range of the flat gradient */
    int request;
    int started;
    float scale;                /* fp16 only */
} bucket;

struct dtnn_grad_sync {
    dtnn_comm *comm;
    dtnn_model *model;
    dtnn_allreduce_mode mode;
    dtnn_comm_dtype dtype;
    bucket *buckets;            /* buckets[0] is the last range of the buffer */
    int n_buckets;
    int next;                   /* next bucket to start */
    uint16_t *staging;          /* [n] half-precision copy, when dtype != F32 */
    float *host;                /* [n] host copy of the gradient, when the backend's memory is
                                 * not the host's (backend host_alloc: pinned on a GPU) */
    size_t n;
    double bucket_mb;           /* the size the buckets were cut at, MiB */
    char bucket_reason[240];    /* why (auto), or "" (given) */
    dtnn_error first_error;
    double wait_seconds;        /* time spent waiting after backward */
};

/* The gradient as the host reduces it: the model's own, or the staging copy. */
static float *host_grads(dtnn_grad_sync *gs)
{
    return gs->host ? gs->host : gs->model->grads;
}

static void to_half(dtnn_grad_sync *gs, bucket *b)
{
    const float *g = host_grads(gs);
    if (gs->dtype == DTNN_COMM_F16)
        for (size_t i = b->begin; i < b->end; i++)
            gs->staging[i] = f32_to_f16(g[i] * b->scale);
    else
        for (size_t i = b->begin; i < b->end; i++)
            gs->staging[i] = f32_to_bf16(g[i]);
}

/* Widens a reduced bucket back into the gradient; returns 0 if it overflowed (fp16). */
static int from_half(dtnn_grad_sync *gs, bucket *b)
{
    float *g = host_grads(gs);
    if (gs->dtype == DTNN_COMM_BF16) {
        for (size_t i = b->begin; i < b->end; i++)
            g[i] = bf16_to_f32(gs->staging[i]);
        return 1;
    }
    for (size_t i = b->begin; i < b->end; i++)
        if ((gs->staging[i] & 0x7c00u) == 0x7c00u)
            return 0;
    float inv = 1.0f / b->scale, mx = 0.0f;
    for (size_t i = b->begin; i < b->end; i++) {
        g[i] = f16_to_f32(gs->staging[i]) * inv;
        mx = fmaxf(mx, fabsf(g[i]));
    }
    /* Next step: the largest power of two that keeps this step's sum below 2^14 (4x margin). */
    if (mx > 0.0f)
        b->scale = fminf(ldexpf(1.0f, (int)floorf(log2f(16384.0f / mx))), 16777216.0f);
    return 1;
}

static void *bucket_data(dtnn_grad_sync *gs, bucket *b)
{
    if (gs->dtype == DTNN_COMM_F32)
        return host_grads(gs) + b->begin;
    return gs->staging + b->begin;
}

/* Moves a bucket's range between the model's gradient and the host copy (to_host: download). */
static void stage(dtnn_grad_sync *gs, const bucket *b, int to_host)
{
    if (!gs->host)
        return;
    dtnn_model *m = gs->model;
    const size_t bytes = sizeof(float) * (b->end - b->begin);
    if (to_host)
        be_download(m->be, gs->host + b->begin, m->grads + b->begin, bytes);
    else
        be_upload(m->be, m->grads + b->begin, gs->host + b->begin, bytes);
}

static dtnn_status start_bucket(dtnn_grad_sync *gs, bucket *b, dtnn_error *err)
{
    comm_set_purpose(gs->comm, "gradient bucket", (int)(b - gs->buckets), gs->n_buckets);
    stage(gs, b, 1);
    if (gs->dtype != DTNN_COMM_F32)
        to_half(gs, b);
    b->started = 1;
    if (gs->mode == DTNN_ALLREDUCE_HIERARCHICAL)
        return comm_hierarchical_allreduce(gs->comm, bucket_data(gs, b), b->end - b->begin,
                                           gs->dtype, err);
    /* Nothing left to overlap: the blocking all-reduce, faster than the non-blocking one. */
    if (gs->mode == DTNN_ALLREDUCE_BLOCKING)
        return comm_allreduce(gs->comm, bucket_data(gs, b), b->end - b->begin, gs->dtype, err);
    return comm_iallreduce(gs->comm, bucket_data(gs, b), b->end - b->begin, gs->dtype,
                           &b->request, err);
}

static void on_backward(size_t ready_from, void *user)
{
    dtnn_grad_sync *gs = user;
    if (gs->first_error.code)
        return;
    while (gs->next < gs->n_buckets && gs->buckets[gs->next].begin >= ready_from) {
        if (start_bucket(gs, &gs->buckets[gs->next], &gs->first_error))
            return;
        gs->next++;
    }
    /* Progress for the requests in flight (see the top of the file). */
    for (int i = 0; i < gs->next; i++) {
        int done;
        if (comm_test(gs->comm, gs->buckets[i].request, &done, &gs->first_error))
            return;
    }
}

dtnn_grad_sync *dtnn_grad_sync_create(dtnn_comm *comm, dtnn_model *m, dtnn_allreduce_mode mode,
                                      double bucket_mb, dtnn_comm_dtype dtype, dtnn_error *err)
{
    dtnn_grad_sync *gs = calloc(1, sizeof *gs);
    if (!gs) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    gs->comm = comm;
    gs->model = m;
    gs->mode = mode;
    gs->dtype = dtype;
    gs->n = dtnn_model_grads_length(m);     /* frozen parameters have no gradient */
    if (bucket_mb <= 0) {
        dtnn_bucket_auto_info info;
        if (dtnn_bucket_auto(comm, m, mode, dtype, &info, err)) {
            free(gs);
            return NULL;
        }
        bucket_mb = info.bucket_mb;
        snprintf(gs->bucket_reason, sizeof gs->bucket_reason, "%s", info.reason);
    }
    gs->bucket_mb = bucket_mb;
    size_t per = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
    if (mode == DTNN_ALLREDUCE_BLOCKING || per == 0 || per > gs->n)
        per = gs->n ? gs->n : 1;
    gs->n_buckets = (int)((gs->n + per - 1) / per);
    if (gs->n_buckets > COMM_MAX_REQUESTS) {
        dtnn_error_set(err, DTNN_ERR_ARG, "--bucket-mb %g gives %d buckets, more than %d: use "
                       "larger buckets", bucket_mb, gs->n_buckets, COMM_MAX_REQUESTS);
        free(gs);
        return NULL;
    }
    const int staged = !comm_reduces_backend_memory(comm, m->be);
    if (!staged && !m->be->host_memory && dtype != DTNN_COMM_F32) {
        /* the conversion to half precision is the host's (to_half), on a staging copy */
        dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "--comm-dtype %s with %s: gradients reduced "
                       "on the device travel in fp32 (use --comm-dtype fp32, or --collectives "
                       "mpi for half-precision transport through the host)",
                       dtype == DTNN_COMM_F16 ? "fp16" : "bf16", comm->ops->name);
        free(gs);
        return NULL;
    }
    gs->buckets = calloc(gs->n_buckets ? gs->n_buckets : 1, sizeof *gs->buckets);
    if (dtype != DTNN_COMM_F32)
        gs->staging = malloc(sizeof(uint16_t) * (gs->n ? gs->n : 1));
    if (staged)
        gs->host = m->be->op->host_alloc(m->be, sizeof(float) * (gs->n ? gs->n : 1));
    if (!gs->buckets || (dtype != DTNN_COMM_F32 && !gs->staging) || (staged && !gs->host)) {
        dtnn_grad_sync_free(gs);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for gradient buckets");
        return NULL;
    }
    for (int i = 0; i < gs->n_buckets; i++) {
        gs->buckets[i].end = gs->n - (size_t)i * per;
        gs->buckets[i].begin = gs->buckets[i].end > per ? gs->buckets[i].end - per : 0;
        gs->buckets[i].scale = 1024.0f;
    }
    return gs;
}

void dtnn_grad_sync_free(dtnn_grad_sync *gs)
{
    if (!gs)
        return;
    free(gs->buckets);
    free(gs->staging);
    if (gs->host)
        gs->model->be->op->host_free(gs->model->be, gs->host);
    free(gs);
}

void dtnn_grad_sync_begin(dtnn_grad_sync *gs)
{
    gs->next = 0;
    gs->first_error.code = DTNN_OK;
    for (int i = 0; i < gs->n_buckets; i++)
        gs->buckets[i].started = 0;
    if (gs->mode == DTNN_ALLREDUCE_OVERLAP)
        dtnn_model_set_backward_hook(gs->model, on_backward, gs);
}

dtnn_status dtnn_grad_sync_finish(dtnn_grad_sync *gs, dtnn_error *err)
{
    dtnn_model_set_backward_hook(gs->model, NULL, NULL);
    if (gs->first_error.code)
        return dtnn_error_set(err, gs->first_error.code, "%s", gs->first_error.message);
    double t0 = dtnn_now();
    dtnn_status st = DTNN_OK;
    for (int i = gs->next; i < gs->n_buckets && !st; i++)
        st = start_bucket(gs, &gs->buckets[i], err);
    gs->next = gs->n_buckets;
    for (int i = 0; i < gs->n_buckets && !st; i++) {
        bucket *b = &gs->buckets[i];
        if (gs->mode == DTNN_ALLREDUCE_OVERLAP)
            st = comm_wait(gs->comm, b->request, err);
        if (st)
            continue;
        if (gs->dtype != DTNN_COMM_F32 && !from_half(gs, b)) {
            /* fp16 overflow: redo this bucket in fp32 (identically on every rank); the host
             * copy still holds this rank's fp32 values (from_half wrote nothing). */
            b->scale *= 1.0f / 256.0f;
            comm_set_purpose(gs->comm, "fp16 overflow redo of gradient bucket", i,
                             gs->n_buckets);
            st = dtnn_comm_allreduce_sum(gs->comm, host_grads(gs) + b->begin,
                                         b->end - b->begin, err);
        }
        stage(gs, b, 0);
    }
    if (gs->comm->trace)
        trace_span(gs->comm->trace, TRACE_GRAD_WAIT, "gradient all-reduce wait", t0,
                   gs->comm->step);
    gs->wait_seconds += dtnn_now() - t0;
    return st;
}

double dtnn_grad_sync_wait_seconds(const dtnn_grad_sync *gs) { return gs->wait_seconds; }
int dtnn_grad_sync_bucket_count(const dtnn_grad_sync *gs) { return gs->n_buckets; }
double dtnn_grad_sync_bucket_mb(const dtnn_grad_sync *gs) { return gs->bucket_mb; }
const char *dtnn_grad_sync_bucket_reason(const dtnn_grad_sync *gs) { return gs->bucket_reason; }
