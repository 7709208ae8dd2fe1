/*
 * loader.c — batches for the trainer and evaluation, from a split in memory or an image folder
 * streamed from disk (see dtnn.h, "loaders"). A batch is this rank's slice of one global batch
 * of the epoch's order, so sharding is the same as the trainer always did: each rank decodes
 * only its own samples.
 *
 * Threads. A ring of prefetch + 1 batch slots: the one the caller holds and the ones being
 * filled ahead. Work is handed out one sample at a time in (step, sample) order under one
 * mutex, so every free thread helps with the oldest unfinished batch; each sample is decoded
 * outside the lock straight into its place in the slot. What a sample holds depends only on
 * (seed, epoch, sample index): the order comes from the epoch's permutation and augmentation
 * from a random stream seeded by those three (transform.c), so the thread that ran it and the
 * timing never show. Every buffer (slots, decode buffers, resampling scratch) is allocated at
 * creation or grows to the largest image seen; a steady-state batch allocates nothing beyond
 * the decoders' own working memory.
 *
 * Unreadable images. A sample whose image fails to decode is replaced by the next readable one
 * in the epoch's order (position + 1, + 2, ... wrapping), with that sample's label, so a batch
 * keeps its size and the loss its scale; the skip is counted in the batch and reported (count
 * and first paths) as batches are handed out, in order. Up to LOADER_MAX_REPLACE consecutive
 * bad images are stepped over; more is an error. With strict, the first is an error.
 *
 * Not here: decoding (image.c), transforms (transform.c), listing folders (image_folder.c).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "core/internal.h"
#include "core/rng.h"
#include "data/autoaugment.h"
#include "data/image_folder.h"
#include "data/mix.h"
#include "data/transform.h"

#define LOADER_MAX_REPLACE 64
#define LOADER_MAX_THREADS 64
#define LOADER_REPORTED_PATHS 3
#define AUTO_AUGMENT (DTNN_AUG_TRIVIAL | DTNN_AUG_RANDAUG)

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

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
} loader_worker;

struct dtnn_loader {
    dtnn_loader_params p;
    const dtnn_split *split;        /* in memory; NULL for an image folder */
    dtnn_image_list list;
    const int32_t *labels;
    int64_t n;
    int c, h, w, classes, resize;
    size_t sample;                  /* floats per sample */
    float mean[4], std[4], fill[4];
    char name[64];
    int local_max;
    int64_t steps_per_epoch;
    int64_t *perm;
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

void dtnn_loader_params_default(dtnn_loader_params *p)
{
    memset(p, 0, sizeof *p);
    p->batch_size = 64;
    p->rank = 0;
    p->ranks = 1;
    p->shuffle = 1;
    p->seed = 42;
    p->crop_padding = 4;
    p->image_size = 224;
    p->randaugment_ops = 2;
    p->randaugment_magnitude = 9;
}

/* ---- one sample ------------------------------------------------------------------------- */

static const char *sample_name(const dtnn_loader *l, int64_t k, char *buf, size_t len)
{
    if (!l->split)
        return l->list.paths[k];
    snprintf(buf, len, "%s sample %lld", l->name, (long long)k);
    return buf;
}

/* RandomErasing after the crops and the normalisation, from the sample's own stream: first
 * its coin (torch.rand(1) < p), then the box. */
static void erase_maybe(const dtnn_loader *l, dtnn_rng *r, float *out)
{
    int box[4];
    if (l->p.random_erase > 0.0f && dtnn__rng_uniform(r) < l->p.random_erase &&
        dtnn__random_erase_box(l->h, l->w, r, box))
        dtnn__erase_chw(out, l->c, l->h, l->w, box);
}

