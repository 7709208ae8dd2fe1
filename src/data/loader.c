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
#include <signal.h>
#include <string.h>

#include "data/loader_internal.h"
#include "data/mix.h"

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
    p->shuffle_buffer = 1000;
}

/* Geometry of step s: global batch [s B, s B + len), this rank's [lo, hi) of it. */
static void slot_setup(dtnn_loader *l, loader_slot *s, int64_t epoch, int64_t step)
{
    /* A stream's batches are all full: its ranks' shards hold no fixed share of n. */
    const int64_t B = l->p.batch_size, start = step * B,
                  len = l->stream ? B : DTNN_MIN(B, l->n - start);
    const int r = l->p.rank, R = l->p.ranks;
    s->step = step;
    s->epoch = epoch;
    s->done_step = -1;
    s->global_n = len;
    s->start = start;
    s->lo = start + len * r / R;
    s->n = (int)(start + len * (r + 1) / R - s->lo);
    s->items = s->n + (l->mixing && s->n > 0 && !l->stream);
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
        return dtnn__loader_produce(l, wk, s->epoch, l->stream ? s->step * s->n + i : s->lo + i,
                                    s->x + (size_t)i * l->sample, &s->y[i], &s->bad[i],
                                    &s->bad_first[i], err);
    const int64_t pos = s->lo > s->start ? s->lo - 1 : s->start + s->global_n - 1;
    int32_t bad;
    int64_t bad_first;
    return dtnn__loader_produce(l, wk, s->epoch, pos, s->partner, &s->partner_y, &bad,
                                &bad_first, err);
}

/* MixUp or CutMix of a filled slot: the step's draws, the partners' labels, the images. */
static void mix_slot(const dtnn_loader *l, loader_slot *s)
{
    if (l->stream) {
        /* no other rank's sample to pair with: this rank's batch rolled, as per-rank MixUp */
        memcpy(s->partner, s->x + (size_t)(s->n - 1) * l->sample, sizeof(float) * l->sample);
        s->partner_y = s->y[s->n - 1];
    }
    dtnn__mix_draw(l->p.mixup_alpha, l->p.cutmix_alpha, l->p.seed, s->epoch, s->step, l->h,
                   l->w, &s->mix);
    s->mix.y2 = s->y2;
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
dtnn_status dtnn__loader_finish(dtnn_loader *l, dtnn_error *err)
{
    const dtnn_loader_params *p = &l->p;
    if (l->n < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: no samples", l->name);
    l->sample = (size_t)l->c * l->h * l->w;
    l->local_max = (int)((p->batch_size + p->ranks - 1) / p->ranks);
    l->steps_per_epoch = (l->n + p->batch_size - 1) / p->batch_size;
    l->stream = l->shards && p->shuffle;
    l->order_n = l->stream ? l->steps_per_epoch * (int64_t)(p->batch_size * (p->rank + 1) /
                                                            p->ranks - p->batch_size * p->rank /
                                                            p->ranks)
                           : l->n;
    if (l->order_n < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: rank %d of %d gets no sample of a batch of "
                              "%d", l->name, p->rank, p->ranks, p->batch_size);
    l->nthreads = p->threads;
    l->nslots = p->threads ? (p->prefetch ? p->prefetch : DTNN_MAX(2, p->threads)) + 1 : 1;
    l->perm = malloc(sizeof(int64_t) * (size_t)l->order_n);
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->workers = calloc((size_t)l->nthreads + 1, sizeof *l->workers);
    for (int i = 0; l->workers && i <= l->nthreads; i++)
        l->workers[i].shard = (shard_handle){-1, -1};     /* none open (0 is a descriptor) */
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

dtnn_loader *dtnn__loader_alloc(const dtnn_loader_params *p, dtnn_error *err)
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
            free(l->workers[i].file);
            dtnn__shards_close(&l->workers[i].shard);
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
    if (l->shards)
        dtnn__shards_free(l->shards);
    free(l->shards);
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

dtnn_status dtnn_loader_start(dtnn_loader *l, int64_t epoch, int64_t first, int64_t end,
                              dtnn_error *err)
{
    if (epoch < 0 || first < 0 || end > l->steps_per_epoch || first > end)
        return dtnn_error_set(err, DTNN_ERR_ARG, "%s: steps [%lld, %lld) of epoch %lld are not "
                              "within its %lld steps", l->name, (long long)first,
                              (long long)end, (long long)epoch, (long long)l->steps_per_epoch);
    pthread_mutex_lock(&l->mu);
    quiesce(l);
    dtnn_status st = dtnn__loader_epoch_order(l, epoch, err);
    if (st) {
        pthread_mutex_unlock(&l->mu);
        return st;
    }
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
        const char *name = dtnn__loader_sample_name(l, s->bad_first[i], buf, sizeof buf);
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
    l->held = NULL;
    dtnn_status st = dtnn__loader_epoch_order(l, epoch, err);
    if (st)
        return st;
    loader_slot *s = &l->slots[0];
    st = fill_now(l, s, epoch, step, err);
    if (st)
        return st;
    account(l, s);
    l->held = s;
    memcpy(x, s->x, sizeof(float) * l->sample * (size_t)s->n);
    memcpy(y, s->y, sizeof(int32_t) * (size_t)s->n);
    *n = s->n;
    return DTNN_OK;
}

int64_t dtnn_loader_bytes_read(const dtnn_loader *l)
{
    return l->shards ? atomic_load(&l->shards->bytes_read) : 0;
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
