/*
 * layer.h — the layer contract. A layer type is one file holding one `layer_ops` table; all
 * tables are listed once in layers/registry.h. Adding a layer = one file + one line + one test.
 *
 * Tensor layout (fixed): float32, dense, NCHW. Letters: N batch, C input channels, H x W input,
 * K output channels, R x S kernel, P x Q output. A layer sees per-sample shapes (c, h, w); the
 * batch n is given at run time (n <= max_batch). A dense tensor of F features is (F, 1, 1).
 *
 * Life of a layer: set() receives each "key=value" option (unknown keys are errors); infer()
 * receives the input shapes and declares the output shape, its tensors (parameters and buffers
 * with PyTorch names and init rules), persistent aux bytes (saved between forward and backward:
 * max-pool indices, dropout masks, batch-norm statistics; aux_bytes per sample plus
 * aux_fixed_bytes) and scratch workspace bytes. The model then lays
 * out the flat buffers and fills the pointers below. forward() reads x[] and writes y. backward()
 * reads dy, accumulates (+=) parameter gradients into g[], and for each input i with
 * dx[i] != NULL writes (dx_accumulate[i] == 0) or adds to (== 1) dx[i]. A NULL dx[i] means no
 * gradient is wanted (the model input), and the layer must skip that work.
 */
#ifndef DTNN_LAYER_H
#define DTNN_LAYER_H

#include "../core/internal.h"
#include "../backend/backend.h"

typedef struct {
    int c, h, w;
} dtnn_shape;

static inline size_t shape_size(dtnn_shape s) { return (size_t)s.c * s.h * s.w; }

typedef enum {
    INIT_NONE = 0,
    INIT_WEIGHT,    /* conv / linear weight: PyTorch's kaiming_uniform(a=sqrt 5), He, Xavier */
    INIT_BIAS,      /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as PyTorch; zero for He/Xavier */
    INIT_ONES,
    INIT_ZEROS,
    INIT_FILL,      /* every value the tensor's fill (a constant operand's const_value) */
} layer_init;

#define LAYER_MAX_TENSORS 6

enum { LAYER_INPLACE = 1, LAYER_VIEW = 2 };

typedef struct {
    char suffix[24];        /* "weight", "running_mean", ... */
    dtnn_tensor_kind kind;
    dtnn_dtype dtype;
    int ndim;
    int64_t dims[4];
    layer_init init;
    double fan_in, fan_out;
    float fill;             /* INIT_FILL's value */
    int model_index;        /* index into the model's tensor table (set by the model) */
} layer_tensor;

typedef struct {
    dtnn_backend *be;       /* every operation on tensor data goes through it (be_run) */
    void *workspace;        /* scratch shared by all layers, workspace_bytes large */
    size_t workspace_bytes;
    int training;
    uint64_t seed;          /* with layer->index and step: the dropout stream */
    int64_t step;
    /* Sum over the ranks of data-parallel training, for layers whose statistics span the global
     * batch (synchronised batch norm); NULL when statistics are per rank. buf [n] is backend
     * memory, extra [n_extra] host memory, reduced in the same message (model.c stages them). */
    dtnn_status (*reduce_sum)(void *user, double *buf, size_t n, double *extra, size_t n_extra);
    void *reduce_user;
} layer_ctx;

typedef struct layer layer;

/* What a built layer computes, as numbers for readers outside the library's kernels (the ONNX
 * writer, src/model/onnx_export.c): its options with defaults resolved (a pool's stride), pairs
 * as {h, w}. The layer type says which fields mean something; the rest stay 0. Types without
 * options (flatten, add, concat, softmax, relu, ...) need no describe(). */