/* TrivialAugmentWide or RandAugment on the 8-bit image wk->u8, then normalised into out. */
static void auto_augment(const dtnn_loader *l, loader_worker *wk, dtnn_rng *r, float *out)
{
    if (l->p.augment & DTNN_AUG_TRIVIAL)
        dtnn__trivial_augment(r, wk->u8, l->c, l->h, l->w, wk->aa_tmp);
    else
        dtnn__rand_augment(r, l->p.randaugment_ops, l->p.randaugment_magnitude, wk->u8, l->c,
                           l->h, l->w, wk->aa_tmp);
    dtnn__normalize_u8(wk->u8, l->c, (size_t)l->h * l->w, l->mean, l->std, out);
}

/* Decodes and transforms dataset sample k of epoch into out [c, h, w]; rep is which of its
 * repeats (repeated augmentation) this is, each drawing its own augmentation. */
static dtnn_status load_one(dtnn_loader *l, loader_worker *wk, int64_t epoch, int64_t k, int rep,
                            float *out, dtnn_error *err)
{
    const unsigned aug = l->p.augment;
    dtnn_rng r;
    if (aug || l->p.random_erase > 0.0f)
        dtnn__augment_rng(&r, l->p.seed, epoch, k + (int64_t)rep * l->n);
    if (l->split) {
        const float *src = l->split->x + (size_t)k * l->sample;
        if (!aug) {
            memcpy(out, src, sizeof(float) * l->sample);
            erase_maybe(l, &r, out);
            return DTNN_OK;
        }
        int pad = aug & DTNN_AUG_CROP ? l->p.crop_padding : 0;
        int dy = pad ? (int)dtnn__rng_below(&r, 2 * (uint64_t)pad + 1) : 0;
        int dx = pad ? (int)dtnn__rng_below(&r, 2 * (uint64_t)pad + 1) : 0;
        int flip = (aug & DTNN_AUG_FLIP) && dtnn__rng_uniform(&r) < 0.5f;
        dtnn__crop_flip_chw(src, l->c, l->h, l->w, pad, dx, dy, flip, l->fill, out);
        if (aug & AUTO_AUGMENT) {
            dtnn__denormalize_u8(out, l->c, (size_t)l->h * l->w, l->mean, l->std, wk->u8);
            auto_augment(l, wk, &r, out);
        }
        erase_maybe(l, &r, out);
        return DTNN_OK;
    }
    dtnn_status st = dtnn_image_read(l->list.paths[k], &wk->img, err);
    if (st)
        return st;
    float box[4];
    if (aug & DTNN_AUG_CROP)
        dtnn__random_resized_crop_box(wk->img.w, wk->img.h, &r, box);
    else
        dtnn__center_crop_box(wk->img.w, wk->img.h, l->resize, l->h, box);
    int flip = (aug & DTNN_AUG_FLIP) && dtnn__rng_uniform(&r) < 0.5f;
    if (aug & AUTO_AUGMENT) {
        st = dtnn__resample_rgb_u8(wk->img.pixels, wk->img.w, wk->img.h, box, l->w, l->h, flip,
                                   wk->u8, &wk->rs, err);
        if (!st)
            auto_augment(l, wk, &r, out);
    } else {
        st = dtnn__resample_rgb(wk->img.pixels, wk->img.w, wk->img.h, box, l->w, l->h, flip,
                                l->mean, l->std, out, &wk->rs, err);
    }
    if (!st)
        erase_maybe(l, &r, out);
    return st;
}

