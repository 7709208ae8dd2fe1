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
    return kind == BIN_ADD ? a + b : kind == BIN_SUB ? a - b : kind == BIN_MUL ? a * b : a / b;
}

/* What one output position adds to an input's gradient, PyTorch's autograd formulas: dy (a
 * sum, a difference), dy o (a product: o the other input), dy / o (a quotient's dividend:
 * o the divisor), dy ((p / o) / o) (its divisor, negated: o the divisor itself, p the
 * dividend). */
typedef enum { GRAD_SUM = 0, GRAD_TIMES, GRAD_OVER, GRAD_QUOTIENT } binary_grad_term;

/* The gradient of one input x, of shape xs: those terms summed over the output positions one
 * value of x was repeated to, then signed. */
typedef struct {
    int xs[3];                  /* x's shape, C x H x W */
    int span_c, span_h, span_w; /* the output range one value of x covers along each dim */
    binary_grad_term term;
    binary_strides o, p;        /* where o's and p's values for an output position lie */
    float sign;                 /* -1 for a difference's or quotient's second input, else 1 */
} binary_grad_map;

static inline DTNN_HOST_DEVICE binary_grad_map binary_grad_map_of(const binary_geom *g,
                                                                  const int *xs,
                                                                  binary_grad_term term)
{
    binary_grad_map m;
    for (int d = 0; d < 3; d++)
        m.xs[d] = xs[d];
    m.span_c = xs[0] == 1 ? g->C : 1;
    m.span_h = xs[1] == 1 ? g->H : 1;
    m.span_w = xs[2] == 1 ? g->W : 1;
    m.term = term;
    m.sign = 1.0f;
    return m;
}

/* The maps of input a's gradient and of input b's; o and p are b and a (a's map: o = b). */
static inline DTNN_HOST_DEVICE binary_grad_map binary_grad_map_a(const binary_geom *g,
                                                                 binary_kind kind)
{
    binary_grad_map m = binary_grad_map_of(g, g->a, kind == BIN_MUL   ? GRAD_TIMES
                                                    : kind == BIN_DIV ? GRAD_OVER
                                                                      : GRAD_SUM);
    m.o = binary_strides_of(g->b, g->b_shared);
    m.p = m.o;
    return m;
}

static inline DTNN_HOST_DEVICE binary_grad_map binary_grad_map_b(const binary_geom *g,
                                                                 binary_kind kind)
{
    binary_grad_map m = binary_grad_map_of(g, g->b, kind == BIN_MUL   ? GRAD_TIMES
                                                    : kind == BIN_DIV ? GRAD_QUOTIENT
                                                                      : GRAD_SUM);
    /* a product's term takes a; a quotient's takes b (o) and a (p) */
    m.o = kind == BIN_DIV ? binary_strides_of(g->b, g->b_shared)
                          : binary_strides_of(g->a, g->a_shared);
    m.p = binary_strides_of(g->a, g->a_shared);
    m.sign = kind == BIN_SUB || kind == BIN_DIV ? -1.0f : 1.0f;
    return m;
}

/* The gradient value of x at sample s, position (xc, xh, xw): the sum in a fixed order, in
 * double, so that it is the same whichever thread computes it. o and p are the arrays the
 * map's term reads (NULL where it reads none). */
static inline DTNN_HOST_DEVICE float binary_grad_value(const binary_geom *g,
                                                       const binary_grad_map *m, int s, int xc,
                                                       int xh, int xw, const float *o,
                                                       const float *p, const float *dy)
{
    const int C = g->C, H = g->H, W = g->W;
    double sum = 0.0;
    for (int c = xc; c < xc + m->span_c; c++)
        for (int h = xh; h < xh + m->span_h; h++) {
            const float *dyr = dy + (((size_t)s * C + c) * H + h) * W;
            const float *orow =
                o ? o + s * m->o.sample + c * m->o.c_step + h * m->o.h_step : NULL;
            const float *prow =
                p ? p + s * m->p.sample + c * m->p.c_step + h * m->p.h_step : NULL;
            for (int w = xw; w < xw + m->span_w; w++) {
                float t = dyr[w];
                if (m->term == GRAD_TIMES)
                    t = t * orow[w * m->o.w_step];
                else if (m->term == GRAD_OVER)
                    t = t / orow[w * m->o.w_step];
                else if (m->term == GRAD_QUOTIENT)
                    t = t * ((prow[w * m->p.w_step] / orow[w * m->o.w_step]) /
                             orow[w * m->o.w_step]);
                sum += (double)t;
            }
        }
    return (float)sum * m->sign;
}

/* The arrays a map's term reads: o (b, or a for a product's b) and p (a, a quotient's b). */
static inline DTNN_HOST_DEVICE const float *binary_grad_o(const binary_grad_map *m,
                                                          const float *a, const float *b,
                                                          int for_b)
{
    if (m->term == GRAD_SUM)
        return NULL;
    return for_b && m->term == GRAD_TIMES ? a : b;
}

static inline DTNN_HOST_DEVICE const float *binary_grad_p(const binary_grad_map *m,
                                                          const float *a)
{
    return m->term == GRAD_QUOTIENT ? a : NULL;
}

#endif