typedef struct {
    int kernel[2], stride[2], pad[2], dilation[2];
    int pad_extra[2];           /* bottom - top and right - left padding (0: symmetric) */
    int ceil_mode;              /* pools */
    int groups, bias;
    int count_include_pad;      /* avgpool */
    int outputs;                /* conv2d filters, linear outputs, shortcut_a filters */
    int output_size[2];         /* adaptive_avgpool */
    int offset;                 /* shortcut_a: the output channel of input channel 0 */
    float alpha;                /* leaky_relu slope, hardsigmoid's alpha */
    float beta;                 /* hardsigmoid's beta */
    float bounds[2];            /* clamp, hardtanh: min, max (infinite where clamp has none) */
    float eps;                  /* batchnorm */
    int constant;               /* add, mul, sub: the second operand is the tensor "constant" */
    int reverse;                /* sub: constant - x */
    int pad_sides[6];           /* pad: top, left, bottom, right, front, back (channels) */
    float pad_value;            /* pad: the fill */
    int approximate;            /* gelu: the tanh form */
    int channels[2];            /* slice: start, end */
    int reduce_over_channels;   /* reduce: over C (else over H x W) */
    int reduce_sum;             /* reduce: a sum (else a mean or, with reduce_l2, a norm) */
    int reduce_l2;              /* reduce: the L2 norm */
    int reduce_groups;          /* reduce over channels: across this many groups (0: all C) */
    int softmax_groups;         /* softmax: across this many channel groups (0: a flat row) */
    int last_axis;              /* softmax, layernorm, linear: over each row of W values */
    permute_geom permute;       /* permute: the input's dims and the permutation */
    int upsample_bilinear;      /* upsample: bilinear (else nearest); factors in stride */
    int upsample_align_corners;
} layer_attrs;

typedef struct {
    const char *type;
    const char *summary;        /* one line for `dtnn models --layers` and docs */
    size_t cfg_size;
    int min_inputs, max_inputs;
    void (*defaults)(void *cfg);
    dtnn_status (*set)(void *cfg, const char *key, const char *value, dtnn_error *err);
    dtnn_status (*infer)(layer *l, dtnn_error *err);
    void (*forward)(layer *l, const layer_ctx *ctx);
    void (*backward)(layer *l, const layer_ctx *ctx);
    /* Frees what infer() made besides cfg (a convolution plan); NULL: nothing. */
    void (*release)(layer *l);
    double (*flops)(const layer *l);    /* forward FLOPs per sample; NULL = 0 */
    /* The algorithm a built layer runs, for profiles ("winograd", ...); NULL: one only. */
    const char *(*method)(const layer *l);
    /* Fills the attributes of a built layer (see layer_attrs); NULL: it has none. */
    void (*describe)(const layer *l, layer_attrs *a);
    /* Memory sharing (model_plan.c): an `inplace` layer may write its output over its single
     * input, because its forward reads each value before writing the same position and its
     * backward needs no more than that output (ReLU: y > 0 exactly where x > 0). The model
     * does so when the input's producer feeds nothing else and its own backward does not
     * read its output (`backward_reads_output`: sigmoid, tanh, softmax). LAYER_VIEW layers
     * (flatten) change no value, so they may also follow a layer that is itself in place;
     * LAYER_INPLACE ones (ReLU) may not, since that layer's backward reads the shared memory. */
    int inplace;            /* 0, LAYER_INPLACE or LAYER_VIEW */
    int backward_reads_output;
    /* Fusion (model_plan.c, plan_fusion): a layer with relu_epilogue can do the work of a ReLU
     * that runs in place on its output. The model then sets its relu_fused: forward clamps the
     * output at 0, and backward's dy is the ReLU's output gradient, to be passed on only where
     * the value before the clamp was positive, as the ReLU's own backward would (ReLU'(0) =
     * 0): batch norm recomputes that value, add reads its output.
     * The ReLU layer is marked fused and skipped. Each such pass over a 4 MiB activation saved
     * is a memory-bound read and write; ResNet-20 has 19 of them forward and backward. */
    int relu_epilogue;
    /* The other side of fusion: a layer that is exactly max(x, 0) (fusable_relu), which a
     * producer with relu_epilogue may do; a layer whose output is the sum of its inputs
     * (sums_inputs: add), whose two-input form a producer with residual_epilogue (batch norm)
     * may do in its own passes, adding the other input; and a layer with an evaluation form
     * that --freeze-bn selects when all its parameters are frozen (eval_when_frozen). The
     * model plans by these, never by a layer's identity. */
    int fusable_relu;
    int sums_inputs;
    int residual_epilogue;
    int eval_when_frozen;
    /* Squeeze-excitation (model_plan.c, plan_se_fusion): a mean, an affine, an activation,
     * an affine and an activation (the gate) in a row, then a channel scale of the mean's own
     * input by the gate, is run by the scale as one backend operation (se_forward). Each says
     * what a built layer is, NULL meaning never: plane_mean, each channel's mean over all of
     * H x W; channel_affine, y = W x + b over the channels of 1 x 1 planes in fp32, W [out,
     * in] at p[0] and b (when *bias) at p[1]; activation, the element-wise one it is (its kind
     * and two scalars, as act_forward takes them); channel_scale, a two-input product of a
     * C x H x W input and a C x 1 x 1 one: the former's slot, else -1. */
    int (*plane_mean)(const layer *l);
    int (*channel_affine)(const layer *l, int *bias);
    int (*activation)(const layer *l, act_kind *kind, float *a, float *b);
    int (*channel_scale)(const layer *l);
    /* A normalisation layer (batch norm): its scale and shift form the "norm" parameter group
     * that optimizers may keep from weight decay and from layer-wise adaptation (LARS, LAMB),
     * as the large-batch recipes do. */
    int normalizes;
    /* A layer whose work can fail at run time (an external layer's functions): the model asks
     * it after every forward and backward and fails with its error; NULL: it cannot fail. */
    dtnn_status (*failure)(const layer *l, dtnn_error *err);
} layer_ops;