/* The sample at position pos of the epoch's order, or the next readable one after it. */
static dtnn_status produce(dtnn_loader *l, loader_worker *wk, int64_t epoch, int64_t pos,
                           float *out, int32_t *label, int32_t *bad, int64_t *bad_first,
                           dtnn_error *err)
{
    *bad = 0;
    *bad_first = -1;
    dtnn_error e = {0};
    for (int a = 0; a < LOADER_MAX_REPLACE && a < l->n; a++) {
        const int64_t q = (pos + a) % l->n, k = l->perm[q];
        dtnn_status st = load_one(l, wk, epoch, k, (int)(q % l->reps), out, &e);
        if (!st) {
            *label = l->labels[k];
            return DTNN_OK;
        }
        if (st != DTNN_ERR_FORMAT && st != DTNN_ERR_IO)
            return dtnn_error_set(err, st, "%s", e.message);
        if (l->p.strict)
            return dtnn_error_set(err, st, "%s (--strict: an unreadable image is an error; "
                                  "without it, it is skipped and counted)", e.message);
        if (a == 0)
            *bad_first = k;
        (*bad)++;
    }
    return dtnn_error_set(err, DTNN_ERR_FORMAT, "%d images in a row are unreadable, the last: "
                          "%s", (int)*bad, e.message);
}

/* Geometry of step s: global batch [s B, s B + len), this rank's [lo, hi) of it. */
static void slot_setup(dtnn_loader *l, loader_slot *s, int64_t epoch, int64_t step)
{
    const int64_t B = l->p.batch_size, start = step * B, len = DTNN_MIN(B, l->n - start);
    const int r = l->p.rank, R = l->p.ranks;
    s->step = step;
    s->epoch = epoch;
    s->done_step = -1;
    s->global_n = len;
    s->start = start;
    s->lo = start + len * r / R;
    s->n = (int)(start + len * (r + 1) / R - s->lo);
    s->items = s->n + (l->mixing && s->n > 0);
    s->pending = s->items;
    s->mix = (dtnn_batch_mix){.lam = 1.0f};
    s->st = DTNN_OK;
}

/* Item i of slot s: its sample i, or (i == n) the partner of its first sample, the one before
 * it in the global batch (the last one for the batch's first: torchvision's roll(1)), produced
 * here as its own rank produces it. The partner's skipped images are that rank's to report. */
static dtnn_status produce_item(dtnn_loader *l, loader_worker *wk, loader_slot *s, int i,
                                dtnn_error *err)
{
    if (i < s->n)
        return produce(l, wk, s->epoch, s->lo + i, s->x + (size_t)i * l->sample, &s->y[i],
                       &s->bad[i], &s->bad_first[i], err);
    const int64_t pos = s->lo > s->start ? s->lo - 1 : s->start + s->global_n - 1;
    int32_t bad;
    int64_t bad_first;
    return produce(l, wk, s->epoch, pos, s->partner, &s->partner_y, &bad, &bad_first, err);
}

/* MixUp or CutMix of a filled slot: the step's draws, the partners' labels, the images. */
static void mix_slot(const dtnn_loader *l, loader_slot *s)
{
    s->mix.y2 = s->y2;
    dtnn__mix_draw(l->p.mixup_alpha, l->p.cutmix_alpha, l->p.seed, s->epoch, s->step, l->h,
                   l->w, &s->mix);
    for (int i = 0; i < s->n; i++)
        s->y2[i] = i ? s->y[i - 1] : s->partner_y;
    dtnn__mix_apply(&s->mix, s->x, s->partner, s->n, l->c, l->h, l->w);
}

/* ---- threads ------------------------------------------------------------------------------ */

static int has_work(const dtnn_loader *l)
{
    return l->running && !l->failed && l->fill_step < l->end_step &&
           l->fill_step < l->free_from + l->nslots;
}

