/*
 * shuffle.c — the sample order of an epoch. A Fisher-Yates shuffle (Knuth, TAOCP vol. 2,
 * Algorithm P) driven by a dtnn_rng whose seed is a hash of (seed, epoch): every rank computes
 * the same permutation without communicating, every run with the same seed repeats it, and each
 * epoch gets a fresh one. Sharding the permutation across ranks is the trainer's business.
 */
#include "core/internal.h"
#include "core/rng.h"

/* Arbitrary odd constants that keep the (seed, epoch) stream apart from other uses of seed
 * (initialisation, synthetic data) that seed a dtnn_rng directly. */
#define SHUFFLE_DOMAIN 0x73687566666c6531ull  /* "shuffle1" */
#define SHUFFLE_EPOCH_STEP 0xD1B54A32D192ED03ull

void dtnn_epoch_permutation(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch, int shuffle)
{
    if (n <= 0)
        return;
    DTNN_ASSERT(perm != NULL);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    if (!shuffle)
        return;
    dtnn_rng r;
    dtnn__rng_seed(&r, dtnn__mix64(seed ^ SHUFFLE_DOMAIN) ^ ((uint64_t)epoch * SHUFFLE_EPOCH_STEP));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dtnn__rng_below(&r, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
