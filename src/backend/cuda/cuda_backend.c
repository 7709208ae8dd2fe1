/*
 * cuda_backend.c — the "cuda" backend: one device, one stream, a cuBLAS and a cuDNN handle
 * bound to it, and the operation table (backend/backend.h) made of this file's memory
 * operations and fully connected layer (cuBLAS SGEMM), cuda_conv.c's convolutions (cuDNN) and
 * the kernel files' element-wise, pooling, batch norm, loss and optimizer kernels.
 *
 * Memory: alloc is cudaMalloc, which the engine calls only while building a model and its
 * optimizer (one allocation per arena: parameters, gradients, optimizer state, activations,
 * workspace), never in a step; allocations counts the calls so a test can assert that.
 * host_alloc is pinned memory (cudaMallocHost). Every operation is queued on the stream in the
 * engine's order. upload and download wait for their copy: the engine reuses or reads the
 * host buffer as soon as they return, and download is how it reads losses and counts. sync
 * waits for the stream.
 *
 * Which device: DTNN_CUDA_DEVICE when set, else the local rank that the launcher exports
 * (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK) modulo the devices
 * found, else 0. The environment rather than the communicator: the device should be fixed
 * before MPI starts (a CUDA-aware MPI binds to the device current at MPI_Init), and a model is
 * built by code that may have no communicator at all; the comm layer's local rank
 * (comm_mpi.c's MPI_Comm_split_type) is the same number.
 *
 * DTNN_CUDA_CONV_LAYOUT=nchw|nhwc fixes the layout of bf16 convolutions' copies, which is
 * otherwise measured per geometry (cuda_conv.c): for tests of both, and to diagnose.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cudnn.h>

#include "../../core/internal.h"
#include "cuda_backend.h"
#include "cuda_internal.h"

int cuda_ok(dtnn_backend *be, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    cuda_fail(be, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}

void cuda_fail(dtnn_backend *be, const char *fmt, ...)
{
    cuda_state *s = cuda_of(be);
    if (s->failed)
        return;
    s->failed = 1;
    int at = snprintf(s->error, sizeof s->error, "cuda device %d: ", s->device);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error + at, sizeof s->error - (size_t)at, fmt, ap);
    va_end(ap);
}

static int cublas_ok(dtnn_backend *be, cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return 1;
    cuda_fail(be, "%s: cuBLAS status %d (%s)", what, (int)st, cublasGetStatusString(st));
    return 0;
}

static dtnn_status op_check(dtnn_backend *be, dtnn_error *err)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed)
        return DTNN_OK;
    return dtnn_error_set(err, DTNN_ERR_DEVICE, "%s (operations after it were skipped; the "
                          "model must be rebuilt)", s->error);
}

static void *op_native_stream(dtnn_backend *be, int *device)
{
    *device = cuda_of(be)->device;
    return cuda_of(be)->stream;
}

static void op_enter(dtnn_backend *be)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed)
        cuda_ok(be, cudaSetDevice(s->device), "cudaSetDevice");
}

static void *op_alloc(dtnn_backend *be, size_t bytes)
{
    cuda_state *s = cuda_of(be);
    void *p = NULL;
    if (s->failed)
        return NULL;
    s->allocations++;
    /* a failed cudaMalloc is an out-of-memory the engine reports (NULL), not a device fault */
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (!cuda_ok(be, cudaMemsetAsync(p, 0, bytes, s->stream), "cudaMemsetAsync (alloc)") ||
        !cuda_ok(be, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (alloc)")) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void op_free(dtnn_backend *be, void *p)
{
    /* cudaFree waits for the device; a failure here has nothing left to spoil */
    (void)be;
    cudaFree(p);
}

static void op_zero(dtnn_backend *be, void *p, size_t bytes)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed)
        cuda_ok(be, cudaMemsetAsync(p, 0, bytes, s->stream), "cudaMemsetAsync (zero)");
}

