/*
 * dtnn.h — the public API of libdtnn, a C library for training convolutional networks.
 *
 * A five-minute tour:
 *
 *     dtnn_error err;
 *     dtnn_model *m = dtnn_model_create(1, 28, 28);               // input: 1x28x28 per sample
 *     int x = dtnn_model_add(m, "conv2d", "conv1", "filters=6 kernel=5 padding=2", NULL, 0, &err);
 *     x = dtnn_model_add(m, "relu", NULL, "", &x, 1, &err);       // inputs: ids; NULL = previous
 *     ...
 *     dtnn_build_params bp; dtnn_build_params_default(&bp); bp.max_batch = 64;
 *     dtnn_model_build(m, &bp, &err);                             // shapes, buffers, workspace
 *     dtnn_model_forward(m, images, n, 1, &err);                  // training mode
 *     dtnn_model_loss(m, labels, n, &lp, &loss, &err);            // fills d(loss)/d(logits)
 *     dtnn_model_zero_grad(m); dtnn_model_backward(m, &err);
 *     dtnn_optimizer_step(opt, lr, &err);
 *
 * or simply dtnn_zoo_build("lenet5", ...) / dtnn_model_parse_file(...) and dtnn_train(...).
 *
 * Conventions. Tensors are float32, dense, NCHW (N batch, C channels, H x W). Every fallible
 * function returns a dtnn_status and, on failure, fills the caller's dtnn_error with a message
 * that names the file, layer, shape or option at fault. The library never exits the process.
 * Its one global value is the CPU kernel set, chosen once per process and never changed
 * (dtnn_cpu_kernels_name); everything else lives in the handles. It does set two settings of
 * the process that belong to other libraries: making a cpu backend sets the BLAS to one thread
 * (dtnn's own threads run it, dtnn/cpu.h), and each backend call sets OpenMP's thread count
 * of the calling thread for its duration, restoring the caller's after. Parameters, gradients
 * and optimizer state each live in one flat buffer per model; dtnn_model_tensor() gives the
 * named layout (PyTorch state_dict names).
 */
#ifndef DTNN_H
#define DTNN_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------------------------ */

#define DTNN_STATUS_LIST(X)                                                                   \
    X(DTNN_OK, "ok")                                                                          \
    X(DTNN_ERR_ARG, "invalid argument")                                                       \
    X(DTNN_ERR_IO, "input/output error")                                                      \
    X(DTNN_ERR_FORMAT, "malformed file")                                                      \
    X(DTNN_ERR_SHAPE, "shape mismatch")                                                       \
    X(DTNN_ERR_NOMEM, "out of memory")                                                        \
    X(DTNN_ERR_NONFINITE, "non-finite value")                                                 \
    X(DTNN_ERR_UNSUPPORTED, "unsupported")                                                    \
    X(DTNN_ERR_COMM, "communication error")                                                   \
    X(DTNN_ERR_INTERRUPTED, "interrupted")                                                    \
    X(DTNN_ERR_DEVICE, "device error")

typedef enum {
#define DTNN_X_ENUM(name, text) name,
    DTNN_STATUS_LIST(DTNN_X_ENUM)
#undef DTNN_X_ENUM
} dtnn_status;

typedef struct {
    dtnn_status code;
    char message[512];
} dtnn_error;

