/*
 * cuda_backend.h — what the CUDA backend offers beyond its table, for its own tests: the
 * devices visible and the allocations made. The engine reaches the backend only through
 * registry.c and the table.
 */
#ifndef DTNN_CUDA_BACKEND_H
#define DTNN_CUDA_BACKEND_H

#include <stddef.h>

#include "../backend.h"

/* The CUDA devices visible: >= 0, or -1 with the runtime's reason in why. */
int cuda_backend_device_count(char *why, size_t len);
/* cudaMalloc and cudaMallocHost calls this backend has made so far (tests: a training step
 * must make none). */
size_t cuda_backend_allocations(const dtnn_backend *be);

#endif