static void copy_wait(dtnn_backend *be, void *dst, const void *src, size_t bytes,
                      enum cudaMemcpyKind kind, const char *what)
{
    cuda_state *s = cuda_of(be);
    if (s->failed || !bytes)
        return;
    if (cuda_ok(be, cudaMemcpyAsync(dst, src, bytes, kind, s->stream), what))
        cuda_ok(be, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize (after a copy)");
}

static void op_upload(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    copy_wait(be, dst, src, bytes, cudaMemcpyHostToDevice, "cudaMemcpyAsync (upload)");
}

static void op_download(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    cuda_state *s = cuda_of(be);
    /* the engine reads what it downloads: after a failure it gets zeros, and the error at
     * its next check */
    if (s->failed)
        memset(dst, 0, bytes);
    copy_wait(be, dst, src, bytes, cudaMemcpyDeviceToHost, "cudaMemcpyAsync (download)");
}

static void op_copy(dtnn_backend *be, void *dst, const void *src, size_t bytes)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed && bytes && dst != src)
        cuda_ok(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream),
                "cudaMemcpyAsync (device to device)");
}

static void op_sync(dtnn_backend *be)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed)
        cuda_ok(be, cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
}

/* The copy stream waits for the compute stream's release of the slot (an event never recorded
 * is passed at once), copies, and marks the slot's copy done; compute waits for that mark on
 * the device, the host only before it refills the pinned source. */
static void op_upload_start(dtnn_backend *be, int slot, void *dst, const void *src,
                            size_t bytes)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed && cuda_ok(be, cudaStreamWaitEvent(s->copy_stream, s->released[slot], 0),
                              "cudaStreamWaitEvent (upload after release)") &&
        cuda_ok(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->copy_stream),
                "cudaMemcpyAsync (batch upload, copy stream)"))
        cuda_ok(be, cudaEventRecord(s->uploaded[slot], s->copy_stream),
                "cudaEventRecord (batch uploaded)");
}

static void op_upload_use(dtnn_backend *be, int slot)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed)
        cuda_ok(be, cudaStreamWaitEvent(s->stream, s->uploaded[slot], 0),
                "cudaStreamWaitEvent (compute after upload)");
}

static void op_upload_release(dtnn_backend *be, int slot)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed)
        cuda_ok(be, cudaEventRecord(s->released[slot], s->stream),
                "cudaEventRecord (batch released)");
}

static void op_upload_finish(dtnn_backend *be, int slot)
{
    cuda_state *s = cuda_of(be);
    if (!s->failed)
        cuda_ok(be, cudaEventSynchronize(s->uploaded[slot]), "cudaEventSynchronize (upload)");
}

/* The upload slots' events (no timing: they only order). */
static cudaError_t create_upload_events(cuda_state *s)
{
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < UPLOAD_SLOTS && e == cudaSuccess; i++)
        if ((e = cudaEventCreateWithFlags(&s->uploaded[i], cudaEventDisableTiming)) ==
            cudaSuccess)
            e = cudaEventCreateWithFlags(&s->released[i], cudaEventDisableTiming);
    return e;
}

