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
 * does not do yet, fused conv + bias + ReLU; it would replace this file only.
 *
 * Numbers: in fp32, math type CUDNN_FMA_MATH, plain fp32 (cuDNN's default allows TF32 on
 * tensor cores, 10 mantissa bits, which would not pass an fp32 comparison with the CPU). Among
 * the measured algorithms that fit the workspace limit the fastest deterministic one is taken
 * (the same numbers on every run, as on the CPU), a nondeterministic one only when no
 * deterministic one fits.
 *
 * bf16 (dtnn.h): the three passes run on bf16 copies of their operands, which the plan's
 * workspace holds after cuDNN's own (x, w, y or dy, and one output), in cuDNN's
 * PSEUDO_BFLOAT16 configuration: bf16 tensors, fp32 compute, tensor-core math. Their bf16
 * results are widened into the engine's fp32 tensors (bf16.cu), the bias added after, and the
 * bias gradient is summed from the fp32 dy: the CPU's bf16 emulation step for step
 * (backend/cpu/cpu_conv.c), so the two differ only in the order of the fp32 sums.
 *
 * Layout of the bf16 copies: NCHW or channels-last (NHWC tensors, KRSC filters), whichever
 * the measurement finds faster for the geometry (the sum of the three chosen passes' times),
 * NHWC only where cuDNN has an algorithm for it. The engine's tensors stay NCHW: the copies
 * exist anyway, so the transposing conversions (bf16.cu) make the layout change free of extra
 * passes over memory; tensor-core kernels are native to NHWC, and PyTorch's AMP runs ResNets
 * channels-last for this reason. fp32 plans stay NCHW: they have no copy to fold a transpose
 * into, and without tensor cores (TF32 is off) NCHW is cuDNN's own layout for them.
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
    int bf16;
    int nhwc;                       /* bf16: the copies are channels-last */
    float measured_ms;              /* the chosen passes' measured times, summed */
    /* x, y, xn, yn and w are in the passes' data type and layout (fp32, or bf16 copies) */
    cudnnTensorDescriptor_t x, y;   /* [max_batch, C, H, W], [max_batch, K, P, Q] */
    cudnnTensorDescriptor_t xn, yn; /* the same for a smaller batch, set by the call */
    cudnnTensorDescriptor_t yf, yfn;    /* bf16: the fp32 output (bias gradient); else NULL */
    cudnnTensorDescriptor_t bias;   /* [1, K, 1, 1], fp32 */
    cudnnFilterDescriptor_t w;      /* [K, C / groups, R, S] */
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    /* bf16: the math type each pass's algorithm was measured with, set before the pass (the
     * descriptor's TENSOR_OP_MATH lets cuDNN report results of other math types, whose
     * kernels and workspace may differ); fp32 plans keep FMA_MATH, which rules out TF32 */
    cudnnMathType_t math_fwd, math_bwd_data, math_bwd_filter;
    size_t cudnn_workspace;         /* the algorithms' scratch, at the workspace's start */
    size_t workspace;               /* that and, in bf16, the copies after it */
    char method[96];
};

static const float one = 1.0f, zero = 0.0f;

static cudnnHandle_t handle_of(dtnn_backend *be) { return (cudnnHandle_t)cuda_of(be)->cudnn; }

/* Records a failed cuDNN call of a pass (build-time calls report through err instead). */
static int cudnn_ok(dtnn_backend *be, cudnnStatus_t st, const char *what, const conv_plan *p)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return 1;
    cuda_fail(be, "%s (conv %dx%d, %d -> %d channels, %dx%d input%s): %s", what, p->g.R, p->g.S,
              p->g.C, p->g.K, p->g.H, p->g.W, p->bf16 ? ", bf16" : "", cudnnGetErrorString(st));
    return 0;
}

/* A bf16 pass's measured math type, set on the plan's descriptor (a handle: the plan itself
 * does not change); 0 on failure (recorded). */
static int math_for(dtnn_backend *be, const conv_plan *p, cudnnMathType_t math)
{
    return cudnn_ok(be, cudnnSetConvolutionMathType(p->conv, math),
                    "cudnnSetConvolutionMathType", p);
}

void cuda_conv_plan_free(dtnn_backend *be, conv_plan *p)
{
    (void)be;
    if (!p)
        return;
    cudnnTensorDescriptor_t *tensors[] = {&p->x, &p->y, &p->xn, &p->yn, &p->yf, &p->yfn,
                                          &p->bias};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        if (*tensors[i])
            cudnnDestroyTensorDescriptor(*tensors[i]);
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
    float time;                     /* ms */
} measured;

