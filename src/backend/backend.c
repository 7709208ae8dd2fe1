/*
 * backend.c — what the engine does with any backend through its table alone: the bracketed
 * host <-> backend copies every engine file uses, and the measured product rate that device
 * questions (the automatic bucket size's backward estimate) are answered with, so no engine
 * file asks a CPU question of a GPU model.
 */
#include <stdlib.h>

#include "../core/internal.h"
#include "backend.h"

void be_upload(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        be_run(be, upload, dst, src, bytes);
}

void be_download(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        be_run(be, download, dst, src, bytes);
}

void be_zero(dtnn_backend *be, void *p, size_t bytes)
{
    if (bytes)
        be_run(be, zero, p, bytes);
}

void *be_alloc(dtnn_backend *be, size_t bytes)
{
    be_enter(be);
    void *p = be->op->alloc(be, bytes);
    be_leave(be);
    return p;
}

void be_free(dtnn_backend *be, void *p)
{
    if (p)
        be_run(be, free, p);
}

size_t be_count_nonfinite(dtnn_backend *be, const float *x, size_t n)
{
    be_enter(be);
    size_t bad = be->op->count_nonfinite(be, x, n);
    be_leave(be);
    return bad;
}

/* The best of up to 11 (at least 3, then until 50 ms have passed), the first untimed: a shared
 * machine only ever slows a repetition down. Products run below their peak inside
 * convolutions, so the estimate it feeds is short of the real backward, which errs towards
 * larger buckets. */
double be_matmul_rate(dtnn_backend *be)
{
    enum { N = 256 };
    const linear_desc d = {N, N, DTNN_PRECISION_FP32};
    float *x = be_alloc(be, sizeof(float) * N * N);
    float *w = be_alloc(be, sizeof(float) * N * N);
    float *y = be_alloc(be, sizeof(float) * N * N);
    double best = 1e30;
    if (x && w && y) {
        const double start = dtnn__now();
        for (int r = 0; r < 11 && (r < 3 || dtnn__now() - start < 0.05); r++) {
            const double t0 = dtnn__now();
            be_run(be, linear_forward, &d, N, x, w, NULL, y, NULL);
            be_sync(be);
            const double t = dtnn__now() - t0;
            if (r > 0 && t < best)
                best = t;
        }
    }
    be_free(be, x);
    be_free(be, w);
    be_free(be, y);
    return best > 0 && best < 1e30 ? 2.0 * N * N * (double)N / best : 0;
}