static void *op_host_alloc(dtnn_backend *be, size_t bytes)
{
    cuda_state *s = cuda_of(be);
    void *p = NULL;
    s->allocations++;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

static void op_host_free(dtnn_backend *be, void *p)
{
    (void)be;
    if (p)
        cudaFreeHost(p);
}

/* bf16 (dtnn.h): the products take bf16 copies of x, W and dy (in the workspace: x [n, in],
 * W [out, in], dy [n, out]) on tensor cores, cublasGemmEx summing in fp32 into the fp32
 * output, which stays unrounded; as the CPU's backend/cpu/linear.c. */
typedef struct {
    uint16_t *x, *w, *dy;
} linear_copies;

static linear_copies linear_copies_at(const linear_desc *d, int max_batch, void *workspace)
{
    linear_copies c;
    c.x = workspace;
    c.w = c.x + cuda_round256((size_t)max_batch * d->in);
    c.dy = c.w + cuda_round256((size_t)d->out * d->in);
    return c;
}

static size_t op_linear_workspace(dtnn_backend *be, const linear_desc *d, int max_batch)
{
    (void)be;
    if (d->precision != DTNN_PRECISION_BF16)
        return 0;
    return sizeof(uint16_t) * (cuda_round256((size_t)max_batch * d->in) +
                               cuda_round256((size_t)d->out * d->in) +
                               cuda_round256((size_t)max_batch * d->out));
}

/* C (column-major, fp32) = alpha op(A) op(B) + beta C: SGEMM in fp32, GemmEx on bf16 A and B
 * with fp32 sums in bf16. */
static int gemm(dtnn_backend *be, int bf16, cublasOperation_t ta, cublasOperation_t tb, int m,
                int n, int k, const void *a, int lda, const void *b, int ldb, float beta,
                float *c, int ldc, const char *what)
{
    cuda_state *s = cuda_of(be);
    const float alpha = 1.0f;
    if (!bf16)
        return cublas_ok(be, cublasSgemm(s->cublas, ta, tb, m, n, k, &alpha, a, lda, b, ldb,
                                         &beta, c, ldc), what);
    return cublas_ok(be, cublasGemmEx(s->cublas, ta, tb, m, n, k, &alpha, a, CUDA_R_16BF, lda,
                                      b, CUDA_R_16BF, ldb, &beta, c, CUDA_R_32F, ldc,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), what);
}

/* Row-major y [n, out] = x [n, in] W^T is column-major y^T = W x^T: W's row-major [out, in]
 * is column-major W^T (ld in), so the product is op(A) = T on it, with x^T (ld in) as B. The
 * bf16 copies are packed for the call's batch n, which is at most the planned one. */
static void op_linear_forward(dtnn_backend *be, const linear_desc *d, int n, const float *x,
                              const float *w, const float *b, float *y, void *workspace)
{
    const int out = d->out, in = d->in, bf16 = d->precision == DTNN_PRECISION_BF16;
    if (cuda_of(be)->failed)
        return;
    const void *xa = x, *wa = w;
    if (bf16) {
        linear_copies c = linear_copies_at(d, n, workspace);
        cuda_to_bf16(be, (size_t)n * in, x, c.x);
        cuda_to_bf16(be, (size_t)out * in, w, c.w);
        xa = c.x, wa = c.w;
    }
    if (!gemm(be, bf16, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, wa, in, xa, in, 0.0f, y, out,
              bf16 ? "cublasGemmEx (linear forward, bf16)" : "cublasSgemm (linear forward)"))
        return;
    if (b)
        cuda_bias_rows(be, n, out, b, y);
}

/* dW^T (column-major [in, out]) += x^T dy; dx^T ([in, n]) = W^T dy^T, as in the forward. */
static void op_linear_backward(dtnn_backend *be, const linear_desc *d, int n, const float *x,
                               const float *dy, const float *w, float *dw, float *db,
                               float *dx, int accumulate, void *workspace)
{
    const int out = d->out, in = d->in, bf16 = d->precision == DTNN_PRECISION_BF16;
    if (cuda_of(be)->failed)
        return;
    if (db)     /* from the fp32 dy in both precisions */
        cuda_bias_rows_grad(be, n, out, dy, db);
    const void *xa = x, *wa = w, *dya = dy;
    if (bf16) {
        linear_copies c = linear_copies_at(d, n, workspace);
        cuda_to_bf16(be, (size_t)n * out, dy, c.dy);
        dya = c.dy;
        if (dw)
            cuda_to_bf16(be, (size_t)n * in, x, c.x), xa = c.x;
        if (dx)
            cuda_to_bf16(be, (size_t)out * in, w, c.w), wa = c.w;
    }
    if (dw && !gemm(be, bf16, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, xa, in, dya, out, 1.0f, dw,
                    in, bf16 ? "cublasGemmEx (linear weight gradient, bf16)"
                             : "cublasSgemm (linear weight gradient)"))
        return;
    if (dx)
        gemm(be, bf16, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, wa, in, dya, out,
             accumulate ? 1.0f : 0.0f, dx, in,
             bf16 ? "cublasGemmEx (linear input gradient, bf16)"
                  : "cublasSgemm (linear input gradient)");
}

/* Row-major C [M, N] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: a row-major matrix
 * read column-major is its transpose, so B goes first with its own flag, then A; all
 * n * batch products in one strided-batched call. */
static void op_matmul(dtnn_backend *be, const matmul_geom *g, int n, int trans_a, int trans_b,
                      const float *a, const float *b, float *c, int accumulate)
{
    cuda_state *s = cuda_of(be);
    if (s->failed || n * g->batch == 0)
        return;
    const int M = g->M, N = g->N, K = g->K;
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublas_ok(be, cublasSgemmStridedBatched(
                      s->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, b, trans_b ? K : N,
                      (long long)K * N, a, trans_a ? M : K, (long long)M * K, &beta, c, N,
                      (long long)M * N, n * g->batch),
              "cublasSgemmStridedBatched (matmul)");
}

static void op_destroy(dtnn_backend *be)
{
    cuda_state *s = cuda_of(be);
    if (s) {
        cudaSetDevice(s->device);
        if (s->stream)
            cudaStreamSynchronize(s->stream);
        if (s->copy_stream)
            cudaStreamSynchronize(s->copy_stream);
        for (int i = 0; i < UPLOAD_SLOTS; i++) {
            if (s->uploaded[i])
                cudaEventDestroy(s->uploaded[i]);
            if (s->released[i])
                cudaEventDestroy(s->released[i]);
        }
        if (s->count)
            cudaFree(s->count);
        if (s->cudnn)
            cudnnDestroy(s->cudnn);
        if (s->cublas)
            cublasDestroy(s->cublas);
        if (s->stream)
            cudaStreamDestroy(s->stream);
        if (s->copy_stream)
            cudaStreamDestroy(s->copy_stream);
        free(s->choices);
        free(s);
    }
    free(be);
}

static const dtnn_backend_ops cuda_table = {
    .enter = op_enter,
    .destroy = op_destroy,
    .alloc = op_alloc,
    .free = op_free,
    .zero = op_zero,
    .upload = op_upload,
    .download = op_download,
    .copy = op_copy,
    .sync = op_sync,
    .upload_start = op_upload_start,
    .upload_use = op_upload_use,
    .upload_release = op_upload_release,
    .upload_finish = op_upload_finish,
    .host_alloc = op_host_alloc,
    .host_free = op_host_free,
    .conv_plan_create = cuda_conv_plan_create,
    .conv_plan_free = cuda_conv_plan_free,
    .conv_workspace = cuda_conv_workspace,
    .conv_method = cuda_conv_method,
    .conv_forward = cuda_conv_forward,
    .conv_backward = cuda_conv_backward,
    .linear_workspace = op_linear_workspace,
    .linear_forward = op_linear_forward,
    .linear_backward = op_linear_backward,
    .maxpool_forward = cuda_maxpool_forward,
    .maxpool_backward = cuda_maxpool_backward,
    .avgpool_forward = cuda_avgpool_forward,
    .avgpool_backward = cuda_avgpool_backward,
    .reduce_forward = cuda_reduce_forward,
    .reduce_backward = cuda_reduce_backward,
    .layernorm_forward = cuda_layernorm_forward,
    .layernorm_backward = cuda_layernorm_backward,
    .upsample_forward = cuda_upsample_forward,
    .upsample_backward = cuda_upsample_backward,
    .act_forward = cuda_act_forward,
    .act_backward = cuda_act_backward,
    .permute = cuda_permute,
    .matmul = op_matmul,
    .softmax_forward = cuda_softmax_forward,
    .softmax_backward = cuda_softmax_backward,
    .bn_moments = cuda_bn_moments,
    .bn_apply_train = cuda_bn_apply_train,
    .bn_backward_sums = cuda_bn_backward_sums,
    .bn_backward_apply = cuda_bn_backward_apply,
    .bn_train_forward = cuda_bn_train_forward,
    .bn_train_backward = cuda_bn_train_backward,
    .bn_forward_eval = cuda_bn_forward_eval,
    .bn_backward_eval = cuda_bn_backward_eval,
    .bn_param_grads = cuda_bn_param_grads,
    .add_forward = cuda_add_forward,
    .add_backward = cuda_add_backward,
    .copy_rows = cuda_copy_rows,
    .binary_forward = cuda_binary_forward,
    .binary_backward = cuda_binary_backward,
    .pad_forward = cuda_pad_forward,
    .pad_backward = cuda_pad_backward,
    .fill = cuda_fill,
    .add_i64 = cuda_add_i64,
    .dropout_forward = cuda_dropout_forward,
    .dropout_backward = cuda_dropout_backward,
    .shortcut_forward = cuda_shortcut_forward,
    .shortcut_backward = cuda_shortcut_backward,
    .loss = cuda_loss,
    .sgd_step = cuda_sgd_step,
    .adam_step = cuda_adam_step,
    .rmsprop_step = cuda_rmsprop_step,
    .nadam_step = cuda_nadam_step,
    .lars_step = cuda_lars_step,
    .lamb_direction = cuda_lamb_direction,
    .axpby = cuda_axpby,
    .segment_sumsq = cuda_segment_sumsq,
    .count_nonfinite = cuda_count_nonfinite,
    .half_pack = cuda_half_pack,
    .half_unpack = cuda_half_unpack,
    .check = op_check,
    .native_stream = op_native_stream,
};

int cuda_backend_device_count(char *why, size_t len)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        /* without a driver at all the runtime reports an insufficient one */
        if (why && len)
            snprintf(why, len, "cudaGetDeviceCount: %s%s", cudaGetErrorString(e),
                     e == cudaErrorInsufficientDriver
                         ? ": no NVIDIA driver, or one older than this CUDA runtime"
                         : "");
        return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ? 0 : -1;
    }
    if (why && len)
        snprintf(why, len, "%d device%s", count, count == 1 ? "" : "s");
    return count;
}