/* The fastest (cuDNN returns them fastest first) usable result within the limit,
 * deterministic if any is; -1 if none. Tensor-core results only in bf16: in fp32 they would
 * be TF32. */
static int choose(const measured *m, int count, size_t limit, int tensor_cores)
{
    int any = -1;
    for (int i = 0; i < count; i++) {
        const int tensor = m[i].math == CUDNN_TENSOR_OP_MATH ||
                           m[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        if (m[i].status != CUDNN_STATUS_SUCCESS || m[i].memory > limit ||
            (tensor && !tensor_cores))
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
    snprintf(p->method, sizeof p->method, "cudnn%s %s/bwd-data %d/bwd-filter %d",
             p->bf16 ? (p->nhwc ? " bf16 nhwc" : " bf16 nchw") : "", fwd_name(p->fwd),
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

/* One pass's measurement: runs `find` (a cudnnFind* call filling `perf`, an array of
 * PERF_TYPE of length MAX), then keeps the chosen algorithm in `dst` and grows the workspace;
 * jumps to `none` when no algorithm fits. The three passes' perf structs differ in type only. */
#define MEASURE_PASS(PERF_TYPE, MAX, find, name, dst, dst_math)                                \
    do {                                                                                       \
        PERF_TYPE perf[MAX];                                                                   \
        if ((st = step(find, name, g, err)))                                                   \
            return st;                                                                         \
        for (int i = 0; i < count; i++)                                                        \
            m[i] = (measured){(int)perf[i].algo, perf[i].status, perf[i].memory,               \
                              perf[i].determinism, perf[i].mathType, perf[i].time};            \
        const int c = choose(m, count, limit, p->bf16);                                        \
        if (c < 0)                                                                             \
            goto none;                                                                         \
        dst = m[c].algo;                                                                       \
        dst_math = m[c].math;                                                                  \
        p->measured_ms += m[c].time;                                                           \
        p->cudnn_workspace = DTNN_MAX(p->cudnn_workspace, m[c].memory);                        \
    } while (0)

/* Measures the three passes and keeps the chosen algorithms and the largest workspace. */
static dtnn_status measure(cudnnHandle_t h, conv_plan *p, size_t limit, dtnn_error *err)
{
    const conv_geom *g = &p->g;
    measured m[16];
    int count = 0, algo = 0;
    dtnn_status st;
    p->measured_ms = 0.0f;
    MEASURE_PASS(cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                 cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->conv, p->y,
                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count,
                                                      perf),
                 "cudnnFindConvolutionForwardAlgorithm", algo, p->math_fwd);
    p->fwd = (cudnnConvolutionFwdAlgo_t)algo;
    MEASURE_PASS(cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                 cudnnFindConvolutionBackwardDataAlgorithm(
                     h, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                     &count, perf),
                 "cudnnFindConvolutionBackwardDataAlgorithm", algo, p->math_bwd_data);
    p->bwd_data = (cudnnConvolutionBwdDataAlgo_t)algo;
    MEASURE_PASS(cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                 cudnnFindConvolutionBackwardFilterAlgorithm(
                     h, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                     &count, perf),
                 "cudnnFindConvolutionBackwardFilterAlgorithm", algo, p->math_bwd_filter);
    p->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)algo;
    name_method(p);
    return DTNN_OK;
none:
    return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "cuda conv plan (%dx%d, %d -> %d channels, "
                          "%dx%d input, batch %d): cuDNN has no %s algorithm for a pass within "
                          "the workspace limit of %zu bytes (raise the workspace limit)", g->R,
                          g->S, g->C, g->K, g->H, g->W, p->max_batch,
                          p->bf16 ? (p->nhwc ? "bf16 NHWC" : "bf16") : "fp32", limit);
}
#undef MEASURE_PASS

/* The choice measured before for this geometry, batch, limit and precision, or NULL. */
static const cuda_conv_choice *cached(const cuda_state *s, const conv_desc *d, size_t limit)
{
    for (int i = 0; i < s->n_choices; i++) {
        const cuda_conv_choice *c = &s->choices[i];
        if (c->max_batch == d->max_batch && c->limit == limit &&
            c->precision == d->precision && !memcmp(&c->g, &d->g, sizeof c->g))
            return c;
    }
    return NULL;
}

/* Keeps p's choice for the next layer of its geometry (not kept when out of memory: that layer
 * measures again). */
static void remember(cuda_state *s, const conv_plan *p, size_t limit, dtnn_precision precision)
{
    if (s->n_choices == s->cap_choices) {
        const int cap = s->cap_choices ? 2 * s->cap_choices : 16;
        cuda_conv_choice *c = realloc(s->choices, sizeof *c * (size_t)cap);
        if (!c)
            return;
        s->choices = c;
        s->cap_choices = cap;
    }
    s->choices[s->n_choices++] = (cuda_conv_choice){p->g, p->max_batch, limit, precision,
                                                    (int)p->fwd, (int)p->bwd_data,
                                                    (int)p->bwd_filter, (int)p->math_fwd,
                                                    (int)p->math_bwd_data,
                                                    (int)p->math_bwd_filter, p->nhwc,
                                                    p->cudnn_workspace};
}

/* Element counts of the bf16 copies: an input batch, the weights, an output batch. */
static size_t input_count(const conv_plan *p, int n)
{
    return (size_t)n * p->g.C * p->g.H * p->g.W;
}

static size_t weight_count(const conv_plan *p)
{
    return (size_t)p->g.K * (p->g.C / p->g.groups) * p->g.R * p->g.S;
}

static size_t output_count(const conv_plan *p, int n)
{
    return (size_t)n * p->g.K * p->g.P * p->g.Q;
}

/* The bf16 copies in the workspace, after cuDNN's scratch: x, w, y (forward) or dy
 * (backward), then one output (dw, then dx). */
typedef struct {
    uint16_t *x, *w, *y, *out;
} bf16_copies;

static bf16_copies copies_at(const conv_plan *p, void *workspace)
{
    bf16_copies c;
    c.x = (uint16_t *)((char *)workspace + cuda_round256(p->cudnn_workspace));
    c.w = c.x + cuda_round256(input_count(p, p->max_batch));
    c.y = c.w + cuda_round256(weight_count(p));
    c.out = c.y + cuda_round256(output_count(p, p->max_batch));
    return c;
}

/* The copies' conversions in the plan's layout, for `batches` tensors of `channels` x
 * `spatial` values (an input or output batch: n images of C x H*W or K x P*Q; the weights: K
 * filters of C/groups x R*S). Channels-last transposes each one; NCHW copies as it is. */
static void to_copy(dtnn_backend *be, const conv_plan *p, int batches, int channels,
                    int spatial, const float *src, uint16_t *copy)
{
    if (p->nhwc)
        cuda_to_bf16_t(be, batches, channels, spatial, src, copy);
    else
        cuda_to_bf16(be, (size_t)batches * channels * spatial, src, copy);
}

/* The way back: dst = (or, with accumulate, +=) the copy widened, + bias [channels] (bias
 * NULL: none; with a bias, dst is written). */
static void from_copy(dtnn_backend *be, const conv_plan *p, int batches, int channels,
                      int spatial, const uint16_t *copy, const float *bias, float *dst,
                      int accumulate)
{
    if (p->nhwc)
        cuda_from_bf16_t(be, batches, channels, spatial, copy, bias, dst, accumulate);
    else if (bias)
        cuda_from_bf16_bias(be, batches, channels, (size_t)spatial, copy, bias, dst);
    else
        cuda_from_bf16(be, (size_t)batches * channels * spatial, copy, dst, accumulate);
}

static void size_workspace(conv_plan *p)
{
    p->workspace = p->cudnn_workspace;
    if (p->bf16) {
        const size_t in = cuda_round256(input_count(p, p->max_batch));
        const size_t w = cuda_round256(weight_count(p));
        p->workspace = cuda_round256(p->cudnn_workspace) +
                       sizeof(uint16_t) * (in + w + cuda_round256(output_count(p, p->max_batch)) +
                                           DTNN_MAX(in, w));
    }
}

/* Creates and sets the plan's descriptors for max_batch. */
static dtnn_status describe(conv_plan *p, dtnn_error *err)
{
    const conv_geom *g = &p->g;
    const cudnnDataType_t dt = p->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    const cudnnTensorFormat_t fmt = p->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnTensorDescriptor_t *tensors[] = {&p->x, &p->y, &p->xn, &p->yn, &p->bias, &p->yf,
                                          &p->yfn};
    dtnn_status st;
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0] - (p->bf16 ? 0 : 2); i++)
        if ((st = step(cudnnCreateTensorDescriptor(tensors[i]), "cudnnCreateTensorDescriptor",
                       g, err)))
            return st;
    if ((st = step(cudnnCreateFilterDescriptor(&p->w), "cudnnCreateFilterDescriptor", g, err)) ||
        (st = step(cudnnCreateConvolutionDescriptor(&p->conv),
                   "cudnnCreateConvolutionDescriptor", g, err)) ||
        (st = step(cudnnSetTensor4dDescriptor(p->x, fmt, dt, p->max_batch, g->C, g->H, g->W),
                   "cudnnSetTensor4dDescriptor (input)", g, err)) ||
        (st = step(cudnnSetTensor4dDescriptor(p->y, fmt, dt, p->max_batch, g->K, g->P, g->Q),
                   "cudnnSetTensor4dDescriptor (output)", g, err)) ||
        (p->yf && (st = step(cudnnSetTensor4dDescriptor(p->yf, CUDNN_TENSOR_NCHW,
                                                        CUDNN_DATA_FLOAT, p->max_batch, g->K,
                                                        g->P, g->Q),
                             "cudnnSetTensor4dDescriptor (fp32 output)", g, err))) ||
        (st = step(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                              g->K, 1, 1),
                   "cudnnSetTensor4dDescriptor (bias)", g, err)) ||
        (st = step(cudnnSetFilter4dDescriptor(p->w, dt, fmt, g->K, g->C / g->groups, g->R,
                                              g->S),
                   "cudnnSetFilter4dDescriptor", g, err)) ||
        /* fp32 compute in both: PSEUDO_BFLOAT16 for bf16 tensors */
        (st = step(cudnnSetConvolution2dDescriptor(p->conv, g->pad_h, g->pad_w, g->stride_h,
                                                   g->stride_w, g->dil_h, g->dil_w,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                   "cudnnSetConvolution2dDescriptor", g, err)) ||
        (st = step(cudnnSetConvolutionGroupCount(p->conv, g->groups),
                   "cudnnSetConvolutionGroupCount", g, err)) ||
        (st = step(cudnnSetConvolutionMathType(p->conv, p->bf16 ? CUDNN_TENSOR_OP_MATH
                                                                 : CUDNN_FMA_MATH),
                   "cudnnSetConvolutionMathType", g, err)))
        return st;
    int n, c, hh, ww;
    if ((st = step(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &c, &hh, &ww),
                   "cudnnGetConvolution2dForwardOutputDim", g, err)))
        return st;
    if (n != p->max_batch || c != g->K || hh != g->P || ww != g->Q)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "cuda conv plan: cuDNN's output %dx%dx%d "
                              "differs from the layer's %dx%dx%d (conv %dx%d, stride %d, "
                              "padding %d)", c, hh, ww, g->K, g->P, g->Q, g->R, g->S,
                              g->stride_h, g->pad_h);
    return DTNN_OK;
}

