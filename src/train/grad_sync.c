/*
 * grad_sync.c — the gradient all-reduce of data-parallel training, in three strategies:
 *   blocking      one blocking all-reduce (MPI_Allreduce) of the whole flat gradient after
 *                 backward;
 *   overlap       contiguous buckets of --bucket-mb (auto: src/train/bucket_auto.c), taken
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
 * Half-precision transport (fp16 / bf16): a bucket is converted into a uint16 staging buffer
 * by the backend (half_pack, where the gradient lives: on a GPU the device converts, so NCCL
 * sums half the bytes and MPI's staging moves half of them across PCIe), summed in that type
 * (MPI user operations widen to float per addition, NCCL likewise), and widened back by the
 * backend (half_unpack); weights and the optimizer stay fp32. fp16 has a small range, so each
 * bucket is multiplied by a power of two chosen from the previous step's reduced gradient,
 * which is identical on every rank, so all ranks pick the same scale without extra
 * communication. A bucket whose sum still
 * overflows is redone in fp32 and its scale lowered, again identically on all ranks. The
 * largest value and the overflow flag come from half_unpack in backend memory, read once per
 * step after the last bucket (on a GPU the one host wait of an fp16 step; bf16 has none).
 *
 * Backend memory: where the communicator reduces the backend's memory itself (MPI on the cpu
 * backend, whose memory is the host's: comm_reduces_backend_memory), it works on the gradient
 * in place. Elsewhere (a GPU or cpu-guarded under MPI) each bucket is downloaded into a host
 * staging copy of the gradient (the backend's host_alloc: pinned on a GPU) when it is started
 * (from the backward hook, so the copies overlap with the rest of backward as the all-reduces
 * do), reduced there, and uploaded when it completes; in half precision the half copy is what
 * travels.
 */
#include <math.h>
#include <string.h>

#include "../backend/backend.h"
#include "../comm/comm.h"
#include "../core/half.h"
#include "../core/trace.h"
#include "../model/model.h"

typedef struct {
    size_t begin, end;          /* float range of the flat gradient */
    int request;
    int started;
    float scale;                /* fp16 only */
} bucket;

struct dtnn_grad_sync {
    dtnn_comm *comm;
    dtnn_backend *be;           /* where grads lives */
    float *grads;               /* [n] the flat gradient reduced (backend memory) */
    dtnn_model *model;          /* only to be told when a range of grads is final */
    dtnn_allreduce_mode mode;
    dtnn_comm_dtype dtype;
    bucket *buckets;            /* buckets[0] is the last range of the buffer */
    int n_buckets;
    int next;                   /* next bucket to start */
    uint16_t *staging;          /* [n] backend memory: the half-precision copy (dtype != F32) */
    float *stats;               /* [2 * n_buckets] backend memory: half_unpack's (fp16) */
    float *host_stats;          /* their host copy */
    float *host;                /* [n] host copy of the gradient, when the backend's memory is
                                 * not the host's (backend host_alloc: pinned on a GPU) */
    uint16_t *host_half;        /* [n] host copy of staging, likewise (dtype != F32) */
    size_t n;
    double bucket_mb;           /* the size the buckets were cut at, MiB */
    char bucket_reason[240];    /* why (auto), or "" (given) */
    dtnn_error first_error;
    double wait_seconds;        /* time spent waiting after backward */
};

/* The gradient as the host reduces it: the model's own, or the staging copy. */
static float *host_grads(dtnn_grad_sync *gs)
{
    return gs->host ? gs->host : gs->grads;
}

/* Converts a bucket of the gradient into the half-precision staging, on the backend. */
static void to_half(dtnn_grad_sync *gs, const bucket *b)
{
    const float scale = gs->dtype == DTNN_COMM_F16 ? b->scale : 1.0f;
    be_run(gs->be, half_pack, gs->dtype, b->end - b->begin, gs->grads + b->begin, scale,
           gs->staging + b->begin);
    if (gs->host_half)
        be_download(gs->be, gs->host_half + b->begin, gs->staging + b->begin,
                    sizeof(uint16_t) * (b->end - b->begin));
}

