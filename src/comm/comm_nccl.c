/*
 * comm_nccl.c — the NCCL communicator (--collectives nccl): a communicator over another one
 * (the MPI one: its ranks, its host collectives) that reduces the cuda backend's memory on the
 * GPUs themselves with NCCL, on a communication stream of its own. The gradient all-reduce
 * (grad_sync.c) then works on the device's gradient in place, no host staging.
 *
 * Ordering without host synchronisation: a non-blocking all-reduce records an event on the
 * backend's compute stream (the kernels that wrote the bucket are queued before it), makes the
 * communication stream wait for it, queues ncclAllReduce and records the request's event;
 * wait makes the compute stream wait for that event, so the optimizer step queued after it
 * reads the sums, while the host goes on. The blocking calls wait on the host too, as their
 * callers (timings, the blocking strategy's cost model) expect.
 *
 * Host memory (the trainer's metrics, agreement checks, sync-BN's staged sums, checkpoints'
 * broadcasts) goes to the communicator below: a buffer is the device's when the runtime says
 * so (cudaPointerGetAttributes). hierarchical_allreduce is NCCL's own all-reduce on device
 * memory: NCCL already rings inside the node over NVLink and across nodes over the network.
 *
 * fp16 and bf16 buffers (--comm-dtype: grad_sync's half copies, made on the device by the
 * backend's half_pack) are summed as ncclFloat16 / ncclBfloat16.
 *
 * Stalls (--stall-timeout, dtnn_comm_set_stall_timeout): with a timeout the host does wait for
 * each all-reduce, polling its event and NCCL's asynchronous error, so that a sum that never
 * ends (a rank gone, a link down) becomes an error naming it, its bucket and the step, instead
 * of a hang in the next copy from the device. Past the timeout, or on an error NCCL reports
 * (a peer's failure), the communicator is aborted (ncclCommAbort makes its kernels return, so
 * the streams drain) and every later call fails with the reason; the job then ends as with
 * MPI's stall report, and a restart resumes from the last checkpoint. The price is the host's
 * overlap with those all-reduces; without a timeout (the default) the host never waits in a
 * step. Not covered: a rank lost before ncclCommInitRank returns.
 *
 * Not here: a bucket size measured on NCCL's link (dtnn_bucket_auto times host buffers, so
 * MPI's).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backend/backend.h"
#include "comm_internal.h"

dtnn_status dtnn_collectives_parse(const char *name, dtnn_collectives *out, dtnn_error *err)
{
    if (name && !strcmp(name, "mpi"))
        *out = DTNN_COLLECTIVES_MPI;
    else if (name && !strcmp(name, "nccl"))
        *out = DTNN_COLLECTIVES_NCCL;
    else
        return dtnn_error_set(err, DTNN_ERR_ARG, "collectives '%s': choose mpi (host staging "
                              "on a device) or nccl (on the GPUs)", name ? name : "");
    return DTNN_OK;
}

#ifdef DTNN_HAVE_NCCL

#include <cuda_runtime_api.h>
#include <nccl.h>


typedef struct {
    dtnn_comm *below;           /* borrowed: ranks and host collectives */
    ncclComm_t nccl;
    cudaStream_t stream;        /* the communication stream */
    cudaStream_t compute;       /* the backend's (borrowed) */
    int device;
    cudaEvent_t *done;          /* per request: its all-reduce finished */
    unsigned char *busy;        /* per request: started and not yet waited for */
    comm_purpose *purpose;      /* per request: what it sums, for a stall report */
    int cap;
    cudaEvent_t ready;          /* the compute stream's work so far (scratch) */
    cudaEvent_t summed;         /* a blocking sum's end (scratch) */
    char aborted[320];          /* why the communicator was aborted, or "" */
} nccl_impl;

static nccl_impl *impl_of(dtnn_comm *c) { return c->impl; }

static dtnn_status nccl_status(ncclResult_t r, const char *call, dtnn_error *err)
{
    if (r == ncclSuccess)
        return DTNN_OK;
    return dtnn_error_set(err, DTNN_ERR_COMM, "%s: %s", call, ncclGetErrorString(r));
}

static dtnn_status cuda_status(cudaError_t e, const char *call, dtnn_error *err)
{
    if (e == cudaSuccess)
        return DTNN_OK;
    return dtnn_error_set(err, DTNN_ERR_DEVICE, "%s: %s (%s)", call, cudaGetErrorName(e),
                          cudaGetErrorString(e));
}

static int on_device(const void *p)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static dtnn_status type_of(dtnn_comm_dtype dtype, ncclDataType_t *t, dtnn_error *err)
{
    switch (dtype) {
    case DTNN_COMM_F32:
        *t = ncclFloat32;
        return DTNN_OK;
    case DTNN_COMM_F16:
        *t = ncclFloat16;
        return DTNN_OK;
    case DTNN_COMM_BF16:
        *t = ncclBfloat16;
        return DTNN_OK;
    }
    return dtnn_error_set(err, DTNN_ERR_ARG, "nccl: unknown data type %d", (int)dtype);
}