/* DTNN_CUDA_CONV_LAYOUT (the top of this file). */
static dtnn_status pick_conv_layout(cuda_layout *layout, dtnn_error *err)
{
    const char *v = getenv("DTNN_CUDA_CONV_LAYOUT");
    if (!v || !*v || !strcmp(v, "auto"))
        *layout = CUDA_LAYOUT_MEASURED;
    else if (!strcmp(v, "nchw"))
        *layout = CUDA_LAYOUT_NCHW;
    else if (!strcmp(v, "nhwc"))
        *layout = CUDA_LAYOUT_NHWC;
    else
        return dtnn_error_set(err, DTNN_ERR_ARG, "device 'cuda': DTNN_CUDA_CONV_LAYOUT='%s': "
                              "choose auto (measured), nchw or nhwc", v);
    return DTNN_OK;
}

/* The device for this process (the top of this file says why from the environment). */
static int pick_device(int count, dtnn_error *err, int *device)
{
    const char *names[] = {"DTNN_CUDA_DEVICE", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v)
            continue;
        char *end;
        long r = strtol(v, &end, 10);
        if (*end || r < 0)
            return dtnn_error_set(err, DTNN_ERR_ARG, "device 'cuda': %s='%s' is not a device "
                                  "index or local rank (a number >= 0)", names[i], v);
        if (i == 0 && r >= count)
            return dtnn_error_set(err, DTNN_ERR_ARG, "device 'cuda': DTNN_CUDA_DEVICE=%ld but "
                                  "only %d device%s found", r, count, count == 1 ? " is" : "s are");
        *device = (int)(r % count);
        return DTNN_OK;
    }
    *device = 0;
    return DTNN_OK;
}