static void *worker_main(void *arg)
{
    loader_worker *wk = arg;
    dtnn_loader *l = wk->l;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->shutdown && !has_work(l))
            pthread_cond_wait(&l->work, &l->mu);
        if (l->shutdown)
            break;
        const int64_t step = l->fill_step, epoch = l->epoch;
        loader_slot *s = &l->slots[step % l->nslots];
        if (l->fill_sample == 0)
            slot_setup(l, s, epoch, step);
        if (s->n == 0) {
            s->done_step = step;
            l->fill_step++;
            pthread_cond_broadcast(&l->done);
            continue;
        }
        const int i = l->fill_sample++;
        if (l->fill_sample == s->items) {
            l->fill_step++;
            l->fill_sample = 0;
        }
        l->busy++;
        pthread_mutex_unlock(&l->mu);
        dtnn_error e = {0};
        dtnn_status st = produce_item(l, wk, s, i, &e);
        pthread_mutex_lock(&l->mu);
        if (st && !s->st) {
            s->st = st;
            s->err = e;
        }
        if (st) {
            /* Nothing more is handed out; the slot is finished so its reader sees the error. */
            l->failed = 1;
            s->done_step = step;
        }
        if (--s->pending == 0 && !s->st && l->mixing) {
            /* The last sample in mixes the batch, still counted busy. */
            pthread_mutex_unlock(&l->mu);
            mix_slot(l, s);
            pthread_mutex_lock(&l->mu);
        }
        l->busy--;
        if (s->pending == 0)
            s->done_step = step;
        pthread_cond_broadcast(&l->done);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Waits until no thread is decoding and none will start (the caller holds the mutex). */
static void quiesce(dtnn_loader *l)
{
    l->running = 0;
    while (l->busy)
        pthread_cond_wait(&l->done, &l->mu);
}

/* ---- creation --------------------------------------------------------------------------- */

static dtnn_status check_params(const dtnn_loader_params *p, dtnn_error *err)
{
    if (p->batch_size < 1 || p->ranks < 1 || p->rank < 0 || p->rank >= p->ranks)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: batch size %d, rank %d of %d: the "
                              "batch must be positive and the rank in [0, ranks)", p->batch_size,
                              p->rank, p->ranks);
    if (p->threads < 0 || p->threads > LOADER_MAX_THREADS || p->prefetch < 0 ||
        p->prefetch > LOADER_MAX_THREADS)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: threads %d and prefetch %d must be "
                              "in [0, %d]", p->threads, p->prefetch, LOADER_MAX_THREADS);
    if (p->augment & ~(DTNN_AUG_CROP | DTNN_AUG_FLIP | AUTO_AUGMENT))
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: unknown augmentation flags 0x%x",
                              p->augment);
    if ((p->augment & AUTO_AUGMENT) == AUTO_AUGMENT)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: TrivialAugmentWide and RandAugment "
                              "are alternatives: choose one");
    if ((p->augment & DTNN_AUG_RANDAUG) &&
        (p->randaugment_ops < 1 || p->randaugment_ops > 16 || p->randaugment_magnitude < 0 ||
         p->randaugment_magnitude >= 31))
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: RandAugment takes 1 to 16 operations "
                              "and a magnitude bin in [0, 30], not %d and %d",
                              p->randaugment_ops, p->randaugment_magnitude);
    if (!(p->random_erase >= 0.0f && p->random_erase <= 1.0f))
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: random erasing probability %g is not "
                              "in [0, 1]", (double)p->random_erase);
    if (!(p->mixup_alpha >= 0.0f && p->mixup_alpha <= 100.0f) ||
        !(p->cutmix_alpha >= 0.0f && p->cutmix_alpha <= 100.0f))
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: MixUp alpha %g and CutMix alpha %g "
                              "must be in [0, 100] (0: off; the recipes use 0.2 to 1)",
                              (double)p->mixup_alpha, (double)p->cutmix_alpha);
    if (p->repeated_augment < 0 || p->repeated_augment > 64)
        return dtnn_error_set(err, DTNN_ERR_ARG, "loader: repeated augmentation %d must be in "
                              "[0, 64] (0 or 1: off; the recipes use 3)", p->repeated_augment);
    return DTNN_OK;
}

