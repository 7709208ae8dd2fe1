/*
 * half.h — float32 <-> IEEE binary16 and bfloat16, round to nearest even, for gradients that
 * travel in half precision and for the CPU's bf16 compute (--precision bf16). Pure bit
 * manipulation, so every rank converts identically, and as CUDA's __float2bfloat16_rn does;
 * nvcc compiles them too (the CUDA backend's half-precision gradient transport), so the device
 * converts with the same bits.
 */
#ifndef DTNN_HALF_H
#define DTNN_HALF_H

#include <stdint.h>
#include <string.h>

#include "host_device.h"

static inline DTNN_HOST_DEVICE uint32_t half_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline DTNN_HOST_DEVICE float half_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline DTNN_HOST_DEVICE uint16_t f32_to_bf16(float f)
{
    uint32_t u = half_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline DTNN_HOST_DEVICE float bf16_to_f32(uint16_t h)
{
    return half_float((uint32_t)h << 16);
}

/* f rounded to the nearest bfloat16, kept in a float. */
static inline DTNN_HOST_DEVICE float bf16_round(float f) { return bf16_to_f32(f32_to_bf16(f)); }

static inline DTNN_HOST_DEVICE uint16_t f32_to_f16(float f)
{
    uint32_t u = half_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u)                      /* Inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
    if (a >= 0x477ff000u)                      /* rounds to >= 65520: overflow to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {                     /* subnormal half (or zero) */
        if (a < 0x33000000u)
            return (uint16_t)sign;
        uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23);      /* 14 .. 24 */
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
    return (uint16_t)(sign | (r >> 13));
}

static inline DTNN_HOST_DEVICE float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return half_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (!m)
            return half_float(sign);
        float v = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return sign ? -v : v;
    }
    return half_float(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
