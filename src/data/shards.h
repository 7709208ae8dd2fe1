/*
 * shards.h — a sharded dataset (shards.c): WebDataset-style tar shards (tar.h) of one split,
 * listed by dtnn's index (DIR/index.json, written by `dtnn shard`) or found by name
 * (DIR/<split>-NNN.tar, or every .tar file of DIR for train), and the order a rank reads them in:
 *  - training: each epoch the shards are permuted and dealt out to the ranks (shard i of the
 *    permutation to rank i mod R); a rank streams its own shards' samples and, when they run
 *    out before its share of the epoch's steps, shards drawn at random from all of them
 *    (WebDataset's resampling), through a shuffle buffer; every draw keyed by (seed, epoch,
 *    rank), so a resume recomputes the same order;
 *  - evaluation: the shards in name order as one list, of which each rank takes its part of
 *    every global batch, as for an image folder.
 * A shard's table of samples is read from its headers when a rank first needs it.
 */
#ifndef DTNN_SHARDS_H
#define DTNN_SHARDS_H

#include <stdatomic.h>

#include "data/tar.h"

typedef struct {
    char *path;
    int64_t n;              /* samples (the index's count until scanned) */
    tar_sample *table;      /* NULL until scanned */
} shard_file;

/* A sample: shard and its place in the shard's table. */
typedef struct {
    int32_t file;
    int32_t index;
} shard_ref;

typedef struct {
    shard_file *files;
    int nfiles;
    int64_t n;                      /* samples of the split */
    int classes;
    int64_t *first;                 /* [nfiles + 1]: the flat index of each shard's first */
    _Atomic int64_t bytes_read;     /* headers, classes and images read by this process */
} dtnn_shards;

/* Opens split ("train" or "val") of the sharded dataset in dir. */
dtnn_status dtnn__shards_open(dtnn_shards *s, const char *dir, const char *split,
                              dtnn_error *err);
void dtnn__shards_free(dtnn_shards *s);

/* Samples are named by their flat index: shard f's i-th is first[f] + i. */

/* Training order of a rank for an epoch: the flat indices of quota samples into order (the
 * tables it needs are read). buffer: the shuffle buffer's size (0 or 1: the stream's order). */
dtnn_status dtnn__shards_order(dtnn_shards *s, uint64_t seed, int64_t epoch, int rank,
                               int ranks, int64_t quota, int buffer, int64_t *order,
                               dtnn_error *err);
/* Every shard's table read (evaluation in file order reads all of them). */
dtnn_status dtnn__shards_scan_all(dtnn_shards *s, dtnn_error *err);
/* The shard and place of flat index k. */
void dtnn__shards_ref(const dtnn_shards *s, int64_t k, shard_ref *ref);

/* A reader's open shard: a stream reads its samples shard after shard, so one descriptor per
 * loader thread, kept until the next shard, saves an open and a close per image. Start from
 * {-1, -1}; dtnn__shards_close ends it. */
typedef struct {
    int fd;
    int file;
} shard_handle;
void dtnn__shards_close(shard_handle *h);

/* Reads sample k's image bytes into *buf (grown as needed) and its class through h; its
 * shard's table must have been read (by dtnn__shards_order or dtnn__shards_scan_all). */
dtnn_status dtnn__shards_read(dtnn_shards *s, shard_handle *h, int64_t k, unsigned char **buf,
                              size_t *cap, size_t *len, int32_t *label, dtnn_error *err);

#endif