const char *dtnn_strerror(dtnn_status code);
/* Sets err (if not NULL) to code and a printf-formatted message; returns code. */
dtnn_status dtnn_error_set(dtnn_error *err, dtnn_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- models ------------------------------------------------------------------------------ */

typedef struct dtnn_model dtnn_model;
typedef struct dtnn_comm dtnn_comm;     /* see "communicator" below */
typedef struct dtnn_trace dtnn_trace;   /* see "timeline" below */
typedef struct dtnn_opt_params dtnn_opt_params;

typedef enum { DTNN_INIT_DEFAULT = 0, DTNN_INIT_HE, DTNN_INIT_XAVIER } dtnn_init_scheme;

/* Which convolution algorithms a build may use (conv2d's own algo= option narrows it further). */
typedef enum {
    DTNN_CONV_AUTO = 0,     /* the fastest path that applies to each layer */
    DTNN_CONV_IM2COL,       /* every convolution on im2col + GEMM: the reference path the fast
                             * kernels are tested against (to compare speed or rule one out) */
    DTNN_CONV_DIRECT        /* as auto, without Winograd: the direct kernels for 3x3 too */
} dtnn_conv_algo;

/* What convolutions and fully connected layers compute in (every other layer, batch norm's
 * statistics, losses, reductions and the optimizer stay fp32). BF16 is PyTorch's autocast to
 * bfloat16 for these two layers: their inputs, weights and output gradients rounded to bf16
 * (to nearest, ties to even), products summed in fp32; a convolution's outputs and gradients
 * are rounded to bf16 too (cuDNN writes them in the inputs' type) before its bias is added in
 * fp32, a fully connected layer's stay fp32 (cuBLAS accumulates into fp32), and every bias
 * gradient is summed from the fp32 output gradient. The weights the optimizer updates stay
 * fp32 (master weights); bf16's range is fp32's, so no loss scaling. On the GPU this runs on
 * tensor cores. On the CPU the GEMMs (im2col, pointwise, fully connected) multiply bf16 pairs
 * on vdpbf16ps where the CPU has AVX512_BF16 (subnormal operands read as zero, as that
 * instruction defines it), and elsewhere compute the same rounding around fp32 kernels
 * (dtnn_cpu_bf16_products says which); the CPU is the reference the GPU is tested against. */
typedef enum { DTNN_PRECISION_FP32 = 0, DTNN_PRECISION_BF16 } dtnn_precision;
/* "fp32", "bf16"; NULL for a value outside the enum. */
const char *dtnn_precision_name(dtnn_precision p);
/* The precision named `name` into *out; DTNN_ERR_ARG naming the choices otherwise. */
dtnn_status dtnn_precision_parse(const char *name, dtnn_precision *out, dtnn_error *err);

typedef struct {
    int max_batch;              /* largest batch forward() will be called with */
    int training;               /* 0: plan inference only (no gradient buffers) */
    uint64_t seed;              /* initialisation and dropout */
    dtnn_init_scheme init;      /* DEFAULT = PyTorch's defaults */
    const char *device;         /* the backend: "cpu" (NULL too), "cpu-guarded", "cuda";
                                 * dtnn_device_name lists them */
    int threads;                /* the backend's CPU threads; 0 = the OpenMP default. A
                                 * model's setting: it applies while dtnn runs its operations
                                 * and leaves the caller's OpenMP settings alone */
    size_t workspace_limit;     /* bytes of scratch the convolutions may use (0 = 64 MiB) */
    int input_grad;             /* also compute d(loss)/d(input) (gradient checks, saliency) */
    dtnn_conv_algo conv_algo;   /* DTNN_CONV_AUTO unless comparing paths */
    dtnn_precision precision;   /* convolutions and fully connected layers; FP32 = 0 */
    int unfused;                /* 1: every layer runs on its own, no ReLU fused into the batch
                                 * norm or add before it (the reference for the fused pairs) */
    /* The memory check: before allocating, the build adds up what the model will need
     * (dtnn_model_memory) and refuses, with required vs available, what cannot fit. */
    int optimizer_slots;        /* optimizer state to count (dtnn_opt_state_slots; it is
                                 * allocated later, by dtnn_optimizer_create) */
    size_t memory_limit;        /* bytes; 0 = dtnn_memory_available() at build time */
    /* Parameters kept fixed while training (fine-tuning): globs over tensor names
     * ("layer1.*", "conv1.weight"); a pattern that matches no parameter is an error, and so is
     * freezing every parameter of a model built for training. Frozen parameters have no
     * gradient (so no all-reduce) and no optimizer state; backward skips their weight
     * gradients and every layer whose output gradient nobody needs. */
    const char *const *freeze;
    int n_freeze;
    /* Batch norms whose weight and bias are both frozen normalise with their running
     * statistics and leave them as they are, also in training (eval-mode batch norm, as
     * torchvision's fine-tuning recipes choose); without it they use batch statistics and
     * update the running ones, as a frozen module in train() mode does in PyTorch. */
    int freeze_bn;
    /* Weights loaded into this model (checkpoints, --init, --resume's optimizer state, ONNX
     * initializers) are checked to be finite, and a load holding NaN or Inf is refused,
     * naming the tensor and its first bad index. 1 lets them in, for forensics on a diverged
     * run (--allow-nonfinite-weights); training from them stops at its first step anyway. */
    int allow_nonfinite_weights;
} dtnn_build_params;

/* Memory a built model needs, in bytes (the optimizer's as planned by optimizer_slots). */
typedef struct {
    size_t params, grads, optimizer, buffers, activations, workspace, total;
} dtnn_memory;
/* Filled by dtnn_model_build, also when it refuses for lack of memory. */
void dtnn_model_memory(const dtnn_model *m, dtnn_memory *out);
/* Memory this process can still get: MemAvailable, lowered by a cgroup limit if there is one. */
size_t dtnn_memory_available(void);

void dtnn_build_params_default(dtnn_build_params *p);

/* Creates an empty model whose input is C x H x W per sample. */
dtnn_model *dtnn_model_create(int c, int h, int w);
void dtnn_model_free(dtnn_model *m);

/*
 * Appends a layer. type: "conv2d", "linear", "relu", ... (dtnn_layer_types lists them); name:
 * the PyTorch module path used for its tensors ("layer1.0.conv1"), or NULL for a generated one;
 * options: "key=value key=value"; inputs: node ids returned by earlier calls, DTNN_INPUT for the
 * model input, or NULL/0 for "the previous node". Returns the new node id, or -1 with err set.
 */
#define DTNN_INPUT (-1)
int dtnn_model_add(dtnn_model *m, const char *type, const char *name, const char *options,
                   const int *inputs, int n_inputs, dtnn_error *err);
/* Node id of the layer with this name, or -2 when there is none. */
int dtnn_model_find(const dtnn_model *m, const char *name);

/* Infers every shape, lays out the flat buffers, initialises parameters. */
dtnn_status dtnn_model_build(dtnn_model *m, const dtnn_build_params *p, dtnn_error *err);

/* Reads a model file (see docs in README: one [section] per layer). */
dtnn_model *dtnn_model_parse_file(const char *path, dtnn_error *err);
dtnn_model *dtnn_model_parse_string(const char *text, const char *origin, dtnn_error *err);

/* Zoo: lenet5, cifarcnn, resnet20, mlp. classes <= 0 keeps the model's default (10);
 * c,h,w <= 0 keep the model's default input (mlp needs them). */
dtnn_model *dtnn_zoo_create(const char *name, int classes, int c, int h, int w, dtnn_error *err);
/* Zoo name i (NULL past the end) and a one-line description. */
const char *dtnn_zoo_name(int i, const char **description);
/* Layer type i (NULL past the end). */
const char *dtnn_layer_type_name(int i);

/* Either a zoo name or a model file path. */
dtnn_model *dtnn_model_from_spec(const char *spec, int classes, int c, int h, int w,
                                 dtnn_error *err);

/* ---- running ----------------------------------------------------------------------------- */

/* x: [n, C, H, W]; n <= max_batch. training selects batch statistics and dropout. */
dtnn_status dtnn_model_forward(dtnn_model *m, const float *x, int n, int training,
                               dtnn_error *err);
/* Starts moving the batch x (n samples) to the model's device ahead of the training-mode
 * forwards that will take it (one, or the micro-batches that cover it once), while the device
 * still computes: a GPU copies it on its copy stream. x is copied at once (into pinned
 * staging) and may be reused when this returns. Nothing to do, and DTNN_OK, on a host backend
 * (cpu) or a model built for inference; dtnn_model_prefetches says which. */
dtnn_status dtnn_model_prefetch(dtnn_model *m, const float *x, int n, dtnn_error *err);
int dtnn_model_prefetches(const dtnn_model *m);
/* Shape of the last node's output after forward(): n samples of `classes` values. */
void dtnn_model_output_shape(const dtnn_model *m, int *n, int *classes);
/* Copies that output ([n, classes] logits) into dst. Model memory belongs to the backend (a
 * device's memory may not be the host's): values reach the caller only through such copies. */
void dtnn_model_read_output(const dtnn_model *m, float *dst);

typedef enum { DTNN_LOSS_CROSS_ENTROPY = 0, DTNN_LOSS_BCE, DTNN_LOSS_MSE } dtnn_loss_kind;
typedef struct {
    dtnn_loss_kind kind;
    float label_smoothing;  /* cross-entropy only, as torch.nn.CrossEntropyLoss */
} dtnn_loss_params;
void dtnn_loss_params_default(dtnn_loss_params *p);
dtnn_status dtnn_loss_parse(const char *name, dtnn_loss_kind *kind, dtnn_error *err);

typedef struct {
    double loss_sum;    /* sum over samples of the per-sample loss */
    int64_t top1;       /* correct top-1 predictions */
    int64_t top5;
    int64_t count;
} dtnn_metrics;

/* Loss of the last forward() against integer labels; adds to *metrics (may be NULL) and, when
 * the model is built for training, writes d(mean loss)/d(logits) scaled by grad_scale (use
 * 1/n_global for the mean over a global batch). */
dtnn_status dtnn_model_loss(dtnn_model *m, const int32_t *labels, int n,
                            const dtnn_loss_params *lp, float grad_scale, dtnn_metrics *metrics,
                            dtnn_error *err);
/* dtnn_model_loss against MixUp's and CutMix's soft targets: sample i's target is lam
 * onehot(labels[i]) + (1 - lam) onehot(labels2[i]), label smoothing applied to it as
 * torch.nn.CrossEntropyLoss(label_smoothing) applies it to probabilities; the top-1 / top-5 hits
 * count against the label of larger weight. labels2 NULL or lam == 1: dtnn_model_loss. */
dtnn_status dtnn_model_loss_mixed(dtnn_model *m, const int32_t *labels, const int32_t *labels2,
                                  float lam, int n, const dtnn_loss_params *lp, float grad_scale,
                                  dtnn_metrics *metrics, dtnn_error *err);
/* Sets the gradient of the output, dz [n, classes] = d(loss)/d(output), instead of calling
 * dtnn_model_loss, before dtnn_model_backward. */
dtnn_status dtnn_model_set_output_grad(dtnn_model *m, const float *dz, dtnn_error *err);
/* Copies d(loss)/d(input) [n, C, H, W] after backward into dst; an error unless the model was
 * built with input_grad. */
dtnn_status dtnn_model_read_input_grad(const dtnn_model *m, float *dst, dtnn_error *err);
/* Position of the dropout stream (backward passes so far); checkpoints restore it. */
int64_t dtnn_model_step(const dtnn_model *m);
void dtnn_model_set_step(dtnn_model *m, int64_t step);

/* Called during backward after each layer, with the lowest parameter offset (into params and
 * grads) from which every gradient is now final: the flat buffer is in layer order and backward
 * runs in reverse, so [ready_from, param end) is complete. Gradient all-reduce overlaps with
 * backward through this. NULL removes the hook. */
typedef void (*dtnn_backward_hook)(size_t ready_from, void *user);
void dtnn_model_set_backward_hook(dtnn_model *m, dtnn_backward_hook fn, void *user);
/* Synchronised batch norm: with a communicator, training-mode batch statistics (and their
 * gradients) are summed over its ranks, as torch.nn.SyncBatchNorm; NULL: per rank. */
void dtnn_model_set_sync_bn(dtnn_model *m, dtnn_comm *comm);
/* Length of params including alignment padding (>= dtnn_model_param_count); of grads too
 * unless parameters are frozen (dtnn_model_grads_length). */
size_t dtnn_model_params_padded(const dtnn_model *m);

/* Backpropagates from the loss gradient; parameter gradients accumulate (+=). */
dtnn_status dtnn_model_backward(dtnn_model *m, dtnn_error *err);
void dtnn_model_zero_grad(dtnn_model *m);

/* ---- flat buffers and named layout ------------------------------------------------------- */

typedef enum { DTNN_TENSOR_PARAM = 0, DTNN_TENSOR_BUFFER } dtnn_tensor_kind;
typedef enum { DTNN_F32 = 0, DTNN_I64 } dtnn_dtype;

typedef struct {
    const char *name;           /* "layer1.0.conv1.weight" */
    dtnn_tensor_kind kind;      /* PARAM: in params/grads; BUFFER: batch-norm running stats */
    dtnn_dtype dtype;
    int ndim;
    int64_t dims[4];
    size_t offset;              /* elements into params (PARAM) or bytes into buffers (BUFFER) */
    size_t count;               /* elements */
    int frozen;                 /* a PARAM kept fixed (dtnn_build_params.freeze) */
} dtnn_tensor_info;

/* Whether every gradient value is finite. */
int dtnn_model_grads_finite(const dtnn_model *m);
/* After a step went non-finite: describes where it first shows (the first layer, in forward
 * order, whose output has a NaN or Inf; else the first in backward order whose gradient does;
 * else a parameter's gradient) and returns 1, or returns 0 when everything is finite. */
int dtnn_model_find_nonfinite(const dtnn_model *m, char *where, size_t len);
int dtnn_model_tensor_count(const dtnn_model *m);
const dtnn_tensor_info *dtnn_model_tensor(const dtnn_model *m, int i);
const dtnn_tensor_info *dtnn_model_tensor_by_name(const dtnn_model *m, const char *name);
size_t dtnn_model_param_count(const dtnn_model *m);
/* Parameters that train (not frozen), and the length of the gradient buffer: trainable
 * parameters come first in the flat buffers, so gradient i belongs to parameter i for every
 * i below it (the all-reduce and the optimizer run over that range only). */
size_t dtnn_model_trainable_count(const dtnn_model *m);
size_t dtnn_model_grads_length(const dtnn_model *m);
size_t dtnn_model_buffer_bytes(const dtnn_model *m);

/* The flat buffers, copied between backend memory and caller memory: bytes from byte offset
 * `offset` of the parameters or gradients (4 x dtnn_model_params_padded bytes, of gradients
 * 4 x dtnn_model_grads_length, a tensor's
 * values at 4 x its offset) or of the buffers (dtnn_model_buffer_bytes, a tensor's at its
 * offset). Ranges outside them are errors. */
typedef enum { DTNN_REGION_PARAMS = 0, DTNN_REGION_GRADS, DTNN_REGION_BUFFERS } dtnn_region;
dtnn_status dtnn_model_read(const dtnn_model *m, dtnn_region r, size_t offset, void *dst,
                            size_t bytes, dtnn_error *err);
dtnn_status dtnn_model_write(dtnn_model *m, dtnn_region r, size_t offset, const void *src,
                             size_t bytes, dtnn_error *err);
/* One named tensor's values (count elements of its dtype), copied out or in. */
dtnn_status dtnn_model_tensor_read(const dtnn_model *m, const dtnn_tensor_info *t, void *dst,
                                   dtnn_error *err);
dtnn_status dtnn_model_tensor_write(dtnn_model *m, const dtnn_tensor_info *t, const void *src,
                                    dtnn_error *err);
/* The backend a built model runs on ("cpu", ...; "" before the build). */
const char *dtnn_model_device(const dtnn_model *m);
/* Waits until the device has done every operation queued for the model (a GPU runs them
 * asynchronously; on the CPU nothing to wait for): for timing. */
void dtnn_model_sync(dtnn_model *m);

/* The backends this build knows, i = 0 .. dtnn_device_count() - 1: the name, whether it can
 * run here (*usable), and in `why` "usable" or the reason it cannot. NULL past the end. With
 * usable and why both NULL only the name is returned, without trying the device. */
int dtnn_device_count(void);
const char *dtnn_device_name(int i, int *usable, char *why, size_t len);


/* ---- introspection ----------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *type;
    const char *method;        /* algorithm of a layer that has several ("winograd" or, with
                                * another backward, "winograd/direct"); "" otherwise */
    int c, h, w;               /* output shape per sample */
    size_t params;             /* trainable parameters */
    double flops;              /* forward FLOPs per sample (2 x MACs for conv/linear) */
    double seconds_fwd, seconds_bwd; /* accumulated when profiling is on */
} dtnn_layer_info;
int dtnn_model_layer_count(const dtnn_model *m);
void dtnn_model_layer_info(const dtnn_model *m, int i, dtnn_layer_info *info);
void dtnn_model_input_shape(const dtnn_model *m, int *c, int *h, int *w);
void dtnn_model_set_profiling(dtnn_model *m, int on);
/* Records every layer's forward and backward into t (NULL: stop recording). */
void dtnn_model_set_trace(dtnn_model *m, dtnn_trace *t);
/* Bytes planned for activations, gradients of activations, and scratch. */
size_t dtnn_model_activation_bytes(const dtnn_model *m);

