/*
 * cuda_launch.cuh — the launch conventions of the kernel files (nvcc only): 256-thread blocks
 * over a grid-stride loop (any count fits the grid; the cap keeps huge counts from asking for
 * more blocks than help), a launch skipped for zero work (a zero-block launch is an error),
 * each launch checked and recorded under the operation's name, and every operation skipped
 * once the backend has failed (cuda_internal.h says why).
 */
#ifndef DTNN_CUDA_LAUNCH_CUH
#define DTNN_CUDA_LAUNCH_CUH

#include "cuda_internal.h"

enum { CU_THREADS = 256 };

static inline unsigned cu_blocks(size_t n)
{
    const size_t blocks = (n + CU_THREADS - 1) / CU_THREADS;
    return (unsigned)(blocks < 65536 ? blocks : 65536);
}

/* i over [0, n) in a grid-stride loop */
#define CU_LOOP(i, n)                                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);            \
         i += (size_t)blockDim.x * gridDim.x)

/* kernel<<<...>>>(args) over n threads on the backend's stream, checked as `what` */
#define CU_LAUNCH(be, what, kernel, n, ...)                                                    \
    do {                                                                                       \
        if ((n) == 0)                                                                          \
            break;                                                                             \
        kernel<<<cu_blocks(n), CU_THREADS, 0, cuda_of(be)->stream>>>(__VA_ARGS__);             \
        cuda_ok((be), cudaGetLastError(), what);                                               \
    } while (0)

#define CU_SKIP_IF_FAILED(be)                                                                  \
    do {                                                                                       \
        if (cuda_of(be)->failed)                                                               \
            return;                                                                            \
    } while (0)

#endif
