/*
 * pad_formulas.h — the output shape of constant padding (backend.h's pad_geom), the one
 * definition that the CPU (backend/cpu/pad.c) and the CUDA backend (backend/cuda/pad.cu) both
 * index by, so the backends cannot disagree on where a padded value lies.
 */
#ifndef DTNN_PAD_FORMULAS_H
#define DTNN_PAD_FORMULAS_H

#include "../backend.h"
#include "../../core/host_device.h"

/* One sample's padded shape: K channels of P x Q. */
typedef struct {
    int K, P, Q;
} pad_out_shape;

static inline DTNN_HOST_DEVICE pad_out_shape pad_out_of(const pad_geom *g)
{
    pad_out_shape o;
    o.K = g->front + g->C + g->back;
    o.P = g->top + g->H + g->bottom;
    o.Q = g->left + g->W + g->right;
    return o;
}

#endif
