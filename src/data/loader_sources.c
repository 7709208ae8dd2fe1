/*
 * loader_sources.c — where a loader's samples come from (loader_internal.h): a split held in
 * memory, an image folder, or shards; one sample decoded and transformed (crops, flips,
 * TrivialAugment / RandAugment, erasing; the per-sample random stream keyed by (seed, epoch,
 * sample)); and the epoch's order of each.
 */
#include <string.h>

#include "data/autoaugment.h"
#include "data/loader_internal.h"

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

/* ---- one sample ------------------------------------------------------------------------- */

const char *dtnn__loader_sample_name(const dtnn_loader *l, int64_t k, char *buf, size_t len)
{
    if (l->shards) {
        shard_ref r;
        dtnn__shards_ref(l->shards, k, &r);
        snprintf(buf, len, "%s sample %d", l->shards->files[r.file].path, (int)r.index);
        return buf;
    }
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

/* An image of a folder or of shards decoded into wk->img; its label. */
static dtnn_status read_image(dtnn_loader *l, loader_worker *wk, int64_t k, int32_t *label,
                              dtnn_error *err)
{
    if (!l->shards) {
        *label = l->labels[k];
        return dtnn_image_read(l->list.paths[k], &wk->img, err);
    }
    size_t len;
    dtnn_status st = dtnn__shards_read(l->shards, &wk->shard, k, &wk->file, &wk->file_cap, &len,
                                       label, err);
    if (st)
        return st;
    char origin[600];
    return dtnn_image_decode(wk->file, len, dtnn__loader_sample_name(l, k, origin, sizeof origin),
                             &wk->img, err);
}

/* Decodes and transforms dataset sample k of epoch into out [c, h, w] and its label; key
 * names its random stream (the sample, and which of its repeats this is). */
static dtnn_status load_one(dtnn_loader *l, loader_worker *wk, int64_t epoch, int64_t k,
                            int64_t key, float *out, int32_t *label, dtnn_error *err)
{
    const unsigned aug = l->p.augment;
    dtnn_rng r;
    if (aug || l->p.random_erase > 0.0f)
        dtnn__augment_rng(&r, l->p.seed, epoch, key);
    if (l->split) {
        const float *src = l->split->x + (size_t)k * l->sample;
        *label = l->labels[k];
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
    dtnn_status st = read_image(l, wk, k, label, err);
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

dtnn_status dtnn__loader_produce(dtnn_loader *l, loader_worker *wk, int64_t epoch, int64_t pos,
                                 float *out, int32_t *label, int32_t *bad, int64_t *bad_first,
                                 dtnn_error *err)
{
    *bad = 0;
    *bad_first = -1;
    dtnn_error e = {0};
    for (int a = 0; a < LOADER_MAX_REPLACE && a < l->order_n; a++) {
        const int64_t q = (pos + a) % l->order_n, k = l->perm[q];
        /* a stream's samples repeat (resampled shards): its positions name the streams */
        const int64_t key = l->stream ? (int64_t)l->p.rank * l->order_n + q
                                      : k + q % l->reps * l->n;
        dtnn_status st = load_one(l, wk, epoch, k, key, out, label, &e);
        if (!st)
            return DTNN_OK;
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

/* The epoch's order: the permutation, each entry repeated reps times in a row and cut to n
 * (torchvision's RASampler before it deals the list out to ranks). */
dtnn_status dtnn__loader_epoch_order(dtnn_loader *l, int64_t epoch, dtnn_error *err)
{
    if (l->stream) {
        dtnn_status st = dtnn__shards_order(l->shards, l->p.seed, epoch, l->p.rank, l->p.ranks,
                                            l->order_n, l->p.shuffle_buffer, l->perm, err);
        if (st)
            return st;
    } else {
        dtnn_epoch_permutation(l->perm, l->n, l->p.seed, epoch, l->p.shuffle);
    }
    /* From the end down: entry q / reps <= q is read before it is overwritten. */
    for (int64_t q = l->order_n - 1; l->reps > 1 && q > 0; q--)
        l->perm[q] = l->perm[q / l->reps];
    return DTNN_OK;
}

dtnn_loader *dtnn_loader_create(const dtnn_dataset *d, int test_split,
                                const dtnn_loader_params *p, dtnn_error *err)
{
    dtnn_loader *l = dtnn__loader_alloc(p, err);
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
        st = dtnn__loader_finish(l, err);
    if (st) {
        dtnn_loader_free(l);
        return NULL;
    }
    return l;
}

/* The rest of creating a loader of encoded RGB images (a folder's or shards'): decoded to
 * image_size, normalised with ImageNet's mean and std. */
static dtnn_loader *encoded_images(dtnn_loader *l, int64_t n, int classes, const char *name,
                                   dtnn_error *err)
{
    l->n = n;
    l->c = 3;
    l->h = l->w = l->p.image_size;
    l->classes = classes;
    l->resize = (int)(((int64_t)l->p.image_size * 256 + 112) / 224);
    snprintf(l->name, sizeof l->name, "%s", name);
    for (int c = 0; c < 3; c++) {
        l->mean[c] = imagenet_mean[c];
        l->std[c] = imagenet_std[c];
    }
    if (dtnn__loader_finish(l, err)) {
        dtnn_loader_free(l);
        return NULL;
    }
    return l;
}

/* The start of a loader of encoded images: dir and split ("train" or "val") given, params
 * checked, the image size in range; NULL with err set otherwise. */
static dtnn_loader *encoded_start(const char *what, const char *dir, const char *split,
                                  const dtnn_loader_params *p, dtnn_error *err)
{
    if (!dir || !split || (strcmp(split, "train") && strcmp(split, "val"))) {
        dtnn_error_set(err, DTNN_ERR_ARG, "%s: give a folder and the split train or val, not "
                       "'%s'", what, split ? split : "(null)");
        return NULL;
    }
    dtnn_loader *l = dtnn__loader_alloc(p, err);
    if (l && (l->p.image_size < 8 || l->p.image_size > 4096)) {
        dtnn_error_set(err, DTNN_ERR_ARG, "image size %d must be in [8, 4096]",
                       l->p.image_size);
        dtnn_loader_free(l);
        return NULL;
    }
    return l;
}

dtnn_loader *dtnn_loader_create_folder(const char *dir, const char *split,
                                       const dtnn_loader_params *p, dtnn_error *err)
{
    dtnn_loader *l = encoded_start("image folder", dir, split, p, err);
    if (!l)
        return NULL;
    dtnn_status st = DTNN_OK;
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
    return encoded_images(l, l->list.n, l->list.classes, "imagefolder", err);
}

dtnn_loader *dtnn_loader_create_shards(const char *dir, const char *split,
                                       const dtnn_loader_params *p, dtnn_error *err)
{
    dtnn_loader *l = encoded_start("shards", dir, split, p, err);
    if (!l)
        return NULL;
    dtnn_status st = DTNN_OK;
    if (l->p.shuffle_buffer < 0)
        st = dtnn_error_set(err, DTNN_ERR_ARG, "shuffle buffer %d must not be negative",
                            l->p.shuffle_buffer);
    if (!st && !(l->shards = calloc(1, sizeof *l->shards)))
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for a loader");
    if (!st && (st = dtnn__shards_open(l->shards, dir, split, err))) {
        free(l->shards);
        l->shards = NULL;
    }
    /* Evaluation's file order reads every shard: their tables now, before threads run. */
    if (!st && !l->p.shuffle)
        st = dtnn__shards_scan_all(l->shards, err);
    if (st) {
        dtnn_loader_free(l);
        return NULL;
    }
    return encoded_images(l, l->shards->n, l->shards->classes, "shards", err);
}

