/*
 * cuda_conv.c — the CUDA backend's convolutions on cuDNN 9: a plan per layer geometry, made
 * when the model is built, holds the descriptors and the algorithm of each pass (forward,
 * backward-data, backward-filter), each chosen by measurement (cudnnFind*, run at the largest
 * batch), and the workspace the largest of the three needs, which the engine allocates once
 * for all layers (conv_workspace: model_plan.c takes the maximum over layers).
 *
 * API: the legacy cudnnConvolution* calls, not the graph API. They are deprecated in cuDNN 9
 * but present in every 9.x, plain C (this file is compiled by the C compiler like the rest of
 * the library), and cover what the table needs: groups, dilation, the three passes, measured
 * algorithm choice, bias and its gradient. The graph API's C form (cudnnBackend*) takes dozens
 * of attribute calls per operation, more code to get wrong before it has run on a GPU, and its
 * convenient form (cudnn-frontend) is C++. The graph API is worth its cost for what this file
 * does not do yet, fused conv + bias + ReLU and bf16 NHWC; it would replace this file only.
 *
 * Numbers: math type CUDNN_FMA_MATH, plain fp32 (cuDNN's default allows TF32 on tensor cores,
 * 10 mantissa bits, which would not pass an fp32 comparison with the CPU). Among the measured
 * algorithms that fit the workspace limit the fastest deterministic one is taken (the same
 * numbers on every run, as on the CPU), a nondeterministic one only when no deterministic one
 * fits.
 *
 * Asymmetric padding (ONNX models only: pad_extra_h / pad_extra_w) is refused when the plan is
 * made, with a message saying so: cuDNN pads symmetrically, and padding the input into a
 * workspace copy would cost a pass over the input each call for a case CNNs seldom have.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudnn.h>

#include "../../core/internal.h"
#include "cuda_internal.h"

struct conv_plan {
    conv_geom g;
    int max_batch;
    cudnnTensorDescriptor_t x, y;   /* [max_batch, C, H, W], [max_batch, K, P, Q] */
    cudnnTensorDescriptor_t xn, yn; /* the same for a smaller batch, set by the call */
    cudnnTensorDescriptor_t bias;   /* [1, K, 1, 1] */
    cudnnFilterDescriptor_t w;      /* [K, C / groups, R, S] */
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t workspace;
    char method[96];
};

static const float one = 1.0f, zero = 0.0f;

static cudnnHandle_t handle_of(dtnn_backend *be) { return (cudnnHandle_t)cuda_of(be)->cudnn; }

/* Records a failed cuDNN call of a pass (build-time calls report through err instead). */
static int cudnn_ok(dtnn_backend *be, cudnnStatus_t st, const char *what, const conv_plan *p)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return 1;
    cuda_fail(be, "%s (conv %dx%d, %d -> %d channels, %dx%d input): %s", what, p->g.R, p->g.S,
              p->g.C, p->g.K, p->g.H, p->g.W, cudnnGetErrorString(st));
    return 0;
}

void cuda_conv_plan_free(dtnn_backend *be, conv_plan *p)
{
    (void)be;
    if (!p)
        return;
    if (p->x)
        cudnnDestroyTensorDescriptor(p->x);
    if (p->y)
        cudnnDestroyTensorDescriptor(p->y);
    if (p->xn)
        cudnnDestroyTensorDescriptor(p->xn);
    if (p->yn)
        cudnnDestroyTensorDescriptor(p->yn);
    if (p->bias)
        cudnnDestroyTensorDescriptor(p->bias);
    if (p->w)
        cudnnDestroyFilterDescriptor(p->w);
    if (p->conv)
        cudnnDestroyConvolutionDescriptor(p->conv);
    free(p);
}

/* A perf result's fields, whichever pass it is from. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
} measured;

/* The fastest (cuDNN returns them fastest first) usable result within the limit,
 * deterministic if any is; -1 if none. */
