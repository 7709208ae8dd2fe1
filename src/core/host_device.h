/*
 * host_device.h — DTNN_HOST_DEVICE marks a header-inline function that the C compilers and
 * nvcc both compile: __host__ __device__ under nvcc, nothing in C. It lets one definition of a
 * formula serve the CPU and the CUDA backend, so the two cannot drift apart.
 */
#ifndef DTNN_HOST_DEVICE_H
#define DTNN_HOST_DEVICE_H

#ifdef __CUDACC__
#define DTNN_HOST_DEVICE __host__ __device__
#else
#define DTNN_HOST_DEVICE
#endif

#endif
