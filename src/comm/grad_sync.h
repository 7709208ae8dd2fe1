/*
 * grad_sync.h — internals of the gradient all-reduce (the API is dtnn_grad_sync_* in dtnn.h).
 */
#ifndef DTNN_GRAD_SYNC_H
#define DTNN_GRAD_SYNC_H

#include "dtnn.h"

#endif