/* Widens a reduced bucket back into the gradient, on the backend; with fp16, its overflow
 * flag and largest value go to stats (bucket_of), read by settle_fp16. */
static void from_half(dtnn_grad_sync *gs, const bucket *b, int bucket_of)
{
    if (gs->host_half)
        be_upload(gs->be, gs->staging + b->begin, gs->host_half + b->begin,
                  sizeof(uint16_t) * (b->end - b->begin));
    const float inv = gs->dtype == DTNN_COMM_F16 ? 1.0f / b->scale : 1.0f;
    be_run(gs->be, half_unpack, gs->dtype, b->end - b->begin, gs->staging + b->begin, inv,
           gs->grads + b->begin, gs->stats ? gs->stats + 2 * bucket_of : NULL);
}

/* What the communicator reduces: the gradient or its half copy, the host's where staged. */
static void *bucket_data(dtnn_grad_sync *gs, bucket *b)
{
    if (gs->dtype == DTNN_COMM_F32)
        return host_grads(gs) + b->begin;
    return (gs->host_half ? gs->host_half : gs->staging) + b->begin;
}

/* Moves a bucket's range between the model's gradient and the host copy (to_host: download). */
static void stage(dtnn_grad_sync *gs, const bucket *b, int to_host)
{
    if (!gs->host)
        return;
    const size_t bytes = sizeof(float) * (b->end - b->begin);
    if (to_host)
        be_download(gs->be, gs->host + b->begin, gs->grads + b->begin, bytes);
    else
        be_upload(gs->be, gs->grads + b->begin, gs->host + b->begin, bytes);
}

