/*
 * grad_sync.h — internals of the gradient all-reduce (the API is dtnn_grad_sync_* in dtnn.h).
 */
#ifndef DTNN_GRAD_SYNC_H
#define DTNN_GRAD_SYNC_H

#include "dtnn.h"

/* Measured on the 2-core machine (see the closing note of the MPI issue). */
#define GRAD_SYNC_DEFAULT_BUCKET_MB 4.0

#endif
