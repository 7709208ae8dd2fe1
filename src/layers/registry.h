/*
 * registry.h — the one list of layer types. Each entry names a `const layer_ops layer_<ident>`
 * defined in its own file under src/layers/. Explicit (not self-registering) so static builds
 * keep every layer.
 */
#define DTNN_LAYER_LIST(X) \
    X(conv2d)              \
    X(linear)              \
    X(flatten)             \
    X(reshape)             \
    X(permute)             \
    X(matmul)              \
    X(relu)                \
    X(leaky_relu)          \
    X(sigmoid)             \
    X(tanh)                \
    X(relu6)               \
    X(hardsigmoid)         \
    X(hardswish)           \
    X(clamp)               \
    X(hardtanh)            \
    X(gelu)                \
    X(silu)                \
    X(erf)                 \
    X(sqrt)                \
    X(maxpool)             \
    X(avgpool)             \
    X(global_avgpool)      \
    X(global_maxpool)      \
    X(adaptive_avgpool)    \
    X(batchnorm)           \
    X(dropout)             \
    X(stochastic_depth)    \
    X(softmax)             \
    X(add)                 \
    X(mul)                 \
    X(sub)                 \
    X(div)                 \
    X(concat)              \
    X(slice)               \
    X(reduce)              \
    X(upsample)            \
    X(layernorm)           \
    X(pad)                 \
    X(shortcut_a)
