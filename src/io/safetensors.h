/*
 * safetensors.h — reader and writer of the safetensors format (8-byte little-endian header
 * length, JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then
 * the raw little-endian data). Used for checkpoints and for the PyTorch reference files of the
 * tests. The reader validates everything (bounds, overlaps, dtype sizes vs shapes) before any
 * use, since a checkpoint is outside input.
 */
#ifndef DTNN_SAFETENSORS_H
#define DTNN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dtnn.h"

#define ST_MAX_DIMS 8
/* The metadata key of the file checksum the writer adds (see safetensors.c). */
#define ST_CRC_KEY "crc32c"

typedef struct {
    char *name;
    char dtype[8];          /* "F32", "I64", "I32", "U8", ... as in the file */
    int ndim;
    int64_t dims[ST_MAX_DIMS];
    size_t offset;          /* bytes into data */
    size_t bytes;
} st_tensor;

typedef struct {
    st_tensor *tensors;
    int n_tensors;
    unsigned char *data;    /* the data section */
    size_t data_bytes;
    char **meta_keys, **meta_values;
    int n_meta;
    int checksummed;        /* the file carried a "crc32c" entry and it matched */
} st_file;

dtnn_status st_read(const char *path, st_file *f, dtnn_error *err);
void st_free(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key);
/* Element count of a tensor (product of dims). */
size_t st_count(const st_tensor *t);

typedef struct {
    const char *name;
    const char *dtype;      /* "F32" or "I64" */
    int ndim;
    const int64_t *dims;
    const void *data;
    size_t bytes;
} st_entry;

/* Writes atomically: PATH.tmp.<pid> in the same folder, fsync, rename over PATH. Adds the
 * "crc32c" metadata entry (the caller may not use that key). */
dtnn_status st_write(const char *path, const st_entry *entries, int n,
                     const char *const *meta_keys, const char *const *meta_values, int n_meta,
                     dtnn_error *err);

#endif
