/*
 * tar.h — the tar archives of sharded datasets (tar.c): reading a shard's table of samples
 * (WebDataset's convention: consecutive members sharing a key, the name up to the first dot
 * of its last component, form one sample; `key.jpg` / `.jpeg` / `.png` is its image and
 * `key.cls` its class as decimal text) and writing members in POSIX ustar.
 *
 * Reading trusts nothing: every header's checksum is checked, sizes are bounded by the file,
 * pax ('x') and GNU long-name ('L') records give the next member's name, other entries
 * (directories, links, global pax records) are stepped over, and a sample without an image or
 * a class is a format error naming the shard and the key.
 */
#ifndef DTNN_TAR_H
#define DTNN_TAR_H

#include <stdint.h>
#include <stdio.h>

#include "dtnn.h"

/* One sample of a shard: where its image's bytes are and its class. */
typedef struct {
    uint64_t offset;
    uint32_t size;
    int32_t label;
} tar_sample;

/* The samples of the shard at path in archive order (*samples malloc'd, freed by the caller);
 * *bytes_read adds what reading the headers and classes took. */
dtnn_status dtnn__tar_scan(const char *path, tar_sample **samples, int64_t *n,
                           int64_t *bytes_read, dtnn_error *err);

/* Appends a regular file member `name` (under 100 bytes) of n bytes to an archive being
 * written, its data padded to the 512-byte block; mode 0644, owner 0, time 0, so the same
 * content gives the same archive. 0 on success, -1 when fp fails. */
int dtnn__tar_member(FILE *fp, const char *name, const void *data, size_t n);
/* The two zero blocks that end an archive. */
int dtnn__tar_end(FILE *fp);

#endif