static int choose(const measured *m, int count, size_t limit)
{
    int any = -1;
    for (int i = 0; i < count; i++) {
        /* the descriptor asks for FMA math; a tensor-core result would not be fp32 */
        if (m[i].status != CUDNN_STATUS_SUCCESS || m[i].memory > limit ||
            m[i].math == CUDNN_TENSOR_OP_MATH ||
            m[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
            continue;
        if (m[i].determinism == CUDNN_DETERMINISTIC)
            return i;
        if (any < 0)
            any = i;
    }
    return any;
}

static const char *fwd_name(int a)
{
    static const char *const names[] = {"implicit-gemm", "implicit-precomp-gemm", "gemm",
                                        "direct", "fft", "fft-tiling", "winograd",
                                        "winograd-nonfused"};
    return a >= 0 && a < (int)(sizeof names / sizeof names[0]) ? names[a] : "?";
}

/* For --profile: the forward algorithm by name, the backward ones by cuDNN's number. */
static void name_method(conv_plan *p)
{
    snprintf(p->method, sizeof p->method, "cudnn %s/bwd-data %d/bwd-filter %d", fwd_name(p->fwd),
             (int)p->bwd_data, (int)p->bwd_filter);
}

static dtnn_status step(cudnnStatus_t st, const char *call, const conv_geom *g, dtnn_error *err)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return DTNN_OK;
    return dtnn_error_set(err, DTNN_ERR_DEVICE, "cuda conv plan (%dx%d, %d -> %d channels, "
                          "%dx%d input, stride %dx%d, groups %d): %s failed: %s", g->R, g->S,
                          g->C, g->K, g->H, g->W, g->stride_h, g->stride_w, g->groups, call,
                          cudnnGetErrorString(st));
}

/* Measures the three passes and keeps the chosen algorithms and the largest workspace. */
static dtnn_status measure(cudnnHandle_t h, conv_plan *p, size_t limit, dtnn_error *err)
{
    const conv_geom *g = &p->g;
    measured m[16];
    int count = 0;
    dtnn_status st;
    {
        cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if ((st = step(cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->conv, p->y,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                            &count, r),
                       "cudnnFindConvolutionForwardAlgorithm", g, err)))
            return st;
        for (int i = 0; i < count; i++)
            m[i] = (measured){(int)r[i].algo, r[i].status, r[i].memory, r[i].determinism,
                              r[i].mathType};
        const int c = choose(m, count, limit);
        if (c < 0)
            goto none;
        p->fwd = (cudnnConvolutionFwdAlgo_t)m[c].algo;
        p->workspace = DTNN_MAX(p->workspace, m[c].memory);
    }
    {
        cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if ((st = step(cudnnFindConvolutionBackwardDataAlgorithm(
                           h, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                           &count, r),
                       "cudnnFindConvolutionBackwardDataAlgorithm", g, err)))
            return st;
        for (int i = 0; i < count; i++)
            m[i] = (measured){(int)r[i].algo, r[i].status, r[i].memory, r[i].determinism,
                              r[i].mathType};
        const int c = choose(m, count, limit);
        if (c < 0)
            goto none;
        p->bwd_data = (cudnnConvolutionBwdDataAlgo_t)m[c].algo;
        p->workspace = DTNN_MAX(p->workspace, m[c].memory);
    }
    {
        cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if ((st = step(cudnnFindConvolutionBackwardFilterAlgorithm(
                           h, p->x, p->y, p->conv, p->w,
                           CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, r),
                       "cudnnFindConvolutionBackwardFilterAlgorithm", g, err)))
            return st;
        for (int i = 0; i < count; i++)
            m[i] = (measured){(int)r[i].algo, r[i].status, r[i].memory, r[i].determinism,
                              r[i].mathType};
        const int c = choose(m, count, limit);
        if (c < 0)
            goto none;
        p->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)m[c].algo;
        p->workspace = DTNN_MAX(p->workspace, m[c].memory);
    }
    name_method(p);
    return DTNN_OK;
none:
    return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "cuda conv plan (%dx%d, %d -> %d channels, "
                          "%dx%d input, batch %d): cuDNN has no fp32 algorithm for a pass within "
                          "the workspace limit of %zu bytes (raise the workspace limit)", g->R,
                          g->S, g->C, g->K, g->H, g->W, p->max_batch, limit);
}

/* The choice measured before for this geometry, batch and limit, or NULL. */
static const cuda_conv_choice *cached(const cuda_state *s, const conv_desc *d, size_t limit)
{
    for (int i = 0; i < s->n_choices; i++) {
        const cuda_conv_choice *c = &s->choices[i];
        if (c->max_batch == d->max_batch && c->limit == limit &&
            !memcmp(&c->g, &d->g, sizeof c->g))
            return c;
    }
    return NULL;
}

/* Keeps p's choice for the next layer of its geometry (not kept when out of memory: that layer
 * measures again). */