/* ---- layers written outside the library ---------------------------------------------------
 * An external layer computes with the caller's functions on host copies of its inputs and
 * parameters (the Python package's layers written in Python): the slow, flexible path beside
 * the library's own layers, on every backend (its values are copied to and from the
 * backend's memory around each call). Its parameters live in the model's flat buffers like
 * any layer's, so the optimizers, the all-reduce, checkpoints and dtnn_model_gradcheck treat
 * them as the library's own. A model with one has no ONNX form. */
#define DTNN_EXTERNAL_MAX_INPUTS 4
#define DTNN_EXTERNAL_MAX_PARAMS 4
typedef enum {
    DTNN_EXTERNAL_ZEROS = 0,
    DTNN_EXTERNAL_ONES,
    DTNN_EXTERNAL_WEIGHT,   /* as a linear or convolution weight (PyTorch's, or --init-scheme) */
    DTNN_EXTERNAL_BIAS      /* as their bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
} dtnn_external_init;
typedef struct {
    int count;                                      /* parameters, up to the maximum */
    char names[DTNN_EXTERNAL_MAX_PARAMS][24];       /* "weight": tensor <layer>.weight */
    int ndim[DTNN_EXTERNAL_MAX_PARAMS];             /* 1 to 4 */
    int64_t dims[DTNN_EXTERNAL_MAX_PARAMS][4];
    dtnn_external_init init[DTNN_EXTERNAL_MAX_PARAMS];
    double fan_in[DTNN_EXTERNAL_MAX_PARAMS];        /* WEIGHT, BIAS; 0: the product of dims
                                                     * after the first (of dims[0] if 1-D) */
} dtnn_external_params;
/* The functions of an external layer (user: theirs). Arrays are float32, dense, NCHW:
 * inputs x[i] [n, in_chw[3i..3i+2]], the output y [n, out_chw], parameters in their dims.
 * Each returns DTNN_OK, or a status with err's message saying why (the model's forward or
 * backward then fails with it, naming the layer). infer (NULL: the output is shaped as input 0,
 * no parameters) declares the output shape and the parameters. forward writes every value of
 * y. backward (NULL: the layer cannot train) writes every value of dx[i] and dparams[k] that
 * is not NULL (NULL: not wanted, as for the model's input or a frozen parameter); the library
 * adds them where gradients accumulate. */
typedef struct {
    const char *type;       /* its type in summaries and messages ("python") */
    dtnn_status (*infer)(void *user, int n_in, const int *in_chw, int *out_chw,
                         dtnn_external_params *params, dtnn_error *err);
    dtnn_status (*forward)(void *user, int n, int training, const float *const *x,
                           const float *const *params, float *y, dtnn_error *err);
    dtnn_status (*backward)(void *user, int n, const float *const *x,
                            const float *const *params, const float *y, const float *dy,
                            float *const *dx, float *const *dparams, dtnn_error *err);
    void *user;
} dtnn_external_ops;
/* Appends an external layer (ops is copied; user must outlive the model), as dtnn_model_add:
 * the new node id, or -1 with err set. */
int dtnn_model_add_external(dtnn_model *m, const char *name, const dtnn_external_ops *ops,
                            const int *inputs, int n_inputs, dtnn_error *err);

/* The finite-difference check of a model built for training: the gradient backward gives of
 * L = sum(probe * output), probe a fixed pseudo-random [-1, 1] tensor, against central
 * differences (L(v + eps) - L(v - eps)) / 2 eps, for up to max_entries evenly spread entries of
 * every trainable parameter and (when built with input_grad) of the input x [n, C, H, W]. An
 * entry mismatches when |analytic - numeric| / (|analytic| + |numeric| + 1e-3) > tol. Runs in
 * training mode at one dropout step (the model's step is restored); batch-norm running
 * statistics move with each forward. */
typedef struct {
    int checked, mismatches;
    double worst;               /* the largest relative error */
    char worst_name[128];       /* where: "fc.weight[12]", "input[3]" */
    double worst_analytic, worst_numeric;
} dtnn_gradcheck_result;
dtnn_status dtnn_model_gradcheck(dtnn_model *m, const float *x, int n, double eps, double tol,
                                 int max_entries, dtnn_gradcheck_result *out, dtnn_error *err);

/* ---- optimizers and schedules ------------------------------------------------------------ */

/* SGD, Adam, AdamW, RMSProp and NAdam as torch.optim's (NAdam as PyTorch 2's: 1.13 multiplies
 * mu twice into its mu_product_next); LARS as the MLPerf ResNet-50 reference's (You et al.:
 * each tensor's step scaled by trust_coefficient ||w|| / (||g|| + weight_decay ||w|| + eps),
 * momentum on the scaled step); LAMB as timm's Lamb (bias-corrected Adam direction plus
 * decay, scaled per tensor by ||w|| / ||direction||, no clipping inside: --clip-grad-norm). */
typedef enum {
    DTNN_OPT_SGD = 0,
    DTNN_OPT_ADAM,
    DTNN_OPT_ADAMW,
    DTNN_OPT_RMSPROP,
    DTNN_OPT_NADAM,
    DTNN_OPT_LARS,
    DTNN_OPT_LAMB,
} dtnn_opt_kind;

