/*
 * cifar.c — reader for the binary CIFAR-10 and CIFAR-100 files of
 * https://www.cs.toronto.edu/~kriz/cifar.html. A CIFAR-10 record is one label byte and 3072
 * pixel bytes (the R, G and B planes of a 32x32 image, rows top to bottom); a CIFAR-100 record
 * has a coarse and a fine label byte first, and the fine label (100 classes) is the one used.
 * The planes are already CHW, so pixels become floats in [0, 1] without reordering.
 *
 * Strict on purpose: a file whose size is not a whole number of records (a truncated
 * download) or a label out of range is an error that names the file, never a smaller dataset.
 * Folders and normalisation are dataset.c's business.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file_input.h"
#include "core/internal.h"
#include "data/data.h"

#define CIFAR_PIXELS 3072
#define CIFAR_RECORDS_PER_READ 512

/* Bytes of one record; the label used is the byte just before the pixels. */
static int record_bytes(int classes)
{
    return classes == 100 ? CIFAR_PIXELS + 2 : CIFAR_PIXELS + 1;
}

dtnn_status dtnn__cifar_count(const char *path, int classes, int64_t *n, dtnn_error *err)
{
    if (classes != 10 && classes != 100)
        return dtnn_error_set(err, DTNN_ERR_ARG, "CIFAR has 10 or 100 classes, not %d", classes);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return dtnn_error_set(err, DTNN_ERR_IO, "%s: not a regular file", path);
    const int64_t rec = record_bytes(classes), size = (int64_t)sb.st_size;
    if (size == 0 || size % rec)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %lld bytes is not a whole number of "
                              "CIFAR-%d records of %lld bytes (truncated or not CIFAR-%d?)", path,
                              (long long)size, classes, (long long)rec, classes);
    if (size / rec > DTNN_DATA_MAX_ELEMENTS / CIFAR_PIXELS)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %lld bytes is too large for CIFAR",
                              path, (long long)size);
    *n = size / rec;
    return DTNN_OK;
}

dtnn_status dtnn__cifar_read(const char *path, int classes, int64_t n, float *x, int32_t *y,
                            dtnn_error *err)
{
    const int rec = record_bytes(classes);
    FILE *f;
    dtnn_status opened = file_open_input(path, "CIFAR file", &f, NULL, err);
    if (opened)
        return opened;
    unsigned char *buf = malloc((size_t)rec * CIFAR_RECORDS_PER_READ);
    dtnn_status st = DTNN_OK;
    if (!buf)
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < n && !st;) {
        size_t want = (size_t)DTNN_MIN((int64_t)CIFAR_RECORDS_PER_READ, n - i);
        size_t got = fread(buf, (size_t)rec, want, f);
        if (got != want) {
            st = dtnn_error_set(err, ferror(f) ? DTNN_ERR_IO : DTNN_ERR_FORMAT,
                                "%s: %s after %lld of %lld records", path,
                                ferror(f) ? strerror(errno) : "file shrank while reading",
                                (long long)(i + (int64_t)got), (long long)n);
            break;
        }
        for (size_t r = 0; r < got; r++, i++) {
            const unsigned char *p = buf + r * (size_t)rec;
            int label = p[rec - CIFAR_PIXELS - 1];
            if (label >= classes) {
                st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: record %lld has label %d, "
                                    "CIFAR-%d labels are 0 to %d", path, (long long)i, label,
                                    classes, classes - 1);
                break;
            }
            y[i] = label;
            float *xi = x + (size_t)i * CIFAR_PIXELS;
            const unsigned char *px = p + rec - CIFAR_PIXELS;
            for (int j = 0; j < CIFAR_PIXELS; j++)
                xi[j] = (float)px[j] / 255.0f;
        }
    }
    free(buf);
    fclose(f);
    return st;
}

dtnn_status dtnn_cifar_load(const char *path, int classes, float **x, int32_t **y, int64_t *n,
                            dtnn_error *err)
{
    *x = NULL;
    *y = NULL;
    dtnn_status st = dtnn__cifar_count(path, classes, n, err);
    if (st)
        return st;
    *x = dtnn__alloc_aligned(sizeof(float) * CIFAR_PIXELS * (size_t)*n);
    *y = dtnn__alloc_aligned(sizeof(int32_t) * (size_t)*n);
    if (!*x || !*y)
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %lld images", path,
                            (long long)*n);
    if (!st)
        st = dtnn__cifar_read(path, classes, *n, *x, *y, err);
    if (st) {
        dtnn__free_aligned(*x);
        dtnn__free_aligned(*y);
        *x = NULL;
        *y = NULL;
    }
    return st;
}
