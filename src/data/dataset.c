/*
 * dataset.c — loads a whole dataset into memory by name: "fashion-mnist" and "mnist" (IDX files,
 * gzip or raw), "cifar10" and "cifar100" (the binary CIFAR files), "npy" (a folder of .npy
 * arrays) and "synthetic" (seeded random images for tests and benchmarks), then normalises it
 * per channel with statistics of the train split, as torchvision.transforms.Normalize does with
 * precomputed mean and std.
 *
 * Not here: augmentation, streaming from disk (image folders), sharding across ranks: those are
 * the loader's (loader.c). Everything is loaded once; Fashion-MNIST is 220 MB as float, CIFAR
 * 737 MB.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "core/rng.h"
#include "data/data.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define MNIST_DIR "/usr/share/datasets/mnist"
#define DATA_PATH_MAX 4096
/* A label this large means a corrupt file, not a classifier with that many outputs. */
#define DATA_MAX_CLASSES (1 << 24)

void dtnn_data_params_default(dtnn_data_params *p)
{
    memset(p, 0, sizeof *p);
    p->name = "fashion-mnist";
    p->dir = NULL;
    p->normalize = -1;
    p->synthetic_n = 4096;
    p->c = 3;
    p->h = 32;
    p->w = 32;
    p->classes = 10;
    p->seed = 1;
}

void dtnn_dataset_free(dtnn_dataset *d)
{
    if (!d)
        return;
    dtnn__free_aligned(d->train.x);
    dtnn__free_aligned(d->train.y);
    dtnn__free_aligned(d->test.x);
    dtnn__free_aligned(d->test.y);
    memset(d, 0, sizeof *d);
}

static dtnn_status join_path(char *out, const char *dir, const char *file, dtnn_error *err)
{
    int n = snprintf(out, DATA_PATH_MAX, "%s/%s", dir, file);
    if (n < 0 || n >= DATA_PATH_MAX)
        return dtnn_error_set(err, DTNN_ERR_ARG, "path too long: %s/%s", dir, file);
    return DTNN_OK;
}

/* 0 when path exists; otherwise the errno of stat(). */
static int path_errno(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? 0 : (errno ? errno : ENOENT);
}

/* Raises *classes to the largest label + 1 of a split; a bad label names its file. */
static dtnn_status labels_max(const int32_t *y, int64_t n, const char *path, int *classes,
                              dtnn_error *err)
{
    for (int64_t i = 0; i < n; i++) {
        if (y[i] < 0)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: label %d at index %lld is negative",
                                  path, (int)y[i], (long long)i);
        if (y[i] >= DATA_MAX_CLASSES)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: label %d at index %lld is not a "
                                  "plausible class (limit %d)", path, (int)y[i], (long long)i,
                                  DATA_MAX_CLASSES - 1);
        if (y[i] >= *classes)
            *classes = y[i] + 1;
    }
    return DTNN_OK;
}

/* ---- IDX (MNIST, Fashion-MNIST) ----------------------------------------------------------- */

/* Picks dir/base.gz, or dir/base when only the uncompressed file is there. */
static dtnn_status idx_find(char *out, const char *dir, const char *base, const char *hint,
                            dtnn_error *err)
{
    char gz[256];
    snprintf(gz, sizeof gz, "%s.gz", base);
    dtnn_status st = join_path(out, dir, gz, err);
    if (st != DTNN_OK)
        return st;
    int e = path_errno(out);
    if (e == 0)
        return DTNN_OK;
    char raw[DATA_PATH_MAX];
    if ((st = join_path(raw, dir, base, err)) != DTNN_OK)
        return st;
    if (path_errno(raw) == 0) {
        memcpy(out, raw, strlen(raw) + 1);
        return DTNN_OK;
    }
    return dtnn_error_set(err, DTNN_ERR_IO, "%s: %s (nor is there %s)%s", out, strerror(e), base,
                          hint);
}

