/*
 * comm_internal.h — a communicator is an ops table plus rank and size; implementations: single
 * process (comm_single.c), MPI (to come, the only file that includes mpi.h).
 */
#ifndef DTNN_COMM_INTERNAL_H
#define DTNN_COMM_INTERNAL_H

#include "../core/internal.h"

typedef struct {
    const char *name;
    dtnn_status (*allreduce_sum)(dtnn_comm *c, float *buf, size_t n, dtnn_error *err);
    dtnn_status (*allreduce_sum_f64)(dtnn_comm *c, double *buf, size_t n, dtnn_error *err);
    dtnn_status (*broadcast)(dtnn_comm *c, void *buf, size_t bytes, int root, dtnn_error *err);
    void (*destroy)(dtnn_comm *c);
} dtnn_comm_ops;

struct dtnn_comm {
    const dtnn_comm_ops *ops;
    int rank, size;
    void *impl;
};

#endif
