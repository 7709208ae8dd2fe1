/*
 * broadcast_formulas.h — NumPy broadcasting's index mapping for the two-input element-wise
 * operations (backend.h's binary_geom), the operations themselves, and the sum that gives one
 * input-gradient value: the single definition that the CPU (backend/cpu/broadcast.c) and the CUDA
 * backend (backend/cuda/broadcast.cu) both call, so the backends cannot drift apart. Which
 * thread takes which output or gradient value is each backend's business.
 */
#ifndef DTNN_BROADCAST_FORMULAS_H
#define DTNN_BROADCAST_FORMULAS_H

#include <stddef.h>

#include "../backend.h"
#include "../../core/host_device.h"

/* Where an input's value for output (s, c, h, w) lies: s * sample + c * c_step + h * h_step +
 * w * w_step, a step being 0 along a dimension the input is broadcast over, and sample 0 for
 * a shared input (one sample for the whole batch). */
typedef struct {
    size_t sample, c_step, h_step, w_step;
} binary_strides;

/* The element stride of an input along a dimension: 0 where it is broadcast. */
static inline DTNN_HOST_DEVICE size_t binary_stride(int size, size_t step)
{
    return size == 1 ? 0 : step;
}

/* The strides of an input of shape [3] (C x H x W, each the output's or 1). */
static inline DTNN_HOST_DEVICE binary_strides binary_strides_of(const int *shape, int shared)
{
    const size_t hw = (size_t)shape[1] * shape[2];
    binary_strides st;
    st.sample = shared ? 0 : (size_t)shape[0] * hw;
    st.c_step = binary_stride(shape[0], hw);
    st.h_step = binary_stride(shape[1], (size_t)shape[2]);
    st.w_step = binary_stride(shape[2], 1);
    return st;
}

/* a op b, as PyTorch computes it. */
static inline DTNN_HOST_DEVICE float binary_apply(binary_kind kind, float a, float b)
{
    return kind == BIN_ADD ? a + b : (kind == BIN_SUB ? a - b : a * b);
}

/* The gradient of one input x, of shape xs: dy summed over the output positions one value of
 * x was repeated to (times, for a product, the other input o there), then signed. */
typedef struct {
    int xs[3];                  /* x's shape, C x H x W */
    int span_c, span_h, span_w; /* the output range one value of x covers along each dim */
    binary_strides o;           /* where o's value for an output position lies */
    float sign;                 /* -1 for a difference's second input, else 1 */
} binary_grad_map;

static inline DTNN_HOST_DEVICE binary_grad_map binary_grad_map_of(const binary_geom *g,
                                                                  const int *xs, const int *os,
                                                                  int o_shared, float sign)
{
    binary_grad_map m;
    for (int d = 0; d < 3; d++)
        m.xs[d] = xs[d];
    m.span_c = xs[0] == 1 ? g->C : 1;
    m.span_h = xs[1] == 1 ? g->H : 1;
    m.span_w = xs[2] == 1 ? g->W : 1;
    m.o = binary_strides_of(os, o_shared);
    m.sign = sign;
    return m;
}

/* The maps of input a's gradient and of input b's (a difference's is negated); the other input
 * is read only for a product. */
static inline DTNN_HOST_DEVICE binary_grad_map binary_grad_map_a(const binary_geom *g)
{
    return binary_grad_map_of(g, g->a, g->b, g->b_shared, 1.0f);
}

static inline DTNN_HOST_DEVICE binary_grad_map binary_grad_map_b(const binary_geom *g,
                                                                 binary_kind kind)
{
    return binary_grad_map_of(g, g->b, g->a, g->a_shared, kind == BIN_SUB ? -1.0f : 1.0f);
}

/* The gradient value of x at sample s, position (xc, xh, xw): the sum in a fixed order, in
 * double, so that it is the same whichever thread computes it. o is NULL for a sum or a
 * difference. */
static inline DTNN_HOST_DEVICE float binary_grad_value(const binary_geom *g,
                                                       const binary_grad_map *m, int s, int xc,
                                                       int xh, int xw, const float *o,
                                                       const float *dy)
{
    const int C = g->C, H = g->H, W = g->W;
    double sum = 0.0;
    for (int c = xc; c < xc + m->span_c; c++)
        for (int h = xh; h < xh + m->span_h; h++) {
            const float *dyr = dy + (((size_t)s * C + c) * H + h) * W;
            const float *orow =
                o ? o + s * m->o.sample + c * m->o.c_step + h * m->o.h_step : NULL;
            for (int w = xw; w < xw + m->span_w; w++)
                sum += orow ? (double)(dyr[w] * orow[w * m->o.w_step]) : (double)dyr[w];
        }
    return (float)sum * m->sign;
}

#endif