/* One IDX split: images and labels with matching counts. */
static dtnn_status idx_split(dtnn_split *s, const char *dir, const char *images,
                             const char *labels, const char *hint, dtnn_error *err)
{
    char xpath[DATA_PATH_MAX], ypath[DATA_PATH_MAX];
    dtnn_status st = idx_find(xpath, dir, images, hint, err);
    if (st == DTNN_OK)
        st = idx_find(ypath, dir, labels, hint, err);
    if (st != DTNN_OK)
        return st;
    int64_t ny = 0;
    if ((st = dtnn_idx_load_images(xpath, &s->x, &s->n, &s->h, &s->w, err)) != DTNN_OK)
        return st;
    if ((st = dtnn_idx_load_labels(ypath, &s->y, &ny, err)) != DTNN_OK)
        return st;
    if (ny != s->n)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s has %lld images but %s has %lld labels",
                              xpath, (long long)s->n, ypath, (long long)ny);
    s->c = 1;
    return labels_max(s->y, s->n, ypath, &s->classes, err);
}

static dtnn_status load_idx(dtnn_dataset *d, const char *dir, dtnn_error *err)
{
    /* Only the Fashion-MNIST folder has a Debian package to point at. */
    const char *hint = "";
    if (!strcmp(dir, FMNIST_DIR))
        hint = "; install the Debian package dataset-fashion-mnist";
    dtnn_status st = idx_split(&d->train, dir, "train-images-idx3-ubyte",
                               "train-labels-idx1-ubyte", hint, err);
    if (st == DTNN_OK)
        st = idx_split(&d->test, dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", hint,
                       err);
    if (st != DTNN_OK)
        return st;
    if (d->test.h != d->train.h || d->test.w != d->train.w)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: test images are %dx%d but train images "
                              "are %dx%d", dir, d->test.h, d->test.w, d->train.h, d->train.w);
    return DTNN_OK;
}

/* ---- CIFAR-10 / CIFAR-100 ------------------------------------------------------------- */

/* Reads the files (all must be there and whole) into one split, in the order given. */
static dtnn_status cifar_split(dtnn_split *s, const char *dir, const char *const *files,
                               int nfiles, int classes, const char *expected, dtnn_error *err)
{
    char paths[8][DATA_PATH_MAX];
    int64_t counts[8], total = 0;
    DTNN_ASSERT(nfiles <= 8);
    for (int i = 0; i < nfiles; i++) {
        dtnn_status st = join_path(paths[i], dir, files[i], err);
        if (st)
            return st;
        int e = path_errno(paths[i]);
        if (e)
            return dtnn_error_set(err, DTNN_ERR_IO, "%s: %s; a CIFAR-%d folder holds %s (the "
                                  "binary version from https://www.cs.toronto.edu/~kriz/"
                                  "cifar.html; no Debian package ships it)", paths[i],
                                  strerror(e), classes, expected);
        if ((st = dtnn__cifar_count(paths[i], classes, &counts[i], err)))
            return st;
        total += counts[i];
    }
    s->n = total;
    s->c = 3;
    s->h = 32;
    s->w = 32;
    s->classes = classes;
    s->x = dtnn__alloc_aligned(sizeof(float) * 3 * 32 * 32 * (size_t)total);
    s->y = dtnn__alloc_aligned(sizeof(int32_t) * (size_t)total);
    if (!s->x || !s->y)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld CIFAR images",
                              dir, (long long)total);
    int64_t at = 0;
    for (int i = 0; i < nfiles; i++) {
        dtnn_status st = dtnn__cifar_read(paths[i], classes, counts[i],
                                         s->x + (size_t)at * 3 * 32 * 32, s->y + at, err);
        if (st)
            return st;
        at += counts[i];
    }
    return DTNN_OK;
}

static dtnn_status load_cifar(dtnn_dataset *d, const char *dir, int classes, dtnn_error *err)
{
    static const char *const train10[] = {"data_batch_1.bin", "data_batch_2.bin",
                                          "data_batch_3.bin", "data_batch_4.bin",
                                          "data_batch_5.bin"};
    static const char *const test10[] = {"test_batch.bin"};
    static const char *const train100[] = {"train.bin"};
    static const char *const test100[] = {"test.bin"};
    if (!dir)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dataset 'cifar%d' needs --data-dir, the folder "
                              "with %s", classes, classes == 10 ? "data_batch_1.bin .. "
                              "data_batch_5.bin and test_batch.bin" : "train.bin and test.bin");
    if (classes == 10) {
        const char *expected = "data_batch_1.bin .. data_batch_5.bin and test_batch.bin";
        dtnn_status st = cifar_split(&d->train, dir, train10, 5, 10, expected, err);
        return st ? st : cifar_split(&d->test, dir, test10, 1, 10, expected, err);
    }
    const char *expected = "train.bin and test.bin";
    dtnn_status st = cifar_split(&d->train, dir, train100, 1, 100, expected, err);
    return st ? st : cifar_split(&d->test, dir, test100, 1, 100, expected, err);
}