/* Parameter groups (dtnn_opt_params.no_decay): the parameters of normalisation layers, and
 * every tensor named "bias". */
enum { DTNN_GROUP_NORM = 1, DTNN_GROUP_BIAS = 2 };

struct dtnn_opt_params {
    dtnn_opt_kind kind;
    float momentum;      /* SGD, RMSProp, LARS */
    float dampening;     /* SGD */
    int nesterov;        /* SGD, LARS */
    float weight_decay;  /* L2 (decoupled for AdamW; added to the direction for LAMB) */
    float beta1, beta2;  /* Adam(W), NAdam, LAMB */
    float eps;           /* Adam(W), RMSProp, NAdam, LAMB, LARS (added to the norms) */
    float alpha;         /* RMSProp smoothing */
    int centered;        /* RMSProp */
    float momentum_decay;     /* NAdam's psi */
    float trust_coefficient;  /* LARS's eta */
    /* DTNN_GROUP_* bits: groups without weight decay, and (LARS, LAMB) without the
     * layer-wise trust ratio, which their updates then take as 1. */
    unsigned no_decay;
    /* > 0: before each update the gradient is scaled by min(1, clip_grad_norm / (its L2 norm
     * over every trainable parameter + 1e-6)), as torch.nn.utils.clip_grad_norm_; in
     * data-parallel training the gradient is the all-reduced one, the same on every rank. */
    float clip_grad_norm;
};

/* The reference's defaults for kind: PyTorch's (weight decay 0.01 for AdamW, 0 otherwise;
 * NAdam's momentum_decay 0.004); LARS momentum 0.9, trust coefficient 0.001, eps 0; LAMB
 * timm's (eps 1e-6, weight decay 0.01); LARS and LAMB keep norm layers and biases out of decay
 * and adaptation (MLPerf's skip list; timm's parameter groups), the others decay everything. */
void dtnn_opt_params_default(dtnn_opt_params *p, dtnn_opt_kind kind);
/* Parses a --no-decay list: "none", or "norm", "bias" separated by commas. */
dtnn_status dtnn_opt_parse_groups(const char *text, unsigned *groups, dtnn_error *err);
/* Parameter-sized state buffers the optimizer keeps (SGD with momentum 1, Adam 2, ...). */
int dtnn_opt_state_slots(const dtnn_opt_params *p);
dtnn_status dtnn_opt_parse(const char *name, dtnn_opt_kind *kind, dtnn_error *err);
const char *dtnn_opt_name(dtnn_opt_kind kind);

typedef struct dtnn_optimizer dtnn_optimizer;
dtnn_optimizer *dtnn_optimizer_create(dtnn_model *m, const dtnn_opt_params *p, dtnn_error *err);
void dtnn_optimizer_free(dtnn_optimizer *o);
/* One update of every parameter from the gradients, with PyTorch's rule. */
dtnn_status dtnn_optimizer_step(dtnn_optimizer *o, float lr, dtnn_error *err);
/* Optimizer state: one flat buffer of state_slots x param_count floats, and the step count. */
int dtnn_optimizer_state_slots(const dtnn_optimizer *o);
const char *dtnn_optimizer_state_name(const dtnn_optimizer *o, int slot);
/* The state: slots of dtnn_optimizer_state_length values (params_padded), copied out or in. */
size_t dtnn_optimizer_state_length(const dtnn_optimizer *o);
dtnn_status dtnn_optimizer_read_state(const dtnn_optimizer *o, int slot, size_t offset,
                                      float *dst, size_t count, dtnn_error *err);
dtnn_status dtnn_optimizer_write_state(dtnn_optimizer *o, int slot, size_t offset,
                                       const float *src, size_t count, dtnn_error *err);
int64_t *dtnn_optimizer_step_count(dtnn_optimizer *o);
const dtnn_opt_params *dtnn_optimizer_params(const dtnn_optimizer *o);

typedef enum {
    DTNN_SCHED_CONSTANT = 0, DTNN_SCHED_STEP, DTNN_SCHED_MULTISTEP, DTNN_SCHED_COSINE,
    DTNN_SCHED_POLY,        /* PolynomialLR: base (1 - min(e, T) / T)^power, T = t_max */
    DTNN_SCHED_PLATEAU,     /* ReduceLROnPlateau (mode min, threshold 1e-4 relative): base x
                             * gamma^cuts, a cut after more than `patience` epochs without a
                             * lower monitored loss (dtnn_train's; constant for
                             * dtnn_sched_lr, which knows no metric) */
} dtnn_sched_kind;

typedef struct {
    dtnn_sched_kind kind;
    float base_lr;
    float gamma;            /* step, multistep; plateau's factor */
    int step_size;          /* step: epochs between decays */
    int milestones[16];     /* multistep: epochs at which lr *= gamma */
    int n_milestones;
    int t_max;              /* cosine: period, poly: length in epochs (0 = the run's epochs) */
    float eta_min;          /* cosine */
    float power;            /* poly */
    int patience;           /* plateau */
    float warmup_epochs;    /* linear warm-up from warmup_start_factor*lr over this many epochs */
    float warmup_start_factor;
} dtnn_sched_params;

void dtnn_sched_params_default(dtnn_sched_params *p);
/* Parses "constant", "step:SIZE[:GAMMA]", "multistep:M1,M2,...[:GAMMA]",
 * "cosine[:TMAX[:ETAMIN]]", "poly:POWER[:T]", "plateau:PATIENCE[:FACTOR]". */
dtnn_status dtnn_sched_parse(const char *spec, dtnn_sched_params *p, dtnn_error *err);
/* LR for step `step` (0-based, global) with steps_per_epoch steps in an epoch. Decays apply at
 * epoch boundaries as PyTorch's epoch-stepped schedulers; warm-up ramps per step (Goyal 2017). */
float dtnn_sched_lr(const dtnn_sched_params *p, int64_t step, int64_t steps_per_epoch);

/* ---- data ---------------------------------------------------------------------------------- */

typedef struct {
    float *x;           /* [n, c, h, w], normalised */
    int32_t *y;         /* [n] */
    int64_t n;
    int c, h, w;
    int classes;
} dtnn_split;

typedef struct {
    dtnn_split train;
    dtnn_split test;    /* n == 0 when the dataset has no test split */
    float mean[4], std[4];  /* per-channel normalisation applied (identity: 0 and 1) */
    char name[64];
} dtnn_dataset;

typedef struct {
    const char *name;       /* fashion-mnist | mnist | cifar10 | cifar100 | npy | synthetic */
    const char *dir;        /* NULL = the default for the name */
    int normalize;          /* -1 = dataset default (IDX: yes, npy: no), 0 off, 1 on */
    int64_t synthetic_n;    /* synthetic: samples (train); test gets synthetic_n / 4 */
    int c, h, w, classes;   /* synthetic shape */
    uint64_t seed;          /* synthetic content */
} dtnn_data_params;

void dtnn_data_params_default(dtnn_data_params *p);
/* Fills d (which must not hold a loaded dataset: free it first); p == NULL means defaults.
 * Normalisation supports up to 4 channels. */
dtnn_status dtnn_dataset_load(dtnn_dataset *d, const dtnn_data_params *p, dtnn_error *err);
void dtnn_dataset_free(dtnn_dataset *d);

/* Writes n bytes as the whole file at path, atomically (a temporary in the same folder,
 * synced, renamed over path: a reader sees the old file or the new one, and a failure or a kill
 * leaves the old one). Only a regular file is replaced; a symbolic link keeps pointing at the
 * new file. `what` names the file in messages ("model file"). Every file libdtnn writes goes
 * this way. */
dtnn_status dtnn_file_write(const char *path, const char *what, const void *data, size_t n,
                            dtnn_error *err);
/* Checks before any work that path can be written as an output: its folder takes a new file,
 * and path is absent or a regular file (not a folder, device or FIFO). */
dtnn_status dtnn_file_check_output(const char *path, const char *what, dtnn_error *err);

/* IDX (MNIST format), gzip or raw. Images scaled to [0,1]. The arrays these loaders return are
 * released with free(). */
dtnn_status dtnn_idx_load_images(const char *path, float **x, int64_t *n, int *h, int *w,
                                 dtnn_error *err);
dtnn_status dtnn_idx_load_labels(const char *path, int32_t **y, int64_t *n, dtnn_error *err);
/* One binary CIFAR file (classes 10: data_batch_N.bin, test_batch.bin; classes 100: train.bin,
 * test.bin, fine labels): images [n, 3, 32, 32] in [0, 1] and labels, released with free(). */
dtnn_status dtnn_cifar_load(const char *path, int classes, float **x, int32_t **y, int64_t *n,
                            dtnn_error *err);
/* .npy: float32 array of up to DTNN_NPY_MAX_DIMS dimensions (dims must hold that many), or an
 * integer label vector. */