static void remember(cuda_state *s, const conv_plan *p, size_t limit)
{
    if (s->n_choices == s->cap_choices) {
        const int cap = s->cap_choices ? 2 * s->cap_choices : 16;
        cuda_conv_choice *c = realloc(s->choices, sizeof *c * (size_t)cap);
        if (!c)
            return;
        s->choices = c;
        s->cap_choices = cap;
    }
    s->choices[s->n_choices++] = (cuda_conv_choice){p->g, p->max_batch, limit, (int)p->fwd,
                                                    (int)p->bwd_data, (int)p->bwd_filter,
                                                    p->workspace};
}

conv_plan *cuda_conv_plan_create(dtnn_backend *be, const conv_desc *d, dtnn_error *err)
{
    const conv_geom *g = &d->g;
    if (g->pad_extra_h || g->pad_extra_w) {
        dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "device 'cuda': convolution %dx%d with "
                       "asymmetric padding (bottom minus top %d, right minus left %d) is not "
                       "supported (cuDNN pads symmetrically): run this model on cpu, or "
                       "export it with symmetric padding", g->R, g->S, g->pad_extra_h,
                       g->pad_extra_w);
        return NULL;
    }
    conv_plan *p = calloc(1, sizeof *p);
    if (!p) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory making a convolution plan");
        return NULL;
    }
    p->g = *g;
    p->max_batch = d->max_batch;
    cudnnHandle_t h = handle_of(be);
    const size_t limit = d->workspace_limit ? d->workspace_limit : (size_t)-1;
    int n, c, hh, ww;
    dtnn_status st;
    if ((st = step(cudnnCreateTensorDescriptor(&p->x), "cudnnCreateTensorDescriptor", g, err)) ||
        (st = step(cudnnCreateTensorDescriptor(&p->y), "cudnnCreateTensorDescriptor", g, err)) ||
        (st = step(cudnnCreateTensorDescriptor(&p->xn), "cudnnCreateTensorDescriptor", g, err)) ||
        (st = step(cudnnCreateTensorDescriptor(&p->yn), "cudnnCreateTensorDescriptor", g, err)) ||
        (st = step(cudnnCreateTensorDescriptor(&p->bias), "cudnnCreateTensorDescriptor", g,
                   err)) ||
        (st = step(cudnnCreateFilterDescriptor(&p->w), "cudnnCreateFilterDescriptor", g, err)) ||
        (st = step(cudnnCreateConvolutionDescriptor(&p->conv),
                   "cudnnCreateConvolutionDescriptor", g, err)) ||
        (st = step(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                              d->max_batch, g->C, g->H, g->W),
                   "cudnnSetTensor4dDescriptor (input)", g, err)) ||
        (st = step(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                              d->max_batch, g->K, g->P, g->Q),
                   "cudnnSetTensor4dDescriptor (output)", g, err)) ||
        (st = step(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                              g->K, 1, 1),
                   "cudnnSetTensor4dDescriptor (bias)", g, err)) ||
        (st = step(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g->K,
                                              g->C / g->groups, g->R, g->S),
                   "cudnnSetFilter4dDescriptor", g, err)) ||
        (st = step(cudnnSetConvolution2dDescriptor(p->conv, g->pad_h, g->pad_w, g->stride_h,
                                                   g->stride_w, g->dil_h, g->dil_w,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                   "cudnnSetConvolution2dDescriptor", g, err)) ||
        (st = step(cudnnSetConvolutionGroupCount(p->conv, g->groups),
                   "cudnnSetConvolutionGroupCount", g, err)) ||
        (st = step(cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH),
                   "cudnnSetConvolutionMathType", g, err)) ||
        (st = step(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &c, &hh, &ww),
                   "cudnnGetConvolution2dForwardOutputDim", g, err))) {
        cuda_conv_plan_free(be, p);
        return NULL;
    }
    if (n != d->max_batch || c != g->K || hh != g->P || ww != g->Q) {
        dtnn_error_set(err, DTNN_ERR_SHAPE, "cuda conv plan: cuDNN's output %dx%dx%d differs "
                       "from the layer's %dx%dx%d (conv %dx%d, stride %d, padding %d)", c, hh,
                       ww, g->K, g->P, g->Q, g->R, g->S, g->stride_h, g->pad_h);
        cuda_conv_plan_free(be, p);
        return NULL;
    }
    const cuda_conv_choice *known = cached(cuda_of(be), d, limit);
    if (known) {
        p->fwd = (cudnnConvolutionFwdAlgo_t)known->fwd;
        p->bwd_data = (cudnnConvolutionBwdDataAlgo_t)known->bwd_data;
        p->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)known->bwd_filter;
        p->workspace = known->workspace;
        name_method(p);
        return p;
    }
    if (measure(h, p, limit, err) != DTNN_OK) {
        cuda_conv_plan_free(be, p);
        return NULL;
    }
    remember(cuda_of(be), p, limit);
    return p;
}

