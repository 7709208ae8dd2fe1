/*
 * loader_internal.h — what the loader's two files share: loader.c (batches, threads, the public
 * calls on a loader) and loader_sources.c (where samples come from: a split in memory, an
 * image folder, shards; one sample decoded and transformed; the epoch's order).
 */
#ifndef DTNN_LOADER_INTERNAL_H
#define DTNN_LOADER_INTERNAL_H

#include <pthread.h>

#include "core/internal.h"
#include "core/rng.h"
#include "data/image_folder.h"
#include "data/shards.h"
#include "data/transform.h"

#define LOADER_MAX_REPLACE 64
#define LOADER_MAX_THREADS 64
#define LOADER_REPORTED_PATHS 3
#define AUTO_AUGMENT (DTNN_AUG_TRIVIAL | DTNN_AUG_RANDAUG)

typedef struct {
    int64_t step;           /* the step being filled or held */
    int64_t epoch;
    int64_t done_step;      /* == step once every sample is in (or one failed) */
    int n;                  /* samples on this rank */
    int items;              /* samples to produce: n, and the partner when mixing */
    int64_t global_n;       /* samples of the global batch */
    int64_t start;          /* position of the global batch's first sample in the epoch */
    int64_t lo;             /* position of sample 0 in the epoch's order */
    int pending;
    float *x;               /* [local_max, sample] */
    int32_t *y;
    int32_t *bad;           /* per sample: unreadable images stepped over */
    int64_t *bad_first;     /* per sample: the first of them (dataset index) */
    float *partner;         /* mixing: the sample before this rank's first, unmixed */
    int32_t partner_y;
    int32_t *y2;            /* mixing: the partners' labels */
    dtnn_batch_mix mix;
    dtnn_status st;
    dtnn_error err;
} loader_slot;

/* A decoding context: one per thread, plus one for the caller. */
typedef struct {
    struct dtnn_loader *l;
    pthread_t thread;
    dtnn_image img;
    dtnn_resample_scratch rs;
    unsigned char *u8;      /* TrivialAugment / RandAugment: the 8-bit image */
    float *aa_tmp;          /* and their scratch */
    unsigned char *file;    /* shards: an image's encoded bytes */
    size_t file_cap;
    shard_handle shard;     /* shards: the one this thread reads */
} loader_worker;

struct dtnn_loader {
    dtnn_loader_params p;
    const dtnn_split *split;        /* in memory; NULL for an image folder or shards */
    dtnn_image_list list;
    dtnn_shards *shards;            /* shards; NULL otherwise */
    int stream;                     /* shards in training order: a rank's own stream */
    const int32_t *labels;
    int64_t n;
    int c, h, w, classes, resize;
    size_t sample;                  /* floats per sample */
    float mean[4], std[4], fill[4];
    char name[64];
    int local_max;
    int64_t steps_per_epoch;
    int64_t *perm;                  /* the epoch's order: dataset (shards: flat) indices */
    int64_t order_n;                /* its length: n, or a stream's quota */
    int mixing;                     /* MixUp or CutMix asked for */
    int reps;                       /* repeated augmentation: 1 when off */
    const loader_slot *held;        /* the batch last handed out */

    int nslots;
    loader_slot *slots;
    int nthreads, started;
    loader_worker *workers;         /* [nthreads + 1]; the last is the caller's */

    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int running, shutdown, busy, failed;
    int64_t epoch, fill_step, consume_step, free_from, end_step;
    int fill_sample;
    dtnn_status fail_st;
    dtnn_error fail_err;

    int64_t skipped;
    char first_bad[LOADER_REPORTED_PATHS][512];
    int n_first_bad;
};

/* The sample at position pos of the epoch's order (a stream's own position), or the next
 * readable one after it: decoded, transformed into out, its label, the unreadable images
 * stepped over (count and the first's index). */
dtnn_status dtnn__loader_produce(dtnn_loader *l, loader_worker *wk, int64_t epoch, int64_t pos,
                                 float *out, int32_t *label, int32_t *bad, int64_t *bad_first,
                                 dtnn_error *err);
/* The name of dataset (shards: flat) index k in reports: a path, or "<name> sample k". */
const char *dtnn__loader_sample_name(const dtnn_loader *l, int64_t k, char *buf, size_t len);
/* Fills l->perm with the order of epoch. */
dtnn_status dtnn__loader_epoch_order(dtnn_loader *l, int64_t epoch, dtnn_error *err);

/* Creation, for the sources: a loader with checked params (loader.c), then, once the source
 * has set n, c, h, w, classes, name and the normalisation, everything else. */
dtnn_loader *dtnn__loader_alloc(const dtnn_loader_params *p, dtnn_error *err);
dtnn_status dtnn__loader_finish(dtnn_loader *l, dtnn_error *err);

#endif