#define DTNN_NPY_MAX_DIMS 4
dtnn_status dtnn_npy_load_f32(const char *path, float **x, int64_t *dims, int *ndim,
                              dtnn_error *err);
dtnn_status dtnn_npy_load_labels(const char *path, int32_t **y, int64_t *n, dtnn_error *err);
dtnn_status dtnn_npy_save_f32(const char *path, const float *x, const int64_t *dims, int ndim,
                              dtnn_error *err);

/* An 8-bit RGB image, decoded from JPEG (libjpeg-turbo) or PNG (libpng). Start from all zero;
 * a reused dtnn_image keeps its buffers and only grows them, so a loader thread decodes image
 * after image without allocating (the decoders' own working memory aside). */
typedef struct {
    unsigned char *pixels;      /* [h, w, 3], rows top to bottom */
    int w, h;
    size_t pixels_capacity;     /* bytes held by pixels */
    unsigned char *file;        /* dtnn_image_read's copy of the file */
    size_t file_capacity;
} dtnn_image;
/* Refused as a decompression bomb (PIL's limit): images of more pixels than this. */
#define DTNN_IMAGE_MAX_PIXELS 178956970
/* Decodes JPEG or PNG bytes (recognised by their signature, not a name) to RGB: grayscale and
 * palette images are expanded, alpha is dropped, 16-bit samples keep their high byte, CMYK
 * JPEGs are converted. A corrupt, truncated or unsupported image is DTNN_ERR_FORMAT with a
 * message that starts with origin (a path, say); never a crash or an exit. */
dtnn_status dtnn_image_decode(const void *data, size_t len, const char *origin, dtnn_image *img,
                              dtnn_error *err);
/* Reads the file at path and decodes it. */
dtnn_status dtnn_image_read(const char *path, dtnn_image *img, dtnn_error *err);
void dtnn_image_free(dtnn_image *img);

/* Seeded permutation of [0, n) for an epoch: the same on every rank and every run. */
void dtnn_epoch_permutation(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch, int shuffle);

/* ---- loaders: the batches of training and evaluation ------------------------------------- */

/*
 * A loader hands out this rank's part of each global batch of an epoch: the samples at
 * positions [B r / R, B (r + 1) / R) of global step s of the epoch's order (the permutation of
 * dtnn_epoch_permutation, or file order), decoded, augmented and normalised, as float32 NCHW.
 * Over a split held in memory, or streamed from an image folder (dir/train/<class>/<image>,
 * dir/val/<class>/<image>, JPEG or PNG). With threads > 0, background threads fill a bounded
 * queue of the next batches while the caller trains on the current one, each sample decoded by
 * whichever thread is free; what a sample holds depends only on (seed, epoch, sample index),
 * never on threads or timing, so a run resumes exactly and ranks see one global batch.
 *
 * Unreadable images (corrupt, truncated, not an image) are skipped: the sample is replaced by
 * the next readable one of the epoch's order (so batches keep their size), counted, and the
 * first paths kept for the report; with strict the first one is an error naming its path.
 */
typedef struct dtnn_loader dtnn_loader;

/* Augmentations (dtnn_loader_params.augment), in torchvision's terms. */
#define DTNN_AUG_CROP 1u    /* in memory: RandomCrop(size, padding=crop_padding), padding with
                             * black; image folders: RandomResizedCrop(image_size) (without it:
                             * Resize(image_size * 256 / 224) + CenterCrop(image_size)) */
#define DTNN_AUG_FLIP 2u    /* RandomHorizontalFlip(0.5) */
#define DTNN_AUG_TRIVIAL 4u /* TrivialAugmentWide() after the crop and flip, on the 8-bit image
                             * (data in memory: its normalisation undone and rounded to 8 bits,
                             * exact for IDX and CIFAR), as torchvision.transforms.functional
                             * computes each operation on a uint8 tensor */
#define DTNN_AUG_RANDAUG 8u /* RandAugment(randaugment_ops, randaugment_magnitude), likewise */

typedef struct {
    int batch_size;         /* the global batch */
    int rank, ranks;        /* this rank's slice of every global batch (0 of 1) */
    int shuffle;            /* a seeded permutation per epoch; 0: dataset order */
    uint64_t seed;          /* order and augmentation */
    unsigned augment;       /* DTNN_AUG_* */
    int crop_padding;       /* in-memory DTNN_AUG_CROP (4, the CIFAR recipe) */
    float random_erase;     /* torchvision's RandomErasing(p) after normalisation: with this
                             * probability a box of 2% to 33% of the image, aspect 0.3 to 3.3,
                             * set to 0 (value=0, the mean); 0: none */
    int threads;            /* decoding threads; 0 decodes in the caller, at dtnn_loader_next */
    int prefetch;           /* batches decoded ahead (0: max(2, threads)) */
    int image_size;         /* image folders: output H = W (224) */
    int strict;             /* image folders: an unreadable image is an error, not a skip */
    float mixup_alpha;      /* torchvision.transforms.v2.MixUp(alpha) on every batch (0: none) */
    float cutmix_alpha;     /* v2.CutMix(alpha) on every batch; with both, a fair coin per batch
                             * chooses one (the reference scripts' RandomChoice). The partner of
                             * a sample is the one before it in the global batch, whichever rank
                             * holds it; the draws are keyed by (seed, epoch, step). Labels become
                             * targets of two labels (dtnn_loader_mix, dtnn_model_loss_mixed). */
    int randaugment_ops;        /* RandAugment's num_ops (2) */
    int randaugment_magnitude;  /* and its magnitude bin of 31 (9) */
    int shuffle_buffer;     /* shards: the shuffle buffer's samples (1000; 0 or 1: none) */
    int repeated_augment;   /* K > 1: each sample K times in a row in the epoch's order, each
                             * time augmented anew, the epoch as long as without (torchvision's
                             * RASampler: n / K distinct samples an epoch); 0 or 1: off */
} dtnn_loader_params;

void dtnn_loader_params_default(dtnn_loader_params *p);
/* Over d's train split (test_split 0) or test split (1), normalised as d is; d must outlive the
 * loader. */
dtnn_loader *dtnn_loader_create(const dtnn_dataset *d, int test_split,
                                const dtnn_loader_params *p, dtnn_error *err);
/* Streams dir/<split> ("train" or "val"): classes are dir/train's class folders sorted by name
 * (label = index), images of a class sorted by name; normalised with ImageNet's mean (0.485,
 * 0.456, 0.406) and std (0.229, 0.224, 0.225). Only file names are read here. */
dtnn_loader *dtnn_loader_create_folder(const char *dir, const char *split,
                                       const dtnn_loader_params *p, dtnn_error *err);
/* Reads split ("train" or "val") of a sharded dataset: WebDataset tar shards (KEY.jpg, .jpeg
 * or .png with KEY.cls) in dir, listed by dir/index.json (`dtnn shard` writes it) or, without
 * one, dir/<split>-*.tar (for train every .tar but val* and test*), whose headers are then
 * all read to count the samples. Normalised and cropped as an image folder. Training order
 * (shuffle 1): every epoch the shards are permuted and dealt out to the ranks, each rank
 * reading only its own (then, if they run short of its share of the epoch's
 * ceil(n / batch_size) full batches, shards drawn at random, as WebDataset's resampling)
 * through a shuffle buffer, every draw keyed by (seed, epoch, rank): a resume on the same
 * ranks is exact; MixUp's partner of a rank's first sample is that rank's last (the ranks do
 * not share samples). Evaluation order (shuffle 0): the shards in name order, as a folder. */
dtnn_loader *dtnn_loader_create_shards(const char *dir, const char *split,
                                       const dtnn_loader_params *p, dtnn_error *err);
/* Packing an image folder (dir/train/<class>/<image>, dir/val/...) into shards (read back as
 * an image folder is read: RGB at image_size, ImageNet's normalisation): each split's
 * images in a random order (seed) as KEY.jpg or KEY.png (the file as it is, by its content;
 * other files skipped and counted) with KEY.cls, in output/<split>-NNNNNN.tar of about
 * shard_mb MiB each, and output/index.json listing them with their sample counts. The output
 * folder is created; one that already holds shards or an index is refused. */
typedef struct {
    const char *data_dir;
    const dtnn_dataset *dataset;    /* instead of data_dir: a dataset in memory (CIFAR, npy,
                                     * ...), its images taken back to 8 bits (as the loaders
                                     * do) and written as PNG, its test split as val */
    const char *output;
    double shard_mb;        /* 256 */
    uint64_t seed;          /* 42 */
} dtnn_shard_params;
typedef struct {
    int64_t samples, skipped, shards, bytes;
} dtnn_shard_report;
void dtnn_shard_params_default(dtnn_shard_params *p);
dtnn_status dtnn_shards_write(const dtnn_shard_params *p, dtnn_shard_report *report,
                              dtnn_error *err);