size_t cuda_conv_workspace(const conv_plan *p) { return p->workspace; }

const char *cuda_conv_method(const conv_plan *p) { return p->method; }

/* The input and output descriptors for a batch of n: the plan's own at max_batch, else the
 * spare pair set to n, whose workspace must fit what was planned; 0 on failure (recorded). */
static int descs_for(dtnn_backend *be, const conv_plan *p, int n, cudnnTensorDescriptor_t *x,
                     cudnnTensorDescriptor_t *y)
{
    const conv_geom *g = &p->g;
    if (n == p->max_batch) {
        *x = p->x, *y = p->y;
        return 1;
    }
    if (n <= 0 || n > p->max_batch) {
        cuda_fail(be, "conv: batch %d outside the plan's 1..%d", n, p->max_batch);
        return 0;
    }
    if (!cudnn_ok(be, cudnnSetTensor4dDescriptor(p->xn, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n,
                                                 g->C, g->H, g->W),
                  "cudnnSetTensor4dDescriptor (input)", p) ||
        !cudnn_ok(be, cudnnSetTensor4dDescriptor(p->yn, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n,
                                                 g->K, g->P, g->Q),
                  "cudnnSetTensor4dDescriptor (output)", p))
        return 0;
    *x = p->xn, *y = p->yn;
    cudnnHandle_t h = handle_of(be);
    size_t f = 0, bd = 0, bf = 0;
    if (!cudnn_ok(be, cudnnGetConvolutionForwardWorkspaceSize(h, *x, p->w, p->conv, *y, p->fwd,
                                                              &f),
                  "cudnnGetConvolutionForwardWorkspaceSize", p) ||
        !cudnn_ok(be, cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, *y, p->conv, *x,
                                                                   p->bwd_data, &bd),
                  "cudnnGetConvolutionBackwardDataWorkspaceSize", p) ||
        !cudnn_ok(be, cudnnGetConvolutionBackwardFilterWorkspaceSize(h, *x, *y, p->conv, p->w,
                                                                     p->bwd_filter, &bf),
                  "cudnnGetConvolutionBackwardFilterWorkspaceSize", p))
        return 0;
    const size_t need = DTNN_MAX(f, DTNN_MAX(bd, bf));
    if (need > p->workspace) {
        cuda_fail(be, "conv %dx%d: batch %d needs %zu bytes of workspace, more than the %zu "
                  "planned at batch %d", g->R, g->S, n, need, p->workspace, p->max_batch);
        return 0;
    }
    return 1;
}

void cuda_conv_forward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                       const float *w, const float *bias, float *y, void *workspace)
{
    cudnnTensorDescriptor_t xd, yd;
    if (cuda_of(be)->failed || !descs_for(be, p, n, &xd, &yd))
        return;
    cudnnHandle_t h = handle_of(be);
    if (!cudnn_ok(be, cudnnConvolutionForward(h, &one, xd, x, p->w, w, p->conv, p->fwd,
                                              workspace, p->workspace, &zero, yd, y),
                  "cudnnConvolutionForward", p))
        return;
    if (bias)
        cudnn_ok(be, cudnnAddTensor(h, &one, p->bias, bias, &one, yd, y),
                 "cudnnAddTensor (conv bias)", p);
}

void cuda_conv_backward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                        const float *dy, const float *w, float *dw, float *db, float *dx,
                        int accumulate, void *workspace)
{
    cudnnTensorDescriptor_t xd, yd;
    if (cuda_of(be)->failed || !descs_for(be, p, n, &xd, &yd))
        return;
    cudnnHandle_t h = handle_of(be);
    /* dw and db add (beta 1), as the table says; dx is written (beta 0: cuDNN then does not
     * read it) or added to */
    if (dw && !cudnn_ok(be, cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, dy, p->conv,
                                                           p->bwd_filter, workspace,
                                                           p->workspace, &one, p->w, dw),
                        "cudnnConvolutionBackwardFilter", p))
        return;
    if (db && !cudnn_ok(be, cudnnConvolutionBackwardBias(h, &one, yd, dy, &one, p->bias, db),
                        "cudnnConvolutionBackwardBias", p))
        return;
    if (dx)
        cudnn_ok(be, cudnnConvolutionBackwardData(h, &one, p->w, w, yd, dy, p->conv,
                                                  p->bwd_data, workspace, p->workspace,
                                                  accumulate ? &one : &zero, xd, dx),
                 "cudnnConvolutionBackwardData", p);
}
