/*
 * comm_single.c — the communicator of a single process: rank 0 of 1, every collective is the
 * identity. The trainer always talks to a dtnn_comm, so MPI (comm_mpi.c) and later NCCL slot in
 * behind the same calls without touching it.
 */
#include <string.h>

#include "comm_internal.h"
#include "launch.h"

static dtnn_status single_allreduce(dtnn_comm *c, float *buf, size_t n, dtnn_error *err)
{
    (void)c, (void)buf, (void)n, (void)err;
    return DTNN_OK;
}

static dtnn_status single_allreduce_f64(dtnn_comm *c, double *buf, size_t n, dtnn_error *err)
{
    (void)c, (void)buf, (void)n, (void)err;
    return DTNN_OK;
}

static dtnn_status single_broadcast(dtnn_comm *c, void *buf, size_t bytes, int root,
                                    dtnn_error *err)
{
    (void)c, (void)buf, (void)bytes;
    if (root != 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "broadcast from rank %d of 1", root);
    return DTNN_OK;
}

static dtnn_status single_allgather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                                    dtnn_error *err)
{
    (void)c, (void)err;
    memmove(recv, send, bytes);
    return DTNN_OK;
}

static dtnn_status single_allreduce_dtype(dtnn_comm *c, void *buf, size_t n,
                                          dtnn_comm_dtype dtype, dtnn_error *err)
{
    (void)c, (void)buf, (void)n, (void)dtype, (void)err;
    return DTNN_OK;
}

static dtnn_status single_iallreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                                     int *request, dtnn_error *err)
{
    (void)c, (void)buf, (void)n, (void)dtype, (void)err;
    *request = 0;
    return DTNN_OK;
}

static dtnn_status single_test(dtnn_comm *c, int request, int *done, dtnn_error *err)
{
    (void)c, (void)request, (void)err;
    *done = 1;
    return DTNN_OK;
}

static dtnn_status single_wait(dtnn_comm *c, int request, dtnn_error *err)
{
    (void)c, (void)request, (void)err;
    return DTNN_OK;
}

static dtnn_status single_hier(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                               dtnn_error *err)
{
    (void)c, (void)buf, (void)n, (void)dtype, (void)err;
    return DTNN_OK;
}

static dtnn_status single_gather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                                 const uint64_t *counts, dtnn_error *err)
{
    (void)c, (void)counts, (void)err;
    if (bytes)
        memcpy(recv, send, bytes);
    return DTNN_OK;
}

static void single_abort(dtnn_comm *c, int code, const char *message)
{
    (void)c, (void)code, (void)message;
}

static void single_free(dtnn_comm *c) { free(c); }

static const dtnn_comm_ops single_ops = {
    .name = "single",
    .allreduce_sum = single_allreduce,
    .allreduce_sum_f64 = single_allreduce_f64,
    .broadcast = single_broadcast,
    .allgather = single_allgather,
    .allreduce = single_allreduce_dtype,
    .iallreduce = single_iallreduce,
    .test = single_test,
    .wait = single_wait,
    .hierarchical_allreduce = single_hier,
    .gather = single_gather,
    .abort = single_abort,
    .destroy = single_free,
};

dtnn_comm *dtnn_comm_create_single(void)
{
    dtnn_comm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ops = &single_ops;
    c->rank = 0;
    c->size = 1;
    c->local_rank = 0;
    c->local_size = 1;
    c->nodes = 1;
    uint64_t mask[DTNN_CPU_MASK_WORDS];
    c->cores = dtnn__cpu_affinity(mask);
    snprintf(c->name, sizeof c->name, "single process");
    launch_describe(c->launcher, sizeof c->launcher);
    launch_this_host(c->hosts, sizeof c->hosts);
    return c;
}
