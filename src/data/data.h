/*
 * data.h — limits shared by the dataset readers in src/data/. The readers themselves are public
 * (dtnn.h, "data" section); this header only states what the public prototypes cannot: how many
 * dimensions a caller's dims array must hold, and how the returned arrays are released.
 *
 * Arrays returned by dtnn_idx_load_* and dtnn_npy_load_* are 64-byte aligned and are released
 * with free() (dtnn__free_aligned is free()).
 */
#ifndef DTNN_DATA_H
#define DTNN_DATA_H

/* DTNN_NPY_MAX_DIMS (dtnn.h): dtnn_npy_load_f32 writes at most this many dims; larger arrays
 * are refused. [N, C, H, W] is the largest shape the library uses. */

/* Refuse files whose header promises more than this many elements: a corrupt header must
 * produce an error, not a multi-gigabyte allocation. 2^34 uint8 pixels = 64 GiB as float. */
#define DTNN_DATA_MAX_ELEMENTS ((int64_t)1 << 34)

#include "dtnn.h"

/* CIFAR in two passes, so that several files fill one array without copies: the records in
 * path (its size checked), then n of them read into x [n, 3, 32, 32] and y [n]. */
dtnn_status dtnn__cifar_count(const char *path, int classes, int64_t *n, dtnn_error *err);
dtnn_status dtnn__cifar_read(const char *path, int classes, int64_t n, float *x, int32_t *y,
                            dtnn_error *err);

/* An 8-bit image [c, h, w] (c 1 or 3) encoded as PNG into *out (malloc'd, *len bytes). */
dtnn_status dtnn__png_encode(const unsigned char *chw, int c, int h, int w, unsigned char **out,
                             size_t *len, dtnn_error *err);

#endif
