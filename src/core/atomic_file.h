/*
 * atomic_file.h — the one way libdtnn writes a file (checkpoints, ONNX exports, traces, .npy
 * outputs, imported model files): the new content goes to a temporary file in the same folder,
 * is synced, and replaces the destination by a rename, so a reader sees the old file or the
 * new one, never half of one, and a failure or a kill leaves the old file as it was.
 *
 * Where the file system has O_TMPFILE (ext4, xfs, btrfs, tmpfs) the temporary has no name until
 * it is complete, so not even SIGKILL can leave one behind; elsewhere it is PATH.tmp.<pid>,
 * removed on every failure. The destination is replaced only when it is a regular file or
 * absent: a device, FIFO or folder by that name is refused (renaming over /dev/full's copy would
 * delete the node). A symbolic link is followed, so the link stays and its target is replaced.
 *
 * The training log (--log) is the one exception: it is appended to line by line while a run
 * goes, so that it can be followed (tail -f); it is checked like the others before the run.
 */
#ifndef DTNN_ATOMIC_FILE_H
#define DTNN_ATOMIC_FILE_H

#include <limits.h>
#include <stdio.h>

#include "dtnn.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

typedef struct {
    FILE *fp;                       /* write the content here */
    const char *what;               /* "checkpoint", "ONNX file", ...: for messages */
    char target[PATH_MAX];          /* the destination, symbolic links resolved */
    char tmp[PATH_MAX + 32];        /* the named temporary; empty when it has no name */
    int fd;
} atomic_file;

/* Checks, before any work, that path can be written as the command's `what`: its folder exists
 * and takes a new file, and the destination is absent or a regular file. */
dtnn_status atomic_file_check(const char *path, const char *what, dtnn_error *err);

/* Starts writing path: on success a->fp takes the content; end with atomic_file_commit or
 * atomic_file_abort. */
dtnn_status atomic_file_begin(atomic_file *a, const char *path, const char *what,
                              dtnn_error *err);

/* Flushes and syncs the content and puts it in place. On any failure the temporary is removed,
 * the destination is as it was, and err says why. Either way a is finished. */
dtnn_status atomic_file_commit(atomic_file *a, dtnn_error *err);

/* Drops the content: the destination is as it was. */
void atomic_file_abort(atomic_file *a);

/* The whole of a file in one call: begin, write n bytes, commit. */
dtnn_status atomic_file_write(const char *path, const char *what, const void *data, size_t n,
                              dtnn_error *err);

#endif