/* Queues the in-place sum of n values of t on the communication stream after the compute
 * stream's work so far. */
static dtnn_status queue_sum(nccl_impl *s, void *buf, size_t n, ncclDataType_t t,
                             dtnn_error *err)
{
    dtnn_status st;
    if (s->aborted[0])
        return dtnn_error_set(err, DTNN_ERR_COMM, "%s", s->aborted);
    if ((st = cuda_status(cudaEventRecord(s->ready, s->compute), "cudaEventRecord", err)) ||
        (st = cuda_status(cudaStreamWaitEvent(s->stream, s->ready, 0), "cudaStreamWaitEvent",
                          err)))
        return st;
    return nccl_status(ncclAllReduce(buf, buf, n, t, ncclSum, s->nccl, s->stream),
                       "ncclAllReduce", err);
}

/* Ends the communicator after a stall or a failure NCCL reported: its kernels return, and
 * every later call fails with this message. */
static dtnn_status abort_stalled(dtnn_comm *c, const comm_purpose *p, const char *op,
                                 ncclResult_t async, double waited, dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    char label[160];
    comm_purpose_label(label, sizeof label, p, op);
    if (async != ncclSuccess && async != ncclInProgress)
        snprintf(s->aborted, sizeof s->aborted, "rank %d: NCCL failed in %s at step %lld after "
                 "%.1f s: %s (%s); the NCCL communicator was aborted", c->rank, label,
                 (long long)c->step, waited, ncclGetErrorString(async),
                 ncclGetLastError(s->nccl));
    else
        snprintf(s->aborted, sizeof s->aborted, "rank %d stalled %.1f s in %s at step %lld "
                 "(--stall-timeout %g): a rank stopped or its link failed; the NCCL "
                 "communicator was aborted", c->rank, waited, label, (long long)c->step,
                 c->stall_timeout);
    const ncclResult_t r = ncclCommAbort(s->nccl);
    s->nccl = NULL;
    if (r != ncclSuccess) {
        const size_t len = strlen(s->aborted);
        snprintf(s->aborted + len, sizeof s->aborted - len, " (ncclCommAbort: %s)",
                 ncclGetErrorString(r));
    }
    return dtnn_error_set(err, DTNN_ERR_COMM, "%s", s->aborted);
}

/* With a stall timeout, the host waits for ev (the end of the collective op for p), polling
 * (see the top of the file); without one, nothing. */
static dtnn_status watch(dtnn_comm *c, cudaEvent_t ev, const comm_purpose *p, const char *op,
                         dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (c->stall_timeout <= 0)
        return DTNN_OK;
    if (s->aborted[0])  /* its communicator is gone: the first reason stands */
        return dtnn_error_set(err, DTNN_ERR_COMM, "%s", s->aborted);
    const double t0 = dtnn__now();
    const struct timespec pause = {0, 100000};  /* 0.1 ms: far below a bucket's all-reduce */
    for (;;) {
        const cudaError_t e = cudaEventQuery(ev);
        if (e != cudaErrorNotReady)
            return cuda_status(e, "cudaEventQuery (nccl collective)", err);
        /* "not ready" is also left as the runtime's last error, which the backend's next
         * launch check would take for its own failure */
        cudaGetLastError();
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(s->nccl, &async);
        const double waited = dtnn__now() - t0;
        if ((async != ncclSuccess && async != ncclInProgress) || waited > c->stall_timeout)
            return abort_stalled(c, p, op, async, waited, err);
        nanosleep(&pause, NULL);
    }
}

/* A blocking sum: queued, then waited for on the host (watched for stalls). */
static dtnn_status blocking_sum(dtnn_comm *c, void *buf, size_t n, ncclDataType_t t,
                                dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    dtnn_status st = queue_sum(s, buf, n, t, err);
    if (!st)
        st = cuda_status(cudaEventRecord(s->summed, s->stream), "cudaEventRecord", err);
    if (!st)
        st = watch(c, s->summed, &c->purpose, "ncclAllReduce", err);
    return st ? st : cuda_status(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize "
                                 "(nccl all-reduce)", err);
}

static dtnn_status nccl_allreduce_sum(dtnn_comm *c, float *buf, size_t n, dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (!on_device(buf))
        return s->below->ops->allreduce_sum(s->below, buf, n, err);
    return blocking_sum(c, buf, n, ncclFloat32, err);
}

