/*
 * rng.c — xoshiro256** (Blackman & Vigna) seeded through splitmix64, plus Box-Muller normals.
 */
#include "rng.h"

#include <math.h>

uint64_t dtnn__mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void dtnn__rng_seed(dtnn_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        x = dtnn__mix64(x);
        r->s[i] = x;
    }
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dtnn__rng_next(dtnn_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float dtnn__rng_uniform(dtnn_rng *r)
{
    return (float)(dtnn__rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

double dtnn__rng_normal(dtnn_rng *r)
{
    /* 53-bit uniforms; u1 in (0, 1] so the log is finite. */
    double u1 = ((double)(dtnn__rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(dtnn__rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t dtnn__rng_below(dtnn_rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do {
        v = dtnn__rng_next(r);
    } while (v >= limit);
    return v % n;
}