/* Whether dir holds a split ("train", "val") of shards, by its index or by file names. */
int dtnn_shards_has_split(const char *dir, const char *split);
/* Bytes this loader has read from its shards (headers, classes, images); 0 for the others. */
int64_t dtnn_loader_bytes_read(const dtnn_loader *l);
/* Stops the threads (after the image each is decoding) and frees everything. */
void dtnn_loader_free(dtnn_loader *l);

typedef struct {
    int64_t n;                  /* samples in the split */
    int c, h, w, classes;       /* what a sample becomes */
    int64_t steps_per_epoch;    /* ceil(n / batch_size): the last batch may be partial */
    int local_max;              /* most samples of one batch on this rank */
    const int32_t *labels;      /* [n], dataset order */
    float mean[4], std[4];      /* the normalisation applied (checkpoints store it) */
    char name[64];
    dtnn_loader_params params;
} dtnn_loader_info;
void dtnn_loader_get_info(const dtnn_loader *l, dtnn_loader_info *info);

/* Begins the batches of steps [first, end) of epoch (first > 0 resumes mid-epoch); ends what
 * was in progress. The background threads start decoding at once. */
dtnn_status dtnn_loader_start(dtnn_loader *l, int64_t epoch, int64_t first, int64_t end,
                              dtnn_error *err);
/* The next batch of this rank: x [n, c, h, w], y [n], and the global batch's size (the mean of
 * the loss is over it). Valid until the next call, dtnn_loader_start or dtnn_loader_free. */
dtnn_status dtnn_loader_next(dtnn_loader *l, const float **x, const int32_t **y, int *n,
                             int64_t *global_n, dtnn_error *err);
/* This rank's part of global step `step` of `epoch`, decoded now in the caller's thread into x
 * [local_max, c, h, w] and y; ends an epoch in progress. */
dtnn_status dtnn_loader_batch(dtnn_loader *l, int64_t epoch, int64_t step, float *x, int32_t *y,
                              int *n, dtnn_error *err);
/* How the batch last handed out (dtnn_loader_next or dtnn_loader_batch) was mixed: kind NONE
 * with lam 1 and y2 NULL when dtnn_loader_params.mixup_alpha and cutmix_alpha are 0. */
typedef enum { DTNN_MIX_NONE = 0, DTNN_MIX_MIXUP = 1, DTNN_MIX_CUTMIX = 2 } dtnn_mix_kind;
typedef struct {
    dtnn_mix_kind kind;
    float lam;              /* weight of y[i] in sample i's target; 1 - lam is y2[i]'s */
    const int32_t *y2;      /* [n] the partners' labels, valid as the batch's y */
    double draw;            /* the Beta draw (a float32 value; MixUp: lam) */
    int cx, cy;             /* CutMix: the box's drawn centre */
    int box[4];             /* CutMix: x0, y0, x1, y1 of the partner's pixels pasted in */
} dtnn_batch_mix;
void dtnn_loader_mix(const dtnn_loader *l, dtnn_batch_mix *mix);
/* Unreadable images skipped so far in the batches handed out (each time one is met); paths
 * (may be NULL) receives up to three distinct ones, the first met, comma-separated. */
int64_t dtnn_loader_skipped(const dtnn_loader *l, char *paths, size_t len);

/* ---- communicator -------------------------------------------------------------------------- */

/* A communicator: rank r of size. The single-process one is rank 0 of 1; the MPI one (when the
 * build has MPI and the process was started by mpirun/mpiexec/srun) spans MPI_COMM_WORLD. Only
 * src/comm/comm_mpi.c includes mpi.h; everything else talks to these calls. */
typedef enum { DTNN_COMM_F32 = 0, DTNN_COMM_F16, DTNN_COMM_BF16 } dtnn_comm_dtype;

/* A communicator for a single process (rank 0 of 1). */
dtnn_comm *dtnn_comm_create_single(void);
/* MPI when launched by an MPI launcher (and the build has MPI), else single. Initialises MPI.
 * NULL with DTNN_ERR_COMM when the launcher's rank count is not the one this build's MPI sees
 * (a launcher of another MPI), or when srun started several tasks that MPI cannot join (srun
 * --mpi=none, or a build without MPI): each would otherwise train alone. */
dtnn_comm *dtnn_comm_create_auto(int *argc, char ***argv, dtnn_error *err);
/* Finalises MPI (if it was initialised here) and frees. */
void dtnn_comm_free(dtnn_comm *c);
/* NCCL over `below` (the MPI communicator, or single): the same ranks, whose reductions of
 * model m's device memory (m on --device cuda; one GPU per rank) run on the GPUs, ordered with
 * the model's stream without host waits; host buffers go to `below`. Collective over below's
 * ranks. NULL with a message in a build without NCCL or for a model on another device. Free
 * it (dtnn_comm_free) before below, which it borrows. */
dtnn_comm *dtnn_comm_nccl_create(dtnn_comm *below, dtnn_model *m, dtnn_error *err);

/* Which library moves the gradients of data-parallel training (dtnn_train_params). */
typedef enum { DTNN_COLLECTIVES_MPI = 0, DTNN_COLLECTIVES_NCCL } dtnn_collectives;
dtnn_status dtnn_collectives_parse(const char *name, dtnn_collectives *out, dtnn_error *err);
int dtnn_comm_rank(const dtnn_comm *c);
int dtnn_comm_size(const dtnn_comm *c);
/* Ranks on this rank's node, this rank's index among them, and the number of nodes. */
int dtnn_comm_local_size(const dtnn_comm *c);
int dtnn_comm_local_rank(const dtnn_comm *c);
int dtnn_comm_node_count(const dtnn_comm *c);
/* This rank's node, 0 .. node_count - 1, numbered in the order of the nodes' lowest ranks. */
int dtnn_comm_node(const dtnn_comm *c);
const char *dtnn_comm_name(const dtnn_comm *c);   /* "single process", "MPICH 4.0.2", ... */
/* What started the ranks, from the launcher's environment: "mpirun", "mpiexec (hydra)",
 * "srun --mpi=pmix", "sbatch+mpirun", ..., with ", Slurm job ID" inside a Slurm job; "" for a
 * plain start. */
const char *dtnn_comm_launcher(const dtnn_comm *c);
/* The nodes' host names in Slurm's short form ("dtnn-h[0-1]"; the first ones and a count when
 * there are many). */
const char *dtnn_comm_hosts(const dtnn_comm *c);
/* CPU cores given to this rank: its affinity mask (taskset, cpuset, the launcher's binding),
 * shared evenly among the ranks on its node whose masks overlap it. Kernel threads beyond this
 * oversubscribe the cores. */
int dtnn_comm_cores(const dtnn_comm *c);
/* A rank that waits longer than `seconds` in a collective finds out which ranks have not
 * reached it and fails with a message naming them (DTNN_ERR_COMM), instead of hanging. 0
 * (the default) waits forever. Every rank must set the same value. */
void dtnn_comm_set_stall_timeout(dtnn_comm *c, double seconds);
dtnn_status dtnn_comm_allreduce_sum(dtnn_comm *c, float *buf, size_t n, dtnn_error *err);
dtnn_status dtnn_comm_allreduce_sum_f64(dtnn_comm *c, double *buf, size_t n, dtnn_error *err);
dtnn_status dtnn_comm_broadcast(dtnn_comm *c, void *buf, size_t bytes, int root,
                                dtnn_error *err);
/* Gathers `bytes` from every rank into recv [size x bytes], on every rank. */
dtnn_status dtnn_comm_allgather(dtnn_comm *c, const void *send, size_t bytes, void *recv,
                                dtnn_error *err);
/* Ends every rank of the job after printing message (rank-prefixed) on stderr. A single
 * process just returns: the caller exits. */
void dtnn_comm_abort(dtnn_comm *c, int code, const char *message);
/* Records every collective and gradient bucket of c into t (NULL: stop recording). */
void dtnn_comm_set_trace(dtnn_comm *c, dtnn_trace *t);

/* ---- timeline ------------------------------------------------------------------------------ */

/* A timeline of a run (--trace): spans of steps, data waits, layers' forward and backward,
 * collectives, gradient buckets from ready to reduced, optimizer steps and checkpoints, on
 * every rank, written as a Chrome trace-event JSON file (Perfetto, chrome://tracing) whose
 * processes are the ranks. Without a trace nothing is recorded and no clock is read.
 * Collective over comm (every rank calls it; comm may be NULL for one process): measures each
 * rank's clock offset to rank 0, so the merged file is on one clock. At most max_events spans
 * are kept per rank (0: 1 Mi, 56 MiB); later ones are counted as dropped in the file. */