/* A plan in one layout (nhwc: bf16 only), its algorithms those of `known` or measured; NULL
 * with a message in err when it cannot be made. */
static conv_plan *plan_in(dtnn_backend *be, const conv_desc *d, size_t limit, int nhwc,
                          const cuda_conv_choice *known, dtnn_error *err)
{
    conv_plan *p = calloc(1, sizeof *p);
    if (!p) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory making a convolution plan");
        return NULL;
    }
    p->g = d->g;
    p->max_batch = d->max_batch;
    p->bf16 = d->precision == DTNN_PRECISION_BF16;
    p->nhwc = nhwc;
    if (describe(p, err) != DTNN_OK) {
        cuda_conv_plan_free(be, p);
        return NULL;
    }
    if (known) {
        p->fwd = (cudnnConvolutionFwdAlgo_t)known->fwd;
        p->bwd_data = (cudnnConvolutionBwdDataAlgo_t)known->bwd_data;
        p->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)known->bwd_filter;
        p->math_fwd = (cudnnMathType_t)known->math_fwd;
        p->math_bwd_data = (cudnnMathType_t)known->math_bwd_data;
        p->math_bwd_filter = (cudnnMathType_t)known->math_bwd_filter;
        p->cudnn_workspace = known->workspace;
        name_method(p);
    } else if (measure(handle_of(be), p, limit, err) != DTNN_OK) {
        cuda_conv_plan_free(be, p);
        return NULL;
    }
    size_workspace(p);
    return p;
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
    const size_t limit = d->workspace_limit ? d->workspace_limit : (size_t)-1;
    const cuda_conv_choice *known = cached(cuda_of(be), d, limit);
    if (known)
        return plan_in(be, d, limit, known->nhwc, known, err);
    /* bf16: channels-last unless it is slower or cuDNN has no algorithm in it (the top of the
     * file), or DTNN_CUDA_CONV_LAYOUT says otherwise */
    const int bf16 = d->precision == DTNN_PRECISION_BF16;
    const cuda_layout wish = cuda_of(be)->conv_layout;
    conv_plan *p = NULL;
    dtnn_error spare;
    if (bf16 && wish != CUDA_LAYOUT_NCHW)
        p = plan_in(be, d, limit, 1, NULL, &spare);
    if (!p || wish == CUDA_LAYOUT_MEASURED) {
        conv_plan *nchw = plan_in(be, d, limit, 0, NULL, p ? &spare : err);
        if (nchw && (!p || nchw->measured_ms < p->measured_ms)) {
            cuda_conv_plan_free(be, p);
            p = nchw;
        } else {
            cuda_conv_plan_free(be, nchw);
        }
    }
    if (p)
        remember(cuda_of(be), p, limit, d->precision);
    return p;
}

