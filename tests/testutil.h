/*
 * testutil.h — the small harness every C test uses: checks that count failures, a comparison
 * that prints max abs / relative error against a stated tolerance, and a finite-difference
 * gradient checker for whole models (so every layer is checked in the context it is used).
 */
#ifndef DTNN_TESTUTIL_H
#define DTNN_TESTUTIL_H

#include <stddef.h>
#include <stdio.h>

#include "dtnn.h"

extern int test_failures;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                  \
            test_failures++;                                                                 \
        }                                                                                    \
    } while (0)

#define CHECK_OK(expr, errp)                                                                 \
    do {                                                                                     \
        dtnn_status st_ = (expr);                                                            \
        if (st_ != DTNN_OK) {                                                                \
            fprintf(stderr, "FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,         \
                    dtnn_strerror(st_), (errp)->message);                                    \
            test_failures++;                                                                 \
        }                                                                                    \
    } while (0)

/* Compares got to want; prints "label: max abs E, max rel E (tol T)"; counts a failure when
 * any |got - want| > atol + rtol * |want|. Returns 1 when it passed. */
int test_compare(const char *label, const float *got, const float *want, size_t n, double atol,
                 double rtol);

/* Compares bytes of got and want exactly; prints "label  identical" or "... differ  FAIL" and
 * counts a failure. Returns 1 when they are the same. */
int tu_same_bits(const char *label, const void *got, const void *want, size_t bytes);

/* Fills x with a fixed pseudo-random pattern in [-1, 1) from seed. */
void test_fill(float *x, size_t n, unsigned seed);

/* 1 (and says why) when the CPU kernel set DTNN_CPU asks for cannot run here: the test's
 * variant for that set (NAME_avx2, NAME_avx512) then exits 77, skipped. */
int tu_kernels_unavailable(const char *test);

/* Prints the summary line and returns the exit code. */
int test_finish(const char *name);

/*
 * Finite-difference gradient check of a built (training) model, with the loss
 * L = sum(output * probe) for a fixed random probe, in double-sided differences of step eps.
 * Checks d L / d params (every parameter, or up to max_checks sampled ones per tensor) and
 * d L / d input. Returns the number of mismatches; prints the worst error per tensor.
 */
int test_gradcheck(dtnn_model *m, int n, const char *label, double eps, double tol);

/*
 * White-box views of a model built on a host-memory backend (cpu): the flat buffers and the
 * activations where they are, for tests of the CPU kernels that perturb parameters in place.
 * They abort on a backend whose memory the host may not touch: tests meant to run on every
 * backend use the copies of dtnn.h (dtnn_model_read, dtnn_model_read_output, ...).
 */
float *tu_params(dtnn_model *m);
float *tu_grads(dtnn_model *m);
unsigned char *tu_buffers(dtnn_model *m);
const float *tu_output(const dtnn_model *m, int *n, int *classes);
/* The output gradient to write (marks the loss as done, as dtnn_model_set_output_grad). */
float *tu_output_grad(dtnn_model *m);
const float *tu_input_grad(const dtnn_model *m);
float *tu_opt_state(dtnn_optimizer *o);
/* Host copies (malloc'd; the caller frees them), on any backend: the whole region, the output
 * of the last forward, the input gradient. */
void *tu_copy_region(const dtnn_model *m, dtnn_region r);
float *tu_copy_output(const dtnn_model *m);
float *tu_copy_input_grad(const dtnn_model *m);
/* The device the C tests build their models on: $DTNN_DEVICE, else cpu. */
const char *tu_device(void);

/* The gradient all-reduce tests' model: conv 3x3 (4 filters) on 1x8x8, flatten, linear to 3,
 * for batches of 4, built for training on `device`. NULL (a failure counted) when it cannot
 * be built. */
dtnn_model *tu_small_net(const char *device);
/* Its training gradients (copied into out) for one fixed batch of 4, the loss scaled by
 * loss_scale, summed through gs between backward and the copy when gs is not NULL. */
void tu_small_net_grads(dtnn_model *m, dtnn_grad_sync *gs, float loss_scale, float *out);

#endif
