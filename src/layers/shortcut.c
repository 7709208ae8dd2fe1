/*
 * shortcut.c — the parameter-free "option A" shortcut of the CIFAR ResNets of He et al. 2016
 * (section 4.2): when a stage halves the resolution and widens the channels, the identity is
 * subsampled and zero-padded in the channel dimension. As the widely used PyTorch version:
 *
 *     y = F.pad(x[:, :, ::stride, ::stride], (0, 0, 0, 0, pad, K - C - pad))
 *
 * Options: filters (K >= C, required), stride (2), offset (the channel where the C input
 * channels land; default (K - C) / 2, i.e. pad = K/4 for the usual K = 2C). Output height is
 * ceil(H / stride), as the slice ::stride gives. Backward scatters dy of the kept positions back
 * into dx; every other input position gets zero.
 */
#include <string.h>

#include "layer.h"

typedef struct {
    int filters, stride, offset;    /* offset -1: centre the input channels */
    int C, H, W, P, Q, at;          /* derived: input, output size, channel offset used */
} shortcut_cfg;

static void shortcut_defaults(void *cfg)
{
    shortcut_cfg *c = cfg;
    c->filters = 0;
    c->stride = 2;
    c->offset = -1;
}

static dtnn_status shortcut_set(void *cfg, const char *key, const char *value, dtnn_error *err)
{
    shortcut_cfg *c = cfg;
    if (!strcmp(key, "filters") || !strcmp(key, "out_channels"))
        return layer_opt_int(key, value, 1, 1 << 20, &c->filters, err);
    if (!strcmp(key, "stride"))
        return layer_opt_int(key, value, 1, 1 << 20, &c->stride, err);
    if (!strcmp(key, "offset"))
        return layer_opt_int(key, value, 0, 1 << 20, &c->offset, err);
    return dtnn_error_set(err, DTNN_ERR_ARG,
                          "unknown option '%s' for shortcut_a (filters, stride, offset)", key);
}

static dtnn_status shortcut_infer(layer *l, dtnn_error *err)
{
    shortcut_cfg *c = l->cfg;
    dtnn_shape in = l->in[0];
    if (c->filters <= 0)
        return dtnn_error_set(err, DTNN_ERR_ARG, "shortcut_a needs filters= (output channels)");
    if (c->filters < in.c)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "shortcut_a filters=%d is fewer than the %d "
                              "channels of its %dx%dx%d input (option A only pads channels)",
                              c->filters, in.c, in.c, in.h, in.w);
    c->at = c->offset >= 0 ? c->offset : (c->filters - in.c) / 2;
    if (c->at + in.c > c->filters)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "shortcut_a offset=%d puts the %d input "
                              "channels past filters=%d (offset must be at most %d)", c->at,
                              in.c, c->filters, c->filters - in.c);
    c->C = in.c;
    c->H = in.h;
    c->W = in.w;
    c->P = (in.h - 1) / c->stride + 1;
    c->Q = (in.w - 1) / c->stride + 1;
    l->out = (dtnn_shape){c->filters, c->P, c->Q};
    return DTNN_OK;
}

/* One output row from an input row: every stride-th value. Stride 2 (every ResNet) has its
 * own loop, with a constant stride GCC vectorizes (two loads and a shuffle per 8 values). */
static void subsample_row(const float *x, int stride, int Q, float *y)
{
    if (stride == 2)
        for (int q = 0; q < Q; q++)
            y[q] = x[2 * q];
    else
        for (int q = 0; q < Q; q++)
            y[q] = x[(size_t)q * stride];
}

/* Plane by plane over the batch, in parallel: as one thread's scalar loop this layer took
 * 1.9 ms forward (the 16 -> 32 one in ResNet-20, batch 64) at 1 and at 2 threads alike. */
static void shortcut_forward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const shortcut_cfg *c = l->cfg;
    const size_t in_size = shape_size(l->in[0]), out_size = shape_size(l->out);
    const size_t PQ = (size_t)c->P * c->Q, HW = (size_t)c->H * c->W;
    const long long planes = (long long)l->n * c->filters;
#pragma omp parallel for schedule(guided)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / c->filters), ch = (int)(pl % c->filters) - c->at;
        float *y = l->y + s * out_size + (size_t)(pl % c->filters) * PQ;
        if (ch < 0 || ch >= c->C) {     /* a padding channel */
            memset(y, 0, sizeof(float) * PQ);
            continue;
        }
        const float *x = l->x[0] + s * in_size + (size_t)ch * HW;
        for (int p = 0; p < c->P; p++)
            subsample_row(x + (size_t)p * c->stride * c->W, c->stride, c->Q, y + (size_t)p * c->Q);
    }
}

/* dx gets dy at the kept positions and, unless adding, zero elsewhere: written row by row in
 * one pass (a memset of all of dx first, then the scatter, wrote it twice). */
static void shortcut_backward(layer *l, const layer_ctx *ctx)
{
    (void)ctx;
    const shortcut_cfg *c = l->cfg;
    float *dx = l->dx[0];
    if (!dx)
        return;
    const size_t in_size = shape_size(l->in[0]), out_size = shape_size(l->out);
    const size_t PQ = (size_t)c->P * c->Q, HW = (size_t)c->H * c->W;
    const int acc = l->dx_accumulate[0], stride = c->stride, W = c->W;
    const long long planes = (long long)l->n * c->C;
#pragma omp parallel for schedule(guided)
    for (long long pl = 0; pl < planes; pl++) {
        const int s = (int)(pl / c->C), ch = (int)(pl % c->C);
        const float *dy = l->dy + s * out_size + (size_t)(c->at + ch) * PQ;
        float *dxc = dx + s * in_size + (size_t)ch * HW;
        for (int yy = 0; yy < c->H; yy++) {
            float *row = dxc + (size_t)yy * W;
            const float *d = dy + (size_t)(yy / stride) * c->Q;
            if (yy % stride) {
                if (!acc)
                    memset(row, 0, sizeof(float) * W);
            } else if (acc) {
                for (int q = 0; q < c->Q; q++)
                    row[(size_t)q * stride] += d[q];
            } else if (stride == 2) {
                for (int q = 0; q < W / 2; q++) {
                    row[2 * q] = d[q];
                    row[2 * q + 1] = 0.0f;
                }
                if (W % 2)
                    row[W - 1] = d[W / 2];
            } else {
                for (int x = 0; x < W; x++)
                    row[x] = x % stride ? 0.0f : d[x / stride];
            }
        }
    }
}

const layer_ops layer_shortcut_a = {
    .type = "shortcut_a",
    .summary = "ResNet option-A shortcut: subsample by stride, zero-pad channels (filters, "
               "stride=2, offset)",
    .cfg_size = sizeof(shortcut_cfg),
    .min_inputs = 1,
    .max_inputs = 1,
    .defaults = shortcut_defaults,
    .set = shortcut_set,
    .infer = shortcut_infer,
    .forward = shortcut_forward,
    .backward = shortcut_backward,
};