static dtnn_status start_bucket(dtnn_grad_sync *gs, bucket *b, dtnn_error *err)
{
    comm_set_purpose(gs->comm, "gradient bucket", (int)(b - gs->buckets), gs->n_buckets);
    if (gs->dtype == DTNN_COMM_F32)
        stage(gs, b, 1);
    else
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

/* The reducer itself: n floats of grads in be's memory, cut into buckets of bucket_mb
 * (> 0) from the end. It knows nothing of the model the gradient belongs to. */
static dtnn_grad_sync *reducer_create(dtnn_comm *comm, dtnn_backend *be, float *grads,
                                      size_t n_grads, dtnn_allreduce_mode mode, double bucket_mb,
                                      dtnn_comm_dtype dtype, dtnn_error *err)
{
    dtnn_grad_sync *gs = calloc(1, sizeof *gs);
    if (!gs) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    gs->comm = comm;
    gs->be = be;
    gs->grads = grads;
    gs->mode = mode;
    gs->dtype = dtype;
    gs->n = n_grads;
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
    const int staged = !comm_reduces_backend_memory(comm, be);
    const int half = dtype != DTNN_COMM_F32, fp16 = dtype == DTNN_COMM_F16;
    const size_t n = gs->n ? gs->n : 1, nb = gs->n_buckets ? (size_t)gs->n_buckets : 1;
    gs->buckets = calloc(nb, sizeof *gs->buckets);
    if (half)
        gs->staging = be_alloc(be, sizeof(uint16_t) * n);
    if (fp16) {
        gs->stats = be_alloc(be, 2 * sizeof(float) * nb);
        gs->host_stats = malloc(2 * sizeof(float) * nb);
    }
    if (staged) {
        gs->host = be->op->host_alloc(be, sizeof(float) * n);
        if (half)
            gs->host_half = be->op->host_alloc(be, sizeof(uint16_t) * n);
    }
    if (!gs->buckets || (half && !gs->staging) || (fp16 && (!gs->stats || !gs->host_stats)) ||
        (staged && (!gs->host || (half && !gs->host_half)))) {
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

dtnn_grad_sync *dtnn_grad_sync_create(dtnn_comm *comm, dtnn_model *m, dtnn_allreduce_mode mode,
                                      double bucket_mb, dtnn_comm_dtype dtype, dtnn_error *err)
{
    char reason[sizeof ((dtnn_bucket_auto_info *)0)->reason] = "";
    if (bucket_mb <= 0) {
        dtnn_bucket_auto_info info;
        if (dtnn_bucket_auto(comm, m, mode, dtype, &info, err))
            return NULL;
        bucket_mb = info.bucket_mb;
        snprintf(reason, sizeof reason, "%s", info.reason);
    }
    /* frozen parameters have no gradient: the length is the trainable part's */
    dtnn_grad_sync *gs = reducer_create(comm, model_backend(m), model_grads(m),
                                        dtnn_model_grads_length(m), mode, bucket_mb, dtype, err);
    if (gs) {
        gs->model = m;
        snprintf(gs->bucket_reason, sizeof gs->bucket_reason, "%s", reason);
    }
    return gs;
}

void dtnn_grad_sync_free(dtnn_grad_sync *gs)
{
    if (!gs)
        return;
    dtnn_backend *be = gs->be;
    free(gs->buckets);
    free(gs->host_stats);
    be_free(be, gs->staging);
    be_free(be, gs->stats);
    if (gs->host)
        be->op->host_free(be, gs->host);
    if (gs->host_half)
        be->op->host_free(be, gs->host_half);
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

/* After an fp16 step: each bucket's next scale, from its largest reduced value (the same on
 * every rank), and an overflowed bucket redone in fp32 (identically on every rank, from this
 * rank's gradient, which half_unpack left untouched) with its scale lowered. */
static dtnn_status settle_fp16(dtnn_grad_sync *gs, dtnn_error *err)
{
    be_download(gs->be, gs->host_stats, gs->stats, 2 * sizeof(float) * (size_t)gs->n_buckets);
    dtnn_status st = DTNN_OK;
    for (int i = 0; i < gs->n_buckets && !st; i++) {
        bucket *b = &gs->buckets[i];
        const float overflow = gs->host_stats[2 * i], largest = gs->host_stats[2 * i + 1];
        if (overflow == 0.0f) {
            /* the largest power of two that keeps this sum below 2^14 (a 4x margin) */
            if (largest > 0.0f)
                b->scale = fminf(ldexpf(1.0f, (int)floorf(log2f(16384.0f / largest))),
                                 16777216.0f);
            continue;
        }
        b->scale *= 1.0f / 256.0f;
        comm_set_purpose(gs->comm, "fp16 overflow redo of gradient bucket", i, gs->n_buckets);
        stage(gs, b, 1);
        st = dtnn_comm_allreduce_sum(gs->comm, host_grads(gs) + b->begin, b->end - b->begin,
                                     err);
        stage(gs, b, 0);
    }
    return st;
}

dtnn_status dtnn_grad_sync_finish(dtnn_grad_sync *gs, dtnn_error *err)
{
    dtnn_model_set_backward_hook(gs->model, NULL, NULL);
    if (gs->first_error.code)
        return dtnn_error_set(err, gs->first_error.code, "%s", gs->first_error.message);
    double t0 = dtnn__now();
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
        if (gs->dtype == DTNN_COMM_F32)
            stage(gs, b, 0);
        else
            from_half(gs, b, i);
    }
    if (!st && gs->dtype == DTNN_COMM_F16)
        st = settle_fp16(gs, err);
    trace_span(comm_trace(gs->comm), TRACE_GRAD_WAIT, "gradient all-reduce wait", t0,
               comm_step(gs->comm));
    gs->wait_seconds += dtnn__now() - t0;
    return st;
}

double dtnn_grad_sync_wait_seconds(const dtnn_grad_sync *gs) { return gs->wait_seconds; }
int dtnn_grad_sync_bucket_count(const dtnn_grad_sync *gs) { return gs->n_buckets; }
double dtnn_grad_sync_bucket_mb(const dtnn_grad_sync *gs) { return gs->bucket_mb; }
const char *dtnn_grad_sync_bucket_reason(const dtnn_grad_sync *gs) { return gs->bucket_reason; }

/* Public, taking the model, so that a user's training loop need not know its backend. */
dtnn_comm *dtnn_comm_nccl_create(dtnn_comm *below, dtnn_model *m, dtnn_error *err)
{
    return comm_nccl_create(below, m ? model_backend(m) : NULL, err);
}
