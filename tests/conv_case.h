/*
 * conv_case.h — a convolution test case (square kernel, stride, padding and dilation; groups;
 * batch) and its geometry, shared by the tests that compare convolutions across backends and
 * precisions (test_backend_parity, test_bf16).
 */
#ifndef DTNN_TEST_CONV_CASE_H
#define DTNN_TEST_CONV_CASE_H

#include "backend/backend.h"

typedef struct {
    int C, H, W, K, R, S, stride, pad, dil, groups, n;
} conv_case;

static inline conv_geom conv_case_geom(const conv_case *t)
{
    conv_geom g = {0};
    g.C = t->C, g.H = t->H, g.W = t->W, g.K = t->K, g.R = t->R, g.S = t->S;
    g.stride_h = g.stride_w = t->stride, g.pad_h = g.pad_w = t->pad;
    g.dil_h = g.dil_w = t->dil, g.groups = t->groups;
    g.P = (t->H + 2 * t->pad - t->dil * (t->R - 1) - 1) / t->stride + 1;
    g.Q = (t->W + 2 * t->pad - t->dil * (t->S - 1) - 1) / t->stride + 1;
    return g;
}

#endif