struct layer {
    const layer_ops *ops;
    char name[96];
    void *cfg;
    int index;                  /* position in the model */
    int n_in;
    int *in_ids;                /* producer node ids; DTNN_INPUT = model input */
    dtnn_shape *in;             /* [n_in] input shapes */
    dtnn_shape out;
    int n_tensors;
    layer_tensor t[LAYER_MAX_TENSORS];
    void *p[LAYER_MAX_TENSORS]; /* parameter (float) or buffer (float / int64) storage */
    float *g[LAYER_MAX_TENSORS];/* gradient of a parameter; NULL for buffers or inference */
    size_t aux_bytes;           /* per sample; the model allocates aux_bytes * max_batch */
    size_t aux_fixed_bytes;     /* plus this, independent of the batch (e.g. per-channel) */
    size_t workspace_bytes;     /* for a full max_batch; the model takes the maximum */
    /* What the model is built with (max_batch, workspace_limit: the scratch a layer should
     * stay under, conv_algo, precision), for the layers that plan by it in infer(). */
    const dtnn_build_params *build;
    dtnn_backend *be;           /* the model's, for plans made in infer() */
    int relu_fused;             /* this layer also does the next one's ReLU (relu_epilogue) */
    int fused;                  /* this ReLU (or add) is done by the layer before it: forward and
                                 * backward skip it */
    /* A layer with residual_epilogue: the two-input add it feeds, which it does in its passes
     * (model_plan.c, plan_fusion): it writes that add's output and the gradient of its other
     * input, the residual (input residual_slot of the add). */
    struct layer *residual_add;
    int residual_slot;
    /* A channel scale doing a squeeze-excitation block (plan_se_fusion): the mean, affine,
     * activation, affine and gate layers it runs, each marked fused, and its input slot of the
     * scaled tensor; se[0] NULL: none. */
    struct layer *se[5];
    int se_x;
    /* --freeze: nothing upstream of this layer trains, nor does it, so no one needs its
     * backward (the model skips it) */
    int no_backward;
    /* A layer with eval_when_frozen, under --freeze-bn with all its parameters frozen: its
     * evaluation form in training too (batch norm: the running statistics, not updated). */
    int eval_mode;
    char origin[160];           /* "file.model:12" when parsed from a model file, else "" */

    /* run time */
    int n;                      /* current batch */
    const float **x;            /* [n_in] inputs, each [n, in[i]] */
    float **dx;                 /* [n_in] input gradients or NULL */
    int *dx_accumulate;
    float *y, *dy;              /* [n, out] */
    void *aux;
    double seconds_fwd, seconds_bwd;
};

/* Declares a tensor during infer(); returns its index into l->t. */
int layer_declare(layer *l, const char *suffix, dtnn_tensor_kind kind, dtnn_dtype dtype,
                  int ndim, const int64_t *dims, layer_init init, double fan_in, double fan_out);

/* Option parsing helpers: each returns DTNN_OK or an ARG error naming the key and value. */
dtnn_status layer_opt_int(const char *key, const char *value, int min, int max, int *out,
                          dtnn_error *err);
dtnn_status layer_opt_float(const char *key, const char *value, double min, double max,
                            float *out, dtnn_error *err);
dtnn_status layer_opt_bool(const char *key, const char *value, int *out, dtnn_error *err);
/* A name of 1 to cap - 1 letters, digits and '_' (a tensor suffix), copied into out. */
dtnn_status layer_opt_identifier(const char *key, const char *value, char *out, size_t cap,
                                 dtnn_error *err);