/* ---- npy folder ------------------------------------------------------------------------- */

static dtnn_status npy_split(dtnn_split *s, const char *dir, const char *xname,
                             const char *yname, dtnn_error *err)
{
    char xpath[DATA_PATH_MAX], ypath[DATA_PATH_MAX];
    dtnn_status st = join_path(xpath, dir, xname, err);
    if (st == DTNN_OK)
        st = join_path(ypath, dir, yname, err);
    if (st != DTNN_OK)
        return st;
    int64_t dims[DTNN_NPY_MAX_DIMS];
    int ndim = 0;
    if ((st = dtnn_npy_load_f32(xpath, &s->x, dims, &ndim, err)) != DTNN_OK)
        return st;
    if (ndim != 3 && ndim != 4)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: images must be [N, C, H, W] or "
                              "[N, H, W], got %d dims", xpath, ndim);
    int64_t c = ndim == 4 ? dims[1] : 1, h = dims[ndim - 2], w = dims[ndim - 1];
    if (c < 1 || h < 1 || w < 1 || c > INT32_MAX || h > INT32_MAX || w > INT32_MAX)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: sample shape %lldx%lldx%lld is empty or "
                              "too large", xpath, (long long)c, (long long)h, (long long)w);
    s->n = dims[0];
    s->c = (int)c;
    s->h = (int)h;
    s->w = (int)w;
    size_t total = (size_t)s->n * (size_t)(c * h * w);
    for (size_t i = 0; i < total; i++)
        if (!isfinite(s->x[i]))
            return dtnn_error_set(err, DTNN_ERR_NONFINITE, "%s: element %zu is %g", xpath, i,
                                  (double)s->x[i]);
    int64_t ny = 0;
    if ((st = dtnn_npy_load_labels(ypath, &s->y, &ny, err)) != DTNN_OK)
        return st;
    if (ny != s->n)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s has %lld images but %s has %lld labels",
                              xpath, (long long)s->n, ypath, (long long)ny);
    return labels_max(s->y, s->n, ypath, &s->classes, err);
}

static dtnn_status load_npy(dtnn_dataset *d, const char *dir, dtnn_error *err)
{
    dtnn_status st = npy_split(&d->train, dir, "train_x.npy", "train_y.npy", err);
    if (st != DTNN_OK)
        return st;
    if (d->train.n == 0)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s/train_x.npy: no samples", dir);
    char tx[DATA_PATH_MAX], ty[DATA_PATH_MAX];
    if ((st = join_path(tx, dir, "test_x.npy", err)) != DTNN_OK ||
        (st = join_path(ty, dir, "test_y.npy", err)) != DTNN_OK)
        return st;
    int has_x = path_errno(tx) == 0, has_y = path_errno(ty) == 0;
    if (!has_x && !has_y)
        return DTNN_OK;
    if (has_x != has_y)
        return dtnn_error_set(err, DTNN_ERR_IO, "%s exists but %s does not: give both or neither",
                              has_x ? tx : ty, has_x ? ty : tx);
    if ((st = npy_split(&d->test, dir, "test_x.npy", "test_y.npy", err)) != DTNN_OK)
        return st;
    if (d->test.c != d->train.c || d->test.h != d->train.h || d->test.w != d->train.w)
        return dtnn_error_set(err, DTNN_ERR_SHAPE, "%s: test samples are %dx%dx%d but train "
                              "samples are %dx%dx%d", tx, d->test.c, d->test.h, d->test.w,
                              d->train.c, d->train.h, d->train.w);
    return DTNN_OK;
}

/* ---- synthetic -------------------------------------------------------------------------- */

