/*
 * parity.h — what test_backend_parity.c and its case files (parity_pools.c,
 * parity_elementwise.c, parity_optim.c; one executable) share: the two backends compared, a
 * tensor on both, and the checks of the other backend's result against the cpu's (their
 * tolerances and the reasons for them are at the top of test_backend_parity.c).
 */
#ifndef DTNN_TEST_PARITY_H
#define DTNN_TEST_PARITY_H

#include "testutil.h"

#include "backend/backend.h"

/* The reference backend, and the one under test (set while its cases run). */
extern dtnn_backend *cpu, *other;

/* A tensor on both backends: h is the CPU's (input or result), d the GPU's. */
typedef struct {
    float *h, *d;
    size_t n;
} buf;

/* n values of test_fill(seed) times scale, uploaded to the other backend too. */
buf make(size_t n, unsigned seed, float scale);
void drop(buf *b);
/* A GPU's result against the CPU's: tolerance tol times the largest magnitude. */
void check(const char *label, const buf *b, double tol);
/* n doubles on the other backend (dev) against the cpu's (want), the same way. */
void check_doubles(const char *label, const double *dev, const double *want, size_t n,
                   double tol);
/* bytes on the other backend (dev) against the cpu's (want), exactly. */
void check_bytes(const char *label, const void *dev, const void *want, size_t bytes);
/* n doubles on the other backend. */
double *dev_doubles(size_t n);
/* Whether b's arithmetic is the cpu table's own functions (a wrapper of cpu's, as
 * cpu-guarded), so that its results must equal cpu's exactly. */
int runs_cpu_kernels(const dtnn_backend *b);

/* parity_pools.c: max and average pooling, reductions, upsampling, layer normalisation. */
void test_pools(void);
/* parity_elementwise.c: add, copies, fill, dropout, the non-finite count; broadcast binary
 * operations, constant padding and the option-A shortcut. */
void test_elementwise(void);
void test_broadcast_pad_shortcut(void);
/* parity_optim.c: the losses and the optimizer steps. */
void test_losses(void);
void test_optimizers(void);

#endif
