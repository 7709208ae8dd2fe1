/*
 * checkpoint_files.h — checks and rotation of checkpoint files on disk (checkpoint_files.c):
 * what the trainer does around dtnn_checkpoint_save, never inside a file. The same file
 * defines the public dtnn_checkpoint_newest (dtnn.h), which knows the kept copies' names.
 */
#ifndef DTNN_CHECKPOINT_FILES_H
#define DTNN_CHECKPOINT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "dtnn.h"

/* DTNN_OK when a file can be created beside path and its file system has `bytes` free; else
 * DTNN_ERR_IO with a message naming `what` ("checkpoint"), path and the space missing. */
dtnn_status ckpt_check_writable(const char *path, const char *what, size_t bytes,
                                dtnn_error *err);
/* The bytes a checkpoint of m with opt's state takes on disk, header included (an estimate
 * from above). */
size_t ckpt_estimate_bytes(dtnn_model *m, const dtnn_optimizer *opt);
/* Keeps the checkpoint just written at path as the copy of step `step` (a hard link: see
 * checkpoint_files.c for the name), then removes all but the `keep` newest such copies. */
dtnn_status ckpt_keep_copy(const char *path, int64_t step, int keep, dtnn_error *err);

#endif