dtnn_trace *dtnn_trace_create(dtnn_comm *comm, size_t max_events, dtnn_error *err);
void dtnn_trace_free(dtnn_trace *t);
/* Seconds on the trace's clock (0 for a NULL trace), and a span of the caller's own from t0 to
 * t1 on the main track; name must stay valid until the trace is written. */
double dtnn_trace_clock(const dtnn_trace *t);
void dtnn_trace_span(dtnn_trace *t, const char *name, double t0, double t1);
/* A key and value for the file's otherData ("bucket_mb", "16"); at most 16. */
void dtnn_trace_note(dtnn_trace *t, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Collective: every rank's spans go to rank 0, which writes one file at path (through a
 * temporary renamed into place). */
dtnn_status dtnn_trace_write(dtnn_trace *t, dtnn_comm *comm, const char *path,
                             dtnn_error *err);
/* This rank alone writes path.rank<R>, for when the ranks can no longer meet (a failed run);
 * the files of one run merge by concatenating their traceEvents (scripts/trace_plot reads
 * several). */
dtnn_status dtnn_trace_write_local(dtnn_trace *t, const char *path, dtnn_error *err);

/* Gradient all-reduce strategies (dtnn_train_params.allreduce). */
typedef enum {
    DTNN_ALLREDUCE_OVERLAP = 0,   /* buckets, non-blocking, started during backward */
    DTNN_ALLREDUCE_BLOCKING,      /* one all-reduce of the whole gradient after backward */
    DTNN_ALLREDUCE_HIERARCHICAL,  /* reduce in the node, all-reduce among node leaders, bcast */
} dtnn_allreduce_mode;
dtnn_status dtnn_allreduce_parse(const char *name, dtnn_allreduce_mode *mode, dtnn_error *err);
dtnn_status dtnn_comm_dtype_parse(const char *name, dtnn_comm_dtype *dtype, dtnn_error *err);

/* Gradient all-reduce for a custom training loop (dtnn_train uses it): call begin before the
 * backward that completes a step's gradient and finish after it; the model's gradient is then
 * the sum over the ranks (scale the loss by 1 / global batch for the mean). bucket_mb <= 0
 * (DTNN_BUCKET_AUTO) chooses the size for the job with dtnn_bucket_auto, which makes this call
 * collective (every rank of comm must make it) on more than one rank; one process reduces
 * nothing and measures nothing. */
#define DTNN_BUCKET_AUTO 0.0
typedef struct dtnn_grad_sync dtnn_grad_sync;
dtnn_grad_sync *dtnn_grad_sync_create(dtnn_comm *comm, dtnn_model *m, dtnn_allreduce_mode mode,
                                      double bucket_mb, dtnn_comm_dtype dtype, dtnn_error *err);
void dtnn_grad_sync_free(dtnn_grad_sync *gs);
void dtnn_grad_sync_begin(dtnn_grad_sync *gs);
dtnn_status dtnn_grad_sync_finish(dtnn_grad_sync *gs, dtnn_error *err);
/* Seconds spent completing all-reduces after backward (the exposed communication). */
double dtnn_grad_sync_wait_seconds(const dtnn_grad_sync *gs);
int dtnn_grad_sync_bucket_count(const dtnn_grad_sync *gs);
/* The bucket size the gradient was cut at, MiB (chosen by auto, or as given), and why: auto's
 * dtnn_bucket_auto_info.reason, or "" for a size given. For traces and logs. */
double dtnn_grad_sync_bucket_mb(const dtnn_grad_sync *gs);
const char *dtnn_grad_sync_bucket_reason(const dtnn_grad_sync *gs);

/* What dtnn_bucket_auto chose and from what. */
typedef struct {
    double bucket_mb;           /* the size to give dtnn_grad_sync_create / bucket_mb */
    int buckets;                /* that many buckets of the gradient */
    size_t gradient_values;     /* floats of the flat gradient */
    int ranks, nodes;
    int measured;               /* 1: the link below was measured (more than one rank) */
    double link_alpha;          /* seconds per message of the fitted ring (rank 0's timing) */
    double link_gbits;          /* rate per link of the fitted ring, Gbit/s */
    double backward_seconds;    /* the backward estimate the choice used */
    char reason[240];           /* "auto 16 MiB (11.2 M gradients, 4 ranks on 2 nodes, link ...)" */
} dtnn_bucket_auto_info;

/* Chooses the gradient bucket size for model m (built) on comm: collective, every rank calls
 * it (after the model is built, before training). On one rank it returns at once (one bucket,
 * nothing measured). Otherwise it times blocking all-reduces of 1 KiB and of up to 4 MiB
 * among the ranks (about 15 of them; well under a second on a 1 Gbit/s link) for the link's
 * alpha and beta, estimates one step's backward from every layer's FLOPs at max_batch
 * samples and the rate of a 256^3 product on the model's own backend (measured through its
 * table), and runs dtnn_project_bucket_auto (dtnn/project.h) on that profile. Rank 0's
 * choice is broadcast, so all ranks cut the same buckets. */
dtnn_status dtnn_bucket_auto(dtnn_comm *comm, dtnn_model *m, dtnn_allreduce_mode mode,
                             dtnn_comm_dtype dtype, dtnn_bucket_auto_info *out,
                             dtnn_error *err);
/* ---- checkpoints --------------------------------------------------------------------------- */

typedef struct {
    int64_t step;           /* optimizer steps taken */
    int64_t epoch;          /* completed epochs */
    int64_t step_in_epoch;  /* steps into the current epoch */
    uint64_t seed;
    int64_t global_batch;
    int64_t skipped;        /* steps skipped as non-finite in this run (not saved) */
    /* The epoch-end monitor (--lr-schedule plateau, --early-stop): epochs with a finite loss,
     * the best monitored loss of each rule (ReduceLROnPlateau's needs a 1e-4 relative gain,
     * early stopping any gain) and its epochs since, the plateau's cuts. Saved. */
    int64_t monitored;
    double plateau_best, early_best;
    int64_t plateau_bad, early_bad, plateau_cuts;
} dtnn_train_state;

/* Writes parameters and buffers with PyTorch state_dict names, plus (when opt is not NULL) the
 * optimizer state under "optimizer.<slot>.<name>" and the training state in the metadata.
 * Atomic: a temporary file in the same folder, then rename. */
dtnn_status dtnn_checkpoint_save(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                 const dtnn_train_state *ts, const dtnn_dataset *norm,
                                 dtnn_error *err);
/* Loads weights (and, when opt/ts are not NULL, the optimizer and training state). Every model
 * tensor must be present with the same shape. norm (may be NULL) receives the normalisation. */
dtnn_status dtnn_checkpoint_load(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                 dtnn_train_state *ts, dtnn_dataset *norm, dtnn_error *err);
/* The training state of a complete checkpoint (the whole file read and its checksum checked)
 * without loading it into a model: what a supervisor needs to choose the newest checkpoint to
 * resume from. DTNN_ERR_IO / DTNN_ERR_FORMAT for a missing, truncated or altered file, or one
 * without a training state (weights only). ts is set only on success. */
dtnn_status dtnn_checkpoint_read_state(const char *path, dtnn_train_state *ts, dtnn_error *err);
/* The newest complete checkpoint of a run that saves to save_path (--save): save_path and its
 * --keep copies (<stem>.step<N>.safetensors beside it), by the step each holds, skipping files
 * modified before not_before (seconds since the epoch; 0: none skipped) and any that
 * dtnn_checkpoint_read_state refuses. On a tie a kept copy wins, since a run resumed from it
 * overwrites save_path. Writes the path to out and its state to ts; DTNN_ERR_IO when there is
 * none. */
dtnn_status dtnn_checkpoint_newest(const char *save_path, int64_t not_before, char *out,
                                   size_t out_len, dtnn_train_state *ts, dtnn_error *err);
/* Weights only (as dtnn_checkpoint_load without optimizer, state or normalisation), leaving
 * the tensors whose names match one of the globs in exclude (fnmatch: "fc.*") as they are:
 * fine-tuning on other classes keeps the new head's fresh initialisation. A pattern matching
 * no tensor of the model is an error; file tensors matching a pattern are ignored. */
dtnn_status dtnn_checkpoint_load_weights(const char *path, dtnn_model *m,
                                         const char *const *exclude, int n_exclude,
                                         dtnn_error *err);
/* The weights' average a run with --ema saved (dtnn_train_params.ema_decay) as m's
 * parameters and buffers: to evaluate, predict with or export the averaged model.
 * DTNN_ERR_FORMAT when the checkpoint holds none. */
dtnn_status dtnn_checkpoint_load_average(const char *path, dtnn_model *m, dtnn_error *err);

