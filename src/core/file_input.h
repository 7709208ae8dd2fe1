/*
 * file_input.h — the one way libdtnn opens a file it reads (datasets, images, model files,
 * ONNX files, checkpoints): never blocking, and only a regular file. Outputs go through the
 * atomic writers (io/checkpoint_files.c, io/safetensors.c), not through this.
 */
#ifndef DTNN_FILE_INPUT_H
#define DTNN_FILE_INPUT_H

#include <stdint.h>
#include <stdio.h>

#include "dtnn.h"

/*
 * Opens path for reading. A FIFO, socket, device or directory is refused before a byte is
 * read: the open is non-blocking (a FIFO without a writer would otherwise block forever, and
 * a check after a blocking open comes too late), then fstat must show a regular file, then
 * reads are made blocking again. `what` names the file in messages ("model file", "ONNX
 * file"): "cannot open <what> '<path>': <reason>" and "<what> '<path>' is not a regular file
 * (a FIFO)". On success sets *out to the stream and, when size is not NULL, *size to the
 * file's size.
 */
dtnn_status file_open_input(const char *path, const char *what, FILE **out, int64_t *size,
                            dtnn_error *err);

/* What a file that is not a regular one is, for messages: "a directory", "a FIFO", "a socket",
 * "a character device", "a block device". */
const char *file_kind_name(unsigned mode);

/* The same as a file descriptor (for readers that hand it to zlib). */
dtnn_status file_open_input_fd(const char *path, const char *what, int *out, int64_t *size,
                               dtnn_error *err);

#endif