/* Everything after the source is known: sizes, slots, threads. */
static dtnn_status loader_finish(dtnn_loader *l, dtnn_error *err)
{
    const dtnn_loader_params *p = &l->p;
    if (l->n < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: no samples", l->name);
    l->sample = (size_t)l->c * l->h * l->w;
    l->local_max = (int)((p->batch_size + p->ranks - 1) / p->ranks);
    l->steps_per_epoch = (l->n + p->batch_size - 1) / p->batch_size;
    l->nthreads = p->threads;
    l->nslots = p->threads ? (p->prefetch ? p->prefetch : DTNN_MAX(2, p->threads)) + 1 : 1;
    l->perm = malloc(sizeof(int64_t) * (size_t)l->n);
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->workers = calloc((size_t)l->nthreads + 1, sizeof *l->workers);
    if (!l->perm || !l->slots || !l->workers)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for the loader", l->name);
    for (int i = 0; i < l->nslots; i++) {
        loader_slot *s = &l->slots[i];
        s->x = dtnn__alloc_aligned(sizeof(float) * l->sample * (size_t)l->local_max);
        s->y = malloc(sizeof(int32_t) * (size_t)l->local_max);
        s->bad = malloc(sizeof(int32_t) * (size_t)l->local_max);
        s->bad_first = malloc(sizeof(int64_t) * (size_t)l->local_max);
        s->done_step = -1;
        if (l->mixing) {
            s->partner = dtnn__alloc_aligned(sizeof(float) * l->sample);
            s->y2 = malloc(sizeof(int32_t) * (size_t)l->local_max);
        }
        if (!s->x || !s->y || !s->bad || !s->bad_first || (l->mixing && (!s->partner || !s->y2)))
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %d batches of %d "
                                  "samples of %dx%dx%d", l->name, l->nslots, l->local_max, l->c,
                                  l->h, l->w);
    }
    if ((p->augment & AUTO_AUGMENT) && l->c != 1 && l->c != 3)
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: TrivialAugment and RandAugment "
                              "take images of 1 or 3 channels, not %d", l->name, l->c);
    for (int i = 0; i <= l->nthreads; i++) {
        loader_worker *wk = &l->workers[i];
        wk->l = l;
        if (p->augment & AUTO_AUGMENT) {
            wk->u8 = malloc(l->sample);
            wk->aa_tmp = malloc(sizeof(float) * l->sample);
            if (!wk->u8 || !wk->aa_tmp)
                return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for the "
                                      "augmentation buffers", l->name);
        }
    }
    /* The threads block every signal (they inherit the mask), so SIGINT and SIGTERM reach the
     * training thread, which is the one that acts on them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = 0;
    for (int i = 0; i < l->nthreads && !e; i++)
        if (!(e = pthread_create(&l->workers[i].thread, NULL, worker_main, &l->workers[i])))
            l->started++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: cannot start loader thread %d: %s",
                              l->name, l->started + 1, strerror(e));
    return DTNN_OK;
}

static dtnn_loader *loader_alloc(const dtnn_loader_params *p, dtnn_error *err)
{
    dtnn_loader_params defaults;
    if (!p) {
        dtnn_loader_params_default(&defaults);
        p = &defaults;
    }
    if (check_params(p, err))
        return NULL;
    dtnn_loader *l = calloc(1, sizeof *l);
    if (!l) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for a loader");
        return NULL;
    }
    l->p = *p;
    l->mixing = p->mixup_alpha > 0.0f || p->cutmix_alpha > 0.0f;
    l->reps = p->repeated_augment > 1 ? p->repeated_augment : 1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->done, NULL);
    for (int c = 0; c < 4; c++) {
        l->mean[c] = 0.0f;
        l->std[c] = 1.0f;
    }
    return l;
}

dtnn_loader *dtnn_loader_create(const dtnn_dataset *d, int test_split,
                                const dtnn_loader_params *p, dtnn_error *err)
{
    dtnn_loader *l = loader_alloc(p, err);
    if (!l)
        return NULL;
    const dtnn_split *s = test_split ? &d->test : &d->train;
    l->split = s;
    l->labels = s->y;
    l->n = s->n;
    l->c = s->c;
    l->h = s->h;
    l->w = s->w;
    l->classes = s->classes;
    snprintf(l->name, sizeof l->name, "%s", d->name);
    for (int c = 0; c < 4; c++) {
        l->mean[c] = d->mean[c];
        l->std[c] = d->std[c];
        /* Padding is black before normalisation, as torchvision pads the PIL image. */
        l->fill[c] = d->std[c] != 0.0f ? -d->mean[c] / d->std[c] : 0.0f;
    }
    dtnn_status st = DTNN_OK;
    if ((l->p.augment & DTNN_AUG_CROP) && (l->p.crop_padding < 0 || l->p.crop_padding > s->h ||
                                          l->p.crop_padding > s->w))
        st = dtnn_error_set(err, DTNN_ERR_ARG, "%s: crop padding %d must be in [0, %d]", d->name,
                            l->p.crop_padding, DTNN_MIN(s->h, s->w));
    if (!st && s->c > 4 && (l->p.augment & DTNN_AUG_CROP))
        st = dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: crop augmentation supports up to 4 "
                            "channels, not %d", d->name, s->c);
    if (!st)
        st = loader_finish(l, err);
    if (st) {
        dtnn_loader_free(l);
        return NULL;
    }
    return l;
}