static dtnn_status nccl_allreduce_f64(dtnn_comm *c, double *buf, size_t n, dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (!on_device(buf))
        return s->below->ops->allreduce_sum_f64(s->below, buf, n, err);
    return blocking_sum(c, buf, n, ncclFloat64, err);
}

static dtnn_status nccl_allreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                  dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (!on_device(buf))
        return s->below->ops->allreduce(s->below, buf, n, dtype, err);
    ncclDataType_t t = ncclFloat32;
    dtnn_status st = type_of(dtype, &t, err);
    return st ? st : blocking_sum(c, buf, n, t, err);
}

static dtnn_status nccl_broadcast(dtnn_comm *c, void *buf, size_t bytes, int root,
                                  dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (!on_device(buf))
        return s->below->ops->broadcast(s->below, buf, bytes, root, err);
    if (s->aborted[0])
        return dtnn_error_set(err, DTNN_ERR_COMM, "%s", s->aborted);
    dtnn_status st;
    if ((st = cuda_status(cudaEventRecord(s->ready, s->compute), "cudaEventRecord", err)) ||
        (st = cuda_status(cudaStreamWaitEvent(s->stream, s->ready, 0), "cudaStreamWaitEvent",
                          err)) ||
        (st = nccl_status(ncclBroadcast(buf, buf, bytes, ncclUint8, root, s->nccl, s->stream),
                          "ncclBroadcast", err)) ||
        (st = cuda_status(cudaEventRecord(s->summed, s->stream), "cudaEventRecord", err)) ||
        (st = watch(c, s->summed, &c->purpose, "ncclBroadcast", err)))
        return st;
    return cuda_status(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (nccl "
                       "broadcast)", err);
}

static dtnn_status nccl_allgather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                                  dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    return s->below->ops->allgather(s->below, send, bytes, recv, err);
}

static dtnn_status nccl_gather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                               const uint64_t *counts, dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    return s->below->ops->gather(s->below, send, bytes, recv, counts, err);
}

/* A free request slot, growing the pool (host memory and events, no device memory). */
static int take_request(nccl_impl *s, dtnn_error *err)
{
    for (int i = 0; i < s->cap; i++)
        if (!s->busy[i])
            return i;
    if (s->cap >= COMM_MAX_REQUESTS) {
        dtnn_error_set(err, DTNN_ERR_COMM, "nccl: more than %d all-reduces in flight",
                       COMM_MAX_REQUESTS);
        return -1;
    }
    const int cap = s->cap ? 2 * s->cap : 64;
    cudaEvent_t *done = realloc(s->done, sizeof *done * (size_t)cap);
    if (done)
        s->done = done;
    unsigned char *busy = realloc(s->busy, (size_t)cap);
    if (busy)
        s->busy = busy;
    comm_purpose *purpose = realloc(s->purpose, sizeof *purpose * (size_t)cap);
    if (purpose)
        s->purpose = purpose;
    if (!done || !busy || !purpose) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for all-reduce requests");
        return -1;
    }
    for (int i = s->cap; i < cap; i++) {
        if (cuda_status(cudaEventCreateWithFlags(&s->done[i], cudaEventDisableTiming),
                        "cudaEventCreateWithFlags", err)) {
            s->cap = i;
            return -1;
        }
        s->busy[i] = 0;
    }
    const int first = s->cap;
    s->cap = cap;
    return first;
}

static dtnn_status nccl_iallreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                   int *request, dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (!on_device(buf))
        return dtnn_error_set(err, DTNN_ERR_ARG, "nccl: a non-blocking all-reduce of host "
                              "memory (the gradient should be the cuda backend's)");
    ncclDataType_t t = ncclFloat32;
    dtnn_status st = type_of(dtype, &t, err);
    if (st)
        return st;
    const int r = take_request(s, err);
    if (r < 0)
        return err->code;
    if ((st = queue_sum(s, buf, n, t, err)) ||
        (st = cuda_status(cudaEventRecord(s->done[r], s->stream), "cudaEventRecord", err)))
        return st;
    s->busy[r] = 1;
    s->purpose[r] = c->purpose;
    *request = r;
    return DTNN_OK;
}

static dtnn_status nccl_test(dtnn_comm *c, int request, int *done, dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (request < 0 || request >= s->cap || !s->busy[request]) {
        *done = 1;
        return DTNN_OK;
    }
    const cudaError_t e = cudaEventQuery(s->done[request]);
    if (e == cudaErrorNotReady) {
        cudaGetLastError();
        *done = 0;
        return DTNN_OK;
    }
    *done = 1;
    return cuda_status(e, "cudaEventQuery (nccl all-reduce)", err);
}