size_t cuda_conv_workspace(const conv_plan *p) { return p->workspace; }

const char *cuda_conv_method(const conv_plan *p) { return p->method; }

/* The descriptors for a batch of n: the input and output in the passes' type and the fp32
 * output (bf16 plans; else the output again). The plan's own at max_batch, else the spares
 * set to n, whose workspace must fit what was planned; 0 on failure (recorded). */
typedef struct {
    cudnnTensorDescriptor_t x, y, yf;
} batch_descs;

static int descs_for(dtnn_backend *be, const conv_plan *p, int n, batch_descs *d)
{
    const conv_geom *g = &p->g;
    if (n == p->max_batch) {
        *d = (batch_descs){p->x, p->y, p->bf16 ? p->yf : p->y};
        return 1;
    }
    if (n <= 0 || n > p->max_batch) {
        cuda_fail(be, "conv: batch %d outside the plan's 1..%d", n, p->max_batch);
        return 0;
    }
    const cudnnDataType_t dt = p->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    const cudnnTensorFormat_t fmt = p->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    if (!cudnn_ok(be, cudnnSetTensor4dDescriptor(p->xn, fmt, dt, n, g->C, g->H, g->W),
                  "cudnnSetTensor4dDescriptor (input)", p) ||
        !cudnn_ok(be, cudnnSetTensor4dDescriptor(p->yn, fmt, dt, n, g->K, g->P, g->Q),
                  "cudnnSetTensor4dDescriptor (output)", p) ||
        (p->bf16 && !cudnn_ok(be, cudnnSetTensor4dDescriptor(p->yfn, CUDNN_TENSOR_NCHW,
                                                             CUDNN_DATA_FLOAT, n, g->K, g->P,
                                                             g->Q),
                              "cudnnSetTensor4dDescriptor (fp32 output)", p)))
        return 0;
    *d = (batch_descs){p->xn, p->yn, p->bf16 ? p->yfn : p->yn};
    cudnnHandle_t h = handle_of(be);
    size_t f = 0, bd = 0, bf = 0;
    /* each query under its pass's math type (bf16; fp32 keeps FMA_MATH throughout) */
    if ((p->bf16 && !math_for(be, p, p->math_fwd)) ||
        !cudnn_ok(be, cudnnGetConvolutionForwardWorkspaceSize(h, d->x, p->w, p->conv, d->y,
                                                              p->fwd, &f),
                  "cudnnGetConvolutionForwardWorkspaceSize", p) ||
        (p->bf16 && !math_for(be, p, p->math_bwd_data)) ||
        !cudnn_ok(be, cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, d->y, p->conv, d->x,
                                                                   p->bwd_data, &bd),
                  "cudnnGetConvolutionBackwardDataWorkspaceSize", p) ||
        (p->bf16 && !math_for(be, p, p->math_bwd_filter)) ||
        !cudnn_ok(be, cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->x, d->y, p->conv,
                                                                     p->w, p->bwd_filter, &bf),
                  "cudnnGetConvolutionBackwardFilterWorkspaceSize", p))
        return 0;
    const size_t need = DTNN_MAX(f, DTNN_MAX(bd, bf));
    if (need > p->cudnn_workspace) {
        cuda_fail(be, "conv %dx%d: batch %d needs %zu bytes of workspace, more than the %zu "
                  "planned at batch %d", g->R, g->S, n, need, p->cudnn_workspace, p->max_batch);
        return 0;
    }
    return 1;
}