dtnn_loader *dtnn_loader_create_folder(const char *dir, const char *split,
                                       const dtnn_loader_params *p, dtnn_error *err)
{
    if (!dir || !split || (strcmp(split, "train") && strcmp(split, "val"))) {
        dtnn_error_set(err, DTNN_ERR_ARG, "image folder: give a folder and the split train or "
                       "val, not '%s'", split ? split : "(null)");
        return NULL;
    }
    dtnn_loader *l = loader_alloc(p, err);
    if (!l)
        return NULL;
    dtnn_status st = DTNN_OK;
    if (l->p.image_size < 8 || l->p.image_size > 4096)
        st = dtnn_error_set(err, DTNN_ERR_ARG, "image size %d must be in [8, 4096]",
                            l->p.image_size);
    char train[4096], root[4096];
    if (!st && (snprintf(train, sizeof train, "%s/train", dir) >= (int)sizeof train ||
                snprintf(root, sizeof root, "%s/%s", dir, split) >= (int)sizeof root))
        st = dtnn_error_set(err, DTNN_ERR_ARG, "path too long: %s", dir);
    if (!st && !strcmp(split, "train")) {
        st = dtnn__image_list_scan(&l->list, root, NULL, err);
    } else if (!st) {
        dtnn_image_list classes;
        st = dtnn__image_list_classes(&classes, train, err);
        if (!st)
            st = dtnn__image_list_scan(&l->list, root, &classes, err);
        dtnn__image_list_free(&classes);
    }
    if (st) {
        /* Say what layout was expected, after the reason. */
        dtnn_error inner = *err;
        dtnn_error_set(err, inner.code, "%s (an image folder dataset is DIR/train/<class>/"
                       "<image> and DIR/val/<class>/<image>, JPEG or PNG)", inner.message);
        dtnn_loader_free(l);
        return NULL;
    }
    l->labels = l->list.labels;
    l->n = l->list.n;
    l->c = 3;
    l->h = l->w = l->p.image_size;
    l->classes = l->list.classes;
    l->resize = (int)(((int64_t)l->p.image_size * 256 + 112) / 224);
    snprintf(l->name, sizeof l->name, "imagefolder");
    for (int c = 0; c < 3; c++) {
        l->mean[c] = imagenet_mean[c];
        l->std[c] = imagenet_std[c];
    }
    if ((st = loader_finish(l, err))) {
        dtnn_loader_free(l);
        return NULL;
    }
    return l;
}

