/*
 * grad_sync.h — gradient all-reduce for data-parallel training (see grad_sync.c).
 * Use: grad_sync_begin before the backward that completes a step's gradient, then
 * grad_sync_finish after it; the gradient is then the sum over ranks.
 */
#ifndef DTNN_GRAD_SYNC_H
#define DTNN_GRAD_SYNC_H

#include "dtnn.h"

/* Measured on the 2-core machine (see the closing note of the MPI issue). */
#define GRAD_SYNC_DEFAULT_BUCKET_MB 4.0

typedef struct grad_sync grad_sync;

grad_sync *grad_sync_create(dtnn_comm *comm, dtnn_model *m, dtnn_allreduce_mode mode,
                            double bucket_mb, dtnn_comm_dtype dtype, dtnn_error *err);
void grad_sync_free(grad_sync *gs);
void grad_sync_begin(grad_sync *gs);
dtnn_status grad_sync_finish(grad_sync *gs, dtnn_error *err);
/* Seconds spent completing all-reduces after backward (the exposed communication). */
double grad_sync_wait_seconds(const grad_sync *gs);
int grad_sync_bucket_count(const grad_sync *gs);

#endif