/* A drop probability in [0, 1) (dropout's and stochastic depth's p): at 1 the kept values
 * would be scaled by infinity, and PyTorch's result (all zeros) has no gradient to train. */
dtnn_status layer_opt_drop_probability(const char *key, const char *value, float *out,
                                       dtnn_error *err);
/* "3" or "3x5" (h x w) */
/* forward and backward of a layer that only renames its input's shape (flatten, reshape):
 * nothing where the model runs it in place (a view), else a copy; backward copies (or adds)
 * the output gradient back. */
void layer_view_forward(layer *l, const layer_ctx *ctx);
void layer_view_backward(layer *l, const layer_ctx *ctx);
dtnn_status layer_opt_pair(const char *key, const char *value, int min, int *h, int *w,
                           dtnn_error *err);
/* The option axis = `other` | last of softmax, layernorm and linear: *last set (1 for last). */
dtnn_status layer_opt_last_axis(const char *type, const char *value, const char *other,
                                int *last, dtnn_error *err);
/* An ARG error unless the largest batch's rows (max_batch x rows_per_sample: the rows of W a
 * last-axis softmax, layernorm or linear hands the backend as its `n`) fit an int. */
dtnn_status layer_rows_fit(const layer *l, size_t rows_per_sample, dtnn_error *err);
/* Up to cap integers in [min, max] joined by sep ("2x3x4", "0,2,1") into out: how many, or -1
 * when value is not such a list. */
int layer_opt_list(const char *value, char sep, int min, int max, int cap, int *out);
/* A permutation of per-sample dims (the permute layer): g and its inverse (the gradient's way
 * back), the output's C x H x W (leading dims' product x the last two) and the tensor's size;
 * an ARG error when perm is not a permutation of 0 .. rank - 1. */
dtnn_status layer_permutation(const int *dims, const int *perm, int rank, permute_geom *g,
                              permute_geom *inverse, dtnn_shape *out, size_t *size,
                              dtnn_error *err);
/* "a,b,c,d": exactly count integers in [min, max] */
dtnn_status layer_opt_ints(const char *key, const char *value, int min, int max, int count,
                           int *out, dtnn_error *err);
/* The per-side padding options of convolutions and pools: pad_top, pad_left, pad_bottom,
 * pad_right, and pads=t,l,b,r (ONNX's order), into side[4] as t, l, b, r. Returns 1 when key is
 * one of them (the option's status in *st), 0 when it is not. */
int layer_opt_pad_sides(const char *key, const char *value, int side[4], dtnn_status *st,
                        dtnn_error *err);
dtnn_status layer_unknown_key(const layer_ops *ops, const char *key, dtnn_error *err);

/* The broadcast of a two-input layer's input shapes (NumPy's rule, per sample); a SHAPE error
 * naming both when they do not broadcast. */
dtnn_status layer_broadcast_geom(const layer *l, binary_geom *g, dtnn_error *err);

/* The constant operand of the one-input forms of add, mul and sub (x op c; for sub also
 * c - x): options const_shape (its per-sample shape, C or CxHxW, broadcast against x as NumPy),
 * const_value (the value it starts with, before a checkpoint or an import loads its values)
 * and, where reversible, reverse (the constant is the first operand). It is the buffer
 * "constant" [C, H, W]: saved, loaded and exported with the model, never trained. mul also
 * takes trainable (then it is a parameter, trained: ConvNeXt's layer scale) and const_name
 * (its tensor's suffix, default "constant": "layer_scale" gives torchvision's name). */
typedef struct {
    int c, h, w;        /* 0: no constant (the two-input form) */
    float value;
    int reverse;
    int given;          /* one of its options was set */
    int trainable;      /* a parameter, not a buffer */
    char name[24];      /* the tensor's suffix; "" = "constant" */
} layer_constant;

/* Returns 1 when key is one of those options (its status in *st), 0 when it is not. */
int layer_opt_constant(const char *key, const char *value, int reversible, layer_constant *k,
                       dtnn_status *st, dtnn_error *err);
/* The geometry of the layer: of its two inputs, or of x and its constant, which it declares
 * (the constant is input b, shared by every sample, or input a with reverse). */
dtnn_status layer_constant_infer(layer *l, const layer_constant *k, binary_geom *g,
                                 dtnn_error *err);

/* The registry. */
const layer_ops *layer_ops_find(const char *type);
const layer_ops *layer_ops_at(int i);

#endif
