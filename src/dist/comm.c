/*
 * comm.c — the public communicator calls, dispatched to the implementation's ops table.
 */
#include "comm_internal.h"

void dtnn_comm_free(dtnn_comm *c)
{
    if (c)
        c->ops->destroy(c);
}

int dtnn_comm_rank(const dtnn_comm *c) { return c->rank; }
int dtnn_comm_size(const dtnn_comm *c) { return c->size; }

dtnn_status dtnn_comm_allreduce_sum(dtnn_comm *c, float *buf, size_t n, dtnn_error *err)
{
    return c->ops->allreduce_sum(c, buf, n, err);
}

dtnn_status dtnn_comm_allreduce_sum_f64(dtnn_comm *c, double *buf, size_t n, dtnn_error *err)
{
    return c->ops->allreduce_sum_f64(c, buf, n, err);
}

dtnn_status dtnn_comm_broadcast(dtnn_comm *c, void *buf, size_t bytes, int root,
                                dtnn_error *err)
{
    return c->ops->broadcast(c, buf, bytes, root, err);
}