void dtnn_loader_free(dtnn_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->shutdown = 1;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->started; i++)
        pthread_join(l->workers[i].thread, NULL);
    if (l->workers)
        for (int i = 0; i <= l->nthreads; i++) {
            dtnn_image_free(&l->workers[i].img);
            dtnn__resample_scratch_free(&l->workers[i].rs);
            free(l->workers[i].u8);
            free(l->workers[i].aa_tmp);
        }
    for (int i = 0; l->slots && i < l->nslots; i++) {
        dtnn__free_aligned(l->slots[i].x);
        free(l->slots[i].y);
        free(l->slots[i].bad);
        free(l->slots[i].bad_first);
        dtnn__free_aligned(l->slots[i].partner);
        free(l->slots[i].y2);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work);
    pthread_cond_destroy(&l->done);
    dtnn__image_list_free(&l->list);
    free(l->slots);
    free(l->workers);
    free(l->perm);
    free(l);
}

void dtnn_loader_get_info(const dtnn_loader *l, dtnn_loader_info *info)
{
    memset(info, 0, sizeof *info);
    info->n = l->n;
    info->c = l->c;
    info->h = l->h;
    info->w = l->w;
    info->classes = l->classes;
    info->steps_per_epoch = l->steps_per_epoch;
    info->local_max = l->local_max;
    info->labels = l->labels;
    memcpy(info->mean, l->mean, sizeof info->mean);
    memcpy(info->std, l->std, sizeof info->std);
    snprintf(info->name, sizeof info->name, "%s", l->name);
    info->params = l->p;
}

/* ---- batches ------------------------------------------------------------------------------ */

/* The epoch's order: the permutation, each entry repeated reps times in a row and cut to n
 * (torchvision's RASampler before it deals the list out to ranks). */
static void epoch_order(dtnn_loader *l, int64_t epoch)
{
    dtnn_epoch_permutation(l->perm, l->n, l->p.seed, epoch, l->p.shuffle);
    /* From the end down: entry q / reps <= q is read before it is overwritten. */
    for (int64_t q = l->n - 1; l->reps > 1 && q > 0; q--)
        l->perm[q] = l->perm[q / l->reps];
}

dtnn_status dtnn_loader_start(dtnn_loader *l, int64_t epoch, int64_t first, int64_t end,
                              dtnn_error *err)
{
    if (epoch < 0 || first < 0 || end > l->steps_per_epoch || first > end)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: steps [%lld, %lld) of epoch %lld are not "
                              "within its %lld steps", l->name, (long long)first,
                              (long long)end, (long long)epoch, (long long)l->steps_per_epoch);
    pthread_mutex_lock(&l->mu);
    quiesce(l);
    epoch_order(l, epoch);
    l->epoch = epoch;
    l->held = NULL;
    l->fill_step = l->consume_step = l->free_from = first;
    l->fill_sample = 0;
    l->end_step = end;
    l->failed = 0;
    l->fail_st = DTNN_OK;
    for (int i = 0; i < l->nslots; i++)
        l->slots[i].done_step = -1;
    l->running = 1;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    return DTNN_OK;
}

/* Adds a finished batch's skipped images to the report, in sample order. */
static void account(dtnn_loader *l, const loader_slot *s)
{
    for (int i = 0; i < s->n; i++) {
        if (!s->bad[i])
            continue;
        l->skipped += s->bad[i];
        char buf[96];
        const char *name = sample_name(l, s->bad_first[i], buf, sizeof buf);
        int seen = 0;
        for (int k = 0; k < l->n_first_bad; k++)
            seen |= !strncmp(l->first_bad[k], name, sizeof l->first_bad[k] - 1);
        if (!seen && l->n_first_bad < LOADER_REPORTED_PATHS)
            snprintf(l->first_bad[l->n_first_bad++], sizeof l->first_bad[0], "%s", name);
    }
}

/* Fills slot s with step in the caller's thread. */
static dtnn_status fill_now(dtnn_loader *l, loader_slot *s, int64_t epoch, int64_t step,
                            dtnn_error *err)
{
    slot_setup(l, s, epoch, step);
    for (int i = 0; i < s->items; i++) {
        dtnn_status st = produce_item(l, &l->workers[l->nthreads], s, i, err);
        if (st)
            return st;
    }
    if (s->items > s->n)
        mix_slot(l, s);
    s->done_step = step;
    return DTNN_OK;
}

