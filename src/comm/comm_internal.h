/*
 * comm_internal.h — inside src/comm/ only: a communicator is an ops table plus rank and size;
 * implementations: single process (comm_single.c), MPI (comm_mpi.c, the only file that
 * includes mpi.h) and NCCL over either (comm_nccl.c). The rest of the library uses comm.h.
 */
#ifndef DTNN_COMM_INTERNAL_H
#define DTNN_COMM_INTERNAL_H

#include "comm.h"

typedef struct {
    const char *name;
    dtnn_status (*allreduce_sum)(dtnn_comm *c, float *buf, size_t n, dtnn_error *err);
    dtnn_status (*allreduce_sum_f64)(dtnn_comm *c, double *buf, size_t n, dtnn_error *err);
    dtnn_status (*broadcast)(dtnn_comm *c, void *buf, size_t bytes, int root, dtnn_error *err);
    dtnn_status (*allgather)(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                             dtnn_error *err);
    /* Blocking in-place sum of n elements of dtype: MPI_Allreduce, whose tuned algorithms
     * beat the non-blocking one's (libnbc) when nothing is left to overlap. */
    dtnn_status (*allreduce)(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                             dtnn_error *err);
    /* In-place sum of n elements of dtype (F16 / BF16 are uint16 bit patterns). */
    dtnn_status (*iallreduce)(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                              int *request, dtnn_error *err);
    dtnn_status (*test)(dtnn_comm *c, int request, int *done, dtnn_error *err);
    dtnn_status (*wait)(dtnn_comm *c, int request, dtnn_error *err);
    /* Blocking: reduce inside the node, all-reduce among node leaders, broadcast in the node. */
    dtnn_status (*hierarchical_allreduce)(dtnn_comm *c, void *buf, size_t n,
                                          dtnn_comm_dtype dtype, dtnn_error *err);
    /* Rank r's bytes (counts[r] of them) one after another into recv on rank 0 (recv is
     * ignored elsewhere); a blob larger than the implementation can move is an error. */
    dtnn_status (*gather)(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                          const uint64_t *counts, dtnn_error *err);
    void (*abort)(dtnn_comm *c, int code, const char *message);
    void (*destroy)(dtnn_comm *c);
    /* Whether the buffers of the reductions above may be `be`'s memory (NULL: only when the
     * host may touch it, be->host_memory: MPI and the single process). A communicator of a
     * device's own (NCCL for cuda) says yes for its device; grad_sync stages through host
     * memory wherever it says no. */
    int (*reduces_backend_memory)(const dtnn_comm *c, const struct dtnn_backend *be);
} dtnn_comm_ops;

/* What the collectives being started are for, named in stall reports and traces: set by the
 * caller before a call (comm_set_purpose), cleared by the public calls when they return. */
typedef struct {
    const char *what;           /* a string literal ("gradient bucket"), or NULL */
    int index, count;           /* a bucket's index of count; -1, 0 otherwise */
} comm_purpose;

struct dtnn_comm {
    const dtnn_comm_ops *ops;
    int rank, size;
    int local_rank, local_size, nodes;
    int node;                   /* this rank's node, 0 .. nodes - 1 */
    int cores;                  /* see dtnn_comm_cores */
    double stall_timeout;       /* seconds; 0 = wait forever */
    char name[96];
    char launcher[96];          /* see dtnn_comm_launcher */
    char hosts[128];            /* see dtnn_comm_hosts */
    void *impl;
    comm_purpose purpose;
    int64_t step;               /* the training step under way (trainer), or -1 */
    dtnn_trace *trace;          /* records the collectives (NULL: none) */
};

/* "gradient bucket 3 of 8: MPI_Iallreduce", or the operation alone without a purpose. */
void comm_purpose_label(char *out, size_t size, const comm_purpose *p, const char *op);

/* The MPI communicator, or NULL when this build or this launch has none. */
dtnn_comm *comm_mpi_create(int *argc, char ***argv, dtnn_error *err);

#endif