/* Each class has a fixed random template; a sample is 0.5 * template + sqrt(0.75) * noise, so
 * every pixel is N(0, 1) over the dataset while the classes stay separable: a model trained on
 * it must beat chance, which makes it a useful smoke test of training. */
static void synth_split(dtnn_split *s, dtnn_rng *r, const float *templates, int classes)
{
    size_t chw = (size_t)s->c * s->h * s->w;
    for (int64_t i = 0; i < s->n; i++) {
        int32_t label = (int32_t)dtnn__rng_below(r, (uint64_t)classes);
        s->y[i] = label;
        const float *t = templates + (size_t)label * chw;
        float *x = s->x + (size_t)i * chw;
        for (size_t j = 0; j < chw; j++)
            x[j] = (float)(0.5 * t[j] + 0.8660254037844386 * dtnn__rng_normal(r));
    }
}

static dtnn_status load_synthetic(dtnn_dataset *d, const dtnn_data_params *p, dtnn_error *err)
{
    if (p->synthetic_n < 1 || p->c < 1 || p->h < 1 || p->w < 1 || p->classes < 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "synthetic dataset: n=%lld c=%d h=%d w=%d "
                              "classes=%d must all be positive", (long long)p->synthetic_n,
                              p->c, p->h, p->w, p->classes);
    int64_t chw = (int64_t)p->c * p->h * p->w;
    int64_t n_test = p->synthetic_n / 4;
    if (chw > DTNN_DATA_MAX_ELEMENTS || (int64_t)p->classes > DTNN_DATA_MAX_ELEMENTS / chw ||
        p->synthetic_n + n_test > DTNN_DATA_MAX_ELEMENTS / chw)
        return dtnn_error_set(err, DTNN_ERR_ARG, "synthetic dataset: %lld samples of %dx%dx%d "
                              "is too large", (long long)p->synthetic_n, p->c, p->h, p->w);
    dtnn_split *sp[2] = {&d->train, &d->test};
    int64_t counts[2] = {p->synthetic_n, n_test};
    for (int k = 0; k < 2; k++) {
        dtnn_split *s = sp[k];
        s->n = counts[k];
        s->c = p->c;
        s->h = p->h;
        s->w = p->w;
        s->classes = p->classes;
        s->x = dtnn__alloc_aligned((size_t)(s->n * chw) * sizeof(float));
        s->y = dtnn__alloc_aligned((size_t)s->n * sizeof(int32_t));
        if (!s->x || !s->y)
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "synthetic dataset: out of memory for "
                                  "%lld samples of %dx%dx%d", (long long)s->n, p->c, p->h, p->w);
    }
    float *templates = malloc((size_t)(p->classes * chw) * sizeof(float));
    if (!templates)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "synthetic dataset: out of memory");
    dtnn_rng r;
    dtnn__rng_seed(&r, p->seed);
    for (int64_t i = 0; i < p->classes * chw; i++)
        templates[i] = (float)dtnn__rng_normal(&r);
    synth_split(&d->train, &r, templates, p->classes);
    synth_split(&d->test, &r, templates, p->classes);
    free(templates);
    return DTNN_OK;
}

/* ---- normalisation ---------------------------------------------------------------------- */

/* Mean and (population) std per channel of the train images, in double so that 47 million
 * pixels sum without drift; applied in float to both splits as (x - mean) / std, the same
 * arithmetic as torchvision's Normalize with the stored values. A constant channel keeps std 1
 * rather than dividing by zero. */