/* ---- ONNX --------------------------------------------------------------------------------- */

/* Whether this build can write ONNX files (CMake DTNN_ONNX: protobuf-c and onnx.proto). */
int dtnn_onnx_available(void);
/* Writes the inference graph of a built model m, with its current weights, as an ONNX model of
 * operator set `opset` (11 to 17; 13 is a good default) at path, through a temporary file
 * renamed into place. Input "input" [N, C, H, W] and output "output" ([N, classes]) have a
 * symbolic batch N; nodes are named as the layers, initializers as the model's tensors. Batch
 * norm is written in evaluation form (running statistics) and dropout is left out. The graph
 * takes normalised input, as dtnn_model_forward; a checkpoint's normalisation is not in it.
 * A layer with no ONNX form is an UNSUPPORTED error that names it; a build without ONNX
 * support returns UNSUPPORTED saying so. */
dtnn_status dtnn_onnx_export(const dtnn_model *m, const char *path, int opset, dtnn_error *err);

/* Reads the ONNX model at path (opsets 9 to 17, one float32 input [N, C, H, W] of fixed C, H,
 * W) and returns the equivalent model, not yet built, as dtnn_model_parse_file would from the
 * text dtnn_onnx_import_text gives. Layers are named after their weight initializer
 * ("conv1.weight" -> "conv1") where that fits, else after the node. An operator, attribute or
 * value dtnn cannot express exactly is an UNSUPPORTED error naming the node and its operator;
 * a file that does not decode or is inconsistent is FORMAT. */
dtnn_model *dtnn_onnx_import(const char *path, dtnn_error *err);
/* The plain-text model file of the ONNX model at path (malloc'd; the caller frees it). */
char *dtnn_onnx_import_text(const char *path, dtnn_error *err);
/* Copies the initializers of the ONNX model at path into built model m, imported from the
 * same file: each goes to the tensor of the layer its node feeds, whatever its name. */
dtnn_status dtnn_onnx_load_weights(const char *path, dtnn_model *m, dtnn_error *err);

/* ---- training ------------------------------------------------------------------------------ */

typedef struct {
    int epochs;                 /* used when steps == 0 */
    int64_t steps;              /* total steps; 0 = epochs x steps per epoch */
    int batch_size;             /* global batch */
    int shuffle;
    uint64_t seed;
    dtnn_loss_params loss;
    dtnn_sched_params sched;
    int eval_each_epoch;
    /* Ends the run after an epoch (checkpoint saved): > 0 stop_at_accuracy, the first whose
     * test top-1 accuracy (a fraction) reaches it (needs the test split); > 0 early_stop,
     * after that many epochs in a row without a lower monitored loss. The monitored loss is
     * the test loss where the test split is evaluated, else the epoch's training loss. */
    float stop_at_accuracy;
    int early_stop;
    /* > 0: an exponential moving average of the weights, as torchvision's --model-ema: every
     * ema_steps optimizer steps avg = ema_decay avg + (1 - ema_decay) w over the parameters
     * and the float buffers (batch-norm statistics; batch counts copied), the first update
     * and every update during the warm-up epochs a copy. It is evaluated beside the trained
     * weights at each epoch's end and saved in checkpoints as "ema.<name>"; a resumed run
     * (ts->step > 0) continues the average of resume_from, which must hold one. */
    float ema_decay;
    int ema_steps;
    const char *resume_from;
    const char *log_path;       /* JSONL, one object per epoch (NULL = none) */
    const char *save_path;      /* checkpoint at every epoch end and at the end (NULL = none) */
    /* data parallelism (ignored on one rank) */
    dtnn_allreduce_mode allreduce;
    double bucket_mb;           /* overlap / hierarchical bucket size, MiB (0 =
                                 * DTNN_BUCKET_AUTO, the default: dtnn_bucket_auto) */
    dtnn_comm_dtype comm_dtype; /* gradients travel in this type; weights stay fp32 */
    dtnn_collectives collectives;   /* MPI (host staging on a device), or NCCL on --device
                                     * cuda (dtnn_comm_nccl_create; fp32 gradients only) */
    int accumulate;             /* micro-batches per optimizer step (>= 1) */
    int sync_bn;                /* all-reduce batch-norm statistics */
    /* progress is never lost */
    int64_t checkpoint_every;   /* also save every N steps (0 = at epoch ends only) */
    int keep;                   /* also keep the K newest checkpoints as <save>.step<N> files */
    /* Set (to a signal number, say) by a signal handler to stop: the current step finishes,
     * every rank stops after the same step, a checkpoint is saved, and dtnn_train returns
     * DTNN_ERR_INTERRUPTED with the resume hint. NULL: never. */
    const volatile sig_atomic_t *stop;
    /* A step whose loss or gradient is NaN or Inf (on any rank) is skipped, weights and
     * running statistics as before it, and counted, instead of stopping the run. */
    int skip_nonfinite;
    /* Records the run's steps, data waits, optimizer steps, checkpoints and evaluations, and
     * (attached for the run) the model's layers and the communicator's collectives. NULL:
     * none. The caller writes it after the run. */
    dtnn_trace *trace;
    /* Seconds between the progress callback's calls within an epoch: 0 (the default) after
     * every step, > 0 at most once per interval, < 0 never; an epoch's last step and its end
     * are always reported. A callback in another language then costs nothing per step. */
    double progress_interval;
} dtnn_train_params;

void dtnn_train_params_default(dtnn_train_params *p);

typedef struct {
    int64_t step, total_steps;
    int64_t epoch, epochs;          /* epoch is 0-based */
    int64_t step_in_epoch, steps_per_epoch;
    double loss, acc;               /* running means over the epoch so far */
    double images_per_sec;
    double elapsed;
    float lr;
    int epoch_end;                  /* 1 on the call after an epoch finished */
    double test_loss, test_acc;     /* valid when epoch_end and a test split was evaluated */
    int has_test;
    double comm_wait;               /* seconds this epoch spent completing gradient all-reduces
                                     * after backward (the communication not hidden) */
    int64_t skipped;                /* steps skipped as non-finite so far (--skip-nonfinite) */
    int64_t skipped_images;         /* unreadable images skipped so far, over all ranks at
                                     * epoch ends, this rank's during an epoch */
    const char *stopping;           /* at an epoch end: why the run ends now, before its
                                     * epochs (target accuracy, early stop); else NULL */
    int has_ema_test;               /* the weights' average evaluated too (--ema) */
    double ema_test_loss, ema_test_acc;
} dtnn_progress;

typedef void (*dtnn_progress_fn)(const dtnn_progress *p, void *user);

/* Trains m with opt on d. ts carries the position (all zero for a new run; a loaded one to
 * resume). progress (may be NULL) is called after every step and at each epoch end. */
dtnn_status dtnn_train(dtnn_model *m, dtnn_optimizer *opt, const dtnn_dataset *d,
                       dtnn_comm *comm, const dtnn_train_params *p, dtnn_train_state *ts,
                       dtnn_progress_fn progress, void *user, dtnn_error *err);

/* dtnn_train with batches from loaders (image folders, augmentation, background decoding).
 * train's batch size, ranks, seed and shuffle must be p's and comm's; test (may be NULL) is
 * evaluated at every epoch end. */
dtnn_status dtnn_train_loader(dtnn_model *m, dtnn_optimizer *opt, dtnn_loader *train,
                              dtnn_loader *test, dtnn_comm *comm, const dtnn_train_params *p,
                              dtnn_train_state *ts, dtnn_progress_fn progress, void *user,
                              dtnn_error *err);
/* Evaluates one epoch of a loader (built with shuffle 0 and no augmentation), forward in
 * pieces of at most max_batch; with several ranks the metrics are summed over them. */
dtnn_status dtnn_evaluate_loader(dtnn_model *m, dtnn_loader *l, int max_batch,
                                 const dtnn_loss_params *lp, dtnn_comm *comm, dtnn_metrics *out,
                                 dtnn_error *err);

/* Evaluates on a split in batches of batch_size (through a loader of it, as
 * dtnn_evaluate_loader). With a communicator of several ranks (comm may be NULL), each rank
 * evaluates its share of every batch of batch_size x ranks samples and the metrics are summed,
 * so every rank gets the metrics of the whole split. */
dtnn_status dtnn_evaluate(dtnn_model *m, const dtnn_split *s, int batch_size,
                          const dtnn_loss_params *lp, dtnn_comm *comm, dtnn_metrics *out,
                          dtnn_error *err);

/* The scaling projection and the CPU's kernels, BLAS and threads: their own headers, which
 * this one includes so that users include dtnn.h alone. */
#include "dtnn/cpu.h"
#include "dtnn/project.h"

#ifdef __cplusplus
}
#endif
#endif