dtnn_status dtnn_loader_next(dtnn_loader *l, const float **x, const int32_t **y, int *n,
                             int64_t *global_n, dtnn_error *err)
{
    pthread_mutex_lock(&l->mu);
    dtnn_status st = DTNN_OK;
    const int64_t step = l->consume_step;
    if (l->failed && l->fail_st) {
        st = dtnn_error_set(err, l->fail_st, "%s", l->fail_err.message);
    } else if (!l->running) {
        st = dtnn_error_set(err, DTNN_ERR_ARG, "%s: no epoch in progress (dtnn_loader_start)",
                            l->name);
    } else if (step >= l->end_step) {
        st = dtnn_error_set(err, DTNN_ERR_ARG, "%s: the steps of epoch %lld given to "
                            "dtnn_loader_start are used up", l->name, (long long)l->epoch);
    }
    if (st) {
        pthread_mutex_unlock(&l->mu);
        return st;
    }
    loader_slot *s = &l->slots[step % l->nslots];
    if (l->nthreads == 0) {
        pthread_mutex_unlock(&l->mu);
        st = fill_now(l, s, l->epoch, step, err);
        pthread_mutex_lock(&l->mu);
        if (st) {
            s->st = st;
            s->err = *err;
        }
    } else {
        /* The previous batch is released: its slot may be filled again. */
        l->free_from = step;
        pthread_cond_broadcast(&l->work);
        while (s->done_step != step)
            pthread_cond_wait(&l->done, &l->mu);
    }
    l->consume_step = step + 1;
    if (s->st) {
        l->failed = 1;
        l->fail_st = s->st;
        l->fail_err = s->err;
        st = dtnn_error_set(err, s->st, "%s", s->err.message);
    } else {
        account(l, s);
        l->held = s;
        *x = s->x;
        *y = s->y;
        *n = s->n;
        if (global_n)
            *global_n = s->global_n;
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

dtnn_status dtnn_loader_batch(dtnn_loader *l, int64_t epoch, int64_t step, float *x, int32_t *y,
                              int *n, dtnn_error *err)
{
    if (epoch < 0 || step < 0 || step >= l->steps_per_epoch)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: step %lld is not within the %lld steps of "
                              "an epoch", l->name, (long long)step,
                              (long long)l->steps_per_epoch);
    pthread_mutex_lock(&l->mu);
    quiesce(l);
    pthread_mutex_unlock(&l->mu);
    epoch_order(l, epoch);
    loader_slot *s = &l->slots[0];
    l->held = NULL;
    dtnn_status st = fill_now(l, s, epoch, step, err);
    if (st)
        return st;
    account(l, s);
    l->held = s;
    memcpy(x, s->x, sizeof(float) * l->sample * (size_t)s->n);
    memcpy(y, s->y, sizeof(int32_t) * (size_t)s->n);
    *n = s->n;
    return DTNN_OK;
}

void dtnn_loader_mix(const dtnn_loader *l, dtnn_batch_mix *mix)
{
    if (l->held && l->held->mix.kind != DTNN_MIX_NONE)
        *mix = l->held->mix;
    else
        *mix = (dtnn_batch_mix){.lam = 1.0f};
}

int64_t dtnn_loader_skipped(const dtnn_loader *l, char *paths, size_t len)
{
    if (paths && len) {
        paths[0] = '\0';
        size_t at = 0;
        for (int i = 0; i < l->n_first_bad && at < len; i++) {
            int w = snprintf(paths + at, len - at, "%s%s", i ? ", " : "", l->first_bad[i]);
            if (w < 0)
                break;
            at += (size_t)w;
        }
    }
    return l->skipped;
}