size_t cuda_backend_allocations(const dtnn_backend *be)
{
    return ((const cuda_state *)be->state)->allocations;
}

static dtnn_backend *cuda_backend_create(int threads, dtnn_error *err)
{
    char why[200];
    const int count = cuda_backend_device_count(why, sizeof why);
    if (count <= 0) {
        dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "device 'cuda': built, but no CUDA device "
                       "was found (%s)", why);
        return NULL;
    }
    int device;
    cuda_layout layout = CUDA_LAYOUT_MEASURED;
    if (pick_device(count, err, &device) != DTNN_OK || pick_conv_layout(&layout, err) != DTNN_OK)
        return NULL;
    dtnn_backend *be = calloc(1, sizeof *be);
    cuda_state *s = calloc(1, sizeof *s);
    if (!be || !s) {
        free(be);
        free(s);
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory creating the cuda backend");
        return NULL;
    }
    s->device = device;
    s->conv_layout = layout;
    be->op = &cuda_table;
    be->name = "cuda";
    be->host_memory = 0;
    be->threads = threads;
    be->state = s;
    cublasHandle_t cublas = NULL;
    cudnnHandle_t cudnn = NULL;
    cudnnStatus_t cs;
    cublasStatus_t bs;
    cudaError_t e;
    const char *call = NULL;
    char reason[160] = "";
    if ((e = cudaSetDevice(device)) != cudaSuccess)
        call = "cudaSetDevice";
    else if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess)
        call = "cudaStreamCreateWithFlags";
    else if ((e = cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking)) !=
             cudaSuccess)
        call = "cudaStreamCreateWithFlags (copy stream)";
    else if ((e = create_upload_events(s)) != cudaSuccess)
        call = "cudaEventCreateWithFlags";
    /* the backend's own counter, not counted in allocations (those are the engine's) */
    else if ((e = cudaMalloc((void **)&s->count, sizeof *s->count)) != cudaSuccess)
        call = "cudaMalloc (a counter)";
    if (call)
        snprintf(reason, sizeof reason, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    else if ((bs = cublasCreate(&cublas)) != CUBLAS_STATUS_SUCCESS)
        call = "cublasCreate", snprintf(reason, sizeof reason, "%s", cublasGetStatusString(bs));
    else if ((s->cublas = cublas, bs = cublasSetStream(cublas, s->stream)) !=
             CUBLAS_STATUS_SUCCESS)
        call = "cublasSetStream", snprintf(reason, sizeof reason, "%s", cublasGetStatusString(bs));
    /* plain FP32 products (the default mode allows no TF32), so results stay within fp32
     * tolerance of the CPU's; bf16 products are asked for per call (cublasGemmEx) */
    else if ((bs = cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        call = "cublasSetMathMode", snprintf(reason, sizeof reason, "%s",
                                             cublasGetStatusString(bs));
    else if ((cs = cudnnCreate(&cudnn)) != CUDNN_STATUS_SUCCESS)
        call = "cudnnCreate", snprintf(reason, sizeof reason, "%s", cudnnGetErrorString(cs));
    else if ((s->cudnn = cudnn, cs = cudnnSetStream(cudnn, s->stream)) != CUDNN_STATUS_SUCCESS)
        call = "cudnnSetStream", snprintf(reason, sizeof reason, "%s", cudnnGetErrorString(cs));
    if (call) {
        dtnn_error_set(err, DTNN_ERR_DEVICE, "device 'cuda' (device %d of %d): %s failed: %s",
                       device, count, call, reason);
        op_destroy(be);
        return NULL;
    }
    return be;
}

/* The short forms `dtnn devices` prints; --device cuda gets the long ones from create. */
static int cuda_probe(char *why, size_t len)
{
    char reason[200] = "";
    const int count = cuda_backend_device_count(reason, sizeof reason);
    dtnn_error err;
    dtnn_backend *be = count > 0 ? cuda_backend_create(0, &err) : NULL;
    if (be)
        snprintf(why, len, "usable (%d device%s)", count, count == 1 ? "" : "s");
    else if (count > 0)
        snprintf(why, len, "built, but not usable: %s", err.message);
    else
        snprintf(why, len, "built, no device found (%s)", reason);
    if (be)
        be->op->destroy(be);
    return be != NULL;
}

const backend_registration cuda_registration = {"cuda", cuda_backend_create, cuda_probe};
