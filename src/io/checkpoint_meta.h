/*
 * checkpoint_meta.h — a checkpoint's metadata, written and read strictly (checkpoint_meta.c),
 * for src/io/'s checkpoint files.
 */
#ifndef DTNN_CHECKPOINT_META_H
#define DTNN_CHECKPOINT_META_H

#include <stddef.h>
#include <stdint.h>

#include "dtnn.h"
#include "safetensors.h"

typedef struct {
    const char *keys[24];
    const char *values[24];
    char store[24][192];
    int n;
} meta_list;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void ckpt_meta_add(meta_list *ml, const char *key, const char *fmt, ...);
/* "a,b,c" with %.9g, so floats round-trip. */
void ckpt_floats_csv(char *buf, size_t len, const float *v, int n);
/* Metadata `key` as a strict decimal integer (at most max); an error naming the file when
 * it is missing or malformed. */
dtnn_status ckpt_meta_u64(const char *path, const st_file *f, const char *key, uint64_t max,
                          uint64_t *out, dtnn_error *err);
dtnn_status ckpt_meta_i64(const char *path, const st_file *f, const char *key, int64_t *out,
                          dtnn_error *err);
/* The epoch-end monitor's state ("monitor"); absent: a fresh monitor. */
dtnn_status ckpt_meta_monitor(const char *path, const st_file *f, dtnn_train_state *ts,
                              dtnn_error *err);
/* "a,b,c": 1 to 4 finite floats (positive ones when positive is set). */
dtnn_status ckpt_meta_floats(const char *path, const st_file *f, const char *key,
                             int positive, float *v, int *n, dtnn_error *err);

#endif
