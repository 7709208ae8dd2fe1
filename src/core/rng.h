/*
 * rng.h — the seeded random numbers of dtnn. Two kinds:
 *  - a sequential generator (xoshiro256**) for initialisation and synthetic data;
 *  - a counter-based hash (splitmix64 of seed, stream, counter) for per-element noise such as
 *    dropout masks, so a value depends only on (seed, layer, step, index) and never on the
 *    thread count or on how work is split.
 * Never rand(): results must be bit-identical for the same seed on every machine.
 * The hash is header-inline and compiles as device code too (backend/cuda/elementwise.cu), so
 * the CUDA backend's dropout masks are this very function's, not a copy that could drift.
 */
#ifndef DTNN_RNG_H
#define DTNN_RNG_H

#include <stdint.h>

#include "host_device.h"

typedef struct {
    uint64_t s[4];
} dtnn_rng;

void dtnn__rng_seed(dtnn_rng *r, uint64_t seed);
uint64_t dtnn__rng_next(dtnn_rng *r);
/* Uniform in [0, 1) with 24 random bits (exactly representable in float). */
float dtnn__rng_uniform(dtnn_rng *r);
/* Standard normal (Box-Muller, double precision inside). */
double dtnn__rng_normal(dtnn_rng *r);
/* Uniform integer in [0, n) without modulo bias. */
uint64_t dtnn__rng_below(dtnn_rng *r, uint64_t n);

uint64_t dtnn__mix64(uint64_t x);
/* Counter-based uniform in [0, 1): a pure function of its arguments. */
static inline DTNN_HOST_DEVICE float dtnn__hash_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    uint64_t z = seed ^ (stream * 0x9E3779B97F4A7C15ull) ^ (counter * 0xD1B54A32D192ED03ull);
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

#endif
