/*
 * elementwise_formulas.h — the per-element formulas of the element-wise operations
 * (backend/cpu/elementwise.c on the CPU, backend/cuda/elementwise.cu on the GPU) that are more
 * than a copy or a sum: the add's fused ReLU and its mask, and dropout's keep test and
 * scaling. One definition for both backends, so they cannot drift apart; the ReLU is
 * activation_formulas.h's, so a fused ReLU is the very ReLU of an activation layer.
 */
#ifndef DTNN_ELEMENTWISE_FORMULAS_H
#define DTNN_ELEMENTWISE_FORMULAS_H

#include <stdint.h>

#include "../../core/host_device.h"
#include "../../core/rng.h"
#include "activation_formulas.h"

/* A sum's value, through a ReLU when relu is set (a NaN stays NaN, as ReLU's). */
static inline DTNN_HOST_DEVICE float add_relu_if(float v, int relu)
{
    return relu ? act_relu(v) : v;
}

/* Whether dropout keeps value number counter: a pure function of (seed, stream, counter), so
 * the mask does not depend on the thread count or on the device. */
static inline DTNN_HOST_DEVICE uint8_t dropout_keep(uint64_t seed, uint64_t stream,
                                                    uint64_t counter, float p)
{
    return dtnn__hash_uniform(seed, stream, counter) >= p;
}

/* A kept value scaled (by 1 / (1 - p)), a dropped one zero: forward on x, backward on dy. */
static inline DTNN_HOST_DEVICE float dropout_apply(uint8_t keep, float v, float scale)
{
    return keep ? v * scale : 0.0f;
}

#endif