void cuda_conv_forward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                       const float *w, const float *bias, float *y, void *workspace)
{
    batch_descs d;
    if (cuda_of(be)->failed || !descs_for(be, p, n, &d))
        return;
    cudnnHandle_t h = handle_of(be);
    if (!p->bf16) {
        if (cudnn_ok(be, cudnnConvolutionForward(h, &one, d.x, x, p->w, w, p->conv, p->fwd,
                                                 workspace, p->cudnn_workspace, &zero, d.y, y),
                     "cudnnConvolutionForward", p) && bias)
            cudnn_ok(be, cudnnAddTensor(h, &one, p->bias, bias, &one, d.y, y),
                     "cudnnAddTensor (conv bias)", p);
        return;
    }
    bf16_copies c = copies_at(p, workspace);
    const conv_geom *g = &p->g;
    to_copy(be, p, n, g->C, g->H * g->W, x, c.x);
    to_copy(be, p, g->K, g->C / g->groups, g->R * g->S, w, c.w);
    if (math_for(be, p, p->math_fwd) &&
        cudnn_ok(be, cudnnConvolutionForward(h, &one, d.x, c.x, p->w, c.w, p->conv, p->fwd,
                                             workspace, p->cudnn_workspace, &zero, d.y, c.y),
                 "cudnnConvolutionForward", p))
        from_copy(be, p, n, g->K, g->P * g->Q, c.y, bias, y, 0);
}

