/*
 * comm.h — what the rest of the library may ask of a communicator beyond dtnn.h's dtnn_comm_*:
 * the collectives in a chosen element type, non-blocking all-reduces with requests that test
 * and wait take (at most COMM_MAX_REQUESTS in flight), and the labels stall reports and traces
 * name a collective by. The communicator's struct and ops table stay in comm_internal.h.
 */
#ifndef DTNN_COMM_H
#define DTNN_COMM_H

#include "../core/internal.h"

#define COMM_MAX_REQUESTS 4096

struct dtnn_backend;    /* backend/backend.h */

/* What the collectives being started are for, named in stall reports and traces: set by the
 * caller before a call, cleared by the public calls when they return. what is a string
 * literal ("gradient bucket") or NULL; index of count names a bucket (-1, 0 otherwise). */
void comm_set_purpose(dtnn_comm *c, const char *what, int index, int count);
/* The training step under way, for stall reports and traces (-1: none). */
void comm_set_step(dtnn_comm *c, int64_t step);
dtnn_status comm_gather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                        const uint64_t *counts, dtnn_error *err);

dtnn_status comm_iallreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                            int *request, dtnn_error *err);
/* dtnn_comm_ops.reduces_backend_memory, with its default. */
int comm_reduces_backend_memory(const dtnn_comm *c, const struct dtnn_backend *be);
dtnn_status comm_allreduce(dtnn_comm *c, void *buf, size_t n, dtnn_comm_dtype dtype,
                           dtnn_error *err);
dtnn_status comm_test(dtnn_comm *c, int request, int *done, dtnn_error *err);
dtnn_status comm_wait(dtnn_comm *c, int request, dtnn_error *err);
dtnn_status comm_hierarchical_allreduce(dtnn_comm *c, void *buf, size_t n,
                                        dtnn_comm_dtype dtype, dtnn_error *err);

/* NCCL over `below` (its ranks carry NCCL's set-up) for a model on `be`, which must offer a
 * native_stream (the cuda backend); an error naming what is missing otherwise, or where this
 * build has no NCCL (comm_nccl.c). */
dtnn_comm *comm_nccl_create(dtnn_comm *below, struct dtnn_backend *be, dtnn_error *err);

/* The trace the communicator records its collectives into (NULL: none), and the training
 * step under way (-1: none), for callers that record spans of their own around them. */
dtnn_trace *comm_trace(const dtnn_comm *c);
int64_t comm_step(const dtnn_comm *c);

#endif
