/*
 * gradcheck.h — what test_gradcheck.c, gradcheck_semantics.c and gradcheck_values.c share
 * (gradcheck.c): the tolerances (their reasons are at the top of test_gradcheck.c) and the model
 * helpers. Every model is built with the seed SEED, for training, with an input gradient.
 */
#ifndef DTNN_TEST_GRADCHECK_H
#define DTNN_TEST_GRADCHECK_H

#include "testutil.h"

#define SMOOTH_EPS 1e-2 /* smooth layers */
#define KINK_EPS 1e-3   /* ReLU / max pooling in the model */
#define TOL 1e-2        /* relative error as the checker defines it */
#define KINK_TOL 2e-2   /* the float32 floor at eps 1e-3 */
#define BN_TOL 5e-2     /* models with batch norm */
#define BLOCK_EPS 3e-3  /* the ResNet block has both kinks and batch norm */
#define SEED 1234       /* every model is built with this seed */

dtnn_model *model_new(int c, int h, int w);
/* Adds a layer (inputs NULL: the previous layer) and counts a failure when it is refused;
 * returns its id. */
int add_layer(dtnn_model *m, const char *type, const char *name, const char *opts,
              const int *inputs, int n_inputs);
int layer(dtnn_model *m, const char *type, const char *opts);
dtnn_status build_ex(dtnn_model *m, int max_batch, int input_grad, size_t ws_limit,
                     dtnn_error *err);
int build(dtnn_model *m, int max_batch);
/* Step A, step B, step A again: A's gradients must repeat bit for bit. */
void check_repeatable(dtnn_model *m, int n, const char *label);
/* Builds, checks with step eps and tolerance tol, checks repeatability, frees m. */
void gradcheck(dtnn_model *m, int n, const char *label, double eps, double tol);
/* The single-input layer `type` adds its input gradient when another consumer wrote first. */
void check_accumulate(const char *type, const char *opts, int c, int h, int w, double tol);
/* dtnn_model_add must refuse with code and a message containing needle. */
void expect_add_error(const char *type, const char *opts, const int *inputs, int n_in,
                      dtnn_status code, const char *needle);
/* dtnn_model_build of m must fail with code and a message containing n1 and n2; frees m. */
void expect_build_error(dtnn_model *m, dtnn_status code, const char *n1, const char *n2);

/* gradcheck_semantics.c: the layers and options ONNX models bring. */
void check_semantics(void);
/* gradcheck_values.c: forward values against hand-computed expectations. */
void check_forward_values(void);

#endif