void cuda_conv_backward(dtnn_backend *be, const conv_plan *p, int n, const float *x,
                        const float *dy, const float *w, float *dw, float *db, float *dx,
                        int accumulate, void *workspace)
{
    batch_descs d;
    if (cuda_of(be)->failed || !descs_for(be, p, n, &d))
        return;
    cudnnHandle_t h = handle_of(be);
    /* the bias gradient from the fp32 dy in both precisions */
    if (db && !cudnn_ok(be, cudnnConvolutionBackwardBias(h, &one, d.yf, dy, &one, p->bias, db),
                        "cudnnConvolutionBackwardBias", p))
        return;
    if (!p->bf16) {
        /* dw adds (beta 1), as the table says; dx is written (beta 0: cuDNN then does not read
         * it) or added to */
        if (dw && !cudnn_ok(be, cudnnConvolutionBackwardFilter(h, &one, d.x, x, d.y, dy, p->conv,
                                                               p->bwd_filter, workspace,
                                                               p->cudnn_workspace, &one, p->w,
                                                               dw),
                            "cudnnConvolutionBackwardFilter", p))
            return;
        if (dx)
            cudnn_ok(be, cudnnConvolutionBackwardData(h, &one, p->w, w, d.y, dy, p->conv,
                                                      p->bwd_data, workspace,
                                                      p->cudnn_workspace,
                                                      accumulate ? &one : &zero, d.x, dx),
                     "cudnnConvolutionBackwardData", p);
        return;
    }
    /* bf16: each pass writes its bf16 result into c.out (beta 0), widened into the fp32
     * gradient, dw first, then dx */
    bf16_copies c = copies_at(p, workspace);
    const conv_geom *g = &p->g;
    to_copy(be, p, n, g->K, g->P * g->Q, dy, c.y);
    if (dw) {
        to_copy(be, p, n, g->C, g->H * g->W, x, c.x);
        if (!math_for(be, p, p->math_bwd_filter) ||
            !cudnn_ok(be, cudnnConvolutionBackwardFilter(h, &one, d.x, c.x, d.y, c.y, p->conv,
                                                         p->bwd_filter, workspace,
                                                         p->cudnn_workspace, &zero, p->w,
                                                         c.out),
                      "cudnnConvolutionBackwardFilter", p))
            return;
        from_copy(be, p, g->K, g->C / g->groups, g->R * g->S, c.out, NULL, dw, 1);
    }
    if (dx) {
        to_copy(be, p, g->K, g->C / g->groups, g->R * g->S, w, c.w);
        if (math_for(be, p, p->math_bwd_data) &&
            cudnn_ok(be, cudnnConvolutionBackwardData(h, &one, p->w, c.w, d.y, c.y, p->conv,
                                                      p->bwd_data, workspace,
                                                      p->cudnn_workspace, &zero, d.x, c.out),
                     "cudnnConvolutionBackwardData", p))
            from_copy(be, p, n, g->C, g->H * g->W, c.out, NULL, dx, accumulate);
    }
}