/* The compute stream waits for the request; the host does not (but with a stall timeout). */
static dtnn_status nccl_wait(dtnn_comm *c, int request, dtnn_error *err)
{
    nccl_impl *s = impl_of(c);
    if (request < 0 || request >= s->cap || !s->busy[request])
        return DTNN_OK;
    s->busy[request] = 0;
    dtnn_status st = watch(c, s->done[request], &s->purpose[request], "ncclAllReduce", err);
    if (st)
        return st;
    return cuda_status(cudaStreamWaitEvent(s->compute, s->done[request], 0),
                       "cudaStreamWaitEvent (after nccl all-reduce)", err);
}

static dtnn_status nccl_hierarchical(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                     dtnn_error *err)
{
    return nccl_allreduce(c, buf, n, dtype, err);
}

static void nccl_abort(dtnn_comm *c, int code, const char *message)
{
    nccl_impl *s = impl_of(c);
    if (s->nccl)
        ncclCommAbort(s->nccl);
    s->nccl = NULL;
    s->below->ops->abort(s->below, code, message);
}

static void nccl_destroy(dtnn_comm *c)
{
    nccl_impl *s = impl_of(c);
    if (s) {
        cudaSetDevice(s->device);
        if (s->stream)
            cudaStreamSynchronize(s->stream);
        if (s->nccl)
            ncclCommDestroy(s->nccl);
        for (int i = 0; i < s->cap; i++)
            cudaEventDestroy(s->done[i]);
        if (s->ready)
            cudaEventDestroy(s->ready);
        if (s->summed)
            cudaEventDestroy(s->summed);
        if (s->stream)
            cudaStreamDestroy(s->stream);
        free(s->done);
        free(s->busy);
        free(s->purpose);
        free(s);
    }
    free(c);
}

static int nccl_reduces(const dtnn_comm *c, const dtnn_backend *be)
{
    (void)c;
    return be->name && !strcmp(be->name, "cuda");
}

static const dtnn_comm_ops nccl_ops = {
    .name = "nccl",
    .allreduce_sum = nccl_allreduce_sum,
    .allreduce_sum_f64 = nccl_allreduce_f64,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .allreduce = nccl_allreduce,
    .iallreduce = nccl_iallreduce,
    .test = nccl_test,
    .wait = nccl_wait,
    .hierarchical_allreduce = nccl_hierarchical,
    .gather = nccl_gather,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
    .reduces_backend_memory = nccl_reduces,
};

dtnn_comm *comm_nccl_create(dtnn_comm *below, dtnn_backend *be, dtnn_error *err)
{
    if (!be || !be->op->native_stream) {
        dtnn_error_set(err, DTNN_ERR_ARG, "--collectives nccl needs a model on --device cuda "
                       "(this one is on %s)", be && be->name ? be->name : "no device");
        return NULL;
    }
    dtnn_comm *c = calloc(1, sizeof *c);
    nccl_impl *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c), free(s);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *c = *below;    /* ranks, nodes, names, stall timeout, trace */
    c->ops = &nccl_ops;
    c->impl = s;
    c->purpose = (comm_purpose){NULL, -1, 0};
    snprintf(c->name, sizeof c->name, "nccl over %.80s", below->name);
    s->below = below;
    s->compute = (cudaStream_t)be->op->native_stream(be, &s->device);
    /* rank 0's id reaches every rank through the communicator below */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    dtnn_status st = DTNN_OK;
    ncclResult_t r = ncclSuccess;
    if (below->rank == 0)
        r = ncclGetUniqueId(&id);
    if ((st = nccl_status(r, "ncclGetUniqueId", err)) == DTNN_OK)
        st = below->ops->broadcast(below, &id, sizeof id, 0, err);
    if (!st)
        st = cuda_status(cudaSetDevice(s->device), "cudaSetDevice", err);
    if (!st)
        st = cuda_status(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
                         "cudaStreamCreateWithFlags (nccl)", err);
    if (!st)
        st = cuda_status(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming),
                         "cudaEventCreateWithFlags", err);
    if (!st)
        st = cuda_status(cudaEventCreateWithFlags(&s->summed, cudaEventDisableTiming),
                         "cudaEventCreateWithFlags", err);
    if (!st)
        st = nccl_status(ncclCommInitRank(&s->nccl, below->size, id, below->rank),
                         "ncclCommInitRank", err);
    if (st) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        dtnn_error_set(err, st, "nccl communicator (rank %d of %d, device %d): %s", below->rank,
                       below->size, s->device, msg);
        nccl_destroy(c);
        return NULL;
    }
    return c;
}

#else

dtnn_comm *comm_nccl_create(dtnn_comm *below, dtnn_backend *be, dtnn_error *err)
{
    (void)below, (void)be;
    dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "--collectives nccl: this dtnn was built without "
                   "NCCL (it needs the cuda backend and nccl.h / libnccl at configure time; "
                   "NCCL_ROOT points at an install)");
    return NULL;
}

#endif