static dtnn_status normalize(dtnn_dataset *d, dtnn_error *err)
{
    const dtnn_split *tr = &d->train;
    if (tr->c > 4)
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: normalisation keeps statistics "
                              "for at most 4 channels, the images have %d (turn it off)", d->name,
                              tr->c);
    size_t hw = (size_t)tr->h * tr->w;
    double count = (double)tr->n * (double)hw;
    for (int ch = 0; ch < tr->c; ch++) {
        double sum = 0.0;
        for (int64_t i = 0; i < tr->n; i++) {
            const float *x = tr->x + ((size_t)i * tr->c + ch) * hw;
            for (size_t j = 0; j < hw; j++)
                sum += x[j];
        }
        double mean = sum / count, ss = 0.0;
        for (int64_t i = 0; i < tr->n; i++) {
            const float *x = tr->x + ((size_t)i * tr->c + ch) * hw;
            for (size_t j = 0; j < hw; j++)
                ss += (x[j] - mean) * (x[j] - mean);
        }
        double sd = sqrt(ss / count);
        if (!isfinite(mean) || !isfinite(sd))
            return dtnn_error_set(err, DTNN_ERR_NONFINITE, "%s: channel %d of the train images "
                                  "has non-finite statistics", d->name, ch);
        d->mean[ch] = (float)mean;
        d->std[ch] = sd > 0.0 && (float)sd > 0.0f ? (float)sd : 1.0f;
    }
    dtnn_split *sp[2] = {&d->train, &d->test};
    for (int k = 0; k < 2; k++) {
        dtnn_split *s = sp[k];
        for (int64_t i = 0; i < s->n; i++)
            for (int ch = 0; ch < s->c; ch++) {
                float m = d->mean[ch], sd = d->std[ch];
                float *x = s->x + ((size_t)i * s->c + ch) * hw;
                for (size_t j = 0; j < hw; j++)
                    x[j] = (x[j] - m) / sd;
            }
    }
    return DTNN_OK;
}

/* ---- entry point ------------------------------------------------------------------------ */

static dtnn_status dataset_load(dtnn_dataset *d, const dtnn_data_params *p, dtnn_error *err)
{
    const char *name = p->name ? p->name : "";
    if (p->normalize < -1 || p->normalize > 1)
        return dtnn_error_set(err, DTNN_ERR_ARG, "normalize must be -1 (default), 0 or 1, not %d",
                              p->normalize);
    if (strlen(name) >= sizeof d->name)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dataset name too long: %s", name);
    snprintf(d->name, sizeof d->name, "%s", name);
    for (int i = 0; i < 4; i++) {
        d->mean[i] = 0.0f;
        d->std[i] = 1.0f;
    }
    int norm_default;
    dtnn_status st;
    if (!strcmp(name, "fashion-mnist") || !strcmp(name, "mnist")) {
        const char *def = !strcmp(name, "mnist") ? MNIST_DIR : FMNIST_DIR;
        st = load_idx(d, p->dir ? p->dir : def, err);
        norm_default = 1;
    } else if (!strcmp(name, "cifar10") || !strcmp(name, "cifar100")) {
        st = load_cifar(d, p->dir, !strcmp(name, "cifar10") ? 10 : 100, err);
        norm_default = 1;
    } else if (!strcmp(name, "npy")) {
        if (!p->dir)
            return dtnn_error_set(err, DTNN_ERR_ARG, "dataset 'npy' needs a folder (dir) with "
                                  "train_x.npy and train_y.npy");
        st = load_npy(d, p->dir, err);
        norm_default = 0;
    } else if (!strcmp(name, "synthetic")) {
        st = load_synthetic(d, p, err);
        norm_default = 0;
    } else {
        return dtnn_error_set(err, DTNN_ERR_ARG, "unknown dataset '%s' (fashion-mnist, mnist, "
                              "cifar10, cifar100, npy, synthetic; image folders stream through "
                              "dtnn_loader_create_folder)", name);
    }
    if (st != DTNN_OK)
        return st;
    int classes = DTNN_MAX(d->train.classes, d->test.classes);
    d->train.classes = d->test.classes = classes;
    if (d->test.n == 0) {
        d->test.c = d->train.c;
        d->test.h = d->train.h;
        d->test.w = d->train.w;
    }
    if (p->normalize == 1 || (p->normalize == -1 && norm_default))
        return normalize(d, err);
    return DTNN_OK;
}

dtnn_status dtnn_dataset_load(dtnn_dataset *d, const dtnn_data_params *p, dtnn_error *err)
{
    if (!d)
        return dtnn_error_set(err, DTNN_ERR_ARG, "dtnn_dataset_load: dataset is NULL");
    memset(d, 0, sizeof *d);
    dtnn_data_params defaults;
    if (!p) {
        dtnn_data_params_default(&defaults);
        p = &defaults;
    }
    dtnn_status st = dataset_load(d, p, err);
    if (st != DTNN_OK)
        dtnn_dataset_free(d);
    return st;
}
